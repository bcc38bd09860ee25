/* dump: the mock learner's record of what it received and reported, JSON
 * lines appended to one file (--dump), so that tests can check exactly-once
 * delivery and what each learner answered.
 *
 *   {"learner": "learner2", "task_id": ID, "learn": 3, "index": 0, "item": <item text>}
 *       one per data item of a learn task, when the task is accepted;
 *       "task_id" is the protocol's task id (the one of /task/new and of
 *       the report), "learn" is the n-th learn task of that learner
 *       (1-based; it starts again at 1 when the process restarts), "index"
 *       the item's position in the slice, "item" its exact JSON text (a
 *       newline or carriage return between tokens becomes a space, so that
 *       a line stays a line)
 *   {"learner": "learner2", "task_id": ID, "task": NAME[, "learn": n], "report": R, "result": <JSON>}
 *       one per report sent, written before it is sent ("learn" for a
 *       learn task whose items were dumped); R is "complete", "fail", "malformed" or
 *       "truncated" (for the last two, "result" is what the garbled report
 *       carried)
 *
 * Each call writes its lines with one write(2) on an O_APPEND file, so lines
 * of one task are never interleaved with others and nothing already written
 * is lost if the process exits (crash faults use _exit).
 *
 * Ownership: JSON passed in is borrowed. Threading: the loop's thread only. */
#ifndef ML_DUMP_H
#define ML_DUMP_H

#include <stddef.h>

#include <cjson/cJSON.h>

typedef struct dump dump;

/* Opens (creates) path for appending. NULL with the reason in err. */
dump *dump_open(const char *path, char *err, size_t errlen);
void dump_close(dump *d);

/* The items of one learn task (items: a JSON list; its elements may be raw
 * text items of jsonx_parse_shallow). task_id: the protocol's task id (of
 * /task/new). Returns 0 or -1 (logged). */
int dump_learn_items(dump *d, const char *learner, const char *task_id, unsigned long learn_n, const cJSON *items);
/* One report of task task_id (named task; learn_n > 0: the learn number of
 * a learn task). result_json: the result as JSON text. */
int dump_result(dump *d, const char *learner, const char *task_id, const char *task, unsigned long learn_n,
                const char *report, const char *result_json);

#endif
