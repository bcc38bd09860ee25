/* mo_http: request/reply records for the mock operator's handlers. */
#include "mo_http.h"

#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "xalloc.h"

static bool collect_param(void *data, const char *k, const char *v)
{
    mo_request *req = data;
    if (req->nparams >= MO_PARAMS_MAX) {
        req->params_truncated = true;
        return false;
    }
    req->params[req->nparams].key = xstrdup(k ? k : "");
    req->params[req->nparams].value = v ? xstrdup(v) : NULL;
    req->nparams++;
    return true;
}

void mo_request_from_hs(hs_request *r, mo_request *out)
{
    memset(out, 0, sizeof *out);
    out->method = hs_method(r);
    out->path = hs_path(r);
    out->body = hs_body(r);
    out->body_len = hs_body_len(r);
    out->params = xcalloc(MO_PARAMS_MAX, sizeof *out->params);
    hs_query_foreach(r, collect_param, out);
}

void mo_request_release(mo_request *req)
{
    for (size_t i = 0; i < req->nparams; i++) {
        free(req->params[i].key);
        free(req->params[i].value);
    }
    free(req->params);
    req->params = NULL;
    req->nparams = 0;
}

const char *mo_request_param(const mo_request *req, const char *key, bool *present)
{
    for (size_t i = 0; i < req->nparams; i++)
        if (strcmp(req->params[i].key, key) == 0) {
            if (present)
                *present = true;
            return req->params[i].value;
        }
    if (present)
        *present = false;
    return NULL;
}

void mo_reply_envelope(mo_reply *out, int status, bool success, int code, const char *message,
                       cJSON *data, const char *content_type)
{
    out->status = status;
    out->content_type = content_type;
    out->body = proto_envelope(success, code, message, data);
    out->len = strlen(out->body);
    cJSON_Delete(data);
}

void mo_reply_text(mo_reply *out, int status, const char *content_type, const char *text)
{
    out->status = status;
    out->content_type = content_type;
    out->len = strlen(text);
    out->body = xstrndup(text, out->len);
}

void mo_reply_send(hs_request *r, mo_reply *rep)
{
    hs_reply(r, rep->status, rep->content_type, rep->body, rep->len);
    rep->body = NULL;
    rep->len = 0;
}

void mo_reply_release(mo_reply *rep)
{
    free(rep->body);
    rep->body = NULL;
    rep->len = 0;
}
