/* testutil: loop-driving helpers for tests. */
#include "testutil.h"
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "master.h"
#include "proto.h"
#include "util.h"
#include "xalloc.h"

bool tu_run_until(ev_loop *loop, const int *flag, long cap_ms)
{
    uint64_t end = ev_now_ms() + (uint64_t)cap_ms;
    while (!*flag) {
        uint64_t now = ev_now_ms();
        if (now >= end)
            return false;
        ev_run_once(loop, (int)(end - now));
    }
    return true;
}

bool tu_run_until_pred(ev_loop *loop, bool (*pred)(void *data), void *data, long cap_ms)
{
    uint64_t end = ev_now_ms() + (uint64_t)cap_ms;
    while (!pred(data)) {
        uint64_t now = ev_now_ms();
        if (now >= end)
            return false;
        ev_run_once(loop, (int)(end - now < 50 ? end - now : 50));
    }
    return true;
}

void tu_run_for(ev_loop *loop, long ms)
{
    uint64_t end = ev_now_ms() + (uint64_t)ms;
    for (uint64_t now = ev_now_ms(); now < end; now = ev_now_ms())
        ev_run_once(loop, (int)(end - now));
}

struct pending {
    int done;
    tu_reply *out;
};

static void on_done(void *data, const hc_result *res)
{
    struct pending *p = data;
    p->out->status = res->status;
    p->out->body = xstrndup(res->body, res->body_len);
    p->out->error = res->error ? xstrdup(res->error) : NULL;
    p->done = 1;
}

tu_reply tu_http(ev_loop *loop, hc_client *c, const char *method, const char *url, const char *token, int channel,
                 const char *body)
{
    tu_reply r = {0};
    r.code = -1;
    r.success = -1;
    struct pending p = {0, &r};
    hc_opts o;
    hc_opts_init(&o);
    o.method = method;
    o.url = url;
    o.token = token;
    o.channel = channel;
    if (body) {
        o.body = xstrdup(body);
        o.body_len = strlen(body);
    }
    o.retries = 0;
    o.timeout_ms = 10000;
    hc_req *req = hc_send(c, &o, on_done, &p);
    if (!req) {
        r.error = xstrdup("hc_send failed");
        return r;
    }
    if (!tu_run_until(loop, &p.done, 10000)) {
        hc_cancel(c, req);
        r.error = xstrdup("timed out");
        return r;
    }
    proto_reply rep;
    char err[128];
    if (r.body && proto_parse_envelope(r.body, strlen(r.body), &rep, err, sizeof err)) {
        r.code = rep.code;
        r.success = rep.success;
        r.message = rep.message ? xstrdup(rep.message) : NULL;
        cJSON_Delete(rep.tree);
    }
    return r;
}

void tu_reply_free(tu_reply *r)
{
    free(r->body);
    free(r->error);
    free(r->message);
    memset(r, 0, sizeof *r);
}

void tu_task_done(void *ud, master_task *t, proto_task_state st, cJSON **result, const char *error)
{
    tu_task_out *o = ud;
    (void)t;
    o->done++;
    o->state = st;
    o->result = *result ? jsonx_print(*result) : NULL;
    o->error = error ? xstrdup(error) : NULL;
}

void tu_task_out_free(tu_task_out *o)
{
    free(o->result);
    free(o->error);
    memset(o, 0, sizeof *o);
}

size_t tu_events_read(const char *path, evt_record **out)
{
    *out = NULL;
    size_t len = 0, n = 0;
    char *t = util_read_file(path, 16u << 20, &len, NULL);
    if (!t)
        fail_msg("%s: cannot be read", path);
    if (len && t[len - 1] != '\n')
        fail_msg("%s: the last line has no newline", path);
    for (char *line = t; *line;) {
        char *nl = strchr(line, '\n');
        *out = xrealloc(*out, (n + 1) * sizeof **out);
        char err[256];
        if (evt_parse_line(line, (size_t)(nl - line), &(*out)[n], err, sizeof err) != 0)
            fail_msg("%s:%zu: %s", path, n + 1, err);
        if ((*out)[n].seq != (int64_t)n)
            fail_msg("%s:%zu: seq %lld, expected %zu (a line lost)", path, n + 1, (long long)(*out)[n].seq, n);
        n++;
        line = nl + 1;
    }
    free(t);
    return n;
}

void tu_events_free(evt_record *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        evt_record_free(&r[i]);
    free(r);
}
