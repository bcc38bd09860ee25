/* fuzz_operator_reply: the aggregator's handling of an operator server's
 * reply to GET /v1alpha1/replicas (agg_k8s_parse_replicas). The first byte
 * picks the HTTP status (200 mostly), the rest is the body. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"
#include "xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const long statuses[] = {200, 200, 200, 200, 200, 201, 400, 404, 500, 0};
    hc_result res = {0};
    res.status = statuses[data[0] % (sizeof statuses / sizeof statuses[0])];
    char *body = xmalloc(size);
    memcpy(body, data + 1, size - 1);
    body[size - 1] = '\0'; /* hc hands bodies NUL-terminated */
    res.body = body;
    res.body_len = size - 1;
    agg_k8s_entry *e;
    size_t n;
    char err[512];
    if (agg_k8s_parse_replicas(&res, &e, &n, err, sizeof err) == 0) {
        for (size_t i = 0; i < n; i++) {
            if (!e[i].addr)
                abort();
            if (e[i].host && (e[i].port < 1 || e[i].port > 65535 || !e[i].host[0]))
                abort();
        }
        agg_k8s_entries_free(e, n);
    } else if (!err[0]) {
        abort();
    }
    free(body);
    return 0;
}
