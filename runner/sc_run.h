/* sc_run: one run of one scenario on a shared ev loop: starts its processes
 * on free loopback ports, applies its actions at their times or on their
 * events, samples the world size, waits for the coordinator, checks the
 * expectations, and stops everything it started. Several runs share one loop
 * (run_scenarios -j N), each in its own run folder and ports.
 *
 * What happens is read from the processes' events files (--events, one per
 * process in the run folder, followed as they grow; docs/events.md), never
 * from their logs: see docs/scenarios.md, "Events".
 *
 * Ownership: a run borrows its scenario, options and procset (they outlive
 * it); its result belongs to the run until sc_run_free().
 * Threading: the loop's thread only. */
#ifndef SC_RUN_H
#define SC_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev.h"
#include "sc_proc.h"
#include "sc_profile.h"
#include "sc_scenario.h"

typedef struct {
    const char *aggregator; /* paths of the executables */
    const char *mock_learner;
    const char *mock_coordinator;
    const char *mock_operator;
    const char *out_dir;       /* run folders go to OUT/runs/<name>-<seed>, or
                                 <name>-<seed>.N if that exists: a run never
                                 overwrites another's evidence */
    const char *replay_prefix; /* "run_scenarios --bin-dir X": the replay
                                  command is this, --seed S and the file */
    unsigned char *ports_used; /* 65536 flags shared by every run of the
                                  runner, so no port is handed out twice */
    bool has_seed;             /* --seed given: replaces every scenario's seed */
    uint64_t seed;
    int attempt;          /* the try of --repeat/--seeds (1, 2, ...); 0: one run */
    bool verbose;         /* print the runner's own log to stderr too */
    bool learner_id_base; /* mock_learner takes --id-base */
    bool json_logs;       /* children log JSON (--log-format json) */
    const sc_profile *profile; /* the aggregator under test; NULL: ours, built in */
    bool agg_events;      /* the aggregator takes --events: the world size,
                             joins and leaves come from its events (else
                             the world size is sampled from /metrics) */
    bool agg_each_line;   /* ... and --events-each-line (else it flushes its
                             events every 20 ms) */
    const char *log_level; /* every process's --log-level; NULL: info */
} sc_run_opts;

/* One checked expectation (or an infrastructure failure). */
typedef struct {
    bool ok;      /* true for a skipped check too: it fails nothing */
    bool skipped; /* not judged: the aggregator under test does not offer
                     what it needs (detail: why); never counts as passed */
    int line;     /* line of the scenario file; 0: none */
    char *what;   /* "task #3 learner_learn_task: status completed" */
    char *detail; /* why it failed (or what was seen) */
} sc_check;

/* Something on the timeline: an injected fault, an exit, an event. */
typedef struct {
    double t_ms; /* since t0 (the aggregator's start) */
    char *label;
    int kind;    /* 0 action, 1 exit, 2 event, 3 join/leave note */
    int learner; /* the learner row it belongs to, -1: all */
} sc_mark;

/* A task on a learner (from its log). */
typedef struct {
    int learner;
    char *task;
    double t0_ms, t1_ms; /* t1 < 0: never reported */
    int outcome;         /* 0 open, 1 completed, 2 failed, 3 lost */
} sc_bar;

typedef struct {
    double t_ms;
    int value;
} sc_sample;

/* The verdict of one scenario run, as JUnit knows them. */
typedef enum {
    SC_PASSED = 0,
    SC_FAILED,  /* an expectation did not hold */
    SC_ERROR,   /* the run could not be carried out, the file is invalid, or
                   the runner was interrupted during the run */
    SC_SKIPPED, /* not run (the runner was interrupted before it started) */
} sc_outcome;

typedef struct {
    char *name;
    char *path; /* scenario file */
    char *description;
    uint64_t seed;
    int attempt; /* as in sc_run_opts */
    bool passed;
    sc_outcome outcome;
    bool timed_out;
    bool interrupted;   /* ended early by sc_run_abort */
    char *error;        /* set when the run could not be carried out (or the
                        file is invalid, or the reason it was skipped) */
    int error_line;     /* line of the file the error is about; 0: none */
    double duration_ms; /* wall time of the whole run */
    double run_ms;      /* t0 to the end of the coordinator (or the run) */
    char *run_dir;      /* NULL: none (not run) */
    char *replay;       /* the command that replays it (or checks it) */
    sc_check *checks;
    size_t nchecks;
    sc_mark *marks;
    size_t nmarks;
    sc_bar *bars;
    size_t nbars;
    sc_sample *samples;
    size_t nsamples;
    int nlearners;
    char **procs; /* names of the processes, for logs */
    char **logs;  /* their stderr log paths */
    size_t nprocs;
    char *coordinator_summary; /* JSON text, or NULL */
} sc_result;

typedef struct sc_run sc_run;
typedef void (*sc_run_done_cb)(void *ud, sc_run *r);

/* Starts the run; done is called once, from the loop, when everything the
 * run started has exited (never from inside sc_run_start). */
sc_run *sc_run_start(ev_loop *loop, sc_procset *set, const sc_scenario *s, const sc_run_opts *opts, sc_run_done_cb done,
                     void *ud);
/* Ends the run early (the runner was interrupted): kills everything at once
 * (SIGKILL); done follows. The result is an SC_ERROR with why. */
void sc_run_abort(sc_run *r, const char *why);
const sc_result *sc_run_result(const sc_run *r);
const sc_scenario *sc_run_scenario(const sc_run *r);
/* Milliseconds since the run started, and a short phase name for progress. */
double sc_run_elapsed_ms(const sc_run *r);
const char *sc_run_phase(const sc_run *r);
void sc_run_free(sc_run *r);

/* A result for a scenario that did not run (outcome SC_ERROR or
 * SC_SKIPPED): name, file, seed, the replay command, and why. The caller
 * owns it (sc_result_free). */
sc_result *sc_result_unrun(const char *name, const char *path, uint64_t seed, const char *replay, sc_outcome outcome,
                           const char *why, int line);
void sc_result_free(sc_result *res);

/* Prometheus text: the value of the sample `name` whose labels include every
 * label of `labels` (an object of strings, or NULL). false if absent. */
bool sc_prom_value(const char *text, const char *name, const cJSON *labels, double *out);

#endif
