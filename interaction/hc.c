/* hc: a lean HTTP/1.1 client on the ev loop (see hc.h).
 *
 * One state machine per request, one non-blocking socket per connection.
 * Connections are pooled per "host:port" (a peer) and reused; an idle one is
 * watched for readability so that a peer's hang-up closes it at once. A
 * request on a reused connection is written from hc_send() itself, head and
 * body in one sendmsg() straight from the caller's buffers; the reply is read
 * into one buffer that holds head and body, and the body handed out in place.
 * Host names are resolved by one resolver thread per client (getaddrinfo
 * blocks) and cached for HC_DNS_TTL_MS; address literals need none. */

#include "hc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "xalloc.h"

#define HC_MAX_ADDRS 8
#define HC_PEER_BUCKETS_MIN 16u /* the peer table doubles past 2 peers a bucket */
#define HC_IDLE_PER_PEER 32u
#define HC_IDLE_MAX 4096u
#define HC_DNS_TTL_MS 5000u
#define HC_MAX_HEAD ((size_t)64 << 10) /* reply head limit */
/* The first read's buffer: below glibc's large-chunk size (1 KiB), whose
 * allocation consolidates the fast bins on every request. */
#define HC_FIRST_READ 960u

typedef struct hc_peer hc_peer;
typedef struct hc_conn hc_conn;

enum req_state { RS_RESOLVING, RS_CONNECTING, RS_SENDING, RS_RECEIVING, RS_WAITING };

enum fail_kind { F_RETRY = 1, F_FINAL = 0 };

struct hc_conn {
    hc_client *c;
    hc_peer *p;
    int fd;
    unsigned events;      /* the interest set registered with the loop */
    int used;             /* a reply has been read on it: a reused connection */
    int idle;             /* in the peer's idle list */
    hc_req *req;          /* the request on it; NULL when idle */
    hc_conn *prev, *next; /* the peer's idle list */
};

struct hc_peer {
    char *key;  /* "host:port", also the Host header */
    char *host; /* without brackets */
    int port;
    int literal; /* host is an address: never resolved */
    struct sockaddr_storage addr[HC_MAX_ADDRS];
    socklen_t alen[HC_MAX_ADDRS];
    int naddr;
    uint64_t resolved_until_ms;
    int resolving;
    char resolve_error[160];
    hc_req *waiting; /* requests waiting for the resolution */
    hc_conn *idle;
    unsigned nidle;
    unsigned refs; /* requests that use it + idle connections */
    hc_peer *hnext;
};

struct hc_req {
    hc_client *c;
    hc_peer *p;
    hc_conn *conn;
    enum req_state state;
    char *head; /* the request head, built once, and opts->body_prefix */
    size_t head_len;
    size_t head_body; /* where the prefix starts in head */
    char *body;
    size_t body_len;
    char *tail; /* opts->body_suffix, copied */
    size_t tail_len;
    size_t sent; /* of head + body + tail, this attempt */
    int is_head; /* a HEAD request: the reply has no body */
    char *what;  /* "METHOD url", for messages */
    /* the reply */
    char *in;
    size_t in_len, in_cap;
    size_t head_end; /* 0: head not complete */
    long status;
    long long clen; /* -1: not given */
    int chunked, keep_alive;
    size_t cpos;     /* chunked: parse position in `in` */
    long long cleft; /* chunked: bytes left of the current chunk; -1: size line next; -2: trailers */
    xbuf dechunked;
    size_t max_reply;
    /* attempts */
    long connect_timeout_ms, timeout_ms;
    int retries_left;
    long retry_wait_ms;
    int attempts;
    int addr_i;        /* the address being tried */
    int fresh_retried; /* a dead reused connection was replaced this attempt */
    int forgotten;
    uint64_t start_us, attempt_start_ms;
    ev_timer *timer;      /* attempt deadline, retry wait, or a deferred failure */
    int connecting_timer; /* timer is the connect deadline */
    char fail_msg[200];
    int fail_retry;
    hc_cb cb;
    void *data;
    void (*free_data)(void *);
    hc_req *prev, *next; /* the client's list */
    hc_req *wnext;       /* the peer's waiting list */
};

/* The resolver thread's shared state: freed by whichever of the thread and
 * the client lets go of it last. */
typedef struct rjob {
    struct rjob *next;
    char *key, *host;
    int port;
    struct sockaddr_storage addr[HC_MAX_ADDRS];
    socklen_t alen[HC_MAX_ADDRS];
    int naddr;
    char error[160];
} rjob;

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int efd;
    rjob *todo, *done;
    int closing;
    int refs;
} resolver;

struct hc_client {
    ev_loop *loop;
    hc_req *reqs;
    unsigned pending;
    unsigned long long bytes_in, bytes_out;
    hc_peer **peers; /* hash table of nbuckets chains */
    unsigned nbuckets, npeers;
    unsigned nidle;
    resolver *res;
    int in_send; /* inside hc_send(): no callback may run */
};

void hc_opts_init(hc_opts *o)
{
    memset(o, 0, sizeof *o);
    o->method = "GET";
    o->channel = -1;
    o->retries = -1;
}

/* ---- peers ---- */

static unsigned key_hash(const char *s, size_t n, unsigned nbuckets)
{
    unsigned h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h % nbuckets;
}

static hc_peer *peer_find(hc_client *c, const char *key, size_t n)
{
    for (hc_peer *p = c->peers[key_hash(key, n, c->nbuckets)]; p; p = p->hnext)
        if (strlen(p->key) == n && memcmp(p->key, key, n) == 0)
            return p;
    return NULL;
}

static hc_peer *peer_get(hc_client *c, const char *key, size_t keylen, const char *host, size_t hostlen, int port)
{
    hc_peer *p = peer_find(c, key, keylen);
    if (p)
        return p;
    p = xcalloc(1, sizeof *p);
    p->key = xstrndup(key, keylen);
    p->host = xstrndup(host, hostlen);
    p->port = port;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&p->addr[0];
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&p->addr[0];
    if (inet_pton(AF_INET, p->host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        p->alen[0] = sizeof *a4;
        p->naddr = 1;
        p->literal = 1;
    } else if (inet_pton(AF_INET6, p->host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        p->alen[0] = sizeof *a6;
        p->naddr = 1;
        p->literal = 1;
    } else if (strcasecmp(p->host, "localhost") == 0 ||
               (hostlen > 10 && strcasecmp(p->host + hostlen - 10, ".localhost") == 0)) {
        /* RFC 6761: localhost and *.localhost are the loopback, without
         * asking DNS (as curl and browsers do; glibc does not). */
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        p->alen[0] = sizeof *a4;
        struct sockaddr_in6 *b6 = (struct sockaddr_in6 *)&p->addr[1];
        b6->sin6_family = AF_INET6;
        b6->sin6_port = htons((uint16_t)port);
        b6->sin6_addr = in6addr_loopback;
        p->alen[1] = sizeof *b6;
        p->naddr = 2;
        p->literal = 1;
    }
    if (++c->npeers > 2 * c->nbuckets) { /* rehash into twice the buckets */
        unsigned nb = c->nbuckets * 2;
        hc_peer **t = xcalloc(nb, sizeof *t);
        for (unsigned i = 0; i < c->nbuckets; i++)
            for (hc_peer *q = c->peers[i], *n; q; q = n) {
                n = q->hnext;
                unsigned b = key_hash(q->key, strlen(q->key), nb);
                q->hnext = t[b];
                t[b] = q;
            }
        free(c->peers);
        c->peers = t;
        c->nbuckets = nb;
    }
    unsigned b = key_hash(key, keylen, c->nbuckets);
    p->hnext = c->peers[b];
    c->peers[b] = p;
    return p;
}

static void peer_unref(hc_client *c, hc_peer *p)
{
    if (--p->refs > 0)
        return;
    hc_peer **pp = &c->peers[key_hash(p->key, strlen(p->key), c->nbuckets)];
    c->npeers--;
    while (*pp != p)
        pp = &(*pp)->hnext;
    *pp = p->hnext;
    free(p->key);
    free(p->host);
    free(p);
}

/* ---- connections ---- */

static void on_conn(ev_loop *loop, int fd, unsigned events, void *data);

static void conn_watch(hc_conn *k, unsigned events)
{
    if (k->events == events)
        return;
    if (ev_fd_set(k->c->loop, k->fd, events, on_conn, k) == 0)
        k->events = events;
}

static void conn_close(hc_conn *k)
{
    hc_client *c = k->c;
    if (k->events)
        ev_fd_del(c->loop, k->fd);
    close(k->fd);
    if (k->idle) {
        if (k->prev)
            k->prev->next = k->next;
        else
            k->p->idle = k->next;
        if (k->next)
            k->next->prev = k->prev;
        k->p->nidle--;
        c->nidle--;
        peer_unref(c, k->p);
    }
    free(k);
}

/* A request is done with its connection, which is still good: keep it. */
static void conn_release(hc_conn *k)
{
    hc_client *c = k->c;
    hc_peer *p = k->p;
    k->req = NULL;
    k->used = 1;
    if (p->nidle >= HC_IDLE_PER_PEER || c->nidle >= HC_IDLE_MAX) {
        conn_close(k);
        return;
    }
    k->idle = 1;
    p->refs++;
    k->prev = NULL;
    k->next = p->idle;
    if (p->idle)
        p->idle->prev = k;
    p->idle = k;
    p->nidle++;
    c->nidle++;
    conn_watch(k, EV_READ);
}

static hc_conn *conn_take_idle(hc_peer *p)
{
    hc_conn *k = p->idle;
    if (!k)
        return NULL;
    p->idle = k->next;
    if (p->idle)
        p->idle->prev = NULL;
    k->idle = 0;
    p->nidle--;
    k->c->nidle--;
    p->refs--; /* the request holds the peer from here */
    k->next = k->prev = NULL;
    return k;
}

/* ---- requests ---- */

static void req_timer_stop(hc_req *r)
{
    if (r->timer) {
        ev_timer_stop(r->c->loop, r->timer);
        r->timer = NULL;
    }
}

static void waiting_unlink(hc_req *r)
{
    hc_req **pp = &r->p->waiting;
    while (*pp && *pp != r)
        pp = &(*pp)->wnext;
    if (*pp)
        *pp = r->wnext;
    r->wnext = NULL;
}

static void reply_reset(hc_req *r)
{
    r->in_len = 0;
    r->head_end = 0;
    r->status = 0;
    r->clen = -1;
    r->chunked = 0;
    r->keep_alive = 0;
    r->cpos = 0;
    r->cleft = -1;
    xbuf_free(&r->dechunked);
}

static void req_free(hc_req *r)
{
    hc_client *c = r->c;
    if (r->prev)
        r->prev->next = r->next;
    else
        c->reqs = r->next;
    if (r->next)
        r->next->prev = r->prev;
    req_timer_stop(r);
    if (r->state == RS_RESOLVING)
        waiting_unlink(r);
    if (r->conn) { /* mid-transfer: the connection cannot be reused */
        conn_close(r->conn);
        r->conn = NULL;
    }
    peer_unref(c, r->p);
    free(r->head);
    free(r->body);
    free(r->tail);
    free(r->what);
    free(r->in);
    xbuf_free(&r->dechunked);
    free(r);
    c->pending--;
}

static void req_drop(hc_req *r)
{
    void (*fd)(void *) = r->free_data;
    void *data = r->data;
    req_free(r);
    if (fd)
        fd(data);
}

static void start_attempt(hc_req *r);
static void attempt_failed(hc_req *r, const char *msg, int retry);

static void on_retry(ev_loop *loop, void *data)
{
    (void)loop;
    hc_req *r = data;
    r->timer = NULL;
    start_attempt(r);
}

static void deliver(hc_req *r, hc_result *res)
{
    res->attempts = r->attempts;
    res->seconds = (double)(ev_now_us() - r->start_us) / 1e6;
    hc_cb cb = r->forgotten ? NULL : r->cb;
    void *ud = r->data;
    if (cb)
        cb(ud, res);
    req_free(r);
}

static void fail_later(hc_req *r, const char *msg, int retry);

static void attempt_failed(hc_req *r, const char *msg, int retry)
{
    if (r->c->in_send) {
        fail_later(r, msg, retry);
        return;
    }
    req_timer_stop(r);
    if (r->conn) {
        conn_close(r->conn);
        r->conn = NULL;
    }
    if (retry && r->retries_left > 0 && !r->forgotten) {
        r->retries_left--;
        r->state = RS_WAITING;
        r->timer = ev_timer_start(r->c->loop, (uint64_t)r->retry_wait_ms, on_retry, r);
        return;
    }
    char errbuf[420];
    snprintf(errbuf, sizeof errbuf, "%s: %s (after %d attempt%s)", r->what, msg, r->attempts,
             r->attempts == 1 ? "" : "s");
    hc_result res = {0};
    res.body = "";
    res.error = errbuf;
    deliver(r, &res);
}

/* A failure found while hc_send() is still running: reported from the loop,
 * never from inside hc_send(). */
static void on_deferred_fail(ev_loop *loop, void *data)
{
    (void)loop;
    hc_req *r = data;
    r->timer = NULL;
    attempt_failed(r, r->fail_msg, r->fail_retry);
}

static void fail_later(hc_req *r, const char *msg, int retry)
{
    req_timer_stop(r);
    if (r->conn) {
        conn_close(r->conn);
        r->conn = NULL;
    }
    snprintf(r->fail_msg, sizeof r->fail_msg, "%s", msg);
    r->fail_retry = retry;
    r->state = RS_WAITING;
    r->timer = ev_timer_start(r->c->loop, 0, on_deferred_fail, r);
}

static void on_deadline(ev_loop *loop, void *data);

static void arm_deadline(hc_req *r, int connecting)
{
    req_timer_stop(r);
    uint64_t now = ev_now_ms(), end = r->attempt_start_ms + (uint64_t)r->timeout_ms;
    if (connecting) {
        uint64_t cend = now + (uint64_t)r->connect_timeout_ms;
        if (cend < end) {
            end = cend;
        } else {
            connecting = 0;
        }
    }
    r->connecting_timer = connecting;
    r->timer = ev_timer_start(r->c->loop, end > now ? end - now : 0, on_deadline, r);
}

static void on_deadline(ev_loop *loop, void *data)
{
    (void)loop;
    hc_req *r = data;
    r->timer = NULL;
    char msg[96];
    if (r->connecting_timer)
        snprintf(msg, sizeof msg, "connection timed out after %ld ms", r->connect_timeout_ms);
    else
        snprintf(msg, sizeof msg, "timed out after %ld ms", r->timeout_ms);
    attempt_failed(r, msg, F_RETRY);
}

static void send_more(hc_req *r);

/* Opens a connection to the peer's address addr_i, or the next one that
 * can be tried at once. */
static void connect_next(hc_req *r)
{
    hc_peer *p = r->p;
    hc_client *c = r->c;
    const struct sockaddr_storage *sa = &p->addr[r->addr_i];
    int fd = socket(sa->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        if (r->addr_i + 1 < p->naddr) { /* e.g. no IPv6 here */
            r->addr_i++;
            connect_next(r);
            return;
        }
        char msg[128];
        snprintf(msg, sizeof msg, "cannot open a socket: %s", strerror(errno));
        fail_later(r, msg, F_RETRY);
        return;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    hc_conn *k = xcalloc(1, sizeof *k);
    k->c = c;
    k->p = p;
    k->fd = fd;
    k->req = r;
    r->conn = k;
    r->state = RS_CONNECTING;
    if (connect(fd, (const struct sockaddr *)sa, p->alen[r->addr_i]) == 0) {
        r->state = RS_SENDING;
        arm_deadline(r, 0);
        send_more(r);
        return;
    }
    if (errno != EINPROGRESS) {
        char msg[160];
        snprintf(msg, sizeof msg, "cannot connect to %s: %s", p->key, strerror(errno));
        conn_close(k);
        r->conn = NULL;
        if (r->addr_i + 1 < p->naddr) {
            r->addr_i++;
            connect_next(r);
            return;
        }
        p->resolved_until_ms = 0;
        fail_later(r, msg, F_RETRY);
        return;
    }
    arm_deadline(r, 1);
    conn_watch(k, EV_WRITE);
}

static void resolve_start(hc_req *r);

/* Starts (or restarts) an attempt: on an idle connection if there is one,
 * else a new connection, after resolving the host if needed. */
static void start_attempt(hc_req *r)
{
    hc_peer *p = r->p;
    r->attempts++;
    r->sent = 0;
    r->fresh_retried = 0;
    reply_reset(r);
    r->attempt_start_ms = ev_now_ms();
    r->c->bytes_out += r->head_len - r->head_body + r->body_len + r->tail_len;
    hc_conn *k = conn_take_idle(p);
    if (k) {
        k->req = r;
        r->conn = k;
        r->state = RS_SENDING;
        arm_deadline(r, 0);
        send_more(r);
        return;
    }
    if (!p->literal && (p->naddr == 0 || ev_now_ms() >= p->resolved_until_ms)) {
        resolve_start(r);
        return;
    }
    r->addr_i = 0;
    connect_next(r);
}

/* A reused connection failed before any byte of the reply: the peer closed
 * it while it was idle. Retried once on a new connection (not another idle
 * one: a peer that restarted closed them all), not counted. */
static int retry_fresh(hc_req *r)
{
    if (!r->conn || !r->conn->used || r->fresh_retried || r->in_len > 0)
        return 0;
    conn_close(r->conn);
    r->conn = NULL;
    r->sent = 0;
    reply_reset(r);
    r->fresh_retried = 1;
    hc_peer *p = r->p;
    if (!p->literal && (p->naddr == 0 || ev_now_ms() >= p->resolved_until_ms)) {
        resolve_start(r);
        return 1;
    }
    r->addr_i = 0;
    connect_next(r);
    return 1;
}

static int read_reply(hc_req *r);

static void send_more(hc_req *r)
{
    hc_conn *k = r->conn;
    const struct iovec piece[3] = {{r->head, r->head_len}, {r->body, r->body_len}, {r->tail, r->tail_len}};
    size_t total = r->head_len + r->body_len + r->tail_len;
    while (r->sent < total) {
        struct iovec iov[3];
        int n = 0;
        size_t skip = r->sent;
        for (int i = 0; i < 3; i++) {
            if (skip >= piece[i].iov_len) {
                skip -= piece[i].iov_len;
                continue;
            }
            iov[n].iov_base = (char *)piece[i].iov_base + skip;
            iov[n].iov_len = piece[i].iov_len - skip;
            skip = 0;
            n++;
        }
        struct msghdr mh = {0};
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)n;
        ssize_t w = sendmsg(k->fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                /* Also read: a peer may answer (413) before taking it all. */
                conn_watch(k, EV_READ | EV_WRITE);
                return;
            }
            if (retry_fresh(r))
                return;
            char msg[160];
            snprintf(msg, sizeof msg, "cannot send to %s: %s", r->p->key, strerror(errno));
            /* A reply sent before the peer stopped reading may be waiting
             * (413 on a body over its limit): it is the answer. */
            r->state = RS_RECEIVING;
            if (!r->c->in_send && read_reply(r))
                return;
            attempt_failed(r, msg, F_RETRY);
            return;
        }
        r->sent += (size_t)w;
    }
    r->state = RS_RECEIVING;
    conn_watch(k, EV_READ);
}

/* ---- reply parsing ---- */

static int header_is(const char *line, size_t n, const char *name, const char **val, size_t *vlen)
{
    size_t nl = strlen(name);
    if (n <= nl || line[nl] != ':' || strncasecmp(line, name, nl) != 0)
        return 0;
    const char *v = line + nl + 1, *e = line + n;
    while (v < e && (*v == ' ' || *v == '\t'))
        v++;
    while (e > v && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    *val = v;
    *vlen = (size_t)(e - v);
    return 1;
}

static int has_token(const char *v, size_t n, const char *tok)
{
    size_t tl = strlen(tok);
    for (size_t i = 0; i + tl <= n; i++)
        if (strncasecmp(v + i, tok, tl) == 0 && (i == 0 || v[i - 1] == ',' || v[i - 1] == ' ') &&
            (i + tl == n || v[i + tl] == ',' || v[i + tl] == ' '))
            return 1;
    return 0;
}

/* Parses the head in r->in[0..end). 0, or -1 with msg. */
static int parse_head(hc_req *r, size_t end, char *msg, size_t msglen)
{
    const char *s = r->in, *e = r->in + end;
    const char *nl = memchr(s, '\n', (size_t)(e - s));
    int minor = 1;
    if (!nl || (size_t)(nl - s) < 12 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1') || s[8] != ' ' ||
        s[9] < '1' || s[9] > '9' || s[10] < '0' || s[10] > '9' || s[11] < '0' || s[11] > '9' ||
        (s[12] != ' ' && s[12] != '\r' && s[12] != '\n')) {
        snprintf(msg, msglen, "malformed reply from %s: the status line is not HTTP/1.x", r->p->key);
        return -1;
    }
    minor = s[7] - '0';
    r->status = (s[9] - '0') * 100 + (s[10] - '0') * 10 + (s[11] - '0');
    r->keep_alive = minor == 1;
    r->clen = -1;
    r->chunked = 0;
    for (const char *line = nl + 1; line < e;) {
        const char *le = memchr(line, '\n', (size_t)(e - line));
        if (!le)
            le = e;
        size_t n = (size_t)(le - line);
        const char *v;
        size_t vl;
        if (header_is(line, n, "Content-Length", &v, &vl)) {
            long long x = 0;
            if (vl == 0 || vl > 18) {
                snprintf(msg, msglen, "malformed reply from %s: bad Content-Length", r->p->key);
                return -1;
            }
            for (size_t i = 0; i < vl; i++) {
                if (v[i] < '0' || v[i] > '9') {
                    snprintf(msg, msglen, "malformed reply from %s: bad Content-Length", r->p->key);
                    return -1;
                }
                x = x * 10 + (v[i] - '0');
            }
            if (r->clen >= 0 && r->clen != x) {
                snprintf(msg, msglen, "malformed reply from %s: conflicting Content-Length", r->p->key);
                return -1;
            }
            r->clen = x;
        } else if (header_is(line, n, "Transfer-Encoding", &v, &vl)) {
            if (has_token(v, vl, "chunked"))
                r->chunked = 1;
        } else if (header_is(line, n, "Connection", &v, &vl)) {
            if (has_token(v, vl, "close"))
                r->keep_alive = 0;
            else if (has_token(v, vl, "keep-alive"))
                r->keep_alive = 1;
        }
        line = le + 1;
    }
    if (r->chunked)
        r->clen = -1;
    return 0;
}

/* Decodes chunked data from r->in[r->cpos..]. 1: done, 0: more needed,
 * -1: malformed or over the limit (msg). */
static int dechunk(hc_req *r, char *msg, size_t msglen)
{
    for (;;) {
        const char *s = r->in + r->cpos, *e = r->in + r->in_len;
        if (r->cleft > 0) {
            size_t n = (size_t)(e - s);
            if ((long long)n > r->cleft)
                n = (size_t)r->cleft;
            if (r->dechunked.len + n > r->max_reply) {
                snprintf(msg, msglen, "reply over the limit of %zu bytes", r->max_reply);
                return -1;
            }
            xbuf_append(&r->dechunked, s, n);
            r->cpos += n;
            r->cleft -= (long long)n;
            if (r->cleft > 0)
                return 0;
            r->cleft = -3; /* the CRLF after the data */
            continue;
        }
        const char *nl = memchr(s, '\n', (size_t)(e - s));
        if (!nl) {
            if ((size_t)(e - s) > 4096) {
                snprintf(msg, msglen, "malformed reply from %s: bad chunk", r->p->key);
                return -1;
            }
            return 0;
        }
        size_t ln = (size_t)(nl - s);
        if (r->cleft == -3) {
            if (!(ln == 0 || (ln == 1 && s[0] == '\r'))) {
                snprintf(msg, msglen, "malformed reply from %s: bad chunk end", r->p->key);
                return -1;
            }
            r->cpos += ln + 1;
            r->cleft = -1;
            continue;
        }
        if (r->cleft == -2) { /* trailers, up to an empty line */
            r->cpos += ln + 1;
            if (ln == 0 || (ln == 1 && s[0] == '\r'))
                return 1;
            continue;
        }
        long long size = 0;
        size_t i = 0;
        for (; i < ln; i++) {
            char ch = s[i];
            int d = ch >= '0' && ch <= '9'   ? ch - '0'
                    : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10
                    : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10
                                             : -1;
            if (d < 0)
                break;
            if (size > ((long long)1 << 40)) {
                snprintf(msg, msglen, "reply over the limit of %zu bytes", r->max_reply);
                return -1;
            }
            size = size * 16 + d;
        }
        if (i == 0 || (i < ln && s[i] != ';' && s[i] != '\r' && s[i] != ' ')) {
            snprintf(msg, msglen, "malformed reply from %s: bad chunk size", r->p->key);
            return -1;
        }
        r->cpos += ln + 1;
        r->cleft = size == 0 ? -2 : size;
    }
}

static void reply_done(hc_req *r, int reusable)
{
    req_timer_stop(r);
    hc_conn *k = r->conn;
    r->conn = NULL;
    /* reusable only if the whole request went out: a peer may answer one
     * it stopped reading (413), and then expects the rest or closes */
    if (k) {
        if (reusable && r->keep_alive && r->sent == r->head_len + r->body_len + r->tail_len)
            conn_release(k);
        else
            conn_close(k);
    }
    hc_result res = {0};
    res.status = r->status;
    if (r->chunked) {
        res.body = r->dechunked.data ? r->dechunked.data : "";
        res.body_len = r->dechunked.len;
    } else {
        size_t n = r->in_len - r->head_end;
        if (r->clen >= 0 && (size_t)r->clen < n)
            n = (size_t)r->clen;
        r->in[r->head_end + n] = '\0';
        res.body = r->in + r->head_end;
        res.body_len = n;
    }
    r->c->bytes_in += res.body_len;
    deliver(r, &res);
}

/* Looks at what has arrived. Returns 1 if the request ended (finished or
 * failed: r may be gone), 0 if more is needed. eof: the peer closed. */
static int examine(hc_req *r, int eof)
{
    char msg[200];
    for (;;) {
        if (!r->head_end) {
            /* find the blank line ending the head */
            size_t from = 0;
            const char *end = NULL;
            while (from < r->in_len) {
                const char *nl = memchr(r->in + from, '\n', r->in_len - from);
                if (!nl)
                    break;
                size_t at = (size_t)(nl - r->in) + 1;
                if (at < r->in_len && r->in[at] == '\n') {
                    end = r->in + at + 1;
                    break;
                }
                if (at + 1 < r->in_len && r->in[at] == '\r' && r->in[at + 1] == '\n') {
                    end = r->in + at + 2;
                    break;
                }
                from = at;
            }
            if (!end) {
                if (r->in_len > HC_MAX_HEAD) {
                    snprintf(msg, sizeof msg, "malformed reply from %s: head over %zu bytes", r->p->key, HC_MAX_HEAD);
                    attempt_failed(r, msg, F_FINAL);
                    return 1;
                }
                if (eof) {
                    snprintf(msg, sizeof msg, "%s closed the connection %s", r->p->key,
                             r->in_len ? "in the middle of the reply head" : "without replying");
                    if (!r->in_len && retry_fresh(r))
                        return 1;
                    attempt_failed(r, msg, F_RETRY);
                    return 1;
                }
                return 0;
            }
            size_t hl = (size_t)(end - r->in);
            if (parse_head(r, hl, msg, sizeof msg) < 0) {
                attempt_failed(r, msg, F_FINAL);
                return 1;
            }
            if (r->status >= 100 && r->status < 200) { /* 100 Continue: skip */
                memmove(r->in, r->in + hl, r->in_len - hl);
                r->in_len -= hl;
                r->status = 0;
                continue;
            }
            r->head_end = hl;
            r->cpos = hl;
            if (r->is_head || r->status == 204 || r->status == 304) {
                r->chunked = 0;
                r->clen = 0;
            }
            if (r->clen > (long long)r->max_reply) {
                snprintf(msg, sizeof msg, "reply over the limit of %zu bytes", r->max_reply);
                attempt_failed(r, msg, F_FINAL);
                return 1;
            }
            if (r->clen >= 0 && r->in_cap < hl + (size_t)r->clen + 1) {
                r->in_cap = hl + (size_t)r->clen + 1;
                r->in = xrealloc(r->in, r->in_cap);
            }
        }
        if (r->chunked) {
            int d = dechunk(r, msg, sizeof msg);
            if (d < 0) {
                attempt_failed(r, msg, F_FINAL);
                return 1;
            }
            if (d == 1) {
                reply_done(r, r->cpos == r->in_len);
                return 1;
            }
        } else if (r->clen >= 0) {
            size_t have = r->in_len - r->head_end;
            if (have >= (size_t)r->clen) {
                reply_done(r, have == (size_t)r->clen);
                return 1;
            }
        } else {
            if (r->in_len - r->head_end > r->max_reply) {
                snprintf(msg, sizeof msg, "reply over the limit of %zu bytes", r->max_reply);
                attempt_failed(r, msg, F_FINAL);
                return 1;
            }
            if (eof) {
                r->keep_alive = 0;
                reply_done(r, 0);
                return 1;
            }
            return 0;
        }
        if (eof) {
            snprintf(msg, sizeof msg, "%s closed the connection in the middle of the reply body", r->p->key);
            attempt_failed(r, msg, F_RETRY);
            return 1;
        }
        return 0;
    }
}

/* Reads what has arrived. 1: the request ended or moved to another
 * connection (touch neither r nor its old connection); 0: waiting. */
static int read_reply(hc_req *r)
{
    hc_conn *k = r->conn;
    for (;;) {
        size_t want;
        if (r->head_end && r->clen >= 0 && !r->chunked) {
            want = r->head_end + (size_t)r->clen - r->in_len;
            if (want == 0)
                want = 1; /* a byte beyond the reply: not reusable */
            if (r->in_cap < r->in_len + want + 1) {
                r->in_cap = r->in_len + want + 1;
                r->in = xrealloc(r->in, r->in_cap);
            }
        } else {
            if (r->in_cap < r->in_len + 1025) {
                size_t cap = r->in_cap ? r->in_cap * 2 : HC_FIRST_READ;
                r->in = xrealloc(r->in, cap);
                r->in_cap = cap;
            }
            want = r->in_cap - r->in_len - 1;
        }
        ssize_t n = recv(k->fd, r->in + r->in_len, want, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                return 0;
            if (!r->in_len && retry_fresh(r))
                return 1;
            char msg[160];
            snprintf(msg, sizeof msg, "cannot read from %s: %s", r->p->key, strerror(errno));
            attempt_failed(r, msg, F_RETRY);
            return 1;
        }
        if (n == 0) {
            examine(r, 1);
            return 1;
        }
        r->in_len += (size_t)n;
        if (examine(r, 0))
            return 1;
        if ((size_t)n < want)
            return 0; /* drained: the loop says when there is more */
    }
}

static void on_conn(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    (void)fd;
    hc_conn *k = data;
    hc_req *r = k->req;
    if (!r) { /* idle: the peer hung up or sent something unasked for */
        char b;
        ssize_t n = recv(k->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
            return; /* a stale event (the fd number was reused) */
        conn_close(k);
        return;
    }
    if (r->state == RS_CONNECTING) {
        int err = 0;
        socklen_t el = sizeof err;
        if (getsockopt(k->fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
        if (err == EINPROGRESS)
            return;
        if (err) {
            hc_peer *p = r->p;
            conn_close(k);
            r->conn = NULL;
            if (r->addr_i + 1 < p->naddr) {
                r->addr_i++;
                connect_next(r);
                return;
            }
            char msg[160];
            snprintf(msg, sizeof msg, "cannot connect to %s: %s", p->key, strerror(err));
            p->resolved_until_ms = 0;
            attempt_failed(r, msg, F_RETRY);
            return;
        }
        r->state = RS_SENDING;
        if (r->connecting_timer)
            arm_deadline(r, 0);
        send_more(r);
        return;
    }
    if (r->state == RS_SENDING) {
        if ((events & (EV_READ | EV_ERROR)) && read_reply(r))
            return; /* answered before it took the whole request */
        if (events & EV_WRITE)
            send_more(r);
        return;
    }
    if (r->state == RS_RECEIVING)
        read_reply(r);
}

/* ---- the resolver ---- */

static void resolver_unref(resolver *rs)
{
    pthread_mutex_lock(&rs->mu);
    int left = --rs->refs;
    pthread_mutex_unlock(&rs->mu);
    if (left)
        return;
    for (rjob *j = rs->todo, *n; j; j = n) {
        n = j->next;
        free(j->key);
        free(j->host);
        free(j);
    }
    for (rjob *j = rs->done, *n; j; j = n) {
        n = j->next;
        free(j->key);
        free(j->host);
        free(j);
    }
    close(rs->efd);
    pthread_mutex_destroy(&rs->mu);
    pthread_cond_destroy(&rs->cv);
    free(rs);
}

static void resolve_one(rjob *j)
{
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    char port[16];
    snprintf(port, sizeof port, "%d", j->port);
    int rc = getaddrinfo(j->host, port, &hints, &ai);
    if (rc != 0) {
        snprintf(j->error, sizeof j->error, "cannot resolve host '%s': %s", j->host, gai_strerror(rc));
        return;
    }
    for (struct addrinfo *a = ai; a && j->naddr < HC_MAX_ADDRS; a = a->ai_next) {
        if (a->ai_addrlen > sizeof j->addr[0])
            continue;
        memcpy(&j->addr[j->naddr], a->ai_addr, a->ai_addrlen);
        j->alen[j->naddr] = a->ai_addrlen;
        j->naddr++;
    }
    freeaddrinfo(ai);
    if (!j->naddr)
        snprintf(j->error, sizeof j->error, "cannot resolve host '%s': no address", j->host);
}

static void *resolver_main(void *arg)
{
    resolver *rs = arg;
    pthread_mutex_lock(&rs->mu);
    for (;;) {
        while (!rs->todo && !rs->closing)
            pthread_cond_wait(&rs->cv, &rs->mu);
        if (rs->closing)
            break;
        rjob *j = rs->todo;
        rs->todo = j->next;
        pthread_mutex_unlock(&rs->mu);
        resolve_one(j);
        pthread_mutex_lock(&rs->mu);
        j->next = rs->done;
        rs->done = j;
        if (!rs->closing) {
            uint64_t one = 1;
            ssize_t w = write(rs->efd, &one, sizeof one);
            (void)w;
        }
    }
    pthread_mutex_unlock(&rs->mu);
    resolver_unref(rs);
    return NULL;
}

static void on_resolved(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    (void)events;
    hc_client *c = data;
    uint64_t v;
    ssize_t rd = read(fd, &v, sizeof v);
    (void)rd;
    pthread_mutex_lock(&c->res->mu);
    rjob *done = c->res->done;
    c->res->done = NULL;
    pthread_mutex_unlock(&c->res->mu);
    while (done) {
        rjob *j = done;
        done = j->next;
        hc_peer *p = peer_find(c, j->key, strlen(j->key));
        if (p && p->resolving) {
            p->resolving = 0;
            p->refs++; /* held while its waiting requests restart */
            if (j->naddr) {
                memcpy(p->addr, j->addr, sizeof p->addr);
                memcpy(p->alen, j->alen, sizeof p->alen);
                p->naddr = j->naddr;
                p->resolved_until_ms = ev_now_ms() + HC_DNS_TTL_MS;
            } else {
                p->naddr = 0;
            }
            hc_req *w = p->waiting;
            p->waiting = NULL;
            while (w) {
                hc_req *r = w;
                w = r->wnext;
                r->wnext = NULL;
                if (j->naddr) {
                    r->addr_i = 0;
                    connect_next(r);
                } else {
                    attempt_failed(r, j->error, F_RETRY);
                }
            }
            peer_unref(c, p);
        }
        free(j->key);
        free(j->host);
        free(j);
    }
}

static int resolver_start(hc_client *c)
{
    resolver *rs = xcalloc(1, sizeof *rs);
    rs->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (rs->efd < 0) {
        free(rs);
        return -1;
    }
    pthread_mutex_init(&rs->mu, NULL);
    pthread_cond_init(&rs->cv, NULL);
    rs->refs = 2;
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&th, &at, resolver_main, rs);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        close(rs->efd);
        pthread_mutex_destroy(&rs->mu);
        pthread_cond_destroy(&rs->cv);
        free(rs);
        return -1;
    }
    if (ev_fd_set(c->loop, rs->efd, EV_READ, on_resolved, c) < 0) {
        pthread_mutex_lock(&rs->mu);
        rs->closing = 1;
        pthread_cond_signal(&rs->cv);
        pthread_mutex_unlock(&rs->mu);
        resolver_unref(rs);
        return -1;
    }
    c->res = rs;
    return 0;
}

static void resolve_start(hc_req *r)
{
    hc_peer *p = r->p;
    hc_client *c = r->c;
    r->state = RS_RESOLVING;
    r->wnext = p->waiting;
    p->waiting = r;
    arm_deadline(r, 1);
    if (p->resolving)
        return;
    if (!c->res && resolver_start(c) < 0) {
        waiting_unlink(r);
        fail_later(r, "cannot start the name resolver", F_FINAL);
        return;
    }
    p->resolving = 1;
    rjob *j = xcalloc(1, sizeof *j);
    j->key = xstrdup(p->key);
    j->host = xstrdup(p->host);
    j->port = p->port;
    pthread_mutex_lock(&c->res->mu);
    j->next = c->res->todo;
    c->res->todo = j;
    pthread_cond_signal(&c->res->cv);
    pthread_mutex_unlock(&c->res->mu);
}

/* ---- the client ---- */

hc_client *hc_new(ev_loop *loop)
{
    hc_client *c = xcalloc(1, sizeof *c);
    c->loop = loop;
    c->nbuckets = HC_PEER_BUCKETS_MIN;
    c->peers = xcalloc(c->nbuckets, sizeof *c->peers);
    return c;
}

void hc_free(hc_client *c)
{
    if (!c)
        return;
    while (c->reqs)
        req_drop(c->reqs); // NOLINT(clang-analyzer-unix.Malloc): req_drop unlinks the head
    /* closing a peer's last idle connection frees the peer, unlinking it */
    for (unsigned b = 0; b < c->nbuckets; b++)
        while (c->peers[b] && c->peers[b]->idle)
            conn_close(c->peers[b]->idle); // NOLINT(clang-analyzer-unix.Malloc): conn_close unlinks it
    if (c->res) {
        ev_fd_del(c->loop, c->res->efd);
        pthread_mutex_lock(&c->res->mu);
        c->res->closing = 1;
        pthread_cond_signal(&c->res->cv);
        pthread_mutex_unlock(&c->res->mu);
        resolver_unref(c->res);
    }
    free(c->peers);
    free(c);
}

static int bad_header_text(const char *s)
{
    for (; s && *s; s++)
        if (*s == '\r' || *s == '\n')
            return 1;
    return 0;
}

/* Splits "http://host[:port][/path]" into its parts. */
static int parse_url(const char *url, const char **host, size_t *hostlen, const char **key, size_t *keylen, int *port,
                     const char **path)
{
    if (strncasecmp(url, "http://", 7) != 0)
        return -1;
    const char *s = url + 7, *e = s;
    while (*e && *e != '/' && *e != '?' && *e != '#')
        e++;
    for (const char *q = url; *q; q++)
        if ((unsigned char)*q <= 0x20 || *q == 0x7f)
            return -1;
    if (memchr(s, '@', (size_t)(e - s)))
        return -1;
    *key = s;
    *keylen = (size_t)(e - s);
    const char *pc;
    if (*s == '[') {
        const char *rb = memchr(s, ']', (size_t)(e - s));
        if (!rb)
            return -1;
        *host = s + 1;
        *hostlen = (size_t)(rb - s - 1);
        pc = rb + 1;
        if (pc < e && *pc != ':')
            return -1;
    } else {
        pc = memchr(s, ':', (size_t)(e - s));
        if (!pc)
            pc = e;
        *host = s;
        *hostlen = (size_t)(pc - s);
    }
    if (*hostlen == 0 || *hostlen > 253)
        return -1;
    *port = 80;
    if (pc < e) {
        long v = 0;
        const char *d = pc + 1;
        if (d == e)
            return -1;
        for (; d < e; d++) {
            if (*d < '0' || *d > '9' || (v = v * 10 + (*d - '0')) > 65535)
                return -1;
        }
        if (v == 0)
            return -1;
        *port = (int)v;
    }
    *path = e;
    return 0;
}

hc_req *hc_send(hc_client *c, hc_opts *o, hc_cb cb, void *data)
{
    const char *method = o->method ? o->method : "GET";
    const char *url = o->url ? o->url : "";
    const char *host, *key, *path;
    size_t hostlen, keylen;
    int port;
    int bad = parse_url(url, &host, &hostlen, &key, &keylen, &port, &path) < 0 || !*method ||
              strcspn(method, " \r\n\t") != strlen(method) || bad_header_text(o->token) ||
              bad_header_text(o->extra_header);
    if (bad) {
        free(o->body);
        o->body = NULL;
        return NULL;
    }
    hc_req *r = xcalloc(1, sizeof *r);
    r->c = c;
    r->cb = cb;
    r->data = data;
    r->free_data = o->free_data;
    if (o->body) {
        r->body = o->body;
        r->body_len = o->body_len;
    } else {
        r->body = xstrdup("{}");
        r->body_len = 2;
    }
    o->body = NULL;
    r->is_head = strcmp(method, "HEAD") == 0;
    r->max_reply = o->max_reply ? o->max_reply : ((size_t)256 << 20);
    r->retries_left = o->retries < 0 ? 5 : o->retries;
    r->retry_wait_ms = o->retry_wait_ms == 0 ? 1000 : (o->retry_wait_ms < 0 ? 0 : o->retry_wait_ms);
    r->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 2000;
    r->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 30000;
    r->start_us = ev_now_us();
    r->p = peer_get(c, key, keylen, host, hostlen, port);
    r->p->refs++;
    size_t mlen = strlen(method), ulen = strlen(url);
    r->what = xmalloc(mlen + ulen + 2); /* "METHOD url", for messages */
    memcpy(r->what, method, mlen);
    r->what[mlen] = ' ';
    memcpy(r->what + mlen + 1, url, ulen + 1);

    /* The head, as the reference sends it: no Content-Type, no Expect; built
     * in one allocation of its exact size. */
    static const char ua[] = " HTTP/1.1\r\nHost: ";
    static const char ua2[] = "\r\nUser-Agent: dilearn/" DILEARN_VERSION "\r\nAccept: */*\r\n";
    size_t plen = strcspn(path, "#");
    int slash = plen == 0 || path[0] != '/';
    size_t tlen = o->token ? strlen(o->token) : 0, xlen = o->extra_header ? strlen(o->extra_header) : 0;
    char chan[32] = "", clen[48];
    int chl = o->channel >= 0 ? snprintf(chan, sizeof chan, "Channel: %d\r\n", o->channel) : 0;
    size_t pre = o->body_prefix ? o->body_prefix_len : 0, post = o->body_suffix ? o->body_suffix_len : 0;
    size_t length = pre + r->body_len + post;
    if (o->declared_length > length)
        length = o->declared_length;
    int cll = snprintf(clen, sizeof clen, "Content-Length: %zu\r\n\r\n", length);
    size_t hl = mlen + 1 + (size_t)slash + plen + sizeof ua - 1 + keylen + sizeof ua2 - 1 + (o->token ? 9 + tlen : 0) +
                (size_t)chl + (o->extra_header ? xlen + 2 : 0) + (size_t)cll + pre;
    char *h = xmalloc(hl + 1), *w = h;
#define PUT(p, n) (memcpy(w, (p), (n)), w += (n))
    PUT(method, mlen);
    *w++ = ' ';
    if (slash)
        *w++ = '/';
    PUT(path, plen);
    PUT(ua, sizeof ua - 1);
    PUT(key, keylen);
    PUT(ua2, sizeof ua2 - 1);
    if (o->token) {
        PUT("Token: ", 7);
        PUT(o->token, tlen);
        PUT("\r\n", 2);
    }
    PUT(chan, (size_t)chl);
    if (o->extra_header) {
        PUT(o->extra_header, xlen);
        PUT("\r\n", 2);
    }
    PUT(clen, (size_t)cll);
    r->head_body = (size_t)(w - h);
    if (pre)
        PUT(o->body_prefix, pre);
#undef PUT
    *w = '\0';
    r->head = h;
    r->head_len = hl;
    if (post) {
        r->tail = xmalloc(post);
        memcpy(r->tail, o->body_suffix, post);
        r->tail_len = post;
    }

    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    c->pending++;
    c->in_send++;
    start_attempt(r);
    c->in_send--;
    return r;
}

void hc_cancel(hc_client *c, hc_req *r)
{
    (void)c;
    if (r)
        req_drop(r);
}

void hc_forget(hc_client *c, hc_req *r)
{
    (void)c;
    if (!r)
        return;
    if (r->state == RS_WAITING || r->state == RS_RESOLVING || r->state == RS_CONNECTING) {
        req_drop(r); /* nothing sent on a connection worth keeping */
        return;
    }
    void (*fd)(void *) = r->free_data;
    void *data = r->data;
    r->forgotten = 1;
    r->data = NULL;
    r->free_data = NULL;
    r->retries_left = 0;
    if (fd)
        fd(data);
}

unsigned long long hc_bytes_out(const hc_client *c)
{
    return c->bytes_out;
}

unsigned long long hc_bytes_in(const hc_client *c)
{
    return c->bytes_in;
}

unsigned hc_pending(const hc_client *c)
{
    return c->pending;
}
