/* testutil: helpers for tests that run servers and clients on one ev loop:
 * run the loop until a condition holds (with a cap, never a bare sleep), and
 * a synchronous-looking HTTP request that drives the loop while it waits.
 * Single-threaded; results are owned by the caller (tu_reply_free). */
#ifndef TESTUTIL_H
#define TESTUTIL_H

#include <stdbool.h>
#include <stddef.h>

#include "ev.h"
#include "hc.h"
#include "evt.h"
#include "proto.h"

typedef struct master_task master_task; /* master.h */

/* Runs the loop until *flag becomes nonzero or cap_ms passes. Returns true if
 * the flag was set. */
bool tu_run_until(ev_loop *loop, const int *flag, long cap_ms);
/* Runs the loop until pred(data) is true or cap_ms passes. */
bool tu_run_until_pred(ev_loop *loop, bool (*pred)(void *data), void *data, long cap_ms);
/* Runs the loop for ms milliseconds (to check that something does NOT
 * happen). */
void tu_run_for(ev_loop *loop, long ms);

typedef struct {
    long status;
    char *body;
    char *error;
    int code;     /* envelope code, -1 if not an envelope */
    int success;  /* envelope success, -1 if not an envelope */
    char *message;/* envelope message or NULL */
} tu_reply;

/* Sends one request through hc and runs the loop until it ends (cap 10 s).
 * token/channel may be NULL / < 0 for none; body NULL sends "{}". */
tu_reply tu_http(ev_loop *loop, hc_client *c, const char *method, const char *url, const char *token, int channel,
                 const char *body);
void tu_reply_free(tu_reply *r);

/* The outcome of a master task, recorded by tu_task_done (pass the
 * tu_task_out as the callback's ud): result printed, error copied. */
typedef struct {
    int done;
    proto_task_state state;
    char *result;
    char *error;
} tu_task_out;
void tu_task_done(void *ud, master_task *t, proto_task_state st, cJSON **result, const char *error);
void tu_task_out_free(tu_task_out *o);

/* Every line of an events file (read whole, up to 16 MiB), each checked by
 * evt_parse_line() and numbered seq 0, 1, ... in order; the last line ends
 * with a newline. Anything else fails the running cmocka test, naming
 * file:line. *out is the caller's: tu_events_free(*out, count). Returns the
 * count. */
size_t tu_events_read(const char *path, evt_record **out);
void tu_events_free(evt_record *r, size_t n);

#endif
