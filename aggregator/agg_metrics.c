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

/* A label value as the text format wants it: \\, \" and \n escaped. */
static void label_value(xbuf *b, const char *v)
{
    for (const char *p = v; *p; p++) {
        if (*p == '\\' || *p == '"')
            xbuf_printf(b, "\\%c", *p);
        else if (*p == '\n')
            xbuf_puts(b, "\\n");
        else
            xbuf_append(b, p, 1);
    }
}

/* Per-learner gauges: its state as a state set (1 for the one it is in),
 * the seconds since its last heartbeat (connected learners only), so that
 * an alert can fire on a learner that is stuck or silent. */
static void render_learners(xbuf *b, const agg_gauges *g)
{
    xbuf_puts(b, "# HELP dilearn_learner_state The learner's join state (1 for the state it is in): joining (in its "
                 "join window or retried after leaving), joined, failed (did not join within max_retry; still "
                 "retried), stopped.\n# TYPE dilearn_learner_state gauge\n");
    for (size_t i = 0; i < g->nlearners; i++)
        for (size_t s = 0; s < g->nstates; s++) {
            xbuf_puts(b, "dilearn_learner_state{learner=\"");
            label_value(b, g->learners[i].id);
            xbuf_printf(b, "\",state=\"%s\"} %d\n", g->state_names[s], g->learners[i].state == (int)s);
        }
    xbuf_puts(b, "# HELP dilearn_learner_heartbeat_age_seconds Seconds since the learner's last heartbeat "
                 "(connected learners only).\n# TYPE dilearn_learner_heartbeat_age_seconds gauge\n");
    for (size_t i = 0; i < g->nlearners; i++) {
        if (g->learners[i].heartbeat_age_s < 0)
            continue;
        xbuf_puts(b, "dilearn_learner_heartbeat_age_seconds{learner=\"");
        label_value(b, g->learners[i].id);
        xbuf_printf(b, "\"} %.3f\n", g->learners[i].heartbeat_age_s);
    }
}

static void gauge_f(xbuf *b, const char *name, const char *help, double value)
{
    xbuf_printf(b, "# HELP %s %s\n# TYPE %s gauge\n%s %.3f\n", name, help, name, name, value);
}

char *agg_metrics_render(const agg_metrics *m, const agg_gauges *g)
{
    xbuf b = {0};
    metric(&b, "dilearn_learners_connected", "gauge", "Learners connected now (the world size).",
           g->learners_connected);
    metric(&b, "dilearn_learners_failed", "gauge",
           "Learners failed to join now: not joined within max_retry of their window. Not final: they are "
           "still retried, and one that joins later is no longer counted.",
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
    metric(&b, "dilearn_tasks_in_flight", "gauge", "Coordinator tasks received and not yet answered.",
           g->tasks_in_flight);
    gauge_f(&b, "dilearn_oldest_task_in_flight_seconds",
            "Age of the oldest coordinator task not yet answered (0: none).", g->oldest_task_age_s);
    metric(&b, "dilearn_subtasks_in_flight", "gauge", "Learners' parts of the current fan-out not yet ended.",
           g->subtasks_in_flight);
    metric(&b, "dilearn_events_total", "counter", "Events emitted (--events).", g->events_lines);
    metric(&b, "dilearn_events_write_errors_total", "counter",
           "Failed writes of the events file (their events are lost).", g->events_write_errors);
    render_learners(&b, g);
    return xbuf_take(&b);
}
