/* xalloc: abort-on-OOM allocation helpers and a growable buffer. */
#include "xalloc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
    fprintf(stderr, "fatal: out of memory allocating %zu bytes\n", n);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom(n);
    return p;
}

void *xcalloc(size_t count, size_t size)
{
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p)
        oom(count * size);
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom(n);
    return q;
}

char *xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *xstrndup(const char *s, size_t n)
{
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

__attribute__((format(printf, 1, 0))) static char *xvasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        oom(0);
    char *p = xmalloc((size_t)n + 1);
    vsnprintf(p, (size_t)n + 1, fmt, ap);
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = xvasprintf(fmt, ap);
    va_end(ap);
    return p;
}

static void xbuf_reserve(xbuf *b, size_t extra)
{
    if (b->cap - b->len > extra)
        return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra)
        cap *= 2;
    b->data = xrealloc(b->data, cap);
    b->cap = cap;
}

void xbuf_append(xbuf *b, const void *p, size_t n)
{
    xbuf_reserve(b, n);
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void xbuf_puts(xbuf *b, const char *s)
{
    xbuf_append(b, s, strlen(s));
}

void xbuf_printf(xbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *p = xvasprintf(fmt, ap);
    va_end(ap);
    xbuf_puts(b, p);
    free(p);
}

char *xbuf_take(xbuf *b)
{
    xbuf_reserve(b, 0);
    b->data[b->len] = '\0';
    char *p = b->data;
    b->data = NULL;
    b->len = b->cap = 0;
    return p;
}

void xbuf_free(xbuf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
