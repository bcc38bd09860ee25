/* aggregator: entry point: configuration, signals, the ready line. */
#include <malloc.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "agg.h"
#include "evt.h"
#include "ilog.h"

typedef struct {
    ev_loop *loop;
    agg *a;
    int signalled;
} app;

static void on_ready(void *ud, agg *a)
{
    (void)ud;
    char *line = agg_ready_line(a);
    printf("%s\n", line);
    fflush(stdout);
    free(line);
}

static void on_done(void *ud)
{
    app *p = ud;
    ev_stop(p->loop);
}

static void on_signal(ev_loop *loop, int signum, void *data)
{
    app *p = data;
    (void)loop;
    if (p->signalled++) {
        LOG_WARN(NULL, "second signal %d: exiting now", signum);
        ev_stop(p->loop);
        return;
    }
    LOG_INFO(NULL, "signal %d: shutting down", signum);
    EVT_EMIT(shutdown, .signal = signum == SIGTERM ? "SIGTERM" : signum == SIGINT ? "SIGINT" : NULL,
             .reason = "signal");
    agg_shutdown(p->a, 1500, on_done, p);
}

/* The "started" event's config: what shapes behaviour. */
static cJSON *events_config(const agg_config *cfg)
{
    cJSON *c = cJSON_CreateObject();
    cJSON *ls = cJSON_AddArrayToObject(c, "learners");
    for (size_t i = 0; i < cfg->nlearners; i++)
        cJSON_AddItemToArray(ls, cJSON_CreateString(cfg->learners[i].id));
    cJSON_AddNumberToObject(c, "time_scale", cfg->time_scale);
    cJSON_AddNumberToObject(c, "max_retry_ms", (double)cfg->max_retry_ms);
    cJSON_AddNumberToObject(c, "retry_interval_ms", (double)cfg->retry_interval_ms);
    cJSON_AddNumberToObject(c, "heartbeat_tolerance_ms", (double)cfg->heartbeat_tolerance_ms);
    cJSON_AddNumberToObject(c, "task_deadline_ms", (double)cfg->task_deadline_ms);
    cJSON_AddBoolToObject(c, "kubernetes", cfg->k8s_url != NULL);
    return c;
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Says where it runs when DI-orchestrator made its pod (agg_config). */
static void log_orchestrator_pod(const agg_config *cfg)
{
    if (!cfg->orchestrator_pod)
        return;
    bool all = strcmp(cfg->slave_host, "0.0.0.0") == 0 && strcmp(cfg->master_host, "0.0.0.0") == 0;
    LOG_INFO(NULL, "in DI-orchestrator's pod %s/%s (operator %s): %s, ports %d (coordinator) and %d (learners)",
             cfg->k8s_namespace, cfg->k8s_name, cfg->k8s_url,
             all ? "listening on all interfaces" : "listening on the addresses given", cfg->slave_port,
             cfg->master_port);
    if (cfg->advertise)
        LOG_INFO(NULL, "learners are told to report to %s", cfg->advertise);
    else if (cfg->master_port == 0 || strcmp(cfg->master_host, "0.0.0.0") == 0)
        LOG_WARN(NULL, "learners are told a loopback address, which other pods cannot reach: give --advertise URL");
}

/* Learn batches are hundreds of MiB in a few big buffers (the request
 * body, the learners' slices) that come and go every round. glibc gives
 * buffers over 32 MiB their own mmap and unmaps them on free, and trims the
 * heap top beyond its trim threshold: every round would then fault every
 * page of the batch in again (a fifth of the aggregator's time). All from
 * the heap, nothing trimmed on free: the next round reuses the same pages.
 * The peak stays what one round needs; agg_core trims when idle. */
static void keep_freed_memory(void)
{
    /* Sanitizers' allocators refuse (return 0): nothing to tune there. */
    if (!mallopt(M_MMAP_MAX, 0) || !mallopt(M_TRIM_THRESHOLD, INT_MAX))
        LOG_DEBUG(NULL, "this allocator takes no mallopt(): large batches are page-faulted in every round");
}

int main(int argc, char **argv)
{
    agg_config cfg;
    char err[1024];
    agg_config_status st = agg_config_from_args(&cfg, argc, argv, err, sizeof err);
    if (st == AGG_CONFIG_EXIT) {
        agg_config_free(&cfg);
        return 0;
    }
    if (st == AGG_CONFIG_ERROR) {
        fprintf(stderr, "aggregator: %s\n", err);
        agg_config_free(&cfg);
        return 2;
    }
    ilog_init("aggregator", cfg.log_level, cfg.log_format);
    log_orchestrator_pod(&cfg);
    raise_fd_limit();
    keep_freed_memory();
    app p = {0};
    p.loop = ev_loop_new();
    if (!p.loop) {
        fprintf(stderr, "aggregator: cannot create the event loop\n");
        agg_config_free(&cfg);
        return 1;
    }
    ev_signal(p.loop, SIGTERM, on_signal, &p);
    ev_signal(p.loop, SIGINT, on_signal, &p);
    signal(SIGPIPE, SIG_IGN);
    cJSON *ecfg = events_config(&cfg);
    evt_opts eo = {.path = cfg.events_path, .process = "aggregator", .max_bytes = cfg.events_max_bytes,
                   .flush_ms = (unsigned)cfg.events_flush_ms, .each_line = cfg.events_each_line, .config = ecfg};
    int erc = evt_init(p.loop, &eo, err, sizeof err);
    cJSON_Delete(ecfg);
    if (erc != 0) {
        fprintf(stderr, "aggregator: %s\n", err);
        ev_loop_free(p.loop);
        agg_config_free(&cfg);
        return 2;
    }
    p.a = agg_new(p.loop, &cfg, on_ready, &p, err, sizeof err);
    if (!p.a) {
        fprintf(stderr, "aggregator: cannot start: %s\n", err);
        evt_close();
        ev_loop_free(p.loop);
        agg_config_free(&cfg);
        return 1;
    }
    int rc = ev_run(p.loop) == 0 ? 0 : 1;
    agg_free(p.a);
    evt_close();
    ev_loop_free(p.loop);
    agg_config_free(&cfg);
    LOG_INFO(NULL, "stopped");
    return rc;
}
