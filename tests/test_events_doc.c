/* docs/events.md against the lists in interaction/evt.h: the schema version,
 * every field in the fields table with its type, every cause word in the
 * causes table, every event with a section
 * that names each of its fields and holds an example line that
 * evt_parse_line() accepts, and no section for an event the list lacks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "evt.h"
#include "util.h"

#ifndef DOCS_EVENTS_MD
#error "DOCS_EVENTS_MD: the path of docs/events.md"
#endif

static char *g_doc;

static int setup(void **state)
{
    (void)state;
    size_t len;
    g_doc = util_read_file(DOCS_EVENTS_MD, 1u << 20, &len, NULL);
    return g_doc ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    free(g_doc);
    return 0;
}

/* The section of event `name`: from its "### `name`" heading to the next
 * heading; NULL if absent. *len its length. */
static const char *section(const char *name, size_t *len)
{
    char head[128];
    snprintf(head, sizeof head, "\n### `%s`\n", name);
    const char *s = strstr(g_doc, head);
    if (!s)
        return NULL;
    s += strlen(head);
    const char *e = strstr(s, "\n#");
    *len = e ? (size_t)(e - s) : strlen(s);
    return s;
}

static void schema_version_is_documented(void **state)
{
    (void)state;
    char want[64];
    snprintf(want, sizeof want, "\nSchema version: %d\n", EVT_SCHEMA_VERSION);
    if (!strstr(g_doc, want))
        fail_msg("docs/events.md does not say \"Schema version: %d\"", EVT_SCHEMA_VERSION);
}

static void every_field_is_in_the_table(void **state)
{
    (void)state;
    static const char *const types[] = {"string", "integer", "number", "JSON"};
    for (int f = 0; f < EVT_FIELD_COUNT; f++) {
        char row[128];
        snprintf(row, sizeof row, "\n| `%s` | %s |", evt_field_name((evt_field_id)f),
                 types[evt_field_type((evt_field_id)f)]);
        if (!strstr(g_doc, row))
            fail_msg("docs/events.md: no row \"%s\" in the fields table", row + 1);
    }
}

static void every_cause_is_in_its_table(void **state)
{
    (void)state;
    for (int c = 0; c < EVT_CAUSE_COUNT; c++) {
        char row[128];
        snprintf(row, sizeof row, "\n| `%s` | ", evt_cause_name((evt_cause)c));
        if (!strstr(g_doc, row))
            fail_msg("docs/events.md: no row \"%s\" in the causes table", row + 1);
    }
}

static void every_event_has_its_section(void **state)
{
    (void)state;
    for (int e = 0; e < EVT_COUNT; e++) {
        const char *name = evt_name((evt_id)e);
        size_t len = 0;
        const char *s = section(name, &len);
        if (!s)
            fail_msg("docs/events.md: no section \"### `%s`\"", name);
        char *sec = strndup(s, len);
        for (int f = 0; f < EVT_FIELD_COUNT; f++) {
            if (!(evt_mask((evt_id)e) & (UINT64_C(1) << f)))
                continue;
            char tick[64];
            snprintf(tick, sizeof tick, "`%s`", evt_field_name((evt_field_id)f));
            if (!strstr(sec, tick))
                fail_msg("docs/events.md: the section of %s does not name its field %s", name, tick);
        }
        /* its example lines: at least one, each accepted and of this event */
        int examples = 0;
        for (char *line = sec; line && *line;) {
            char *nl = strchr(line, '\n');
            size_t n = nl ? (size_t)(nl - line) : strlen(line);
            if (n > 0 && line[0] == '{') {
                evt_record r;
                char err[256];
                if (evt_parse_line(line, n, &r, err, sizeof err) != 0)
                    fail_msg("docs/events.md, the example of %s: %s:\n%.*s", name, err, (int)n, line);
                if (r.id != (evt_id)e)
                    fail_msg("docs/events.md: the section of %s shows an example of %s", name, evt_name(r.id));
                evt_record_free(&r);
                examples++;
            }
            line = nl ? nl + 1 : NULL;
        }
        if (examples == 0)
            fail_msg("docs/events.md: the section of %s has no example line", name);
        free(sec);
    }
}

/* No section for an event the list does not have, and every JSON line of
 * the page is a valid event. */
static void nothing_stale(void **state)
{
    (void)state;
    for (const char *p = strstr(g_doc, "\n### `"); p; p = strstr(p + 1, "\n### `")) {
        const char *s = p + 6;
        const char *e = strchr(s, '`');
        assert_non_null(e);
        char name[128];
        snprintf(name, sizeof name, "%.*s", (int)(e - s), s);
        if (evt_lookup(name) < 0)
            fail_msg("docs/events.md documents \"%s\", which is not in EVT_LIST", name);
    }
    for (const char *line = g_doc; line && *line;) {
        const char *nl = strchr(line, '\n');
        size_t n = nl ? (size_t)(nl - line) : strlen(line);
        if (n > 10 && strncmp(line, "{\"event\"", 8) == 0) {
            evt_record r;
            char err[256];
            if (evt_parse_line(line, n, &r, err, sizeof err) != 0)
                fail_msg("docs/events.md: %s:\n%.*s", err, (int)n, line);
            evt_record_free(&r);
        }
        line = nl ? nl + 1 : NULL;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(schema_version_is_documented),
        cmocka_unit_test(every_field_is_in_the_table),
        cmocka_unit_test(every_cause_is_in_its_table),
        cmocka_unit_test(every_event_has_its_section),
        cmocka_unit_test(nothing_stale),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
