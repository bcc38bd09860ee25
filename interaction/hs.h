/* hs: an HTTP/1.1 server on libmicrohttpd (MHD), driven by an ev loop:
 * MHD in external-epoll mode (its epoll fd watched by the loop, MHD_run on
 * readiness, one loop timer for MHD_get_timeout), no thread of its own.
 *
 * MHD parses every request (request line, headers, %-decoding of the path
 * and query, body framing, Expect: 100-continue) and writes every reply
 * head; what it refuses it answers itself (its own short page: a request
 * line it cannot parse, HTTP/1.1 without Host, a bad Content-Length, an
 * HTTP version other than 1.0/1.1, a head over the connection memory: 431)
 * and closes the connection. Every request body, whatever the method (GET
 * and DELETE carry bodies in this protocol), is handed to the handler whole
 * in one NUL-terminated buffer. A HEAD reply carries no body.
 *
 * Body memory: a declared Content-Length (at most body_limit) is allocated
 * exactly, once: at once up to 1 MiB, a larger one when the first bytes of
 * the body arrive (a peer that sends a head only is promised nothing large);
 * MHD's read buffer is copied into it as the body arrives (the one copy).
 * A body over the limit is answered 413 with the protocol's JSON envelope:
 * before it is read when Content-Length says so (the connection is then
 * closed); a body without Content-Length is read and dropped up to another
 * limit's worth, then answered, or cut off.
 *
 * Limits: connections in all (beyond: left in the listen backlog until one
 * closes), per client address (beyond: accepted and closed at once), head
 * size (MHD's memory per connection: 32 KiB, which holds the request head
 * and the read buffer), silence (idle_timeout_s, MHD's timeout), and the
 * sweep of a dribbling peer (see idle_timeout_s).
 *
 * Ownership: the request and everything it points to is borrowed for the
 * duration of the handler call (or until hs_reply() for a deferred one). The
 * handler hands the reply body over with hs_reply(): the server frees it.
 * Threading: everything runs on the loop's thread. */
#ifndef HS_H
#define HS_H

#include <stdbool.h>
#include <stddef.h>

#include "ev.h"

typedef struct hs_server hs_server;
typedef struct hs_request hs_request;

/* Called once per complete request. It must call hs_reply() exactly once
 * before returning, or hs_defer() (if it does neither, the server answers
 * 500 with the JSON envelope). While the server stops, requests are
 * answered 503 with the envelope without calling it. */
typedef void (*hs_handler)(void *data, hs_request *req);

typedef struct {
    const char *host;          /* address to bind (IPv4, IPv6 literal, or a
                                  name: its first address; IPv6 sockets are
                                  IPv6-only); NULL: "127.0.0.1" */
    int port;                  /* 0: let the kernel pick */
    int listen_fd;             /* >= 0: use this already listening socket
                                  (host/port ignored; made non-blocking);
                                  -1 otherwise. Taken over (given to MHD):
                                  closed by hs_stop(), and by hs_start()
                                  when it fails. */
    size_t body_limit;         /* 0: 256 MiB */
    unsigned connection_limit; /* 0: 4096; beyond it new connections wait in
                                  the listen backlog */
    unsigned per_ip_limit;     /* 0: no per-address limit; beyond it new
                                  connections are accepted and closed */
    unsigned idle_timeout_s;   /* 0: 30 s. A connection silent this long is
                                  closed (MHD's timeout, reset by every
                                  byte). A connection that has not sent a
                                  whole request head within this time of its
                                  opening or of its previous request is shut
                                  down (a peer dribbling its head), and so is
                                  one whose body, after this grace, arrives
                                  at under 64 KiB/s on average (a dribbled
                                  body). Checked once a second. A peer that
                                  hangs up is seen at once, or within a
                                  second when MHD missed its end of stream. */
    const char *server_header; /* NULL: none */
} hs_config;

void hs_config_init(hs_config *cfg);

/* Starts listening. NULL on failure with the reason in err. */
hs_server *hs_start(ev_loop *loop, const hs_config *cfg, hs_handler handler, void *data, char *err,
                    size_t errlen);
/* The bound port. */
int hs_port(const hs_server *s);
/* Stops listening, closes every connection, frees the server. Must not be
 * called from inside its handler: use hs_stop_later() there. */
void hs_stop(hs_server *s);
/* Stops and frees the server from the loop, after the current callback. */
void hs_stop_later(hs_server *s);

/* Request accessors. */
const char *hs_method(const hs_request *r);
const char *hs_path(const hs_request *r);
/* A header value, or NULL if absent (name case-insensitive); as MHD gives
 * it: leading blanks stripped, trailing ones kept. */
const char *hs_header(const hs_request *r, const char *name);
/* A query argument, or NULL. hs_query_foreach calls cb for every argument
 * (value may be NULL for "?flag"), stopping when cb returns false. */
const char *hs_query(const hs_request *r, const char *name);
void hs_query_foreach(const hs_request *r, bool (*cb)(void *data, const char *k, const char *v),
                      void *data);
const char *hs_body(const hs_request *r);
size_t hs_body_len(const hs_request *r);
/* Frees the request body early (a handler that has parsed a large body
 * and goes on working): hs_body() is "" and hs_body_len() 0 afterwards. */
void hs_body_free(hs_request *r);
/* Takes the request body over (heap, NUL-terminated, *len bytes; the
 * caller frees it): a handler that keeps a large body beyond the request
 * without copying it. hs_body() is "" and hs_body_len() 0 afterwards. */
char *hs_body_take(hs_request *r, size_t *len);
/* "ip:port" of the peer. */
const char *hs_peer(const hs_request *r);

/* Answers: body is taken over (freed by the server; may be NULL for empty).
 * content_type NULL means "application/json". */
void hs_reply(hs_request *r, int status, const char *content_type, char *body, size_t len);
/* Deferred replies: a handler may call hs_defer() and return without
 * replying; its connection is suspended (MHD_suspend_connection: nothing is
 * read from it, pipelined requests wait) and the request (and its
 * accessors) stays valid until hs_reply() is called on it later from the
 * loop, or until the server stops (then it is answered 503, best effort).
 * Used for delays in fault injection. */
void hs_defer(hs_request *r);

/* Shorthand: a JSON string body (strlen). */
void hs_reply_json(hs_request *r, int status, char *json);

/* Requests whose head arrived but that ended before their handler ran (the
 * peer hung up in the middle of the body, an error, or a timeout; not
 * hs_stop()): cb gets the request (method, path, headers usable; no body)
 * and may not reply. Optional. */
typedef void (*hs_abort_handler)(void *data, hs_request *req);
void hs_set_abort_handler(hs_server *s, hs_abort_handler cb, void *data);

/* Byte counters since start (for metrics): request and reply bodies. */
unsigned long long hs_bytes_in(const hs_server *s);
unsigned long long hs_bytes_out(const hs_server *s);

#endif
