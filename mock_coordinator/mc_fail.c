/* mc_fail: a capped list of failure messages. */
#include "mc_fail.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

void mc_fail_init(mc_fail *f)
{
    memset(f, 0, sizeof *f);
}

void mc_fail_add(mc_fail *f, const char *fmt, ...)
{
    if (f->n >= MC_FAIL_MAX) {
        f->dropped++;
        return;
    }
    char buf[MC_FAIL_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len >= (int)sizeof buf)
        memcpy(buf + sizeof buf - 4, "...", 4);
    f->msg = xrealloc(f->msg, (f->n + 1) * sizeof *f->msg);
    f->msg[f->n++] = xstrdup(buf);
}

size_t mc_fail_count(const mc_fail *f)
{
    return f->n + f->dropped;
}

int mc_fail_has(const mc_fail *f, const char *needle)
{
    for (size_t i = 0; i < f->n; i++)
        if (strstr(f->msg[i], needle))
            return 1;
    return 0;
}

void mc_fail_free(mc_fail *f)
{
    for (size_t i = 0; i < f->n; i++)
        free(f->msg[i]);
    free(f->msg);
    memset(f, 0, sizeof *f);
}
