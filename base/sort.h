/* base/sort.h: sorting arrays of 64-bit oids and dropping repeats, for
 * the store's read-ahead and the PostgreSQL engine's row locks. libc only. */
#ifndef OST_BASE_SORT_H
#define OST_BASE_SORT_H

#include <stddef.h>
#include <stdint.h>

/* qsort's order of uint64_t. */
int ost__u64_cmp(const void *a, const void *b);
/* Sorts v[0, n) (the caller's) and drops repeats; returns the new count.
 * Runs already in order cost one pass; large arrays are radix-sorted (a
 * qsort when the scratch memory cannot be had). */
size_t ost__sort_unique(uint64_t *v, size_t n);

#endif
