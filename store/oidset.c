/* A set of flags per stored oid, sized by the records, not by meta (see
 * oidset.h for the two layouts and why). */
#include <stdlib.h>
#include <string.h>

#include "oidset.h"
#include "store_internal.h"

#define DENSE_MIN_BYTES ((uint64_t)1 << 20) /* a dense bitmap this small is always fine */
#define DENSE_BYTES_PER_RECORD 8            /* what the sparse array costs a record */

static int alloc_bits(ost__oidset *s) {
    size_t bytes = s->n / 8 + 1;
    for (int f = 0; f < OST__OIDSET_FLAGS; f++)
        if (!(s->bits[f] = calloc(bytes, 1))) return OST_ENOMEM;
    return 0;
}

int ost__oidset_init_dense(ost__oidset *s, uint64_t n) {
    memset(s, 0, sizeof *s);
    if (n >= SIZE_MAX - 8) return OST_ENOMEM;
    s->n = (size_t)n;
    int rc = alloc_bits(s);
    if (rc) ost__oidset_free(s);
    return rc;
}

int ost__oidset_init_sorted(ost__oidset *s, uint64_t *oids, size_t n) {
    memset(s, 0, sizeof *s);
    s->oids = oids ? oids : malloc(8);
    s->n = n;
    int rc = s->oids ? alloc_bits(s) : OST_ENOMEM;
    if (rc) ost__oidset_free(s);
    return rc;
}

int64_t ost__oidset_index(const ost__oidset *s, uint64_t oid) {
    if (!s->oids) return oid < s->n ? (int64_t)oid : -1;
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->oids[mid] < oid) lo = mid + 1;
        else hi = mid;
    }
    return lo < s->n && s->oids[lo] == oid ? (int64_t)lo : -1;
}

uint64_t ost__oidset_oid(const ost__oidset *s, size_t i) { return s->oids ? s->oids[i] : i; }

bool ost__oidset_test(const ost__oidset *s, int f, size_t i) {
    return s->bits[f][i >> 3] >> (i & 7) & 1;
}

bool ost__oidset_set(ost__oidset *s, int f, size_t i) {
    bool was = ost__oidset_test(s, f, i);
    s->bits[f][i >> 3] |= (uint8_t)(1u << (i & 7));
    return was;
}

void ost__oidset_free(ost__oidset *s) {
    free(s->oids);
    for (int f = 0; f < OST__OIDSET_FLAGS; f++) free(s->bits[f]);
    memset(s, 0, sizeof *s);
}
