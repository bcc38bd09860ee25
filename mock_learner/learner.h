/* learner: one mock learner, a slave (slave.h) that answers DI-engine's
 * learner tasks like the reference learner does (protocol.md, "Learner
 * tasks") and obeys the fault table (fault.h).
 *
 * Life of a learner, one explicit state changed by one function that logs
 * every transition:
 *   IDLE       its port is bound but not listening (connections refused);
 *              the state right after learner_new()
 *   HELD       not listening because of a fault (slow_join, refuse, drop);
 *              maybe with a timer that makes it listen later
 *   LISTENING  its slave runs; masters can connect
 *   DEAD       gone for good (die, or its port could not be bound again)
 * The port stays bound (SO_REUSEADDR) in every state but DEAD, so that a
 * learner that comes back listens on the same port.
 *
 * Tasks are worked on the loop: a timer of the learn time (learn tasks) or 0
 * (other tasks) plus injected delays, then the report. Never inside the
 * slave's own callbacks: a learner that must go away from a task callback
 * does it from a 0 ms timer.
 *
 * Ownership: a learner borrows its learner_env (loop, faults, dump), which
 * must outlive it; it owns its slave and sockets. JSON returned is the
 * caller's. Threading: the loop's thread only. */
#ifndef ML_LEARNER_H
#define ML_LEARNER_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "dump.h"
#include "ev.h"
#include "fault.h"

typedef struct learner learner;

/* Shared by every learner of the process (borrowed). */
typedef struct {
    ev_loop *loop;
    fault_set *faults;
    dump *dump;              /* NULL: no dump */
    const char *host;        /* address to listen on */
    int channel;
    long heartbeat_span_ms;
    const struct slave_allow *allow_master; /* --allow-master; NULL: anyone */
} learner_env;

typedef struct {
    int index;
    const char *id;          /* "learner3" (copied): its events' "learner" */
    const char *label;       /* its events' "label" (copied; NULL: the id) */
    const char *event_id;    /* its events' "learner": {id} and {port} are
                                replaced (NULL: the id) */
    int port;                /* 0: any free port */
    int batch_size;
    long learn_time_ms;
} learner_config;

/* Binds the learner's port (not listening yet). NULL with the reason in err. */
learner *learner_new(const learner_env *env, const learner_config *cfg, char *err, size_t errlen);
/* Stops everything at once (no report is sent) and frees. */
void learner_free(learner *l);

const char *learner_id(const learner *l);
int learner_port(const learner *l);
bool learner_listening(const learner *l);
bool learner_dead(const learner *l);

/* Start-up: an IDLE learner listens now (HELD and DEAD ones stay). Returns
 * 0, or -1 with the reason in err (the learner is then DEAD). */
int learner_start(learner *l, char *err, size_t errlen);

/* Applies a state fault at once (fault_now of fault_set_add): slow_join,
 * refuse, die, drop, no_heartbeat. at_start: before learner_start().
 * fault_id: the fault's id, for its fault_fired event. */
void learner_apply(learner *l, fault_kind kind, long ms, bool at_start, int fault_id);
/* Lifts what faults hold: a HELD learner listens now, paused heartbeats
 * resume. DEAD stays DEAD; a task that hangs stays hung. */
void learner_lift(learner *l);

/* {"id", "port", "state", "listening", "connected", "current_task",
 *  "current_task_name", "hung", "tasks": {NAME: n}, "learn_items",
 *  "learn_tasks", "learner_iter", "batch_size", "heartbeats",
 *  "heartbeats_paused", "connects"} */
cJSON *learner_state_json(const learner *l);

#endif
