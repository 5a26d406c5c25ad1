/* Guarded reads: the records, map entries, meta and class tables of a read
 * snapshot read straight from LMDB's map, through ostore's own
 * bounds-checked descent of the B-trees, never through liblmdb. Internal:
 * store/lmdb/ only.
 *
 * liblmdb trusts every page it reads: a damaged node's flags byte makes
 * it follow a NULL sub-cursor, a damaged node offset makes it read past
 * the map, a damaged key makes a cursor leave its range silently. A read
 * snapshot's pages never change while it is open, so this module checks
 * each page before it uses it, once per snapshot: a per-session bitmap of
 * the verified page numbers (and, for each, the one place in the tree it
 * was reached from), kept while the snapshot's transaction id stays the
 * same (no commit in between: no page of it changed) and cleared when it
 * moves. A session that closes leaves its guard to the next session the
 * engine opens (engine.h, spare_gd), whose reads of the same snapshot
 * need not verify the pages again. guard.c opens with the list of what a
 * page must pass.
 *
 * Write transactions (inside commit) still read through liblmdb: their
 * dirty pages are not in the map.
 *
 * Results: 0, OST_ENOTFOUND (no such key, or the end of a cursor's walk),
 * OST_ECORRUPT (damage: ost__gd_msg says where, one line, e.g. "page 1234
 * (records, leaf): node 3 at offset 4090 runs past the page end"),
 * OST_ENOMEM. A handle is used by one thread at a time (its session's). */
#ifndef OST_STORE_LMDB_GUARD_H
#define OST_STORE_LMDB_GUARD_H

#include <lmdb.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine.h"

/* The databases a guard reads. */
enum { OST__GD_MAIN, OST__GD_RECS, OST__GD_META, OST__GD_CLASSES, OST__GD_TXLOG, OST__GD_MENTS,
       OST__GD_NDB };

typedef struct ost__gd ost__gd;

/* A cursor over one database of a guard's snapshot: caller storage, no
 * resources (nothing to close). Valid while the guard stays on the same
 * snapshot (ost__gd_gen unchanged). */
#define OST__GD_MAXDEPTH 32
typedef struct {
    const uint8_t *p; /* NULL: no bound */
    size_t n;
} ost__gdkey;
typedef struct {
    ost__gd *g;
    int db;
    bool on;           /* positioned on an entry */
    unsigned top;      /* levels on the stack */
    uint64_t gen;      /* the guard's generation it was positioned in */
    struct {
        const uint8_t *pg;
        uint64_t pgno;
        unsigned n, i;
        ost__gdkey lo, hi;
    } lv[OST__GD_MAXDEPTH];
} ost__gdcur;

/* A new guard for store en's environment (its page size read once):
 * *out owns it, freed with ost__gd_free. 0 or OST_ENOMEM. */
int ost__gd_new(ost__engine *en, ost__gd **out);
/* Frees g; accepts NULL. */
void ost__gd_free(ost__gd *g);

/* Binds g to the snapshot of read transaction t (just begun or renewed;
 * the maplock held). The verified pages are kept when t's transaction id
 * and the map are the ones of the last binding, and forgotten otherwise.
 * 0; 1 when the meta page of t's snapshot was rewritten since t began
 * (two commits by another process meanwhile: renew t and bind again);
 * OST_ECORRUPT (the meta page or the file's size says the snapshot cannot
 * be read; the message in ost__gd_msg), OST_ENOMEM. */
int ost__gd_bind(ost__gd *g, MDB_txn *t);

/* Forgets the binding (the transaction ends or the map moves): the next
 * read needs ost__gd_bind. */
void ost__gd_unbind(ost__gd *g);

/* Changes each time the verified pages are forgotten (cursors positioned
 * before are stale). */
uint64_t ost__gd_gen(const ost__gd *g);

/* The last damage found, one line (valid until the next call on g). */
const char *ost__gd_msg(const ost__gd *g);

/* The value of key in database db (OST__GD_*) of the bound snapshot into
 * *val: a view into the map, valid while the snapshot stays open. 0,
 * OST_ENOTFOUND, OST_ECORRUPT, OST_ENOMEM; OST_EINVAL when unbound. */
int ost__gd_get(ost__gd *g, int db, const void *key, size_t klen, MDB_val *val);

/* Cursors: init (unpositioned), then first, last, seek (the first key >=
 * key), next, prev, each giving the entry it lands on in *k and *v (views
 * into the map, as for get). An entry whose value is damaged (its node's
 * flags or size: see guard.c) comes with its key and v->mv_data NULL,
 * v->mv_size 0 (ost__gd_msg says what is wrong), and the walk goes on
 * from it. OST_ENOTFOUND past either end (the cursor is
 * then unpositioned: next and prev say OST_ENOTFOUND too), OST_ECORRUPT
 * when a page on the way fails its checks (the cursor is unpositioned),
 * OST_EBUSY when the guard was rebound to another snapshot since the
 * cursor was positioned. */
void ost__gdcur_init(ost__gdcur *c, ost__gd *g, int db);
int ost__gdcur_first(ost__gdcur *c, MDB_val *k, MDB_val *v);
int ost__gdcur_last(ost__gdcur *c, MDB_val *k, MDB_val *v);
int ost__gdcur_seek(ost__gdcur *c, const void *key, size_t klen, MDB_val *k, MDB_val *v);
int ost__gdcur_next(ost__gdcur *c, MDB_val *k, MDB_val *v);
int ost__gdcur_prev(ost__gdcur *c, MDB_val *k, MDB_val *v);

/* Checks every page of database db of the bound snapshot (the whole
 * tree): 0, OST_ENOTFOUND (no such database), OST_ECORRUPT, OST_ENOMEM.
 * For the store's open, before liblmdb reads the small tables. */
int ost__gd_check_db(ost__gd *g, int db);

/* Checks, with a guard of its own bound to read transaction t, every page
 * and value of the tables liblmdb itself reads at a store's open and in
 * class lookups (the main database, meta, classes): 0, OST_ECORRUPT with
 * one line in msg, OST_ENOMEM, or OST_EBUSY (msg set) when t's meta page
 * was rewritten under each of 9 binds (as ost__gd_bind's 1): t, a read
 * transaction, is reset and renewed on the newest snapshot between
 * tries, so that nothing is left for liblmdb to read unchecked. */
int ost__gd_check_tables(ost__engine *en, MDB_txn *t, char *msg, size_t cap);

/* The same for the databases dbs[0, n) (OST__GD_*), e.g. the records
 * before a walk of them through liblmdb. */
int ost__gd_check_dbs(ost__engine *en, MDB_txn *t, const int *dbs, size_t n, char *msg,
                      size_t cap);

/* The same in a read transaction of its own, for the store's open: 0
 * (also when no read transaction can begin: the open's own begin says
 * why), OST_ECORRUPT with msg set, OST_ENOMEM. */
int ost__gd_check_env(ost__engine *en, char *msg, size_t cap);

/* The number of entries the bound snapshot's record of database db says
 * it holds (for counts compared with a full scan). */
int ost__gd_entries(ost__gd *g, int db, uint64_t *out);

#endif
