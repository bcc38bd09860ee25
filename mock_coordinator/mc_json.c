/* mc_json: exact JSON value comparison, dotted paths, short printing. */
#include "mc_json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsonx.h"
#include "xalloc.h"

/* A number token in normal form: value = sign * 0.D * 10^exp, D without
 * leading or trailing zeros (empty for zero). */
typedef struct {
    int neg;
    const char *digits[2]; /* integer part, fraction part */
    size_t ndig[2];
    size_t skip_lead;  /* leading zeros of the concatenation */
    size_t sig;        /* significant digits after skip_lead */
    long long exp;
} num_form;

static char digit_at(const num_form *n, size_t i)
{
    return i < n->ndig[0] ? n->digits[0][i] : n->digits[1][i - n->ndig[0]];
}

static bool parse_number(const char *s, num_form *out)
{
    memset(out, 0, sizeof *out);
    const char *p = s;
    if (*p == '-') {
        out->neg = 1;
        p++;
    }
    if (!isdigit((unsigned char)*p))
        return false;
    out->digits[0] = p;
    while (isdigit((unsigned char)*p))
        p++;
    out->ndig[0] = (size_t)(p - out->digits[0]);
    if (*p == '.') {
        p++;
        out->digits[1] = p;
        while (isdigit((unsigned char)*p))
            p++;
        out->ndig[1] = (size_t)(p - out->digits[1]);
        if (out->ndig[1] == 0)
            return false;
    }
    long long e = 0;
    if (*p == 'e' || *p == 'E') {
        p++;
        int eneg = 0;
        if (*p == '+' || *p == '-')
            eneg = *p++ == '-';
        if (!isdigit((unsigned char)*p))
            return false;
        for (; isdigit((unsigned char)*p); p++)
            if (e < 1000000000000LL) /* saturate: such exponents never compare equal by accident */
                e = e * 10 + (*p - '0');
        if (eneg)
            e = -e;
    }
    if (*p)
        return false;
    size_t total = out->ndig[0] + out->ndig[1];
    size_t lead = 0;
    while (lead < total && digit_at(out, lead) == '0')
        lead++;
    size_t end = total;
    while (end > lead && digit_at(out, end - 1) == '0')
        end--;
    out->skip_lead = lead;
    out->sig = end - lead;
    out->exp = e + (long long)out->ndig[0] - (long long)lead;
    return true;
}

bool mcj_number_equal(const char *a, const char *b)
{
    num_form x, y;
    if (!parse_number(a, &x) || !parse_number(b, &y))
        return false;
    if (x.sig == 0 || y.sig == 0)
        return x.sig == y.sig; /* zero, whatever its sign */
    if (x.neg != y.neg || x.sig != y.sig || x.exp != y.exp)
        return false;
    for (size_t i = 0; i < x.sig; i++)
        if (digit_at(&x, x.skip_lead + i) != digit_at(&y, y.skip_lead + i))
            return false;
    return true;
}

/* The token of a number item: a Raw token as it is, a cJSON_Number printed
 * with enough digits to round-trip. */
static const char *number_token(const cJSON *v, char buf[40])
{
    if (cJSON_IsRaw(v))
        return v->valuestring;
    snprintf(buf, 40, "%.17g", v->valuedouble);
    return buf;
}

static int kind(const cJSON *v)
{
    if (jsonx_is_number(v))
        return cJSON_Number;
    return v->type & 0xFF;
}

static size_t member_count(const cJSON *o)
{
    size_t n = 0;
    for (const cJSON *c = o->child; c; c = c->next)
        n++;
    return n;
}

bool mcj_equal(const cJSON *a, const cJSON *b)
{
    if (!a || !b)
        return a == b;
    int ka = kind(a), kb = kind(b);
    if (ka != kb)
        return false;
    switch (ka) {
    case cJSON_NULL:
    case cJSON_True:
    case cJSON_False:
        return true;
    case cJSON_Number: {
        char ba[40], bb[40];
        return mcj_number_equal(number_token(a, ba), number_token(b, bb));
    }
    case cJSON_String:
        return strcmp(a->valuestring, b->valuestring) == 0;
    case cJSON_Array: {
        const cJSON *x = a->child, *y = b->child;
        for (; x && y; x = x->next, y = y->next)
            if (!mcj_equal(x, y))
                return false;
        return !x && !y;
    }
    case cJSON_Object:
        if (member_count(a) != member_count(b))
            return false;
        for (const cJSON *x = a->child; x; x = x->next)
            if (!mcj_equal(x, jsonx_get(b, x->string)))
                return false;
        return true;
    default:
        return false;
    }
}

char *mcj_short(const cJSON *v, size_t max)
{
    if (!v)
        return xstrdup("missing");
    char *s = jsonx_print(v);
    size_t n = strlen(s);
    if (max >= 4 && n > max) {
        memcpy(s + max - 3, "...", 4);
    }
    return s;
}

static char *join_path(const char *prefix, const char *seg)
{
    if (!prefix || !*prefix)
        return xstrdup(seg);
    return xasprintf("%s.%s", prefix, seg);
}

static char *diff_at(const char *path, const cJSON *e, const cJSON *g)
{
    char *es = mcj_short(e, 300), *gs = mcj_short(g, 300);
    char *r;
    if (!g)
        r = xasprintf("at %s: missing (expected %s)", *path ? path : "the root", es);
    else if (!e)
        r = xasprintf("at %s: unexpected %s", *path ? path : "the root", gs);
    else
        r = xasprintf("at %s: expected %s, got %s", *path ? path : "the root", es, gs);
    free(es);
    free(gs);
    return r;
}

char *mcj_diff(const cJSON *e, const cJSON *g, const char *prefix)
{
    if (mcj_equal(e, g))
        return NULL;
    const char *path = prefix ? prefix : "";
    if (!e || !g || kind(e) != kind(g))
        return diff_at(path, e, g);
    if (cJSON_IsObject(e)) {
        for (const cJSON *x = e->child; x; x = x->next) {
            const cJSON *y = jsonx_get(g, x->string);
            if (!mcj_equal(x, y)) {
                char *p = join_path(path, x->string);
                char *r = mcj_diff(x, y, p);
                free(p);
                return r;
            }
        }
        for (const cJSON *y = g->child; y; y = y->next)
            if (!jsonx_get(e, y->string)) {
                char *p = join_path(path, y->string);
                char *r = diff_at(p, NULL, y);
                free(p);
                return r;
            }
        return diff_at(path, e, g);
    }
    if (cJSON_IsArray(e)) {
        int ne = cJSON_GetArraySize(e), ng = cJSON_GetArraySize(g);
        if (ne != ng) {
            char *es = mcj_short(e, 300), *gs = mcj_short(g, 300);
            char *r = xasprintf("at %s: expected a list of %d, got %d: expected %s, got %s", *path ? path : "the root",
                                ne, ng, es, gs);
            free(es);
            free(gs);
            return r;
        }
        int i = 0;
        for (const cJSON *x = e->child, *y = g->child; x && y; x = x->next, y = y->next, i++)
            if (!mcj_equal(x, y)) {
                char seg[24];
                snprintf(seg, sizeof seg, "%d", i);
                char *p = join_path(path, seg);
                char *r = mcj_diff(x, y, p);
                free(p);
                return r;
            }
    }
    return diff_at(path, e, g);
}

const cJSON *mcj_path(const cJSON *root, const char *path)
{
    const cJSON *cur = root;
    const char *p = path;
    if (!*p)
        return root;
    while (cur) {
        const char *dot = strchr(p, '.');
        size_t n = dot ? (size_t)(dot - p) : strlen(p);
        char seg[256];
        if (n == 0 || n >= sizeof seg)
            return NULL;
        memcpy(seg, p, n);
        seg[n] = '\0';
        if (cJSON_IsObject(cur)) {
            cur = jsonx_get(cur, seg);
        } else if (cJSON_IsArray(cur)) {
            char *end;
            if (!isdigit((unsigned char)seg[0]))
                return NULL;
            unsigned long idx = strtoul(seg, &end, 10);
            if (*end || idx > 100000000UL)
                return NULL;
            cur = cJSON_GetArrayItem(cur, (int)idx);
        } else {
            return NULL;
        }
        if (!dot)
            return cur;
        p = dot + 1;
    }
    return NULL;
}
