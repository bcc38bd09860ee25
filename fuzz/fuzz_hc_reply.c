/* fuzz_hc_reply: the reply handling our code does on top of libcurl, through
 * the real client: hc (libcurl multi on an ev loop) sends a request to a
 * raw loopback server on the same loop, which answers with the input's bytes
 * (the first byte: how many times the rest is repeated, 1-16, so that the
 * 64 KiB head cap is reachable from an 8 KiB input, and which reply cap
 * applies) and closes. What hc hands back goes through what master and slave
 * do with a reply (proto_parse_envelope). Checked: the request always ends
 * (capped), a result is either an error or a status with a body within the
 * cap, NUL-terminated, and nothing leaks (ASan). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ev.h"
#include "hc.h"
#include "proto.h"

static ev_loop *loop;
static hc_client *client;
static int lfd, port;

typedef struct {
    const uint8_t *data;
    size_t len, reps, at; /* bytes written of len * reps */
    int fd;
    int closed;
} feed;

typedef struct {
    int done;
    size_t max_reply;
} outcome;

static void on_accept(ev_loop *l, int fd, unsigned events, void *data);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    signal(SIGPIPE, SIG_IGN);
    loop = ev_loop_new();
    client = hc_new(loop);
    lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (!loop || !client || lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(lfd, 16) < 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) < 0) {
        fprintf(stderr, "fuzz_hc_reply: cannot set up\n");
        abort();
    }
    port = ntohs(a.sin_port);
    ev_fd_set(loop, lfd, EV_READ, on_accept, NULL);
    return 0;
}

static void feed_close(feed *f)
{
    if (f->fd >= 0) {
        ev_fd_del(loop, f->fd);
        close(f->fd);
        f->fd = -1;
    }
    f->closed = 1;
}

static void on_conn(ev_loop *l, int fd, unsigned events, void *data)
{
    (void)l;
    feed *f = data;
    if (events & EV_READ) { /* the request: discarded */
        char buf[4096];
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            feed_close(f);
            return;
        }
    }
    if (events & EV_WRITE) {
        size_t total = f->len * f->reps;
        while (f->at < total) {
            size_t off = f->at % f->len;
            ssize_t w = send(fd, f->data + off, f->len - off, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno != EAGAIN && errno != EINTR)
                    feed_close(f);
                return;
            }
            f->at += (size_t)w;
        }
        feed_close(f); /* all of it: the close ends a close-delimited reply */
    }
}

static feed *cur; /* the input being answered */

static void on_accept(ev_loop *l, int fd, unsigned events, void *data)
{
    (void)events;
    (void)data;
    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    if (!cur || cur->fd >= 0 || cur->closed) { /* one connection per input */
        close(c);
        return;
    }
    cur->fd = c;
    ev_fd_set(l, c, EV_READ | EV_WRITE, on_conn, cur);
}

static void on_done(void *data, const hc_result *res)
{
    outcome *o = data;
    o->done = 1;
    if (res->error) {
        if (res->status != 0 || res->body_len != 0 || !res->body || res->body[0])
            abort();
        return;
    }
    if (res->body_len > o->max_reply || res->body[res->body_len] != '\0')
        abort();
    proto_reply rep;
    char err[200];
    if (proto_parse_envelope(res->body, res->body_len, &rep, err, sizeof err))
        cJSON_Delete(rep.tree);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    static const size_t caps[] = {16, 1024, 65536, (size_t)16 << 20};
    outcome o = {0, caps[(data[0] >> 4) & 3]};
    feed f = {data + 1, size - 1, (size_t)(data[0] & 15) + 1, 0, -1, 0};
    char url[64];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/slave/heartbeat", port);
    hc_opts opts;
    hc_opts_init(&opts);
    opts.url = url;
    opts.retries = 0;
    opts.timeout_ms = 2000;
    opts.max_reply = o.max_reply;
    if (!hc_send(client, &opts, on_done, &o))
        abort();
    cur = &f;
    uint64_t end = ev_now_ms() + 5000;
    while (!o.done && ev_now_ms() < end)
        ev_run_once(loop, 100);
    if (!o.done)
        abort(); /* a hang: the request outlived its timeout */
    feed_close(&f);
    cur = NULL;
    return 0;
}
