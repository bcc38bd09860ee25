/* sc_events: what the processes say, as it streams in: ready lines, the
 * coordinator's summary, and the events read from log lines that trigger
 * actions and fill the timeline (see sc_run_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "sc_run_int.h"

static int task_index(const char *full)
{
    static const char *const names[] = {"resource", "learner_start_task", "learner_get_data_task", "learner_learn_task",
                                        "learner_close_task"};
    if (!full)
        return NTASKN - 1;
    for (int i = 0; i < 5; i++)
        if (strcmp(full, names[i]) == 0)
            return i;
    return NTASKN - 1;
}

/* The global index of the learner a log line is about: "learner7" (or an
 * address "learner7.localhost:port" in k8s mode); local ids of a group
 * without --id-base are shifted by the group's first index. -1: none. */
static int who_learner(const sc_run *r, const char *who, int group)
{
    if (!who)
        return -1;
    if (group > 0 && !r->opts.learner_id_base) {
        /* "<group>-learnerK" */
        size_t gl = strlen(r->s->groups[group].name);
        if (strncmp(who, r->s->groups[group].name, gl) == 0 && who[gl] == '-')
            who += gl + 1;
    }
    if (strncmp(who, "learner", 7) != 0 || who[7] < '0' || who[7] > '9')
        return -1;
    long n = strtol(who + 7, NULL, 10);
    if (group >= 0 && !r->opts.learner_id_base)
        n += r->s->groups[group].first;
    if (n < 0 || n >= r->s->nlearners)
        return -1;
    return (int)n;
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool when_task_matches(const sc_when *w, const char *full)
{
    return !w->task || (full && strcmp(w->task, full) == 0);
}

static void on_learner_task(sc_run *r, int learner, const char *name)
{
    const char *full = sc_task_full_name(name);
    int ti = task_index(full);
    r->lt_count[learner * NTASKN + ti]++;
    r->lt_any[learner]++;
    if (r->nlts == r->caplts) {
        r->caplts = r->caplts ? r->caplts * 2 : 256;
        r->lts = xrealloc(r->lts, r->caplts * sizeof *r->lts);
    }
    r->lts[r->nlts].learner = learner;
    r->lts[r->nlts].task = full ? xstrdup(full) : NULL;
    r->lts[r->nlts].t = sr_now(r);
    r->nlts++;
    sr_bar_close(r, learner, 3);
    r->bar_open[learner] = sr_bar_open(r, learner, full ? full : name);
    /* counts over every learner, for "any learner" events */
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_when *w = &r->s->actions[i].when;
        if (r->fired[i] || w->kind != SC_WHEN_LEARNER_TASK || !when_task_matches(w, full))
            continue;
        if (w->learner >= 0 && w->learner != learner)
            continue;
        int count = 0;
        if (w->learner >= 0) {
            count = w->task ? r->lt_count[learner * NTASKN + ti] : r->lt_any[learner];
        } else {
            for (int l = 0; l < r->s->nlearners; l++)
                count += w->task ? r->lt_count[l * NTASKN + ti] : r->lt_any[l];
        }
        if (count == w->nth) {
            sr_mark(r, 2, learner, "learner%d received %s #%d", learner, full ? full : name, w->nth);
            sr_act_or_delay(r, i);
        }
    }
}

static void on_coord_task(sc_run *r, bool done, const char *name, const char *status)
{
    const char *full = sc_task_full_name(name);
    int ti = task_index(full);
    int *arr = done ? r->done_n : r->sent;
    if (done && ti == 0) { /* a resource answer: the world size then */
        r->resource_t = xrealloc(r->resource_t, (r->nresource + 1) * sizeof *r->resource_t);
        r->resource_t[r->nresource++] = sr_now(r);
    }
    arr[ti]++;
    arr[NTASKN]++;
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_when *w = &r->s->actions[i].when;
        if (r->fired[i] || w->kind != (done ? SC_WHEN_TASK_DONE : SC_WHEN_TASK_SENT) || !when_task_matches(w, full))
            continue;
        int count = w->task ? arr[ti] : arr[NTASKN];
        if (count == w->nth) {
            sr_mark(r, 2, -1, "coordinator %s %s #%d%s%s", done ? "got the outcome of" : "sent", full ? full : name,
                    w->nth, status ? ": " : "", status ? status : "");
            sr_act_or_delay(r, i);
        }
    }
}

/* mock_learner (at --log-level debug) logs each task it receives as
 * "task <id> (<name>)" or "task <id> (<name>, #n of its name, ...): faults
 * fired: ...", each report as "task <id> (<name>): <kind> report sent" and a
 * task it gives up as "task <id> (<name>) abandoned: why". */
static void on_learner_log(sc_run *r, int group, const char *who, const char *msg)
{
    int l = who_learner(r, who, group);
    if (l < 0 || !starts(msg, "task "))
        return;
    const char *open = strchr(msg, '(');
    if (!open)
        return;
    char name[128];
    size_t n = strcspn(open + 1, ",)");
    if (n == 0 || n >= sizeof name)
        return;
    memcpy(name, open + 1, n);
    name[n] = '\0';
    const char *close = open + 1 + n;
    if (*close == ',' || strcmp(close, ")") == 0) {
        on_learner_task(r, l, name);
    } else if (strstr(close, "report sent")) {
        sr_bar_close(r, l, strstr(close, ": complete report") ? 1 : 2);
    } else if (strstr(close, "could not be sent") || strstr(close, ") abandoned")) {
        sr_bar_close(r, l, 3);
    }
}

/* mock_coordinator (at debug) logs "tasks[i] NAME: sending N bytes, ..." and
 * at the outcome "tasks[i] NAME (round r): STATUS in X ms" or "...: STATUS
 * (expectation failed)". */
static void on_coord_log(sc_run *r, const char *msg)
{
    if (!starts(msg, "tasks["))
        return;
    const char *p = strchr(msg, ']');
    if (!p || p[1] != ' ')
        return;
    p += 2;
    char name[128], status[64];
    size_t n = strcspn(p, " :");
    if (n == 0 || n >= sizeof name)
        return;
    memcpy(name, p, n);
    name[n] = '\0';
    const char *rest = p + n;
    if (starts(rest, ": sending ")) {
        on_coord_task(r, false, name, NULL);
        return;
    }
    if (starts(rest, " (round ")) {
        rest = strchr(rest, ')');
        if (!rest)
            return;
        rest++;
    }
    if (!starts(rest, ": "))
        return;
    rest += 2;
    size_t m = strcspn(rest, " ");
    if (m == 0 || m >= sizeof status)
        return;
    memcpy(status, rest, m);
    status[m] = '\0';
    if (strcmp(status, "completed") != 0 && strcmp(status, "failed") != 0 && strcmp(status, "start_failed") != 0 &&
        strcmp(status, "skipped") != 0)
        return;
    on_coord_task(r, true, name, status);
}

static void on_agg_log(sc_run *r, const char *who, const char *msg)
{
    int l = who_learner(r, who, -1);
    if (l >= 0 && starts(msg, "learner joined"))
        sr_mark(r, 3, l, "learner%d joined", l);
    else if (l >= 0 && (starts(msg, "learner left") || starts(msg, "learner removed")))
        sr_mark(r, 3, l, "learner%d left: %.120s", l, msg);
    else if (l >= 0 && starts(msg, "learner did not join"))
        sr_mark(r, 3, l, "learner%d never joined", l);
    else if (starts(msg, "PLANTED BUG"))
        sr_mark(r, 3, -1, "%.160s", msg);
}

static void check_log_events(sc_run *r, int proc, const char *line)
{
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_action *a = &r->s->actions[i];
        if (r->fired[i] || a->when.kind != SC_WHEN_LOG)
            continue;
        if (strcmp(a->when.process, sc_scenario_proc_name(r->s, proc)) != 0)
            continue;
        if (!strstr(line, a->when.contains))
            continue;
        sr_mark(r, 2, -1, "%s logged \"%.80s\"", a->when.process, a->when.contains);
        sr_act_or_delay(r, i);
    }
}

void sr_on_line(void *ud, sc_proc *p, int stream, const char *line, size_t len)
{
    rproc *rp = ud;
    sc_run *r = rp->run;
    if (r->ph >= PH_STOPPING)
        return;
    if (stream == 1) {
        if (starts(line, "{\"ready\"")) {
            cJSON *j = jsonx_parse(line, len, NULL, 0);
            if (j && !rp->ready)
                sr_on_ready(r, rp->idx, j);
            cJSON_Delete(j);
        } else if (rp->idx == SC_PROC_COORD && starts(line, "{\"ok\"")) {
            cJSON *j = jsonx_parse(line, len, NULL, 0);
            if (j) {
                cJSON_Delete(r->summary);
                r->summary = j;
                free(r->res.coordinator_summary);
                r->res.coordinator_summary = xstrndup(line, len);
            }
        }
        return;
    }
    /* an aggregator whose profile offers no events is judged from the
     * protocol only: its log is kept, not read */
    if (rp->idx == SC_PROC_AGG && r->opts.profile && !r->opts.profile->events)
        return;
    check_log_events(r, rp->idx, line);
    if (line[0] != '{')
        return;
    cJSON *j = cJSON_ParseWithLength(line, len);
    if (!j)
        return;
    const char *msg = jsonx_get_str(j, "msg");
    const char *who = jsonx_get_str(j, "learner");
    if (msg) {
        if (rp->idx >= SC_PROC_GROUP0 && SC_GROUP_IS_MOCK(&r->s->groups[rp->idx - SC_PROC_GROUP0]))
            on_learner_log(r, rp->idx - SC_PROC_GROUP0, who, msg);
        else if (rp->idx == SC_PROC_COORD)
            on_coord_log(r, msg);
        else if (rp->idx == SC_PROC_AGG)
            on_agg_log(r, who, msg);
    }
    cJSON_Delete(j);
}

void sr_proc_event(sc_run *r, sc_when_kind kind, int proc)
{
    if (r->ph != PH_RUNNING && kind == SC_WHEN_EXIT)
        return;
    for (size_t i = 0; i < r->s->nactions; i++) {
        const sc_action *a = &r->s->actions[i];
        if (r->fired[i] || a->when.kind != kind || strcmp(a->when.process, sc_scenario_proc_name(r->s, proc)) != 0)
            continue;
        sr_act_or_delay(r, i);
    }
}
