/* Unit tests of aggregator/agg_merge: merging learners' results
 * (protocol.md, "Merging results") and splitting learn data. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agg_merge.h"
#include "jsonx.h"
#include "xalloc.h"

static const char *const names[] = {"learner0", "learner1", "learner2", "learner3"};

static cJSON *parse_ok(const char *text)
{
    char err[256];
    cJSON *j = jsonx_parse(text, strlen(text), err, sizeof err);
    if (!j)
        fail_msg("parse of %s failed: %s", text, err);
    return j;
}

/* Merges the JSON texts in[0..n) and returns the printed result, or NULL
 * with err set. Also checks that the inputs are left untouched. */
static char *merge_texts(const char *const *in, size_t n, const char *const *nm, char *err,
                         size_t errlen)
{
    cJSON *v[8] = {0};
    char *before[8] = {0};
    for (size_t i = 0; i < n; i++) {
        v[i] = parse_ok(in[i]);
        before[i] = jsonx_print(v[i]);
    }
    cJSON *m = agg_merge(v, n, nm, err, errlen);
    char *out = m ? jsonx_print(m) : NULL;
    cJSON_Delete(m);
    for (size_t i = 0; i < n; i++) {
        char *after = jsonx_print(v[i]);
        assert_string_equal(after, before[i]);
        free(after);
        free(before[i]);
        cJSON_Delete(v[i]);
    }
    return out;
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static void assert_merges(const char *const *in, size_t n, const char *want)
{
    char err[256] = "";
    char *out = merge_texts(in, n, names, err, sizeof err);
    if (!out)
        fail_msg("merge failed: %s", err);
    assert_string_equal(out, want);
    free(out);
}

static void assert_merge_fails(const char *const *in, size_t n, const char *msg)
{
    char err[256] = "unset";
    char *out = merge_texts(in, n, names, err, sizeof err);
    if (out)
        fail_msg("merge should fail with: %s, gave %s", msg, out);
    assert_string_equal(err, msg);
}

/* ---- merge ---- */

static void test_merge_spec_example(void **state)
{
    (void)state;
    const char *in[] = {
        "{\"learner_step\": 3, \"buffer_id\": \"b0\", \"a_list\": [1, 2], \"loss\": 0.5, "
        "\"info\": {\"task_id\": \"t0\", \"x\": 1}}",
        "{\"learner_step\": 4, \"buffer_id\": \"b1\", \"a_list\": [1, 2], \"loss\": 0.7, "
        "\"info\": {\"task_id\": \"t1\", \"x\": 2}}",
    };
    char *want_text = xstrdup(
        "{\"learner_step\": 3, \"buffer_id\": \"b0\", \"a_list\": [1, 2, 1, 2], \"loss\": [0.5, "
        "0.7], \"info\": {\"task_id\": \"t0\", \"x\": [1, 2]}}");
    cJSON *want = parse_ok(want_text);
    char *want_compact = jsonx_print(want);
    assert_merges(in, COUNT(in), want_compact);
    free(want_compact);
    free(want_text);
    cJSON_Delete(want);
}

static void test_merge_first_learner_keys_take_first_value(void **state)
{
    (void)state;
    const char *in[] = {
        "{\"learner_done\": false, \"task_id\": \"t0\", \"v\": 1}",
        "{\"learner_done\": true, \"task_id\": [\"odd\"], \"v\": 2}",
        "{\"v\": 3}", /* need not have them at all */
    };
    assert_merges(in, COUNT(in), "{\"learner_done\":false,\"task_id\":\"t0\",\"v\":[1,2,3]}");
}

static void test_merge_null_first_gives_the_list(void **state)
{
    (void)state;
    const char *in[] = {"null", "{\"a\": 1}", "[2]"};
    assert_merges(in, COUNT(in), "[null,{\"a\":1},[2]]");
}

static void test_merge_scalars_give_the_list(void **state)
{
    (void)state;
    const char *nums[] = {"1", "2.5", "-3"};
    assert_merges(nums, COUNT(nums), "[1,2.5,-3]");
    const char *strs[] = {"\"a\"", "\"b\""};
    assert_merges(strs, COUNT(strs), "[\"a\",\"b\"]");
    const char *bools[] = {"true", "false"};
    assert_merges(bools, COUNT(bools), "[true,false]");
}

static void test_merge_mixed_scalar_kinds_give_the_list(void **state)
{
    (void)state;
    /* As the reference: only the first value's kind matters here. */
    const char *in[] = {"{\"v\": 1}", "{\"v\": \"one\"}", "{\"v\": null}", "{\"v\": [1]}"};
    assert_merges(in, COUNT(in), "{\"v\":[1,\"one\",null,[1]]}");
}

static void test_merge_nested_objects(void **state)
{
    (void)state;
    const char *in[] = {
        "{\"info\": {\"deep\": {\"x\": 1, \"buffer_id\": \"b0\"}, \"y\": [\"a\"]}}",
        "{\"info\": {\"y\": [\"b\"], \"deep\": {\"buffer_id\": \"b1\", \"x\": 2}}}",
    };
    assert_merges(in, COUNT(in),
                  "{\"info\":{\"deep\":{\"x\":[1,2],\"buffer_id\":\"b0\"},\"y\":[\"a\",\"b\"]}}");
}

static void test_merge_lists_of_objects_concatenate(void **state)
{
    (void)state;
    const char *in[] = {"[{\"p\": 1}]", "[{\"p\": 2}, {\"p\": 3}]"};
    assert_merges(in, COUNT(in), "[{\"p\":1},{\"p\":2},{\"p\":3}]");
}

static void test_merge_empty_lists(void **state)
{
    (void)state;
    const char *in[] = {"[]", "[1]", "[]"};
    assert_merges(in, COUNT(in), "[1]");
    const char *empty[] = {"{\"l\": []}", "{\"l\": []}"};
    assert_merges(empty, COUNT(empty), "{\"l\":[]}");
}

static void test_merge_empty_object_first(void **state)
{
    (void)state;
    const char *in[] = {"{}", "{\"a\": 1}"};
    assert_merges(in, COUNT(in), "{}");
}

static void test_merge_keeps_first_key_order_and_drops_extra_keys(void **state)
{
    (void)state;
    const char *in[] = {"{\"z\": 1, \"a\": 2}", "{\"a\": 4, \"extra\": 0, \"z\": 3}"};
    assert_merges(in, COUNT(in), "{\"z\":[1,3],\"a\":[2,4]}");
}

static void test_merge_big_integers_stay_exact(void **state)
{
    (void)state;
    const char *in[] = {
        "{\"v\": 9007199254740993, \"l\": [1000000], \"learner_step\": 9223372036854775807}",
        "{\"v\": -9223372036854775808, \"l\": [1e400], \"learner_step\": 1}",
    };
    assert_merges(in, COUNT(in),
                  "{\"v\":[9007199254740993,-9223372036854775808],\"l\":[1000000,1e400],"
                  "\"learner_step\":9223372036854775807}");
}

static void test_merge_unicode_strings(void **state)
{
    (void)state;
    const char *in[] = {"{\"s\": \"caf\\u00e9\", \"\xc3\xa9\": [\"\\ud83d\\ude00\"]}",
                        "{\"s\": \"\xe2\x82\xac\", \"\xc3\xa9\": [\"\\\"q\\n\"]}"};
    assert_merges(in, COUNT(in),
                  "{\"s\":[\"caf\xc3\xa9\",\"\xe2\x82\xac\"],"
                  "\"\xc3\xa9\":[\"\xf0\x9f\x98\x80\",\"\\\"q\\n\"]}");
}

static void test_merge_one_learner(void **state)
{
    (void)state;
    const char *obj[] = {"{\"a\": 1, \"l\": [1], \"task_id\": \"t\"}"};
    assert_merges(obj, 1, "{\"a\":[1],\"l\":[1],\"task_id\":\"t\"}");
    const char *num[] = {"5"};
    assert_merges(num, 1, "[5]");
}

static void test_merge_no_learner_fails(void **state)
{
    (void)state;
    char err[128];
    assert_null(agg_merge(NULL, 0, names, err, sizeof err));
    assert_string_equal(err, "cannot merge results: no learner results");
}

static void test_merge_object_beside_list(void **state)
{
    (void)state;
    const char *top[] = {"[1]", "{\"a\": 1}"};
    assert_merge_fails(top, COUNT(top),
                       "cannot merge results: learner 'learner1' has an object where 'learner0' "
                       "has a list");
    const char *nested[] = {"{\"info\": {\"x\": {\"k\": 1}}}", "{\"info\": {\"x\": [1]}}"};
    assert_merge_fails(nested, COUNT(nested),
                       "cannot merge results: at key path 'info.x' learner 'learner1' has a list "
                       "where 'learner0' has an object");
}

static void test_merge_object_beside_scalars(void **state)
{
    (void)state;
    static const struct {
        const char *later;
        const char *kind;
    } cases[] = {{"5", "a number"}, {"\"s\"", "a string"}, {"true", "a bool"}, {"null", "null"}};
    for (size_t i = 0; i < COUNT(cases); i++) {
        char *later = xasprintf("{\"a\": %s}", cases[i].later);
        const char *in[] = {"{\"a\": {\"b\": 1}}", later};
        char *msg = xasprintf("cannot merge results: at key path 'a' learner 'learner1' has %s "
                              "where 'learner0' has an object",
                              cases[i].kind);
        assert_merge_fails(in, COUNT(in), msg);
        free(msg);
        free(later);
    }
}

static void test_merge_list_beside_scalars(void **state)
{
    (void)state;
    const char *in[] = {"{\"l\": [1]}", "{\"l\": [2]}", "{\"l\": null}"};
    assert_merge_fails(in, COUNT(in),
                       "cannot merge results: at key path 'l' learner 'learner2' has null where "
                       "'learner0' has a list");
    const char *str[] = {"{\"l\": [1]}", "{\"l\": \"[2]\"}"};
    assert_merge_fails(str, COUNT(str),
                       "cannot merge results: at key path 'l' learner 'learner1' has a string "
                       "where 'learner0' has a list");
}

static void test_merge_missing_key(void **state)
{
    (void)state;
    const char *in[] = {"{\"info\": {\"x\": 1, \"y\": 2}}", "{\"info\": {\"x\": 1}}"};
    assert_merge_fails(in, COUNT(in),
                       "cannot merge results: at key path 'info.y' learner 'learner1' has no "
                       "value where 'learner0' has a number");
    const char *top[] = {"{\"a\": [], \"b\": {}}", "{\"a\": []}"};
    assert_merge_fails(top, COUNT(top),
                       "cannot merge results: at key path 'b' learner 'learner1' has no value "
                       "where 'learner0' has an object");
}

static void test_merge_without_names_uses_indexes(void **state)
{
    (void)state;
    const char *in[] = {"{\"a\": 1}", "[]"};
    char err[256];
    assert_null(merge_texts(in, COUNT(in), NULL, err, sizeof err));
    assert_string_equal(err, "cannot merge results: learner '#1' has a list where '#0' has an "
                             "object");
}

static void test_merge_null_pointer_counts_as_null(void **state)
{
    (void)state;
    char err[256];
    cJSON *one = parse_ok("1");
    cJSON *v[] = {one, NULL};
    cJSON *m = agg_merge(v, 2, names, err, sizeof err);
    char *s = jsonx_print(m);
    assert_string_equal(s, "[1,null]");
    free(s);
    cJSON_Delete(m);
    cJSON *list = parse_ok("[1]");
    cJSON *w[] = {list, NULL};
    assert_null(agg_merge(w, 2, names, err, sizeof err));
    assert_string_equal(err, "cannot merge results: learner 'learner1' has null where "
                             "'learner0' has a list");
    cJSON_Delete(one);
    cJSON_Delete(list);
}

static void test_merge_refuses_unparsed_text(void **state)
{
    (void)state;
    char err[256];
    const char *t = "{\"l\": [1, 2]}";
    cJSON *a = jsonx_parse_shallow(t, strlen(t), 0, err, sizeof err);
    cJSON *b = jsonx_parse_shallow(t, strlen(t), 0, err, sizeof err);
    cJSON *v[] = {a, b};
    assert_null(agg_merge(v, 2, names, err, sizeof err));
    assert_string_equal(err, "cannot merge results: at key path 'l' learner 'learner0' has "
                             "unparsed JSON text (merge needs full trees)");
    cJSON_Delete(a);
    cJSON_Delete(b);
}

static void test_merge_result_is_independent_of_inputs(void **state)
{
    (void)state;
    char err[256];
    cJSON *a = parse_ok("{\"l\": [{\"k\": 1}], \"s\": \"x\", \"task_id\": {\"id\": 1}}");
    cJSON *b = parse_ok("{\"l\": [{\"k\": 2}], \"s\": \"y\"}");
    cJSON *v[] = {a, b};
    cJSON *m = agg_merge(v, 2, names, err, sizeof err);
    cJSON_Delete(a);
    cJSON_Delete(b);
    char *s = jsonx_print(m);
    assert_string_equal(s, "{\"l\":[{\"k\":1},{\"k\":2}],\"s\":[\"x\",\"y\"],\"task_id\":{\"id\":1}}");
    free(s);
    cJSON_Delete(m);
}

/* ---- split ---- */

/* Splits `text` given as a tree, as Raw text, and as a tree of Raw items,
 * and checks that all give `want` (n slices). */
static void assert_splits(const char *text, const size_t *demands, size_t n,
                          const char *const *want)
{
    char err[256];
    cJSON *tree = parse_ok(text);
    cJSON *raw = cJSON_CreateRaw(text);
    cJSON *raw_items = jsonx_parse_shallow(text, strlen(text), 0, err, sizeof err);
    assert_non_null(raw_items);
    cJSON *inputs[] = {tree, raw, raw_items};
    for (size_t k = 0; k < 3; k++) {
        char *slices[8];
        size_t lens[8];
        if (agg_split(inputs[k], demands, n, slices, lens, err, sizeof err) != 0)
            fail_msg("split failed: %s", err);
        for (size_t i = 0; i < n; i++) {
            assert_string_equal(slices[i], want[i]);
            assert_int_equal(lens[i], strlen(want[i]));
            free(slices[i]);
        }
    }
    cJSON_Delete(tree);
    cJSON_Delete(raw);
    cJSON_Delete(raw_items);
}

static void assert_split_fails(const char *text, const size_t *demands, size_t n,
                               const char *msg)
{
    cJSON *tree = parse_ok(text);
    cJSON *raw = cJSON_CreateRaw(text);
    cJSON *inputs[] = {tree, raw};
    for (size_t k = 0; k < 2; k++) {
        char *slices[8] = {(char *)1, (char *)1, (char *)1, (char *)1,
                           (char *)1, (char *)1, (char *)1, (char *)1};
        char err[256] = "unset";
        assert_int_equal(agg_split(inputs[k], demands, n, slices, NULL, err, sizeof err), -1);
        assert_string_equal(err, msg);
        for (size_t i = 0; i < n; i++)
            assert_null(slices[i]);
    }
    cJSON_Delete(tree);
    cJSON_Delete(raw);
}

static void test_split_exact(void **state)
{
    (void)state;
    const size_t d[] = {2, 3};
    const char *want[] = {"[1,2]", "[3,4,5]"};
    assert_splits("[1,2,3,4,5]", d, 2, want);
}

static void test_split_keeps_items_exact(void **state)
{
    (void)state;
    const size_t d[] = {1, 2};
    const char *want[] = {"[{\"o\":[1,\"]\"],\"r\":9007199254740993}]",
                          "[\"q\\\"\\u0001\",1e400]"};
    assert_splits("[{\"o\":[1,\"]\"],\"r\":9007199254740993},\"q\\\"\\u0001\",1e400]", d, 2,
                  want);
}

static void test_split_raw_keeps_source_text_of_items(void **state)
{
    (void)state;
    char err[256];
    const char *text = "[ {\"a\": 1} ,\n 2 , \"\\u00e9\" ]";
    cJSON *raw = cJSON_CreateRaw(text);
    const size_t d[] = {2, 1};
    char *slices[2];
    assert_int_equal(agg_split(raw, d, 2, slices, NULL, err, sizeof err), 0);
    assert_string_equal(slices[0], "[{\"a\": 1},2]");
    assert_string_equal(slices[1], "[\"\\u00e9\"]");
    free(slices[0]);
    free(slices[1]);
    cJSON_Delete(raw);
}

static void test_split_tree_of_raw_items_as_a_slave_parses_it(void **state)
{
    (void)state;
    char err[256];
    const char *body = "{\"data\": {\"name\": \"learner_learn_task\", \"data\": "
                       "[ {\"a\": 1} , 2 , \"x\" ]}}";
    cJSON *j = jsonx_parse_shallow(body, strlen(body), 2, err, sizeof err);
    const cJSON *data = jsonx_get(jsonx_get(j, "data"), "data");
    const size_t d[] = {1, 2};
    char *slices[2];
    assert_int_equal(agg_split(data, d, 2, slices, NULL, err, sizeof err), 0);
    assert_string_equal(slices[0], "[{\"a\": 1}]");
    assert_string_equal(slices[1], "[2,\"x\"]");
    free(slices[0]);
    free(slices[1]);
    cJSON_Delete(j);
}

static void test_split_short_data_fails_with_both_lengths(void **state)
{
    (void)state;
    xbuf b = {0};
    xbuf_puts(&b, "[");
    for (int i = 0; i < 30; i++)
        xbuf_printf(&b, "%s%d", i ? "," : "", i);
    xbuf_puts(&b, "]");
    const size_t d[] = {8, 8, 8, 8};
    assert_split_fails(b.data, d, 4,
                       "learn data has 30 items but the learners asked for 32 (8+8+8+8)");
    xbuf_free(&b);
}

static void test_split_long_data_fails_with_both_lengths(void **state)
{
    (void)state;
    const size_t d[] = {1, 1};
    assert_split_fails("[1,2,3]", d, 2, "learn data has 3 items but the learners asked for 2 (1+1)");
}

static void test_split_empty_data(void **state)
{
    (void)state;
    const size_t zero[] = {0, 0};
    const char *want[] = {"[]", "[]"};
    assert_splits("[]", zero, 2, want);
    const size_t one[] = {1};
    assert_split_fails("[]", one, 1, "learn data has 0 items but the learners asked for 1 (1)");
}

static void test_split_zero_demands_get_empty_slices(void **state)
{
    (void)state;
    const size_t d[] = {0, 2, 0, 1, 0};
    const char *want[] = {"[]", "[1,2]", "[]", "[3]", "[]"};
    assert_splits("[1,2,3]", d, 5, want);
}

static void test_split_no_learner(void **state)
{
    (void)state;
    char err[256];
    cJSON *empty = parse_ok("[]");
    assert_int_equal(agg_split(empty, NULL, 0, NULL, NULL, err, sizeof err), 0);
    cJSON_Delete(empty);
    assert_split_fails("[1]", NULL, 0,
                       "learn data has 1 items but the learners asked for 0 (no learner)");
}

static void test_split_refuses_non_lists(void **state)
{
    (void)state;
    char err[256];
    const size_t d[] = {1};
    char *slices[1];
    cJSON *s = parse_ok("\"[1]\"");
    assert_int_equal(agg_split(s, d, 1, slices, NULL, err, sizeof err), -1);
    assert_string_equal(err, "learn data is a JSON string, not a list");
    assert_null(slices[0]);
    cJSON_Delete(s);
    cJSON *raw = cJSON_CreateRaw("{\"a\": [1]}");
    assert_int_equal(agg_split(raw, d, 1, slices, NULL, err, sizeof err), -1);
    assert_string_equal(err, "learn data is a JSON object, not a list");
    cJSON_Delete(raw);
    assert_int_equal(agg_split(NULL, d, 1, slices, NULL, err, sizeof err), -1);
    assert_string_equal(err, "learn data is missing");
}

static void test_split_refuses_invalid_raw_text(void **state)
{
    (void)state;
    char err[256];
    const size_t d[] = {1};
    char *slices[1];
    cJSON *raw = cJSON_CreateRaw("[1,]");
    assert_int_equal(agg_split(raw, d, 1, slices, NULL, err, sizeof err), -1);
    assert_string_equal(err, "learn data is not a valid JSON list: trailing comma before ']' at "
                             "byte 3");
    cJSON_Delete(raw);
}

static void test_split_many_items(void **state)
{
    (void)state;
    xbuf b = {0};
    xbuf_puts(&b, "[");
    for (int i = 0; i < 10000; i++)
        xbuf_printf(&b, "%s{\"i\":%d}", i ? "," : "", i);
    xbuf_puts(&b, "]");
    const size_t d[] = {2500, 2500, 5000};
    cJSON *raw = cJSON_CreateRaw(b.data);
    char *slices[3];
    char err[256];
    assert_int_equal(agg_split(raw, d, 3, slices, NULL, err, sizeof err), 0);
    size_t base = 0;
    for (int k = 0; k < 3; k++) {
        cJSON *s = parse_ok(slices[k]);
        assert_int_equal(cJSON_GetArraySize(s), d[k]);
        int64_t first = -1;
        assert_true(jsonx_get_i64(jsonx_get(s->child, "i"), &first));
        assert_true(first == (int64_t)base);
        base += d[k];
        cJSON_Delete(s);
        free(slices[k]);
    }
    cJSON_Delete(raw);
    xbuf_free(&b);
}

/* ---- learn task ---- */

static void test_learn_tasks_wrap_each_slice(void **state)
{
    (void)state;
    char err[256];
    const char *text = "[1,{\"a\":9007199254740993},\"x\"]";
    cJSON *data = jsonx_parse_shallow(text, strlen(text), 0, err, sizeof err);
    assert_non_null(data);
    size_t d[2] = {2, 1};
    char *tasks[2];
    size_t lens[2];
    assert_int_equal(agg_split_learn_tasks(data, d, 2, tasks, lens, err, sizeof err), 0);
    assert_string_equal(tasks[0], "{\"name\": \"learner_learn_task\", \"data\": [1,{\"a\":9007199254740993}]}");
    assert_string_equal(tasks[1], "{\"name\": \"learner_learn_task\", \"data\": [\"x\"]}");
    assert_int_equal(lens[0], strlen(tasks[0]));
    cJSON *j = parse_ok(tasks[1]);
    assert_string_equal(jsonx_get_str(j, "name"), "learner_learn_task");
    cJSON_Delete(j);
    free(tasks[0]);
    free(tasks[1]);
    /* the same length check as agg_split */
    size_t bad[2] = {2, 2};
    assert_int_equal(agg_split_learn_tasks(data, bad, 2, tasks, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "learn data has 3 items but the learners asked for 4 (2+2)"));
    assert_null(tasks[0]);
    cJSON_Delete(data);
}

/* What the aggregator does: the body parsed with refs (raw_depth 2), each
 * task split framed for master_task_send_framed straight from the body. */
static void test_learn_tasks_framed_from_refs(void **state)
{
    (void)state;
    char err[256];
    const char *body = "{\"task\": {\"id\": \"t\"}, \"data\": {\"name\": \"learner_learn_task\", \"data\": "
                       "[ {\"a\": 9007199254740993} , 2 , \"x\\u00e9\" ]}}";
    cJSON *j = jsonx_parse_refs(body, strlen(body), 2, err, sizeof err);
    assert_non_null(j);
    const cJSON *data = jsonx_get(jsonx_get(j, "data"), "data");
    const size_t d[] = {1, 0, 2};
    char *tasks[3], *plain[3];
    size_t lens[3], plens[3];
    assert_int_equal(agg_split_learn_tasks_framed(data, body, d, 3, 7, 3, tasks, lens, err, sizeof err), 0);
    cJSON *sh = jsonx_parse_shallow(body, strlen(body), 2, err, sizeof err);
    assert_int_equal(
        agg_split_learn_tasks(jsonx_get(jsonx_get(sh, "data"), "data"), d, 3, plain, plens, err, sizeof err), 0);
    for (size_t i = 0; i < 3; i++) {
        assert_int_equal(lens[i], plens[i]);
        assert_memory_equal(tasks[i] + 7, plain[i], lens[i] + 1); /* the text and its NUL */
        memset(tasks[i], '#', 7);                                  /* the rooms are there to write */
        memset(tasks[i] + 7 + lens[i], '#', 3 + 1);
        free(tasks[i]);
        free(plain[i]);
    }
    /* Wrong lengths fail with both numbers, as always. */
    const size_t bad[] = {2, 2};
    assert_int_equal(agg_split_learn_tasks_framed(data, body, bad, 2, 7, 3, tasks, lens, err, sizeof err), -1);
    assert_string_equal(err, "learn data has 3 items but the learners asked for 4 (2+2)");
    assert_null(tasks[0]);
    /* Refs without the text they point into: an error, not a crash. */
    assert_int_equal(agg_split_learn_tasks_framed(data, NULL, d, 3, 0, 0, tasks, lens, err, sizeof err), -1);
    assert_string_equal(err, "learn data item 0 refers to a text that was not given");
    assert_null(tasks[0]);
    cJSON_Delete(sh);
    cJSON_Delete(j);
}

/* ---- learn data as spans of the body ---- */

/* The body the coordinator sends, around a learn data list. */
static char *learn_body(const char *list)
{
    return xasprintf("{\"task\": {\"id\": \"t\"}, \"data\": {\"name\": \"learner_learn_task\", \"data\": %s}}", list);
}

/* Parses body as the aggregator does (refs, raw_depth 2), returns the tree
 * and sets *data to the learn data list. */
static cJSON *parse_refs_ok(const char *body, const cJSON **data)
{
    char err[256];
    cJSON *j = jsonx_parse_refs(body, strlen(body), 2, err, sizeof err);
    if (!j)
        fail_msg("parse of %s failed: %s", body, err);
    *data = jsonx_get(jsonx_get(j, "data"), "data");
    return j;
}

/* Splits list (as the coordinator sends it) into spans by d and checks
 * each span's text against want[i]; also that the task built from the span
 * (AGG_LEARN_HEAD, span, AGG_LEARN_TAIL) is the task the copying split
 * builds: the same bytes when the list is compact, else the same JSON. */
static void assert_spans(const char *list, const size_t *d, size_t n, const char *const *want)
{
    char err[256];
    char *body = learn_body(list);
    const cJSON *data;
    cJSON *j = parse_refs_ok(body, &data);
    agg_span sp[8];
    char *copies[8];
    size_t lens[8];
    assert_int_equal(agg_split_spans(data, body, strlen(body), d, n, sp, err, sizeof err), 0);
    assert_string_equal(err, "");
    assert_int_equal(agg_split_learn_tasks_framed(data, body, d, n, 0, 0, copies, lens, err, sizeof err), 0);
    bool compact = strpbrk(list, " \t\r\n") == NULL;
    for (size_t i = 0; i < n; i++) {
        assert_true(sp[i].off + sp[i].len <= strlen(body));
        char *got = xasprintf("%.*s", (int)sp[i].len, body + sp[i].off);
        assert_string_equal(got, want[i]);
        char *task = xasprintf("%s%s%s", AGG_LEARN_HEAD, got, AGG_LEARN_TAIL);
        if (compact) {
            assert_string_equal(task, copies[i]);
        } else {
            cJSON *a = parse_ok(task), *b = parse_ok(copies[i]);
            char *pa = jsonx_print(a), *pb = jsonx_print(b);
            assert_string_equal(pa, pb);
            free(pa);
            free(pb);
            cJSON_Delete(a);
            cJSON_Delete(b);
        }
        free(task);
        free(got);
        free(copies[i]);
    }
    cJSON_Delete(j);
    free(body);
}

static void test_spans_follow_the_demands(void **state)
{
    (void)state;
    const size_t d[] = {2, 1, 3};
    const char *const want[] = {"1, 2", "3", "4, 5, 6"};
    assert_spans("[1, 2, 3, 4, 5, 6]", d, 3, want);
    const char *const compact[] = {"1,2", "3", "4,5,6"};
    assert_spans("[1,2,3,4,5,6]", d, 3, compact); /* byte for byte the copying split's tasks */
}

static void test_spans_zero_demands_are_empty(void **state)
{
    (void)state;
    const size_t d[] = {0, 2, 0, 1, 0};
    const char *const want[] = {"", "\"a\", \"b\"", "", "\"c\"", ""};
    assert_spans("[\"a\", \"b\", \"c\"]", d, 5, want);
    const size_t none[] = {0, 0};
    const char *const empty[] = {"", ""};
    assert_spans("[]", none, 2, empty);
    assert_spans("[ ]", none, 2, empty);
}

static void test_spans_one_item(void **state)
{
    (void)state;
    const size_t d[] = {1};
    const char *const want[] = {"{\"obs\": [0.5, -1e3], \"id\": 9007199254740993}"};
    assert_spans("[{\"obs\": [0.5, -1e3], \"id\": 9007199254740993}]", d, 1, want);
    const char *const str[] = {"\"x\\u00e9]\""};
    assert_spans("[ \"x\\u00e9]\" ]", d, 1, str); /* white space outside the span */
}

/* White space and nested lists and objects (with commas and brackets in
 * strings) inside a span are carried as they are. */
static void test_spans_keep_white_space_and_nested_items(void **state)
{
    (void)state;
    const size_t d[] = {2, 1};
    const char *const want[] = {"{\"a\": [1, {\"b\": \"x,]\"}]} ,\t\n [2, [3, {}]]", "\"s\""};
    assert_spans("[ \n{\"a\": [1, {\"b\": \"x,]\"}]} ,\t\n [2, [3, {}]]\r\n,\"s\"  ]", d, 2, want);
}

/* Too many or too few items: the copying split's error, word for word. */
static void test_spans_count_must_match(void **state)
{
    (void)state;
    char err[256];
    char *body = learn_body("[1, 2, 3, 4, 5]");
    const cJSON *data;
    cJSON *j = parse_refs_ok(body, &data);
    agg_span sp[2];
    const size_t d[] = {2, 2};
    assert_int_equal(agg_split_spans(data, body, strlen(body), d, 2, sp, err, sizeof err), -1);
    assert_string_equal(err, "learn data has 5 items but the learners asked for 4 (2+2)");
    const size_t more[] = {3, 3};
    assert_int_equal(agg_split_spans(data, body, strlen(body), more, 2, sp, err, sizeof err), -1);
    assert_string_equal(err, "learn data has 5 items but the learners asked for 6 (3+3)");
    const size_t huge[] = {SIZE_MAX, 2};
    assert_int_equal(agg_split_spans(data, body, strlen(body), huge, 2, sp, err, sizeof err), -1);
    assert_string_equal(err, "the learners' demands overflow");
    cJSON_Delete(j);
    free(body);
}

/* What spans cannot carry goes back to the copying split (1): items that
 * are not refs, refs without their text, or items that are no longer
 * neighbours in the text (one was taken out of the list). */
static void test_spans_give_way_to_copies(void **state)
{
    (void)state;
    char err[256];
    char *body = learn_body("[1, 2, 3]");
    const cJSON *data;
    cJSON *j = parse_refs_ok(body, &data);
    agg_span sp[2];
    const size_t d[] = {1, 2};
    assert_int_equal(agg_split_spans(data, NULL, 0, d, 2, sp, err, sizeof err), 1);
    assert_int_equal(agg_split_spans(data, body, 10, d, 2, sp, err, sizeof err), 1); /* refs past the text */
    cJSON *tree = parse_ok("[1, 2, 3]");
    assert_int_equal(agg_split_spans(tree, body, strlen(body), d, 2, sp, err, sizeof err), 1);
    cJSON *raw = jsonx_parse_shallow("[1, 2, 3]", 9, 0, err, sizeof err);
    assert_int_equal(agg_split_spans(raw, body, strlen(body), d, 2, sp, err, sizeof err), 1);
    cJSON_DeleteItemFromArray((cJSON *)data, 1); /* [1, 3]: 1 and 3 are not neighbours */
    const size_t two[] = {2};
    assert_int_equal(agg_split_spans(data, body, strlen(body), two, 1, sp, err, sizeof err), 1);
    const size_t apart[] = {1, 1}; /* each alone: spans again */
    assert_int_equal(agg_split_spans(data, body, strlen(body), apart, 2, sp, err, sizeof err), 0);
    assert_memory_equal(body + sp[1].off, "3", sp[1].len);
    cJSON_Delete(raw);
    cJSON_Delete(tree);
    cJSON_Delete(j);
    free(body);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_merge_spec_example),
        cmocka_unit_test(test_merge_first_learner_keys_take_first_value),
        cmocka_unit_test(test_merge_null_first_gives_the_list),
        cmocka_unit_test(test_merge_scalars_give_the_list),
        cmocka_unit_test(test_merge_mixed_scalar_kinds_give_the_list),
        cmocka_unit_test(test_merge_nested_objects),
        cmocka_unit_test(test_merge_lists_of_objects_concatenate),
        cmocka_unit_test(test_merge_empty_lists),
        cmocka_unit_test(test_merge_empty_object_first),
        cmocka_unit_test(test_merge_keeps_first_key_order_and_drops_extra_keys),
        cmocka_unit_test(test_merge_big_integers_stay_exact),
        cmocka_unit_test(test_merge_unicode_strings),
        cmocka_unit_test(test_merge_one_learner),
        cmocka_unit_test(test_merge_no_learner_fails),
        cmocka_unit_test(test_merge_object_beside_list),
        cmocka_unit_test(test_merge_object_beside_scalars),
        cmocka_unit_test(test_merge_list_beside_scalars),
        cmocka_unit_test(test_merge_missing_key),
        cmocka_unit_test(test_merge_without_names_uses_indexes),
        cmocka_unit_test(test_merge_null_pointer_counts_as_null),
        cmocka_unit_test(test_merge_refuses_unparsed_text),
        cmocka_unit_test(test_merge_result_is_independent_of_inputs),
        cmocka_unit_test(test_learn_tasks_framed_from_refs),
        cmocka_unit_test(test_split_exact),
        cmocka_unit_test(test_split_keeps_items_exact),
        cmocka_unit_test(test_split_raw_keeps_source_text_of_items),
        cmocka_unit_test(test_split_tree_of_raw_items_as_a_slave_parses_it),
        cmocka_unit_test(test_split_short_data_fails_with_both_lengths),
        cmocka_unit_test(test_split_long_data_fails_with_both_lengths),
        cmocka_unit_test(test_split_empty_data),
        cmocka_unit_test(test_split_zero_demands_get_empty_slices),
        cmocka_unit_test(test_split_no_learner),
        cmocka_unit_test(test_split_refuses_non_lists),
        cmocka_unit_test(test_split_refuses_invalid_raw_text),
        cmocka_unit_test(test_split_many_items),
        cmocka_unit_test(test_learn_tasks_wrap_each_slice),
        cmocka_unit_test(test_spans_follow_the_demands),
        cmocka_unit_test(test_spans_zero_demands_are_empty),
        cmocka_unit_test(test_spans_one_item),
        cmocka_unit_test(test_spans_keep_white_space_and_nested_items),
        cmocka_unit_test(test_spans_count_must_match),
        cmocka_unit_test(test_spans_give_way_to_copies),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
