/* slave: the slave end of the interaction protocol. */
#include "slave.h"

#include <arpa/inet.h>
#include <stdatomic.h>
#include <stdint.h>
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
    unsigned long refused; /* /connects refused by allow_master */
    const char *task_text; /* the /task/new body while on_task runs (raw_refs) */
    hs_request *task_req;  /* its request, while on_task runs (raw_refs) */
    char *task_taken;      /* task_text, if on_task took it over */
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

/* ---- who may connect ---- */

typedef struct {
    int family; /* AF_INET or AF_INET6 */
    unsigned char addr[16];
    int bits;
} allow_net;

struct slave_allow {
    allow_net *nets;
    size_t n;
};

slave_allow *slave_allow_new(void)
{
    return xcalloc(1, sizeof(slave_allow));
}

void slave_allow_free(slave_allow *a)
{
    if (!a)
        return;
    free(a->nets);
    free(a);
}

size_t slave_allow_count(const slave_allow *a)
{
    return a ? a->n : 0;
}

static const unsigned char v4_mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

/* An address literal ("10.0.0.1", "::1", "[::1]") into family and bytes,
 * an IPv4-mapped IPv6 address as IPv4. */
static bool parse_ip(const char *text, size_t len, int *family, unsigned char addr[16])
{
    char buf[INET6_ADDRSTRLEN + 2];
    if (len >= 2 && text[0] == '[' && text[len - 1] == ']') {
        text++;
        len -= 2;
    }
    if (len == 0 || len >= sizeof buf)
        return false;
    memcpy(buf, text, len);
    buf[len] = '\0';
    memset(addr, 0, 16);
    if (inet_pton(AF_INET, buf, addr) == 1) {
        *family = AF_INET;
        return true;
    }
    if (inet_pton(AF_INET6, buf, addr) != 1)
        return false;
    *family = AF_INET6;
    if (memcmp(addr, v4_mapped, sizeof v4_mapped) == 0) {
        memmove(addr, addr + 12, 4);
        memset(addr + 4, 0, 12);
        *family = AF_INET;
    }
    return true;
}

static bool in_net(const allow_net *n, int family, const unsigned char *addr)
{
    if (n->family != family)
        return false;
    int full = n->bits / 8, rest = n->bits % 8;
    if (memcmp(n->addr, addr, (size_t)full) != 0)
        return false;
    if (rest == 0)
        return true;
    unsigned char mask = (unsigned char)(0xff << (8 - rest));
    return (n->addr[full] & mask) == (addr[full] & mask);
}

int slave_allow_add(slave_allow *a, const char *spec, char *err, size_t errlen)
{
    allow_net *add = NULL;
    size_t nadd = 0;
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len > 0 && (*p == ' ' || *p == '\t'))
            p++, len--;
        while (len > 0 && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        const char *slash = memchr(p, '/', len);
        size_t alen = slash ? (size_t)(slash - p) : len;
        allow_net n = {0};
        if (len == 0) {
            snprintf(err, errlen, "'%.200s': an empty entry (want ADDR[/PREFIX],... with IPv4 or IPv6 addresses)", spec);
            goto bad;
        }
        if (!parse_ip(p, alen, &n.family, n.addr)) {
            snprintf(err, errlen, "'%.*s' is not an IPv4 or IPv6 address (want ADDR[/PREFIX]; host names are not "
                                  "resolved)",
                     (int)(alen > 100 ? 100 : alen), p);
            goto bad;
        }
        int max = n.family == AF_INET ? 32 : 128;
        n.bits = max;
        if (slash) {
            const char *d = slash + 1;
            size_t dl = len - alen - 1;
            long bits = 0;
            bool digits = dl > 0 && dl <= 3;
            for (size_t i = 0; digits && i < dl; i++) {
                digits = d[i] >= '0' && d[i] <= '9';
                bits = bits * 10 + (d[i] - '0');
            }
            /* a mapped address written in IPv6 counts its prefix over 128 */
            bool mapped = n.family == AF_INET && memchr(p, ':', alen) != NULL;
            if (mapped)
                bits -= 96;
            if (!digits || bits < 0 || bits > max) {
                snprintf(err, errlen, "'%.*s': the prefix must be a number from %d to %d for an %s address",
                         (int)(len > 100 ? 100 : len), p, mapped ? 96 : 0, mapped ? 128 : max,
                         n.family == AF_INET && !mapped ? "IPv4" : "IPv6");
                goto bad;
            }
            n.bits = (int)bits;
        }
        if (a->n + nadd >= SLAVE_ALLOW_MAX) {
            snprintf(err, errlen, "more than %d networks", SLAVE_ALLOW_MAX);
            goto bad;
        }
        add = xrealloc(add, (nadd + 1) * sizeof *add);
        add[nadd++] = n;
        if (!end)
            break;
        p = end + 1;
    }
    a->nets = xrealloc(a->nets, (a->n + nadd) * sizeof *a->nets);
    memcpy(a->nets + a->n, add, nadd * sizeof *add);
    a->n += nadd;
    free(add);
    return 0;
bad:
    free(add);
    return -1;
}

int slave_allow_flag(slave_allow **list, const char *value, char *err, size_t errlen)
{
    if (!*list)
        *list = slave_allow_new();
    char e[300];
    if (slave_allow_add(*list, value, e, sizeof e) == 0)
        return 0;
    snprintf(err, errlen, "--allow-master: %s", e);
    return -1;
}

bool slave_allow_has(const slave_allow *a, const char *ip)
{
    int family;
    unsigned char addr[16];
    if (!a || !ip || !parse_ip(ip, strlen(ip), &family, addr))
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (in_net(&a->nets[i], family, addr))
            return true;
    return false;
}

char *slave_allow_text(const slave_allow *a)
{
    xbuf b = {0};
    for (size_t i = 0; a && i < a->n; i++) {
        char t[INET6_ADDRSTRLEN];
        inet_ntop(a->nets[i].family, a->nets[i].addr, t, sizeof t);
        xbuf_printf(&b, "%s%s/%d", i ? ", " : "", t, a->nets[i].bits);
    }
    xbuf_append(&b, "", 0);
    return xbuf_take(&b);
}

bool slave_host_is_loopback(const char *host)
{
    if (!host)
        return true;
    if (strcmp(host, "localhost") == 0)
        return true;
    int family;
    unsigned char addr[16];
    if (!parse_ip(host, strlen(host), &family, addr))
        return false;
    static const unsigned char v6_loopback[16] = {[15] = 1};
    return family == AF_INET ? addr[0] == 127 : memcmp(addr, v6_loopback, 16) == 0;
}

/* The address part of hs_peer()'s "ip:port" (IPv6 unbracketed). */
static void peer_ip(hs_request *r, char *out, size_t outlen)
{
    const char *peer = hs_peer(r);
    const char *colon = strrchr(peer, ':');
    size_t len = colon ? (size_t)(colon - peer) : strlen(peer);
    snprintf(out, outlen, "%.*s", (int)len, peer);
}

/* The host of "http://host[:port][/...]" ("[v6]" without its brackets). */
static void url_host(const char *url, char *out, size_t outlen)
{
    const char *h = url + 7; /* after "http://" */
    size_t len;
    if (*h == '[') {
        const char *rb = strchr(h, ']');
        h++;
        len = rb ? (size_t)(rb - h) : strlen(h);
    } else {
        len = strcspn(h, ":/?#");
    }
    snprintf(out, outlen, "%.*s", (int)(len > 255 ? 255 : len), h);
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

/* A refused /connect: the reply names the address; the log says more (once
 * per refusal for the first 10, then every 1000th). */
static void refuse_connect(slave *s, hs_request *r, const char *what, const char *addr)
{
    s->refused++;
    char *m = xasprintf("Connection refused: the %s %s is not allowed to be this slave's master.", what, addr);
    reply_msg(r, 403, false, proto_code(PROTO_SLAVE_CONNECTION_REFUSED), m);
    free(m);
    if (s->refused <= 10 || s->refused % 1000 == 0) {
        char *list = slave_allow_text(s->cfg.allow_master);
        LOG_WARN(s->name, "/connect from %s refused: the %s %s is not in the allowed masters (%s); %lu refused so far",
                 hs_peer(r), what, addr, list, s->refused);
        free(list);
    }
}

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
    o.max_reply = PROTO_REPLY_MAX;
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
    if (!addr || (strncmp(addr, "http://", 7) != 0 && strncmp(addr, "https://", 8) != 0) || strlen(addr) > 2048) {
        reply_msg(r, 400, false, 400,
                  "Request body needs \"master\": {\"address\": \"http://host:port\"} (an http:// or https:// URL "
                  "string of at most 2048 characters).");
        cJSON_Delete(j);
        return;
    }
    if (s->cfg.allow_master) {
        char host[256];
        url_host(addr, host, sizeof host);
        if (!slave_allow_has(s->cfg.allow_master, host)) {
            refuse_connect(s, r, "master address host", host);
            cJSON_Delete(j);
            return;
        }
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
    s->task_req = s->cfg.raw_refs ? r : NULL;
    s->task_taken = NULL;
    if (s->cbs.on_task)
        s->cbs.on_task(s->ud, id->valuestring, data, &v); /* id lives in j */
    s->task_text = NULL;
    s->task_req = NULL;
    s->task_taken = NULL;
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
    if (p == P_CONNECT && s->cfg.allow_master) {
        /* Before any other check: a peer that may not connect learns
         * nothing about the channel or the state. */
        char ip[INET6_ADDRSTRLEN + 8];
        peer_ip(r, ip, sizeof ip);
        if (!slave_allow_has(s->cfg.allow_master, ip)) {
            refuse_connect(s, r, "peer address", ip);
            return;
        }
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
    /* Once per process: a thousand learners of one mock are one warning. */
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (s->http && !cfg->allow_master && !slave_host_is_loopback(cfg->http.host) && !atomic_flag_test_and_set(&warned))
        LOG_WARN(s->name,
                 "listening on %s port %d with no --allow-master: any peer that reaches this port can become the "
                 "master and have heartbeats and results sent to any address it names",
                 cfg->http.host, hs_port(s->http));
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

char *slave_task_take_text(slave *s, size_t *len)
{
    *len = 0;
    if (!s->task_req || s->task_taken)
        return NULL;
    s->task_taken = hs_body_take(s->task_req, len);
    s->task_text = s->task_taken; /* the same bytes, now the caller's */
    return s->task_taken;
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
    o.max_reply = PROTO_REPLY_MAX;
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
