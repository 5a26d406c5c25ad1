/* The test knobs (store/testctl.h) as the Criterion suites use them: the
 * only way a test steers the library or reads its internal counters. In a
 * build without the knobs (meson option test_knobs: off in release,
 * minsize and plain builds) a test that needs one skips, saying why. */
#ifndef OST_TESTS_KNOBS_H
#define OST_TESTS_KNOBS_H

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdint.h>

#include "../store/testctl.h"
#include "ostore.h"

#ifdef OST_TEST_KNOBS
#define KNOBS_ON true
#else
#define KNOBS_ON false
#endif

#define KNOBS_SKIP "this build has no test knobs (meson option test_knobs)"

/* Skips the test in a build without the knobs. */
static inline void need_knobs(void) {
    if (!KNOBS_ON) cr_skip_test(KNOBS_SKIP);
}

/* Numeric knob k's value (a setting, or a counter's count); skips the
 * test in a build without the knobs. */
static inline int64_t knob(ost__knob k) {
    need_knobs();
    int64_t v = 0;
    int rc = ost__knob_get(k, &v);
    cr_assert_eq(rc, 0, "knob %d: %s", (int)k, ost_err_name(rc));
    return v;
}

/* Sets setting k to v; skips the test in a build without the knobs. */
static inline void knob_set(ost__knob k, int64_t v) {
    need_knobs();
    int rc = ost__knob_set(k, v);
    cr_assert_eq(rc, 0, "knob %d to %lld: %s", (int)k, (long long)v, ost_err_name(rc));
}

/* Sets a hook (op OST__TC_MID_WRITE, OST__TC_LMDB_OPENED or
 * OST__TC_PACK_STEP, with a function of its type, or 0 cast to it);
 * skips the test in a build without the knobs. */
#define knob_hook(op, fn)                                                   \
    do {                                                                    \
        need_knobs();                                                       \
        int knob_rc_ = ost__testctl((op), (fn));                            \
        cr_assert_eq(knob_rc_, 0, "hook %d: %s", (int)(op), ost_err_name(knob_rc_)); \
    } while (0)

#endif
