/* mo_journal: the record of every request the mock operator's API port
 * received, in arrival order: when (ms since start, monotonic clock), method,
 * path, query, body (first MO_JOURNAL_BODY_MAX bytes), then the status it was
 * answered with and the fault that applied. At most `limit` entries are kept;
 * the oldest are dropped (and counted).
 *
 * Ownership: the journal copies what it is given. cJSON returned is the
 * caller's. Threading: the loop's thread only. */
#ifndef MO_JOURNAL_H
#define MO_JOURNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "mo_http.h"

#define MO_JOURNAL_BODY_MAX 65536
#define MO_JOURNAL_LIMIT_MAX 1000000

typedef struct mo_journal mo_journal;

/* limit: 1..MO_JOURNAL_LIMIT_MAX entries. */
mo_journal *mo_journal_new(size_t limit);
void mo_journal_free(mo_journal *j);

/* Records a request that just arrived; returns its sequence number (from 1). */
uint64_t mo_journal_add(mo_journal *j, uint64_t time_ms, const mo_request *req);
/* The fault that applies to it (a kind name; NULL: none). */
void mo_journal_set_fault(mo_journal *j, uint64_t seq, const char *fault);
/* How it was answered: status (> 0) at time_ms; status 0: never answered
 * (dropped when the port closed), note says why. Unknown (dropped) seq: no-op. */
void mo_journal_set_answer(mo_journal *j, uint64_t seq, int status, uint64_t time_ms,
                           const char *note);

/* Entries with seq >= since, oldest first:
 * [{"seq","time_ms","method","path","query":{k: v|[v...]|null},
 *   "body": JSON|string|null, "body_truncated"?, "status": n|null,
 *   "answered_ms": n|null, "fault": name|null, "note"?}, ...] */
cJSON *mo_journal_to_json(const mo_journal *j, uint64_t since);
void mo_journal_clear(mo_journal *j);
size_t mo_journal_count(const mo_journal *j);
unsigned long mo_journal_dropped(const mo_journal *j);

#endif
