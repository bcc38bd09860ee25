/* sc_cmd: the command lines of a run's processes, their ports, starting one
 * (see sc_run_int.h). */
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonx.h"
#include "sc_run_int.h"
#include "util.h"

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
    /* as the servers bind: a port whose old connections linger in
     * TIME_WAIT is free for them (SO_REUSEADDR) */
    char err[256];
    int fd = util_tcp_bind("127.0.0.1", port, -1, false, err, sizeof err);
    if (fd < 0)
        return false;
    close(fd);
    return true;
}

/* Runners on one machine (ctest -j starts one per scenario) must not hand
 * out the same port: a free port is only free until its server binds it,
 * which happens after the runner checked. Each runner reserves the ports it
 * hands out as a byte range of one shared lock file (an open-file-
 * description lock: the kernel drops it when the runner dies, even by
 * kill -9). Without the file (an unwritable folder), the bind check alone
 * remains. */
static int port_lock_fd(void)
{
    static int fd = -2;
    if (fd == -2) {
        const char *dir = getenv("TMPDIR");
        char path[512];
        snprintf(path, sizeof path, "%s/dilearn-ports.lock", dir && *dir ? dir : "/tmp");
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    }
    return fd;
}

static bool port_lock(int base, int n, bool take)
{
    int fd = port_lock_fd();
    if (fd < 0)
        return true;
    struct flock fl = {.l_type = take ? F_WRLCK : F_UNLCK, .l_whence = SEEK_SET, .l_start = base, .l_len = n};
    return fcntl(fd, F_OFD_SETLK, &fl) == 0;
}

/* n consecutive free ports below the kernel's ephemeral range (so that no
 * outgoing connection takes one before its server binds it), reserved
 * against other runners. -1 if none. */
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
            ok = !r->opts.ports_used[base + i];
        if (!ok || !port_lock(base, n, true))
            continue;
        for (int i = 0; i < n && ok; i++)
            ok = port_free(base + i);
        if (!ok) {
            port_lock(base, n, false);
            continue;
        }
        for (int i = 0; i < n; i++)
            r->opts.ports_used[base + i] = 1;
        return base;
    }
    return -1;
}

void sr_release_ports(sc_run *r, int base, int n)
{
    if (base <= 0)
        return;
    for (int i = 0; i < n; i++)
        r->opts.ports_used[base + i] = 0;
    port_lock(base, n, false);
}

char *sr_learner_addr(const sc_run *r, int learner)
{
    int g = sc_scenario_group_of(r->s, learner);
    const rproc *rp = &r->procs[SC_PROC_GROUP0 + g];
    if (r->s->groups[g].address)
        return xstrdup(r->s->groups[g].address);
    int port = rp->base_port + (learner - r->s->groups[g].first);
    if (r->s->k8s)
        return xasprintf("learner%d.localhost:%d", learner, port);
    return xasprintf("127.0.0.1:%d", port);
}

int sr_spawn(sc_run *r, int idx)
{
    rproc *rp = &r->procs[idx];
    char err[512];
    rp->ready = false;
    rp->runner_signal = false;
    if (sc_proc_spawns(rp->p) > 0)
        sr_events_restart(r, idx);
    if (sc_proc_spawn(rp->p, rp->argv, rp->env, err, sizeof err) != 0) {
        sr_fail(r, "cannot start %s: %s", sc_scenario_proc_name(r->s, idx), err);
        return -1;
    }
    sr_log(r, "started %s (pid %d): %s ...", sc_scenario_proc_name(r->s, idx), (int)sc_proc_pid(rp->p), rp->argv[0]);
    if (idx >= SC_PROC_GROUP0 && r->s->groups[idx - SC_PROC_GROUP0].command)
        sr_poll_ready(r, idx);
    if (r->t0_set)
        sr_mark(r, 3,
                idx >= SC_PROC_GROUP0 && r->s->groups[idx - SC_PROC_GROUP0].count == 1
                    ? r->s->groups[idx - SC_PROC_GROUP0].first
                    : -1,
                "%s started%s", sc_scenario_proc_name(r->s, idx), sc_proc_spawns(rp->p) > 1 ? " again" : "");
    return 0;
}

static void push_flag(char ***v, const char *flag, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void push_flag(char ***v, const char *flag, const char *fmt, ...)
{
    util_strv_push(v, xstrdup(flag));
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    util_strv_push(v, xstrdup(buf));
}

/* The log level: --log-level of run_scenarios, else the process's default
 * (the runner reads no log: they are for people). */
static void log_flags(char ***v, const sc_run *r, const char *level)
{
    if (r->opts.json_logs)
        push_flag(v, "--log-format", "json");
    push_flag(v, "--log-level", "%s", r->opts.log_level ? r->opts.log_level : level);
}

/* What the runner reads: the process's events, each line written at once,
 * to <run folder>/<name>.events.jsonl (sc_events.c follows it). The cap is
 * far above what a run writes, so that no line is rotated away. */
static void events_flags(char ***v, const sc_run *r, int idx)
{
    push_flag(v, "--events", "%s/%s.events.jsonl", r->run_dir, sc_scenario_proc_name(r->s, idx));
    if (idx != SC_PROC_AGG || r->opts.agg_each_line)
        util_strv_push(v, xstrdup("--events-each-line"));
    else
        push_flag(v, "--events-flush-ms", "%d", 20);
    push_flag(v, "--events-max-bytes", "%d", 1 << 30);
}

char *sr_fault_text(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    char *t;
    if (cJSON_IsObject(j) && cJSON_GetObjectItemCaseSensitive(j, "optional")) {
        cJSON_DeleteItemFromObjectCaseSensitive(j, "optional");
        t = jsonx_print(j);
    } else {
        t = xstrdup(text);
    }
    cJSON_Delete(j);
    return t;
}

char *sr_dump_path(const sc_run *r, size_t g)
{
    return xasprintf("%s/%s.dump.jsonl", r->run_dir, r->s->groups[g].name);
}

/* The ports of a run: six for the aggregator, operator and coordinator,
 * then a range and a control port per learner group. 0 or -1. */
static int alloc_run_ports(sc_run *r)
{
    const sc_scenario *s = r->s;
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
        if (s->groups[g].address)
            continue;
        rp->base_port = alloc_ports(r, s->groups[g].count);
        rp->ctl_port = alloc_ports(r, 1);
        if (rp->base_port < 0 || rp->ctl_port < 0)
            return -1;
    }
    return 0;
}

/* A group given by command: its template with {host}, {port} (its first
 * learner's), {count}, {name}, {run_dir} and {mock_learner} filled in. */
static void real_group_command(sc_run *r, const sc_group *gr, rproc *rp)
{
    char **v = util_strv_new();
    for (size_t i = 0; gr->command[i]; i++) {
        xbuf b = {0};
        for (const char *t = gr->command[i]; *t;) {
            const char *o = strchr(t, '{'), *c = o ? strchr(o, '}') : NULL;
            if (!o || !c) {
                xbuf_puts(&b, t);
                break;
            }
            xbuf_printf(&b, "%.*s", (int)(o - t), t);
            size_t n = (size_t)(c - o - 1);
            if (n == 4 && strncmp(o + 1, "host", n) == 0)
                xbuf_puts(&b, "127.0.0.1");
            else if (n == 4 && strncmp(o + 1, "port", n) == 0)
                xbuf_printf(&b, "%d", rp->base_port);
            else if (n == 5 && strncmp(o + 1, "count", n) == 0)
                xbuf_printf(&b, "%d", gr->count);
            else if (n == 4 && strncmp(o + 1, "name", n) == 0)
                xbuf_puts(&b, gr->name);
            else if (n == 7 && strncmp(o + 1, "run_dir", n) == 0)
                xbuf_puts(&b, r->run_dir);
            else if (n == 12 && strncmp(o + 1, "mock_learner", n) == 0)
                xbuf_puts(&b, r->opts.mock_learner);
            else
                xbuf_printf(&b, "%.*s", (int)(n + 2), o); /* not ours: kept as written */
            t = c + 1;
        }
        util_strv_push(&v, xbuf_take(&b));
    }
    rp->argv = v;
    rp->env = util_strv_new();
    rp->wanted = !gr->absent;
}

/* The command line of learner group g; sx: the seed sequence. */
static void group_command(sc_run *r, size_t g, uint64_t *sx)
{
    const sc_scenario *s = r->s;
    const sc_group *gr = &s->groups[g];
    rproc *rp = &r->procs[SC_PROC_GROUP0 + g];
    if (gr->address) { /* already running: nothing to start */
        rp->wanted = false;
        rp->ready = true;
        return;
    }
    if (gr->command) {
        real_group_command(r, gr, rp);
        return;
    }
    char **v = util_strv_new();
    util_strv_push(&v, xstrdup(r->opts.mock_learner));
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
        push_flag(&v, "--label-prefix", "%s-learner", gr->name);
        if (s->k8s) /* the aggregator knows them by the addresses the operator lists */
            push_flag(&v, "--events-learner", "{id}.localhost:{port}");
    } else {
        push_flag(&v, "--id-prefix", "%s", g == 0 ? "learner" : gr->name);
        if (g != 0) {
            free(v[util_strv_len(v) - 1]);
            v[util_strv_len(v) - 1] = xasprintf("%s-learner", gr->name);
        }
    }
    char *dp = sr_dump_path(r, g);
    push_flag(&v, "--dump", "%s", dp);
    free(dp);
    push_flag(&v, "--seed", "%llu", (unsigned long long)(splitmix(sx) >> 1));
    for (size_t f = 0; f < gr->nfaults; f++) {
        char *t = sr_fault_text(gr->faults[f]);
        push_flag(&v, "--fault", "%s", t);
        free(t);
    }
    events_flags(&v, r, SC_PROC_GROUP0 + (int)g);
    log_flags(&v, r, "info");
    for (size_t a = 0; a < gr->nargs; a++)
        util_strv_push(&v, xstrdup(gr->args[a]));
    rp->argv = v;
    rp->env = util_strv_new();
    rp->wanted = !gr->absent;
}

static void operator_command(sc_run *r, uint64_t *sx)
{
    const sc_scenario *s = r->s;
    rproc *rp = &r->procs[SC_PROC_OP];
    char **v = util_strv_new();
    util_strv_push(&v, xstrdup(r->opts.mock_operator));
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
        char *a = sr_learner_addr(r, i);
        xbuf_printf(&l, "%s%s", n++ ? "," : "", a);
        free(a);
    }
    char *ls = xbuf_take(&l);
    util_strv_push(&v, xstrdup("--learners"));
    util_strv_push(&v, ls);
    push_flag(&v, "--seed", "%llu", (unsigned long long)(splitmix(sx) >> 1));
    events_flags(&v, r, SC_PROC_OP);
    log_flags(&v, r, "info");
    for (size_t a = 0; a < s->nop_args; a++)
        util_strv_push(&v, xstrdup(s->op_args[a]));
    rp->argv = v;
    rp->env = util_strv_new();
    rp->wanted = true;
}

/* The aggregator of a profile: its command, config file and environment
 * from the profile's templates. 0, or -1 if the config cannot be written. */
static int profile_aggregator_command(sc_run *r)
{
    const sc_scenario *s = r->s;
    const sc_profile *pf = r->opts.profile;
    rproc *rp = &r->procs[SC_PROC_AGG];
    char *cfg_path = xasprintf("%s/aggregator-config.json", r->run_dir);
    sc_profile_vars v = {.aggregator = r->opts.aggregator,
                         .run_dir = r->run_dir,
                         .config = cfg_path,
                         .namespace_ = K8S_NAMESPACE,
                         .pod_name = r->agg_name,
                         .slave_port = r->agg_slave_port,
                         .master_port = r->agg_master_port,
                         .metrics_port = r->agg_metrics_port,
                         .operator_port = r->op_port,
                         .time_scale = s->time_scale,
                         .heartbeat_span_ms = s->heartbeat_span_ms,
                         .heartbeat_tolerance_ms = s->heartbeat_tolerance_ms,
                         .max_retry_ms = s->max_retry_ms,
                         .retry_interval_ms = s->retry_interval_ms,
                         .sync_period_ms = s->sync_period_ms,
                         .task_deadline_ms = s->task_deadline_ms};
    /* the learners it is told of (none in Kubernetes mode: the operator
     * names them) */
    v.learner_ids = xcalloc((size_t)s->nlearners + 1, sizeof *v.learner_ids);
    v.learner_hosts = xcalloc((size_t)s->nlearners + 1, sizeof *v.learner_hosts);
    v.learner_ports = xcalloc((size_t)s->nlearners + 1, sizeof *v.learner_ports);
    for (int i = 0; i < s->nlearners && !s->k8s; i++) {
        if (!s->groups[sc_scenario_group_of(s, i)].configured)
            continue;
        char *a = sr_learner_addr(r, i);
        char *colon = strrchr(a, ':');
        v.learner_ids[v.nlearners] = xasprintf("learner%d", i);
        v.learner_hosts[v.nlearners] = xstrndup(a, (size_t)(colon - a));
        int64_t port = 0; /* an address the runner made or the scenario validated */
        util_parse_i64(colon + 1, 1, 65535, &port);
        v.learner_ports[v.nlearners] = (int)port;
        v.nlearners++;
        free(a);
    }
    int rc = 0;
    char *cfg = sc_profile_config_text(pf, &v);
    if (cfg) {
        FILE *f = fopen(cfg_path, "w");
        if (!f || fprintf(f, "%s\n", cfg) < 0)
            rc = -1;
        if (f && fclose(f) != 0)
            rc = -1;
        free(cfg);
    }
    rp->argv = sc_profile_argv(pf, &v);
    if (r->opts.agg_events) /* a profile of our aggregator that offers its events */
        events_flags(&rp->argv, r, SC_PROC_AGG);
    rp->env = sc_profile_env(pf, &v, s->k8s);
    for (size_t i = 0; i < s->nagg_env; i++)
        util_strv_push(&rp->env, xstrdup(s->agg_env[i]));
    rp->wanted = true;
    for (size_t i = 0; i < v.nlearners; i++) {
        free(v.learner_ids[i]);
        free(v.learner_hosts[i]);
    }
    free(v.learner_ids);
    free(v.learner_hosts);
    free(v.learner_ports);
    free(cfg_path);
    return rc;
}

static void aggregator_command(sc_run *r)
{
    const sc_scenario *s = r->s;
    rproc *rp = &r->procs[SC_PROC_AGG];
    char **v = util_strv_new();
    util_strv_push(&v, xstrdup(r->opts.aggregator));
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
            char *a = sr_learner_addr(r, i);
            push_flag(&v, "--learner", "learner%d=%s", i, a);
            free(a);
        }
    if (r->opts.agg_events)
        events_flags(&v, r, SC_PROC_AGG);
    log_flags(&v, r, "info");
    for (size_t a = 0; a < s->nagg_args; a++)
        util_strv_push(&v, xstrdup(s->agg_args[a]));
    rp->argv = v;
    char **e = util_strv_new();
    for (size_t i = 0; i < s->nagg_env; i++)
        util_strv_push(&e, xstrdup(s->agg_env[i]));
    if (s->k8s) {
        util_strv_push(&e, xasprintf("KUBERNETES_SERVER_URL=http://127.0.0.1:%d", r->op_port));
        util_strv_push(&e, xasprintf("KUBERNETES_POD_NAMESPACE=%s", K8S_NAMESPACE));
        util_strv_push(&e, xasprintf("KUBERNETES_POD_NAME=%s", r->agg_name));
    }
    rp->env = e;
    rp->wanted = true;
}

/* 0, or -1 if its script cannot be written to the run folder. */
static int coordinator_command(sc_run *r, uint64_t *sx)
{
    const sc_scenario *s = r->s;
    rproc *rp = &r->procs[SC_PROC_COORD];
    char **v = util_strv_new();
    util_strv_push(&v, xstrdup(r->opts.mock_coordinator));
    push_flag(&v, "--connect", "127.0.0.1:%d", r->agg_slave_port);
    push_flag(&v, "--host", "127.0.0.1");
    push_flag(&v, "--port", "%d", r->coord_port);
    /* an aggregator with fixed timings heartbeats at its own pace: the
     * coordinator's tolerance of it must not be scaled */
    push_flag(&v, "--time-scale", "%g", r->opts.profile && r->opts.profile->fixed_timings ? 1.0 : s->time_scale);
    push_flag(&v, "--seed", "%llu", (unsigned long long)(splitmix(sx) >> 1));
    if (s->rounds >= 0)
        push_flag(&v, "--rounds", "%d", s->rounds);
    /* an aggregator without learner_close_task (DI-engine's answers "task
     * name error") is not sent one; expectations about it are skipped */
    if (r->opts.profile && !r->opts.profile->close_task && !s->script)
        util_strv_push(&v, xstrdup("--no-close"));
    if (s->script) {
        char *sp = xasprintf("%s/coordinator-script.json", r->run_dir);
        FILE *f = fopen(sp, "w");
        if (!f) {
            free(sp);
            util_strv_free(v);
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
    /* the coordinator's oracle reads every learner's dump: only the mock
     * writes one, so with a learner of another kind it has none */
    bool all_mock = true;
    for (size_t g = 0; g < s->ngroups; g++)
        all_mock &= SC_GROUP_IS_MOCK(&s->groups[g]);
    for (size_t g = 0; g < s->ngroups && all_mock; g++) {
        char *dp = sr_dump_path(r, g);
        push_flag(&v, "--dump", "%s", dp);
        free(dp);
    }
    events_flags(&v, r, SC_PROC_COORD);
    log_flags(&v, r, "info");
    for (size_t a = 0; a < s->ncoord_args; a++)
        util_strv_push(&v, xstrdup(s->coord_args[a]));
    rp->argv = v;
    rp->env = util_strv_new();
    rp->wanted = true;
    return 0;
}

/* Builds every command line (ports chosen here, so restarts reuse them). */
int sr_build_commands(sc_run *r)
{
    const sc_scenario *s = r->s;
    uint64_t sx = r->seed;
    if (alloc_run_ports(r) != 0)
        return -1;
    r->agg_name = xasprintf("%s-aggregator", "dilearn");
    for (size_t g = 0; g < s->ngroups; g++)
        group_command(r, g, &sx);
    if (s->k8s)
        operator_command(r, &sx);
    if (!r->opts.profile)
        aggregator_command(r);
    else if (profile_aggregator_command(r) != 0)
        return -1;
    if (s->coordinator && coordinator_command(r, &sx) != 0)
        return -1;
    /* every dump file exists from the start (a group that never runs has an
     * empty one) */
    for (size_t g = 0; g < s->ngroups; g++) {
        char *dp = sr_dump_path(r, g);
        int fd = open(dp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0)
            close(fd);
        free(dp);
    }
    return 0;
}

/* Writes the command lines to the run folder (commands.txt). */
void sr_write_commands(sc_run *r)
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
