/* scenario_from_events: an aggregator's events file (--events) to a scenario
 * that replays the incident (docs/scenarios.md, "Reproduce a production
 * failure"); with --outcomes, what the run showed, to compare two runs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "sfe.h"
#include "util.h"
#include "xalloc.h"

static const char usage[] =
    "usage: scenario_from_events [options] EVENTS_FILE...\n"
    "\n"
    "Reads an aggregator's events file (aggregator --events FILE; give a rotated\n"
    "FILE.1 too, in any order) and writes a scenario for run_scenarios that\n"
    "reproduces the incident's shape: the learners and when they joined, the\n"
    "coordinator's tasks in order with the gaps between them, each learner's\n"
    "failure as a fault at the task and count where it happened, the operator's\n"
    "list changes and errors, timed by --time-scale. Lines of other processes\n"
    "(mock learners, the mock operator) are skipped. The scenario's \"comment\"\n"
    "says which files it came from, what was inferred and what could not be.\n"
    "\n"
    "Options:\n"
    "  -o, --output FILE     write the scenario there (default: stdout)\n"
    "  --time-scale F        the scenario's time_scale (0 < F <= 10; default: the\n"
    "                        source's when below 1, else 0.01: production seconds\n"
    "                        become scenario tens of milliseconds)\n"
    "  --expect MODE         observed (default): expect what the aggregator did\n"
    "                        there, so the scenario passes while it behaves the same;\n"
    "                        correct: expect what a correct aggregator must do (every\n"
    "                        task within its deadline, a lost learner named, exactly-\n"
    "                        once delivery), so the incident becomes a regression test\n"
    "  --seed N              the scenario's seed (default 1)\n"
    "  --outcomes            print what the run showed instead (task statuses in\n"
    "                        order, learners that left and why, learners reported\n"
    "                        failed, the final world size), to compare two runs\n"
    "  --help, --version\n"
    "\n"
    "Exit status: 0 written; 2 bad usage or an input it cannot trust (a cut-short\n"
    "line, a newer schema, two runs mixed, no task), with FILE:LINE; 1 the output\n"
    "could not be written.\n";

int main(int argc, char **argv)
{
    const char *out = NULL;
    sfe_opts o = {.seed = 1};
    bool outcomes = false;
    char **files = xcalloc((size_t)argc, sizeof *files);
    size_t nfiles = 0;
    for (int i = 1; i < argc && argv[i]; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(usage, stdout);
            free(files);
            return 0;
        } else if (strcmp(a, "--version") == 0) {
            printf("scenario_from_events %s\n", DILEARN_VERSION);
            free(files);
            return 0;
        } else if ((strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) && v) {
            out = v;
            i++;
        } else if (strcmp(a, "--time-scale") == 0 && v) {
            char *end;
            errno = 0;
            o.time_scale = strtod(v, &end);
            if (errno || *end || !(o.time_scale > 0 && o.time_scale <= 10)) {
                fprintf(stderr, "scenario_from_events: --time-scale %s: must be a number in (0, 10]\n", v);
                free(files);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--expect") == 0 && v) {
            if (strcmp(v, "observed") == 0)
                o.expect = SFE_EXPECT_OBSERVED;
            else if (strcmp(v, "correct") == 0)
                o.expect = SFE_EXPECT_CORRECT;
            else {
                fprintf(stderr, "scenario_from_events: --expect %s: must be observed or correct\n", v);
                free(files);
                return 2;
            }
            i++;
        } else if (strcmp(a, "--seed") == 0 && v) {
            uint64_t s;
            if (!util_parse_u64(v, &s) || s > 0xffffffffu) {
                fprintf(stderr, "scenario_from_events: --seed %s: must be an integer from 0 to 4294967295\n", v);
                free(files);
                return 2;
            }
            o.seed = (unsigned long)s;
            i++;
        } else if (strcmp(a, "--outcomes") == 0) {
            outcomes = true;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "scenario_from_events: unknown option %s%s\n%s", a, v ? "" : " (or its value is missing)",
                    usage);
            free(files);
            return 2;
        } else {
            files[nfiles++] = argv[i];
        }
    }
    if (!nfiles) {
        fprintf(stderr, "scenario_from_events: no events file given\n%s", usage);
        free(files);
        return 2;
    }
    sfe_log log = {0};
    char err[1024];
    int rc = 0;
    for (size_t i = 0; i < nfiles && rc == 0; i++)
        rc = sfe_load(&log, files[i], err, sizeof err);
    cJSON *doc = NULL;
    if (rc == 0) {
        if (outcomes) {
            doc = sfe_check(&log, err, sizeof err) == 0 ? sfe_outcomes(&log) : NULL;
        } else {
            o.source = nfiles == 1 ? files[0] : "several events files";
            doc = sfe_scenario(&log, &o, err, sizeof err);
        }
    }
    sfe_free(&log);
    free(files);
    if (!doc) {
        fprintf(stderr, "scenario_from_events: %s\n", err);
        return 2;
    }
    char *text = cJSON_Print(doc);
    cJSON_Delete(doc);
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) {
        fprintf(stderr, "scenario_from_events: cannot write %s: %s\n", out, strerror(errno));
        free(text);
        return 1;
    }
    int bad = fprintf(f, "%s\n", text) < 0;
    if (out)
        bad |= fclose(f) != 0;
    else
        bad |= fflush(stdout) != 0;
    free(text);
    if (bad) {
        fprintf(stderr, "scenario_from_events: writing %s failed: %s\n", out ? out : "stdout", strerror(errno));
        return 1;
    }
    if (out)
        fprintf(stderr, "scenario_from_events: wrote %s\n", out);
    return 0;
}
