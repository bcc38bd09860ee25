/* suggest: "did you mean" for a misspelled name (a config key, a flag, a task
 * name): the known name nearest to it by edit distance (insertions,
 * deletions, substitutions and swaps of two neighbours each count 1).
 *
 * Ownership: strings are borrowed; the nearest name returned is one of the
 * known ones. Threading: pure. */
#ifndef SUGGEST_H
#define SUGGEST_H

#include <stddef.h>

/* Names longer than this are never near anything. */
#define SUGGEST_NAME_MAX 64

/* The edit distance of a and b; SIZE_MAX if either is longer than
 * SUGGEST_NAME_MAX. */
size_t suggest_distance(const char *a, const char *b);

/* The known name (a NULL-terminated list) nearest to word and at most
 * max_distance away from it (the first of equals); NULL if none is. */
const char *suggest_nearest(const char *word, const char *const *known, size_t max_distance);

#endif
