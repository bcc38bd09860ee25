/* mo_fault: named faults for the mock operator's API port. */
#include "mo_fault.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "suggest.h"
#include "xalloc.h"

#define DEFAULT_GARBAGE "<html>not json</html>"

typedef struct {
    uint64_t id;
    mo_fault_kind kind;
    int status;
    long delay_ms;
    long count; /* remaining uses; -1: until cleared */
    unsigned long applied;
    char *path;   /* NULL: any */
    char *method; /* NULL: any */
    char *body;   /* garbage body */
    bool optional;
} fault;

struct mo_faults {
    fault items[MO_FAULTS_MAX];
    size_t len;
    uint64_t next_id;
};

static const char *const kind_names[] = {"error_status", "delay", "garbage", "refuse"};

const char *mo_fault_kind_name(mo_fault_kind k)
{
    return (unsigned)k < 4 ? kind_names[k] : "?";
}

void mo_fault_action_release(mo_fault_action *a)
{
    free(a->body);
    memset(a, 0, sizeof *a);
}

mo_faults *mo_faults_new(void)
{
    mo_faults *f = xcalloc(1, sizeof *f);
    f->next_id = 1;
    return f;
}

static void fault_free(fault *x)
{
    free(x->path);
    free(x->method);
    free(x->body);
    memset(x, 0, sizeof *x);
}

void mo_faults_free(mo_faults *f)
{
    if (!f)
        return;
    mo_faults_clear(f);
    free(f);
}

static void remove_at(mo_faults *f, size_t i)
{
    fault_free(&f->items[i]);
    memmove(&f->items[i], &f->items[i + 1], (f->len - i - 1) * sizeof f->items[0]);
    f->len--;
}

/* The schema: every kind and the members it may have. */
static const char *const kind_members[4][8] = {
    [MO_FAULT_ERROR_STATUS] = {"kind", "status", "delay_ms", "count", "path", "method", "optional", NULL},
    [MO_FAULT_DELAY] = {"kind", "delay_ms", "count", "path", "method", "optional", NULL},
    [MO_FAULT_GARBAGE] = {"kind", "body", "delay_ms", "count", "path", "method", "optional", NULL},
    [MO_FAULT_REFUSE] = {"kind", "optional", NULL},
};
static const char *const all_members[] = {"kind", "status", "delay_ms", "count", "path",
                                          "method", "body", "optional", NULL};

static bool member_of(const char *key, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(key, list[i]) == 0)
            return true;
    return false;
}

/* the error of one member (suggest.h) */
#define ferr suggest_error_set

/* Reads an integer member in [lo, hi]; absent leaves *out. */
static bool get_int(const cJSON *spec, const char *key, int64_t lo, int64_t hi, int64_t *out,
                    bool *present, mo_fault_error *e)
{
    const cJSON *v = jsonx_get(spec, key);
    *present = v != NULL;
    if (!v)
        return true;
    int64_t x;
    if (!jsonx_get_i64(v, &x))
        return ferr(e, key, "fault field \"%s\" must be an integer, not %s", key,
                    jsonx_type_name(v));
    if (x < lo || x > hi)
        return ferr(e, key, "fault field \"%s\" is %" PRId64 "; it must be in %" PRId64 "..%" PRId64,
                    key, x, lo, hi);
    *out = x;
    return true;
}

static bool get_str(const cJSON *spec, const char *key, size_t maxlen, char **out,
                    mo_fault_error *e)
{
    const cJSON *v = jsonx_get(spec, key);
    if (!v)
        return true;
    if (!cJSON_IsString(v))
        return ferr(e, key, "fault field \"%s\" must be a string, not %s", key,
                    jsonx_type_name(v));
    if (strlen(v->valuestring) > maxlen)
        return ferr(e, key, "fault field \"%s\" is longer than %zu bytes", key, maxlen);
    *out = xstrdup(v->valuestring);
    return true;
}

/* Validates spec into *x (whose strings are then the caller's). */
static bool parse(const cJSON *spec, fault *x, mo_fault_error *e)
{
    memset(x, 0, sizeof *x);
    memset(e, 0, sizeof *e);
    x->count = -1;
    if (!cJSON_IsObject(spec))
        return ferr(e, "", "a fault must be a JSON object, not %s", jsonx_type_name(spec));
    for (const cJSON *m = spec->child; m; m = m->next)
        if (!member_of(m->string, all_members)) {
            const char *near = suggest_nearest(m->string, all_members, (size_t)-1);
            if (near)
                return ferr(e, m->string, "unknown fault field \"%.64s\" (did you mean '%s'?)",
                            m->string, near);
            return ferr(e, m->string,
                        "unknown fault field \"%.64s\" (known: kind, status, delay_ms, count, path, "
                        "method, body, optional)",
                        m->string);
        }
    const cJSON *kj = jsonx_get(spec, "kind");
    if (!kj || !cJSON_IsString(kj))
        return ferr(e, kj ? "kind" : "",
                    "fault field \"kind\" is missing or not a string (error_status, delay, garbage, "
                    "refuse)");
    const char *kind = kj->valuestring;
    size_t k = 0;
    while (k < 4 && strcmp(kind, kind_names[k]) != 0)
        k++;
    if (k == 4) {
        const char *near = suggest_nearest(kind, kind_names, 4);
        if (near)
            return ferr(e, "kind", "fault kind \"%.64s\" is unknown (did you mean '%s'?)", kind,
                        near);
        return ferr(e, "kind", "fault kind \"%.64s\" is unknown (error_status, delay, garbage, refuse)",
                    kind);
    }
    x->kind = (mo_fault_kind)k;
    for (const cJSON *m = spec->child; m; m = m->next) {
        if (member_of(m->string, kind_members[k]))
            continue;
        if (strcmp(m->string, "status") == 0)
            return ferr(e, m->string, "fault field \"status\" applies to error_status only, not %s",
                        kind);
        if (strcmp(m->string, "body") == 0)
            return ferr(e, m->string, "fault field \"body\" applies to garbage only, not %s", kind);
        return ferr(e, m->string,
                    "a refuse fault takes no delay_ms, count, path or method: it closes the whole "
                    "API port until cleared");
    }
    int64_t status = 500, delay = 0, count = -1;
    bool has_status, has_delay, has_count;
    if (!get_int(spec, "status", 200, 599, &status, &has_status, e) ||
        !get_int(spec, "delay_ms", 0, MO_FAULT_DELAY_MAX_MS, &delay, &has_delay, e) ||
        !get_int(spec, "count", 1, INT32_MAX, &count, &has_count, e))
        return false;
    if (x->kind == MO_FAULT_DELAY && (!has_delay || delay < 1))
        return ferr(e, has_delay ? "delay_ms" : "", "a delay fault needs \"delay_ms\" of 1..%ld",
                    MO_FAULT_DELAY_MAX_MS);
    const cJSON *opt = jsonx_get(spec, "optional");
    if (opt && !cJSON_IsBool(opt))
        return ferr(e, "optional", "fault field \"optional\" must be true or false, not %s",
                    jsonx_type_name(opt));
    if (!get_str(spec, "path", 1024, &x->path, e) || !get_str(spec, "method", 32, &x->method, e) ||
        !get_str(spec, "body", MO_FAULT_BODY_MAX, &x->body, e)) {
        fault_free(x);
        return false;
    }
    if (x->path && x->path[0] != '/') {
        ferr(e, "path", "fault field \"path\" must start with '/' (got \"%.64s\")", x->path);
        fault_free(x);
        return false;
    }
    x->status = (int)status;
    x->delay_ms = (long)delay;
    x->count = (long)count;
    x->optional = opt && cJSON_IsTrue(opt);
    return true;
}

bool mo_fault_check(const cJSON *spec, mo_fault_error *e)
{
    fault x;
    if (!parse(spec, &x, e))
        return false;
    fault_free(&x);
    return true;
}

uint64_t mo_faults_add(mo_faults *f, const cJSON *spec, char *err, size_t errlen)
{
    fault x;
    mo_fault_error e;
    if (!parse(spec, &x, &e)) {
        snprintf(err, errlen, "%s", e.msg);
        return 0;
    }
    if (f->len >= MO_FAULTS_MAX) {
        fault_free(&x);
        snprintf(err, errlen, "too many faults (at most %d); clear some first", MO_FAULTS_MAX);
        return 0;
    }
    if (x.kind == MO_FAULT_GARBAGE && !x.body)
        x.body = xstrdup(DEFAULT_GARBAGE);
    x.id = f->next_id++;
    f->items[f->len++] = x;
    return x.id;
}

bool mo_faults_remove(mo_faults *f, uint64_t id)
{
    for (size_t i = 0; i < f->len; i++)
        if (f->items[i].id == id) {
            remove_at(f, i);
            return true;
        }
    return false;
}

void mo_faults_clear(mo_faults *f)
{
    while (f->len)
        remove_at(f, f->len - 1);
}

size_t mo_faults_count(const mo_faults *f)
{
    return f->len;
}

void mo_faults_take(mo_faults *f, const char *method, const char *path, mo_fault_action *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < f->len; i++) {
        fault *x = &f->items[i];
        if (x->kind == MO_FAULT_REFUSE)
            continue;
        if (x->path && strcmp(x->path, path) != 0)
            continue;
        if (x->method && strcmp(x->method, method) != 0)
            continue;
        out->applies = true;
        out->kind = x->kind;
        out->status = x->status;
        out->delay_ms = x->delay_ms;
        out->body = x->body ? xstrdup(x->body) : NULL;
        out->id = x->id;
        out->applied = ++x->applied;
        if (x->count > 0 && --x->count == 0)
            remove_at(f, i);
        return;
    }
}

bool mo_faults_refusing(const mo_faults *f)
{
    return mo_faults_refuse_id(f) != 0;
}

uint64_t mo_faults_refuse_id(const mo_faults *f)
{
    for (size_t i = 0; i < f->len; i++)
        if (f->items[i].kind == MO_FAULT_REFUSE)
            return f->items[i].id;
    return 0;
}

static cJSON *fault_json(const fault *x)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "id", jsonx_new_i64((int64_t)x->id));
    cJSON_AddStringToObject(o, "kind", mo_fault_kind_name(x->kind));
    if (x->kind == MO_FAULT_ERROR_STATUS)
        cJSON_AddItemToObject(o, "status", jsonx_new_i64(x->status));
    if (x->kind != MO_FAULT_REFUSE) {
        cJSON_AddItemToObject(o, "delay_ms", jsonx_new_i64(x->delay_ms));
        cJSON_AddItemToObject(o, "count",
                              x->count < 0 ? cJSON_CreateNull() : jsonx_new_i64(x->count));
        cJSON_AddItemToObject(o, "applied", jsonx_new_i64((int64_t)x->applied));
        cJSON_AddItemToObject(o, "path",
                              x->path ? cJSON_CreateString(x->path) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "method",
                              x->method ? cJSON_CreateString(x->method) : cJSON_CreateNull());
    }
    if (x->kind == MO_FAULT_GARBAGE)
        cJSON_AddStringToObject(o, "body", x->body);
    if (x->optional)
        cJSON_AddBoolToObject(o, "optional", true);
    return o;
}

cJSON *mo_faults_to_json(const mo_faults *f)
{
    cJSON *a = cJSON_CreateArray();
    for (size_t i = 0; i < f->len; i++)
        cJSON_AddItemToArray(a, fault_json(&f->items[i]));
    return a;
}

cJSON *mo_faults_one_json(const mo_faults *f, uint64_t id)
{
    for (size_t i = 0; i < f->len; i++)
        if (f->items[i].id == id)
            return fault_json(&f->items[i]);
    return NULL;
}
