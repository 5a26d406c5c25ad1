/* Sorting oids (base/sort.h). */
#include <stdlib.h>
#include <string.h>

#include "sort.h"

int ost__u64_cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}
/* Sorts v[0, n) by least significant byte first over the bytes in which
 * its values differ from the least (oids of one store span few of them).
 * 0, or -1 out of memory (v untouched). */
static int radix_sort(uint64_t *v, size_t n) {
    uint64_t lo = v[0], hi = v[0];
    for (size_t i = 1; i < n; i++) {
        lo = v[i] < lo ? v[i] : lo;
        hi = v[i] > hi ? v[i] : hi;
    }
    uint64_t span = hi - lo;
    int bytes = 0;
    while (bytes < 8 && span >> (8 * bytes)) bytes++;
    uint64_t *tmp = malloc(n * sizeof *tmp);
    if (!tmp) return -1;
    uint64_t *src = v, *dst = tmp;
    for (int b = 0; b < bytes; b++) {
        size_t at[256] = {0};
        int sh = 8 * b;
        for (size_t i = 0; i < n; i++) at[((src[i] - lo) >> sh) & 255]++;
        for (size_t k = 0, sum = 0; k < 256; k++) {
            size_t c = at[k];
            at[k] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) dst[at[((src[i] - lo) >> sh) & 255]++] = src[i];
        uint64_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != v) memcpy(v, src, n * sizeof *v);
    free(tmp);
    return 0;
}

size_t ost__sort_unique(uint64_t *v, size_t n) {
    if (n < 2) return n;
    /* a walk's oids come mostly in order already: no sort then */
    size_t s = 1;
    while (s < n && v[s - 1] <= v[s]) s++;
    if (s < n && (n < 64 || radix_sort(v, n))) qsort(v, n, sizeof *v, ost__u64_cmp);
    size_t u = 1;
    for (size_t i = 1; i < n; i++)
        if (v[i] != v[u - 1]) v[u++] = v[i];
    return u;
}
