/* test_bad_input: hostile input against every endpoint of the real
 * processes: the aggregator (slave port, master port with /metrics),
 * mock_learner (learner ports, control port), mock_coordinator (its master
 * port) and mock_operator (API port, control port).
 *
 * Requests are written byte for byte on raw TCP sockets (so that bodies can
 * be truncated, headers dribbled, Content-Length bogus or absent), from
 * tables of cases and from generators (every field of a body with a wrong
 * type and missing, every header check). Every case expects a 4xx answer with
 * the JSON envelope of protocol.md and its code, or what the contract says
 * instead (a 200 with success false and code 601 for a result the master
 * does not know; the control APIs' own JSON shapes), and then checks that
 * the process still answers: the processes do not print their self tokens,
 * so liveness is "GET /ping without a Token answers 400 with the envelope of
 * code 401" on protocol ports, and a GET of the state on control ports.
 *
 * Errors found by libmicrohttpd itself before our code runs (a malformed
 * request line or header, a bad Content-Length, HTTP/1.1 without Host, a
 * head over its connection memory, bad chunked encoding, an HTTP version
 * other than 1.0/1.1) are answered by the library with its own short HTML
 * page, which our code cannot reach: for those (kind K_MHD) the test checks
 * the status (4xx, or exact) and that the process lives on. Everything our
 * code answers (413 before the body included) is checked for the envelope.
 * See docs/security.md.
 *
 * Peers that the processes call (the coordinator's master address, learners
 * of the aggregator, the slave of mock_coordinator) are fake servers in a
 * thread of this test; they record what they receive, so that tokens and
 * task ids chosen by the processes can be used in the cases. Everything is on
 * 127.0.0.1, every socket operation has a timeout. The number of cases is
 * counted and printed at the end ("bad-input cases: N"). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "hs.h"
#include "jsonx.h"
#include "proc.h"
#include "proto.h"
#include "testutil.h"
#include "xalloc.h"

#define IO_CAP_MS 3000   /* any one socket operation */
#define BODY_LIMIT 65536 /* --body-limit given to the aggregator */

/* ------------------------------------------------------------------ */
/* time                                                                */

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* ------------------------------------------------------------------ */
/* raw sockets with timeouts                                           */

static int tcp_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct pollfd p = {fd, POLLOUT, 0};
    int err = 0;
    socklen_t el = sizeof err;
    if (poll(&p, 1, IO_CAP_MS) != 1 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0 || err) {
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static bool send_all(int fd, const char *b, size_t n)
{
    long end = now_ms() + IO_CAP_MS;
    while (n) {
        ssize_t w = send(fd, b, n, MSG_NOSIGNAL);
        if (w > 0) {
            b += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        struct pollfd p = {fd, POLLOUT, 0};
        long left = end - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            return false;
    }
    return true;
}

typedef struct {
    int status; /* 0: no reply */
    char *head;
    char *body;
    size_t body_len;
    bool eof; /* the server closed the connection */
} reply;

static void reply_free(reply *r)
{
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* Reads one reply (skipping 1xx) until its Content-Length is in, the peer
 * closes, or cap_ms passes. */
static void read_reply(int fd, long cap_ms, reply *r)
{
    memset(r, 0, sizeof *r);
    xbuf b = {0};
    long end = now_ms() + cap_ms;
    for (;;) {
        char *hend = b.data ? memmem(b.data, b.len, "\r\n\r\n", 4) : NULL;
        if (hend && b.len > 12 && strncmp(b.data + 9, "1", 1) == 0) { /* 100 Continue */
            size_t skip = (size_t)(hend + 4 - b.data);
            memmove(b.data, b.data + skip, b.len - skip);
            b.len -= skip;
            continue;
        }
        if (hend) {
            size_t hl = (size_t)(hend - b.data);
            char *head = xstrndup(b.data, hl);
            const char *cl = strcasestr(head, "\r\nContent-Length:");
            size_t want = cl ? strtoul(cl + 17, NULL, 10) : 0;
            if (b.len - hl - 4 >= want || (!cl && r->eof)) {
                r->head = head;
                r->status = atoi(b.data + 9);
                r->body_len = cl ? want : b.len - hl - 4;
                r->body = xstrndup(hend + 4, r->body_len);
                break;
            }
            free(head);
        }
        if (r->eof)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        long left = end - now_ms();
        if (left <= 0 || poll(&p, 1, (int)left) != 1)
            break;
        char buf[16384];
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n > 0)
            xbuf_append(&b, buf, (size_t)n);
        else if (n == 0 || (errno != EAGAIN && errno != EINTR))
            r->eof = true;
    }
    if (r->status && !r->eof) {
        /* Did the server close after its reply? (a short look) */
        struct pollfd p = {fd, POLLIN, 0};
        char c;
        if (poll(&p, 1, 0) == 1 && recv(fd, &c, 1, MSG_PEEK) == 0)
            r->eof = true;
    }
    xbuf_free(&b);
}

/* flags of a case */
#define F_HALFCLOSE 1u /* shut the write side down after sending */
#define F_DRIBBLE 2u   /* the head one byte at a time, 2 ms apart */
#define F_SPLIT 4u     /* head first, body 50 ms later */

static void exchange(int port, const char *req, size_t len, unsigned flags, long cap_ms, reply *r)
{
    memset(r, 0, sizeof *r);
    int fd = tcp_connect(port);
    if (fd < 0)
        return;
    bool ok = true;
    if (flags & (F_DRIBBLE | F_SPLIT)) {
        const char *he = memmem(req, len, "\r\n\r\n", 4);
        size_t hl = he ? (size_t)(he - req) + 4 : len;
        if (flags & F_DRIBBLE)
            for (size_t i = 0; ok && i < hl; i++) {
                ok = send_all(fd, req + i, 1);
                nap_ms(2);
            }
        else
            ok = send_all(fd, req, hl);
        if (flags & F_SPLIT)
            nap_ms(50);
        ok = ok && send_all(fd, req + hl, len - hl);
    } else {
        ok = send_all(fd, req, len);
    }
    if (flags & F_HALFCLOSE)
        shutdown(fd, SHUT_WR);
    read_reply(fd, cap_ms, r);
    close(fd);
}

/* ------------------------------------------------------------------ */
/* templates: {NAME} is replaced by a variable                         */

#define NVARS 16
static char *g_var_name[NVARS], *g_var_value[NVARS];

static void set_var(const char *name, const char *value)
{
    for (int i = 0; i < NVARS; i++)
        if (g_var_name[i] && strcmp(g_var_name[i], name) == 0) {
            free(g_var_value[i]);
            g_var_value[i] = xstrdup(value);
            return;
        }
    for (int i = 0; i < NVARS; i++)
        if (!g_var_name[i]) {
            g_var_name[i] = xstrdup(name);
            g_var_value[i] = xstrdup(value);
            return;
        }
    fail_msg("too many variables");
}

static const char *get_var(const char *name)
{
    for (int i = 0; i < NVARS; i++)
        if (g_var_name[i] && strcmp(g_var_name[i], name) == 0)
            return g_var_value[i];
    fail_msg("no variable %s", name);
    return "";
}

static void free_vars(void)
{
    for (int i = 0; i < NVARS; i++) {
        free(g_var_name[i]);
        free(g_var_value[i]);
        g_var_name[i] = g_var_value[i] = NULL;
    }
}

static void expand_into(xbuf *b, const char *t)
{
    while (t && *t) {
        const char *o = strchr(t, '{');
        const char *c = o ? strchr(o, '}') : NULL;
        bool found = false;
        if (o && c && c - o < 12 && c > o + 1) {
            for (int i = 0; i < NVARS && !found; i++)
                if (g_var_name[i] && strlen(g_var_name[i]) == (size_t)(c - o - 1) &&
                    strncmp(g_var_name[i], o + 1, (size_t)(c - o - 1)) == 0) {
                    xbuf_append(b, t, (size_t)(o - t));
                    xbuf_puts(b, g_var_value[i]);
                    t = c + 1;
                    found = true;
                }
        }
        if (!found) {
            size_t n = o ? (size_t)(o - t) + 1 : strlen(t);
            xbuf_append(b, t, n);
            t += n;
        }
    }
}

/* A request: method, path, header lines (template, each ending in \r\n),
 * body (template; NULL: no body and no Content-Length). */
static char *mk(const char *method, const char *path, const char *hdrs, const char *body, size_t *len)
{
    xbuf b = {0}, bb = {0};
    expand_into(&b, method);
    xbuf_puts(&b, " ");
    expand_into(&b, path);
    xbuf_puts(&b, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    expand_into(&b, hdrs);
    if (body) {
        expand_into(&bb, body);
        xbuf_printf(&b, "Content-Length: %zu\r\n", bb.len);
    }
    xbuf_puts(&b, "\r\n");
    if (bb.len)
        xbuf_append(&b, bb.data, bb.len);
    xbuf_free(&bb);
    *len = b.len;
    return xbuf_take(&b);
}

/* ------------------------------------------------------------------ */
/* servers, cases, liveness                                            */

typedef enum { PR_PING, PR_LCTL, PR_OPAPI, PR_OPCTL, PR_METRICS } probe_kind;
typedef struct {
    const char *name;
    int port;
    probe_kind probe;
} server;

typedef enum {
    K_ENV,     /* the protocol's JSON envelope: status and code exact */
    K_CTL,     /* mock_learner control: {"ok": false, "error": ...} */
    K_MHD,     /* libmicrohttpd's own answer: status only (4xx, or exact) */
    K_NOREPLY, /* no reply; the server closes the connection */
    K_TEXT,    /* status exact, any body */
    K_ENVANY,  /* an envelope with any status below 500 (mock_operator's API
                  decodes like Go: absent and null fields are zero values) */
} kind;

static int g_cases, g_failed;
static long g_t0;
static const char *g_category = "";

static const char *cat_names[32];
static int cat_counts[32], ncats;

static void count_category(void)
{
    for (int i = 0; i < ncats; i++)
        if (strcmp(cat_names[i], g_category) == 0) {
            cat_counts[i]++;
            return;
        }
    if (ncats < 32) {
        cat_names[ncats] = g_category;
        cat_counts[ncats++] = 1;
    }
}

static bool alive(const server *s, char *why, size_t whylen)
{
    size_t len;
    char *req;
    switch (s->probe) {
    case PR_PING:
        req = mk("GET", "/ping", "", "{}", &len);
        break;
    case PR_LCTL:
        req = mk("GET", "/state", "", NULL, &len);
        break;
    case PR_OPAPI:
        req = mk("GET", "/healthz", "", NULL, &len);
        break;
    case PR_METRICS:
        req = mk("GET", "/metrics", "", NULL, &len);
        break;
    default:
        req = mk("GET", "/control/state", "", NULL, &len);
        break;
    }
    reply r;
    exchange(s->port, req, len, 0, IO_CAP_MS, &r);
    free(req);
    bool ok;
    if (s->probe == PR_PING) {
        proto_reply e;
        char perr[200];
        ok = r.status == 400 && proto_parse_envelope(r.body, r.body_len, &e, perr, sizeof perr);
        if (ok) {
            ok = !e.success && e.code == 401;
            cJSON_Delete(e.tree);
        }
    } else {
        ok = r.status == 200;
    }
    if (!ok)
        snprintf(why, whylen, "liveness probe of %s got %d %.200s", s->name, r.status, r.body ? r.body : "");
    reply_free(&r);
    return ok;
}

/* Checks a reply against the expectation; on a mismatch, why says so. */
static bool check(const reply *r, int want, int code, kind k, char *why, size_t wl)
{
    switch (k) {
    case K_NOREPLY:
        if (r->status != 0) {
            snprintf(why, wl, "expected no reply, got %d", r->status);
            return false;
        }
        if (!r->eof) {
            snprintf(why, wl, "expected the connection to be closed");
            return false;
        }
        return true;
    case K_MHD:
        if (want ? r->status != want : (r->status < 400 || r->status > 499)) {
            snprintf(why, wl, "expected %d, got %d", want ? want : 400, r->status);
            return false;
        }
        return true;
    case K_TEXT:
        if (r->status != want) {
            snprintf(why, wl, "expected %d, got %d: %.200s", want, r->status, r->body ? r->body : "");
            return false;
        }
        return true;
    case K_ENVANY: {
        proto_reply e;
        char perr[200];
        if (r->status < 200 || r->status > 499 || !r->body ||
            !proto_parse_envelope(r->body, r->body_len, &e, perr, sizeof perr)) {
            snprintf(why, wl, "expected an envelope below 500, got %d: %.200s", r->status, r->body ? r->body : "");
            return false;
        }
        bool good = e.success == (r->status == 200);
        cJSON_Delete(e.tree);
        if (!good)
            snprintf(why, wl, "success does not match status %d: %.200s", r->status, r->body);
        return good;
    }
    case K_CTL: {
        if (r->status != want) {
            snprintf(why, wl, "expected %d, got %d: %.200s", want, r->status, r->body ? r->body : "");
            return false;
        }
        char perr[200];
        cJSON *j = r->body ? jsonx_parse(r->body, r->body_len, perr, sizeof perr) : NULL;
        const cJSON *okv = j ? jsonx_get(j, "ok") : NULL;
        bool good = want == 200 ? cJSON_IsObject(j) && (!okv || cJSON_IsTrue(okv))
                                : cJSON_IsFalse(okv) && jsonx_get_str(j, "error");
        cJSON_Delete(j);
        if (!good)
            snprintf(why, wl, "not a control reply {\"ok\", \"error\"}: %.200s", r->body ? r->body : "");
        return good;
    }
    case K_ENV: {
        if (r->status != want) {
            snprintf(why, wl, "expected %d, got %d: %.200s", want, r->status, r->body ? r->body : "");
            return false;
        }
        proto_reply e;
        char perr[200];
        if (!r->body || !proto_parse_envelope(r->body, r->body_len, &e, perr, sizeof perr)) {
            snprintf(why, wl, "not an envelope (%s): %.200s", r->body ? perr : "no body", r->body ? r->body : "");
            return false;
        }
        bool good = e.success == (code == 0) && (code < 0 || e.code == code) && e.message && jsonx_get(e.tree, "data");
        if (!good)
            snprintf(why, wl, "expected success %s code %d, got %.200s", code == 0 ? "true" : "false", code, r->body);
        cJSON_Delete(e.tree);
        return good;
    }
    }
    return false;
}

/* Runs one case: sends, checks the reply, checks that the server lives. */
static void run(const server *s, const char *name, const char *req, size_t len, unsigned flags, int want, int code,
                kind k)
{
    reply r;
    exchange(s->port, req, len, flags, IO_CAP_MS, &r);
    char why[600] = "";
    bool ok = check(&r, want, code, k, why, sizeof why) && alive(s, why, sizeof why);
    g_cases++;
    count_category();
    if (!ok) {
        g_failed++;
        fprintf(stderr, "FAIL [%s] %s: %s\n", s->name, name, why);
    }
    reply_free(&r);
}

/* run() on mk(). */
static void C(const server *s, const char *name, const char *method, const char *path, const char *hdrs,
              const char *body, int want, int code, kind k)
{
    size_t len;
    char *req = mk(method, path, hdrs, body, &len);
    run(s, name, req, len, 0, want, code, k);
    free(req);
}

static void CF(const server *s, const char *name, unsigned flags, const char *method, const char *path,
               const char *hdrs, const char *body, int want, int code, kind k)
{
    size_t len;
    char *req = mk(method, path, hdrs, body, &len);
    run(s, name, req, len, flags, want, code, k);
    free(req);
}

/* A raw request (template expanded; no Host or Content-Length added). */
static void R(const server *s, const char *name, unsigned flags, const char *raw, int want, int code, kind k)
{
    xbuf b = {0};
    expand_into(&b, raw);
    run(s, name, b.data, b.len, flags, want, code, k);
    xbuf_free(&b);
}

/* A request whose answer the caller looks at (not counted). */
static void ask(int port, const char *method, const char *path, const char *hdrs, const char *body, reply *r)
{
    size_t len;
    char *req = mk(method, path, hdrs, body, &len);
    exchange(port, req, len, 0, IO_CAP_MS, r);
    free(req);
}

static void ask_ok(int port, const char *method, const char *path, const char *hdrs, const char *body)
{
    reply r;
    ask(port, method, path, hdrs, body, &r);
    if (r.status != 200)
        fprintf(stderr, "setup request %s %s got %d: %s\n", method, path, r.status, r.body ? r.body : "");
    assert_int_equal(r.status, 200);
    reply_free(&r);
}

/* ------------------------------------------------------------------ */
/* generators                                                          */

/* Every field path of a valid body, missing and with each wrong type.
 * want/code: the expected answer for a field of that list; "fields" is a
 * NULL-terminated list of dotted paths ("?path": optional, so only its wrong
 * types are cases). */
static void gen_fields(const server *s, const char *method, const char *path, const char *hdrs, const char *valid,
                       const char *const *fields, int want, int code, kind k)
{
    static const char *const wrong[] = {"1", "-2.5e3", "\"text\"", "true", "null", "[]", "[1, {}]", "{}"};
    for (int f = 0; fields[f]; f++) {
        bool optional = fields[f][0] == '?';
        const char *field = fields[f] + optional;
        for (int w = optional ? 0 : -1; w < (int)(sizeof wrong / sizeof wrong[0]); w++) {
            cJSON *j = jsonx_parse(valid, strlen(valid), NULL, 0);
            assert_non_null(j);
            char *dotted = xstrdup(field);
            cJSON *parent = j;
            char *key = dotted, *dot;
            while ((dot = strchr(key, '.'))) {
                *dot = '\0';
                parent = jsonx_get(parent, key);
                assert_non_null(parent);
                key = dot + 1;
            }
            cJSON *cur = jsonx_get(parent, key);
            assert_non_null(cur);
            char name[200];
            if (w < 0) {
                cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
                snprintf(name, sizeof name, "%s %s: field %s missing", method, path, field);
            } else {
                cJSON *v = jsonx_parse(wrong[w], strlen(wrong[w]), NULL, 0);
                /* the same JSON type is not a wrong type */
                if ((cur->type & 0xff) == (v->type & 0xff) || (cJSON_IsBool(cur) && cJSON_IsBool(v))) {
                    cJSON_Delete(v);
                    cJSON_Delete(j);
                    free(dotted);
                    continue;
                }
                cJSON_ReplaceItemInObjectCaseSensitive(parent, key, v);
                snprintf(name, sizeof name, "%s %s: field %s = %s", method, path, field, wrong[w]);
            }
            char *body = jsonx_print(j);
            cJSON_Delete(j);
            free(dotted);
            C(s, name, method, path, hdrs, body, want, code, k);
            free(body);
        }
    }
}

/* Bodies that are not JSON, or not a JSON object. */
static void gen_malformed(const server *s, const char *method, const char *path, const char *hdrs, int want, int code,
                          kind k)
{
    static const char *const bad[] = {
        "{",
        "{\"master\": ",
        "}",
        "nul",
        "{\"a\": 1}}",
        "{\"a\": 1,}",
        "{'a': 1}",
        "{\"a\": 1e}",
        "{\"a\": 01}",
        "{\"a\": .5}",
        "{\"a\": \"\x01\"}",
        "{\"a\": \"\\u12\"}",
        "{\"a\": \"\\q\"}",
        "{\"a\" 1}",
        "[]",
        "1",
        "\"text\"",
        "null",
        "true",
        "",
        "   ",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char name[160];
        snprintf(name, sizeof name, "%s %s: malformed body %zu '%.20s'", method, path, i, bad[i]);
        C(s, name, method, path, hdrs, bad[i], want, code, k);
    }
    /* a NUL byte inside, and nesting far deeper than the parser allows */
    size_t len;
    char *req = mk(method, path, hdrs, "{\"a\": \"x_y\"}", &len);
    strstr(req, "x_y")[1] = '\0';
    char name[160];
    snprintf(name, sizeof name, "%s %s: NUL byte in the body", method, path);
    run(s, name, req, len, 0, want, code, k);
    free(req);
    xbuf deep = {0};
    for (int i = 0; i < 20000; i++)
        xbuf_puts(&deep, "[");
    for (int i = 0; i < 20000; i++)
        xbuf_puts(&deep, "]");
    snprintf(name, sizeof name, "%s %s: 20000 nested arrays", method, path);
    C(s, name, method, path, hdrs, deep.data, want, code, k);
    xbuf_free(&deep);
}

/* Channel header checks of a request that a peer sends (slave's master
 * requests, master's slave requests): other headers in tok. */
static void gen_channel(const server *s, const char *method, const char *path, const char *tok, const char *body)
{
    static const struct {
        const char *hdr, *what;
        int want;
    } ch[] = {
        {"", "missing", 400},
        {"Channel: abc\r\n", "not a number", 400},
        {"Channel: \r\n", "empty", 400},
        {"Channel: 0x0\r\n", "hex", 400},
        {"Channel: 1.0\r\n", "a float", 400},
        {"Channel: 99999999999999999999\r\n", "out of range", 400},
        {"Channel: 0 0\r\n", "two numbers", 400},
        {"Channel: 1\r\n", "another channel", 403},
        {"Channel: -1\r\n", "negative", 403},
    };
    for (size_t i = 0; i < sizeof ch / sizeof ch[0]; i++) {
        char name[160], hdrs[300];
        snprintf(name, sizeof name, "%s %s: Channel %s", method, path, ch[i].what);
        snprintf(hdrs, sizeof hdrs, "%s%s", ch[i].hdr, tok);
        C(s, name, method, path, hdrs, body, ch[i].want, ch[i].want == 400 ? 201 : 202, K_ENV);
    }
}

/* Token checks: missing, and wrong ones (want_wrong 0: skip those). */
static void gen_token(const server *s, const char *method, const char *path, const char *chan, const char *body,
                      int code_missing, int code_wrong)
{
    char name[160], hdrs[9000];
    snprintf(name, sizeof name, "%s %s: Token missing", method, path);
    C(s, name, method, path, chan, body, 400, code_missing, K_ENV);
    if (!code_wrong)
        return;
    xbuf huge = {0};
    for (int i = 0; i < 8000; i++)
        xbuf_puts(&huge, "a");
    const char *const wrong[] = {"0000000000000000000000000000000000000000000000000000000000000000",
                                 "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz",
                                 "",
                                 "abc",
                                 "{TOKEN}x",
                                 huge.data};
    for (size_t i = 0; i < sizeof wrong / sizeof wrong[0]; i++) {
        snprintf(name, sizeof name, "%s %s: Token wrong %zu '%.12s'", method, path, i, wrong[i]);
        snprintf(hdrs, sizeof hdrs, "%sToken: %s\r\n", chan, wrong[i]);
        C(s, name, method, path, hdrs, body, 403, code_wrong, K_ENV);
    }
    xbuf_free(&huge);
}

/* HTTP-level garbage, answered by libmicrohttpd before any handler. The
 * same for every server (they all run on hs). */
static void gen_http(const server *s, const char *path)
{
    g_category = "http framing (libmicrohttpd)";
    R(s, "request line garbage", F_HALFCLOSE, "GARBAGE\r\n\r\n", 0, -1, K_NOREPLY);
    R(s, "binary junk", F_HALFCLOSE, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", 0, -1, K_NOREPLY);
    R(s, "HTTP/2.0 version", 0, "GET /ping HTTP/2.0\r\nHost: x\r\n\r\n", 505, -1, K_MHD);
    R(s, "HTTP/1.1 without Host", 0, "GET /nope HTTP/1.1\r\n\r\n", 400, -1, K_MHD);
    R(s, "Content-Length not a number", 0, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 0, -1, K_MHD);
    R(s, "Content-Length negative", 0, "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 0, -1, K_MHD);
    R(s, "Content-Length over 2^64", 0,
      "POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n", 0, -1, K_MHD);
    R(s, "header without a colon", 0, "GET /ping HTTP/1.1\r\nHost: x\r\nBadheader\r\n\r\n", 0, -1, K_MHD);
    R(s, "bad chunked encoding", 0,
      "POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 0, -1, K_MHD);
    xbuf big = {0};
    xbuf_puts(&big, "GET /ping HTTP/1.1\r\nHost: x\r\nX-Big: ");
    for (int i = 0; i < 300000; i++)
        xbuf_puts(&big, "a");
    xbuf_puts(&big, "\r\n\r\n");
    R(s, "a 300 KB header line", 0, big.data, 431, -1, K_MHD);
    big.len = 0;
    xbuf_puts(&big, "GET /ping HTTP/1.1\r\nHost: x\r\n");
    for (int i = 0; i < 30000; i++)
        xbuf_printf(&big, "X-H%d: v\r\n", i);
    xbuf_puts(&big, "\r\n");
    R(s, "30000 header lines", 0, big.data, 431, -1, K_MHD);
    xbuf_free(&big);

    g_category = "body over the limit";
    char raw[300];
    snprintf(raw, sizeof raw, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n{", path);
    R(s, "Content-Length far over the limit", 0, raw, 413, 413, K_ENV);

    g_category = "truncated body";
    snprintf(raw, sizeof raw, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"a\": 1", path);
    R(s, "body shorter than Content-Length, then EOF", F_HALFCLOSE, raw, 0, -1, K_NOREPLY);
    snprintf(raw, sizeof raw, "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{\"a\": 1", path);
    R(s, "chunked body cut off, then EOF", F_HALFCLOSE, raw, 0, -1, K_NOREPLY);
    snprintf(raw, sizeof raw, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Le", path);
    R(s, "head cut off, then EOF", F_HALFCLOSE, raw, 0, -1, K_NOREPLY);
}

/* The body limit with the body really sent (no Content-Length: chunked). */
static void gen_chunked_over(const server *s, const char *path, size_t limit)
{
    g_category = "body over the limit";
    xbuf b = {0};
    xbuf_printf(&b, "POST %s HTTP/1.1\r\nHost: x\r\nChannel: 0\r\nTransfer-Encoding: chunked\r\n\r\n", path);
    size_t sent = 0;
    while (sent <= limit) {
        xbuf_puts(&b, "1000\r\n");
        for (int i = 0; i < 4096; i++)
            xbuf_puts(&b, " ");
        xbuf_puts(&b, "\r\n");
        sent += 4096;
    }
    xbuf_puts(&b, "0\r\n\r\n");
    run(s, "chunked body over the limit", b.data, b.len, 0, 413, 413, K_ENV);
    xbuf_free(&b);
}

static void gen_paths(const server *s, const char *known_path, const char *wrong_method, kind k, int code_404,
                      int code_405)
{
    g_category = "unknown paths and methods";
    xbuf longp = {0};
    xbuf_puts(&longp, "/");
    for (int i = 0; i < 6000; i++)
        xbuf_puts(&longp, "x");
    const char *const paths[] = {
        "/nope", "/", "/ping/", "/PING", "//ping", "/ping/../connect", "/%00", "/slave/../ping%2f", longp.data};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++) {
        char name[120];
        snprintf(name, sizeof name, "unknown path %zu '%.20s'", i, paths[i]);
        if (strcmp(paths[i], known_path) == 0)
            continue;
        C(s, name, "GET", paths[i], "", "{}", 404, code_404, k);
    }
    xbuf_free(&longp);
    const char *const methods[] = {wrong_method, "PATCH", "OPTIONS", "BREW", "get"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        char name[120];
        snprintf(name, sizeof name, "method %s on %s", methods[i], known_path);
        C(s, name, methods[i], known_path, "", "{}", code_405 == 501 ? 501 : 405, code_405, k);
    }
}

/* A valid request with its head dribbled one byte at a time. */
static void gen_dribble(const server *s, const char *method, const char *path, const char *hdrs, const char *body,
                        int want, int code, kind k)
{
    g_category = "slowloris (dribbled head)";
    char name[160];
    snprintf(name, sizeof name, "%s %s with the head dribbled byte by byte", method, path);
    CF(s, name, F_DRIBBLE, method, path, hdrs, body, want, code, k);
    snprintf(name, sizeof name, "%s %s with the body 50 ms after the head", method, path);
    CF(s, name, F_SPLIT, method, path, hdrs, body, want, code, k);
}

/* Many connections dribbling their heads while a normal client must be
 * answered promptly; then the dribblers go away. Counted as one case. */
static void slowloris_crowd(const server *s, int n)
{
    g_category = "slowloris (crowd)";
    static const char head[] = "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    int *fds = xcalloc((size_t)n, sizeof *fds);
    int open_n = 0;
    for (int i = 0; i < n; i++) {
        fds[i] = tcp_connect(s->port);
        if (fds[i] >= 0) {
            open_n++;
            send_all(fds[i], head, 5);
        }
    }
    char why[600] = "";
    bool ok = open_n == n;
    if (!ok)
        snprintf(why, sizeof why, "only %d of %d connections opened", open_n, n);
    long worst = 0;
    for (int round = 0; ok && round < 10; round++) {
        for (int i = 0; i < n; i++)
            if (fds[i] >= 0 && !send_all(fds[i], "a", 1)) {
                close(fds[i]);
                fds[i] = -1;
            }
        long t0 = now_ms();
        ok = alive(s, why, sizeof why);
        long dt = now_ms() - t0;
        worst = dt > worst ? dt : worst;
        if (ok && dt > 1000) {
            snprintf(why, sizeof why, "a normal request took %ld ms among %d dribbling connections", dt, n);
            ok = false;
        }
        nap_ms(20);
    }
    for (int i = 0; i < n; i++)
        if (fds[i] >= 0)
            close(fds[i]);
    free(fds);
    ok = ok && alive(s, why, sizeof why);
    g_cases++;
    count_category();
    if (!ok) {
        g_failed++;
        fprintf(stderr, "FAIL [%s] slowloris crowd of %d: %s\n", s->name, n, why);
    } else {
        fprintf(stderr, "[%s] %d dribbling connections: normal requests answered in <= %ld ms\n", s->name, n, worst);
    }
}

/* ------------------------------------------------------------------ */
/* fake peers: tiny HTTP servers in a thread that answer every request   */
/* with a success envelope and record what they got                     */

#define FAKE_MAX 256
typedef struct {
    int lfd, port;
    int stop[2];
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char connect_token[128];  /* Token of the last /connect */
    char connect_master[300]; /* its master.address */
    char tasks[FAKE_MAX][40]; /* ids of /task/new */
    int ntasks;
    char reports[FAKE_MAX][80]; /* "complete <id>" / "fail <id>" */
    int nreports;
    int nconnects, nrequests;
} fake;

static void fake_handle(fake *f, int fd)
{
    struct timeval tv = {2, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    xbuf b = {0};
    char buf[65536];
    const char *he = NULL;
    size_t want = 0;
    for (;;) {
        he = b.data ? memmem(b.data, b.len, "\r\n\r\n", 4) : NULL;
        if (he) {
            char *h = xstrndup(b.data, (size_t)(he - b.data));
            const char *cl = strcasestr(h, "\r\nContent-Length:");
            want = cl ? strtoul(cl + 17, NULL, 10) : 0;
            free(h);
            if (b.len - (size_t)(he - b.data) - 4 >= want)
                break;
        }
        ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n <= 0) {
            xbuf_free(&b);
            return;
        }
        xbuf_append(&b, buf, (size_t)n);
    }
    char *head = xstrndup(b.data, (size_t)(he - b.data));
    const char *body = he + 4;
    char method[16] = "", path[200] = "";
    sscanf(head, "%15s %199s", method, path);
    const char *tok = strcasestr(head, "\r\nToken: ");
    char token[128] = "";
    if (tok)
        sscanf(tok + 9, "%127[^\r\n]", token);
    cJSON *j = jsonx_parse(body, want, NULL, 0);
    pthread_mutex_lock(&f->mu);
    f->nrequests++;
    if (strcmp(path, "/connect") == 0) {
        snprintf(f->connect_token, sizeof f->connect_token, "%s", token);
        const char *a = jsonx_get_str(jsonx_get(j, "master"), "address");
        snprintf(f->connect_master, sizeof f->connect_master, "%s", a ? a : "");
        f->nconnects++;
    } else if (strcmp(path, "/task/new") == 0 && f->ntasks < FAKE_MAX) {
        const char *id = jsonx_get_str(jsonx_get(j, "task"), "id");
        snprintf(f->tasks[f->ntasks++], sizeof f->tasks[0], "%s", id ? id : "");
    } else if (strncmp(path, "/slave/task/", 12) == 0 && f->nreports < FAKE_MAX) {
        const char *id = jsonx_get_str(jsonx_get(j, "task"), "id");
        snprintf(f->reports[f->nreports++], sizeof f->reports[0], "%.20s %.50s", path + 12, id ? id : "");
    }
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    cJSON_Delete(j);
    static const char ok[] = "{\"code\":0,\"data\":null,\"message\":\"Success.\",\"success\":true}\n";
    char out[300];
    int n = snprintf(out, sizeof out,
                     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
                     "Connection: close\r\n\r\n%s",
                     strlen(ok), ok);
    send_all(fd, out, (size_t)n);
    free(head);
    xbuf_free(&b);
}

static void *fake_main(void *arg)
{
    fake *f = arg;
    for (;;) {
        struct pollfd p[2] = {{f->lfd, POLLIN, 0}, {f->stop[0], POLLIN, 0}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (p[0].revents) {
            int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0) {
                int fl = fcntl(fd, F_GETFL);
                fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
                fake_handle(f, fd);
                close(fd);
            }
        }
    }
    return NULL;
}

static int listen_loopback(int *port, int backlog)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(fd, backlog), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    *port = ntohs(a.sin_port);
    return fd;
}

static fake *fake_start(void)
{
    fake *f = xcalloc(1, sizeof *f);
    f->lfd = listen_loopback(&f->port, 64);
    assert_int_equal(pipe2(f->stop, O_CLOEXEC), 0);
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    assert_int_equal(pthread_create(&f->th, NULL, fake_main, f), 0);
    return f;
}

static void fake_stop(fake *f)
{
    if (!f)
        return;
    assert_int_equal(write(f->stop[1], "x", 1), 1);
    pthread_join(f->th, NULL);
    close(f->lfd);
    close(f->stop[0]);
    close(f->stop[1]);
    pthread_mutex_destroy(&f->mu);
    pthread_cond_destroy(&f->cv);
    free(f);
}

/* Waits (capped) until *counter > than; returns whether it happened. */
static bool fake_wait(fake *f, const int *counter, int than, long cap_ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += cap_ms / 1000;
    dl.tv_nsec += (cap_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&f->mu);
    while (*counter <= than)
        if (pthread_cond_timedwait(&f->cv, &f->mu, &dl) != 0)
            break;
    bool ok = *counter > than;
    pthread_mutex_unlock(&f->mu);
    return ok;
}

static int fake_count(fake *f, const int *counter)
{
    pthread_mutex_lock(&f->mu);
    int v = *counter;
    pthread_mutex_unlock(&f->mu);
    return v;
}

/* ------------------------------------------------------------------ */
/* processes                                                           */

typedef struct {
    char *dir;
    proc p[4];
    int np;
    fake *fk[2];
    int hole_fd; /* a listening socket nobody accepts on */
    int hole_port;
} fx;

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    g_t0 = now_ms();
    f->dir = proc_tmpdir("bad-input");
    assert_non_null(f->dir);
    f->hole_fd = listen_loopback(&f->hole_port, 1);
    char v[300];
    snprintf(v, sizeof v, "http://127.0.0.1:%d", f->hole_port);
    set_var("HOLE", v);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    for (int i = 0; i < f->np; i++) {
        proc_stop(&f->p[i], 5000);
        proc_free(&f->p[i]);
    }
    fake_stop(f->fk[0]);
    fake_stop(f->fk[1]);
    close(f->hole_fd);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", f->dir);
    free(f->dir);
    free(f);
    free_vars();
    return 0;
}

static cJSON *start(fx *f, char *const argv[], const char *tag, long cap_ms, bool ready)
{
    char log[400];
    snprintf(log, sizeof log, "%s/%s.log", f->dir, tag);
    proc *p = &f->p[f->np++];
    assert_true(proc_start(p, argv, NULL, log));
    if (!ready)
        return NULL;
    cJSON *r = proc_ready(p, cap_ms);
    if (!r)
        proc_show_log(p, 30);
    assert_non_null(r);
    return r;
}

static int port_of(const cJSON *r, const char *key)
{
    int64_t v = -1;
    assert_true(jsonx_get_i64(jsonx_get(r, key), &v));
    return (int)v;
}

/* Every process must have lived through it all. */
static void expect_all_alive(fx *f)
{
    for (int i = 0; i < f->np; i++) {
        int rc = proc_wait(&f->p[i], 0);
        if (rc != -1)
            proc_show_log(&f->p[i], 40);
        assert_int_equal(rc, -1);
    }
}

/* Stops every process with SIGTERM: each must exit with its clean code
 * (mock_coordinator: 1, its run was interrupted), not a crash or a
 * sanitizer's report. */
static void stop_all(fx *f, const int *want)
{
    for (int i = 0; i < f->np; i++) {
        int rc = proc_stop(&f->p[i], 10000);
        if (rc != want[i])
            proc_show_log(&f->p[i], 40);
        assert_int_equal(rc, want[i]);
    }
}

/* No process wrote a whole token to its log (debug level): the tokens the
 * test used as a master, and those the processes chose for their peers. */
static void expect_no_token_in_logs(fx *f)
{
    const char *names[] = {"MTOK", "LTOK"};
    for (int i = 0; i < f->np; i++) {
        FILE *fp = fopen(f->p[i].log, "r");
        assert_non_null(fp);
        xbuf b = {0};
        char buf[65536];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, fp)) > 0)
            xbuf_append(&b, buf, n);
        fclose(fp);
        xbuf_append(&b, "", 0);
        for (int k = 0; k < 2; k++) {
            const char *t = NULL;
            for (int v = 0; v < NVARS; v++)
                if (g_var_name[v] && strcmp(g_var_name[v], names[k]) == 0)
                    t = g_var_value[v];
            if (t && strlen(t) == PROTO_TOKEN_LEN && b.data && strstr(b.data, t)) {
                fprintf(stderr, "FAIL %s: token %s written whole in %s\n", names[k], t, f->p[i].log);
                g_failed++;
            }
        }
        xbuf_free(&b);
    }
}

static void finish(const char *what)
{
    fprintf(stderr, "%s: %d cases so far, %d failed, %ld ms\n", what, g_cases, g_failed, now_ms() - g_t0);
    assert_int_equal(g_failed, 0);
}

/* ------------------------------------------------------------------ */
/* a slave's endpoints (the aggregator's slave port, a mock learner)    */

#define CH "Channel: 0\r\n"
#define MT "Token: {MTOK}\r\n"
#define CONNECT_BODY "{\"master\": {\"address\": \"{FAKE}\"}, \"data\": {}}"

/* s_free: a slave not connected; s_conn: one that the test connects to.
 * held_task: data of a task that the slave accepts and keeps running. */
static void slave_cases(const server *sf, const server *sc, fake *fm, const char *held_task, size_t body_limit)
{
    char v[300];
    snprintf(v, sizeof v, "http://127.0.0.1:%d", fm->port);
    set_var("FAKE", v);
    set_var("MTOK", "5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A");
    set_var("TOKEN", "5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A5a5A");

    /* Not connected. */
    g_category = "unknown paths and methods";
    gen_paths(sf, "/connect", "GET", K_ENV, 404, 405);
    C(sf, "DELETE /connect", "DELETE", "/connect", CH MT, CONNECT_BODY, 405, 405, K_ENV);
    C(sf, "POST /ping", "POST", "/ping", "", "{}", 405, 405, K_ENV);
    C(sf, "GET /task/new", "GET", "/task/new", CH MT, "{}", 405, 405, K_ENV);
    C(sf, "PUT /disconnect", "PUT", "/disconnect", CH MT, "{}", 405, 405, K_ENV);
    C(sf, "GET /shutdown", "GET", "/shutdown", "", "{}", 405, 405, K_ENV);
    C(sf, "query string on /nope", "GET", "/nope?a=1&b", "", "{}", 404, 404, K_ENV);

    g_category = "Channel header";
    gen_channel(sf, "POST", "/connect", MT, CONNECT_BODY);
    gen_channel(sf, "POST", "/task/new", MT, "{}");
    gen_channel(sf, "DELETE", "/disconnect", MT, "{}");
    g_category = "Token header";
    gen_token(sf, "POST", "/connect", CH, CONNECT_BODY, 301, 0);
    gen_token(sf, "POST", "/task/new", CH, "{}", 301, 302);
    gen_token(sf, "DELETE", "/disconnect", CH, "{}", 301, 302);
    gen_token(sf, "GET", "/ping", "", "{}", 401, 402);
    gen_token(sf, "DELETE", "/shutdown", "", "{}", 401, 402);
    C(sf, "GET /ping with no body at all", "GET", "/ping", "", NULL, 400, 401, K_ENV);
    g_category = "state";
    C(sf, "/disconnect while not connected", "DELETE", "/disconnect", CH MT, "{\"data\": {}}", 403, 302, K_ENV);
    C(sf, "/task/new while not connected", "POST", "/task/new", CH MT,
      "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"data\": {\"name\": \"resource\"}}", 403, 302,
      K_ENV);

    g_category = "malformed JSON";
    gen_malformed(sf, "POST", "/connect", CH MT, 400, 400, K_ENV);
    g_category = "wrong field types";
    static const char *const cfields[] = {"master", "master.address", NULL};
    gen_fields(sf, "POST", "/connect", CH MT, CONNECT_BODY, cfields, 400, 400, K_ENV);
    g_category = "/connect master address not a URL";
    static const char *const urls[] = {
        "",          "127.0.0.1:1",         "localhost", "ftp://127.0.0.1:1", "javascript:alert(1)",
        "/relative", " http://127.0.0.1:1", "HTTP:"};
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        char body[300], name[120];
        snprintf(body, sizeof body, "{\"master\": {\"address\": \"%s\"}, \"data\": {}}", urls[i]);
        snprintf(name, sizeof name, "/connect to '%s'", urls[i]);
        C(sf, name, "POST", "/connect", CH MT, body, 400, 400, K_ENV);
    }
    {
        xbuf b = {0};
        xbuf_puts(&b, "{\"master\": {\"address\": \"http://127.0.0.1:1/");
        for (int i = 0; i < 3000; i++)
            xbuf_puts(&b, "a");
        xbuf_puts(&b, "\"}, \"data\": {}}");
        C(sf, "/connect to a 3 KB URL", "POST", "/connect", CH MT, b.data, 400, 400, K_ENV);
        xbuf_free(&b);
    }
    gen_dribble(sf, "GET", "/ping", "", "{}", 400, 401, K_ENV);
    gen_http(sf, "/connect");

    /* Connected (the master address is the fake master). */
    ask_ok(sc->port, "POST", "/connect", CH MT, CONNECT_BODY);
    g_category = "state";
    C(sc, "a second /connect (same token)", "POST", "/connect", CH MT, CONNECT_BODY, 400, 501, K_ENV);
    C(sc, "a second /connect (another token)", "POST", "/connect", CH "Token: abc\r\n", CONNECT_BODY, 400, 501, K_ENV);
    C(sc, "a second /connect with a bad body", "POST", "/connect", CH MT, "{", 400, 501, K_ENV);
    g_category = "Token header";
    gen_token(sc, "POST", "/task/new", CH, "{}", 301, 302);
    gen_token(sc, "DELETE", "/disconnect", CH, "{}", 301, 302);
    g_category = "malformed JSON";
    gen_malformed(sc, "POST", "/task/new", CH MT, 400, 400, K_ENV);
    gen_malformed(sc, "DELETE", "/disconnect", CH MT, 400, 400, K_ENV);
    g_category = "wrong field types";
    static const char *const tfields[] = {"task", "task.id", "data", NULL};
    gen_fields(sc, "POST", "/task/new", CH MT,
               "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"data\": {\"name\": \"resource\"}}",
               tfields, 400, 400, K_ENV);
    static const char *const ids[] = {"",
                                      "not-a-uuid",
                                      "0f8fad5b-d9cb-469f-a165-70867728950",
                                      "0f8fad5b-d9cb-469f-a165-"
                                      "70867728950eff",
                                      "../../etc/passwd",
                                      "0f8fad5b-d9cb-469f-a165-7086772895zz"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++) {
        char body[300], name[120];
        snprintf(body, sizeof body, "{\"task\": {\"id\": \"%s\"}, \"data\": {\"name\": \"resource\"}}", ids[i]);
        snprintf(name, sizeof name, "/task/new with task id '%s'", ids[i]);
        C(sc, name, "POST", "/task/new", CH MT, body, 400, 400, K_ENV);
    }
    gen_dribble(sc, "DELETE", "/disconnect", CH MT, "{", 400, 400, K_ENV);

    /* Task data the slave accepts and fails at task level: 200, then a
     * /slave/task/fail to the master. */
    g_category = "task data wrong (fails the task)";
    static const char *const names[] = {"5", "null", "[\"resource\"]", "\"no_such_task\"", "\"\""};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char body[300], name[120], id[PROTO_UUID_LEN + 1];
        proto_uuid4(id);
        snprintf(body, sizeof body, "{\"task\": {\"id\": \"%s\"}, \"data\": {\"name\": %s}}", id, names[i]);
        snprintf(name, sizeof name, "/task/new with data.name %s", names[i]);
        int before = fake_count(fm, &fm->nreports);
        C(sc, name, "POST", "/task/new", CH MT, body, 200, 0, K_ENV);
        bool got = fake_wait(fm, &fm->nreports, before, 5000);
        pthread_mutex_lock(&fm->mu);
        char want[80];
        snprintf(want, sizeof want, "fail %s", id);
        bool match = got && strcmp(fm->reports[fm->nreports - 1], want) == 0;
        pthread_mutex_unlock(&fm->mu);
        if (!match) {
            g_failed++;
            fprintf(stderr, "FAIL [%s] %s: no /slave/task/fail for task %s reached the master\n", sc->name, name, id);
        }
    }

    /* Concurrent /task/new: both sent before either is answered; exactly
     * one is taken, the other gets 400 code 601. */
    g_category = "concurrent /task/new";
    for (int round = 0; round < 2; round++) {
        char id1[PROTO_UUID_LEN + 1], id2[PROTO_UUID_LEN + 1], b1[400], b2[400];
        proto_uuid4(id1);
        proto_uuid4(id2);
        snprintf(b1, sizeof b1, "{\"task\": {\"id\": \"%s\"}, \"data\": %s}", id1, held_task);
        snprintf(b2, sizeof b2, "{\"task\": {\"id\": \"%s\"}, \"data\": %s}", id2, held_task);
        size_t l1, l2;
        char *r1 = mk("POST", "/task/new", CH MT, b1, &l1), *r2 = mk("POST", "/task/new", CH MT, b2, &l2);
        int fd1 = tcp_connect(sc->port), fd2 = tcp_connect(sc->port);
        assert_true(fd1 >= 0 && fd2 >= 0);
        assert_true(send_all(fd1, r1, l1 - 2) && send_all(fd2, r2, l2 - 2));
        nap_ms(20);
        assert_true(send_all(fd1, r1 + l1 - 2, 2) && send_all(fd2, r2 + l2 - 2, 2));
        reply a, b;
        read_reply(fd1, IO_CAP_MS, &a);
        read_reply(fd2, IO_CAP_MS, &b);
        close(fd1);
        close(fd2);
        char why[600] = "";
        bool ok = (a.status == 200) != (b.status == 200);
        const reply *other = a.status == 200 ? &b : &a;
        ok = ok && (round == 0 ? check(other, 400, 601, K_ENV, why, sizeof why) : true);
        if (round == 1) /* the slot is still taken: both refused */
            ok = check(&a, 400, 601, K_ENV, why, sizeof why) && check(&b, 400, 601, K_ENV, why, sizeof why);
        ok = ok && alive(sc, why, sizeof why);
        g_cases++;
        count_category();
        if (!ok) {
            g_failed++;
            fprintf(stderr, "FAIL [%s] concurrent /task/new round %d: %d / %d %s\n", sc->name, round, a.status,
                    b.status, why);
        }
        reply_free(&a);
        reply_free(&b);
        free(r1);
        free(r2);
    }
    g_category = "state";
    C(sc, "/task/new while a task runs", "POST", "/task/new", CH MT,
      "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"data\": {\"name\": \"resource\"}}", 400, 601,
      K_ENV);
    if (body_limit)
        gen_chunked_over(sc, "/task/new", body_limit);
}

/* The end of a slave's cases: disconnect, then a /connect to a master that
 * never answers (the connect itself is valid: 200; the slave must then
 * lose that master without hanging). */
static void slave_black_hole(const server *sc)
{
    ask_ok(sc->port, "DELETE", "/disconnect", CH MT, "{\"data\": {}}");
    g_category = "state";
    C(sc, "/disconnect twice", "DELETE", "/disconnect", CH MT, "{\"data\": {}}", 403, 302, K_ENV);
    g_category = "/connect to a master that never answers";
    C(sc, "/connect to a master that never answers", "POST", "/connect", CH MT,
      "{\"master\": {\"address\": \"{HOLE}\"}, \"data\": {}}", 200, 0, K_ENV);
    C(sc, "then a second /connect", "POST", "/connect", CH MT, CONNECT_BODY, 400, 501, K_ENV);
    C(sc, "/connect to a closed port while connected", "POST", "/connect", CH MT,
      "{\"master\": {\"address\": \"http://127.0.0.1:1\"}, \"data\": {}}", 400, 501, K_ENV);
}

/* ------------------------------------------------------------------ */
/* a master's endpoints (the aggregator's master port, mock_coordinator) */

#define LT "Token: {LTOK}\r\n"

static void master_cases(const server *m, bool metrics)
{
    g_category = "unknown paths and methods";
    gen_paths(m, "/slave/heartbeat", "POST", K_ENV, 404, 405);
    C(m, "GET /slave/task/complete", "GET", "/slave/task/complete", CH LT, "{}", 405, 405, K_ENV);
    C(m, "POST /slave/task/fail", "POST", "/slave/task/fail", CH LT, "{}", 405, 405, K_ENV);
    C(m, "POST /ping", "POST", "/ping", "", "{}", 405, 405, K_ENV);
    C(m, "PUT /shutdown", "PUT", "/shutdown", "", "{}", 405, 405, K_ENV);
    C(m, "/connect on a master", "POST", "/connect", CH LT, "{}", 404, 404, K_ENV);
    if (metrics) {
        C(m, "POST /metrics", "POST", "/metrics", "", "{}", 404, 404, K_ENV);
        C(m, "GET /metrics/x", "GET", "/metrics/x", "", NULL, 404, 404, K_ENV);
        C(m, "GET /metrics with a bogus body", "GET", "/metrics", "", "{", 200, -1, K_TEXT);
    }

    g_category = "Channel header";
    const char *const eps[][2] = {
        {"GET", "/slave/heartbeat"}, {"PUT", "/slave/task/complete"}, {"PUT", "/slave/task/fail"}};
    for (int i = 0; i < 3; i++)
        gen_channel(m, eps[i][0], eps[i][1], LT, "{}");
    g_category = "Token header";
    set_var("TOKEN", get_var("LTOK"));
    for (int i = 0; i < 3; i++)
        gen_token(m, eps[i][0], eps[i][1], CH, "{}", 501, 502);
    gen_token(m, "GET", "/ping", "", "{}", 401, 402);
    gen_token(m, "DELETE", "/shutdown", "", "{}", 401, 402);

    g_category = "malformed JSON";
    C(m, "heartbeat with a malformed body (body not used)", "GET", "/slave/heartbeat", CH LT, "{", 200, 0, K_ENV);
    gen_malformed(m, "PUT", "/slave/task/complete", CH LT, 400, 400, K_ENV);
    gen_malformed(m, "PUT", "/slave/task/fail", CH LT, 400, 400, K_ENV);
    g_category = "wrong field types";
    static const char *const rf[] = {"task", NULL};
    gen_fields(m, "PUT", "/slave/task/complete", CH LT,
               "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"result\": {}}", rf, 200, 601, K_ENV);
    static const char *const rf2[] = {"task.id", "result", NULL};
    gen_fields(m, "PUT", "/slave/task/fail", CH LT,
               "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"result\": {}}", rf2, 200, 601, K_ENV);
    g_category = "result for an unknown task";
    C(m, "complete for an unknown task id", "PUT", "/slave/task/complete", CH LT,
      "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"result\": {}}", 200, 601, K_ENV);
    C(m, "fail for a made-up id", "PUT", "/slave/task/fail", CH LT, "{\"task\": {\"id\": \"x%s%n%s\"}, \"result\": {}}",
      200, 601, K_ENV);
    gen_dribble(m, "GET", "/slave/heartbeat", CH LT, "{}", 200, 0, K_ENV);
    gen_http(m, "/slave/task/complete");
}

/* A task that the master holds (id in {TASK}): completing it twice, a
 * truncated report for it. The second report must not crash or hang the
 * master, and it must answer "Task not found." */
static void master_task_cases(const server *m, const char *result)
{
    char body[600];
    snprintf(body, sizeof body, "{\"task\": {\"id\": \"{TASK}\"}, \"result\": %s}", result);
    g_category = "result for a task that already ended";
    C(m, "complete for a task the master holds", "PUT", "/slave/task/complete", CH LT, body, 200, 0, K_ENV);
    C(m, "complete again for the same task", "PUT", "/slave/task/complete", CH LT, body, 200, 601, K_ENV);
    C(m, "fail for the task that completed", "PUT", "/slave/task/fail", CH LT, body, 200, 601, K_ENV);
}

/* ------------------------------------------------------------------ */
/* tests                                                               */

static void aggregator_endpoints(void **state)
{
    fx *f = *state;
    f->fk[0] = fake_start(); /* the learner */
    f->fk[1] = fake_start(); /* the coordinator's master */
    fake *fl = f->fk[0], *fm = f->fk[1];
    char learner[64], limit[64];
    snprintf(learner, sizeof learner, "--learner=l0=127.0.0.1:%d", fl->port);
    snprintf(limit, sizeof limit, "--body-limit=%d", BODY_LIMIT);
    char *const argv[] = {AGGREGATOR_BIN,
                          "--slave-port=0",
                          "--master-port=0",
                          "--metrics-port=0",
                          "--heartbeat-tolerance-ms=600000",
                          "--task-deadline-ms=600000",
                          "--heartbeat-span-ms=200",
                          "--max-retry-ms=5000",
                          "--request-retries=0",
                          learner,
                          limit,
                          "--log-level=debug",
                          NULL};
    cJSON *r = start(f, argv, "aggregator", 15000, true);
    server slave = {"aggregator slave port", port_of(r, "slave_port"), PR_PING};
    server master = {"aggregator master port", port_of(r, "master_port"), PR_PING};
    int metrics_port = port_of(r, "metrics_port");
    cJSON_Delete(r);
    assert_int_equal(fake_count(fl, &fl->nconnects), 1);
    pthread_mutex_lock(&fl->mu);
    set_var("LTOK", fl->connect_token);
    pthread_mutex_unlock(&fl->mu);

    slave_cases(&slave, &slave, fm, "{\"name\": \"learner_get_data_task\"}", BODY_LIMIT);
    /* The held task was fanned out to the fake learner: its id is what the
     * aggregator's master waits for. */
    assert_true(fake_wait(fl, &fl->ntasks, 0, 5000));
    pthread_mutex_lock(&fl->mu);
    set_var("TASK", fl->tasks[fl->ntasks - 1]);
    pthread_mutex_unlock(&fl->mu);

    /* The get-data completes: the aggregator reports it to the fake master. */
    int before = fake_count(fm, &fm->nreports);
    master_task_cases(&master, "{\"batch_size\": 4, \"cur_learner_iter\": 0}");
    assert_true(fake_wait(fm, &fm->nreports, before, 5000));
    master_cases(&master, true);

    /* A truncated report for a held task fails that task at once. */
    {
        char id[PROTO_UUID_LEN + 1];
        proto_uuid4(id);
        char body[200];
        snprintf(body, sizeof body, "{\"task\": {\"id\": \"%s\"}, \"data\": {\"name\": \"learner_get_data_task\"}}",
                 id);
        int nt = fake_count(fl, &fl->ntasks);
        ask_ok(slave.port, "POST", "/task/new", CH MT, body);
        assert_true(fake_wait(fl, &fl->ntasks, nt, 5000));
        pthread_mutex_lock(&fl->mu);
        set_var("TASK", fl->tasks[fl->ntasks - 1]);
        pthread_mutex_unlock(&fl->mu);
        int nr = fake_count(fm, &fm->nreports);
        g_category = "truncated body";
        R(&master, "truncated report for a held task", F_HALFCLOSE,
          "PUT /slave/task/complete HTTP/1.1\r\nHost: x\r\nChannel: 0\r\nToken: {LTOK}\r\nContent-Length: 500\r\n\r\n"
          "{\"task\": {\"id\": \"{TASK}\"}, \"result\": {",
          0, -1, K_NOREPLY);
        /* the coordinator hears of the failure */
        bool got = fake_wait(fm, &fm->nreports, nr, 5000);
        pthread_mutex_lock(&fm->mu);
        char want[80];
        snprintf(want, sizeof want, "fail %s", id);
        bool match = got && strcmp(fm->reports[fm->nreports - 1], want) == 0;
        pthread_mutex_unlock(&fm->mu);
        assert_true(match);
        C(&master, "complete after the truncated one", "PUT", "/slave/task/complete", CH LT,
          "{\"task\": {\"id\": \"{TASK}\"}, \"result\": {}}", 200, 601, K_ENV);
    }
    gen_chunked_over(&master, "/slave/task/complete", BODY_LIMIT);

    server metrics = {"aggregator metrics port", metrics_port, PR_METRICS};
    /* the metrics port answers 404 for everything but GET /metrics: its
     * liveness probe is that 404 envelope */
    g_category = "unknown paths and methods";
    C(&metrics, "metrics port: POST /metrics", "POST", "/metrics", "", "{}", 404, 404, K_ENV);
    g_category = "";

    slowloris_crowd(&slave, 300);
    slowloris_crowd(&master, 300);
    slave_black_hole(&slave);
    expect_all_alive(f);
    stop_all(f, (const int[]){0});
    expect_no_token_in_logs(f);
    finish("aggregator");
}

static void mock_learner_endpoints(void **state)
{
    fx *f = *state;
    f->fk[1] = fake_start();
    char *const argv[] = {
        MOCK_LEARNER_BIN,          "--count=2",
        "--heartbeat-span-ms=200", "--fault={\"kind\": \"hang\", \"task\": \"learner_get_data_task\"}",
        "--log-level=debug",       NULL};
    cJSON *r = start(f, argv, "mock_learner", 10000, true);
    const cJSON *ls = jsonx_get(r, "learners");
    server l0 = {"mock_learner learner0", port_of(cJSON_GetArrayItem(ls, 0), "port"), PR_PING};
    server l1 = {"mock_learner learner1", port_of(cJSON_GetArrayItem(ls, 1), "port"), PR_PING};
    server ctl = {"mock_learner control", port_of(r, "control_port"), PR_LCTL};
    cJSON_Delete(r);
    slave_cases(&l1, &l0, f->fk[1], "{\"name\": \"learner_get_data_task\"}", 0);
    slave_black_hole(&l0);

    /* control API */
    g_category = "unknown paths and methods";
    gen_paths(&ctl, "/state", "POST", K_CTL, -1, -1);
    C(&ctl, "PUT /fault", "PUT", "/fault", "", "{}", 405, -1, K_CTL);
    C(&ctl, "GET /fault/1", "GET", "/fault/1", "", NULL, 405, -1, K_CTL);
    C(&ctl, "DELETE /fault/abc", "DELETE", "/fault/abc", "", NULL, 400, -1, K_CTL);
    C(&ctl, "DELETE /fault/-1", "DELETE", "/fault/-1", "", NULL, 400, -1, K_CTL);
    C(&ctl, "DELETE /fault/99999999999999999999", "DELETE", "/fault/99999999999999999999", "", NULL, 400, -1, K_CTL);
    C(&ctl, "DELETE /fault/424242", "DELETE", "/fault/424242", "", NULL, 404, -1, K_CTL);
    C(&ctl, "POST /learner/9/die", "POST", "/learner/9/die", "", "{}", 404, -1, K_CTL);
    C(&ctl, "POST /learner/0/explode", "POST", "/learner/0/explode", "", "{}", 404, -1, K_CTL);
    C(&ctl, "POST /learner//die", "POST", "/learner//die", "", "{}", 404, -1, K_CTL);
    C(&ctl, "POST /learner/0/die/x", "POST", "/learner/0/die/x", "", "{}", 404, -1, K_CTL);
    C(&ctl, "GET /learner/0/die", "GET", "/learner/0/die", "", "{}", 405, -1, K_CTL);
    g_category = "malformed JSON";
    gen_malformed(&ctl, "POST", "/fault", "", 400, -1, K_CTL);
    C(&ctl, "POST /learner/0/resume with a list", "POST", "/learner/0/resume", "", "[]", 400, -1, K_CTL);
    C(&ctl, "POST /learner/0/resume with members", "POST", "/learner/0/resume", "", "{\"x\": 1}", 400, -1, K_CTL);
    C(&ctl, "POST /learner/0/die with a task", "POST", "/learner/0/die", "", "{\"task\": \"x\"}", 400, -1, K_CTL);
    g_category = "wrong field types";
    static const char *const ff[] = {"kind", "?learner", "?task", "?at", "?prob", NULL};
    gen_fields(&ctl, "POST", "/fault", "",
               "{\"kind\": \"delay\", \"learner\": 0, \"task\": \"learner_learn_task\", \"at\": 1, \"prob\": 0.5}", ff,
               400, -1, K_CTL);
    C(&ctl, "POST /fault kind unknown", "POST", "/fault", "", "{\"kind\": \"meteor\"}", 400, -1, K_CTL);
    C(&ctl, "POST /fault learner 99", "POST", "/fault", "", "{\"kind\": \"fail\", \"learner\": 99}", 400, -1, K_CTL);
    C(&ctl, "POST /fault prob 2", "POST", "/fault", "", "{\"kind\": \"fail\", \"prob\": 2}", 400, -1, K_CTL);
    C(&ctl, "POST /fault at 0", "POST", "/fault", "", "{\"kind\": \"fail\", \"at\": 0}", 400, -1, K_CTL);
    C(&ctl, "POST /fault status 200", "POST", "/fault", "", "{\"kind\": \"error_status\", \"status\": 200}", 400, -1,
      K_CTL);
    C(&ctl, "POST /fault with 10000 faults", "POST", "/fault", "", "[{\"kind\": \"fail\"}]", 200, -1, K_CTL);
    C(&ctl, "DELETE /fault (clear)", "DELETE", "/fault", "", NULL, 200, -1, K_CTL);
    gen_dribble(&ctl, "GET", "/state", "", NULL, 200, -1, K_CTL);
    gen_http(&ctl, "/fault");
    expect_all_alive(f);
    stop_all(f, (const int[]){0});
    expect_no_token_in_logs(f);
    finish("mock_learner");
}

static void mock_coordinator_endpoints(void **state)
{
    fx *f = *state;
    /* Its slave is the fake: it accepts /connect and the first task and never
     * reports, so the coordinator's master port stays up (task deadline
     * 60 s, its heartbeat tolerance 17 s: the cases send heartbeats). */
    f->fk[0] = fake_start();
    fake *fs = f->fk[0];
    char target[64];
    snprintf(target, sizeof target, "--connect=127.0.0.1:%d", fs->port);
    /* Many tasks and no stop on failure: the malformed reports of the cases
     * fail its current task, and it must stay up for the next case. */
    char script[400], sarg[450];
    snprintf(script, sizeof script, "%s/script.json", f->dir);
    FILE *fp = fopen(script, "w");
    assert_non_null(fp);
    fputs("{\"stop_on_failure\": false, \"tasks\": [", fp);
    for (int i = 0; i < 300; i++)
        fprintf(fp, "%s{\"name\": \"resource\"}", i ? ", " : "");
    fputs("]}\n", fp);
    fclose(fp);
    snprintf(sarg, sizeof sarg, "--script=%s", script);
    char *const argv[] = {MOCK_COORDINATOR_BIN, target, sarg, "--task-deadline-ms=60000", "--log-level=debug", NULL};
    start(f, argv, "mock_coordinator", 0, false);
    assert_true(fake_wait(fs, &fs->ntasks, 0, 10000));
    pthread_mutex_lock(&fs->mu);
    set_var("LTOK", fs->connect_token);
    set_var("TASK", fs->tasks[0]);
    const char *colon = strrchr(fs->connect_master, ':');
    int port = colon ? atoi(colon + 1) : 0;
    pthread_mutex_unlock(&fs->mu);
    assert_true(port > 0);
    server m = {"mock_coordinator master port", port, PR_PING};
    master_task_cases(&m, "{\"gpu\": 1}");
    master_cases(&m, false);
    slowloris_crowd(&m, 200);
    expect_all_alive(f);
    stop_all(f, (const int[]){1});
    expect_no_token_in_logs(f);
    finish("mock_coordinator");
}

static void mock_operator_endpoints(void **state)
{
    fx *f = *state;
    char *const argv[] = {MOCK_OPERATOR_BIN, "--port=0", "--control-port=0", "--log-level=debug", NULL};
    cJSON *r = start(f, argv, "mock_operator", 10000, true);
    server api = {"mock_operator API", port_of(r, "port"), PR_OPAPI};
    server ctl = {"mock_operator control", port_of(r, "control_port"), PR_OPCTL};
    cJSON_Delete(r);

    /* The API mirrors DI-orchestrator's server: other methods answer 501
     * with the envelope, unknown paths Go's plain-text 404 (documented in
     * mo_api.h and pinned by test_mock_operator). */
    g_category = "unknown paths and methods";
    gen_paths(&api, "/v1alpha1/replicas", "PUT", K_TEXT, -1, 501);
    g_category = "malformed JSON";
    gen_malformed(&api, "POST", "/v1alpha1/replicas", "", 400, 1, K_ENVANY);
    gen_malformed(&api, "DELETE", "/v1alpha1/replicas", "", 400, 1, K_ENVANY);
    gen_malformed(&api, "POST", "/v1alpha1/replicas/failed", "", 400, 1, K_ENVANY);
    g_category = "wrong field types";
    static const char *const rf[] = {"namespace", "coordinator", "collectors", "learners", "learners.replicas", NULL};
    gen_fields(&api, "POST", "/v1alpha1/replicas", "",
               "{\"namespace\": \"ns\", \"coordinator\": \"c\", \"collectors\": {\"replicas\": 0}, \"learners\": "
               "{\"replicas\": 1}}",
               rf, 400, 1, K_ENVANY);
    static const char *const ff[] = {"namespace", "coordinator", "collectors", "learners", NULL};
    gen_fields(&api, "POST", "/v1alpha1/replicas/failed", "",
               "{\"namespace\": \"ns\", \"coordinator\": \"c\", \"collectors\": [], \"learners\": [\"l-0\"]}", ff, 400,
               1, K_ENVANY);
    g_category = "query parameters";
    C(&api, "GET replicas without parameters", "GET", "/v1alpha1/replicas", "", NULL, 0, 1, K_ENVANY);
    C(&api, "GET replicas with an unknown parameter", "GET", "/v1alpha1/replicas?namespace=a&aggregator=b&x=1", "",
      NULL, 400, 1, K_ENV);
    C(&api, "GET replicas with 200 parameters", "GET",
      "/v1alpha1/replicas?a0&a1&a2&a3&a4&a5&a6&a7&a8&a9&b0&b1&b2&b3&b4&b5&b6&b7&b8&b9&c0&c1&c2&c3&c4&c5&c6&c7&c8&c9"
      "&d0&d1&d2&d3&d4&d5&d6&d7&d8&d9&e0&e1&e2&e3&e4&e5&e6&e7&e8&e9&f0&f1&f2&f3&f4&f5&f6&f7&f8&f9&g0&g1&g2&g3&g4"
      "&g5&g6&g7&g8&g9&h0&h1&h2&h3&h4&h5&h6&h7&h8&h9&i0&i1&i2&i3&i4&i5&i6&i7&i8&i9&j0&j1&j2&j3&j4&j5&j6&j7&j8&j9"
      "&k0&k1&k2&k3&k4&k5&k6&k7&k8&k9&l0&l1&l2&l3&l4&l5&l6&l7&l8&l9&m0&m1&m2&m3&m4&m5&m6&m7&m8&m9&n0&n1&n2&n3&n4"
      "&n5&n6&n7&n8&n9&o0&o1&o2&o3&o4&o5&o6&o7&o8&o9&p0&p1&p2&p3&p4&p5&p6&p7&p8&p9&q0&q1&q2&q3&q4&q5&q6&q7&q8&q9"
      "&r0&r1&r2&r3&r4&r5&r6&r7&r8&r9&s0&s1&s2&s3&s4&s5&s6&s7&s8&s9&t0&t1&t2&t3&t4&t5&t6&t7&t8&t9",
      "", NULL, 400, 1, K_ENV);
    C(&api, "GET replicas with %-escapes", "GET", "/v1alpha1/replicas?namespace=%00%ff&aggregator=%zz", "", NULL, 404,
      1, K_ENV);
    gen_dribble(&api, "GET", "/healthz", "", NULL, 200, -1, K_TEXT);
    gen_http(&api, "/v1alpha1/replicas");
    gen_chunked_over(&api, "/v1alpha1/replicas", 1u << 20);

    /* control API: the envelope too */
    g_category = "unknown paths and methods";
    gen_paths(&ctl, "/control/state", "POST", K_ENV, 1, 1);
    g_category = "malformed JSON";
    gen_malformed(&ctl, "PUT", "/control/learners", "", 400, 1, K_ENV);
    gen_malformed(&ctl, "POST", "/control/fault", "", 400, 1, K_ENV);
    gen_malformed(&ctl, "PUT", "/control/settings", "", 400, 1, K_ENV);
    g_category = "wrong field types";
    static const char *const lf[] = {"namespace", "name", "learners", NULL};
    gen_fields(&ctl, "PUT", "/control/learners", "",
               "{\"namespace\": \"ns\", \"name\": \"n\", \"learners\": [\"127.0.0.1:1\"]}", lf, 400, 1, K_ENV);
    C(&ctl, "PUT /control/learners with a bad address", "PUT", "/control/learners", "",
      "{\"namespace\": \"ns\", \"name\": \"n\", \"learners\": [\"no port\"]}", 400, 1, K_ENV);
    C(&ctl, "PUT /control/learners with an unknown field", "PUT", "/control/learners", "",
      "{\"namespace\": \"ns\", \"name\": \"n\", \"learners\": [], \"x\": 1}", 400, 1, K_ENV);
    gen_dribble(&ctl, "GET", "/control/state", "", NULL, 200, 0, K_ENV);
    gen_http(&ctl, "/control/learners");
    expect_all_alive(f);
    stop_all(f, (const int[]){0});
    expect_no_token_in_logs(f);
    finish("mock_operator");
}

/* ------------------------------------------------------------------ */
/* hs itself: the request-head deadline that closes dribbling peers     */

typedef struct {
    int requests;
} hs_ctx;

static void on_hs_request(void *data, hs_request *r)
{
    hs_ctx *c = data;
    c->requests++;
    hs_reply_json(r, 200, proto_envelope(true, 0, NULL, NULL));
}

static void hs_dribbler_is_closed_at_the_head_deadline(void **state)
{
    (void)state;
    g_category = "slowloris (head deadline)";
    ev_loop *loop = ev_loop_new();
    hs_config cfg;
    hs_config_init(&cfg);
    cfg.idle_timeout_s = 1;
    hs_ctx ctx = {0};
    char err[200];
    hs_server *s = hs_start(loop, &cfg, on_hs_request, &ctx, err, sizeof err);
    assert_non_null(s);
    int fd = tcp_connect(hs_port(s));
    assert_true(fd >= 0);
    /* one byte every 100 ms: never idle for a second, never done */
    const char *head = "GET /ping HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    long t0 = now_ms(), closed_at = -1;
    for (size_t i = 0; head[i] && closed_at < 0 && now_ms() - t0 < 6000; i++) {
        ssize_t w = send(fd, head + i, 1, MSG_NOSIGNAL);
        tu_run_for(loop, 100);
        char c;
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
        if (w < 0 || n == 0 || (n < 0 && errno != EAGAIN))
            closed_at = now_ms() - t0;
    }
    close(fd);
    /* a well-behaved client is served */
    hc_client *hc = hc_new(loop);
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/ping", hs_port(s));
    tu_reply rep = tu_http(loop, hc, "GET", url, NULL, -1, NULL);
    assert_int_equal(rep.status, 200);
    tu_reply_free(&rep);
    hc_free(hc);
    hs_stop(s);
    ev_loop_free(loop);
    fprintf(stderr, "dribbling peer closed after %ld ms (head deadline 1 s)\n", closed_at);
    g_cases++;
    count_category();
    assert_true(closed_at > 0 && closed_at < 3000);
    assert_int_equal(ctx.requests, 1);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(hs_dribbler_is_closed_at_the_head_deadline),
        cmocka_unit_test_setup_teardown(aggregator_endpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(mock_learner_endpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(mock_coordinator_endpoints, setup, teardown),
        cmocka_unit_test_setup_teardown(mock_operator_endpoints, setup, teardown),
    };
    /* BAD_INPUT_ONLY=pattern runs the matching tests only (debugging). */
    if (getenv("BAD_INPUT_ONLY"))
        cmocka_set_test_filter(getenv("BAD_INPUT_ONLY"));
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    fprintf(stderr, "bad-input cases by category:\n");
    for (int i = 0; i < ncats; i++)
        fprintf(stderr, "  %-45s %d\n", cat_names[i][0] ? cat_names[i] : "(other)", cat_counts[i]);
    printf("bad-input cases: %d\n", g_cases);
    return rc;
}
