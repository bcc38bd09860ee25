/* mc_run: one run of the mock coordinator: a master on its own ev loop
 * connects to the target slave under the name "aggregator", sends the tasks
 * of a script one at a time, checks each outcome against its expectation,
 * then checks the learners' dumps (mc_dump.h, mc_verify.h), and prints the
 * summary:
 *   {"ok": bool, "target": "HOST:PORT", "rounds": R,
 *    "tasks": [{"name", "status", "latency_ms", "message", "result"}...],
 *    "failures": ["..."]}
 * status is "completed", "failed", "start_failed", or "skipped" (not sent:
 * e.g. a learn whose "batch" is unknown because its get-data failed).
 *
 * The run's state machine (one function changes state, and logs it):
 *   CONNECTING -> CONNECT_WAIT -> CONNECTING ... (connection-level failures
 *   are retried within 10 s x time scale) -> NEXT -> TASK -> NEXT ... ->
 *   CLOSING (DELETE /disconnect, waiting for its answer up to 2 s x time
 *   scale) -> DONE.
 * SIGTERM / SIGINT end the run at once: the summary so far is printed and
 * the exit code is 1.
 *
 * Ownership: cfg and script are borrowed for the call.
 * Threading: runs its own loop on the calling thread; blocks SIGTERM and
 * SIGINT in that thread (signalfd). */
#ifndef MC_RUN_H
#define MC_RUN_H

#include <stdbool.h>
#include <stdio.h>

#include "mc_cli.h"
#include "mc_script.h"

/* Runs the tasks of script against cfg->target; script_mode says whether
 * the script came from --script (for "rounds" and logs). Writes the summary
 * line to out. Returns the exit code: 0 every expectation held, 1 not. */
int mc_run_main(const mc_config *cfg, const mcs_script *script, bool script_mode, FILE *out);

#endif
