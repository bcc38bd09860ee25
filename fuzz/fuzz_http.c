/* fuzz_http: our request handling on top of libmicrohttpd (hs.c's request
 * and body code, the slave and master ends' handlers and their JSON
 * envelopes), through a real aggregator (agg_new, no learners) on a fresh
 * loop per input. libmicrohttpd's own parsing is not the target (it is
 * fuzzed upstream): the input is a list of requests that this harness
 * writes as well-formed HTTP/1.1, so that every one reaches our code.
 *
 * Input: the first byte picks the coordinator side (slave: /connect,
 * /task/new, ...; bit 0 clear) or the learner side (master:
 * /slave/heartbeat, reports, /metrics). The rest is split into requests at
 * NUL bytes; each is "METHOD PATH\n", then header lines "Name: value\n" up
 * to an empty line, then the body (the rest). A method of other than
 * letters becomes GET, a path not starting with '/' gets one; header lines
 * with bytes HTTP does not allow, and Host, Content-Length,
 * Transfer-Encoding, Connection and Expect, are dropped (the harness writes
 * Host and Content-Length). The requests are pipelined on one TCP
 * connection, so that /connect then /task/new with the same token reach the
 * task code; the write side is shut and the loop runs until the server
 * closes the connection (capped). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <strings.h>
#include <unistd.h>

#include "agg.h"
#include "agg_config.h"
#include "ev.h"
#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

static agg_config cfg;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    ilog_init("fuzz_http", getenv("FUZZ_HTTP_LOG") ? ILOG_DEBUG : ILOG_OFF, ILOG_HUMAN);
    char *args[] = {"aggregator", "--slave-port", "0", "--master-port", "0", "--max-retry-ms", "100",
                    "--retry-interval-ms", "50", "--task-deadline-ms", "1000", NULL};
    char err[512];
    if (agg_config_from_args(&cfg, 11, args, err, sizeof err) != AGG_CONFIG_OK) {
        fprintf(stderr, "fuzz_http: config: %s\n", err);
        abort();
    }
    return 0;
}

static void on_ready(void *ud, agg *a)
{
    (void)ud;
    (void)a;
}

static int port_of(const char *line, const char *key)
{
    cJSON *j = jsonx_parse(line, strlen(line), NULL, 0);
    int64_t v = -1;
    if (!j || !jsonx_get_i64(jsonx_get(j, key), &v))
        v = -1;
    cJSON_Delete(j);
    return (int)v;
}

static bool is_token(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || strchr("!#$%&'*+-.^_`|~", c);
}

/* One record of the input as an HTTP/1.1 request appended to out. */
static void write_request(xbuf *out, const char *p, size_t n)
{
    const char *end = p + n;
    const char *nl = memchr(p, '\n', n);
    const char *line_end = nl ? nl : end;
    const char *sp = memchr(p, ' ', (size_t)(line_end - p));
    const char *m_end = sp ? sp : line_end;
    bool letters = m_end > p && m_end - p <= 16;
    for (const char *q = p; letters && q < m_end; q++)
        letters = (*q >= 'A' && *q <= 'Z') || (*q >= 'a' && *q <= 'z');
    if (letters)
        xbuf_append(out, p, (size_t)(m_end - p));
    else
        xbuf_puts(out, "GET");
    xbuf_puts(out, " ");
    const char *path = sp ? sp + 1 : line_end;
    if (path >= line_end || *path != '/')
        xbuf_puts(out, "/");
    for (const char *q = path; q < line_end && q - path < 4096; q++)
        if (*q > 0x20 && *q < 0x7f)
            xbuf_append(out, q, 1);
    xbuf_puts(out, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    p = nl ? nl + 1 : end;
    while (p < end) {
        nl = memchr(p, '\n', (size_t)(end - p));
        line_end = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        if (line_end == p) { /* the empty line: the body follows */
            p = next;
            break;
        }
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        bool ok = colon && colon > p;
        for (const char *q = p; ok && q < colon; q++)
            ok = is_token((unsigned char)*q);
        for (const char *q = colon ? colon + 1 : p; ok && q < line_end; q++)
            ok = (*q >= 0x20 && *q < 0x7f) || *q == '\t';
        static const char *const ours[] = {"Host", "Content-Length", "Transfer-Encoding", "Connection", "Expect"};
        for (size_t i = 0; ok && i < sizeof ours / sizeof ours[0]; i++)
            ok = !((size_t)(colon - p) == strlen(ours[i]) && strncasecmp(p, ours[i], strlen(ours[i])) == 0);
        if (ok) {
            xbuf_append(out, p, (size_t)(line_end - p));
            xbuf_puts(out, "\r\n");
        }
        p = next;
    }
    xbuf_printf(out, "Content-Length: %zu\r\n\r\n", (size_t)(end - p));
    xbuf_append(out, p, (size_t)(end - p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > 65536)
        return 0;
    ev_loop *loop = ev_loop_new();
    if (!loop)
        abort();
    char err[512];
    agg *a = agg_new(loop, &cfg, on_ready, NULL, err, sizeof err);
    if (!a) {
        fprintf(stderr, "fuzz_http: agg_new: %s\n", err);
        abort();
    }
    char *line = agg_ready_line(a);
    int port = port_of(line, (data[0] & 1) ? "master_port" : "slave_port");
    free(line);
    if (port <= 0)
        abort();

    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0)
        abort();
    fcntl(fd, F_SETFL, O_NONBLOCK);
    xbuf reqs = {0};
    for (const char *r = (const char *)data + 1, *end = (const char *)data + size; r < end;) {
        const char *nul = memchr(r, '\0', (size_t)(end - r));
        const char *rec_end = nul ? nul : end;
        write_request(&reqs, r, (size_t)(rec_end - r));
        r = nul ? nul + 1 : end;
    }
    const char *p = reqs.data;
    size_t left = reqs.len;
    if (left == 0)
        shutdown(fd, SHUT_WR);
    bool eof = false;
    char buf[65536];
    uint64_t end = ev_now_ms() + 300;
    while (!eof && ev_now_ms() < end) {
        if (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w > 0) {
                p += w;
                left -= (size_t)w;
            } else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                left = 0;
            }
            if (left == 0)
                shutdown(fd, SHUT_WR);
        }
        ev_run_once(loop, 1);
        for (;;) {
            ssize_t r = read(fd, buf, sizeof buf);
            if (r > 0)
                continue;
            if (r == 0 || (errno != EAGAIN && errno != EINTR))
                eof = true;
            break;
        }
    }
    close(fd);
    xbuf_free(&reqs);
    /* Let the server see the close and whatever the requests started run a
     * little (reports to the master address given in /connect, and so on). */
    for (int i = 0; i < 3; i++)
        ev_run_once(loop, 0);
    agg_free(a);
    ev_loop_free(loop);
    return 0;
}
