/* mo_fault: the faults the mock operator injects on its API port, a small set
 * of named commands given as JSON on the control port (this header and the
 * kind table in mo_fault.c are the schema, which mock_operator --help shows):
 *
 *   {"kind": "error_status", "status": 500}  answer this status (200-599;
 *                                           default 500) with a failure
 *                                           envelope instead of the real answer
 *   {"kind": "delay", "delay_ms": 2000}      answer normally, but that much later
 *                                           (without blocking the loop)
 *   {"kind": "garbage", "body": "..."}      answer 200 with a body that is not
 *                                           JSON (default "<html>not json</html>")
 *   {"kind": "refuse"}                      close the API port until the fault
 *                                           is cleared (connections refused)
 *
 * Every fault may say "optional": true: it need not apply in a run (the
 * scenario runner's verdict reads it; the operator only lists it).
 * Request faults also take "count": k (how many requests it applies to;
 * absent: until cleared), "path": "/v1alpha1/replicas" (only requests for
 * this exact path), "method": "GET" (only this method); error_status and
 * garbage also take "delay_ms" (answer that late). refuse takes none of
 * these. Faults apply in the order they were added; one request gets at most
 * one fault: the first that matches. A fault whose count is used up is
 * removed.
 *
 * Ownership: the list owns its faults. mo_fault_action strings are the
 * caller's (mo_fault_action_release). cJSON returned is the caller's.
 * Threading: the loop's thread only. */
#ifndef MO_FAULT_H
#define MO_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "suggest.h"

#define MO_FAULTS_MAX 256
#define MO_FAULT_DELAY_MAX_MS 600000L
#define MO_FAULT_BODY_MAX 65536

typedef enum {
    MO_FAULT_ERROR_STATUS = 0,
    MO_FAULT_DELAY,
    MO_FAULT_GARBAGE,
    MO_FAULT_REFUSE,
} mo_fault_kind;

const char *mo_fault_kind_name(mo_fault_kind k);

typedef struct mo_faults mo_faults;

/* What to do with one request. */
typedef struct {
    bool applies;        /* false: answer normally, at once */
    mo_fault_kind kind;  /* ERROR_STATUS, DELAY or GARBAGE */
    int status;          /* ERROR_STATUS */
    long delay_ms;       /* >= 0: answer this much later */
    char *body;          /* GARBAGE: heap */
    uint64_t id;         /* the fault that applied */
    unsigned long applied; /* its uses so far, this one included */
} mo_fault_action;

void mo_fault_action_release(mo_fault_action *a);

mo_faults *mo_faults_new(void);
void mo_faults_free(mo_faults *f);

/* What is wrong with a fault object: the member at fault ("" for the object
 * itself) and the message. */
typedef suggest_error mo_fault_error;

/* Validates a fault object exactly as mo_faults_add() does (the scenario
 * runner checks scenario files with it). */
bool mo_fault_check(const cJSON *spec, mo_fault_error *e);

/* Validates a fault object and adds it. Returns its id (>= 1), or 0 with the
 * reason in err (a field name and what is wrong). */
uint64_t mo_faults_add(mo_faults *f, const cJSON *spec, char *err, size_t errlen);
/* Removes one fault; false if there is none with this id. */
bool mo_faults_remove(mo_faults *f, uint64_t id);
void mo_faults_clear(mo_faults *f);
size_t mo_faults_count(const mo_faults *f);

/* The fault for a request (and one use of its count), into *out. */
void mo_faults_take(mo_faults *f, const char *method, const char *path, mo_fault_action *out);
/* Whether a refuse fault is active. */
bool mo_faults_refusing(const mo_faults *f);
/* The id of the refuse fault that holds the port closed, or 0. */
uint64_t mo_faults_refuse_id(const mo_faults *f);

/* [{"id","kind","status","delay_ms","count","applied","path","method","body"}...] */
cJSON *mo_faults_to_json(const mo_faults *f);
/* One fault by id, or NULL. */
cJSON *mo_faults_one_json(const mo_faults *f, uint64_t id);

#endif
