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
 * - map entries (store/entries.h semantics): (map oid, encoded key) ->
 *   (serial, value pickle), keys compared bytewise.
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

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ostore/raw.h"
#include "ostore/store.h"

typedef struct ost__engine ost__engine;
typedef struct ost__sess ost__sess;
typedef struct ost__pkg ost__pkg;
typedef struct ost__ecur ost__ecur;
typedef struct ost__import ost__import; /* an engine's bulk import (imp_*) */
/* an entry as entries.h defines it */
#include "entries.h"

/* The test knobs an engine reads, counts or calls (OST__KNOB,
 * OST__COUNT, OST__HOOK): constants and nothing in builds without them. */
#include "testctl.h"

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

typedef struct ost__engine_ops {
    const char *name; /* "lmdb", "postgresql": as ost_store_stat shows it */
    /* Engine properties (OST__ENG_*). */
    unsigned flags;

    /* Whether addr (a path or a URI, as given to ost_store_open) is this
     * engine's. The first engine that claims it opens it; LMDB claims the
     * rest (a path). */
    bool (*claims)(const char *addr);
    /* Opens (creating it when o->create) the store at addr for st, checks
     * its schema and format version, and fills st->shown. st is a handle
     * not open yet (OST_EINVAL otherwise). On failure nothing is left
     * open. ost_store_open (store/store.c) calls it for the first engine
     * that claims addr, every engine alike; the conformance suite
     * (tests/test_engine.c) calls it directly. */
    int (*open)(ost_store *st, const char *addr, const ost_store_options *o, ost__engine **out);
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
     * conflicts (ost__pkg_resolvable): then, before anything of p is
     * written, the engine hands the committed record's class id and state
     * to ost__pkg_resolve and goes on if it merged; when meta.low differs from p->low, every oid of
     * p->refs must still exist; map entries as store/maps.c checks them.
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

    /* ---- map entries (store/entries.h says what each does) ------------------
     * In the session's snapshot, or, called from inside commit (by
     * ost__maps_apply), in the commit's write transaction. An entry
     * cursor is used while its session is pinned (pin): after an unpin the
     * engine may have reopened the snapshot, and the cursor must be
     * reopened (LMDB then answers OST_EBUSY). */
    int (*ent_get)(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *e);
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
     * ent_drop_map removes the map's deletion records too. */
    int (*ent_drop_map)(ost__sess *s, uint64_t map, uint64_t *n);
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
    int (*ent_each_map)(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud);
    /* The map's (or, counter true, the counter's) record: adds delta to
     * its count and stamps it with serial, inside commit, as entries.h's
     * ost__map_count_add says (ost__record_count_add's rules). */
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
} ost__engine_ops;

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

/* The engines built in, in the order they are asked to claim an address;
 * the last one (LMDB) claims every path. */
extern const ost__engine_ops ost__lmdb_engine;
/* The in-memory engine (store/mem/): "mem:" and "mem:NAME" addresses. */
extern const ost__engine_ops ost__mem_engine;
#ifdef OST_HAVE_POSTGRESQL
extern const ost__engine_ops ost__pg_engine;
#endif

#endif
