/* mc_oracle: the merge rules, written independently of the aggregator. */
#include "mc_oracle.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "xalloc.h"

/* Keys whose merged value is the first learner's, at any depth. */
static const char *const first_only[] = {"learner_step", "buffer_id", "task_id", "learner_done"};

static bool is_first_only(const char *key)
{
    for (size_t i = 0; i < sizeof first_only / sizeof *first_only; i++)
        if (strcmp(key, first_only[i]) == 0)
            return true;
    return false;
}

typedef struct {
    const char *const *names;
    char *err;
    size_t errlen;
} ctx;

static void learner_name(const ctx *c, size_t i, char *buf, size_t len)
{
    if (c->names && c->names[i])
        snprintf(buf, len, "%s", c->names[i]);
    else
        snprintf(buf, len, "learner #%zu", i);
}

static const char *where(const char *path)
{
    return *path ? path : "the top level";
}

static cJSON *merge_at(const ctx *c, const cJSON *const *v, size_t n, const char *path);

static cJSON *all_values(const cJSON *const *v, size_t n)
{
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(list, jsonx_dup(v[i]));
    return list;
}

static cJSON *concat(const ctx *c, const cJSON *const *v, size_t n, const char *path)
{
    for (size_t i = 1; i < n; i++)
        if (!cJSON_IsArray(v[i])) {
            char a[128], b[128];
            learner_name(c, i, a, sizeof a);
            learner_name(c, 0, b, sizeof b);
            snprintf(c->err, c->errlen, "at %s: %s has %s where %s has a list", where(path), a, jsonx_type_phrase(v[i]), b);
            return NULL;
        }
    cJSON *list = cJSON_CreateArray();
    for (size_t i = 0; i < n; i++)
        for (const cJSON *e = v[i]->child; e; e = e->next)
            cJSON_AddItemToArray(list, jsonx_dup(e));
    return list;
}

static cJSON *merge_object(const ctx *c, const cJSON *const *v, size_t n, const char *path)
{
    for (size_t i = 1; i < n; i++)
        if (!cJSON_IsObject(v[i])) {
            char a[128], b[128];
            learner_name(c, i, a, sizeof a);
            learner_name(c, 0, b, sizeof b);
            snprintf(c->err, c->errlen, "at %s: %s has %s where %s has an object", where(path), a,
                     jsonx_type_phrase(v[i]), b);
            return NULL;
        }
    cJSON *out = cJSON_CreateObject();
    const cJSON **sub = xcalloc(n, sizeof *sub);
    for (const cJSON *m = v[0]->child; m; m = m->next) {
        /* A key given twice counts once, with its first value (as jsonx_get
         * reads it). */
        if (jsonx_get(v[0], m->string) != m)
            continue;
        cJSON *val;
        if (is_first_only(m->string)) {
            val = jsonx_dup(m);
        } else {
            char *sub_path = *path ? xasprintf("%s.%s", path, m->string) : xstrdup(m->string);
            val = NULL;
            size_t i;
            for (i = 0; i < n; i++) {
                sub[i] = jsonx_get(v[i], m->string);
                if (!sub[i])
                    break;
            }
            if (i < n) {
                char a[128];
                learner_name(c, i, a, sizeof a);
                snprintf(c->err, c->errlen, "at %s: missing in %s", sub_path, a);
            } else {
                val = merge_at(c, sub, n, sub_path);
            }
            free(sub_path);
            if (!val) {
                free(sub);
                cJSON_Delete(out);
                return NULL;
            }
        }
        cJSON_AddItemToObject(out, m->string, val);
    }
    free(sub);
    return out;
}

static cJSON *merge_at(const ctx *c, const cJSON *const *v, size_t n, const char *path)
{
    const cJSON *first = v[0];
    if (cJSON_IsArray(first))
        return concat(c, v, n, path);
    if (cJSON_IsObject(first))
        return merge_object(c, v, n, path);
    /* null, number, string, bool: the values themselves, as a list. */
    return all_values(v, n);
}

cJSON *mco_merge(const cJSON *const *values, const char *const *names, size_t n, char *err, size_t errlen)
{
    char dummy[8];
    ctx c = {names, err ? err : dummy, err ? errlen : sizeof dummy};
    c.err[0] = '\0';
    if (n == 0) {
        snprintf(c.err, c.errlen, "nothing to merge: no learner results");
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        if (!values[i]) {
            char a[128];
            learner_name(&c, i, a, sizeof a);
            snprintf(c.err, c.errlen, "at the top level: %s has no result", a);
            return NULL;
        }
    return merge_at(&c, values, n, "");
}
