/* End-to-end tests of mock_operator: each test starts the real executable on
 * free ports, reads its ready line, talks to it over HTTP (libcurl, and the
 * interaction library's own client), and stops it with SIGTERM, checking
 * that it exits 0. Every wait is bounded. The binary's path comes from the
 * MOCK_OPERATOR_BIN compile definition, or from argv[1]. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "ev.h"
#include "hc.h"
#include "jsonx.h"
#include "proto.h"
#include "wrapexec.h"

#ifndef MOCK_OPERATOR_BIN
#define MOCK_OPERATOR_BIN "mock_operator"
#endif

static const char *bin_path = MOCK_OPERATOR_BIN;

/* Children still running, killed at exit if a failed assertion skipped
 * their teardown. */
static pid_t live[64];

static void live_add(pid_t pid)
{
    for (size_t i = 0; i < 64; i++)
        if (!live[i]) {
            live[i] = pid;
            return;
        }
}

static void live_del(pid_t pid)
{
    for (size_t i = 0; i < 64; i++)
        if (live[i] == pid)
            live[i] = 0;
}

static void kill_leftovers(void)
{
    for (size_t i = 0; i < 64; i++)
        if (live[i] > 0) {
            kill(live[i], SIGKILL);
            waitpid(live[i], NULL, 0);
            live[i] = 0;
        }
}

/* ---- time and child processes ------------------------------------------ */

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits for the child to exit, with a cap (pidfd + poll: no sleeping).
 * Returns its wait status, or -1 if it did not exit in time. */
static int wait_exit(pid_t pid, long cap_ms)
{
    int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (pfd >= 0) {
        struct pollfd p = {pfd, POLLIN, 0};
        int n = poll(&p, 1, (int)cap_ms);
        close(pfd);
        if (n <= 0)
            return -1;
    }
    int st = 0;
    pid_t r;
    do
        r = waitpid(pid, &st, pfd >= 0 ? 0 : WNOHANG);
    while (r < 0 && errno == EINTR);
    return r == pid ? st : -1;
}

/* Spawns bin with args; its stdout (and stderr if err_fd) go to pipes. */
static pid_t spawn(const char *const *args, int *out_fd, int *err_fd)
{
    int out[2], err[2] = {-1, -1};
    if (pipe(out) < 0 || (err_fd && pipe(err) < 0))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(out[1], 1);
        if (err_fd)
            dup2(err[1], 2);
        close(out[0]);
        close(out[1]);
        if (err_fd) {
            close(err[0]);
            close(err[1]);
        }
        const char *argv[64];
        size_t n = 0;
        argv[n++] = bin_path;
        for (size_t i = 0; args[i] && n < 63; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        wrap_execv(bin_path, (char *const *)argv);
        fprintf(stderr, "cannot run %s: %s\n", bin_path, strerror(errno));
        _exit(127);
    }
    live_add(pid);
    close(out[1]);
    *out_fd = out[0];
    if (err_fd) {
        close(err[1]);
        *err_fd = err[0];
    }
    return pid;
}

/* Reads from fd until EOF or the cap; returns what it read (heap). */
static char *read_all(int fd, long cap_ms)
{
    size_t len = 0, cap = 4096;
    char *buf = malloc(cap);
    long long end = now_ms() + cap_ms;
    for (;;) {
        long left = (long)(end - now_ms());
        if (left <= 0)
            break;
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, (int)left) <= 0)
            break;
        if (len + 1024 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    return buf;
}

typedef struct {
    int status; /* exit code, or -1 */
    char *out, *err;
} run_result;

/* Runs the binary to completion (cap 5 s) and collects its output. */
static run_result run_capture(const char *const *args)
{
    run_result r = {-1, NULL, NULL};
    int out_fd, err_fd;
    pid_t pid = spawn(args, &out_fd, &err_fd);
    assert_true(pid > 0);
    r.out = read_all(out_fd, 5000);
    r.err = read_all(err_fd, 1000);
    close(out_fd);
    close(err_fd);
    int st = wait_exit(pid, 5000);
    if (st == -1) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
    } else if (WIFEXITED(st)) {
        r.status = WEXITSTATUS(st);
    }
    live_del(pid);
    return r;
}

static void run_result_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

typedef struct {
    pid_t pid;
    int out_fd;
    int port, control_port;
} mock;

/* Starts mock_operator with args (plus --log-level warn) and reads its ready
 * line (cap 10 s). */
static void mock_start(mock *m, const char *const *args)
{
    const char *all[48];
    size_t n = 0;
    for (size_t i = 0; args && args[i] && n < 44; i++)
        all[n++] = args[i];
    all[n++] = "--log-level";
    all[n++] = "warn";
    all[n] = NULL;
    m->pid = spawn(all, &m->out_fd, NULL);
    assert_true(m->pid > 0);
    char line[512];
    size_t len = 0;
    long long end = now_ms() + 10000;
    while (len < sizeof line - 1 && (len == 0 || line[len - 1] != '\n')) {
        long left = (long)(end - now_ms());
        struct pollfd p = {m->out_fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            fail_msg("mock_operator printed no ready line within 10 s");
        ssize_t r = read(m->out_fd, line + len, 1);
        if (r <= 0)
            fail_msg("mock_operator exited before its ready line");
        len += (size_t)r;
    }
    line[len] = '\0';
    char err[128];
    cJSON *ready = jsonx_parse(line, len, err, sizeof err);
    if (!ready)
        fail_msg("ready line is not JSON (%s): %s", err, line);
    assert_true(cJSON_IsTrue(jsonx_get(ready, "ready")));
    int64_t port = 0, cport = 0;
    assert_true(jsonx_get_i64(jsonx_get(ready, "port"), &port));
    assert_true(jsonx_get_i64(jsonx_get(ready, "control_port"), &cport));
    cJSON_Delete(ready);
    m->port = (int)port;
    m->control_port = (int)cport;
    assert_true(m->port > 0 && m->control_port > 0 && m->port != m->control_port);
}

/* Stops the mock with sig and checks that it exits 0 (cap 5 s). */
static void mock_stop_with(mock *m, int sig)
{
    if (m->pid <= 0)
        return;
    kill(m->pid, sig);
    int st = wait_exit(m->pid, 5000);
    if (st == -1) {
        kill(m->pid, SIGKILL);
        waitpid(m->pid, NULL, 0);
    }
    close(m->out_fd);
    live_del(m->pid);
    m->pid = 0;
    assert_int_not_equal(st, -1);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

/* ---- HTTP ---------------------------------------------------------------- */

typedef struct {
    CURLcode rc;
    long status;
    char *body;
    size_t len;
    char *ctype;
    long long ms;
} http_res;

static size_t on_data(char *p, size_t size, size_t n, void *ud)
{
    http_res *r = ud;
    size_t k = size * n;
    r->body = realloc(r->body, r->len + k + 1);
    memcpy(r->body + r->len, p, k);
    r->len += k;
    r->body[r->len] = '\0';
    return k;
}

/* Prepares an easy handle: method, URL, body sent without a Content-Type
 * (NULL: no body), connect and total timeouts. */
static CURL *prepare(const char *method, int port, const char *target, const char *body,
                     http_res *res, struct curl_slist **hdrs)
{
    memset(res, 0, sizeof *res);
    res->body = calloc(1, 1);
    char url[1024];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, target);
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    if (body) {
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        curl_easy_setopt(c, CURLOPT_COPYPOSTFIELDS, body);
    }
    *hdrs = curl_slist_append(NULL, "Content-Type:");
    *hdrs = curl_slist_append(*hdrs, "Expect:");
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, *hdrs);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, res);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 15000L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    return c;
}

static void finish(CURL *c, http_res *res)
{
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &res->status);
    char *ct = NULL;
    curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
    res->ctype = strdup(ct ? ct : "");
}

static http_res http(const char *method, int port, const char *target, const char *body)
{
    http_res res;
    struct curl_slist *hdrs;
    CURL *c = prepare(method, port, target, body, &res, &hdrs);
    long long t0 = now_ms();
    res.rc = curl_easy_perform(c);
    res.ms = now_ms() - t0;
    finish(c, &res);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    return res;
}

static void http_free(http_res *r)
{
    free(r->body);
    free(r->ctype);
}

/* An envelope reply: checks status, success and code; returns the tree. */
static cJSON *expect_env(const http_res *r, long status, bool success)
{
    if (r->rc != CURLE_OK)
        fail_msg("request failed: %s", curl_easy_strerror(r->rc));
    if (r->status != status)
        fail_msg("status %ld, expected %ld; body: %s", r->status, status, r->body);
    char err[128];
    cJSON *t = jsonx_parse(r->body, r->len, err, sizeof err);
    if (!t)
        fail_msg("reply is not JSON (%s): %s", err, r->body);
    assert_true(cJSON_IsObject(t));
    assert_true(cJSON_IsBool(jsonx_get(t, "success")));
    assert_int_equal(cJSON_IsTrue(jsonx_get(t, "success")), success);
    int64_t code = -1;
    assert_true(jsonx_get_i64(jsonx_get(t, "code"), &code));
    assert_int_equal(code, success ? 0 : 1);
    assert_non_null(jsonx_get_str(t, "message"));
    assert_non_null(jsonx_get(t, "data"));
    return t;
}

static void expect_message_has(const cJSON *env, const char *part)
{
    const char *m = jsonx_get_str(env, "message");
    if (!m || !strstr(m, part))
        fail_msg("message \"%s\" does not contain \"%s\"", m ? m : "(none)", part);
}

/* One request, expecting an envelope; returns it (the reply is freed). */
static cJSON *call(const char *method, int port, const char *target, const char *body,
                   long status, bool success)
{
    http_res r = http(method, port, target, body);
    cJSON *t = expect_env(&r, status, success);
    http_free(&r);
    return t;
}

/* Number of strings in the data member key (an array), -1 if it is null. */
static int list_len(const cJSON *data, const char *key)
{
    const cJSON *v = jsonx_get(data, key);
    assert_non_null(v);
    if (cJSON_IsNull(v))
        return -1;
    assert_true(cJSON_IsArray(v));
    return cJSON_GetArraySize(v);
}

static bool list_has(const cJSON *data, const char *key, const char *s)
{
    const cJSON *v = jsonx_get(data, key);
    for (const cJSON *it = v ? v->child : NULL; it; it = it->next)
        if (cJSON_IsString(it) && strcmp(it->valuestring, s) == 0)
            return true;
    return false;
}

static const char *list_at(const cJSON *data, const char *key, int i)
{
    const cJSON *it = cJSON_GetArrayItem(jsonx_get(data, key), i);
    assert_non_null(it);
    assert_true(cJSON_IsString(it));
    return it->valuestring;
}

/* Checks "PREFIX-xxxxx.NS:PORT" with Kubernetes' random alphabet. */
static void expect_invented(const char *addr, const char *prefix, const char *tail)
{
    size_t p = strlen(prefix);
    if (strncmp(addr, prefix, p) != 0 || strlen(addr) != p + 6 + strlen(tail) ||
        addr[p] != '-' || strcmp(addr + p + 6, tail) != 0)
        fail_msg("address %s is not %s-xxxxx%s", addr, prefix, tail);
    for (size_t i = p + 1; i < p + 6; i++)
        assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", addr[i]));
}

/* ---- fixtures ------------------------------------------------------------ */

static const char *const std_args[] = {
    "--learners", "ns1/agg-0=learner-0.ns1:22271,learner-1.ns1:22271",
    "--collectors", "ns1/coord=collector-0.ns1:22270",
    "--learners", "ns1/coord=learner-a.ns1:22271",
    "--learners", "ns1/dijob-coordinator=",
    "--learners", "ns2/other=",
    "--seed", "42",
    NULL};

static int setup(void **state)
{
    mock *m = calloc(1, sizeof *m);
    mock_start(m, std_args);
    *state = m;
    return 0;
}

static int teardown(void **state)
{
    mock *m = *state;
    mock_stop_with(m, SIGTERM);
    free(m);
    return 0;
}

#define GET_AGG "/v1alpha1/replicas?namespace=ns1&aggregator=agg-0"
#define GET_COORD "/v1alpha1/replicas?namespace=ns1&coordinator=coord"

/* ---- the v1alpha1 API ---------------------------------------------------- */

static void get_by_aggregator_returns_its_learners_and_null_collectors(void **state)
{
    mock *m = *state;
    http_res r = http("GET", m->port, GET_AGG, "{}");
    cJSON *t = expect_env(&r, 200, true);
    /* The original's replies are sniffed by Go as text/plain. */
    assert_string_equal(r.ctype, "text/plain; charset=utf-8");
    expect_message_has(t, "successfully get replicas");
    const cJSON *d = jsonx_get(t, "data");
    assert_string_equal(jsonx_get_str(d, "namespace"), "ns1");
    assert_string_equal(jsonx_get_str(d, "coordinator"), "agg-0");
    assert_int_equal(list_len(d, "collectors"), -1);
    assert_int_equal(list_len(d, "learners"), 2);
    assert_string_equal(list_at(d, "learners", 0), "learner-0.ns1:22271");
    assert_string_equal(list_at(d, "learners", 1), "learner-1.ns1:22271");
    cJSON_Delete(t);
    http_free(&r);
}

static void get_by_coordinator_returns_collectors_and_learners(void **state)
{
    mock *m = *state;
    cJSON *t = call("GET", m->port, GET_COORD, NULL, 200, true);
    const cJSON *d = jsonx_get(t, "data");
    assert_string_equal(jsonx_get_str(d, "coordinator"), "coord");
    assert_int_equal(list_len(d, "collectors"), 1);
    assert_string_equal(list_at(d, "collectors", 0), "collector-0.ns1:22270");
    assert_int_equal(list_len(d, "learners"), 1);
    cJSON_Delete(t);
    /* An entry with no learners: an empty list, not null. */
    t = call("GET", m->port, "/v1alpha1/replicas?namespace=ns2&coordinator=other", NULL, 200,
             true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 0);
    assert_int_equal(list_len(jsonx_get(t, "data"), "collectors"), 0);
    cJSON_Delete(t);
}

static void get_param_names_are_case_insensitive_and_first_value_counts(void **state)
{
    mock *m = *state;
    cJSON *t = call("GET", m->port,
                    "/v1alpha1/replicas?NameSpace=ns1&AGGREGATOR=agg-0&aggregator=coord", "{}",
                    200, true);
    const cJSON *d = jsonx_get(t, "data");
    assert_string_equal(jsonx_get_str(d, "coordinator"), "agg-0");
    assert_int_equal(list_len(d, "learners"), 2);
    cJSON_Delete(t);
}

static void get_unknown_query_param_is_400_naming_it(void **state)
{
    mock *m = *state;
    cJSON *t = call("GET", m->port, GET_AGG "&bogus=1", NULL, 400, false);
    expect_message_has(t, "request param bogus is not supported");
    assert_true(cJSON_IsNull(jsonx_get(t, "data")));
    cJSON_Delete(t);
    t = call("GET", m->port, "/v1alpha1/replicas?flag", NULL, 400, false);
    expect_message_has(t, "flag");
    cJSON_Delete(t);
}

static void get_unknown_pod_is_404_naming_it(void **state)
{
    mock *m = *state;
    cJSON *t = call("GET", m->port, "/v1alpha1/replicas?namespace=ns1&aggregator=nobody", NULL,
                    404, false);
    expect_message_has(t, "pod: ns1/nobody not exists in cache");
    assert_true(cJSON_IsNull(jsonx_get(t, "data")));
    cJSON_Delete(t);
    /* The same name in another namespace is another pod. */
    t = call("GET", m->port, "/v1alpha1/replicas?namespace=ns2&aggregator=agg-0", NULL, 404,
             false);
    cJSON_Delete(t);
    t = call("GET", m->port, "/v1alpha1/replicas?namespace=&aggregator=agg-0", NULL, 404, false);
    expect_message_has(t, "no namespace");
    cJSON_Delete(t);
}

static void get_without_name_lists_entries(void **state)
{
    mock *m = *state;
    /* No namespace (even with aggregator=): every entry, as the original. */
    cJSON *t = call("GET", m->port, "/v1alpha1/replicas?aggregator=agg-0", NULL, 200, true);
    assert_true(cJSON_IsArray(jsonx_get(t, "data")));
    assert_int_equal(cJSON_GetArraySize(jsonx_get(t, "data")), 4);
    cJSON_Delete(t);
    t = call("GET", m->port, "/v1alpha1/replicas?namespace=ns1", NULL, 200, true);
    const cJSON *d = jsonx_get(t, "data");
    assert_int_equal(cJSON_GetArraySize(d), 3);
    assert_string_equal(jsonx_get_str(cJSON_GetArrayItem(d, 0), "coordinator"), "agg-0");
    cJSON_Delete(t);
    t = call("GET", m->port, "/v1alpha1/replicas?namespace=empty", NULL, 200, true);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(t, "data")), 0);
    cJSON_Delete(t);
}

static void get_with_name_answers_null_data(void **state)
{
    mock *m = *state;
    cJSON *t = call("GET", m->port, "/v1alpha1/replicas?namespace=ns1&name=x", NULL, 200, true);
    assert_true(cJSON_IsNull(jsonx_get(t, "data")));
    cJSON_Delete(t);
}

static void post_replicas_invents_addresses_and_lists_them(void **state)
{
    mock *m = *state;
    cJSON *t = call("POST", m->port, "/v1alpha1/replicas",
                    "{\"namespace\": \"ns1\", \"coordinator\": \"dijob-coordinator\", "
                    "\"collectors\": {\"replicas\": 1}, \"learners\": {\"replicas\": 2, "
                    "\"gpus\": \"1\", \"cpus\": 0.5, \"memory\": \"1Gi\"}}",
                    200, true);
    expect_message_has(t, "successfully create replicas");
    const cJSON *d = jsonx_get(t, "data");
    assert_string_equal(jsonx_get_str(d, "namespace"), "ns1");
    assert_string_equal(jsonx_get_str(d, "coordinator"), "dijob-coordinator");
    assert_int_equal(list_len(d, "collectors"), 1);
    assert_int_equal(list_len(d, "learners"), 2);
    expect_invented(list_at(d, "collectors", 0), "dijob-collector", ".ns1:22270");
    expect_invented(list_at(d, "learners", 0), "dijob-learner", ".ns1:22271");
    expect_invented(list_at(d, "learners", 1), "dijob-learner", ".ns1:22271");
    assert_string_not_equal(list_at(d, "learners", 0), list_at(d, "learners", 1));
    char first[128];
    snprintf(first, sizeof first, "%s", list_at(d, "learners", 0));
    cJSON_Delete(t);

    t = call("GET", m->port, "/v1alpha1/replicas?namespace=ns1&coordinator=dijob-coordinator",
             NULL, 200, true);
    d = jsonx_get(t, "data");
    assert_int_equal(list_len(d, "learners"), 2);
    assert_true(list_has(d, "learners", first));
    assert_int_equal(list_len(d, "collectors"), 1);
    cJSON_Delete(t);

    /* Zero replicas: empty lists. */
    t = call("POST", m->port, "/v1alpha1/replicas",
             "{\"namespace\":\"ns1\",\"coordinator\":\"coord\"}", 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 0);
    cJSON_Delete(t);
}

static void post_replicas_rejects_bad_bodies_and_changes_nothing(void **state)
{
    mock *m = *state;
    static const struct {
        const char *body;
        long status;
        const char *part;
    } cases[] = {
        {"", 400, "EOF"},
        {"  ", 400, "EOF"},
        {"{", 400, "not valid JSON"},
        {"[]", 400, "cannot unmarshal array into Go value of type types.DIJobRequest"},
        {"{\"namespace\": 1}", 400, "DIJobRequest.namespace of type string"},
        {"{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":{\"replicas\":\"2\"}}",
         400, "cannot unmarshal string into Go struct field DIJobRequest.learners.replicas"},
        {"{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":{\"replicas\":2.5}}",
         400, "number 2.5"},
        {"{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":[]}", 400,
         "DIJobRequest.learners of type types.ResourceQuantity"},
        {"{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":{\"gpus\":\"x1\"}}", 400,
         "quantities must match"},
        {"{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":{\"replicas\":5000}}",
         400, "at most 1000"},
        {"{\"coordinator\":\"agg-0\",\"learners\":{\"replicas\":1}}", 404, "no namespace"},
        {"{\"namespace\":\"ns1\",\"learners\":{\"replicas\":1}}", 404,
         "no coordinator/aggregator name"},
        {"{\"namespace\":\"ns1\",\"coordinator\":\"ghost\"}", 404,
         "pod: ns1/ghost not exists in cache"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int del = 0; del < 2; del++) {
            cJSON *t = call(del ? "DELETE" : "POST", m->port, "/v1alpha1/replicas", cases[i].body,
                            cases[i].status, false);
            /* 5000 replicas is fine for DELETE (it removes what there is). */
            expect_message_has(t, cases[i].part);
            const cJSON *d = jsonx_get(t, "data");
            assert_true(cJSON_IsObject(d));
            assert_string_equal(jsonx_get_str(d, "namespace"), "");
            assert_int_equal(list_len(d, "learners"), -1);
            cJSON_Delete(t);
            if (i == 9)
                break; /* the replica cap is checked for POST only */
        }
    }
    cJSON *t = call("GET", m->port, GET_AGG, NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 2);
    cJSON_Delete(t);
}

static void delete_replicas_removes_the_first_n(void **state)
{
    mock *m = *state;
    cJSON *t = call("DELETE", m->port, "/v1alpha1/replicas",
                    "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"collectors\":{\"replicas\":"
                    "1},\"learners\":{\"replicas\":1}}",
                    200, true);
    expect_message_has(t, "successfully delete replicas");
    const cJSON *d = jsonx_get(t, "data");
    assert_int_equal(list_len(d, "collectors"), 0);
    assert_int_equal(list_len(d, "learners"), 1);
    assert_string_equal(list_at(d, "learners", 0), "learner-0.ns1:22271");
    cJSON_Delete(t);
    t = call("GET", m->port, GET_AGG, NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 1);
    assert_string_equal(list_at(jsonx_get(t, "data"), "learners", 0), "learner-1.ns1:22271");
    cJSON_Delete(t);
    /* More than there are: all of them. */
    t = call("DELETE", m->port, "/v1alpha1/replicas",
             "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":{\"replicas\":9}}", 200,
             true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 1);
    cJSON_Delete(t);
    t = call("GET", m->port, GET_AGG, NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 0);
    cJSON_Delete(t);
}

static void replicas_failed_recreates_the_pod_under_a_new_name(void **state)
{
    mock *m = *state;
    /* As the aggregator reports: coordinator is its own name; a pod named
     * twice is recreated once. */
    cJSON *t = call("POST", m->port, "/v1alpha1/replicas/failed",
                    "{\"namespace\": \"ns1\", \"coordinator\": \"agg-0\", \"collectors\": [], "
                    "\"learners\": [\"learner-0\", \"learner-0\"]}",
                    200, true);
    expect_message_has(t, "successfully recreate replicas");
    const cJSON *d = jsonx_get(t, "data");
    assert_int_equal(list_len(d, "collectors"), -1); /* nothing recreated: null */
    assert_int_equal(list_len(d, "learners"), 1);
    char fresh[128];
    snprintf(fresh, sizeof fresh, "%s", list_at(d, "learners", 0));
    expect_invented(fresh, "learner", ".ns1:22271");
    cJSON_Delete(t);

    t = call("GET", m->port, GET_AGG, NULL, 200, true);
    d = jsonx_get(t, "data");
    assert_int_equal(list_len(d, "learners"), 2);
    assert_string_equal(list_at(d, "learners", 0), fresh);
    assert_false(list_has(d, "learners", "learner-0.ns1:22271"));
    cJSON_Delete(t);

    t = call("GET", m->control_port, "/control/state", NULL, 200, true);
    const cJSON *failed = jsonx_get(jsonx_get(t, "data"), "failed");
    assert_int_equal(cJSON_GetArraySize(failed), 1);
    const cJSON *f = cJSON_GetArrayItem(failed, 0);
    assert_string_equal(jsonx_get_str(f, "pod"), "learner-0");
    assert_string_equal(jsonx_get_str(f, "reporter"), "agg-0");
    assert_string_equal(jsonx_get_str(f, "kind"), "learners");
    assert_string_equal(jsonx_get_str(f, "address"), "learner-0.ns1:22271");
    assert_string_equal(jsonx_get_str(f, "replaced_by"), fresh);
    cJSON_Delete(t);
}

static void replicas_failed_unknown_pod_is_404_and_changes_nothing(void **state)
{
    mock *m = *state;
    cJSON *t = call("POST", m->port, "/v1alpha1/replicas/failed",
                    "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":[\"learner-0\","
                    "\"ghost\"]}",
                    404, false);
    expect_message_has(t, "pod: ns1/ghost not exists in cache");
    cJSON_Delete(t);
    t = call("GET", m->port, GET_AGG, NULL, 200, true);
    assert_true(list_has(jsonx_get(t, "data"), "learners", "learner-0.ns1:22271"));
    cJSON_Delete(t);
    /* Pods are looked up in the request's namespace only. */
    t = call("POST", m->port, "/v1alpha1/replicas/failed",
             "{\"namespace\":\"ns2\",\"coordinator\":\"agg-0\",\"learners\":[\"learner-0\"]}", 404,
             false);
    cJSON_Delete(t);
}

static void replicas_failed_with_remove_policy_drops_the_address(void **state)
{
    mock *m = *state;
    cJSON *t = call("PUT", m->control_port, "/control/settings", "{\"on_failed\": \"remove\"}",
                    200, true);
    assert_string_equal(jsonx_get_str(jsonx_get(t, "data"), "on_failed"), "remove");
    cJSON_Delete(t);
    t = call("POST", m->port, "/v1alpha1/replicas/failed",
             "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":[\"learner-1\"]}", 200,
             true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), -1);
    cJSON_Delete(t);
    t = call("GET", m->port, GET_AGG, NULL, 200, true);
    const cJSON *d = jsonx_get(t, "data");
    assert_int_equal(list_len(d, "learners"), 1);
    assert_string_equal(list_at(d, "learners", 0), "learner-0.ns1:22271");
    cJSON_Delete(t);
}

static void replicas_failed_matches_local_addresses_by_host_or_address(void **state)
{
    mock *m = *state;
    cJSON *t = call("PUT", m->control_port, "/control/learners",
                    "{\"namespace\":\"ns3\",\"name\":\"agg\",\"learners\":[\"127.0.0.1:5001\","
                    "\"127.0.0.1:5002\"]}",
                    200, true);
    cJSON_Delete(t);
    t = call("PUT", m->control_port, "/control/settings", "{\"on_failed\": \"remove\"}", 200,
             true);
    cJSON_Delete(t);
    t = call("POST", m->port, "/v1alpha1/replicas/failed",
             "{\"namespace\":\"ns3\",\"coordinator\":\"agg\",\"learners\":[\"127.0.0.1:5002\"]}",
             200, true);
    cJSON_Delete(t);
    t = call("GET", m->port, "/v1alpha1/replicas?namespace=ns3&aggregator=agg", NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 1);
    assert_string_equal(list_at(jsonx_get(t, "data"), "learners", 0), "127.0.0.1:5001");
    cJSON_Delete(t);
}

static void replicas_failed_rejects_bad_bodies(void **state)
{
    mock *m = *state;
    cJSON *t = call("POST", m->port, "/v1alpha1/replicas/failed",
                    "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":\"learner-0\"}",
                    400, false);
    expect_message_has(t, "DIJobResponse.learners of type []string");
    cJSON_Delete(t);
    t = call("POST", m->port, "/v1alpha1/replicas/failed",
             "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"collectors\":[7]}", 400, false);
    expect_message_has(t, "cannot unmarshal number into Go struct field DIJobResponse.collectors");
    cJSON_Delete(t);
    t = call("POST", m->port, "/v1alpha1/replicas/failed", "nope", 400, false);
    expect_message_has(t, "failed to decode request body");
    cJSON_Delete(t);
}

static void other_methods_are_501_and_unknown_paths_plain_404(void **state)
{
    mock *m = *state;
    cJSON *t = call("PUT", m->port, "/v1alpha1/replicas", "{}", 501, false);
    expect_message_has(t, "PUT not implemented");
    cJSON_Delete(t);
    t = call("GET", m->port, "/v1alpha1/replicas/failed", NULL, 501, false);
    expect_message_has(t, "GET not implemented");
    cJSON_Delete(t);
    http_res r = http("GET", m->port, "/v1alpha1/replica", NULL);
    assert_int_equal(r.status, 404);
    assert_string_equal(r.body, "404 page not found\n");
    http_free(&r);
    r = http("GET", m->port, "/v1alpha1/replicas/", NULL);
    assert_int_equal(r.status, 404);
    http_free(&r);
    r = http("GET", m->port, "/healthz", NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.status, 200);
    assert_int_equal(r.len, 0);
    http_free(&r);
}

/* ---- the control API ----------------------------------------------------- */

static void control_learner_lists_change_what_get_returns(void **state)
{
    mock *m = *state;
    const char *get = "/v1alpha1/replicas?namespace=ns3&aggregator=agg";
    cJSON *t = call("GET", m->port, get, NULL, 404, false);
    cJSON_Delete(t);

    t = call("PUT", m->control_port, "/control/learners",
             "{\"namespace\":\"ns3\",\"name\":\"agg\",\"learners\":[\"a.ns3:1\",\"b.ns3:2\"]}", 200,
             true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 2);
    cJSON_Delete(t);
    t = call("GET", m->port, get, NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 2);
    cJSON_Delete(t);

    /* add keeps what is there. */
    t = call("POST", m->control_port, "/control/learners/add",
             "{\"namespace\":\"ns3\",\"name\":\"agg\",\"learners\":[\"b.ns3:2\",\"c.ns3:3\"]}", 200,
             true);
    int64_t changed = 0;
    assert_true(jsonx_get_i64(jsonx_get(jsonx_get(t, "data"), "changed"), &changed));
    assert_int_equal(changed, 1);
    cJSON_Delete(t);
    /* remove ignores what is not there. */
    t = call("POST", m->control_port, "/control/learners/remove",
             "{\"namespace\":\"ns3\",\"name\":\"agg\",\"learners\":[\"a.ns3:1\",\"z.ns3:9\"]}", 200,
             true);
    assert_true(jsonx_get_i64(jsonx_get(jsonx_get(t, "data"), "changed"), &changed));
    assert_int_equal(changed, 1);
    cJSON_Delete(t);
    t = call("GET", m->port, get, NULL, 200, true);
    const cJSON *d = jsonx_get(t, "data");
    assert_int_equal(list_len(d, "learners"), 2);
    assert_string_equal(list_at(d, "learners", 0), "b.ns3:2");
    assert_string_equal(list_at(d, "learners", 1), "c.ns3:3");
    cJSON_Delete(t);

    /* set replaces; an empty list empties. */
    t = call("PUT", m->control_port, "/control/learners",
             "{\"namespace\":\"ns3\",\"name\":\"agg\",\"learners\":[]}", 200, true);
    cJSON_Delete(t);
    t = call("GET", m->port, get, NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 0);
    cJSON_Delete(t);

    /* forgetting the entry makes it unknown again. */
    t = call("DELETE", m->control_port, "/control/replicas",
             "{\"namespace\":\"ns3\",\"name\":\"agg\"}", 200, true);
    cJSON_Delete(t);
    t = call("GET", m->port, get, NULL, 404, false);
    cJSON_Delete(t);
    t = call("DELETE", m->control_port, "/control/replicas",
             "{\"namespace\":\"ns3\",\"name\":\"agg\"}", 404, false);
    cJSON_Delete(t);
}

static void control_collector_lists_change_what_get_returns(void **state)
{
    mock *m = *state;
    cJSON *t = call("POST", m->control_port, "/control/collectors/add",
                    "{\"namespace\":\"ns1\",\"name\":\"coord\",\"collectors\":[\"c1.ns1:22270\"]}",
                    200, true);
    cJSON_Delete(t);
    t = call("GET", m->port, GET_COORD, NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "collectors"), 2);
    cJSON_Delete(t);
    t = call("PUT", m->control_port, "/control/collectors",
             "{\"namespace\":\"ns1\",\"name\":\"coord\",\"collectors\":[]}", 200, true);
    cJSON_Delete(t);
    t = call("POST", m->control_port, "/control/collectors/remove",
             "{\"namespace\":\"ns1\",\"name\":\"coord\",\"collectors\":[\"x.ns1:1\"]}", 200, true);
    cJSON_Delete(t);
    t = call("GET", m->port, GET_COORD, NULL, 200, true);
    assert_int_equal(list_len(jsonx_get(t, "data"), "collectors"), 0);
    assert_int_equal(list_len(jsonx_get(t, "data"), "learners"), 1);
    cJSON_Delete(t);
}

static void control_rejects_bad_requests_naming_the_problem(void **state)
{
    mock *m = *state;
    static const struct {
        const char *method, *path, *body;
        long status;
        const char *part;
    } cases[] = {
        {"GET", "/control/nothing", NULL, 404, "no control endpoint /control/nothing"},
        {"GET", "/control/learners", NULL, 405, "use PUT"},
        {"PUT", "/control/learners", NULL, 400, "needs a JSON object body"},
        {"PUT", "/control/learners", "{", 400, "not valid JSON"},
        {"PUT", "/control/learners", "[]", 400, "must be a JSON object"},
        {"PUT", "/control/learners", "{\"namespace\":\"ns\",\"learners\":[]}", 400,
         "name is missing"},
        {"PUT", "/control/learners", "{\"namespace\":\"ns\",\"name\":3,\"learners\":[]}", 400,
         "\"name\" must be a string"},
        {"PUT", "/control/learners", "{\"namespace\":\"n s\",\"name\":\"a\",\"learners\":[]}",
         400, "white space"},
        {"PUT", "/control/learners", "{\"namespace\":\"ns\",\"name\":\"a\"}", 400,
         "\"learners\" must be a list"},
        {"PUT", "/control/learners",
         "{\"namespace\":\"ns\",\"name\":\"a\",\"learners\":[\"h:1\",\"nohost\"]}", 400,
         "learners[1]"},
        {"PUT", "/control/learners",
         "{\"namespace\":\"ns\",\"name\":\"a\",\"learners\":[\"h:99999\"]}", 400,
         "outside 1-65535"},
        {"PUT", "/control/learners",
         "{\"namespace\":\"ns\",\"name\":\"a\",\"learners\":[\"h:1\",\"h:1\"]}", 400, "twice"},
        {"PUT", "/control/learners",
         "{\"namespace\":\"ns\",\"name\":\"a\",\"learners\":[],\"extra\":1}", 400,
         "unknown field \"extra\""},
        {"PUT", "/control/learners",
         "{\"namespace\":\"ns\",\"name\":\"a\",\"collectors\":[]}", 400,
         "unknown field \"collectors\""},
        {"POST", "/control/learners/remove",
         "{\"namespace\":\"ns\",\"name\":\"nobody\",\"learners\":[]}", 404, "no entry ns/nobody"},
        {"PUT", "/control/settings", "{\"on_failed\":\"explode\"}", 400, "recreate"},
        {"GET", "/control/journal?since=x", NULL, 400, "since"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *t = call(cases[i].method, m->control_port, cases[i].path, cases[i].body,
                        cases[i].status, false);
        expect_message_has(t, cases[i].part);
        cJSON_Delete(t);
    }
    /* Nothing was created by the rejected requests. */
    cJSON *t = call("GET", m->control_port, "/control/state", NULL, 200, true);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(jsonx_get(t, "data"), "replicas")), 4);
    cJSON_Delete(t);
}

/* ---- faults -------------------------------------------------------------- */

static void add_fault(mock *m, const char *spec)
{
    cJSON *t = call("POST", m->control_port, "/control/fault", spec, 200, true);
    cJSON_Delete(t);
}

static void fault_error_status_applies_count_times_then_stops(void **state)
{
    mock *m = *state;
    add_fault(m, "{\"kind\": \"error_status\", \"status\": 503, \"count\": 2}");
    for (int i = 0; i < 2; i++) {
        cJSON *t = call("GET", m->port, GET_AGG, NULL, 503, false);
        expect_message_has(t, "injected fault");
        cJSON_Delete(t);
    }
    cJSON *t = call("GET", m->port, GET_AGG, NULL, 200, true);
    cJSON_Delete(t);
    /* Used up: the fault is gone. */
    t = call("GET", m->control_port, "/control/fault", NULL, 200, true);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(t, "data")), 0);
    cJSON_Delete(t);
}

static void fault_path_and_method_filters_select_requests(void **state)
{
    mock *m = *state;
    add_fault(m, "{\"kind\": \"error_status\", \"path\": \"/v1alpha1/replicas/failed\", "
                 "\"method\": \"POST\"}");
    cJSON *t = call("GET", m->port, GET_AGG, NULL, 200, true);
    cJSON_Delete(t);
    t = call("POST", m->port, "/v1alpha1/replicas/failed",
             "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\",\"learners\":[\"learner-0\"]}", 500,
             false);
    cJSON_Delete(t);
    /* The injected error changed nothing. */
    t = call("GET", m->port, GET_AGG, NULL, 200, true);
    assert_true(list_has(jsonx_get(t, "data"), "learners", "learner-0.ns1:22271"));
    cJSON_Delete(t);
    /* Until cleared: still there. */
    t = call("POST", m->port, "/v1alpha1/replicas/failed", "{}", 500, false);
    cJSON_Delete(t);
    t = call("DELETE", m->control_port, "/control/fault", NULL, 200, true);
    cJSON_Delete(t);
    t = call("POST", m->port, "/v1alpha1/replicas/failed",
             "{\"namespace\":\"ns1\",\"coordinator\":\"agg-0\"}", 200, true);
    cJSON_Delete(t);
}

static void fault_garbage_answers_200_with_a_body_that_is_not_json(void **state)
{
    mock *m = *state;
    add_fault(m, "{\"kind\": \"garbage\", \"count\": 1}");
    add_fault(m, "{\"kind\": \"garbage\", \"body\": \"{\\\"truncated\\\": \", \"count\": 1}");
    http_res r = http("GET", m->port, GET_AGG, NULL);
    assert_int_equal(r.status, 200);
    char err[64];
    assert_null(jsonx_parse(r.body, r.len, err, sizeof err));
    http_free(&r);
    r = http("GET", m->port, GET_AGG, NULL);
    assert_int_equal(r.status, 200);
    assert_string_equal(r.body, "{\"truncated\": ");
    http_free(&r);
    cJSON *t = call("GET", m->port, GET_AGG, NULL, 200, true);
    cJSON_Delete(t);
}

/* Runs a multi handle until every transfer is done (cap cap_ms). */
static bool multi_run(CURLM *mh, long cap_ms)
{
    long long end = now_ms() + cap_ms;
    int running = 1;
    while (running && now_ms() < end) {
        curl_multi_perform(mh, &running);
        if (running)
            curl_multi_poll(mh, NULL, 0, 50, NULL);
    }
    return running == 0;
}

static void fault_delay_answers_late_without_blocking_the_loop(void **state)
{
    mock *m = *state;
    add_fault(m, "{\"kind\": \"delay\", \"delay_ms\": 1500, \"count\": 1}");
    CURLM *mh = curl_multi_init();
    http_res slow;
    struct curl_slist *hdrs;
    CURL *c = prepare("GET", m->port, GET_AGG, "{}", &slow, &hdrs);
    curl_multi_add_handle(mh, c);
    long long t0 = now_ms();
    int running = 1;
    /* Until the request is in (the journal shows it). */
    bool in = false;
    while (!in && now_ms() - t0 < 2000) {
        curl_multi_perform(mh, &running);
        curl_multi_poll(mh, NULL, 0, 10, NULL);
        cJSON *j = call("GET", m->control_port, "/control/journal", NULL, 200, true);
        in = cJSON_GetArraySize(jsonx_get(j, "data")) == 1;
        cJSON_Delete(j);
    }
    assert_true(in);
    /* While it waits, both ports answer at once. */
    http_res quick = http("GET", m->port, GET_COORD, NULL);
    assert_int_equal(quick.status, 200);
    assert_true(quick.ms < 1000);
    http_free(&quick);
    cJSON *t = call("GET", m->control_port, "/control/journal", NULL, 200, true);
    const cJSON *first = cJSON_GetArrayItem(jsonx_get(t, "data"), 0);
    assert_true(cJSON_IsNull(jsonx_get(first, "status"))); /* not answered yet */
    assert_string_equal(jsonx_get_str(first, "fault"), "delay");
    cJSON_Delete(t);

    assert_true(multi_run(mh, 5000));
    long long elapsed = now_ms() - t0;
    finish(c, &slow);
    assert_int_equal(slow.status, 200);
    cJSON *env = expect_env(&slow, 200, true);
    assert_int_equal(list_len(jsonx_get(env, "data"), "learners"), 2);
    cJSON_Delete(env);
    /* hs sends a deferred reply at its next tick (up to 1 s): see
     * mock_operator/LIBRARY_ISSUES.txt. */
    assert_true(elapsed >= 1500);
    assert_true(elapsed < 1500 + 1500);
    curl_multi_remove_handle(mh, c);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    curl_multi_cleanup(mh);
    http_free(&slow);

    t = call("GET", m->control_port, "/control/journal", NULL, 200, true);
    first = cJSON_GetArrayItem(jsonx_get(t, "data"), 0);
    int64_t at = 0, answered = 0, status = 0;
    assert_true(jsonx_get_i64(jsonx_get(first, "time_ms"), &at));
    assert_true(jsonx_get_i64(jsonx_get(first, "answered_ms"), &answered));
    assert_true(jsonx_get_i64(jsonx_get(first, "status"), &status));
    assert_int_equal(status, 200);
    assert_true(answered - at >= 1500);
    cJSON_Delete(t);
}

static void fault_refuse_closes_the_api_port_until_cleared(void **state)
{
    mock *m = *state;
    add_fault(m, "{\"kind\": \"refuse\"}");
    http_res r = http("GET", m->port, GET_AGG, NULL);
    assert_int_equal(r.rc, CURLE_COULDNT_CONNECT);
    http_free(&r);
    cJSON *t = call("GET", m->control_port, "/control/state", NULL, 200, true);
    assert_false(cJSON_IsTrue(jsonx_get(jsonx_get(t, "data"), "api_listening")));
    cJSON_Delete(t);
    /* Other faults can be added and cleared meanwhile. */
    add_fault(m, "{\"kind\": \"error_status\", \"count\": 1}");
    t = call("DELETE", m->control_port, "/control/fault", NULL, 200, true);
    cJSON_Delete(t);
    t = call("GET", m->port, GET_AGG, NULL, 200, true);
    cJSON_Delete(t);
    t = call("GET", m->control_port, "/control/state", NULL, 200, true);
    int64_t port = 0;
    assert_true(jsonx_get_i64(jsonx_get(jsonx_get(t, "data"), "port"), &port));
    assert_int_equal(port, m->port);
    assert_true(cJSON_IsTrue(jsonx_get(jsonx_get(t, "data"), "api_listening")));
    cJSON_Delete(t);
    /* Clearing just the refuse fault by id works too. */
    t = call("POST", m->control_port, "/control/fault", "{\"kind\":\"refuse\"}", 200, true);
    int64_t id = 0;
    assert_true(jsonx_get_i64(jsonx_get(jsonx_get(t, "data"), "id"), &id));
    cJSON_Delete(t);
    r = http("GET", m->port, "/healthz", NULL);
    assert_int_equal(r.rc, CURLE_COULDNT_CONNECT);
    http_free(&r);
    char body[64];
    snprintf(body, sizeof body, "{\"id\": %lld}", (long long)id);
    t = call("DELETE", m->control_port, "/control/fault", body, 200, true);
    cJSON_Delete(t);
    r = http("GET", m->port, "/healthz", NULL);
    assert_int_equal(r.rc, CURLE_OK);
    assert_int_equal(r.status, 200);
    http_free(&r);
}

static void fault_refuse_drops_delayed_requests(void **state)
{
    mock *m = *state;
    add_fault(m, "{\"kind\": \"delay\", \"delay_ms\": 8000}");
    CURLM *mh = curl_multi_init();
    http_res slow;
    struct curl_slist *hdrs;
    CURL *c = prepare("GET", m->port, GET_AGG, NULL, &slow, &hdrs);
    curl_multi_add_handle(mh, c);
    long long t0 = now_ms();
    bool in = false;
    int running = 1;
    while (!in && now_ms() - t0 < 2000) {
        curl_multi_perform(mh, &running);
        curl_multi_poll(mh, NULL, 0, 10, NULL);
        cJSON *j = call("GET", m->control_port, "/control/journal", NULL, 200, true);
        in = cJSON_GetArraySize(jsonx_get(j, "data")) == 1;
        cJSON_Delete(j);
    }
    assert_true(in);
    add_fault(m, "{\"kind\": \"refuse\"}");
    assert_true(multi_run(mh, 3000));
    finish(c, &slow);
    assert_true(slow.status == 0 || slow.status == 503);
    curl_multi_remove_handle(mh, c);
    curl_easy_cleanup(c);
    curl_slist_free_all(hdrs);
    curl_multi_cleanup(mh);
    http_free(&slow);
    cJSON *t = call("GET", m->control_port, "/control/journal", NULL, 200, true);
    const cJSON *e = cJSON_GetArrayItem(jsonx_get(t, "data"), 0);
    assert_true(cJSON_IsNull(jsonx_get(e, "status")));
    assert_non_null(strstr(jsonx_get_str(e, "note"), "dropped"));
    cJSON_Delete(t);
}

static void fault_specs_are_checked_and_listed(void **state)
{
    mock *m = *state;
    static const struct {
        const char *spec;
        const char *part;
    } bad[] = {
        {"{}", "\"kind\" is missing"},
        {"{\"kind\": \"explode\"}", "unknown"},
        {"{\"kind\": \"delay\"}", "needs \"delay_ms\""},
        {"{\"kind\": \"delay\", \"delay_ms\": 0}", "needs \"delay_ms\""},
        {"{\"kind\": \"delay\", \"delay_ms\": 9999999}", "delay_ms"},
        {"{\"kind\": \"error_status\", \"status\": 99}", "\"status\" is 99"},
        {"{\"kind\": \"error_status\", \"count\": 0}", "\"count\" is 0"},
        {"{\"kind\": \"error_status\", \"count\": \"1\"}", "must be an integer"},
        {"{\"kind\": \"error_status\", \"stauts\": 500}", "unknown fault field \"stauts\""},
        {"{\"kind\": \"refuse\", \"count\": 1}", "refuse fault takes no"},
        {"{\"kind\": \"garbage\", \"status\": 500}", "error_status only"},
        {"{\"kind\": \"delay\", \"delay_ms\": 5, \"body\": \"x\"}", "garbage only"},
        {"{\"kind\": \"garbage\", \"path\": \"v1\"}", "start with '/'"},
        {"[]", "must be a JSON object"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *t = call("POST", m->control_port, "/control/fault", bad[i].spec, 400, false);
        expect_message_has(t, bad[i].part);
        cJSON_Delete(t);
    }
    add_fault(m, "{\"kind\": \"delay\", \"delay_ms\": 100, \"path\": \"/healthz\"}");
    add_fault(m, "{\"kind\": \"error_status\", \"status\": 502, \"delay_ms\": 50, \"count\": 3}");
    cJSON *t = call("GET", m->control_port, "/control/fault", NULL, 200, true);
    const cJSON *list = jsonx_get(t, "data");
    assert_int_equal(cJSON_GetArraySize(list), 2);
    const cJSON *f1 = cJSON_GetArrayItem(list, 1);
    assert_string_equal(jsonx_get_str(f1, "kind"), "error_status");
    int64_t v = 0;
    assert_true(jsonx_get_i64(jsonx_get(f1, "status"), &v));
    assert_int_equal(v, 502);
    assert_true(jsonx_get_i64(jsonx_get(f1, "count"), &v));
    assert_int_equal(v, 3);
    assert_true(cJSON_IsNull(jsonx_get(cJSON_GetArrayItem(list, 0), "count")));
    cJSON_Delete(t);
    /* error_status with delay_ms: late, then the error. */
    http_res r = http("GET", m->port, GET_AGG, NULL);
    assert_int_equal(r.status, 502);
    assert_true(r.ms >= 50);
    http_free(&r);
    t = call("DELETE", m->control_port, "/control/fault", "{\"id\": 999}", 404, false);
    expect_message_has(t, "no fault with id 999");
    cJSON_Delete(t);
    t = call("DELETE", m->control_port, "/control/fault", "{}", 200, true);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(t, "data")), 0);
    cJSON_Delete(t);
}

/* ---- journal ------------------------------------------------------------- */

static void journal_records_every_api_request_in_order(void **state)
{
    mock *m = *state;
    http_res r = http("GET", m->port, GET_AGG "&namespace=again", "{}");
    http_free(&r);
    r = http("POST", m->port, "/v1alpha1/replicas/failed", "not json");
    http_free(&r);
    r = http("DELETE", m->port, "/v1alpha1/replicas", NULL);
    http_free(&r);
    add_fault(m, "{\"kind\": \"error_status\", \"status\": 500, \"count\": 1}");
    r = http("GET", m->port, "/healthz", NULL);
    http_free(&r);
    /* Control requests are not journaled. */
    cJSON *t = call("GET", m->control_port, "/control/journal", NULL, 200, true);
    const cJSON *list = jsonx_get(t, "data");
    assert_int_equal(cJSON_GetArraySize(list), 4);

    const cJSON *e0 = cJSON_GetArrayItem(list, 0);
    int64_t v = 0, prev_time = -1;
    assert_string_equal(jsonx_get_str(e0, "method"), "GET");
    assert_string_equal(jsonx_get_str(e0, "path"), "/v1alpha1/replicas");
    const cJSON *q = jsonx_get(e0, "query");
    assert_true(cJSON_IsArray(jsonx_get(q, "namespace"))); /* repeated: a list */
    assert_string_equal(jsonx_get_str(q, "aggregator"), "agg-0");
    assert_true(cJSON_IsObject(jsonx_get(e0, "body")));
    assert_true(jsonx_get_i64(jsonx_get(e0, "status"), &v));
    assert_int_equal(v, 200);
    assert_true(cJSON_IsNull(jsonx_get(e0, "fault")));

    const cJSON *e1 = cJSON_GetArrayItem(list, 1);
    assert_true(cJSON_IsString(jsonx_get(e1, "body")));
    assert_string_equal(jsonx_get_str(e1, "body"), "not json");
    assert_true(jsonx_get_i64(jsonx_get(e1, "status"), &v));
    assert_int_equal(v, 400);

    const cJSON *e2 = cJSON_GetArrayItem(list, 2);
    assert_string_equal(jsonx_get_str(e2, "method"), "DELETE");
    assert_true(cJSON_IsNull(jsonx_get(e2, "body")));

    const cJSON *e3 = cJSON_GetArrayItem(list, 3);
    assert_string_equal(jsonx_get_str(e3, "fault"), "error_status");
    assert_true(jsonx_get_i64(jsonx_get(e3, "status"), &v));
    assert_int_equal(v, 500);

    int64_t seq3 = 0;
    for (int i = 0; i < 4; i++) {
        const cJSON *e = cJSON_GetArrayItem(list, i);
        int64_t seq = 0, time = 0;
        assert_true(jsonx_get_i64(jsonx_get(e, "seq"), &seq));
        assert_int_equal(seq, i + 1);
        assert_true(jsonx_get_i64(jsonx_get(e, "time_ms"), &time));
        assert_true(time >= prev_time);
        prev_time = time;
        seq3 = seq;
    }
    cJSON_Delete(t);

    char target[64];
    snprintf(target, sizeof target, "/control/journal?since=%lld", (long long)seq3);
    t = call("GET", m->control_port, target, NULL, 200, true);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(t, "data")), 1);
    cJSON_Delete(t);
    t = call("DELETE", m->control_port, "/control/journal", NULL, 200, true);
    cJSON_Delete(t);
    t = call("GET", m->control_port, "/control/journal", NULL, 200, true);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(t, "data")), 0);
    cJSON_Delete(t);
    /* Numbering goes on after a clear. */
    r = http("GET", m->port, "/healthz", NULL);
    http_free(&r);
    t = call("GET", m->control_port, "/control/journal", NULL, 200, true);
    assert_true(jsonx_get_i64(jsonx_get(cJSON_GetArrayItem(jsonx_get(t, "data"), 0), "seq"), &v));
    assert_int_equal(v, 5);
    cJSON_Delete(t);
}

static void journal_keeps_the_newest_entries_up_to_its_limit(void **state)
{
    (void)state;
    mock m;
    const char *const args[] = {"--journal-limit", "3", NULL};
    mock_start(&m, args);
    for (int i = 0; i < 5; i++) {
        http_res r = http("GET", m.port, "/healthz", NULL);
        http_free(&r);
    }
    cJSON *t = call("GET", m.control_port, "/control/journal", NULL, 200, true);
    const cJSON *list = jsonx_get(t, "data");
    assert_int_equal(cJSON_GetArraySize(list), 3);
    int64_t seq = 0;
    assert_true(jsonx_get_i64(jsonx_get(cJSON_GetArrayItem(list, 0), "seq"), &seq));
    assert_int_equal(seq, 3);
    cJSON_Delete(t);
    t = call("GET", m.control_port, "/control/state", NULL, 200, true);
    assert_true(jsonx_get_i64(jsonx_get(jsonx_get(t, "data"), "journal_dropped"), &seq));
    assert_int_equal(seq, 2);
    cJSON_Delete(t);
    mock_stop_with(&m, SIGTERM);
}

/* ---- the interaction library's client ------------------------------------ */

typedef struct {
    int done;
    long status;
    char *body;
} hc_capture;

static void on_hc(void *data, const hc_result *res)
{
    hc_capture *c = data;
    c->done = 1;
    c->status = res->status;
    c->body = strdup(res->body ? res->body : "");
}

static void hc_client_reads_the_learner_list_as_the_aggregator_does(void **state)
{
    mock *m = *state;
    ev_loop *loop = ev_loop_new();
    assert_non_null(loop);
    hc_client *hc = hc_new(loop);
    hc_opts o;
    hc_opts_init(&o);
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%d" GET_AGG, m->port);
    o.method = "GET";
    o.url = url;
    o.channel = -1;
    o.body = NULL; /* "{}" like the reference */
    o.timeout_ms = 5000;
    o.retries = 0;
    hc_capture cap = {0, 0, NULL};
    assert_non_null(hc_send(hc, &o, on_hc, &cap));
    long long end = now_ms() + 5000;
    while (!cap.done && now_ms() < end)
        ev_run_once(loop, 50);
    assert_true(cap.done);
    assert_int_equal(cap.status, 200);
    proto_reply rep;
    char err[128];
    assert_true(proto_parse_envelope(cap.body, strlen(cap.body), &rep, err, sizeof err));
    assert_true(rep.success);
    assert_int_equal(rep.code, 0);
    assert_int_equal(list_len(rep.data, "learners"), 2);
    cJSON_Delete(rep.tree);
    free(cap.body);
    hc_free(hc);
    ev_loop_free(loop);
}

/* ---- command line and process -------------------------------------------- */

static void usage_errors_exit_2_naming_the_flag(void **state)
{
    (void)state;
    static const struct {
        const char *args[6];
        const char *part;
    } cases[] = {
        {{"--bogus", NULL}, "unknown option '--bogus'"},
        {{"--port", "70000", NULL}, "--port '70000'"},
        {{"--port", NULL}, "--port needs a value"},
        {{"--control-port=x", NULL}, "--control-port 'x'"},
        {{"--learners", "nonsense", NULL}, "--learners 'nonsense'"},
        {{"--learners", "ns/a=host", NULL}, "not host:port"},
        {{"--learners", "ns/a=h:1,h:1", NULL}, "listed twice"},
        {{"--learners", "ns/a=h:1", "--learners", "ns/a=h:2", NULL}, "given twice"},
        {{"--collectors", "/a=h:1", NULL}, "namespace is missing"},
        {{"--on-failed", "explode", NULL}, "--on-failed 'explode'"},
        {{"--log-level", "loud", NULL}, "--log-level 'loud'"},
        {{"--log-format", "xml", NULL}, "--log-format 'xml'"},
        {{"--journal-limit", "0", NULL}, "--journal-limit '0'"},
        {{"--port", "5000", "--control-port", "5000", NULL}, "must differ"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_result r = run_capture(cases[i].args);
        if (r.status != 2 || !strstr(r.err, cases[i].part))
            fail_msg("case %zu: exit %d, stderr \"%s\" (expected 2 and \"%s\")", i, r.status,
                     r.err, cases[i].part);
        assert_string_equal(r.out, "");
        run_result_free(&r);
    }
}

static void help_lists_every_flag_and_version_prints_it(void **state)
{
    (void)state;
    const char *const help[] = {"--help", NULL};
    run_result r = run_capture(help);
    assert_int_equal(r.status, 0);
    static const char *const flags[] = {"--host",       "--port",          "--control-port",
                                        "--learners",   "--collectors",    "--on-failed",
                                        "--seed",       "--journal-limit", "--log-level",
                                        "--log-format", "--help",          "--version"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++)
        if (!strstr(r.out, flags[i]))
            fail_msg("--help does not mention %s", flags[i]);
    run_result_free(&r);
    const char *const version[] = {"--version", NULL};
    r = run_capture(version);
    assert_int_equal(r.status, 0);
    assert_non_null(strstr(r.out, "mock_operator "));
    run_result_free(&r);
}

static void busy_port_fails_with_exit_1_naming_the_port(void **state)
{
    mock *m = *state;
    char port[16];
    snprintf(port, sizeof port, "%d", m->port);
    const char *const args[] = {"--port", port, NULL};
    run_result r = run_capture(args);
    assert_int_equal(r.status, 1);
    assert_non_null(strstr(r.err, "--port"));
    assert_string_equal(r.out, "");
    run_result_free(&r);
}

static void sigint_exits_0(void **state)
{
    (void)state;
    mock m;
    mock_start(&m, NULL);
    mock_stop_with(&m, SIGINT);
}

static void same_seed_invents_the_same_names(void **state)
{
    (void)state;
    char first[2][128];
    for (int run = 0; run < 2; run++) {
        mock m;
        mock_start(&m, std_args);
        cJSON *t = call("POST", m.port, "/v1alpha1/replicas",
                        "{\"namespace\":\"ns1\",\"coordinator\":\"coord\",\"learners\":{"
                        "\"replicas\":1}}",
                        200, true);
        snprintf(first[run], sizeof first[run], "%s",
                 list_at(jsonx_get(t, "data"), "learners", 0));
        cJSON_Delete(t);
        mock_stop_with(&m, SIGTERM);
    }
    assert_string_equal(first[0], first[1]);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(int argc, char **argv)
{
    if (argc > 1)
        bin_path = argv[1];
    signal(SIGPIPE, SIG_IGN);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    const struct CMUnitTest tests[] = {
        T(get_by_aggregator_returns_its_learners_and_null_collectors),
        T(get_by_coordinator_returns_collectors_and_learners),
        T(get_param_names_are_case_insensitive_and_first_value_counts),
        T(get_unknown_query_param_is_400_naming_it),
        T(get_unknown_pod_is_404_naming_it),
        T(get_without_name_lists_entries),
        T(get_with_name_answers_null_data),
        T(post_replicas_invents_addresses_and_lists_them),
        T(post_replicas_rejects_bad_bodies_and_changes_nothing),
        T(delete_replicas_removes_the_first_n),
        T(replicas_failed_recreates_the_pod_under_a_new_name),
        T(replicas_failed_unknown_pod_is_404_and_changes_nothing),
        T(replicas_failed_with_remove_policy_drops_the_address),
        T(replicas_failed_matches_local_addresses_by_host_or_address),
        T(replicas_failed_rejects_bad_bodies),
        T(other_methods_are_501_and_unknown_paths_plain_404),
        T(control_learner_lists_change_what_get_returns),
        T(control_collector_lists_change_what_get_returns),
        T(control_rejects_bad_requests_naming_the_problem),
        T(fault_error_status_applies_count_times_then_stops),
        T(fault_path_and_method_filters_select_requests),
        T(fault_garbage_answers_200_with_a_body_that_is_not_json),
        T(fault_delay_answers_late_without_blocking_the_loop),
        T(fault_refuse_closes_the_api_port_until_cleared),
        T(fault_refuse_drops_delayed_requests),
        T(fault_specs_are_checked_and_listed),
        T(journal_records_every_api_request_in_order),
        cmocka_unit_test(journal_keeps_the_newest_entries_up_to_its_limit),
        T(hc_client_reads_the_learner_list_as_the_aggregator_does),
        cmocka_unit_test(usage_errors_exit_2_naming_the_flag),
        cmocka_unit_test(help_lists_every_flag_and_version_prints_it),
        T(busy_port_fails_with_exit_1_naming_the_port),
        cmocka_unit_test(sigint_exits_0),
        cmocka_unit_test(same_seed_invents_the_same_names),
    };
    int rc = cmocka_run_group_tests_name("mock_operator", tests, NULL, NULL);
    kill_leftovers();
    curl_global_cleanup();
    return rc;
}
