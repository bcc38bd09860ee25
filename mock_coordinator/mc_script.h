/* mc_script: the task list of a run, either parsed from a script file or
 * made for the default run, with what each task is expected to do.
 *
 * Script file (JSON; every key is checked, unknown keys are errors):
 *   {"tasks": [TASK...], "stop_on_failure": false, "comment": "..."}
 *   TASK = {"name": "learner_learn_task",     required; the task's name
 *           "data": {...},                    extra task data fields (not
 *                                             "name"), sent as they are
 *           "items": n | "batch",             send a "data" list of n
 *                                             generated items, or of the
 *                                             batch_size of the last get-data
 *                                             (learner_learn_task: default
 *                                             "batch")
 *           "expect": {"status": "completed" | "failed" | "start_failed",
 *                      "message_contains": "...",
 *                      "fields": {"gpu": 4, "info.learner_step": 3},
 *                      "latency_ms_max": 5000},
 *           "deadline_ms": 3000,              this task's deadline
 *           "delay_ms": 500,                  wait this long after the
 *                                             previous task ended (or the
 *                                             run began) before sending it
 *                                             (not scaled by --time-scale)
 *           "stop_on_failure": true,          stop the run if it fails
 *           "comment": "..."}
 * A task without "expect" (or without expect.status) expects "completed".
 * A learner_get_data_task that completes must answer a batch_size > 0,
 * unless expect.fields names "batch_size".
 * learner_start_task gets the default task_info unless data has one.
 *
 * Ownership: a script owns its tasks and their trees (mcs_free).
 * Threading: pure functions. */
#ifndef MC_SCRIPT_H
#define MC_SCRIPT_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#define MCS_FILE_MAX (16u * 1024u * 1024u)
#define MCS_TASKS_MAX 100000u
#define MCS_DEADLINE_MAX_MS 86400000L

typedef enum { MCS_COMPLETED, MCS_FAILED, MCS_START_FAILED } mcs_status;

#define MCS_ITEMS_NONE (-1L)
#define MCS_ITEMS_BATCH (-2L)

typedef struct {
    char *name;
    cJSON *data;          /* extra data fields (object) or NULL */
    long items;           /* >= 0, MCS_ITEMS_BATCH or MCS_ITEMS_NONE */
    long deadline_ms;     /* 0: the run's default */
    long delay_ms;        /* wait before sending (0: none) */
    bool stop_on_failure; /* the run stops if this task fails */
    bool always;          /* runs even after a stop (the default run's
                             close) */
    bool check_batch;     /* get-data: batch_size must be > 0 */
    struct {
        mcs_status status;      /* default MCS_COMPLETED */
        char *message_contains; /* or NULL */
        cJSON *fields;          /* object: dotted path -> value, or NULL */
        double latency_ms_max;  /* 0: no limit */
    } expect;
} mcs_task;

typedef struct {
    mcs_task *tasks;
    size_t n;
    bool stop_on_failure; /* every task stops the run on failure */
} mcs_script;

/* Parses and validates a script. file names the script in messages. 0, or
 * -1 with err = "FILE: tasks[2].expect.status: must be one of ..."; out is
 * left empty on error. */
int mcs_parse(const char *text, size_t len, const char *file, mcs_script *out, char *err, size_t errlen);
/* Reads (at most MCS_FILE_MAX bytes) and parses a script file. */
int mcs_load(const char *path, mcs_script *out, char *err, size_t errlen);
/* The default run: resource, learner_start_task, rounds x (learner_get_data_task with batch_size > 0,
 * learner_learn_task with "batch" items), learner_close_task if close. Stops
 * at the first failed task, but still sends the close. */
void mcs_default(mcs_script *out, long rounds, bool close);
void mcs_free(mcs_script *s);

const char *mcs_status_name(mcs_status s);

#endif
