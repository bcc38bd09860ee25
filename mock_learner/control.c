/* control: the mock learner's control API. */
#include "control.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs.h"
#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

#define CONTROL_BODY_LIMIT ((size_t)1 << 20)

struct control {
    hs_server *http;
    learner **learners;
    int count;
    fault_set *faults;
};

static void reply(hs_request *r, int status, cJSON *o)
{
    char *t = jsonx_print(o);
    cJSON_Delete(o);
    xbuf b = {0};
    xbuf_puts(&b, t);
    xbuf_puts(&b, "\n");
    free(t);
    size_t len = b.len;
    hs_reply(r, status, NULL, xbuf_take(&b), len);
}

static void reply_error(hs_request *r, int status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void reply_error(hs_request *r, int status, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    LOG_INFO(NULL, "control: %s %s: %d %s", hs_method(r), hs_path(r), status, msg);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", false);
    cJSON_AddStringToObject(o, "error", msg);
    reply(r, status, o);
}

static cJSON *ok_object(void)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddBoolToObject(o, "ok", true);
    return o;
}

/* The request body as JSON; NULL if it was answered (400). An empty body is
 * an empty object when empty_ok. */
static cJSON *body_json(hs_request *r, bool empty_ok)
{
    if (hs_body_len(r) == 0) {
        if (empty_ok)
            return cJSON_CreateObject();
        reply_error(r, 400, "the body is empty; %s %s needs a fault object or a list of them", hs_method(r),
                    hs_path(r));
        return NULL;
    }
    char err[200];
    cJSON *j = jsonx_parse(hs_body(r), hs_body_len(r), err, sizeof err);
    if (!j)
        reply_error(r, 400, "the body is not valid JSON: %s", err);
    return j;
}

static void apply_now(control *c, const fault_now *now, size_t nnow)
{
    for (size_t i = 0; i < nnow; i++) {
        if (now[i].learner >= 0) {
            learner_apply(c->learners[now[i].learner], now[i].kind, now[i].ms, false, now[i].id);
            continue;
        }
        for (int k = 0; k < c->count; k++)
            learner_apply(c->learners[k], now[i].kind, now[i].ms, false, now[i].id);
    }
}

/* Adds faults and answers; the faults that act at once are applied. */
static void add_faults(control *c, hs_request *r, const cJSON *spec)
{
    fault_now now[FAULT_MAX];
    int ids[FAULT_MAX];
    size_t nnow = 0, nids = 0;
    char err[600];
    int id = fault_set_add(c->faults, spec, false, now, &nnow, ids, &nids, err, sizeof err);
    if (!id) {
        reply_error(r, 400, "bad fault: %s", err);
        return;
    }
    apply_now(c, now, nnow);
    cJSON *o = ok_object();
    cJSON_AddItemToObject(o, "id", jsonx_new_i64(id));
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < nids; i++)
        cJSON_AddItemToArray(arr, jsonx_new_i64(ids[i]));
    cJSON_AddItemToObject(o, "ids", arr);
    LOG_INFO(NULL, "control: %zu fault(s) added from id %d (%zu acting at once)", nids, id, nnow);
    reply(r, 200, o);
}

static void do_state(control *c, hs_request *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_CreateArray();
    for (int k = 0; k < c->count; k++)
        cJSON_AddItemToArray(arr, learner_state_json(c->learners[k]));
    cJSON_AddItemToObject(o, "learners", arr);
    cJSON_AddItemToObject(o, "faults", jsonx_new_i64((int64_t)fault_set_count(c->faults)));
    reply(r, 200, o);
}

static void do_fault(control *c, hs_request *r, const char *method)
{
    if (strcmp(method, "GET") == 0) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "faults", fault_set_to_json(c->faults));
        reply(r, 200, o);
    } else if (strcmp(method, "POST") == 0) {
        cJSON *j = body_json(r, false);
        if (!j)
            return;
        add_faults(c, r, j);
        cJSON_Delete(j);
    } else if (strcmp(method, "DELETE") == 0) {
        size_t n = fault_set_clear(c->faults);
        for (int k = 0; k < c->count; k++)
            learner_lift(c->learners[k]);
        LOG_INFO(NULL, "control: %zu fault(s) cleared, learners lifted", n);
        cJSON *o = ok_object();
        cJSON_AddItemToObject(o, "cleared", jsonx_new_i64((int64_t)n));
        reply(r, 200, o);
    } else {
        reply_error(r, 405, "method %s is not allowed on /fault; use GET, POST or DELETE", method);
    }
}

static void do_fault_id(control *c, hs_request *r, const char *method, const char *idtext)
{
    if (strcmp(method, "DELETE") != 0) {
        reply_error(r, 405, "method %s is not allowed on /fault/<id>; use DELETE", method);
        return;
    }
    char *end;
    errno = 0;
    long id = strtol(idtext, &end, 10);
    if (errno || end == idtext || *end || id < 1 || id > 1000000000L) {
        reply_error(r, 400, "fault id '%.40s' is not a positive integer", idtext);
        return;
    }
    if (!fault_set_remove(c->faults, (int)id)) {
        reply_error(r, 404, "no fault has id %ld (GET /fault lists them)", id);
        return;
    }
    reply(r, 200, ok_object());
}

static void do_learner(control *c, hs_request *r, const char *method, const char *rest)
{
    const char *slash = strchr(rest, '/');
    if (!slash || slash == rest || !slash[1] || strchr(slash + 1, '/')) {
        reply_error(r, 404, "use POST /learner/<index or id>/<drop|die|refuse|no_heartbeat|resume>");
        return;
    }
    char ref[80];
    snprintf(ref, sizeof ref, "%.*s", (int)(slash - rest < 79 ? slash - rest : 79), rest);
    const char *action = slash + 1;
    int k = fault_learner_index(c->faults, ref);
    if (k < 0) {
        reply_error(r, 404, "learner '%s' does not exist (there are %d: indexes 0..%d or their ids)", ref, c->count,
                    c->count - 1);
        return;
    }
    if (strcmp(method, "POST") != 0) {
        reply_error(r, 405, "method %s is not allowed on /learner/%s/%s; use POST", method, ref, action);
        return;
    }
    cJSON *body = body_json(r, true);
    if (!body)
        return;
    if (!cJSON_IsObject(body)) {
        reply_error(r, 400, "the body must be a JSON object, not %s", jsonx_type_name(body));
        cJSON_Delete(body);
        return;
    }
    if (strcmp(action, "resume") == 0) {
        if (body->child) {
            reply_error(r, 400, "resume takes no members; got \"%.64s\"", body->child->string);
        } else {
            learner_lift(c->learners[k]);
            reply(r, 200, ok_object());
        }
        cJSON_Delete(body);
        return;
    }
    static const char *const allowed[] = {"drop", "die", "refuse", "no_heartbeat"};
    bool known = false;
    for (size_t i = 0; i < sizeof allowed / sizeof allowed[0]; i++)
        known = known || strcmp(action, allowed[i]) == 0;
    if (!known) {
        reply_error(r, 404, "no action '%.64s' on a learner; use drop, die, refuse, no_heartbeat or resume", action);
        cJSON_Delete(body);
        return;
    }
    /* The path names the learner and the kind; a trigger would make a fault
     * that waits for a task, which is POST /fault's job. */
    static const char *const not_here[] = {"task", "at", "times", "prob", "learner", "kind"};
    for (size_t i = 0; i < sizeof not_here / sizeof not_here[0]; i++)
        if (jsonx_get(body, not_here[i])) {
            reply_error(r, 400, "member \"%s\" is not allowed here: /learner/%s/%s acts at once (POST /fault makes "
                                "faults that fire on tasks)", not_here[i], ref, action);
            cJSON_Delete(body);
            return;
        }
    cJSON_AddItemToObject(body, "learner", jsonx_new_i64(k));
    cJSON_AddStringToObject(body, "kind", action);
    add_faults(c, r, body);
    cJSON_Delete(body);
}

static void on_request(void *data, hs_request *r)
{
    control *c = data;
    const char *path = hs_path(r), *method = hs_method(r);
    if (strcmp(path, "/state") == 0) {
        if (strcmp(method, "GET") != 0)
            reply_error(r, 405, "method %s is not allowed on /state; use GET", method);
        else
            do_state(c, r);
    } else if (strcmp(path, "/fault") == 0) {
        do_fault(c, r, method);
    } else if (strncmp(path, "/fault/", 7) == 0) {
        do_fault_id(c, r, method, path + 7);
    } else if (strncmp(path, "/learner/", 9) == 0) {
        do_learner(c, r, method, path + 9);
    } else {
        reply_error(r, 404,
                    "no endpoint %s %.100s; endpoints: GET /state, GET|POST|DELETE /fault, DELETE /fault/<id>, "
                    "POST /learner/<k>/<drop|die|refuse|no_heartbeat|resume>",
                    method, path);
    }
}

control *control_start(ev_loop *loop, const char *host, int port, learner **learners, int count, fault_set *faults,
                       char *err, size_t errlen)
{
    control *c = xcalloc(1, sizeof *c);
    c->learners = learners;
    c->count = count;
    c->faults = faults;
    hs_config cfg;
    hs_config_init(&cfg);
    cfg.host = host;
    cfg.port = port;
    cfg.body_limit = CONTROL_BODY_LIMIT;
    cfg.connection_limit = 64;
    c->http = hs_start(loop, &cfg, on_request, c, err, errlen);
    if (!c->http) {
        free(c);
        return NULL;
    }
    return c;
}

int control_port(const control *c)
{
    return hs_port(c->http);
}

void control_stop(control *c)
{
    if (!c)
        return;
    hs_stop(c->http);
    free(c);
}
