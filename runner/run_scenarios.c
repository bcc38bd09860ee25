/* run_scenarios: the scenario runner's command line. Reads scenario files
 * (docs/scenarios.md), validates them all before starting anything, runs
 * them (-j N side by side, on one event loop), prints a live progress line
 * per scenario and a summary table, and writes JUnit and HTML reports. */
#include <errno.h>
#include <dirent.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ev.h"
#include "ilog.h"
#include "sc_explore.h"
#include "sc_proc.h"
#include "sc_report.h"
#include "sc_run.h"
#include "sc_scenario.h"
#include "util.h"
#include "xalloc.h"

static void usage(FILE *out)
{
    fputs("usage: run_scenarios [options] PATH...\n"
          "Runs scenario files (docs/scenarios.md) against the aggregator and the mocks.\n"
          "PATH: a scenario file, or a folder (every *.json in it, by name).\n"
          "\n"
          "  -j, --jobs N            run N scenarios side by side (default 1)\n"
          "      --seed S            replace every scenario's seed with S\n"
          "      --seeds A..B        run every scenario once with each seed from A to B\n"
          "      --repeat N          run every scenario (with each seed) N times; with\n"
          "                          --seeds or --repeat the summary gives each scenario's\n"
          "                          pass rate\n"
          "      --filter TEXT       only scenarios whose name contains TEXT (repeatable)\n"
          "      --out DIR           run folders go to DIR/runs/<scenario>-<seed>/, or\n"
          "                          <scenario>-<seed>.N when that exists (default: out)\n"
          "      --junit FILE        write a JUnit XML report (also when a file is invalid\n"
          "                          or the run is interrupted; an old FILE is removed first)\n"
          "      --html FILE         write a self-contained HTML report\n"
          "      --bin-dir DIR       where aggregator, mock_learner, mock_coordinator and\n"
          "                          mock_operator are (default: the build tree around run_scenarios)\n"
          "      --aggregator PATH   this aggregator executable (likewise --mock-learner,\n"
          "                          --mock-coordinator, --mock-operator)\n"
          "      --log-level L       every process logs at L (debug, info, warn, error, off);\n"
          "                          the runner reads their events, never their logs\n"
          "      --aggregator-profile FILE\n"
          "                          run the aggregator under test as FILE says (its command,\n"
          "                          config, environment, readiness and what it offers;\n"
          "                          docs/scenarios.md, \"Aggregator profiles\"; profiles/);\n"
          "                          expectations that need what it does not offer are\n"
          "                          reported as skipped. Default: ours, built in\n"
          "      --check             validate the scenarios, run nothing\n"
          "      --list              list the scenarios with their descriptions\n"
          "  -v, --verbose           the runner's own log on stderr as it runs\n"
          "  -q, --quiet             no live progress line\n"
          "      --explore BASE      draw seeded fault schedules from the base scenario BASE, run\n"
          "                          them against invariants, shrink a violation to a minimal.json\n"
          "                          (docs/scenarios.md, \"Explore\"; -j, --seed, --out, --junit,\n"
          "                          --html and the executables apply); with:\n"
          "      --runs N            schedules to draw (default 50)\n"
          "      --max-seconds T     start no run after T seconds (default: no limit)\n"
          "      --shrink-tries K    runs of each shrink candidate and of the confirmation (default 2)\n"
          "      --shrink-seconds T  the shrinking budget of each violation (default 300)\n"
          "      --first             stop drawing at the first violation a second run confirms\n"
          "      --help, --version\n"
          "\n"
          "Exit status: 0 every scenario passed (--explore: no violation); 1 a scenario\n"
          "failed (--explore: a violation); 2 a usage error or an\n"
          "invalid scenario file (each error as FILE:LINE: what is wrong); 128 + N after\n"
          "signal N (SIGINT, SIGTERM, SIGHUP): every process is killed at once, the\n"
          "scenarios not yet started are reported as skipped, and the reports are written.\n"
          "A second signal exits at once, without reports.\n"
          "A failed scenario prints the command that replays it; every process's log is in\n"
          "its run folder.\n",
          out);
}

typedef struct {
    sc_scenario *s; /* borrowed */
    bool has_seed;  /* seed replaces the scenario's */
    uint64_t seed;
    int attempt; /* 1.. with --repeat or --seeds; 0: one run */
    sc_run *run;
    sc_result *unrun; /* not started (the runner was interrupted): owned */
    int state;        /* 0 queued, 1 running, 2 done, 3 not run: its profile
                         lacks a variable (skip_why) */
    char *skip_why;
} job;

typedef struct {
    ev_loop *loop;
    sc_procset *set;
    sc_run_opts opts;
    job *jobs;
    size_t njobs, next, running, done, failed;
    size_t *queue; /* start order */
    int max_jobs;
    bool tty, quiet;
    ev_timer *progress;
    int signalled;
    uint64_t start_ms;
} app;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Expands PATH arguments into files. */
static int collect(const char *path, char ***files, size_t *n)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "run_scenarios: %s: %s\n", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        *files = xrealloc(*files, (*n + 1) * sizeof **files);
        (*files)[(*n)++] = xstrdup(path);
        return 0;
    }
    DIR *d = opendir(path);
    if (!d) {
        fprintf(stderr, "run_scenarios: %s: %s\n", path, strerror(errno));
        return -1;
    }
    char **found = NULL;
    size_t nf = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l > 5 && strcmp(e->d_name + l - 5, ".json") == 0 && e->d_name[0] != '.') {
            found = xrealloc(found, (nf + 1) * sizeof *found);
            size_t pl = strlen(path);
            found[nf++] = xasprintf("%s%s%s", path, pl && path[pl - 1] == '/' ? "" : "/", e->d_name);
        }
    }
    closedir(d);
    if (nf > 1) /* qsort's array must not be NULL, even empty */
        qsort(found, nf, sizeof *found, cmp_str);
    for (size_t i = 0; i < nf; i++) {
        *files = xrealloc(*files, (*n + 1) * sizeof **files);
        (*files)[(*n)++] = found[i];
    }
    free(found);
    if (nf == 0)
        fprintf(stderr, "run_scenarios: warning: no *.json in %s\n", path);
    return 0;
}

static char *find_exe(const char *bin_dir, const char *name)
{
    char *c[3];
    c[0] = xasprintf("%s/%s", bin_dir, name);
    c[1] = xasprintf("%s/../%s/%s", bin_dir, name, name);
    c[2] = xasprintf("%s/%s/%s", bin_dir, name, name);
    char *found = NULL;
    for (int i = 0; i < 3; i++) {
        if (!found && access(c[i], X_OK) == 0)
            found = realpath(c[i], NULL);
        free(c[i]);
    }
    return found;
}

/* Whether an executable's --help mentions a flag (feature detection). */
static bool help_mentions(const char *exe, const char *flag)
{
    if (strchr(exe, '\''))
        return false; /* it would end the quoting below */
    char *cmd = xasprintf("'%s' --help 2>&1", exe);
    FILE *p = popen(cmd, "r"); // NOLINT(cert-env33-c): our own executable, quoted
    free(cmd);
    if (!p)
        return false;
    char buf[4096];
    bool found = false;
    while (fgets(buf, sizeof buf, p))
        if (strstr(buf, flag))
            found = true;
    pclose(p);
    return found;
}

static void start_next(app *a);

static void clear_progress(app *a)
{
    if (a->tty && !a->quiet) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}

static void draw_progress(app *a)
{
    if (!a->tty || a->quiet)
        return;
    char line[512];
    size_t l = (size_t)snprintf(line, sizeof line, "[%zu/%zu] %.1fs", a->done, a->njobs,
                                (double)(ev_now_ms() - a->start_ms) / 1000.0);
    for (size_t i = 0; i < a->njobs && l < 200; i++)
        if (a->jobs[i].state == 1)
            l += (size_t)snprintf(line + l, sizeof line - l, "  %s: %s %.1fs", a->jobs[i].s->name,
                                  sc_run_phase(a->jobs[i].run), sc_run_elapsed_ms(a->jobs[i].run) / 1000.0);
    fprintf(stderr, "\r\033[K%.150s", line);
    fflush(stderr);
}

static void on_progress(ev_loop *loop, void *data)
{
    app *a = data;
    a->progress = NULL;
    draw_progress(a);
    if (a->running)
        a->progress = ev_timer_start(loop, 200, on_progress, a);
}

/* The loop ends when nothing runs and nothing more will start. */
static void maybe_stop(app *a)
{
    if (a->running == 0 && (a->next >= a->njobs || a->signalled))
        ev_stop(a->loop);
}

static void on_run_done(void *ud, sc_run *run)
{
    app *a = ud;
    job *j = NULL;
    for (size_t i = 0; i < a->njobs; i++)
        if (a->jobs[i].run == run)
            j = &a->jobs[i];
    if (!j)
        return;
    j->state = 2;
    a->running--;
    a->done++;
    const sc_result *r = sc_run_result(run);
    char checks[48];
    sc_report_checks_text(checks, sizeof checks, r);
    if (!r->passed)
        a->failed++;
    clear_progress(a);
    printf("[%*zu/%zu] %-5s %-32s %6.2f s  seed %-6llu %s checks\n", a->njobs >= 10 ? 2 : 1, a->done, a->njobs,
           sc_outcome_word(r->outcome), r->name, r->duration_ms / 1000.0, (unsigned long long)r->seed, checks);
    if (!r->passed)
        sc_report_failure(stdout, r);
    sc_report_skipped(stdout, r);
    fflush(stdout);
    draw_progress(a);
    start_next(a);
    maybe_stop(a);
}

static void start_next(app *a)
{
    while (a->running < (size_t)a->max_jobs && a->next < a->njobs && !a->signalled) {
        job *j = &a->jobs[a->queue[a->next++]];
        sc_run_opts o = a->opts;
        if (!o.profile) /* --aggregator-profile overrides the scenario's */
            o.profile = j->s->profile;
        const char *missing = sc_profile_missing_env(o.profile);
        if (missing) {
            j->state = 3;
            j->skip_why = xasprintf("not run: %s", missing);
            a->done++;
            a->failed++; /* never green while testing nothing */
            clear_progress(a);
            printf("[%*zu/%zu] %-5s %-32s %s\n", a->njobs >= 10 ? 2 : 1, a->done, a->njobs, "SKIP", j->s->name,
                   j->skip_why);
            continue;
        }
        j->state = 1;
        a->running++;
        if (j->has_seed) {
            o.has_seed = true;
            o.seed = j->seed;
        }
        o.attempt = j->attempt;
        j->run = sc_run_start(a->loop, a->set, j->s, &o, on_run_done, a);
    }
    if (a->running && !a->progress && a->tty && !a->quiet)
        a->progress = ev_timer_start(a->loop, 200, on_progress, a);
}

static void on_sigchld(ev_loop *loop, int signum, void *data)
{
    app *a = data;
    sc_procset_reap(a->set);
}

static const char *signame(int sig)
{
    static char buf[32];
    const char *n = sigabbrev_np(sig);
    if (n)
        snprintf(buf, sizeof buf, "SIG%s", n);
    else
        snprintf(buf, sizeof buf, "signal %d", sig);
    return buf;
}

static void on_sigterm(ev_loop *loop, int signum, void *data)
{
    app *a = data;
    if (a->signalled) {
        /* a second signal: kill everything now and leave */
        sc_procset_signal_all(a->set, SIGKILL);
        _exit(128 + signum);
    }
    a->signalled = signum;
    clear_progress(a);
    size_t queued = a->njobs - a->next;
    fprintf(stderr, "run_scenarios: %s: killing %zu running scenario%s; %zu not started\n", signame(signum), a->running,
            a->running == 1 ? "" : "s", queued);
    char why[128];
    snprintf(why, sizeof why, "the runner was interrupted by %s after %.1f s", signame(signum),
             (double)(ev_now_ms() - a->start_ms) / 1000.0);
    for (size_t i = 0; i < a->njobs; i++)
        if (a->jobs[i].state == 1)
            sc_run_abort(a->jobs[i].run, why);
    maybe_stop(a);
}

/* Longest first: big scenarios start early so -j N ends sooner. */
static long weight(const sc_scenario *s)
{
    return (long)s->nlearners * 20 + s->min_run_ms + s->timeout_ms / 50;
}

/* The command line. */
typedef struct {
    int max_jobs;
    const char *bin_dir, *out_dir, *junit, *html, *profile, *log_level;
    const char *exe_over[4];
    bool check_only, list, verbose, quiet, has_seed, has_seeds;
    uint64_t seed, seed_lo, seed_hi;
    int repeat;
    char **filters;
    size_t nfilters;
    char **paths;
    size_t npaths;
    const char *explore; /* --explore BASE */
    sc_explore_opts xo;
} cli;

static const char *const exe_names[4] = {"aggregator", "mock_learner", "mock_coordinator", "mock_operator"};
static const char *const exe_flags[4] = {"--aggregator", "--mock-learner", "--mock-coordinator", "--mock-operator"};

#define SEEDS_MAX 100000 /* runs of one scenario at most (--seeds times --repeat) */

/* "A..B" into lo and hi. */
static bool parse_seed_range(const char *v, uint64_t *lo, uint64_t *hi)
{
    const char *dots = strstr(v, "..");
    if (!dots || dots == v)
        return false;
    char a[32];
    if ((size_t)(dots - v) >= sizeof a)
        return false;
    memcpy(a, v, (size_t)(dots - v));
    a[dots - v] = '\0';
    return util_parse_u64(a, lo) && util_parse_u64(dots + 2, hi) && *lo <= *hi;
}

/* One flag that takes a value (val); 0 handled, 2 a usage error. */
static int value_flag(cli *c, const char *f, const char *val, bool *matched)
{
    *matched = true;
    int64_t n;
    if (strcmp(f, "-j") == 0 || strcmp(f, "--jobs") == 0) {
        if (!util_parse_i64(val, 1, 64, &n)) {
            fprintf(stderr, "run_scenarios: --jobs: \"%s\" is not a number from 1 to 64\n", val);
            return 2;
        }
        c->max_jobs = (int)n;
    } else if (strcmp(f, "--seed") == 0) {
        if (!util_parse_u64(val, &c->seed)) {
            fprintf(stderr, "run_scenarios: --seed: \"%s\" is not an integer >= 0\n", val);
            return 2;
        }
        c->has_seed = true;
    } else if (strcmp(f, "--seeds") == 0) {
        if (!parse_seed_range(val, &c->seed_lo, &c->seed_hi)) {
            fprintf(stderr, "run_scenarios: --seeds: \"%s\" is not a range A..B of integers with A <= B\n", val);
            return 2;
        }
        c->has_seeds = true;
    } else if (strcmp(f, "--repeat") == 0) {
        if (!util_parse_i64(val, 1, SEEDS_MAX, &n)) {
            fprintf(stderr, "run_scenarios: --repeat: \"%s\" is not a number from 1 to %d\n", val, SEEDS_MAX);
            return 2;
        }
        c->repeat = (int)n;
    } else if (strcmp(f, "--filter") == 0) {
        c->filters = xrealloc(c->filters, (c->nfilters + 1) * sizeof *c->filters);
        c->filters[c->nfilters++] = (char *)val;
    } else if (strcmp(f, "--out") == 0) {
        c->out_dir = val;
    } else if (strcmp(f, "--junit") == 0) {
        c->junit = val;
    } else if (strcmp(f, "--html") == 0) {
        c->html = val;
    } else if (strcmp(f, "--bin-dir") == 0) {
        c->bin_dir = val;
    } else if (strcmp(f, "--explore") == 0) {
        c->explore = val;
    } else if (strcmp(f, "--runs") == 0 || strcmp(f, "--shrink-tries") == 0) {
        bool runs = strcmp(f, "--runs") == 0;
        if (!util_parse_i64(val, 1, runs ? 100000 : 16, &n)) {
            fprintf(stderr, "run_scenarios: %s: \"%s\" is not a number from 1 to %d\n", f, val, runs ? 100000 : 16);
            return 2;
        }
        *(runs ? &c->xo.runs : &c->xo.shrink_tries) = (int)n;
    } else if (strcmp(f, "--max-seconds") == 0 || strcmp(f, "--shrink-seconds") == 0) {
        if (!util_parse_i64(val, 0, 86400, &n)) {
            fprintf(stderr, "run_scenarios: %s: \"%s\" is not a number of seconds from 0 to 86400\n", f, val);
            return 2;
        }
        *(strcmp(f, "--max-seconds") == 0 ? &c->xo.max_seconds : &c->xo.shrink_seconds) = (double)n;
    } else if (strcmp(f, "--log-level") == 0) {
        ilog_level lv;
        if (!ilog_parse_level(val, &lv)) {
            fprintf(stderr, "run_scenarios: --log-level: \"%s\" is not debug, info, warn, error or off\n", val);
            return 2;
        }
        c->log_level = val;
    } else if (strcmp(f, "--aggregator-profile") == 0) {
        c->profile = val;
    } else {
        *matched = false;
        for (int k = 0; k < 4; k++)
            if (strcmp(f, exe_flags[k]) == 0) {
                c->exe_over[k] = val;
                *matched = true;
            }
    }
    return 0;
}

static bool takes_value(const char *f)
{
    static const char *const v[] = {"-j",          "--jobs",           "--seed",        "--seeds",
                                    "--repeat",    "--filter",         "--out",         "--junit",
                                    "--html",      "--bin-dir",        "--aggregator-profile", "--log-level",
                                    "--explore",   "--runs",           "--shrink-tries", "--max-seconds",
                                    "--shrink-seconds"};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (strcmp(f, v[i]) == 0)
            return true;
    for (int k = 0; k < 4; k++)
        if (strcmp(f, exe_flags[k]) == 0)
            return true;
    return false;
}

/* -1: go on; otherwise the exit status (--help, --version, a usage error). */
static int parse_args(int argc, char **argv, cli *c)
{
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        const char *val = NULL;
        char flagbuf[64];
        const char *eq = strncmp(f, "--", 2) == 0 ? strchr(f, '=') : NULL;
        if (eq && (size_t)(eq - f) < sizeof flagbuf) {
            memcpy(flagbuf, f, (size_t)(eq - f));
            flagbuf[eq - f] = '\0';
            val = eq + 1;
            f = flagbuf;
        } else if (strncmp(f, "-j", 2) == 0 && f[2]) {
            val = f + 2;
            f = "-j";
        }
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(f, "--version") == 0) {
            printf("run_scenarios %s\n", DILEARN_VERSION);
            return 0;
        } else if (strcmp(f, "--check") == 0) {
            c->check_only = true;
        } else if (strcmp(f, "--list") == 0) {
            c->list = true;
        } else if (strcmp(f, "-v") == 0 || strcmp(f, "--verbose") == 0) {
            c->verbose = true;
        } else if (strcmp(f, "-q") == 0 || strcmp(f, "--quiet") == 0) {
            c->quiet = true;
        } else if (strcmp(f, "--first") == 0) {
            c->xo.first = true;
        } else if (takes_value(f)) {
            if (!val) {
                if (i + 1 >= argc) {
                    fprintf(stderr, "run_scenarios: %s needs a value\n", f);
                    return 2;
                }
                val = argv[++i];
            }
            bool matched;
            if (value_flag(c, f, val, &matched) != 0)
                return 2;
        } else if (f[0] == '-' && f[1]) {
            fprintf(stderr, "run_scenarios: unknown flag %s (see --help)\n", f);
            return 2;
        } else {
            c->paths = xrealloc(c->paths, (c->npaths + 1) * sizeof *c->paths);
            c->paths[c->npaths++] = argv[i];
        }
    }
    if (c->has_seed && c->has_seeds) {
        fprintf(stderr, "run_scenarios: --seed and --seeds exclude each other\n");
        return 2;
    }
    if (c->has_seeds &&
        (c->seed_hi - c->seed_lo >= SEEDS_MAX || (c->seed_hi - c->seed_lo + 1) * (uint64_t)c->repeat > SEEDS_MAX)) {
        fprintf(stderr, "run_scenarios: --seeds %llu..%llu%s: more than %d runs of each scenario\n",
                (unsigned long long)c->seed_lo, (unsigned long long)c->seed_hi, c->repeat > 1 ? " with --repeat" : "",
                SEEDS_MAX);
        return 2;
    }
    if (c->explore && c->npaths) {
        fprintf(stderr, "run_scenarios: --explore takes its base scenario, not other paths (%s)\n", c->paths[0]);
        return 2;
    }
    if (c->explore && (c->has_seeds || c->repeat > 1 || c->nfilters || c->check_only || c->list || c->profile)) {
        fprintf(stderr, "run_scenarios: --explore draws its own runs against our aggregator: --seeds, --repeat, "
                        "--filter, --check, --list and --aggregator-profile do not apply (--seed S seeds the "
                        "exploration)\n");
        return 2;
    }
    if (c->npaths == 0 && !c->explore) {
        fprintf(stderr, "run_scenarios: no scenario given (a file or a folder such as scenarios/)\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* A report file's folder must exist before anything runs (found at the end,
 * a whole run would be lost); an old report is removed so that none is left
 * that does not belong to this run. 0 or 2. */
static int prepare_report(const char *flag, const char *path)
{
    if (!path)
        return 0;
    char *copy = xstrdup(path);
    const char *dir = dirname(copy);
    struct stat st;
    int rc = 0;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "run_scenarios: %s %s: the folder %s does not exist\n", flag, path, dir);
        rc = 2;
    } else if (access(dir, W_OK) != 0) {
        fprintf(stderr, "run_scenarios: %s %s: the folder %s is not writable\n", flag, path, dir);
        rc = 2;
    } else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        fprintf(stderr, "run_scenarios: %s %s: is a folder\n", flag, path);
        rc = 2;
    } else if (unlink(path) != 0 && errno != ENOENT) {
        fprintf(stderr, "run_scenarios: %s %s: cannot remove the old report: %s\n", flag, path, strerror(errno));
        rc = 2;
    }
    free(copy);
    return rc;
}

/* "NAME" of a scenario file: its base name without .json. */
static char *file_stem(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    size_t n = strlen(b);
    if (n > 5 && strcmp(b + n - 5, ".json") == 0)
        n -= 5;
    return xstrndup(b, n);
}

/* The result of an invalid file: an error at the line of its first error
 * ("FILE:LINE: what" or "FILE:LINE:COL: what"), with every error as text. */
static sc_result *invalid_result(const char *file, const char *errs, const char *prefix)
{
    size_t fl = strlen(file);
    int line = 0;
    const char *msg = errs;
    if (strncmp(errs, file, fl) == 0 && errs[fl] == ':') {
        char *end;
        long l = strtol(errs + fl + 1, &end, 10);
        if (end != errs + fl + 1 && l > 0 && l < 1000000) {
            line = (int)l;
            msg = end;
            while (*msg == ':' || (*msg >= '0' && *msg <= '9'))
                msg++;
            while (*msg == ' ')
                msg++;
        }
    }
    char *name = file_stem(file);
    char *replay = xasprintf("%s --check %s", prefix, file);
    size_t ml = strcspn(msg, "\n");
    char *why = xasprintf("invalid scenario file: %.*s", (int)ml, msg);
    sc_result *r = sc_result_unrun(name, file, 0, replay, SC_ERROR, why, line);
    free(r->description);
    r->description = xstrdup(errs); /* every error, for the report */
    free(name);
    free(replay);
    free(why);
    return r;
}

/* Loads and validates every file, keeps those the filters select. Invalid
 * files (their errors printed) become results in invalid. */
static void load_scenarios(const cli *c, char **files, size_t nfiles, sc_scenario **sc, size_t *nsc,
                           sc_result **invalid, size_t *ninvalid, const char *prefix)
{
    for (size_t i = 0; i < nfiles; i++) {
        char *errs = NULL;
        sc_scenario *s = sc_scenario_load(files[i], &errs);
        if (!s) {
            fputs(errs, stderr);
            invalid[(*ninvalid)++] = invalid_result(files[i], errs ? errs : "", prefix);
            free(errs);
            continue;
        }
        bool keep = c->nfilters == 0;
        for (size_t k = 0; k < c->nfilters; k++)
            keep |= strstr(s->name, c->filters[k]) != NULL;
        if (keep)
            sc[(*nsc)++] = s;
        else
            sc_scenario_free(s);
    }
}

/* The four executables (exes[k] owned by the caller). 0, or 2 with the
 * error printed. */
static int find_exes(const cli *c, sc_scenario *const *sc, size_t nsc, char *exes[4], char **self_dir)
{
    *self_dir = NULL;
    char *self = realpath("/proc/self/exe", NULL);
    if (self) {
        char *slash = strrchr(self, '/');
        if (slash)
            *slash = '\0';
        *self_dir = self;
    }
    for (int k = 0; k < 4; k++)
        exes[k] = NULL;
    for (int k = 0; k < 4; k++) {
        if (c->exe_over[k]) {
            exes[k] = realpath(c->exe_over[k], NULL);
            if (!exes[k] || access(exes[k], X_OK) != 0) {
                fprintf(stderr, "run_scenarios: %s %s: not an executable\n", exe_flags[k], c->exe_over[k]);
                return 2;
            }
            continue;
        }
        const char *dir = c->bin_dir ? c->bin_dir : *self_dir ? *self_dir : ".";
        exes[k] = find_exe(dir, exe_names[k]);
        bool needed = k != 3;
        if (k == 3)
            for (size_t i = 0; i < nsc; i++)
                needed |= sc[i]->k8s;
        if (!exes[k] && needed) {
            fprintf(stderr, "run_scenarios: cannot find %s in %s (build it, or give --bin-dir or %s)\n", exe_names[k],
                    dir, exe_flags[k]);
            return 2;
        }
        if (!exes[k])
            exes[k] = xstrdup("/nonexistent/mock_operator");
    }
    return 0;
}

/* "run_scenarios --bin-dir X ...": the replay command without the seed and
 * the file. */
static char *replay_prefix(const cli *c, const char *argv0)
{
    xbuf rp = {0};
    xbuf_printf(&rp, "%s", argv0);
    if (c->bin_dir)
        xbuf_printf(&rp, " --bin-dir %s", c->bin_dir);
    for (int k = 0; k < 4; k++)
        if (c->exe_over[k])
            xbuf_printf(&rp, " %s %s", exe_flags[k], c->exe_over[k]);
    if (c->profile)
        xbuf_printf(&rp, " --aggregator-profile %s", c->profile);
    if (strcmp(c->out_dir, "out") != 0)
        xbuf_printf(&rp, " --out %s", c->out_dir);
    return xbuf_take(&rp);
}

/* The jobs: every scenario, with each seed of --seeds (or --seed, or its
 * own), --repeat times. */
static void make_jobs(app *a, sc_scenario **sc, size_t nsc, const cli *c)
{
    uint64_t nseeds = c->has_seeds ? c->seed_hi - c->seed_lo + 1 : 1;
    size_t per = (size_t)nseeds * (size_t)c->repeat;
    bool many = per > 1;
    a->njobs = nsc * per;
    a->jobs = xcalloc(a->njobs, sizeof *a->jobs);
    a->queue = xcalloc(a->njobs, sizeof *a->queue);
    size_t n = 0;
    for (size_t i = 0; i < nsc; i++)
        for (uint64_t k = 0; k < nseeds; k++)
            for (int t = 0; t < c->repeat; t++) {
                job *j = &a->jobs[n];
                j->s = sc[i];
                j->has_seed = c->has_seed || c->has_seeds;
                j->seed = c->has_seeds ? c->seed_lo + k : c->seed;
                j->attempt = many ? (int)(k * (uint64_t)c->repeat) + t + 1 : 0;
                a->queue[n] = n;
                n++;
            }
    /* the longest first, when running side by side (a stable sort: the tries
     * of a scenario keep their order) */
    if (a->max_jobs > 1)
        for (size_t i = 1; i < a->njobs; i++)
            for (size_t k = i; k > 0 && weight(a->jobs[a->queue[k]].s) > weight(a->jobs[a->queue[k - 1]].s); k--) {
                size_t t = a->queue[k];
                a->queue[k] = a->queue[k - 1];
                a->queue[k - 1] = t;
            }
}

/* Runs every job on one loop, -j N side by side, until all ended (or the
 * runner was interrupted and the running ones ended). */
static void run_all(app *a, const cli *c, size_t nsc)
{
    signal(SIGPIPE, SIG_IGN);
    a->set = sc_procset_new(a->loop);
    ev_signal(a->loop, SIGCHLD, on_sigchld, a);
    ev_signal(a->loop, SIGTERM, on_sigterm, a);
    ev_signal(a->loop, SIGINT, on_sigterm, a);
    ev_signal(a->loop, SIGHUP, on_sigterm, a);
    a->tty = isatty(2);
    a->quiet = c->quiet;
    mkdir(c->out_dir, 0755);
    printf("run_scenarios: %zu scenario%s", nsc, nsc == 1 ? "" : "s");
    if (a->njobs != nsc)
        printf(", %zu runs", a->njobs);
    printf(", -j %d, ", a->max_jobs);
    if (c->has_seed)
        printf("seed %llu\n", (unsigned long long)c->seed);
    else if (c->has_seeds)
        printf("seeds %llu..%llu\n", (unsigned long long)c->seed_lo, (unsigned long long)c->seed_hi);
    else
        printf("each with its own seed\n");
    fflush(stdout);
    a->start_ms = ev_now_ms();
    start_next(a);
    if (a->running) /* none: every job was skipped */
        ev_run(a->loop);
}

/* The JUnit and HTML reports; rc raised to 1 if one cannot be written. */
static void write_reports(const cli *c, const sc_result *const *res, size_t n, double wall, int *rc)
{
    if (c->junit) {
        if (sc_report_junit(c->junit, res, n, wall) != 0) {
            fprintf(stderr, "run_scenarios: cannot write %s: %s\n", c->junit, strerror(errno));
            *rc = *rc ? *rc : 1;
        } else {
            printf("JUnit report: %s\n", c->junit);
        }
    }
    if (c->html) {
        if (sc_report_html(c->html, res, n, wall) != 0) {
            fprintf(stderr, "run_scenarios: cannot write %s: %s\n", c->html, strerror(errno));
            *rc = *rc ? *rc : 1;
        } else {
            printf("HTML report: %s\n", c->html);
        }
    }
    fflush(stdout);
}

/* The summary and the reports of every job (the ones never started as
 * skipped); the exit status so far (0 or 1). */
static int report_all(app *a, const cli *c)
{
    double wall = (double)(ev_now_ms() - a->start_ms);
    clear_progress(a);
    const sc_result **res = xcalloc(a->njobs + 1, sizeof *res);
    char why[160];
    snprintf(why, sizeof why, "not run: the runner was interrupted by %s before it started",
             a->signalled ? signame(a->signalled) : "?");
    for (size_t i = 0; i < a->njobs; i++) {
        job *j = &a->jobs[i];
        if (j->state == 2) {
            res[i] = sc_run_result(j->run);
            continue;
        }
        uint64_t seed = j->has_seed ? j->seed : j->s->seed;
        char *replay = xasprintf("%s --seed %llu %s", a->opts.replay_prefix, (unsigned long long)seed, j->s->path);
        j->unrun = sc_result_unrun(j->s->name, j->s->path, seed, replay, SC_SKIPPED, j->skip_why ? j->skip_why : why,
                                   0);
        j->unrun->attempt = j->attempt;
        free(replay);
        res[i] = j->unrun;
    }
    sc_report_summary(stdout, res, a->njobs, wall);
    int rc = a->failed ? 1 : 0;
    write_reports(c, res, a->njobs, wall, &rc);
    free(res);
    return rc;
}

/* Invalid files: the reports hold them as errors and every valid scenario
 * as skipped; exit 2. */
static int report_invalid(const cli *c, sc_result **invalid, size_t ninvalid, sc_scenario **sc, size_t nsc,
                          size_t nfiles, const char *prefix)
{
    fprintf(stderr, "run_scenarios: %zu of %zu scenario file%s invalid; nothing was run\n", ninvalid, nfiles,
            nfiles == 1 ? " is" : "s are");
    const sc_result **res = xcalloc(ninvalid + nsc + 1, sizeof *res);
    sc_result **own = xcalloc(nsc + 1, sizeof *own);
    for (size_t i = 0; i < ninvalid; i++)
        res[i] = invalid[i];
    for (size_t i = 0; i < nsc; i++) {
        char *replay = xasprintf("%s --seed %llu %s", prefix, (unsigned long long)sc[i]->seed, sc[i]->path);
        own[i] = sc_result_unrun(sc[i]->name, sc[i]->path, sc[i]->seed, replay, SC_SKIPPED,
                                 "not run: another scenario file is invalid", 0);
        free(replay);
        res[ninvalid + i] = own[i];
    }
    int rc = 2;
    write_reports(c, res, ninvalid + nsc, 0, &rc);
    for (size_t i = 0; i < nsc; i++)
        sc_result_free(own[i]);
    free(own);
    free(res);
    return 2;
}

/* --list and --check; with --check the reports hold every file as passed. */
static int list_or_check(const cli *c, sc_scenario **sc, size_t nsc, const char *prefix)
{
    for (size_t i = 0; i < nsc; i++)
        printf("%-34s %s\n", sc[i]->name, c->list ? sc[i]->description : "ok");
    if (!c->check_only)
        return 0;
    printf("%zu scenario file%s valid\n", nsc, nsc == 1 ? " is" : "s are");
    const sc_result **res = xcalloc(nsc + 1, sizeof *res);
    sc_result **own = xcalloc(nsc + 1, sizeof *own);
    for (size_t i = 0; i < nsc; i++) {
        char *replay = xasprintf("%s --check %s", prefix, sc[i]->path);
        own[i] =
            sc_result_unrun(sc[i]->name, sc[i]->path, sc[i]->seed, replay, SC_PASSED, "valid (--check: not run)", 0);
        own[i]->passed = true;
        free(replay);
        res[i] = own[i];
    }
    int rc = 0;
    write_reports(c, res, nsc, 0, &rc);
    for (size_t i = 0; i < nsc; i++)
        sc_result_free(own[i]);
    free(own);
    free(res);
    return rc;
}

static void free_jobs(app *a)
{
    for (size_t i = 0; i < a->njobs; i++) {
        sc_run_free(a->jobs[i].run);
        sc_result_free(a->jobs[i].unrun);
        free(a->jobs[i].skip_why);
    }
    free(a->jobs);
    free(a->queue);
}

/* The options of every run (all borrowed; profile may be NULL). */
static sc_run_opts run_opts(const cli *c, char *const exes[4], const char *rprefix, unsigned char *ports_used,
                            const sc_profile *profile)
{
    return (sc_run_opts){
        .aggregator = exes[0],
        .mock_learner = exes[1],
        .mock_coordinator = exes[2],
        .mock_operator = exes[3],
        .out_dir = c->out_dir,
        .replay_prefix = rprefix,
        .ports_used = ports_used,
        .verbose = c->verbose,
        .learner_id_base = help_mentions(exes[1], "--id-base"),
        .json_logs = true,
        .profile = profile,
        /* a profile says whether its aggregator writes our events */
        .agg_events = profile ? profile->events : help_mentions(exes[0], "--events "),
        .agg_each_line = help_mentions(exes[0], "--events-each-line"),
        .log_level = c->log_level,
    };
}

/* run_scenarios --explore BASE (sc_explore.h). */
static int explore_main(cli *c, const char *argv0)
{
    char *errs = NULL;
    sc_scenario *base = sc_scenario_load(c->explore, &errs);
    if (!base) {
        fputs(errs, stderr);
        free(errs);
        fprintf(stderr, "run_scenarios: --explore: the base scenario is invalid\n");
        return 2;
    }
    char *exes[4] = {NULL, NULL, NULL, NULL}, *self_dir = NULL;
    int rc = find_exes(c, &base, 1, exes, &self_dir) != 0 ? 2 : 0;
    if (rc == 0) {
        unsigned char *ports_used = xcalloc(65536, 1);
        char *rprefix = replay_prefix(c, argv0);
        sc_run_opts ro = run_opts(c, exes, rprefix, ports_used, NULL);
        c->xo.base_path = c->explore;
        c->xo.jobs = c->max_jobs;
        c->xo.seed = c->has_seed ? c->seed : 1;
        c->xo.quiet = c->quiet;
        c->xo.junit = c->junit;
        c->xo.html = c->html;
        ev_loop *loop = ev_loop_new();
        if (!loop) {
            perror("run_scenarios: ev_loop_new");
            rc = 1;
        } else {
            rc = sc_explore_run(loop, &ro, base, &c->xo);
            ev_loop_free(loop);
        }
        free(ports_used);
        free(rprefix);
    }
    for (int k = 0; k < 4; k++)
        free(exes[k]);
    free(self_dir);
    sc_scenario_free(base);
    return rc;
}

int main(int argc, char **argv)
{
    app a = {.max_jobs = 1};
    cli c = {.max_jobs = 1, .out_dir = "out", .repeat = 1, .xo = {.runs = 50, .shrink_tries = 2, .shrink_seconds = 300}};
    int prc = parse_args(argc, argv, &c);
    if (prc < 0 && (prepare_report("--junit", c.junit) != 0 || prepare_report("--html", c.html) != 0))
        prc = 2;
    if (prc < 0 && c.explore)
        prc = explore_main(&c, argv[0]);
    if (prc >= 0) {
        free(c.filters);
        free(c.paths);
        return prc;
    }
    a.max_jobs = c.max_jobs;
    char *rprefix = replay_prefix(&c, argv[0]);
    char **files = NULL;
    size_t nfiles = 0;
    for (size_t i = 0; i < c.npaths; i++)
        if (collect(c.paths[i], &files, &nfiles) != 0)
            return 2;
    /* validate everything before anything starts */
    sc_scenario **sc = xcalloc(nfiles + 1, sizeof *sc);
    sc_result **invalid = xcalloc(nfiles + 1, sizeof *invalid);
    size_t nsc = 0, ninvalid = 0;
    load_scenarios(&c, files, nfiles, sc, &nsc, invalid, &ninvalid, rprefix);
    int rc = -1;
    if (ninvalid)
        rc = report_invalid(&c, invalid, ninvalid, sc, nsc, nfiles, rprefix);
    else if (c.list || c.check_only)
        rc = list_or_check(&c, sc, nsc, rprefix);
    else if (nsc == 0) {
        fprintf(stderr, "run_scenarios: no scenario to run\n");
        rc = 2;
    }
    char *exes[4] = {NULL, NULL, NULL, NULL}, *self_dir = NULL;
    if (rc < 0 && find_exes(&c, sc, nsc, exes, &self_dir) != 0)
        rc = 2;
    sc_profile *profile = NULL;
    if (rc < 0 && c.profile) {
        char perr[4096];
        const char *missing = NULL;
        if (sc_profile_load(c.profile, &profile, perr, sizeof perr) != 0) {
            fprintf(stderr, "%s\nrun_scenarios: the aggregator profile is invalid; nothing was run\n", perr);
            rc = 2;
        } else if ((missing = sc_profile_missing_env(profile))) {
            fprintf(stderr, "run_scenarios: %s\n", missing);
            rc = 2;
        }
    }
    unsigned char *ports_used = NULL;
    if (rc < 0) {
        ports_used = xcalloc(65536, 1);
        a.opts = run_opts(&c, exes, rprefix, ports_used, profile);
        a.loop = ev_loop_new();
        if (!a.loop) {
            perror("run_scenarios: ev_loop_new");
            return 1;
        }
        make_jobs(&a, sc, nsc, &c);
        run_all(&a, &c, nsc);
        rc = report_all(&a, &c);
        /* nothing may outlive the runner */
        sc_procset_signal_all(a.set, SIGKILL);
        free_jobs(&a);
        if (a.progress)
            ev_timer_stop(a.loop, a.progress);
        sc_procset_free(a.set);
        ev_loop_free(a.loop);
    }
    for (size_t i = 0; i < ninvalid; i++)
        sc_result_free(invalid[i]);
    free(invalid);
    for (size_t i = 0; i < nsc; i++)
        sc_scenario_free(sc[i]);
    free(sc);
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(c.paths);
    free(c.filters);
    for (int k = 0; k < 4; k++)
        free(exes[k]);
    free(self_dir);
    free(ports_used);
    free(rprefix);
    sc_profile_free(profile);
    if (a.signalled)
        return 128 + a.signalled;
    return rc;
}
