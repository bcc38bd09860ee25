/* agg_core: learners, the coordinator's tasks, fan-out, split and merge. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"
#include "agg_merge.h"
#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

/* ------------------------------------------------------------------ */
/* learners                                                            */

static void learner_try(learner *l);

static void on_retry_timer(ev_loop *loop, void *data)
{
    (void)loop;
    learner *l = data;
    l->retry = NULL;
    learner_try(l);
}

static void learner_schedule_retry(learner *l)
{
    agg *a = l->a;
    if (a->stopping || l->retry)
        return;
    l->state = L_WAITING;
    l->retry = ev_timer_start(a->loop, (uint64_t)a->cfg.retry_interval_ms, on_retry_timer, l);
}

/* Marks a learner that has not joined within max_retry of its window as
 * failed (once per window). Returns true if it is failed. */
static bool learner_window_over(learner *l, const char *last_error)
{
    agg *a = l->a;
    if (l->failed)
        return true;
    if (l->state == L_CONNECTED || ev_now_ms() - l->window_start < (uint64_t)a->cfg.max_retry_ms)
        return false;
    l->failed = true;
    LOG_ERROR(l->id, "learner did not join within max_retry of %ld ms%s%s", a->cfg.max_retry_ms,
              last_error ? ": " : "", last_error ? last_error : "");
    return true;
}

static void on_learner_connected(void *ud, master_conn *c, bool ok, const char *error)
{
    learner *l = ud;
    agg *a = l->a;
    if (ok) {
        l->state = L_CONNECTED;
        l->conn = c;
        l->failed = false;
        master_conn_set_ud(c, l);
        agg_metrics_learner_joined(a->metrics);
        LOG_INFO(l->id, "learner joined (%s:%d); world size %zu", l->host, l->port, agg_world_size(a));
        agg_check_ready(a);
        return;
    }
    l->conn = NULL;
    if (!learner_window_over(l, error)) {
        LOG_DEBUG(l->id, "join attempt failed (%llu ms into the window): %s",
                  (unsigned long long)(ev_now_ms() - l->window_start), error);
    } else {
        agg_check_ready(a);
    }
    learner_schedule_retry(l);
}

static void learner_try(learner *l)
{
    agg *a = l->a;
    char err[256];
    if (a->stopping)
        return;
    l->state = L_CONNECTING;
    master_conn *c = master_connect(a->master, l->id, l->host, l->port, NULL, on_learner_connected, l, err, sizeof err);
    if (!c) {
        LOG_WARN(l->id, "cannot start connecting: %s", err);
        learner_schedule_retry(l);
    }
}

learner *agg_learner_find(agg *a, const char *id)
{
    for (size_t i = 0; i < a->nlearners; i++)
        if (strcmp(a->learners[i]->id, id) == 0)
            return a->learners[i];
    return NULL;
}

learner *agg_learner_add(agg *a, const char *id, const char *host, int port)
{
    learner *l = xcalloc(1, sizeof *l);
    l->a = a;
    l->id = xstrdup(id);
    l->host = xstrdup(host);
    l->port = port;
    l->window_start = ev_now_ms();
    if (a->nlearners == a->caplearners) {
        a->caplearners = a->caplearners ? a->caplearners * 2 : 16;
        a->learners = xrealloc(a->learners, a->caplearners * sizeof *a->learners);
    }
    a->learners[a->nlearners++] = l;
    learner_try(l);
    return l;
}

static void learner_free(agg *a, learner *l)
{
    if (l->retry)
        ev_timer_stop(a->loop, l->retry);
    free(l->id);
    free(l->host);
    free(l);
}

void agg_learner_remove(agg *a, learner *l, const char *why)
{
    for (size_t i = 0; i < a->nlearners; i++)
        if (a->learners[i] == l) {
            memmove(a->learners + i, a->learners + i + 1, (a->nlearners - i - 1) * sizeof *a->learners);
            a->nlearners--;
            break;
        }
    if (l->conn)
        master_disconnect(l->conn, why);
    else {
        master_conn *c = master_find(a->master, l->id); /* a connect in flight */
        if (c)
            master_drop(c, why);
    }
    LOG_INFO(l->id, "learner removed: %s", why);
    learner_free(a, l);
}

size_t agg_world_size(const agg *a)
{
    size_t n = 0;
    for (size_t i = 0; i < a->nlearners; i++)
        n += a->learners[i]->state == L_CONNECTED;
    return n;
}

static void on_learner_lost(void *ud, master_conn *c, const char *why)
{
    agg *a = ud;
    learner *l = master_conn_ud(c);
    if (!l)
        return;
    l->conn = NULL;
    l->state = L_WAITING;
    l->window_start = ev_now_ms();
    agg_metrics_learner_lost(a->metrics);
    LOG_WARN(l->id, "learner left the world (%s); world size %zu; retrying every %ld ms", why, agg_world_size(a),
             a->cfg.retry_interval_ms);
    if (a->plant == PLANT_NO_RETAKE)
        return;
    learner_schedule_retry(l);
}

/* ------------------------------------------------------------------ */
/* start-up                                                            */

void agg_check_ready(agg *a)
{
    if (a->ready)
        return;
    bool timed_out = ev_now_ms() - a->start_ms >= (uint64_t)a->cfg.max_retry_ms;
    if (timed_out) {
        /* The window may end between two attempts: judge it now. */
        for (size_t i = 0; i < a->nlearners; i++)
            learner_window_over(a->learners[i], NULL);
    } else {
        if (a->k8s && !a->k8s_synced)
            return;
        for (size_t i = 0; i < a->nlearners; i++)
            if (a->learners[i]->state != L_CONNECTED && !a->learners[i]->failed)
                return;
    }
    a->ready = true;
    if (a->ready_timer) {
        ev_timer_stop(a->loop, a->ready_timer);
        a->ready_timer = NULL;
    }
    LOG_INFO(NULL, "start-up ended: %zu of %zu learners joined", agg_world_size(a), a->nlearners);
    if (a->ready_cb)
        a->ready_cb(a->ready_ud, a);
}

static void on_ready_timer(ev_loop *loop, void *data)
{
    (void)loop;
    agg *a = data;
    a->ready_timer = NULL;
    agg_check_ready(a);
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
    for (size_t i = 0; i < a->nlearners; i++) {
        const learner *l = a->learners[i];
        if (l->state == L_CONNECTED)
            cJSON_AddItemToArray(joined, cJSON_CreateString(l->id));
        else
            cJSON_AddItemToArray(failed, cJSON_CreateString(l->id));
    }
    char *s = jsonx_print(o);
    cJSON_Delete(o);
    return s;
}

/* ------------------------------------------------------------------ */
/* coordinator tasks                                                   */

typedef enum { JOB_START, JOB_GET_DATA, JOB_LEARN, JOB_CLOSE } job_kind;

typedef struct sub {
    struct job *job;
    char *learner_id;
    master_task *task;
    bool done;
    proto_task_state state;
    cJSON *result;
    char *error;
    size_t slice_start, slice_end;
} sub;

typedef struct job {
    agg *a;
    char *task_id; /* the coordinator's */
    char *name;
    job_kind kind;
    sub *subs;
    size_t nsubs, remaining;
    bool abandoned;
    uint64_t start_us;
} job;

static void start_task(agg *a, const char *task_id, const cJSON *data, const char *text);

static void job_free(job *j)
{
    for (size_t i = 0; i < j->nsubs; i++) {
        if (j->subs[i].task)
            master_task_cancel(j->subs[i].task);
        free(j->subs[i].learner_id);
        cJSON_Delete(j->subs[i].result);
        free(j->subs[i].error);
    }
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

/* Reports the coordinator's task: ok with result, or failure. Takes result. */
static void report(agg *a, const char *task_id, const char *name, uint64_t start_us, bool ok, cJSON *result)
{
    double secs = (double)(ev_now_us() - start_us) / 1e6;
    agg_metrics_task(a->metrics, name, ok ? "completed" : "failed", secs);
    if (ok) {
        LOG_INFO(NULL, "task %s (%s) completed in %.3f s", name, task_id, secs);
        slave_task_complete(a->slave, task_id, result);
    } else {
        const char *m = jsonx_get_str(result, "message");
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

static void job_end(job *j, bool ok, cJSON *result)
{
    agg *a = j->a;
    if (!j->abandoned)
        report(a, j->task_id, j->name, j->start_us, ok, result);
    else
        cJSON_Delete(result);
    if (a->job == j)
        a->job = NULL;
    job_free(j);
    trim_when_idle(a);
    if (!a->job && a->queued_id && !a->stopping) {
        char *id = a->queued_id;
        cJSON *data = a->queued_data;
        a->queued_id = NULL;
        a->queued_data = NULL;
        start_task(a, id, data, NULL); /* refs were resolved when it was queued */
        free(id);
        cJSON_Delete(data);
    }
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
    cJSON *failed = cJSON_CreateObject();
    cJSON *unack = j->kind == JOB_LEARN ? cJSON_CreateObject() : NULL;
    xbuf why = {0};
    for (size_t i = 0; i < j->nsubs; i++) {
        sub *s = &j->subs[i];
        if (s->state == TASK_COMPLETED)
            continue;
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
    job_end(j, false, res);
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
            job_end(j, false, message_result(msg));
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
    cJSON *merged = jsonx_dup(j->subs[0].result);
    cJSON_ReplaceItemInObjectCaseSensitive(merged, "batch_size", jsonx_new_i64(sum));
    job_end(j, true, merged);
}

static void finish_merge(job *j)
{
    agg *a = j->a;
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
        job_end(j, false, message_result(msg));
        free(msg);
        return;
    }
    if (a->plant == PLANT_MERGE_DROPS_KEY && cJSON_IsObject(merged) && merged->child) {
        cJSON *last = merged->child;
        while (last->next)
            last = last->next;
        cJSON_DeleteItemFromObjectCaseSensitive(merged, last->string);
    }
    job_end(j, true, merged);
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
        job_end(j, true, message_result("learner task has started"));
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

static void on_sub_done(void *ud, master_task *t, proto_task_state st, cJSON **result, const char *error)
{
    sub *s = ud;
    (void)t;
    s->task = NULL;
    s->done = true;
    s->state = st;
    s->result = *result;
    *result = NULL;
    s->error = error ? xstrdup(error) : NULL;
    if (--s->job->remaining == 0)
        job_finish(s->job);
}

static job *job_new(agg *a, const char *task_id, const char *name, job_kind kind, size_t n)
{
    job *j = xcalloc(1, sizeof *j);
    j->a = a;
    j->task_id = xstrdup(task_id);
    j->name = xstrdup(name);
    j->kind = kind;
    j->subs = xcalloc(n ? n : 1, sizeof *j->subs);
    j->nsubs = n;
    j->start_us = ev_now_us();
    return j;
}

/* Sends one sub-task; a send that cannot start counts as a failed learner.
 * framed: data has the room of master_task_send_framed() around it. */
static void sub_send(job *j, size_t i, learner *l, char *data, size_t len, bool framed)
{
    agg *a = j->a;
    sub *s = &j->subs[i];
    s->job = j;
    s->learner_id = xstrdup(l->id); // NOLINT(clang-analyzer-core.NullDereference): start_learn returns when one is gone
    char err[256];
    long deadline = a->plant == PLANT_NO_DEADLINE ? -1 : a->cfg.task_deadline_ms;
    s->task = framed ? master_task_send_framed(l->conn, data, len, deadline, on_sub_done, s, err, sizeof err)
                     : master_task_send(l->conn, data, len, deadline, on_sub_done, s, err, sizeof err);
    if (!s->task) {
        s->done = true;
        s->state = TASK_START_FAILED;
        s->error = xasprintf("%s: %s", l->id, err);
        j->remaining--;
    }
}

/* Runs a fan-out job; `make` builds learner i's task data. */
static void job_run(job *j)
{
    agg *a = j->a;
    a->job = j;
    if (j->remaining == 0)
        job_finish(j);
}

static void fan_out_all(agg *a, const char *task_id, const char *name, job_kind kind, const char *data_json)
{
    size_t w = agg_world_size(a);
    if (w == 0) {
        cJSON *r = message_result("no connected learner");
        report(a, task_id, name, ev_now_us(), false, r);
        return;
    }
    job *j = job_new(a, task_id, name, kind, w);
    j->remaining = w;
    size_t k = 0;
    for (size_t i = 0; i < a->nlearners; i++) {
        learner *l = a->learners[i];
        if (l->state != L_CONNECTED)
            continue;
        sub_send(j, k++, l, xstrdup(data_json), strlen(data_json), false);
    }
    a->job = j;
    job_run(j);
}

/* text: what data's refs point into (slave_task_text), or NULL. */
static void start_learn(agg *a, const char *task_id, const cJSON *data, const char *text)
{
    const char *name = "learner_learn_task";
    uint64_t t0 = ev_now_us();
    if (!a->have_demands) {
        report(a, task_id, name, t0, false,
               message_result("learner_learn_task before any learner_get_data_task: the aggregator does not know "
                              "how to split the data"));
        return;
    }
    const cJSON *items = jsonx_get(data, "data");
    if (!items) {
        report(a, task_id, name, t0, false, message_result("learner_learn_task has no \"data\" list"));
        return;
    }
    /* Every learner of the last get-data must still be here. */
    size_t start = 0;
    xbuf gone = {0};
    cJSON *unack = cJSON_CreateObject();
    learner **ls = xcalloc(a->ndemands ? a->ndemands : 1, sizeof *ls);
    for (size_t i = 0; i < a->ndemands; i++) {
        learner *l = agg_learner_find(a, a->demand_ids[i]);
        if (!l || l->state != L_CONNECTED)
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
        report(a, task_id, name, t0, false, r);
        return;
    }
    cJSON_Delete(unack);
    size_t n = a->ndemands;
    size_t *dem = xmalloc(n * sizeof *dem);
    memcpy(dem, a->demands, n * sizeof *dem);
    if (a->plant == PLANT_SPLIT_OFF_BY_ONE && n > 0 && dem[0] > 0) {
        dem[0]--;
        if (n > 1)
            dem[n - 1]++;
    }
    char **slices = xcalloc(n, sizeof *slices);
    size_t *lens = xcalloc(n, sizeof *lens);
    char err[512];
    int rc = agg_split_learn_tasks_framed(items, text, dem, n, MASTER_TASK_HEAD, MASTER_TASK_TAIL, slices, lens, err,
                                          sizeof err);
    if (rc < 0 && a->plant == PLANT_SPLIT_OFF_BY_ONE) {
        /* the planted bug sends short slices silently, as the reference */
        size_t total = 0;
        for (size_t i = 0; i < n; i++)
            total += dem[i];
        dem[n - 1] -= total > 0 ? 1 : 0;
        rc = agg_split_learn_tasks_framed(items, text, dem, n, MASTER_TASK_HEAD, MASTER_TASK_TAIL, slices, lens, err,
                                          sizeof err);
    }
    if (rc < 0) {
        char *msg = xasprintf("learner_learn_task: %s", err);
        report(a, task_id, name, t0, false, message_result(msg));
        free(msg);
        free(slices);
        free(lens);
        free(dem);
        free(ls);
        return;
    }
    job *j = job_new(a, task_id, name, JOB_LEARN, n);
    j->start_us = t0;
    j->remaining = n;
    start = 0;
    for (size_t i = 0; i < n; i++) {
        sub_send(j, i, ls[i], slices[i], lens[i], true); /* the task's data, built by the split */
        j->subs[i].slice_start = start;
        j->subs[i].slice_end = start + dem[i];
        start += dem[i];
    }
    free(slices);
    free(lens);
    free(dem);
    free(ls);
    job_run(j);
}

static void start_task(agg *a, const char *task_id, const cJSON *data, const char *text)
{
    const char *name = jsonx_get_str(data, "name");
    if (!name) {
        report(a, task_id, "other", ev_now_us(), false, message_result("task name error"));
        return;
    }
    LOG_INFO(NULL, "task %s (%s) received; world size %zu", name, task_id, agg_world_size(a));
    if (strcmp(name, "resource") == 0) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "gpu", jsonx_new_i64((int64_t)agg_world_size(a)));
        report(a, task_id, name, ev_now_us(), true, r);
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
        start_learn(a, task_id, data, text);
    } else if (strcmp(name, "learner_close_task") == 0) {
        fan_out_all(a, task_id, name, JOB_CLOSE, "{\"name\": \"learner_close_task\"}");
    } else {
        report(a, task_id, name, ev_now_us(), false, message_result("task name error"));
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
    if (a->job) {
        /* Only an abandoned job (its coordinator was lost) can still run:
         * the slave admits one task at a time. Queue behind it. */
        free(a->queued_id);
        cJSON_Delete(a->queued_data);
        a->queued_id = xstrdup(task_id);
        a->queued_data = jsonx_dup(data);
        jsonx_unref(a->queued_data, text); /* the body is freed when this returns */
        LOG_INFO(NULL, "task %s queued until the previous fan-out drains", task_id);
        return;
    }
    /* Learn data items are refs into the body (raw_refs), split straight
     * from there; any other task gets a tree with every text of its own. */
    const char *name = jsonx_get_str(data, "name");
    if (name && strcmp(name, "learner_learn_task") == 0) {
        start_task(a, task_id, data, text);
        return;
    }
    cJSON *own = jsonx_dup(data);
    jsonx_unref(own, text);
    start_task(a, task_id, own, NULL);
    cJSON_Delete(own);
}

static void on_coord_lost(void *ud, const char *why)
{
    agg *a = ud;
    LOG_WARN(NULL, "coordinator lost: %s", why);
    if (a->job)
        a->job->abandoned = true;
    free(a->queued_id);
    cJSON_Delete(a->queued_data);
    a->queued_id = NULL;
    a->queued_data = NULL;
}

/* ------------------------------------------------------------------ */
/* metrics                                                             */

static void reply_metrics(agg *a, hs_request *r)
{
    agg_gauges g = {0};
    g.learners_connected = agg_world_size(a);
    g.learners_known = a->nlearners;
    for (size_t i = 0; i < a->nlearners; i++)
        g.learners_failed += a->learners[i]->failed;
    unsigned long long in, out;
    slave_bytes(a->slave, &in, &out);
    g.bytes_received = in;
    g.bytes_sent = out;
    master_bytes(a->master, &in, &out);
    g.bytes_received += in;
    g.bytes_sent += out;
    char *text = agg_metrics_render(a->metrics, &g);
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
#endif
    return PLANT_NONE;
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
    a->slave = slave_new(loop, &sc, &scb, a, err, errlen);
    if (!a->slave) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "slave (coordinator side): %s", err);
        snprintf(err, errlen, "%s", tmp);
        agg_metrics_free(a->metrics);
        free(a);
        return NULL;
    }
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
    mc.connect_timeout_ms = cfg->retry_interval_ms < 2000 ? (cfg->retry_interval_ms > 100 ? cfg->retry_interval_ms : 100) : 2000;
    master_callbacks mcb = {.on_lost = on_learner_lost, .on_http = on_master_http};
    a->master = master_new(loop, &mc, &mcb, a, err, errlen);
    if (!a->master) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "master (learner side): %s", err);
        snprintf(err, errlen, "%s", tmp);
        slave_free(a->slave);
        agg_metrics_free(a->metrics);
        free(a);
        return NULL;
    }
    if (cfg->metrics_port >= 0) {
        hs_config hc;
        hs_config_init(&hc);
        hc.host = cfg->master_host;
        hc.port = cfg->metrics_port;
        a->metrics_http = hs_start(loop, &hc, on_metrics_http, a, err, errlen);
        if (!a->metrics_http) {
            master_free(a->master);
            slave_free(a->slave);
            agg_metrics_free(a->metrics);
            free(a);
            return NULL;
        }
    }
    a->client = hc_new(loop);
    LOG_INFO(NULL, "listening: coordinator side %s:%d, learner side %s:%d (advertised as %s)", cfg->slave_host,
             slave_port(a->slave), cfg->master_host, master_port(a->master), master_advertise(a->master));
    for (size_t i = 0; i < cfg->nlearners; i++)
        agg_learner_add(a, cfg->learners[i].id, cfg->learners[i].host, cfg->learners[i].port);
    if (cfg->k8s_url) {
        a->k8s = true;
        agg_k8s_start(a);
    }
    a->ready_timer = ev_timer_start(loop, (uint64_t)cfg->max_retry_ms + 1, on_ready_timer, a);
    agg_check_ready(a);
    return a;
}

void agg_free(agg *a)
{
    if (!a)
        return;
    agg_k8s_stop(a);
    if (a->job)
        job_free(a->job);
    for (size_t i = 0; i < a->nlearners; i++)
        learner_free(a, a->learners[i]);
    free(a->learners);
    for (size_t i = 0; i < a->ndemands; i++)
        free(a->demand_ids[i]);
    free(a->demand_ids);
    free(a->demands);
    free(a->queued_id);
    cJSON_Delete(a->queued_data);
    if (a->ready_timer)
        ev_timer_stop(a->loop, a->ready_timer);
    if (a->grace_timer)
        ev_timer_stop(a->loop, a->grace_timer);
    if (a->drain_timer)
        ev_timer_stop(a->loop, a->drain_timer);
    if (a->trim_timer)
        ev_timer_stop(a->loop, a->trim_timer);
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
    LOG_INFO(NULL, "shutting down: disconnecting %zu learners", agg_world_size(a));
    if (a->job) {
        job *j = a->job;
        a->job = NULL;
        if (!j->abandoned) {
            j->abandoned = true;
            report(a, j->task_id, j->name, j->start_us, false,
                   message_result("the aggregator is shutting down (signal); the task was not finished"));
        }
        job_free(j);
    }
    if (a->queued_id) {
        /* A task waiting behind an abandoned fan-out fails too. */
        const char *qn = jsonx_get_str(a->queued_data, "name");
        report(a, a->queued_id, qn ? qn : "other", ev_now_us(), false,
               message_result("the aggregator is shutting down (signal); the task was not started"));
        free(a->queued_id);
        cJSON_Delete(a->queued_data);
        a->queued_id = NULL;
        a->queued_data = NULL;
    }
    agg_k8s_stop(a);
    for (size_t i = 0; i < a->nlearners; i++) {
        learner *l = a->learners[i];
        if (l->retry) {
            ev_timer_stop(a->loop, l->retry);
            l->retry = NULL;
        }
        if (l->conn) {
            master_disconnect(l->conn, "the aggregator is shutting down");
            l->conn = NULL;
            l->state = L_WAITING;
        }
    }
    a->grace_timer = ev_timer_start(a->loop, (uint64_t)grace_ms, on_grace, a);
    on_drain_check(a->loop, a);
}
