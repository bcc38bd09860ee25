/* slave: the slave end of the interaction protocol. */
#include "slave.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evt.h"
#include "hc.h"
#include "ilog.h"
#include "jsonx.h"
#include "proto.h"
#include "xalloc.h"

struct slave {
    ev_loop *loop;
    slave_config cfg;
    char *name;
    char *ev_learner, *ev_label; /* events' learner and label, or NULL */
    slave_callbacks cbs;
    void *ud;
    hs_server *http;
    hc_client *client;
    char self_token[PROTO_TOKEN_LEN + 1];
    bool shutting_down;
    bool connected;
    char *master_token;
    char *master_address;
    char *task_id;
    ev_timer *hb_timer;
    hc_req *hb_req;
    bool hb_paused;
    int hb_failures;
    bool hb_answered; /* a heartbeat succeeded since /connect */
    unsigned long hb_sent;
    unsigned reports_pending;
    const char *task_text; /* the /task/new body while on_task runs (raw_refs) */
};

void slave_config_init(slave_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    hs_config_init(&cfg->http);
    cfg->name = "slave";
    cfg->heartbeat_span_ms = 3000;
    cfg->heartbeat_fail_limit = 3;
    cfg->retries = 5;
    cfg->retry_wait_ms = 1000;
    cfg->request_timeout_ms = 30000;
    cfg->raw_depth = -1;
}

/* ---- replies ---- */

static void reply_code(hs_request *r, int status, proto_code_id id)
{
    hs_reply_json(r, status, proto_error_envelope(id));
}

static void reply_msg(hs_request *r, int status, bool ok, int code, const char *msg)
{
    hs_reply_json(r, status, proto_envelope(ok, code, msg, NULL));
}

/* ---- heartbeats ---- */

static void hb_schedule(slave *s, long delay_ms);
static void master_lost(slave *s, const char *why, evt_cause cause);

static void on_hb_reply(void *data, const hc_result *res)
{
    slave *s = data;
    s->hb_req = NULL;
    if (!s->connected)
        return;
    if (!res->error && res->status == 200) {
        s->hb_failures = 0;
        s->hb_answered = true;
        return;
    }
    char why[512];
    if (res->error)
        snprintf(why, sizeof why, "heartbeat to %s failed: %s", s->master_address, res->error);
    else
        snprintf(why, sizeof why, "heartbeat to %s answered HTTP %ld: %.200s", s->master_address, res->status,
                 res->body);
    /* A master that no longer knows our token has dropped us: no point in
     * waiting for more failures. Before any heartbeat was answered, the
     * master may not have registered us yet (the reference registers the
     * connection after its /connect returns): count it as a failure. */
    if (!res->error && (res->status == 403 || res->status == 400) && s->hb_answered) {
        master_lost(s, why, EVT_CAUSE_rejected);
        return;
    }
    s->hb_failures++;
    LOG_WARN(s->name, "%s (%d/%d)", why, s->hb_failures, s->cfg.heartbeat_fail_limit);
    if (s->hb_failures >= s->cfg.heartbeat_fail_limit)
        master_lost(s, why, res->error ? EVT_CAUSE_connection_lost : EVT_CAUSE_http_status);
}

static void send_heartbeat(slave *s)
{
    if (s->hb_req || s->hb_paused || !s->connected)
        return;
    hc_opts o;
    hc_opts_init(&o);
    char *url = xasprintf("%s/slave/heartbeat", s->master_address);
    o.method = "GET";
    o.url = url;
    o.token = s->master_token;
    o.channel = s->cfg.channel;
    o.retries = 0; /* each span is the next try */
    long span = s->cfg.heartbeat_span_ms;
    o.timeout_ms = span > 1000 ? span : 1000;
    o.connect_timeout_ms = o.timeout_ms;
    s->hb_req = hc_send(s->client, &o, on_hb_reply, s);
    free(url);
    if (s->hb_req)
        s->hb_sent++;
}

static void on_hb_timer(ev_loop *loop, void *data)
{
    (void)loop;
    slave *s = data;
    s->hb_timer = NULL;
    send_heartbeat(s);
    hb_schedule(s, s->cfg.heartbeat_span_ms);
}

static void hb_schedule(slave *s, long delay_ms)
{
    if (s->hb_timer)
        ev_timer_stop(s->loop, s->hb_timer);
    s->hb_timer = ev_timer_start(s->loop, (uint64_t)delay_ms, on_hb_timer, s);
}

static void hb_stop(slave *s)
{
    if (s->hb_timer)
        ev_timer_stop(s->loop, s->hb_timer);
    s->hb_timer = NULL;
    if (s->hb_req)
        hc_cancel(s->client, s->hb_req);
    s->hb_req = NULL;
}

static void forget_master(slave *s)
{
    hb_stop(s);
    s->connected = false;
    free(s->master_token);
    free(s->master_address);
    free(s->task_id);
    s->master_token = s->master_address = s->task_id = NULL;
    s->hb_failures = 0;
}

static void master_lost(slave *s, const char *why, evt_cause cause)
{
    LOG_WARN(s->name, "master lost: %s", why);
    EVT_EMIT(master_lost, .learner = s->ev_learner, .label = s->ev_label, .master = s->master_address,
             .reason = why, .cause = evt_cause_name(cause));
    forget_master(s);
    if (s->cbs.on_master_lost)
        s->cbs.on_master_lost(s->ud, why);
}

/* ---- request checks ---- */

/* Returns true if the request may go on; else it has been answered. */
static bool check_channel(slave *s, hs_request *r)
{
    const char *ch = hs_header(r, "Channel");
    int v;
    if (!ch) {
        reply_code(r, 400, PROTO_CHANNEL_NOT_FOUND);
        return false;
    }
    if (!proto_parse_channel(ch, &v)) {
        /* The reference crashes here with a 500 (fix). */
        reply_msg(r, 400, false, proto_code(PROTO_CHANNEL_NOT_FOUND), "Channel is not an integer.");
        return false;
    }
    if (v != s->cfg.channel) {
        reply_code(r, 403, PROTO_CHANNEL_INVALID);
        return false;
    }
    return true;
}

static bool check_self_token(slave *s, hs_request *r)
{
    const char *t = hs_header(r, "Token");
    if (!t) {
        reply_code(r, 400, PROTO_SELF_TOKEN_NOT_FOUND);
        return false;
    }
    if (!proto_token_equal(t, s->self_token)) {
        reply_code(r, 403, PROTO_SELF_TOKEN_INVALID);
        return false;
    }
    return true;
}

static cJSON *parse_body(slave *s, hs_request *r, int raw_depth, bool refs)
{
    char err[200];
    if (hs_body_len(r) == 0) {
        reply_msg(r, 400, false, 400, "Request body is empty; a JSON object is required.");
        return NULL;
    }
    cJSON *j = refs ? jsonx_parse_refs(hs_body(r), hs_body_len(r), raw_depth, err, sizeof err)
                    : jsonx_parse_shallow(hs_body(r), hs_body_len(r), raw_depth, err, sizeof err);
    if (!j) {
        char *m = xasprintf("Request body is not valid JSON: %s", err);
        reply_msg(r, 400, false, 400, m);
        free(m);
        return NULL;
    }
    if (!cJSON_IsObject(j)) {
        char *m = xasprintf("Request body is a JSON %s; a JSON object is required.", jsonx_type_name(j));
        reply_msg(r, 400, false, 400, m);
        free(m);
        cJSON_Delete(j);
        return NULL;
    }
    (void)s;
    return j;
}

/* Applies a verdict; returns true if the request was answered by it. */
static bool apply_verdict(hs_request *r, const slave_verdict *v, proto_code_id refuse_code)
{
    if (v->status > 0) {
        reply_msg(r, v->status, false, v->code ? v->code : v->status, v->message[0] ? v->message : "Failed.");
        return true;
    }
    if (v->refuse) {
        reply_msg(r, 403, false, proto_code(refuse_code),
                  v->message[0] ? v->message : proto_code_message(refuse_code));
        return true;
    }
    return false;
}

/* ---- endpoints ---- */

static void do_connect(slave *s, hs_request *r)
{
    if (s->connected) {
        reply_code(r, 400, PROTO_SLAVE_ALREADY_CONNECTED);
        return;
    }
    cJSON *j = parse_body(s, r, -1, false);
    if (!j)
        return;
    const cJSON *m = jsonx_get(j, "master");
    const char *addr = cJSON_IsObject(m) ? jsonx_get_str(m, "address") : NULL;
    if (!addr || strncmp(addr, "http://", 7) != 0 || strlen(addr) > 2048) {
        reply_msg(r, 400, false, 400,
                  "Request body needs \"master\": {\"address\": \"http://host:port\"} (a plain-HTTP URL string of at "
                  "most 2048 characters).");
        cJSON_Delete(j);
        return;
    }
    slave_verdict v = {0};
    if (s->cbs.on_connect)
        s->cbs.on_connect(s->ud, jsonx_get(j, "data"), &v);
    if (apply_verdict(r, &v, PROTO_SLAVE_CONNECTION_REFUSED)) {
        cJSON_Delete(j);
        return;
    }
    s->connected = true;
    s->master_token = xstrdup(hs_header(r, "Token"));
    size_t al = strlen(addr);
    while (al > 0 && addr[al - 1] == '/')
        al--;
    s->master_address = xstrndup(addr, al);
    s->hb_failures = 0;
    s->hb_answered = false;
    char red[16];
    LOG_INFO(s->name, "connected to master %s (token %s)", s->master_address,
             ilog_redact_token(s->master_token, red, sizeof red));
    EVT_EMIT(master_connected, .learner = s->ev_learner, .label = s->ev_label, .master = s->master_address);
    cJSON_Delete(j);
    reply_msg(r, 200, true, 0, "Connect success.");
    hb_schedule(s, 0);
}

static void do_disconnect(slave *s, hs_request *r)
{
    cJSON *j = parse_body(s, r, -1, false);
    if (!j)
        return;
    slave_verdict v = {0};
    if (s->cbs.on_disconnect)
        s->cbs.on_disconnect(s->ud, jsonx_get(j, "data"), &v);
    cJSON_Delete(j);
    if (apply_verdict(r, &v, PROTO_SLAVE_DISCONNECTION_REFUSED))
        return;
    LOG_INFO(s->name, "disconnected by master %s", s->master_address);
    EVT_EMIT(master_lost, .learner = s->ev_learner, .label = s->ev_label, .master = s->master_address,
             .reason = "disconnected by the master", .cause = evt_cause_name(EVT_CAUSE_disconnected));
    forget_master(s);
    reply_msg(r, 200, true, 0, "Disconnect success.");
    if (s->cbs.on_master_lost)
        s->cbs.on_master_lost(s->ud, "disconnected by the master");
}

static void do_task(slave *s, hs_request *r)
{
    if (s->task_id) {
        reply_code(r, 400, PROTO_SLAVE_TASK_ALREADY_EXIST);
        return;
    }
    cJSON *j = parse_body(s, r, s->cfg.raw_depth, s->cfg.raw_refs);
    if (!j)
        return;
    /* Without refs the tree holds all that is needed: with a learn batch of
     * 128 MiB, keeping the body too would double the memory for the whole
     * task. With refs the tree points into the body, kept until on_task
     * has returned (and is then freed before the reply). */
    if (!s->cfg.raw_refs)
        hs_body_free(r);
    const cJSON *task = jsonx_get(j, "task");
    const cJSON *id = cJSON_IsObject(task) ? jsonx_get(task, "id") : NULL;
    const cJSON *data = jsonx_get(j, "data");
    const char *problem = NULL;
    if (!task)
        problem = "Request body has no \"task\" object.";
    else if (!cJSON_IsObject(task))
        problem = "\"task\" is not an object.";
    else if (!id)
        problem = "Request body has no \"task\".\"id\".";
    else if (!cJSON_IsString(id) || !proto_uuid_valid(id->valuestring))
        problem = "\"task\".\"id\" is not a UUID string.";
    else if (!data)
        problem = "Request body has no \"data\" object.";
    else if (!cJSON_IsObject(data))
        problem = "\"data\" is not an object.";
    if (problem) {
        reply_msg(r, 400, false, 400, problem);
        cJSON_Delete(j);
        return;
    }
    slave_verdict v = {0};
    /* The task is current while on_task runs, so that the callback may
     * finish it at once. */
    s->task_id = xstrdup(id->valuestring);
    s->task_text = hs_body(r);
    if (s->cbs.on_task)
        s->cbs.on_task(s->ud, id->valuestring, data, &v); /* id lives in j */
    s->task_text = NULL;
    cJSON_Delete(j);
    if (s->cfg.raw_refs)
        hs_body_free(r);
    if (v.refuse || v.status > 0) {
        if (s->task_id) {
            free(s->task_id);
            s->task_id = NULL;
        }
        apply_verdict(r, &v, PROTO_SLAVE_TASK_REFUSED);
        return;
    }
    reply_msg(r, 200, true, 0, "Task received!");
}

static void on_request(void *data, hs_request *r)
{
    slave *s = data;
    const char *path = hs_path(r), *method = hs_method(r);
    enum { P_CONNECT, P_DISCONNECT, P_TASK, P_PING, P_SHUTDOWN, P_NONE } p = P_NONE;
    const char *want = NULL;
    if (strcmp(path, "/connect") == 0)
        p = P_CONNECT, want = "POST";
    else if (strcmp(path, "/disconnect") == 0)
        p = P_DISCONNECT, want = "DELETE";
    else if (strcmp(path, "/task/new") == 0)
        p = P_TASK, want = "POST";
    else if (strcmp(path, "/ping") == 0)
        p = P_PING, want = "GET";
    else if (strcmp(path, "/shutdown") == 0)
        p = P_SHUTDOWN, want = "DELETE";
    if (p == P_NONE) {
        char *m = xasprintf("No endpoint %s %s on this slave.", method, path);
        reply_msg(r, 404, false, 404, m);
        free(m);
        return;
    }
    if (strcmp(method, want) != 0) {
        char *m = xasprintf("Method %s is not allowed on %s; use %s.", method, path, want);
        reply_msg(r, 405, false, 405, m);
        free(m);
        return;
    }
    if (s->shutting_down) {
        reply_code(r, 401, PROTO_SYSTEM_SHUTTING_DOWN);
        return;
    }
    if (p == P_PING || p == P_SHUTDOWN) {
        if (!check_self_token(s, r))
            return;
        if (p == P_PING) {
            reply_msg(r, 200, true, 0, "PONG!");
            return;
        }
        s->shutting_down = true;
        reply_msg(r, 200, true, 0, "Shutdown success.");
        LOG_INFO(s->name, "shutdown requested");
        if (s->cbs.on_shutdown) {
            s->cbs.on_shutdown(s->ud);
        } else {
            hs_stop_later(s->http);
            s->http = NULL;
        }
        return;
    }
    if (!check_channel(s, r))
        return;
    const char *tok = hs_header(r, "Token");
    if (!tok) {
        reply_code(r, 400, PROTO_SLAVE_MASTER_TOKEN_NOT_FOUND);
        return;
    }
    if (p != P_CONNECT && (!s->master_token || !proto_token_equal(tok, s->master_token))) {
        reply_code(r, 403, PROTO_SLAVE_MASTER_TOKEN_INVALID);
        return;
    }
    if (p == P_CONNECT)
        do_connect(s, r);
    else if (p == P_DISCONNECT)
        do_disconnect(s, r);
    else
        do_task(s, r);
}

/* ---- API ---- */

slave *slave_new(ev_loop *loop, const slave_config *cfg, const slave_callbacks *cbs, void *ud, char *err,
                 size_t errlen)
{
    if (cfg->heartbeat_span_ms < 200 && !cfg->allow_fast_heartbeat) {
        snprintf(err, errlen, "heartbeat span %ld ms is below the minimum of 200 ms", cfg->heartbeat_span_ms);
        return NULL;
    }
    if (cfg->heartbeat_span_ms < 1) {
        snprintf(err, errlen, "heartbeat span must be positive");
        return NULL;
    }
    slave *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    s->cfg = *cfg;
    s->name = xstrdup(cfg->name ? cfg->name : "slave");
    s->cfg.name = s->name;
    if (s->cfg.heartbeat_fail_limit < 1)
        s->cfg.heartbeat_fail_limit = 1;
    if (cbs)
        s->cbs = *cbs;
    s->ud = ud;
    if (proto_token_new(s->self_token) < 0) {
        snprintf(err, errlen, "getrandom failed: cannot make a token");
        free(s->name);
        free(s);
        return NULL;
    }
    s->client = hc_new(loop);
    s->http = s->client ? hs_start(loop, &cfg->http, on_request, s, err, errlen) : NULL;
    if (!s->http) {
        if (!s->client)
            snprintf(err, errlen, "cannot create an HTTP client");
        hc_free(s->client);
        free(s->name);
        free(s);
        return NULL;
    }
    s->ev_learner = cfg->event_learner ? xstrdup(cfg->event_learner) : NULL;
    s->ev_label = cfg->event_label ? xstrdup(cfg->event_label) : NULL;
    s->cfg.event_learner = s->ev_learner;
    s->cfg.event_label = s->ev_label;
    return s;
}

void slave_free(slave *s)
{
    if (!s)
        return;
    forget_master(s);
    if (s->http)
        hs_stop(s->http);
    hc_free(s->client);
    free(s->name);
    free(s->ev_learner);
    free(s->ev_label);
    free(s);
}

int slave_port(const slave *s)
{
    return s->http ? hs_port(s->http) : -1;
}

const char *slave_self_token(const slave *s)
{
    return s->self_token;
}

bool slave_connected(const slave *s)
{
    return s->connected;
}

const char *slave_task_text(const slave *s)
{
    return s->task_text;
}

const char *slave_current_task(const slave *s)
{
    return s->task_id;
}

typedef struct {
    slave *s;
    char *what;
} report_ctx;

static void report_ctx_free(void *data)
{
    report_ctx *rc = data;
    rc->s->reports_pending--;
    free(rc->what);
    free(rc);
}

static void on_report_reply(void *data, const hc_result *res)
{
    report_ctx *rc = data;
    char *what = rc->what;
    const char *who = rc->s->name;
    rc->s->reports_pending--;
    if (res->error)
        LOG_ERROR(who, "report %s failed: %s", what, res->error);
    else if (res->status != 200)
        LOG_ERROR(who, "report %s answered HTTP %ld: %.300s", what, res->status, res->body);
    else
        LOG_DEBUG(who, "report %s delivered", what);
    free(what);
    free(rc);
}

static int send_report(slave *s, const char *task_id, const char *path, char *body, size_t len, size_t declared)
{
    if (!s->task_id || !task_id || strcmp(s->task_id, task_id) != 0 || !s->connected) {
        free(body);
        return -1;
    }
    hc_opts o;
    hc_opts_init(&o);
    char *url = xasprintf("%s%s", s->master_address, path);
    o.method = "PUT";
    o.url = url;
    o.token = s->master_token;
    o.channel = s->cfg.channel;
    o.body = body;
    o.body_len = len;
    o.retries = s->cfg.retries;
    o.retry_wait_ms = s->cfg.retry_wait_ms;
    o.timeout_ms = s->cfg.request_timeout_ms;
    if (declared > len) {
        o.declared_length = declared;
        o.retries = 0;
        o.timeout_ms = 500;
    }
    report_ctx *rc = xmalloc(sizeof *rc);
    o.free_data = report_ctx_free;
    rc->s = s;
    rc->what = xasprintf("%s of task %s to %s", path, task_id, s->master_address);
    hc_req *req = hc_send(s->client, &o, on_report_reply, rc);
    free(url);
    free(s->task_id);
    s->task_id = NULL;
    if (!req) {
        LOG_ERROR(s->name, "cannot send %s", rc->what);
        free(rc->what);
        free(rc);
        return -1;
    }
    s->reports_pending++;
    return 0;
}

static int report(slave *s, const char *task_id, bool ok, cJSON *result)
{
    /* The reference sends {} in place of an empty or false result. */
    if (!result || cJSON_IsFalse(result) || cJSON_IsNull(result) ||
        ((cJSON_IsObject(result) || cJSON_IsArray(result)) && !result->child)) {
        cJSON_Delete(result);
        result = cJSON_CreateObject();
    }
    char *rt = jsonx_print(result);
    cJSON_Delete(result);
    cJSON *idj = cJSON_CreateString(task_id ? task_id : "");
    char *idt = jsonx_print(idj);
    cJSON_Delete(idj);
    char *body = xasprintf("{\"task\": {\"id\": %s}, \"result\": %s}", idt, rt);
    free(idt);
    free(rt);
    return send_report(s, task_id, ok ? "/slave/task/complete" : "/slave/task/fail", body, strlen(body), 0);
}

int slave_task_complete(slave *s, const char *task_id, cJSON *result)
{
    return report(s, task_id, true, result);
}

int slave_task_fail(slave *s, const char *task_id, cJSON *result)
{
    return report(s, task_id, false, result);
}

int slave_task_report_raw(slave *s, const char *task_id, const char *path, char *body, size_t len,
                          size_t declared_len)
{
    return send_report(s, task_id, path, body, len, declared_len);
}

void slave_pause_heartbeats(slave *s, bool paused)
{
    s->hb_paused = paused;
}

unsigned long slave_heartbeats_sent(const slave *s)
{
    return s->hb_sent;
}

unsigned slave_reports_pending(const slave *s)
{
    return s->reports_pending;
}

void slave_bytes(const slave *s, unsigned long long *in, unsigned long long *out)
{
    *in = (s->http ? hs_bytes_in(s->http) : 0) + hc_bytes_in(s->client);
    *out = (s->http ? hs_bytes_out(s->http) : 0) + hc_bytes_out(s->client);
}
