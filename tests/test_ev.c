/* Tests of ev's timers: order, stop, and handles that outlive their timer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "ev.h"
#include "testutil.h"

static void count(ev_loop *loop, void *data)
{
    (void)loop;
    (*(int *)data)++;
}

static void a_stale_handle_never_stops_another_timer(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    int a = 0, b = 0;
    ev_timer *ta = ev_timer_start(loop, 0, count, &a);
    assert_true(ev_timer_active(loop, ta));
    assert_true(tu_run_until(loop, &a, 1000));
    assert_false(ev_timer_active(loop, ta));
    /* b takes a's slot; stopping a's old handle must leave b running */
    ev_timer *tb = ev_timer_start(loop, 10, count, &b);
    assert_true(tb != ta);
    ev_timer_stop(loop, ta);
    ev_timer_stop(loop, ta);
    assert_true(ev_timer_active(loop, tb));
    assert_true(tu_run_until(loop, &b, 1000));
    /* a handle stopped twice, and NULL, are no-ops */
    ev_timer *tc = ev_timer_start(loop, 1000, count, &a);
    ev_timer_stop(loop, tc);
    ev_timer *td = ev_timer_start(loop, 0, count, &b);
    ev_timer_stop(loop, tc);
    ev_timer_stop(loop, NULL);
    assert_true(ev_timer_active(loop, td));
    int before = b;
    tu_run_for(loop, 20);
    assert_int_equal(b, before + 1);
    ev_loop_free(loop);
}

static int order[8], norder;
static void note(ev_loop *loop, void *data)
{
    (void)loop;
    order[norder++] = (int)(intptr_t)data;
}

static void timers_fire_by_deadline_then_in_start_order(void **state)
{
    (void)state;
    ev_loop *loop = ev_loop_new();
    norder = 0;
    ev_timer_start(loop, 30, note, (void *)3);
    ev_timer_start(loop, 0, note, (void *)1);
    ev_timer *x = ev_timer_start(loop, 10, note, (void *)9);
    ev_timer_start(loop, 0, note, (void *)2);
    ev_timer_stop(loop, x);
    tu_run_for(loop, 80);
    assert_int_equal(norder, 3);
    assert_int_equal(order[0], 1);
    assert_int_equal(order[1], 2);
    assert_int_equal(order[2], 3);
    ev_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(a_stale_handle_never_stops_another_timer),
        cmocka_unit_test(timers_fire_by_deadline_then_in_start_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
