/* mc_run: the mock coordinator's run: connect, tasks, checks, summary. */
#include "mc_run.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ev.h"
#include "evt.h"
#include "ilog.h"
#include "jsonx.h"
#include "master.h"
#include "mc_dump.h"
#include "mc_fail.h"
#include "mc_items.h"
#include "mc_json.h"
#include "mc_verify.h"
#include "xalloc.h"

#define CONN_NAME "aggregator"
/* Default timings before --time-scale. */
#define CONNECT_WINDOW_MS 10000L
#define CONNECT_RETRY_MS 200L
#define TASK_DEADLINE_MS 30000L
#define DISCONNECT_WAIT_MS 2000L
#define CLOSE_POLL_MS 5L
#define HEARTBEAT_TOLERANCE_MS 17000L
#define HEARTBEAT_CHECK_MS 1000L
#define RETRY_WAIT_MS 1000L
#define CONNECT_TIMEOUT_MS 2000L
#define REQUEST_TIMEOUT_MS 30000L
/* Most learn data built for one task (bytes). */
#define LEARN_DATA_MAX ((size_t)1 << 30)

typedef enum { ST_INIT, ST_CONNECTING, ST_CONNECT_WAIT, ST_NEXT, ST_TASK, ST_CLOSING, ST_DONE } run_state;

static const char *state_name(run_state s)
{
    static const char *const names[] = {"INIT", "CONNECTING", "CONNECT_WAIT", "NEXT", "TASK", "CLOSING", "DONE"};
    return names[s];
}

/* One task as the summary shows it. */
typedef struct {
    size_t index;         /* in the script */
    const mcs_task *spec; /* borrowed from the script */
    const char *status;   /* "completed", "failed", "start_failed", "skipped"; NULL while pending */
    double latency_ms;
    char *message;
    cJSON *result;
    unsigned long round;  /* learn round (1-based) or 0 */
    char *id;             /* the task's id once sent, else NULL */
    long items;           /* learn items sent; -1: none */
} task_rec;

/* A learn round that was sent. */
typedef struct {
    unsigned long round;
    cJSON *items; /* kept for the dump checks (only with --dump) */
    size_t rec;
} learn_round;

typedef struct {
    const mc_config *cfg;
    const mcs_script *script;
    bool script_mode;
    ev_loop *loop;
    master *m;
    master_conn *conn;
    char lost_why[512];
    run_state state;
    ev_timer *timer;
    uint64_t connect_start_ms;
    uint64_t close_deadline_ms;
    int attempts;
    size_t next;
    bool delayed; /* the next task's delay_ms has been waited */
    bool stopped;
    master_task *pending;
    size_t pending_rec;
    uint64_t sent_us;
    task_rec *recs;
    size_t nrecs;
    learn_round *rounds;
    size_t nrounds;
    long last_batch; /* -1: unknown */
    size_t *getdata_recs;
    size_t ngetdata;
    bool getdata_all_completed;
    mc_fail fails;
    int signum;
    char task_id[64], buffer_id[64];
} run;

/* ---- state ---- */

static void set_state(run *r, run_state st)
{
    if (r->state != st)
        LOG_DEBUG(NULL, "state %s -> %s", state_name(r->state), state_name(st));
    r->state = st;
}

static void timer_set(run *r, long ms, ev_timer_cb cb)
{
    if (r->timer)
        ev_timer_stop(r->loop, r->timer);
    r->timer = ev_timer_start(r->loop, (uint64_t)(ms > 0 ? ms : 0), cb, r);
}

static void on_next_timer(ev_loop *loop, void *data);
static void finish(run *r);

/* Continue with the next task from the loop, outside any callback of the
 * master. */
static void schedule_next(run *r)
{
    set_state(r, ST_NEXT);
    timer_set(r, 0, on_next_timer);
}

/* ---- task records and expectations ---- */

static char *label(const task_rec *t)
{
    if (t->round)
        return xasprintf("tasks[%zu] %s (round %lu)", t->index, t->spec->name, t->round);
    return xasprintf("tasks[%zu] %s", t->index, t->spec->name);
}

static task_rec *new_rec(run *r, size_t index)
{
    r->recs = xrealloc(r->recs, (r->nrecs + 1) * sizeof *r->recs);
    task_rec *t = &r->recs[r->nrecs++];
    memset(t, 0, sizeof *t);
    t->index = index;
    t->spec = &r->script->tasks[index];
    t->items = -1;
    return t;
}

static bool get_int(const cJSON *result, const char *key, int64_t *out)
{
    return cJSON_IsObject(result) && jsonx_get_i64(jsonx_get(result, key), out);
}

/* Compares one finished task with what was expected of it; every miss is a
 * failure. Also keeps what later tasks need (batch size). */
static void evaluate(run *r, size_t ri)
{
    task_rec *t = &r->recs[ri];
    const mcs_task *s = t->spec;
    EVT_EMIT(task_done, .name = s->name, .id = t->id, .status = t->status, .message = t->message,
             .latency_ms = t->latency_ms);
    size_t before = mc_fail_count(&r->fails);
    char *lb = label(t);
    const char *want = mcs_status_name(s->expect.status);
    bool completed = strcmp(t->status, "completed") == 0;
    if (s->expect.status != MCS_ANY && strcmp(t->status, want) != 0)
        mc_fail_add(&r->fails, "%s: %s, expected %s%s%s", lb, t->status, want, t->message ? ": " : "",
                    t->message ? t->message : "");
    if (s->expect.message_contains && (!t->message || !strstr(t->message, s->expect.message_contains)))
        mc_fail_add(&r->fails, "%s: message %s%s%s does not contain \"%s\"", lb, t->message ? "\"" : "",
                    t->message ? t->message : "(none)", t->message ? "\"" : "", s->expect.message_contains);
    if (s->expect.fields)
        for (const cJSON *f = s->expect.fields->child; f; f = f->next) {
            const cJSON *got = t->result ? mcj_path(t->result, f->string) : NULL;
            if (!mcj_equal(f, got)) {
                char *g = mcj_short(got, 200), *w = mcj_short(f, 200);
                mc_fail_add(&r->fails, "%s: field %s is %s, expected %s", lb, f->string, g, w);
                free(g);
                free(w);
            }
        }
    if (s->expect.latency_ms_max > 0 && t->latency_ms > s->expect.latency_ms_max)
        mc_fail_add(&r->fails, "%s: took %.1f ms, more than latency_ms_max %g", lb, t->latency_ms,
                    s->expect.latency_ms_max);
    int64_t v;
    if (strcmp(s->name, "resource") == 0 && completed && r->cfg->expect_learners >= 0 &&
        (!get_int(t->result, "gpu", &v) || v != r->cfg->expect_learners)) {
        char *g = mcj_short(cJSON_IsObject(t->result) ? jsonx_get(t->result, "gpu") : NULL, 100);
        mc_fail_add(&r->fails, "%s: gpu is %s, expected %ld (--expect-learners)", lb, g, r->cfg->expect_learners);
        free(g);
    }
    if (strcmp(s->name, "learner_get_data_task") == 0) {
        bool have = completed && get_int(t->result, "batch_size", &v) && v >= 0;
        r->last_batch = have ? (long)(v > (int64_t)MCI_ITEMS_MAX ? (int64_t)MCI_ITEMS_MAX + 1 : v) : -1;
        if (s->check_batch && completed && !(have && v > 0)) {
            char *g = mcj_short(cJSON_IsObject(t->result) ? jsonx_get(t->result, "batch_size") : NULL, 100);
            mc_fail_add(&r->fails, "%s: batch_size is %s; a positive integer is required", lb, g);
            free(g);
        }
        if (strcmp(t->status, "skipped") != 0) {
            r->getdata_recs = xrealloc(r->getdata_recs, (r->ngetdata + 1) * sizeof *r->getdata_recs);
            r->getdata_recs[r->ngetdata++] = ri;
            r->getdata_all_completed &= completed;
        }
    }
    if (mc_fail_count(&r->fails) > before) {
        LOG_WARN(NULL, "%s: %s (expectation failed)", lb, t->status);
        if (s->stop_on_failure && !r->stopped) {
            r->stopped = true;
            LOG_WARN(NULL, "stopping the run after %s", lb);
        }
    } else {
        LOG_INFO(NULL, "%s: %s in %.1f ms", lb, t->status, t->latency_ms);
    }
    free(lb);
}

/* ---- building task data ---- */

static void set_member(cJSON *obj, const char *key, cJSON *val)
{
    if (jsonx_get(obj, key))
        cJSON_ReplaceItemInObjectCaseSensitive(obj, key, val);
    else
        cJSON_AddItemToObject(obj, key, val);
}

static cJSON *default_task_info(const run *r)
{
    cJSON *ti = cJSON_CreateObject();
    cJSON_AddStringToObject(ti, "task_id", r->task_id);
    cJSON_AddStringToObject(ti, "buffer_id", r->buffer_id);
    cJSON_AddStringToObject(ti, "policy_id", "mock-policy");
    cJSON *lc = cJSON_AddObjectToObject(ti, "learner_cfg");
    cJSON_AddStringToObject(lc, "exp_name", "mock_coordinator");
    cJSON_AddItemToObject(lc, "train_iterations", jsonx_new_i64(r->cfg->rounds));
    cJSON_AddItemToObject(lc, "batch_size", jsonx_new_i64(0));
    return ti;
}

/* The task's data as JSON text, or NULL with why (the task is skipped).
 * A generated learn list is recorded as a round. */
static char *build_data(run *r, task_rec *t, size_t *len, char *why, size_t whylen)
{
    const mcs_task *s = t->spec;
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "name", s->name);
    if (strcmp(s->name, "learner_start_task") == 0 && !(s->data && jsonx_get(s->data, "task_info")))
        cJSON_AddItemToObject(d, "task_info", default_task_info(r));
    if (s->data)
        for (const cJSON *m = s->data->child; m; m = m->next)
            set_member(d, m->string, jsonx_dup(m));
    cJSON *items = NULL;
    if (s->items != MCS_ITEMS_NONE) {
        long n = s->items;
        if (n == MCS_ITEMS_BATCH) {
            if (r->last_batch < 0) {
                snprintf(why, whylen, "not sent: no batch_size from the last learner_get_data_task");
                cJSON_Delete(d);
                return NULL;
            }
            if (r->last_batch > (long)MCI_ITEMS_MAX) {
                snprintf(why, whylen, "not sent: batch_size is above the limit of %u items", MCI_ITEMS_MAX);
                cJSON_Delete(d);
                return NULL;
            }
            n = r->last_batch;
        }
        /* Items are at least ~200 bytes of JSON each. */
        size_t per = r->cfg->item_size > 200 ? r->cfg->item_size : 200;
        if ((size_t)n > LEARN_DATA_MAX / per) {
            snprintf(why, whylen, "not sent: %ld items of about %zu bytes pass the limit of %zu bytes of learn data",
                     n, per, (size_t)LEARN_DATA_MAX);
            cJSON_Delete(d);
            return NULL;
        }
        t->round = r->nrounds + 1;
        t->items = n;
        items = mci_build(t->round, (size_t)n, r->cfg->seed, r->cfg->item_size);
        set_member(d, "data", items);
    }
    char *text = jsonx_print(d);
    *len = strlen(text);
    if (items) {
        cJSON_DetachItemViaPointer(d, items);
        r->rounds = xrealloc(r->rounds, (r->nrounds + 1) * sizeof *r->rounds);
        r->rounds[r->nrounds++] = (learn_round){t->round, r->cfg->ndumps ? items : NULL, (size_t)(t - r->recs)};
        if (!r->cfg->ndumps)
            cJSON_Delete(items);
    }
    cJSON_Delete(d);
    return text;
}

/* ---- tasks ---- */

static const char *status_of(proto_task_state st)
{
    switch (st) {
    case TASK_COMPLETED:
        return "completed";
    case TASK_START_FAILED:
        return "start_failed";
    default:
        return "failed";
    }
}

static void on_task_done(void *ud, master_task *mt, proto_task_state st, cJSON **result, const char *error)
{
    (void)mt;
    run *r = ud;
    r->pending = NULL;
    task_rec *t = &r->recs[r->pending_rec];
    t->latency_ms = (double)(ev_now_us() - r->sent_us) / 1000.0;
    t->status = status_of(st);
    t->result = *result;
    *result = NULL;
    const char *msg = error;
    if (!msg && cJSON_IsObject(t->result))
        msg = jsonx_get_str(t->result, "message");
    t->message = msg ? xstrdup(msg) : NULL;
    evaluate(r, r->pending_rec);
    schedule_next(r);
}

static void send_task(run *r, size_t index)
{
    task_rec *t = new_rec(r, index);
    size_t ri = r->nrecs - 1;
    char why[512];
    size_t len = 0;
    char *text = build_data(r, t, &len, why, sizeof why);
    if (!text) {
        t->status = "skipped";
        t->message = xstrdup(why);
        evaluate(r, ri);
        schedule_next(r);
        return;
    }
    long deadline = t->spec->deadline_ms ? t->spec->deadline_ms
                    : r->cfg->task_deadline_ms ? r->cfg->task_deadline_ms
                                               : mc_scaled_ms(r->cfg, TASK_DEADLINE_MS);
    char err[512];
    LOG_DEBUG(NULL, "tasks[%zu] %s: sending %zu bytes, deadline %ld ms", index, t->spec->name, len, deadline);
    r->sent_us = ev_now_us();
    master_task *mt = NULL;
    if (r->conn)
        mt = master_task_send(r->conn, text, len, deadline, on_task_done, r, err, sizeof err);
    else {
        free(text);
        snprintf(err, sizeof err, "not sent: the connection to %.100s is gone: %.300s", r->cfg->target, r->lost_why);
    }
    if (!mt) {
        t->status = "start_failed";
        t->latency_ms = (double)(ev_now_us() - r->sent_us) / 1000.0;
        t->message = xstrdup(err);
        evaluate(r, ri);
        schedule_next(r);
        return;
    }
    t->id = xstrdup(master_task_id(mt));
    EVT_EMIT(task_sent, .name = t->spec->name, .id = t->id, .items = t->items);
    r->pending = mt;
    r->pending_rec = ri;
    set_state(r, ST_TASK);
}

static void on_next_timer(ev_loop *loop, void *data)
{
    (void)loop;
    run *r = data;
    r->timer = NULL;
    while (r->next < r->script->n && r->stopped && !r->script->tasks[r->next].always)
        r->next++;
    if (r->next >= r->script->n) {
        finish(r);
        return;
    }
    long delay = r->script->tasks[r->next].delay_ms;
    if (delay > 0 && !r->delayed) {
        r->delayed = true;
        timer_set(r, delay, on_next_timer);
        return;
    }
    r->delayed = false;
    send_task(r, r->next++);
}

/* ---- connection ---- */

static void try_connect(run *r);

static void on_connect_timer(ev_loop *loop, void *data)
{
    (void)loop;
    run *r = data;
    r->timer = NULL;
    try_connect(r);
}

static void on_connected(void *ud, master_conn *c, bool ok, const char *error)
{
    run *r = ud;
    if (ok) {
        r->conn = c;
        LOG_INFO(NULL, "connected to %s after %d attempt%s", r->cfg->target, r->attempts, r->attempts == 1 ? "" : "s");
        schedule_next(r);
        return;
    }
    uint64_t elapsed = ev_now_ms() - r->connect_start_ms;
    long window = mc_scaled_ms(r->cfg, CONNECT_WINDOW_MS), wait = mc_scaled_ms(r->cfg, CONNECT_RETRY_MS);
    /* Only a connection-level failure means "not up yet"; an answer is
     * final. */
    bool retry = strstr(error, ": cannot connect:") != NULL && elapsed + (uint64_t)wait < (uint64_t)window;
    LOG_DEBUG(NULL, "connect attempt %d: %s%s", r->attempts, error, retry ? "; trying again" : "");
    if (retry) {
        set_state(r, ST_CONNECT_WAIT);
        timer_set(r, wait, on_connect_timer);
        return;
    }
    mc_fail_add(&r->fails, "connect to %s as \"%s\" failed after %d attempt%s in %llu ms: %s", r->cfg->target,
                CONN_NAME, r->attempts, r->attempts == 1 ? "" : "s", (unsigned long long)elapsed, error);
    /* Leave the callback before ending the run. */
    r->stopped = true;
    r->next = r->script->n;
    schedule_next(r);
}

static void try_connect(run *r)
{
    char err[512];
    r->attempts++;
    set_state(r, ST_CONNECTING);
    if (!master_connect(r->m, CONN_NAME, r->cfg->connect_host, r->cfg->connect_port, NULL, on_connected, r, err,
                        sizeof err)) {
        mc_fail_add(&r->fails, "connect to %s: %s", r->cfg->target, err);
        r->next = r->script->n;
        schedule_next(r);
    }
}

static void on_lost(void *ud, master_conn *c, const char *why)
{
    run *r = ud;
    if (c == r->conn) {
        r->conn = NULL;
        snprintf(r->lost_why, sizeof r->lost_why, "%s", why);
    }
}

/* ---- ending ---- */

/* Waits, capped, for the DELETE /disconnect to be answered: master_free()
 * would cancel it. */
static void on_close_timer(ev_loop *loop, void *data)
{
    run *r = data;
    r->timer = NULL;
    if (master_requests_pending(r->m) > 0 && ev_now_ms() < r->close_deadline_ms) {
        timer_set(r, CLOSE_POLL_MS, on_close_timer);
        return;
    }
    if (master_requests_pending(r->m) > 0)
        LOG_WARN(NULL, "DELETE /disconnect to %s got no answer within %ld ms", r->cfg->target,
                 mc_scaled_ms(r->cfg, DISCONNECT_WAIT_MS));
    set_state(r, ST_DONE);
    ev_stop(loop);
}

static void finish(run *r)
{
    if (r->conn && master_conn_ready(r->conn)) {
        master_disconnect(r->conn, "the run is over");
        r->conn = NULL;
        set_state(r, ST_CLOSING);
        r->close_deadline_ms = ev_now_ms() + (uint64_t)mc_scaled_ms(r->cfg, DISCONNECT_WAIT_MS);
        timer_set(r, 0, on_close_timer);
        return;
    }
    set_state(r, ST_DONE);
    ev_stop(r->loop);
}

static void on_signal(ev_loop *loop, int signum, void *data)
{
    run *r = data;
    if (r->signum)
        return;
    r->signum = signum;
    const char *sig = signum == SIGINT ? "SIGINT" : "SIGTERM";
    LOG_WARN(NULL, "%s: ending the run", sig);
    EVT_EMIT(shutdown, .signal = sig, .reason = "a signal ends the run");
    if (r->pending) {
        task_rec *t = &r->recs[r->pending_rec];
        master_task_cancel(r->pending);
        r->pending = NULL;
        t->status = "failed";
        t->latency_ms = (double)(ev_now_us() - r->sent_us) / 1000.0;
        t->message = xasprintf("interrupted by %s", sig);
        char *lb = label(t);
        mc_fail_add(&r->fails, "interrupted by %s while %s was running", sig, lb);
        free(lb);
    } else {
        mc_fail_add(&r->fails, "interrupted by %s (state %s, %zu of %zu tasks done)", sig, state_name(r->state),
                    r->nrecs, r->script->n);
    }
    if (r->timer) {
        ev_timer_stop(loop, r->timer);
        r->timer = NULL;
    }
    set_state(r, ST_DONE);
    ev_stop(loop);
}

/* ---- dump checks ---- */

static void check_dumps(run *r)
{
    const mc_config *cfg = r->cfg;
    if (!cfg->ndumps)
        return;
    mcd_set *d = mcd_new();
    for (size_t i = 0; i < cfg->ndumps; i++)
        mcd_add_file(d, cfg->dumps[i], &r->fails);
    size_t n = r->nrounds;
    mcd_round *rounds = xcalloc(n ? n : 1, sizeof *rounds);
    mcv_outcome *outs = xcalloc(n ? n : 1, sizeof *outs);
    mcd_view *views = xcalloc(n ? n : 1, sizeof *views);
    size_t delivered = 0;
    for (size_t i = 0; i < n; i++) {
        const task_rec *t = &r->recs[r->rounds[i].rec];
        bool ok = t->status && strcmp(t->status, "completed") == 0;
        rounds[i] = (mcd_round){r->rounds[i].round, r->rounds[i].items, ok};
        outs[i] = (mcv_outcome){ok, t->result};
        delivered += ok;
    }
    if (mcd_learner_count(d) == 0 && delivered)
        mc_fail_add(&r->fails, "the dumps (%zu file%s) hold no learner lines, yet %zu learn task%s completed", cfg->ndumps,
                    cfg->ndumps == 1 ? "" : "s", delivered, delivered == 1 ? "" : "s");
    mcd_check_items(d, rounds, n, views, &r->fails);
    size_t merged = mcv_check_merges(rounds, views, outs, n, &r->fails);
    size_t gd = 0;
    if (r->getdata_all_completed && r->ngetdata) {
        const cJSON **agg = xcalloc(r->ngetdata, sizeof *agg);
        for (size_t i = 0; i < r->ngetdata; i++)
            agg[i] = r->recs[r->getdata_recs[i]].result;
        gd = mcv_check_get_data(d, agg, r->ngetdata, &r->fails);
        free(agg);
    }
    LOG_INFO(NULL, "dumps: %zu learner%s, %zu learn round%s sent, %zu merge%s and %zu get-data sum%s checked",
             mcd_learner_count(d), mcd_learner_count(d) == 1 ? "" : "s", n, n == 1 ? "" : "s", merged,
             merged == 1 ? "" : "s", gd, gd == 1 ? "" : "s");
    EVT_EMIT(dumps_checked, .learners = (int64_t)mcd_learner_count(d), .rounds = (int64_t)n,
             .merges = (int64_t)merged, .sums = (int64_t)gd);
    mcd_views_free(views, n);
    free(views);
    free(outs);
    free(rounds);
    mcd_free(d);
}

/* ---- summary ---- */

static void print_summary(run *r, FILE *out)
{
    cJSON *s = cJSON_CreateObject();
    cJSON_AddBoolToObject(s, "ok", mc_fail_count(&r->fails) == 0);
    cJSON_AddStringToObject(s, "target", r->cfg->target);
    long rounds = r->cfg->rounds;
    if (r->script_mode) {
        rounds = 0;
        for (size_t i = 0; i < r->script->n; i++)
            rounds += strcmp(r->script->tasks[i].name, "learner_learn_task") == 0;
    }
    cJSON_AddItemToObject(s, "rounds", jsonx_new_i64(rounds));
    cJSON *tasks = cJSON_AddArrayToObject(s, "tasks");
    for (size_t i = 0; i < r->nrecs; i++) {
        const task_rec *t = &r->recs[i];
        if (!t->status)
            continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->spec->name);
        cJSON_AddStringToObject(o, "status", t->status);
        cJSON_AddItemToObject(o, "latency_ms", jsonx_new_double((double)(long long)(t->latency_ms * 1000.0) / 1000.0));
        cJSON_AddItemToObject(o, "message", t->message ? cJSON_CreateString(t->message) : cJSON_CreateNull());
        cJSON_AddItemToObject(o, "result", t->result ? jsonx_dup(t->result) : cJSON_CreateNull());
        cJSON_AddItemToArray(tasks, o);
    }
    cJSON *fl = cJSON_AddArrayToObject(s, "failures");
    for (size_t i = 0; i < r->fails.n; i++)
        cJSON_AddItemToArray(fl, cJSON_CreateString(r->fails.msg[i]));
    if (r->fails.dropped) {
        char more[96];
        snprintf(more, sizeof more, "... and %zu more failures", r->fails.dropped);
        cJSON_AddItemToArray(fl, cJSON_CreateString(more));
    }
    char *text = jsonx_print(s);
    fprintf(out, "%s\n", text);
    fflush(out);
    free(text);
    cJSON_Delete(s);
}

/* ---- entry ---- */

int mc_run_main(const mc_config *cfg, const mcs_script *script, bool script_mode, FILE *out)
{
    run r = {0};
    r.cfg = cfg;
    r.script = script;
    r.script_mode = script_mode;
    r.last_batch = -1;
    r.getdata_all_completed = true;
    mc_fail_init(&r.fails);
    snprintf(r.task_id, sizeof r.task_id, "mock-task-%llu", (unsigned long long)cfg->seed);
    snprintf(r.buffer_id, sizeof r.buffer_id, "mock-buffer-%llu", (unsigned long long)cfg->seed);
    r.loop = ev_loop_new();
    if (!r.loop) {
        mc_fail_add(&r.fails, "cannot create the event loop (epoll): %s", strerror(errno));
        print_summary(&r, out);
        mc_fail_free(&r.fails);
        return 1;
    }
    ev_signal(r.loop, SIGTERM, on_signal, &r);
    ev_signal(r.loop, SIGINT, on_signal, &r);
    evt_opts eo = cfg->events;
    eo.process = "mock_coordinator";
    char eerr[512];
    if (evt_init(r.loop, &eo, eerr, sizeof eerr) < 0) {
        mc_fail_add(&r.fails, "--events: %s", eerr);
        print_summary(&r, out);
        ev_loop_free(r.loop);
        mc_fail_free(&r.fails);
        return 1;
    }
    master_config mc;
    master_config_init(&mc);
    mc.http.host = cfg->host;
    mc.http.port = cfg->port;
    mc.channel = cfg->channel;
    mc.heartbeat_tolerance_ms = mc_scaled_ms(cfg, HEARTBEAT_TOLERANCE_MS);
    mc.heartbeat_check_ms = mc_scaled_ms(cfg, HEARTBEAT_CHECK_MS);
    mc.task_deadline_ms = mc_scaled_ms(cfg, TASK_DEADLINE_MS);
    mc.retry_wait_ms = mc_scaled_ms(cfg, RETRY_WAIT_MS);
    mc.connect_retries = 0; /* the run retries connects itself, within its window */
    mc.connect_timeout_ms = mc_scaled_ms(cfg, CONNECT_TIMEOUT_MS);
    mc.request_timeout_ms = mc_scaled_ms(cfg, REQUEST_TIMEOUT_MS);
    master_callbacks cbs = {.on_lost = on_lost};
    char err[512];
    r.m = master_new(r.loop, &mc, &cbs, &r, err, sizeof err);
    if (!r.m) {
        mc_fail_add(&r.fails, "cannot listen on %s port %d (--host/--port): %s", cfg->host, cfg->port, err);
    } else {
        LOG_INFO(NULL, "master on %s; driving %s with %zu task%s", master_advertise(r.m), cfg->target, script->n,
                 script->n == 1 ? "" : "s");
        r.connect_start_ms = ev_now_ms();
        try_connect(&r);
        ev_run(r.loop);
        if (!r.signum)
            check_dumps(&r);
    }
    print_summary(&r, out);
    int code = mc_fail_count(&r.fails) || r.signum ? 1 : 0;
    if (r.timer)
        ev_timer_stop(r.loop, r.timer);
    master_free(r.m);
    ev_loop_free(r.loop);
    evt_close();
    for (size_t i = 0; i < r.nrecs; i++) {
        free(r.recs[i].id);
        free(r.recs[i].message);
        cJSON_Delete(r.recs[i].result);
    }
    free(r.recs);
    for (size_t i = 0; i < r.nrounds; i++)
        cJSON_Delete(r.rounds[i].items);
    free(r.rounds);
    free(r.getdata_recs);
    mc_fail_free(&r.fails);
    return code;
}
