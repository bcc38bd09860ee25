/* Unit tests of the aggregator's configuration: DI-engine's config shape,
 * flags overriding the file, time scale, and every error naming its field. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agg_config.h"

static agg_config_status run(agg_config *c, char *err, size_t errlen, ...)
{
    char *argv[64] = {"aggregator"};
    int argc = 1;
    va_list ap;
    va_start(ap, errlen);
    for (char *a; (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);
    return agg_config_from_args(c, argc, argv, err, errlen);
}

static void reads_di_engine_config_shape(void **state)
{
    (void)state;
    agg_config c;
    agg_config_defaults(&c);
    char err[512];
    const char *text = "{\"master\": {\"host\": \"0.0.0.0\", \"port\": 19999}, \"slave\": {\"host\": \"0.0.0.0\", "
                       "\"port\": \"18800\"}, \"learner\": {\"learner0\": [\"learner0\", \"127.0.0.1\", 19900], "
                       "\"1\": [\"1\", \"host-b\", \"19901\"]}, \"node\": 3, \"partition\": \"p\"}";
    assert_int_equal(agg_config_parse_json(&c, text, strlen(text), "cfg", err, sizeof err), 0);
    assert_string_equal(c.master_host, "0.0.0.0");
    assert_int_equal(c.master_port, 19999);
    assert_int_equal(c.slave_port, 18800);
    assert_int_equal(c.nlearners, 2);
    assert_string_equal(c.learners[1].id, "1");
    assert_string_equal(c.learners[1].host, "host-b");
    assert_int_equal(c.learners[1].port, 19901);
    agg_config_free(&c);
}

static void config_errors_name_the_field(void **state)
{
    (void)state;
    struct {
        const char *text, *want;
    } cases[] = {
        {"[1]", "the config must be a JSON object, not a list"},
        {"{\"master\": 3}", "field \"master\" must be an object"},
        {"{\"master\": {\"port\": 70000}}", "field \"master.port\" must be an integer from 0 to 65535"},
        {"{\"slave\": {\"host\": 1}}", "field \"slave.host\" must be a non-empty string"},
        {"{\"slave\": {\"hots\": \"x\"}}", "unknown field \"slave.hots\""},
        {"{\"learner\": []}", "field \"learner\" must be an object"},
        {"{\"learner\": {\"a\": [\"a\", \"h\"]}}", "field \"learner.a\" must be a list [id, host, port]"},
        {"{\"learner\": {\"a\": [\"a\", \"h\", 0]}}", "field \"learner.a\"[2] (port) must be an integer from 1"},
        {"{\"learner\": {\"a\": [\"\", \"h\", 1]}}", "field \"learner.a\"[0] (id) must be a non-empty string"},
        {"{\"learner\": {\"a\": [\"x\", \"h\", 1], \"b\": [\"x\", \"h\", 2]}}", "learner id 'x' is given twice"},
        {"{\"master\": ", "not valid JSON"},
        /* unknown keys at every level, with the line and the nearest key */
        {"{\"lerner\": {}}", "cfg:1: unknown field \"lerner\" (did you mean \"learner\"?); known fields at the top: "
                             "master, slave, learner, node, partition"},
        {"{\"master\": {\"host\": \"h\"},\n\n \"salve\": {}}", "cfg:3: unknown field \"salve\" (did you mean \"slave\"?)"},
        {"{\"zzzzzz\": 1}", "cfg:1: unknown field \"zzzzzz\"; known fields at the top"},
        {"{\"master\": {\n\"prot\": 1}}", "cfg:2: unknown field \"master.prot\" (did you mean \"master.port\"?); "
                                       "known fields of \"master\": host, port"},
        {"{\"learner\": {},\n \"learner\": {}}", "cfg:2: field \"learner\" is given twice (first at line 1)"},
        {"{\"slave\": {\"port\": 1,\n \"port\": 2}}", "cfg:2: field \"slave.port\" is given twice (first at line 1)"},
        {"{\"learner\": {\"a\": [\"a\", \"h\", 1],\n \"b\": [\"b\", \"h\"]}}", "cfg:2: field \"learner.b\" must be a list"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        agg_config c;
        agg_config_defaults(&c);
        char err[512] = "";
        assert_int_equal(agg_config_parse_json(&c, cases[i].text, strlen(cases[i].text), "cfg", err, sizeof err), -1);
        if (!strstr(err, cases[i].want))
            print_error("case %zu: got '%s', want '%s'\n", i, err, cases[i].want);
        assert_non_null(strstr(err, cases[i].want));
        agg_config_free(&c);
    }
}

static void flags_give_learners_ports_and_scaled_timings(void **state)
{
    (void)state;
    agg_config c;
    char err[512];
    assert_int_equal(run(&c, err, sizeof err, "--slave-port=0", "--learner", "l0=127.0.0.1:7000", "--learner=l1=[::1]:7001",
                         "--time-scale", "0.01", "--heartbeat-tolerance-ms=500", NULL),
                     AGG_CONFIG_OK);
    assert_int_equal(c.slave_port, 0);
    assert_int_equal(c.master_port, 0);
    assert_int_equal(c.nlearners, 2);
    assert_string_equal(c.learners[1].host, "::1");
    assert_int_equal(c.max_retry_ms, 600);
    assert_int_equal(c.retry_interval_ms, 20);
    assert_int_equal(c.heartbeat_tolerance_ms, 500); /* given: not scaled */
    assert_int_equal(c.heartbeat_check_ms, 10);
    assert_int_equal(c.sync_period_ms, 30);
    assert_string_equal(c.slave_host, "127.0.0.1");
    agg_config_free(&c);
}

static void reference_defaults_without_flags(void **state)
{
    (void)state;
    agg_config c;
    char err[512];
    unsetenv("AGGREGATOR_PORT");
    unsetenv("KUBERNETES_SERVER_URL");
    assert_int_equal(run(&c, err, sizeof err, NULL), AGG_CONFIG_OK);
    assert_int_equal(c.slave_port, 22272);
    assert_int_equal(c.master_port, 22273);
    assert_int_equal(c.max_retry_ms, 60000);
    assert_int_equal(c.retry_interval_ms, 2000);
    assert_int_equal(c.heartbeat_tolerance_ms, 17000);
    assert_null(c.k8s_url);
    agg_config_free(&c);
    setenv("AGGREGATOR_PORT", "30000", 1);
    setenv("KUBERNETES_SERVER_URL", "operator.ns:8080", 1);
    setenv("KUBERNETES_SERVER_API_VERSION", "v1alpha1", 1);
    assert_int_equal(run(&c, err, sizeof err, NULL), AGG_CONFIG_OK);
    assert_int_equal(c.slave_port, 30000);
    assert_int_equal(c.master_port, 30001);
    assert_string_equal(c.k8s_url, "http://operator.ns:8080");
    assert_string_equal(c.k8s_api, "/v1alpha1");
    assert_string_equal(c.k8s_namespace, "default");
    assert_string_equal(c.k8s_name, "dijob-example-coordinator");
    agg_config_free(&c);
    unsetenv("AGGREGATOR_PORT");
    unsetenv("KUBERNETES_SERVER_URL");
    unsetenv("KUBERNETES_SERVER_API_VERSION");
}

/* The environment DI-orchestrator v0.2.2 gives the aggregator's pod. */
static void set_pod_env(const char *port)
{
    setenv("KUBERNETES_POD_NAMESPACE", "team-a", 1);
    setenv("KUBERNETES_POD_NAME", "cartpole-aggregator-x7k2p", 1);
    setenv("KUBERNETES_SERVER_URL", "di-server.di-system:8080", 1);
    if (port)
        setenv("AGGREGATOR_PORT", port, 1);
}

static void clear_pod_env(void)
{
    static const char *const names[] = {"KUBERNETES_POD_NAMESPACE", "KUBERNETES_POD_NAME", "KUBERNETES_SERVER_URL",
                                        "AGGREGATOR_PORT", "KUBERNETES_AGGREGATOR_URL"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        unsetenv(names[i]);
}

static void orchestrator_pod_listens_everywhere_and_advertises_its_service(void **state)
{
    (void)state;
    agg_config c;
    char err[512];
    clear_pod_env();
    set_pod_env("22270");
    assert_int_equal(run(&c, err, sizeof err, NULL), AGG_CONFIG_OK);
    assert_true(c.orchestrator_pod);
    assert_string_equal(c.slave_host, "0.0.0.0");
    assert_string_equal(c.master_host, "0.0.0.0");
    assert_int_equal(c.slave_port, 22270);
    assert_int_equal(c.master_port, 22271);
    assert_string_equal(c.advertise, "http://cartpole-aggregator-x7k2p.team-a:22271");
    assert_string_equal(c.k8s_url, "http://di-server.di-system:8080");
    assert_string_equal(c.k8s_namespace, "team-a");
    assert_string_equal(c.k8s_name, "cartpole-aggregator-x7k2p");
    agg_config_free(&c);

    /* KUBERNETES_AGGREGATOR_URL names the host learners reach */
    struct {
        const char *url, *want;
    } urls[] = {
        {"agg.team-a.svc:22270", "http://agg.team-a.svc:22271"},
        {"http://10.1.2.3:22270/", "http://10.1.2.3:22271"},
        {"[fd00::7]:22270", "http://[fd00::7]:22271"},
        {"agg-only-host", "http://agg-only-host:22271"},
    };
    for (size_t i = 0; i < sizeof urls / sizeof urls[0]; i++) {
        setenv("KUBERNETES_AGGREGATOR_URL", urls[i].url, 1);
        assert_int_equal(run(&c, err, sizeof err, NULL), AGG_CONFIG_OK);
        assert_string_equal(c.advertise, urls[i].want);
        agg_config_free(&c);
    }
    setenv("KUBERNETES_AGGREGATOR_URL", "https://agg:1", 1);
    assert_int_equal(run(&c, err, sizeof err, NULL), AGG_CONFIG_ERROR);
    assert_non_null(strstr(err, "KUBERNETES_AGGREGATOR_URL: 'https://agg:1' is not host:port"));
    agg_config_free(&c);
    unsetenv("KUBERNETES_AGGREGATOR_URL");

    /* flags and the config file still win */
    assert_int_equal(run(&c, err, sizeof err, "--slave-host", "10.0.0.9", "--master-port", "23000", "--advertise",
                         "http://me:23000", NULL),
                     AGG_CONFIG_OK);
    assert_true(c.orchestrator_pod);
    assert_string_equal(c.slave_host, "10.0.0.9");
    assert_string_equal(c.master_host, "0.0.0.0");
    assert_int_equal(c.master_port, 23000);
    assert_string_equal(c.advertise, "http://me:23000");
    agg_config_free(&c);
    /* a learner-side host given: learners are told that address */
    assert_int_equal(run(&c, err, sizeof err, "--master-host", "127.0.0.1", NULL), AGG_CONFIG_OK);
    assert_string_equal(c.slave_host, "0.0.0.0");
    assert_string_equal(c.master_host, "127.0.0.1");
    assert_null(c.advertise);
    agg_config_free(&c);
    /* port 0: nothing to advertise before listening */
    assert_int_equal(run(&c, err, sizeof err, "--master-port", "0", NULL), AGG_CONFIG_OK);
    assert_null(c.advertise);
    agg_config_free(&c);

    /* without AGGREGATOR_PORT (or any of the others) it is not such a pod */
    clear_pod_env();
    set_pod_env(NULL);
    assert_int_equal(run(&c, err, sizeof err, NULL), AGG_CONFIG_OK);
    assert_false(c.orchestrator_pod);
    assert_string_equal(c.slave_host, "127.0.0.1");
    assert_null(c.advertise);
    assert_non_null(c.k8s_url);
    agg_config_free(&c);
    clear_pod_env();
}

static void bad_flags_name_the_flag(void **state)
{
    (void)state;
    struct {
        const char *a, *b, *want;
    } cases[] = {
        {"--slave-port=x", NULL, "--slave-port: 'x' is not an integer from 0 to 65535"},
        {"--learner=nohost", NULL, "--learner: 'nohost' is not ID=HOST:PORT"},
        {"--learner=a=h:0", NULL, "--learner: '0' is not an integer from 1 to 65535"},
        {"--time-scale=-1", NULL, "--time-scale: '-1' is not a number greater than 0"},
        {"--log-level=loud", NULL, "--log-level: 'loud' is not one of"},
        {"--log-format=xml", NULL, "--log-format: 'xml' is not human or json"},
        {"--advertise=host:1", NULL, "--advertise: 'host:1' is not a URL"},
        {"--bogus", NULL, "unknown option '--bogus'"},
        {"--slave-port", NULL, "--slave-port needs a value"},
        {"--slave-port=5", "--master-port=5", "slave port and master port are both 5"},
        {"--heartbeat-tolerance-ms=10", "--heartbeat-check-ms=20", "must be greater than --heartbeat-check-ms"},
        {"--config=/nonexistent/x.json", NULL, "--config /nonexistent/x.json: cannot open"},
        {"stray", NULL, "unexpected argument 'stray'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        agg_config c;
        char err[512] = "";
        assert_int_equal(run(&c, err, sizeof err, cases[i].a, cases[i].b, NULL), AGG_CONFIG_ERROR);
        if (!strstr(err, cases[i].want))
            print_error("case %zu: got '%s', want '%s'\n", i, err, cases[i].want);
        assert_non_null(strstr(err, cases[i].want));
        agg_config_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(reads_di_engine_config_shape),
        cmocka_unit_test(config_errors_name_the_field),
        cmocka_unit_test(flags_give_learners_ports_and_scaled_timings),
        cmocka_unit_test(reference_defaults_without_flags),
        cmocka_unit_test(orchestrator_pod_listens_everywhere_and_advertises_its_service),
        cmocka_unit_test(bad_flags_name_the_flag),
    };
    return cmocka_run_group_tests_name("agg_config", tests, NULL, NULL);
}
