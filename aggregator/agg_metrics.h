/* agg_metrics: the aggregator's counters and their Prometheus text
 * exposition (GET /metrics): tasks by name and outcome, a task latency
 * histogram, learner joins and losses; gauges are passed in at render time.
 *
 * Ownership: agg_metrics_render() returns a heap string. Threading: the
 * loop's thread only. */
#ifndef AGG_METRICS_H
#define AGG_METRICS_H

#include <stddef.h>

typedef struct agg_metrics agg_metrics;

typedef struct {
    size_t learners_connected;
    size_t learners_failed;
    size_t learners_known;
    unsigned long long bytes_received;
    unsigned long long bytes_sent;
} agg_gauges;

agg_metrics *agg_metrics_new(void);
void agg_metrics_free(agg_metrics *m);
/* outcome: "completed" or "failed". Unknown names count as "other". */
void agg_metrics_task(agg_metrics *m, const char *name, const char *outcome, double seconds);
void agg_metrics_learner_joined(agg_metrics *m);
void agg_metrics_learner_lost(agg_metrics *m);
char *agg_metrics_render(const agg_metrics *m, const agg_gauges *g);

#endif
