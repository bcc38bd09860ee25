/* Tests of the interaction library over real HTTP on loopback: every slave
 * and master endpoint, every error status and code of protocol.md, and the
 * task life cycle. Servers bind port 0. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include "hc.h"
#include "hs.h"
#include "jsonx.h"
#include "master.h"
#include "proto.h"
#include "slave.h"
#include "testutil.h"
#include "xalloc.h"

/* ---- fixture: one slave and one master on one loop ---- */

typedef struct {
    ev_loop *loop;
    hc_client *client;
    slave *s;
    master *m;
    char slave_url[64];
    char master_url[64];
    /* slave-side observations */
    int tasks_seen;
    char last_task_id[64];
    char *last_task_data;
    int refuse_next; /* 1 connect, 2 task */
    int status_next; /* error status for next task */
    int complete_now; /* finish tasks synchronously */
    int lost_called;
    /* master-side */
    int connect_done, connect_ok;
    char connect_err[512];
    int lost;
    char lost_why[256];
} fx;

static void s_on_connect(void *ud, const cJSON *data, slave_verdict *v)
{
    fx *f = ud;
    (void)data;
    if (f->refuse_next == 1) {
        v->refuse = true;
        f->refuse_next = 0;
    }
}

static void s_on_task(void *ud, const char *id, const cJSON *data, slave_verdict *v)
{
    fx *f = ud;
    f->tasks_seen++;
    snprintf(f->last_task_id, sizeof f->last_task_id, "%s", id);
    free(f->last_task_data);
    f->last_task_data = jsonx_print(data);
    if (f->refuse_next == 2) {
        v->refuse = true;
        f->refuse_next = 0;
        return;
    }
    if (f->status_next) {
        v->status = f->status_next;
        snprintf(v->message, sizeof v->message, "injected");
        f->status_next = 0;
        return;
    }
    if (f->complete_now) {
        cJSON *res = cJSON_CreateObject();
        cJSON_AddItemToObject(res, "echo", jsonx_dup(data));
        slave_task_complete(f->s, id, res);
    }
}

static void s_on_lost(void *ud, const char *why)
{
    fx *f = ud;
    (void)why;
    f->lost_called++;
}

static void m_on_lost(void *ud, master_conn *c, const char *why)
{
    fx *f = ud;
    (void)c;
    f->lost++;
    snprintf(f->lost_why, sizeof f->lost_why, "%s", why);
}

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    f->loop = ev_loop_new();
    f->client = hc_new(f->loop);
    char err[256];
    slave_config sc;
    slave_config_init(&sc);
    sc.name = "learner0";
    sc.heartbeat_span_ms = 50;
    sc.allow_fast_heartbeat = true;
    sc.retry_wait_ms = 50;
    slave_callbacks scb = {.on_connect = s_on_connect, .on_task = s_on_task, .on_master_lost = s_on_lost};
    f->s = slave_new(f->loop, &sc, &scb, f, err, sizeof err);
    assert_non_null(f->s);
    master_config mc;
    master_config_init(&mc);
    mc.heartbeat_tolerance_ms = 400;
    mc.heartbeat_check_ms = 50;
    mc.task_deadline_ms = 2000;
    mc.retry_wait_ms = 50;
    mc.retries = 1;
    master_callbacks mcb = {.on_lost = m_on_lost};
    f->m = master_new(f->loop, &mc, &mcb, f, err, sizeof err);
    assert_non_null(f->m);
    snprintf(f->slave_url, sizeof f->slave_url, "http://127.0.0.1:%d", slave_port(f->s));
    snprintf(f->master_url, sizeof f->master_url, "http://127.0.0.1:%d", master_port(f->m));
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    master_free(f->m);
    if (f->s)
        slave_free(f->s);
    hc_free(f->client);
    ev_loop_free(f->loop);
    free(f->last_task_data);
    free(f);
    return 0;
}

static void on_connected(void *ud, master_conn *c, bool ok, const char *error)
{
    fx *f = ud;
    (void)c;
    f->connect_done = 1;
    f->connect_ok = ok;
    snprintf(f->connect_err, sizeof f->connect_err, "%s", error ? error : "");
}

static master_conn *connect_slave(fx *f)
{
    char err[256];
    f->connect_done = 0;
    master_conn *c = master_connect(f->m, "learner0", "127.0.0.1", slave_port(f->s), NULL, on_connected, f, err,
                                    sizeof err);
    assert_non_null(c);
    assert_true(tu_run_until(f->loop, &f->connect_done, 5000));
    assert_true(f->connect_ok);
    return c;
}




static master_task *send_task(fx *f, master_conn *c, const char *data, tu_task_out *o, long deadline)
{
    char err[256];
    master_task *t = master_task_send(c, xstrdup(data), strlen(data), deadline, tu_task_done, o, err, sizeof err);
    assert_non_null(t);
    return t;
}

/* Performs a request and checks status, code and message. */
static void expect(fx *f, const char *method, const char *url, const char *token, int channel, const char *body,
                   long status, int code, const char *message)
{
    tu_reply r = tu_http(f->loop, f->client, method, url, token, channel, body);
    if (r.status != status || r.code != code || (message && (!r.message || strcmp(r.message, message) != 0)))
        print_error("%s %s: got %ld %s (error %s), want %ld code %d %s\n", method, url, r.status, r.body,
                    r.error ? r.error : "-", status, code, message ? message : "");
    assert_int_equal(r.status, status);
    assert_int_equal(r.code, code);
    if (message)
        assert_string_equal(r.message, message);
    tu_reply_free(&r);
}

static char *url(const char *base, const char *path)
{
    static char buf[4][128];
    static int i;
    i = (i + 1) % 4;
    snprintf(buf[i], sizeof buf[i], "%s%s", base, path);
    return buf[i];
}

/* ---- life cycle ---- */

static void task_completes_with_the_slave_result(void **state)
{
    fx *f = *state;
    f->complete_now = 1;
    master_conn *c = connect_slave(f);
    assert_true(slave_connected(f->s));
    tu_task_out o = {0};
    send_task(f, c, "{\"name\": \"x\", \"n\": 1000000, \"big\": 9007199254740993}", &o, 0);
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_COMPLETED);
    assert_null(o.error);
    assert_string_equal(o.result, "{\"echo\":{\"name\":\"x\",\"n\":1000000,\"big\":9007199254740993}}");
    assert_int_equal(f->tasks_seen, 1);
    tu_task_out_free(&o);
}

static void task_completed_later_from_the_loop(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out o = {0};
    send_task(f, c, "{\"name\": \"later\"}", &o, 0);
    tu_run_for(f->loop, 100);
    assert_int_equal(o.done, 0);
    assert_string_equal(slave_current_task(f->s), f->last_task_id);
    assert_int_equal(slave_task_complete(f->s, f->last_task_id, NULL), 0);
    assert_null(slave_current_task(f->s));
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_COMPLETED);
    assert_string_equal(o.result, "{}"); /* empty results are sent as {} */
    tu_task_out_free(&o);
}

static void task_failed_by_the_slave(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out o = {0};
    send_task(f, c, "{\"name\": \"bad\"}", &o, 0);
    tu_run_for(f->loop, 50);
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "message", "task name error");
    assert_int_equal(slave_task_fail(f->s, f->last_task_id, res), 0);
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_FAILED);
    assert_null(o.error);
    assert_string_equal(o.result, "{\"message\":\"task name error\"}");
    tu_task_out_free(&o);
}

static void task_fails_when_its_deadline_passes(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out o = {0};
    send_task(f, c, "{\"name\": \"hang\"}", &o, 150);
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "learner0"));
    assert_non_null(strstr(o.error, "deadline of 150 ms"));
    /* A late report is answered "Task not found." and changes nothing. */
    const char *tid = f->last_task_id;
    assert_int_equal(slave_task_complete(f->s, tid, NULL), 0);
    tu_run_for(f->loop, 100);
    assert_int_equal(o.done, 1);
    tu_task_out_free(&o);
}

static void lost_connection_fails_pending_task_at_once(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out o = {0};
    send_task(f, c, "{\"name\": \"hang\"}", &o, 60000);
    tu_run_for(f->loop, 50);
    slave_pause_heartbeats(f->s, true); /* a silent partition */
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "learner0"));
    assert_non_null(strstr(o.error, "no heartbeat"));
    assert_int_equal(f->lost, 1);
    assert_null(master_find(f->m, "learner0"));
    tu_task_out_free(&o);
}

static void dead_slave_makes_task_fail_within_tolerance(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out o = {0};
    send_task(f, c, "{\"name\": \"hang\"}", &o, 60000);
    tu_run_for(f->loop, 50);
    slave_free(f->s); /* the learner process dies */
    f->s = NULL;
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "learner0"));
    tu_task_out_free(&o);
}

static void task_to_a_restarted_slave_loses_the_connection_at_once(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    int port = slave_port(f->s);
    slave_free(f->s); /* the learner restarts on the same port... */
    char err[256];
    slave_config sc;
    slave_config_init(&sc);
    sc.http.port = port;
    f->s = slave_new(f->loop, &sc, NULL, f, err, sizeof err);
    assert_non_null(f->s);
    tu_task_out o = {0};
    send_task(f, c, "{\"name\": \"x\"}", &o, 60000); /* ...and refuses our token: 403 code 302 */
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "learner0: /task/new answered 403 code 302"));
    assert_int_equal(f->lost, 1); /* at once, not after the heartbeat tolerance */
    assert_null(master_find(f->m, "learner0"));
    connect_slave(f); /* and it can be taken back */
    tu_task_out_free(&o);
}

static void heartbeat_racing_a_disconnect_is_not_refused(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    master_disconnect(c, "test");
    /* The slave's heartbeats keep coming until /disconnect lands; none may
     * be refused, so the slave never takes the master for lost. */
    tu_run_for(f->loop, 200);
    assert_false(slave_connected(f->s));
    assert_int_equal(f->lost_called, 1); /* once: the disconnect itself */
}

static void second_task_while_one_runs_is_refused_601(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out a = {0}, b = {0};
    send_task(f, c, "{\"name\": \"one\"}", &a, 0);
    tu_run_for(f->loop, 50);
    send_task(f, c, "{\"name\": \"two\"}", &b, 0);
    assert_true(tu_run_until(f->loop, &b.done, 5000));
    assert_int_equal(b.state, TASK_START_FAILED);
    assert_non_null(strstr(b.error, "code 601"));
    assert_non_null(strstr(b.error, "Already has a task."));
    assert_int_equal(a.done, 0);
    tu_task_out_free(&a);
    tu_task_out_free(&b);
}

static void refused_task_ends_start_failed_602(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out o = {0};
    f->refuse_next = 2;
    send_task(f, c, "{\"name\": \"no\"}", &o, 0);
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_START_FAILED);
    assert_non_null(strstr(o.error, "HTTP 403, code 602"));
    assert_null(slave_current_task(f->s));
    tu_task_out_free(&o);
}

static void error_status_on_task_new_ends_start_failed(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    tu_task_out o = {0};
    f->status_next = 500;
    send_task(f, c, "{\"name\": \"boom\"}", &o, 0);
    assert_true(tu_run_until(f->loop, &o.done, 5000));
    assert_int_equal(o.state, TASK_START_FAILED);
    assert_non_null(strstr(o.error, "learner0: /task/new answered HTTP 500"));
    tu_task_out_free(&o);
}

static void refused_connection_reports_503(void **state)
{
    fx *f = *state;
    char err[256];
    f->refuse_next = 1;
    master_conn *c = master_connect(f->m, "learner0", "127.0.0.1", slave_port(f->s), NULL, on_connected, f, err,
                                    sizeof err);
    assert_non_null(c);
    assert_true(tu_run_until(f->loop, &f->connect_done, 5000));
    assert_false(f->connect_ok);
    assert_non_null(strstr(f->connect_err, "code 503"));
    assert_null(master_find(f->m, "learner0"));
}

static void connect_to_nothing_fails_after_retries(void **state)
{
    fx *f = *state;
    char err[256];
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0); /* bound, not listening: refused */
    getsockname(fd, (struct sockaddr *)&a, &al);
    master_conn *c = master_connect(f->m, "ghost", "127.0.0.1", ntohs(a.sin_port), NULL, on_connected, f, err,
                                    sizeof err);
    assert_non_null(c);
    assert_true(tu_run_until(f->loop, &f->connect_done, 5000));
    assert_false(f->connect_ok);
    assert_non_null(strstr(f->connect_err, "ghost: cannot connect"));
    assert_non_null(strstr(f->connect_err, "2 attempts"));
    close(fd);
}

static void duplicate_connection_name_is_rejected(void **state)
{
    fx *f = *state;
    char err[256];
    connect_slave(f);
    assert_null(master_connect(f->m, "learner0", "127.0.0.1", 1, NULL, on_connected, f, err, sizeof err));
    assert_non_null(strstr(err, "exists already"));
}

static void disconnect_frees_the_slave_for_a_new_master(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    master_disconnect(c, "test");
    tu_run_for(f->loop, 200);
    assert_false(slave_connected(f->s));
    connect_slave(f);
    assert_true(slave_connected(f->s));
}

static void slave_detects_lost_master_and_can_be_taken_back(void **state)
{
    fx *f = *state;
    master_conn *c = connect_slave(f);
    master_drop(c, "test"); /* master forgets the slave: heartbeats get 403 */
    int *flag = &f->lost_called;
    assert_true(tu_run_until(f->loop, flag, 5000));
    assert_false(slave_connected(f->s));
    connect_slave(f);
}

/* ---- slave endpoint checks, in the spec's order ---- */

static void slave_checks(void **state)
{
    fx *f = *state;
    const char *tok = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    const char *task = "{\"task\": {\"id\": \"ac4f3119-b098-4888-ba7f-9f68ccfa9c2e\"}, \"data\": {}}";
    const char *conn = "{\"master\": {\"address\": \"http://127.0.0.1:1\"}, \"data\": {}}";
    const char *self = slave_self_token(f->s);
    /* self requests */
    expect(f, "GET", url(f->slave_url, "/ping"), self, -1, "{}", 200, 0, "PONG!");
    expect(f, "GET", url(f->slave_url, "/ping"), NULL, -1, "{}", 400, 401, "Slave token not found.");
    expect(f, "GET", url(f->slave_url, "/ping"), tok, -1, "{}", 403, 402, "Slave token not match with this endpoint.");
    /* channel */
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, -1, task, 400, 201, "Channel not found.");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 7, task, 403, 202, "Channel not match with this endpoint.");
    /* master token */
    expect(f, "POST", url(f->slave_url, "/task/new"), NULL, 0, task, 400, 301, "Master token not found.");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, task, 403, 302, "Master not match with this endpoint.");
    expect(f, "DELETE", url(f->slave_url, "/disconnect"), tok, 0, "{\"data\": {}}", 403, 302,
           "Master not match with this endpoint.");
    /* connect with a bad body, then for real */
    expect(f, "POST", url(f->slave_url, "/connect"), tok, 0, "{\"data\": {}}", 400, 400, NULL);
    expect(f, "POST", url(f->slave_url, "/connect"), tok, 0, "not json", 400, 400, NULL);
    expect(f, "POST", url(f->slave_url, "/connect"), tok, 0, conn, 200, 0, "Connect success.");
    expect(f, "POST", url(f->slave_url, "/connect"), tok, 0, conn, 400, 501, "This slave already connected.");
    /* task body problems: 400 with the envelope (the reference: 500 HTML) */
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, "{\"data\": {}}", 400, 400,
           "Request body has no \"task\" object.");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, "{\"task\": {}, \"data\": {}}", 400, 400,
           "Request body has no \"task\".\"id\".");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, "{\"task\": {\"id\": \"xyz\"}, \"data\": {}}", 400, 400,
           "\"task\".\"id\" is not a UUID string.");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0,
           "{\"task\": {\"id\": \"ac4f3119-b098-4888-ba7f-9f68ccfa9c2e\"}}", 400, 400,
           "Request body has no \"data\" object.");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, "{\"task\": ", 400, 400, NULL);
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, "", 400, 400,
           "Request body is empty; a JSON object is required.");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, "[1]", 400, 400,
           "Request body is a JSON list; a JSON object is required.");
    /* a task, then a second one */
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, task, 200, 0, "Task received!");
    expect(f, "POST", url(f->slave_url, "/task/new"), tok, 0, task, 400, 601, "Already has a task.");
    /* unknown paths and methods */
    expect(f, "GET", url(f->slave_url, "/nope"), tok, 0, "{}", 404, 404, NULL);
    expect(f, "GET", url(f->slave_url, "/task/new"), tok, 0, "{}", 405, 405, NULL);
    /* disconnect, then shutdown */
    expect(f, "DELETE", url(f->slave_url, "/disconnect"), tok, 0, "{\"data\": {}}", 200, 0, "Disconnect success.");
    expect(f, "DELETE", url(f->slave_url, "/shutdown"), NULL, -1, "{}", 400, 401, "Slave token not found.");
    expect(f, "DELETE", url(f->slave_url, "/shutdown"), tok, -1, "{}", 403, 402, NULL);
    expect(f, "DELETE", url(f->slave_url, "/shutdown"), self, -1, "{}", 200, 0, NULL);
    tu_run_for(f->loop, 50);
    tu_reply r = tu_http(f->loop, f->client, "GET", url(f->slave_url, "/ping"), self, -1, "{}");
    assert_non_null(r.error); /* the server has stopped */
    tu_reply_free(&r);
}

typedef struct {
    int done;
    long status;
    char body[512];
} capture_t;

static void capture_cb(void *ud, const hc_result *res)
{
    capture_t *c = ud;
    c->done = 1;
    c->status = res->status;
    snprintf(c->body, sizeof c->body, "%s", res->body);
}

static void slave_rejects_non_integer_channel_with_400(void **state)
{
    fx *f = *state;
    /* hc sends Channel as an integer; use an extra header instead. The
     * reference crashes with a 500 here (fix: 400 code 201). */
    capture_t out = {0};
    hc_opts o;
    hc_opts_init(&o);
    o.method = "POST";
    o.url = url(f->slave_url, "/task/new");
    o.extra_header = "Channel: abc";
    o.token = "ffff";
    o.retries = 0;
    assert_non_null(hc_send(f->client, &o, capture_cb, &out));
    assert_true(tu_run_until(f->loop, &out.done, 5000));
    assert_int_equal(out.status, 400);
    assert_non_null(strstr(out.body, "\"code\":201"));
}

static void on_shutdown_noop(void *ud)
{
    (void)ud;
}

static void slave_refuses_everything_while_shutting_down_101(void **state)
{
    fx *f = *state;
    /* A slave whose embedder handles /shutdown keeps serving until freed,
     * and answers everything 401 code 101 meanwhile. */
    char err[256];
    slave_config sc;
    slave_config_init(&sc);
    slave_callbacks cb = {.on_shutdown = on_shutdown_noop};
    slave *s = slave_new(f->loop, &sc, &cb, f, err, sizeof err);
    assert_non_null(s);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", slave_port(s));
    const char *task = "{\"task\": {\"id\": \"ac4f3119-b098-4888-ba7f-9f68ccfa9c2e\"}, \"data\": {}}";
    expect(f, "DELETE", url(base, "/shutdown"), slave_self_token(s), -1, "{}", 200, 0, NULL);
    expect(f, "GET", url(base, "/ping"), slave_self_token(s), -1, "{}", 401, 101, "System is shutting down.");
    expect(f, "POST", url(base, "/task/new"), "x", 0, task, 401, 101, "System is shutting down.");
    expect(f, "POST", url(base, "/connect"), NULL, -1, "{}", 401, 101, "System is shutting down.");
    slave_free(s);
}

static void master_refuses_everything_while_shutting_down_101(void **state)
{
    fx *f = *state;
    const char *self = master_self_token(f->m);
    expect(f, "DELETE", url(f->master_url, "/shutdown"), NULL, -1, "{}", 400, 401, "Master token not found.");
    expect(f, "DELETE", url(f->master_url, "/shutdown"), "bad", -1, "{}", 403, 402, NULL);
    expect(f, "DELETE", url(f->master_url, "/shutdown"), self, -1, "{}", 200, 0, NULL);
    expect(f, "GET", url(f->master_url, "/ping"), self, -1, "{}", 401, 101, "System is shutting down.");
    expect(f, "GET", url(f->master_url, "/slave/heartbeat"), "x", 0, "{}", 401, 101, NULL);
}

static void body_over_the_limit_is_answered_413_with_the_envelope(void **state)
{
    fx *f = *state;
    char err[256];
    slave_config sc;
    slave_config_init(&sc);
    sc.http.body_limit = 1024;
    slave *s = slave_new(f->loop, &sc, NULL, f, err, sizeof err);
    assert_non_null(s);
    char base[64];
    snprintf(base, sizeof base, "http://127.0.0.1:%d", slave_port(s));
    char *big = xmalloc(4096);
    memset(big, ' ', 4095);
    big[0] = '{';
    big[4094] = '}';
    big[4095] = '\0';
    expect(f, "POST", url(base, "/connect"), "x", 0, big, 413, 413, NULL);
    /* A body at the limit is read (and judged on its content). */
    big[1023] = '\0';
    big[1022] = '}';
    expect(f, "POST", url(base, "/connect"), "x", 0, big, 400, 400, NULL);
    free(big);
    /* GET and DELETE bodies are read by Content-Length too. */
    expect(f, "GET", url(base, "/ping"), slave_self_token(s), -1, "{\"a\": 1}", 200, 0, "PONG!");
    slave_free(s);
}

/* ---- master endpoint checks ---- */

static void master_checks(void **state)
{
    fx *f = *state;
    const char *bad = "ffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff";
    const char *self = master_self_token(f->m);
    expect(f, "GET", url(f->master_url, "/ping"), self, -1, "{}", 200, 0, "PONG!");
    expect(f, "GET", url(f->master_url, "/ping"), NULL, -1, "{}", 400, 401, "Master token not found.");
    expect(f, "GET", url(f->master_url, "/ping"), bad, -1, "{}", 403, 402, "Master token not match with this endpoint.");
    expect(f, "GET", url(f->master_url, "/slave/heartbeat"), bad, -1, "{}", 400, 201, "Channel not found.");
    expect(f, "GET", url(f->master_url, "/slave/heartbeat"), bad, 3, "{}", 403, 202, NULL);
    expect(f, "GET", url(f->master_url, "/slave/heartbeat"), NULL, 0, "{}", 400, 501, "Slave token not found.");
    expect(f, "GET", url(f->master_url, "/slave/heartbeat"), bad, 0, "{}", 403, 502,
           "No matching slave token found in this endpoint.");
    expect(f, "GET", url(f->master_url, "/nope"), bad, 0, "{}", 404, 404, NULL);
    expect(f, "PUT", url(f->master_url, "/slave/heartbeat"), bad, 0, "{}", 405, 405, NULL);
}

/* Requests as the connected slave would send them, with its token. The
 * master's token for the slave is learned by connecting a fake slave: a
 * hs server that records the /connect Token. */
typedef struct {
    char token[80];
    char address[128];
} fake_slave;

static void fake_handler(void *data, hs_request *r)
{
    fake_slave *fs = data;
    const char *t = hs_header(r, "Token");
    if (strcmp(hs_path(r), "/connect") == 0 && t) {
        snprintf(fs->token, sizeof fs->token, "%s", t);
        cJSON *j = jsonx_parse(hs_body(r), hs_body_len(r), NULL, 0);
        const char *a = jsonx_get_str(jsonx_get(j, "master"), "address");
        snprintf(fs->address, sizeof fs->address, "%s", a ? a : "");
        cJSON_Delete(j);
    }
    hs_reply_json(r, 200, proto_envelope(true, 0, "Connect success.", NULL));
}

static void master_result_reports(void **state)
{
    fx *f = *state;
    fake_slave fs = {0};
    char err[256];
    hs_config hc;
    hs_config_init(&hc);
    hs_server *srv = hs_start(f->loop, &hc, fake_handler, &fs, err, sizeof err);
    assert_non_null(srv);
    master_conn *c = master_connect(f->m, "fake", "127.0.0.1", hs_port(srv), NULL, on_connected, f, err, sizeof err);
    assert_non_null(c);
    assert_true(tu_run_until(f->loop, &f->connect_done, 5000));
    assert_true(f->connect_ok);
    assert_string_equal(fs.address, f->master_url);
    const char *tok = fs.token;
    expect(f, "GET", url(f->master_url, "/slave/heartbeat"), tok, 0, "{}", 200, 0, "Received!");
    expect(f, "PUT", url(f->master_url, "/slave/task/complete"), tok, 0, "{\"result\": {}}", 200, 601,
           "Task information not found.");
    expect(f, "PUT", url(f->master_url, "/slave/task/complete"), tok, 0, "{\"task\": {}, \"result\": {}}", 200, 601,
           "Task ID not found.");
    expect(f, "PUT", url(f->master_url, "/slave/task/complete"), tok, 0, "{\"task\": {\"id\": \"xyz\"}, \"result\": {}}",
           200, 601, "Task not found.");
    /* a real task: the fake slave accepts it (any 200 envelope) */
    tu_task_out o = {0};
    master_task *t = send_task(f, c, "{\"name\": \"x\"}", &o, 0);
    char *body = xasprintf("{\"task\": {\"id\": \"%s\"}, \"result\": {\"v\": 1}}", master_task_id(t));
    expect(f, "PUT", url(f->master_url, "/slave/task/complete"), tok, 0, body, 200, 0, "Result received!");
    assert_int_equal(o.done, 1);
    assert_int_equal(o.state, TASK_COMPLETED);
    assert_string_equal(o.result, "{\"v\":1}");
    /* a duplicate: answered, ignored, and the master goes on */
    expect(f, "PUT", url(f->master_url, "/slave/task/complete"), tok, 0, body, 200, 601, "Task not found.");
    free(body);
    tu_task_out_free(&o);
    /* a malformed report fails the pending task at once */
    tu_task_out o2 = {0};
    send_task(f, c, "{\"name\": \"y\"}", &o2, 0);
    tu_run_for(f->loop, 50);
    expect(f, "PUT", url(f->master_url, "/slave/task/fail"), tok, 0, "{\"task\": {\"id\"", 400, 400, NULL);
    assert_int_equal(o2.done, 1);
    assert_int_equal(o2.state, TASK_FAILED);
    assert_non_null(strstr(o2.error, "fake: sent a malformed report"));
    tu_task_out_free(&o2);
    master_disconnect(c, "done");
    hs_stop(srv);
}

/* ---- many slaves ---- */

#define MANY 64

typedef struct {
    slave *s;
    fx *f;
} many_ud;

static void many_on_task(void *ud, const char *id, const cJSON *data, slave_verdict *v)
{
    many_ud *u = ud;
    (void)v;
    cJSON *res = cJSON_CreateObject();
    cJSON_AddItemToObject(res, "n", jsonx_dup(jsonx_get(data, "n")));
    slave_task_complete(u->s, id, res);
}

typedef struct {
    int connected;
    int done;
    int ok;
} many_count;

static void many_connected(void *ud, master_conn *c, bool ok, const char *e)
{
    many_count *mc = ud;
    (void)c;
    (void)e;
    mc->connected += ok;
}

static void many_task_done(void *ud, master_task *t, proto_task_state st, cJSON **result, const char *error)
{
    many_count *mc = ud;
    (void)t;
    (void)error;
    mc->done++;
    mc->ok += st == TASK_COMPLETED && *result != NULL;
}

static bool all_connected(void *d)
{
    return ((many_count *)d)->connected == MANY;
}

static bool all_done(void *d)
{
    return ((many_count *)d)->done == MANY;
}

static void one_master_drives_64_slaves_at_once(void **state)
{
    fx *f = *state;
    many_ud u[MANY];
    many_count mc = {0};
    char err[256];
    for (int i = 0; i < MANY; i++) {
        slave_config sc;
        slave_config_init(&sc);
        char name[32];
        snprintf(name, sizeof name, "s%d", i);
        sc.name = name;
        slave_callbacks cb = {.on_task = many_on_task};
        u[i].f = f;
        u[i].s = slave_new(f->loop, &sc, &cb, &u[i], err, sizeof err);
        assert_non_null(u[i].s);
        assert_non_null(master_connect(f->m, name, "127.0.0.1", slave_port(u[i].s), NULL, many_connected, &mc, err,
                                       sizeof err));
    }
    assert_true(tu_run_until_pred(f->loop, all_connected, &mc, 10000));
    for (int i = 0; i < MANY; i++) {
        char *d = xasprintf("{\"name\": \"t\", \"n\": %d}", i);
        assert_non_null(master_task_send(master_conn_at(f->m, (size_t)i), d, strlen(d), 0, many_task_done, &mc, err,
                                         sizeof err));
    }
    assert_true(tu_run_until_pred(f->loop, all_done, &mc, 10000));
    assert_int_equal(mc.ok, MANY);
    for (int i = 0; i < MANY; i++)
        slave_free(u[i].s);
}

/* ---- pure protocol helpers ---- */

static void tokens_are_64_hex_and_compared_exactly(void **state)
{
    (void)state;
    char a[PROTO_TOKEN_LEN + 1], b[PROTO_TOKEN_LEN + 1];
    assert_int_equal(proto_token_new(a), 0);
    assert_int_equal(proto_token_new(b), 0);
    assert_int_equal(strlen(a), 64);
    assert_int_equal(strspn(a, "0123456789abcdefABCDEF"), 64);
    assert_string_not_equal(a, b);
    assert_true(proto_token_equal(a, a));
    assert_false(proto_token_equal(a, b));
    char c[PROTO_TOKEN_LEN + 1];
    memcpy(c, a, sizeof c);
    c[63] = c[63] == '0' ? '1' : '0';
    assert_false(proto_token_equal(a, c));
    assert_false(proto_token_equal(a, "abc"));
}

static void envelope_is_compact_sorted_with_newline(void **state)
{
    (void)state;
    char *e = proto_envelope(true, 0, "Connect success.", NULL);
    assert_string_equal(e, "{\"code\":0,\"data\":null,\"message\":\"Connect success.\",\"success\":true}\n");
    free(e);
    e = proto_error_envelope(PROTO_MASTER_SLAVE_TOKEN_INVALID);
    assert_string_equal(e, "{\"code\":502,\"data\":null,\"message\":\"No matching slave token found in this "
                           "endpoint.\",\"success\":false}\n");
    free(e);
}

/* ---- hs itself, over raw sockets: framing, pipelining, keep-alive ---- */

typedef struct {
    int requests, aborts;
    hs_request *deferred;
} hs_fx;

static bool hs_cat_query(void *data, const char *k, const char *v)
{
    xbuf *b = data;
    xbuf_printf(b, "[%s=%s]", k, v ? v : "(null)");
    return true;
}

/* Echoes what it saw; "/defer" is deferred, "/none" gets no reply. */
static void hs_echo(void *data, hs_request *r)
{
    hs_fx *f = data;
    f->requests++;
    if (strcmp(hs_path(r), "/defer") == 0) {
        f->deferred = r;
        hs_defer(r);
        return;
    }
    if (strcmp(hs_path(r), "/none") == 0)
        return;
    xbuf b = {0};
    if (strcmp(hs_path(r), "/len") == 0) {
        unsigned long sum = 0;
        for (size_t i = 0; i < hs_body_len(r); i++)
            sum = sum * 31 + (unsigned char)hs_body(r)[i];
        xbuf_printf(&b, "len=%zu sum=%lu nul=%d.", hs_body_len(r), sum, hs_body(r)[hs_body_len(r)] == '\0');
        size_t n = b.len;
        hs_reply(r, 200, "text/plain", xbuf_take(&b), n);
        return;
    }
    xbuf_printf(&b, "%s %s ", hs_method(r), hs_path(r));
    hs_query_foreach(r, hs_cat_query, &b);
    const char *h = hs_header(r, "x-TEST");
    xbuf_printf(&b, " h=%s body=%.*s.", h ? h : "(null)", (int)hs_body_len(r), hs_body(r));
    size_t n = b.len;
    hs_reply(r, 200, "text/plain", xbuf_take(&b), n);
}

static void hs_on_abort(void *data, hs_request *r)
{
    hs_fx *f = data;
    (void)r;
    f->aborts++;
}

static int raw_connect(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    return fd;
}

/* Sends req (half-closing if asked), runs the loop and collects what comes
 * back until EOF, or until `until` appears in it (cap 5 s). */
static int raw_rounds = 1000; /* of 5 ms */

static char *raw_exchange(ev_loop *loop, int fd, const char *req, bool halfclose, const char *until, bool *eof)
{
    size_t len = strlen(req);
    if (len)
        assert_int_equal(send(fd, req, len, MSG_NOSIGNAL), (ssize_t)len);
    if (halfclose)
        shutdown(fd, SHUT_WR);
    xbuf b = {0};
    xbuf_append(&b, "", 0);
    *eof = false;
    for (int i = 0; i < raw_rounds && !*eof && !(until && strstr(b.data, until)); i++) {
        tu_run_for(loop, 5);
        char tmp[4096];
        ssize_t n;
        while ((n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT)) > 0)
            xbuf_append(&b, tmp, (size_t)n);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            *eof = true;
    }
    return xbuf_take(&b);
}

static int count_of(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

static hs_server *hs_test_server(ev_loop *loop, hs_fx *f, size_t body_limit, unsigned idle_s)
{
    hs_config cfg;
    hs_config_init(&cfg);
    cfg.server_header = "dilearn-test";
    cfg.body_limit = body_limit;
    cfg.idle_timeout_s = idle_s;
    char err[200];
    hs_server *s = hs_start(loop, &cfg, hs_echo, f, err, sizeof err);
    if (!s)
        fail_msg("hs_start: %s", err);
    hs_set_abort_handler(s, hs_on_abort, f);
    return s;
}

/* What libmicrohttpd gives the handler, and what our code answers itself
 * (with the envelope): 413 before the body, 500 for no reply, deferred
 * replies holding back pipelined requests, the abort handler. */
static void hs_serves_requests_on_libmicrohttpd(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    hs_fx f = {0};
    hs_server *s = hs_test_server(loop, &f, 1000, 0);
    int port = hs_port(s);
    bool eof;

    /* pipelined: a query, a body without Content-Length, HEAD, then half-close */
    int fd = raw_connect(port);
    char *out = raw_exchange(loop, fd,
                             "GET /a%20b?x=1+2&y=%41%42&flag&e= HTTP/1.1\r\nHost: x\r\nX-Test:  hi there\r\n\r\n"
                             "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde"
                             "\r\n0\r\nTrailer: t\r\n\r\n"
                             "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n",
                             true, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_int_equal(count_of(out, "HTTP/1.1 200 OK\r\n"), 3);
    assert_int_equal(count_of(out, "\r\nServer: dilearn-test\r\n"), 3);
    if (!strstr(out, "GET /a b [x=1 2][y=AB][flag=(null)][e=] h=hi there body=."))
        fail_msg("query and header: got %s", out);
    char *c = strstr(out, "POST /c  h=(null) body=abcde.");
    assert_non_null(c);
    char *h = strstr(c, "HTTP/1.1 200 OK");
    assert_non_null(h);
    assert_true(strstr(h, "\r\n\r\n")[4] == '\0'); /* HEAD: no body */
    free(out);

    /* HTTP/1.0 closes unless asked; HTTP/1.1 Connection: close is honoured */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "GET /old HTTP/1.0\r\n\r\n", false, NULL, &eof);
    close(fd);
    if (!eof || !strstr(out, " 200 OK\r\n") || !strstr(out, "\r\nConnection: close\r\n"))
        fail_msg("HTTP/1.0 (eof %d): got %s", eof, out);
    free(out);
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "GET /close HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", false, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_non_null(strstr(out, "GET /close "));
    free(out);

    /* Expect: 100-continue, then the body */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "PUT /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n",
                       false, "\r\n\r\n", &eof);
    assert_string_equal(out, "HTTP/1.1 100 Continue\r\n\r\n");
    free(out);
    out = raw_exchange(loop, fd, "hello", false, "body=hello.", &eof);
    assert_non_null(strstr(out, "PUT /e  h=(null) body=hello."));
    free(out);
    /* over the limit with 100-continue: 413 at once, no 100, before the body */
    out = raw_exchange(loop, fd, "PUT /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n",
                       false, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_null(strstr(out, "100 Continue"));
    assert_non_null(strstr(out, "HTTP/1.1 413 "));
    assert_non_null(strstr(out, "{\"code\":413,\"data\":null,\"message\":\"Request body over the limit of 1000 bytes.\""));
    free(out);
    /* ... and without Expect: answered before any of the body is sent */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n", false,
                       "\"success\":false}\n", &eof);
    close(fd);
    assert_non_null(strstr(out, "HTTP/1.1 413 "));
    free(out);
    /* HEAD answered by our code: the status, no body */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "HEAD /none HTTP/1.1\r\nHost: x\r\n\r\n", true, NULL, &eof);
    close(fd);
    assert_non_null(strstr(out, "HTTP/1.1 500 "));
    assert_true(strstr(out, "\r\n\r\n")[4] == '\0');
    free(out);

    /* a deferred request holds back the pipelined one behind it */
    fd = raw_connect(port);
    f.deferred = NULL;
    raw_rounds = 40;
    out = raw_exchange(loop, fd, "GET /defer HTTP/1.1\r\nHost: x\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n", false,
                       "body=.", &eof);
    raw_rounds = 1000;
    assert_string_equal(out, ""); /* ran for the whole cap: nothing */
    free(out);
    assert_non_null(f.deferred);
    assert_string_equal(hs_path(f.deferred), "/defer");
    hs_reply(f.deferred, 202, NULL, xstrdup("{}"), 2);
    out = raw_exchange(loop, fd, "", true, NULL, &eof);
    close(fd);
    assert_true(eof);
    char *first = strstr(out, "HTTP/1.1 202 Accepted"), *second = strstr(out, "GET /after");
    if (!first || !second)
        fail_msg("deferred then pipelined: got %s", out);
    assert_true(first < second);
    free(out);

    /* no reply from the handler: 500 with the envelope */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "GET /none HTTP/1.1\r\nHost: x\r\n\r\n", true, NULL, &eof);
    close(fd);
    assert_non_null(strstr(out, "HTTP/1.1 500 "));
    assert_non_null(strstr(out, "\"code\":500"));
    free(out);

    /* framing errors are libmicrohttpd's to answer: a 4xx/5xx, then close */
    static const struct {
        const char *req;
        const char *status;
    } bad[] = {
        {"GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n", "HTTP/1.1 400 "},
        {"GET / HTTP/3.0\r\nHost: x\r\n\r\n", "HTTP/1.1 505 "},
        {"GET / HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
        {"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1x\r\n", "HTTP/1.1 400 "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fd = raw_connect(port);
        out = raw_exchange(loop, fd, bad[i].req, false, NULL, &eof);
        close(fd);
        if (!strstr(out, bad[i].status) || !eof)
            fail_msg("%s: got %s (eof %d)", bad[i].req, out, eof);
        free(out);
    }
    /* a body without Content-Length over the limit: read, dropped, 413,
     * connection kept */
    fd = raw_connect(port);
    xbuf big = {0};
    xbuf_puts(&big, "POST /big HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        xbuf_puts(&big, "180\r\n");
        for (int j = 0; j < 0x180; j++)
            xbuf_puts(&big, "x");
        xbuf_puts(&big, "\r\n");
    }
    xbuf_puts(&big, "0\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n");
    out = raw_exchange(loop, fd, big.data, true, NULL, &eof);
    close(fd);
    xbuf_free(&big);
    assert_non_null(strstr(out, "HTTP/1.1 413 "));
    assert_non_null(strstr(out, "\"code\":413"));
    assert_non_null(strstr(out, "GET /next"));
    free(out);

    /* the abort handler: a head, part of its body, then the peer leaves */
    f.aborts = 0;
    int before = f.requests;
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "POST /cut HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc", true, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(f.aborts, 1);
    assert_int_equal(f.requests, before);

    hs_stop(s);

    /* a large body: head first, then 3 MiB (allocated when it starts to
     * arrive), sent as fast as the server takes it */
    s = hs_test_server(loop, &f, 0, 0);
    fd = raw_connect(hs_port(s));
    size_t blen = (size_t)3 << 20;
    char *body = xmalloc(blen);
    unsigned long sum = 0;
    for (size_t i = 0; i < blen; i++) {
        body[i] = (char)('a' + i % 23);
        sum = sum * 31 + (unsigned char)body[i];
    }
    char head[100];
    snprintf(head, sizeof head, "POST /len HTTP/1.1\r\nHost: x\r\nContent-Length: %zu\r\n\r\n", blen);
    raw_rounds = 20;
    out = raw_exchange(loop, fd, head, false, NULL, &eof);
    raw_rounds = 1000;
    assert_string_equal(out, ""); /* ran the loop for a while: nothing yet */
    free(out);
    for (size_t sent = 0; sent < blen;) {
        ssize_t n = send(fd, body + sent, blen - sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0)
            sent += (size_t)n;
        else
            assert_true(n < 0 && errno == EAGAIN);
        tu_run_for(loop, 1);
    }
    char want[100];
    snprintf(want, sizeof want, "len=%zu sum=%lu nul=1.", blen, sum);
    out = raw_exchange(loop, fd, "", false, want, &eof);
    assert_non_null(strstr(out, want));
    free(out);
    close(fd);
    free(body);
    hs_stop(s);
    ev_loop_free(loop);
}

/* Many pipelined requests in one write, their heads (and bodies) ending at
 * every offset around 1 KiB boundaries and around the connection memory's
 * halves: every one is answered, in order. Then heads near the head limit. */
static void hs_answers_every_pipelined_request(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    hs_fx f = {0};
    hs_server *s = hs_test_server(loop, &f, 0, 0);
    xbuf req = {0};
    int n = 0;
    /* absolute end offsets of heads in the stream, around 1 KiB multiples
     * and the half (its first read buffer) and whole of MHD's 32 KiB of
     * connection memory, and beyond; in between,
     * requests whose heads grow by 7 bytes each (40 to 2100), so that heads
     * end at every kind of offset */
    size_t marks[] = {1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
    size_t sweep = 0;
    for (size_t m = 0; m < sizeof marks / sizeof marks[0]; m++)
        for (int d = marks[m] > 16384 ? -1 : -3; d <= (marks[m] > 16384 ? 1 : 3); d++) {
            size_t target = marks[m] + (size_t)(long)d; /* the next k * mark + d */
            while (target < req.len + 200)
                target += marks[m];
            for (;;) {
                size_t room = target - req.len; /* what is left to the mark */
                size_t size = 100 + (sweep++ * 7) % 2000;
                int exact = room <= 2100;
                if (exact)
                    size = room;
                else if (room - size < 100)
                    size = room - 100;
                /* request n: its head is exactly size bytes */
                int with_body = n % 3 == 0;
                char line[96];
                int hl = snprintf(line, sizeof line, "%s /p%d HTTP/1.1\r\nHost: x\r\n%sX-Pad: ",
                                  with_body ? "POST" : "GET", n, with_body ? "Content-Length: 3\r\n" : "");
                assert_true(size >= (size_t)hl + 4);
                xbuf_puts(&req, line);
                for (size_t i = (size_t)hl + 4; i < size; i++)
                    xbuf_puts(&req, "p");
                xbuf_puts(&req, "\r\n\r\n");
                if (with_body)
                    xbuf_puts(&req, "b\r\n"); /* a body that looks like a line end */
                n++;
                if (exact) {
                    assert_int_equal(req.len - (with_body ? 3 : 0), target);
                    break;
                }
            }
        }
    int fd = raw_connect(hs_port(s));
    bool eof;
    char *out = raw_exchange(loop, fd, req.data, true, NULL, &eof);
    close(fd);
    int got = count_of(out, "HTTP/1.1 200 OK\r\n");
    assert_true(eof); /* the peer's end of stream seen after the last reply */
    if (got != n)
        fail_msg("%d pipelined requests (%zu bytes), %d answered", n, req.len, got);
    const char *p = out;
    for (int i = 0; i < n; i++) {
        char want[64];
        snprintf(want, sizeof want, "%s /p%d  h=(null) body=%s.", i % 3 == 0 ? "POST" : "GET", i,
                 i % 3 == 0 ? "b\r\n" : "");
        p = strstr(p, want);
        if (!p)
            fail_msg("reply to request %d missing or out of order", i);
    }
    free(out);
    xbuf_free(&req);
    assert_int_equal(f.requests, n);

    /* a partial head left at the end of a read: the first write ends in the
     * middle of a head, leaving 1020 to 1030 bytes free in a 16 or 32 KiB
     * input buffer (where the hand-written server lost its scan position
     * when it moved the partial head), then the rest and one more request */
    static const size_t buf_sizes[] = {8192, 16384, 32768};
    for (size_t b = 0; b < sizeof buf_sizes / sizeof buf_sizes[0]; b++)
        for (size_t free_room = 1020; free_room <= 1030; free_room++) {
            size_t first = buf_sizes[b] - free_room;
            xbuf_free(&req);
            int k = 0;
            while (req.len + 600 < first) { /* complete requests of ~300 bytes */
                xbuf_printf(&req, "GET /f%d HTTP/1.1\r\nHost: x\r\nX-Pad: ", k++);
                for (int i = 0; i < 250; i++)
                    xbuf_puts(&req, "q");
                xbuf_puts(&req, "\r\n\r\n");
            }
            xbuf_puts(&req, "GET /tail HTTP/1.1\r\nHost: x\r\nX-Pad: ");
            while (req.len < first)
                xbuf_puts(&req, "t");
            size_t cut = req.len;
            xbuf_puts(&req, "tt\r\n\r\nGET /after HTTP/1.1\r\nHost: x\r\n\r\n");
            int fd2 = raw_connect(hs_port(s));
            assert_int_equal(send(fd2, req.data, cut, MSG_NOSIGNAL), (ssize_t)cut);
            raw_rounds = 10; /* let it read and answer what is complete */
            char *part = raw_exchange(loop, fd2, "", false, NULL, &eof);
            raw_rounds = 1000;
            assert_int_equal(send(fd2, req.data + cut, req.len - cut, MSG_NOSIGNAL), (ssize_t)(req.len - cut));
            char *rest = raw_exchange(loop, fd2, "", false, "GET /after  h=(null) body=.", &eof);
            close(fd2);
            int answered = count_of(part, "HTTP/1.1 200 OK\r\n") + count_of(rest, "HTTP/1.1 200 OK\r\n");
            if (answered != k + 2 || !strstr(rest, "GET /tail ") || !strstr(rest, "GET /after "))
                fail_msg("a head cut %zu bytes into the stream (%zu free of %zu): %d of %d answered", cut, free_room,
                         buf_sizes[b], answered, k + 2);
            free(part);
            free(rest);
        }
    xbuf_free(&req);

    /* one request split at every byte of its head, over one connection */
    fd = raw_connect(hs_port(s));
    const char one[] = "GET /split?q=1 HTTP/1.1\r\nHost: x\r\nX-Test: v\r\n\r\n";
    for (size_t i = 0; i + 1 < sizeof one; i++) {
        assert_int_equal(send(fd, one + i, 1, MSG_NOSIGNAL), 1);
        tu_run_for(loop, 1);
    }
    out = raw_exchange(loop, fd, "", false, "body=.", &eof);
    assert_non_null(strstr(out, "GET /split [q=1] h=v body=."));
    free(out);
    close(fd);

    /* a head near the connection memory (32 KiB): a 20 KiB header is
     * served, a 40 KiB one answered by libmicrohttpd (431) and closed */
    for (int big = 0; big < 2; big++) {
        xbuf_puts(&req, "GET /long HTTP/1.1\r\nHost: x\r\nX-Test: ");
        for (size_t i = 0; i < (big ? (size_t)40 << 10 : (size_t)20 << 10); i++)
            xbuf_puts(&req, "v");
        xbuf_puts(&req, "\r\n\r\n");
        fd = raw_connect(hs_port(s));
        out = raw_exchange(loop, fd, req.data, false, big ? NULL : "body=.", &eof);
        close(fd);
        if (big ? !strstr(out, "HTTP/1.1 431 ") || !eof : !strstr(out, "HTTP/1.1 200 OK"))
            fail_msg("a %s header: got %.300s", big ? "40 KiB" : "20 KiB", out);
        free(out);
        xbuf_free(&req);
    }
    hs_stop(s);
    ev_loop_free(loop);
}

/* Reads until EOF or timeout on a non-blocking-polled socket while the loop
 * runs; returns ms until the server closed it, or -1. */
static long closed_within(ev_loop *loop, int fd, long cap_ms)
{
    uint64_t t0 = ev_now_ms();
    while ((long)(ev_now_ms() - t0) < cap_ms) {
        tu_run_for(loop, 20);
        char tmp[4096];
        ssize_t n = recv(fd, tmp, sizeof tmp, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN))
            return (long)(ev_now_ms() - t0);
    }
    return -1;
}

/* Slowloris: a head or a body dribbled a byte at a time (never silent for
 * the idle timeout) is dropped within a bounded time; a well-behaved
 * request on another connection is answered meanwhile. */
static void hs_drops_dribbled_heads_and_bodies(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    hs_fx f = {0};
    hs_server *s = hs_test_server(loop, &f, 0, 1);
    const char *head = "GET /slow HTTP/1.1\r\nHost: x\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const char *bhead = "POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n";
    for (int body = 0; body < 2; body++) {
        int fd = raw_connect(hs_port(s));
        if (body)
            assert_int_equal(send(fd, bhead, strlen(bhead), MSG_NOSIGNAL), (ssize_t)strlen(bhead));
        uint64_t t0 = ev_now_ms();
        long closed = -1;
        for (size_t i = 0; closed < 0 && ev_now_ms() - t0 < 8000; i++) {
            if (send(fd, body ? "x" : head + i % strlen(head), 1, MSG_NOSIGNAL) != 1) {
                closed = (long)(ev_now_ms() - t0);
                break;
            }
            long c = closed_within(loop, fd, 100);
            if (c >= 0)
                closed = (long)(ev_now_ms() - t0);
        }
        close(fd);
        fprintf(stderr, "dribbled %s closed after %ld ms (deadline 1 s)\n", body ? "body" : "head", closed);
        assert_true(closed >= 900 && closed < 3500);
    }
    assert_int_equal(f.aborts, 1); /* the body's request */
    assert_int_equal(f.requests, 0);
    /* an idle keep-alive connection: closed by the silence timeout */
    int fd = raw_connect(hs_port(s));
    long idle = closed_within(loop, fd, 5000);
    close(fd);
    assert_true(idle >= 900 && idle < 3500);
    /* and a well-behaved request is served */
    fd = raw_connect(hs_port(s));
    bool eof;
    char *out = raw_exchange(loop, fd, "GET /ok HTTP/1.1\r\nHost: x\r\n\r\n", true, NULL, &eof);
    close(fd);
    assert_non_null(strstr(out, "GET /ok "));
    free(out);
    hs_stop(s);
    ev_loop_free(loop);
}

/* An IPv6 listener serves; hs_peer() names the peer "::1:port". */
static void hs_peer_cb(void *data, hs_request *r)
{
    (void)data;
    hs_reply(r, 200, "text/plain", xstrdup(hs_peer(r)), strlen(hs_peer(r)));
}

static void hs_listens_on_ipv6(void **state)
{
    (void)state;
    int probe = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    if (probe < 0 || bind(probe, (struct sockaddr *)&a6, sizeof a6) < 0) {
        if (probe >= 0)
            close(probe);
        skip(); /* no IPv6 loopback here */
    }
    close(probe);
    ev_loop *loop = ev_loop_new();
    hs_config cfg;
    hs_config_init(&cfg);
    cfg.host = "::1";
    char err[200];
    hs_server *s = hs_start(loop, &cfg, hs_peer_cb, NULL, err, sizeof err);
    if (!s)
        fail_msg("hs_start on ::1: %s", err);
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    a6.sin6_port = htons((uint16_t)hs_port(s));
    assert_int_equal(connect(fd, (struct sockaddr *)&a6, sizeof a6), 0);
    bool eof;
    char *out = raw_exchange(loop, fd, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", true, NULL, &eof);
    close(fd);
    if (!strstr(out, " 200 OK\r\n") || !strstr(out, "\r\n\r\n::1:"))
        fail_msg("IPv6: got %s", out);
    free(out);
    hs_stop(s);
    ev_loop_free(loop);
}

/* The total and per-address connection limits: beyond them a connection is
 * closed at once; once one closes, a new one is served. */
static void hs_limits_connections(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    hs_fx f = {0};
    for (int per_ip = 0; per_ip < 2; per_ip++) {
        hs_config cfg;
        hs_config_init(&cfg);
        if (per_ip)
            cfg.per_ip_limit = 3;
        else
            cfg.connection_limit = 3;
        char err[200];
        hs_server *s = hs_start(loop, &cfg, hs_echo, &f, err, sizeof err);
        assert_non_null(s);
        int fds[3];
        for (int i = 0; i < 3; i++) {
            fds[i] = raw_connect(hs_port(s));
            tu_run_for(loop, 10);
        }
        int extra = raw_connect(hs_port(s));
        bool eof;
        char *out;
        if (per_ip) { /* accepted and closed at once */
            long closed = closed_within(loop, extra, 2000);
            close(extra);
            if (closed < 0)
                fail_msg("a connection over the per-address limit was kept");
        } else { /* left in the listen backlog: not served while 3 are open */
            raw_rounds = 40;
            out = raw_exchange(loop, extra, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n", false, NULL, &eof);
            raw_rounds = 1000;
            assert_string_equal(out, "");
            free(out);
        }
        out = raw_exchange(loop, fds[0], "GET /in HTTP/1.1\r\nHost: x\r\n\r\n", false, "body=.", &eof);
        assert_non_null(strstr(out, "GET /in "));
        free(out);
        close(fds[1]);
        tu_run_for(loop, 50);
        if (per_ip) {
            extra = raw_connect(hs_port(s));
            out = raw_exchange(loop, extra, "GET /wait HTTP/1.1\r\nHost: x\r\n\r\n", false, "body=.", &eof);
        } else {
            out = raw_exchange(loop, extra, "", false, "body=.", &eof);
        }
        if (!strstr(out, "GET /wait "))
            fail_msg("%s limit: after a close, got %s", per_ip ? "per-address" : "total", out);
        free(out);
        close(extra);
        close(fds[0]);
        close(fds[2]);
        hs_stop(s);
    }
    ev_loop_free(loop);
}

static void uuids_and_channels_parse_like_the_reference(void **state)
{
    (void)state;
    char u[PROTO_UUID_LEN + 1];
    assert_int_equal(proto_uuid4(u), 0);
    assert_true(proto_uuid_valid(u));
    assert_int_equal(u[14], '4');
    assert_true(proto_uuid_valid("{AC4F3119B0984888BA7F9F68CCFA9C2E}"));
    assert_false(proto_uuid_valid("xyz"));
    assert_false(proto_uuid_valid("ac4f3119-b098-4888-ba7f-9f68ccfa9c2"));
    int ch;
    assert_true(proto_parse_channel(" 7 ", &ch));
    assert_int_equal(ch, 7);
    assert_false(proto_parse_channel("abc", &ch));
    assert_false(proto_parse_channel("", &ch));
    assert_false(proto_parse_channel("99999999999", &ch));
}

/* ---- a task sent as head, borrowed span, tail ---- */

/* A slave that keeps the raw body of each task (raw_refs: it takes the
 * body over from the slave) and completes at once. */
typedef struct {
    slave *s;
    char *raw[2];
    size_t raw_len[2];
    int n;
    int second_take_null;
} raw_fx;

static void raw_on_task(void *ud, const char *id, const cJSON *data, slave_verdict *v)
{
    (void)data;
    (void)v;
    raw_fx *r = ud;
    const char *text = slave_task_text(r->s);
    size_t len;
    char *taken = slave_task_take_text(r->s, &len);
    assert_ptr_equal(taken, text); /* taken over, not copied */
    size_t len2;
    r->second_take_null = slave_task_take_text(r->s, &len2) == NULL && len2 == 0;
    if (r->n < 2) {
        r->raw[r->n] = taken;
        r->raw_len[r->n++] = len;
    } else {
        free(taken);
    }
    slave_task_complete(r->s, id, NULL);
}

static int span_releases;
static void span_release(void *ud)
{
    span_releases++;
    free(ud);
}

/* The bytes are master_task_send_framed()'s for the same data (apart from
 * the task id); the span is released once, when the request is over, and
 * at once when the task cannot be sent. */
static void task_sent_as_a_span_is_the_framed_task(void **state)
{
    fx *f = *state;
    char err[256];
    raw_fx r = {0};
    slave_config sc;
    slave_config_init(&sc);
    sc.name = "learner-raw";
    sc.raw_depth = 2;
    sc.raw_refs = true;
    slave_callbacks scb = {.on_task = raw_on_task};
    r.s = slave_new(f->loop, &sc, &scb, &r, err, sizeof err);
    assert_non_null(r.s);
    f->connect_done = 0;
    master_conn *c =
        master_connect(f->m, "raw", "127.0.0.1", slave_port(r.s), NULL, on_connected, f, err, sizeof err);
    assert_non_null(c);
    assert_true(tu_run_until(f->loop, &f->connect_done, 5000));
    assert_true(f->connect_ok);

    const char *head = "{\"name\": \"learner_learn_task\", \"data\": [";
    const char *span = "{\"a\": [1, 2]} ,\n 3";
    const char *tail = "]}";
    char *data = xasprintf("%s%s%s", head, span, tail);
    size_t dl = strlen(data);
    char *buf = xmalloc(MASTER_TASK_HEAD + dl + MASTER_TASK_TAIL + 1);
    memcpy(buf + MASTER_TASK_HEAD, data, dl);
    tu_task_out o1 = {0}, o2 = {0};
    assert_non_null(master_task_send_framed(c, buf, dl, 0, tu_task_done, &o1, err, sizeof err));
    assert_true(tu_run_until(f->loop, &o1.done, 5000));
    span_releases = 0;
    char *sp = xstrdup(span);
    master_task *t = master_task_send_span(c, head, strlen(head), sp, strlen(sp), span_release, sp, tail,
                                           strlen(tail), 0, tu_task_done, &o2, err, sizeof err);
    assert_non_null(t);
    assert_int_equal(span_releases, 0);
    assert_true(tu_run_until(f->loop, &o2.done, 5000));
    assert_int_equal(o2.state, TASK_COMPLETED);
    /* the /task/new reply may come after the result: the request ends then */
    assert_true(tu_run_until(f->loop, &span_releases, 5000));
    tu_run_for(f->loop, 20);
    assert_int_equal(span_releases, 1);
    assert_int_equal(r.n, 2);
    assert_true(r.second_take_null);
    assert_int_equal(r.raw_len[0], r.raw_len[1]);
    assert_int_equal(r.raw_len[0], MASTER_TASK_HEAD + dl + MASTER_TASK_TAIL);
    /* {"task": {"id": "<36>"}, "data": ...}: the same but for the id */
    const size_t id_at = strlen("{\"task\": {\"id\": \"");
    assert_memory_equal(r.raw[0], r.raw[1], id_at);
    assert_memory_equal(r.raw[0] + id_at + PROTO_UUID_LEN, r.raw[1] + id_at + PROTO_UUID_LEN,
                        r.raw_len[0] - id_at - PROTO_UUID_LEN);
    assert_memory_equal(r.raw[1] + MASTER_TASK_HEAD, data, dl);
    assert_memory_not_equal(r.raw[0] + id_at, r.raw[1] + id_at, PROTO_UUID_LEN);

    /* Not sent: released before the call returns. */
    span_releases = 0;
    sp = xstrdup(span);
    assert_null(master_task_send_span(NULL, head, strlen(head), sp, strlen(sp), span_release, sp, tail,
                                      strlen(tail), 0, tu_task_done, &o2, err, sizeof err));
    assert_int_equal(span_releases, 1);
    assert_string_equal(err, "(null): not connected");

    tu_task_out_free(&o1);
    tu_task_out_free(&o2);
    free(r.raw[0]);
    free(r.raw[1]);
    free(data);
    master_disconnect(c, "test over");
    tu_run_for(f->loop, 20);
    slave_free(r.s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokens_are_64_hex_and_compared_exactly),
        cmocka_unit_test(envelope_is_compact_sorted_with_newline),
        cmocka_unit_test(uuids_and_channels_parse_like_the_reference),
        cmocka_unit_test(hs_serves_requests_on_libmicrohttpd),
        cmocka_unit_test(hs_answers_every_pipelined_request),
        cmocka_unit_test(hs_drops_dribbled_heads_and_bodies),
        cmocka_unit_test(hs_limits_connections),
        cmocka_unit_test(hs_listens_on_ipv6),
        cmocka_unit_test_setup_teardown(task_completes_with_the_slave_result, setup, teardown),
        cmocka_unit_test_setup_teardown(task_completed_later_from_the_loop, setup, teardown),
        cmocka_unit_test_setup_teardown(task_failed_by_the_slave, setup, teardown),
        cmocka_unit_test_setup_teardown(task_fails_when_its_deadline_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(lost_connection_fails_pending_task_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(dead_slave_makes_task_fail_within_tolerance, setup, teardown),
        cmocka_unit_test_setup_teardown(second_task_while_one_runs_is_refused_601, setup, teardown),
        cmocka_unit_test_setup_teardown(task_to_a_restarted_slave_loses_the_connection_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(heartbeat_racing_a_disconnect_is_not_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(refused_task_ends_start_failed_602, setup, teardown),
        cmocka_unit_test_setup_teardown(error_status_on_task_new_ends_start_failed, setup, teardown),
        cmocka_unit_test_setup_teardown(refused_connection_reports_503, setup, teardown),
        cmocka_unit_test_setup_teardown(connect_to_nothing_fails_after_retries, setup, teardown),
        cmocka_unit_test_setup_teardown(duplicate_connection_name_is_rejected, setup, teardown),
        cmocka_unit_test_setup_teardown(disconnect_frees_the_slave_for_a_new_master, setup, teardown),
        cmocka_unit_test_setup_teardown(slave_detects_lost_master_and_can_be_taken_back, setup, teardown),
        cmocka_unit_test_setup_teardown(slave_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(slave_rejects_non_integer_channel_with_400, setup, teardown),
        cmocka_unit_test_setup_teardown(slave_refuses_everything_while_shutting_down_101, setup, teardown),
        cmocka_unit_test_setup_teardown(master_checks, setup, teardown),
        cmocka_unit_test_setup_teardown(master_refuses_everything_while_shutting_down_101, setup, teardown),
        cmocka_unit_test_setup_teardown(body_over_the_limit_is_answered_413_with_the_envelope, setup, teardown),
        cmocka_unit_test_setup_teardown(master_result_reports, setup, teardown),
        cmocka_unit_test_setup_teardown(one_master_drives_64_slaves_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(task_sent_as_a_span_is_the_framed_task, setup, teardown),
    };
    return cmocka_run_group_tests_name("interaction", tests, NULL, NULL);
}
