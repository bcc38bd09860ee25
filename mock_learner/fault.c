/* fault: the mock learner's fault table and the plan it makes for a task. */
#include "fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "xalloc.h"

/* ---- the kind table ---- */

typedef struct {
    const char *name;
    const char *doc;
    bool state;        /* acts on the learner rather than on one task */
    bool task_trigger; /* may take task/at/prob */
    const char *param; /* its one parameter, or NULL */
} kind_info;

static const kind_info kinds[FK_COUNT] = {
#define K(id, name, doc) [FK_##id] = {name, doc, false, true, NULL},
    FAULT_KINDS(K)
#undef K
};

/* Per-kind details beside the X-list (kept here so that the header stays a
 * list of names and docs). */
static kind_info info(fault_kind k)
{
    kind_info i = kinds[k];
    switch (k) {
    case FK_SLOW_JOIN:
        i.state = true, i.task_trigger = false, i.param = "after_ms";
        break;
    case FK_REFUSE:
        i.state = true, i.task_trigger = false;
        break;
    case FK_DIE:
    case FK_NO_HEARTBEAT:
        i.state = true;
        break;
    case FK_DROP:
        i.state = true, i.param = "back_after_ms";
        break;
    case FK_CRASH:
        i.param = "when";
        break;
    case FK_DELAY:
        i.param = "ms";
        break;
    case FK_ERROR_STATUS:
        i.param = "status";
        break;
    default:
        break;
    }
    return i;
}

const char *fault_kind_name(fault_kind k)
{
    return (unsigned)k < FK_COUNT ? kinds[k].name : "?";
}

const char *fault_kind_doc(fault_kind k)
{
    return (unsigned)k < FK_COUNT ? kinds[k].doc : "?";
}

bool fault_kind_is_state(fault_kind k)
{
    return (unsigned)k < FK_COUNT && info(k).state;
}

/* ---- the set ---- */

typedef struct {
    int id;
    fault_kind kind;
    int learner;    /* -1: all */
    char *task;     /* NULL: any name */
    long at;        /* 0: every task */
    bool has_prob;
    double prob;
    long ms;        /* after_ms / ms / back_after_ms */
    int status;     /* error_status */
    bool during;    /* crash when */
    bool spent;     /* acted at once; never fires again */
    unsigned long fired;
    cJSON *spec;    /* the object as given, for listings */
} fault;

struct fault_set {
    fault *items;
    size_t len;
    int next_id;
    int learner_count;
    char *prefix;
    uint64_t seed;
};

fault_set *fault_set_new(int learner_count, const char *id_prefix, uint64_t seed)
{
    fault_set *fs = xcalloc(1, sizeof *fs);
    fs->items = xcalloc(FAULT_MAX, sizeof *fs->items);
    fs->next_id = 1;
    fs->learner_count = learner_count;
    fs->prefix = xstrdup(id_prefix);
    fs->seed = seed;
    return fs;
}

static void fault_release(fault *f)
{
    free(f->task);
    cJSON_Delete(f->spec);
    memset(f, 0, sizeof *f);
}

void fault_set_free(fault_set *fs)
{
    if (!fs)
        return;
    fault_set_clear(fs);
    free(fs->items);
    free(fs->prefix);
    free(fs);
}

size_t fault_set_clear(fault_set *fs)
{
    size_t n = fs->len;
    for (size_t i = 0; i < fs->len; i++)
        fault_release(&fs->items[i]);
    fs->len = 0;
    return n;
}

bool fault_set_remove(fault_set *fs, int id)
{
    for (size_t i = 0; i < fs->len; i++)
        if (fs->items[i].id == id) {
            fault_release(&fs->items[i]);
            memmove(&fs->items[i], &fs->items[i + 1], (fs->len - i - 1) * sizeof *fs->items);
            fs->len--;
            return true;
        }
    return false;
}

size_t fault_set_count(const fault_set *fs)
{
    return fs->len;
}

int fault_learner_index(const fault_set *fs, const char *ref)
{
    const char *digits = ref;
    size_t pl = strlen(fs->prefix);
    if (strncmp(ref, fs->prefix, pl) == 0 && ref[pl] != '\0')
        digits = ref + pl;
    if (*digits < '0' || *digits > '9' || (digits[0] == '0' && digits[1] != '\0'))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(digits, &end, 10);
    if (errno || *end || v < 0 || v >= fs->learner_count)
        return -1;
    return (int)v;
}

/* ---- validation ---- */

static bool get_long(const cJSON *spec, const char *key, long lo, long hi, long *out, char *err, size_t errlen)
{
    const cJSON *v = jsonx_get(spec, key);
    int64_t n;
    if (!jsonx_get_i64(v, &n) || n < lo || n > hi) {
        if (cJSON_IsRaw(v) && jsonx_is_number(v))
            snprintf(err, errlen, "\"%s\" must be an integer in %ld..%ld, not %.32s", key, lo, hi, v->valuestring);
        else
            snprintf(err, errlen, "\"%s\" must be an integer in %ld..%ld, not a %s", key, lo, hi,
                     jsonx_type_name(v));
        return false;
    }
    *out = (long)n;
    return true;
}

static void list_kinds(char *buf, size_t len)
{
    size_t off = 0;
    buf[0] = '\0';
    for (int k = 0; k < FK_COUNT && off < len; k++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", k ? ", " : "", kinds[k].name);
}

static bool parse_fault(const fault_set *fs, const cJSON *spec, bool at_start, fault *f, char *err, size_t errlen)
{
    memset(f, 0, sizeof *f);
    f->learner = -1;
    if (!cJSON_IsObject(spec)) {
        snprintf(err, errlen, "a fault must be a JSON object, not %s", jsonx_type_name(spec));
        return false;
    }
    const char *kname = jsonx_get_str(spec, "kind");
    if (!kname) {
        char known[200];
        list_kinds(known, sizeof known);
        snprintf(err, errlen, "\"kind\" is %s; it must be one of: %s",
                 jsonx_get(spec, "kind") ? "not a string" : "missing", known);
        return false;
    }
    int k = 0;
    while (k < FK_COUNT && strcmp(kinds[k].name, kname) != 0)
        k++;
    if (k == FK_COUNT) {
        char known[200];
        list_kinds(known, sizeof known);
        snprintf(err, errlen, "\"kind\" \"%.64s\" is unknown; it must be one of: %s", kname, known);
        return false;
    }
    f->kind = (fault_kind)k;
    kind_info ki = info(f->kind);
    /* Every member must mean something for this kind. */
    for (const cJSON *m = spec->child; m; m = m->next) {
        const char *key = m->string;
        bool ok = strcmp(key, "kind") == 0 || strcmp(key, "learner") == 0 ||
                  (ki.task_trigger && (strcmp(key, "task") == 0 || strcmp(key, "at") == 0 ||
                                       strcmp(key, "prob") == 0)) ||
                  (ki.param && strcmp(key, ki.param) == 0);
        if (!ok) {
            snprintf(err, errlen, "member \"%.64s\" is not allowed for kind %s (allowed: learner, kind%s%s%s)", key,
                     ki.name, ki.task_trigger ? ", task, at, prob" : "", ki.param ? ", " : "",
                     ki.param ? ki.param : "");
            return false;
        }
    }
    const cJSON *l = jsonx_get(spec, "learner");
    if (l) {
        int64_t idx;
        if (cJSON_IsString(l) && strcmp(l->valuestring, "all") == 0) {
            f->learner = -1;
        } else if (cJSON_IsString(l)) {
            f->learner = fault_learner_index(fs, l->valuestring);
            if (f->learner < 0 || strncmp(l->valuestring, fs->prefix, strlen(fs->prefix)) != 0) {
                snprintf(err, errlen, "\"learner\" \"%.64s\" names no learner (ids are %s0..%s%d, or \"all\")",
                         l->valuestring, fs->prefix, fs->prefix, fs->learner_count - 1);
                return false;
            }
        } else if (jsonx_get_i64(l, &idx)) {
            if (idx < 0 || idx >= fs->learner_count) {
                snprintf(err, errlen, "\"learner\" %lld is out of range 0..%d", (long long)idx,
                         fs->learner_count - 1);
                return false;
            }
            f->learner = (int)idx;
        } else {
            snprintf(err, errlen, "\"learner\" must be an index, a learner id or \"all\", not %s",
                     jsonx_type_name(l));
            return false;
        }
    }
    const cJSON *t = jsonx_get(spec, "task");
    if (t) {
        if (!cJSON_IsString(t) || t->valuestring[0] == '\0' || strlen(t->valuestring) > FAULT_NAME_MAX) {
            snprintf(err, errlen, "\"task\" must be a task name (a string of 1..%d characters)", FAULT_NAME_MAX);
            return false;
        }
        f->task = xstrdup(t->valuestring);
    }
    if (jsonx_get(spec, "at") && !get_long(spec, "at", 1, 1000000000L, &f->at, err, errlen))
        goto fail;
    const cJSON *p = jsonx_get(spec, "prob");
    if (p) {
        if (!jsonx_get_double(p, &f->prob) || !(f->prob >= 0.0 && f->prob <= 1.0)) {
            snprintf(err, errlen, "\"prob\" must be a number in 0..1");
            goto fail;
        }
        f->has_prob = true;
    }
    switch (f->kind) {
    case FK_SLOW_JOIN:
        if (!at_start) {
            snprintf(err, errlen, "slow_join works only with --fault at start-up (this learner listens already); "
                                  "use drop for a learner that leaves and comes back");
            goto fail;
        }
        f->ms = 1000;
        if (jsonx_get(spec, "after_ms") && !get_long(spec, "after_ms", 0, FAULT_MAX_MS, &f->ms, err, errlen))
            goto fail;
        break;
    case FK_DROP:
        f->ms = 1000;
        if (jsonx_get(spec, "back_after_ms") &&
            !get_long(spec, "back_after_ms", 0, FAULT_MAX_MS, &f->ms, err, errlen))
            goto fail;
        break;
    case FK_DELAY:
        f->ms = 1000;
        if (jsonx_get(spec, "ms") && !get_long(spec, "ms", 0, FAULT_MAX_MS, &f->ms, err, errlen))
            goto fail;
        break;
    case FK_ERROR_STATUS: {
        long st = 500;
        if (jsonx_get(spec, "status") && !get_long(spec, "status", 400, 599, &st, err, errlen))
            goto fail;
        f->status = (int)st;
        break;
    }
    case FK_CRASH: {
        const cJSON *w = jsonx_get(spec, "when");
        if (w && (!cJSON_IsString(w) ||
                  (strcmp(w->valuestring, "before") != 0 && strcmp(w->valuestring, "during") != 0))) {
            snprintf(err, errlen, "\"when\" must be \"before\" or \"during\"");
            goto fail;
        }
        f->during = w && strcmp(w->valuestring, "during") == 0;
        break;
    }
    case FK_WRONG_BATCH:
        if (f->task && strcmp(f->task, "learner_get_data_task") != 0) {
            snprintf(err, errlen, "wrong_batch applies to learner_get_data_task only, not \"%s\"", f->task);
            goto fail;
        }
        if (!f->task)
            f->task = xstrdup("learner_get_data_task");
        break;
    default:
        break;
    }
    f->spec = jsonx_dup(spec);
    return true;
fail:
    free(f->task);
    f->task = NULL;
    return false;
}

static bool acts_at_once(const fault *f)
{
    return info(f->kind).state && !f->task && !f->at && !f->has_prob;
}

int fault_set_add(fault_set *fs, const cJSON *spec, bool at_start, fault_now *now, size_t *nnow, int *ids,
                  size_t *nids, char *err, size_t errlen)
{
    *nnow = 0;
    if (nids)
        *nids = 0;
    bool list = cJSON_IsArray(spec);
    size_t n = list ? (size_t)cJSON_GetArraySize(spec) : 1;
    if (list && n == 0) {
        snprintf(err, errlen, "the list of faults is empty");
        return 0;
    }
    if (fs->len + n > FAULT_MAX) {
        snprintf(err, errlen, "too many faults: %zu installed, %zu more would pass the limit of %d (DELETE /fault "
                              "clears them)", fs->len, n, FAULT_MAX);
        return 0;
    }
    fault *tmp = xcalloc(n, sizeof *tmp);
    size_t i = 0;
    for (const cJSON *it = list ? spec->child : spec; i < n; it = it->next, i++) {
        char e[1024];
        if (!parse_fault(fs, it, at_start, &tmp[i], e, sizeof e)) {
            if (list)
                snprintf(err, errlen, "fault %zu of the list: %s", i + 1, e);
            else
                snprintf(err, errlen, "%s", e);
            for (size_t j = 0; j < i; j++)
                fault_release(&tmp[j]);
            free(tmp);
            return 0;
        }
    }
    int first = fs->next_id;
    for (i = 0; i < n; i++) {
        fault *f = &fs->items[fs->len++];
        *f = tmp[i];
        f->id = fs->next_id++;
        if (ids && nids)
            ids[(*nids)++] = f->id;
        if (acts_at_once(f)) {
            f->spent = true;
            f->fired = 1;
            now[(*nnow)++] = (fault_now){f->kind, f->learner, f->ms, f->id};
        }
    }
    free(tmp);
    return first;
}

/* ---- planning ---- */

static uint64_t mix(uint64_t x)
{
    /* splitmix64's finaliser */
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static double draw(const fault_set *fs, const fault *f, int learner, const char *name, unsigned long n)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ull;
    uint64_t x = mix(fs->seed);
    x = mix(x ^ (uint64_t)f->id);
    x = mix(x ^ (uint64_t)learner);
    x = mix(x ^ h);
    x = mix(x ^ (uint64_t)n);
    return (double)(x >> 11) * (1.0 / 9007199254740992.0);
}

void fault_set_plan(fault_set *fs, int learner, const char *name, unsigned long n_name, unsigned long n_all,
                    fault_plan *out)
{
    memset(out, 0, sizeof *out);
    size_t off = 0;
    for (size_t i = 0; i < fs->len; i++) {
        fault *f = &fs->items[i];
        if (f->spent || !info(f->kind).task_trigger)
            continue;
        if (f->learner >= 0 && f->learner != learner)
            continue;
        if (f->task && strcmp(f->task, name) != 0)
            continue;
        unsigned long n = f->task ? n_name : n_all;
        if (f->at && (unsigned long)f->at != n)
            continue;
        if (f->has_prob && !(draw(fs, f, learner, name, n) < f->prob))
            continue;
        f->fired++;
        if (out->nhits < FAULT_PLAN_HITS) {
            out->hits[out->nhits].kind = f->kind;
            out->hits[out->nhits].id = f->id;
            out->hits[out->nhits++].count = f->fired;
        } else
            out->nhits_more++;
        if (off < sizeof out->fired)
            off += (size_t)snprintf(out->fired + off, sizeof out->fired - off, "%s%s#%d", off ? " " : "",
                                    kinds[f->kind].name, f->id);
        switch (f->kind) {
        case FK_FAIL:
            if (out->report == REPORT_NORMAL || out->report > REPORT_FAIL)
                out->report = REPORT_FAIL;
            break;
        case FK_MALFORMED:
            if (out->report == REPORT_NORMAL || out->report > REPORT_MALFORMED)
                out->report = REPORT_MALFORMED;
            break;
        case FK_TRUNCATED:
            if (out->report == REPORT_NORMAL)
                out->report = REPORT_TRUNCATED;
            break;
        case FK_CRASH:
            if (f->during)
                out->crash_during = true;
            else
                out->crash_before = true;
            break;
        case FK_DIE:
            out->die = true;
            break;
        case FK_DROP:
            if (!out->drop || f->ms > out->drop_back_ms)
                out->drop_back_ms = f->ms;
            out->drop = true;
            break;
        case FK_HANG:
            out->hang = true;
            break;
        case FK_DELAY:
            out->delay_ms += f->ms;
            if (out->delay_ms > FAULT_MAX_MS)
                out->delay_ms = FAULT_MAX_MS;
            break;
        case FK_ERROR_STATUS:
            if (!out->status)
                out->status = f->status;
            break;
        case FK_NO_HEARTBEAT:
            out->pause_heartbeats = true;
            break;
        case FK_BAD_RESULT:
            out->bad_result = true;
            break;
        case FK_WRONG_BATCH:
            out->wrong_batch = true;
            break;
        case FK_SLOW_JOIN:
        case FK_REFUSE:
        case FK_COUNT:
            break;
        }
    }
}

cJSON *fault_set_to_json(const fault_set *fs)
{
    cJSON *arr = cJSON_CreateArray();
    for (size_t i = 0; i < fs->len; i++) {
        const fault *f = &fs->items[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddItemToObject(o, "id", jsonx_new_i64(f->id));
        for (const cJSON *m = f->spec->child; m; m = m->next)
            cJSON_AddItemToObject(o, m->string, jsonx_dup(m));
        cJSON_AddItemToObject(o, "fired", jsonx_new_i64((int64_t)f->fired));
        cJSON_AddBoolToObject(o, "spent", f->spent);
        cJSON_AddItemToArray(arr, o);
    }
    return arr;
}
