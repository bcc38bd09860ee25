/* proc: run a real executable from a test: stdout read for its ready line
 * (the first line starting with {"ready"), stderr to a log file, waiting
 * with a cap (pidfd + poll: no sleep loops), SIGTERM then SIGKILL at the end.
 * The child dies with the test (PR_SET_PDEATHSIG). Single-threaded. */
#ifndef TEST_PROC_H
#define TEST_PROC_H

#include <stdbool.h>
#include <sys/types.h>

#include <cjson/cJSON.h>

typedef struct {
    pid_t pid;
    int pidfd;
    int out_fd;       /* child's stdout */
    char log[256];    /* child's stderr */
    char *out;        /* stdout read so far */
    size_t out_len;
    int status;       /* wait status once reaped */
    bool reaped;
} proc;

/* Starts argv[0] with argv (NULL-terminated). envp_extra: "K=V" strings to
 * add (NULL-terminated) or NULL. Returns false on failure. */
bool proc_start(proc *p, char *const argv[], char *const envp_extra[], const char *log_path);
/* Waits up to cap_ms for the ready line; returns it parsed (caller frees)
 * or NULL (the child died or stayed silent: see its log). */
cJSON *proc_ready(proc *p, long cap_ms);
/* Reads all of stdout until EOF or cap_ms; returns what was read (owned by
 * p). */
const char *proc_read_all(proc *p, long cap_ms);
/* Waits up to cap_ms for exit. Returns the exit code, 128+signal, or -1 on
 * timeout. */
int proc_wait(proc *p, long cap_ms);
/* SIGTERM, wait up to cap_ms, then SIGKILL. Returns as proc_wait. */
int proc_stop(proc *p, long cap_ms);
void proc_signal(proc *p, int sig);
void proc_free(proc *p);
/* Prints the tail of the child's log to stderr (for failing tests). */
void proc_show_log(const proc *p, int lines);
/* ms times the whole factor in $DILEARN_TEST_SLOWDOWN (default 1): for the
 * few waits that race with a process's start-up, which a checker such as
 * valgrind slows down (ci/valgrind.sh sets it). */
long proc_slow_ms(long ms);
/* Lines of the file at path that contain needle (0 if it cannot be read). */
int proc_log_count(const char *path, const char *needle);
/* Peak resident set (VmHWM of /proc/PID/status) in KiB; pid 0: this
 * process. -1 if unknown. */
long proc_vm_hwm_kib(pid_t pid);
/* A fresh temporary directory for a test's files (caller frees). */
char *proc_tmpdir(const char *tag);

#endif
