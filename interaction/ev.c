/* ev: epoll event loop with a binary heap of monotonic timers and signalfd. */
#include "ev.h"

#include <errno.h>
#include <stdbool.h>
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

/* A timer lives in a slot of one array; the heap holds slot indices. The
 * handle given out is the slot's index and generation (see ev.h), so a
 * handle kept past its timer's end names nothing: the generation moves on
 * when the slot is freed. */
typedef struct {
    uint64_t due_us;
    uint64_t seq;      /* FIFO among equal deadlines */
    size_t heap_index;
    ev_timer_cb cb;
    void *data;
    uint32_t gen;      /* odd while in use */
    uint32_t next_free;
} timer_slot;

typedef struct {
    int signum;
    ev_signal_cb cb;
    void *data;
} sig_watch;

struct ev_loop {
    int epfd;
    fd_watch *fds;
    size_t nfds;
    timer_slot *slots;
    uint32_t nslots, free_slot; /* free list through next_free; UINT32_MAX: none */
    uint32_t *heap;             /* slot indices */
    size_t heap_len, heap_cap;
    uint64_t seq;
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
    l->free_slot = UINT32_MAX;
    sigemptyset(&l->sigmask);
    return l;
}

void ev_loop_free(ev_loop *l)
{
    if (!l)
        return;
    free(l->heap);
    free(l->slots);
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

#define SLOT(l, i) (&(l)->slots[(l)->heap[i]])

static int timer_less(const ev_loop *l, size_t i, size_t j)
{
    const timer_slot *a = SLOT(l, i), *b = SLOT(l, j);
    return a->due_us < b->due_us || (a->due_us == b->due_us && a->seq < b->seq);
}

static void heap_swap(ev_loop *l, size_t i, size_t j)
{
    uint32_t t = l->heap[i];
    l->heap[i] = l->heap[j];
    l->heap[j] = t;
    SLOT(l, i)->heap_index = i;
    SLOT(l, j)->heap_index = j;
}

static void heap_up(ev_loop *l, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!timer_less(l, i, p))
            break;
        heap_swap(l, i, p);
        i = p;
    }
}

static void heap_down(ev_loop *l, size_t i)
{
    for (;;) {
        size_t a = 2 * i + 1, b = a + 1, m = i;
        if (a < l->heap_len && timer_less(l, a, m))
            m = a;
        if (b < l->heap_len && timer_less(l, b, m))
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
        SLOT(l, i)->heap_index = i;
        heap_down(l, i);
        heap_up(l, i);
    }
}

/* Slots are reused (most requests and tasks start a timer and stop it soon
 * after: no malloc per timer); the generation makes old handles stale. */
static void slot_release(ev_loop *l, uint32_t idx)
{
    timer_slot *t = &l->slots[idx];
    t->gen++; /* even: free */
    t->cb = NULL;
    t->data = NULL;
    t->next_free = l->free_slot;
    l->free_slot = idx;
}

static ev_timer *handle_of(const ev_loop *l, uint32_t idx)
{
    /* the handle is an id (ev.h), never dereferenced */
    return (ev_timer *)(uintptr_t)(((uint64_t)l->slots[idx].gen << 32) | ((uint64_t)idx + 1)); // NOLINT(performance-no-int-to-ptr)
}

/* The slot a handle names, or UINT32_MAX if it names no running timer. */
static uint32_t slot_of(const ev_loop *l, const ev_timer *h)
{
    uint64_t v = (uint64_t)(uintptr_t)h;
    uint64_t idx = (v & 0xffffffffu) - 1;
    uint32_t gen = (uint32_t)(v >> 32);
    if (!h || idx >= l->nslots || l->slots[idx].gen != gen || !(gen & 1u))
        return UINT32_MAX;
    return (uint32_t)idx;
}

ev_timer *ev_timer_start(ev_loop *l, uint64_t delay_ms, ev_timer_cb cb, void *data)
{
    uint32_t idx = l->free_slot;
    if (idx != UINT32_MAX) {
        l->free_slot = l->slots[idx].next_free;
    } else {
        if (l->nslots == UINT32_MAX - 1)
            abort(); /* four billion timers at once */
        idx = l->nslots++;
        l->slots = xrealloc(l->slots, (size_t)l->nslots * sizeof *l->slots);
        l->slots[idx] = (timer_slot){0};
    }
    timer_slot *t = &l->slots[idx];
    t->gen++; /* odd: in use */
    t->due_us = ev_now_us() + delay_ms * 1000u;
    t->seq = l->seq++;
    t->cb = cb;
    t->data = data;
    if (l->heap_len == l->heap_cap) {
        l->heap_cap = l->heap_cap ? l->heap_cap * 2 : 64;
        l->heap = xrealloc(l->heap, l->heap_cap * sizeof *l->heap);
    }
    t->heap_index = l->heap_len;
    l->heap[l->heap_len++] = idx;
    heap_up(l, t->heap_index);
    return handle_of(l, idx);
}

void ev_timer_stop(ev_loop *l, ev_timer *h)
{
    uint32_t idx = slot_of(l, h);
    if (idx == UINT32_MAX)
        return;
    heap_remove(l, l->slots[idx].heap_index);
    slot_release(l, idx);
}

bool ev_timer_active(const ev_loop *l, const ev_timer *h) { return slot_of(l, h) != UINT32_MAX; }

/* Runs every timer that is due; timers added meanwhile with a zero delay run
 * on the next pass, so a timer that re-arms itself cannot starve I/O. */
static void run_timers(ev_loop *l)
{
    uint64_t now = ev_now_us();
    uint64_t limit = l->seq;
    while (l->heap_len && SLOT(l, 0)->due_us <= now && SLOT(l, 0)->seq < limit && !l->stop) {
        uint32_t idx = l->heap[0];
        heap_remove(l, 0);
        ev_timer_cb cb = l->slots[idx].cb;
        void *data = l->slots[idx].data;
        slot_release(l, idx);
        cb(l, data);
    }
}

static int next_timeout_ms(ev_loop *l, int cap)
{
    if (!l->heap_len)
        return cap;
    uint64_t now = ev_now_us();
    uint64_t due = SLOT(l, 0)->due_us;
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
