/* mc_script: script files and the default run's task list. */
#include "mc_script.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "jsonx.h"
#include "mc_items.h"
#include "xalloc.h"

#define NAME_MAX_LEN 200
#define PATH_SEG_MAX 255

const char *mcs_status_name(mcs_status s)
{
    switch (s) {
    case MCS_COMPLETED:
        return "completed";
    case MCS_FAILED:
        return "failed";
    case MCS_START_FAILED:
        return "start_failed";
    case MCS_ANY:
        return "any";
    }
    return "?";
}

static void task_free(mcs_task *t)
{
    free(t->name);
    cJSON_Delete(t->data);
    free(t->expect.message_contains);
    cJSON_Delete(t->expect.fields);
}

void mcs_free(mcs_script *s)
{
    for (size_t i = 0; i < s->n; i++)
        task_free(&s->tasks[i]);
    free(s->tasks);
    memset(s, 0, sizeof *s);
}

/* ---- validation ---- */

typedef struct {
    const char *file;
    char *err;
    size_t errlen;
} vctx;

static int fail(const vctx *v, const char *where, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(const vctx *v, const char *where, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    snprintf(v->err, v->errlen, "%s: %s%s%s", v->file, where, *where ? ": " : "", msg);
    return -1;
}

/* Rejects unknown and duplicate keys. known is a NULL-terminated list. */
static int check_keys(const vctx *v, const char *where, const cJSON *obj, const char *const *known)
{
    for (const cJSON *m = obj->child; m; m = m->next) {
        if (jsonx_get(obj, m->string) != m)
            return fail(v, where, "key \"%s\" appears twice", m->string);
        bool ok = false;
        for (const char *const *k = known; *k; k++)
            ok |= strcmp(*k, m->string) == 0;
        if (!ok) {
            char list[300] = "";
            size_t used = 0;
            for (const char *const *k = known; *k; k++) {
                int w = snprintf(list + used, sizeof list - used, "%s%s", k == known ? "" : ", ", *k);
                if (w < 0 || (size_t)w >= sizeof list - used)
                    break;
                used += (size_t)w;
            }
            return fail(v, where, "unknown key \"%.100s\" (known keys: %s)", m->string, list);
        }
    }
    return 0;
}

static int get_bool(const vctx *v, const char *where, const cJSON *obj, const char *key, bool *out)
{
    const cJSON *b = jsonx_get(obj, key);
    if (!b)
        return 0;
    if (!cJSON_IsBool(b)) {
        char w[160];
        snprintf(w, sizeof w, "%s%s%s", where, *where ? "." : "", key);
        return fail(v, w, "must be true or false, not %s", jsonx_type_phrase(b));
    }
    *out = cJSON_IsTrue(b);
    return 0;
}

static bool valid_path(const char *p)
{
    if (!*p)
        return false;
    size_t seg = 0;
    for (; *p; p++) {
        if (*p == '.') {
            if (seg == 0)
                return false;
            seg = 0;
        } else if (++seg > PATH_SEG_MAX) {
            return false;
        }
    }
    return seg > 0;
}

static int parse_expect(const vctx *v, const char *where, const cJSON *e, mcs_task *t)
{
    static const char *const keys[] = {"status", "message_contains", "fields", "latency_ms_max", NULL};
    if (!cJSON_IsObject(e))
        return fail(v, where, "must be an object, not %s", jsonx_type_phrase(e));
    if (check_keys(v, where, e, keys) < 0)
        return -1;
    char w[256];
    const cJSON *st = jsonx_get(e, "status");
    if (st) {
        snprintf(w, sizeof w, "%s.status", where);
        const char *s = cJSON_IsString(st) ? st->valuestring : NULL;
        if (s && strcmp(s, "completed") == 0)
            t->expect.status = MCS_COMPLETED;
        else if (s && strcmp(s, "failed") == 0)
            t->expect.status = MCS_FAILED;
        else if (s && strcmp(s, "start_failed") == 0)
            t->expect.status = MCS_START_FAILED;
        else if (s && strcmp(s, "any") == 0)
            t->expect.status = MCS_ANY;
        else if (s)
            return fail(v, w, "must be one of \"completed\", \"failed\", \"start_failed\", \"any\", not \"%.60s\"",
                        s);
        else
            return fail(v, w, "must be a string (\"completed\", \"failed\", \"start_failed\" or \"any\"), not %s",
                        jsonx_type_phrase(st));
    }
    const cJSON *mc = jsonx_get(e, "message_contains");
    if (mc) {
        snprintf(w, sizeof w, "%s.message_contains", where);
        if (!cJSON_IsString(mc))
            return fail(v, w, "must be a string, not %s", jsonx_type_phrase(mc));
        if (!mc->valuestring[0])
            return fail(v, w, "must not be empty");
        t->expect.message_contains = xstrdup(mc->valuestring);
    }
    const cJSON *fl = jsonx_get(e, "fields");
    if (fl) {
        snprintf(w, sizeof w, "%s.fields", where);
        if (!cJSON_IsObject(fl))
            return fail(v, w, "must be an object of \"dotted.path\": value, not %s", jsonx_type_phrase(fl));
        for (const cJSON *m = fl->child; m; m = m->next) {
            if (jsonx_get(fl, m->string) != m)
                return fail(v, w, "path \"%.100s\" appears twice", m->string);
            if (!valid_path(m->string))
                return fail(v, w, "\"%.100s\" is not a dotted path (non-empty segments of at most %d characters, "
                                  "like \"info.learner_step\")",
                            m->string, PATH_SEG_MAX);
        }
        t->expect.fields = jsonx_dup(fl);
    }
    const cJSON *lat = jsonx_get(e, "latency_ms_max");
    if (lat) {
        snprintf(w, sizeof w, "%s.latency_ms_max", where);
        double d;
        if (!jsonx_get_double(lat, &d) || !isfinite(d) || d <= 0)
            return fail(v, w, "must be a positive number of milliseconds");
        t->expect.latency_ms_max = d;
    }
    return 0;
}

/* An optional member key of j: milliseconds from lo to MCS_DEADLINE_MAX_MS
 * into *out (left alone when absent). 0 or -1 (reported). */
static int get_ms(const vctx *v, const char *where, const cJSON *j, const char *key, long lo, long *out)
{
    const cJSON *x = jsonx_get(j, key);
    if (!x)
        return 0;
    int64_t ms;
    if (!jsonx_get_i64(x, &ms) || ms < lo || ms > MCS_DEADLINE_MAX_MS) {
        char w[160];
        snprintf(w, sizeof w, "%s.%s", where, key);
        return fail(v, w, "must be an integer number of milliseconds from %ld to %ld", lo, MCS_DEADLINE_MAX_MS);
    }
    *out = (long)ms;
    return 0;
}

static int parse_task(const vctx *v, size_t i, const cJSON *j, bool seen_get_data, mcs_task *t)
{
    static const char *const keys[] = {"name", "data", "items", "expect", "deadline_ms", "delay_ms",
                                       "stop_on_failure", "comment", NULL};
    char where[64], w[160];
    snprintf(where, sizeof where, "tasks[%zu]", i);
    t->items = MCS_ITEMS_NONE;
    t->expect.status = MCS_COMPLETED;
    if (!cJSON_IsObject(j))
        return fail(v, where, "must be an object, not %s", jsonx_type_phrase(j));
    if (check_keys(v, where, j, keys) < 0)
        return -1;
    const cJSON *name = jsonx_get(j, "name");
    snprintf(w, sizeof w, "%s.name", where);
    if (!name)
        return fail(v, where, "\"name\" is missing (the task's name, like \"learner_learn_task\")");
    if (!cJSON_IsString(name))
        return fail(v, w, "must be a string, not %s", jsonx_type_phrase(name));
    if (!name->valuestring[0] || strlen(name->valuestring) > NAME_MAX_LEN)
        return fail(v, w, "must be 1 to %d characters", NAME_MAX_LEN);
    t->name = xstrdup(name->valuestring);
    bool is_learn = strcmp(t->name, "learner_learn_task") == 0;

    const cJSON *data = jsonx_get(j, "data");
    if (data) {
        snprintf(w, sizeof w, "%s.data", where);
        if (!cJSON_IsObject(data))
            return fail(v, w, "must be an object of extra task data fields, not %s", jsonx_type_phrase(data));
        for (const cJSON *m = data->child; m; m = m->next)
            if (jsonx_get(data, m->string) != m)
                return fail(v, w, "key \"%.100s\" appears twice", m->string);
        if (jsonx_get(data, "name"))
            return fail(v, w, "must not hold \"name\": the task's name is %s.name", where);
        t->data = jsonx_dup(data);
    }
    const cJSON *items = jsonx_get(j, "items");
    snprintf(w, sizeof w, "%s.items", where);
    if (items) {
        int64_t n;
        if (cJSON_IsString(items) && strcmp(items->valuestring, "batch") == 0)
            t->items = MCS_ITEMS_BATCH;
        else if (jsonx_get_i64(items, &n) && n >= 0 && n <= (int64_t)MCI_ITEMS_MAX)
            t->items = (long)n;
        else
            return fail(v, w, "must be an integer from 0 to %u or \"batch\"", MCI_ITEMS_MAX);
        if (data && jsonx_get(data, "data"))
            return fail(v, w, "cannot be used with %s.data.data: give the list or let items make it", where);
    } else if (is_learn && !(data && jsonx_get(data, "data"))) {
        t->items = MCS_ITEMS_BATCH;
    }
    if (t->items == MCS_ITEMS_BATCH && !seen_get_data)
        return fail(v, items ? w : where,
                    "%s needs the batch_size of a learner_get_data_task, but none comes before it: put one "
                    "before, or give \"items\": n",
                    items ? "\"batch\"" : "learner_learn_task without \"items\"");
    const cJSON *e = jsonx_get(j, "expect");
    if (e) {
        snprintf(w, sizeof w, "%s.expect", where);
        if (parse_expect(v, w, e, t) < 0)
            return -1;
    }
    if (get_ms(v, where, j, "deadline_ms", 1, &t->deadline_ms) < 0 ||
        get_ms(v, where, j, "delay_ms", 0, &t->delay_ms) < 0)
        return -1;
    if (get_bool(v, where, j, "stop_on_failure", &t->stop_on_failure) < 0)
        return -1;
    /* A get-data that completes must give a usable batch size, unless the
     * script states what batch_size it expects. */
    t->check_batch = strcmp(t->name, "learner_get_data_task") == 0 &&
                     !(t->expect.fields && jsonx_get(t->expect.fields, "batch_size"));
    const cJSON *c = jsonx_get(j, "comment");
    if (c && !cJSON_IsString(c)) {
        snprintf(w, sizeof w, "%s.comment", where);
        return fail(v, w, "must be a string, not %s", jsonx_type_phrase(c));
    }
    return 0;
}

int mcs_parse(const char *text, size_t len, const char *file, mcs_script *out, char *err, size_t errlen)
{
    static const char *const keys[] = {"tasks", "stop_on_failure", "comment", NULL};
    vctx v = {file, err, errlen};
    memset(out, 0, sizeof *out);
    char perr[200];
    cJSON *j = jsonx_parse(text, len, perr, sizeof perr);
    if (!j)
        return fail(&v, "", "not valid JSON: %s", perr);
    int rc = -1;
    mcs_script s = {0};
    if (!cJSON_IsObject(j)) {
        fail(&v, "", "must be a JSON object {\"tasks\": [...]}, not %s", jsonx_type_phrase(j));
        goto out;
    }
    if (check_keys(&v, "", j, keys) < 0)
        goto out;
    const cJSON *c = jsonx_get(j, "comment");
    if (c && !cJSON_IsString(c)) {
        fail(&v, "comment", "must be a string, not %s", jsonx_type_phrase(c));
        goto out;
    }
    if (get_bool(&v, "", j, "stop_on_failure", &s.stop_on_failure) < 0)
        goto out;
    const cJSON *tasks = jsonx_get(j, "tasks");
    if (!tasks) {
        fail(&v, "", "\"tasks\" is missing (a list of tasks)");
        goto out;
    }
    if (!cJSON_IsArray(tasks)) {
        fail(&v, "tasks", "must be a list, not %s", jsonx_type_phrase(tasks));
        goto out;
    }
    size_t n = (size_t)cJSON_GetArraySize(tasks);
    if (n == 0 || n > MCS_TASKS_MAX) {
        fail(&v, "tasks", "must hold 1 to %u tasks, not %zu", MCS_TASKS_MAX, n);
        goto out;
    }
    s.tasks = xcalloc(n, sizeof *s.tasks);
    bool seen_get_data = false;
    size_t i = 0;
    for (const cJSON *t = tasks->child; t; t = t->next, i++) {
        s.n = i + 1;
        if (parse_task(&v, i, t, seen_get_data, &s.tasks[i]) < 0)
            goto out;
        if (s.stop_on_failure)
            s.tasks[i].stop_on_failure = true;
        seen_get_data |= strcmp(s.tasks[i].name, "learner_get_data_task") == 0;
    }
    *out = s;
    s = (mcs_script){0};
    rc = 0;
out:
    mcs_free(&s);
    cJSON_Delete(j);
    return rc;
}

int mcs_load(const char *path, mcs_script *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot open the script: %s", path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fileno(fp), &st) != 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > MCS_FILE_MAX) {
        snprintf(err, errlen, "%s: not a regular file of at most %u bytes", path, MCS_FILE_MAX);
        fclose(fp);
        return -1;
    }
    size_t size = (size_t)st.st_size;
    char *buf = xmalloc(size + 1);
    size_t got = fread(buf, 1, size, fp);
    fclose(fp);
    if (got != size) {
        snprintf(err, errlen, "%s: read %zu of %zu bytes", path, got, size);
        free(buf);
        return -1;
    }
    int rc = mcs_parse(buf, size, path, out, err, errlen);
    free(buf);
    return rc;
}

static mcs_task *push(mcs_script *s, const char *name)
{
    s->tasks = xrealloc(s->tasks, (s->n + 1) * sizeof *s->tasks);
    mcs_task *t = &s->tasks[s->n++];
    memset(t, 0, sizeof *t);
    t->name = xstrdup(name);
    t->items = MCS_ITEMS_NONE;
    t->expect.status = MCS_COMPLETED;
    t->stop_on_failure = true;
    return t;
}

void mcs_default(mcs_script *out, long rounds, bool close)
{
    memset(out, 0, sizeof *out);
    out->stop_on_failure = true;
    push(out, "resource");
    push(out, "learner_start_task");
    for (long r = 0; r < rounds; r++) {
        push(out, "learner_get_data_task")->check_batch = true;
        push(out, "learner_learn_task")->items = MCS_ITEMS_BATCH;
    }
    if (close)
        push(out, "learner_close_task")->always = true;
}
