/* Tests of evt: every event of the list written and read back with its
 * fields, buffering and the once-a-second flush, the size cap with
 * rotation, write errors that never stop the process, and what the reader
 * refuses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "evt.h"
#include "jsonx.h"
#include "testutil.h"
#include "xalloc.h"

static char *tmp_path(const char *name)
{
    char dir[] = "/tmp/test_evt.XXXXXX";
    assert_non_null(mkdtemp(dir));
    return xasprintf("%s/%s", dir, name);
}

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *len = 0;
        return NULL;
    }
    xbuf b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
        xbuf_append(&b, chunk, n);
    fclose(f);
    *len = b.len;
    return xbuf_take(&b);
}

static void cleanup(char *path)
{
    char *rot = xasprintf("%s.1", path);
    unlink(rot);
    unlink(path);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    rmdir(path);
    free(rot);
    free(path);
}

/* Each line of a file, parsed; returns how many, all valid. */
static size_t parse_all(const char *text, size_t len, evt_record *out, size_t max)
{
    size_t n = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        assert_non_null(nl);
        char err[256];
        assert_true(n < max);
        int rc = evt_parse_line(p, (size_t)(nl - p), &out[n], err, sizeof err);
        if (rc != 0)
            fail_msg("line %zu: %s: %.*s", n, err, (int)(nl - p), p);
        n++;
        p = nl + 1;
    }
    return n;
}

static void every_event_round_trips(void **state)
{
    (void)state;
    char *path = tmp_path("a.jsonl");
    char err[256];
    cJSON *cfg = jsonx_parse("{\"learners\": 2}", 15, err, sizeof err);
    assert_int_equal(evt_init(NULL, &(evt_opts){.path = path, .process = "test_evt", .config = cfg}, err, sizeof err), 0);
    cJSON *list = jsonx_parse("[\"learner0\"]", 12, err, sizeof err);
    evt_fields f = {.learner = "learner1", .label = "g\"1\\", .addr = "127.0.0.1:9",
                    .name = "learner_learn_task", .id = "id-\xff", .sub_id = "s", .items = 7,
                    .status = "failed", .message = "m\n", .reason = "r", .cause = "deadline", .latency_ms = 1.5, .world = 3,
                    .attempts = 2, .after_ms = 90000, .kind = "crash", .count = 1, .master = "http://x",
                    .added = list, .removed = list, .failed = NULL, .error = NULL, .method = "GET",
                    .path = "/p", .http_status = 500, .version = "v", .pid = 1, .config = cfg,
                    .signal = "SIGTERM"};
    for (int i = 0; i < EVT_COUNT; i++)
        evt_emit((evt_id)i, &f);
    evt_close();
    size_t len;
    char *text = slurp(path, &len);
    evt_record r[EVT_COUNT + 1];
    assert_int_equal(parse_all(text, len, r, EVT_COUNT + 1), EVT_COUNT + 1);
    /* the started line first, then the events in order with seq */
    assert_int_equal(r[0].id, EVT_started);
    assert_string_equal(r[0].process, "test_evt");
    assert_int_equal(evt_json(&r[0], EVT_F_config)->type, cJSON_Object);
    for (int i = 0; i < EVT_COUNT; i++) {
        evt_record *x = &r[i + 1];
        assert_int_equal(x->id, i);
        assert_int_equal(x->seq, i + 1);
        assert_string_equal(x->run, r[0].run);
        uint64_t m = evt_mask((evt_id)i);
        if (m & EVF(learner))
            assert_string_equal(evt_str(x, EVT_F_learner), "learner1");
        if (m & EVF(label))
            assert_string_equal(evt_str(x, EVT_F_label), "g\"1\\");
        if (m & EVF(id))
            assert_string_equal(evt_str(x, EVT_F_id), "id-\xef\xbf\xbd"); /* not UTF-8: U+FFFD */
        if (m & EVF(message))
            assert_string_equal(evt_str(x, EVT_F_message), "m\n");
        int64_t v;
        if (m & EVF(after_ms)) {
            assert_true(evt_int(x, EVT_F_after_ms, &v));
            assert_int_equal(v, 90000);
        }
        double d;
        if (m & EVF(latency_ms)) {
            assert_true(evt_dbl(x, EVT_F_latency_ms, &d));
            assert_true(d == 1.5);
        }
        if (m & EVF(error))
            assert_null(evt_str(x, EVT_F_error)); /* null when unknown */
        if (m & EVF(added))
            assert_string_equal(cJSON_GetArrayItem(evt_json(x, EVT_F_added), 0)->valuestring, "learner0");
        /* only the event's own fields */
        if (!(m & EVF(reason)))
            assert_null(cJSON_GetObjectItemCaseSensitive(x->tree, "reason"));
        evt_record_free(x);
    }
    evt_record_free(&r[0]);
    free(text);
    cJSON_Delete(cfg);
    cJSON_Delete(list);
    cleanup(path);
}

static void lines_are_buffered_and_flushed_within_a_second(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    char *path = tmp_path("b.jsonl");
    char err[256];
    assert_int_equal(evt_init(loop, &(evt_opts){.path = path, .process = "t"}, err, sizeof err), 0);
    EVT_EMIT(learner_left, .learner = "learner0", .reason = "gone", .world = 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_size, 0); /* buffered */
    tu_run_for(loop, 1200);
    assert_int_equal(stat(path, &st), 0);
    assert_true(st.st_size > 0);
    size_t len;
    char *text = slurp(path, &len);
    evt_record r[2];
    assert_int_equal(parse_all(text, len, r, 2), 2);
    assert_int_equal(r[1].id, EVT_learner_left);
    assert_string_equal(evt_str(&r[1], EVT_F_reason), "gone");
    evt_record_free(&r[0]);
    evt_record_free(&r[1]);
    free(text);
    evt_close();
    ev_loop_free(loop);
    cleanup(path);
}

/* 2000 lines into a 16 KiB cap, written at once (loop NULL) or buffered
 * in batches up to 64 KiB (a loop): FILE and FILE.1 hold at most the cap,
 * rotated more than twice, the newest lines whole, seq running on from
 * FILE.1 into FILE. */
static void check_cap(ev_loop *loop, const char *name)
{
    char *path = tmp_path(name);
    char err[256];
    size_t cap = 16 * 1024;
    assert_int_equal(evt_init(loop, &(evt_opts){.path = path, .process = "t", .max_bytes = cap}, err, sizeof err), 0);
    for (int i = 0; i < 2000; i++)
        EVT_EMIT(task_received, .name = "learner_learn_task", .id = "0123456789abcdef", .items = i);
    evt_stats st = evt_get_stats();
    evt_close();
    assert_int_equal(st.lines, 2001);
    assert_true(st.rotations > 2);
    size_t a, b;
    char *cur = slurp(path, &a);
    char *rot = xasprintf("%s.1", path);
    char *old = slurp(rot, &b);
    assert_true(a + b <= cap);
    assert_true(a > 0 && b > 0 && cur[a - 1] == '\n' && old[b - 1] == '\n');
    assert_non_null(strstr(cur, "\"items\": 1999}"));
    evt_record last, first;
    char *lastnl = old + b - 1;
    char *ls = lastnl;
    while (ls > old && ls[-1] != '\n')
        ls--;
    assert_int_equal(evt_parse_line(ls, (size_t)(lastnl - ls), &last, err, sizeof err), 0);
    assert_int_equal(evt_parse_line(cur, (size_t)(strchr(cur, '\n') - cur), &first, err, sizeof err), 0);
    assert_int_equal(first.seq, last.seq + 1);
    evt_record_free(&last);
    evt_record_free(&first);
    free(cur);
    free(old);
    free(rot);
    cleanup(path);
}

static void the_file_is_capped_with_one_rotation(void **state)
{
    (void)state;
    check_cap(NULL, "c.jsonl");
}

/* A buffered batch is split at line ends so that neither file passes half
 * the cap. */
static void buffered_batches_keep_the_cap(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    check_cap(loop, "d.jsonl");
    ev_loop_free(loop);
}

static void a_write_error_is_counted_and_never_stops(void **state)
{
    (void)state;
    char err[256];
    if (access("/dev/full", W_OK) != 0)
        skip();
    assert_int_equal(evt_init(NULL, &(evt_opts){.path = "/dev/full", .process = "t"}, err, sizeof err), 0);
    for (int i = 0; i < 10; i++)
        EVT_EMIT(shutdown, .signal = NULL, .reason = "x");
    evt_stats st = evt_get_stats();
    assert_int_equal(st.lines, 11);
    assert_int_equal(st.write_errors, 11);
    evt_close();
}

static void an_unopenable_file_is_a_clear_error(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(evt_init(NULL, &(evt_opts){.path = "/nonexistent-dir/e.jsonl", .process = "t"}, err, sizeof err), -1);
    assert_non_null(strstr(err, "/nonexistent-dir/e.jsonl"));
    assert_false(evt_enabled());
    EVT_EMIT(shutdown, .reason = "no-op");
}

static void assert_refused(const char *line, const char *want)
{
    evt_record r;
    char err[256];
    assert_int_equal(evt_parse_line(line, strlen(line), &r, err, sizeof err), -1);
    if (!strstr(err, want))
        fail_msg("for %s: got \"%s\", wanted \"%s\"", line, err, want);
}

static void the_reader_refuses_what_it_cannot_trust(void **state)
{
    (void)state;
    assert_refused("{\"event\": \"shutdown\", \"v\": 1, \"t_ms\": 3, \"sig", "not JSON");
    assert_refused("[1]", "a JSON object, not a list");
    assert_refused("{\"v\": 1, \"t_ms\": 1}", "no \"event\"");
    assert_refused("{\"event\": \"shutdown\", \"v\": 2, \"t_ms\": 1, \"signal\": null, \"reason\": null}",
                   "schema version 2 is newer than this program's 1");
    assert_refused("{\"event\": \"shutdwn\", \"v\": 1, \"t_ms\": 1}", "unknown event \"shutdwn\"");
    assert_refused("{\"event\": \"shutdown\", \"v\": 1, \"t_ms\": 1, \"signal\": null}", "missing field \"reason\"");
    assert_refused("{\"event\": \"learner_left\", \"v\": 1, \"t_ms\": 1, \"learner\": \"a\", \"addr\": null, "
                   "\"reason\": null, \"cause\": null, \"world\": \"2\"}",
                   "field \"world\" should be an integer, not a string");
    assert_refused("{\"event\": \"shutdown\", \"v\": 1, \"signal\": null, \"reason\": null}", "no \"t_ms\"");
    assert_refused("{\"event\": \"learner_left\", \"v\": 1, \"t_ms\": 1, \"learner\": \"a\", \"addr\": null, "
                   "\"reason\": null, \"cause\": \"gremlins\", \"world\": 2}",
                   "cause \"gremlins\" is not a word of the list");
    /* extra fields are fine */
    const char *ok = "{\"event\": \"shutdown\", \"v\": 1, \"t_ms\": 1, \"signal\": null, \"reason\": \"x\", \"new\": 1}";
    evt_record r;
    char err[256];
    assert_int_equal(evt_parse_line(ok, strlen(ok), &r, err, sizeof err), 0);
    assert_string_equal(evt_str(&r, EVT_F_reason), "x");
    assert_string_equal(r.process, "");
    evt_record_free(&r);
}

static void names_and_fields_are_one_list(void **state)
{
    (void)state;
    for (int i = 0; i < EVT_COUNT; i++) {
        assert_int_equal(evt_lookup(evt_name((evt_id)i)), i);
        assert_true(strlen(evt_doc((evt_id)i)) > 10);
        assert_true(evt_mask((evt_id)i) < (UINT64_C(1) << EVT_FIELD_COUNT));
    }
    assert_int_equal(evt_lookup("nope"), -1);
    for (int c = 0; c < EVT_CAUSE_COUNT; c++)
        assert_int_equal(evt_cause_lookup(evt_cause_name((evt_cause)c)), c);
    assert_string_equal(evt_cause_name(EVT_CAUSE_COUNT), "other");
    assert_string_equal(evt_field_name(EVT_F_world), "world");
    assert_int_equal(evt_field_type(EVT_F_world), EVT_INT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(every_event_round_trips),
        cmocka_unit_test(lines_are_buffered_and_flushed_within_a_second),
        cmocka_unit_test(the_file_is_capped_with_one_rotation),
        cmocka_unit_test(buffered_batches_keep_the_cap),
        cmocka_unit_test(a_write_error_is_counted_and_never_stops),
        cmocka_unit_test(an_unopenable_file_is_a_clear_error),
        cmocka_unit_test(the_reader_refuses_what_it_cannot_trust),
        cmocka_unit_test(names_and_fields_are_one_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
