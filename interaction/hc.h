/* hc: an asynchronous HTTP client on libcurl's multi interface, driven by an
 * ev loop (curl_multi_socket_action; see docs/design.md). Many requests run
 * at once on one thread; libcurl keeps connections alive per host and reuses
 * them, replaces a kept-alive connection the peer closed without counting an
 * attempt, and works with peers that close after every reply. libcurl parses
 * every reply (any framing, 1xx heads skipped) and resolves names (address
 * literals, [v6] included, need none; localhost and *.localhost are the
 * loopback, as libcurl 7.88 does it); http:// and https:// URLs. Proxies from
 * the environment (http_proxy, HTTPS_PROXY, ALL_PROXY) are never used. A URL
 * libcurl cannot parse, another scheme, a method with spaces, a token or
 * extra header with CR/LF are refused (hc_send returns NULL).
 *
 * Caps on what a peer sends (hc_reply.h): 64 KiB of reply head in all
 * (1xx heads and trailers included) and max_reply bytes of body; either
 * fails the request at once, without retry.
 *
 * Requests are sent as the reference sends them: no Content-Type, no Expect,
 * a body for every method, headers Token and Channel when given; a body
 * under 64 KiB goes with the head in one write, a larger one (or one with a
 * prefix or suffix) is read by libcurl from the caller's buffers in turn. A
 * connection-level failure (refused, reset, timed out, nothing received, cut
 * short) is retried `retries` times, `retry_wait_ms` apart (our timer); an
 * HTTP status is never retried, nor is a malformed reply or one over a cap.
 * Timeouts count per attempt: connect_timeout_ms for the connection,
 * timeout_ms for the whole attempt (connecting, sending, receiving).
 *
 * Ownership: hc_send() takes over opts->body (heap, freed by hc), or borrows
 * opts->body_borrowed (never copied nor freed: the caller keeps it alive
 * until opts->body_release(opts->body_release_ud), which hc calls exactly
 * once when the request is over: after the callback returns, when it fails
 * to start (before hc_send returns NULL), is cancelled or forgotten (once
 * its transfer has ended) or hc_free()s it; every retry resends the same
 * bytes, so they must live until then). The result
 * passed to the callback is borrowed for the call. A request handle is valid
 * until its callback starts or hc_cancel() returns; the callback is then never
 * called. A function that fails never calls the callback, and hc_send()
 * never calls it before returning (libcurl starts the transfer from the
 * loop's timer).
 * Threading: the loop's thread only (libcurl's resolver threads touch none of
 * hc's state). */
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
    const char *url;      /* "http://host:port/path" or https:// */
    const char *token;    /* Token header, or NULL */
    int channel;          /* Channel header; < 0: none */
    char *body;           /* taken over; NULL sends "{}" */
    size_t body_len;
    /* Or, with body NULL, a body the request does not own: body_len bytes
     * at body_borrowed, sent from there (never copied); body_release
     * (optional) is called once, with body_release_ud, when the request is
     * over (see Ownership above). Also called if body_borrowed is NULL. */
    const char *body_borrowed;
    void (*body_release)(void *ud);
    void *body_release_ud;
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
                                 bytes that never come (the upload pauses
                                 after the body) until timeout_ms; 0: the
                                 true one */
    long connect_timeout_ms;  /* 0: 2000 */
    long timeout_ms;          /* whole transfer; 0: 30000 */
    int retries;              /* connection-level retries; -1: 5 */
    long retry_wait_ms;       /* 0: 1000; < 0: no wait */
    size_t max_reply;         /* body cap; 0: 256 MiB */
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
