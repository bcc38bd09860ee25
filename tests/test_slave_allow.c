/* Unit tests of the slave's master allow list (slave.h, --allow-master):
 * IPv4 and IPv6 prefixes, IPv4-mapped addresses, and bad input named. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "slave.h"

static slave_allow *list(const char *spec)
{
    slave_allow *a = slave_allow_new();
    char err[300] = "";
    if (slave_allow_add(a, spec, err, sizeof err) < 0)
        print_error("'%s': %s\n", spec, err);
    assert_int_equal(slave_allow_count(a) > 0, 1);
    return a;
}

static void ipv4_prefixes_match_their_network_only(void **state)
{
    (void)state;
    slave_allow *a = list("10.0.0.0/8, 192.168.1.7,172.16.0.0/12");
    assert_int_equal(slave_allow_count(a), 3);
    assert_true(slave_allow_has(a, "10.0.0.1"));
    assert_true(slave_allow_has(a, "10.255.255.255"));
    assert_false(slave_allow_has(a, "11.0.0.0"));
    assert_true(slave_allow_has(a, "192.168.1.7"));
    assert_false(slave_allow_has(a, "192.168.1.8"));  /* no prefix: that address alone */
    assert_true(slave_allow_has(a, "172.31.255.1"));  /* /12: 172.16 .. 172.31 */
    assert_false(slave_allow_has(a, "172.32.0.1"));
    assert_false(slave_allow_has(a, "::1"));          /* another family */
    assert_false(slave_allow_has(a, "localhost"));     /* names are not resolved */
    assert_false(slave_allow_has(a, ""));
    assert_false(slave_allow_has(a, NULL));
    char *t = slave_allow_text(a);
    assert_string_equal(t, "10.0.0.0/8, 192.168.1.7/32, 172.16.0.0/12");
    free(t);
    slave_allow_free(a);
}

static void prefix_bits_that_are_not_whole_bytes_and_the_extremes(void **state)
{
    (void)state;
    slave_allow *a = list("10.0.0.64/27"); /* 10.0.0.64 .. 10.0.0.95 */
    assert_false(slave_allow_has(a, "10.0.0.63"));
    assert_true(slave_allow_has(a, "10.0.0.64"));
    assert_true(slave_allow_has(a, "10.0.0.95"));
    assert_false(slave_allow_has(a, "10.0.0.96"));
    slave_allow_free(a);
    a = list("10.1.2.3/8"); /* host bits under the prefix are ignored */
    assert_true(slave_allow_has(a, "10.200.0.1"));
    slave_allow_free(a);
    a = list("0.0.0.0/0");
    assert_true(slave_allow_has(a, "203.0.113.9"));
    assert_false(slave_allow_has(a, "2001:db8::1"));
    slave_allow_free(a);
    a = list("::/0");
    assert_true(slave_allow_has(a, "2001:db8::1"));
    slave_allow_free(a);
}

static void ipv6_prefixes_and_brackets(void **state)
{
    (void)state;
    slave_allow *a = list("2001:db8::/32,[::1],fe80::/10");
    assert_true(slave_allow_has(a, "2001:db8:ffff::1"));
    assert_false(slave_allow_has(a, "2001:db9::1"));
    assert_true(slave_allow_has(a, "::1"));
    assert_true(slave_allow_has(a, "[::1]"));
    assert_false(slave_allow_has(a, "::2"));
    assert_true(slave_allow_has(a, "febf::1"));
    assert_false(slave_allow_has(a, "fec0::1"));
    assert_false(slave_allow_has(a, "127.0.0.1"));
    char *t = slave_allow_text(a);
    assert_string_equal(t, "2001:db8::/32, ::1/128, fe80::/10");
    free(t);
    slave_allow_free(a);
}

/* A dual-stack socket shows an IPv4 peer as ::ffff:a.b.c.d. */
static void ipv4_mapped_addresses_count_as_ipv4(void **state)
{
    (void)state;
    slave_allow *a = list("127.0.0.0/8");
    assert_true(slave_allow_has(a, "::ffff:127.0.0.1"));
    assert_false(slave_allow_has(a, "::ffff:10.0.0.1"));
    slave_allow_free(a);
    a = list("::ffff:10.0.0.0/104"); /* = 10.0.0.0/8 */
    assert_true(slave_allow_has(a, "10.9.9.9"));
    assert_true(slave_allow_has(a, "::ffff:10.9.9.9"));
    assert_false(slave_allow_has(a, "11.0.0.1"));
    char *t = slave_allow_text(a);
    assert_string_equal(t, "10.0.0.0/8");
    free(t);
    slave_allow_free(a);
}

static void lists_add_up_over_several_flags(void **state)
{
    (void)state;
    slave_allow *a = list("10.0.0.1");
    char err[300];
    assert_int_equal(slave_allow_add(a, "::1", err, sizeof err), 0);
    assert_int_equal(slave_allow_count(a), 2);
    /* a bad list adds nothing, not even its good entries */
    assert_int_equal(slave_allow_add(a, "10.0.0.2,nope", err, sizeof err), -1);
    assert_int_equal(slave_allow_count(a), 2);
    assert_false(slave_allow_has(a, "10.0.0.2"));
    slave_allow_free(a);
}

static void bad_entries_are_refused_with_what_is_wrong(void **state)
{
    (void)state;
    static const struct {
        const char *spec, *want;
    } cases[] = {
        {"", "an empty entry"},
        {"10.0.0.1,", "an empty entry"},
        {" , ::1", "an empty entry"},
        {"host.example", "'host.example' is not an IPv4 or IPv6 address (want ADDR[/PREFIX]; host names are not resolved)"},
        {"10.0.0", "'10.0.0' is not an IPv4 or IPv6 address"},
        {"10.0.0.256", "'10.0.0.256' is not an IPv4 or IPv6 address"},
        {"10.0.0.0/33", "'10.0.0.0/33': the prefix must be a number from 0 to 32 for an IPv4 address"},
        {"10.0.0.0/", "'10.0.0.0/': the prefix must be a number from 0 to 32"},
        {"10.0.0.0/-1", "the prefix must be a number from 0 to 32"},
        {"10.0.0.0/8x", "the prefix must be a number from 0 to 32"},
        {"10.0.0.0/0008", "the prefix must be a number from 0 to 32"},
        {"::1/129", "'::1/129': the prefix must be a number from 0 to 128 for an IPv6 address"},
        {"::ffff:10.0.0.0/95", "the prefix must be a number from 96 to 128 for an IPv6 address"},
        {"/8", "'' is not an IPv4 or IPv6 address"},
        {"[::1", "'[::1' is not an IPv4 or IPv6 address"},
        {"10.0.0.1:80", "'10.0.0.1:80' is not an IPv4 or IPv6 address"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        slave_allow *a = slave_allow_new();
        char err[300] = "";
        int rc = slave_allow_add(a, cases[i].spec, err, sizeof err);
        if (rc != -1 || !strstr(err, cases[i].want))
            print_error("'%s': rc %d, '%s', want '%s'\n", cases[i].spec, rc, err, cases[i].want);
        assert_int_equal(rc, -1);
        assert_non_null(strstr(err, cases[i].want));
        assert_int_equal(slave_allow_count(a), 0);
        slave_allow_free(a);
    }
}

static void too_many_networks_are_refused(void **state)
{
    (void)state;
    slave_allow *a = slave_allow_new();
    char err[300];
    for (int i = 0; i < SLAVE_ALLOW_MAX; i++) {
        char one[32];
        snprintf(one, sizeof one, "10.%d.%d.0/24", i / 256, i % 256);
        assert_int_equal(slave_allow_add(a, one, err, sizeof err), 0);
    }
    assert_int_equal(slave_allow_add(a, "192.0.2.1", err, sizeof err), -1);
    assert_non_null(strstr(err, "more than 1024 networks"));
    slave_allow_free(a);
}

static void loopback_hosts(void **state)
{
    (void)state;
    assert_true(slave_host_is_loopback(NULL));
    assert_true(slave_host_is_loopback("127.0.0.1"));
    assert_true(slave_host_is_loopback("127.3.2.1"));
    assert_true(slave_host_is_loopback("::1"));
    assert_true(slave_host_is_loopback("::ffff:127.0.0.1"));
    assert_true(slave_host_is_loopback("localhost"));
    assert_false(slave_host_is_loopback("0.0.0.0"));
    assert_false(slave_host_is_loopback("::"));
    assert_false(slave_host_is_loopback("10.0.0.1"));
    assert_false(slave_host_is_loopback("aggregator.svc"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(ipv4_prefixes_match_their_network_only),
        cmocka_unit_test(prefix_bits_that_are_not_whole_bytes_and_the_extremes),
        cmocka_unit_test(ipv6_prefixes_and_brackets),
        cmocka_unit_test(ipv4_mapped_addresses_count_as_ipv4),
        cmocka_unit_test(lists_add_up_over_several_flags),
        cmocka_unit_test(bad_entries_are_refused_with_what_is_wrong),
        cmocka_unit_test(too_many_networks_are_refused),
        cmocka_unit_test(loopback_hosts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
