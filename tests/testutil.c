/* testutil: loop-driving helpers for tests. */
#include "testutil.h"

#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "master.h"
#include "proto.h"
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
