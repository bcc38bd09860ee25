/* jpos: source positions for JSON text, which cJSON does not keep: one scan
 * of the text maps the path of every value ("actions[2].target") to the line
 * of its key (or of the value itself for list items and the top), and finds
 * duplicate keys, which cJSON would silently keep. For messages that say
 * "file:line" (scenario files, the aggregator's config).
 *
 * Paths: object members are joined with '.', list items written "[i]"; the
 * top value's path is "". The text must already be valid JSON (jsonx_parse
 * checked it); the scan does not validate. Keys are kept as written (escapes
 * are not decoded).
 *
 * Ownership: jpos owns its table; strings returned are borrowed from it.
 * Threading: pure, safe from any thread. */
#ifndef JPOS_H
#define JPOS_H

#include <stddef.h>

typedef struct jpos jpos;

jpos *jpos_scan(const char *text, size_t len);
void jpos_free(jpos *p);

/* Line (1-based) of the value at path; if path is not there, the line of its
 * nearest ancestor that is (so a missing key points at its object). */
int jpos_line(const jpos *p, const char *path);

/* Duplicate keys found: count, and the i-th as its path and the lines of the
 * first and the repeated key. */
size_t jpos_dup_count(const jpos *p);
const char *jpos_dup(const jpos *p, size_t i, int *first_line, int *line);

/* Line and column (1-based) of byte offset off in text. */
void jpos_text_linecol(const char *text, size_t len, size_t off, int *line, int *col);

#endif
