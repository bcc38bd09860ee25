/* Unit tests of interaction/jsonx: exact numbers, strict parsing with
 * located errors, shallow parsing, array item spans, accessors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "jsonx.h"
#include "xalloc.h"

/* ---- helpers ---- */

static cJSON *parse_ok(const char *text)
{
    char err[256];
    cJSON *j = jsonx_parse(text, strlen(text), err, sizeof err);
    if (!j)
        fail_msg("parse of %s failed: %s", text, err);
    return j;
}

/* Parses `in` and checks its compact printing is `out`. */
static void assert_prints(const char *in, const char *out)
{
    cJSON *j = parse_ok(in);
    char *s = jsonx_print(j);
    assert_string_equal(s, out);
    free(s);
    cJSON_Delete(j);
}

/* Checks that jsonx_parse refuses in[0..len) with exactly `msg`. */
static void assert_rejected_n(const char *in, size_t len, const char *msg)
{
    char err[256] = "unset";
    cJSON *j = jsonx_parse(in, len, err, sizeof err);
    if (j) {
        cJSON_Delete(j);
        fail_msg("parse of %s should fail with: %s", in, msg);
    }
    assert_string_equal(err, msg);
}

static void assert_rejected(const char *in, const char *msg)
{
    assert_rejected_n(in, strlen(in), msg);
}

/* n nested arrays: "[[[...]]]". */
static char *nested_arrays(size_t n)
{
    char *s = xmalloc(2 * n + 1);
    memset(s, '[', n);
    memset(s + n, ']', n);
    s[2 * n] = '\0';
    return s;
}

/* Collects jsonx_array_items spans. */
typedef struct {
    char *items[16];
    size_t n;
    size_t stop_at; /* refuse this index (0: never) */
} spans;

static bool collect(void *data, size_t index, const char *item, size_t len)
{
    spans *s = data;
    if (s->stop_at && index == s->stop_at)
        return false;
    assert_int_equal(index, s->n);
    assert_true(s->n < 16);
    s->items[s->n++] = xstrndup(item, len);
    return true;
}

static void spans_free(spans *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->items[i]);
    s->n = 0;
}

/* ---- numbers ---- */

static void test_big_integers_print_exactly(void **state)
{
    (void)state;
    assert_prints("9007199254740993", "9007199254740993"); /* 2^53 + 1 */
    assert_prints("-9223372036854775808", "-9223372036854775808");
    assert_prints("18446744073709551616123", "18446744073709551616123");
    assert_prints("1e400", "1e400");
    assert_prints("[9007199254740993, -9223372036854775808]",
                  "[9007199254740993,-9223372036854775808]");
}

static void test_million_round_trips_without_exponent(void **state)
{
    (void)state;
    assert_prints("1000000", "1000000");
    assert_prints("{\"batch_size\": 1000000}", "{\"batch_size\":1000000}");
}

static void test_number_tokens_kept_verbatim(void **state)
{
    (void)state;
    assert_prints("[0.1, -0, -0.0, 1E+2, 1.5e-7, 0.30000000000000004, 2.50]",
                  "[0.1,-0,-0.0,1E+2,1.5e-7,0.30000000000000004,2.50]");
}

static void test_numbers_are_raw_items(void **state)
{
    (void)state;
    cJSON *j = parse_ok("12");
    assert_true(cJSON_IsRaw(j));
    assert_string_equal(j->valuestring, "12");
    assert_true(jsonx_is_number(j));
    assert_string_equal(jsonx_type_name(j), "number");
    cJSON_Delete(j);
}

static void test_get_i64_reads_integers_exactly(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int64_t want;
    } ok[] = {
        {"9007199254740993", 9007199254740993LL},
        {"-9223372036854775808", INT64_MIN},
        {"9223372036854775807", INT64_MAX},
        {"-0", 0},
        {"0", 0},
        {"42", 42},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cJSON *j = parse_ok(ok[i].text);
        int64_t v = 1;
        assert_true(jsonx_get_i64(j, &v));
        assert_true(v == ok[i].want);
        cJSON_Delete(j);
    }
}

static void test_get_i64_refuses_non_integers_and_out_of_range(void **state)
{
    (void)state;
    static const char *const bad[] = {"9223372036854775808", "-9223372036854775809",
                                      "1.0", "1e3", "1E3", "\"1\"", "true", "null", "[1]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *j = parse_ok(bad[i]);
        int64_t v = 7;
        assert_false(jsonx_get_i64(j, &v));
        assert_true(v == 7);
        cJSON_Delete(j);
    }
    assert_false(jsonx_get_i64(NULL, &(int64_t){0}));
}

static void test_get_i64_reads_cjson_numbers(void **state)
{
    (void)state;
    cJSON *n = cJSON_CreateNumber(42);
    int64_t v = 0;
    assert_true(jsonx_get_i64(n, &v));
    assert_true(v == 42);
    cJSON_Delete(n);
    n = cJSON_CreateNumber(1.5);
    assert_false(jsonx_get_i64(n, &v));
    cJSON_Delete(n);
    n = cJSON_CreateNumber(1e19);
    assert_false(jsonx_get_i64(n, &v));
    cJSON_Delete(n);
}

static void test_get_double_reads_any_number(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        double want;
    } ok[] = {{"0.1", 0.1}, {"-2.5e3", -2500.0}, {"7", 7.0}, {"1e-400", 0.0},
              {"9007199254740993", 9007199254740992.0}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cJSON *j = parse_ok(ok[i].text);
        double d = -1;
        assert_true(jsonx_get_double(j, &d));
        assert_true(d == ok[i].want);
        cJSON_Delete(j);
    }
    cJSON *j = parse_ok("1e400");
    double d = 3;
    assert_false(jsonx_get_double(j, &d)); /* no double holds it */
    cJSON_Delete(j);
    j = parse_ok("\"0.5\"");
    assert_false(jsonx_get_double(j, &d));
    cJSON_Delete(j);
    cJSON *n = cJSON_CreateNumber(0.25);
    assert_true(jsonx_get_double(n, &d));
    assert_true(d == 0.25);
    cJSON_Delete(n);
}

static void test_is_number_only_for_number_tokens(void **state)
{
    (void)state;
    cJSON *raw = cJSON_CreateRaw("[1]");
    assert_false(jsonx_is_number(raw));
    cJSON_Delete(raw);
    raw = cJSON_CreateRaw("01");
    assert_false(jsonx_is_number(raw));
    cJSON_Delete(raw);
    cJSON *s = cJSON_CreateString("1");
    assert_false(jsonx_is_number(s));
    cJSON_Delete(s);
    assert_false(jsonx_is_number(NULL));
}

static void assert_double_prints(double v, const char *want)
{
    cJSON *j = jsonx_new_double(v);
    char *s = jsonx_print(j);
    assert_string_equal(s, want);
    free(s);
    cJSON_Delete(j);
}

static void test_new_double_is_shortest_round_trip_and_a_float(void **state)
{
    (void)state;
    assert_double_prints(0.1, "0.1");
    assert_double_prints(0.1 + 0.2, "0.30000000000000004");
    assert_double_prints(3.0, "3.0");
    assert_double_prints(-0.0, "-0.0");
    assert_double_prints(1e21, "1e+21");
    assert_double_prints(1.0 / 3.0, "0.3333333333333333");
    assert_double_prints(5e-324, "4.94065645841247e-324"); /* 15 digits suffice */
}

static void test_new_double_round_trips_through_the_parser(void **state)
{
    (void)state;
    static const double values[] = {0.1,    1.0 / 3.0, 2.0 / 3.0, 1e300, -1e-300, 5e-324,
                                    123456789012345678.0, 0.7,  1.7976931348623157e308};
    for (size_t i = 0; i < sizeof values / sizeof values[0]; i++) {
        cJSON *j = jsonx_new_double(values[i]);
        char *s = jsonx_print(j);
        cJSON *back = parse_ok(s);
        double d = 0;
        assert_true(jsonx_get_double(back, &d));
        assert_true(d == values[i]);
        free(s);
        cJSON_Delete(j);
        cJSON_Delete(back);
    }
}

static void test_new_double_non_finite_is_null(void **state)
{
    (void)state;
    assert_double_prints(1.0 / 0.0, "null");
    assert_double_prints(-1.0 / 0.0, "null");
    assert_double_prints(0.0 / 0.0, "null");
}

static void test_new_i64_prints_exactly(void **state)
{
    (void)state;
    static const struct {
        int64_t v;
        const char *want;
    } cases[] = {{INT64_MIN, "-9223372036854775808"},
                 {INT64_MAX, "9223372036854775807"},
                 {0, "0"},
                 {1000000, "1000000"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *j = jsonx_new_i64(cases[i].v);
        char *s = jsonx_print(j);
        assert_string_equal(s, cases[i].want);
        int64_t back = 1;
        assert_true(jsonx_get_i64(j, &back));
        assert_true(back == cases[i].v);
        free(s);
        cJSON_Delete(j);
    }
}

/* ---- strings ---- */

static void assert_decodes(const char *in, const char *want)
{
    cJSON *j = parse_ok(in);
    assert_true(cJSON_IsString(j));
    assert_string_equal(j->valuestring, want);
    cJSON_Delete(j);
}

static void test_escapes_decode(void **state)
{
    (void)state;
    assert_decodes("\"a\\\"b\\\\c\\/d\\be\\ff\\ng\\rh\\ti\"", "a\"b\\c/d\be\ff\ng\rh\ti");
    assert_decodes("\"\"", "");
    assert_decodes("\"\\u0041\\u00e9\\u00E9\"", "A\xc3\xa9\xc3\xa9");
    assert_decodes("\"\\u20ac\"", "\xe2\x82\xac");
}

static void test_surrogate_pairs_decode_to_four_bytes(void **state)
{
    (void)state;
    assert_decodes("\"\\ud83d\\ude00\"", "\xf0\x9f\x98\x80");
    assert_decodes("\"\\uD834\\uDD1E!\"", "\xf0\x9d\x84\x9e!");
}

static void test_lone_surrogates_become_wtf8(void **state)
{
    (void)state;
    assert_decodes("\"\\ud800\"", "\xed\xa0\x80");
    assert_decodes("\"\\udc00x\"", "\xed\xb0\x80x");
    assert_decodes("\"\\ud800\\u0041\"", "\xed\xa0\x80" "A");
    assert_decodes("\"\\ud800\\ud800\\udc00\"", "\xed\xa0\x80\xf0\x90\x80\x80");
}

static void test_utf8_bytes_pass_through(void **state)
{
    (void)state;
    assert_decodes("\"caf\xc3\xa9 \xf0\x9f\x98\x80\"", "caf\xc3\xa9 \xf0\x9f\x98\x80");
    assert_decodes("\"\xff\xfe\"", "\xff\xfe"); /* not checked as UTF-8 */
}

static void test_strings_print_back_escaped(void **state)
{
    (void)state;
    assert_prints("\"a\\nb\\\"c\\u0001\"", "\"a\\nb\\\"c\\u0001\"");
    assert_prints("\"\\u00e9\"", "\"\xc3\xa9\"");
    assert_prints("\"\\/\"", "\"/\"");
}

/* ---- objects ---- */

static void test_key_order_is_kept(void **state)
{
    (void)state;
    assert_prints("{\"z\": 1, \"a\": 2, \"m\": {\"y\": 3, \"b\": 4}}",
                  "{\"z\":1,\"a\":2,\"m\":{\"y\":3,\"b\":4}}");
}

static void test_duplicate_keys_kept_and_get_returns_first(void **state)
{
    (void)state;
    cJSON *j = parse_ok("{\"a\": 1, \"a\": 2}");
    char *s = jsonx_print(j);
    assert_string_equal(s, "{\"a\":1,\"a\":2}");
    free(s);
    assert_string_equal(jsonx_get(j, "a")->valuestring, "1");
    cJSON_Delete(j);
}

static void test_get_is_case_sensitive(void **state)
{
    (void)state;
    cJSON *j = parse_ok("{\"Key\": 1, \"key\": \"v\", \"\": true}");
    assert_string_equal(jsonx_get(j, "key")->valuestring, "v");
    assert_string_equal(jsonx_get(j, "Key")->valuestring, "1");
    assert_null(jsonx_get(j, "KEY"));
    assert_true(cJSON_IsTrue(jsonx_get(j, "")));
    assert_string_equal(jsonx_get_str(j, "key"), "v");
    assert_null(jsonx_get_str(j, "Key")); /* a number */
    assert_null(jsonx_get_str(j, "nope"));
    assert_null(jsonx_get(NULL, "key"));
    cJSON *arr = parse_ok("[1]");
    assert_null(jsonx_get(arr, "key"));
    cJSON_Delete(arr);
    cJSON_Delete(j);
}

static void test_empty_key_and_empty_string_parse(void **state)
{
    (void)state;
    assert_prints("{\"\": \"\"}", "{\"\":\"\"}");
    assert_prints(" [ ] ", "[]");
    assert_prints("{ }", "{}");
    assert_prints("[true, false, null]", "[true,false,null]");
}

/* ---- rejections ---- */

static const struct {
    const char *in;
    const char *msg;
} rejections[] = {
    {"", "unexpected end of input (expected a value) at byte 0"},
    {"   ", "unexpected end of input (expected a value) at byte 3"},
    {"[1,2,]", "trailing comma before ']' at byte 5"},
    {"{\"a\": 1,}", "trailing comma before '}' at byte 8"},
    {"01", "leading zero in number at byte 0"},
    {"[-012]", "leading zero in number at byte 1"},
    {"NaN", "NaN and Infinity are not valid JSON at byte 0"},
    {"[Infinity]", "NaN and Infinity are not valid JSON at byte 1"},
    {"-Infinity", "NaN and Infinity are not valid JSON at byte 0"},
    {"1 2", "unexpected data after the JSON value at byte 2"},
    {"{} x", "unexpected data after the JSON value at byte 3"},
    {"\"a\tb\"", "unescaped control character 0x09 in string at byte 2"},
    {"\"a\nb\"", "unescaped control character 0x0a in string at byte 2"},
    {"\"abc", "unterminated string at byte 0"},
    {"\"abc\\", "unterminated string at byte 4"},
    {"\"\\x\"", "invalid escape '\\' followed by 'x' in string at byte 1"},
    {"\"\\u12G4\"", "invalid \\u escape in string (expected 4 hex digits) at byte 1"},
    {"\"\\u12\"", "invalid \\u escape in string (expected 4 hex digits) at byte 1"},
    {"\"x\\u0000\"", "\\u0000 in a string is not supported at byte 2"},
    {"[1 2]", "unexpected '2' (expected ',' or ']' after an array item) at byte 3"},
    {"[1", "unexpected end of input (expected ',' or ']' after an array item) at byte 2"},
    {"[", "unexpected end of input (expected a value) at byte 1"},
    {"{\"a\" 1}", "unexpected '1' (expected ':' after an object key) at byte 5"},
    {"{1: 2}", "unexpected '1' (expected a string key) at byte 1"},
    {"{\"a\": 1 \"b\": 2}",
     "unexpected '\"' (expected ',' or '}' after an object member) at byte 8"},
    {"{\"a\": }", "unexpected '}' (expected a value) at byte 6"},
    {"1.", "unexpected end of input (expected a digit after '.' in number) at byte 2"},
    {"1.e5", "unexpected 'e' (expected a digit after '.' in number) at byte 2"},
    {"1e", "unexpected end of input (expected a digit in the exponent of a number) at byte 2"},
    {"1e+", "unexpected end of input (expected a digit in the exponent of a number) at byte 3"},
    {"-", "unexpected end of input (expected a digit in number) at byte 1"},
    {"-a", "unexpected 'a' (expected a digit in number) at byte 1"},
    {".5", "unexpected '.' (expected a value) at byte 0"},
    {"+1", "unexpected '+' (expected a value) at byte 0"},
    {"tru", "invalid literal (expected true) at byte 0"},
    {"[nul]", "invalid literal (expected null) at byte 1"},
    {"True", "unexpected 'T' (expected a value) at byte 0"},
    {"'a'", "unexpected ''' (expected a value) at byte 0"},
    {"\xef\xbb\xbf{}", "unexpected byte 0xef (expected a value) at byte 0"},
    {"[1,,2]", "unexpected ',' (expected a value) at byte 3"},
    {"\f1", "unexpected byte 0x0c (expected a value) at byte 0"},
};

static void test_rejections_say_what_and_where(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rejections / sizeof rejections[0]; i++)
        assert_rejected(rejections[i].in, rejections[i].msg);
}

static void test_rejects_bytes_after_embedded_nul(void **state)
{
    (void)state;
    assert_rejected_n("1\0", 2, "unexpected data after the JSON value at byte 1");
    assert_rejected_n("\"a\0\"", 4, "unescaped control character 0x00 in string at byte 2");
}

static void test_rejection_without_err_buffer(void **state)
{
    (void)state;
    assert_null(jsonx_parse("[1,]", 4, NULL, 0));
    assert_null(jsonx_parse(NULL, 0, NULL, 0));
    char err[8];
    assert_null(jsonx_parse("[1,]", 4, err, sizeof err)); /* truncated, terminated */
    assert_true(strlen(err) < sizeof err);
}

/* The validating scanner (shallow parse, array items) reports what the
 * tree builder reports. */
static void test_validator_reports_like_the_parser(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof rejections / sizeof rejections[0]; i++) {
        char *wrapped = xasprintf("[%s]", rejections[i].in);
        size_t len = strlen(wrapped);
        char e1[256], e2[256], e3[256];
        cJSON *a = jsonx_parse(wrapped, len, e1, sizeof e1);
        cJSON *b = jsonx_parse_shallow(wrapped, len, 0, e2, sizeof e2);
        long n = jsonx_array_items(wrapped, len, NULL, NULL, e3, sizeof e3);
        if (a) { /* "1 2" wrapped is "[1 2]": both reject, not always */
            cJSON_Delete(a);
            assert_non_null(b);
            cJSON_Delete(b);
            assert_true(n >= 0);
        } else {
            assert_null(b);
            assert_int_equal(n, -1);
            assert_string_equal(e1, e2);
            assert_string_equal(e1, e3);
        }
        free(wrapped);
    }
}

/* ---- depth ---- */

static void test_depth_limit_in_every_path(void **state)
{
    (void)state;
    char err[256];
    char *ok = nested_arrays(JSONX_MAX_DEPTH);
    char *deep = nested_arrays(JSONX_MAX_DEPTH + 1);
    const char *msg = "nesting deeper than 512 levels at byte 512";

    cJSON *j = jsonx_parse(ok, strlen(ok), err, sizeof err);
    assert_non_null(j);
    cJSON_Delete(j);
    assert_rejected(deep, msg);

    j = jsonx_parse_shallow(ok, strlen(ok), 3, err, sizeof err);
    assert_non_null(j);
    cJSON_Delete(j);
    assert_null(jsonx_parse_shallow(deep, strlen(deep), 3, err, sizeof err));
    assert_string_equal(err, msg);

    assert_int_equal(jsonx_array_items(ok, strlen(ok), NULL, NULL, err, sizeof err), 1);
    assert_int_equal(jsonx_array_items(deep, strlen(deep), NULL, NULL, err, sizeof err), -1);
    assert_string_equal(err, msg);
    free(ok);
    free(deep);
}

static void test_depth_limit_counts_objects(void **state)
{
    (void)state;
    xbuf b = {0};
    for (int i = 0; i < JSONX_MAX_DEPTH; i++)
        xbuf_puts(&b, "{\"k\":");
    xbuf_puts(&b, "1");
    for (int i = 0; i < JSONX_MAX_DEPTH; i++)
        xbuf_puts(&b, "}");
    char err[256];
    cJSON *j = jsonx_parse(b.data, b.len, err, sizeof err);
    assert_non_null(j);
    cJSON_Delete(j);
    char *deeper = xasprintf("[%s]", b.data);
    assert_rejected(deeper, "nesting deeper than 512 levels at byte 2556");
    free(deeper);
    xbuf_free(&b);
}

/* ---- shallow ---- */

static const char learn_body[] =
    "{\"task\": {\"id\": \"t\"}, \"data\": {\"name\": \"learner_learn_task\", "
    "\"data\": [ {\"a\": [1, 2]} , \"s\\u00e9\" , 1e400, true, null ]}}";

static void test_shallow_keeps_deep_values_as_exact_text(void **state)
{
    (void)state;
    char err[256];
    cJSON *j = jsonx_parse_shallow(learn_body, strlen(learn_body), 2, err, sizeof err);
    assert_non_null(j);
    const cJSON *data = jsonx_get(j, "data");
    assert_string_equal(jsonx_get_str(data, "name"), "learner_learn_task");
    assert_string_equal(jsonx_get_str(jsonx_get(j, "task"), "id"), "t");
    const cJSON *items = jsonx_get(data, "data");
    assert_true(cJSON_IsArray(items));
    static const char *const texts[] = {"{\"a\": [1, 2]}", "\"s\\u00e9\"", "1e400", "true",
                                        "null"};
    static const char *const types[] = {"object", "string", "number", "bool", "null"};
    size_t i = 0;
    for (const cJSON *c = items->child; c; c = c->next, i++) {
        assert_true(cJSON_IsRaw(c));
        assert_string_equal(c->valuestring, texts[i]);
        assert_string_equal(jsonx_type_name(c), types[i]);
    }
    assert_int_equal(i, 5);
    char *s = jsonx_print(items);
    assert_string_equal(s, "[{\"a\": [1, 2]},\"s\\u00e9\",1e400,true,null]");
    free(s);
    cJSON_Delete(j);
}

static void test_shallow_raw_array_at_depth(void **state)
{
    (void)state;
    char err[256];
    cJSON *j = jsonx_parse_shallow(learn_body, strlen(learn_body), 1, err, sizeof err);
    assert_non_null(j);
    const cJSON *items = jsonx_get(jsonx_get(j, "data"), "data");
    assert_true(cJSON_IsRaw(items));
    assert_string_equal(items->valuestring,
                        "[ {\"a\": [1, 2]} , \"s\\u00e9\" , 1e400, true, null ]");
    assert_string_equal(jsonx_type_name(items), "list");
    cJSON_Delete(j);

    j = jsonx_parse_shallow(learn_body, strlen(learn_body), 0, err, sizeof err);
    assert_true(cJSON_IsRaw(jsonx_get(j, "data")));
    assert_true(cJSON_IsRaw(jsonx_get(j, "task")));
    cJSON_Delete(j);
}

static void test_shallow_negative_depth_builds_everything(void **state)
{
    (void)state;
    char err[256];
    cJSON *j = jsonx_parse_shallow(learn_body, strlen(learn_body), -1, err, sizeof err);
    const cJSON *items = jsonx_get(jsonx_get(j, "data"), "data");
    assert_true(cJSON_IsObject(items->child));
    assert_true(cJSON_IsString(items->child->next));
    cJSON_Delete(j);
}

static void test_shallow_validates_raw_values(void **state)
{
    (void)state;
    char err[256];
    const char *bad = "{\"a\": [1, {\"b\": 01}]}";
    assert_null(jsonx_parse_shallow(bad, strlen(bad), 0, err, sizeof err));
    assert_string_equal(err, "leading zero in number at byte 16");
    bad = "{\"a\": [1, 2,]} ";
    assert_null(jsonx_parse_shallow(bad, strlen(bad), 0, err, sizeof err));
    assert_string_equal(err, "trailing comma before ']' at byte 12");
    bad = "{\"a\": [1]} x";
    assert_null(jsonx_parse_shallow(bad, strlen(bad), 0, err, sizeof err));
    assert_string_equal(err, "unexpected data after the JSON value at byte 11");
}

/* ---- refs ---- */

static void test_refs_point_into_the_text(void **state)
{
    (void)state;
    char err[256];
    cJSON *j = jsonx_parse_refs(learn_body, strlen(learn_body), 2, err, sizeof err);
    assert_non_null(j);
    const cJSON *data = jsonx_get(j, "data");
    assert_string_equal(jsonx_get_str(data, "name"), "learner_learn_task");
    assert_string_equal(jsonx_get_str(jsonx_get(j, "task"), "id"), "t");
    const cJSON *items = jsonx_get(data, "data");
    assert_true(cJSON_IsArray(items));
    static const char *const texts[] = {"{\"a\": [1, 2]}", "\"s\\u00e9\"", "1e400", "true", "null"};
    size_t i = 0;
    for (const cJSON *c = items->child; c; c = c->next, i++) {
        size_t off, len;
        assert_true(cJSON_IsRaw(c));
        assert_null(c->valuestring); /* not copied */
        assert_true(jsonx_ref(c, &off, &len));
        assert_int_equal(len, strlen(texts[i]));
        assert_memory_equal(learn_body + off, texts[i], len);
    }
    assert_int_equal(i, 5);
    assert_false(jsonx_ref(data, &(size_t){0}, &(size_t){0}));
    assert_false(jsonx_ref(NULL, &(size_t){0}, &(size_t){0}));

    /* Resolved, the tree is the shallow parser's. */
    jsonx_unref(j, learn_body);
    cJSON *sh = jsonx_parse_shallow(learn_body, strlen(learn_body), 2, err, sizeof err);
    char *a = jsonx_print(j), *b = jsonx_print(sh);
    assert_string_equal(a, b);
    assert_false(jsonx_ref(items->child, &(size_t){0}, &(size_t){0}));
    free(a);
    free(b);
    cJSON_Delete(sh);
    cJSON_Delete(j);
}

static void test_refs_only_for_array_items(void **state)
{
    (void)state;
    char err[256];
    const char *t = "{\"a\": {\"b\": {\"c\": 1}}, \"l\": [[1], {\"x\": [2]}], \"e\": []}";
    cJSON *j = jsonx_parse_refs(t, strlen(t), 1, err, sizeof err);
    assert_non_null(j);
    const cJSON *b = jsonx_get(jsonx_get(j, "a"), "b");
    size_t off, len;
    assert_false(jsonx_ref(b, &off, &len)); /* a member: its own text */
    assert_string_equal(b->valuestring, "{\"c\": 1}");
    const cJSON *l = jsonx_get(j, "l");
    assert_true(jsonx_ref(l->child, &off, &len));
    assert_memory_equal(t + off, "[1]", len);
    assert_true(jsonx_ref(l->child->next, &off, &len));
    assert_memory_equal(t + off, "{\"x\": [2]}", len);
    assert_int_equal(cJSON_GetArraySize(jsonx_get(j, "e")), 0);
    cJSON_Delete(j);

    /* Everything is still validated, with the same words. */
    const char *bad = "{\"l\": [1, [2, 03]]}";
    assert_null(jsonx_parse_refs(bad, strlen(bad), 1, err, sizeof err));
    assert_string_equal(err, "leading zero in number at byte 14");
}

/* The fast validator gives up at the end of the buffer wherever that is:
 * every prefix of these texts (an exact-size copy, no NUL after it, so
 * that a sanitizer sees any read past the end) is judged like the tree
 * builder judges it, with the same message. */
static void test_validator_agrees_on_every_prefix(void **state)
{
    (void)state;
    static const char *const texts[] = {
        "[0.123456, -1.5e+10, 12345678901234567890, 0, -0, 1E5, 2e-3, 0.5]",
        "[\"plain text longer than sixteen bytes\", \"tab\\there \\u00e9 \\ud83d\\ude00\", \"\"]",
        "{\"k\": [true, false, null, {\"x\": [[], {}]}], \"\\\"q\": \"\xc3\xa9\xe5\xad\xa6\"}",
        "[1, 2,]", "[01]", "[1.]", "[1e]", "[-]", "[\"a\\u0000\"]", "[\"\\x\"]", "[\"a\nb\"]", "[tru]",
        "{\"a\" 1}", "{\"a\": 1,}", "[1 2]", "[\"\\u12g4\"]",
    };
    for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
        size_t full = strlen(texts[t]);
        for (size_t n = 0; n <= full; n++) {
            char *copy = xmalloc(n ? n : 1);
            memcpy(copy, texts[t], n);
            char e1[256] = "", e2[256] = "";
            cJSON *a = jsonx_parse(copy, n, e1, sizeof e1);
            cJSON *b = jsonx_parse_shallow(copy, n, 0, e2, sizeof e2);
            assert_true((a != NULL) == (b != NULL));
            if (!a)
                assert_string_equal(e1, e2);
            cJSON_Delete(a);
            cJSON_Delete(b);
            free(copy);
        }
    }
}

/* ---- number lists (the 64-byte block path of the fast validator) ---- */

/* text[0..len) checked by the tree builder alone (jsonx_parse, raw_depth
 * -1, never the fast path) and by the fast validator (the shallow parser
 * at raw_depth 0 validates each item of the top array with it, and
 * jsonx_array_items): the same verdict, the same message, the same text. */
static void assert_fast_agrees_n(const char *text, size_t len)
{
    char e1[256] = "", e2[256] = "", e3[256] = "";
    cJSON *a = jsonx_parse(text, len, e1, sizeof e1);
    cJSON *b = jsonx_parse_shallow(text, len, 0, e2, sizeof e2);
    long n = jsonx_array_items(text, len, NULL, NULL, e3, sizeof e3);
    if ((a != NULL) != (b != NULL) || (a != NULL) != (n >= 0))
        fail_msg("tree builder %s, fast validator %s, array items %ld on %.*s (%s | %s | %s)",
                 a ? "accepts" : "rejects", b ? "accepts" : "rejects", n, (int)len, text, e1, e2, e3);
    if (a) {
        /* The shallow tree's items are the exact text: printed back they
         * parse to the same tree, so both ended each item at the same byte. */
        char *pa = jsonx_print(a), *pb = jsonx_print(b);
        cJSON *c = jsonx_parse(pb, strlen(pb), e1, sizeof e1);
        assert_non_null(c);
        char *pc = jsonx_print(c);
        assert_string_equal(pa, pc);
        assert_int_equal(n, cJSON_GetArraySize(a));
        free(pa), free(pb), free(pc);
        cJSON_Delete(c);
    } else {
        assert_string_equal(e1, e2);
        if (strncmp(e1, "unexpected data after", 21) != 0) /* (jsonx_array_items says "array") */
            assert_string_equal(e1, e3);
    }
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* body as the inner list of "[[<pad>body]<tail>]", for every padding of
 * 0 to 70 numbers "7, " (so that each byte of body falls at each place of
 * a 64-byte block and of an 8-byte word), last in its list or with more
 * numbers after it, with a long tail (the block path runs up to the list's
 * end) and with none (the buffer ends soon after). */
static void assert_list_agrees(const char *body, bool valid)
{
    static const char *const tails[] = {"]", ", [0.5, 0.25, 0.125, 0.0625, 0.03125, 0.015625, 0.0078125, 1]]"};
    /* body last in its list, and body with numbers after it */
    static const char *const more[] = {"", ", 1.5, 22, 333, -4, 0.5, 66, 0, 7e7, 8, 9, 10, 11, 12, 13, 14"};
    for (size_t t = 0; t < 4; t++) {
        for (int pad = 0; pad <= 70; pad++) {
            xbuf b = {0};
            xbuf_puts(&b, "[[");
            for (int i = 0; i < pad; i++)
                xbuf_puts(&b, "7, ");
            xbuf_puts(&b, body);
            xbuf_puts(&b, more[t / 2]);
            xbuf_puts(&b, "]");
            xbuf_puts(&b, tails[t % 2]);
            assert_fast_agrees_n(b.data, b.len);
            char err[256];
            cJSON *j = jsonx_parse(b.data, b.len, err, sizeof err);
            if ((j != NULL) != valid)
                fail_msg("%s should be %s: %s", b.data, valid ? "accepted" : "rejected", err);
            cJSON_Delete(j);
            /* Every end of the buffer inside the body. */
            if (pad % 23 == 0)
                for (size_t n = 2 + 3 * (size_t)pad; n < b.len; n++)
                    assert_fast_agrees_n(b.data, n);
            xbuf_free(&b);
        }
    }
}

static void test_number_list_edges(void **state)
{
    (void)state;
    static const char *const good[] = {
        "0", "-0", "0.5", "-0.5", "10", "100.001", "1e5", "1E5", "1e+5", "1e-5", "1e05", "-1.2e-05",
        "0.12345678901234567", "-0.3503675840329379, 2.9852802772074938e-05", "1,2", "1,  2", "1, 2, 3",
        "12345678, 87654321", "1234567, 7654321", "123456789012345678901234567890123456789012345678901234567890123",
        "0.1234567890123456789012345678901234567890123456789012345678901234567890", "0e0", "-0E-0",
        "1, -2, 3e3, -4.5E+6, 0, 0.0",
    };
    static const char *const bad[] = {
        "-", "1.", "1e", "1e+", "1e-", ".5", "01", "-01", "00", "-00", "0123", "1.2.3", "1e5e5", "1e5.5",
        "1.e5", "1.5e", "--1", "+1", "1-2", "1e+-2", "1e5-3", "1 2", "1,,2", "1, ,2", "1,", "1, ", "1,]",
        "1, \x01", "1,\x01" "2", "1\x7f", "1, 2x", "1.2.", "0x10", "1e5e", "e5", "-e5", "1..2", "1, .5",
        "1, -", "1, 01", "Infinity", "-Infinity", "NaN", "1, NaN", "1, \"a\"x",
    };
    /* Valid, but outside the block path's shape: the scalar loop goes on. */
    static const char *const odd[] = {
        "1 , 2", "1,\t2", "1,\n2", "1,\r\n  2", "1 ,2", "1\n,2", "1, \"a\", 2", "1, [2, 3], 4", "1, {\"a\": 2}, 3",
        "1, true, false, null, 2",
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_list_agrees(good[i], true);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_list_agrees(bad[i], false);
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        assert_list_agrees(odd[i], true);
}

/* Numbers directly before ']' and '}', lists in objects, lists at the depth
 * limit. */
static void test_number_list_closers_and_depth(void **state)
{
    (void)state;
    xbuf b = {0};
    xbuf_puts(&b, "[{\"obs\": [");
    for (int i = 0; i < 100; i++)
        xbuf_printf(&b, "%s0.%06d", i ? ", " : "", i * 7919 % 1000000);
    xbuf_puts(&b, "], \"r\": 1.0}, {\"a\": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, "
                  "21, 22, 23, 24, 25, 26, 27, 28, 29, 30], \"b\": 2}]");
    assert_fast_agrees_n(b.data, b.len);
    long n = jsonx_array_items(b.data, b.len, NULL, NULL, NULL, 0);
    assert_int_equal(n, 2);
    xbuf_free(&b);

    /* A number list in the deepest container allowed, and one level too deep. */
    for (int extra = 0; extra <= 1; extra++) {
        xbuf_puts(&b, "[");
        for (int i = 1; i < JSONX_MAX_DEPTH + extra; i++)
            xbuf_puts(&b, "[");
        for (int i = 0; i < 40; i++)
            xbuf_printf(&b, "%s%d.5", i ? ", " : "", i);
        for (int i = 1; i < JSONX_MAX_DEPTH + extra; i++)
            xbuf_puts(&b, "]");
        xbuf_puts(&b, "]");
        char err[256];
        cJSON *j = jsonx_parse(b.data, b.len, err, sizeof err);
        assert_true((j != NULL) == (extra == 0));
        cJSON_Delete(j);
        assert_fast_agrees_n(b.data, b.len);
        xbuf_free(&b);
    }
}

/* Deterministic random lists over the bytes of numbers and separators,
 * valid ones with a few bytes changed, checked as above. */
static void test_number_list_random(void **state)
{
    (void)state;
    static const char alphabet[] = "0123456789000..eE+--,, ,   ]x\n";
    uint64_t x = 0x9E3779B97F4A7C15u;
#define NEXT() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
    for (int round = 0; round < 6000; round++) {
        xbuf b = {0};
        xbuf_puts(&b, "[[");
        size_t start = b.len;
        if (round % 2) { /* noise */
            size_t n = 50 + NEXT() % 200;
            for (size_t i = 0; i < n; i++)
                xbuf_append(&b, &alphabet[NEXT() % (sizeof alphabet - 1)], 1);
        } else { /* numbers, then a few changes */
            size_t n = 5 + NEXT() % 40;
            for (size_t i = 0; i < n; i++) {
                uint64_t r = NEXT();
                xbuf_printf(&b, "%s%s%llu", i ? (r % 7 ? ", " : ",") : "", r % 3 ? "" : "-",
                            (unsigned long long)(r >> 40) % (r % 5 ? 1000 : 100000000));
                if (r % 4)
                    xbuf_printf(&b, ".%0*llu", (int)(r >> 8 & 15) + 1, (unsigned long long)(r >> 20) % 100000);
                if (r % 9 == 0)
                    xbuf_printf(&b, "e%s%d", r % 2 ? "-" : (r % 3 ? "+" : ""), (int)(r >> 12 & 31));
            }
            for (uint64_t k = NEXT() % 3; k > 0; k--) {
                size_t at = start + NEXT() % (b.len - start);
                b.data[at] = alphabet[NEXT() % (sizeof alphabet - 1)];
            }
        }
        xbuf_puts(&b, "], [1.5, 2.5]");
        if (round % 3)
            xbuf_puts(&b, ", [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]");
        xbuf_puts(&b, "]");
        assert_fast_agrees_n(b.data, b.len);
        xbuf_free(&b);
    }
#undef NEXT
}

/* ---- array items ---- */

static void test_array_items_gives_exact_spans(void **state)
{
    (void)state;
    const char *text = " [ 1 , {\"a\": [2, \"]\"]} , \"q\\\"]\\\\\" ,[[]],\n null, -0.5e3 ] ";
    spans s = {0};
    char err[256];
    long n = jsonx_array_items(text, strlen(text), collect, &s, err, sizeof err);
    assert_int_equal(n, 6);
    assert_string_equal(s.items[0], "1");
    assert_string_equal(s.items[1], "{\"a\": [2, \"]\"]}");
    assert_string_equal(s.items[2], "\"q\\\"]\\\\\"");
    assert_string_equal(s.items[3], "[[]]");
    assert_string_equal(s.items[4], "null");
    assert_string_equal(s.items[5], "-0.5e3");
    spans_free(&s);
}

static void test_array_items_empty_arrays(void **state)
{
    (void)state;
    spans s = {0};
    char err[256];
    assert_int_equal(jsonx_array_items("[]", 2, collect, &s, err, sizeof err), 0);
    assert_int_equal(jsonx_array_items(" \n[ \t]\r\n", 8, collect, &s, err, sizeof err), 0);
    assert_int_equal(s.n, 0);
    assert_int_equal(jsonx_array_items("[[]]", 4, collect, &s, err, sizeof err), 1);
    assert_string_equal(s.items[0], "[]");
    spans_free(&s);
}

static void test_array_items_without_callback_counts(void **state)
{
    (void)state;
    const char *text = "[1, [2, 3], {\"x\": [4]}]";
    assert_int_equal(jsonx_array_items(text, strlen(text), NULL, NULL, NULL, 0), 3);
}

static void test_array_items_rejects_invalid_text(void **state)
{
    (void)state;
    static const struct {
        const char *in;
        const char *msg;
    } cases[] = {
        {"", "unexpected end of input (expected '[' (a JSON array)) at byte 0"},
        {"{}", "unexpected '{' (expected '[' (a JSON array)) at byte 0"},
        {"\"[1]\"", "unexpected '\"' (expected '[' (a JSON array)) at byte 0"},
        {"[1,]", "trailing comma before ']' at byte 3"},
        {"[1] x", "unexpected data after the JSON array at byte 4"},
        {"[1] [2]", "unexpected data after the JSON array at byte 4"},
        {"[1", "unexpected end of input (expected ',' or ']' after an array item) at byte 2"},
        {"[\"a]", "unterminated string at byte 1"},
        {"[{\"a\":1,}]", "trailing comma before '}' at byte 8"},
        {"[{\"a\" 1}]", "unexpected '1' (expected ':' after an object key) at byte 6"},
        {"[[1}]", "unexpected '}' (expected ',' or ']' after an array item) at byte 3"},
        {"[NaN]", "NaN and Infinity are not valid JSON at byte 1"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char err[256] = "unset";
        spans s = {0};
        assert_int_equal(
            jsonx_array_items(cases[i].in, strlen(cases[i].in), collect, &s, err, sizeof err),
            -1);
        assert_string_equal(err, cases[i].msg);
        spans_free(&s);
    }
}

static void test_array_items_stops_when_callback_refuses(void **state)
{
    (void)state;
    spans s = {.stop_at = 1};
    char err[256];
    assert_int_equal(jsonx_array_items("[10, 20, 30]", 12, collect, &s, err, sizeof err), -1);
    assert_string_equal(err, "item 1 refused by the callback at byte 5");
    assert_int_equal(s.n, 1);
    spans_free(&s);
}

static void test_array_items_many_items(void **state)
{
    (void)state;
    xbuf b = {0};
    xbuf_puts(&b, "[");
    for (int i = 0; i < 100000; i++)
        xbuf_printf(&b, "%s{\"obs\": [%d, \"x\\\"]\"], \"r\": %d.5}", i ? "," : "", i, i);
    xbuf_puts(&b, "]");
    assert_int_equal(jsonx_array_items(b.data, b.len, NULL, NULL, NULL, 0), 100000);
    char err[256];
    cJSON *j = jsonx_parse(b.data, b.len, err, sizeof err);
    assert_int_equal(cJSON_GetArraySize(j), 100000);
    cJSON_Delete(j);
    xbuf_free(&b);
}

/* ---- misc ---- */

static void test_type_names(void **state)
{
    (void)state;
    cJSON *j = parse_ok("[null, true, false, 1, \"s\", [], {}]");
    static const char *const want[] = {"null", "bool", "bool", "number", "string", "list",
                                       "object"};
    size_t i = 0;
    for (const cJSON *c = j->child; c; c = c->next)
        assert_string_equal(jsonx_type_name(c), want[i++]);
    assert_string_equal(jsonx_type_name(NULL), "missing");
    cJSON_Delete(j);
}

static void test_print_and_dup(void **state)
{
    (void)state;
    char *s = jsonx_print(NULL);
    assert_string_equal(s, "null");
    free(s);
    cJSON *j = parse_ok("{\"a\": [9007199254740993, \"\\u00e9\"], \"b\": {}}");
    cJSON *d = jsonx_dup(j);
    cJSON_Delete(j);
    cJSON_AddItemToArray(jsonx_get(d, "a"), jsonx_new_i64(5)); /* the copy is a proper list */
    s = jsonx_print(d);
    assert_string_equal(s, "{\"a\":[9007199254740993,\"\xc3\xa9\",5],\"b\":{}}");
    free(s);
    cJSON_Delete(d);
    assert_null(jsonx_dup(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_integers_print_exactly),
        cmocka_unit_test(test_million_round_trips_without_exponent),
        cmocka_unit_test(test_number_tokens_kept_verbatim),
        cmocka_unit_test(test_numbers_are_raw_items),
        cmocka_unit_test(test_get_i64_reads_integers_exactly),
        cmocka_unit_test(test_get_i64_refuses_non_integers_and_out_of_range),
        cmocka_unit_test(test_get_i64_reads_cjson_numbers),
        cmocka_unit_test(test_get_double_reads_any_number),
        cmocka_unit_test(test_is_number_only_for_number_tokens),
        cmocka_unit_test(test_new_double_is_shortest_round_trip_and_a_float),
        cmocka_unit_test(test_new_double_round_trips_through_the_parser),
        cmocka_unit_test(test_new_double_non_finite_is_null),
        cmocka_unit_test(test_new_i64_prints_exactly),
        cmocka_unit_test(test_escapes_decode),
        cmocka_unit_test(test_surrogate_pairs_decode_to_four_bytes),
        cmocka_unit_test(test_lone_surrogates_become_wtf8),
        cmocka_unit_test(test_utf8_bytes_pass_through),
        cmocka_unit_test(test_strings_print_back_escaped),
        cmocka_unit_test(test_key_order_is_kept),
        cmocka_unit_test(test_duplicate_keys_kept_and_get_returns_first),
        cmocka_unit_test(test_get_is_case_sensitive),
        cmocka_unit_test(test_empty_key_and_empty_string_parse),
        cmocka_unit_test(test_rejections_say_what_and_where),
        cmocka_unit_test(test_rejects_bytes_after_embedded_nul),
        cmocka_unit_test(test_rejection_without_err_buffer),
        cmocka_unit_test(test_validator_reports_like_the_parser),
        cmocka_unit_test(test_depth_limit_in_every_path),
        cmocka_unit_test(test_depth_limit_counts_objects),
        cmocka_unit_test(test_shallow_keeps_deep_values_as_exact_text),
        cmocka_unit_test(test_shallow_raw_array_at_depth),
        cmocka_unit_test(test_shallow_negative_depth_builds_everything),
        cmocka_unit_test(test_shallow_validates_raw_values),
        cmocka_unit_test(test_refs_point_into_the_text),
        cmocka_unit_test(test_refs_only_for_array_items),
        cmocka_unit_test(test_validator_agrees_on_every_prefix),
        cmocka_unit_test(test_number_list_edges),
        cmocka_unit_test(test_number_list_closers_and_depth),
        cmocka_unit_test(test_number_list_random),
        cmocka_unit_test(test_array_items_gives_exact_spans),
        cmocka_unit_test(test_array_items_empty_arrays),
        cmocka_unit_test(test_array_items_without_callback_counts),
        cmocka_unit_test(test_array_items_rejects_invalid_text),
        cmocka_unit_test(test_array_items_stops_when_callback_refuses),
        cmocka_unit_test(test_array_items_many_items),
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_print_and_dup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
