/* sfe: from an aggregator's events (interaction/evt.h) to a scenario that
 * reproduces the incident's shape (docs/scenarios.md, "Reproduce a
 * production failure"), and the outcomes of a run, for comparing two.
 *
 * sfe_load reads the files in order (a rotated FILE.1 before FILE); every
 * line must pass evt_parse_line, and every line must belong to one run of
 * one aggregator: a cut-short line, a newer schema, a second run or a file
 * with no task is an error naming the file and line, never a scenario that
 * silently drops what it could not read.
 *
 * Ownership: an sfe_log owns everything it holds (sfe_free); the cJSON
 * trees returned are the caller's (cJSON_Delete). Threading: no shared
 * state. */
#ifndef SFE_H
#define SFE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "evt.h"

typedef struct {
    evt_record rec;
    const char *file; /* borrowed from the sfe_log */
    long line;
} sfe_line;

typedef struct {
    sfe_line *lines;
    size_t n, cap;
    char **files;
    size_t nfiles;
    char *run; /* the run's id */
} sfe_log;

/* Appends the aggregator events of path (lines of other processes, such as
 * a mock's, are skipped). 0, or -1 with "FILE:LINE: what" in err. */
int sfe_load(sfe_log *log, const char *path, char *err, size_t errlen);
/* Checks what a whole log must hold (a task at least). 0 or -1 with err. */
int sfe_check(const sfe_log *log, char *err, size_t errlen);
void sfe_free(sfe_log *log);

typedef enum { SFE_EXPECT_OBSERVED, SFE_EXPECT_CORRECT } sfe_expect_mode;

typedef struct {
    double time_scale;   /* of the scenario; 0: the source's if below 1, else 0.01 */
    sfe_expect_mode expect;
    const char *source;  /* how to name the input in the comment */
    unsigned long seed;
} sfe_opts;

/* The scenario, or NULL with err. */
cJSON *sfe_scenario(const sfe_log *log, const sfe_opts *o, char *err, size_t errlen);

/* What a run showed, to compare two runs: {"tasks": [["name", "status"],
 * ...] in order, "left": [["learner", "cause"], ...] in order, "failed":
 * [learners reported failed], "final_world": N}. */
cJSON *sfe_outcomes(const sfe_log *log);

#endif
