/* sc_explore: seeded fault schedules against invariants, and the shrinking
 * of a violation (see sc_explore.h, docs/scenarios.md "Explore"). */
#include "sc_explore.h"

#include <errno.h>
#include <stdarg.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jsonx.h"
#include "sc_proc.h"
#include "sc_report.h"
#include "xalloc.h"

#define XF_MAX 4          /* faults in one schedule */
#define XL_MAX 16         /* learners an exploration may have */
#define XRUNS_MAX 100000
#define XGAP_MS 250       /* the coordinator's pause before a learn, when drawn */
#define XTIMEOUT_MS 60000 /* a run's own cap */
#define XSTR2(x) #x
#define XSTR(x) XSTR2(x)

/* ---- the schedule ---- */

/* What a fault does. */
typedef enum {
    EF_KILL = 0, /* process actions */
    EF_CRASH,    /* learner fault kinds (mock_learner's schema) */
    EF_FAIL,
    EF_ERROR_STATUS,
    EF_HANG,
    EF_DELAY,
    EF_MALFORMED,
    EF_TRUNCATED,
    EF_BAD_RESULT,
    EF_WRONG_BATCH,
    EF_DROP,
    EF_STOP,
    EF_RESTART,
    EF_OP_ERROR, /* Kubernetes mode: the operator answers errors */
    EF_OP_REMOVE, /* the operator's list loses the learner, then has it again */
    EF_COUNT
} xeffect;

/* In order of simplicity: shrinking tries the simpler kinds. */
static const char *const effect_names[EF_COUNT] = {
    "kill", "crash", "fail", "error_status", "hang", "delay", "malformed", "truncated", "bad_result",
    "wrong_batch", "drop", "stop", "restart", "operator_error", "operator_remove"};

static bool effect_is_proc(xeffect e)
{
    return e == EF_KILL || e == EF_STOP || e == EF_RESTART;
}
static bool effect_is_operator(xeffect e)
{
    return e == EF_OP_ERROR || e == EF_OP_REMOVE;
}
/* the learner's process ends for good */
static bool effect_ends(xeffect e)
{
    return e == EF_KILL || e == EF_CRASH;
}

/* When it happens. */
typedef enum {
    TR_LTASK = 0, /* the target learner receives its nth task of a name */
    TR_DONE,      /* the coordinator gets the outcome of its nth task of a name */
    TR_TIME,      /* at_ms */
} xtrigger;

static const char *const task_short[4] = {"start", "get_data", "learn", "close"};

typedef struct {
    xeffect eff;
    int learner;   /* target (-1: none, operator errors) */
    xtrigger trig;
    int task;      /* index in task_short */
    int nth;       /* 1-based count */
    long at_ms;    /* TR_TIME */
    long delay_ms; /* after the event */
    long param_ms; /* delay's ms, drop's back_after_ms, stop's duration_ms */
    bool during;   /* crash while working on the task */
    bool action;   /* a learner fault posted by an action at the trigger
                      (else in the group's faults, with TR_LTASK) */
} xfault;

typedef struct {
    int nlearners, rounds;
    bool gap; /* the coordinator pauses before each learn */
    xfault f[XF_MAX];
    int nf;
} xsched;

/* What an exploration takes from its base. */
typedef struct {
    int nlearners, rounds, batch_size;
    long learn_time_ms;
    double time_scale;
    bool k8s;
    long span, tolerance, max_retry, retry_interval, sync_period, deadline;
} xbase;

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static int rnd(uint64_t *s, int n)
{
    return n <= 1 ? 0 : (int)(splitmix(s) % (uint64_t)n);
}

static uint64_t run_seed(uint64_t seed, int index)
{
    uint64_t s = seed * 1000003u + (uint64_t)index;
    return splitmix(&s) % 1000000000u;
}

static int base_of(const sc_scenario *s, xbase *b, char **err)
{
    if (s->nlearners < 2 || s->nlearners > XL_MAX) {
        *err = xasprintf("%s: explore needs a base of 2 to %d learners, not %d", s->path, XL_MAX, s->nlearners);
        return -1;
    }
    if (!s->coordinator || s->script) {
        *err = xasprintf("%s: explore needs a base whose coordinator runs rounds (not a script, not absent)", s->path);
        return -1;
    }
    *b = (xbase){.nlearners = s->nlearners,
                 .rounds = s->rounds > 0 ? s->rounds : 3,
                 .batch_size = s->groups[0].batch_size,
                 .learn_time_ms = s->groups[0].learn_time_ms,
                 .time_scale = s->time_scale,
                 .k8s = s->k8s,
                 .span = s->heartbeat_span_ms,
                 .tolerance = s->heartbeat_tolerance_ms,
                 .max_retry = s->max_retry_ms,
                 .retry_interval = s->retry_interval_ms,
                 .sync_period = s->sync_period_ms,
                 .deadline = s->task_deadline_ms};
    if (b->rounds > 8)
        b->rounds = 8;
    return 0;
}

/* How long the run settles after the close before the last look at the
 * world: a lost learner is noticed (heartbeat tolerance), a returning one is
 * retried and taken back, the operator is asked again. */
static long settle_ms(const xbase *b)
{
    long s = b->tolerance + 4 * b->retry_interval + 2 * b->sync_period + 250;
    return s < 400 ? 400 : s;
}

/* The latency a task may have: every sub-task has the aggregator's deadline,
 * plus room for sending and a loaded machine. */
static long latency_cap_ms(const xbase *b)
{
    long slack = b->deadline / 2 > 400 ? b->deadline / 2 : 400;
    return b->deadline + slack;
}

/* A rough length of the coordinator's run, for time triggers. */
static long run_estimate_ms(const xbase *b, const xsched *x)
{
    return 150 + (long)x->rounds * (2 * b->learn_time_ms + (x->gap ? XGAP_MS : 0) + 60);
}

static void draw_fault(uint64_t *rs, const xbase *b, const xsched *x, int learner, xfault *f)
{
    *f = (xfault){.learner = learner, .nth = 1};
    int nk = b->k8s ? EF_COUNT : EF_OP_ERROR;
    f->eff = (xeffect)rnd(rs, nk);
    if (f->eff == EF_WRONG_BATCH && rnd(rs, 2))
        f->eff = EF_FAIL;
    /* the trigger: mostly a learner's own task */
    int t = rnd(rs, 10);
    f->trig = t < 6 ? TR_LTASK : t < 8 ? TR_DONE : TR_TIME;
    f->task = 1 + rnd(rs, 2); /* get_data, learn */
    if (rnd(rs, 5) == 0)
        f->task = rnd(rs, 2) ? 0 : 3; /* start, close */
    f->nth = f->task == 1 || f->task == 2 ? 1 + rnd(rs, x->rounds) : 1;
    if (f->eff == EF_WRONG_BATCH) {
        f->trig = TR_LTASK;
        f->task = 1;
    }
    f->at_ms = 50 + rnd(rs, (int)(run_estimate_ms(b, x) * 2 / 3));
    if (rnd(rs, 3) == 0)
        f->delay_ms = 1 + rnd(rs, (int)(b->learn_time_ms + 40));
    f->during = rnd(rs, 2);
    f->action = f->trig != TR_LTASK || rnd(rs, 3) == 0;
    switch (f->eff) {
    case EF_DELAY:
        f->param_ms = 5 + rnd(rs, (int)(b->deadline / 3 + 1));
        break;
    case EF_DROP:
        f->param_ms = 20 + rnd(rs, 150);
        break;
    case EF_STOP:
        f->param_ms = 30 + rnd(rs, (int)(b->tolerance * 2 + 50));
        break;
    case EF_OP_ERROR:
        f->param_ms = 1 + rnd(rs, 3); /* requests */
        f->learner = -1;
        break;
    case EF_OP_REMOVE:
        f->param_ms = 2 * b->sync_period + rnd(rs, (int)(3 * b->sync_period + 1));
        break;
    default:
        break;
    }
    if (effect_is_operator(f->eff) && f->trig == TR_LTASK)
        f->trig = TR_DONE;
}

static void draw(const xbase *b, uint64_t rseed, xsched *x)
{
    uint64_t rs = rseed ^ 0x5eedull;
    *x = (xsched){.nlearners = b->nlearners, .rounds = b->rounds};
    x->gap = rnd(&rs, 2);
    int maxf = b->nlearners - 1 < 3 ? b->nlearners - 1 : 3;
    x->nf = rnd(&rs, 8) == 0 ? 0 : 1 + rnd(&rs, maxf); /* now and then the happy path */
    /* distinct targets, so that each learner's fate is the one fault's */
    int order[XL_MAX] = {0};
    for (int i = 0; i < b->nlearners; i++)
        order[i] = i;
    for (int i = b->nlearners - 1; i > 0; i--) {
        int k = rnd(&rs, i + 1), t = order[i];
        order[i] = order[k];
        order[k] = t;
    }
    for (int i = 0; i < x->nf; i++)
        draw_fault(&rs, b, x, order[i], &x->f[i]);
}

/* ---- rendering a schedule as a scenario ---- */

typedef struct {
    int first_line, last_line; /* line ranges of parts of the text */
} xrange;

typedef struct {
    char *text;
    xrange actions, tasks;
    int ok_line, once_line, world_line;
    int live; /* learners alive at the end if every fault fires */
} xrender;

/* one line of the scenario text (the line numbers map checks to invariants) */
#define line(b, ln, ...)                                                                                              \
    do {                                                                                                               \
        xbuf_printf(b, __VA_ARGS__);                                                                                   \
        xbuf_puts(b, "\n");                                                                                            \
        (*(ln))++;                                                                                                     \
    } while (0)

/* s as a JSON string literal (heap) */
static char *json_str(const char *s)
{
    cJSON *j = cJSON_CreateString(s);
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

/* The learner fault object of f (no trigger members). */
static void fault_object(xbuf *b, const xfault *f)
{
    xbuf_printf(b, "{\"kind\": \"%s\"", effect_names[f->eff]);
    if (f->eff == EF_CRASH)
        xbuf_printf(b, ", \"when\": \"%s\"", f->during ? "during" : "before");
    if (f->eff == EF_DELAY)
        xbuf_printf(b, ", \"ms\": %ld", f->param_ms);
    if (f->eff == EF_DROP)
        xbuf_printf(b, ", \"back_after_ms\": %ld", f->param_ms);
}

static void when_of(xbuf *b, const xfault *f)
{
    if (f->trig == TR_TIME)
        xbuf_printf(b, "\"at_ms\": %ld", f->at_ms);
    else if (f->trig == TR_LTASK)
        xbuf_printf(b, "\"on\": {\"event\": \"learner_task\", \"learner\": \"learner%d\", \"task\": \"%s\", \"nth\": %d}",
                    f->learner, task_short[f->task], f->nth);
    else
        xbuf_printf(b, "\"on\": {\"event\": \"task_done\", \"task\": \"%s\", \"nth\": %d}", task_short[f->task], f->nth);
    if (f->delay_ms > 0 && f->trig != TR_TIME)
        xbuf_printf(b, ", \"delay_ms\": %ld", f->delay_ms);
}

static bool in_group_faults(const xfault *f)
{
    return !effect_is_proc(f->eff) && !effect_is_operator(f->eff) && f->trig == TR_LTASK && !f->action;
}

/* The script's index of the nth task of a name. */
static int task_pos(const xsched *x, int task, int nth)
{
    switch (task) {
    case 0:
        return 1;
    case 1:
        return 2 + 2 * (nth - 1);
    case 2:
        return 3 + 2 * (nth - 1);
    default:
        return 2 + 2 * x->rounds;
    }
}

/* The first task of the script that a fault could touch: every task before
 * it runs on healthy learners and must complete. */
static int first_touched(const xsched *x, int ntasks)
{
    int first = ntasks;
    for (int i = 0; i < x->nf; i++) {
        const xfault *f = &x->f[i];
        int t = f->trig == TR_TIME ? 0 : task_pos(x, f->task, f->nth) + (f->trig == TR_DONE);
        if (t < first)
            first = t;
    }
    return first;
}

static int live_learners(const xsched *x)
{
    int live = x->nlearners;
    for (int i = 0; i < x->nf; i++)
        live -= effect_ends(x->f[i].eff);
    return live;
}

static char *summary_of(const xsched *x)
{
    xbuf b = {0};
    xbuf_printf(&b, "%d learners, %d rounds%s; ", x->nlearners, x->rounds, x->gap ? " (a pause before each learn)" : "");
    for (int i = 0; i < x->nf; i++) {
        const xfault *f = &x->f[i];
        xbuf_printf(&b, "%s%s", i ? ", " : "", effect_names[f->eff]);
        if (f->learner >= 0)
            xbuf_printf(&b, " learner%d", f->learner);
        if (f->trig == TR_TIME)
            xbuf_printf(&b, " at %ld ms", f->at_ms);
        else
            xbuf_printf(&b, " on %s%s #%d", f->trig == TR_DONE ? "the outcome of " : "", task_short[f->task], f->nth);
    }
    if (x->nf == 0)
        xbuf_puts(&b, "no fault");
    return xbuf_take(&b);
}

static void render_learners(xbuf *t, int *ln, const xbase *b, const xsched *x)
{
    line(t, ln, "  \"learners\": [");
    for (int l = 0; l < x->nlearners; l++) {
        xbuf g = {0};
        xbuf_printf(&g, "    {\"name\": \"g%d\", \"count\": 1, \"batch_size\": %d, \"learn_time_ms\": %ld", l,
                    b->batch_size, b->learn_time_ms);
        int nfl = 0;
        for (int i = 0; i < x->nf; i++) {
            const xfault *f = &x->f[i];
            if (f->learner != l || !in_group_faults(f))
                continue;
            xbuf_printf(&g, "%s", nfl++ ? ", " : ", \"faults\": [");
            fault_object(&g, f);
            /* optional: an earlier fault may take its learner or its task
             * away (the runner fails a group fault that never fired) */
            xbuf_printf(&g, ", \"task\": \"%s\", \"at\": %d, \"optional\": true}", task_short[f->task], f->nth);
        }
        if (nfl)
            xbuf_puts(&g, "]");
        xbuf_puts(&g, l + 1 < x->nlearners ? "}," : "}");
        line(t, ln, "%s", g.data);
        xbuf_free(&g);
    }
    line(t, ln, "  ],");
}

/* The coordinator's script; returns its number of tasks. */
static int render_script(xbuf *t, int *ln, const xbase *b, const xsched *x)
{
    /* the script: every outcome is accepted (the invariants judge) */
    xbuf sc = {0};
    int ntasks = 0;
    xbuf_puts(&sc, "{\"name\": \"resource\", \"expect\": {\"status\": \"any\"}}, {\"name\": \"start\", \"expect\": {\"status\": \"any\"}}");
    ntasks = 2;
    for (int r = 0; r < x->rounds; r++) {
        xbuf_puts(&sc, ", {\"name\": \"get_data\", \"expect\": {\"status\": \"any\"}}");
        xbuf_printf(&sc, ", {\"name\": \"learn\", \"expect\": {\"status\": \"any\"}%s}",
                    x->gap ? ", \"delay_ms\": " XSTR(XGAP_MS) : "");
        ntasks += 2;
    }
    xbuf_printf(&sc, ", {\"name\": \"close\", \"expect\": {\"status\": \"any\"}}, {\"name\": \"resource\", "
                     "\"expect\": {\"status\": \"any\"}, \"delay_ms\": %ld, \"comment\": \"the world settles\"}",
                settle_ms(b));
    ntasks += 2;
    line(t, ln, "  \"coordinator\": {\"script\": {\"stop_on_failure\": false, \"tasks\": [%s]}},", sc.data);
    xbuf_free(&sc);
    return ntasks;
}

static void render_actions(xbuf *t, int *ln, const xsched *x)
{
    int nact = 0;
    for (int i = 0; i < x->nf; i++) {
        const xfault *f = &x->f[i];
        if (in_group_faults(f))
            continue;
        xbuf a = {0};
        xbuf_puts(&a, nact ? "    ," : "    ");
        switch (f->eff) {
        case EF_KILL:
        case EF_RESTART:
            xbuf_puts(&a, "{");
            when_of(&a, f);
            xbuf_printf(&a, ", \"do\": \"%s\", \"target\": \"g%d\"}", effect_names[f->eff], f->learner);
            break;
        case EF_STOP:
            xbuf_puts(&a, "{");
            when_of(&a, f);
            xbuf_printf(&a, ", \"do\": \"stop\", \"target\": \"g%d\", \"duration_ms\": %ld}", f->learner, f->param_ms);
            break;
        case EF_OP_ERROR:
            xbuf_puts(&a, "{");
            when_of(&a, f);
            xbuf_printf(&a, ", \"do\": \"operator_fault\", \"fault\": {\"kind\": \"error_status\", \"count\": %ld}}",
                        f->param_ms);
            break;
        case EF_OP_REMOVE: {
            xbuf others = {0};
            for (int l = 0; l < x->nlearners; l++)
                if (l != f->learner)
                    xbuf_printf(&others, "%s\"learner%d\"", others.len ? ", " : "", l);
            xbuf_puts(&a, "{");
            when_of(&a, f);
            xbuf_printf(&a, ", \"do\": \"operator_set\", \"learners\": [%s]}", others.data ? others.data : "");
            xbuf_free(&others);
            /* and back, param_ms later */
            xfault back = *f;
            if (back.trig == TR_TIME)
                back.at_ms += f->param_ms;
            else
                back.delay_ms += f->param_ms;
            xbuf_puts(&a, ",\n    {");
            when_of(&a, &back);
            xbuf_puts(&a, ", \"do\": \"operator_set\", \"learners\": [");
            for (int l = 0; l < x->nlearners; l++)
                xbuf_printf(&a, "%s\"learner%d\"", l ? ", " : "", l);
            xbuf_puts(&a, "]}");
            (*ln)++; /* two lines */
            break;
        }
        default:
            /* a learner fault posted at the trigger: from then on, on every
             * task of its name (a state kind acts at once) */
            xbuf_puts(&a, "{");
            when_of(&a, f);
            xbuf_printf(&a, ", \"do\": \"fault\", \"target\": \"learner%d\", \"fault\": ", f->learner);
            fault_object(&a, f);
            if (f->eff != EF_DROP)
                xbuf_printf(&a, ", \"task\": \"%s\"", task_short[f->task]);
            xbuf_puts(&a, "}}");
        }
        line(t, ln, "%s", a.data);
        xbuf_free(&a);
        nact++;
    }
}

/* with_ok: the scenario expects coordinator_ok (only the minimal scenario of
 * a coordinator_oracle violation: explore reads the coordinator's failures
 * from its summary itself, so that a run whose coordinator did not finish is
 * the timeout's violation, not the oracle's). */
static void render(const xbase *b, const xsched *x, uint64_t rseed, const char *title, const char *comment,
                   bool with_ok, xrender *out)
{
    xbuf t = {0};
    int ln = 0;
    *out = (xrender){0};
    char *sum = summary_of(x);
    line(&t, &ln, "{");
    char *desc = xasprintf("%s: %s", title, sum);
    char *jd = json_str(desc);
    line(&t, &ln, "  \"description\": %s,", jd);
    free(desc);
    free(jd);
    if (comment) {
        char *jc = json_str(comment);
        line(&t, &ln, "  \"comment\": %s,", jc);
        free(jc);
    }
    line(&t, &ln, "  \"seed\": %llu,", (unsigned long long)rseed);
    line(&t, &ln, "  \"time_scale\": %g,", b->time_scale);
    line(&t, &ln, "  \"timeout_ms\": %d,", XTIMEOUT_MS);
    line(&t, &ln,
         "  \"timings\": {\"heartbeat_span_ms\": %ld, \"heartbeat_tolerance_ms\": %ld, \"max_retry_ms\": %ld, "
         "\"retry_interval_ms\": %ld, \"sync_period_ms\": %ld, \"task_deadline_ms\": %ld},",
         b->span, b->tolerance, b->max_retry, b->retry_interval, b->sync_period, b->deadline);
    render_learners(&t, &ln, b, x);
    if (b->k8s)
        line(&t, &ln, "  \"aggregator\": {\"k8s\": true},");
    int ntasks = render_script(&t, &ln, b, x);
    long cap = latency_cap_ms(b);
    line(&t, &ln, "  \"actions\": [");
    out->actions.first_line = ln + 1;
    render_actions(&t, &ln, x);
    out->actions.last_line = ln;
    line(&t, &ln, "  ],");
    out->live = live_learners(x);
    line(&t, &ln, "  \"expect\": {");
    if (with_ok) {
        line(&t, &ln, "    \"coordinator_ok\": true,");
        out->ok_line = ln;
    }
    line(&t, &ln, "    \"exactly_once\": true,");
    out->once_line = ln;
    line(&t, &ln, "    \"world_size\": [{\"at_end\": %d}],", out->live);
    out->world_line = ln;
    line(&t, &ln, "    \"tasks\": [");
    out->tasks.first_line = ln + 1;
    int healthy = first_touched(x, ntasks);
    for (int i = 0; i < ntasks; i++)
        line(&t, &ln, "      {\"index\": %d, \"latency_max_ms\": %ld%s}%s", i, cap,
             i < healthy ? ", \"status\": \"completed\"" : "", i + 1 < ntasks ? "," : "");
    out->tasks.last_line = ln;
    line(&t, &ln, "    ]");
    line(&t, &ln, "  }");
    line(&t, &ln, "}");
    free(sum);
    out->text = xbuf_take(&t);
}

/* ---- invariants ---- */

#define XINV_LIST(X)                                                                                                  \
    X(ORACLE, "coordinator_oracle", "every completed merge equals the oracle's, the dumps agree with what was sent") \
    X(HEALTHY, "healthy_tasks_complete", "every task sent before any fault could act completes")               \
    X(DEADLINE, "task_deadline", "every task the coordinator sent ends within the aggregator's deadline")             \
    X(ONCE, "exactly_once", "no learn item is delivered twice, and every item of a completed learn arrived")          \
    X(WORLD, "world_size", "the world size settles at the number of live learners")                                  \
    X(ALIVE, "aggregator_alive", "the aggregator runs and answers /metrics at the end")                               \
    X(EXIT0, "aggregator_exit", "the aggregator exits with 0 on the final SIGTERM")                                  \
    X(UNEXPECTED, "unexpected_exit", "no process that no fault touched exits, none dies of a crash signal")          \
    X(TIMEOUT, "run_timeout", "the run ends within its timeout")                                                     \
    X(OTHER, "other", "another check of the runner")

typedef enum {
#define X_ENUM(n, s, d) IV_##n,
    XINV_LIST(X_ENUM)
#undef X_ENUM
        IV_COUNT
} xinv;
static const char *const inv_names[IV_COUNT] = {
#define X_NAME(n, s, d) s,
    XINV_LIST(X_NAME)
#undef X_NAME
};
static const char *const inv_desc[IV_COUNT] = {
#define X_DESC(n, s, d) d,
    XINV_LIST(X_DESC)
#undef X_DESC
};

typedef struct {
    bool inv[IV_COUNT];
    char *detail[IV_COUNT]; /* the first failed check of each */
    int line[IV_COUNT];
    bool infra;   /* the run could not be carried out */
    bool missed;  /* an action of the schedule could not act */
    bool late;    /* an action came too late to judge the world size */
    int live;     /* learners alive at the end, as seen */
} xverdict;

typedef struct {
    xsched x;
    uint64_t rseed;
    int index; /* run number, or -1 for a shrink candidate */
    char *name, *path;
    xrender rd;
    long settle_ms; /* what the world needs after an action */
    sc_scenario *s;
    sc_run *run;
    bool done;
    xverdict v;
} xjob;

typedef struct {
    ev_loop *loop;
    sc_procset *set;
    sc_run_opts ro;
    const sc_explore_opts *o;
    xbase b;
    char *dir;
    FILE *log;
    int signalled;
    xjob **batch;
    size_t nbatch, next, running;
    uint64_t t0;
    int ncand;
} xctx;

static void xlog(xctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void xlog(xctx *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (c->log) {
        fprintf(c->log, "%8.1f s  ", (double)(ev_now_ms() - c->t0) / 1000.0);
        vfprintf(c->log, fmt, ap);
        fputc('\n', c->log);
        fflush(c->log);
    }
    va_end(ap);
}

static bool in_range(const xrange *r, int l)
{
    return l >= r->first_line && l <= r->last_line && r->first_line <= r->last_line;
}

static void set_inv(xverdict *v, xinv i, int line, const char *what, const char *detail)
{
    if (v->inv[i])
        return;
    v->inv[i] = true;
    v->line[i] = line;
    v->detail[i] = xasprintf("%s: %s", what, detail ? detail : "");
}

static int count_marks(const sc_result *r, int kind, int row, const char *prefix)
{
    int n = 0;
    for (size_t i = 0; i < r->nmarks; i++)
        if (r->marks[i].kind == kind && (row < 0 || r->marks[i].learner == row) &&
            (!prefix || strncmp(r->marks[i].label, prefix, strlen(prefix)) == 0))
            n++;
    return n;
}

/* The coordinator's failures, as one text (NULL: none, or no summary). Its
 * dump checker pairs each learn result with its learn by task id, so every
 * failure it reports is a violation. */
static char *coordinator_failures(const char *summary)
{
    cJSON *s = summary ? cJSON_Parse(summary) : NULL;
    const cJSON *fl = jsonx_get(s, "failures");
    xbuf b = {0};
    for (const cJSON *f = fl ? fl->child : NULL; f; f = f->next) {
        if (!cJSON_IsString(f))
            continue;
        xbuf_printf(&b, "%s%s", b.len ? "; " : "", f->valuestring);
    }
    cJSON_Delete(s);
    return b.len ? xbuf_take(&b) : NULL;
}

/* Which invariants a finished run broke. */
static void judge(xjob *j)
{
    const sc_result *r = sc_run_result(j->run);
    xverdict *v = &j->v;
    const xsched *x = &j->x;
    /* who is alive at the end: a learner's exits against its restarts */
    v->live = 0;
    bool touched[XL_MAX] = {false};
    for (int i = 0; i < x->nf; i++)
        if (x->f[i].learner >= 0)
            touched[x->f[i].learner] = true;
    for (int l = 0; l < x->nlearners; l++) {
        char rp[32];
        snprintf(rp, sizeof rp, "restart g%d", l);
        int exits = count_marks(r, 1, l, NULL), restarts = count_marks(r, 0, -1, rp);
        v->live += exits <= restarts;
        if (exits && !touched[l]) {
            char d[64];
            snprintf(d, sizeof d, "learner%d (group g%d) exited", l, l);
            set_inv(v, IV_UNEXPECTED, 0, "no process that no fault touched exits", d);
        }
    }
    /* the world is judged once it had time to settle after the last action
     * (a time trigger may act during the last task or after it) */
    double last_act = 0, end = r->nsamples ? r->samples[r->nsamples - 1].t_ms : 0;
    for (size_t i = 0; i < r->nmarks; i++)
        if (r->marks[i].kind == 0 && r->marks[i].t_ms > last_act)
            last_act = r->marks[i].t_ms;
    bool settled = r->nsamples == 0 || last_act + (double)j->settle_ms <= end;
    if (!settled)
        v->late = true;
    else if (r->nsamples == 0 || r->samples[r->nsamples - 1].value != v->live) {
        char d[128];
        snprintf(d, sizeof d, "it is %d at the end, %d learner%s alive",
                 r->nsamples ? r->samples[r->nsamples - 1].value : -1, v->live, v->live == 1 ? " is" : "s are");
        set_inv(v, IV_WORLD, j->rd.world_line, "world size is the number of live learners at the end", d);
    }
    if (r->timed_out)
        set_inv(v, IV_TIMEOUT, 0, "the run ends within its timeout", r->error);
    /* the coordinator's merge and dump checks */
    char *real = coordinator_failures(r->coordinator_summary);
    if (real)
        set_inv(v, IV_ORACLE, j->rd.ok_line, "the coordinator reports ok", real);
    free(real);
    for (size_t i = 0; i < r->nchecks; i++) {
        const sc_check *k = &r->checks[i];
        if (k->ok)
            continue;
        const char *w = k->what;
        if (in_range(&j->rd.actions, k->line))
            v->missed = true;
        else if (strcmp(w, "coordinator_ok") == 0 || strcmp(w, "the coordinator reports ok") == 0)
            ; /* judged above from the summary */
        else if (strcmp(w, "learn data is delivered exactly once") == 0)
            set_inv(v, IV_ONCE, j->rd.once_line, w, k->detail);
        else if (k->line == j->rd.world_line)
            ; /* judged above against the learners alive */
        else if (in_range(&j->rd.tasks, k->line))
            set_inv(v, strstr(w, ": status ") ? IV_HEALTHY : IV_DEADLINE, k->line, w, k->detail);
        else if (strstr(w, "aggregator is alive"))
            set_inv(v, IV_ALIVE, k->line, w, k->detail);
        else if (strstr(w, "exits with 0 on SIGTERM"))
            set_inv(v, IV_EXIT0, k->line, w, k->detail);
        else if (strstr(w, "ends unexpectedly") || strstr(w, "prints its summary"))
            set_inv(v, IV_UNEXPECTED, k->line, w, k->detail);
        else if (r->timed_out && strcmp(w, "the run") == 0)
            ; /* counted above */
        else if (strcmp(w, "the run") == 0 || strcmp(w, "learner ports") == 0)
            v->infra = true;
        else
            set_inv(v, IV_OTHER, k->line, w, k->detail);
    }
    if (v->infra)
        for (int i = 0; i < IV_COUNT; i++)
            v->inv[i] = false; /* not the aggregator's doing */
}

static int first_inv(const xverdict *v)
{
    for (int i = 0; i < IV_COUNT; i++)
        if (v->inv[i])
            return i;
    return -1;
}

static void job_free(xjob *j)
{
    if (!j)
        return;
    sc_run_free(j->run);
    sc_scenario_free(j->s);
    free(j->name);
    free(j->path);
    free(j->rd.text);
    for (int i = 0; i < IV_COUNT; i++)
        free(j->v.detail[i]);
    free(j);
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -1;
    fputs(text, f);
    return fclose(f);
}

/* A job for schedule x: its scenario file written and validated. NULL (and
 * the errors printed) if the validator refuses it: a bug of the drawing. */
static xjob *job_new(xctx *c, const xsched *x, uint64_t rseed, const char *name, const char *title,
                     const char *comment)
{
    xjob *j = xcalloc(1, sizeof *j);
    j->x = *x;
    j->rseed = rseed;
    j->index = -1;
    j->name = xstrdup(name);
    j->path = xasprintf("%s/scenarios/%s.json", c->dir, name);
    j->settle_ms = c->b.tolerance + 4 * c->b.retry_interval + 2 * c->b.sync_period + 100;
    render(&c->b, x, rseed, title, comment, false, &j->rd);
    char *errs = NULL;
    if (write_text(j->path, j->rd.text) != 0) {
        fprintf(stderr, "run_scenarios: --explore: cannot write %s: %s\n", j->path, strerror(errno));
        job_free(j);
        return NULL;
    }
    j->s = sc_scenario_parse(j->path, j->rd.text, strlen(j->rd.text), &errs);
    if (!j->s) {
        fprintf(stderr, "run_scenarios: --explore: a drawn schedule is invalid (a bug of explore):\n%s", errs);
        free(errs);
        job_free(j);
        return NULL;
    }
    return j;
}

/* ---- running batches on the loop ---- */

static void start_more(xctx *c);

static void on_job_done(void *ud, sc_run *run)
{
    xctx *c = ud;
    for (size_t i = 0; i < c->nbatch; i++) {
        xjob *j = c->batch[i];
        if (j->run != run || j->done)
            continue;
        j->done = true;
        c->running--;
        judge(j);
        const sc_result *r = sc_run_result(run);
        /* the scenario file beside its run's evidence */
        if (r->run_dir) {
            char *copy = xasprintf("%s/scenario.json", r->run_dir);
            write_text(copy, j->rd.text);
            free(copy);
        }
        int iv = first_inv(&j->v);
        xlog(c, "%s (seed %llu): %s%s%s%s", j->name, (unsigned long long)j->rseed, iv < 0 ? "ok" : "VIOLATION ",
             iv < 0 ? "" : inv_names[iv], j->v.infra ? " (could not be carried out)" : "",
             j->v.missed ? " (an action could not act)" : "");
    }
    start_more(c);
    if (c->running == 0 && (c->next >= c->nbatch || c->signalled))
        ev_stop(c->loop);
}

static void start_more(xctx *c)
{
    while (!c->signalled && c->running < (size_t)c->o->jobs && c->next < c->nbatch) {
        xjob *j = c->batch[c->next++];
        c->running++;
        j->run = sc_run_start(c->loop, c->set, j->s, &c->ro, on_job_done, c);
    }
}

static void run_batch(xctx *c, xjob **jobs, size_t n)
{
    if (c->signalled || n == 0)
        return;
    c->batch = jobs;
    c->nbatch = n;
    c->next = 0;
    c->running = 0;
    start_more(c);
    if (c->running)
        ev_run(c->loop);
    c->batch = NULL;
    c->nbatch = 0;
}

static void on_sigchld(ev_loop *loop, int signum, void *data)
{
    (void)loop;
    (void)signum;
    xctx *c = data;
    sc_procset_reap(c->set);
}

static void on_sigterm(ev_loop *loop, int signum, void *data)
{
    xctx *c = data;
    if (c->signalled) {
        sc_procset_signal_all(c->set, SIGKILL);
        _exit(128 + signum);
    }
    c->signalled = signum;
    fprintf(stderr, "run_scenarios: signal %d: stopping the exploration\n", signum);
    for (size_t i = 0; i < c->next && i < c->nbatch; i++)
        if (!c->batch[i]->done)
            sc_run_abort(c->batch[i]->run, "the runner was interrupted");
    if (c->running == 0)
        ev_stop(loop);
}

static double elapsed_s(const xctx *c, uint64_t since)
{
    return (double)(ev_now_ms() - since) / 1000.0;
}

/* ---- shrinking ---- */

static void remove_fault(xsched *x, int i)
{
    memmove(&x->f[i], &x->f[i + 1], (size_t)(x->nf - i - 1) * sizeof x->f[0]);
    x->nf--;
}

/* Smaller schedules than x, the biggest steps first. */
static int candidates(const xsched *x, xsched *out, int max)
{
    int n = 0;
#define ADD(c)                                                                                                         \
    do {                                                                                                               \
        if (n < max)                                                                                                   \
            out[n++] = (c);                                                                                            \
    } while (0)
    /* fewer faults */
    for (int i = 0; i < x->nf; i++) {
        xsched c = *x;
        remove_fault(&c, i);
        ADD(c);
    }
    /* fewer learners: one that no fault targets goes, the others are renumbered */
    for (int l = x->nlearners - 1; l >= 0 && x->nlearners > 1; l--) {
        bool used = false;
        for (int i = 0; i < x->nf; i++)
            used |= x->f[i].learner == l;
        if (used)
            continue;
        xsched c = *x;
        c.nlearners--;
        for (int i = 0; i < c.nf; i++)
            if (c.f[i].learner > l)
                c.f[i].learner--;
        ADD(c);
        break;
    }
    /* fewer rounds */
    if (x->rounds > 1) {
        xsched c = *x;
        c.rounds--;
        for (int i = 0; i < c.nf; i++)
            if (c.f[i].nth > c.rounds)
                c.f[i].nth = c.rounds;
        ADD(c);
    }
    /* earlier counts and times, plainer triggers */
    for (int i = 0; i < x->nf; i++) {
        const xfault *f = &x->f[i];
        if (f->nth > 1) {
            xsched c = *x;
            c.f[i].nth = 1;
            ADD(c);
            if (f->nth > 2) {
                c.f[i].nth = f->nth - 1;
                ADD(c);
            }
        }
        if (f->trig == TR_TIME && f->at_ms >= 100) {
            xsched c = *x;
            c.f[i].at_ms = f->at_ms / 2;
            ADD(c);
        }
        if (f->delay_ms > 0) {
            xsched c = *x;
            c.f[i].delay_ms = 0;
            ADD(c);
        }
        if (f->action && f->trig == TR_LTASK && !effect_is_proc(f->eff)) {
            xsched c = *x;
            c.f[i].action = false;
            ADD(c);
        }
    }
    if (x->gap) {
        xsched c = *x;
        c.gap = false;
        ADD(c);
    }
    /* simpler kinds */
    static const xeffect simple[] = {EF_KILL, EF_CRASH, EF_FAIL};
    for (int i = 0; i < x->nf; i++)
        for (size_t k = 0; k < sizeof simple / sizeof simple[0]; k++)
            if (simple[k] < x->f[i].eff && x->f[i].learner >= 0) {
                xsched c = *x;
                c.f[i].eff = simple[k];
                if (effect_is_operator(x->f[i].eff))
                    c.f[i].trig = x->f[i].trig;
                ADD(c);
            }
#undef ADD
    return n;
}

/* Runs x `tries` times side by side; true if a try broke invariant iv.
 * *keep: the failing job (the caller's), when one did. */
static bool breaks(xctx *c, const xsched *x, uint64_t rseed, int iv, int tries, const char *title, xjob **keep)
{
    xjob *jobs[16];
    int n = 0;
    if (tries > 16)
        tries = 16;
    for (int t = 0; t < tries; t++) {
        char name[64];
        snprintf(name, sizeof name, "shrink-%04d", ++c->ncand);
        jobs[n] = job_new(c, x, rseed, name, title, NULL);
        if (jobs[n])
            n++;
    }
    run_batch(c, jobs, (size_t)n);
    bool hit = false;
    for (int t = 0; t < n; t++) {
        if (!hit && jobs[t]->done && jobs[t]->v.inv[iv]) {
            hit = true;
            if (keep) {
                job_free(*keep);
                *keep = jobs[t];
                continue;
            }
        }
        job_free(jobs[t]);
    }
    return hit;
}

typedef struct {
    int iv;
    int found_run;     /* the run that found it (= the runs needed) */
    bool confirmed, tried; /* confirmation: done, and its outcome */
    char *first_detail; /* what failed in the run that found it */
    xsched original, minimal;
    uint64_t rseed;
    xjob *evidence;    /* the last failing run of the minimal schedule */
    char *path;        /* minimal-<invariant>.json */
    char *replay;
    double shrink_s;
    int candidates_run;
    bool budget_out;
} xfound;

static void shrink(xctx *c, xfound *fd)
{
    uint64_t t0 = ev_now_ms();
    xsched cur = fd->original;
    int before = c->ncand;
    enum { CMAX = 64 };
    xsched *cand = xcalloc(CMAX, sizeof *cand);
    bool progress = true;
    while (progress && !c->signalled) {
        progress = false;
        int nc = candidates(&cur, cand, CMAX);
        for (int i = 0; i < nc && !c->signalled; i++) {
            if (c->o->shrink_seconds > 0 && elapsed_s(c, t0) >= c->o->shrink_seconds) {
                fd->budget_out = true;
                break;
            }
            char *sum = summary_of(&cand[i]);
            bool hit = breaks(c, &cand[i], fd->rseed, fd->iv, c->o->shrink_tries, "explore shrink candidate",
                              &fd->evidence);
            xlog(c, "shrink %s: %s: %s", inv_names[fd->iv], hit ? "still breaks it" : "holds", sum);
            free(sum);
            if (hit) {
                cur = cand[i];
                progress = true;
                break;
            }
        }
        if (fd->budget_out)
            break;
    }
    free(cand);
    fd->minimal = cur;
    fd->shrink_s = elapsed_s(c, t0);
    fd->candidates_run = c->ncand - before;
}

/* minimal-<invariant>.json: the smallest schedule, what it breaks, how to
 * replay it. */
static void write_minimal(xctx *c, xfound *fd, bool first)
{
    fd->path = xasprintf("%s/minimal-%s.json", c->dir, inv_names[fd->iv]);
    char *replay = xasprintf("%s %s", c->ro.replay_prefix, fd->path);
    const char *detail = fd->evidence ? fd->evidence->v.detail[fd->iv] : fd->first_detail;
    char title[128];
    snprintf(title, sizeof title, "minimal schedule that breaks %s", inv_names[fd->iv]);
    /* where the expectation that fails is in this file (the lines do not
     * depend on the comment's text) */
    xrender rd;
    bool with_ok = fd->iv == IV_ORACLE;
    render(&c->b, &fd->minimal, fd->rseed, title, "", with_ok, &rd);
    int at = 0;
    if (fd->iv == IV_ORACLE)
        at = rd.ok_line;
    else if (fd->iv == IV_ONCE)
        at = rd.once_line;
    else if (fd->iv == IV_WORLD)
        at = rd.world_line;
    else if ((fd->iv == IV_HEALTHY || fd->iv == IV_DEADLINE) && fd->evidence &&
             in_range(&fd->evidence->rd.tasks, fd->evidence->v.line[fd->iv]))
        at = rd.tasks.first_line + fd->evidence->v.line[fd->iv] - fd->evidence->rd.tasks.first_line;
    free(rd.text);
    char where[96];
    if (at > 0)
        snprintf(where, sizeof where, "the expectation on line %d fails", at);
    else
        snprintf(where, sizeof where, "the runner's own check fails");
    char *comment = xasprintf("Violated invariant %s: %s. Found by run %d of explore seed %llu (%s), shrunk to %d "
                              "fault%s%s. On this schedule %s: %s. Replay: %s",
                              inv_names[fd->iv], inv_desc[fd->iv], fd->found_run, (unsigned long long)c->o->seed,
                              fd->confirmed ? "confirmed by a second run" : "not confirmed: flaky",
                              fd->minimal.nf, fd->minimal.nf == 1 ? "" : "s",
                              fd->budget_out ? " (the shrink budget ran out)" : "", where, detail, replay);
    render(&c->b, &fd->minimal, fd->rseed, title, comment, with_ok, &rd);
    if (write_text(fd->path, rd.text) != 0)
        fprintf(stderr, "run_scenarios: cannot write %s: %s\n", fd->path, strerror(errno));
    if (first) {
        char *p = xasprintf("%s/minimal.json", c->dir);
        write_text(p, rd.text);
        free(p);
    }
    free(rd.text);
    free(comment);
    fd->replay = replay;
}

/* ---- the exploration ---- */

static char *make_dir(const sc_run_opts *ro, uint64_t seed)
{
    mkdir(ro->out_dir, 0755);
    for (int k = 1; k < 1000; k++) {
        char *d = k == 1 ? xasprintf("%s/explore-%llu", ro->out_dir, (unsigned long long)seed)
                         : xasprintf("%s/explore-%llu-%d", ro->out_dir, (unsigned long long)seed, k);
        if (mkdir(d, 0755) == 0) {
            char *s = xasprintf("%s/scenarios", d);
            mkdir(s, 0755);
            free(s);
            return d;
        }
        free(d);
    }
    return NULL;
}

char *sc_explore_draw_text(const sc_scenario *base, uint64_t seed, int index, char **err)
{
    xbase b;
    *err = NULL;
    if (base_of(base, &b, err) != 0)
        return NULL;
    xsched x;
    uint64_t rs = run_seed(seed, index);
    draw(&b, rs, &x);
    xrender rd;
    render(&b, &x, rs, "explore", NULL, false, &rd);
    return rd.text;
}

/* The summary result for the reports: one check per invariant. */
static sc_result *summary_result(xctx *c, int runs, const int *viol, double wall_ms)
{
    sc_result *r = xcalloc(1, sizeof *r);
    r->name = xasprintf("explore-%llu", (unsigned long long)c->o->seed);
    r->path = xstrdup(c->o->base_path);
    r->description = xasprintf("explore from %s: %d runs, seed %llu", c->o->base_path, runs,
                               (unsigned long long)c->o->seed);
    r->seed = c->o->seed;
    r->duration_ms = wall_ms;
    r->run_dir = xstrdup(c->dir);
    r->replay = xasprintf("%s --explore %s --runs %d --seed %llu", c->ro.replay_prefix, c->o->base_path, runs,
                          (unsigned long long)c->o->seed);
    r->passed = true;
    r->checks = xcalloc(IV_COUNT, sizeof *r->checks);
    for (int i = 0; i < IV_COUNT; i++) {
        sc_check *k = &r->checks[r->nchecks++];
        k->ok = viol[i] == 0;
        k->what = xasprintf("invariant %s: %s", inv_names[i], inv_desc[i]);
        k->detail = xasprintf("broken in %d of %d runs", viol[i], runs);
        r->passed &= k->ok;
    }
    return r;
}

static void summary_free(sc_result *r)
{
    for (size_t i = 0; i < r->nchecks; i++) {
        free(r->checks[i].what);
        free(r->checks[i].detail);
    }
    free(r->checks);
    free(r->name);
    free(r->path);
    free(r->description);
    free(r->run_dir);
    free(r->replay);
    free(r);
}

static int write_reports(xctx *c, xfound *found, int nfound, sc_result *sum, double wall_ms)
{
    const sc_result **res = xcalloc((size_t)nfound + 1, sizeof *res);
    sc_result *copies = xcalloc((size_t)nfound + 1, sizeof *copies);
    char **names = xcalloc((size_t)nfound + 1, sizeof *names);
    size_t n = 0;
    res[n++] = sum;
    for (int i = 0; i < nfound; i++) {
        if (!found[i].evidence)
            continue;
        copies[i] = *sc_run_result(found[i].evidence->run);
        names[i] = xasprintf("minimal-%s", inv_names[found[i].iv]);
        copies[i].name = names[i];
        copies[i].path = found[i].path;
        copies[i].replay = found[i].replay;
        res[n++] = &copies[i];
    }
    int rc = 0;
    const char *paths[2] = {c->o->junit, c->o->html}, *kinds[2] = {"JUnit", "HTML"};
    int (*writers[2])(const char *, const sc_result *const *, size_t, double) = {sc_report_junit, sc_report_html};
    for (int k = 0; k < 2; k++) {
        if (!paths[k])
            continue;
        if (writers[k](paths[k], res, n, wall_ms) != 0) {
            fprintf(stderr, "run_scenarios: cannot write %s: %s\n", paths[k], strerror(errno));
            rc = 1;
        } else {
            printf("%s report: %s\n", kinds[k], paths[k]);
        }
    }
    for (int i = 0; i < nfound; i++)
        free(names[i]);
    free(names);
    free(copies);
    free(res);
    return rc;
}

/* What an exploration counted. */
typedef struct {
    int viol[IV_COUNT], runs, infra, missed, late, flaky, rc;
    xfound found[IV_COUNT];
    int nfound;
    double explore_s;
} xstats;

/* One finished run: printed, counted, its first violation of an invariant
 * kept for shrinking. true: stop drawing (--first). */
static bool account(xctx *c, xstats *st, const xjob *j)
{
    const sc_explore_opts *o = c->o;
    st->runs++;
    st->infra += j->v.infra;
    st->missed += j->v.missed;
    st->late += j->v.late;
    int iv = first_inv(&j->v);
    if (!o->quiet || iv >= 0) {
        char *sum = summary_of(&j->x);
        printf("[%4d] %-9s %s%s\n", j->index, iv < 0 ? (j->v.infra ? "ERROR" : "ok") : "VIOLATION", sum,
               j->v.infra ? " (the run could not be carried out)" : "");
        free(sum);
        for (int v = 0; iv >= 0 && v < IV_COUNT; v++)
            if (j->v.inv[v])
                printf("         %s: %s\n         scenario: %s\n", inv_names[v], j->v.detail[v], j->path);
    }
    for (int v = 0; v < IV_COUNT; v++) {
        if (!j->v.inv[v])
            continue;
        st->viol[v]++;
        bool seen = false;
        for (int f = 0; f < st->nfound; f++)
            seen |= st->found[f].iv == v;
        if (!seen && v == iv)
            st->found[st->nfound++] = (xfound){.iv = v,
                                               .found_run = j->index,
                                               .original = j->x,
                                               .rseed = j->rseed,
                                               .first_detail = xstrdup(j->v.detail[v])};
    }
    return iv >= 0 && o->first;
}

static bool confirm(xctx *c, xfound *fd);

/* Draws and runs the schedules, -j at a time, within --runs and
 * --max-seconds. */
static void explore_draws(xctx *c, xstats *st)
{
    const sc_explore_opts *o = c->o;
    bool stop = false;
    for (int i = 0; i < o->runs && !stop && !c->signalled;) {
        if (o->max_seconds > 0 && elapsed_s(c, c->t0) >= o->max_seconds) {
            printf("run_scenarios: explore: --max-seconds %.0f reached after %d runs\n", o->max_seconds, st->runs);
            break;
        }
        xjob *jobs[64];
        int n = 0;
        for (; n < o->jobs && n < 64 && i < o->runs; i++) {
            char name[32], title[64];
            snprintf(name, sizeof name, "run-%04d", i + 1);
            snprintf(title, sizeof title, "explore seed %llu run %d", (unsigned long long)o->seed, i + 1);
            xsched x;
            uint64_t rs = run_seed(o->seed, i);
            draw(&c->b, rs, &x);
            xjob *j = job_new(c, &x, rs, name, title, NULL);
            if (!j) {
                st->rc = 2;
                stop = true;
                break;
            }
            j->index = i + 1;
            jobs[n++] = j;
        }
        run_batch(c, jobs, (size_t)n);
        for (int k = 0; k < n; k++) {
            if (jobs[k]->done && account(c, st, jobs[k]))
                stop = true;
            job_free(jobs[k]);
        }
        /* --first: the first violation that a second run confirms (a flaky
         * one is kept in the counts, and the drawing goes on) */
        for (int f = 0; stop && f < st->nfound; f++) {
            xfound *fd = &st->found[f];
            if (fd->tried || confirm(c, fd))
                continue;
            stop = false;
            st->flaky++;
            job_free(fd->evidence);
            free(fd->first_detail);
            st->found[f--] = st->found[--st->nfound]; /* a later run may find it again */
        }
        fflush(stdout);
    }
    st->explore_s = elapsed_s(c, c->t0);
}

/* Runs the violation's schedule again (--shrink-tries side by side). */
static bool confirm(xctx *c, xfound *fd)
{
    if (!fd->tried) {
        fd->tried = true;
        fd->confirmed = breaks(c, &fd->original, fd->rseed, fd->iv, c->o->shrink_tries, "explore confirmation",
                               &fd->evidence);
        printf("run_scenarios: explore: %s from run %d %s\n", inv_names[fd->iv], fd->found_run,
               fd->confirmed ? "confirmed by a second run" : "did not fail again (flaky)");
        fflush(stdout);
    }
    return fd->confirmed;
}

/* Each violated invariant: confirmed, shrunk, written as minimal-*.json. */
static void confirm_and_shrink(xctx *c, xstats *st)
{
    const sc_explore_opts *o = c->o;
    for (int f = 0; f < st->nfound && !c->signalled; f++) {
        xfound *fd = &st->found[f];
        if (confirm(c, fd)) {
            printf("run_scenarios: explore: shrinking %s (at most %.0f s, %d tr%s per candidate)\n", inv_names[fd->iv],
                   o->shrink_seconds, o->shrink_tries, o->shrink_tries == 1 ? "y" : "ies");
            fflush(stdout);
        }
        if (fd->confirmed)
            shrink(c, fd);
        else
            fd->minimal = fd->original;
        write_minimal(c, fd, f == 0);
    }
}

static int print_summary(xctx *c, const xstats *st)
{
    const sc_explore_opts *o = c->o;
    int total = 0;
    for (int v = 0; v < IV_COUNT; v++)
        total += st->viol[v];
    printf("\nexplore summary: %d runs in %.1f s (seed %llu, base %s)%s\n", st->runs, st->explore_s,
           (unsigned long long)o->seed, o->base_path, c->signalled ? ", interrupted" : "");
    if (st->infra)
        printf("  %d run%s could not be carried out (see explore.log)\n", st->infra, st->infra == 1 ? "" : "s");
    if (st->missed)
        printf("  %d run%s had an action that could not act (not counted as violations)\n", st->missed,
               st->missed == 1 ? "" : "s");
    if (st->flaky)
        printf("  %d violation%s did not fail again when run once more (flaky; counted below)\n", st->flaky,
               st->flaky == 1 ? "" : "s");
    if (st->late)
        printf("  %d run%s had an action too late to judge the world size at the end\n", st->late,
               st->late == 1 ? "" : "s");
    for (int v = 0; v < IV_COUNT; v++)
        if (st->viol[v] || v < IV_OTHER)
            printf("  %-24s %4d violation%s\n", inv_names[v], st->viol[v], st->viol[v] == 1 ? "" : "s");
    for (int f = 0; f < st->nfound; f++) {
        const xfound *fd = &st->found[f];
        char *sum = summary_of(&fd->minimal);
        printf("  minimal %s (found by run %d, %d fault%s -> %d fault%s after %d candidates in %.1f s%s%s): %s\n"
               "    %s\n    replay: %s\n",
               inv_names[fd->iv], fd->found_run, fd->original.nf, fd->original.nf == 1 ? "" : "s", fd->minimal.nf,
               fd->minimal.nf == 1 ? "" : "s", fd->candidates_run, fd->shrink_s,
               fd->budget_out ? ", budget ran out" : "", fd->confirmed ? "" : ", NOT confirmed", sum, fd->path,
               fd->replay);
        xlog(c, "minimal %s: %d faults, found by run %d: %s", inv_names[fd->iv], fd->minimal.nf, fd->found_run,
             fd->path);
        free(sum);
    }
    printf("%s\n", total ? "explore: VIOLATIONS found" : "explore: no violation");
    return total;
}

int sc_explore_run(ev_loop *loop, const sc_run_opts *run_opts, const sc_scenario *base, const sc_explore_opts *o)
{
    xctx c = {.loop = loop, .o = o, .ro = *run_opts};
    char *err = NULL;
    if (base_of(base, &c.b, &err) != 0) {
        fprintf(stderr, "run_scenarios: --explore %s\n", err);
        free(err);
        return 2;
    }
    c.dir = make_dir(run_opts, o->seed);
    if (!c.dir) {
        fprintf(stderr, "run_scenarios: cannot make a folder in %s: %s\n", run_opts->out_dir, strerror(errno));
        return 2;
    }
    c.ro.out_dir = c.dir;
    c.ro.has_seed = false; /* each run has its own */
    char *logp = xasprintf("%s/explore.log", c.dir);
    c.log = fopen(logp, "w");
    free(logp);
    signal(SIGPIPE, SIG_IGN);
    c.set = sc_procset_new(loop);
    ev_signal(loop, SIGCHLD, on_sigchld, &c);
    ev_signal(loop, SIGTERM, on_sigterm, &c);
    ev_signal(loop, SIGINT, on_sigterm, &c);
    ev_signal(loop, SIGHUP, on_sigterm, &c);
    c.t0 = ev_now_ms();
    printf("run_scenarios: explore %s: up to %d runs, seed %llu, -j %d%s; folder %s\n", o->base_path, o->runs,
           (unsigned long long)o->seed, o->jobs, o->max_seconds > 0 ? ", time-bounded" : "", c.dir);
    fflush(stdout);

    xstats *st = xcalloc(1, sizeof *st);
    explore_draws(&c, st);
    confirm_and_shrink(&c, st);
    double wall = (double)(ev_now_ms() - c.t0);
    int total = print_summary(&c, st);
    if (c.log)
        fclose(c.log);
    sc_result *sum = summary_result(&c, st->runs, st->viol, wall);
    int rc = st->rc;
    if (write_reports(&c, st->found, st->nfound, sum, wall) != 0 && rc == 0)
        rc = 1;
    fflush(stdout);
    summary_free(sum);
    sc_procset_signal_all(c.set, SIGKILL);
    for (int f = 0; f < st->nfound; f++) {
        job_free(st->found[f].evidence);
        free(st->found[f].first_detail);
        free(st->found[f].path);
        free(st->found[f].replay);
    }
    bool any = total || st->nfound;
    free(st);
    sc_procset_free(c.set);
    free(c.dir);
    if (c.signalled)
        return 128 + c.signalled;
    if (rc)
        return rc;
    return any ? 1 : 0;
}
