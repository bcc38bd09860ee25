/* dump: JSON lines of received items and sent results. */
#include "dump.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ilog.h"
#include "jsonx.h"
#include "util.h"
#include "xalloc.h"

/* A learner's last learn number in the file before this process opened it
 * (a restarted learner appends to its predecessor's dump). */
typedef struct {
    char *learner;
    unsigned long last;
} prior;

struct dump {
    int fd;
    char *path;
    int failed; /* a write failed once: logged, not repeated */
    prior *priors;
    size_t npriors;
};

/* Reads the learn numbers already in the file, so that a restarted process
 * goes on counting where its predecessor stopped and no learn number is
 * used twice for one learner. */
static void read_priors(dump *d)
{
    size_t len;
    char *text = util_read_file(d->path, (size_t)1 << 30, &len, NULL);
    for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
        nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        const char *lp = strstr(line, "\", \"learn\": ");
        if (strncmp(line, "{\"learner\": \"", 13) != 0 || !lp)
            continue;
        const char *id = line + 13, *q = strchr(id, '"');
        unsigned long n = strtoul(lp + 12, NULL, 10);
        if (!q || q > lp)
            continue;
        size_t k;
        for (k = 0; k < d->npriors; k++)
            if (strlen(d->priors[k].learner) == (size_t)(q - id) && strncmp(d->priors[k].learner, id, (size_t)(q - id)) == 0)
                break;
        if (k == d->npriors) {
            d->priors = xrealloc(d->priors, (d->npriors + 1) * sizeof *d->priors);
            d->priors[d->npriors++] = (prior){xstrndup(id, (size_t)(q - id)), 0};
        }
        if (n > d->priors[k].last)
            d->priors[k].last = n;
    }
    free(text);
}

static unsigned long prior_learns(const dump *d, const char *learner)
{
    for (size_t k = 0; k < d->npriors; k++)
        if (strcmp(d->priors[k].learner, learner) == 0)
            return d->priors[k].last;
    return 0;
}

dump *dump_open(const char *path, char *err, size_t errlen)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot open dump file '%s': %s", path, strerror(errno));
        return NULL;
    }
    dump *d = xcalloc(1, sizeof *d);
    d->fd = fd;
    d->path = xstrdup(path);
    read_priors(d);
    return d;
}

void dump_close(dump *d)
{
    if (!d)
        return;
    close(d->fd);
    free(d->path);
    for (size_t k = 0; k < d->npriors; k++)
        free(d->priors[k].learner);
    free(d->priors);
    free(d);
}

static int write_all(dump *d, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(d->fd, buf, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            if (!d->failed)
                LOG_ERROR(NULL, "cannot write dump file '%s': %s", d->path, n < 0 ? strerror(errno) : "no progress");
            d->failed = 1;
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Appends JSON text, with CR and LF (only possible as white space between
 * tokens) turned into spaces. */
static void put_line_safe(xbuf *b, const char *text, size_t len)
{
    size_t start = b->len;
    xbuf_append(b, text, len);
    for (size_t i = start; i < b->len; i++)
        if (b->data[i] == '\n' || b->data[i] == '\r')
            b->data[i] = ' ';
}

int dump_learn_items(dump *d, const char *learner, unsigned long learn_n, const cJSON *items)
{
    if (!d || !cJSON_IsArray(items))
        return 0;
    xbuf b = {0};
    size_t i = 0;
    learn_n += prior_learns(d, learner);
    for (const cJSON *it = items->child; it; it = it->next, i++) {
        xbuf_printf(&b, "{\"learner\": \"%s\", \"learn\": %lu, \"index\": %zu, \"item\": ", learner, learn_n, i);
        if (cJSON_IsRaw(it)) {
            put_line_safe(&b, it->valuestring, strlen(it->valuestring));
        } else {
            char *t = jsonx_print(it);
            put_line_safe(&b, t, strlen(t));
            free(t);
        }
        xbuf_puts(&b, "}\n");
    }
    int rc = b.len ? write_all(d, b.data, b.len) : 0;
    xbuf_free(&b);
    return rc;
}

int dump_result(dump *d, const char *learner, const char *task, const char *report, const char *result_json)
{
    if (!d)
        return 0;
    cJSON *name = cJSON_CreateString(task);
    char *nt = jsonx_print(name);
    cJSON_Delete(name);
    xbuf b = {0};
    xbuf_printf(&b, "{\"learner\": \"%s\", \"task\": %s, \"report\": \"%s\", \"result\": ", learner, nt, report);
    put_line_safe(&b, result_json, strlen(result_json));
    xbuf_puts(&b, "}\n");
    free(nt);
    int rc = write_all(d, b.data, b.len);
    xbuf_free(&b);
    return rc;
}
