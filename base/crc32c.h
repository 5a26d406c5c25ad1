/* base/crc32c.h: CRC-32C (Castagnoli), the checksum of every record and
 * map entry (docs/format.md). Thread-safe: the first call picks the
 * hardware instruction or builds the table, once per process. */
#ifndef OST_BASE_CRC32C_H
#define OST_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of p[0, n), continuing crc (0 to start a new one):
 * ost__crc32c(0, "123456789", 9) == 0xE3069283, and
 * ost__crc32c(ost__crc32c(0, a, na), b, nb) is the CRC of a then b.
 * Reads p only; any alignment. */
uint32_t ost__crc32c(uint32_t crc, const void *p, size_t n);
/* The same value, always from the table (the tests' check of the
 * hardware path against it). */
uint32_t ost__crc32c_soft(uint32_t crc, const void *p, size_t n);

#endif
