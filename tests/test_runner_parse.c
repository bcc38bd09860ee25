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
#include "sc_run_int.h"
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

static void one_learner_is_named_once(void **state)
{
    refused_with("{\n\"description\": \"d\",\n\"learners\": [{\"count\": 1}],\n"
                 "\"actions\": [\n  {\"at_ms\": 10, \"do\": \"kill\", \"target\": \"learner3\"}\n],\n" MIN_EXPECT "}",
                 "t.json:5: actions[0].target: no learner 3: the scenario has learner0\n");
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

/* Item: fault objects are checked with the mocks' own schema at --check time,
 * each error at the line of the member, with a "did you mean". */
static void fault_typos_are_refused_with_line_and_suggestion(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"learners\": [{\"name\": \"a\", \"count\": 2, \"faults\": [\n"
                           "{\"kind\": \"crash\", \"task\": \"learner_learn_tsak\"},\n"
                           "{\"kind\": \"crash\",\n \"wehn\": \"during\"},\n"
                           "{\"kind\": \"crsh\"},\n"
                           "{\"kind\": \"explode\"},\n"
                           "{\"kind\": \"delay\", \"when\": \"before\"}]}],\n" MIN_EXPECT "}",
                           &errs);
    assert_null(s);
    assert_string_equal(errs,
                        "t.json:2: learners[0].faults[0].task: unknown task 'learner_learn_tsak' (did you mean "
                        "'learner_learn_task'?)\n"
                        "t.json:4: learners[0].faults[1].wehn: unknown key for kind crash (did you mean 'when'?)\n"
                        "t.json:5: learners[0].faults[2].kind: unknown kind 'crsh' (did you mean 'crash'?)\n"
                        "t.json:6: learners[0].faults[3].kind: unknown kind 'explode' (known: slow_join, refuse, "
                        "fail, crash, die, hang, delay, error_status, malformed, truncated, no_heartbeat, drop, "
                        "bad_result, wrong_batch)\n"
                        "t.json:7: learners[0].faults[4].when: not a key of kind delay but of crash (allowed here: "
                        "learner, kind, optional, task, at, times, prob, ms)\n");
    free(errs);
}

static void fault_in_an_action_is_checked_as_the_control_api_would(void **state)
{
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n\"actions\": [{\"at_ms\": 5, \"do\": "
                 "\"fault\", \"target\": \"a\",\n\"fault\": {\"kind\": \"slow_join\"}}], " MIN_EXPECT "}",
                 "t.json:3: actions[0].fault.kind: slow_join works only with --fault at start-up");
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n\"actions\": [{\"at_ms\": 5, \"do\": "
                 "\"fault\", \"target\": \"learner0\",\n\"fault\": {\"kind\": \"refuse\", \"task\": \"learn\"}}], "
                 MIN_EXPECT "}",
                 "t.json:3: actions[0].fault.task: kind refuse takes no task trigger");
}

static void operator_fault_typos_are_refused(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"aggregator\": {\"k8s\": true},\n"
                           "\"operator\": {\"faults\": [{\"kind\": \"error_stauts\"}]},\n"
                           "\"actions\": [{\"at_ms\": 5, \"do\": \"operator_fault\", \"fault\":\n"
                           "{\"kind\": \"delay\", \"delay_ms\": 5, \"cuont\": 2}}], " MIN_EXPECT "}",
                           &errs);
    assert_null(s);
    assert_string_equal(errs,
                        "t.json:2: operator.faults[0].kind: fault kind \"error_stauts\" is unknown (did you mean "
                        "'error_status'?)\n"
                        "t.json:4: actions[0].fault.cuont: unknown fault field \"cuont\" (did you mean 'count'?)\n");
    free(errs);
}

/* Short task names are accepted everywhere: in faults as in events and
 * expectations; the runner passes the full name on. */
static void short_task_name_in_a_fault_is_the_full_name(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"learners\": [{\"faults\": [{\"kind\": \"crash\", \"task\": "
                           "\"learn\"}]}],"
                           "\"actions\": [{\"on\": {\"event\": \"learner_task\", \"task\": \"learn\"}, \"do\": "
                           "\"fault\", \"target\": \"learner0\", \"fault\": {\"kind\": \"hang\", \"task\": "
                           "\"get_data\"}}],"
                           "\"expect\": {\"learner_tasks\": [{\"learner\": 0, \"task\": \"learn\", \"min\": 1}]}}",
                           &errs);
    assert_non_null(s);
    assert_string_equal(s->groups[0].faults[0], "{\"kind\":\"crash\",\"task\":\"learner_learn_task\"}");
    assert_string_equal(s->actions[0].fault, "{\"kind\":\"hang\",\"task\":\"learner_get_data_task\",\"learner\":0}");
    assert_string_equal(s->actions[0].when.task, "learner_learn_task");
    assert_string_equal(s->expect.learner_tasks[0].task, "learner_learn_task");
    sc_scenario_free(s);
}

static void task_typos_in_events_and_expectations_get_a_suggestion(void **state)
{
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n\"actions\": [{\"on\": {\"event\": "
                 "\"learner_task\", \"task\": \"lern\"}, \"do\": \"kill\", \"target\": \"a\"}], " MIN_EXPECT "}",
                 "t.json:2: actions[0].on.task: unknown task 'lern' (did you mean 'learner_learn_task'?)");
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n\"expect\": {\"learner_tasks\": "
                 "[{\"learner\": 0, \"task\": \"learner_get_dat_task\", \"min\": 1}]}}",
                 "t.json:2: expect.learner_tasks[0].task: unknown task 'learner_get_dat_task' (did you mean "
                 "'learner_get_data_task'?)");
}

static void fault_on_a_task_nobody_sends_is_refused(void **state)
{
    refused_with("{\"description\": \"d\", \"learners\": [{\"faults\": [\n{\"kind\": \"fail\", \"task\": "
                 "\"my_task\"}]}], " MIN_EXPECT "}",
                 "t.json:2: learners[0].faults[0].task: no task 'my_task' is sent: the coordinator's rounds send "
                 "resource, start, get_data, learn, close (learner_*_task)");
    refused_with("{\"description\": \"d\", \"learners\": [{\"faults\": [\n{\"kind\": \"fail\", \"task\": "
                 "\"my_task\"}]}], \"coordinator\": {\"script\": [{\"name\": \"resource\"}, {\"name\": "
                 "\"other_task\"}]}, " MIN_EXPECT "}",
                 "t.json:2: learners[0].faults[0].task: no task 'my_task' is sent: the coordinator's script sends "
                 "resource, other_task");
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"learners\": [{\"faults\": [{\"kind\": \"fail\", \"task\": "
                           "\"my_task\"}]}], \"coordinator\": {\"script\": [{\"name\": \"my_task\"}]}, " MIN_EXPECT "}",
                           &errs);
    assert_non_null(s);
    sc_scenario_free(s);
}

/* "at": 2, "times": 3 and "optional" are part of the schema; their ranges
 * are the mock's. */
static void times_and_optional_are_in_the_schema(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"learners\": [{\"faults\": [{\"kind\": \"fail\", \"task\": "
                           "\"learn\", \"at\": 2, \"times\": 3}, {\"kind\": \"fail\", \"prob\": 0.5, \"optional\": "
                           "true}]}], \"aggregator\": {\"k8s\": true}, \"operator\": {\"faults\": [{\"kind\": "
                           "\"garbage\", \"count\": 1, \"optional\": true}]}, " MIN_EXPECT "}",
                           &errs);
    assert_non_null(s);
    sc_scenario_free(s);
    refused_with("{\"description\": \"d\", \"learners\": [{\"faults\": [\n{\"kind\": \"fail\", \"times\": 0}]}], "
                 MIN_EXPECT "}",
                 "t.json:2: learners[0].faults[0].times: must be an integer in 1..1000000000, not 0");
    refused_with("{\"description\": \"d\", \"learners\": [{\"faults\": [\n{\"kind\": \"fail\", \"optional\": 1}]}], "
                 MIN_EXPECT "}",
                 "t.json:2: learners[0].faults[0].optional: must be true or false, not number");
}

static void error_status_takes_a_protocol_code(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"learners\": [{\"faults\": [{\"kind\": \"error_status\", "
                           "\"code\": 601}]}], " MIN_EXPECT "}",
                           &errs);
    assert_non_null(s);
    sc_scenario_free(s);
    refused_with("{\"description\": \"d\", \"learners\": [{\"faults\": [\n{\"kind\": \"error_status\", \"code\": "
                 "500}]}], " MIN_EXPECT "}",
                 "t.json:2: learners[0].faults[0].code: must be a code a slave answers with (101, 201, 202, 301, "
                 "302, 401, 402, 501, 502, 503, 504, 601, 602), not 500");
}

/* Item 12: production time. */
static void durations_parse_in_production_time(void **state)
{
    double ms;
    assert_true(sc_duration_parse("90s", &ms) && ms == 90000);
    assert_true(sc_duration_parse("1m", &ms) && ms == 60000);
    assert_true(sc_duration_parse("250ms", &ms) && ms == 250);
    assert_true(sc_duration_parse("1.5s", &ms) && ms == 1500);
    assert_true(sc_duration_parse("1m30s", &ms) && ms == 90000);
    assert_true(sc_duration_parse("2h", &ms) && ms == 7200000);
    assert_false(sc_duration_parse("", &ms));
    assert_false(sc_duration_parse("90", &ms));
    assert_false(sc_duration_parse("1.5 s", &ms));
    assert_false(sc_duration_parse("s", &ms));
    assert_false(sc_duration_parse("-1s", &ms));
    assert_false(sc_duration_parse("1.s", &ms));
    assert_false(sc_duration_parse("3d", &ms));
}

static void production_time_strings_are_scaled_and_integers_are_not(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"time_scale\": 0.01, \"min_run_ms\": \"90s\",\n"
                           "\"timings\": {\"task_deadline_ms\": \"1m\", \"max_retry_ms\": 700},\n"
                           "\"learners\": [{\"name\": \"a\", \"learn_time_ms\": \"1.5s\", \"start_ms\": 40, "
                           "\"faults\": [{\"kind\": \"delay\", \"ms\": \"250ms\"}]}],\n"
                           "\"aggregator\": {\"k8s\": true}, \"operator\": {\"faults\": [{\"kind\": \"delay\", "
                           "\"delay_ms\": \"15s\"}]},\n"
                           "\"coordinator\": {\"absent\": true},\n"
                           "\"actions\": [{\"at_ms\": \"20s\", \"do\": \"stop\", \"target\": \"a\", \"duration_ms\": "
                           "\"4s\"}],\n"
                           "\"expect\": {\"world_size\": [{\"eventually\": 1, \"by_ms\": \"30s\"}]}}",
                           &errs);
    if (!s)
        fail_msg("%s", errs);
    assert_int_equal(s->min_run_ms, 900);
    assert_int_equal(s->task_deadline_ms, 600);
    assert_int_equal(s->max_retry_ms, 700);
    assert_int_equal(s->groups[0].learn_time_ms, 15);
    assert_int_equal(s->groups[0].start_ms, 40);
    assert_string_equal(s->groups[0].faults[0], "{\"kind\":\"delay\",\"ms\":3}");
    assert_string_equal(s->op_faults[0], "{\"kind\":\"delay\",\"delay_ms\":150}");
    assert_int_equal(s->actions[0].when.at_ms, 200);
    assert_int_equal(s->actions[0].duration_ms, 40);
    assert_int_equal(s->expect.world[0].to_ms, 300);
    sc_scenario_free(s);
}

static void script_deadlines_take_production_time(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"time_scale\": 0.01, \"coordinator\": {\"script\": "
                           "[{\"name\": \"learn\", \"deadline_ms\": \"5m\"}, {\"name\": \"close\", \"deadline_ms\": 70}]}, "
                           MIN_EXPECT "}",
                           &errs);
    if (!s)
        fail_msg("%s", errs);
    assert_string_equal(s->script, "{\"tasks\":[{\"name\":\"learner_learn_task\",\"deadline_ms\":3000},"
                                   "{\"name\":\"learner_close_task\",\"deadline_ms\":70}]}");
    sc_scenario_free(s);
}

static void bad_durations_are_refused_with_their_line(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"time_scale\": 0.01,\n"
                           "\"timeout_ms\": \"10s\",\n"
                           "\"learners\": [{\"name\": \"a\",\n\"learn_time_ms\": \"1.5 s\",\n"
                           "\"faults\": [{\"kind\": \"drop\", \"back_after_ms\": \"10ms\"}]}],\n"
                           "\"actions\": [{\"at_ms\": true, \"do\": \"kill\", \"target\": \"a\"}],\n" MIN_EXPECT "}",
                           &errs);
    assert_null(s);
    assert_string_equal(errs,
                        "t.json:2: timeout_ms: is wall-clock time, not scaled by time_scale (process start-up does "
                        "not scale): write an integer of ms, not '10s'\n"
                        "t.json:4: learners[0].learn_time_ms: '1.5 s' is not a duration (write production time as "
                        "\"90s\", \"1.5s\", \"250ms\", \"1m\", \"1m30s\", or an integer of ms)\n"
                        "t.json:5: learners[0].faults[0].back_after_ms: '10ms' x time_scale 0.01 is 0.1 ms, which "
                        "rounds to 0; write it in ms\n"
                        "t.json:6: actions[0].at_ms: must be a duration (an integer of ms, or production time such "
                        "as \"90s\"), not bool\n");
    free(errs);
}

/* Item 13: an event trigger given as a name shows the shape it needs. */
static void event_as_a_string_shows_the_expected_shape(void **state)
{
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n\"actions\": [{\"on\": "
                 "\"learner_task\", \"do\": \"kill\", \"target\": \"a\"}], " MIN_EXPECT "}",
                 "t.json:2: actions[0].on: must be an object such as {\"event\": \"learner_task\", \"learner\": "
                 "\"learner0\", \"task\": \"learn\", \"nth\": 2}, not string 'learner_task'");
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n\"actions\": [{\"on\": "
                 "\"task_done\", \"do\": \"kill\", \"target\": \"a\"}], " MIN_EXPECT "}",
                 "t.json:2: actions[0].on: must be an object such as {\"event\": \"task_done\", \"task\": \"learn\", "
                 "\"nth\": 1}, not string 'task_done'");
    refused_with("{\"description\": \"d\", \"learners\": [{\"name\": \"a\"}],\n\"actions\": [{\"on\": 3, \"do\": "
                 "\"kill\", \"target\": \"a\"}], " MIN_EXPECT "}",
                 "t.json:2: actions[0].on: must be an object such as {\"event\": \"learner_task\"");
}

static void operator_max_in_flight_is_an_expectation(void **state)
{
    char *errs;
    sc_scenario *s = parse("{\"description\": \"d\", \"aggregator\": {\"k8s\": true}, \"expect\": {\"operator\": "
                           "{\"max_in_flight\": 1}}}",
                           &errs);
    assert_non_null(s);
    assert_int_equal(s->expect.operator_max_in_flight, 1);
    sc_scenario_free(s);
    refused_with("{\"description\": \"d\", \"aggregator\": {\"k8s\": true}, \"expect\": {\"operator\":\n"
                 "{\"max_in_fligth\": 1}}}",
                 "t.json:2: expect.operator.max_in_fligth: unknown key (did you mean 'max_in_flight'?)");
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

/* The runner's events files are read as they grow: a read may end in the
 * middle of a line, which waits for the rest. */
typedef struct {
    char got[8][64];
    int n;
} got_lines;

static void collect_line(void *ud, const char *s, size_t len)
{
    got_lines *g = ud;
    assert_true(g->n < 8 && len < 64);
    memcpy(g->got[g->n], s, len);
    g->got[g->n++][len] = '\0';
}

static void events_lines_are_cut_at_newlines_only(void **state)
{
    (void)state;
    static const char *const chunks[] = {"{\"a\": 1}\n{\"b", "\": 2", "}\n", "\n{\"c\": 3}\n{\"d"};
    got_lines g = {0};
    xbuf part = {0};
    for (size_t i = 0; i < 4; i++)
        sr_split_lines(&part, chunks[i], strlen(chunks[i]), collect_line, &g);
    assert_int_equal(g.n, 4);
    assert_string_equal(g.got[0], "{\"a\": 1}");
    assert_string_equal(g.got[1], "{\"b\": 2}"); /* across three reads */
    assert_string_equal(g.got[2], "");            /* an empty line is a line (evt_parse_line refuses it) */
    assert_string_equal(g.got[3], "{\"c\": 3}");
    assert_int_equal(part.len, 3); /* {"d waits */
    assert_memory_equal(part.data, "{\"d", 3);
    xbuf_free(&part);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(minimal_scenario_gets_defaults),
        cmocka_unit_test(one_learner_is_named_once),
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
        cmocka_unit_test(fault_typos_are_refused_with_line_and_suggestion),
        cmocka_unit_test(fault_in_an_action_is_checked_as_the_control_api_would),
        cmocka_unit_test(operator_fault_typos_are_refused),
        cmocka_unit_test(short_task_name_in_a_fault_is_the_full_name),
        cmocka_unit_test(task_typos_in_events_and_expectations_get_a_suggestion),
        cmocka_unit_test(fault_on_a_task_nobody_sends_is_refused),
        cmocka_unit_test(times_and_optional_are_in_the_schema),
        cmocka_unit_test(error_status_takes_a_protocol_code),
        cmocka_unit_test(durations_parse_in_production_time),
        cmocka_unit_test(production_time_strings_are_scaled_and_integers_are_not),
        cmocka_unit_test(script_deadlines_take_production_time),
        cmocka_unit_test(bad_durations_are_refused_with_their_line),
        cmocka_unit_test(event_as_a_string_shows_the_expected_shape),
        cmocka_unit_test(operator_max_in_flight_is_an_expectation),
        cmocka_unit_test(prometheus_values_are_read_by_name_and_labels),
        cmocka_unit_test(xml_escaping_covers_markup_and_control_characters),
        cmocka_unit_test(events_lines_are_cut_at_newlines_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
