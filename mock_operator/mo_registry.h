/* mo_registry: the mock operator's model of a cluster: per (namespace, name)
 * an entry with the addresses ("host:port") of its collectors and learners,
 * where name is the coordinator's or the aggregator's pod name; plus the
 * record of every replica reported as failed, and the generator of pod names
 * for replicas the mock invents.
 *
 * Limits: MO_NAME_MAX for namespaces and names, MO_ADDR_MAX for addresses,
 * MO_LIST_MAX addresses per list, MO_ENTRIES_MAX entries, MO_FAILED_MAX
 * failure records (the oldest are dropped). Functions that would exceed a
 * limit fail with a message instead.
 *
 * Ownership: the registry owns its entries and copies every string given to
 * it; pointers it returns are borrowed and stay valid until the entry or
 * address they belong to is changed or removed. cJSON trees it returns are
 * the caller's (cJSON_Delete).
 * Threading: not thread-safe; the mock uses it from its loop's thread only. */
#ifndef MO_REGISTRY_H
#define MO_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define MO_NAME_MAX 253
#define MO_ADDR_MAX 300
#define MO_LIST_MAX 10000
#define MO_ENTRIES_MAX 10000
#define MO_FAILED_MAX 10000

/* DI-orchestrator's default ports for the replicas it creates. */
#define MO_COLLECTOR_PORT 22270
#define MO_LEARNER_PORT 22271

typedef enum { MO_COLLECTORS = 0, MO_LEARNERS = 1 } mo_kind;
/* "collectors" / "learners" */
const char *mo_kind_name(mo_kind k);

typedef struct mo_registry mo_registry;
typedef struct mo_entry mo_entry;

/* seed: for the random part of invented pod names (same seed, same names). */
mo_registry *mo_registry_new(uint64_t seed);
void mo_registry_free(mo_registry *r);

/* The entry for (ns, name), or NULL. */
mo_entry *mo_registry_find(const mo_registry *r, const char *ns, const char *name);
/* Finds or creates the entry. NULL (err says why) if ns or name is invalid
 * or the registry is full. */
mo_entry *mo_registry_ensure(mo_registry *r, const char *ns, const char *name, char *err,
                             size_t errlen);
/* Removes the entry; false if there was none. */
bool mo_registry_remove(mo_registry *r, const char *ns, const char *name);
/* Entries in creation order. */
size_t mo_registry_count(const mo_registry *r);
mo_entry *mo_registry_at(const mo_registry *r, size_t i);

const char *mo_entry_namespace(const mo_entry *e);
const char *mo_entry_name(const mo_entry *e);
size_t mo_entry_count(const mo_entry *e, mo_kind k);
const char *mo_entry_addr(const mo_entry *e, mo_kind k, size_t i);
/* Index of addr in the list, or -1. */
long mo_entry_find_addr(const mo_entry *e, mo_kind k, const char *addr);
/* Appends addr (validated); 1 added, 0 already there, -1 error (err says). */
int mo_entry_add(mo_entry *e, mo_kind k, const char *addr, char *err, size_t errlen);
/* Replaces the address at index i (validated). Returns 0 or -1 (err). */
int mo_entry_replace(mo_entry *e, mo_kind k, size_t i, const char *addr, char *err,
                     size_t errlen);
/* Removes the address at index i. */
void mo_entry_remove_at(mo_entry *e, mo_kind k, size_t i);
void mo_entry_clear(mo_entry *e, mo_kind k);
/* The list as a JSON array of strings. */
cJSON *mo_entry_list_json(const mo_entry *e, mo_kind k);

/* A new pod name "prefix-xxxxx": five characters of Kubernetes' random
 * alphabet, unique among the names this registry has generated. Heap string. */
char *mo_registry_pod_name(mo_registry *r, const char *prefix);

/* One replica reported failed: the pod name reported, the addresses it
 * matched and what replaced them (NULL: removed, or not found). */
void mo_registry_record_failed(mo_registry *r, const char *ns, const char *reporter,
                               mo_kind k, const char *pod, const char *old_addr,
                               const char *new_addr, bool found);
/* [{"namespace","reporter","kind","pod","address","replaced_by","found"}, ...]
 * oldest first, and how many older records were dropped. */
cJSON *mo_registry_failed_json(const mo_registry *r);
unsigned long mo_registry_failed_dropped(const mo_registry *r);

/* [{"namespace","name","collectors":[...],"learners":[...]}, ...] */
cJSON *mo_registry_to_json(const mo_registry *r);

/* Checks "host:port" (host non-empty, no white space, '/', ',' or control
 * characters, an IPv6 host in brackets; port 1-65535). */
bool mo_addr_valid(const char *addr, char *err, size_t errlen);
/* Checks a namespace or pod name: 1..MO_NAME_MAX printable characters, no
 * white space and no '/'. what names the field in the message. */
bool mo_name_valid(const char *name, const char *what, char *err, size_t errlen);
/* The pod name the aggregator derives from an address: the host without
 * its port and without its last dot-separated part ("learner-0.ns:22271" ->
 * "learner-0"; a host without a dot is kept whole). Heap string. */
char *mo_addr_pod_name(const char *addr);
/* The host part ("learner-0.ns") as a heap string, and the port (0 if none). */
char *mo_addr_host(const char *addr, int *port);

#endif
