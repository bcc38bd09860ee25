/* Unit tests of mock_coordinator's modules: the merge oracle and the merge
 * check, exact JSON comparison, the learn data, the dump checker, the script
 * parser (every validation error) and the command line. No network. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jsonx.h"
#include "mc_cli.h"
#include "mc_dump.h"
#include "mc_fail.h"
#include "mc_items.h"
#include "mc_json.h"
#include "mc_oracle.h"
#include "mc_script.h"
#include "mc_verify.h"
#include "xalloc.h"

static cJSON *J(const char *text)
{
    char err[200];
    cJSON *j = jsonx_parse(text, strlen(text), err, sizeof err);
    if (!j)
        fail_msg("bad JSON in test: %s: %s", err, text);
    return j;
}

/* Merges the JSON texts vals[0..n) and returns the printed result or the
 * error (prefixed "ERR: "). */
static char *merge_texts(const char *const *vals, size_t n)
{
    cJSON *trees[8];
    const char *names[8] = {"learner0", "learner1", "learner2", "learner3",
                            "learner4", "learner5", "learner6", "learner7"};
    for (size_t i = 0; i < n; i++)
        trees[i] = J(vals[i]);
    char err[512];
    cJSON *m = mco_merge((const cJSON *const *)trees, names, n, err, sizeof err);
    char *out = m ? jsonx_print(m) : xasprintf("ERR: %s", err);
    cJSON_Delete(m);
    for (size_t i = 0; i < n; i++)
        cJSON_Delete(trees[i]);
    return out;
}

static void expect_merge(const char *const *vals, size_t n, const char *want)
{
    char *got = merge_texts(vals, n);
    if (strcmp(got, want) != 0)
        print_error("merge: got %s\n       want %s\n", got, want);
    assert_string_equal(got, want);
    free(got);
}

static void expect_merge_error(const char *const *vals, size_t n, const char *needle)
{
    char *got = merge_texts(vals, n);
    if (strncmp(got, "ERR: ", 5) != 0 || !strstr(got, needle))
        print_error("merge: got %s\n       want an error containing %s\n", got, needle);
    assert_true(strncmp(got, "ERR: ", 5) == 0);
    assert_non_null(strstr(got, needle));
    free(got);
}

/* ---- oracle ---- */

static void oracle_merges_the_protocol_example_exactly(void **state)
{
    (void)state;
    const char *v[] = {
        "{\"learner_step\": 3, \"buffer_id\": \"b0\", \"a_list\": [1, 2], \"loss\": 0.5, \"info\": {\"task_id\": \"t0\", \"x\": 1}}",
        "{\"learner_step\": 4, \"buffer_id\": \"b1\", \"a_list\": [1, 2], \"loss\": 0.7, \"info\": {\"task_id\": \"t1\", \"x\": 2}}"};
    expect_merge(v, 2,
                 "{\"learner_step\":3,\"buffer_id\":\"b0\",\"a_list\":[1,2,1,2],\"loss\":[0.5,0.7],"
                 "\"info\":{\"task_id\":\"t0\",\"x\":[1,2]}}");
}

static void oracle_takes_first_learner_value_for_homogeneous_keys_at_any_depth(void **state)
{
    (void)state;
    const char *v[] = {"{\"learner_done\": false, \"task_id\": \"a\", \"d\": {\"learner_step\": 1, \"buffer_id\": [1]}}",
                       "{\"learner_done\": true, \"task_id\": \"b\", \"d\": {\"learner_step\": 2, \"buffer_id\": {}}}",
                       "{\"d\": {}}"};
    /* The third learner lacks the homogeneous keys: only the first learner's
     * are read, so that is no error. */
    expect_merge(v, 3, "{\"learner_done\":false,\"task_id\":\"a\",\"d\":{\"learner_step\":1,\"buffer_id\":[1]}}");
}

static void oracle_lists_scalars_and_nulls_whatever_the_later_values_are(void **state)
{
    (void)state;
    const char *a[] = {"null", "1"};
    expect_merge(a, 2, "[null,1]");
    const char *b[] = {"1", "\"x\"", "{\"k\": 1}"};
    expect_merge(b, 3, "[1,\"x\",{\"k\":1}]");
    const char *c[] = {"true", "false"};
    expect_merge(c, 2, "[true,false]");
    const char *d[] = {"{\"s\": \"only\"}"};
    expect_merge(d, 1, "{\"s\":[\"only\"]}");
}

static void oracle_keeps_number_tokens_exact_and_ignores_extra_later_keys(void **state)
{
    (void)state;
    const char *v[] = {"{\"big\": 9007199254740993, \"f\": [1.50, 1e+300]}",
                       "{\"big\": 18446744073709551617, \"f\": [-0.0], \"extra\": 1}"};
    expect_merge(v, 2, "{\"big\":[9007199254740993,18446744073709551617],\"f\":[1.50,1e+300,-0.0]}");
}

static void oracle_concatenates_lists_of_any_items(void **state)
{
    (void)state;
    const char *v[] = {"[{\"a\": 1}]", "[]", "[[2], null]"};
    expect_merge(v, 3, "[{\"a\":1},[2],null]");
}

static void oracle_reports_a_key_missing_in_a_later_learner_with_path_and_learner(void **state)
{
    (void)state;
    const char *v[] = {"{\"info\": {\"x\": 1, \"y\": 2}}", "{\"info\": {\"x\": 1, \"y\": 2}}", "{\"info\": {\"x\": 1}}"};
    expect_merge_error(v, 3, "at info.y: missing in learner2");
}

static void oracle_reports_a_list_beside_an_object(void **state)
{
    (void)state;
    const char *v[] = {"{\"a_list\": [1]}", "{\"a_list\": {\"k\": 1}}"};
    expect_merge_error(v, 2, "at a_list: learner1 has an object where learner0 has a list");
    const char *w[] = {"{\"info\": {\"k\": 1}}", "{\"info\": [1]}"};
    expect_merge_error(w, 2, "at info: learner1 has a list where learner0 has an object");
    const char *x[] = {"{\"k\": 1}", "null"};
    expect_merge_error(x, 2, "at the top level: learner1 has null where learner0 has an object");
}

static void oracle_refuses_an_empty_list_of_results(void **state)
{
    (void)state;
    char err[128];
    assert_null(mco_merge(NULL, NULL, 0, err, sizeof err));
    assert_non_null(strstr(err, "no learner results"));
}

/* ---- merge check ---- */

static void print_fails(const mc_fail *f);

typedef struct {
    cJSON *items;
    cJSON *res[2];
    cJSON *agg;
    mcd_slice slices[2];
    mcd_view view;
    mcd_round round;
    mcv_outcome out;
} merge_fx;

static void merge_fx_init(merge_fx *m, const char *r0, const char *r1, const char *agg)
{
    memset(m, 0, sizeof *m);
    m->items = mci_build(1, 4, 1, 0);
    m->res[0] = J(r0);
    m->res[1] = r1 ? J(r1) : NULL;
    m->agg = J(agg);
    m->slices[0] = (mcd_slice){"learner0", 0, r1 ? 3 : 4, m->res[0], NULL};
    m->slices[1] = (mcd_slice){"learner1", 3, 1, m->res[1], "complete"};
    m->view = (mcd_view){m->slices, r1 ? 2 : 1, true};
    m->round = (mcd_round){1, m->items, true};
    m->out = (mcv_outcome){true, m->agg};
}

static void merge_fx_free(merge_fx *m)
{
    cJSON_Delete(m->items);
    cJSON_Delete(m->res[0]);
    cJSON_Delete(m->res[1]);
    cJSON_Delete(m->agg);
}

static const char *R0 = "{\"info\": {\"learner_step\": 3, \"loss\": 0.5}, \"task_id\": \"t0\", \"a_list\": [1, 2]}";
static const char *R1 = "{\"info\": {\"learner_step\": 4, \"loss\": 0.7}, \"task_id\": \"t1\", \"a_list\": [3]}";

static void merge_check_accepts_the_correct_merge(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, R0, R1,
                  "{\"a_list\": [1, 2, 3], \"task_id\": \"t0\", \"info\": {\"loss\": [0.50, 7e-1], \"learner_step\": 3}}");
    mc_fail f;
    mc_fail_init(&f);
    assert_int_equal(mcv_check_merges(&m.round, &m.view, &m.out, 1, &f), 1);
    assert_int_equal(mc_fail_count(&f), 0);
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void merge_check_catches_an_aggregator_that_drops_a_key(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, R0, R1, "{\"info\": {\"learner_step\": 3, \"loss\": [0.5, 0.7]}, \"task_id\": \"t0\"}");
    mc_fail f;
    mc_fail_init(&f);
    assert_int_equal(mcv_check_merges(&m.round, &m.view, &m.out, 1, &f), 0);
    assert_int_equal(mc_fail_count(&f), 1);
    if (!mc_fail_has(&f, "at a_list: missing"))
        print_error("%s\n", f.msg[0]);
    assert_true(mc_fail_has(&f, "round 1: the merged learn result differs"));
    assert_true(mc_fail_has(&f, "at a_list: missing (expected [1,2,3])"));
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void merge_check_catches_learners_merged_in_the_wrong_order(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, R0, R1, "{\"info\": {\"learner_step\": 3, \"loss\": [0.7, 0.5]}, \"task_id\": \"t0\", \"a_list\": [3, 1, 2]}");
    mc_fail f;
    mc_fail_init(&f);
    mcv_check_merges(&m.round, &m.view, &m.out, 1, &f);
    assert_true(mc_fail_has(&f, "learner order learner0, learner1"));
    assert_true(mc_fail_has(&f, "at info.loss"));
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void merge_check_catches_a_number_that_lost_precision(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, "{\"n\": 9007199254740993}", "{\"n\": 1}", "{\"n\": [9007199254740992, 1]}");
    mc_fail f;
    mc_fail_init(&f);
    mcv_check_merges(&m.round, &m.view, &m.out, 1, &f);
    assert_true(mc_fail_has(&f, "at n.0: expected 9007199254740993, got 9007199254740992"));
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void merge_check_accepts_one_learner_answering_directly(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, R0, NULL, R0);
    mc_fail f;
    mc_fail_init(&f);
    assert_int_equal(mcv_check_merges(&m.round, &m.view, &m.out, 1, &f), 1);
    assert_int_equal(mc_fail_count(&f), 0);
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void merge_check_flags_a_completed_learn_whose_merge_must_fail(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, "{\"a\": [1]}", "{\"a\": 2}", "{\"a\": [1, 2]}");
    mc_fail f;
    mc_fail_init(&f);
    mcv_check_merges(&m.round, &m.view, &m.out, 1, &f);
    assert_true(mc_fail_has(&f, "cannot be merged (at a: learner1 has a number where learner0 has a list)"));
    /* The same round failed by the aggregator is the right answer. */
    mc_fail_free(&f);
    mc_fail_init(&f);
    m.out.completed = false;
    mcv_check_merges(&m.round, &m.view, &m.out, 1, &f);
    assert_int_equal(mc_fail_count(&f), 0);
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void merge_check_says_when_a_learner_result_is_missing(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, R0, R1, R0);
    m.slices[1].result = NULL;
    mc_fail f;
    mc_fail_init(&f);
    mcv_check_merges(&m.round, &m.view, &m.out, 1, &f);
    assert_true(mc_fail_has(&f, "round 1: the aggregator completed the learn task, but learner1 never reported its "
                                "slice (items r1-3..r1-3; no learn result in the dumps)"));
    mc_fail_free(&f);
    merge_fx_free(&m);
}

/* A learner that died mid-learn has no result: when the learn failed (as it
 * should) there is nothing to check and nothing wrong. */
static void merge_check_passes_a_failed_learn_whose_learner_never_reported(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, R0, R1, "{\"message\": \"learner1: connection lost\"}");
    m.slices[1].result = NULL;
    m.out.completed = false;
    mc_fail f;
    mc_fail_init(&f);
    assert_int_equal(mcv_check_merges(&m.round, &m.view, &m.out, 1, &f), 0);
    print_fails(&f);
    assert_int_equal(mc_fail_count(&f), 0);
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void merge_check_flags_a_completed_learn_whose_learner_reported_a_failure(void **state)
{
    (void)state;
    merge_fx m;
    merge_fx_init(&m, R0, R1, R0);
    m.slices[1].report = "fail";
    mc_fail f;
    mc_fail_init(&f);
    assert_int_equal(mcv_check_merges(&m.round, &m.view, &m.out, 1, &f), 0);
    assert_true(mc_fail_has(&f, "round 1: the aggregator completed the learn task, but learner1's report of its slice "
                                "was \"fail\", not \"complete\""));
    mc_fail_free(&f);
    merge_fx_free(&m);
}

static void get_data_check_wants_the_sum_of_the_learners_batch_sizes(void **state)
{
    (void)state;
    const char *dump = "{\"learner\": \"learner0\", \"task\": \"learner_get_data_task\", \"result\": {\"batch_size\": 3}}\n"
                       "{\"learner\": \"learner1\", \"task\": \"learner_get_data_task\", \"result\": {\"batch_size\": 2}}\n";
    mcd_set *d = mcd_new();
    mc_fail f;
    mc_fail_init(&f);
    mcd_add_text(d, "d.jsonl", dump, strlen(dump), &f);
    cJSON *good = J("{\"batch_size\": 5}"), *bad = J("{\"batch_size\": 3}");
    const cJSON *agg[1] = {good};
    assert_int_equal(mcv_check_get_data(d, agg, 1, &f), 1);
    assert_int_equal(mc_fail_count(&f), 0);
    agg[0] = bad;
    mcv_check_get_data(d, agg, 1, &f);
    assert_true(mc_fail_has(&f, "learner_get_data_task #1: batch_size is 3, not 5"));
    cJSON_Delete(good);
    cJSON_Delete(bad);
    mc_fail_free(&f);
    mcd_free(d);
}

/* ---- JSON comparison ---- */

static void json_numbers_compare_by_exact_value(void **state)
{
    (void)state;
    assert_false(mcj_number_equal("9007199254740993", "9007199254740992"));
    assert_true(mcj_number_equal("1.50", "1.5"));
    assert_true(mcj_number_equal("15e-1", "1.5"));
    assert_true(mcj_number_equal("100", "1e2"));
    assert_true(mcj_number_equal("0", "-0.0"));
    assert_true(mcj_number_equal("0.001", "1E-3"));
    assert_false(mcj_number_equal("1", "10"));
    assert_false(mcj_number_equal("-1", "1"));
    assert_false(mcj_number_equal("0.1", "0.10000000000000001"));
    assert_false(mcj_number_equal("1", "x"));
}

static void json_equality_ignores_key_order_but_not_list_order(void **state)
{
    (void)state;
    cJSON *a = J("{\"a\": 1, \"b\": [1, 2], \"s\": \"\\u00e9\"}"), *b = J("{\"s\": \"\xc3\xa9\", \"b\": [1, 2.0], \"a\": 1}");
    cJSON *c = J("{\"a\": 1, \"b\": [2, 1], \"s\": \"\\u00e9\"}");
    assert_true(mcj_equal(a, b));
    assert_false(mcj_equal(a, c));
    char *d = mcj_diff(a, c, "");
    assert_string_equal(d, "at b.0: expected 1, got 2");
    free(d);
    cJSON *e = J("{\"a\": 1, \"b\": [1, 2], \"s\": \"\\u00e9\", \"z\": null}");
    d = mcj_diff(a, e, "");
    assert_string_equal(d, "at z: unexpected null");
    free(d);
    cJSON *t = J("true"), *n = J("1");
    assert_false(mcj_equal(t, n));
    cJSON_Delete(a);
    cJSON_Delete(b);
    cJSON_Delete(c);
    cJSON_Delete(e);
    cJSON_Delete(t);
    cJSON_Delete(n);
}

static void json_dotted_paths_reach_objects_and_lists(void **state)
{
    (void)state;
    cJSON *r = J("{\"info\": {\"learner_step\": 3, \"l\": [10, {\"k\": \"v\"}]}, \"gpu\": 4}");
    assert_true(mcj_number_equal(mcj_path(r, "info.learner_step")->valuestring, "3"));
    assert_string_equal(mcj_path(r, "info.l.1.k")->valuestring, "v");
    assert_ptr_equal(mcj_path(r, ""), r);
    assert_null(mcj_path(r, "info.missing"));
    assert_null(mcj_path(r, "info.l.2"));
    assert_null(mcj_path(r, "info.l.x"));
    assert_null(mcj_path(r, "gpu.x"));
    assert_null(mcj_path(r, "info..l"));
    cJSON_Delete(r);
}

/* ---- learn data ---- */

static void items_carry_unique_ids_an_exact_big_number_and_padding(void **state)
{
    (void)state;
    cJSON *l = mci_build(2, 5, 7, 1000);
    assert_int_equal(cJSON_GetArraySize(l), 5);
    int i = 0;
    for (cJSON *it = l->child; it; it = it->next, i++) {
        char id[32];
        snprintf(id, sizeof id, "r2-%d", i);
        assert_string_equal(jsonx_get_str(it, "id"), id);
        assert_string_equal(jsonx_get(it, "big")->valuestring, "9007199254740993");
        assert_non_null(strstr(jsonx_get_str(it, "s"), "\xc3\xa9 \xe2\x9c\x93"));
        assert_non_null(strstr(jsonx_get_str(it, "s"), "\n \" \\"));
        char *txt = jsonx_print(it);
        assert_in_range(strlen(txt), 900, 1100);
        free(txt);
    }
    /* Deterministic for a seed, different for another. */
    cJSON *same = mci_build(2, 5, 7, 1000), *other = mci_build(2, 5, 8, 1000);
    assert_true(mcj_equal(l, same));
    assert_false(mcj_equal(l, other));
    cJSON_Delete(l);
    cJSON_Delete(same);
    cJSON_Delete(other);
    cJSON *none = mci_build(1, 0, 1, 0);
    assert_int_equal(cJSON_GetArraySize(none), 0);
    cJSON_Delete(none);
}

static void item_ids_parse_only_in_their_exact_form(void **state)
{
    (void)state;
    unsigned long r;
    size_t i;
    assert_true(mci_parse_id("r12-0", &r, &i));
    assert_int_equal(r, 12);
    assert_int_equal(i, 0);
    const char *bad[] = {"", "r", "r1", "r1-", "x1-2", "r-1-2", "r01-2", "r1-02", "r1-2x", "r1 -2", "R1-2"};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++)
        assert_false(mci_parse_id(bad[k], &r, &i));
}

/* ---- dump checker ---- */

typedef struct {
    cJSON *items[3];
    mcd_round rounds[3];
    size_t nrounds;
    mcd_view views[3];
    xbuf text;
    mcd_set *set;
    mc_fail f;
} dump_fx;

static void dfx_init(dump_fx *x, size_t nrounds, size_t n)
{
    memset(x, 0, sizeof *x);
    x->nrounds = nrounds;
    for (size_t r = 0; r < nrounds; r++) {
        x->items[r] = mci_build(r + 1, n, 1, 0);
        x->rounds[r] = (mcd_round){r + 1, x->items[r], true};
    }
    mc_fail_init(&x->f);
    x->set = mcd_new();
}

/* Appends an item line: the learner got item `pos` of round `round` as
 * element idx of its learn `learn`. */
static void dfx_item(dump_fx *x, const char *learner, int learn, int idx, size_t round, size_t pos)
{
    char *it = jsonx_print(cJSON_GetArrayItem(x->items[round - 1], (int)pos));
    xbuf_printf(&x->text, "{\"learner\": \"%s\", \"learn\": %d, \"index\": %d, \"item\": %s}\n", learner, learn, idx, it);
    free(it);
}

/* Appends the item lines of a slice [start, start+len) of a round. */
static void dfx_slice(dump_fx *x, const char *learner, int learn, size_t round, size_t start, size_t len)
{
    for (size_t k = 0; k < len; k++)
        dfx_item(x, learner, learn, (int)k, round, start + k);
}

static void dfx_result(dump_fx *x, const char *learner, const char *result)
{
    xbuf_printf(&x->text, "{\"learner\": \"%s\", \"task\": \"learner_learn_task\", \"result\": %s}\n", learner, result);
}

static void dfx_check(dump_fx *x)
{
    mcd_add_text(x->set, "d.jsonl", x->text.data ? x->text.data : "", x->text.len, &x->f);
    mcd_check_items(x->set, x->rounds, x->nrounds, x->views, &x->f);
}

static void dfx_free(dump_fx *x)
{
    mcd_views_free(x->views, x->nrounds);
    for (size_t r = 0; r < x->nrounds; r++)
        cJSON_Delete(x->items[r]);
    xbuf_free(&x->text);
    mcd_free(x->set);
    mc_fail_free(&x->f);
}

static void print_fails(const mc_fail *f)
{
    for (size_t i = 0; i < f->n; i++)
        print_error("failure: %s\n", f->msg[i]);
}

static void dump_check_passes_when_every_item_arrives_once_in_split_order(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 2, 5);
    /* Learner order is the order of the slices, not of the dump lines. */
    dfx_slice(&x, "learner1", 0, 1, 3, 2);
    dfx_result(&x, "learner1", "{\"a\": [1]}");
    dfx_slice(&x, "learner0", 0, 1, 0, 3);
    dfx_result(&x, "learner0", "{\"a\": [0]}");
    dfx_slice(&x, "learner0", 1, 2, 0, 3);
    dfx_slice(&x, "learner1", 1, 2, 3, 2);
    dfx_result(&x, "learner0", "{\"a\": [2]}");
    dfx_result(&x, "learner1", "{\"a\": [3]}");
    dfx_check(&x);
    print_fails(&x.f);
    assert_int_equal(mc_fail_count(&x.f), 0);
    for (int r = 0; r < 2; r++) {
        assert_true(x.views[r].complete);
        assert_int_equal(x.views[r].n, 2);
        assert_string_equal(x.views[r].slices[0].learner, "learner0");
        assert_int_equal(x.views[r].slices[0].start, 0);
        assert_int_equal(x.views[r].slices[0].len, 3);
        assert_string_equal(x.views[r].slices[1].learner, "learner1");
        assert_int_equal(x.views[r].slices[1].start, 3);
    }
    char *a = jsonx_print(x.views[0].slices[1].result), *b = jsonx_print(x.views[1].slices[0].result);
    assert_string_equal(a, "{\"a\":[1]}");
    assert_string_equal(b, "{\"a\":[2]}");
    free(a);
    free(b);
    dfx_free(&x);
}

static void dump_check_reports_an_item_received_twice(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 4);
    dfx_slice(&x, "learner0", 0, 1, 0, 3);
    dfx_slice(&x, "learner1", 0, 1, 2, 2);
    dfx_check(&x);
    assert_true(mc_fail_has(&x.f, "item r1-2 reached learners more than once: learner0 learn 0"));
    assert_true(mc_fail_has(&x.f, "and learner1 learn 0 (dump d.jsonl line 4)"));
    assert_false(x.views[0].complete);
    dfx_free(&x);
}

static void dump_check_reports_missing_items_as_a_range(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 8);
    dfx_slice(&x, "learner0", 0, 1, 0, 2);
    dfx_slice(&x, "learner1", 0, 1, 5, 2);
    dfx_check(&x);
    assert_true(mc_fail_has(&x.f, "round 1: items r1-2..r1-4 reached no learner (4 of 8 items missing)"));
    assert_true(mc_fail_has(&x.f, "round 1: item r1-7 reached no learner (4 of 8 items missing)"));
    assert_int_equal(mc_fail_count(&x.f), 2);
    assert_false(x.views[0].complete);
    dfx_free(&x);
}

static void dump_check_ignores_missing_items_of_a_round_that_failed(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 4);
    x.rounds[0].delivered = false;
    dfx_slice(&x, "learner0", 0, 1, 0, 2);
    dfx_check(&x);
    assert_int_equal(mc_fail_count(&x.f), 0);
    assert_false(x.views[0].complete);
    dfx_free(&x);
}

static void dump_check_reports_items_out_of_order(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 4);
    dfx_item(&x, "learner0", 0, 0, 1, 0);
    dfx_item(&x, "learner0", 0, 1, 1, 2);
    dfx_item(&x, "learner0", 0, 2, 1, 1);
    dfx_item(&x, "learner0", 0, 3, 1, 3);
    dfx_check(&x);
    print_fails(&x.f);
    assert_int_equal(mc_fail_count(&x.f), 1);
    assert_true(mc_fail_has(&x.f, "learner0 learn 0 (dump d.jsonl line 2): items out of order or not contiguous: "
                                  "element 1 of the slice is r1-2 where r1-1 was expected"));
    assert_false(x.views[0].complete);
    dfx_free(&x);
}

static void dump_check_orders_a_slice_by_index_not_by_line(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 3);
    dfx_item(&x, "learner0", 0, 2, 1, 2);
    dfx_item(&x, "learner0", 0, 0, 1, 0);
    dfx_item(&x, "learner0", 0, 1, 1, 1);
    dfx_check(&x);
    assert_int_equal(mc_fail_count(&x.f), 0);
    assert_true(x.views[0].complete);
    dfx_free(&x);
}

static void dump_check_reports_an_unknown_item_and_an_altered_item(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 2);
    dfx_item(&x, "learner0", 0, 0, 1, 0);
    xbuf_puts(&x.text, "{\"learner\": \"learner0\", \"learn\": 0, \"index\": 1, \"item\": {\"id\": \"r9-0\"}}\n");
    xbuf_puts(&x.text, "{\"learner\": \"learner1\", \"learn\": 0, \"index\": 0, \"item\": 42}\n");
    /* r1-1 with its big number rounded by a double. */
    cJSON *it = jsonx_dup(cJSON_GetArrayItem(x.items[0], 1));
    cJSON_ReplaceItemInObjectCaseSensitive(it, "big", jsonx_new_i64(9007199254740992LL));
    char *t = jsonx_print(it);
    xbuf_printf(&x.text, "{\"learner\": \"learner2\", \"learn\": 0, \"index\": 0, \"item\": %s}\n", t);
    free(t);
    cJSON_Delete(it);
    dfx_check(&x);
    print_fails(&x.f);
    assert_true(mc_fail_has(&x.f, "learner0 learn 0 (dump d.jsonl line 2): unknown item {\"id\":\"r9-0\"}"));
    assert_true(mc_fail_has(&x.f, "learner1 learn 0 (dump d.jsonl line 3): unknown item 42"));
    assert_true(mc_fail_has(&x.f, "learner2 learn 0 (dump d.jsonl line 4): item r1-1 differs from the one sent: at "
                                  "big: expected 9007199254740993, got 9007199254740992"));
    assert_false(x.views[0].complete);
    dfx_free(&x);
}

static void dump_check_reports_two_rounds_in_one_learn_and_two_slices_for_one_learner(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 2, 3);
    dfx_item(&x, "learner0", 0, 0, 1, 2);
    dfx_item(&x, "learner0", 0, 1, 2, 0);
    dfx_slice(&x, "learner1", 0, 1, 0, 1);
    dfx_slice(&x, "learner1", 1, 1, 1, 1);
    dfx_check(&x);
    print_fails(&x.f);
    assert_true(mc_fail_has(&x.f, "learner0 learn 0 (dump d.jsonl line 2): items of rounds 1 and 2 in one learn"));
    assert_true(mc_fail_has(&x.f, "round 1: learner1 got two slices (items r1-0.. and r1-1..)"));
    assert_true(mc_fail_has(&x.f, "round 2: items r2-1..r2-2 reached no learner"));
    assert_int_equal(mc_fail_count(&x.f), 3);
    assert_false(x.views[0].complete);
    dfx_free(&x);
}

static void dump_check_reports_an_index_given_twice(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 2);
    dfx_item(&x, "learner0", 0, 0, 1, 0);
    dfx_item(&x, "learner0", 0, 0, 1, 1);
    dfx_check(&x);
    assert_true(mc_fail_has(&x.f, "learner0 learn 0: index 0 appears twice (dump d.jsonl lines 1 and 2)"));
    dfx_free(&x);
}

static void dump_results_pair_by_learn_number_when_given(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 2, 1);
    dfx_slice(&x, "learner0", 7, 1, 0, 1);
    dfx_slice(&x, "learner0", 8, 2, 0, 1);
    xbuf_puts(&x.text, "{\"learner\": \"learner0\", \"task\": \"learner_learn_task\", \"learn\": 8, \"result\": \"second\"}\n");
    xbuf_puts(&x.text, "{\"learner\": \"learner0\", \"task\": \"learner_learn_task\", \"learn\": 7, \"result\": \"first\"}\n");
    dfx_check(&x);
    assert_int_equal(mc_fail_count(&x.f), 0);
    assert_string_equal(x.views[0].slices[0].result->valuestring, "first");
    assert_string_equal(x.views[1].slices[0].result->valuestring, "second");
    dfx_free(&x);
}

static void dump_results_that_cannot_be_paired_are_a_failure(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 2);
    dfx_slice(&x, "learner0", 0, 1, 0, 2);
    dfx_result(&x, "learner0", "{}");
    dfx_result(&x, "learner0", "{}");
    dfx_check(&x);
    assert_true(mc_fail_has(&x.f, "learner0: the dumps hold 2 learn results without a task id or learn number but 1 "
                                  "such learns with items"));
    assert_null(x.views[0].slices[0].result);
    dfx_free(&x);
}

/* Lines as mock_learner writes them: items and results carry the task id. */
static void dfx_item_t(dump_fx *x, const char *learner, const char *task_id, int learn, size_t round, size_t start,
                       size_t len)
{
    for (size_t k = 0; k < len; k++) {
        char *it = jsonx_print(cJSON_GetArrayItem(x->items[round - 1], (int)(start + k)));
        xbuf_printf(&x->text, "{\"learner\": \"%s\", \"task_id\": \"%s\", \"learn\": %d, \"index\": %zu, \"item\": %s}\n",
                    learner, task_id, learn, k, it);
        free(it);
    }
}

static void dfx_result_t(dump_fx *x, const char *learner, const char *task_id, const char *report, const char *result)
{
    xbuf_printf(&x->text,
                "{\"learner\": \"%s\", \"task_id\": \"%s\", \"task\": \"learner_learn_task\", \"report\": \"%s\", "
                "\"result\": %s}\n",
                learner, task_id, report, result);
}

/* The OOM case: the victim learned round 1 and died in round 2 before it
 * reported. Round 1 keeps its result (paired by task id), round 2 has none,
 * and nothing is a failure. */
static void dump_results_pair_by_task_id_when_a_learner_died_mid_learn(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 2, 2);
    dfx_item_t(&x, "learner0", "t-a1", 1, 1, 0, 1);
    dfx_item_t(&x, "victim0", "t-v1", 1, 1, 1, 1);
    dfx_result_t(&x, "learner0", "t-a1", "complete", "\"a1\"");
    dfx_result_t(&x, "victim0", "t-v1", "complete", "\"v1\"");
    dfx_item_t(&x, "learner0", "t-a2", 2, 2, 0, 1);
    dfx_item_t(&x, "victim0", "t-v2", 2, 2, 1, 1);
    dfx_result_t(&x, "learner0", "t-a2", "complete", "\"a2\"");
    dfx_check(&x);
    print_fails(&x.f);
    assert_int_equal(mc_fail_count(&x.f), 0);
    assert_true(x.views[0].complete && x.views[1].complete);
    assert_string_equal(x.views[0].slices[1].learner, "victim0");
    assert_string_equal(x.views[0].slices[1].result->valuestring, "v1");
    assert_string_equal(x.views[0].slices[1].report, "complete");
    assert_string_equal(x.views[1].slices[0].result->valuestring, "a2");
    assert_null(x.views[1].slices[1].result);
    dfx_free(&x);
}

/* A result line is written before its report is sent, so results may come
 * in any order relative to later items; the task id decides. */
static void dump_results_pair_by_task_id_not_by_order(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 3, 1);
    dfx_item_t(&x, "learner0", "t1", 1, 1, 0, 1);
    dfx_item_t(&x, "learner0", "t2", 2, 2, 0, 1);
    dfx_item_t(&x, "learner0", "t3", 3, 3, 0, 1);
    dfx_result_t(&x, "learner0", "t3", "complete", "\"third\"");
    dfx_result_t(&x, "learner0", "t1", "fail", "\"first\"");
    dfx_check(&x);
    assert_int_equal(mc_fail_count(&x.f), 0);
    assert_string_equal(x.views[0].slices[0].result->valuestring, "first");
    assert_string_equal(x.views[0].slices[0].report, "fail");
    assert_null(x.views[1].slices[0].result);
    assert_string_equal(x.views[2].slices[0].result->valuestring, "third");
    dfx_free(&x);
}

/* A restarted learner counts its learns from 1 again in the same dump: its
 * learns are told apart by task id, not merged into one. */
static void dump_check_tells_the_learns_of_a_restarted_learner_apart(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 2, 2);
    dfx_item_t(&x, "learner0", "before", 1, 1, 0, 2);
    dfx_result_t(&x, "learner0", "before", "complete", "\"r1\"");
    dfx_item_t(&x, "learner0", "after", 1, 2, 0, 2);
    dfx_result_t(&x, "learner0", "after", "complete", "\"r2\"");
    dfx_check(&x);
    print_fails(&x.f);
    assert_int_equal(mc_fail_count(&x.f), 0);
    assert_string_equal(x.views[0].slices[0].result->valuestring, "r1");
    assert_string_equal(x.views[1].slices[0].result->valuestring, "r2");
    dfx_free(&x);
}

/* Two mock_learner processes without --id-base both call their first
 * learner "learner0": in two dumps these are two learners, not duplicates. */
static void dump_check_keys_learners_on_their_id_within_a_dump(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 4);
    dfx_item_t(&x, "learner0", "ta", 1, 1, 0, 2);
    dfx_result_t(&x, "learner0", "ta", "complete", "\"a\"");
    mcd_add_text(x.set, "a.jsonl", x.text.data, x.text.len, &x.f);
    x.text.len = 0;
    dfx_item_t(&x, "learner0", "tb", 1, 1, 2, 2);
    dfx_result_t(&x, "learner0", "tb", "complete", "\"b\"");
    mcd_add_text(x.set, "b.jsonl", x.text.data, x.text.len, &x.f);
    mcd_check_items(x.set, x.rounds, x.nrounds, x.views, &x.f);
    print_fails(&x.f);
    assert_int_equal(mc_fail_count(&x.f), 0);
    assert_true(x.views[0].complete);
    assert_int_equal(x.views[0].n, 2);
    assert_string_equal(x.views[0].slices[0].learner, "learner0 (dump a.jsonl)");
    assert_string_equal(x.views[0].slices[1].learner, "learner0 (dump b.jsonl)");
    assert_string_equal(x.views[0].slices[1].result->valuestring, "b");
    assert_int_equal(mcd_learner_count(x.set), 2);
    dfx_free(&x);
}

static void dump_reports_malformed_lines_by_file_and_line(void **state)
{
    (void)state;
    dump_fx x;
    dfx_init(&x, 1, 1);
    xbuf_puts(&x.text, "\n{not json}\n[1]\n{\"item\": 1}\n{\"learner\": \"l\", \"learn\": \"0\", \"index\": 0, \"item\": 1}\n"
                       "{\"learner\": \"l\", \"result\": {}}\n{\"learner\": \"l\", \"event\": \"started\"}\n{\"learner\": ");
    dfx_check(&x);
    print_fails(&x.f);
    assert_true(mc_fail_has(&x.f, "dump d.jsonl line 2: not valid JSON"));
    assert_true(mc_fail_has(&x.f, "dump d.jsonl line 3: a JSON list, not an object"));
    assert_true(mc_fail_has(&x.f, "dump d.jsonl line 4: no string \"learner\""));
    assert_true(mc_fail_has(&x.f, "dump d.jsonl line 5: an item line needs integers \"learn\" and \"index\""));
    assert_true(mc_fail_has(&x.f, "dump d.jsonl line 6: a result line needs a string \"task\""));
    assert_true(mc_fail_has(&x.f, "dump d.jsonl line 8: the last line is cut short"));
    assert_true(mc_fail_has(&x.f, "round 1: item r1-0 reached no learner"));
    assert_int_equal(mc_fail_count(&x.f), 7);
    dfx_free(&x);
}

static void dump_file_that_does_not_exist_is_a_failure(void **state)
{
    (void)state;
    mcd_set *d = mcd_new();
    mc_fail f;
    mc_fail_init(&f);
    assert_int_equal(mcd_add_file(d, "/nonexistent/dump.jsonl", &f), -1);
    assert_true(mc_fail_has(&f, "dump /nonexistent/dump.jsonl: cannot open: No such file"));
    mc_fail_free(&f);
    mcd_free(d);
}

/* ---- script parser ---- */

static void script_parses_every_key(void **state)
{
    (void)state;
    const char *s = "{\"comment\": \"c\", \"stop_on_failure\": false, \"tasks\": ["
                    "{\"name\": \"resource\", \"expect\": {\"fields\": {\"gpu\": 4}}},"
                    "{\"name\": \"learner_get_data_task\", \"deadline_ms\": 3000, \"delay_ms\": 40, \"comment\": \"x\"},"
                    "{\"name\": \"learner_learn_task\"},"
                    "{\"name\": \"learner_learn_task\", \"items\": 3, \"data\": {\"extra\": [1]}, \"stop_on_failure\": true,"
                    " \"expect\": {\"status\": \"failed\", \"message_contains\": \"length\", \"latency_ms_max\": 2.5,"
                    " \"fields\": {\"info.learner_step\": 3, \"a.0\": null}}},"
                    "{\"name\": \"bogus\", \"items\": \"batch\", \"expect\": {\"status\": \"start_failed\"}},"
                    "{\"name\": \"learner_learn_task\", \"data\": {\"data\": []}}]}";
    mcs_script sc;
    char err[512];
    int rc = mcs_parse(s, strlen(s), "s.json", &sc, err, sizeof err);
    if (rc)
        print_error("%s\n", err);
    assert_int_equal(rc, 0);
    assert_int_equal(sc.n, 6);
    assert_false(sc.stop_on_failure);
    assert_string_equal(sc.tasks[0].name, "resource");
    assert_int_equal(sc.tasks[0].expect.status, MCS_COMPLETED);
    assert_true(mcj_number_equal(jsonx_get(sc.tasks[0].expect.fields, "gpu")->valuestring, "4"));
    assert_int_equal(sc.tasks[1].deadline_ms, 3000);
    assert_int_equal(sc.tasks[1].delay_ms, 40);
    assert_int_equal(sc.tasks[0].delay_ms, 0);
    assert_true(sc.tasks[1].check_batch); /* get-data: batch_size > 0 by default */
    assert_false(sc.tasks[0].check_batch);
    assert_int_equal(sc.tasks[1].items, MCS_ITEMS_NONE);
    assert_int_equal(sc.tasks[2].items, MCS_ITEMS_BATCH);
    assert_int_equal(sc.tasks[3].items, 3);
    assert_true(sc.tasks[3].stop_on_failure);
    assert_false(sc.tasks[2].stop_on_failure);
    assert_int_equal(sc.tasks[3].expect.status, MCS_FAILED);
    assert_string_equal(sc.tasks[3].expect.message_contains, "length");
    assert_true(sc.tasks[3].expect.latency_ms_max == 2.5);
    assert_non_null(jsonx_get(sc.tasks[3].data, "extra"));
    assert_int_equal(sc.tasks[4].items, MCS_ITEMS_BATCH);
    assert_int_equal(sc.tasks[4].expect.status, MCS_START_FAILED);
    assert_int_equal(sc.tasks[5].items, MCS_ITEMS_NONE);
    mcs_free(&sc);
}

static void script_get_data_with_an_expected_batch_size_skips_the_positive_check(void **state)
{
    (void)state;
    const char *s = "{\"tasks\": [{\"name\": \"learner_get_data_task\", \"expect\": {\"fields\": {\"batch_size\": 0}}}]}";
    mcs_script sc;
    char err[256];
    assert_int_equal(mcs_parse(s, strlen(s), "s.json", &sc, err, sizeof err), 0);
    assert_false(sc.tasks[0].check_batch);
    mcs_free(&sc);
}

static void script_stop_on_failure_at_the_top_applies_to_every_task(void **state)
{
    (void)state;
    const char *s = "{\"stop_on_failure\": true, \"tasks\": [{\"name\": \"a\"}, {\"name\": \"b\"}]}";
    mcs_script sc;
    char err[256];
    assert_int_equal(mcs_parse(s, strlen(s), "s.json", &sc, err, sizeof err), 0);
    assert_true(sc.tasks[0].stop_on_failure && sc.tasks[1].stop_on_failure);
    mcs_free(&sc);
}

typedef struct {
    const char *text;
    const char *err; /* expected part of the message, after "bad.json: " */
} bad_script;

static void expect_script_errors(const bad_script *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        mcs_script sc;
        char err[1024];
        int rc = mcs_parse(cases[i].text, strlen(cases[i].text), "bad.json", &sc, err, sizeof err);
        if (rc == 0 || strncmp(err, "bad.json: ", 10) != 0 || !strstr(err, cases[i].err))
            print_error("case %zu: %s\n  got: %s\n  want: %s\n", i, cases[i].text, rc ? err : "(accepted)",
                        cases[i].err);
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, cases[i].err));
        assert_int_equal(strncmp(err, "bad.json: ", 10), 0);
        assert_int_equal(sc.n, 0);
    }
}

static void script_rejects_bad_top_level(void **state)
{
    (void)state;
    static const bad_script cases[] = {
        {"", "not valid JSON"},
        {"{\"tasks\": [],}", "not valid JSON"},
        {"[1]", "must be a JSON object {\"tasks\": [...]}, not a list"},
        {"{}", "\"tasks\" is missing"},
        {"{\"tasks\": {}}", "tasks: must be a list, not an object"},
        {"{\"tasks\": []}", "tasks: must hold 1 to 100000 tasks, not 0"},
        {"{\"tasks\": [{\"name\": \"a\"}], \"task\": 1}", "unknown key \"task\" (known keys: tasks, stop_on_failure, comment)"},
        {"{\"tasks\": [{\"name\": \"a\"}], \"tasks\": []}", "key \"tasks\" appears twice"},
        {"{\"tasks\": [{\"name\": \"a\"}], \"stop_on_failure\": 1}", "stop_on_failure: must be true or false, not a number"},
        {"{\"tasks\": [{\"name\": \"a\"}], \"comment\": 1}", "comment: must be a string, not a number"},
    };
    expect_script_errors(cases, sizeof cases / sizeof *cases);
}

static void script_rejects_bad_tasks(void **state)
{
    (void)state;
    static const bad_script cases[] = {
        {"{\"tasks\": [1]}", "tasks[0]: must be an object, not a number"},
        {"{\"tasks\": [{}]}", "tasks[0]: \"name\" is missing"},
        {"{\"tasks\": [{\"name\": 1}]}", "tasks[0].name: must be a string, not a number"},
        {"{\"tasks\": [{\"name\": \"\"}]}", "tasks[0].name: must be 1 to 200 characters"},
        {"{\"tasks\": [{\"name\": \"a\", \"nmae\": 1}]}", "tasks[0]: unknown key \"nmae\" (known keys: name, data, items"},
        {"{\"tasks\": [{\"name\": \"a\", \"name\": \"b\"}]}", "tasks[0]: key \"name\" appears twice"},
        {"{\"tasks\": [{\"name\": \"a\", \"data\": []}]}", "tasks[0].data: must be an object of extra task data fields, not a list"},
        {"{\"tasks\": [{\"name\": \"a\", \"data\": {\"name\": \"b\"}}]}", "tasks[0].data: must not hold \"name\""},
        {"{\"tasks\": [{\"name\": \"a\", \"data\": {\"x\": 1, \"x\": 2}}]}", "tasks[0].data: key \"x\" appears twice"},
        {"{\"tasks\": [{\"name\": \"a\", \"items\": -1}]}", "tasks[0].items: must be an integer from 0 to 1000000 or \"batch\""},
        {"{\"tasks\": [{\"name\": \"a\", \"items\": 1.5}]}", "tasks[0].items: must be an integer"},
        {"{\"tasks\": [{\"name\": \"a\", \"items\": \"all\"}]}", "tasks[0].items: must be an integer"},
        {"{\"tasks\": [{\"name\": \"a\", \"items\": 1000001}]}", "tasks[0].items: must be an integer"},
        {"{\"tasks\": [{\"name\": \"a\", \"items\": 2, \"data\": {\"data\": []}}]}", "tasks[0].items: cannot be used with tasks[0].data.data"},
        {"{\"tasks\": [{\"name\": \"a\", \"items\": \"batch\"}]}", "tasks[0].items: \"batch\" needs the batch_size of a learner_get_data_task, but none comes before it"},
        {"{\"tasks\": [{\"name\": \"learner_learn_task\"}, {\"name\": \"learner_get_data_task\"}]}", "tasks[0]: learner_learn_task without \"items\" needs the batch_size"},
        {"{\"tasks\": [{\"name\": \"a\", \"deadline_ms\": 0}]}", "tasks[0].deadline_ms: must be an integer number of milliseconds from 1 to 86400000"},
        {"{\"tasks\": [{\"name\": \"a\", \"deadline_ms\": \"5\"}]}", "tasks[0].deadline_ms: must be an integer"},
        {"{\"tasks\": [{\"name\": \"a\", \"delay_ms\": -1}]}", "tasks[0].delay_ms: must be an integer number of milliseconds from 0 to 86400000"},
        {"{\"tasks\": [{\"name\": \"a\", \"stop_on_failure\": \"yes\"}]}", "tasks[0].stop_on_failure: must be true or false, not a string"},
        {"{\"tasks\": [{\"name\": \"a\", \"comment\": {}}]}", "tasks[0].comment: must be a string, not an object"},
        {"{\"tasks\": [{\"name\": \"a\"}, {\"name\": \"b\", \"x\": 1}]}", "tasks[1]: unknown key \"x\""},
    };
    expect_script_errors(cases, sizeof cases / sizeof *cases);
}

static void script_rejects_bad_expectations(void **state)
{
    (void)state;
    static const bad_script cases[] = {
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": 1}]}", "tasks[0].expect: must be an object, not a number"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"stauts\": 1}}]}", "tasks[0].expect: unknown key \"stauts\" (known keys: status, message_contains, fields, latency_ms_max)"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"status\": \"done\"}}]}", "tasks[0].expect.status: must be one of \"completed\", \"failed\", \"start_failed\", not \"done\""},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"status\": 33}}]}", "tasks[0].expect.status: must be a string"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"message_contains\": []}}]}", "tasks[0].expect.message_contains: must be a string, not a list"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"message_contains\": \"\"}}]}", "tasks[0].expect.message_contains: must not be empty"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"fields\": [1]}}]}", "tasks[0].expect.fields: must be an object of \"dotted.path\": value, not a list"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"fields\": {\"a..b\": 1}}}]}", "tasks[0].expect.fields: \"a..b\" is not a dotted path"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"fields\": {\"\": 1}}}]}", "tasks[0].expect.fields: \"\" is not a dotted path"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"fields\": {\"a.\": 1}}}]}", "is not a dotted path"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"fields\": {\"g\": 1, \"g\": 2}}}]}", "tasks[0].expect.fields: path \"g\" appears twice"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"latency_ms_max\": 0}}]}", "tasks[0].expect.latency_ms_max: must be a positive number of milliseconds"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"latency_ms_max\": \"1\"}}]}", "tasks[0].expect.latency_ms_max: must be a positive number"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"latency_ms_max\": 1e999}}]}", "tasks[0].expect.latency_ms_max: must be a positive number"},
        {"{\"tasks\": [{\"name\": \"a\", \"expect\": {\"status\": \"failed\", \"status\": \"completed\"}}]}", "tasks[0].expect: key \"status\" appears twice"},
    };
    expect_script_errors(cases, sizeof cases / sizeof *cases);
}

static void script_file_problems_name_the_file(void **state)
{
    (void)state;
    mcs_script sc;
    char err[512];
    assert_int_equal(mcs_load("/nonexistent/s.json", &sc, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent/s.json: cannot open the script: No such file"));
    assert_int_equal(mcs_load("/", &sc, err, sizeof err), -1);
    assert_non_null(strstr(err, "/: not a regular file"));
    char path[] = "/tmp/mc_script_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char *t = "{\"tasks\": [{\"name\": \"resource\", \"expect\": {\"status\": \"nope\"}}]}";
    assert_int_equal(write(fd, t, strlen(t)), (ssize_t)strlen(t));
    close(fd);
    assert_int_equal(mcs_load(path, &sc, err, sizeof err), -1);
    assert_int_equal(strncmp(err, path, strlen(path)), 0);
    assert_non_null(strstr(err, ": tasks[0].expect.status: must be one of"));
    unlink(path);
}

static void default_run_lists_resource_start_rounds_and_close(void **state)
{
    (void)state;
    mcs_script sc;
    mcs_default(&sc, 2, true);
    const char *names[] = {"resource", "learner_start_task", "learner_get_data_task", "learner_learn_task",
                           "learner_get_data_task", "learner_learn_task", "learner_close_task"};
    assert_int_equal(sc.n, 7);
    for (size_t i = 0; i < sc.n; i++) {
        assert_string_equal(sc.tasks[i].name, names[i]);
        assert_true(sc.tasks[i].stop_on_failure);
        assert_int_equal(sc.tasks[i].always, i == 6);
    }
    assert_true(sc.tasks[2].check_batch);
    assert_int_equal(sc.tasks[3].items, MCS_ITEMS_BATCH);
    mcs_free(&sc);
    mcs_default(&sc, 0, false);
    assert_int_equal(sc.n, 2);
    mcs_free(&sc);
}

/* ---- command line ---- */

static mc_cli_action parse(mc_config *cfg, char *err, size_t errlen, ...)
{
    char *argv[64];
    int argc = 0;
    argv[argc++] = "mock_coordinator";
    va_list ap;
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *)) != NULL && argc < 63;)
        argv[argc++] = a;
    va_end(ap);
    argv[argc] = NULL;
    return mc_cli_parse(argc, argv, cfg, err, errlen);
}

static void cli_parses_every_flag(void **state)
{
    (void)state;
    mc_config c;
    char err[512];
    assert_int_equal(parse(&c, err, sizeof err, "--connect", "[::1]:7236", "--rounds=5", "--expect-learners", "4",
                           "--dump", "a", "--dump=b", "--task-deadline-ms", "900", "--port", "0", "--host", "0.0.0.0",
                           "--channel", "-3", "--time-scale", "0.5", "--seed", "18446744073709551615", "--item-size",
                           "4096", "--no-close", "--log-level", "warn", "--log-format", "json", NULL),
                     MC_CLI_RUN);
    assert_string_equal(c.connect_host, "::1");
    assert_int_equal(c.connect_port, 7236);
    assert_string_equal(c.target, "[::1]:7236");
    assert_int_equal(c.rounds, 5);
    assert_int_equal(c.expect_learners, 4);
    assert_int_equal(c.ndumps, 2);
    assert_string_equal(c.dumps[1], "b");
    assert_int_equal(c.task_deadline_ms, 900);
    assert_string_equal(c.host, "0.0.0.0");
    assert_int_equal(c.channel, -3);
    assert_true(c.time_scale == 0.5);
    assert_true(c.seed == UINT64_MAX);
    assert_int_equal(c.item_size, 4096);
    assert_true(c.no_close);
    assert_int_equal(c.log_level, ILOG_WARN);
    assert_int_equal(c.log_format, ILOG_JSON);
    assert_int_equal(mc_scaled_ms(&c, 30000), 15000);
    mc_cli_free(&c);
    assert_int_equal(parse(&c, err, sizeof err, "--connect", "localhost:1", NULL), MC_CLI_RUN);
    assert_int_equal(c.rounds, 3);
    assert_int_equal(c.expect_learners, -1);
    assert_string_equal(c.host, "127.0.0.1");
    assert_int_equal(c.seed, 1);
    mc_cli_free(&c);
    assert_int_equal(parse(&c, err, sizeof err, "--connect", "x", "--help", NULL), MC_CLI_HELP);
    mc_cli_free(&c);
    assert_int_equal(parse(&c, err, sizeof err, "--version", NULL), MC_CLI_VERSION);
    mc_cli_free(&c);
}

static void cli_usage_errors_name_the_flag_and_the_problem(void **state)
{
    (void)state;
    static const struct {
        const char *a, *b, *c, *want;
    } cases[] = {
        {"--rounds", "3", NULL, "--connect: is required"},
        {"--connect", "host", NULL, "--connect: \"host\" is not HOST:PORT"},
        {"--connect", "h:0", NULL, "--connect: \"h:0\" is not HOST:PORT"},
        {"--connect", "::1:5", NULL, "--connect: \"::1:5\" is not HOST:PORT"},
        {"--connect", "h:1", "--rounds", "--rounds: needs a value"},
        {"--connect", "h:1", "--rounds=-1", "--rounds: \"-1\" is not an integer from 0 to 1000000"},
        {"--connect", "h:1", "--expect-learners=x", "--expect-learners: \"x\" is not an integer"},
        {"--connect", "h:1", "--task-deadline-ms=0", "--task-deadline-ms: \"0\" is not a number of milliseconds"},
        {"--connect", "h:1", "--port=65536", "--port: \"65536\" is not a port"},
        {"--connect", "h:1", "--channel=1.5", "--channel: \"1.5\" is not an integer channel"},
        {"--connect", "h:1", "--time-scale=0", "--time-scale: \"0\" is not a number above 0"},
        {"--connect", "h:1", "--time-scale=nan", "--time-scale: \"nan\" is not a number above 0"},
        {"--connect", "h:1", "--seed=-1", "--seed: \"-1\" is not a non-negative integer"},
        {"--connect", "h:1", "--item-size=99999999999", "--item-size: \"99999999999\" is not a byte count"},
        {"--connect", "h:1", "--log-level=loud", "--log-level: \"loud\" is not one of debug"},
        {"--connect", "h:1", "--log-format=xml", "--log-format: \"xml\" is not human or json"},
        {"--connect", "h:1", "--dump=", "--dump: needs a file name"},
        {"--connect", "h:1", "--frobnicate", "--frobnicate: unknown option"},
        {"--connect", "h:1", "--no-close=1", "--no-close: takes no value"},
        {"--script", "s.json", "--rounds=2", "--rounds: cannot be used with --script"},
        {"--script", "s.json", "--no-close", "--no-close: cannot be used with --script"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        mc_config c;
        char err[512];
        mc_cli_action a;
        if (strcmp(cases[i].a, "--script") == 0)
            a = parse(&c, err, sizeof err, "--connect", "h:1", cases[i].a, cases[i].b, cases[i].c, NULL);
        else
            a = parse(&c, err, sizeof err, cases[i].a, cases[i].b, cases[i].c, NULL);
        if (a != MC_CLI_USAGE || strstr(err, cases[i].want) != err)
            print_error("case %zu: got %d %s\n  want %s\n", i, a, err, cases[i].want);
        assert_int_equal(a, MC_CLI_USAGE);
        assert_ptr_equal(strstr(err, cases[i].want), err);
        mc_cli_free(&c);
    }
}

static void fail_list_keeps_a_bounded_number_of_messages(void **state)
{
    (void)state;
    mc_fail f;
    mc_fail_init(&f);
    for (int i = 0; i < MC_FAIL_MAX + 10; i++)
        mc_fail_add(&f, "failure %d", i);
    assert_int_equal(f.n, MC_FAIL_MAX);
    assert_int_equal(mc_fail_count(&f), MC_FAIL_MAX + 10);
    char big[MC_FAIL_MSG_MAX * 2];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    mc_fail_free(&f);
    mc_fail_add(&f, "%s", big);
    assert_int_equal(strlen(f.msg[0]), MC_FAIL_MSG_MAX - 1);
    assert_string_equal(f.msg[0] + MC_FAIL_MSG_MAX - 4, "...");
    mc_fail_free(&f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(oracle_merges_the_protocol_example_exactly),
        cmocka_unit_test(oracle_takes_first_learner_value_for_homogeneous_keys_at_any_depth),
        cmocka_unit_test(oracle_lists_scalars_and_nulls_whatever_the_later_values_are),
        cmocka_unit_test(oracle_keeps_number_tokens_exact_and_ignores_extra_later_keys),
        cmocka_unit_test(oracle_concatenates_lists_of_any_items),
        cmocka_unit_test(oracle_reports_a_key_missing_in_a_later_learner_with_path_and_learner),
        cmocka_unit_test(oracle_reports_a_list_beside_an_object),
        cmocka_unit_test(oracle_refuses_an_empty_list_of_results),
        cmocka_unit_test(merge_check_accepts_the_correct_merge),
        cmocka_unit_test(merge_check_catches_an_aggregator_that_drops_a_key),
        cmocka_unit_test(merge_check_catches_learners_merged_in_the_wrong_order),
        cmocka_unit_test(merge_check_catches_a_number_that_lost_precision),
        cmocka_unit_test(merge_check_accepts_one_learner_answering_directly),
        cmocka_unit_test(merge_check_flags_a_completed_learn_whose_merge_must_fail),
        cmocka_unit_test(merge_check_says_when_a_learner_result_is_missing),
        cmocka_unit_test(merge_check_passes_a_failed_learn_whose_learner_never_reported),
        cmocka_unit_test(merge_check_flags_a_completed_learn_whose_learner_reported_a_failure),
        cmocka_unit_test(get_data_check_wants_the_sum_of_the_learners_batch_sizes),
        cmocka_unit_test(json_numbers_compare_by_exact_value),
        cmocka_unit_test(json_equality_ignores_key_order_but_not_list_order),
        cmocka_unit_test(json_dotted_paths_reach_objects_and_lists),
        cmocka_unit_test(items_carry_unique_ids_an_exact_big_number_and_padding),
        cmocka_unit_test(item_ids_parse_only_in_their_exact_form),
        cmocka_unit_test(dump_check_passes_when_every_item_arrives_once_in_split_order),
        cmocka_unit_test(dump_check_reports_an_item_received_twice),
        cmocka_unit_test(dump_check_reports_missing_items_as_a_range),
        cmocka_unit_test(dump_check_ignores_missing_items_of_a_round_that_failed),
        cmocka_unit_test(dump_check_reports_items_out_of_order),
        cmocka_unit_test(dump_check_orders_a_slice_by_index_not_by_line),
        cmocka_unit_test(dump_check_reports_an_unknown_item_and_an_altered_item),
        cmocka_unit_test(dump_check_reports_two_rounds_in_one_learn_and_two_slices_for_one_learner),
        cmocka_unit_test(dump_check_reports_an_index_given_twice),
        cmocka_unit_test(dump_results_pair_by_learn_number_when_given),
        cmocka_unit_test(dump_results_that_cannot_be_paired_are_a_failure),
        cmocka_unit_test(dump_results_pair_by_task_id_when_a_learner_died_mid_learn),
        cmocka_unit_test(dump_results_pair_by_task_id_not_by_order),
        cmocka_unit_test(dump_check_tells_the_learns_of_a_restarted_learner_apart),
        cmocka_unit_test(dump_check_keys_learners_on_their_id_within_a_dump),
        cmocka_unit_test(dump_reports_malformed_lines_by_file_and_line),
        cmocka_unit_test(dump_file_that_does_not_exist_is_a_failure),
        cmocka_unit_test(script_parses_every_key),
        cmocka_unit_test(script_get_data_with_an_expected_batch_size_skips_the_positive_check),
        cmocka_unit_test(script_stop_on_failure_at_the_top_applies_to_every_task),
        cmocka_unit_test(script_rejects_bad_top_level),
        cmocka_unit_test(script_rejects_bad_tasks),
        cmocka_unit_test(script_rejects_bad_expectations),
        cmocka_unit_test(script_file_problems_name_the_file),
        cmocka_unit_test(default_run_lists_resource_start_rounds_and_close),
        cmocka_unit_test(cli_parses_every_flag),
        cmocka_unit_test(cli_usage_errors_name_the_flag_and_the_problem),
        cmocka_unit_test(fail_list_keeps_a_bounded_number_of_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
