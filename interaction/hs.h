/* hs: an HTTP/1.1 server on libmicrohttpd, driven by an ev loop (MHD in
 * external-epoll mode: no thread of its own).
 *
 * Every request body is read by Content-Length whatever the method (GET and
 * DELETE carry bodies in this protocol) and handed to the handler whole; a
 * body over the limit is answered 413 with the protocol's JSON envelope
 * (before it is read when Content-Length says so; a chunked body is read and
 * dropped up to another limit's worth, then answered, or cut off). Request
 * heads are limited to MHD's per-connection memory (431 beyond it).
 * Connections are kept alive.
 *
 * Ownership: the request and everything it points to is borrowed for the
 * duration of the handler call. The handler hands the reply body over with
 * hs_reply(): the server frees it.
 * Threading: everything runs on the loop's thread. */
#ifndef HS_H
#define HS_H

#include <stdbool.h>
#include <stddef.h>

#include "ev.h"

typedef struct hs_server hs_server;
typedef struct hs_request hs_request;

/* Called once per complete request. It must call hs_reply() exactly once
 * before returning (if it does not, the server answers 500). */
typedef void (*hs_handler)(void *data, hs_request *req);

typedef struct {
    const char *host;          /* address to bind; NULL: "127.0.0.1" */
    int port;                  /* 0: let the kernel pick */
    int listen_fd;             /* >= 0: use this already listening socket
                                  (host/port ignored); -1 otherwise. Taken
                                  over: closed by hs_stop(), and by
                                  hs_start() when it fails. */
    size_t body_limit;         /* 0: 256 MiB */
    unsigned connection_limit; /* 0: 4096 */
    unsigned per_ip_limit;     /* 0: no per-address limit */
    unsigned idle_timeout_s;   /* 0: 30 s. A connection that stays silent
                                  this long is closed (MHD's timeout, reset
                                  by every byte), and so is one that has not
                                  sent a whole request head within this time
                                  of its opening or of its previous reply
                                  (a peer dribbling its headers). Idle
                                  connections whose peer hung up are closed
                                  within a second. */
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
/* A header value, or NULL if absent (name case-insensitive). */
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
/* "ip:port" of the peer. */
const char *hs_peer(const hs_request *r);

/* Answers: body is taken over (freed by the server; may be NULL for empty).
 * content_type NULL means "application/json". */
void hs_reply(hs_request *r, int status, const char *content_type, char *body, size_t len);
/* Deferred replies: a handler may call hs_defer() and return without
 * replying; the request (and its accessors) then stays valid until
 * hs_reply() is called on it later from the loop, or until the server stops
 * (then it is dropped). Used for delays in fault injection. */
void hs_defer(hs_request *r);

/* Shorthand: a JSON string body (strlen). */
void hs_reply_json(hs_request *r, int status, char *json);

/* Requests that ended before their handler ran (the peer hung up in the
 * middle of the headers or body, or a timeout): cb gets the request
 * (method, path, headers usable; no body) and may not reply. Optional. */
typedef void (*hs_abort_handler)(void *data, hs_request *req);
void hs_set_abort_handler(hs_server *s, hs_abort_handler cb, void *data);

/* Byte counters since start (for metrics). */
unsigned long long hs_bytes_in(const hs_server *s);
unsigned long long hs_bytes_out(const hs_server *s);

#endif
