/* agg_config: the aggregator's configuration, from a DI-engine style JSON
 * file (--config), command-line flags (which override the file) and the
 * Kubernetes environment variables, validated with messages that name the
 * field or flag and what is wrong.
 *
 * Ownership: agg_config owns every string and array in it; free with
 * agg_config_free(). Threading: start-up only. */
#ifndef AGG_CONFIG_H
#define AGG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "ilog.h"

typedef struct {
    char *id;
    char *host;
    int port;
} agg_learner_cfg;

typedef struct {
    char *slave_host;  /* towards the coordinator (default 127.0.0.1) */
    int slave_port;    /* default: AGGREGATOR_PORT or 22272; 0 = free */
    char *master_host; /* towards the learners */
    int master_port;   /* default slave_port + 1 (0 if slave_port is 0) */
    char *advertise;   /* URL learners use to reach the master, or NULL */
    agg_learner_cfg *learners;
    size_t nlearners;
    int channel;
    double time_scale; /* multiplies every default timing below */
    long max_retry_ms;           /* 60000: window to join a learner */
    long retry_interval_ms;      /* 2000: between join attempts */
    long heartbeat_span_ms;      /* 3000: our heartbeats to the coordinator */
    long heartbeat_tolerance_ms; /* 17000: learners' heartbeats */
    long heartbeat_check_ms;     /* 1000 */
    long task_deadline_ms;       /* 300000: a learner's task */
    long sync_period_ms;         /* 3000: operator sync */
    long operator_timeout_ms;    /* 5000: one operator request */
    long request_retry_wait_ms;  /* 1000: connection-level retry wait */
    int request_retries;         /* 5 */
    int metrics_port;            /* -1: /metrics on the master port */
    size_t body_limit;           /* 256 MiB */
    struct slave_allow *allow_master; /* --allow-master; NULL: anyone (slave.h) */
    ilog_level log_level;
    ilog_format log_format;
    char *events_path;       /* --events FILE: typed events (docs/events.md), or NULL */
    size_t events_max_bytes; /* cap on FILE + FILE.1 (64 MiB) */
    long events_flush_ms;    /* pending events written within this (1000) */
    bool events_each_line;   /* write every event at once (for a runner) */
    /* Kubernetes mode: k8s_url != NULL */
    char *k8s_url;       /* normalised "http://host:port" */
    char *k8s_namespace; /* default "default" */
    char *k8s_name;      /* default "dijob-example-coordinator" */
    char *k8s_api;       /* default "/v1alpha1" */
    /* In a pod that DI-orchestrator made (KUBERNETES_SERVER_URL,
     * KUBERNETES_POD_NAME, KUBERNETES_POD_NAMESPACE and AGGREGATOR_PORT set):
     * hosts not given default to 0.0.0.0 and, when the learner side's host,
     * port 0 or --advertise are not given, the advertised address to
     * http://<KUBERNETES_AGGREGATOR_URL's host, else POD_NAME.NAMESPACE>:<master port>. */
    bool orchestrator_pod;
} agg_config;

typedef enum { AGG_CONFIG_OK = 0, AGG_CONFIG_EXIT = 1, AGG_CONFIG_ERROR = -1 } agg_config_status;

/* Parses argv and the environment (getenv). AGG_CONFIG_EXIT: --help or
 * --version was printed to stdout. AGG_CONFIG_ERROR: err says what is wrong
 * (exit 2). */
agg_config_status agg_config_from_args(agg_config *cfg, int argc, char **argv, char *err, size_t errlen);

/* Reads a DI-engine config file into cfg (fields it gives only). */
int agg_config_read_file(agg_config *cfg, const char *path, char *err, size_t errlen);
/* Parses JSON config text; `where` names the source in messages. */
int agg_config_parse_json(agg_config *cfg, const char *text, size_t len, const char *where, char *err,
                          size_t errlen);

void agg_config_defaults(agg_config *cfg);
void agg_config_free(agg_config *cfg);
/* Adds a learner; -1 with err if the id is taken. */
int agg_config_add_learner(agg_config *cfg, const char *id, const char *host, int port, char *err,
                           size_t errlen);

#endif
