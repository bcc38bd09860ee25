/* agg_core: the coordinator's tasks (fan-out, split, merge), start-up and
 * shutdown, /metrics. The learners are in the registry (agg_learners.c),
 * Kubernetes mode in agg_k8s.c; both tell the core through callbacks. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"
#include "agg_merge.h"
#include "agg_metrics.h"
#include "evt.h"
#include "hc.h"
#include "hs.h"
#include "ilog.h"
#include "jsonx.h"
#include "master.h"
#include "slave.h"
#include "xalloc.h"

struct job;

struct agg {
    ev_loop *loop;
    agg_config cfg; /* owned copy of the scalar settings; strings borrowed
                       from the caller's config, which outlives agg */
    slave *slave;
    master *master;
    hs_server *metrics_http;
    hc_client *client; /* operator requests */
    agg_metrics *metrics;
    agg_learners *learners;
    agg_k8s *k8s;      /* Kubernetes mode, or NULL */
    agg_ready_cb ready_cb;
    void *ready_ud;
    bool ready;
    ev_timer *ready_timer;
    uint64_t start_ms;
    /* demands of the last get-data, in learner order */
    char **demand_ids;
    size_t *demands;
    size_t ndemands;
    bool have_demands;
    struct job *job;   /* the coordinator task being worked on */
    char *queued_id;   /* a task that arrived while an abandoned job drained */
    cJSON *queued_data;
    uint64_t queued_us;
    ev_timer *queue_timer; /* starts the queued task, outside any callback */
    bool stopping;
    agg_done_cb done_cb;
    void *done_ud;
    ev_timer *grace_timer;
    ev_timer *drain_timer;
    ev_timer *trim_timer; /* gives freed memory back when idle */
    int plant;            /* planted bug (PLANT_BUGS build only), 0: none */
#ifdef DILEARN_PLANT_BUGS
    bool *plant_retaken;  /* per demand (demand_ids): taken back since that get-data */
#endif
};

#ifdef DILEARN_PLANT_BUGS
#define PLANTED(a, bug) ((a)->plant == (bug))
static void plant_on_retake(agg *a, const learner *l);
#endif

/* ------------------------------------------------------------------ */
/* start-up                                                            */

static void check_ready(agg *a)
{
    if (a->ready)
        return;
    bool timed_out = ev_now_ms() - a->start_ms >= (uint64_t)a->cfg.max_retry_ms;
    if (timed_out) {
        /* The window may end between two attempts: judge it now. */
        agg_learners_judge_windows(a->learners);
    } else {
        if (a->k8s && !agg_k8s_synced(a->k8s))
            return;
        if (agg_learners_in_state(a->learners, LS_JOINING) > 0)
            return;
    }
    a->ready = true;
    ev_timer_stop(a->loop, a->ready_timer);
    a->ready_timer = NULL;
    LOG_INFO(NULL, "start-up ended: %zu of %zu learners joined", agg_learners_world(a->learners),
             agg_learners_count(a->learners));
    if (a->ready_cb)
        a->ready_cb(a->ready_ud, a);
}

static void on_ready_timer(ev_loop *loop, void *data)
{
    (void)loop;
    agg *a = data;
    a->ready_timer = NULL;
    check_ready(a);
}

/* The registry's callback: every learner state change. */
static void on_learner_changed(void *ud, learner *l, learner_state from)
{
    agg *a = ud;
    if (l->state == LS_JOINED)
        agg_metrics_learner_joined(a->metrics);
    else if (from == LS_JOINED && l->state == LS_JOINING)
        agg_metrics_learner_lost(a->metrics);
#ifdef DILEARN_PLANT_BUGS
    if (l->state == LS_JOINED && l->rejoined)
        plant_on_retake(a, l);
#endif
    check_ready(a);
}

static void on_k8s_synced(void *ud)
{
    check_ready(ud);
}

char *agg_ready_line(const agg *a)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ready", 1);
    cJSON_AddItemToObject(o, "slave_port", jsonx_new_i64(slave_port(a->slave)));
    cJSON_AddItemToObject(o, "master_port", jsonx_new_i64(master_port(a->master)));
    cJSON_AddItemToObject(o, "metrics_port",
                          jsonx_new_i64(a->metrics_http ? hs_port(a->metrics_http) : master_port(a->master)));
    cJSON *joined = cJSON_AddArrayToObject(o, "joined");
    cJSON *failed = cJSON_AddArrayToObject(o, "failed");
    for (size_t i = 0; i < agg_learners_count(a->learners); i++) {
        const learner *l = agg_learners_at(a->learners, i);
        cJSON_AddItemToArray(l->state == LS_JOINED ? joined : failed, cJSON_CreateString(l->id));
    }
    char *s = jsonx_print(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------------ */
/* coordinator tasks                                                   */

typedef enum { JOB_START, JOB_GET_DATA, JOB_LEARN, JOB_CLOSE } job_kind;

/* A fan-out job's life (job_set_state is the one place that changes it):
 *   RUNNING   --every sub-task ended-----> DONE  (answered: task_done)
 *   RUNNING   --coordinator lost---------> ABANDONED (task_done: failed)
 *   RUNNING   --shutdown-----------------> DONE  (answered failed, subs cancelled)
 *   ABANDONED --every sub-task ended-----> DONE  (nothing answered)
 * A job in DONE is freed by job_set_state. */
typedef enum { JOB_RUNNING, JOB_ABANDONED, JOB_DONE } job_state;

static const char *const job_state_names[] = {"running", "abandoned", "done"};

typedef struct sub {
    struct job *job;
    char *learner_id;
    char *sub_id; /* the task id the learner was sent, or NULL */
    master_task *task;
    bool done;
    proto_task_state state;
    cJSON *result;
    char *error;
    evt_cause cause; /* why it failed */
    long http_status;
    size_t slice_start, slice_end;
    uint64_t start_us;
} sub;

/* The coordinator's learn body, taken over from the slave: the text the
 * learn data's refs point into, sent from in spans (one per learner, no
 * copy). Counted: the job holds a reference, every /task/new request that
 * sends a span of it another (hc releases it when the request is over,
 * retries included, also after the job: a request may outlive its task); the
 * last reference frees it. */
typedef struct {
    char *text;
    size_t len;
    unsigned refs;
} learn_body;

static learn_body *body_ref(learn_body *b)
{
    if (b)
        b->refs++;
    return b;
}

static void body_unref(void *ud)
{
    learn_body *b = ud;
    if (b && --b->refs == 0) {
        free(b->text);
        free(b);
    }
}

typedef struct job {
    agg *a;
    char *task_id; /* the coordinator's */
    char *name;
    job_kind kind;
    job_state state;
    sub *subs;
    size_t nsubs, remaining;
    uint64_t start_us;
    ev_timer *finish_timer; /* the last sub-task ended: finish on the next turn */
    learn_body *body;       /* a learn job sent in spans: a reference to its body */
} job;

static void start_task(agg *a, const char *task_id, const cJSON *data, learn_body *body);

#ifdef DILEARN_PLANT_BUGS
/* Planted bugs: a learner taken back after a loss (the registry's
 * learner_retaken). RETAKE_STALLS_TASK counts it into the running job,
 * which then waits for a sub-task that was never sent; RETAKE_FORGETS_DEMAND
 * marks its demand of the last get-data as forgotten (start_learn). */
static void plant_on_retake(agg *a, const learner *l)
{
    if (PLANTED(a, PLANT_RETAKE_STALLS_TASK) && a->job)
        a->job->remaining++;
    for (size_t i = 0; PLANTED(a, PLANT_RETAKE_FORGETS_DEMAND) && a->plant_retaken && i < a->ndemands; i++)
        if (strcmp(a->demand_ids[i], l->id) == 0)
            a->plant_retaken[i] = true;
}

/* PLANT_RETAKE_FORGETS_DEMAND: the items of the slice of a learner taken
 * back between a get-data and its learn are dropped and it gets an empty
 * one; the learn goes on as if all was sent. */
static void plant_forget_demands(agg *a, size_t *dem, size_t n, const cJSON *items)
{
    cJSON *list = (cJSON *)items;
    size_t start = 0;
    for (size_t i = 0; a->plant_retaken && i < n; i++) {
        if (a->plant_retaken[i]) {
            for (size_t k = 0; k < dem[i]; k++)
                cJSON_DeleteItemFromArray(list, (int)start);
            dem[i] = 0;
            a->plant_retaken[i] = false;
        }
        start += dem[i];
    }
}
#endif

static void sub_done_event(const job *j, const sub *s, const char *status, const char *reason)
{
    bool failed = strcmp(status, "completed") != 0;
    EVT_EMIT(subtask_done, .learner = s->learner_id, .name = j->name, .id = j->task_id, .sub_id = s->sub_id,
             .status = status, .reason = reason, .cause = failed ? evt_cause_name(s->cause) : NULL,
             .http_status = failed ? s->http_status : 0, .latency_ms = (double)(ev_now_us() - s->start_us) / 1e3);
}

static void job_free(job *j)
{
    for (size_t i = 0; i < j->nsubs; i++) {
        sub *s = &j->subs[i];
        if (s->task) {
            master_task_cancel(s->task);
            s->cause = EVT_CAUSE_shutdown;
            sub_done_event(j, s, "failed", "cancelled: the aggregator is shutting down");
        }
        free(s->learner_id);
        free(s->sub_id);
        cJSON_Delete(s->result);
        free(s->error);
    }
    ev_timer_stop(j->a->loop, j->finish_timer);
    body_unref(j->body);
    free(j->subs);
    free(j->task_id);
    free(j->name);
    free(j);
}

static cJSON *message_result(const char *msg)
{
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "message", msg);
    return r;
}

/* Answers the coordinator's task: ok with result, or failure (task_done).
 * Takes result. */
static void report(agg *a, const char *task_id, const char *name, uint64_t start_us, bool ok, cJSON *result,
                   evt_cause cause)
{
    double secs = (double)(ev_now_us() - start_us) / 1e6;
    agg_metrics_task(a->metrics, name, ok ? "completed" : "failed", secs);
    const char *m = ok ? NULL : jsonx_get_str(result, "message");
    EVT_EMIT(task_done, .name = name, .id = task_id, .status = ok ? "completed" : "failed",
             .message = ok ? NULL : m ? m : "", .cause = ok ? NULL : evt_cause_name(cause), .latency_ms = secs * 1e3);
    if (ok) {
        LOG_INFO(NULL, "task %s (%s) completed in %.3f s", name, task_id, secs);
        slave_task_complete(a->slave, task_id, result);
    } else {
        LOG_WARN(NULL, "task %s (%s) failed in %.3f s: %s", name, task_id, secs, m ? m : "");
        slave_task_fail(a->slave, task_id, result);
    }
}

/* The aggregator keeps freed memory for the next round (main.c: large
 * batches would page-fault in again every round otherwise); once no task
 * has come for this long, it goes back to the system, so that the
 * resident size after a big batch does not stay high forever. */
#define TRIM_IDLE_MS 2000

static void on_trim_idle(ev_loop *loop, void *data)
{
    (void)loop;
    agg *a = data;
    a->trim_timer = NULL;
    if (!a->job)
        malloc_trim(0);
}

static void trim_when_idle(agg *a)
{
    if (a->trim_timer)
        ev_timer_stop(a->loop, a->trim_timer);
    a->trim_timer = ev_timer_start(a->loop, TRIM_IDLE_MS, on_trim_idle, a);
}

static void on_queue_timer(ev_loop *loop, void *data)
{
    (void)loop;
    agg *a = data;
    a->queue_timer = NULL;
    if (a->job || !a->queued_id || a->stopping)
        return;
    char *id = a->queued_id;
    cJSON *data_ = a->queued_data;
    a->queued_id = NULL;
    a->queued_data = NULL;
    start_task(a, id, data_, NULL); /* refs were resolved when it was queued */
    free(id);
    cJSON_Delete(data_);
}

/* The one place where a job's state changes. To DONE from RUNNING it
 * answers the coordinator (ok, result: taken); DONE frees the job. */
static void job_set_state(job *j, job_state to, bool ok, cJSON *result, const char *why, evt_cause cause)
{
    agg *a = j->a;
    job_state from = j->state;
    LOG_DEBUG(NULL, "task %s (%s): job %s -> %s%s%s", j->name, j->task_id, job_state_names[from],
              job_state_names[to], why ? ": " : "", why ? why : "");
    j->state = to;
    if (to == JOB_ABANDONED) {
        double ms = (double)(ev_now_us() - j->start_us) / 1e3;
        EVT_EMIT(task_done, .name = j->name, .id = j->task_id, .status = "failed", .message = why,
                 .cause = evt_cause_name(cause), .latency_ms = ms);
        return;
    }
    if (from == JOB_RUNNING)
        report(a, j->task_id, j->name, j->start_us, ok, result, cause);
    else
        cJSON_Delete(result);
    if (a->job == j)
        a->job = NULL;
    job_free(j);
    trim_when_idle(a);
    /* A task queued behind an abandoned job starts on its own turn of the
     * loop, not inside the master's callback that ended this one. */
    if (!a->job && a->queued_id && !a->stopping && !ev_timer_active(a->loop, a->queue_timer))
        a->queue_timer = ev_timer_start(a->loop, 0, on_queue_timer, a);
}

static void job_end(job *j, bool ok, cJSON *result, evt_cause cause)
{
    job_set_state(j, JOB_DONE, ok, result, NULL, cause);
}

/* "learner1: reason" for a failed sub-task. */
static char *sub_reason(const sub *s)
{
    if (s->error)
        return xstrdup(s->error);
    if (s->state == TASK_FAILED) {
        char *r = s->result ? jsonx_print(s->result) : xstrdup("null");
        char *m = xasprintf("%s: reported failure %.300s", s->learner_id, r);
        free(r);
        return m;
    }
    return xasprintf("%s: %s", s->learner_id, proto_task_state_name(s->state));
}

static void finish_failed(job *j)
{
    size_t nfail = 0;
    evt_cause cause = EVT_CAUSE_other;
    cJSON *failed = cJSON_CreateObject();
    cJSON *unack = j->kind == JOB_LEARN ? cJSON_CreateObject() : NULL;
    xbuf why = {0};
    for (size_t i = 0; i < j->nsubs; i++) {
        sub *s = &j->subs[i];
        if (s->state == TASK_COMPLETED)
            continue;
        if (!nfail)
            cause = s->cause;
        char *r = sub_reason(s);
        cJSON_AddStringToObject(failed, s->learner_id, r);
        xbuf_printf(&why, "%s%s", nfail ? "; " : "", r);
        free(r);
        if (unack) {
            cJSON *range = cJSON_CreateArray();
            cJSON_AddItemToArray(range, jsonx_new_i64((int64_t)s->slice_start));
            cJSON_AddItemToArray(range, jsonx_new_i64((int64_t)s->slice_end));
            cJSON_AddItemToObject(unack, s->learner_id, range);
        }
        nfail++;
    }
    char *msg;
    if (j->kind == JOB_START)
        msg = xstrdup("one of learner can't start_task"); /* the reference's words */
    else
        msg = xasprintf("%s failed on %zu of %zu learners: %s", j->name, nfail, j->nsubs, why.data ? why.data : "");
    cJSON *res = message_result(msg);
    if (j->kind == JOB_START)
        cJSON_AddStringToObject(res, "detail", why.data ? why.data : "");
    cJSON_AddItemToObject(res, "failed_learners", failed);
    if (unack) {
        cJSON_AddItemToObject(res, "unacknowledged_slices", unack);
        cJSON_AddStringToObject(res, "note", "no slice of a failed learner was acknowledged; the whole batch "
                                             "should be treated as not learned by those learners");
    }
    free(msg);
    xbuf_free(&why);
    job_end(j, false, res, cause);
}

static void finish_get_data(job *j)
{
    agg *a = j->a;
    int64_t sum = 0;
    size_t *dem = xcalloc(j->nsubs, sizeof *dem);
    for (size_t i = 0; i < j->nsubs; i++) {
        int64_t b;
        const cJSON *bs = cJSON_IsObject(j->subs[i].result) ? jsonx_get(j->subs[i].result, "batch_size") : NULL;
        if (!bs || !jsonx_get_i64(bs, &b) || b < 0 || b > 100000000) {
            char *msg = xasprintf("learner_get_data_task: %s answered without a valid \"batch_size\" (a non-negative "
                                  "integer)",
                                  j->subs[i].learner_id);
            free(dem);
            job_end(j, false, message_result(msg), EVT_CAUSE_malformed);
            free(msg);
            return;
        }
        dem[i] = (size_t)b;
        sum += b;
    }
    for (size_t i = 0; i < a->ndemands; i++)
        free(a->demand_ids[i]);
    free(a->demand_ids);
    free(a->demands);
    a->demand_ids = xcalloc(j->nsubs, sizeof *a->demand_ids);
    for (size_t i = 0; i < j->nsubs; i++)
        a->demand_ids[i] = xstrdup(j->subs[i].learner_id);
    a->demands = dem;
    a->ndemands = j->nsubs;
    a->have_demands = true;
#ifdef DILEARN_PLANT_BUGS
    free(a->plant_retaken);
    a->plant_retaken = xcalloc(j->nsubs ? j->nsubs : 1, sizeof *a->plant_retaken); /* these demands are fresh */
#endif
    cJSON *merged = jsonx_dup(j->subs[0].result);
    cJSON_ReplaceItemInObjectCaseSensitive(merged, "batch_size", jsonx_new_i64(sum));
    job_end(j, true, merged, EVT_CAUSE_other);
}

static void finish_merge(job *j)
{
    cJSON **vals = xcalloc(j->nsubs, sizeof *vals);
    const char **names = xcalloc(j->nsubs, sizeof *names);
    for (size_t i = 0; i < j->nsubs; i++) {
        vals[i] = j->subs[i].result;
        names[i] = j->subs[i].learner_id;
    }
    char err[512];
    cJSON *merged = agg_merge(vals, j->nsubs, names, err, sizeof err);
    free(vals);
    free(names);
    if (!merged) {
        char *msg = xasprintf("%s: %s", j->name, err);
        job_end(j, false, message_result(msg), EVT_CAUSE_unmergeable);
        free(msg);
        return;
    }
#ifdef DILEARN_PLANT_BUGS
    if (PLANTED(j->a, PLANT_MERGE_DROPS_KEY) && cJSON_IsObject(merged) && merged->child) {
        cJSON *last = merged->child;
        while (last->next)
            last = last->next;
        cJSON_DeleteItemFromObjectCaseSensitive(merged, last->string);
    }
#endif
    job_end(j, true, merged, EVT_CAUSE_other);
}

static void job_finish(job *j)
{
    for (size_t i = 0; i < j->nsubs; i++)
        if (j->subs[i].state != TASK_COMPLETED) {
            finish_failed(j);
            return;
        }
    switch (j->kind) {
    case JOB_START:
        job_end(j, true, message_result("learner task has started"), EVT_CAUSE_other);
        break;
    case JOB_GET_DATA:
        finish_get_data(j);
        break;
    case JOB_LEARN:
    case JOB_CLOSE:
        finish_merge(j);
        break;
    }
}

static void on_finish_timer(ev_loop *loop, void *data)
{
    (void)loop;
    job *j = data;
    j->finish_timer = NULL;
    job_finish(j);
}

static void on_sub_done(void *ud, master_task *t, proto_task_state st, cJSON **result, const char *error)
{
    sub *s = ud;
    s->cause = master_task_cause(t);
    s->http_status = master_task_http_status(t);
    s->task = NULL;
    s->done = true;
    s->state = st;
    s->result = *result;
    *result = NULL;
    s->error = error ? xstrdup(error) : NULL;
    if (st == TASK_COMPLETED) {
        sub_done_event(s->job, s, "completed", NULL);
    } else {
        char *r = sub_reason(s);
        sub_done_event(s->job, s, "failed", r);
        free(r);
    }
    /* The job ends on the loop's next turn, not inside master's callback:
     * what master does after it (a lost connection's on_lost: learner_left)
     * comes first, and the answer to the coordinator after. */
    if (--s->job->remaining == 0)
        s->job->finish_timer = ev_timer_start(s->job->a->loop, 0, on_finish_timer, s->job);
}

static job *job_new(agg *a, const char *task_id, const char *name, job_kind kind, size_t n)
{
    job *j = xcalloc(1, sizeof *j);
    j->a = a;
    j->task_id = xstrdup(task_id);
    j->name = xstrdup(name);
    j->kind = kind;
    j->state = JOB_RUNNING;
    j->subs = xcalloc(n ? n : 1, sizeof *j->subs);
    j->nsubs = n;
    j->remaining = n;
    j->start_us = ev_now_us();
    return j;
}

/* Sends one sub-task; a send that cannot start counts as a failed learner.
 * span: a learn task sent as AGG_LEARN_HEAD, that span of j->body,
 * AGG_LEARN_TAIL (data NULL); else framed: data has the room of
 * master_task_send_framed() around it. items: the learn items it carries
 * (-1: not a learn task). */
static void sub_send(job *j, size_t i, learner *l, char *data, size_t len, bool framed, const agg_span *span,
                     int64_t items)
{
    agg *a = j->a;
    sub *s = &j->subs[i];
    s->job = j;
    s->learner_id = xstrdup(l->id); // NOLINT(clang-analyzer-core.NullDereference): start_learn returns when one is gone
    s->start_us = ev_now_us();
    char err[256];
    long deadline = a->cfg.task_deadline_ms;
#ifdef DILEARN_PLANT_BUGS
    if (PLANTED(a, PLANT_NO_DEADLINE))
        deadline = -1;
#endif
    if (span)
        s->task = master_task_send_span(l->conn, AGG_LEARN_HEAD, sizeof AGG_LEARN_HEAD - 1, j->body->text + span->off,
                                        span->len, body_unref, body_ref(j->body), AGG_LEARN_TAIL,
                                        sizeof AGG_LEARN_TAIL - 1, deadline, on_sub_done, s, err, sizeof err);
    else if (framed)
        s->task = master_task_send_framed(l->conn, data, len, deadline, on_sub_done, s, err, sizeof err);
    else
        s->task = master_task_send(l->conn, data, len, deadline, on_sub_done, s, err, sizeof err);
    if (!s->task) {
        s->done = true;
        s->state = TASK_START_FAILED;
        s->cause = EVT_CAUSE_not_connected;
        s->error = xasprintf("%s: %s", l->id, err);
        j->remaining--;
        sub_done_event(j, s, "failed", s->error);
        return;
    }
    s->sub_id = xstrdup(master_task_id(s->task));
    EVT_EMIT(subtask_sent, .learner = l->id, .name = j->name, .id = j->task_id, .sub_id = s->sub_id,
             .items = items);
}

/* Makes j the running job; a job whose every send failed ends at once. */
static void job_run(job *j)
{
    j->a->job = j;
    if (j->remaining == 0)
        job_finish(j);
}

static void fan_out_all(agg *a, const char *task_id, const char *name, job_kind kind, const char *data_json)
{
    size_t w = agg_learners_world(a->learners);
    if (w == 0) {
        report(a, task_id, name, ev_now_us(), false, message_result("no connected learner"), EVT_CAUSE_not_connected);
        return;
    }
    job *j = job_new(a, task_id, name, kind, w);
    size_t k = 0;
    for (size_t i = 0; i < agg_learners_count(a->learners); i++) {
        learner *l = agg_learners_at(a->learners, i);
        if (l->state == LS_JOINED)
            sub_send(j, k++, l, xstrdup(data_json), strlen(data_json), false, NULL, -1);
    }
    job_run(j);
}

/* Splits items by dem: into spans of body (returns 0, *spanned true) when
 * they are refs into it, else into copies framed for
 * master_task_send_framed() (slices, lens). -1 with err. */
static int split_learn(const cJSON *items, const learn_body *body, const size_t *dem, size_t n, agg_span *spans,
                       bool *spanned, char **slices, size_t *lens, char *err, size_t errlen)
{
    int rc = body ? agg_split_spans(items, body->text, body->len, dem, n, spans, err, errlen) : 1;
    *spanned = rc == 0;
    if (rc == 1)
        rc = agg_split_learn_tasks_framed(items, body ? body->text : NULL, dem, n, MASTER_TASK_HEAD, MASTER_TASK_TAIL,
                                          slices, lens, err, errlen);
    return rc;
}

/* body: what data's refs point into (the slave's task text), or NULL. */
static void start_learn(agg *a, const char *task_id, const cJSON *data, learn_body *body)
{
    const char *name = "learner_learn_task";
    uint64_t t0 = ev_now_us();
    if (!a->have_demands) {
        report(a, task_id, name, t0, false,
               message_result("learner_learn_task before any learner_get_data_task: the aggregator does not know "
                              "how to split the data"),
               EVT_CAUSE_wrong_length);
        return;
    }
    const cJSON *items = jsonx_get(data, "data");
    if (!items) {
        report(a, task_id, name, t0, false, message_result("learner_learn_task has no \"data\" list"),
               EVT_CAUSE_malformed);
        return;
    }
    /* Every learner of the last get-data must still be here. */
    size_t start = 0;
    xbuf gone = {0};
    cJSON *unack = cJSON_CreateObject();
    learner **ls = xcalloc(a->ndemands ? a->ndemands : 1, sizeof *ls);
    for (size_t i = 0; i < a->ndemands; i++) {
        learner *l = agg_learners_find(a->learners, a->demand_ids[i]);
        if (!l || l->state != LS_JOINED)
            xbuf_printf(&gone, "%s%s (slice [%zu, %zu))", gone.len ? ", " : "", a->demand_ids[i], start,
                        start + a->demands[i]);
        ls[i] = l;
        start += a->demands[i];
    }
    if (gone.len) {
        start = 0;
        for (size_t i = 0; i < a->ndemands; i++) {
            cJSON *range = cJSON_CreateArray();
            cJSON_AddItemToArray(range, jsonx_new_i64((int64_t)start));
            cJSON_AddItemToArray(range, jsonx_new_i64((int64_t)(start + a->demands[i])));
            cJSON_AddItemToObject(unack, a->demand_ids[i], range);
            start += a->demands[i];
        }
        char *msg = xasprintf("learner_learn_task: learner(s) of the last get-data are gone: %s; nothing was sent",
                              gone.data);
        cJSON *r = message_result(msg);
        cJSON_AddItemToObject(r, "unacknowledged_slices", unack);
        free(msg);
        xbuf_free(&gone);
        free(ls);
        report(a, task_id, name, t0, false, r, EVT_CAUSE_not_connected);
        return;
    }
    cJSON_Delete(unack);
    size_t n = a->ndemands;
    size_t *dem = xmalloc(n * sizeof *dem);
    memcpy(dem, a->demands, n * sizeof *dem);
#ifdef DILEARN_PLANT_BUGS
    if (PLANTED(a, PLANT_SPLIT_OFF_BY_ONE) && n > 0 && dem[0] > 0) {
        dem[0]--;
        if (n > 1)
            dem[n - 1]++;
    }
    if (PLANTED(a, PLANT_RETAKE_FORGETS_DEMAND))
        plant_forget_demands(a, dem, n, items);
#endif
    char **slices = xcalloc(n ? n : 1, sizeof *slices);
    size_t *lens = xcalloc(n ? n : 1, sizeof *lens);
    agg_span *spans = xcalloc(n ? n : 1, sizeof *spans);
    bool spanned = false;
    char err[512];
    int rc = split_learn(items, body, dem, n, spans, &spanned, slices, lens, err, sizeof err);
#ifdef DILEARN_PLANT_BUGS
    if (rc < 0 && PLANTED(a, PLANT_SPLIT_OFF_BY_ONE)) {
        /* the planted bug sends short slices silently, as the reference */
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += dem[i];
        dem[n - 1] -= total > 0 ? 1 : 0;
        rc = split_learn(items, body, dem, n, spans, &spanned, slices, lens, err, sizeof err);
    }
#endif
    if (rc < 0) {
        char *msg = xasprintf("learner_learn_task: %s", err);
        report(a, task_id, name, t0, false, message_result(msg), EVT_CAUSE_wrong_length);
        free(msg);
        free(slices);
        free(lens);
        free(spans);
        free(dem);
        free(ls);
        return;
    }
    job *j = job_new(a, task_id, name, JOB_LEARN, n);
    j->start_us = t0;
    if (spanned)
        j->body = body_ref(body);
    start = 0;
    for (size_t i = 0; i < n; i++) {
        /* the task's data: a span of the body, or built by the split */
        sub_send(j, i, ls[i], slices[i], lens[i], true, spanned ? &spans[i] : NULL, (int64_t)dem[i]);
        j->subs[i].slice_start = start;
        j->subs[i].slice_end = start + dem[i];
        start += dem[i];
    }
    free(slices);
    free(lens);
    free(spans);
    free(dem);
    free(ls);
    job_run(j);
}

static void start_task(agg *a, const char *task_id, const cJSON *data, learn_body *body)
{
    const char *name = jsonx_get_str(data, "name");
    if (!name) {
        report(a, task_id, "other", ev_now_us(), false, message_result("task name error"), EVT_CAUSE_unknown_task);
        return;
    }
    LOG_INFO(NULL, "task %s (%s) received; world size %zu", name, task_id, agg_learners_world(a->learners));
    if (strcmp(name, "resource") == 0) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "gpu", jsonx_new_i64((int64_t)agg_learners_world(a->learners)));
        report(a, task_id, name, ev_now_us(), true, r, EVT_CAUSE_other);
    } else if (strcmp(name, "learner_start_task") == 0) {
        const cJSON *ti = jsonx_get(data, "task_info");
        char *tit = ti ? jsonx_print(ti) : xstrdup("{}");
        char *d = xasprintf("{\"name\": \"learner_start_task\", \"task_info\": %s}", tit);
        free(tit);
        fan_out_all(a, task_id, name, JOB_START, d);
        free(d);
    } else if (strcmp(name, "learner_get_data_task") == 0) {
        fan_out_all(a, task_id, name, JOB_GET_DATA, "{\"name\": \"learner_get_data_task\"}");
    } else if (strcmp(name, "learner_learn_task") == 0) {
        start_learn(a, task_id, data, body);
    } else if (strcmp(name, "learner_close_task") == 0) {
        fan_out_all(a, task_id, name, JOB_CLOSE, "{\"name\": \"learner_close_task\"}");
    } else {
        report(a, task_id, name, ev_now_us(), false, message_result("task name error"), EVT_CAUSE_unknown_task);
    }
}

static void on_coord_task(void *ud, const char *task_id, const cJSON *data, slave_verdict *v)
{
    agg *a = ud;
    const char *text = slave_task_text(a->slave);
    if (a->stopping) {
        v->refuse = true;
        snprintf(v->message, sizeof v->message, "Task refused: the aggregator is shutting down.");
        return;
    }
    const char *name = jsonx_get_str(data, "name");
    bool learn = name && strcmp(name, "learner_learn_task") == 0;
    const cJSON *items = learn ? jsonx_get(data, "data") : NULL;
    EVT_EMIT(task_received, .name = name, .id = task_id,
             .items = cJSON_IsArray(items) ? (int64_t)cJSON_GetArraySize(items) : -1);
    if (a->job) {
        /* Only an abandoned job (its coordinator was lost) can still run:
         * the slave admits one task at a time. Queue behind it. */
        free(a->queued_id);
        cJSON_Delete(a->queued_data);
        a->queued_id = xstrdup(task_id);
        a->queued_data = jsonx_dup(data);
        a->queued_us = ev_now_us();
        jsonx_unref(a->queued_data, text); /* the body is freed when this returns */
        LOG_INFO(NULL, "task %s queued until the previous fan-out drains", task_id);
        return;
    }
    /* Learn data items are refs into the body (raw_refs): the body is taken
     * over from the slave and each learner's items sent straight from it;
     * any other task gets a tree with every text of its own. */
    if (learn) {
        learn_body *body = xcalloc(1, sizeof *body);
        body->text = slave_task_take_text(a->slave, &body->len);
        body->refs = 1;
        if (!body->text) { /* cannot happen with raw_refs; the copying split then */
            free(body);
            body = NULL;
        }
        start_task(a, task_id, data, body);
        body_unref(body); /* the job and its requests hold their own */
        return;
    }
    cJSON *own = jsonx_dup(data);
    jsonx_unref(own, text);
    start_task(a, task_id, own, NULL);
    cJSON_Delete(own);
}

/* The queued task will never be answered: its task_done says why. */
static void drop_queued(agg *a, const char *why, bool answer)
{
    if (!a->queued_id)
        return;
    const char *qn = jsonx_get_str(a->queued_data, "name");
    if (answer)
        report(a, a->queued_id, qn ? qn : "other", a->queued_us, false, message_result(why), EVT_CAUSE_shutdown);
    else
        EVT_EMIT(task_done, .name = qn, .id = a->queued_id, .status = "failed", .message = why,
                 .cause = evt_cause_name(EVT_CAUSE_disconnected), .latency_ms = (double)(ev_now_us() - a->queued_us) / 1e3);
    free(a->queued_id);
    cJSON_Delete(a->queued_data);
    a->queued_id = NULL;
    a->queued_data = NULL;
    ev_timer_stop(a->loop, a->queue_timer);
    a->queue_timer = NULL;
}

static void on_coord_lost(void *ud, const char *why)
{
    agg *a = ud;
    LOG_WARN(NULL, "coordinator lost: %s", why);
    char *msg = xasprintf("abandoned: the coordinator was lost (%s)", why);
    if (a->job && a->job->state == JOB_RUNNING)
        job_set_state(a->job, JOB_ABANDONED, false, NULL, msg, EVT_CAUSE_disconnected);
    drop_queued(a, msg, false);
    free(msg);
}

/* ------------------------------------------------------------------ */
/* metrics                                                             */

static void reply_metrics(agg *a, hs_request *r)
{
    agg_gauges g = {0};
    size_t n = agg_learners_count(a->learners);
    g.learners_connected = agg_learners_world(a->learners);
    g.learners_known = n;
    g.learners_failed = agg_learners_in_state(a->learners, LS_FAILED);
    agg_learner_gauge *lg = xcalloc(n ? n : 1, sizeof *lg);
    for (size_t i = 0; i < n; i++) {
        const learner *l = agg_learners_at(a->learners, i);
        lg[i].id = l->id;
        lg[i].state = l->state;
        lg[i].heartbeat_age_s = l->state == LS_JOINED ? (double)master_conn_heartbeat_age_ms(l->conn) / 1e3 : -1;
    }
    g.learners = lg;
    g.nlearners = n;
    const char *states[LS_NSTATES];
    for (int i = 0; i < LS_NSTATES; i++)
        states[i] = agg_learner_state_name((learner_state)i);
    g.state_names = states;
    g.nstates = LS_NSTATES;
    uint64_t now = ev_now_us(), oldest = now;
    if (a->job && a->job->state == JOB_RUNNING) {
        g.tasks_in_flight++;
        oldest = a->job->start_us;
    }
    if (a->job)
        g.subtasks_in_flight = a->job->remaining;
    if (a->queued_id) {
        g.tasks_in_flight++;
        oldest = a->queued_us < oldest ? a->queued_us : oldest;
    }
    g.oldest_task_age_s = (double)(now - oldest) / 1e6;
    evt_stats es = evt_get_stats();
    g.events_lines = es.lines;
    g.events_write_errors = es.write_errors;
    unsigned long long in, out;
    slave_bytes(a->slave, &in, &out);
    g.bytes_received = in;
    g.bytes_sent = out;
    master_bytes(a->master, &in, &out);
    g.bytes_received += in;
    g.bytes_sent += out;
    char *text = agg_metrics_render(a->metrics, &g);
    free(lg);
    hs_reply(r, 200, "text/plain; version=0.0.4", text, strlen(text));
}

static bool on_master_http(void *ud, hs_request *r)
{
    agg *a = ud;
    if (strcmp(hs_path(r), "/metrics") != 0 || strcmp(hs_method(r), "GET") != 0)
        return false;
    reply_metrics(a, r);
    return true;
}

static void on_metrics_http(void *ud, hs_request *r)
{
    if (!on_master_http(ud, r))
        hs_reply_json(r, 404, proto_envelope(false, 404, "Only GET /metrics is served here.", NULL));
}

static void on_learner_lost(void *ud, master_conn *c, const char *why)
{
    agg *a = ud;
    agg_learners_conn_lost(a->learners, c, why);
}

/* ------------------------------------------------------------------ */
/* life                                                                */

static int plant_from_env(void)
{
#ifdef DILEARN_PLANT_BUGS
    const char *p = getenv("DILEARN_PLANT_BUG");
    if (!p)
        return PLANT_NONE;
    if (strcmp(p, "merge_drops_key") == 0)
        return PLANT_MERGE_DROPS_KEY;
    if (strcmp(p, "split_off_by_one") == 0)
        return PLANT_SPLIT_OFF_BY_ONE;
    if (strcmp(p, "no_deadline") == 0)
        return PLANT_NO_DEADLINE;
    if (strcmp(p, "no_retake") == 0)
        return PLANT_NO_RETAKE;
    if (strcmp(p, "retake_forgets_demand") == 0)
        return PLANT_RETAKE_FORGETS_DEMAND;
    if (strcmp(p, "retake_stalls_task") == 0)
        return PLANT_RETAKE_STALLS_TASK;
#endif
    return PLANT_NONE;
}

static slave *make_slave(agg *a, const agg_config *cfg, char *err, size_t errlen)
{
    slave_config sc;
    slave_config_init(&sc);
    sc.name = "aggregator";
    sc.http.host = cfg->slave_host;
    sc.http.port = cfg->slave_port;
    sc.http.body_limit = cfg->body_limit;
    sc.channel = cfg->channel;
    sc.heartbeat_span_ms = cfg->heartbeat_span_ms;
    sc.allow_fast_heartbeat = true;
    sc.allow_master = cfg->allow_master;
    sc.retries = cfg->request_retries;
    sc.retry_wait_ms = cfg->request_retry_wait_ms;
    sc.raw_depth = 2;   /* learn data items stay raw text ... */
    sc.raw_refs = true; /* ... in the body itself, split from there */
    slave_callbacks scb = {.on_task = on_coord_task, .on_master_lost = on_coord_lost};
    slave *s = slave_new(a->loop, &sc, &scb, a, err, errlen);
    if (!s) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "slave (coordinator side): %s", err);
        snprintf(err, errlen, "%s", tmp);
    }
    return s;
}

static master *make_master(agg *a, const agg_config *cfg, char *err, size_t errlen)
{
    master_config mc;
    master_config_init(&mc);
    /* Each learner may hold a heartbeat and a report connection at once. */
    mc.http.connection_limit = (unsigned)(cfg->nlearners * 4 + 64 > 8192 ? cfg->nlearners * 4 + 64 : 8192);
    mc.http.host = cfg->master_host;
    mc.http.port = cfg->master_port;
    mc.http.body_limit = cfg->body_limit;
    mc.advertise = cfg->advertise;
    mc.channel = cfg->channel;
    mc.heartbeat_tolerance_ms = cfg->heartbeat_tolerance_ms;
    mc.heartbeat_check_ms = cfg->heartbeat_check_ms;
    mc.task_deadline_ms = cfg->task_deadline_ms;
    mc.retries = cfg->request_retries;
    mc.connect_retries = 0; /* joins are retried every retry_interval here */
    mc.retry_wait_ms = cfg->request_retry_wait_ms;
    mc.connect_timeout_ms =
        cfg->retry_interval_ms < 2000 ? (cfg->retry_interval_ms > 100 ? cfg->retry_interval_ms : 100) : 2000;
    /* The registry follows master's connection callbacks. */
    master_callbacks mcb = {.on_lost = on_learner_lost, .on_http = on_master_http};
    master *m = master_new(a->loop, &mc, &mcb, a, err, errlen);
    if (!m) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "master (learner side): %s", err);
        snprintf(err, errlen, "%s", tmp);
    }
    return m;
}

agg *agg_new(ev_loop *loop, const agg_config *cfg, agg_ready_cb ready, void *ud, char *err, size_t errlen)
{
    agg *a = xcalloc(1, sizeof *a);
    a->loop = loop;
    a->cfg = *cfg;
    a->ready_cb = ready;
    a->ready_ud = ud;
    a->metrics = agg_metrics_new();
    a->start_ms = ev_now_ms();
    a->plant = plant_from_env();
    if (a->plant)
        LOG_WARN(NULL, "PLANTED BUG %d is active (DILEARN_PLANT_BUG): this build is for testing the tests", a->plant);
    agg_learners_config lc = {.max_retry_ms = cfg->max_retry_ms, .retry_interval_ms = cfg->retry_interval_ms};
#ifdef DILEARN_PLANT_BUGS
    lc.no_retake = PLANTED(a, PLANT_NO_RETAKE);
#endif
    a->learners = agg_learners_new(loop, &lc, on_learner_changed, a);
    a->slave = make_slave(a, cfg, err, errlen);
    a->master = a->slave ? make_master(a, cfg, err, errlen) : NULL;
    if (a->master && cfg->metrics_port >= 0) {
        hs_config hc;
        hs_config_init(&hc);
        hc.host = cfg->master_host;
        hc.port = cfg->metrics_port;
        a->metrics_http = hs_start(loop, &hc, on_metrics_http, a, err, errlen);
    }
    if (!a->master || (cfg->metrics_port >= 0 && !a->metrics_http)) {
        agg_free(a);
        return NULL;
    }
    agg_learners_set_master(a->learners, a->master);
    a->client = hc_new(loop);
    LOG_INFO(NULL, "listening: coordinator side %s:%d, learner side %s:%d (advertised as %s)", cfg->slave_host,
             slave_port(a->slave), cfg->master_host, master_port(a->master), master_advertise(a->master));
    for (size_t i = 0; i < cfg->nlearners; i++)
        agg_learners_add(a->learners, cfg->learners[i].id, cfg->learners[i].host, cfg->learners[i].port);
    if (cfg->k8s_url)
        a->k8s = agg_k8s_new(loop, a->client, a->learners, &a->cfg, on_k8s_synced, a);
    a->ready_timer = ev_timer_start(loop, (uint64_t)cfg->max_retry_ms + 1, on_ready_timer, a);
    check_ready(a);
    return a;
}

void agg_free(agg *a)
{
    if (!a)
        return;
    agg_k8s_free(a->k8s);
    if (a->job)
        job_free(a->job);
    agg_learners_free(a->learners);
    for (size_t i = 0; i < a->ndemands; i++)
        free(a->demand_ids[i]);
    free(a->demand_ids);
    free(a->demands);
#ifdef DILEARN_PLANT_BUGS
    free(a->plant_retaken);
#endif
    free(a->queued_id);
    cJSON_Delete(a->queued_data);
    ev_timer_stop(a->loop, a->ready_timer);
    ev_timer_stop(a->loop, a->grace_timer);
    ev_timer_stop(a->loop, a->drain_timer);
    ev_timer_stop(a->loop, a->trim_timer);
    ev_timer_stop(a->loop, a->queue_timer);
    if (a->metrics_http)
        hs_stop(a->metrics_http);
    master_free(a->master);
    slave_free(a->slave);
    hc_free(a->client);
    agg_metrics_free(a->metrics);
    free(a);
}

static void shutdown_done(agg *a)
{
    if (a->grace_timer) {
        ev_timer_stop(a->loop, a->grace_timer);
        a->grace_timer = NULL;
    }
    if (a->drain_timer) {
        ev_timer_stop(a->loop, a->drain_timer);
        a->drain_timer = NULL;
    }
    agg_done_cb cb = a->done_cb;
    a->done_cb = NULL;
    if (cb)
        cb(a->done_ud);
}

static void on_grace(ev_loop *loop, void *data)
{
    (void)loop;
    agg *a = data;
    a->grace_timer = NULL;
    LOG_WARN(NULL, "shutdown: grace period over with requests still in flight");
    shutdown_done(a);
}

static void on_drain_check(ev_loop *loop, void *data)
{
    (void)loop;
    agg *a = data;
    a->drain_timer = NULL;
    if (slave_reports_pending(a->slave) == 0 && master_requests_pending(a->master) == 0) {
        shutdown_done(a);
        return;
    }
    a->drain_timer = ev_timer_start(a->loop, 10, on_drain_check, a);
}

void agg_shutdown(agg *a, long grace_ms, agg_done_cb done, void *ud)
{
    if (a->stopping)
        return;
    a->stopping = true;
    a->done_cb = done;
    a->done_ud = ud;
    LOG_INFO(NULL, "shutting down: disconnecting %zu learners", agg_learners_world(a->learners));
    if (a->job) {
        job *j = a->job;
        /* Answered failed if it still had a coordinator; the learners'
         * sub-tasks are cancelled. */
        job_set_state(j, JOB_DONE, false,
                      message_result("the aggregator is shutting down (signal); the task was not finished"),
                      "shutdown", EVT_CAUSE_shutdown);
    }
    /* A task waiting behind an abandoned fan-out fails too. */
    drop_queued(a, "the aggregator is shutting down (signal); the task was not started", true);
    agg_k8s_stop(a->k8s);
    agg_learners_stop(a->learners);
    a->grace_timer = ev_timer_start(a->loop, (uint64_t)grace_ms, on_grace, a);
    on_drain_check(a->loop, a);
}
