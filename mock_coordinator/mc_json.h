/* mc_json: JSON value comparison for the checks: equality of two values as
 * JSON values (object key order ignored, numbers compared exactly by their
 * decimal value, so 9007199254740993 differs from 9007199254740992 and 1.50
 * equals 1.5), the first difference between two values as a path, dotted
 * path lookup ("info.learner_step", "a_list.0"), and short printing for
 * messages.
 *
 * Works on trees from jsonx_parse() (numbers are cJSON_Raw tokens) as well
 * as on cJSON_Number items.
 * Ownership: pointers returned by mcj_path() are borrowed from the tree;
 * strings returned by mcj_short() / mcj_diff() are the caller's (free()).
 * Threading: pure functions. */
#ifndef MC_JSON_H
#define MC_JSON_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* Two number tokens ("1.50", "15e-1") have the same exact value. False if
 * either is not a JSON number token. */
bool mcj_number_equal(const char *a, const char *b);
/* Equality as JSON values; NULL equals only NULL. */
bool mcj_equal(const cJSON *a, const cJSON *b);
/* NULL if expected and got are equal; else a new string describing the
 * first difference: "at info.loss: expected [0.5,0.7], got [0.5]" or "at
 * a_list: missing (expected [1,2])". prefix names the root ("" for none). */
char *mcj_diff(const cJSON *expected, const cJSON *got, const char *prefix);
/* The value at a dotted path; segments index objects by key and lists by a
 * decimal index. "" is the root. NULL if absent. */
const cJSON *mcj_path(const cJSON *root, const char *path);
/* Compact JSON text of v, cut to at most max bytes with "..." ("missing"
 * for NULL). */
char *mcj_short(const cJSON *v, size_t max);

#endif
