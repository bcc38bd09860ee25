/* bench_util: /proc figures, CSV rows and statistics for the benchmarks. */
#include "bench.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

bool bench_cpu_read(pid_t pid, bench_cpu *out)
{
    char path[64], buf[2048];
    memset(out, 0, sizeof *out);
    snprintf(path, sizeof path, "/proc/%d/schedstat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    unsigned long long ns = 0;
    int ok = fscanf(f, "%llu", &ns) == 1;
    fclose(f);
    if (!ok)
        return false;
    out->total_ns = ns;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (!f)
        return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* Fields after the command name (which may hold spaces): state is
     * field 3, utime 14, stime 15. */
    char *p = strrchr(buf, ')');
    if (!p)
        return false;
    unsigned long ut = 0, st = 0;
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return false;
    long hz = sysconf(_SC_CLK_TCK);
    out->user_s = (double)ut / (double)hz;
    out->sys_s = (double)st / (double)hz;
    return true;
}

static uint64_t status_kib(pid_t pid, const char *key)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v * 1024u;
}

uint64_t bench_peak_rss(pid_t pid)
{
    return status_kib(pid, "VmHWM");
}

uint64_t bench_rss(pid_t pid)
{
    return status_kib(pid, "VmRSS");
}

void bench_row_init(bench_row *r, const char *kind, const char *impl)
{
    r->kind = kind;
    r->impl = impl;
    r->learners = 0;
    r->rounds = 0;
    r->mib = r->round_ms_median = r->round_ms_mean = r->round_ms_p90 = r->rounds_per_s = -1;
    r->cpu_us_per_round = r->cpu_us_per_task = r->user_s = r->sys_s = -1;
    r->mbps = r->peak_rss_mib = r->rss_ratio = r->learners_cpu_us_per_round = -1;
}

static void put(FILE *f, double v)
{
    if (v >= 0)
        fprintf(f, ",%.6g", v);
    else
        fputs(",", f);
}

int bench_csv_append(const char *path, const bench_row *r)
{
    struct stat st;
    bool fresh = stat(path, &st) != 0 || st.st_size == 0;
    FILE *f = fopen(path, "a");
    if (!f)
        return -1;
    if (fresh)
        fprintf(f, "%s\n", BENCH_CSV_HEADER);
    fprintf(f, "%s,%s,%d", r->kind, r->impl, r->learners);
    put(f, r->mib);
    fprintf(f, ",%ld", r->rounds);
    const double v[] = {r->round_ms_median, r->round_ms_mean, r->round_ms_p90, r->rounds_per_s,
                        r->cpu_us_per_round, r->cpu_us_per_task, r->user_s, r->sys_s,
                        r->mbps, r->peak_rss_mib, r->rss_ratio, r->learners_cpu_us_per_round};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        put(f, v[i]);
    fputs("\n", f);
    return fclose(f) == 0 ? 0 : -1;
}

/* strsep-like split that keeps empty fields. */
static char *field(char **s)
{
    char *start = *s;
    if (!start)
        return NULL;
    char *c = strchr(start, ',');
    if (c) {
        *c = '\0';
        *s = c + 1;
    } else {
        *s = NULL;
    }
    return start;
}

static double num(const char *s)
{
    return s && *s ? strtod(s, NULL) : -1;
}

bool bench_csv_parse(char *line, bench_row *r)
{
    line[strcspn(line, "\r\n")] = '\0';
    if (strncmp(line, "kind,", 5) == 0 || !*line)
        return false;
    char *s = line;
    char *f[17];
    for (int i = 0; i < 17; i++) {
        f[i] = field(&s);
        if (!f[i])
            return false;
    }
    bench_row_init(r, f[0], f[1]);
    r->learners = atoi(f[2]);
    r->mib = num(f[3]);
    r->rounds = atol(f[4]);
    r->round_ms_median = num(f[5]);
    r->round_ms_mean = num(f[6]);
    r->round_ms_p90 = num(f[7]);
    r->rounds_per_s = num(f[8]);
    r->cpu_us_per_round = num(f[9]);
    r->cpu_us_per_task = num(f[10]);
    r->user_s = num(f[11]);
    r->sys_s = num(f[12]);
    r->mbps = num(f[13]);
    r->peak_rss_mib = num(f[14]);
    r->rss_ratio = num(f[15]);
    r->learners_cpu_us_per_round = num(f[16]);
    return true;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

void bench_stats(double *v, size_t n, double *median, double *mean, double *p90)
{
    if (n == 0) {
        *median = *mean = *p90 = -1;
        return;
    }
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++)
        sum += v[i];
    *mean = sum / (double)n;
    *median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    size_t k = (size_t)((double)(n - 1) * 0.9 + 0.5);
    *p90 = v[k < n ? k : n - 1];
}

uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t bench_self_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
