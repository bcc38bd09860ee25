/* mc_verify: the merge check. For each learn round whose learners' slices
 * and results are known from the dumps (mc_dump.h), recomputes with the
 * oracle (mc_oracle.h) what the aggregator should have returned, in learner
 * order, and compares it with what it did return (as JSON values, numbers
 * exact). A round with a single learner whose result came back unchanged is
 * taken as a direct run against one learner (no aggregator in between).
 * A round whose learn task failed has no merge to check (a learner that died
 * mid-learn has no result; that is not a failure); a completed round whose
 * learner never reported its slice, or reported it as anything but
 * "complete", is a failure.
 *
 * Ownership: everything borrowed. Threading: pure functions. */
#ifndef MC_VERIFY_H
#define MC_VERIFY_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "mc_dump.h"
#include "mc_fail.h"

/* What the aggregator answered to the learn task of one round. */
typedef struct {
    bool completed;       /* the task completed */
    const cJSON *result;  /* its result (may be NULL) */
} mcv_outcome;

/* Checks rounds[0..n) given their views (mcd_check_items) and outcomes;
 * one failure per round that does not match. Returns the number of rounds
 * whose merge was checked and matched. */
size_t mcv_check_merges(const mcd_round *rounds, const mcd_view *views, const mcv_outcome *outs, size_t n,
                        mc_fail *f);

/* get-data: the k-th completed get-data result of the aggregator must have
 * batch_size = the sum of the learners' k-th get-data batch_size. Checked
 * only when every learner in the dumps reported exactly n get-data results.
 * Returns the number of get-data results checked. */
size_t mcv_check_get_data(const mcd_set *d, const cJSON *const *agg_results, size_t n, mc_fail *f);

#endif
