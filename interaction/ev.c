/* ev: epoll event loop with a binary heap of monotonic timers and signalfd. */
#include "ev.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "xalloc.h"

typedef struct {
    ev_fd_cb cb;
    void *data;
    unsigned events; /* 0: not watched */
} fd_watch;

struct ev_timer {
    uint64_t due_us;
    uint64_t seq; /* FIFO among equal deadlines */
    size_t heap_index;
    ev_timer_cb cb;
    void *data;
};

typedef struct {
    int signum;
    ev_signal_cb cb;
    void *data;
} sig_watch;

struct ev_loop {
    int epfd;
    fd_watch *fds;
    size_t nfds;
    ev_timer **heap;
    size_t heap_len, heap_cap;
    uint64_t seq;
    ev_timer *spare; /* freed timer records, reused (a list through .data) */
    size_t nspare;
    int sigfd;
    sigset_t sigmask;
    sig_watch sigs[32];
    size_t nsigs;
    int stop;
};

uint64_t ev_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

uint64_t ev_now_ms(void)
{
    return ev_now_us() / 1000u;
}

ev_loop *ev_loop_new(void)
{
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return NULL;
    ev_loop *l = xcalloc(1, sizeof *l);
    l->epfd = epfd;
    l->sigfd = -1;
    sigemptyset(&l->sigmask);
    return l;
}

void ev_loop_free(ev_loop *l)
{
    if (!l)
        return;
    for (size_t i = 0; i < l->heap_len; i++)
        free(l->heap[i]);
    free(l->heap);
    while (l->spare) {
        ev_timer *t = l->spare;
        l->spare = t->data;
        free(t);
    }
    free(l->fds);
    if (l->sigfd >= 0)
        close(l->sigfd);
    close(l->epfd);
    free(l);
}

static void grow_fds(ev_loop *l, int fd)
{
    if ((size_t)fd < l->nfds)
        return;
    size_t n = l->nfds ? l->nfds : 64;
    while (n <= (size_t)fd)
        n *= 2;
    l->fds = xrealloc(l->fds, n * sizeof *l->fds);
    memset(l->fds + l->nfds, 0, (n - l->nfds) * sizeof *l->fds);
    l->nfds = n;
}

int ev_fd_set(ev_loop *l, int fd, unsigned events, ev_fd_cb cb, void *data)
{
    if (fd < 0) {
        errno = EBADF;
        return -1;
    }
    if (events == 0)
        return ev_fd_del(l, fd);
    grow_fds(l, fd);
    fd_watch *w = &l->fds[fd];
    struct epoll_event ee = {0};
    ee.events = ((events & EV_READ) ? EPOLLIN : 0u) | ((events & EV_WRITE) ? EPOLLOUT : 0u);
    ee.data.fd = fd;
    int op = w->events ? EPOLL_CTL_MOD : EPOLL_CTL_ADD;
    if (epoll_ctl(l->epfd, op, fd, &ee) < 0) {
        /* The fd may have been closed and reused behind our back. */
        if (op == EPOLL_CTL_MOD && errno == ENOENT)
            op = EPOLL_CTL_ADD;
        else if (op == EPOLL_CTL_ADD && errno == EEXIST)
            op = EPOLL_CTL_MOD;
        else
            return -1;
        if (epoll_ctl(l->epfd, op, fd, &ee) < 0)
            return -1;
    }
    w->events = events;
    w->cb = cb;
    w->data = data;
    return 0;
}

int ev_fd_del(ev_loop *l, int fd)
{
    if (fd < 0 || (size_t)fd >= l->nfds || !l->fds[fd].events)
        return 0;
    l->fds[fd].events = 0;
    l->fds[fd].cb = NULL;
    /* ENOENT/EBADF: the fd was closed already, which removed it. */
    if (epoll_ctl(l->epfd, EPOLL_CTL_DEL, fd, NULL) < 0 && errno != ENOENT && errno != EBADF)
        return -1;
    return 0;
}

/* ---- timer heap ---- */

static int timer_less(const ev_timer *a, const ev_timer *b)
{
    return a->due_us < b->due_us || (a->due_us == b->due_us && a->seq < b->seq);
}

static void heap_swap(ev_loop *l, size_t i, size_t j)
{
    ev_timer *t = l->heap[i];
    l->heap[i] = l->heap[j];
    l->heap[j] = t;
    l->heap[i]->heap_index = i;
    l->heap[j]->heap_index = j;
}

static void heap_up(ev_loop *l, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!timer_less(l->heap[i], l->heap[p]))
            break;
        heap_swap(l, i, p);
        i = p;
    }
}

static void heap_down(ev_loop *l, size_t i)
{
    for (;;) {
        size_t a = 2 * i + 1, b = a + 1, m = i;
        if (a < l->heap_len && timer_less(l->heap[a], l->heap[m]))
            m = a;
        if (b < l->heap_len && timer_less(l->heap[b], l->heap[m]))
            m = b;
        if (m == i)
            break;
        heap_swap(l, i, m);
        i = m;
    }
}

static void heap_remove(ev_loop *l, size_t i)
{
    l->heap_len--;
    if (i != l->heap_len) {
        l->heap[i] = l->heap[l->heap_len];
        l->heap[i]->heap_index = i;
        heap_down(l, i);
        heap_up(l, i);
    }
}

/* Timer records are kept for reuse: most requests and tasks start one and
 * stop it soon after, and a malloc/free pair each costs more than the heap. */
#define EV_SPARE_MAX 4096u

static void timer_release(ev_loop *l, ev_timer *t)
{
    if (l->nspare >= EV_SPARE_MAX) {
        free(t);
        return;
    }
    t->data = l->spare;
    l->spare = t;
    l->nspare++;
}

ev_timer *ev_timer_start(ev_loop *l, uint64_t delay_ms, ev_timer_cb cb, void *data)
{
    ev_timer *t = l->spare;
    if (t) {
        l->spare = t->data;
        l->nspare--;
    } else {
        t = xmalloc(sizeof *t);
    }
    t->due_us = ev_now_us() + delay_ms * 1000u;
    t->seq = l->seq++;
    t->cb = cb;
    t->data = data;
    if (l->heap_len == l->heap_cap) {
        l->heap_cap = l->heap_cap ? l->heap_cap * 2 : 64;
        l->heap = xrealloc(l->heap, l->heap_cap * sizeof *l->heap);
    }
    t->heap_index = l->heap_len;
    l->heap[l->heap_len++] = t;
    heap_up(l, t->heap_index);
    return t;
}

void ev_timer_stop(ev_loop *l, ev_timer *t)
{
    if (!t)
        return;
    heap_remove(l, t->heap_index);
    timer_release(l, t);
}

/* Runs every timer that is due; timers added meanwhile with a zero delay run
 * on the next pass, so a timer that re-arms itself cannot starve I/O. */
static void run_timers(ev_loop *l)
{
    uint64_t now = ev_now_us();
    uint64_t limit = l->seq;
    while (l->heap_len && l->heap[0]->due_us <= now && l->heap[0]->seq < limit && !l->stop) {
        ev_timer *t = l->heap[0];
        heap_remove(l, 0);
        ev_timer_cb cb = t->cb;
        void *data = t->data;
        timer_release(l, t);
        cb(l, data);
    }
}

static int next_timeout_ms(ev_loop *l, int cap)
{
    if (!l->heap_len)
        return cap;
    uint64_t now = ev_now_us();
    uint64_t due = l->heap[0]->due_us;
    if (due <= now)
        return 0;
    uint64_t ms = (due - now + 999u) / 1000u;
    if (cap >= 0 && ms > (uint64_t)cap)
        return cap;
    return ms > 1000000 ? 1000000 : (int)ms;
}

/* ---- signals ---- */

static void on_sigfd(ev_loop *l, int fd, unsigned events, void *data)
{
    (void)events;
    (void)data;
    struct signalfd_siginfo si;
    while (read(fd, &si, sizeof si) == (ssize_t)sizeof si) {
        for (size_t i = 0; i < l->nsigs; i++)
            if (l->sigs[i].signum == (int)si.ssi_signo)
                l->sigs[i].cb(l, (int)si.ssi_signo, l->sigs[i].data);
    }
}

int ev_signal(ev_loop *l, int signum, ev_signal_cb cb, void *data)
{
    if (l->nsigs == sizeof l->sigs / sizeof l->sigs[0]) {
        errno = ENOSPC;
        return -1;
    }
    sigaddset(&l->sigmask, signum);
    if (sigprocmask(SIG_BLOCK, &l->sigmask, NULL) < 0)
        return -1;
    int fd = signalfd(l->sigfd, &l->sigmask, SFD_NONBLOCK | SFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (l->sigfd < 0) {
        l->sigfd = fd;
        if (ev_fd_set(l, fd, EV_READ, on_sigfd, NULL) < 0)
            return -1;
    }
    l->sigs[l->nsigs].signum = signum;
    l->sigs[l->nsigs].cb = cb;
    l->sigs[l->nsigs].data = data;
    l->nsigs++;
    return 0;
}

/* ---- running ---- */

int ev_run_once(ev_loop *l, int timeout_ms)
{
    struct epoll_event evs[256];
    int n = epoll_wait(l->epfd, evs, 256, next_timeout_ms(l, timeout_ms));
    if (n < 0) {
        if (errno != EINTR)
            return -1;
        n = 0;
    }
    for (int i = 0; i < n && !l->stop; i++) {
        int fd = evs[i].data.fd;
        if ((size_t)fd >= l->nfds || !l->fds[fd].events)
            continue; /* removed by an earlier callback of this batch */
        unsigned e = 0;
        if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLRDHUP))
            e |= EV_READ;
        if (evs[i].events & EPOLLOUT)
            e |= EV_WRITE;
        if (evs[i].events & (EPOLLERR | EPOLLHUP))
            e |= EV_ERROR | (l->fds[fd].events & (EV_READ | EV_WRITE));
        fd_watch w = l->fds[fd];
        w.cb(l, fd, e, w.data);
    }
    if (!l->stop)
        run_timers(l);
    return 0;
}

int ev_run(ev_loop *l)
{
    int rc = 0;
    while (!l->stop && rc == 0)
        rc = ev_run_once(l, -1);
    l->stop = 0; /* a stop asked before ev_run() is honoured, then cleared */
    return rc;
}

void ev_stop(ev_loop *l)
{
    l->stop = 1;
}

int ev_stopped(const ev_loop *l)
{
    return l->stop;
}
