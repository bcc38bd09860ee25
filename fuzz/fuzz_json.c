/* fuzz_json: jsonx_parse, jsonx_parse_shallow, jsonx_parse_refs,
 * jsonx_array_items and proto_parse_envelope on arbitrary bytes, with
 * cross-checks: a parsed value prints and parses back to the same text; an
 * array that jsonx_parse accepts has as many items for jsonx_array_items,
 * and the reverse; the shallow and ref parsers accept what jsonx_parse
 * accepts, and refs resolved print as the shallow tree does; the input as
 * the body of a list in a list ("[[" input "], [0.5]]", where the fast
 * validator's number-list loop runs) gets the same verdict and message from
 * the tree builder and the fast validator. */
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

    /* The input as a list's body: the tree builder alone (jsonx_parse) and
     * the fast validator (items of the top array, jsonx_parse_shallow at
     * raw_depth 0) agree, and on valid text give the same values. */
    static const char head[] = "[[", tail[] = "], [0.5, 0.25, 0.125, 0.0625, 1.5e-05, -7, 8, 9, 10]]";
    size_t wlen = sizeof head - 1 + size + sizeof tail - 1;
    char *w = malloc(wlen);
    if (!w)
        abort();
    memcpy(w, head, sizeof head - 1);
    memcpy(w + sizeof head - 1, buf, size);
    memcpy(w + sizeof head - 1 + size, tail, sizeof tail - 1);
    char werr[256] = "", serr[256] = "";
    cJSON *wt = jsonx_parse(w, wlen, werr, sizeof werr);
    cJSON *ws = jsonx_parse_shallow(w, wlen, 0, serr, sizeof serr);
    if ((wt != NULL) != (ws != NULL) || (!wt && strcmp(werr, serr) != 0)) {
        fprintf(stderr, "as a list's body: tree builder %s (%s), fast validator %s (%s)\n", wt ? "accepts" : "rejects",
                werr, ws ? "accepts" : "rejects", serr);
        abort();
    }
    if (wt) { /* the Raw items printed back parse to the same values */
        char *pw = jsonx_print(wt), *ps = jsonx_print(ws);
        cJSON *back = jsonx_parse(ps, strlen(ps), err, sizeof err);
        char *pb = back ? jsonx_print(back) : NULL;
        if (!pb || strcmp(pw, pb) != 0) {
            fprintf(stderr, "as a list's body, the fast validator ends an item elsewhere:\n%s\n%s\n", pw, ps);
            abort();
        }
        free(pb);
        cJSON_Delete(back);
        free(ps);
        free(pw);
    }
    cJSON_Delete(ws);
    cJSON_Delete(wt);
    free(w);

    proto_reply rep;
    if (proto_parse_envelope(buf, size, &rep, err, sizeof err)) {
        if (!rep.tree)
            abort();
        cJSON_Delete(rep.tree);
    }
    return 0;
}
