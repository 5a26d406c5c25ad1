/* The LMDB engine's record layout (docs/format.md, "Records"): a 16-byte
 * header (serial, class id, the checksum) before the state pickle. */
#include <string.h>

#include "record.h"

void ost__hdr_write(uint8_t *h, uint64_t serial, uint32_t class_id) {
    ost__le64(h, serial);
    ost__le32(h + 8, class_id);
    memset(h + 12, 0, 4);
}

/* The checksum record rec[0, n) of oid must carry (n >= OST_HDR_SIZE). */
static uint32_t rec_crc(uint64_t oid, const uint8_t *rec, size_t n) {
    uint8_t kb[8];
    ost__be64(kb, oid);
    uint32_t crc = ost__crc32c(0, kb, 8);
    crc = ost__crc32c(crc, rec, 12);
    return ost__crc32c(crc, rec + OST_HDR_SIZE, n - OST_HDR_SIZE);
}

void ost__rec_seal(uint8_t *rec, size_t n, uint64_t oid) {
    uint32_t crc = rec_crc(oid, rec, n);
    ost__le32(rec + 12, crc);
}

bool ost__rec_crc_ok(uint64_t oid, const void *rec, size_t n) {
    const uint8_t *h = rec;
    return n >= OST_HDR_SIZE + 2 && rec_crc(oid, h, n) == ost__rd_le32(h + 12);
}

const char *ost__damage_text(int dmg) {
    switch (dmg) {
    case OST__DMG_SHORT: return "too short for its header";
    case OST__DMG_CRC: return "its checksum does not match its bytes";
    case OST__DMG_BEYOND: return "its length runs past the end of the file";
    case OST__DMG_RESERVED: return "reserved header bytes are not zero";
    }
    return "damaged";
}
