/* sc_scenario: a scenario file of the scenario runner (docs/scenarios.md),
 * parsed and validated before anything starts. Every error names the file,
 * the line and what is wrong ("happy.json:12: actions[1].target: no learner
 * 'learner7' (the scenario has learner0..learner3)").
 *
 * Times in a scenario are wall-clock milliseconds measured from t = 0, the
 * moment the runner starts the aggregator; protocol timings (heartbeats,
 * retries, deadlines) are the aggregator's defaults multiplied by
 * time_scale, unless "timings" gives them. A duration may also be written
 * in production time ("90s", "1.5s", "250ms"): it is multiplied by
 * time_scale at parse time, so every *_ms field below is wall-clock ms.
 * Fault objects are checked with the mocks' own parsers (fault_check,
 * mo_fault_check), so what a mock would refuse is refused here.
 *
 * Ownership: sc_scenario_load()/sc_scenario_parse() return a scenario the
 * caller frees with sc_scenario_free(); everything it points to belongs to
 * it. Threading: pure, safe from any thread. */
#ifndef SC_SCENARIO_H
#define SC_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Limits (a scenario beyond them is refused, with the limit named). */
#define SC_LEARNERS_MAX 4096
#define SC_GROUPS_MAX 256
#define SC_ACTIONS_MAX 1000
#define SC_TIMEOUT_MAX_MS 600000L

/* The protocol's defaults before time_scale (protocol.md). */
#define SC_DEF_HEARTBEAT_SPAN_MS 3000L
#define SC_DEF_HEARTBEAT_TOLERANCE_MS 17000L
#define SC_DEF_MAX_RETRY_MS 60000L
#define SC_DEF_RETRY_INTERVAL_MS 2000L
#define SC_DEF_SYNC_PERIOD_MS 3000L
/* The runner's default task deadline before time_scale (the master's own
 * default is 600 s; scenarios want failures to show up). */
#define SC_DEF_TASK_DEADLINE_MS 60000L
/* The least any scaled timing may become. */
#define SC_MIN_SCALED_MS 5L

/* A group of learners: one mock_learner process. */
typedef struct {
    char *name;       /* unique; a target of process actions */
    int count;        /* learners in the process */
    int first;        /* global index of its first learner: learner<first> */
    int batch_size;
    long learn_time_ms;
    long heartbeat_span_ms; /* 0: the scaled default */
    long start_ms;    /* < 0: started and ready before the aggregator */
    bool absent;      /* never started: nothing listens at its addresses */
    bool configured;  /* given to the aggregator at start (--learner, or the
                         operator's initial list in k8s mode) */
    char **faults;    /* JSON texts, each given as --fault */
    size_t nfaults;
    char **args;      /* extra command-line arguments */
    size_t nargs;
    /* Instead of the mock (docs/scenarios.md, "Real learners"): */
    char **command;   /* any slave executable serving count learners from
                         {port} on ({host}, {port}, {count}, {mock_learner});
                         NULL-terminated, or NULL: the mock */
    char *address;    /* "HOST:PORT" of a learner already running (count 1;
                         the runner starts and signals nothing), or NULL */
    int line;
} sc_group;

/* The group is our mock_learner (faults, task events and dumps need it). */
#define SC_GROUP_IS_MOCK(g) (!(g)->command && !(g)->address)

typedef enum {
    SC_WHEN_AT = 0,        /* at_ms */
    SC_WHEN_LEARNER_TASK,  /* a learner received its nth task (of a name) */
    SC_WHEN_TASK_SENT,     /* the coordinator sent its nth task (of a name) */
    SC_WHEN_TASK_DONE,     /* the coordinator got the outcome of it */
    SC_WHEN_LOG,           /* a log line of a process contains a text */
    SC_WHEN_READY,         /* a process printed its ready line */
    SC_WHEN_EXIT,          /* a process exited */
} sc_when_kind;
const char *sc_when_name(sc_when_kind k);

typedef struct {
    sc_when_kind kind;
    long at_ms;       /* AT */
    int learner;      /* LEARNER_TASK: global index; -1: any learner */
    char *task;       /* full task name; NULL: any */
    int nth;          /* 1-based; the nth matching occurrence */
    char *process;    /* LOG, READY, EXIT */
    char *contains;   /* LOG */
    long delay_ms;    /* act this long after the event */
} sc_when;

#define SC_DO_LIST(X)                                                            \
    X(KILL, "kill")               /* SIGKILL to the process group */            \
    X(TERM, "term")               /* SIGTERM */                                  \
    X(STOP, "stop")               /* SIGSTOP (a partition); cont after         \
                                     duration_ms if given */                     \
    X(CONT, "cont")               /* SIGCONT */                                  \
    X(RESTART, "restart")         /* kill -9 if running, start again (same    \
                                     ports, same arguments) */                   \
    X(START, "start")             /* start a process not started yet */        \
    X(FAULT, "fault")             /* POST the fault object to a control port */ \
    X(CLEAR_FAULTS, "clear_faults") /* DELETE /fault on a control port */      \
    X(OPERATOR_SET, "operator_set") /* the operator's learner list := learners */ \
    X(OPERATOR_FAULT, "operator_fault") /* a fault on the operator's API */    \
    X(OPERATOR_CLEAR, "operator_clear") /* clear the operator's faults */

typedef enum {
#define SC_X_DO(n, s) SC_DO_##n,
    SC_DO_LIST(SC_X_DO)
#undef SC_X_DO
        SC_DO_COUNT
} sc_do;
const char *sc_do_name(sc_do d);

typedef struct {
    sc_when when;
    sc_do what;
    char *target;     /* a process name or a learner id, as written */
    int proc;         /* process index (see sc_scenario_proc_name), -1 none */
    int learner;      /* a learner target of FAULT / CLEAR_FAULTS, else -1 */
    char *fault;      /* FAULT, OPERATOR_FAULT: JSON text */
    long duration_ms; /* STOP: CONT after this long (0: no automatic cont) */
    int *learners;    /* OPERATOR_SET: learners by global index */
    size_t nlearners;
    char **addrs;     /* OPERATOR_SET: raw extra "host:port" entries */
    size_t naddrs;
    int line;
} sc_action;

/* An expectation on one task of the coordinator's summary. */
typedef struct {
    int index;        /* >= 0: by position; -1: by name and nth */
    char *name;       /* full task name */
    int nth;          /* 1-based */
    char *status;     /* "completed", "failed" or NULL */
    char *message_contains;
    cJSON *result;    /* object: key path ("info.loss") -> exact value */
    char **result_has;   /* key paths that must be there */
    size_t nresult_has;
    char **result_lacks; /* key paths that must not */
    size_t nresult_lacks;
    cJSON *result_len;   /* object: key path -> length of a list there */
    long latency_max_ms; /* 0: unchecked */
    int line;
} sc_expect_task;

typedef enum { SC_WS_EVENTUALLY = 0, SC_WS_AT_END, SC_WS_NEVER_ABOVE, SC_WS_NEVER_BELOW } sc_ws_kind;
typedef struct {
    sc_ws_kind kind;
    int value;
    long from_ms; /* window start (0) */
    long to_ms;   /* window end, or by_ms for EVENTUALLY; < 0: the end */
    int line;
} sc_expect_world;

typedef struct {
    char *name;      /* metric name */
    cJSON *labels;   /* object of label -> string, or NULL */
    char op[3];      /* "==", "!=", ">=", "<=", ">", "<" */
    double value;
    int line;
} sc_expect_metric;

typedef struct {
    char *process;
    char *contains;
    bool absent;     /* the text must not appear */
    int line;
} sc_expect_log;

/* Events a process must write (docs/events.md): how many lines of one
 * event, optionally about one learner, whose fields equal the values of
 * "where" and contain the texts of "contains". */
typedef struct {
    char *process;
    int event;       /* evt_id */
    int learner;     /* global index; -1: any */
    cJSON *where;    /* object: field -> exact value, or NULL */
    cJSON *contains; /* object: field -> text it contains, or NULL */
    int min, max;    /* max < 0: unbounded */
    int line;
} sc_expect_event;

typedef struct {
    int learner;     /* global index */
    char *task;      /* full name or NULL: any */
    int min, max;    /* max < 0: unbounded */
    long after_ms;   /* count only tasks received after this time */
    int line;
} sc_expect_learner_tasks;

typedef struct {
    char *process;
    bool any_code;   /* only "exited" */
    int code;        /* expected exit code; -1: killed by a signal */
    int line;
} sc_expect_exit;

typedef struct {
    /* coordinator */
    int coordinator_ok;   /* -1 unchecked, 0 false, 1 true */
    int task_count;       /* -1 unchecked */
    char *all_status;     /* every task has this status */
    sc_expect_task *tasks;
    size_t ntasks;
    char **failures_contain; /* texts the summary's failures must contain */
    size_t nfailures_contain;
    sc_expect_world *world;
    size_t nworld;
    sc_expect_metric *metrics;
    size_t nmetrics;
    sc_expect_log *logs;
    size_t nlogs;
    sc_expect_event *events;
    size_t nevents;
    sc_expect_learner_tasks *learner_tasks;
    size_t nlearner_tasks;
    sc_expect_exit *exits;
    size_t nexits;
    /* operator journal */
    bool has_operator_failed;
    int *operator_failed; /* learners reported failed (exact set) */
    size_t noperator_failed;
    char **operator_requests; /* "METHOD PATH" that must be in the journal */
    size_t noperator_requests;
    int operator_max_in_flight; /* > 0: at most this many requests were in
                                   the operator at once (0: unchecked) */
    bool exactly_once;
    long max_duration_ms; /* 0: unchecked */
    int aggregator_alive; /* -1: default (checked unless an action ends it) */
    int line;
} sc_expect;

typedef struct {
    char *path;        /* as given */
    char *name;        /* the file name without directory and ".json" */
    char *description;
    uint64_t seed;
    double time_scale;
    long timeout_ms;
    long min_run_ms;   /* the run lasts at least this long */
    long sample_ms;    /* world-size sampling period */
    /* timings passed to the aggregator (already scaled or given) */
    long heartbeat_span_ms, heartbeat_tolerance_ms, max_retry_ms, retry_interval_ms,
        sync_period_ms, task_deadline_ms;
    bool timing_given[6];
    sc_group *groups;
    size_t ngroups;
    int nlearners;     /* sum of the groups' counts */
    /* aggregator */
    char **agg_args;
    size_t nagg_args;
    char **agg_env;    /* "NAME=value" */
    size_t nagg_env;
    bool k8s;          /* operator mode: a mock_operator is started */
    struct sc_profile *profile; /* "aggregator": {"profile": FILE}, owned; NULL:
                                   ours (--aggregator-profile overrides it) */
    char **op_args;
    size_t nop_args;
    char **op_faults;  /* JSON texts, added once the operator is ready */
    size_t nop_faults;
    /* coordinator */
    bool coordinator;  /* false: none is started */
    int rounds;        /* < 0: unset */
    char *script;      /* JSON text of the script list, or NULL */
    int expect_learners; /* < 0: unset */
    long coord_start_ms; /* after the aggregator's ready line */
    long coord_deadline_ms; /* coordinator's --task-deadline-ms; 0: unset */
    char **coord_args;
    size_t ncoord_args;
    sc_action *actions;
    size_t nactions;
    sc_expect expect;
} sc_scenario;

/* Process indices: 0 aggregator, 1 coordinator, 2 operator, 3 + g group g. */
enum { SC_PROC_AGG = 0, SC_PROC_COORD = 1, SC_PROC_OP = 2, SC_PROC_GROUP0 = 3 };
const char *sc_scenario_proc_name(const sc_scenario *s, int proc);
size_t sc_scenario_proc_count(const sc_scenario *s);
/* Group of a global learner index. */
int sc_scenario_group_of(const sc_scenario *s, int learner);

/* A task name as written ("learn", "get_data", or the full name) to the full
 * protocol name ("learner_learn_task"); NULL if unknown. Static string. */
const char *sc_task_full_name(const char *s);

/* A production-time duration ("90s", "1.5s", "250ms", "1m", "2h", "1m30s")
 * into *ms (unscaled); false if text is not one. */
bool sc_duration_parse(const char *text, double *ms);

/* Parses text (the contents of path). On errors returns NULL and writes
 * "path:line: message" lines (each ending in '\n') into *errors (heap; the
 * caller frees). seed_override: if has_seed, replaces the file's seed. */
sc_scenario *sc_scenario_parse(const char *path, const char *text, size_t len, char **errors);
sc_scenario *sc_scenario_load(const char *path, char **errors);
void sc_scenario_free(sc_scenario *s);

#endif
