/* Scenario files: parsing and validation (runner/sc_scenario.c), each error
 * with its file:line; the Prometheus reader and the XML escaper of the
 * reports. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sc_report.h"
#include "sc_run.h"
#include "sc_scenario.h"

/* Parses text as "t.json"; returns the scenario or NULL with the errors. */
static sc_scenario *parse(const char *text, char **errs)
{
    *errs = NULL;
    return sc_scenario_parse("t.json", text, strlen(text), errs);
}

/* Asserts that text is refused with an error containing want. */
static void refused_with(const char *text, const char *want)
{
    char *errs;
    sc_scenario *s = parse(text, &errs);
    if (s) {
        sc_scenario_free(s);
        fail_msg("accepted, expected an error containing \"%s\"", want);
    }
    assert_non_null(errs);
    if (!strstr(errs, want))
        fail_msg("errors:\n%s\ndo not contain \"%s\"", errs, want);
    free(errs);
}

#define MIN_EXPECT "\"expect\": {\"coordinator_ok\": true}"

static void minimal_scenario_gets_defaults(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"learners\": [{\"count\": 2}], " MIN_EXPECT "}", &errs);
    assert_non_null(s);
    assert_null(errs);
    assert_int_equal(s->nlearners, 2);
    assert_string_equal(s->groups[0].name, "group0");
    assert_int_equal(s->seed, 1);
    assert_int_equal(s->heartbeat_span_ms, 3000);
    assert_int_equal(s->heartbeat_tolerance_ms, 17000);
    assert_true(s->coordinator);
    assert_string_equal(s->name, "t");
    sc_scenario_free(s);
}

static void time_scale_shrinks_every_timing(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"time_scale\": 0.01, " MIN_EXPECT "}", &errs);
    assert_non_null(s);
    assert_int_equal(s->heartbeat_span_ms, 30);
    assert_int_equal(s->heartbeat_tolerance_ms, 170);
    assert_int_equal(s->max_retry_ms, 600);
    assert_int_equal(s->retry_interval_ms, 20);
    assert_int_equal(s->sync_period_ms, 30);
    assert_int_equal(s->task_deadline_ms, 600);
    sc_scenario_free(s);
}

static void syntax_error_names_line_and_column(void **state)
{
    refused_with("{\n  \"description\": \"d\",\n  \"seed\": 1,\n}\n", "t.json:4:1: not valid JSON");
}

static void unknown_key_is_refused_with_a_suggestion(void **state)
{
    refused_with("{\n\"description\": \"d\",\n\"tiemout_ms\": 100,\n" MIN_EXPECT "}",
                 "t.json:3: tiemout_ms: unknown key (did you mean 'timeout_ms'?)");
}

static void wrong_type_names_line_and_types(void **state)
{
    refused_with("{\n\"description\": \"d\",\n\"learners\": [\n  {\"count\": \"four\"}\n],\n" MIN_EXPECT "}",
                 "t.json:4: learners[0].count: must be an integer, not string");
}

static void duplicate_key_names_both_lines(void **state)
{
    refused_with("{\n\"description\": \"d\",\n\"seed\": 1,\n\"seed\": 2,\n" MIN_EXPECT "}",
                 "t.json:4: seed: duplicate key (first at line 3)");
}

static void missing_learner_is_refused(void **state)
{
    refused_with("{\n\"description\": \"d\",\n\"learners\": [{\"count\": 4}],\n"
                 "\"actions\": [\n  {\"at_ms\": 10, \"do\": \"fault\", \"target\": \"learner7\", \"fault\": {\"kind\": \"hang\"}}\n],\n" MIN_EXPECT
                 "}",
                 "t.json:5: actions[0].target: no learner 7: the scenario has learner0..learner3");
}

static void action_after_timeout_is_impossible(void **state)
{
    refused_with("{\n\"description\": \"d\",\n\"timeout_ms\": 1000,\n\"learners\": [{\"name\": \"a\"}],\n"
                 "\"actions\": [\n  {\"at_ms\": 1500, \"do\": \"kill\", \"target\": \"a\"}\n],\n" MIN_EXPECT "}",
                 "t.json:6: actions[0]: acts at 1500 ms, not before the scenario's timeout_ms (1000)");
}

static void kill_of_a_learner_sharing_a_process_is_refused(void **state)
{
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\", \"count\": 3}],\n"
                 "\"actions\": [{\"at_ms\": 10, \"do\": \"kill\", \"target\": \"learner1\"}], " MIN_EXPECT "}",
                 "shares its process (group 'a') with 2 other learners");
}

static void time_scale_too_small_is_refused(void **state)
{
    refused_with("{\"description\": \"d\", \"time_scale\": 0.0001, " MIN_EXPECT "}",
                 "time_scale: 0.0001 makes heartbeat_span_ms 0 ms");
}

static void tolerance_not_above_span_is_refused(void **state)
{
    refused_with("{\"description\": \"d\", \"timings\": {\"heartbeat_span_ms\": 500, \"heartbeat_tolerance_ms\": 400}, "
                 MIN_EXPECT "}",
                 "heartbeat tolerance (400 ms) must exceed the heartbeat span (500 ms)");
}

static void cont_without_stop_is_refused(void **state)
{
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n"
                 "\"actions\": [{\"at_ms\": 10, \"do\": \"cont\", \"target\": \"a\"}], " MIN_EXPECT "}",
                 "cont of 'a' at 10 ms, but no stop of it comes before");
}

static void fault_learner_of_another_group_is_refused(void **state)
{
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\", \"count\": 2},\n"
                 "{\"name\": \"b\", \"count\": 2, \"faults\": [{\"learner\": \"learner0\", \"kind\": \"hang\"}]}], " MIN_EXPECT "}",
                 "t.json:2: learners[1].faults[0].learner: learner0 is not in group 'b' (learner2..learner3)");
}

static void fault_learner_becomes_the_index_in_its_group(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"learners\": [{\"name\": \"a\", \"count\": 2},"
                           "{\"name\": \"b\", \"count\": 2, \"faults\": [{\"learner\": \"learner3\", \"kind\": \"hang\"}]}],"
                           "\"actions\": [{\"at_ms\": 5, \"do\": \"fault\", \"target\": \"learner2\", \"fault\": {\"kind\": \"fail\"}}],"
                           MIN_EXPECT "}",
                           &errs);
    assert_non_null(s);
    assert_string_equal(s->groups[1].faults[0], "{\"learner\":1,\"kind\":\"hang\"}");
    assert_string_equal(s->actions[0].fault, "{\"kind\":\"fail\",\"learner\":0}");
    assert_int_equal(s->actions[0].proc, SC_PROC_GROUP0 + 1);
    sc_scenario_free(s);
}

static void task_name_near_miss_is_a_typo(void **state)
{
    refused_with("{\"description\": \"d\", \"coordinator\": {\"script\": [{\"name\": \"learner_lean_task\"}]}, " MIN_EXPECT "}",
                 "unknown task name 'learner_lean_task' (did you mean 'learner_learn_task'?)");
}

static void short_task_names_become_full_names(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"coordinator\": {\"script\": [{\"name\": \"learn\", \"items\": 3},"
                           "{\"name\": \"no_such_task\"}]}, " MIN_EXPECT "}",
                           &errs);
    assert_non_null(s);
    assert_string_equal(s->script,
                        "{\"tasks\":[{\"name\":\"learner_learn_task\",\"items\":3},{\"name\":\"no_such_task\"}]}");
    sc_scenario_free(s);
}

static void missing_expect_is_refused(void **state)
{
    refused_with("{\"description\": \"d\"}", "t.json:1: missing key 'expect'");
}

static void operator_action_needs_k8s_mode(void **state)
{
    refused_with("{\"description\": \"d\", \"actions\": [{\"at_ms\": 1, \"do\": \"operator_set\", \"learners\": []}], "
                 MIN_EXPECT "}",
                 "operator_set needs the operator");
}

static void every_error_is_reported_at_once(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\n\"description\": 3,\n\"seed\": -1,\n\"bogus\": 1\n}", &errs);
    assert_null(s);
    assert_non_null(strstr(errs, "t.json:2: description: must be a string, not number"));
    assert_non_null(strstr(errs, "t.json:3: seed: must be an integer >= 0"));
    assert_non_null(strstr(errs, "t.json:4: bogus: unknown key"));
    assert_non_null(strstr(errs, "missing key 'expect'"));
    free(errs);
}

static void prometheus_values_are_read_by_name_and_labels(void **state)
{
    const char *text = "# HELP x\ndilearn_learners_connected 4\n"
                       "dilearn_tasks_total{name=\"learner_learn_task\",outcome=\"completed\"} 3\n"
                       "dilearn_tasks_total{name=\"learner_learn_task\",outcome=\"failed\"} 1\n";
    double v = -1;
    assert_true(sc_prom_value(text, "dilearn_learners_connected", NULL, &v));
    assert_true(v == 4);
    cJSON *l = cJSON_Parse("{\"outcome\": \"failed\"}");
    assert_true(sc_prom_value(text, "dilearn_tasks_total", l, &v));
    assert_true(v == 1);
    cJSON_Delete(l);
    assert_false(sc_prom_value(text, "dilearn_learners", NULL, &v));
}

static void xml_escaping_covers_markup_and_control_characters(void **state)
{
    xbuf b = {0};
    const char in[] = "<a href=\"x\">&'\x01</a>";
    sc_xml_escape(&b, in, sizeof in - 1);
    char *out = xbuf_take(&b);
    assert_string_equal(out, "&lt;a href=&quot;x&quot;&gt;&amp;&#39;\xEF\xBF\xBD&lt;/a&gt;");
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(minimal_scenario_gets_defaults),
        cmocka_unit_test(time_scale_shrinks_every_timing),
        cmocka_unit_test(syntax_error_names_line_and_column),
        cmocka_unit_test(unknown_key_is_refused_with_a_suggestion),
        cmocka_unit_test(wrong_type_names_line_and_types),
        cmocka_unit_test(duplicate_key_names_both_lines),
        cmocka_unit_test(missing_learner_is_refused),
        cmocka_unit_test(action_after_timeout_is_impossible),
        cmocka_unit_test(kill_of_a_learner_sharing_a_process_is_refused),
        cmocka_unit_test(time_scale_too_small_is_refused),
        cmocka_unit_test(tolerance_not_above_span_is_refused),
        cmocka_unit_test(cont_without_stop_is_refused),
        cmocka_unit_test(fault_learner_of_another_group_is_refused),
        cmocka_unit_test(fault_learner_becomes_the_index_in_its_group),
        cmocka_unit_test(task_name_near_miss_is_a_typo),
        cmocka_unit_test(short_task_names_become_full_names),
        cmocka_unit_test(missing_expect_is_refused),
        cmocka_unit_test(operator_action_needs_k8s_mode),
        cmocka_unit_test(every_error_is_reported_at_once),
        cmocka_unit_test(prometheus_values_are_read_by_name_and_labels),
        cmocka_unit_test(xml_escaping_covers_markup_and_control_characters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
