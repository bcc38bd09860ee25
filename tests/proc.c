/* proc: child processes for end-to-end tests. */
#include "proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jsonx.h"
#include "wrapexec.h"
#include "xalloc.h"

extern char **environ;

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

bool proc_start(proc *p, char *const argv[], char *const envp_extra[], const char *log_path)
{
    memset(p, 0, sizeof *p);
    p->pid = -1;
    p->pidfd = -1;
    snprintf(p->log, sizeof p->log, "%s", log_path);
    int out[2];
    if (pipe2(out, O_CLOEXEC) < 0)
        return false;
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return false;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int err = open(log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        dup2(out[1], 1);
        if (err >= 0)
            dup2(err, 2);
        for (int i = 0; envp_extra && envp_extra[i]; i++)
            putenv(envp_extra[i]);
        wrap_execv(argv[0], argv);
        fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    close(out[1]);
    p->pid = pid;
    p->out_fd = out[0];
    fcntl(p->out_fd, F_SETFL, O_NONBLOCK);
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    return true;
}

/* Reads what stdout has; returns false at EOF. */
static bool pump(proc *p)
{
    char buf[4096];
    for (;;) {
        ssize_t n = read(p->out_fd, buf, sizeof buf);
        if (n > 0) {
            p->out = xrealloc(p->out, p->out_len + (size_t)n + 1);
            memcpy(p->out + p->out_len, buf, (size_t)n);
            p->out_len += (size_t)n;
            p->out[p->out_len] = '\0';
            continue;
        }
        if (n == 0)
            return false;
        return errno == EAGAIN || errno == EINTR;
    }
}

static cJSON *find_ready(proc *p)
{
    if (!p->out)
        return NULL;
    for (char *line = p->out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (!nl)
            return NULL;
        if (strncmp(line, "{\"ready\"", 8) == 0)
            return jsonx_parse(line, (size_t)(nl - line), NULL, 0);
        line = nl + 1;
    }
    return NULL;
}

cJSON *proc_ready(proc *p, long cap_ms)
{
    long end = now_ms() + cap_ms;
    for (;;) {
        bool open_ = pump(p);
        cJSON *r = find_ready(p);
        if (r || !open_)
            return r;
        long left = end - now_ms();
        if (left <= 0)
            return NULL;
        struct pollfd pf = {p->out_fd, POLLIN, 0};
        poll(&pf, 1, (int)left);
    }
}

const char *proc_read_all(proc *p, long cap_ms)
{
    long end = now_ms() + cap_ms;
    while (pump(p)) {
        long left = end - now_ms();
        if (left <= 0)
            break;
        struct pollfd pf = {p->out_fd, POLLIN, 0};
        poll(&pf, 1, (int)left);
    }
    return p->out ? p->out : "";
}

static int decode(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int proc_wait(proc *p, long cap_ms)
{
    if (p->reaped)
        return decode(p->status);
    if (p->pid < 0)
        return -1;
    if (p->pidfd >= 0) {
        struct pollfd pf = {p->pidfd, POLLIN, 0};
        if (poll(&pf, 1, (int)cap_ms) <= 0)
            return -1;
    }
    int st;
    if (waitpid(p->pid, &st, 0) != p->pid)
        return -1;
    p->reaped = true;
    p->status = st;
    return decode(st);
}

void proc_signal(proc *p, int sig)
{
    if (p->pid > 0 && !p->reaped)
        kill(p->pid, sig);
}

int proc_stop(proc *p, long cap_ms)
{
    if (p->pid < 0)
        return -1;
    if (p->reaped)
        return decode(p->status);
    kill(p->pid, SIGTERM);
    int rc = proc_wait(p, cap_ms);
    if (rc < 0) {
        kill(p->pid, SIGKILL);
        rc = proc_wait(p, 5000);
        return rc < 0 ? -1 : -2; /* -2: had to be killed */
    }
    return rc;
}

void proc_free(proc *p)
{
    if (p->pid > 0 && !p->reaped) {
        kill(p->pid, SIGKILL);
        proc_wait(p, 5000);
    }
    if (p->pidfd >= 0)
        close(p->pidfd);
    if (p->out_fd > 0)
        close(p->out_fd);
    free(p->out);
    memset(p, 0, sizeof *p);
    p->pid = -1;
    p->pidfd = -1;
}

void proc_show_log(const proc *p, int lines)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "tail -n %d '%s' >&2", lines, p->log);
    if (system(cmd) != 0)
        fprintf(stderr, "(no log %s)\n", p->log);
}

char *proc_tmpdir(const char *tag)
{
    const char *base = getenv("TMPDIR");
    char *tmpl = xasprintf("%s/dilearn-%s-XXXXXX", base && *base ? base : "/tmp", tag);
    if (!mkdtemp(tmpl)) {
        free(tmpl);
        return NULL;
    }
    return tmpl;
}

long proc_slow_ms(long ms)
{
    return wrap_slow_ms(ms);
}

int proc_log_count(const char *path, const char *needle)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return 0;
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof line, fp))
        n += strstr(line, needle) != NULL;
    fclose(fp);
    return n;
}

long proc_vm_hwm_kib(pid_t pid)
{
    char path[64], line[256];
    if (pid)
        snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    else
        snprintf(path, sizeof path, "/proc/self/status");
    FILE *fp = fopen(path, "r");
    long v = -1;
    while (fp && fgets(line, sizeof line, fp))
        if (strncmp(line, "VmHWM:", 6) == 0)
            v = strtol(line + 6, NULL, 10);
    if (fp)
        fclose(fp);
    return v;
}
