/* The LMDB engine's records as stored (docs/format.md, "Records"): a
 * header of 16 bytes, the serial (u64 little-endian), the class id (u32
 * little-endian) and the CRC-32C of the record (format 3; zero before),
 * then the state pickle. store/lmdb/ only. */
#ifndef OST_STORE_LMDB_RECORD_H
#define OST_STORE_LMDB_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../../base/crc32c.h"
#include "../../base/endian.h"

#define OST_HDR_SIZE 16

/* Whether rc is one of ours (an OST_E* code, -1 to -99), not liblmdb's
 * (its MDB_* codes are negative too, from -30799; errno values positive). */
#define OST__OURS(rc) ((rc) < 0 && (rc) > -100)


/* Writes a record header: serial, class id, a zero checksum. */
void ost__hdr_write(uint8_t *h, uint64_t serial, uint32_t class_id);
/* Stores the checksum of record rec[0, n) of oid in its header (bytes
 * 12..15): the CRC-32C of the oid (8 bytes big-endian), the header's
 * first 12 bytes and the pickle. Call it after the pickle is in place. */
void ost__rec_seal(uint8_t *rec, size_t n, uint64_t oid);
/* Whether record rec[0, n) of oid carries the checksum its bytes give
 * (format 3); false for one too short to hold a header and a pickle. */
bool ost__rec_crc_ok(uint64_t oid, const void *rec, size_t n);
#define OST__DMG_SHORT 1    /* too short for its header */
#define OST__DMG_CRC 2      /* the checksum does not match */
#define OST__DMG_BEYOND 3   /* its length runs past the end of the file */
#define OST__DMG_RESERVED 4 /* format 1 or 2: reserved header bytes not zero */
/* What damage dmg (OST__DMG_*) is, in words: a static string. */
const char *ost__damage_text(int dmg);

#endif
