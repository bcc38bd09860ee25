/* suggest: "did you mean" for names a user typed (config keys, fault kinds,
 * task names), from one edit distance so that every tool suggests alike, and
 * the error of a JSON object a user wrote, keyed by its member.
 *
 * Ownership: nothing is allocated; returned pointers are entries of the
 * caller's list. Threading: pure, safe from any thread. */
#ifndef SUGGEST_H
#define SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

/* Names longer than this are never near anything. */
#define SUGGEST_NAME_MAX 64

/* The edit distance of a and b (insertions, deletions, substitutions and
 * swaps of two neighbours each count 1); SIZE_MAX if either is longer than
 * SUGGEST_NAME_MAX. */
size_t suggest_distance(const char *a, const char *b);

/* The entry of known[0..n) nearest to word if it is a near miss (at most 2
 * edits, or 3 for words of 8 bytes or more), else NULL. n may be (size_t)-1
 * for a NULL-terminated list. */
const char *suggest_nearest(const char *word, const char *const *known, size_t n);

/* What is wrong with a JSON object a user wrote: the member at fault (""
 * for the object itself) and a phrase that reads after "member: ". */
typedef struct {
    char key[136];
    char msg[512];
} suggest_error;

/* Fills e; returns false (so that a check can end with return
 * suggest_error_set(...)). */
bool suggest_error_set(suggest_error *e, const char *key, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
