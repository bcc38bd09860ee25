/* hc_reply: what hc keeps of a reply that libcurl parsed, with hard caps.
 * libcurl hands every byte of a reply head (status line, header lines, the
 * heads of 1xx replies, the trailers after a chunk-encoded body) to
 * hc_reply_header() and every decoded body byte to hc_reply_body(); both
 * count against their caps and return 0 (libcurl then aborts the transfer)
 * once a cap is passed, so a peer can never make the reply take more than
 * max_head + max_body bytes.
 *
 * Ownership: the reply owns its body buffer (hc_reply_free).
 * Threading: none; one reply per request, on the loop's thread. */
#ifndef HC_REPLY_H
#define HC_REPLY_H

#include <stddef.h>

#include "xalloc.h"

#define HC_MAX_HEAD ((size_t)64 << 10) /* all head bytes of one reply */

enum { HC_OVER_NONE = 0, HC_OVER_HEAD, HC_OVER_BODY };

typedef struct {
    size_t max_head, max_body;
    size_t head_bytes; /* every head byte so far, 1xx heads and trailers included */
    xbuf body;         /* decoded body; NUL-terminated when non-empty */
    int over;          /* HC_OVER_*: which cap was passed */
} hc_reply;

void hc_reply_init(hc_reply *r, size_t max_head, size_t max_body);
/* Forgets what an earlier attempt received (keeps the buffer). */
void hc_reply_reset(hc_reply *r);
/* n head bytes (one line, as libcurl gives them). Returns n, or 0 past the cap. */
size_t hc_reply_header(hc_reply *r, const char *p, size_t n);
/* The final (non-1xx) head is complete; declared: its Content-Length, or
 * -1. Returns 0 if that length is over the body cap (refused before any
 * body byte comes), else 1. */
int hc_reply_head_done(hc_reply *r, long long declared);
/* n body bytes; declared: the reply's Content-Length, or -1 if it has none
 * (chunk-encoded, close-delimited). Returns n, or 0 past the cap (a declared length
 * over the cap fails at the first byte). */
size_t hc_reply_body(hc_reply *r, const char *p, size_t n, long long declared);
/* The body, NUL-terminated ("" when none). */
const char *hc_reply_text(const hc_reply *r);
/* Why the reply was refused ("" if it was not), for messages. */
const char *hc_reply_why(const hc_reply *r, char *buf, size_t n);
void hc_reply_free(hc_reply *r);

#endif
