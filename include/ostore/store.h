/* ostore store: persistent objects under 64-bit oids in one store, kept
 * by one of two engines (an LMDB environment in a directory, or tables in
 * a schema of a PostgreSQL database: docs/engines.md), an object cache
 * with ghosts per connection, transactions with conflict detection, pack
 * and check.
 *
 * A store is shared by the threads of a process; a connection belongs to
 * one thread at a time and has its own object cache and transaction. The
 * root object (oid 0) is a persistent.mapping.PersistentMapping. Objects
 * become persistent when they are instances of a class registered with
 * persistent = true and are reachable from a stored object at commit. */
#ifndef OSTORE_STORE_H
#define OSTORE_STORE_H

#include "hooks.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Opaque handles: a store (ost_store_new, ost_store_open), shared by the
 * threads of a process, and a connection to it (ost_conn_open), used by
 * one thread at a time. */
typedef struct ost_store ost_store;
typedef struct ost_conn ost_conn;

/* Objects a new connection's cache keeps (ost_conn_set_cache_size). */
#define OST_CACHE_SIZE_DEFAULT 100000

/* Store format version (docs/format.md): 2 added the map entries, 3 a
 * checksum in every record and map entry, 4 positional records (the state
 * of an instance of a class with fields as a tuple, under the class id of
 * a class version that names the fields once). Stores of formats 1 to 3
 * open: read-only as they are, read-write after an upgrade to format 4
 * that the open does (once, in one transaction). */
#define OST_STORE_FORMAT 4

/* How a commit waits for the disk (ost_store_options.durability). The
 * PostgreSQL engine commits with synchronous_commit on for OST_SYNC_FULL
 * and off for the others (docs/postgresql.md). */
typedef enum {
    OST_SYNC_FULL = 0,   /* fsync data and meta at each commit */
    OST_SYNC_NOMETA = 1, /* MDB_NOMETASYNC: last commit may roll back on a crash */
    OST_SYNC_NONE = 2    /* MDB_NOSYNC: the OS decides; a crash may lose commits */
} ost_durability;

/* How ost_store_open opens a store: fill it with ost_store_options_init,
 * then set the fields to change. A zeroed struct means the same as the
 * defaults, so a compound literal naming only the fields to change does
 * too: ost_store_open(st, "shop.ostore", &(ost_store_options){.create =
 * true, .registry = reg}). */
typedef struct {
    bool create;               /* create the directory and store if missing */
    bool read_only;            /* open read-only: commits fail with OST_EREADONLY;
                                * see ost_store_open for a store whose lock.mdb
                                * this user cannot write */
    size_t map_size;           /* initial LMDB map size; grows by itself (0:
                                * 64 MiB) */
    ost_durability durability; /* how commits reach the disk */
    unsigned max_readers;      /* LMDB reader slots (connections + helpers) */
    ost_registry *registry;    /* classes (not owned; must outlive the store) */
    bool group_commit;         /* commits that meet are applied as one
                                * group with one fsync, by one of the
                                * committing threads (a lone commit by
                                * its own thread, at once) */
    unsigned prefetch_connections; /* PostgreSQL: server connections a
                                * connection's large read (ost_prefetch,
                                * ost_conn_get_many: 256 records or more)
                                * reads with at once, in one snapshot; 0 or
                                * 1: its own only (the default), up to 8.
                                * Each connection then opens N - 1 more
                                * with its first snapshot (by ost_conn_open),
                                * not inside its first large read. LMDB
                                * ignores it. */
    bool exclusive;            /* hold the store's exclusive lock while open:
                                * a second handle asking for it, in any
                                * process, fails to open with OST_EBUSY
                                * ("store is locked"). Opens without it are
                                * not stopped: it keeps apart the tools that
                                * rewrite a store over several transactions
                                * (ostore pack, import, copy and the demo's
                                * load). LMDB: an flock on data.mdb, released
                                * when the store closes or the process ends.
                                * PostgreSQL: a session advisory lock keyed
                                * by the store's schema, on the store's own
                                * server connection; a server restart drops
                                * it: the next reconnection (of that
                                * connection, or of any connection of the
                                * store, which checks it first) takes it
                                * again, or fails with OST_EBUSY when another
                                * handle took it meanwhile. */
} ost_store_options;

/* Fills o with the defaults: no create, read-write, 64 MiB map, full
 * durability, 126 readers, no registry (every class generic), no group
 * commit, prefetches on one server connection, not exclusive. */
OST_EXTERN void ost_store_options_init(ost_store_options *o);

/* New closed store handle. NULL on ENOMEM. After fork(), a child opens
 * the store with a handle of its own and never uses or closes the
 * parent's (LMDB's locks belong to the process). */
OST_EXTERN ost_store *ost_store_new(void);
/* Opens the store at path: a directory (the embedded LMDB engine) or, in
 * a build with the PostgreSQL engine, a database address
 * ("postgresql://...", "postgres://...", "postgres:" + a conninfo; see
 * docs/postgresql.md: create makes the schema). A database address is
 * OST_EUNSUPPORTED in a build without that engine, and in a program linked
 * statically that did not ask for it (docs/tutorial.md, "Building a
 * program"). "mem:" and "mem:NAME" open a store in this process's memory,
 * for tests (docs/engines.md, "The in-memory engine"): "mem:" a private
 * one, new at each open and gone at close; "mem:NAME" (NAME: 1 to 64 of
 * A-Z a-z 0-9 _ . -, else OST_EINVAL) one that every open of NAME in the
 * process shares, kept after its last close until ost_store_drop or the
 * process ends (OST_ENOTFOUND without create when there is none). Not
 * durable; no other process sees it (a directory so named opens as
 * "./mem:NAME"). For a directory:
 * returns 0, or OST_ENOTFOUND (no store and create is false), OST_EVERSION (another format), OST_ECORRUPT
 * (not an ostore store, damaged meta, or data.mdb or lock.mdb is not a
 * regular file: a FIFO, a directory or a device is refused before LMDB
 * opens it, since a FIFO would block the open; symbolic links to regular
 * files are followed), OST_EREADONLY (permission denied: the message says
 * what access is needed), OST_EIO, OST_EBUSY (already open in this
 * process, or o->exclusive and another handle holds the lock), OST_EINVAL;
 * ost_store_errmsg names the path (and the file).
 *
 * Read-only opens need only read access. LMDB writes its reader table in
 * lock.mdb even to read; when this user cannot write or create lock.mdb
 * (EACCES, EPERM, or a read-only filesystem), a read-only open goes on
 * without the lock file (MDB_NOLOCK). Caveat: then nothing protects this
 * reader from a writer: a process that commits to the store at the same
 * time may reuse pages this reader still reads, giving wrong data or
 * OST_ECORRUPT. Such an open is meant for stores nobody writes (archives,
 * another user's store, read-only media). A read-write open with no write
 * access fails with OST_EREADONLY. An open that fails while it creates an
 * LMDB store removes the files (and the directory) it made. */
OST_EXTERN int ost_store_open(ost_store *st, const char *path,
                              const ost_store_options *o);
/* Opens a store and a first connection to it in one call: a new handle
 * (ost_store_new) opened at path with o (ost_store_open), then
 * ost_conn_open. *st gets the handle also when the open fails, so that
 * ost_errmsg(*st) says why (close it with ost_store_close either way; it
 * is NULL only when no handle could be made: OST_ENOMEM); *c gets the
 * connection, or NULL on failure. Returns as ost_store_open, then as
 * ost_conn_open. */
OST_EXTERN int ost_open(const char *path, const ost_store_options *o, ost_store **st,
                        ost_conn **c);
/* Closes the store and frees the handle. NULL is allowed. Connections
 * still open are closed first (their transactions aborted, their caches
 * dropped: objects their holders keep become ghosts that cannot load),
 * but their handles stay valid: the only calls allowed on them are
 * ost_conn_errmsg and ost_conn_close, which frees the handle; other calls
 * fail with OST_EINVAL. Close each connection yourself, before or after:
 * a handle never closed stays allocated until the process ends. Iterators,
 * map cursors and loaders of those connections must be closed before
 * (docs/tutorial.md, "Lifetimes"). Call it on one thread, when no other
 * thread uses the store or its connections. */
OST_EXTERN void ost_store_close(ost_store *st);
/* Whether addr names a store directory, opened by the embedded LMDB
 * engine, rather than a database on a server (a "postgresql://",
 * "postgres://" or "postgres:" address) or a store in memory ("mem:"):
 * what tools check before they treat an address as a path (stat it, lock
 * its files). */
OST_EXTERN bool ost_store_addr_is_path(const char *addr);
/* Writes addr into dst[0, cap) as ostore's messages show a store, and
 * returns dst: a path as ost_path_show does; a database address without
 * its password (a URI's user:password@ becomes user@, a password=...
 * parameter or conninfo pair goes). cap must be at least 8; a buffer of
 * OST_PATH_SHOWN bytes always fits a path's form. */
OST_EXTERN char *ost_store_addr_show(char *dst, size_t cap, const char *addr);
/* The address of the open store: the real path of its directory (symbolic
 * links resolved), owned by st, valid until it closes; "" when st is not
 * open. */
OST_EXTERN const char *ost_store_path(const ost_store *st);
/* Message of the last failure on the store ("" if none). Per thread: a
 * failure on one thread never shows in another thread's message, and a
 * thread keeps the message of every store it uses. Owned by the store,
 * valid until the next call on the store from this thread or its close. */
OST_EXTERN const char *ost_store_errmsg(const ost_store *st);

/* What ost_store_stat tells of a store. */
typedef struct {
    uint64_t records;     /* objects stored */
    uint64_t bytes;       /* bytes of records (headers and pickles) */
    uint64_t next_oid;    /* the first oid no connection has reserved */
    uint64_t last_serial; /* id of the last commit */
    uint64_t map_size;    /* LMDB map size now (0 on PostgreSQL) */
} ost_store_stats;
/* Fills *out from one read snapshot. 0 or a code. */
OST_EXTERN int ost_store_stat(ost_store *st, ost_store_stats *out);

/* Removes the records unreachable from the root, and the entries of the
 * maps among them, on any engine (LMDB, PostgreSQL). It marks what the
 * root reaches (through references and map entries' values) in a read
 * snapshot, so commits of other connections and processes go on
 * meanwhile; it then catches up on a newer snapshot with what commits
 * since linked, and removes the rest in one write transaction (commits
 * wait for it), keeping every record a commit after the mark wrote. What
 * a commit links again in the short time between the last catch-up and
 * that transaction is the caveat: docs/tutorial.md. Other connections'
 * next transactions drop what was removed; a commit of theirs that refers
 * to a removed object fails with OST_ECONFLICT. Memory: two bits per oid
 * below meta.next_oid (or, when oids are sparse, per record, plus its
 * oid). removed (if not NULL) gets the count. Pack deletes only what it
 * knows to be unreachable: when a reachable record or map entry does not
 * decode, or a reference names an oid that has no record (damage can hide
 * a record that way, and what it refers to is then unknown), it removes
 * nothing and returns OST_ECORRUPT naming the first problem (ost_store_check
 * lists them all). OST_EREADONLY on a read-only store, OST_EBUSY when
 * another pack removed records meanwhile (nothing removed: run it again).
 * 0 or a code, with ost_store_errmsg naming the store and the cause. */
OST_EXTERN int ost_store_pack(ost_store *st, uint64_t *removed);

/* Flags of ost_store_pack_ex. */
#define OST_PACK_FORCE 1u /* pack a damaged store: a record or entry that does
                           * not decode counts as referring to nothing, and
                           * missing records are ignored. What only damaged
                           * data referred to is removed for good. */
/* ost_store_pack with flags (0 or OST_PACK_FORCE); OST_EINVAL for unknown
 * flags. */
OST_EXTERN int ost_store_pack_ex(ost_store *st, unsigned flags, uint64_t *removed);

/* One problem found by ost_store_check: oid's record does not decode
 * (missing 0), or holds a reference to oid `missing` that has no record. */
typedef void (*ost_check_fn)(void *ud, uint64_t oid, uint64_t missing,
                             int err, const char *msg);
/* Reads every record, on any engine, in one read snapshot: reports
 * records that do not decode (or whose class id is not in the class
 * table) and references to missing oids, with the holder, then each map's
 * entries against its kind and count, and entries without a map. A
 * reference to a higher oid than its holder's is reported after every
 * record was read. On LMDB it first walks the snapshot's pages (and the
 * previous snapshot's) with checks of its own. report may be NULL; msg is
 * valid during the call. *records (if not NULL) gets the records read.
 * Returns 0 when the store is sound, OST_ECORRUPT when problems were
 * reported, or another code (the message names the store). */
OST_EXTERN int ost_store_check(ost_store *st, ost_check_fn report, void *ud,
                               uint64_t *records);

/* Flags of ost_store_check_ex. */
#define OST_CHECK_REACH 1u    /* count the records the root (oid 0) reaches through
                               * the references of records and of map entries'
                               * values, from what the check reads (no second
                               * read). Memory: 8 bytes a record and 8 a reference
                               * besides the check's own. */
#define OST_CHECK_COUNTERS 2u /* report every record whose oid is not below meta's
                               * next_oid (a new object would overwrite it) or
                               * whose serial is past the last commit */
/* What ost_store_check_ex read and counted. */
typedef struct {
    uint64_t records;   /* records read */
    uint64_t entries;   /* entries of the maps that have a record, read */
    uint64_t reachable; /* records the root reaches (OST_CHECK_REACH; else 0) */
} ost_check_stats;
/* ost_store_check with flags (0, or OST_CHECK_REACH and OST_CHECK_COUNTERS
 * or'ed) and what it read and counted in *out (if not NULL; zeroed first,
 * and partly filled when a failure stops it). The same
 * snapshot and the same single read of every record and map entry as
 * ost_store_check; the flags add checks and counts to that read, never a
 * read of their own. Returns as ost_store_check; OST_EINVAL for unknown
 * flags. */
OST_EXTERN int ost_store_check_ex(ost_store *st, unsigned flags, ost_check_fn report, void *ud,
                                  ost_check_stats *out);

/* ---- connections ----------------------------------------------------------- */

/* Opens a connection with an empty cache and no transaction. Use and
 * close it on the thread that opened it (ghosts load through a per-thread
 * list of connections). 0, OST_ENOMEM, OST_EINVAL (store not open). */
OST_EXTERN int ost_conn_open(ost_store *st, ost_conn **out);
/* Aborts the connection's transaction, frees its cache (objects still
 * referenced by the caller stay valid as ghosts that can no longer load)
 * and the connection. NULL is allowed. Safe after ost_store_close of its
 * store (it then only frees the handle). Close its iterators, map cursors
 * and loaders first. */
OST_EXTERN void ost_conn_close(ost_conn *c);
/* Message of the last failure on the connection ("" if none). */
OST_EXTERN const char *ost_conn_errmsg(const ost_conn *c);

/* The root object (borrowed): an instance whose state is {'data': dict}.
 * Starts the transaction if none. 0 on error (see ost_conn_errmsg). */
OST_EXTERN ost_value ost_conn_root(ost_conn *c);
/* root['data'][key] = val and marks the root changed; steals key and val.
 * 0; OST_EINVAL (NULL c, or a connection of a closed store); the failure
 * to load the root (OST_EIO, OST_EBUSY, ...; ost_conn_errmsg says why);
 * OST_ECORRUPT when the root's state has no 'data' dict; OST_ENOMEM. */
OST_EXTERN int ost_root_set(ost_conn *c, ost_value key, ost_value val);
/* root['data'][key] (borrowed), or 0. key is borrowed. */
OST_EXTERN ost_value ost_root_get(ost_conn *c, ost_value key);
/* ost_root_get with a NUL-terminated UTF-8 key: root['data'][key]
 * (borrowed), or 0 (also for NULL c or key). No value to make or free. */
OST_EXTERN ost_value ost_root_get_c(ost_conn *c, const char *key);
/* ost_root_set with a NUL-terminated UTF-8 key; steals val. 0, OST_EINVAL
 * (NULL key, text not UTF-8), or what ost_root_set returns. */
OST_EXTERN int ost_root_set_c(ost_conn *c, const char *key, ost_value val);

/* The object stored under oid (borrowed; a ghost until used). 0,
 * OST_ENOTFOUND, OST_ECORRUPT (record damaged), OST_EIO. */
OST_EXTERN int ost_conn_get(ost_conn *c, uint64_t oid, ost_value *obj);
/* The oid of a persistent object of this connection, or UINT64_MAX. */
OST_EXTERN uint64_t ost_oid(ost_conn *c, ost_value obj);
/* Loads a ghost's state now. 0 or the code that loading it failed with
 * (accessors such as ost_instance_getattr load ghosts by themselves and
 * return 0 when that fails; ost_instance_getattr_ex returns the code). */
OST_EXTERN int ost_activate(ost_conn *c, ost_value obj);
/* Loads the states of the ghosts among objs[0, n) at once, in the
 * connection's snapshot (starting the transaction if none), exactly as
 * ost_activate of each would, but reading their records in one round trip
 * where the engine can (PostgreSQL: one query for them, and one more for
 * the records of the objects their states refer to that the connection
 * does not hold yet, so that the ghosts their loading makes cost no trip
 * of their own; LMDB reads the memory map either way).
 * Skipped: values that are not persistent objects (immediates, containers,
 * new instances never committed) and objects that are not ghosts.
 * Invalidations from other commits are applied first (at a transaction's
 * start), as for any read. objs and its values stay the caller's
 * (borrowed); nothing is stolen or made.
 * Returns 0 (also for n 0, when objs may be NULL); OST_EINVAL for a NULL c,
 * a NULL objs with n > 0, or a persistent object of another connection
 * (nothing loaded then); OST_ENOTFOUND when a ghost's record no longer
 * exists in the snapshot
 * (removed outside ostore: a pack drops its objects from the caches; nothing
 * loaded); OST_ECORRUPT for a damaged
 * record (LMDB's checksum: nothing loaded; a state that does not decode:
 * the objects before it in objs are loaded, it and those after stay
 * ghosts); OST_ENOMEM, OST_EIO. The message (ost_conn_errmsg) names the
 * store and the oid. */
OST_EXTERN int ost_prefetch(ost_conn *c, ost_value *objs, size_t n);
/* The objects stored under oids[0, n), loaded: objs[i] (borrowed, as
 * ost_conn_get gives them) for oids[i]. As ost_conn_get of each followed
 * by ost_prefetch of them all, but the records are read in one round trip
 * where the engine can (PostgreSQL: one query for the objects, one for
 * what their states refer to), not one per object. Returns 0 (also for n
 * 0); OST_EINVAL for a NULL c, oids or objs (n > 0); OST_ENOTFOUND when an
 * oid has no object (its message names the oid), OST_ECORRUPT, OST_ENOMEM,
 * OST_EIO: then every objs[i] is 0, or, when loading a state failed, as
 * ost_prefetch leaves them. */
OST_EXTERN int ost_conn_get_many(ost_conn *c, const uint64_t *oids, size_t n, ost_value *objs);
/* True while obj is a ghost. */
OST_EXTERN bool ost_is_ghost(ost_value obj);
/* Marks a persistent object changed, like ZODB's _p_changed = True: needed
 * after changing plain containers inside its state; the instance setters
 * do it by themselves. No-op for other values. */
OST_EXTERN void ost_changed(ost_value obj);
/* Turns an unchanged persistent object back into a ghost (its state is
 * reloaded on next use). OST_EBUSY if it has uncommitted changes. */
OST_EXTERN int ost_invalidate(ost_conn *c, ost_value obj);

/* Writes every new or changed persistent object in one write
 * transaction of the engine, then starts a new transaction. New persistent objects
 * reachable from written ones get oids. Fails with OST_ECONFLICT when
 * another commit changed an object this transaction changed (the message
 * names the oid, its class, the commit that changed it and the commit the
 * transaction's snapshot saw), OST_EVETO when a before-commit hook refused
 * (whatever code the hook returned: the message names it), OST_EIO when the
 * write failed (ost_conn_errmsg says "no space left on device" when the
 * disk is full, not just "Input/output error"); then nothing is written
 * and the transaction is poisoned: commits fail with OST_ETXN until
 * ost_abort. */
OST_EXTERN int ost_commit(ost_conn *c);
/* libuv's loop, declared here so that this header needs no uv.h. */
struct uv_loop_s;
/* What ost_commit_async calls, on the loop's thread, with the commit's
 * outcome: status is 0, or the code ost_commit would have returned. It is
 * not called when the connection closed meanwhile. */
typedef void (*ost_commit_cb)(void *ud, int status);
/* Commits without waiting, for programs that run a libuv loop on the
 * connection's thread: the work is prepared now, written by the group
 * committer (the store needs group_commit), and cb runs on that loop with
 * the outcome. Returns 0 when the commit was handed to the committer. If
 * this call fails, its code is returned and cb never runs. OST_EBUSY while
 * an earlier asynchronous commit is pending. */
OST_EXTERN int ost_commit_async(ost_conn *c, struct uv_loop_s *loop,
                                ost_commit_cb cb, void *ud);
/* Drops the changes of the transaction: changed objects become ghosts, new
 * objects lose their oids. Starts a new transaction. */
OST_EXTERN void ost_abort(ost_conn *c);
/* The transaction hooks of the connection (fired by commit and abort). */
OST_EXTERN ost_txn_hooks *ost_conn_hooks(ost_conn *c);

/* The work of one attempt of ost_txn_run: change objects through c and
 * return 0 to commit, or a negative code to give up (OST_ECONFLICT: try
 * again). */
typedef int (*ost_txn_fn)(void *ud, ost_conn *c);
/* Runs fn in a transaction and commits, retrying on conflict, as ZODB's
 * transaction.attempts(): each attempt starts a new transaction on the
 * newest commit (ost_abort), calls fn, then ost_commit; when fn or the
 * commit returns OST_ECONFLICT, the attempt is aborted and, after a
 * random wait that grows with each conflict (up to 0.5 ms after the first,
 * doubling, at most 50 ms: writers of one hot object spread out), the next
 * one runs, up to attempts in all. Any other failure aborts and is returned
 * at once (fn is not run again). *tried (if not NULL) gets the number of
 * attempts run. Returns 0 when an attempt committed; OST_ECONFLICT when
 * every attempt conflicted (the message says how many, and the last
 * conflict); fn's or the commit's code; OST_EINVAL (NULL fn, attempts 0);
 * OST_EBUSY when the connection's transaction has uncommitted changes or
 * a failed commit (commit or abort it first: they are not dropped). On
 * failure nothing of the attempts is written. */
OST_EXTERN int ost_txn_run(ost_conn *c, unsigned attempts, ost_txn_fn fn, void *ud,
                           unsigned *tried);

/* ---- iterating over the stored objects ---------------------------------- */

/* An iterator over the records of a connection's snapshot
 * (ost_iter_open): an opaque handle. */
typedef struct ost_iter ost_iter;

/* What ost_iter_next tells of a record. */
typedef struct {
    uint64_t oid;    /* its oid */
    uint64_t serial; /* the commit that wrote it (0 when damaged) */
    size_t size;     /* bytes of the record: 16-byte header and state pickle */
    ost_value cls;   /* its class (borrowed from the object; 0 when damaged) */
    bool damaged;    /* its header does not check: no object is made */
} ost_record_info;

/* Opens an iterator over the records of c's transaction, in oid order,
 * from the transaction's snapshot (it starts the transaction if none);
 * with cls (a class, borrowed: compared by module and name), over the
 * instances of that class only. Oids are handed out in blocks, so the
 * stored oids have gaps: walk them with this, not with 1..next_oid.
 * Objects made or changed in the transaction but not committed are not
 * seen. 0, OST_EINVAL, OST_ETYPE (cls is not a class), OST_ENOMEM, or a
 * code of the snapshot; *out is NULL on failure. The iterator belongs to
 * c's thread and ends with the transaction. */
OST_EXTERN int ost_iter_open(ost_conn *c, ost_value cls, ost_iter **out);
/* The next record: info (if not NULL) gets what it is, obj (if not NULL)
 * the object (borrowed from the connection's cache: a ghost until used,
 * as ost_conn_get gives it; 0 for a damaged record). Returns 0,
 * OST_ENOTFOUND after the last one, OST_ETXN once the transaction ended
 * (commit or abort), or the code of a failed read (ost_conn_errmsg). A
 * damaged record is returned (info->damaged), by an iterator over a
 * class too (its class cannot be told, so it may be one of them: it is
 * never skipped silently). Damaged pages (LMDB) stop the
 * walk with OST_ECORRUPT, at that call and every later one: the records
 * behind them are never passed over silently (docs/recovery.md). */
OST_EXTERN int ost_iter_next(ost_iter *it, ost_record_info *info, ost_value *obj);
/* Frees the iterator. NULL is allowed. Close it before its connection. */
OST_EXTERN void ost_iter_close(ost_iter *it);

/* ---- bulk loader ------------------------------------------------------------ */

/* A bulk loader on a connection (ost_loader_open): an opaque handle. */
typedef struct ost_loader ost_loader;

/* Reports progress after each stored batch: objects and bytes so far. */
typedef void (*ost_progress_fn)(void *ud, uint64_t objects, uint64_t bytes);

/* How a bulk loader batches (ost_loader_open): fill it with
 * ost_loader_options_init, then set the fields to change. */
typedef struct {
    size_t batch_objects; /* commit every N objects (default 100,000) */
    size_t batch_bytes;   /* or every M bytes of records (default 64 MiB) */
    ost_progress_fn progress; /* called after each stored batch (NULL: none) */
    void *ud;                 /* passed to progress */
} ost_loader_options;

/* Fills o with the defaults. */
OST_EXTERN void ost_loader_options_init(ost_loader_options *o);
/* Opens a bulk loader on connection c (NULL options: the defaults). Do
 * not commit on c while the loader is open. 0, OST_EINVAL, OST_ENOMEM,
 * OST_EREADONLY. */
OST_EXTERN int ost_loader_open(ost_conn *c, const ost_loader_options *o,
                               ost_loader **out);
/* Adds a new object and the new persistent objects it reaches; *oid (if
 * not NULL) receives obj's oid. The object is serialized now: later
 * changes to it are not stored. Batches commit every N objects or M
 * bytes, on a writer thread, while the next batch fills; each batch is one
 * transaction of the engine, durable as the store's durability says. After a
 * failure every later call returns the same code; ost_loader_errmsg says
 * which batch and why. */
OST_EXTERN int ost_loader_add(ost_loader *l, ost_value obj, uint64_t *oid);
/* Commits the last batch, waits for the writer and frees the loader.
 * Objects still alive become persistent objects of the connection, so the
 * root can refer to them in a later commit. Returns 0 or the first
 * failure's code: then the failed batch and everything after it are not
 * stored, every earlier batch is, and ost_conn_errmsg says which batch
 * failed and why. */
OST_EXTERN int ost_loader_close(ost_loader *l);
/* ost_loader_close that also gives the load's totals: *objects and *bytes
 * (either may be NULL) get what the stored batches hold, the last batch
 * included; after a failure, what the batches before the failed one
 * hold. NULL l: OST_EINVAL with zeros. Returns as ost_loader_close. */
OST_EXTERN int ost_loader_finish(ost_loader *l, uint64_t *objects, uint64_t *bytes);
/* Objects and bytes stored so far: the batches committed until now, so
 * not the batch still filling (a load smaller than one batch shows 0
 * until it ends; ost_loader_finish gives the totals). */
OST_EXTERN void ost_loader_stats(const ost_loader *l, uint64_t *objects,
                                 uint64_t *bytes);
/* The failure's message ("" if none). */
OST_EXTERN const char *ost_loader_errmsg(const ost_loader *l);

/* Cache size: unchanged objects beyond max_objects are made ghosts (or
 * dropped when nothing else holds them) at transaction boundaries. The
 * default, for a new connection, is OST_CACHE_SIZE_DEFAULT objects and
 * no byte limit. */
OST_EXTERN void ost_conn_set_cache_size(ost_conn *c, size_t max_objects);
/* Cache size in bytes: unchanged objects are also made ghosts while the
 * records of the objects holding state add up to more than max_bytes (0:
 * no limit, the default). */
OST_EXTERN void ost_conn_set_cache_bytes(ost_conn *c, size_t max_bytes);
/* Objects in the cache, and how many of them hold state. */
OST_EXTERN size_t ost_conn_cache_count(const ost_conn *c, size_t *active);

#ifdef __cplusplus
}
#endif

#endif
