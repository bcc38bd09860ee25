/* mo_server: the mock operator's two HTTP servers on one ev loop: the API
 * port (DI-orchestrator's v1alpha1 API, mo_api.h, with faults from
 * mo_fault.h applied and every request journaled) and the control port
 * (mo_control.h).
 *
 * A delayed answer is a deferred hs reply and an ev timer: the loop never
 * blocks. A refuse fault stops the API server (its listening socket and
 * every open connection close; delayed requests are dropped and journaled
 * as such); clearing it listens again on the same port.
 *
 * Ownership: the server takes over the registry given to mo_server_new()
 * and frees it in mo_server_free(). Threading: the loop's thread only. */
#ifndef MO_SERVER_H
#define MO_SERVER_H

#include <stddef.h>

#include "ev.h"
#include "mo_api.h"
#include "mo_registry.h"

/* Request bodies larger than this are answered 413 on both ports. */
#define MO_BODY_LIMIT ((size_t)1 << 20)

typedef struct {
    const char *host;        /* NULL: 127.0.0.1 */
    int port;                /* API port; 0: any free port */
    int control_port;        /* 0: any free port */
    size_t journal_limit;    /* entries kept */
    mo_failed_policy on_failed;
} mo_server_config;

typedef struct mo_server mo_server;

/* Starts both servers. NULL with the reason in err. On failure the registry
 * is freed too. */
mo_server *mo_server_new(ev_loop *loop, const mo_server_config *cfg, mo_registry *reg, char *err,
                         size_t errlen);
int mo_server_port(const mo_server *s);
int mo_server_control_port(const mo_server *s);
/* Stops both servers (pending delayed answers are dropped) and frees all. */
void mo_server_free(mo_server *s);

#endif
