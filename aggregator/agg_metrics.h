/* agg_metrics: the aggregator's counters and their Prometheus text
 * exposition (GET /metrics): tasks by name and outcome, a task latency
 * histogram, learner joins and losses; gauges (learners by state, tasks in
 * flight and the oldest one's age, per-learner state and heartbeat age, the
 * events sink's counts) are passed in at render time.
 *
 * Ownership: agg_metrics_render() returns a heap string. Threading: the
 * loop's thread only. */
#ifndef AGG_METRICS_H
#define AGG_METRICS_H

#include <stddef.h>

typedef struct agg_metrics agg_metrics;

/* One learner's line of /metrics. */
typedef struct {
    const char *id;
    int state;              /* index into agg_gauges.state_names */
    double heartbeat_age_s; /* seconds since its last heartbeat; < 0: not connected */
} agg_learner_gauge;

typedef struct {
    size_t learners_connected;
    size_t learners_failed;
    size_t learners_known;
    unsigned long long bytes_received;
    unsigned long long bytes_sent;
    size_t tasks_in_flight;     /* coordinator tasks received, not yet answered */
    size_t subtasks_in_flight;  /* learners' sub-tasks not ended */
    double oldest_task_age_s;   /* age of the oldest of them (0: none) */
    unsigned long long events_lines, events_write_errors;
    const agg_learner_gauge *learners; /* borrowed */
    size_t nlearners;
    const char *const *state_names;    /* the learner states, borrowed */
    size_t nstates;
} agg_gauges;

agg_metrics *agg_metrics_new(void);
void agg_metrics_free(agg_metrics *m);
/* outcome: "completed" or "failed". Unknown names count as "other". */
void agg_metrics_task(agg_metrics *m, const char *name, const char *outcome, double seconds);
void agg_metrics_learner_joined(agg_metrics *m);
void agg_metrics_learner_lost(agg_metrics *m);
char *agg_metrics_render(const agg_metrics *m, const agg_gauges *g);

#endif
