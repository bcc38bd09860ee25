/* learner: one mock learner (a slave answering learner tasks, with faults). */
#include "learner.h"

#include <errno.h>
#include <stdarg.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evt.h"
#include "ilog.h"
#include "jsonx.h"
#include "slave.h"
#include "xalloc.h"
#include "util.h"

#define NAME_SLOTS 64    /* distinct task names counted per learner */
#define NAME_LEN_MAX 256 /* longer names are counted under "(other)" */
#define LISTEN_BACKLOG 511
#define CRASH_EXIT_CODE 3

typedef enum { LS_IDLE = 0, LS_HELD, LS_LISTENING, LS_DEAD } lstate;
static const char *const state_names[] = {"idle", "held", "listening", "dead"};

typedef struct {
    char *name;
    unsigned long n;
} name_count;

/* The task being worked on (at most one: a slave runs one task at a time). */
typedef struct {
    char *id; /* NULL: no task */
    char *name;
    ev_timer *timer; /* fires when the work is done */
    bool hung;
    bool complete; /* normal report: complete, else fail */
    bool learn_ok; /* a valid learn task: the iteration advances */
    uint64_t t0_us; /* received */
    unsigned long learn_n; /* a learn task: its number on this learner (1-based); else 0 */
    cJSON *result; /* the learner's own result */
    fault_plan plan;
} work;

struct learner {
    learner_env env;
    int index;
    char *id;
    char *label;
    char *ev_id; /* its events' "learner" */
    int port;
    int batch_size;
    long learn_time_ms;
    lstate state;
    int fd; /* bound, not listening; -1 while the slave owns it */
    slave *slave;
    ev_timer *hold_timer; /* HELD: listen when it fires */
    ev_timer *defer_timer;
    fault_kind defer_kind; /* what to do from defer_timer: FK_DIE or FK_DROP */
    long defer_ms;
    const char *defer_why;
    bool hb_paused;
    unsigned long hb_base; /* heartbeats of earlier slaves (before drops) */
    unsigned long connects;
    name_count names[NAME_SLOTS];
    size_t nnames;
    unsigned long other_names;
    unsigned long tasks_total;
    unsigned long learn_tasks, learn_items;
    long iter;
    cJSON *prio; /* the learn result's priorities for prio_n items, kept:
                    formatting doubles is most of a learn report's cost */
    int prio_n;
    cJSON *task_id, *buffer_id; /* from learner_start_task; NULL: null */
    work cur;
};

/* ---- sockets ---- */

/* A socket bound to host:port (SO_REUSEADDR, so that a learner that stops
 * listening can bind its port again at once), not listening: a connection
 * to it is refused. */
static int bind_socket(const char *host, int port, int *bound_port, char *err, size_t errlen)
{
    int fd = util_tcp_bind(host, port, -1, true, err, errlen);
    if (fd < 0)
        return -1;
    struct sockaddr_storage ss = {0};
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        snprintf(err, errlen, "getsockname() failed: %s", strerror(errno));
        close(fd);
        return -1;
    }
    /* getsockname() filled ss (the analyzer does not model it) */
    *bound_port = ss.ss_family == AF_INET6
                      ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                      : ntohs(((struct sockaddr_in *)&ss)->sin_port); // NOLINT(clang-analyzer-core.CallAndMessage)
    return fd;
}

/* ---- task counting ---- */

static unsigned long count_name(learner *l, const char *name)
{
    for (size_t i = 0; i < l->nnames; i++)
        if (strcmp(l->names[i].name, name) == 0)
            return ++l->names[i].n;
    if (l->nnames < NAME_SLOTS && strlen(name) <= NAME_LEN_MAX) {
        l->names[l->nnames].name = xstrdup(name);
        l->names[l->nnames].n = 1;
        return l->names[l->nnames++].n;
    }
    return ++l->other_names;
}

/* ---- work ---- */

static void work_clear(learner *l)
{
    work *w = &l->cur;
    if (w->timer)
        ev_timer_stop(l->env.loop, w->timer);
    free(w->id);
    free(w->name);
    cJSON_Delete(w->result);
    memset(w, 0, sizeof *w);
}

static void work_cancel(learner *l, const char *why)
{
    if (l->cur.id)
        LOG_INFO(l->id, "task %s (%s) abandoned: %s", l->cur.id, l->cur.name, why);
    work_clear(l);
}

static cJSON *dup_or_null(const cJSON *v)
{
    return v ? jsonx_dup(v) : cJSON_CreateNull();
}

static cJSON *fail_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *fail_message(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "message", buf);
    return o;
}

/* Injected bad_result: a shape that cannot be merged with other learners'. */
static cJSON *make_bad(const char *name, cJSON *res)
{
    if (strcmp(name, "learner_learn_task") == 0 && cJSON_IsObject(jsonx_get(res, "info"))) {
        cJSON *list = cJSON_CreateArray();
        cJSON_AddItemToArray(list, jsonx_dup(jsonx_get(res, "info")));
        cJSON_ReplaceItemInObjectCaseSensitive(res, "info", list); /* keeps its place */
        return res;
    }
    const cJSON *bs = jsonx_get(res, "batch_size");
    if (strcmp(name, "learner_get_data_task") == 0 && bs) {
        char *t = jsonx_print(bs);
        cJSON_ReplaceItemInObjectCaseSensitive(res, "batch_size", cJSON_CreateString(t));
        free(t);
        return res;
    }
    cJSON_Delete(res);
    cJSON *list = cJSON_CreateArray();
    cJSON_AddItemToArray(list, cJSON_CreateString("injected bad result"));
    return list;
}

static cJSON *learn_info(learner *l, int n)
{
    cJSON *info = cJSON_CreateObject();
    cJSON_AddItemToObject(info, "learner_step", jsonx_new_i64(l->iter));
    if (!l->prio || l->prio_n != n) {
        cJSON_Delete(l->prio);
        l->prio = cJSON_CreateArray();
        l->prio_n = n;
        for (int i = 0; i < n; i++)
            cJSON_AddItemToArray(l->prio, jsonx_new_double(1.0 + l->index + 0.001 * i));
    }
    cJSON_AddItemToObject(info, "priority", cJSON_Duplicate(l->prio, true));
    cJSON_AddBoolToObject(info, "learner_done", false);
    cJSON_AddItemToObject(info, "cur_lr", jsonx_new_double(0.001));
    /* Depends on the learner and its step, so that merged results show which
     * learner's value went where. */
    cJSON_AddItemToObject(info, "total_loss", jsonx_new_double((1.0 + 0.01 * l->index) / (1.0 + (double)l->iter)));
    cJSON_AddStringToObject(info, "learner_id", l->id);
    return info;
}

static void add_ids(learner *l, cJSON *res)
{
    cJSON_AddItemToObject(res, "task_id", dup_or_null(l->task_id));
    cJSON_AddItemToObject(res, "buffer_id", dup_or_null(l->buffer_id));
}

/* The learner's own answer to a task: *complete false means a failure
 * report. Learn tasks also record their items. */
static cJSON *answer(learner *l, const char *name, const cJSON *data, const fault_plan *plan, bool *complete,
                     bool *learn_ok, long *work_ms)
{
    *complete = true;
    *learn_ok = false;
    *work_ms = 0;
    if (!name) {
        *complete = false;
        return fail_message("task name error");
    }
    if (strcmp(name, "resource") == 0) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "gpu", jsonx_new_i64(1));
        return r;
    }
    if (strcmp(name, "learner_start_task") == 0) {
        const cJSON *ti = jsonx_get(data, "task_info");
        if (!cJSON_IsObject(ti)) {
            *complete = false;
            return fail_message("%s: learner_start_task needs a \"task_info\" object, got %s", l->id,
                                ti ? jsonx_type_name(ti) : "none");
        }
        cJSON_Delete(l->task_id);
        cJSON_Delete(l->buffer_id);
        l->task_id = jsonx_dup(jsonx_get(ti, "task_id"));
        l->buffer_id = jsonx_dup(jsonx_get(ti, "buffer_id"));
        cJSON *r = cJSON_CreateObject();
        cJSON_AddStringToObject(r, "message", "learner task has started");
        return r;
    }
    if (strcmp(name, "learner_get_data_task") == 0) {
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "batch_size", jsonx_new_i64(l->batch_size + (plan->wrong_batch ? 1 : 0)));
        cJSON_AddItemToObject(r, "cur_learner_iter", jsonx_new_i64(l->iter));
        add_ids(l, r);
        return r;
    }
    if (strcmp(name, "learner_learn_task") == 0) {
        l->learn_tasks++;
        const cJSON *items = jsonx_get(data, "data");
        if (!items) {
            *complete = false;
            return fail_message("%s: learn task has no \"data\" (a list of %d items is expected)", l->id,
                                l->batch_size);
        }
        if (!cJSON_IsArray(items)) {
            *complete = false;
            const char *t = jsonx_type_name(items);
            return fail_message("%s: learn data must be a list of %d items, got a%s %s", l->id, l->batch_size,
                                strchr("aeiou", t[0]) ? "n" : "", t);
        }
        int n = cJSON_GetArraySize(items);
        l->learn_items += (unsigned long)n;
        l->cur.learn_n = l->learn_tasks;
        dump_learn_items(l->env.dump, l->id, l->cur.id, l->learn_tasks, items);
        if (n != l->batch_size) {
            *complete = false;
            return fail_message("%s: learn data has %d items, expected batch size %d", l->id, n, l->batch_size);
        }
        cJSON *r = cJSON_CreateObject();
        cJSON_AddItemToObject(r, "info", learn_info(l, n));
        add_ids(l, r);
        *learn_ok = true;
        *work_ms = l->learn_time_ms;
        return r;
    }
    if (strcmp(name, "learner_close_task") == 0) {
        cJSON *r = cJSON_CreateObject();
        add_ids(l, r);
        return r;
    }
    *complete = false;
    return fail_message("task name error");
}

static char *report_body(const char *task_id, const char *result_text, bool trailing_comma)
{
    return xasprintf("{\"task\": {\"id\": \"%s\"}, \"result\": %s%s}", task_id, result_text, trailing_comma ? "," : "");
}

/* The work is done: report it as the plan says. */
static void on_work_done(ev_loop *loop, void *data)
{
    (void)loop;
    learner *l = data;
    work *w = &l->cur;
    w->timer = NULL;
    if (!l->slave || !slave_current_task(l->slave) || strcmp(slave_current_task(l->slave), w->id) != 0) {
        work_cancel(l, "the slave no longer holds it");
        return;
    }
    if (w->plan.crash_during) {
        LOG_ERROR(l->id, "crash fault: exiting with code %d while working on task %s (%s)", CRASH_EXIT_CODE, w->id,
                  w->name);
        evt_flush();
        _exit(CRASH_EXIT_CODE);
    }
    cJSON *res = w->result;
    w->result = NULL;
    bool complete = w->complete;
    if (w->plan.report == REPORT_FAIL) {
        cJSON_Delete(res);
        res = cJSON_CreateObject();
        cJSON_AddStringToObject(res, "message", "injected failure");
        complete = false;
    } else if (complete && w->plan.bad_result) {
        res = make_bad(w->name, res);
    }
    char *text = jsonx_print(res);
    char msg[256] = "";
    if (!complete && cJSON_IsObject(res) && jsonx_get_str(res, "message"))
        snprintf(msg, sizeof msg, "%s", jsonx_get_str(res, "message"));
    const char *path = complete ? "/slave/task/complete" : "/slave/task/fail";
    int rc;
    const char *kind;
    if (w->plan.report == REPORT_MALFORMED || w->plan.report == REPORT_TRUNCATED) {
        bool mal = w->plan.report == REPORT_MALFORMED;
        kind = mal ? "malformed" : "truncated";
        char *body = report_body(w->id, text, mal);
        size_t len = strlen(body);
        cJSON_Delete(res);
        dump_result(l->env.dump, l->id, w->id, w->name, w->learn_n, kind, text);
        /* truncated: half the bytes under a Content-Length of all of them */
        rc = slave_task_report_raw(l->slave, w->id, path, body, mal ? len : len / 2, mal ? 0 : len);
    } else {
        kind = complete ? "complete" : "fail";
        dump_result(l->env.dump, l->id, w->id, w->name, w->learn_n, kind, text);
        rc = complete ? slave_task_complete(l->slave, w->id, res) : slave_task_fail(l->slave, w->id, res);
    }
    if (rc < 0) {
        LOG_WARN(l->id, "task %s (%s): the %s report could not be sent", w->id, w->name, kind);
    } else {
        LOG_DEBUG(l->id, "task %s (%s): %s report sent", w->id, w->name, kind);
        if (w->plan.report == REPORT_MALFORMED || w->plan.report == REPORT_TRUNCATED)
            snprintf(msg, sizeof msg, "a %s report was sent", kind);
        EVT_EMIT(task_done, .learner = l->ev_id, .name = w->name, .id = w->id,
                 .status = complete ? "completed" : "failed", .message = msg[0] ? msg : NULL,
                 .cause = w->plan.report == REPORT_MALFORMED   ? "malformed"
                          : w->plan.report == REPORT_TRUNCATED ? "truncated"
                          : complete                           ? NULL
                                                               : "reported_failure",
                 .latency_ms = (double)(ev_now_us() - w->t0_us) / 1000.0);
    }
    if (w->learn_ok && w->plan.report != REPORT_FAIL)
        l->iter++;
    free(text);
    work_clear(l);
}

/* ---- state ---- */

static void go(learner *l, lstate to, long hold_ms, const char *why);

static void on_hold_timer(ev_loop *loop, void *data)
{
    (void)loop;
    learner *l = data;
    l->hold_timer = NULL;
    go(l, LS_LISTENING, 0, "its hold is over");
}

static void on_defer_timer(ev_loop *loop, void *data)
{
    (void)loop;
    learner *l = data;
    l->defer_timer = NULL;
    if (l->defer_kind == FK_DIE)
        go(l, LS_DEAD, 0, l->defer_why);
    else
        go(l, LS_HELD, l->defer_ms, l->defer_why);
}

/* Leaves a state from inside a slave callback: later, from the loop. die
 * wins over drop. */
static void defer_go(learner *l, fault_kind kind, long ms, const char *why)
{
    if (l->defer_timer && (l->defer_kind == FK_DIE || kind != FK_DIE))
        return;
    l->defer_kind = kind;
    l->defer_ms = ms;
    l->defer_why = why;
    if (!l->defer_timer)
        l->defer_timer = ev_timer_start(l->env.loop, 0, on_defer_timer, l);
}

static void set_paused(learner *l, bool paused)
{
    if (l->hb_paused == paused)
        return;
    l->hb_paused = paused;
    LOG_INFO(l->id, "heartbeats %s", paused ? "paused (no_heartbeat)" : "resumed");
    if (l->slave)
        slave_pause_heartbeats(l->slave, paused);
}

static void on_connect(void *ud, const cJSON *data, slave_verdict *v)
{
    (void)data;
    (void)v;
    learner *l = ud;
    l->connects++;
}

static void on_disconnect(void *ud, const cJSON *data, slave_verdict *v)
{
    (void)data;
    (void)v;
    work_cancel(ud, "the master disconnected");
}

static void on_master_lost(void *ud, const char *why)
{
    learner *l = ud;
    char msg[600];
    snprintf(msg, sizeof msg, "master lost: %s", why);
    work_cancel(l, msg);
}

static void on_shutdown(void *ud)
{
    learner *l = ud;
    work_cancel(l, "/shutdown");
    defer_go(l, FK_DIE, 0, "/shutdown was requested");
}

/* One fault_fired event (name: the task it hit, or NULL). */
static void fault_fired(const learner *l, fault_kind kind, int id, unsigned long count, const char *name,
                        const char *reason)
{
    EVT_EMIT(fault_fired, .learner = l->ev_id, .label = l->label, .kind = fault_kind_name(kind), .name = name,
             .count = (int64_t)count, .fault = id, .reason = reason);
}

static void on_task(void *ud, const char *task_id, const cJSON *data, slave_verdict *v)
{
    learner *l = ud;
    const char *name = jsonx_get_str(data, "name");
    const char *cname = name ? name : "(no name)";
    unsigned long n_name = count_name(l, cname);
    unsigned long n_all = ++l->tasks_total;
    fault_plan plan;
    fault_set_plan(l->env.faults, l->index, cname, n_name, n_all, &plan);
    if (plan.fired[0])
        LOG_INFO(l->id, "task %s (%.64s, #%lu of its name, #%lu in all): faults fired: %s", task_id, cname, n_name,
                 n_all, plan.fired);
    else
        LOG_DEBUG(l->id, "task %s (%.64s)", task_id, cname);
    const cJSON *items = name && strcmp(name, "learner_learn_task") == 0 ? jsonx_get(data, "data") : NULL;
    EVT_EMIT(task_received, .learner = l->ev_id, .name = cname, .id = task_id,
             .items = cJSON_IsArray(items) ? cJSON_GetArraySize(items) : -1);
    for (size_t i = 0; i < plan.nhits; i++)
        fault_fired(l, plan.hits[i].kind, plan.hits[i].id, plan.hits[i].count, cname,
                    plan.hits[i].kind == FK_CRASH ? (plan.crash_before ? "the process exits before answering"
                                                                       : "the process exits during the task")
                                                  : NULL);
    if (plan.nhits_more)
        LOG_WARN(l->id, "task %s: %zu more faults fired than its events tell", task_id, plan.nhits_more);
    if (plan.crash_before) {
        LOG_ERROR(l->id, "crash fault: exiting with code %d before answering /task/new", CRASH_EXIT_CODE);
        evt_flush();
        _exit(CRASH_EXIT_CODE);
    }
    if (plan.pause_heartbeats)
        set_paused(l, true);
    if (plan.die)
        defer_go(l, FK_DIE, 0, "die fault on a task");
    else if (plan.drop)
        defer_go(l, FK_DROP, plan.drop_back_ms, "drop fault on a task");
    if (plan.status > 0) {
        v->status = plan.status;
        v->code = plan.code;
        snprintf(v->message, sizeof v->message, "%s (%s: injected error_status, HTTP %d)",
                 plan.code_message, l->id, plan.status);
        return;
    }
    work_clear(l); /* a task the master gave up on (deadline) is replaced */
    work *w = &l->cur;
    long work_ms;
    /* Learn data items are refs into the request body (raw_refs): counting
     * them needs no copy. Any other use (a dump, other tasks) gets a tree
     * with every text of its own. */
    cJSON *own = NULL;
    if (!name || strcmp(name, "learner_learn_task") != 0 || l->env.dump) {
        own = jsonx_dup(data);
        jsonx_unref(own, slave_task_text(l->slave));
        data = own;
    }
    w->id = xstrdup(task_id);
    w->name = xstrdup(cname);
    w->t0_us = ev_now_us();
    w->result = answer(l, name, data, &plan, &w->complete, &w->learn_ok, &work_ms);
    cJSON_Delete(own);
    w->plan = plan;
    if (plan.die || plan.drop)
        return; /* accepted; the learner goes before it can report */
    if (plan.hang && !plan.crash_during) {
        w->hung = true;
        return;
    }
    long delay = work_ms + plan.delay_ms;
    w->timer = ev_timer_start(l->env.loop, (uint64_t)delay, on_work_done, l);
}

static int start_listening(learner *l, char *err, size_t errlen)
{
    if (listen(l->fd, LISTEN_BACKLOG) < 0) {
        snprintf(err, errlen, "listen() on port %d failed: %s", l->port, strerror(errno));
        return -1;
    }
    slave_config sc;
    slave_config_init(&sc);
    sc.name = l->id;
    sc.event_learner = l->ev_id;
    sc.event_label = l->label;
    sc.http.host = l->env.host;
    sc.http.listen_fd = l->fd;
    sc.channel = l->env.channel;
    sc.heartbeat_span_ms = l->env.heartbeat_span_ms;
    sc.allow_fast_heartbeat = true;
    sc.allow_master = l->env.allow_master;
    sc.raw_depth = 2;   /* each learn data item stays raw text, */
    sc.raw_refs = true; /* validated in the body, not copied */
    slave_callbacks cbs = {
        .on_connect = on_connect,
        .on_disconnect = on_disconnect,
        .on_task = on_task,
        .on_master_lost = on_master_lost,
        .on_shutdown = on_shutdown,
    };
    l->slave = slave_new(l->env.loop, &sc, &cbs, l, err, errlen);
    if (!l->slave) {
        /* hs_start() closes the socket when it fails (hs.h), but slave_new()
         * may fail before it: close it here too (at worst EBADF). */
        close(l->fd);
        l->fd = -1;
        return -1;
    }
    l->fd = -1; /* the server owns it now and closes it when it stops */
    if (l->hb_paused)
        slave_pause_heartbeats(l->slave, true);
    return 0;
}

static void stop_slave(learner *l)
{
    if (!l->slave)
        return;
    work_cancel(l, "the learner stops listening");
    l->hb_base += slave_heartbeats_sent(l->slave);
    slave_free(l->slave);
    l->slave = NULL;
}

static void stop_timer(learner *l, ev_timer **t)
{
    if (*t)
        ev_timer_stop(l->env.loop, *t);
    *t = NULL;
}

/* The one place where a learner changes state. hold_ms (HELD only): listen
 * again after that long; < 0: stay held until lifted. */
static void go(learner *l, lstate to, long hold_ms, const char *why)
{
    lstate from = l->state;
    char err[300];
    if (from == LS_DEAD || (to == LS_LISTENING && from == LS_LISTENING))
        return;
    switch (to) {
    case LS_LISTENING:
        stop_timer(l, &l->hold_timer);
        if (start_listening(l, err, sizeof err) < 0) {
            LOG_ERROR(l->id, "cannot listen on port %d: %s", l->port, err);
            go(l, LS_DEAD, 0, "it cannot listen");
            return;
        }
        break;
    case LS_HELD:
        if (from == LS_LISTENING) {
            int port = 0;
            stop_slave(l);
            l->fd = bind_socket(l->env.host, l->port, &port, err, sizeof err);
            if (l->fd < 0) {
                LOG_ERROR(l->id, "cannot bind port %d again: %s", l->port, err);
                go(l, LS_DEAD, 0, "its port is lost");
                return;
            }
        }
        stop_timer(l, &l->hold_timer);
        if (hold_ms >= 0)
            l->hold_timer = ev_timer_start(l->env.loop, (uint64_t)hold_ms, on_hold_timer, l);
        break;
    case LS_DEAD:
        stop_slave(l);
        if (l->fd >= 0)
            close(l->fd);
        l->fd = -1;
        stop_timer(l, &l->hold_timer);
        stop_timer(l, &l->defer_timer);
        break;
    case LS_IDLE:
        return;
    }
    l->state = to;
    if (to == LS_HELD && hold_ms >= 0)
        LOG_INFO(l->id, "%s -> %s for %ld ms: %s", state_names[from], state_names[to], hold_ms, why);
    else
        LOG_INFO(l->id, "%s -> %s: %s", state_names[from], state_names[to], why);
}

/* The events' "learner": fmt with {id} and {port} replaced; NULL: the id. */
static char *event_id(const char *fmt, const char *id, int port)
{
    if (!fmt)
        return xstrdup(id);
    xbuf b = {0};
    for (const char *p = fmt; *p;) {
        if (strncmp(p, "{id}", 4) == 0) {
            xbuf_puts(&b, id);
            p += 4;
        } else if (strncmp(p, "{port}", 6) == 0) {
            xbuf_printf(&b, "%d", port);
            p += 6;
        } else {
            xbuf_append(&b, p++, 1);
        }
    }
    return xbuf_take(&b);
}

/* ---- API ---- */

learner *learner_new(const learner_env *env, const learner_config *cfg, char *err, size_t errlen)
{
    int port = 0;
    int fd = bind_socket(env->host, cfg->port, &port, err, errlen);
    if (fd < 0)
        return NULL;
    learner *l = xcalloc(1, sizeof *l);
    l->env = *env;
    l->index = cfg->index;
    l->id = xstrdup(cfg->id);
    l->label = xstrdup(cfg->label ? cfg->label : cfg->id);
    l->ev_id = event_id(cfg->event_id, cfg->id, port);
    l->port = port;
    l->batch_size = cfg->batch_size;
    l->learn_time_ms = cfg->learn_time_ms;
    l->fd = fd;
    l->state = LS_IDLE;
    return l;
}

void learner_free(learner *l)
{
    if (!l)
        return;
    work_clear(l);
    if (l->slave)
        slave_free(l->slave);
    if (l->fd >= 0)
        close(l->fd);
    stop_timer(l, &l->hold_timer);
    stop_timer(l, &l->defer_timer);
    for (size_t i = 0; i < l->nnames; i++)
        free(l->names[i].name);
    cJSON_Delete(l->task_id);
    cJSON_Delete(l->buffer_id);
    cJSON_Delete(l->prio);
    free(l->id);
    free(l->label);
    free(l->ev_id);
    free(l);
}

const char *learner_id(const learner *l)
{
    return l->id;
}

int learner_port(const learner *l)
{
    return l->port;
}

bool learner_listening(const learner *l)
{
    return l->state == LS_LISTENING;
}

bool learner_dead(const learner *l)
{
    return l->state == LS_DEAD;
}

int learner_start(learner *l, char *err, size_t errlen)
{
    if (l->state != LS_IDLE)
        return 0;
    go(l, LS_LISTENING, 0, "start-up");
    if (l->state != LS_LISTENING) {
        snprintf(err, errlen, "%s cannot listen on port %d (see the log above)", l->id, l->port);
        return -1;
    }
    return 0;
}

void learner_apply(learner *l, fault_kind kind, long ms, bool at_start, int fault_id)
{
    fault_fired(l, kind, fault_id, 1, NULL, at_start ? "at start-up" : "at once");
    switch (kind) {
    case FK_SLOW_JOIN:
        go(l, LS_HELD, ms, "slow_join fault");
        break;
    case FK_DROP:
        go(l, LS_HELD, ms, at_start ? "drop fault at start-up" : "drop fault");
        break;
    case FK_REFUSE:
        go(l, LS_HELD, -1, "refuse fault");
        break;
    case FK_DIE:
        go(l, LS_DEAD, 0, "die fault");
        break;
    case FK_NO_HEARTBEAT:
        set_paused(l, true);
        break;
    default:
        break;
    }
}

void learner_lift(learner *l)
{
    set_paused(l, false);
    if (l->state == LS_HELD)
        go(l, LS_LISTENING, 0, "faults lifted");
}

cJSON *learner_state_json(const learner *l)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", l->id);
    cJSON_AddItemToObject(o, "port", jsonx_new_i64(l->port));
    cJSON_AddStringToObject(o, "state", state_names[l->state]);
    cJSON_AddBoolToObject(o, "listening", l->state == LS_LISTENING);
    cJSON_AddBoolToObject(o, "connected", l->slave && slave_connected(l->slave));
    const char *cur = l->slave ? slave_current_task(l->slave) : NULL;
    cJSON_AddItemToObject(o, "current_task", cur ? cJSON_CreateString(cur) : cJSON_CreateNull());
    bool ours = cur && l->cur.id && strcmp(cur, l->cur.id) == 0;
    cJSON_AddItemToObject(o, "current_task_name", ours ? cJSON_CreateString(l->cur.name) : cJSON_CreateNull());
    cJSON_AddBoolToObject(o, "hung", ours && l->cur.hung);
    cJSON *tasks = cJSON_CreateObject();
    for (size_t i = 0; i < l->nnames; i++)
        cJSON_AddItemToObject(tasks, l->names[i].name, jsonx_new_i64((int64_t)l->names[i].n));
    if (l->other_names)
        cJSON_AddItemToObject(tasks, "(other)", jsonx_new_i64((int64_t)l->other_names));
    cJSON_AddItemToObject(o, "tasks", tasks);
    cJSON_AddItemToObject(o, "learn_items", jsonx_new_i64((int64_t)l->learn_items));
    cJSON_AddItemToObject(o, "learn_tasks", jsonx_new_i64((int64_t)l->learn_tasks));
    cJSON_AddItemToObject(o, "learner_iter", jsonx_new_i64(l->iter));
    cJSON_AddItemToObject(o, "batch_size", jsonx_new_i64(l->batch_size));
    unsigned long hb = l->hb_base + (l->slave ? slave_heartbeats_sent(l->slave) : 0);
    cJSON_AddItemToObject(o, "heartbeats", jsonx_new_i64((int64_t)hb));
    cJSON_AddBoolToObject(o, "heartbeats_paused", l->hb_paused);
    cJSON_AddItemToObject(o, "connects", jsonx_new_i64((int64_t)l->connects));
    return o;
}
