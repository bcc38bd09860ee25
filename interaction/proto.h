/* proto: the constants of DI-engine's interaction protocol (error codes with
 * their messages, task states), the JSON envelope, tokens and task ids.
 * See docs/protocol.md.
 *
 * Ownership: functions returning char * return a heap string the caller frees.
 * Threading: all functions are safe from any thread. */
#ifndef PROTO_H
#define PROTO_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>

/* One list generates the codes, their names and the reference's messages. */
#define PROTO_CODES(X)                                                               \
    X(SUCCESS, 0, "Success.")                                                        \
    X(SYSTEM_SHUTTING_DOWN, 101, "System is shutting down.")                         \
    X(CHANNEL_NOT_FOUND, 201, "Channel not found.")                                  \
    X(CHANNEL_INVALID, 202, "Channel not match with this endpoint.")                 \
    X(SLAVE_MASTER_TOKEN_NOT_FOUND, 301, "Master token not found.")                  \
    X(SLAVE_MASTER_TOKEN_INVALID, 302, "Master not match with this endpoint.")       \
    X(SELF_TOKEN_NOT_FOUND, 401, "Slave token not found.")                           \
    X(SELF_TOKEN_INVALID, 402, "Slave token not match with this endpoint.")          \
    X(SLAVE_ALREADY_CONNECTED, 501, "This slave already connected.")                 \
    X(SLAVE_NOT_CONNECTED, 502, "This slave not connected.")                         \
    X(SLAVE_CONNECTION_REFUSED, 503, "Connection refused.")                          \
    X(SLAVE_DISCONNECTION_REFUSED, 504, "Disconnection refused.")                    \
    X(SLAVE_TASK_ALREADY_EXIST, 601, "Already has a task.")                          \
    X(SLAVE_TASK_REFUSED, 602, "Task refused.")                                      \
    X(MASTER_SLAVE_TOKEN_NOT_FOUND, 501, "Slave token not found.")                   \
    X(MASTER_SLAVE_TOKEN_INVALID, 502, "No matching slave token found in this endpoint.") \
    X(MASTER_TASK_NOT_FOUND, 601, "Task not found.")                                 \
    X(MASTER_SELF_TOKEN_NOT_FOUND, 401, "Master token not found.")                   \
    X(MASTER_SELF_TOKEN_INVALID, 402, "Master token not match with this endpoint.")

typedef enum {
#define PROTO_X_ENUM(name, code, msg) PROTO_##name,
    PROTO_CODES(PROTO_X_ENUM)
#undef PROTO_X_ENUM
        PROTO_CODE_COUNT
} proto_code_id;

int proto_code(proto_code_id id);
const char *proto_code_name(proto_code_id id);
const char *proto_code_message(proto_code_id id);

/* Task states, numbered as the reference numbers them. */
#define PROTO_TASK_STATES(X)      \
    X(IDLE, 0x00)                 \
    X(STARTING, 0x11)             \
    X(STARTED, 0x12)              \
    X(START_FAILED, 0x13)         \
    X(COMPLETED, 0x21)            \
    X(FAILED, 0x22)

typedef enum {
#define PROTO_X_STATE(name, v) TASK_##name = (v),
    PROTO_TASK_STATES(PROTO_X_STATE)
#undef PROTO_X_STATE
} proto_task_state;
const char *proto_task_state_name(proto_task_state s);

/* The learner tasks (the "name" of task data): the short name scenarios and
 * faults may write, and the name on the wire. */
#define PROTO_LEARNER_TASKS(X)                      \
    X(RESOURCE, "resource", "resource")             \
    X(START, "start", "learner_start_task")         \
    X(GET_DATA, "get_data", "learner_get_data_task") \
    X(LEARN, "learn", "learner_learn_task")         \
    X(CLOSE, "close", "learner_close_task")
/* "learn" or "learner_learn_task" -> "learner_learn_task"; NULL for any other
 * name. Static string. */
const char *proto_task_full_name(const char *name);
/* For a name that is not a task name: the full name of the task it is a
 * near miss of ("learner_learn_tsak", "lern"), else NULL. */
const char *proto_task_suggest(const char *name);

/* Envelope {"success","code","message","data"} as compact JSON with sorted
 * keys and a trailing newline, like the reference. data may be NULL (null);
 * it is borrowed. message NULL means "Success." / "Failed.". */
char *proto_envelope(bool success, int code, const char *message, const cJSON *data);
/* The error envelope for a code of the list. */
char *proto_error_envelope(proto_code_id id);

/* Parsed envelope (borrowed pointers into tree). Returns false if the body is
 * not an envelope; then err says why. */
typedef struct {
    cJSON *tree; /* owned: cJSON_Delete(tree) when done */
    bool success;
    int code;
    const char *message;
    cJSON *data;
} proto_reply;
bool proto_parse_envelope(const char *body, size_t len, proto_reply *out, char *err, size_t errlen);

#define PROTO_TOKEN_LEN 64
/* The largest reply a master or slave accepts to its requests: every reply
 * of the protocol is a small envelope (results travel as requests). */
#define PROTO_REPLY_MAX ((size_t)16 << 20)
/* 64 characters of [0-9a-fA-F] (random case, as the reference) from
 * getrandom(2). out must hold PROTO_TOKEN_LEN + 1 bytes. Returns 0 or -1. */
int proto_token_new(char out[PROTO_TOKEN_LEN + 1]);
/* Constant-time comparison (time depends only on the lengths). */
bool proto_token_equal(const char *a, const char *b);

#define PROTO_UUID_LEN 36
/* A random (version 4) UUID in canonical lower-case form. */
int proto_uuid4(char out[PROTO_UUID_LEN + 1]);
/* Accepts what Python's uuid.UUID() accepts for a 36-character string. */
bool proto_uuid_valid(const char *s);

/* Parses a Channel header value: optional surrounding white space, an
 * optional sign and decimal digits, in int range. */
bool proto_parse_channel(const char *s, int *out);

#endif
