/* mc_dump: reads the dumps that mock_learner --dump writes (JSON lines) and
 * checks them against what the mock coordinator sent.
 *
 * Dump lines (one JSON object per line; other objects are ignored):
 *   {"learner": "learner2", "task_id": T, "learn": n, "index": i, "item": <item>}
 *       learner2 received <item> as element i of its slice in its learn
 *       task number n, whose protocol task id is T;
 *   {"learner": "learner2", "task_id": T, "task": NAME, "report": R, "result": <result>[, "learn": n]}
 *       learner2 sent <result> for a task NAME, as a report R ("complete",
 *       "fail", "malformed", "truncated").
 * "task_id" and "report" may be absent (older dumps). A learner is its id
 * within one dump file (two processes that both name a learner "learner0"
 * are two learners; messages then add the file to the id). A learn is its
 * task id, else its learn number. Learn results are paired with learns by
 * task id, else by "learn", else in order (the k-th learn result belongs to
 * the k-th learn seen in the item lines) when the counts agree; a learn
 * whose learner never reported it (it crashed) has no result, and does not
 * stop the pairing of the others.
 *
 * The item check (mcd_check_items): every item sent in a delivered round
 * reached exactly one learner once; no unknown item (an id that was not
 * sent, or a known id whose value differs) arrived; each learner's learn is
 * a contiguous run of one round's list, in order (by "index"); the runs of a
 * round tile its list. Learner order in a round is the order of the runs.
 * Item ids must be "r<round>-<index>" (mc_items.h).
 *
 * Ownership: a set owns the parsed lines; views borrow from the set and the
 * rounds (free them with mcd_views_free before the set).
 * Threading: none (one set per thread). */
#ifndef MC_DUMP_H
#define MC_DUMP_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "mc_fail.h"

/* Largest dump file read. */
#define MCD_FILE_MAX ((size_t)2 << 30)

typedef struct mcd_set mcd_set;

mcd_set *mcd_new(void);
void mcd_free(mcd_set *d);
/* Adds the lines of one dump; name names it in messages. Malformed lines
 * are failures ("dump a.jsonl line 3: ..."). Returns the number of lines
 * used. */
size_t mcd_add_text(mcd_set *d, const char *name, const char *text, size_t len, mc_fail *f);
/* Reads a file (at most MCD_FILE_MAX bytes) with mcd_add_text. -1 (and a
 * failure) if it cannot be read. */
int mcd_add_file(mcd_set *d, const char *path, mc_fail *f);

/* What the coordinator sent in one learn round. */
typedef struct {
    unsigned long round; /* item ids of the round are "r<round>-<i>" */
    const cJSON *items;  /* the list sent (borrowed) */
    bool delivered;      /* the learn task completed, so every item must
                            have reached a learner */
} mcd_round;

/* One learner's slice of a round. */
typedef struct {
    const char *learner;  /* borrowed from the set */
    size_t start, len;    /* the run rounds[i].items[start .. start+len) */
    const cJSON *result;  /* its learn result from the dumps, or NULL */
    const char *report;   /* how the result was reported, or NULL (not
                             said: taken as "complete") */
} mcd_slice;

typedef struct {
    mcd_slice *slices; /* in learner order (by start) */
    size_t n;
    bool complete;     /* the slices tile the round's list exactly and
                          every item of them checked out */
} mcd_view;

/* Runs the item check over rounds[0..n), adds a failure per violation, and
 * fills views[0..n) (one per round). */
void mcd_check_items(mcd_set *d, const mcd_round *rounds, size_t n, mcd_view *views, mc_fail *f);
void mcd_views_free(mcd_view *views, size_t n);

/* Learners seen in the dumps, in order of first appearance. */
size_t mcd_learner_count(const mcd_set *d);
const char *mcd_learner_name(const mcd_set *d, size_t i);
/* The results learner i sent for tasks named task, in dump order: fills
 * out[0..max) and returns how many there are. */
size_t mcd_results(const mcd_set *d, size_t i, const char *task, const cJSON **out, size_t max);

#endif
