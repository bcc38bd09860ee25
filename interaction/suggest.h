/* suggest: "did you mean" for names a user typed (config keys, fault kinds,
 * task names), from one edit distance so that every tool suggests alike.
 *
 * Ownership: nothing is allocated; returned pointers are entries of the
 * caller's list. Threading: pure, safe from any thread. */
#ifndef SUGGEST_H
#define SUGGEST_H

#include <stddef.h>

/* Levenshtein distance of a and b; names longer than 64 bytes are "far"
 * (returns a large number). */
size_t suggest_distance(const char *a, const char *b);

/* The entry of known[0..n) nearest to word if it is a near miss (at most 2
 * edits, or 3 for words of 8 bytes or more), else NULL. n may be (size_t)-1
 * for a NULL-terminated list. */
const char *suggest_nearest(const char *word, const char *const *known, size_t n);

#endif
