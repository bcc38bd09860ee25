/* master: the master end of the interaction protocol. */
#include "master.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evt.h"
#include "hc.h"
#include "ilog.h"
#include "jsonx.h"
#include "xalloc.h"

#define TOKEN_BUCKETS 4096u

typedef enum { CONN_CONNECTING, CONN_READY } conn_state;

struct master_task {
    master_conn *conn; /* NULL once detached (callback running) */
    char id[PROTO_UUID_LEN + 1];
    proto_task_state state;
    master_task_cb cb;
    void *ud;
    ev_timer *deadline;
    long deadline_ms;
    hc_req *req; /* /task/new in flight */
    evt_cause cause;  /* why it failed (set by task_end) */
    long http_status; /* of a /task/new that failed with a status */
    master_task *prev, *next;
};

struct master_conn {
    master *m;
    char *name;
    char *base_url;
    char *task_url; /* base_url + "/task/new" */
    char token[PROTO_TOKEN_LEN + 1];
    conn_state state;
    int dying; /* inside on_lost or connect-failure callback */
    evt_cause cause;  /* why the connection was lost, or /connect failed */
    long http_status; /* of a /connect answered with an error */
    uint64_t last_hb_ms;
    hc_req *connect_req;
    master_connect_cb connect_cb;
    void *connect_ud;
    void *ud;
    master_task *tasks;
    master_conn *hnext; /* token hash chain */
};

struct master {
    ev_loop *loop;
    master_config cfg;
    master_callbacks cbs;
    void *ud;
    hs_server *http;
    hc_client *client;
    char self_token[PROTO_TOKEN_LEN + 1];
    char *advertise;
    bool shutting_down;
    master_conn **conns;
    size_t nconns, capconns;
    master_conn *buckets[TOKEN_BUCKETS];
    ev_timer *hb_timer;
    struct retired *retired; /* tokens of conns whose /disconnect is in flight */
};

/* A conn that the master closed while its /disconnect request is still in
 * flight: the slave may send a heartbeat or a late report meanwhile, which
 * must not look like "unknown token" (the slave would take that as a lost
 * master and refuse the /disconnect). */
typedef struct retired {
    master *m;
    char token[PROTO_TOKEN_LEN + 1];
    char *name;
    struct retired *next;
} retired;

void master_config_init(master_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    hs_config_init(&cfg->http);
    cfg->heartbeat_tolerance_ms = 17000;
    cfg->heartbeat_check_ms = 1000;
    cfg->task_deadline_ms = 600000;
    cfg->retries = 5;
    cfg->connect_retries = -1;
    cfg->retry_wait_ms = 1000;
    cfg->connect_timeout_ms = 2000;
    cfg->request_timeout_ms = 30000;
}

/* ---- token table ---- */

static unsigned token_hash(const char *t)
{
    unsigned h = 2166136261u;
    for (; *t; t++)
        h = (h ^ (unsigned char)*t) * 16777619u;
    return h % TOKEN_BUCKETS;
}

static void token_add(master *m, master_conn *c)
{
    unsigned b = token_hash(c->token);
    c->hnext = m->buckets[b];
    m->buckets[b] = c;
}

static void token_del(master *m, master_conn *c)
{
    master_conn **pp = &m->buckets[token_hash(c->token)];
    while (*pp && *pp != c)
        pp = &(*pp)->hnext;
    if (*pp)
        *pp = c->hnext;
}

static master_conn *token_find(master *m, const char *t)
{
    /* A token that is not 64 characters is not ours; comparison within a
     * bucket is constant-time. */
    for (master_conn *c = m->buckets[token_hash(t)]; c; c = c->hnext)
        if (proto_token_equal(c->token, t))
            return c;
    return NULL;
}

/* ---- tasks ---- */

static void task_unlink(master_task *t)
{
    master_conn *c = t->conn;
    if (!c)
        return;
    if (t->prev)
        t->prev->next = t->next;
    else
        c->tasks = t->next;
    if (t->next)
        t->next->prev = t->prev;
    t->prev = t->next = NULL;
    t->conn = NULL;
}

static void task_free(master *m, master_task *t)
{
    task_unlink(t);
    if (t->deadline)
        ev_timer_stop(m->loop, t->deadline);
    if (t->req)
        hc_forget(m->client, t->req); /* keeps the connection reusable */
    free(t);
}

/* Ends a task: the one place where a task reaches a final state. The task is
 * detached from its connection before the callback, and freed after. */
static void task_end(master *m, master_task *t, proto_task_state st, cJSON *result, const char *error,
                     evt_cause cause)
{
    master_conn *c = t->conn;
    const char *who = c ? c->name : "?";
    if (ilog_enabled(ILOG_DEBUG))
        LOG_DEBUG(who, "task %s: %s -> %s%s%s", t->id, proto_task_state_name(t->state), proto_task_state_name(st),
                  error ? ": " : "", error ? error : "");
    t->state = st;
    t->cause = cause;
    task_unlink(t);
    if (t->deadline) {
        ev_timer_stop(m->loop, t->deadline);
        t->deadline = NULL;
    }
    if (t->req) {
        /* The result often overtakes the /task/new reply (the slave answers
         * at once): let that reply arrive, so that the connection is
         * reused rather than closed. */
        hc_forget(m->client, t->req);
        t->req = NULL;
    }
    cJSON *res = result;
    if (t->cb)
        t->cb(t->ud, t, st, &res, error);
    cJSON_Delete(res);
    free(t);
}

static void fail_conn_tasks(master *m, master_conn *c, const char *why, evt_cause cause)
{
    while (c->tasks) {
        master_task *t = c->tasks;
        char *msg = xasprintf("%s: %s", c->name, why);
        /* t->conn == c: task_end unlinks it from c->tasks before freeing */
        task_end(m, t, TASK_FAILED, NULL, msg, cause); // NOLINT(clang-analyzer-unix.Malloc)
        free(msg);
    }
}

/* ---- connections ---- */

static void conn_remove(master *m, master_conn *c)
{
    for (size_t i = 0; i < m->nconns; i++)
        if (m->conns[i] == c) {
            memmove(m->conns + i, m->conns + i + 1, (m->nconns - i - 1) * sizeof *m->conns);
            m->nconns--;
            break;
        }
    token_del(m, c);
}

static void conn_free(master *m, master_conn *c)
{
    if (c->connect_req)
        hc_cancel(m->client, c->connect_req);
    while (c->tasks)
        task_free(m, c->tasks); // NOLINT(clang-analyzer-unix.Malloc): task_free unlinks the head
    free(c->name);
    free(c->base_url);
    free(c->task_url);
    free(c);
}

static void retired_free(void *data)
{
    retired *rt = data;
    for (retired **pp = &rt->m->retired; *pp; pp = &(*pp)->next)
        if (*pp == rt) {
            *pp = rt->next;
            break;
        }
    free(rt->name);
    free(rt);
}

static void on_disconnect_reply(void *data, const hc_result *res)
{
    retired *rt = data;
    if (res->error || res->status != 200)
        LOG_DEBUG(rt->name, "disconnect: %s", res->error ? res->error : res->body);
    retired_free(rt);
}

static retired *retired_find(master *m, const char *token)
{
    for (retired *rt = m->retired; rt; rt = rt->next)
        if (proto_token_equal(rt->token, token))
            return rt;
    return NULL;
}

static void send_disconnect(master *m, master_conn *c)
{
    hc_opts o;
    hc_opts_init(&o);
    o.max_reply = PROTO_REPLY_MAX;
    char *url = xasprintf("%s/disconnect", c->base_url);
    o.method = "DELETE";
    o.url = url;
    o.token = c->token;
    o.channel = m->cfg.channel;
    o.body = xstrdup("{\"data\": {}}");
    o.body_len = strlen(o.body);
    o.retries = 0;
    o.timeout_ms = m->cfg.request_timeout_ms;
    o.connect_timeout_ms = m->cfg.connect_timeout_ms;
    o.free_data = retired_free;
    retired *rt = xcalloc(1, sizeof *rt);
    rt->m = m;
    memcpy(rt->token, c->token, sizeof rt->token);
    rt->name = xstrdup(c->name);
    if (hc_send(m->client, &o, on_disconnect_reply, rt)) {
        rt->next = m->retired;
        m->retired = rt;
    } else {
        free(rt->name);
        free(rt);
    }
    free(url);
}

static void conn_close(master_conn *c, const char *why, bool tell)
{
    if (!c || c->dying)
        return;
    master *m = c->m;
    c->dying = 1;
    conn_remove(m, c);
    if (tell && c->state == CONN_READY)
        send_disconnect(m, c);
    fail_conn_tasks(m, c, why, EVT_CAUSE_disconnected);
    conn_free(m, c);
}

void master_disconnect(master_conn *c, const char *why)
{
    conn_close(c, why ? why : "disconnected", true);
}

void master_drop(master_conn *c, const char *why)
{
    conn_close(c, why ? why : "dropped", false);
}

static void conn_lost(master *m, master_conn *c, const char *why, evt_cause cause)
{
    c->cause = cause;
    if (strncmp(why, "connection lost", 15) == 0) /* the reason says it already */
        LOG_WARN(c->name, "%s", why);
    else
        LOG_WARN(c->name, "connection lost: %s", why);
    c->dying = 1;
    conn_remove(m, c);
    fail_conn_tasks(m, c, why, cause);
    if (m->cbs.on_lost)
        m->cbs.on_lost(m->ud, c, why);
    conn_free(m, c);
}

static void on_hb_check(ev_loop *loop, void *data)
{
    master *m = data;
    (void)loop;
    m->hb_timer = ev_timer_start(m->loop, (uint64_t)m->cfg.heartbeat_check_ms, on_hb_check, m);
    uint64_t now = ev_now_ms();
    for (size_t i = 0; i < m->nconns;) {
        master_conn *c = m->conns[i];
        if (c->state == CONN_READY && now - c->last_hb_ms > (uint64_t)m->cfg.heartbeat_tolerance_ms) {
            char why[160];
            snprintf(why, sizeof why, "connection lost: no heartbeat for %llu ms (tolerance %ld ms)",
                     (unsigned long long)(now - c->last_hb_ms), m->cfg.heartbeat_tolerance_ms);
            /* base_url is "http://" + host:port */
            EVT_EMIT(heartbeat_lost, .learner = c->name, .addr = c->base_url + 7,
                     .after_ms = (int64_t)(now - c->last_hb_ms));
            conn_lost(m, c, why, EVT_CAUSE_heartbeat);
            continue; /* c was removed from conns[i] */
        }
        i++;
    }
}

/* Why a request failed below HTTP, as a cause word: nothing listening,
 * nobody reachable (name or route, or no answer to connect), or a
 * connection that broke. */
static evt_cause hc_error_cause(const hc_result *res)
{
    const char *e = res->error ? res->error : "";
    if (strstr(e, "refused"))
        return EVT_CAUSE_refused;
    if (strstr(e, "resolve") || strstr(e, "unreachable") || strstr(e, "connect") || strstr(e, "No route"))
        return EVT_CAUSE_unreachable;
    return EVT_CAUSE_connection_lost;
}

static void on_connect_reply(void *data, const hc_result *res)
{
    master_conn *c = data;
    master *m = c->m;
    c->connect_req = NULL;
    char err[512];
    bool ok = false;
    if (res->error) {
        snprintf(err, sizeof err, "%s: cannot connect: %s", c->name, res->error);
        c->cause = hc_error_cause(res);
    } else {
        proto_reply rep;
        char perr[200];
        c->http_status = res->status;
        c->cause = EVT_CAUSE_rejected;
        if (!proto_parse_envelope(res->body, res->body_len, &rep, perr, sizeof perr))
            snprintf(err, sizeof err, "%s: /connect answered HTTP %ld with a bad body: %s", c->name, res->status, perr);
        else if (res->status != 200 || !rep.success)
            snprintf(err, sizeof err, "%s: /connect answered HTTP %ld, code %d: %s", c->name, res->status, rep.code,
                     rep.message ? rep.message : "");
        else
            ok = true;
        cJSON_Delete(rep.tree);
    }
    master_connect_cb cb = c->connect_cb;
    void *ud = c->connect_ud;
    if (ok) {
        c->state = CONN_READY;
        c->last_hb_ms = ev_now_ms();
        LOG_INFO(c->name, "connected (%s)", c->base_url);
        if (cb)
            cb(ud, c, true, NULL); /* c may be disconnected inside */
        return;
    }
    LOG_DEBUG(c->name, "%s", err);
    c->dying = 1;
    conn_remove(m, c);
    if (cb)
        cb(ud, c, false, err);
    conn_free(m, c);
}

master_conn *master_connect(master *m, const char *name, const char *host, int port, const cJSON *data,
                            master_connect_cb cb, void *ud, char *err, size_t errlen)
{
    if (master_find(m, name)) {
        snprintf(err, errlen, "a connection named '%s' exists already", name);
        return NULL;
    }
    master_conn *c = xcalloc(1, sizeof *c);
    c->cause = EVT_CAUSE_other;
    c->m = m;
    c->name = xstrdup(name);
    int v6 = strchr(host, ':') != NULL;
    c->base_url = xasprintf("http://%s%s%s:%d", v6 ? "[" : "", host, v6 ? "]" : "", port);
    c->task_url = xasprintf("%s/task/new", c->base_url);
    if (proto_token_new(c->token) < 0) {
        snprintf(err, errlen, "getrandom failed: cannot make a token");
        conn_free(m, c);
        return NULL;
    }
    c->state = CONN_CONNECTING;
    c->connect_cb = cb;
    c->connect_ud = ud;
    char *dtext = data ? jsonx_print(data) : xstrdup("{}");
    cJSON *adv = cJSON_CreateString(m->advertise);
    char *atext = jsonx_print(adv);
    cJSON_Delete(adv);
    hc_opts o;
    hc_opts_init(&o);
    o.max_reply = PROTO_REPLY_MAX;
    char *url = xasprintf("%s/connect", c->base_url);
    o.method = "POST";
    o.url = url;
    o.token = c->token;
    o.channel = m->cfg.channel;
    o.body = xasprintf("{\"master\": {\"address\": %s}, \"data\": %s}", atext, dtext);
    o.body_len = strlen(o.body);
    o.retries = m->cfg.connect_retries >= 0 ? m->cfg.connect_retries : m->cfg.retries;
    o.retry_wait_ms = m->cfg.retry_wait_ms;
    o.connect_timeout_ms = m->cfg.connect_timeout_ms;
    o.timeout_ms = m->cfg.request_timeout_ms;
    free(atext);
    free(dtext);
    c->connect_req = hc_send(m->client, &o, on_connect_reply, c);
    free(url);
    if (!c->connect_req) {
        snprintf(err, errlen, "cannot start a request to %s", c->base_url);
        conn_free(m, c);
        return NULL;
    }
    if (m->nconns == m->capconns) {
        m->capconns = m->capconns ? m->capconns * 2 : 16;
        m->conns = xrealloc(m->conns, m->capconns * sizeof *m->conns);
    }
    m->conns[m->nconns++] = c;
    token_add(m, c);
    return c;
}

/* ---- sending tasks ---- */

static void on_deadline(ev_loop *loop, void *data)
{
    (void)loop;
    master_task *t = data;
    t->deadline = NULL;
    master *m = t->conn->m;
    char *msg = xasprintf("%s: no result within the task deadline of %ld ms", t->conn->name, t->deadline_ms);
    LOG_WARN(t->conn->name, "task %s failed: %s", t->id, msg);
    task_end(m, t, TASK_FAILED, NULL, msg, EVT_CAUSE_deadline);
    free(msg);
}

static void on_task_reply(void *data, const hc_result *res)
{
    master_task *t = data;
    master_conn *c = t->conn;
    master *m = c->m;
    t->req = NULL;
    if (t->state != TASK_STARTING)
        return; /* its result arrived before this reply */
    char err[700];
    evt_cause cause = EVT_CAUSE_connection_lost;
    if (res->error) {
        snprintf(err, sizeof err, "%s: /task/new failed: %s", c->name, res->error);
        cause = hc_error_cause(res);
    } else {
        proto_reply rep;
        char perr[200];
        t->http_status = res->status;
        if (!proto_parse_envelope(res->body, res->body_len, &rep, perr, sizeof perr)) {
            snprintf(err, sizeof err, "%s: /task/new answered HTTP %ld with a bad body: %s", c->name, res->status, perr);
            cause = EVT_CAUSE_malformed;
        } else if (res->status == 200 && rep.success) {
            cJSON_Delete(rep.tree);
            t->state = TASK_STARTED;
            return;
        } else if (res->status == 403 && rep.code == proto_code(PROTO_SLAVE_MASTER_TOKEN_INVALID)) {
            /* The slave does not know this connection any more (it restarted
             * or dropped us): the connection is lost now, not when its
             * heartbeats time out, so that it is retaken at once. */
            cJSON_Delete(rep.tree);
            conn_lost(m, c,
                      "/task/new answered 403 code 302: the slave no longer knows this master (it restarted "
                      "or dropped the connection)",
                      EVT_CAUSE_restarted);
            return;
        } else {
            snprintf(err, sizeof err, "%s: /task/new answered HTTP %ld, code %d: %s", c->name, res->status, rep.code,
                     rep.message ? rep.message : "");
            cause = EVT_CAUSE_http_status;
        }
        cJSON_Delete(rep.tree);
    }
    LOG_WARN(c->name, "task %s could not start: %s", t->id, err);
    task_end(m, t, TASK_START_FAILED, NULL, err, cause);
}

master_task *master_task_send(master_conn *c, char *data_json, size_t len, long deadline_ms, master_task_cb cb,
                              void *ud, char *err, size_t errlen)
{
    /* Room for the envelope, made in data_json's own buffer (grown, data
     * moved up): a second buffer would double learn data of hundreds of
     * MiB. Callers with large data build it framed and skip this move. */
    char *buf = xrealloc(data_json, MASTER_TASK_HEAD + len + MASTER_TASK_TAIL + 1);
    memmove(buf + MASTER_TASK_HEAD, buf, len);
    return master_task_send_framed(c, buf, len, deadline_ms, cb, ud, err, errlen);
}

/* A task for c, with its id, or NULL (err set). */
static master_task *task_new(master_conn *c, master_task_cb cb, void *ud, char *err, size_t errlen)
{
    if (!c || c->dying || c->state != CONN_READY) {
        snprintf(err, errlen, "%s: not connected", c ? c->name : "(null)");
        return NULL;
    }
    master_task *t = xcalloc(1, sizeof *t);
    t->cause = EVT_CAUSE_other;
    if (proto_uuid4(t->id) < 0) {
        snprintf(err, errlen, "getrandom failed: cannot make a task id");
        free(t);
        return NULL;
    }
    t->conn = c;
    t->cb = cb;
    t->ud = ud;
    t->state = TASK_STARTING;
    return t;
}

/* {"task": {"id": "<id>"}, "data": : MASTER_TASK_HEAD bytes into out. */
static void task_head(const master_task *t, char out[MASTER_TASK_HEAD + 1])
{
    int hl = snprintf(out, MASTER_TASK_HEAD + 1, "{\"task\": {\"id\": \"%s\"}, \"data\": ", t->id);
    if (hl != (int)MASTER_TASK_HEAD) {
        fprintf(stderr, "fatal: task envelope head is %d bytes, not %zu\n", hl, (size_t)MASTER_TASK_HEAD);
        abort();
    }
}

/* Sends t's /task/new with o's body (set by the caller; taken over or
 * released by hc, also on failure) and starts its deadline; frees t and
 * returns NULL if the request cannot start. */
static master_task *task_launch(master_task *t, hc_opts *o, long deadline_ms, char *err, size_t errlen)
{
    master_conn *c = t->conn;
    master *m = c->m;
    o->max_reply = PROTO_REPLY_MAX;
    o->method = "POST";
    o->url = c->task_url;
    o->token = c->token;
    o->channel = m->cfg.channel;
    o->retries = m->cfg.retries;
    o->retry_wait_ms = m->cfg.retry_wait_ms;
    o->connect_timeout_ms = m->cfg.connect_timeout_ms;
    o->timeout_ms = m->cfg.request_timeout_ms;
    t->req = hc_send(m->client, o, on_task_reply, t);
    if (!t->req) {
        snprintf(err, errlen, "%s: cannot start the /task/new request", c->name);
        free(t);
        return NULL;
    }
    t->next = c->tasks;
    if (c->tasks)
        c->tasks->prev = t;
    c->tasks = t;
    t->deadline_ms = deadline_ms == 0 ? m->cfg.task_deadline_ms : deadline_ms;
    if (t->deadline_ms > 0)
        t->deadline = ev_timer_start(m->loop, (uint64_t)t->deadline_ms, on_deadline, t);
    return t;
}

master_task *master_task_send_framed(master_conn *c, char *buf, size_t len, long deadline_ms, master_task_cb cb,
                                     void *ud, char *err, size_t errlen)
{
    master_task *t = task_new(c, cb, ud, err, errlen);
    if (!t) {
        free(buf);
        return NULL;
    }
    /* {"task": {"id": "<id>"}, "data": <data>}, written around the data in
     * the room the caller left: no copy of the data. */
    char head[MASTER_TASK_HEAD + 1];
    task_head(t, head);
    memcpy(buf, head, MASTER_TASK_HEAD);
    size_t blen = MASTER_TASK_HEAD + len + MASTER_TASK_TAIL;
    buf[blen - 1] = '}';
    buf[blen] = '\0';
    hc_opts o;
    hc_opts_init(&o);
    o.body_len = blen;
    o.body = buf;
    return task_launch(t, &o, deadline_ms, err, errlen);
}

master_task *master_task_send_span(master_conn *c, const char *head, size_t head_len, const char *span,
                                   size_t span_len, void (*release)(void *ud), void *release_ud, const char *tail,
                                   size_t tail_len, long deadline_ms, master_task_cb cb, void *ud, char *err,
                                   size_t errlen)
{
    master_task *t = task_new(c, cb, ud, err, errlen);
    if (!t) {
        if (release)
            release(release_ud);
        return NULL;
    }
    /* The envelope and head before the span, tail and envelope after it:
     * hc copies these pieces and sends the span from where it is. */
    char *pre = xmalloc(MASTER_TASK_HEAD + head_len + 1);
    task_head(t, pre);
    if (head_len)
        memcpy(pre + MASTER_TASK_HEAD, head, head_len);
    char *post = xmalloc(tail_len + MASTER_TASK_TAIL);
    if (tail_len)
        memcpy(post, tail, tail_len);
    post[tail_len] = '}';
    hc_opts o;
    hc_opts_init(&o);
    o.body_prefix = pre;
    o.body_prefix_len = MASTER_TASK_HEAD + head_len;
    o.body_borrowed = span ? span : ""; /* an empty span is no body ("{}") */
    o.body_len = span_len;
    o.body_release = release;
    o.body_release_ud = release_ud;
    o.body_suffix = post;
    o.body_suffix_len = tail_len + MASTER_TASK_TAIL;
    master_task *r = task_launch(t, &o, deadline_ms, err, errlen);
    free(pre);
    free(post);
    return r;
}

void master_task_cancel(master_task *t)
{
    if (t && t->conn)
        task_free(t->conn->m, t);
}

evt_cause master_task_cause(const master_task *t) { return t->cause; }
long master_task_http_status(const master_task *t) { return t->http_status; }
evt_cause master_conn_cause(const master_conn *c) { return c->cause; }
long master_conn_http_status(const master_conn *c) { return c->http_status; }

const char *master_task_id(const master_task *t)
{
    return t->id;
}

master_conn *master_task_conn(const master_task *t)
{
    return t->conn;
}

proto_task_state master_task_state(const master_task *t)
{
    return t->state;
}

/* ---- the master's HTTP endpoints ---- */

static void reply_code(hs_request *r, int status, proto_code_id id)
{
    hs_reply_json(r, status, proto_error_envelope(id));
}

static void reply_msg(hs_request *r, int status, bool ok, int code, const char *msg)
{
    hs_reply_json(r, status, proto_envelope(ok, code, msg, NULL));
}

static master_task *find_task(master_conn *c, const char *id)
{
    for (master_task *t = c->tasks; t; t = t->next)
        if (strcmp(t->id, id) == 0)
            return t;
    return NULL;
}

static void do_result(master *m, master_conn *c, hs_request *r, bool complete)
{
    char perr[200];
    cJSON *j = jsonx_parse(hs_body(r), hs_body_len(r), perr, sizeof perr);
    if (!j || !cJSON_IsObject(j)) {
        char *why = j ? xasprintf("sent a malformed report to %s: body is a JSON %s, not an object", hs_path(r),
                                  jsonx_type_name(j))
                      : xasprintf("sent a malformed report to %s: %s", hs_path(r), perr);
        LOG_WARN(c->name, "%s", why);
        reply_msg(r, 400, false, 400, why);
        /* The slave runs one task at a time: the report was that task's. */
        fail_conn_tasks(m, c, why, EVT_CAUSE_malformed);
        free(why);
        cJSON_Delete(j);
        return;
    }
    const cJSON *task = jsonx_get(j, "task");
    if (!cJSON_IsObject(task)) {
        reply_msg(r, 200, false, 601, "Task information not found.");
        cJSON_Delete(j);
        return;
    }
    const char *id = jsonx_get_str(task, "id");
    if (!id) {
        reply_msg(r, 200, false, 601, "Task ID not found.");
        cJSON_Delete(j);
        return;
    }
    master_task *t = find_task(c, id);
    if (!t) {
        LOG_DEBUG(c->name, "report for unknown task %.64s", id);
        reply_code(r, 200, PROTO_MASTER_TASK_NOT_FOUND);
        cJSON_Delete(j);
        return;
    }
    cJSON *result = cJSON_DetachItemFromObjectCaseSensitive(j, "result");
    cJSON_Delete(j);
    if (!result) {
        char *why = xasprintf("sent a report without \"result\" for task %s", t->id);
        reply_msg(r, 400, false, 400, "Request body has no \"result\".");
        char *msg = xasprintf("%s: %s", c->name, why);
        task_end(m, t, TASK_FAILED, NULL, msg, EVT_CAUSE_malformed);
        free(msg);
        free(why);
        return;
    }
    reply_msg(r, 200, true, 0, "Result received!");
    task_end(m, t, complete ? TASK_COMPLETED : TASK_FAILED, result, NULL,
             complete ? EVT_CAUSE_other : EVT_CAUSE_reported_failure);
}

static void on_request(void *data, hs_request *r)
{
    master *m = data;
    const char *path = hs_path(r), *method = hs_method(r);
    enum { P_HB, P_COMPLETE, P_FAIL, P_PING, P_SHUTDOWN, P_NONE } p = P_NONE;
    const char *want = NULL;
    if (strcmp(path, "/slave/heartbeat") == 0)
        p = P_HB, want = "GET";
    else if (strcmp(path, "/slave/task/complete") == 0)
        p = P_COMPLETE, want = "PUT";
    else if (strcmp(path, "/slave/task/fail") == 0)
        p = P_FAIL, want = "PUT";
    else if (strcmp(path, "/ping") == 0)
        p = P_PING, want = "GET";
    else if (strcmp(path, "/shutdown") == 0)
        p = P_SHUTDOWN, want = "DELETE";
    if (p == P_NONE && m->cbs.on_http && m->cbs.on_http(m->ud, r))
        return;
    if (p == P_NONE) {
        char *msg = xasprintf("No endpoint %s %s on this master.", method, path);
        reply_msg(r, 404, false, 404, msg);
        free(msg);
        return;
    }
    if (strcmp(method, want) != 0) {
        char *msg = xasprintf("Method %s is not allowed on %s; use %s.", method, path, want);
        reply_msg(r, 405, false, 405, msg);
        free(msg);
        return;
    }
    if (m->shutting_down) {
        reply_code(r, 401, PROTO_SYSTEM_SHUTTING_DOWN);
        return;
    }
    const char *tok = hs_header(r, "Token");
    if (p == P_PING || p == P_SHUTDOWN) {
        if (!tok) {
            reply_code(r, 400, PROTO_MASTER_SELF_TOKEN_NOT_FOUND);
            return;
        }
        if (!proto_token_equal(tok, m->self_token)) {
            reply_code(r, 403, PROTO_MASTER_SELF_TOKEN_INVALID);
            return;
        }
        if (p == P_PING) {
            reply_msg(r, 200, true, 0, "PONG!");
            return;
        }
        m->shutting_down = true;
        reply_msg(r, 200, true, 0, "Shutdown success.");
        if (m->cbs.on_shutdown)
            m->cbs.on_shutdown(m->ud);
        return;
    }
    const char *ch = hs_header(r, "Channel");
    int chv;
    if (!ch) {
        reply_code(r, 400, PROTO_CHANNEL_NOT_FOUND);
        return;
    }
    if (!proto_parse_channel(ch, &chv)) {
        reply_msg(r, 400, false, proto_code(PROTO_CHANNEL_NOT_FOUND), "Channel is not an integer.");
        return;
    }
    if (chv != m->cfg.channel) {
        reply_code(r, 403, PROTO_CHANNEL_INVALID);
        return;
    }
    if (!tok) {
        reply_code(r, 400, PROTO_MASTER_SLAVE_TOKEN_NOT_FOUND);
        return;
    }
    /* A CONNECTING conn is accepted too: the slave may send its first
     * heartbeat before the master has processed the /connect reply. */
    master_conn *c = token_find(m, tok);
    if ((!c || c->dying) && retired_find(m, tok)) {
        /* Closed by us, /disconnect on its way: answer calmly. */
        if (p == P_HB)
            reply_msg(r, 200, true, 0, "Received!");
        else
            reply_code(r, 200, PROTO_MASTER_TASK_NOT_FOUND);
        return;
    }
    if (!c || c->dying) {
        reply_code(r, 403, PROTO_MASTER_SLAVE_TOKEN_INVALID);
        return;
    }
    if (p == P_HB) {
        c->last_hb_ms = ev_now_ms();
        reply_msg(r, 200, true, 0, "Received!");
        if (m->cbs.on_heartbeat)
            m->cbs.on_heartbeat(m->ud, c);
        return;
    }
    /* Any message from the slave shows it is alive. */
    c->last_hb_ms = ev_now_ms();
    do_result(m, c, r, p == P_COMPLETE);
}

/* A result report cut off before its body was complete (a peer that hung
 * up mid-body): the connection's pending task fails at once rather than at
 * its deadline. */
static void on_abort(void *data, hs_request *r)
{
    master *m = data;
    const char *path = hs_path(r);
    if (strcmp(path, "/slave/task/complete") != 0 && strcmp(path, "/slave/task/fail") != 0)
        return;
    const char *tok = hs_header(r, "Token");
    master_conn *c = tok ? token_find(m, tok) : NULL;
    if (!c || c->dying || !c->tasks)
        return;
    char *why = xasprintf("report to %s was cut off before its body was complete", path);
    LOG_WARN(c->name, "%s", why);
    fail_conn_tasks(m, c, why, EVT_CAUSE_truncated);
    free(why);
}

/* ---- API ---- */

master *master_new(ev_loop *loop, const master_config *cfg, const master_callbacks *cbs, void *ud, char *err,
                   size_t errlen)
{
    master *m = xcalloc(1, sizeof *m);
    m->loop = loop;
    m->cfg = *cfg;
    if (m->cfg.heartbeat_check_ms <= 0)
        m->cfg.heartbeat_check_ms = 1000;
    if (cbs)
        m->cbs = *cbs;
    m->ud = ud;
    if (proto_token_new(m->self_token) < 0) {
        snprintf(err, errlen, "getrandom failed: cannot make a token");
        free(m);
        return NULL;
    }
    m->client = hc_new(loop);
    if (!m->client) {
        snprintf(err, errlen, "cannot create an HTTP client");
        free(m);
        return NULL;
    }
    m->http = hs_start(loop, &cfg->http, on_request, m, err, errlen);
    if (!m->http) {
        hc_free(m->client);
        free(m);
        return NULL;
    }
    hs_set_abort_handler(m->http, on_abort, m);
    if (cfg->advertise) {
        size_t n = strlen(cfg->advertise);
        while (n && cfg->advertise[n - 1] == '/')
            n--;
        m->advertise = xstrndup(cfg->advertise, n);
    } else {
        const char *h = cfg->http.host ? cfg->http.host : "127.0.0.1";
        if (strcmp(h, "0.0.0.0") == 0)
            h = "127.0.0.1";
        int v6 = strchr(h, ':') != NULL;
        m->advertise = xasprintf("http://%s%s%s:%d", v6 ? "[" : "", h, v6 ? "]" : "", hs_port(m->http));
    }
    m->cfg.advertise = m->advertise;
    m->cfg.http.host = NULL;
    m->hb_timer = ev_timer_start(loop, (uint64_t)m->cfg.heartbeat_check_ms, on_hb_check, m);
    return m;
}

void master_free(master *m)
{
    if (!m)
        return;
    while (m->nconns) {
        master_conn *c = m->conns[m->nconns - 1];
        c->dying = 1;
        m->nconns--;
        token_del(m, c);
        conn_free(m, c);
    }
    free(m->conns);
    if (m->hb_timer)
        ev_timer_stop(m->loop, m->hb_timer);
    hs_stop(m->http);
    hc_free(m->client);
    free(m->advertise);
    free(m);
}

int master_port(const master *m)
{
    return hs_port(m->http);
}

const char *master_self_token(const master *m)
{
    return m->self_token;
}

const char *master_advertise(const master *m)
{
    return m->advertise;
}

hs_server *master_http(master *m)
{
    return m->http;
}

const char *master_conn_name(const master_conn *c)
{
    return c->name;
}

bool master_conn_ready(const master_conn *c)
{
    return c && !c->dying && c->state == CONN_READY;
}

master_conn *master_find(master *m, const char *name)
{
    for (size_t i = 0; i < m->nconns; i++)
        if (strcmp(m->conns[i]->name, name) == 0)
            return m->conns[i];
    return NULL;
}

void master_conn_set_ud(master_conn *c, void *ud)
{
    c->ud = ud;
}

void *master_conn_ud(const master_conn *c)
{
    return c->ud;
}

long master_conn_heartbeat_age_ms(const master_conn *c)
{
    return (long)(ev_now_ms() - c->last_hb_ms);
}

size_t master_conn_count(const master *m)
{
    return m->nconns;
}

master_conn *master_conn_at(const master *m, size_t i)
{
    return i < m->nconns ? m->conns[i] : NULL;
}

unsigned master_requests_pending(const master *m)
{
    return hc_pending(m->client);
}

void master_bytes(const master *m, unsigned long long *in, unsigned long long *out)
{
    *in = hs_bytes_in(m->http) + hc_bytes_in(m->client);
    *out = hs_bytes_out(m->http) + hc_bytes_out(m->client);
}
