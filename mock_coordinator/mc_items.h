/* mc_items: the learn data the mock coordinator sends. Item i of learn round
 * r (r counts from 1, i from 0) is a JSON object with a unique id:
 *   {"id": "r<r>-<i>", "obs": [numbers...], "reward": 0.5,
 *    "big": 9007199254740993, "s": "unicode é ✓ and escapes \n \" ...",
 *    "pad": "..."}
 * "big" is beyond 2^53 so that any peer that passes numbers through a double
 * changes it; "s" holds non-ASCII text and escapes; "obs" holds numbers in
 * integer, fraction and exponent form, drawn from the seed; "pad" (only with
 * item_size > 0) fills the item to roughly item_size bytes of JSON.
 *
 * Ownership: mci_build() returns a tree the caller frees (cJSON_Delete);
 * numbers in it are exact tokens (jsonx), so printing it is byte-exact.
 * Threading: pure functions. */
#ifndef MC_ITEMS_H
#define MC_ITEMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Largest item_size accepted (bytes). */
#define MCI_ITEM_SIZE_MAX (64u * 1024u * 1024u)
/* Most items in one round. */
#define MCI_ITEMS_MAX 1000000u

/* The list of n items of round `round`. n <= MCI_ITEMS_MAX,
 * item_size <= MCI_ITEM_SIZE_MAX (larger values are clamped). */
cJSON *mci_build(unsigned long round, size_t n, uint64_t seed, size_t item_size);
/* Reads an id "r<round>-<index>" (decimal, no sign, no leading zeros);
 * false if id is not of that form. */
bool mci_parse_id(const char *id, unsigned long *round, size_t *index);

#endif
