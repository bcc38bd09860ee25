/* hs: libmicrohttpd in external-epoll mode on an ev loop (see hs.h).
 *
 * MHD parses every request (request line, headers, body framing) and writes
 * every reply; this file keeps the loop running it, the limits MHD has no
 * option for (the request-head and body deadlines), the body buffer, and
 * the JSON envelope of what our code answers. */
#include "hs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "xalloc.h"

#define HS_DEFAULT_BODY_LIMIT ((size_t)256 << 20)
/* A declared Content-Length is trusted for one allocation up to this much
 * before any of the body has arrived; a larger one is allocated whole once
 * its first bytes arrive (see hs.h). */
#define HS_PREALLOC_MAX ((size_t)1 << 20)
/* MHD's memory per connection: its read buffer, the parsed head, the reply
 * head; so also the head limit. MHD clears the used part after every
 * request: measured, 64 KiB costs 1.1x the CPU of 32 KiB per exchange and
 * 1 MiB 7x, while 128 MiB learn bodies gain nothing measurable from more
 * (docs/design.md). */
#define HS_CONN_MEMORY ((size_t)32 << 10)
/* The slowest body accepted: after the head, a body must arrive at this
 * average rate or better once the grace of head_ms has passed. */
#define HS_BODY_MIN_RATE ((uint64_t)64 << 10) /* bytes per second */

enum {
    P_HEAD,  /* waiting for (the rest of) a request head */
    P_BODY,  /* head arrived, body arriving */
    P_REPLY, /* request complete: handler, deferred reply, or reply sending */
};

typedef struct hs_conn hs_conn;

struct hs_request {
    hs_server *srv;
    hs_conn *hc;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    char *body; /* NUL-terminated; owned */
    size_t len, cap;
    size_t declared;   /* Content-Length, or 0 */
    int too_large;     /* 1: 413 queued; 2: over the limit mid-body, dropping */
    size_t dropped;    /* body bytes dropped after the limit */
    int deferred;      /* hs_defer() was called: reply comes later */
    int suspended;     /* MHD connection suspended until hs_reply() */
    int replied;       /* hs_reply() was called */
    int handled;       /* the handler ran */
    int status;
    char *reply_type; /* NULL: application/json; else owned */
    char *reply_body;
    size_t reply_len;
    hs_request *next_deferred, *prev_deferred;
};

/* One connection (MHD's socket context): the request in progress (MHD
 * handles one at a time per connection) and the deadlines. */
struct hs_conn {
    hs_conn *prev, *next;
    int fd;
    int phase;
    int cut;           /* shut down by the sweep */
    uint64_t since_ms; /* start of the phase */
    hs_request req;
    char peer[64]; /* "ip:port", rendered by hs_peer() on first use */
    int peer_done;
};

struct hs_server {
    ev_loop *loop;
    struct MHD_Daemon *d;
    int epfd;
    int port;
    ev_timer *timer; /* MHD's next timeout */
    uint64_t timer_due;
    ev_timer *stop_timer;
    ev_timer *sweep;
    hs_handler handler;
    void *data;
    size_t body_limit;
    char *server_header;
    int stopping;
    hs_request *deferred; /* suspended requests */
    hs_abort_handler abort_cb;
    void *abort_data;
    unsigned long long bytes_in, bytes_out;
    hs_conn *conns;
    unsigned nconns, conn_limit;
    int relisten; /* a connection closed at the limit */
    uint64_t head_ms;
    struct pollfd *pf; /* the sweep's, reused */
    hs_conn **pc;
    size_t npoll;
    struct MHD_Response *resp_413; /* constant: built once, shared */
    size_t len_413;
};

void hs_config_init(hs_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_fd = -1;
}

/* ---- the loop ---- */

static void kick(hs_server *s);

static void on_timer(ev_loop *loop, void *data)
{
    hs_server *s = data;
    (void)loop;
    s->timer = NULL;
    kick(s);
}

/* Arms one timer for what MHD must do next without an event (its
 * connection timeout, input it has read but not yet processed). A timer
 * already due earlier is kept: firing early costs one MHD_run. */
static void arm(hs_server *s)
{
    MHD_UNSIGNED_LONG_LONG to = 0;
    if (MHD_get_timeout(s->d, &to) != MHD_YES) {
        if (s->timer) {
            ev_timer_stop(s->loop, s->timer);
            s->timer = NULL;
        }
        return;
    }
    uint64_t due = ev_now_ms() + to;
    if (s->timer) {
        if (s->timer_due <= due)
            return;
        ev_timer_stop(s->loop, s->timer);
    }
    s->timer_due = due;
    s->timer = ev_timer_start(s->loop, to, on_timer, s);
}

/* One MHD_run reads a connection's socket once (at most its free buffer
 * space, under 32 KiB) and leaves it on its ready list if more is waiting
 * (edge-triggered epoll: nothing wakes the loop for it again). Going back
 * through the loop for each piece cost two epoll_wait per recv on a large
 * body; so MHD runs again at once while it says it has work ready, up to
 * this many times before the loop's other fds get their turn. */
#define HS_RUNS_PER_KICK 16

/* At its connection limit MHD takes the listening socket out of its epoll
 * set, and puts it back at the start of the MHD_run after a close; nothing
 * would wake it for that run in external mode, so run it once more. */
static void kick(hs_server *s)
{
    for (int i = 1;; i++) {
        MHD_run(s->d);
        if (s->relisten) { /* past the cap too: each one follows a close */
            s->relisten = 0;
            continue;
        }
        MHD_UNSIGNED_LONG_LONG to = 1;
        if (i >= HS_RUNS_PER_KICK || MHD_get_timeout(s->d, &to) != MHD_YES || to > 0)
            break;
    }
    arm(s);
}

static void on_epoll(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    kick(data);
}

/* Runs MHD from the loop soon (a resumed connection). */
static void kick_soon(hs_server *s)
{
    if (s->timer) {
        if (s->timer_due <= ev_now_ms())
            return;
        ev_timer_stop(s->loop, s->timer);
    }
    s->timer_due = ev_now_ms();
    s->timer = ev_timer_start(s->loop, 0, on_timer, s);
}

/* ---- replies ---- */

static struct MHD_Response *make_response(hs_server *s, const char *type, char *body, size_t len,
                                          enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, body, mode);
    if (!resp) {
        if (mode == MHD_RESPMEM_MUST_FREE)
            free(body);
        return NULL;
    }
    if (MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type ? type : "application/json") != MHD_YES ||
        (s->server_header && MHD_add_response_header(resp, MHD_HTTP_HEADER_SERVER, s->server_header) != MHD_YES)) {
        MHD_destroy_response(resp);
        return NULL;
    }
    return resp;
}

static enum MHD_Result queue(hs_server *s, struct MHD_Connection *conn, int status, const char *type, char *body,
                             size_t len)
{
    struct MHD_Response *resp = body ? make_response(s, type, body, len, MHD_RESPMEM_MUST_FREE)
                                     : make_response(s, type, (char *)"", 0, MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    s->bytes_out += len;
    enum MHD_Result r = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result queue_envelope(hs_server *s, struct MHD_Connection *conn, int status, const char *msg)
{
    char *env = proto_envelope(false, status, msg, NULL);
    return queue(s, conn, status, NULL, env, strlen(env));
}

static enum MHD_Result queue_413(hs_server *s, hs_request *r)
{
    r->too_large = 1;
    r->hc->phase = P_REPLY;
    if (!s->resp_413)
        return MHD_NO;
    s->bytes_out += s->len_413;
    return MHD_queue_response(r->conn, 413, s->resp_413);
}

static void unlink_deferred(hs_request *r)
{
    if (!r->deferred)
        return;
    if (r->prev_deferred)
        r->prev_deferred->next_deferred = r->next_deferred;
    else
        r->srv->deferred = r->next_deferred;
    if (r->next_deferred)
        r->next_deferred->prev_deferred = r->prev_deferred;
    r->next_deferred = r->prev_deferred = NULL;
    r->deferred = 0;
}

static enum MHD_Result send_reply(hs_request *r)
{
    char *body = r->reply_body;
    r->reply_body = NULL;
    return queue(r->srv, r->conn, r->status, r->reply_type, body, r->reply_len);
}

/* ---- requests ---- */

/* The first call for a request: its head is complete. */
static enum MHD_Result request_start(hs_server *s, struct MHD_Connection *conn, const char *url, const char *method,
                                     void **con_cls)
{
    const union MHD_ConnectionInfo *sc = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    hs_conn *c = sc ? sc->socket_context : NULL;
    if (!c)
        return MHD_NO;
    hs_request *r = &c->req;
    memset(r, 0, sizeof *r);
    r->srv = s;
    r->hc = c;
    r->conn = conn;
    r->method = method;
    r->path = url;
    *con_cls = r;
    c->phase = P_BODY;
    c->since_ms = ev_now_ms();
    if (s->stopping)
        return queue_envelope(s, conn, 503, "Server is stopping.");
    /* MHD has checked the value (a bad one is answered 400 before this). */
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl) {
        char *end;
        errno = 0;
        unsigned long long n = strtoull(cl, &end, 10);
        if (errno || end == cl || n > s->body_limit)
            return queue_413(s, r);
        r->declared = (size_t)n;
        if (n > 0 && n <= HS_PREALLOC_MAX) { /* the whole body, at once */
            r->cap = (size_t)n + 1;
            r->body = xmalloc(r->cap);
        } /* a larger one: when its first bytes arrive (body_append) */
    }
    return MHD_YES;
}

static void body_append(hs_request *r, const char *p, size_t n)
{
    if (r->len + n + 1 > r->cap) {
        size_t want = r->len + n + 1;
        if (r->declared + 1 >= want) /* the declared size, exactly, once */
            want = r->declared + 1;
        else if (want < 2 * r->cap)
            want = 2 * r->cap;
        r->body = xrealloc(r->body, want);
        r->cap = want;
    }
    memcpy(r->body + r->len, p, n);
    r->len += n;
}

/* MHD calls this once the head is complete (upload_size 0), once per piece
 * of body as it arrives, and once more at the end (upload_size 0), and
 * again after a suspended connection is resumed. */
static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    hs_server *s = cls;
    (void)version;
    hs_request *r = *con_cls;
    if (!r)
        return request_start(s, conn, url, method, con_cls);
    if (r->too_large == 1)
        return MHD_YES; /* answered already */
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        s->bytes_in += n;
        if (r->too_large || r->len + n > s->body_limit) {
            /* A body without Content-Length went over the limit. MHD takes
             * no reply in the middle of a body: drop the rest (another
             * limit's worth at most, then hang up) and answer 413 at its
             * end. */
            if (!r->too_large) {
                free(r->body);
                r->body = NULL;
                r->len = r->cap = 0;
            }
            r->too_large = 2;
            r->dropped += n;
            return r->dropped > s->body_limit ? MHD_NO : MHD_YES;
        }
        body_append(r, upload_data, n);
        return MHD_YES;
    }
    if (r->suspended) { /* resumed by hs_reply() */
        r->suspended = 0;
        unlink_deferred(r);
        return send_reply(r);
    }
    if (r->replied)
        return MHD_YES;
    r->hc->phase = P_REPLY;
    if (r->too_large == 2)
        return queue_413(s, r);
    if (!r->body) {
        r->body = xmalloc(1);
        r->cap = 1;
    }
    r->body[r->len] = '\0';
    r->handled = 1;
    s->handler(s->data, r);
    if (r->replied) {
        unlink_deferred(r);
        return send_reply(r);
    }
    if (r->deferred) {
        r->suspended = 1;
        MHD_suspend_connection(conn);
        return MHD_YES;
    }
    return queue_envelope(s, conn, 500, "Internal error: the handler gave no reply.");
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    hs_server *s = cls;
    (void)conn;
    hs_request *r = *con_cls;
    if (!r)
        return;
    *con_cls = NULL;
    if (!r->handled && !r->too_large && tc != MHD_REQUEST_TERMINATED_COMPLETED_OK && s->abort_cb && !s->stopping)
        s->abort_cb(s->abort_data, r);
    r->hc->phase = P_HEAD;
    r->hc->since_ms = ev_now_ms();
    unlink_deferred(r);
    free(r->body);
    free(r->reply_body);
    free(r->reply_type);
    memset(r, 0, sizeof *r);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    hs_server *s = cls;
    hs_conn *c = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        c = xcalloc(1, sizeof *c);
        c->fd = ci ? ci->connect_fd : -1;
        c->phase = P_HEAD;
        c->since_ms = ev_now_ms();
        c->next = s->conns;
        if (c->next)
            c->next->prev = c;
        s->conns = c;
        s->nconns++;
        *socket_context = c;
    } else if (c) {
        if (c->prev)
            c->prev->next = c->next;
        else
            s->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        if (s->nconns-- >= s->conn_limit)
            s->relisten = 1;
        free(c);
        *socket_context = NULL;
    }
}

/* Once a second: MHD's timeout counts silence only (every byte resets it),
 * so a peer that dribbles its head or body would hold its connection for
 * ever. A head must be complete within head_ms of the connection's opening
 * or its previous request's end; a body must then average at least
 * HS_BODY_MIN_RATE after a grace of head_ms. And MHD (edge-triggered) can
 * miss an end of stream that arrives with the last bytes it reads (seen
 * after a burst of pipelined requests), keeping the connection until its
 * timeout: a connection waiting for a head or body whose peer has shut its
 * side, with nothing left unread, is cut as well. A cut is a shutdown():
 * MHD sees the end of stream at once and closes the connection (the abort
 * handler runs for a request whose body was cut). A peer that hangs up
 * after a whole request still gets its reply. */
static void on_sweep(ev_loop *loop, void *data)
{
    hs_server *s = data;
    s->sweep = ev_timer_start(loop, 1000, on_sweep, s);
    uint64_t now = ev_now_ms();
    size_t n = 0;
    int cut = 0;
    for (hs_conn *c = s->conns; c; c = c->next) {
        if (c->cut || c->fd < 0 || c->phase == P_REPLY)
            continue;
        uint64_t allowed = s->head_ms;
        if (c->phase == P_BODY)
            allowed += (uint64_t)(c->req.len + c->req.dropped) * 1000u / HS_BODY_MIN_RATE;
        if (now - c->since_ms > allowed) {
            shutdown(c->fd, SHUT_RDWR);
            c->cut = 1;
            cut++;
            continue;
        }
        if (n == s->npoll) {
            s->npoll = s->npoll ? 2 * s->npoll : 64;
            s->pf = xrealloc(s->pf, s->npoll * sizeof *s->pf);
            s->pc = xrealloc(s->pc, s->npoll * sizeof *s->pc);
        }
        s->pf[n] = (struct pollfd){.fd = c->fd, .events = POLLRDHUP};
        s->pc[n++] = c;
    }
    if (n && poll(s->pf, n, 0) > 0)
        for (size_t i = 0; i < n; i++) {
            int avail = 0;
            if ((s->pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) && ioctl(s->pf[i].fd, FIONREAD, &avail) == 0 &&
                avail == 0) {
                shutdown(s->pf[i].fd, SHUT_RDWR);
                s->pc[i]->cut = 1;
                cut++;
            }
        }
    if (cut)
        kick(s);
}

/* ---- server ---- */

static int resolve(const char *host, int port, struct sockaddr_storage *ss, socklen_t *len, char *err, size_t errlen)
{
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *in = (void *)ss;
    struct sockaddr_in6 *in6 = (void *)ss;
    if (inet_pton(AF_INET, host, &in->sin_addr) == 1) {
        in->sin_family = AF_INET;
        in->sin_port = htons((uint16_t)port);
        *len = sizeof *in;
        return 0;
    }
    if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        *len = sizeof *in6;
        return 0;
    }
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(host, NULL, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve listen address '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *len = res->ai_addrlen;
    if (ss->ss_family == AF_INET)
        in->sin_port = htons((uint16_t)port);
    else
        in6->sin6_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return 0;
}

/* The listening socket is ours (errors name the address and errno; IPv6
 * sockets are IPv6-only); MHD is given it. */
static int open_listener(const char *host, int port, char *err, size_t errlen)
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    if (resolve(host, port, &ss, &sl, err, errlen) < 0)
        return -1;
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a socket for %s:%d: %s", host, port, strerror(errno));
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (ss.ss_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, SOMAXCONN) < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static void server_free(hs_server *s)
{
    if (s->resp_413)
        MHD_destroy_response(s->resp_413);
    free(s->server_header);
    free(s->pf);
    free(s->pc);
    free(s);
}

hs_server *hs_start(ev_loop *loop, const hs_config *cfg, hs_handler handler, void *data, char *err, size_t errlen)
{
    if (cfg->port < 0 || cfg->port > 65535) {
        snprintf(err, errlen, "port %d is out of range 0-65535", cfg->port);
        if (cfg->listen_fd >= 0)
            close(cfg->listen_fd);
        return NULL;
    }
    int fd = cfg->listen_fd;
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    if (fd >= 0) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0) {
            snprintf(err, errlen, "cannot start HTTP server on the given socket: %s", strerror(errno));
            close(fd);
            return NULL;
        }
    } else {
        fd = open_listener(host, cfg->port, err, errlen);
        if (fd < 0)
            return NULL;
    }
    struct sockaddr_storage ss = {0};
    socklen_t sl = sizeof ss;
    int port = cfg->port;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6) {
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
            flags |= MHD_USE_IPv6;
        }
    }
    hs_server *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    s->port = port;
    s->handler = handler;
    s->data = data;
    s->body_limit = cfg->body_limit ? cfg->body_limit : HS_DEFAULT_BODY_LIMIT;
    s->server_header = cfg->server_header ? xstrdup(cfg->server_header) : NULL;
    s->conn_limit = cfg->connection_limit ? cfg->connection_limit : 4096u;
    unsigned idle_s = cfg->idle_timeout_s ? cfg->idle_timeout_s : 30u;
    s->head_ms = 1000u * (uint64_t)idle_s;
    char *msg = xasprintf("Request body over the limit of %zu bytes.", s->body_limit);
    char *env = proto_envelope(false, 413, msg, NULL);
    free(msg);
    s->len_413 = strlen(env);
    s->resp_413 = make_response(s, NULL, env, s->len_413, MHD_RESPMEM_MUST_FREE);
    errno = 0;
    s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s,                    /* */
                            MHD_OPTION_LISTEN_SOCKET, fd,                          /* */
                            MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,          /* */
                            MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,        /* */
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, HS_CONN_MEMORY,    /* */
                            MHD_OPTION_CONNECTION_LIMIT, s->conn_limit,            /* */
                            MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->per_ip_limit, /* */
                            MHD_OPTION_CONNECTION_TIMEOUT, idle_s,                 /* */
                            MHD_OPTION_STRICT_FOR_CLIENT, 1, MHD_OPTION_END);
    if (!s->d || !s->resp_413) {
        snprintf(err, errlen, "cannot start the HTTP server on %s:%d: %s", host, port,
                 errno ? strerror(errno) : "libmicrohttpd refused");
        if (s->d)
            MHD_stop_daemon(s->d); /* closes fd */
        else
            close(fd);
        server_free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
    s->epfd = di ? di->epoll_fd : -1;
    if (s->epfd < 0 || ev_fd_set(loop, s->epfd, EV_READ, on_epoll, s) < 0) {
        snprintf(err, errlen, "cannot watch the HTTP server's epoll fd: %s", strerror(errno));
        MHD_stop_daemon(s->d);
        server_free(s);
        return NULL;
    }
    s->sweep = ev_timer_start(loop, 1000, on_sweep, s);
    kick(s);
    return s;
}

int hs_port(const hs_server *s)
{
    return s->port;
}

void hs_stop(hs_server *s)
{
    if (!s)
        return;
    s->stopping = 1; /* no abort callbacks, new requests answered 503 */
    /* Deferred requests: resumed with a 503, given two passes of MHD to
     * send it (best effort), then everything is closed. */
    int had_deferred = s->deferred != NULL;
    while (s->deferred) {
        hs_request *r = s->deferred;
        char *env = proto_envelope(false, 503, "Server is stopping.", NULL);
        hs_reply(r, 503, NULL, env, strlen(env));
        unlink_deferred(r);
    }
    if (had_deferred) {
        MHD_run(s->d);
        MHD_run(s->d);
    }
    if (s->timer)
        ev_timer_stop(s->loop, s->timer);
    if (s->stop_timer)
        ev_timer_stop(s->loop, s->stop_timer);
    if (s->sweep)
        ev_timer_stop(s->loop, s->sweep);
    ev_fd_del(s->loop, s->epfd);
    MHD_stop_daemon(s->d); /* closes the listening socket */
    server_free(s);
}

static void on_stop_timer(ev_loop *loop, void *data)
{
    (void)loop;
    hs_server *s = data;
    s->stop_timer = NULL;
    hs_stop(s);
}

void hs_stop_later(hs_server *s)
{
    if (s && !s->stop_timer)
        s->stop_timer = ev_timer_start(s->loop, 0, on_stop_timer, s);
}

/* ---- accessors ---- */

const char *hs_method(const hs_request *r)
{
    return r->method;
}

const char *hs_path(const hs_request *r)
{
    return r->path;
}

const char *hs_header(const hs_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_HEADER_KIND, name);
}

const char *hs_query(const hs_request *r, const char *name)
{
    return MHD_lookup_connection_value(r->conn, MHD_GET_ARGUMENT_KIND, name);
}

struct foreach_ctx {
    bool (*cb)(void *, const char *, const char *);
    void *data;
};

static enum MHD_Result foreach_it(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    struct foreach_ctx *c = cls;
    return c->cb(c->data, key, value) ? MHD_YES : MHD_NO;
}

void hs_query_foreach(const hs_request *r, bool (*cb)(void *data, const char *k, const char *v), void *data)
{
    struct foreach_ctx c = {cb, data};
    MHD_get_connection_values(r->conn, MHD_GET_ARGUMENT_KIND, foreach_it, &c);
}

const char *hs_body(const hs_request *r)
{
    return r->body ? r->body : "";
}

size_t hs_body_len(const hs_request *r)
{
    return r->len;
}

void hs_body_free(hs_request *r)
{
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

char *hs_body_take(hs_request *r, size_t *len)
{
    char *b = r->body ? r->body : xstrdup("");
    *len = r->body ? r->len : 0;
    r->body = NULL;
    r->len = r->cap = 0;
    return b;
}

/* Rendered on first use only: formatting it for every request costs more
 * than most requests. */
const char *hs_peer(const hs_request *cr)
{
    hs_conn *c = cr->hc;
    if (c->peer_done)
        return c->peer;
    c->peer_done = 1;
    snprintf(c->peer, sizeof c->peer, "?");
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(cr->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        char host[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (sa->sa_family == AF_INET) {
            const struct sockaddr_in *in = (const void *)sa;
            inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
            port = ntohs(in->sin_port);
        } else if (sa->sa_family == AF_INET6) {
            const struct sockaddr_in6 *in6 = (const void *)sa;
            inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
            port = ntohs(in6->sin6_port);
        }
        snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    }
    return c->peer;
}

void hs_reply(hs_request *r, int status, const char *content_type, char *body, size_t len)
{
    if (r->replied || !r->handled) {
        free(body);
        return;
    }
    r->replied = 1;
    r->status = status;
    r->reply_type = content_type ? xstrdup(content_type) : NULL;
    r->reply_body = body;
    r->reply_len = body ? len : 0;
    if (r->suspended) {
        /* MHD signals the resume on its own descriptor inside its epoll
         * set; run it from the loop soon anyway, not from our caller. */
        MHD_resume_connection(r->conn);
        kick_soon(r->srv);
    }
}

void hs_defer(hs_request *r)
{
    if (r->deferred || r->replied || !r->handled)
        return;
    r->deferred = 1;
    r->next_deferred = r->srv->deferred;
    if (r->next_deferred)
        r->next_deferred->prev_deferred = r;
    r->srv->deferred = r;
}

void hs_reply_json(hs_request *r, int status, char *json)
{
    hs_reply(r, status, NULL, json, json ? strlen(json) : 0);
}

void hs_set_abort_handler(hs_server *s, hs_abort_handler cb, void *data)
{
    s->abort_cb = cb;
    s->abort_data = data;
}

unsigned long long hs_bytes_in(const hs_server *s)
{
    return s->bytes_in;
}

unsigned long long hs_bytes_out(const hs_server *s)
{
    return s->bytes_out;
}
