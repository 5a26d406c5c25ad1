/* The in-memory engine's own objects and functions, for store/mem/ only:
 * the rest of store/ reaches the engine through the table ost__mem_engine
 * (store/engine.h) and never includes this header.
 *
 * A store is a mem_db: a private one per open of "mem:", or a named one
 * ("mem:NAME") that every open of that name in the process shares,
 * reference counted, and that stays after its last close until
 * ost_store_drop or the end of the process (db.c). Nothing is durable and
 * no other process sees it.
 *
 * Multiversion concurrency, as LMDB's copy-on-write pages give it: every
 * record, map entry and deletion record is a node of an ordered skip list
 * (skip.c) holding a chain of versions, newest first, each stamped with
 * the version number (ver) of the write transaction that made it. A write
 * transaction (a commit's group, a sweep, an import) writes its versions
 * at db->ver + 1 and publishes them by moving db->ver on, under the
 * write lock; a snapshot remembers db->ver and the counters (meta) at its
 * start and sees, per node, the newest version not newer than its ver.
 * A version is freed only when no open snapshot can see it (the trim of
 * skip.c, run after each write transaction), so what a read returns stays
 * valid until its snapshot ends: pins need no lock.
 *
 * Threads, as LMDB's: one writer at a time, and readers never wait for
 * it. db->wlock (a mutex) serializes the write transactions (commits,
 * class ids, oid blocks, sweeps, imports); db->lock (a read-write lock)
 * guards the structures themselves: reads hold it for reading for the
 * span of one call (never while they call back the caller: scan and the
 * others gather views first), and the writer takes it for writing only
 * for each change (a node linked, a version pushed or taken back, the
 * counters published, the trim), so a long commit holds readers up for
 * no more than one change at a time. The writer's own reads inside its
 * transaction (the operations ost__maps_apply calls back on the
 * committing session) take no lock: nothing else changes the structures. */
#ifndef OST_STORE_MEM_H
#define OST_STORE_MEM_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../base/endian.h" /* keys: oids big-endian, so that they order as numbers */
#include "../engine.h"
#include "ostore/maps.h"

/* The store's address as messages show it (ost_path_show's escapes). */
#define MEM_SHOWN OST_PATH_SHOWN
/* The longest name of a named store. */
#define MEM_NAME_MAX 64
/* The bytes before an entry's key: the map oid, big-endian. */
#define MEM_KEYMAX (8 + OST_MAP_KEY_MAX)

/* ---- versions and the ordered list (skip.c) ------------------------------------------ */

/* One version of a record, an entry or a deletion record. Immutable once
 * made; freed by the trim when no snapshot sees it. */
typedef struct mem_ver {
    struct mem_ver *older;
    uint64_t ver;    /* the write transaction that made it */
    uint64_t serial; /* record: the commit that wrote it; entry: the same;
                      * deletion record: the commit that deleted the key */
    uint32_t cid;    /* a record's class id */
    bool gone;       /* a tombstone: the key is absent from ver on */
    size_t len;
    uint8_t data[];  /* a record's pickle, an entry's value */
} mem_ver;

/* A key of the list and its versions. next[] has level slots; the key's
 * bytes follow them. */
typedef struct mem_node {
    mem_ver *head;         /* newest version; NULL only while being made */
    struct mem_node *prev; /* the node before at level 0 (NULL: first) */
    uint8_t *key;
    uint16_t klen;
    uint8_t level;
    bool listed; /* in the db's trim list */
    struct mem_node *next[];
} mem_node;

#define MEM_LEVELS 24

/* A skip list ordered by key bytes (memcmp, then shorter first). */
typedef struct {
    mem_node *head; /* sentinel: MEM_LEVELS slots, no key */
    uint8_t level;  /* levels in use */
    uint64_t rng;   /* xorshift state for node levels */
} mem_list;

int mem_list_init(mem_list *l);
/* Frees every node and version, and the sentinel. */
void mem_list_free(mem_list *l);
/* The first node whose key is >= k (NULL: none). */
mem_node *mem_list_seek(const mem_list *l, const uint8_t *k, size_t kl);
/* The node of key k exactly (NULL: none). */
mem_node *mem_list_find(const mem_list *l, const uint8_t *k, size_t kl);
/* The first and the last node (NULL: the list is empty). */
mem_node *mem_list_first(const mem_list *l);
mem_node *mem_list_last(const mem_list *l);
/* The node of key k, made with no version when absent: 0 or OST_ENOMEM. */
int mem_list_get(mem_list *l, const uint8_t *k, size_t kl, mem_node **out);
/* Unlinks node n and frees it with its versions. */
void mem_list_remove(mem_list *l, mem_node *n);
/* Compares keys bytewise, shorter first when one is a prefix of the other. */
int mem_kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);

/* A new version (data copied): NULL when out of memory. */
mem_ver *mem_ver_new(uint64_t ver, uint64_t serial, uint32_t cid, bool gone, const void *data,
                     size_t len);
/* The version of n that a reader at ver sees, or NULL when the key is
 * absent for it (no version that old, or a tombstone). */
const mem_ver *mem_see(const mem_node *n, uint64_t ver);
/* Frees the versions of n that no reader at minv or later sees. Returns
 * true when n is now needless: its one version a tombstone every reader
 * sees (the caller removes the node). */
bool mem_trim(mem_node *n, uint64_t minv);

/* ---- the store ------------------------------------------------------------------------ */

/* The counters (LMDB's meta table). */
typedef struct {
    uint64_t format, next_oid, last_serial, low, next_class;
} mem_meta;

/* A class of the table: visible to snapshots from ver on. */
typedef struct {
    uint32_t id;
    uint64_t ver;
    char *module, *name; /* NUL-terminated copies */
    size_t mlen, nlen;
} mem_class;

/* A commit's line of the commit log: the oids of existing objects it
 * changed. gone: the sweep that trimmed it (0: not trimmed). */
typedef struct {
    uint64_t serial, ver, gone;
    uint64_t *oids;
    size_t n;
} mem_log;

/* A node waiting for the trim, in its list. */
typedef struct {
    mem_list *l;
    mem_node *n;
} mem_ref;

typedef struct mem_db {
    char name[MEM_NAME_MAX + 1]; /* "" for a private store */
    bool dropped;                /* named, and ost_store_drop removed its name */
    unsigned refs;               /* engines open on it (under the registry's lock) */
    bool excl;                   /* an engine holds it exclusively */
    pthread_mutex_t wlock;       /* the one write transaction at a time */
    pthread_rwlock_t lock;       /* everything below but sessions */
    pthread_mutex_t slock;       /* sessions */
    ost__sess *sessions;         /* every open session, for the trim's oldest snapshot */
    uint64_t ver;                /* the last write transaction published */
    mem_meta meta;
    mem_list recs; /* oid (8 bytes big-endian) -> record versions */
    mem_list ents; /* map oid (8 bytes big-endian) + key -> entry versions */
    mem_list dels; /* the same keys -> the serial of the last commit that deleted it */
    mem_class *cls; /* by id ascending */
    size_t ncls, capcls;
    mem_class *old_cls; /* the classes an import replaced, kept until the db goes */
    size_t nold_cls;
    mem_log *log; /* by serial ascending */
    size_t nlog, caplog;
    mem_ref *trim; /* nodes with versions to free later */
    size_t ntrim, captrim;
    uint64_t trim_minv; /* the oldest snapshot at the last full trim */
    struct mem_db *next; /* the registry of named stores */
} mem_db;

/* One open of a store. */
struct ost__engine {
    mem_db *db;
    const ost__host *host; /* what the store lends (host.c calls it) */
    const ost__engine_ops *ops; /* the engine's table, which commit hands to the host */
    ost_store *st;         /* the handle the host's calls are for */
    char shown[MEM_SHOWN]; /* the address as messages show it */
    bool read_only;
    bool excl; /* holds db->excl */
};

struct ost__sess {
    ost__engine *e;
    mem_db *db;
    bool in_snap;   /* between snap_begin and snap_end */
    bool in_commit; /* inside a write transaction: db->wlock held */
    unsigned pins;
    uint64_t ver;   /* what the snapshot (or the commit's writes) sees */
    uint64_t gen;   /* counts snapshots: cursors of an ended one refuse */
    mem_meta meta;  /* the snapshot's counters (commit: the working ones) */
    mem_ref *undo;  /* commit: the versions pushed, in order */
    size_t nundo, capundo;
    ost__sess *next; /* in db->sessions */
};

/* ---- helpers shared by the files (db.c) ---------------------------------------------- */

/* Grows *p (of *cap elements of size sz) to hold at least need: 0 or
 * OST_ENOMEM (*p unchanged then). */
int mem_grow(void **p, size_t *cap, size_t need, size_t sz);
/* The key of oid (recs) and of (map, key) (ents, dels) into buf. */
size_t mem_ekey(uint8_t *buf, uint64_t map, const uint8_t *key, size_t klen);
/* Adds class (module, name) as id at ver to db (db->lock held for
 * writing): 0 or OST_ENOMEM. */
int mem_class_add(mem_db *db, uint32_t id, uint64_t ver, const char *module, size_t mlen,
                  const char *name, size_t nlen);
/* The class of id in the table at ver (NULL: none). db->lock held. */
const mem_class *mem_class_at(const mem_db *db, uint32_t id, uint64_t ver);
/* The oldest version an open snapshot sees (db->ver when none). Takes
 * db->slock; call it with db->lock held for writing. */
uint64_t mem_oldest(mem_db *db);
/* After a write transaction published: frees what no snapshot sees of the
 * nodes in s->undo (the versions it pushed) and of the nodes listed for
 * later, and the commit log's trimmed lines. db->lock held for writing. */
void mem_gc(mem_db *db, ost__sess *s);
/* Pushes version v onto node n of list l in s's write transaction, noting
 * it for undo and trim; mem_write onto the node of key k, making it when
 * absent. 0 or OST_ENOMEM (v freed then; v NULL is OST_ENOMEM too). */
int mem_push(ost__sess *s, mem_list *l, mem_node *n, mem_ver *v);
int mem_write(ost__sess *s, mem_list *l, const uint8_t *k, size_t kl, mem_ver *v);
/* Appends line (serial, its oids: taken) to the commit log in s's write
 * transaction; mem_log_cut takes back the lines after the first n. */
int mem_log_add(ost__sess *s, uint64_t serial, uint64_t *oids, size_t n);
void mem_log_cut(ost__sess *s, size_t n);
/* Marks every line of the commit log as trimmed by s's transaction. */
void mem_log_trim_all(ost__sess *s);
/* Takes back, newest first, the versions s pushed after mark. */
void mem_undo(ost__sess *s, size_t mark);
/* Begins and ends a write transaction of s: takes db->wlock; end
 * publishes (commit true: the counters and the new versions, at once for
 * every reader) or undoes everything, trims, and lets go. */
void mem_wbegin(ost__sess *s);
void mem_wend(ost__sess *s, bool commit);
/* Whether the store at ver holds no more than a new one: only the root,
 * no oid handed out, one commit at most, no entries. */
bool mem_is_new(mem_db *db, const mem_meta *m, uint64_t ver, uint64_t *nrec);

/* Sets the calling thread's message of the engine's store: returns code. */
int mem_fail(ost__engine *e, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- the operations, by file --------------------------------------------------------- *
 * Each ost__mem_NAME is the table's NAME: store/engine.h says what it
 * does, takes and returns; the engine's own choices are said where each
 * is defined. */

/* db.c */
bool ost__mem_claims(const char *addr);
/* addr as messages show it (the table of engines' show). */
void ost__mem_show(const char *addr, char *out, size_t cap);
int ost__mem_open(const ost__host *host, ost_store *st, const char *addr,
                  const ost_store_options *o, ost__engine **out);
void ost__mem_close(ost__engine *e);
int ost__mem_stat(ost__engine *e, ost_store_stats *out);
int ost__mem_drop(ost__engine *e, bool only_new);

/* read.c */
int ost__mem_sess_open(ost__engine *e, ost__sess **out);
void ost__mem_sess_close(ost__sess *s);
int ost__mem_snap_begin(ost__sess *s, ost__snapinfo *info);
void ost__mem_snap_end(ost__sess *s);
bool ost__mem_snap_moved(ost__sess *s);
int ost__mem_pin(ost__sess *s);
void ost__mem_unpin(ost__sess *s);
/* Takes db->lock for reading unless s is inside its commit (it holds it
 * for writing); 0, or OST_EINVAL when s has no snapshot or commit open. */
int mem_rlock(ost__sess *s);
void mem_runlock(ost__sess *s);
int ost__mem_get(ost__sess *s, uint64_t oid, ost__recview *r);
int ost__mem_get_many(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud);
int ost__mem_scan(ost__sess *s, uint64_t from, uint64_t to, ost__rec_fn fn, void *ud);
int ost__mem_changes(ost__sess *s, uint64_t after, uint64_t upto,
                     void (*fn)(void *ud, uint64_t oid, uint64_t serial), void *ud, bool *gap);
int ost__mem_class_get(ost__sess *s, uint32_t id, ost__classview *out);
int ost__mem_class_each(ost__sess *s, int (*fn)(void *ud, const ost__classview *c), void *ud);
int ost__mem_snap_stat(ost__sess *s, ost_snap_stats *out);
int ost__mem_verify(ost__sess *s, char *first, size_t cap);

/* commit.c */
int ost__mem_class_id(ost__engine *e, const char *module, size_t mlen, const char *name,
                      size_t nlen, bool create, uint32_t *id);
int ost__mem_reserve_oids(ost__engine *e, uint64_t want, uint64_t *first);
int ost__mem_commit(ost__sess *s, ost__pkg *const *pkgs, size_t n);
int ost__mem_sweep(ost__sess *s, uint64_t mark, bool (*keep)(void *ud, uint64_t oid), void *ud,
                   uint64_t *removed);

/* entries.c */
int ost__mem_ent_get(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *e);
int ost__mem_ent_put(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial, const void *data, size_t len, bool *existed, bool *append);
int ost__mem_ent_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial);
int ost__mem_ent_get_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                         ost__entry *e, uint64_t *deleted);
int ost__mem_ent_drop_map(ost__sess *s, uint64_t map, uint64_t *n);
/* Tombstones, in s's write transaction, every key of map in list l that
 * is there at s->ver; *n (if not NULL) counts them. */
int mem_drop_keys(ost__sess *s, mem_list *l, uint64_t map, uint64_t *n);
/* The maps of list l (entries or deletion records) that have keys at
 * s->ver, each once in oid order, into a new array *maps of *n (the
 * caller frees it, whatever the result). Lock held. 0 or OST_ENOMEM. */
int mem_maps_of(ost__sess *s, mem_list *l, uint64_t **maps, size_t *n);
int ost__mem_ecur_open(ost__sess *s, uint64_t map, ost__ecur **out);
int ost__mem_ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse);
int ost__mem_ecur_step(ost__ecur *ec, bool reverse);
int ost__mem_ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e);
void ost__mem_ecur_close(ost__ecur *ec);
int ost__mem_ent_each_map(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud);
int ost__mem_map_count_add(ost__sess *s, uint64_t map, int64_t delta, uint64_t serial,
                           bool counter);

/* import.c */
int ost__mem_imp_begin(ost__engine *e, uint64_t size_hint, ost__import **out);
int ost__mem_imp_class(ost__import *im, uint32_t id, const char *module, size_t mlen,
                       const char *name, size_t nlen);
int ost__mem_imp_record(ost__import *im, uint64_t oid, uint64_t serial, uint32_t cid,
                        const void *pickle, size_t len);
int ost__mem_imp_entry(ost__import *im, uint64_t map, const uint8_t *key, size_t klen,
                       uint64_t serial, const void *value, size_t vlen);
int ost__mem_imp_commit(ost__import *im, uint64_t format, uint64_t next_oid,
                        uint64_t last_serial, uint64_t next_class);
void ost__mem_imp_abort(ost__import *im);

#endif
