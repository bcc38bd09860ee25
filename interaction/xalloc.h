/* xalloc: the project's out-of-memory policy, chosen once: allocation failure
 * prints a message and aborts. Every x* function returns non-NULL. */
#ifndef XALLOC_H
#define XALLOC_H

#include <stddef.h>

void *xmalloc(size_t n);
void *xcalloc(size_t count, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
/* printf into a fresh heap string. */
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* A growable byte buffer; the caller owns .data (free it, or take it). */
typedef struct {
    char *data;
    size_t len;
    size_t cap;
} xbuf;
void xbuf_append(xbuf *b, const void *p, size_t n);
void xbuf_puts(xbuf *b, const char *s);
void xbuf_printf(xbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* NUL-terminates and returns data; the buffer is left empty. */
char *xbuf_take(xbuf *b);
void xbuf_free(xbuf *b);

#endif
