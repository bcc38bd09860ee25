/* fuzz_agg_split: agg_split on demands and learn data. Input: a first line
 * of demands (decimal numbers separated by spaces, at most 64, each under
 * 100000), then the data's JSON text. The data is given three ways (a full
 * tree, a shallow tree with raw items, the raw text of the array); when a
 * split succeeds every slice must be a JSON array with exactly its demand's
 * items, and agg_split_learn_tasks must give the same slices wrapped into
 * valid learn task data. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_merge.h"
#include "jsonx.h"
#include "xalloc.h"

static void check_slices(char **slices, size_t *lens, const size_t *demands, size_t n)
{
    char err[256];
    for (size_t i = 0; i < n; i++) {
        if (!slices[i] || strlen(slices[i]) != lens[i])
            abort();
        long items = jsonx_array_items(slices[i], lens[i], NULL, NULL, err, sizeof err);
        if (items < 0 || (size_t)items != demands[i]) {
            fprintf(stderr, "slice %zu has %ld items (%s), demand %zu: %s\n", i, items, err, demands[i],
                    slices[i]);
            abort();
        }
        free(slices[i]);
    }
}

/* The learn tasks are the slices, wrapped: {"name": ..., "data": <slice>}. */
static void check_tasks(const cJSON *d, char **slices, const size_t *lens, const size_t *demands, size_t n)
{
    static const char head[] = "{\"name\": \"learner_learn_task\", \"data\": ";
    char **tasks = xcalloc(n + 1, sizeof *tasks);
    size_t *tlens = xcalloc(n + 1, sizeof *tlens);
    char err[512];
    if (agg_split_learn_tasks(d, demands, n, tasks, tlens, err, sizeof err) != 0)
        abort();
    for (size_t i = 0; i < n; i++) {
        if (tlens[i] != sizeof head - 1 + lens[i] + 1 || memcmp(tasks[i], head, sizeof head - 1) != 0 ||
            memcmp(tasks[i] + sizeof head - 1, slices[i], lens[i]) != 0 || tasks[i][tlens[i] - 1] != '}')
            abort();
        cJSON *t = jsonx_parse(tasks[i], tlens[i], err, sizeof err);
        if (!t) {
            fprintf(stderr, "learn task json does not parse: %s\n", err);
            abort();
        }
        cJSON_Delete(t);
        free(tasks[i]);
    }
    free(tasks);
    free(tlens);
}

static void split_one(const cJSON *d, const size_t *demands, size_t n)
{
    char **slices = xcalloc(n + 1, sizeof *slices);
    size_t *lens = xcalloc(n + 1, sizeof *lens);
    char err[512];
    if (agg_split(d, demands, n, slices, lens, err, sizeof err) == 0) {
        check_tasks(d, slices, lens, demands, n);
        check_slices(slices, lens, demands, n);
    } else {
        for (size_t i = 0; i < n; i++)
            if (slices[i])
                abort(); /* -1 leaves every slice NULL */
        if (!err[0])
            abort();
    }
    free(slices);
    free(lens);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    const char *nl = memchr(buf, '\n', size);
    if (!nl)
        return 0;
    size_t demands[64];
    size_t n = 0;
    for (const char *p = buf; p < nl;) {
        while (p < nl && *p == ' ')
            p++;
        if (p == nl)
            break;
        size_t v = 0;
        int digits = 0;
        while (p < nl && *p >= '0' && *p <= '9' && digits < 5) {
            v = v * 10 + (size_t)(*p - '0');
            p++;
            digits++;
        }
        if (!digits || n == 64)
            return 0;
        demands[n++] = v;
        if (p < nl && *p != ' ')
            return 0;
    }
    const char *text = nl + 1;
    size_t tlen = size - (size_t)(text - buf);
    char err[256];
    cJSON *full = jsonx_parse(text, tlen, err, sizeof err);
    if (full) {
        split_one(full, demands, n);
        cJSON_Delete(full);
    }
    cJSON *shallow = jsonx_parse_shallow(text, tlen, 0, err, sizeof err);
    if (shallow) {
        split_one(shallow, demands, n);
        /* The aggregator's way: items as refs into the text, tasks framed;
         * the same result as the plain split of the shallow tree. */
        cJSON *refs = jsonx_parse_refs(text, tlen, 0, err, sizeof err);
        if (!refs)
            abort();
        char **a = xcalloc(n + 1, sizeof *a), **b = xcalloc(n + 1, sizeof *b);
        size_t *al = xcalloc(n + 1, sizeof *al), *bl = xcalloc(n + 1, sizeof *bl);
        int ra = agg_split_learn_tasks_framed(refs, text, demands, n, 5, 2, a, al, err, sizeof err);
        int rb = agg_split_learn_tasks(shallow, demands, n, b, bl, err, sizeof err);
        if (ra != rb)
            abort();
        for (size_t i = 0; i < n; i++) {
            if (ra == 0 && (al[i] != bl[i] || memcmp(a[i] + 5, b[i], bl[i] + 1) != 0))
                abort();
            if (ra == 0)
                memset(a[i] + 5 + al[i], 'x', 2 + 1); /* the tail room is there */
            free(a[i]);
            free(b[i]);
        }
        free(a);
        free(b);
        free(al);
        free(bl);
        cJSON_Delete(refs);
        cJSON_Delete(shallow);
    }
    /* A Raw item holding the text as it came (jsonx_parse_shallow of a
     * task body leaves "data" so); it may be anything. */
    char *copy = xstrndup(text, tlen);
    if (strlen(copy) == tlen) {
        cJSON *raw = cJSON_CreateRaw(copy);
        split_one(raw, demands, n);
        cJSON_Delete(raw);
    }
    free(copy);
    return 0;
}
