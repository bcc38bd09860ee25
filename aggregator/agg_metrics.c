/* agg_metrics: counters and Prometheus text format. */
#include "agg_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

static const char *const task_names[] = {"resource", "learner_start_task", "learner_get_data_task",
                                         "learner_learn_task", "learner_close_task", "other"};
#define NTASK (sizeof task_names / sizeof task_names[0])
static const double buckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300};
#define NBUCKET (sizeof buckets / sizeof buckets[0])

struct agg_metrics {
    unsigned long long completed[NTASK], failed[NTASK];
    unsigned long long hist[NTASK][NBUCKET];
    unsigned long long count[NTASK];
    double sum[NTASK];
    unsigned long long joins, losses;
};

agg_metrics *agg_metrics_new(void)
{
    return xcalloc(1, sizeof(agg_metrics));
}

void agg_metrics_free(agg_metrics *m)
{
    free(m);
}

static size_t task_index(const char *name)
{
    for (size_t i = 0; i + 1 < NTASK; i++)
        if (name && strcmp(name, task_names[i]) == 0)
            return i;
    return NTASK - 1;
}

void agg_metrics_task(agg_metrics *m, const char *name, const char *outcome, double seconds)
{
    size_t i = task_index(name);
    if (strcmp(outcome, "completed") == 0)
        m->completed[i]++;
    else
        m->failed[i]++;
    for (size_t b = 0; b < NBUCKET; b++)
        if (seconds <= buckets[b])
            m->hist[i][b]++;
    m->count[i]++;
    m->sum[i] += seconds;
}

void agg_metrics_learner_joined(agg_metrics *m)
{
    m->joins++;
}

void agg_metrics_learner_lost(agg_metrics *m)
{
    m->losses++;
}

/* "# HELP" and "# TYPE" lines, then one unlabelled sample. */
static void metric(xbuf *b, const char *name, const char *type, const char *help, unsigned long long value)
{
    xbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", name, help, name, type, name, value);
}

char *agg_metrics_render(const agg_metrics *m, const agg_gauges *g)
{
    xbuf b = {0};
    metric(&b, "dilearn_learners_connected", "gauge", "Learners connected now (the world size).",
           g->learners_connected);
    metric(&b, "dilearn_learners_failed", "gauge", "Learners that did not join within max_retry.",
           g->learners_failed);
    metric(&b, "dilearn_learners_known", "gauge", "Learners configured or listed by the operator.",
           g->learners_known);
    metric(&b, "dilearn_learner_joins_total", "counter", "Successful connections to learners.", m->joins);
    metric(&b, "dilearn_learner_losses_total", "counter", "Connections to learners lost.", m->losses);
    xbuf_puts(&b, "# HELP dilearn_tasks_total Coordinator tasks by name and outcome.\n"
                  "# TYPE dilearn_tasks_total counter\n");
    for (size_t i = 0; i < NTASK; i++) {
        xbuf_printf(&b, "dilearn_tasks_total{name=\"%s\",outcome=\"completed\"} %llu\n", task_names[i], m->completed[i]);
        xbuf_printf(&b, "dilearn_tasks_total{name=\"%s\",outcome=\"failed\"} %llu\n", task_names[i], m->failed[i]);
    }
    xbuf_puts(&b, "# HELP dilearn_task_duration_seconds Coordinator task latency, receipt to report.\n"
                  "# TYPE dilearn_task_duration_seconds histogram\n");
    for (size_t i = 0; i < NTASK; i++) {
        for (size_t k = 0; k < NBUCKET; k++)
            xbuf_printf(&b, "dilearn_task_duration_seconds_bucket{name=\"%s\",le=\"%g\"} %llu\n", task_names[i],
                        buckets[k], m->hist[i][k]);
        xbuf_printf(&b, "dilearn_task_duration_seconds_bucket{name=\"%s\",le=\"+Inf\"} %llu\n", task_names[i],
                    m->count[i]);
        xbuf_printf(&b, "dilearn_task_duration_seconds_sum{name=\"%s\"} %.9g\n", task_names[i], m->sum[i]);
        xbuf_printf(&b, "dilearn_task_duration_seconds_count{name=\"%s\"} %llu\n", task_names[i], m->count[i]);
    }
    metric(&b, "dilearn_bytes_received_total", "counter", "HTTP body bytes received.", g->bytes_received);
    metric(&b, "dilearn_bytes_sent_total", "counter", "HTTP body bytes sent.", g->bytes_sent);
    return xbuf_take(&b);
}
