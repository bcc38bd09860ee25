/* End-to-end tests of mock_learner: each test runs the real executable
 * (fork/exec, its ready line read with a cap), drives it with a master of the
 * interaction library on this process's loop, and ends it with SIGTERM,
 * expecting exit 0 (crash tests expect 3). No fixed ports (the learners bind
 * port 0 and report theirs), every wait has a cap, and teardown kills a
 * child that is still running, so that none is left behind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "hc.h"
#include "ilog.h"
#include "jsonx.h"
#include "master.h"
#include "proto.h"
#include "testutil.h"
#include "xalloc.h"
#include "wrapexec.h"
#include "util.h"

#ifndef MOCK_LEARNER_PATH
#error "MOCK_LEARNER_PATH must name the mock_learner executable"
#endif

#define READY_CAP_MS 10000
#define EXIT_CAP_MS 5000
#define TASK_CAP_MS 10000
#define MAX_ARGS 64

/* ---- the child process ---- */

typedef struct {
    pid_t pid;       /* 0: none (or reaped) */
    int status;      /* wait status once reaped */
    int control_port;
    int n;           /* learners */
    int *ports;
    char ids[8][32]; /* of the first 8 learners */
    char ready[1 << 16];
} proc;

/* Reaps the child if it has exited; true once it is gone. */
static bool proc_reap(proc *p)
{
    if (p->pid <= 0)
        return true;
    int st;
    pid_t r = waitpid(p->pid, &st, WNOHANG);
    if (r == p->pid) {
        p->status = st;
        p->pid = 0;
        return true;
    }
    return false;
}

static pid_t spawn(const char *const *args, int *out_fd, int *err_fd)
{
    int po[2], pe[2] = {-1, -1};
    if (pipe2(po, O_CLOEXEC) < 0)
        return -1;
    if (err_fd && pipe2(pe, O_CLOEXEC) < 0)
        return -1;
    const char *argv[MAX_ARGS + 2];
    size_t n = 0;
    argv[n++] = MOCK_LEARNER_PATH;
    for (; args[n - 1] && n <= MAX_ARGS; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(po[1], 1);
        if (err_fd)
            dup2(pe[1], 2);
        wrap_execv(MOCK_LEARNER_PATH, (char *const *)argv);
        _exit(127);
    }
    close(po[1]);
    *out_fd = po[0];
    if (err_fd) {
        close(pe[1]);
        *err_fd = pe[0];
    }
    return pid;
}

/* Reads fd until EOF or cap_ms; returns what was read (heap). */
static char *read_all(int fd, long cap_ms)
{
    xbuf b = {0};
    uint64_t end = ev_now_ms() + (uint64_t)cap_ms;
    for (;;) {
        uint64_t now = ev_now_ms();
        if (now >= end)
            break;
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, (int)(end - now)) <= 0)
            continue;
        char buf[4096];
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0)
            break;
        xbuf_append(&b, buf, (size_t)r);
    }
    xbuf_append(&b, "", 0);
    return xbuf_take(&b);
}

/* Starts mock_learner with args (NULL-terminated) and reads its ready line.
 * False if it did not come within the cap (the child is then killed). */
static bool proc_start(proc *p, const char *const *args)
{
    memset(p, 0, sizeof *p);
    int out;
    p->pid = spawn(args, &out, NULL);
    assert_true(p->pid > 0);
    size_t len = 0;
    uint64_t end = ev_now_ms() + READY_CAP_MS;
    bool line = false;
    while (!line) {
        uint64_t now = ev_now_ms();
        if (now >= end)
            break;
        struct pollfd pf = {out, POLLIN, 0};
        if (poll(&pf, 1, (int)(end - now)) <= 0)
            continue;
        ssize_t r = read(out, p->ready + len, sizeof p->ready - 1 - len);
        if (r <= 0)
            break; /* the child closed stdout: it died */
        len += (size_t)r;
        p->ready[len] = '\0';
        line = strchr(p->ready, '\n') != NULL || len == sizeof p->ready - 1;
    }
    close(out);
    if (!line) {
        print_error("mock_learner gave no ready line (got '%s')\n", p->ready);
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &p->status, 0);
        p->pid = 0;
        return false;
    }
    cJSON *j = jsonx_parse(p->ready, strlen(p->ready), NULL, 0);
    assert_non_null(j);
    assert_true(cJSON_IsTrue(jsonx_get(j, "ready")));
    int64_t v;
    assert_true(jsonx_get_i64(jsonx_get(j, "control_port"), &v));
    p->control_port = (int)v;
    const cJSON *ls = jsonx_get(j, "learners");
    p->n = cJSON_GetArraySize(ls);
    p->ports = xcalloc((size_t)p->n + 1, sizeof *p->ports);
    int k = 0;
    long base = 0; /* --id-base: learner k is learner<base + k> */
    for (const cJSON *it = ls->child; it; it = it->next, k++) {
        char want[32];
        const char *id = jsonx_get_str(it, "id");
        if (k == 0 && id && strncmp(id, "learner", 7) == 0)
            base = strtol(id + 7, NULL, 10);
        snprintf(want, sizeof want, "learner%ld", base + k);
        if (id && strncmp(id, "learner", 7) == 0)
            assert_string_equal(id, want);
        if (k < 8)
            snprintf(p->ids[k], sizeof p->ids[k], "%s", id ? id : "");
        assert_true(jsonx_get_i64(jsonx_get(it, "port"), &v));
        p->ports[k] = (int)v;
    }
    cJSON_Delete(j);
    return true;
}

static void proc_free(proc *p)
{
    if (p->pid > 0) {
        kill(p->pid, SIGKILL);
        waitpid(p->pid, &p->status, 0);
        p->pid = 0;
    }
    free(p->ports);
    p->ports = NULL;
}

/* ---- fixture: a master on this loop, a client for the control API ---- */

typedef struct {
    ev_loop *loop;
    hc_client *client;
    master *m;
    proc p;
    int lost;
    char lost_why[512];
    char dump_path[64];
} fx;

static void on_lost(void *ud, master_conn *c, const char *why)
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
    master_config mc;
    master_config_init(&mc);
    mc.heartbeat_tolerance_ms = wrap_slow_ms(600); /* a checker slows the learners down */
    mc.heartbeat_check_ms = 50;
    mc.task_deadline_ms = 5000;
    mc.retries = 1;
    mc.retry_wait_ms = 50;
    mc.connect_timeout_ms = wrap_slow_ms(1000); /* caps: longer under valgrind */
    mc.request_timeout_ms = wrap_slow_ms(3000);
    master_callbacks cb = {.on_lost = on_lost};
    char err[256];
    f->m = master_new(f->loop, &mc, &cb, f, err, sizeof err);
    assert_non_null(f->m);
    snprintf(f->dump_path, sizeof f->dump_path, "/tmp/test_mock_learner_dump_XXXXXX");
    int fd = mkstemp(f->dump_path);
    assert_true(fd >= 0);
    close(fd);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    master_free(f->m);
    proc_free(&f->p);
    hc_free(f->client);
    ev_loop_free(f->loop);
    unlink(f->dump_path);
    free(f);
    return 0;
}

/* Runs mock_learner with --count n, fast heartbeats, quiet logs, and args. */
static void start(fx *f, int n, ...)
{
    const char *args[MAX_ARGS + 1];
    size_t k = 0;
    static char count[16];
    snprintf(count, sizeof count, "%d", n);
    args[k++] = "--count";
    args[k++] = count;
    args[k++] = "--heartbeat-span-ms";
    args[k++] = "100";
    args[k++] = "--log-level";
    args[k++] = "warn";
    va_list ap;
    va_start(ap, n);
    for (const char *a; (a = va_arg(ap, const char *)) != NULL && k < MAX_ARGS;)
        args[k++] = a;
    va_end(ap);
    args[k] = NULL;
    assert_true(proc_start(&f->p, args));
    assert_int_equal(f->p.n, n);
}

static bool child_gone(void *d)
{
    return proc_reap(&((fx *)d)->p);
}

/* Waits (driving the loop) for the child to exit; returns its exit code, or
 * -1 (killed by a signal or still running after the cap). */
static int wait_exit(fx *f, long cap_ms)
{
    if (!tu_run_until_pred(f->loop, child_gone, f, cap_ms))
        return -1;
    return WIFEXITED(f->p.status) ? WEXITSTATUS(f->p.status) : -1;
}

/* SIGTERM, then a clean exit 0 within the cap. */
static void stop_clean(fx *f)
{
    assert_true(f->p.pid > 0);
    kill(f->p.pid, SIGTERM);
    assert_int_equal(wait_exit(f, EXIT_CAP_MS), 0);
}

/* ---- connections and tasks ---- */

typedef struct {
    int done;
    bool ok;
    char error[512];
} conn_out;

static void on_connected(void *ud, master_conn *c, bool ok, const char *error)
{
    conn_out *o = ud;
    (void)c;
    o->done = 1;
    o->ok = ok;
    snprintf(o->error, sizeof o->error, "%s", error ? error : "");
}

/* Connects to learner k; returns the conn, or NULL with the error in o. */
static master_conn *try_connect(fx *f, int k, conn_out *o)
{
    char name[32], err[256];
    snprintf(name, sizeof name, "learner%d", k);
    memset(o, 0, sizeof *o);
    master_conn *c = master_connect(f->m, name, "127.0.0.1", f->p.ports[k], NULL, on_connected, o, err, sizeof err);
    assert_non_null(c);
    assert_true(tu_run_until(f->loop, &o->done, TASK_CAP_MS));
    return o->ok ? master_find(f->m, name) : NULL;
}

static master_conn *connect_learner(fx *f, int k)
{
    conn_out o;
    master_conn *c = try_connect(f, k, &o);
    if (!c)
        print_error("connect to learner%d: %s\n", k, o.error);
    assert_non_null(c);
    return c;
}




static void send_task(master_conn *c, const char *data, long deadline_ms, tu_task_out *o)
{
    char err[256];
    memset(o, 0, sizeof *o);
    master_task *t = master_task_send(c, xstrdup(data), strlen(data), deadline_ms, tu_task_done, o, err, sizeof err);
    if (!t)
        print_error("task not sent: %s\n", err);
    assert_non_null(t);
}

/* Sends a task and waits for its end (deadline_ms 0: the master's 5 s). */
static void run_task(fx *f, master_conn *c, const char *data, long deadline_ms, tu_task_out *o)
{
    send_task(c, data, deadline_ms, o);
    assert_true(tu_run_until(f->loop, &o->done, TASK_CAP_MS));
}

static void expect_completed(fx *f, master_conn *c, const char *data, const char *result)
{
    tu_task_out o;
    run_task(f, c, data, 0, &o);
    bool ok = o.state == TASK_COMPLETED && (!result || (o.result && strcmp(o.result, result) == 0));
    if (!ok)
        print_error("task %s: state %s, result %s, error %s\n", data, proto_task_state_name(o.state),
                    o.result ? o.result : "-", o.error ? o.error : "-");
    tu_task_out_free(&o); /* before asserting: a failure does not leak */
    assert_true(ok);
}

/* ---- control API ---- */

static tu_reply ctl(fx *f, const char *method, const char *path, const char *body)
{
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d%s", f->p.control_port, path);
    return tu_http(f->loop, f->client, method, url, NULL, -1, body);
}

static void ctl_ok(fx *f, const char *method, const char *path, const char *body)
{
    tu_reply r = ctl(f, method, path, body);
    if (r.status != 200)
        print_error("%s %s: %ld %s\n", method, path, r.status, r.body ? r.body : r.error);
    assert_int_equal(r.status, 200);
    tu_reply_free(&r);
}

/* The /state object of learner k (caller frees). */
static cJSON *learner_state(fx *f, int k)
{
    tu_reply r = ctl(f, "GET", "/state", NULL);
    assert_int_equal(r.status, 200);
    cJSON *j = jsonx_parse(r.body, strlen(r.body), NULL, 0);
    assert_non_null(j);
    cJSON *l = cJSON_DetachItemFromArray(jsonx_get(j, "learners"), k);
    assert_non_null(l);
    cJSON_Delete(j);
    tu_reply_free(&r);
    return l;
}

static int64_t state_int(fx *f, int k, const char *key)
{
    cJSON *s = learner_state(f, k);
    int64_t v = -1;
    assert_true(jsonx_get_i64(jsonx_get(s, key), &v));
    cJSON_Delete(s);
    return v;
}

static bool state_bool(fx *f, int k, const char *key)
{
    cJSON *s = learner_state(f, k);
    bool v = cJSON_IsTrue(jsonx_get(s, key));
    cJSON_Delete(s);
    return v;
}

typedef struct {
    fx *f;
    int k;
    const char *key;
    bool want;
} state_wait;

static bool state_is(void *d)
{
    state_wait *w = d;
    return state_bool(w->f, w->k, w->key) == w->want;
}

static bool wait_state(fx *f, int k, const char *key, bool want, long cap_ms)
{
    state_wait w = {f, k, key, want};
    return tu_run_until_pred(f->loop, state_is, &w, cap_ms);
}

/* ---- tests: tasks ---- */

typedef struct {
    fx *f;
    int k;
    int64_t n;
} hb_wait;

static bool heartbeats_reach(void *d)
{
    hb_wait *w = d;
    return state_int(w->f, w->k, "heartbeats") >= w->n;
}

#define START_TASK "{\"name\": \"learner_start_task\", \"task_info\": {\"task_id\": \"t0\", \"buffer_id\": \"b0\", " \
                   "\"policy_id\": \"p0\"}}"

static void every_task_name_is_answered_like_the_reference_learner(void **state)
{
    fx *f = *state;
    start(f, 2, "--batch-size", "4", NULL);
    master_conn *c = connect_learner(f, 1);
    expect_completed(f, c, "{\"name\": \"resource\"}", "{\"gpu\":1}");
    expect_completed(f, c, START_TASK, "{\"message\":\"learner task has started\"}");
    expect_completed(f, c, "{\"name\": \"learner_get_data_task\"}",
                     "{\"batch_size\":4,\"cur_learner_iter\":0,\"task_id\":\"t0\",\"buffer_id\":\"b0\"}");
    expect_completed(f, c, "{\"name\": \"learner_learn_task\", \"data\": [0, 1, 2, 3]}",
                     "{\"info\":{\"learner_step\":0,\"priority\":[2.0,2.001,2.002,2.003],\"learner_done\":false,"
                     "\"cur_lr\":0.001,\"total_loss\":1.01,\"learner_id\":\"learner1\"},\"task_id\":\"t0\","
                     "\"buffer_id\":\"b0\"}");
    expect_completed(f, c, "{\"name\": \"learner_get_data_task\"}",
                     "{\"batch_size\":4,\"cur_learner_iter\":1,\"task_id\":\"t0\",\"buffer_id\":\"b0\"}");
    /* the step advances and the loss depends on it */
    expect_completed(f, c, "{\"name\": \"learner_learn_task\", \"data\": [4, 5, 6, 7]}",
                     "{\"info\":{\"learner_step\":1,\"priority\":[2.0,2.001,2.002,2.003],\"learner_done\":false,"
                     "\"cur_lr\":0.001,\"total_loss\":0.505,\"learner_id\":\"learner1\"},\"task_id\":\"t0\","
                     "\"buffer_id\":\"b0\"}");
    expect_completed(f, c, "{\"name\": \"learner_close_task\"}", "{\"task_id\":\"t0\",\"buffer_id\":\"b0\"}");
    tu_task_out o;
    run_task(f, c, "{\"name\": \"fake_task\", \"task_info\": {}}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_null(o.error); /* the learner's own report */
    assert_string_equal(o.result, "{\"message\":\"task name error\"}");
    tu_task_out_free(&o);
    cJSON *s = learner_state(f, 1);
    char *tasks = jsonx_print(jsonx_get(s, "tasks"));
    assert_string_equal(tasks, "{\"resource\":1,\"learner_start_task\":1,\"learner_get_data_task\":2,"
                               "\"learner_learn_task\":2,\"learner_close_task\":1,\"fake_task\":1}");
    free(tasks);
    int64_t v;
    assert_true(jsonx_get_i64(jsonx_get(s, "learn_items"), &v));
    assert_int_equal(v, 8);
    assert_true(jsonx_get_i64(jsonx_get(s, "learner_iter"), &v));
    assert_int_equal(v, 2);
    assert_true(cJSON_IsTrue(jsonx_get(s, "connected")));
    assert_true(cJSON_IsNull(jsonx_get(s, "current_task")));
    cJSON_Delete(s);
    /* heartbeats every 100 ms are counted */
    hb_wait w = {f, 1, 3};
    assert_true(tu_run_until_pred(f->loop, heartbeats_reach, &w, 5000));
    stop_clean(f);
}

static void learn_slice_of_wrong_length_or_type_fails_clearly(void **state)
{
    fx *f = *state;
    start(f, 3, "--batch-sizes", "8,3,5", NULL);
    master_conn *c = connect_learner(f, 2);
    expect_completed(f, c, "{\"name\": \"learner_get_data_task\"}",
                     "{\"batch_size\":5,\"cur_learner_iter\":0,\"task_id\":null,\"buffer_id\":null}");
    tu_task_out o;
    run_task(f, c, "{\"name\": \"learner_learn_task\", \"data\": [1, 2, 3, 4]}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_string_equal(o.result, "{\"message\":\"learner2: learn data has 4 items, expected batch size 5\"}");
    tu_task_out_free(&o);
    run_task(f, c, "{\"name\": \"learner_learn_task\", \"data\": \"12345\"}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_string_equal(o.result, "{\"message\":\"learner2: learn data must be a list of 5 items, got a string\"}");
    tu_task_out_free(&o);
    run_task(f, c, "{\"name\": \"learner_learn_task\"}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.result, "learner2: learn task has no \\\"data\\\""));
    tu_task_out_free(&o);
    /* failed learns do not advance the step */
    assert_int_equal(state_int(f, 2, "learner_iter"), 0);
    master_conn *c1 = connect_learner(f, 1);
    expect_completed(f, c1, "{\"name\": \"learner_get_data_task\"}",
                     "{\"batch_size\":3,\"cur_learner_iter\":0,\"task_id\":null,\"buffer_id\":null}");
    stop_clean(f);
}

static char *read_file(const char *path)
{
    char *t = util_read_file(path, (size_t)64 << 20, NULL, NULL);
    assert_non_null(t);
    return t;
}

/* Takes the protocol task ids out of the dump text ("task_id": "<uuid>", at
 * the top of each line) so that it can be compared; ids[k] gets the id of
 * line k ("" if it has none). */
static void strip_task_ids(char *text, char ids[][40], size_t max)
{
    static const char key[] = "\"task_id\": \"";
    size_t line = 0;
    char *out = text;
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p + 1) : strlen(p);
        char *k = strstr(p, key);
        if (line < max)
            ids[line][0] = '\0';
        if (k && k < p + len) {
            char *v = k + sizeof key - 1, *q = strchr(v, '"');
            assert_non_null(q);
            assert_int_equal(q - v, 36); /* a uuid */
            if (line < max)
                snprintf(ids[line], 40, "%.*s", (int)(q - v), v);
            q += 3; /* '", ' */
            memmove(out, p, (size_t)(k - p));
            out += k - p;
            memmove(out, q, (size_t)(p + len - q));
            out += p + len - q;
        } else {
            memmove(out, p, len);
            out += len;
        }
        p += len;
        line++;
    }
    *out = '\0';
}

static void dump_records_every_item_and_result_exactly(void **state)
{
    fx *f = *state;
    start(f, 1, "--batch-size", "4", "--dump", f->dump_path, NULL);
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    /* items keep their exact text: spacing, number tokens, escapes; a
     * newline between tokens becomes a space */
    expect_completed(f, c,
                     "{\"name\": \"learner_learn_task\", \"data\": [1e3 , {\"a\":  [1,2.50]},\n"
                     "\"s\\u00e9\\n\", {\"b\":\n 9007199254740993}]}",
                     NULL);
    tu_task_out o;
    run_task(f, c, "{\"name\": \"learner_learn_task\", \"data\": [true]}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    tu_task_out_free(&o);
    stop_clean(f);
    char *got = read_file(f->dump_path);
    char ids[9][40];
    strip_task_ids(got, ids, 9);
    /* each line names its task; the lines of one task name the same one */
    for (int k = 0; k < 8; k++)
        assert_int_equal(strlen(ids[k]), 36);
    for (int k = 2; k <= 5; k++)
        assert_string_equal(ids[k], ids[1]);
    assert_string_equal(ids[7], ids[6]);
    assert_string_not_equal(ids[0], ids[1]);
    assert_string_not_equal(ids[1], ids[6]);
    const char *want =
        "{\"learner\": \"learner0\", \"task\": \"resource\", \"report\": \"complete\", \"result\": {\"gpu\":1}}\n"
        "{\"learner\": \"learner0\", \"learn\": 1, \"index\": 0, \"item\": 1e3}\n"
        "{\"learner\": \"learner0\", \"learn\": 1, \"index\": 1, \"item\": {\"a\":  [1,2.50]}}\n"
        "{\"learner\": \"learner0\", \"learn\": 1, \"index\": 2, \"item\": \"s\\u00e9\\n\"}\n"
        "{\"learner\": \"learner0\", \"learn\": 1, \"index\": 3, \"item\": {\"b\":  9007199254740993}}\n"
        "{\"learner\": \"learner0\", \"task\": \"learner_learn_task\", \"learn\": 1, \"report\": \"complete\", \"result\": "
        "{\"info\":{\"learner_step\":0,\"priority\":[1.0,1.001,1.002,1.003],\"learner_done\":false,"
        "\"cur_lr\":0.001,\"total_loss\":1.0,\"learner_id\":\"learner0\"},\"task_id\":null,\"buffer_id\":null}}\n"
        "{\"learner\": \"learner0\", \"learn\": 2, \"index\": 0, \"item\": true}\n"
        "{\"learner\": \"learner0\", \"task\": \"learner_learn_task\", \"learn\": 2, \"report\": \"fail\", \"result\": "
        "{\"message\":\"learner0: learn data has 1 items, expected batch size 4\"}}\n";
    assert_string_equal(got, want);
    free(got);
}

static void dump_of_a_good_learn_has_its_result_line(void **state)
{
    fx *f = *state;
    start(f, 1, "--batch-size", "2", "--dump", f->dump_path, NULL);
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"learner_learn_task\", \"data\": [\"x\", \"y\"]}", NULL);
    stop_clean(f);
    char *got = read_file(f->dump_path);
    char ids[3][40];
    strip_task_ids(got, ids, 3);
    assert_string_equal(ids[1], ids[0]);
    assert_string_equal(ids[2], ids[0]);
    const char *want =
        "{\"learner\": \"learner0\", \"learn\": 1, \"index\": 0, \"item\": \"x\"}\n"
        "{\"learner\": \"learner0\", \"learn\": 1, \"index\": 1, \"item\": \"y\"}\n"
        "{\"learner\": \"learner0\", \"task\": \"learner_learn_task\", \"learn\": 1, \"report\": \"complete\", \"result\": "
        "{\"info\":{\"learner_step\":0,\"priority\":[1.0,1.001],\"learner_done\":false,\"cur_lr\":0.001,"
        "\"total_loss\":1.0,\"learner_id\":\"learner0\"},\"task_id\":null,\"buffer_id\":null}}\n";
    assert_string_equal(got, want);
    free(got);
}

/* ---- tests: faults on the wire ---- */

static void error_status_fault_ends_the_task_start_failed_with_that_status(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"kind\": \"error_status\", \"task\": \"resource\"}", NULL);
    master_conn *c = connect_learner(f, 0);
    tu_task_out o;
    run_task(f, c, "{\"name\": \"resource\"}", 0, &o);
    assert_int_equal(o.state, TASK_START_FAILED);
    /* by default a code DI-engine's error table knows: 602 with its status */
    if (!o.error || !strstr(o.error, "learner0: /task/new answered HTTP 403, code 602: Task refused. (learner0: "
                                     "injected error_status, HTTP 403)"))
        print_error("error: %s\n", o.error ? o.error : "(none)");
    assert_non_null(strstr(o.error, "learner0: /task/new answered HTTP 403, code 602: Task refused. (learner0: "
                                    "injected error_status, HTTP 403)"));
    tu_task_out_free(&o);
    /* other names are not affected, and the slot is free */
    expect_completed(f, c, "{\"name\": \"learner_close_task\"}", NULL);
    ctl_ok(f, "POST", "/fault", "{\"kind\": \"error_status\", \"status\": 503, \"task\": \"close\"}");
    run_task(f, c, "{\"name\": \"learner_close_task\"}", 0, &o);
    assert_int_equal(o.state, TASK_START_FAILED);
    assert_non_null(strstr(o.error, "HTTP 503, code 602"));
    tu_task_out_free(&o);
    /* any code of the protocol, with its own HTTP status */
    ctl_ok(f, "DELETE", "/fault", NULL);
    ctl_ok(f, "POST", "/fault", "{\"kind\": \"error_status\", \"code\": 601}");
    run_task(f, c, "{\"name\": \"learner_close_task\"}", 0, &o);
    assert_int_equal(o.state, TASK_START_FAILED);
    assert_non_null(strstr(o.error, "HTTP 400, code 601: Already has a task."));
    tu_task_out_free(&o);
    stop_clean(f);
}

static void hang_fault_accepts_then_never_reports_so_the_deadline_fails_it(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"kind\": \"hang\", \"task\": \"resource\"}", NULL);
    master_conn *c = connect_learner(f, 0);
    tu_task_out o;
    run_task(f, c, "{\"name\": \"resource\"}", 300, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "learner0: no result within the task deadline of 300 ms"));
    tu_task_out_free(&o);
    assert_true(state_bool(f, 0, "hung"));
    /* still busy with the hung task: a new one is refused with 601 */
    run_task(f, c, "{\"name\": \"learner_close_task\"}", 0, &o);
    assert_int_equal(o.state, TASK_START_FAILED);
    assert_non_null(strstr(o.error, "code 601"));
    tu_task_out_free(&o);
    stop_clean(f);
}

static void no_heartbeat_fault_makes_the_master_lose_the_connection(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"kind\": \"no_heartbeat\", \"task\": \"learner_learn_task\"}", "--fault",
          "{\"kind\": \"delay\", \"ms\": 20000, \"task\": \"learner_learn_task\"}", NULL);
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    tu_run_for(f->loop, wrap_slow_ms(800)); /* longer than the tolerance: heartbeats keep it */
    assert_int_equal(f->lost, 0);
    tu_task_out o;
    run_task(f, c, "{\"name\": \"learner_learn_task\", \"data\": []}", 30000, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "no heartbeat"));
    assert_int_equal(f->lost, 1);
    tu_task_out_free(&o);
    assert_true(state_bool(f, 0, "heartbeats_paused"));
    /* DELETE /fault lifts the pause; the learner is then taken back */
    ctl_ok(f, "DELETE", "/fault", NULL);
    assert_false(state_bool(f, 0, "heartbeats_paused"));
    assert_true(wait_state(f, 0, "connected", false, 5000)); /* it notices its master dropped it */
    c = connect_learner(f, 0);
    tu_run_for(f->loop, 800);
    assert_int_equal(f->lost, 1);
    stop_clean(f);
}

static void crash_before_fault_exits_3_and_the_task_cannot_start(void **state)
{
    fx *f = *state;
    start(f, 2, "--fault", "{\"kind\": \"crash\", \"task\": \"resource\", \"learner\": 1}", NULL);
    master_conn *c0 = connect_learner(f, 0);
    master_conn *c1 = connect_learner(f, 1);
    expect_completed(f, c0, "{\"name\": \"resource\"}", NULL);
    tu_task_out o;
    run_task(f, c1, "{\"name\": \"resource\"}", 0, &o);
    assert_int_equal(o.state, TASK_START_FAILED);
    assert_non_null(strstr(o.error, "learner1: /task/new failed"));
    tu_task_out_free(&o);
    assert_int_equal(wait_exit(f, EXIT_CAP_MS), 3);
}

static void crash_during_fault_exits_3_after_accepting_so_the_task_fails(void **state)
{
    fx *f = *state;
    start(f, 1, "--learn-time-ms", "200", "--fault",
          "{\"kind\": \"crash\", \"when\": \"during\", \"task\": \"learner_learn_task\"}", NULL);
    master_conn *c = connect_learner(f, 0);
    tu_task_out o;
    send_task(c, "{\"name\": \"learner_learn_task\", \"data\": [1, 2, 3, 4, 5, 6, 7, 8]}", 0, &o);
    assert_int_equal(wait_exit(f, EXIT_CAP_MS), 3);
    assert_true(tu_run_until(f->loop, &o.done, TASK_CAP_MS));
    assert_int_equal(o.state, TASK_FAILED); /* accepted first: not START_FAILED */
    assert_non_null(strstr(o.error, "learner0"));
    assert_non_null(strstr(o.error, "no heartbeat"));
    tu_task_out_free(&o);
}

static void malformed_report_fails_the_task_with_the_master_message(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"kind\": \"malformed\", \"at\": 2}", NULL);
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    tu_task_out o;
    run_task(f, c, "{\"name\": \"resource\"}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "learner0: sent a malformed report to /slave/task/complete"));
    tu_task_out_free(&o);
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    assert_int_equal(f->lost, 0);
    stop_clean(f);
}

static void truncated_report_fails_the_task_when_the_body_is_cut_off(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"kind\": \"truncated\", \"task\": \"resource\"}", NULL);
    master_conn *c = connect_learner(f, 0);
    tu_task_out o;
    run_task(f, c, "{\"name\": \"resource\"}", 1500, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(o.error);
    assert_non_null(strstr(o.error, "learner0: report to /slave/task/complete was cut off"));
    tu_task_out_free(&o);
    /* the learner goes on */
    expect_completed(f, c, "{\"name\": \"learner_close_task\"}", NULL);
    stop_clean(f);
}

static void drop_loses_the_connection_then_the_learner_takes_a_new_one(void **state)
{
    fx *f = *state;
    start(f, 2, NULL);
    master_conn *c = connect_learner(f, 0);
    connect_learner(f, 1);
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    char back[64]; /* longer than the heartbeat tolerance, which a checker stretches */
    snprintf(back, sizeof back, "{\"back_after_ms\": %ld}", wrap_slow_ms(1500));
    ctl_ok(f, "POST", "/learner/0/drop", back);
    assert_false(state_bool(f, 0, "listening"));
    int *lost = &f->lost;
    assert_true(tu_run_until(f->loop, lost, 5000));
    assert_non_null(strstr(f->lost_why, "no heartbeat"));
    assert_null(master_find(f->m, "learner0"));
    conn_out co;
    assert_null(try_connect(f, 0, &co)); /* refused while dropped */
    assert_non_null(strstr(co.error, "cannot connect"));
    assert_true(wait_state(f, 0, "listening", true, 5000));
    c = connect_learner(f, 0); /* same port */
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    assert_int_equal(state_int(f, 0, "connects"), 2);
    assert_int_equal(f->lost, 1); /* learner1 was never affected */
    /* drop on a task: accepted, then gone; back later */
    ctl_ok(f, "POST", "/fault", "{\"kind\": \"drop\", \"task\": \"learner_close_task\", \"back_after_ms\": 300}");
    tu_task_out o;
    run_task(f, c, "{\"name\": \"learner_close_task\"}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "no heartbeat"));
    tu_task_out_free(&o);
    assert_true(wait_state(f, 0, "listening", true, 5000));
    connect_learner(f, 0);
    stop_clean(f);
}

static void slow_join_learner_refuses_then_accepts(void **state)
{
    fx *f = *state;
    start(f, 2, "--fault", "{\"learner\": \"learner1\", \"kind\": \"slow_join\", \"after_ms\": 1000}", NULL);
    connect_learner(f, 0);
    conn_out co;
    assert_null(try_connect(f, 1, &co));
    assert_non_null(strstr(co.error, "learner1: cannot connect"));
    assert_false(state_bool(f, 1, "listening"));
    assert_true(wait_state(f, 1, "listening", true, 5000));
    master_conn *c = connect_learner(f, 1);
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    stop_clean(f);
}

static void refuse_fault_keeps_the_port_closed_until_resumed(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"learner\": 0, \"kind\": \"refuse\"}", NULL);
    conn_out co;
    assert_null(try_connect(f, 0, &co));
    tu_run_for(f->loop, 300);
    assert_null(try_connect(f, 0, &co));
    ctl_ok(f, "POST", "/learner/learner0/resume", NULL);
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"resource\"}", NULL);
    /* at run time: stops listening until resumed */
    ctl_ok(f, "POST", "/learner/0/refuse", NULL);
    assert_false(state_bool(f, 0, "listening"));
    master_drop(c, "refused");
    assert_null(try_connect(f, 0, &co));
    assert_non_null(strstr(co.error, "cannot connect"));
    stop_clean(f);
}

static void fail_fault_fires_only_at_the_kth_task_of_its_learner(void **state)
{
    fx *f = *state;
    start(f, 2, "--fault", "{\"learner\": \"learner0\", \"kind\": \"fail\", \"task\": \"resource\", \"at\": 2}", NULL);
    master_conn *c0 = connect_learner(f, 0);
    master_conn *c1 = connect_learner(f, 1);
    expect_completed(f, c0, "{\"name\": \"resource\"}", "{\"gpu\":1}");
    expect_completed(f, c0, "{\"name\": \"learner_close_task\"}", NULL); /* other names do not count */
    expect_completed(f, c1, "{\"name\": \"resource\"}", NULL);
    expect_completed(f, c1, "{\"name\": \"resource\"}", NULL); /* other learners are not affected */
    tu_task_out o;
    run_task(f, c0, "{\"name\": \"resource\"}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_null(o.error);
    assert_string_equal(o.result, "{\"message\":\"injected failure\"}");
    tu_task_out_free(&o);
    expect_completed(f, c0, "{\"name\": \"resource\"}", "{\"gpu\":1}");
    tu_reply r = ctl(f, "GET", "/fault", NULL);
    assert_non_null(strstr(r.body, "\"fired\":1"));
    tu_reply_free(&r);
    stop_clean(f);
}

/* "at": 2, "times": 3: the 2nd, 3rd and 4th matching task fail, the later
 * ones succeed (fail N times, then succeed); short task names count. */
static void times_fault_fires_on_a_run_of_tasks_then_lets_them_pass(void **state)
{
    fx *f = *state;
    start(f, 2, "--fault", "{\"learner\": 0, \"kind\": \"fail\", \"task\": \"close\", \"at\": 2, \"times\": 3}",
          NULL);
    master_conn *c0 = connect_learner(f, 0);
    master_conn *c1 = connect_learner(f, 1);
    char pattern[8];
    for (int i = 0; i < 7; i++) {
        tu_task_out o;
        run_task(f, c0, "{\"name\": \"learner_close_task\"}", 0, &o);
        pattern[i] = o.state == TASK_COMPLETED ? 'C' : o.state == TASK_FAILED ? 'F' : '?';
        tu_task_out_free(&o);
        if (i == 2) /* other names do not count */
            expect_completed(f, c0, "{\"name\": \"resource\"}", "{\"gpu\":1}");
    }
    pattern[7] = '\0';
    assert_string_equal(pattern, "CFFFCCC");
    expect_completed(f, c1, "{\"name\": \"learner_close_task\"}", NULL); /* learner 1 is not affected */
    expect_completed(f, c1, "{\"name\": \"learner_close_task\"}", NULL);
    tu_reply r = ctl(f, "GET", "/fault", NULL);
    assert_non_null(strstr(r.body, "\"at\":2,\"times\":3,\"fired\":3"));
    tu_reply_free(&r);
    /* times without at: the first n */
    ctl_ok(f, "POST", "/fault", "{\"learner\": 1, \"kind\": \"fail\", \"task\": \"resource\", \"times\": 2, "
                                "\"optional\": true}");
    for (int i = 0; i < 4; i++) {
        tu_task_out o;
        run_task(f, c1, "{\"name\": \"resource\"}", 0, &o);
        pattern[i] = o.state == TASK_COMPLETED ? 'C' : o.state == TASK_FAILED ? 'F' : '?';
        tu_task_out_free(&o);
    }
    pattern[4] = '\0';
    assert_string_equal(pattern, "FFCC");
    stop_clean(f);
}

/* 'C' for each completed task, 'F' for each failed one. */
static void prob_pattern(fx *f, const char *seed, char *out, int n)
{
    start(f, 1, "--seed", seed, "--fault", "{\"kind\": \"fail\", \"task\": \"resource\", \"prob\": 0.5}", NULL);
    master_conn *c = connect_learner(f, 0);
    for (int i = 0; i < n; i++) {
        tu_task_out o;
        run_task(f, c, "{\"name\": \"resource\"}", 0, &o);
        out[i] = o.state == TASK_COMPLETED ? 'C' : o.state == TASK_FAILED ? 'F' : '?';
        tu_task_out_free(&o);
    }
    out[n] = '\0';
    master_disconnect(c, "next run");
    stop_clean(f);
    proc_free(&f->p);
}

static void prob_faults_repeat_with_the_same_seed(void **state)
{
    fx *f = *state;
    char a[33], b[33], c[33];
    prob_pattern(f, "42", a, 32);
    prob_pattern(f, "42", b, 32);
    prob_pattern(f, "7", c, 32);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_non_null(strchr(a, 'C'));
    assert_non_null(strchr(a, 'F'));
    assert_null(strchr(a, '?'));
}

static void die_fault_removes_one_learner_and_the_others_go_on(void **state)
{
    fx *f = *state;
    start(f, 2, NULL);
    master_conn *c0 = connect_learner(f, 0);
    master_conn *c1 = connect_learner(f, 1);
    ctl_ok(f, "POST", "/fault", "{\"learner\": 0, \"kind\": \"die\", \"task\": \"resource\"}");
    tu_task_out o;
    run_task(f, c0, "{\"name\": \"resource\"}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_non_null(strstr(o.error, "learner0"));
    tu_task_out_free(&o);
    expect_completed(f, c1, "{\"name\": \"resource\"}", NULL);
    cJSON *s = learner_state(f, 0);
    assert_string_equal(jsonx_get_str(s, "state"), "dead");
    cJSON_Delete(s);
    conn_out co;
    assert_null(try_connect(f, 0, &co));
    /* a dead learner stays dead when faults are lifted */
    ctl_ok(f, "DELETE", "/fault", NULL);
    assert_null(try_connect(f, 0, &co));
    expect_completed(f, c1, "{\"name\": \"resource\"}", NULL);
    stop_clean(f);
}

static void delay_fault_reports_that_much_later(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"kind\": \"delay\", \"ms\": 400, \"task\": \"resource\"}", NULL);
    master_conn *c = connect_learner(f, 0);
    uint64_t t0 = ev_now_ms();
    expect_completed(f, c, "{\"name\": \"resource\"}", "{\"gpu\":1}");
    assert_true(ev_now_ms() - t0 >= 400);
    t0 = ev_now_ms();
    expect_completed(f, c, "{\"name\": \"learner_close_task\"}", NULL);
    assert_true(ev_now_ms() - t0 < 400);
    stop_clean(f);
}

static void bad_result_fault_gives_shapes_that_cannot_be_merged(void **state)
{
    fx *f = *state;
    start(f, 1, "--batch-size", "1", "--fault", "{\"kind\": \"bad_result\"}", NULL);
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"resource\"}", "[\"injected bad result\"]");
    expect_completed(f, c, "{\"name\": \"learner_get_data_task\"}",
                     "{\"batch_size\":\"1\",\"cur_learner_iter\":0,\"task_id\":null,\"buffer_id\":null}");
    tu_task_out o;
    run_task(f, c, "{\"name\": \"learner_learn_task\", \"data\": [{}]}", 0, &o);
    assert_int_equal(o.state, TASK_COMPLETED);
    const char *want = "{\"info\":[{\"learner_step\":0,";
    if (strncmp(o.result, want, strlen(want)) != 0)
        print_error("learn result: %s\n", o.result);
    assert_true(strncmp(o.result, want, strlen(want)) == 0);
    tu_task_out_free(&o);
    stop_clean(f);
}

static void wrong_batch_fault_reports_one_more_so_the_learn_check_fails(void **state)
{
    fx *f = *state;
    start(f, 1, "--fault", "{\"kind\": \"wrong_batch\", \"at\": 1}", NULL);
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"learner_get_data_task\"}",
                     "{\"batch_size\":9,\"cur_learner_iter\":0,\"task_id\":null,\"buffer_id\":null}");
    tu_task_out o;
    run_task(f, c, "{\"name\": \"learner_learn_task\", \"data\": [1, 2, 3, 4, 5, 6, 7, 8, 9]}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    assert_string_equal(o.result, "{\"message\":\"learner0: learn data has 9 items, expected batch size 8\"}");
    tu_task_out_free(&o);
    expect_completed(f, c, "{\"name\": \"learner_get_data_task\"}",
                     "{\"batch_size\":8,\"cur_learner_iter\":0,\"task_id\":null,\"buffer_id\":null}");
    stop_clean(f);
}

static void learn_time_delays_only_the_learn_tasks_of_that_learner(void **state)
{
    fx *f = *state;
    /* No upper bound on wall-clock time (valgrind makes everything slow):
     * learner1's learn runs at the same time as learner0's learn and must
     * end after it; its time is at least the configured delay. */
    long delay = wrap_slow_ms(1000);
    char times[32];
    snprintf(times, sizeof times, "0,%ld", delay);
    start(f, 2, "--learn-times-ms", times, "--batch-size", "1", NULL);
    master_conn *c0 = connect_learner(f, 0);
    master_conn *c1 = connect_learner(f, 1);
    const char *learn = "{\"name\": \"learner_learn_task\", \"data\": [0]}";
    expect_completed(f, c1, "{\"name\": \"resource\"}", NULL); /* not a learn: not delayed */
    tu_task_out slow, fast;
    uint64_t t0 = ev_now_ms();
    send_task(c1, learn, wrap_slow_ms(10000), &slow);
    send_task(c0, learn, 0, &fast);
    assert_true(tu_run_until(f->loop, &fast.done, TASK_CAP_MS));
    bool ordered = !slow.done;
    assert_true(tu_run_until(f->loop, &slow.done, TASK_CAP_MS));
    uint64_t took = ev_now_ms() - t0;
    bool ok = ordered && fast.state == TASK_COMPLETED && slow.state == TASK_COMPLETED && took >= (uint64_t)delay;
    if (!ok)
        print_error("learner0 %s (%s), learner1 %s after %llu ms (delay %ld ms), learner1 ended first: %s\n",
                    proto_task_state_name(fast.state), fast.error ? fast.error : "-",
                    proto_task_state_name(slow.state), (unsigned long long)took, delay, ordered ? "no" : "yes");
    tu_task_out_free(&slow);
    tu_task_out_free(&fast);
    assert_true(ok);
    stop_clean(f);
}

/* ---- tests: control API and command line ---- */

static void expect_ctl(fx *f, const char *method, const char *path, const char *body, long status,
                       const char *fragment)
{
    tu_reply r = ctl(f, method, path, body);
    if (r.status != status || !r.body || !strstr(r.body, fragment))
        print_error("%s %s %s: got %ld %s, want %ld with '%s'\n", method, path, body ? body : "", r.status,
                    r.body ? r.body : r.error, status, fragment);
    assert_int_equal(r.status, status);
    assert_non_null(strstr(r.body, fragment));
    tu_reply_free(&r);
}

/* --id-base: learner k is learner<base+k> everywhere (ready line, results,
 * dump), and a fault or a control request names it by that id or by its
 * index. */
static void id_base_numbers_the_learners_from_the_base(void **state)
{
    fx *f = *state;
    start(f, 2, "--id-base", "7", "--batch-size", "1", "--dump", f->dump_path, "--fault",
          "{\"learner\": \"learner8\", \"kind\": \"fail\", \"task\": \"resource\", \"at\": 1}", NULL);
    assert_string_equal(f->p.ids[0], "learner7");
    assert_string_equal(f->p.ids[1], "learner8");
    master_conn *c0 = connect_learner(f, 0);
    master_conn *c1 = connect_learner(f, 1);
    expect_completed(f, c0, "{\"name\": \"resource\"}", "{\"gpu\":1}");
    tu_task_out o;
    run_task(f, c1, "{\"name\": \"resource\"}", 0, &o);
    assert_int_equal(o.state, TASK_FAILED);
    tu_task_out_free(&o);
    run_task(f, c1, "{\"name\": \"learner_learn_task\", \"data\": [1]}", 0, &o);
    assert_int_equal(o.state, TASK_COMPLETED);
    assert_non_null(strstr(o.result, "\"learner_id\":\"learner8\""));
    tu_task_out_free(&o);
    /* the control API takes the id (and the index) */
    ctl_ok(f, "POST", "/learner/learner8/no_heartbeat", NULL);
    ctl_ok(f, "POST", "/learner/1/resume", NULL);
    expect_ctl(f, "POST", "/learner/learner9/resume", NULL, 404, "does not exist");
    expect_ctl(f, "POST", "/fault", "{\"learner\": \"learner6\", \"kind\": \"fail\"}", 400, "learner7..learner8");
    stop_clean(f);
    char *got = read_file(f->dump_path);
    assert_non_null(strstr(got, "{\"learner\": \"learner7\", "));
    assert_non_null(strstr(got, "{\"learner\": \"learner8\", "));
    assert_null(strstr(got, "\"learner0\""));
    free(got);
}

/* ---- tests: who may connect (--allow-master) ---- */

/* POST /connect to learner k at host (an address literal) naming
 * master_address in the body. */
static tu_reply raw_connect(fx *f, const char *host, int k, const char *master_address)
{
    char url[128], body[300];
    snprintf(url, sizeof url, strchr(host, ':') ? "http://[%s]:%d/connect" : "http://%s:%d/connect", host,
             f->p.ports[k]);
    snprintf(body, sizeof body, "{\"master\": {\"address\": \"%s\"}, \"data\": {}}", master_address);
    return tu_http(f->loop, f->client, "POST", url, "some-token", 0, body);
}

static void expect_refused(tu_reply *r, const char *names)
{
    if (r->status != 403 || r->code != 503 || !r->message || !strstr(r->message, names))
        print_error("got %ld %s, want 403 code 503 naming %s\n", r->status, r->body ? r->body : r->error, names);
    assert_int_equal(r->status, 403);
    assert_int_equal(r->code, 503);
    assert_int_equal(r->success, 0);
    assert_non_null(strstr(r->message, names));
    assert_non_null(strstr(r->message, "is not allowed to be this slave's master"));
}

static void allow_master_refuses_a_connect_from_a_peer_outside_the_list(void **state)
{
    fx *f = *state;
    start(f, 1, "--allow-master", "192.0.2.0/24", "--allow-master", "2001:db8::/32", NULL);
    tu_reply r = raw_connect(f, "127.0.0.1", 0, "http://192.0.2.1:1");
    expect_refused(&r, "the peer address 127.0.0.1");
    tu_reply_free(&r);
    /* the master library sees the refusal as a final answer */
    conn_out o;
    assert_null(try_connect(f, 0, &o));
    assert_non_null(strstr(o.error, "403"));
    assert_non_null(strstr(o.error, "127.0.0.1"));
    cJSON *st = learner_state(f, 0);
    assert_false(cJSON_IsTrue(jsonx_get(st, "connected")));
    cJSON_Delete(st);
    stop_clean(f);
}

static void allow_master_refuses_a_master_address_outside_the_list(void **state)
{
    fx *f = *state;
    start(f, 1, "--allow-master", "127.0.0.0/8", NULL);
    tu_reply r = raw_connect(f, "127.0.0.1", 0, "http://10.9.8.7:1234");
    expect_refused(&r, "the master address host 10.9.8.7");
    tu_reply_free(&r);
    r = raw_connect(f, "127.0.0.1", 0, "http://[2001:db8::5]:1234/");
    expect_refused(&r, "the master address host 2001:db8::5");
    tu_reply_free(&r);
    /* a name is not resolved, so it is not in any list */
    r = raw_connect(f, "127.0.0.1", 0, "http://localhost:1234");
    expect_refused(&r, "the master address host localhost");
    tu_reply_free(&r);
    /* a master within the list connects and works as before */
    master_conn *c = connect_learner(f, 0);
    expect_completed(f, c, "{\"name\": \"resource\"}", "{\"gpu\":1}");
    stop_clean(f);
}

static bool ipv6_loopback_works(void)
{
    int fd = socket(AF_INET6, SOCK_STREAM, 0);
    struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    bool ok = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

static void allow_master_matches_ipv6_peers(void **state)
{
    fx *f = *state;
    if (!ipv6_loopback_works())
        skip();
    start(f, 2, "--host", "::1", "--allow-master", "::1/128,127.0.0.1", NULL);
    /* from ::1, naming an address outside the list: refused by the second check */
    tu_reply r = raw_connect(f, "::1", 0, "http://[2001:db8::1]:9");
    expect_refused(&r, "the master address host 2001:db8::1");
    tu_reply_free(&r);
    /* from ::1, naming ::1: accepted (its heartbeats then fail: nothing listens) */
    r = raw_connect(f, "::1", 1, "http://[::1]:9");
    if (r.status != 200)
        print_error("got %ld %s\n", r.status, r.body ? r.body : r.error);
    assert_int_equal(r.status, 200);
    tu_reply_free(&r);
    stop_clean(f);
    proc_free(&f->p);
    start(f, 1, "--host", "::1", "--allow-master", "127.0.0.0/8", NULL);
    r = raw_connect(f, "::1", 0, "http://127.0.0.1:9");
    expect_refused(&r, "the peer address ::1");
    tu_reply_free(&r);
    stop_clean(f);
}

static void control_api_rejects_bad_input_naming_the_problem(void **state)
{
    fx *f = *state;
    start(f, 2, NULL);
    expect_ctl(f, "POST", "/fault", "{\"kind\": ", 400, "not valid JSON");
    expect_ctl(f, "POST", "/fault", "", 400, "the body is empty");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"explode\"}", 400, "kind: unknown kind 'explode' (known: slow_join,");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"fail\", \"atx\": 1}", 400,
               "atx: unknown key for kind fail (did you mean 'at'?)");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"fail\", \"learner\": 2}", 400, "learner: 2 is out of range 0..1");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"fail\", \"learner\": \"learner7\"}", 400, "names no learner");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"fail\", \"prob\": 2}", 400, "prob: must be a number in 0..1");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"fail\", \"at\": 0}", 400, "at: must be an integer in 1..1000000000, not 0");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"crash\", \"when\": \"later\"}", 400, "when: must be");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"error_status\", \"status\": 200}", 400, "status: must be");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"wrong_batch\", \"task\": \"resource\"}", 400,
               "wrong_batch applies to learner_get_data_task only");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"slow_join\"}", 400, "slow_join works only with --fault");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"refuse\", \"task\": \"resource\"}", 400,
               "task: kind refuse takes no task trigger");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"crsh\"}", 400, "kind: unknown kind 'crsh' (did you mean 'crash'?)");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"crash\", \"wehn\": \"during\"}", 400,
               "wehn: unknown key for kind crash (did you mean 'when'?)");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"crash\", \"task\": \"learner_learn_tsak\"}", 400,
               "task: unknown task 'learner_learn_tsak' (did you mean 'learner_learn_task'?)");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"fail\", \"times\": 0}", 400, "times: must be an integer");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"fail\", \"optional\": \"yes\"}", 400,
               "optional: must be true or false");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"error_status\", \"code\": 500}", 400,
               "code: must be a code a slave answers with (101, 201, 202, 301, 302, 401, 402, 501, 502, 503, 504, "
               "601, 602), not 500");
    expect_ctl(f, "POST", "/fault", "{\"kind\": \"delay\", \"when\": \"before\"}", 400,
               "when: not a key of kind delay but of crash");
    expect_ctl(f, "POST", "/fault", "[{\"kind\": \"fail\"}, {\"kind\": \"nope\"}]", 400, "fault 2 of the list");
    expect_ctl(f, "GET", "/fault", NULL, 200, "{\"faults\":[]}"); /* a bad list adds nothing */
    expect_ctl(f, "POST", "/fault", "[]", 400, "the list of faults is empty");
    expect_ctl(f, "POST", "/learner/5/drop", "{}", 404, "learner '5' does not exist");
    expect_ctl(f, "POST", "/learner/0/explode", "{}", 404, "no action 'explode'");
    expect_ctl(f, "POST", "/learner/0/drop", "{\"task\": \"resource\"}", 400, "acts at once");
    expect_ctl(f, "POST", "/learner/0/drop", "{\"times\": 2}", 400, "acts at once");
    expect_ctl(f, "POST", "/learner/0/drop", "{\"back_after_ms\": -5}", 400, "back_after_ms: must be");
    expect_ctl(f, "GET", "/learner/0/drop", NULL, 405, "use POST");
    expect_ctl(f, "PUT", "/state", NULL, 405, "use GET");
    expect_ctl(f, "GET", "/nope", NULL, 404, "no endpoint GET /nope");
    expect_ctl(f, "DELETE", "/fault/99", NULL, 404, "no fault has id 99");
    expect_ctl(f, "DELETE", "/fault/x", NULL, 400, "not a positive integer");
    /* good ones */
    expect_ctl(f, "POST", "/fault", "[{\"kind\": \"fail\", \"task\": \"x\"}, {\"kind\": \"delay\", \"ms\": 1}]", 200,
               "\"ids\":[1,2]");
    expect_ctl(f, "DELETE", "/fault/1", NULL, 200, "\"ok\":true");
    expect_ctl(f, "GET", "/fault", NULL, 200, "\"id\":2,\"kind\":\"delay\",\"ms\":1,\"fired\":0");
    expect_ctl(f, "DELETE", "/fault", NULL, 200, "\"cleared\":1");
    expect_ctl(f, "GET", "/state", NULL, 200, "\"faults\":0");
    stop_clean(f);
}

typedef struct {
    int code;
    char *out;
    char *err;
} run_result;

/* Runs mock_learner to its end (it must end by itself) and captures both
 * streams. */
static run_result run_to_end(const char *const *args)
{
    run_result rr = {0};
    int out, err;
    pid_t pid = spawn(args, &out, &err);
    assert_true(pid > 0);
    rr.out = read_all(out, EXIT_CAP_MS);
    rr.err = read_all(err, EXIT_CAP_MS);
    close(out);
    close(err);
    int st = 0;
    uint64_t end = ev_now_ms() + EXIT_CAP_MS;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (ev_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            fail_msg("mock_learner did not end by itself");
        }
        poll(NULL, 0, 10);
    }
    rr.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return rr;
}

static void run_result_free(run_result *rr)
{
    free(rr->out);
    free(rr->err);
}

static void expect_usage_error(const char *const *args, const char *fragment)
{
    run_result rr = run_to_end(args);
    if (rr.code != 2 || !strstr(rr.err, fragment))
        print_error("args %s...: exit %d, stderr '%s', want 2 and '%s'\n", args[0] ? args[0] : "", rr.code, rr.err,
                    fragment);
    assert_int_equal(rr.code, 2);
    assert_non_null(strstr(rr.err, fragment));
    assert_string_equal(rr.out, "");
    run_result_free(&rr);
}

static void usage_errors_exit_2_naming_the_flag(void **state)
{
    (void)state;
    expect_usage_error((const char *[]){NULL}, "--count is required");
    expect_usage_error((const char *[]){"--count", "abc", NULL}, "--count: 'abc' is not an integer");
    expect_usage_error((const char *[]){"--count", "0", NULL}, "--count: 0 is out of range");
    expect_usage_error((const char *[]){"--count", "2", "--base-port", "65535", NULL}, "--base-port: 65535 + 2");
    expect_usage_error((const char *[]){"--count", "2", "--batch-sizes", "1,2,3", NULL},
                       "--batch-sizes: 3 values for --count 2");
    expect_usage_error((const char *[]){"--count", "2", "--batch-sizes", "1,,3", NULL}, "--batch-sizes: item 2");
    expect_usage_error((const char *[]){"--count", "2", "--batch-size", "2", "--batch-sizes", "1,3", NULL},
                       "exclude each other");
    expect_usage_error((const char *[]){"--count", "1", "--id-prefix", "a b", NULL}, "--id-prefix");
    expect_usage_error((const char *[]){"--count", "1", "--log-level", "loud", NULL}, "--log-level");
    expect_usage_error((const char *[]){"--count", "1", "--allow-master", "10.0.0.0/33", NULL},
                       "--allow-master: '10.0.0.0/33': the prefix must be a number from 0 to 32 for an IPv4 address");
    expect_usage_error((const char *[]){"--count", "1", "--allow-master", "coordinator.svc", NULL},
                       "--allow-master: 'coordinator.svc' is not an IPv4 or IPv6 address");
    expect_usage_error((const char *[]){"--count", "1", "--allow-master", "", NULL}, "--allow-master: '': an empty entry");
    expect_usage_error((const char *[]){"--count", "1", "--id-base", "-1", NULL}, "--id-base: -1 is out of range");
    expect_usage_error((const char *[]){"--count", "1", "--frobnicate", NULL}, "unknown flag '--frobnicate'");
    expect_usage_error((const char *[]){"--count", "1", "--seed", NULL}, "--seed: a value is missing");
    expect_usage_error((const char *[]){"--count", "1", "extra", NULL}, "unexpected argument 'extra'");
    expect_usage_error((const char *[]){"--count", "1", "--fault", "{\"kind\": \"hang\"", NULL},
                       "--fault '{\"kind\": \"hang\"': not valid JSON");
    expect_usage_error((const char *[]){"--count", "1", "--fault", "{\"kind\": \"hang\", \"learner\": 1}", NULL},
                       "learner: 1 is out of range 0..0");
}

static void port_in_use_exits_1_naming_the_learner(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(fd, 1), 0); /* a listener: SO_REUSEADDR cannot share it */
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    char ps[16];
    snprintf(ps, sizeof ps, "%d", ntohs(sa.sin_port));
    run_result rr = run_to_end((const char *[]){"--count", "1", "--base-port", ps, NULL});
    close(fd);
    if (rr.code != 1 || !strstr(rr.err, "[learner0] cannot start: cannot bind 127.0.0.1:"))
        print_error("exit %d, stderr %s\n", rr.code, rr.err);
    assert_int_equal(rr.code, 1);
    assert_non_null(strstr(rr.err, "[learner0] cannot start: cannot bind 127.0.0.1:"));
    assert_non_null(strstr(rr.err, "Address already in use"));
    assert_string_equal(rr.out, ""); /* no ready line */
    run_result_free(&rr);
}

static void help_lists_every_flag_and_fault_kind(void **state)
{
    (void)state;
    run_result rr = run_to_end((const char *[]){"--help", NULL});
    assert_int_equal(rr.code, 0);
    const char *flags[] = {"--count", "--base-port", "--host", "--batch-size", "--batch-sizes", "--learn-time-ms",
                           "--learn-times-ms", "--control-port", "--channel", "--heartbeat-span-ms", "--id-prefix", "--id-base", "--allow-master",
                           "--dump", "--seed", "--fault", "--log-level", "--log-format", "--help", "--version"};
    for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "  %s ", flags[i]);
        if (!strstr(rr.out, needle))
            print_error("--help does not list %s\n", flags[i]);
        assert_non_null(strstr(rr.out, needle));
    }
    const char *members[] = {"\"learner\"", "\"task\"", "\"at\"", "\"times\"", "\"prob\"", "\"optional\""};
    for (size_t i = 0; i < sizeof members / sizeof members[0]; i++)
        assert_non_null(strstr(rr.out, members[i]));
    const char *kinds[] = {"slow_join", "refuse", "fail", "crash", "die", "hang", "delay", "error_status",
                           "malformed", "truncated", "no_heartbeat", "drop", "bad_result", "wrong_batch"};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        char needle[64];
        snprintf(needle, sizeof needle, "\n  %s ", kinds[i]);
        assert_non_null(strstr(rr.out, needle));
    }
    run_result_free(&rr);
    rr = run_to_end((const char *[]){"--version", NULL});
    assert_int_equal(rr.code, 0);
    assert_true(strncmp(rr.out, "mock_learner ", 13) == 0);
    run_result_free(&rr);
}

/* A port P such that P and P+1 could be bound just now. */
static int two_free_ports(void)
{
    for (int tries = 0; tries < 50; tries++) {
        int a = socket(AF_INET, SOCK_STREAM, 0), b = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof sa;
        int port = 0;
        if (bind(a, (struct sockaddr *)&sa, sizeof sa) == 0 && getsockname(a, (struct sockaddr *)&sa, &sl) == 0) {
            port = ntohs(sa.sin_port);
            sa.sin_port = htons((uint16_t)(port + 1));
            if (port >= 65535 || bind(b, (struct sockaddr *)&sa, sizeof sa) != 0)
                port = 0;
        }
        close(a);
        close(b);
        if (port)
            return port;
    }
    return 0;
}

static void base_port_puts_learner_k_on_port_p_plus_k(void **state)
{
    fx *f = *state;
    int p = two_free_ports();
    assert_true(p > 0);
    char ps[16];
    snprintf(ps, sizeof ps, "%d", p);
    start(f, 2, "--base-port", ps, "--id-prefix", "lrn", NULL);
    assert_int_equal(f->p.ports[0], p);
    assert_int_equal(f->p.ports[1], p + 1);
    assert_non_null(strstr(f->p.ready, "{\"id\": \"lrn1\", \"port\": "));
    master_conn *c = connect_learner(f, 1);
    tu_task_out o;
    run_task(f, c, "{\"name\": \"learner_learn_task\", \"data\": []}", 0, &o);
    assert_string_equal(o.result, "{\"message\":\"lrn1: learn data has 0 items, expected batch size 8\"}");
    tu_task_out_free(&o);
    ctl_ok(f, "POST", "/learner/lrn1/no_heartbeat", NULL);
    assert_true(state_bool(f, 1, "heartbeats_paused"));
    stop_clean(f);
}

#define MANY 200

typedef struct {
    int connected, failed, done, ok;
} many_count;

static void many_connected(void *ud, master_conn *c, bool ok, const char *e)
{
    many_count *m = ud;
    (void)c;
    (void)e;
    if (ok)
        m->connected++;
    else
        m->failed++;
}

static bool many_all_connected(void *d)
{
    many_count *m = d;
    return m->connected + m->failed == MANY;
}

static void many_task_done(void *ud, master_task *t, proto_task_state st, cJSON **result, const char *error)
{
    many_count *m = ud;
    (void)t;
    (void)result;
    (void)error;
    m->done++;
    m->ok += st == TASK_COMPLETED;
}

static bool many_all_done(void *d)
{
    return ((many_count *)d)->done == MANY;
}

static void two_hundred_learners_in_one_process_all_connect_and_work(void **state)
{
    fx *f = *state;
    /* A load test: under a checker (ci/valgrind.sh) 200 learners in one
     * process cannot keep the 600 ms heartbeat tolerance; the plain and
     * sanitizer runs keep it. */
    if (getenv("DILEARN_WRAPPER"))
        skip();
    start(f, MANY, "--batch-size", "2", NULL);
    many_count m = {0};
    char err[256];
    uint64_t t0 = ev_now_ms();
    for (int k = 0; k < MANY; k++) {
        char name[32];
        snprintf(name, sizeof name, "learner%d", k);
        assert_non_null(
            master_connect(f->m, name, "127.0.0.1", f->p.ports[k], NULL, many_connected, &m, err, sizeof err));
    }
    assert_true(tu_run_until_pred(f->loop, many_all_connected, &m, 20000));
    assert_int_equal(m.connected, MANY);
    for (int k = 0; k < MANY; k++) {
        const char *d = "{\"name\": \"learner_learn_task\", \"data\": [1, 2]}";
        assert_non_null(master_task_send(master_conn_at(f->m, (size_t)k), xstrdup(d), strlen(d), 0, many_task_done,
                                         &m, err, sizeof err));
    }
    assert_true(tu_run_until_pred(f->loop, many_all_done, &m, 20000));
    assert_int_equal(m.ok, MANY);
    print_message("200 learners connected and learned once in %llu ms\n",
                  (unsigned long long)(ev_now_ms() - t0));
    tu_run_for(f->loop, 300); /* heartbeats from all of them keep them */
    assert_int_equal(f->lost, 0);
    assert_int_equal(state_int(f, MANY - 1, "learner_iter"), 1);
    stop_clean(f);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    ilog_init("test_mock_learner", ILOG_WARN, ILOG_HUMAN);
#define T(name) cmocka_unit_test_setup_teardown(name, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(every_task_name_is_answered_like_the_reference_learner),
        T(learn_slice_of_wrong_length_or_type_fails_clearly),
        T(dump_records_every_item_and_result_exactly),
        T(dump_of_a_good_learn_has_its_result_line),
        T(error_status_fault_ends_the_task_start_failed_with_that_status),
        T(times_fault_fires_on_a_run_of_tasks_then_lets_them_pass),
        T(hang_fault_accepts_then_never_reports_so_the_deadline_fails_it),
        T(no_heartbeat_fault_makes_the_master_lose_the_connection),
        T(crash_before_fault_exits_3_and_the_task_cannot_start),
        T(crash_during_fault_exits_3_after_accepting_so_the_task_fails),
        T(malformed_report_fails_the_task_with_the_master_message),
        T(truncated_report_fails_the_task_when_the_body_is_cut_off),
        T(drop_loses_the_connection_then_the_learner_takes_a_new_one),
        T(slow_join_learner_refuses_then_accepts),
        T(refuse_fault_keeps_the_port_closed_until_resumed),
        T(fail_fault_fires_only_at_the_kth_task_of_its_learner),
        T(id_base_numbers_the_learners_from_the_base),
        T(allow_master_refuses_a_connect_from_a_peer_outside_the_list),
        T(allow_master_refuses_a_master_address_outside_the_list),
        T(allow_master_matches_ipv6_peers),
        T(prob_faults_repeat_with_the_same_seed),
        T(die_fault_removes_one_learner_and_the_others_go_on),
        T(delay_fault_reports_that_much_later),
        T(bad_result_fault_gives_shapes_that_cannot_be_merged),
        T(wrong_batch_fault_reports_one_more_so_the_learn_check_fails),
        T(learn_time_delays_only_the_learn_tasks_of_that_learner),
        T(control_api_rejects_bad_input_naming_the_problem),
        T(usage_errors_exit_2_naming_the_flag),
        T(port_in_use_exits_1_naming_the_learner),
        T(help_lists_every_flag_and_fault_kind),
        T(base_port_puts_learner_k_on_port_p_plus_k),
        T(two_hundred_learners_in_one_process_all_connect_and_work),
    };
#undef T
    return cmocka_run_group_tests_name("mock_learner", tests, NULL, NULL);
}
