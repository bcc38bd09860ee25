/* The real aggregator's HTTP client against the hostile peers of
 * tests/hostile.h (endless chunked trailers, 1-byte chunks with huge
 * extensions, endless header lines, a flood of 100 Continue, a head dribbled
 * a byte at a time, a reply that never ends), met two ways:
 *  - through /connect: a POST /connect to the aggregator's coordinator side
 *    (no coordinator yet; no token needed) names the hostile server as the
 *    master, so the aggregator sends it heartbeats;
 *  - through learner addresses: the aggregator is configured with one hostile
 *    learner per attack and POSTs /connect to each.
 * In every case the aggregator's peak RSS (VmHWM) stays under 128 MiB, the
 * request fails within its timeout with a message naming the peer, and the
 * aggregator keeps serving (/metrics). The hostile servers run on this
 * test's loop; every wait is capped.
 *   test_hostile_peers [connect|learners]   one group (ctest runs both) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hostile.h"
#include "proc.h"
#include "jsonx.h"
#include "testutil.h"
#include "xalloc.h"

/* 128 MiB; an ASan build counts its shadow memory and quarantine in VmHWM
 * too, and gets a larger cap (tests/aggregator.cmake) that still catches
 * growth without bound. */
#ifndef RSS_CAP_MIB
#define RSS_CAP_MIB 128L
#endif
#define RSS_CAP_KIB (RSS_CAP_MIB * 1024)
#define HEARTBEAT_TIMEOUT_MS 1000 /* the slave's heartbeat timeout at this time scale */
#define CONNECT_TIMEOUT_MS 30000  /* the master's request timeout (not scaled) */

typedef struct {
    char *dir;
    ev_loop *loop;
    hc_client *hc;
    proc agg;
    int started;
    int slave_port, master_port;
    char log[300];
    long peak_kib; /* the highest VmHWM seen */
    /* log lines watched while the loop runs: when each first appeared */
    const char *watch[HOSTILE_NMODES];
    uint64_t seen_ms[HOSTILE_NMODES];
    int nwatch;
    hostile *hs[HOSTILE_NMODES]; /* stopped by teardown if a test fails */
    char *learners[HOSTILE_NMODES];
} fx;

static int setup(void **state)
{
    fx *f = xcalloc(1, sizeof *f);
    f->dir = proc_tmpdir("hostile");
    assert_non_null(f->dir);
    f->loop = ev_loop_new();
    f->hc = hc_new(f->loop);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    if (f->started)
        proc_free(&f->agg);
    for (int m = 0; m < HOSTILE_NMODES; m++) {
        hostile_stop(f->hs[m]);
        free(f->learners[m]);
    }
    hc_free(f->hc);
    ev_loop_free(f->loop);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", f->dir);
    free(f->dir);
    free(f);
    return 0;
}

/* Runs the loop (the hostile servers) until pred holds or cap_ms passes,
 * sampling the aggregator's VmHWM; stops early once it is over the cap. */
static bool pump_until(fx *f, bool (*pred)(fx *f, void *arg), void *arg, long cap_ms)
{
    uint64_t end = ev_now_ms() + (uint64_t)cap_ms;
    for (;;) {
        long hwm = proc_vm_hwm_kib(f->agg.pid);
        if (hwm > f->peak_kib)
            f->peak_kib = hwm;
        if (f->peak_kib >= RSS_CAP_KIB)
            return false;
        for (int i = 0; i < f->nwatch; i++)
            if (!f->seen_ms[i] && proc_log_count(f->log, f->watch[i]) > 0)
                f->seen_ms[i] = ev_now_ms();
        if (pred(f, arg))
            return true;
        if (ev_now_ms() >= end)
            return false;
        ev_run_once(f->loop, 20);
    }
}

static bool agg_ready(fx *f, void *arg)
{
    cJSON **out = arg;
    *out = proc_ready(&f->agg, 0);
    return *out != NULL || f->agg.reaped;
}

static void start_agg(fx *f, char **learners, int n)
{
    char *argv[32];
    int a = 0;
    argv[a++] = AGGREGATOR_BIN;
    argv[a++] = "--slave-port=0";
    argv[a++] = "--master-port=0";
    argv[a++] = "--time-scale=0.05";
    argv[a++] = "--log-level=debug";
    argv[a++] = "--request-retries=0";
    for (int i = 0; i < n; i++)
        argv[a++] = learners[i];
    argv[a] = NULL;
    snprintf(f->log, sizeof f->log, "%s/aggregator-%d.log", f->dir, (int)ev_now_ms());
    assert_true(proc_start(&f->agg, argv, NULL, f->log));
    f->started = 1;
    f->peak_kib = 0;
    cJSON *ready = NULL;
    bool ok = pump_until(f, agg_ready, &ready, proc_slow_ms(20000));
    if (!ready)
        proc_show_log(&f->agg, 40);
    assert_true(ok);
    assert_non_null(ready);
    int64_t v;
    assert_true(jsonx_get_i64(jsonx_get(ready, "slave_port"), &v));
    f->slave_port = (int)v;
    assert_true(jsonx_get_i64(jsonx_get(ready, "master_port"), &v));
    f->master_port = (int)v;
    cJSON_Delete(ready);
}

static void stop_agg(fx *f)
{
    assert_int_equal(proc_stop(&f->agg, 10000), 0);
    proc_free(&f->agg);
    f->started = 0;
}

/* The aggregator still answers: its /metrics. */
static void assert_serving(fx *f)
{
    char url[96];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/metrics", f->master_port);
    tu_reply r = tu_http(f->loop, f->hc, "GET", url, NULL, -1, NULL);
    if (r.error || r.status != 200)
        proc_show_log(&f->agg, 20);
    assert_null(r.error);
    assert_int_equal(r.status, 200);
    assert_non_null(strstr(r.body, "dilearn_"));
    tu_reply_free(&r);
}

typedef struct {
    const char *needle;
    int times;
} log_wait;

static bool log_has(fx *f, void *arg)
{
    log_wait *w = arg;
    return proc_log_count(f->log, w->needle) >= w->times;
}

/* One attack through /connect: the aggregator's slave side sends its
 * heartbeats to the hostile "master". */
static void attack_through_connect(fx *f, hostile_mode mode)
{
    hostile *h = f->hs[0] = hostile_start(f->loop, mode);
    assert_non_null(h);
    start_agg(f, NULL, 0);
    char url[96], body[160], needle[200];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/connect", f->slave_port);
    snprintf(body, sizeof body, "{\"master\": {\"address\": \"http://127.0.0.1:%d\"}, \"data\": {}}", hostile_port(h));
    tu_reply r = tu_http(f->loop, f->hc, "POST", url, "anytoken", 0, body);
    assert_null(r.error);
    assert_int_equal(r.status, 200);
    tu_reply_free(&r);
    snprintf(needle, sizeof needle, "heartbeat to http://127.0.0.1:%d failed: GET http://127.0.0.1:%d/slave/heartbeat: ",
             hostile_port(h), hostile_port(h));
    log_wait w = {needle, 1};
    bool failed = pump_until(f, log_has, &w, proc_slow_ms(HEARTBEAT_TIMEOUT_MS * 4 + 5000));
    long ms = hostile_first_request_ms(h) ? (long)(ev_now_ms() - hostile_first_request_ms(h)) : -1;
    print_message("through /connect, %s: %s after %ld ms; aggregator VmHWM %ld KiB; %llu bytes sent\n",
                  hostile_mode_name(mode), failed ? "failed" : "NOT failed", ms, f->peak_kib, hostile_sent(h));
    assert_true(f->peak_kib < RSS_CAP_KIB);
    assert_true(failed);
    assert_true(hostile_first_request_ms(h) > 0);
    assert_true(ms <= proc_slow_ms(HEARTBEAT_TIMEOUT_MS + 3000));
    assert_serving(f);
    hostile_pause(h);
    assert_serving(f);
    stop_agg(f);
}

static void trailers_through_connect(void **state)
{
    attack_through_connect(*state, HOSTILE_TRAILERS);
}
static void extensions_through_connect(void **state)
{
    attack_through_connect(*state, HOSTILE_EXTENSIONS);
}
static void headers_through_connect(void **state)
{
    attack_through_connect(*state, HOSTILE_HEADERS);
}
static void continue_flood_through_connect(void **state)
{
    attack_through_connect(*state, HOSTILE_CONTINUE);
}
static void dribble_through_connect(void **state)
{
    attack_through_connect(*state, HOSTILE_DRIBBLE);
}
static void endless_reply_through_connect(void **state)
{
    attack_through_connect(*state, HOSTILE_ENDLESS);
}

static bool all_seen(fx *f, void *arg)
{
    (void)arg;
    for (int i = 0; i < f->nwatch; i++)
        if (!f->seen_ms[i])
            return false;
    return true;
}

/* All six attacks at once, as six learners of one aggregator: each /connect
 * fails naming its learner, within the request timeout. */
static void every_attack_through_learner_addresses(void **state)
{
    fx *f = *state;
    hostile **h = f->hs;
    char **learners = f->learners;
    for (int m = 0; m < HOSTILE_NMODES; m++) {
        h[m] = hostile_start(f->loop, (hostile_mode)m);
        assert_non_null(h[m]);
        learners[m] = xasprintf("--learner=h%d=127.0.0.1:%d", m, hostile_port(h[m]));
    }
    char needles[HOSTILE_NMODES][96];
    for (int m = 0; m < HOSTILE_NMODES; m++) {
        snprintf(needles[m], sizeof needles[m], "POST http://127.0.0.1:%d/connect: ", hostile_port(h[m]));
        f->watch[m] = needles[m];
    }
    f->nwatch = HOSTILE_NMODES;
    start_agg(f, learners, HOSTILE_NMODES);
    assert_serving(f); /* under attack */
    bool failed = pump_until(f, all_seen, NULL, proc_slow_ms(CONNECT_TIMEOUT_MS + 10000));
    for (int m = 0; m < HOSTILE_NMODES; m++) {
        uint64_t t0 = hostile_first_request_ms(h[m]);
        long ms = t0 && f->seen_ms[m] ? (long)(f->seen_ms[m] - t0) : -1;
        print_message("as learner h%d, %s: %s %ld ms after its first request; %llu bytes sent\n", m,
                      hostile_mode_name((hostile_mode)m), f->seen_ms[m] ? "failed" : "NOT failed", ms,
                      hostile_sent(h[m]));
    }
    print_message("aggregator VmHWM %ld KiB\n", f->peak_kib);
    assert_true(f->peak_kib < RSS_CAP_KIB);
    assert_true(failed);
    for (int m = 0; m < HOSTILE_NMODES; m++)
        assert_true(f->seen_ms[m] - hostile_first_request_ms(h[m]) <= (uint64_t)proc_slow_ms(CONNECT_TIMEOUT_MS + 5000));
    assert_serving(f);
    for (int m = 0; m < HOSTILE_NMODES; m++)
        hostile_pause(h[m]);
    assert_serving(f);
    assert_true(f->peak_kib < RSS_CAP_KIB);
    stop_agg(f);
}

int main(int argc, char **argv)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest via_connect[] = {
        cmocka_unit_test_setup_teardown(trailers_through_connect, setup, teardown),
        cmocka_unit_test_setup_teardown(extensions_through_connect, setup, teardown),
        cmocka_unit_test_setup_teardown(headers_through_connect, setup, teardown),
        cmocka_unit_test_setup_teardown(continue_flood_through_connect, setup, teardown),
        cmocka_unit_test_setup_teardown(dribble_through_connect, setup, teardown),
        cmocka_unit_test_setup_teardown(endless_reply_through_connect, setup, teardown),
    };
    const struct CMUnitTest via_learners[] = {
        cmocka_unit_test_setup_teardown(every_attack_through_learner_addresses, setup, teardown),
    };
    const char *group = argc > 1 ? argv[1] : "";
    int rc = 0;
    if (!*group || strcmp(group, "connect") == 0)
        rc |= cmocka_run_group_tests_name("through /connect", via_connect, NULL, NULL);
    if (!*group || strcmp(group, "learners") == 0)
        rc |= cmocka_run_group_tests_name("through learner addresses", via_learners, NULL, NULL);
    return rc;
}
