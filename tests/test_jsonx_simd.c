/* White-box tests of the number-list block path of jsonx's fast validator
 * (interaction/jsonx.c, included here to reach its static functions): the
 * byte classifiers (the portable table, SSE2, AVX2 where this CPU has it)
 * give the same masks, and the block loop gives the same answer with each,
 * on blocks of every byte and on number lists with changed bytes. The loop
 * itself is checked against the careful scanner in test_jsonx (with the
 * classifier the library picks on this CPU). */
#include "jsonx.c"

#include <setjmp.h>
#include <stdarg.h>

#include <cmocka.h>

static uint64_t rng = 0x9E3779B97F4A7C15u;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool have_avx2(void)
{
#ifdef JSONX_AVX2
    return __builtin_cpu_supports("avx2");
#else
    return false;
#endif
}

static __attribute__((unused)) void assert_same_classes(const numclass *a, const numclass *b)
{
    assert_true(a->d == b->d && a->z == b->z && a->p == b->p && a->e == b->e);
    assert_true(a->m == b->m && a->s == b->s && a->c == b->c && a->sp == b->sp);
}

static void test_classifiers_agree(void **state)
{
    (void)state;
    static const char common[] = "0123456789.eE+-, ]\n\t\"x";
    char block[64];
    for (int round = 0; round < 20000; round++) {
        for (int i = 0; i < 64; i++)
            block[i] = round % 2 ? (char)(next_rand() & 0xFF) : common[next_rand() % (sizeof common - 1)];
        numclass t;
        classify64_table(block, &t);
        /* The table itself, byte by byte. */
        for (int i = 0; i < 64; i++) {
            unsigned char c = (unsigned char)block[i];
            assert_int_equal(t.d >> i & 1, c >= '0' && c <= '9');
            assert_int_equal(t.z >> i & 1, c == '0');
            assert_int_equal(t.p >> i & 1, c == '.');
            assert_int_equal(t.e >> i & 1, c == 'e' || c == 'E');
            assert_int_equal(t.m >> i & 1, c == '-');
            assert_int_equal(t.s >> i & 1, c == '+');
            assert_int_equal(t.c >> i & 1, c == ',');
            assert_int_equal(t.sp >> i & 1, c == ' ');
        }
#ifdef JSONX_SSE2
        numclass s;
        classify64_sse2(block, &s);
        assert_same_classes(&t, &s);
#endif
#ifdef JSONX_AVX2
        if (have_avx2()) {
            numclass a;
            classify64_avx2(block, &a);
            assert_same_classes(&t, &a);
        }
#endif
    }
}

/* The loop with each classifier on one text, from each of its first bytes. */
static void assert_loops_agree(const char *text, size_t len)
{
    const char *end = text + len;
    for (size_t at = 0; at < len && at < 80; at++) {
        bool e1, e2;
        const char *r1 = number_list_table(text + at, end, &e1);
#ifdef JSONX_SSE2
        const char *r2 = number_list_sse2(text + at, end, &e2);
        assert_ptr_equal(r1, r2);
        assert_int_equal(e1, e2);
#endif
#ifdef JSONX_AVX2
        if (have_avx2()) {
            r2 = number_list_avx2(text + at, end, &e2);
            assert_ptr_equal(r1, r2);
            assert_int_equal(e1, e2);
        }
#endif
        (void)e2, (void)r1;
        assert_true(r1 >= text + at && r1 <= end);
    }
}

static void test_loops_agree(void **state)
{
    (void)state;
    static const char alphabet[] = "0123456789000..eE+--,, ,   ]x\n";
    for (int round = 0; round < 3000; round++) {
        xbuf b = {0};
        size_t n = 10 + next_rand() % 60;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = next_rand();
            xbuf_printf(&b, "%s%s%llu.%llu", i ? ", " : "", r % 3 ? "" : "-", (unsigned long long)(r >> 40) % 1000,
                        (unsigned long long)(r >> 8) % 100000000);
            if (r % 7 == 0)
                xbuf_printf(&b, "e%s%d", r % 2 ? "-" : (r % 3 ? "+" : ""), (int)(r >> 12 & 31));
        }
        xbuf_puts(&b, "]");
        for (uint64_t k = next_rand() % 4; k > 0; k--)
            b.data[next_rand() % b.len] = alphabet[next_rand() % (sizeof alphabet - 1)];
        assert_loops_agree(b.data, b.len);
        xbuf_free(&b);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classifiers_agree),
        cmocka_unit_test(test_loops_agree),
    };
    printf("classifiers: table%s%s\n",
#ifdef JSONX_SSE2
           ", SSE2",
#else
           "",
#endif
           have_avx2() ? ", AVX2" : "");
    return cmocka_run_group_tests(tests, NULL, NULL);
}
