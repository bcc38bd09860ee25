/* sc_checks: the expectations of a scenario, checked once the run is over
 * (see sc_run_int.h). */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "jsonx.h"
#include "util.h"
#include "sc_run_int.h"

/* ---- Prometheus text ---- */

bool sc_prom_value(const char *text, const char *name, const cJSON *labels, double *out)
{
    size_t nl = strlen(name);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (*p == '#' || strncmp(p, name, nl) != 0 || (p[nl] != ' ' && p[nl] != '{'))
            continue;
        const char *eol = strchr(p, '\n');
        size_t ll = eol ? (size_t)(eol - p) : strlen(p);
        char *line = xstrndup(p, ll);
        bool ok = true;
        if (labels) {
            const char *lb = line[nl] == '{' ? line + nl : "";
            const char *le = strchr(lb, '}');
            for (const cJSON *it = labels->child; it && ok; it = it->next) {
                char *want = xasprintf("%s=\"%s\"", it->string, cJSON_IsString(it) ? it->valuestring : "");
                const char *f = strstr(lb, want);
                ok = f && (!le || f < le) && (f[-1] == '{' || f[-1] == ',');
                free(want);
            }
        }
        if (ok) {
            const char *v = line[nl] == '{' ? strchr(line, '}') : line + nl;
            char *end;
            double d = v ? strtod(v + 1, &end) : 0;
            if (v && end != v + 1) {
                *out = d;
                free(line);
                return true;
            }
        }
        free(line);
    }
    return false;
}

/* The value at a dotted key path ("info.loss", "a.0" for a list item). */
static const cJSON *at_path(const cJSON *v, const char *path)
{
    char *copy = xstrdup(path);
    char *save = NULL;
    for (char *k = strtok_r(copy, ".", &save); k && v; k = strtok_r(NULL, ".", &save)) {
        if (cJSON_IsArray(v)) {
            int64_t i;
            v = util_parse_i64(k, 0, INT32_MAX, &i) ? cJSON_GetArrayItem(v, (int)i) : NULL;
        } else if (cJSON_IsObject(v)) {
            v = jsonx_get(v, k);
        } else {
            v = NULL;
        }
    }
    free(copy);
    return v;
}

static bool json_equal(const cJSON *a, const cJSON *b)
{
    if (jsonx_is_number(a) && jsonx_is_number(b)) {
        double x, y;
        return jsonx_get_double(a, &x) && jsonx_get_double(b, &y) && x == y;
    }
    if (cJSON_IsString(a) && cJSON_IsString(b))
        return strcmp(a->valuestring, b->valuestring) == 0;
    if (cJSON_IsBool(a) && cJSON_IsBool(b))
        return cJSON_IsTrue(a) == cJSON_IsTrue(b);
    if (cJSON_IsNull(a) && cJSON_IsNull(b))
        return true;
    if (cJSON_IsArray(a) && cJSON_IsArray(b)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
            return false;
        for (const cJSON *x = a->child, *y = b->child; x && y; x = x->next, y = y->next)
            if (!json_equal(x, y))
                return false;
        return true;
    }
    if (cJSON_IsObject(a) && cJSON_IsObject(b)) {
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
            return false;
        for (const cJSON *x = a->child; x; x = x->next) {
            const cJSON *y = jsonx_get(b, x->string);
            if (!y || !json_equal(x, y))
                return false;
        }
        return true;
    }
    return false;
}

static char *short_json(const cJSON *v)
{
    if (!v)
        return xstrdup("nothing");
    char *t = jsonx_print(v);
    if (strlen(t) > 300) {
        t[297] = t[298] = t[299] = '.';
        t[300] = '\0';
    }
    return t;
}

/* The task of the summary an expectation means, with its label. */
static const cJSON *find_task(const sc_run *r, const sc_expect_task *x, char *label, size_t len, int *index)
{
    const cJSON *tasks = r->summary ? jsonx_get(r->summary, "tasks") : NULL;
    *index = -1;
    if (x->index >= 0) {
        snprintf(label, len, "task #%d", x->index);
        *index = x->index;
        return tasks ? cJSON_GetArrayItem(tasks, x->index) : NULL;
    }
    snprintf(label, len, "%s #%d", x->name, x->nth);
    int n = 0, i = 0;
    for (const cJSON *t = tasks ? tasks->child : NULL; t; t = t->next, i++) {
        const char *nm = jsonx_get_str(t, "name");
        if (nm && strcmp(nm, x->name) == 0 && ++n == x->nth) {
            *index = i;
            return t;
        }
    }
    return NULL;
}

/* ---- what the aggregator under test offers (its profile) ---- */

static bool offers_metrics(const sc_run *r)
{
    return !r->opts.profile || r->opts.profile->metrics;
}

/* The coordinator sent no learner_close_task: the profile's aggregator
 * serves none (sc_cmd.c passes --no-close). */
static bool close_withheld(const sc_run *r)
{
    return r->opts.profile && !r->opts.profile->close_task && !r->s->script;
}

static bool is_close(const char *name)
{
    const char *full = name ? sc_task_full_name(name) : NULL;
    return full && strcmp(full, "learner_close_task") == 0;
}

#define NO_CLOSE_WHY                                                                                                   \
    "the aggregator under test (profile %s) serves no learner_close_task, so the coordinator sent none (DI-engine's "  \
    "answers \"task name error\")"

static void check_tasks(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    const cJSON *tasks = r->summary ? jsonx_get(r->summary, "tasks") : NULL;
    const char *nosum = "no summary from the coordinator (it did not finish)";
    if (e->coordinator_ok >= 0) {
        const cJSON *ok = r->summary ? jsonx_get(r->summary, "ok") : NULL;
        char *fails = short_json(r->summary ? jsonx_get(r->summary, "failures") : NULL);
        if (!ok)
            sr_check(r, false, e->line, "coordinator_ok", "%s", nosum);
        else
            sr_check(r, cJSON_IsTrue(ok) == (e->coordinator_ok == 1), e->line,
                     e->coordinator_ok ? "the coordinator reports ok" : "the coordinator reports not ok",
                     "ok is %s; its failures: %s", cJSON_IsTrue(ok) ? "true" : "false", fails);
        free(fails);
    }
    if (e->task_count >= 0) {
        int n = tasks ? cJSON_GetArraySize(tasks) : -1;
        char what[64];
        snprintf(what, sizeof what, "%d tasks run", e->task_count);
        if (close_withheld(r))
            sr_skip(r, e->line, what, NO_CLOSE_WHY " and the count includes it; the coordinator ran %d",
                    r->opts.profile->name, n);
        else if (!tasks)
            sr_check(r, false, e->line, what, "%s", nosum);
        else
            sr_check(r, n == e->task_count, e->line, what, "the coordinator ran %d", n);
    }
    if (e->all_status) {
        char what[64];
        snprintf(what, sizeof what, "every task %s", e->all_status);
        if (!tasks) {
            sr_check(r, false, e->line, what, "%s", nosum);
        } else {
            xbuf bad = {0};
            int i = 0, nbad = 0;
            for (const cJSON *t = tasks->child; t; t = t->next, i++) {
                const char *st = jsonx_get_str(t, "status");
                if (!st || strcmp(st, e->all_status) != 0) {
                    if (nbad++ < 5)
                        xbuf_printf(&bad, "%stask #%d %s is %s (%.200s)", nbad > 1 ? "; " : "", i,
                                    jsonx_get_str(t, "name") ? jsonx_get_str(t, "name") : "?", st ? st : "?",
                                    jsonx_get_str(t, "message") ? jsonx_get_str(t, "message") : "");
                }
            }
            char *b = xbuf_take(&bad);
            sr_check(r, nbad == 0, e->line, what, "%s", nbad ? b : "");
            free(b);
        }
    }
    for (size_t k = 0; k < e->ntasks; k++) {
        const sc_expect_task *x = &e->tasks[k];
        char label[200], what[512];
        int idx;
        if (x->index < 0 && is_close(x->name) && close_withheld(r)) {
            snprintf(what, sizeof what, "%s #%d", x->name, x->nth);
            sr_skip(r, x->line, what, NO_CLOSE_WHY, r->opts.profile->name);
            continue;
        }
        const cJSON *t = find_task(r, x, label, sizeof label, &idx);
        if (!t) {
            snprintf(what, sizeof what, "%s exists", label);
            sr_check(r, false, x->line, what, "%s", !tasks ? nosum : "the coordinator ran no such task");
            continue;
        }
        const char *st = jsonx_get_str(t, "status");
        const char *msg = jsonx_get_str(t, "message");
        const cJSON *res = jsonx_get(t, "result");
        char *rs = short_json(res);
        if (x->status) {
            snprintf(what, sizeof what, "%s: status %s", label, x->status);
            sr_check(r, st && strcmp(st, x->status) == 0, x->line, what, "status is %s; message \"%.300s\"; result %s",
                     st ? st : "missing", msg ? msg : "", rs);
        }
        if (x->message_contains) {
            snprintf(what, sizeof what, "%s: message contains \"%.200s\"", label, x->message_contains);
            sr_check(r, msg && strstr(msg, x->message_contains), x->line, what, "message is \"%.500s\" (status %s)",
                     msg ? msg : "", st ? st : "?");
        }
        for (const cJSON *f = x->result ? x->result->child : NULL; f; f = f->next) {
            const cJSON *got = at_path(res, f->string);
            char *want = short_json(f), *have = short_json(got);
            snprintf(what, sizeof what, "%s: result.%s == %.200s", label, f->string, want);
            sr_check(r, got && json_equal(got, f), x->line, what, "%s%s; the result: %s",
                     got ? "it is " : "the result has no key ", got ? have : f->string, rs);
            free(want);
            free(have);
        }
        for (size_t h = 0; h < x->nresult_has; h++) {
            snprintf(what, sizeof what, "%s: result has %s", label, x->result_has[h]);
            bool has = at_path(res, x->result_has[h]) != NULL;
            sr_check(r, has, x->line, what, "the result has %s key %s: %s", has ? "the" : "no", x->result_has[h], rs);
        }
        for (size_t h = 0; h < x->nresult_lacks; h++) {
            snprintf(what, sizeof what, "%s: result lacks %s", label, x->result_lacks[h]);
            bool lacks = at_path(res, x->result_lacks[h]) == NULL;
            sr_check(r, lacks, x->line, what, "the result %s %s: %s", lacks ? "lacks" : "has", x->result_lacks[h], rs);
        }
        for (const cJSON *f = x->result_len ? x->result_len->child : NULL; f; f = f->next) {
            const cJSON *got = at_path(res, f->string);
            int64_t want = 0;
            jsonx_get_i64(f, &want);
            snprintf(what, sizeof what, "%s: result.%s has %lld items", label, f->string, (long long)want);
            if (!cJSON_IsArray(got))
                sr_check(r, false, x->line, what, "result.%s is %s, not a list; the result: %s", f->string,
                         jsonx_type_name(got), rs);
            else
                sr_check(r, cJSON_GetArraySize(got) == want, x->line, what, "it has %d; the result: %s",
                         cJSON_GetArraySize(got), rs);
        }
        if (x->latency_max_ms > 0) {
            double lat = -1;
            jsonx_get_double(jsonx_get(t, "latency_ms"), &lat);
            snprintf(what, sizeof what, "%s: latency at most %ld ms", label, x->latency_max_ms);
            sr_check(r, lat >= 0 && lat <= (double)x->latency_max_ms, x->line, what, "latency %.1f ms", lat);
        }
        free(rs);
    }
    for (size_t k = 0; k < e->nfailures_contain; k++) {
        char what[512];
        snprintf(what, sizeof what, "the coordinator's failures mention \"%.200s\"", e->failures_contain[k]);
        char *f = short_json(r->summary ? jsonx_get(r->summary, "failures") : NULL);
        sr_check(r, r->summary && strstr(f, e->failures_contain[k]), e->line, what, "its failures: %s", f);
        free(f);
    }
}

static void world_series(const sc_run *r, xbuf *b)
{
    int last = -1;
    int n = 0;
    for (size_t i = 0; i < r->res.nsamples; i++) {
        if (r->res.samples[i].value == last)
            continue;
        last = r->res.samples[i].value;
        if (n++ < 40)
            xbuf_printf(b, "%s%d@%.0fms", n > 1 ? " " : "", last, r->res.samples[i].t_ms);
    }
    if (n >= 40)
        xbuf_puts(b, " ...");
    if (n == 0)
        xbuf_puts(b, "no samples (the aggregator's /metrics never answered)");
}

/* Without the aggregator's /metrics, the world size is what the protocol
 * shows: each resource answer's gpu, at the time it reached the coordinator.
 * These are points, not a series: a window is judged only by the answers in
 * it, and skipped when it holds none. */
static void check_world_protocol(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    const cJSON *tasks = r->summary ? jsonx_get(r->summary, "tasks") : NULL;
    size_t n = 0, cap = r->nresource + 1;
    sc_sample *pts = xcalloc(cap, sizeof *pts);
    for (const cJSON *t = tasks ? tasks->child : NULL; t && n < r->nresource; t = t->next) {
        const char *nm = jsonx_get_str(t, "name");
        if (!nm || strcmp(nm, "resource") != 0)
            continue;
        int64_t gpu;
        const char *st = jsonx_get_str(t, "status");
        if (st && strcmp(st, "completed") == 0 && jsonx_get_i64(jsonx_get(jsonx_get(t, "result"), "gpu"), &gpu)) {
            pts[n].t_ms = r->resource_t[n];
            pts[n].value = (int)gpu;
            sr_add_sample(r, pts[n].t_ms, pts[n].value);
            n++;
        }
    }
    xbuf sb = {0};
    for (size_t i = 0; i < n; i++)
        xbuf_printf(&sb, "%s%d@%.0fms", i ? " " : "", pts[i].value, pts[i].t_ms);
    char *series = xbuf_take(&sb);
    const char *name = r->opts.profile->name;
    for (size_t k = 0; k < e->nworld; k++) {
        const sc_expect_world *w = &e->world[k];
        double from = (double)w->from_ms, to = w->to_ms < 0 ? 1e18 : (double)w->to_ms;
        char what[256];
        if (w->kind == SC_WS_AT_END) {
            snprintf(what, sizeof what, "world size is %d at the end", w->value);
            sr_skip(r, w->line, what,
                    "the world size at the end needs the aggregator's /metrics, which profile %s does not offer "
                    "(resource answers seen: %s)",
                    name, n ? series : "none");
            continue;
        }
        const char *kw = w->kind == SC_WS_EVENTUALLY     ? "reaches"
                         : w->kind == SC_WS_NEVER_ABOVE ? "never above"
                                                         : "never below";
        if (w->to_ms >= 0)
            snprintf(what, sizeof what, "world size %s %d between %ld and %ld ms", kw, w->value, w->from_ms, w->to_ms);
        else if (w->from_ms > 0)
            snprintf(what, sizeof what, "world size %s %d from %ld ms on", kw, w->value, w->from_ms);
        else
            snprintf(what, sizeof what, "world size %s %d", kw, w->value);
        int in = 0;
        bool hit = false, bad = false;
        for (size_t i = 0; i < n; i++) {
            if (pts[i].t_ms < from || pts[i].t_ms > to)
                continue;
            in++;
            hit |= pts[i].value == w->value;
            bad |= w->kind == SC_WS_NEVER_ABOVE ? pts[i].value > w->value : pts[i].value < w->value;
        }
        if (!in)
            sr_skip(r, w->line, what,
                    "no resource answer in the window, and profile %s offers no /metrics to sample (resource "
                    "answers: %s)",
                    name, n ? series : "none");
        else if (w->kind == SC_WS_EVENTUALLY && !hit)
            /* between two answers the protocol shows nothing: not seen is
             * not proof that it never was */
            sr_skip(r, w->line, what,
                    "not among the coordinator's resource answers in the window (%s), and profile %s offers no "
                    "/metrics to see what happened between them",
                    series, name);
        else if (w->kind == SC_WS_EVENTUALLY)
            sr_check(r, true, w->line, what, "as the coordinator's resource answers saw it: %s", series);
        else
            sr_check(r, !bad, w->line, what, "as the coordinator's resource answers saw it: %s", series);
    }
    free(series);
    free(pts);
}

static void check_world(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    if (!offers_metrics(r)) {
        check_world_protocol(r);
        return;
    }
    for (size_t k = 0; k < e->nworld; k++) {
        const sc_expect_world *w = &e->world[k];
        double from = (double)w->from_ms, to = w->to_ms < 0 ? 1e18 : (double)w->to_ms;
        char what[256], win[96] = "";
        if (w->from_ms > 0 && w->to_ms < 0)
            snprintf(win, sizeof win, " from %ld ms on", w->from_ms);
        if (w->to_ms >= 0)
            snprintf(win, sizeof win, " between %ld and %ld ms", w->from_ms, w->to_ms);
        bool ok;
        int last = -1;
        double last_t = 0;
        switch (w->kind) {
        case SC_WS_EVENTUALLY:
            ok = false;
            for (size_t i = 0; i < r->res.nsamples; i++) {
                const sc_sample *sm = &r->res.samples[i];
                /* a sample holds from its time to the next one */
                double end = i + 1 < r->res.nsamples ? r->res.samples[i + 1].t_ms : sm->t_ms;
                if (end >= from && sm->t_ms <= to && sm->value == w->value)
                    ok = true;
            }
            snprintf(what, sizeof what, "world size reaches %d%s", w->value, win);
            break;
        case SC_WS_AT_END:
            if (r->res.nsamples) {
                last = r->res.samples[r->res.nsamples - 1].value;
                last_t = r->res.samples[r->res.nsamples - 1].t_ms;
            }
            ok = last == w->value;
            snprintf(what, sizeof what, "world size is %d at the end", w->value);
            break;
        default: {
            ok = true;
            for (size_t i = 0; i < r->res.nsamples; i++) {
                const sc_sample *sm = &r->res.samples[i];
                double end = i + 1 < r->res.nsamples ? r->res.samples[i + 1].t_ms : sm->t_ms;
                if (end < from || sm->t_ms > to)
                    continue;
                if (w->kind == SC_WS_NEVER_ABOVE ? sm->value > w->value : sm->value < w->value)
                    ok = false;
            }
            snprintf(what, sizeof what, "world size never %s %d%s", w->kind == SC_WS_NEVER_ABOVE ? "above" : "below",
                     w->value, win);
        }
        }
        xbuf b = {0};
        world_series(r, &b);
        char *series = xbuf_take(&b);
        if (w->kind == SC_WS_AT_END)
            sr_check(r, ok, w->line, what, "it is %d (at %.0f ms); over time: %s", last, last_t, series);
        else if (from > r->res.run_ms) /* nothing was seen in the window */
            sr_check(r, false, w->line, what, "the run ended at %.0f ms, before the window from %ld ms; over time: %s",
                     r->res.run_ms, w->from_ms, series);
        else
            sr_check(r, ok, w->line, what, "over time (size@time): %s", series);
        free(series);
    }
}

static void check_metrics_logs(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    const char *text = r->final_metrics ? r->final_metrics : r->last_metrics;
    for (size_t k = 0; k < e->nmetrics; k++) {
        const sc_expect_metric *m = &e->metrics[k];
        char *lb = m->labels ? jsonx_print(m->labels) : xstrdup("");
        char what[512];
        snprintf(what, sizeof what, "metric %s%s %s %g", m->name, lb, m->op, m->value);
        double v;
        if (!offers_metrics(r)) {
            sr_skip(r, m->line, what, "needs the aggregator's /metrics, which profile %s does not offer",
                    r->opts.profile->name);
        } else if (!text) {
            sr_check(r, false, m->line, what, "the aggregator's /metrics never answered");
        } else if (!sc_prom_value(text, m->name, m->labels, &v)) {
            sr_check(r, false, m->line, what, "no such sample in the aggregator's last /metrics%s",
                     r->final_metrics ? "" : " (the final read failed; an earlier sample was used)");
        } else {
            bool ok = strcmp(m->op, "==") == 0   ? v == m->value
                      : strcmp(m->op, "!=") == 0 ? v != m->value
                      : strcmp(m->op, ">=") == 0 ? v >= m->value
                      : strcmp(m->op, "<=") == 0 ? v <= m->value
                      : strcmp(m->op, ">") == 0  ? v > m->value
                                                 : v < m->value;
            sr_check(r, ok, m->line, what, "it is %g", v);
        }
        free(lb);
    }
    for (size_t k = 0; k < e->nlogs; k++) {
        const sc_expect_log *l = &e->logs[k];
        int idx = -1;
        for (size_t p = 0; p < r->nprocs; p++)
            if (strcmp(sc_scenario_proc_name(r->s, (int)p), l->process) == 0)
                idx = (int)p;
        char what[512];
        snprintf(what, sizeof what, "%s's log %s \"%.200s\"", l->process, l->absent ? "lacks" : "contains",
                 l->contains);
        if (idx < 0) {
            sr_check(r, false, l->line, what, "no such process");
            continue;
        }
        if (idx == SC_PROC_AGG && r->opts.profile && !r->opts.profile->events) {
            sr_skip(r, l->line, what, "reads our aggregator's own log; profile %s does not offer its events",
                    r->opts.profile->name);
            continue;
        }
        size_t len = 0;
        char *t = util_read_file(sc_proc_log_path(r->procs[idx].p), 256u << 20, &len, NULL);
        const char *hit = t ? strstr(t, l->contains) : NULL;
        if (l->absent) {
            const char *eol = hit ? strchr(hit, '\n') : NULL;
            const char *bol = hit;
            while (bol && bol > t && bol[-1] != '\n')
                bol--;
            sr_check(r, !hit, l->line, what, "it has the line: %.*s",
                     hit ? (int)((eol ? eol : hit + strlen(hit)) - bol) : 0, hit ? bol : "");
        } else {
            sr_check(r, hit != NULL, l->line, what, "%s", hit ? "found" : t ? "not found" : "no log file");
        }
        free(t);
    }
}

static void check_learner_tasks(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    for (size_t k = 0; k < e->nlearner_tasks; k++) {
        const sc_expect_learner_tasks *x = &e->learner_tasks[k];
        int n = 0;
        for (size_t i = 0; i < r->nlts; i++) {
            const ltask_ev *ev = &r->lts[i];
            if (ev->learner != x->learner || ev->t < (double)x->after_ms)
                continue;
            if (x->task && (!ev->task || strcmp(ev->task, x->task) != 0))
                continue;
            n++;
        }
        char what[256], range[64];
        if (x->max < 0)
            snprintf(range, sizeof range, "at least %d", x->min);
        else if (x->min == x->max)
            snprintf(range, sizeof range, "exactly %d", x->min);
        else
            snprintf(range, sizeof range, "%d to %d", x->min, x->max);
        bool one = x->min == 1 && (x->max == 1 || x->max < 0);
        if (x->task)
            snprintf(what, sizeof what, "learner%d receives %s %s time%s", x->learner, x->task, range, one ? "" : "s");
        else
            snprintf(what, sizeof what, "learner%d receives %s task%s", x->learner, range, one ? "" : "s");
        if (x->after_ms) {
            size_t l = strlen(what);
            snprintf(what + l, sizeof what - l, " after %ld ms", x->after_ms);
        }
        const sc_group *lg = &r->s->groups[sc_scenario_group_of(r->s, x->learner)];
        if (!SC_GROUP_IS_MOCK(lg)) {
            sr_skip(r, x->line, what, "group '%s' is given by %s, not the mock: only the mock tells the tasks it "
                    "receives", lg->name, lg->command ? "command" : "address");
            continue;
        }
        if (is_close(x->task) && close_withheld(r)) {
            sr_skip(r, x->line, what, NO_CLOSE_WHY, r->opts.profile->name);
            continue;
        }
        sr_check(r, n >= x->min && (x->max < 0 || n <= x->max), x->line, what, "it received %d", n);
    }
}

static void check_exits(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    for (size_t k = 0; k < e->nexits; k++) {
        const sc_expect_exit *x = &e->exits[k];
        int idx = -1;
        for (size_t p = 0; p < r->nprocs; p++)
            if (strcmp(sc_scenario_proc_name(r->s, (int)p), x->process) == 0)
                idx = (int)p;
        if (idx < 0)
            continue;
        rproc *rp = &r->procs[idx];
        char what[256], how[128];
        if (x->any_code)
            snprintf(what, sizeof what, "%s exits during the run", x->process);
        else if (x->code < 0)
            snprintf(what, sizeof what, "%s is ended by a signal", x->process);
        else
            snprintf(what, sizeof what, "%s exits with code %d", x->process, x->code);
        /* a learner made to crash at learner_close_task is never sent one */
        if (idx >= SC_PROC_GROUP0 && close_withheld(r)) {
            const sc_group *g = &r->s->groups[idx - SC_PROC_GROUP0];
            bool at_close = false;
            for (size_t f = 0; f < g->nfaults; f++)
                at_close |= strstr(g->faults[f], "learner_close_task") != NULL;
            if (at_close) {
                sr_skip(r, x->line, what, "its fault is at learner_close_task, and " NO_CLOSE_WHY,
                        r->opts.profile->name);
                continue;
            }
        }
        if (!rp->exited) {
            sr_check(r, false, x->line, what, "it was still running at the end");
            continue;
        }
        sc_describe_status(rp->status, how, sizeof how);
        bool ok = x->any_code ||
                  (x->code < 0 ? WIFSIGNALED(rp->status) : WIFEXITED(rp->status) && WEXITSTATUS(rp->status) == x->code);
        if (ok)
            sr_check(r, true, x->line, what, "it %s at %.0f ms", how, rp->exit_t);
        else
            sr_check(r, false, x->line, what, "it %s at %.0f ms; its last log lines:\n%s", how, rp->exit_t,
                     sc_proc_tail(rp->p));
    }
}

static int cmp_edge(const void *a, const void *b)
{
    const double *x = a, *y = b;
    /* by time; at one time an answer (-1) before an arrival (+1) */
    return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] > y[1]) - (x[1] < y[1]);
}

/* The most requests the operator held at once, from the journal's arrival
 * and answer times (a request never answered is held to the end). */
static void check_operator_in_flight(sc_run *r, const cJSON *journal)
{
    const sc_expect *e = &r->s->expect;
    size_t n = 0, cap = journal ? (size_t)cJSON_GetArraySize(journal) : 0;
    double(*edge)[2] = xcalloc(2 * cap + 1, sizeof *edge);
    for (const cJSON *j = journal ? journal->child : NULL; j; j = j->next) {
        double at, done;
        if (!jsonx_get_double(jsonx_get(j, "time_ms"), &at))
            continue;
        edge[n][0] = at, edge[n++][1] = 1;
        if (jsonx_get_double(jsonx_get(j, "answered_ms"), &done))
            edge[n][0] = done, edge[n++][1] = -1;
    }
    qsort(edge, n, sizeof *edge, cmp_edge);
    int cur = 0, most = 0;
    double most_at = 0;
    for (size_t i = 0; i < n; i++) {
        cur += (int)edge[i][1];
        if (cur > most)
            most = cur, most_at = edge[i][0];
    }
    free(edge);
    char what[128];
    snprintf(what, sizeof what, "the operator held at most %d request%s at once", e->operator_max_in_flight,
             e->operator_max_in_flight == 1 ? "" : "s");
    if (!journal)
        sr_check(r, false, e->line, what, "could not read its journal");
    else
        sr_check(r, most <= e->operator_max_in_flight, e->line, what,
                 "it held %d at once (at %.0f ms of its clock), of %d requests", most, most_at,
                 cJSON_GetArraySize(journal));
}

static void check_operator(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    if (!e->has_operator_failed && !e->noperator_requests && !e->operator_max_in_flight)
        return;
    if (!r->op_state) {
        sr_check(r, false, e->line, "the operator's journal", "could not read it: %s",
                 r->op_error ? r->op_error : "the operator is not running");
        return;
    }
    const cJSON *data = jsonx_get(r->op_state, "data");
    if (!data)
        data = r->op_state;
    if (e->has_operator_failed) {
        const cJSON *failed = jsonx_get(data, "failed");
        xbuf want = {0}, got = {0};
        for (size_t i = 0; i < e->noperator_failed; i++)
            xbuf_printf(&want, "%slearner%d", i ? ", " : "", e->operator_failed[i]);
        bool ok = true;
        size_t ngot = 0;
        /* every record of kind learners must be an expected one, and every
         * expected one must be there */
        bool *seen = xcalloc(e->noperator_failed + 1, sizeof *seen);
        for (const cJSON *f = failed ? failed->child : NULL; f; f = f->next) {
            const char *kind = jsonx_get_str(f, "kind");
            const char *pod = jsonx_get_str(f, "pod");
            if (!pod || (kind && strcmp(kind, "learners") != 0))
                continue;
            xbuf_printf(&got, "%s%s", ngot++ ? ", " : "", pod);
            bool expected = false;
            for (size_t i = 0; i < e->noperator_failed; i++) {
                char nm[32];
                snprintf(nm, sizeof nm, "learner%d", e->operator_failed[i]);
                if (strcmp(nm, pod) == 0) {
                    expected = true;
                    seen[i] = true;
                }
            }
            ok &= expected;
        }
        for (size_t i = 0; i < e->noperator_failed; i++)
            ok &= seen[i];
        free(seen);
        char *w = xbuf_take(&want), *g = xbuf_take(&got);
        char what[512];
        snprintf(what, sizeof what, "the operator is told exactly these learners failed: [%s]", w);
        sr_check(r, ok, e->line, what, "it was told: [%s]", g);
        free(w);
        free(g);
    }
    const cJSON *journal = r->op_journal ? jsonx_get(r->op_journal, "data") : NULL;
    if (journal && !cJSON_IsArray(journal))
        journal = jsonx_get(journal, "entries");
    for (size_t k = 0; k < e->noperator_requests; k++) {
        const char *want = e->operator_requests[k];
        bool found = false;
        xbuf seen = {0};
        int n = 0;
        for (const cJSON *j = journal ? journal->child : NULL; j; j = j->next) {
            const char *m = jsonx_get_str(j, "method"), *p = jsonx_get_str(j, "path");
            if (!m || !p)
                continue;
            char line[512];
            snprintf(line, sizeof line, "%s %s", m, p);
            if (strcmp(line, want) == 0)
                found = true;
            if (n++ < 12)
                xbuf_printf(&seen, "%s%s", n > 1 ? ", " : "", line);
        }
        char *sv = xbuf_take(&seen);
        char what[512];
        snprintf(what, sizeof what, "the operator received %s", want);
        sr_check(r, found, e->line, what, "its journal (%d requests): %s%s", n, sv, n > 12 ? ", ..." : "");
        free(sv);
    }
    if (e->operator_max_in_flight)
        check_operator_in_flight(r, journal);
}

/* Exactly-once delivery of learn data, from the learners' dumps and the
 * coordinator's summary (items "r<round>-<i>", round = the k-th learn). */
static void check_exactly_once(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    if (!e->exactly_once)
        return;
    const char *what = "learn data is delivered exactly once";
    for (size_t g = 0; g < r->s->ngroups; g++)
        if (!SC_GROUP_IS_MOCK(&r->s->groups[g])) {
            sr_skip(r, e->line, what, "group '%s' is given by %s, not the mock: only the mock writes what it received",
                    r->s->groups[g].name, r->s->groups[g].command ? "command" : "address");
            return;
        }
    const cJSON *tasks = r->summary ? jsonx_get(r->summary, "tasks") : NULL;
    if (!tasks) {
        sr_check(r, false, e->line, what, "no summary from the coordinator (it did not finish)");
        return;
    }
    /* rounds: batch size sent and whether the learn completed */
    int nround = 0;
    for (const cJSON *t = tasks->child; t; t = t->next)
        if (jsonx_get_str(t, "name") && strcmp(jsonx_get_str(t, "name"), "learner_learn_task") == 0 &&
            !(jsonx_get_str(t, "status") && strcmp(jsonx_get_str(t, "status"), "skipped") == 0))
            nround++;
    long *sent = xcalloc((size_t)nround + 1, sizeof *sent);
    bool *completed = xcalloc((size_t)nround + 1, sizeof *completed);
    const cJSON **unack = xcalloc((size_t)nround + 1, sizeof *unack); /* a failed learn's unacknowledged_slices */
    long batch = -1;
    int k = 0;
    for (const cJSON *t = tasks->child; t; t = t->next) {
        const char *nm = jsonx_get_str(t, "name"), *st = jsonx_get_str(t, "status");
        if (!nm)
            continue;
        if (strcmp(nm, "learner_get_data_task") == 0 && st && strcmp(st, "completed") == 0) {
            int64_t b;
            if (jsonx_get_i64(at_path(jsonx_get(t, "result"), "batch_size"), &b))
                batch = (long)b;
        } else if (strcmp(nm, "learner_learn_task") == 0 && !(st && strcmp(st, "skipped") == 0)) {
            int64_t n;
            if (jsonx_get_i64(jsonx_get(t, "items"), &n))
                sent[k] = (long)n;
            else
                sent[k] = batch;
            completed[k] = st && strcmp(st, "completed") == 0;
            unack[k] = at_path(jsonx_get(t, "result"), "unacknowledged_slices");
            k++;
        }
    }
    /* count every item id in the dumps */
    typedef struct {
        unsigned long round;
        long index;
        int count;
        char who[48];
    } seen_item;
    seen_item *items = NULL;
    size_t nitems = 0, cap = 0;
    xbuf issues = {0};
    int nissues = 0;
    long total = 0;
    for (size_t g = 0; g < r->s->ngroups; g++) {
        char *dp = sr_dump_path(r, g);
        size_t len;
        char *text = util_read_file(dp, (size_t)1 << 30, &len, NULL);
        free(dp);
        for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
            nl = strchr(line, '\n');
            if (nl)
                *nl = '\0';
            if (!strstr(line, "\"item\""))
                continue;
            cJSON *j = jsonx_parse(line, strlen(line), NULL, 0);
            const char *id = j ? jsonx_get_str(jsonx_get(j, "item"), "id") : NULL;
            /* "r<round>-<index>", numbers checked (no sscanf: it cannot
             * report overflow) */
            unsigned long rd = 0;
            long ix = 0;
            char *e1 = NULL, *e2 = NULL;
            errno = 0;
            if (id && id[0] == 'r' && isdigit((unsigned char)id[1])) {
                rd = strtoul(id + 1, &e1, 10);
                if (*e1 == '-' && (isdigit((unsigned char)e1[1]) || e1[1] == '-'))
                    ix = strtol(e1 + 1, &e2, 10);
            }
            if (!e2 || e2 == e1 + 1 || *e2 || errno) {
                if (nissues++ < 6)
                    xbuf_printf(&issues, "%sa learner received an item without a known id: %.120s",
                                nissues > 1 ? "; " : "", line);
                cJSON_Delete(j);
                continue;
            }
            total++;
            const char *who = jsonx_get_str(j, "learner");
            size_t f;
            for (f = 0; f < nitems; f++)
                if (items[f].round == rd && items[f].index == ix)
                    break;
            if (f == nitems) {
                if (nitems == cap) {
                    cap = cap ? cap * 2 : 256;
                    items = xrealloc(items, cap * sizeof *items);
                }
                items[nitems].round = rd;
                items[nitems].index = ix;
                items[nitems].count = 0;
                snprintf(items[nitems].who, sizeof items[nitems].who, "%s", who ? who : "?");
                nitems++;
            }
            if (++items[f].count == 2 && nissues++ < 6)
                xbuf_printf(&issues, "%sitem %s reached a learner twice (%s, then %s)", nissues > 1 ? "; " : "", id,
                            items[f].who, who ? who : "?");
            if ((long)rd >= 1 && (long)rd <= nround && sent[rd - 1] >= 0 && ix >= sent[rd - 1] && nissues++ < 6)
                xbuf_printf(&issues, "%sitem %s reached %s but learn #%lu sent only %ld items", nissues > 1 ? "; " : "",
                            id, who ? who : "?", rd, sent[rd - 1]);
            cJSON_Delete(j);
        }
        free(text);
    }
    for (int rd = 1; rd <= nround; rd++) {
        if (sent[rd - 1] < 0)
            continue;
        for (long ix = 0; ix < sent[rd - 1]; ix++) {
            size_t f;
            for (f = 0; f < nitems; f++)
                if (items[f].round == (unsigned long)rd && items[f].index == ix)
                    break;
            if (f < nitems)
                continue;
            /* a failed learn names the slices that were not acknowledged:
             * an item that reached no learner must be in one */
            bool named = false;
            for (const cJSON *u = unack[rd - 1] ? unack[rd - 1]->child : NULL; u; u = u->next) {
                int64_t lo, hi;
                if (cJSON_GetArraySize(u) == 2 && jsonx_get_i64(cJSON_GetArrayItem(u, 0), &lo) &&
                    jsonx_get_i64(cJSON_GetArrayItem(u, 1), &hi) && ix >= lo && ix < hi)
                    named = true;
            }
            if (completed[rd - 1] && nissues++ < 6)
                xbuf_printf(&issues, "%slearn #%d completed but item r%d-%ld reached no learner",
                            nissues > 1 ? "; " : "", rd, rd, ix);
            else if (!completed[rd - 1] && unack[rd - 1] && !named && nissues++ < 6)
                xbuf_printf(&issues,
                            "%slearn #%d failed but item r%d-%ld reached no learner and no unacknowledged slice names "
                            "it (lost silently)",
                            nissues > 1 ? "; " : "", rd, rd, ix);
        }
    }
    if (nissues > 6)
        xbuf_printf(&issues, "; %d more", nissues - 6);
    char *is = xbuf_take(&issues);
    if (nissues)
        sr_check(r, false, e->line, what, "%s", is);
    else
        sr_check(r, true, e->line, what, "%ld items over %d learn tasks", total, nround);
    free(is);
    free(items);
    free(sent);
    free(completed);
    free(unack);
}

/* An action waiting for our aggregator's log line never fires with an
 * aggregator that does not offer its events: said, so that what follows
 * from it is read in that light. */
static void check_unfired_log_actions(sc_run *r)
{
    const sc_profile *pf = r->opts.profile;
    if (!pf || pf->events)
        return;
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_action *a = &r->s->actions[i];
        if (a->when.kind != SC_WHEN_LOG || strcmp(a->when.process, "aggregator") != 0 || r->fired[i])
            continue;
        char what[320];
        snprintf(what, sizeof what, "the action on the aggregator's log \"%.200s\"", a->when.contains);
        sr_skip(r, a->line, what, "it never fired: profile %s does not offer our aggregator's log", pf->name);
    }
}

void sr_evaluate(sc_run *r)
{
    const sc_expect *e = &r->s->expect;
    check_unfired_log_actions(r);
    check_tasks(r);
    check_world(r);
    check_metrics_logs(r);
    check_learner_tasks(r);
    check_exits(r);
    check_operator(r);
    check_exactly_once(r);
    if (e->max_duration_ms > 0) {
        char what[128];
        snprintf(what, sizeof what, "the run takes at most %ld ms", e->max_duration_ms);
        double d = r->coord_done ? r->coord_end_ms : sr_now(r);
        sr_check(r, r->coord_done && d <= (double)e->max_duration_ms, e->line, what, "%s %.0f ms",
                 r->coord_done ? "the coordinator was done after" : "it had not finished after", d);
    }
    int alive = e->aggregator_alive;
    if (alive < 0) {
        /* by default checked, unless an action ends the aggregator or an exit
         * of it is expected */
        alive = !sr_exit_expected(r, SC_PROC_AGG);
        for (size_t i = 0; i < r->s->nactions; i++)
            if (r->s->actions[i].proc == SC_PROC_AGG &&
                (r->s->actions[i].what == SC_DO_KILL || r->s->actions[i].what == SC_DO_TERM))
                alive = 0;
    }
    if (alive == 1) {
        rproc *ag = &r->procs[SC_PROC_AGG];
        if (!sc_proc_running(ag->p))
            sr_check(r, false, e->line, "the aggregator is alive and answering at the end", "it is not running%s",
                     ag->exited ? " (it exited during the run)" : "");
        else
            sr_check(r, r->agg_answered, e->line, "the aggregator is alive and answering at the end",
                     "GET /metrics: %s",
                     r->agg_answered      ? "200"
                     : r->agg_probe_error ? r->agg_probe_error
                                          : "no answer");
    }
}
