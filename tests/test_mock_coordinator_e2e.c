/* End-to-end tests of mock_coordinator: the real executable (MC_BIN) runs
 * against a small learner built here with slave.h, in a forked child on its
 * own ev loop. The child plays one learner, or a fake aggregator over
 * several virtual learners (it splits the learn data itself, writes their
 * dump lines, and merges their results by hand for the shapes it makes),
 * with knobs to misbehave. When MOCK_LEARNER_BIN is defined, one test runs
 * against the real mock_learner too.
 *
 * Every wait is capped; children die with the test (PR_SET_PDEATHSIG) and are
 * reaped; ports are picked by the kernel. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ev.h"
#include "ilog.h"
#include "jsonx.h"
#include "slave.h"
#include "xalloc.h"
#include "wrapexec.h"

#ifndef MC_BIN
#error "MC_BIN must name the mock_coordinator executable"
#endif

/* ---- child processes ---- */

typedef struct {
    pid_t pid;
    int pidfd;
    int out_fd, err_fd;
    xbuf out, err;
    int status;
    bool exited;
} proc;

static int pidfd_open_(pid_t pid)
{
    return (int)syscall(SYS_pidfd_open, pid, 0);
}

static void proc_start(proc *p, char *const argv[])
{
    memset(p, 0, sizeof *p);
    int o[2], e[2];
    assert_int_equal(pipe2(o, O_CLOEXEC), 0);
    assert_int_equal(pipe2(e, O_CLOEXEC), 0);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(o[1], 1);
        dup2(e[1], 2);
        wrap_execv(argv[0], argv);
        _exit(127);
    }
    close(o[1]);
    close(e[1]);
    p->out_fd = o[0];
    p->err_fd = e[0];
    p->pidfd = pidfd_open_(p->pid);
    assert_true(p->pidfd >= 0);
}

static bool has(const xbuf *b, const char *needle)
{
    return b->data && memmem(b->data, b->len, needle, strlen(needle));
}

/* Reads output and watches for the exit until the process has exited and
 * both pipes are at their end, or (with a needle) until the needle shows up
 * in stderr / stdout, or until cap_ms. Returns true if the condition was
 * met. */
static bool proc_pump2(proc *p, long cap_ms, const char *err_needle, const char *out_needle)
{
    uint64_t end = ev_now_ms() + (uint64_t)cap_ms;
    bool wait_exit = !err_needle && !out_needle;
    for (;;) {
        if ((err_needle && has(&p->err, err_needle)) || (out_needle && has(&p->out, out_needle)))
            return true;
        if (wait_exit && p->exited && p->out_fd < 0 && p->err_fd < 0)
            return true;
        uint64_t now = ev_now_ms();
        if (now >= end)
            return false;
        struct pollfd fds[3];
        int n = 0;
        int io = -1, ie = -1, ip = -1;
        if (p->out_fd >= 0)
            io = n, fds[n++] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
        if (p->err_fd >= 0)
            ie = n, fds[n++] = (struct pollfd){.fd = p->err_fd, .events = POLLIN};
        if (!p->exited)
            ip = n, fds[n++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
        if (n == 0)
            return wait_exit;
        int rc = poll(fds, (nfds_t)n, (int)(end - now));
        if (rc < 0 && errno != EINTR)
            return false;
        char buf[65536];
        if (io >= 0 && fds[io].revents) {
            ssize_t k = read(p->out_fd, buf, sizeof buf);
            if (k > 0)
                xbuf_append(&p->out, buf, (size_t)k);
            else {
                close(p->out_fd);
                p->out_fd = -1;
            }
        }
        if (ie >= 0 && fds[ie].revents) {
            ssize_t k = read(p->err_fd, buf, sizeof buf);
            if (k > 0) {
                xbuf_append(&p->err, buf, (size_t)k);
            } else {
                close(p->err_fd);
                p->err_fd = -1;
            }
        }
        if (ip >= 0 && fds[ip].revents) {
            if (waitpid(p->pid, &p->status, 0) == p->pid)
                p->exited = true;
        }
    }
}

static bool proc_pump(proc *p, long cap_ms, const char *err_needle)
{
    return proc_pump2(p, cap_ms, err_needle, NULL);
}

static void proc_kill(proc *p)
{
    if (!p->exited) {
        kill(p->pid, SIGTERM);
        struct pollfd f = {.fd = p->pidfd, .events = POLLIN};
        if (poll(&f, 1, 3000) <= 0)
            kill(p->pid, SIGKILL);
        waitpid(p->pid, &p->status, 0);
        p->exited = true;
    }
}

static void proc_free(proc *p)
{
    proc_kill(p);
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->err_fd >= 0)
        close(p->err_fd);
    close(p->pidfd);
    xbuf_free(&p->out);
    xbuf_free(&p->err);
}

/* Waits for the end (cap 30 s) and returns the exit code, -1 if it did not
 * exit by itself or died of a signal. */
static int proc_wait(proc *p)
{
    bool ok = proc_pump(p, 30000, NULL);
    if (!ok) {
        print_error("process %d did not finish in time; stderr:\n%.*s\n", (int)p->pid, (int)p->err.len,
                    p->err.data ? p->err.data : "");
        proc_kill(p);
        return -1;
    }
    return WIFEXITED(p->status) ? WEXITSTATUS(p->status) : -1;
}

/* ---- the in-test learner (child process) ---- */

typedef struct {
    int nvirtual;           /* 1: a learner; > 1: a fake aggregator */
    int batch_each;         /* per virtual learner */
    const char *fail_task;  /* fail this task with "injected failure" */
    const char *hang_task;  /* never answer it (tells the parent: 'H') */
    bool drop_key;          /* fake aggregator: merged learn result without a_list */
    bool dup_item;          /* dump the first item of a round twice */
    int port;               /* 0: any */
    char dump[128];
} fake_cfg;

typedef struct {
    const fake_cfg *cfg;
    ev_loop *loop;
    slave *s;
    FILE *dump;
    int event_fd;
    char task_id[64];
    cJSON *data;
    int learns, getdatas;
} fake;

static void dump_line(fake *f, const char *learner, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void dump_line(fake *f, const char *learner, const char *kind, const char *fmt, ...)
{
    if (!f->dump)
        return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(f->dump, "{\"learner\": \"%s\", %s", learner, kind);
    vfprintf(f->dump, fmt, ap);
    fputs("}\n", f->dump);
    fflush(f->dump);
    va_end(ap);
}

static void dump_result(fake *f, int v, const char *task, const cJSON *res)
{
    char name[32];
    snprintf(name, sizeof name, "learner%d", v);
    char *t = jsonx_print(res);
    dump_line(f, name, "", "\"task\": \"%s\", \"report\": \"complete\", \"result\": %s", task, t);
    free(t);
}

static cJSON *JP(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static cJSON *JP(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return jsonx_parse(buf, strlen(buf), NULL, 0);
}

static cJSON *do_learn(fake *f, bool *ok)
{
    const fake_cfg *c = f->cfg;
    const cJSON *data = jsonx_get(f->data, "data");
    int n = cJSON_GetArraySize(data), want = c->nvirtual * c->batch_each;
    f->learns++;
    if (!cJSON_IsArray(data) || n != want) {
        *ok = false;
        return JP("{\"message\": \"learn data has %d items, expected batch size %d\"}", n, want);
    }
    cJSON *merged = JP("{\"info\": {\"learner_step\": 0, \"loss\": [], \"big\": []}, \"task_id\": \"t0\", "
                       "\"buffer_id\": \"b0\", \"learner_done\": false, \"a_list\": []}");
    cJSON *single = NULL;
    int i = 0;
    for (const cJSON *it = data->child; it; it = it->next, i++) {
        int v = i / c->batch_each, idx = i % c->batch_each;
        char name[32];
        snprintf(name, sizeof name, "learner%d", v);
        char *t = jsonx_print(it);
        dump_line(f, name, "", "\"learn\": %d, \"index\": %d, \"item\": %s", f->learns, idx, t);
        if (c->dup_item && i == 0)
            dump_line(f, "learner1", "", "\"learn\": %d, \"index\": %d, \"item\": %s", f->learns, c->batch_each, t);
        free(t);
    }
    for (int v = 0; v < c->nvirtual; v++) {
        cJSON *r = JP("{\"info\": {\"learner_step\": %d, \"loss\": 0.%d5, \"big\": 9007199254740993}, "
                      "\"task_id\": \"t%d\", \"buffer_id\": \"b%d\", \"learner_done\": false, \"a_list\": [%d, %d]}",
                      100 * v + f->learns, v, v, v, v, f->learns);
        dump_result(f, v, "learner_learn_task", r);
        cJSON *info = jsonx_get(merged, "info");
        if (v == 0)
            cJSON_ReplaceItemInObjectCaseSensitive(info, "learner_step",
                                                   jsonx_dup(jsonx_get(jsonx_get(r, "info"), "learner_step")));
        cJSON_AddItemToArray(jsonx_get(info, "loss"), jsonx_dup(jsonx_get(jsonx_get(r, "info"), "loss")));
        cJSON_AddItemToArray(jsonx_get(info, "big"), jsonx_dup(jsonx_get(jsonx_get(r, "info"), "big")));
        for (const cJSON *e = jsonx_get(r, "a_list")->child; e; e = e->next)
            cJSON_AddItemToArray(jsonx_get(merged, "a_list"), jsonx_dup(e));
        if (v == 0)
            single = r;
        else
            cJSON_Delete(r);
    }
    *ok = true;
    if (c->nvirtual == 1) {
        cJSON_Delete(merged);
        return single;
    }
    cJSON_Delete(single);
    if (c->drop_key)
        cJSON_DeleteItemFromObjectCaseSensitive(merged, "a_list");
    return merged;
}

static cJSON *do_get_data(fake *f)
{
    const fake_cfg *c = f->cfg;
    f->getdatas++;
    for (int v = 0; v < c->nvirtual; v++) {
        cJSON *r = JP("{\"batch_size\": %d, \"cur_learner_iter\": %d, \"task_id\": \"t%d\", \"buffer_id\": \"b%d\"}",
                      c->batch_each, f->getdatas, v, v);
        dump_result(f, v, "learner_get_data_task", r);
        cJSON_Delete(r);
    }
    return JP("{\"batch_size\": %d, \"cur_learner_iter\": %d, \"task_id\": \"t0\", \"buffer_id\": \"b0\"}",
              c->batch_each * c->nvirtual, f->getdatas);
}

static void on_work(ev_loop *loop, void *data)
{
    (void)loop;
    fake *f = data;
    const char *name = jsonx_get_str(f->data, "name");
    name = name ? name : "";
    const fake_cfg *c = f->cfg;
    cJSON *res = NULL;
    bool ok = true;
    if (c->fail_task && strcmp(name, c->fail_task) == 0) {
        res = JP("{\"message\": \"injected failure\"}");
        ok = false;
    } else if (strcmp(name, "resource") == 0) {
        res = JP("{\"gpu\": %d}", c->nvirtual);
    } else if (strcmp(name, "learner_start_task") == 0) {
        char *t = jsonx_print(jsonx_get(f->data, "task_info"));
        dump_line(f, "fake", "", "\"event\": \"start\", \"task_info\": %s", t);
        free(t);
        res = JP("{\"message\": \"learner task has started\"}");
    } else if (strcmp(name, "learner_get_data_task") == 0) {
        res = do_get_data(f);
    } else if (strcmp(name, "learner_learn_task") == 0) {
        res = do_learn(f, &ok);
    } else if (strcmp(name, "learner_close_task") == 0) {
        res = JP("{\"task_id\": \"t0\", \"buffer_id\": \"b0\"}");
    } else {
        res = JP("{\"message\": \"task name error\"}");
        ok = false;
    }
    if (ok)
        slave_task_complete(f->s, f->task_id, res);
    else
        slave_task_fail(f->s, f->task_id, res);
    cJSON_Delete(f->data);
    f->data = NULL;
}

static void fake_on_task(void *ud, const char *task_id, const cJSON *data, slave_verdict *v)
{
    (void)v;
    fake *f = ud;
    const char *name = jsonx_get_str(data, "name");
    if (f->cfg->hang_task && name && strcmp(name, f->cfg->hang_task) == 0) {
        ssize_t w = write(f->event_fd, "H", 1);
        (void)w;
        return; /* never answered */
    }
    snprintf(f->task_id, sizeof f->task_id, "%s", task_id);
    cJSON_Delete(f->data);
    f->data = jsonx_dup(data);
    ev_timer_start(f->loop, 0, on_work, f);
}

static void fake_on_disconnect(void *ud, const cJSON *data, slave_verdict *v)
{
    (void)data;
    (void)v;
    dump_line(ud, "fake", "", "\"event\": \"disconnect\"");
}

static void fake_on_signal(ev_loop *loop, int signum, void *data)
{
    (void)signum;
    (void)data;
    ev_stop(loop);
}

static void fake_main(const fake_cfg *cfg, int port_fd, int event_fd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    alarm(60); /* a cap, should the parent forget us */
    ilog_init("fake_learner", ILOG_WARN, ILOG_HUMAN);
    fake f = {.cfg = cfg, .event_fd = event_fd};
    f.loop = ev_loop_new();
    ev_signal(f.loop, SIGTERM, fake_on_signal, &f);
    if (cfg->dump[0])
        f.dump = fopen(cfg->dump, "a");
    slave_config sc;
    slave_config_init(&sc);
    sc.name = "fake";
    sc.http.port = cfg->port;
    sc.heartbeat_span_ms = 100;
    sc.allow_fast_heartbeat = true;
    slave_callbacks cbs = {.on_task = fake_on_task, .on_disconnect = fake_on_disconnect};
    char err[256];
    f.s = slave_new(f.loop, &sc, &cbs, &f, err, sizeof err);
    int port = f.s ? slave_port(f.s) : -1;
    if (write(port_fd, &port, sizeof port) != sizeof port || !f.s)
        _exit(3);
    close(port_fd);
    ev_run(f.loop);
    slave_free(f.s);
    cJSON_Delete(f.data);
    if (f.dump)
        fclose(f.dump);
    ev_loop_free(f.loop);
    _exit(0);
}

typedef struct {
    pid_t pid;
    int pidfd;
    int port;
    int event_fd; /* reads 'H' when a hang task arrived */
} fake_proc;

static void fake_start(fake_proc *fp, const fake_cfg *cfg)
{
    int pp[2], ep[2];
    assert_int_equal(pipe2(pp, O_CLOEXEC), 0);
    assert_int_equal(pipe2(ep, O_CLOEXEC), 0);
    fp->pid = fork();
    assert_true(fp->pid >= 0);
    if (fp->pid == 0) {
        close(pp[0]);
        close(ep[0]);
        fake_main(cfg, pp[1], ep[1]);
    }
    close(pp[1]);
    close(ep[1]);
    fp->event_fd = ep[0];
    fp->pidfd = pidfd_open_(fp->pid);
    struct pollfd pf = {.fd = pp[0], .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 10000), 1);
    assert_int_equal(read(pp[0], &fp->port, sizeof fp->port), (ssize_t)sizeof fp->port);
    close(pp[0]);
    assert_true(fp->port > 0);
}

static void fake_stop(fake_proc *fp)
{
    kill(fp->pid, SIGTERM);
    struct pollfd f = {.fd = fp->pidfd, .events = POLLIN};
    if (poll(&f, 1, 5000) <= 0)
        kill(fp->pid, SIGKILL);
    int st;
    waitpid(fp->pid, &st, 0);
    close(fp->pidfd);
    close(fp->event_fd);
}

/* ---- fixture ---- */

typedef struct {
    fake_cfg cfg;
    fake_proc fp;
    bool fake_started;
    proc mc;
    bool mc_started;
    char target[64];
    char script[128];
    cJSON *summary;
} fx;

static int setup(void **state)
{
    fx *x = xcalloc(1, sizeof *x);
    x->cfg.nvirtual = 1;
    x->cfg.batch_each = 4;
    snprintf(x->cfg.dump, sizeof x->cfg.dump, "/tmp/mc_e2e_dump_XXXXXX");
    int fd = mkstemp(x->cfg.dump);
    assert_true(fd >= 0);
    close(fd);
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    fx *x = *state;
    if (x->mc_started)
        proc_free(&x->mc);
    if (x->fake_started)
        fake_stop(&x->fp);
    unlink(x->cfg.dump);
    if (x->script[0])
        unlink(x->script);
    cJSON_Delete(x->summary);
    free(x);
    return 0;
}

static void start_fake(fx *x)
{
    fake_start(&x->fp, &x->cfg);
    x->fake_started = true;
    snprintf(x->target, sizeof x->target, "127.0.0.1:%d", x->fp.port);
}

/* Starts mock_coordinator with the given arguments (NULL-terminated). */
static void start_mc(fx *x, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = MC_BIN;
    va_list ap;
    va_start(ap, x);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 63;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    proc_start(&x->mc, argv);
    x->mc_started = true;
}

/* Waits for mock_coordinator to end; parses the summary; returns the code. */
static int finish_mc(fx *x)
{
    int code = proc_wait(&x->mc);
    xbuf_append(&x->mc.out, "", 0);
    const char *out = x->mc.out.data ? x->mc.out.data : "";
    if (out[0]) {
        /* Exactly one line, one object. */
        const char *nl = strchr(out, '\n');
        assert_non_null(nl);
        assert_int_equal(nl[1], '\0');
        char err[200];
        x->summary = jsonx_parse(out, strlen(out), err, sizeof err);
        if (!x->summary)
            print_error("summary is not JSON (%s): %s\n", err, out);
        assert_non_null(x->summary);
    }
    return code;
}

static void show(fx *x)
{
    print_error("exit; stdout:\n%.*s\nstderr:\n%.*s\n", (int)x->mc.out.len, x->mc.out.data ? x->mc.out.data : "",
                (int)x->mc.err.len, x->mc.err.data ? x->mc.err.data : "");
}

static int expect_exit(fx *x, int want)
{
    int code = finish_mc(x);
    if (code != want)
        show(x);
    assert_int_equal(code, want);
    return code;
}

static const cJSON *task_at(fx *x, int i)
{
    assert_non_null(x->summary);
    return cJSON_GetArrayItem(jsonx_get(x->summary, "tasks"), i);
}

static int task_count(fx *x)
{
    assert_non_null(x->summary);
    return cJSON_GetArraySize(jsonx_get(x->summary, "tasks"));
}

static bool has_failure(fx *x, const char *needle)
{
    if (!x->summary)
        show(x);
    assert_non_null(x->summary);
    for (const cJSON *f = jsonx_get(x->summary, "failures")->child; f; f = f->next)
        if (strstr(f->valuestring, needle))
            return true;
    return false;
}

static void expect_failure(fx *x, const char *needle)
{
    if (!has_failure(x, needle)) {
        show(x);
        print_error("no failure contains: %s\n", needle);
    }
    assert_true(has_failure(x, needle));
}

static void expect_task(fx *x, int i, const char *name, const char *status)
{
    const cJSON *t = task_at(x, i);
    assert_non_null(t);
    assert_string_equal(jsonx_get_str(t, "name"), name);
    if (strcmp(jsonx_get_str(t, "status"), status) != 0)
        show(x);
    assert_string_equal(jsonx_get_str(t, "status"), status);
    assert_true(jsonx_is_number(jsonx_get(t, "latency_ms")));
}

static bool file_contains(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    xbuf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        xbuf_append(&b, buf, n);
    fclose(f);
    xbuf_append(&b, "", 1);
    bool r = strstr(b.data, needle) != NULL;
    xbuf_free(&b);
    return r;
}

static void write_script(fx *x, const char *text)
{
    snprintf(x->script, sizeof x->script, "/tmp/mc_e2e_script_XXXXXX");
    int fd = mkstemp(x->script);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

/* ---- default runs ---- */

static void default_run_against_one_learner_passes_every_check(void **state)
{
    fx *x = *state;
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "2", "--dump", x->cfg.dump, "--expect-learners", "1",
             "--item-size", "2000", "--seed", "42", "--log-level", "warn", NULL);
    expect_exit(x, 0);
    assert_true(cJSON_IsTrue(jsonx_get(x->summary, "ok")));
    assert_string_equal(jsonx_get_str(x->summary, "target"), x->target);
    assert_string_equal(jsonx_get(x->summary, "rounds")->valuestring, "2");
    assert_int_equal(cJSON_GetArraySize(jsonx_get(x->summary, "failures")), 0);
    const char *names[] = {"resource", "learner_start_task", "learner_get_data_task", "learner_learn_task",
                           "learner_get_data_task", "learner_learn_task", "learner_close_task"};
    assert_int_equal(task_count(x), 7);
    for (int i = 0; i < 7; i++)
        expect_task(x, i, names[i], "completed");
    char *r = jsonx_print(jsonx_get(task_at(x, 5), "result"));
    assert_string_equal(r, "{\"info\":{\"learner_step\":2,\"loss\":0.05,\"big\":9007199254740993},\"task_id\":\"t0\","
                           "\"buffer_id\":\"b0\",\"learner_done\":false,\"a_list\":[0,2]}");
    free(r);
    assert_string_equal(jsonx_get_str(task_at(x, 1), "message"), "learner task has started");
    assert_true(cJSON_IsNull(jsonx_get(task_at(x, 0), "message")));
    /* The learner saw the task_info of the protocol. */
    assert_true(file_contains(x->cfg.dump, "\"task_id\":\"mock-task-42\",\"buffer_id\":\"mock-buffer-42\","
                                           "\"policy_id\":\"mock-policy\",\"learner_cfg\":{"));
    /* The run ends with a disconnect that reached the learner. */
    assert_true(file_contains(x->cfg.dump, "{\"learner\": \"fake\", \"event\": \"disconnect\"}"));
}

static void second_run_against_the_same_learner_connects_again(void **state)
{
    fx *x = *state;
    start_fake(x);
    for (int i = 0; i < 2; i++) {
        start_mc(x, "--connect", x->target, "--rounds", "1", "--log-level", "error", NULL);
        expect_exit(x, 0);
        proc_free(&x->mc);
        x->mc_started = false;
        cJSON_Delete(x->summary);
        x->summary = NULL;
    }
}

static void default_run_against_a_fake_aggregator_checks_split_and_merge(void **state)
{
    fx *x = *state;
    x->cfg.nvirtual = 3;
    x->cfg.batch_each = 2;
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "3", "--dump", x->cfg.dump, "--expect-learners", "3",
             "--log-level", "info", NULL);
    expect_exit(x, 0);
    assert_true(cJSON_IsTrue(jsonx_get(x->summary, "ok")));
    char *r = jsonx_print(jsonx_get(task_at(x, 3), "result"));
    assert_string_equal(r, "{\"info\":{\"learner_step\":1,\"loss\":[0.05,0.15,0.25],\"big\":[9007199254740993,"
                           "9007199254740993,9007199254740993]},\"task_id\":\"t0\",\"buffer_id\":\"b0\","
                           "\"learner_done\":false,\"a_list\":[0,1,1,1,2,1]}");
    free(r);
    /* The checks ran: 3 merges and 3 get-data sums. */
    proc_pump(&x->mc, 100, NULL);
    assert_non_null(strstr(x->mc.err.data, "3 learners, 3 learn rounds sent, 3 merges and 3 get-data sums checked"));
}

static void aggregator_that_drops_a_key_fails_the_merge_check(void **state)
{
    fx *x = *state;
    x->cfg.nvirtual = 2;
    x->cfg.drop_key = true;
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "1", "--dump", x->cfg.dump, "--log-level", "error", NULL);
    expect_exit(x, 1);
    assert_true(cJSON_IsFalse(jsonx_get(x->summary, "ok")));
    expect_failure(x, "round 1: the merged learn result differs from the merge of the learners' results (learner "
                      "order learner0, learner1): at a_list: missing (expected [0,1,1,1])");
    assert_int_equal(cJSON_GetArraySize(jsonx_get(x->summary, "failures")), 1);
}

static void item_delivered_twice_fails_the_exactly_once_check(void **state)
{
    fx *x = *state;
    x->cfg.nvirtual = 2;
    x->cfg.dup_item = true;
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "1", "--dump", x->cfg.dump, "--log-level", "error", NULL);
    expect_exit(x, 1);
    expect_failure(x, "item r1-0 reached learners more than once: learner0 learn 1");
}

static void missing_dump_file_fails_the_run(void **state)
{
    fx *x = *state;
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "1", "--dump", "/nonexistent/dump.jsonl", "--log-level", "error",
             NULL);
    expect_exit(x, 1);
    expect_failure(x, "dump /nonexistent/dump.jsonl: cannot open");
}

static void learner_that_fails_a_task_fails_the_run_and_still_gets_the_close(void **state)
{
    fx *x = *state;
    x->cfg.fail_task = "learner_learn_task";
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "2", "--log-level", "error", NULL);
    expect_exit(x, 1);
    expect_failure(x, "tasks[3] learner_learn_task (round 1): failed, expected completed: injected failure");
    /* The run stops at the failure, but the learner is still closed. */
    assert_int_equal(task_count(x), 5);
    expect_task(x, 3, "learner_learn_task", "failed");
    assert_string_equal(jsonx_get_str(task_at(x, 3), "message"), "injected failure");
    expect_task(x, 4, "learner_close_task", "completed");
}

static void wrong_learner_count_fails_the_resource_check(void **state)
{
    fx *x = *state;
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "1", "--expect-learners", "2", "--log-level", "error", NULL);
    expect_exit(x, 1);
    expect_failure(x, "tasks[0] resource: gpu is 1, expected 2 (--expect-learners)");
    assert_int_equal(task_count(x), 2); /* resource, then the close */
}

static void hanging_task_fails_at_its_deadline(void **state)
{
    fx *x = *state;
    x->cfg.hang_task = "learner_get_data_task";
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "1", "--task-deadline-ms", "300", "--log-level", "error", NULL);
    expect_exit(x, 1);
    expect_failure(x, "tasks[2] learner_get_data_task: failed, expected completed: aggregator: no result within the "
                      "task deadline of 300 ms");
    double ms;
    assert_true(jsonx_get_double(jsonx_get(task_at(x, 2), "latency_ms"), &ms));
    assert_in_range((long)ms, 250, 5000);
}

static void sigterm_prints_the_summary_so_far_and_exits_1(void **state)
{
    fx *x = *state;
    x->cfg.hang_task = "learner_learn_task";
    start_fake(x);
    start_mc(x, "--connect", x->target, "--rounds", "2", "--log-level", "error", NULL);
    struct pollfd pf = {.fd = x->fp.event_fd, .events = POLLIN};
    assert_int_equal(poll(&pf, 1, 10000), 1);
    kill(x->mc.pid, SIGTERM);
    expect_exit(x, 1);
    expect_failure(x, "interrupted by SIGTERM while tasks[3] learner_learn_task (round 1) was running");
    assert_int_equal(task_count(x), 4);
    expect_task(x, 2, "learner_get_data_task", "completed");
    expect_task(x, 3, "learner_learn_task", "failed");
}

/* ---- connecting ---- */

static int free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    getsockname(fd, (struct sockaddr *)&a, &al);
    close(fd);
    return ntohs(a.sin_port);
}

static void connect_retries_until_the_target_starts(void **state)
{
    fx *x = *state;
    x->cfg.port = free_port();
    snprintf(x->target, sizeof x->target, "127.0.0.1:%d", x->cfg.port);
    start_mc(x, "--connect", x->target, "--rounds", "1", "--log-level", "debug", NULL);
    /* Start the learner only once the first attempt has failed. */
    assert_true(proc_pump(&x->mc, 10000, "connect attempt 1:"));
    start_fake(x);
    expect_exit(x, 0);
    const char *e = x->mc.err.data;
    const char *m = strstr(e, "connected to 127.0.0.1");
    assert_non_null(m);
    int attempts = 0;
    assert_int_equal(sscanf(strstr(m, " after ") + 7, "%d", &attempts), 1);
    assert_true(attempts >= 2);
}

static void connect_to_nothing_fails_within_the_scaled_window(void **state)
{
    fx *x = *state;
    snprintf(x->target, sizeof x->target, "127.0.0.1:%d", free_port());
    start_mc(x, "--connect", x->target, "--time-scale", "0.05", "--log-level", "error", NULL);
    expect_exit(x, 1);
    expect_failure(x, "as \"aggregator\" failed after");
    expect_failure(x, "cannot connect");
    assert_int_equal(task_count(x), 0);
    /* The window was scaled: the coordinator's own account of it ("... in
     * N ms"; its clock, not this test's, which would count valgrind's start)
     * is far under the unscaled 10 s (scaled: 500 ms). */
    long ms = -1;
    for (const cJSON *f = jsonx_get(x->summary, "failures")->child; f; f = f->next) {
        const char *in = strstr(f->valuestring, " ms: ");
        const char *at = in ? strstr(f->valuestring, " in ") : NULL;
        if (at && at < in)
            ms = strtol(at + 4, NULL, 10);
    }
    if (ms < 0 || ms >= 5000)
        show(x);
    assert_true(ms >= 0 && ms < 5000);
}

/* ---- scripts ---- */

static void script_with_expectations_met_passes(void **state)
{
    fx *x = *state;
    x->cfg.nvirtual = 2;
    x->cfg.batch_each = 3;
    start_fake(x);
    write_script(x, "{\"comment\": \"every expectation holds\", \"tasks\": ["
                    "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 2}, \"latency_ms_max\": 5000}},"
                    "{\"name\": \"learner_start_task\", \"data\": {\"task_info\": {\"task_id\": \"mine\"}},"
                    " \"expect\": {\"message_contains\": \"has started\"}},"
                    "{\"name\": \"learner_get_data_task\", \"expect\": {\"fields\": {\"batch_size\": 6, \"task_id\": \"t0\"}}},"
                    "{\"name\": \"learner_learn_task\", \"expect\": {\"fields\": {\"info.learner_step\": 1,"
                    " \"info.loss\": [0.05, 0.150], \"a_list.2\": 1}}},"
                    "{\"name\": \"learner_learn_task\", \"items\": 5, \"expect\": {\"status\": \"failed\","
                    " \"message_contains\": \"has 5 items, expected batch size 6\"}},"
                    "{\"name\": \"no_such_task\", \"data\": {\"x\": 1}, \"expect\": {\"status\": \"failed\","
                    " \"fields\": {\"message\": \"task name error\"}}},"
                    "{\"name\": \"learner_close_task\"}]}");
    start_mc(x, "--connect", x->target, "--script", x->script, "--dump", x->cfg.dump, "--log-level", "error", NULL);
    expect_exit(x, 0);
    assert_string_equal(jsonx_get(x->summary, "rounds")->valuestring, "2");
    assert_int_equal(task_count(x), 7);
    expect_task(x, 4, "learner_learn_task", "failed");
    expect_task(x, 5, "no_such_task", "failed");
    assert_true(file_contains(x->cfg.dump, "\"task_info\": {\"task_id\":\"mine\"}"));
}

static void script_with_expectations_not_met_reports_each_and_goes_on(void **state)
{
    fx *x = *state;
    start_fake(x);
    write_script(x, "{\"tasks\": ["
                    "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 5}}},"
                    "{\"name\": \"no_such_task\"},"
                    "{\"name\": \"learner_get_data_task\", \"expect\": {\"fields\": {\"info.x\": 1},"
                    " \"message_contains\": \"nothing\"}},"
                    "{\"name\": \"learner_learn_task\", \"expect\": {\"status\": \"start_failed\", \"latency_ms_max\": 0.001}}]}");
    start_mc(x, "--connect", x->target, "--script", x->script, "--log-level", "error", NULL);
    expect_exit(x, 1);
    expect_failure(x, "tasks[0] resource: field gpu is 1, expected 5");
    expect_failure(x, "tasks[1] no_such_task: failed, expected completed: task name error");
    expect_failure(x, "tasks[2] learner_get_data_task: field info.x is missing, expected 1");
    expect_failure(x, "tasks[2] learner_get_data_task: message (none) does not contain \"nothing\"");
    expect_failure(x, "tasks[3] learner_learn_task (round 1): completed, expected start_failed");
    expect_failure(x, "tasks[3] learner_learn_task (round 1): took ");
    assert_int_equal(cJSON_GetArraySize(jsonx_get(x->summary, "failures")), 6);
    assert_int_equal(task_count(x), 4);
}

static void script_stop_on_failure_ends_the_run_at_that_task(void **state)
{
    fx *x = *state;
    start_fake(x);
    write_script(x, "{\"tasks\": [{\"name\": \"no_such_task\", \"stop_on_failure\": true}, {\"name\": \"resource\"}]}");
    start_mc(x, "--connect", x->target, "--script", x->script, "--log-level", "error", NULL);
    expect_exit(x, 1);
    assert_int_equal(task_count(x), 1);
}

static void script_learn_after_a_failed_get_data_is_skipped(void **state)
{
    fx *x = *state;
    x->cfg.fail_task = "learner_get_data_task";
    start_fake(x);
    write_script(x, "{\"tasks\": [{\"name\": \"learner_get_data_task\", \"expect\": {\"status\": \"failed\"}},"
                    " {\"name\": \"learner_learn_task\"}]}");
    start_mc(x, "--connect", x->target, "--script", x->script, "--log-level", "error", NULL);
    expect_exit(x, 1);
    expect_task(x, 1, "learner_learn_task", "skipped");
    expect_failure(x, "tasks[1] learner_learn_task: skipped, expected completed: not sent: no batch_size from the "
                      "last learner_get_data_task");
}

/* ---- usage ---- */

static void usage_errors_exit_2_and_name_the_flag(void **state)
{
    fx *x = *state;
    start_mc(x, "--connect", "127.0.0.1:1", "--rounds", "many", NULL);
    assert_int_equal(finish_mc(x), 2);
    assert_null(x->summary);
    assert_non_null(strstr(x->mc.err.data, "mock_coordinator: --rounds: \"many\" is not an integer"));
}

static void invalid_script_exits_2_before_anything_is_sent(void **state)
{
    fx *x = *state;
    start_fake(x);
    write_script(x, "{\"tasks\": [{\"name\": \"resource\"}, {\"name\": \"x\", \"expect\": {\"status\": \"ok\"}}]}");
    start_mc(x, "--connect", x->target, "--script", x->script, NULL);
    assert_int_equal(finish_mc(x), 2);
    assert_null(x->summary);
    assert_non_null(strstr(x->mc.err.data, x->script));
    assert_non_null(strstr(x->mc.err.data, "tasks[1].expect.status: must be one of"));
    /* Nothing reached the learner: its dump has no line. */
    assert_false(file_contains(x->cfg.dump, "learner"));
}

static void help_lists_every_flag(void **state)
{
    fx *x = *state;
    start_mc(x, "--help", NULL);
    assert_int_equal(proc_wait(&x->mc), 0); /* text, not a summary */
    const char *flags[] = {"--connect", "--rounds", "--script", "--expect-learners", "--dump", "--task-deadline-ms",
                           "--port", "--host", "--channel", "--time-scale", "--seed", "--item-size", "--no-close",
                           "--log-level", "--log-format", "--help", "--version"};
    for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
        assert_non_null(strstr(x->mc.out.data, flags[i]));
}

#ifdef MOCK_LEARNER_BIN
/* ---- against the real mock_learner ---- */

static void default_run_against_one_mock_learner_passes_every_check(void **state)
{
    fx *x = *state;
    char *argv[] = {MOCK_LEARNER_BIN, "--count", "1", "--batch-size", "5", "--dump", x->cfg.dump,
                    "--heartbeat-span-ms", "200", "--log-level", "warn", NULL};
    proc ml;
    proc_start(&ml, argv);
    bool ready = proc_pump2(&ml, 10000, NULL, "\n");
    if (!ready)
        print_error("mock_learner not ready: %.*s\n", (int)ml.err.len, ml.err.data ? ml.err.data : "");
    assert_true(ready);
    cJSON *rl = jsonx_parse(ml.out.data, strlen(ml.out.data), NULL, 0);
    assert_non_null(rl);
    const cJSON *l0 = cJSON_GetArrayItem(jsonx_get(rl, "learners"), 0);
    int64_t port;
    assert_true(jsonx_get_i64(jsonx_get(l0, "port"), &port));
    cJSON_Delete(rl);
    snprintf(x->target, sizeof x->target, "127.0.0.1:%d", (int)port);
    start_mc(x, "--connect", x->target, "--rounds", "3", "--dump", x->cfg.dump, "--expect-learners", "1",
             "--item-size", "300", "--log-level", "info", NULL);
    int code = finish_mc(x);
    if (code != 0)
        show(x);
    proc_free(&ml);
    assert_int_equal(code, 0);
    assert_true(cJSON_IsTrue(jsonx_get(x->summary, "ok")));
    assert_int_equal(task_count(x), 9);
    assert_non_null(strstr(x->mc.err.data, "1 learner, 3 learn rounds sent, 3 merges and 3 get-data sums checked"));
}
#endif

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(default_run_against_one_learner_passes_every_check, setup, teardown),
        cmocka_unit_test_setup_teardown(second_run_against_the_same_learner_connects_again, setup, teardown),
        cmocka_unit_test_setup_teardown(default_run_against_a_fake_aggregator_checks_split_and_merge, setup, teardown),
        cmocka_unit_test_setup_teardown(aggregator_that_drops_a_key_fails_the_merge_check, setup, teardown),
        cmocka_unit_test_setup_teardown(item_delivered_twice_fails_the_exactly_once_check, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_dump_file_fails_the_run, setup, teardown),
        cmocka_unit_test_setup_teardown(learner_that_fails_a_task_fails_the_run_and_still_gets_the_close, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(wrong_learner_count_fails_the_resource_check, setup, teardown),
        cmocka_unit_test_setup_teardown(hanging_task_fails_at_its_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(sigterm_prints_the_summary_so_far_and_exits_1, setup, teardown),
        cmocka_unit_test_setup_teardown(connect_retries_until_the_target_starts, setup, teardown),
        cmocka_unit_test_setup_teardown(connect_to_nothing_fails_within_the_scaled_window, setup, teardown),
        cmocka_unit_test_setup_teardown(script_with_expectations_met_passes, setup, teardown),
        cmocka_unit_test_setup_teardown(script_with_expectations_not_met_reports_each_and_goes_on, setup, teardown),
        cmocka_unit_test_setup_teardown(script_stop_on_failure_ends_the_run_at_that_task, setup, teardown),
        cmocka_unit_test_setup_teardown(script_learn_after_a_failed_get_data_is_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(usage_errors_exit_2_and_name_the_flag, setup, teardown),
        cmocka_unit_test_setup_teardown(invalid_script_exits_2_before_anything_is_sent, setup, teardown),
        cmocka_unit_test_setup_teardown(help_lists_every_flag, setup, teardown),
#ifdef MOCK_LEARNER_BIN
        cmocka_unit_test_setup_teardown(default_run_against_one_mock_learner_passes_every_check, setup, teardown),
#endif
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
