/* Guarded reads of a read snapshot (guard.h): ostore's own descent through
 * LMDB's pages, each page checked before it is used, once per snapshot.
 *
 * The format is the one store/lmdb/pagecheck.c describes at its top
 * (liblmdb 0.9.x, 64-bit little-endian layout); what this reader relies
 * on, as liblmdb 0.9.24's libraries/liblmdb/mdb.c writes it:
 *
 * - Transaction N writes meta page N & 1 (mdb_env_write_meta: "toggle =
 *   txn->mt_txnid & 1"), and a read transaction takes its database records
 *   from the meta page of its own id (mdb_txn_renew0: "meta =
 *   env->me_metas[r->mr_txnid & 1]" with the lock file; without one,
 *   mdb_env_pick_meta, the meta page of the higher id, which is the same
 *   page), copying them (memcpy of mm_dbs into txn->mt_dbs, which mdb_stat
 *   reports). So mdb_txn_id(t) names the meta page, and its mm_txnid equal
 *   to that id says the page still holds t's snapshot: another process's
 *   writer rewrites it two commits later, with a pwrite that a reader of
 *   the map can see half done. Seen: tests/test_maps.c's four processes
 *   committing (no sync) made a single read of the page give a main root
 *   of page 5214 with a last page of 4488 in about half the runs; the
 *   double read and the comparison with mdb_stat in ost__gd_bind made 12
 *   runs of 12 clean.
 * - The main database's record is in the meta page; a named database's is
 *   the 48-byte value (node flag F_SUBDATA) of its name in the main
 *   database (mdb_dbi_open), read in the snapshot (a read transaction
 *   marks named databases stale and reads them again: mdb_stale).
 * - Branch node i's child holds the keys k with key[i] <= k < key[i + 1]
 *   (node 0's key is not used: mdb_node_search starts a branch page at
 *   index 1); pages of a tree are at depth md_depth for leaves. Keys of
 *   ostore's databases compare as bytes, a prefix first (mdb_cmp_memn:
 *   none of them is opened with MDB_INTEGERKEY or MDB_REVERSEKEY).
 * - A page number is read only below mt_next_pgno (mm_last_pg + 1; the
 *   pages of the snapshot are never written while a reader holds it).
 *
 * What a branch or leaf page must pass before any byte of it is used (the
 * checks that keep every read inside the page and the file, and the order
 * that makes a cursor's walk and a get's descent agree):
 *
 * 1. its number within [2, mm_last_pg], and mm_last_pg's page inside the
 *    file; the page's own number in its header; flags exactly P_BRANCH
 *    above the leaf level and P_LEAF at md_depth (depth <= 32);
 * 2. mp_lower even, >= 16, <= mp_upper <= the page size; a branch page
 *    has at least one node, a leaf page other than a root at least one;
 * 3. every node offset even, >= mp_upper, the node header inside the
 *    page, the key inside the page and of a size the database allows (8
 *    bytes in records and txlog, at least 8 in mapents, 1 to 511
 *    elsewhere; node 0 of a branch page excepted); on a branch page the
 *    child's number within [2, mm_last_pg];
 * 4. keys strictly ascending, and within the bounds the separators above
 *    the page give;
 * 5. the page reached from one place only (a parent page and a slot, or
 *    the database record for a root): a damaged child number that names
 *    another sane page of the tree is caught when that page is reached the
 *    second time.
 *
 * A leaf node's flags and data are checked when that entry is read
 * (leaf_value), so that a damaged node is that entry's error alone: flags
 * 0 or F_BIGDATA (F_SUBDATA with a 48-byte value in the main database),
 * inline data inside the page, an overflow run's first page number within
 * the pages, that page's header (number, P_OVERFLOW, a length that stays
 * within the pages) and the value inside the run.
 *
 * With 1 to 5 every page of a tree is a subtree of its own key range, so a
 * get that does not find its key between two keys of its leaf can say "no
 * such key" (at a leaf's edge it checks the neighbour leaf first:
 * confirm_miss), and a cursor's walk, leaf after leaf, returns every
 * entry of every page it passes, in order: nothing is skipped silently.
 * What no page check sees (a key changed to another key in order, a value's
 * bytes) is left to the records' and entries' checksums. */
#include "guard.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../base/endian.h"
#include "engine.h"

#define PAGEHDRSZ 16u
#define NODESIZE 8u
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define P_OVERFLOW 0x04u
#define F_BIGDATA 0x01u
#define F_SUBDATA 0x02u
#define DB_PERSISTENT 0x7eu
#define MAXKEY 511u
#define P_INVALID UINT64_MAX

/* A database's record: where its tree starts. */
typedef struct {
    bool known;   /* looked up in this binding */
    bool absent;  /* no such database */
    unsigned depth;
    uint64_t root;    /* P_INVALID: empty */
    uint64_t entries;
} gdb;

struct ost__gd {
    ost__engine *en;
    unsigned psize;
    /* the binding */
    bool bound;
    bool valid; /* ok, from, dbs and last_pg hold the snapshot of txnid at base */
    uint64_t txnid;
    const uint8_t *base;
    uint64_t last_pg;
    /* where liblmdb maps the file (locate_map), and the file's size */
    uintptr_t mbase;
    size_t msize;
    uint64_t fsize;
    uint64_t gen;
    gdb dbs[OST__GD_NDB];
    /* the verified pages of this snapshot, and where each was reached from */
    uint64_t *ok;
    uint64_t *from;
    uint64_t cap; /* pages the two arrays hold */
    /* the last leaf a get used, per database (a hint: checked in range) */
    uint64_t hint[OST__GD_NDB];
    /* tiles: which node starts at each even offset of a page (index + 1),
     * psize / 2 entries, all 0 between checks */
    uint16_t *at;
    char msg[256];
};

static const char *const DB_NAMES[OST__GD_NDB] = {"main", "records", "meta", "classes", "txlog",
                                                   "mapents"};


static int bad(ost__gd *g, const char *f, ...) __attribute__((format(printf, 2, 3)));
static int bad(ost__gd *g, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    vsnprintf(g->msg, sizeof g->msg, f, ap);
    va_end(ap);
    return OST_ECORRUPT;
}

int ost__gd_new(ost__engine *en, ost__gd **out) {
    *out = NULL;
    MDB_stat ms;
    if (mdb_env_stat(en->env, &ms)) return OST_EIO;
    ost__gd *g = calloc(1, sizeof *g);
    if (!g) return OST_ENOMEM;
    g->en = en;
    g->psize = ms.ms_psize;
    if (!(g->at = calloc(g->psize / 2, sizeof *g->at))) {
        free(g);
        return OST_ENOMEM;
    }
    for (int i = 0; i < OST__GD_NDB; i++) g->hint[i] = P_INVALID;
    *out = g;
    return 0;
}

void ost__gd_free(ost__gd *g) {
    if (!g) return;
    free(g->ok);
    free(g->from);
    free(g->at);
    free(g);
}

const char *ost__gd_msg(const ost__gd *g) { return g->msg; }
uint64_t ost__gd_gen(const ost__gd *g) { return g->gen; }

void ost__gd_unbind(ost__gd *g) {
    if (g) g->bound = false;
}

/* Where liblmdb maps data.mdb now (into g->mbase, g->msize): the engine's
 * note (ost__lmdb_map_changed) when its size is the one liblmdb reports,
 * else the process's map list (ost__lmdb_map_find), so that a note left
 * stale by a resize cannot point the guard at an address that is no
 * longer the map (seen before import.c noted its resize: SIGBUS in
 * ostore copy's check of the store it had just imported). 0 or OST_EIO. */
static int locate_map(ost__gd *g) {
    ost__engine *e = g->en;
    MDB_envinfo ei;
    if (mdb_env_info(e->env, &ei)) return OST_EIO;
    if (g->mbase && g->msize == ei.me_mapsize) return 0;
    g->mbase = 0;
    if (e->map_base && e->map_size == ei.me_mapsize) {
        g->mbase = e->map_base;
        g->msize = e->map_size;
        return 0;
    }
    return ost__lmdb_map_find(g->en, ei.me_mapsize, &g->mbase, &g->msize);
}

/* The bytes of the file from its start to the end of page last are in the
 * map and in the file (the map may be bigger than the file: a read beyond
 * the file's end faults). */
static bool pages_in_file(ost__gd *g, uint64_t last) {
    uint64_t end;
    if (__builtin_mul_overflow(last + 1, (uint64_t)g->psize, &end) || end > g->msize) return false;
    if (end <= g->fsize) return true;
    int fd;
    struct stat sb;
    if (mdb_env_get_fd(g->en->env, &fd) || fstat(fd, &sb)) return false;
    g->fsize = (uint64_t)sb.st_size; /* files only grow while a snapshot lasts */
    return end <= g->fsize;
}

int ost__gd_bind(ost__gd *g, MDB_txn *t) {
    uint64_t txnid = (uint64_t)mdb_txn_id(t);
    if (locate_map(g)) return bad(g, "cannot find liblmdb's map of data.mdb in /proc/self/maps");
    const uint8_t *base = (const uint8_t *)g->mbase;
    if (g->valid && g->txnid == txnid && g->base == base) {
        /* the same snapshot as the last binding: its pages have not changed */
        g->bound = true;
        return 0;
    }
    /* the verified pages (of another snapshot or map) are forgotten, and
     * cursors positioned on them are stale */
    g->valid = false;
    g->bound = false;
    g->gen++;
    if (!pages_in_file(g, 1)) return bad(g, "data.mdb is shorter than its two meta pages");
    /* the meta page's main database record, last page and transaction id
     * (bytes 88 to 152), copied twice: another process's writer rewrites
     * the page (pwrite, two commits after t's) while this reads it, so the
     * copy counts only when both agree and carry t's id; and the record
     * must match liblmdb's own copy, taken when t began (mdb_stat of
     * MAIN_DBI reads txn->mt_dbs[MAIN_DBI]) */
    const uint8_t *m = base + (size_t)(txnid & 1) * g->psize;
    uint8_t a[64], b[64];
    memcpy(a, m + 88, sizeof a);
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    memcpy(b, m + 88, sizeof b);
    if (memcmp(a, b, sizeof a) != 0 || ost__rd_le64(a + 56) != txnid) return 1;
    MDB_stat ms;
    if (mdb_stat(t, 1, &ms) != 0 || ms.ms_depth != ost__rd_le16(a + 6) ||
        ms.ms_entries != ost__rd_le64(a + 32) || ms.ms_leaf_pages != ost__rd_le64(a + 16) ||
        ms.ms_branch_pages != ost__rd_le64(a + 8))
        return 1;
    uint64_t last = ost__rd_le64(a + 48);
    if (last < 1 || last >= ((uint64_t)1 << 48) || !pages_in_file(g, last))
        return bad(g, "meta page %u: last page %llu lies beyond the end of the file",
                   (unsigned)(txnid & 1), (unsigned long long)last);
    if (last + 1 > g->cap) {
        uint64_t cap = last + 1 + (last + 1) / 4;
        uint64_t *ok = realloc(g->ok, (cap + 63) / 64 * 8);
        if (!ok) return OST_ENOMEM;
        g->ok = ok;
        uint64_t *from = realloc(g->from, cap * 8);
        if (!from) return OST_ENOMEM;
        g->from = from;
        g->cap = cap;
    }
    memset(g->ok, 0, (last + 1 + 63) / 64 * 8);
    g->txnid = txnid;
    g->base = base;
    g->last_pg = last;
    g->gen++;
    memset(g->dbs, 0, sizeof g->dbs);
    for (int i = 0; i < OST__GD_NDB; i++) g->hint[i] = P_INVALID;
    /* the main database's record (mm_dbs[MAIN_DBI]) */
    const uint8_t *d = a;
    g->dbs[0].known = true;
    g->dbs[0].depth = ost__rd_le16(d + 6);
    g->dbs[0].root = ost__rd_le64(d + 40);
    g->dbs[0].entries = ost__rd_le64(d + 32);
    g->bound = true;
    g->valid = true;
    if ((ost__rd_le16(d + 4) & DB_PERSISTENT) || g->dbs[0].depth > OST__GD_MAXDEPTH ||
        (g->dbs[0].root == P_INVALID) != (g->dbs[0].depth == 0))
        return bad(g, "meta page %u: the main database's record is damaged (flags 0x%x, depth %u)",
                   (unsigned)(txnid & 1), ost__rd_le16(d + 4), g->dbs[0].depth);
    return 0;
}

/* ---- pages -------------------------------------------------------------------------- */

static inline int kcmp(const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    /* 8 bytes at a time, big-endian, with no call: oids are 8 bytes, map
     * entries' keys 8 for the map's oid and mostly 8 or so more (memcmp's
     * call was a fifth of a lookup by key) */
    size_t n = na < nb ? na : nb;
    for (; n >= 8; n -= 8, a += 8, b += 8) {
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) {
            x = __builtin_bswap64(x);
            y = __builtin_bswap64(y);
            return x < y ? -1 : 1;
        }
    }
    for (; n; n--, a++, b++)
        if (*a != *b) return *a < *b ? -1 : 1;
    return na < nb ? -1 : na > nb;
}

static inline const uint8_t *node_at(const uint8_t *pg, unsigned i) {
    return pg + ost__rd_le16(pg + PAGEHDRSZ + 2 * i);
}
static inline unsigned nkeys(const uint8_t *pg) { return (ost__rd_le16(pg + 12) - PAGEHDRSZ) / 2; }
static inline uint64_t child_of(const uint8_t *node) {
    return ost__rd_le32(node) | (uint64_t)ost__rd_le16(node + 4) << 32;
}

static const char *kind(bool leaf) { return leaf ? "leaf" : "branch"; }

/* Checks an overflow run holding size bytes of a value, from page ov. */
static int check_overflow(ost__gd *g, int db, uint64_t pgno, unsigned i, uint64_t ov,
                          uint64_t size) {
    const char *dn = DB_NAMES[db];
    if (ov < 2 || ov > g->last_pg)
        return bad(g, "page %llu (%s, leaf): node %u: overflow page %llu is outside the pages 2 to %llu",
                   (unsigned long long)pgno, dn, i, (unsigned long long)ov,
                   (unsigned long long)g->last_pg);
    const uint8_t *op = g->base + ov * g->psize;
    uint32_t n = ost__rd_le32(op + 12);
    if (ost__rd_le64(op) != ov || ost__rd_le16(op + 10) != P_OVERFLOW || n == 0 ||
        n - 1 > g->last_pg - ov)
        return bad(g, "page %llu (%s, leaf): node %u: its overflow page %llu is damaged (header)",
                   (unsigned long long)pgno, dn, i, (unsigned long long)ov);
    if (size + PAGEHDRSZ > (uint64_t)n * g->psize) {
        bool past = size + PAGEHDRSZ > (g->last_pg + 1 - ov) * g->psize;
        return bad(g, "page %llu (%s, leaf): node %u: a value of %llu bytes on overflow page %llu runs past %s",
                   (unsigned long long)pgno, dn, i, (unsigned long long)size,
                   (unsigned long long)ov, past ? "the end of the file" : "its overflow run");
    }
    return 0;
}

/* Checks page pgno at level (1 the root) of database db before its first
 * use in this snapshot: guard.c's checks 1 to 5, lo and hi the bounds the
 * separators above give, from where it was reached. *out: the page. */
/* Whether the n nodes of page pg tile its nodes' space [upper, psize)
 * exactly. LMDB keeps them packed there: mdb_node_add takes each node's
 * EVEN(NODESIZE + key + data) bytes (8 for the overflow page number of an
 * F_BIGDATA node; a branch node has no data) from mp_upper down, and
 * mdb_node_del and mdb_update_key move the nodes below a changed one so
 * that no hole stays (libraries/liblmdb/mdb.c). A hole or an overlap
 * means a damaged page: most often a smaller mp_lower, which hides the
 * last nodes of the page from every reader (their keys read as absent,
 * still in order). A leaf node whose flags are not ones a node of ours
 * can have (leaf_value) is that node's own damage, reported when it is
 * read: its size cannot be told, so the tiling goes on at the next node.
 * Offsets were checked (even, in [upper, psize)) by the caller. */
static bool nodes_tile(ost__gd *g, int db, const uint8_t *pg, unsigned n, unsigned upper,
                       bool leaf) {
    unsigned ps = g->psize, allowed = db == OST__GD_MAIN ? F_BIGDATA | F_SUBDATA : F_BIGDATA;
    bool ok = true;
    for (unsigned i = 0; i < n; i++) {
        unsigned off = ost__rd_le16(pg + PAGEHDRSZ + 2 * i);
        if (g->at[off / 2]) ok = false; /* two nodes at one offset */
        g->at[off / 2] = (uint16_t)(i + 1);
    }
    uint64_t pos = upper; /* 64 bits: a damaged data size is up to 4 GiB */
    unsigned seen = 0;
    while (ok && pos < ps) {
        unsigned j = g->at[pos / 2];
        if (!j) {
            ok = false; /* a hole */
            break;
        }
        const uint8_t *nd = pg + pos;
        uint64_t size = NODESIZE + ost__rd_le16(nd + 6);
        unsigned fl = ost__rd_le16(nd + 4);
        seen++;
        if (leaf) {
            if ((fl & ~allowed) || fl == (F_BIGDATA | F_SUBDATA)) {
                /* its own damage: on to the next node by offset */
                do pos += 2;
                while (pos < ps && !g->at[pos / 2]);
                continue;
            }
            size += fl & F_BIGDATA ? 8u : ost__rd_le32(nd);
        }
        pos += (size + 1) & ~(uint64_t)1;
    }
    ok = ok && pos == ps && seen == n;
    for (unsigned i = 0; i < n; i++) g->at[ost__rd_le16(pg + PAGEHDRSZ + 2 * i) / 2] = 0;
    return ok;
}

static int check_page_full(ost__gd *g, int db, uint64_t pgno, unsigned level, ost__gdkey lo,
                           ost__gdkey hi, uint64_t from, const uint8_t **out);

/* Page pgno of database db, reached from slot `from` (at level `level`,
 * its keys bounded by lo and hi), in *out once checked: a page checked
 * before in this snapshot and reached from the same place costs a bit
 * test, inline; anything else goes to check_page_full. 0 or
 * OST_ECORRUPT (message set). */
static inline int check_page(ost__gd *g, int db, uint64_t pgno, unsigned level, ost__gdkey lo,
                             ost__gdkey hi, uint64_t from, const uint8_t **out) {
    if (OST_LIKELY(pgno >= 2 && pgno <= g->last_pg && (g->ok[pgno >> 6] >> (pgno & 63) & 1) &&
                   g->from[pgno] == from)) {
        *out = g->base + pgno * g->psize;
        return 0;
    }
    return check_page_full(g, db, pgno, level, lo, hi, from, out);
}

static __attribute__((noinline)) int check_page_full(ost__gd *g, int db, uint64_t pgno,
                                                     unsigned level, ost__gdkey lo, ost__gdkey hi,
                                                     uint64_t from, const uint8_t **out) {
    const char *dn = DB_NAMES[db];
    if (pgno < 2 || pgno > g->last_pg)
        return bad(g, "%s: page number %llu is outside the pages 2 to %llu", dn,
                   (unsigned long long)pgno, (unsigned long long)g->last_pg);
    const uint8_t *pg = g->base + pgno * g->psize;
    if (g->ok[pgno >> 6] >> (pgno & 63) & 1) {
        if (g->from[pgno] != from)
            return bad(g, "page %llu (%s): reached from two places in the tree (a damaged page number)",
                       (unsigned long long)pgno, dn);
        *out = pg;
        return 0;
    }
    bool leaf = level == g->dbs[db].depth;
    const char *pk = kind(leaf);
    unsigned ps = g->psize;
    if (ost__rd_le64(pg) != pgno)
        return bad(g, "page %llu (%s, %s): its header says page %llu", (unsigned long long)pgno, dn,
                   pk, (unsigned long long)ost__rd_le64(pg));
    if (ost__rd_le16(pg + 10) != (leaf ? P_LEAF : P_BRANCH))
        return bad(g, "page %llu (%s, %s): page flags 0x%x (a %s page is expected at level %u of %u)",
                   (unsigned long long)pgno, dn, pk, ost__rd_le16(pg + 10), pk, level, g->dbs[db].depth);
    unsigned lower = ost__rd_le16(pg + 12), upper = ost__rd_le16(pg + 14);
    if (lower < PAGEHDRSZ || (lower & 1) || lower > upper || upper > ps)
        return bad(g, "page %llu (%s, %s): free space bounds %u and %u are impossible",
                   (unsigned long long)pgno, dn, pk, lower, upper);
    unsigned n = (lower - PAGEHDRSZ) / 2;
    if (n == 0 && (!leaf || level > 1))
        return bad(g, "page %llu (%s, %s): no nodes", (unsigned long long)pgno, dn, pk);
    const uint8_t *prev = lo.p;
    size_t prevn = lo.n;
    /* key sizes: oids and serials are 8 bytes, an entry's key starts with
     * its map's oid; a damaged key size would otherwise read as another
     * key still in order, and a get of the true one would miss */
    unsigned kmin = 1, kmax = MAXKEY;
    if (db == OST__GD_RECS || db == OST__GD_TXLOG) kmin = kmax = 8;
    else if (db == OST__GD_MENTS) kmin = 8;
    for (unsigned i = 0; i < n; i++) {
        unsigned off = ost__rd_le16(pg + PAGEHDRSZ + 2 * i);
        if ((off & 1) || off < upper || off + NODESIZE > ps)
            return bad(g, "page %llu (%s, %s): node %u at offset %u is outside the nodes' space [%u, %u)",
                       (unsigned long long)pgno, dn, pk, i, off, upper, ps);
        const uint8_t *nd = pg + off;
        unsigned ks = ost__rd_le16(nd + 6);
        if (off + NODESIZE + ks > ps)
            return bad(g, "page %llu (%s, %s): node %u at offset %u: its key of %u bytes runs past the page end",
                       (unsigned long long)pgno, dn, pk, i, off, ks);
        if (!leaf) {
            uint64_t c = child_of(nd);
            if (c < 2 || c > g->last_pg)
                return bad(g, "page %llu (%s, branch): node %u: child page %llu is outside the pages 2 to %llu",
                           (unsigned long long)pgno, dn, i, (unsigned long long)c,
                           (unsigned long long)g->last_pg);
            if (i == 0) continue; /* its key is not used */
        }
        /* a leaf node's flags and data are checked when it is read
         * (leaf_value): a damaged value is that entry's error alone */
        if (ks < kmin || ks > kmax)
            return bad(g, "page %llu (%s, %s): node %u: key of %u bytes (%u to %u are possible)",
                       (unsigned long long)pgno, dn, pk, i, ks, kmin, kmax);
        const uint8_t *k = nd + NODESIZE;
        /* the first key may equal the lower bound (the separator is the
         * first key of its subtree); every later key must follow */
        if (prev) {
            int c = kcmp(prev, prevn, k, ks);
            if (c > 0 || (c == 0 && prev != lo.p))
                return bad(g, "page %llu (%s, %s): node %u: key out of order", (unsigned long long)pgno,
                           dn, pk, i);
        }
        if (hi.p && kcmp(k, ks, hi.p, hi.n) >= 0)
            return bad(g, "page %llu (%s, %s): node %u: key beyond the separator above the page",
                       (unsigned long long)pgno, dn, pk, i);
        prev = k;
        prevn = ks;
    }
    if (!nodes_tile(g, db, pg, n, upper, leaf))
        return bad(g, "page %llu (%s, %s): its %u nodes do not fill the nodes' space [%u, %u) "
                      "(a damaged node count or node)",
                   (unsigned long long)pgno, dn, pk, n, upper, ps);
    g->ok[pgno >> 6] |= (uint64_t)1 << (pgno & 63);
    g->from[pgno] = from;
    *out = pg;
    return 0;
}

/* The record of database db in this binding (looked up in the main
 * database the first time). */
static int db_of(ost__gd *g, int db, const gdb **out) {
    gdb *d = &g->dbs[db];
    if (!d->known) {
        MDB_val v;
        const char *name = DB_NAMES[db];
        int rc = ost__gd_get(g, OST__GD_MAIN, name, strlen(name), &v);
        if (rc == OST_ENOTFOUND) {
            d->known = d->absent = true;
        } else if (rc) {
            return rc;
        } else {
            /* check 3 made it 48 bytes with F_SUBDATA, or plain data */
            const uint8_t *r = v.mv_data;
            if (v.mv_size != 48)
                return bad(g, "main: the record of database %s is %zu bytes, not 48", name, v.mv_size);
            d->depth = ost__rd_le16(r + 6);
            d->root = ost__rd_le64(r + 40);
            d->entries = ost__rd_le64(r + 32);
            if ((ost__rd_le16(r + 4) & DB_PERSISTENT) || d->depth > OST__GD_MAXDEPTH ||
                (d->root == P_INVALID) != (d->depth == 0))
                return bad(g, "main: the record of database %s is damaged (flags 0x%x, depth %u)",
                           name, ost__rd_le16(r + 4), d->depth);
            d->known = true;
        }
    }
    if (d->absent) return OST_ENOTFOUND;
    *out = d;
    return 0;
}

int ost__gd_entries(ost__gd *g, int db, uint64_t *out) {
    const gdb *d = NULL;
    if (!g->bound) return OST_EINVAL;
    int rc = db_of(g, db, &d);
    if (!rc) *out = d->entries;
    return rc;
}

/* The root page's "from": the database record. */
static inline uint64_t root_from(int db) { return UINT64_MAX - (uint64_t)db; }
static inline uint64_t slot_from(uint64_t parent, unsigned i) { return parent << 16 | i; }

/* The child of node i of branch page pg (pgno, n nodes): its page number,
 * with *lo and *hi narrowed to the keys that bound it (the node's own key,
 * the next node's) and *from its slot. */
static uint64_t to_child(const uint8_t *pg, uint64_t pgno, unsigned n, unsigned i, ost__gdkey *lo,
                         ost__gdkey *hi, uint64_t *from) {
    const uint8_t *nd = node_at(pg, i);
    if (i > 0) *lo = (ost__gdkey){nd + NODESIZE, ost__rd_le16(nd + 6)};
    if (i + 1 < n) {
        const uint8_t *nx = node_at(pg, i + 1);
        *hi = (ost__gdkey){nx + NODESIZE, ost__rd_le16(nx + 6)};
    }
    *from = slot_from(pgno, i);
    return child_of(nd);
}

/* On a checked branch page of n nodes: the child holding key (the last
 * node i >= 1 whose key is <= key, else 0). */
static unsigned branch_find(const uint8_t *pg, unsigned n, const uint8_t *key, size_t klen) {
    unsigned lo = 1, hi = n; /* the answer is in [lo - 1, hi - 1] */
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const uint8_t *nd = node_at(pg, mid);
        if (kcmp(nd + NODESIZE, ost__rd_le16(nd + 6), key, klen) <= 0) lo = mid + 1;
        else hi = mid;
    }
    return lo - 1;
}

/* On a checked leaf page of n nodes: the first node whose key is >= key
 * (n when none), *eq whether it is equal. */
static unsigned leaf_find(const uint8_t *pg, unsigned n, const uint8_t *key, size_t klen, bool *eq) {
    unsigned lo = 0, hi = n;
    *eq = false;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        const uint8_t *nd = node_at(pg, mid);
        int c = kcmp(nd + NODESIZE, ost__rd_le16(nd + 6), key, klen);
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
            if (c == 0) *eq = true;
        }
    }
    return lo;
}

/* The value of node i of checked leaf page pgno of database db, after
 * checking the node's flags (0 or F_BIGDATA; F_SUBDATA with 48 bytes in
 * the main database: liblmdb would take any other for a sub-database or
 * duplicates and follow a sub-cursor that does not exist) and that its
 * data lies inside the page or its overflow run: 0, or OST_ECORRUPT with
 * the message set and *v empty. */
static int leaf_value(ost__gd *g, int db, uint64_t pgno, const uint8_t *pg, unsigned i, MDB_val *v) {
    const uint8_t *nd = node_at(pg, i);
    unsigned off = ost__rd_le16(pg + PAGEHDRSZ + 2 * i), ks = ost__rd_le16(nd + 6);
    unsigned fl = ost__rd_le16(nd + 4);
    uint64_t ds = ost__rd_le32(nd);
    const char *dn = DB_NAMES[db];
    unsigned allowed = db == OST__GD_MAIN ? F_BIGDATA | F_SUBDATA : F_BIGDATA;
    *v = (MDB_val){0, NULL};
    if ((fl & ~allowed) || fl == (F_BIGDATA | F_SUBDATA) || (fl == F_SUBDATA && ds != 48))
        return bad(g, "page %llu (%s, leaf): node %u: node flags 0x%x (a damaged node)",
                   (unsigned long long)pgno, dn, i, fl);
    if (fl & F_BIGDATA) {
        if (off + NODESIZE + ks + 8 > g->psize)
            return bad(g, "page %llu (%s, leaf): node %u at offset %u runs past the page end",
                       (unsigned long long)pgno, dn, i, off);
        uint64_t ov = ost__rd_le64(nd + NODESIZE + ks);
        int rc = check_overflow(g, db, pgno, i, ov, ds);
        if (rc) return rc;
        *v = (MDB_val){ds, (void *)(g->base + ov * g->psize + PAGEHDRSZ)};
        return 0;
    }
    if (off + NODESIZE + ks + ds > g->psize)
        return bad(g, "page %llu (%s, leaf): node %u at offset %u: its %llu bytes of data run past the page end",
                   (unsigned long long)pgno, dn, i, off, (unsigned long long)ds);
    *v = (MDB_val){ds, (void *)(nd + NODESIZE + ks)};
    return 0;
}

/* A get that did not find key at an end of its leaf: the leaf next to
 * that end is checked too before "no such key" is said. A separator key
 * damaged to another value still in order sends a descent to the wrong
 * leaf, whose own keys pass its checks; the neighbour leaf whose range
 * the damage cut then holds keys outside its bounds, which its checks
 * find. (A miss between two keys of one leaf needs no neighbour: the leaf
 * itself shows that no such key lies there.) */
static int confirm_miss(ost__gd *g, int db, const uint8_t *key, size_t klen) {
    ost__gdcur c;
    ost__gdcur_init(&c, g, db);
    MDB_val k, v;
    int rc = ost__gdcur_seek(&c, key, klen, &k, &v);
    if (rc == 0 && kcmp(k.mv_data, k.mv_size, key, klen) == 0)
        return bad(g, "%s: a get and a cursor disagree on a key (a damaged separator)",
                   DB_NAMES[db]);
    if (rc == 0) rc = ost__gdcur_prev(&c, &k, &v);
    else if (rc == OST_ENOTFOUND) rc = ost__gdcur_last(&c, &k, &v);
    return rc == 0 || rc == OST_ENOTFOUND ? OST_ENOTFOUND : rc;
}

int ost__gd_get(ost__gd *g, int db, const void *key, size_t klen, MDB_val *val) {
    if (!g->bound) return OST_EINVAL;
    const gdb *d = NULL;
    int rc = db_of(g, db, &d);
    if (rc) return rc;
    if (d->root == P_INVALID || klen == 0 || klen > MAXKEY) return OST_ENOTFOUND;
    const uint8_t *k = key;
    bool eq;
    /* the last leaf a get of this database ended on, when the key lies
     * between its first and last keys (a checked leaf holds every key of
     * that range): no descent */
    uint64_t h = g->hint[db];
    if (h != P_INVALID && (g->ok[h >> 6] >> (h & 63) & 1)) {
        const uint8_t *pg = g->base + h * g->psize;
        unsigned n = nkeys(pg);
        const uint8_t *f = n ? node_at(pg, 0) : NULL, *l = n ? node_at(pg, n - 1) : NULL;
        if (n && kcmp(f + NODESIZE, ost__rd_le16(f + 6), k, klen) <= 0 &&
            kcmp(k, klen, l + NODESIZE, ost__rd_le16(l + 6)) <= 0) {
            unsigned i = leaf_find(pg, n, k, klen, &eq);
            if (!eq) return OST_ENOTFOUND;
            return leaf_value(g, db, h, pg, i, val);
        }
    }
    uint64_t pgno = d->root, from = root_from(db);
    ost__gdkey lo = {NULL, 0}, hi = {NULL, 0};
    for (unsigned level = 1;; level++) {
        const uint8_t *pg;
        if ((rc = check_page(g, db, pgno, level, lo, hi, from, &pg))) return rc;
        unsigned n = nkeys(pg);
        if (level == d->depth) {
            g->hint[db] = pgno;
            unsigned i = leaf_find(pg, n, k, klen, &eq);
            if (!eq) return i == 0 || i == n ? confirm_miss(g, db, k, klen) : OST_ENOTFOUND;
            return leaf_value(g, db, pgno, pg, i, val);
        }
        pgno = to_child(pg, pgno, n, branch_find(pg, n, k, klen), &lo, &hi, &from);
    }
}

/* ---- cursors ------------------------------------------------------------------------- */

void ost__gdcur_init(ost__gdcur *c, ost__gd *g, int db) {
    c->g = g;
    c->db = db;
    c->on = false;
    c->top = 0;
    c->gen = g->gen;
}

enum { GO_FIRST, GO_LAST, GO_SEEK };

/* Pushes page pgno (reached from the stack's top, or the root when the
 * stack is empty) and descends to a leaf: its first or last node, or the
 * first node >= key (which may be one past the last). */
static int descend(ost__gdcur *c, const gdb *d, uint64_t pgno, ost__gdkey lo, ost__gdkey hi,
                   uint64_t from, int how, const uint8_t *key, size_t klen) {
    ost__gd *g = c->g;
    for (;;) {
        unsigned level = c->top + 1;
        const uint8_t *pg;
        int rc = check_page(g, c->db, pgno, level, lo, hi, from, &pg);
        if (rc) return rc;
        unsigned n = nkeys(pg), i;
        bool leaf = level == d->depth;
        if (how == GO_FIRST) i = 0;
        else if (how == GO_LAST) i = n ? n - 1 : 0;
        else if (leaf) {
            bool eq;
            i = leaf_find(pg, n, key, klen, &eq);
        } else
            i = branch_find(pg, n, key, klen);
        c->lv[c->top] = (typeof(c->lv[0])){pg, pgno, n, i, lo, hi};
        c->top++;
        if (leaf) return 0;
        pgno = to_child(pg, pgno, n, i, &lo, &hi, &from);
    }
}

/* Starts a cursor from the root. */
static int from_root(ost__gdcur *c, int how, const uint8_t *key, size_t klen) {
    ost__gd *g = c->g;
    c->on = false;
    c->top = 0;
    c->gen = g->gen;
    if (!g->bound) return OST_EINVAL;
    const gdb *d = NULL;
    int rc = db_of(g, c->db, &d);
    if (rc) return rc;
    if (d->root == P_INVALID) return OST_ENOTFOUND;
    ost__gdkey none = {NULL, 0};
    rc = descend(c, d, d->root, none, none, root_from(c->db), how, key, klen);
    if (rc) c->top = 0;
    return rc;
}

static int here(ost__gdcur *c, MDB_val *k, MDB_val *v) {
    typeof(c->lv[0]) *l = &c->lv[c->top - 1];
    c->on = true;
    const uint8_t *nd = node_at(l->pg, l->i);
    if (k) *k = (MDB_val){ost__rd_le16(nd + 6), (void *)(nd + NODESIZE)};
    MDB_val dummy;
    (void)leaf_value(c->g, c->db, l->pgno, l->pg, l->i, v ? v : &dummy);
    return 0;
}

/* Moves to the next (dir 1) or previous (dir -1) leaf entry. */
static int step(ost__gdcur *c, int dir, MDB_val *k, MDB_val *v) {
    if (c->gen != c->g->gen) {
        c->on = false;
        return OST_EBUSY;
    }
    if (!c->top) return OST_ENOTFOUND;
    typeof(c->lv[0]) *l = &c->lv[c->top - 1];
    if (dir > 0 ? l->i + 1 < l->n : l->i > 0 && l->i <= l->n) {
        l->i = dir > 0 ? l->i + 1 : l->i - 1;
        return here(c, k, v);
    }
    /* up to the lowest level with a sibling on that side, then down */
    unsigned t = c->top - 1;
    while (t > 0) {
        typeof(c->lv[0]) *p = &c->lv[t - 1];
        if (dir > 0 ? p->i + 1 < p->n : p->i > 0) {
            p->i = dir > 0 ? p->i + 1 : p->i - 1;
            c->top = t;
            ost__gdkey lo = p->lo, hi = p->hi;
            uint64_t from, child = to_child(p->pg, p->pgno, p->n, p->i, &lo, &hi, &from);
            const gdb *d = &c->g->dbs[c->db];
            int rc = descend(c, d, child, lo, hi, from, dir > 0 ? GO_FIRST : GO_LAST, NULL, 0);
            if (rc) {
                c->top = 0;
                c->on = false;
                return rc;
            }
            return here(c, k, v);
        }
        t--;
    }
    c->top = 0;
    c->on = false;
    return OST_ENOTFOUND;
}

int ost__gdcur_first(ost__gdcur *c, MDB_val *k, MDB_val *v) {
    int rc = from_root(c, GO_FIRST, NULL, 0);
    if (rc) return rc;
    if (!c->lv[c->top - 1].n) return c->top = 0, OST_ENOTFOUND;
    return here(c, k, v);
}

int ost__gdcur_last(ost__gdcur *c, MDB_val *k, MDB_val *v) {
    int rc = from_root(c, GO_LAST, NULL, 0);
    if (rc) return rc;
    if (!c->lv[c->top - 1].n) return c->top = 0, OST_ENOTFOUND;
    return here(c, k, v);
}

int ost__gdcur_seek(ost__gdcur *c, const void *key, size_t klen, MDB_val *k, MDB_val *v) {
    if (klen > MAXKEY) klen = MAXKEY; /* longer keys are none of LMDB's */
    int rc = from_root(c, GO_SEEK, key, klen);
    if (rc) return rc;
    typeof(c->lv[0]) *l = &c->lv[c->top - 1];
    if (!l->n) return c->top = 0, OST_ENOTFOUND;
    if (l->i < l->n) return here(c, k, v);
    l->i = l->n - 1; /* past this leaf's last key: the next leaf's first */
    return step(c, 1, k, v);
}

int ost__gdcur_next(ost__gdcur *c, MDB_val *k, MDB_val *v) {
    if (!c->on) return OST_ENOTFOUND;
    return step(c, 1, k, v);
}

int ost__gdcur_prev(ost__gdcur *c, MDB_val *k, MDB_val *v) {
    if (!c->on) return OST_ENOTFOUND;
    return step(c, -1, k, v);
}

int ost__gd_check_db(ost__gd *g, int db) {
    ost__gdcur c;
    ost__gdcur_init(&c, g, db);
    MDB_val k, v;
    /* every entry in turn: each step to a new leaf checks it and the
     * branch pages above it, and each value's node is checked */
    int rc;
    for (rc = ost__gdcur_first(&c, &k, &v); !rc; rc = ost__gdcur_next(&c, &k, &v))
        if (!v.mv_data) return OST_ECORRUPT;
    return rc == OST_ENOTFOUND ? (g->dbs[db].absent ? OST_ENOTFOUND : 0) : rc;
}

int ost__gd_check_dbs(ost__engine *en, MDB_txn *t, const int *dbs, size_t n, char *msg,
                      size_t cap) {
    ost__gd *g;
    int rc = ost__gd_new(en, &g);
    if (rc) return rc;
    /* a meta page rewritten under the bind (1): t begins again, on the
     * newest snapshot, never read unchecked */
    for (int tries = 0;; tries++) {
        rc = ost__gd_bind(g, t);
        if (rc != 1) break;
        mdb_txn_reset(t);
        if (tries == 8 || mdb_txn_renew(t)) {
            snprintf(g->msg, sizeof g->msg,
                     "its meta page was rewritten at each of %d tries (writers commit too fast)",
                     tries + 1);
            rc = OST_EBUSY;
            break;
        }
    }
    for (size_t i = 0; !rc && i < n; i++) {
        rc = ost__gd_check_db(g, dbs[i]);
        if (rc == OST_ENOTFOUND) rc = 0;
    }
    if (rc < 0 && msg) snprintf(msg, cap, "%s", g->msg);
    ost__gd_free(g);
    return rc;
}

int ost__gd_check_tables(ost__engine *en, MDB_txn *t, char *msg, size_t cap) {
    static const int dbs[] = {OST__GD_MAIN, OST__GD_META, OST__GD_CLASSES};
    return ost__gd_check_dbs(en, t, dbs, sizeof dbs / sizeof dbs[0], msg, cap);
}

int ost__gd_check_env(ost__engine *en, char *msg, size_t cap) {
    for (int tries = 0; tries < 8; tries++) {
        MDB_txn *t;
        int brc = mdb_txn_begin(en->env, NULL, MDB_RDONLY, &t);
        /* another process grew the map since mdb_env_open sized this one:
         * adopt its size (ost__remap) and check again */
        if (brc == MDB_MAP_RESIZED && !ost__remap(en, brc)) continue;
        if (brc) return 0; /* the caller's begin says why */
        int rc = ost__gd_check_tables(en, t, msg, cap);
        mdb_txn_abort(t);
        return rc;
    }
    return 0; /* the map moved at every try: the caller's begin says why */
}
