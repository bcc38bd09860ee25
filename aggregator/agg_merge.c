/* agg_merge: merging learners' results and splitting learn data. */
#include "agg_merge.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "xalloc.h"

/* ---- merge ---- */

/* The key path of the values being merged, as a chain up to the top (NULL),
 * kept on the stack: it is only rendered when there is an error. */
typedef struct keypath {
    const struct keypath *up;
    const char *key;
} keypath;

typedef struct {
    const char *const *names;
    char *err;
    size_t errlen;
} merger;

/* Keys whose value is the first learner's, not a merge (the reference's
 * "homogeneous keys"). */
static bool first_learner_key(const char *key)
{
    static const char *const keys[] = {"learner_step", "buffer_id", "task_id", "learner_done"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (strcmp(key, keys[i]) == 0)
            return true;
    return false;
}

static void render_path(const keypath *at, xbuf *b)
{
    if (!at)
        return;
    render_path(at->up, b);
    if (at->up)
        xbuf_puts(b, ".");
    xbuf_puts(b, at->key);
}

/* "a list", "an object", "null", "no value" (NULL) for messages. */
static const char *with_article(const cJSON *item, bool missing)
{
    if (missing)
        return "no value";
    if (!item)
        return "null"; /* a NULL value counts as JSON null */
    return jsonx_type_phrase(item);
}

static void put_name(const merger *m, size_t i, xbuf *b)
{
    if (m->names && m->names[i])
        xbuf_puts(b, m->names[i]);
    else
        xbuf_printf(b, "#%zu", i);
}

/* "cannot merge results: at key path 'a.b' learner 'x'" (no key path at
 * the top). */
static void start_message(const merger *m, const keypath *at, size_t i, xbuf *b)
{
    xbuf_puts(b, "cannot merge results: ");
    if (at) {
        xbuf_puts(b, "at key path '");
        render_path(at, b);
        xbuf_puts(b, "' ");
    }
    xbuf_puts(b, "learner '");
    put_name(m, i, b);
    xbuf_puts(b, "'");
}

/* Writes into err what learner i has at `at` (got, or nothing if missing)
 * where learner 0 has want. */
static void mismatch(const merger *m, const keypath *at, size_t i, const cJSON *got, bool missing,
                     const cJSON *want)
{
    if (!m->err || !m->errlen)
        return;
    xbuf b = {0};
    start_message(m, at, i, &b);
    xbuf_printf(&b, " has %s where '", with_article(got, missing));
    put_name(m, 0, &b);
    xbuf_printf(&b, "' has %s", with_article(want, false));
    snprintf(m->err, m->errlen, "%s", b.data);
    xbuf_free(&b);
}

/* cJSON reports allocation failure as NULL; the project's policy (xalloc)
 * is to abort. */
static cJSON *made(cJSON *item)
{
    if (!item) {
        fprintf(stderr, "fatal: out of memory (cJSON)\n");
        abort();
    }
    return item;
}

/* A copy to put in a list: without the member name it may carry. */
static cJSON *dup_value(const cJSON *item)
{
    cJSON *d = made(item ? jsonx_dup(item) : cJSON_CreateNull());
    if (d->string && !(d->type & cJSON_StringIsConst))
        cJSON_free(d->string);
    d->string = NULL;
    d->type &= ~cJSON_StringIsConst;
    return d;
}

static bool is_list(const cJSON *item)
{
    return cJSON_IsArray(item);
}

static bool is_object(const cJSON *item)
{
    return cJSON_IsObject(item);
}

static cJSON *merge_values(const merger *m, const cJSON *const *v, size_t n, const keypath *at);

/* The reference returns the list itself for null and scalars. */
static cJSON *list_of(const cJSON *const *v, size_t n)
{
    cJSON *out = made(cJSON_CreateArray());
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(out, dup_value(v[i]));
    return out;
}

static cJSON *concat_lists(const merger *m, const cJSON *const *v, size_t n, const keypath *at)
{
    for (size_t i = 1; i < n; i++)
        if (!is_list(v[i]))
            return mismatch(m, at, i, v[i], false, v[0]), NULL;
    cJSON *out = made(cJSON_CreateArray());
    for (size_t i = 0; i < n; i++)
        for (const cJSON *c = v[i]->child; c; c = c->next)
            cJSON_AddItemToArray(out, dup_value(c));
    return out;
}

/* The merged value of member `key` (of learner 0's object) across all. */
static cJSON *merge_member(const merger *m, const cJSON *const *v, size_t n, const cJSON *key,
                           const keypath *at, const cJSON **col)
{
    if (first_learner_key(key->string))
        return dup_value(key);
    keypath sub = {at, key->string};
    col[0] = key;
    for (size_t i = 1; i < n; i++) {
        col[i] = jsonx_get(v[i], key->string);
        if (!col[i])
            return mismatch(m, &sub, i, NULL, true, key), NULL;
    }
    return merge_values(m, col, n, &sub);
}

static cJSON *merge_objects(const merger *m, const cJSON *const *v, size_t n, const keypath *at)
{
    for (size_t i = 1; i < n; i++)
        if (!is_object(v[i]))
            return mismatch(m, at, i, v[i], false, v[0]), NULL;
    cJSON *out = made(cJSON_CreateObject());
    const cJSON **col = xmalloc(n * sizeof *col); /* one member's values */
    for (const cJSON *key = v[0]->child; key; key = key->next) {
        cJSON *val = merge_member(m, v, n, key, at, col);
        if (!val) {
            cJSON_Delete(out);
            out = NULL;
            break;
        }
        if (!cJSON_AddItemToObject(out, key->string, val))
            made(NULL); /* copying the key failed */
    }
    free(col);
    return out;
}

/* A Raw item that is not a number holds unparsed text; merging it as a
 * scalar would silently give a wrong shape for a list or an object. */
static bool refuse_raw(const merger *m, const cJSON *const *v, size_t n, const keypath *at)
{
    for (size_t i = 0; i < n; i++) {
        const char *t = v[i] && cJSON_IsRaw(v[i]) ? jsonx_type_name(v[i]) : "";
        if (strcmp(t, "list") != 0 && strcmp(t, "object") != 0)
            continue;
        if (m->err && m->errlen) {
            xbuf b = {0};
            start_message(m, at, i, &b);
            xbuf_puts(&b, " has unparsed JSON text (merge needs full trees)");
            snprintf(m->err, m->errlen, "%s", b.data);
            xbuf_free(&b);
        }
        return true;
    }
    return false;
}

static cJSON *merge_values(const merger *m, const cJSON *const *v, size_t n, const keypath *at)
{
    if (refuse_raw(m, v, n, at))
        return NULL;
    if (is_list(v[0]))
        return concat_lists(m, v, n, at);
    if (is_object(v[0]))
        return merge_objects(m, v, n, at);
    return list_of(v, n);
}

cJSON *agg_merge(cJSON *const *values, size_t n, const char *const *names, char *err,
                 size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (n == 0) {
        if (err && errlen)
            snprintf(err, errlen, "cannot merge results: no learner results");
        return NULL;
    }
    merger m = {names, err, errlen};
    return merge_values(&m, (const cJSON *const *)values, n, NULL);
}

/* ---- split ---- */

typedef struct {
    const size_t *demands;
    size_t n;
    size_t total;                /* sum of demands */
    xbuf *out;                   /* one per learner: room, then `head` and items so far */
    const char *head, *tail;     /* around each slice's items: "[" and "]" */
    size_t head_room, tail_room; /* bytes left free before and after each text */
    const char *ref_base;        /* the text that ref items point into, or NULL */
    size_t cur;                  /* the slice being filled */
    size_t used;                 /* items in out[cur] */
} splitter;

/* Puts item `index` into its slice; items past the demands are only
 * counted (the caller reports the count). */
static bool split_item(void *data, size_t index, const char *item, size_t len)
{
    splitter *s = data;
    if (index >= s->total)
        return true;
    while (s->used == s->demands[s->cur]) { /* skips zero demands too */
        s->cur++;
        s->used = 0;
    }
    if (s->used++)
        xbuf_append(&s->out[s->cur], ",", 1);
    xbuf_append(&s->out[s->cur], item, len);
    return true;
}

/* Starts slice i: a buffer with room for `items` bytes of items besides
 * the rooms, head and tail, holding the head room (blank: the caller
 * writes it) and the head. */
static void start_slice(splitter *s, size_t i, size_t items)
{
    size_t hl = strlen(s->head);
    s->out[i].cap = items + s->head_room + hl + strlen(s->tail) + s->tail_room + 1;
    s->out[i].data = xmalloc(s->out[i].cap);
    memset(s->out[i].data, ' ', s->head_room);
    memcpy(s->out[i].data + s->head_room, s->head, hl + 1);
    s->out[i].len = s->head_room + hl;
}

__attribute__((format(printf, 3, 4))) static int split_fail(char *err, size_t errlen,
                                                             const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* One item of a tree: its text, and the printed copy it may own. */
typedef struct {
    const char *text;
    size_t len;
    char *owned;
} piece;

/* Tree input: each item printed compactly; Raw items (a slave parsing
 * with raw_depth 2 leaves each learn data item so) are their text, measured
 * once; refs (jsonx_parse_refs) are their text in s->ref_base, not measured
 * at all. Every slice is sized exactly before anything is copied, so each
 * byte is copied once, into its final place. */
static long split_tree(const cJSON *arr, splitter *s, char *err, size_t errlen)
{
    long count = 0;
    for (const cJSON *c = arr->child; c; c = c->next)
        count++;
    size_t np = (size_t)count < s->total ? (size_t)count : s->total;
    piece *p = xcalloc(np ? np : 1, sizeof *p);
    size_t k = 0;
    size_t off, len;
    for (const cJSON *c = arr->child; c && k < np; c = c->next, k++) {
        if (jsonx_ref(c, &off, &len)) {
            if (!s->ref_base) {
                count = split_fail(err, errlen, "learn data item %zu refers to a text that was not given", k);
                break;
            }
            p[k].text = s->ref_base + off;
            p[k].len = len;
            continue;
        }
        if (cJSON_IsRaw(c) && c->valuestring) {
            p[k].text = c->valuestring;
        } else {
            p[k].owned = jsonx_print(c);
            p[k].text = p[k].owned;
        }
        p[k].len = strlen(p[k].text);
    }
    if (count >= 0 && (size_t)count == s->total) { /* else the caller reports the count */
        k = 0;
        for (size_t i = 0; i < s->n; i++) {
            size_t bytes = s->demands[i] ? s->demands[i] - 1 : 0; /* the commas */
            for (size_t j = 0; j < s->demands[i]; j++)
                bytes += p[k + j].len;
            start_slice(s, i, bytes);
            for (size_t j = 0; j < s->demands[i]; j++, k++)
                split_item(s, k, p[k].text, p[k].len);
        }
    }
    for (k = 0; k < np; k++)
        free(p[k].owned);
    free(p);
    return count;
}

/* Raw text input: each slice's buffer starts with room for about its
 * share of the text, so that 128 MiB batches are not copied over and over
 * as they grow. */
static void start_slices(splitter *s, size_t text_len)
{
    for (size_t i = 0; i < s->n; i++)
        start_slice(s, i, s->total ? (size_t)((double)text_len * (double)s->demands[i] / (double)s->total) : 0);
}

static int count_mismatch(const splitter *s, long count, char *err, size_t errlen)
{
    xbuf b = {0};
    for (size_t i = 0; i < s->n; i++)
        xbuf_printf(&b, "%s%zu", i ? "+" : "", s->demands[i]);
    split_fail(err, errlen, "learn data has %ld items but the learners asked for %zu (%s)", count,
               s->total, s->n ? b.data : "no learner");
    xbuf_free(&b);
    return -1;
}

/* Scans data into s's slices; returns the item count or -1 (err set). */
static long split_scan(const cJSON *data, splitter *s, char *err, size_t errlen)
{
    if (cJSON_IsArray(data))
        return split_tree(data, s, err, errlen);
    if (!data)
        return split_fail(err, errlen, "learn data is missing");
    if (!cJSON_IsRaw(data) || strcmp(jsonx_type_name(data), "list") != 0)
        return split_fail(err, errlen, "learn data is a JSON %s, not a list",
                          jsonx_type_name(data));
    size_t len = strlen(data->valuestring);
    start_slices(s, len);
    char jerr[200];
    long count = jsonx_array_items(data->valuestring, len, split_item, s, jerr, sizeof jerr);
    if (count < 0)
        return split_fail(err, errlen, "learn data is not a valid JSON list: %s", jerr);
    return count;
}

static int split_wrapped(const cJSON *data, const size_t *demands, size_t n, const char *head, const char *tail,
                         size_t head_room, size_t tail_room, const char *ref_base, char **slices, size_t *slice_lens,
                         char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    splitter s = {.demands = demands,
                  .n = n,
                  .out = xcalloc(n ? n : 1, sizeof(xbuf)),
                  .head = head,
                  .tail = tail,
                  .head_room = head_room,
                  .tail_room = tail_room,
                  .ref_base = ref_base};
    bool overflow = false;
    for (size_t i = 0; i < n; i++) {
        slices[i] = NULL;
        overflow |= s.total + demands[i] < s.total;
        s.total += demands[i];
    }
    long count =
        overflow ? split_fail(err, errlen, "the learners' demands overflow") : split_scan(data, &s, err, errlen);
    int rc = 0;
    if (count < 0)
        rc = -1;
    else if ((size_t)count != s.total)
        rc = count_mismatch(&s, count, err, errlen);
    for (size_t i = 0; i < n; i++) {
        if (rc == 0) {
            xbuf_puts(&s.out[i], tail);
            if (slice_lens)
                slice_lens[i] = s.out[i].len - head_room;
            /* The tail room and the NUL after the text (the buffer was
             * sized for them; a raw text split may have grown it). */
            if (s.out[i].cap < s.out[i].len + tail_room + 1) {
                s.out[i].cap = s.out[i].len + tail_room + 1;
                s.out[i].data = xrealloc(s.out[i].data, s.out[i].cap);
            }
            slices[i] = xbuf_take(&s.out[i]);
        }
        xbuf_free(&s.out[i]);
    }
    free(s.out);
    return rc;
}

int agg_split(const cJSON *data, const size_t *demands, size_t n, char **slices, size_t *slice_lens, char *err,
              size_t errlen)
{
    return split_wrapped(data, demands, n, "[", "]", 0, 0, NULL, slices, slice_lens, err, errlen);
}

static const char LEARN_HEAD[] = AGG_LEARN_HEAD;

int agg_split_learn_tasks(const cJSON *data, const size_t *demands, size_t n, char **tasks, size_t *task_lens,
                          char *err, size_t errlen)
{
    return split_wrapped(data, demands, n, LEARN_HEAD, AGG_LEARN_TAIL, 0, 0, NULL, tasks, task_lens, err, errlen);
}

int agg_split_learn_tasks_framed(const cJSON *data, const char *ref_base, const size_t *demands, size_t n,
                                 size_t head_room, size_t tail_room, char **tasks, size_t *task_lens, char *err,
                                 size_t errlen)
{
    return split_wrapped(data, demands, n, LEARN_HEAD, AGG_LEARN_TAIL, head_room, tail_room, ref_base, tasks,
                         task_lens, err, errlen);
}

static bool is_json_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Whether text[from, to) is what may separate two neighbour items of a
 * list: white space, one comma, white space. A few bytes as a rule. */
static bool item_gap(const char *text, size_t from, size_t to)
{
    while (from < to && is_json_space(text[from]))
        from++;
    if (from == to || text[from++] != ',')
        return false;
    while (from < to && is_json_space(text[from]))
        from++;
    return from == to;
}

int agg_split_spans(const cJSON *data, const char *text, size_t text_len, const size_t *demands, size_t n,
                    agg_span *spans, char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    splitter s = {.demands = demands, .n = n};
    for (size_t i = 0; i < n; i++) {
        spans[i] = (agg_span){0, 0};
        if (s.total + demands[i] < s.total)
            return split_fail(err, errlen, "the learners' demands overflow");
        s.total += demands[i];
    }
    if (!cJSON_IsArray(data) || !text)
        return 1; /* the copying split takes it, and says what is wrong */
    long count = 0;
    for (const cJSON *c = data->child; c; c = c->next)
        count++;
    if ((size_t)count != s.total)
        return count_mismatch(&s, count, err, errlen);
    const cJSON *c = data->child;
    size_t prev_end = 0;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < demands[i] && c; j++, c = c->next) { /* c: counted above */
            size_t off, len;
            if (!jsonx_ref(c, &off, &len) || off > text_len || len > text_len - off)
                return 1;
            if (j == 0)
                spans[i].off = off;
            else if (off < prev_end || !item_gap(text, prev_end, off))
                return 1;
            prev_end = off + len;
            spans[i].len = prev_end - spans[i].off;
        }
    }
    return 0;
}
