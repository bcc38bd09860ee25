/* control: the mock learner's control API, JSON over HTTP (hs.h) on its own
 * port, never on a learner's port.
 *
 *   GET    /state                   {"learners": [learner_state_json()...],
 *                                    "faults": n}
 *   GET    /fault                   {"faults": [{"id", ...as given..., "fired",
 *                                    "spent"}...]}
 *   POST   /fault                   body: a fault object or a list of them
 *                                    -> {"ok": true, "id": first, "ids": [...]}
 *   DELETE /fault                   remove every fault and lift what they
 *                                    hold (learner_lift) -> {"ok": true,
 *                                    "cleared": n}
 *   DELETE /fault/<id>              remove one fault -> {"ok": true}
 *   POST   /learner/<k>/<kind>      a state fault on learner <k> (index or
 *                                    id), at once: kind drop (body
 *                                    {"back_after_ms": t}), die, refuse,
 *                                    no_heartbeat -> {"ok": true, "id": n}
 *   POST   /learner/<k>/resume      lift it (learner_lift) -> {"ok": true}
 *
 * Errors: 400 (bad body: the message names the member and the problem), 404
 * (no such endpoint, learner or fault), 405 (method), each as
 * {"ok": false, "error": "..."}. Bodies are capped at 1 MiB.
 *
 * Ownership: borrows the learners and the fault set (they must outlive it).
 * Threading: the loop's thread only. */
#ifndef ML_CONTROL_H
#define ML_CONTROL_H

#include <stddef.h>

#include "ev.h"
#include "fault.h"
#include "learner.h"

typedef struct control control;

/* NULL with the reason in err. */
control *control_start(ev_loop *loop, const char *host, int port, learner **learners, int count, fault_set *faults,
                       char *err, size_t errlen);
int control_port(const control *c);
void control_stop(control *c);

#endif
