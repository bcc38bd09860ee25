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

static void hs_speaks_http11_on_its_own(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    hs_config cfg;
    hs_config_init(&cfg);
    cfg.server_header = "dilearn-test";
    cfg.body_limit = 1000;
    hs_fx f = {0};
    char err[200];
    hs_server *s = hs_start(loop, &cfg, hs_echo, &f, err, sizeof err);
    assert_non_null(s);
    hs_set_abort_handler(s, hs_on_abort, &f);
    int port = hs_port(s);
    bool eof;

    /* pipelined: a query, a chunked body, HEAD, then half-close */
    int fd = raw_connect(port);
    char *out = raw_exchange(loop, fd,
                             "GET /a%20b?x=1+2&y=%41%42&flag&e= HTTP/1.1\r\nHost: x\r\nX-Test:  hi there \r\n\r\n"
                             "\r\nPOST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\n"
                             "Trailer: t\r\n\r\n"
                             "HEAD /h HTTP/1.1\r\n\r\n",
                             true, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_int_equal(count_of(out, "HTTP/1.1 200 OK\r\n"), 3);
    assert_int_equal(count_of(out, "\r\nServer: dilearn-test\r\n"), 3);
    assert_int_equal(count_of(out, "\r\nDate: "), 3);
    assert_non_null(strstr(out, "GET /a b [x=1 2][y=AB][flag=(null)][e=] h=hi there body=."));
    char *c = strstr(out, "POST /c  h=(null) body=abcde.");
    assert_non_null(c);
    char *h = strstr(c, "HTTP/1.1 200 OK");
    assert_non_null(h);
    char cl[40];
    snprintf(cl, sizeof cl, "Content-Length: %zu\r\n", strlen("HEAD /h  h=(null) body=."));
    assert_non_null(strstr(h, cl));
    assert_true(out[strlen(out) - 1] == '\n' && strstr(h, "\r\n\r\n")[4] == '\0'); /* HEAD: no body */
    free(out);

    /* an empty line between requests, split after its CR */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "GET /one HTTP/1.1\r\n\r\n\r", false, "body=.", &eof);
    free(out);
    out = raw_exchange(loop, fd, "\nGET /two HTTP/1.1\r\n\r\n", true, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_non_null(strstr(out, "GET /two "));
    free(out);

    /* HTTP/1.0 closes unless asked; keep-alive asked is kept */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "GET /old HTTP/1.0\r\n\r\n", false, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_non_null(strstr(out, "HTTP/1.0 200 OK\r\n"));
    assert_non_null(strstr(out, "Connection: close\r\n"));
    free(out);
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "GET /old HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", false, "body=.", &eof);
    assert_false(eof);
    assert_non_null(strstr(out, "Connection: keep-alive\r\n"));
    free(out);
    /* ... and HTTP/1.1 Connection: close is honoured */
    out = raw_exchange(loop, fd, "GET /close HTTP/1.1\r\nConnection: keep-alive, close\r\n\r\n", false, NULL, &eof);
    close(fd);
    assert_true(eof);
    free(out);

    /* Expect: 100-continue, then the body */
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "PUT /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n", false,
                       "\r\n\r\n", &eof);
    assert_string_equal(out, "HTTP/1.1 100 Continue\r\n\r\n");
    free(out);
    out = raw_exchange(loop, fd, "hello", false, "body=hello.", &eof);
    assert_non_null(strstr(out, "PUT /e  h=(null) body=hello."));
    free(out);
    /* over the limit with 100-continue: 413 at once, no 100 */
    out = raw_exchange(loop, fd, "PUT /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5000\r\n\r\n", false,
                       NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_null(strstr(out, "100 Continue"));
    assert_non_null(strstr(out, "HTTP/1.1 413 "));
    assert_non_null(strstr(out, "\"code\":413"));
    free(out);

    /* a deferred request holds back the pipelined one behind it */
    fd = raw_connect(port);
    f.deferred = NULL;
    raw_rounds = 40;
    out = raw_exchange(loop, fd, "GET /defer HTTP/1.1\r\n\r\nGET /after HTTP/1.1\r\n\r\n", false, "body=.", &eof);
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
    out = raw_exchange(loop, fd, "GET /none HTTP/1.1\r\n\r\n", true, NULL, &eof);
    close(fd);
    assert_non_null(strstr(out, "HTTP/1.1 500 "));
    assert_non_null(strstr(out, "\"code\":500"));
    free(out);

    /* framing errors: envelopes, then close */
    static const struct {
        const char *req;
        const char *status;
    } bad[] = {
        {"GET / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", "HTTP/1.1 400 "},
        {"GET / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", "HTTP/1.1 400 "},
        {"GET / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", "HTTP/1.1 501 "},
        {"GET / HTTP/3.0\r\n\r\n", "HTTP/1.1 505 "},
        {"GET / HTTP/1.1\r\n folded\r\n\r\n", "HTTP/1.1 400 "},
        {"G(T / HTTP/1.1\r\n\r\n", "HTTP/1.1 400 "},
        {"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1x\r\n", "HTTP/1.1 400 "},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fd = raw_connect(port);
        out = raw_exchange(loop, fd, bad[i].req, false, NULL, &eof);
        close(fd);
        if (!strstr(out, bad[i].status) || !strstr(out, "\"success\":false"))
            fail_msg("%s: got %s", bad[i].req, out);
        assert_true(eof);
        free(out);
    }
    /* a chunked body over the limit: read, dropped, 413, connection kept */
    fd = raw_connect(port);
    xbuf big = {0};
    xbuf_puts(&big, "POST /big HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
    for (int i = 0; i < 3; i++) {
        xbuf_puts(&big, "180\r\n");
        for (int j = 0; j < 0x180; j++)
            xbuf_puts(&big, "x");
        xbuf_puts(&big, "\r\n");
    }
    xbuf_puts(&big, "0\r\n\r\nGET /next HTTP/1.1\r\n\r\n");
    out = raw_exchange(loop, fd, big.data, true, NULL, &eof);
    close(fd);
    xbuf_free(&big);
    assert_non_null(strstr(out, "HTTP/1.1 413 "));
    assert_non_null(strstr(out, "GET /next"));
    free(out);

    /* the abort handler: a head, part of its body, then the peer leaves */
    assert_int_equal(f.aborts, 1); /* the bad chunk size above */
    f.aborts = 0;
    int before = f.requests;
    fd = raw_connect(port);
    out = raw_exchange(loop, fd, "POST /cut HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc", true, NULL, &eof);
    close(fd);
    assert_true(eof);
    assert_string_equal(out, "");
    free(out);
    assert_int_equal(f.aborts, 1);
    assert_int_equal(f.requests, before);

    hs_stop(s);

    /* a large body: head first, then 3 MiB (allocated when it starts to
     * arrive), sent as fast as the server takes it */
    hs_config_init(&cfg);
    s = hs_start(loop, &cfg, hs_echo, &f, err, sizeof err);
    assert_non_null(s);
    fd = raw_connect(hs_port(s));
    size_t blen = (size_t)3 << 20;
    char *body = xmalloc(blen);
    unsigned long sum = 0;
    for (size_t i = 0; i < blen; i++) {
        body[i] = (char)('a' + i % 23);
        sum = sum * 31 + (unsigned char)body[i];
    }
    char head[100];
    snprintf(head, sizeof head, "POST /len HTTP/1.1\r\nContent-Length: %zu\r\n\r\n", blen);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(tokens_are_64_hex_and_compared_exactly),
        cmocka_unit_test(envelope_is_compact_sorted_with_newline),
        cmocka_unit_test(uuids_and_channels_parse_like_the_reference),
        cmocka_unit_test(hs_speaks_http11_on_its_own),
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
    };
    return cmocka_run_group_tests_name("interaction", tests, NULL, NULL);
}
