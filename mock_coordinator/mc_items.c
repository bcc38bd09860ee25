/* mc_items: deterministic learn data with exactness traps. */
#include "mc_items.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "xalloc.h"

/* splitmix64: a small, well-mixed generator; enough for test data. */
static uint64_t mix(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void append_item(xbuf *b, unsigned long round, size_t i, uint64_t seed, size_t item_size)
{
    size_t start = b->len;
    uint64_t st = seed * 1000003ull + round * 7919ull + i;
    int a = (int)(mix(&st) % 2001) - 1000;
    unsigned fw = (unsigned)(mix(&st) % 1000);
    int fi = (int)(mix(&st) % 100);
    unsigned em = (unsigned)(mix(&st) % 999) + 1;
    xbuf_printf(b,
                "{\"id\": \"r%lu-%zu\", \"obs\": [%d, -%d.%03u, %ue-3, 0.1, 1.0, 1e+300], \"reward\": 0.5, "
                "\"big\": 9007199254740993, "
                "\"s\": \"unicode \\u00e9 \xc3\xa9 \xe2\x9c\x93 and escapes \\n \\\" \\\\ \\t \\/ \\u0001\"",
                round, i, a, fi, fw, em);
    size_t used = b->len - start + 2; /* the closing brace */
    if (item_size > used + 10) {
        size_t pad = item_size - used - 10;
        xbuf_puts(b, ", \"pad\": \"");
        char chunk[64];
        for (size_t k = 0; k < sizeof chunk; k++)
            chunk[k] = (char)('a' + (k * 7 + i) % 26);
        while (pad > 0) {
            size_t n = pad < sizeof chunk ? pad : sizeof chunk;
            xbuf_append(b, chunk, n);
            pad -= n;
        }
        xbuf_puts(b, "\"");
    }
    xbuf_puts(b, "}");
}

cJSON *mci_build(unsigned long round, size_t n, uint64_t seed, size_t item_size)
{
    if (n > MCI_ITEMS_MAX)
        n = MCI_ITEMS_MAX;
    if (item_size > MCI_ITEM_SIZE_MAX)
        item_size = MCI_ITEM_SIZE_MAX;
    xbuf b = {0};
    xbuf_puts(&b, "[");
    for (size_t i = 0; i < n; i++) {
        if (i)
            xbuf_puts(&b, ", ");
        append_item(&b, round, i, seed, item_size);
    }
    xbuf_puts(&b, "]");
    char err[200];
    cJSON *list = jsonx_parse(b.data, b.len, err, sizeof err);
    if (!list) {
        /* The text is ours: a parse failure is a bug here, not bad input. */
        fprintf(stderr, "mc_items: generated data does not parse: %s\n", err);
        abort();
    }
    xbuf_free(&b);
    return list;
}

static bool read_dec(const char **p, unsigned long long *out)
{
    const char *s = *p;
    if (!isdigit((unsigned char)*s) || (s[0] == '0' && isdigit((unsigned char)s[1])))
        return false;
    unsigned long long v = 0;
    for (; isdigit((unsigned char)*s); s++) {
        if (v > 100000000000000ull)
            return false;
        v = v * 10 + (unsigned)(*s - '0');
    }
    *out = v;
    *p = s;
    return true;
}

bool mci_parse_id(const char *id, unsigned long *round, size_t *index)
{
    if (!id || id[0] != 'r')
        return false;
    const char *p = id + 1;
    unsigned long long r, i;
    if (!read_dec(&p, &r) || *p != '-')
        return false;
    p++;
    if (!read_dec(&p, &i) || *p)
        return false;
    *round = (unsigned long)r;
    *index = (size_t)i;
    return true;
}
