/* fault: the mock learner's fault table and the plan it makes for a task. */
#include "fault.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "proto.h"
#include "suggest.h"
#include "xalloc.h"

/* ---- the schema: one table of kinds and their members ---- */

typedef enum {
    P_MS = 0, /* a duration in ms, 0..FAULT_MAX_MS */
    P_STATUS, /* an HTTP error status, 400..599 */
    P_CODE,   /* a protocol code a slave answers with (error_codes) */
    P_WHEN,   /* "before" or "during" */
} param_type;

typedef struct {
    const char *name;
    param_type type;
    long def;
} param;

typedef struct {
    bool state;        /* acts on the learner rather than on one task */
    bool task_trigger; /* may take task/at/times/prob */
    param params[2];   /* its parameters (name NULL: none) */
    const char *members[16]; /* every member it may have, NULL-terminated */
} kind_info;

#define TRIGGERS "task", "at", "times", "prob"
static const kind_info kinds[FK_COUNT] = {
    [FK_SLOW_JOIN] = {true, false, {{"after_ms", P_MS, 1000}}, {"learner", "kind", "optional", "after_ms"}},
    [FK_REFUSE] = {true, false, {{0}}, {"learner", "kind", "optional"}},
    [FK_FAIL] = {false, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
    [FK_CRASH] = {false, true, {{"when", P_WHEN, 0}}, {"learner", "kind", "optional", TRIGGERS, "when"}},
    [FK_DIE] = {true, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
    [FK_HANG] = {false, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
    [FK_DELAY] = {false, true, {{"ms", P_MS, 1000}}, {"learner", "kind", "optional", TRIGGERS, "ms"}},
    [FK_ERROR_STATUS] = {false, true, {{"code", P_CODE, 602}, {"status", P_STATUS, 0}},
                         {"learner", "kind", "optional", TRIGGERS, "code", "status"}},
    [FK_MALFORMED] = {false, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
    [FK_TRUNCATED] = {false, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
    [FK_NO_HEARTBEAT] = {true, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
    [FK_DROP] = {true, true, {{"back_after_ms", P_MS, 1000}}, {"learner", "kind", "optional", TRIGGERS, "back_after_ms"}},
    [FK_BAD_RESULT] = {false, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
    [FK_WRONG_BATCH] = {false, true, {{0}}, {"learner", "kind", "optional", TRIGGERS}},
};
#undef TRIGGERS

static const char *const kind_names[FK_COUNT + 1] = {
#define K(id, name, doc) name,
    FAULT_KINDS(K)
#undef K
    NULL,
};
static const char *const kind_docs[FK_COUNT] = {
#define K(id, name, doc) doc,
    FAULT_KINDS(K)
#undef K
};

/* The codes a slave answers with (protocol.md), and their HTTP status. */
static const struct {
    proto_code_id id;
    int status;
} error_codes[] = {
    {PROTO_SYSTEM_SHUTTING_DOWN, 401},         {PROTO_CHANNEL_NOT_FOUND, 400},
    {PROTO_CHANNEL_INVALID, 403},              {PROTO_SLAVE_MASTER_TOKEN_NOT_FOUND, 400},
    {PROTO_SLAVE_MASTER_TOKEN_INVALID, 403},   {PROTO_SELF_TOKEN_NOT_FOUND, 400},
    {PROTO_SELF_TOKEN_INVALID, 403},           {PROTO_SLAVE_ALREADY_CONNECTED, 400},
    {PROTO_SLAVE_NOT_CONNECTED, 400},          {PROTO_SLAVE_CONNECTION_REFUSED, 403},
    {PROTO_SLAVE_DISCONNECTION_REFUSED, 403},  {PROTO_SLAVE_TASK_ALREADY_EXIST, 400},
    {PROTO_SLAVE_TASK_REFUSED, 403},
};
#define NCODES (sizeof error_codes / sizeof error_codes[0])

static int code_index(long code)
{
    for (size_t i = 0; i < NCODES; i++)
        if (proto_code(error_codes[i].id) == code)
            return (int)i;
    return -1;
}

const char *fault_kind_name(fault_kind k)
{
    return (unsigned)k < FK_COUNT ? kind_names[k] : "?";
}

const char *fault_kind_doc(fault_kind k)
{
    return (unsigned)k < FK_COUNT ? kind_docs[k] : "?";
}

bool fault_kind_is_state(fault_kind k)
{
    return (unsigned)k < FK_COUNT && kinds[k].state;
}

const char *const *fault_kind_members(fault_kind k)
{
    return (unsigned)k < FK_COUNT ? kinds[k].members : NULL;
}

/* ---- the set ---- */

typedef struct {
    int id;
    fault_kind kind;
    int learner;    /* -1: all */
    char *task;     /* NULL: any name */
    long at;        /* 0: every task */
    long times;     /* with at: tasks at, at+1, ..., at+times-1 */
    bool has_prob;
    double prob;
    long ms;        /* after_ms / ms / back_after_ms */
    int status;     /* error_status: HTTP status */
    int code;       /* error_status: protocol code */
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
    int id_base; /* learner k is <prefix><id_base + k> */
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

void fault_set_id_base(fault_set *fs, int base)
{
    fs->id_base = base;
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

/* "2" or "<prefix>2" -> 2; -1 if it names no learner. prefixed: only the
 * second form. */
static int learner_index(int count, const char *prefix, int id_base, const char *ref, bool prefixed)
{
    const char *digits = ref;
    size_t pl = strlen(prefix);
    long base = 0; /* an id counts from id_base, an index from 0 */
    if (strncmp(ref, prefix, pl) == 0 && ref[pl] != '\0') {
        digits = ref + pl;
        base = id_base;
    } else if (prefixed) {
        return -1;
    }
    if (*digits < '0' || *digits > '9' || (digits[0] == '0' && digits[1] != '\0'))
        return -1;
    char *end;
    errno = 0;
    long v = strtol(digits, &end, 10);
    if (errno || *end || v < base || v - base >= count)
        return -1;
    return (int)(v - base);
}

int fault_learner_index(const fault_set *fs, const char *ref)
{
    return learner_index(fs->learner_count, fs->prefix, fs->id_base, ref, false);
}

/* ---- validation ---- */

/* the error of one member (suggest.h) */
#define ferr suggest_error_set

static bool get_long(const cJSON *spec, const char *key, long lo, long hi, long *out, fault_error *e)
{
    const cJSON *v = jsonx_get(spec, key);
    int64_t n;
    if (!jsonx_get_i64(v, &n) || n < lo || n > hi) {
        if (cJSON_IsRaw(v) && jsonx_is_number(v))
            return ferr(e, key, "must be an integer in %ld..%ld, not %.32s", lo, hi, v->valuestring);
        return ferr(e, key, "must be an integer in %ld..%ld, not %s", lo, hi, jsonx_type_name(v));
    }
    *out = (long)n;
    return true;
}

static void join(char *buf, size_t len, const char *const *list)
{
    size_t off = 0;
    buf[0] = '\0';
    for (size_t i = 0; list[i] && off < len; i++)
        off += (size_t)snprintf(buf + off, len - off, "%s%s", i ? ", " : "", list[i]);
}

static bool member_of(const char *key, const char *const *list)
{
    for (size_t i = 0; list[i]; i++)
        if (strcmp(key, list[i]) == 0)
            return true;
    return false;
}

/* An unknown member: a near miss of an allowed one, one of another kind, or
 * neither. */
static bool unknown_member(const char *key, fault_kind k, fault_error *e)
{
    const kind_info *ki = &kinds[k];
    const char *near = suggest_nearest(key, ki->members, (size_t)-1);
    char allowed[300];
    join(allowed, sizeof allowed, ki->members);
    if (near)
        return ferr(e, key, "unknown key for kind %s (did you mean '%s'?)", kind_names[k], near);
    if (!ki->task_trigger && (strcmp(key, "task") == 0 || strcmp(key, "at") == 0 || strcmp(key, "times") == 0 ||
                              strcmp(key, "prob") == 0))
        return ferr(e, key, "kind %s takes no task trigger: it acts on the learner at once (allowed: %s)",
                    kind_names[k], allowed);
    for (int o = 0; o < FK_COUNT; o++)
        if (member_of(key, kinds[o].members))
            return ferr(e, key, "not a key of kind %s but of %s (allowed here: %s)", kind_names[k], kind_names[o],
                        allowed);
    return ferr(e, key, "unknown key for kind %s (allowed: %s)", kind_names[k], allowed);
}

static bool parse_param(const cJSON *spec, const param *pa, fault *f, fault_error *e)
{
    const cJSON *v = jsonx_get(spec, pa->name);
    long x = pa->def;
    switch (pa->type) {
    case P_MS:
        if (v && !get_long(spec, pa->name, 0, FAULT_MAX_MS, &x, e))
            return false;
        f->ms = x;
        break;
    case P_STATUS:
        if (v && !get_long(spec, pa->name, 400, 599, &x, e))
            return false;
        f->status = (int)x;
        break;
    case P_CODE: {
        int64_t n;
        if (v && (!jsonx_get_i64(v, &n) || code_index((long)n) < 0)) {
            char known[200];
            size_t off = 0;
            known[0] = '\0';
            for (size_t i = 0; i < NCODES && off < sizeof known; i++)
                off += (size_t)snprintf(known + off, sizeof known - off, "%s%d", i ? ", " : "",
                                        proto_code(error_codes[i].id));
            return ferr(e, pa->name, "must be a code a slave answers with (%s), not %.32s", known,
                        cJSON_IsRaw(v) && v->valuestring ? v->valuestring : jsonx_type_name(v));
        }
        if (v)
            x = (long)n;
        f->code = (int)x;
        break;
    }
    case P_WHEN:
        if (v && (!cJSON_IsString(v) ||
                  (strcmp(v->valuestring, "before") != 0 && strcmp(v->valuestring, "during") != 0)))
            return ferr(e, pa->name, "must be \"before\" or \"during\"");
        f->during = v && strcmp(v->valuestring, "during") == 0;
        break;
    }
    return true;
}

static bool parse_fault(int learner_count, const char *prefix, int id_base, const cJSON *spec, bool at_start, fault *f,
                        fault_error *e)
{
    memset(f, 0, sizeof *f);
    memset(e, 0, sizeof *e);
    f->learner = -1;
    if (!cJSON_IsObject(spec))
        return ferr(e, "", "a fault must be a JSON object, not %s", jsonx_type_name(spec));
    char known[300];
    join(known, sizeof known, kind_names);
    const cJSON *kj = jsonx_get(spec, "kind");
    if (!kj)
        return ferr(e, "", "missing key 'kind' (one of: %s)", known);
    if (!cJSON_IsString(kj))
        return ferr(e, "kind", "must be a string (one of: %s), not %s", known, jsonx_type_name(kj));
    int k = 0;
    while (k < FK_COUNT && strcmp(kind_names[k], kj->valuestring) != 0)
        k++;
    if (k == FK_COUNT) {
        const char *near = suggest_nearest(kj->valuestring, kind_names, FK_COUNT);
        if (near)
            return ferr(e, "kind", "unknown kind '%.64s' (did you mean '%s'?)", kj->valuestring, near);
        return ferr(e, "kind", "unknown kind '%.64s' (known: %s)", kj->valuestring, known);
    }
    f->kind = (fault_kind)k;
    const kind_info *ki = &kinds[k];
    /* Every member must mean something for this kind. */
    for (const cJSON *m = spec->child; m; m = m->next)
        if (!member_of(m->string, ki->members))
            return unknown_member(m->string, f->kind, e);
    const cJSON *l = jsonx_get(spec, "learner");
    if (l) {
        int64_t idx;
        if (cJSON_IsString(l) && strcmp(l->valuestring, "all") == 0) {
            f->learner = -1;
        } else if (cJSON_IsString(l)) {
            f->learner = learner_index(learner_count, prefix, id_base, l->valuestring, true);
            if (f->learner < 0 && learner_count == 1)
                return ferr(e, "learner", "'%.64s' names no learner (the id is %s%d, or \"all\")", l->valuestring,
                            prefix, id_base);
            if (f->learner < 0)
                return ferr(e, "learner", "'%.64s' names no learner (ids are %s%d..%s%d, or \"all\")",
                            l->valuestring, prefix, id_base, prefix, id_base + learner_count - 1);
        } else if (jsonx_get_i64(l, &idx)) {
            if (idx < 0 || idx >= learner_count)
                return ferr(e, "learner", "%lld is out of range 0..%d", (long long)idx, learner_count - 1);
            f->learner = (int)idx;
        } else {
            return ferr(e, "learner", "must be an index, a learner id or \"all\", not %s", jsonx_type_name(l));
        }
    }
    const cJSON *t = jsonx_get(spec, "task");
    if (t) {
        if (!cJSON_IsString(t) || t->valuestring[0] == '\0' || strlen(t->valuestring) > FAULT_NAME_MAX)
            return ferr(e, "task", "must be a task name (a string of 1..%d characters)", FAULT_NAME_MAX);
        const char *full = proto_task_full_name(t->valuestring);
        const char *near = full ? NULL : proto_task_suggest(t->valuestring);
        if (near)
            return ferr(e, "task", "unknown task '%.64s' (did you mean '%s'?)", t->valuestring, near);
        f->task = xstrdup(full ? full : t->valuestring);
    }
    if (jsonx_get(spec, "at") && !get_long(spec, "at", 1, 1000000000L, &f->at, e))
        goto fail;
    f->times = 1;
    if (jsonx_get(spec, "times")) {
        if (!get_long(spec, "times", 1, 1000000000L, &f->times, e))
            goto fail;
        if (!f->at)
            f->at = 1;
    }
    const cJSON *p = jsonx_get(spec, "prob");
    if (p) {
        if (!jsonx_get_double(p, &f->prob) || !(f->prob >= 0.0 && f->prob <= 1.0)) {
            ferr(e, "prob", "must be a number in 0..1");
            goto fail;
        }
        f->has_prob = true;
    }
    const cJSON *opt = jsonx_get(spec, "optional");
    if (opt && !cJSON_IsBool(opt)) {
        ferr(e, "optional", "must be true or false, not %s", jsonx_type_name(opt));
        goto fail;
    }
    for (size_t i = 0; i < 2 && ki->params[i].name; i++)
        if (!parse_param(spec, &ki->params[i], f, e))
            goto fail;
    switch (f->kind) {
    case FK_SLOW_JOIN:
        if (!at_start) {
            ferr(e, "kind", "slow_join works only with --fault at start-up (this learner listens already); "
                            "use drop for a learner that leaves and comes back");
            goto fail;
        }
        break;
    case FK_ERROR_STATUS:
        if (!f->status)
            f->status = error_codes[code_index(f->code)].status;
        break;
    case FK_WRONG_BATCH:
        if (f->task && strcmp(f->task, "learner_get_data_task") != 0) {
            ferr(e, "task", "wrong_batch applies to learner_get_data_task only, not '%s'", f->task);
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

bool fault_check(const cJSON *spec, int learner_count, const char *id_prefix, bool at_start, fault_error *e)
{
    fault f;
    if (!parse_fault(learner_count, id_prefix, 0, spec, at_start, &f, e))
        return false;
    fault_release(&f);
    return true;
}

static bool acts_at_once(const fault *f)
{
    return kinds[f->kind].state && !f->task && !f->at && !f->has_prob;
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
        fault_error e;
        if (!parse_fault(fs->learner_count, fs->prefix, fs->id_base, it, at_start, &tmp[i], &e)) {
            char where[48] = "";
            if (list)
                snprintf(where, sizeof where, "fault %zu of the list: ", i + 1);
            snprintf(err, errlen, "%s%s%s%s", where, e.key, e.key[0] ? ": " : "", e.msg);
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
        if (f->spent || !kinds[f->kind].task_trigger)
            continue;
        if (f->learner >= 0 && f->learner != learner)
            continue;
        if (f->task && strcmp(f->task, name) != 0)
            continue;
        unsigned long n = f->task ? n_name : n_all;
        if (f->at && (n < (unsigned long)f->at || n - (unsigned long)f->at >= (unsigned long)f->times))
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
                                    kind_names[f->kind], f->id);
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
            if (!out->status) {
                out->status = f->status;
                out->code = f->code;
                out->code_message = proto_code_message(error_codes[code_index(f->code)].id);
            }
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
