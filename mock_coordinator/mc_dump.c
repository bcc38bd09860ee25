/* mc_dump: reading learner dumps and checking the items they received. */
#include "mc_dump.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jsonx.h"
#include "mc_items.h"
#include "mc_json.h"
#include "xalloc.h"

typedef struct {
    long long index;
    const cJSON *item;
    const char *file;
    size_t line;
} d_item;

typedef struct {
    size_t learner;
    const char *task_id; /* the protocol's task id, or NULL (older dumps) */
    long long learn;
    d_item *items;
    size_t n, cap;
    const char *file; /* where it first appears */
    size_t line;
    const cJSON *result; /* paired learn result */
    const char *report;  /* how it was reported ("complete", "fail", ...) */
} d_group;

typedef struct {
    const char *task;
    const char *task_id; /* or NULL */
    const char *report;  /* or NULL */
    bool has_learn;
    long long learn;
    const cJSON *result;
    const char *file;
    size_t line;
} d_result;

typedef struct {
    char *name;
    const char *file; /* the dump it is in: a learner is its id in one dump */
    char *label;      /* the name, with the file when another dump has the
                         same id */
    size_t *groups; /* indices into set->groups, first-appearance order */
    size_t ngroups;
    d_result *results;
    size_t nresults;
} d_learner;

struct mcd_set {
    cJSON **trees;
    size_t ntrees;
    char **files;
    size_t nfiles;
    d_learner *learners;
    size_t nlearners;
    d_group *groups;
    size_t ngroups, capgroups;
    bool paired;
};

#define LEARN_TASK "learner_learn_task"

mcd_set *mcd_new(void)
{
    return xcalloc(1, sizeof(mcd_set));
}

void mcd_free(mcd_set *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->ntrees; i++)
        cJSON_Delete(d->trees[i]);
    free(d->trees);
    for (size_t i = 0; i < d->nfiles; i++)
        free(d->files[i]);
    free(d->files);
    for (size_t i = 0; i < d->nlearners; i++) {
        free(d->learners[i].name);
        free(d->learners[i].label);
        free(d->learners[i].groups);
        free(d->learners[i].results);
    }
    free(d->learners);
    for (size_t i = 0; i < d->ngroups; i++)
        free(d->groups[i].items);
    free(d->groups);
    free(d);
}

/* A learner is its id within one dump file: two processes that both call
 * their first learner "learner0" (no --id-base) are two learners. */
static size_t learner_index(mcd_set *d, const char *name, const char *file)
{
    bool elsewhere = false;
    for (size_t i = 0; i < d->nlearners; i++)
        if (strcmp(d->learners[i].name, name) == 0) {
            if (strcmp(d->learners[i].file, file) == 0)
                return i;
            elsewhere = true;
        }
    d->learners = xrealloc(d->learners, (d->nlearners + 1) * sizeof *d->learners);
    d_learner *l = &d->learners[d->nlearners];
    memset(l, 0, sizeof *l);
    l->name = xstrdup(name);
    l->file = file;
    if (elsewhere)
        for (size_t i = 0; i <= d->nlearners; i++)
            if (strcmp(d->learners[i].name, name) == 0 && !d->learners[i].label)
                d->learners[i].label = xasprintf("%s (dump %s)", name, d->learners[i].file);
    return d->nlearners++;
}

static const char *learner_label(const d_learner *l)
{
    return l->label ? l->label : l->name;
}

/* A learn is its task id when the dump gives it (a restarted process counts
 * its learns from 1 again), else its learn number. */
static bool same_learn(const d_group *g, const char *task_id, long long learn)
{
    if (g->task_id || task_id)
        return g->task_id && task_id && strcmp(g->task_id, task_id) == 0;
    return g->learn == learn;
}

static d_group *group_for(mcd_set *d, size_t li, const char *task_id, long long learn, const char *file, size_t line)
{
    d_learner *l = &d->learners[li];
    /* Lines of one learn come together: look from the newest group. */
    for (size_t k = l->ngroups; k-- > 0;)
        if (same_learn(&d->groups[l->groups[k]], task_id, learn))
            return &d->groups[l->groups[k]];
    if (d->ngroups == d->capgroups) {
        d->capgroups = d->capgroups ? d->capgroups * 2 : 16;
        d->groups = xrealloc(d->groups, d->capgroups * sizeof *d->groups);
    }
    d_group *g = &d->groups[d->ngroups];
    memset(g, 0, sizeof *g);
    g->learner = li;
    g->task_id = task_id;
    g->learn = learn;
    g->file = file;
    g->line = line;
    l->groups = xrealloc(l->groups, (l->ngroups + 1) * sizeof *l->groups);
    l->groups[l->ngroups++] = d->ngroups++;
    return g;
}

static bool get_int(const cJSON *o, const char *key, long long *out)
{
    int64_t v;
    if (!jsonx_get_i64(jsonx_get(o, key), &v))
        return false;
    *out = (long long)v;
    return true;
}

/* Takes one parsed line; returns true if it was used (the set keeps it). */
static bool add_line(mcd_set *d, cJSON *j, const char *file, size_t line, mc_fail *f)
{
    if (!cJSON_IsObject(j)) {
        mc_fail_add(f, "dump %s line %zu: a JSON %s, not an object", file, line, jsonx_type_name(j));
        return false;
    }
    const cJSON *item = jsonx_get(j, "item"), *result = jsonx_get(j, "result");
    if (!item && !result)
        return false; /* another kind of line: not ours to judge */
    const char *learner = jsonx_get_str(j, "learner");
    if (!learner) {
        mc_fail_add(f, "dump %s line %zu: no string \"learner\"", file, line);
        return false;
    }
    size_t li = learner_index(d, learner, file);
    const char *task_id = jsonx_get_str(j, "task_id");
    if (item) {
        long long learn, index;
        if (!get_int(j, "learn", &learn) || !get_int(j, "index", &index)) {
            mc_fail_add(f, "dump %s line %zu: an item line needs integers \"learn\" and \"index\"", file, line);
            return false;
        }
        d_group *g = group_for(d, li, task_id, learn, file, line);
        if (g->n == g->cap) {
            g->cap = g->cap ? g->cap * 2 : 16;
            g->items = xrealloc(g->items, g->cap * sizeof *g->items);
        }
        g->items[g->n++] = (d_item){index, item, file, line};
        return true;
    }
    const char *task = jsonx_get_str(j, "task");
    if (!task) {
        mc_fail_add(f, "dump %s line %zu: a result line needs a string \"task\"", file, line);
        return false;
    }
    d_learner *l = &d->learners[li];
    l->results = xrealloc(l->results, (l->nresults + 1) * sizeof *l->results);
    d_result *r = &l->results[l->nresults++];
    memset(r, 0, sizeof *r);
    r->task = task;
    r->task_id = task_id;
    r->report = jsonx_get_str(j, "report");
    r->result = result;
    r->file = file;
    r->line = line;
    r->has_learn = get_int(j, "learn", &r->learn);
    d->paired = false;
    return true;
}

size_t mcd_add_text(mcd_set *d, const char *name, const char *text, size_t len, mc_fail *f)
{
    d->files = xrealloc(d->files, (d->nfiles + 1) * sizeof *d->files);
    const char *file = d->files[d->nfiles++] = xstrdup(name);
    size_t used = 0, lineno = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t' || *q == '\r'))
            q++;
        if (q < le) {
            char err[200];
            cJSON *j = jsonx_parse(p, (size_t)(le - p), err, sizeof err);
            if (!j) {
                if (!nl)
                    mc_fail_add(f, "dump %s line %zu: the last line is cut short (%s); was the learner killed?", file,
                                lineno, err);
                else
                    mc_fail_add(f, "dump %s line %zu: not valid JSON: %s", file, lineno, err);
            } else if (add_line(d, j, file, lineno, f)) {
                d->trees = xrealloc(d->trees, (d->ntrees + 1) * sizeof *d->trees);
                d->trees[d->ntrees++] = j;
                used++;
            } else {
                cJSON_Delete(j);
            }
        }
        p = nl ? nl + 1 : end;
    }
    return used;
}

int mcd_add_file(mcd_set *d, const char *path, mc_fail *f)
{
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        mc_fail_add(f, "dump %s: cannot open: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || (size_t)st.st_size > MCD_FILE_MAX) {
        mc_fail_add(f, "dump %s: cannot read it (larger than %zu bytes, or fstat failed)", path, MCD_FILE_MAX);
        fclose(fp);
        return -1;
    }
    xbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, fp)) > 0) {
        if (b.len + n > MCD_FILE_MAX) {
            mc_fail_add(f, "dump %s: larger than %zu bytes", path, MCD_FILE_MAX);
            xbuf_free(&b);
            fclose(fp);
            return -1;
        }
        xbuf_append(&b, chunk, n);
    }
    int bad = ferror(fp);
    fclose(fp);
    if (bad) {
        mc_fail_add(f, "dump %s: read error", path);
        xbuf_free(&b);
        return -1;
    }
    mcd_add_text(d, path, b.data ? b.data : "", b.len, f);
    xbuf_free(&b);
    return 0;
}

/* ---- pairing learn results with learns ---- */

static void pair(d_group *g, const d_result *r)
{
    g->result = r->result;
    g->report = r->report;
}

/* A learn result goes with the learn of its task id; a result line without
 * one (older dumps) with its "learn" number; without either, in order, and
 * only when the counts agree. */
static void pair_results(mcd_set *d, mc_fail *f)
{
    if (d->paired)
        return;
    d->paired = true;
    for (size_t li = 0; li < d->nlearners; li++) {
        d_learner *l = &d->learners[li];
        for (size_t g = 0; g < l->ngroups; g++) {
            d->groups[l->groups[g]].result = NULL;
            d->groups[l->groups[g]].report = NULL;
        }
        size_t unnumbered = 0, untagged_groups = 0;
        for (size_t k = 0; k < l->nresults; k++) {
            const d_result *r = &l->results[k];
            if (strcmp(r->task, LEARN_TASK) != 0)
                continue;
            if (!r->task_id && !r->has_learn) {
                unnumbered++;
                continue;
            }
            /* A result whose learn has no items in the dumps (its data was
             * not a list) pairs with nothing. */
            for (size_t g = 0; g < l->ngroups; g++) {
                d_group *grp = &d->groups[l->groups[g]];
                if (r->task_id ? grp->task_id && strcmp(grp->task_id, r->task_id) == 0
                               : !grp->task_id && grp->learn == r->learn)
                    pair(grp, r);
            }
        }
        for (size_t g = 0; g < l->ngroups; g++)
            untagged_groups += !d->groups[l->groups[g]].task_id;
        if (!unnumbered)
            continue;
        if (unnumbered != untagged_groups) {
            mc_fail_add(f,
                        "%s: the dumps hold %zu learn results without a task id or learn number but %zu such learns "
                        "with items; cannot tell which result belongs to which learn",
                        learner_label(l), unnumbered, untagged_groups);
            continue;
        }
        size_t g = 0;
        for (size_t k = 0; k < l->nresults; k++) {
            const d_result *r = &l->results[k];
            if (strcmp(r->task, LEARN_TASK) != 0 || r->task_id || r->has_learn)
                continue;
            while (d->groups[l->groups[g]].task_id)
                g++;
            pair(&d->groups[l->groups[g++]], r);
        }
    }
}

/* ---- the item check ---- */

typedef struct {
    const cJSON **items; /* the sent list as an array */
    size_t n;
    size_t *seen;  /* times each item arrived */
    size_t *first; /* group index of its first arrival */
} sent_round;

typedef struct {
    bool valid;
    size_t round; /* index into rounds */
    size_t start;
} group_place;

static int cmp_item(const void *a, const void *b)
{
    const d_item *x = a, *y = b;
    if (x->index != y->index)
        return x->index < y->index ? -1 : 1;
    /* Equal indices: keep dump order (qsort is not stable). */
    return x->line < y->line ? -1 : x->line > y->line;
}

static const char *lname(const mcd_set *d, const d_group *g)
{
    return learner_label(&d->learners[g->learner]);
}

/* Finds rounds[] index of a round number; SIZE_MAX if none. */
static size_t round_slot(const mcd_round *rounds, size_t n, unsigned long round)
{
    if (round >= 1 && round <= n && rounds[round - 1].round == round)
        return round - 1;
    for (size_t i = 0; i < n; i++)
        if (rounds[i].round == round)
            return i;
    return SIZE_MAX;
}

static void report_missing(const mcd_round *r, const sent_round *s, mc_fail *f)
{
    size_t missing = 0;
    for (size_t i = 0; i < s->n; i++)
        missing += s->seen[i] == 0;
    if (!missing)
        return;
    for (size_t i = 0; i < s->n;) {
        if (s->seen[i]) {
            i++;
            continue;
        }
        size_t j = i;
        while (j + 1 < s->n && !s->seen[j + 1])
            j++;
        if (i == j)
            mc_fail_add(f, "round %lu: item r%lu-%zu reached no learner (%zu of %zu items missing)", r->round, r->round,
                        i, missing, s->n);
        else
            mc_fail_add(f, "round %lu: items r%lu-%zu..r%lu-%zu reached no learner (%zu of %zu items missing)",
                        r->round, r->round, i, r->round, j, missing, s->n);
        i = j + 1;
    }
}

static int cmp_slice(const void *a, const void *b)
{
    const mcd_slice *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

void mcd_check_items(mcd_set *d, const mcd_round *rounds, size_t n, mcd_view *views, mc_fail *f)
{
    pair_results(d, f);
    sent_round *sr = xcalloc(n ? n : 1, sizeof *sr);
    for (size_t r = 0; r < n; r++) {
        sr[r].n = (size_t)cJSON_GetArraySize(rounds[r].items);
        sr[r].items = xcalloc(sr[r].n ? sr[r].n : 1, sizeof *sr[r].items);
        sr[r].seen = xcalloc(sr[r].n ? sr[r].n : 1, sizeof *sr[r].seen);
        sr[r].first = xcalloc(sr[r].n ? sr[r].n : 1, sizeof *sr[r].first);
        size_t i = 0;
        for (const cJSON *e = rounds[r].items ? rounds[r].items->child : NULL; e && i < sr[r].n; e = e->next)
            sr[r].items[i++] = e;
        views[r] = (mcd_view){0};
    }
    bool *round_bad = xcalloc(n ? n : 1, sizeof *round_bad);
    group_place *place = xcalloc(d->ngroups ? d->ngroups : 1, sizeof *place);

    for (size_t gi = 0; gi < d->ngroups; gi++) {
        d_group *g = &d->groups[gi];
        if (g->n > 1)
            qsort(g->items, g->n, sizeof *g->items, cmp_item);
        bool ok = true;
        size_t slot = SIZE_MAX, start = 0;
        for (size_t k = 0; k < g->n; k++) {
            const d_item *it = &g->items[k];
            if (k > 0 && it->index == g->items[k - 1].index) {
                mc_fail_add(f, "%s learn %lld: index %lld appears twice (dump %s lines %zu and %zu)", lname(d, g),
                            g->learn, it->index, it->file, g->items[k - 1].line, it->line);
                ok = false;
            }
            const char *id = jsonx_get_str(it->item, "id");
            unsigned long rn;
            size_t pos;
            size_t rs = id && mci_parse_id(id, &rn, &pos) ? round_slot(rounds, n, rn) : SIZE_MAX;
            if (rs == SIZE_MAX || pos >= sr[rs].n) {
                char *txt = mcj_short(it->item, 160);
                mc_fail_add(f, "%s learn %lld (dump %s line %zu): unknown item %s: no item with this id was sent",
                            lname(d, g), g->learn, it->file, it->line, txt);
                free(txt);
                ok = false;
                continue;
            }
            sent_round *s = &sr[rs];
            char *diff = mcj_diff(s->items[pos], it->item, "");
            if (diff) {
                mc_fail_add(f, "%s learn %lld (dump %s line %zu): item %s differs from the one sent: %s", lname(d, g),
                            g->learn, it->file, it->line, id, diff);
                free(diff);
                ok = false;
            }
            if (s->seen[pos]++ == 0) {
                s->first[pos] = gi;
            } else {
                const d_group *o = &d->groups[s->first[pos]];
                mc_fail_add(f, "item %s reached learners more than once: %s learn %lld (dump %s) and %s learn %lld (dump %s line %zu)",
                            id, lname(d, o), o->learn, o->file, lname(d, g), g->learn, it->file, it->line);
                round_bad[rs] = true;
                ok = false;
            }
            if (k == 0) {
                slot = rs;
                start = pos;
            } else if (slot != SIZE_MAX && rs != slot) {
                mc_fail_add(f, "%s learn %lld (dump %s line %zu): items of rounds %lu and %lu in one learn", lname(d, g),
                            g->learn, it->file, it->line, rounds[slot].round, rounds[rs].round);
                round_bad[rs] = round_bad[slot] = true;
                ok = false;
                slot = SIZE_MAX;
            } else if (slot != SIZE_MAX && pos != start + k) {
                mc_fail_add(f,
                            "%s learn %lld (dump %s line %zu): items out of order or not contiguous: element %zu of the "
                            "slice is %s where r%lu-%zu was expected (sent right after r%lu-%zu)",
                            lname(d, g), g->learn, it->file, it->line, k, id, rounds[slot].round, start + k,
                            rounds[slot].round, start + k - 1);
                round_bad[slot] = true;
                ok = false;
                slot = SIZE_MAX;
            }
        }
        if (slot != SIZE_MAX && !ok)
            round_bad[slot] = true;
        place[gi] = (group_place){ok && slot != SIZE_MAX && g->n > 0, slot, start};
    }

    for (size_t r = 0; r < n; r++) {
        if (rounds[r].delivered)
            report_missing(&rounds[r], &sr[r], f);
        mcd_view *v = &views[r];
        for (size_t gi = 0; gi < d->ngroups; gi++) {
            if (!place[gi].valid || place[gi].round != r)
                continue;
            const d_group *g = &d->groups[gi];
            v->slices = xrealloc(v->slices, (v->n + 1) * sizeof *v->slices);
            v->slices[v->n++] = (mcd_slice){lname(d, g), place[gi].start, g->n, g->result, g->report};
        }
        if (v->n > 1)
            qsort(v->slices, v->n, sizeof *v->slices, cmp_slice);
        bool complete = !round_bad[r];
        for (size_t i = 0; i < v->n; i++)
            for (size_t j = 0; j < i; j++)
                if (strcmp(v->slices[i].learner, v->slices[j].learner) == 0) {
                    mc_fail_add(f, "round %lu: %s got two slices (items r%lu-%zu.. and r%lu-%zu..)", rounds[r].round,
                                v->slices[i].learner, rounds[r].round, v->slices[j].start, rounds[r].round,
                                v->slices[i].start);
                    complete = false;
                }
        size_t at = 0;
        for (size_t i = 0; i < v->n; i++) {
            if (v->slices[i].start != at)
                complete = false;
            at = v->slices[i].start + v->slices[i].len;
        }
        if (at != sr[r].n)
            complete = false;
        for (size_t i = 0; i < sr[r].n; i++)
            if (sr[r].seen[i] != 1)
                complete = false;
        v->complete = complete;
    }
    for (size_t r = 0; r < n; r++) {
        free(sr[r].items);
        free(sr[r].seen);
        free(sr[r].first);
    }
    free(sr);
    free(round_bad);
    free(place);
}

void mcd_views_free(mcd_view *views, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(views[i].slices);
        views[i].slices = NULL;
        views[i].n = 0;
    }
}

size_t mcd_learner_count(const mcd_set *d)
{
    return d->nlearners;
}

const char *mcd_learner_name(const mcd_set *d, size_t i)
{
    return i < d->nlearners ? learner_label(&d->learners[i]) : NULL;
}

size_t mcd_results(const mcd_set *d, size_t i, const char *task, const cJSON **out, size_t max)
{
    if (i >= d->nlearners)
        return 0;
    size_t k = 0;
    const d_learner *l = &d->learners[i];
    for (size_t j = 0; j < l->nresults; j++)
        if (strcmp(l->results[j].task, task) == 0) {
            if (k < max)
                out[k] = l->results[j].result;
            k++;
        }
    return k;
}
