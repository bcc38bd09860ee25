/* mo_server: the mock operator's API and control servers on one loop. */
#include "mo_server.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "evt.h"
#include "hs.h"
#include "ilog.h"
#include "mo_control.h"
#include "mo_fault.h"
#include "mo_http.h"
#include "mo_journal.h"
#include "util.h"
#include "xalloc.h"

/* A request whose answer waits for a delay fault's timer. */
typedef struct pending {
    struct pending *prev, *next;
    mo_server *srv;
    hs_request *req; /* deferred: valid until hs_reply() or the server stops */
    uint64_t seq;
    mo_fault_action act;
    ev_timer *timer;
} pending;

struct mo_server {
    ev_loop *loop;
    char *host;
    int port;
    hs_server *api; /* NULL while a refuse fault holds the port closed */
    int api_fd;     /* its listening socket, or -1 */
    int ctl_fd;
    hs_server *ctl;
    mo_registry *reg;
    mo_faults *faults;
    mo_journal *journal;
    mo_failed_policy policy;
    mo_control control;
    uint64_t start_ms;
    pending *pending;
};

static uint64_t since_start(const mo_server *s)
{
    return ev_now_ms() - s->start_ms;
}

static void pending_unlink(mo_server *s, pending *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        s->pending = p->next;
    if (p->next)
        p->next->prev = p->prev;
    mo_fault_action_release(&p->act);
    free(p);
}

/* Answers an API request: the real answer, or the fault's. */
static void answer(mo_server *s, hs_request *r, uint64_t seq, const mo_fault_action *act)
{
    mo_request req;
    mo_reply rep;
    mo_request_from_hs(r, &req);
    if (!act->applies || act->kind == MO_FAULT_DELAY) {
        mo_api_handle(s->reg, s->policy, &req, &rep);
    } else if (act->kind == MO_FAULT_ERROR_STATUS) {
        char msg[96];
        snprintf(msg, sizeof msg, "injected fault %" PRIu64 ": error status %d", act->id,
                 act->status);
        mo_reply_envelope(&rep, act->status, false, 1, msg, NULL, MO_API_CONTENT_TYPE);
    } else {
        mo_reply_text(&rep, 200, "text/html; charset=utf-8", act->body ? act->body : "");
    }
    mo_journal_set_answer(s->journal, seq, rep.status, since_start(s), NULL);
    EVT_EMIT(operator_request, .method = req.method, .path = req.path, .http_status = rep.status,
             .kind = act->applies ? mo_fault_kind_name(act->kind) : NULL);
    LOG_DEBUG(NULL, "api #%" PRIu64 " %s %s from %s -> %d%s%s", seq, req.method, req.path,
              hs_peer(r), rep.status, act->applies ? " fault " : "",
              act->applies ? mo_fault_kind_name(act->kind) : "");
    mo_reply_send(r, &rep);
    mo_request_release(&req);
}

static void on_delay_done(ev_loop *loop, void *data)
{
    pending *p = data;
    (void)loop;
    p->timer = NULL;
    answer(p->srv, p->req, p->seq, &p->act);
    pending_unlink(p->srv, p);
}

static void on_api(void *data, hs_request *r)
{
    mo_server *s = data;
    mo_request req;
    mo_request_from_hs(r, &req);
    uint64_t seq = mo_journal_add(s->journal, since_start(s), &req);
    mo_fault_action act;
    mo_faults_take(s->faults, req.method, req.path, &act);
    if (act.applies) {
        mo_journal_set_fault(s->journal, seq, mo_fault_kind_name(act.kind));
        char what[300];
        snprintf(what, sizeof what, "%.16s %.250s", req.method, req.path);
        EVT_EMIT(fault_fired, .kind = mo_fault_kind_name(act.kind), .count = (int64_t)act.applied,
                 .fault = (int64_t)act.id, .reason = what);
    }
    mo_request_release(&req);
    if (act.applies && act.delay_ms > 0) {
        pending *p = xcalloc(1, sizeof *p);
        p->srv = s;
        p->req = r;
        p->seq = seq;
        p->act = act;
        p->next = s->pending;
        if (p->next)
            p->next->prev = p;
        s->pending = p;
        hs_defer(r);
        p->timer = ev_timer_start(s->loop, (uint64_t)act.delay_ms, on_delay_done, p);
        LOG_DEBUG(NULL, "api #%" PRIu64 " delayed by %ld ms (fault %" PRIu64 ")", seq,
                  act.delay_ms, act.id);
        return;
    }
    answer(s, r, seq, &act);
    mo_fault_action_release(&act);
}

/* Drops every delayed request (their connections close with the server). */
static void drop_pending(mo_server *s, const char *why)
{
    while (s->pending) {
        pending *p = s->pending; /* the head: pending_unlink moves s->pending on */
        if (p->timer) // NOLINT(clang-analyzer-unix.Malloc)
            ev_timer_stop(s->loop, p->timer);
        mo_journal_set_answer(s->journal, p->seq, 0, since_start(s), why);
        pending_unlink(s, p);
    }
}

/* Starts an hs server on its own listening socket (SO_REUSEADDR only: a
 * second mock on a port in use fails). */
static hs_server *start_http(mo_server *s, int port, hs_handler handler, int *fd_out, char *err,
                             size_t errlen)
{
    int fd = util_tcp_bind(s->host, port, 128, true, err, errlen);
    if (fd < 0)
        return NULL;
    hs_config cfg;
    hs_config_init(&cfg);
    cfg.listen_fd = fd;
    cfg.body_limit = MO_BODY_LIMIT;
    hs_server *h = hs_start(s->loop, &cfg, handler, s, err, errlen);
    if (!h) {
        close(fd);
        return NULL;
    }
    *fd_out = fd;
    return h;
}

/* Stops an hs server; its listening socket is closed with it. */
static void stop_http(hs_server *h, int *fd)
{
    hs_stop(h);
    /* hs_stop() closes a socket given as listen_fd (hs.h); make sure anyway
     * (nothing can have reused the number in between: one thread). */
    if (*fd >= 0 && fcntl(*fd, F_GETFD) >= 0)
        close(*fd);
    *fd = -1;
}

static int start_api(mo_server *s, int port, char *err, size_t errlen)
{
    s->api = start_http(s, port, on_api, &s->api_fd, err, errlen);
    if (!s->api)
        return -1;
    s->port = hs_port(s->api);
    return 0;
}

static void stop_api(mo_server *s)
{
    stop_http(s->api, &s->api_fd);
    s->api = NULL;
}

static int set_listening(void *ud, bool listen, char *err, size_t errlen)
{
    mo_server *s = ud;
    if (listen && !s->api) {
        char why[256];
        if (start_api(s, s->port, why, sizeof why) < 0) {
            snprintf(err, errlen, "cannot listen again on the API port %d: %s", s->port, why);
            LOG_ERROR(NULL, "%s", err);
            return -1;
        }
        LOG_INFO(NULL, "API port %d listens again", s->port);
    } else if (!listen && s->api) {
        drop_pending(s, "dropped: the API port was closed by a refuse fault");
        stop_api(s);
        EVT_EMIT(fault_fired, .kind = "refuse", .count = 1, .fault = (int64_t)mo_faults_refuse_id(s->faults),
                 .reason = "the API port is closed");
        LOG_INFO(NULL, "API port %d closed (refuse fault)", s->port);
    }
    return 0;
}

static int api_port(void *ud, bool *listening)
{
    mo_server *s = ud;
    *listening = s->api != NULL;
    return s->port;
}

static void on_control(void *data, hs_request *r)
{
    mo_server *s = data;
    mo_request req;
    mo_reply rep;
    mo_request_from_hs(r, &req);
    mo_control_handle(&s->control, &req, &rep);
    LOG_DEBUG(NULL, "control %s %s from %s -> %d", req.method, req.path, hs_peer(r), rep.status);
    mo_reply_send(r, &rep);
    mo_request_release(&req);
}

mo_server *mo_server_new(ev_loop *loop, const mo_server_config *cfg, mo_registry *reg, char *err,
                         size_t errlen)
{
    if (cfg->port != 0 && cfg->port == cfg->control_port) {
        snprintf(err, errlen, "the API port and the control port must differ (both are %d)",
                 cfg->port);
        mo_registry_free(reg);
        return NULL;
    }
    mo_server *s = xcalloc(1, sizeof *s);
    s->loop = loop;
    s->host = xstrdup(cfg->host ? cfg->host : "127.0.0.1");
    s->api_fd = s->ctl_fd = -1;
    s->reg = reg;
    s->faults = mo_faults_new();
    s->journal = mo_journal_new(cfg->journal_limit);
    s->policy = cfg->on_failed;
    s->start_ms = ev_now_ms();
    s->control = (mo_control){.reg = s->reg,
                              .faults = s->faults,
                              .journal = s->journal,
                              .policy = &s->policy,
                              .set_listening = set_listening,
                              .api_port = api_port,
                              .ud = s};
    char why[256];
    if (start_api(s, cfg->port, why, sizeof why) < 0) {
        snprintf(err, errlen, "API port (--port): %s", why);
        mo_server_free(s);
        return NULL;
    }
    s->ctl = start_http(s, cfg->control_port, on_control, &s->ctl_fd, why, sizeof why);
    if (!s->ctl) {
        snprintf(err, errlen, "control port (--control-port): %s", why);
        mo_server_free(s);
        return NULL;
    }
    return s;
}

int mo_server_port(const mo_server *s)
{
    return s->port;
}

int mo_server_control_port(const mo_server *s)
{
    return s->ctl ? hs_port(s->ctl) : 0;
}

void mo_server_free(mo_server *s)
{
    if (!s)
        return;
    drop_pending(s, "dropped: the mock is stopping");
    if (s->api)
        stop_api(s);
    if (s->ctl)
        stop_http(s->ctl, &s->ctl_fd);
    mo_journal_free(s->journal);
    mo_faults_free(s->faults);
    mo_registry_free(s->reg);
    free(s->host);
    free(s);
}
