/* sc_profile: how to run the aggregator under test (run_scenarios
 * --aggregator-profile FILE; docs/scenarios.md, "Aggregator profiles"): its
 * command line and environment with placeholders, a config file in
 * DI-engine's shape, how its readiness is known, and what it offers beyond
 * the protocol. No profile (NULL) is the built-in one: this project's
 * aggregator with its own flags, events and /metrics.
 *
 * Placeholders, written {name}: aggregator (our aggregator's path),
 * profile_dir, run_dir, config (the written config file), slave_port,
 * master_port, metrics_port, operator_port, namespace, pod_name, time_scale,
 * heartbeat_span_ms, heartbeat_tolerance_ms, max_retry_ms,
 * retry_interval_ms, sync_period_ms, task_deadline_ms, env:NAME; and
 * learners: in the command, an argument that is exactly "{learners}" becomes
 * one ID=HOST:PORT argument per learner; in the config, a value that is
 * exactly "{learners}" becomes DI-engine's {"ID": ["ID", "HOST", PORT]}.
 * A config value that is exactly one numeric placeholder becomes a number.
 *
 * Ownership: a profile owns everything in it (sc_profile_free); the
 * expansions return strings the caller owns. Threading: pure. */
#ifndef SC_PROFILE_H
#define SC_PROFILE_H

#include <stdbool.h>
#include <stddef.h>

#include "cJSON.h"

typedef enum { SC_READY_LINE = 0, SC_READY_SLAVE_PORT } sc_ready_kind;

typedef struct sc_profile {
    char *name;
    char *path; /* the profile file */
    char *dir;  /* its folder ({profile_dir}) */
    char *description;
    char **command;       /* argv templates, NULL-terminated */
    cJSON *config;        /* config template, or NULL: no config file */
    char **env;           /* "NAME=template", NULL-terminated */
    char **k8s_env;       /* Kubernetes mode: "NAME=template" */
    char **requires_env;  /* variables that must be set to run it */
    sc_ready_kind ready;  /* a {"ready"...} line on stdout, or the slave port
                             answers HTTP */
    bool metrics;         /* offers our /metrics on {metrics_port} */
    bool events;          /* offers our aggregator's log events (joins,
                             "logs" expectations and actions on its lines);
                             without it that log is not read */
    bool close_task;      /* serves learner_close_task */
    bool fixed_timings;   /* "timings": "fixed": it takes none of the
                             scenario's timings (DI-engine's are built in),
                             so the coordinator runs at time scale 1 toward
                             it: its heartbeat tolerance then matches */
} sc_profile;

/* The values of the placeholders for one run. */
typedef struct {
    const char *aggregator, *run_dir, *config, *namespace_, *pod_name;
    int slave_port, master_port, metrics_port, operator_port;
    double time_scale;
    long heartbeat_span_ms, heartbeat_tolerance_ms, max_retry_ms, retry_interval_ms, sync_period_ms,
        task_deadline_ms;
    size_t nlearners;
    char **learner_ids; /* [nlearners] */
    char **learner_hosts;
    int *learner_ports;
} sc_profile_vars;

/* Reads and validates FILE: 0, or -1 with "FILE:LINE: message" in err
 * (unknown keys and placeholders with a did-you-mean). */
int sc_profile_load(const char *path, sc_profile **out, char *err, size_t errlen);
void sc_profile_free(sc_profile *p);
/* NULL if every variable of requires_env is set, else why not (static). */
const char *sc_profile_missing_env(const sc_profile *p);

char **sc_profile_argv(const sc_profile *p, const sc_profile_vars *v);
/* The config file's text, or NULL when the profile has no config. */
char *sc_profile_config_text(const sc_profile *p, const sc_profile_vars *v);
/* env, and k8s_env when k8s: "NAME=value" strings. */
char **sc_profile_env(const sc_profile *p, const sc_profile_vars *v, bool k8s);

#endif
