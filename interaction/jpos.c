/* jpos: a position-only scan of JSON text (see jpos.h). */
#include "jpos.h"

#include <stdlib.h>
#include <string.h>

#include "xalloc.h"

typedef struct {
    char *path;
    int line;
} pos_entry;

typedef struct {
    char *path;
    int first_line, line;
} dup_entry;

struct jpos {
    pos_entry *e;
    size_t n, cap;
    dup_entry *d;
    size_t nd, capd;
};

typedef struct {
    const char *s;
    size_t len, i;
    int line;
    jpos *out;
} scan;

static void add_entry(jpos *p, const char *path, int line)
{
    if (p->n == p->cap) {
        p->cap = p->cap ? p->cap * 2 : 64;
        p->e = xrealloc(p->e, p->cap * sizeof *p->e);
    }
    p->e[p->n].path = xstrdup(path);
    p->e[p->n].line = line;
    p->n++;
}

static void skip_ws(scan *sc)
{
    while (sc->i < sc->len) {
        char c = sc->s[sc->i];
        if (c == '\n')
            sc->line++;
        else if (c != ' ' && c != '\t' && c != '\r')
            return;
        sc->i++;
    }
}

/* Reads a string token (at '"'); returns its raw inside (escapes kept, which
 * is enough for the plain keys of scenario and config files). */
static char *read_string(scan *sc)
{
    size_t start = ++sc->i;
    while (sc->i < sc->len && sc->s[sc->i] != '"') {
        if (sc->s[sc->i] == '\\')
            sc->i++;
        sc->i++;
    }
    char *r = xstrndup(sc->s + start, sc->i - start);
    if (sc->i < sc->len)
        sc->i++;
    return r;
}

static void scan_value(scan *sc, const char *path, int depth);

static void scan_object(scan *sc, const char *path, int depth)
{
    sc->i++; /* '{' */
    /* keys of this object with their lines, for duplicates */
    char **keys = NULL;
    int *lines = NULL;
    size_t nk = 0;
    for (;;) {
        skip_ws(sc);
        if (sc->i >= sc->len || sc->s[sc->i] == '}') {
            sc->i++;
            break;
        }
        if (sc->s[sc->i] == ',') {
            sc->i++;
            continue;
        }
        if (sc->s[sc->i] != '"') { /* not valid JSON: stop */
            sc->i = sc->len;
            break;
        }
        int kline = sc->line;
        char *key = read_string(sc);
        char *child = path[0] ? xasprintf("%s.%s", path, key) : xstrdup(key);
        for (size_t k = 0; k < nk; k++)
            if (strcmp(keys[k], key) == 0) {
                jpos *p = sc->out;
                if (p->nd == p->capd) {
                    p->capd = p->capd ? p->capd * 2 : 8;
                    p->d = xrealloc(p->d, p->capd * sizeof *p->d);
                }
                p->d[p->nd].path = xstrdup(child);
                p->d[p->nd].first_line = lines[k];
                p->d[p->nd].line = kline;
                p->nd++;
                break;
            }
        keys = xrealloc(keys, (nk + 1) * sizeof *keys);
        lines = xrealloc(lines, (nk + 1) * sizeof *lines);
        keys[nk] = key;
        lines[nk] = kline;
        nk++;
        add_entry(sc->out, child, kline);
        skip_ws(sc);
        if (sc->i < sc->len && sc->s[sc->i] == ':')
            sc->i++;
        skip_ws(sc);
        /* the member's value is recorded under the key's line already; scan
         * only its children */
        scan_value(sc, child, depth + 1);
        free(child);
    }
    for (size_t k = 0; k < nk; k++)
        free(keys[k]);
    free(keys);
    free(lines);
}

static void scan_array(scan *sc, const char *path, int depth)
{
    sc->i++; /* '[' */
    size_t idx = 0;
    for (;;) {
        skip_ws(sc);
        if (sc->i >= sc->len || sc->s[sc->i] == ']') {
            sc->i++;
            break;
        }
        if (sc->s[sc->i] == ',') {
            sc->i++;
            continue;
        }
        char *child = xasprintf("%s[%zu]", path, idx++);
        add_entry(sc->out, child, sc->line);
        scan_value(sc, child, depth + 1);
        free(child);
    }
}

static void scan_value(scan *sc, const char *path, int depth)
{
    skip_ws(sc);
    if (sc->i >= sc->len || depth > 512) {
        sc->i = sc->len;
        return;
    }
    char c = sc->s[sc->i];
    if (c == '{')
        scan_object(sc, path, depth);
    else if (c == '[')
        scan_array(sc, path, depth);
    else if (c == '"')
        free(read_string(sc));
    else
        while (sc->i < sc->len && !strchr(",]} \t\r\n", sc->s[sc->i]))
            sc->i++;
}

jpos *jpos_scan(const char *text, size_t len)
{
    jpos *p = xcalloc(1, sizeof *p);
    scan sc = {.s = text, .len = len, .i = 0, .line = 1, .out = p};
    skip_ws(&sc);
    add_entry(p, "", sc.line);
    scan_value(&sc, "", 0);
    return p;
}

void jpos_free(jpos *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->n; i++)
        free(p->e[i].path);
    for (size_t i = 0; i < p->nd; i++)
        free(p->d[i].path);
    free(p->e);
    free(p->d);
    free(p);
}

int jpos_line(const jpos *p, const char *path)
{
    char *q = xstrdup(path ? path : "");
    for (;;) {
        for (size_t i = 0; i < p->n; i++)
            if (strcmp(p->e[i].path, q) == 0) {
                free(q);
                return p->e[i].line;
            }
        if (!q[0])
            break;
        /* drop the last component: ".key" or "[i]" */
        size_t l = strlen(q);
        while (l > 0 && q[l - 1] != '.' && q[l - 1] != '[')
            l--;
        if (l > 0)
            l--;
        q[l] = '\0';
    }
    free(q);
    return 1;
}

size_t jpos_dup_count(const jpos *p) { return p->nd; }

const char *jpos_dup(const jpos *p, size_t i, int *first_line, int *line)
{
    *first_line = p->d[i].first_line;
    *line = p->d[i].line;
    return p->d[i].path;
}

void jpos_text_linecol(const char *text, size_t len, size_t off, int *line, int *col)
{
    int l = 1, c = 1;
    for (size_t i = 0; i < off && i < len; i++) {
        if (text[i] == '\n') {
            l++;
            c = 1;
        } else {
            c++;
        }
    }
    *line = l;
    *col = c;
}
