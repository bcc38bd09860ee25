/* mo_registry: replica lists per (namespace, name), failure records, names. */
#include "mo_registry.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

typedef struct {
    char **items;
    size_t len, cap;
} strlist;

struct mo_entry {
    char *ns;
    char *name;
    strlist lists[2]; /* indexed by mo_kind */
};

typedef struct {
    char *ns, *reporter, *pod, *old_addr, *new_addr;
    mo_kind kind;
    bool found;
} failed_rec;

struct mo_registry {
    mo_entry **entries;
    size_t len, cap;
    failed_rec *failed; /* ring of MO_FAILED_MAX */
    size_t failed_head, failed_len;
    unsigned long failed_dropped;
    uint64_t rng; /* xorshift64* state, never 0 */
};

const char *mo_kind_name(mo_kind k)
{
    return k == MO_COLLECTORS ? "collectors" : "learners";
}

static void strlist_free(strlist *l)
{
    for (size_t i = 0; i < l->len; i++)
        free(l->items[i]);
    free(l->items);
    memset(l, 0, sizeof *l);
}

static void entry_free(mo_entry *e)
{
    free(e->ns);
    free(e->name);
    strlist_free(&e->lists[0]);
    strlist_free(&e->lists[1]);
    free(e);
}

static void failed_rec_free(failed_rec *f)
{
    free(f->ns);
    free(f->reporter);
    free(f->pod);
    free(f->old_addr);
    free(f->new_addr);
    memset(f, 0, sizeof *f);
}

mo_registry *mo_registry_new(uint64_t seed)
{
    mo_registry *r = xcalloc(1, sizeof *r);
    r->failed = xcalloc(MO_FAILED_MAX, sizeof *r->failed);
    r->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
    return r;
}

void mo_registry_free(mo_registry *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->len; i++)
        entry_free(r->entries[i]);
    free(r->entries);
    for (size_t i = 0; i < r->failed_len; i++)
        failed_rec_free(&r->failed[(r->failed_head + i) % MO_FAILED_MAX]);
    free(r->failed);
    free(r);
}

static long find_index(const mo_registry *r, const char *ns, const char *name)
{
    for (size_t i = 0; i < r->len; i++)
        if (strcmp(r->entries[i]->ns, ns) == 0 && strcmp(r->entries[i]->name, name) == 0)
            return (long)i;
    return -1;
}

mo_entry *mo_registry_find(const mo_registry *r, const char *ns, const char *name)
{
    long i = find_index(r, ns, name);
    return i < 0 ? NULL : r->entries[i];
}

mo_entry *mo_registry_ensure(mo_registry *r, const char *ns, const char *name, char *err,
                             size_t errlen)
{
    if (!mo_name_valid(ns, "namespace", err, errlen) || !mo_name_valid(name, "name", err, errlen))
        return NULL;
    mo_entry *e = mo_registry_find(r, ns, name);
    if (e)
        return e;
    if (r->len >= MO_ENTRIES_MAX) {
        snprintf(err, errlen,
                 "cannot add %s/%s: the mock holds at most %d (namespace, name) entries", ns,
                 name, MO_ENTRIES_MAX);
        return NULL;
    }
    if (r->len == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 8;
        r->entries = xrealloc(r->entries, r->cap * sizeof *r->entries);
    }
    e = xcalloc(1, sizeof *e);
    e->ns = xstrdup(ns);
    e->name = xstrdup(name);
    r->entries[r->len++] = e;
    return e;
}

bool mo_registry_remove(mo_registry *r, const char *ns, const char *name)
{
    long i = find_index(r, ns, name);
    if (i < 0)
        return false;
    entry_free(r->entries[i]);
    memmove(&r->entries[i], &r->entries[i + 1], (r->len - (size_t)i - 1) * sizeof *r->entries);
    r->len--;
    return true;
}

size_t mo_registry_count(const mo_registry *r)
{
    return r->len;
}

mo_entry *mo_registry_at(const mo_registry *r, size_t i)
{
    return i < r->len ? r->entries[i] : NULL;
}

const char *mo_entry_namespace(const mo_entry *e)
{
    return e->ns;
}

const char *mo_entry_name(const mo_entry *e)
{
    return e->name;
}

size_t mo_entry_count(const mo_entry *e, mo_kind k)
{
    return e->lists[k].len;
}

const char *mo_entry_addr(const mo_entry *e, mo_kind k, size_t i)
{
    return i < e->lists[k].len ? e->lists[k].items[i] : NULL;
}

long mo_entry_find_addr(const mo_entry *e, mo_kind k, const char *addr)
{
    const strlist *l = &e->lists[k];
    for (size_t i = 0; i < l->len; i++)
        if (strcmp(l->items[i], addr) == 0)
            return (long)i;
    return -1;
}

int mo_entry_add(mo_entry *e, mo_kind k, const char *addr, char *err, size_t errlen)
{
    if (!mo_addr_valid(addr, err, errlen))
        return -1;
    if (mo_entry_find_addr(e, k, addr) >= 0)
        return 0;
    strlist *l = &e->lists[k];
    if (l->len >= MO_LIST_MAX) {
        snprintf(err, errlen, "cannot add %s to the %s of %s/%s: a list holds at most %d addresses",
                 addr, mo_kind_name(k), e->ns, e->name, MO_LIST_MAX);
        return -1;
    }
    if (l->len == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->items = xrealloc(l->items, l->cap * sizeof *l->items);
    }
    l->items[l->len++] = xstrdup(addr);
    return 1;
}

int mo_entry_replace(mo_entry *e, mo_kind k, size_t i, const char *addr, char *err,
                     size_t errlen)
{
    strlist *l = &e->lists[k];
    if (i >= l->len) {
        snprintf(err, errlen, "no address at index %zu in the %s of %s/%s", i, mo_kind_name(k),
                 e->ns, e->name);
        return -1;
    }
    if (!mo_addr_valid(addr, err, errlen))
        return -1;
    free(l->items[i]);
    l->items[i] = xstrdup(addr);
    return 0;
}

void mo_entry_remove_at(mo_entry *e, mo_kind k, size_t i)
{
    strlist *l = &e->lists[k];
    if (i >= l->len)
        return;
    free(l->items[i]);
    memmove(&l->items[i], &l->items[i + 1], (l->len - i - 1) * sizeof *l->items);
    l->len--;
}

void mo_entry_clear(mo_entry *e, mo_kind k)
{
    strlist_free(&e->lists[k]);
}

cJSON *mo_entry_list_json(const mo_entry *e, mo_kind k)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < e->lists[k].len; i++)
        cJSON_AddItemToArray(a, cJSON_CreateString(e->lists[k].items[i]));
    return a;
}

static uint64_t next_random(mo_registry *r)
{
    /* xorshift64*: plenty for invented pod names; not for secrets. */
    r->rng ^= r->rng >> 12;
    r->rng ^= r->rng << 25;
    r->rng ^= r->rng >> 27;
    return r->rng * 0x2545F4914F6CDD1Dull;
}

/* True if some address of the registry has this pod name as its host's first
 * label. */
static bool pod_name_taken(const mo_registry *r, const char *pod)
{
    size_t n = strlen(pod);
    for (size_t i = 0; i < r->len; i++)
        for (int k = 0; k < 2; k++)
            for (size_t j = 0; j < r->entries[i]->lists[k].len; j++) {
                const char *a = r->entries[i]->lists[k].items[j];
                if (strncmp(a, pod, n) == 0 && (a[n] == '.' || a[n] == ':'))
                    return true;
            }
    return false;
}

char *mo_registry_pod_name(mo_registry *r, const char *prefix)
{
    /* The alphabet of Kubernetes' utilrand.String (no vowels, no 0/1/3). */
    static const char alphabet[] = "bcdfghjklmnpqrstvwxz2456789";
    char suffix[6];
    char *name = NULL;
    for (int attempt = 0; attempt < 64; attempt++) {
        uint64_t v = next_random(r);
        for (int i = 0; i < 5; i++) {
            suffix[i] = alphabet[v % (sizeof alphabet - 1)];
            v /= sizeof alphabet - 1;
        }
        suffix[5] = '\0';
        free(name);
        name = xasprintf("%s-%s", prefix, suffix);
        if (!pod_name_taken(r, name))
            break;
    }
    return name;
}

void mo_registry_record_failed(mo_registry *r, const char *ns, const char *reporter,
                               mo_kind k, const char *pod, const char *old_addr,
                               const char *new_addr, bool found)
{
    failed_rec *f;
    if (r->failed_len == MO_FAILED_MAX) {
        f = &r->failed[r->failed_head];
        failed_rec_free(f);
        r->failed_head = (r->failed_head + 1) % MO_FAILED_MAX;
        r->failed_len--;
        r->failed_dropped++;
    }
    f = &r->failed[(r->failed_head + r->failed_len) % MO_FAILED_MAX];
    r->failed_len++;
    f->ns = xstrdup(ns ? ns : "");
    f->reporter = xstrdup(reporter ? reporter : "");
    f->pod = xstrdup(pod ? pod : "");
    f->old_addr = old_addr ? xstrdup(old_addr) : NULL;
    f->new_addr = new_addr ? xstrdup(new_addr) : NULL;
    f->kind = k;
    f->found = found;
}

static cJSON *str_or_null(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *mo_registry_failed_json(const mo_registry *r)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < r->failed_len; i++) {
        const failed_rec *f = &r->failed[(r->failed_head + i) % MO_FAILED_MAX];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "namespace", f->ns);
        cJSON_AddStringToObject(o, "reporter", f->reporter);
        cJSON_AddStringToObject(o, "kind", mo_kind_name(f->kind));
        cJSON_AddStringToObject(o, "pod", f->pod);
        cJSON_AddItemToObject(o, "address", str_or_null(f->old_addr));
        cJSON_AddItemToObject(o, "replaced_by", str_or_null(f->new_addr));
        cJSON_AddBoolToObject(o, "found", f->found);
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

unsigned long mo_registry_failed_dropped(const mo_registry *r)
{
    return r->failed_dropped;
}

cJSON *mo_registry_to_json(const mo_registry *r)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < r->len; i++) {
        const mo_entry *e = r->entries[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "namespace", e->ns);
        cJSON_AddStringToObject(o, "name", e->name);
        cJSON_AddItemToObject(o, "collectors", mo_entry_list_json(e, MO_COLLECTORS));
        cJSON_AddItemToObject(o, "learners", mo_entry_list_json(e, MO_LEARNERS));
        cJSON_AddItemToArray(a, o);
    }
    return a;
}

bool mo_addr_valid(const char *addr, char *err, size_t errlen)
{
    size_t n = addr ? strlen(addr) : 0;
    if (n == 0) {
        snprintf(err, errlen, "an address is empty; expected host:port");
        return false;
    }
    if (n > MO_ADDR_MAX) {
        snprintf(err, errlen, "address '%.40s...' is %zu characters long; the limit is %d", addr,
                 n, MO_ADDR_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)addr[i];
        if (c <= ' ' || c == 0x7f || c == '/' || c == ',') {
            snprintf(err, errlen,
                     "address '%s' contains a character not allowed in host:port (byte %zu)",
                     addr, i);
            return false;
        }
    }
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr) {
        snprintf(err, errlen, "address '%s' is not host:port", addr);
        return false;
    }
    if (addr[0] == '[' && colon[-1] != ']') {
        snprintf(err, errlen, "address '%s': an IPv6 host must be written [host]:port", addr);
        return false;
    }
    if (addr[0] != '[' && memchr(addr, ':', (size_t)(colon - addr))) {
        snprintf(err, errlen, "address '%s': an IPv6 host must be written [host]:port", addr);
        return false;
    }
    const char *p = colon + 1;
    long port = 0;
    if (!*p || strlen(p) > 5) {
        snprintf(err, errlen, "address '%s' has no valid port (1-65535)", addr);
        return false;
    }
    for (; *p; p++) {
        if (!isdigit((unsigned char)*p)) {
            snprintf(err, errlen, "address '%s' has a port that is not a number", addr);
            return false;
        }
        port = port * 10 + (*p - '0');
    }
    if (port < 1 || port > 65535) {
        snprintf(err, errlen, "address '%s' has port %ld, outside 1-65535", addr, port);
        return false;
    }
    return true;
}

bool mo_name_valid(const char *name, const char *what, char *err, size_t errlen)
{
    size_t n = name ? strlen(name) : 0;
    if (n == 0) {
        snprintf(err, errlen, "%s is missing or empty", what);
        return false;
    }
    if (n > MO_NAME_MAX) {
        snprintf(err, errlen, "%s is %zu characters long; the limit is %d", what, n, MO_NAME_MAX);
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c <= ' ' || c == 0x7f || c == '/') {
            snprintf(err, errlen, "%s '%s' contains white space, a control character or '/'",
                     what, name);
            return false;
        }
    }
    return true;
}

char *mo_addr_host(const char *addr, int *port)
{
    const char *colon = strrchr(addr, ':');
    if (port) {
        char *end = NULL;
        long v = colon ? strtol(colon + 1, &end, 10) : 0;
        *port = (colon && end && *end == '\0' && v > 0 && v <= 65535) ? (int)v : 0;
    }
    if (!colon)
        return xstrdup(addr);
    return xstrndup(addr, (size_t)(colon - addr));
}

char *mo_addr_pod_name(const char *addr)
{
    char *host = mo_addr_host(addr, NULL);
    char *dot = strrchr(host, '.');
    if (dot && dot != host && host[0] != '[')
        *dot = '\0';
    return host;
}
