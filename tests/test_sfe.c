/* Tests of scenario_from_events' core (runner/sfe.c) on events files written
 * by hand (tests/sfe/): what it refuses, with the file and line; the
 * incident it rebuilds (learners, faults at the task and count where they
 * happened, the script with its gaps, observed and correct expectations),
 * which the runner's own validator accepts; and the outcomes of a run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonx.h"
#include "sc_scenario.h"
#include "sfe.h"

#ifndef SFE_DIR
#error "SFE_DIR: the folder of the hand-written events files"
#endif

static char *fixture(const char *name)
{
    size_t n = strlen(SFE_DIR) + strlen(name) + 2;
    char *p = malloc(n);
    snprintf(p, n, "%s/%s", SFE_DIR, name);
    return p;
}

static void refused(const char *name, const char *want_line, const char *want)
{
    char *path = fixture(name);
    sfe_log log = {0};
    char err[1024];
    int rc = sfe_load(&log, path, err, sizeof err);
    cJSON *sc = NULL;
    if (rc == 0) {
        sc = sfe_scenario(&log, &(sfe_opts){.seed = 1}, err, sizeof err);
        assert_null(sc);
    }
    if (!strstr(err, want) || (want_line && !strstr(err, want_line)))
        fail_msg("%s: got \"%s\", wanted \"%s\" at \"%s\"", name, err, want, want_line ? want_line : "");
    assert_true(strncmp(err, path, strlen(path)) == 0); /* names the file */
    sfe_free(&log);
    free(path);
}

static void bad_input_is_refused_with_file_and_line(void **state)
{
    (void)state;
    refused("truncated.jsonl", ".jsonl:48: ", "the last line is cut short");
    refused("newer_schema.jsonl", ".jsonl:6: ", "schema version 2 is newer than this program's 1");
    refused("mixed_runs.jsonl", ".jsonl:11: ", "a second aggregator run (run r-2; the first, r-1, begins at");
    refused("no_task.jsonl", NULL, "no task in it");
    refused("no_such_file.jsonl", NULL, "cannot read it: No such file or directory");
}

static cJSON *convert(const char *name, sfe_expect_mode mode, double scale)
{
    char *path = fixture(name);
    sfe_log log = {0};
    char err[1024];
    if (sfe_load(&log, path, err, sizeof err) != 0)
        fail_msg("%s", err);
    cJSON *sc = sfe_scenario(&log, &(sfe_opts){.expect = mode, .time_scale = scale, .seed = 7}, err, sizeof err);
    if (!sc)
        fail_msg("%s", err);
    sfe_free(&log);
    free(path);
    /* whatever it writes, the runner accepts */
    char *text = cJSON_Print(sc);
    char *errs = NULL;
    sc_scenario *s = sc_scenario_parse("replay.json", text, strlen(text), &errs);
    if (!s)
        fail_msg("the runner refuses the scenario:\n%s\n%s", errs, text);
    sc_scenario_free(s);
    free(text);
    return sc;
}

static const cJSON *at(const cJSON *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *tok = strtok(buf, "."); tok && v; tok = strtok(NULL, "."))
        v = (*tok >= '0' && *tok <= '9') ? cJSON_GetArrayItem(v, atoi(tok)) : jsonx_get(v, tok);
    return v;
}

static long num(const cJSON *v, const char *path)
{
    int64_t n;
    const cJSON *x = at(v, path);
    if (!jsonx_get_i64(x, &n))
        fail_msg("%s: not an integer", path);
    return (long)n;
}

static const char *str(const cJSON *v, const char *path)
{
    const cJSON *x = at(v, path);
    if (!cJSON_IsString(x))
        fail_msg("%s: not a string", path);
    return x->valuestring;
}

static void a_crash_mid_learn_becomes_a_crash_at_that_learn(void **state)
{
    (void)state;
    cJSON *sc = convert("crash_learn.jsonl", SFE_EXPECT_OBSERVED, 0);
    /* two plain learners share a process; the one that failed has its own */
    assert_string_equal(str(sc, "learners.0.name"), "pool0");
    assert_int_equal(num(sc, "learners.0.count"), 2);
    assert_string_equal(str(sc, "learners.1.name"), "solo-learner2");
    assert_int_equal(num(sc, "learners.1.batch_size"), 4);
    assert_string_equal(str(sc, "learners.1.faults.0.kind"), "crash");
    assert_string_equal(str(sc, "learners.1.faults.0.when"), "during");
    assert_string_equal(str(sc, "learners.1.faults.0.task"), "learner_learn_task");
    assert_int_equal(num(sc, "learners.1.faults.0.at"), 2);
    /* production seconds at 0.01: the 30 s of training between get-data
     * and learn become 300 ms */
    assert_int_equal(cJSON_GetArraySize(at(sc, "coordinator.script")), 6);
    assert_string_equal(str(sc, "coordinator.script.3.name"), "learner_learn_task");
    assert_string_equal(str(sc, "coordinator.script.3.items"), "batch"); /* follows the world */
    assert_int_equal(num(sc, "coordinator.script.3.delay_ms"), 300);
    assert_string_equal(str(sc, "coordinator.script.5.expect.status"), "failed");
    /* what happened there */
    assert_string_equal(str(sc, "expect.tasks.5.status"), "failed");
    assert_string_equal(str(sc, "expect.tasks.5.message_contains"), "learner2");
    assert_int_equal(num(sc, "expect.world_size.0.at_end"), 2);
    assert_string_equal(str(sc, "expect.exits.0.process"), "solo-learner2");
    assert_int_equal(num(sc, "expect.exits.0.code"), 3);
    /* the header says where it came from and what was inferred */
    assert_non_null(strstr(str(sc, "comment.from.0"), "crash_learn.jsonl"));
    assert_non_null(strstr(str(sc, "comment.inferred.0"), "learner2: crash at learner_learn_task #2"));
    assert_true(cJSON_GetArraySize(at(sc, "comment.not_inferred")) > 0);
    cJSON_Delete(sc);
}

static void correct_expectations_ask_what_a_correct_aggregator_does(void **state)
{
    (void)state;
    cJSON *sc = convert("crash_learn.jsonl", SFE_EXPECT_CORRECT, 0.02);
    double scale;
    assert_true(jsonx_get_double(at(sc, "time_scale"), &scale) && scale == 0.02);
    assert_null(at(sc, "expect.tasks.5.status"));
    assert_string_equal(str(sc, "expect.tasks.5.message_contains"), "learner2");
    assert_true(num(sc, "expect.tasks.0.latency_max_ms") > 0);
    assert_true(cJSON_IsTrue(at(sc, "expect.exactly_once")));
    assert_true(cJSON_IsTrue(at(sc, "expect.aggregator_alive")));
    /* at 0.02 the same gap is about 600 ms */
    assert_int_equal(num(sc, "coordinator.script.3.delay_ms"), 599); /* 29.97 s */
    cJSON_Delete(sc);
}

static void outcomes_list_statuses_leaves_and_the_final_world(void **state)
{
    (void)state;
    char *path = fixture("crash_learn.jsonl");
    sfe_log log = {0};
    char err[512];
    assert_int_equal(sfe_load(&log, path, err, sizeof err), 0);
    cJSON *o = sfe_outcomes(&log);
    char *text = jsonx_print(o);
    assert_string_equal(text, "{\"tasks\":[[\"resource\",\"completed\"],[\"learner_start_task\",\"completed\"],"
                              "[\"learner_get_data_task\",\"completed\"],[\"learner_learn_task\",\"completed\"],"
                              "[\"learner_get_data_task\",\"completed\"],[\"learner_learn_task\",\"failed\"]],"
                              "\"left\":[[\"learner2\",\"connection_lost\"]],\"failed\":[],\"final_world\":2}");
    free(text);
    cJSON_Delete(o);
    sfe_free(&log);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(bad_input_is_refused_with_file_and_line),
        cmocka_unit_test(a_crash_mid_learn_becomes_a_crash_at_that_learn),
        cmocka_unit_test(correct_expectations_ask_what_a_correct_aggregator_does),
        cmocka_unit_test(outcomes_list_statuses_leaves_and_the_final_world),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
