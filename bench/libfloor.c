/* libfloor: the loopback floor on the libraries the project stands on: a
 * minimal libmicrohttpd server (the settings of interaction/hs.c) and a
 * libcurl multi client (curl_multi_socket_action), both in this process on
 * one ev loop, doing the exchanges of bench/floor.c (fixed requests and
 * replies of the protocol's sizes, keep-alive). No JSON, none of our HTTP
 * code: what an exchange costs in the libraries and the kernel.
 *
 * The client is libcurl used at its best (see the transport measurements
 * the project keeps): easy handles made once and reused without reset, a
 * pre-parsed CURLU, no headers beyond the protocol's, HTTP/1.1, no signals,
 * sockets kept registered on the loop across CURL_POLL_REMOVE (closes seen
 * through CURLOPT_CLOSESOCKETFUNCTION), reuse checked with
 * CURLINFO_NUM_CONNECTS. */
#include <curl/curl.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "ev.h"
#include "xalloc.h"

/* As in bench/floor.c: a get-data /task/new and the slave's reply. */
static const char REQ_BODY[] =
    "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"data\": {\"name\": \"learner_get_data_task\"}}";
static const char REPLY_BODY[] = "{\"code\":0,\"data\":null,\"message\":\"Task received!\",\"success\":true}\n";

/* hs.c's settings (flags and options of its MHD_start_daemon). */
#define LF_MHD_FLAGS (MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO)
#define LF_CONN_MEMORY ((size_t)32 << 10)

typedef struct lf lf;

typedef struct {
    lf *f;
    CURL *easy;
    char *url;
} lf_peer;

typedef struct {
    unsigned want; /* curl's interest (EV_*), 0: none */
    unsigned reg;  /* registered on the loop */
} lf_sock;

struct lf {
    ev_loop *loop;
    struct MHD_Daemon *d;
    struct MHD_Response *reply;
    ev_timer *mhd_timer, *curl_timer;
    CURLM *multi;
    lf_sock *socks;
    size_t nsocks;
    int pending; /* transfers not done yet */
    int failed;
    char err[256];
};

/* ---- server ---- */

typedef struct {
    char *body;
    size_t len, cap;
} lf_req;

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_size, void **con_cls)
{
    lf *f = cls;
    (void)url;
    (void)method;
    (void)version;
    lf_req *r = *con_cls;
    if (!r) { /* the head: one allocation for the body, like hs */
        r = xcalloc(1, sizeof *r);
        const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        r->cap = (cl ? strtoul(cl, NULL, 10) : 0) + 1;
        r->body = xmalloc(r->cap);
        *con_cls = r;
        return MHD_YES;
    }
    if (*upload_size) {
        if (r->len + *upload_size + 1 > r->cap)
            r->body = xrealloc(r->body, r->cap = r->len + *upload_size + 1);
        memcpy(r->body + r->len, upload_data, *upload_size);
        r->len += *upload_size;
        *upload_size = 0;
        return MHD_YES;
    }
    return MHD_queue_response(conn, 200, f->reply);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls, enum MHD_RequestTerminationCode tc)
{
    (void)cls;
    (void)conn;
    (void)tc;
    lf_req *r = *con_cls;
    if (r) {
        free(r->body);
        free(r);
        *con_cls = NULL;
    }
}

static void mhd_kick(lf *f);

static void on_mhd_timer(ev_loop *loop, void *data)
{
    (void)loop;
    lf *f = data;
    f->mhd_timer = NULL;
    mhd_kick(f);
}

static void mhd_kick(lf *f)
{
    MHD_run(f->d);
    MHD_UNSIGNED_LONG_LONG to;
    if (f->mhd_timer) {
        ev_timer_stop(f->loop, f->mhd_timer);
        f->mhd_timer = NULL;
    }
    if (MHD_get_timeout(f->d, &to) == MHD_YES)
        f->mhd_timer = ev_timer_start(f->loop, to, on_mhd_timer, f);
}

static void on_mhd_epoll(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    (void)fd;
    (void)events;
    mhd_kick(data);
}

/* ---- client ---- */

static void check_done(lf *f)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(f->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        long status = 0;
        curl_easy_getinfo(m->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        if (m->data.result != CURLE_OK || status != 200) {
            f->failed = 1;
            snprintf(f->err, sizeof f->err, "libfloor: an exchange failed: %s, HTTP %ld",
                     curl_easy_strerror(m->data.result), status);
        }
        curl_multi_remove_handle(f->multi, m->easy_handle);
        f->pending--;
    }
}

static lf_sock *sock_of(lf *f, curl_socket_t s)
{
    if ((size_t)s >= f->nsocks) {
        size_t n = f->nsocks ? f->nsocks : 64;
        while (n <= (size_t)s)
            n *= 2;
        f->socks = xrealloc(f->socks, n * sizeof *f->socks);
        memset(f->socks + f->nsocks, 0, (n - f->nsocks) * sizeof *f->socks);
        f->nsocks = n;
    }
    return &f->socks[s];
}

static void on_curl_fd(ev_loop *loop, int fd, unsigned events, void *data)
{
    lf *f = data;
    lf_sock *k = sock_of(f, fd);
    if (!k->want) { /* idle connection kept registered: the server closed it */
        ev_fd_del(loop, fd);
        k->reg = 0;
        return;
    }
    int flags = ((events & EV_READ) ? CURL_CSELECT_IN : 0) | ((events & EV_WRITE) ? CURL_CSELECT_OUT : 0) |
                ((events & EV_ERROR) ? CURL_CSELECT_ERR : 0);
    int running;
    curl_multi_socket_action(f->multi, fd, flags, &running);
    check_done(f);
}

static int on_curl_socket(CURL *e, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)e;
    (void)socketp;
    lf *f = userp;
    lf_sock *k = sock_of(f, s);
    unsigned want = what == CURL_POLL_IN ? EV_READ : what == CURL_POLL_OUT ? EV_WRITE
                  : what == CURL_POLL_INOUT ? EV_READ | EV_WRITE : 0;
    k->want = want;
    /* CURL_POLL_REMOVE: stay registered for reading (no epoll_ctl per
     * exchange); a wake-up while curl wants nothing removes it. */
    unsigned reg = want ? want : EV_READ;
    if (reg != k->reg && ev_fd_set(f->loop, s, reg, on_curl_fd, f) == 0)
        k->reg = reg;
    return 0;
}

static int on_close_socket(void *clientp, curl_socket_t s)
{
    lf *f = clientp;
    lf_sock *k = sock_of(f, s);
    if (k->reg)
        ev_fd_del(f->loop, s);
    k->reg = k->want = 0;
    return close(s);
}

static void on_curl_timer_fire(ev_loop *loop, void *data)
{
    (void)loop;
    lf *f = data;
    f->curl_timer = NULL;
    int running;
    curl_multi_socket_action(f->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(f);
}

static int on_curl_timer(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    lf *f = userp;
    if (f->curl_timer) {
        ev_timer_stop(f->loop, f->curl_timer);
        f->curl_timer = NULL;
    }
    if (timeout_ms >= 0)
        f->curl_timer = ev_timer_start(f->loop, (uint64_t)timeout_ms, on_curl_timer_fire, f);
    return 0;
}

static size_t on_write(char *p, size_t size, size_t n, void *ud)
{
    (void)p;
    (void)ud;
    return size * n;
}

/* Starts the transfers of peers[0..n) at once and runs the loop until every
 * one is done. */
static int exchange(lf *f, lf_peer *peers, size_t n)
{
    for (size_t i = 0; i < n; i++)
        curl_multi_add_handle(f->multi, peers[i].easy);
    f->pending += (int)n;
    uint64_t t0 = ev_now_ms();
    while (f->pending > 0 && !f->failed) {
        if (ev_run_once(f->loop, 100) < 0 || ev_now_ms() - t0 > 5000) {
            snprintf(f->err, sizeof f->err, "libfloor: exchanges did not complete within 5 s");
            return -1;
        }
    }
    return f->failed ? -1 : 0;
}

int bench_lib_floor(int learners, double seconds, long min_rounds, bench_row *row, char *err, size_t errlen)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
    lf f = {0};
    f.loop = ev_loop_new();
    f.reply = MHD_create_response_from_buffer(strlen(REPLY_BODY), (void *)REPLY_BODY, MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(f.reply, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    size_t n = (size_t)learners + 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    f.d = MHD_start_daemon(LF_MHD_FLAGS, 0, NULL, NULL, on_request, &f, MHD_OPTION_SOCK_ADDR, &sa,
                           MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                           &f, MHD_OPTION_CONNECTION_MEMORY_LIMIT, LF_CONN_MEMORY, MHD_OPTION_CONNECTION_LIMIT,
                           (unsigned)(n + 16), MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_STRICT_FOR_CLIENT, 1,
                           MHD_OPTION_END);
    const union MHD_DaemonInfo *di = f.d ? MHD_get_daemon_info(f.d, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    const union MHD_DaemonInfo *dp = f.d ? MHD_get_daemon_info(f.d, MHD_DAEMON_INFO_BIND_PORT) : NULL;
    if (!di || !dp || ev_fd_set(f.loop, di->epoll_fd, EV_READ, on_mhd_epoll, &f) < 0) {
        snprintf(err, errlen, "libfloor: cannot start libmicrohttpd");
        if (f.d)
            MHD_stop_daemon(f.d);
        MHD_destroy_response(f.reply);
        ev_loop_free(f.loop);
        return -1;
    }
    int port = dp->port;
    mhd_kick(&f);

    f.multi = curl_multi_init();
    curl_multi_setopt(f.multi, CURLMOPT_SOCKETFUNCTION, on_curl_socket);
    curl_multi_setopt(f.multi, CURLMOPT_SOCKETDATA, &f);
    curl_multi_setopt(f.multi, CURLMOPT_TIMERFUNCTION, on_curl_timer);
    curl_multi_setopt(f.multi, CURLMOPT_TIMERDATA, &f);
    curl_multi_setopt(f.multi, CURLMOPT_MAXCONNECTS, (long)n);
    char url[80];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/task/new", port);
    CURLU *u = curl_url();
    curl_url_set(u, CURLUPART_URL, url, 0);
    struct curl_slist *hdrs = NULL;
    hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
    hdrs = curl_slist_append(hdrs, "Channel: 0");
    hdrs = curl_slist_append(hdrs, "Token: 0123456789abcdefABCDEF0123456789abcdefABCDEF0123456789abcdef0123");
    lf_peer *peers = xcalloc(n, sizeof *peers);
    for (size_t i = 0; i < n; i++) {
        CURL *e = curl_easy_init();
        peers[i].f = &f;
        peers[i].easy = e;
        curl_easy_setopt(e, CURLOPT_CURLU, u);
        curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, REQ_BODY);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE, (long)strlen(REQ_BODY));
        curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(e, CURLOPT_PROXY, "");
        curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
        curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, &f);
    }

    size_t cap = 1024, nt = 0;
    double *times = xmalloc(cap * sizeof *times);
    uint64_t s0 = 0, t_start = 0;
    long new_conns = 0;
    int rc = 0;
    for (long round = -3; rc == 0; round++) { /* 3 warm-up rounds: connections open */
        if (round == 0) {
            s0 = bench_self_cpu_ns();
            t_start = bench_now_ns();
        }
        uint64_t t0 = bench_now_ns();
        for (int task = 0; task < 2 && rc == 0; task++)
            rc = exchange(&f, peers, 1) || exchange(&f, peers + 1, n - 1) || exchange(&f, peers + 1, n - 1) ||
                 exchange(&f, peers, 1);
        if (rc) {
            snprintf(err, errlen, "%s", f.err[0] ? f.err : "libfloor: an exchange failed");
            rc = -1;
            break;
        }
        if (round < 0)
            continue;
        for (size_t i = 0; i < n; i++) {
            long c = 0;
            curl_easy_getinfo(peers[i].easy, CURLINFO_NUM_CONNECTS, &c);
            new_conns += c;
        }
        if (nt == cap)
            times = xrealloc(times, (cap *= 2) * sizeof *times);
        times[nt++] = (double)(bench_now_ns() - t0) / 1e6;
        if ((long)nt >= min_rounds && (double)(bench_now_ns() - t_start) / 1e9 >= seconds)
            break;
    }
    if (rc == 0 && new_conns > 0) {
        snprintf(err, errlen, "libfloor: %ld connections opened after the warm-up (keep-alive not kept)", new_conns);
        rc = -1;
    }
    if (rc == 0) {
        double elapsed = (double)(bench_now_ns() - t_start) / 1e9;
        uint64_t cpu = bench_self_cpu_ns() - s0;
        bench_floor_row(row, "libfloor", learners, times, nt, elapsed, cpu);
    }
    for (size_t i = 0; i < n; i++)
        curl_easy_cleanup(peers[i].easy);
    curl_multi_cleanup(f.multi);
    curl_slist_free_all(hdrs);
    curl_url_cleanup(u);
    free(peers);
    free(times);
    if (f.curl_timer)
        ev_timer_stop(f.loop, f.curl_timer);
    if (f.mhd_timer)
        ev_timer_stop(f.loop, f.mhd_timer);
    ev_fd_del(f.loop, di->epoll_fd);
    MHD_stop_daemon(f.d);
    MHD_destroy_response(f.reply);
    for (size_t i = 0; i < f.nsocks; i++)
        if (f.socks[i].reg)
            ev_fd_del(f.loop, (int)i);
    free(f.socks);
    ev_loop_free(f.loop);
    return rc;
}
