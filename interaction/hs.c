/* hs: libmicrohttpd in external-epoll mode on an ev loop. */
#include "hs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "proto.h"
#include "xalloc.h"

#define HS_DEFAULT_BODY_LIMIT ((size_t)256 << 20)
/* A declared Content-Length is trusted for one allocation up to this much;
 * a larger body grows as it arrives (the peer may never send it). */
#define HS_PREALLOC_MAX ((size_t)1 << 20)

/* One connection, for the request-head deadline (see hs.h idle_timeout_s):
 * MHD's own timeout only counts inactivity, so a peer that dribbles one
 * byte now and then would hold its connection for ever. */
typedef struct hs_conn {
    struct hs_conn *prev, *next;
    int fd;
    int busy;          /* a request head arrived; its reply is not done */
    int body_done;     /* ... and its body too (handler ran, or 413) */
    int cut;           /* shut down by the sweep */
    uint64_t since_ms; /* accepted, or its last request completed */
} hs_conn;

struct hs_request {
    hs_server *srv;
    struct MHD_Connection *conn;
    const char *method;
    const char *path;
    xbuf body;
    int too_large;  /* 1: 413 queued; 2: over the limit mid-body, dropping */
    size_t dropped; /* body bytes dropped after the limit */
    hs_conn *hconn;
    int deferred;   /* hs_defer() was called: reply comes later */
    int suspended;  /* MHD connection suspended until hs_reply() */
    int replied;    /* hs_reply() was called */
    int handled;    /* the handler ran */
    int status;
    char *reply_type;
    char *reply_body;
    size_t reply_len;
    char peer[64];  /* "ip:port", rendered by hs_peer() on first use */
    int peer_done;
    hs_request *next_deferred, *prev_deferred;
};

struct hs_server {
    ev_loop *loop;
    struct MHD_Daemon *d;
    int epfd;
    int port;
    ev_timer *timer;
    ev_timer *stop_timer;
    hs_handler handler;
    void *data;
    size_t body_limit;
    char *server_header;
    hs_request *deferred; /* list of suspended requests */
    hs_abort_handler abort_cb;
    void *abort_data;
    unsigned long long bytes_in, bytes_out;
    hs_conn *conns;
    ev_timer *sweep;
    uint64_t head_ms; /* request-head deadline */
};

void hs_config_init(hs_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_fd = -1;
}

static void kick(hs_server *s);

static void on_timer(ev_loop *loop, void *data)
{
    hs_server *s = data;
    (void)loop;
    s->timer = NULL;
    kick(s);
}

/* Lets MHD do what is ready, then arms a timer for what it must do later
 * (connection timeouts, data it has buffered but not yet processed). */
static void kick(hs_server *s)
{
    MHD_run(s->d);
    MHD_UNSIGNED_LONG_LONG to = 0;
    if (s->timer) {
        ev_timer_stop(s->loop, s->timer);
        s->timer = NULL;
    }
    if (MHD_get_timeout(s->d, &to) == MHD_YES)
        s->timer = ev_timer_start(s->loop, to > 1000 ? 1000 : to, on_timer, s);
    else
        s->timer = ev_timer_start(s->loop, 1000, on_timer, s);
}

static void on_epoll(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    kick(data);
}

static struct MHD_Response *make_response(hs_server *s, int status, const char *type, char *body, size_t len)
{
    (void)status;
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(len, body ? body : (char *)"", body ? MHD_RESPMEM_MUST_FREE : MHD_RESPMEM_PERSISTENT);
    if (!resp) {
        free(body);
        return NULL;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, type ? type : "application/json");
    if (s->server_header)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_SERVER, s->server_header);
    s->bytes_out += len;
    return resp;
}

static enum MHD_Result queue(hs_server *s, struct MHD_Connection *conn, int status, const char *type, char *body,
                             size_t len)
{
    struct MHD_Response *resp = make_response(s, status, type, body, len);
    if (!resp)
        return MHD_NO;
    enum MHD_Result r = MHD_queue_response(conn, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return r;
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

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    hs_server *s = cls;
    (void)version;
    hs_request *r = *con_cls;
    if (!r) {
        r = xcalloc(1, sizeof *r);
        r->srv = s;
        r->conn = conn;
        r->method = method;
        r->path = url;
        *con_cls = r;
        const union MHD_ConnectionInfo *sc = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        r->hconn = sc ? sc->socket_context : NULL;
        if (r->hconn)
            r->hconn->busy = 1;
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long n = strtoull(cl, &end, 10);
            if (errno || end == cl || n > s->body_limit)
                r->too_large = 1;
            else if (n > 0) { /* one allocation for the whole body */
                r->body.cap = (size_t)(n < HS_PREALLOC_MAX ? n : HS_PREALLOC_MAX) + 1;
                r->body.data = xmalloc(r->body.cap);
            }
        }
        if (r->too_large) {
            char *msg = xasprintf("Request body over the limit of %zu bytes.", s->body_limit);
            char *env = proto_envelope(false, 413, msg, NULL);
            free(msg);
            return queue(s, conn, 413, NULL, env, strlen(env));
        }
        return MHD_YES;
    }
    if (r->too_large == 1)
        return MHD_YES; /* reply already queued; MHD discards the rest */
    if (*upload_size) {
        s->bytes_in += *upload_size;
        if (r->too_large || r->body.len + *upload_size > s->body_limit) {
            /* A body without Content-Length (chunked) went over the limit.
             * MHD cannot queue a reply in the middle of a body: drop the
             * rest (another limit's worth at most, then hang up) and answer
             * 413 at its end. */
            if (!r->too_large)
                xbuf_free(&r->body);
            r->too_large = 2;
            r->dropped += *upload_size;
            *upload_size = 0;
            return r->dropped > s->body_limit ? MHD_NO : MHD_YES;
        }
        xbuf_append(&r->body, upload_data, *upload_size);
        *upload_size = 0;
        return MHD_YES;
    }
    if (r->suspended) {
        /* Resumed by hs_reply(). */
        r->suspended = 0;
        unlink_deferred(r);
        return send_reply(r);
    }
    if (r->replied)
        return MHD_YES;
    if (r->hconn)
        r->hconn->body_done = 1;
    if (r->too_large == 2) {
        r->too_large = 1;
        char *msg = xasprintf("Request body over the limit of %zu bytes.", s->body_limit);
        char *env = proto_envelope(false, 413, msg, NULL);
        free(msg);
        return queue(s, conn, 413, NULL, env, strlen(env));
    }
    if (!r->body.data)
        xbuf_append(&r->body, "", 0);
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
    char *env = proto_envelope(false, 500, "Internal error: the handler gave no reply.", NULL);
    return queue(s, conn, 500, NULL, env, strlen(env));
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)cls;
    (void)conn;
    hs_request *r = *con_cls;
    if (!r)
        return;
    if (!r->handled && !r->too_large && tc != MHD_REQUEST_TERMINATED_COMPLETED_OK && r->srv->abort_cb &&
        r->srv->d)
        r->srv->abort_cb(r->srv->abort_data, r);
    if (r->hconn) {
        r->hconn->busy = 0;
        r->hconn->body_done = 0;
        r->hconn->since_ms = ev_now_ms();
    }
    unlink_deferred(r);
    xbuf_free(&r->body);
    free(r->reply_body);
    free(r->reply_type);
    free(r);
    *con_cls = NULL;
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
        c->since_ms = ev_now_ms();
        c->next = s->conns;
        if (c->next)
            c->next->prev = c;
        s->conns = c;
        *socket_context = c;
    } else if (c) {
        if (c->prev)
            c->prev->next = c->next;
        else
            s->conns = c->next;
        if (c->next)
            c->next->prev = c->prev;
        free(c);
        *socket_context = NULL;
    }
}

/* Once a second: shuts down connections that have not sent a whole request
 * head within the deadline, and those whose peer has hung up before a whole
 * request arrived (MHD can miss an end of stream that comes with the last
 * bytes it reads, and would keep them until its timeout). MHD then sees the
 * end and closes them. A peer that hangs up after a whole request still
 * gets its reply. */
static void on_sweep(ev_loop *loop, void *data)
{
    hs_server *s = data;
    s->sweep = ev_timer_start(loop, 1000, on_sweep, s);
    uint64_t now = ev_now_ms();
    size_t n = 0, cap = 64;
    struct pollfd stack[64], *pf = stack;
    hs_conn *cstack[64], **cs = cstack;
    int cut = 0;
    for (hs_conn *c = s->conns; c; c = c->next) {
        if (c->body_done || c->cut || c->fd < 0)
            continue;
        if (!c->busy && now - c->since_ms > s->head_ms) {
            shutdown(c->fd, SHUT_RDWR);
            c->cut = 1;
            cut++;
            continue;
        }
        if (n == cap) {
            cap *= 2;
            pf = pf == stack ? memcpy(xmalloc(cap * sizeof *pf), stack, sizeof stack) : xrealloc(pf, cap * sizeof *pf);
            cs = cs == cstack ? memcpy(xmalloc(cap * sizeof *cs), cstack, sizeof cstack) : xrealloc(cs, cap * sizeof *cs);
        }
        pf[n] = (struct pollfd){.fd = c->fd, .events = POLLRDHUP};
        cs[n++] = c;
    }
    if (n && poll(pf, n, 0) > 0)
        for (size_t i = 0; i < n; i++) {
            int avail = 0;
            if ((pf[i].revents & (POLLRDHUP | POLLHUP | POLLERR)) && ioctl(pf[i].fd, FIONREAD, &avail) == 0 &&
                avail == 0) {
                shutdown(pf[i].fd, SHUT_RDWR);
                cs[i]->cut = 1;
                cut++;
            }
        }
    if (pf != stack)
        free(pf);
    if (cs != cstack)
        free(cs);
    if (cut)
        kick(s);
}

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

hs_server *hs_start(ev_loop *loop, const hs_config *cfg, hs_handler handler, void *data, char *err, size_t errlen)
{
    if (cfg->port < 0 || cfg->port > 65535) {
        snprintf(err, errlen, "port %d is out of range 0-65535", cfg->port);
        return NULL;
    }
    hs_server *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    s->handler = handler;
    s->data = data;
    s->body_limit = cfg->body_limit ? cfg->body_limit : HS_DEFAULT_BODY_LIMIT;
    s->server_header = cfg->server_header ? xstrdup(cfg->server_header) : NULL;
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    const char *host = cfg->host ? cfg->host : "127.0.0.1";
    if (cfg->listen_fd < 0) {
        if (resolve(host, cfg->port, &ss, &sl, err, errlen) < 0) {
            free(s->server_header);
            free(s);
            return NULL;
        }
        if (ss.ss_family == AF_INET6)
            flags |= MHD_USE_IPv6;
    }
    /* Where to listen: an int or a pointer, so through an option array
     * (each va_arg must read the type that was passed). */
    struct MHD_OptionItem where[] = {
        {cfg->listen_fd >= 0 ? MHD_OPTION_LISTEN_SOCKET : MHD_OPTION_SOCK_ADDR, cfg->listen_fd, &ss},
        {MHD_OPTION_END, 0, NULL},
    };
    errno = 0;
    s->d = MHD_start_daemon(
        flags, 0, NULL, NULL, on_request, s, MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, on_connection, s,
        MHD_OPTION_CONNECTION_LIMIT, cfg->connection_limit ? cfg->connection_limit : 4096u,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->per_ip_limit, MHD_OPTION_CONNECTION_TIMEOUT,
        cfg->idle_timeout_s ? cfg->idle_timeout_s : 30u,
        MHD_OPTION_ARRAY, where, MHD_OPTION_END);
    if (!s->d) {
        if (cfg->listen_fd >= 0)
            snprintf(err, errlen, "cannot start HTTP server on the given socket: %s",
                     errno ? strerror(errno) : "libmicrohttpd refused");
        else
            snprintf(err, errlen, "cannot listen on %s:%d: %s", host, cfg->port,
                     errno ? strerror(errno) : "libmicrohttpd refused (address in use?)");
        free(s->server_header);
        free(s);
        if (cfg->listen_fd >= 0)
            close(cfg->listen_fd);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = di ? di->port : cfg->port;
    di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_EPOLL_FD);
    s->epfd = di ? di->epoll_fd : -1;
    if (s->epfd < 0 || ev_fd_set(loop, s->epfd, EV_READ, on_epoll, s) < 0) {
        snprintf(err, errlen, "cannot watch the HTTP server's epoll fd: %s", strerror(errno));
        MHD_stop_daemon(s->d);
        free(s->server_header);
        free(s);
        return NULL;
    }
    s->head_ms = 1000u * (cfg->idle_timeout_s ? cfg->idle_timeout_s : 30u);
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
    /* Resume deferred requests with a reply so MHD can close them cleanly. */
    while (s->deferred) {
        hs_request *r = s->deferred;
        char *env = proto_envelope(false, 503, "Server is stopping.", NULL);
        hs_reply(r, 503, NULL, env, strlen(env));
        unlink_deferred(r);
    }
    if (s->timer)
        ev_timer_stop(s->loop, s->timer);
    if (s->stop_timer)
        ev_timer_stop(s->loop, s->stop_timer);
    if (s->sweep)
        ev_timer_stop(s->loop, s->sweep);
    ev_fd_del(s->loop, s->epfd);
    struct MHD_Daemon *d = s->d;
    s->d = NULL; /* no abort callbacks while stopping */
    MHD_stop_daemon(d);
    free(s->server_header);
    free(s);
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
    return r->body.data ? r->body.data : "";
}

size_t hs_body_len(const hs_request *r)
{
    return r->body.len;
}

void hs_body_free(hs_request *r)
{
    xbuf_free(&r->body);
}

/* The peer's address is rendered on first use only: formatting it for
 * every request costs more than most requests. */
const char *hs_peer(const hs_request *cr)
{
    hs_request *r = (hs_request *)cr;
    if (r->peer_done)
        return r->peer;
    r->peer_done = 1;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
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
        snprintf(r->peer, sizeof r->peer, "%s:%d", host, port);
    }
    return r->peer;
}

void hs_reply(hs_request *r, int status, const char *content_type, char *body, size_t len)
{
    if (r->replied) {
        free(body);
        return;
    }
    r->replied = 1;
    r->status = status;
    r->reply_type = content_type ? xstrdup(content_type) : NULL;
    r->reply_body = body;
    r->reply_len = body ? len : 0;
    if (r->suspended) {
        /* MHD signals nothing to its epoll set on resume in external mode:
         * run it on the next loop pass. */
        MHD_resume_connection(r->conn);
        hs_server *srv = r->srv;
        if (srv->timer)
            ev_timer_stop(srv->loop, srv->timer);
        srv->timer = ev_timer_start(srv->loop, 0, on_timer, srv);
    }
}

void hs_defer(hs_request *r)
{
    if (r->deferred || r->replied)
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
