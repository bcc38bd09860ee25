/* sfe: an aggregator's events to a scenario (see sfe.h). */
#include "sfe.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "util.h"
#include "xalloc.h"

#define FILE_CAP (1024u * 1024u * 1024u)
#define MAX_LEARNERS 4096

/* ---- loading ---- */

static int lerr(char *err, size_t errlen, const char *file, long line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
static int lerr(char *err, size_t errlen, const char *file, long line, const char *fmt, ...)
{
    int n = line > 0 ? snprintf(err, errlen, "%s:%ld: ", file, line) : snprintf(err, errlen, "%s: ", file);
    if (n < 0 || (size_t)n >= errlen)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
    va_end(ap);
    return -1;
}

static int cmp_seq(const void *a, const void *b)
{
    const sfe_line *x = a, *y = b;
    return x->rec.seq < y->rec.seq ? -1 : x->rec.seq > y->rec.seq;
}

int sfe_load(sfe_log *log, const char *path, char *err, size_t errlen)
{
    size_t len;
    bool truncated;
    char *text = util_read_file(path, FILE_CAP, &len, &truncated);
    if (!text)
        return lerr(err, errlen, path, 0, "cannot read it: %s", strerror(errno));
    if (truncated) {
        free(text);
        return lerr(err, errlen, path, 0, "larger than %u MiB: give the rotated files one by one", FILE_CAP >> 20);
    }
    log->files = xrealloc(log->files, (log->nfiles + 1) * sizeof *log->files);
    const char *file = log->files[log->nfiles++] = xstrdup(path);
    long lineno = 0;
    const char *p = text, *end = text + len;
    int rc = 0;
    while (p < end && rc == 0) {
        lineno++;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) {
            rc = lerr(err, errlen, file, lineno,
                      "the last line is cut short (no newline): the file was still being written, or was "
                      "truncated; remove the partial line to use the rest");
            break;
        }
        if (nl == p) { /* an empty line */
            p = nl + 1;
            continue;
        }
        evt_record r;
        char perr[256];
        if (evt_parse_line(p, (size_t)(nl - p), &r, perr, sizeof perr) != 0) {
            rc = lerr(err, errlen, file, lineno, "%s", perr);
            break;
        }
        p = nl + 1;
        if (strcmp(r.process, "aggregator") != 0) {
            evt_record_free(&r);
            continue;
        }
        if (!log->run) {
            log->run = xstrdup(r.run);
        } else if (strcmp(log->run, r.run) != 0) {
            const sfe_line *first = log->n ? &log->lines[0] : NULL;
            rc = lerr(err, errlen, file, lineno,
                      "a second aggregator run (run %s; the first, %s, begins at %s:%ld): give the files of one "
                      "run only",
                      r.run, log->run, first ? first->file : file, first ? first->line : 0L);
            evt_record_free(&r);
            break;
        }
        if (log->n == log->cap) {
            log->cap = log->cap ? log->cap * 2 : 256;
            log->lines = xrealloc(log->lines, log->cap * sizeof *log->lines);
        }
        log->lines[log->n++] = (sfe_line){r, file, lineno};
    }
    free(text);
    if (log->lines && log->n > 1)
        qsort(log->lines, log->n, sizeof *log->lines, cmp_seq);
    return rc;
}

int sfe_check(const sfe_log *log, char *err, size_t errlen)
{
    const char *f = log->nfiles ? log->files[0] : "(no file)";
    if (log->n == 0)
        return lerr(err, errlen, f, 0, "no aggregator event in it (is it an aggregator's --events file?)");
    for (size_t i = 0; i < log->n; i++)
        if (log->lines[i].rec.id == EVT_task_received)
            return 0;
    return lerr(err, errlen, f, 0,
                "no task in it: the coordinator sent the aggregator nothing, so there is no incident to replay");
}

void sfe_free(sfe_log *log)
{
    for (size_t i = 0; i < log->n; i++)
        evt_record_free(&log->lines[i].rec);
    free(log->lines);
    for (size_t i = 0; i < log->nfiles; i++)
        free(log->files[i]);
    free(log->files);
    free(log->run);
    *log = (sfe_log){0};
}

/* ---- the model ---- */

typedef struct {
    char *kind;  /* mock_learner fault kind */
    char *task;  /* task name or NULL (a time action instead) */
    long at;     /* nth task of that name on that learner */
    long status; /* error_status */
    double t;    /* when (ms since start, source time) */
    double back_after; /* drop: ms until it listened again; < 0 none */
    bool exits;  /* the process exits (crash) */
    bool before; /* crash: before answering /task/new (else while it works) */
} fault;

typedef struct {
    char *id, *addr;
    bool configured, from_operator, operator_initial;
    double added_t;     /* operator: when it was first listed */
    double joined_t;    /* first join; < 0 never */
    int64_t attempts;
    bool join_failed;
    char *first_cause;  /* of its first connect error */
    long http_status;
    long batch;         /* items of its last learn part; -1 unknown */
    double learn_ms;    /* fastest completed learn part; < 0 unknown */
    long sent[8];       /* parts sent per task kind (task_kind) */
    fault *faults;
    size_t nfaults;
    bool in_task;       /* has a part in flight */
    bool down;          /* left and not retaken */
    double left_t;
    char *left_cause;
    bool left_in_task;  /* its leave is explained by a task failure */
    bool gone;          /* a fault took it away and it has not come back */
    bool busy;          /* a hang holds it: later parts are refused (601) */
    double in_flight_t; /* when its part in flight was sent */
    size_t last_fault;  /* index + 1 of the fault its leave belongs to */
} learner;

typedef struct {
    char *name, *id;
    int64_t items;
    double t_recv, t_done;
    char *status, *message, *cause;
} task;

typedef struct {
    double t;
    cJSON *list; /* the operator's list after this sync (ids) */
    char *error;
    long http_status;
    double latency;
    bool changed;
} sync_ev;

typedef struct {
    learner *L;
    size_t nl;
    task *T;
    size_t nt;
    sync_ev *S;
    size_t ns;
    double src_scale, scale, factor; /* factor: scenario ms per source ms */
    bool k8s;
    double ready_t;
    double tolerance_ms, span_ms, max_retry_ms, retry_ms, sync_ms, deadline_ms; /* source ms */
    double end_t;
    bool shutdown_mid_task;
    double shutdown_t;
    size_t shutdown_task;   /* index of the task in flight then */
    bool coordinator_lost;  /* the aggregator lost its coordinator mid-task */
    double coordinator_lost_t;
    size_t coordinator_lost_task;
    char *shutdown_signal;
    cJSON *inferred, *unknown; /* lists of sentences for the comment */
    cJSON *failed_reported;
    long lost_lines;
} model;

static const char *const kinds[] = {"resource", "learner_start_task", "learner_get_data_task", "learner_learn_task",
                                    "learner_close_task"};
static int task_kind(const char *name)
{
    for (int i = 0; i < 5; i++)
        if (name && strcmp(name, kinds[i]) == 0)
            return i;
    return 5;
}

static void note(cJSON *list, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(cJSON *list, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    for (const cJSON *c = list->child; c; c = c->next)
        if (strcmp(c->valuestring, buf) == 0)
            return;
    cJSON_AddItemToArray(list, cJSON_CreateString(buf));
}

static char *dup_or_null(const char *s) { return s ? xstrdup(s) : NULL; }

static learner *find_learner(model *m, const char *id, const char *addr)
{
    if (!id)
        return NULL;
    for (size_t i = 0; i < m->nl; i++)
        if (strcmp(m->L[i].id, id) == 0) {
            if (addr && !m->L[i].addr)
                m->L[i].addr = xstrdup(addr);
            return &m->L[i];
        }
    if (m->nl >= MAX_LEARNERS)
        return NULL;
    m->L = xrealloc(m->L, (m->nl + 1) * sizeof *m->L);
    learner *l = &m->L[m->nl++];
    *l = (learner){.id = xstrdup(id), .addr = dup_or_null(addr), .joined_t = -1, .batch = -1, .learn_ms = -1,
                   .added_t = -1};
    return l;
}

static fault *add_fault(learner *l, const char *kind, const char *tname, long at, double t)
{
    l->faults = xrealloc(l->faults, (l->nfaults + 1) * sizeof *l->faults);
    fault *f = &l->faults[l->nfaults++];
    *f = (fault){.kind = xstrdup(kind), .task = dup_or_null(tname), .at = at, .t = t, .back_after = -1};
    return f;
}

static double num(const cJSON *obj, const char *key, double dflt)
{
    double d;
    return jsonx_get_double(jsonx_get(obj, key), &d) ? d : dflt;
}

/* The started line's config: {"learners": [ids, or {"id", "addr"}],
 * "time_scale", "kubernetes", and the timings in ms, at the top level or
 * under "timings". */
static void read_config(model *m, const evt_record *r)
{
    const cJSON *c = evt_json(r, EVT_F_config);
    if (!cJSON_IsObject(c)) {
        note(m->unknown, "the aggregator's settings (its started line has no config): production defaults assumed");
        return;
    }
    m->src_scale = num(c, "time_scale", 1);
    if (!(m->src_scale > 0))
        m->src_scale = 1;
    m->k8s = cJSON_IsTrue(jsonx_get(c, "kubernetes")) || cJSON_IsTrue(jsonx_get(c, "k8s"));
    const cJSON *t = cJSON_IsObject(jsonx_get(c, "timings")) ? jsonx_get(c, "timings") : c;
    m->span_ms = num(t, "heartbeat_span_ms", m->span_ms * m->src_scale);
    m->tolerance_ms = num(t, "heartbeat_tolerance_ms", m->tolerance_ms * m->src_scale);
    m->max_retry_ms = num(t, "max_retry_ms", m->max_retry_ms * m->src_scale);
    m->retry_ms = num(t, "retry_interval_ms", m->retry_ms * m->src_scale);
    m->sync_ms = num(t, "sync_period_ms", m->sync_ms * m->src_scale);
    m->deadline_ms = num(t, "task_deadline_ms", m->deadline_ms * m->src_scale);
    const cJSON *ls = jsonx_get(c, "learners");
    for (const cJSON *e = cJSON_IsArray(ls) ? ls->child : NULL; e; e = e->next) {
        learner *l = cJSON_IsString(e) ? find_learner(m, e->valuestring, NULL)
                                       : find_learner(m, jsonx_get_str(e, "id"), jsonx_get_str(e, "addr"));
        if (l)
            l->configured = true;
    }
}

static bool list_has(const cJSON *list, const char *id)
{
    for (const cJSON *c = cJSON_IsArray(list) ? list->child : NULL; c; c = c->next)
        if (cJSON_IsString(c) && strcmp(c->valuestring, id) == 0)
            return true;
    return false;
}

/* One operator exchange: the list it leaves, what changed. */
static void on_sync(model *m, const evt_record *r, double t)
{
    m->S = xrealloc(m->S, (m->ns + 1) * sizeof *m->S);
    sync_ev *s = &m->S[m->ns++];
    cJSON *prev = m->ns > 1 ? m->S[m->ns - 2].list : NULL;
    *s = (sync_ev){.t = t, .error = dup_or_null(evt_str(r, EVT_F_error)), .http_status = 0};
    int64_t hs;
    if (evt_int(r, EVT_F_http_status, &hs))
        s->http_status = (long)hs;
    evt_dbl(r, EVT_F_latency_ms, &s->latency);
    s->list = prev ? cJSON_Duplicate(prev, 1) : cJSON_CreateArray();
    const cJSON *added = evt_json(r, EVT_F_added), *removed = evt_json(r, EVT_F_removed);
    for (const cJSON *c = cJSON_IsArray(added) ? added->child : NULL; c; c = c->next) {
        if (!cJSON_IsString(c) || list_has(s->list, c->valuestring))
            continue;
        cJSON_AddItemToArray(s->list, cJSON_CreateString(c->valuestring));
        s->changed = true;
        learner *l = find_learner(m, c->valuestring, NULL);
        if (l && l->added_t < 0) {
            l->from_operator = true;
            l->added_t = t;
        }
    }
    for (const cJSON *c = cJSON_IsArray(removed) ? removed->child : NULL; c; c = c->next) {
        if (!cJSON_IsString(c))
            continue;
        int i = 0;
        for (const cJSON *x = s->list->child; x; x = x->next, i++)
            if (strcmp(x->valuestring, c->valuestring) == 0) {
                cJSON_DeleteItemFromArray(s->list, i);
                s->changed = true;
                break;
            }
    }
    const cJSON *failed = evt_json(r, EVT_F_failed);
    for (const cJSON *c = cJSON_IsArray(failed) ? failed->child : NULL; c; c = c->next)
        if (cJSON_IsString(c) && !list_has(m->failed_reported, c->valuestring))
            cJSON_AddItemToArray(m->failed_reported, cJSON_CreateString(c->valuestring));
}

/* A learner's part of a task failed: the fault that makes it fail so. */
static void on_part_failed(model *m, learner *l, const evt_record *r, double t)
{
    const char *name = evt_str(r, EVT_F_name), *cause = evt_str(r, EVT_F_cause);
    long at = l->sent[task_kind(name)];
    int64_t hs = 0;
    evt_int(r, EVT_F_http_status, &hs);
    int c = cause ? evt_cause_lookup(cause) : EVT_CAUSE_other;
    fault *f = NULL;
    /* a hung learner refuses what comes next ("Already has a task", HTTP
     * 400): the hang explains it */
    if (l->busy && c == EVT_CAUSE_http_status && hs == 400)
        return;
    switch (c) {
    case EVT_CAUSE_deadline:
        f = add_fault(l, "hang", name, at, t);
        l->busy = true;
        break;
    case EVT_CAUSE_http_status:
        f = add_fault(l, "error_status", name, at, t);
        f->status = hs >= 400 && hs <= 599 ? (long)hs : 500;
        break;
    case EVT_CAUSE_reported_failure:
        f = add_fault(l, "fail", name, at, t);
        break;
    case EVT_CAUSE_malformed:
        f = add_fault(l, "malformed", name, at, t);
        break;
    case EVT_CAUSE_truncated:
        f = add_fault(l, "truncated", name, at, t);
        break;
    case EVT_CAUSE_unmergeable:
        f = add_fault(l, "bad_result", name, at, t);
        break;
    case EVT_CAUSE_connection_lost:
    case EVT_CAUSE_heartbeat:
    case EVT_CAUSE_refused:
    case EVT_CAUSE_unreachable:
        /* the learner went away: a crash unless it came back (decided when
         * its retake is seen); refused at /task/new: before it took the
         * task. A learner already gone fails its later parts the same way:
         * one fault, not one per part. */
        if (l->gone)
            return;
        f = add_fault(l, "crash", name, at, t);
        f->exits = true;
        f->before = c == EVT_CAUSE_refused || c == EVT_CAUSE_unreachable;
        l->left_in_task = true;
        l->gone = true;
        break;
    case EVT_CAUSE_restarted:
        f = add_fault(l, "drop", name, at, t);
        f->back_after = 0;
        break;
    case EVT_CAUSE_not_connected:
    case EVT_CAUSE_shutdown:
        return; /* a consequence, not a fault of its own */
    default:
        note(m->unknown, "why %s's part of %s #%ld failed (cause %s: %s); not reproduced", l->id,
             name ? name : "?", at, cause ? cause : "none", evt_str(r, EVT_F_reason) ? evt_str(r, EVT_F_reason) : "");
        return;
    }
    l->last_fault = l->nfaults;
    note(m->inferred, "%s: %s at %s #%ld (from a subtask_done with cause %s)", l->id, f->kind, name ? name : "?", at,
         cause ? cause : "none");
}

static void on_left(model *m, learner *l, const evt_record *r, double t)
{
    const char *cause = evt_str(r, EVT_F_cause);
    if (cause && strcmp(cause, "shutdown") == 0)
        return; /* the end of the run, not part of the incident */
    l->down = true;
    l->left_t = t;
    free(l->left_cause);
    l->left_cause = dup_or_null(cause);
    if (l->in_task || l->left_in_task)
        return; /* explained by (or about to be explained by) its task */
    int c = cause ? evt_cause_lookup(cause) : EVT_CAUSE_other;
    if (c == EVT_CAUSE_heartbeat) {
        double stop = t - m->tolerance_ms;
        fault *f = add_fault(l, "no_heartbeat", NULL, 0, stop > 0 ? stop : 0);
        (void)f;
        l->last_fault = l->nfaults;
        note(m->inferred, "%s: heartbeats stopped about %.0f ms before it was dropped (the tolerance)", l->id,
             m->tolerance_ms);
    } else if (c == EVT_CAUSE_operator || c == EVT_CAUSE_shutdown || c == EVT_CAUSE_disconnected) {
        /* the operator's list or the end of the run: not a fault */
    } else {
        if (l->gone)
            return;
        fault *f = add_fault(l, "die", NULL, 0, t);
        (void)f;
        l->gone = true;
        l->last_fault = l->nfaults;
        note(m->inferred, "%s: went away while idle (cause %s)", l->id, cause ? cause : "none");
    }
}

static void on_retaken(model *m, learner *l, double t)
{
    if (l->last_fault) {
        fault *f = &l->faults[l->last_fault - 1];
        double away = t - (l->down ? l->left_t : f->t);
        if (strcmp(f->kind, "crash") == 0 || strcmp(f->kind, "die") == 0) {
            free(f->kind);
            f->kind = xstrdup("drop");
            f->exits = false;
        }
        if (strcmp(f->kind, "drop") == 0) {
            /* it listens again a little before the retry that took it */
            f->back_after = away > m->retry_ms ? away - m->retry_ms / 2 : away / 2;
            note(m->inferred, "%s: came back %.0f ms after it left (a drop)", l->id, away);
        } else if (strcmp(f->kind, "no_heartbeat") == 0) {
            /* silent, then taken back: it went away (forgot the master and
             * stopped listening) and came back: a drop from when its
             * heartbeats stopped, listening again a little before the
             * attempt that took it */
            free(f->kind);
            f->kind = xstrdup("drop");
            double back = (t - f->t) - m->retry_ms / 2;
            f->back_after = back > 1 ? back : 1;
            note(m->inferred, "%s: silent, then taken back %.0f ms after it stopped (a drop)", l->id, t - f->t);
        }
    }
    l->down = false;
    l->gone = false;
}

/* A merge that failed names the learner whose result did not fit: that
 * learner's result was bad at that task. */
static void on_unmergeable(model *m, const task *tk, double t)
{
    /* the first learner named is the odd one ("learner 'x' has a list
     * where 'y' has an object") */
    learner *odd = NULL;
    const char *first = NULL;
    for (size_t i = 0; i < m->nl; i++) {
        char quoted[300];
        snprintf(quoted, sizeof quoted, "'%s'", m->L[i].id);
        const char *hit = strstr(tk->message, quoted);
        if (hit && (!first || hit < first)) {
            first = hit;
            odd = &m->L[i];
        }
    }
    if (!odd) {
        note(m->unknown, "which learner's result could not be merged at %s (\"%s\")", tk->name, tk->message);
        return;
    }
    long at = odd->sent[task_kind(tk->name)];
    add_fault(odd, "bad_result", tk->name, at, t);
    odd->last_fault = odd->nfaults;
    note(m->inferred, "%s: bad_result at %s #%ld (the merge failed on its result)", odd->id, tk->name, at);
}

static void build(model *m, const sfe_log *log)
{
    m->src_scale = 1;
    m->span_ms = 3000;
    m->tolerance_ms = 17000;
    m->max_retry_ms = 60000;
    m->retry_ms = 2000;
    m->sync_ms = 3000;
    m->deadline_ms = 300000;
    m->ready_t = -1;
    m->inferred = cJSON_CreateArray();
    m->unknown = cJSON_CreateArray();
    m->failed_reported = cJSON_CreateArray();
    int64_t prev_seq = -1;
    bool started = false;
    for (size_t i = 0; i < log->n; i++) {
        const evt_record *r = &log->lines[i].rec;
        double t = r->t_ms;
        if (prev_seq >= 0 && r->seq > prev_seq + 1)
            m->lost_lines += (long)(r->seq - prev_seq - 1);
        prev_seq = r->seq;
        m->end_t = t;
        learner *l = find_learner(m, evt_str(r, EVT_F_learner), evt_str(r, EVT_F_addr));
        task *cur = m->nt ? &m->T[m->nt - 1] : NULL;
        switch (r->id) {
        case EVT_started:
            started = true;
            read_config(m, r);
            break;
        case EVT_ready:
            m->ready_t = t;
            break;
        case EVT_learner_joined:
            if (l && l->joined_t < 0) {
                l->joined_t = t;
                evt_int(r, EVT_F_attempts, &l->attempts);
            }
            break;
        case EVT_learner_connect_error:
            if (l && !l->first_cause) {
                l->first_cause = dup_or_null(evt_str(r, EVT_F_cause));
                int64_t hs;
                if (evt_int(r, EVT_F_http_status, &hs))
                    l->http_status = (long)hs;
            }
            break;
        case EVT_learner_join_failed:
            if (l)
                l->join_failed = true;
            break;
        case EVT_learner_left:
        case EVT_learner_removed:
            if (l)
                on_left(m, l, r, t);
            break;
        case EVT_learner_retaken:
            if (l)
                on_retaken(m, l, t);
            break;
        case EVT_task_received:
            m->T = xrealloc(m->T, (m->nt + 1) * sizeof *m->T);
            m->T[m->nt++] = (task){.name = dup_or_null(evt_str(r, EVT_F_name)), .id = dup_or_null(evt_str(r, EVT_F_id)),
                                   .items = -1, .t_recv = t, .t_done = -1};
            evt_int(r, EVT_F_items, &m->T[m->nt - 1].items);
            break;
        case EVT_subtask_sent:
            if (l) {
                const char *name = evt_str(r, EVT_F_name);
                l->sent[task_kind(name)]++;
                l->in_task = true;
                l->in_flight_t = t;
                int64_t items;
                if (task_kind(name) == 3 && evt_int(r, EVT_F_items, &items) && items > 0)
                    l->batch = (long)items;
            }
            break;
        case EVT_subtask_done:
            if (l) {
                l->in_task = false;
                const char *st = evt_str(r, EVT_F_status);
                double lat;
                if (st && strcmp(st, "completed") == 0) {
                    l->busy = false;
                    if (task_kind(evt_str(r, EVT_F_name)) == 3 && evt_dbl(r, EVT_F_latency_ms, &lat) &&
                        (l->learn_ms < 0 || lat < l->learn_ms))
                        l->learn_ms = lat;
                } else {
                    on_part_failed(m, l, r, t);
                }
            }
            break;
        case EVT_task_done:
            if (cur && cur->t_done < 0) {
                cur->t_done = t;
                cur->status = dup_or_null(evt_str(r, EVT_F_status));
                cur->message = dup_or_null(evt_str(r, EVT_F_message));
                cur->cause = dup_or_null(evt_str(r, EVT_F_cause));
                if (cur->cause && strcmp(cur->cause, "unmergeable") == 0 && cur->message)
                    on_unmergeable(m, cur, t);
            }
            break;
        case EVT_master_lost:
            /* the aggregator's own slave end lost its coordinator */
            if (!evt_str(r, EVT_F_learner) && cur && cur->t_done < 0 && !m->coordinator_lost) {
                m->coordinator_lost = true;
                m->coordinator_lost_t = t;
                m->coordinator_lost_task = m->nt - 1;
            }
            break;
        case EVT_operator_sync:
            m->k8s = true;
            on_sync(m, r, t);
            break;
        case EVT_shutdown:
            if (cur && (cur->t_done < 0 || (cur->cause && strcmp(cur->cause, "shutdown") == 0))) {
                m->shutdown_mid_task = true;
                m->shutdown_t = t;
                m->shutdown_task = m->nt - 1;
                m->shutdown_signal = dup_or_null(evt_str(r, EVT_F_signal));
            }
            break;
        default:
            break;
        }
    }
    if (!started)
        note(m->unknown, "the start of the run (no started line: rotated away?): settings and configured learners "
                         "inferred from what followed");
    if (m->lost_lines)
        note(m->unknown, "%ld event lines were lost (gaps in seq)", m->lost_lines);
}

static void free_model(model *m)
{
    for (size_t i = 0; i < m->nl; i++) {
        learner *l = &m->L[i];
        for (size_t j = 0; j < l->nfaults; j++) {
            free(l->faults[j].kind);
            free(l->faults[j].task);
        }
        free(l->faults);
        free(l->id);
        free(l->addr);
        free(l->first_cause);
        free(l->left_cause);
    }
    free(m->L);
    for (size_t i = 0; i < m->nt; i++) {
        free(m->T[i].name);
        free(m->T[i].id);
        free(m->T[i].status);
        free(m->T[i].message);
        free(m->T[i].cause);
    }
    free(m->T);
    for (size_t i = 0; i < m->ns; i++) {
        cJSON_Delete(m->S[i].list);
        free(m->S[i].error);
    }
    free(m->S);
    free(m->shutdown_signal);
    cJSON_Delete(m->inferred);
    cJSON_Delete(m->unknown);
    cJSON_Delete(m->failed_reported);
}

/* ---- writing the scenario ---- */

static long sc_ms(const model *m, double src_ms)
{
    double v = src_ms * m->factor;
    return v < 0 ? 0 : (long)llround(v);
}

static void add_int(cJSON *o, const char *k, long v) { cJSON_AddItemToObject(o, k, jsonx_new_i64(v)); }

/* A learner needs a process of its own when something happens to it. */
static bool special(const learner *l)
{
    return l->nfaults || l->join_failed || l->attempts > 1 || l->joined_t < 0 || l->from_operator;
}

static void learner_group(const model *m, cJSON *groups, const learner *l, size_t count, long batch, long learn_ms,
                          const char *name)
{
    cJSON *g = cJSON_CreateObject();
    cJSON_AddStringToObject(g, "name", name);
    add_int(g, "count", (long)count);
    add_int(g, "batch_size", batch > 0 ? batch : 4);
    if (learn_ms > 0)
        add_int(g, "learn_time_ms", learn_ms);
    if (l && special(l)) {
        bool never = l->joined_t < 0;
        bool late = !never && (l->attempts > 1 || l->join_failed);
        const char *fc = l->first_cause;
        if (never && m->k8s && l->from_operator && !l->configured) {
            /* listed by the operator, never answered */
            cJSON_AddBoolToObject(g, "absent", 1);
        } else if (never) {
            cJSON_AddBoolToObject(g, "absent", 1);
        } else if (late && (!fc || strcmp(fc, "refused") == 0 || strcmp(fc, "unreachable") == 0)) {
            /* it began to listen a little before the attempt that joined */
            double listen = l->joined_t - m->retry_ms / 2;
            add_int(g, "start_ms", sc_ms(m, listen > 0 ? listen : 0));
        }
        if (l->from_operator && !l->operator_initial)
            cJSON_AddBoolToObject(g, "configured", 0);
        cJSON *faults = cJSON_CreateArray();
        if (late && fc && strcmp(fc, "rejected") == 0) {
            cJSON *f = cJSON_CreateObject();
            cJSON_AddStringToObject(f, "kind", "refuse");
            cJSON_AddItemToArray(faults, f);
        }
        for (size_t j = 0; j < l->nfaults; j++) {
            const fault *x = &l->faults[j];
            if (!x->task)
                continue; /* a timed action instead */
            cJSON *f = cJSON_CreateObject();
            cJSON_AddStringToObject(f, "kind", x->kind);
            cJSON_AddStringToObject(f, "task", x->task);
            add_int(f, "at", x->at);
            if (strcmp(x->kind, "crash") == 0)
                cJSON_AddStringToObject(f, "when", x->before ? "before" : "during");
            if (strcmp(x->kind, "error_status") == 0)
                add_int(f, "status", x->status);
            if (strcmp(x->kind, "drop") == 0)
                add_int(f, "back_after_ms", sc_ms(m, x->back_after > 0 ? x->back_after : 1));
            cJSON_AddItemToArray(faults, f);
        }
        if (cJSON_GetArraySize(faults))
            cJSON_AddItemToObject(g, "faults", faults);
        else
            cJSON_Delete(faults);
    }
    cJSON_AddItemToArray(groups, g);
}

static void group_of(const model *m, const learner *l, char *out, size_t len);

/* A learn that was still running when the run was cut (SIGTERM, the
 * coordinator lost) must still be running at that point of the replay. */
static double min_learn_ms(const model *m)
{
    size_t i = m->shutdown_mid_task ? m->shutdown_task : m->coordinator_lost ? m->coordinator_lost_task : SIZE_MAX;
    if (i == SIZE_MAX || task_kind(m->T[i].name) != 3)
        return 0;
    double stop = m->shutdown_mid_task ? m->shutdown_t : m->coordinator_lost_t;
    return 2 * (stop - m->T[i].t_recv);
}

static void add_groups(const model *m, cJSON *sc)
{
    cJSON *groups = cJSON_AddArrayToObject(sc, "learners");
    size_t i = 0, pool = 0;
    double floor_ms = min_learn_ms(m);
    while (i < m->nl) {
        const learner *l = &m->L[i];
        double lm = l->learn_ms > floor_ms ? l->learn_ms : floor_ms;
        long learn = lm > 0 ? sc_ms(m, lm) : 0;
        if (special(l)) {
            char name[80];
            group_of(m, l, name, sizeof name);
            learner_group(m, groups, l, 1, l->batch, learn, name);
            i++;
            continue;
        }
        /* a run of plain learners with the same batch size is one process */
        size_t j = i + 1;
        while (j < m->nl && !special(&m->L[j]) && m->L[j].batch == l->batch)
            j++;
        char name[32];
        snprintf(name, sizeof name, "pool%zu", pool++);
        learner_group(m, groups, l, j - i, l->batch, learn, name);
        i = j;
    }
}

/* The coordinator's tasks as a script, with the gaps between them. */
static void add_coordinator(const model *m, cJSON *sc)
{
    cJSON *co = cJSON_AddObjectToObject(sc, "coordinator");
    double origin = m->ready_t >= 0 ? m->ready_t : 0;
    if (m->nt && m->T[0].t_recv > origin)
        add_int(co, "start_ms", sc_ms(m, m->T[0].t_recv - origin));
    cJSON *script = cJSON_AddArrayToObject(co, "script");
    bool seen_get_data = false;
    for (size_t i = 0; i < m->nt; i++) {
        const task *t = &m->T[i];
        cJSON *x = cJSON_CreateObject();
        cJSON_AddStringToObject(x, "name", t->name ? t->name : "resource");
        /* a learn of the last get-data's batch follows the world the replay
         * has then; one whose length was wrong keeps its length */
        bool wrong = t->cause && strcmp(t->cause, "wrong_length") == 0;
        if (task_kind(t->name) == 3 && (wrong || !seen_get_data))
            add_int(x, "items", t->items >= 0 ? (long)t->items : 0);
        else if (task_kind(t->name) == 3)
            cJSON_AddStringToObject(x, "items", "batch");
        if (task_kind(t->name) == 2)
            seen_get_data = true;
        if (i > 0 && m->T[i - 1].t_done >= 0) {
            long gap = sc_ms(m, t->t_recv - m->T[i - 1].t_done);
            if (gap > 0)
                add_int(x, "delay_ms", gap);
        }
        cJSON *e = cJSON_AddObjectToObject(x, "expect");
        cJSON_AddStringToObject(e, "status", t->status && strcmp(t->status, "completed") != 0 ? "failed" : "completed");
        if (task_kind(t->name) == 2)
            cJSON_AddItemToObject(e, "fields", cJSON_CreateObject()); /* no batch_size check */
        cJSON_AddItemToArray(script, x);
    }
    (void)seen_get_data;
    /* the runner's own deadline is the aggregator's: keep the source's */
    (void)co;
}

static const learner *by_id(const model *m, const char *id)
{
    for (size_t i = 0; i < m->nl; i++)
        if (strcmp(m->L[i].id, id) == 0)
            return &m->L[i];
    return NULL;
}

/* How the scenario names a learner: the runner numbers learners over its
 * groups in order, learner0, learner1, ...; the groups follow the source's
 * learners in order, so the i-th is learner<i> in the replay whatever the
 * aggregator called it there (a Kubernetes pod name, "learner3.localhost:
 * 22803"). */
static void ref_name(const model *m, const learner *l, char *out, size_t len)
{
    snprintf(out, len, "learner%zu", (size_t)(l - m->L));
}

/* An action a while after the coordinator sent task i, as it happened
 * there: {"on": {"event": "task_sent", "task": NAME, "nth": k},
 * "delay_ms": d, "do": what, "target": target}. */
static void add_task_action(const model *m, cJSON *acts, size_t i, double when, const char *what, const char *target)
{
    const task *t = &m->T[i];
    long nth = 0;
    for (size_t j = 0; j <= i; j++)
        nth += m->T[j].name && t->name && strcmp(m->T[j].name, t->name) == 0;
    cJSON *a = cJSON_CreateObject();
    cJSON *on = cJSON_AddObjectToObject(a, "on");
    cJSON_AddStringToObject(on, "event", "task_sent");
    cJSON_AddStringToObject(on, "task", t->name ? t->name : "resource");
    add_int(on, "nth", nth);
    long d = sc_ms(m, when - t->t_recv);
    if (d > 0)
        add_int(a, "delay_ms", d);
    cJSON_AddStringToObject(a, "do", what);
    cJSON_AddStringToObject(a, "target", target);
    cJSON_AddItemToArray(acts, a);
    note(m->inferred, "%s of %s %.0f ms after %s #%ld was sent", what, target, when - t->t_recv,
         t->name ? t->name : "?", nth);
}

static void add_actions(const model *m, cJSON *sc)
{
    cJSON *acts = cJSON_CreateArray();
    for (size_t i = 0; i < m->nl; i++) {
        const learner *l = &m->L[i];
        for (size_t j = 0; j < l->nfaults; j++) {
            const fault *x = &l->faults[j];
            if (x->task)
                continue;
            cJSON *a = cJSON_CreateObject();
            add_int(a, "at_ms", sc_ms(m, x->t));
            cJSON_AddStringToObject(a, "do", "fault");
            char ref[32];
            ref_name(m, l, ref, sizeof ref);
            cJSON_AddStringToObject(a, "target", ref);
            cJSON *f = cJSON_AddObjectToObject(a, "fault");
            cJSON_AddStringToObject(f, "kind", x->kind);
            if (strcmp(x->kind, "drop") == 0)
                add_int(f, "back_after_ms", sc_ms(m, x->back_after > 0 ? x->back_after : 1));
            cJSON_AddItemToArray(acts, a);
        }
    }
    /* the operator: list changes after the first, errors and slowness */
    bool failing = false;
    for (size_t i = 0; i < m->ns; i++) {
        const sync_ev *s = &m->S[i];
        if (s->error && !failing) {
            cJSON *a = cJSON_CreateObject();
            add_int(a, "at_ms", sc_ms(m, s->t - s->latency - 1 > 0 ? s->t - s->latency - 1 : 0));
            cJSON_AddStringToObject(a, "do", "operator_fault");
            cJSON *f = cJSON_AddObjectToObject(a, "fault");
            if (s->http_status >= 400) {
                cJSON_AddStringToObject(f, "kind", "error_status");
                add_int(f, "status", s->http_status);
            } else if (s->http_status >= 200) {
                cJSON_AddStringToObject(f, "kind", "garbage");
            } else {
                cJSON_AddStringToObject(f, "kind", "refuse");
            }
            cJSON_AddItemToArray(acts, a);
            failing = true;
        } else if (!s->error && failing) {
            cJSON *a = cJSON_CreateObject();
            add_int(a, "at_ms", sc_ms(m, s->t - s->latency - 1 > 0 ? s->t - s->latency - 1 : 0));
            cJSON_AddStringToObject(a, "do", "operator_clear");
            cJSON_AddItemToArray(acts, a);
            failing = false;
        }
        if (i > 0 && s->changed && !s->error) {
            cJSON *a = cJSON_CreateObject();
            /* the list changed before the sync that saw it */
            double when = s->t - m->sync_ms / 2;
            add_int(a, "at_ms", sc_ms(m, when > 0 ? when : 0));
            cJSON_AddStringToObject(a, "do", "operator_set");
            cJSON *ls = cJSON_AddArrayToObject(a, "learners");
            for (const cJSON *c = s->list->child; c; c = c->next) {
                const learner *l = by_id(m, c->valuestring);
                char ref[32];
                if (!l)
                    continue;
                ref_name(m, l, ref, sizeof ref);
                cJSON_AddItemToArray(ls, cJSON_CreateString(ref));
            }
            cJSON_AddItemToArray(acts, a);
        }
    }
    if (m->shutdown_mid_task)
        add_task_action(m, acts, m->shutdown_task, m->shutdown_t, "term", "aggregator");
    if (m->coordinator_lost)
        /* the aggregator hears of it a little after the kill */
        add_task_action(m, acts, m->coordinator_lost_task, m->coordinator_lost_t - m->retry_ms / 4, "kill",
                        "coordinator");
    if (cJSON_GetArraySize(acts))
        cJSON_AddItemToObject(sc, "actions", acts);
    else
        cJSON_Delete(acts);
}

static const char *short_name(const char *name)
{
    static const char *const shorts[] = {"resource", "start", "get_data", "learn", "close"};
    int k = task_kind(name);
    return k < 5 ? shorts[k] : name;
}

static long final_world(const model *m)
{
    long w = 0;
    for (size_t i = 0; i < m->nl; i++)
        w += m->L[i].joined_t >= 0 && !m->L[i].down;
    return w;
}

/* The group (process) name a learner got. */
static void group_of(const model *m, const learner *l, char *out, size_t len)
{
    size_t pool = 0;
    for (size_t i = 0; i < m->nl;) {
        if (special(&m->L[i])) {
            if (&m->L[i] == l) {
                snprintf(out, len, "solo-%.60s", l->id);
                for (char *c = out; *c; c++)
                    if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                          *c == '-'))
                        *c = '_';
                return;
            }
            i++;
            continue;
        }
        size_t j = i + 1;
        while (j < m->nl && !special(&m->L[j]) && m->L[j].batch == m->L[i].batch)
            j++;
        if (l >= &m->L[i] && l < &m->L[j]) {
            snprintf(out, len, "pool%zu", pool);
            return;
        }
        pool++;
        i = j;
    }
    snprintf(out, len, "?");
}

static void add_expect(const model *m, cJSON *sc, sfe_expect_mode mode)
{
    cJSON *ex = cJSON_AddObjectToObject(sc, "expect");
    cJSON *tasks = cJSON_AddArrayToObject(ex, "tasks");
    /* a coordinator killed prints no summary: nothing to say of its tasks;
     * after a SIGTERM, of those up to the one in flight */
    size_t ntasks = m->coordinator_lost ? 0 : m->shutdown_mid_task ? m->shutdown_task + 1 : m->nt;
    for (size_t i = 0; i < ntasks; i++) {
        const task *t = &m->T[i];
        cJSON *x = cJSON_CreateObject();
        add_int(x, "index", (long)i);
        bool failed = t->status && strcmp(t->status, "completed") != 0;
        if (mode == SFE_EXPECT_OBSERVED) {
            cJSON_AddStringToObject(x, "status", failed ? "failed" : "completed");
            for (size_t j = 0; failed && t->message && j < m->nl; j++) {
                const char *hit = strstr(t->message, m->L[j].id);
                size_t n = strlen(m->L[j].id);
                if (hit && !(hit[n] >= '0' && hit[n] <= '9')) {
                    char ref[32];
                    ref_name(m, &m->L[j], ref, sizeof ref);
                    cJSON_AddStringToObject(x, "message_contains", ref);
                    break;
                }
            }
        } else {
            add_int(x, "latency_max_ms", sc_ms(m, m->deadline_ms) + 1000);
            /* a learn that lost a learner must name it */
            for (size_t j = 0; failed && j < m->nl; j++)
                for (size_t k = 0; k < m->L[j].nfaults; k++)
                    if (m->L[j].faults[k].task && t->name && strcmp(m->L[j].faults[k].task, t->name) == 0 &&
                        m->L[j].faults[k].exits) {
                        char ref[32];
                        ref_name(m, &m->L[j], ref, sizeof ref);
                        cJSON_AddStringToObject(x, "message_contains", ref);
                    }
        }
        (void)short_name;
        cJSON_AddItemToArray(tasks, x);
    }
    if (!m->shutdown_mid_task) {
        cJSON *world = cJSON_AddArrayToObject(ex, "world_size");
        cJSON *w = cJSON_CreateObject();
        add_int(w, "at_end", final_world(m));
        cJSON_AddItemToArray(world, w);
    }
    cJSON *exits = cJSON_CreateArray();
    if (m->shutdown_mid_task) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "process", "aggregator");
        add_int(e, "code", 0);
        cJSON_AddItemToArray(exits, e);
    }
    if (m->coordinator_lost) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "process", "coordinator");
        cJSON_AddBoolToObject(e, "signal", 1);
        cJSON_AddItemToArray(exits, e);
    }
    for (size_t i = 0; i < m->nl; i++)
        for (size_t k = 0; k < m->L[i].nfaults; k++)
            if (m->L[i].faults[k].exits) {
                char g[80];
                group_of(m, &m->L[i], g, sizeof g);
                cJSON *e = cJSON_CreateObject();
                cJSON_AddStringToObject(e, "process", g);
                add_int(e, "code", 3);
                cJSON_AddItemToArray(exits, e);
                break;
            }
    if (cJSON_GetArraySize(exits))
        cJSON_AddItemToObject(ex, "exits", exits);
    else
        cJSON_Delete(exits);
    if (m->k8s && cJSON_GetArraySize(m->failed_reported)) {
        cJSON *op = cJSON_AddObjectToObject(ex, "operator");
        cJSON *fl = cJSON_AddArrayToObject(op, "failed_learners");
        for (const cJSON *c = m->failed_reported->child; c; c = c->next) {
            const learner *l = by_id(m, c->valuestring);
            char ref[32];
            if (!l)
                continue;
            ref_name(m, l, ref, sizeof ref);
            cJSON_AddItemToArray(fl, cJSON_CreateString(ref));
        }
    }
    if (mode == SFE_EXPECT_CORRECT) {
        cJSON_AddBoolToObject(ex, "exactly_once", 1);
        if (!m->shutdown_mid_task)
            cJSON_AddBoolToObject(ex, "aggregator_alive", 1);
    }
}

static void add_timings(const model *m, cJSON *sc)
{
    /* The scenario's time_scale scales production defaults; a source whose
     * own timings differ from those defaults keeps them, scaled. */
    cJSON *t = cJSON_CreateObject();
    struct {
        const char *key;
        double v, dflt;
    } ts[] = {{"heartbeat_span_ms", m->span_ms, 3000},    {"heartbeat_tolerance_ms", m->tolerance_ms, 17000},
              {"max_retry_ms", m->max_retry_ms, 60000},   {"retry_interval_ms", m->retry_ms, 2000},
              {"sync_period_ms", m->sync_ms, 3000},       {"task_deadline_ms", m->deadline_ms, 60000}};
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        double prod = ts[i].v / m->src_scale;
        if (fabs(prod - ts[i].dflt) > 0.5)
            add_int(t, ts[i].key, sc_ms(m, ts[i].v) > 5 ? sc_ms(m, ts[i].v) : 5);
    }
    if (cJSON_GetArraySize(t))
        cJSON_AddItemToObject(sc, "timings", t);
    else
        cJSON_Delete(t);
}

cJSON *sfe_scenario(const sfe_log *log, const sfe_opts *o, char *err, size_t errlen)
{
    if (sfe_check(log, err, errlen) != 0)
        return NULL;
    model m = {0};
    build(&m, log);
    m.scale = o->time_scale > 0 ? o->time_scale : (m.src_scale < 1 ? m.src_scale : 0.01);
    m.factor = m.scale / m.src_scale;
    for (size_t i = 0; i < m.ns; i++)
        if (!m.S[i].error) {
            for (const cJSON *c = m.S[i].list->child; c; c = c->next) {
                learner *l = find_learner(&m, c->valuestring, NULL);
                if (l)
                    l->operator_initial = true;
            }
            break;
        }

    cJSON *sc = cJSON_CreateObject();
    char desc[600];
    size_t nfault = 0;
    for (size_t i = 0; i < m.nl; i++)
        nfault += m.L[i].nfaults;
    snprintf(desc, sizeof desc,
             "Replays the incident in %s: %zu learners, %zu tasks, %zu learner faults%s; expectations %s.",
             o->source ? o->source : "an events file", m.nl, m.nt, nfault, m.k8s ? ", Kubernetes mode" : "",
             o->expect == SFE_EXPECT_CORRECT ? "of a correct aggregator" : "as observed there");
    cJSON_AddStringToObject(sc, "description", desc);
    cJSON *comment = cJSON_AddObjectToObject(sc, "comment");
    cJSON_AddStringToObject(comment, "made_by", "scenario_from_events " DILEARN_VERSION);
    cJSON *files = cJSON_AddArrayToObject(comment, "from");
    for (size_t i = 0; i < log->nfiles; i++)
        cJSON_AddItemToArray(files, cJSON_CreateString(log->files[i]));
    cJSON_AddStringToObject(comment, "run", log->run ? log->run : "");
    cJSON *src = cJSON_AddObjectToObject(comment, "source_times");
    cJSON_AddItemToObject(src, "time_scale", jsonx_new_double(m.src_scale));
    cJSON_AddItemToObject(src, "duration_ms", jsonx_new_double(m.end_t));
    cJSON *tt = cJSON_AddArrayToObject(src, "tasks_received_ms");
    for (size_t i = 0; i < m.nt; i++)
        cJSON_AddItemToArray(tt, jsonx_new_double(m.T[i].t_recv));
    add_int(sc, "seed", (long)o->seed);
    cJSON_AddItemToObject(sc, "time_scale", jsonx_new_double(m.scale));
    long run_ms = sc_ms(&m, m.end_t);
    long timeout = run_ms * 3 + 10000;
    add_int(sc, "timeout_ms", timeout > 600000 ? 600000 : timeout);
    /* as long as the source ran (what a fault did late, such as a lost
     * heartbeat, shows only if the replay lasts that long) */
    if (!m.shutdown_mid_task && run_ms > 0)
        add_int(sc, "min_run_ms", run_ms);
    add_timings(&m, sc);
    add_groups(&m, sc);
    if (m.k8s)
        cJSON_AddItemToObject(cJSON_AddObjectToObject(sc, "aggregator"), "k8s", cJSON_CreateTrue());
    add_coordinator(&m, sc);
    add_actions(&m, sc);
    add_expect(&m, sc, o->expect);
    note(m.unknown, "get-data demands: each learner's batch size is the size of its last learn part (4 when it had none)");
    note(m.unknown, "the learners' results (losses, steps): the mocks make their own");
    cJSON_AddItemToObject(comment, "inferred", cJSON_Duplicate(m.inferred, 1));
    cJSON_AddItemToObject(comment, "not_inferred", cJSON_Duplicate(m.unknown, 1));
    free_model(&m);
    return sc;
}

cJSON *sfe_outcomes(const sfe_log *log)
{
    model m = {0};
    build(&m, log);
    cJSON *o = cJSON_CreateObject();
    cJSON *tasks = cJSON_AddArrayToObject(o, "tasks");
    for (size_t i = 0; i < m.nt; i++) {
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateString(m.T[i].name ? m.T[i].name : "?"));
        cJSON_AddItemToArray(p, cJSON_CreateString(m.T[i].status ? m.T[i].status : "unfinished"));
        cJSON_AddItemToArray(tasks, p);
    }
    /* learners by their place (learner<i>), as a replay names them */
    char ref[32];
    cJSON *left = cJSON_AddArrayToObject(o, "left");
    for (size_t i = 0; i < log->n; i++) {
        const evt_record *r = &log->lines[i].rec;
        if (r->id != EVT_learner_left)
            continue;
        const char *c = evt_str(r, EVT_F_cause);
        const learner *l = evt_str(r, EVT_F_learner) ? by_id(&m, evt_str(r, EVT_F_learner)) : NULL;
        if ((c && strcmp(c, "shutdown") == 0) || !l)
            continue;
        ref_name(&m, l, ref, sizeof ref);
        cJSON *p = cJSON_CreateArray();
        cJSON_AddItemToArray(p, cJSON_CreateString(ref));
        cJSON_AddItemToArray(p, cJSON_CreateString(c ? c : "none"));
        cJSON_AddItemToArray(left, p);
    }
    cJSON *failed = cJSON_AddArrayToObject(o, "failed");
    for (const cJSON *c = m.failed_reported->child; c; c = c->next) {
        const learner *l = by_id(&m, c->valuestring);
        if (!l)
            continue;
        ref_name(&m, l, ref, sizeof ref);
        cJSON_AddItemToArray(failed, cJSON_CreateString(ref));
    }
    add_int(o, "final_world", final_world(&m));
    free_model(&m);
    return o;
}
