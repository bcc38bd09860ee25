/* sc_run_int: what the modules of one scenario run share (internal to the
 * runner; the API is sc_run.h).
 *
 *   sc_run.c      the run's life: phases, start-up, exits, the end, results
 *   sc_cmd.c      the processes' command lines and ports; starting one
 *   sc_events.c   what the processes say: ready lines, the summary, events
 *   sc_actions.c  the scenario's actions (signals, faults, operator changes)
 *   sc_checks.c   the expectations, checked once the run is over
 *   sc_probe.c    HTTP reads: the world size during the run, the final probes
 *
 * Ownership: the sc_run owns everything reachable from it (see sc_run_free).
 * State that changes has one function that changes it: the phase
 * (sr_set_phase), checks (sr_check), timeline marks (sr_mark), bars
 * (sr_bar_open/sr_bar_close). Threading: the loop's thread only. */
#ifndef SC_RUN_INT_H
#define SC_RUN_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hc.h"
#include "sc_run.h"
#include "xalloc.h"

#define READY_CAP_MS 15000    /* a process that starts first must be ready by then */
#define GRACE_MS 3000         /* SIGTERM to SIGKILL at the end: above the aggregator's own 1.5 s shutdown cap (agg_shutdown), so that only an aggregator that overruns it is killed */
#define PROBE_TIMEOUT_MS 2000 /* the final /metrics and operator state */
#define K8S_NAMESPACE "dilearn"
#define WORLD_METRIC "dilearn_learners_connected"
#define NTASKN 6 /* 5 known task names + other */

typedef enum { PH_OPERATOR = 0, PH_LEARNERS, PH_RUNNING, PH_PROBING, PH_STOPPING, PH_DONE } phase;

typedef struct {
    sc_run *run;
    int idx; /* process index (SC_PROC_*) */
    sc_proc *p;
    char **argv; /* NULL-terminated, owned */
    char **env;  /* NULL-terminated, owned (putenv strings) */
    bool wanted; /* part of this scenario */
    bool ready;
    bool exited; /* exited at least once */
    int status;  /* last exit status */
    double exit_t;
    bool runner_signal; /* the runner signalled it (kill, term, restart, sr_teardown) */
    bool restart_pending;
    bool teardown; /* exit during teardown */
    int base_port, ctl_port;
    ev_timer *start_timer; /* start_ms of a learner group */
    /* its events file (sc_events.c), followed as it grows */
    char *ev_path;      /* <run folder>/<name>.events.jsonl */
    int ev_fd;          /* -1: not open yet */
    int ev_wd;          /* its inotify watch once it exists; -1: none */
    xbuf ev_part;       /* the last line, while it is incomplete */
    long ev_line;       /* lines read so far */
    int64_t ev_seq;     /* the last "seq" seen; -1: none */
    char *ev_run;       /* the "run" of the lines being read */
    int ev_bad;         /* lines that failed evt_parse_line */
    int ev_files;       /* earlier files kept (one per restart) */
    int *fault_id;      /* learner groups: [k] first id of --fault k */
    int *fault_n;       /* [k] how many faults --fault k holds */
    int *fault_fired;   /* [k] fault_fired events of --fault k */
    ev_timer *ready_timer; /* a learner given by command: polling its port */
    hc_req *ready_req;
} rproc;

typedef struct act_ref {
    sc_run *r;
    size_t i;
} act_ref;

typedef struct {
    int learner;
    char *task; /* full name or NULL (other) */
    double t;
} ltask_ev;

struct sc_run {
    ev_loop *loop;
    sc_procset *set;
    const sc_scenario *s;
    sc_run_opts opts;
    sc_run_done_cb done;
    void *ud;
    hc_client *hc;
    phase ph;
    uint64_t seed;
    uint64_t start_ms, t0_ms;
    bool t0_set;
    rproc *procs;
    size_t nprocs;
    int agg_slave_port, agg_master_port, agg_metrics_port, op_port, op_ctl_port, coord_port;
    char *run_dir;
    char *agg_name; /* k8s pod name of the aggregator */
    FILE *rlog;     /* runner.log */
    ev_timer *timeout_timer, *sample_timer, *min_timer, *kill_timer, *done_timer, *coord_timer;
    ev_timer **act_timers;
    struct act_ref *refs;   /* [action]: timer data */
    ev_timer **cont_timers; /* [action]: stop's automatic cont */
    bool *fired;
    /* events */
    int ino_fd;          /* inotify: the run folder and the events files; -1: none */
    int ino_dir_wd;      /* the run folder's watch (files created) */
    int *ev_expect_n;    /* [k] lines matching expect.events[k] */
    int world_now;       /* the world size of the aggregator's last event */
    bool world_live;     /* since its ready: world changes are samples */
    char **op_fired_kind; /* the operator's fault_fired events: kind and */
    int64_t *op_fired_id; /* fault id of each distinct fault that fired */
    size_t nop_fired;
    int *lt_count; /* [learner * NTASKN + name] tasks received */
    int *lt_any;   /* [learner] */
    int *bar_open; /* [learner]: open bar index or -1 */
    ltask_ev *lts; /* every learner task received, for expectations */
    size_t nlts, caplts;
    int sent[NTASKN + 1], done_n[NTASKN + 1]; /* coordinator; [NTASKN]: any */
    /* coordinator outcome */
    cJSON *summary;
    bool coord_done;
    double coord_end_ms;
    /* sampling */
    hc_req *sample_req;
    char *last_metrics;
    /* probes */
    int probes;
    hc_req *probe_metrics, *probe_op, *probe_journal;
    cJSON *op_journal;      /* the operator's journal (a list), or NULL */
    ev_timer *settle_timer; /* waiting for signalled processes to exit */
    uint64_t settle_start;
    char *final_metrics;
    bool agg_answered;
    char *agg_probe_error;
    cJSON *op_state;
    char *op_error;
    bool timed_out;
    bool aborted;
    bool killed_after_grace; /* the teardown's SIGKILL after GRACE_MS */
    double *resource_t;      /* when each resource outcome reached the
                                coordinator (world size without /metrics) */
    size_t nresource;
    sc_result res;
    size_t capchecks, capmarks, capbars, capsamples;
};

/* sc_run.c */
double sr_now(const sc_run *r); /* ms since t0 (0 before) */
void sr_log(sc_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sr_check(sc_run *r, bool ok, int line, const char *what, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* An expectation not judged, and why (the aggregator under test does not
 * offer what it needs): reported as skipped, never as passed. */
void sr_skip(sc_run *r, int line, const char *what, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/* kind: 0 action, 1 exit, 2 event, 3 join/leave note; learner -1: all */
void sr_mark(sc_run *r, int kind, int learner, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void sr_add_sample(sc_run *r, double t, int v);
int sr_bar_open(sc_run *r, int learner, const char *task);
void sr_bar_close(sc_run *r, int learner, int outcome);
void sr_set_phase(sc_run *r, phase ph);
/* The run cannot go on: an error, a failed check, and the end. */
void sr_fail(sc_run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sr_stop_timer(sc_run *r, ev_timer **t);
void sr_stop_all_timers(sc_run *r);
void sr_on_ready(sc_run *r, int idx, cJSON *j);
void sr_on_exit(void *ud, sc_proc *p, int status);
bool sr_exit_expected(const sc_run *r, int idx);
/* Every process gets SIGTERM (SIGKILL when aborted); done follows. */
void sr_teardown(sc_run *r);

/* sc_cmd.c */
int sr_build_commands(sc_run *r);  /* ports chosen here; 0 or -1 */
void sr_write_commands(sc_run *r); /* commands.txt in the run folder */
void sr_release_ports(sc_run *r, int base, int n);
char *sr_learner_addr(const sc_run *r, int learner); /* owned by the caller */
char *sr_dump_path(const sc_run *r, size_t g);       /* owned by the caller */
/* A configured fault's text for the mock: without "optional", which is the
 * runner's (a fault that may not fire). Owned by the caller. */
char *sr_fault_text(const char *text);
int sr_spawn(sc_run *r, int idx);                    /* 0, or -1 and the run fails */

/* sc_events.c */
void sr_on_line(void *ud, sc_proc *p, int stream, const char *line, size_t len);
/* Watches the run folder for the processes' events files; 0 or -1 (the
 * run fails). */
int sr_events_watch(sc_run *r);
/* Cuts n bytes read from a file into lines: each complete line (without
 * its newline) to line(); a partial last line waits in part for the rest. */
void sr_split_lines(xbuf *part, const char *buf, size_t n, void (*line)(void *ud, const char *s, size_t len),
                    void *ud);
/* Reads what a process's events file holds now (every complete line). */
void sr_events_drain(sc_run *r, int idx);
void sr_events_drain_all(sc_run *r);
/* Before a process is started again: its file so far is read and kept as
 * <name>.events.<n>.jsonl. */
void sr_events_restart(sc_run *r, int idx);
/* Configured faults that never fired: failed checks (at the end). */
void sr_check_faults_fired(sc_run *r);
/* The aggregator is ready (its ready event, or its ready line): from now
 * on its world size is sampled (as /metrics would have been). */
void sr_world_live(sc_run *r);
/* The world size from events holds until the end of the run (or the
 * aggregator's exit): its last value becomes a sample then. */
void sr_close_world(sc_run *r);
/* expect.events (at the end). */
void sr_check_events(sc_run *r);
void sr_events_free(sc_run *r);
/* A process became ready or exited: actions triggered by it. */
void sr_proc_event(sc_run *r, sc_when_kind kind, int proc);

/* sc_actions.c */
void sr_act_or_delay(sc_run *r, size_t i);       /* action i's trigger held */
void sr_on_act_timer(ev_loop *loop, void *data); /* data: &r->refs[i] */
/* An HTTP control request whose answer is only logged (a failure is a
 * failed check at line). */
void sr_control(sc_run *r, const char *method, int port, const char *path, const char *body, const char *what,
                int line);

/* sc_checks.c */
void sr_evaluate(sc_run *r);

/* sc_probe.c */
void sr_on_sample_timer(ev_loop *loop, void *data);
/* A learner group given by command is ready when its first port answers
 * HTTP (or it prints a ready line, whichever comes first). */
void sr_poll_ready(sc_run *r, int idx);
/* The run ends (after processes signalled by actions have exited): the final
 * probes, then the checks and the teardown. */
void sr_begin_probes(sc_run *r, const char *why);

#endif
