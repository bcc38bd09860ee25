/* sc_jpos: the runner's names for the interaction library's JSON positions
 * (jpos.h), which the aggregator's config reader shares. */
#ifndef SC_JPOS_H
#define SC_JPOS_H

#include "jpos.h"

#define sc_jpos jpos
#define sc_jpos_scan jpos_scan
#define sc_jpos_free jpos_free
#define sc_jpos_line jpos_line
#define sc_jpos_dup_count jpos_dup_count
#define sc_jpos_dup jpos_dup
#define sc_text_linecol jpos_text_linecol

#endif
