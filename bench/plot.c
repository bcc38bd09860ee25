/* plot: an SVG of benchmark CSV rows, written by hand (no plotting
 * package): round time and aggregator CPU per learner-task against the
 * number of learners (log-log), and large-batch throughput. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "xalloc.h"

#define PW 300.0 /* panel width */
#define PH 240.0
#define ML 60.0 /* margins inside a panel */
#define MB 40.0
#define MT 30.0

typedef struct {
    bench_row *v;
    size_t n;
    char **lines;
} rows;

static const char *color(const char *impl)
{
    if (strcmp(impl, "c") == 0)
        return "#1f77b4";
    if (strcmp(impl, "python") == 0)
        return "#d62728";
    if (strcmp(impl, "floor-1core") == 0)
        return "#b0b0b0";
    return "#7f7f7f";
}

static const char *label(const char *impl)
{
    if (strcmp(impl, "c") == 0)
        return "this aggregator";
    if (strcmp(impl, "python") == 0)
        return "DI-engine (Python)";
    if (strcmp(impl, "floor-1core") == 0)
        return "loopback floor, one core";
    return "loopback floor";
}

typedef double (*getter)(const bench_row *);
static double g_round(const bench_row *r)
{
    return r->round_ms_median;
}
static double g_cpu(const bench_row *r)
{
    return r->cpu_us_per_task;
}

/* A log-log panel at x0 of getter(rows of kinds) against learners. */
static void loglog(FILE *f, const rows *rs, double x0, const char *title, const char *ylab, getter g,
                   bool with_floor)
{
    double ymin = 1e300, ymax = 0, xmax = 1;
    for (size_t i = 0; i < rs->n; i++) {
        const bench_row *r = &rs->v[i];
        bool floor_ = strcmp(r->kind, "floor") == 0;
        if ((strcmp(r->kind, "rounds") != 0 && !floor_) || (floor_ && !with_floor) || g(r) <= 0)
            continue;
        ymin = fmin(ymin, g(r));
        ymax = fmax(ymax, g(r));
        xmax = fmax(xmax, r->learners);
    }
    if (ymax <= 0)
        return;
    double ly0 = floor(log10(ymin)), ly1 = ceil(log10(ymax));
    if (ly1 <= ly0)
        ly1 = ly0 + 1;
    double lx1 = ceil(log10(xmax));
    if (lx1 < 1)
        lx1 = 1;
    double w = PW - ML - 10, h = PH - MT - MB;
#define X(v) (x0 + ML + w * log10(v) / lx1)
#define Y(v) (MT + h - h * (log10(v) - ly0) / (ly1 - ly0))
    fprintf(f, "<text x='%.1f' y='18' font-size='13' font-weight='bold'>%s</text>\n", x0 + ML, title);
    fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#000'/>\n", x0 + ML, MT, w,
            h);
    for (double e = ly0; e <= ly1; e++) {
        double v = pow(10, e);
        fprintf(f, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#ddd'/>\n", x0 + ML, x0 + ML + w, Y(v), Y(v));
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='end'>%g</text>\n", x0 + ML - 4, Y(v) + 3, v);
    }
    for (double e = 0; e <= lx1; e++) {
        double v = pow(10, e);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle'>%g</text>\n", X(v), MT + h + 14, v);
    }
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle'>learners</text>\n", x0 + ML + w / 2,
            MT + h + 30);
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle' transform='rotate(-90 %.1f %.1f)'>%s</text>\n",
            x0 + 14, MT + h / 2, x0 + 14, MT + h / 2, ylab);
    const char *impls[] = {"c", "python", "floor", "floor-1core"};
    double ly = MT + 12;
    for (size_t k = 0; k < 4; k++) {
        xbuf pts = {0};
        for (size_t i = 0; i < rs->n; i++) {
            const bench_row *r = &rs->v[i];
            bool floor_ = strcmp(r->kind, "floor") == 0;
            if ((strcmp(r->kind, "rounds") != 0 && !floor_) || (floor_ && !with_floor) ||
                strcmp(r->impl, impls[k]) != 0 || g(r) <= 0 || r->learners < 1)
                continue;
            xbuf_printf(&pts, "%.1f,%.1f ", X(r->learners), Y(g(r)));
            fprintf(f, "<circle cx='%.1f' cy='%.1f' r='2.5' fill='%s'/>\n", X(r->learners), Y(g(r)), color(impls[k]));
        }
        if (!pts.len)
            continue;
        fprintf(f, "<polyline points='%s' fill='none' stroke='%s' stroke-width='1.5'%s/>\n", pts.data,
                color(impls[k]), k >= 2 ? " stroke-dasharray='4 3'" : "");
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' fill='%s'>%s</text>\n", x0 + ML + 6, ly, color(impls[k]),
                label(impls[k]));
        ly += 12;
        xbuf_free(&pts);
    }
#undef X
#undef Y
}

static void large(FILE *f, const rows *rs, double x0)
{
    double vmax = 0;
    size_t nb = 0;
    for (size_t i = 0; i < rs->n; i++)
        if (strcmp(rs->v[i].kind, "large") == 0 && rs->v[i].mbps > 0) {
            vmax = fmax(vmax, rs->v[i].mbps);
            nb++;
        }
    if (!nb)
        return;
    double w = PW - ML - 10, h = PH - MT - MB;
    double top = ceil(vmax / 200) * 200;
    fprintf(f, "<text x='%.1f' y='18' font-size='13' font-weight='bold'>Large learn data, 8 learners</text>\n",
            x0 + ML);
    fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='none' stroke='#000'/>\n", x0 + ML, MT, w,
            h);
    for (double v = 0; v <= top; v += top / 4) {
        double y = MT + h - h * v / top;
        fprintf(f, "<line x1='%.1f' x2='%.1f' y1='%.1f' y2='%.1f' stroke='#ddd'/>\n", x0 + ML, x0 + ML + w, y, y);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='end'>%g</text>\n", x0 + ML - 4, y + 3, v);
    }
    fprintf(f, "<text x='%.1f' y='%.1f' font-size='11' text-anchor='middle' transform='rotate(-90 %.1f %.1f)'>MB/s end to end</text>\n",
            x0 + 14, MT + h / 2, x0 + 14, MT + h / 2);
    double bw = w / (double)nb;
    size_t k = 0;
    for (size_t i = 0; i < rs->n; i++) {
        const bench_row *r = &rs->v[i];
        if (strcmp(r->kind, "large") != 0 || r->mbps <= 0)
            continue;
        double bh = h * r->mbps / top, bx = x0 + ML + bw * (double)k + bw * 0.15;
        fprintf(f, "<rect x='%.1f' y='%.1f' width='%.1f' height='%.1f' fill='%s'/>\n", bx, MT + h - bh, bw * 0.7, bh,
                color(r->impl));
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='10' text-anchor='middle'>%g MiB</text>\n", bx + bw * 0.35,
                MT + h + 14, r->mib);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='9' text-anchor='middle'>RSS %.2fx</text>\n", bx + bw * 0.35,
                MT + h + 26, r->rss_ratio);
        fprintf(f, "<text x='%.1f' y='%.1f' font-size='9' text-anchor='middle'>%.0f</text>\n", bx + bw * 0.35,
                MT + h - bh - 3, r->mbps);
        k++;
    }
}

int bench_plot(const char *csv_path, const char *svg_path, char *err, size_t errlen)
{
    FILE *in = fopen(csv_path, "r");
    if (!in) {
        snprintf(err, errlen, "cannot read %s", csv_path);
        return -1;
    }
    rows rs = {0};
    size_t cap = 0;
    char line[1024];
    while (fgets(line, sizeof line, in)) {
        if (rs.n == cap) {
            cap = cap ? cap * 2 : 32;
            rs.v = xrealloc(rs.v, cap * sizeof *rs.v);
            rs.lines = xrealloc(rs.lines, cap * sizeof *rs.lines);
        }
        rs.lines[rs.n] = xstrdup(line);
        if (bench_csv_parse(rs.lines[rs.n], &rs.v[rs.n]))
            rs.n++;
        else
            free(rs.lines[rs.n]);
    }
    fclose(in);
    FILE *f = fopen(svg_path, "w");
    if (!f) {
        snprintf(err, errlen, "cannot write %s", svg_path);
        return -1;
    }
    fprintf(f, "<svg xmlns='http://www.w3.org/2000/svg' width='%.0f' height='%.0f' font-family='sans-serif'>\n",
            3 * PW + 20, PH);
    fprintf(f, "<rect width='100%%' height='100%%' fill='#fff'/>\n");
    loglog(f, &rs, 0, "Round time (get-data + learn)", "ms per round (median)", g_round, true);
    loglog(f, &rs, PW + 10, "Aggregator CPU per learner-task", "us (user + sys)", g_cpu, false);
    large(f, &rs, 2 * PW + 20);
    fprintf(f, "</svg>\n");
    fclose(f);
    for (size_t i = 0; i < rs.n; i++)
        free(rs.lines[i]);
    free(rs.lines);
    free(rs.v);
    return 0;
}
