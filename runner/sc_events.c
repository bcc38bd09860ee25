/* sc_events: what the processes say, as it happens: their ready lines and
 * the coordinator's summary (stdout), and their events files (--events,
 * docs/events.md), followed with inotify as they grow, which trigger
 * actions, fill the timeline and count faults (see sc_run_int.h). Nothing
 * here reads a log line. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "evt.h"
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

/* The global index of the learner an event names: "learner7" (or an
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

/* ---- the events files ---- */

/* The global index of the learner an event names, from its "learner" (the
 * aggregator's id: "learner7", or "learner7.localhost:port" in k8s mode);
 * group: the learner group whose events these are, or -1. -1: none. */
static int event_learner(const sc_run *r, const evt_record *e, int group)
{
    return who_learner(r, evt_str(e, EVT_F_learner), group);
}

static void world_sample(sc_run *r, const evt_record *e)
{
    int64_t w;
    if (!r->opts.agg_events || !evt_int(e, EVT_F_world, &w))
        return;
    r->world_now = (int)w;
    if (r->world_live)
        sr_add_sample(r, sr_now(r), r->world_now);
}

void sr_world_live(sc_run *r)
{
    if (!r->opts.agg_events || r->world_live)
        return;
    r->world_live = true;
    sr_add_sample(r, sr_now(r), r->world_now);
}

void sr_close_world(sc_run *r)
{
    size_t n = r->res.nsamples;
    if (!r->opts.agg_events || n == 0)
        return;
    const rproc *ag = &r->procs[SC_PROC_AGG];
    double end = ag->p && sc_proc_running(ag->p) ? sr_now(r) : ag->exit_t;
    if (end > r->res.samples[n - 1].t_ms)
        sr_add_sample(r, end, r->res.samples[n - 1].value);
}

static void on_agg_event(sc_run *r, const evt_record *e)
{
    int l = event_learner(r, e, -1);
    const char *why = evt_str(e, EVT_F_reason);
    switch (e->id) {
    case EVT_started: /* a new aggregator run: nothing connected yet */
        r->world_now = 0;
        if (r->world_live)
            sr_add_sample(r, sr_now(r), 0);
        r->world_live = false;
        break;
    case EVT_ready:
        world_sample(r, e);
        sr_world_live(r);
        break;
    case EVT_learner_joined:
    case EVT_learner_retaken:
        if (l >= 0)
            sr_mark(r, 3, l, "learner%d %s", l, e->id == EVT_learner_joined ? "joined" : "joined again");
        world_sample(r, e);
        break;
    case EVT_learner_left:
    case EVT_learner_removed:
        if (l >= 0)
            sr_mark(r, 3, l, "learner%d %s: %.120s", l, e->id == EVT_learner_left ? "left" : "was removed",
                    why ? why : "?");
        world_sample(r, e);
        break;
    case EVT_learner_join_failed:
        if (l >= 0)
            sr_mark(r, 3, l, "learner%d never joined: %.120s", l, why ? why : "?");
        break;
    case EVT_operator_sync:
        world_sample(r, e);
        break;
    default:
        break;
    }
}

static void on_coord_event(sc_run *r, const evt_record *e)
{
    if (e->id == EVT_task_sent || e->id == EVT_task_done) {
        const char *name = evt_str(e, EVT_F_name);
        on_coord_task(r, e->id == EVT_task_done, name ? name : "?", evt_str(e, EVT_F_status));
    }
}

/* A fault_fired event: on the timeline (red, the learner's row), and counted
 * against the fault the scenario configured, if it is one. */
static void on_fault_fired(sc_run *r, rproc *rp, const evt_record *e, int l)
{
    const char *kind = evt_str(e, EVT_F_kind), *task = evt_str(e, EVT_F_name), *who = evt_str(e, EVT_F_learner);
    int64_t count = 0, id = 0;
    evt_int(e, EVT_F_count, &count);
    evt_int(e, EVT_F_fault, &id);
    const char *proc = sc_scenario_proc_name(r->s, rp->idx), *label = evt_str(e, EVT_F_label);
    char nth[48] = "";
    if (count > 1)
        snprintf(nth, sizeof nth, " (its firing #%" PRId64 ")", count);
    if (who)
        sr_mark(r, 0, l, "fault %s%s%s fired on %s (%s)%s", kind ? kind : "?", task ? " on " : "", task ? task : "",
                who, label ? label : proc, nth);
    else
        sr_mark(r, 0, l, "fault %s fired on the %s%s%s%s", kind ? kind : "?", proc, task ? " on " : "",
                task ? task : "", nth);
    if (rp->idx >= SC_PROC_GROUP0) {
        const sc_group *gr = &r->s->groups[rp->idx - SC_PROC_GROUP0];
        for (size_t k = 0; k < gr->nfaults; k++)
            if (id >= rp->fault_id[k] && id < rp->fault_id[k] + rp->fault_n[k])
                rp->fault_fired[k]++;
    } else if (rp->idx == SC_PROC_OP && kind) {
        for (size_t k = 0; k < r->nop_fired; k++)
            if (r->op_fired_id[k] == id && strcmp(r->op_fired_kind[k], kind) == 0)
                return;
        r->op_fired_kind = xrealloc(r->op_fired_kind, (r->nop_fired + 1) * sizeof *r->op_fired_kind);
        r->op_fired_id = xrealloc(r->op_fired_id, (r->nop_fired + 1) * sizeof *r->op_fired_id);
        r->op_fired_kind[r->nop_fired] = xstrdup(kind);
        r->op_fired_id[r->nop_fired++] = id;
    }
}

static void on_group_event(sc_run *r, rproc *rp, const evt_record *e)
{
    int group = rp->idx - SC_PROC_GROUP0;
    int l = event_learner(r, e, group);
    switch (e->id) {
    case EVT_task_received:
        if (l >= 0) {
            const char *name = evt_str(e, EVT_F_name);
            on_learner_task(r, l, name ? name : "?");
        }
        break;
    case EVT_task_done:
        if (l >= 0) {
            const char *st = evt_str(e, EVT_F_status);
            sr_bar_close(r, l, st && strcmp(st, "completed") == 0 ? 1 : 2);
        }
        break;
    case EVT_master_lost:
        if (l >= 0)
            sr_bar_close(r, l, 3); /* a task it had is abandoned */
        break;
    case EVT_fault_fired:
        on_fault_fired(r, rp, e, l);
        break;
    default:
        break;
    }
}

/* Counts the line against the expect.events it matches. */
static void match_expectations(sc_run *r, const rproc *rp, const evt_record *e)
{
    const sc_expect *x = &r->s->expect;
    for (size_t k = 0; k < x->nevents; k++) {
        const sc_expect_event *w = &x->events[k];
        if (w->event != (int)e->id || strcmp(w->process, sc_scenario_proc_name(r->s, rp->idx)) != 0)
            continue;
        if (w->learner >= 0 && event_learner(r, e, rp->idx >= SC_PROC_GROUP0 ? rp->idx - SC_PROC_GROUP0 : -1) !=
                                   w->learner)
            continue;
        bool ok = true;
        for (const cJSON *f = w->where ? w->where->child : NULL; ok && f; f = f->next) {
            const cJSON *got = cJSON_GetObjectItemCaseSensitive(e->tree, f->string);
            ok = got && cJSON_Compare(got, f, true);
        }
        for (const cJSON *f = w->contains ? w->contains->child : NULL; ok && f; f = f->next) {
            const cJSON *got = cJSON_GetObjectItemCaseSensitive(e->tree, f->string);
            ok = cJSON_IsString(got) && strstr(got->valuestring, f->valuestring);
        }
        if (ok)
            r->ev_expect_n[k]++;
    }
}

void sr_check_events(sc_run *r)
{
    const sc_expect *x = &r->s->expect;
    for (size_t k = 0; k < x->nevents; k++) {
        const sc_expect_event *w = &x->events[k];
        xbuf what = {0};
        xbuf_printf(&what, "%s writes %s", w->process, evt_name((evt_id)w->event));
        if (w->learner >= 0)
            xbuf_printf(&what, " about learner%d", w->learner);
        for (int c = 0; c < 2; c++) {
            const cJSON *o = c ? w->contains : w->where;
            for (const cJSON *f = o ? o->child : NULL; f; f = f->next) {
                char *t = jsonx_print(f);
                xbuf_printf(&what, " %s %s %s", f == o->child ? "with" : "and", f->string, c ? "containing" : "=");
                xbuf_printf(&what, " %.200s", t);
                free(t);
            }
        }
        if (w->max < 0)
            xbuf_printf(&what, " at least %d time%s", w->min, w->min == 1 ? "" : "s");
        else if (w->max == w->min)
            xbuf_printf(&what, " exactly %d time%s", w->min, w->min == 1 ? "" : "s");
        else
            xbuf_printf(&what, " %d to %d times", w->min, w->max);
        int n = r->ev_expect_n ? r->ev_expect_n[k] : 0;
        int idx = -1;
        for (size_t p = 0; p < r->nprocs; p++)
            if (strcmp(sc_scenario_proc_name(r->s, (int)p), w->process) == 0)
                idx = (int)p;
        if (idx == SC_PROC_AGG && !r->opts.agg_events) {
            sr_skip(r, w->line, what.data, "the aggregator under test writes no events (%s)",
                    r->opts.profile ? "its profile offers none" : "its --help names no --events");
            xbuf_free(&what);
            continue;
        }
        sr_check(r, n >= w->min && (w->max < 0 || n <= w->max), w->line, what.data, "%d such line%s in %s", n,
                 n == 1 ? "" : "s", idx >= 0 && r->procs[idx].ev_path ? r->procs[idx].ev_path : "its events file");
        xbuf_free(&what);
    }
}

/* One line of a process's events file (without its newline). */
static void on_event_line(sc_run *r, rproc *rp, const char *line, size_t len)
{
    rp->ev_line++;
    evt_record e;
    char err[300];
    if (evt_parse_line(line, len, &e, err, sizeof err) != 0) {
        if (rp->ev_bad++ < 3)
            sr_check(r, false, 0, "every event line is valid", "%s:%ld: %s", rp->ev_path, rp->ev_line, err);
        return;
    }
    /* seq counts 0, 1, ... per process run: a gap means lost lines */
    if (!rp->ev_run || strcmp(rp->ev_run, e.run) != 0) {
        free(rp->ev_run);
        rp->ev_run = xstrdup(e.run);
        rp->ev_seq = -1;
    }
    if (e.seq != rp->ev_seq + 1 && rp->ev_bad++ < 3)
        sr_check(r, false, 0, "every event line is valid", "%s:%ld: seq %" PRId64 " after %" PRId64 ": lines are lost",
                 rp->ev_path, rp->ev_line, e.seq, rp->ev_seq);
    rp->ev_seq = e.seq;
    match_expectations(r, rp, &e);
    if (r->ph >= PH_STOPPING) /* checked already; nothing more happens */
        ;
    else if (rp->idx == SC_PROC_AGG)
        on_agg_event(r, &e);
    else if (rp->idx == SC_PROC_COORD)
        on_coord_event(r, &e);
    else if (rp->idx == SC_PROC_OP && e.id == EVT_fault_fired)
        on_fault_fired(r, rp, &e, -1);
    else if (rp->idx >= SC_PROC_GROUP0)
        on_group_event(r, rp, &e);
    evt_record_free(&e);
}

void sr_split_lines(xbuf *part, const char *buf, size_t n, void (*line)(void *ud, const char *s, size_t len),
                    void *ud)
{
    size_t off = 0;
    while (off < n) {
        const char *nl = memchr(buf + off, '\n', n - off);
        if (!nl) { /* a partial last line: kept until its newline */
            xbuf_append(part, buf + off, n - off);
            return;
        }
        size_t take = (size_t)(nl - (buf + off));
        if (part->len) {
            xbuf_append(part, buf + off, take);
            line(ud, part->data, part->len);
            part->len = 0;
        } else {
            line(ud, buf + off, take);
        }
        off += take + 1;
    }
}

static void on_file_line(void *ud, const char *s, size_t len)
{
    rproc *rp = ud;
    on_event_line(rp->run, rp, s, len);
}

void sr_events_drain(sc_run *r, int idx)
{
    rproc *rp = &r->procs[idx];
    if (!rp->ev_path)
        return;
    if (rp->ev_fd < 0) {
        rp->ev_fd = open(rp->ev_path, O_RDONLY | O_CLOEXEC);
        if (rp->ev_fd < 0)
            return; /* not written yet */
    }
    char buf[65536];
    for (;;) {
        ssize_t n = read(rp->ev_fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        sr_split_lines(&rp->ev_part, buf, (size_t)n, on_file_line, rp);
    }
}

void sr_events_drain_all(sc_run *r)
{
    for (size_t i = 0; i < r->nprocs; i++)
        sr_events_drain(r, (int)i);
}

/* The run folder tells when an events file is created (then it gets a
 * watch of its own); a file's watch, when it grew. Writes to the other
 * files of the folder (logs, the runner's own) wake nothing. */
static void on_inotify(ev_loop *loop, int fd, unsigned events, void *data)
{
    (void)loop;
    (void)events;
    sc_run *r = data;
    char buf[8192] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            break;
        for (ssize_t off = 0; off < n;) {
            const struct inotify_event *ie = (const struct inotify_event *)(buf + off);
            off += (ssize_t)(sizeof *ie + ie->len);
            for (size_t i = 0; i < r->nprocs; i++) {
                rproc *rp = &r->procs[i];
                if (!rp->ev_path)
                    continue;
                if (ie->wd == r->ino_dir_wd) {
                    if (!ie->len || strcmp(strrchr(rp->ev_path, '/') + 1, ie->name) != 0)
                        continue;
                    if (rp->ev_wd < 0)
                        rp->ev_wd = inotify_add_watch(fd, rp->ev_path, IN_MODIFY);
                } else if (ie->wd != rp->ev_wd) {
                    continue;
                }
                sr_events_drain(r, (int)i);
            }
        }
    }
}

/* The faults a group's --fault texts hold, and their ids in the mock (1, 2,
 * ... in order; a list holds several). */
static void count_group_faults(sc_run *r, size_t g)
{
    const sc_group *gr = &r->s->groups[g];
    rproc *rp = &r->procs[SC_PROC_GROUP0 + g];
    rp->fault_id = xcalloc(gr->nfaults + 1, sizeof *rp->fault_id);
    rp->fault_n = xcalloc(gr->nfaults + 1, sizeof *rp->fault_n);
    rp->fault_fired = xcalloc(gr->nfaults + 1, sizeof *rp->fault_fired);
    int next = 1;
    for (size_t k = 0; k < gr->nfaults; k++) {
        cJSON *j = cJSON_Parse(gr->faults[k]);
        rp->fault_id[k] = next;
        rp->fault_n[k] = cJSON_IsArray(j) ? cJSON_GetArraySize(j) : 1;
        next += rp->fault_n[k];
        cJSON_Delete(j);
    }
}

int sr_events_watch(sc_run *r)
{
    for (size_t i = 0; i < r->nprocs; i++) {
        rproc *rp = &r->procs[i];
        rp->ev_path = xasprintf("%s/%s.events.jsonl", r->run_dir, sc_scenario_proc_name(r->s, (int)i));
        unlink(rp->ev_path);
        if (i >= SC_PROC_GROUP0)
            count_group_faults(r, i - SC_PROC_GROUP0);
    }
    r->ev_expect_n = xcalloc(r->s->expect.nevents + 1, sizeof *r->ev_expect_n);
    r->ino_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (r->ino_fd >= 0)
        r->ino_dir_wd = inotify_add_watch(r->ino_fd, r->run_dir, IN_CREATE | IN_MOVED_TO);
    if (r->ino_fd < 0 || r->ino_dir_wd < 0 || ev_fd_set(r->loop, r->ino_fd, EV_READ, on_inotify, r) < 0) {
        sr_fail(r, "cannot watch the run folder %s for events: %s (fs.inotify.max_user_instances?)", r->run_dir,
                strerror(errno));
        return -1;
    }
    return 0;
}

void sr_events_restart(sc_run *r, int idx)
{
    rproc *rp = &r->procs[idx];
    if (!rp->ev_path)
        return;
    sr_events_drain(r, idx);
    if (rp->ev_fd >= 0)
        close(rp->ev_fd);
    rp->ev_fd = -1;
    if (rp->ev_wd >= 0)
        inotify_rm_watch(r->ino_fd, rp->ev_wd);
    rp->ev_wd = -1;
    rp->ev_part.len = 0;
    rp->ev_line = 0;
    char *kept = xasprintf("%s/%s.events.%d.jsonl", r->run_dir, sc_scenario_proc_name(r->s, idx), ++rp->ev_files);
    if (rename(rp->ev_path, kept) != 0 && errno != ENOENT)
        sr_log(r, "cannot keep %s as %s: %s", rp->ev_path, kept, strerror(errno));
    free(kept);
}

/* "fault crash on learner_learn_task #1 of group b never fired" */
static void fault_phrase(xbuf *b, const char *text)
{
    cJSON *j = cJSON_Parse(text);
    const char *kind = jsonx_get_str(j, "kind"), *task = jsonx_get_str(j, "task"), *who = jsonx_get_str(j, "learner");
    int64_t at, li;
    xbuf_printf(b, "fault %s", kind ? kind : "?");
    if (task)
        xbuf_printf(b, " on %s", task);
    if (jsonx_get_i64(jsonx_get(j, "at"), &at))
        xbuf_printf(b, " #%" PRId64, at);
    if (who && strcmp(who, "all") != 0)
        xbuf_printf(b, " (its learner %s)", who);
    else if (jsonx_get_i64(jsonx_get(j, "learner"), &li))
        xbuf_printf(b, " (its learner %" PRId64 ")", li);
    cJSON_Delete(j);
}

/* "optional": true (read leniently: anything else is not optional) */
static bool fault_optional(const char *text)
{
    cJSON *j = cJSON_Parse(text);
    bool opt = cJSON_IsTrue(jsonx_get(j, "optional"));
    cJSON_Delete(j);
    return opt;
}

void sr_check_faults_fired(sc_run *r)
{
    const sc_scenario *s = r->s;
    for (size_t g = 0; g < s->ngroups; g++) {
        const sc_group *gr = &s->groups[g];
        rproc *rp = &r->procs[SC_PROC_GROUP0 + g];
        if (gr->absent || !rp->fault_fired)
            continue;
        for (size_t k = 0; k < gr->nfaults; k++) {
            if (fault_optional(gr->faults[k]))
                continue;
            xbuf what = {0};
            fault_phrase(&what, gr->faults[k]);
            xbuf_printf(&what, " of group %s fires", gr->name);
            if (rp->fault_fired[k])
                sr_check(r, true, gr->line, what.data, "fired %d time%s", rp->fault_fired[k],
                         rp->fault_fired[k] == 1 ? "" : "s");
            else
                sr_check(r, false, gr->line, what.data, "%.*s never fired (no fault_fired event for it in %s)",
                         (int)(what.len - strlen(" fires")), what.data, rp->ev_path);
            xbuf_free(&what);
        }
    }
    if (!s->k8s)
        return;
    /* operator faults: the k-th configured fault of a kind fired if at least
     * k distinct faults of that kind fired */
    for (size_t k = 0; k < s->nop_faults; k++) {
        if (fault_optional(s->op_faults[k]))
            continue;
        cJSON *j = cJSON_Parse(s->op_faults[k]);
        const char *kind = jsonx_get_str(j, "kind");
        size_t want = 0, seen = 0;
        for (size_t q = 0; q <= k; q++) {
            cJSON *o = cJSON_Parse(s->op_faults[q]);
            const char *ok = jsonx_get_str(o, "kind");
            want += kind && ok && strcmp(ok, kind) == 0;
            cJSON_Delete(o);
        }
        for (size_t q = 0; q < r->nop_fired; q++)
            seen += kind && strcmp(r->op_fired_kind[q], kind) == 0;
        xbuf what = {0};
        fault_phrase(&what, s->op_faults[k]);
        xbuf_printf(&what, " of the operator (operator.faults[%zu]) fires", k);
        if (seen >= want)
            sr_check(r, true, 0, what.data, "fired");
        else
            sr_check(r, false, 0, what.data, "%.*s never fired (no fault_fired event for it in %s)",
                     (int)(what.len - strlen(" fires")), what.data, r->procs[SC_PROC_OP].ev_path);
        xbuf_free(&what);
        cJSON_Delete(j);
    }
}

void sr_events_free(sc_run *r)
{
    if (r->ino_fd >= 0) {
        ev_fd_del(r->loop, r->ino_fd);
        close(r->ino_fd);
    }
    r->ino_fd = -1;
    for (size_t i = 0; i < r->nprocs; i++) {
        rproc *rp = &r->procs[i];
        if (rp->ev_fd >= 0)
            close(rp->ev_fd);
        free(rp->ev_path);
        free(rp->ev_run);
        xbuf_free(&rp->ev_part);
        free(rp->fault_id);
        free(rp->fault_n);
        free(rp->fault_fired);
    }
    for (size_t k = 0; k < r->nop_fired; k++)
        free(r->op_fired_kind[k]);
    free(r->op_fired_kind);
    free(r->op_fired_id);
    free(r->ev_expect_n);
}
