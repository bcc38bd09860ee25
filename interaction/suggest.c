/* suggest: the nearest known name (optimal string alignment distance). */
#include "suggest.h"

#include <stdint.h>
#include <string.h>

size_t suggest_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > SUGGEST_NAME_MAX || lb > SUGGEST_NAME_MAX)
        return SIZE_MAX;
    size_t d[SUGGEST_NAME_MAX + 1][SUGGEST_NAME_MAX + 1];
    for (size_t i = 0; i <= la; i++)
        d[i][0] = i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            size_t c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < c)
                c = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < c)
                c = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
                c = d[i - 2][j - 2] + 1;
            d[i][j] = c;
        }
    return d[la][lb];
}

const char *suggest_nearest(const char *word, const char *const *known, size_t max_distance)
{
    const char *best = NULL;
    size_t bd = SIZE_MAX;
    for (size_t i = 0; known[i]; i++) {
        size_t dist = suggest_distance(word, known[i]);
        if (dist <= max_distance && dist < bd) {
            bd = dist;
            best = known[i];
        }
    }
    return best;
}
