/* fuzz_agg_merge: agg_merge on a JSON list of learners' results (the first
 * byte picks full trees or shallow ones with raw values, and names or not).
 * Checks that the inputs are left untouched. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_merge.h"
#include "jsonx.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned mode = data[0];
    const char *buf = (const char *)data + 1;
    size--;
    char err[512];
    int raw_depth = (mode & 3) == 0 ? -1 : (int)(mode & 3); /* 1..3: values deeper stay raw */
    cJSON *list = jsonx_parse_shallow(buf, size, raw_depth, err, sizeof err);
    if (!list)
        return 0;
    if (!cJSON_IsArray(list)) {
        cJSON_Delete(list);
        return 0;
    }
    size_t n = (size_t)cJSON_GetArraySize(list);
    cJSON **v = xcalloc(n ? n : 1, sizeof *v);
    char **names = xcalloc(n ? n : 1, sizeof *names);
    size_t i = 0;
    for (cJSON *it = list->child; it; it = it->next, i++) {
        v[i] = it;
        names[i] = xasprintf("learner%zu", i);
    }
    char *before = jsonx_print(list);
    cJSON *m = agg_merge(v, n, (mode & 4) ? (const char *const *)names : NULL, err, sizeof err);
    if (m) {
        char *out = jsonx_print(m);
        free(out);
        cJSON_Delete(m);
    } else if (!err[0]) {
        abort(); /* a refusal always says why */
    }
    char *after = jsonx_print(list);
    if (strcmp(before, after) != 0) {
        fprintf(stderr, "agg_merge changed its input\n");
        abort();
    }
    free(before);
    free(after);
    for (i = 0; i < n; i++)
        free(names[i]);
    free(names);
    free(v);
    cJSON_Delete(list);
    return 0;
}
