/* Small primitives every part of the library shares (internal, not API):
 * growing an array (base/grow.h), FNV-1a, Latin-1 <-> UTF-8, and a table keyed by byte
 * strings. One of each, so that overflow checks and probing live in one
 * place. The identity table (ost__ptrtab) is in internal.h. */
#ifndef OST_SERIALIZER_PRIM_H
#define OST_SERIALIZER_PRIM_H

#include <stddef.h>
#include <stdint.h>

/* Growing an array (ost__grow, ost__reserve, ost__grow_cap): base/grow.h. */
#include "../base/grow.h"

/* FNV-1a, 64 bits: start from OST__FNV_INIT, feed bytes with
 * ost__fnv1a(h, p, n). Stable across processes and versions. */
#define OST__FNV_INIT 1469598103934665603ULL
static inline uint64_t ost__fnv1a(uint64_t h, const void *p, size_t n) {
    const uint8_t *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

/* Latin-1 <-> UTF-8. ost__latin1_utf8_len is the UTF-8 length of n
 * Latin-1 bytes; ost__latin1_to_utf8 writes them to dst (that many bytes,
 * no NUL) and returns the end. ost__utf8_to_latin1 writes the Latin-1
 * bytes of valid UTF-8 text src[0..n) to dst (room for n) and returns
 * their count, or -1 when a character is beyond U+00FF. */
static inline size_t ost__latin1_utf8_len(const uint8_t *p, size_t n) {
    size_t extra = 0;
    for (size_t i = 0; i < n; i++) extra += p[i] >> 7;
    return n + extra;
}
static inline char *ost__latin1_to_utf8(char *dst, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x80) *dst++ = (char)p[i];
        else {
            *dst++ = (char)(0xc0 | p[i] >> 6);
            *dst++ = (char)(0x80 | (p[i] & 0x3f));
        }
    }
    return dst;
}
static inline ptrdiff_t ost__utf8_to_latin1(uint8_t *dst, const uint8_t *s, size_t n) {
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] < 0x80) dst[j++] = s[i++];
        else if ((s[i] == 0xc2 || s[i] == 0xc3) && i + 1 < n) {
            dst[j++] = (uint8_t)((s[i] & 3) << 6 | (s[i + 1] & 0x3f));
            i += 2;
        } else
            return -1;
    }
    return (ptrdiff_t)j;
}

/* A table keyed by a class's name (module and name as byte strings),
 * open addressing with linear probing, power of two size, no deletion:
 * the registry's classes and the store's class ids. Keys are copied. */
typedef struct {
    char *key; /* module, NUL, name (NULL: empty slot) */
    size_t ml, nl;
    uint64_t hash;
    uint64_t val;
} ost__name_slot;
typedef struct {
    ost__name_slot *slots;
    size_t mask; /* size - 1; 0 when unallocated */
    size_t count;
} ost__nametab;

static inline uint64_t ost__name_hash(const char *m, size_t ml, const char *n, size_t nl) {
    return ost__fnv1a(ost__fnv1a(ost__fnv1a(OST__FNV_INIT, m, ml), "", 1), n, nl);
}
/* The slot of module.name (slot->key set) or NULL when absent. */
ost__name_slot *ost__nametab_get(const ost__nametab *t, const char *m, size_t ml,
                                 const char *n, size_t nl);
/* Adds module.name -> val, copying the name; the name must be absent.
 * 0 or OST_ENOMEM (the table unchanged). */
int ost__nametab_put(ost__nametab *t, const char *m, size_t ml, const char *n, size_t nl,
                     uint64_t val);
/* Frees the table and its keys; drop (may be NULL) is called for each
 * value first. */
void ost__nametab_free(ost__nametab *t, void (*drop)(uint64_t val));

#endif
