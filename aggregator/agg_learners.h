/* agg_learners: the learner registry: every learner the aggregator knows
 * (configured or listed by the operator), its join state, and the one
 * function that changes that state (learner_set_state in agg_learners.c),
 * which also logs the transition, emits its event (docs/events.md) and
 * tells the core.
 *
 *   JOINING --/connect accepted----> JOINED   learner_joined (first time)
 *   FAILED  --/connect accepted----> JOINED   learner_retaken
 *   JOINING --max_retry passed-----> FAILED   learner_join_failed (still retried)
 *   JOINED  --master: conn lost----> JOINING  learner_left (the window restarts)
 *   JOINED  --shutdown-------------> STOPPED  learner_left
 *   any     --removed--------------> (freed)  learner_removed
 *
 * A JOINING learner that had joined before is retaken on its next join
 * (learner_retaken). Liveness is master's alone: a learner is JOINED exactly
 * while its master_conn is connected; the registry follows master's
 * callbacks (the /connect outcome, on_lost) and keeps no heartbeat state.
 * A failed /connect does not change the state: its reason is logged at info
 * and emitted (learner_connect_error) the first time and whenever it
 * changes, and the last one is given with "did not join".
 *
 * Ownership: the registry owns its learners; a learner * is valid until
 * agg_learners_remove() or agg_learners_free(). Threading: the loop's
 * thread only. */
#ifndef AGG_LEARNERS_H
#define AGG_LEARNERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ev.h"
#include "evt.h"
#include "master.h"

typedef enum { LS_JOINING, LS_JOINED, LS_FAILED, LS_STOPPED, LS_NSTATES } learner_state;

typedef struct learner {
    struct agg_learners *reg;
    char *id;             /* the aggregator's name for it (events' "learner") */
    char *host;
    int port;
    char *addr;           /* "host:port" */
    learner_state state;  /* changed only by learner_set_state */
    bool ever_joined;
    master_conn *conn;    /* a /connect in flight (JOINING, FAILED) or the connection (JOINED) */
    ev_timer *retry;      /* the next /connect attempt */
    uint64_t window_start;/* ms: the join window (or absence) began */
    long attempts;        /* /connect attempts in this window */
    char *last_reason;    /* why the last /connect failed, or NULL */
    evt_cause last_cause; /* the same as a word */
    long last_http_status;/* of a /connect answered with an error */
} learner;

typedef struct agg_learners agg_learners;

/* Called after every state change (from: the state before). */
typedef void (*agg_learners_changed_cb)(void *ud, learner *l, learner_state from);

typedef struct {
    long max_retry_ms;
    long retry_interval_ms;
    bool no_retake; /* planted bug: a learner that left is not retried */
} agg_learners_config;

agg_learners *agg_learners_new(ev_loop *loop, const agg_learners_config *cfg, agg_learners_changed_cb changed,
                               void *ud);
/* The master the learners are connected through; set before adding any. */
void agg_learners_set_master(agg_learners *r, master *m);
/* Frees every learner (no events, nothing sent). */
void agg_learners_free(agg_learners *r);

/* Adds a learner in JOINING and starts its first /connect. */
learner *agg_learners_add(agg_learners *r, const char *id, const char *host, int port);
/* Disconnects it (if connected), emits learner_removed and frees it. */
void agg_learners_remove(agg_learners *r, learner *l, const char *why);
learner *agg_learners_find(const agg_learners *r, const char *id);
size_t agg_learners_count(const agg_learners *r);
learner *agg_learners_at(const agg_learners *r, size_t i);
size_t agg_learners_world(const agg_learners *r);        /* JOINED */
size_t agg_learners_in_state(const agg_learners *r, learner_state s);
const char *agg_learner_state_name(learner_state s);

/* master's on_lost callback for the aggregator's learner connections. */
void agg_learners_conn_lost(agg_learners *r, master_conn *c, const char *why);
/* Judges every join window now (at the end of start-up): a JOINING learner
 * whose window is over becomes FAILED. */
void agg_learners_judge_windows(agg_learners *r);
/* Shutdown: no more attempts; JOINED learners are disconnected (STOPPED). */
void agg_learners_stop(agg_learners *r);

#endif
