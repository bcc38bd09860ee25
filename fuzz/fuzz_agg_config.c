/* fuzz_agg_config: the aggregator's config file (agg_config_parse_json),
 * twice over the same config (a second file adds to the first, as a flag
 * file would), then freed. */
#include <stdint.h>
#include <stdlib.h>

#include "agg_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    agg_config c;
    agg_config_defaults(&c);
    char err[1024];
    if (agg_config_parse_json(&c, (const char *)data, size, "fuzz.json", err, sizeof err) == 0)
        agg_config_parse_json(&c, (const char *)data, size, "fuzz.json", err, sizeof err);
    else if (!err[0])
        abort();
    agg_config_free(&c);
    return 0;
}
