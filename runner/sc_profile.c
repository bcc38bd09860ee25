/* sc_profile: aggregator profiles (see sc_profile.h). */
#include "sc_profile.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpos.h"
#include "jsonx.h"
#include "suggest.h"
#include "util.h"
#include "xalloc.h"

static const char *const NAMES[] = {"aggregator",
                                    "profile_dir",
                                    "run_dir",
                                    "config",
                                    "slave_port",
                                    "master_port",
                                    "metrics_port",
                                    "operator_port",
                                    "namespace",
                                    "pod_name",
                                    "time_scale",
                                    "heartbeat_span_ms",
                                    "heartbeat_tolerance_ms",
                                    "max_retry_ms",
                                    "retry_interval_ms",
                                    "sync_period_ms",
                                    "task_deadline_ms",
                                    "learners",
                                    NULL};

static const char *const KEYS[] = {"name",  "description", "command",      "config",  "env",
                                   "kubernetes_env", "requires_env", "ready", "offers", "close_task", "timings", NULL};
static const char *const OFFERS[] = {"metrics", "events", NULL};

/* The value of placeholder name (owned by the caller), or NULL if unknown. */
static char *lookup(const sc_profile *p, const sc_profile_vars *v, const char *name)
{
    if (strncmp(name, "env:", 4) == 0) {
        const char *e = getenv(name + 4);
        return xstrdup(e ? e : "");
    }
    if (!v)
        return NULL;
#define S(n, x)                                                                                                        \
    if (strcmp(name, n) == 0)                                                                                          \
        return xstrdup((x) ? (x) : "");
#define I(n, x)                                                                                                        \
    if (strcmp(name, n) == 0)                                                                                          \
        return xasprintf("%ld", (long)(x));
    S("aggregator", v->aggregator)
    S("profile_dir", p->dir)
    S("run_dir", v->run_dir)
    S("config", v->config)
    S("namespace", v->namespace_)
    S("pod_name", v->pod_name)
    I("slave_port", v->slave_port)
    I("master_port", v->master_port)
    I("metrics_port", v->metrics_port)
    I("operator_port", v->operator_port)
    I("heartbeat_span_ms", v->heartbeat_span_ms)
    I("heartbeat_tolerance_ms", v->heartbeat_tolerance_ms)
    I("max_retry_ms", v->max_retry_ms)
    I("retry_interval_ms", v->retry_interval_ms)
    I("sync_period_ms", v->sync_period_ms)
    I("task_deadline_ms", v->task_deadline_ms)
#undef S
#undef I
    if (strcmp(name, "time_scale") == 0)
        return xasprintf("%g", v->time_scale);
    if (strcmp(name, "learners") == 0) {
        xbuf b = {0};
        for (size_t i = 0; i < v->nlearners; i++)
            xbuf_printf(&b, "%s%s=%s:%d", i ? " " : "", v->learner_ids[i], v->learner_hosts[i], v->learner_ports[i]);
        return xbuf_take(&b);
    }
    return NULL;
}

/* Expands tmpl; with v NULL only checks its placeholders (NULL: fine, else
 * the message, owned by the caller). */
static char *expand(const sc_profile *p, const sc_profile_vars *v, const char *tmpl, char **bad)
{
    xbuf b = {0};
    *bad = NULL;
    for (const char *s = tmpl; *s;) {
        const char *o = strchr(s, '{');
        const char *c = o ? strchr(o, '}') : NULL;
        if (!o || !c) {
            xbuf_puts(&b, s);
            break;
        }
        xbuf_printf(&b, "%.*s", (int)(o - s), s);
        char *name = xstrndup(o + 1, (size_t)(c - o - 1));
        bool known = strncmp(name, "env:", 4) == 0 && name[4];
        for (size_t i = 0; NAMES[i] && !known; i++)
            known = strcmp(name, NAMES[i]) == 0;
        if (!known && !*bad) {
            const char *near = suggest_nearest(name, NAMES, (size_t)-1);
            *bad = near ? xasprintf("unknown placeholder {%s} (did you mean {%s}?)", name, near)
                        : xasprintf("unknown placeholder {%s}", name);
        }
        char *val = known ? lookup(p, v, name) : NULL;
        if (val)
            xbuf_puts(&b, val);
        free(val);
        free(name);
        s = c + 1;
    }
    return xbuf_take(&b);
}

typedef struct {
    const sc_profile *p;
    const jpos *pos;
    char *err;
    size_t errlen;
    bool failed;
} lctx;

static void lerr(lctx *c, const char *path, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void lerr(lctx *c, const char *path, const char *fmt, ...)
{
    /* every error, one a line */
    size_t used = c->failed ? strlen(c->err) : 0;
    c->failed = true;
    if (used + 2 >= c->errlen)
        return;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(c->err + used, c->errlen - used, "%s%s:%d: %s%s%s", used ? "\n" : "", c->p->path,
             c->pos ? jpos_line(c->pos, path) : 0, path, path[0] ? ": " : "", msg);
}

static void check_template(lctx *c, const char *path, const char *tmpl)
{
    char *bad;
    free(expand(c->p, NULL, tmpl, &bad));
    if (bad)
        lerr(c, path, "%s", bad);
    free(bad);
}

static void check_config(lctx *c, const cJSON *j, const char *path)
{
    if (cJSON_IsString(j))
        check_template(c, path, j->valuestring);
    int i = 0;
    for (const cJSON *it = j->child; it; it = it->next, i++) {
        char *sub = it->string ? (path[0] ? xasprintf("%s.%s", path, it->string) : xstrdup(it->string))
                               : xasprintf("%s[%d]", path, i);
        check_config(c, it, sub);
        free(sub);
    }
}

/* A list of strings, or an object of strings as "NAME=value". */
static char **string_list(lctx *c, const cJSON *j, const char *key, bool as_env)
{
    char **v = util_strv_new();
    if (!j)
        return v;
    if (as_env ? !cJSON_IsObject(j) : !cJSON_IsArray(j)) {
        lerr(c, key, "must be %s", as_env ? "an object of strings" : "a list of strings");
        return v;
    }
    int i = 0;
    for (const cJSON *it = j->child; it; it = it->next, i++) {
        char *path = as_env ? xasprintf("%s.%s", key, it->string) : xasprintf("%s[%d]", key, i);
        if (!cJSON_IsString(it))
            lerr(c, path, "must be a string, not %s", jsonx_type_phrase(it));
        else {
            check_template(c, path, it->valuestring);
            util_strv_push(&v, as_env ? xasprintf("%s=%s", it->string, it->valuestring) : xstrdup(it->valuestring));
        }
        free(path);
    }
    return v;
}

int sc_profile_load(const char *path, sc_profile **out, char *err, size_t errlen)
{
    *out = NULL;
    size_t len;
    char *text = util_read_file(path, (size_t)1 << 20, &len, NULL);
    if (!text) {
        snprintf(err, errlen, "%s: cannot read the aggregator profile", path);
        return -1;
    }
    char perr[256];
    cJSON *j = jsonx_parse(text, len, perr, sizeof perr);
    if (!j) {
        snprintf(err, errlen, "%s: %s", path, perr);
        free(text);
        return -1;
    }
    jpos *pos = jpos_scan(text, len);
    free(text);
    sc_profile *p = xcalloc(1, sizeof *p);
    p->path = xstrdup(path);
    const char *sl = strrchr(path, '/');
    p->dir = sl ? xstrndup(path, (size_t)(sl - path)) : xstrdup(".");
    lctx c = {.p = p, .pos = pos, .err = err, .errlen = errlen};
    if (!cJSON_IsObject(j))
        lerr(&c, "", "an aggregator profile is an object");
    for (const cJSON *it = j->child; it && cJSON_IsObject(j); it = it->next) {
        bool ok = false;
        for (size_t i = 0; KEYS[i] && !ok; i++)
            ok = strcmp(it->string, KEYS[i]) == 0;
        const char *near = ok ? NULL : suggest_nearest(it->string, KEYS, (size_t)-1);
        if (!ok && near)
            lerr(&c, it->string, "unknown key (did you mean '%s'?)", near);
        else if (!ok)
            lerr(&c, it->string, "unknown key (known: name, description, command, config, env, kubernetes_env, "
                                 "requires_env, ready, offers, close_task, timings)");
    }
    if (pos && jpos_dup_count(pos)) {
        int l1, l2;
        const char *d = jpos_dup(pos, 0, &l1, &l2);
        lerr(&c, d, "repeated key (first at line %d)", l1);
    }
    const char *name = jsonx_get_str(j, "name");
    p->name = xstrdup(name ? name : path);
    const char *desc = jsonx_get_str(j, "description");
    p->description = desc ? xstrdup(desc) : NULL;
    const cJSON *cmd = jsonx_get(j, "command");
    if (!cmd)
        lerr(&c, "", "\"command\" is missing: the aggregator's command line, a list of strings");
    p->command = string_list(&c, cmd, "command", false);
    if (cmd && !p->command[0])
        lerr(&c, "command", "is empty");
    const cJSON *cfg = jsonx_get(j, "config");
    if (cfg) {
        if (!cJSON_IsObject(cfg))
            lerr(&c, "config", "must be an object (DI-engine's {\"slave\", \"master\", \"learner\"})");
        p->config = jsonx_dup(cfg);
        check_config(&c, cfg, "config");
    }
    p->env = string_list(&c, jsonx_get(j, "env"), "env", true);
    const cJSON *ke = jsonx_get(j, "kubernetes_env");
    if (ke) {
        p->k8s_env = string_list(&c, ke, "kubernetes_env", true);
    } else {
        /* DI-engine's own variables, naming the mock operator */
        p->k8s_env = util_strv_new();
        util_strv_push(&p->k8s_env, xstrdup("KUBERNETES_SERVER_URL=http://127.0.0.1:{operator_port}"));
        util_strv_push(&p->k8s_env, xstrdup("KUBERNETES_POD_NAMESPACE={namespace}"));
        util_strv_push(&p->k8s_env, xstrdup("KUBERNETES_POD_NAME={pod_name}"));
    }
    p->requires_env = string_list(&c, jsonx_get(j, "requires_env"), "requires_env", false);
    const char *ready = jsonx_get_str(j, "ready");
    if (jsonx_get(j, "ready") && !ready)
        lerr(&c, "ready", "must be \"stdout_line\" or \"slave_port\"");
    if (!ready || strcmp(ready, "stdout_line") == 0)
        p->ready = SC_READY_LINE;
    else if (strcmp(ready, "slave_port") == 0)
        p->ready = SC_READY_SLAVE_PORT;
    else
        lerr(&c, "ready", "\"%s\": must be \"stdout_line\" (a {\"ready\"...} line) or \"slave_port\" (it answers HTTP)",
             ready);
    const cJSON *offers = jsonx_get(j, "offers");
    if (offers && !cJSON_IsArray(offers))
        lerr(&c, "offers", "must be a list of \"metrics\", \"events\"");
    int oi = 0;
    for (const cJSON *o = offers ? offers->child : NULL; o; o = o->next, oi++) {
        char op[32];
        snprintf(op, sizeof op, "offers[%d]", oi);
        const char *s = cJSON_IsString(o) ? o->valuestring : "";
        if (strcmp(s, "metrics") == 0)
            p->metrics = true;
        else if (strcmp(s, "events") == 0)
            p->events = true;
        else {
            const char *near = suggest_nearest(s, OFFERS, (size_t)-1);
            lerr(&c, op, "\"%s\" is not offered by any aggregator we know%s%s%s (known: metrics, events)", s,
                 near ? " (did you mean '" : "", near ? near : "", near ? "'?)" : "");
        }
    }
    const cJSON *close = jsonx_get(j, "close_task");
    if (close && !cJSON_IsBool(close))
        lerr(&c, "close_task", "must be true or false");
    p->close_task = !close || cJSON_IsTrue(close);
    const char *tm = jsonx_get_str(j, "timings");
    if (jsonx_get(j, "timings") && (!tm || (strcmp(tm, "scaled") != 0 && strcmp(tm, "fixed") != 0)))
        lerr(&c, "timings", "must be \"scaled\" (it takes the scenario's timings through placeholders) or \"fixed\"");
    p->fixed_timings = tm && strcmp(tm, "fixed") == 0;
    cJSON_Delete(j);
    jpos_free(pos);
    if (c.failed) {
        sc_profile_free(p);
        return -1;
    }
    *out = p;
    return 0;
}

void sc_profile_free(sc_profile *p)
{
    if (!p)
        return;
    free(p->name);
    free(p->path);
    free(p->dir);
    free(p->description);
    util_strv_free(p->command);
    cJSON_Delete(p->config);
    util_strv_free(p->env);
    util_strv_free(p->k8s_env);
    util_strv_free(p->requires_env);
    free(p);
}

const char *sc_profile_missing_env(const sc_profile *p)
{
    static char why[256];
    for (size_t i = 0; p && p->requires_env && p->requires_env[i]; i++) {
        const char *e = getenv(p->requires_env[i]);
        if (!e || !*e) {
            snprintf(why, sizeof why, "the aggregator profile %s needs %s set in the environment", p->name,
                     p->requires_env[i]);
            return why;
        }
    }
    return NULL;
}

char **sc_profile_argv(const sc_profile *p, const sc_profile_vars *v)
{
    char **out = util_strv_new();
    for (size_t i = 0; p->command[i]; i++) {
        if (strcmp(p->command[i], "{learners}") == 0) {
            for (size_t l = 0; l < v->nlearners; l++)
                util_strv_push(&out,
                               xasprintf("%s=%s:%d", v->learner_ids[l], v->learner_hosts[l], v->learner_ports[l]));
            continue;
        }
        char *bad;
        util_strv_push(&out, expand(p, v, p->command[i], &bad));
        free(bad);
    }
    return out;
}

static bool numeric_placeholder(const char *s)
{
    static const char *const nums[] = {"{slave_port}",        "{master_port}",       "{metrics_port}",
                                       "{operator_port}",     "{time_scale}",        "{heartbeat_span_ms}",
                                       "{heartbeat_tolerance_ms}", "{max_retry_ms}", "{retry_interval_ms}",
                                       "{sync_period_ms}",    "{task_deadline_ms}",  NULL};
    for (size_t i = 0; nums[i]; i++)
        if (strcmp(s, nums[i]) == 0)
            return true;
    return false;
}

static cJSON *expand_json(const sc_profile *p, const sc_profile_vars *v, const cJSON *t)
{
    if (cJSON_IsString(t)) {
        if (strcmp(t->valuestring, "{learners}") == 0) {
            cJSON *o = cJSON_CreateObject();
            for (size_t l = 0; l < v->nlearners; l++) {
                cJSON *a = cJSON_CreateArray();
                cJSON_AddItemToArray(a, cJSON_CreateString(v->learner_ids[l]));
                cJSON_AddItemToArray(a, cJSON_CreateString(v->learner_hosts[l]));
                cJSON_AddItemToArray(a, jsonx_new_i64(v->learner_ports[l]));
                cJSON_AddItemToObject(o, v->learner_ids[l], a);
            }
            return o;
        }
        char *bad;
        char *s = expand(p, v, t->valuestring, &bad);
        free(bad);
        cJSON *out;
        if (!numeric_placeholder(t->valuestring)) {
            out = cJSON_CreateString(s);
        } else {
            double d = strtod(s, NULL);
            out = d == (double)(long long)d ? jsonx_new_i64((long long)d) : jsonx_new_double(d);
        }
        free(s);
        return out;
    }
    if (cJSON_IsArray(t) || cJSON_IsObject(t)) {
        cJSON *o = cJSON_IsArray(t) ? cJSON_CreateArray() : cJSON_CreateObject();
        for (const cJSON *it = t->child; it; it = it->next) {
            cJSON *x = expand_json(p, v, it);
            if (it->string)
                cJSON_AddItemToObject(o, it->string, x);
            else
                cJSON_AddItemToArray(o, x);
        }
        return o;
    }
    return jsonx_dup(t);
}

char *sc_profile_config_text(const sc_profile *p, const sc_profile_vars *v)
{
    if (!p->config)
        return NULL;
    cJSON *j = expand_json(p, v, p->config);
    char *t = cJSON_Print(j);
    cJSON_Delete(j);
    return t;
}

char **sc_profile_env(const sc_profile *p, const sc_profile_vars *v, bool k8s)
{
    char **out = util_strv_new();
    for (int pass = 0; pass < (k8s ? 2 : 1); pass++)
        for (char **e = pass ? p->k8s_env : p->env; e && *e; e++) {
            char *bad;
            util_strv_push(&out, expand(p, v, *e, &bad));
            free(bad);
        }
    return out;
}
