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

/* Parses an operator reply; returns the envelope's data or NULL (logged). */
static cJSON *operator_data(const char *what, const hc_result *res, cJSON **tree)
{
    *tree = NULL;
    if (res->error) {
        LOG_WARN(NULL, "operator: %s failed: %s; retrying next period", what, res->error);
        return NULL;
    }
    proto_reply rep;
    char err[200];
    if (!proto_parse_envelope(res->body, res->body_len, &rep, err, sizeof err)) {
        LOG_WARN(NULL, "operator: %s answered HTTP %ld with an unusable body (%s); retrying next period", what,
                 res->status, err);
        return NULL;
    }
    if (res->status != 200 || !rep.success) {
        LOG_WARN(NULL, "operator: %s answered HTTP %ld, code %d: %s; retrying next period", what, res->status,
                 rep.code, rep.message ? rep.message : "");
        cJSON_Delete(rep.tree);
        return NULL;
    }
    *tree = rep.tree;
    return rep.data;
}

static void apply_list(agg *a, const cJSON *learners)
{
    /* New addresses: connect. */
    for (const cJSON *it = learners->child; it; it = it->next) {
        if (!cJSON_IsString(it))
            continue;
        const char *addr = it->valuestring;
        if (agg_learner_find(a, addr))
            continue;
        const char *colon = strrchr(addr, ':');
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;
        if (!colon || colon == addr || !end || *end || port < 1 || port > 65535) {
            LOG_WARN(NULL, "operator: learner address '%.200s' is not host:port; ignored", addr);
            continue;
        }
        char *host = xstrndup(addr, (size_t)(colon - addr));
        LOG_INFO(addr, "operator lists a new learner; connecting");
        agg_learner_add(a, addr, host, (int)port);
        free(host);
    }
    /* Gone addresses: disconnect and forget (failed ones are kept until
     * reported, as the reference does). */
    for (size_t i = 0; i < a->nlearners;) {
        learner *l = a->learners[i];
        bool listed = false;
        for (const cJSON *it = learners->child; it && !listed; it = it->next)
            listed = cJSON_IsString(it) && strcmp(it->valuestring, l->id) == 0;
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
    cJSON *tree;
    cJSON *data = operator_data("GET /replicas", res, &tree);
    const cJSON *learners = data ? jsonx_get(data, "learners") : NULL;
    if (data && !cJSON_IsArray(learners) && !cJSON_IsNull(learners) && learners) {
        LOG_WARN(NULL, "operator: GET /replicas data has no \"learners\" list; retrying next period");
    } else if (data) {
        cJSON *empty = cJSON_CreateArray();
        apply_list(a, cJSON_IsArray(learners) ? learners : empty);
        cJSON_Delete(empty);
        if (!a->k8s_synced) {
            a->k8s_synced = true;
            agg_check_ready(a);
        }
    }
    cJSON_Delete(tree);
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
