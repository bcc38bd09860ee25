/* util: small helpers written once for the whole tree: decimal integers
 * parsed whole and range-checked, a file read up to a cap, a bound TCP
 * socket, and NULL-terminated string vectors.
 *
 * Ownership: what a function returns as char * or char ** belongs to the
 * caller (free / util_strv_free). Threading: no shared state; every
 * function is safe from any thread. */
#ifndef UTIL_H
#define UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The whole of s as a decimal integer in [lo, hi]: no sign for the unsigned
 * one, no spaces, no trailing text, no overflow. false otherwise (*out is
 * left alone). */
bool util_parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out);
bool util_parse_u64(const char *s, uint64_t *out);

/* The file's bytes, NUL-terminated, at most cap of them (*truncated says
 * whether there were more; may be NULL). NULL if it cannot be opened or
 * read (errno says why). *len (may be NULL) gets the length. */
char *util_read_file(const char *path, size_t cap, size_t *len, bool *truncated);

/* A TCP socket bound to host:port (numeric or a name; port 0: any),
 * SO_REUSEADDR, close-on-exec, non-blocking if nonblock, IPv6 sockets
 * v6-only, listening with backlog unless backlog < 0. The fd, or -1 with a
 * message in err ("cannot bind H:P: why", "cannot listen on H:P: why"). */
int util_tcp_bind(const char *host, int port, int backlog, bool nonblock, char *err, size_t errlen);

/* NULL-terminated vectors of owned strings (argv, envp). */
char **util_strv_new(void);
void util_strv_push(char ***v, char *s); /* takes s */
size_t util_strv_len(char *const *v);
void util_strv_free(char **v);

#endif
