/* bench: shared pieces of the benchmark programs (docs/benchmarks.md): CPU
 * and memory figures of a process from /proc, one CSV row format, and the
 * loopback floor (a minimal C client and server).
 *
 * Ownership: strings returned are heap strings the caller frees.
 * Threading: single-threaded programs. */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CPU time of a process: total (ns, /proc/PID/schedstat: exact), and its
 * user / system split (/proc/PID/stat, clock ticks, so coarse: 10 ms). */
typedef struct {
    uint64_t total_ns;
    double user_s, sys_s;
} bench_cpu;
bool bench_cpu_read(pid_t pid, bench_cpu *out);
/* VmHWM (peak resident set) and VmRSS of a process, in bytes; 0 if unknown. */
uint64_t bench_peak_rss(pid_t pid);
uint64_t bench_rss(pid_t pid);

/* One CSV row; the header is BENCH_CSV_HEADER. Unused figures are < 0 and
 * written empty. */
typedef struct {
    const char *kind;  /* "rounds", "floor", "large" */
    const char *impl;  /* "c" (this aggregator), "python" (DI-engine's), "floor" */
    int learners;
    double mib;        /* large: learn data size */
    long rounds;       /* measured rounds */
    double round_ms_median, round_ms_mean, round_ms_p90;
    double rounds_per_s;
    double cpu_us_per_round; /* the aggregator's (floor: client + server) */
    double cpu_us_per_task;  /* per learner-task (floor: per exchange) */
    double user_s, sys_s;    /* the aggregator's, over the measured rounds */
    double mbps;             /* large: learn data MB/s (10^6 bytes) end to end */
    double peak_rss_mib;     /* large: the aggregator's VmHWM */
    double rss_ratio;        /* large: VmHWM / learn data bytes */
    double learners_cpu_us_per_round; /* the mock_learner process's */
} bench_row;
#define BENCH_CSV_HEADER                                                                              \
    "kind,impl,learners,mib,rounds,round_ms_median,round_ms_mean,round_ms_p90,rounds_per_s,"          \
    "cpu_us_per_round,cpu_us_per_task,user_s,sys_s,mbps,peak_rss_mib,rss_ratio,learners_cpu_us_per_round"
void bench_row_init(bench_row *r, const char *kind, const char *impl);
/* Appends the row to path (writing the header first if the file is new or
 * empty). Returns 0 or -1. */
int bench_csv_append(const char *path, const bench_row *r);
/* Parses one CSV line into r (strings point into line, which is modified).
 * Returns false on a header or malformed line. */
bool bench_csv_parse(char *line, bench_row *r);

/* CLOCK_MONOTONIC and this process's CPU time (CLOCK_PROCESS_CPUTIME_ID),
 * in ns. */
uint64_t bench_now_ns(void);
uint64_t bench_self_cpu_ns(void);

/* Median, mean and 90th percentile of v[0..n) (sorts v). */
void bench_stats(double *v, size_t n, double *median, double *mean, double *p90);

/* The loopback floor: a minimal epoll HTTP/1.1 server in a child process
 * and a minimal client doing, per round, what one aggregator round costs
 * in exchanges: twice (get-data, learn) one exchange on a coordinator
 * connection, `learners` exchanges at once (task/new), `learners` at once
 * (reports), one more on the coordinator connection; requests and replies
 * of the protocol's sizes, keep-alive. Runs at least min_rounds rounds and
 * at least `seconds`. Fills r (kind "floor"). Returns 0 or -1 (err). */
int bench_floor(int learners, double seconds, long min_rounds, bench_row *r, char *err, size_t errlen);

/* Fills a floor row from nt round times (ms; sorted), the elapsed time and
 * the CPU of both sides over the rounds. */
void bench_floor_row(bench_row *row, const char *impl, int learners, double *times, size_t nt, double elapsed_s,
                     uint64_t cpu_ns);

/* The library floor: the same exchanges on libmicrohttpd (hs's settings)
 * and a libcurl multi client, both in this process on one ev loop; CPU is
 * this process's, per exchange (client and server sides). Fills r (kind
 * "floor", impl "libfloor"). Returns 0 or -1 (err). */
int bench_lib_floor(int learners, double seconds, long min_rounds, bench_row *r, char *err, size_t errlen);

/* Writes an SVG plot of the rows of csv_path (all kinds) to svg_path. */
int bench_plot(const char *csv_path, const char *svg_path, char *err, size_t errlen);

#endif
