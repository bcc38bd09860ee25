/* hostile: a scripted hostile HTTP server (see hostile.h). */
#include "hostile.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xalloc.h"

#define HOSTILE_MAX_CONNS 64
#define HOSTILE_STREAM (64u << 10)
#define HOSTILE_DRIBBLE_MS 10

typedef struct hconn hconn;

struct hconn {
    hostile *h;
    int fd;
    unsigned events;
    char tail[4]; /* the last bytes read, to find "\r\n\r\n" across reads */
    int attacking;
    unsigned long long pos; /* of prefix + endless units */
    ev_timer *timer;
};

struct hostile {
    ev_loop *loop;
    hostile_mode mode;
    int lfd, port;
    unsigned accepts;
    unsigned long long sent;
    uint64_t first_ms;
    int paused;
    const char *prefix;
    size_t prefix_len;
    char *stream; /* the unit repeated, a whole number of times */
    size_t unit_len, stream_len;
    hconn *conns[HOSTILE_MAX_CONNS];
};

const char *hostile_mode_name(hostile_mode m)
{
    static const char *const names[] = {"endless chunked trailers", "1-byte chunks with huge extensions",
                                        "endless header lines",     "a flood of 100 Continue",
                                        "a head dribbled a byte at a time", "a reply that never ends"};
    return m < HOSTILE_NMODES ? names[m] : "?";
}

static void hconn_close(hconn *k)
{
    hostile *h = k->h;
    if (k->timer)
        ev_timer_stop(h->loop, k->timer);
    ev_fd_del(h->loop, k->fd);
    close(k->fd);
    for (int i = 0; i < HOSTILE_MAX_CONNS; i++)
        if (h->conns[i] == k)
            h->conns[i] = NULL;
    free(k);
}

/* Up to max bytes of the attack at k->pos: a pointer and a length. */
static size_t next_bytes(const hconn *k, const char **p, size_t max)
{
    const hostile *h = k->h;
    size_t n;
    if (k->pos < h->prefix_len) {
        *p = h->prefix + k->pos;
        n = h->prefix_len - (size_t)k->pos;
    } else {
        size_t off = (size_t)((k->pos - h->prefix_len) % h->unit_len);
        *p = h->stream + off;
        n = h->stream_len - off;
    }
    return n < max ? n : max;
}

static void on_hconn(ev_loop *loop, int fd, unsigned events, void *data);

static void watch(hconn *k, unsigned events)
{
    if (k->events != events && ev_fd_set(k->h->loop, k->fd, events, on_hconn, k) == 0)
        k->events = events;
}

static void on_dribble(ev_loop *loop, void *data)
{
    hconn *k = data;
    k->timer = NULL;
    if (!k->h->paused) {
        const char *p;
        next_bytes(k, &p, 1);
        if (send(k->fd, p, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            k->pos++;
            k->h->sent++;
        }
    }
    k->timer = ev_timer_start(loop, HOSTILE_DRIBBLE_MS, on_dribble, k);
}

static void attack_start(hconn *k)
{
    hostile *h = k->h;
    k->attacking = 1;
    if (!h->first_ms)
        h->first_ms = ev_now_ms();
    if (h->mode == HOSTILE_DRIBBLE)
        k->timer = ev_timer_start(h->loop, 0, on_dribble, k);
    else
        watch(k, EV_READ | EV_WRITE);
}

static void on_hconn(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    hconn *k = data;
    hostile *h = k->h;
    if (events & (EV_READ | EV_ERROR)) { /* read and discard */
        char buf[16384];
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            hconn_close(k);
            return;
        }
        for (ssize_t i = 0; i < n && !k->attacking; i++) {
            memmove(k->tail, k->tail + 1, 3);
            k->tail[3] = buf[i];
            if (memcmp(k->tail, "\r\n\r\n", 4) == 0)
                attack_start(k);
        }
    }
    if ((events & EV_WRITE) && k->attacking && h->mode != HOSTILE_DRIBBLE) {
        if (h->paused) {
            watch(k, EV_READ);
            return;
        }
        for (int round = 0; round < 16; round++) {
            const char *p;
            size_t want = next_bytes(k, &p, HOSTILE_STREAM);
            ssize_t w = send(fd, p, want, MSG_NOSIGNAL | MSG_DONTWAIT);
            if (w < 0) {
                if (errno != EAGAIN && errno != EINTR)
                    hconn_close(k);
                return;
            }
            k->pos += (unsigned long long)w;
            h->sent += (unsigned long long)w;
            if ((size_t)w < want)
                return;
        }
    }
}

static void on_accept(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)events;
    hostile *h = data;
    int c = accept4(fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0)
        return;
    int slot = -1;
    for (int i = 0; i < HOSTILE_MAX_CONNS && slot < 0; i++)
        if (!h->conns[i])
            slot = i;
    if (slot < 0) {
        close(c);
        return;
    }
    h->accepts++;
    hconn *k = xcalloc(1, sizeof *k);
    k->h = h;
    k->fd = c;
    h->conns[slot] = k;
    (void)loop;
    watch(k, EV_READ);
}

hostile *hostile_start(ev_loop *loop, hostile_mode mode)
{
    hostile *h = xcalloc(1, sizeof *h);
    h->loop = loop;
    h->mode = mode;
    const char *unit = "";
    char ext[1100];
    switch (mode) {
    case HOSTILE_TRAILERS:
        h->prefix = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n";
        unit = "X-Trailer: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n";
        break;
    case HOSTILE_EXTENSIONS:
        h->prefix = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        memcpy(ext, "1;", 2);
        memset(ext + 2, 'e', 1000);
        memcpy(ext + 1002, "\r\nx\r\n", 6);
        unit = ext;
        break;
    case HOSTILE_HEADERS:
        h->prefix = "HTTP/1.1 200 OK\r\n";
        unit = "X-Header: bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\r\n";
        break;
    case HOSTILE_CONTINUE:
        h->prefix = "";
        unit = "HTTP/1.1 100 Continue\r\n\r\n";
        break;
    case HOSTILE_DRIBBLE:
        h->prefix = "HTTP/1.1 200 OK\r\n";
        unit = "X-Slow: a\r\n";
        break;
    default:
        h->prefix = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n\r\n";
        unit = "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], ";
        break;
    }
    h->prefix_len = strlen(h->prefix);
    h->unit_len = strlen(unit);
    size_t reps = HOSTILE_STREAM / h->unit_len + 1;
    h->stream_len = reps * h->unit_len;
    h->stream = xmalloc(h->stream_len);
    for (size_t i = 0; i < reps; i++)
        memcpy(h->stream + i * h->unit_len, unit, h->unit_len);
    h->lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (h->lfd < 0 || bind(h->lfd, (struct sockaddr *)&a, sizeof a) < 0 || listen(h->lfd, 64) < 0 ||
        getsockname(h->lfd, (struct sockaddr *)&a, &al) < 0 || ev_fd_set(loop, h->lfd, EV_READ, on_accept, h) < 0) {
        if (h->lfd >= 0)
            close(h->lfd);
        free(h->stream);
        free(h);
        return NULL;
    }
    h->port = ntohs(a.sin_port);
    return h;
}

int hostile_port(const hostile *h)
{
    return h->port;
}

unsigned hostile_accepts(const hostile *h)
{
    return h->accepts;
}

unsigned long long hostile_sent(const hostile *h)
{
    return h->sent;
}

uint64_t hostile_first_request_ms(const hostile *h)
{
    return h->first_ms;
}

void hostile_pause(hostile *h)
{
    h->paused = 1;
}

void hostile_stop(hostile *h)
{
    if (!h)
        return;
    for (int i = 0; i < HOSTILE_MAX_CONNS; i++)
        if (h->conns[i])
            hconn_close(h->conns[i]);
    ev_fd_del(h->loop, h->lfd);
    close(h->lfd);
    free(h->stream);
    free(h);
}
