/* sc_proc: child processes in their own groups, piped into logs, reaped
 * through SIGCHLD (see sc_proc.h). */
#include "sc_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xalloc.h"
#include "wrapexec.h"

/* Longer lines are cut for the callback (the log files get them whole):
 * stderr lines are log lines; a stdout line may be a large JSON summary. */
#define LINE_MAX_KEEP_ERR 65536
#define LINE_MAX_KEEP_OUT (256u << 20)
#define TAIL_MAX 4096

struct sc_procset {
    ev_loop *loop;
    sc_proc **v;
    size_t n, cap;
};

typedef struct {
    int fd;
    xbuf line;
    int log_fd;
} pipe_rd;

struct sc_proc {
    sc_procset *set;
    char *name;
    char *log_path, *out_path;
    sc_proc_callbacks cbs;
    void *ud;
    pid_t pid;
    bool running;   /* spawned, not reaped */
    bool reaped;    /* reaped, waiting for the pipes to close */
    bool stopped;
    int status;
    int spawns;
    pipe_rd rd[2]; /* stdout, stderr */
    int log_fd, out_fd;
    char tail[TAIL_MAX];
    size_t tail_len;
    ev_timer *drain; /* after reaping: cap on waiting for the pipes */
};

sc_procset *sc_procset_new(ev_loop *loop)
{
    sc_procset *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    return s;
}

void sc_procset_free(sc_procset *set)
{
    if (!set)
        return;
    free(set->v);
    free(set);
}

static void set_add(sc_procset *s, sc_proc *p)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 16;
        s->v = xrealloc(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = p;
}

static void set_del(sc_procset *s, sc_proc *p)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == p) {
            s->v[i] = s->v[--s->n];
            return;
        }
}

static void tail_add(sc_proc *p, const char *line, size_t len)
{
    /* room for the line, its newline and the NUL, after the newest half */
    if (len > TAIL_MAX / 2 - 2)
        len = TAIL_MAX / 2 - 2;
    if (p->tail_len + len + 2 > TAIL_MAX) {
        /* keep the newest half */
        size_t keep = TAIL_MAX / 2;
        if (keep > p->tail_len)
            keep = p->tail_len;
        memmove(p->tail, p->tail + p->tail_len - keep, keep);
        p->tail_len = keep;
    }
    memcpy(p->tail + p->tail_len, line, len);
    p->tail_len += len;
    p->tail[p->tail_len++] = '\n';
    p->tail[p->tail_len] = '\0';
}

static void maybe_finish(sc_proc *p);

static void close_pipe(sc_proc *p, int i)
{
    pipe_rd *r = &p->rd[i];
    if (r->fd < 0)
        return;
    ev_fd_del(p->set->loop, r->fd);
    close(r->fd);
    r->fd = -1;
    if (r->line.len) { /* a last line without '\n' */
        size_t len = r->line.len;
        char *l = xbuf_take(&r->line);
        if (i == 1)
            tail_add(p, l, len);
        if (p->cbs.on_line)
            p->cbs.on_line(p->ud, p, i + 1, l, len);
        free(l);
    }
    xbuf_free(&r->line);
}

static void write_all(int fd, const char *b, size_t n)
{
    while (n > 0 && fd >= 0) {
        ssize_t w = write(fd, b, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        b += w;
        n -= (size_t)w;
    }
}

static void on_pipe(ev_loop *loop, int fd, unsigned events, void *data)
{
    sc_proc *p = data;
    int i = p->rd[0].fd == fd ? 0 : 1;
    pipe_rd *r = &p->rd[i];
    char buf[65536];
    for (int rounds = 0; rounds < 16; rounds++) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (n <= 0) {
            close_pipe(p, i);
            maybe_finish(p);
            return;
        }
        write_all(r->log_fd, buf, (size_t)n);
        size_t start = 0;
        for (size_t k = 0; k < (size_t)n; k++) {
            if (buf[k] != '\n')
                continue;
            size_t cap = i == 0 ? LINE_MAX_KEEP_OUT : LINE_MAX_KEEP_ERR;
            if (r->line.len < cap)
                xbuf_append(&r->line, buf + start, k - start);
            size_t len = r->line.len;
            xbuf_append(&r->line, "", 1); /* NUL */
            if (i == 1)
                tail_add(p, r->line.data, len);
            if (p->cbs.on_line)
                p->cbs.on_line(p->ud, p, i + 1, r->line.data, len);
            r->line.len = 0;
            start = k + 1;
            if (r->fd < 0) /* the callback freed nothing, but be safe */
                return;
        }
        if (start < (size_t)n && r->line.len < (i == 0 ? LINE_MAX_KEEP_OUT : LINE_MAX_KEEP_ERR))
            xbuf_append(&r->line, buf + start, (size_t)n - start);
    }
}

static void finish(sc_proc *p)
{
    if (p->drain) {
        ev_timer_stop(p->set->loop, p->drain);
        p->drain = NULL;
    }
    p->reaped = false;
    p->pid = 0;
    p->stopped = false;
    if (p->cbs.on_exit)
        p->cbs.on_exit(p->ud, p, p->status);
}

static void maybe_finish(sc_proc *p)
{
    if (p->reaped && p->rd[0].fd < 0 && p->rd[1].fd < 0)
        finish(p);
}

static void on_drain_timeout(ev_loop *loop, void *data)
{
    sc_proc *p = data;
    p->drain = NULL;
    /* something (a grandchild) keeps the pipes open: stop waiting */
    close_pipe(p, 0);
    close_pipe(p, 1);
    maybe_finish(p);
}

void sc_procset_reap(sc_procset *set)
{
    for (;;) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid < 0 && errno == EINTR)
            continue;
        if (pid <= 0)
            return;
        for (size_t i = 0; i < set->n; i++) {
            sc_proc *p = set->v[i];
            if (p->running && p->pid == pid) {
                p->running = false;
                p->reaped = true;
                p->status = st;
                set_del(set, p);
                /* the group may still hold members: kill them */
                kill(-pid, SIGKILL);
                if (p->rd[0].fd >= 0 || p->rd[1].fd >= 0)
                    p->drain = ev_timer_start(set->loop, 500, on_drain_timeout, p);
                maybe_finish(p);
                break;
            }
        }
    }
}

void sc_procset_signal_all(sc_procset *set, int sig)
{
    for (size_t i = 0; i < set->n; i++) {
        sc_proc *p = set->v[i];
        if (p->running && p->pid > 0) {
            kill(-p->pid, sig);
            if (sig != SIGKILL && sig != SIGSTOP)
                kill(-p->pid, SIGCONT);
        }
    }
}

size_t sc_procset_running(const sc_procset *set) { return set->n; }

sc_proc *sc_proc_new(sc_procset *set, const char *name, const char *log_dir, const sc_proc_callbacks *cbs,
                     void *ud)
{
    sc_proc *p = xcalloc(1, sizeof *p);
    p->set = set;
    p->name = xstrdup(name);
    p->log_path = xasprintf("%s/%s.log", log_dir, name);
    p->out_path = xasprintf("%s/%s.out", log_dir, name);
    p->cbs = *cbs;
    p->ud = ud;
    p->rd[0].fd = p->rd[1].fd = -1;
    p->log_fd = p->out_fd = -1;
    return p;
}

void sc_proc_free(sc_proc *p)
{
    if (!p)
        return;
    if (p->running) {
        kill(-p->pid, SIGKILL);
        set_del(p->set, p);
    }
    if (p->drain)
        ev_timer_stop(p->set->loop, p->drain);
    p->cbs.on_line = NULL;
    close_pipe(p, 0);
    close_pipe(p, 1);
    if (p->log_fd >= 0)
        close(p->log_fd);
    if (p->out_fd >= 0)
        close(p->out_fd);
    free(p->name);
    free(p->log_path);
    free(p->out_path);
    free(p);
}

int sc_proc_spawn(sc_proc *p, char *const argv[], char *const env[], char *err, size_t errlen)
{
    if (p->running || p->reaped) {
        snprintf(err, errlen, "%s is still running", p->name);
        return -1;
    }
    if (access(argv[0], X_OK) != 0) {
        snprintf(err, errlen, "cannot run %s: %s", argv[0], strerror(errno));
        return -1;
    }
    if (p->log_fd < 0)
        p->log_fd = open(p->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (p->out_fd < 0)
        p->out_fd = open(p->out_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (p->log_fd < 0 || p->out_fd < 0) {
        snprintf(err, errlen, "open %s: %s", p->log_path, strerror(errno));
        return -1;
    }
    if (p->spawns > 0) {
        char note[128];
        int n = snprintf(note, sizeof note, "---- run_scenarios: %s started again (start #%d) ----\n", p->name,
                         p->spawns + 1);
        write_all(p->log_fd, note, (size_t)n);
        write_all(p->out_fd, note, (size_t)n);
    }
    int po[2], pe[2];
    if (pipe2(po, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe2: %s", strerror(errno));
        return -1;
    }
    if (pipe2(pe, O_CLOEXEC) != 0) {
        snprintf(err, errlen, "pipe2: %s", strerror(errno));
        close(po[0]);
        close(po[1]);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(err, errlen, "fork: %s", strerror(errno));
        close(po[0]);
        close(po[1]);
        close(pe[0]);
        close(pe[1]);
        return -1;
    }
    if (pid == 0) {
        /* child: own group, dies with the runner, default signals */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127); /* the runner died before prctl */
        sigset_t all;
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        for (int sig = 1; sig < NSIG; sig++)
            if (sig != SIGKILL && sig != SIGSTOP)
                signal(sig, SIG_DFL);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, 0);
        dup2(po[1], 1);
        dup2(pe[1], 2);
        close_range(3, ~0U, 0);
        if (env)
            for (size_t i = 0; env[i]; i++)
                putenv(env[i]);
        wrap_execv(argv[0], argv); /* $DILEARN_WRAPPER: see wrapexec.h */
        char m[512];
        int n = snprintf(m, sizeof m, "run_scenarios: exec %s: %s\n", argv[0], strerror(errno));
        write_all(2, m, (size_t)n);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, against the race with the child */
    close(po[1]);
    close(pe[1]);
    p->rd[0].fd = po[0];
    p->rd[0].log_fd = p->out_fd;
    p->rd[1].fd = pe[0];
    p->rd[1].log_fd = p->log_fd;
    for (int i = 0; i < 2; i++) {
        fcntl(p->rd[i].fd, F_SETFL, fcntl(p->rd[i].fd, F_GETFL) | O_NONBLOCK);
        ev_fd_set(p->set->loop, p->rd[i].fd, EV_READ, on_pipe, p);
    }
    p->pid = pid;
    p->running = true;
    p->stopped = false;
    p->spawns++;
    set_add(p->set, p);
    return 0;
}

int sc_proc_kill(sc_proc *p, int sig)
{
    if (!p->running || p->pid <= 0)
        return -1;
    if (sig == SIGSTOP)
        p->stopped = true;
    if (sig == SIGCONT)
        p->stopped = false;
    int r = kill(-p->pid, sig);
    if (sig == SIGTERM || sig == SIGINT) {
        kill(-p->pid, SIGCONT);
        p->stopped = false;
    }
    return r;
}

const char *sc_proc_name(const sc_proc *p) { return p->name; }
pid_t sc_proc_pid(const sc_proc *p) { return p->running ? p->pid : 0; }
bool sc_proc_running(const sc_proc *p) { return p->running; }
bool sc_proc_exit_pending(const sc_proc *p) { return p->reaped; }
bool sc_proc_stopped(const sc_proc *p) { return p->running && p->stopped; }
int sc_proc_spawns(const sc_proc *p) { return p->spawns; }
const char *sc_proc_log_path(const sc_proc *p) { return p->log_path; }
const char *sc_proc_out_path(const sc_proc *p) { return p->out_path; }
const char *sc_proc_tail(const sc_proc *p) { return p->tail; }

void sc_describe_status(int status, char *buf, size_t len)
{
    if (WIFEXITED(status))
        snprintf(buf, len, "exited with code %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by SIG%s%s", sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?",
                 WCOREDUMP(status) ? " (core dumped)" : "");
    else
        snprintf(buf, len, "status 0x%x", status);
}
