/* jsonx: a strict RFC 8259 parser building cJSON trees whose numbers are
 * cJSON_Raw items holding their exact source token, plus small accessors.
 *
 * Choices (see also jsonx.h):
 * - Strings are decoded to UTF-8. Bytes >= 0x80 are copied as they are, not
 *   checked for valid UTF-8 (the protocol's peers send UTF-8; checking would
 *   cost a pass over 128 MiB batches for nothing).
 * - A lone surrogate escape (\ud800 not followed by a low surrogate escape,
 *   or a lone \udc00) is accepted, as Python's json accepts it, and encoded
 *   in the 3-byte WTF-8 form (ED A0 80); Python reads it back with
 *   json.loads(bytes), which decodes with "surrogatepass".
 * - \u0000 is rejected: cJSON strings end at the first NUL, so accepting it
 *   would silently cut the string.
 * - Duplicate keys are all kept, in order; jsonx_get() returns the first.
 * - Depth: the top value is depth 0; a container at depth d holds values at
 *   depth d + 1; a container at depth JSONX_MAX_DEPTH or more is rejected
 *   (so at most JSONX_MAX_DEPTH nested containers).
 * - Numbers are read and written in the C locale's format ('.' decimal
 *   point); the programs never call setlocale(). */
#include "jsonx.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

/* Parser state over s[0..len). */
typedef struct {
    const char *s;
    size_t len;
    size_t pos;
    int raw_depth; /* values deeper than this become Raw items; < 0: none */
    bool refs;     /* such values that are array items refer to s (jsonx_parse_refs) */
    char *err;
    size_t errlen;
} px;

/* cJSON reports allocation failure as NULL; the project's policy is to
 * abort, as xalloc does. */
static void *need(void *p)
{
    if (!p) {
        fprintf(stderr, "fatal: out of memory (cJSON)\n");
        abort();
    }
    return p;
}

__attribute__((format(printf, 3, 4))) static bool fail(px *p, size_t at, const char *fmt, ...)
{
    if (!p->err || !p->errlen)
        return false;
    char what[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "%s at byte %zu", what, at);
    return false;
}

static inline int peek(const px *p)
{
    return p->pos < p->len ? (unsigned char)p->s[p->pos] : -1;
}

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/* Hot on 128 MiB batches: local pointers, so that the loop runs in
 * registers. */
static inline void skip_ws(px *p)
{
    const char *c = p->s + p->pos, *end = p->s + p->len;
    while (c < end && is_ws(*c))
        c++;
    p->pos = (size_t)(c - p->s);
}

/* "'x'" for a printable byte, "byte 0xNN" otherwise, for messages. */
static const char *show_byte(int c, char buf[16])
{
    if (c > 0x20 && c < 0x7f)
        snprintf(buf, 16, "'%c'", c);
    else
        snprintf(buf, 16, "byte 0x%02x", (unsigned)c);
    return buf;
}

/* Reports what is at p->pos when `what` was expected there. */
static bool fail_expected(px *p, const char *what)
{
    int c = peek(p);
    if (c < 0)
        return fail(p, p->pos, "unexpected end of input (expected %s)", what);
    char b[16];
    return fail(p, p->pos, "unexpected %s (expected %s)", show_byte(c, b), what);
}

static bool fail_depth(px *p)
{
    return fail(p, p->pos, "nesting deeper than %d levels", JSONX_MAX_DEPTH);
}

static bool starts_with(const px *p, const char *word)
{
    size_t n = strlen(word);
    return p->len - p->pos >= n && memcmp(p->s + p->pos, word, n) == 0;
}

/* Where a value was expected but none starts: names the common non-JSON
 * spellings (Python's json.dumps writes NaN and Infinity by default). */
static bool fail_value(px *p)
{
    if (starts_with(p, "NaN") || starts_with(p, "Infinity"))
        return fail(p, p->pos, "NaN and Infinity are not valid JSON");
    return fail_expected(p, "a value");
}

static void skip_digits(px *p)
{
    const char *c = p->s + p->pos, *end = p->s + p->len;
    while (c < end && is_digit(*c))
        c++;
    p->pos = (size_t)(c - p->s);
}

/* A number token, RFC 8259 section 6:
 * -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool scan_number(px *p)
{
    size_t start = p->pos;
    if (peek(p) == '-')
        p->pos++;
    int c = peek(p);
    if (c == '0') {
        p->pos++;
        if (is_digit(peek(p)))
            return fail(p, start, "leading zero in number");
    } else if (is_digit(c)) {
        skip_digits(p);
    } else if (starts_with(p, "Infinity")) {
        return fail(p, start, "NaN and Infinity are not valid JSON");
    } else {
        return fail_expected(p, "a digit in number");
    }
    if (peek(p) == '.') {
        p->pos++;
        if (!is_digit(peek(p)))
            return fail_expected(p, "a digit after '.' in number");
        skip_digits(p);
    }
    if (peek(p) == 'e' || peek(p) == 'E') {
        p->pos++;
        if (peek(p) == '+' || peek(p) == '-')
            p->pos++;
        if (!is_digit(peek(p)))
            return fail_expected(p, "a digit in the exponent of a number");
        skip_digits(p);
    }
    return true;
}

/* Reads the 4 hex digits of a \u escape at p->pos. */
static bool read_hex4(px *p, unsigned *out)
{
    if (p->len - p->pos < 4)
        return false;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p->s[p->pos + (size_t)i];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            return false;
        v = v << 4 | d;
    }
    p->pos += 4;
    *out = v;
    return true;
}

/* UTF-8 encoding of a code point; surrogates get the 3-byte (WTF-8) form. */
static void put_utf8(xbuf *out, unsigned cp)
{
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | cp >> 6);
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | cp >> 12);
        b[1] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | cp >> 18);
        b[1] = (unsigned char)(0x80 | (cp >> 12 & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp >> 6 & 0x3F));
        b[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    xbuf_append(out, b, n);
}

/* If a low surrogate escape follows at p->pos, consumes it and combines it
 * with the high surrogate hi. Otherwise leaves p->pos alone (lone hi). */
static unsigned take_low_surrogate(px *p, unsigned hi)
{
    if (!starts_with(p, "\\u"))
        return hi;
    size_t save = p->pos;
    unsigned lo;
    p->pos += 2;
    if (read_hex4(p, &lo) && lo >= 0xDC00 && lo <= 0xDFFF)
        return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
    p->pos = save;
    return hi;
}

/* The \u escape whose backslash is at `at`; p->pos is after the 'u'. */
static bool scan_unicode_escape(px *p, size_t at, xbuf *out)
{
    unsigned cp;
    if (!read_hex4(p, &cp))
        return fail(p, at, "invalid \\u escape in string (expected 4 hex digits)");
    if (cp == 0)
        return fail(p, at, "\\u0000 in a string is not supported");
    if (cp >= 0xD800 && cp <= 0xDBFF)
        cp = take_low_surrogate(p, cp);
    if (out)
        put_utf8(out, cp);
    return true;
}

/* One escape sequence at p->pos (the backslash). */
static bool scan_escape(px *p, xbuf *out)
{
    size_t at = p->pos;
    if (p->len - at < 2)
        return fail(p, at, "unterminated string");
    char c = p->s[at + 1];
    p->pos = at + 2;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = c ? strchr(from, c) : NULL;
    if (hit) {
        if (out)
            xbuf_append(out, &to[hit - from], 1);
        return true;
    }
    if (c == 'u')
        return scan_unicode_escape(p, at, out);
    char b[16];
    return fail(p, at, "invalid escape '\\' followed by %s in string",
                show_byte((unsigned char)c, b));
}

/* Bytes that end a run of plain string content: control characters, '"'
 * and '\\' (a table: this loop is the hottest of all). */
static const bool string_special[256] = {
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x00 */
    1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, /* 0x10 */
    0, 0, 1, ['\\'] = 1,
};

#define ONES UINT64_C(0x0101010101010101)
#define HIGHS UINT64_C(0x8080808080808080)

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Eight bytes at a time (SWAR): in the masks below the lowest flagged byte
 * is exact (false positives only appear above a true one), which is all
 * the loops need; bytes are numbered from the lowest, hence little-endian
 * only. */
#define JSONX_SWAR 1
static inline uint64_t load8(const char *c)
{
    uint64_t v;
    memcpy(&v, c, 8);
    return v;
}

/* Index of the lowest flagged byte of a non-zero mask. */
static inline size_t first_flagged(uint64_t m)
{
    return (size_t)__builtin_ctzll(m) >> 3;
}

/* High bit set in the bytes of x that are '"', '\\' or below 0x20. */
static inline uint64_t string_special8(uint64_t x)
{
    uint64_t q = x ^ (ONES * '"'), b = x ^ (ONES * '\\');
    return (((q - ONES) & ~q) | ((b - ONES) & ~b) | ((x - ONES * 0x20) & ~x)) & HIGHS;
}

/* Non-zero in the bytes of x that are not ASCII digits. A byte over 0xF9
 * carries into the next one, but it is flagged itself. */
static inline uint64_t non_digit8(uint64_t x)
{
    const uint64_t hi = ONES * 0xF0, d = ONES * 0x30;
    return ((x & hi) ^ d) | (((x + ONES * 0x06) & hi) ^ d);
}
#endif

/* End of the run of plain string content at c (up to end). */
static inline const char *plain_end(const char *c, const char *end)
{
#ifdef JSONX_SWAR
    while (end - c >= 8) {
        uint64_t m = string_special8(load8(c));
        if (m)
            return c + first_flagged(m);
        c += 8;
    }
#endif
    while (c < end && !string_special[(unsigned char)*c])
        c++;
    return c;
}

/* Length of the run of plain string content at s (up to end). */
static size_t plain_run(const char *s, const char *end)
{
    return (size_t)(plain_end(s, end) - s);
}

/* A string at p->pos (its opening quote). out: where to decode it, or NULL
 * to validate only. Plain runs are copied in one go. */
static bool scan_string(px *p, xbuf *out)
{
    size_t start = p->pos++;
    for (;;) {
        size_t run = plain_run(p->s + p->pos, p->s + p->len);
        if (out && run)
            xbuf_append(out, p->s + p->pos, run);
        p->pos += run;
        if (p->pos >= p->len)
            return fail(p, start, "unterminated string");
        unsigned char c = (unsigned char)p->s[p->pos];
        if (c == '"') {
            p->pos++;
            return true;
        }
        if (c < 0x20)
            return fail(p, p->pos, "unescaped control character 0x%02x in string", c);
        if (!scan_escape(p, out))
            return false;
    }
}

static bool scan_word(px *p, const char *word)
{
    if (!starts_with(p, word))
        return fail(p, p->pos, "invalid literal (expected %s)", word);
    p->pos += strlen(word);
    return true;
}

/* Any value but a container, validated and skipped. */
static bool skip_scalar(px *p)
{
    int c = peek(p);
    switch (c) {
    case '"':
        return scan_string(p, NULL);
    case 't':
        return scan_word(p, "true");
    case 'f':
        return scan_word(p, "false");
    case 'n':
        return scan_word(p, "null");
    default:
        if (c == '-' || is_digit(c))
            return scan_number(p);
        return fail_value(p);
    }
}

/* After '[' or '{': consumes the closing bracket of an empty container and
 * returns false, or returns true when an item follows. */
static bool first_item(px *p, char close)
{
    skip_ws(p);
    if (peek(p) == close) {
        p->pos++;
        return false;
    }
    return true;
}

/* After a container's item: consumes ',' (*more = true) or the closing
 * bracket (*more = false). */
static bool next_item(px *p, char close, bool *more)
{
    skip_ws(p);
    int c = peek(p);
    if (c == ',') {
        p->pos++;
        skip_ws(p);
        if (peek(p) == close)
            return fail(p, p->pos, "trailing comma before '%c'", close);
        *more = true;
        return true;
    }
    if (c == close) {
        p->pos++;
        *more = false;
        return true;
    }
    return fail_expected(p, close == ']' ? "',' or ']' after an array item"
                                         : "',' or '}' after an object member");
}

/* An object key and the ':' after it. out: where to decode the key, or
 * NULL to validate only. */
static bool scan_key(px *p, xbuf *out)
{
    skip_ws(p);
    if (peek(p) != '"')
        return fail_expected(p, "a string key");
    if (!scan_string(p, out))
        return false;
    skip_ws(p);
    if (peek(p) != ':')
        return fail_expected(p, "':' after an object key");
    p->pos++;
    return true;
}

/* The end of the number token at c (RFC 8259), or NULL if c does not hold
 * one that is sure to be valid: pointers only, for the tight loop below. */
static inline const char *fast_number(const char *c, const char *end)
{
    if (c < end && *c == '-')
        c++;
    if (c >= end)
        return NULL;
    if (*c == '0') {
        c++;
        if (c < end && is_digit(*c))
            return NULL;
    } else if (is_digit(*c)) {
        while (c < end && is_digit(*c))
            c++;
    } else {
        return NULL;
    }
    if (c < end && *c == '.') {
        c++;
        if (c >= end || !is_digit(*c))
            return NULL;
        while (c < end && is_digit(*c))
            c++;
    }
    if (c < end && (*c == 'e' || *c == 'E')) {
        c++;
        if (c < end && (*c == '+' || *c == '-'))
            c++;
        if (c >= end || !is_digit(*c))
            return NULL;
        while (c < end && is_digit(*c))
            c++;
    }
    return c;
}

/* Skips a run of array items that are numbers ("0.1, 2, -3e5") in one
 * tight loop: lists of numbers are the bulk of learn data. Stops after the
 * last number it vouches for, before the ',' or ']' that follows, so that
 * the general code goes on from there (and reports any error with its own
 * words). Returns false if it could not vouch for the first number. */
static bool skip_number_run(px *p)
{
    const char *s = p->s, *end = s + p->len, *c = s + p->pos;
    const char *e = fast_number(c, end);
    if (!e)
        return false;
    for (;;) {
        c = e;
        const char *n = c;
        while (n < end && is_ws(*n))
            n++;
        if (n >= end || *n != ',')
            break;
        n++;
        while (n < end && is_ws(*n))
            n++;
        e = fast_number(n, end);
        if (!e)
            break;
    }
    p->pos = (size_t)(c - s);
    return true;
}

/* Validates one value (at depth `depth`) without building anything.
 * Iterative with an explicit stack of closing brackets, so that huge or
 * deep payloads cost neither recursion nor allocation. The careful scanner:
 * it says what is wrong and where; skip_value() runs it only on input that
 * fast_skip() did not vouch for. */
static bool skip_value_careful(px *p, int depth)
{
    char close[JSONX_MAX_DEPTH];
    int top = 0;
    for (;;) {
        skip_ws(p);
        int c = peek(p);
        if (c == '[' || c == '{') {
            if (depth + top >= JSONX_MAX_DEPTH)
                return fail_depth(p);
            p->pos++;
            char cl = c == '[' ? ']' : '}';
            if (first_item(p, cl)) {
                close[top++] = cl;
                if (cl == '}' && !scan_key(p, NULL))
                    return false;
                continue; /* the first item's value */
            }
        } else if (top > 0 && close[top - 1] == ']' && (c == '-' || is_digit(c))) {
            if (!skip_number_run(p) && !scan_number(p))
                return false;
        } else if (!skip_scalar(p)) {
            return false;
        }
        /* A value ended: close the containers it ended, up to one that has
         * a next item. */
        bool more = false;
        while (top > 0 && !more) {
            if (!next_item(p, close[top - 1], &more))
                return false;
            if (!more)
                top--;
        }
        if (top == 0)
            return true;
        if (close[top - 1] == '}' && !scan_key(p, NULL))
            return false;
    }
}

/* ---- the fast validator ----
 * The same grammar as the scanners above, as one loop over pointers with
 * no error reporting: it either vouches for a whole value or gives up, and
 * skip_value() then runs the careful scanner from the start of the value,
 * which finds the error and words it. So it must never accept anything the
 * careful scanner rejects (the fuzz targets cross-check both against the
 * tree builder), and where both accept they end at the same byte. */

static const bool ws_byte[256] = {[' '] = 1, ['\t'] = 1, ['\n'] = 1, ['\r'] = 1};

static inline const char *fast_ws(const char *c, const char *end)
{
    /* The common cases first: no white space, or one ' ' (all white space
     * is at or below ' '). */
    if (c < end && (unsigned char)*c > ' ')
        return c;
    if (end - c >= 2 && *c == ' ' && (unsigned char)c[1] > ' ')
        return c + 1;
    while (c < end && ws_byte[(unsigned char)*c])
        c++;
    return c;
}

/* End of the run of ASCII digits at c (up to end); *next is the byte
 * there, or -1 at the end. The byte is taken from the word already loaded:
 * reading it again from memory would put a load on the critical path of
 * every number. */
static inline const char *fast_digits(const char *c, const char *end, int *next)
{
#ifdef JSONX_SWAR
    while (end - c >= 8) {
        uint64_t x = load8(c);
        uint64_t m = non_digit8(x);
        if (m) {
            unsigned shift = (unsigned)__builtin_ctzll(m) & ~7u;
            *next = (int)(x >> shift & 0xFF);
            return c + (shift >> 3);
        }
        c += 8;
    }
#endif
    while (c < end && is_digit(*c))
        c++;
    *next = c < end ? (unsigned char)*c : -1;
    return c;
}

/* A number token at c (RFC 8259): its end, or NULL. *next: the byte at
 * the end, or -1 at the end of the buffer. */
static inline const char *fast_num(const char *c, const char *end, int *next)
{
    if (*c == '-' && ++c >= end)
        return NULL;
    int n;
    if (*c == '0') {
        c++;
        n = c < end ? (unsigned char)*c : -1;
        if (n >= '0' && n <= '9')
            return NULL; /* a leading zero */
    } else if (is_digit(*c)) {
        c = fast_digits(c + 1, end, &n);
    } else {
        return NULL;
    }
    if (n == '.') {
        if (++c >= end || !is_digit(*c))
            return NULL;
        c = fast_digits(c + 1, end, &n);
    }
    if ((n | 0x20) == 'e') {
        if (++c < end && (*c == '+' || *c == '-'))
            c++;
        if (c >= end || !is_digit(*c))
            return NULL;
        c = fast_digits(c + 1, end, &n);
    }
    *next = n;
    return c;
}

/* ---- number lists, 64 bytes at a time ----
 * A list of numbers as Python's json and the C printers write it
 * ("0.5, -1.25e-05, 3") is checked as a whole block: each byte gets its
 * class as one bit in a mask per class (bit i: byte i of the block), and
 * the grammar becomes bit operations on the masks:
 * - what may follow what (automaton below), on the masks shifted by one;
 * - at most one '.' per number, before the exponent, and one exponent:
 *   adding (P << 1) to the digit mask carries from each '.' through the
 *   digits after it to the first byte that is not one (its "landing"),
 *   which must not be '.'; the same from each 'e' through digits and signs,
 *   landing on neither '.' nor 'e';
 * - no leading zero: a '0' that starts the integer part is not followed by
 *   a digit.
 * Only ',' and ' ' separate the numbers here, exactly one ',' after each;
 * anything else (']', '\n', "1 , 2") ends the block run, and the caller
 * goes on from the start of the last number the run did not vouch for. */

/* The classes of a block's bytes. */
typedef struct {
    uint64_t d;  /* digits */
    uint64_t z;  /* '0' (also in d) */
    uint64_t p;  /* '.' */
    uint64_t e;  /* 'e' or 'E' */
    uint64_t m;  /* '-' */
    uint64_t s;  /* '+' */
    uint64_t c;  /* ',' */
    uint64_t sp; /* ' ' */
} numclass;

/* Portable: the masks from a table of class bits (d z p e m s c sp). */
static const unsigned char num_class[256] = {
    ['0'] = 3,   ['1'] = 1, ['2'] = 1, ['3'] = 1, ['4'] = 1, ['5'] = 1, ['6'] = 1,
    ['7'] = 1,   ['8'] = 1, ['9'] = 1, ['.'] = 4, ['e'] = 8, ['E'] = 8, ['-'] = 16,
    ['+'] = 32,  [','] = 64, [' '] = 128,
};

static inline void classify64_table(const char *b, numclass *k)
{
    *k = (numclass){0};
    for (unsigned i = 0; i < 64; i++) {
        uint64_t v = num_class[(unsigned char)b[i]];
        k->d |= (v & 1) << i;
        k->z |= (v >> 1 & 1) << i;
        k->p |= (v >> 2 & 1) << i;
        k->e |= (v >> 3 & 1) << i;
        k->m |= (v >> 4 & 1) << i;
        k->s |= (v >> 5 & 1) << i;
        k->c |= (v >> 6 & 1) << i;
        k->sp |= (v >> 7 & 1) << i;
    }
}

#if defined(__SSE2__) && !defined(JSONX_NO_SIMD)
#include <immintrin.h>
#define JSONX_SSE2 1

/* SSE2, the x86-64 baseline: 16 bytes at a time. A digit is a byte that
 * x + 0x50 maps to -128..-119 ('0' is 0x30). */
static inline void classify64_sse2(const char *b, numclass *k)
{
    const __m128i shift = _mm_set1_epi8(0x50), ten = _mm_set1_epi8(-118), zero = _mm_set1_epi8('0'),
                  dot = _mm_set1_epi8('.'), lower = _mm_set1_epi8(0x20), e = _mm_set1_epi8('e'),
                  minus = _mm_set1_epi8('-'), plus = _mm_set1_epi8('+'), comma = _mm_set1_epi8(','),
                  space = _mm_set1_epi8(' ');
    *k = (numclass){0};
    for (unsigned i = 0; i < 4; i++) {
        __m128i x;
        memcpy(&x, b + 16 * i, 16);
        unsigned sh = 16 * i;
#define MASK16(v) ((uint64_t)(unsigned)_mm_movemask_epi8(v) << sh)
        k->d |= MASK16(_mm_cmpgt_epi8(ten, _mm_add_epi8(x, shift)));
        k->z |= MASK16(_mm_cmpeq_epi8(x, zero));
        k->p |= MASK16(_mm_cmpeq_epi8(x, dot));
        k->e |= MASK16(_mm_cmpeq_epi8(_mm_or_si128(x, lower), e));
        k->m |= MASK16(_mm_cmpeq_epi8(x, minus));
        k->s |= MASK16(_mm_cmpeq_epi8(x, plus));
        k->c |= MASK16(_mm_cmpeq_epi8(x, comma));
        k->sp |= MASK16(_mm_cmpeq_epi8(x, space));
#undef MASK16
    }
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(JSONX_NO_AVX2)
/* AVX2, where the CPU has it (checked at run time, so the program still
 * runs on any x86-64): 32 bytes at a time, the same masks. */
#define JSONX_AVX2 1
__attribute__((target("avx2"))) static inline void classify64_avx2(const char *b, numclass *k)
{
    const __m256i shift = _mm256_set1_epi8(0x50), ten = _mm256_set1_epi8(-118), zero = _mm256_set1_epi8('0'),
                  dot = _mm256_set1_epi8('.'), lower = _mm256_set1_epi8(0x20), e = _mm256_set1_epi8('e'),
                  minus = _mm256_set1_epi8('-'), plus = _mm256_set1_epi8('+'), comma = _mm256_set1_epi8(','),
                  space = _mm256_set1_epi8(' ');
    *k = (numclass){0};
    for (unsigned i = 0; i < 2; i++) {
        __m256i x;
        memcpy(&x, b + 32 * i, 32);
        unsigned sh = 32 * i;
#define MASK32(v) ((uint64_t)(uint32_t)_mm256_movemask_epi8(v) << sh)
        k->d |= MASK32(_mm256_cmpgt_epi8(ten, _mm256_add_epi8(x, shift)));
        k->z |= MASK32(_mm256_cmpeq_epi8(x, zero));
        k->p |= MASK32(_mm256_cmpeq_epi8(x, dot));
        k->e |= MASK32(_mm256_cmpeq_epi8(_mm256_or_si256(x, lower), e));
        k->m |= MASK32(_mm256_cmpeq_epi8(x, minus));
        k->s |= MASK32(_mm256_cmpeq_epi8(x, plus));
        k->c |= MASK32(_mm256_cmpeq_epi8(x, comma));
        k->sp |= MASK32(_mm256_cmpeq_epi8(x, space));
#undef MASK32
    }
}
#endif
#endif

/* c: where an item of an array starts, after '[' or ',' and white space.
 * Vouches for the items from c on that are numbers each followed by ',' and
 * spaces, 64 bytes at a time, and returns where the first item it did not
 * vouch for starts (c if none): the caller goes on from there as after a
 * ','. Or, *ended, a last number ends the list right before a ']': returns
 * where that ']' is. Fewer than 64 bytes left: the caller's loop does the
 * rest. */
static inline __attribute__((always_inline)) const char *
number_list(const char *c, const char *end, bool *ended, void (*classify64)(const char *, numclass *))
{
    *ended = false;
    const char *done = c;
    /* The classes of the byte before the block (bit 0): at first a ','. */
    uint64_t pd = 0, pq = 0, pe = 0, pg = 1, pms = 0, pzs = 0;
    /* The additions' carries into the block (a '.' or 'e' run going on). */
    uint64_t cp = 0, ce = 0;
    for (const char *b = c; end - b >= 64; b += 64) {
        numclass k;
        classify64(b, &k);
        uint64_t g = k.c | k.sp; /* between numbers */
        uint64_t ms = k.m | k.s, q = k.p | ms, dms = k.d | ms;
        uint64_t known = dms | k.p | k.e | g;
        /* The previous byte's classes, for each byte (q: '.', '-' or '+'). */
        uint64_t bd = k.d << 1 | pd, bq = q << 1 | pq, be = k.e << 1 | pe, bg = g << 1 | pg;
        /* What may follow what: a digit: digit . , e; '.', '-', '+': a
         * digit; 'e': digit - +; ',' and ' ': ' ' digit -. So a number
         * starts with a digit or '-' and ends with a digit, and exactly one
         * ',' follows it, then spaces. */
        uint64_t ok = (bd & known & ~(ms | k.sp)) | (bq & k.d) | (be & dms) | (bg & (k.sp | k.d | k.m));
        uint64_t bad = ~ok;
        /* A '0' that starts the integer part, then a digit. */
        uint64_t mstart = k.m & bg;
        uint64_t zs = k.z & (bg | (mstart << 1 | pms));
        bad |= k.d & (zs << 1 | pzs);
        /* One '.', before the exponent; one exponent. */
        unsigned long long s1, s2;
        bool o1 = __builtin_add_overflow(k.d, k.p << 1, &s1);
        o1 |= __builtin_add_overflow(s1, cp, &s1);
        bad |= s1 & ~k.d & k.p;
        bool o2 = __builtin_add_overflow(dms, k.e << 1, &s2);
        o2 |= __builtin_add_overflow(s2, ce, &s2);
        bad |= s2 & ~dms & (k.p | k.e);
        /* Where items start: after ',' or ' ', not one of them. */
        uint64_t starts = bg & ~g;
        uint64_t stop = bad | ~known;
        if (stop) {
            /* All is vouched for below the first stop; the item that starts
             * last at or below it is where the caller goes on. */
            unsigned at = (unsigned)__builtin_ctzll(stop);
            if (b[at] == ']' && (bd >> at & 1)) { /* (the ']' is only in ~ok) */
                *ended = true;
                return b + at;
            }
            uint64_t upto = starts & ((UINT64_C(2) << at) - 1);
            return upto ? b + 63 - __builtin_clzll(upto) : done;
        }
        if (starts)
            done = b + 63 - __builtin_clzll(starts);
        pd = k.d >> 63, pq = q >> 63, pe = k.e >> 63, pg = g >> 63;
        pms = mstart >> 63, pzs = zs >> 63;
        cp = o1 | k.p >> 63, ce = o2 | k.e >> 63;
    }
    return done;
}

/* One copy of the loop per classifier, each compiled for its instructions. */
static __attribute__((unused)) const char *number_list_table(const char *c, const char *end, bool *ended)
{
    return number_list(c, end, ended, classify64_table);
}

#ifdef JSONX_SSE2
static const char *number_list_sse2(const char *c, const char *end, bool *ended)
{
    return number_list(c, end, ended, classify64_sse2);
}
#endif

#ifdef JSONX_AVX2
__attribute__((target("avx2"))) static const char *number_list_avx2(const char *c, const char *end, bool *ended)
{
    return number_list(c, end, ended, classify64_avx2);
}
#endif

static const char *fast_number_list(const char *c, const char *end, bool *ended)
{
#ifdef JSONX_AVX2
    if (__builtin_cpu_supports("avx2"))
        return number_list_avx2(c, end, ended);
#endif
#ifdef JSONX_SSE2
    return number_list_sse2(c, end, ended);
#else
    return number_list_table(c, end, ended);
#endif
}

static inline bool is_hex(char c)
{
    return (c >= '0' && c <= '9') || ((c | 0x20) >= 'a' && (c | 0x20) <= 'f');
}

/* A string at c (its opening quote): its end, or NULL. Each \u escape is
 * checked on its own (4 hex digits, not \u0000): a surrogate pair is two
 * valid escapes, and the careful scanner accepts lone surrogates. */
static inline const char *fast_string(const char *c, const char *end)
{
    c++;
    for (;;) {
        c = plain_end(c, end);
        if (c >= end)
            return NULL;
        if (*c == '"')
            return c + 1;
        if (*c != '\\' || end - c < 2)
            return NULL; /* a control character, or an unterminated escape */
        switch (c[1]) {
        case '"':
        case '\\':
        case '/':
        case 'b':
        case 'f':
        case 'n':
        case 'r':
        case 't':
            c += 2;
            break;
        case 'u':
            if (end - c < 6 || !is_hex(c[2]) || !is_hex(c[3]) || !is_hex(c[4]) || !is_hex(c[5]) ||
                memcmp(c + 2, "0000", 4) == 0)
                return NULL;
            c += 6;
            break;
        default:
            return NULL;
        }
    }
}

static inline const char *fast_word(const char *c, const char *end, const char *word, size_t n)
{
    return (size_t)(end - c) >= n && memcmp(c, word, n) == 0 ? c + n : NULL;
}

/* One value at c (white space before it allowed) at depth `depth`: its
 * end, or NULL if the fast path does not vouch for it. */
static const char *fast_skip(const char *c, const char *end, int depth)
{
    char close[JSONX_MAX_DEPTH];
    int top = 0;
value:
    c = fast_ws(c, end);
    if (c >= end)
        return NULL;
    switch (*c) {
    case '[':
    case '{': {
        if (depth + top >= JSONX_MAX_DEPTH)
            return NULL;
        char cl = *c == '[' ? ']' : '}';
        c = fast_ws(c + 1, end);
        if (c < end && *c == cl) {
            c++;
            goto after;
        }
        close[top++] = cl;
        if (cl == ']')
            goto items;
        goto key;
    }
    case '"':
        c = fast_string(c, end);
        break;
    case 't':
        c = fast_word(c, end, "true", 4);
        break;
    case 'f':
        c = fast_word(c, end, "false", 5);
        break;
    case 'n':
        c = fast_word(c, end, "null", 4);
        break;
    default: {
        int next;
        c = fast_num(c, end, &next);
        break;
    }
    }
    if (!c)
        return NULL;
after:
    /* A value ended at c. */
    if (top == 0)
        return c;
    c = fast_ws(c, end);
    if (c >= end)
        return NULL;
    if (*c == ',') {
        c = fast_ws(c + 1, end);
        if (close[top - 1] == ']')
            goto items;
        goto key;
    }
    if (*c != close[top - 1])
        return NULL;
    c++;
    top--;
    goto after;
items:
    /* c is where an item of the array on top starts (after '[' or ',' and
     * white space). The bulk of learn data: numbers in a list, 64 bytes at
     * a time, then one by one in a tight loop. */
    if (c < end && (is_digit(*c) || *c == '-')) {
        bool ended;
        c = fast_number_list(c, end, &ended);
        if (ended)
            goto after;
    }
    while (c < end && (is_digit(*c) || *c == '-')) {
        int next;
        c = fast_num(c, end, &next);
        if (!c)
            return NULL;
        if (next == ',') {
            c = fast_ws(c + 1, end);
            continue;
        }
        goto after;
    }
    goto value;
key:
    /* c is where an object key must start (white space skipped). */
    if (c >= end || *c != '"')
        return NULL;
    c = fast_string(c, end);
    if (!c)
        return NULL;
    c = fast_ws(c, end);
    if (c >= end || *c != ':')
        return NULL;
    c++;
    goto value;
}

static bool skip_value(px *p, int depth)
{
    if (p->pos < p->len) { /* (else there is nothing to vouch for, and s may be NULL) */
        const char *e = fast_skip(p->s + p->pos, p->s + p->len, depth);
        if (e) {
            p->pos = (size_t)(e - p->s);
            return true;
        }
    }
    return skip_value_careful(p, depth);
}

/* A Raw item holding s[0..n) (need not be NUL-terminated). The text is
 * copied once, with cJSON's allocator, since cJSON_Delete frees it. */
static cJSON *new_raw(const char *s, size_t n)
{
    cJSON *item = need(cJSON_CreateRaw(""));
    char *v = need(cJSON_malloc(n + 1));
    memcpy(v, s, n);
    v[n] = '\0';
    cJSON_free(item->valuestring);
    item->valuestring = v;
    return item;
}

static cJSON *build_value(px *p, int depth, bool item);

static cJSON *build_scalar(px *p)
{
    size_t start = p->pos;
    if (peek(p) == '"') {
        xbuf b = {0};
        xbuf_append(&b, "", 0); /* "" must decode to "", not to NULL */
        cJSON *item = scan_string(p, &b) ? need(cJSON_CreateString(b.data)) : NULL;
        xbuf_free(&b);
        return item;
    }
    if (!skip_scalar(p))
        return NULL;
    switch (p->s[start]) {
    case 't':
        return need(cJSON_CreateTrue());
    case 'f':
        return need(cJSON_CreateFalse());
    case 'n':
        return need(cJSON_CreateNull());
    default:
        return new_raw(p->s + start, p->pos - start);
    }
}

static cJSON *build_array(px *p, int depth)
{
    if (depth >= JSONX_MAX_DEPTH)
        return fail_depth(p), NULL;
    p->pos++;
    cJSON *arr = need(cJSON_CreateArray());
    bool more = first_item(p, ']');
    while (more) {
        cJSON *item = build_value(p, depth + 1, true);
        if (!item)
            goto bad;
        cJSON_AddItemToArray(arr, item);
        if (!next_item(p, ']', &more))
            goto bad;
    }
    return arr;
bad:
    cJSON_Delete(arr);
    return NULL;
}

static cJSON *build_object(px *p, int depth)
{
    if (depth >= JSONX_MAX_DEPTH)
        return fail_depth(p), NULL;
    p->pos++;
    cJSON *obj = need(cJSON_CreateObject());
    xbuf key = {0};
    bool more = first_item(p, '}');
    while (more) {
        key.len = 0;
        xbuf_append(&key, "", 0); /* "" must decode to "", not to NULL */
        if (!scan_key(p, &key))
            goto bad;
        cJSON *item = build_value(p, depth + 1, false);
        if (!item)
            goto bad;
        /* Appends, so key order is kept; duplicates are kept too. */
        cJSON_AddItemToObject(obj, key.data, item);
        if (!next_item(p, '}', &more))
            goto bad;
    }
    xbuf_free(&key);
    return obj;
bad:
    xbuf_free(&key);
    cJSON_Delete(obj);
    return NULL;
}

/* A Raw item without text that refers to s[start, start + n) of the
 * parsed buffer (jsonx_ref): the offset in valuedouble (exact below 2^53),
 * the length in valueint. */
static cJSON *new_ref(size_t start, size_t n)
{
    cJSON *item = need(cJSON_CreateNull());
    item->type = cJSON_Raw;
    item->valuedouble = (double)start;
    item->valueint = (int)n;
    return item;
}

/* item: the value is an item of an array. */
static cJSON *build_value(px *p, int depth, bool item)
{
    skip_ws(p);
    if (p->raw_depth >= 0 && depth > p->raw_depth) {
        size_t start = p->pos;
        if (!skip_value(p, depth))
            return NULL;
        size_t n = p->pos - start;
        if (p->refs && item && n <= INT_MAX && start < (UINT64_C(1) << 53))
            return new_ref(start, n);
        return new_raw(p->s + start, n);
    }
    int c = peek(p);
    if (c == '[')
        return build_array(p, depth);
    if (c == '{')
        return build_object(p, depth);
    return build_scalar(p);
}

static void clear_err(char *err, size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
}

static cJSON *parse_top(const char *buf, size_t len, int raw_depth, bool refs, char *err, size_t errlen)
{
    px p = {.s = buf, .len = buf ? len : 0, .raw_depth = raw_depth, .refs = refs, .err = err, .errlen = errlen};
    clear_err(err, errlen);
    cJSON *root = build_value(&p, 0, false);
    if (!root)
        return NULL;
    skip_ws(&p);
    if (p.pos < p.len) {
        fail(&p, p.pos, "unexpected data after the JSON value");
        cJSON_Delete(root);
        return NULL;
    }
    return root;
}

cJSON *jsonx_parse_shallow(const char *buf, size_t len, int raw_depth, char *err, size_t errlen)
{
    return parse_top(buf, len, raw_depth, false, err, errlen);
}

cJSON *jsonx_parse_refs(const char *buf, size_t len, int raw_depth, char *err, size_t errlen)
{
    return parse_top(buf, len, raw_depth, true, err, errlen);
}

bool jsonx_ref(const cJSON *item, size_t *offset, size_t *len)
{
    if (!item || (item->type & 0xFF) != cJSON_Raw || item->valuestring || item->valueint <= 0)
        return false;
    *offset = (size_t)item->valuedouble;
    *len = (size_t)item->valueint;
    return true;
}

void jsonx_unref(cJSON *tree, const char *buf)
{
    if (!tree)
        return;
    size_t off, n;
    if (jsonx_ref(tree, &off, &n)) {
        char *v = need(cJSON_malloc(n + 1));
        memcpy(v, buf + off, n);
        v[n] = '\0';
        tree->valuestring = v;
        tree->valueint = 0;
        tree->valuedouble = 0;
        return;
    }
    for (cJSON *k = tree->child; k; k = k->next) /* depth: at most JSONX_MAX_DEPTH */
        jsonx_unref(k, buf);
}

cJSON *jsonx_parse(const char *buf, size_t len, char *err, size_t errlen)
{
    return jsonx_parse_shallow(buf, len, -1, err, errlen);
}

long jsonx_array_items(const char *buf, size_t len, jsonx_item_cb cb, void *data, char *err,
                       size_t errlen)
{
    px p = {.s = buf, .len = buf ? len : 0, .raw_depth = -1, .err = err, .errlen = errlen};
    clear_err(err, errlen);
    skip_ws(&p);
    if (peek(&p) != '[')
        return fail_expected(&p, "'[' (a JSON array)"), -1;
    p.pos++;
    long n = 0;
    bool more = first_item(&p, ']');
    while (more) {
        skip_ws(&p);
        size_t start = p.pos;
        if (!skip_value(&p, 1))
            return -1;
        if (cb && !cb(data, (size_t)n, buf + start, p.pos - start))
            return fail(&p, start, "item %ld refused by the callback", n), -1;
        n++;
        if (!next_item(&p, ']', &more))
            return -1;
    }
    skip_ws(&p);
    if (p.pos < p.len)
        return fail(&p, p.pos, "unexpected data after the JSON array"), -1;
    return n;
}

/* True if s is exactly one JSON number token. */
static bool is_number_token(const char *s)
{
    px p = {.s = s, .len = strlen(s), .raw_depth = -1};
    return p.len > 0 && scan_number(&p) && p.pos == p.len;
}

bool jsonx_is_number(const cJSON *item)
{
    if (!item)
        return false;
    if (cJSON_IsNumber(item))
        return true;
    return cJSON_IsRaw(item) && item->valuestring && is_number_token(item->valuestring);
}

/* An integral double in int64 range. -2^63 is exact as a double; 2^63 is
 * the first value out of range. */
static bool double_to_i64(double d, int64_t *out)
{
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0))
        return false;
    int64_t v = (int64_t)d;
    if ((double)v != d)
        return false;
    *out = v;
    return true;
}

_Static_assert(sizeof(long long) == sizeof(int64_t), "strtoll reads int64 range");

bool jsonx_get_i64(const cJSON *item, int64_t *out)
{
    if (!jsonx_is_number(item))
        return false;
    if (cJSON_IsNumber(item))
        return double_to_i64(item->valuedouble, out);
    const char *s = item->valuestring;
    if (strpbrk(s, ".eE"))
        return false; /* exact integers only: 1.0 and 1e3 are not */
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (errno == ERANGE || *end)
        return false;
    *out = (int64_t)v;
    return true;
}

bool jsonx_get_double(const cJSON *item, double *out)
{
    if (!jsonx_is_number(item))
        return false;
    if (cJSON_IsNumber(item)) {
        *out = item->valuedouble;
        return true;
    }
    errno = 0;
    double d = strtod(item->valuestring, NULL);
    /* Overflow (1e400) has no double; underflow (1e-400) rounds to 0 or a
     * subnormal, which is the nearest double, so it is accepted. */
    if (errno == ERANGE && isinf(d))
        return false;
    *out = d;
    return true;
}

cJSON *jsonx_new_i64(int64_t v)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%" PRId64, v);
    return new_raw(buf, (size_t)n);
}

cJSON *jsonx_new_double(double v)
{
    if (!isfinite(v))
        return need(cJSON_CreateNull()); /* JSON has no inf or nan */
    char buf[48];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            break; /* %.17g always round-trips */
    }
    /* Keep it a float for Python peers: 3.0, not 3 (which reads as an int). */
    if (!strpbrk(buf, ".eE")) {
        size_t bl = strlen(buf);
        snprintf(buf + bl, sizeof buf - bl, ".0");
    }
    return new_raw(buf, strlen(buf));
}

cJSON *jsonx_get(const cJSON *obj, const char *key)
{
    if (!cJSON_IsObject(obj) || !key)
        return NULL;
    for (cJSON *c = obj->child; c; c = c->next)
        if (c->string && strcmp(c->string, key) == 0)
            return c;
    return NULL;
}

const char *jsonx_get_str(const cJSON *obj, const char *key)
{
    cJSON *item = jsonx_get(obj, key);
    return cJSON_IsString(item) ? item->valuestring : NULL;
}

char *jsonx_print(const cJSON *item)
{
    if (!item)
        return xstrdup("null");
    char *s = cJSON_PrintUnformatted(item);
    if (!s) {
        /* cJSON fails only on allocation or on a malformed tree (a Raw item
         * without text), both fatal under the project's policy. */
        fprintf(stderr, "fatal: cannot print JSON (out of memory or malformed tree)\n");
        abort();
    }
    return s;
}

/* Type of the text of a Raw item (jsonx_parse_shallow stores any value so). */
static const char *raw_type_name(const char *s)
{
    if (!s)
        return "invalid";
    s += strspn(s, " \t\r\n");
    switch (*s) {
    case '{':
        return "object";
    case '[':
        return "list";
    case '"':
        return "string";
    case 't':
    case 'f':
        return "bool";
    case 'n':
        return "null";
    default:
        return "number";
    }
}

const char *jsonx_type_name(const cJSON *item)
{
    if (!item)
        return "missing";
    switch (item->type & 0xFF) {
    case cJSON_NULL:
        return "null";
    case cJSON_False:
    case cJSON_True:
        return "bool";
    case cJSON_Number:
        return "number";
    case cJSON_String:
        return "string";
    case cJSON_Array:
        return "list";
    case cJSON_Object:
        return "object";
    case cJSON_Raw:
        return raw_type_name(item->valuestring);
    default:
        return "invalid";
    }
}

cJSON *jsonx_dup(const cJSON *item)
{
    if (!item)
        return NULL;
    return need(cJSON_Duplicate(item, true));
}

const char *jsonx_type_phrase(const cJSON *item)
{
    static const char *const names[][2] = {{"object", "an object"}, {"list", "a list"}, {"number", "a number"},
                                           {"string", "a string"}, {"bool", "a bool"}};
    const char *t = jsonx_type_name(item);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(t, names[i][0]) == 0)
            return names[i][1];
    return t; /* null, missing */
}
