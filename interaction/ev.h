/* ev: a single-threaded epoll event loop with fd watchers, monotonic timers
 * and signals.
 *
 * Ownership: the loop owns its timer records. An ev_timer * is a handle, not
 * a pointer (never dereference it): an id made of a slot and a generation.
 * It names its timer from ev_timer_start() until the callback starts or
 * ev_timer_stop() returns; after that it names nothing, even when its slot
 * is reused, so stopping a stale handle is a harmless no-op (it can never
 * stop another module's timer). NULL is never a handle. Watched fds stay
 * owned by the caller.
 * Threading: one loop per thread; no call is thread-safe. Callbacks run inside
 * ev_run()/ev_run_once() on the loop's thread and may add or remove watchers
 * and timers (including their own). */
#ifndef EV_H
#define EV_H

#include <stdbool.h>
#include <stdint.h>

typedef struct ev_loop ev_loop;
typedef struct ev_timer ev_timer;

enum { EV_READ = 1u, EV_WRITE = 2u, EV_ERROR = 4u };

typedef void (*ev_fd_cb)(ev_loop *loop, int fd, unsigned events, void *data);
typedef void (*ev_timer_cb)(ev_loop *loop, void *data);
typedef void (*ev_signal_cb)(ev_loop *loop, int signum, void *data);

/* Monotonic clock in milliseconds / microseconds (CLOCK_MONOTONIC). */
uint64_t ev_now_ms(void);
uint64_t ev_now_us(void);

/* NULL on failure (errno set). */
ev_loop *ev_loop_new(void);
/* Frees the loop and all pending timers (their callbacks are not called). */
void ev_loop_free(ev_loop *loop);

/* Watch fd for EV_READ/EV_WRITE. ev_fd_set() adds or modifies; events == 0
 * removes the watcher. Returns 0 or -1 (errno set). */
int ev_fd_set(ev_loop *loop, int fd, unsigned events, ev_fd_cb cb, void *data);
int ev_fd_del(ev_loop *loop, int fd);

/* One-shot timer after delay_ms. Never NULL (aborts on out of memory). */
ev_timer *ev_timer_start(ev_loop *loop, uint64_t delay_ms, ev_timer_cb cb, void *data);
/* Cancels a timer that has not fired yet; a NULL or stale handle is ignored. */
void ev_timer_stop(ev_loop *loop, ev_timer *t);
/* Whether the handle names a timer that has not fired or been stopped. */
bool ev_timer_active(const ev_loop *loop, const ev_timer *t);

/* Delivers signum through the loop (signalfd); blocks the signal in the
 * calling thread. Returns 0 or -1. One callback per signal. A child forked
 * afterwards inherits the blocked mask: unblock (sigprocmask) before exec. */
int ev_signal(ev_loop *loop, int signum, ev_signal_cb cb, void *data);

/* Runs until ev_stop() is called (also before the call), then clears the
 * stop. Returns 0, or -1 if epoll failed. */
int ev_run(ev_loop *loop);
/* Waits at most timeout_ms (-1: until something happens) and dispatches what
 * is ready, once. Returns 0 or -1. */
int ev_run_once(ev_loop *loop, int timeout_ms);
void ev_stop(ev_loop *loop);
int ev_stopped(const ev_loop *loop);

#endif
