/* ostore raw access: what a store holds, record by record, as stored:
 * state pickles, the class table, the counters and the entries of maps,
 * without building objects; and the import of such records into a new
 * store with their oids, serials and class ids kept. For tools: the ostore
 * command-line tool reads and writes stores only through this header and
 * the rest of the public API (export, import, copy, ls, cat, refs, check,
 * info). docs/format.md says what the bytes mean. */
#ifndef OSTORE_RAW_H
#define OSTORE_RAW_H

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- snapshots ----------------------------------------------------------- */

/* A raw read-only snapshot of a store (ost_snap_open): an opaque handle. */
typedef struct ost_snap ost_snap;

/* Opens a read-only snapshot of st: what the last commit before the call
 * left (later commits are not seen), on any engine (LMDB: a read
 * transaction; PostgreSQL: a REPEATABLE READ transaction on a connection
 * of its own). It belongs to the calling thread; close it before the
 * store. 0, OST_EINVAL (st not open), OST_ENOMEM, or
 * the code of the store's engine with ost_store_errmsg saying why; *out
 * is NULL on failure. */
OST_EXTERN int ost_snap_open(ost_store *st, ost_snap **out);
/* Ends the snapshot and frees it, with its cursors' data. NULL is allowed.
 * Close every cursor of it before. */
OST_EXTERN void ost_snap_close(ost_snap *s);
/* The message of the snapshot's last failure ("" if none), owned by s,
 * valid until its next call. */
OST_EXTERN const char *ost_snap_errmsg(const ost_snap *s);

/* The counters of a snapshot, and what the engine tells of its space. */
typedef struct {
    const char *engine;   /* "lmdb" or "postgresql" (static) */
    uint64_t format;      /* the store's format (OST_STORE_FORMAT or older) */
    uint64_t next_oid;    /* the first oid not handed out */
    uint64_t last_serial; /* the last commit */
    uint64_t next_class;  /* the first class id not handed out */
    uint64_t records;     /* records in the snapshot */
    uint64_t entries;     /* map entries in the snapshot */
    uint64_t entry_bytes; /* bytes the engine uses for them (LMDB: their pages;
                           * PostgreSQL: their table with its index) */
    /* LMDB: page size, pages in use and the map size; 0 in other engines */
    uint64_t page_size, pages_used;
    uint64_t map_size; /* LMDB: the map size the meta page records (the writer's setting) */
} ost_snap_stats;
/* Fills *out. 0, OST_ECORRUPT (a counter is damaged: the message names
 * it), or the engine's code. */
OST_EXTERN int ost_snap_stat(ost_snap *s, ost_snap_stats *out);

/* The i-th class of the class table, in ascending id order: 0 with *id,
 * *module and *name (NUL-terminated, owned by s, valid until it closes),
 * OST_ENOTFOUND past the last one. Entries of the table that do not
 * decode are left out (ost_store_check reports the records that use
 * them). */
OST_EXTERN int ost_snap_class(ost_snap *s, size_t i, uint32_t *id, const char **module,
                              const char **name);

/* One record as stored. */
typedef struct {
    uint64_t oid;          /* its oid */
    uint64_t serial;       /* the commit that wrote it (0 when damaged) */
    uint32_t class_id;     /* its class (ost_snap_class; 0 when damaged) */
    const uint8_t *pickle; /* its state pickle (NULL when damaged): owned
                            * by the snapshot, valid until the next call
                            * on it or on the cursor that gave it */
    size_t len;            /* bytes of the pickle */
    size_t size;           /* bytes as stored (LMDB: 16-byte header + pickle;
                            * other engines: the same count, pickle + 16) */
    const char *damage;    /* NULL, or what is wrong with it (static text):
                            * its checksum, its header, its key */
} ost_raw_record;

/* The record of oid: 0 (a damaged one too: r->damage says), OST_ENOTFOUND,
 * or the engine's code. */
OST_EXTERN int ost_snap_get(ost_snap *s, uint64_t oid, ost_raw_record *r);

/* A cursor over the records of a snapshot in oid order. */
typedef struct ost_snap_cursor ost_snap_cursor;
/* Opens a cursor at the first record whose oid is >= from. 0, OST_ENOMEM
 * or the engine's code. */
OST_EXTERN int ost_snap_records(ost_snap *s, uint64_t from, ost_snap_cursor **out);
/* The next record: 0 with *r filled (r->damage set for a damaged one),
 * OST_ENOTFOUND past the last, or the engine's code (ost_snap_errmsg).
 * An LMDB record whose key is not an oid is skipped (ost_store_check
 * reports it). */
OST_EXTERN int ost_snap_next(ost_snap_cursor *c, ost_raw_record *r);
OST_EXTERN void ost_snap_cursor_close(ost_snap_cursor *c);

/* ---- map entries, as stored ---------------------------------------------- */

/* One entry of a map (docs/format.md, "mapents"). */
typedef struct {
    const uint8_t *key; /* the encoded key, owned by the snapshot, valid
                         * until the cursor moves */
    size_t klen;          /* bytes of the key */
    uint64_t serial;      /* the commit that wrote it */
    const uint8_t *value; /* the value pickle (empty for a set) */
    size_t vlen;          /* bytes of the value (0 for a set) */
    const char *damage;   /* NULL, or what is wrong (the key is still given) */
} ost_raw_entry;

/* A cursor over a map's entries as stored (ost_snap_entries): an opaque
 * handle. */
typedef struct ost_entry_cursor ost_entry_cursor;
/* Opens a cursor over the entries of map (an oid) in key order, from the
 * first key >= from[0, fromlen) (from NULL: the map's first). A map
 * without entries, or no map at all, gives an empty cursor. 0, OST_ENOMEM
 * or the engine's code. */
OST_EXTERN int ost_snap_entries(ost_snap *s, uint64_t map, const uint8_t *from, size_t fromlen,
                                ost_entry_cursor **out);
/* The next entry: 0 with *e filled (e->damage set for a damaged one),
 * OST_ENOTFOUND past the map's last, or the engine's code. */
OST_EXTERN int ost_raw_entry_next(ost_entry_cursor *c, ost_raw_entry *e);
OST_EXTERN void ost_entry_cursor_close(ost_entry_cursor *c);
/* The first oid above after that has map entries (after 0 starts at the
 * first: the root, oid 0, is never a map): 0 with *map set,
 * OST_ENOTFOUND when there is none, or the engine's code. */
OST_EXTERN int ost_snap_next_map(ost_snap *s, uint64_t after, uint64_t *map);

/* Checks the engine's own structures under the snapshot, beyond what
 * reading records checks. LMDB: every page of the file, with ostore's own
 * page reader, before liblmdb follows them. PostgreSQL (whose pages the
 * server checks itself): that the counters cover the rows (next_oid above
 * every oid, last_serial at least every serial, next_class above every
 * class id) and that every record's class is in the class table. 0 when
 * sound; OST_ECORRUPT with the first problem in ost_snap_errmsg (", and N
 * more" after it); or another code. */
OST_EXTERN int ost_snap_verify(ost_snap *s);

/* ---- import -------------------------------------------------------------- */

/* An import in progress (ost_import_begin): an opaque handle. */
typedef struct ost_import ost_import;

/* Starts an import into st, which must be new (only the root that
 * ost_store_open made with create) and have no connection open: what
 * `ostore import` and `ostore copy` use to rebuild a store exactly, on
 * any engine (PostgreSQL: records and entries go through COPY). Every
 * add goes into one transaction: an import that fails or is aborted
 * leaves the store as it was. size_hint (bytes, 0 if unknown) lets the
 * engine make room at once (LMDB grows its map). 0, OST_EREADONLY, OST_EEXIST (the store is
 * not new: the message says what it holds), OST_ENOMEM, or the engine's
 * code; the message is ost_store_errmsg's. */
OST_EXTERN int ost_import_begin(ost_store *st, uint64_t size_hint, ost_import **out);
/* Adds class id -> (module, name). OST_EEXIST for an id or a name given
 * twice; OST_EINVAL for id 0 or a module or name that is empty, too long,
 * holds a NUL byte or is not UTF-8. */
OST_EXTERN int ost_import_class(ost_import *im, uint32_t id, const char *module, size_t mlen,
                                const char *name, size_t nlen);
/* Adds a record (the pickle is copied as is); oids must ascend. */
OST_EXTERN int ost_import_record(ost_import *im, uint64_t oid, uint64_t serial, uint32_t class_id,
                                 const void *pickle, size_t len);
/* Adds a map entry: the map's record is imported already, of class
 * ostore.maps.OrderedMap (value is a pickle, not empty) or OrderedSet
 * (vlen 0); entries ascend by map, then by key. OST_EINVAL says why.
 * LMDB checks the map's record here; PostgreSQL (whose COPY cannot be
 * asked meanwhile) checks every map's at ost_import_commit, which then
 * fails with the same message and writes nothing. */
OST_EXTERN int ost_import_entry(ost_import *im, uint64_t map, const uint8_t *key, size_t klen,
                                uint64_t serial, const void *value, size_t vlen);
/* Writes the counters and the format and commits; frees im whatever the
 * result. The counters must fit what was imported (next_oid above every
 * oid, last_serial at least every serial, next_class above every class
 * id) and the store's limits, else OST_EINVAL and nothing is written. */
OST_EXTERN int ost_import_commit(ost_import *im, uint64_t format, uint64_t next_oid,
                                 uint64_t last_serial, uint64_t next_class);
/* Drops everything added and frees im. NULL is allowed. */
OST_EXTERN void ost_import_abort(ost_import *im);
/* Removes the store st has open if it is new (what ost_import_begin
 * takes: at most the root, no oid handed out, no map entries), so that an
 * import or copy into a store it created can fail without leaving one.
 * The check and the removal happen in one write transaction: a writer
 * that came meanwhile keeps the store (OST_EEXIST, nothing removed).
 * PostgreSQL drops the store's tables, after locking them. LMDB removes
 * data.mdb, then lock.mdb (one that cannot be removed stays: a store made
 * there later uses it), and the directory if this handle's open created
 * it and nothing else is in it. New means: nothing but the root that the
 * store's creation wrote, no commit since (not even of the root alone).
 * Caveat (LMDB): a process that has the store open meanwhile keeps its
 * open files, so its later commits go to the removed files; use it on a
 * store this process just created (as ostore import does), best opened
 * with the exclusive option. On success st is closed, as after a failed
 * open: ost_store_close frees it (or ost_store_open opens a store with it
 * again); any other call fails with OST_EINVAL. No connection, raw
 * snapshot (ost_snap_open) or import may be open: OST_EBUSY. 0,
 * OST_EEXIST, OST_EREADONLY, OST_EBUSY, OST_EINVAL, or the engine's code
 * (OST_EIO when data.mdb cannot be removed, or when another session holds
 * the PostgreSQL tables for 10 s); the message is ost_store_errmsg's. */
OST_EXTERN int ost_store_drop_new(ost_store *st);
/* Removes the store st has open, whatever it holds, as ost_store_drop_new
 * does without the check that it is new (like dropdb): the records, map
 * entries, classes and counters are gone for good. For a program that
 * owns the store and remakes it (ostore demo). Same rules and results,
 * without OST_EEXIST. */
OST_EXTERN int ost_store_drop(ost_store *st);

/* ---- limits and salvage ------------------------------------------------------ */

/* What a store can hold: oids below OST_OID_LIMIT (pickle ints are read as
 * signed 64-bit), serials below OST_SERIAL_LIMIT, class ids from 1 to
 * OST_CLASS_LIMIT. A counter past them is damage. */
#define OST_OID_LIMIT ((uint64_t)1 << 63)
#define OST_SERIAL_LIMIT ((uint64_t)1 << 63)
#define OST_CLASS_LIMIT ((uint64_t)UINT32_MAX)

/* What ost_salvage recovered and lost. */
typedef struct {
    uint64_t records;         /* records copied */
    uint64_t records_scanned; /* ... of them found by the scan, not in the tree */
    uint64_t entries;         /* map entries copied */
    uint64_t entries_scanned; /* ... found by the scan */
    uint64_t classes;         /* classes copied */
    uint64_t lost_records;    /* oids known to have had a record, not recovered */
    uint64_t lost_entries;    /* entries a map's count says it had, not recovered */
    uint64_t dropped_entries; /* entries of maps whose record is lost */
    uint64_t problems;        /* page-level problems the walk reported */
    uint64_t damaged;         /* records and entries in the trees that failed their checks */
    uint64_t format;          /* the damaged store's format (0: unknown) */
    uint64_t last_serial;     /* the new store's last commit */
    int root_lost;            /* the root was replaced by an empty one */
} ost_salvage_stats;

/* What salvage tells as it goes (kind): a page-level problem of the
 * damaged file, a record or entry not recovered (its oid, its class when
 * known, why), or how something was recovered. line is one line without a
 * newline, valid during the call. */
enum {
    OST_SALVAGE_DAMAGE, /* a page-level problem of the damaged file */
    OST_SALVAGE_LOST,   /* a record or entry not recovered */
    OST_SALVAGE_NOTE    /* how something was recovered */
};
typedef void (*ost_salvage_fn)(void *ud, int kind, const char *line);

/* Copies what still verifies of the damaged LMDB store in directory src
 * into a new store in directory dst (docs/recovery.md): src is read with
 * ostore's own page reader, never with liblmdb, and never written; dst
 * must not hold a store (it is made, and removed again when salvage
 * fails). 0, or a negative OST_E* code with one line in msg[0, cap):
 * OST_ENOTFOUND (no data.mdb), OST_ECORRUPT (nothing could be read),
 * OST_EEXIST (dst holds a store), OST_EIO, OST_ENOMEM. A store from which
 * some records were lost is a success: stats (if not NULL) and the
 * reports say what was lost. */
OST_EXTERN int ost_salvage(const char *src, const char *dst, ost_salvage_fn report, void *ud,
                           ost_salvage_stats *stats, char *msg, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
