/* The one interface between the engine-independent store and a storage
 * engine, as SQLite's sqlite3_vfs / sqlite3_io_methods: store/lmdb/ holds
 * every LMDB call, store/pg/ every libpq call, and the rest of store/
 * (connections, the object cache and its ghosts, commit preparation, the
 * bulk loader's pipeline, the group committer, check and pack logic,
 * ordered maps) calls only the operations below. docs/engines.md says how
 * to add an engine.
 *
 * Objects of the interface:
 * - ost__engine: one per open store, made by open, freed by close. Its
 *   operations are thread safe unless said otherwise.
 * - ost__sess: an engine session, one per user at a time (a connection, a
 *   loader, the group committer, a pack or a check). Not thread safe: one
 *   thread uses a session at a time. A session has at most one read
 *   snapshot and at most one write transaction open, never both.
 *
 * What is stored, in every engine (docs/format.md for LMDB's bytes):
 * - records: oid -> (serial, class id, state pickle);
 * - classes: class id (u32, from 1) <-> (module, name);
 * - meta: next oid, last serial, low (the serial at which the last pack
 *   removed records), root oid (0), format;
 * - a commit log: serial -> oids of existing objects the commit changed,
 *   which other sessions read as invalidations;
 * - map entries (ost__entry): (map oid, encoded key) -> (serial, value
 *   pickle), keys compared bytewise.
 * The state pickle is byte-identical in every engine: a store copied from
 * one engine to another holds the same pickles.
 *
 * Errors, one convention: every operation returns 0 or a negative OST_E*
 * code (OST_ERRNO_MAP, include/ostore/common.h), never an errno or an
 * engine's own code.
 * On failure it has set the calling thread's message of the store
 * (ost__st_fail) to one line that names the store (its shown address) and
 * the cause, except where a package's own outcome is said to carry it. */
#ifndef OST_STORE_ENGINE_H
#define OST_STORE_ENGINE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ostore/raw.h"
#include "ostore/store.h"

/* The interface's version (ost__engine_ops.version, ost__host.version):
 * 1, the operations and callbacks below. A later version adds members at
 * the end and says which, as sqlite3_io_methods' iVersion does. */
#define OST__ENGINE_VERSION 1

typedef struct ost__engine ost__engine;
typedef struct ost__sess ost__sess;
typedef struct ost__ecur ost__ecur;
typedef struct ost__import ost__import; /* an engine's bulk import (imp_*) */
typedef struct ost__engine_ops ost__engine_ops;

/* ---- what every engine stores the same way ------------------------------- */

/* The limits of a store's counters (meta). Oids are stored as pickle ints,
 * which ostore reads as signed 64-bit: every oid is below OST__OID_LIMIT,
 * so next_oid is at most OST__OID_LIMIT. Serials stay below the same bound
 * (a commit adds 1: no store gets near it). Class ids are u32 and start at
 * 1, so next_class is 1 to UINT32_MAX. Anything past these is damage, and
 * would wrap when the next oid, serial or class id is handed out. */
#define OST__OID_LIMIT ((uint64_t)1 << 63)
#define OST__SERIAL_LIMIT ((uint64_t)1 << 63)
#define OST__CLASS_LIMIT ((uint64_t)UINT32_MAX)

/* A map entry as an engine gives it: (map oid, encoded key) -> (serial,
 * value bytes). serial is the commit that wrote it (the per-key serial
 * that conflict checks compare); the value is a pickle (empty for a set).
 * Keys compare bytewise, shorter first when one is a prefix of the
 * other. */
typedef struct {
    uint64_t serial;
    const uint8_t *data; /* the value bytes: valid as the operation says */
    size_t len;
} ost__entry;

/* ---- a commit package: what one transaction writes ----------------------- */

/* A record of a package: its bytes are p->bytes[off, off + len). */
typedef struct {
    uint64_t oid;
    uint64_t read_serial; /* serial it was read at; 0 for a new object */
    size_t off, len;
    uint32_t cid;
} ost__rec;

/* A map entry of a package: key bytes at p->bytes[koff, koff + klen), the
 * value pickle at [voff, voff + vlen). */
typedef struct {
    uint64_t map;
    uint64_t base; /* the key's serial when the transaction read it (0: absent) */
    size_t koff, voff, vlen;
    uint16_t klen;
    uint8_t flags; /* OST__MENT_* */
} ost__ment;
#define OST__MENT_DEL 1   /* remove the key */
#define OST__MENT_BLIND 2 /* the loader's: no conflict check, overwrite */
/* a counter's add: map is the counter's oid, no key, the value is the
 * delta as 8 bytes little-endian; never conflicts (ost_counter_add) */
#define OST__MENT_COUNT 4
/* base of a key first looked at after the snapshot moved on: the commit
 * conflicts if anything wrote it since the transaction began */
#define OST__BASE_MOVED UINT64_MAX

/* What a commit writes, prepared by a connection (or a loader batch) and
 * handed to an engine's commit. The engine reads the records, references
 * and entries and sets the outcome (rc, serial, msg, conflict_oid); q is
 * the store's own part (its queue, wake-ups and conflict resolutions:
 * store/commit.c), which an engine never touches. */
typedef struct ost__pkg {
    ost__rec *recs;
    size_t nrecs, caprecs;
    uint8_t *bytes;
    size_t nbytes, capbytes;
    /* stored objects the records refer to without writing them, and the
     * meta.low (pack mark) the connection's cache was checked at: if a
     * pack ran since, commit checks that they still exist */
    uint64_t *refs;
    size_t nrefs, caprefs;
    uint64_t low;
    ost__ment *ments; /* map entries, grouped by map, each map's in key order */
    size_t nments, capments;
    /* the last commit the snapshot of the transaction that wrote ments saw
     * (ost_conn.txn_serial): a key absent at its first look and at commit
     * conflicts when a commit after it deleted the key (apply_maps) */
    uint64_t since;
    /* a connection's commit: the connection begins its next transaction
     * right after it (snap_adopt), unlike a loader's batch */
    bool next_txn;
    int rc;                /* outcome */
    uint64_t serial;       /* the commit's serial when it succeeded */
    uint64_t conflict_oid; /* the object of an OST_ECONFLICT (UINT64_MAX: none) */
    char msg[320];
    struct ost__pkgq *q;
} ost__pkg;

/* The kinds of conflict ost__host.conflict words. CHANGED: commit cur
 * wrote the record after the transaction read it at commit read; REMOVED:
 * pack removed a record the package rewrites; REF_GONE: pack removed an
 * object the package refers to. */
#define OST__CONFL_CHANGED 0
#define OST__CONFL_REMOVED 1
#define OST__CONFL_REF_GONE 2

/* Whether p's map entries are all counters' adds (OST__MENT_COUNT): the
 * engines' group paths that write records in one go take those too. */
static inline bool ost__pkg_counts_only(const ost__pkg *p) {
    for (size_t i = 0; i < p->nments; i++)
        if (!(p->ments[i].flags & OST__MENT_COUNT)) return false;
    return true;
}

/* The add a counter's entry me of p carries (8 bytes, little-endian). */
static inline int64_t ost__ment_delta(const ost__pkg *p, const ost__ment *me) {
    uint64_t v;
    __builtin_memcpy(&v, p->bytes + me->voff, 8);
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    v = __builtin_bswap64(v);
#endif
    return (int64_t)v;
}

/* ---- what the store lends an engine ------------------------------------- */

/* The callbacks the store hands an engine at open (as SQLite hands
 * sqlite3_vfs to each file): an engine reaches the rest of store/ only
 * through these, never through store_internal.h. st is the store handle
 * the engine was opened for (opaque to it). Thread safe. */
typedef struct ost__host {
    unsigned version; /* OST__ENGINE_VERSION */
    /* Sets the calling thread's message of st (ost_store_errmsg) to fmt
     * formatted and returns code; ost__eng_fail below wraps it. */
    int (*fail)(ost_store *st, int code, const char *fmt, va_list ap);
    /* Empties the calling thread's message of st. */
    void (*clear)(ost_store *st);
    /* The calling thread's message of st (ost_store_errmsg): valid until
     * the thread's next call on st. */
    const char *(*errmsg)(const ost_store *st);
    /* The store's format (docs/format.md) is now format: the engine says
     * so at open, and again when it sees another process upgrade the
     * store (a read-only handle of an older store). */
    void (*set_format)(ost_store *st, uint64_t format);
    /* Applies p's map entries under commit serial, inside commit, in s's
     * write transaction, through the engine's own ent_get_del, ent_put,
     * ent_del, ent_drop_map and map_count_add: conflict checks against
     * each key's serial, puts and deletes, the maps' counts (store/maps.c).
     * 0, or OST_ECONFLICT / OST_ECORRUPT with p->msg set, or another code. */
    int (*apply_maps)(ost_store *st, const ost__engine_ops *ops, ost__sess *s, ost__pkg *p,
                      uint64_t serial);
    /* Sets p's outcome message and conflict_oid for a conflict of kind why
     * (OST__CONFL_*) on oid, in the words docs/tutorial.md gives, the same
     * for every engine; returns OST_ECONFLICT. */
    int (*conflict)(ost__pkg *p, int why, uint64_t oid, uint64_t cur, uint64_t read);
    /* Whether record i of p may resolve a conflict (its class has a
     * resolver: ost_class_def.resolve). */
    bool (*resolvable)(const ost__pkg *p, size_t i);
    /* A conflict check found that commit cur (class id cid, state
     * pickle[0, n), read in the commit's transaction) replaced record i of
     * p after its transaction read it: runs the class's resolver. 0:
     * record i now holds the merged state, its read_serial is cur (the
     * engine goes on as if the check passed) and the merged state's
     * references are in p->refs. Otherwise OST_ECONFLICT, OST_ECORRUPT or
     * OST_ENOMEM, with p->msg set and record i unchanged. */
    int (*resolve)(ost_store *st, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                   const void *pickle, size_t n);
    /* Sets p->msg for rc, the failure of adding delta to the count of map
     * (a counter when counter); returns rc. */
    int (*count_fail)(ost__pkg *p, uint64_t map, int64_t delta, bool counter, int rc);
    /* The state pickle of a new store's root, of class (persistent.mapping,
     * PersistentMapping): *p gets a malloc'd copy of *n bytes, which the
     * engine frees. 0 or OST_ENOMEM. */
    int (*root_state)(ost_store *st, uint8_t **p, size_t *n);
} ost__host;

/* host->fail with the arguments of printf. */
static inline int ost__eng_fail(const ost__host *host, ost_store *st, int code, const char *fmt,
                                ...) __attribute__((format(printf, 4, 5)));
static inline int ost__eng_fail(const ost__host *host, ost_store *st, int code, const char *fmt,
                                ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = host->fail(st, code, fmt, ap);
    va_end(ap);
    return rc;
}

/* The store's host table (store/host.c): what ost_store_open hands the
 * engine it opens, and what the conformance suite hands one it opens
 * directly. */
extern const ost__host ost__store_host;

/* What a read snapshot sees of the store's counters. */
typedef struct {
    uint64_t last_serial; /* the last commit the snapshot holds */
    uint64_t low;         /* meta.low: moves when a pack removes records */
    uint64_t next_oid;    /* first oid not yet handed out */
} ost__snapinfo;

/* One record as a snapshot holds it. The pickle stays valid until the
 * session's snapshot ends (LMDB: it points into the map; PostgreSQL: into
 * the session's result buffers, which the engine keeps until then). */
typedef struct {
    uint64_t serial;       /* the commit that wrote it */
    uint32_t cid;          /* its class id */
    const uint8_t *pickle; /* the state pickle, without any header */
    size_t len;
    /* Set by scan only, for a damaged record (pickle NULL, len 0): what is
     * wrong (static text) and its size as stored; NULL and 0 otherwise. */
    const char *damage;
    size_t stored;
} ost__recview;

/* A class of the class table: module and name, not NUL-terminated, valid
 * until the snapshot ends. */
typedef struct {
    uint32_t id;
    const char *module, *name;
    size_t mlen, nlen;
} ost__classview;

/* Called per record by get_many and scan: 0 goes on, anything else stops
 * the walk and is returned. */
typedef int (*ost__rec_fn)(void *ud, uint64_t oid, const ost__recview *r);

struct ost__engine_ops {
    unsigned version; /* OST__ENGINE_VERSION */
    const char *name; /* "lmdb", "postgresql", "mem": as ost_store_stat shows it */
    /* Engine properties (OST__ENG_*). */
    unsigned flags;

    /* Opens (creating it when o->create) the store at addr for st, checks
     * its schema and format version and tells the store its format
     * (host->set_format). st is a handle not open yet, which the engine
     * passes back to host's callbacks (its messages); host outlives the
     * engine. On failure nothing is left open and st's message says why.
     * ost_store_open (store/store.c) calls it for the first engine that
     * claims addr, every engine alike; the conformance suite
     * (tests/test_engine.c) calls it directly. */
    int (*open)(const ost__host *host, ost_store *st, const char *addr,
                const ost_store_options *o, ost__engine **out);
    /* The store's address as messages show it (show's), valid until
     * close: the store names itself so in its own messages. */
    const char *(*shown)(ost__engine *e);
    /* The real path of the store's directory, for engines whose stores
     * are files (ost_store_path); NULL otherwise. Valid until close. */
    const char *(*path)(ost__engine *e);
    /* Closes what open made. Every session is closed before. */
    void (*close)(ost__engine *e);
    /* Counts of ost_store_stat (records, bytes, ...) in one snapshot. */
    int (*stat)(ost__engine *e, ost_store_stats *out);

    int (*sess_open)(ost__engine *e, ost__sess **out);
    void (*sess_close)(ost__sess *s);

    /* ---- reads, in the session's snapshot -------------------------------- */

    /* Begins a read snapshot (REPEATABLE READ on PostgreSQL) and says what
     * it sees. An engine that must drop snapshots (LMDB when the map grows)
     * reopens it by itself at the next read; snap_moved then tells. */
    int (*snap_begin)(ost__sess *s, ost__snapinfo *info);
    void (*snap_end)(ost__sess *s);
    /* Optional (NULL: the store calls snap_end, then snap_begin): ends the
     * open snapshot and begins the next one, as those two would, in one
     * round trip (PostgreSQL: the COMMIT goes with the next BEGIN). The
     * store renews a transaction's snapshot this way at the boundary
     * after a commit or an abort. On failure no snapshot is open. */
    int (*snap_renew)(ost__sess *s, ost__snapinfo *info);
    /* Optional (NULL: the store renews): at the boundary right after this
     * session's package committed with serial `serial`, ends the open
     * snapshot and begins one from a view the engine took after that
     * commit, in no round trip of the session's own (PostgreSQL: the view
     * the group committer polled right after the group's COMMIT, which
     * the session's first read then imports). The snapshot is exactly
     * what snap_begin at the view's serial would see, and *info says it;
     * changes(after, the view's serial), after being the serial up to
     * which the store has applied invalidations, is served without a
     * round trip.
     * 0 on success; OST_ENOTFOUND, with nothing changed (the open
     * snapshot still open), when the engine has no view that new; another
     * code on failure, with no snapshot open. */
    int (*snap_adopt)(ost__sess *s, uint64_t serial, uint64_t after, ost__snapinfo *info);
    /* Whether the snapshot was reopened since snap_begin (it holds newer
     * data: the store then applies invalidations at the next boundary
     * only). Clears the flag. */
    bool (*snap_moved)(ost__sess *s);
    /* Pins the snapshot: what reads return (record and class views, entry
     * bytes) stays valid until the matching unpin, and nothing reopens the
     * snapshot meanwhile. Pins nest. A read outside a pin pins for its own
     * duration only: its views are then valid until the next call on the
     * session (LMDB: a map resize may unmap them; PostgreSQL keeps them
     * until snap_end). pin reopens a snapshot closed since (snap_moved
     * then tells); on failure nothing is pinned. */
    int (*pin)(ost__sess *s);
    void (*unpin)(ost__sess *s);
    /* Optional (NULL: the engine keeps nothing for its views, as LMDB,
     * whose views are its map): a mark of what the session keeps for the
     * views its reads returned, and the release of what it kept after a
     * mark, whose views the caller no longer uses. PostgreSQL keeps its
     * results until snap_end otherwise: a caller that reads the whole
     * store in one snapshot (pack's mark) releases each batch. */
    size_t (*views_mark)(ost__sess *s);
    void (*views_release)(ost__sess *s, size_t mark);
    /* The record of oid: 0, OST_ENOTFOUND (message "oid N: no such
     * object"), OST_ECORRUPT (its checksum or header is wrong). */
    int (*get)(ost__sess *s, uint64_t oid, ost__recview *r);
    /* The records of oids[0, n) in one round trip where the engine can:
     * fn for each one found, in any order; missing oids are skipped. */
    int (*get_many)(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud);
    /* The records with from <= oid < to in oid order (to 0: no end),
     * fn for each. Damaged records reach fn with r->len 0 and the
     * message of the store set, when fn must know (check, salvage). */
    int (*scan)(ost__sess *s, uint64_t from, uint64_t to, ost__rec_fn fn, void *ud);
    /* The oids of existing objects changed by commits after..upto (both
     * from the snapshot's view): fn per oid with the serial of the commit
     * that changed it, in serial order (an oid repeats when several
     * commits changed it). *gap is set
     * when the log no longer reaches back to after + 1 (a pack trimmed it):
     * the caller then invalidates everything it holds. */
    int (*changes)(ost__sess *s, uint64_t after, uint64_t upto,
                   void (*fn)(void *ud, uint64_t oid, uint64_t serial), void *ud, bool *gap);
    /* The class of id: OST_ENOTFOUND when the table has none. */
    int (*class_get)(ost__sess *s, uint32_t id, ost__classview *out);
    /* Every class of the table, in id order. */
    int (*class_each)(ost__sess *s, int (*fn)(void *ud, const ost__classview *c), void *ud);

    /* ---- writes ---------------------------------------------------------- */

    /* The id of class (module, name); when the table has none and create,
     * adds it in a durable transaction of its own (OST_EREADONLY on a
     * read-only store), else OST_ENOTFOUND. Thread safe; ids never change
     * meaning. */
    int (*class_id)(ost__engine *e, const char *module, size_t mlen, const char *name,
                    size_t nlen, bool create, uint32_t *id);
    /* Reserves want new oids: the caller owns [*first, *first + want).
     * Durable and thread safe; never hands out an oid twice. OST_ELIMIT
     * past 2^63. */
    int (*reserve_oids)(ost__engine *e, uint64_t want, uint64_t *first);
    /* Commits packages pkgs[0, n): each one atomically and on its own (a
     * conflict in one drops that one alone), each with the next serial in
     * commit order. Per package it sets p->rc (0, OST_ECONFLICT with
     * p->conflict_oid, or another code) with p->msg, and p->serial; all of
     * them are durable (per the store's durability) when it returns. The
     * checks, exactly as docs/tutorial.md states them: a record whose
     * read_serial is not 0 must still have that serial (else OST_ECONFLICT
     * "conflict on oid N: commit S changed it after this transaction read
     * it (at commit R)"), unless the record is one whose class resolves
     * conflicts (host->resolvable): then, before anything of p is
     * written, the engine hands the committed record's class id and state
     * to host->resolve and goes on if it merged; when meta.low differs
     * from p->low, every oid of p->refs must still exist (else
     * host->conflict's REF_GONE); map entries through host->apply_maps,
     * which checks them. A package that fails leaves nothing of itself.
     * Returns 0, or a code for a failure of the whole call (the disk, the
     * server), which every package then carries too. */
    int (*commit)(ost__sess *s, ost__pkg *const *pkgs, size_t n);

    /* ---- pack and maintenance -------------------------------------------- */

    /* Removes, in one durable transaction, every record whose oid keep(ud,
     * oid) refuses and that no commit after serial `mark` wrote, with its
     * map entries; sets meta.low to the new last serial and trims the
     * commit log below it. *removed gets the count. */
    int (*sweep)(ost__sess *s, uint64_t mark, bool (*keep)(void *ud, uint64_t oid), void *ud,
                 uint64_t *removed);

    /* ---- map entries (ost__entry) ------------------------------------------
     * In the session's snapshot, or, called from inside commit (by
     * host->apply_maps), in the commit's write transaction. An entry
     * cursor is used while its session is pinned (pin): after an unpin the
     * engine may have reopened the snapshot, and the cursor must be
     * reopened (LMDB then answers OST_EBUSY). */
    /* Reads entry (map, key): 0, OST_ENOTFOUND, OST_ECORRUPT (damaged). */
    int (*ent_get)(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *e);
    /* Writes entry (map, key) = (serial, data[0, len)): *existed says
     * whether the key was there, *append whether it went after the map's
     * last key (either may be NULL). */
    int (*ent_put)(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, uint64_t serial,
                   const void *data, size_t len, bool *existed, bool *append);
    /* Removes entry (map, key) (0 or OST_ENOTFOUND) and records that commit
     * `serial` deleted it, for ent_get_del: LMDB's database "mapdels",
     * PostgreSQL's table ost_mapdels (docs/format.md, docs/postgresql.md),
     * one record per key, which the key's next delete overwrites. */
    int (*ent_del)(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, uint64_t serial);
    /* Inside commit only: reads entry (map, key) as ent_get does (0,
     * OST_ENOTFOUND, OST_ECORRUPT), and, when it is absent, sets *deleted
     * to the serial of the last commit that deleted it (ent_del's record;
     * 0 when none is recorded; 0 too when the entry is there). Commits
     * check keys with it (store/maps.c, ost__maps_apply): a key absent at
     * a transaction's first look and at its commit was written meanwhile
     * exactly when its record is newer than the transaction's snapshot. */
    int (*ent_get_del)(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *e,
                       uint64_t *deleted);
    /* Writes (ent_put, ent_del, ent_drop_map, map_count_add) only inside
     * commit: LMDB answers OST_EINVAL "a write outside a commit".
     * ent_drop_map removes every entry of map and its deletion records;
     * *n (if not NULL) gets how many entries went. */
    int (*ent_drop_map)(ost__sess *s, uint64_t map, uint64_t *n);
    /* A cursor over the entries of one map, in key order. seek positions
     * at the first entry >= key (forward) or the last <= key (reverse);
     * key NULL: the map's first (forward) or last (reverse) entry. seek and
     * step: 0 or OST_ENOTFOUND (no such entry, the map's end). get: the
     * entry the cursor is on, key bytes without the map oid, valid until
     * the cursor moves; OST_ECORRUPT when it is damaged (*key and *klen
     * set all the same). */
    int (*ecur_open)(ost__sess *s, uint64_t map, ost__ecur **out);
    int (*ecur_seek)(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse);
    int (*ecur_step)(ost__ecur *ec, bool reverse);
    int (*ecur_get)(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e);
    void (*ecur_close)(ost__ecur *ec);
    /* Optional (NULL: the engine reads no page ahead, as LMDB, whose
     * cursor reads its memory map). The entries the cursor holds already,
     * from its current one on in the direction asked (PostgreSQL: the rest
     * of the page it fetched), fn(ud, key, klen, entry) for each, with no
     * round trip; fn stops the walk by returning non-zero. Returns how
     * many entries fn was given (0 when the cursor is on none). What fn
     * sees is valid until the cursor moves. store/maps.c reads the records
     * a page's values refer to in one get_many with it. */
    int (*ecur_ahead)(ost__ecur *ec, bool reverse,
                      int (*fn)(void *ud, const uint8_t *key, size_t klen, const ost__entry *e),
                      void *ud);
    /* Optional (NULL: entries always carry their value). With on, the
     * pages the cursor fetches from now on carry no values (ecur_get gives
     * an empty one: a walk of keys only reads none); with off, they carry
     * them again. Returns true when the entry the cursor is on came
     * without its value, so that a caller that needs it seeks again. */
    bool (*ecur_keys_only)(ost__ecur *ec, bool on);
    /* Optional (NULL: the store reads the entry with ent_get, then the
     * record with get). In the session's snapshot, ent_get's entry and, in
     * the same round trip, the record of the object its value refers to
     * when the value looks like a lone persistent reference as ostore
     * writes one (its pid's first int, the oid, whether the pid is the
     * int of formats 1 to 3 or format 4's (oid, class id): docs/format.md,
     * "References"): *ref gets that oid and *r
     * its record (valid as get's), or *ref UINT64_MAX when there is none.
     * A guess the caller checks against its own reading of the value. 0,
     * OST_ENOTFOUND (no entry), or as ent_get. */
    int (*ent_get_ref)(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *e,
                       uint64_t *ref, ost__recview *r);
    /* Calls fn(ud, map oid) once per map that has entries, in oid order;
     * fn returns 0 to go on or a negative code to stop. */
    int (*ent_each_map)(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud);
    /* The map's (or, counter true, the counter's) record: adds delta to
     * its count (ost__record_count_add's rules, store/maprec.h) and stamps it with serial,
     * inside commit. OST_ECONFLICT when the record is gone (pack removed
     * the map), ost__record_count_add's codes otherwise. */
    int (*map_count_add)(ost__sess *s, uint64_t map, int64_t delta, uint64_t serial,
                         bool counter);

    /* ---- raw access (include/ostore/raw.h) -------------------------------- */

    /* The counters of the session's snapshot (snap_begin before) into
     * *out: engine (the table's name), format, next_oid, last_serial,
     * next_class, records, entries and entry_bytes (what the engine can
     * tell cheaply, else 0). The LMDB fields (page_size, pages_used,
     * map_size) stay 0 in other engines. OST_ECORRUPT when a counter is
     * missing or damaged (the message names it). */
    int (*snap_stat)(ost__sess *s, ost_snap_stats *out);
    /* Checks the engine's own structures under the session's snapshot
     * beyond what reads check: 0 when sound, OST_ECORRUPT with the first
     * problem in first[0, cap) (", and N more" after it), or another code
     * with the store's message set. LMDB walks every page of the file;
     * PostgreSQL checks that the counters cover the rows (next_oid above
     * every oid, last_serial at least every serial, next_class above every
     * class id) and that every record's class is in the class table. */
    int (*verify)(ost__sess *s, char *first, size_t cap);

    /* ---- bulk import into a new store (ost_import_*) --------------------------
     * One write transaction from imp_begin to imp_commit or imp_abort, on
     * the calling thread: a failure anywhere, or an abort, leaves the store
     * exactly as it was. The caller (store/snap.c) has checked what does
     * not depend on the engine: class names, the final counters against
     * what was added, the format. The engine checks the order (oids ascend;
     * entries by map, then key), each map's record (of class
     * ostore.maps.OrderedMap with a value, or OrderedSet without: at
     * imp_entry or, PostgreSQL, at imp_commit) and its own limits; the
     * message says why. */

    /* Starts the import: the store must be new (no more than the root
     * ost_store_open made, next_oid 1, last commit 1), else OST_EEXIST
     * with what it holds; OST_EREADONLY on a read-only store; OST_EBUSY
     * when connections are open. Empties the store inside the transaction.
     * size_hint: bytes expected (0 unknown; LMDB grows its map to it). */
    int (*imp_begin)(ost__engine *e, uint64_t size_hint, ost__import **out);
    /* Adds class id -> (module, name): OST_EEXIST for an id or name given
     * twice. */
    int (*imp_class)(ost__import *im, uint32_t id, const char *module, size_t mlen,
                     const char *name, size_t nlen);
    /* Adds a record, pickle copied; oids ascend (else OST_EINVAL). */
    int (*imp_record)(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                      const void *pickle, size_t len);
    /* Adds a map entry (key and value copied); entries ascend by map, then
     * key (else OST_EINVAL). */
    int (*imp_entry)(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial, const void *value, size_t vlen);
    /* Writes the counters (format OST_STORE_FORMAT: what is imported has
     * what the current format has; low becomes last_serial + 1, the commit
     * log is empty) and commits durably; frees im whatever the result.
     * format is the exported store's, for the checks that depend on it. */
    int (*imp_commit)(ost__import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                      uint64_t next_class);
    /* Rolls everything back and frees im. NULL is allowed. */
    void (*imp_abort)(ost__import *im);
    /* Removes the store (its tables, its files), in one write transaction
     * that, when only_new, first checks that it is new (what imp_begin
     * takes): OST_EEXIST with what it holds otherwise, nothing removed.
     * The store then only closes (close). ost_store_drop_new,
     * ost_store_drop. */
    int (*drop)(ost__engine *e, bool only_new);

    /* ---- optional (NULL when the engine has no such thing) ------------------ */

    /* The check of the engine's own structures that ost_store_check runs
     * first, under the pinned snapshot of s, before anything reads through
     * them (LMDB: its pages, and the previous snapshot's, which liblmdb
     * trusts): each problem to report(ud, UINT64_MAX or an oid, 0,
     * OST_ECORRUPT, text); *problems counts them. 0 when the records may
     * be read (problems found in the previous snapshot only are counted),
     * OST_ECORRUPT with the store's message set when they may not (then
     * *records gets the records checked some other way), or another
     * code. */
    int (*check_pages)(ost__sess *s, ost_check_fn report, void *ud, uint64_t *problems,
                       uint64_t *records);
    /* Adds to *apply_ns and *commit_ns the time s spent, in its commits
     * since the last call, applying packages and committing them (writing
     * and syncing): the group committer's split (benchmarks). */
    void (*commit_split)(ost__sess *s, uint64_t *apply_ns, uint64_t *commit_ns);
};

/* The engine serializes writers itself (LMDB: one write transaction at a
 * time): the store sends commits through one committer thread, which
 * gives each group of packages to one commit call (one fsync). Without
 * it (PostgreSQL), every connection commits on its own session and the
 * server merges the flushes (its own group commit). */
#define OST__ENG_ONE_WRITER 1u
/* Snapshots may close by themselves (LMDB's map resize): see snap_moved. */
#define OST__ENG_SNAP_MAY_MOVE 2u

/* A read costs no round trip (LMDB reads its memory map): ost_prefetch
 * then reads nothing ahead but the ghosts it is given, and
 * ost_conn_get_many reads each record with get, without the read-ahead
 * table. */
#define OST__ENG_LOCAL_READS 4u
/* open writes a new store's root (in the transaction that makes the
 * store); otherwise ost_store_open writes it in a commit of its own. */
#define OST__ENG_MAKES_ROOT 8u
/* Reads trust the engine's own structures (LMDB: its pages), so pack runs
 * verify on its snapshot before it reads or deletes anything, and damage
 * stops it. */
#define OST__ENG_VERIFY_FIRST 16u

/* What an engine's salvage (ost__engine_entry.salvage) writes the new
 * store through: the public API (include/ostore/store.h, raw.h), handed
 * over by the store (store/snap.c) so that the engine names none of it. */
typedef struct {
    ost_store *(*store_new)(void);
    void (*options_init)(ost_store_options *o);
    int (*store_open)(ost_store *st, const char *addr, const ost_store_options *o);
    const char *(*store_errmsg)(const ost_store *st);
    void (*store_close)(ost_store *st);
    int (*import_begin)(ost_store *st, uint64_t size_hint, ost_import **out);
    int (*import_class)(ost_import *im, uint32_t id, const char *module, size_t mlen,
                        const char *name, size_t nlen);
    int (*import_record)(ost_import *im, uint64_t oid, uint64_t serial, uint32_t class_id,
                         const void *pickle, size_t len);
    int (*import_entry)(ost_import *im, uint64_t map, const uint8_t *key, size_t klen,
                        uint64_t serial, const void *value, size_t vlen);
    int (*import_commit)(ost_import *im, uint64_t format, uint64_t next_oid,
                         uint64_t last_serial, uint64_t next_class);
    void (*import_abort)(ost_import *im);
} ost__salvage_api;

/* An engine as the store's table of engines lists it (store/engines.c):
 * its addresses and its operations. An engine's folder defines one, in a
 * file that needs nothing else of the engine (no library of its own), so
 * that a program linked statically against libostore.a can leave the
 * engine out (ops then 0: see store/pg/addr.c) and still be told why its
 * address does not open. */
typedef struct {
    const char *label; /* "LMDB", "PostgreSQL", "in-memory": for messages */
    /* Whether addr (as given to ost_store_open) is this engine's. The
     * first engine of the table that claims it opens it; the last one
     * (LMDB) claims every path. */
    bool (*claims)(const char *addr);
    /* Copies addr, which this engine claims, into out[0, cap) (cap >= 8)
     * as messages show it: nothing secret (a password goes), control bytes
     * escaped (ost_store_addr_show). */
    void (*show)(const char *addr, char *out, size_t cap);
    /* Addresses are paths of files (ost_store_addr_is_path). */
    bool paths;
    /* The operations; NULL when this program was linked without them,
     * and then why, as the end of a sentence: "this program was linked
     * without the PostgreSQL engine (...)". */
    const ost__engine_ops *ops;
    const char *missing;
    /* Optional (NULL: the engine has none): ost_salvage for a store of
     * this engine at src (docs/recovery.md), which reads what is left of
     * it without trusting it and writes a new store at dst through api. */
    int (*salvage)(const ost__salvage_api *api, const char *src, const char *dst,
                   ost_salvage_fn report, void *ud, ost_salvage_stats *stats, char *msg,
                   size_t cap);
} ost__engine_entry;

/* The engines built in, in the order they are asked to claim an address,
 * NULL-terminated (store/engines.c): the last one claims every path. */
extern const ost__engine_entry *const ost__engines[];

#endif
