/* fault: the mock learner's fault schema, a small set of named faults given
 * as JSON objects (from --fault or the control API), and the plan they make
 * for one task. The schema (kinds, members, their ranges and defaults) is one
 * table in fault.c; the scenario runner validates scenario files with
 * fault_check(), the same parser mock_learner uses, so the two cannot drift.
 *
 * A fault object:
 *   {"learner": 2 | "learner2" | "all", "kind": K, "task": NAME, "at": k,
 *    "times": n, "prob": p, "optional": b, ...the kind's parameters}
 *   learner  which learner (index, id, or "all"; default "all")
 *   task     only tasks of this name (default: any name); the protocol's
 *            names may be written short ("learn" is learner_learn_task); a
 *            near miss of one ("learner_learn_tsak") is refused as a typo;
 *            any other name is taken as it is (a task of the caller's own)
 *   at       from the k-th task of that name on that learner, 1-based,
 *            counted from the start of the process (without "task": the
 *            k-th task of any name); default: every one
 *   times    fires on n tasks in a row from "at" (default 1; "at" defaults
 *            to 1 with times): "at": 2, "times": 3 fails the 2nd, 3rd and 4th
 *            and lets the later ones through ("fail 3 times, then succeed")
 *   prob     fires with probability p (0..1); the draw is a hash of the seed,
 *            the fault's id, the learner, the task name and its count, so it
 *            does not depend on the order in which learners get tasks
 *   optional the fault need not fire in a run (a probabilistic one, say);
 *            mock_learner keeps it for listings, the runner for its verdict
 * Unknown members are rejected (with a "did you mean"), so that a typo is
 * not a silent no-op.
 *
 * Kinds come in two families (see fault_kind_is_state()):
 *   task kinds fire on task arrival (every matching task, or those of "at");
 *   state kinds (slow_join, refuse, die, drop, no_heartbeat) act on the
 *   learner itself: at once when the fault has none of task/at/times/prob
 *   (at start-up when given with --fault), otherwise on a matching task.
 *
 * Ownership: a fault_set owns its faults; JSON given to it is borrowed, JSON
 * returned is the caller's (cJSON_Delete).
 * Threading: the loop's thread only (no locking); fault_check() is pure. */
#ifndef ML_FAULT_H
#define ML_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "suggest.h"

#define FAULT_MAX 1024           /* faults installed at once */
#define FAULT_MAX_MS 86400000L   /* longest delay of any kind: one day */
#define FAULT_NAME_MAX 128       /* longest task name in a fault */
#define FAULT_PLAN_HITS 32       /* faults of one task told one by one */

#define FAULT_KINDS(X)                                                                                  \
    X(SLOW_JOIN, "slow_join", "{\"after_ms\": T}: listen only T ms after start (default 1000); "         \
                              "--fault only")                                                            \
    X(REFUSE, "refuse", "never listen (connections refused); at run time: stop listening until the "     \
                        "fault is cleared or the learner is resumed")                                    \
    X(FAIL, "fail", "report /slave/task/fail with {\"message\": \"injected failure\"}")                   \
    X(CRASH, "crash", "{\"when\": \"before\"|\"during\"}: the whole process exits at once with code 3, "  \
                      "before answering /task/new or after accepting the task (default before)")         \
    X(DIE, "die", "this learner alone vanishes for good: its port closes, heartbeats stop, it never "    \
                  "reports; with a task trigger the task is accepted first")                              \
    X(HANG, "hang", "accept the task and never report it")                                               \
    X(DELAY, "delay", "{\"ms\": T}: report T ms later than usual (default 1000)")                        \
    X(ERROR_STATUS, "error_status", "{\"code\": C, \"status\": S}: answer /task/new with the error "      \
                                    "envelope of protocol code C (default 602, task refused) and HTTP "  \
                                    "S (default: the code's own status, 403 for 602; 400-599); the "     \
                                    "task is not accepted")                                              \
    X(MALFORMED, "malformed", "report a body that is not JSON")                                          \
    X(TRUNCATED, "truncated", "report with a Content-Length larger than the bytes sent, then drop the "  \
                              "connection")                                                              \
    X(NO_HEARTBEAT, "no_heartbeat", "stop sending heartbeats (a silent partition); tasks still run")     \
    X(DROP, "drop", "{\"back_after_ms\": T}: stop listening, close connections and forget the master, "  \
                    "then listen again on the same port after T ms (default 1000)")                      \
    X(BAD_RESULT, "bad_result", "a result that cannot be merged: learn \"info\" is a list, get-data "     \
                                "\"batch_size\" is a string, any other result is a list")                \
    X(WRONG_BATCH, "wrong_batch", "get-data reports batch_size + 1 (only learner_get_data_task), so the " \
                                  "next learn slice fails this learner's length check")

typedef enum {
#define FAULT_X_ENUM(id, name, doc) FK_##id,
    FAULT_KINDS(FAULT_X_ENUM)
#undef FAULT_X_ENUM
        FK_COUNT
} fault_kind;

const char *fault_kind_name(fault_kind k);
const char *fault_kind_doc(fault_kind k);
/* True for the state kinds (slow_join, refuse, die, drop, no_heartbeat). */
bool fault_kind_is_state(fault_kind k);
/* The members a fault of kind k may have, NULL-terminated (static). */
const char *const *fault_kind_members(fault_kind k);

/* What is wrong with a fault object: the member at fault ("" for the object
 * itself) and a phrase that reads after "member: " ("unknown key for kind
 * crash (did you mean 'when'?)"). */
typedef suggest_error fault_error;

/* Validates one fault object exactly as fault_set_add() does for a process of
 * learner_count learners named <id_prefix>k. at_start: as from --fault. */
bool fault_check(const cJSON *spec, int learner_count, const char *id_prefix, bool at_start, fault_error *e);

typedef struct fault_set fault_set;

/* learner_count and id_prefix resolve "learner" members ("learner2" is index
 * 2 when the prefix is "learner"); seed drives "prob". */
fault_set *fault_set_new(int learner_count, const char *id_prefix, uint64_t seed);
/* Learner k is named <id_prefix><base + k> (mock_learner --id-base); 0 by
 * default. */
void fault_set_id_base(fault_set *fs, int base);
void fault_set_free(fault_set *fs);

/* A state fault that acts at once: the caller applies it. */
typedef struct {
    fault_kind kind;
    int learner; /* index, or -1 for every learner */
    long ms;     /* slow_join after_ms, drop back_after_ms; else 0 */
    int id;      /* the fault's id (for its fault_fired event) */
} fault_now;

/* Validates a fault object (or a JSON list of them: all or none are added)
 * and adds it. at_start: from --fault (slow_join is allowed only there).
 * Returns the id of the first fault added (>= 1), or 0 with the reason in err
 * ("member: what is wrong", see fault_error). Faults that act at once are listed in
 * now[0..*nnow) (now may hold FAULT_MAX entries); they are kept in the set as
 * spent, so that GET /fault shows them. ids: if not NULL, receives each added
 * id (FAULT_MAX entries), *nids their count. */
int fault_set_add(fault_set *fs, const cJSON *spec, bool at_start, fault_now *now, size_t *nnow, int *ids,
                  size_t *nids, char *err, size_t errlen);
/* Removes every fault; returns how many there were. */
size_t fault_set_clear(fault_set *fs);
/* Removes one fault; false if no fault has this id. */
bool fault_set_remove(fault_set *fs, int id);
size_t fault_set_count(const fault_set *fs);

/* How a task is answered and reported. */
typedef enum {
    REPORT_NORMAL = 0, /* the learner's own result (complete, or fail for a bad task) */
    REPORT_FAIL,       /* injected /slave/task/fail */
    REPORT_MALFORMED,
    REPORT_TRUNCATED,
} fault_report;

/* The combined effect of every fault that fired on one task. Precedence when
 * several fire: crash before > error_status (the task is not accepted) >
 * die > drop (accepted, then the learner goes) > crash during > hang >
 * the report: fail > malformed > truncated > normal; bad_result and
 * wrong_batch change a normal result; delays add up; no_heartbeat pauses
 * heartbeats whatever else happens (unless the process crashes first). */
typedef struct {
    bool crash_before;
    int status;         /* > 0: answer /task/new with this HTTP status */
    int code;           /* ... and this protocol code in the envelope */
    const char *code_message; /* the reference's message for it (static) */
    bool die;
    bool drop;
    long drop_back_ms;
    bool crash_during;
    bool hang;
    long delay_ms;      /* extra time before the report */
    fault_report report;
    bool bad_result;
    bool wrong_batch;
    bool pause_heartbeats;
    char fired[256];    /* "fail#3 delay#4" for logs; empty if none */
    struct {            /* each fault that fired, for its fault_fired event */
        fault_kind kind;
        int id;
        unsigned long count; /* its firings so far, this one included */
    } hits[FAULT_PLAN_HITS];
    size_t nhits;       /* at most FAULT_PLAN_HITS (more are only counted) */
    size_t nhits_more;
} fault_plan;

/* The plan for the n_name-th task named `name` (n_all-th task of any name)
 * on learner `learner`. Counts are 1-based and include this task. */
void fault_set_plan(fault_set *fs, int learner, const char *name, unsigned long n_name, unsigned long n_all,
                    fault_plan *out);

/* [{"id", "fired", ...the fault object as given...}, ...] */
cJSON *fault_set_to_json(const fault_set *fs);

/* Resolves a learner reference as text: "2" or "learner2" (with the set's
 * prefix). Returns the index, or -1 if it names no learner. */
int fault_learner_index(const fault_set *fs, const char *ref);

#endif
