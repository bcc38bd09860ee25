/* mock_coordinator: a DI-engine coordinator stand-in that drives an
 * aggregator (or one learner) through a training run and checks it. See
 * mc_run.h for the run, mc_script.h for scripts, mc_cli.h for flags. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "ilog.h"
#include "mc_cli.h"
#include "mc_run.h"
#include "mc_script.h"

int main(int argc, char **argv)
{
    mc_config cfg;
    char err[1024];
    switch (mc_cli_parse(argc, argv, &cfg, err, sizeof err)) {
    case MC_CLI_HELP:
        mc_cli_usage(stdout);
        mc_cli_free(&cfg);
        return 0;
    case MC_CLI_VERSION:
        printf("mock_coordinator %s\n", DILEARN_VERSION);
        mc_cli_free(&cfg);
        return 0;
    case MC_CLI_USAGE:
        fprintf(stderr, "mock_coordinator: %s\n(see mock_coordinator --help)\n", err);
        mc_cli_free(&cfg);
        return 2;
    case MC_CLI_RUN:
        break;
    }
    ilog_init("mock_coordinator", cfg.log_level, cfg.log_format);
    /* A peer that closes mid-write must not kill us. */
    signal(SIGPIPE, SIG_IGN);
    mcs_script script;
    if (cfg.script) {
        if (mcs_load(cfg.script, &script, err, sizeof err) < 0) {
            fprintf(stderr, "mock_coordinator: --script %s\n", err);
            mc_cli_free(&cfg);
            return 2;
        }
    } else {
        mcs_default(&script, cfg.rounds, !cfg.no_close);
    }
    int code = mc_run_main(&cfg, &script, cfg.script != NULL, stdout);
    mcs_free(&script);
    mc_cli_free(&cfg);
    return code;
}
