/* hc: an asynchronous HTTP/1.1 client driven by an ev loop (our own, on
 * non-blocking sockets: no libcurl). Many requests run at once on one
 * thread; connections are pooled per host:port and reused (keep-alive), and
 * peers that close after every reply (HTTP/1.0, Connection: close) work too.
 * A request on a pooled connection is written at once from hc_send(), head
 * and body in one sendmsg() from the caller's buffer (no copy of the body);
 * a pooled connection the peer closed while idle is replaced, not counted as
 * an attempt. Replies may have Content-Length, chunked or close-delimited
 * bodies; 1xx heads are skipped. Host names are resolved off the loop (one
 * resolver thread per client, results cached for 5 s); address literals,
 * [v6] included, need no resolution, and localhost and *.localhost are the
 * loopback (RFC 6761, as in curl). Only http:// URLs: https is refused
 * (hc_send returns NULL), as is a URL with spaces or control bytes, or a
 * token or extra header with CR/LF. Proxies (http_proxy) are not used.
 *
 * Requests are sent as the reference sends them: no Content-Type, a body for
 * every method, headers Token and Channel when given. A connection-level
 * failure (refused, reset, timed out, nothing received, cut short) is
 * retried `retries` times, `retry_wait_ms` apart; an HTTP status is never
 * retried, nor is a malformed reply or one over max_reply. Timeouts count
 * per attempt: connect_timeout_ms for the connection, timeout_ms for the
 * whole attempt (connecting, sending, receiving).
 *
 * Ownership: hc_send() takes over opts->body (heap, freed by hc). The result
 * passed to the callback is borrowed for the call. A request handle is valid
 * until its callback starts or hc_cancel() returns; the callback is then never
 * called. A function that fails never calls the callback, and hc_send()
 * never calls it before returning.
 * Threading: the loop's thread only (the resolver thread touches none of
 * the client's state but its queue). */
#ifndef HC_H
#define HC_H

#include <stddef.h>

#include "ev.h"

typedef struct hc_client hc_client;
typedef struct hc_req hc_req;

typedef struct {
    long status;      /* HTTP status, 0 if no reply was received */
    const char *body; /* NUL-terminated; "" when none */
    size_t body_len;
    const char *error; /* NULL on an HTTP reply; else what failed at the
                          connection level, after the retries */
    int attempts;      /* how many times it was sent */
    double seconds;    /* from first send to the end */
} hc_result;

typedef void (*hc_cb)(void *data, const hc_result *res);

typedef struct {
    const char *method;   /* "GET", "POST", "PUT", "DELETE" */
    const char *url;      /* "http://host:port/path" */
    const char *token;    /* Token header, or NULL */
    int channel;          /* Channel header; < 0: none */
    char *body;           /* taken over; NULL sends "{}" */
    size_t body_len;
    /* Sent before and after the body (copied; NULL: none), so that a
     * large body need not be moved to wrap it: the request body on the wire
     * is prefix, body, suffix. */
    const char *body_prefix;
    size_t body_prefix_len;
    const char *body_suffix;
    size_t body_suffix_len;
    const char *extra_header; /* one raw "Name: value" line, or NULL */
    size_t declared_length;   /* fault injection: a Content-Length larger
                                 than the body, so that the peer waits for
                                 bytes that never come; 0: the true one */
    long connect_timeout_ms;  /* 0: 2000 */
    long timeout_ms;          /* whole transfer; 0: 30000 */
    int retries;              /* connection-level retries; -1: 5 */
    long retry_wait_ms;       /* 0: 1000; < 0: no wait */
    size_t max_reply;         /* 0: 256 MiB */
    void (*free_data)(void *data); /* called with the callback's data when
                                      the request ends without its callback
                                      (hc_cancel, hc_free); optional */
} hc_opts;

void hc_opts_init(hc_opts *o);

hc_client *hc_new(ev_loop *loop);
/* Cancels every pending request (no callbacks) and frees the client. */
void hc_free(hc_client *c);

/* Starts a request. NULL only if the request could not be built (bad URL,
 * out of handles); then opts->body has been freed. */
hc_req *hc_send(hc_client *c, hc_opts *opts, hc_cb cb, void *data);
void hc_cancel(hc_client *c, hc_req *r);
/* Like hc_cancel() for the caller (the callback is never called, free_data
 * is called at once, the handle is invalid afterwards), but the request
 * runs to its end without retries, so that its keep-alive connection stays
 * reusable: cancelling a transfer in flight closes its connection. For a
 * reply that no longer matters (a /task/new reply that lost the race with
 * the task's result). */
void hc_forget(hc_client *c, hc_req *r);

unsigned long long hc_bytes_out(const hc_client *c);
unsigned long long hc_bytes_in(const hc_client *c);
/* Requests currently in flight. */
unsigned hc_pending(const hc_client *c);

#endif
