/* suggest: the nearest known name to a typo. */
#include "suggest.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* Optimal string alignment: insertions, deletions, substitutions and a swap
 * of two neighbours ("salve" for "slave") each count one. */
size_t suggest_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_NAME_MAX || lb > SUGGEST_NAME_MAX)
        return SIZE_MAX;
    size_t rows[3][SUGGEST_NAME_MAX + 1]; /* i-2, i-1, i */
    size_t *pp = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t c = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < c)
                c = prev[j] + 1;
            if (cur[j - 1] + 1 < c)
                c = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && pp[j - 2] + 1 < c)
                c = pp[j - 2] + 1;
            cur[j] = c;
        }
        size_t *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

const char *suggest_nearest(const char *word, const char *const *known, size_t n)
{
    size_t limit = strlen(word) >= 8 ? 3 : 2;
    const char *best = NULL;
    size_t bd = limit + 1;
    for (size_t i = 0; i < n && known[i]; i++) {
        size_t d = suggest_distance(word, known[i]);
        if (d < bd) {
            bd = d;
            best = known[i];
        }
    }
    return best;
}

bool suggest_error_set(suggest_error *e, const char *key, const char *fmt, ...)
{
    snprintf(e->key, sizeof e->key, "%s", key);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    return false;
}
