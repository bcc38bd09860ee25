/* agg: the learner aggregator. Towards the coordinator it is one learner
 * slave whose resource is the number of connected learners; towards the
 * learners it is a master that fans every task out, splits learn data by the
 * demands of the last get-data, and merges the results (protocol.md, "The
 * aggregator's semantics"). Learners that are lost are taken out of the world
 * and retried until they can connect again; in Kubernetes mode the learner
 * list follows the operator server.
 *
 * Ownership: agg_new() copies what it needs from the config. The ready line
 * is a heap string the caller frees.
 * Threading: one ev loop; everything runs on its thread. */
#ifndef AGG_H
#define AGG_H

#include <stdbool.h>
#include <stddef.h>

#include "agg_config.h"
#include "ev.h"

typedef struct agg agg;

/* Called once when start-up has ended: every configured learner joined, or
 * max_retry passed (Kubernetes mode: the first operator sync too). */
typedef void (*agg_ready_cb)(void *ud, agg *a);
/* Called when agg_shutdown() has finished its work (reports delivered or
 * the grace period over); the caller then stops the loop and frees. */
typedef void (*agg_done_cb)(void *ud);

agg *agg_new(ev_loop *loop, const agg_config *cfg, agg_ready_cb ready, void *ud, char *err, size_t errlen);
void agg_free(agg *a);

/* {"ready": true, "slave_port": P, "master_port": P, "metrics_port": P,
 * "joined": [...], "failed": [...]} without a newline. */
char *agg_ready_line(const agg *a);

/* Graceful stop: a running coordinator task fails towards the coordinator,
 * learners are disconnected, then done() is called (within grace_ms). */
void agg_shutdown(agg *a, long grace_ms, agg_done_cb done, void *ud);

#endif
