/* sc_run: one run of one scenario (see sc_run.h).
 *
 * Phases, changed only by sr_set_phase() (which logs them):
 *   OPERATOR   the mock operator is started (k8s mode) and its ready line
 *              awaited
 *   LEARNERS   the learner groups that start first, until all are ready
 *   RUNNING    t0: the aggregator is started; timed actions, events, the
 *              coordinator once the aggregator is ready, world-size samples
 *   PROBING    the coordinator is done (and min_run_ms passed) or the
 *              timeout hit: the final /metrics and operator state are read
 *   STOPPING   expectations checked; every process gets SIGTERM, SIGKILL
 *              after a grace period
 *   DONE       everything exited; the done callback runs */
#include "sc_run_int.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jsonx.h"
#include "util.h"

static const char *const phase_names[] = {"starting operator", "starting learners", "running",
                                          "final checks",      "stopping",          "done"};

/* ---- small helpers ---- */

double sr_now(const sc_run *r)
{
    if (!r->t0_set)
        return 0;
    return (double)(ev_now_ms() - r->t0_ms);
}

void sr_log(sc_run *r, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    double el = (double)(ev_now_ms() - r->start_ms);
    if (r->rlog) {
        fprintf(r->rlog, "%9.1f ms  t=%8.1f  %s\n", el, sr_now(r), msg);
        fflush(r->rlog);
    }
    if (r->opts.verbose)
        fprintf(stderr, "[%s %8.1f] %s\n", r->s->name, sr_now(r), msg);
}

void sr_check(sc_run *r, bool ok, int line, const char *what, const char *fmt, ...)
{
    sc_result *res = &r->res;
    if (res->nchecks == r->capchecks) {
        r->capchecks = r->capchecks ? r->capchecks * 2 : 16;
        res->checks = xrealloc(res->checks, r->capchecks * sizeof *res->checks);
    }
    char detail[4096] = "";
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(detail, sizeof detail, fmt, ap);
        va_end(ap);
    }
    sc_check *c = &res->checks[res->nchecks++];
    c->ok = ok;
    c->skipped = false;
    c->line = line;
    c->what = xstrdup(what);
    c->detail = xstrdup(detail);
    sr_log(r, "check %s: %s%s%s", ok ? "ok" : "FAILED", what, detail[0] ? ": " : "", detail);
}

void sr_skip(sc_run *r, int line, const char *what, const char *fmt, ...)
{
    char why[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    sr_check(r, true, line, what, "%s", why);
    r->res.checks[r->res.nchecks - 1].skipped = true;
    sr_log(r, "(skipped: %s)", what);
}

void sr_mark(sc_run *r, int kind, int learner, const char *fmt, ...)
{
    sc_result *res = &r->res;
    if (res->nmarks >= 5000)
        return;
    if (res->nmarks == r->capmarks) {
        r->capmarks = r->capmarks ? r->capmarks * 2 : 32;
        res->marks = xrealloc(res->marks, r->capmarks * sizeof *res->marks);
    }
    char label[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(label, sizeof label, fmt, ap);
    va_end(ap);
    sc_mark *m = &res->marks[res->nmarks++];
    m->t_ms = sr_now(r);
    m->label = xstrdup(label);
    m->kind = kind;
    m->learner = learner;
}

/* ---- results storage ---- */

void sr_add_sample(sc_run *r, double t, int v)
{
    sc_result *res = &r->res;
    if (res->nsamples == r->capsamples) {
        r->capsamples = r->capsamples ? r->capsamples * 2 : 256;
        res->samples = xrealloc(res->samples, r->capsamples * sizeof *res->samples);
    }
    res->samples[res->nsamples].t_ms = t;
    res->samples[res->nsamples].value = v;
    res->nsamples++;
}

int sr_bar_open(sc_run *r, int learner, const char *task)
{
    sc_result *res = &r->res;
    if (res->nbars >= 200000)
        return -1;
    if (res->nbars == r->capbars) {
        r->capbars = r->capbars ? r->capbars * 2 : 64;
        res->bars = xrealloc(res->bars, r->capbars * sizeof *res->bars);
    }
    sc_bar *b = &res->bars[res->nbars];
    b->learner = learner;
    b->task = xstrdup(task);
    b->t0_ms = sr_now(r);
    b->t1_ms = -1;
    b->outcome = 0;
    return (int)res->nbars++;
}

void sr_bar_close(sc_run *r, int learner, int outcome)
{
    if (learner < 0 || learner >= r->s->nlearners)
        return;
    int b = r->bar_open[learner];
    if (b < 0)
        return;
    r->res.bars[b].t1_ms = sr_now(r);
    r->res.bars[b].outcome = outcome;
    r->bar_open[learner] = -1;
}

/* ---- phases ---- */

void sr_set_phase(sc_run *r, phase ph)
{
    if (r->ph == ph)
        return;
    sr_log(r, "phase: %s -> %s", phase_names[r->ph], phase_names[ph]);
    r->ph = ph;
}

const char *sc_run_phase(const sc_run *r)
{
    return phase_names[r->ph];
}
double sc_run_elapsed_ms(const sc_run *r)
{
    return (double)(ev_now_ms() - r->start_ms);
}
const sc_result *sc_run_result(const sc_run *r)
{
    return &r->res;
}
const sc_scenario *sc_run_scenario(const sc_run *r)
{
    return r->s;
}

void sr_fail(sc_run *r, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!r->res.error)
        r->res.error = xstrdup(msg);
    sr_check(r, false, 0, "the run", "%s", msg);
    sr_begin_probes(r, msg);
}

/* ---- start-up ---- */

static void start_aggregator(sc_run *r);
static void maybe_done(sc_run *r);
static void on_coord_timer(ev_loop *loop, void *data);
static void on_group_timer(ev_loop *loop, void *data);

static void start_learners(sc_run *r)
{
    sr_set_phase(r, PH_LEARNERS);
    bool waiting = false;
    for (size_t g = 0; g < r->s->ngroups; g++) {
        const sc_group *gr = &r->s->groups[g];
        if (gr->absent || gr->address || gr->start_ms >= 0) /* an address: already running */
            continue;
        if (sr_spawn(r, SC_PROC_GROUP0 + (int)g) != 0)
            return;
        waiting = true;
    }
    if (!waiting)
        start_aggregator(r);
}

static bool learners_ready(const sc_run *r)
{
    for (size_t g = 0; g < r->s->ngroups; g++) {
        const sc_group *gr = &r->s->groups[g];
        if (!gr->absent && !gr->address && gr->start_ms < 0 && !r->procs[SC_PROC_GROUP0 + g].ready)
            return false;
    }
    return true;
}

static void on_min_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->min_timer = NULL;
    if (r->ph == PH_RUNNING && (r->coord_done || !r->s->coordinator))
        sr_begin_probes(r, r->s->coordinator ? "the coordinator is done" : "min_run_ms is over");
}

static void start_aggregator(sc_run *r)
{
    sr_set_phase(r, PH_RUNNING);
    r->t0_ms = ev_now_ms();
    r->t0_set = true;
    if (sr_spawn(r, SC_PROC_AGG) != 0)
        return;
    if (r->opts.profile && r->opts.profile->ready == SC_READY_SLAVE_PORT)
        r->sample_timer = ev_timer_start(r->loop, 20, sr_on_sample_timer, r);
    for (size_t i = 0; i < r->s->nactions; i++)
        if (r->s->actions[i].when.kind == SC_WHEN_AT) {
            r->fired[i] = true;
            r->act_timers[i] =
                ev_timer_start(r->loop, (uint64_t)r->s->actions[i].when.at_ms, sr_on_act_timer, &r->refs[i]);
        }
    for (size_t g = 0; g < r->s->ngroups; g++) {
        const sc_group *gr = &r->s->groups[g];
        if (!gr->absent && gr->start_ms >= 0)
            r->procs[SC_PROC_GROUP0 + g].start_timer =
                ev_timer_start(r->loop, (uint64_t)gr->start_ms, on_group_timer, &r->procs[SC_PROC_GROUP0 + g]);
    }
    if (r->s->min_run_ms > 0)
        r->min_timer = ev_timer_start(r->loop, (uint64_t)r->s->min_run_ms, on_min_timer, r);
}

static void on_group_timer(ev_loop *loop, void *data)
{
    rproc *rp = data;
    sc_run *r = rp->run;
    rp->start_timer = NULL;
    if (r->ph != PH_RUNNING || sc_proc_running(rp->p))
        return;
    sr_log(r, "group %s starts (start_ms)", sc_scenario_proc_name(r->s, rp->idx));
    sr_spawn(r, rp->idx);
}

static void on_coord_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->coord_timer = NULL;
    if (r->ph == PH_RUNNING)
        sr_spawn(r, SC_PROC_COORD);
}

void sr_on_ready(sc_run *r, int idx, cJSON *j)
{
    rproc *rp = &r->procs[idx];
    rp->ready = true;
    sr_log(r, "%s is ready", sc_scenario_proc_name(r->s, idx));
    if (idx >= SC_PROC_GROUP0) {
        /* check that the learners listen where the runner configured them */
        const cJSON *ls = jsonx_get(j, "learners");
        const cJSON *first = ls ? cJSON_GetArrayItem(ls, 0) : NULL;
        int64_t port;
        if (first && jsonx_get_i64(jsonx_get(first, "port"), &port) && port != rp->base_port)
            sr_check(r, false, 0, "learner ports", "group %s listens from port %lld, not %d as asked with --base-port",
                     sc_scenario_proc_name(r->s, idx), (long long)port, rp->base_port);
    }
    sr_proc_event(r, SC_WHEN_READY, idx);
    switch (r->ph) {
    case PH_OPERATOR:
        if (idx == SC_PROC_OP) {
            for (size_t f = 0; f < r->s->nop_faults; f++) {
                char *t = sr_fault_text(r->s->op_faults[f]);
                sr_control(r, "POST", r->op_ctl_port, "/control/fault", t, "operator.faults", 0);
                free(t);
            }
            start_learners(r);
        }
        break;
    case PH_LEARNERS:
        if (learners_ready(r))
            start_aggregator(r);
        break;
    case PH_RUNNING:
        if (idx == SC_PROC_AGG) {
            sr_events_drain(r, idx); /* its events up to now come first */
            sr_world_live(r);
        }
        if (idx == SC_PROC_AGG && sc_proc_spawns(rp->p) == 1) {
            sr_mark(r, 3, -1, "aggregator ready");
            if (r->s->coordinator)
                r->coord_timer = ev_timer_start(r->loop, (uint64_t)r->s->coord_start_ms, on_coord_timer, r);
            if (!r->opts.agg_events && !r->sample_timer && !r->sample_req)
                r->sample_timer = ev_timer_start(r->loop, 0, sr_on_sample_timer, r);
        }
        break;
    default:
        break;
    }
}

bool sr_exit_expected(const sc_run *r, int idx)
{
    for (size_t i = 0; i < r->s->expect.nexits; i++)
        if (strcmp(r->s->expect.exits[i].process, sc_scenario_proc_name(r->s, idx)) == 0)
            return true;
    return false;
}

void sr_on_exit(void *ud, sc_proc *p, int status)
{
    rproc *rp = ud;
    sc_run *r = rp->run;
    int idx = rp->idx;
    const char *name = sc_scenario_proc_name(r->s, idx);
    char how[128];
    sc_describe_status(status, how, sizeof how);
    sr_log(r, "%s %s", name, how);
    sr_events_drain(r, idx); /* what it wrote before it ended comes first */
    if (rp->ev_part.len) /* it ended in the middle of a line */
        sr_check(r, false, 0, "every event line is valid", "%s:%ld: the last line is cut short (%zu bytes, no newline)",
                 rp->ev_path, rp->ev_line + 1, rp->ev_part.len);
    if (r->ph >= PH_STOPPING) {
        /* the aggregator must leave cleanly on SIGTERM */
        /* (not when aborted: then every process gets SIGKILL at once) */
        if (idx == SC_PROC_AGG && rp->teardown && !r->aborted && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
            /* ours promises it; how another aggregator ends is not part of
             * the protocol: told, not judged */
            if (r->opts.profile)
                sr_skip(r, 0, "aggregator exits with 0 on SIGTERM at the end",
                        "how an aggregator ends is not part of the protocol (profile %s); it %s%s", r->opts.profile->name,
                        how, r->killed_after_grace ? " (no exit within the grace period)" : "");
            else
                sr_check(r, false, 0, "aggregator exits with 0 on SIGTERM at the end", "it %s%s", how,
                         r->killed_after_grace ? " (no exit within the grace period)" : "");
        }
        maybe_done(r);
        return;
    }
    bool first_exit = !rp->exited;
    rp->exited = true;
    rp->status = status;
    rp->exit_t = sr_now(r);
    int row = idx >= SC_PROC_GROUP0 && r->s->groups[idx - SC_PROC_GROUP0].count == 1
                  ? r->s->groups[idx - SC_PROC_GROUP0].first
                  : -1;
    if (r->t0_set && idx != SC_PROC_COORD)
        sr_mark(r, 1, row, "%s %s", name, how);
    if (idx >= SC_PROC_GROUP0) {
        const sc_group *gr = &r->s->groups[idx - SC_PROC_GROUP0];
        for (int l = gr->first; l < gr->first + gr->count; l++)
            sr_bar_close(r, l, 3);
    }
    if (!rp->ready && r->ph < PH_RUNNING) {
        sr_fail(r, "%s %s before its ready line; its last log lines:\n%s", name, how, sc_proc_tail(rp->p));
        return;
    }
    if (idx == SC_PROC_AGG && !rp->ready && !rp->runner_signal) {
        sr_fail(r, "the aggregator %s before its ready line; its last log lines:\n%s", how, sc_proc_tail(rp->p));
        return;
    }
    /* exits nobody asked for */
    bool crash_sig = WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL && WTERMSIG(status) != SIGTERM;
    if (!rp->runner_signal && !sr_exit_expected(r, idx) && (idx == SC_PROC_AGG || idx == SC_PROC_OP || crash_sig)) {
        if (first_exit || crash_sig)
            sr_check(r, false, 0, "no process ends unexpectedly",
                     "%s %s at %.0f ms without an action asking for it; its last log lines:\n%s", name, how, sr_now(r),
                     sc_proc_tail(rp->p));
    }
    sr_proc_event(r, SC_WHEN_EXIT, idx);
    if (rp->restart_pending && r->ph == PH_RUNNING) {
        rp->restart_pending = false;
        sr_spawn(r, idx);
        return;
    }
    if (idx == SC_PROC_COORD) {
        r->coord_done = true;
        r->coord_end_ms = sr_now(r);
        r->res.run_ms = r->coord_end_ms;
        sr_mark(r, 2, -1, "coordinator done (%s)", how);
        if (!r->summary && !rp->runner_signal)
            sr_check(r, false, 0, "the coordinator prints its summary",
                     "it %s without a summary line on stdout; its last log lines:\n%s", how, sc_proc_tail(rp->p));
        if (!r->min_timer)
            sr_begin_probes(r, "the coordinator is done");
    }
}

/* ---- the end ---- */
void sr_stop_timer(sc_run *r, ev_timer **t)
{
    if (*t) {
        ev_timer_stop(r->loop, *t);
        *t = NULL;
    }
}

void sr_stop_all_timers(sc_run *r)
{
    sr_stop_timer(r, &r->sample_timer);
    sr_stop_timer(r, &r->min_timer);
    sr_stop_timer(r, &r->coord_timer);
    sr_stop_timer(r, &r->timeout_timer);
    sr_stop_timer(r, &r->settle_timer);
    for (size_t i = 0; i < r->s->nactions; i++) {
        sr_stop_timer(r, &r->act_timers[i]);
        sr_stop_timer(r, &r->cont_timers[i]);
    }
    for (size_t i = 0; i < r->nprocs; i++) {
        sr_stop_timer(r, &r->procs[i].start_timer);
        sr_stop_timer(r, &r->procs[i].ready_timer);
        if (r->procs[i].ready_req) {
            hc_cancel(r->hc, r->procs[i].ready_req);
            r->procs[i].ready_req = NULL;
        }
    }
    if (r->sample_req) {
        hc_cancel(r->hc, r->sample_req);
        r->sample_req = NULL;
    }
}

/* A process the runner signalled during the run (term, kill) and that has
 * not exited yet: the run waits for it (up to GRACE_MS) before the final
 * checks, so that an expected exit is seen. */
static void on_kill_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->kill_timer = NULL;
    r->killed_after_grace = true;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].p && sc_proc_running(r->procs[i].p)) {
            sr_log(r, "%s still runs %d ms after SIGTERM: SIGKILL", sc_scenario_proc_name(r->s, (int)i), GRACE_MS);
            sc_proc_kill(r->procs[i].p, SIGKILL);
        }
}

static void on_done_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->done_timer = NULL;
    r->done(r->ud, r);
}

static void finish_result(sc_run *r)
{
    sc_result *res = &r->res;
    size_t judged = 0;
    for (size_t i = 0; i < res->nchecks; i++)
        judged += !res->checks[i].skipped;
    res->passed = !res->error && judged > 0;
    for (size_t i = 0; i < res->nchecks; i++)
        if (!res->checks[i].ok)
            res->passed = false;
    res->outcome = res->passed ? SC_PASSED : res->error ? SC_ERROR : SC_FAILED;
    if (!res->error && res->nchecks > 0 && judged == 0) {
        /* never green while testing nothing */
        res->outcome = SC_SKIPPED;
        res->error = xasprintf("every expectation was skipped (the first: %s: %s)", res->checks[0].what,
                               res->checks[0].detail);
    }
    res->interrupted = r->aborted;
    res->timed_out = r->timed_out;
    res->duration_ms = (double)(ev_now_ms() - r->start_ms);
    for (int l = 0; l < r->s->nlearners; l++)
        sr_bar_close(r, l, 3);
    /* bars still open at the end are cut there */
    for (size_t b = 0; b < res->nbars; b++)
        if (res->bars[b].t1_ms < 0)
            res->bars[b].t1_ms = res->run_ms;
    /* result.json in the run folder */
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "scenario", res->name);
    cJSON_AddStringToObject(j, "file", res->path);
    cJSON_AddItemToObject(j, "seed", jsonx_new_i64((int64_t)res->seed));
    cJSON_AddBoolToObject(j, "passed", res->passed);
    static const char *const outcomes[] = {"passed", "failed", "error", "skipped"};
    cJSON_AddStringToObject(j, "outcome", outcomes[res->outcome]);
    if (res->error)
        cJSON_AddStringToObject(j, "error", res->error);
    cJSON_AddItemToObject(j, "duration_ms", jsonx_new_double(res->duration_ms));
    cJSON_AddStringToObject(j, "replay", res->replay);
    cJSON *cs = cJSON_AddArrayToObject(j, "checks");
    for (size_t i = 0; i < res->nchecks; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddBoolToObject(c, "ok", res->checks[i].ok);
        if (res->checks[i].skipped)
            cJSON_AddBoolToObject(c, "skipped", true);
        cJSON_AddItemToObject(c, "line", jsonx_new_i64(res->checks[i].line));
        cJSON_AddStringToObject(c, "what", res->checks[i].what);
        cJSON_AddStringToObject(c, "detail", res->checks[i].detail);
        cJSON_AddItemToArray(cs, c);
    }
    /* the timeline's marks: actions and fired faults, exits, events, notes */
    cJSON *ms = cJSON_AddArrayToObject(j, "marks");
    static const char *const mark_kinds[] = {"injected", "exit", "event", "note"};
    for (size_t i = 0; i < res->nmarks; i++) {
        cJSON *m = cJSON_CreateObject();
        cJSON_AddItemToObject(m, "t_ms", jsonx_new_double(res->marks[i].t_ms));
        cJSON_AddStringToObject(m, "kind", mark_kinds[res->marks[i].kind & 3]);
        cJSON_AddItemToObject(m, "learner", jsonx_new_i64(res->marks[i].learner));
        cJSON_AddStringToObject(m, "label", res->marks[i].label);
        cJSON_AddItemToArray(ms, m);
    }
    char *text = cJSON_Print(j);
    cJSON_Delete(j);
    char *path = xasprintf("%s/result.json", r->run_dir);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "%s\n", text);
        fclose(f);
    }
    free(path);
    free(text);
}

/* Once everything the run started has exited, its ports go back to the
 * pool (a long -j 1 run of the library would hold every run's ports until
 * the end, and a large group then finds no free range). Idempotent. */
static void release_run_ports(sc_run *r)
{
    for (size_t i = 0; i < r->nprocs; i++) {
        sr_release_ports(r, r->procs[i].base_port, i >= SC_PROC_GROUP0 ? r->s->groups[i - SC_PROC_GROUP0].count : 0);
        sr_release_ports(r, r->procs[i].ctl_port, i >= SC_PROC_GROUP0 ? 1 : 0);
        r->procs[i].base_port = r->procs[i].ctl_port = 0;
    }
    sr_release_ports(r, r->agg_slave_port, 6);
    r->agg_slave_port = 0;
}

static void maybe_done(sc_run *r)
{
    if (r->ph != PH_STOPPING)
        return;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].p && (sc_proc_running(r->procs[i].p) || sc_proc_pid(r->procs[i].p)))
            return;
    /* also wait for procs reaped but with pipes still draining: on_exit
     * comes last, so a running flag of false and a pid of 0 mean done */
    sr_stop_timer(r, &r->kill_timer);
    sr_set_phase(r, PH_DONE);
    release_run_ports(r);
    finish_result(r);
    sr_log(r, "%s after %.0f ms", r->res.passed ? "PASSED" : "FAILED", r->res.duration_ms);
    if (r->rlog) {
        fclose(r->rlog);
        r->rlog = NULL;
    }
    r->done_timer = ev_timer_start(r->loop, 0, on_done_timer, r);
}

void sr_teardown(sc_run *r)
{
    sr_set_phase(r, PH_STOPPING);
    if (r->probe_metrics) {
        hc_cancel(r->hc, r->probe_metrics);
        r->probe_metrics = NULL;
    }
    if (r->probe_op) {
        hc_cancel(r->hc, r->probe_op);
        r->probe_op = NULL;
    }
    if (r->probe_journal) {
        hc_cancel(r->hc, r->probe_journal);
        r->probe_journal = NULL;
    }
    int sig = r->aborted ? SIGKILL : SIGTERM;
    for (size_t i = 0; i < r->nprocs; i++) {
        rproc *rp = &r->procs[i];
        if (rp->p && sc_proc_running(rp->p)) {
            rp->runner_signal = true;
            rp->teardown = true;
            /* the coordinator first would be nicer; all at once is faster */
            sc_proc_kill(rp->p, sig);
        }
    }
    r->kill_timer = ev_timer_start(r->loop, GRACE_MS, on_kill_timer, r);
    maybe_done(r);
}

static void on_timeout(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->timeout_timer = NULL;
    r->timed_out = true;
    char pending[512] = "";
    if (r->ph == PH_OPERATOR)
        snprintf(pending, sizeof pending, "the operator never printed its ready line");
    else if (r->ph == PH_LEARNERS) {
        size_t l = 0;
        for (size_t g = 0; g < r->s->ngroups; g++)
            if (!r->s->groups[g].absent && r->s->groups[g].start_ms < 0 && !r->procs[SC_PROC_GROUP0 + g].ready)
                l += (size_t)snprintf(pending + l, sizeof pending - l > l ? sizeof pending - l : 0,
                                      "%sgroup %s not ready", l ? ", " : "", r->s->groups[g].name);
    } else if (!r->procs[SC_PROC_AGG].ready)
        snprintf(pending, sizeof pending, "the aggregator never printed its ready line");
    else if (r->s->coordinator && !r->coord_done)
        snprintf(pending, sizeof pending, "the coordinator had not finished: it sent %d tasks and got %d outcomes",
                 r->sent[NTASKN], r->done_n[NTASKN]);
    char what[96];
    snprintf(what, sizeof what, "the run ends within timeout_ms (%ld ms)", r->s->timeout_ms);
    sr_check(r, false, 0, what, "timed out: %s", pending[0] ? pending : "still running");
    sr_begin_probes(r, "timeout");
}

static void on_start_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->done_timer = NULL;
    if (sr_build_commands(r) != 0) {
        sr_fail(r, "could not prepare the run (free ports or the run folder %s)", r->run_dir);
        return;
    }
    sr_write_commands(r);
    if (sr_events_watch(r) != 0)
        return;
    if (r->s->k8s) {
        sr_set_phase(r, PH_OPERATOR);
        sr_spawn(r, SC_PROC_OP);
    } else {
        start_learners(r);
    }
}

static int mkdir_p(const char *path)
{
    char *p = xstrdup(path);
    for (char *s = p + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    int rc = mkdir(p, 0755);
    free(p);
    return rc == 0 || errno == EEXIST ? 0 : -1;
}

/* A new run folder OUT/runs/<name>-<seed>, or <name>-<seed>.N (N = 2, 3,
 * ...) if that exists: a replay or a repeat never overwrites the evidence of
 * an earlier run. */
static char *new_run_dir(const char *out_dir, const char *name, uint64_t seed)
{
    char *runs = xasprintf("%s/runs", out_dir);
    mkdir_p(runs);
    char *dir = xasprintf("%s/%s-%llu", runs, name, (unsigned long long)seed);
    for (int n = 2; mkdir(dir, 0755) != 0 && errno == EEXIST && n < 100000; n++) {
        free(dir);
        dir = xasprintf("%s/%s-%llu.%d", runs, name, (unsigned long long)seed, n);
    }
    free(runs);
    return dir;
}

sc_run *sc_run_start(ev_loop *loop, sc_procset *set, const sc_scenario *s, const sc_run_opts *opts, sc_run_done_cb done,
                     void *ud)
{
    sc_run *r = xcalloc(1, sizeof *r);
    r->loop = loop;
    r->set = set;
    r->s = s;
    r->opts = *opts;
    r->done = done;
    r->ud = ud;
    r->hc = hc_new(loop);
    r->ino_fd = r->ino_dir_wd = -1;
    r->seed = opts->has_seed ? opts->seed : s->seed;
    r->start_ms = ev_now_ms();
    r->run_dir = new_run_dir(opts->out_dir, s->name, r->seed);
    r->nprocs = sc_scenario_proc_count(s);
    r->procs = xcalloc(r->nprocs, sizeof *r->procs);
    static const sc_proc_callbacks cbs = {sr_on_line, sr_on_exit};
    for (size_t i = 0; i < r->nprocs; i++) {
        rproc *rp = &r->procs[i];
        rp->run = r;
        rp->idx = (int)i;
        rp->ev_fd = -1;
        rp->ev_wd = -1;
        rp->ev_seq = -1;
        const char *nm = sc_scenario_proc_name(s, (int)i);
        rp->p = sc_proc_new(set, nm, r->run_dir, &cbs, rp);
    }
    r->act_timers = xcalloc(s->nactions + 1, sizeof *r->act_timers);
    r->cont_timers = xcalloc(s->nactions + 1, sizeof *r->cont_timers);
    r->refs = xcalloc(s->nactions + 1, sizeof *r->refs);
    for (size_t i = 0; i < s->nactions; i++) {
        r->refs[i].r = r;
        r->refs[i].i = i;
    }
    r->fired = xcalloc(s->nactions + 1, sizeof *r->fired);
    size_t nl = (size_t)s->nlearners + 1;
    r->lt_count = xcalloc(nl * NTASKN, sizeof *r->lt_count);
    r->lt_any = xcalloc(nl, sizeof *r->lt_any);
    r->bar_open = xcalloc(nl, sizeof *r->bar_open);
    for (size_t i = 0; i < nl; i++)
        r->bar_open[i] = -1;
    char *rl = xasprintf("%s/runner.log", r->run_dir);
    r->rlog = fopen(rl, "w");
    free(rl);
    sc_result *res = &r->res;
    res->name = xstrdup(s->name);
    res->path = xstrdup(s->path);
    res->description = xstrdup(s->description ? s->description : "");
    res->seed = r->seed;
    res->attempt = opts->attempt;
    res->run_dir = xstrdup(r->run_dir);
    res->replay = xasprintf("%s --seed %llu %s", opts->replay_prefix ? opts->replay_prefix : "run_scenarios",
                            (unsigned long long)r->seed, s->path);
    res->nlearners = s->nlearners;
    res->nprocs = r->nprocs;
    res->procs = xcalloc(r->nprocs, sizeof *res->procs);
    res->logs = xcalloc(r->nprocs, sizeof *res->logs);
    for (size_t i = 0; i < r->nprocs; i++) {
        res->procs[i] = xstrdup(sc_scenario_proc_name(s, (int)i));
        res->logs[i] = xstrdup(sc_proc_log_path(r->procs[i].p));
    }
    sr_log(r, "scenario %s (%s), seed %llu, time_scale %g, timeout %ld ms", s->name, s->path,
           (unsigned long long)r->seed, s->time_scale, s->timeout_ms);
    sr_log(r,
           "timings: heartbeat span %ld, tolerance %ld, max_retry %ld, retry interval %ld, sync %ld, deadline %ld ms",
           s->heartbeat_span_ms, s->heartbeat_tolerance_ms, s->max_retry_ms, s->retry_interval_ms, s->sync_period_ms,
           s->task_deadline_ms);
    r->timeout_timer = ev_timer_start(loop, (uint64_t)s->timeout_ms, on_timeout, r);
    r->done_timer = ev_timer_start(loop, 0, on_start_timer, r);
    return r;
}

void sc_run_abort(sc_run *r, const char *why)
{
    if (r->ph >= PH_STOPPING)
        return;
    r->aborted = true;
    r->res.interrupted = true;
    if (!r->res.error)
        r->res.error = xstrdup(why);
    sr_check(r, false, 0, "the run", "%s", why);
    if (r->ph < PH_PROBING) {
        if (r->done_timer) { /* not even started */
            ev_timer_stop(r->loop, r->done_timer);
            r->done_timer = NULL;
        }
        sr_set_phase(r, PH_PROBING);
        sr_stop_all_timers(r);
    }
    sr_teardown(r);
}

static void result_clear(sc_result *res)
{
    free(res->name);
    free(res->path);
    free(res->description);
    free(res->error);
    free(res->run_dir);
    free(res->replay);
    for (size_t i = 0; i < res->nchecks; i++) {
        free(res->checks[i].what);
        free(res->checks[i].detail);
    }
    free(res->checks);
    for (size_t i = 0; i < res->nmarks; i++)
        free(res->marks[i].label);
    free(res->marks);
    for (size_t i = 0; i < res->nbars; i++)
        free(res->bars[i].task);
    free(res->bars);
    free(res->samples);
    for (size_t i = 0; i < res->nprocs; i++) {
        free(res->procs[i]);
        free(res->logs[i]);
    }
    free(res->procs);
    free(res->logs);
    free(res->coordinator_summary);
}

sc_result *sc_result_unrun(const char *name, const char *path, uint64_t seed, const char *replay, sc_outcome outcome,
                           const char *why, int line)
{
    sc_result *res = xcalloc(1, sizeof *res);
    res->name = xstrdup(name);
    res->path = xstrdup(path);
    res->description = xstrdup("");
    res->seed = seed;
    res->replay = xstrdup(replay);
    res->outcome = outcome;
    res->error = xstrdup(why);
    res->error_line = line;
    return res;
}

void sc_result_free(sc_result *res)
{
    if (!res)
        return;
    result_clear(res);
    free(res);
}

void sc_run_free(sc_run *r)
{
    if (!r)
        return;
    sr_stop_all_timers(r);
    sr_stop_timer(r, &r->kill_timer);
    sr_stop_timer(r, &r->done_timer);
    sr_events_free(r);
    hc_free(r->hc);
    release_run_ports(r);
    for (size_t i = 0; i < r->nprocs; i++) {
        sc_proc_free(r->procs[i].p);
        util_strv_free(r->procs[i].argv);
        util_strv_free(r->procs[i].env);
    }
    free(r->procs);
    free(r->act_timers);
    free(r->cont_timers);
    free(r->refs);
    free(r->fired);
    free(r->lt_count);
    free(r->lt_any);
    free(r->bar_open);
    for (size_t i = 0; i < r->nlts; i++)
        free(r->lts[i].task);
    free(r->lts);
    cJSON_Delete(r->summary);
    cJSON_Delete(r->op_state);
    cJSON_Delete(r->op_journal);
    free(r->last_metrics);
    free(r->resource_t);
    free(r->final_metrics);
    free(r->agg_probe_error);
    free(r->op_error);
    free(r->run_dir);
    free(r->agg_name);
    if (r->rlog)
        fclose(r->rlog);
    result_clear(&r->res);
    free(r);
}
