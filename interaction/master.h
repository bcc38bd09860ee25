/* master: the master end of the interaction protocol (the coordinator, or the
 * aggregator towards its learners). An HTTP server for /slave/heartbeat,
 * /slave/task/complete, /slave/task/fail, /ping, /shutdown, and a client that
 * connects to, disconnects from and sends tasks to many slaves at once.
 *
 * Every task has a deadline; a connection whose heartbeats stop for
 * heartbeat_tolerance is dropped and its pending task fails at once with a
 * message naming the slave and the reason.
 *
 * Ownership: a master_conn belongs to the master; it stays valid until the
 * on_lost callback for it returns, or until master_disconnect() is called. A
 * master_task is valid until its callback returns. Results handed to
 * callbacks are borrowed; a callback may take the result over by setting
 * *result to NULL.
 * Threading: the loop's thread only. */
#ifndef MASTER_H
#define MASTER_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "ev.h"
#include "evt.h"
#include "hs.h"
#include "proto.h"

typedef struct master master;
typedef struct master_conn master_conn;
typedef struct master_task master_task;

typedef struct {
    hs_config http;                 /* where the master listens */
    const char *advertise;          /* "http://host:port" sent to slaves;
                                       NULL: the listening address */
    int channel;                    /* default 0 */
    long heartbeat_tolerance_ms;    /* default 17000 */
    long heartbeat_check_ms;        /* default 1000 */
    long task_deadline_ms;          /* default 600000; 0: none */
    int retries;                    /* connection-level retries (5) */
    int connect_retries;            /* for /connect; -1: same as retries */
    long retry_wait_ms;             /* (1000) */
    long connect_timeout_ms;        /* per HTTP attempt (2000) */
    long request_timeout_ms;        /* per HTTP attempt (30000) */
} master_config;

void master_config_init(master_config *cfg);

typedef struct {
    /* A connection was lost (heartbeats stopped); its pending task has
     * already failed. The conn is freed after this returns. */
    void (*on_lost)(void *ud, master_conn *c, const char *why);
    /* A heartbeat arrived (optional). */
    void (*on_heartbeat)(void *ud, master_conn *c);
    /* /shutdown was accepted (optional); the HTTP server stops after the
     * reply, the embedding program decides what else stops. */
    void (*on_shutdown)(void *ud);
    /* A request for a path the protocol does not define (optional): return
     * true after answering it with hs_reply() (e.g. GET /metrics), false to
     * let the master answer 404. */
    bool (*on_http)(void *ud, hs_request *r);
} master_callbacks;

master *master_new(ev_loop *loop, const master_config *cfg, const master_callbacks *cbs, void *ud,
                   char *err, size_t errlen);
/* Frees the master: pending tasks and connects are cancelled without
 * callbacks; no request is sent. */
void master_free(master *m);
int master_port(const master *m);
const char *master_self_token(const master *m);
const char *master_advertise(const master *m);
hs_server *master_http(master *m);

/* Outcome of connect/disconnect: ok, or an error message. */
typedef void (*master_connect_cb)(void *ud, master_conn *c, bool ok, const char *error);

/* Connects to the slave at host:port under a unique name. data: the "data"
 * object of the /connect body (borrowed; NULL for {}). The callback always
 * runs later; on failure the conn is freed after it returns. NULL if the
 * name is taken (err says so). */
master_conn *master_connect(master *m, const char *name, const char *host, int port,
                            const cJSON *data, master_connect_cb cb, void *ud, char *err,
                            size_t errlen);
/* Sends DELETE /disconnect (fire and forget), fails the pending task with
 * `why`, and frees the conn at once. */
void master_disconnect(master_conn *c, const char *why);
/* Forgets the conn without telling the slave (used when it is known dead). */
void master_drop(master_conn *c, const char *why);

const char *master_conn_name(const master_conn *c);
bool master_conn_ready(const master_conn *c); /* connected, not lost */
master_conn *master_find(master *m, const char *name);
void master_conn_set_ud(master_conn *c, void *ud);
void *master_conn_ud(const master_conn *c);
/* Milliseconds since the last heartbeat. */
long master_conn_heartbeat_age_ms(const master_conn *c);

/* Outcome of a task: TASK_COMPLETED, TASK_FAILED (the slave reported
 * failure, or the master failed it: deadline, connection lost), or
 * TASK_START_FAILED (/task/new got an error status or no answer). result:
 * the slave's result object (may be NULL). error: NULL for a slave's own
 * report; else why the master ended it ("learner3: deadline of 5000 ms
 * passed", "learner3: /task/new answered 500: ..."). */
typedef void (*master_task_cb)(void *ud, master_task *t, proto_task_state state, cJSON **result,
                               const char *error);

/* Sends a task. data_json: the task's data object as JSON text (taken over),
 * e.g. {"name": "learner_learn_task", "data": [...]}. deadline_ms: 0 uses
 * the master's default, < 0 none. NULL if the connection is not ready
 * (err says so); the callback always runs later otherwise. */
master_task *master_task_send(master_conn *c, char *data_json, size_t len, long deadline_ms,
                              master_task_cb cb, void *ud, char *err, size_t errlen);
/* The envelope master_task_send() puts around a task's data,
 * {"task": {"id": "<uuid>"}, "data": <data>}: MASTER_TASK_HEAD bytes before
 * the data, MASTER_TASK_TAIL after it. */
#define MASTER_TASK_HEAD (sizeof "{\"task\": {\"id\": \"\"}, \"data\": " - 1 + PROTO_UUID_LEN)
#define MASTER_TASK_TAIL ((size_t)1)
/* Like master_task_send(), without moving the data: buf (heap, taken over,
 * freed also on failure) holds MASTER_TASK_HEAD bytes of room, then the
 * data's JSON text (len bytes), then room for MASTER_TASK_TAIL + 1 bytes
 * (so its size is at least MASTER_TASK_HEAD + len + MASTER_TASK_TAIL + 1);
 * the envelope is written into the room. For large data built by the
 * caller (a learn batch). */
master_task *master_task_send_framed(master_conn *c, char *buf, size_t len, long deadline_ms,
                                     master_task_cb cb, void *ud, char *err, size_t errlen);
/* Like master_task_send_framed() for data = head, span, tail (head_len,
 * span_len, tail_len bytes), without copying the span: it is sent from
 * where it is (hc's body_borrowed), and must stay valid until
 * release(release_ud), which is called exactly once: when the /task/new
 * request is over (answered, failed after its retries, or ended with the
 * task or the master; the request may outlive the task), or before this
 * returns NULL. head and tail are copied (borrowed for the call). The bytes
 * on the wire are those master_task_send_framed() sends for the same data.
 * For a slice of a large body received (a learn batch's items). */
master_task *master_task_send_span(master_conn *c, const char *head, size_t head_len, const char *span,
                                   size_t span_len, void (*release)(void *ud), void *release_ud,
                                   const char *tail, size_t tail_len, long deadline_ms, master_task_cb cb,
                                   void *ud, char *err, size_t errlen);
/* Cancels a task: no callback; a report that arrives later is answered
 * "Task not found.". */
void master_task_cancel(master_task *t);
const char *master_task_id(const master_task *t);
/* Why a task failed (valid in its callback): EVT_CAUSE_deadline,
 * connection_lost, heartbeat, restarted, refused, unreachable, http_status
 * (with master_task_http_status), malformed, truncated, reported_failure,
 * disconnected; EVT_CAUSE_other for a completed task. */
evt_cause master_task_cause(const master_task *t);
long master_task_http_status(const master_task *t);
/* Why a connection was lost (in on_lost) or /connect failed (in its
 * callback): refused, unreachable, connection_lost, rejected (an error
 * status: master_conn_http_status), heartbeat, restarted, malformed,
 * truncated. */
evt_cause master_conn_cause(const master_conn *c);
long master_conn_http_status(const master_conn *c);
master_conn *master_task_conn(const master_task *t);
proto_task_state master_task_state(const master_task *t);

/* HTTP requests of the master's client still in flight (e.g. the
 * /disconnect requests sent at shut-down). */
unsigned master_requests_pending(const master *m);
/* Bytes of HTTP bodies received and sent by the master (server and client). */
void master_bytes(const master *m, unsigned long long *in, unsigned long long *out);

/* Number of connections and their names in connection order. */
size_t master_conn_count(const master *m);
master_conn *master_conn_at(const master *m, size_t i);

#endif
