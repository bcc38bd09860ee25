/* fuzz_scenario: the scenario runner's parser and validator
 * (sc_scenario_parse) on arbitrary scenario text. A refusal must say why. */
#include <stdint.h>
#include <stdlib.h>

#include "sc_scenario.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *errors = NULL;
    sc_scenario *s = sc_scenario_parse("fuzz.json", (const char *)data, size, &errors);
    if (s)
        sc_scenario_free(s);
    else if (!errors || !errors[0])
        abort();
    free(errors);
    return 0;
}
