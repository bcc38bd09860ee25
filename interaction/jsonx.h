/* jsonx: exact JSON for the protocol, built on cJSON trees.
 *
 * cJSON's own parser turns every number into a double (1000000 prints as
 * 1e+06, 2^53+1 is rounded). jsonx_parse() is a strict RFC 8259 parser of its
 * own that builds an ordinary cJSON tree, except that every number is a
 * cJSON_Raw item holding the number's exact source token; strings are decoded
 * to UTF-8 (\uXXXX escapes and surrogate pairs included), key order is kept.
 * cJSON_PrintUnformatted() therefore writes numbers back byte for byte.
 *
 * Ownership: jsonx_parse() returns a tree the caller frees with cJSON_Delete().
 * Accessors return borrowed pointers into the tree.
 * Threading: pure functions, safe from any thread. */
#ifndef JSONX_H
#define JSONX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

/* Maximum nesting depth accepted by jsonx_parse(). */
#define JSONX_MAX_DEPTH 512

/* Parses exactly one JSON value from buf[0..len) (surrounding white space is
 * allowed). On error returns NULL and writes "what and where" (byte offset)
 * into err ("trailing comma before ']' at byte 7"); err may be NULL.
 * Strictness: no trailing commas, leading zeros, NaN/Infinity, unescaped
 * control characters in strings, trailing data, nesting deeper than
 * JSONX_MAX_DEPTH; "\u0000" in a string is rejected (C strings would cut
 * it). Accepted as they are: bytes >= 0x80 in strings (not checked as
 * UTF-8); a lone surrogate escape (as Python does), stored in the 3-byte
 * WTF-8 form. Duplicate keys are all kept, in order (jsonx_get returns the
 * first). */
cJSON *jsonx_parse(const char *buf, size_t len, char *err, size_t errlen);

/* Like jsonx_parse(), but every value nested deeper than raw_depth (the top
 * value is depth 0) is fully validated and then stored as a cJSON_Raw item
 * holding its exact source text, so that large payloads pass through
 * without being built into a tree (a string stored so keeps its quotes and
 * escapes; jsonx_type_name() names any Raw item by its text).
 * raw_depth < 0: no limit. */
cJSON *jsonx_parse_shallow(const char *buf, size_t len, int raw_depth, char *err, size_t errlen);

/* Like jsonx_parse_shallow(), but an array item deeper than raw_depth is
 * not copied into the tree: it becomes a cJSON_Raw item without text
 * (valuestring NULL) that refers to its exact text in buf (jsonx_ref()), so
 * that a large batch is validated without being copied; the refs are only
 * meaningful while buf lives and is unchanged. Other values deeper than
 * raw_depth (object members) are Raw items with text, as in
 * jsonx_parse_shallow(). A tree with refs cannot be printed (jsonx_print()
 * aborts on a Raw item without text) and jsonx_type_name() names a ref
 * "invalid": resolve the refs with jsonx_unref() before handing such a
 * tree to code that does not know about them. */
cJSON *jsonx_parse_refs(const char *buf, size_t len, int raw_depth, char *err, size_t errlen);
/* For a ref item of jsonx_parse_refs(): true, with its text's place in the
 * parsed buffer (buf + *offset, *len bytes). False for any other item. */
bool jsonx_ref(const cJSON *item, size_t *offset, size_t *len);
/* Gives every ref item of tree its text, copied from buf (the buffer the
 * tree was parsed from): the tree is then the one jsonx_parse_shallow()
 * makes. Aborts on out of memory, like the rest. */
void jsonx_unref(cJSON *tree, const char *buf);

/* Item spans of a JSON array given as text ("[ 1, {\"a\": 2} ]"): calls cb with
 * each item's exact text (without surrounding white space), in order.
 * Returns the item count, or -1 if the text is not a valid JSON array (err
 * says why) or cb returned false. One pass, no allocation, every item fully
 * validated. cb may be NULL (just count and validate). Items are reported as
 * they are scanned, so cb may have seen some items when -1 is returned. */
typedef bool (*jsonx_item_cb)(void *data, size_t index, const char *item, size_t len);
long jsonx_array_items(const char *buf, size_t len, jsonx_item_cb cb, void *data, char *err,
                       size_t errlen);

/* True for a number item made by jsonx_parse() (cJSON_Raw holding a JSON
 * number) or by cJSON itself (cJSON_Number). */
bool jsonx_is_number(const cJSON *item);
/* Reads an integer number item exactly (no fraction, no exponent, in range).
 * Returns false if item is not such a number. */
bool jsonx_get_i64(const cJSON *item, int64_t *out);
/* Reads any number item as a double; false also when it overflows a
 * double (1e400). */
bool jsonx_get_double(const cJSON *item, double *out);
/* A new number item holding exactly this integer / this double (shortest
 * representation that round-trips; always with a '.' or an exponent, so
 * Python reads it back as a float: 3.0; a JSON null item for inf or nan). */
cJSON *jsonx_new_i64(int64_t v);
cJSON *jsonx_new_double(double v);

/* Object member lookup, case-sensitive (cJSON's default is not). */
cJSON *jsonx_get(const cJSON *obj, const char *key);
/* String member or NULL. */
const char *jsonx_get_str(const cJSON *obj, const char *key);

/* Compact serialization (cJSON_PrintUnformatted); never NULL. Caller frees
 * with free(). */
char *jsonx_print(const cJSON *item);

/* Name of the JSON type of item, for error messages: "null", "bool",
 * "number", "string", "list", "object" (a Raw item of jsonx_parse_shallow is
 * named by its text); "missing" for a NULL item. */
const char *jsonx_type_name(const cJSON *item);
/* The same with an article, for messages: "an object", "a list", "a
 * number", "a string", "a bool", "null", "missing". */
const char *jsonx_type_phrase(const cJSON *item);

/* Deep copy; never NULL for a non-NULL item (aborts on out of memory);
 * NULL for NULL. */
cJSON *jsonx_dup(const cJSON *item);

#endif
