/* mo_cli: the mock operator's command line.
 *
 * Ownership: mo_options points into argv (valid for the process) and owns
 * its lists; release with mo_cli_release(). Threading: start-up only. */
#ifndef MO_CLI_H
#define MO_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "evt.h"
#include "ilog.h"
#include "mo_api.h"
#include "mo_registry.h"

/* One --learners / --collectors NS/NAME=ADDR,ADDR... */
typedef struct {
    mo_kind kind;
    char *ns;
    char *name;
    char **addrs;
    size_t naddrs;
} mo_cli_list;

typedef struct {
    const char *host;
    int port;
    int control_port;
    mo_cli_list *lists;
    size_t nlists;
    mo_failed_policy on_failed;
    uint64_t seed;
    bool seed_given;
    size_t journal_limit;
    ilog_level log_level;
    ilog_format log_format;
    evt_opts events; /* --events* (path NULL: none) */
} mo_options;

enum { MO_CLI_RUN = 0, MO_CLI_EXIT_OK = 1, MO_CLI_USAGE = 2 };

/* Parses argv. MO_CLI_RUN: run with *o; MO_CLI_EXIT_OK: --help or --version
 * was printed to out; MO_CLI_USAGE: err names the flag and what is wrong. */
int mo_cli_parse(int argc, char **argv, mo_options *o, FILE *out, char *err, size_t errlen);
void mo_cli_release(mo_options *o);
void mo_cli_usage(FILE *out);
/* Puts the lists into the registry. Returns 0 or -1 (err). */
int mo_cli_apply(const mo_options *o, mo_registry *reg, char *err, size_t errlen);

#endif
