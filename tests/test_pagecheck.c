/* Page walker (store/lmdb/pagecheck.c): a clean store walks clean with the
 * counts liblmdb keeps; targeted damage (meta pages, branch pointers, node
 * offsets, key order, overflow runs, cycles, truncation, the free list) is
 * reported naming the database and the page; each and scan deliver what
 * is intact; sorted duplicates and integer keys made by liblmdb walk
 * clean; and seeded random byte changes never crash the walker, are never
 * reported when they hit unused bytes, and how often they are reported when
 * they hit live bytes is measured.
 *
 * The tests read the file's layout with their own small readers below
 * (page size, meta pages, the main database's records, nodes), so that the
 * damage they plant does not depend on the walker under test. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <lmdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "leakcheck.h"
#include "ostore.h"
#include "lmdb/pagecheck.h"
#include "storetest.h"

#define NITEMS 6000 /* records: enough for a tree of depth 3 */
#define NMAP 300    /* map entries */
#define BIGLEN 12000 /* a value over three pages */
/* The big node's record (the root's, listing NITEMS references, is bigger) */
#define IS_BIG(vl) ((vl) >= BIGLEN && (vl) < BIGLEN + 100)

static struct {
    char tmp[64];   /* per-test directory, removed at the end */
    char dir[128];  /* the store: tmp/db */
    char copy[160]; /* the damaged copy: tmp/copy */
    ost_registry *reg;
    ost_value node; /* pctest.Node: persistent, attribute dict */
    uint8_t *img;   /* the copy's bytes, kept equal to the file */
    size_t len;
} F;

static void setup(void) {
    strcpy(F.tmp, "/tmp/ostore-pagecheck-XXXXXX");
    F.reg = fixture_setup(F.tmp, F.dir, sizeof F.dir);
    snprintf(F.copy, sizeof F.copy, "%s/copy", F.tmp);
    ost_class_def node = {.module = "pctest", .name = "Node", .persistent = true};
    cr_assert_eq(ost_registry_add(F.reg, &node, &F.node), 0);
}

static void teardown(void) {
    free(F.img);
    F.img = NULL;
    fixture_teardown(F.tmp, &F.reg);
}

TestSuite(pagecheck, .init = setup, .fini = teardown, .timeout = 300);

/* ---- the store ------------------------------------------------------------- */

/* Writes the store: commit 1 stores NITEMS nodes of about 200 bytes in a
 * list (records deep enough for three levels), a node holding BIGLEN bytes
 * (an overflow run) and a map of NMAP int keys; commit 2 changes 100 nodes
 * (so the free list holds pages, and txlog an entry). */
static void make_store(void) {
    ost_store_options o = options_for(F.reg, true);
    ost_store *st = open_with(F.dir, &o);
    ost_conn *c = conn_of(st);
    char text[160];
    memset(text, 't', sizeof text);
    ost_value items = ost_list_new(NITEMS);
    for (int i = 0; i < NITEMS; i++) {
        ost_value n = ost_instance_new(ost_incref(F.node));
        cr_assert(n);
        REQUIRE(ost_instance_setattr(n, "n", ost_int(i)) == 0, "setattr");
        REQUIRE(ost_instance_setattr(n, "text", ost_str(text, 150)) == 0, "setattr");
        REQUIRE(ost_list_append(items, n) == 0, "append");
    }
    root_set(c, "items", items);
    ost_value big = ost_instance_new(ost_incref(F.node));
    uint8_t *blob = malloc(BIGLEN);
    for (int i = 0; i < BIGLEN; i++) blob[i] = (uint8_t)(i * 7);
    cr_assert_eq(ost_instance_setattr(big, "blob", ost_bytes(blob, BIGLEN)), 0);
    free(blob);
    root_set(c, "big", big);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0);
    for (int k = 0; k < NMAP; k++)
        REQUIRE(ost_map_set(c, m, ost_int(k), ost_int(k * k)) == 0, "map_set");
    root_set(c, "index", ost_incref(m)); /* m is borrowed from the cache */
    commit_ok(c);
    items = root_get(c, "items");
    for (int i = 0; i < 100; i++)
        REQUIRE(ost_instance_setattr(ost_item(items, (size_t)i), "n", ost_int(-i)) == 0, "set");
    commit_ok(c);
    ost_conn_close(c);
    ost_store_close(st);
}

/* ---- the copy and its bytes -------------------------------------------------- */

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "%s: %s", path, strerror(errno));
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)n + 1);
    cr_assert_eq(fread(b, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return b;
}

static void data_path(char *out, size_t cap, const char *dir) {
    snprintf(out, cap, "%s/data.mdb", dir);
}

/* Copies the store's data.mdb to F.copy (made if needed); F.img gets its
 * bytes. */
static void copy_store(void) {
    char src[256], dst[256];
    data_path(src, sizeof src, F.dir);
    data_path(dst, sizeof dst, F.copy);
    mkdir(F.copy, 0755);
    free(F.img);
    F.img = read_file(src, &F.len);
    FILE *f = fopen(dst, "wb");
    cr_assert(f);
    cr_assert_eq(fwrite(F.img, 1, F.len, f), F.len);
    fclose(f);
}

/* Writes n bytes at off of the copy (pwrite), and into F.img. */
static void poke(uint64_t off, const void *b, size_t n) {
    char p[256];
    data_path(p, sizeof p, F.copy);
    int fd = open(p, O_WRONLY);
    cr_assert(fd >= 0);
    cr_assert_eq(pwrite(fd, b, n, (off_t)off), (ssize_t)n);
    close(fd);
    cr_assert(off + n <= F.len);
    memcpy(F.img + off, b, n);
}

static void poke16(uint64_t off, uint16_t v) {
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    poke(off, b, 2);
}
static void poke32(uint64_t off, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> 8 * i);
    poke(off, b, 4);
}
static void poke64(uint64_t off, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> 8 * i);
    poke(off, b, 8);
}

static uint64_t g(uint64_t off, int n) {
    cr_assert(off + (uint64_t)n <= F.len, "read at %llu beyond the file", (unsigned long long)off);
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | F.img[off + (uint64_t)i];
    return v;
}
#define G16(o) ((unsigned)g((o), 2))
#define G32(o) ((uint32_t)g((o), 4))
#define G64(o) g((o), 8)

/* ---- the layout, read by the test ------------------------------------------ */

typedef struct {
    uint32_t pad;
    unsigned flags, depth;
    uint64_t branch, leaf, overflow, entries, root;
} rec;

static unsigned psize(void) { return G32(40); }
static uint64_t pg(uint64_t pgno) { return pgno * psize(); }
static int cur_meta(void) { return G64(pg(1) + 144) > G64(144) ? 1 : 0; }

static rec rec_at(uint64_t off) {
    rec r = {G32(off), G16(off + 4), G16(off + 6), G64(off + 8),
             G64(off + 16), G64(off + 24), G64(off + 32), G64(off + 40)};
    return r;
}

static int nkeys(uint64_t pgno) { return (int)(G16(pg(pgno) + 12) - 16) / 2; }
static uint64_t node_at(uint64_t pgno, int i) { return pg(pgno) + G16(pg(pgno) + 16 + 2 * (uint64_t)i); }
static uint64_t child(uint64_t pgno, int i) {
    uint64_t n = node_at(pgno, i);
    return G16(n) | (uint64_t)G16(n + 2) << 16 | (uint64_t)G16(n + 4) << 32;
}
static void set_child(uint64_t pgno, int i, uint64_t c) {
    uint64_t n = node_at(pgno, i);
    poke16(n, (uint16_t)c);
    poke16(n + 2, (uint16_t)(c >> 16));
    poke16(n + 4, (uint16_t)(c >> 32));
}
static unsigned ksize(uint64_t node) { return G16(node + 6); }

/* The record of named database name in the current snapshot; *holder the
 * main database's leaf page (main is one leaf in these stores). */
static rec named_db(const char *name, uint64_t *holder) {
    rec m = rec_at(pg((uint64_t)cur_meta()) + 88);
    cr_assert_eq(m.depth, 1, "the main database is one leaf");
    size_t len = strlen(name);
    for (int i = 0; i < nkeys(m.root); i++) {
        uint64_t n = node_at(m.root, i);
        if (ksize(n) == len && !memcmp(F.img + n + 8, name, len)) {
            cr_assert_eq(G16(n + 4), 2, "F_SUBDATA");
            if (holder) *holder = m.root;
            return rec_at(n + 8 + len);
        }
    }
    cr_assert_fail("no database %s", name);
    return m;
}

/* ---- problems ----------------------------------------------------------------- */

typedef struct {
    char db[64];
    bool has_db, has_keys, lo_set, hi_set;
    uint64_t pgno;
    uint8_t lo[32], hi[32];
    size_t lolen, hilen;
    char msg[256];
} prob;

typedef struct {
    int n;
    prob p[64];
} probs;

static void collect_p(void *ud, const ost__pc_problem *p) {
    probs *ps = ud;
    if (ps->n < 64) {
        prob *q = &ps->p[ps->n];
        memset(q, 0, sizeof *q);
        q->has_db = p->db != NULL;
        if (p->db) snprintf(q->db, sizeof q->db, "%s", p->db);
        q->pgno = p->pgno;
        q->has_keys = p->has_keys;
        q->lo_set = p->key_lo != NULL;
        q->hi_set = p->key_hi != NULL;
        q->lolen = p->klo_len < 32 ? p->klo_len : 32;
        q->hilen = p->khi_len < 32 ? p->khi_len : 32;
        if (p->key_lo) memcpy(q->lo, p->key_lo, q->lolen);
        if (p->key_hi) memcpy(q->hi, p->key_hi, q->hilen);
        snprintf(q->msg, sizeof q->msg, "%s", p->msg);
    }
    ps->n++;
}

static const char *dump(const probs *ps) {
    static char out[4096];
    size_t o = 0;
    out[0] = 0;
    for (int i = 0; i < ps->n && i < 10 && o < sizeof out - 300; i++)
        o += (size_t)snprintf(out + o, sizeof out - o, "\n  [%s] page %lld: %s",
                              ps->p[i].has_db ? ps->p[i].db : "-", (long long)ps->p[i].pgno,
                              ps->p[i].msg);
    return out;
}

/* Index of the first problem of db (NULL: any) at page pgno (UINT64_MAX:
 * any) whose message holds needle; -1 if none. */
static int find(const probs *ps, const char *db, uint64_t pgno, const char *needle) {
    for (int i = 0; i < ps->n && i < 64; i++) {
        const prob *q = &ps->p[i];
        if (db && (!q->has_db || strcmp(q->db, db))) continue;
        if (pgno != UINT64_MAX && q->pgno != pgno) continue;
        if (needle && !strstr(q->msg, needle)) continue;
        return i;
    }
    return -1;
}

#define EXPECT(ps, db, pgno, needle)                                                       \
    ({                                                                                     \
        int at_ = find((ps), (db), (pgno), (needle));                                      \
        cr_assert(at_ >= 0, "no problem of %s at page %lld saying '%s'; got %d:%s", (db), \
                  (long long)(pgno), (needle), (ps)->n, dump(ps));                         \
        at_;                                                                               \
    })

static ost__pc *open_dir(const char *dir) {
    ost__pc *pc;
    char msg[256];
    int rc = ost__pc_open(dir, &pc, msg, sizeof msg);
    cr_assert_eq(rc, 0, "open %s: %s %s", dir, ost_err_name(rc), msg);
    return pc;
}

/* Walks the copy; the problems in *ps. */
static int walk_copy(probs *ps, ost__pc_stats *st) {
    memset(ps, 0, sizeof *ps);
    ost__pc *pc = open_dir(F.copy);
    int rc = ost__pc_walk(pc, collect_p, ps, st);
    ost__pc_close(pc);
    return rc;
}

static void expect_damage(probs *ps) {
    int rc = walk_copy(ps, NULL);
    cr_assert_eq(rc, OST_ECORRUPT, "walk: %s", ost_err_name(rc));
    cr_assert(ps->n > 0);
}

static void be64(uint8_t *b, uint64_t v) { put_be64(b, v); }

/* ======================================================================= */
/* 1. clean stores                                                          */
/* ======================================================================= */

static void expect_stat(MDB_txn *t, MDB_dbi dbi, const ost__pc_dbstat *d) {
    MDB_stat ms;
    cr_assert_eq(mdb_stat(t, dbi, &ms), 0);
    cr_assert_eq(d->depth, ms.ms_depth, "%s depth", d->name);
    cr_assert_eq(d->branch, ms.ms_branch_pages, "%s branch pages", d->name);
    cr_assert_eq(d->leaf, ms.ms_leaf_pages, "%s leaf pages", d->name);
    cr_assert_eq(d->overflow, ms.ms_overflow_pages, "%s overflow pages", d->name);
    cr_assert_eq(d->entries, ms.ms_entries, "%s entries", d->name);
}

/* Compares a walk of dir with what liblmdb says of it: every database's
 * counts, the free pages. Returns the walk's stats. */
static ost__pc_stats walk_matches_lmdb(const char *dir) {
    ost__pc *pc = open_dir(dir);
    char msg[256];
    cr_assert_eq(ost__pc_meta_check(pc, msg, sizeof msg), 0, "%s", msg);
    probs ps = {0};
    ost__pc_stats st;
    int rc = ost__pc_walk(pc, collect_p, &ps, &st);
    cr_assert_eq(rc, 0, "walk: %s:%s", ost_err_name(rc), dump(&ps));
    cr_assert_eq(ps.n, 0);
    MDB_env *env = raw_env(dir);
    MDB_txn *t;
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &t), 0);
    ost__pc_dbstat d;
    for (size_t i = 0; ost__pc_db(pc, i, &d) == 0; i++) {
        cr_assert_eq(d.problems, 0);
        cr_assert(d.branch == d.rec_branch && d.leaf == d.rec_leaf &&
                  d.overflow == d.rec_overflow && d.entries == d.rec_entries,
                  "%s: walked and recorded counts differ", d.name);
        if (i < 2) {
            expect_stat(t, (MDB_dbi)i, &d);
            continue;
        }
        MDB_dbi dbi;
        cr_assert_eq(mdb_dbi_open(t, d.name, 0, &dbi), 0, "%s", d.name);
        expect_stat(t, dbi, &d);
    }
    /* the free pages as liblmdb lists them */
    MDB_cursor *cur;
    MDB_val k, v;
    uint64_t nfree = 0;
    cr_assert_eq(mdb_cursor_open(t, 0, &cur), 0);
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) nfree += *(const uint64_t *)v.mv_data;
    mdb_cursor_close(cur);
    cr_assert_eq(st.free, nfree);
    MDB_envinfo info;
    mdb_env_info(env, &info);
    cr_assert_eq(st.last_pg, info.me_last_pgno);
    cr_assert_eq(st.txnid, info.me_last_txnid);
    /* every page from 2 to the last is in a tree (sub-databases too) or free */
    cr_assert_eq(2 + st.branch + st.leaf + st.overflow + st.free, st.last_pg + 1);
    mdb_txn_abort(t);
    mdb_env_close(env);
    ost__pc_close(pc);
    return st;
}

OST_TEST(pagecheck, clean_store_walks_clean_with_lmdbs_counts) {
    make_store();
    ost__pc_stats st = walk_matches_lmdb(F.dir);
    cr_assert_eq(st.psize, 4096u);
    /* every page from 2 to the last is in a tree or free: the sums agree */
    uint64_t dbpages = 0;
    ost__pc *pc = open_dir(F.dir);
    ost__pc_walk(pc, NULL, NULL, NULL);
    ost__pc_dbstat d;
    bool records = false, mapents = false;
    for (size_t i = 0; ost__pc_db(pc, i, &d) == 0; i++) {
        dbpages += d.branch + d.leaf + d.overflow;
        if (!strcmp(d.name, "records")) {
            records = true;
            /* the root, NITEMS items, the big node, the map */
            cr_assert_eq(d.entries, NITEMS + 3);
            cr_assert_geq(d.depth, 3, "deep enough for the cycle test");
            cr_assert_geq(d.overflow, 3);
        }
        if (!strcmp(d.name, "mapents")) {
            mapents = true;
            cr_assert_eq(d.entries, NMAP);
        }
        if (!strcmp(d.name, "meta")) cr_assert_eq(d.entries, 5);
    }
    cr_assert(records && mapents);
    cr_assert_eq(2 + dbpages + st.free, st.last_pg + 1);
    cr_assert_eq(st.branch + st.leaf + st.overflow, dbpages);
    char path[256];
    data_path(path, sizeof path, F.dir);
    struct stat sb;
    cr_assert_eq(stat(path, &sb), 0);
    cr_assert_eq(st.pages * st.psize, (uint64_t)sb.st_size);
    ost__pc_close(pc);
}

/* each's callback: compares every entry with the next of an LMDB cursor. */
typedef struct {
    MDB_cursor *cur;
    MDB_cursor_op op;
    uint64_t n;
    int stop_at;
} follow;

static int follow_lmdb(void *ud, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                       uint64_t pgno) {
    follow *f = ud;
    MDB_val k, v;
    REQUIRE(mdb_cursor_get(f->cur, &k, &v, f->op) == 0, "LMDB has fewer entries than each");
    f->op = MDB_NEXT;
    REQUIRE(k.mv_size == klen && !memcmp(k.mv_data, key, klen), "key %llu differs",
            (unsigned long long)f->n);
    REQUIRE(v.mv_size == vlen && !memcmp(v.mv_data, val, vlen), "value %llu differs",
            (unsigned long long)f->n);
    REQUIRE(pgno >= 2, "a leaf page");
    f->n++;
    return f->stop_at && f->n == (uint64_t)f->stop_at ? 77 : 0;
}

/* each over database name of dir gives what an LMDB cursor gives, in order. */
static uint64_t each_matches_lmdb(const char *dir, const char *name) {
    ost__pc *pc = open_dir(dir);
    MDB_env *env = raw_env(dir);
    MDB_txn *t;
    MDB_dbi dbi;
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &t), 0);
    cr_assert_eq(mdb_dbi_open(t, name, 0, &dbi), 0);
    follow f = {0};
    f.op = MDB_FIRST;
    cr_assert_eq(mdb_cursor_open(t, dbi, &f.cur), 0);
    probs ps = {0};
    int rc = ost__pc_each(pc, name, follow_lmdb, collect_p, &f);
    cr_assert_eq(rc, 0, "each %s: %s%s", name ? name : "main", ost_err_name(rc), dump(&ps));
    MDB_val k, v;
    cr_assert_neq(mdb_cursor_get(f.cur, &k, &v, f.op), 0, "LMDB has more entries than each");
    mdb_cursor_close(f.cur);
    mdb_txn_abort(t);
    mdb_env_close(env);
    ost__pc_close(pc);
    return f.n;
}

OST_TEST(pagecheck, each_gives_lmdbs_entries_in_order) {
    make_store();
    cr_assert_eq(each_matches_lmdb(F.dir, "records"), NITEMS + 3);
    cr_assert_eq(each_matches_lmdb(F.dir, "mapents"), NMAP);
    cr_assert_eq(each_matches_lmdb(F.dir, "classes"), 6); /* 3 classes, 2 keys each */
    each_matches_lmdb(F.dir, "meta");
    each_matches_lmdb(F.dir, "txlog");
    each_matches_lmdb(F.dir, "mapdels");
    /* main: the named databases (mapdels too: a read-write open makes it) */
    cr_assert_eq(each_matches_lmdb(F.dir, NULL), 6);

    ost__pc *pc = open_dir(F.dir);
    follow f = {0};
    cr_assert_eq(ost__pc_each(pc, "nosuch", follow_lmdb, NULL, &f), OST_ENOTFOUND);
    /* a nonzero return stops and is returned */
    MDB_env *env = raw_env(F.dir);
    MDB_txn *t;
    MDB_dbi dbi;
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &t), 0);
    cr_assert_eq(mdb_dbi_open(t, "records", 0, &dbi), 0);
    cr_assert_eq(mdb_cursor_open(t, dbi, &f.cur), 0);
    f.op = MDB_FIRST;
    f.stop_at = 10;
    cr_assert_eq(ost__pc_each(pc, "records", follow_lmdb, NULL, &f), 77);
    cr_assert_eq(f.n, 10);
    mdb_cursor_close(f.cur);
    mdb_txn_abort(t);
    mdb_env_close(env);
    ost__pc_close(pc);
}

static int count_entry(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                       uint64_t pgno) {
    (void)k, (void)kl, (void)v, (void)vl, (void)pgno;
    ++*(uint64_t *)ud;
    return 0;
}

/* Records as each gives them: oids seen (bitmap over 0..NITEMS+3); and
 * the problems reported (each's one ud serves both callbacks). */
typedef struct {
    probs ps;
    uint8_t seen[NITEMS + 8];
    uint64_t n, big;
    uint64_t last;
    bool ascending;
} oids;

static int collect_oid(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                       uint64_t pgno) {
    (void)v, (void)pgno;
    oids *o = ud;
    REQUIRE(kl == 8, "a records key is 8 bytes");
    uint64_t oid = 0;
    for (int i = 0; i < 8; i++) oid = oid << 8 | k[i];
    if (o->n && oid <= o->last) o->ascending = false;
    o->last = oid;
    if (oid < NITEMS + 8) o->seen[oid] = 1;
    if (IS_BIG(vl)) o->big++;
    o->n++;
    return 0;
}

static void collect_oid_p(void *ud, const ost__pc_problem *p) { collect_p(&((oids *)ud)->ps, p); }

/* Like collect_oid for scan, which mixes every database and stale copies:
 * only values shaped as records (a serial up to 10, the reserved field 0). */
static int collect_oid_any(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                           uint64_t pgno) {
    (void)pgno;
    oids *o = ud;
    if (kl != 8 || vl < 16 || get_le64(v) > 10) return 0; /* a record: serial 1 to 10 */
    uint64_t oid = 0;
    for (int i = 0; i < 8; i++) oid = oid << 8 | k[i];
    if (oid < NITEMS + 8) o->seen[oid] = 1;
    if (IS_BIG(vl)) o->big++;
    o->n++;
    return 0;
}

/* ======================================================================= */
/* 2. opening                                                               */
/* ======================================================================= */

OST_TEST(pagecheck, open_refuses_what_is_not_a_data_file) {
    ost__pc *pc = (ost__pc *)1;
    char msg[256], sub[256], path[300];
    cr_assert_eq(ost__pc_open(F.dir, &pc, msg, sizeof msg), OST_ENOTFOUND, "%s", msg);
    cr_assert_null(pc);
    cr_assert(strstr(msg, "data.mdb"), "%s", msg);

    /* a directory where the file should be */
    snprintf(sub, sizeof sub, "%s/d1", F.tmp);
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/data.mdb", sub);
    mkdir(path, 0755);
    cr_assert_eq(ost__pc_open(sub, &pc, msg, sizeof msg), OST_EIO);
    cr_assert(strstr(msg, "not a regular file"), "%s", msg);

    /* a FIFO: refused at once, never waited on */
    snprintf(sub, sizeof sub, "%s/d2", F.tmp);
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/data.mdb", sub);
    cr_assert_eq(mkfifo(path, 0644), 0);
    cr_assert_eq(ost__pc_open(sub, &pc, msg, sizeof msg), OST_EIO);
    cr_assert(strstr(msg, "not a regular file"), "%s", msg);

    /* too small for two meta pages: empty, 100 bytes, one page and a bit */
    snprintf(sub, sizeof sub, "%s/d3", F.tmp);
    mkdir(sub, 0755);
    snprintf(path, sizeof path, "%s/data.mdb", sub);
    size_t sizes[] = {0, 100, 5000};
    make_store();
    size_t n;
    uint8_t *img = read_file((snprintf(msg, sizeof msg, "%s/data.mdb", F.dir), msg), &n);
    for (size_t i = 0; i < 3; i++) {
        FILE *f = fopen(path, "wb");
        fwrite(img, 1, sizes[i], f);
        fclose(f);
        cr_assert_eq(ost__pc_open(sub, &pc, msg, sizeof msg), OST_ECORRUPT, "%zu bytes",
                     sizes[i]);
        cr_assert(strstr(msg, "too small for two meta pages"), "%s", msg);
    }
    free(img);
    /* the real one opens */
    pc = open_dir(F.dir);
    ost__pc_close(pc);
    ost__pc_close(NULL);
}

/* ======================================================================= */
/* 3. meta pages                                                            */
/* ======================================================================= */

static int meta_check_copy(char *msg, size_t cap) {
    ost__pc *pc = open_dir(F.copy);
    int rc = ost__pc_meta_check(pc, msg, cap);
    ost__pc_close(pc);
    return rc;
}

OST_TEST(pagecheck, meta_page_0_with_page_size_0) {
    make_store();
    copy_store();
    int cur = cur_meta();
    poke32(40, 0); /* meta page 0's md_pad of the free list: the page size */
    char msg[512];
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    cr_assert(strstr(msg, "data.mdb: meta page 0: page size 0 (must be a power of two from 512 "
                          "to 32768)"),
              "%s", msg);
    /* the walk goes on from meta page 1, found at its own page size */
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "meta page", 0, "page size 0");
    if (cur == 1) cr_assert_eq(ps.n, 1, "meta page 1's snapshot is intact:%s", dump(&ps));
}

OST_TEST(pagecheck, bad_magic) {
    make_store();
    copy_store();
    poke32(pg(1) + 16, 0xDEADBEEF);
    char msg[512];
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    cr_assert(strstr(msg, "meta page 1") && strstr(msg, "magic 0xdeadbeef"), "%s", msg);
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "meta page", 1, "magic");
}

OST_TEST(pagecheck, damage_to_the_older_meta_page_is_named_as_such) {
    make_store();
    copy_store();
    int older = 1 - cur_meta();
    poke32(pg((uint64_t)older) + 20, 7); /* version */
    char msg[512];
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "meta page %d: data version 7", older);
    cr_assert(strstr(msg, want), "%s", msg);
    cr_assert(strstr(msg, "the current one, is sane"), "%s", msg);
    /* the current snapshot still walks, with the meta page reported */
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "meta page", (uint64_t)older, "data version 7");
    cr_assert_eq(ps.n, 1, "%s", dump(&ps));
}

/* A byte of a transaction id changed high up (the damage test's seed
 * 1711663137, trial 64): the parity stays right and the page is sane, but
 * the two ids are no longer one commit apart, which LMDB never writes. */
OST_TEST(pagecheck, meta_transaction_ids_not_one_commit_apart) {
    make_store();
    copy_store();
    int older = 1 - cur_meta();
    uint64_t id = G64(pg((uint64_t)older) + 144);
    poke64(pg((uint64_t)older) + 144, id + ((uint64_t)1 << 48)); /* now the higher one */
    probs ps;
    expect_damage(&ps);
    int at = EXPECT(&ps, "meta page", (uint64_t)older, "one commit apart");
    char want[120];
    snprintf(want, sizeof want, "transaction ids %llu and %llu",
             (unsigned long long)G64(144), (unsigned long long)G64(pg(1) + 144));
    cr_assert(strstr(ps.p[at].msg, want), "%s", ps.p[at].msg);
    /* one apart, the other way round (the older made newer by 2): what LMDB
     * could have written, so no such problem */
    copy_store();
    poke64(pg((uint64_t)older) + 144, id + 2);
    int rc = walk_copy(&ps, NULL);
    cr_assert(rc == 0 || find(&ps, "meta page", (uint64_t)older, "one commit apart") < 0,
              "%s", dump(&ps));
}

OST_TEST(pagecheck, last_page_beyond_the_file) {
    make_store();
    copy_store();
    int cur = cur_meta();
    uint64_t pages = F.len / psize();
    poke64(pg((uint64_t)cur) + 136, pages + 10);
    char msg[512];
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "meta page %d: last page %llu lies beyond the end of the file",
             cur, (unsigned long long)pages + 10);
    cr_assert(strstr(msg, want), "%s", msg);
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "meta page", (uint64_t)cur, "beyond the end of the file");
}

OST_TEST(pagecheck, map_size_and_database_records_in_meta) {
    make_store();
    copy_store();
    int cur = cur_meta();
    uint64_t m = pg((uint64_t)cur);
    char msg[512];
    poke64(m + 32, 4096); /* map size */
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    cr_assert(strstr(msg, "map size 4096 is smaller"), "%s", msg);
    copy_store();
    poke16(m + 88 + 6, 40); /* the main database's depth */
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    cr_assert(strstr(msg, "main database: depth 40"), "%s", msg);
    copy_store();
    poke64(m + 88 + 40, 1); /* its root: a meta page */
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    cr_assert(strstr(msg, "main database: root page 1 is a meta page"), "%s", msg);
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "main", (uint64_t)cur, "root page 1 is a meta page");
    /* nothing of the named databases is reachable: their pages leak */
    EXPECT(&ps, NULL, UINT64_MAX, "neither in use nor in the free list");
}

OST_TEST(pagecheck, truncated_file) {
    make_store();
    copy_store();
    char p[256];
    data_path(p, sizeof p, F.copy);
    size_t half = F.len / 2 / psize() * psize();
    cr_assert_eq(truncate(p, (off_t)half), 0);
    F.len = half;
    char msg[512];
    cr_assert_eq(meta_check_copy(msg, sizeof msg), OST_ECORRUPT);
    cr_assert(strstr(msg, "lies beyond the end of the file"), "%s", msg);
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, NULL, UINT64_MAX, "beyond the end of the file");
    /* and a size that is not a whole number of pages */
    cr_assert_eq(truncate(p, (off_t)half - 100), 0);
    expect_damage(&ps);
    EXPECT(&ps, NULL, UINT64_MAX, "not a whole number");
}

/* ======================================================================= */
/* 4. trees                                                                 */
/* ======================================================================= */

OST_TEST(pagecheck, branch_child_out_of_range) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    cr_assert_geq(r.depth, 2);
    uint64_t root = r.root;
    set_child(root, 1, 0x123456789aULL);
    probs ps;
    expect_damage(&ps);
    int at = EXPECT(&ps, "records", root, "node 1: page 78187493530 is beyond the last page");
    /* the keys it hides start at node 1's separator and end at node 2's */
    prob *q = &ps.p[at];
    cr_assert(q->has_keys && q->lo_set && q->hi_set);
    uint64_t n1 = node_at(root, 1), n2 = node_at(root, 2);
    cr_assert_eq(q->lolen, ksize(n1));
    cr_assert_eq(memcmp(q->lo, F.img + n1 + 8, q->lolen), 0);
    cr_assert_eq(q->hilen, ksize(n2));
    cr_assert_eq(memcmp(q->hi, F.img + n2 + 8, q->hilen), 0);
    /* the subtree it lost is leaked */
    EXPECT(&ps, NULL, UINT64_MAX, "leaked");
    /* a child that is a meta page */
    copy_store();
    set_child(root, 2, 1);
    expect_damage(&ps);
    EXPECT(&ps, "records", root, "node 2: page 1 is a meta page");
}

/* The first leaf of records, and its parent, going down the leftmost
 * children; *parent gets the branch above it. */
static uint64_t first_leaf(const rec *r, uint64_t *parent) {
    uint64_t p = r->root;
    for (unsigned l = 1; l < r->depth; l++) {
        if (parent) *parent = p;
        p = child(p, 1); /* the second child: a leaf with neighbours on both sides */
    }
    return p;
}

OST_TEST(pagecheck, node_offset_past_the_page_end) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    uint64_t leaf = first_leaf(&r, NULL);
    cr_assert_gt(nkeys(leaf), 6);
    poke16(pg(leaf) + 16 + 2 * 3, (uint16_t)(psize() - 4));
    probs ps;
    expect_damage(&ps);
    int at = EXPECT(&ps, "records", leaf, "node 3: offset 4092 is outside the node area");
    cr_assert(ps.p[at].has_keys);
    /* between the sound neighbours: node 2's key and node 4's */
    cr_assert(ps.p[at].lo_set && ps.p[at].hi_set);
    cr_assert_eq(memcmp(ps.p[at].lo, F.img + node_at(leaf, 2) + 8, 8), 0);
    cr_assert_eq(memcmp(ps.p[at].hi, F.img + node_at(leaf, 4) + 8, 8), 0);
    /* its node, now unreferenced, is a lost pointer */
    EXPECT(&ps, "records", leaf, "belong to no node");
    /* an offset inside the page whose node runs past its end */
    copy_store();
    uint64_t n0 = node_at(leaf, 0);
    poke16(n0, 0xfff0); /* node 0's data size */
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "node 0: at offset");
    EXPECT(&ps, "records", leaf, "runs past the page end");
}

OST_TEST(pagecheck, key_out_of_order) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    uint64_t leaf = first_leaf(&r, NULL);
    cr_assert_gt(nkeys(leaf), 8);
    /* node 5's key becomes node 2's: inside the page's range, out of order */
    poke(node_at(leaf, 5) + 8, F.img + node_at(leaf, 2) + 8, 8);
    probs ps;
    expect_damage(&ps);
    int at = EXPECT(&ps, "records", leaf, "node 5: key out of order");
    cr_assert_eq(memcmp(ps.p[at].lo, F.img + node_at(leaf, 4) + 8, 8), 0);
    cr_assert_eq(memcmp(ps.p[at].hi, F.img + node_at(leaf, 6) + 8, 8), 0);
    cr_assert_eq(find(&ps, "records", leaf, "node 2:"), -1, "node 2 is not blamed");
    /* a key beyond the separator above: outside the range */
    copy_store();
    uint8_t k[8];
    be64(k, 0xffffffffffffULL);
    poke(node_at(leaf, 1) + 8, k, 8);
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "node 1: key outside the range");
    /* each leaves both out, and says which oids it lost */
    oids *o = calloc(1, sizeof *o);
    o->ascending = true;
    ost__pc *pc = open_dir(F.copy);
    cr_assert_eq(ost__pc_each(pc, "records", collect_oid, collect_oid_p, o), OST_ECORRUPT);
    cr_assert(o->ascending);
    cr_assert_eq(o->n, NITEMS + 3 - 1);
    EXPECT(&o->ps, "records", leaf, "node 1");
    ost__pc_close(pc);
    free(o);
}

typedef struct {
    uint64_t pgno;
    uint8_t key[8];
} hit;

static int find_big(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                    uint64_t p) {
    (void)v;
    hit *h = ud;
    if (!IS_BIG(vl) || kl != 8) return 0;
    h->pgno = p;
    memcpy(h->key, k, 8);
    return 1;
}

/* The leaf of records holding the big node, and that node's index. */
static uint64_t big_leaf(int *idx) {
    ost__pc *pc = open_dir(F.dir);
    hit h = {0};
    cr_assert_eq(ost__pc_each(pc, "records", find_big, NULL, &h), 1);
    ost__pc_close(pc);
    for (int i = 0; i < nkeys(h.pgno); i++)
        if (!memcmp(F.img + node_at(h.pgno, i) + 8, h.key, 8)) {
            *idx = i;
            cr_assert_eq(G16(node_at(h.pgno, i) + 4), 1, "F_BIGDATA");
            return h.pgno;
        }
    cr_assert_fail("no big node");
    return 0;
}

OST_TEST(pagecheck, overflow_run_past_the_file_end) {
    make_store();
    copy_store();
    int i;
    uint64_t leaf = big_leaf(&i);
    uint64_t node = node_at(leaf, i);
    uint64_t ov = G64(node + 8 + 8);
    cr_assert_eq(G16(pg(ov) + 10), 4, "P_OVERFLOW");
    cr_assert_geq(G32(pg(ov) + 12), 3, "a run of three pages or more");
    poke32(pg(ov) + 12, 0x00ffffff);
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "runs beyond the last page");
    /* the run's pages, unreachable now, leak */
    EXPECT(&ps, NULL, ov, "leaked");
}

OST_TEST(pagecheck, overflow_run_shorter_than_its_value) {
    make_store();
    copy_store();
    int i;
    uint64_t leaf = big_leaf(&i);
    uint64_t node = node_at(leaf, i);
    uint64_t ov = G64(node + 16);
    uint32_t n = G32(pg(ov) + 12);
    poke32(pg(ov) + 12, n - 1);
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "does not fit its overflow run");
    /* or the value's size grown past its run */
    copy_store();
    poke16(node, (uint16_t)(n * 4096));
    poke16(node + 2, (uint16_t)((n * 4096) >> 16));
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "does not fit its overflow run");
    /* or the run moved onto a page of the tree */
    copy_store();
    poke64(node + 16, leaf);
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "page flags 0x2");
}

OST_TEST(pagecheck, a_page_pointing_back_to_its_parent) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    cr_assert_geq(r.depth, 3);
    uint64_t mid = child(r.root, 0);
    set_child(mid, 1, r.root);
    probs ps;
    int rc = walk_copy(&ps, NULL);
    cr_assert_eq(rc, OST_ECORRUPT);
    EXPECT(&ps, "records", mid, "which another place already uses (a cycle");
    /* each and scan end too */
    ost__pc *pc = open_dir(F.copy);
    uint64_t n = 0;
    cr_assert_eq(ost__pc_each(pc, "records", count_entry, NULL, &n), OST_ECORRUPT);
    cr_assert_lt(n, NITEMS + 3);
    ost__pc_close(pc);
    /* a page that is its own child */
    copy_store();
    set_child(r.root, 0, r.root);
    expect_damage(&ps);
    EXPECT(&ps, "records", r.root, "a cycle");
}

OST_TEST(pagecheck, wrong_page_number_and_type) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    uint64_t leaf = first_leaf(&r, NULL);
    poke64(pg(leaf), leaf + 1);
    probs ps;
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "the page header says page");
    copy_store();
    poke16(pg(leaf) + 10, 1); /* a leaf flagged as a branch */
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "page flags 0x1, but level");
    copy_store();
    poke16(pg(leaf) + 12, 8); /* mp_lower below the header */
    expect_damage(&ps);
    EXPECT(&ps, "records", leaf, "mp_lower 8");
}

OST_TEST(pagecheck, free_list_entry_altered) {
    make_store();
    copy_store();
    rec fr = rec_at(pg((uint64_t)cur_meta()) + 40);
    cr_assert_eq(fr.depth, 1);
    cr_assert_geq(fr.entries, 1);
    uint64_t leaf = fr.root, node = node_at(leaf, 0);
    cr_assert_eq(G16(node + 4), 0, "an inline record");
    uint64_t ids = node + 8 + ksize(node);
    cr_assert_geq(G64(ids), 1);
    uint64_t was = G64(ids + 8);
    rec r = named_db("records", NULL);
    /* the record says the records root is free, not page `was` */
    poke64(ids + 8, r.root);
    probs ps;
    expect_damage(&ps);
    char want[96];
    snprintf(want, sizeof want, "page %llu (records, root) is in use and also in the free list",
             (unsigned long long)r.root);
    EXPECT(&ps, "records", r.root, want);
    EXPECT(&ps, NULL, was, "leaked");
    /* a page beyond the last one */
    copy_store();
    poke64(ids + 8, 1u << 30);
    expect_damage(&ps);
    EXPECT(&ps, "free list", leaf, "beyond the last page");
    /* a count that does not fit */
    copy_store();
    poke64(ids, 1u << 20);
    expect_damage(&ps);
    EXPECT(&ps, "free list", leaf, "does not fit");
}

OST_TEST(pagecheck, damaged_named_database_record) {
    make_store();
    copy_store();
    uint64_t holder;
    named_db("mapents", &holder);
    /* find the record's bytes again to change its root */
    for (int i = 0; i < nkeys(holder); i++) {
        uint64_t n = node_at(holder, i);
        if (ksize(n) == 7 && !memcmp(F.img + n + 8, "mapents", 7)) poke64(n + 8 + 7 + 40, 999999);
    }
    probs ps;
    expect_damage(&ps);
    int at = EXPECT(&ps, "mapents", holder, "root page 999999 beyond the last page");
    cr_assert(ps.p[at].has_keys && !ps.p[at].lo_set && !ps.p[at].hi_set, "all of mapents");
    /* a count that differs from the walk */
    copy_store();
    for (int i = 0; i < nkeys(holder); i++) {
        uint64_t n = node_at(holder, i);
        if (ksize(n) == 7 && !memcmp(F.img + n + 8, "mapents", 7))
            poke64(n + 8 + 7 + 32, NMAP + 1);
    }
    expect_damage(&ps);
    EXPECT(&ps, "mapents", holder, "the record says 301 entries");
}

static void count_all(void *ud, const ost__pc_problem *p) {
    int *n = ud;
    n[0]++;
    if (strstr(p->msg, "more damaged nodes")) n[1]++;
    if (strstr(p->msg, "more problems")) n[2]++;
}

OST_TEST(pagecheck, problems_are_bounded_per_page_and_in_all) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    uint64_t leaf = first_leaf(&r, NULL);
    int n = nkeys(leaf);
    cr_assert_gt(n, 10);
    /* every pointer of one leaf to offset 2: n problems, 8 reported, one summary */
    for (int i = 0; i < n; i++) poke16(pg(leaf) + 16 + 2 * (uint64_t)i, 2);
    probs ps;
    expect_damage(&ps);
    int on_page = 0;
    for (int i = 0; i < ps.n && i < 64; i++) on_page += ps.p[i].pgno == leaf;
    char want[64];
    snprintf(want, sizeof want, "%d more damaged nodes", n - 8);
    EXPECT(&ps, "records", leaf, want);
    cr_assert_eq(on_page, 8 + 1 + 1, "8 nodes, the summary, the bytes no node covers:%s",
                 dump(&ps));
    /* every leaf of records so: at most 1000 reports, then one count */
    copy_store();
    uint64_t mid = child(r.root, 0);
    for (int c = 0; c < nkeys(r.root); c++) {
        mid = child(r.root, c);
        for (int j = 0; j < nkeys(mid); j++) {
            uint64_t l = child(mid, j);
            for (int k = 0; k < 4; k++) poke16(pg(l) + 16 + 2 * k, 3); /* odd offsets */
        }
    }
    int cnt[3] = {0};
    ost__pc *pc = open_dir(F.copy);
    cr_assert_eq(ost__pc_walk(pc, count_all, cnt, NULL), OST_ECORRUPT);
    ost__pc_close(pc);
    cr_assert_eq(cnt[0], 1001, "1000 problems and the count of the rest: %d", cnt[0]);
    cr_assert_eq(cnt[2], 1);
}

/* ======================================================================= */
/* 5. each, scan and the previous snapshot on damaged files                   */
/* ======================================================================= */

OST_TEST(pagecheck, each_skips_a_damaged_leaf_and_names_its_oids) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    uint64_t parent = 0, leaf = first_leaf(&r, &parent);
    uint64_t lo_oid = 0, hi_oid = 0;
    for (int i = 0; i < 8; i++) {
        lo_oid = lo_oid << 8 | F.img[node_at(parent, 1) + 8 + i];
        hi_oid = hi_oid << 8 | F.img[node_at(parent, 2) + 8 + i];
    }
    poke64(pg(leaf), 12345); /* the leaf's header names another page */
    oids *o = calloc(1, sizeof *o);
    o->ascending = true;
    ost__pc *pc = open_dir(F.copy);
    cr_assert_eq(ost__pc_each(pc, "records", collect_oid, collect_oid_p, o), OST_ECORRUPT);
    ost__pc_close(pc);
    int at = EXPECT(&o->ps, "records", leaf, "the page header says page 12345");
    /* the problem's keys are the oids lost, and exactly those are missing */
    prob *q = &o->ps.p[at];
    cr_assert(q->has_keys && q->lolen == 8 && q->hilen == 8);
    uint64_t a = 0, b = 0;
    for (int i = 0; i < 8; i++) a = a << 8 | q->lo[i], b = b << 8 | q->hi[i];
    cr_assert_eq(a, lo_oid);
    cr_assert_eq(b, hi_oid);
    cr_assert(o->ascending);
    for (uint64_t oid = 0; oid < NITEMS + 3; oid++)
        REQUIRE(o->seen[oid] == !(oid >= a && oid < b), "oid %llu %s", (unsigned long long)oid,
                o->seen[oid] ? "delivered though lost" : "missing");
    cr_assert_eq(o->big, 1, "the big record (lost: %llu..%llu)", (unsigned long long)a,
                 (unsigned long long)b);
    free(o);
}

OST_TEST(pagecheck, scan_finds_the_records_under_a_damaged_root) {
    make_store();
    copy_store();
    rec r = named_db("records", NULL);
    poke16(pg(r.root) + 10, 0x44);
    oids *o = calloc(1, sizeof *o);
    ost__pc *pc = open_dir(F.copy);
    uint64_t n = 0;
    cr_assert_eq(ost__pc_each(pc, "records", count_entry, NULL, &n), OST_ECORRUPT);
    cr_assert_eq(n, 0);
    /* scan delivers every leaf entry of the file, records among them */
    cr_assert_eq(ost__pc_scan(pc, collect_oid_any, o), 0);
    ost__pc_close(pc);
    for (uint64_t oid = 0; oid < NITEMS + 3; oid++)
        REQUIRE(o->seen[oid], "oid %llu not found by scan", (unsigned long long)oid);
    cr_assert_geq(o->big, 1, "the overflow value too");
    free(o);
}

OST_TEST(pagecheck, the_previous_snapshot_walks_clean) {
    make_store();
    copy_store();
    int cur = cur_meta();
    /* damage the current snapshot's main root */
    uint64_t mroot = rec_at(pg((uint64_t)cur) + 88).root;
    poke16(pg(mroot) + 14, 3);
    ost__pc *pc = open_dir(F.copy);
    probs ps = {0};
    cr_assert_eq(ost__pc_walk(pc, collect_p, &ps, NULL), OST_ECORRUPT);
    cr_assert_eq(ost__pc_use_meta(pc, 1 - cur), 0);
    memset(&ps, 0, sizeof ps);
    ost__pc_stats st;
    int rc = ost__pc_walk(pc, collect_p, &ps, &st);
    cr_assert_eq(rc, 0, "%s", dump(&ps));
    cr_assert_eq(st.txnid, G64(pg((uint64_t)cur) + 144) - 1);
    cr_assert_eq(ost__pc_use_meta(pc, 2), OST_EINVAL);
    ost__pc_close(pc);
}

/* ======================================================================= */
/* 6. files liblmdb wrote with every kind of database                        */
/* ======================================================================= */

static uint64_t rng_state;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    rng_state = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static const struct {
    const char *name;
    unsigned flags;
} kinds[] = {
    {"dups", MDB_DUPSORT},
    {"fixed", MDB_DUPSORT | MDB_DUPFIXED | MDB_INTEGERDUP},
    {"revdups", MDB_DUPSORT | MDB_REVERSEDUP},
    {"ints", MDB_INTEGERKEY},
    {"rev", MDB_REVERSEKEY},
    {"big", 0},
};
#define NKINDS (sizeof kinds / sizeof *kinds)

/* An environment at dir written by liblmdb: rounds transactions of random
 * puts and deletes in a database of each kind above (sorted duplicates in
 * sub-pages and in sub-databases, fixed-size and integer duplicates,
 * integer and reversed keys, values over many pages). */
static void make_lmdb_env(const char *dir, int rounds, uint64_t seed) {
    mkdir(dir, 0755);
    MDB_env *env;
    cr_assert_eq(mdb_env_create(&env), 0);
    mdb_env_set_maxdbs(env, 8);
    mdb_env_set_mapsize(env, (size_t)1 << 28);
    cr_assert_eq(mdb_env_open(env, dir, 0, 0644), 0);
    rng_state = seed;
    static uint8_t buf[40000];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 13 + 1);
    for (int round = 0; round < rounds; round++) {
        MDB_txn *t;
        cr_assert_eq(mdb_txn_begin(env, NULL, 0, &t), 0);
        MDB_dbi dbi[NKINDS];
        for (size_t i = 0; i < NKINDS; i++)
            cr_assert_eq(mdb_dbi_open(t, kinds[i].name, MDB_CREATE | kinds[i].flags, &dbi[i]), 0);
        for (int op = 0; op < 1500; op++) {
            size_t which = rnd() % NKINDS;
            bool del = rnd() % 10 < 3;
            char kb[32], vb[32];
            uint64_t ik = rnd() % 5000, iv = rnd() % 100000;
            MDB_val k = {0, kb}, v = {0, vb};
            if (kinds[which].flags & MDB_INTEGERKEY) {
                k.mv_size = 8;
                memcpy(kb, &ik, 8);
            } else {
                /* a few keys get many duplicates (sub-databases) */
                if (which < 3 && rnd() % 2) ik %= 8; /* many duplicates: sub-databases */
                k.mv_size = (size_t)snprintf(kb, sizeof kb, "key%llu", (unsigned long long)ik);
            }
            if (kinds[which].flags & MDB_DUPFIXED) {
                v.mv_size = 8;
                memcpy(vb, &iv, 8);
            } else if (!strcmp(kinds[which].name, "big")) {
                v.mv_size = 100 + rnd() % 30000;
                v.mv_data = buf;
            } else {
                v.mv_size = (size_t)snprintf(vb, sizeof vb, "v%llu", (unsigned long long)iv);
            }
            int rc = del ? mdb_del(t, dbi[which], &k, (kinds[which].flags & MDB_DUPSORT) ? &v : NULL)
                         : mdb_put(t, dbi[which], &k, &v, 0);
            REQUIRE(rc == 0 || rc == MDB_NOTFOUND || rc == MDB_KEYEXIST, "%s", mdb_strerror(rc));
        }
        cr_assert_eq(mdb_txn_commit(t), 0);
    }
    mdb_env_close(env);
}

OST_TEST(pagecheck, every_kind_of_database_walks_clean) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/env", F.tmp);
    make_lmdb_env(dir, 30, 7);
    ost__pc_stats st = walk_matches_lmdb(dir);
    cr_assert_gt(st.free, 0);
    cr_assert_gt(st.overflow, 0);
    for (size_t i = 0; i < NKINDS; i++) cr_assert_gt(each_matches_lmdb(dir, kinds[i].name), 0);
    /* duplicates made sub-databases: pages no database record counts */
    ost__pc *pc = open_dir(dir);
    ost__pc_walk(pc, NULL, NULL, NULL);
    ost__pc_dbstat d;
    uint64_t top = 0;
    for (size_t i = 0; ost__pc_db(pc, i, &d) == 0; i++) top += d.branch + d.leaf + d.overflow;
    cr_assert_gt(st.branch + st.leaf + st.overflow, top, "sub-databases were walked");
    ost__pc_close(pc);
}

/* ======================================================================= */
/* 7. random damage                                                         */
/* ======================================================================= */

enum { NOT_LIVE = 9 };
static const char *kind_names[] = {"meta", "structure", "key", "data"};

static void mark_live(void *ud, uint64_t off, uint64_t len, int kind) {
    uint8_t *map = ud;
    for (uint64_t i = 0; i < len; i++)
        if (map[off + i] == NOT_LIVE || kind < map[off + i]) map[off + i] = (uint8_t)kind;
}

static void count_p(void *ud, const ost__pc_problem *p) {
    (void)p;
    ++*(int *)ud;
}

/* One damaged image: the meta check, the walk, each over two databases and
 * a scan; whether anything was reported. Nothing may crash, loop or leak. */
static bool try_image(const uint8_t *img, size_t n, uint64_t off) {
    ost__pc *pc;
    char msg[256];
    int rc = ost__pc_open_mem(img, n, &pc, msg, sizeof msg);
    if (rc) {
        REQUIRE(rc == OST_ECORRUPT, "open at %llu: %s", (unsigned long long)off, ost_err_name(rc));
        return true;
    }
    bool found = ost__pc_meta_check(pc, msg, sizeof msg) != 0;
    int np = 0;
    ost__pc_stats st;
    rc = ost__pc_walk(pc, count_p, &np, &st);
    REQUIRE(rc == 0 || rc == OST_ECORRUPT, "walk: %s", ost_err_name(rc));
    REQUIRE((rc == 0) == (np == 0), "walk said %s with %d problems", ost_err_name(rc), np);
    found |= rc != 0;
    uint64_t e = 0;
    rc = ost__pc_each(pc, "records", count_entry, NULL, &e);
    REQUIRE(rc == 0 || rc == OST_ECORRUPT || rc == OST_ENOTFOUND, "each: %s", ost_err_name(rc));
    ost__pc_each(pc, NULL, count_entry, NULL, &e);
    ost__pc_scan(pc, count_entry, &e);
    ost__pc_close(pc);
    return found;
}

OST_TEST(pagecheck, random_byte_changes) {
    make_store();
    char path[256];
    data_path(path, sizeof path, F.dir);
    size_t n;
    uint8_t *img = read_file(path, &n);
    uint8_t *map = malloc(n);
    memset(map, NOT_LIVE, n);
    ost__pc *pc;
    cr_assert_eq(ost__pc_open_mem(img, n, &pc, NULL, 0), 0);
    cr_assert_eq(ost__pc_live(pc, mark_live, map), 0);
    ost__pc_close(pc);
    uint64_t live[5] = {0};
    for (size_t i = 0; i < n; i++) live[map[i] == NOT_LIVE ? 4 : map[i]]++;

    /* the live bytes of each kind, to pick from */
    uint32_t *at[4];
    size_t nat[4] = {0};
    for (int k = 0; k < 4; k++) at[k] = malloc((live[k] + 1) * sizeof *at[k]);
    for (size_t i = 0; i < n; i++)
        if (map[i] != NOT_LIVE) at[map[i]][nat[map[i]]++] = (uint32_t)i;

    const char *s = getenv("OST_PAGECHECK_SEED");
    rng_state = s ? strtoull(s, NULL, 0) : 0x5eed;
    if (!rng_state) rng_state = 1;
    /* 200 changes anywhere, then 300 in each kind of live bytes but the
     * data (100); each byte becomes another value, is tried, and restored
     * (a fresh copy each time) */
    uint64_t tried[5] = {0}, reported[5] = {0};
    static const int plan[4] = {300, 300, 300, 100};
    int total = 200 + plan[0] + plan[1] + plan[2] + plan[3];
    for (int it = 0; it < total; it++) {
        size_t off;
        if (it < 200) {
            off = (size_t)(rnd() % n);
        } else {
            int k = 0, j = it - 200;
            while (j >= plan[k]) j -= plan[k++];
            off = at[k][rnd() % nat[k]];
        }
        uint8_t old = img[off];
        img[off] = (uint8_t)(old ^ (1 + rnd() % 255));
        bool found = try_image(img, n, off);
        img[off] = old;
        int k = map[off] == NOT_LIVE ? 4 : map[off];
        tried[k]++;
        reported[k] += found;
        REQUIRE(k != 4 || !found, "a change at unused byte %zu was reported", off);
    }
    for (int k = 0; k < 4; k++) free(at[k]);
    fprintf(stderr, "pagecheck random_byte_changes (seed 0x%llx, %zu-byte file):\n",
            s ? strtoull(s, NULL, 0) : 0x5eedULL, n);
    for (int k = 0; k < 5; k++)
        fprintf(stderr, "  %-9s %8llu bytes, %4llu changed, %4llu reported (%.1f%%)\n",
                k < 4 ? kind_names[k] : "unused", (unsigned long long)live[k],
                (unsigned long long)tried[k], (unsigned long long)reported[k],
                tried[k] ? 100.0 * (double)reported[k] / (double)tried[k] : 0.0);
    /* What the walker can check. Seeds 1 to 6 gave: structure 100% (the
     * rare miss: the lowest bit of a node's size, hidden by the rounding
     * to even); keys 99 to 100% (a key changed to another still in order
     * is fine as far as the file can tell); meta fields 79 to 85% (a
     * transaction id or map size changed to another plausible one, 32 of
     * the 276 bytes, is not damage anyone can see). Data: 0%. */
    cr_assert_geq(reported[1] * 100, tried[1] * 98, "structure changes reported: %llu of %llu",
                  (unsigned long long)reported[1], (unsigned long long)tried[1]);
    cr_assert_geq(reported[2] * 100, tried[2] * 95, "key changes reported: %llu of %llu",
                  (unsigned long long)reported[2], (unsigned long long)tried[2]);
    cr_assert_geq(reported[0] * 100, tried[0] * 70, "meta changes reported: %llu of %llu",
                  (unsigned long long)reported[0], (unsigned long long)tried[0]);
    free(map);
    free(img);
}
