/* sc_proc: the runner's child processes. Each child runs in its own process
 * group, dies with the runner (PR_SET_PDEATHSIG), has its stdout and stderr
 * read through pipes on the ev loop into log files and handed over line by
 * line, and is reaped through SIGCHLD (signalfd) and waitpid.
 *
 * A sc_procset holds every child of the runner (of every scenario running at
 * once) so that one SIGCHLD watcher can reap them all, and so that the
 * runner can kill every group on exit.
 *
 * Ownership: a sc_proc belongs to the caller (sc_proc_free once it has
 * exited or never started); line pointers passed to callbacks are borrowed
 * for the call. Threading: the loop's thread only. */
#ifndef SC_PROC_H
#define SC_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "ev.h"

typedef struct sc_proc sc_proc;
typedef struct sc_procset sc_procset;

typedef struct {
    /* A complete line (without '\n') on stdout (stream 1) or stderr (2). */
    void (*on_line)(void *ud, sc_proc *p, int stream, const char *line, size_t len);
    /* The process exited and both of its pipes are closed; status as from
     * waitpid. The process may be spawned again from here. */
    void (*on_exit)(void *ud, sc_proc *p, int status);
} sc_proc_callbacks;

sc_procset *sc_procset_new(ev_loop *loop);
/* Reaps every exited child (call on SIGCHLD). */
void sc_procset_reap(sc_procset *set);
/* Sends sig to every running child's process group (also to stopped ones,
 * with a SIGCONT so SIGTERM is seen). */
void sc_procset_signal_all(sc_procset *set, int sig);
size_t sc_procset_running(const sc_procset *set);
void sc_procset_free(sc_procset *set);

/* name: for messages; log_dir: folder where "<name>.log" (stderr) and
 * "<name>.out" (stdout) are appended to. */
sc_proc *sc_proc_new(sc_procset *set, const char *name, const char *log_dir, const sc_proc_callbacks *cbs,
                     void *ud);
void sc_proc_free(sc_proc *p);

/* Starts argv[0] (a path) with argv and the runner's environment plus env
 * ("NAME=value", NULL-terminated, may be NULL). Returns 0, or -1 with the
 * reason in err. Fails if the process is running. */
int sc_proc_spawn(sc_proc *p, char *const argv[], char *const env[], char *err, size_t errlen);
/* Signals the process group; 0 or -1 (not running). */
int sc_proc_kill(sc_proc *p, int sig);

const char *sc_proc_name(const sc_proc *p);
pid_t sc_proc_pid(const sc_proc *p);   /* 0 if not running */
bool sc_proc_running(const sc_proc *p); /* spawned and not yet reaped */
/* It has exited (reaped) but its exit callback waits for its pipes to drain. */
bool sc_proc_exit_pending(const sc_proc *p);
bool sc_proc_stopped(const sc_proc *p); /* SIGSTOP sent and no SIGCONT since */
int sc_proc_spawns(const sc_proc *p);   /* how many times it was started */
const char *sc_proc_log_path(const sc_proc *p);
const char *sc_proc_out_path(const sc_proc *p);
/* The last lines of stderr kept in memory (up to about 4 KiB). */
const char *sc_proc_tail(const sc_proc *p);

/* "exited with code 1", "was killed by SIGSEGV" for a waitpid status. */
void sc_describe_status(int status, char *buf, size_t len);

#endif
