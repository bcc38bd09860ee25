/* mo_journal: a bounded ring of the requests received on the API port. */
#include "mo_journal.h"

#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "xalloc.h"

typedef struct {
    uint64_t seq;
    uint64_t time_ms;
    uint64_t answered_ms;
    int status; /* 0: not answered (yet) */
    char *method, *path;
    cJSON *query; /* object */
    char *body;   /* NULL: empty */
    size_t body_len;
    bool body_truncated;
    const char *fault; /* static kind name, or NULL */
    char *note;
} entry;

struct mo_journal {
    entry *ring;
    size_t cap, head, len;
    uint64_t next_seq;
    unsigned long dropped;
};

static void entry_free(entry *e)
{
    free(e->method);
    free(e->path);
    cJSON_Delete(e->query);
    free(e->body);
    free(e->note);
    memset(e, 0, sizeof *e);
}

mo_journal *mo_journal_new(size_t limit)
{
    if (limit < 1)
        limit = 1;
    if (limit > MO_JOURNAL_LIMIT_MAX)
        limit = MO_JOURNAL_LIMIT_MAX;
    mo_journal *j = xcalloc(1, sizeof *j);
    j->cap = limit;
    j->ring = xcalloc(limit, sizeof *j->ring);
    j->next_seq = 1;
    return j;
}

void mo_journal_clear(mo_journal *j)
{
    for (size_t i = 0; i < j->len; i++)
        entry_free(&j->ring[(j->head + i) % j->cap]);
    j->head = j->len = 0;
}

void mo_journal_free(mo_journal *j)
{
    if (!j)
        return;
    mo_journal_clear(j);
    free(j->ring);
    free(j);
}

/* Copies s replacing each byte that is not part of valid UTF-8 with '?', so
 * that the journal always prints as valid JSON. */
static char *utf8_sanitized(const char *s, size_t n)
{
    char *out = xmalloc(n + 1);
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80            ? 1
                     : (c & 0xE0) == 0xC0 ? 2
                     : (c & 0xF0) == 0xE0 ? 3
                     : (c & 0xF8) == 0xF0 ? 4
                                          : 0;
        bool ok = len > 0 && c != 0 && c != 0xC0 && c != 0xC1 && c <= 0xF4 && i + len <= n;
        for (size_t k = 1; ok && k < len; k++)
            ok = ((unsigned char)s[i + k] & 0xC0) == 0x80;
        if (ok) {
            memcpy(out + i, s + i, len);
            i += len;
        } else {
            out[i++] = '?';
        }
    }
    out[n] = '\0';
    return out;
}

static entry *find(const mo_journal *j, uint64_t seq)
{
    if (j->len == 0)
        return NULL;
    uint64_t first = j->ring[j->head].seq;
    if (seq < first || seq >= first + j->len)
        return NULL;
    return &j->ring[(j->head + (size_t)(seq - first)) % j->cap];
}

uint64_t mo_journal_add(mo_journal *j, uint64_t time_ms, const mo_request *req)
{
    if (j->len == j->cap) {
        entry_free(&j->ring[j->head]);
        j->head = (j->head + 1) % j->cap;
        j->len--;
        j->dropped++;
    }
    entry *e = &j->ring[(j->head + j->len) % j->cap];
    j->len++;
    e->seq = j->next_seq++;
    e->time_ms = time_ms;
    e->method = utf8_sanitized(req->method, strlen(req->method));
    e->path = utf8_sanitized(req->path, strlen(req->path));
    e->query = cJSON_CreateObject();
    for (size_t i = 0; i < req->nparams; i++) {
        const mo_param *p = &req->params[i];
        char *k = utf8_sanitized(p->key, strlen(p->key));
        cJSON *v;
        if (p->value) {
            char *sv = utf8_sanitized(p->value, strlen(p->value));
            v = cJSON_CreateString(sv);
            free(sv);
        } else {
            v = cJSON_CreateNull();
        }
        /* A repeated key collects its values in a list. */
        cJSON *old = jsonx_get(e->query, k);
        if (!old) {
            cJSON_AddItemToObject(e->query, k, v);
        } else if (cJSON_IsArray(old)) {
            cJSON_AddItemToArray(old, v);
        } else {
            cJSON *list = cJSON_CreateArray();
            cJSON_AddItemToArray(list, jsonx_dup(old));
            cJSON_AddItemToArray(list, v);
            cJSON_ReplaceItemInObjectCaseSensitive(e->query, k, list);
        }
        free(k);
    }
    if (req->body_len > 0) {
        e->body_truncated = req->body_len > MO_JOURNAL_BODY_MAX;
        e->body_len = e->body_truncated ? MO_JOURNAL_BODY_MAX : req->body_len;
        e->body = xmalloc(e->body_len + 1);
        memcpy(e->body, req->body, e->body_len);
        e->body[e->body_len] = '\0';
    }
    return e->seq;
}

void mo_journal_set_fault(mo_journal *j, uint64_t seq, const char *fault)
{
    entry *e = find(j, seq);
    if (e)
        e->fault = fault;
}

void mo_journal_set_answer(mo_journal *j, uint64_t seq, int status, uint64_t time_ms,
                           const char *note)
{
    entry *e = find(j, seq);
    if (!e)
        return;
    e->status = status;
    e->answered_ms = time_ms;
    free(e->note);
    e->note = note ? xstrdup(note) : NULL;
}

static cJSON *body_json(const entry *e)
{
    if (!e->body)
        return cJSON_CreateNull();
    if (!e->body_truncated) {
        char err[8];
        cJSON *tree = jsonx_parse(e->body, e->body_len, err, sizeof err);
        if (tree)
            return tree;
    }
    char *s = utf8_sanitized(e->body, e->body_len);
    cJSON *str = cJSON_CreateString(s);
    free(s);
    return str;
}

cJSON *mo_journal_to_json(const mo_journal *j, uint64_t since)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < j->len; i++) {
        const entry *e = &j->ring[(j->head + i) % j->cap];
        if (e->seq < since)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "seq", jsonx_new_i64((int64_t)e->seq));
        cJSON_AddItemToObject(o, "time_ms", jsonx_new_i64((int64_t)e->time_ms));
        cJSON_AddStringToObject(o, "method", e->method);
        cJSON_AddStringToObject(o, "path", e->path);
        cJSON_AddItemToObject(o, "query", jsonx_dup(e->query));
        cJSON_AddItemToObject(o, "body", body_json(e));
        if (e->body_truncated)
            cJSON_AddBoolToObject(o, "body_truncated", true);
        bool answered = e->status > 0;
        cJSON_AddItemToObject(o, "status",
                              answered ? jsonx_new_i64(e->status) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "answered_ms", answered ? jsonx_new_i64((int64_t)e->answered_ms)
                                                         : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "fault",
                              e->fault ? cJSON_CreateString(e->fault) : cJSON_CreateNull());
        if (e->note)
            cJSON_AddStringToObject(o, "note", e->note);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

size_t mo_journal_count(const mo_journal *j)
{
    return j->len;
}

unsigned long mo_journal_dropped(const mo_journal *j)
{
    return j->dropped;
}
