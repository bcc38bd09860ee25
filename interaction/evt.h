/* evt: what happened, as typed events from one list, written as JSON lines
 * (`--events FILE` in every executable) and read back by the scenario runner
 * and scenario_from_events. Logs are for people; programs read events.
 * docs/events.md documents every event with an example line.
 *
 * A line is one JSON object: "event" (the name), "v" (EVT_SCHEMA_VERSION),
 * "seq" (0, 1, ... per process run: a gap means lines were lost), "t_ms"
 * (monotonic milliseconds since evt_init), "time" (wall clock, UTC, ISO 8601
 * with milliseconds), "process" (the program), "run" (random id of this
 * process run, to tell two runs' lines apart), then the event's own fields
 * in the order of EVT_FIELDS, every one of them (null when unknown).
 *
 * Writing: one process-wide sink, set up once by evt_init() on the loop's
 * thread (like ilog). Lines are buffered and written when 64 KiB are
 * pending, at least once a second (a timer on the loop), by evt_flush(), and
 * by evt_close(); never fsync'd. The file is capped: when it would pass half
 * of max_bytes it is renamed to FILE.1 (replacing an older one) and a new
 * FILE is started, so the two never hold more than max_bytes. A write error
 * never stops the process: it is logged once (warn) and counted
 * (evt_stats.write_errors); the lines concerned are dropped.
 *
 * Reading: evt_parse_line() checks one line against the list (known event,
 * every field of its type, a schema version this program knows).
 *
 * Ownership: strings and JSON in evt_fields are borrowed for the call.
 * Threading: the loop's thread only (emit, flush, close); the parse
 * functions are pure and safe from any thread. */
#ifndef EVT_H
#define EVT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "ev.h"

#define EVT_SCHEMA_VERSION 1

/* Field types: STR a string (NULL: null), INT a 64-bit integer, DBL a
 * number (milliseconds with fractions), JSON a cJSON value (NULL: null). */
typedef enum { EVT_STR, EVT_INT, EVT_DBL, EVT_JSON } evt_type;

/* Every field any event has: name, C type tag, meaning. An event's fields
 * are a subset; the same name means the same thing in every event. */
#define EVT_FIELDS(F)                                                                                   \
    F(learner, STR, "the learner's id as the aggregator knows it (learner0, or its name from the "      \
                    "operator); for a mock learner, the id it was given")                               \
    F(label, STR, "the mock's own label for the learner (group name and index), when it has one")       \
    F(addr, STR, "the learner's host:port")                                                             \
    F(name, STR, "task name (learner_learn_task, ...)")                                                 \
    F(id, STR, "task id (the coordinator's)")                                                           \
    F(sub_id, STR, "the id of the task one learner was sent for a coordinator task")                    \
    F(items, INT, "learn items carried (-1: not a learn task)")                                         \
    F(status, STR, "\"completed\" or \"failed\" (the coordinator also: \"start_failed\", \"skipped\")") \
    F(message, STR, "why a task failed, as the coordinator is told (null when completed)")              \
    F(reason, STR, "why it happened, in words (for people: match on cause, never on reason)")           \
    F(cause, STR, "why it happened, as one word of EVT_CAUSES (for programs)")                          \
    F(latency_ms, DBL, "from receipt (or sending) to the end")                                          \
    F(world, INT, "the world size after the event (learners connected)")                                \
    F(attempts, INT, "how many /connect attempts so far")                                               \
    F(after_ms, INT, "milliseconds since the learner's join window (or absence) began")                 \
    F(kind, STR, "fault kind (crash, hang, error_status, ...)")                                         \
    F(count, INT, "the fault's firing: 1 for its first")                                                \
    F(fault, INT, "the fault's id in the mock that applies it (1, 2, ... in the order given; 0: none)") \
    F(master, STR, "the master's address as it gave it in /connect")                                    \
    F(added, JSON, "learners the operator listed that the aggregator took in (a list of ids)")          \
    F(removed, JSON, "learners no longer listed, disconnected (a list of ids)")                         \
    F(failed, JSON, "learners that failed: reported to the operator in this sync, or not joined at ready " \
                    "(a list of ids)")                                                                 \
    F(joined, JSON, "learners in the world at ready (a list of ids)")                                   \
    F(error, STR, "what went wrong with the operator (null: the sync succeeded)")                       \
    F(method, STR, "HTTP method of an operator request")                                                \
    F(path, STR, "HTTP path of an operator request")                                                    \
    F(http_status, INT, "the HTTP status answered")                                                     \
    F(version, STR, "the program's version")                                                            \
    F(pid, INT, "the process id")                                                                       \
    F(config, JSON, "the settings that shape behaviour (learners, timings, time scale)")                \
    F(signal, STR, "the signal that asked for the shutdown (SIGTERM, SIGINT), or null")                 \
    F(learners, INT, "learners whose lines the mock coordinator's dumps hold")                          \
    F(rounds, INT, "learn rounds the mock coordinator sent")                                            \
    F(merges, INT, "merged learn results the mock coordinator recomputed from the dumps")               \
    F(sums, INT, "get-data batch sizes the mock coordinator checked against the dumps")

typedef enum {
#define EVT_X_FIELD_ENUM(fname, type, doc) EVT_F_##fname,
    EVT_FIELDS(EVT_X_FIELD_ENUM)
#undef EVT_X_FIELD_ENUM
        EVT_FIELD_COUNT
} evt_field_id;

#define EVF(fname) (UINT64_C(1) << EVT_F_##fname)

/* The events: name, fields (a mask of EVF()), meaning. */
#define EVT_LIST(E)                                                                                     \
    E(started, EVF(version) | EVF(pid) | EVF(config), "the process started (first line of each run)") \
    E(ready, EVF(world) | EVF(joined) | EVF(failed),                                                    \
      "start-up ended: every listening port is up (the aggregator: every learner joined or failed)")  \
    E(learner_joined, EVF(learner) | EVF(label) | EVF(addr) | EVF(world) | EVF(attempts) | EVF(after_ms), \
      "a learner accepted /connect for the first time: it is in the world")                            \
    E(learner_connect_error, EVF(learner) | EVF(addr) | EVF(reason) | EVF(cause) | EVF(http_status) |    \
                                 EVF(attempts) | EVF(after_ms),                                         \
      "a /connect to a learner failed: emitted for its first failure and whenever the reason changes") \
    E(learner_join_failed, EVF(learner) | EVF(addr) | EVF(reason) | EVF(cause) | EVF(attempts) |         \
                               EVF(after_ms),                                                           \
      "a learner did not join within max_retry: reported failed (it is still retried in the background)") \
    E(learner_left, EVF(learner) | EVF(addr) | EVF(reason) | EVF(cause) | EVF(world),                   \
      "a connected learner was lost (heartbeats, a failed request, a restart): it left the world")     \
    E(learner_retaken, EVF(learner) | EVF(addr) | EVF(world) | EVF(attempts) | EVF(after_ms),          \
      "a learner that had left (or had failed to join) accepted /connect again")                       \
    E(learner_removed, EVF(learner) | EVF(addr) | EVF(reason) | EVF(cause) | EVF(world),                \
      "a learner was forgotten (the operator no longer lists it)")                                     \
    E(heartbeat_lost, EVF(learner) | EVF(addr) | EVF(after_ms),                                        \
      "no heartbeat within the tolerance (after_ms: since the last one)")                              \
    E(task_received, EVF(learner) | EVF(name) | EVF(id) | EVF(items),                                   \
      "a task arrived from the master (the aggregator: from the coordinator; a mock learner: from the " \
      "aggregator, learner set)")                                                                      \
    E(task_sent, EVF(learner) | EVF(name) | EVF(id) | EVF(items),                                       \
      "a master sent a task (the coordinator: to the aggregator; learner names the slave when known)") \
    E(subtask_sent, EVF(learner) | EVF(name) | EVF(id) | EVF(sub_id) | EVF(items),                      \
      "the aggregator sent one learner its part of a coordinator task")                                \
    E(subtask_done, EVF(learner) | EVF(name) | EVF(id) | EVF(sub_id) | EVF(status) | EVF(reason) |      \
                        EVF(cause) | EVF(http_status) | EVF(latency_ms),                               \
      "one learner's part ended: its report, a failure, a lost connection or a deadline")              \
    E(task_done, EVF(learner) | EVF(name) | EVF(id) | EVF(status) | EVF(message) | EVF(cause) |         \
                     EVF(latency_ms),                                                                   \
      "a task ended (the aggregator: its answer to the coordinator; the coordinator: the answer it got; " \
      "a mock learner: its report, learner set)")                                                      \
    E(operator_sync, EVF(added) | EVF(removed) | EVF(failed) | EVF(error) | EVF(http_status) |          \
                         EVF(latency_ms) | EVF(world),                                                  \
      "one exchange with the operator server ended")                                                   \
    E(operator_request, EVF(method) | EVF(path) | EVF(http_status) | EVF(kind),                         \
      "the mock operator answered a request (kind: the fault applied, or null)")                       \
    E(fault_fired, EVF(learner) | EVF(label) | EVF(kind) | EVF(name) | EVF(count) | EVF(fault) |        \
                       EVF(reason),                                                                     \
      "a mock applied an injected fault (name: the task it hit, or null; learner null: the process)")   \
    E(master_connected, EVF(learner) | EVF(label) | EVF(master),                                        \
      "seen from a slave: a master's /connect was accepted")                                           \
    E(master_lost, EVF(learner) | EVF(label) | EVF(master) | EVF(reason) | EVF(cause),                  \
      "seen from a slave: the master disconnected or stopped answering heartbeats")                    \
    E(dumps_checked, EVF(learners) | EVF(rounds) | EVF(merges) | EVF(sums),                             \
      "the mock coordinator checked the learners' dumps against what it sent and got (failures: in "    \
      "its summary)")                                                                                   \
    E(shutdown, EVF(signal) | EVF(reason), "the process is stopping")

/* The words of the "cause" field: one list, so that a program (the runner,
 * scenario_from_events) can act on why something happened without reading
 * the prose of "reason". */
#define EVT_CAUSES(C)                                                                                   \
    C(refused, "the connection was refused: nothing listens at the address")                          \
    C(unreachable, "the address could not be resolved or reached in time")                           \
    C(rejected, "the peer answered /connect with an error (for example 403: it refuses connections)")  \
    C(http_status, "a request was answered with an error status (http_status says which)")           \
    C(deadline, "no report within the task's deadline")                                              \
    C(connection_lost, "the connection was lost (requests failed, the peer went away)")              \
    C(heartbeat, "no heartbeat within the tolerance")                                                 \
    C(restarted, "the peer no longer knows this master (it restarted): /task/new answered 403/302")   \
    C(reported_failure, "the learner reported the task failed (/slave/task/fail)")                   \
    C(malformed, "a report or result that is not valid (not JSON, wrong shape)")                     \
    C(truncated, "a report cut short")                                                               \
    C(wrong_length, "learn data whose length does not match the learners' batch sizes")              \
    C(not_connected, "a learner the task needs is not in the world")                                 \
    C(unmergeable, "results that cannot be merged")                                                  \
    C(unknown_task, "a task name the receiver does not know")                                        \
    C(operator, "the operator server no longer lists it")                                            \
    C(disconnected, "it disconnected on purpose (/disconnect)")                                      \
    C(shutdown, "the process is shutting down")                                                      \
    C(other, "anything else (reason says what)")

typedef enum {
#define EVT_X_CAUSE_ENUM(cname, doc) EVT_CAUSE_##cname,
    EVT_CAUSES(EVT_X_CAUSE_ENUM)
#undef EVT_X_CAUSE_ENUM
        EVT_CAUSE_COUNT
} evt_cause;
/* The word of a cause ("other" when out of range); -1 for an unknown word. */
const char *evt_cause_name(evt_cause c);
const char *evt_cause_doc(evt_cause c);
int evt_cause_lookup(const char *word);

typedef enum {
#define EVT_X_ENUM(ename, fields, doc) EVT_##ename,
    EVT_LIST(EVT_X_ENUM)
#undef EVT_X_ENUM
        EVT_COUNT
} evt_id;

/* The values of one event; only the fields of its mask are written. */
typedef struct {
#define EVT_X_CTYPE_STR const char *
#define EVT_X_CTYPE_INT int64_t
#define EVT_X_CTYPE_DBL double
#define EVT_X_CTYPE_JSON const cJSON *
#define EVT_X_MEMBER(fname, type, doc) EVT_X_CTYPE_##type fname;
    EVT_FIELDS(EVT_X_MEMBER)
#undef EVT_X_MEMBER
} evt_fields;

/* Emits one event: EVT_EMIT(learner_left, .learner = id, .reason = why). */
#define EVT_EMIT(ename, ...) evt_emit(EVT_##ename, &(evt_fields){__VA_ARGS__})

/* Schema look-ups (static data). */
const char *evt_name(evt_id id);
const char *evt_doc(evt_id id);
uint64_t evt_mask(evt_id id);
/* -1 if name is not an event of the list. */
int evt_lookup(const char *name);
const char *evt_field_name(evt_field_id f);
evt_type evt_field_type(evt_field_id f);
const char *evt_field_doc(evt_field_id f);

typedef struct {
    const char *path;    /* NULL: no sink (evt_emit and the rest are no-ops) */
    const char *process; /* the program's name */
    size_t max_bytes;    /* the cap on FILE + FILE.1; 0: 64 MiB (at least 4 KiB) */
    unsigned flush_ms;   /* pending lines are written within this; 0: 1000 */
    bool each_line;      /* write every line at once (for a runner that reacts
                            to events as they happen) */
    const cJSON *config; /* the "started" line's config (borrowed), or NULL */
} evt_opts;

/* The flags every executable takes for its events (the same in each):
 * EVT_CLI_HELP is their --help text. evt_cli_flag() handles one of them:
 * flag is "--events", "--events-max-bytes", "--events-flush-ms" (these take
 * value) or "--events-each-line" (no value; value ignored). Returns 1 when
 * it was one of them, 0 when it is not, -1 with err for a bad value. The
 * path is borrowed from value. */
#define EVT_CLI_HELP                                                                                    \
    "  --events FILE           write what happens as typed JSON lines (docs/events.md)\n"               \
    "  --events-max-bytes N    cap on FILE and its rotated FILE.1 together (default 64 MiB,\n"          \
    "                          at least 4096)\n"                                                        \
    "  --events-flush-ms MS    pending event lines are written within MS (default 1000)\n"              \
    "  --events-each-line      write every event line at once (for a runner that follows\n"             \
    "                          the file as it grows)\n"
int evt_cli_flag(evt_opts *o, const char *flag, const char *value, char *err, size_t errlen);
/* Whether an events flag takes a value (false for --events-each-line and
 * for flags that are not events flags). */
bool evt_cli_takes_value(const char *flag);

/* Opens the sink and writes the "started" line. loop drives the periodic
 * flush (NULL: every line is written at once). -1 with err if the file
 * cannot be opened; called again, it closes the previous sink first. */
int evt_init(ev_loop *loop, const evt_opts *opts, char *err, size_t errlen);
bool evt_enabled(void);
void evt_emit(evt_id id, const evt_fields *f);
/* Writes what is pending (before a deliberate crash, at exit). */
void evt_flush(void);
/* Flushes and closes the sink (idempotent). Call before the loop is freed. */
void evt_close(void);

/* In-process observers (tests, metrics): called for every event emitted,
 * after it is formatted, with the line (no newline). One hook; NULL clears. */
typedef void (*evt_hook)(void *data, evt_id id, const evt_fields *f, const char *line, size_t len);
void evt_set_hook(evt_hook hook, void *data);

typedef struct {
    unsigned long long lines;        /* emitted */
    unsigned long long bytes;        /* written to files */
    unsigned long long write_errors; /* failed writes (their lines are lost) */
    unsigned long long rotations;
} evt_stats;
evt_stats evt_get_stats(void);

/* One line read back. tree owns everything; free with evt_record_free. */
typedef struct {
    cJSON *tree;
    evt_id id;
    int v;
    int64_t seq;
    double t_ms;
    const char *process; /* borrowed from tree; "" if absent */
    const char *run;     /* likewise */
} evt_record;
/* Parses and checks one line (without its newline). 0, or -1 with err
 * ("not JSON: ...", "unknown event \"x\"", "schema version 2 is newer than
 * this program's 1", "field \"world\" should be an integer, not a string",
 * "missing field \"reason\""). Unknown extra fields are allowed. */
int evt_parse_line(const char *line, size_t len, evt_record *out, char *err, size_t errlen);
void evt_record_free(evt_record *r);
/* Field accessors on a parsed record (NULL / false when null). */
const char *evt_str(const evt_record *r, evt_field_id f);
bool evt_int(const evt_record *r, evt_field_id f, int64_t *out);
bool evt_dbl(const evt_record *r, evt_field_id f, double *out);
const cJSON *evt_json(const evt_record *r, evt_field_id f);

#endif
