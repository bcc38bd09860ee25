/* mo_control: the mock operator's control API. */
#include "mo_control.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

#define ERR_LEN 512

enum { CODE_OK = 0, CODE_FAILED = 1 };

static void ok(mo_reply *out, const char *message, cJSON *data)
{
    mo_reply_envelope(out, 200, true, CODE_OK, message, data, NULL);
}

static void fail(mo_reply *out, int status, const char *message)
{
    mo_reply_envelope(out, status, false, CODE_FAILED, message, NULL, NULL);
}

/* Parses the body as a JSON object; NULL after answering 400. allow_empty:
 * an empty body is {}. */
static cJSON *body_object(const mo_request *req, bool allow_empty, mo_reply *out)
{
    size_t i = 0;
    while (i < req->body_len && strchr(" \t\r\n", req->body[i]))
        i++;
    if (i == req->body_len) {
        if (allow_empty)
            return cJSON_CreateObject();
        fail(out, 400, "the request needs a JSON object body");
        return NULL;
    }
    char err[256], msg[ERR_LEN];
    cJSON *tree = jsonx_parse(req->body, req->body_len, err, sizeof err);
    if (!tree) {
        snprintf(msg, sizeof msg, "the body is not valid JSON: %s", err);
        fail(out, 400, msg);
        return NULL;
    }
    if (!cJSON_IsObject(tree)) {
        snprintf(msg, sizeof msg, "the body must be a JSON object, not %s", jsonx_type_name(tree));
        fail(out, 400, msg);
        cJSON_Delete(tree);
        return NULL;
    }
    return tree;
}

/* Rejects members other than those listed (NULL-terminated). */
static bool only_fields(const cJSON *obj, const char *const *fields, mo_reply *out)
{
    for (const cJSON *m = obj->child; m; m = m->next) {
        const char *const *f = fields;
        while (*f && strcmp(*f, m->string) != 0)
            f++;
        if (!*f) {
            char msg[ERR_LEN];
            int n = snprintf(msg, sizeof msg, "unknown field \"%.64s\" (known:", m->string);
            for (f = fields; *f && n > 0 && (size_t)n < sizeof msg; f++)
                n += snprintf(msg + n, sizeof msg - (size_t)n, " %s", *f);
            if (n > 0 && (size_t)n < sizeof msg)
                snprintf(msg + n, sizeof msg - (size_t)n, ")");
            fail(out, 400, msg);
            return false;
        }
    }
    return true;
}

/* A required, valid namespace or name field. */
static const char *name_field(const cJSON *obj, const char *key, mo_reply *out)
{
    char err[ERR_LEN], msg[ERR_LEN + 32];
    const cJSON *v = jsonx_get(obj, key);
    if (v && !cJSON_IsString(v)) {
        snprintf(msg, sizeof msg, "field \"%s\" must be a string, not %s", key,
                 jsonx_type_name(v));
        fail(out, 400, msg);
        return NULL;
    }
    const char *s = v ? v->valuestring : NULL;
    if (!mo_name_valid(s, key, err, sizeof err)) {
        snprintf(msg, sizeof msg, "field \"%s\": %s", key, err);
        fail(out, 400, msg);
        return NULL;
    }
    return s;
}

/* A required list of valid addresses, each once. */
static const cJSON *addr_list(const cJSON *obj, const char *key, mo_reply *out)
{
    char err[ERR_LEN], msg[ERR_LEN + 64];
    const cJSON *v = jsonx_get(obj, key);
    if (!v || !cJSON_IsArray(v)) {
        snprintf(msg, sizeof msg, "field \"%s\" must be a list of \"host:port\" strings%s%s", key,
                 v ? ", not " : " (it is missing)", v ? jsonx_type_name(v) : "");
        fail(out, 400, msg);
        return NULL;
    }
    if (cJSON_GetArraySize(v) > MO_LIST_MAX) {
        snprintf(msg, sizeof msg, "field \"%s\" lists more than %d addresses", key, MO_LIST_MAX);
        fail(out, 400, msg);
        return NULL;
    }
    int i = 0;
    for (const cJSON *it = v->child; it; it = it->next, i++) {
        if (!cJSON_IsString(it)) {
            snprintf(msg, sizeof msg, "%s[%d] must be a string, not %s", key, i,
                     jsonx_type_name(it));
            fail(out, 400, msg);
            return NULL;
        }
        if (!mo_addr_valid(it->valuestring, err, sizeof err)) {
            snprintf(msg, sizeof msg, "%s[%d]: %s", key, i, err);
            fail(out, 400, msg);
            return NULL;
        }
        for (const cJSON *p = v->child; p != it; p = p->next)
            if (strcmp(p->valuestring, it->valuestring) == 0) {
                snprintf(msg, sizeof msg, "%s lists %s twice", key, it->valuestring);
                fail(out, 400, msg);
                return NULL;
            }
    }
    return v;
}

static cJSON *entry_json(const mo_entry *e)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "namespace", mo_entry_namespace(e));
    cJSON_AddStringToObject(o, "name", mo_entry_name(e));
    cJSON_AddItemToObject(o, "collectors", mo_entry_list_json(e, MO_COLLECTORS));
    cJSON_AddItemToObject(o, "learners", mo_entry_list_json(e, MO_LEARNERS));
    return o;
}

typedef enum { OP_SET, OP_ADD, OP_REMOVE } list_op;

static void change_list(mo_control *c, mo_kind kind, list_op op, const mo_request *req,
                        mo_reply *out)
{
    const char *key = mo_kind_name(kind);
    const char *const fields[] = {"namespace", "name", key, NULL};
    cJSON *body = body_object(req, false, out);
    if (!body)
        return;
    const char *ns, *name;
    const cJSON *list;
    if (!only_fields(body, fields, out) || !(ns = name_field(body, "namespace", out)) ||
        !(name = name_field(body, "name", out)) || !(list = addr_list(body, key, out))) {
        cJSON_Delete(body);
        return;
    }
    char err[ERR_LEN], msg[ERR_LEN + 64];
    mo_entry *e = mo_registry_find(c->reg, ns, name);
    if (!e && op == OP_REMOVE) {
        snprintf(msg, sizeof msg, "no entry %s/%s (set or add %s first)", ns, name, key);
        fail(out, 404, msg);
        cJSON_Delete(body);
        return;
    }
    size_t have = e ? mo_entry_count(e, kind) : 0;
    size_t n = (size_t)cJSON_GetArraySize(list);
    if (op != OP_REMOVE && (op == OP_SET ? n : have + n) > MO_LIST_MAX) {
        snprintf(msg, sizeof msg, "%s/%s would hold more than %d %s", ns, name, MO_LIST_MAX, key);
        fail(out, 400, msg);
        cJSON_Delete(body);
        return;
    }
    if (!e && !(e = mo_registry_ensure(c->reg, ns, name, err, sizeof err))) {
        fail(out, 400, err);
        cJSON_Delete(body);
        return;
    }
    long changed = 0;
    if (op == OP_SET)
        mo_entry_clear(e, kind);
    for (const cJSON *it = list->child; it; it = it->next) {
        if (op == OP_REMOVE) {
            long i = mo_entry_find_addr(e, kind, it->valuestring);
            if (i >= 0) {
                mo_entry_remove_at(e, kind, (size_t)i);
                changed++;
            }
        } else if (mo_entry_add(e, kind, it->valuestring, err, sizeof err) > 0) {
            changed++;
        }
    }
    static const char *const verbs[] = {"set", "added", "removed"};
    LOG_INFO(NULL, "control: %s %ld %s of %s/%s", verbs[op], changed, key, ns, name);
    cJSON *data = entry_json(e);
    cJSON_AddItemToObject(data, "changed", jsonx_new_i64(changed));
    snprintf(msg, sizeof msg, "%s %ld %s of %s/%s", verbs[op], changed, key, ns, name);
    ok(out, msg, data);
    cJSON_Delete(body);
}

static void forget_entry(mo_control *c, const mo_request *req, mo_reply *out)
{
    const char *const fields[] = {"namespace", "name", NULL};
    cJSON *body = body_object(req, false, out);
    if (!body)
        return;
    const char *ns, *name;
    if (!only_fields(body, fields, out) || !(ns = name_field(body, "namespace", out)) ||
        !(name = name_field(body, "name", out))) {
        cJSON_Delete(body);
        return;
    }
    char msg[ERR_LEN];
    if (!mo_registry_remove(c->reg, ns, name)) {
        snprintf(msg, sizeof msg, "no entry %s/%s", ns, name);
        fail(out, 404, msg);
    } else {
        LOG_INFO(NULL, "control: forgot %s/%s", ns, name);
        snprintf(msg, sizeof msg, "forgot %s/%s", ns, name);
        ok(out, msg, NULL);
    }
    cJSON_Delete(body);
}

static void settings(mo_control *c, const mo_request *req, mo_reply *out)
{
    const char *const fields[] = {"on_failed", NULL};
    cJSON *body = body_object(req, false, out);
    if (!body)
        return;
    if (!only_fields(body, fields, out)) {
        cJSON_Delete(body);
        return;
    }
    const cJSON *v = jsonx_get(body, "on_failed");
    if (v) {
        mo_failed_policy p;
        if (!cJSON_IsString(v) || !mo_failed_policy_parse(v->valuestring, &p)) {
            fail(out, 400, "field \"on_failed\" must be \"recreate\" or \"remove\"");
            cJSON_Delete(body);
            return;
        }
        *c->policy = p;
        LOG_INFO(NULL, "control: on_failed is now %s", mo_failed_policy_name(p));
    }
    cJSON *data = cJSON_CreateObject();
    cJSON_AddStringToObject(data, "on_failed", mo_failed_policy_name(*c->policy));
    ok(out, "settings applied", data);
    cJSON_Delete(body);
}

/* Opens or closes the API port to match the faults. */
static bool sync_listening(mo_control *c, char *err, size_t errlen)
{
    bool listening = false;
    c->api_port(c->ud, &listening);
    bool want = !mo_faults_refusing(c->faults);
    if (want == listening)
        return true;
    return c->set_listening(c->ud, want, err, errlen) == 0;
}

static void fault_add(mo_control *c, const mo_request *req, mo_reply *out)
{
    cJSON *body = body_object(req, false, out);
    if (!body)
        return;
    char err[ERR_LEN], msg[ERR_LEN + 64];
    uint64_t id = mo_faults_add(c->faults, body, err, sizeof err);
    cJSON_Delete(body);
    if (!id) {
        fail(out, 400, err);
        return;
    }
    if (!sync_listening(c, err, sizeof err)) {
        mo_faults_remove(c->faults, id);
        snprintf(msg, sizeof msg, "fault not added: %s", err);
        fail(out, 500, msg);
        return;
    }
    cJSON *data = mo_faults_one_json(c->faults, id);
    char *text = jsonx_print(data);
    LOG_INFO(NULL, "control: fault %" PRIu64 " added: %s", id, text);
    free(text);
    snprintf(msg, sizeof msg, "fault %" PRIu64 " added", id);
    ok(out, msg, data);
}

static void fault_clear(mo_control *c, const mo_request *req, mo_reply *out)
{
    const char *const fields[] = {"id", NULL};
    cJSON *body = body_object(req, true, out);
    if (!body)
        return;
    if (!only_fields(body, fields, out)) {
        cJSON_Delete(body);
        return;
    }
    char err[ERR_LEN], msg[ERR_LEN + 64];
    const cJSON *idv = jsonx_get(body, "id");
    if (idv) {
        int64_t id;
        if (!jsonx_get_i64(idv, &id) || id < 1) {
            fail(out, 400, "field \"id\" must be a fault id (an integer >= 1)");
            cJSON_Delete(body);
            return;
        }
        if (!mo_faults_remove(c->faults, (uint64_t)id)) {
            snprintf(msg, sizeof msg, "no fault with id %" PRId64, id);
            fail(out, 404, msg);
            cJSON_Delete(body);
            return;
        }
        snprintf(msg, sizeof msg, "fault %" PRId64 " cleared", id);
    } else {
        mo_faults_clear(c->faults);
        snprintf(msg, sizeof msg, "all faults cleared");
    }
    cJSON_Delete(body);
    LOG_INFO(NULL, "control: %s", msg);
    if (!sync_listening(c, err, sizeof err)) {
        char m2[ERR_LEN * 3];
        snprintf(m2, sizeof m2, "%s, but %s; send DELETE /control/fault again to retry", msg, err);
        fail(out, 500, m2);
        return;
    }
    ok(out, msg, mo_faults_to_json(c->faults));
}

static void journal_get(mo_control *c, const mo_request *req, mo_reply *out)
{
    bool present = false;
    const char *s = mo_request_param(req, "since", &present);
    uint64_t since = 0;
    if (present) {
        char *end = NULL;
        errno = 0;
        unsigned long long v = s ? strtoull(s, &end, 10) : 0;
        if (!s || !*s || *end || errno || s[0] == '-') {
            fail(out, 400, "query parameter since must be a sequence number (an integer >= 0)");
            return;
        }
        since = v;
    }
    ok(out, "journal", mo_journal_to_json(c->journal, since));
}

static cJSON *state_json(mo_control *c)
{
    bool listening = false;
    int port = c->api_port(c->ud, &listening);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddItemToObject(o, "port", jsonx_new_i64(port));
    cJSON_AddBoolToObject(o, "api_listening", listening);
    cJSON_AddStringToObject(o, "on_failed", mo_failed_policy_name(*c->policy));
    cJSON_AddItemToObject(o, "replicas", mo_registry_to_json(c->reg));
    cJSON_AddItemToObject(o, "failed", mo_registry_failed_json(c->reg));
    cJSON_AddItemToObject(o, "failed_dropped",
                          jsonx_new_i64((int64_t)mo_registry_failed_dropped(c->reg)));
    cJSON_AddItemToObject(o, "faults", mo_faults_to_json(c->faults));
    cJSON_AddItemToObject(o, "journal_count", jsonx_new_i64((int64_t)mo_journal_count(c->journal)));
    cJSON_AddItemToObject(o, "journal_dropped",
                          jsonx_new_i64((int64_t)mo_journal_dropped(c->journal)));
    return o;
}

/* One route: path and method, and what runs. */
typedef enum {
    R_STATE,
    R_SET_L,
    R_ADD_L,
    R_REMOVE_L,
    R_SET_C,
    R_ADD_C,
    R_REMOVE_C,
    R_FORGET,
    R_SETTINGS,
    R_FAULT_ADD,
    R_FAULT_GET,
    R_FAULT_CLEAR,
    R_JOURNAL_GET,
    R_JOURNAL_CLEAR,
} route_id;

static const struct {
    const char *path;
    const char *method;
    route_id id;
} routes[] = {
    {"/control/state", "GET", R_STATE},
    {"/control/learners", "PUT", R_SET_L},
    {"/control/learners/add", "POST", R_ADD_L},
    {"/control/learners/remove", "POST", R_REMOVE_L},
    {"/control/collectors", "PUT", R_SET_C},
    {"/control/collectors/add", "POST", R_ADD_C},
    {"/control/collectors/remove", "POST", R_REMOVE_C},
    {"/control/replicas", "DELETE", R_FORGET},
    {"/control/settings", "PUT", R_SETTINGS},
    {"/control/fault", "POST", R_FAULT_ADD},
    {"/control/fault", "GET", R_FAULT_GET},
    {"/control/fault", "DELETE", R_FAULT_CLEAR},
    {"/control/journal", "GET", R_JOURNAL_GET},
    {"/control/journal", "DELETE", R_JOURNAL_CLEAR},
};

void mo_control_handle(mo_control *c, const mo_request *req, mo_reply *out)
{
    memset(out, 0, sizeof *out);
    bool path_known = false;
    char allowed[64] = "";
    size_t n = sizeof routes / sizeof routes[0], i;
    for (i = 0; i < n; i++) {
        if (strcmp(routes[i].path, req->path) != 0)
            continue;
        path_known = true;
        if (strcmp(routes[i].method, req->method) == 0)
            break;
        size_t used = strlen(allowed);
        snprintf(allowed + used, sizeof allowed - used, "%s%s", used ? ", " : "", routes[i].method);
    }
    if (i == n) {
        char msg[ERR_LEN];
        if (path_known)
            snprintf(msg, sizeof msg, "%.32s is not allowed on %.200s (use %s)", req->method,
                     req->path, allowed);
        else
            snprintf(msg, sizeof msg,
                     "no control endpoint %.200s (see /control/state, /control/learners, "
                     "/control/collectors, /control/replicas, /control/settings, "
                     "/control/fault, /control/journal)",
                     req->path);
        fail(out, path_known ? 405 : 404, msg);
        return;
    }
    /* i < n here: i == n returned above */
    // cppcheck-suppress arrayIndexOutOfBounds
    switch (routes[i].id) {
    case R_STATE:
        ok(out, "state", state_json(c));
        break;
    case R_SET_L:
        change_list(c, MO_LEARNERS, OP_SET, req, out);
        break;
    case R_ADD_L:
        change_list(c, MO_LEARNERS, OP_ADD, req, out);
        break;
    case R_REMOVE_L:
        change_list(c, MO_LEARNERS, OP_REMOVE, req, out);
        break;
    case R_SET_C:
        change_list(c, MO_COLLECTORS, OP_SET, req, out);
        break;
    case R_ADD_C:
        change_list(c, MO_COLLECTORS, OP_ADD, req, out);
        break;
    case R_REMOVE_C:
        change_list(c, MO_COLLECTORS, OP_REMOVE, req, out);
        break;
    case R_FORGET:
        forget_entry(c, req, out);
        break;
    case R_SETTINGS:
        settings(c, req, out);
        break;
    case R_FAULT_ADD:
        fault_add(c, req, out);
        break;
    case R_FAULT_GET:
        ok(out, "faults", mo_faults_to_json(c->faults));
        break;
    case R_FAULT_CLEAR:
        fault_clear(c, req, out);
        break;
    case R_JOURNAL_GET:
        journal_get(c, req, out);
        break;
    case R_JOURNAL_CLEAR:
        mo_journal_clear(c->journal);
        ok(out, "journal cleared", NULL);
        break;
    }
}
