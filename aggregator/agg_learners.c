/* agg_learners: the learner registry and its state machine (see the .h). */
#include "agg_learners.h"

#include <stdlib.h>
#include <string.h>

#include "evt.h"
#include "ilog.h"
#include "xalloc.h"

struct agg_learners {
    ev_loop *loop;
    master *master;
    agg_learners_config cfg;
    agg_learners_changed_cb changed;
    void *ud;
    learner **v;
    size_t n, cap;
    bool stopping;
};

static const char *const state_names[] = {"joining", "joined", "failed", "stopped"};

const char *agg_learner_state_name(learner_state s)
{
    return (unsigned)s < sizeof state_names / sizeof state_names[0] ? state_names[s] : "?";
}

static int64_t window_ms(const learner *l)
{
    return (int64_t)(ev_now_ms() - l->window_start);
}

/* The one place where a learner's state changes: the log line, the event,
 * and the core's callback. reason: why (left, failed, stopped), or NULL. */
static void learner_set_state(learner *l, learner_state to, const char *reason, evt_cause cause)
{
    agg_learners *r = l->reg;
    learner_state from = l->state;
    bool retaken = to == LS_JOINED && l->ever_joined;
    l->state = to;
    int64_t after = window_ms(l);
    int64_t world = (int64_t)agg_learners_world(r);
    LOG_DEBUG(l->id, "state %s -> %s", agg_learner_state_name(from), agg_learner_state_name(to));
    switch (to) {
    case LS_JOINED:
        if (retaken || from == LS_FAILED) {
            LOG_INFO(l->id, "learner joined again (%s) after %lld ms, %ld attempts; world size %lld", l->addr,
                     (long long)after, l->attempts, (long long)world);
            EVT_EMIT(learner_retaken, .learner = l->id, .addr = l->addr, .world = world, .attempts = l->attempts,
                     .after_ms = after);
        } else {
            LOG_INFO(l->id, "learner joined (%s); world size %lld", l->addr, (long long)world);
            EVT_EMIT(learner_joined, .learner = l->id, .addr = l->addr, .world = world, .attempts = l->attempts,
                     .after_ms = after);
        }
        l->rejoined = retaken;
        l->ever_joined = true;
        free(l->last_reason);
        l->last_reason = NULL;
        break;
    case LS_FAILED:
        LOG_ERROR(l->id,
                  "learner did not join within max_retry of %ld ms (%ld attempts): %s; recorded as failed, still "
                  "retried every %ld ms",
                  r->cfg.max_retry_ms, l->attempts, reason ? reason : "no answer yet", r->cfg.retry_interval_ms);
        EVT_EMIT(learner_join_failed, .learner = l->id, .addr = l->addr, .reason = reason,
                 .cause = evt_cause_name(cause), .attempts = l->attempts, .after_ms = after);
        break;
    case LS_JOINING:
    case LS_STOPPED:
    case LS_NSTATES:
        if (from == LS_JOINED) {
            if (to == LS_JOINING)
                LOG_WARN(l->id, "learner left the world (%s); world size %lld; retrying every %ld ms", reason,
                         (long long)world, r->cfg.retry_interval_ms);
            else
                LOG_INFO(l->id, "learner left the world (%s); world size %lld", reason, (long long)world);
            EVT_EMIT(learner_left, .learner = l->id, .addr = l->addr, .reason = reason, .cause = evt_cause_name(cause),
                     .world = world);
        }
        break;
    }
    if (r->changed)
        r->changed(r->ud, l, from);
}

/* ---- join attempts ---- */

static void learner_try(learner *l);

static void on_retry_timer(ev_loop *loop, void *data)
{
    (void)loop;
    learner *l = data;
    l->retry = NULL;
    learner_try(l);
}

static void schedule_retry(learner *l)
{
    agg_learners *r = l->reg;
    if (r->stopping || ev_timer_active(r->loop, l->retry))
        return;
    l->retry = ev_timer_start(r->loop, (uint64_t)r->cfg.retry_interval_ms, on_retry_timer, l);
}

/* A JOINING learner whose window is over becomes FAILED (once a window). */
static void judge_window(learner *l)
{
    if (l->state == LS_JOINING && window_ms(l) >= l->reg->cfg.max_retry_ms)
        learner_set_state(l, LS_FAILED, l->last_reason, l->last_cause);
}

/* True when a and b differ at most in their runs of digits: libcurl's
 * words carry timings ("Failed to connect to ... after 76 ms"), which are
 * not a new reason. */
static bool same_reason(const char *a, const char *b)
{
    for (;;) {
        bool da = *a >= '0' && *a <= '9', db = *b >= '0' && *b <= '9';
        if (da && db) {
            while (*a >= '0' && *a <= '9')
                a++;
            while (*b >= '0' && *b <= '9')
                b++;
            continue;
        }
        if (*a != *b)
            return false;
        if (!*a)
            return true;
        a++;
        b++;
    }
}

/* A failed attempt: not a state change; logged at info and emitted the
 * first time and whenever the reason changes (numbers aside). */
static void connect_failed(learner *l, const char *why, evt_cause cause, long http_status)
{
    l->last_cause = cause;
    l->last_http_status = http_status;
    if (!l->last_reason || !same_reason(l->last_reason, why)) {
        LOG_INFO(l->id, "cannot join yet (attempt %ld, %lld ms into the window): %s", l->attempts,
                 (long long)window_ms(l), why);
        EVT_EMIT(learner_connect_error, .learner = l->id, .addr = l->addr, .reason = why,
                 .cause = evt_cause_name(cause), .http_status = http_status, .attempts = l->attempts,
                 .after_ms = window_ms(l));
        free(l->last_reason);
        l->last_reason = xstrdup(why);
    } else {
        LOG_DEBUG(l->id, "join attempt %ld failed: %s", l->attempts, why);
    }
    judge_window(l);
}

static void on_connected(void *ud, master_conn *c, bool ok, const char *error)
{
    learner *l = ud;
    if (ok && l->reg->stopping) {
        /* a /connect that was in flight when the shutdown began */
        l->conn = NULL;
        master_disconnect(c, "the aggregator is shutting down");
        return;
    }
    if (ok) {
        l->conn = c;
        master_conn_set_ud(c, l);
        learner_set_state(l, LS_JOINED, NULL, EVT_CAUSE_other);
        return;
    }
    l->conn = NULL;
    connect_failed(l, error ? error : "the /connect failed", master_conn_cause(c), master_conn_http_status(c));
    schedule_retry(l);
}

static void learner_try(learner *l)
{
    agg_learners *r = l->reg;
    char err[256];
    if (r->stopping)
        return;
    l->attempts++;
    l->conn = master_connect(r->master, l->id, l->host, l->port, NULL, on_connected, l, err, sizeof err);
    if (!l->conn) {
        char *why = xasprintf("cannot start connecting: %s", err);
        connect_failed(l, why, EVT_CAUSE_unreachable, 0);
        free(why);
        schedule_retry(l);
    }
}

void agg_learners_conn_lost(agg_learners *r, master_conn *c, const char *why)
{
    learner *l = master_conn_ud(c);
    if (!l || l->conn != c)
        return;
    l->conn = NULL;
    l->window_start = ev_now_ms();
    l->attempts = 0;
    learner_set_state(l, LS_JOINING, why, master_conn_cause(c));
#ifdef DILEARN_PLANT_BUGS
    if (r->cfg.no_retake)
        return;
#endif
    schedule_retry(l);
}

void agg_learners_judge_windows(agg_learners *r)
{
    for (size_t i = 0; i < r->n; i++)
        judge_window(r->v[i]);
}

/* ---- the registry ---- */

agg_learners *agg_learners_new(ev_loop *loop, const agg_learners_config *cfg, agg_learners_changed_cb changed,
                               void *ud)
{
    agg_learners *r = xcalloc(1, sizeof *r);
    r->loop = loop;
    r->cfg = *cfg;
    r->changed = changed;
    r->ud = ud;
    return r;
}

void agg_learners_set_master(agg_learners *r, master *m)
{
    r->master = m;
}

static void learner_free(agg_learners *r, learner *l)
{
    ev_timer_stop(r->loop, l->retry);
    free(l->id);
    free(l->host);
    free(l->addr);
    free(l->last_reason);
    free(l);
}

void agg_learners_free(agg_learners *r)
{
    if (!r)
        return;
    for (size_t i = 0; i < r->n; i++)
        learner_free(r, r->v[i]);
    free(r->v);
    free(r);
}

learner *agg_learners_add(agg_learners *r, const char *id, const char *host, int port)
{
    learner *l = xcalloc(1, sizeof *l);
    l->last_cause = EVT_CAUSE_other;
    l->reg = r;
    l->id = xstrdup(id);
    l->host = xstrdup(host);
    l->port = port;
    l->addr = xasprintf(strchr(host, ':') ? "[%s]:%d" : "%s:%d", host, port);
    l->state = LS_JOINING;
    l->window_start = ev_now_ms();
    if (r->n == r->cap) {
        r->cap = r->cap ? r->cap * 2 : 16;
        r->v = xrealloc(r->v, r->cap * sizeof *r->v);
    }
    r->v[r->n++] = l;
    learner_try(l);
    return l;
}

void agg_learners_remove(agg_learners *r, learner *l, const char *why)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->v[i] == l) {
            memmove(r->v + i, r->v + i + 1, (r->n - i - 1) * sizeof *r->v);
            r->n--;
            break;
        }
    master_conn *c = l->conn;
    l->conn = NULL;
    if (c && master_conn_ready(c))
        master_disconnect(c, why);
    else if (c)
        master_drop(c, why); /* a /connect in flight */
    LOG_INFO(l->id, "learner removed: %s", why);
    EVT_EMIT(learner_removed, .learner = l->id, .addr = l->addr, .reason = why, .cause = evt_cause_name(EVT_CAUSE_operator),
             .world = (int64_t)agg_learners_world(r));
    learner_free(r, l);
}

learner *agg_learners_find(const agg_learners *r, const char *id)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->v[i]->id, id) == 0)
            return r->v[i];
    return NULL;
}

size_t agg_learners_count(const agg_learners *r)
{
    return r->n;
}

learner *agg_learners_at(const agg_learners *r, size_t i)
{
    return i < r->n ? r->v[i] : NULL;
}

size_t agg_learners_in_state(const agg_learners *r, learner_state s)
{
    size_t k = 0;
    for (size_t i = 0; i < r->n; i++)
        k += r->v[i]->state == s;
    return k;
}

size_t agg_learners_world(const agg_learners *r)
{
    return agg_learners_in_state(r, LS_JOINED);
}

void agg_learners_stop(agg_learners *r)
{
    r->stopping = true;
    for (size_t i = 0; i < r->n; i++) {
        learner *l = r->v[i];
        ev_timer_stop(r->loop, l->retry);
        l->retry = NULL;
        if (l->state == LS_JOINED) {
            master_conn *c = l->conn;
            l->conn = NULL;
            master_disconnect(c, "the aggregator is shutting down");
            learner_set_state(l, LS_STOPPED, "the aggregator is shutting down", EVT_CAUSE_shutdown);
        }
    }
}
