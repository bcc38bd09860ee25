/* agg_config: configuration from file, flags and environment. */
#include "agg_config.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpos.h"
#include "jsonx.h"
#include "slave.h"
#include "suggest.h"
#include "xalloc.h"

#define MAX_CONFIG_BYTES (16u << 20)

void agg_config_defaults(agg_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->slave_port = -1; /* resolved after parsing */
    cfg->master_port = -1;
    cfg->time_scale = 1.0;
    cfg->max_retry_ms = -1;
    cfg->retry_interval_ms = -1;
    cfg->heartbeat_span_ms = -1;
    cfg->heartbeat_tolerance_ms = -1;
    cfg->heartbeat_check_ms = -1;
    cfg->task_deadline_ms = -1;
    cfg->sync_period_ms = -1;
    cfg->operator_timeout_ms = -1;
    cfg->request_retry_wait_ms = -1;
    cfg->request_retries = -1;
    cfg->metrics_port = -1;
    cfg->log_level = ILOG_INFO;
    cfg->log_format = ILOG_HUMAN;
    cfg->events_max_bytes = 64u << 20;
    cfg->events_flush_ms = 1000;
}

void agg_config_free(agg_config *cfg)
{
    free(cfg->slave_host);
    free(cfg->master_host);
    free(cfg->advertise);
    for (size_t i = 0; i < cfg->nlearners; i++) {
        free(cfg->learners[i].id);
        free(cfg->learners[i].host);
    }
    free(cfg->learners);
    free(cfg->k8s_url);
    free(cfg->k8s_namespace);
    free(cfg->k8s_name);
    free(cfg->k8s_api);
    free(cfg->events_path);
    slave_allow_free(cfg->allow_master);
    memset(cfg, 0, sizeof *cfg);
}

int agg_config_add_learner(agg_config *cfg, const char *id, const char *host, int port, char *err, size_t errlen)
{
    for (size_t i = 0; i < cfg->nlearners; i++)
        if (strcmp(cfg->learners[i].id, id) == 0) {
            snprintf(err, errlen, "learner id '%s' is given twice", id);
            return -1;
        }
    cfg->learners = xrealloc(cfg->learners, (cfg->nlearners + 1) * sizeof *cfg->learners);
    cfg->learners[cfg->nlearners].id = xstrdup(id);
    cfg->learners[cfg->nlearners].host = xstrdup(host);
    cfg->learners[cfg->nlearners].port = port;
    cfg->nlearners++;
    return 0;
}

static void set_str(char **dst, const char *v)
{
    free(*dst);
    *dst = xstrdup(v);
}

/* A port from JSON: integer or decimal string (DI-engine passes both). */
static int json_port(const cJSON *v, bool allow_zero, int *out)
{
    int64_t p;
    if (jsonx_get_i64(v, &p)) {
    } else if (cJSON_IsString(v)) {
        char *end;
        errno = 0;
        long l = strtol(v->valuestring, &end, 10);
        if (errno || end == v->valuestring || *end)
            return -1;
        p = l;
    } else {
        return -1;
    }
    if (p < (allow_zero ? 0 : 1) || p > 65535)
        return -1;
    *out = (int)p;
    return 0;
}

/* ---- the config file ---- */

/* Keys of the file. DI-engine's launcher also writes "node" and
 * "partition" (Slurm placement) into an aggregator's config: they are not
 * ours and are accepted and ignored. */
static const char *const top_keys[] = {"master", "slave", "learner", "node", "partition", NULL};
static const char *const endpoint_keys[] = {"host", "port", NULL};

/* Where the JSON text came from, for messages "where:line: ...". */
typedef struct {
    const char *text;
    size_t len;
    const char *where;
    jpos *pos;
    char *err;
    size_t errlen;
} jctx;

static void jerr(jctx *x, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void jerr(jctx *x, const char *path, const char *fmt, ...)
{
    if (!x->pos)
        x->pos = jpos_scan(x->text, x->len);
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(x->err, x->errlen, "%s:%d: %s", x->where, jpos_line(x->pos, path), msg);
}

/* An unknown key at path ("" for the top, else "master"...): the message
 * names it, the nearest known key and every known one. */
static void unknown_key(jctx *x, const char *path, const char *key, const char *const *known)
{
    char *full = path[0] ? xasprintf("%s.%s", path, key) : xstrdup(key);
    const char *near = suggest_nearest(key, known, (size_t)-1);
    xbuf k = {0};
    for (size_t i = 0; known[i]; i++)
        xbuf_printf(&k, "%s%s", i ? ", " : "", known[i]);
    char hint[160] = "";
    if (near)
        snprintf(hint, sizeof hint, " (did you mean \"%s%s%s\"?)", path, path[0] ? "." : "", near);
    jerr(x, full, "unknown field \"%.100s\"%s; known fields %s%s%s: %s", full, hint, path[0] ? "of \"" : "at the top",
         path, path[0] ? "\"" : "", k.data);
    xbuf_free(&k);
    free(full);
}

static bool known_key(const char *key, const char *const *known)
{
    for (size_t i = 0; known[i]; i++)
        if (strcmp(key, known[i]) == 0)
            return true;
    return false;
}

static int parse_endpoint(jctx *x, const cJSON *obj, const char *key, char **host, int *port)
{
    if (!cJSON_IsObject(obj)) {
        jerr(x, key, "field \"%s\" must be an object {\"host\": ..., \"port\": ...}, not a %s", key,
             jsonx_type_name(obj));
        return -1;
    }
    for (const cJSON *m = obj->child; m; m = m->next) {
        char path[64];
        snprintf(path, sizeof path, "%s.%.40s", key, m->string);
        if (strcmp(m->string, "host") == 0) {
            if (!cJSON_IsString(m) || !m->valuestring[0]) {
                jerr(x, path, "field \"%s.host\" must be a non-empty string", key);
                return -1;
            }
            set_str(host, m->valuestring);
        } else if (strcmp(m->string, "port") == 0) {
            if (json_port(m, true, port) < 0) {
                jerr(x, path, "field \"%s.port\" must be an integer from 0 to 65535", key);
                return -1;
            }
        } else {
            unknown_key(x, key, m->string, endpoint_keys);
            return -1;
        }
    }
    return 0;
}

static int parse_learners(jctx *x, agg_config *cfg, const cJSON *m)
{
    if (!cJSON_IsObject(m)) {
        jerr(x, "learner", "field \"learner\" must be an object of [id, host, port] lists, not a %s",
             jsonx_type_name(m));
        return -1;
    }
    /* The keys are the learners' names in DI-engine's config: any text. */
    for (const cJSON *l = m->child; l; l = l->next) {
        char *path = xasprintf("learner.%s", l->string);
        const cJSON *id = cJSON_GetArrayItem(l, 0), *host = cJSON_GetArrayItem(l, 1);
        const cJSON *port = cJSON_GetArrayItem(l, 2);
        int p, rc = -1;
        char e2[200];
        if (!cJSON_IsArray(l) || cJSON_GetArraySize(l) != 3)
            jerr(x, path, "field \"learner.%.100s\" must be a list [id, host, port]", l->string);
        else if (!cJSON_IsString(id) || !id->valuestring[0])
            jerr(x, path, "field \"learner.%.100s\"[0] (id) must be a non-empty string", l->string);
        else if (!cJSON_IsString(host) || !host->valuestring[0])
            jerr(x, path, "field \"learner.%.100s\"[1] (host) must be a non-empty string", l->string);
        else if (json_port(port, false, &p) < 0)
            jerr(x, path, "field \"learner.%.100s\"[2] (port) must be an integer from 1 to 65535", l->string);
        else if (agg_config_add_learner(cfg, id->valuestring, host->valuestring, p, e2, sizeof e2) < 0)
            jerr(x, path, "field \"learner.%.100s\": %s", l->string, e2);
        else
            rc = 0;
        free(path);
        if (rc < 0)
            return -1;
    }
    return 0;
}

int agg_config_parse_json(agg_config *cfg, const char *text, size_t len, const char *where, char *err, size_t errlen)
{
    char perr[200];
    cJSON *root = jsonx_parse(text, len, perr, sizeof perr);
    if (!root) {
        snprintf(err, errlen, "%s: not valid JSON: %s", where, perr);
        return -1;
    }
    jctx x = {text, len, where, NULL, err, errlen};
    int rc = -1;
    if (!cJSON_IsObject(root)) {
        jerr(&x, "", "the config must be a JSON object, not a %s", jsonx_type_name(root));
        goto out;
    }
    /* cJSON keeps both of two equal keys: the second would silently win or
     * add to the first. */
    x.pos = jpos_scan(text, len);
    if (jpos_dup_count(x.pos) > 0) {
        int first, line;
        const char *dp = jpos_dup(x.pos, 0, &first, &line);
        snprintf(err, errlen, "%s:%d: field \"%.200s\" is given twice (first at line %d)", where, line, dp, first);
        goto out;
    }
    for (const cJSON *m = root->child; m; m = m->next) {
        if (strcmp(m->string, "master") == 0) {
            if (parse_endpoint(&x, m, "master", &cfg->master_host, &cfg->master_port) < 0)
                goto out;
        } else if (strcmp(m->string, "slave") == 0) {
            if (parse_endpoint(&x, m, "slave", &cfg->slave_host, &cfg->slave_port) < 0)
                goto out;
        } else if (strcmp(m->string, "learner") == 0) {
            if (parse_learners(&x, cfg, m) < 0)
                goto out;
        } else if (!known_key(m->string, top_keys)) {
            unknown_key(&x, "", m->string, top_keys);
            goto out;
        }
    }
    rc = 0;
out:
    jpos_free(x.pos);
    cJSON_Delete(root);
    return rc;
}

int agg_config_read_file(agg_config *cfg, const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "--config %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    xbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + n > MAX_CONFIG_BYTES) {
            snprintf(err, errlen, "--config %s: file is larger than %u bytes", path, MAX_CONFIG_BYTES);
            fclose(f);
            xbuf_free(&b);
            return -1;
        }
        xbuf_append(&b, chunk, n);
    }
    int rd_err = ferror(f);
    fclose(f);
    if (rd_err) {
        snprintf(err, errlen, "--config %s: read error", path);
        xbuf_free(&b);
        return -1;
    }
    int rc = agg_config_parse_json(cfg, b.data ? b.data : "", b.len, path, err, errlen);
    xbuf_free(&b);
    return rc;
}

/* ---- flags ---- */

static int parse_long(const char *flag, const char *v, long min, long max, long *out, char *err, size_t errlen)
{
    char *end;
    errno = 0;
    long l = strtol(v, &end, 10);
    if (errno || end == v || *end || l < min || l > max) {
        snprintf(err, errlen, "%s: '%s' is not an integer from %ld to %ld", flag, v, min, max);
        return -1;
    }
    *out = l;
    return 0;
}

static int parse_host_port(const char *flag, const char *v, char **host, int *port, char *err, size_t errlen)
{
    const char *colon = strrchr(v, ':');
    if (!colon || colon == v) {
        snprintf(err, errlen, "%s: '%s' is not HOST:PORT", flag, v);
        return -1;
    }
    long p;
    if (parse_long(flag, colon + 1, 1, 65535, &p, err, errlen) < 0)
        return -1;
    const char *h = v;
    size_t hl = (size_t)(colon - v);
    if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    *host = xstrndup(h, hl);
    *port = (int)p;
    return 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: aggregator [options]\n"
            "A learner aggregator for DI-engine: towards the coordinator it is one learner\n"
            "whose resource is the sum of its learners; it splits each learn batch across\n"
            "them and merges their results (see docs/design.md).\n\n"
            "Options (flags override the config file):\n"
            "  --config FILE              DI-engine aggregator config (JSON): {\"master\": {\"host\",\n"
            "                             \"port\"}, \"slave\": {...}, \"learner\": {\"learner0\":\n"
            "                             [\"learner0\", \"127.0.0.1\", 19900], ...}}; DI-engine's\n"
            "                             \"node\" and \"partition\" are ignored, any other\n"
            "                             unknown or repeated key is an error (exit 2)\n"
            "  --slave-host H             address to listen on for the coordinator (127.0.0.1;\n"
            "                             0.0.0.0 in a DI-orchestrator pod, see below)\n"
            "  --slave-port P             port for the coordinator (AGGREGATOR_PORT or 22272; 0: free)\n"
            "  --master-host H            address to listen on for learners (127.0.0.1; 0.0.0.0\n"
            "                             in a DI-orchestrator pod)\n"
            "  --master-port P            port for learners' heartbeats/results (slave port + 1; 0: free)\n"
            "  --advertise URL            address sent to learners to reach the master\n"
            "                             (default http://MASTER_HOST:MASTER_PORT; in a\n"
            "                             DI-orchestrator pod http://POD_NAME.NAMESPACE:MASTER_PORT)\n"
            "  --learner ID=HOST:PORT     a learner to connect to (repeatable; after the file's)\n"
            "  --channel N                protocol channel (0)\n"
            "  --allow-master ADDR[/PREFIX],...\n"
            "                             who may connect as the coordinator (repeatable; IPv4\n"
            "                             and IPv6): a /connect from another address, or naming\n"
            "                             a master address (an IP literal) outside the list, is\n"
            "                             refused with 403 (code 503). Default: anyone, as in\n"
            "                             DI-engine, with a warning when --slave-host is not\n"
            "                             loopback\n"
            "  --max-retry-ms MS          window to join each learner (60000)\n"
            "  --retry-interval-ms MS     between join attempts (2000)\n"
            "  --heartbeat-span-ms MS     our heartbeats to the coordinator (3000)\n"
            "  --heartbeat-tolerance-ms MS  drop a learner silent this long (17000)\n"
            "  --heartbeat-check-ms MS    how often learners' heartbeats are checked (1000)\n"
            "  --task-deadline-ms MS      a learner's task fails after this (300000)\n"
            "  --sync-period-ms MS        Kubernetes mode: operator sync period (3000)\n"
            "  --operator-timeout-ms MS   Kubernetes mode: one operator request (5000; not scaled)\n"
            "  --request-retries N        connection-level retries of a request (5)\n"
            "  --request-retry-wait-ms MS wait between those retries (1000)\n"
            "  --time-scale F             multiply every default timing above by F (1.0)\n"
            "  --metrics-port P           serve GET /metrics on its own port (default: on the\n"
            "                             master port)\n"
            "  --body-limit BYTES         largest request body accepted (268435456)\n"
            "  --log-level L              debug, info, warn, error, off (info)\n"
            "  --log-format F             human or json (human)\n"
            "  --events FILE              write what happens as typed events, JSON lines\n"
            "                             (docs/events.md); a write error is logged once and\n"
            "                             counted in /metrics, never fatal\n"
            "  --events-max-bytes N       cap on FILE + FILE.1: FILE is renamed to FILE.1 when\n"
            "                             it reaches half of N (67108864; at least 4096)\n"
            "  --events-flush-ms MS       pending events are written within MS (1000)\n"
            "  --events-each-line         write every event at once (for a runner watching it)\n"
            "  --help, --version\n\n"
            "Environment: KUBERNETES_SERVER_URL (host:port or URL) turns on Kubernetes mode;\n"
            "KUBERNETES_POD_NAMESPACE (default), KUBERNETES_POD_NAME\n"
            "(dijob-example-coordinator), KUBERNETES_SERVER_API_VERSION (/v1alpha1);\n"
            "AGGREGATOR_PORT: default slave port. With all four of KUBERNETES_SERVER_URL,\n"
            "KUBERNETES_POD_NAME, KUBERNETES_POD_NAMESPACE and AGGREGATOR_PORT set (the\n"
            "environment DI-orchestrator gives the aggregator's pod), it runs as in such a\n"
            "pod: it listens on all interfaces (unless --slave-host/--master-host or the\n"
            "config say otherwise) and, unless the learner side's address is given, tells\n"
            "learners to reach it at http://POD_NAME.NAMESPACE:MASTER_PORT (the pod's\n"
            "headless Service), or at the host of KUBERNETES_AGGREGATOR_URL (host:port or\n"
            "URL) when that is set.\n"
            "See docs/kubernetes.md.\n\n"
            "When start-up ends it prints one JSON line on stdout: {\"ready\": true,\n"
            "\"slave_port\", \"master_port\", \"metrics_port\", \"joined\": [...], \"failed\": [...]}.\n"
            "\"failed\" is not final: a learner that did not join within max_retry is still\n"
            "retried every retry interval and joins the world when it answers (event\n"
            "learner_retaken; dilearn_learners_failed counts the learners failed now).\n"
            "Exit status: 0 after SIGTERM/SIGINT, 1 runtime failure, 2 bad configuration.\n");
}

enum {
    O_CONFIG = 256, O_SLAVE_HOST, O_SLAVE_PORT, O_MASTER_HOST, O_MASTER_PORT, O_ADVERTISE, O_LEARNER, O_CHANNEL,
    O_MAX_RETRY, O_RETRY_INTERVAL, O_HB_SPAN, O_HB_TOL, O_HB_CHECK, O_DEADLINE, O_SYNC, O_OP_TIMEOUT, O_RETRIES,
    O_RETRY_WAIT, O_TIME_SCALE, O_METRICS_PORT, O_BODY_LIMIT, O_LOG_LEVEL, O_LOG_FORMAT, O_HELP, O_VERSION,
    O_EVENTS, O_EVENTS_MAX, O_EVENTS_FLUSH, O_EVENTS_EACH, O_ALLOW_MASTER
};

static const struct option options[] = {
    {"config", required_argument, NULL, O_CONFIG},
    {"slave-host", required_argument, NULL, O_SLAVE_HOST},
    {"slave-port", required_argument, NULL, O_SLAVE_PORT},
    {"master-host", required_argument, NULL, O_MASTER_HOST},
    {"master-port", required_argument, NULL, O_MASTER_PORT},
    {"advertise", required_argument, NULL, O_ADVERTISE},
    {"learner", required_argument, NULL, O_LEARNER},
    {"channel", required_argument, NULL, O_CHANNEL},
    {"max-retry-ms", required_argument, NULL, O_MAX_RETRY},
    {"retry-interval-ms", required_argument, NULL, O_RETRY_INTERVAL},
    {"heartbeat-span-ms", required_argument, NULL, O_HB_SPAN},
    {"heartbeat-tolerance-ms", required_argument, NULL, O_HB_TOL},
    {"heartbeat-check-ms", required_argument, NULL, O_HB_CHECK},
    {"task-deadline-ms", required_argument, NULL, O_DEADLINE},
    {"sync-period-ms", required_argument, NULL, O_SYNC},
    {"operator-timeout-ms", required_argument, NULL, O_OP_TIMEOUT},
    {"request-retries", required_argument, NULL, O_RETRIES},
    {"request-retry-wait-ms", required_argument, NULL, O_RETRY_WAIT},
    {"time-scale", required_argument, NULL, O_TIME_SCALE},
    {"metrics-port", required_argument, NULL, O_METRICS_PORT},
    {"body-limit", required_argument, NULL, O_BODY_LIMIT},
    {"log-level", required_argument, NULL, O_LOG_LEVEL},
    {"log-format", required_argument, NULL, O_LOG_FORMAT},
    {"allow-master", required_argument, NULL, O_ALLOW_MASTER},
    {"help", no_argument, NULL, O_HELP},
    {"version", no_argument, NULL, O_VERSION},
    {"events", required_argument, NULL, O_EVENTS},
    {"events-max-bytes", required_argument, NULL, O_EVENTS_MAX},
    {"events-flush-ms", required_argument, NULL, O_EVENTS_FLUSH},
    {"events-each-line", no_argument, NULL, O_EVENTS_EACH},
    {NULL, 0, NULL, 0},
};

/* The --events flags. */
static int events_flag(agg_config *cfg, int c, const char *v, char *err, size_t errlen)
{
    long n;
    if (c == O_EVENTS) {
        if (!*v) {
            snprintf(err, errlen, "--events: give a file name");
            return -1;
        }
        set_str(&cfg->events_path, v);
    } else if (c == O_EVENTS_MAX) {
        if (parse_long("--events-max-bytes", v, 4096, LONG_MAX, &n, err, errlen) < 0)
            return -1;
        cfg->events_max_bytes = (size_t)n;
    } else if (c == O_EVENTS_FLUSH) {
        if (parse_long("--events-flush-ms", v, 1, 3600L * 1000, &n, err, errlen) < 0)
            return -1;
        cfg->events_flush_ms = n;
    } else {
        cfg->events_each_line = true;
    }
    return 0;
}

static long scaled(long given, long dflt, double scale)
{
    if (given >= 0)
        return given;
    long v = (long)llround((double)dflt * scale);
    return v < 1 ? 1 : v;
}

static char *normalise_url(const char *v)
{
    if (strncmp(v, "http://", 7) == 0 || strncmp(v, "https://", 8) == 0) {
        size_t n = strlen(v);
        while (n && v[n - 1] == '/')
            n--;
        return xstrndup(v, n);
    }
    return xasprintf("http://%s", v);
}

static const char *env_set(const char *name)
{
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* The environment DI-orchestrator (v0.2.x) gives the aggregator's pod
 * (utils.BuildPodAndService): its namespace and name, the operator server's
 * URL and AGGREGATOR_PORT, the containerPort of "di-port". When all four
 * are there, defaults that only make sense on one machine change: listen on
 * every interface, and advertise a name that other pods resolve. Runs after
 * the ports are resolved and before the hosts get their defaults. */
static int orchestrator_pod_defaults(agg_config *cfg, char *err, size_t errlen)
{
    const char *ns = env_set("KUBERNETES_POD_NAMESPACE"), *name = env_set("KUBERNETES_POD_NAME");
    if (!env_set("KUBERNETES_SERVER_URL") || !ns || !name || !env_set("AGGREGATOR_PORT"))
        return 0;
    cfg->orchestrator_pod = true;
    if (!cfg->slave_host)
        cfg->slave_host = xstrdup("0.0.0.0");
    /* A learner-side address given, or no port known before listening:
     * learners are told the listening address, as outside a pod. */
    if (cfg->master_host || cfg->advertise || cfg->master_port == 0) {
        if (!cfg->master_host)
            cfg->master_host = xstrdup("0.0.0.0");
        return 0;
    }
    cfg->master_host = xstrdup("0.0.0.0");
    const char *url = env_set("KUBERNETES_AGGREGATOR_URL");
    if (url) {
        /* host:port or http://host:port[/]: the host is what is kept */
        const char *h = strncmp(url, "http://", 7) == 0 ? url + 7 : url;
        size_t hl = strcspn(h, "/");
        const char *rb = memrchr(h, ']', hl), *from = rb ? rb : h;
        const char *colon = memrchr(from, ':', (size_t)(h + hl - from));
        if (colon)
            hl = (size_t)(colon - h);
        if (hl == 0 || strstr(h, "://")) {
            snprintf(err, errlen, "KUBERNETES_AGGREGATOR_URL: '%s' is not host:port or http://host:port", url);
            return -1;
        }
        cfg->advertise = xasprintf("http://%.*s:%d", (int)hl, h, cfg->master_port);
    } else {
        /* DI-orchestrator gives every pod a headless Service of its own name */
        cfg->advertise = xasprintf("http://%s.%s:%d", name, ns, cfg->master_port);
    }
    return 0;
}

static agg_config_status resolve(agg_config *cfg, char *err, size_t errlen);

agg_config_status agg_config_from_args(agg_config *cfg, int argc, char **argv, char *err, size_t errlen)
{
    agg_config_defaults(cfg);
    /* The config file is read first, whatever its place among the flags. */
    for (int i = 1; i < argc && argv[i]; i++) {
        const char *path = NULL;
        if (strcmp(argv[i], "--config") == 0 && i + 1 < argc)
            path = argv[i + 1];
        else if (strncmp(argv[i], "--config=", 9) == 0)
            path = argv[i] + 9;
        if (path && agg_config_read_file(cfg, path, err, errlen) < 0)
            return AGG_CONFIG_ERROR;
    }
    optind = 1;
    opterr = 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, ":", options, NULL)) != -1) {
        const char *flag = optind > 1 ? argv[optind - 1] : "?";
        switch (c) {
        case O_CONFIG:
            break;
        case O_SLAVE_HOST:
            set_str(&cfg->slave_host, optarg);
            break;
        case O_MASTER_HOST:
            set_str(&cfg->master_host, optarg);
            break;
        case O_SLAVE_PORT:
        case O_MASTER_PORT:
        case O_METRICS_PORT:
            if (parse_long(c == O_SLAVE_PORT ? "--slave-port" : c == O_MASTER_PORT ? "--master-port" : "--metrics-port",
                           optarg, 0, 65535, &v, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            if (c == O_SLAVE_PORT)
                cfg->slave_port = (int)v;
            else if (c == O_MASTER_PORT)
                cfg->master_port = (int)v;
            else
                cfg->metrics_port = (int)v;
            break;
        case O_ADVERTISE:
            if (strncmp(optarg, "http://", 7) != 0) {
                snprintf(err, errlen, "--advertise: '%s' is not a URL like http://host:port (plain HTTP)", optarg);
                return AGG_CONFIG_ERROR;
            }
            set_str(&cfg->advertise, optarg);
            break;
        case O_LEARNER: {
            const char *eq = strchr(optarg, '=');
            if (!eq || eq == optarg) {
                snprintf(err, errlen, "--learner: '%s' is not ID=HOST:PORT", optarg);
                return AGG_CONFIG_ERROR;
            }
            char *id = xstrndup(optarg, (size_t)(eq - optarg));
            char *host = NULL;
            int port = 0;
            int rc = parse_host_port("--learner", eq + 1, &host, &port, err, errlen);
            if (rc == 0)
                rc = agg_config_add_learner(cfg, id, host, port, err, errlen);
            free(id);
            free(host);
            if (rc < 0)
                return AGG_CONFIG_ERROR;
            break;
        }
        case O_CHANNEL:
            if (parse_long("--channel", optarg, INT_MIN, INT_MAX, &v, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            cfg->channel = (int)v;
            break;
        case O_MAX_RETRY:
        case O_RETRY_INTERVAL:
        case O_HB_SPAN:
        case O_HB_TOL:
        case O_HB_CHECK:
        case O_DEADLINE:
        case O_SYNC:
        case O_OP_TIMEOUT:
        case O_RETRY_WAIT: {
            long min = (c == O_MAX_RETRY || c == O_RETRY_WAIT) ? 0 : 1;
            if (parse_long(flag, optarg, min, 365L * 24 * 3600 * 1000, &v, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            long *dst = c == O_MAX_RETRY        ? &cfg->max_retry_ms
                        : c == O_RETRY_INTERVAL ? &cfg->retry_interval_ms
                        : c == O_HB_SPAN        ? &cfg->heartbeat_span_ms
                        : c == O_HB_TOL         ? &cfg->heartbeat_tolerance_ms
                        : c == O_HB_CHECK       ? &cfg->heartbeat_check_ms
                        : c == O_DEADLINE       ? &cfg->task_deadline_ms
                        : c == O_SYNC           ? &cfg->sync_period_ms
                        : c == O_OP_TIMEOUT     ? &cfg->operator_timeout_ms
                                                : &cfg->request_retry_wait_ms;
            *dst = v;
            break;
        }
        case O_RETRIES:
            if (parse_long("--request-retries", optarg, 0, 100, &v, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            cfg->request_retries = (int)v;
            break;
        case O_TIME_SCALE: {
            char *end;
            errno = 0;
            double d = strtod(optarg, &end);
            if (errno || end == optarg || *end || !(d > 0) || d > 1000) {
                snprintf(err, errlen, "--time-scale: '%s' is not a number greater than 0 and at most 1000", optarg);
                return AGG_CONFIG_ERROR;
            }
            cfg->time_scale = d;
            break;
        }
        case O_BODY_LIMIT:
            if (parse_long("--body-limit", optarg, 1024, 4L << 30, &v, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            cfg->body_limit = (size_t)v;
            break;
        case O_LOG_LEVEL:
            if (!ilog_parse_level(optarg, &cfg->log_level)) {
                snprintf(err, errlen, "--log-level: '%s' is not one of debug, info, warn, error, off", optarg);
                return AGG_CONFIG_ERROR;
            }
            break;
        case O_LOG_FORMAT:
            if (!ilog_parse_format(optarg, &cfg->log_format)) {
                snprintf(err, errlen, "--log-format: '%s' is not human or json", optarg);
                return AGG_CONFIG_ERROR;
            }
            break;
        case O_ALLOW_MASTER:
            if (slave_allow_flag(&cfg->allow_master, optarg, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            break;
        case O_HELP:
            usage(stdout);
            return AGG_CONFIG_EXIT;
        case O_EVENTS:
        case O_EVENTS_MAX:
        case O_EVENTS_FLUSH:
        case O_EVENTS_EACH:
            if (events_flag(cfg, c, optarg, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            break;
        case O_VERSION:
            printf("aggregator %s\n", DILEARN_VERSION);
            return AGG_CONFIG_EXIT;
        case ':':
            snprintf(err, errlen, "%s needs a value (see --help)", argv[optind - 1]);
            return AGG_CONFIG_ERROR;
        default:
            snprintf(err, errlen, "unknown option '%s' (see --help)", argv[optind - 1]);
            return AGG_CONFIG_ERROR;
        }
    }
    if (optind < argc) {
        snprintf(err, errlen, "unexpected argument '%s' (see --help)", argv[optind]);
        return AGG_CONFIG_ERROR;
    }
    return resolve(cfg, err, errlen);
}

/* After the file and the flags: defaults, scaling, the environment. */
static agg_config_status resolve(agg_config *cfg, char *err, size_t errlen)
{
    long v;
    /* Ports: the reference's Kubernetes defaults, AGGREGATOR_PORT first. */
    if (cfg->slave_port < 0) {
        const char *ap = getenv("AGGREGATOR_PORT");
        cfg->slave_port = 22272;
        if (ap && *ap) {
            if (parse_long("AGGREGATOR_PORT", ap, 0, 65534, &v, err, errlen) < 0)
                return AGG_CONFIG_ERROR;
            cfg->slave_port = (int)v;
        }
    }
    if (cfg->master_port < 0)
        cfg->master_port = cfg->slave_port == 0 ? 0 : cfg->slave_port + 1;
    if (cfg->slave_port != 0 && cfg->slave_port == cfg->master_port) {
        snprintf(err, errlen, "slave port and master port are both %d; they must differ", cfg->slave_port);
        return AGG_CONFIG_ERROR;
    }
    if (orchestrator_pod_defaults(cfg, err, errlen) < 0)
        return AGG_CONFIG_ERROR;
    if (!cfg->slave_host)
        cfg->slave_host = xstrdup("127.0.0.1");
    if (!cfg->master_host)
        cfg->master_host = xstrdup("127.0.0.1");

    double s = cfg->time_scale;
    cfg->max_retry_ms = cfg->max_retry_ms >= 0 ? cfg->max_retry_ms : scaled(-1, 60000, s);
    cfg->retry_interval_ms = scaled(cfg->retry_interval_ms, 2000, s);
    cfg->heartbeat_span_ms = scaled(cfg->heartbeat_span_ms, 3000, s);
    cfg->heartbeat_tolerance_ms = scaled(cfg->heartbeat_tolerance_ms, 17000, s);
    cfg->heartbeat_check_ms = scaled(cfg->heartbeat_check_ms, 1000, s);
    cfg->task_deadline_ms = scaled(cfg->task_deadline_ms, 300000, s);
    cfg->sync_period_ms = scaled(cfg->sync_period_ms, 3000, s);
    /* A network timeout, not a protocol timing: not scaled, so a slow
     * operator is still heard when the sync period is shrunk. */
    if (cfg->operator_timeout_ms < 0)
        cfg->operator_timeout_ms = 5000;
    cfg->request_retry_wait_ms = cfg->request_retry_wait_ms >= 0 ? cfg->request_retry_wait_ms : scaled(-1, 1000, s);
    if (cfg->request_retries < 0)
        cfg->request_retries = 5;
    if (cfg->heartbeat_tolerance_ms <= cfg->heartbeat_check_ms) {
        snprintf(err, errlen,
                 "--heartbeat-tolerance-ms (%ld) must be greater than --heartbeat-check-ms (%ld)",
                 cfg->heartbeat_tolerance_ms, cfg->heartbeat_check_ms);
        return AGG_CONFIG_ERROR;
    }

    const char *k8s = getenv("KUBERNETES_SERVER_URL");
    if (k8s && *k8s) {
        cfg->k8s_url = normalise_url(k8s);
        const char *ns = getenv("KUBERNETES_POD_NAMESPACE");
        const char *name = getenv("KUBERNETES_POD_NAME");
        const char *api = getenv("KUBERNETES_SERVER_API_VERSION");
        cfg->k8s_namespace = xstrdup(ns && *ns ? ns : "default");
        cfg->k8s_name = xstrdup(name && *name ? name : "dijob-example-coordinator");
        if (!api || !*api)
            api = "/v1alpha1";
        cfg->k8s_api = api[0] == '/' ? xstrdup(api) : xasprintf("/%s", api);
    }
    return AGG_CONFIG_OK;
}
