/* The ordered entries of maps as LMDB's engine keeps them
 * (store/lmdb/entries.c): only store/lmdb/ calls these, and the engine
 * table's ent_* and ecur_* operations (store/engine.h), which store/maps.c
 * uses on any engine, translate their results.
 *
 * An entry is (map oid, encoded key) -> (serial, value bytes): serial is
 * the commit that wrote it (the per-key serial that conflict checks
 * compare), the value bytes are a pickle (empty for a set). Keys compare
 * bytewise, shorter first when one is a prefix of the other.
 *
 * txn is an MDB_txn *, read-only or read-write as the call needs.
 * Results: 0, OST_ENOTFOUND, another OST_E* code (-1 to -99: OST__OURS),
 * or an LMDB code (errno values and MDB_* codes, which are negative from
 * -30799), which the LMDB engine translates with ost__ent_code (and which
 * may ask it to grow the map and retry). */
#ifndef OST_STORE_LMDB_ENTRIES_H
#define OST_STORE_LMDB_ENTRIES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine.h"

/* Reads entry (map, key): 0, OST_ENOTFOUND, OST_ECORRUPT (damaged). */
int ost__ent_get(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                 ost__entry *e);
/* Writes entry (map, key) = (serial, data[0..len)). *existed (if not
 * NULL) says whether the key was there before. append (if not NULL) is a
 * hint for keys given in ascending order: while *append is true the key
 * is first tried as beyond every key (a cheap append); when it is not,
 * *append becomes false and the put goes the usual way. */
int ost__ent_put(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                 uint64_t serial, const void *data, size_t len, bool *existed, bool *append);
/* Removes entry (map, key): 0 or OST_ENOTFOUND. */
int ost__ent_del(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen);
/* The serial of the last commit that deleted (map, key) into *serial (0:
 * no record): 0, OST_ECORRUPT (a damaged record), or an LMDB code. */
int ost__ent_deleted(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t *serial);
/* Records that commit serial deleted (map, key), replacing the key's
 * record: 0 or a code. */
int ost__ent_del_record(ost__engine *en, void *txn, uint64_t map, const uint8_t *key, size_t klen,
                        uint64_t serial);
/* Removes the deletion records of each map for which gone(ud, map) is
 * true (pack: maps whose record is gone). */
int ost__ent_dels_sweep(ost__engine *en, void *txn, bool (*gone)(void *ud, uint64_t map), void *ud);
/* Removes every entry of map, and its deletion records; *n (if not NULL)
 * gets how many entries. */
int ost__ent_drop_map(ost__engine *en, void *txn, uint64_t map, uint64_t *n);

/* A cursor over the entries of one map, in key order (ost__ecur). */
int ost__ecur_open(ost__engine *en, void *txn, uint64_t map, ost__ecur **out);
/* Positions at the first entry >= key (forward) or the last <= key
 * (reverse); key NULL: the map's first (forward) or last (reverse) entry.
 * 0 or OST_ENOTFOUND (no such entry in the map). */
int ost__ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse);
/* Steps one entry on (or back): 0 or OST_ENOTFOUND at the map's end. */
int ost__ecur_step(ost__ecur *ec, bool reverse);
/* The entry the cursor is on: key bytes (without the map oid) and entry,
 * valid until the cursor moves. OST_ECORRUPT: the entry is damaged (its
 * checksum fails); *key and *klen are set all the same, e is empty. */
int ost__ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e);
void ost__ecur_close(ost__ecur *ec);
/* The engine a cursor reads. */
ost__engine *ost__ecur_engine(ost__ecur *ec);

/* Scans the maps that have entries: calls fn(ud, map oid) once per map
 * in oid order; fn returns 0 to go on, 1 to remove all of that map's
 * entries (txn must be writable then), or a negative code to stop. */
int ost__ent_each_map(ost__engine *en, void *txn,
                      int (*fn)(void *ud, uint64_t map), void *ud);

/* The engine's write transaction inside apply: adds delta to the count in
 * map's record (a counter's, counter true) and stamps it with serial.
 * OST_ECONFLICT when the record is gone (pack removed the map), and
 * ost__record_count_add's codes (OST_ECORRUPT: not such a record). */
int ost__map_count_add(ost__engine *en, void *txn, uint64_t map, int64_t delta, uint64_t serial,
                       bool counter);
/* The OST_E* code and the text of an engine code (a positive result). */
int ost__ent_code(int rc);
const char *ost__ent_strerror(int rc);

/* Checks an entry given as stored (the engine's key and value bytes, as a
 * salvage or check reads them) and fills e: 0 or OST_ECORRUPT. */
int ost__ent_check(ost__engine *en, const void *key, size_t klen, const void *val, size_t vlen,
                   ost__entry *e);
/* Whether a format-3 entry value val[0, vlen) under the engine's key
 * (map oid included) carries the checksum its bytes give. */
bool ost__ent_crc_ok(const void *key, size_t klen, const void *val, size_t vlen);
/* The size of the stored value of an entry whose pickle has len bytes,
 * and that value made in out (key: the engine's key, map oid included). */
size_t ost__ent_vsize(size_t len);
void ost__ent_fill(const void *key, size_t klen, void *out, uint64_t serial, const void *data,
                   size_t len);
/* Rewrites every entry of an older store in the current layout (with its
 * checksum) inside write transaction txn; *n gets how many. */
int ost__ent_upgrade(ost__engine *en, void *txn, uint64_t *n);
#endif
