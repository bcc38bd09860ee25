/* The mocks' events (docs/events.md), end to end: the real mock_learner,
 * mock_coordinator and mock_operator started with --events, driven as the
 * scenario runner drives them, every line read back with evt_parse_line()
 * and every event the mocks write checked field by field. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ev.h"
#include "evt.h"
#include "hc.h"
#include "jsonx.h"
#include "proc.h"
#include "testutil.h"
#include "util.h"

#if !defined(MOCK_LEARNER_PATH) || !defined(MOCK_COORDINATOR_PATH) || !defined(MOCK_OPERATOR_PATH)
#error "MOCK_LEARNER_PATH, MOCK_COORDINATOR_PATH and MOCK_OPERATOR_PATH name the executables"
#endif

#define CAP_MS 20000

/* Every line of an events file, each checked by evt_parse_line(). */
typedef struct {
    evt_record *r;
    size_t n;
} lines;

static lines read_events(const char *path)
{
    lines L = {0};
    L.n = tu_events_read(path, &L.r);
    return L;
}

static void lines_free(lines *L)
{
    tu_events_free(L->r, L->n);
}

static bool str_is(const evt_record *r, evt_field_id f, const char *want)
{
    const char *s = evt_str(r, f);
    return want ? s && strcmp(s, want) == 0 : s == NULL;
}

static int64_t int_of(const evt_record *r, evt_field_id f)
{
    int64_t v = -99;
    assert_true(evt_int(r, f, &v));
    return v;
}

/* The n-th (0-based) line of event id whose field f is value (f < 0: any). */
static const evt_record *find(const lines *L, evt_id id, int f, const char *value, int n)
{
    for (size_t i = 0; i < L->n; i++)
        if (L->r[i].id == id && (f < 0 || str_is(&L->r[i], (evt_field_id)f, value)) && n-- == 0)
            return &L->r[i];
    return NULL;
}

static size_t index_of(const lines *L, const evt_record *r)
{
    return (size_t)(r - L->r);
}

static cJSON *start_learner(proc *p, const char *dir, const char *events, const char *const *extra)
{
    char log[512], ev[512];
    snprintf(log, sizeof log, "%s/learner.log", dir);
    snprintf(ev, sizeof ev, "%s/%s", dir, events);
    const char *argv[32] = {MOCK_LEARNER_PATH, "--count", "2", "--id-base", "7", "--label-prefix", "grp-learner",
                            "--events", ev, "--heartbeat-span-ms", "100", "--log-level", "debug"};
    size_t n = 13;
    while (*extra)
        argv[n++] = *extra++;
    argv[n] = NULL;
    assert_true(proc_start(p, (char *const *)argv, NULL, log));
    cJSON *ready = proc_ready(p, proc_slow_ms(CAP_MS));
    if (!ready)
        proc_show_log(p, 40);
    assert_non_null(ready);
    return ready;
}

static int port_of(const cJSON *ready, int k)
{
    int64_t port = 0;
    assert_true(jsonx_get_i64(jsonx_get(cJSON_GetArrayItem(jsonx_get(ready, "learners"), k), "port"), &port));
    return (int)port;
}

/* dump: the learner's --dump file to check, or NULL. */
static int run_coordinator(const char *dir, int port, const char *events, const char *dump)
{
    char log[512], ev[512], target[64];
    snprintf(log, sizeof log, "%s/coordinator.log", dir);
    snprintf(ev, sizeof ev, "%s/%s", dir, events);
    snprintf(target, sizeof target, "127.0.0.1:%d", port);
    const char *argv[] = {MOCK_COORDINATOR_PATH, "--connect", target, "--rounds", "1", "--time-scale", "0.05",
                          "--events", ev, "--events-each-line", dump ? "--dump" : NULL, dump, NULL};
    proc c;
    assert_true(proc_start(&c, (char *const *)argv, NULL, log));
    proc_read_all(&c, proc_slow_ms(CAP_MS));
    int code = proc_wait(&c, proc_slow_ms(CAP_MS));
    proc_free(&c);
    return code;
}

static const char *const task_names[] = {"resource", "learner_start_task", "learner_get_data_task",
                                         "learner_learn_task", "learner_close_task"};

/* A learner driven through one round: master_connected, task_received and
 * task_done per task, fault_fired for a task fault and for a state fault at
 * start-up, master_lost, shutdown; the coordinator's task_sent/task_done. */
static void learner_and_coordinator_events(void **state)
{
    (void)state;
    char *dir = proc_tmpdir("mock-events");
    char dump[512];
    snprintf(dump, sizeof dump, "%s/learner.dump.jsonl", dir);
    const char *extra[] = {"--events-each-line", "--dump", dump,
                           "--fault", "{\"learner\": 0, \"kind\": \"fail\", \"task\": \"learner_learn_task\", \"at\": 1}",
                           "--fault", "{\"learner\": 0, \"kind\": \"delay\", \"ms\": 5, \"task\": \"learner_get_data_task\"}",
                           "--fault", "{\"learner\": 1, \"kind\": \"no_heartbeat\"}", NULL};
    proc l;
    cJSON *ready = start_learner(&l, dir, "learner.events.jsonl", extra);
    assert_int_equal(run_coordinator(dir, port_of(ready, 0), "coordinator.events.jsonl", dump), 1); /* the learn failed */
    cJSON_Delete(ready);
    assert_int_equal(proc_stop(&l, proc_slow_ms(CAP_MS)), 0);
    proc_free(&l);

    char path[600];
    snprintf(path, sizeof path, "%s/learner.events.jsonl", dir);
    lines L = read_events(path);
    snprintf(path, sizeof path, "%s/coordinator.events.jsonl", dir);
    lines C = read_events(path);

    /* started: first, with the version and pid */
    assert_int_equal(L.r[0].id, EVT_started);
    assert_string_equal(L.r[0].process, "mock_learner");
    assert_true(int_of(&L.r[0], EVT_F_pid) > 0);
    assert_non_null(evt_str(&L.r[0], EVT_F_version));
    assert_int_equal(C.r[0].id, EVT_started);
    assert_string_equal(C.r[0].process, "mock_coordinator");

    /* the state fault, at start-up, on learner8 (index 1 with --id-base 7) */
    const evt_record *nh = find(&L, EVT_fault_fired, EVT_F_kind, "no_heartbeat", 0);
    assert_non_null(nh);
    assert_true(str_is(nh, EVT_F_learner, "learner8"));
    assert_true(str_is(nh, EVT_F_label, "grp-learner1"));
    assert_true(str_is(nh, EVT_F_name, NULL));
    assert_int_equal(int_of(nh, EVT_F_count), 1);
    assert_int_equal(int_of(nh, EVT_F_fault), 3);
    assert_true(str_is(nh, EVT_F_reason, "at start-up"));

    const evt_record *mc = find(&L, EVT_master_connected, -1, NULL, 0);
    assert_non_null(mc);
    assert_true(str_is(mc, EVT_F_learner, "learner7"));
    assert_true(str_is(mc, EVT_F_label, "grp-learner0"));
    assert_true(strncmp(evt_str(mc, EVT_F_master), "http://127.0.0.1:", 17) == 0);

    for (size_t k = 0; k < 5; k++) {
        const evt_record *rx = find(&L, EVT_task_received, EVT_F_name, task_names[k], 0);
        const evt_record *dn = find(&L, EVT_task_done, EVT_F_name, task_names[k], 0);
        const evt_record *sent = find(&C, EVT_task_sent, EVT_F_name, task_names[k], 0);
        const evt_record *cd = find(&C, EVT_task_done, EVT_F_name, task_names[k], 0);
        if (!rx || !dn || !sent || !cd)
            fail_msg("%s: task_received %p, task_done %p, task_sent %p, coordinator task_done %p", task_names[k],
                     (void *)rx, (void *)dn, (void *)sent, (void *)cd);
        bool learn = k == 3;
        assert_true(index_of(&L, mc) < index_of(&L, rx) && index_of(&L, rx) < index_of(&L, dn));
        assert_true(str_is(rx, EVT_F_learner, "learner7"));
        assert_int_equal(int_of(rx, EVT_F_items), learn ? 8 : -1);
        assert_int_equal(int_of(sent, EVT_F_items), learn ? 8 : -1);
        /* one task, one id, on both sides */
        assert_string_equal(evt_str(rx, EVT_F_id), evt_str(sent, EVT_F_id));
        assert_string_equal(evt_str(dn, EVT_F_id), evt_str(sent, EVT_F_id));
        assert_string_equal(evt_str(cd, EVT_F_id), evt_str(sent, EVT_F_id));
        assert_true(str_is(dn, EVT_F_learner, "learner7"));
        assert_true(str_is(dn, EVT_F_status, learn ? "failed" : "completed"));
        assert_true(str_is(dn, EVT_F_message, learn ? "injected failure" : NULL));
        assert_true(str_is(cd, EVT_F_status, learn ? "failed" : "completed"));
        assert_true(str_is(cd, EVT_F_learner, NULL));
        double lat = -1;
        assert_true(evt_dbl(dn, EVT_F_latency_ms, &lat) && lat >= 0);
        assert_true(evt_dbl(cd, EVT_F_latency_ms, &lat) && lat >= 0);
        if (k == 2) /* the delay fault: 5 ms more */
            assert_true(evt_dbl(dn, EVT_F_latency_ms, &lat) && lat >= 5);
    }
    assert_non_null(strstr(evt_str(find(&C, EVT_task_done, EVT_F_name, "learner_learn_task", 0), EVT_F_message),
                           "injected failure"));

    /* the task faults: right after their task_received, with the task */
    const evt_record *ff = find(&L, EVT_fault_fired, EVT_F_kind, "fail", 0);
    assert_non_null(ff);
    assert_true(str_is(ff, EVT_F_learner, "learner7"));
    assert_true(str_is(ff, EVT_F_label, "grp-learner0"));
    assert_true(str_is(ff, EVT_F_name, "learner_learn_task"));
    assert_int_equal(int_of(ff, EVT_F_count), 1);
    assert_int_equal(int_of(ff, EVT_F_fault), 1);
    assert_int_equal(L.r[index_of(&L, ff) - 1].id, EVT_task_received);
    const evt_record *fd = find(&L, EVT_fault_fired, EVT_F_kind, "delay", 0);
    assert_non_null(fd);
    assert_true(str_is(fd, EVT_F_name, "learner_get_data_task"));
    assert_int_equal(int_of(fd, EVT_F_fault), 2);
    assert_null(find(&L, EVT_fault_fired, -1, NULL, 3)); /* three in all */

    const evt_record *ml = find(&L, EVT_master_lost, -1, NULL, 0);
    assert_non_null(ml);
    assert_true(str_is(ml, EVT_F_learner, "learner7"));
    assert_true(str_is(ml, EVT_F_label, "grp-learner0"));
    assert_true(str_is(ml, EVT_F_reason, "disconnected by the master"));
    assert_string_equal(evt_str(ml, EVT_F_master), evt_str(mc, EVT_F_master));

    /* the dump checks: one learner, one learn round (failed: no merge to
     * recompute), one get-data sum; once, after the last task */
    const evt_record *dc = find(&C, EVT_dumps_checked, -1, NULL, 0);
    assert_non_null(dc);
    assert_int_equal(int_of(dc, EVT_F_learners), 1);
    assert_int_equal(int_of(dc, EVT_F_rounds), 1);
    assert_int_equal(int_of(dc, EVT_F_merges), 0);
    assert_int_equal(int_of(dc, EVT_F_sums), 1);
    assert_null(find(&C, EVT_dumps_checked, -1, NULL, 1));
    assert_true(index_of(&C, dc) > index_of(&C, find(&C, EVT_task_done, EVT_F_name, "learner_close_task", 0)));

    const evt_record *sd = &L.r[L.n - 1];
    assert_int_equal(sd->id, EVT_shutdown);
    assert_true(str_is(sd, EVT_F_signal, "SIGTERM"));
    lines_free(&L);
    lines_free(&C);
    free(dir);
}

/* A crash fault: the lines pending in a buffer that would be written only
 * an hour later are written before the process exits. --events-learner: the
 * learner's name in events is the one an aggregator in Kubernetes mode knows
 * it by. */
static void crash_writes_its_events_first(void **state)
{
    (void)state;
    char *dir = proc_tmpdir("mock-events-crash");
    const char *extra[] = {"--events-flush-ms", "3600000", "--events-learner", "{id}.localhost:{port}", "--fault",
                           "{\"learner\": 0, \"kind\": \"crash\", \"task\": \"learner_learn_task\"}", NULL};
    proc l;
    cJSON *ready = start_learner(&l, dir, "learner.events.jsonl", extra);
    char k8s_id[64]; /* the id an aggregator knows it by when an operator lists it */
    snprintf(k8s_id, sizeof k8s_id, "learner7.localhost:%d", port_of(ready, 0));
    run_coordinator(dir, port_of(ready, 0), "coordinator.events.jsonl", NULL);
    cJSON_Delete(ready);
    assert_int_equal(proc_wait(&l, proc_slow_ms(CAP_MS)), 3);
    proc_free(&l);
    char path[600];
    snprintf(path, sizeof path, "%s/learner.events.jsonl", dir);
    lines L = read_events(path);
    if (L.n < 3)
        fail_msg("%s: %zu line(s): the lines before the crash were lost", path, L.n);
    const evt_record *last = &L.r[L.n - 1], *before = &L.r[L.n - 2];
    assert_int_equal(last->id, EVT_fault_fired);
    assert_true(str_is(last, EVT_F_kind, "crash"));
    assert_true(str_is(last, EVT_F_name, "learner_learn_task"));
    assert_true(str_is(last, EVT_F_learner, k8s_id));
    assert_true(str_is(last, EVT_F_label, "grp-learner0"));
    assert_int_equal(int_of(last, EVT_F_count), 1);
    assert_int_equal(int_of(last, EVT_F_fault), 1);
    assert_non_null(evt_str(last, EVT_F_reason));
    assert_int_equal(before->id, EVT_task_received);
    assert_true(str_is(before, EVT_F_name, "learner_learn_task"));
    assert_true(str_is(before, EVT_F_learner, k8s_id));
    lines_free(&L);
    free(dir);
}

/* mock_operator: operator_request for every answer (with the fault that
 * shaped it), fault_fired for each use of a fault, refuse included. */
static void operator_events(void **state)
{
    (void)state;
    char *dir = proc_tmpdir("mock-events-op");
    char log[512], ev[512];
    snprintf(log, sizeof log, "%s/operator.log", dir);
    snprintf(ev, sizeof ev, "%s/operator.events.jsonl", dir);
    const char *argv[] = {MOCK_OPERATOR_PATH, "--port", "0", "--control-port", "0", "--events", ev,
                          "--events-each-line", NULL};
    proc o;
    assert_true(proc_start(&o, (char *const *)argv, NULL, log));
    cJSON *ready = proc_ready(&o, proc_slow_ms(CAP_MS));
    assert_non_null(ready);
    int64_t port = 0, cport = 0;
    assert_true(jsonx_get_i64(jsonx_get(ready, "port"), &port));
    assert_true(jsonx_get_i64(jsonx_get(ready, "control_port"), &cport));
    cJSON_Delete(ready);
    ev_loop *loop = ev_loop_new();
    hc_client *c = hc_new(loop);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/control/fault", (int)cport);
    tu_reply rep = tu_http(loop, c, "POST", url, NULL, -1, "{\"kind\": \"error_status\", \"status\": 503, \"count\": 1}");
    assert_int_equal(rep.status, 200);
    tu_reply_free(&rep);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/v1alpha1/replicas", (int)port);
    for (int i = 0; i < 2; i++) {
        rep = tu_http(loop, c, "GET", url, NULL, -1, NULL);
        assert_int_equal(rep.status, i == 0 ? 503 : 200);
        tu_reply_free(&rep);
    }
    snprintf(url, sizeof url, "http://127.0.0.1:%d/control/fault", (int)cport);
    rep = tu_http(loop, c, "POST", url, NULL, -1, "{\"kind\": \"refuse\"}");
    assert_int_equal(rep.status, 200);
    tu_reply_free(&rep);
    hc_free(c);
    ev_loop_free(loop);
    assert_int_equal(proc_stop(&o, proc_slow_ms(CAP_MS)), 0);
    proc_free(&o);
    lines L = read_events(ev);
    const evt_record *f1 = find(&L, EVT_fault_fired, EVT_F_kind, "error_status", 0);
    assert_non_null(f1);
    assert_true(str_is(f1, EVT_F_learner, NULL));
    assert_true(str_is(f1, EVT_F_name, NULL));
    assert_true(str_is(f1, EVT_F_reason, "GET /v1alpha1/replicas"));
    assert_int_equal(int_of(f1, EVT_F_count), 1);
    assert_int_equal(int_of(f1, EVT_F_fault), 1);
    const evt_record *r1 = find(&L, EVT_operator_request, -1, NULL, 0);
    const evt_record *r2 = find(&L, EVT_operator_request, -1, NULL, 1);
    assert_non_null(r1);
    assert_non_null(r2);
    assert_true(index_of(&L, f1) < index_of(&L, r1));
    assert_true(str_is(r1, EVT_F_method, "GET") && str_is(r1, EVT_F_path, "/v1alpha1/replicas"));
    assert_int_equal(int_of(r1, EVT_F_http_status), 503);
    assert_true(str_is(r1, EVT_F_kind, "error_status"));
    assert_int_equal(int_of(r2, EVT_F_http_status), 200);
    assert_true(str_is(r2, EVT_F_kind, NULL));
    const evt_record *rf = find(&L, EVT_fault_fired, EVT_F_kind, "refuse", 0);
    assert_non_null(rf);
    assert_int_equal(int_of(rf, EVT_F_fault), 2);
    assert_int_equal(int_of(rf, EVT_F_count), 1);
    assert_true(str_is(&L.r[L.n - 1], EVT_F_signal, "SIGTERM"));
    lines_free(&L);
    free(dir);
}

/* The flags, as every mock takes them: a bad value is a usage error. */
static void bad_events_flags_are_usage_errors(void **state)
{
    (void)state;
    const char *const exes[] = {MOCK_LEARNER_PATH, MOCK_COORDINATOR_PATH, MOCK_OPERATOR_PATH};
    const char *const bad[][2] = {{"--events-max-bytes", "12"}, {"--events-flush-ms", "x"}, {"--events", ""}};
    for (size_t e = 0; e < 3; e++)
        for (size_t b = 0; b < 3; b++) {
            const char *argv[] = {exes[e], e == 0 ? "--count" : e == 1 ? "--connect" : "--port",
                                  e == 0 ? "1" : e == 1 ? "127.0.0.1:1" : "0", bad[b][0], bad[b][1], NULL};
            proc p;
            char *dir = proc_tmpdir("mock-events-flags");
            char log[512];
            snprintf(log, sizeof log, "%s/err.log", dir);
            assert_true(proc_start(&p, (char *const *)argv, NULL, log));
            int code = proc_wait(&p, proc_slow_ms(CAP_MS));
            size_t len = 0;
            char *t = util_read_file(log, 1 << 16, &len, NULL);
            if (code != 2 || !t || !strstr(t, bad[b][0]))
                fail_msg("%s %s '%s': exit %d, stderr: %s", exes[e], bad[b][0], bad[b][1], code, t ? t : "");
            free(t);
            proc_free(&p);
            free(dir);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(learner_and_coordinator_events),
        cmocka_unit_test(crash_writes_its_events_first),
        cmocka_unit_test(operator_events),
        cmocka_unit_test(bad_events_flags_are_usage_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
