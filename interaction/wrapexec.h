/* wrapexec: exec a child through the wrapper command in $DILEARN_WRAPPER
 * (e.g. "valgrind --error-exitcode=99 --leak-check=full"), so that CI can
 * run the executables that end-to-end tests start under a checker
 * (ci/valgrind.sh). The wrapper is split on white space (no quoting) and
 * looked up in PATH; without it, a plain execv. For the child side of a fork:
 * no allocation. Returns only on failure (errno set), like execv. */
#ifndef WRAPEXEC_H
#define WRAPEXEC_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline int wrap_execv(const char *path, char *const argv[])
{
    const char *w = getenv("DILEARN_WRAPPER");
    if (!w || !*w)
        return execv(path, argv);
    char buf[4096];
    char *args[256];
    size_t n = 0;
    size_t wl = strlen(w);
    if (wl >= sizeof buf)
        return execv(path, argv);
    memcpy(buf, w, wl + 1);
    for (char *p = buf; *p && n < 64;) {
        while (*p == ' ' || *p == '\t')
            *p++ = '\0';
        if (!*p)
            break;
        args[n++] = p;
        while (*p && *p != ' ' && *p != '\t')
            p++;
    }
    if (n == 0)
        return execv(path, argv);
    args[n++] = (char *)path;
    for (size_t i = 1; argv[i] && n < 255; i++)
        args[n++] = argv[i];
    args[n] = NULL;
    return execvp(args[0], args);
}

/* ms times the whole factor in $DILEARN_TEST_SLOWDOWN (1..100, default 1):
 * for caps and waits that race with processes that a checker slows down
 * (ci/valgrind.sh sets it). */
static inline long wrap_slow_ms(long ms)
{
    const char *s = getenv("DILEARN_TEST_SLOWDOWN");
    char *end = NULL;
    long f = s ? strtol(s, &end, 10) : 1;
    if (!s || !*s || *end || f < 1 || f > 100)
        f = 1;
    return ms * f;
}

#endif
