/* mc_oracle: an independent implementation of the merge rules of
 * protocol.md ("Merging results"), used to recompute what the aggregator
 * should have returned from what its learners returned. It deliberately
 * shares no code with the aggregator, so that a bug there (a dropped key, a
 * wrong order) shows up as a difference here.
 *
 * merge(values), by the first value:
 *   null, number, string, bool -> the list of all values, as they are;
 *   list   -> the concatenation of all values, which must all be lists;
 *   object -> the first value's keys in its order; learner_step, buffer_id,
 *             task_id, learner_done take the first value's member, any other
 *             key k takes merge(each value's k), so every value must be an
 *             object holding k.
 * Where the reference would throw (a missing key, a list beside a non-list,
 * a non-object beside an object), the oracle reports an error naming the key
 * path and the learner: the aggregator must then fail the task.
 *
 * Ownership: inputs borrowed; the result is new (cJSON_Delete).
 * Threading: pure functions. */
#ifndef MC_ORACLE_H
#define MC_ORACLE_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* Merges values[0..n) (n >= 1). names[i] names learner i in messages (names
 * may be NULL: "learner #i"). NULL on a shape error, with err saying
 * "at info.x: learner1 has a list where learner0 has an object" or
 * "at info.x: missing in learner2". */
cJSON *mco_merge(const cJSON *const *values, const char *const *names, size_t n, char *err, size_t errlen);

#endif
