/* run_scenarios: the scenario runner's command line. Reads scenario files
 * (docs/scenarios.md), validates them all before starting anything, runs
 * them (-j N side by side, on one event loop), prints a live progress line
 * per scenario and a summary table, and writes JUnit and HTML reports. */
#include <errno.h>
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ev.h"
#include "ilog.h"
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
          "      --filter TEXT       only scenarios whose name contains TEXT (repeatable)\n"
          "      --out DIR           run folders go to DIR/runs/<scenario>-<seed>/ (default: out)\n"
          "      --junit FILE        write a JUnit XML report\n"
          "      --html FILE         write a self-contained HTML report\n"
          "      --bin-dir DIR       where aggregator, mock_learner, mock_coordinator and\n"
          "                          mock_operator are (default: the build tree around run_scenarios)\n"
          "      --aggregator PATH   this aggregator executable (likewise --mock-learner,\n"
          "                          --mock-coordinator, --mock-operator)\n"
          "      --log-level L       every process logs at L (debug, info, warn, error, off);\n"
          "                          the runner reads their events, never their logs\n"
          "      --check             validate the scenarios, run nothing\n"
          "      --list              list the scenarios with their descriptions\n"
          "  -v, --verbose           the runner's own log on stderr as it runs\n"
          "  -q, --quiet             no live progress line\n"
          "      --help, --version\n"
          "\n"
          "Exit status: 0 every scenario passed; 1 a scenario failed; 2 a usage error or an\n"
          "invalid scenario file (each error as FILE:LINE: what is wrong).\n"
          "A failed scenario prints the command that replays it; every process's log is in\n"
          "its run folder.\n",
          out);
}

typedef struct {
    sc_scenario *s;
    sc_run *run;
    int state; /* 0 queued, 1 running, 2 done */
    size_t order;
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
    size_t ok = 0;
    for (size_t i = 0; i < r->nchecks; i++)
        ok += r->checks[i].ok;
    if (!r->passed)
        a->failed++;
    clear_progress(a);
    printf("[%*zu/%zu] %s  %-32s %6.2f s  seed %-6llu %zu/%zu checks\n", a->njobs >= 10 ? 2 : 1, a->done, a->njobs,
           r->passed ? "PASS" : "FAIL", r->name, r->duration_ms / 1000.0, (unsigned long long)r->seed, ok, r->nchecks);
    if (!r->passed)
        sc_report_failure(stdout, r);
    fflush(stdout);
    draw_progress(a);
    start_next(a);
    if (a->running == 0 && a->next >= a->njobs)
        ev_stop(a->loop);
}

static void start_next(app *a)
{
    while (a->running < (size_t)a->max_jobs && a->next < a->njobs && !a->signalled) {
        job *j = &a->jobs[a->queue[a->next++]];
        j->state = 1;
        a->running++;
        j->run = sc_run_start(a->loop, a->set, j->s, &a->opts, on_run_done, a);
    }
    if (a->running && !a->progress && a->tty && !a->quiet)
        a->progress = ev_timer_start(a->loop, 200, on_progress, a);
}

static void on_sigchld(ev_loop *loop, int signum, void *data)
{
    app *a = data;
    sc_procset_reap(a->set);
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
    fprintf(stderr, "run_scenarios: signal %d: stopping every scenario\n", signum);
    for (size_t i = 0; i < a->njobs; i++)
        if (a->jobs[i].state == 1)
            sc_run_abort(a->jobs[i].run, "the runner was interrupted");
    if (a->running == 0)
        ev_stop(loop);
}

/* Longest first: big scenarios start early so -j N ends sooner. */
static long weight(const sc_scenario *s)
{
    return (long)s->nlearners * 20 + s->min_run_ms + s->timeout_ms / 50;
}

/* Frees what main() read before running anything (early exits). */
static void free_inputs(sc_scenario **sc, size_t nsc, char **files, size_t nfiles, char **paths, char **filters)
{
    for (size_t i = 0; i < nsc; i++)
        sc_scenario_free(sc[i]);
    free(sc);
    for (size_t i = 0; i < nfiles; i++)
        free(files[i]);
    free(files);
    free(paths);
    free(filters);
}

/* The command line. */
typedef struct {
    int max_jobs;
    const char *bin_dir, *out_dir, *junit, *html, *log_level;
    const char *exe_over[4];
    bool check_only, list, verbose, quiet, has_seed;
    uint64_t seed;
    char **filters;
    size_t nfilters;
    char **paths;
    size_t npaths;
} cli;

static const char *const exe_names[4] = {"aggregator", "mock_learner", "mock_coordinator", "mock_operator"};
static const char *const exe_flags[4] = {"--aggregator", "--mock-learner", "--mock-coordinator", "--mock-operator"};

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
        }
#define NEEDVAL()                                                                                                      \
    do {                                                                                                               \
        if (!val) {                                                                                                    \
            if (i + 1 >= argc) {                                                                                       \
                fprintf(stderr, "run_scenarios: %s needs a value\n", f);                                               \
                return 2;                                                                                              \
            }                                                                                                          \
            val = argv[++i];                                                                                           \
        }                                                                                                              \
    } while (0)
        if (strcmp(f, "--help") == 0 || strcmp(f, "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(f, "--version") == 0) {
            printf("run_scenarios %s\n", DILEARN_VERSION);
            return 0;
        } else if (strcmp(f, "-j") == 0 || strcmp(f, "--jobs") == 0 || strncmp(f, "-j", 2) == 0) {
            if (strncmp(f, "-j", 2) == 0 && f[2])
                val = f + 2;
            else
                NEEDVAL();
            int64_t n;
            if (!util_parse_i64(val, 1, 64, &n)) {
                fprintf(stderr, "run_scenarios: --jobs: \"%s\" is not a number from 1 to 64\n", val);
                return 2;
            }
            c->max_jobs = (int)n;
        } else if (strcmp(f, "--seed") == 0) {
            NEEDVAL();
            if (!util_parse_u64(val, &c->seed)) {
                fprintf(stderr, "run_scenarios: --seed: \"%s\" is not an integer >= 0\n", val);
                return 2;
            }
            c->has_seed = true;
        } else if (strcmp(f, "--filter") == 0) {
            NEEDVAL();
            c->filters = xrealloc(c->filters, (c->nfilters + 1) * sizeof *c->filters);
            c->filters[c->nfilters++] = (char *)val;
        } else if (strcmp(f, "--out") == 0) {
            NEEDVAL();
            c->out_dir = val;
        } else if (strcmp(f, "--junit") == 0) {
            NEEDVAL();
            c->junit = val;
        } else if (strcmp(f, "--html") == 0) {
            NEEDVAL();
            c->html = val;
        } else if (strcmp(f, "--bin-dir") == 0) {
            NEEDVAL();
            c->bin_dir = val;
        } else if (strcmp(f, "--log-level") == 0) {
            NEEDVAL();
            ilog_level lv;
            if (!ilog_parse_level(val, &lv)) {
                fprintf(stderr, "run_scenarios: --log-level: \"%s\" is not debug, info, warn, error or off\n", val);
                return 2;
            }
            c->log_level = val;
        } else if (strcmp(f, "--check") == 0) {
            c->check_only = true;
        } else if (strcmp(f, "--list") == 0) {
            c->list = true;
        } else if (strcmp(f, "-v") == 0 || strcmp(f, "--verbose") == 0) {
            c->verbose = true;
        } else if (strcmp(f, "-q") == 0 || strcmp(f, "--quiet") == 0) {
            c->quiet = true;
        } else {
            bool matched = false;
            for (int k = 0; k < 4; k++)
                if (strcmp(f, exe_flags[k]) == 0) {
                    NEEDVAL();
                    c->exe_over[k] = val;
                    matched = true;
                }
            if (!matched) {
                if (f[0] == '-' && f[1]) {
                    fprintf(stderr, "run_scenarios: unknown flag %s (see --help)\n", f);
                    return 2;
                }
                c->paths = xrealloc(c->paths, (c->npaths + 1) * sizeof *c->paths);
                c->paths[c->npaths++] = argv[i];
            }
        }
#undef NEEDVAL
    }
    if (c->npaths == 0) {
        fprintf(stderr, "run_scenarios: no scenario given (a file or a folder such as scenarios/)\n");
        usage(stderr);
        return 2;
    }
    return -1;
}

/* Loads and validates every file, keeps those the filters select. The
 * number of invalid files (their errors printed). */
static int load_scenarios(const cli *c, char **files, size_t nfiles, sc_scenario **sc, size_t *nsc)
{
    int bad = 0;
    for (size_t i = 0; i < nfiles; i++) {
        char *errs = NULL;
        sc_scenario *s = sc_scenario_load(files[i], &errs);
        if (!s) {
            fputs(errs, stderr);
            free(errs);
            bad++;
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
    return bad;
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
    if (strcmp(c->out_dir, "out") != 0)
        xbuf_printf(&rp, " --out %s", c->out_dir);
    return xbuf_take(&rp);
}

/* Runs every scenario on one loop, -j N side by side, until all ended. */
static void run_all(app *a, sc_scenario **sc, size_t nsc, const cli *c)
{
    signal(SIGPIPE, SIG_IGN);
    a->set = sc_procset_new(a->loop);
    ev_signal(a->loop, SIGCHLD, on_sigchld, a);
    ev_signal(a->loop, SIGTERM, on_sigterm, a);
    ev_signal(a->loop, SIGINT, on_sigterm, a);
    ev_signal(a->loop, SIGHUP, on_sigterm, a);
    a->tty = isatty(2);
    a->quiet = c->quiet;
    a->njobs = nsc;
    a->jobs = xcalloc(nsc, sizeof *a->jobs);
    a->queue = xcalloc(nsc, sizeof *a->queue);
    for (size_t i = 0; i < nsc; i++) {
        a->jobs[i].s = sc[i];
        a->queue[i] = i;
    }
    /* the longest first, when running side by side */
    if (a->max_jobs > 1)
        for (size_t i = 1; i < nsc; i++)
            for (size_t k = i; k > 0 && weight(sc[a->queue[k]]) > weight(sc[a->queue[k - 1]]); k--) {
                size_t t = a->queue[k];
                a->queue[k] = a->queue[k - 1];
                a->queue[k - 1] = t;
            }
    mkdir(c->out_dir, 0755);
    printf("run_scenarios: %zu scenario%s, -j %d, %s\n", nsc, nsc == 1 ? "" : "s", a->max_jobs,
           c->has_seed ? "seed " : "each with its own seed");
    if (c->has_seed)
        printf("run_scenarios: every scenario runs with seed %llu\n", (unsigned long long)c->seed);
    fflush(stdout);
    a->start_ms = ev_now_ms();
    start_next(a);
    ev_run(a->loop);
}

/* The summary and the reports; the exit status so far (0 or 1). */
static int report_all(app *a, const cli *c, size_t nsc)
{
    double wall = (double)(ev_now_ms() - a->start_ms);
    clear_progress(a);
    const sc_result **res = xcalloc(nsc, sizeof *res);
    size_t nres = 0;
    for (size_t i = 0; i < nsc; i++)
        if (a->jobs[i].state == 2)
            res[nres++] = sc_run_result(a->jobs[i].run);
    sc_report_summary(stdout, res, nres, wall);
    int rc = a->failed || nres < nsc ? 1 : 0;
    if (c->junit) {
        if (sc_report_junit(c->junit, res, nres, wall) != 0) {
            fprintf(stderr, "run_scenarios: cannot write %s: %s\n", c->junit, strerror(errno));
            rc = rc ? rc : 1;
        } else {
            printf("JUnit report: %s\n", c->junit);
        }
    }
    if (c->html) {
        if (sc_report_html(c->html, res, nres, wall) != 0) {
            fprintf(stderr, "run_scenarios: cannot write %s: %s\n", c->html, strerror(errno));
            rc = rc ? rc : 1;
        } else {
            printf("HTML report: %s\n", c->html);
        }
    }
    fflush(stdout);
    free(res);
    return rc;
}

int main(int argc, char **argv)
{
    app a = {.max_jobs = 1};
    cli c = {.max_jobs = 1, .out_dir = "out"};
    int prc = parse_args(argc, argv, &c);
    if (prc >= 0) {
        free(c.filters);
        free(c.paths);
        return prc;
    }
    a.max_jobs = c.max_jobs;
    char **files = NULL;
    size_t nfiles = 0;
    for (size_t i = 0; i < c.npaths; i++)
        if (collect(c.paths[i], &files, &nfiles) != 0)
            return 2;
    /* validate everything before anything starts */
    sc_scenario **sc = xcalloc(nfiles + 1, sizeof *sc);
    size_t nsc = 0;
    int bad = load_scenarios(&c, files, nfiles, sc, &nsc);
    if (bad) {
        fprintf(stderr, "run_scenarios: %d of %zu scenario files are invalid; nothing was run\n", bad, nfiles);
        free_inputs(sc, nsc, files, nfiles, c.paths, c.filters);
        return 2;
    }
    if (c.list || c.check_only) {
        for (size_t i = 0; i < nsc; i++)
            printf("%-34s %s\n", sc[i]->name, c.list ? sc[i]->description : "ok");
        if (c.check_only)
            printf("%zu scenario files are valid\n", nsc);
        free_inputs(sc, nsc, files, nfiles, c.paths, c.filters);
        return 0;
    }
    if (nsc == 0) {
        fprintf(stderr, "run_scenarios: no scenario to run\n");
        free_inputs(sc, nsc, files, nfiles, c.paths, c.filters);
        return 2;
    }
    char *exes[4], *self_dir;
    if (find_exes(&c, sc, nsc, exes, &self_dir) != 0)
        return 2;
    unsigned char *ports_used = xcalloc(65536, 1);
    char *rprefix = replay_prefix(&c, argv[0]);
    a.opts = (sc_run_opts){
        .aggregator = exes[0],
        .mock_learner = exes[1],
        .mock_coordinator = exes[2],
        .mock_operator = exes[3],
        .out_dir = c.out_dir,
        .replay_prefix = rprefix,
        .ports_used = ports_used,
        .has_seed = c.has_seed,
        .seed = c.seed,
        .verbose = c.verbose,
        .learner_id_base = help_mentions(exes[1], "--id-base"),
        .json_logs = true,
        .agg_events = help_mentions(exes[0], "--events "),
        .agg_each_line = help_mentions(exes[0], "--events-each-line"),
        .log_level = c.log_level,
    };
    a.loop = ev_loop_new();
    if (!a.loop) {
        perror("run_scenarios: ev_loop_new");
        return 1;
    }
    run_all(&a, sc, nsc, &c);
    int rc = report_all(&a, &c, nsc);
    /* nothing may outlive the runner */
    sc_procset_signal_all(a.set, SIGKILL);
    for (size_t i = 0; i < nsc; i++)
        sc_run_free(a.jobs[i].run);
    if (a.progress)
        ev_timer_stop(a.loop, a.progress);
    sc_procset_free(a.set);
    ev_loop_free(a.loop);
    free(a.jobs);
    free(a.queue);
    free_inputs(sc, nsc, files, nfiles, c.paths, c.filters);
    for (int k = 0; k < 4; k++)
        free(exes[k]);
    free(self_dir);
    free(ports_used);
    free(rprefix);
    if (a.signalled)
        return 128 + a.signalled;
    return rc;
}
