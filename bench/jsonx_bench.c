/* jsonx_bench: throughput of the jsonx validator and shallow parser on
 * payloads shaped like learn data (docs/benchmarks.md):
 *   numbers  a learn task's data: items {"obs": [0.123456, ...], "reward": 1.0}
 *   floats   the same with doubles as Python prints them (12 to 17 digits)
 *   strings  a list of ASCII strings of about 100 bytes, some with escapes
 *   utf8     the same with non-ASCII bytes
 * For each: jsonx_array_items (validation only) and jsonx_parse_shallow with
 * raw_depth 1 (what a slave with raw_depth 2 does to the items), in MB/s
 * (10^6 bytes), best of --reps runs.
 *   jsonx_bench [--mib M] [--reps R]
 * Single-threaded; allocations are freed before exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jsonx.h"
#include "xalloc.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts); /* CPU time: steadier on a shared machine */
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A JSON array of about `size` bytes of items made by `item`. */
static char *make_array(size_t size, void (*item)(xbuf *b, unsigned k), size_t *len)
{
    xbuf b = {0};
    b.cap = size + 4096;
    b.data = xmalloc(b.cap);
    xbuf_puts(&b, "[");
    for (unsigned k = 0; b.len < size; k++) {
        if (k)
            xbuf_puts(&b, ", ");
        item(&b, k);
    }
    xbuf_puts(&b, "]");
    *len = b.len;
    return xbuf_take(&b);
}

static void number_item(xbuf *b, unsigned k)
{
    xbuf_puts(b, "{\"obs\": [");
    for (unsigned i = 0; i < 2000; i++)
        xbuf_printf(b, "%s0.%06u", i ? ", " : "", (i * 7919 + k) % 1000000);
    xbuf_puts(b, "], \"reward\": 1.0}");
}

/* Python's repr of doubles: 17 significant digits or fewer, signs, some
 * exponents. */
static void float_item(xbuf *b, unsigned k)
{
    xbuf_puts(b, "{\"obs\": [");
    unsigned x = k * 2654435761u + 1;
    for (unsigned i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        double v = (double)(x >> 8) / 16777216.0 - 0.5;
        if (i % 50 == 0)
            v *= 1e-7;
        xbuf_printf(b, "%s%.*g", i ? ", " : "", 12 + (int)(x % 6), v);
    }
    xbuf_puts(b, "], \"reward\": 1.0}");
}

static void string_item(xbuf *b, unsigned k)
{
    xbuf_printf(b, "\"%s step %u of the episode, with a fairly long free-text note that has no escapes\"",
                k % 7 ? "plain" : "tab\\tquote\\\"", k);
}

static void utf8_item(xbuf *b, unsigned k)
{
    xbuf_printf(b, "\"Schritt %u: Größe über Maß, 学習データ, ok\"", k);
}

static bool noop(void *data, size_t index, const char *item, size_t len)
{
    (void)data, (void)index, (void)item, (void)len;
    return true;
}

int main(int argc, char **argv)
{
    double mib = 64;
    int reps = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--mib") == 0)
            mib = atof(argv[i + 1]);
        else if (strcmp(argv[i], "--reps") == 0)
            reps = atoi(argv[i + 1]);
    }
    if (mib <= 0 || reps <= 0) {
        fprintf(stderr, "usage: jsonx_bench [--mib M] [--reps R]\n");
        return 2;
    }
    struct {
        const char *name;
        void (*item)(xbuf *, unsigned);
    } kinds[] = {{"numbers", number_item}, {"floats", float_item}, {"strings", string_item}, {"utf8", utf8_item}};
    printf("%-8s %10s %14s %14s\n", "payload", "MiB", "validate MB/s", "shallow MB/s");
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        size_t len;
        char *text = make_array((size_t)(mib * 1048576), kinds[k].item, &len);
        double best_v = 1e300, best_s = 1e300;
        char err[256];
        for (int r = 0; r < reps; r++) {
            double t0 = now_s();
            long n = jsonx_array_items(text, len, noop, NULL, err, sizeof err);
            double t1 = now_s();
            cJSON *t = jsonx_parse_shallow(text, len, 0, err, sizeof err);
            double t2 = now_s();
            if (n < 0 || !t) {
                fprintf(stderr, "jsonx_bench: %s does not parse: %s\n", kinds[k].name, err);
                return 1;
            }
            cJSON_Delete(t);
            best_v = t1 - t0 < best_v ? t1 - t0 : best_v;
            best_s = t2 - t1 < best_s ? t2 - t1 : best_s;
        }
        printf("%-8s %10.1f %14.1f %14.1f\n", kinds[k].name, (double)len / 1048576, (double)len / 1e6 / best_v,
               (double)len / 1e6 / best_s);
        free(text);
    }
    return 0;
}
