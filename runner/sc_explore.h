/* sc_explore: run_scenarios --explore. From a base scenario (its learners,
 * rounds, batch size, time scale, Kubernetes mode), each run draws a fault
 * schedule from the seed (learner faults from mock_learner's schema, process
 * actions kill/stop/restart, in Kubernetes mode operator faults and list
 * changes; each on a learner's nth task, the coordinator's nth outcome or a
 * time), writes it as a plain scenario file whose expectations are the
 * invariants (docs/scenarios.md, "Explore"), validates it with
 * sc_scenario_parse and runs it. A run that breaks an invariant is confirmed
 * by running it again, then shrunk: smaller schedules (fewer faults, fewer
 * learners, fewer rounds, earlier counts, simpler kinds) are tried, each up to
 * shrink_tries times, and kept while they break the same invariant, within
 * the shrink budget. The smallest is written as minimal-<invariant>.json
 * (and the first as minimal.json) with the replay command.
 *
 * Ownership: everything given is borrowed. Threading: the loop's thread;
 * sc_explore_run() runs the loop itself until the exploration is over. */
#ifndef SC_EXPLORE_H
#define SC_EXPLORE_H

#include <stdbool.h>
#include <stdint.h>

#include "ev.h"
#include "sc_run.h"
#include "sc_scenario.h"

typedef struct {
    const char *base_path;   /* the base scenario file */
    int runs;                /* how many schedules to draw */
    uint64_t seed;           /* the exploration's seed (run i: a seed from it) */
    int jobs;                /* runs side by side */
    double max_seconds;      /* no run starts after this (0: no limit) */
    double shrink_seconds;   /* the shrinking budget of each violation */
    int shrink_tries;        /* runs of each candidate (and of the confirmation) */
    bool first;              /* stop drawing at the first confirmed violation */
    bool quiet;
    const char *junit, *html; /* reports, or NULL */
} sc_explore_opts;

/* Runs the exploration with the runner's options (executables, out_dir,
 * replay prefix, ports). Returns the exit status: 0 no violation, 1 a
 * violation (or the reports could not be written), 2 the base or a drawn
 * schedule is invalid, 128 + signal when interrupted. */
int sc_explore_run(ev_loop *loop, const sc_run_opts *run_opts, const sc_scenario *base, const sc_explore_opts *o);

/* The schedule drawing and rendering, exposed for tests: the scenario text of
 * run `index` of an exploration with `seed` from base (heap; NULL and *err
 * set if base cannot be explored). */
char *sc_explore_draw_text(const sc_scenario *base, uint64_t seed, int index, char **err);

#endif
