/* proto: protocol constants, envelope, tokens and task ids. */
#include "proto.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "jsonx.h"
#include "suggest.h"
#include "xalloc.h"

static const struct {
    int code;
    const char *name;
    const char *message;
} codes[] = {
#define PROTO_X_TABLE(name, code, msg) {code, #name, msg},
    PROTO_CODES(PROTO_X_TABLE)
#undef PROTO_X_TABLE
};

int proto_code(proto_code_id id)
{
    return id < PROTO_CODE_COUNT ? codes[id].code : -1;
}

const char *proto_code_name(proto_code_id id)
{
    return id < PROTO_CODE_COUNT ? codes[id].name : "UNKNOWN";
}

const char *proto_code_message(proto_code_id id)
{
    return id < PROTO_CODE_COUNT ? codes[id].message : "Failed.";
}

const char *proto_task_state_name(proto_task_state s)
{
    switch (s) {
#define PROTO_X_NAME(name, v) \
    case TASK_##name:         \
        return #name;
        PROTO_TASK_STATES(PROTO_X_NAME)
#undef PROTO_X_NAME
    }
    return "UNKNOWN";
}

static const char *const task_short[] = {
#define PROTO_X_SHORT(id, s, full) s,
    PROTO_LEARNER_TASKS(PROTO_X_SHORT)
#undef PROTO_X_SHORT
};
static const char *const task_full[] = {
#define PROTO_X_FULL(id, s, full) full,
    PROTO_LEARNER_TASKS(PROTO_X_FULL)
#undef PROTO_X_FULL
};
#define TASK_COUNT (sizeof task_full / sizeof task_full[0])

const char *proto_task_full_name(const char *name)
{
    for (size_t i = 0; i < TASK_COUNT; i++)
        if (strcmp(name, task_short[i]) == 0 || strcmp(name, task_full[i]) == 0)
            return task_full[i];
    return NULL;
}

const char *proto_task_suggest(const char *name)
{
    if (proto_task_full_name(name))
        return NULL;
    const char *s = suggest_nearest(name, task_full, TASK_COUNT);
    if (!s) {
        s = suggest_nearest(name, task_short, TASK_COUNT);
        if (s)
            s = proto_task_full_name(s);
    }
    return s;
}

/* True if s can be written as a JSON string as it is (the usual fixed
 * messages): no quote, backslash, control or non-ASCII character. */
static bool plain_text(const char *s)
{
    for (; *s; s++)
        if (*s == '"' || *s == '\\' || (unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return false;
    return true;
}

char *proto_envelope(bool success, int code, const char *message, const cJSON *data)
{
    if (!message)
        message = success ? "Success." : "Failed.";
    if (!data && plain_text(message))
        return xasprintf("{\"code\":%d,\"data\":null,\"message\":\"%s\",\"success\":%s}\n", code, message,
                         success ? "true" : "false");
    cJSON *m = cJSON_CreateString(message);
    char *mtext = m ? cJSON_PrintUnformatted(m) : NULL;
    cJSON_Delete(m);
    if (!mtext)
        mtext = xstrdup("\"Failed.\"");
    char *dtext = data ? jsonx_print(data) : NULL;
    char *out = xasprintf("{\"code\":%d,\"data\":%s,\"message\":%s,\"success\":%s}\n", code,
                          dtext ? dtext : "null", mtext, success ? "true" : "false");
    free(dtext);
    free(mtext);
    return out;
}

char *proto_error_envelope(proto_code_id id)
{
    return proto_envelope(id == PROTO_SUCCESS, proto_code(id), proto_code_message(id), NULL);
}

bool proto_parse_envelope(const char *body, size_t len, proto_reply *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    char perr[160];
    cJSON *tree = jsonx_parse(body, len, perr, sizeof perr);
    if (!tree) {
        snprintf(err, errlen, "reply is not JSON: %s", perr);
        return false;
    }
    if (!cJSON_IsObject(tree)) {
        snprintf(err, errlen, "reply is a JSON %s, not an object", jsonx_type_name(tree));
        cJSON_Delete(tree);
        return false;
    }
    const cJSON *s = jsonx_get(tree, "success");
    const cJSON *c = jsonx_get(tree, "code");
    int64_t code = 0;
    if (!cJSON_IsBool(s)) {
        snprintf(err, errlen, "reply has no bool \"success\"");
        cJSON_Delete(tree);
        return false;
    }
    if (c && !jsonx_get_i64(c, &code)) {
        snprintf(err, errlen, "reply's \"code\" is not an integer");
        cJSON_Delete(tree);
        return false;
    }
    out->tree = tree;
    out->success = cJSON_IsTrue(s);
    out->code = (int)code;
    out->message = jsonx_get_str(tree, "message");
    out->data = jsonx_get(tree, "data");
    return true;
}

int proto_token_new(char out[PROTO_TOKEN_LEN + 1])
{
    unsigned char raw[PROTO_TOKEN_LEN];
    size_t got = 0;
    while (got < sizeof raw) {
        ssize_t n = getrandom(raw + got, sizeof raw - got, 0);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        got += (size_t)n;
    }
    /* Each byte gives one hex digit (low nibble) and its case (bit 4), so
     * letters come in mixed case as in the reference's tokens. */
    static const char lower[] = "0123456789abcdef", upper[] = "0123456789ABCDEF";
    for (size_t i = 0; i < PROTO_TOKEN_LEN; i++)
        out[i] = (raw[i] & 0x10) ? upper[raw[i] & 0xf] : lower[raw[i] & 0xf];
    out[PROTO_TOKEN_LEN] = '\0';
    return 0;
}

bool proto_token_equal(const char *a, const char *b)
{
    if (!a || !b)
        return false;
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    size_t n = la < lb ? la : lb;
    for (size_t i = 0; i < n; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

/* Random bytes for task ids, drawn from getrandom(2) 4 KiB at a time (one
 * system call per 256 ids rather than one per id); per thread. Tokens
 * (secrets) still come straight from getrandom. */
static int random_bytes(unsigned char *out, size_t n)
{
    static _Thread_local unsigned char pool[4096];
    static _Thread_local size_t left;
    if (n > sizeof pool)
        return -1;
    if (left < n) {
        size_t got = 0;
        while (got < sizeof pool) {
            ssize_t k = getrandom(pool + got, sizeof pool - got, 0);
            if (k < 0) {
                if (errno == EINTR)
                    continue;
                return -1;
            }
            got += (size_t)k;
        }
        left = sizeof pool;
    }
    memcpy(out, pool + sizeof pool - left, n);
    memset(pool + sizeof pool - left, 0, n); /* used bytes are not kept */
    left -= n;
    return 0;
}

int proto_uuid4(char out[PROTO_UUID_LEN + 1])
{
    unsigned char r[16];
    if (random_bytes(r, sizeof r) < 0)
        return -1;
    r[6] = (unsigned char)((r[6] & 0x0f) | 0x40);
    r[8] = (unsigned char)((r[8] & 0x3f) | 0x80);
    static const char hex[] = "0123456789abcdef";
    char *o = out;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            *o++ = '-';
        *o++ = hex[r[i] >> 4];
        *o++ = hex[r[i] & 0xf];
    }
    *o = '\0';
    return 0;
}

bool proto_uuid_valid(const char *s)
{
    /* Python's uuid.UUID(hex): strips "urn:", "uuid:", braces and hyphens,
     * then wants exactly 32 hex digits. */
    if (!s)
        return false;
    size_t n = strlen(s);
    if (n > 64)
        return false;
    const char *p = s;
    if (strncmp(p, "urn:", 4) == 0)
        p += 4;
    if (strncmp(p, "uuid:", 5) == 0)
        p += 5;
    size_t digits = 0;
    for (; *p; p++) {
        if (*p == '{' || *p == '}' || *p == '-')
            continue;
        if (!isxdigit((unsigned char)*p))
            return false;
        digits++;
    }
    return digits == 32;
}

bool proto_parse_channel(const char *s, int *out)
{
    if (!s)
        return false;
    while (isspace((unsigned char)*s))
        s++;
    if (!*s)
        return false;
    errno = 0;
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return false;
    while (isspace((unsigned char)*end))
        end++;
    if (*end)
        return false;
    *out = (int)v;
    return true;
}
