/* End-to-end tests of the real aggregator process with real mock_learner
 * and mock_coordinator processes on loopback: the happy path and each
 * failure of the issue (a learner that dies, hangs past the deadline,
 * refuses a task, answers an error status, sends malformed JSON, stops its
 * heartbeats), the learner taken back after it returns, and SIGTERM in the
 * middle of a task. Timings are shrunk with --time-scale; every wait is
 * capped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "jsonx.h"
#include "proc.h"
#include "xalloc.h"

#define MAXP 8
#define MAXL 64
/* Protocol timings shrunk 20 times; less under a checker that slows every
 * process down (DILEARN_TEST_SLOWDOWN: valgrind runs libcurl's first
 * transfer in a process slower than a 100 ms connect timeout). */
static double time_scale(void)
{
    return 0.05 * (double)proc_slow_ms(1000) / 1000.0;
}

typedef struct {
    char *dir;
    proc groups[MAXP];
    int control[MAXP];
    int ngroups;
    char *ids[MAXL];
    int ports[MAXL];
    int group_of[MAXL];
    int nlearners;
    proc agg;
    bool agg_started;
    int slave_port, master_port;
    cJSON *agg_ready;
    int nlog;
} fx;

typedef struct {
    char *v[128];
    int n;
} args;

static void arg(args *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void arg(args *a, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char buf[1024];
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    assert_true(a->n < 127);
    a->v[a->n++] = xstrdup(buf);
    a->v[a->n] = NULL;
}

static void args_free(args *a)
{
    for (int i = 0; i < a->n; i++)
        free(a->v[i]);
    a->n = 0;
}

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    f->dir = proc_tmpdir("agg-e2e");
    assert_non_null(f->dir);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    if (f->agg_started)
        proc_free(&f->agg);
    for (int i = 0; i < f->ngroups; i++)
        proc_free(&f->groups[i]);
    for (int i = 0; i < f->nlearners; i++)
        free(f->ids[i]);
    cJSON_Delete(f->agg_ready);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Starts one mock_learner process with count learners named prefixK. */
static int start_learners(fx *f, const char *prefix, int count, const char *const *extra)
{
    args a = {0};
    arg(&a, "%s", MOCK_LEARNER_BIN);
    arg(&a, "--count");
    arg(&a, "%d", count);
    arg(&a, "--id-prefix");
    arg(&a, "%s", prefix);
    arg(&a, "--heartbeat-span-ms");
    arg(&a, "100");
    arg(&a, "--dump");
    arg(&a, "%s/dump-%s.jsonl", f->dir, prefix);
    for (int i = 0; extra && extra[i]; i++)
        arg(&a, "%s", extra[i]);
    int g = f->ngroups++;
    char log[300];
    snprintf(log, sizeof log, "%s/learners-%s.log", f->dir, prefix);
    assert_true(proc_start(&f->groups[g], a.v, NULL, log));
    args_free(&a);
    cJSON *r = proc_ready(&f->groups[g], 10000);
    if (!r)
        proc_show_log(&f->groups[g], 30);
    assert_non_null(r);
    int64_t port;
    assert_true(jsonx_get_i64(jsonx_get(r, "control_port"), &port));
    f->control[g] = (int)port;
    const cJSON *ls = jsonx_get(r, "learners");
    for (const cJSON *l = ls->child; l; l = l->next) {
        assert_true(f->nlearners < MAXL);
        f->ids[f->nlearners] = xstrdup(jsonx_get_str(l, "id"));
        assert_true(jsonx_get_i64(jsonx_get(l, "port"), &port));
        f->ports[f->nlearners] = (int)port;
        f->group_of[f->nlearners] = g;
        f->nlearners++;
    }
    cJSON_Delete(r);
    return g;
}

static void start_agg(fx *f, const char *const *extra)
{
    args a = {0};
    arg(&a, "%s", AGGREGATOR_BIN);
    arg(&a, "--slave-port=0");
    arg(&a, "--master-port=0");
    arg(&a, "--time-scale=%g", time_scale());
    arg(&a, "--log-level=debug");
    for (int i = 0; i < f->nlearners; i++)
        arg(&a, "--learner=%s=127.0.0.1:%d", f->ids[i], f->ports[i]);
    for (int i = 0; extra && extra[i]; i++)
        arg(&a, "%s", extra[i]);
    char log[300];
    snprintf(log, sizeof log, "%s/aggregator.log", f->dir);
    assert_true(proc_start(&f->agg, a.v, NULL, log));
    f->agg_started = true;
    args_free(&a);
    f->agg_ready = proc_ready(&f->agg, 15000);
    if (!f->agg_ready)
        proc_show_log(&f->agg, 40);
    assert_non_null(f->agg_ready);
    int64_t v;
    assert_true(jsonx_get_i64(jsonx_get(f->agg_ready, "slave_port"), &v));
    f->slave_port = (int)v;
    assert_true(jsonx_get_i64(jsonx_get(f->agg_ready, "master_port"), &v));
    f->master_port = (int)v;
}

/* Runs mock_coordinator with a script; returns its exit code. */
static int coordinate(fx *f, const char *script, const char *const *extra)
{
    char path[300], log[300];
    int n = ++f->nlog;
    snprintf(path, sizeof path, "%s/script%d.json", f->dir, n);
    snprintf(log, sizeof log, "%s/coordinator%d.log", f->dir, n);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(script, fp);
    fclose(fp);
    args a = {0};
    arg(&a, "%s", MOCK_COORDINATOR_BIN);
    arg(&a, "--connect=127.0.0.1:%d", f->slave_port);
    arg(&a, "--script=%s", path);
    arg(&a, "--time-scale=%g", time_scale());
    for (int i = 0; extra && extra[i]; i++)
        arg(&a, "%s", extra[i]);
    proc c;
    assert_true(proc_start(&c, a.v, NULL, log));
    args_free(&a);
    const char *out = proc_read_all(&c, 60000);
    int rc = proc_wait(&c, 60000);
    if (rc != 0) {
        fprintf(stderr, "mock_coordinator exit %d; summary:\n%s\n", rc, out);
        proc_show_log(&c, 20);
        proc_show_log(&f->agg, 40);
    }
    proc_free(&c);
    return rc;
}

/* Sends a fault to a mock_learner process's control API with curl. */
static void fault(fx *f, int group, const char *json)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "curl -s -f -o /dev/null -X POST --data '%s' http://127.0.0.1:%d/fault", json, f->control[group]);
    assert_int_equal(system(cmd), 0);
}

static bool log_has(const char *path, const char *needle)
{
    return proc_log_count(path, needle) > 0;
}

/* Waits (capped) until the aggregator's log has needle `times` times: the
 * log file is watched with inotify, so no sleeping. */
static bool agg_log_wait_n(fx *f, const char *needle, int times, long cap_ms)
{
    char path[300];
    snprintf(path, sizeof path, "%s/aggregator.log", f->dir);
    int in = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    assert_true(in >= 0);
    assert_true(inotify_add_watch(in, path, IN_MODIFY) >= 0);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    bool ok = false;
    for (;;) {
        if (proc_log_count(path, needle) >= times) {
            ok = true;
            break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        long left = cap_ms - ((t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000);
        if (left <= 0)
            break;
        struct pollfd p = {in, POLLIN, 0};
        if (poll(&p, 1, (int)left) > 0) {
            char buf[4096];
            while (read(in, buf, sizeof buf) > 0)
                ;
        }
    }
    close(in);
    return ok;
}

static bool agg_log_wait(fx *f, const char *needle, long cap_ms)
{
    return agg_log_wait_n(f, needle, 1, cap_ms);
}

#define ROUND(n) \
    "{\"name\": \"learner_get_data_task\"}, {\"name\": \"learner_learn_task\", \"items\": \"batch\"}"

/* ---- tests ---- */

static void happy_path_with_four_learners_checks_split_and_merge(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 4, (const char *[]){"--batch-sizes=2,3,4,5", NULL});
    start_agg(f, NULL);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(f->agg_ready, "joined")), 4);
    char dump[300];
    snprintf(dump, sizeof dump, "--dump=%s/dump-learner.jsonl", f->dir);
    args a = {0};
    arg(&a, "%s", MOCK_COORDINATOR_BIN);
    arg(&a, "--connect=127.0.0.1:%d", f->slave_port);
    arg(&a, "--rounds=3");
    arg(&a, "--expect-learners=4");
    arg(&a, "%s", dump);
    arg(&a, "--time-scale=%g", time_scale());
    char log[300];
    snprintf(log, sizeof log, "%s/coordinator.log", f->dir);
    proc c;
    assert_true(proc_start(&c, a.v, NULL, log));
    args_free(&a);
    const char *out = proc_read_all(&c, 60000);
    int rc = proc_wait(&c, 60000);
    if (rc != 0)
        fprintf(stderr, "summary: %s\n", out);
    assert_int_equal(rc, 0);
    cJSON *sum = jsonx_parse(out, strlen(out), NULL, 0);
    assert_non_null(sum);
    assert_true(cJSON_IsTrue(jsonx_get(sum, "ok")));
    cJSON_Delete(sum);
    proc_free(&c);
    assert_int_equal(proc_stop(&f->agg, 3000), 0);
}

static void resource_is_the_sum_and_unknown_task_fails(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 3, NULL);
    start_agg(f, NULL);
    assert_int_equal(coordinate(f,
                                "{\"tasks\": ["
                                "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 3}}},"
                                "{\"name\": \"fake_task\", \"expect\": {\"status\": \"failed\", "
                                "\"fields\": {\"message\": \"task name error\"}}},"
                                "{\"name\": \"learner_learn_task\", \"items\": 4, \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"before any learner_get_data_task\"}}"
                                "]}",
                                NULL),
                     0);
}

static void learn_data_of_the_wrong_length_fails_and_says_both_lengths(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2, (const char *[]){"--batch-size=4", NULL});
    start_agg(f, NULL);
    assert_int_equal(coordinate(f,
                                "{\"tasks\": ["
                                "{\"name\": \"learner_get_data_task\", \"expect\": {\"fields\": {\"batch_size\": 8}}},"
                                "{\"name\": \"learner_learn_task\", \"items\": 7, \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"learn data has 7 items but the learners asked for 8 (4+4)\"}}"
                                "]}",
                                NULL),
                     0);
}

static void learner_that_dies_mid_learn_fails_the_task_and_leaves_the_world(void **state)
{
    fx *f = *state;
    start_learners(f, "good", 2, NULL);
    start_learners(f, "doomed", 1,
                   (const char *[]){"--fault={\"kind\": \"crash\", \"task\": \"learner_learn_task\", \"when\": "
                                    "\"during\"}",
                                    NULL});
    start_agg(f, (const char *[]){"--task-deadline-ms=20000", NULL});
    assert_int_equal(coordinate(f,
                                "{\"tasks\": ["
                                "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 3}}},"
                                "{\"name\": \"learner_get_data_task\"},"
                                "{\"name\": \"learner_learn_task\", \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"doomed0\"}},"
                                "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 2}}},"
                                "{\"name\": \"learner_learn_task\", \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"doomed0 (slice [16, 24))\"}},"
                                "{\"name\": \"learner_get_data_task\", \"expect\": {\"fields\": {\"batch_size\": 16}}},"
                                "{\"name\": \"learner_learn_task\"}"
                                "]}",
                                NULL),
                     0);
    assert_int_equal(proc_wait(&f->groups[1], 5000), 3);
}

static void learner_that_hangs_is_named_with_the_deadline(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2,
                   (const char *[]){"--fault={\"learner\": 1, \"kind\": \"hang\", \"task\": \"learner_learn_task\"}",
                                    NULL});
    start_agg(f, (const char *[]){"--task-deadline-ms=600", NULL});
    assert_int_equal(coordinate(f,
                                "{\"tasks\": [{\"name\": \"learner_get_data_task\"},"
                                "{\"name\": \"learner_learn_task\", \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"learner1: no result within the task deadline of 600 ms\"}}"
                                "]}",
                                NULL),
                     0);
}

static void error_status_on_task_new_fails_the_task_naming_the_learner(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2,
                   (const char *[]){"--fault={\"learner\": 0, \"kind\": \"error_status\", \"status\": 503, "
                                    "\"task\": \"learner_get_data_task\"}",
                                    NULL});
    start_agg(f, NULL);
    assert_int_equal(coordinate(f,
                                "{\"tasks\": [{\"name\": \"learner_get_data_task\", \"expect\": {\"status\": "
                                "\"failed\", \"message_contains\": \"learner0: /task/new answered HTTP 503\"}},"
                                "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 2}}}"
                                "]}",
                                NULL),
                     0);
}

static void refused_start_fails_with_the_reference_message(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2,
                   (const char *[]){"--fault={\"learner\": 1, \"kind\": \"fail\", \"task\": \"learner_start_task\"}",
                                    NULL});
    start_agg(f, NULL);
    assert_int_equal(coordinate(f,
                                "{\"tasks\": [{\"name\": \"learner_start_task\", \"expect\": {\"status\": "
                                "\"failed\", \"fields\": {\"message\": \"one of learner can't start_task\"}}}"
                                "]}",
                                NULL),
                     0);
}

static void malformed_report_fails_the_task_at_once(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2,
                   (const char *[]){"--fault={\"learner\": 1, \"kind\": \"malformed\", \"task\": "
                                    "\"learner_learn_task\"}",
                                    NULL});
    start_agg(f, (const char *[]){"--task-deadline-ms=20000", NULL});
    assert_int_equal(coordinate(f,
                                "{\"tasks\": [{\"name\": \"learner_get_data_task\"},"
                                "{\"name\": \"learner_learn_task\", \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"learner1: sent a malformed report\", \"latency_ms_max\": 5000}}"
                                "]}",
                                NULL),
                     0);
}

static void truncated_report_fails_the_task_at_once(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2,
                   (const char *[]){"--fault={\"learner\": 0, \"kind\": \"truncated\", \"task\": "
                                    "\"learner_learn_task\"}",
                                    NULL});
    start_agg(f, (const char *[]){"--task-deadline-ms=20000", NULL});
    assert_int_equal(coordinate(f,
                                "{\"tasks\": [{\"name\": \"learner_get_data_task\"},"
                                "{\"name\": \"learner_learn_task\", \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"learner0: report to /slave/task/complete was cut off\", "
                                "\"latency_ms_max\": 5000}}"
                                "]}",
                                NULL),
                     0);
}

static void silent_learner_is_dropped_and_the_task_fails(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2,
                   (const char *[]){"--fault={\"learner\": 1, \"kind\": \"no_heartbeat\", \"task\": "
                                    "\"learner_learn_task\"}",
                                    "--fault={\"learner\": 1, \"kind\": \"hang\", \"task\": \"learner_learn_task\"}",
                                    NULL});
    start_agg(f, (const char *[]){"--task-deadline-ms=20000", NULL});
    assert_int_equal(coordinate(f,
                                "{\"tasks\": [{\"name\": \"learner_get_data_task\"},"
                                "{\"name\": \"learner_learn_task\", \"expect\": {\"status\": \"failed\", "
                                "\"message_contains\": \"learner1: connection lost: no heartbeat\", "
                                "\"latency_ms_max\": 5000}},"
                                "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 1}}}"
                                "]}",
                                NULL),
                     0);
}

static void learner_that_comes_back_is_taken_back(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2, NULL);
    start_agg(f, NULL);
    /* Away long enough for a coordinator to start and ask (longer under
     * valgrind). */
    char drop[128];
    snprintf(drop, sizeof drop, "{\"learner\": 1, \"kind\": \"drop\", \"back_after_ms\": %ld}", proc_slow_ms(1500));
    fault(f, 0, drop);
    assert_true(agg_log_wait(f, "learner left the world", 5000));
    assert_int_equal(coordinate(f, "{\"tasks\": [{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 1}}}]}",
                                NULL),
                     0);
    assert_true(agg_log_wait_n(f, "[learner1] learner joined", 2, 10000 + proc_slow_ms(1500)));
    assert_int_equal(coordinate(f,
                                "{\"tasks\": [{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 2}}}," ROUND(1)
                                "]}",
                                NULL),
                     0);
}

static void learner_that_joins_late_is_taken_in(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 1, NULL);
    start_learners(f, "late", 1, (const char *[]){"--fault={\"kind\": \"slow_join\", \"after_ms\": 1000}", NULL});
    start_agg(f, NULL);
    assert_true(agg_log_wait(f, "[late0] learner joined", 10000));
    assert_int_equal(coordinate(f, "{\"tasks\": [{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 2}}}]}",
                                NULL),
                     0);
}

static void learner_that_never_joins_is_reported_failed_in_the_ready_line(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 1, NULL);
    start_learners(f, "ghost", 1, (const char *[]){"--fault={\"kind\": \"refuse\"}", NULL});
    start_agg(f, (const char *[]){"--max-retry-ms=800", NULL});
    char *joined = jsonx_print(jsonx_get(f->agg_ready, "joined"));
    char *failed = jsonx_print(jsonx_get(f->agg_ready, "failed"));
    assert_string_equal(joined, "[\"learner0\"]");
    assert_string_equal(failed, "[\"ghost0\"]");
    free(joined);
    free(failed);
}

static void sigterm_mid_task_fails_it_and_exits_zero(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2, (const char *[]){"--learn-time-ms=5000", NULL});
    start_agg(f, NULL);
    char path[300], log[300];
    snprintf(path, sizeof path, "%s/script.json", f->dir);
    snprintf(log, sizeof log, "%s/coordinator.log", f->dir);
    FILE *fp = fopen(path, "w");
    fputs("{\"tasks\": [{\"name\": \"learner_get_data_task\"}, {\"name\": \"learner_learn_task\", \"expect\": "
          "{\"status\": \"failed\", \"message_contains\": \"shutting down\"}}]}",
          fp);
    fclose(fp);
    args a = {0};
    arg(&a, "%s", MOCK_COORDINATOR_BIN);
    arg(&a, "--connect=127.0.0.1:%d", f->slave_port);
    arg(&a, "--script=%s", path);
    arg(&a, "--time-scale=%g", time_scale());
    proc c;
    assert_true(proc_start(&c, a.v, NULL, log));
    args_free(&a);
    assert_true(agg_log_wait(f, "task learner_learn_task", 10000));
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(proc_stop(&f->agg, 2000), 0); /* exit 0 within 2 s */
    clock_gettime(CLOCK_MONOTONIC, &t1);
    const char *out = proc_read_all(&c, 20000);
    int rc = proc_wait(&c, 20000);
    if (rc != 0)
        fprintf(stderr, "summary: %s\n", out);
    assert_int_equal(rc, 0);
    proc_free(&c);
}

static void metrics_are_served_in_prometheus_text(void **state)
{
    fx *f = *state;
    start_learners(f, "learner", 2, NULL);
    start_agg(f, NULL);
    assert_int_equal(coordinate(f, "{\"tasks\": [{\"name\": \"resource\"}, {\"name\": \"nope\", \"expect\": "
                                   "{\"status\": \"failed\"}}]}",
                                NULL),
                     0);
    char cmd[512], out[300];
    snprintf(out, sizeof out, "%s/metrics.txt", f->dir);
    snprintf(cmd, sizeof cmd, "curl -s -f http://127.0.0.1:%d/metrics > '%s'", f->master_port, out);
    assert_int_equal(system(cmd), 0);
    assert_true(log_has(out, "dilearn_learners_connected 2"));
    assert_true(log_has(out, "dilearn_tasks_total{name=\"resource\",outcome=\"completed\"} 1"));
    assert_true(log_has(out, "dilearn_tasks_total{name=\"other\",outcome=\"failed\"} 1"));
    assert_true(log_has(out, "dilearn_task_duration_seconds_count{name=\"resource\"} 1"));
    assert_true(log_has(out, "dilearn_bytes_received_total"));
}

static void bad_configuration_exits_2_naming_the_field(void **state)
{
    fx *f = *state;
    char cfgp[300], log[300];
    snprintf(cfgp, sizeof cfgp, "%s/bad.json", f->dir);
    snprintf(log, sizeof log, "%s/bad.log", f->dir);
    FILE *fp = fopen(cfgp, "w");
    fputs("{\"master\": {\"host\": \"127.0.0.1\", \"port\": \"x\"}}", fp);
    fclose(fp);
    args a = {0};
    arg(&a, "%s", AGGREGATOR_BIN);
    arg(&a, "--config=%s", cfgp);
    proc p;
    assert_true(proc_start(&p, a.v, NULL, log));
    args_free(&a);
    assert_int_equal(proc_wait(&p, 5000), 2);
    assert_true(log_has(log, "field \"master.port\" must be an integer from 0 to 65535"));
    proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(happy_path_with_four_learners_checks_split_and_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(resource_is_the_sum_and_unknown_task_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(learn_data_of_the_wrong_length_fails_and_says_both_lengths, setup, teardown),
        cmocka_unit_test_setup_teardown(learner_that_dies_mid_learn_fails_the_task_and_leaves_the_world, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(learner_that_hangs_is_named_with_the_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(error_status_on_task_new_fails_the_task_naming_the_learner, setup, teardown),
        cmocka_unit_test_setup_teardown(refused_start_fails_with_the_reference_message, setup, teardown),
        cmocka_unit_test_setup_teardown(malformed_report_fails_the_task_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_report_fails_the_task_at_once, setup, teardown),
        cmocka_unit_test_setup_teardown(silent_learner_is_dropped_and_the_task_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(learner_that_comes_back_is_taken_back, setup, teardown),
        cmocka_unit_test_setup_teardown(learner_that_joins_late_is_taken_in, setup, teardown),
        cmocka_unit_test_setup_teardown(learner_that_never_joins_is_reported_failed_in_the_ready_line, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(sigterm_mid_task_fails_it_and_exits_zero, setup, teardown),
        cmocka_unit_test_setup_teardown(metrics_are_served_in_prometheus_text, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_configuration_exits_2_naming_the_field, setup, teardown),
    };
    return cmocka_run_group_tests_name("aggregator_e2e", tests, NULL, NULL);
}
