/* The bytes of the records the store writes for maps and counters
 * (docs/format.md, "Maps"): their count (a counter's value) is the
 * state pickle's LONG1 of 8 bytes, just before its last two opcodes. The
 * store, every engine (a commit adds to a count inside its write
 * transaction) and LMDB's salvage read and change it here. These
 * functions call nothing else of ostore: store/maprec.c sits below the
 * engines. */
#ifndef OST_STORE_MAPREC_H
#define OST_STORE_MAPREC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A counter's value, or a map's count as stored, into *value: the
 * record's LONG1 of 8 bytes, signed as pickle's LONG1 is. 0, or
 * OST_ECORRUPT when p[0, n) is no such record. */
int ost__record_value(const uint8_t *p, size_t n, int64_t *value);
/* The count a map's record p[0, n) holds into *count: 0, or OST_ECORRUPT
 * when p is no map record (or its count is below 0). */
int ost__map_record_count(const uint8_t *p, size_t n, uint64_t *count);
/* Sets the count of map record p[0, n), which ost__map_record_count
 * accepted. */
void ost__map_record_setcount(uint8_t *p, size_t n, uint64_t count);
/* Adds delta to the count of the map or counter record p[0, n) in place:
 * a map's count stays in [0, 2^63), a counter's (counter true) is a signed
 * 64-bit value. 0; OST_ECORRUPT when p is no such record or a map's count
 * would go below 0; OST_ELIMIT when a counter would pass the 64-bit range
 * (p is unchanged then). */
int ost__record_count_add(uint8_t *p, size_t n, int64_t delta, bool counter);

#endif
