/* The LMDB engine's own objects and functions, for store/lmdb/ only: the
 * engine-independent part of store/ reaches LMDB through the table
 * ost__lmdb_engine (store/engine.h) and never includes this header. */
#ifndef OST_STORE_LMDB_ENGINE_H
#define OST_STORE_LMDB_ENGINE_H

#include <lmdb.h>

#include <uv.h>

#include "../../base/sort.h"
#include "../../serializer/internal.h"
#include "../engine.h"
#include "../maprec.h"
#include "../testctl.h"
#include "entries.h"
#include "guard.h"
#include "pagecheck.h"
#include "record.h"

/* ost_store_options.map_size's default (LMDB's map, 64 MiB: it grows). */
#define OST__DEFAULT_MAP ((size_t)64 << 20)

/* One per open store: the environment and its databases. */
struct ost__engine {
    const ost__host *host; /* the store's callbacks (engine.h) */
    ost_store *st;         /* the store handle they take (its messages) */
    char *path;            /* the real path of the directory */
    char shown[OST__PATH_SHOWN]; /* the path as messages show it (ost__path_show) */
    bool read_only;
    /* a format-1 store opened read-only: no map entries table */
    bool no_ments;
    /* the store's format (docs/format.md): 3 or more after any read-write
     * open; a read-only handle of an older store reads it as it is and
     * looks again at each snapshot (ost__format_refresh), since another
     * process may upgrade it meanwhile (atomic) */
    uint64_t format;
    uv_mutex_t lock; /* sessions, spare_gd */
    MDB_env *env;
    MDB_dbi recs, meta, classes, txlog, ments;
    /* "mapdels" (entries.c: the last commit that deleted each key), opened
     * by read-write handles only (made by the open when missing) */
    MDB_dbi mdels;
    bool has_mdels;
    /* readers: any LMDB transaction or view into the map; writer: a map
     * resize (which closes every read snapshot of the process) */
    uv_rwlock_t maplock;
    bool no_lock; /* read-only without lock.mdb (MDB_NOLOCK): it could not be written */
    bool made_dir; /* the open created the directory (drop removes it) */
    /* where the map lies, for bounds checks of what LMDB returns (a damaged
     * length must not send a read past the end of the file): changed only
     * under the maplock's write lock; file_size is refreshed when a value
     * seems to run past it (ost__in_file) */
    uintptr_t map_base;
    size_t map_size;
    uint64_t file_size;
    ost__sess *sessions; /* those with a read transaction (under en->lock) */
    /* the guard of the last session closed (under en->lock), for the next
     * session: its pages verified in a snapshot stay verified for a
     * session that reads the same one (a connection per phase or per
     * request verified every page it read again) */
    struct ost__gd *spare_gd;
    ost__engine *next_open; /* the process's open LMDB stores (env.c) */
};

struct ost__sess {
    ost__engine *e;
    MDB_txn *rtxn;  /* the read snapshot (reset when not live) */
    bool live;      /* rtxn is open */
    bool in_snap;   /* between snap_begin and snap_end */
    bool moved;     /* reopened inside the snapshot (a map resize closed it) */
    bool began;     /* the snapshot has been opened once since snap_begin */
    bool listed;    /* in e->sessions */
    unsigned pins;  /* nesting of pins (the maplock is held while > 0) */
    uint64_t gen;   /* counts the (re)openings of rtxn */
    /* reads of rtxn go through the guard (guard.h), bound to it at each
     * (re)opening; NULL until the first */
    ost__gd *gd;
    MDB_txn *wtxn;  /* the write transaction inside commit (NULL: none) */
    int mdb_rc;     /* the last LMDB result a write op translated */
    uint64_t apply_ns, commit_ns; /* commit: time applying and committing */
    ost__sess *next;
};

/* env.c: the environment's open (the engine's open: every check of the
 * directory and its files, the meta-page check, the environment, the
 * databases, a new store's meta and root, an upgrade) and close. */
int ost__lmdb_env_open(const ost__host *host, ost_store *st, const char *path,
                       const ost_store_options *opts, ost__engine **out);
void ost__lmdb_env_close(ost__engine *e);
/* A counter of the meta database dbi in t: get reads it (MDB_CORRUPTED
 * when it is not 8 bytes), put writes it. LMDB codes. */
int ost__lmdb_meta_get(MDB_txn *t, MDB_dbi dbi, const char *key, uint64_t *out);
int ost__lmdb_meta_put(MDB_txn *t, MDB_dbi dbi, const char *key, uint64_t val);
/* Removes the store's files (ost_store_drop, ost_store_drop_new). */
int ost__lmdb_drop(ost__engine *e, bool only_new);
/* The store's counters and sizes (ost_store_stat on LMDB). */
int ost__lmdb_stat(ost__engine *e, ost_store_stats *out);

/* Closes every open read transaction of en's engine sessions: the map is
 * being resized (en->maplock held for writing). They reopen at next use. */
void ost__lmdb_sess_reset_all(ost__engine *en);

/* verify.c: the walk of a check (ost_store_check) over the pinned
 * snapshot t: its pages and the previous snapshot's, each problem to
 * report; *problems counts them. 0, OST_ECORRUPT with the store's message
 * set (the pages are damaged: records were checked against their
 * checksums only, through the walker; *records gets how many), or
 * another code. */
int ost__lmdb_check_pages(ost__engine *en, MDB_txn *t, ost_check_fn report, void *ud,
                          uint64_t *problems, uint64_t *records);

/* The text for an LMDB or errno code rc after an operation on the files of
 * the store in dir (NULL: unknown): mdb_strerror(rc), except that a full
 * disk says so: ENOSPC, and also the EIO LMDB gives for a write cut short
 * and the MDB_PANIC of every transaction after it, when dir's filesystem
 * has less than 1 MiB left, become "no space left on device ..."; EDQUOT
 * "disk quota exceeded". A static string. */
const char *ost__io_strerror(const char *dir, int rc);
/* The same for the store en (en->path). */
const char *ost__mdb_strerror(const ost__engine *en, int rc);

/* Sets the calling thread's message of en's store (host->fail) and
 * returns code; ost__lmdb_clear empties it. */
int ost__lmdb_fail(const ost__engine *en, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ost__lmdb_clear(const ost__engine *en);

/* engine.c: the table of operations. */
extern const ost__engine_ops ost__lmdb_engine;

/* The OST_E* code of an LMDB or errno result rc (0 stays 0):
 * store/lmdb/errors.c, the engine's boundary. */
int ost__mdb_code(int rc);

/* Checks record v of oid as read from the store and reads its header:
 * 0, or one of OST__DMG_* (what is wrong; ost__damage_text says it in
 * words). Checksums are checked in format 3; in older formats the
 * reserved bytes must be zero. */
int ost__rec_open(ost__engine *en, uint64_t oid, const MDB_val *v, uint64_t *serial,
                  uint32_t *class_id);

/* Whether [p, p + n), returned by LMDB, lies in the file (or outside the
 * map: a write transaction's own pages are in memory). */
bool ost__in_file(ost__engine *en, const void *p, size_t n);

/* In a store of format < 3, reads the format again in t (another process
 * may have upgraded the store). */
void ost__format_refresh(ost__engine *en, MDB_txn *t);
/* The store's format is f (read from a snapshot's meta): when it is newer
 * than the engine's and one this library reads, the engine and the store
 * (host->set_format) take it. */
void ost__format_seen(ost__engine *en, uint64_t f);

/* entries.c: the map entries of a read snapshot through its session's
 * guard (guard.h), as ost__ent_get and ost__ecur_open read them through
 * liblmdb in a write transaction (store/lmdb/entries.h). Damaged pages are
 * OST__PAGE_DAMAGE, with the store's message naming the page; not an
 * OST_E* code (those are -1 to -99) nor an LMDB one: the engine turns it
 * into OST_ECORRUPT, keeping the message. */
#define OST__PAGE_DAMAGE (-30000)
/* ost__ent_each_map on a read snapshot, through the guard's checked
 * pages instead of liblmdb (fn may not ask for a drop: OST_EINVAL). */
int ost__ent_geach_map(ost__engine *en, ost__gd *gd, int (*fn)(void *ud, uint64_t map), void *ud);
int ost__ent_gget(ost__engine *en, ost__gd *gd, uint64_t map, const uint8_t *key, size_t klen,
                  ost__entry *e);
int ost__ecur_gopen(ost__engine *en, ost__gd *gd, uint64_t map, ost__ecur **out);

/* verify.c: the cheap check of dir/data.mdb's meta pages (0,
 * OST_ENOTFOUND when there is no data.mdb, OST_ECORRUPT or OST_EIO with one
 * line in msg), and the walk of every page of the snapshot of t (write:
 * t is the write transaction; its parent is walked) before liblmdb reads
 * its data. The walk reports each problem and returns 0, OST_ECORRUPT, or
 * another code with en's message set; *out (if not NULL) gets the walker
 * for further reads of the same snapshot, which the caller closes. */
int ost__meta_check(const char *dir, char *msg, size_t cap);
int ost__walk_snapshot(ost__engine *en, MDB_txn *t, bool write, ost__pc_report report, void *ud,
                       ost__pc **out);
/* The same, keeping the first problem in first (", and N more" after it
 * when there are others), for a one-line refusal. */
int ost__walk_first(ost__engine *en, MDB_txn *t, bool write, char *first, size_t cap);
/* A problem in one line, with the oids behind it when it hides records. */
void ost__problem_text(const ost__pc_problem *p, char *buf, size_t cap);
/* Rewrites every record and map entry of an older store with checksums,
 * inside write transaction t, and sets the format to 3. */
int ost__upgrade(ost__engine *en, MDB_txn *t, uint64_t from);
/* The id of class cls in transaction t (any): 0 and *id, MDB_NOTFOUND
 * when the store has none for it, or another LMDB code. */
/* Class ids by names: ost__class_find_name finds, ost__class_id_name finds
 * or adds (t writable). LMDB codes; EINVAL when the names are too long. */
int ost__class_find_name(ost__engine *en, MDB_txn *t, const char *m, size_t ml, const char *n,
                         size_t nl, uint32_t *id);
int ost__class_id_name(ost__engine *en, MDB_txn *t, const char *m, size_t ml, const char *n,
                       size_t nl, uint32_t *id);

/* Where liblmdb maps data.mdb now: the process's map list's mapping of
 * the file's inode at offset 0 of at least min bytes, into *base and
 * *size (0 and 0 when none); notes the file's size too. 0 or OST_EIO. */
int ost__lmdb_map_find(ost__engine *en, size_t min, uintptr_t *base, size_t *size);
/* Notes where liblmdb maps the file and how big the file is (the
 * engine's map_base, map_size, file_size), after every change of the map:
 * the environment's open, each resize (env.c, import.c). Call it under
 * the maplock's write lock, or before any other thread uses the store. */
void ost__lmdb_map_changed(ost__engine *en);

int ost__grow_map(ost__engine *en);
/* Cures an OST__REMAP result mdb_rc: MDB_MAP_RESIZED adopts the size
 * another process grew the map to (mdb_env_set_mapsize(env, 0), never
 * smaller than this process's), MDB_MAP_FULL doubles it (ost__grow_map).
 * Takes the maplock's write lock: call it without the read lock. 0 or an
 * LMDB code. */
int ost__remap(ost__engine *en, int mdb_rc);

/* Runs fn(en, t, ud) in a top-level LMDB transaction of its own (flags:
 * 0 or MDB_RDONLY) with en's maplock held for reading; commits t when fn
 * returns 0, aborts it otherwise. When the map is full or another process
 * grew it (OST__REMAP), grows it and runs fn again from the start, so fn
 * must not keep anything of a failed try. Returns 0, fn's result, or an
 * LMDB code (the caller translates it). store/lmdb/txn.c. */
int ost__lmdb_txn_retry(ost__engine *en, unsigned flags,
                        int (*fn)(ost__engine *en, MDB_txn *t, void *ud), void *ud);
int ost__ensure_room(ost__engine *en, size_t bytes, size_t items);
/* An LMDB result that ost__remap cures: the map is full, or another
 * process grew it past this process's mapping (MDB_MAP_RESIZED). */
#define OST__REMAP(rc) ((rc) == MDB_MAP_FULL || (rc) == MDB_MAP_RESIZED)
/* Takes the maplock for reading (the caller unlocks it, whatever the
 * result) and begins a top-level LMDB transaction, adopting a map that
 * another process grew. Returns an LMDB code. */
int ost__locked_txn_begin(ost__engine *en, unsigned flags, MDB_txn **t);

#endif
