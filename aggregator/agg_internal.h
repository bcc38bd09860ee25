/* agg_internal: what the aggregator's modules share and no one else needs
 * (the planted bugs, the Kubernetes reply parser for the fuzzer). Not an
 * API. */
#ifndef AGG_INTERNAL_H
#define AGG_INTERNAL_H

#include "agg.h"
#include "agg_k8s.h"
#include "agg_learners.h"

/* Bugs planted for tests of the scenario library (DILEARN_PLANT_BUG, read
 * only in a -DPLANT_BUGS=ON build; their branches are compiled only there,
 * under #ifdef DILEARN_PLANT_BUGS). */
enum { PLANT_NONE = 0, PLANT_MERGE_DROPS_KEY, PLANT_SPLIT_OFF_BY_ONE, PLANT_NO_DEADLINE, PLANT_NO_RETAKE };

#endif
