/* mc_fail: the ordered list of failed expectations of one run; each entry is
 * one sentence naming what failed and where ("tasks[3] learner_learn_task
 * (round 1): status failed, expected completed: ...").
 *
 * The list keeps at most MC_FAIL_MAX messages; later ones are only counted
 * (mc_fail_count() includes them), so a broken peer cannot make the summary
 * grow without bound.
 * Ownership: the list owns its strings; mc_fail_free() releases them.
 * Threading: none (one list per thread). */
#ifndef MC_FAIL_H
#define MC_FAIL_H

#include <stddef.h>

#define MC_FAIL_MAX 500
/* Longest message kept; longer ones are cut with "...". */
#define MC_FAIL_MSG_MAX 2048

typedef struct {
    char **msg;     /* msg[0..n): the kept messages, in order */
    size_t n;       /* kept */
    size_t dropped; /* counted beyond MC_FAIL_MAX */
} mc_fail;

void mc_fail_init(mc_fail *f);
void mc_fail_add(mc_fail *f, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Kept plus dropped. */
size_t mc_fail_count(const mc_fail *f);
/* True if some kept message contains needle (for tests). */
int mc_fail_has(const mc_fail *f, const char *needle);
void mc_fail_free(mc_fail *f);

#endif
