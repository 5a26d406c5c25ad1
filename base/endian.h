/* base/endian.h: fixed-width integers as bytes, the one set of codecs.
 *
 * ost__<order><bits>(b, v) writes v into b[0, bits/8); ost__rd_<order><bits>(b)
 * reads it back. Big-endian for what must sort as numbers (record and map
 * keys: oids, a map's oid before its key), little-endian for headers and
 * values (LMDB's own pages, ostore's record headers and entries). Reads
 * and writes copy through memcpy, so b needs no alignment, and compile to
 * one load or store and a byte swap where the host's order differs.
 * Inline: every read of a key, header or entry goes through them (a call
 * each was 7% of a map scan). The caller owns b; nothing is kept.
 * libc only: usable from every folder (tools/ too: it is header-only). */
#ifndef OST_BASE_ENDIAN_H
#define OST_BASE_ENDIAN_H

#include <stdint.h>
#include <string.h>

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define OST__HOST_LE 1
#else
#define OST__HOST_LE 0
#endif

/* The bodies: to and from the host's order (big says which byte order the
 * bytes hold). */
#define OST__ENDIAN_PAIR(bits, order, big)                                                 \
    static inline void ost__##order##bits(uint8_t *b, uint##bits##_t v) {                \
        if (OST__HOST_LE == (big)) v = (uint##bits##_t)__builtin_bswap##bits(v);          \
        memcpy(b, &v, sizeof v);                                                          \
    }                                                                                     \
    static inline uint##bits##_t ost__rd_##order##bits(const uint8_t *b) {                \
        uint##bits##_t v;                                                                 \
        memcpy(&v, b, sizeof v);                                                          \
        if (OST__HOST_LE == (big)) v = (uint##bits##_t)__builtin_bswap##bits(v);          \
        return v;                                                                         \
    }

/* ost__be64 / ost__rd_be64: 8 bytes, most significant first (keys). */
OST__ENDIAN_PAIR(64, be, 1)
/* ost__le64 / ost__rd_le64: 8 bytes, least significant first. */
OST__ENDIAN_PAIR(64, le, 0)
/* ost__be32 / ost__rd_be32: 4 bytes, most significant first (PostgreSQL's
 * binary format). */
OST__ENDIAN_PAIR(32, be, 1)
/* ost__le32 / ost__rd_le32: 4 bytes, least significant first (class ids,
 * checksums in record headers; LMDB's page fields). */
OST__ENDIAN_PAIR(32, le, 0)
/* ost__be16 / ost__rd_be16: 2 bytes, most significant first. */
OST__ENDIAN_PAIR(16, be, 1)
/* ost__le16 / ost__rd_le16: 2 bytes, least significant first. */
OST__ENDIAN_PAIR(16, le, 0)

#undef OST__ENDIAN_PAIR

#endif
