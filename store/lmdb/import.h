/* Raw import of records with given oids, serials and class ids, and of map
 * entries, into a new store: what `ostore import` needs to rebuild a store
 * exactly from an export (docs/cli.md). Internal: not part of the API.
 *
 * Everything happens in one LMDB write transaction, so an import that
 * fails (bad input, map full, I/O) leaves the store as it was. The store
 * must be new: only the root that ost_store_open created (one record,
 * next_oid 1, last commit 1). No connection may be open on it, and the
 * transaction belongs to the calling thread from begin to commit/abort. */
#ifndef OST_STORE_IMPORT_H
#define OST_STORE_IMPORT_H

#include "../engine.h"

/* Grows the map to at least map_need bytes, starts the write transaction,
 * checks that the store is new and empties it. 0, OST_EREADONLY,
 * OST_EEXIST (the store is not new; the message says what it holds),
 * OST_ENOMEM, OST_EIO; ost_store_errmsg says why. */
int ost__import_begin(ost__engine *en, uint64_t map_need, ost__import **out);
/* Adds class id -> module.name to the class table. OST_EEXIST for a
 * repeated id or name. The caller (ost_import_class) has refused id 0 and
 * a module or name that is empty, too long, holds a NUL byte or is not
 * UTF-8. */
int ost__import_class(ost__import *im, uint32_t id, const char *module, size_t ml,
                      const char *name, size_t nl);
/* Adds a record; oids must ascend. The pickle is copied as is. */
int ost__import_record(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                       const void *pickle, size_t n);
/* Adds a map entry (docs/format.md, "mapents"): map's record must be
 * imported already, of class ostore.maps.OrderedMap (then val is the value
 * pickle, not empty) or OrderedSet (vlen 0); entries must ascend by map oid,
 * then by key. key and val are copied. OST_EINVAL (the message says why). */
int ost__import_ment(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial, const void *val, size_t vlen);
/* Writes the store format (OST_STORE_FORMAT: what was imported has
 * checksums) and the counters (meta.low becomes last_serial + 1: the txlog
 * is empty), commits and frees im. The caller (ost_import_commit) has
 * checked that the counters fit what was imported and the limits of
 * store_internal.h, and format against the entries. On failure nothing was
 * written, and im is freed too. */
int ost__import_commit(ost__import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                       uint64_t next_class);
/* Drops everything added and frees im. NULL is allowed. */
void ost__import_abort(ost__import *im);

#endif
