/* mo_control: the mock operator's control API (its own port; JSON bodies;
 * every reply is the envelope {"success","code","message","data"} with code
 * 0 on success and 1 on failure):
 *
 *   GET    /control/state              everything below at once
 *   PUT    /control/learners           {"namespace","name","learners":[addr...]} set the list
 *   POST   /control/learners/add       {"namespace","name","learners":[addr...]} add
 *                                      (addresses already there are kept once)
 *   POST   /control/learners/remove    {"namespace","name","learners":[addr...]} remove
 *                                      (addresses not there are ignored)
 *   PUT|POST /control/collectors[/add|/remove]  the same for "collectors"
 *   DELETE /control/replicas           {"namespace","name"} forget the entry (the API then
 *                                      answers 404 for it)
 *   PUT    /control/settings           {"on_failed": "recreate"|"remove"}
 *   POST   /control/fault              a fault object (see mo_fault.h); data: the fault with its id
 *   GET    /control/fault              the active faults
 *   DELETE /control/fault              clear all faults, or {"id": n} just one
 *   GET    /control/journal[?since=SEQ]  the journal (see mo_journal.h)
 *   DELETE /control/journal            clear it
 *
 * set and add create the (namespace, name) entry if needed. An address is
 * "host:port". Bodies are checked strictly: an unknown field, a wrong type
 * or a bad address is a 400 naming it, and nothing changes.
 *
 * Ownership: the control handler borrows everything in mo_control.
 * Threading: the loop's thread only. */
#ifndef MO_CONTROL_H
#define MO_CONTROL_H

#include <stdbool.h>
#include <stddef.h>

#include "mo_api.h"
#include "mo_fault.h"
#include "mo_http.h"
#include "mo_journal.h"
#include "mo_registry.h"

typedef struct {
    mo_registry *reg;
    mo_faults *faults;
    mo_journal *journal;
    mo_failed_policy *policy;
    /* Opens (listen true) or closes the API port to match the refuse fault;
     * called after every change of the faults. Returns 0, or -1 with the
     * reason in err. */
    int (*set_listening)(void *ud, bool listen, char *err, size_t errlen);
    /* The API port and whether it is open now. */
    int (*api_port)(void *ud, bool *listening);
    void *ud;
} mo_control;

void mo_control_handle(mo_control *c, const mo_request *req, mo_reply *out);

#endif
