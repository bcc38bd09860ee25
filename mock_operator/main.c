/* mock_operator: a stand-in for DI-orchestrator's v1alpha1 server, with a
 * control API for tests (see mo_api.h, mo_control.h, mo_server.h). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ev.h"
#include "evt.h"
#include "ilog.h"
#include "mo_cli.h"
#include "mo_registry.h"
#include "mo_server.h"

static void on_signal(ev_loop *loop, int signum, void *data)
{
    (void)data;
    LOG_INFO(NULL, "%s received, stopping", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    EVT_EMIT(shutdown, .signal = signum == SIGTERM ? "SIGTERM" : "SIGINT", .reason = "a signal");
    ev_stop(loop);
}

static uint64_t random_seed(void)
{
    uint64_t seed = 0;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed)
        seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    return seed;
}

int main(int argc, char **argv)
{
    mo_options o;
    char err[1024];
    int rc = mo_cli_parse(argc, argv, &o, stdout, err, sizeof err);
    if (rc == MO_CLI_EXIT_OK)
        return 0;
    if (rc == MO_CLI_USAGE) {
        fprintf(stderr, "mock_operator: %s\n", err);
        return 2;
    }
    ilog_init("mock_operator", o.log_level, o.log_format);

    mo_registry *reg = mo_registry_new(o.seed_given ? o.seed : random_seed());
    if (mo_cli_apply(&o, reg, err, sizeof err) < 0) {
        fprintf(stderr, "mock_operator: %s\n", err);
        mo_registry_free(reg);
        mo_cli_release(&o);
        return 2;
    }
    ev_loop *loop = ev_loop_new();
    if (!loop) {
        LOG_ERROR(NULL, "cannot create the event loop: %s", strerror(errno));
        mo_registry_free(reg);
        mo_cli_release(&o);
        return 1;
    }
    if (ev_signal(loop, SIGTERM, on_signal, NULL) < 0 ||
        ev_signal(loop, SIGINT, on_signal, NULL) < 0) {
        LOG_ERROR(NULL, "cannot watch SIGTERM/SIGINT: %s", strerror(errno));
        mo_registry_free(reg);
        ev_loop_free(loop);
        mo_cli_release(&o);
        return 1;
    }
    o.events.process = "mock_operator";
    if (evt_init(loop, &o.events, err, sizeof err) < 0) {
        LOG_ERROR(NULL, "--events: %s", err);
        mo_registry_free(reg);
        ev_loop_free(loop);
        mo_cli_release(&o);
        return 1;
    }
    mo_server_config cfg = {.host = o.host,
                            .port = o.port,
                            .control_port = o.control_port,
                            .journal_limit = o.journal_limit,
                            .on_failed = o.on_failed};
    /* Takes the registry over, also on failure. */
    mo_server *srv = mo_server_new(loop, &cfg, reg, err, sizeof err);
    if (!srv) {
        LOG_ERROR(NULL, "cannot start: %s", err);
        evt_close();
        ev_loop_free(loop);
        mo_cli_release(&o);
        return 1;
    }
    LOG_INFO(NULL, "listening on %s: API port %d, control port %d; on_failed %s", o.host,
             mo_server_port(srv), mo_server_control_port(srv), mo_failed_policy_name(o.on_failed));
    printf("{\"ready\": true, \"port\": %d, \"control_port\": %d}\n", mo_server_port(srv),
           mo_server_control_port(srv));
    fflush(stdout);

    rc = ev_run(loop) == 0 ? 0 : 1;
    if (rc)
        LOG_ERROR(NULL, "the event loop failed: %s", strerror(errno));
    mo_server_free(srv);
    evt_close();
    ev_loop_free(loop);
    mo_cli_release(&o);
    return rc;
}
