/* mc_cli: the command line of mock_coordinator.
 *
 *   mock_coordinator --connect HOST:PORT [--rounds R] [--script FILE]
 *     [--expect-learners N] [--dump FILE]... [--task-deadline-ms MS]
 *     [--port P] [--host H] [--channel N] [--time-scale F] [--seed S]
 *     [--item-size BYTES] [--no-close] [--log-level L]
 *     [--log-format human|json] [--help] [--version]
 * Flags take "--flag VALUE" or "--flag=VALUE".
 *
 * Ownership: the config borrows strings from argv (argv must outlive it)
 * except dumps, an array the config owns (mc_cli_free).
 * Threading: pure functions. */
#ifndef MC_CLI_H
#define MC_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "evt.h"
#include "ilog.h"

#define MC_DUMPS_MAX 256
#define MC_ROUNDS_MAX 1000000L

typedef struct {
    char connect_host[256]; /* without brackets for IPv6 */
    int connect_port;
    const char *target;     /* HOST:PORT as given */
    long rounds;            /* default 3 */
    bool rounds_given;
    const char *script;     /* or NULL */
    long expect_learners;   /* -1: not checked */
    const char **dumps;     /* owned array of borrowed strings */
    size_t ndumps;
    long task_deadline_ms;  /* 0: 30000 x time_scale */
    int port;               /* master port; 0: any */
    const char *host;       /* master address; default 127.0.0.1 */
    int channel;
    double time_scale;      /* default 1 */
    uint64_t seed;          /* default 1 */
    size_t item_size;       /* 0: no padding */
    bool no_close;
    ilog_level log_level;   /* default info */
    ilog_format log_format;
    evt_opts events;        /* --events* (path NULL: none) */
} mc_config;

typedef enum { MC_CLI_RUN, MC_CLI_HELP, MC_CLI_VERSION, MC_CLI_USAGE } mc_cli_action;

/* Parses argv. MC_CLI_USAGE: err names the flag and what is wrong
 * ("--rounds: \"x\" is not an integer from 0 to 1000000"). */
mc_cli_action mc_cli_parse(int argc, char **argv, mc_config *cfg, char *err, size_t errlen);
void mc_cli_free(mc_config *cfg);
void mc_cli_usage(FILE *out);

/* Timings scaled by time_scale (at least 1 ms). */
long mc_scaled_ms(const mc_config *cfg, long base_ms);

#endif
