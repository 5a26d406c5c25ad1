/* base/grow.h: one way to grow an array, as Lua's luaM_growvector: the
 * capacity doubles (from a minimum) until the array holds what is needed,
 * and every size computation is checked for overflow here, once.
 *
 * ost__grow and ost__reserve work on memory from the C library's realloc
 * (the caller frees it with free). An array kept elsewhere (a pool, a
 * first block on the stack) computes its new capacity with ost__grow_cap
 * and moves itself. No state: safe from any thread for distinct arrays. */
#ifndef OST_BASE_GROW_H
#define OST_BASE_GROW_H

#include <stddef.h>

/* What the growers return when the size overflows or memory is short:
 * -1, the value of OST_ENOMEM (serializer/alloc.c asserts they agree),
 * so a caller may pass it on as the library's code. */
#define OST__GROW_NOMEM (-1)

/* The capacity, in elements of elem bytes, an array of cap elements
 * grows to so that it holds at least need: cap (min when cap is 0, 1 when
 * both are) doubled until it is enough. Into *out; 0, or OST__GROW_NOMEM
 * when the count or its size in bytes would overflow a size_t (*out is
 * then untouched). */
int ost__grow_cap(size_t cap, size_t need, size_t elem, size_t min, size_t *out);

/* Grows the array *arr of *cap elements of elem bytes so that it holds at
 * least need elements (ost__grow_cap's capacity), by realloc: the first
 * *cap elements are kept, the rest is uninitialised. Returns 0, or
 * OST__GROW_NOMEM when the size overflows or memory is short, leaving
 * *arr and *cap unchanged. */
int ost__grow(void **arr, size_t *cap, size_t need, size_t elem, size_t min);

/* Calls ost__grow only when need exceeds *cap: the check inline. */
static inline int ost__reserve(void **arr, size_t *cap, size_t need, size_t elem, size_t min) {
    if (__builtin_expect(need <= *cap, 1)) return 0;
    return ost__grow(arr, cap, need, elem, min);
}

#endif
