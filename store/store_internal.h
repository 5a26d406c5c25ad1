/* Internal structures of the store, shared by its files.
 *
 * The layers of store/, bottom first (docs/engines.md, "Layers of
 * store/", which the test layering checks): each file calls only files
 * listed before it, so no two call each other.
 *   store/msg.c       the handles' messages
 *   store/classes.c   the classes the store itself knows (root, maps)
 *   store/mkey.c      map keys as stored: kinds, encoding, decoding
 *   store/maprec.c    the count of a map's or a counter's record
 *   store/testctl.c   the test knobs
 *   store/oidset.c    flags per stored oid (pack and check)
 *   store/lmdb/, store/pg/ ...  the engines (store/engine.h only)
 *   store/engines.c   the table of engines
 *   store/commit.c    packages, class ids, the group committer
 *   store/conn.c      connections: cache, snapshots, transactions; it
 *                     reaches the maps and the loader above it only
 *                     through what they register (ost__txn_part,
 *                     ost__conn_on_freed)
 *   store/iter.c      iterators over a connection's records
 *   store/maps.c      persistent maps and counters
 *   store/host.c      the host table lent to the engines
 *   store/store.c     a store handle's open and close, ost_open
 *   store/loader.c    the bulk loader
 *   store/pack.c      pack and check
 *   store/snap.c      raw snapshots, import, drop, salvage
 *   store/errmsg.c    ost_errmsg */
#ifndef OST_STORE_INTERNAL_H
#define OST_STORE_INTERNAL_H

#include <uv.h>

#include "../base/crc32c.h"
#include "../base/endian.h"
#include "../base/sort.h"
#include "../serializer/internal.h"
#include "engine.h"
#include "maprec.h"
#include "ostore/maps.h"
#include "testctl.h"

/* The bytes a record costs beside its pickle, as the cache and the raw
 * API count them (LMDB's header: store/lmdb/record.h). */
#define OST_HDR_SIZE 16

/* A record of a package whose class resolves conflicts
 * (ost_class_def.resolve), with the state the transaction read it at:
 * what ost__pkg_resolve needs to merge. */
typedef struct {
    size_t rec;              /* its index in recs */
    ost_value cls;           /* the object's class (a reference) */
    uint32_t old_cid;        /* the class id of the record read */
    size_t old_off, old_len; /* the state read: bytes[old_off, + old_len) */
    bool resolved;           /* the commit writes a merged state */
} ost__resv;

/* The store's part of a package (ost__pkg.q, made with it by
 * ost__pkg_new): its place in the group committer's queue, how its
 * committer is woken, and its conflict resolutions. */
struct ost__pkgq {
    bool done;
    bool queued;       /* in the store's queue, not yet taken into a group */
    uv_sem_t sem;      /* posted once when done (a waited commit, not async) */
    uv_async_t *async; /* wakes a loop when done (async commit) */
    struct ost__pkg *next;
    struct ost__pkg *wnext; /* committers to wake after a group (its leader only) */
    ost__resv *resv; /* records that may resolve a conflict, by rec ascending */
    size_t nresv, capresv;
    /* the reader and writer of its resolutions (ost__pkg_resolve), made
     * at the first and kept with the package: one thread at a time
     * applies it */
    ost_reader *res_r;
    ost_writer *res_w;
};

/* A map's key kind: up to OST__MKIND_MAX elements 'i', 's', 'b'. */
#define OST__MKIND_MAX OST_MAP_KIND_MAX
typedef struct {
    uint8_t n;
    bool tuple;
    uint8_t el[OST__MKIND_MAX];
    char canon[64]; /* "int", "(int, str)" */
} ost__mkind;
typedef struct ost__map ost__map;

struct ost_store {
    uint32_t magic; /* OST__H_STORE (ost_errmsg) */
    bool no_ments; /* a format-1 store opened read-only: no map entries table */
    /* the store's format (docs/format.md): 3 (checksums) after any
     * read-write open; a read-only handle of an older store reads it as it
     * is and looks again at each snapshot (ost__format_refresh), since
     * another process may upgrade it meanwhile */
    uint64_t format;
    char *path;    /* the real path of the directory */
    char shown[OST__PATH_SHOWN]; /* the real path as messages show it (ost__path_show) */
    bool read_only;
    ost_durability durability;
    ost_registry *registry;
    ost_value root_cls;
    ost_value map_cls, set_cls; /* ostore.maps.OrderedMap and OrderedSet */
    ost_value counter_cls;      /* ostore.maps.Counter */
    uv_mutex_t lock;      /* the connection list, nraw */
    ost_conn *conns;
    size_t nraw;          /* raw snapshots and imports open (store/snap.c) */
    ost__nametab ctab;    /* class ids by name (under lock) */
    /* class ids of the current version (format 4) of classes with fields,
     * by class (references kept; under lock): commit.c */
    struct ost__vcid *vcids;
    size_t nvcids, capvcids;
    bool group_commit;
    /* group commit (store/commit.c): a queue of packages, applied a group
     * at a time by a leader (a committing thread) or the committer thread */
    bool gc_running, gc_stop;
    uv_thread_t gc_thread;
    uv_mutex_t gc_lock;
    uv_cond_t gc_cond, gc_done;
    ost__pkg *gc_queue, *gc_tail;
    size_t gc_qlen;     /* packages in the queue */
    size_t gc_nfollow;  /* of them, packages only the committer thread takes */
    size_t gc_want;     /* packages the next group waits a little for */
    bool gc_busy;       /* a group is being applied */
    size_t gc_cond_waiters; /* threads waiting on gc_done (async packages) */
    uint64_t gc_first_ns; /* when the queue's first package arrived */
    uint64_t gc_end_ns; /* when the last group ended */
    uint64_t gc_last_ns; /* how long the last group took to apply and sync */
    uint64_t gc_last_gather_ns; /* how long the last complete group took to gather */
    uint64_t gc_groups; /* groups committed (for tests and benchmarks) */
    uint64_t gc_led;    /* of them, groups a committing thread applied itself */
    uint32_t gc_epoch;  /* bumped after each group's packages are done (Linux: a futex) */
    /* where group commit's time went, in ns (for benchmarks): the queue
     * empty, gathering a group, applying its packages, committing
     * (writing and syncing) */
    uint64_t gc_idle_ns, gc_gather_ns, gc_apply_ns, gc_commit_ns;
    uint64_t uid;       /* names the handle's messages (per thread: store.c) */
    struct ost__msg *msgs; /* the messages, one per thread that failed in it (store.c) */
    uv_mutex_t msg_lock;   /* msgs */
    /* the engine (store/engine.h) and its object for this store: every
     * engine's own handles (LMDB's environment and databases, PostgreSQL's
     * connections) live in *eng, which only the engine's files see into */
    const ost__engine_ops *ops;
    ost__engine *eng;
    ost__sess *gc_sess; /* the committer's engine session */
    ost__pkg **gc_arr;  /* the committer's group as an array */
    size_t gc_cap;
};

/* Entries in a chunk of the cache (a power of 2). */
#define OST__ECHUNK_BITS 10
#define OST__ECHUNK ((size_t)1 << OST__ECHUNK_BITS)

/* One cached persistent object. */
#define OST__SERIAL_UNREAD UINT64_MAX

typedef struct {
    uint64_t oid;
    uint64_t serial; /* serial of the record the state came from (0: new;
                      * OST__SERIAL_UNREAD: a ghost made from a reference,
                      * its record not read yet) */
    ost_value obj;   /* a reference held by the cache; the size of its record
                      * when its state was loaded or stored is in obj
                      * (ost_inst_obj's pbytes) */
} ost__pent;

/* A participant in a connection's transactions: store/maps.c's maps, the
 * one there is. The connection (store/conn.c) calls it through c->part at
 * each step of a transaction, and never names it: the participant, above
 * conn.c, sets c->part when it first keeps state in the connection
 * (Lua's and libuv's way of letting a lower file call an upper one). */
typedef struct ost__txn_part {
    /* whether the transaction has changes of the participant's to commit */
    bool (*dirty)(ost_conn *c);
    /* adds them to the commit's package p: 0, or a code with the
     * connection's message set */
    int (*prepare)(ost_conn *c, ost__pkg *p);
    /* the transaction ended, committed or not: drop its pending state */
    void (*txn_end)(ost_conn *c, bool committed);
    /* the connection closes: free all the participant keeps in it */
    void (*free)(ost_conn *c);
} ost__txn_part;

struct ost_conn {
    uint32_t magic; /* OST__H_CONN (ost_errmsg) */
    ost_store *st;
    ost_conn *next;  /* in the store's list */
    ost_conn *tnext; /* in this thread's list */
    ost__sess *sess;      /* the engine session the connection reads in */
    bool snap_open;       /* its snapshot is open (snap_begin) */
    bool at_boundary;     /* the next snapshot starts a transaction */
    uint64_t snap_gen;    /* counts the snapshots opened (and reopened) */
    uint64_t txn_serial;  /* the last commit the transaction's first snapshot saw */
    bool snap_moved;      /* the snapshot was reopened inside the transaction
                           * (a map resize closed it): it holds newer data */
    uint64_t hint_oid, hint_gen; /* the record get_locked read last, */
    ost__recview hint;           /* valid while snap_gen == hint_gen */
    struct ost__pf *pf; /* records read ahead (ost_prefetch, map cursors) for
                         * the snapshot of its gen */
    ost_value *cls_by_id; /* classes by class id (references; 0: not yet) */
    /* beside each: the class version the id names (format 4), or NULL
     * when it names a class itself (conn.c) */
    struct ost__cver **ver_by_id;
    size_t ncls_by_id;
    /* the class ids the last classes referenced had (ost__conn_ref_pid):
     * a reference carries its object's class id; each class held */
    ost_value ref_cls[4];
    uint32_t ref_cid[4];
    unsigned ref_next;
    uint64_t low_seen;    /* meta.low when the cache was last checked */
    uint64_t seen_serial; /* invalidations applied up to this commit */
    /* The cache: one entry per object, entry i at echunks[i / OST__ECHUNK]
     * (conn.c's ent(); chunks never move, and at most one is part empty);
     * an object finds its entry through its own pidx (entry pidx - 1), and
     * an oid through oidtab, open addressing over entry index + 1 (0:
     * empty) with the oid's hash bits above the index bits (conn.c). */
    ost__pent **echunks;
    size_t nents, nechunks, capechunks;
    uint32_t *oidtab;
    size_t oidcap;    /* oidtab's slots: 4, 5, 6 or 7 times a power of 2 */
    size_t oidmax;    /* entries it takes before it grows: 4/5 of oidcap */
    uint32_t oididx;  /* the slot bits that hold an index: 2^k - 1 >= oidmax */
    /* oid + 1 -> the record (ost__old *) an object whose class resolves
     * conflicts was last loaded from: its transaction's "old" state
     * (ost__pkg_resv) */
    ost__ptrtab olds;
    ost_value *changed; /* objects changed in this transaction */
    size_t nchanged, capchanged;
    size_t cache_max;       /* objects with state kept at transaction ends */
    size_t cache_max_bytes; /* and their record bytes */
    ost_writer *w;
    ost_reader *r;
    ost_txn_hooks *hooks;
    /* commit */
    ost__pkg *pkg;
    bool async_pending;
    bool poisoned; /* a commit failed: only ost_abort goes on */
    uint64_t oid_next, oid_end, oid_block; /* reserved oids */
    size_t nnew_start; /* ents index where this commit's new objects begin */
    /* maps (maps.c) */
    const ost__txn_part *part; /* the maps' calls, once it keeps state here (NULL before) */
    ost__ptrtab maps;   /* oid + 1 -> ost__map */
    ost__map *mtouched; /* maps with pending entries in this transaction */
    uint64_t txn_gen;   /* counts transactions (cursors check it) */
    unsigned loaders;   /* bulk loaders open on the connection */
    struct ost__kind_str *kinds; /* canonical kind strings (ost_map_kind) */
    char msg[512];
};


/* Sets the calling thread's message of st (ost_store_errmsg) and returns
 * code; ost__st_clear empties it. */
int ost__st_fail(ost_store *st, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void ost__st_clear(ost_store *st);
/* ost__st_fail with a va_list (the host table's fail). */
int ost__st_vfail(ost_store *st, int code, const char *fmt, va_list ap);
int ost__c_fail(ost_conn *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A new store handle's messages (store/msg.c): gives st its uid, the
 * number that names its messages, and makes the lock of its per-thread
 * buffers. 0 or OST_ENOMEM. ost__msgs_free frees the buffers and the lock
 * (ost_store_close). */
int ost__msgs_init(ost_store *st);
void ost__msgs_free(ost_store *st);
/* The class value (a new reference) of a class table entry, through the
 * registry: 0 or OST_ENOMEM. A class version's entry, `Name(f1,f2)`
 * (format 4), gives the class Name. */
int ost__class_value(ost_store *st, const ost__classview *cv, ost_value *cls);
/* 1 for ostore.maps.OrderedMap, 2 for OrderedSet, OST__MC_COUNTER (3)
 * for Counter, 0 for other classes: the classes whose records the store
 * writes itself (store/classes.c). */
#define OST__MC_COUNTER 3
int ost__map_class(ost_value cls);
/* The state pickle of a new root of class cls (*inst keeps it alive until
 * the caller drops it): a PersistentMapping whose state is {'data': {}}.
 * 0 or OST_ENOMEM. */
int ost__root_dump(ost_value cls, ost_writer *w, ost_value *inst, const void **p, size_t *n);
/* Closes what ost_store_open opened (connections detached, committer
 * stopped, environment closed) and keeps the handle for another open or
 * ost_store_close. */
void ost__store_shut(ost_store *st);
int ost__conn_adopt(ost_conn *c, ost_value obj, uint64_t oid);
int ost__class_id_cached(ost_store *st, ost_value cls, uint32_t *id);
/* The record body of persistent instance o and its class id: in a store of
 * format 4 or later, the positional state under the class id of the
 * current version of o's class when ost__state_positional(o) holds (made
 * the first time it is used, as ost__class_id_cached makes class ids);
 * otherwise ost_dump_state's state under the class's own id. *data is the
 * writer's (valid until its next dump). Errors: the writer's (its message
 * says why; *cid untouched) or the class id's (the store's message). */
int ost__record_state(ost_store *st, ost_writer *w, ost_value o, const void **data, size_t *n,
                      uint32_t *cid, bool *wfail);
void ost__class_cache_free(ost_store *st);
ost__pkg *ost__pkg_new(void);
void ost__pkg_reset(ost__pkg *p);
void ost__pkg_free(ost__pkg *p);
int ost__pkg_add(ost__pkg *p, uint64_t oid, uint64_t read_serial, uint32_t cid,
                 const void *pickle, size_t n);
int ost__pkg_ref(ost__pkg *p, uint64_t oid);
/* Sets p's outcome message and conflict_oid for a conflict of kind why
 * (OST__CONFL_*, store/engine.h) on oid, in the words docs/tutorial.md
 * gives, the same for every engine; returns OST_ECONFLICT. */
int ost__pkg_conflict(ost__pkg *p, int why, uint64_t oid, uint64_t cur, uint64_t read);
/* Keeps, for the record just added to p by ost__pkg_add, the state its
 * transaction read (pickle[0, n) of class id cid) and its class cls
 * (borrowed; the package takes a reference): a conflict on it goes to the
 * class's resolver (ost__pkg_resolve). 0 or OST_ENOMEM. */
int ost__pkg_resv(ost__pkg *p, ost_value cls, uint32_t cid, const void *pickle, size_t n);
/* Whether record i of p may resolve a conflict (ost__pkg_resv kept it). */
bool ost__pkg_resolvable(const ost__pkg *p, size_t i);
/* An engine's conflict check found that commit cur (class id cid, state
 * pickle[0, n), read in the commit's transaction) replaced the record i
 * of p after its transaction read it: runs the class's resolver on the
 * state read, the committed one and the package's. 0: record i now holds
 * the merged state, its read_serial is cur (the engine goes on as if the
 * check passed) and the merged state's references are in p->refs.
 * Otherwise OST_ECONFLICT (no resolver, another class id, or it refused),
 * OST_ECORRUPT (a state that does not decode) or OST_ENOMEM, with p->msg
 * set and record i unchanged. Any thread; st's registry reads nested
 * values. */
int ost__pkg_resolve(ost_store *st, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                     const void *pickle, size_t n);
int ost__pkg_apply_direct(ost_store *st, ost__sess *s, ost__pkg *p);
int ost__committer_start(ost_store *st);
void ost__committer_stop(ost_store *st);
void ost__pkg_submit(ost_store *st, ost__pkg *p);
int ost__pkg_commit(ost_store *st, ost__pkg *p);
int ost__pkg_wait(ost_store *st, ost__pkg *p);
bool ost__pkg_is_done(ost_store *st, ost__pkg *p);
int ost__pkg_ment(ost__pkg *p, uint64_t map, uint64_t base, const uint8_t *key, size_t klen,
                  const void *val, size_t vlen, uint8_t flags);

/* conn.c, for maps.c */
/* Pins the connection's snapshot (opening it at a transaction boundary):
 * 0 and the caller unpins, or a code with the connection's message set
 * and nothing pinned. */
int ost__conn_pin(ost_conn *c);
void ost__conn_unpin(ost_conn *c);
/* ost_store_close: releases all of c but its handle, which stays valid
 * (c->st becomes NULL) until ost_conn_close frees it. */
void ost__conn_detach(ost_conn *c);
/* The failure of a call on a connection whose store closed: OST_EINVAL. */
int ost__conn_dead(ost_conn *c);
/* The cached object of oid or a new ghost (borrowed), as ost_conn_get;
 * maplock held, snapshot open. */
/* The pid of a reference to obj, stored under oid: the tuple (oid, class
 * id of obj's class), so that a reader makes its ghost without reading its
 * record (docs/format.md, "References"). A new reference in *pid; 0, or
 * the code of a failure to find or make the class id (message set). */
int ost__conn_ref_pid(ost_conn *c, ost_value obj, uint64_t oid, ost_value *pid);
/* A map entry's value pickle data[len] that is one reference (PROTO, the
 * pair pid, BINPERSID, STOP), read without the reader: a new reference to
 * its object (a ghost when not cached) in *out, and 0; 1 for any other
 * pickle, or a pid it cannot use (the reader then reads it and words the
 * failure). maplock held. */
int ost__conn_fast_ref(ost_conn *c, const void *data, size_t len, ost_value *out);
int ost__conn_get_locked(ost_conn *c, uint64_t oid, ost_value *obj);
/* Reads the records of oids[0, n) (reordered in place) that neither the
 * cache nor the read-ahead table holds into that table, in one get_many
 * where the engine can, so that making their ghosts and loading them
 * reads nothing more in this snapshot (a map cursor's page of values).
 * Snapshot pinned. A failure is not reported: the reads that need the
 * records then read them one at a time and say what is wrong. */
void ost__conn_readahead(ost_conn *c, uint64_t *oids, size_t n);
/* Takes r, the record of oid read in the pinned snapshot along with
 * something else (a map entry that refers to it), as the record the next
 * read of oid in this snapshot gives, unless the cache holds oid: making
 * its ghost and loading it then read nothing. r's views must stay valid
 * until the snapshot ends (PostgreSQL keeps its results until then). */
void ost__conn_hint(ost_conn *c, uint64_t oid, const ost__recview *r);
/* Whether the connection's cache holds oid (a ghost or not, its record
 * read or not: a ghost a format-4 reference made has not read it). */
bool ost__conn_holds(ost_conn *c, uint64_t oid);
/* The class of class id cid (a new reference; the connection keeps one
 * too for ids below 65536), or an LMDB code. maplock held. */
int ost__conn_class_of(ost_conn *c, uint32_t cid, ost_value *cls);
int ost__conn_new_oid(ost_conn *c, uint64_t *oid);
int ost__conn_cache_add(ost_conn *c, ost_value obj, uint64_t oid);
void ost__conn_forget(ost_conn *c, uint64_t oid);
void ost__conn_refresh(ost_conn *c);
/* Registers fn (store/loader.c's) to be called with each persistent
 * object that is freed, after the connections forget it: how the bulk
 * loader, above conn.c, hears of it without conn.c naming it. Any thread;
 * a later call replaces fn. */
void ost__conn_on_freed(void (*fn)(ost_value obj));

/* maps.c */
/* Parses key kind s into k: 0, OST_ELIMIT (a tuple of more than
 * OST__MKIND_MAX elements) or OST_EINVAL (not a kind). */
int ost__mkind_parse(const char *s, ost__mkind *k);
/* Encodes key (a shorter tuple too when prefix) for a map of kind k into
 * out[0..*n); on failure a code (OST_ETYPE, OST_ELIMIT, OST_EINVAL) and
 * the reason in err. */
int ost__mkey_encode(const ost__mkind *k, ost_value key, bool prefix, uint8_t *out, size_t *n,
                     char *err, size_t cap);
ost_value ost__mkey_decode(const ost__mkind *k, const uint8_t *p, size_t n);
size_t ost__map_record(uint8_t *out, size_t cap, const char *kind, uint64_t count);
bool ost__maps_touched(const ost_conn *c);
/* Applies p's map entries under commit serial through engine ops, in
 * session s's write transaction (inside ops->commit): conflict checks
 * against each key's serial, puts and deletes, the maps' counts. 0, or
 * OST_ECONFLICT / OST_ECORRUPT with p->msg set, or another code. */
int ost__maps_apply(const ost__engine_ops *ops, ost__sess *s, ost__pkg *p, uint64_t serial);
/* Adds delta to map's count in its record (ops->map_count_add, in the
 * commit's write transaction), with p->msg saying why on a conflict (the
 * map was packed away) or a damaged record. 0 or the code. */
int ost__maps_count_add(const ost__engine_ops *ops, ost__sess *s, ost__pkg *p, uint64_t map,
                        int64_t delta, uint64_t serial, bool counter);
/* Sets p->msg for rc, the failure of adding delta to the count of map (a
 * counter when counter), as ost__maps_count_add words it; returns rc. */
int ost__maps_count_fail(ost__pkg *p, uint64_t map, int64_t delta, bool counter, int rc);
int ost__map_encode_for(ost_conn *c, ost_value m, ost_value key, uint64_t *oid, bool *is_set,
                        uint8_t *kb, size_t *kl);
/* Sorts a loader batch's map entries by (map, key), keeping the order of
 * adding among equal keys, and lays the batch's bytes out in that order;
 * *ms is scratch memory kept between batches (freed by ost__msort_free). */
typedef struct ost__msort ost__msort;
int ost__pkg_sort_ments(ost__pkg *p, ost__msort **ms);
void ost__msort_free(ost__msort *ms);

/* The operations of the engine that claims addr (store/engines.c); NULL
 * when that engine is not in this program: ost__engine_missing then sets
 * st's message saying so and returns OST_EUNSUPPORTED. */
const ost__engine_ops *ost__engine_for(const char *addr);
/* The table's entry for addr (NULL for NULL). */
const ost__engine_entry *ost__engine_entry_for(const char *addr);
int ost__engine_missing(ost_store *st, const char *addr);

/* ost_txn_run's wait after its conflicted attempt n (1, 2, ...), in
 * microseconds: uniform in [0, min(50,000, 500 << (n - 1))], from a
 * per-thread generator (store/conn.c; tests check its bounds). */
unsigned ost__backoff_us(unsigned n);

#endif
