/* Test helper: build lists and tuples of values in one expression. Both
 * steal the values they are given. */
#ifndef OST_TESTS_VALBUILD_H
#define OST_TESTS_VALBUILD_H

#include <criterion/criterion.h>
#include <stdarg.h>

#include "ostore.h"

static ost_value list_of(int n, ...) {
    va_list ap;
    va_start(ap, n);
    ost_value l = ost_list_new(0);
    for (int i = 0; i < n; i++) cr_assert_eq(ost_list_append(l, va_arg(ap, ost_value)), 0);
    va_end(ap);
    return l;
}

static ost_value tuple_of(int n, ...) {
    va_list ap;
    va_start(ap, n);
    ost_value t = ost_tuple_new((size_t)n);
    for (int i = 0; i < n; i++) cr_assert_eq(ost_tuple_set(t, (size_t)i, va_arg(ap, ost_value)), 0);
    va_end(ap);
    return t;
}

#endif
