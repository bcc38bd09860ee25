/* ilog: log lines with time, level, component and optional learner id,
 * human-readable by default or JSON lines, to stderr.
 *
 * Configuration is process-wide and set once at start-up (ilog_init) before
 * any other thread exists; ilog_write() may then be called from any thread
 * (each line is one write(2)). Secrets: log a token only through
 * ilog_redact_token(). */
#ifndef ILOG_H
#define ILOG_H

#include <stdbool.h>
#include <stddef.h>

typedef enum { ILOG_DEBUG = 0, ILOG_INFO, ILOG_WARN, ILOG_ERROR, ILOG_OFF } ilog_level;
typedef enum { ILOG_HUMAN = 0, ILOG_JSON } ilog_format;

/* program: name shown in every line ("aggregator", "mock_learner", ...). */
void ilog_init(const char *program, ilog_level level, ilog_format format);
/* Parse "debug|info|warn|error|off" / "human|json"; false if unknown. */
bool ilog_parse_level(const char *s, ilog_level *out);
bool ilog_parse_format(const char *s, ilog_format *out);
bool ilog_enabled(ilog_level level);

/* who: the learner / peer id the line is about, or NULL. */
void ilog_write(ilog_level level, const char *who, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Writes the first 6 characters of a token and "…" into out. */
const char *ilog_redact_token(const char *token, char *out, size_t outlen);

#define LOG_DEBUG(who, ...) ilog_write(ILOG_DEBUG, who, __VA_ARGS__)
#define LOG_INFO(who, ...) ilog_write(ILOG_INFO, who, __VA_ARGS__)
#define LOG_WARN(who, ...) ilog_write(ILOG_WARN, who, __VA_ARGS__)
#define LOG_ERROR(who, ...) ilog_write(ILOG_ERROR, who, __VA_ARGS__)

#endif
