/* suggest: the nearest known name to a typo. */
#include "suggest.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define SUGGEST_MAX_LEN 64

size_t suggest_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_MAX_LEN || lb > SUGGEST_MAX_LEN)
        return (size_t)-1 / 2;
    size_t row[SUGGEST_MAX_LEN + 1];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t c = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < c)
                c = up + 1;
            if (row[j - 1] + 1 < c)
                c = row[j - 1] + 1;
            row[j] = c;
            diag = up;
        }
    }
    return row[lb];
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
