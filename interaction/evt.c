/* evt: typed events as JSON lines (see evt.h). */
#include "evt.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ilog.h"
#include "jsonx.h"
#include "proto.h"
#include "util.h"
#include "xalloc.h"

#define FLUSH_BYTES (64u * 1024u)
#define FLUSH_MS 1000u
#define DEFAULT_MAX_BYTES (64u * 1024u * 1024u)

static const struct {
    const char *name;
    uint64_t mask;
    const char *doc;
} g_events[EVT_COUNT] = {
#define EVT_X_TABLE(ename, fields, doc) {#ename, (fields), doc},
    EVT_LIST(EVT_X_TABLE)
#undef EVT_X_TABLE
};

static const struct {
    const char *name;
    evt_type type;
    const char *doc;
} g_fields[EVT_FIELD_COUNT] = {
#define EVT_X_FTABLE(fname, type, doc) {#fname, EVT_##type, doc},
    EVT_FIELDS(EVT_X_FTABLE)
#undef EVT_X_FTABLE
};

const char *evt_name(evt_id id) { return (unsigned)id < EVT_COUNT ? g_events[id].name : "?"; }
const char *evt_doc(evt_id id) { return (unsigned)id < EVT_COUNT ? g_events[id].doc : ""; }
uint64_t evt_mask(evt_id id) { return (unsigned)id < EVT_COUNT ? g_events[id].mask : 0; }
const char *evt_field_name(evt_field_id f) { return (unsigned)f < EVT_FIELD_COUNT ? g_fields[f].name : "?"; }
evt_type evt_field_type(evt_field_id f) { return (unsigned)f < EVT_FIELD_COUNT ? g_fields[f].type : EVT_STR; }
const char *evt_field_doc(evt_field_id f) { return (unsigned)f < EVT_FIELD_COUNT ? g_fields[f].doc : ""; }

static const struct {
    const char *name;
    const char *doc;
} g_causes[EVT_CAUSE_COUNT] = {
#define EVT_X_CTABLE(cname, doc) {#cname, doc},
    EVT_CAUSES(EVT_X_CTABLE)
#undef EVT_X_CTABLE
};

const char *evt_cause_name(evt_cause c)
{
    return (unsigned)c < EVT_CAUSE_COUNT ? g_causes[c].name : g_causes[EVT_CAUSE_other].name;
}
const char *evt_cause_doc(evt_cause c) { return (unsigned)c < EVT_CAUSE_COUNT ? g_causes[c].doc : ""; }

int evt_cause_lookup(const char *word)
{
    for (int i = 0; i < EVT_CAUSE_COUNT; i++)
        if (strcmp(g_causes[i].name, word) == 0)
            return i;
    return -1;
}

int evt_lookup(const char *name)
{
    for (int i = 0; i < EVT_COUNT; i++)
        if (strcmp(g_events[i].name, name) == 0)
            return i;
    return -1;
}

/* ---- the sink ---- */

typedef struct {
    bool on;
    ev_loop *loop;
    char *path, *rotated, *process;
    char run[PROTO_UUID_LEN + 1];
    int fd;
    size_t max_bytes;
    unsigned flush_ms;
    size_t file_bytes; /* in the current file */
    xbuf pending;
    ev_timer *flush_timer;
    uint64_t start_ms;
    int64_t seq;
    bool warned;
    evt_stats stats;
    evt_hook hook;
    void *hook_data;
} sink;

static sink g_sink = {.fd = -1};

bool evt_enabled(void) { return g_sink.on; }

void evt_set_hook(evt_hook hook, void *data)
{
    g_sink.hook = hook;
    g_sink.hook_data = data;
}

evt_stats evt_get_stats(void) { return g_sink.stats; }

static void write_error(const char *what, int e)
{
    g_sink.stats.write_errors++;
    if (!g_sink.warned) {
        g_sink.warned = true;
        LOG_WARN(NULL, "events file %s: %s: %s (events are dropped while this lasts; counted in metrics)",
                 g_sink.path, what, strerror(e));
    }
}

static int open_file(void)
{
    g_sink.fd = open(g_sink.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_APPEND, 0644);
    g_sink.file_bytes = 0;
    return g_sink.fd >= 0 ? 0 : -1;
}

/* Starts a new file (the current one becomes FILE.1). */
static void rotate(void)
{
    if (g_sink.fd >= 0) {
        close(g_sink.fd);
        g_sink.fd = -1;
        if (rename(g_sink.path, g_sink.rotated) != 0)
            write_error("rename to .1", errno);
        g_sink.stats.rotations++;
    }
    if (open_file() != 0)
        write_error("open", errno);
}

static bool write_all(const char *p, size_t len)
{
    size_t off = 0;
    bool ok = true;
    while (g_sink.fd >= 0 && off < len) {
        ssize_t n = write(g_sink.fd, p + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            write_error("write", n < 0 ? errno : ENOSPC);
            ok = false;
            break;
        }
        off += (size_t)n;
    }
    g_sink.stats.bytes += off;
    g_sink.file_bytes += off;
    return ok;
}

/* Writes the pending lines, each file at most half the cap (so the current
 * and the rotated file hold at most max_bytes): the whole lines that fit go
 * to the current file, then a new file is started for the rest. A line
 * longer than half the cap gets a file of its own. */
static void write_pending(void)
{
    size_t half = g_sink.max_bytes / 2;
    const char *p = g_sink.pending.data;
    size_t left = g_sink.pending.len;
    if (g_sink.fd < 0 && left)
        rotate();
    while (left && g_sink.fd >= 0) {
        size_t room = g_sink.file_bytes < half ? half - g_sink.file_bytes : 0;
        size_t take = 0;
        while (take < left) {
            const char *nl = memchr(p + take, '\n', left - take);
            size_t end = nl ? (size_t)(nl - p) + 1 : left;
            if (end > room && (take > 0 || g_sink.file_bytes > 0))
                break;
            take = end;
            if (take >= room)
                break;
        }
        if (take == 0) {
            rotate();
            continue;
        }
        if (!write_all(p, take))
            break; /* the rest is dropped (counted, warned once) */
        p += take;
        left -= take;
        if (left)
            rotate();
    }
    g_sink.pending.len = 0;
}

static void on_flush_timer(ev_loop *loop, void *data)
{
    (void)loop;
    (void)data;
    g_sink.flush_timer = NULL;
    write_pending();
}

void evt_flush(void)
{
    if (!g_sink.on)
        return;
    if (g_sink.flush_timer) {
        ev_timer_stop(g_sink.loop, g_sink.flush_timer);
        g_sink.flush_timer = NULL;
    }
    write_pending();
}

void evt_close(void)
{
    if (!g_sink.on)
        return;
    evt_flush();
    if (g_sink.fd >= 0)
        close(g_sink.fd);
    xbuf_free(&g_sink.pending);
    free(g_sink.path);
    free(g_sink.rotated);
    free(g_sink.process);
    evt_hook hook = g_sink.hook;
    void *hook_data = g_sink.hook_data;
    g_sink = (sink){.fd = -1, .hook = hook, .hook_data = hook_data};
}

/* ---- formatting ---- */

/* Appends s as a JSON string; bytes that are not UTF-8 become U+FFFD. */
static void put_string(xbuf *b, const char *s)
{
    xbuf_append(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            xbuf_append(b, esc, 2);
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            xbuf_printf(b, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            const unsigned char *q = p;
            while (*q >= 0x20 && *q < 0x7f && *q != '"' && *q != '\\')
                q++;
            xbuf_append(b, p, (size_t)(q - p));
            p = q;
        } else {
            size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c <= 0xdf ? 2 : 0;
            bool ok = n > 0;
            for (size_t i = 1; ok && i < n; i++)
                ok = (p[i] & 0xc0) == 0x80;
            if (ok && n == 3)
                ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
            if (ok && n == 4)
                ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
            if (ok) {
                xbuf_append(b, p, n);
                p += n;
            } else {
                xbuf_puts(b, "\\ufffd");
                p++;
            }
        }
    }
    xbuf_append(b, "\"", 1);
}

static void put_json(xbuf *b, const cJSON *v)
{
    if (!v) {
        xbuf_puts(b, "null");
        return;
    }
    char *s = jsonx_print(v);
    xbuf_puts(b, s);
    free(s);
}

static void put_double(xbuf *b, double d)
{
    if (!isfinite(d))
        xbuf_puts(b, "null");
    else
        xbuf_printf(b, "%.3f", d);
}

static void put_field(xbuf *b, evt_field_id f, const evt_fields *v)
{
    xbuf_printf(b, ", \"%s\": ", g_fields[f].name);
    switch (f) {
#define EVT_X_PUT_STR(x) (x) ? put_string(b, (x)) : xbuf_puts(b, "null")
#define EVT_X_PUT_INT(x) xbuf_printf(b, "%" PRId64, (x))
#define EVT_X_PUT_DBL(x) put_double(b, (x))
#define EVT_X_PUT_JSON(x) put_json(b, (x))
#define EVT_X_PUT(fname, type, doc)                                                                     \
    case EVT_F_##fname:                                                                                 \
        EVT_X_PUT_##type(v->fname);                                                                     \
        break;
        EVT_FIELDS(EVT_X_PUT)
#undef EVT_X_PUT
    default:
        xbuf_puts(b, "null");
    }
}

static void put_time(xbuf *b)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    xbuf_printf(b, "\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\"", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
                tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000);
}

void evt_emit(evt_id id, const evt_fields *f)
{
    if (!g_sink.on || (unsigned)id >= EVT_COUNT)
        return;
    xbuf *b = &g_sink.pending;
    size_t start = b->len;
    xbuf_printf(b, "{\"event\": \"%s\", \"v\": %d, \"seq\": %" PRId64 ", \"t_ms\": %" PRIu64 ", \"time\": ",
                g_events[id].name, EVT_SCHEMA_VERSION, g_sink.seq++, ev_now_ms() - g_sink.start_ms);
    put_time(b);
    xbuf_puts(b, ", \"process\": ");
    put_string(b, g_sink.process);
    xbuf_printf(b, ", \"run\": \"%s\"", g_sink.run);
    uint64_t mask = g_events[id].mask;
    for (int i = 0; i < EVT_FIELD_COUNT; i++)
        if (mask & (UINT64_C(1) << i))
            put_field(b, (evt_field_id)i, f);
    xbuf_append(b, "}\n", 2);
    g_sink.stats.lines++;
    if (g_sink.hook)
        g_sink.hook(g_sink.hook_data, id, f, b->data + start, b->len - start - 1);
    if (!g_sink.loop || b->len >= FLUSH_BYTES)
        evt_flush();
    else if (!g_sink.flush_timer)
        g_sink.flush_timer = ev_timer_start(g_sink.loop, g_sink.flush_ms, on_flush_timer, NULL);
}

int evt_init(ev_loop *loop, const evt_opts *o, char *err, size_t errlen)
{
    evt_close();
    const char *path = o->path, *process = o->process;
    size_t max_bytes = o->max_bytes;
    if (!path)
        return 0;
    g_sink.path = xstrdup(path);
    g_sink.rotated = xasprintf("%s.1", path);
    g_sink.process = xstrdup(process ? process : "?");
    g_sink.max_bytes = max_bytes ? max_bytes : DEFAULT_MAX_BYTES;
    if (g_sink.max_bytes < 4096)
        g_sink.max_bytes = 4096;
    if (open_file() != 0) {
        snprintf(err, errlen, "cannot open the events file %s: %s", path, strerror(errno));
        free(g_sink.path);
        free(g_sink.rotated);
        free(g_sink.process);
        g_sink = (sink){.fd = -1, .hook = g_sink.hook, .hook_data = g_sink.hook_data};
        return -1;
    }
    /* A stale FILE.1 from an earlier run would mix two runs' lines. */
    unlink(g_sink.rotated);
    if (proto_uuid4(g_sink.run) != 0)
        snprintf(g_sink.run, sizeof g_sink.run, "pid-%ld", (long)getpid());
    g_sink.loop = o->each_line ? NULL : loop;
    g_sink.flush_ms = o->flush_ms ? o->flush_ms : FLUSH_MS;
    g_sink.start_ms = ev_now_ms();
    g_sink.on = true;
    EVT_EMIT(started, .version = DILEARN_VERSION, .pid = (int64_t)getpid(), .config = o->config);
    return 0;
}

/* ---- reading ---- */

int evt_parse_line(const char *line, size_t len, evt_record *out, char *err, size_t errlen)
{
    *out = (evt_record){0};
    char perr[256];
    cJSON *t = jsonx_parse(line, len, perr, sizeof perr);
    if (!t) {
        snprintf(err, errlen, "not JSON: %s", perr);
        return -1;
    }
    if (!cJSON_IsObject(t)) {
        snprintf(err, errlen, "an event line must be a JSON object, not %s", jsonx_type_phrase(t));
        goto fail;
    }
    const char *name = jsonx_get_str(t, "event");
    if (!name) {
        snprintf(err, errlen, "no \"event\" name (a string)");
        goto fail;
    }
    int64_t v;
    if (!jsonx_get_i64(jsonx_get(t, "v"), &v)) {
        snprintf(err, errlen, "no schema version \"v\" (an integer)");
        goto fail;
    }
    if (v > EVT_SCHEMA_VERSION || v < 1) {
        snprintf(err, errlen, "schema version %" PRId64 " is %s than this program's %d", v,
                 v > EVT_SCHEMA_VERSION ? "newer" : "older", EVT_SCHEMA_VERSION);
        goto fail;
    }
    int id = evt_lookup(name);
    if (id < 0) {
        snprintf(err, errlen, "unknown event \"%s\"", name);
        goto fail;
    }
    double t_ms;
    if (!jsonx_get_double(jsonx_get(t, "t_ms"), &t_ms)) {
        snprintf(err, errlen, "no \"t_ms\" (a number)");
        goto fail;
    }
    int64_t seq = -1;
    jsonx_get_i64(jsonx_get(t, "seq"), &seq);
    uint64_t mask = g_events[id].mask;
    for (int i = 0; i < EVT_FIELD_COUNT; i++) {
        if (!(mask & (UINT64_C(1) << i)))
            continue;
        const cJSON *fv = cJSON_GetObjectItemCaseSensitive(t, g_fields[i].name);
        if (!fv) {
            snprintf(err, errlen, "%s: missing field \"%s\"", name, g_fields[i].name);
            goto fail;
        }
        if (cJSON_IsNull(fv) || g_fields[i].type == EVT_JSON)
            continue;
        bool ok = g_fields[i].type == EVT_STR   ? cJSON_IsString(fv)
                  : g_fields[i].type == EVT_INT ? jsonx_get_i64(fv, &(int64_t){0})
                                                : jsonx_is_number(fv);
        if (ok && i == EVT_F_cause && evt_cause_lookup(fv->valuestring) < 0) {
            snprintf(err, errlen, "%s: cause \"%.40s\" is not a word of the list", name, fv->valuestring);
            goto fail;
        }
        if (!ok) {
            snprintf(err, errlen, "%s: field \"%s\" should be %s, not %s", name, g_fields[i].name,
                     g_fields[i].type == EVT_STR ? "a string" : g_fields[i].type == EVT_INT ? "an integer" : "a number",
                     jsonx_type_phrase(fv));
            goto fail;
        }
    }
    out->tree = t;
    out->id = (evt_id)id;
    out->v = (int)v;
    out->seq = seq;
    out->t_ms = t_ms;
    out->process = jsonx_get_str(t, "process");
    out->run = jsonx_get_str(t, "run");
    if (!out->process)
        out->process = "";
    if (!out->run)
        out->run = "";
    return 0;
fail:
    cJSON_Delete(t);
    return -1;
}

void evt_record_free(evt_record *r)
{
    cJSON_Delete(r->tree);
    *r = (evt_record){0};
}

static const cJSON *field_item(const evt_record *r, evt_field_id f)
{
    if (!r->tree || (unsigned)f >= EVT_FIELD_COUNT)
        return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(r->tree, g_fields[f].name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

const char *evt_str(const evt_record *r, evt_field_id f)
{
    const cJSON *v = field_item(r, f);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

bool evt_int(const evt_record *r, evt_field_id f, int64_t *out) { return jsonx_get_i64(field_item(r, f), out); }

bool evt_dbl(const evt_record *r, evt_field_id f, double *out) { return jsonx_get_double(field_item(r, f), out); }

const cJSON *evt_json(const evt_record *r, evt_field_id f) { return field_item(r, f); }

/* ---- command line ---- */

bool evt_cli_takes_value(const char *flag)
{
    return strcmp(flag, "--events") == 0 || strcmp(flag, "--events-max-bytes") == 0 ||
           strcmp(flag, "--events-flush-ms") == 0;
}

int evt_cli_flag(evt_opts *o, const char *flag, const char *value, char *err, size_t errlen)
{
    int64_t v;
    if (strcmp(flag, "--events-each-line") == 0) {
        o->each_line = true;
    } else if (strcmp(flag, "--events") == 0) {
        if (!value || !*value) {
            snprintf(err, errlen, "--events: the file name is empty");
            return -1;
        }
        o->path = value;
    } else if (strcmp(flag, "--events-max-bytes") == 0) {
        if (!value || !util_parse_i64(value, 4096, INT64_C(1) << 50, &v)) {
            snprintf(err, errlen, "--events-max-bytes: '%.64s' is not an integer in 4096..2^50", value ? value : "");
            return -1;
        }
        o->max_bytes = (size_t)v;
    } else if (strcmp(flag, "--events-flush-ms") == 0) {
        if (!value || !util_parse_i64(value, 1, 3600000, &v)) {
            snprintf(err, errlen, "--events-flush-ms: '%.64s' is not an integer in 1..3600000", value ? value : "");
            return -1;
        }
        o->flush_ms = (unsigned)v;
    } else {
        return 0;
    }
    return 1;
}
