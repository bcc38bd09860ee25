/* ilog: process-wide log configuration and line formatting. */
#include "ilog.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *g_program = "dilearn";
static ilog_level g_level = ILOG_INFO;
static ilog_format g_format = ILOG_HUMAN;

static const char *const level_names[] = {"debug", "info", "warn", "error", "off"};

void ilog_init(const char *program, ilog_level level, ilog_format format)
{
    g_program = program;
    g_level = level;
    g_format = format;
}

bool ilog_parse_level(const char *s, ilog_level *out)
{
    for (int i = 0; i <= ILOG_OFF; i++)
        if (strcmp(s, level_names[i]) == 0) {
            *out = (ilog_level)i;
            return true;
        }
    return false;
}

bool ilog_parse_format(const char *s, ilog_format *out)
{
    if (strcmp(s, "human") == 0)
        *out = ILOG_HUMAN;
    else if (strcmp(s, "json") == 0)
        *out = ILOG_JSON;
    else
        return false;
    return true;
}

bool ilog_enabled(ilog_level level)
{
    return level >= g_level && g_level != ILOG_OFF;
}

/* Appends s to buf as the inside of a JSON string. */
static size_t json_escape(char *buf, size_t cap, size_t pos, const char *s)
{
    for (; *s && pos + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            buf[pos++] = '\\';
            buf[pos++] = (char)c;
        } else if (c < 0x20) {
            pos += (size_t)snprintf(buf + pos, cap - pos, "\\u%04x", c);
        } else {
            buf[pos++] = (char)c;
        }
    }
    return pos;
}

void ilog_write(ilog_level level, const char *who, const char *fmt, ...)
{
    if (!ilog_enabled(level))
        return;
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[40];
    size_t wl = strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(when + wl, sizeof when - wl, ".%03ldZ", ts.tv_nsec / 1000000L);

    char line[4096];
    size_t pos;
    if (g_format == ILOG_JSON) {
        pos = (size_t)snprintf(line, sizeof line, "{\"time\":\"%s\",\"level\":\"%s\",\"program\":\"", when,
                               level_names[level]);
        pos = json_escape(line, sizeof line, pos, g_program);
        pos += (size_t)snprintf(line + pos, sizeof line - pos, "\",\"pid\":%d,\"learner\":", (int)getpid());
        if (who) {
            line[pos++] = '"';
            pos = json_escape(line, sizeof line, pos, who);
            line[pos++] = '"';
        } else {
            pos += (size_t)snprintf(line + pos, sizeof line - pos, "null");
        }
        pos += (size_t)snprintf(line + pos, sizeof line - pos, ",\"msg\":\"");
        pos = json_escape(line, sizeof line, pos, msg);
        if (pos + 3 > sizeof line)
            pos = sizeof line - 3;
        line[pos++] = '"';
        line[pos++] = '}';
    } else {
        pos = (size_t)snprintf(line, sizeof line, "%s %-5s %s[%d]%s%s%s %s", when, level_names[level], g_program,
                               (int)getpid(), who ? " [" : "", who ? who : "", who ? "]" : "", msg);
        if (pos > sizeof line - 2)
            pos = sizeof line - 2;
    }
    line[pos++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, pos);
    (void)w;
}

const char *ilog_redact_token(const char *token, char *out, size_t outlen)
{
    if (!token) {
        snprintf(out, outlen, "(none)");
        return out;
    }
    snprintf(out, outlen, "%.6s...", token);
    return out;
}
