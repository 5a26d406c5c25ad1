/* base/sort.h: sorting 64-bit integers (oids). No state: safe from any
 * thread for distinct arrays. */
#ifndef OST_BASE_SORT_H
#define OST_BASE_SORT_H

#include <stddef.h>
#include <stdint.h>

/* qsort's and bsearch's order of uint64_t: a and b point at one each (or
 * at structs that start with one); <0, 0 or >0. */
int ost__u64_cmp(const void *a, const void *b);
/* Sorts v[0, n) in place and drops repeats; returns the new count (the
 * values kept are v[0, count)). Mostly sorted input costs one pass; else
 * a radix sort over the bytes in which the values differ (qsort when
 * short of memory or n < 64). conn.c's read-ahead, the PostgreSQL
 * engine's row locks. */
size_t ost__sort_unique(uint64_t *v, size_t n);

#endif
