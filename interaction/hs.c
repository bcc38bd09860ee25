/* hs: a lean HTTP/1.1 server on the ev loop: non-blocking sockets, one state
 * machine per connection, heads parsed in place, bodies received straight
 * into their final buffer, replies sent with one sendmsg (see hs.h). */
#include "hs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "util.h"
#include "xalloc.h"

#define HS_DEFAULT_BODY_LIMIT ((size_t)256 << 20)
/* A declared Content-Length is trusted for one allocation up to this much
 * before any of the body has arrived; a larger one is allocated whole once
 * its first bytes arrive (see hs.h). */
#define HS_PREALLOC_MAX ((size_t)1 << 20)
#define HS_BUF_INIT ((size_t)16 << 10) /* per-connection input buffer */
#define HS_HEAD_MAX ((size_t)64 << 10) /* request line + headers (431 beyond) */
#define HS_MAX_HEADERS 100             /* header lines (431 beyond) */
#define HS_BODY_ROOM ((size_t)4 << 10) /* free input space kept after a head */
#define HS_LINE_MAX 1024               /* chunk-size and trailer lines */
#define HS_TRAILER_MAX ((size_t)16 << 10)
#define HS_LINGER_MS 2000               /* draining after a final reply */
#define HS_LINGER_MAX ((size_t)1 << 20) /* bytes drained at most */
#define HS_ACCEPT_BATCH 64

enum {
    C_HEAD,   /* waiting for (the rest of) a request head */
    C_BODY,   /* reading a Content-Length body */
    C_CHUNK,  /* decoding a chunked body */
    C_DEFER,  /* handler deferred its reply: nothing is read */
    C_WRITE,  /* a reply is being sent */
    C_LINGER, /* final reply sent, write side shut: draining until EOF */
};

enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

typedef struct {
    const char *name, *value;
} hs_kv;

typedef struct hs_conn hs_conn;

struct hs_request {
    hs_conn *conn;
    const char *method;
    const char *path;
    hs_kv hdr[HS_MAX_HEADERS];
    unsigned nhdr;
    hs_kv *query; /* owned by the connection (reused), nquery used */
    unsigned nquery, query_cap;
    xbuf body;
    int minor;     /* HTTP/1.<minor> */
    int head_ok;   /* the head was parsed: accessors are valid */
    int handled;   /* the handler ran */
    int answered;  /* a reply other than the handler's was queued (413...) */
    int deferred;  /* hs_defer() was called */
    int replied;   /* hs_reply() was called */
    int is_head;   /* method HEAD: no body in the reply */
    int expect100; /* Expect: 100-continue */
    int keep;      /* keep the connection alive after the reply */
};

struct hs_conn {
    hs_server *srv;
    hs_conn *prev, *next;
    int fd;
    unsigned ev; /* interest set registered with the loop */
    int state;
    int eof;         /* the peer shut its write side */
    int close_after; /* close once the reply is sent */
    char *buf;       /* input: [off, len) unconsumed */
    size_t cap, off, len;
    size_t scan;       /* head: scanned for its end up to here */
    size_t line_start; /* head: start of the line being scanned */
    size_t head_end;   /* body phase: the head occupies [0, head_end) */
    size_t want;       /* C_BODY: Content-Length */
    int ch_state;
    size_t ch_left; /* bytes left in the current chunk */
    size_t trailer; /* trailer bytes seen */
    int drop;       /* chunked body over the limit: dropping */
    size_t dropped;
    uint64_t since_ms;  /* accepted, or its last reply was sent */
    uint64_t active_ms; /* last byte in or out */
    size_t lingered;
    hs_request req;
    /* output: head in oh, body in obody (owned) */
    char *oh;
    size_t ohcap;
    char *obody;
    struct iovec iov[2];
    int iovn, iovi;
    ev_timer *resume; /* deferred reply sent, buffered input to process */
    struct sockaddr_storage peer;
    socklen_t peerlen;
    char peer_str[64];
    int peer_done;
};

struct hs_server {
    ev_loop *loop;
    int lfd;
    int port;
    int accept_paused; /* out of fds: retried by the sweep */
    ev_timer *stop_timer;
    ev_timer *sweep;
    hs_handler handler;
    void *data;
    hs_abort_handler abort_cb;
    void *abort_data;
    size_t body_limit;
    unsigned conn_limit, per_ip_limit, nconns;
    uint64_t head_ms, idle_ms;
    char *server_header;
    size_t server_header_len;
    int stopping;
    hs_conn *conns;
    unsigned long long bytes_in, bytes_out;
    time_t date_sec;
    char date[40]; /* "Date: ...\r\n", re-rendered at most once a second */
    size_t date_len;
};

void hs_config_init(hs_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->listen_fd = -1;
}

/* ---- small helpers ---- */

static void set_interest(hs_conn *c, unsigned ev);
static void on_conn_io(ev_loop *loop, int fd, unsigned events, void *data);

static void set_interest(hs_conn *c, unsigned ev)
{
    if (c->ev == ev)
        return;
    if (ev == 0)
        ev_fd_del(c->srv->loop, c->fd);
    else if (ev_fd_set(c->srv->loop, c->fd, ev, on_conn_io, c) < 0)
        return; /* leaves c->ev as it was; the sweep's timeouts still apply */
    c->ev = ev;
}

static int is_tchar(unsigned char ch)
{
    static const char extra[] = "!#$%&'*+-.^_`|~";
    return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
           (ch && strchr(extra, ch) != NULL);
}

static int hexval(unsigned char ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* URL-decodes s in place ('+' is a space when plus): %XX decoded, a bad
 * escape kept as is (like libmicrohttpd). */
static void url_decode(char *s, int plus)
{
    char *w = s;
    for (char *p = s; *p; p++) {
        int h, l;
        if (*p == '+' && plus) {
            *w++ = ' ';
        } else if (*p == '%' && (h = hexval((unsigned char)p[1])) >= 0 && (l = hexval((unsigned char)p[2])) >= 0) {
            *w++ = (char)(h * 16 + l);
            p += 2;
        } else {
            *w++ = *p;
        }
    }
    *w = '\0';
}

static char *put(char *p, const char *s, size_t n)
{
    memcpy(p, s, n);
    return p + n;
}

static char *put_uint(char *p, unsigned long long v)
{
    char tmp[24];
    size_t n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

static const char *reason(int status)
{
    switch (status) {
    case 100:
        return "Continue";
    case 200:
        return "OK";
    case 201:
        return "Created";
    case 202:
        return "Accepted";
    case 204:
        return "No Content";
    case 301:
        return "Moved Permanently";
    case 302:
        return "Found";
    case 304:
        return "Not Modified";
    case 400:
        return "Bad Request";
    case 401:
        return "Unauthorized";
    case 403:
        return "Forbidden";
    case 404:
        return "Not Found";
    case 405:
        return "Method Not Allowed";
    case 408:
        return "Request Timeout";
    case 409:
        return "Conflict";
    case 410:
        return "Gone";
    case 411:
        return "Length Required";
    case 413:
        return "Content Too Large";
    case 415:
        return "Unsupported Media Type";
    case 422:
        return "Unprocessable Content";
    case 429:
        return "Too Many Requests";
    case 431:
        return "Request Header Fields Too Large";
    case 500:
        return "Internal Server Error";
    case 501:
        return "Not Implemented";
    case 502:
        return "Bad Gateway";
    case 503:
        return "Service Unavailable";
    case 504:
        return "Gateway Timeout";
    case 505:
        return "HTTP Version Not Supported";
    default:
        return "Unknown";
    }
}

static void render_date(hs_server *s)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME_COARSE, &ts);
    if (s->date_len && ts.tv_sec == s->date_sec)
        return;
    s->date_sec = ts.tv_sec;
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    s->date_len = strftime(s->date, sizeof s->date, "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &tm);
}

/* ---- connections ---- */

static void request_reset(hs_request *r)
{
    xbuf_free(&r->body);
    r->method = r->path = NULL;
    r->nhdr = r->nquery = 0;
    r->minor = 1;
    r->head_ok = r->handled = r->answered = r->deferred = r->replied = 0;
    r->is_head = r->expect100 = 0;
    r->keep = 1;
}

/* Frees the connection. The abort handler runs for a request whose head
 * arrived but whose handler did not run and that was not answered. */
static void conn_free(hs_conn *c)
{
    hs_server *s = c->srv;
    hs_request *r = &c->req;
    if (r->head_ok && !r->handled && !r->answered && s->abort_cb && !s->stopping) {
        xbuf_free(&r->body);
        s->abort_cb(s->abort_data, r);
    }
    if (c->ev)
        ev_fd_del(s->loop, c->fd);
    if (c->resume)
        ev_timer_stop(s->loop, c->resume);
    close(c->fd);
    if (c->prev)
        c->prev->next = c->next;
    else
        s->conns = c->next;
    if (c->next)
        c->next->prev = c->prev;
    s->nconns--;
    xbuf_free(&r->body);
    free(r->query);
    free(c->buf);
    free(c->oh);
    free(c->obody);
    free(c);
}

/* A final reply went out: drain what the peer still sends (so that closing
 * does not reset the connection under the reply), then close. */
static void conn_linger(hs_conn *c)
{
    if (c->eof || shutdown(c->fd, SHUT_WR) < 0) {
        conn_free(c);
        return;
    }
    c->state = C_LINGER;
    c->since_ms = ev_now_ms();
    c->lingered = 0;
    set_interest(c, EV_READ);
}

/* Formats the reply head into c->oh and queues head and body (taken over). */
static void build_reply(hs_conn *c, int status, const char *type, char *body, size_t len)
{
    hs_server *s = c->srv;
    hs_request *r = &c->req;
    if (!type)
        type = "application/json";
    int nobody = (status >= 100 && status < 200) || status == 204 || status == 304;
    if (nobody)
        len = 0;
    if (!r->keep || c->eof || s->stopping)
        c->close_after = 1;
    size_t tlen = strlen(type);
    size_t need = 256 + s->server_header_len + tlen;
    if (need > c->ohcap) {
        free(c->oh);
        c->ohcap = need < 512 ? 512 : need;
        c->oh = xmalloc(c->ohcap);
    }
    render_date(s);
    const char *why = reason(status);
    char *p = c->oh;
    p = put(p, r->minor == 0 ? "HTTP/1.0 " : "HTTP/1.1 ", 9);
    p = put_uint(p, status >= 100 && status <= 999 ? (unsigned)status : 500u);
    *p++ = ' ';
    p = put(p, why, strlen(why));
    p = put(p, "\r\n", 2);
    if (s->server_header) {
        p = put(p, "Server: ", 8);
        p = put(p, s->server_header, s->server_header_len);
        p = put(p, "\r\n", 2);
    }
    p = put(p, s->date, s->date_len);
    if (c->close_after)
        p = put(p, "Connection: close\r\n", 19);
    else if (r->minor == 0)
        p = put(p, "Connection: keep-alive\r\n", 24);
    p = put(p, "Content-Type: ", 14);
    p = put(p, type, tlen);
    p = put(p, "\r\n", 2);
    if (!nobody) {
        p = put(p, "Content-Length: ", 16);
        p = put_uint(p, len);
        p = put(p, "\r\n", 2);
    }
    p = put(p, "\r\n", 2);
    free(c->obody);
    c->obody = body;
    c->iov[0].iov_base = c->oh;
    c->iov[0].iov_len = (size_t)(p - c->oh);
    c->iovn = 1;
    c->iovi = 0;
    if (body && len && !nobody && !r->is_head) {
        c->iov[1].iov_base = body;
        c->iov[1].iov_len = len;
        c->iovn = 2;
        s->bytes_out += len;
    }
}

/* Sends what is queued: 1 all sent, 0 the socket is full, -1 error. */
static int conn_send(hs_conn *c)
{
    while (c->iovi < c->iovn) {
        struct msghdr m = {0};
        m.msg_iov = c->iov + c->iovi;
        m.msg_iovlen = (size_t)(c->iovn - c->iovi);
        ssize_t n = sendmsg(c->fd, &m, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        c->active_ms = ev_now_ms();
        size_t left = (size_t)n;
        while (c->iovi < c->iovn && left >= c->iov[c->iovi].iov_len)
            left -= c->iov[c->iovi++].iov_len;
        if (c->iovi < c->iovn) {
            c->iov[c->iovi].iov_base = (char *)c->iov[c->iovi].iov_base + left;
            c->iov[c->iovi].iov_len -= left;
        }
    }
    return 1;
}

/* The reply is out: next request or close. 0 if the connection lives on
 * (state C_HEAD), -1 if it was closed. */
static int reply_done(hs_conn *c)
{
    free(c->obody);
    c->obody = NULL;
    c->iovn = c->iovi = 0;
    request_reset(&c->req);
    if (c->close_after) {
        conn_linger(c);
        return -1;
    }
    c->state = C_HEAD;
    c->since_ms = ev_now_ms();
    if (c->off == c->len) {
        c->off = c->len = 0;
        if (c->cap > HS_BUF_INIT) {
            free(c->buf);
            c->buf = xmalloc(HS_BUF_INIT);
            c->cap = HS_BUF_INIT;
        }
    }
    c->scan = c->line_start = c->off;
    set_interest(c, EV_READ);
    return 0;
}

/* Sends the queued reply: 0 done (connection in C_HEAD), 1 pending
 * (C_WRITE), -1 closed. */
static int start_send(hs_conn *c)
{
    int rc = conn_send(c);
    if (rc < 0) {
        c->req.answered = 1; /* no abort: the request got its turn */
        conn_free(c);
        return -1;
    }
    if (rc == 0) {
        c->state = C_WRITE;
        set_interest(c, EV_WRITE);
        return 1;
    }
    return reply_done(c);
}

/* A reply of hs's own (framing errors, 413), with the JSON envelope. The
 * connection closes after it unless keep is set. */
static int answer(hs_conn *c, int status, const char *msg, int keep)
{
    hs_request *r = &c->req;
    r->answered = 1;
    r->is_head = 0;
    if (!keep)
        r->keep = 0;
    char *env = proto_envelope(false, status, msg, NULL);
    build_reply(c, status, NULL, env, strlen(env));
    return start_send(c);
}

static int answer_413(hs_conn *c, int keep)
{
    char msg[100];
    snprintf(msg, sizeof msg, "Request body over the limit of %zu bytes.", c->srv->body_limit);
    return answer(c, 413, msg, keep);
}

/* Bad framing inside a chunked body: the request ended before its handler
 * ran, so the abort handler hears of it too (as it did with MHD). */
static int chunk_error(hs_conn *c, int status, const char *msg)
{
    hs_server *s = c->srv;
    hs_request *r = &c->req;
    if (s->abort_cb && !s->stopping) {
        xbuf_free(&r->body);
        s->abort_cb(s->abort_data, r);
    }
    return answer(c, status, msg, 0);
}

/* Runs the handler on a complete request. Returns as start_send(), or 1
 * when deferred. */
static int dispatch(hs_conn *c)
{
    hs_server *s = c->srv;
    hs_request *r = &c->req;
    if (!r->body.data)
        xbuf_append(&r->body, "", 0);
    else
        r->body.data[r->body.len] = '\0';
    r->handled = 1;
    s->handler(s->data, r);
    if (r->replied)
        return start_send(c);
    if (r->deferred) {
        c->state = C_DEFER;
        set_interest(c, 0);
        return 1;
    }
    char *env = proto_envelope(false, 500, "Internal error: the handler gave no reply.", NULL);
    build_reply(c, 500, NULL, env, strlen(env));
    return start_send(c);
}

/* Finds the end of the head in [scan, len): 1 found (head_end set), 0 not
 * yet. Lines end with LF, optionally preceded by CR. */
static int find_head_end(hs_conn *c)
{
    char *b = c->buf;
    while (c->scan < c->len) {
        char *nl = memchr(b + c->scan, '\n', c->len - c->scan);
        if (!nl) {
            c->scan = c->len;
            return 0;
        }
        size_t i = (size_t)(nl - b);
        size_t ll = i - c->line_start;
        c->scan = i + 1;
        if (ll == 0 || (ll == 1 && b[c->line_start] == '\r')) {
            c->head_end = i + 1;
            return 1;
        }
        c->line_start = i + 1;
    }
    return 0;
}

/* Does the comma-separated header value v hold token tok? */
static int has_token(const char *v, const char *tok)
{
    size_t tl = strlen(tok);
    while (*v) {
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        const char *e = v;
        while (*e && *e != ',')
            e++;
        const char *t = e;
        while (t > v && (t[-1] == ' ' || t[-1] == '\t'))
            t--;
        if ((size_t)(t - v) == tl && strncasecmp(v, tok, tl) == 0)
            return 1;
        v = e;
    }
    return 0;
}

static void parse_query(hs_request *r, char *q)
{
    while (q) {
        char *amp = strchr(q, '&');
        if (amp)
            *amp = '\0';
        if (*q) {
            char *eq = strchr(q, '=');
            if (eq)
                *eq = '\0';
            url_decode(q, 1);
            if (eq)
                url_decode(eq + 1, 1);
            if (r->nquery == r->query_cap) {
                r->query_cap = r->query_cap ? r->query_cap * 2 : 8;
                r->query = xrealloc(r->query, r->query_cap * sizeof *r->query);
            }
            r->query[r->nquery].name = q;
            r->query[r->nquery++].value = eq ? eq + 1 : NULL;
        }
        q = amp ? amp + 1 : NULL;
    }
}

/* Parses the head in buf[0, head_end) in place. 0, or an HTTP status with
 * *msg saying why. */
static int parse_head(hs_conn *c, const char **msg)
{
    hs_request *r = &c->req;
    char *p = c->buf, *end = c->buf + c->head_end;
    /* request line */
    char *nl = memchr(p, '\n', (size_t)(end - p));
    char *le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
    char *sp1 = memchr(p, ' ', (size_t)(le - p));
    if (!sp1 || sp1 == p) {
        *msg = "Malformed request line.";
        return 400;
    }
    for (char *q = p; q < sp1; q++)
        if (!is_tchar((unsigned char)*q)) {
            *msg = "Malformed request line: bad method.";
            return 400;
        }
    char *target = sp1 + 1;
    char *sp2 = memchr(target, ' ', (size_t)(le - target));
    if (!sp2 || sp2 == target) {
        *msg = "Malformed request line.";
        return 400;
    }
    for (char *q = target; q < sp2; q++)
        if ((unsigned char)*q <= ' ' || *q == 0x7f) {
            *msg = "Malformed request line: bad target.";
            return 400;
        }
    char *ver = sp2 + 1;
    size_t vl = (size_t)(le - ver);
    if (vl != 8 || memcmp(ver, "HTTP/", 5) != 0 || ver[5] < '0' || ver[5] > '9' || ver[6] != '.' || ver[7] < '0' ||
        ver[7] > '9') {
        *msg = "Malformed request line: bad HTTP version.";
        return 400;
    }
    if (ver[5] != '1') {
        *msg = "HTTP version not supported: use HTTP/1.1 or HTTP/1.0.";
        return 505;
    }
    r->minor = ver[7] - '0';
    *sp1 = '\0';
    *sp2 = '\0';
    r->method = p;
    r->path = target;
    r->is_head = strcmp(r->method, "HEAD") == 0;
    /* headers */
    p = nl + 1;
    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        le = nl > p && nl[-1] == '\r' ? nl - 1 : nl;
        if (le == p)
            break; /* the empty line */
        if (*p == ' ' || *p == '\t') {
            *msg = "Obsolete header line folding is not accepted.";
            return 400;
        }
        char *colon = memchr(p, ':', (size_t)(le - p));
        if (!colon || colon == p) {
            *msg = "Malformed header line (no name or no colon).";
            return 400;
        }
        for (char *q = p; q < colon; q++)
            if (!is_tchar((unsigned char)*q)) {
                *msg = "Malformed header name.";
                return 400;
            }
        char *v = colon + 1;
        while (v < le && (*v == ' ' || *v == '\t'))
            v++;
        char *ve = le;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
            ve--;
        for (char *q = v; q < ve; q++)
            if (((unsigned char)*q < ' ' && *q != '\t') || *q == 0x7f) {
                *msg = "Control character in a header value.";
                return 400;
            }
        if (r->nhdr == HS_MAX_HEADERS) {
            *msg = "Too many header lines.";
            return 431;
        }
        *colon = '\0';
        *ve = '\0';
        r->hdr[r->nhdr].name = p;
        r->hdr[r->nhdr++].value = v;
        p = nl + 1;
    }
    r->head_ok = 1;
    char *qm = strchr(target, '?');
    if (qm) {
        *qm = '\0';
        parse_query(r, qm + 1);
    }
    url_decode(target, 0);
    return 0;
}

/* Sets up the body of a parsed head. 0 to go on, or as start_send(). */
static int start_body(hs_conn *c)
{
    hs_server *s = c->srv;
    hs_request *r = &c->req;
    const char *cl = NULL, *te = NULL;
    for (unsigned i = 0; i < r->nhdr; i++) {
        const char *n = r->hdr[i].name, *v = r->hdr[i].value;
        if (strcasecmp(n, "Content-Length") == 0) {
            if (cl && strcmp(cl, v) != 0)
                return answer(c, 400, "Conflicting Content-Length headers.", 0);
            cl = v;
        } else if (strcasecmp(n, "Transfer-Encoding") == 0) {
            if (te)
                return answer(c, 501, "Only one Transfer-Encoding header, chunked, is supported.", 0);
            te = v;
        } else if (strcasecmp(n, "Connection") == 0) {
            if (has_token(v, "close"))
                r->keep = 0;
            else if (r->minor == 0 && has_token(v, "keep-alive"))
                r->keep = 2;
        } else if (strcasecmp(n, "Expect") == 0 && strcasecmp(v, "100-continue") == 0) {
            r->expect100 = r->minor >= 1;
        }
    }
    if (r->minor == 0 && r->keep == 1)
        r->keep = 0;
    c->off = c->head_end;
    if (te) {
        if (cl)
            return answer(c, 400, "Content-Length and Transfer-Encoding together are ambiguous.", 0);
        if (strcasecmp(te, "chunked") != 0)
            return answer(c, 501, "Unsupported Transfer-Encoding: only chunked is accepted.", 0);
        c->state = C_CHUNK;
        c->ch_state = CH_SIZE;
        c->trailer = 0;
        c->drop = 0;
        c->dropped = 0;
    } else if (cl) {
        unsigned long long n = 0;
        const char *q = cl;
        if (!*q)
            return answer(c, 400, "Malformed Content-Length: not a decimal number.", 0);
        for (; *q; q++) {
            if (*q < '0' || *q > '9')
                return answer(c, 400, "Malformed Content-Length: not a decimal number.", 0);
            if (n > (ULLONG_MAX - 9) / 10)
                return answer(c, 400, "Malformed Content-Length: too large a number.", 0);
            n = n * 10 + (unsigned)(*q - '0');
        }
        if (n > s->body_limit)
            return answer_413(c, 0);
        if (n == 0)
            return dispatch(c);
        c->want = (size_t)n;
        c->state = C_BODY;
        size_t have = c->len - c->off;
        if (have || c->want <= HS_PREALLOC_MAX) {
            r->body.data = xmalloc(c->want + 1);
            r->body.cap = c->want + 1;
        }
        if (have) {
            size_t take = have < c->want ? have : c->want;
            memcpy(r->body.data, c->buf + c->off, take);
            r->body.len = take;
            c->off += take;
            s->bytes_in += take;
            if (take == c->want)
                return dispatch(c);
        }
    } else {
        return dispatch(c);
    }
    if (r->expect100 && c->off == c->len) {
        static const char cont[] = "HTTP/1.1 100 Continue\r\n\r\n";
        ssize_t w;
        do
            w = send(c->fd, cont, sizeof cont - 1, MSG_NOSIGNAL);
        while (w < 0 && errno == EINTR);
        if (w != (ssize_t)(sizeof cont - 1)) {
            conn_free(c);
            return -1;
        }
    }
    return 0;
}

/* Decodes chunked body data from the input buffer. 0 needs more input, or
 * as start_send() when the body is complete (or wrong). */
static int decode_chunks(hs_conn *c)
{
    hs_server *s = c->srv;
    hs_request *r = &c->req;
    for (;;) {
        char *b = c->buf + c->off;
        size_t avail = c->len - c->off;
        if (c->ch_state == CH_DATA) {
            if (!avail)
                return 0;
            size_t n = avail < c->ch_left ? avail : c->ch_left;
            s->bytes_in += n;
            if (!c->drop && r->body.len + n > s->body_limit) {
                xbuf_free(&r->body);
                c->drop = 1;
            }
            if (c->drop) {
                c->dropped += n;
                if (c->dropped > s->body_limit) { /* cut off */
                    r->answered = 1;
                    conn_free(c);
                    return -1;
                }
            } else {
                xbuf_append(&r->body, b, n);
            }
            c->off += n;
            c->ch_left -= n;
            if (!c->ch_left)
                c->ch_state = CH_DATA_END;
            continue;
        }
        if (c->ch_state == CH_DATA_END) {
            if (!avail)
                return 0;
            if (b[0] == '\n') {
                c->off += 1;
            } else if (b[0] == '\r') {
                if (avail < 2)
                    return 0;
                if (b[1] != '\n')
                    return chunk_error(c, 400, "Malformed chunked body: no line end after chunk data.");
                c->off += 2;
            } else {
                return chunk_error(c, 400, "Malformed chunked body: no line end after chunk data.");
            }
            c->ch_state = CH_SIZE;
            continue;
        }
        char *nl = memchr(b, '\n', avail);
        if (!nl) {
            if (avail > HS_LINE_MAX)
                return chunk_error(c, 400, "Malformed chunked body: line too long.");
            return 0;
        }
        size_t ll = (size_t)(nl - b);
        if (ll > HS_LINE_MAX)
            return chunk_error(c, 400, "Malformed chunked body: line too long.");
        c->off += ll + 1;
        if (ll && b[ll - 1] == '\r')
            ll--;
        if (c->ch_state == CH_TRAILER) {
            if (ll == 0) {
                if (c->drop)
                    return answer_413(c, 1);
                return dispatch(c);
            }
            c->trailer += ll;
            if (c->trailer > HS_TRAILER_MAX)
                return chunk_error(c, 431, "Chunked body trailer too large.");
            continue;
        }
        /* chunk size: hex digits, then optional extensions */
        size_t i = 0, size = 0;
        int h;
        while (i < ll && (h = hexval((unsigned char)b[i])) >= 0) {
            if (size > (SIZE_MAX >> 4))
                return chunk_error(c, 400, "Malformed chunked body: chunk size overflows.");
            size = size * 16 + (size_t)h;
            i++;
        }
        if (i == 0 || (i < ll && b[i] != ';' && b[i] != ' ' && b[i] != '\t'))
            return chunk_error(c, 400, "Malformed chunked body: bad chunk size.");
        if (size == 0) {
            c->ch_state = CH_TRAILER;
        } else {
            c->ch_left = size;
            c->ch_state = CH_DATA;
        }
    }
}

/* Makes room for input: in C_HEAD the unconsumed bytes move to the front
 * (the buffer grows up to the head limit); in a body phase they move to
 * just after the head, which stays in place. */
static void make_room(hs_conn *c)
{
    size_t base = c->state == C_HEAD ? 0 : c->head_end;
    if (c->off == c->len) {
        c->off = c->len = base;
        if (c->state == C_HEAD)
            c->scan = c->line_start = 0;
    }
    if (c->cap - c->len >= 1024 || c->state != C_HEAD) {
        if (c->cap - c->len < HS_LINE_MAX + 2 && c->off > base) {
            memmove(c->buf + base, c->buf + c->off, c->len - c->off);
            c->len -= c->off - base;
            c->off = base;
        }
        return;
    }
    if (c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->scan -= c->off;
        c->line_start -= c->off;
        c->len -= c->off;
        c->off = 0;
    }
    if (c->cap - c->len < 1024 && c->cap < HS_HEAD_MAX + HS_BODY_ROOM) {
        size_t ncap = c->cap * 2;
        if (ncap > HS_HEAD_MAX + HS_BODY_ROOM)
            ncap = HS_HEAD_MAX + HS_BODY_ROOM;
        c->buf = xrealloc(c->buf, ncap);
        c->cap = ncap;
    }
}

/* Works through buffered input as far as it goes. 0: wants more input
 * (state C_HEAD, C_BODY or C_CHUNK), 1: not reading now (C_WRITE, C_DEFER),
 * -1: the connection was closed. */
static int process(hs_conn *c)
{
    for (;;) {
        int rc;
        switch (c->state) {
        case C_HEAD: {
            if (c->line_start == c->off) { /* tolerate empty lines before a request */
                while (c->off < c->len && (c->buf[c->off] == '\r' || c->buf[c->off] == '\n'))
                    c->off++;
                c->line_start = c->off;
                if (c->scan < c->off)
                    c->scan = c->off;
            }
            if (!find_head_end(c)) {
                if (c->len - c->off >= HS_HEAD_MAX)
                    return answer(c, 431, "Request head too large.", 0) < 0 ? -1 : 1;
                return 0;
            }
            if (c->head_end - c->off > HS_HEAD_MAX)
                return answer(c, 431, "Request head too large.", 0) < 0 ? -1 : 1;
            /* the head moves to the front and gets room after it */
            if (c->off > 0) {
                memmove(c->buf, c->buf + c->off, c->len - c->off);
                c->len -= c->off;
                c->head_end -= c->off;
                c->off = 0;
            }
            if (c->cap - c->head_end < HS_BODY_ROOM) {
                c->cap = c->head_end + HS_BODY_ROOM;
                c->buf = xrealloc(c->buf, c->cap);
            }
            const char *msg = NULL;
            int st = parse_head(c, &msg);
            if (st) {
                c->req.head_ok = 0;
                rc = answer(c, st, msg, 0);
            } else {
                rc = start_body(c);
            }
            break;
        }
        case C_BODY:
            return 0; /* the body is received by conn_read() */
        case C_CHUNK:
            rc = decode_chunks(c);
            if (rc == 0 && c->state == C_CHUNK)
                return 0;
            break;
        default:
            return 1;
        }
        if (rc < 0)
            return -1;
        if (c->state != C_HEAD && c->state != C_CHUNK && c->state != C_BODY)
            return 1;
        if (c->state == C_BODY)
            return 0;
    }
}

/* The peer shut its write side (or the connection failed). */
static void conn_eof(hs_conn *c)
{
    c->eof = 1;
    conn_free(c);
}

/* Reads what is useful now: one recv() per pass, into the input buffer, or
 * straight into the body buffer for a Content-Length body. Another pass only
 * when the last one filled all the room it had (there may be more). */
static void conn_read(hs_conn *c)
{
    hs_server *s = c->srv;
    hs_request *r = &c->req;
    if (c->resume) { /* buffered requests come before what follows them */
        ev_timer_stop(s->loop, c->resume);
        c->resume = NULL;
        if (process(c) != 0)
            return;
    }
    for (;;) {
        int direct = c->state == C_BODY && r->body.data;
        char *dst;
        size_t room;
        if (direct) {
            dst = r->body.data + r->body.len;
            room = c->want - r->body.len;
        } else {
            make_room(c);
            dst = c->buf + c->len;
            room = c->cap - c->len;
        }
        if (!room) { /* cannot happen: the head limit is checked first */
            conn_free(c);
            return;
        }
        ssize_t n = recv(c->fd, dst, room, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                conn_eof(c);
            return;
        }
        if (n == 0) {
            conn_eof(c);
            return;
        }
        c->active_ms = ev_now_ms();
        if (c->state == C_BODY) {
            if (direct) {
                r->body.len += (size_t)n;
                s->bytes_in += (size_t)n;
            } else { /* the first bytes of a large body: allocate it whole */
                c->len += (size_t)n;
                r->body.data = xmalloc(c->want + 1);
                r->body.cap = c->want + 1;
                size_t have = c->len - c->off;
                size_t take = have < c->want ? have : c->want;
                memcpy(r->body.data, c->buf + c->off, take);
                r->body.len = take;
                c->off += take;
                s->bytes_in += take;
            }
            if (r->body.len < c->want) {
                if (direct && (size_t)n < room)
                    return;
                continue;
            }
            if (dispatch(c) == 0)
                process(c); /* pipelined requests already buffered */
            return;
        }
        c->len += (size_t)n;
        if (process(c) != 0 || (size_t)n < room)
            return;
    }
}

static void conn_drain(hs_conn *c)
{
    char tmp[4096];
    for (;;) {
        ssize_t n = recv(c->fd, tmp, sizeof tmp, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            conn_free(c);
            return;
        }
        c->lingered += (size_t)n;
        if (c->lingered > HS_LINGER_MAX) {
            conn_free(c);
            return;
        }
    }
}

static void on_conn_io(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    (void)fd;
    hs_conn *c = data;
    switch (c->state) {
    case C_WRITE: {
        int rc = conn_send(c);
        if (rc < 0) {
            c->req.answered = 1;
            conn_free(c);
        } else if (rc > 0 && reply_done(c) == 0) {
            process(c); /* pipelined requests already buffered */
        }
        return;
    }
    case C_LINGER:
        conn_drain(c);
        return;
    case C_DEFER:
        return;
    default:
        if (events & (EV_READ | EV_ERROR))
            conn_read(c);
        return;
    }
}

/* A deferred reply was sent while input was buffered: process it from the
 * loop, not from inside whoever called hs_reply(). */
static void on_resume(ev_loop *loop, void *data)
{
    (void)loop;
    hs_conn *c = data;
    c->resume = NULL;
    if (c->state == C_HEAD || c->state == C_CHUNK)
        process(c);
}

/* ---- accepting ---- */

static int same_ip(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return 0;
    if (a->ss_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr == ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr, &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return 0;
}

static void on_listen(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)events;
    hs_server *s = data;
    for (int i = 0; i < HS_ACCEPT_BATCH; i++) {
        struct sockaddr_storage ss = {0};
        socklen_t sl = sizeof ss;
        int cfd = accept4(fd, (struct sockaddr *)&ss, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (cfd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO)
                continue;
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* out of descriptors: stop watching until the sweep */
                ev_fd_del(loop, fd);
                s->accept_paused = 1;
            }
            return;
        }
        if (s->nconns >= s->conn_limit) {
            close(cfd);
            continue;
        }
        if (s->per_ip_limit) {
            unsigned same = 0;
            for (hs_conn *o = s->conns; o; o = o->next)
                same += (unsigned)same_ip(&o->peer, &ss);
            if (same >= s->per_ip_limit) {
                close(cfd);
                continue;
            }
        }
        if (ss.ss_family == AF_INET || ss.ss_family == AF_INET6) {
            int one = 1;
            setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        }
        hs_conn *c = xcalloc(1, sizeof *c);
        c->srv = s;
        c->fd = cfd;
        c->peer = ss;
        c->peerlen = sl;
        c->buf = xmalloc(HS_BUF_INIT);
        c->cap = HS_BUF_INIT;
        c->since_ms = c->active_ms = ev_now_ms();
        c->state = C_HEAD;
        request_reset(&c->req);
        c->req.conn = c;
        if (ev_fd_set(loop, cfd, EV_READ, on_conn_io, c) < 0) {
            free(c->buf);
            free(c);
            close(cfd);
            continue;
        }
        c->ev = EV_READ;
        c->next = s->conns;
        if (c->next)
            c->next->prev = c;
        s->conns = c;
        s->nconns++;
    }
}

/* Once a second: the request-head deadline, the silence timeout, lingering
 * closes, and accepting again after running out of descriptors. */
static void on_sweep(ev_loop *loop, void *data)
{
    hs_server *s = data;
    s->sweep = ev_timer_start(loop, 1000, on_sweep, s);
    if (s->accept_paused && ev_fd_set(loop, s->lfd, EV_READ, on_listen, s) == 0)
        s->accept_paused = 0;
    uint64_t now = ev_now_ms();
    hs_conn *next;
    for (hs_conn *c = s->conns; c; c = next) {
        next = c->next;
        switch (c->state) {
        case C_HEAD:
            if (now - c->since_ms > s->head_ms)
                conn_free(c);
            break;
        case C_BODY:
        case C_CHUNK:
        case C_WRITE:
            if (now - c->active_ms > s->idle_ms)
                conn_free(c);
            break;
        case C_LINGER:
            if (now - c->since_ms > HS_LINGER_MS)
                conn_free(c);
            break;
        default:
            break;
        }
    }
}

/* ---- server ---- */

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
        fd = util_tcp_bind(host, cfg->port, SOMAXCONN, true, err, errlen);
        if (fd < 0)
            return NULL;
    }
    struct sockaddr_storage ss = {0};
    socklen_t sl = sizeof ss;
    int port = cfg->port;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    hs_server *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    s->lfd = fd;
    s->port = port;
    s->handler = handler;
    s->data = data;
    s->body_limit = cfg->body_limit ? cfg->body_limit : HS_DEFAULT_BODY_LIMIT;
    s->conn_limit = cfg->connection_limit ? cfg->connection_limit : 4096u;
    s->per_ip_limit = cfg->per_ip_limit;
    s->idle_ms = 1000u * (uint64_t)(cfg->idle_timeout_s ? cfg->idle_timeout_s : 30u);
    s->head_ms = s->idle_ms;
    if (cfg->server_header) {
        s->server_header = xstrdup(cfg->server_header);
        s->server_header_len = strlen(s->server_header);
    }
    if (ev_fd_set(loop, fd, EV_READ, on_listen, s) < 0) {
        snprintf(err, errlen, "cannot watch the HTTP server's socket: %s", strerror(errno));
        close(fd);
        free(s->server_header);
        free(s);
        return NULL;
    }
    s->sweep = ev_timer_start(loop, 1000, on_sweep, s);
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
    s->stopping = 1; /* no abort callbacks, every reply closes */
    while (s->conns) {
        hs_conn *c = s->conns;
        if (c->state == C_DEFER) { /* best effort: one try to say so */
            char *env = proto_envelope(false, 503, "Server is stopping.", NULL);
            build_reply(c, 503, NULL, env, strlen(env));
            conn_send(c);
        }
        conn_free(c);
    }
    if (s->stop_timer)
        ev_timer_stop(s->loop, s->stop_timer);
    if (s->sweep)
        ev_timer_stop(s->loop, s->sweep);
    if (!s->accept_paused)
        ev_fd_del(s->loop, s->lfd);
    close(s->lfd);
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

/* ---- requests ---- */

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
    for (unsigned i = 0; i < r->nhdr; i++)
        if (strcasecmp(r->hdr[i].name, name) == 0)
            return r->hdr[i].value;
    return NULL;
}

const char *hs_query(const hs_request *r, const char *name)
{
    for (unsigned i = 0; i < r->nquery; i++)
        if (strcmp(r->query[i].name, name) == 0)
            return r->query[i].value;
    return NULL;
}

void hs_query_foreach(const hs_request *r, bool (*cb)(void *data, const char *k, const char *v), void *data)
{
    for (unsigned i = 0; i < r->nquery; i++)
        if (!cb(data, r->query[i].name, r->query[i].value))
            return;
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

/* The peer's address is rendered on first use only. */
const char *hs_peer(const hs_request *cr)
{
    hs_conn *c = cr->conn;
    if (c->peer_done)
        return c->peer_str;
    c->peer_done = 1;
    char host[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (c->peer.ss_family == AF_INET) {
        const struct sockaddr_in *in = (const void *)&c->peer;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof host);
        port = ntohs(in->sin_port);
    } else if (c->peer.ss_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const void *)&c->peer;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof host);
        port = ntohs(in6->sin6_port);
    }
    snprintf(c->peer_str, sizeof c->peer_str, "%s:%d", host, port);
    return c->peer_str;
}

void hs_reply(hs_request *r, int status, const char *content_type, char *body, size_t len)
{
    hs_conn *c = r->conn;
    if (r->replied || !r->handled) {
        free(body);
        return;
    }
    r->replied = 1;
    build_reply(c, status, content_type, body, body ? len : 0);
    if (c->state != C_DEFER)
        return; /* sent by dispatch() when the handler returns */
    /* A deferred reply: send now, but process buffered input (pipelined
     * requests) from the loop, not from inside our caller. */
    int rc = conn_send(c);
    if (rc < 0) {
        conn_free(c);
        return;
    }
    if (rc == 0) {
        c->state = C_WRITE;
        set_interest(c, EV_WRITE);
        return;
    }
    if (reply_done(c) == 0 && c->off < c->len && !c->resume)
        c->resume = ev_timer_start(c->srv->loop, 0, on_resume, c);
}

void hs_defer(hs_request *r)
{
    if (r->replied || !r->handled)
        return;
    r->deferred = 1;
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
