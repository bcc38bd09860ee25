/* mock_learner: N mock DI-engine learners in one process on one event loop,
 * with fault injection and a control API. See opts.c (--help) for the
 * command line, fault.h for faults, control.h for the control API. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "control.h"
#include "dump.h"
#include "ev.h"
#include "evt.h"
#include "fault.h"
#include "ilog.h"
#include "jsonx.h"
#include "learner.h"
#include "opts.h"
#include "xalloc.h"

#ifndef DILEARN_VERSION
#define DILEARN_VERSION "unknown"
#endif

typedef struct {
    opts o;
    ev_loop *loop;
    fault_set *faults;
    dump *dump;
    learner **learners;
    int nlearners;
    control *control;
} app;

static void on_signal(ev_loop *loop, int signum, void *data)
{
    (void)data;
    LOG_INFO(NULL, "signal %d: stopping", signum);
    EVT_EMIT(shutdown, .signal = signum == SIGTERM ? "SIGTERM" : signum == SIGINT ? "SIGINT" : NULL,
             .reason = "a signal");
    ev_stop(loop);
}

/* So that a thousand learners (each a server, a client and their
 * connections) fit. */
static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            LOG_WARN(NULL, "cannot raise the open file limit to %llu: %s", (unsigned long long)rl.rlim_max,
                     strerror(errno));
    }
}

static void app_free(app *a)
{
    control_stop(a->control);
    for (int k = 0; k < a->nlearners; k++)
        learner_free(a->learners[k]);
    free(a->learners);
    fault_set_free(a->faults);
    dump_close(a->dump);
    evt_close();
    if (a->loop)
        ev_loop_free(a->loop);
    opts_free(&a->o);
}

static void print_ready(app *a)
{
    xbuf b = {0};
    xbuf_printf(&b, "{\"ready\": true, \"control_port\": %d, \"learners\": [", control_port(a->control));
    for (int k = 0; k < a->nlearners; k++)
        xbuf_printf(&b, "%s{\"id\": \"%s\", \"port\": %d}", k ? ", " : "", learner_id(a->learners[k]),
                    learner_port(a->learners[k]));
    xbuf_puts(&b, "]}\n");
    fwrite(b.data, 1, b.len, stdout);
    fflush(stdout);
    xbuf_free(&b);
}

/* Start-up faults: checked against the learners (usage errors) and their
 * at-once parts collected in now. */
static int load_faults(app *a, fault_now *now, size_t *nnow)
{
    *nnow = 0;
    for (size_t i = 0; i < a->o.nfaults; i++) {
        const char *spec = a->o.faults[i];
        char err[600];
        cJSON *j = jsonx_parse(spec, strlen(spec), err, sizeof err);
        size_t n = 0;
        if (j && !fault_set_add(a->faults, j, true, now + *nnow, &n, NULL, NULL, err, sizeof err)) {
            cJSON_Delete(j);
            fprintf(stderr, "mock_learner: --fault '%.200s': %s\n", spec, err);
            return -1;
        }
        if (!j) {
            fprintf(stderr, "mock_learner: --fault '%.200s': not valid JSON: %s\n", spec, err);
            return -1;
        }
        cJSON_Delete(j);
        *nnow += n;
    }
    return 0;
}

int main(int argc, char **argv)
{
    app a = {0};
    char err[600];
    if (opts_parse(&a.o, argc, argv, err, sizeof err) < 0) {
        fprintf(stderr, "mock_learner: %s (see --help)\n", err);
        opts_free(&a.o);
        return 2;
    }
    if (a.o.help) {
        opts_help(stdout);
        opts_free(&a.o);
        return 0;
    }
    if (a.o.version) {
        printf("mock_learner %s\n", DILEARN_VERSION);
        opts_free(&a.o);
        return 0;
    }
    ilog_init("mock_learner", a.o.log_level, a.o.log_format);
    signal(SIGPIPE, SIG_IGN);
    raise_fd_limit();

    a.faults = fault_set_new(a.o.count, a.o.id_prefix, a.o.seed);
    fault_set_id_base(a.faults, a.o.id_base);
    fault_now *now = xcalloc(FAULT_MAX, sizeof *now);
    size_t nnow = 0;
    if (load_faults(&a, now, &nnow) < 0) {
        free(now);
        app_free(&a);
        return 2;
    }
    int rc = 1;
    a.loop = ev_loop_new();
    if (!a.loop) {
        LOG_ERROR(NULL, "cannot create the event loop: %s", strerror(errno));
        goto out;
    }
    a.o.events.process = "mock_learner";
    if (evt_init(a.loop, &a.o.events, err, sizeof err) < 0) {
        LOG_ERROR(NULL, "--events: %s", err);
        goto out;
    }
    if (a.o.dump_path && !(a.dump = dump_open(a.o.dump_path, err, sizeof err))) {
        LOG_ERROR(NULL, "--dump: %s", err);
        goto out;
    }
    learner_env env = {
        .loop = a.loop,
        .faults = a.faults,
        .dump = a.dump,
        .host = a.o.host,
        .channel = a.o.channel,
        .heartbeat_span_ms = a.o.heartbeat_span_ms,
        .allow_master = a.o.allow_master,
    };
    a.learners = xcalloc((size_t)a.o.count, sizeof *a.learners);
    for (int k = 0; k < a.o.count; k++) {
        char id[OPTS_PREFIX_MAX + 16], label[OPTS_PREFIX_MAX + 16];
        snprintf(id, sizeof id, "%s%d", a.o.id_prefix, a.o.id_base + k);
        if (a.o.label_prefix)
            snprintf(label, sizeof label, "%s%d", a.o.label_prefix, k);
        learner_config lc = {
            .index = k,
            .id = id,
            .label = a.o.label_prefix ? label : NULL,
            .event_id = a.o.events_learner,
            .port = a.o.base_port ? a.o.base_port + k : 0,
            .batch_size = a.o.batch_sizes[k],
            .learn_time_ms = a.o.learn_times_ms[k],
        };
        a.learners[k] = learner_new(&env, &lc, err, sizeof err);
        if (!a.learners[k]) {
            LOG_ERROR(id, "cannot start: %s", err);
            goto out;
        }
        a.nlearners++;
    }
    for (size_t i = 0; i < nnow; i++)
        for (int k = 0; k < a.nlearners; k++)
            if (now[i].learner < 0 || now[i].learner == k)
                learner_apply(a.learners[k], now[i].kind, now[i].ms, true, now[i].id);
    for (int k = 0; k < a.nlearners; k++)
        if (learner_start(a.learners[k], err, sizeof err) < 0) {
            LOG_ERROR(NULL, "%s", err);
            goto out;
        }
    a.control = control_start(a.loop, a.o.host, a.o.control_port, a.learners, a.nlearners, a.faults, err,
                              sizeof err);
    if (!a.control) {
        LOG_ERROR(NULL, "--control-port: %s", err);
        goto out;
    }
    if (ev_signal(a.loop, SIGTERM, on_signal, &a) < 0 || ev_signal(a.loop, SIGINT, on_signal, &a) < 0) {
        LOG_ERROR(NULL, "cannot watch SIGTERM/SIGINT: %s", strerror(errno));
        goto out;
    }
    print_ready(&a);
    LOG_INFO(NULL, "%d learner(s) ready, control API on port %d, %zu fault(s)", a.nlearners,
             control_port(a.control), fault_set_count(a.faults));
    if (ev_run(a.loop) < 0) {
        LOG_ERROR(NULL, "event loop failed: %s", strerror(errno));
        goto out;
    }
    rc = 0;
out:
    free(now);
    app_free(&a);
    return rc;
}
