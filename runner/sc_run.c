/* sc_run: one run of one scenario (see sc_run.h).
 *
 * Phases, changed only by set_phase() (which logs them):
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
#include "sc_run.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hc.h"
#include "jsonx.h"
#include "xalloc.h"

#define READY_CAP_MS 15000     /* a process that starts first must be ready by then */
#define GRACE_MS 1500          /* SIGTERM to SIGKILL at the end */
#define PROBE_TIMEOUT_MS 2000  /* the final /metrics and operator state */
#define K8S_NAMESPACE "dilearn"
#define WORLD_METRIC "dilearn_learners_connected"
#define NTASKN 6               /* 5 known task names + other */

typedef enum { PH_OPERATOR = 0, PH_LEARNERS, PH_RUNNING, PH_PROBING, PH_STOPPING, PH_DONE } phase;
static const char *const phase_names[] = {"starting operator", "starting learners", "running", "final checks",
                                          "stopping", "done"};

typedef struct {
    sc_run *run;
    int idx;            /* process index (SC_PROC_*) */
    sc_proc *p;
    char **argv;        /* NULL-terminated, owned */
    char **env;         /* NULL-terminated, owned (putenv strings) */
    bool wanted;        /* part of this scenario */
    bool ready;
    bool exited;        /* exited at least once */
    int status;         /* last exit status */
    double exit_t;
    bool runner_signal; /* the runner signalled it (kill, term, restart, teardown) */
    bool restart_pending;
    bool teardown;      /* exit during teardown */
    int base_port, ctl_port;
    ev_timer *start_timer; /* start_ms of a learner group */
} rproc;

typedef struct act_ref {
    sc_run *r;
    size_t i;
} act_ref;

typedef struct {
    int learner;
    char *task; /* full name or NULL (other) */
    double t;
} ltask_ev;

struct sc_run {
    ev_loop *loop;
    sc_procset *set;
    const sc_scenario *s;
    sc_run_opts opts;
    sc_run_done_cb done;
    void *ud;
    hc_client *hc;
    phase ph;
    uint64_t seed;
    uint64_t start_ms, t0_ms;
    bool t0_set;
    rproc *procs;
    size_t nprocs;
    int agg_slave_port, agg_master_port, agg_metrics_port, op_port, op_ctl_port, coord_port;
    char *run_dir;
    char *agg_name;  /* k8s pod name of the aggregator */
    FILE *rlog;      /* runner.log */
    ev_timer *timeout_timer, *sample_timer, *min_timer, *kill_timer, *done_timer, *coord_timer;
    ev_timer **act_timers;
    struct act_ref *refs; /* [action]: timer data */
    ev_timer **cont_timers; /* [action]: stop's automatic cont */
    bool *fired;
    /* events */
    int *lt_count;        /* [learner * NTASKN + name] tasks received */
    int *lt_any;          /* [learner] */
    int *bar_open;        /* [learner]: open bar index or -1 */
    ltask_ev *lts;        /* every learner task received, for expectations */
    size_t nlts, caplts;
    int sent[NTASKN + 1], done_n[NTASKN + 1]; /* coordinator; [NTASKN]: any */
    /* coordinator outcome */
    cJSON *summary;
    bool coord_done;
    double coord_end_ms;
    /* sampling */
    hc_req *sample_req;
    char *last_metrics;
    /* probes */
    int probes;
    hc_req *probe_metrics, *probe_op, *probe_journal;
    cJSON *op_journal;      /* the operator's journal (a list), or NULL */
    ev_timer *settle_timer; /* waiting for signalled processes to exit */
    uint64_t settle_start;
    char *final_metrics;
    bool agg_answered;
    char *agg_probe_error;
    cJSON *op_state;
    char *op_error;
    bool timed_out;
    bool aborted;
    sc_result res;
    size_t capchecks, capmarks, capbars, capsamples;
};

static void set_phase(sc_run *r, phase ph);
static void begin_probes(sc_run *r, const char *why);
static void maybe_done(sc_run *r);
static void fire_action(sc_run *r, size_t i);
static void check_events_exit_ready(sc_run *r, sc_when_kind kind, int proc);

/* ---- small helpers ---- */

static double now_t(const sc_run *r)
{
    if (!r->t0_set)
        return 0;
    return (double)(ev_now_ms() - r->t0_ms);
}

static void rlog(sc_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rlog(sc_run *r, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    double el = (double)(ev_now_ms() - r->start_ms);
    if (r->rlog) {
        fprintf(r->rlog, "%9.1f ms  t=%8.1f  %s\n", el, now_t(r), msg);
        fflush(r->rlog);
    }
    if (r->opts.verbose)
        fprintf(stderr, "[%s %8.1f] %s\n", r->s->name, now_t(r), msg);
}

static void add_check(sc_run *r, bool ok, int line, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static void add_check(sc_run *r, bool ok, int line, const char *what, const char *fmt, ...)
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
    c->line = line;
    c->what = xstrdup(what);
    c->detail = xstrdup(detail);
    rlog(r, "check %s: %s%s%s", ok ? "ok" : "FAILED", what, detail[0] ? ": " : "", detail);
}

static void add_mark(sc_run *r, int kind, int learner, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void add_mark(sc_run *r, int kind, int learner, const char *fmt, ...)
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
    m->t_ms = now_t(r);
    m->label = xstrdup(label);
    m->kind = kind;
    m->learner = learner;
}

static int task_index(const char *full)
{
    static const char *const names[] = {"resource", "learner_start_task", "learner_get_data_task",
                                        "learner_learn_task", "learner_close_task"};
    if (!full)
        return NTASKN - 1;
    for (int i = 0; i < 5; i++)
        if (strcmp(full, names[i]) == 0)
            return i;
    return NTASKN - 1;
}

static char **strv_new(void) { return xcalloc(1, sizeof(char *)); }
static void strv_push(char ***v, char *s) /* takes s */
{
    size_t n = 0;
    while ((*v)[n])
        n++;
    *v = xrealloc(*v, (n + 2) * sizeof **v);
    (*v)[n] = s;
    (*v)[n + 1] = NULL;
}
static size_t strv_len(char **v)
{
    size_t n = 0;
    while (v[n])
        n++;
    return n;
}
static void strv_free(char **v)
{
    if (!v)
        return;
    for (size_t i = 0; v[i]; i++)
        free(v[i]);
    free(v);
}

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* A free port: not handed out before by this runner, and bindable now. */
static bool port_free(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    /* as the servers bind: a port whose old connections linger in
     * TIME_WAIT is free for them */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    close(fd);
    return ok;
}

/* n consecutive free ports below the kernel's ephemeral range (so that no
 * outgoing connection takes one before its server binds it). -1 if none. */
static int alloc_ports(sc_run *r, int n)
{
    static const int lo = 10000, hi = 32700;
    uint64_t x = ((uint64_t)getpid() << 32) ^ ev_now_us();
    for (int attempt = 0; attempt < 2000; attempt++) {
        int span = hi - lo - n;
        if (span <= 0)
            return -1;
        int base = lo + (int)(splitmix(&x) % (uint64_t)span);
        bool ok = true;
        for (int i = 0; i < n && ok; i++)
            ok = !r->opts.ports_used[base + i] && port_free(base + i);
        if (!ok)
            continue;
        for (int i = 0; i < n; i++)
            r->opts.ports_used[base + i] = 1;
        return base;
    }
    return -1;
}

static void release_ports(sc_run *r, int base, int n)
{
    if (base <= 0)
        return;
    for (int i = 0; i < n; i++)
        r->opts.ports_used[base + i] = 0;
}

static char *learner_addr(const sc_run *r, int learner)
{
    int g = sc_scenario_group_of(r->s, learner);
    const rproc *rp = &r->procs[SC_PROC_GROUP0 + g];
    int port = rp->base_port + (learner - r->s->groups[g].first);
    if (r->s->k8s)
        return xasprintf("learner%d.localhost:%d", learner, port);
    return xasprintf("127.0.0.1:%d", port);
}


/* ---- results storage ---- */

static void add_sample(sc_run *r, double t, int v)
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

static int add_bar(sc_run *r, int learner, const char *task)
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
    b->t0_ms = now_t(r);
    b->t1_ms = -1;
    b->outcome = 0;
    return (int)res->nbars++;
}

static void close_bar(sc_run *r, int learner, int outcome)
{
    if (learner < 0 || learner >= r->s->nlearners)
        return;
    int b = r->bar_open[learner];
    if (b < 0)
        return;
    r->res.bars[b].t1_ms = now_t(r);
    r->res.bars[b].outcome = outcome;
    r->bar_open[learner] = -1;
}

/* ---- phases ---- */

static void set_phase(sc_run *r, phase ph)
{
    if (r->ph == ph)
        return;
    rlog(r, "phase: %s -> %s", phase_names[r->ph], phase_names[ph]);
    r->ph = ph;
}

const char *sc_run_phase(const sc_run *r) { return phase_names[r->ph]; }
double sc_run_elapsed_ms(const sc_run *r) { return (double)(ev_now_ms() - r->start_ms); }
const sc_result *sc_run_result(const sc_run *r) { return &r->res; }
const sc_scenario *sc_run_scenario(const sc_run *r) { return r->s; }

static void fail_run(sc_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_run(sc_run *r, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!r->res.error)
        r->res.error = xstrdup(msg);
    add_check(r, false, 0, "the run", "%s", msg);
    begin_probes(r, msg);
}

/* ---- process start ---- */

static void on_line(void *ud, sc_proc *p, int stream, const char *line, size_t len);
static void on_exit_cb(void *ud, sc_proc *p, int status);

static int spawn(sc_run *r, int idx)
{
    rproc *rp = &r->procs[idx];
    char err[512];
    rp->ready = false;
    rp->runner_signal = false;
    if (sc_proc_spawn(rp->p, rp->argv, rp->env, err, sizeof err) != 0) {
        fail_run(r, "cannot start %s: %s", sc_scenario_proc_name(r->s, idx), err);
        return -1;
    }
    rlog(r, "started %s (pid %d): %s ...", sc_scenario_proc_name(r->s, idx), (int)sc_proc_pid(rp->p), rp->argv[0]);
    if (r->t0_set)
        add_mark(r, 3, idx >= SC_PROC_GROUP0 && r->s->groups[idx - SC_PROC_GROUP0].count == 1
                           ? r->s->groups[idx - SC_PROC_GROUP0].first
                           : -1,
                 "%s started%s", sc_scenario_proc_name(r->s, idx), sc_proc_spawns(rp->p) > 1 ? " again" : "");
    return 0;
}

static void push_flag(char ***v, const char *flag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void push_flag(char ***v, const char *flag, const char *fmt, ...)
{
    strv_push(v, xstrdup(flag));
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    strv_push(v, xstrdup(buf));
}

/* Learners and the coordinator log at debug: their per-task lines are the
 * runner's events. */
static void log_flags(char ***v, const sc_run *r, const char *level)
{
    if (r->opts.json_logs)
        push_flag(v, "--log-format", "json");
    push_flag(v, "--log-level", "%s", level);
}

static char *dump_path(const sc_run *r, size_t g) { return xasprintf("%s/%s.dump.jsonl", r->run_dir, r->s->groups[g].name); }

/* Builds every command line (ports chosen here, so restarts reuse them). */
static int build_commands(sc_run *r)
{
    const sc_scenario *s = r->s;
    uint64_t sx = r->seed;
    int base = alloc_ports(r, 6);
    if (base < 0)
        return -1;
    r->agg_slave_port = base;
    r->agg_master_port = base + 1;
    r->agg_metrics_port = base + 2;
    r->op_port = base + 3;
    r->op_ctl_port = base + 4;
    r->coord_port = base + 5;
    for (size_t g = 0; g < s->ngroups; g++) {
        rproc *rp = &r->procs[SC_PROC_GROUP0 + g];
        rp->base_port = alloc_ports(r, s->groups[g].count);
        rp->ctl_port = alloc_ports(r, 1);
        if (rp->base_port < 0 || rp->ctl_port < 0)
            return -1;
    }
    r->agg_name = xasprintf("%s-aggregator", "dilearn");

    /* learner groups */
    for (size_t g = 0; g < s->ngroups; g++) {
        const sc_group *gr = &s->groups[g];
        rproc *rp = &r->procs[SC_PROC_GROUP0 + g];
        char **v = strv_new();
        strv_push(&v, xstrdup(r->opts.mock_learner));
        push_flag(&v, "--count", "%d", gr->count);
        push_flag(&v, "--host", "127.0.0.1");
        push_flag(&v, "--base-port", "%d", rp->base_port);
        push_flag(&v, "--control-port", "%d", rp->ctl_port);
        push_flag(&v, "--batch-size", "%d", gr->batch_size);
        push_flag(&v, "--learn-time-ms", "%ld", gr->learn_time_ms);
        push_flag(&v, "--heartbeat-span-ms", "%ld", gr->heartbeat_span_ms ? gr->heartbeat_span_ms : s->heartbeat_span_ms);
        /* ids must be unique over every process (the coordinator's dump
         * checks key on them): group 0 is learner0.., the others
         * <group>-learner0.. unless mock_learner takes --id-base */
        if (r->opts.learner_id_base) {
            push_flag(&v, "--id-prefix", "learner");
            push_flag(&v, "--id-base", "%d", gr->first);
        } else {
            push_flag(&v, "--id-prefix", "%s", g == 0 ? "learner" : gr->name);
            if (g != 0) {
                free(v[strv_len(v) - 1]);
                v[strv_len(v) - 1] = xasprintf("%s-learner", gr->name);
            }
        }
        char *dp = dump_path(r, g);
        push_flag(&v, "--dump", "%s", dp);
        free(dp);
        push_flag(&v, "--seed", "%llu", (unsigned long long)(splitmix(&sx) >> 1));
        for (size_t f = 0; f < gr->nfaults; f++)
            push_flag(&v, "--fault", "%s", gr->faults[f]);
        log_flags(&v, r, "debug");
        for (size_t a = 0; a < gr->nargs; a++)
            strv_push(&v, xstrdup(gr->args[a]));
        rp->argv = v;
        rp->env = strv_new();
        rp->wanted = !gr->absent;
    }

    /* operator */
    if (s->k8s) {
        rproc *rp = &r->procs[SC_PROC_OP];
        char **v = strv_new();
        strv_push(&v, xstrdup(r->opts.mock_operator));
        push_flag(&v, "--host", "127.0.0.1");
        push_flag(&v, "--port", "%d", r->op_port);
        push_flag(&v, "--control-port", "%d", r->op_ctl_port);
        /* a failed pod is taken off the list (the default, recreate, would
         * invent addresses that resolve nowhere) */
        push_flag(&v, "--on-failed", "remove");
        xbuf l = {0};
        xbuf_printf(&l, "%s/%s=", K8S_NAMESPACE, r->agg_name);
        int n = 0;
        for (int i = 0; i < s->nlearners; i++) {
            if (!s->groups[sc_scenario_group_of(s, i)].configured)
                continue;
            char *a = learner_addr(r, i);
            xbuf_printf(&l, "%s%s", n++ ? "," : "", a);
            free(a);
        }
        char *ls = xbuf_take(&l);
        strv_push(&v, xstrdup("--learners"));
        strv_push(&v, ls);
        push_flag(&v, "--seed", "%llu", (unsigned long long)(splitmix(&sx) >> 1));
        log_flags(&v, r, "info");
        for (size_t a = 0; a < s->nop_args; a++)
            strv_push(&v, xstrdup(s->op_args[a]));
        rp->argv = v;
        rp->env = strv_new();
        rp->wanted = true;
    }

    /* aggregator */
    {
        rproc *rp = &r->procs[SC_PROC_AGG];
        char **v = strv_new();
        strv_push(&v, xstrdup(r->opts.aggregator));
        push_flag(&v, "--slave-host", "127.0.0.1");
        push_flag(&v, "--slave-port", "%d", r->agg_slave_port);
        push_flag(&v, "--master-host", "127.0.0.1");
        push_flag(&v, "--master-port", "%d", r->agg_master_port);
        push_flag(&v, "--metrics-port", "%d", r->agg_metrics_port);
        push_flag(&v, "--time-scale", "%g", s->time_scale);
        push_flag(&v, "--heartbeat-span-ms", "%ld", s->heartbeat_span_ms);
        push_flag(&v, "--heartbeat-tolerance-ms", "%ld", s->heartbeat_tolerance_ms);
        push_flag(&v, "--max-retry-ms", "%ld", s->max_retry_ms);
        push_flag(&v, "--retry-interval-ms", "%ld", s->retry_interval_ms);
        push_flag(&v, "--sync-period-ms", "%ld", s->sync_period_ms);
        push_flag(&v, "--task-deadline-ms", "%ld", s->task_deadline_ms);
        if (!s->k8s)
            for (int i = 0; i < s->nlearners; i++) {
                if (!s->groups[sc_scenario_group_of(s, i)].configured)
                    continue;
                char *a = learner_addr(r, i);
                push_flag(&v, "--learner", "learner%d=%s", i, a);
                free(a);
            }
        log_flags(&v, r, "info");
        for (size_t a = 0; a < s->nagg_args; a++)
            strv_push(&v, xstrdup(s->agg_args[a]));
        rp->argv = v;
        char **e = strv_new();
        for (size_t i = 0; i < s->nagg_env; i++)
            strv_push(&e, xstrdup(s->agg_env[i]));
        if (s->k8s) {
            strv_push(&e, xasprintf("KUBERNETES_SERVER_URL=http://127.0.0.1:%d", r->op_port));
            strv_push(&e, xasprintf("KUBERNETES_POD_NAMESPACE=%s", K8S_NAMESPACE));
            strv_push(&e, xasprintf("KUBERNETES_POD_NAME=%s", r->agg_name));
        }
        rp->env = e;
        rp->wanted = true;
    }

    /* coordinator */
    if (s->coordinator) {
        rproc *rp = &r->procs[SC_PROC_COORD];
        char **v = strv_new();
        strv_push(&v, xstrdup(r->opts.mock_coordinator));
        push_flag(&v, "--connect", "127.0.0.1:%d", r->agg_slave_port);
        push_flag(&v, "--host", "127.0.0.1");
        push_flag(&v, "--port", "%d", r->coord_port);
        push_flag(&v, "--time-scale", "%g", s->time_scale);
        push_flag(&v, "--seed", "%llu", (unsigned long long)(splitmix(&sx) >> 1));
        if (s->rounds >= 0)
            push_flag(&v, "--rounds", "%d", s->rounds);
        if (s->script) {
            char *sp = xasprintf("%s/coordinator-script.json", r->run_dir);
            FILE *f = fopen(sp, "w");
            if (!f) {
                free(sp);
                strv_free(v);
                return -1;
            }
            fprintf(f, "%s\n", s->script);
            fclose(f);
            push_flag(&v, "--script", "%s", sp);
            free(sp);
        }
        if (s->expect_learners >= 0)
            push_flag(&v, "--expect-learners", "%d", s->expect_learners);
        /* the coordinator waits longer than the aggregator's own deadline,
         * so that the aggregator's verdict reaches it */
        push_flag(&v, "--task-deadline-ms", "%ld",
                  s->coord_deadline_ms > 0 ? s->coord_deadline_ms : 2 * s->task_deadline_ms + 1000);
        for (size_t g = 0; g < s->ngroups; g++) {
            char *dp = dump_path(r, g);
            push_flag(&v, "--dump", "%s", dp);
            free(dp);
        }
        log_flags(&v, r, "debug");
        for (size_t a = 0; a < s->ncoord_args; a++)
            strv_push(&v, xstrdup(s->coord_args[a]));
        rp->argv = v;
        rp->env = strv_new();
        rp->wanted = true;
    }
    /* every dump file exists from the start (a group that never runs has an
     * empty one) */
    for (size_t g = 0; g < s->ngroups; g++) {
        char *dp = dump_path(r, g);
        int fd = open(dp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
        free(dp);
    }
    return 0;
}

/* Writes the command lines to the run folder (commands.txt). */
static void write_commands(sc_run *r)
{
    char *path = xasprintf("%s/commands.txt", r->run_dir);
    FILE *f = fopen(path, "w");
    free(path);
    if (!f)
        return;
    for (size_t i = 0; i < r->nprocs; i++) {
        rproc *rp = &r->procs[i];
        if (!rp->argv)
            continue;
        fprintf(f, "# %s\n", sc_scenario_proc_name(r->s, (int)i));
        for (size_t k = 0; rp->env && rp->env[k]; k++)
            fprintf(f, "%s ", rp->env[k]);
        for (size_t k = 0; rp->argv[k]; k++) {
            const char *a = rp->argv[k];
            if (strpbrk(a, " \"'{}[]$*?;&|<>"))
                fprintf(f, "'%s' ", a);
            else
                fprintf(f, "%s ", a);
        }
        fprintf(f, "\n\n");
    }
    fclose(f);
}

/* ---- log lines and events ---- */

/* The global index of the learner a log line is about: "learner7" (or an
 * address "learner7.localhost:port" in k8s mode); local ids of a group
 * without --id-base are shifted by the group's first index. -1: none. */
static int who_learner(const sc_run *r, const char *who, int group)
{
    if (!who)
        return -1;
    if (group > 0 && !r->opts.learner_id_base) {
        /* "<group>-learnerK" */
        size_t gl = strlen(r->s->groups[group].name);
        if (strncmp(who, r->s->groups[group].name, gl) == 0 && who[gl] == '-')
            who += gl + 1;
    }
    if (strncmp(who, "learner", 7) != 0 || who[7] < '0' || who[7] > '9')
        return -1;
    long n = strtol(who + 7, NULL, 10);
    if (group >= 0 && !r->opts.learner_id_base)
        n += r->s->groups[group].first;
    if (n < 0 || n >= r->s->nlearners)
        return -1;
    return (int)n;
}

static bool starts(const char *s, const char *prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

static bool when_task_matches(const sc_when *w, const char *full)
{
    return !w->task || (full && strcmp(w->task, full) == 0);
}

static void act_or_delay(sc_run *r, size_t i);

static void on_learner_task(sc_run *r, int learner, const char *name)
{
    const char *full = sc_task_full_name(name);
    int ti = task_index(full);
    r->lt_count[learner * NTASKN + ti]++;
    r->lt_any[learner]++;
    if (r->nlts == r->caplts) {
        r->caplts = r->caplts ? r->caplts * 2 : 256;
        r->lts = xrealloc(r->lts, r->caplts * sizeof *r->lts);
    }
    r->lts[r->nlts].learner = learner;
    r->lts[r->nlts].task = full ? xstrdup(full) : NULL;
    r->lts[r->nlts].t = now_t(r);
    r->nlts++;
    close_bar(r, learner, 3);
    r->bar_open[learner] = add_bar(r, learner, full ? full : name);
    /* counts over every learner, for "any learner" events */
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_when *w = &r->s->actions[i].when;
        if (r->fired[i] || w->kind != SC_WHEN_LEARNER_TASK || !when_task_matches(w, full))
            continue;
        if (w->learner >= 0 && w->learner != learner)
            continue;
        int count = 0;
        if (w->learner >= 0) {
            count = w->task ? r->lt_count[learner * NTASKN + ti] : r->lt_any[learner];
        } else {
            for (int l = 0; l < r->s->nlearners; l++)
                count += w->task ? r->lt_count[l * NTASKN + ti] : r->lt_any[l];
        }
        if (count == w->nth) {
            add_mark(r, 2, learner, "learner%d received %s #%d", learner, full ? full : name, w->nth);
            act_or_delay(r, i);
        }
    }
}

static void on_coord_task(sc_run *r, bool done, const char *name, const char *status)
{
    const char *full = sc_task_full_name(name);
    int ti = task_index(full);
    int *arr = done ? r->done_n : r->sent;
    arr[ti]++;
    arr[NTASKN]++;
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_when *w = &r->s->actions[i].when;
        if (r->fired[i] || w->kind != (done ? SC_WHEN_TASK_DONE : SC_WHEN_TASK_SENT) || !when_task_matches(w, full))
            continue;
        int count = w->task ? arr[ti] : arr[NTASKN];
        if (count == w->nth) {
            add_mark(r, 2, -1, "coordinator %s %s #%d%s%s", done ? "got the outcome of" : "sent", full ? full : name,
                     w->nth, status ? ": " : "", status ? status : "");
            act_or_delay(r, i);
        }
    }
}

/* mock_learner (at --log-level debug) logs each task it receives as
 * "task <id> (<name>)" or "task <id> (<name>, #n of its name, ...): faults
 * fired: ...", each report as "task <id> (<name>): <kind> report sent" and a
 * task it gives up as "task <id> (<name>) abandoned: why". */
static void on_learner_log(sc_run *r, int group, const char *who, const char *msg)
{
    int l = who_learner(r, who, group);
    if (l < 0 || !starts(msg, "task "))
        return;
    const char *open = strchr(msg, '(');
    if (!open)
        return;
    char name[128];
    size_t n = strcspn(open + 1, ",)");
    if (n == 0 || n >= sizeof name)
        return;
    memcpy(name, open + 1, n);
    name[n] = '\0';
    const char *close = open + 1 + n;
    if (*close == ',' || strcmp(close, ")") == 0) {
        on_learner_task(r, l, name);
    } else if (strstr(close, "report sent")) {
        close_bar(r, l, strstr(close, ": complete report") ? 1 : 2);
    } else if (strstr(close, "could not be sent") || strstr(close, ") abandoned")) {
        close_bar(r, l, 3);
    }
}

/* mock_coordinator (at debug) logs "tasks[i] NAME: sending N bytes, ..." and
 * at the outcome "tasks[i] NAME (round r): STATUS in X ms" or "...: STATUS
 * (expectation failed)". */
static void on_coord_log(sc_run *r, const char *msg)
{
    if (!starts(msg, "tasks["))
        return;
    const char *p = strchr(msg, ']');
    if (!p || p[1] != ' ')
        return;
    p += 2;
    char name[128], status[64];
    size_t n = strcspn(p, " :");
    if (n == 0 || n >= sizeof name)
        return;
    memcpy(name, p, n);
    name[n] = '\0';
    const char *rest = p + n;
    if (starts(rest, ": sending ")) {
        on_coord_task(r, false, name, NULL);
        return;
    }
    if (starts(rest, " (round ")) {
        rest = strchr(rest, ')');
        if (!rest)
            return;
        rest++;
    }
    if (!starts(rest, ": "))
        return;
    rest += 2;
    size_t m = strcspn(rest, " ");
    if (m == 0 || m >= sizeof status)
        return;
    memcpy(status, rest, m);
    status[m] = '\0';
    if (strcmp(status, "completed") != 0 && strcmp(status, "failed") != 0 && strcmp(status, "start_failed") != 0 &&
        strcmp(status, "skipped") != 0)
        return;
    on_coord_task(r, true, name, status);
}

static void on_agg_log(sc_run *r, const char *who, const char *msg)
{
    int l = who_learner(r, who, -1);
    if (l >= 0 && starts(msg, "learner joined"))
        add_mark(r, 3, l, "learner%d joined", l);
    else if (l >= 0 && (starts(msg, "learner left") || starts(msg, "learner removed")))
        add_mark(r, 3, l, "learner%d left: %.120s", l, msg);
    else if (l >= 0 && starts(msg, "learner did not join"))
        add_mark(r, 3, l, "learner%d never joined", l);
    else if (starts(msg, "PLANTED BUG"))
        add_mark(r, 3, -1, "%.160s", msg);
}

static void check_log_events(sc_run *r, int proc, const char *line)
{
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_action *a = &r->s->actions[i];
        if (r->fired[i] || a->when.kind != SC_WHEN_LOG)
            continue;
        if (strcmp(a->when.process, sc_scenario_proc_name(r->s, proc)) != 0)
            continue;
        if (!strstr(line, a->when.contains))
            continue;
        add_mark(r, 2, -1, "%s logged \"%.80s\"", a->when.process, a->when.contains);
        act_or_delay(r, i);
    }
}

static void on_ready(sc_run *r, int idx, cJSON *j);

static void on_line(void *ud, sc_proc *p, int stream, const char *line, size_t len)
{
    rproc *rp = ud;
    sc_run *r = rp->run;
    if (r->ph >= PH_STOPPING)
        return;
    if (stream == 1) {
        if (starts(line, "{\"ready\"")) {
            cJSON *j = jsonx_parse(line, len, NULL, 0);
            if (j && !rp->ready)
                on_ready(r, rp->idx, j);
            cJSON_Delete(j);
        } else if (rp->idx == SC_PROC_COORD && starts(line, "{\"ok\"")) {
            cJSON *j = jsonx_parse(line, len, NULL, 0);
            if (j) {
                cJSON_Delete(r->summary);
                r->summary = j;
                free(r->res.coordinator_summary);
                r->res.coordinator_summary = xstrndup(line, len);
            }
        }
        return;
    }
    check_log_events(r, rp->idx, line);
    if (line[0] != '{')
        return;
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (!j)
        return;
    const char *msg = jsonx_get_str(j, "msg");
    const char *who = jsonx_get_str(j, "learner");
    if (msg) {
        if (rp->idx >= SC_PROC_GROUP0)
            on_learner_log(r, rp->idx - SC_PROC_GROUP0, who, msg);
        else if (rp->idx == SC_PROC_COORD)
            on_coord_log(r, msg);
        else if (rp->idx == SC_PROC_AGG)
            on_agg_log(r, who, msg);
    }
    cJSON_Delete(j);
}

/* ---- actions ---- */

static void on_act_timer(ev_loop *loop, void *data);

static void act_or_delay(sc_run *r, size_t i)
{
    r->fired[i] = true;
    long d = r->s->actions[i].when.kind == SC_WHEN_AT ? 0 : r->s->actions[i].when.delay_ms;
    if (d > 0)
        r->act_timers[i] = ev_timer_start(r->loop, (uint64_t)d, on_act_timer, &r->refs[i]);
    else
        fire_action(r, i);
}

static void on_act_timer(ev_loop *loop, void *data)
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
        rlog(r, "action %zu: cont %s after %ld ms", ref->i, a->target, a->duration_ms);
        add_mark(r, 0, a->learner >= 0 ? a->learner : -1, "cont %s", a->target);
    }
}

/* A control request whose answer is only logged. */
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
        add_check(r, false, c->line, c->what, "the control request failed: %s (HTTP %ld) %.300s",
                  res->error ? res->error : "error status", res->status, res->body ? res->body : "");
    } else {
        rlog(r, "%s: HTTP %ld %.200s", c->what, res->status, res->body);
    }
    free(c->what);
    free(c);
}

static void control(sc_run *r, const char *method, int port, const char *path, const char *body, const char *what,
                    int line)
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
        add_check(r, false, line, what, "could not send the control request to %s", url);
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
        char *ad = learner_addr(r, a->learners[i]);
        cJSON_AddItemToArray(l, cJSON_CreateString(ad));
        free(ad);
    }
    for (size_t i = 0; i < a->naddrs; i++)
        cJSON_AddItemToArray(l, cJSON_CreateString(a->addrs[i]));
    char *body = jsonx_print(b);
    cJSON_Delete(b);
    control(r, "PUT", r->op_ctl_port, "/control/learners", body, what, a->line);
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
    rlog(r, "%s", what);
    int row = a->learner >= 0 ? a->learner
              : (a->proc >= SC_PROC_GROUP0 && r->s->groups[a->proc - SC_PROC_GROUP0].count == 1)
                  ? r->s->groups[a->proc - SC_PROC_GROUP0].first
                  : -1;
    add_mark(r, 0, row, "%s%s%s", sc_do_name(a->what), a->target ? " " : "", a->target ? a->target : "");
    bool running = rp && sc_proc_running(rp->p);
    switch (a->what) {
    case SC_DO_KILL:
    case SC_DO_TERM:
        if (!running) {
            add_check(r, false, a->line, what, "%s is not running at %.0f ms", a->target, now_t(r));
            break;
        }
        rp->runner_signal = true;
        sc_proc_kill(rp->p, a->what == SC_DO_KILL ? SIGKILL : SIGTERM);
        break;
    case SC_DO_STOP:
        if (!running) {
            add_check(r, false, a->line, what, "%s is not running at %.0f ms", a->target, now_t(r));
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
            spawn(r, a->proc);
        }
        break;
    case SC_DO_START:
        if (running) {
            add_check(r, false, a->line, what, "%s is already running", a->target);
            break;
        }
        if (!rp)
            break;
        rp->wanted = true;
        spawn(r, a->proc);
        break;
    case SC_DO_FAULT:
        if (!running || !rp->ready) {
            add_check(r, false, a->line, what, "%s is not running (or not ready) at %.0f ms: no control port",
                      a->target, now_t(r));
            break;
        }
        control(r, "POST", rp->ctl_port, "/fault", a->fault, what, a->line);
        break;
    case SC_DO_CLEAR_FAULTS:
        if (!running || !rp->ready) {
            add_check(r, false, a->line, what, "%s is not running at %.0f ms", a->target, now_t(r));
            break;
        }
        control(r, "DELETE", rp->ctl_port, "/fault", NULL, what, a->line);
        break;
    case SC_DO_OPERATOR_SET:
        operator_set(r, a, what);
        break;
    case SC_DO_OPERATOR_FAULT:
        control(r, "POST", r->op_ctl_port, "/control/fault", a->fault, what, a->line);
        break;
    case SC_DO_OPERATOR_CLEAR:
        control(r, "DELETE", r->op_ctl_port, "/control/fault", NULL, what, a->line);
        break;
    case SC_DO_COUNT:
        break;
    }
}

/* ---- sampling the world size ---- */

bool sc_prom_value(const char *text, const char *name, const cJSON *labels, double *out)
{
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (*p == '#' || strncmp(p, name, nl) != 0 || (p[nl] != ' ' && p[nl] != '{'))
            continue;
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        char *line = xstrndup(p, ll);
        bool ok = true;
        if (labels) {
            const char *lb = line[nl] == '{' ? line + nl : "";
            const char *le = strchr(lb, '}');
            for (const cJSON *it = labels->child; it && ok; it = it->next) {
                char *want = xasprintf("%s=\"%s\"", it->string, cJSON_IsString(it) ? it->valuestring : "");
                const char *f = strstr(lb, want);
                ok = f && (!le || f < le) && (f[-1] == '{' || f[-1] == ',');
                free(want);
            }
        }
        if (ok) {
            const char *v = line[nl] == '{' ? strchr(line, '}') : line + nl;
            char *end;
            double d = v ? strtod(v + 1, &end) : 0;
            if (v && end != v + 1) {
                *out = d;
                free(line);
                return true;
            }
        }
        free(line);
    }
    return false;
}

static void on_sample_timer(ev_loop *loop, void *data);

static void on_sample_reply(void *data, const hc_result *res)
{
    sc_run *r = data;
    r->sample_req = NULL;
    if (!res->error && res->status == 200 && res->body) {
        double v;
        if (sc_prom_value(res->body, WORLD_METRIC, NULL, &v)) {
            int iv = (int)v;
            /* keep the series small: a sample only when the value changes,
             * plus one every 250 ms */
            size_t n = r->res.nsamples;
            double t = now_t(r);
            if (n < 2 || r->res.samples[n - 1].value != iv || r->res.samples[n - 2].value != iv ||
                t - r->res.samples[n - 2].t_ms > 250)
                add_sample(r, t, iv);
            else
                r->res.samples[n - 1].t_ms = t;
        }
        free(r->last_metrics);
        r->last_metrics = xstrdup(res->body);
    }
    if (r->ph == PH_RUNNING && !r->sample_timer)
        r->sample_timer = ev_timer_start(r->loop, (uint64_t)r->s->sample_ms, on_sample_timer, r);
}

static void on_sample_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->sample_timer = NULL;
    if (r->ph != PH_RUNNING)
        return;
    rproc *ag = &r->procs[SC_PROC_AGG];
    if (!sc_proc_running(ag->p) || sc_proc_stopped(ag->p) || !ag->ready) {
        r->sample_timer = ev_timer_start(r->loop, (uint64_t)r->s->sample_ms, on_sample_timer, r);
        return;
    }
    hc_opts o;
    hc_opts_init(&o);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", r->agg_metrics_port);
    o.method = "GET";
    o.url = url;
    o.timeout_ms = 1000;
    o.connect_timeout_ms = 500;
    o.retries = 0;
    r->sample_req = hc_send(r->hc, &o, on_sample_reply, r);
    if (!r->sample_req)
        r->sample_timer = ev_timer_start(r->loop, (uint64_t)r->s->sample_ms, on_sample_timer, r);
}

/* ---- start-up ---- */

static void start_aggregator(sc_run *r);
static void on_coord_timer(ev_loop *loop, void *data);
static void on_group_timer(ev_loop *loop, void *data);

static void start_learners(sc_run *r)
{
    set_phase(r, PH_LEARNERS);
    bool waiting = false;
    for (size_t g = 0; g < r->s->ngroups; g++) {
        const sc_group *gr = &r->s->groups[g];
        if (gr->absent || gr->start_ms >= 0)
            continue;
        if (spawn(r, SC_PROC_GROUP0 + (int)g) != 0)
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
        if (!gr->absent && gr->start_ms < 0 && !r->procs[SC_PROC_GROUP0 + g].ready)
            return false;
    }
    return true;
}

static void on_min_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->min_timer = NULL;
    if (r->ph == PH_RUNNING && (r->coord_done || !r->s->coordinator))
        begin_probes(r, r->s->coordinator ? "the coordinator is done" : "min_run_ms is over");
}

static void start_aggregator(sc_run *r)
{
    set_phase(r, PH_RUNNING);
    r->t0_ms = ev_now_ms();
    r->t0_set = true;
    if (spawn(r, SC_PROC_AGG) != 0)
        return;
    for (size_t i = 0; i < r->s->nactions; i++)
        if (r->s->actions[i].when.kind == SC_WHEN_AT) {
            r->fired[i] = true;
            r->act_timers[i] = ev_timer_start(r->loop, (uint64_t)r->s->actions[i].when.at_ms, on_act_timer, &r->refs[i]);
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
    rlog(r, "group %s starts (start_ms)", sc_scenario_proc_name(r->s, rp->idx));
    spawn(r, rp->idx);
}

static void on_coord_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->coord_timer = NULL;
    if (r->ph == PH_RUNNING)
        spawn(r, SC_PROC_COORD);
}

static void on_ready(sc_run *r, int idx, cJSON *j)
{
    rproc *rp = &r->procs[idx];
    rp->ready = true;
    rlog(r, "%s is ready", sc_scenario_proc_name(r->s, idx));
    if (idx >= SC_PROC_GROUP0) {
        /* check that the learners listen where the runner configured them */
        const cJSON *ls = jsonx_get(j, "learners");
        const cJSON *first = ls ? cJSON_GetArrayItem(ls, 0) : NULL;
        int64_t port;
        if (first && jsonx_get_i64(jsonx_get(first, "port"), &port) && port != rp->base_port)
            add_check(r, false, 0, "learner ports",
                      "group %s listens from port %lld, not %d as asked with --base-port",
                      sc_scenario_proc_name(r->s, idx), (long long)port, rp->base_port);
    }
    check_events_exit_ready(r, SC_WHEN_READY, idx);
    switch (r->ph) {
    case PH_OPERATOR:
        if (idx == SC_PROC_OP) {
            for (size_t f = 0; f < r->s->nop_faults; f++)
                control(r, "POST", r->op_ctl_port, "/control/fault", r->s->op_faults[f], "operator.faults", 0);
            start_learners(r);
        }
        break;
    case PH_LEARNERS:
        if (learners_ready(r))
            start_aggregator(r);
        break;
    case PH_RUNNING:
        if (idx == SC_PROC_AGG && sc_proc_spawns(rp->p) == 1) {
            add_mark(r, 3, -1, "aggregator ready");
            if (r->s->coordinator)
                r->coord_timer = ev_timer_start(r->loop, (uint64_t)r->s->coord_start_ms, on_coord_timer, r);
            if (!r->sample_timer && !r->sample_req)
                r->sample_timer = ev_timer_start(r->loop, 0, on_sample_timer, r);
        }
        break;
    default:
        break;
    }
}

static void check_events_exit_ready(sc_run *r, sc_when_kind kind, int proc)
{
    if (r->ph != PH_RUNNING && kind == SC_WHEN_EXIT)
        return;
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_action *a = &r->s->actions[i];
        if (r->fired[i] || a->when.kind != kind || strcmp(a->when.process, sc_scenario_proc_name(r->s, proc)) != 0)
            continue;
        act_or_delay(r, i);
    }
}

static bool exit_expected(const sc_run *r, int idx)
{
    for (size_t i = 0; i < r->s->expect.nexits; i++)
        if (strcmp(r->s->expect.exits[i].process, sc_scenario_proc_name(r->s, idx)) == 0)
            return true;
    return false;
}

static void on_exit_cb(void *ud, sc_proc *p, int status)
{
    rproc *rp = ud;
    sc_run *r = rp->run;
    int idx = rp->idx;
    const char *name = sc_scenario_proc_name(r->s, idx);
    char how[128];
    sc_describe_status(status, how, sizeof how);
    rlog(r, "%s %s", name, how);
    if (r->ph >= PH_STOPPING) {
        /* the aggregator must leave cleanly on SIGTERM */
        if (idx == SC_PROC_AGG && rp->teardown && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
            add_check(r, false, 0, "aggregator exits with 0 on SIGTERM at the end", "it %s%s", how,
                      WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL ? " (no exit within the grace period)" : "");
        maybe_done(r);
        return;
    }
    bool first_exit = !rp->exited;
    rp->exited = true;
    rp->status = status;
    rp->exit_t = now_t(r);
    int row = idx >= SC_PROC_GROUP0 && r->s->groups[idx - SC_PROC_GROUP0].count == 1
                  ? r->s->groups[idx - SC_PROC_GROUP0].first
                  : -1;
    if (r->t0_set && idx != SC_PROC_COORD)
        add_mark(r, 1, row, "%s %s", name, how);
    if (idx >= SC_PROC_GROUP0) {
        const sc_group *gr = &r->s->groups[idx - SC_PROC_GROUP0];
        for (int l = gr->first; l < gr->first + gr->count; l++)
            close_bar(r, l, 3);
    }
    if (!rp->ready && r->ph < PH_RUNNING) {
        fail_run(r, "%s %s before its ready line; its last log lines:\n%s", name, how, sc_proc_tail(rp->p));
        return;
    }
    if (idx == SC_PROC_AGG && !rp->ready && !rp->runner_signal) {
        fail_run(r, "the aggregator %s before its ready line; its last log lines:\n%s", how, sc_proc_tail(rp->p));
        return;
    }
    /* exits nobody asked for */
    bool crash_sig = WIFSIGNALED(status) && WTERMSIG(status) != SIGKILL && WTERMSIG(status) != SIGTERM;
    if (!rp->runner_signal && !exit_expected(r, idx) && (idx == SC_PROC_AGG || idx == SC_PROC_OP || crash_sig)) {
        if (first_exit || crash_sig)
            add_check(r, false, 0, "no process ends unexpectedly",
                      "%s %s at %.0f ms without an action asking for it; its last log lines:\n%s", name, how,
                      now_t(r), sc_proc_tail(rp->p));
    }
    check_events_exit_ready(r, SC_WHEN_EXIT, idx);
    if (rp->restart_pending && r->ph == PH_RUNNING) {
        rp->restart_pending = false;
        spawn(r, idx);
        return;
    }
    if (idx == SC_PROC_COORD) {
        r->coord_done = true;
        r->coord_end_ms = now_t(r);
        r->res.run_ms = r->coord_end_ms;
        add_mark(r, 2, -1, "coordinator done (%s)", how);
        if (!r->summary && !rp->runner_signal)
            add_check(r, false, 0, "the coordinator prints its summary",
                      "it %s without a summary line on stdout; its last log lines:\n%s", how, sc_proc_tail(rp->p));
        if (!r->min_timer)
            begin_probes(r, "the coordinator is done");
    }
}

/* ---- expectations ---- */

/* The value at a dotted key path ("info.loss", "a.0" for a list item). */
static const cJSON *at_path(const cJSON *v, const char *path)
{
    char *copy = xstrdup(path);
    char *save = NULL;
    for (char *k = strtok_r(copy, ".", &save); k && v; k = strtok_r(NULL, ".", &save)) {
        if (cJSON_IsArray(v)) {
            char *end;
            long i = strtol(k, &end, 10);
            v = (*end || i < 0) ? NULL : cJSON_GetArrayItem(v, (int)i);
        } else if (cJSON_IsObject(v)) {
            v = jsonx_get(v, k);
        } else {
            v = NULL;
        }
    }
    free(copy);
    return v;
}

static bool json_equal(const cJSON *a, const cJSON *b)
{
    if (jsonx_is_number(a) && jsonx_is_number(b)) {
        double x, y;
        return jsonx_get_double(a, &x) && jsonx_get_double(b, &y) && x == y;
    }
    if (cJSON_IsString(a) && cJSON_IsString(b))
        return strcmp(a->valuestring, b->valuestring) == 0;
    if (cJSON_IsBool(a) && cJSON_IsBool(b))
        return cJSON_IsTrue(a) == cJSON_IsTrue(b);
    if (cJSON_IsNull(a) && cJSON_IsNull(b))
        return true;
    if (cJSON_IsArray(a) && cJSON_IsArray(b)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
            return false;
        for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next)
            if (!json_equal(x, y))
                return false;
        return true;
    }
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
            return false;
        for (const cJSON *x = a->child; x; x = x->next) {
            const cJSON *y = jsonx_get(b, x->string);
            if (!y || !json_equal(x, y))
                return false;
        }
        return true;
    }
    return false;
}

static char *short_json(const cJSON *v)
{
    if (!v)
        return xstrdup("nothing");
    char *t = jsonx_print(v);
    if (strlen(t) > 300) {
        t[297] = t[298] = t[299] = '.';
        t[300] = '\0';
    }
    return t;
}

/* The task of the summary an expectation means, with its label. */
static const cJSON *find_task(const sc_run *r, const sc_expect_task *x, char *label, size_t len, int *index)
{
    const cJSON *tasks = r->summary ? jsonx_get(r->summary, "tasks") : NULL;
    *index = -1;
    if (x->index >= 0) {
        snprintf(label, len, "task #%d", x->index);
        *index = x->index;
        return tasks ? cJSON_GetArrayItem(tasks, x->index) : NULL;
    }
    snprintf(label, len, "%s #%d", x->name, x->nth);
    int n = 0, i = 0;
    for (const cJSON *t = tasks ? tasks->child : NULL; t; t = t->next, i++) {
        const char *nm = jsonx_get_str(t, "name");
        if (nm && strcmp(nm, x->name) == 0 && ++n == x->nth) {
            *index = i;
            return t;
        }
    }
    return NULL;
}

static void check_tasks(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    const cJSON *tasks = r->summary ? jsonx_get(r->summary, "tasks") : NULL;
    const char *nosum = "no summary from the coordinator (it did not finish)";
    if (e->coordinator_ok >= 0) {
        const cJSON *ok = r->summary ? jsonx_get(r->summary, "ok") : NULL;
        char *fails = short_json(r->summary ? jsonx_get(r->summary, "failures") : NULL);
        if (!ok)
            add_check(r, false, e->line, "coordinator_ok", "%s", nosum);
        else
            add_check(r, cJSON_IsTrue(ok) == (e->coordinator_ok == 1), e->line,
                      e->coordinator_ok ? "the coordinator reports ok" : "the coordinator reports not ok",
                      "ok is %s; its failures: %s", cJSON_IsTrue(ok) ? "true" : "false", fails);
        free(fails);
    }
    if (e->task_count >= 0) {
        int n = tasks ? cJSON_GetArraySize(tasks) : -1;
        char what[64];
        snprintf(what, sizeof what, "%d tasks run", e->task_count);
        if (!tasks)
            add_check(r, false, e->line, what, "%s", nosum);
        else
            add_check(r, n == e->task_count, e->line, what, "the coordinator ran %d", n);
    }
    if (e->all_status) {
        char what[64];
        snprintf(what, sizeof what, "every task %s", e->all_status);
        if (!tasks) {
            add_check(r, false, e->line, what, "%s", nosum);
        } else {
            xbuf bad = {0};
            int i = 0, nbad = 0;
            for (const cJSON *t = tasks->child; t; t = t->next, i++) {
                const char *st = jsonx_get_str(t, "status");
                if (!st || strcmp(st, e->all_status) != 0) {
                    if (nbad++ < 5)
                        xbuf_printf(&bad, "%stask #%d %s is %s (%.200s)", nbad > 1 ? "; " : "", i,
                                    jsonx_get_str(t, "name") ? jsonx_get_str(t, "name") : "?", st ? st : "?",
                                    jsonx_get_str(t, "message") ? jsonx_get_str(t, "message") : "");
                }
            }
            char *b = xbuf_take(&bad);
            add_check(r, nbad == 0, e->line, what, "%s", nbad ? b : "");
            free(b);
        }
    }
    for (size_t k = 0; k < e->ntasks; k++) {
        const sc_expect_task *x = &e->tasks[k];
        char label[200], what[512];
        int idx;
        const cJSON *t = find_task(r, x, label, sizeof label, &idx);
        if (!t) {
            snprintf(what, sizeof what, "%s exists", label);
            add_check(r, false, x->line, what, "%s", !tasks ? nosum : "the coordinator ran no such task");
            continue;
        }
        const char *st = jsonx_get_str(t, "status");
        const char *msg = jsonx_get_str(t, "message");
        const cJSON *res = jsonx_get(t, "result");
        char *rs = short_json(res);
        if (x->status) {
            snprintf(what, sizeof what, "%s: status %s", label, x->status);
            add_check(r, st && strcmp(st, x->status) == 0, x->line, what, "status is %s; message \"%.300s\"; result %s",
                      st ? st : "missing", msg ? msg : "", rs);
        }
        if (x->message_contains) {
            snprintf(what, sizeof what, "%s: message contains \"%.200s\"", label, x->message_contains);
            add_check(r, msg && strstr(msg, x->message_contains), x->line, what, "message is \"%.500s\" (status %s)",
                      msg ? msg : "", st ? st : "?");
        }
        for (const cJSON *f = x->result ? x->result->child : NULL; f; f = f->next) {
            const cJSON *got = at_path(res, f->string);
            char *want = short_json(f), *have = short_json(got);
            snprintf(what, sizeof what, "%s: result.%s == %.200s", label, f->string, want);
            add_check(r, got && json_equal(got, f), x->line, what, "%s%s; the result: %s",
                      got ? "it is " : "the result has no key ", got ? have : f->string, rs);
            free(want);
            free(have);
        }
        for (size_t h = 0; h < x->nresult_has; h++) {
            snprintf(what, sizeof what, "%s: result has %s", label, x->result_has[h]);
            bool has = at_path(res, x->result_has[h]) != NULL;
            add_check(r, has, x->line, what, "the result has %s key %s: %s", has ? "the" : "no", x->result_has[h],
                      rs);
        }
        for (size_t h = 0; h < x->nresult_lacks; h++) {
            snprintf(what, sizeof what, "%s: result lacks %s", label, x->result_lacks[h]);
            bool lacks = at_path(res, x->result_lacks[h]) == NULL;
            add_check(r, lacks, x->line, what, "the result %s %s: %s", lacks ? "lacks" : "has", x->result_lacks[h],
                      rs);
        }
        for (const cJSON *f = x->result_len ? x->result_len->child : NULL; f; f = f->next) {
            const cJSON *got = at_path(res, f->string);
            int64_t want = 0;
            jsonx_get_i64(f, &want);
            snprintf(what, sizeof what, "%s: result.%s has %lld items", label, f->string, (long long)want);
            if (!cJSON_IsArray(got))
                add_check(r, false, x->line, what, "result.%s is %s, not a list; the result: %s", f->string,
                          jsonx_type_name(got), rs);
            else
                add_check(r, cJSON_GetArraySize(got) == want, x->line, what, "it has %d; the result: %s",
                          cJSON_GetArraySize(got), rs);
        }
        if (x->latency_max_ms > 0) {
            double lat = -1;
            jsonx_get_double(jsonx_get(t, "latency_ms"), &lat);
            snprintf(what, sizeof what, "%s: latency at most %ld ms", label, x->latency_max_ms);
            add_check(r, lat >= 0 && lat <= (double)x->latency_max_ms, x->line, what, "latency %.1f ms", lat);
        }
        free(rs);
    }
    for (size_t k = 0; k < e->nfailures_contain; k++) {
        char what[512];
        snprintf(what, sizeof what, "the coordinator's failures mention \"%.200s\"", e->failures_contain[k]);
        char *f = short_json(r->summary ? jsonx_get(r->summary, "failures") : NULL);
        add_check(r, r->summary && strstr(f, e->failures_contain[k]), e->line, what, "its failures: %s", f);
        free(f);
    }
}

static void world_series(const sc_run *r, xbuf *b)
{
    int last = -1;
    int n = 0;
    for (size_t i = 0; i < r->res.nsamples; i++) {
        if (r->res.samples[i].value == last)
            continue;
        last = r->res.samples[i].value;
        if (n++ < 40)
            xbuf_printf(b, "%s%d@%.0fms", n > 1 ? " " : "", last, r->res.samples[i].t_ms);
    }
    if (n >= 40)
        xbuf_puts(b, " ...");
    if (n == 0)
        xbuf_puts(b, "no samples (the aggregator's /metrics never answered)");
}

static void check_world(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    for (size_t k = 0; k < e->nworld; k++) {
        const sc_expect_world *w = &e->world[k];
        double from = (double)w->from_ms, to = w->to_ms < 0 ? 1e18 : (double)w->to_ms;
        char what[256], win[96] = "";
        if (w->from_ms > 0 && w->to_ms < 0)
            snprintf(win, sizeof win, " from %ld ms on", w->from_ms);
        if (w->to_ms >= 0)
            snprintf(win, sizeof win, " between %ld and %ld ms", w->from_ms, w->to_ms);
        bool ok;
        int last = -1;
        double last_t = 0;
        switch (w->kind) {
        case SC_WS_EVENTUALLY:
            ok = false;
            for (size_t i = 0; i < r->res.nsamples; i++) {
                const sc_sample *sm = &r->res.samples[i];
                /* a sample holds from its time to the next one */
                double end = i + 1 < r->res.nsamples ? r->res.samples[i + 1].t_ms : sm->t_ms;
                if (end >= from && sm->t_ms <= to && sm->value == w->value)
                    ok = true;
            }
            snprintf(what, sizeof what, "world size reaches %d%s", w->value, win);
            break;
        case SC_WS_AT_END:
            if (r->res.nsamples) {
                last = r->res.samples[r->res.nsamples - 1].value;
                last_t = r->res.samples[r->res.nsamples - 1].t_ms;
            }
            ok = last == w->value;
            snprintf(what, sizeof what, "world size is %d at the end", w->value);
            break;
        default: {
            ok = true;
            for (size_t i = 0; i < r->res.nsamples; i++) {
                const sc_sample *sm = &r->res.samples[i];
                double end = i + 1 < r->res.nsamples ? r->res.samples[i + 1].t_ms : sm->t_ms;
                if (end < from || sm->t_ms > to)
                    continue;
                if (w->kind == SC_WS_NEVER_ABOVE ? sm->value > w->value : sm->value < w->value)
                    ok = false;
            }
            snprintf(what, sizeof what, "world size never %s %d%s", w->kind == SC_WS_NEVER_ABOVE ? "above" : "below",
                     w->value, win);
        }
        }
        xbuf b = {0};
        world_series(r, &b);
        char *series = xbuf_take(&b);
        if (w->kind == SC_WS_AT_END)
            add_check(r, ok, w->line, what, "it is %d (at %.0f ms); over time: %s", last, last_t, series);
        else
            add_check(r, ok, w->line, what, "over time (size@time): %s", series);
        free(series);
    }
}

static char *read_file(const char *path, size_t cap, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    xbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0 && b.len < cap)
        xbuf_append(&b, chunk, n);
    fclose(f);
    if (len)
        *len = b.len;
    return xbuf_take(&b);
}

static void check_metrics_logs(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    const char *text = r->final_metrics ? r->final_metrics : r->last_metrics;
    for (size_t k = 0; k < e->nmetrics; k++) {
        const sc_expect_metric *m = &e->metrics[k];
        char *lb = m->labels ? jsonx_print(m->labels) : xstrdup("");
        char what[512];
        snprintf(what, sizeof what, "metric %s%s %s %g", m->name, lb, m->op, m->value);
        double v;
        if (!text) {
            add_check(r, false, m->line, what, "the aggregator's /metrics never answered");
        } else if (!sc_prom_value(text, m->name, m->labels, &v)) {
            add_check(r, false, m->line, what, "no such sample in the aggregator's last /metrics%s",
                      r->final_metrics ? "" : " (the final read failed; an earlier sample was used)");
        } else {
            bool ok = strcmp(m->op, "==") == 0   ? v == m->value
                      : strcmp(m->op, "!=") == 0 ? v != m->value
                      : strcmp(m->op, ">=") == 0 ? v >= m->value
                      : strcmp(m->op, "<=") == 0 ? v <= m->value
                      : strcmp(m->op, ">") == 0  ? v > m->value
                                                 : v < m->value;
            add_check(r, ok, m->line, what, "it is %g", v);
        }
        free(lb);
    }
    for (size_t k = 0; k < e->nlogs; k++) {
        const sc_expect_log *l = &e->logs[k];
        int idx = -1;
        for (size_t p = 0; p < r->nprocs; p++)
            if (strcmp(sc_scenario_proc_name(r->s, (int)p), l->process) == 0)
                idx = (int)p;
        char what[512];
        snprintf(what, sizeof what, "%s's log %s \"%.200s\"", l->process, l->absent ? "lacks" : "contains",
                 l->contains);
        if (idx < 0) {
            add_check(r, false, l->line, what, "no such process");
            continue;
        }
        size_t len = 0;
        char *t = read_file(sc_proc_log_path(r->procs[idx].p), 256u << 20, &len);
        const char *hit = t ? strstr(t, l->contains) : NULL;
        if (l->absent) {
            const char *eol = hit ? strchr(hit, '\n') : NULL;
            const char *bol = hit;
            while (bol && bol > t && bol[-1] != '\n')
                bol--;
            add_check(r, !hit, l->line, what, "it has the line: %.*s", hit ? (int)((eol ? eol : hit + strlen(hit)) - bol) : 0,
                      hit ? bol : "");
        } else {
            add_check(r, hit != NULL, l->line, what, "%s", hit ? "found" : t ? "not found" : "no log file");
        }
        free(t);
    }
}

static void check_learner_tasks(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    for (size_t k = 0; k < e->nlearner_tasks; k++) {
        const sc_expect_learner_tasks *x = &e->learner_tasks[k];
        int n = 0;
        for (size_t i = 0; i < r->nlts; i++) {
            const ltask_ev *ev = &r->lts[i];
            if (ev->learner != x->learner || ev->t < (double)x->after_ms)
                continue;
            if (x->task && (!ev->task || strcmp(ev->task, x->task) != 0))
                continue;
            n++;
        }
        char what[256], range[64];
        if (x->max < 0)
            snprintf(range, sizeof range, "at least %d", x->min);
        else if (x->min == x->max)
            snprintf(range, sizeof range, "exactly %d", x->min);
        else
            snprintf(range, sizeof range, "%d to %d", x->min, x->max);
        snprintf(what, sizeof what, "learner%d receives %s %s task%s%s", x->learner, range, x->task ? x->task : "any",
                 x->max == 1 ? "" : "s", x->after_ms ? " after the given time" : "");
        if (x->after_ms) {
            size_t l = strlen(what);
            snprintf(what + l, sizeof what - l, " (%ld ms)", x->after_ms);
        }
        add_check(r, n >= x->min && (x->max < 0 || n <= x->max), x->line, what, "it received %d", n);
    }
}

static void check_exits(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    for (size_t k = 0; k < e->nexits; k++) {
        const sc_expect_exit *x = &e->exits[k];
        int idx = -1;
        for (size_t p = 0; p < r->nprocs; p++)
            if (strcmp(sc_scenario_proc_name(r->s, (int)p), x->process) == 0)
                idx = (int)p;
        if (idx < 0)
            continue;
        rproc *rp = &r->procs[idx];
        char what[256], how[128];
        if (x->any_code)
            snprintf(what, sizeof what, "%s exits during the run", x->process);
        else if (x->code < 0)
            snprintf(what, sizeof what, "%s is ended by a signal", x->process);
        else
            snprintf(what, sizeof what, "%s exits with code %d", x->process, x->code);
        if (!rp->exited) {
            add_check(r, false, x->line, what, "it was still running at the end");
            continue;
        }
        sc_describe_status(rp->status, how, sizeof how);
        bool ok = x->any_code || (x->code < 0 ? WIFSIGNALED(rp->status)
                                              : WIFEXITED(rp->status) && WEXITSTATUS(rp->status) == x->code);
        if (ok)
            add_check(r, true, x->line, what, "it %s at %.0f ms", how, rp->exit_t);
        else
            add_check(r, false, x->line, what, "it %s at %.0f ms; its last log lines:\n%s", how, rp->exit_t,
                      sc_proc_tail(rp->p));
    }
}

static int cmp_edge(const void *a, const void *b)
{
    const double *x = a, *y = b;
    /* by time; at one time an answer (-1) before an arrival (+1) */
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The most requests the operator held at once, from the journal's arrival
 * and answer times (a request never answered is held to the end). */
static void check_operator_in_flight(sc_run *r, const cJSON *journal)
{
    const sc_expect *e = &r->s->expect;
    size_t n = 0, cap = journal ? (size_t)cJSON_GetArraySize(journal) : 0;
    double(*edge)[2] = xcalloc(2 * cap + 1, sizeof *edge);
    for (const cJSON *j = journal ? journal->child : NULL; j; j = j->next) {
        double at, done;
        if (!jsonx_get_double(jsonx_get(j, "time_ms"), &at))
            continue;
        edge[n][0] = at, edge[n++][1] = 1;
        if (jsonx_get_double(jsonx_get(j, "answered_ms"), &done))
            edge[n][0] = done, edge[n++][1] = -1;
    }
    qsort(edge, n, sizeof *edge, cmp_edge);
    int cur = 0, most = 0;
    double most_at = 0;
    for (size_t i = 0; i < n; i++) {
        cur += (int)edge[i][1];
        if (cur > most)
            most = cur, most_at = edge[i][0];
    }
    free(edge);
    char what[128];
    snprintf(what, sizeof what, "the operator held at most %d request%s at once", e->operator_max_in_flight,
             e->operator_max_in_flight == 1 ? "" : "s");
    if (!journal)
        add_check(r, false, e->line, what, "could not read its journal");
    else
        add_check(r, most <= e->operator_max_in_flight, e->line, what,
                  "it held %d at once (at %.0f ms of its clock), of %d requests", most, most_at,
                  cJSON_GetArraySize(journal));
}

static void check_operator(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    if (!e->has_operator_failed && !e->noperator_requests && !e->operator_max_in_flight)
        return;
    if (!r->op_state) {
        add_check(r, false, e->line, "the operator's journal", "could not read it: %s",
                  r->op_error ? r->op_error : "the operator is not running");
        return;
    }
    const cJSON *data = jsonx_get(r->op_state, "data");
    if (!data)
        data = r->op_state;
    if (e->has_operator_failed) {
        const cJSON *failed = jsonx_get(data, "failed");
        xbuf want = {0}, got = {0};
        for (size_t i = 0; i < e->noperator_failed; i++)
            xbuf_printf(&want, "%slearner%d", i ? ", " : "", e->operator_failed[i]);
        bool ok = true;
        size_t ngot = 0;
        /* every record of kind learners must be an expected one, and every
         * expected one must be there */
        bool *seen = xcalloc(e->noperator_failed + 1, sizeof *seen);
        for (const cJSON *f = failed ? failed->child : NULL; f; f = f->next) {
            const char *kind = jsonx_get_str(f, "kind");
            const char *pod = jsonx_get_str(f, "pod");
            if (!pod || (kind && strcmp(kind, "learners") != 0))
                continue;
            xbuf_printf(&got, "%s%s", ngot++ ? ", " : "", pod);
            bool expected = false;
            for (size_t i = 0; i < e->noperator_failed; i++) {
                char nm[32];
                snprintf(nm, sizeof nm, "learner%d", e->operator_failed[i]);
                if (strcmp(nm, pod) == 0) {
                    expected = true;
                    seen[i] = true;
                }
            }
            ok &= expected;
        }
        for (size_t i = 0; i < e->noperator_failed; i++)
            ok &= seen[i];
        free(seen);
        char *w = xbuf_take(&want), *g = xbuf_take(&got);
        char what[512];
        snprintf(what, sizeof what, "the operator is told exactly these learners failed: [%s]", w);
        add_check(r, ok, e->line, what, "it was told: [%s]", g);
        free(w);
        free(g);
    }
    const cJSON *journal = r->op_journal ? jsonx_get(r->op_journal, "data") : NULL;
    if (journal && !cJSON_IsArray(journal))
        journal = jsonx_get(journal, "entries");
    for (size_t k = 0; k < e->noperator_requests; k++) {
        const char *want = e->operator_requests[k];
        bool found = false;
        xbuf seen = {0};
        int n = 0;
        for (const cJSON *j = journal ? journal->child : NULL; j; j = j->next) {
            const char *m = jsonx_get_str(j, "method"), *p = jsonx_get_str(j, "path");
            if (!m || !p)
                continue;
            char line[512];
            snprintf(line, sizeof line, "%s %s", m, p);
            if (strcmp(line, want) == 0)
                found = true;
            if (n++ < 12)
                xbuf_printf(&seen, "%s%s", n > 1 ? ", " : "", line);
        }
        char *sv = xbuf_take(&seen);
        char what[512];
        snprintf(what, sizeof what, "the operator received %s", want);
        add_check(r, found, e->line, what, "its journal (%d requests): %s%s", n, sv, n > 12 ? ", ..." : "");
        free(sv);
    }
    if (e->operator_max_in_flight)
        check_operator_in_flight(r, journal);
}

/* Exactly-once delivery of learn data, from the learners' dumps and the
 * coordinator's summary (items "r<round>-<i>", round = the k-th learn). */
static void check_exactly_once(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    if (!e->exactly_once)
        return;
    const char *what = "learn data is delivered exactly once";
    const cJSON *tasks = r->summary ? jsonx_get(r->summary, "tasks") : NULL;
    if (!tasks) {
        add_check(r, false, e->line, what, "no summary from the coordinator (it did not finish)");
        return;
    }
    /* rounds: batch size sent and whether the learn completed */
    int nround = 0;
    for (const cJSON *t = tasks->child; t; t = t->next)
        if (jsonx_get_str(t, "name") && strcmp(jsonx_get_str(t, "name"), "learner_learn_task") == 0 &&
            !(jsonx_get_str(t, "status") && strcmp(jsonx_get_str(t, "status"), "skipped") == 0))
            nround++;
    long *sent = xcalloc((size_t)nround + 1, sizeof *sent);
    bool *completed = xcalloc((size_t)nround + 1, sizeof *completed);
    long batch = -1;
    int k = 0;
    for (const cJSON *t = tasks->child; t; t = t->next) {
        const char *nm = jsonx_get_str(t, "name"), *st = jsonx_get_str(t, "status");
        if (!nm)
            continue;
        if (strcmp(nm, "learner_get_data_task") == 0 && st && strcmp(st, "completed") == 0) {
            int64_t b;
            if (jsonx_get_i64(at_path(jsonx_get(t, "result"), "batch_size"), &b))
                batch = (long)b;
        } else if (strcmp(nm, "learner_learn_task") == 0 && !(st && strcmp(st, "skipped") == 0)) {
            int64_t n;
            if (jsonx_get_i64(jsonx_get(t, "items"), &n))
                sent[k] = (long)n;
            else
                sent[k] = batch;
            completed[k] = st && strcmp(st, "completed") == 0;
            k++;
        }
    }
    /* count every item id in the dumps */
    typedef struct {
        unsigned long round;
        long index;
        int count;
        char who[48];
    } seen_item;
    seen_item *items = NULL;
    size_t nitems = 0, cap = 0;
    xbuf issues = {0};
    int nissues = 0;
    long total = 0;
    for (size_t g = 0; g < r->s->ngroups; g++) {
        char *dp = dump_path(r, g);
        size_t len;
        char *text = read_file(dp, (size_t)1 << 30, &len);
        free(dp);
        for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (!strstr(line, "\"item\""))
                continue;
            cJSON *j = jsonx_parse(line, strlen(line), NULL, 0);
            const char *id = j ? jsonx_get_str(jsonx_get(j, "item"), "id") : NULL;
            /* "r<round>-<index>", numbers checked (no sscanf: it cannot
             * report overflow) */
            unsigned long rd = 0;
            long ix = 0;
            char *e1 = NULL, *e2 = NULL;
            errno = 0;
            if (id && id[0] == 'r' && isdigit((unsigned char)id[1])) {
                rd = strtoul(id + 1, &e1, 10);
                if (*e1 == '-' && (isdigit((unsigned char)e1[1]) || e1[1] == '-'))
                    ix = strtol(e1 + 1, &e2, 10);
            }
            if (!e2 || e2 == e1 + 1 || *e2 || errno) {
                if (nissues++ < 6)
                    xbuf_printf(&issues, "%sa learner received an item without a known id: %.120s", nissues > 1 ? "; " : "",
                                line);
                cJSON_Delete(j);
                continue;
            }
            total++;
            const char *who = jsonx_get_str(j, "learner");
            size_t f;
            for (f = 0; f < nitems; f++)
                if (items[f].round == rd && items[f].index == ix)
                    break;
            if (f == nitems) {
                if (nitems == cap) {
                    cap = cap ? cap * 2 : 256;
                    items = xrealloc(items, cap * sizeof *items);
                }
                items[nitems].round = rd;
                items[nitems].index = ix;
                items[nitems].count = 0;
                snprintf(items[nitems].who, sizeof items[nitems].who, "%s", who ? who : "?");
                nitems++;
            }
            if (++items[f].count == 2 && nissues++ < 6)
                xbuf_printf(&issues, "%sitem %s reached a learner twice (%s, then %s)", nissues > 1 ? "; " : "", id,
                            items[f].who, who ? who : "?");
            if ((long)rd >= 1 && (long)rd <= nround && sent[rd - 1] >= 0 && ix >= sent[rd - 1] && nissues++ < 6)
                xbuf_printf(&issues, "%sitem %s reached %s but learn #%lu sent only %ld items", nissues > 1 ? "; " : "",
                            id, who ? who : "?", rd, sent[rd - 1]);
            cJSON_Delete(j);
        }
        free(text);
    }
    for (int rd = 1; rd <= nround; rd++) {
        if (!completed[rd - 1] || sent[rd - 1] < 0)
            continue;
        for (long ix = 0; ix < sent[rd - 1]; ix++) {
            size_t f;
            for (f = 0; f < nitems; f++)
                if (items[f].round == (unsigned long)rd && items[f].index == ix)
                    break;
            if (f == nitems && nissues++ < 6)
                xbuf_printf(&issues, "%slearn #%d completed but item r%d-%ld reached no learner", nissues > 1 ? "; " : "",
                            rd, rd, ix);
        }
    }
    if (nissues > 6)
        xbuf_printf(&issues, "; %d more", nissues - 6);
    char *is = xbuf_take(&issues);
    if (nissues)
        add_check(r, false, e->line, what, "%s", is);
    else
        add_check(r, true, e->line, what, "%ld items over %d learn tasks", total, nround);
    free(is);
    free(items);
    free(sent);
    free(completed);
}

static void evaluate(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    check_tasks(r);
    check_world(r);
    check_metrics_logs(r);
    check_learner_tasks(r);
    check_exits(r);
    check_operator(r);
    check_exactly_once(r);
    if (e->max_duration_ms > 0) {
        char what[128];
        snprintf(what, sizeof what, "the run takes at most %ld ms", e->max_duration_ms);
        double d = r->coord_done ? r->coord_end_ms : now_t(r);
        add_check(r, r->coord_done && d <= (double)e->max_duration_ms, e->line, what, "%s %.0f ms",
                  r->coord_done ? "the coordinator was done after" : "it had not finished after", d);
    }
    int alive = e->aggregator_alive;
    if (alive < 0) {
        /* by default checked, unless an action ends the aggregator or an exit
         * of it is expected */
        alive = !exit_expected(r, SC_PROC_AGG);
        for (size_t i = 0; i < r->s->nactions; i++)
            if (r->s->actions[i].proc == SC_PROC_AGG &&
                (r->s->actions[i].what == SC_DO_KILL || r->s->actions[i].what == SC_DO_TERM))
                alive = 0;
    }
    if (alive == 1) {
        rproc *ag = &r->procs[SC_PROC_AGG];
        if (!sc_proc_running(ag->p))
            add_check(r, false, e->line, "the aggregator is alive and answering at the end", "it is not running%s",
                      ag->exited ? " (it exited during the run)" : "");
        else
            add_check(r, r->agg_answered, e->line, "the aggregator is alive and answering at the end",
                      "GET /metrics: %s", r->agg_answered ? "200" : r->agg_probe_error ? r->agg_probe_error : "no answer");
    }
}

/* ---- the end: probes, teardown ---- */

static void teardown(sc_run *r);

static void probe_done(sc_run *r)
{
    if (--r->probes > 0)
        return;
    evaluate(r);
    teardown(r);
}

static void on_probe_metrics(void *data, const hc_result *res)
{
    sc_run *r = data;
    r->probe_metrics = NULL;
    if (!res->error && res->status == 200) {
        r->agg_answered = true;
        r->final_metrics = xstrdup(res->body ? res->body : "");
        double v;
        if (sc_prom_value(r->final_metrics, WORLD_METRIC, NULL, &v))
            add_sample(r, now_t(r), (int)v);
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
    hc_opts o;
    hc_opts_init(&o);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
    o.method = "GET";
    o.url = url;
    o.timeout_ms = PROBE_TIMEOUT_MS;
    o.connect_timeout_ms = PROBE_TIMEOUT_MS;
    o.retries = 0;
    return hc_send(r->hc, &o, cb, r);
}

static void stop_timer(sc_run *r, ev_timer **t)
{
    if (*t) {
        ev_timer_stop(r->loop, *t);
        *t = NULL;
    }
}

static void stop_all_timers(sc_run *r)
{
    stop_timer(r, &r->sample_timer);
    stop_timer(r, &r->min_timer);
    stop_timer(r, &r->coord_timer);
    stop_timer(r, &r->timeout_timer);
    stop_timer(r, &r->settle_timer);
    for (size_t i = 0; i < r->s->nactions; i++) {
        stop_timer(r, &r->act_timers[i]);
        stop_timer(r, &r->cont_timers[i]);
    }
    for (size_t i = 0; i < r->nprocs; i++)
        stop_timer(r, &r->procs[i].start_timer);
    if (r->sample_req) {
        hc_cancel(r->hc, r->sample_req);
        r->sample_req = NULL;
    }
}

/* A process the runner signalled during the run (term, kill) and that has
 * not exited yet: the run waits for it (up to GRACE_MS) before the final
 * checks, so that an expected exit is seen. */
static bool signalled_running(const sc_run *r)
{
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].runner_signal && !r->procs[i].teardown && sc_proc_running(r->procs[i].p) &&
            !r->procs[i].restart_pending)
            return true;
    return false;
}

static void on_settle_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->settle_timer = NULL;
    begin_probes(r, "the processes signalled by actions have exited");
}

static void begin_probes(sc_run *r, const char *why)
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
    rlog(r, "the run ends: %s", why);
    r->res.run_ms = now_t(r);
    set_phase(r, PH_PROBING);
    stop_all_timers(r);
    /* a process left stopped would not answer */
    r->probes = 1; /* released below */
    rproc *ag = &r->procs[SC_PROC_AGG];
    if (sc_proc_running(ag->p) && !sc_proc_stopped(ag->p) && !r->aborted) {
        r->probe_metrics = probe(r, r->agg_metrics_port, "/metrics", on_probe_metrics);
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

static void on_kill_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->kill_timer = NULL;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].p && sc_proc_running(r->procs[i].p)) {
            rlog(r, "%s still runs %d ms after SIGTERM: SIGKILL", sc_scenario_proc_name(r->s, (int)i), GRACE_MS);
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
    res->passed = !res->error && res->nchecks > 0;
    for (size_t i = 0; i < res->nchecks; i++)
        if (!res->checks[i].ok)
            res->passed = false;
    res->timed_out = r->timed_out;
    res->duration_ms = (double)(ev_now_ms() - r->start_ms);
    for (int l = 0; l < r->s->nlearners; l++)
        close_bar(r, l, 3);
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
    if (res->error)
        cJSON_AddStringToObject(j, "error", res->error);
    cJSON_AddItemToObject(j, "duration_ms", jsonx_new_double(res->duration_ms));
    cJSON_AddStringToObject(j, "replay", res->replay);
    cJSON *cs = cJSON_AddArrayToObject(j, "checks");
    for (size_t i = 0; i < res->nchecks; i++) {
        cJSON *c = cJSON_CreateObject();
        cJSON_AddBoolToObject(c, "ok", res->checks[i].ok);
        cJSON_AddItemToObject(c, "line", jsonx_new_i64(res->checks[i].line));
        cJSON_AddStringToObject(c, "what", res->checks[i].what);
        cJSON_AddStringToObject(c, "detail", res->checks[i].detail);
        cJSON_AddItemToArray(cs, c);
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

static void maybe_done(sc_run *r)
{
    if (r->ph != PH_STOPPING)
        return;
    for (size_t i = 0; i < r->nprocs; i++)
        if (r->procs[i].p && (sc_proc_running(r->procs[i].p) || sc_proc_pid(r->procs[i].p)))
            return;
    /* also wait for procs reaped but with pipes still draining: on_exit
     * comes last, so a running flag of false and a pid of 0 mean done */
    stop_timer(r, &r->kill_timer);
    set_phase(r, PH_DONE);
    finish_result(r);
    rlog(r, "%s after %.0f ms", r->res.passed ? "PASSED" : "FAILED", r->res.duration_ms);
    if (r->rlog) {
        fclose(r->rlog);
        r->rlog = NULL;
    }
    r->done_timer = ev_timer_start(r->loop, 0, on_done_timer, r);
}

static void teardown(sc_run *r)
{
    set_phase(r, PH_STOPPING);
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
    add_check(r, false, 0, what, "timed out: %s", pending[0] ? pending : "still running");
    begin_probes(r, "timeout");
}

static void on_start_timer(ev_loop *loop, void *data)
{
    sc_run *r = data;
    r->done_timer = NULL;
    if (build_commands(r) != 0) {
        fail_run(r, "could not prepare the run (free ports or the run folder %s)", r->run_dir);
        return;
    }
    write_commands(r);
    if (r->s->k8s) {
        set_phase(r, PH_OPERATOR);
        spawn(r, SC_PROC_OP);
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

sc_run *sc_run_start(ev_loop *loop, sc_procset *set, const sc_scenario *s, const sc_run_opts *opts,
                     sc_run_done_cb done, void *ud)
{
    sc_run *r = xcalloc(1, sizeof *r);
    r->loop = loop;
    r->set = set;
    r->s = s;
    r->opts = *opts;
    r->done = done;
    r->ud = ud;
    r->hc = hc_new(loop);
    r->seed = opts->has_seed ? opts->seed : s->seed;
    r->start_ms = ev_now_ms();
    r->run_dir = xasprintf("%s/runs/%s-%llu", opts->out_dir, s->name, (unsigned long long)r->seed);
    mkdir_p(r->run_dir);
    /* old logs of an earlier run of the same scenario and seed */
    static const char *const old[] = {"runner.log", "result.json", "commands.txt", "coordinator-script.json"};
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) {
        char *p = xasprintf("%s/%s", r->run_dir, old[i]);
        unlink(p);
        free(p);
    }
    r->nprocs = sc_scenario_proc_count(s);
    r->procs = xcalloc(r->nprocs, sizeof *r->procs);
    static const sc_proc_callbacks cbs = {on_line, on_exit_cb};
    for (size_t i = 0; i < r->nprocs; i++) {
        rproc *rp = &r->procs[i];
        rp->run = r;
        rp->idx = (int)i;
        const char *nm = sc_scenario_proc_name(s, (int)i);
        for (const char *ext = ".log"; ext; ext = strcmp(ext, ".log") == 0 ? ".out" : NULL) {
            char *p = xasprintf("%s/%s%s", r->run_dir, nm, ext);
            unlink(p);
            free(p);
        }
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
    rlog(r, "scenario %s (%s), seed %llu, time_scale %g, timeout %ld ms", s->name, s->path, (unsigned long long)r->seed,
         s->time_scale, s->timeout_ms);
    rlog(r, "timings: heartbeat span %ld, tolerance %ld, max_retry %ld, retry interval %ld, sync %ld, deadline %ld ms",
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
    if (!r->res.error)
        r->res.error = xstrdup(why);
    add_check(r, false, 0, "the run", "%s", why);
    if (r->ph < PH_PROBING) {
        if (r->done_timer) { /* not even started */
            ev_timer_stop(r->loop, r->done_timer);
            r->done_timer = NULL;
        }
        set_phase(r, PH_PROBING);
        stop_all_timers(r);
    }
    teardown(r);
}

void sc_run_free(sc_run *r)
{
    if (!r)
        return;
    stop_all_timers(r);
    stop_timer(r, &r->kill_timer);
    stop_timer(r, &r->done_timer);
    hc_free(r->hc);
    for (size_t i = 0; i < r->nprocs; i++) {
        sc_proc_free(r->procs[i].p);
        strv_free(r->procs[i].argv);
        strv_free(r->procs[i].env);
        release_ports(r, r->procs[i].base_port, i >= SC_PROC_GROUP0 ? r->s->groups[i - SC_PROC_GROUP0].count : 0);
        release_ports(r, r->procs[i].ctl_port, i >= SC_PROC_GROUP0 ? 1 : 0);
    }
    release_ports(r, r->agg_slave_port, 6);
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
    free(r->final_metrics);
    free(r->agg_probe_error);
    free(r->op_error);
    free(r->run_dir);
    free(r->agg_name);
    if (r->rlog)
        fclose(r->rlog);
    sc_result *res = &r->res;
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
    free(r);
}
