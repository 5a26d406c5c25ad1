/* The test knobs' one entry (store/testctl.h says what each knob steers
 * and who uses it). Built only with meson's option test_knobs on, which
 * also defines OST_TEST_KNOBS: without it the library reads its settings
 * as constants and has no counters or hooks. */
#include <limits.h>
#include <stdarg.h>

#include "testctl.h"

ost__tc_state ost__tc = {
#define OST__TC_X(K, f, d, least) .f = (d),
    OST__TC_SETTINGS(OST__TC_X)
#undef OST__TC_X
};

static int knob_get(int k, int64_t *out) {
    if (!out) return OST_EINVAL;
    switch (k) {
#define OST__TC_X(K, f, d, least)                                           \
    case OST__K_##K: *out = ost__tc.f; return 0;
        OST__TC_SETTINGS(OST__TC_X)
#undef OST__TC_X
#define OST__TC_X(K, f)                                                     \
    case OST__K_##K: *out = (int64_t)__atomic_load_n(&ost__tc.f, __ATOMIC_RELAXED); return 0;
        OST__TC_COUNTERS(OST__TC_X)
#undef OST__TC_X
    default: return OST_EINVAL;
    }
}

static int knob_set(int k, int64_t v) {
    switch (k) {
#define OST__TC_X(K, f, d, least)                                           \
    case OST__K_##K:                                                        \
        if (v < (least) || v > INT_MAX) return OST_EINVAL;                  \
        ost__tc.f = (int)v;                                                 \
        return 0;
        OST__TC_SETTINGS(OST__TC_X)
#undef OST__TC_X
    default: return OST_EINVAL; /* counters only count */
    }
}

int ost__testctl(int op, ...) {
    va_list ap;
    va_start(ap, op);
    int rc = 0;
    switch (op) {
    case OST__TC_GET: {
        int k = va_arg(ap, int);
        rc = knob_get(k, va_arg(ap, int64_t *));
        break;
    }
    case OST__TC_SET: {
        int k = va_arg(ap, int);
        rc = knob_set(k, va_arg(ap, int64_t));
        break;
    }
    case OST__TC_MID_WRITE: ost__tc.mid_write = va_arg(ap, ost__tc_fn); break;
    case OST__TC_LMDB_OPENED: ost__tc.lmdb_opened = va_arg(ap, ost__tc_fn); break;
    case OST__TC_PACK_STEP: ost__tc.pack_step = va_arg(ap, ost__tc_pack_fn); break;
    default: rc = OST_EINVAL;
    }
    va_end(ap);
    return rc;
}
