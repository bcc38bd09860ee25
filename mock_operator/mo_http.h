/* mo_http: the request and reply records the mock operator's handlers work
 * on, independent of the HTTP server, so handlers are plain functions that
 * unit tests can call; and their conversion from / to hs requests.
 *
 * Ownership: a mo_request made by mo_request_from_hs() borrows method, path
 * and body from the hs request (valid while it is) and owns its params array
 * (copies); release it with mo_request_release(). A mo_reply owns its body
 * until mo_reply_send() hands it to the server; content_type is a static
 * string.
 * Threading: the loop's thread only. */
#ifndef MO_HTTP_H
#define MO_HTTP_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

#include "hs.h"

/* At most this many query parameters are kept from a request. */
#define MO_PARAMS_MAX 64

typedef struct {
    char *key;
    char *value; /* NULL for "?flag" */
} mo_param;

typedef struct {
    const char *method;
    const char *path;
    mo_param *params;
    size_t nparams;
    bool params_truncated; /* more than MO_PARAMS_MAX were given */
    const char *body;
    size_t body_len;
} mo_request;

typedef struct {
    int status;
    const char *content_type; /* NULL: application/json */
    char *body;
    size_t len;
} mo_reply;

void mo_request_from_hs(hs_request *r, mo_request *out);
void mo_request_release(mo_request *req);
/* The first value of a parameter (exact name), or NULL; *present tells
 * whether it was there at all (a "?flag" has a NULL value). */
const char *mo_request_param(const mo_request *req, const char *key, bool *present);

/* The protocol's envelope; data is taken over (NULL: null). */
void mo_reply_envelope(mo_reply *out, int status, bool success, int code, const char *message,
                       cJSON *data, const char *content_type);
/* A body given as text (copied). */
void mo_reply_text(mo_reply *out, int status, const char *content_type, const char *text);
/* Hands the reply to the server (the body is taken over). */
void mo_reply_send(hs_request *r, mo_reply *rep);
void mo_reply_release(mo_reply *rep);

#endif
