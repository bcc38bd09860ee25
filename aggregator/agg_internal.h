/* agg_internal: the aggregator's shared state, for its own modules only
 * (agg_core.c, agg_k8s.c). Not an API. */
#ifndef AGG_INTERNAL_H
#define AGG_INTERNAL_H

#include "agg.h"
#include "agg_metrics.h"
#include "hc.h"
#include "hs.h"
#include "master.h"
#include "slave.h"

typedef enum { L_WAITING, L_CONNECTING, L_CONNECTED } learner_state;

typedef struct learner {
    struct agg *a;
    char *id;
    char *host;
    int port;
    learner_state state;
    bool failed;            /* did not join within max_retry (this window) */
    bool reported;          /* failure sent to the operator (k8s) */
    uint64_t window_start;  /* ms: start of the current join window */
    master_conn *conn;
    ev_timer *retry;
    bool plant_lost, plant_retaken; /* planted bugs only: lost once; taken back since */
} learner;

struct job;

struct agg {
    ev_loop *loop;
    agg_config cfg; /* owned copy of the scalar settings; strings borrowed
                       from the caller's config, which outlives agg */
    slave *slave;
    master *master;
    hs_server *metrics_http;
    hc_client *client; /* operator requests */
    agg_metrics *metrics;
    learner **learners;
    size_t nlearners, caplearners;
    agg_ready_cb ready_cb;
    void *ready_ud;
    bool ready;
    ev_timer *ready_timer;
    uint64_t start_ms;
    /* demands of the last get-data, in learner order */
    char **demand_ids;
    size_t *demands;
    size_t ndemands;
    bool have_demands;
    struct job *job;        /* the coordinator task being worked on */
    char *queued_id;        /* a task that arrived while an abandoned job drained */
    cJSON *queued_data;
    bool stopping;
    agg_done_cb done_cb;
    void *done_ud;
    ev_timer *grace_timer;
    ev_timer *drain_timer;
    ev_timer *trim_timer;   /* gives freed memory back when idle */
    /* Kubernetes mode */
    bool k8s;
    bool k8s_synced;
    ev_timer *sync_timer;
    hc_req *sync_req;
    int plant; /* planted bug (tests of the scenario library), 0: none */
};

enum {
    PLANT_NONE = 0,
    PLANT_MERGE_DROPS_KEY,
    PLANT_SPLIT_OFF_BY_ONE,
    PLANT_NO_DEADLINE,
    PLANT_NO_RETAKE,
    PLANT_RETAKE_FORGETS_DEMAND, /* a learner taken back loses its get-data demand: its slice goes to nobody */
    PLANT_RETAKE_STALLS_TASK,    /* a learner taken back mid-task is counted into that task, which never ends */
};

learner *agg_learner_find(struct agg *a, const char *id);
learner *agg_learner_add(struct agg *a, const char *id, const char *host, int port);
/* Disconnects (if connected) and forgets a learner. */
void agg_learner_remove(struct agg *a, learner *l, const char *why);
size_t agg_world_size(const struct agg *a);
void agg_check_ready(struct agg *a);

/* agg_k8s.c */
void agg_k8s_start(struct agg *a);
void agg_k8s_stop(struct agg *a);

/* One string of the "learners" list of an operator's GET /replicas reply:
 * addr as listed; host (heap) and port if it is "host:port", else host NULL. */
typedef struct {
    char *addr;
    char *host;
    int port;
} agg_k8s_entry;
/* Parses the reply to GET /replicas (pure: no I/O, no logging): 0 with the
 * list's strings in order (non-strings skipped; an absent or null list is
 * empty; free with agg_k8s_entries_free), or -1 with err saying why the
 * reply is unusable ("failed: ...", "answered HTTP 500 with an unusable
 * body (...)", "data has no \"learners\" list"). */
int agg_k8s_parse_replicas(const hc_result *res, agg_k8s_entry **entries, size_t *n, char *err, size_t errlen);
void agg_k8s_entries_free(agg_k8s_entry *entries, size_t n);

#endif
