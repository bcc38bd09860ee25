/* Unit tests of mock_operator's modules (registry, faults, journal, API
 * handler called directly, without HTTP). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "ilog.h"
#include "jsonx.h"
#include "mo_api.h"
#include "mo_fault.h"
#include "mo_journal.h"
#include "mo_registry.h"

static void addr_pod_name_drops_port_and_last_label(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"learner-0.ns:22271", "learner-0"},
        {"learner-0.ns.svc:22271", "learner-0.ns"},
        {"127.0.0.1:5001", "127.0.0"},
        {"localhost:1", "localhost"},
        {"[::1]:80", "[::1]"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *p = mo_addr_pod_name(cases[i][0]);
        assert_string_equal(p, cases[i][1]);
        free(p);
    }
    int port = 0;
    char *h = mo_addr_host("a.b:22270", &port);
    assert_string_equal(h, "a.b");
    assert_int_equal(port, 22270);
    free(h);
}

static void addr_valid_accepts_host_port_only(void **state)
{
    (void)state;
    char err[256];
    static const char *const good[] = {"a:1", "learner-0.ns:22271", "[::1]:65535", "1.2.3.4:80"};
    static const char *const bad[] = {"",     "a",   ":80",      "a:",     "a:0",
                                      "a:65536", "a:8x", "a b:1",  "a/b:1",  "a,b:1",
                                      "::1:80",  "a:123456"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
        assert_true(mo_addr_valid(good[i], err, sizeof err));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        if (mo_addr_valid(bad[i], err, sizeof err))
            fail_msg("'%s' accepted", bad[i]);
        assert_true(strlen(err) > 0);
    }
}

static void pod_names_use_the_kubernetes_alphabet_and_follow_the_seed(void **state)
{
    (void)state;
    mo_registry *a = mo_registry_new(7), *b = mo_registry_new(7), *c = mo_registry_new(8);
    char *na = mo_registry_pod_name(a, "job-learner");
    char *nb = mo_registry_pod_name(b, "job-learner");
    char *nc = mo_registry_pod_name(c, "job-learner");
    assert_string_equal(na, nb);
    assert_string_not_equal(na, nc);
    assert_int_equal(strlen(na), strlen("job-learner-") + 5);
    for (size_t i = strlen("job-learner-"); na[i]; i++)
        assert_non_null(strchr("bcdfghjklmnpqrstvwxz2456789", na[i]));
    free(na);
    free(nb);
    free(nc);
    mo_registry_free(a);
    mo_registry_free(b);
    mo_registry_free(c);
}

static void registry_entries_keep_order_and_reject_bad_input(void **state)
{
    (void)state;
    char err[256];
    mo_registry *r = mo_registry_new(1);
    assert_null(mo_registry_ensure(r, "", "x", err, sizeof err));
    assert_non_null(strstr(err, "namespace"));
    assert_null(mo_registry_ensure(r, "ns", "a/b", err, sizeof err));
    mo_entry *e = mo_registry_ensure(r, "ns", "agg", err, sizeof err);
    assert_non_null(e);
    assert_ptr_equal(mo_registry_ensure(r, "ns", "agg", err, sizeof err), e);
    assert_int_equal(mo_entry_add(e, MO_LEARNERS, "b:2", err, sizeof err), 1);
    assert_int_equal(mo_entry_add(e, MO_LEARNERS, "a:1", err, sizeof err), 1);
    assert_int_equal(mo_entry_add(e, MO_LEARNERS, "a:1", err, sizeof err), 0);
    assert_int_equal(mo_entry_add(e, MO_LEARNERS, "bad", err, sizeof err), -1);
    assert_int_equal(mo_entry_count(e, MO_LEARNERS), 2);
    assert_string_equal(mo_entry_addr(e, MO_LEARNERS, 0), "b:2");
    assert_int_equal(mo_entry_replace(e, MO_LEARNERS, 0, "c:3", err, sizeof err), 0);
    assert_int_equal(mo_entry_find_addr(e, MO_LEARNERS, "c:3"), 0);
    mo_entry_remove_at(e, MO_LEARNERS, 0);
    assert_string_equal(mo_entry_addr(e, MO_LEARNERS, 0), "a:1");
    assert_int_equal(mo_entry_count(e, MO_COLLECTORS), 0);
    assert_true(mo_registry_remove(r, "ns", "agg"));
    assert_false(mo_registry_remove(r, "ns", "agg"));
    assert_int_equal(mo_registry_count(r), 0);
    mo_registry_free(r);
}

static void failed_records_keep_the_newest(void **state)
{
    (void)state;
    mo_registry *r = mo_registry_new(1);
    for (int i = 0; i < MO_FAILED_MAX + 2; i++)
        mo_registry_record_failed(r, "ns", "agg", MO_LEARNERS, "p", "p.ns:1", NULL, true);
    assert_int_equal(mo_registry_failed_dropped(r), 2);
    cJSON *j = mo_registry_failed_json(r);
    assert_int_equal(cJSON_GetArraySize(j), MO_FAILED_MAX);
    assert_true(cJSON_IsNull(jsonx_get(cJSON_GetArrayItem(j, 0), "replaced_by")));
    cJSON_Delete(j);
    mo_registry_free(r);
}

static cJSON *parse(const char *s)
{
    char err[128];
    cJSON *t = jsonx_parse(s, strlen(s), err, sizeof err);
    assert_non_null(t);
    return t;
}

static void faults_apply_in_order_and_use_up_their_count(void **state)
{
    (void)state;
    char err[256];
    mo_faults *f = mo_faults_new();
    cJSON *s1 = parse("{\"kind\":\"error_status\",\"status\":502,\"count\":1,\"method\":\"POST\"}");
    cJSON *s2 = parse("{\"kind\":\"garbage\",\"count\":2}");
    cJSON *s3 = parse("{\"kind\":\"refuse\"}");
    assert_int_equal(mo_faults_add(f, s1, err, sizeof err), 1);
    assert_int_equal(mo_faults_add(f, s2, err, sizeof err), 2);
    assert_false(mo_faults_refusing(f));
    assert_int_equal(mo_faults_add(f, s3, err, sizeof err), 3);
    assert_true(mo_faults_refusing(f));
    mo_fault_action a;
    mo_faults_take(f, "GET", "/x", &a); /* the POST filter skips fault 1 */
    assert_true(a.applies);
    assert_int_equal(a.kind, MO_FAULT_GARBAGE);
    assert_string_equal(a.body, "<html>not json</html>");
    mo_fault_action_release(&a);
    mo_faults_take(f, "POST", "/x", &a);
    assert_int_equal(a.kind, MO_FAULT_ERROR_STATUS);
    assert_int_equal(a.status, 502);
    mo_fault_action_release(&a);
    mo_faults_take(f, "POST", "/x", &a); /* fault 1 used up: garbage again */
    assert_int_equal(a.kind, MO_FAULT_GARBAGE);
    mo_fault_action_release(&a);
    mo_faults_take(f, "GET", "/x", &a); /* all used up; refuse never applies */
    assert_false(a.applies);
    assert_int_equal(mo_faults_count(f), 1);
    assert_true(mo_faults_remove(f, 3));
    assert_false(mo_faults_refusing(f));
    cJSON_Delete(s1);
    cJSON_Delete(s2);
    cJSON_Delete(s3);
    mo_faults_free(f);
}

static mo_request request(const char *method, const char *path, const char *body)
{
    mo_request q;
    memset(&q, 0, sizeof q);
    q.method = method;
    q.path = path;
    q.body = body ? body : "";
    q.body_len = body ? strlen(body) : 0;
    return q;
}

static void journal_drops_the_oldest_and_shows_bodies_as_json_or_text(void **state)
{
    (void)state;
    mo_journal *j = mo_journal_new(2);
    mo_param p[2] = {{"a", "1"}, {"flag", NULL}};
    mo_request q = request("GET", "/p", "{\"x\": 10000000000000000001}");
    q.params = p;
    q.nparams = 2;
    assert_int_equal(mo_journal_add(j, 5, &q), 1);
    mo_request q2 = request("POST", "/p", "bad \xff body");
    assert_int_equal(mo_journal_add(j, 6, &q2), 2);
    mo_journal_set_answer(j, 2, 400, 7, NULL);
    mo_request q3 = request("DELETE", "/p", NULL);
    assert_int_equal(mo_journal_add(j, 8, &q3), 3);
    mo_journal_set_answer(j, 1, 200, 9, NULL); /* dropped already: ignored */
    assert_int_equal(mo_journal_dropped(j), 1);
    cJSON *all = mo_journal_to_json(j, 0);
    assert_int_equal(cJSON_GetArraySize(all), 2);
    const cJSON *e2 = cJSON_GetArrayItem(all, 0);
    assert_string_equal(jsonx_get_str(e2, "body"), "bad ? body");
    int64_t v = 0;
    assert_true(jsonx_get_i64(jsonx_get(e2, "status"), &v));
    assert_int_equal(v, 400);
    assert_true(cJSON_IsNull(jsonx_get(cJSON_GetArrayItem(all, 1), "body")));
    cJSON_Delete(all);
    cJSON *since = mo_journal_to_json(j, 3);
    assert_int_equal(cJSON_GetArraySize(since), 1);
    cJSON_Delete(since);
    mo_journal_free(j);

    /* Numbers in a JSON body are kept exactly. */
    j = mo_journal_new(4);
    mo_journal_add(j, 1, &q);
    cJSON *one = mo_journal_to_json(j, 0);
    char *text = jsonx_print(jsonx_get(cJSON_GetArrayItem(one, 0), "body"));
    assert_string_equal(text, "{\"x\":10000000000000000001}");
    char *query = jsonx_print(jsonx_get(cJSON_GetArrayItem(one, 0), "query"));
    assert_string_equal(query, "{\"a\":\"1\",\"flag\":null}");
    free(text);
    free(query);
    cJSON_Delete(one);
    mo_journal_free(j);
}

static cJSON *handle(mo_registry *r, const mo_request *q, int status)
{
    mo_reply rep;
    mo_api_handle(r, MO_FAILED_RECREATE, q, &rep);
    assert_int_equal(rep.status, status);
    cJSON *t = parse(rep.body);
    mo_reply_release(&rep);
    return t;
}

static void api_invents_names_from_the_job_of_an_aggregator(void **state)
{
    (void)state;
    char err[256];
    mo_registry *r = mo_registry_new(3);
    assert_non_null(mo_registry_ensure(r, "ns", "job-x-aggregator-abcde", err, sizeof err));
    mo_request q = request("POST", "/v1alpha1/replicas",
                           "{\"NAMESPACE\":\"ns\",\"coordinator\":\"job-x-aggregator-abcde\","
                           "\"learners\":{\"replicas\":1}}");
    cJSON *t = handle(r, &q, 200);
    const char *a = cJSON_GetArrayItem(jsonx_get(jsonx_get(t, "data"), "learners"), 0)->valuestring;
    assert_int_equal(strncmp(a, "job-x-learner-", 14), 0);
    assert_string_equal(a + 19, ".ns:22271");
    cJSON_Delete(t);
    mo_registry_free(r);
}

static void api_answers_with_the_original_messages(void **state)
{
    (void)state;
    mo_registry *r = mo_registry_new(3);
    mo_param p[2] = {{"namespace", "ns"}, {"Coordinator", "c"}};
    mo_request q = request("GET", "/v1alpha1/replicas", NULL);
    q.params = p;
    q.nparams = 2;
    cJSON *t = handle(r, &q, 404);
    assert_string_equal(jsonx_get_str(t, "message"), "pod: ns/c not exists in cache");
    cJSON_Delete(t);
    mo_request d = request("PATCH", "/v1alpha1/replicas", NULL);
    t = handle(r, &d, 501);
    assert_string_equal(jsonx_get_str(t, "message"), "PATCH not implemented");
    cJSON_Delete(t);
    mo_request e = request("POST", "/v1alpha1/replicas", "");
    t = handle(r, &e, 400);
    assert_non_null(strstr(jsonx_get_str(t, "message"), "failed to decode request body: EOF"));
    cJSON_Delete(t);
    mo_registry_free(r);
}

int main(void)
{
    ilog_init("test_mock_operator_units", ILOG_WARN, ILOG_HUMAN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(addr_pod_name_drops_port_and_last_label),
        cmocka_unit_test(addr_valid_accepts_host_port_only),
        cmocka_unit_test(pod_names_use_the_kubernetes_alphabet_and_follow_the_seed),
        cmocka_unit_test(registry_entries_keep_order_and_reject_bad_input),
        cmocka_unit_test(failed_records_keep_the_newest),
        cmocka_unit_test(faults_apply_in_order_and_use_up_their_count),
        cmocka_unit_test(journal_drops_the_oldest_and_shows_bodies_as_json_or_text),
        cmocka_unit_test(api_invents_names_from_the_job_of_an_aggregator),
        cmocka_unit_test(api_answers_with_the_original_messages),
    };
    return cmocka_run_group_tests_name("mock_operator_units", tests, NULL, NULL);
}
