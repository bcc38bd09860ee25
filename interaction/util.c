/* util: see util.h. */
#include "util.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xalloc.h"

bool util_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || !(*s == '-' || (*s >= '0' && *s <= '9')))
        return false;
    errno = 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (end == s || *end || errno == ERANGE || v < lo || v > hi)
        return false;
    *out = (int64_t)v;
    return true;
}

bool util_parse_u64(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return false;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end || errno == ERANGE)
        return false;
    *out = (uint64_t)v;
    return true;
}

char *util_read_file(const char *path, size_t cap, size_t *len, bool *truncated)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    xbuf b = {0};
    char chunk[65536];
    bool more = false;
    for (;;) {
        size_t want = cap - b.len < sizeof chunk ? cap - b.len : sizeof chunk;
        size_t n = fread(chunk, 1, want ? want : 1, f);
        if (n == 0)
            break;
        if (want == 0) { /* one byte past the cap */
            more = true;
            break;
        }
        xbuf_append(&b, chunk, n);
    }
    bool failed = ferror(f);
    int saved = errno;
    fclose(f);
    if (failed) {
        xbuf_free(&b);
        errno = saved ? saved : EIO;
        return NULL;
    }
    if (len)
        *len = b.len;
    if (truncated)
        *truncated = more;
    return xbuf_take(&b);
}

int util_tcp_bind(const char *host, int port, int backlog, bool nonblock, char *err, size_t errlen)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | AI_PASSIVE;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int rc = getaddrinfo(host, ps, &hints, &res);
    if (rc != 0 || !res) {
        snprintf(err, errlen, "cannot resolve listen address '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | (nonblock ? SOCK_NONBLOCK : 0), 0);
    if (fd < 0) {
        snprintf(err, errlen, "cannot create a socket for %s:%d: %s (raise the open file limit?)", host, port,
                 strerror(errno));
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (res->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) < 0) {
        snprintf(err, errlen, "cannot %s %s:%d: %s", backlog >= 0 ? "listen on" : "bind", host, port, strerror(errno));
        goto fail;
    }
    if (backlog >= 0 && listen(fd, backlog) < 0) {
        snprintf(err, errlen, "cannot listen on %s:%d: %s", host, port, strerror(errno));
        goto fail;
    }
    freeaddrinfo(res);
    return fd;
fail:
    close(fd);
    freeaddrinfo(res);
    return -1;
}

char **util_strv_new(void)
{
    return xcalloc(1, sizeof(char *));
}

void util_strv_push(char ***v, char *s)
{
    size_t n = util_strv_len(*v);
    *v = xrealloc(*v, (n + 2) * sizeof **v);
    (*v)[n] = s;
    (*v)[n + 1] = NULL;
}

size_t util_strv_len(char *const *v)
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

void util_strv_free(char **v)
{
    if (!v)
        return;
    for (size_t i = 0; v[i]; i++)
        free(v[i]);
    free(v);
}
