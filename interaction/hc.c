/* hc: libcurl multi (socket interface) on an ev loop, with retries. */
#include "hc.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

struct hc_req {
    hc_client *c;
    CURL *easy;
    struct curl_slist *headers;
    char *method, *url;
    char *body;
    size_t body_len;
    xbuf reply;
    size_t max_reply;
    int over_limit;
    int retries_left;
    long retry_wait_ms;
    int attempts;
    uint64_t start_us;
    ev_timer *retry_timer;
    hc_cb cb;
    void *data;
    void (*free_data)(void *);
    hc_req *prev, *next;
};

struct hc_client {
    ev_loop *loop;
    CURLM *multi;
    ev_timer *timer;
    hc_req *reqs;
    unsigned pending;
    unsigned long long bytes_in, bytes_out;
    int in_check; /* check_done is running */
    CURL **idle;  /* easy handles kept for reuse (curl_easy_reset) */
    size_t nidle;
};

/* Easy handles kept for reuse: creating one per request (and freeing its
 * buffers) costs more than the request itself on loopback. */
#define HC_IDLE_MAX 256
/* Bodies larger than this are sent from a larger upload buffer: fewer,
 * larger writes (a 128 MiB learn batch in 2 MiB rather than 64 KiB steps). */
#define HC_BIG_BODY ((size_t)1 << 20)
#define HC_BIG_UPLOAD_BUFFER (2L << 20)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void hc_opts_init(hc_opts *o)
{
    memset(o, 0, sizeof *o);
    o->method = "GET";
    o->channel = -1;
    o->retries = -1;
}

static void check_done(hc_client *c);

static void on_fd(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    hc_client *c = data;
    int mask = 0, running = 0;
    if (events & EV_READ)
        mask |= CURL_CSELECT_IN;
    if (events & EV_WRITE)
        mask |= CURL_CSELECT_OUT;
    if (events & EV_ERROR)
        mask |= CURL_CSELECT_ERR;
    curl_multi_socket_action(c->multi, fd, mask, &running);
    check_done(c);
}

static int socket_cb(CURL *easy, curl_socket_t s, int what, void *userp, void *socketp)
{
    (void)easy;
    (void)socketp;
    hc_client *c = userp;
    if (what == CURL_POLL_REMOVE) {
        ev_fd_del(c->loop, s);
        return 0;
    }
    unsigned ev = 0;
    if (what == CURL_POLL_IN || what == CURL_POLL_INOUT)
        ev |= EV_READ;
    if (what == CURL_POLL_OUT || what == CURL_POLL_INOUT)
        ev |= EV_WRITE;
    ev_fd_set(c->loop, s, ev, on_fd, c);
    return 0;
}

static void on_timer(ev_loop *loop, void *data)
{
    (void)loop;
    hc_client *c = data;
    int running = 0;
    c->timer = NULL;
    curl_multi_socket_action(c->multi, CURL_SOCKET_TIMEOUT, 0, &running);
    check_done(c);
}

static int timer_cb(CURLM *multi, long timeout_ms, void *userp)
{
    (void)multi;
    hc_client *c = userp;
    if (c->timer) {
        ev_timer_stop(c->loop, c->timer);
        c->timer = NULL;
    }
    if (timeout_ms >= 0)
        c->timer = ev_timer_start(c->loop, (uint64_t)timeout_ms, on_timer, c);
    return 0;
}

hc_client *hc_new(ev_loop *loop)
{
    pthread_once(&curl_once, curl_init_once);
    hc_client *c = xcalloc(1, sizeof *c);
    c->loop = loop;
    c->multi = curl_multi_init();
    if (!c->multi) {
        free(c);
        return NULL;
    }
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETFUNCTION, socket_cb);
    curl_multi_setopt(c->multi, CURLMOPT_SOCKETDATA, c);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERFUNCTION, timer_cb);
    curl_multi_setopt(c->multi, CURLMOPT_TIMERDATA, c);
    /* Keep a connection per peer alive even with thousands of peers. */
    curl_multi_setopt(c->multi, CURLMOPT_MAXCONNECTS, 4096L);
    c->idle = xcalloc(HC_IDLE_MAX, sizeof *c->idle);
    return c;
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
    if (r->retry_timer)
        ev_timer_stop(c->loop, r->retry_timer);
    if (r->easy) {
        curl_multi_remove_handle(c->multi, r->easy);
        /* A handle that sent a large body keeps a large upload buffer:
         * not worth keeping. */
        if (c->nidle < HC_IDLE_MAX && c->idle && r->body_len <= HC_BIG_BODY) {
            curl_easy_reset(r->easy);
            c->idle[c->nidle++] = r->easy;
        } else {
            curl_easy_cleanup(r->easy);
        }
    }
    curl_slist_free_all(r->headers);
    free(r->method);
    free(r->url);
    free(r->body);
    xbuf_free(&r->reply);
    free(r);
    c->pending--;
}

/* Ends a request without its callback. */
static void req_drop(hc_req *r)
{
    void (*fd)(void *) = r->free_data;
    void *data = r->data;
    req_free(r);
    if (fd)
        fd(data);
}

void hc_free(hc_client *c)
{
    if (!c)
        return;
    while (c->reqs)
        req_drop(c->reqs);
    if (c->timer)
        ev_timer_stop(c->loop, c->timer);
    for (size_t i = 0; i < c->nidle; i++)
        curl_easy_cleanup(c->idle[i]);
    free(c->idle);
    curl_multi_cleanup(c->multi);
    free(c);
}

static size_t on_write(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    hc_req *r = userdata;
    size_t n = size * nmemb;
    if (r->reply.len + n > r->max_reply) {
        r->over_limit = 1;
        return 0; /* aborts the transfer with CURLE_WRITE_ERROR */
    }
    xbuf_append(&r->reply, ptr, n);
    r->c->bytes_in += n;
    return n;
}

static int start_attempt(hc_req *r)
{
    r->attempts++;
    xbuf_free(&r->reply);
    r->over_limit = 0;
    r->c->bytes_out += r->body_len;
    return curl_multi_add_handle(r->c->multi, r->easy) == CURLM_OK ? 0 : -1;
}

hc_req *hc_send(hc_client *c, hc_opts *o, hc_cb cb, void *data)
{
    hc_req *r = xcalloc(1, sizeof *r);
    r->c = c;
    r->cb = cb;
    r->data = data;
    r->free_data = o->free_data;
    r->method = xstrdup(o->method ? o->method : "GET");
    r->url = xstrdup(o->url ? o->url : "");
    if (o->body) {
        r->body = o->body;
        r->body_len = o->body_len;
    } else {
        r->body = xstrdup("{}");
        r->body_len = 2;
    }
    o->body = NULL;
    r->max_reply = o->max_reply ? o->max_reply : ((size_t)256 << 20);
    r->retries_left = o->retries < 0 ? 5 : o->retries;
    r->retry_wait_ms = o->retry_wait_ms == 0 ? 1000 : (o->retry_wait_ms < 0 ? 0 : o->retry_wait_ms);
    r->start_us = ev_now_us();
    r->next = c->reqs;
    if (c->reqs)
        c->reqs->prev = r;
    c->reqs = r;
    c->pending++;

    r->easy = c->nidle ? c->idle[--c->nidle] : curl_easy_init();
    if (!r->easy) {
        req_free(r);
        return NULL;
    }
    /* The reference sends no Content-Type and no Expect: 100-continue. */
    r->headers = curl_slist_append(r->headers, "Content-Type:");
    r->headers = curl_slist_append(r->headers, "Expect:");
    if (o->channel >= 0) {
        char h[48];
        snprintf(h, sizeof h, "Channel: %d", o->channel);
        r->headers = curl_slist_append(r->headers, h);
    }
    if (o->token) {
        char *h = xasprintf("Token: %s", o->token);
        r->headers = curl_slist_append(r->headers, h);
        free(h);
    }
    if (o->extra_header)
        r->headers = curl_slist_append(r->headers, o->extra_header);
    CURL *e = r->easy;
    curl_easy_setopt(e, CURLOPT_URL, r->url);
    curl_easy_setopt(e, CURLOPT_PRIVATE, r);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, r->headers);
    curl_easy_setopt(e, CURLOPT_POSTFIELDS, r->body);
    curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
    if (r->body_len > HC_BIG_BODY)
        curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, HC_BIG_UPLOAD_BUFFER);
    if (strcmp(r->method, "POST") != 0)
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, r->method);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 2000L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, o->timeout_ms > 0 ? o->timeout_ms : 30000L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_USERAGENT, "dilearn/" DILEARN_VERSION);
    if (start_attempt(r) < 0) {
        req_free(r);
        return NULL;
    }
    return r;
}

void hc_cancel(hc_client *c, hc_req *r)
{
    (void)c;
    if (r)
        req_drop(r);
}

static void forgotten_cb(void *data, const hc_result *res)
{
    (void)data;
    (void)res;
}

void hc_forget(hc_client *c, hc_req *r)
{
    (void)c;
    if (!r)
        return;
    if (r->retry_timer) { /* between attempts: nothing in flight */
        req_drop(r);
        return;
    }
    void (*fd)(void *) = r->free_data;
    void *data = r->data;
    r->cb = forgotten_cb;
    r->data = NULL;
    r->free_data = NULL;
    r->retries_left = 0;
    if (fd)
        fd(data);
}

static int retryable(CURLcode rc)
{
    switch (rc) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_PARTIAL_FILE:
        return 1;
    default:
        return 0;
    }
}

static void on_retry(ev_loop *loop, void *data)
{
    (void)loop;
    hc_req *r = data;
    r->retry_timer = NULL;
    if (start_attempt(r) < 0) {
        hc_result res = {0};
        res.body = "";
        res.error = "cannot restart the request";
        res.attempts = r->attempts;
        hc_cb cb = r->cb;
        void *ud = r->data;
        req_free(r);
        cb(ud, &res);
    }
}

static void finish(hc_req *r, CURLcode rc)
{
    hc_result res = {0};
    char errbuf[256];
    long status = 0;
    if (rc == CURLE_OK) {
        curl_easy_getinfo(r->easy, CURLINFO_RESPONSE_CODE, &status);
        res.status = status;
        res.body = r->reply.data ? r->reply.data : "";
        res.body_len = r->reply.len;
    } else {
        if (r->over_limit)
            snprintf(errbuf, sizeof errbuf, "reply over the limit of %zu bytes", r->max_reply);
        else
            snprintf(errbuf, sizeof errbuf, "%s %s: %s (after %d attempt%s)", r->method, r->url,
                     curl_easy_strerror(rc), r->attempts, r->attempts == 1 ? "" : "s");
        res.error = errbuf;
        res.body = "";
    }
    res.attempts = r->attempts;
    res.seconds = (double)(ev_now_us() - r->start_us) / 1e6;
    hc_cb cb = r->cb;
    void *ud = r->data;
    /* The reply buffer must outlive the callback: free after it. Unlink the
     * request first so that the callback may cancel others freely. */
    curl_multi_remove_handle(r->c->multi, r->easy);
    cb(ud, &res);
    req_free(r);
}

static void check_done(hc_client *c)
{
    CURLMsg *m;
    int left;
    while ((m = curl_multi_info_read(c->multi, &left))) {
        if (m->msg != CURLMSG_DONE)
            continue;
        hc_req *r = NULL;
        CURLcode rc = m->data.result;
        curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&r);
        if (!r)
            continue;
        if (rc != CURLE_OK && !r->over_limit && retryable(rc) && r->retries_left > 0) {
            r->retries_left--;
            curl_multi_remove_handle(c->multi, r->easy);
            r->retry_timer = ev_timer_start(c->loop, (uint64_t)r->retry_wait_ms, on_retry, r);
            continue;
        }
        finish(r, rc);
    }
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
