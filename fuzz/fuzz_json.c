/* fuzz_json: jsonx_parse, jsonx_parse_shallow, jsonx_parse_refs,
 * jsonx_array_items and proto_parse_envelope on arbitrary bytes, with
 * cross-checks: a parsed value prints and parses back to the same text; an
 * array that jsonx_parse accepts has as many items for jsonx_array_items,
 * and the reverse; the shallow and ref parsers accept what jsonx_parse
 * accepts, and refs resolved print as the shallow tree does. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "proto.h"

static bool count_item(void *data, size_t index, const char *item, size_t len)
{
    size_t *n = data;
    if (index != *n || len == 0 || !item)
        abort();
    (*n)++;
    return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    char err[256];

    cJSON *t = jsonx_parse(buf, size, err, sizeof err);
    if (t) {
        char *p1 = jsonx_print(t);
        cJSON *t2 = jsonx_parse(p1, strlen(p1), err, sizeof err);
        if (!t2) {
            fprintf(stderr, "printed value does not parse back: %s\n%s\n", err, p1);
            abort();
        }
        char *p2 = jsonx_print(t2);
        if (strcmp(p1, p2) != 0) {
            fprintf(stderr, "print is not stable:\n%s\n%s\n", p1, p2);
            abort();
        }
        free(p2);
        free(p1);
        cJSON_Delete(t2);
        cJSON *d = jsonx_dup(t);
        cJSON_Delete(d);
        jsonx_type_name(t);
        int64_t i;
        double dv;
        jsonx_get_i64(t, &i);
        jsonx_get_double(t, &dv);
    }

    size_t n = 0;
    long items = jsonx_array_items(buf, size, count_item, &n, err, sizeof err);
    if (items >= 0 && (size_t)items != n)
        abort();
    bool is_array = t && cJSON_IsArray(t);
    if (is_array != (items >= 0)) {
        fprintf(stderr, "jsonx_parse %s an array but jsonx_array_items says %ld (%s)\n",
                is_array ? "gives" : "does not give", items, err);
        abort();
    }
    if (is_array && (long)cJSON_GetArraySize(t) != items)
        abort();

    for (int depth = -1; depth <= 2; depth++) {
        cJSON *s = jsonx_parse_shallow(buf, size, depth, err, sizeof err);
        if ((s != NULL) != (t != NULL)) {
            fprintf(stderr, "jsonx_parse_shallow(raw_depth %d) and jsonx_parse disagree\n", depth);
            abort();
        }
        if (s) {
            char *p = jsonx_print(s);
            /* Refs resolved give the shallow tree. */
            cJSON *r = jsonx_parse_refs(buf, size, depth, err, sizeof err);
            if (!r)
                abort();
            jsonx_unref(r, buf);
            char *q = jsonx_print(r);
            if (strcmp(p, q) != 0) {
                fprintf(stderr, "jsonx_parse_refs(raw_depth %d) resolved differs:\n%s\n%s\n", depth, p, q);
                abort();
            }
            free(q);
            cJSON_Delete(r);
            free(p);
            jsonx_type_name(s);
        } else if (jsonx_parse_refs(buf, size, depth, err, sizeof err)) {
            abort();
        }
        cJSON_Delete(s);
    }
    cJSON_Delete(t);

    proto_reply rep;
    if (proto_parse_envelope(buf, size, &rep, err, sizeof err)) {
        if (!rep.tree)
            abort();
        cJSON_Delete(rep.tree);
    }
    return 0;
}
