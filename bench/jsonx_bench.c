/* jsonx_bench: throughput of the jsonx validator and shallow parser on
 * payloads shaped like learn data (docs/benchmarks.md):
 *   numbers  a learn task's data: items {"obs": [0.123456, ...], "reward": 1.0}
 *   floats   the same with doubles as Python prints them (12 to 17 digits)
 *   strings  a list of ASCII strings of about 100 bytes, some with escapes
 *   utf8     the same with non-ASCII bytes
 *   pyfloats items {"obs": [...]} of doubles as Python's json prints them
 *            (shortest round-trip form, up to 17 significant digits, half
 *            negative, some with exponents such as -1.2e-05)
 *   ints     items {"obs": [...]} of integers, some negative
 *   nested   DI-engine-like transitions: a dict of nested float lists,
 *            ints, booleans and short strings
 * For each: jsonx_array_items (validation only) and jsonx_parse_shallow with
 * raw_depth 0 (each item validated and kept as one Raw item), in GB/s
 * (10^9 bytes) of CPU time, best of --reps runs.
 *   jsonx_bench [--mib M] [--reps R] [--only NAME[,NAME...]]
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

/* A double as Python's repr (and json.dumps) prints it: the shortest
 * %.Ng that reads back to the same double; %g's exponent form (1e-05) is
 * Python's too in this range. */
static void put_pyfloat(xbuf *b, double v)
{
    char t[40];
    int prec = 15; /* the fewest digits that read back (more always do) */
    snprintf(t, sizeof t, "%.*g", prec, v);
    if (strtod(t, NULL) == v) {
        while (prec > 1) {
            char u[40];
            snprintf(u, sizeof u, "%.*g", prec - 1, v);
            if (strtod(u, NULL) != v)
                break;
            memcpy(t, u, sizeof t);
            prec--;
        }
    } else {
        while (prec < 17 && (snprintf(t, sizeof t, "%.*g", ++prec, v), strtod(t, NULL) != v))
            ;
    }
    if (!strchr(t, '.') && !strchr(t, 'e'))
        strcat(t, ".0"); /* Python writes 1.0, not 1 */
    xbuf_puts(b, t);
}

/* Reproducible pseudo-random doubles in [-0.5, 0.5), a few tiny. */
static double next_double(unsigned *x, unsigned i)
{
    *x = *x * 1103515245u + 12345u;
    double v = (double)(*x >> 8) / 16777216.0 - 0.5;
    v += (double)(*x & 0xFF) / 16777216.0 / 256.0; /* more than 24 bits */
    return i % 40 == 0 ? v * 1e-4 : v;
}

static void pyfloat_item(xbuf *b, unsigned k)
{
    xbuf_puts(b, "{\"obs\": [");
    unsigned x = k * 2654435761u + 7;
    for (unsigned i = 0; i < 2000; i++) {
        if (i)
            xbuf_puts(b, ", ");
        put_pyfloat(b, next_double(&x, i));
    }
    xbuf_puts(b, "]}");
}

static void int_item(xbuf *b, unsigned k)
{
    xbuf_puts(b, "{\"obs\": [");
    unsigned x = k * 2654435761u + 3;
    for (unsigned i = 0; i < 2000; i++) {
        x = x * 1103515245u + 12345u;
        int v = (int)(x >> 16) % (i % 3 ? 256 : 100000) - (i % 5 == 0 ? 50 : 0);
        xbuf_printf(b, "%s%d", i ? ", " : "", v);
    }
    xbuf_puts(b, "]}");
}

static void put_float_list(xbuf *b, unsigned *x, unsigned n)
{
    xbuf_puts(b, "[");
    for (unsigned i = 0; i < n; i++) {
        if (i)
            xbuf_puts(b, ", ");
        put_pyfloat(b, next_double(x, i + 1));
    }
    xbuf_puts(b, "]");
}

/* A transition as DI-engine's learn data holds it. */
static void nested_item(xbuf *b, unsigned k)
{
    unsigned x = k * 2654435761u + 11;
    xbuf_puts(b, "{\"obs\": [");
    for (unsigned r = 0; r < 4; r++) {
        xbuf_puts(b, r ? ", " : "");
        put_float_list(b, &x, 16);
    }
    xbuf_puts(b, "], \"next_obs\": [");
    for (unsigned r = 0; r < 4; r++) {
        xbuf_puts(b, r ? ", " : "");
        put_float_list(b, &x, 16);
    }
    xbuf_printf(b, "], \"action\": [%u], \"logit\": ", k % 6);
    put_float_list(b, &x, 6);
    xbuf_printf(b, ", \"reward\": [%s], \"done\": %s, \"collect_iter\": %u, \"priority\": 1.0, "
                   "\"info\": {\"env_id\": %u, \"policy\": \"p%u\", \"eval_flag\": false}}",
                k % 9 ? "0.0" : "1.0", k % 200 == 199 ? "true" : "false", k / 64, k % 8, k % 3);
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

/* True if name is one of the comma-separated names in list. */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *o = list; *o;) {
        size_t m = strcspn(o, ",");
        if (m == n && strncmp(o, name, n) == 0)
            return true;
        o += m + (o[m] == ',');
    }
    return false;
}

int main(int argc, char **argv)
{
    double mib = 64;
    int reps = 3;
    const char *only = NULL;
    struct {
        const char *name;
        void (*item)(xbuf *, unsigned);
    } kinds[] = {{"numbers", number_item}, {"floats", float_item},  {"pyfloats", pyfloat_item},
                 {"ints", int_item},       {"nested", nested_item}, {"strings", string_item},
                 {"utf8", utf8_item}};
    const size_t nkinds = sizeof kinds / sizeof kinds[0];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("usage: jsonx_bench [--mib M] [--reps R] [--only NAME[,NAME...]]\n"
                   "Throughput (GB/s of CPU time, best of R runs, default 3) of jsonx_array_items and\n"
                   "jsonx_parse_shallow(raw_depth 0) on a JSON array of about M MiB (default 64) of\n"
                   "items of each payload:");
            for (size_t k = 0; k < nkinds; k++)
                printf(" %s", kinds[k].name);
            printf("\n(see the comment at the top of bench/jsonx_bench.c).\n");
            return 0;
        }
        if (i + 1 >= argc) {
            fprintf(stderr, "jsonx_bench: %s needs a value (see --help)\n", argv[i]);
            return 2;
        }
        if (strcmp(argv[i], "--mib") == 0) {
            mib = atof(argv[++i]);
        } else if (strcmp(argv[i], "--reps") == 0) {
            reps = atoi(argv[++i]);
        } else if (strcmp(argv[i], "--only") == 0) {
            only = argv[++i];
        } else {
            fprintf(stderr, "jsonx_bench: unknown option %s (see --help)\n", argv[i]);
            return 2;
        }
    }
    if (mib <= 0 || reps <= 0) {
        fprintf(stderr, "jsonx_bench: --mib and --reps must be positive (see --help)\n");
        return 2;
    }
    if (only) { /* every name must be known */
        for (const char *o = only; *o;) {
            size_t n = strcspn(o, ",");
            size_t k = 0;
            while (k < nkinds && !(strlen(kinds[k].name) == n && strncmp(kinds[k].name, o, n) == 0))
                k++;
            if (k == nkinds) {
                fprintf(stderr, "jsonx_bench: unknown payload '%.*s' in --only (see --help)\n", (int)n, o);
                return 2;
            }
            o += n + (o[n] == ',');
        }
    }
    printf("%-8s %10s %14s %14s\n", "payload", "MiB", "validate GB/s", "shallow GB/s");
    for (size_t k = 0; k < nkinds; k++) {
        if (only && !listed(only, kinds[k].name))
            continue;
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
        printf("%-8s %10.1f %14.3f %14.3f\n", kinds[k].name, (double)len / 1048576, (double)len / 1e9 / best_v,
               (double)len / 1e9 / best_s);
        free(text);
    }
    return 0;
}
