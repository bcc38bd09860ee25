/* agg_k8s: Kubernetes mode. Every sync period: report the learners that
 * failed to join to the operator server (as pod names), then get the
 * learner list and add new addresses to the registry / remove those gone.
 * Each exchange ends with one operator_sync event (added, removed, failed
 * reported, error). Operator trouble (down, slow, garbage) is logged and
 * retried next period. It knows the learner registry (agg_learners.h) and
 * tells the core only through its callback: no circle with agg_core.c.
 *
 * Ownership: agg_k8s_new() borrows loop, client, registry and the strings
 * of cfg, which outlive it. Threading: the loop's thread only. */
#ifndef AGG_K8S_H
#define AGG_K8S_H

#include <stdbool.h>
#include <stddef.h>

#include "agg_config.h"
#include "agg_learners.h"
#include "ev.h"
#include "hc.h"

typedef struct agg_k8s agg_k8s;

/* Called once, when the first learner list has been applied. */
typedef void (*agg_k8s_synced_cb)(void *ud);

agg_k8s *agg_k8s_new(ev_loop *loop, hc_client *client, agg_learners *reg, const agg_config *cfg,
                     agg_k8s_synced_cb synced, void *ud);
/* Stops syncing (the request in flight is cancelled). Idempotent. */
void agg_k8s_stop(agg_k8s *k);
void agg_k8s_free(agg_k8s *k);
bool agg_k8s_synced(const agg_k8s *k);

/* One string of the "learners" list of an operator's GET /replicas reply:
 * addr as listed; host (heap) and port if it is "host:port", else host NULL. */
typedef struct {
    char *addr;
    char *host;
    int port;
} agg_k8s_entry;
/* Parses the reply to GET /replicas (pure: no I/O, no logging): 0 with the
 * list's strings in order (non-strings skipped; an absent or null list is
 * empty; free with agg_k8s_entries_free), or -1 with err saying why the
 * reply is unusable ("failed: ...", "answered HTTP 500 with an unusable
 * body (...)", "data has no \"learners\" list"). */
int agg_k8s_parse_replicas(const hc_result *res, agg_k8s_entry **entries, size_t *n, char *err, size_t errlen);
void agg_k8s_entries_free(agg_k8s_entry *entries, size_t n);

#endif
