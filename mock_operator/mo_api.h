/* mo_api: DI-orchestrator's v1alpha1 server API (server/http in its v0.2
 * releases) answered from a mo_registry instead of a cluster:
 *
 *   GET    /v1alpha1/replicas?namespace=NS&coordinator=NAME|aggregator=NAME|name=N
 *   POST   /v1alpha1/replicas          {"namespace","coordinator",
 *                                       "collectors":{"replicas":n},"learners":{"replicas":n}}
 *   DELETE /v1alpha1/replicas          (same body)
 *   POST   /v1alpha1/replicas/failed   {"namespace","coordinator",
 *                                       "collectors":[pod...],"learners":[pod...]}
 *   GET    /healthz
 *
 * Replies as the original does: the envelope {"success","code","message",
 * "data"} with code 0 / 1, status 200, 400 (bad query or body), 404 (unknown
 * pod), 501 (other methods); an unknown path gets Go's plain-text "404 page
 * not found". The original's replies carry Content-Type "text/plain;
 * charset=utf-8" (it misspells the header it sets, so Go sniffs the type);
 * so do these.
 *
 * What a mock cannot do like the original, and does instead: POST invents
 * pod addresses "JOB-learner-xxxxx.NS:22271" (JOB: the name without its
 * "-coordinator"/"-aggregator" suffix) rather than creating pods; GPU
 * requests (aggregators, DDP learners) are ignored; a GET by namespace lists
 * every entry of that namespace. A failed pod is recreated under a new name
 * (the original's behaviour) or, with MO_FAILED_REMOVE, just removed.
 *
 * Ownership: see mo_http.h. Threading: the loop's thread only. */
#ifndef MO_API_H
#define MO_API_H

#include <stdbool.h>

#include "mo_http.h"
#include "mo_registry.h"

/* At most this many replicas are added or removed by one request. */
#define MO_REPLICAS_PER_REQUEST_MAX 1000

/* What POST /v1alpha1/replicas/failed does with a failed pod. */
typedef enum { MO_FAILED_RECREATE = 0, MO_FAILED_REMOVE } mo_failed_policy;
const char *mo_failed_policy_name(mo_failed_policy p);
bool mo_failed_policy_parse(const char *s, mo_failed_policy *out);

/* The content type of every reply of the API. */
#define MO_API_CONTENT_TYPE "text/plain; charset=utf-8"

/* Answers req into *out (never fails; errors are replies). */
void mo_api_handle(mo_registry *reg, mo_failed_policy policy, const mo_request *req,
                   mo_reply *out);

#endif
