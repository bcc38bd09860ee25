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
#include "xalloc.h"

struct dump {
    int fd;
    char *path;
    int failed; /* a write failed once: logged, not repeated */
};

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
    return d;
}

void dump_close(dump *d)
{
    if (!d)
        return;
    close(d->fd);
    free(d->path);
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

/* A JSON string literal of s (escaped). */
static char *json_str(const char *s)
{
    cJSON *j = cJSON_CreateString(s ? s : "");
    char *t = jsonx_print(j);
    cJSON_Delete(j);
    return t;
}

int dump_learn_items(dump *d, const char *learner, const char *task_id, unsigned long learn_n, const cJSON *items)
{
    if (!d || !cJSON_IsArray(items))
        return 0;
    xbuf b = {0};
    char *tid = json_str(task_id);
    size_t i = 0;
    for (const cJSON *it = items->child; it; it = it->next, i++) {
        xbuf_printf(&b, "{\"learner\": \"%s\", \"task_id\": %s, \"learn\": %lu, \"index\": %zu, \"item\": ", learner,
                    tid, learn_n, i);
        if (cJSON_IsRaw(it)) {
            put_line_safe(&b, it->valuestring, strlen(it->valuestring));
        } else {
            char *t = jsonx_print(it);
            put_line_safe(&b, t, strlen(t));
            free(t);
        }
        xbuf_puts(&b, "}\n");
    }
    free(tid);
    int rc = b.len ? write_all(d, b.data, b.len) : 0;
    xbuf_free(&b);
    return rc;
}

int dump_result(dump *d, const char *learner, const char *task_id, const char *task, unsigned long learn_n,
                const char *report, const char *result_json)
{
    if (!d)
        return 0;
    char *nt = json_str(task), *tid = json_str(task_id);
    xbuf b = {0};
    xbuf_printf(&b, "{\"learner\": \"%s\", \"task_id\": %s, \"task\": %s, ", learner, tid, nt);
    if (learn_n)
        xbuf_printf(&b, "\"learn\": %lu, ", learn_n);
    xbuf_printf(&b, "\"report\": \"%s\", \"result\": ", report);
    put_line_safe(&b, result_json, strlen(result_json));
    xbuf_puts(&b, "}\n");
    free(nt);
    free(tid);
    int rc = write_all(d, b.data, b.len);
    xbuf_free(&b);
    return rc;
}
