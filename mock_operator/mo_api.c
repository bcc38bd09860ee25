/* mo_api: DI-orchestrator's v1alpha1 replicas API on a mo_registry. */
#include "mo_api.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

/* The original's response codes (common/types: CodeSuccess, CodeFailed). */
enum { CODE_SUCCESS = 0, CODE_FAILED = 1 };

#define ERR_LEN 512

const char *mo_failed_policy_name(mo_failed_policy p)
{
    return p == MO_FAILED_REMOVE ? "remove" : "recreate";
}

bool mo_failed_policy_parse(const char *s, mo_failed_policy *out)
{
    if (s && strcmp(s, "recreate") == 0)
        *out = MO_FAILED_RECREATE;
    else if (s && strcmp(s, "remove") == 0)
        *out = MO_FAILED_REMOVE;
    else
        return false;
    return true;
}

static void reply(mo_reply *out, int status, const char *message, cJSON *data)
{
    bool ok = status == 200;
    mo_reply_envelope(out, status, ok, ok ? CODE_SUCCESS : CODE_FAILED, message, data,
                      MO_API_CONTENT_TYPE);
}

/* A DIJobResponse: lists NULL are null (a nil Go slice). */
static cJSON *job_response(const char *ns, const char *coordinator, cJSON *collectors,
                           cJSON *learners)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "namespace", ns ? ns : "");
    cJSON_AddStringToObject(o, "coordinator", coordinator ? coordinator : "");
    cJSON_AddItemToObject(o, "collectors", collectors ? collectors : cJSON_CreateNull());
    cJSON_AddItemToObject(o, "learners", learners ? learners : cJSON_CreateNull());
    return o;
}

static cJSON *empty_job_response(void)
{
    return job_response("", "", NULL, NULL);
}

/* The original's message for a pod it does not know, with a hint when the
 * request left the namespace or the name out. */
static void not_found_message(char *msg, size_t len, const char *ns, const char *name)
{
    const char *hint = "";
    if (!*ns && !*name)
        hint = " (the request gives neither a namespace nor a name)";
    else if (!*ns)
        hint = " (the request gives no namespace)";
    else if (!*name)
        hint = " (the request gives no coordinator/aggregator name)";
    snprintf(msg, len, "pod: %s/%s not exists in cache%s", ns, name, hint);
}

/* ---- GET ---------------------------------------------------------------- */

static cJSON *entry_response(const mo_entry *e, bool with_collectors)
{
    return job_response(mo_entry_namespace(e), mo_entry_name(e),
                        with_collectors ? mo_entry_list_json(e, MO_COLLECTORS) : NULL,
                        mo_entry_list_json(e, MO_LEARNERS));
}

static void get_replicas(mo_registry *reg, const mo_request *req, mo_reply *out)
{
    /* Query names are matched case-insensitively; the first value counts. */
    static const char *const known[] = {"namespace", "coordinator", "name", "aggregator"};
    const char *vals[4] = {NULL, NULL, NULL, NULL};
    if (req->params_truncated) {
        char msg[128];
        snprintf(msg, sizeof msg, "more than %d query parameters", MO_PARAMS_MAX);
        reply(out, 400, msg, NULL);
        return;
    }
    for (size_t i = 0; i < req->nparams; i++) {
        const mo_param *p = &req->params[i];
        if (!*p->key)
            continue; /* Go's query parser drops empty keys */
        size_t k = 0;
        while (k < 4 && strcasecmp(p->key, known[k]) != 0)
            k++;
        if (k == 4) {
            char msg[ERR_LEN];
            snprintf(msg, sizeof msg, "request param %.300s is not supported", p->key);
            reply(out, 400, msg, NULL);
            return;
        }
        if (!vals[k])
            vals[k] = p->value ? p->value : "";
    }
    const char *ns = vals[0], *coordinator = vals[1], *name = vals[2], *aggregator = vals[3];
    const char *msg = "successfully get replicas";

    if (!ns || (!coordinator && !name && !aggregator)) {
        /* All entries, or those of one namespace: a list. */
        cJSON *list = cJSON_CreateArray();
        for (size_t i = 0; i < mo_registry_count(reg); i++) {
            const mo_entry *e = mo_registry_at(reg, i);
            if (!ns || strcmp(ns, mo_entry_namespace(e)) == 0)
                cJSON_AddItemToArray(list, entry_response(e, true));
        }
        reply(out, 200, msg, list);
        return;
    }
    if (name) {
        /* The original has no answer for name=: success with null data. */
        reply(out, 200, msg, NULL);
        return;
    }
    bool by_aggregator = !coordinator;
    const char *who = by_aggregator ? aggregator : coordinator;
    const mo_entry *e = mo_registry_find(reg, ns, who);
    if (!e) {
        char m[ERR_LEN];
        not_found_message(m, sizeof m, ns, who);
        reply(out, 404, m, NULL);
        return;
    }
    /* An aggregator gets only its learners: collectors is a nil list. */
    reply(out, 200, msg, entry_response(e, !by_aggregator));
}

/* ---- request bodies ----------------------------------------------------- */

/* Go's name for a JSON value's type in its decoding errors. */
static const char *go_json_type(const cJSON *v)
{
    if (cJSON_IsBool(v))
        return "bool";
    if (jsonx_is_number(v))
        return "number";
    if (cJSON_IsString(v))
        return "string";
    if (cJSON_IsArray(v))
        return "array";
    if (cJSON_IsObject(v))
        return "object";
    return "null";
}

static bool type_error(char *err, size_t errlen, const cJSON *v, const char *field,
                       const char *go_type)
{
    snprintf(err, errlen, "json: cannot unmarshal %s into Go struct field %s of type %s",
             go_json_type(v), field, go_type);
    return false;
}

/* A string field: null leaves it unset. */
static bool decode_string(const cJSON *v, const char *field, const char **out, char *err,
                          size_t errlen)
{
    if (cJSON_IsNull(v))
        return true;
    if (!cJSON_IsString(v))
        return type_error(err, errlen, v, field, "string");
    *out = v->valuestring;
    return true;
}

/* resource.Quantity's syntax: ^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$ */
static bool quantity_valid(const char *s)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    const char *start = p;
    while ((*p >= '0' && *p <= '9') || *p == '.')
        p++;
    if (p == start)
        return false;
    while (*p && strchr("eEinumkKMGTP", *p))
        p++;
    if (*p == '+' || *p == '-')
        p++;
    while (*p >= '0' && *p <= '9')
        p++;
    return *p == '\0';
}

/* {"replicas": n, "cpus": q, "gpus": q, "memory": q} (ResourceQuantity). */
static bool decode_quantity(const cJSON *v, const char *field, int64_t *replicas, char *err,
                            size_t errlen)
{
    char path[96];
    if (cJSON_IsNull(v))
        return true;
    if (!cJSON_IsObject(v))
        return type_error(err, errlen, v, field, "types.ResourceQuantity");
    for (const cJSON *m = v->child; m; m = m->next) {
        if (strcasecmp(m->string, "replicas") == 0) {
            snprintf(path, sizeof path, "%s.replicas", field);
            if (cJSON_IsNull(m))
                continue;
            if (!jsonx_is_number(m))
                return type_error(err, errlen, m, path, "int");
            if (!jsonx_get_i64(m, replicas)) {
                snprintf(err, errlen,
                         "json: cannot unmarshal number %.64s into Go struct field %s of type int",
                         m->valuestring ? m->valuestring : "", path);
                return false;
            }
        } else if (strcasecmp(m->string, "cpus") == 0 || strcasecmp(m->string, "gpus") == 0 ||
                   strcasecmp(m->string, "memory") == 0) {
            /* Accepted and ignored: the mock creates no pods. */
            const char *text = NULL;
            if (cJSON_IsNull(m))
                continue;
            if (cJSON_IsString(m))
                text = m->valuestring;
            else if (jsonx_is_number(m))
                text = m->valuestring ? m->valuestring : "0";
            if (!text || !quantity_valid(text)) {
                snprintf(err, errlen,
                         "%s.%s: quantities must match the regular expression "
                         "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'",
                         field, m->string);
                return false;
            }
        }
    }
    return true;
}

typedef struct {
    cJSON *tree;
    const char *ns, *coordinator;
    int64_t collectors, learners;
} job_request;

typedef struct {
    cJSON *tree;
    const char *ns, *coordinator;
    const cJSON *collectors, *learners; /* arrays or NULL */
} failed_request;

/* Parses the body; an empty body is Go's "EOF". */
static cJSON *parse_body(const mo_request *req, const char *go_type, char *err, size_t errlen)
{
    size_t i = 0;
    while (i < req->body_len && strchr(" \t\r\n", req->body[i]))
        i++;
    if (i == req->body_len) {
        snprintf(err, errlen, "EOF (the request has no body; expected a JSON object)");
        return NULL;
    }
    char perr[256];
    cJSON *tree = jsonx_parse(req->body, req->body_len, perr, sizeof perr);
    if (!tree) {
        snprintf(err, errlen, "the body is not valid JSON: %s", perr);
        return NULL;
    }
    if (!cJSON_IsObject(tree) && !cJSON_IsNull(tree)) {
        snprintf(err, errlen, "json: cannot unmarshal %s into Go value of type %s",
                 go_json_type(tree), go_type);
        cJSON_Delete(tree);
        return NULL;
    }
    return tree;
}

static bool decode_job_request(const mo_request *req, job_request *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->ns = out->coordinator = "";
    out->tree = parse_body(req, "types.DIJobRequest", err, errlen);
    if (!out->tree)
        return false;
    /* Fields match case-insensitively; a repeated key: the last one wins. */
    for (const cJSON *m = out->tree->child; m; m = m->next) {
        bool ok = true;
        if (strcasecmp(m->string, "namespace") == 0)
            ok = decode_string(m, "DIJobRequest.namespace", &out->ns, err, errlen);
        else if (strcasecmp(m->string, "coordinator") == 0)
            ok = decode_string(m, "DIJobRequest.coordinator", &out->coordinator, err, errlen);
        else if (strcasecmp(m->string, "collectors") == 0)
            ok = decode_quantity(m, "DIJobRequest.collectors", &out->collectors, err, errlen);
        else if (strcasecmp(m->string, "learners") == 0)
            ok = decode_quantity(m, "DIJobRequest.learners", &out->learners, err, errlen);
        if (!ok) {
            cJSON_Delete(out->tree);
            out->tree = NULL;
            return false;
        }
    }
    return true;
}

static bool decode_name_list(const cJSON *v, const char *field, const cJSON **out, char *err,
                             size_t errlen)
{
    if (cJSON_IsNull(v)) {
        *out = NULL;
        return true;
    }
    if (!cJSON_IsArray(v))
        return type_error(err, errlen, v, field, "[]string");
    int n = cJSON_GetArraySize(v);
    if (n > MO_LIST_MAX) {
        snprintf(err, errlen, "%s lists %d pods; the mock accepts at most %d", field, n,
                 MO_LIST_MAX);
        return false;
    }
    for (const cJSON *it = v->child; it; it = it->next)
        if (!cJSON_IsString(it) && !cJSON_IsNull(it))
            return type_error(err, errlen, it, field, "string");
    *out = v;
    return true;
}

static bool decode_failed_request(const mo_request *req, failed_request *out, char *err,
                                  size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->ns = out->coordinator = "";
    out->tree = parse_body(req, "types.DIJobResponse", err, errlen);
    if (!out->tree)
        return false;
    for (const cJSON *m = out->tree->child; m; m = m->next) {
        bool ok = true;
        if (strcasecmp(m->string, "namespace") == 0)
            ok = decode_string(m, "DIJobResponse.namespace", &out->ns, err, errlen);
        else if (strcasecmp(m->string, "coordinator") == 0)
            ok = decode_string(m, "DIJobResponse.coordinator", &out->coordinator, err, errlen);
        else if (strcasecmp(m->string, "collectors") == 0)
            ok = decode_name_list(m, "DIJobResponse.collectors", &out->collectors, err, errlen);
        else if (strcasecmp(m->string, "learners") == 0)
            ok = decode_name_list(m, "DIJobResponse.learners", &out->learners, err, errlen);
        if (!ok) {
            cJSON_Delete(out->tree);
            out->tree = NULL;
            return false;
        }
    }
    return true;
}

static void bad_body(mo_reply *out, const char *err)
{
    char msg[ERR_LEN + 64];
    snprintf(msg, sizeof msg, "failed to decode request body: %s", err);
    reply(out, 400, msg, empty_job_response());
}

/* ---- POST / DELETE ------------------------------------------------------- */

/* The job a coordinator or aggregator belongs to: its name without the
 * "-coordinator" / "-aggregator..." suffix that DI-orchestrator appends. */
static char *job_name(const char *who)
{
    static const char *const suffixes[] = {"-coordinator", "-aggregator"};
    for (size_t i = 0; i < 2; i++) {
        const char *p = strstr(who, suffixes[i]);
        const char *last = NULL;
        while (p) {
            last = p;
            p = strstr(p + 1, suffixes[i]);
        }
        if (last && last != who)
            return xstrndup(who, (size_t)(last - who));
    }
    return xstrdup(who);
}

static bool check_count(int64_t n, const char *field, size_t have, char *err, size_t errlen,
                        bool adding)
{
    if (n > MO_REPLICAS_PER_REQUEST_MAX) {
        snprintf(err, errlen, "%s.replicas is %" PRId64 "; the mock %s at most %d per request",
                 field, n, adding ? "creates" : "deletes", MO_REPLICAS_PER_REQUEST_MAX);
        return false;
    }
    if (adding && n > 0 && have + (size_t)n > MO_LIST_MAX) {
        snprintf(err, errlen, "%s.replicas is %" PRId64 "; the list holds %zu and at most %d",
                 field, n, have, MO_LIST_MAX);
        return false;
    }
    return true;
}

static void add_replicas(mo_registry *reg, const mo_request *req, mo_reply *out)
{
    char err[ERR_LEN];
    job_request jr;
    if (!decode_job_request(req, &jr, err, sizeof err)) {
        bad_body(out, err);
        return;
    }
    mo_entry *e = mo_registry_find(reg, jr.ns, jr.coordinator);
    if (!e) {
        not_found_message(err, sizeof err, jr.ns, jr.coordinator);
        reply(out, 404, err, empty_job_response());
        cJSON_Delete(jr.tree);
        return;
    }
    if (!check_count(jr.collectors, "collectors", mo_entry_count(e, MO_COLLECTORS), err,
                     sizeof err, true) ||
        !check_count(jr.learners, "learners", mo_entry_count(e, MO_LEARNERS), err, sizeof err,
                     true)) {
        reply(out, 400, err, empty_job_response());
        cJSON_Delete(jr.tree);
        return;
    }
    char *job = job_name(jr.coordinator);
    cJSON *made[2] = {cJSON_CreateArray(), cJSON_CreateArray()};
    const int64_t counts[2] = {jr.collectors, jr.learners};
    const int ports[2] = {MO_COLLECTOR_PORT, MO_LEARNER_PORT};
    const char *types[2] = {"collector", "learner"};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < counts[k]; i++) {
            char *prefix = xasprintf("%s-%s", job, types[k]);
            char *pod = mo_registry_pod_name(reg, prefix);
            char *addr = xasprintf("%s.%s:%d", pod, jr.ns, ports[k]);
            if (mo_entry_add(e, (mo_kind)k, addr, err, sizeof err) < 0)
                LOG_WARN(NULL, "cannot add invented %s %s: %s", types[k], addr, err);
            else
                cJSON_AddItemToArray(made[k], cJSON_CreateString(addr));
            free(addr);
            free(pod);
            free(prefix);
        }
    free(job);
    LOG_INFO(NULL, "added %d collectors and %d learners to %s/%s", cJSON_GetArraySize(made[0]),
             cJSON_GetArraySize(made[1]), jr.ns, jr.coordinator);
    reply(out, 200, "successfully create replicas",
          job_response(jr.ns, jr.coordinator, made[0], made[1]));
    cJSON_Delete(jr.tree);
}

static void delete_replicas(mo_registry *reg, const mo_request *req, mo_reply *out)
{
    char err[ERR_LEN];
    job_request jr;
    if (!decode_job_request(req, &jr, err, sizeof err)) {
        bad_body(out, err);
        return;
    }
    mo_entry *e = mo_registry_find(reg, jr.ns, jr.coordinator);
    if (!e) {
        not_found_message(err, sizeof err, jr.ns, jr.coordinator);
        reply(out, 404, err, empty_job_response());
        cJSON_Delete(jr.tree);
        return;
    }
    if (!check_count(jr.collectors, "collectors", 0, err, sizeof err, false) ||
        !check_count(jr.learners, "learners", 0, err, sizeof err, false)) {
        reply(out, 400, err, empty_job_response());
        cJSON_Delete(jr.tree);
        return;
    }
    cJSON *gone[2] = {cJSON_CreateArray(), cJSON_CreateArray()};
    const int64_t counts[2] = {jr.collectors, jr.learners};
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < counts[k] && mo_entry_count(e, (mo_kind)k) > 0; i++) {
            cJSON_AddItemToArray(gone[k], cJSON_CreateString(mo_entry_addr(e, (mo_kind)k, 0)));
            mo_entry_remove_at(e, (mo_kind)k, 0);
        }
    LOG_INFO(NULL, "deleted %d collectors and %d learners from %s/%s",
             cJSON_GetArraySize(gone[0]), cJSON_GetArraySize(gone[1]), jr.ns, jr.coordinator);
    reply(out, 200, "successfully delete replicas",
          job_response(jr.ns, jr.coordinator, gone[0], gone[1]));
    cJSON_Delete(jr.tree);
}

/* ---- POST /replicas/failed ---------------------------------------------- */

/* Does addr belong to the pod called name? The aggregator names a pod by the
 * address's host without its last dot-separated part; the whole host and the
 * whole address are accepted too. */
static bool addr_is_pod(const char *addr, const char *name)
{
    if (strcmp(addr, name) == 0)
        return true;
    char *host = mo_addr_host(addr, NULL);
    char *pod = mo_addr_pod_name(addr);
    bool yes = strcmp(host, name) == 0 || strcmp(pod, name) == 0;
    free(host);
    free(pod);
    return yes;
}

static bool pod_exists(const mo_registry *reg, const char *ns, const char *name)
{
    for (size_t i = 0; i < mo_registry_count(reg); i++) {
        const mo_entry *e = mo_registry_at(reg, i);
        if (strcmp(mo_entry_namespace(e), ns) != 0)
            continue;
        for (int k = 0; k < 2; k++)
            for (size_t j = 0; j < mo_entry_count(e, (mo_kind)k); j++)
                if (addr_is_pod(mo_entry_addr(e, (mo_kind)k, j), name))
                    return true;
    }
    return false;
}

/* The name DI-orchestrator gives a recreated pod: the old name without its
 * last '-' part, then a new random part. */
static char *recreated_name(mo_registry *reg, const char *pod)
{
    const char *dash = strrchr(pod, '-');
    char *prefix = dash ? xstrndup(pod, (size_t)(dash - pod)) : xstrdup("");
    char *name = mo_registry_pod_name(reg, prefix);
    free(prefix);
    return name;
}

/* Recreates (or removes) every address of the namespace that is the pod
 * called name; appends the new addresses to made. */
static void fail_pod(mo_registry *reg, mo_failed_policy policy, const failed_request *fr,
                     mo_kind reported_as, const char *name, cJSON *made)
{
    for (size_t i = 0; i < mo_registry_count(reg); i++) {
        mo_entry *e = mo_registry_at(reg, i);
        if (strcmp(mo_entry_namespace(e), fr->ns) != 0)
            continue;
        for (int k = 0; k < 2; k++) {
            /* Backwards, so that removing keeps the indices ahead valid. */
            for (size_t j = mo_entry_count(e, (mo_kind)k); j-- > 0;) {
                const char *addr = mo_entry_addr(e, (mo_kind)k, j);
                if (!addr_is_pod(addr, name))
                    continue;
                char *old = xstrdup(addr);
                if (policy == MO_FAILED_REMOVE) {
                    mo_entry_remove_at(e, (mo_kind)k, j);
                    mo_registry_record_failed(reg, fr->ns, fr->coordinator, reported_as, name,
                                              old, NULL, true);
                    LOG_INFO(NULL, "failed pod %s/%s: removed %s", fr->ns, name, old);
                } else {
                    int port = 0;
                    char *host = mo_addr_host(old, &port);
                    char *pod = mo_addr_pod_name(old);
                    char *fresh = recreated_name(reg, pod);
                    char *addr2 = xasprintf("%s.%s:%d", fresh, fr->ns, port);
                    char err[ERR_LEN];
                    if (mo_entry_replace(e, (mo_kind)k, j, addr2, err, sizeof err) < 0) {
                        LOG_WARN(NULL, "failed pod %s/%s: cannot recreate %s as %s: %s", fr->ns,
                                 name, old, addr2, err);
                    } else {
                        cJSON_AddItemToArray(made, cJSON_CreateString(addr2));
                        mo_registry_record_failed(reg, fr->ns, fr->coordinator, reported_as,
                                                  name, old, addr2, true);
                        LOG_INFO(NULL, "failed pod %s/%s: recreated %s as %s", fr->ns, name, old,
                                 addr2);
                    }
                    free(addr2);
                    free(fresh);
                    free(pod);
                    free(host);
                }
                free(old);
            }
        }
    }
}

/* Names of list (strings; null is ""), each once, in order. */
static size_t unique_names(const cJSON *list, const char **names)
{
    size_t n = 0;
    for (const cJSON *it = list ? list->child : NULL; it; it = it->next) {
        const char *s = cJSON_IsString(it) ? it->valuestring : "";
        size_t j = 0;
        while (j < n && strcmp(names[j], s) != 0)
            j++;
        if (j == n)
            names[n++] = s;
    }
    return n;
}

static void replicas_failed(mo_registry *reg, mo_failed_policy policy, const mo_request *req,
                            mo_reply *out)
{
    char err[ERR_LEN];
    failed_request fr;
    if (!decode_failed_request(req, &fr, err, sizeof err)) {
        bad_body(out, err);
        return;
    }
    const cJSON *lists[2] = {fr.collectors, fr.learners};
    cJSON *made[2] = {NULL, NULL};
    for (int k = 0; k < 2; k++) {
        int n = lists[k] ? cJSON_GetArraySize(lists[k]) : 0;
        const char **names = xcalloc((size_t)n + 1, sizeof *names);
        size_t un = unique_names(lists[k], names);
        /* Like the original, every pod of the list must exist before any is
         * recreated; collectors are done before learners are looked up. */
        for (size_t i = 0; i < un; i++)
            if (!pod_exists(reg, fr.ns, names[i])) {
                mo_registry_record_failed(reg, fr.ns, fr.coordinator, (mo_kind)k, names[i], NULL,
                                          NULL, false);
                not_found_message(err, sizeof err, fr.ns, names[i]);
                cJSON *data = k == 0 ? empty_job_response()
                                     : job_response(fr.ns, fr.coordinator, made[0], NULL);
                reply(out, 404, err, data);
                free(names);
                cJSON_Delete(fr.tree);
                return;
            }
        /* A nil Go slice (null) when nothing was recreated. */
        made[k] = cJSON_CreateArray();
        for (size_t i = 0; i < un; i++)
            fail_pod(reg, policy, &fr, (mo_kind)k, names[i], made[k]);
        if (cJSON_GetArraySize(made[k]) == 0) {
            cJSON_Delete(made[k]);
            made[k] = NULL;
        }
        free(names);
    }
    reply(out, 200, "successfully recreate replicas",
          job_response(fr.ns, fr.coordinator, made[0], made[1]));
    cJSON_Delete(fr.tree);
}

/* ---- routing ------------------------------------------------------------ */

static void not_implemented(const mo_request *req, mo_reply *out)
{
    char msg[160];
    snprintf(msg, sizeof msg, "%.100s not implemented", req->method);
    reply(out, 501, msg, NULL);
}

void mo_api_handle(mo_registry *reg, mo_failed_policy policy, const mo_request *req,
                   mo_reply *out)
{
    memset(out, 0, sizeof *out);
    const char *m = req->method;
    if (strcmp(req->path, "/v1alpha1/replicas") == 0) {
        if (strcmp(m, "GET") == 0)
            get_replicas(reg, req, out);
        else if (strcmp(m, "POST") == 0)
            add_replicas(reg, req, out);
        else if (strcmp(m, "DELETE") == 0)
            delete_replicas(reg, req, out);
        else
            not_implemented(req, out);
    } else if (strcmp(req->path, "/v1alpha1/replicas/failed") == 0) {
        if (strcmp(m, "POST") == 0)
            replicas_failed(reg, policy, req, out);
        else
            not_implemented(req, out);
    } else if (strcmp(req->path, "/healthz") == 0) {
        mo_reply_text(out, 200, MO_API_CONTENT_TYPE, "");
    } else {
        /* Go's http.NotFound, as the original's mux answers. */
        mo_reply_text(out, 404, MO_API_CONTENT_TYPE, "404 page not found\n");
    }
}
