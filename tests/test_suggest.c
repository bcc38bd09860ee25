/* Unit tests of suggest.h: the "did you mean" shared by the scenario
 * validator and the aggregator's config reader. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "suggest.h"

static void distance_counts_edits_and_swaps_of_neighbours_as_one(void **state)
{
    (void)state;
    assert_int_equal(suggest_distance("learner", "learner"), 0);
    assert_int_equal(suggest_distance("lerner", "learner"), 1);  /* a deletion */
    assert_int_equal(suggest_distance("salve", "slave"), 1);     /* a swap */
    assert_int_equal(suggest_distance("wehn", "when"), 1);
    assert_int_equal(suggest_distance("hots", "host"), 1);
    assert_int_equal(suggest_distance("", "port"), 4);
    assert_int_equal(suggest_distance("node", "nodes"), 1);
    assert_int_equal(suggest_distance("abc", "xyz"), 3);
    char longer[SUGGEST_NAME_MAX + 2];
    memset(longer, 'a', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(suggest_distance(longer, "a"), SIZE_MAX);
}

static void nearest_is_a_near_miss_and_the_first_of_equals(void **state)
{
    (void)state;
    static const char *const keys[] = {"master", "slave", "learner", "node", "partition", NULL};
    assert_string_equal(suggest_nearest("lerner", keys, (size_t)-1), "learner");
    assert_string_equal(suggest_nearest("mastr", keys, (size_t)-1), "master");
    assert_null(suggest_nearest("zzzzzz", keys, (size_t)-1));
    assert_null(suggest_nearest("nodes_x", keys, (size_t)-1));
    static const char *const ab[] = {"ab", "ba", NULL};
    assert_string_equal(suggest_nearest("aa", ab, (size_t)-1), "ab");
    static const char *const none[] = {NULL};
    assert_null(suggest_nearest("x", none, (size_t)-1));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(distance_counts_edits_and_swaps_of_neighbours_as_one),
        cmocka_unit_test(nearest_is_a_near_miss_and_the_first_of_equals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
