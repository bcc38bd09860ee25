/* sc_probe: what the runner asks the processes over HTTP: the world size
 * sampled during the run, and the final /metrics and operator state
 * (see sc_run_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "sc_run_int.h"

/* GET http://127.0.0.1:PORT PATH, one try; NULL if it could not be sent. */
static hc_req *http_get(sc_run *r, int port, const char *path, long timeout_ms, long connect_ms, hc_cb cb, void *ud)
{
    hc_opts o;
    hc_opts_init(&o);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    o.method = "GET";
    o.url = url;
    o.timeout_ms = timeout_ms;
    o.connect_timeout_ms = connect_ms;
    o.retries = 0;
    return hc_send(r->hc, &o, cb, ud);
}

static void on_sample_reply(void *data, const hc_result *res)
{
    sc_run *r = data;
    r->sample_req = NULL;
    rproc *ag = &r->procs[SC_PROC_AGG];
    const sc_profile *pf = r->opts.profile;
    if (!ag->ready && pf && pf->ready == SC_READY_SLAVE_PORT) { /* a readiness poll of the slave port */
        if (!res->error && res->status > 0)
            sr_on_ready(r, SC_PROC_AGG, NULL);
    } else if (!res->error && res->status == 200 && res->body) {
        double v;
        if (sc_prom_value(res->body, WORLD_METRIC, NULL, &v)) {
            int iv = (int)v;
            /* keep the series small: a sample only when the value changes,
             * plus one every 250 ms */
            size_t n = r->res.nsamples;
            double t = sr_now(r);
            if (n < 2 || r->res.samples[n - 1].value != iv || r->res.samples[n - 2].value != iv ||
                t - r->res.samples[n - 2].t_ms > 250)
                sr_add_sample(r, t, iv);
            else
                r->res.samples[n - 1].t_ms = t;
        }
        free(r->last_metrics);
        r->last_metrics = xstrdup(res->body);
    }
    if (r->ph == PH_RUNNING && !r->sample_timer)
        r->sample_timer = ev_timer_start(r->loop, (uint64_t)r->s->sample_ms, sr_on_sample_timer, r);
}

void sr_on_sample_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->sample_timer = NULL;
    if (r->ph != PH_RUNNING)
        return;
    rproc *ag = &r->procs[SC_PROC_AGG];
    const sc_profile *pf = r->opts.profile;
    /* without a profile's /metrics there is nothing to sample; with its
     * readiness known from the slave port, that is asked until it answers */
    bool poll_ready = pf && pf->ready == SC_READY_SLAVE_PORT && !ag->ready;
    if (!sc_proc_running(ag->p) || sc_proc_stopped(ag->p) || (!ag->ready && !poll_ready) ||
        (ag->ready && pf && !pf->metrics)) {
        r->sample_timer = ev_timer_start(r->loop, (uint64_t)r->s->sample_ms, sr_on_sample_timer, r);
        return;
    }
    r->sample_req = poll_ready ? http_get(r, r->agg_slave_port, "/", 1000, 500, on_sample_reply, r)
                               : http_get(r, r->agg_metrics_port, "/metrics", 1000, 500, on_sample_reply, r);
    if (!r->sample_req)
        r->sample_timer = ev_timer_start(r->loop, (uint64_t)r->s->sample_ms, sr_on_sample_timer, r);
}

/* ---- readiness of a learner given by command ---- */

static void on_ready_timer(ev_loop *loop, void *data);

static void on_ready_reply(void *data, const hc_result *res)
{
    rproc *rp = data;
    sc_run *r = rp->run;
    rp->ready_req = NULL;
    if (rp->ready || !sc_proc_running(rp->p) || r->ph > PH_RUNNING)
        return;
    if (!res->error && res->status > 0)
        sr_on_ready(r, rp->idx, NULL);
    else
        rp->ready_timer = ev_timer_start(r->loop, 20, on_ready_timer, rp);
}

static void on_ready_timer(ev_loop *loop, void *data)
{
    rproc *rp = data;
    sc_run *r = rp->run;
    rp->ready_timer = NULL;
    if (rp->ready || !sc_proc_running(rp->p) || r->ph > PH_RUNNING)
        return;
    rp->ready_req = http_get(r, rp->base_port, "/", 1000, 500, on_ready_reply, rp);
    if (!rp->ready_req)
        rp->ready_timer = ev_timer_start(r->loop, 20, on_ready_timer, rp);
}

void sr_poll_ready(sc_run *r, int idx)
{
    rproc *rp = &r->procs[idx];
    sr_stop_timer(r, &rp->ready_timer);
    if (!rp->ready_req)
        rp->ready_timer = ev_timer_start(r->loop, 20, on_ready_timer, rp);
}

/* ---- the final probes ---- */

static void probe_done(sc_run *r)
{
    if (--r->probes > 0)
        return;
    sr_events_drain_all(r);
    sr_close_world(r);
    sr_check_faults_fired(r);
    sr_check_events(r);
    sr_evaluate(r);
    sr_teardown(r);
}

static void on_probe_metrics(void *data, const hc_result *res)
{
    sc_run *r = data;
    r->probe_metrics = NULL;
    if (r->opts.profile && !r->opts.profile->metrics) {
        /* no /metrics: any HTTP answer on the slave port is an answer */
        if (!res->error && res->status > 0)
            r->agg_answered = true;
        else
            r->agg_probe_error = res->error ? xstrdup(res->error) : xasprintf("HTTP %ld", res->status);
    } else if (!res->error && res->status == 200) {
        r->agg_answered = true;
        r->final_metrics = xstrdup(res->body ? res->body : "");
        double v;
        if (!r->opts.agg_events && sc_prom_value(r->final_metrics, WORLD_METRIC, NULL, &v))
            sr_add_sample(r, sr_now(r), (int)v);
    } else {
        r->agg_probe_error = res->error ? xstrdup(res->error) : xasprintf("HTTP %ld", res->status);
    }
    probe_done(r);
}

static void on_probe_op(void *data, const hc_result *res)
{
    sc_run *r = data;
    r->probe_op = NULL;
    if (!res->error && res->status == 200)
        r->op_state = jsonx_parse(res->body, res->body_len, NULL, 0);
    if (!r->op_state)
        r->op_error = res->error ? xstrdup(res->error) : xasprintf("HTTP %ld: %.200s", res->status, res->body);
    probe_done(r);
}

static void on_probe_journal(void *data, const hc_result *res)
{
    sc_run *r = data;
    r->probe_journal = NULL;
    if (!res->error && res->status == 200)
        r->op_journal = jsonx_parse(res->body, res->body_len, NULL, 0);
    probe_done(r);
}

static hc_req *probe(sc_run *r, int port, const char *path, hc_cb cb)
{
    return http_get(r, port, path, PROBE_TIMEOUT_MS, PROBE_TIMEOUT_MS, cb, r);
}

static bool signalled_running(const sc_run *r)
{
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].runner_signal && !r->procs[i].teardown &&
            (sc_proc_running(r->procs[i].p) || sc_proc_exit_pending(r->procs[i].p)) && !r->procs[i].restart_pending)
            return true;
    return false;
}

static void on_settle_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->settle_timer = NULL;
    sr_begin_probes(r, "the processes signalled by actions have exited");
}

void sr_begin_probes(sc_run *r, const char *why)
{
    if (r->ph >= PH_PROBING || r->settle_timer)
        return;
    if (!r->aborted && !r->timed_out && signalled_running(r)) {
        if (!r->settle_start)
            r->settle_start = ev_now_ms();
        if (ev_now_ms() - r->settle_start < GRACE_MS) {
            r->settle_timer = ev_timer_start(r->loop, 20, on_settle_timer, r);
            return;
        }
    }
    sr_log(r, "the run ends: %s", why);
    r->res.run_ms = sr_now(r);
    sr_set_phase(r, PH_PROBING);
    sr_stop_all_timers(r);
    /* a process left stopped would not answer */
    r->probes = 1; /* released below */
    rproc *ag = &r->procs[SC_PROC_AGG];
    if (sc_proc_running(ag->p) && !sc_proc_stopped(ag->p) && !r->aborted) {
        bool own = !r->opts.profile || r->opts.profile->metrics;
        r->probe_metrics = own ? probe(r, r->agg_metrics_port, "/metrics", on_probe_metrics)
                               : probe(r, r->agg_slave_port, "/", on_probe_metrics);
        if (r->probe_metrics)
            r->probes++;
    }
    rproc *op = &r->procs[SC_PROC_OP];
    if (r->s->k8s && sc_proc_running(op->p) && !sc_proc_stopped(op->p) && !r->aborted) {
        r->probe_op = probe(r, r->op_ctl_port, "/control/state", on_probe_op);
        if (r->probe_op)
            r->probes++;
        r->probe_journal = probe(r, r->op_ctl_port, "/control/journal", on_probe_journal);
        if (r->probe_journal)
            r->probes++;
    }
    probe_done(r);
}
