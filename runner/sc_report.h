/* sc_report: what run_scenarios shows of its results: the summary table
 * (text), a JUnit XML file (one testcase per scenario run: its seed and
 * replay command as properties and in system-out; a failed expectation as
 * <failure>, an invalid file, a run that could not be carried out or was
 * interrupted as <error>, one never started or whose every expectation was
 * skipped as <skipped>, and each expectation skipped as a testcase of its own
 * with <skipped>) and one self-contained HTML page (per scenario an SVG timeline of
 * the tasks on each learner and the injected faults, the world size, the
 * expectations with their outcome, and the logs), no external resources.
 *
 * Ownership: results are borrowed. Threading: pure functions. */
#ifndef SC_REPORT_H
#define SC_REPORT_H

#include <stddef.h>
#include <stdio.h>

#include "sc_run.h"

/* "PASS", "FAIL", "ERROR", "SKIP". */
const char *sc_outcome_word(sc_outcome o);
/* The summary table, the pass rate of each scenario run more than once
 * (--repeat, --seeds) and the closing "N passed, N failed" line. */
void sc_report_summary(FILE *out, const sc_result *const *res, size_t n, double wall_ms);
/* The failed checks of one result, indented, for the console. */
void sc_report_failure(FILE *out, const sc_result *r);
/* The skipped checks of one result (not judged, and why), for the console. */
void sc_report_skipped(FILE *out, const sc_result *r);
/* "held/judged" or "held/judged+N skipped". */
void sc_report_checks_text(char *buf, size_t len, const sc_result *r);
/* 0, or -1 with errno set. */
int sc_report_junit(const char *path, const sc_result *const *res, size_t n, double wall_ms);
int sc_report_html(const char *path, const sc_result *const *res, size_t n, double wall_ms);

/* Escapers (exposed for tests): append s to b, escaped for XML/HTML text and
 * attributes; invalid control characters become U+FFFD. */
#include "xalloc.h"
void sc_xml_escape(xbuf *b, const char *s, size_t len);

#endif
