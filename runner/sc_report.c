/* sc_report: summary table, JUnit XML and the HTML report (see sc_report.h). */
#include "sc_report.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LOG_TAIL_BYTES 65536
#define ROWS_MAX 48

void sc_xml_escape(xbuf *b, const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&': xbuf_puts(b, "&amp;"); break;
        case '<': xbuf_puts(b, "&lt;"); break;
        case '>': xbuf_puts(b, "&gt;"); break;
        case '"': xbuf_puts(b, "&quot;"); break;
        case '\'': xbuf_puts(b, "&#39;"); break;
        default:
            if (c < 0x20 && c != '\n' && c != '\t' && c != '\r')
                xbuf_puts(b, "\xEF\xBF\xBD");
            else
                xbuf_append(b, &s[i], 1);
        }
    }
}

static void esc(xbuf *b, const char *s)
{
    if (s)
        sc_xml_escape(b, s, strlen(s));
}

/* Checks that held (a skipped one did not: it was not judged). */
static size_t count_ok(const sc_result *r)
{
    size_t ok = 0;
    for (size_t i = 0; i < r->nchecks; i++)
        ok += r->checks[i].ok && !r->checks[i].skipped;
    return ok;
}

static size_t count_skipped_checks(const sc_result *r)
{
    size_t k = 0;
    for (size_t i = 0; i < r->nchecks; i++)
        k += r->checks[i].skipped;
    return k;
}

void sc_report_checks_text(char *buf, size_t len, const sc_result *r)
{
    size_t sk = count_skipped_checks(r);
    if (sk)
        snprintf(buf, len, "%zu/%zu+%zu skipped", count_ok(r), r->nchecks - sk, sk);
    else
        snprintf(buf, len, "%zu/%zu", count_ok(r), r->nchecks);
}

void sc_report_skipped(FILE *out, const sc_result *r)
{
    for (size_t i = 0; i < r->nchecks; i++) {
        const sc_check *c = &r->checks[i];
        if (!c->skipped)
            continue;
        if (c->line > 0)
            fprintf(out, "      %s:%d: SKIPPED %s: %.400s\n", r->path, c->line, c->what, c->detail);
        else
            fprintf(out, "      %s: SKIPPED %s: %.400s\n", r->path, c->what, c->detail);
    }
}

static const sc_check *first_failure(const sc_result *r)
{
    for (size_t i = 0; i < r->nchecks; i++)
        if (!r->checks[i].ok)
            return &r->checks[i];
    return NULL;
}

void sc_report_failure(FILE *out, const sc_result *r)
{
    for (size_t i = 0; i < r->nchecks; i++) {
        const sc_check *c = &r->checks[i];
        if (c->ok)
            continue;
        if (c->line > 0)
            fprintf(out, "      %s:%d: FAILED %s\n", r->path, c->line, c->what);
        else
            fprintf(out, "      %s: FAILED %s\n", r->path, c->what);
        /* the detail, indented, at most 12 lines */
        const char *d = c->detail;
        for (int n = 0; d && *d && n < 12; n++) {
            const char *nl = strchr(d, '\n');
            int len = nl ? (int)(nl - d) : (int)strlen(d);
            fprintf(out, "          %.*s\n", len > 400 ? 400 : len, d);
            d = nl ? nl + 1 : NULL;
        }
    }
    fprintf(out, "      logs:   %s/\n", r->run_dir);
    fprintf(out, "      replay: %s\n", r->replay);
}

const char *sc_outcome_word(sc_outcome o)
{
    static const char *const w[] = {"PASS", "FAIL", "ERROR", "SKIP"};
    return (unsigned)o < 4 ? w[o] : "?";
}

/* "name", or "name #3" for a try of --repeat/--seeds. */
static void label(char *buf, size_t len, const sc_result *r)
{
    if (r->attempt > 0)
        snprintf(buf, len, "%s #%d", r->name, r->attempt);
    else
        snprintf(buf, len, "%s", r->name);
}

/* The pass rate of each scenario run more than once, with the failing
 * seeds: what chasing a flaky failure needs. */
static void pass_rates(FILE *out, const sc_result *const *res, size_t n)
{
    bool header = false;
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = strcmp(res[k]->path, res[i]->path) != 0;
        if (!first)
            continue;
        size_t runs = 0, passed = 0, notrun = 0, nbad = 0;
        xbuf bad = {0};
        for (size_t k = i; k < n; k++) {
            const sc_result *r = res[k];
            if (strcmp(r->path, res[i]->path) != 0)
                continue;
            if (r->outcome == SC_SKIPPED) {
                notrun++;
                continue;
            }
            runs++;
            passed += r->passed;
            if (!r->passed && nbad++ < 12)
                xbuf_printf(&bad, "%s%llu", nbad > 1 ? " " : "", (unsigned long long)r->seed);
        }
        if (nbad > 12)
            xbuf_puts(&bad, " ...");
        char *b = xbuf_take(&bad);
        if (runs + notrun > 1) {
            if (!header)
                fprintf(out, "\npass rate per scenario:\n");
            header = true;
            fprintf(out, "  %-32s %zu/%zu passed (%.0f%%)", res[i]->name, passed, runs,
                    runs ? 100.0 * (double)passed / (double)runs : 0.0);
            if (nbad)
                fprintf(out, "; failing seed%s: %s", nbad == 1 ? "" : "s", b);
            if (notrun)
                fprintf(out, "; %zu not run", notrun);
            fputc('\n', out);
        }
        free(b);
    }
}

void sc_report_summary(FILE *out, const sc_result *const *res, size_t n, double wall_ms)
{
    size_t count[4] = {0, 0, 0, 0}, w = 8;
    char lb[96];
    for (size_t i = 0; i < n; i++) {
        label(lb, sizeof lb, res[i]);
        if (strlen(lb) > w)
            w = strlen(lb);
    }
    if (w > 40)
        w = 40;
    fprintf(out, "\n%-*s  %-6s %8s  %-8s %-7s %s\n", (int)w, "scenario", "result", "time", "seed", "checks",
            "first failure");
    for (size_t i = 0; i < n; i++) {
        const sc_result *r = res[i];
        const sc_check *f = first_failure(r);
        char checks[48];
        sc_report_checks_text(checks, sizeof checks, r);
        char ff[160] = "";
        if (r->outcome == SC_SKIPPED || (r->error && !f))
            snprintf(ff, sizeof ff, "%s", r->error ? r->error : "");
        else if (f)
            snprintf(ff, sizeof ff, "%s: %s", f->what, f->detail);
        for (char *p = ff; *p; p++)
            if (*p == '\n')
                *p = ' ';
        label(lb, sizeof lb, r);
        fprintf(out, "%-*.*s  %-6s %7.2fs  %-8llu %-7s %s\n", (int)w, (int)w, lb, sc_outcome_word(r->outcome),
                r->duration_ms / 1000.0, (unsigned long long)r->seed, checks, ff);
        count[(unsigned)r->outcome & 3]++;
    }
    pass_rates(out, res, n);
    size_t distinct = 0;
    for (size_t i = 0; i < n; i++) {
        bool first = true;
        for (size_t k = 0; k < i && first; k++)
            first = strcmp(res[k]->path, res[i]->path) != 0;
        distinct += first;
    }
    if (distinct == n)
        fprintf(out, "\n%zu scenario%s in %.1f s\n", n, n == 1 ? "" : "s", wall_ms / 1000.0);
    else
        fprintf(out, "\n%zu runs of %zu scenario%s in %.1f s\n", n, distinct, distinct == 1 ? "" : "s",
                wall_ms / 1000.0);
    fprintf(out, "%zu passed, %zu failed", count[SC_PASSED], count[SC_FAILED]);
    if (count[SC_ERROR])
        fprintf(out, ", %zu error%s", count[SC_ERROR], count[SC_ERROR] == 1 ? "" : "s");
    size_t unjudged = 0; /* run, but every expectation skipped */
    for (size_t i = 0; i < n; i++)
        unjudged += res[i]->outcome == SC_SKIPPED && res[i]->run_dir;
    if (count[SC_SKIPPED] > unjudged)
        fprintf(out, ", %zu not run", count[SC_SKIPPED] - unjudged);
    if (unjudged)
        fprintf(out, ", %zu not judged (every expectation skipped)", unjudged);
    size_t sk = 0;
    for (size_t i = 0; i < n; i++)
        sk += count_skipped_checks(res[i]);
    if (sk)
        fprintf(out, "; %zu expectation%s skipped (not judged: %s)", sk, sk == 1 ? "" : "s",
                sk == 1 ? "it says why" : "each says why");
    fputc('\n', out);
}

static char *tail_of(const char *path, size_t max, bool *cut)
{
    *cut = false;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    long from = size > (long)max ? size - (long)max : 0;
    *cut = from > 0;
    fseek(f, from, SEEK_SET);
    char *buf = xmalloc((size_t)(size - from) + 1);
    size_t n = fread(buf, 1, (size_t)(size - from), f);
    buf[n] = '\0';
    fclose(f);
    if (*cut) { /* start at a line */
        char *nl = strchr(buf, '\n');
        if (nl) {
            memmove(buf, nl + 1, strlen(nl + 1) + 1);
        }
    }
    return buf;
}

static int write_file(const char *path, const char *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    int rc = fclose(f);
    if (w != len || rc != 0)
        return -1;
    return 0;
}

static void failure_text(xbuf *b, const sc_result *r)
{
    if (r->outcome == SC_ERROR && r->error_line > 0) /* an invalid file: every error */
        xbuf_printf(b, "%s", r->description);
    else if (r->error)
        xbuf_printf(b, "%s\n", r->error);
    for (size_t i = 0; i < r->nchecks; i++) {
        const sc_check *c = &r->checks[i];
        if (c->ok)
            continue;
        xbuf_printf(b, "%s:%d: FAILED %s\n    %s\n", r->path, c->line, c->what, c->detail);
    }
}

/* seed, replay command and run folder: a CI page alone is enough to
 * reproduce. */
static void junit_properties(xbuf *b, const sc_result *r)
{
    xbuf_puts(b, "      <properties>\n");
    if (r->outcome != SC_ERROR || r->error_line == 0)
        xbuf_printf(b, "        <property name=\"seed\" value=\"%llu\"/>\n", (unsigned long long)r->seed);
    if (r->attempt > 0)
        xbuf_printf(b, "        <property name=\"try\" value=\"%d\"/>\n", r->attempt);
    xbuf_puts(b, "        <property name=\"replay\" value=\"");
    esc(b, r->replay);
    xbuf_puts(b, "\"/>\n");
    if (r->run_dir) {
        xbuf_puts(b, "        <property name=\"run_dir\" value=\"");
        esc(b, r->run_dir);
        xbuf_puts(b, "\"/>\n");
    }
    xbuf_puts(b, "      </properties>\n");
}

/* The <failure>, <error> or <skipped> element of a testcase, if any. */
static void junit_verdict(xbuf *b, const sc_result *r)
{
    if (r->outcome == SC_PASSED)
        return;
    if (r->outcome == SC_SKIPPED) {
        xbuf_puts(b, "      <skipped message=\"");
        esc(b, r->error);
        xbuf_puts(b, "\"/>\n");
        return;
    }
    const sc_check *f = first_failure(r);
    const char *el = r->outcome == SC_FAILED ? "failure" : "error";
    const char *type = r->outcome == SC_FAILED ? "expectation"
                       : r->interrupted        ? "interrupted"
                       : r->error_line > 0     ? "invalid scenario"
                                               : "run";
    xbuf_printf(b, "      <%s type=\"%s\" message=\"", el, type);
    char d[400];
    if (r->outcome == SC_FAILED && f) {
        esc(b, f->what);
        xbuf_puts(b, ": ");
        snprintf(d, sizeof d, "%s", f->detail);
    } else {
        if (r->error_line > 0)
            xbuf_printf(b, "%s:%d: ", r->path, r->error_line);
        snprintf(d, sizeof d, "%s", r->error ? r->error : "failed");
    }
    esc(b, d);
    xbuf_puts(b, "\">");
    xbuf ft = {0};
    failure_text(&ft, r);
    char *t = xbuf_take(&ft);
    esc(b, t);
    free(t);
    xbuf_printf(b, "</%s>\n", el);
}

static void junit_output(xbuf *b, const sc_result *r)
{
    xbuf_puts(b, "      <system-out>");
    if (r->outcome != SC_ERROR || r->error_line == 0)
        xbuf_printf(b, "seed: %llu\n", (unsigned long long)r->seed);
    xbuf_puts(b, "replay: ");
    esc(b, r->replay);
    xbuf_puts(b, "\nlogs: ");
    esc(b, r->run_dir ? r->run_dir : "none (not run)");
    xbuf_puts(b, "\n");
    if (r->outcome == SC_PASSED) {
        xbuf_printf(b, "%zu checks passed\n</system-out>\n", r->nchecks);
        return;
    }
    /* the runner's log and every process's log tail */
    for (size_t p = 0; r->run_dir && p <= r->nprocs; p++) {
        char *lp = p < r->nprocs ? xstrdup(r->logs[p]) : xasprintf("%s/runner.log", r->run_dir);
        bool cut;
        char *tail = tail_of(lp, LOG_TAIL_BYTES / 4, &cut);
        if (tail && tail[0]) {
            xbuf_printf(b, "==== %s%s ====\n", lp, cut ? " (last part)" : "");
            esc(b, tail);
            xbuf_puts(b, "\n");
        }
        free(tail);
        free(lp);
    }
    xbuf_puts(b, "</system-out>\n");
}

int sc_report_junit(const char *path, const sc_result *const *res, size_t n, double wall_ms)
{
    size_t count[4] = {0, 0, 0, 0}, nsk = 0;
    for (size_t i = 0; i < n; i++) {
        count[(unsigned)res[i]->outcome & 3]++;
        nsk += count_skipped_checks(res[i]);
    }
    char ts[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    xbuf b = {0};
    xbuf_puts(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xbuf_printf(&b,
                "<testsuites name=\"run_scenarios\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" "
                "time=\"%.3f\">\n",
                n + nsk, count[SC_FAILED], count[SC_ERROR], count[SC_SKIPPED] + nsk, wall_ms / 1000.0);
    xbuf_printf(&b,
                "  <testsuite name=\"scenarios\" tests=\"%zu\" failures=\"%zu\" errors=\"%zu\" skipped=\"%zu\" "
                "time=\"%.3f\" timestamp=\"%s\">\n",
                n + nsk, count[SC_FAILED], count[SC_ERROR], count[SC_SKIPPED] + nsk, wall_ms / 1000.0, ts);
    for (size_t i = 0; i < n; i++) {
        const sc_result *r = res[i];
        char lb[96];
        label(lb, sizeof lb, r);
        xbuf_puts(&b, "    <testcase classname=\"scenarios\" name=\"");
        esc(&b, lb);
        xbuf_puts(&b, "\" file=\"");
        esc(&b, r->path);
        if (r->error_line > 0)
            xbuf_printf(&b, "\" line=\"%d", r->error_line);
        xbuf_printf(&b, "\" time=\"%.3f\">\n", r->duration_ms / 1000.0);
        junit_properties(&b, r);
        junit_verdict(&b, r);
        junit_output(&b, r);
        xbuf_puts(&b, "    </testcase>\n");
        /* each expectation not judged is a testcase of its own, <skipped>
         * with why: a skip never hides inside a passed scenario */
        for (size_t k = 0; k < r->nchecks; k++) {
            const sc_check *c = &r->checks[k];
            if (!c->skipped)
                continue;
            xbuf_puts(&b, "    <testcase classname=\"scenarios.expectations\" name=\"");
            esc(&b, lb);
            xbuf_puts(&b, ": ");
            esc(&b, c->what);
            xbuf_puts(&b, "\" file=\"");
            esc(&b, r->path);
            xbuf_printf(&b, "\" line=\"%d\" time=\"0\">\n      <skipped message=\"", c->line);
            esc(&b, c->detail);
            xbuf_puts(&b, "\"/>\n    </testcase>\n");
        }
    }
    xbuf_puts(&b, "  </testsuite>\n</testsuites>\n");
    int rc = write_file(path, b.data, b.len);
    xbuf_free(&b);
    return rc;
}

/* ---- HTML ---- */

static const char *task_color(const char *task)
{
    if (!task)
        return "#9e9e9e";
    if (strcmp(task, "learner_learn_task") == 0)
        return "#43a047";
    if (strcmp(task, "learner_get_data_task") == 0)
        return "#00897b";
    if (strcmp(task, "learner_start_task") == 0)
        return "#1e88e5";
    if (strcmp(task, "learner_close_task") == 0)
        return "#8e24aa";
    if (strcmp(task, "resource") == 0)
        return "#9e9e9e";
    return "#6d4c41";
}

static const char *short_task(const char *t)
{
    if (!t)
        return "?";
    if (strcmp(t, "learner_learn_task") == 0)
        return "learn";
    if (strcmp(t, "learner_get_data_task") == 0)
        return "get_data";
    if (strcmp(t, "learner_start_task") == 0)
        return "start";
    if (strcmp(t, "learner_close_task") == 0)
        return "close";
    return t;
}

static double nice_step(double span)
{
    double raw = span / 8;
    double p = pow(10, floor(log10(raw > 0 ? raw : 1)));
    double m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* Which learners get a row (at most ROWS_MAX - 1 when there are more than
 * ROWS_MAX): first those with a failed or lost task or a fault or exit
 * mark, then the others, each group in learner order. row_of[l] is the row
 * of learner l or -1; learner_at[row] the learner of a row. The row count. */
static int choose_rows(const sc_result *r, int *row_of, int *learner_at)
{
    int n = r->nlearners;
    int rows = n <= ROWS_MAX ? n : ROWS_MAX - 1;
    bool *hot = xcalloc((size_t)n + 1, sizeof *hot);
    for (size_t i = 0; i < r->nbars; i++)
        if (r->bars[i].outcome >= 2 && r->bars[i].learner >= 0 && r->bars[i].learner < n)
            hot[r->bars[i].learner] = true;
    for (size_t i = 0; i < r->nmarks; i++)
        if ((r->marks[i].kind == 0 || r->marks[i].kind == 1) && r->marks[i].learner >= 0 && r->marks[i].learner < n)
            hot[r->marks[i].learner] = true;
    for (int l = 0; l < n; l++)
        row_of[l] = -1;
    int k = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int l = 0; l < n && k < rows; l++)
            if (hot[l] == (pass == 0) && row_of[l] < 0) {
                row_of[l] = k;
                learner_at[k++] = l;
            }
    free(hot);
    return rows;
}

/* "… 952 more learners, not drawn: 1904 tasks, all completed". */
static void undrawn_summary(xbuf *b, const sc_result *r, const int *row_of, int rows, int x, int y)
{
    size_t count[4] = {0, 0, 0, 0};
    for (size_t i = 0; i < r->nbars; i++)
        if (r->bars[i].learner >= 0 && r->bars[i].learner < r->nlearners && row_of[r->bars[i].learner] < 0)
            count[r->bars[i].outcome & 3]++;
    size_t tasks = count[0] + count[1] + count[2] + count[3];
    xbuf_printf(b, "<text x=\"%d\" y=\"%d\" class=\"row\">… %d more learners, not drawn: %zu task%s", x, y,
                r->nlearners - rows, tasks, tasks == 1 ? "" : "s");
    if (tasks && count[1] == tasks)
        xbuf_puts(b, ", all completed");
    else if (tasks)
        xbuf_printf(b, ": %zu completed, %zu failed, %zu lost, %zu open", count[1], count[2], count[3], count[0]);
    xbuf_puts(b, "</text>\n");
}

static void svg_timeline(xbuf *b, const sc_result *r)
{
    double T = r->run_ms > 0 ? r->run_ms : 1;
    for (size_t i = 0; i < r->nbars; i++)
        if (r->bars[i].t1_ms > T)
            T = r->bars[i].t1_ms;
    for (size_t i = 0; i < r->nmarks; i++)
        if (r->marks[i].t_ms > T)
            T = r->marks[i].t_ms;
    T *= 1.02;
    int *row_of = xcalloc((size_t)r->nlearners + 1, sizeof *row_of);
    int *learner_at = xcalloc(ROWS_MAX, sizeof *learner_at);
    int rows = choose_rows(r, row_of, learner_at);
    bool summary = r->nlearners > rows;
    const int left = 90, width = 1000, plot = width - left - 30, rowh = 16, top = 28;
    const int wsh = 70; /* world size chart */
    int body = (rows + (summary ? 1 : 0)) * rowh;
    int height = top + body + 30 + wsh + 20;
    int maxws = r->nlearners > 0 ? r->nlearners : 1;
    for (size_t i = 0; i < r->nsamples; i++)
        if (r->samples[i].value > maxws)
            maxws = r->samples[i].value;
#define X(t) (left + (t) / T * plot)
    xbuf_printf(b,
                "<div class=\"tl\"><div class=\"zoom\">zoom <button type=\"button\" onclick=\"zoom(this,1)\">1&times;"
                "</button><button type=\"button\" onclick=\"zoom(this,4)\">4&times;</button><button type=\"button\" "
                "onclick=\"zoom(this,16)\">16&times;</button></div><div class=\"scroll\">"
                "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"timeline\" width=\"%d\" height=\"%d\" "
                "viewBox=\"0 0 %d %d\" role=\"img\" aria-label=\"timeline of ",
                width, height, width, height);
    esc(b, r->name);
    xbuf_puts(b, "\">\n");
    xbuf_printf(b, "<rect x=\"0\" y=\"0\" width=\"%d\" height=\"%d\" fill=\"#fff\"/>\n", width, height);
    /* time axis: labels centred on their tick, the last one kept inside */
    double step = nice_step(T);
    int axis_y = top + body + 4;
    for (int k = 0; k * step <= T; k++) {
        double t = k * step;
        const char *anchor = k == 0 ? "start" : X(t) > width - 30 ? "end" : "middle";
        xbuf_printf(b,
                    "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>"
                    "<text x=\"%.1f\" y=\"%d\" class=\"tick\" text-anchor=\"%s\">%g ms</text>\n",
                    X(t), top - 6, X(t), axis_y + wsh + 18, X(t), axis_y + 14, anchor, t);
    }
    /* rows */
    for (int k = 0; k < rows; k++) {
        int y = top + k * rowh;
        xbuf_printf(b, "<text x=\"4\" y=\"%d\" class=\"row\">learner%d</text>\n", y + 12, learner_at[k]);
        xbuf_printf(b, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#f3f3f3\"/>\n", left, y + rowh,
                    width - 20, y + rowh);
    }
    if (summary)
        undrawn_summary(b, r, row_of, rows, left, top + rows * rowh + 12);
    for (size_t i = 0; i < r->nbars; i++) {
        const sc_bar *bar = &r->bars[i];
        int row = bar->learner >= 0 && bar->learner < r->nlearners ? row_of[bar->learner] : -1;
        if (row < 0)
            continue;
        double x0 = X(bar->t0_ms), x1 = X(bar->t1_ms >= bar->t0_ms ? bar->t1_ms : bar->t0_ms);
        if (x1 - x0 < 4) /* a short task stays visible as a bar, not a tick */
            x1 = x0 + 4;
        int y = top + row * rowh + 2;
        static const char *const oc[] = {"open", "completed", "failed", "lost (no report)"};
        const char *stroke = bar->outcome == 2 ? "#d32f2f" : bar->outcome == 3 ? "#ff8f00" : "none";
        xbuf_printf(b,
                    "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" rx=\"2\" fill=\"%s\" "
                    "stroke=\"%s\" stroke-width=\"2\"%s><title>",
                    x0, y, x1 - x0, rowh - 4, task_color(bar->task), stroke,
                    bar->outcome == 3 ? " stroke-dasharray=\"3,2\" fill-opacity=\"0.5\"" : "");
        xbuf_printf(b, "learner%d: ", bar->learner);
        esc(b, bar->task);
        xbuf_printf(b, " %.1f–%.1f ms, %s</title></rect>\n", bar->t0_ms, bar->t1_ms, oc[bar->outcome & 3]);
        if (x1 - x0 > 40) {
            xbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"bar\">", x0 + 3, y + 10);
            esc(b, short_task(bar->task));
            xbuf_puts(b, "</text>\n");
        }
    }
    /* marks: actions red, exits black, events blue, notes grey */
    static const char *const mc[] = {"#d32f2f", "#212121", "#1565c0", "#9e9e9e"};
    int num = 0;
    for (size_t i = 0; i < r->nmarks; i++) {
        const sc_mark *m = &r->marks[i];
        if (m->kind == 3 && m->learner < 0)
            continue;
        double x = X(m->t_ms);
        int row = m->learner >= 0 && m->learner < r->nlearners ? row_of[m->learner] : -1;
        if (row >= 0) {
            int y = top + row * rowh;
            xbuf_printf(
                b, "<path d=\"M%.1f %d l-5 -6 h10 z\" transform=\"translate(0 %d)\" fill=\"%s\"><title>%.0f ms: ", x,
                y + 2, 6, mc[m->kind & 3], m->t_ms);
            esc(b, m->label);
            xbuf_puts(b, "</title></path>\n");
        } else if (m->kind == 0 || m->kind == 1) {
            xbuf_printf(b,
                        "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" "
                        "stroke-dasharray=\"4,3\"><title>%.0f ms: ",
                        x, top - 4, x, top + rows * rowh, mc[m->kind & 3], m->t_ms);
            esc(b, m->label);
            xbuf_puts(b, "</title></line>\n");
        }
        if (m->kind == 0 && num < 30) {
            num++;
            xbuf_printf(b, "<text x=\"%.1f\" y=\"%d\" class=\"mark\" fill=\"%s\">", x + 2, 12 + (num % 2) * 9, mc[0]);
            char lab[40];
            snprintf(lab, sizeof lab, "%s", m->label);
            esc(b, lab);
            xbuf_puts(b, "</text>\n");
        }
    }
    /* world size */
    int wy = axis_y + 22;
    xbuf_printf(b, "<text x=\"4\" y=\"%d\" class=\"row\">world size</text>\n", wy + wsh / 2);
    xbuf_printf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fafafa\" stroke=\"#eee\"/>\n", left, wy,
                plot, wsh);
    xbuf_printf(b,
                "<text x=\"%d\" y=\"%d\" class=\"tick\" text-anchor=\"end\">%d</text><text x=\"%d\" y=\"%d\" "
                "class=\"tick\" text-anchor=\"end\">0</text>\n",
                left - 4, wy + 9, maxws, left - 4, wy + wsh);
    if (r->nsamples) {
        xbuf_puts(b, "<polyline fill=\"none\" stroke=\"#1565c0\" stroke-width=\"2\" points=\"");
        double prev_y = -1;
        for (size_t i = 0; i < r->nsamples; i++) {
            double y = wy + wsh - (double)r->samples[i].value / maxws * (wsh - 4);
            double x = X(r->samples[i].t_ms);
            if (prev_y >= 0)
                xbuf_printf(b, "%.1f,%.1f ", x, prev_y);
            xbuf_printf(b, "%.1f,%.1f ", x, y);
            prev_y = y;
        }
        xbuf_puts(b, "\"><title>world size over time</title></polyline>\n");
    }
    xbuf_puts(b, "</svg></div></div>\n");
    free(row_of);
    free(learner_at);
#undef X
}

static const char *css =
    "body{font:14px/1.4 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:0;color:#222;background:#f6f7f9}"
    "header{background:#263238;color:#fff;padding:16px 24px}header h1{margin:0;font-size:20px}"
    "main{padding:16px 24px}section{background:#fff;border:1px solid #ddd;border-radius:6px;margin:16px 0;"
    "padding:12px 16px}h2{margin:4px 0 8px;font-size:17px}.badge{display:inline-block;padding:1px 8px;"
    "border-radius:10px;color:#fff;font-size:12px;font-weight:bold;vertical-align:middle}.pass{background:#2e7d32}"
    ".fail{background:#c62828}.skip{background:#757575}table{border-collapse:collapse;width:100%}td,th{border-bottom:"
    "1px solid #eee;"
    "padding:3px 6px;text-align:left;vertical-align:top}th{background:#fafafa}pre{white-space:pre-wrap;"
    "word-break:break-word;margin:0;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace}"
    "pre.log{max-height:420px;overflow:auto;background:#fbfbfb;border:1px solid #eee;padding:6px}"
    "code{font:12px ui-monospace,Menlo,Consolas,monospace;background:#f1f1f1;padding:1px 4px;border-radius:3px}"
    ".skipped{color:#757575;font-style:italic}.ok{color:#2e7d32}.bad{color:#c62828;font-weight:bold}.meta{color:#555}"
    "svg.timeline{max-width:100%;height:auto;border:1px solid #eee;margin:4px 0}"
    ".tl .scroll{overflow-x:auto}.tl.zoomed svg.timeline{max-width:none}.zoom{font-size:12px;color:#555}"
    ".zoom button{font-size:11px;margin-left:4px;padding:0 6px}td.t,th.t{white-space:nowrap;text-align:right}"
    "svg text.tick{font:10px sans-serif;fill:#777}svg text.row{font:11px sans-serif;fill:#333}"
    "svg text.bar{font:9px sans-serif;fill:#fff}svg text.mark{font:10px sans-serif}"
    ".legend span{display:inline-block;margin-right:12px;font-size:12px}.legend i{display:inline-block;width:12px;"
    "height:10px;margin-right:4px;vertical-align:middle}details{margin:4px 0}summary{cursor:pointer}"
    "#toc td{padding:2px 6px}";

/* "s-<name>", "s-<name>-<try>" for a try of --repeat/--seeds. */
static void section_id(xbuf *b, const sc_result *r)
{
    xbuf_puts(b, "s-");
    esc(b, r->name);
    if (r->attempt > 0)
        xbuf_printf(b, "-%d", r->attempt);
}

static const char *badge_class(const sc_result *r)
{
    return r->outcome == SC_PASSED ? "pass" : r->outcome == SC_SKIPPED ? "skip" : "fail";
}

static size_t count_skipped(const sc_result *const *res, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += res[i]->outcome == SC_SKIPPED;
    return k;
}

int sc_report_html(const char *path, const sc_result *const *res, size_t n, double wall_ms)
{
    size_t failed = 0;
    for (size_t i = 0; i < n; i++)
        failed += res[i]->outcome == SC_FAILED || res[i]->outcome == SC_ERROR;
    xbuf b = {0};
    xbuf_printf(&b,
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
                "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">"
                "<title>Scenario report: %zu passed, %zu failed</title><style>%s</style></head><body>\n",
                n - failed - count_skipped(res, n), failed, css);
    char ts[64];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%d %H:%M:%S UTC", &tm);
    xbuf_printf(&b,
                "<header><h1>Scenario report</h1><div id=\"totals\">%zu scenario%s: <b>%zu passed</b>, "
                "<b>%zu failed</b>%s in %.1f s &middot; %s</div></header>\n<main>\n",
                n, n == 1 ? "" : "s", n - failed - count_skipped(res, n), failed,
                count_skipped(res, n) ? ", some not run or not judged" : "", wall_ms / 1000.0, ts);
    /* table of contents */
    xbuf_puts(
        &b, "<section><h2>Scenarios</h2><table id=\"toc\"><tr><th>scenario</th><th>result</th><th class=\"t\">time</th>"
            "<th class=\"t\">seed</th><th>checks</th><th>description</th></tr>\n");
    for (size_t i = 0; i < n; i++) {
        const sc_result *r = res[i];
        char lb[96];
        label(lb, sizeof lb, r);
        char ckt[48];
        sc_report_checks_text(ckt, sizeof ckt, r);
        xbuf_puts(&b, "<tr><td><a href=\"#");
        section_id(&b, r);
        xbuf_puts(&b, "\">");
        esc(&b, lb);
        xbuf_printf(
            &b,
            "</a></td><td><span class=\"badge %s\">%s</span></td><td class=\"t\">%.2f s</td><td class=\"t\">%llu</td>"
            "<td class=\"t\">%s</td><td>",
            badge_class(r), sc_outcome_word(r->outcome), r->duration_ms / 1000.0, (unsigned long long)r->seed,
            ckt);
        esc(&b, r->description);
        xbuf_puts(&b, "</td></tr>\n");
    }
    xbuf_puts(&b, "</table></section>\n");
    for (size_t i = 0; i < n; i++) {
        const sc_result *r = res[i];
        char lb[96];
        label(lb, sizeof lb, r);
        xbuf_puts(&b, "<section class=\"scenario\" id=\"");
        section_id(&b, r);
        xbuf_puts(&b, "\"><h2>");
        esc(&b, lb);
        xbuf_printf(&b, " <span class=\"badge %s\">%s</span></h2>\n<p>", badge_class(r), sc_outcome_word(r->outcome));
        esc(&b, r->description);
        xbuf_printf(&b, "</p>\n<p class=\"meta\">file <code>");
        esc(&b, r->path);
        xbuf_printf(&b, "</code> &middot; seed %llu &middot; %.2f s &middot; run folder <code>",
                    (unsigned long long)r->seed, r->duration_ms / 1000.0);
        esc(&b, r->run_dir ? r->run_dir : "none (not run)");
        xbuf_puts(&b, "</code><br>replay: <code>");
        esc(&b, r->replay);
        xbuf_puts(&b, "</code></p>\n");
        if (r->error) {
            xbuf_puts(&b, "<p class=\"bad\">");
            esc(&b, r->error);
            xbuf_puts(&b, "</p>\n");
        }
        if (!r->run_dir) { /* not run: nothing more to show */
            xbuf_puts(&b, "</section>\n");
            continue;
        }
        svg_timeline(&b, r);
        xbuf_puts(&b, "<div class=\"legend\"><span><i style=\"background:#9e9e9e\"></i>resource</span>"
                      "<span><i style=\"background:#1e88e5\"></i>start</span><span><i style=\"background:#00897b\"></i>"
                      "get_data</span><span><i style=\"background:#43a047\"></i>learn</span><span><i "
                      "style=\"background:#8e24aa\"></i>close</span><span><i style=\"border:2px solid #d32f2f\"></i>"
                      "failed</span><span><i style=\"border:2px dashed #ff8f00\"></i>lost</span><span style=\"color:"
                      "#d32f2f\">&#9660; / dashed line: injected fault</span><span>&#9660; black: exit</span>"
                      "<span style=\"color:#1565c0\">&#9660; event &middot; line: world size</span></div>\n");
        /* the injected faults and events, as a list */
        xbuf_puts(&b, "<details><summary>faults, exits and events</summary><table><tr><th class=\"t\">t "
                      "(ms)</th><th>what</th></tr>");
        for (size_t k = 0; k < r->nmarks; k++) {
            xbuf_printf(&b, "<tr><td class=\"t\">%.1f</td><td>", r->marks[k].t_ms);
            esc(&b, r->marks[k].label);
            xbuf_puts(&b, "</td></tr>");
        }
        xbuf_puts(&b, "</table></details>\n");
        xbuf_puts(&b, "<table class=\"checks\"><tr><th></th><th>line</th><th>expectation</th><th>seen</th></tr>\n");
        for (size_t k = 0; k < r->nchecks; k++) {
            const sc_check *c = &r->checks[k];
            xbuf_printf(&b, "<tr><td class=\"%s\">%s</td><td>%d</td><td>",
                        c->skipped ? "skipped" : c->ok ? "ok" : "bad",
                        c->skipped ? "skipped" : c->ok ? "&#10004;" : "&#10008;", c->line);
            esc(&b, c->what);
            xbuf_puts(&b, "</td><td><pre>");
            esc(&b, c->detail);
            xbuf_puts(&b, "</pre></td></tr>\n");
        }
        xbuf_puts(&b, "</table>\n");
        if (r->coordinator_summary) {
            xbuf_puts(&b, "<details><summary>coordinator summary</summary><pre class=\"log\">");
            esc(&b, r->coordinator_summary);
            xbuf_puts(&b, "</pre></details>\n");
        }
        for (size_t p = 0; p <= r->nprocs; p++) {
            char *lp = p < r->nprocs ? xstrdup(r->logs[p]) : xasprintf("%s/runner.log", r->run_dir);
            bool cut;
            char *tail = tail_of(lp, r->passed ? LOG_TAIL_BYTES / 4 : LOG_TAIL_BYTES, &cut);
            if (tail && tail[0]) {
                xbuf_puts(&b, "<details><summary>log: ");
                esc(&b, p < r->nprocs ? r->procs[p] : "runner");
                xbuf_printf(&b, "%s</summary><pre class=\"log\">", cut ? " (last part)" : "");
                esc(&b, tail);
                xbuf_puts(&b, "</pre></details>\n");
            }
            free(tail);
            free(lp);
        }
        xbuf_puts(&b, "</section>\n");
    }
    /* the zoom buttons of the timelines: the SVG drawn N times as wide, in a
     * box that scrolls */
    xbuf_puts(&b, "</main><script>function zoom(b,n){var t=b.closest('.tl'),s=t.querySelector('svg');"
                  "t.classList.toggle('zoomed',n>1);s.style.width=n>1?(n*s.getAttribute('width'))+'px':'';}"
                  "</script></body></html>\n");
    int rc = write_file(path, b.data, b.len);
    xbuf_free(&b);
    return rc;
}
