/* slave: the slave end of the interaction protocol (a learner, or the
 * aggregator towards its coordinator): /connect, /disconnect, /task/new,
 * /ping, /shutdown, with every check in the order of protocol.md; heartbeats
 * to the master every heartbeat_span; loss of the master detected when its
 * heartbeats fail.
 *
 * Tasks are asynchronous: /task/new answers at once after on_task accepted
 * the task; the embedding program finishes the current task later, from its
 * own loop, with slave_task_complete() / slave_task_fail(). One task at a time.
 *
 * Ownership: cJSON passed to callbacks is borrowed for the call; results given
 * to slave_task_* are taken over. Threading: the loop's thread only. */
#ifndef SLAVE_H
#define SLAVE_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "ev.h"
#include "hs.h"

typedef struct slave slave;

/* Who may be this slave's master (--allow-master ADDR[/PREFIX],...): a list
 * of IPv4 and IPv6 networks. With one, a /connect is refused (403, code 503,
 * the JSON envelope, a message naming the address) when the peer's address
 * or the host of the master address in its body (which heartbeats and
 * reports then go to) is not in it. Host names are not resolved: a master
 * address must then be an IP literal. An IPv4-mapped IPv6 address
 * (::ffff:10.0.0.1) is taken as its IPv4 address. Without a list anyone may
 * connect, as in the reference; slave_new then warns once per process when
 * it listens beyond loopback. */
typedef struct slave_allow slave_allow;

#define SLAVE_ALLOW_MAX 1024 /* networks in one list */

slave_allow *slave_allow_new(void);
void slave_allow_free(slave_allow *a);
/* Adds the comma-separated networks of spec ("10.0.0.0/8,::1"; no prefix:
 * that address alone; host bits under the prefix are ignored). -1 with a
 * message naming the entry and what is wrong in err (nothing is added). */
int slave_allow_add(slave_allow *a, const char *spec, char *err, size_t errlen);
/* A program's --allow-master flag (repeatable): *list is made on first use;
 * -1 with "--allow-master: ..." in err. */
int slave_allow_flag(slave_allow **list, const char *value, char *err, size_t errlen);
size_t slave_allow_count(const slave_allow *a);
/* Whether ip (an IPv4 or IPv6 literal, IPv6 possibly in brackets) is in the
 * list; false for anything else (a host name). */
bool slave_allow_has(const slave_allow *a, const char *ip);
/* The list as text ("10.0.0.0/8, ::1/128"), for logs; caller frees. */
char *slave_allow_text(const slave_allow *a);
/* Whether host (an address or a name, NULL: the default 127.0.0.1) is a
 * loopback address ("localhost" counts). */
bool slave_host_is_loopback(const char *host);

typedef struct {
    const char *name;        /* for logs, e.g. "learner3" */
    const char *event_learner; /* master_connected / master_lost events: their
                                  "learner" (the id the master knows this
                                  slave by; NULL: null) and "label" (the
                                  embedder's own name for it; NULL: null).
                                  Copied. */
    const char *event_label;
    hs_config http;          /* where to listen (and limits) */
    int channel;             /* the slave's channel (default 0) */
    long heartbeat_span_ms;  /* default 3000, minimum 200 unless tests
                                lower it with allow_fast_heartbeat */
    bool allow_fast_heartbeat;
    int heartbeat_fail_limit; /* consecutive failed heartbeats (after their
                                 retries) that mean the master is lost;
                                 default 3 */
    int retries;              /* reports: connection-level retries (5) */
    long retry_wait_ms;       /* between retries (1000) */
    long request_timeout_ms;  /* one request to the master (30000) */
    int raw_depth;            /* task bodies: values deeper than this stay
                                 raw JSON text (jsonx_parse_shallow); -1:
                                 parse everything (default). 2 keeps each
                                 learn data item as raw text. */
    const slave_allow *allow_master; /* who may connect (above); NULL:
                                        anyone. Borrowed: it must outlive
                                        the slave. */
    bool raw_refs;            /* task bodies: with raw_depth >= 0, array
                                 items deeper than raw_depth are refs into
                                 the body (jsonx_parse_refs), not copies;
                                 on_task resolves them against
                                 slave_task_text() while it runs (the body
                                 is freed when it returns). Default false. */
} slave_config;

void slave_config_init(slave_config *cfg);

/* Verdicts of on_connect / on_disconnect / on_task. */
typedef struct {
    bool refuse;       /* refuse with the protocol's code (503/504/602) */
    int status;        /* > 0: answer with this HTTP status instead (fault
                          injection: an error status) */
    int code;          /* with status: the envelope's code (0: the status) */
    char message[256]; /* message for refuse/status; empty: the default */
} slave_verdict;

typedef struct {
    /* A master connected. data is the request's "data". */
    void (*on_connect)(void *ud, const cJSON *data, slave_verdict *v);
    void (*on_disconnect)(void *ud, const cJSON *data, slave_verdict *v);
    /* A new task. task_data is the request's "data" object. Accepting it (no
     * refuse, no status) makes it the current task. */
    void (*on_task)(void *ud, const char *task_id, const cJSON *task_data, slave_verdict *v);
    /* task_id stays valid for the whole call, even if the callback finishes
     * the task at once; copy it to keep it. */
    /* The master was lost (heartbeats failed) or disconnected us (after an
     * accepted /disconnect); a running task, if any, is abandoned (the
     * slave forgets it). */
    void (*on_master_lost)(void *ud, const char *why);
    /* /shutdown was accepted. Without this callback the slave stops its
     * server right after the reply; with it, the embedding program decides
     * when (slave_free()), and until then every request is answered 401
     * code 101 (shutting down). */
    void (*on_shutdown)(void *ud);
} slave_callbacks;

/* Starts listening. NULL with a message in err on failure. */
slave *slave_new(ev_loop *loop, const slave_config *cfg, const slave_callbacks *cbs, void *ud,
                 char *err, size_t errlen);
void slave_free(slave *s);

int slave_port(const slave *s);
/* The slave's own token (for /ping and /shutdown). */
const char *slave_self_token(const slave *s);
bool slave_connected(const slave *s);
/* While on_task runs on a slave with raw_refs: the text the task data's
 * refs point into (jsonx_ref(), jsonx_unref()); NULL otherwise. */
const char *slave_task_text(const slave *s);
/* While on_task runs on a slave with raw_refs: takes that text over (heap,
 * NUL-terminated, *len bytes; the caller frees it), so that the refs stay
 * valid after on_task returns without a copy of the body (the aggregator
 * sends slices of a learn batch straight from it). slave_task_text() still
 * returns it until on_task returns. NULL otherwise, or if taken already. */
char *slave_task_take_text(slave *s, size_t *len);
/* The id of the current task, or NULL. */
const char *slave_current_task(const slave *s);

/* Finish the current task: result (taken over; NULL or an empty/false result
 * is sent as {} like the reference) goes to the master with PUT
 * /slave/task/complete or /slave/task/fail. task_id must be the current
 * task's; returns -1 otherwise. The slot is free again at once. */
int slave_task_complete(slave *s, const char *task_id, cJSON *result);
int slave_task_fail(slave *s, const char *task_id, cJSON *result);

/* Fault injection for mocks: finish the current task by sending body
 * verbatim (taken over) to `path` ("/slave/task/complete"...). If
 * declared_len > len, a Content-Length of declared_len is sent with only len
 * bytes, then the connection is dropped (a truncated body). */
int slave_task_report_raw(slave *s, const char *task_id, const char *path, char *body, size_t len,
                          size_t declared_len);
/* Result reports still in flight (to wait for them before exiting). */
unsigned slave_reports_pending(const slave *s);
/* Bytes of HTTP bodies received and sent by the slave (server and client). */
void slave_bytes(const slave *s, unsigned long long *in, unsigned long long *out);

/* Stop or resume heartbeats (a silent partition). */
void slave_pause_heartbeats(slave *s, bool paused);
/* Counters for tests. */
unsigned long slave_heartbeats_sent(const slave *s);

#endif
