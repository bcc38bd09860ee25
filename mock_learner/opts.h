/* opts: the mock learner's command line, parsed and checked before anything
 * starts, and its --help text (every flag and every fault kind, from the
 * fault table).
 *
 * Ownership: the parsed options point into argv (strings) or own heap
 * arrays freed by opts_free(). Threading: start-up only. */
#ifndef ML_OPTS_H
#define ML_OPTS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "evt.h"
#include "ilog.h"

#define OPTS_MAX_COUNT 10000
#define OPTS_MAX_BATCH 1000000
#define OPTS_PREFIX_MAX 64
#define OPTS_MAX_ID_BASE 1000000000

typedef struct {
    int count;
    int base_port;            /* 0: every learner on a free port */
    const char *host;         /* "127.0.0.1" */
    int *batch_sizes;         /* count entries */
    long *learn_times_ms;     /* count entries */
    int control_port;         /* 0: a free port */
    int channel;
    long heartbeat_span_ms;   /* 3000 */
    const char *id_prefix;    /* "learner" */
    int id_base;              /* learner k is <id_prefix><id_base + k> */
    const char *label_prefix; /* learner k's label is <label_prefix>k; NULL: its id */
    evt_opts events;          /* --events* (path NULL: none) */
    const char *events_learner; /* the events' "learner": {id} and {port}
                                   replaced; NULL: the id */
    const char *dump_path;    /* NULL: no dump */
    struct slave_allow *allow_master; /* --allow-master (owned); NULL: anyone */
    uint64_t seed;
    const char **faults;      /* --fault texts, in order */
    size_t nfaults;
    ilog_level log_level;
    ilog_format log_format;
    bool help, version;
} opts;

/* Parses argv. Returns 0, or -1 with a message naming the flag and what is
 * wrong in err (usage error: exit 2). Faults are only collected here; they
 * are checked against the learners by the caller. */
int opts_parse(opts *o, int argc, char **argv, char *err, size_t errlen);
void opts_free(opts *o);
void opts_help(FILE *out);

#endif
