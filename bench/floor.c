/* floor: the loopback floor of an aggregator round, measured with a minimal
 * epoll HTTP/1.1 server (a child process) and a minimal client: no library,
 * no JSON, fixed requests and replies of the protocol's sizes. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "xalloc.h"

/* A /task/new request as curl sends it for a get-data task (header block
 * about 230 bytes, body about 100) and hs's reply (about 190 bytes). */
static const char REQ_BODY[] =
    "{\"task\": {\"id\": \"0f8fad5b-d9cb-469f-a165-70867728950e\"}, \"data\": {\"name\": \"learner_get_data_task\"}}";
static const char REPLY_BODY[] = "{\"code\":0,\"data\":null,\"message\":\"Task received!\",\"success\":true}\n";

typedef struct {
    int fd;
    char buf[8192];
    size_t len;
} fconn;

/* Length of the first complete HTTP message in b (headers + body by
 * Content-Length), or 0 if it is not complete yet. */
static size_t message_len(const char *b, size_t len)
{
    const char *end = memmem(b, len, "\r\n\r\n", 4);
    if (!end)
        return 0;
    size_t head = (size_t)(end - b) + 4;
    size_t body = 0;
    for (const char *p = b; p < end;) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        if ((size_t)(nl - p) > 15 && strncasecmp(p, "Content-Length:", 15) == 0)
            body = strtoul(p + 15, NULL, 10);
        p = nl + 1;
    }
    return len >= head + body ? head + body : 0;
}

static void write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR || errno == EAGAIN)
                continue;
            return;
        }
        p += w;
        n -= (size_t)w;
    }
}

static void serve(int lfd)
{
    char *reply = xasprintf("HTTP/1.1 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: %zu\r\n"
                            "Content-Type: application/json\r\nDate: Mon, 01 Jan 2024 00:00:00 GMT\r\n\r\n%s",
                            strlen(REPLY_BODY), REPLY_BODY);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event evs[256];
    size_t rlen = strlen(reply);
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            fconn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    int one = 1;
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    fconn *nc = xcalloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                close(c->fd);
                free(c);
                continue;
            }
            c->len += (size_t)r;
            size_t m;
            while ((m = message_len(c->buf, c->len)) > 0) {
                write_all(c->fd, reply, rlen);
                memmove(c->buf, c->buf + m, c->len - m);
                c->len -= m;
            }
        }
    }
}

/* Sends a request on each of conns[0..n) at once, then waits for every
 * reply. */
static int exchange(int ep, fconn **conns, size_t n, const char *req, size_t reqlen)
{
    for (size_t i = 0; i < n; i++) {
        conns[i]->len = 0;
        write_all(conns[i]->fd, req, reqlen);
    }
    size_t left = n;
    struct epoll_event evs[256];
    while (left) {
        int k = epoll_wait(ep, evs, 256, 5000);
        if (k <= 0)
            return -1;
        for (int i = 0; i < k; i++) {
            fconn *c = evs[i].data.ptr;
            ssize_t r = read(c->fd, c->buf + c->len, sizeof c->buf - c->len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN)
                    continue;
                return -1;
            }
            c->len += (size_t)r;
            if (message_len(c->buf, c->len))
                left--;
        }
    }
    return 0;
}

void bench_floor_row(bench_row *row, const char *impl, int learners, double *times, size_t nt, double elapsed_s,
                     uint64_t cpu_ns)
{
    bench_row_init(row, "floor", impl);
    row->learners = learners;
    row->rounds = (long)nt;
    row->rounds_per_s = (double)nt / elapsed_s;
    row->cpu_us_per_round = (double)cpu_ns / 1e3 / (double)nt;
    /* exchanges per round: 2 tasks x (2 + 2 learners) */
    row->cpu_us_per_task = row->cpu_us_per_round / (2.0 * (2.0 + 2.0 * learners));
    bench_stats(times, nt, &row->round_ms_median, &row->round_ms_mean, &row->round_ms_p90);
}

int bench_floor(int learners, double seconds, long min_rounds, bench_row *row, char *err, size_t errlen)
{
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(lfd, 4096) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
        snprintf(err, errlen, "floor: cannot listen: %s", strerror(errno));
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "floor: fork: %s", strerror(errno));
        close(lfd);
        return -1;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(1);
        serve(lfd);
        _exit(0);
    }
    close(lfd);
    size_t n = (size_t)learners + 1;
    fconn **conns = xcalloc(n, sizeof *conns);
    int ep = epoll_create1(0);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        conns[i] = xcalloc(1, sizeof **conns);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
            snprintf(err, errlen, "floor: connect: %s", strerror(errno));
            rc = -1;
            break;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        conns[i]->fd = fd;
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = conns[i]};
        epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
    }
    char *req = xasprintf("POST /task/new HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: dilearn/0.1.0\r\n"
                          "Accept: */*\r\nChannel: 0\r\n"
                          "Token: 0123456789abcdefABCDEF0123456789abcdefABCDEF0123456789abcdef0123\r\n"
                          "Content-Length: %zu\r\n\r\n%s",
                          ntohs(sa.sin_port), strlen(REQ_BODY), REQ_BODY);
    size_t reqlen = strlen(req);
    size_t cap = 1024, nt = 0;
    double *times = xmalloc(cap * sizeof *times);
    bench_cpu c0 = {0}, c1 = {0};
    uint64_t s0 = 0, t_start = 0;
    for (long round = -3; rc == 0; round++) { /* 3 warm-up rounds */
        if (round == 0) {
            bench_cpu_read(pid, &c0);
            s0 = bench_self_cpu_ns();
            t_start = bench_now_ns();
        }
        uint64_t t0 = bench_now_ns();
        for (int task = 0; task < 2 && rc == 0; task++)
            rc = exchange(ep, conns, 1, req, reqlen) || exchange(ep, conns + 1, n - 1, req, reqlen) ||
                 exchange(ep, conns + 1, n - 1, req, reqlen) || exchange(ep, conns, 1, req, reqlen);
        if (rc) {
            rc = -1;
            snprintf(err, errlen, "floor: an exchange failed");
            break;
        }
        if (round < 0)
            continue;
        if (nt == cap)
            times = xrealloc(times, (cap *= 2) * sizeof *times);
        times[nt++] = (double)(bench_now_ns() - t0) / 1e6;
        if ((long)nt >= min_rounds && (double)(bench_now_ns() - t_start) / 1e9 >= seconds)
            break;
    }
    if (rc == 0) {
        double elapsed = (double)(bench_now_ns() - t_start) / 1e9;
        uint64_t self = bench_self_cpu_ns() - s0;
        bench_cpu_read(pid, &c1);
        uint64_t cpu = self + (c1.total_ns - c0.total_ns);
        bench_floor_row(row, "floor", learners, times, nt, elapsed, cpu);
    }
    for (size_t i = 0; i < n; i++) {
        if (conns[i] && conns[i]->fd > 0)
            close(conns[i]->fd);
        free(conns[i]);
    }
    free(conns);
    free(times);
    free(req);
    close(ep);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return rc;
}
