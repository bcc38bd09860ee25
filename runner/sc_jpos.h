/* sc_jpos: source positions for JSON text, which cJSON does not keep: one
 * scan of the text maps the path of every value ("actions[2].target") to the
 * line of its key (or of the value itself for list items and the top), and
 * finds duplicate keys, which cJSON would silently keep.
 *
 * Paths: object members are joined with '.', list items written "[i]"; the
 * top value's path is "". The text must already be valid JSON (jsonx_parse
 * checked it); the scan does not validate.
 *
 * Ownership: sc_jpos owns its table; strings returned are borrowed from it.
 * Threading: pure, safe from any thread. */
#ifndef SC_JPOS_H
#define SC_JPOS_H

#include <stddef.h>

typedef struct sc_jpos sc_jpos;

sc_jpos *sc_jpos_scan(const char *text, size_t len);
void sc_jpos_free(sc_jpos *p);

/* Line (1-based) of the value at path; if path is not there, the line of its
 * nearest ancestor that is (so a missing key points at its object). */
int sc_jpos_line(const sc_jpos *p, const char *path);

/* Duplicate keys found: count, and the i-th as its path and the lines of the
 * first and the repeated key. */
size_t sc_jpos_dup_count(const sc_jpos *p);
const char *sc_jpos_dup(const sc_jpos *p, size_t i, int *first_line, int *line);

/* Line and column (1-based) of byte offset off in text. */
void sc_text_linecol(const char *text, size_t len, size_t off, int *line, int *col);

#endif
