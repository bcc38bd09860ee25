/* sc_actions: a scenario's actions, fired at their times or on their
 * events: signals, faults and operator changes through the control ports
 * (see sc_run_int.h). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "sc_run_int.h"

static void fire_action(sc_run *r, size_t i);

void sr_act_or_delay(sc_run *r, size_t i)
{
    r->fired[i] = true;
    long d = r->s->actions[i].when.kind == SC_WHEN_AT ? 0 : r->s->actions[i].when.delay_ms;
    if (d > 0)
        r->act_timers[i] = ev_timer_start(r->loop, (uint64_t)d, sr_on_act_timer, &r->refs[i]);
    else
        fire_action(r, i);
}

void sr_on_act_timer(ev_loop *loop, void *data)
{
    act_ref *ref = data;
    ref->r->act_timers[ref->i] = NULL;
    fire_action(ref->r, ref->i);
}

static void on_cont_timer(ev_loop *loop, void *data)
{
    act_ref *ref = data;
    sc_run *r = ref->r;
    r->cont_timers[ref->i] = NULL;
    const sc_action *a = &r->s->actions[ref->i];
    rproc *rp = &r->procs[a->proc];
    if (sc_proc_running(rp->p)) {
        sc_proc_kill(rp->p, SIGCONT);
        sr_log(r, "action %zu: cont %s after %ld ms", ref->i, a->target, a->duration_ms);
        sr_mark(r, 0, a->learner >= 0 ? a->learner : -1, "cont %s", a->target);
    }
}

/* A sr_control request whose answer is only logged. */
typedef struct {
    sc_run *r;
    char *what;
    int line;
} ctl_req;

static void on_ctl_reply(void *data, const hc_result *res)
{
    ctl_req *c = data;
    sc_run *r = c->r;
    if (res->error || res->status < 200 || res->status >= 300) {
        sr_check(r, false, c->line, c->what, "the sr_control request failed: %s (HTTP %ld) %.300s",
                 res->error ? res->error : "error status", res->status, res->body ? res->body : "");
    } else {
        sr_log(r, "%s: HTTP %ld %.200s", c->what, res->status, res->body);
    }
    free(c->what);
    free(c);
}

void sr_control(sc_run *r, const char *method, int port, const char *path, const char *body, const char *what, int line)
{
    hc_opts o;
    hc_opts_init(&o);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    o.method = method;
    o.url = url;
    o.body = body ? xstrdup(body) : xstrdup("{}");
    o.body_len = strlen(o.body);
    o.timeout_ms = 5000;
    o.retries = 2;
    o.retry_wait_ms = 50;
    o.extra_header = "Content-Type: application/json";
    ctl_req *c = xcalloc(1, sizeof *c);
    c->r = r;
    c->what = xstrdup(what);
    c->line = line;
    if (!hc_send(r->hc, &o, on_ctl_reply, c)) {
        sr_check(r, false, line, what, "could not send the sr_control request to %s", url);
        free(c->what);
        free(c);
    }
}

static void operator_set(sc_run *r, const sc_action *a, const char *what)
{
    cJSON *b = cJSON_CreateObject();
    cJSON_AddStringToObject(b, "namespace", K8S_NAMESPACE);
    cJSON_AddStringToObject(b, "name", r->agg_name);
    cJSON *l = cJSON_AddArrayToObject(b, "learners");
    for (size_t i = 0; i < a->nlearners; i++) {
        char *ad = sr_learner_addr(r, a->learners[i]);
        cJSON_AddItemToArray(l, cJSON_CreateString(ad));
        free(ad);
    }
    for (size_t i = 0; i < a->naddrs; i++)
        cJSON_AddItemToArray(l, cJSON_CreateString(a->addrs[i]));
    char *body = jsonx_print(b);
    cJSON_Delete(b);
    sr_control(r, "PUT", r->op_ctl_port, "/control/learners", body, what, a->line);
    free(body);
}

static void fire_action(sc_run *r, size_t i)
{
    if (r->ph != PH_RUNNING)
        return;
    const sc_action *a = &r->s->actions[i];
    rproc *rp = a->proc >= 0 ? &r->procs[a->proc] : NULL;
    char what[256];
    snprintf(what, sizeof what, "action %zu (line %d): %s%s%s", i, a->line, sc_do_name(a->what), a->target ? " " : "",
             a->target ? a->target : "");
    sr_log(r, "%s", what);
    int row = a->learner >= 0 ? a->learner
              : (a->proc >= SC_PROC_GROUP0 && r->s->groups[a->proc - SC_PROC_GROUP0].count == 1)
                  ? r->s->groups[a->proc - SC_PROC_GROUP0].first
                  : -1;
    sr_mark(r, 0, row, "%s%s%s", sc_do_name(a->what), a->target ? " " : "", a->target ? a->target : "");
    bool running = rp && sc_proc_running(rp->p);
    switch (a->what) {
    case SC_DO_KILL:
    case SC_DO_TERM:
        if (!running) {
            sr_check(r, false, a->line, what, "%s is not running at %.0f ms", a->target, sr_now(r));
            break;
        }
        rp->runner_signal = true;
        sc_proc_kill(rp->p, a->what == SC_DO_KILL ? SIGKILL : SIGTERM);
        break;
    case SC_DO_STOP:
        if (!running) {
            sr_check(r, false, a->line, what, "%s is not running at %.0f ms", a->target, sr_now(r));
            break;
        }
        sc_proc_kill(rp->p, SIGSTOP);
        if (a->duration_ms > 0)
            r->cont_timers[i] = ev_timer_start(r->loop, (uint64_t)a->duration_ms, on_cont_timer, &r->refs[i]);
        break;
    case SC_DO_CONT:
        if (running)
            sc_proc_kill(rp->p, SIGCONT);
        break;
    case SC_DO_RESTART:
        if (running) {
            rp->runner_signal = true;
            rp->restart_pending = true;
            sc_proc_kill(rp->p, SIGKILL);
        } else {
            sr_spawn(r, a->proc);
        }
        break;
    case SC_DO_START:
        if (running) {
            sr_check(r, false, a->line, what, "%s is already running", a->target);
            break;
        }
        if (!rp)
            break;
        rp->wanted = true;
        sr_spawn(r, a->proc);
        break;
    case SC_DO_FAULT:
        if (!running || !rp->ready) {
            sr_check(r, false, a->line, what, "%s is not running (or not ready) at %.0f ms: no sr_control port",
                     a->target, sr_now(r));
            break;
        }
        sr_control(r, "POST", rp->ctl_port, "/fault", a->fault, what, a->line);
        break;
    case SC_DO_CLEAR_FAULTS:
        if (!running || !rp->ready) {
            sr_check(r, false, a->line, what, "%s is not running at %.0f ms", a->target, sr_now(r));
            break;
        }
        sr_control(r, "DELETE", rp->ctl_port, "/fault", NULL, what, a->line);
        break;
    case SC_DO_OPERATOR_SET:
        operator_set(r, a, what);
        break;
    case SC_DO_OPERATOR_FAULT:
        sr_control(r, "POST", r->op_ctl_port, "/control/fault", a->fault, what, a->line);
        break;
    case SC_DO_OPERATOR_CLEAR:
        sr_control(r, "DELETE", r->op_ctl_port, "/control/fault", NULL, what, a->line);
        break;
    case SC_DO_COUNT:
        break;
    }
}
