/* A set of flags per stored oid, for the walks of pack and check (which
 * oids are reachable, which were scanned). Internal: not part of the API.
 *
 * The walks used to keep a bitmap of one bit per oid below meta.next_oid,
 * which a damaged or hostile meta (next_oid 2^64 - 1) turned into a 2^61-
 * byte allocation, or, when (next_oid + 7) / 8 wrapped to 0, a one-byte
 * heap buffer written far past its end. The set is sized by the records
 * themselves instead:
 *
 * - dense: one bit per oid from 0 to the highest oid present, when that
 *   bitmap is no larger
 *   than 8 bytes per record or 1 MiB, whichever is more: the usual case,
 *   since oids are handed out in ascending blocks; a lookup is a shift;
 * - sparse: otherwise (a few records with huge oids), the sorted array of
 *   the oids present (as the engine's scan gives them), with the flags by
 *   rank; a lookup is a binary search.
 *
 * Either way the memory is bounded by the number of records, not by any
 * counter. An oid that has no record has no place in the sparse set
 * (ost__oidset_index says -1); in the dense set it has one, and the
 * caller finds out that its record is missing when it looks it up. */
#ifndef OST_STORE_OIDSET_H
#define OST_STORE_OIDSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define OST__OIDSET_FLAGS 2

typedef struct {
    uint64_t *oids;  /* sparse: the oids present, ascending (NULL: dense) */
    size_t n;        /* sparse: how many; dense: oids 0 .. n - 1 have places */
    uint8_t *bits[OST__OIDSET_FLAGS]; /* a bit per place for each flag */
} ost__oidset;

/* Builds a set, all flags clear: a dense set of places 0 .. n - 1 (the caller bounds
 * n), or a sparse one of oids[0, n), ascending without repeats, which the
 * set takes over (freed by ost__oidset_free, also on failure). 0 or
 * OST_ENOMEM; on failure the set holds nothing. */
int ost__oidset_init_dense(ost__oidset *s, uint64_t n);
int ost__oidset_init_sorted(ost__oidset *s, uint64_t *oids, size_t n);
/* The place of oid in the set, or -1 when it cannot be a stored oid. */
int64_t ost__oidset_index(const ost__oidset *s, uint64_t oid);
/* The oid at place i (0 <= i < s->n). */
uint64_t ost__oidset_oid(const ost__oidset *s, size_t i);
/* Flag f of place i: test, and set (returns whether it was set before). */
bool ost__oidset_test(const ost__oidset *s, int f, size_t i);
bool ost__oidset_set(ost__oidset *s, int f, size_t i);
/* Frees what the set holds; s may be zeroed or freed twice. */
void ost__oidset_free(ost__oidset *s);

#endif
