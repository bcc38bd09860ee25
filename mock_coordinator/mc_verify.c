/* mc_verify: the merge check over dumps and the aggregator's answers. */
#include "mc_verify.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "mc_json.h"
#include "mc_oracle.h"
#include "xalloc.h"

static bool check_round(const mcd_round *r, const mcd_view *v, const mcv_outcome *o, mc_fail *f)
{
    if (!v->complete || v->n == 0)
        return false; /* the item check has said why */
    if (!o->completed)
        return false; /* a failed learn has no merge to check; that it failed
                         is a failure of its own unless a script expected it */
    const cJSON **vals = xcalloc(v->n, sizeof *vals);
    const char **names = xcalloc(v->n, sizeof *names);
    bool checked = false;
    size_t i;
    for (i = 0; i < v->n; i++) {
        vals[i] = v->slices[i].result;
        names[i] = v->slices[i].learner;
        if (!vals[i])
            break;
    }
    if (i < v->n) {
        /* The dump line is written before the report is sent. */
        mc_fail_add(f,
                    "round %lu: the aggregator completed the learn task, but %s never reported its slice (items r%lu-%zu.."
                    "r%lu-%zu; no learn result in the dumps)",
                    r->round, names[i], r->round, v->slices[i].start, r->round, v->slices[i].start + v->slices[i].len - 1);
        goto out;
    }
    for (i = 0; i < v->n; i++)
        if (v->slices[i].report && strcmp(v->slices[i].report, "complete") != 0) {
            mc_fail_add(f, "round %lu: the aggregator completed the learn task, but %s's report of its slice was "
                           "\"%s\", not \"complete\"",
                        r->round, names[i], v->slices[i].report);
            goto out;
        }
    char err[512];
    cJSON *want = mco_merge(vals, names, v->n, err, sizeof err);
    if (!want) {
        mc_fail_add(f, "round %lu: the aggregator completed the learn task, but the learners' results cannot be merged "
                       "(%s), so it should have failed",
                    r->round, err);
        goto out;
    }
    checked = true;
    if (v->n == 1 && mcj_equal(vals[0], o->result)) {
        cJSON_Delete(want); /* one learner, answered directly */
        goto out;
    }
    char *diff = mcj_diff(want, o->result, "");
    if (diff) {
        xbuf order = {0};
        for (size_t k = 0; k < v->n; k++)
            xbuf_printf(&order, "%s%s", k ? ", " : "", names[k]);
        mc_fail_add(f, "round %lu: the merged learn result differs from the merge of the learners' results (learner "
                       "order %s): %s",
                    r->round, order.data, diff);
        xbuf_free(&order);
        free(diff);
        checked = false;
    }
    cJSON_Delete(want);
out:
    free(vals);
    free(names);
    return checked;
}

size_t mcv_check_merges(const mcd_round *rounds, const mcd_view *views, const mcv_outcome *outs, size_t n, mc_fail *f)
{
    size_t ok = 0;
    for (size_t r = 0; r < n; r++)
        ok += check_round(&rounds[r], &views[r], &outs[r], f);
    return ok;
}

size_t mcv_check_get_data(const mcd_set *d, const cJSON *const *agg, size_t n, mc_fail *f)
{
    size_t nl = mcd_learner_count(d);
    if (nl == 0 || n == 0)
        return 0;
    const cJSON **per = xcalloc(nl * n, sizeof *per);
    size_t checked = 0;
    for (size_t l = 0; l < nl; l++)
        if (mcd_results(d, l, "learner_get_data_task", per + l * n, n) != n)
            goto out;
    for (size_t k = 0; k < n; k++) {
        int64_t sum = 0, got;
        size_t l;
        for (l = 0; l < nl; l++) {
            int64_t b;
            if (!jsonx_get_i64(jsonx_get(per[l * n + k], "batch_size"), &b) || b < 0 || b > INT64_MAX / 4)
                break;
            sum += b;
        }
        if (l < nl)
            continue;
        checked++;
        if (!jsonx_get_i64(jsonx_get(agg[k], "batch_size"), &got) || got != sum) {
            char *g = mcj_short(jsonx_get(agg[k], "batch_size"), 60);
            mc_fail_add(f, "learner_get_data_task #%zu: batch_size is %s, not %lld, the sum of the learners' batch sizes",
                        k + 1, g, (long long)sum);
            free(g);
        }
    }
out:
    free(per);
    return checked;
}
