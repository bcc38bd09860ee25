/* agg_k8s: Kubernetes mode (see agg_k8s.h). */
#include "agg_k8s.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evt.h"
#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

struct agg_k8s {
    ev_loop *loop;
    hc_client *client;
    agg_learners *reg;
    const agg_config *cfg; /* k8s_url, k8s_api, k8s_namespace, k8s_name, periods */
    agg_k8s_synced_cb synced_cb;
    void *ud;
    bool synced, stopping;
    ev_timer *timer;
    hc_req *req;
    /* this sync's operator_sync event */
    cJSON *added, *removed, *failed;
    char *error;
};

static void sync_schedule(agg_k8s *k, long delay_ms);

/* "learner-0.ns:22271" -> "learner-0" (the host without its last
 * dot-separated part; a host without a dot is kept whole). */
static char *pod_name(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : strlen(addr);
    char *host = xstrndup(addr, hl);
    char *dot = strrchr(host, '.');
    if (dot)
        *dot = '\0';
    return host;
}

/* Forgets this sync's record. */
static void sync_clear(agg_k8s *k)
{
    cJSON_Delete(k->added);
    cJSON_Delete(k->removed);
    cJSON_Delete(k->failed);
    free(k->error);
    k->added = k->removed = k->failed = NULL;
    k->error = NULL;
}

/* Ends one exchange with the operator: its event, then the next period. */
static void sync_end(agg_k8s *k, const char *error)
{
    if (error && !k->error)
        k->error = xstrdup(error);
    EVT_EMIT(operator_sync, .added = k->added, .removed = k->removed, .failed = k->failed, .error = k->error,
             .world = (int64_t)agg_learners_world(k->reg));
    sync_clear(k);
    sync_schedule(k, k->cfg->sync_period_ms);
}

static void http(agg_k8s *k, const char *method, const char *path_query, char *body, hc_cb cb)
{
    hc_opts o;
    hc_opts_init(&o);
    char *url = xasprintf("%s%s%s", k->cfg->k8s_url, k->cfg->k8s_api, path_query);
    o.method = method;
    o.url = url;
    o.body = body;
    o.body_len = body ? strlen(body) : 0;
    o.retries = 0; /* the next period is the retry */
    o.timeout_ms = k->cfg->operator_timeout_ms;
    o.connect_timeout_ms = k->cfg->operator_timeout_ms;
    k->req = hc_send(k->client, &o, cb, k);
    free(url);
    if (!k->req) {
        char *why = xasprintf("cannot start %s %s", method, path_query);
        LOG_ERROR(NULL, "operator: %s", why);
        sync_end(k, why);
        free(why);
    }
}

/* Parses an operator reply; returns the envelope's data or NULL with err
 * saying why ("failed: ...", "answered HTTP 500, code 1: ..."). Pure. */
static cJSON *operator_data_err(const hc_result *res, cJSON **tree, char *err, size_t errlen)
{
    *tree = NULL;
    if (res->error) {
        snprintf(err, errlen, "failed: %s", res->error);
        return NULL;
    }
    proto_reply rep;
    char perr[200];
    if (!proto_parse_envelope(res->body, res->body_len, &rep, perr, sizeof perr)) {
        snprintf(err, errlen, "answered HTTP %ld with an unusable body (%s)", res->status, perr);
        return NULL;
    }
    if (res->status != 200 || !rep.success) {
        snprintf(err, errlen, "answered HTTP %ld, code %d: %s", res->status, rep.code,
                 rep.message ? rep.message : "");
        cJSON_Delete(rep.tree);
        return NULL;
    }
    *tree = rep.tree;
    return rep.data;
}

/* Splits "host:port" (port 1..65535, host not empty); false if it is not so. */
static bool split_addr(const char *addr, char **host, int *port)
{
    const char *colon = strrchr(addr, ':');
    char *end = NULL;
    long p = colon ? strtol(colon + 1, &end, 10) : 0;
    if (!colon || colon == addr || !end || *end || p < 1 || p > 65535)
        return false;
    *host = xstrndup(addr, (size_t)(colon - addr));
    *port = (int)p;
    return true;
}

int agg_k8s_parse_replicas(const hc_result *res, agg_k8s_entry **entries, size_t *n, char *err, size_t errlen)
{
    *entries = NULL;
    *n = 0;
    cJSON *tree;
    cJSON *data = operator_data_err(res, &tree, err, errlen);
    if (!data) {
        if (tree)
            snprintf(err, errlen, "answered success without data");
        cJSON_Delete(tree);
        return -1;
    }
    const cJSON *learners = jsonx_get(data, "learners");
    if (learners && !cJSON_IsArray(learners) && !cJSON_IsNull(learners)) {
        snprintf(err, errlen, "data has no \"learners\" list");
        cJSON_Delete(tree);
        return -1;
    }
    size_t cnt = 0;
    for (const cJSON *it = learners && cJSON_IsArray(learners) ? learners->child : NULL; it; it = it->next)
        cnt += cJSON_IsString(it) ? 1 : 0;
    agg_k8s_entry *e = xcalloc(cnt ? cnt : 1, sizeof *e);
    size_t k = 0;
    for (const cJSON *it = learners && cJSON_IsArray(learners) ? learners->child : NULL; it; it = it->next) {
        if (!cJSON_IsString(it))
            continue;
        e[k].addr = xstrdup(it->valuestring);
        if (!split_addr(e[k].addr, &e[k].host, &e[k].port)) {
            e[k].host = NULL;
            e[k].port = 0;
        }
        k++;
    }
    cJSON_Delete(tree);
    *entries = e;
    *n = cnt;
    return 0;
}

void agg_k8s_entries_free(agg_k8s_entry *entries, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(entries[i].addr);
        free(entries[i].host);
    }
    free(entries);
}

static void remove_learner(agg_k8s *k, learner *l, const char *why)
{
    cJSON_AddItemToArray(k->removed, cJSON_CreateString(l->id));
    agg_learners_remove(k->reg, l, why);
}

static void apply_list(agg_k8s *k, const agg_k8s_entry *e, size_t n)
{
    /* New addresses: connect. */
    for (size_t i = 0; i < n; i++) {
        if (agg_learners_find(k->reg, e[i].addr))
            continue;
        if (!e[i].host) {
            LOG_WARN(NULL, "operator: learner address '%.200s' is not host:port; ignored", e[i].addr);
            continue;
        }
        LOG_INFO(e[i].addr, "operator lists a new learner; connecting");
        cJSON_AddItemToArray(k->added, cJSON_CreateString(e[i].addr));
        agg_learners_add(k->reg, e[i].addr, e[i].host, e[i].port);
    }
    /* Gone addresses: disconnect and forget (failed ones are kept until
     * reported, as the reference does). */
    for (size_t i = 0; i < agg_learners_count(k->reg);) {
        learner *l = agg_learners_at(k->reg, i);
        bool listed = false;
        for (size_t j = 0; j < n && !listed; j++)
            listed = strcmp(e[j].addr, l->id) == 0;
        if (!listed && l->state != LS_FAILED) {
            remove_learner(k, l, "no longer listed by the operator");
            continue;
        }
        i++;
    }
}

static void on_get(void *ud, const hc_result *res)
{
    agg_k8s *k = ud;
    k->req = NULL;
    agg_k8s_entry *e;
    size_t n;
    char err[400];
    if (agg_k8s_parse_replicas(res, &e, &n, err, sizeof err) != 0) {
        LOG_WARN(NULL, "operator: GET /replicas %s; retrying next period", err);
        char *why = xasprintf("GET /replicas %s", err);
        sync_end(k, why);
        free(why);
        return;
    }
    apply_list(k, e, n);
    agg_k8s_entries_free(e, n);
    bool first = !k->synced;
    k->synced = true;
    sync_end(k, NULL);
    if (first && k->synced_cb)
        k->synced_cb(k->ud);
}

static void get_list(agg_k8s *k)
{
    char *q = xasprintf("/replicas?namespace=%s&aggregator=%s", k->cfg->k8s_namespace, k->cfg->k8s_name);
    http(k, "GET", q, NULL, on_get);
    free(q);
}

static void on_failed_posted(void *ud, const hc_result *res)
{
    agg_k8s *k = ud;
    k->req = NULL;
    cJSON *tree;
    char err[400];
    cJSON *data = operator_data_err(res, &tree, err, sizeof err);
    if (data || (tree && !res->error)) {
        /* Accepted: forget the reported learners that are still failed (the
         * operator replaces them; a new address shows up in the list). */
        for (const cJSON *it = k->failed ? k->failed->child : NULL; it; it = it->next) {
            learner *l = agg_learners_find(k->reg, it->valuestring);
            if (l && l->state == LS_FAILED)
                remove_learner(k, l, "reported failed to the operator");
        }
    } else {
        LOG_WARN(NULL, "operator: POST /replicas/failed %s; retrying next period", err);
        char *why = xasprintf("POST /replicas/failed %s", err);
        k->error = why;
    }
    cJSON_Delete(tree);
    if (!k->stopping)
        get_list(k);
}

static void sync_now(agg_k8s *k)
{
    if (k->req || k->stopping)
        return;
    k->added = cJSON_CreateArray();
    k->removed = cJSON_CreateArray();
    k->failed = cJSON_CreateArray();
    cJSON *pods = cJSON_CreateArray();
    for (size_t i = 0; i < agg_learners_count(k->reg); i++) {
        learner *l = agg_learners_at(k->reg, i);
        if (l->state != LS_FAILED)
            continue;
        char *p = pod_name(l->id);
        bool dup = false;
        for (const cJSON *it = pods->child; it && !dup; it = it->next)
            dup = strcmp(it->valuestring, p) == 0;
        if (!dup)
            cJSON_AddItemToArray(pods, cJSON_CreateString(p));
        free(p);
        cJSON_AddItemToArray(k->failed, cJSON_CreateString(l->id));
    }
    if (!pods->child) {
        cJSON_Delete(pods);
        get_list(k);
        return;
    }
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "namespace", k->cfg->k8s_namespace);
    cJSON_AddStringToObject(body, "coordinator", k->cfg->k8s_name);
    cJSON_AddItemToObject(body, "collectors", cJSON_CreateArray());
    cJSON_AddItemToObject(body, "learners", pods);
    char *text = jsonx_print(body);
    LOG_INFO(NULL, "operator: reporting failed learners %s", text);
    cJSON_Delete(body);
    http(k, "POST", "/replicas/failed", text, on_failed_posted);
}

static void on_sync_timer(ev_loop *loop, void *data)
{
    (void)loop;
    agg_k8s *k = data;
    k->timer = NULL;
    sync_now(k);
}

static void sync_schedule(agg_k8s *k, long delay_ms)
{
    if (k->stopping)
        return;
    ev_timer_stop(k->loop, k->timer);
    k->timer = ev_timer_start(k->loop, (uint64_t)delay_ms, on_sync_timer, k);
}

agg_k8s *agg_k8s_new(ev_loop *loop, hc_client *client, agg_learners *reg, const agg_config *cfg,
                     agg_k8s_synced_cb synced, void *ud)
{
    agg_k8s *k = xcalloc(1, sizeof *k);
    k->loop = loop;
    k->client = client;
    k->reg = reg;
    k->cfg = cfg;
    k->synced_cb = synced;
    k->ud = ud;
    LOG_INFO(NULL, "Kubernetes mode: operator %s%s, namespace %s, name %s, sync every %ld ms", cfg->k8s_url,
             cfg->k8s_api, cfg->k8s_namespace, cfg->k8s_name, cfg->sync_period_ms);
    sync_schedule(k, 0);
    return k;
}

bool agg_k8s_synced(const agg_k8s *k)
{
    return k && k->synced;
}

void agg_k8s_stop(agg_k8s *k)
{
    if (!k)
        return;
    k->stopping = true;
    ev_timer_stop(k->loop, k->timer);
    k->timer = NULL;
    if (k->req)
        hc_cancel(k->client, k->req);
    k->req = NULL;
    sync_clear(k);
}

void agg_k8s_free(agg_k8s *k)
{
    agg_k8s_stop(k);
    free(k);
}
