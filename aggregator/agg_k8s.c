/* agg_k8s: Kubernetes mode: every sync period, report the learners that
 * failed to join to the operator server (as pod names), then get the learner
 * list and connect to new addresses / disconnect from those gone. Operator
 * trouble (down, slow, garbage) is logged and retried next period. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_internal.h"
#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

static void sync_schedule(agg *a, long delay_ms);

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

static void http(agg *a, const char *method, const char *path_query, char *body, hc_cb cb)
{
    hc_opts o;
    hc_opts_init(&o);
    char *url = xasprintf("%s%s%s", a->cfg.k8s_url, a->cfg.k8s_api, path_query);
    o.method = method;
    o.url = url;
    o.body = body;
    o.body_len = body ? strlen(body) : 0;
    o.retries = 0; /* the next period is the retry */
    o.timeout_ms = a->cfg.operator_timeout_ms;
    o.connect_timeout_ms = a->cfg.operator_timeout_ms;
    a->sync_req = hc_send(a->client, &o, cb, a);
    free(url);
    if (!a->sync_req) {
        LOG_ERROR(NULL, "operator: cannot start %s %s", method, path_query);
        sync_schedule(a, a->cfg.sync_period_ms);
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

/* Parses an operator reply; returns the envelope's data or NULL (logged). */
static cJSON *operator_data(const char *what, const hc_result *res, cJSON **tree)
{
    char err[400];
    cJSON *data = operator_data_err(res, tree, err, sizeof err);
    if (!data && !*tree)
        LOG_WARN(NULL, "operator: %s %s; retrying next period", what, err);
    return data;
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

static void apply_list(agg *a, const agg_k8s_entry *e, size_t n)
{
    /* New addresses: connect. */
    for (size_t i = 0; i < n; i++) {
        if (agg_learner_find(a, e[i].addr))
            continue;
        if (!e[i].host) {
            LOG_WARN(NULL, "operator: learner address '%.200s' is not host:port; ignored", e[i].addr);
            continue;
        }
        LOG_INFO(e[i].addr, "operator lists a new learner; connecting");
        agg_learner_add(a, e[i].addr, e[i].host, e[i].port);
    }
    /* Gone addresses: disconnect and forget (failed ones are kept until
     * reported, as the reference does). */
    for (size_t i = 0; i < a->nlearners;) {
        learner *l = a->learners[i];
        bool listed = false;
        for (size_t k = 0; k < n && !listed; k++)
            listed = strcmp(e[k].addr, l->id) == 0;
        if (!listed && !(l->failed && !l->reported)) {
            agg_learner_remove(a, l, "no longer listed by the operator");
            continue;
        }
        i++;
    }
}

static void on_get(void *ud, const hc_result *res)
{
    agg *a = ud;
    a->sync_req = NULL;
    agg_k8s_entry *e;
    size_t n;
    char err[400];
    if (agg_k8s_parse_replicas(res, &e, &n, err, sizeof err) != 0) {
        LOG_WARN(NULL, "operator: GET /replicas %s; retrying next period", err);
    } else {
        apply_list(a, e, n);
        agg_k8s_entries_free(e, n);
        if (!a->k8s_synced) {
            a->k8s_synced = true;
            agg_check_ready(a);
        }
    }
    sync_schedule(a, a->cfg.sync_period_ms);
}

static void get_list(agg *a)
{
    char *q = xasprintf("/replicas?namespace=%s&aggregator=%s", a->cfg.k8s_namespace, a->cfg.k8s_name);
    http(a, "GET", q, NULL, on_get);
    free(q);
}

static void on_failed_posted(void *ud, const hc_result *res)
{
    agg *a = ud;
    a->sync_req = NULL;
    cJSON *tree;
    cJSON *data = operator_data("POST /replicas/failed", res, &tree);
    if (data || (tree && !res->error)) {
        /* Accepted: forget the reported learners (the operator replaces
         * them; a new address shows up in the list). */
        for (size_t i = 0; i < a->nlearners;) {
            learner *l = a->learners[i];
            if (l->failed && l->reported) {
                agg_learner_remove(a, l, "reported failed to the operator");
                continue;
            }
            i++;
        }
    } else {
        for (size_t i = 0; i < a->nlearners; i++)
            a->learners[i]->reported = false;
    }
    cJSON_Delete(tree);
    if (!a->stopping)
        get_list(a);
}

static void sync_now(agg *a)
{
    if (a->sync_req || a->stopping)
        return;
    cJSON *pods = cJSON_CreateArray();
    size_t n = 0;
    for (size_t i = 0; i < a->nlearners; i++) {
        learner *l = a->learners[i];
        if (!l->failed || l->state == L_CONNECTED)
            continue;
        char *p = pod_name(l->id);
        bool dup = false;
        for (const cJSON *it = pods->child; it && !dup; it = it->next)
            dup = strcmp(it->valuestring, p) == 0;
        if (!dup)
            cJSON_AddItemToArray(pods, cJSON_CreateString(p));
        free(p);
        l->reported = true;
        n++;
    }
    if (n == 0) {
        cJSON_Delete(pods);
        get_list(a);
        return;
    }
    cJSON *body = cJSON_CreateObject();
    cJSON_AddStringToObject(body, "namespace", a->cfg.k8s_namespace);
    cJSON_AddStringToObject(body, "coordinator", a->cfg.k8s_name);
    cJSON_AddItemToObject(body, "collectors", cJSON_CreateArray());
    cJSON_AddItemToObject(body, "learners", pods);
    char *text = jsonx_print(body);
    LOG_INFO(NULL, "operator: reporting failed learners %s", text);
    cJSON_Delete(body);
    http(a, "POST", "/replicas/failed", text, on_failed_posted);
}

static void on_sync_timer(ev_loop *loop, void *data)
{
    (void)loop;
    agg *a = data;
    a->sync_timer = NULL;
    sync_now(a);
}

static void sync_schedule(agg *a, long delay_ms)
{
    if (a->stopping)
        return;
    if (a->sync_timer)
        ev_timer_stop(a->loop, a->sync_timer);
    a->sync_timer = ev_timer_start(a->loop, (uint64_t)delay_ms, on_sync_timer, a);
}

void agg_k8s_start(agg *a)
{
    LOG_INFO(NULL, "Kubernetes mode: operator %s%s, namespace %s, name %s, sync every %ld ms", a->cfg.k8s_url,
             a->cfg.k8s_api, a->cfg.k8s_namespace, a->cfg.k8s_name, a->cfg.sync_period_ms);
    sync_schedule(a, 0);
}

void agg_k8s_stop(agg *a)
{
    if (a->sync_timer)
        ev_timer_stop(a->loop, a->sync_timer);
    a->sync_timer = NULL;
    if (a->sync_req)
        hc_cancel(a->client, a->sync_req);
    a->sync_req = NULL;
}
