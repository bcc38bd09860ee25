/* hc_reply: caps on what a peer sends (see hc_reply.h). */
#include "hc_reply.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A declared length is trusted for the first allocation up to this much;
 * beyond it the buffer doubles as bytes really arrive. */
#define HC_PREALLOC_MAX ((size_t)1 << 20)

void hc_reply_init(hc_reply *r, size_t max_head, size_t max_body)
{
    memset(r, 0, sizeof *r);
    r->max_head = max_head;
    r->max_body = max_body;
}

void hc_reply_reset(hc_reply *r)
{
    r->head_bytes = 0;
    r->body.len = 0;
    if (r->body.data)
        r->body.data[0] = '\0';
    r->over = HC_OVER_NONE;
}

size_t hc_reply_header(hc_reply *r, const char *p, size_t n)
{
    (void)p;
    if (n > r->max_head - r->head_bytes) {
        r->over = HC_OVER_HEAD;
        return 0;
    }
    r->head_bytes += n;
    return n;
}

int hc_reply_head_done(hc_reply *r, long long declared)
{
    if (declared > 0 && (unsigned long long)declared > r->max_body) {
        r->over = HC_OVER_BODY;
        return 0;
    }
    return 1;
}

size_t hc_reply_body(hc_reply *r, const char *p, size_t n, long long declared)
{
    if (n == 0)
        return 0;
    if ((declared > 0 && (unsigned long long)declared > r->max_body) || n > r->max_body - r->body.len) {
        r->over = HC_OVER_BODY;
        return 0;
    }
    if (!r->body.data && declared > 0 && (size_t)declared >= n) {
        size_t cap = (size_t)declared < HC_PREALLOC_MAX ? (size_t)declared + 1 : HC_PREALLOC_MAX;
        r->body.data = xmalloc(cap);
        r->body.cap = cap;
    }
    xbuf_append(&r->body, p, n); /* keeps data NUL-terminated */
    return n;
}

const char *hc_reply_text(const hc_reply *r)
{
    return r->body.len ? r->body.data : "";
}

const char *hc_reply_why(const hc_reply *r, char *buf, size_t n)
{
    if (r->over == HC_OVER_HEAD)
        snprintf(buf, n,
                 "reply head over the limit of %zu bytes (status line, header lines, 1xx heads and trailers "
                 "together)",
                 r->max_head);
    else if (r->over == HC_OVER_BODY)
        snprintf(buf, n, "reply over the limit of %zu bytes", r->max_body);
    else if (n)
        buf[0] = '\0';
    return buf;
}

void hc_reply_free(hc_reply *r)
{
    xbuf_free(&r->body);
}
