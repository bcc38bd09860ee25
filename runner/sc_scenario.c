/* sc_scenario: parsing and validation of scenario files (see sc_scenario.h
 * and docs/scenarios.md). Validation collects every error it finds, each as
 * "file:line: path: what is wrong", before the runner starts anything. */
#include "sc_scenario.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evt.h"
#include "fault.h"
#include "jsonx.h"
#include "mo_fault.h"
#include "proto.h"
#include "sc_jpos.h"
#include "sc_profile.h"
#include "suggest.h"
#include "util.h"
#include "xalloc.h"

#define MAX_ERRORS 50

/* A fault's task name that is not the protocol's: checked against the
 * coordinator's script once it is parsed. */
typedef struct {
    char *path; /* of the "task" member */
    char *task;
} pending_task;

typedef struct {
    const char *file;
    sc_jpos *pos;
    xbuf errs;
    int nerr;
    double time_scale; /* for production-time durations */
    pending_task *tasks;
    size_t ntasks;
} vctx;

static void verr(vctx *v, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void verr(vctx *v, const char *path, const char *fmt, ...)
{
    v->nerr++;
    if (v->nerr > MAX_ERRORS)
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int line = v->pos ? sc_jpos_line(v->pos, path) : 1;
    if (path && path[0])
        xbuf_printf(&v->errs, "%s:%d: %s: %s\n", v->file, line, path, msg);
    else
        xbuf_printf(&v->errs, "%s:%d: %s\n", v->file, line, msg);
}

static int line_of(vctx *v, const char *path) { return sc_jpos_line(v->pos, path); }

static char *jpath(const char *path, const char *key)
{
    return path[0] ? xasprintf("%s.%s", path, key) : xstrdup(key);
}

/* ---- names ---- */

const char *sc_when_name(sc_when_kind k)
{
    static const char *const n[] = {"at_ms", "learner_task", "task_sent", "task_done", "log", "ready", "exit"};
    return (unsigned)k < sizeof n / sizeof n[0] ? n[k] : "?";
}

const char *sc_do_name(sc_do d)
{
    static const char *const n[] = {
#define SC_X_NAME(n, s) s,
        SC_DO_LIST(SC_X_NAME)
#undef SC_X_NAME
    };
    return (unsigned)d < SC_DO_COUNT ? n[d] : "?";
}

const char *sc_task_full_name(const char *s)
{
    return proto_task_full_name(s);
}

const char *sc_scenario_proc_name(const sc_scenario *s, int proc)
{
    switch (proc) {
    case SC_PROC_AGG: return "aggregator";
    case SC_PROC_COORD: return "coordinator";
    case SC_PROC_OP: return "operator";
    default:
        if (proc >= SC_PROC_GROUP0 && (size_t)(proc - SC_PROC_GROUP0) < s->ngroups)
            return s->groups[proc - SC_PROC_GROUP0].name;
        return "?";
    }
}

size_t sc_scenario_proc_count(const sc_scenario *s) { return SC_PROC_GROUP0 + s->ngroups; }

int sc_scenario_group_of(const sc_scenario *s, int learner)
{
    for (size_t g = 0; g < s->ngroups; g++)
        if (learner >= s->groups[g].first && learner < s->groups[g].first + s->groups[g].count)
            return (int)g;
    return -1;
}

/* ---- typed getters ---- */

/* Reports every key of obj not in allowed (NULL-terminated). */
static void check_keys(vctx *v, const cJSON *obj, const char *path, const char *const *allowed)
{
    for (const cJSON *it = obj->child; it; it = it->next) {
        bool ok = false;
        for (size_t i = 0; allowed[i]; i++)
            if (strcmp(it->string, allowed[i]) == 0)
                ok = true;
        if (ok)
            continue;
        char *p = jpath(path, it->string);
        const char *best = suggest_nearest(it->string, allowed, (size_t)-1);
        xbuf keys = {0};
        for (size_t i = 0; allowed[i]; i++)
            xbuf_printf(&keys, "%s%s", i ? ", " : "", allowed[i]);
        char *k = xbuf_take(&keys);
        if (best)
            verr(v, p, "unknown key (did you mean '%s'?)", best);
        else
            verr(v, p, "unknown key (known here: %s)", k);
        free(k);
        free(p);
    }
}

static bool want_type(vctx *v, const cJSON *it, const char *path, const char *type)
{
    const char *have = jsonx_type_name(it);
    if (strcmp(have, type) == 0)
        return true;
    verr(v, path, "must be %s %s, not %s", type[0] == 'o' ? "an" : "a", type, have);
    return false;
}

/* Integer member: absent -> def; bad -> error, def. */
static long get_int(vctx *v, const cJSON *obj, const char *path, const char *key, long min, long max, long def)
{
    const cJSON *it = jsonx_get(obj, key);
    if (!it)
        return def;
    char *p = jpath(path, key);
    int64_t x;
    long r = def;
    if (!jsonx_is_number(it)) {
        verr(v, p, "must be an integer, not %s", jsonx_type_name(it));
    } else if (!jsonx_get_i64(it, &x)) {
        verr(v, p, "must be an integer, not %s", it->valuestring ? it->valuestring : "a fraction");
    } else if (x < min || x > max) {
        if (max == LONG_MAX)
            verr(v, p, "must be at least %ld, not %lld", min, (long long)x);
        else
            verr(v, p, "must be between %ld and %ld, not %lld", min, max, (long long)x);
    } else {
        r = (long)x;
    }
    free(p);
    return r;
}

bool sc_duration_parse(const char *text, double *ms)
{
    static const struct {
        const char *unit;
        double ms;
    } units[] = {{"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    double total = 0;
    const char *p = text;
    if (!*p)
        return false;
    while (*p) {
        if (!(*p >= '0' && *p <= '9'))
            return false;
        double x = 0;
        while (*p >= '0' && *p <= '9')
            x = x * 10 + (*p++ - '0');
        if (*p == '.') {
            p++;
            if (!(*p >= '0' && *p <= '9'))
                return false;
            double scale = 1;
            while (*p >= '0' && *p <= '9') {
                scale *= 10;
                x += (*p++ - '0') / scale;
            }
        }
        size_t u = 0;
        size_t n = sizeof units / sizeof units[0];
        /* "ms" before "m" */
        while (u < n && strncmp(p, units[u].unit, strlen(units[u].unit)) != 0)
            u++;
        if (u == n)
            return false;
        p += strlen(units[u].unit);
        total += x * units[u].ms;
        if (total > 1e12)
            return false;
    }
    *ms = total;
    return true;
}

/* A duration member: an integer of milliseconds as it is, or a string in
 * production time ("90s", "1.5s", "250ms", "1m", "1m30s") multiplied by
 * time_scale. Absent -> def; bad -> error, def. */
static long get_ms(vctx *v, const cJSON *obj, const char *path, const char *key, long min, long max, long def)
{
    const cJSON *it = jsonx_get(obj, key);
    if (!it || !cJSON_IsString(it)) {
        if (it && !jsonx_is_number(it)) {
            char *p = jpath(path, key);
            verr(v, p, "must be a duration (an integer of ms, or production time such as \"90s\"), not %s",
                 jsonx_type_name(it));
            free(p);
            return def;
        }
        return get_int(v, obj, path, key, min, max, def);
    }
    char *p = jpath(path, key);
    double ms;
    long r = def;
    if (!sc_duration_parse(it->valuestring, &ms)) {
        verr(v, p, "'%s' is not a duration (write production time as \"90s\", \"1.5s\", \"250ms\", \"1m\", "
                   "\"1m30s\", or an integer of ms)",
             it->valuestring);
    } else {
        double scaled = ms * v->time_scale;
        long x = (long)llround(scaled);
        if (ms > 0 && x == 0)
            verr(v, p, "'%s' x time_scale %g is %g ms, which rounds to 0; write it in ms", it->valuestring,
                 v->time_scale, scaled);
        else if (x < min || x > max)
            verr(v, p, "'%s' x time_scale %g is %ld ms, not between %ld and %ld", it->valuestring, v->time_scale,
                 x, min, max);
        else
            r = x;
    }
    free(p);
    return r;
}

/* A wall-clock member of the runner's own (timeout_ms, sample_ms): never
 * scaled, so a production-time string is refused. */
static long get_wall_ms(vctx *v, const cJSON *obj, const char *path, const char *key, long min, long max, long def)
{
    const cJSON *it = jsonx_get(obj, key);
    if (it && cJSON_IsString(it)) {
        char *p = jpath(path, key);
        verr(v, p, "is wall-clock time, not scaled by time_scale (process start-up does not scale): write an "
                   "integer of ms, not '%s'",
             it->valuestring);
        free(p);
        return def;
    }
    return get_int(v, obj, path, key, min, max, def);
}

static double get_num(vctx *v, const cJSON *obj, const char *path, const char *key, double min, double max,
                      double def, bool *given)
{
    const cJSON *it = jsonx_get(obj, key);
    if (given)
        *given = it != NULL;
    if (!it)
        return def;
    char *p = jpath(path, key);
    double x = def;
    if (!jsonx_is_number(it) || !jsonx_get_double(it, &x)) {
        verr(v, p, "must be a number, not %s", jsonx_type_name(it));
        x = def;
    } else if (!(x > min && x <= max)) {
        verr(v, p, "must be greater than %g and at most %g, not %g", min, max, x);
        x = def;
    }
    free(p);
    return x;
}

static char *get_str(vctx *v, const cJSON *obj, const char *path, const char *key, bool required)
{
    const cJSON *it = jsonx_get(obj, key);
    char *p = jpath(path, key);
    char *r = NULL;
    if (!it) {
        if (required)
            verr(v, path, "missing key '%s'", key);
    } else if (want_type(v, it, p, "string")) {
        r = xstrdup(it->valuestring);
    }
    free(p);
    return r;
}

static int get_bool(vctx *v, const cJSON *obj, const char *path, const char *key, int def)
{
    const cJSON *it = jsonx_get(obj, key);
    if (!it)
        return def;
    char *p = jpath(path, key);
    int r = def;
    if (want_type(v, it, p, "bool"))
        r = cJSON_IsTrue(it);
    free(p);
    return r;
}

/* A list of strings. */
static char **get_str_list(vctx *v, const cJSON *obj, const char *path, const char *key, size_t *n)
{
    *n = 0;
    const cJSON *it = jsonx_get(obj, key);
    if (!it)
        return NULL;
    char *p = jpath(path, key);
    char **r = NULL;
    if (want_type(v, it, p, "list")) {
        size_t i = 0;
        r = xcalloc((size_t)cJSON_GetArraySize(it) + 1, sizeof *r);
        for (const cJSON *e = it->child; e; e = e->next, i++) {
            char *ep = xasprintf("%s[%zu]", p, i);
            if (want_type(v, e, ep, "string"))
                r[(*n)++] = xstrdup(e->valuestring);
            free(ep);
        }
    }
    free(p);
    return r;
}

static void free_strs(char **a, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(a[i]);
    free(a);
}

/* A task name in an event or an expectation that is not the protocol's. */
static void unknown_task(vctx *v, const char *path, const char *name)
{
    const char *near = proto_task_suggest(name);
    if (near)
        verr(v, path, "unknown task '%s' (did you mean '%s'?)", name, near);
    else
        verr(v, path, "unknown task '%s' (resource, start, get_data, learn, close, any)", name);
}

/* ---- learner and process references ---- */

/* "learner3", or "learner0..learner7" for count learners from first. */
static const char *learner_range(int first, int count, char *buf, size_t len)
{
    if (count == 1)
        snprintf(buf, len, "learner%d", first);
    else
        snprintf(buf, len, "learner%d..learner%d", first, first + count - 1);
    return buf;
}

/* "learner7" or 7 -> 7; -1 with an error. */
static int learner_ref(vctx *v, const sc_scenario *s, const cJSON *it, const char *path)
{
    int64_t idx = -1;
    if (jsonx_is_number(it)) {
        if (!jsonx_get_i64(it, &idx))
            idx = -2;
    } else if (cJSON_IsString(it)) {
        const char *t = it->valuestring;
        if (strncmp(t, "learner", 7) == 0 && t[7] >= '0' && t[7] <= '9') {
            char *end;
            errno = 0;
            long x = strtol(t + 7, &end, 10);
            idx = (*end || errno) ? -2 : x;
        } else {
            verr(v, path, "'%s' is not a learner (write \"learnerN\" or N)", t);
            return -1;
        }
    } else {
        verr(v, path, "must name a learner (\"learnerN\" or N), not %s", jsonx_type_name(it));
        return -1;
    }
    if (idx < 0 || idx >= s->nlearners) {
        if (s->nlearners == 0)
            verr(v, path, "no such learner: the scenario has no learners");
        else
            verr(v, path, "no learner %lld: the scenario has %s", (long long)idx,
                 learner_range(0, s->nlearners, (char[40]){0}, 40));
        return -1;
    }
    return (int)idx;
}

/* A process name -> index, or a learner id -> its group's process (learner
 * set to the id). -1 with an error. */
static int proc_ref(vctx *v, const sc_scenario *s, const char *t, const char *path, int *learner)
{
    if (learner)
        *learner = -1;
    for (size_t p = 0; p < sc_scenario_proc_count(s); p++)
        if (strcmp(t, sc_scenario_proc_name(s, (int)p)) == 0) {
            if (p == SC_PROC_OP && !s->k8s) {
                verr(v, path, "no operator: set \"aggregator\": {\"k8s\": true} to start one");
                return -1;
            }
            if (p == SC_PROC_COORD && !s->coordinator) {
                verr(v, path, "no coordinator in this scenario (\"coordinator\": {\"absent\": true})");
                return -1;
            }
            return (int)p;
        }
    if (strncmp(t, "learner", 7) == 0 && t[7] >= '0' && t[7] <= '9') {
        cJSON *tmp = cJSON_CreateString(t);
        int l = learner_ref(v, s, tmp, path);
        cJSON_Delete(tmp);
        if (l < 0)
            return -1;
        if (learner)
            *learner = l;
        return SC_PROC_GROUP0 + sc_scenario_group_of(s, l);
    }
    xbuf k = {0};
    xbuf_puts(&k, "aggregator, coordinator");
    if (s->k8s)
        xbuf_puts(&k, ", operator");
    for (size_t g = 0; g < s->ngroups; g++)
        xbuf_printf(&k, ", %s", s->groups[g].name);
    if (s->nlearners > 0)
        xbuf_printf(&k, ", %s", learner_range(0, s->nlearners, (char[40]){0}, 40));
    char *ks = xbuf_take(&k);
    verr(v, path, "no process or learner '%s' (known: %s)", t, ks);
    free(ks);
    return -1;
}


/* A fault object's "learner" names a learner of the scenario ("learner5") or
 * an index within its group (2) or "all"; mock_learner numbers the learners
 * of its process from 0, so a global id becomes the index in the group. */
static bool localize_fault(vctx *v, const sc_scenario *s, const sc_group *g, cJSON *fault, const char *path)
{
    cJSON *lr = jsonx_get(fault, "learner");
    if (!lr)
        return true;
    int before = v->nerr;
    char *lp = jpath(path, "learner");
    int64_t k;
    if (cJSON_IsString(lr) && strcmp(lr->valuestring, "all") == 0) {
        /* every learner of the group */
    } else if (jsonx_is_number(lr)) {
        if (!jsonx_get_i64(lr, &k) || k < 0 || k >= g->count)
            verr(v, lp, "index %s is not a learner of group '%s' (0..%d); or name it \"learnerN\"",
                 lr->valuestring ? lr->valuestring : "?", g->name, g->count - 1);
    } else {
        int l = learner_ref(v, s, lr, lp);
        if (l >= 0 && (l < g->first || l >= g->first + g->count))
            verr(v, lp, "learner%d is not in group '%s' (%s)", l, g->name,
                 learner_range(g->first, g->count, (char[40]){0}, 40));
        else if (l >= 0)
            cJSON_ReplaceItemInObjectCaseSensitive(fault, "learner", jsonx_new_i64(l - g->first));
    }
    free(lp);
    return v->nerr == before;
}

/* Production-time strings in a fault object's durations (the members "ms"
 * and "*_ms" of both mocks' schemas) become integers of ms, scaled. */
static void fault_durations(vctx *v, cJSON *fault, const char *path)
{
    cJSON *next;
    for (cJSON *m = fault->child; m; m = next) {
        next = m->next;
        size_t n = strlen(m->string);
        if (!cJSON_IsString(m) || !(strcmp(m->string, "ms") == 0 || (n > 3 && strcmp(m->string + n - 3, "_ms") == 0)))
            continue;
        long ms = get_ms(v, fault, path, m->string, 0, FAULT_MAX_MS, -1);
        if (ms >= 0)
            cJSON_ReplaceItemInObjectCaseSensitive(fault, m->string, jsonx_new_i64(ms));
    }
}

/* A learner fault object (its learner already an index in group g), checked
 * by mock_learner's own parser: what the mock would refuse is refused here,
 * with the line. A task name the protocol does not know is checked against
 * the coordinator's script later (check_fault_tasks). */
static void check_learner_fault(vctx *v, const sc_group *g, cJSON *fault, const char *path, bool at_start)
{
    int before = v->nerr;
    fault_durations(v, fault, path);
    if (v->nerr != before)
        return;
    fault_error e;
    if (!fault_check(fault, g->count, "learner", at_start, &e)) {
        char *p = e.key[0] ? jpath(path, e.key) : xstrdup(path);
        verr(v, p, "%s", e.msg);
        free(p);
        return;
    }
    const char *task = jsonx_get_str(fault, "task");
    if (!task)
        return;
    const char *full = proto_task_full_name(task);
    if (full) {
        cJSON_ReplaceItemInObjectCaseSensitive(fault, "task", cJSON_CreateString(full));
        return;
    }
    v->tasks = xrealloc(v->tasks, (v->ntasks + 1) * sizeof *v->tasks);
    v->tasks[v->ntasks].path = jpath(path, "task");
    v->tasks[v->ntasks].task = xstrdup(task);
    v->ntasks++;
}

/* An operator fault object, checked by mock_operator's own parser. */
static void check_operator_fault(vctx *v, cJSON *fault, const char *path)
{
    int before = v->nerr;
    fault_durations(v, fault, path);
    if (v->nerr != before)
        return;
    mo_fault_error e;
    if (!mo_fault_check(fault, &e)) {
        char *p = e.key[0] ? jpath(path, e.key) : xstrdup(path);
        verr(v, p, "%s", e.msg);
        free(p);
    }
}

/* A fault on a task name of the caller's own must name a task the
 * coordinator sends, or it can never fire. */
static void check_fault_tasks(vctx *v, const sc_scenario *s)
{
    cJSON *script = s->script ? cJSON_Parse(s->script) : NULL;
    const cJSON *tasks = jsonx_get(script, "tasks");
    for (size_t i = 0; i < v->ntasks; i++) {
        bool sent = false;
        xbuf names = {0};
        for (const cJSON *t = tasks ? tasks->child : NULL; t; t = t->next) {
            const char *n = jsonx_get_str(t, "name");
            if (!n)
                continue;
            sent |= strcmp(n, v->tasks[i].task) == 0;
            xbuf_printf(&names, "%s%s", names.len ? ", " : "", n);
        }
        char *ns = xbuf_take(&names);
        if (!sent && !s->coordinator)
            verr(v, v->tasks[i].path, "no task '%s' is sent: the scenario has no coordinator", v->tasks[i].task);
        else if (!sent && !s->script)
            verr(v, v->tasks[i].path,
                 "no task '%s' is sent: the coordinator's rounds send resource, start, get_data, learn, close "
                 "(learner_*_task)",
                 v->tasks[i].task);
        else if (!sent)
            verr(v, v->tasks[i].path, "no task '%s' is sent: the coordinator's script sends %s", v->tasks[i].task,
                 ns[0] ? ns : "nothing");
        free(ns);
    }
    cJSON_Delete(script);
}

/* ---- sections ---- */

static void parse_timings(vctx *v, sc_scenario *s, const cJSON *root)
{
    static const char *const keys[] = {"heartbeat_span_ms", "heartbeat_tolerance_ms", "max_retry_ms",
                                       "retry_interval_ms", "sync_period_ms", "task_deadline_ms", NULL};
    static const long defs[] = {SC_DEF_HEARTBEAT_SPAN_MS, SC_DEF_HEARTBEAT_TOLERANCE_MS, SC_DEF_MAX_RETRY_MS,
                                SC_DEF_RETRY_INTERVAL_MS, SC_DEF_SYNC_PERIOD_MS, SC_DEF_TASK_DEADLINE_MS};
    long *outs[] = {&s->heartbeat_span_ms, &s->heartbeat_tolerance_ms, &s->max_retry_ms,
                    &s->retry_interval_ms, &s->sync_period_ms, &s->task_deadline_ms};
    const cJSON *t = jsonx_get(root, "timings");
    if (t && !want_type(v, t, "timings", "object"))
        t = NULL;
    if (t)
        check_keys(v, t, "timings", keys);
    for (int i = 0; i < 6; i++) {
        long scaled = (long)llround((double)defs[i] * s->time_scale);
        if (t && jsonx_get(t, keys[i])) {
            *outs[i] = get_ms(v, t, "timings", keys[i], 1, SC_TIMEOUT_MAX_MS * 10, scaled);
            s->timing_given[i] = true;
        } else {
            *outs[i] = scaled;
            if (scaled < SC_MIN_SCALED_MS)
                verr(v, "time_scale",
                     "%g makes %s %ld ms (%ld ms x %g), below the least the runner allows (%ld ms); "
                     "raise time_scale or give timings.%s",
                     s->time_scale, keys[i], scaled, defs[i], s->time_scale, SC_MIN_SCALED_MS, keys[i]);
        }
    }
    if (s->heartbeat_tolerance_ms <= s->heartbeat_span_ms)
        verr(v, t ? "timings" : "time_scale",
             "heartbeat tolerance (%ld ms) must exceed the heartbeat span (%ld ms), or every learner is dropped",
             s->heartbeat_tolerance_ms, s->heartbeat_span_ms);
    long coord_tolerance = (long)llround((double)SC_DEF_HEARTBEAT_TOLERANCE_MS * s->time_scale);
    if (s->timing_given[0] && s->heartbeat_span_ms >= coord_tolerance)
        verr(v, "timings.heartbeat_span_ms",
             "%ld ms is not below the coordinator's heartbeat tolerance (%ld ms = 17000 ms x time_scale %g): "
             "the coordinator would drop the aggregator; raise time_scale",
             s->heartbeat_span_ms, coord_tolerance, s->time_scale);
    if (s->retry_interval_ms > s->max_retry_ms)
        verr(v, t ? "timings" : "time_scale", "retry interval (%ld ms) is longer than the retry window (%ld ms)",
             s->retry_interval_ms, s->max_retry_ms);
}

static void parse_groups(vctx *v, sc_scenario *s, const cJSON *root)
{
    static const char *const keys[] = {"name", "count", "batch_size", "learn_time_ms", "heartbeat_span_ms",
                                       "start_ms", "absent", "configured", "faults", "args", "command",
                                       "address", NULL};
    const cJSON *ls = jsonx_get(root, "learners");
    if (!ls)
        return;
    if (!want_type(v, ls, "learners", "list"))
        return;
    size_t n = (size_t)cJSON_GetArraySize(ls);
    if (n > SC_GROUPS_MAX) {
        verr(v, "learners", "at most %d groups, not %zu", SC_GROUPS_MAX, n);
        return;
    }
    s->groups = xcalloc(n ? n : 1, sizeof *s->groups);
    size_t i = 0;
    for (const cJSON *g = ls->child; g; g = g->next, i++) {
        char *p = xasprintf("learners[%zu]", i);
        if (!want_type(v, g, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, g, p, keys);
        sc_group *gr = &s->groups[s->ngroups++];
        gr->line = line_of(v, p);
        gr->name = get_str(v, g, p, "name", false);
        if (!gr->name)
            gr->name = xasprintf("group%zu", i);
        char *np = jpath(p, "name");
        static const char *const reserved[] = {"aggregator", "coordinator", "operator", "runner", NULL};
        for (size_t r = 0; reserved[r]; r++)
            if (strcmp(gr->name, reserved[r]) == 0)
                verr(v, np, "'%s' is the name of another process", gr->name);
        if (strncmp(gr->name, "learner", 7) == 0 && gr->name[7] >= '0' && gr->name[7] <= '9')
            verr(v, np, "'%s' looks like a learner id; give the group another name", gr->name);
        if (!gr->name[0] || strspn(gr->name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") !=
                                strlen(gr->name))
            verr(v, np, "'%s': use letters, digits, '_' and '-' only", gr->name);
        for (size_t o = 0; o + 1 < s->ngroups; o++)
            if (strcmp(s->groups[o].name, gr->name) == 0)
                verr(v, np, "two groups named '%s' (the other at line %d)", gr->name, s->groups[o].line);
        free(np);
        gr->count = (int)get_int(v, g, p, "count", 1, SC_LEARNERS_MAX, 1);
        gr->first = s->nlearners;
        s->nlearners += gr->count;
        gr->batch_size = (int)get_int(v, g, p, "batch_size", 0, 1000000, 4);
        gr->learn_time_ms = get_ms(v, g, p, "learn_time_ms", 0, SC_TIMEOUT_MAX_MS, 0);
        gr->heartbeat_span_ms = get_ms(v, g, p, "heartbeat_span_ms", 1, SC_TIMEOUT_MAX_MS, 0);
        gr->start_ms = get_ms(v, g, p, "start_ms", 0, SC_TIMEOUT_MAX_MS, -1);
        gr->absent = get_bool(v, g, p, "absent", 0);
        gr->configured = get_bool(v, g, p, "configured", 1);
        if (gr->absent && jsonx_get(g, "start_ms"))
            verr(v, p, "a group cannot be both absent and started at start_ms");
        gr->args = get_str_list(v, g, p, "args", &gr->nargs);
        if (jsonx_get(g, "command")) {
            size_t nc = 0;
            char **c = get_str_list(v, g, p, "command", &nc);
            gr->command = xcalloc(nc + 1, sizeof *gr->command);
            for (size_t k = 0; k < nc; k++)
                gr->command[k] = c[k];
            free(c);
            char *cp = jpath(p, "command");
            if (!nc)
                verr(v, cp, "an empty command; give the learner's executable and its arguments");
            free(cp);
        }
        gr->address = get_str(v, g, p, "address", false);
        if (gr->address) {
            char *ap = jpath(p, "address");
            const char *colon = strrchr(gr->address, ':');
            int64_t port;
            if (!colon || colon == gr->address || !util_parse_i64(colon + 1, 1, 65535, &port))
                verr(v, ap, "'%s': expected HOST:PORT of a learner already running", gr->address);
            if (gr->command)
                verr(v, ap, "a group is either a command or an address, not both");
            if (gr->count != 1)
                verr(v, ap, "an address is one learner: count must be 1");
            if (jsonx_get(g, "start_ms") || gr->absent)
                verr(v, ap, "a learner already running is neither started later nor absent");
            free(ap);
        }
        if (!SC_GROUP_IS_MOCK(gr)) {
            static const char *const mock_only[] = {"faults", "args", "batch_size", "learn_time_ms",
                                                    "heartbeat_span_ms", NULL};
            for (size_t k = 0; mock_only[k]; k++)
                if (jsonx_get(g, mock_only[k])) {
                    char *kp = jpath(p, mock_only[k]);
                    verr(v, kp, "'%s' is a setting of the mock learner; group '%s' is given by %s", mock_only[k],
                         gr->name, gr->command ? "command" : "address");
                    free(kp);
                }
        }
        const cJSON *f = jsonx_get(g, "faults");
        if (f) {
            char *fp = jpath(p, "faults");
            if (want_type(v, f, fp, "list")) {
                gr->faults = xcalloc((size_t)cJSON_GetArraySize(f) + 1, sizeof *gr->faults);
                size_t k = 0;
                for (const cJSON *e = f->child; e; e = e->next, k++) {
                    char *ep = xasprintf("%s[%zu]", fp, k);
                    if (want_type(v, e, ep, "object")) {
                        cJSON *copy = jsonx_dup(e);
                        if (localize_fault(v, s, gr, copy, ep))
                            check_learner_fault(v, gr, copy, ep, true);
                        gr->faults[gr->nfaults++] = jsonx_print(copy);
                        cJSON_Delete(copy);
                    }
                    free(ep);
                }
            }
            free(fp);
        }
        free(p);
    }
    if (s->nlearners > SC_LEARNERS_MAX)
        verr(v, "learners", "%d learners in all; at most %d", s->nlearners, SC_LEARNERS_MAX);
}

static void parse_aggregator(vctx *v, sc_scenario *s, const cJSON *root)
{
    static const char *const keys[] = {"args", "env", "k8s", "profile", NULL};
    static const char *const opkeys[] = {"args", "faults", NULL};
    const cJSON *a = jsonx_get(root, "aggregator");
    if (a && want_type(v, a, "aggregator", "object")) {
        check_keys(v, a, "aggregator", keys);
        s->agg_args = get_str_list(v, a, "aggregator", "args", &s->nagg_args);
        s->k8s = get_bool(v, a, "aggregator", "k8s", 0);
        char *pf = get_str(v, a, "aggregator", "profile", false);
        if (pf) {
            /* relative to the scenario's folder */
            const char *sl = strrchr(s->path, '/');
            char *full = pf[0] == '/' || !sl ? xstrdup(pf) : xasprintf("%.*s/%s", (int)(sl - s->path), s->path, pf);
            char perr[2048];
            if (sc_profile_load(full, &s->profile, perr, sizeof perr) != 0)
                verr(v, "aggregator.profile", "%s", perr);
            free(full);
            free(pf);
        }
        const cJSON *e = jsonx_get(a, "env");
        if (e && want_type(v, e, "aggregator.env", "object")) {
            s->agg_env = xcalloc((size_t)cJSON_GetArraySize(e) + 1, sizeof *s->agg_env);
            for (const cJSON *it = e->child; it; it = it->next) {
                char *p = jpath("aggregator.env", it->string);
                if (want_type(v, it, p, "string"))
                    s->agg_env[s->nagg_env++] = xasprintf("%s=%s", it->string, it->valuestring);
                if (strncmp(it->string, "KUBERNETES_", 11) == 0)
                    verr(v, p, "the runner sets the KUBERNETES_* variables itself (\"k8s\": true)");
                free(p);
            }
        }
    }
    const cJSON *o = jsonx_get(root, "operator");
    if (o && want_type(v, o, "operator", "object")) {
        check_keys(v, o, "operator", opkeys);
        if (!s->k8s)
            verr(v, "operator", "an operator only runs in k8s mode: add \"aggregator\": {\"k8s\": true}");
        s->op_args = get_str_list(v, o, "operator", "args", &s->nop_args);
        const cJSON *f = jsonx_get(o, "faults");
        if (f && want_type(v, f, "operator.faults", "list")) {
            s->op_faults = xcalloc((size_t)cJSON_GetArraySize(f) + 1, sizeof *s->op_faults);
            size_t k = 0;
            for (const cJSON *it = f->child; it; it = it->next, k++) {
                char *p = xasprintf("operator.faults[%zu]", k);
                if (want_type(v, it, p, "object")) {
                    cJSON *copy = jsonx_dup(it);
                    check_operator_fault(v, copy, p);
                    s->op_faults[s->nop_faults++] = jsonx_print(copy);
                    cJSON_Delete(copy);
                }
                free(p);
            }
        }
    }
}

static void parse_coordinator(vctx *v, sc_scenario *s, const cJSON *root)
{
    static const char *const keys[] = {"rounds", "script", "expect_learners", "start_ms", "task_deadline_ms",
                                       "absent", "args", NULL};
    s->coordinator = true;
    s->rounds = -1;
    s->expect_learners = -1;
    const cJSON *c = jsonx_get(root, "coordinator");
    if (!c)
        return;
    if (!want_type(v, c, "coordinator", "object"))
        return;
    check_keys(v, c, "coordinator", keys);
    s->coordinator = !get_bool(v, c, "coordinator", "absent", 0);
    s->rounds = (int)get_int(v, c, "coordinator", "rounds", 0, 100000, -1);
    s->expect_learners = (int)get_int(v, c, "coordinator", "expect_learners", 0, SC_LEARNERS_MAX, -1);
    s->coord_start_ms = get_ms(v, c, "coordinator", "start_ms", 0, SC_TIMEOUT_MAX_MS, 0);
    s->coord_deadline_ms = get_ms(v, c, "coordinator", "task_deadline_ms", 1, SC_TIMEOUT_MAX_MS, 0);
    s->coord_args = get_str_list(v, c, "coordinator", "args", &s->ncoord_args);
    /* the script: a list of tasks, or {"tasks": [...], "stop_on_failure": b}
     * (mock_coordinator's format); short task names become full ones */
    const cJSON *sc = jsonx_get(c, "script");
    if (sc) {
        static const char *const skeys[] = {"tasks", "stop_on_failure", "comment", NULL};
        static const char *const tkeys[] = {"name", "data", "items", "expect", "deadline_ms", "delay_ms", "stop_on_failure",
                                            "comment", NULL};
        const cJSON *list = sc;
        const char *lpath = "coordinator.script";
        char *lpath_own = NULL;
        cJSON *out = cJSON_CreateObject();
        if (cJSON_IsObject(sc)) {
            check_keys(v, sc, "coordinator.script", skeys);
            list = jsonx_get(sc, "tasks");
            lpath = lpath_own = xstrdup("coordinator.script.tasks");
            if (!list)
                verr(v, "coordinator.script", "missing key 'tasks'");
            const cJSON *sof = jsonx_get(sc, "stop_on_failure");
            if (sof && want_type(v, sof, "coordinator.script.stop_on_failure", "bool"))
                cJSON_AddItemToObject(out, "stop_on_failure", jsonx_dup(sof));
        }
        cJSON *tasks = cJSON_AddArrayToObject(out, "tasks");
        if (list && want_type(v, list, lpath, "list")) {
            size_t i = 0;
            for (const cJSON *st = list->child; st; st = st->next, i++) {
                char *p = xasprintf("%s[%zu]", lpath, i);
                if (want_type(v, st, p, "object")) {
                    check_keys(v, st, p, tkeys);
                    cJSON *copy = jsonx_dup(st);
                    const cJSON *dl = jsonx_get(st, "deadline_ms");
                    if (dl && cJSON_IsString(dl)) {
                        long ms = get_ms(v, st, p, "deadline_ms", 1, SC_TIMEOUT_MAX_MS, -1);
                        if (ms > 0)
                            cJSON_ReplaceItemInObjectCaseSensitive(copy, "deadline_ms", jsonx_new_i64(ms));
                    }
                    const cJSON *tn = jsonx_get(st, "name");
                    char *tp = jpath(p, "name");
                    if (!tn) {
                        verr(v, p, "missing key 'name' (the task's name)");
                    } else if (want_type(v, tn, tp, "string")) {
                        const char *full = sc_task_full_name(tn->valuestring);
                        if (full) {
                            cJSON_ReplaceItemInObjectCaseSensitive(copy, "name", cJSON_CreateString(full));
                        } else {
                            /* unknown names are legitimate (a scenario tests
                             * them), but a near miss is a typo */
                            const char *near = proto_task_suggest(tn->valuestring);
                            if (near)
                                verr(v, tp, "unknown task name '%s' (did you mean '%s'?)", tn->valuestring,
                                     near);
                        }
                    }
                    free(tp);
                    cJSON_AddItemToArray(tasks, copy);
                }
                free(p);
            }
        }
        free(lpath_own);
        s->script = jsonx_print(out);
        cJSON_Delete(out);
    }
    if (s->script && s->rounds >= 0)
        verr(v, "coordinator", "give either rounds or script, not both");
    if (!s->coordinator && (s->script || s->rounds >= 0))
        verr(v, "coordinator", "an absent coordinator has no rounds or script");
}

/* Parses "on" of an action into w. */
static void parse_when(vctx *v, sc_scenario *s, const cJSON *on, const char *path, sc_when *w)
{
    static const char *const keys[] = {"event", "learner", "task", "nth", "process", "contains", NULL};
    if (!cJSON_IsObject(on)) {
        /* the shape of the event meant, or of the commonest one */
        static const struct {
            const char *event, *shape;
        } shapes[] = {
            {"learner_task", "{\"event\": \"learner_task\", \"learner\": \"learner0\", \"task\": \"learn\", \"nth\": 2}"},
            {"task_sent", "{\"event\": \"task_sent\", \"task\": \"learn\", \"nth\": 2}"},
            {"task_done", "{\"event\": \"task_done\", \"task\": \"learn\", \"nth\": 1}"},
            {"ready", "{\"event\": \"ready\", \"process\": \"aggregator\"}"},
            {"exit", "{\"event\": \"exit\", \"process\": \"coordinator\"}"},
        };
        size_t k = 0;
        if (cJSON_IsString(on))
            while (k + 1 < sizeof shapes / sizeof shapes[0] && strcmp(on->valuestring, shapes[k].event) != 0)
                k++;
        verr(v, path, "must be an object such as %s, not %s%s%s%s", shapes[k].shape, jsonx_type_name(on),
             cJSON_IsString(on) ? " '" : "", cJSON_IsString(on) ? on->valuestring : "", cJSON_IsString(on) ? "'" : "");
        return;
    }
    check_keys(v, on, path, keys);
    char *ev = get_str(v, on, path, "event", true);
    if (!ev)
        return;
    char *evp = jpath(path, "event");
    static const sc_when_kind kinds[] = {SC_WHEN_LEARNER_TASK, SC_WHEN_TASK_SENT, SC_WHEN_TASK_DONE,
                                         SC_WHEN_LOG, SC_WHEN_READY, SC_WHEN_EXIT};
    bool found = false;
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
        if (strcmp(ev, sc_when_name(kinds[i])) == 0) {
            w->kind = kinds[i];
            found = true;
        }
    if (!found) {
        verr(v, evp, "unknown event '%s' (learner_task, task_sent, task_done, log, ready, exit)", ev);
        free(ev);
        free(evp);
        return;
    }
    free(ev);
    free(evp);
    w->learner = -1;
    w->nth = (int)get_int(v, on, path, "nth", 1, 1000000, 1);
    const cJSON *t = jsonx_get(on, "task");
    if (t) {
        char *tp = jpath(path, "task");
        if (want_type(v, t, tp, "string")) {
            const char *full = sc_task_full_name(t->valuestring);
            if (full)
                w->task = xstrdup(full);
            else if (strcmp(t->valuestring, "any") != 0)
                unknown_task(v, tp, t->valuestring);
        }
        free(tp);
    }
    const cJSON *l = jsonx_get(on, "learner");
    char *lp = jpath(path, "learner");
    char *pp = jpath(path, "process");
    switch (w->kind) {
    case SC_WHEN_LEARNER_TASK:
        if (l)
            w->learner = learner_ref(v, s, l, lp);
        if (s->nlearners == 0)
            verr(v, path, "event learner_task in a scenario without learners");
        break;
    case SC_WHEN_TASK_SENT:
    case SC_WHEN_TASK_DONE:
        if (l)
            verr(v, lp, "the coordinator's events name no learner");
        if (!s->coordinator)
            verr(v, path, "event %s needs a coordinator", sc_when_name(w->kind));
        break;
    default:
        if (l)
            verr(v, lp, "event %s names a process, not a learner", sc_when_name(w->kind));
        if (t)
            verr(v, path, "event %s takes no task", sc_when_name(w->kind));
        w->process = get_str(v, on, path, "process", true);
        if (w->process)
            proc_ref(v, s, w->process, pp, NULL);
        break;
    }
    if (w->kind == SC_WHEN_LOG) {
        verr(v, path, "the log event is no longer a trigger: the runner reads the processes' events, not their "
                      "logs (docs/events.md); use learner_task, task_sent, task_done, ready or exit");
        w->contains = get_str(v, on, path, "contains", true);
        if (w->contains && !w->contains[0])
            verr(v, path, "contains: an empty text matches every line");
    } else if (jsonx_get(on, "contains")) {
        verr(v, path, "only the log event takes contains");
    }
    free(lp);
    free(pp);
}

static void parse_actions(vctx *v, sc_scenario *s, const cJSON *root)
{
    static const char *const keys[] = {"at_ms", "on", "delay_ms", "do", "target", "fault", "duration_ms",
                                       "learners", "addresses", NULL};
    const cJSON *as = jsonx_get(root, "actions");
    if (!as || !want_type(v, as, "actions", "list"))
        return;
    size_t n = (size_t)cJSON_GetArraySize(as);
    if (n > SC_ACTIONS_MAX) {
        verr(v, "actions", "at most %d actions, not %zu", SC_ACTIONS_MAX, n);
        return;
    }
    s->actions = xcalloc(n ? n : 1, sizeof *s->actions);
    size_t i = 0;
    for (const cJSON *a = as->child; a; a = a->next, i++) {
        char *p = xasprintf("actions[%zu]", i);
        if (!want_type(v, a, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, a, p, keys);
        sc_action *ac = &s->actions[s->nactions++];
        ac->line = line_of(v, p);
        ac->proc = -1;
        ac->learner = -1;
        const cJSON *at = jsonx_get(a, "at_ms"), *on = jsonx_get(a, "on");
        if (at && on)
            verr(v, p, "give either at_ms or on, not both");
        else if (!at && !on)
            verr(v, p, "missing key 'at_ms' or 'on' (when to act)");
        if (at) {
            ac->when.kind = SC_WHEN_AT;
            ac->when.at_ms = get_ms(v, a, p, "at_ms", 0, SC_TIMEOUT_MAX_MS, 0);
            if (jsonx_get(a, "delay_ms"))
                verr(v, p, "delay_ms goes with on; add it to at_ms instead");
        } else if (on) {
            char *op = jpath(p, "on");
            parse_when(v, s, on, op, &ac->when);
            free(op);
            ac->when.delay_ms = get_ms(v, a, p, "delay_ms", 0, SC_TIMEOUT_MAX_MS, 0);
        }
        char *what = get_str(v, a, p, "do", true);
        char *dp = jpath(p, "do");
        char *tp = jpath(p, "target");
        bool known = false;
        if (what) {
            for (int d = 0; d < SC_DO_COUNT; d++)
                if (strcmp(what, sc_do_name((sc_do)d)) == 0) {
                    ac->what = (sc_do)d;
                    known = true;
                }
            if (!known) {
                xbuf k = {0};
                for (int d = 0; d < SC_DO_COUNT; d++)
                    xbuf_printf(&k, "%s%s", d ? ", " : "", sc_do_name((sc_do)d));
                char *ks = xbuf_take(&k);
                verr(v, dp, "unknown action '%s' (%s)", what, ks);
                free(ks);
            }
        }
        free(what);
        if (known) {
            bool op_action = ac->what == SC_DO_OPERATOR_SET || ac->what == SC_DO_OPERATOR_FAULT ||
                             ac->what == SC_DO_OPERATOR_CLEAR;
            ac->target = get_str(v, a, p, "target", !op_action);
            if (op_action && !s->k8s)
                verr(v, dp, "%s needs the operator: add \"aggregator\": {\"k8s\": true}", sc_do_name(ac->what));
            if (op_action && ac->target)
                verr(v, tp, "%s acts on the operator; it takes no target", sc_do_name(ac->what));
            if (ac->target && !op_action) {
                ac->proc = proc_ref(v, s, ac->target, tp, &ac->learner);
                if (ac->proc >= SC_PROC_GROUP0 && ac->learner >= 0 && ac->what != SC_DO_FAULT &&
                    ac->what != SC_DO_CLEAR_FAULTS) {
                    const sc_group *g = &s->groups[ac->proc - SC_PROC_GROUP0];
                    if (g->count > 1)
                        verr(v, tp,
                             "'%s' shares its process (group '%s') with %d other learners, so '%s' would hit "
                             "them all; put it in a group of its own or target the group",
                             ac->target, g->name, g->count - 1, sc_do_name(ac->what));
                }
                if ((ac->what == SC_DO_FAULT || ac->what == SC_DO_CLEAR_FAULTS) && ac->proc >= 0 &&
                    ac->proc < SC_PROC_GROUP0)
                    verr(v, tp, "%s goes to a learner group's control port; use operator_fault for the operator",
                         sc_do_name(ac->what));
                if (ac->proc >= SC_PROC_GROUP0 && s->groups[ac->proc - SC_PROC_GROUP0].address)
                    verr(v, tp, "group '%s' is a learner already running (an address): the runner has no process "
                         "of it to signal or fault", s->groups[ac->proc - SC_PROC_GROUP0].name);
                else if ((ac->what == SC_DO_FAULT || ac->what == SC_DO_CLEAR_FAULTS) && ac->proc >= SC_PROC_GROUP0 &&
                         s->groups[ac->proc - SC_PROC_GROUP0].command)
                    verr(v, tp, "%s is a protocol fault and needs the mock learner; group '%s' is given by command "
                         "(process actions work on it: kill, term, stop, cont, restart)",
                         sc_do_name(ac->what), s->groups[ac->proc - SC_PROC_GROUP0].name);
                if (ac->what == SC_DO_START && ac->proc >= SC_PROC_GROUP0 &&
                    !s->groups[ac->proc - SC_PROC_GROUP0].absent)
                    verr(v, dp, "start is for a group marked \"absent\": true; '%s' is started by the runner",
                         ac->target);
                if (ac->what == SC_DO_START && ac->proc >= 0 && ac->proc < SC_PROC_GROUP0)
                    verr(v, dp, "start is for learner groups; the %s is started by the runner", ac->target);
            }
            const cJSON *f = jsonx_get(a, "fault");
            if (ac->what == SC_DO_FAULT || ac->what == SC_DO_OPERATOR_FAULT) {
                char *fp = jpath(p, "fault");
                if (!f)
                    verr(v, p, "missing key 'fault' (the fault object)");
                else if (want_type(v, f, fp, "object")) {
                    cJSON *copy = jsonx_dup(f);
                    if (ac->what == SC_DO_FAULT && ac->proc >= SC_PROC_GROUP0) {
                        const sc_group *g = &s->groups[ac->proc - SC_PROC_GROUP0];
                        bool ok = true;
                        if (ac->learner >= 0) {
                            if (jsonx_get(copy, "learner")) {
                                verr(v, fp, "the target names the learner already; drop \"learner\" here");
                                ok = false;
                            } else {
                                cJSON_AddItemToObject(copy, "learner", jsonx_new_i64(ac->learner - g->first));
                            }
                        } else {
                            ok = localize_fault(v, s, g, copy, fp);
                        }
                        if (ok)
                            check_learner_fault(v, g, copy, fp, false);
                    } else if (ac->what == SC_DO_OPERATOR_FAULT) {
                        check_operator_fault(v, copy, fp);
                    }
                    ac->fault = jsonx_print(copy);
                    cJSON_Delete(copy);
                }
                free(fp);
            } else if (f) {
                verr(v, p, "only fault and operator_fault take a fault object");
            }
            ac->duration_ms = get_ms(v, a, p, "duration_ms", 1, SC_TIMEOUT_MAX_MS, 0);
            if (jsonx_get(a, "duration_ms") && ac->what != SC_DO_STOP)
                verr(v, p, "duration_ms goes with stop (cont after that long)");
            const cJSON *ls = jsonx_get(a, "learners");
            if (ac->what == SC_DO_OPERATOR_SET) {
                char *lp = jpath(p, "learners");
                if (!ls)
                    verr(v, p, "missing key 'learners' (the new list; [] empties it)");
                else if (want_type(v, ls, lp, "list")) {
                    ac->learners = xcalloc((size_t)cJSON_GetArraySize(ls) + 1, sizeof *ac->learners);
                    size_t k = 0;
                    for (const cJSON *e = ls->child; e; e = e->next, k++) {
                        char *ep = xasprintf("%s[%zu]", lp, k);
                        int l = learner_ref(v, s, e, ep);
                        if (l >= 0)
                            ac->learners[ac->nlearners++] = l;
                        free(ep);
                    }
                }
                free(lp);
                ac->addrs = get_str_list(v, a, p, "addresses", &ac->naddrs);
            } else if (ls || jsonx_get(a, "addresses")) {
                verr(v, p, "only operator_set takes learners and addresses");
            }
        }
        free(dp);
        free(tp);
        free(p);
    }
}

static void parse_expect_tasks(vctx *v, sc_scenario *s, const cJSON *list, const char *path)
{
    static const char *const keys[] = {"index", "name", "nth", "status", "message_contains", "result",
                                       "result_has", "result_lacks", "result_len", "latency_max_ms", NULL};
    sc_expect *e = &s->expect;
    if (!want_type(v, list, path, "list"))
        return;
    e->tasks = xcalloc((size_t)cJSON_GetArraySize(list) + 1, sizeof *e->tasks);
    size_t i = 0;
    for (const cJSON *t = list->child; t; t = t->next, i++) {
        char *p = xasprintf("%s[%zu]", path, i);
        if (!want_type(v, t, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, t, p, keys);
        sc_expect_task *x = &e->tasks[e->ntasks++];
        x->line = line_of(v, p);
        x->index = (int)get_int(v, t, p, "index", 0, 1000000, -1);
        char *name = get_str(v, t, p, "name", false);
        if (name) {
            const char *full = sc_task_full_name(name);
            x->name = xstrdup(full ? full : name);
            free(name);
        }
        x->nth = (int)get_int(v, t, p, "nth", 1, 1000000, 1);
        if (x->index >= 0 && x->name && jsonx_get(t, "nth"))
            verr(v, p, "give index, or name and nth, not both");
        if (x->index < 0 && !x->name)
            verr(v, p, "say which task: index (0-based, in the order sent) or name (and nth)");
        x->status = get_str(v, t, p, "status", false);
        if (x->status && strcmp(x->status, "completed") != 0 && strcmp(x->status, "failed") != 0) {
            char *sp = jpath(p, "status");
            verr(v, sp, "must be \"completed\" or \"failed\", not \"%s\"", x->status);
            free(sp);
        }
        x->message_contains = get_str(v, t, p, "message_contains", false);
        const cJSON *r = jsonx_get(t, "result");
        char *rp = jpath(p, "result");
        if (r && want_type(v, r, rp, "object"))
            x->result = jsonx_dup(r);
        free(rp);
        r = jsonx_get(t, "result_len");
        rp = jpath(p, "result_len");
        if (r && want_type(v, r, rp, "object")) {
            for (const cJSON *it = r->child; it; it = it->next) {
                char *ip = jpath(rp, it->string);
                int64_t n;
                if (!jsonx_get_i64(it, &n) || n < 0)
                    verr(v, ip, "must be a length (an integer >= 0)");
                free(ip);
            }
            x->result_len = jsonx_dup(r);
        }
        free(rp);
        x->result_has = get_str_list(v, t, p, "result_has", &x->nresult_has);
        x->result_lacks = get_str_list(v, t, p, "result_lacks", &x->nresult_lacks);
        x->latency_max_ms = get_ms(v, t, p, "latency_max_ms", 1, SC_TIMEOUT_MAX_MS, 0);
        free(p);
    }
}

/* expect.events: [{"process", "event", "learner"?, "where"?, "contains"?,
 * "min"?, "max"?}] (see sc_expect_event). */
static void parse_expect_events(vctx *v, sc_scenario *s, const cJSON *ev)
{
    sc_expect *e = &s->expect;
    if (!ev || !want_type(v, ev, "expect.events", "list"))
        return;
    static const char *const k2[] = {"process", "event", "learner", "where", "contains", "min", "max", NULL};
    e->events = xcalloc((size_t)cJSON_GetArraySize(ev) + 1, sizeof *e->events);
    size_t i = 0;
    for (const cJSON *m = ev->child; m; m = m->next, i++) {
        char *p = xasprintf("expect.events[%zu]", i);
        if (!want_type(v, m, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, m, p, k2);
        sc_expect_event *x = &e->events[e->nevents++];
        x->line = line_of(v, p);
        x->learner = -1;
        x->process = get_str(v, m, p, "process", true);
        if (x->process) {
            char *pp = jpath(p, "process");
            proc_ref(v, s, x->process, pp, NULL);
            free(pp);
        }
        char *name = get_str(v, m, p, "event", true);
        x->event = name ? evt_lookup(name) : -1;
        if (name && x->event < 0) {
            xbuf known = {0};
            for (int k = 0; k < EVT_COUNT; k++)
                xbuf_printf(&known, "%s%s", k ? ", " : "", evt_name((evt_id)k));
            char *ep = jpath(p, "event");
            verr(v, ep, "no event '%s' (docs/events.md: %s)", name, known.data);
            free(ep);
            xbuf_free(&known);
        }
        free(name);
        const cJSON *lr = jsonx_get(m, "learner");
        if (lr) {
            char *lp = jpath(p, "learner");
            x->learner = learner_ref(v, s, lr, lp);
            free(lp);
        }
        for (int w = 0; w < 2; w++) {
            const char *key = w ? "contains" : "where";
            const cJSON *o = jsonx_get(m, key);
            if (!o)
                continue;
            char *op = jpath(p, key);
            if (want_type(v, o, op, "object")) {
                for (const cJSON *f = o->child; f; f = f->next) {
                    int fid = -1;
                    for (int k = 0; k < EVT_FIELD_COUNT; k++)
                        if (strcmp(evt_field_name((evt_field_id)k), f->string) == 0)
                            fid = k;
                    char *fp = jpath(op, f->string);
                    if (fid < 0 || (x->event >= 0 && !(evt_mask((evt_id)x->event) & (UINT64_C(1) << fid))))
                        verr(v, fp, "the event %s has no field '%s' (docs/events.md)",
                             x->event >= 0 ? evt_name((evt_id)x->event) : "?", f->string);
                    else if (w && !cJSON_IsString(f))
                        verr(v, fp, "must be a string (a text the field contains), not %s", jsonx_type_name(f));
                    free(fp);
                }
                if (w)
                    x->contains = jsonx_dup(o);
                else
                    x->where = jsonx_dup(o);
            }
            free(op);
        }
        x->min = (int)get_int(v, m, p, "min", 0, 1000000000L, 1);
        x->max = (int)get_int(v, m, p, "max", -1, 1000000000L, -1);
        if (x->max >= 0 && x->min > x->max) {
            verr(v, p, "min %d is above max %d", x->min, x->max);
        }
        free(p);
    }
}

/* expect.world_size */
static void parse_expect_world_size(vctx *v, sc_scenario *s, const cJSON *ws)
{
    sc_expect *e = &s->expect;
    if (!want_type(v, ws, "expect.world_size", "list"))
        return;
    static const char *const k2[] = {"eventually", "at_end", "never_above", "never_below", "by_ms",
                                     "from_ms", "to_ms", NULL};
    e->world = xcalloc((size_t)cJSON_GetArraySize(ws) + 1, sizeof *e->world);
    size_t i = 0;
    for (const cJSON *w = ws->child; w; w = w->next, i++) {
        char *p = xasprintf("expect.world_size[%zu]", i);
        if (!want_type(v, w, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, w, p, k2);
        sc_expect_world *wx = &e->world[e->nworld++];
        wx->line = line_of(v, p);
        int kinds = 0;
        static const char *const kn[] = {"eventually", "at_end", "never_above", "never_below"};
        for (int k = 0; k < 4; k++)
            if (jsonx_get(w, kn[k])) {
                kinds++;
                wx->kind = (sc_ws_kind)k;
                wx->value = (int)get_int(v, w, p, kn[k], 0, SC_LEARNERS_MAX, 0);
            }
        if (kinds != 1)
            verr(v, p, "give exactly one of eventually, at_end, never_above, never_below");
        if (kinds == 1 && wx->value > s->nlearners && wx->kind != SC_WS_NEVER_ABOVE)
            verr(v, p, "world size %d is more than the scenario's %d learners", wx->value, s->nlearners);
        wx->from_ms = get_ms(v, w, p, "from_ms", 0, SC_TIMEOUT_MAX_MS, 0);
        wx->to_ms = get_ms(v, w, p, "to_ms", 0, SC_TIMEOUT_MAX_MS, -1);
        long by = get_ms(v, w, p, "by_ms", 0, SC_TIMEOUT_MAX_MS, -1);
        if (jsonx_get(w, "by_ms")) {
            if (wx->kind != SC_WS_EVENTUALLY)
                verr(v, p, "by_ms goes with eventually (use from_ms/to_ms for a window)");
            else
                wx->to_ms = by;
        }
        if (wx->to_ms >= 0 && wx->to_ms <= wx->from_ms)
            verr(v, p, "the window ends (%ld ms) before it starts (%ld ms)", wx->to_ms, wx->from_ms);
        if (wx->kind == SC_WS_AT_END && (jsonx_get(w, "from_ms") || jsonx_get(w, "to_ms")))
            verr(v, p, "at_end takes no window");
        free(p);
    }
}

/* expect.metrics */
static void parse_expect_metrics(vctx *v, sc_scenario *s, const cJSON *ms)
{
    sc_expect *e = &s->expect;
    if (!want_type(v, ms, "expect.metrics", "list"))
        return;
    static const char *const k2[] = {"name", "labels", "op", "value", NULL};
    e->metrics = xcalloc((size_t)cJSON_GetArraySize(ms) + 1, sizeof *e->metrics);
    size_t i = 0;
    for (const cJSON *m = ms->child; m; m = m->next, i++) {
        char *p = xasprintf("expect.metrics[%zu]", i);
        if (!want_type(v, m, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, m, p, k2);
        sc_expect_metric *mx = &e->metrics[e->nmetrics++];
        mx->line = line_of(v, p);
        mx->name = get_str(v, m, p, "name", true);
        const cJSON *lb = jsonx_get(m, "labels");
        char *lp = jpath(p, "labels");
        if (lb && want_type(v, lb, lp, "object")) {
            for (const cJSON *it = lb->child; it; it = it->next) {
                char *ip = jpath(lp, it->string);
                want_type(v, it, ip, "string");
                free(ip);
            }
            mx->labels = jsonx_dup(lb);
        }
        free(lp);
        char *op = get_str(v, m, p, "op", false);
        snprintf(mx->op, sizeof mx->op, "%s", op ? op : "==");
        static const char *const ops[] = {"==", "!=", ">=", "<=", ">", "<"};
        bool okop = false;
        for (int k = 0; k < 6; k++)
            okop |= op == NULL || strcmp(op, ops[k]) == 0;
        if (!okop) {
            char *opp = jpath(p, "op");
            verr(v, opp, "unknown comparison '%s' (==, !=, >=, <=, >, <)", op);
            free(opp);
        }
        free(op);
        const cJSON *val = jsonx_get(m, "value");
        if (!val)
            verr(v, p, "missing key 'value'");
        else if (!jsonx_is_number(val) || !jsonx_get_double(val, &mx->value)) {
            char *vp = jpath(p, "value");
            verr(v, vp, "must be a number, not %s", jsonx_type_name(val));
            free(vp);
        }
        free(p);
    }
}

/* expect.logs */
static void parse_expect_logs(vctx *v, sc_scenario *s, const cJSON *lg)
{
    sc_expect *e = &s->expect;
    if (!want_type(v, lg, "expect.logs", "list"))
        return;
    static const char *const k2[] = {"process", "contains", "absent", NULL};
    e->logs = xcalloc((size_t)cJSON_GetArraySize(lg) + 1, sizeof *e->logs);
    size_t i = 0;
    for (const cJSON *m = lg->child; m; m = m->next, i++) {
        char *p = xasprintf("expect.logs[%zu]", i);
        if (!want_type(v, m, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, m, p, k2);
        sc_expect_log *lx = &e->logs[e->nlogs++];
        lx->line = line_of(v, p);
        lx->process = get_str(v, m, p, "process", true);
        if (lx->process) {
            char *pp = jpath(p, "process");
            proc_ref(v, s, lx->process, pp, NULL);
            free(pp);
        }
        lx->contains = get_str(v, m, p, "contains", true);
        lx->absent = get_bool(v, m, p, "absent", 0);
        free(p);
    }
}

/* expect.learner_tasks */
static void parse_expect_learner_tasks(vctx *v, sc_scenario *s, const cJSON *lt)
{
    sc_expect *e = &s->expect;
    if (!want_type(v, lt, "expect.learner_tasks", "list"))
        return;
    static const char *const k2[] = {"learner", "task", "min", "max", "after_ms", NULL};
    e->learner_tasks = xcalloc((size_t)cJSON_GetArraySize(lt) + 1, sizeof *e->learner_tasks);
    size_t i = 0;
    for (const cJSON *m = lt->child; m; m = m->next, i++) {
        char *p = xasprintf("expect.learner_tasks[%zu]", i);
        if (!want_type(v, m, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, m, p, k2);
        sc_expect_learner_tasks *lx = &e->learner_tasks[e->nlearner_tasks++];
        lx->line = line_of(v, p);
        const cJSON *l = jsonx_get(m, "learner");
        char *lp = jpath(p, "learner");
        if (!l)
            verr(v, p, "missing key 'learner'");
        else
            lx->learner = learner_ref(v, s, l, lp);
        free(lp);
        char *t = get_str(v, m, p, "task", false);
        if (t) {
            const char *full = sc_task_full_name(t);
            if (!full && strcmp(t, "any") != 0) {
                char *tp = jpath(p, "task");
                unknown_task(v, tp, t);
                free(tp);
            }
            lx->task = full ? xstrdup(full) : NULL;
            free(t);
        }
        lx->min = (int)get_int(v, m, p, "min", 0, 1000000, 0);
        lx->max = (int)get_int(v, m, p, "max", 0, 1000000, -1);
        if (lx->max >= 0 && lx->max < lx->min)
            verr(v, p, "max (%d) is less than min (%d)", lx->max, lx->min);
        if (!jsonx_get(m, "min") && !jsonx_get(m, "max"))
            verr(v, p, "give min or max (or both)");
        lx->after_ms = get_ms(v, m, p, "after_ms", 0, SC_TIMEOUT_MAX_MS, 0);
        free(p);
    }
}

/* expect.exits */
static void parse_expect_exits(vctx *v, sc_scenario *s, const cJSON *ex)
{
    sc_expect *e = &s->expect;
    if (!want_type(v, ex, "expect.exits", "list"))
        return;
    static const char *const k2[] = {"process", "code", "signal", NULL};
    e->exits = xcalloc((size_t)cJSON_GetArraySize(ex) + 1, sizeof *e->exits);
    size_t i = 0;
    for (const cJSON *m = ex->child; m; m = m->next, i++) {
        char *p = xasprintf("expect.exits[%zu]", i);
        if (!want_type(v, m, p, "object")) {
            free(p);
            continue;
        }
        check_keys(v, m, p, k2);
        sc_expect_exit *xx = &e->exits[e->nexits++];
        xx->line = line_of(v, p);
        xx->process = get_str(v, m, p, "process", true);
        if (xx->process) {
            char *pp = jpath(p, "process");
            int l;
            int pr = proc_ref(v, s, xx->process, pp, &l);
            if (pr >= 0 && l >= 0)
                verr(v, pp, "exits are of processes: name the group of '%s'", xx->process);
            free(pp);
        }
        xx->code = (int)get_int(v, m, p, "code", 0, 255, 0);
        bool sig = get_bool(v, m, p, "signal", 0);
        if (sig)
            xx->code = -1;
        xx->any_code = !jsonx_get(m, "code") && !sig;
        free(p);
    }
}

/* expect.operator */
static void parse_expect_operator(vctx *v, sc_scenario *s, const cJSON *op)
{
    sc_expect *e = &s->expect;
    if (!want_type(v, op, "expect.operator", "object"))
        return;
    static const char *const k2[] = {"failed_learners", "requests", "max_in_flight", NULL};
    check_keys(v, op, "expect.operator", k2);
    if (!s->k8s)
        verr(v, "expect.operator", "the operator's journal needs k8s mode (\"aggregator\": {\"k8s\": true})");
    const cJSON *fl = jsonx_get(op, "failed_learners");
    if (fl && want_type(v, fl, "expect.operator.failed_learners", "list")) {
        e->has_operator_failed = true;
        e->operator_failed = xcalloc((size_t)cJSON_GetArraySize(fl) + 1, sizeof(int));
        size_t i = 0;
        for (const cJSON *it = fl->child; it; it = it->next, i++) {
            char *p = xasprintf("expect.operator.failed_learners[%zu]", i);
            int l = learner_ref(v, s, it, p);
            if (l >= 0)
                e->operator_failed[e->noperator_failed++] = l;
            free(p);
        }
    }
    e->operator_requests = get_str_list(v, op, "expect.operator", "requests", &e->noperator_requests);
    e->operator_max_in_flight = (int)get_int(v, op, "expect.operator", "max_in_flight", 1, 1000000, 0);
}

static void parse_expect(vctx *v, sc_scenario *s, const cJSON *root)
{
    static const char *const keys[] = {"coordinator_ok", "task_count", "all_tasks", "tasks", "failures_contain",
                                       "world_size", "metrics", "logs", "events", "learner_tasks", "exits", "operator",
                                       "exactly_once", "max_duration_ms", "aggregator_alive", NULL};
    sc_expect *e = &s->expect;
    e->coordinator_ok = -1;
    e->task_count = -1;
    e->aggregator_alive = -1;
    const cJSON *x = jsonx_get(root, "expect");
    if (!x) {
        verr(v, "", "missing key 'expect' (a scenario must check something)");
        return;
    }
    if (!want_type(v, x, "expect", "object"))
        return;
    e->line = line_of(v, "expect");
    check_keys(v, x, "expect", keys);
    e->coordinator_ok = get_bool(v, x, "expect", "coordinator_ok", -1);
    e->task_count = (int)get_int(v, x, "expect", "task_count", 0, 1000000, -1);
    const cJSON *at = jsonx_get(x, "all_tasks");
    if (at && want_type(v, at, "expect.all_tasks", "object")) {
        static const char *const k2[] = {"status", NULL};
        check_keys(v, at, "expect.all_tasks", k2);
        e->all_status = get_str(v, at, "expect.all_tasks", "status", true);
        if (e->all_status && strcmp(e->all_status, "completed") != 0 && strcmp(e->all_status, "failed") != 0)
            verr(v, "expect.all_tasks.status", "must be \"completed\" or \"failed\", not \"%s\"", e->all_status);
    }
    const cJSON *ts = jsonx_get(x, "tasks");
    if (ts)
        parse_expect_tasks(v, s, ts, "expect.tasks");
    e->failures_contain = get_str_list(v, x, "expect", "failures_contain", &e->nfailures_contain);
    if ((ts || at || e->coordinator_ok >= 0 || e->task_count >= 0 || e->nfailures_contain) && !s->coordinator)
        verr(v, "expect", "expectations on tasks need a coordinator");

    const cJSON *ws = jsonx_get(x, "world_size");
    if (ws)
        parse_expect_world_size(v, s, ws);

    const cJSON *ms = jsonx_get(x, "metrics");
    if (ms)
        parse_expect_metrics(v, s, ms);

    const cJSON *lg = jsonx_get(x, "logs");
    if (lg)
        parse_expect_logs(v, s, lg);

    parse_expect_events(v, s, jsonx_get(x, "events"));

    const cJSON *lt = jsonx_get(x, "learner_tasks");
    if (lt)
        parse_expect_learner_tasks(v, s, lt);

    const cJSON *ex = jsonx_get(x, "exits");
    if (ex)
        parse_expect_exits(v, s, ex);

    const cJSON *op = jsonx_get(x, "operator");
    if (op)
        parse_expect_operator(v, s, op);
    e->exactly_once = get_bool(v, x, "expect", "exactly_once", 0);
    if (e->exactly_once && !s->coordinator)
        verr(v, "expect.exactly_once", "exactly-once delivery is checked on a coordinator's learn tasks");
    e->max_duration_ms = get_ms(v, x, "expect", "max_duration_ms", 1, SC_TIMEOUT_MAX_MS, 0);
    e->aggregator_alive = get_bool(v, x, "expect", "aggregator_alive", -1);
}

/* Cross-field checks of times against timeout_ms and of action order. */
static void check_timings(vctx *v, sc_scenario *s)
{
    char p[64];
    for (size_t g = 0; g < s->ngroups; g++) {
        snprintf(p, sizeof p, "learners[%zu].start_ms", g);
        if (s->groups[g].start_ms >= s->timeout_ms)
            verr(v, p, "starts at %ld ms, not before the scenario's timeout_ms (%ld)", s->groups[g].start_ms,
                 s->timeout_ms);
    }
    for (size_t i = 0; i < s->nactions; i++) {
        const sc_action *a = &s->actions[i];
        snprintf(p, sizeof p, "actions[%zu]", i);
        long t = a->when.kind == SC_WHEN_AT ? a->when.at_ms : a->when.delay_ms;
        if (t + a->duration_ms >= s->timeout_ms)
            verr(v, p, "acts at %ld ms%s, not before the scenario's timeout_ms (%ld)", t + a->duration_ms,
                 a->duration_ms ? " (stop + duration_ms)" : "", s->timeout_ms);
        /* cont of a process that no earlier timed action stopped */
        if (a->what == SC_DO_CONT && a->when.kind == SC_WHEN_AT) {
            bool stopped = false;
            for (size_t j = 0; j < s->nactions; j++) {
                const sc_action *b = &s->actions[j];
                if (b->what == SC_DO_STOP && b->proc == a->proc &&
                    (b->when.kind != SC_WHEN_AT || b->when.at_ms < a->when.at_ms))
                    stopped = true;
            }
            if (!stopped)
                verr(v, p, "cont of '%s' at %ld ms, but no stop of it comes before", a->target ? a->target : "?",
                     a->when.at_ms);
        }
        if (a->what == SC_DO_START && a->when.kind == SC_WHEN_AT && a->proc >= SC_PROC_GROUP0) {
            for (size_t j = 0; j < s->nactions; j++) {
                const sc_action *b = &s->actions[j];
                if (j != i && b->proc == a->proc && b->when.kind == SC_WHEN_AT && b->when.at_ms < a->when.at_ms &&
                    (b->what == SC_DO_KILL || b->what == SC_DO_STOP || b->what == SC_DO_TERM))
                    verr(v, p, "'%s' is %sed at %ld ms, before it is started at %ld ms", a->target,
                         sc_do_name(b->what), b->when.at_ms, a->when.at_ms);
            }
        }
    }
    if (s->min_run_ms >= s->timeout_ms)
        verr(v, "min_run_ms", "%ld ms is not less than timeout_ms (%ld)", s->min_run_ms, s->timeout_ms);
    if (s->expect.max_duration_ms > s->timeout_ms)
        verr(v, "expect.max_duration_ms", "%ld ms is more than timeout_ms (%ld): the run is cut first",
             s->expect.max_duration_ms, s->timeout_ms);
    for (size_t i = 0; i < s->expect.nworld; i++) {
        snprintf(p, sizeof p, "expect.world_size[%zu]", i);
        if (s->expect.world[i].to_ms >= s->timeout_ms || s->expect.world[i].from_ms >= s->timeout_ms)
            verr(v, p, "its window reaches past timeout_ms (%ld)", s->timeout_ms);
    }
    if (!s->coordinator && s->min_run_ms == 0)
        verr(v, "min_run_ms", "a scenario without a coordinator must say how long it runs (min_run_ms)");
}

sc_scenario *sc_scenario_parse(const char *path, const char *text, size_t len, char **errors)
{
    vctx v = {.file = path};
    *errors = NULL;
    char perr[256];
    cJSON *root = jsonx_parse(text, len, perr, sizeof perr);
    if (!root) {
        /* "... at byte N" -> line:col */
        const char *at = strstr(perr, " at byte ");
        int line = 1, col = 1;
        if (at) {
            size_t off = strtoul(at + 9, NULL, 10);
            sc_text_linecol(text, len, off, &line, &col);
            perr[at - perr] = '\0';
        }
        xbuf_printf(&v.errs, "%s:%d:%d: not valid JSON: %s\n", path, line, col, perr);
        *errors = xbuf_take(&v.errs);
        return NULL;
    }
    v.pos = sc_jpos_scan(text, len);
    sc_scenario *s = xcalloc(1, sizeof *s);
    s->path = xstrdup(path);
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    s->name = xstrdup(base);
    size_t bl = strlen(s->name);
    if (bl > 5 && strcmp(s->name + bl - 5, ".json") == 0)
        s->name[bl - 5] = '\0';

    for (size_t i = 0; i < sc_jpos_dup_count(v.pos); i++) {
        int fl, l;
        const char *dp = sc_jpos_dup(v.pos, i, &fl, &l);
        v.nerr++;
        xbuf_printf(&v.errs, "%s:%d: %s: duplicate key (first at line %d)\n", path, l, dp, fl);
    }
    if (!cJSON_IsObject(root)) {
        verr(&v, "", "a scenario is a JSON object, not %s", jsonx_type_name(root));
        goto out;
    }
    static const char *const keys[] = {"description", "seed", "time_scale", "timeout_ms", "min_run_ms",
                                       "sample_ms", "timings", "learners", "aggregator", "operator",
                                       "coordinator", "actions", "expect", "$schema", "comment", NULL};
    check_keys(&v, root, "", keys);
    s->description = get_str(&v, root, "", "description", true);
    const cJSON *seed = jsonx_get(root, "seed");
    s->seed = 1;
    if (seed) {
        int64_t x;
        if (!jsonx_get_i64(seed, &x) || x < 0)
            verr(&v, "seed", "must be an integer >= 0, not %s", seed->valuestring ? seed->valuestring : jsonx_type_name(seed));
        else
            s->seed = (uint64_t)x;
    }
    s->time_scale = get_num(&v, root, "", "time_scale", 0.0, 10.0, 1.0, NULL);
    v.time_scale = s->time_scale;
    s->timeout_ms = get_wall_ms(&v, root, "", "timeout_ms", 100, SC_TIMEOUT_MAX_MS, 30000);
    s->min_run_ms = get_ms(&v, root, "", "min_run_ms", 0, SC_TIMEOUT_MAX_MS, 0);
    s->sample_ms = get_wall_ms(&v, root, "", "sample_ms", 10, 10000, 25);
    parse_timings(&v, s, root);
    parse_groups(&v, s, root);
    parse_aggregator(&v, s, root);
    parse_coordinator(&v, s, root);
    parse_actions(&v, s, root);
    check_fault_tasks(&v, s);
    parse_expect(&v, s, root);
    check_timings(&v, s);
out:
    cJSON_Delete(root);
    sc_jpos_free(v.pos);
    for (size_t i = 0; i < v.ntasks; i++) {
        free(v.tasks[i].path);
        free(v.tasks[i].task);
    }
    free(v.tasks);
    if (v.nerr) {
        if (v.nerr > MAX_ERRORS)
            xbuf_printf(&v.errs, "%s: %d more errors not shown\n", path, v.nerr - MAX_ERRORS);
        *errors = xbuf_take(&v.errs);
        sc_scenario_free(s);
        return NULL;
    }
    xbuf_free(&v.errs);
    return s;
}

sc_scenario *sc_scenario_load(const char *path, char **errors)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *errors = xasprintf("%s: cannot open: %s\n", path, strerror(errno));
        return NULL;
    }
    xbuf b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        xbuf_append(&b, chunk, n);
        if (b.len > 16u << 20) {
            fclose(f);
            xbuf_free(&b);
            *errors = xasprintf("%s: larger than 16 MiB\n", path);
            return NULL;
        }
    }
    bool err = ferror(f);
    fclose(f);
    if (err) {
        xbuf_free(&b);
        *errors = xasprintf("%s: read error\n", path);
        return NULL;
    }
    size_t len = b.len;
    char *text = xbuf_take(&b);
    sc_scenario *s = sc_scenario_parse(path, text, len, errors);
    free(text);
    return s;
}

void sc_scenario_free(sc_scenario *s)
{
    if (!s)
        return;
    free(s->path);
    free(s->name);
    free(s->description);
    for (size_t g = 0; g < s->ngroups; g++) {
        free(s->groups[g].name);
        free_strs(s->groups[g].faults, s->groups[g].nfaults);
        free_strs(s->groups[g].args, s->groups[g].nargs);
        util_strv_free(s->groups[g].command);
        free(s->groups[g].address);
    }
    free(s->groups);
    sc_profile_free(s->profile);
    free_strs(s->agg_args, s->nagg_args);
    free_strs(s->agg_env, s->nagg_env);
    free_strs(s->op_args, s->nop_args);
    free_strs(s->op_faults, s->nop_faults);
    free(s->script);
    free_strs(s->coord_args, s->ncoord_args);
    for (size_t i = 0; i < s->nactions; i++) {
        sc_action *a = &s->actions[i];
        free(a->when.task);
        free(a->when.process);
        free(a->when.contains);
        free(a->target);
        free(a->fault);
        free(a->learners);
        free_strs(a->addrs, a->naddrs);
    }
    free(s->actions);
    sc_expect *e = &s->expect;
    free(e->all_status);
    for (size_t i = 0; i < e->ntasks; i++) {
        sc_expect_task *t = &e->tasks[i];
        free(t->name);
        free(t->status);
        free(t->message_contains);
        cJSON_Delete(t->result);
        cJSON_Delete(t->result_len);
        free_strs(t->result_has, t->nresult_has);
        free_strs(t->result_lacks, t->nresult_lacks);
    }
    free(e->tasks);
    free_strs(e->failures_contain, e->nfailures_contain);
    free(e->world);
    for (size_t i = 0; i < e->nmetrics; i++) {
        free(e->metrics[i].name);
        cJSON_Delete(e->metrics[i].labels);
    }
    free(e->metrics);
    for (size_t i = 0; i < e->nevents; i++) {
        free(e->events[i].process);
        cJSON_Delete(e->events[i].where);
        cJSON_Delete(e->events[i].contains);
    }
    free(e->events);
    for (size_t i = 0; i < e->nlogs; i++) {
        free(e->logs[i].process);
        free(e->logs[i].contains);
    }
    free(e->logs);
    for (size_t i = 0; i < e->nlearner_tasks; i++)
        free(e->learner_tasks[i].task);
    free(e->learner_tasks);
    for (size_t i = 0; i < e->nexits; i++)
        free(e->exits[i].process);
    free(e->exits);
    free(e->operator_failed);
    free_strs(e->operator_requests, e->noperator_requests);
    free(s);
}
