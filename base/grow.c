/* base/grow.c: growing arrays (grow.h). */
#include "grow.h"

#include <stdint.h>
#include <stdlib.h>

/* cap, or min, doubled until it reaches need; checked (grow.h). */
int ost__grow_cap(size_t cap, size_t need, size_t elem, size_t min, size_t *out) {
    size_t n = cap ? cap : (min ? min : 1);
    while (n < need) {
        if (n > SIZE_MAX / 2) return OST__GROW_NOMEM;
        n *= 2;
    }
    if (elem && n > SIZE_MAX / elem) return OST__GROW_NOMEM;
    *out = n;
    return 0;
}

/* realloc to ost__grow_cap's capacity; unchanged on failure (grow.h). */
int ost__grow(void **arr, size_t *cap, size_t need, size_t elem, size_t min) {
    size_t n;
    if (ost__grow_cap(*cap, need, elem, min, &n)) return OST__GROW_NOMEM;
    void *p = realloc(*arr, n * elem);
    if (!p) return OST__GROW_NOMEM;
    *arr = p;
    *cap = n;
    return 0;
}
