/* Units of run_scenarios --explore (runner/sc_explore.h): every drawn
 * schedule is a valid scenario (by the validator every scenario goes
 * through), draws are reproducible from the seed, each carries the
 * invariants as expectations, and a base explore cannot use is refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sc_explore.h"
#include "sc_scenario.h"

static const char base4[] =
    "{\"description\": \"b\", \"time_scale\": 0.01, \"learners\": [{\"count\": 4, \"batch_size\": 4, "
    "\"learn_time_ms\": 10}], \"coordinator\": {\"rounds\": 3}, \"expect\": {}}";
static const char base_k8s[] =
    "{\"description\": \"b\", \"time_scale\": 0.01, \"learners\": [{\"count\": 3}], \"aggregator\": {\"k8s\": true}, "
    "\"coordinator\": {\"rounds\": 2}, \"expect\": {}}";

static sc_scenario *parse(const char *text)
{
    char *errs = NULL;
    sc_scenario *s = sc_scenario_parse("base.json", text, strlen(text), &errs);
    if (!s)
        print_error("%s", errs);
    free(errs);
    return s;
}

static void every_draw_is_a_valid_scenario(const char *base_text, int n)
{
    sc_scenario *base = parse(base_text);
    assert_non_null(base);
    int with_actions = 0, with_group_faults = 0, happy = 0;
    for (int i = 0; i < n; i++) {
        char *err = NULL;
        char *t = sc_explore_draw_text(base, 7, i, &err);
        assert_non_null(t);
        char *errs = NULL;
        sc_scenario *s = sc_scenario_parse("drawn.json", t, strlen(t), &errs);
        if (!s)
            print_error("draw %d is invalid:\n%s\n%s", i, errs, t);
        assert_non_null(s);
        assert_int_equal(s->nlearners, base->nlearners);
        assert_int_equal(s->expect.coordinator_ok, -1); /* read from the summary by explore */
        assert_true(s->expect.exactly_once);
        assert_int_equal((int)s->expect.nworld, 1);
        assert_int_equal(s->expect.world[0].kind, SC_WS_AT_END);
        assert_true(s->expect.ntasks >= 6); /* every task of the script has a latency cap */
        for (size_t k = 0; k < s->expect.ntasks; k++)
            assert_true(s->expect.tasks[k].latency_max_ms > 0);
        with_actions += s->nactions > 0;
        for (size_t g = 0; g < s->ngroups; g++)
            with_group_faults += s->groups[g].nfaults > 0;
        happy += strstr(t, "no fault") != NULL;
        sc_scenario_free(s);
        free(t);
        free(errs);
    }
    /* the draws cover both kinds of faults and the happy path */
    assert_true(with_actions > n / 4);
    assert_true(with_group_faults > n / 8);
    assert_true(happy > 0 && happy < n / 4);
    sc_scenario_free(base);
}

static void draws_from_a_plain_base_validate(void **state)
{
    (void)state;
    every_draw_is_a_valid_scenario(base4, 400);
}

static void draws_from_a_k8s_base_validate(void **state)
{
    (void)state;
    every_draw_is_a_valid_scenario(base_k8s, 200);
    sc_scenario *base = parse(base_k8s);
    int operator = 0;
    for (int i = 0; i < 100; i++) {
        char *err = NULL;
        char *t = sc_explore_draw_text(base, 3, i, &err);
        operator += strstr(t, "operator_") != NULL;
        free(t);
    }
    assert_true(operator > 5); /* operator faults and list changes are drawn */
    sc_scenario_free(base);
}

static void draws_are_reproducible_from_the_seed(void **state)
{
    (void)state;
    sc_scenario *base = parse(base4);
    char *err = NULL;
    char *a = sc_explore_draw_text(base, 11, 5, &err), *b = sc_explore_draw_text(base, 11, 5, &err),
         *c = sc_explore_draw_text(base, 11, 6, &err), *d = sc_explore_draw_text(base, 12, 5, &err);
    assert_string_equal(a, b);
    assert_string_not_equal(a, c);
    assert_string_not_equal(a, d);
    free(a);
    free(b);
    free(c);
    free(d);
    sc_scenario_free(base);
}

static void a_base_explore_cannot_use_is_refused(void **state)
{
    (void)state;
    const char *one = "{\"description\": \"b\", \"learners\": [{\"count\": 1}], \"expect\": {}}";
    const char *script = "{\"description\": \"b\", \"learners\": [{\"count\": 2}], \"coordinator\": {\"script\": "
                         "[{\"name\": \"resource\"}]}, \"expect\": {}}";
    const char *texts[2] = {one, script};
    const char *want[2] = {"2 to 16 learners", "rounds"};
    for (int i = 0; i < 2; i++) {
        sc_scenario *base = parse(texts[i]);
        assert_non_null(base);
        char *err = NULL;
        assert_null(sc_explore_draw_text(base, 1, 0, &err));
        assert_non_null(err);
        assert_non_null(strstr(err, want[i]));
        free(err);
        sc_scenario_free(base);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(draws_from_a_plain_base_validate),
        cmocka_unit_test(draws_from_a_k8s_base_validate),
        cmocka_unit_test(draws_are_reproducible_from_the_seed),
        cmocka_unit_test(a_base_explore_cannot_use_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
