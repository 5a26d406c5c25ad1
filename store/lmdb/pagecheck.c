/* The page walker: LMDB's data file read without liblmdb, every read
 * bounds-checked, for ostore check (damage reported as damage, not as a
 * crash inside liblmdb) and salvage (store/pagecheck.h has the interface).
 *
 * ---- The file format (liblmdb 0.9.x, MDB_DATA_VERSION 1) -------------------
 *
 * The layout is the one liblmdb 0.9.24 compiles to on 64-bit Linux
 * (x86-64, arm64): little-endian, pgno_t, size_t and txnid_t 64 bits.
 *
 * - The file is an array of pages of psize bytes, page N at byte N *
 *   psize. psize is a power of two from 512 to 32768 (MAX_PAGESIZE of a
 *   0.9 build: node offsets and mp_upper are 16 bits).
 * - Page header, PAGEHDRSZ = 16 bytes: the page's own number (u64, at 0);
 *   mp_pad (u16, at 8: the key size of a LEAF2 page, else unused and not
 *   cleared); mp_flags (u16, at 10: P_BRANCH 0x01, P_LEAF 0x02,
 *   P_OVERFLOW 0x04, P_META 0x08, P_LEAF2 0x20, P_SUBP 0x40; P_DIRTY 0x10
 *   is cleared before a page is written, but stays on sub-pages); then
 *   mp_lower and mp_upper (u16 each, at 12 and 14: the free space between
 *   the pointer array and the nodes), or on an overflow page mp_pages
 *   (u32, at 12: the length of the run).
 * - Meta pages 0 and 1 (page 1 at byte psize): after the header an MDB_meta:
 *   mm_magic 0xBEEFC0DE (u32, 16), mm_version 1 (u32, 20), mm_address
 *   (24, used only with MDB_FIXEDMAP), mm_mapsize (32), mm_dbs[2] (48
 *   bytes each: the free list FREE_DBI at 40, the main database MAIN_DBI at
 *   88), mm_last_pg (136: the last page in use), mm_txnid (144).
 *   Transaction N writes meta page N % 2. liblmdb refuses the file unless
 *   both meta pages have P_META, the magic and the version, and uses the
 *   one with the higher txnid (meta page 0 on a tie). The page size is the
 *   free list's md_pad, the environment flags its md_flags (MDB_INTEGERKEY
 *   0x08, and at most MDB_FIXEDMAP 0x01 and MDB_NOSUBDIR 0x4000).
 * - MDB_db, 48 bytes: md_pad (u32 at 0: the key size of a DUPFIXED
 *   sub-database, else 0), md_flags (u16 at 4: MDB_REVERSEKEY 0x02,
 *   MDB_DUPSORT 0x04, MDB_INTEGERKEY 0x08, MDB_DUPFIXED 0x10,
 *   MDB_INTEGERDUP 0x20, MDB_REVERSEDUP 0x40), md_depth (u16 at 6: levels,
 *   leaves included; at most 32, liblmdb's cursor stack), then u64s:
 *   branch pages (8), leaf pages (16), overflow pages (24), entries (32),
 *   root (40; P_INVALID ~0 when the tree is empty). A tree's counts leave
 *   out its sub-databases' pages, which their own records count.
 * - Branch and leaf pages: after the header mp_ptrs, u16 offsets (from the
 *   page start) of the nodes in key order, NUMKEYS = (mp_lower - 16) / 2.
 *   Nodes are 2-aligned and packed from mp_upper to the page end, each
 *   taking EVEN(its size): liblmdb moves nodes to close any gap. A node is
 *   mn_lo, mn_hi, mn_flags, mn_ksize (u16 each), the key, then on a leaf
 *   the data. On a branch page lo | hi << 16 | flags << 32 is the child's
 *   page number; node 0's key is ignored (liblmdb leaves it empty); child i
 *   holds the keys k with key[i] <= k < key[i + 1]. On a leaf page
 *   lo | hi << 16 is the data size and the flags say: F_BIGDATA 0x01, the
 *   data is the u64 number of the first page of an overflow run (one
 *   header, then the value: OVPAGES = (15 + size) / psize + 1 pages, or
 *   more when a value shrank in place); F_SUBDATA 0x02, the data is an
 *   MDB_db (a named database in the main database; with F_DUPDATA a
 *   sub-database of duplicates); F_DUPDATA 0x04, the key has duplicates
 *   (MDB_DUPSORT): without F_SUBDATA the data is a sub-page, a small leaf
 *   page (P_LEAF | P_SUBP, offsets from its own start) whose keys are the
 *   duplicates and whose data are empty.
 * - LEAF2 pages (MDB_DUPFIXED duplicates, in sub-databases and sub-pages)
 *   have no pointers or nodes: NUMKEYS keys of mp_pad bytes after the
 *   header; mp_upper - mp_lower is the space after them.
 * - Keys are 1 to 511 bytes (MDB_MAXKEYSIZE), duplicates 0 to 511. A leaf
 *   node is inline only up to me_nodemax = ((psize - 16) / 2 & ~1) - 2
 *   bytes; bigger data goes to an overflow run.
 * - Key order: bytewise, a prefix first (memcmp, then the length);
 *   MDB_REVERSEKEY compares from the last byte; MDB_INTEGERKEY as native
 *   unsigned integers of 4 or 8 bytes. Duplicates likewise with
 *   MDB_INTEGERDUP and MDB_REVERSEDUP.
 * - The free list (FREE_DBI): key a u64 transaction id, value an MDB_IDL:
 *   a u64 count, then that many u64 page numbers in descending order of
 *   the pages that transaction freed (a record may be longer than its
 *   count: records are reserved first and filled later).
 * - Every page from 2 to mm_last_pg is in exactly one place: a tree of the
 *   snapshot, or a free-list record.
 *
 * ---- What is checked --------------------------------------------------------
 *
 * Meta pages (ost__pc_meta_check): page flags and number, magic, version,
 * page size (and equal in both; meta page 1 is looked for at each page
 * size when meta page 0's is damaged), last page within the file, map
 * size holding the used pages and mappable (48 bits), transaction id of
 * the page's parity, the two database records (flags, pad, depth, root
 * within the used pages, counts that fit).
 *
 * Trees (ost__pc_walk, ost__pc_each): every page number within [2,
 * mm_last_pg] and the file; the page's own number; page type by position
 * (branch above the leaf level, leaf at md_depth, LEAF2 in DUPFIXED
 * sub-databases); mp_lower and mp_upper; each node pointer even and inside
 * [mp_upper, end); each node inside its page; nodes tiling [mp_upper,
 * end) without gap or overlap; key sizes; node flags by database kind;
 * inline sizes; keys ascending within a page and within the range the
 * separators above give (a node breaking the order is found as the
 * complement of the longest ascending run of keys); overflow runs (page
 * numbers, header, length, value fitting); named database and
 * sub-database records; sub-pages (all the same checks inside the node);
 * no page reached twice (cycles, shared pages); recorded counts equal
 * the walked ones (compared only for a tree walked without damage).
 *
 * Page accounting (ost__pc_walk): the free list's records (key size,
 * transaction id not newer than the snapshot, count fitting, page numbers
 * in range and descending, none listed twice); every page from 2 to the
 * last one in exactly one of: a tree, the free list.
 *
 * Not checkable: values' bytes (LMDB has no checksums), a key changed to
 * another in order, a transaction id or map size changed to another
 * plausible value, the lowest bit of a node's size (hidden by the rounding
 * to even). tests/test_pagecheck.c measures how often a changed byte of
 * each kind is reported. */
#include "pagecheck.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../base/endian.h"
#include "../../serializer/internal.h"

/* ---- format constants --------------------------------------------------- */

#define PAGEHDRSZ 16u
#define NODESIZE 8u
#define P_BRANCH 0x01u
#define P_LEAF 0x02u
#define P_OVERFLOW 0x04u
#define P_META 0x08u
#define P_DIRTY 0x10u
#define P_LEAF2 0x20u
#define P_SUBP 0x40u
#define F_BIGDATA 0x01u
#define F_SUBDATA 0x02u
#define F_DUPDATA 0x04u
#define DB_REVERSEKEY 0x02u
#define DB_DUPSORT 0x04u
#define DB_INTEGERKEY 0x08u
#define DB_DUPFIXED 0x10u
#define DB_INTEGERDUP 0x20u
#define DB_REVERSEDUP 0x40u
#define DB_PERSISTENT 0x7eu
#define ENV_FIXEDMAP 0x01u
#define ENV_NOSUBDIR 0x4000u
#define MAGIC 0xBEEFC0DEu
#define MAX_MAPSIZE ((uint64_t)1 << 48)
#define DATA_VERSION 1u
#define P_INVALID UINT64_MAX
#define MAXKEY 511u
#define MAXDEPTH 32u
#define MIN_PSIZE 512u
#define MAX_PSIZE 32768u
#define DBREC_SIZE 48u
#define META_END 152u /* header + MDB_meta */
#define OFF_MAGIC 16u
#define OFF_VERSION 20u
#define OFF_ADDRESS 24u
#define OFF_MAPSIZE 32u
#define OFF_DBS 40u
#define OFF_LAST_PG 136u
#define OFF_TXNID 144u

#define MAX_REPORTS 1000u
#define MAX_PER_PAGE 8
#define MAX_LEVELS 72 /* tree levels, sub-database levels, a sub-page */

/* ---- bytes -------------------------------------------------------------- */

static inline uint32_t even(uint32_t n) { return (n + 1) & ~1u; }

typedef unsigned long long ull;

/* ---- structures --------------------------------------------------------- */

typedef struct {
    uint32_t pad;
    uint16_t flags, depth;
    uint64_t branch, leaf, overflow, entries, root;
} dbrec;

typedef struct {
    uint64_t off;           /* where the page is */
    bool found;             /* its 152 bytes lie in the file */
    bool usable;            /* P_META, magic, version and page size sane: walkable */
    bool sane;              /* every check passes */
    char err[160];          /* the first problem; "" when sane */
    int err_db;             /* 1, 2: err is of the free list's, the main database's record */
    uint64_t pgno;
    uint16_t pflags;
    uint32_t magic, version, psize;
    uint64_t mapsize, last_pg, txnid;
    dbrec db[2];
} meta;

/* A key bound: p NULL is open. */
typedef struct {
    const uint8_t *p;
    size_t n;
} kb;

/* One node (or LEAF2 key) of a page being checked. */
typedef struct {
    const uint8_t *key, *data;
    uint64_t child;  /* branch: the child page */
    uint32_t ks, ds; /* key size; leaf data size */
    uint32_t ext;    /* bytes the node takes, EVEN */
    uint16_t off, flags;
    uint8_t bad;     /* a reason (R_*), reported once; 0: sound */
    uint8_t order;   /* O_*: key order */
    uint32_t v1, v2; /* numbers for the reason's message */
} node;

enum { O_OK, O_OUT, O_BOUNDS };

/* Reasons a node is not used. */
enum {
    R_NONE,
    R_OFF_ODD,
    R_OFF_RANGE,
    R_RUNS_PAST,
    R_KSIZE,
    R_FLAGS,
    R_DSIZE,
    R_TOO_BIG,
    R_SAME,
    R_INSIDE,
    R_TILE,
    R_HIDDEN, /* reported by a later step, with its own message */
};

typedef struct {
    node *nodes; /* room for the most nodes a page can hold */
} level;

typedef struct tree tree;

/* One named database found in the main database. */
typedef struct {
    const uint8_t *name;
    size_t len;
    dbrec rec;
    uint64_t holder; /* the main database's leaf page holding the record */
    bool ok;         /* the record passed its checks */
} named;

typedef struct {
    char *name;
    ost__pc_dbstat st;
} dbslot;

struct ost__pc {
    const uint8_t *base;
    uint64_t size;
    void *map; /* our mapping, or NULL for a borrowed buffer */
    size_t maplen;
    char file[32]; /* for messages */
    meta m[2];
    int cur;        /* the meta page walks start from; -1 none usable */
    int chosen;     /* ost__pc_use_meta's choice, -1 liblmdb's */
    unsigned psize; /* of cur, else of any usable meta, else guessed (scan) */
    unsigned scratch_ps; /* the page size the scratch below is sized for */
    uint64_t fpages; /* whole pages in the file */
    /* scratch */
    level lv[MAX_LEVELS];
    uint32_t maxnodes;
    uint32_t *stamp; /* per 2-byte slot of a page: the parse that marked a node start there */
    uint16_t *who;   /* the node that starts there */
    uint32_t gen;
    int32_t *lis_tail, *lis_prev; /* the longest ascending run */
    /* the last walk's databases */
    dbslot *dbs;
    size_t ndbs, capdbs;
};

enum { MODE_WALK, MODE_EACH, MODE_LIVE };

typedef struct {
    ost__pc *pc;
    int mode;
    const meta *m;
    uint64_t last_pg, lim; /* lim: pages 0..lim-1 are in the file and in use */
    ost__pc_report report;
    void *ud;
    uint64_t nreports, more;
    bool damaged;
    bool oom;
    uint64_t *used, *freed; /* bitmaps over [0, lim) */
    uint64_t nfree;
    /* each */
    ost__pc_entry_fn fn;
    void *fud;
    int stop;
    /* live */
    void (*live)(void *ud, uint64_t off, uint64_t len, int kind);
    void *lud;
    /* named databases of the main one */
    named *named;
    size_t nnamed, capnamed;
    /* totals */
    ost__pc_stats st;
    int depth; /* scratch level in use */
} run;

struct tree {
    const char *name; /* printable */
    dbrec rec;
    uint64_t holder;     /* the page holding the record (a meta page, a main leaf, a leaf) */
    bool is_free, is_main, is_dup;
    unsigned flags;      /* the flags that rule its nodes (the database's) */
    unsigned cmp;        /* key order: C_MEM, C_REV, C_INT */
    unsigned dcmp;       /* duplicates' order */
    uint64_t branch, leaf, overflow, entries;
    uint64_t problems;
    const uint8_t *dupkey; /* a sub-database's key, for each */
    size_t dupklen;
};

enum { C_MEM, C_REV, C_INT };

/* ---- messages ------------------------------------------------------------ */

static void fmt(char *buf, size_t cap, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t cap, const char *f, ...) {
    if (!buf || !cap) return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, cap, f, ap);
    va_end(ap);
}

/* A database name as messages show it: printable ASCII kept, other bytes
 * as \xNN, at most 48 bytes shown. */
static void printable(char *out, size_t cap, const uint8_t *p, size_t n) {
    size_t o = 0;
    for (size_t i = 0; i < n && o + 5 < cap; i++) {
        if (i == 48) {
            o += (size_t)snprintf(out + o, cap - o, "...");
            break;
        }
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\')
            out[o++] = (char)p[i];
        else
            o += (size_t)snprintf(out + o, cap - o, "\\x%02x", p[i]);
    }
    out[o < cap ? o : cap - 1] = 0;
}

/* Reports one problem (bounded: MAX_REPORTS, then counted in r->more). */
static void vproblem(run *r, const char *db, uint64_t pgno, bool has_keys, kb lo, kb hi,
                     const char *f, va_list ap) {
    r->damaged = true;
    if (!r->report) return;
    if (r->nreports >= MAX_REPORTS) {
        r->more++;
        return;
    }
    r->nreports++;
    ost__pc_problem p;
    memset(&p, 0, sizeof p);
    p.db = db;
    p.pgno = pgno;
    p.has_keys = has_keys;
    if (has_keys) {
        p.key_lo = lo.p;
        p.klo_len = lo.p ? lo.n : 0;
        p.key_hi = hi.p;
        p.khi_len = hi.p ? hi.n : 0;
    }
    vsnprintf(p.msg, sizeof p.msg, f, ap);
    r->report(r->ud, &p);
}

static void dproblem(run *r, const char *db, uint64_t pgno, bool has_keys, kb lo, kb hi,
                     const char *f, ...) __attribute__((format(printf, 7, 8)));
static void dproblem(run *r, const char *db, uint64_t pgno, bool has_keys, kb lo, kb hi,
                     const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    vproblem(r, db, pgno, has_keys, lo, hi, f, ap);
    va_end(ap);
}

static void problem(run *r, const char *db, uint64_t pgno, const char *f, ...)
    __attribute__((format(printf, 4, 5)));
static void problem(run *r, const char *db, uint64_t pgno, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    kb none = {0};
    vproblem(r, db, pgno, false, none, none, f, ap);
    va_end(ap);
}

static void kproblem(run *r, tree *t, uint64_t pgno, kb lo, kb hi, const char *f, ...)
    __attribute__((format(printf, 6, 7)));
static void kproblem(run *r, tree *t, uint64_t pgno, kb lo, kb hi, const char *f, ...) {
    va_list ap;
    va_start(ap, f);
    t->problems++;
    vproblem(r, t->name, pgno, true, lo, hi, f, ap);
    va_end(ap);
}

/* ---- key order -------------------------------------------------------------- */

static uint64_t le_int(const uint8_t *p, size_t n) {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
    return v;
}

/* <0, 0, >0 as a sorts before, with or after b, in order how. */
static int kcmp(unsigned how, const uint8_t *a, size_t na, const uint8_t *b, size_t nb) {
    if (how == C_INT) {
        uint64_t x = le_int(a, na > 8 ? 8 : na), y = le_int(b, nb > 8 ? 8 : nb);
        return x < y ? -1 : x > y;
    }
    if (how == C_REV) {
        size_t i = na, j = nb;
        while (i > 0 && j > 0) {
            int d = (int)a[--i] - (int)b[--j];
            if (d) return d;
        }
        return na < nb ? -1 : na > nb;
    }
    size_t n = na < nb ? na : nb;
    if (n >= 8) { /* most keys differ in their first 8 bytes: one compare */
        uint64_t x, y;
        memcpy(&x, a, 8);
        memcpy(&y, b, 8);
        if (x != y) return __builtin_bswap64(x) < __builtin_bswap64(y) ? -1 : 1;
    }
    int d = n ? memcmp(a, b, n) : 0;
    if (d) return d;
    return na < nb ? -1 : na > nb;
}

static unsigned key_order(unsigned flags) {
    return flags & DB_INTEGERKEY ? C_INT : flags & DB_REVERSEKEY ? C_REV : C_MEM;
}
static unsigned dup_order(unsigned flags) {
    return flags & DB_INTEGERDUP ? C_INT : flags & DB_REVERSEDUP ? C_REV : C_MEM;
}

/* ---- bitmaps -------------------------------------------------------------- */

static inline bool bit_get(const uint64_t *b, uint64_t i) { return b[i >> 6] >> (i & 63) & 1; }
static inline void bit_set(uint64_t *b, uint64_t i) { b[i >> 6] |= (uint64_t)1 << (i & 63); }

/* ---- meta pages ------------------------------------------------------------ */

static void rd_dbrec(dbrec *d, const uint8_t *p) {
    d->pad = ost__rd_le32(p);
    d->flags = ost__rd_le16(p + 4);
    d->depth = ost__rd_le16(p + 6);
    d->branch = ost__rd_le64(p + 8);
    d->leaf = ost__rd_le64(p + 16);
    d->overflow = ost__rd_le64(p + 24);
    d->entries = ost__rd_le64(p + 32);
    d->root = ost__rd_le64(p + 40);
}

static bool pow2_psize(uint64_t v) { return v >= MIN_PSIZE && v <= MAX_PSIZE && !(v & (v - 1)); }

/* Checks a database record against a snapshot whose last page is last_pg:
 * "" in err when sane, else the first problem (no trailing period). */
static bool check_dbrec(const dbrec *d, uint64_t last_pg, unsigned allowed_flags, bool pad_zero,
                        char *err, size_t cap) {
    err[0] = 0;
    if (d->flags & ~allowed_flags)
        fmt(err, cap, "flags 0x%x has bits LMDB does not write here", d->flags);
    else if ((allowed_flags & DB_DUPSORT) && !(d->flags & DB_DUPSORT) &&
             (d->flags & (DB_DUPFIXED | DB_INTEGERDUP | DB_REVERSEDUP)))
        fmt(err, cap, "flags 0x%x: options of duplicates without MDB_DUPSORT", d->flags);
    else if (pad_zero && d->pad)
        fmt(err, cap, "pad field %u (0 expected)", (unsigned)d->pad);
    else if (d->depth > MAXDEPTH)
        fmt(err, cap, "depth %u (at most %u)", (unsigned)d->depth, MAXDEPTH);
    else if ((d->root == P_INVALID) != (d->depth == 0))
        fmt(err, cap, "depth %u with root page %llu", (unsigned)d->depth,
            d->root == P_INVALID ? -1LL : (long long)d->root);
    else if (d->depth == 0 && (d->branch || d->leaf || d->overflow || d->entries))
        fmt(err, cap, "empty (no root) but counts %llu branch, %llu leaf, %llu overflow pages, "
                      "%llu entries",
            (ull)d->branch, (ull)d->leaf, (ull)d->overflow, (ull)d->entries);
    else if (d->depth && d->root < 2)
        fmt(err, cap, "root page %llu is a meta page", (ull)d->root);
    else if (d->depth && d->root > last_pg)
        fmt(err, cap, "root page %llu beyond the last page %llu", (ull)d->root, (ull)last_pg);
    else if (d->depth && (d->leaf == 0 || (d->depth == 1 && d->branch) ||
                          d->branch < (uint64_t)d->depth - 1u))
        fmt(err, cap, "depth %u with %llu branch and %llu leaf pages", (unsigned)d->depth,
            (ull)d->branch, (ull)d->leaf);
    else if (d->depth && (d->branch > last_pg || d->leaf > last_pg || d->overflow > last_pg ||
                          d->branch + d->leaf + d->overflow > last_pg - 1))
        fmt(err, cap, "%llu branch, %llu leaf and %llu overflow pages do not fit in %llu pages",
            (ull)d->branch, (ull)d->leaf, (ull)d->overflow, (ull)(last_pg - 1));
    else if (d->entries < d->leaf)
        fmt(err, cap, "%llu entries in %llu leaf pages", (ull)d->entries, (ull)d->leaf);
    return err[0] == 0;
}

/* Reads meta page i at offset off; fills m (err names the first problem). */
static void read_meta(ost__pc *pc, int i, uint64_t off, meta *m) {
    memset(m, 0, sizeof *m);
    m->off = off;
    if (off > pc->size || pc->size - off < META_END) {
        fmt(m->err, sizeof m->err, "lies beyond the end of the file (%llu bytes)",
            (ull)pc->size);
        return;
    }
    const uint8_t *p = pc->base + off;
    m->found = true;
    m->pgno = ost__rd_le64(p);
    m->pflags = ost__rd_le16(p + 10);
    m->magic = ost__rd_le32(p + OFF_MAGIC);
    m->version = ost__rd_le32(p + OFF_VERSION);
    m->mapsize = ost__rd_le64(p + OFF_MAPSIZE);
    rd_dbrec(&m->db[0], p + OFF_DBS);
    rd_dbrec(&m->db[1], p + OFF_DBS + DBREC_SIZE);
    m->last_pg = ost__rd_le64(p + OFF_LAST_PG);
    m->txnid = ost__rd_le64(p + OFF_TXNID);
    m->psize = m->db[0].pad;
    char *e = m->err;
    size_t cap = sizeof m->err;
    if (m->pflags != P_META)
        fmt(e, cap, "page flags 0x%x (a meta page has 0x%x)", m->pflags, P_META);
    else if (m->magic != MAGIC)
        fmt(e, cap, "magic 0x%08x (an LMDB file has 0x%08x)", m->magic, MAGIC);
    else if (m->version != DATA_VERSION)
        fmt(e, cap, "data version %u (LMDB 0.9 writes %u)", m->version, DATA_VERSION);
    else if (!pow2_psize(m->psize))
        fmt(e, cap, "page size %u (must be a power of two from %u to %u)", m->psize, MIN_PSIZE,
            MAX_PSIZE);
    if (e[0]) return;
    m->usable = true;
    char dberr[128];
    uint64_t fpages = pc->size / m->psize;
    if (m->pgno != (uint64_t)i)
        fmt(e, cap, "the page header says page %llu", (ull)m->pgno);
    else if (m->last_pg < 1)
        fmt(e, cap, "last page %llu (at least 1: the meta pages)", (ull)m->last_pg);
    else if (m->last_pg >= fpages)
        fmt(e, cap, "last page %llu lies beyond the end of the file (%llu pages of %u bytes)",
            (ull)m->last_pg, (ull)fpages, m->psize);
    else if (m->mapsize / m->psize < m->last_pg + 1)
        fmt(e, cap, "map size %llu is smaller than the %llu pages in use", (ull)m->mapsize,
            (ull)(m->last_pg + 1));
    else if (m->mapsize > MAX_MAPSIZE)
        fmt(e, cap, "map size %llu is more than a 48-bit address space can map", (ull)m->mapsize);
    else if (m->txnid && (m->txnid & 1) != (uint64_t)i)
        fmt(e, cap, "transaction id %llu is %s, but transaction N writes meta page N %% 2",
            (ull)m->txnid, m->txnid & 1 ? "odd" : "even");
    else if (!(m->db[0].flags & DB_INTEGERKEY) ||
             (m->db[0].flags & ~(DB_INTEGERKEY | ENV_FIXEDMAP | ENV_NOSUBDIR)))
        fmt(e, cap, "free list flags 0x%x (LMDB writes 0x%x, maybe with 0x%x or 0x%x)",
            m->db[0].flags, DB_INTEGERKEY, ENV_FIXEDMAP, ENV_NOSUBDIR);
    else if (!check_dbrec(&m->db[0], m->last_pg, 0xffffu, false, dberr, sizeof dberr))
        fmt(e, cap, "free list: %s", dberr), m->err_db = 1;
    else if (!check_dbrec(&m->db[1], m->last_pg, DB_PERSISTENT, true, dberr, sizeof dberr))
        fmt(e, cap, "main database: %s", dberr), m->err_db = 2;
    m->sane = e[0] == 0;
}

/* Finds meta page 1: at meta page 0's page size when that is sane, else at
 * the first page size where a meta page 1 of that page size sits. */
static uint64_t meta1_offset(ost__pc *pc) {
    if (pc->m[0].usable) return pc->m[0].psize;
    for (uint64_t c = MIN_PSIZE; c <= MAX_PSIZE; c *= 2) {
        if (c > pc->size || pc->size - c < META_END) break;
        const uint8_t *p = pc->base + c;
        if (ost__rd_le64(p) == 1 && ost__rd_le16(p + 10) == P_META &&
            ost__rd_le32(p + OFF_MAGIC) == MAGIC && ost__rd_le32(p + OFF_DBS) == c)
            return c;
    }
    return 4096; /* nowhere better to look: read_meta says what is there */
}

/* Guesses the page size from page headers: the size at which the most of
 * pages 2..65 carry their own number. 0 when none does. */
static unsigned guess_psize(const ost__pc *pc) {
    unsigned best = 0, best_hits = 0;
    for (uint64_t c = MIN_PSIZE; c <= MAX_PSIZE; c *= 2) {
        unsigned hits = 0;
        for (uint64_t p = 2; p < 66 && (p + 1) * c <= pc->size; p++)
            if (ost__rd_le64(pc->base + p * c) == p) hits++;
        if (hits > best_hits) best = (unsigned)c, best_hits = hits;
    }
    return best;
}

static int pick_meta(const ost__pc *pc) {
    const meta *a = &pc->m[0], *b = &pc->m[1];
    if (a->usable && b->usable) return b->txnid > a->txnid ? 1 : 0;
    return a->usable ? 0 : b->usable ? 1 : -1;
}

static void choose(ost__pc *pc) {
    pc->cur = pc->chosen >= 0 ? pc->chosen : pick_meta(pc);
    if (pc->cur >= 0)
        pc->psize = pc->m[pc->cur].psize;
    else if (pc->m[0].usable)
        pc->psize = pc->m[0].psize;
    else if (pc->m[1].usable)
        pc->psize = pc->m[1].psize;
    else
        pc->psize = 0;
}

/* ---- open and close -------------------------------------------------------- */

static int setup(ost__pc *pc, const char *label, char *msg, size_t cap) {
    pc->chosen = -1;
    read_meta(pc, 0, 0, &pc->m[0]);
    read_meta(pc, 1, meta1_offset(pc), &pc->m[1]);
    meta *a = &pc->m[0], *b = &pc->m[1];
    if (a->usable && !b->usable) {
        /* Is meta page 1 elsewhere, at its own page size? Then meta page
         * 0's page size is the wrong one. */
        for (uint64_t c = MIN_PSIZE; c <= MAX_PSIZE; c *= 2) {
            if (c == a->psize || c > pc->size || pc->size - c < META_END) continue;
            const uint8_t *p = pc->base + c;
            if (ost__rd_le64(p) != 1 || ost__rd_le16(p + 10) != P_META ||
                ost__rd_le32(p + OFF_MAGIC) != MAGIC || ost__rd_le32(p + OFF_DBS) != c)
                continue;
            meta m1;
            read_meta(pc, 1, c, &m1);
            if (!m1.usable) continue;
            *b = m1;
            a->usable = a->sane = false;
            fmt(a->err, sizeof a->err,
                "page size %u, but meta page 1 lies at byte %llu and says %llu", a->psize,
                (ull)c, (ull)c);
            break;
        }
    }
    if (a->usable && b->usable && a->psize != b->psize) {
        /* meta page 1 sits at meta page 0's page size: its own is wrong */
        b->usable = b->sane = false;
        fmt(b->err, sizeof b->err, "page size %u differs from meta page 0's %u", b->psize,
            a->psize);
    }
    choose(pc);
    if (pc->psize && pc->size < 2 * (uint64_t)pc->psize) {
        fmt(msg, cap, "%s: %llu bytes, too small for two meta pages of %u bytes", label,
            (ull)pc->size, pc->psize);
        return OST_ECORRUPT;
    }
    unsigned ps = 0;
    for (int i = 0; i < 2; i++)
        if (pc->m[i].usable && pc->m[i].psize > ps) ps = pc->m[i].psize;
    if (!ps) ps = MAX_PSIZE; /* scan may guess any */
    pc->scratch_ps = ps;
    pc->maxnodes = (ps - PAGEHDRSZ) / 2 + 1;
    pc->stamp = ost__mem_alloc((size_t)ps / 2 * sizeof *pc->stamp);
    pc->who = ost__mem_alloc((size_t)ps / 2 * sizeof *pc->who);
    pc->lis_tail = ost__mem_alloc((size_t)pc->maxnodes * sizeof *pc->lis_tail);
    pc->lis_prev = ost__mem_alloc((size_t)pc->maxnodes * sizeof *pc->lis_prev);
    if (!pc->stamp || !pc->who || !pc->lis_tail || !pc->lis_prev) {
        fmt(msg, cap, "%s: out of memory", pc->file);
        return OST_ENOMEM;
    }
    memset(pc->stamp, 0, (size_t)ps / 2 * sizeof *pc->stamp);
    return 0;
}

static ost__pc *pc_new(void) {
    ost__pc *pc = ost__mem_alloc(sizeof *pc);
    if (pc) memset(pc, 0, sizeof *pc);
    return pc;
}

int ost__pc_open_mem(const void *buf, size_t n, ost__pc **out, char *msg, size_t cap) {
    *out = NULL;
    if (!buf && n) return OST_EINVAL;
    if (n < 2 * MIN_PSIZE) {
        fmt(msg, cap, "data.mdb: %zu bytes, too small for two meta pages", n);
        return OST_ECORRUPT;
    }
    ost__pc *pc = pc_new();
    if (!pc) return OST_ENOMEM;
    pc->base = buf;
    pc->size = n;
    snprintf(pc->file, sizeof pc->file, "data.mdb");
    int rc = setup(pc, "data.mdb", msg, cap);
    if (rc) {
        ost__pc_close(pc);
        return rc;
    }
    *out = pc;
    return 0;
}

int ost__pc_open(const char *dir, ost__pc **out, char *msg, size_t cap) {
    *out = NULL;
    if (!dir) return OST_EINVAL;
    size_t dl = strlen(dir);
    char *path = ost__mem_alloc(dl + sizeof "/data.mdb");
    if (!path) return OST_ENOMEM;
    memcpy(path, dir, dl);
    memcpy(path + dl, "/data.mdb", sizeof "/data.mdb");
    int rc = 0, fd = -1;
    struct stat sb;
    ost__pc *pc = NULL;
    /* stat first: opening a FIFO for reading would block until a writer
     * comes; O_NONBLOCK and the fstat after cover a swap in between. */
    if (stat(path, &sb) != 0) {
        rc = errno == ENOENT || errno == ENOTDIR ? OST_ENOTFOUND : OST_EIO;
        fmt(msg, cap, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = OST_EIO;
        fmt(msg, cap, "%s: not a regular file", path);
        goto out;
    }
    fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &sb) != 0) {
        rc = errno == ENOENT ? OST_ENOTFOUND : OST_EIO;
        fmt(msg, cap, "%s: %s", path, strerror(errno));
        goto out;
    }
    if (!S_ISREG(sb.st_mode)) {
        rc = OST_EIO;
        fmt(msg, cap, "%s: not a regular file", path);
        goto out;
    }
    if ((uint64_t)sb.st_size < 2 * MIN_PSIZE) {
        rc = OST_ECORRUPT;
        fmt(msg, cap, "%s: %llu bytes, too small for two meta pages", path, (ull)sb.st_size);
        goto out;
    }
    if ((uint64_t)sb.st_size > SIZE_MAX) {
        rc = OST_EIO;
        fmt(msg, cap, "%s: too big to map", path);
        goto out;
    }
    pc = pc_new();
    if (!pc) {
        rc = OST_ENOMEM;
        goto out;
    }
    pc->maplen = (size_t)sb.st_size;
    pc->map = mmap(NULL, pc->maplen, PROT_READ, MAP_SHARED, fd, 0);
    if (pc->map == MAP_FAILED) {
        pc->map = NULL;
        rc = OST_EIO;
        fmt(msg, cap, "%s: mmap: %s", path, strerror(errno));
        goto out;
    }
    pc->base = pc->map;
    pc->size = (uint64_t)sb.st_size;
    snprintf(pc->file, sizeof pc->file, "data.mdb");
    rc = setup(pc, path, msg, cap);
out:
    if (fd >= 0) close(fd);
    ost__mem_free(path);
    if (rc) {
        ost__pc_close(pc);
        return rc;
    }
    *out = pc;
    return 0;
}

static void free_dbs(ost__pc *pc) {
    for (size_t i = 0; i < pc->ndbs; i++) ost__mem_free(pc->dbs[i].name);
    pc->ndbs = 0;
}

void ost__pc_close(ost__pc *pc) {
    if (!pc) return;
    if (pc->map) munmap(pc->map, pc->maplen);
    for (int i = 0; i < MAX_LEVELS; i++) ost__mem_free(pc->lv[i].nodes);
    ost__mem_free(pc->stamp);
    ost__mem_free(pc->who);
    ost__mem_free(pc->lis_tail);
    ost__mem_free(pc->lis_prev);
    free_dbs(pc);
    ost__mem_free(pc->dbs);
    ost__mem_free(pc);
}

int ost__pc_use_meta(ost__pc *pc, int which) {
    if (!pc || which < -1 || which > 1) return OST_EINVAL;
    if (which >= 0 && !pc->m[which].usable) return OST_ECORRUPT;
    pc->chosen = which;
    choose(pc);
    return 0;
}

int ost__pc_meta_check(ost__pc *pc, char *msg, size_t cap) {
    if (msg && cap) msg[0] = 0;
    if (!pc) return OST_EINVAL;
    int cur = pick_meta(pc);
    if (cur < 0) {
        int i = pc->m[0].usable ? 1 : 0;
        fmt(msg, cap, "%s: meta page %d: %s", pc->file, i, pc->m[i].err);
        return OST_ECORRUPT;
    }
    if (!pc->m[cur].sane) {
        fmt(msg, cap, "%s: meta page %d: %s", pc->file, cur, pc->m[cur].err);
        return OST_ECORRUPT;
    }
    int other = 1 - cur;
    if (!pc->m[other].sane) {
        /* Which is older is known only when both are readable. */
        fmt(msg, cap,
            "%s: meta page %d%s: %s; meta page %d, the current one, is sane (liblmdb refuses "
            "a file with either meta page damaged)",
            pc->file, other, pc->m[other].usable ? " (the older)" : "", pc->m[other].err, cur);
        return OST_ECORRUPT;
    }
    return 0;
}

/* ---- the walk: pages ----------------------------------------------------- */

static node *level_nodes(run *r) {
    ost__pc *pc = r->pc;
    if (r->depth >= MAX_LEVELS) return NULL;
    level *l = &pc->lv[r->depth];
    if (!l->nodes) {
        l->nodes = ost__mem_alloc((size_t)pc->maxnodes * sizeof *l->nodes);
        if (!l->nodes) {
            r->oom = true;
            return NULL;
        }
    }
    return l->nodes;
}

/* What a page being checked is. */
typedef struct {
    run *r;
    tree *t;
    uint64_t pgno;    /* the page (for a sub-page, the leaf holding it) */
    const char *kind; /* "branch", "leaf", ... for messages */
    char kindbuf[48];
    const uint8_t *pg; /* the page's (or sub-page's) first byte */
    uint32_t sz;       /* its size */
    uint64_t fileoff;  /* pg's offset in the file */
    bool branch, leaf2, subpage;
    unsigned cmp;      /* key order on this page */
    unsigned ks2;      /* LEAF2 key size */
    kb lo, hi;         /* bounds from above */
    node *nd;
    int n;
    int nprob; /* node problems reported on this page */
} page;

static void live(run *r, uint64_t off, uint64_t len, int kind) {
    if (r->live && len) r->live(r->lud, off, len, kind);
}

/* The key of node i as a bound (NULL: none, e.g. branch node 0). */
static kb node_key(const page *g, int i) {
    kb k = {0};
    if (i < 0 || i >= g->n || (g->branch && i == 0)) return k;
    k.p = g->nd[i].key;
    k.n = g->nd[i].ks;
    return k;
}

static bool node_ok(const page *g, int i) { return !g->nd[i].bad && g->nd[i].order == O_OK; }

/* The keys a damaged node i hides lie between these: the nearest sound
 * neighbours' keys, or the page's bounds. */
static void node_range(const page *g, int i, kb *lo, kb *hi) {
    *lo = g->lo;
    *hi = g->hi;
    int a = i - (g->branch && node_ok(g, i) ? 0 : 1);
    for (int j = a; j >= (g->branch ? 1 : 0); j--)
        if (node_ok(g, j)) {
            *lo = node_key(g, j);
            break;
        }
    for (int j = i + 1; j < g->n; j++)
        if (node_ok(g, j)) {
            *hi = node_key(g, j);
            break;
        }
}

static void nproblem(page *g, int i, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void nproblem(page *g, int i, const char *f, ...) {
    g->t->problems++;
    g->r->damaged = true;
    if (++g->nprob > MAX_PER_PAGE) return;
    char m[200];
    va_list ap;
    va_start(ap, f);
    vsnprintf(m, sizeof m, f, ap);
    va_end(ap);
    kb lo, hi;
    node_range(g, i, &lo, &hi);
    g->t->problems--; /* kproblem counts it */
    kproblem(g->r, g->t, g->pgno, lo, hi, "page %llu (%s, %s): node %d: %s", (ull)g->pgno,
             g->t->name, g->kind, i, m);
}

/* A problem of the whole page: it hides everything between its bounds. */
static void pproblem(page *g, const char *f, ...) __attribute__((format(printf, 2, 3)));
static void pproblem(page *g, const char *f, ...) {
    char m[200];
    va_list ap;
    va_start(ap, f);
    vsnprintf(m, sizeof m, f, ap);
    va_end(ap);
    kproblem(g->r, g->t, g->pgno, g->lo, g->hi, "page %llu (%s, %s): %s", (ull)g->pgno,
             g->t->name, g->kind, m);
}

/* After a page: the node problems over MAX_PER_PAGE, counted. */
static void page_done(page *g) {
    if (g->nprob <= MAX_PER_PAGE) return;
    kproblem(g->r, g->t, g->pgno, g->lo, g->hi, "page %llu (%s, %s): %d more damaged nodes",
             (ull)g->pgno, g->t->name, g->kind, g->nprob - MAX_PER_PAGE);
    g->t->problems--; /* counted as they were found */
}

static void report_bad_node(page *g, int i) {
    node *d = &g->nd[i];
    switch (d->bad) {
    case R_OFF_ODD: nproblem(g, i, "offset %u is odd (nodes are 2-aligned)", d->off); break;
    case R_OFF_RANGE:
        nproblem(g, i, "offset %u is outside the node area [%u, %u)", d->off, d->v1, g->sz);
        break;
    case R_RUNS_PAST:
        nproblem(g, i, "at offset %u, %u bytes, runs past the page end (%u)", d->off, d->v1,
                 g->sz);
        break;
    case R_KSIZE: nproblem(g, i, "key size %u (must be %u to %u)", d->ks, d->v1, MAXKEY); break;
    case R_FLAGS: nproblem(g, i, "node flags 0x%x not allowed in this database", d->flags); break;
    case R_DSIZE: nproblem(g, i, "data size %u (%u expected)", d->ds, d->v1); break;
    case R_TOO_BIG:
        nproblem(g, i, "%u bytes inline, more than the %u LMDB keeps in a page", d->v1, d->v2);
        break;
    case R_SAME: nproblem(g, i, "at offset %u, the same bytes as node %u", d->off, d->v1); break;
    case R_INSIDE: nproblem(g, i, "at offset %u begins inside another node", d->off); break;
    case R_TILE:
        nproblem(g, i, "at offset %u, %u bytes, ends at %u where no node begins", d->off, d->ext,
                 d->off + d->ext);
        break;
    default: break;
    }
}

/* Reads the node headers of a branch, leaf or sub-page into g->nd. */
static void read_nodes(page *g, uint32_t lower, uint32_t upper) {
    tree *t = g->t;
    const uint8_t *pg = g->pg;
    const uint32_t sz = g->sz;
    const uint32_t nodemax = ((((g->r->pc->psize - PAGEHDRSZ) / 2) & ~1u) - 2);
    const bool dupvals = t->is_dup || g->subpage; /* keys are duplicates, data empty */
    const uint32_t minks = dupvals ? 0 : 1;
    unsigned ok; /* node flags allowed */
    if (dupvals)
        ok = 0;
    else if (t->is_main)
        ok = F_BIGDATA | F_SUBDATA | (t->flags & DB_DUPSORT ? F_DUPDATA : 0);
    else if (t->is_free)
        ok = F_BIGDATA;
    else
        ok = F_BIGDATA | (t->flags & DB_DUPSORT ? F_DUPDATA | F_SUBDATA : 0);
    if (lower > upper) upper = lower;
    for (int i = 0; i < g->n; i++) {
        node *d = &g->nd[i];
        uint32_t off = ost__rd_le16(pg + PAGEHDRSZ + 2 * (uint32_t)i);
        d->off = (uint16_t)off;
        d->bad = 0;
        d->order = 0;
        d->flags = 0;
        d->ds = 0;
        d->child = 0;
        d->ext = 0;
        d->key = d->data = pg;
        d->ks = 0;
        if (off & 1) {
            d->bad = R_OFF_ODD;
            continue;
        }
        if (off < upper || off + NODESIZE > sz) {
            d->bad = R_OFF_RANGE;
            d->v1 = upper;
            continue;
        }
        const uint8_t *p = pg + off;
        uint32_t ks = ost__rd_le16(p + 6);
        uint32_t room = sz - off - NODESIZE; /* bytes after the header */
        d->ks = ks;
        d->key = p + NODESIZE;
        if (g->branch) {
            d->child = ost__rd_le32(p) | (uint64_t)ost__rd_le16(p + 4) << 32;
            d->ext = even(NODESIZE + ks);
            if (ks > room)
                d->bad = R_RUNS_PAST, d->v1 = NODESIZE + ks;
            else if (ks > MAXKEY || (i > 0 && ks == 0))
                d->bad = R_KSIZE, d->v1 = i > 0;
            continue;
        }
        unsigned f = ost__rd_le16(p + 4);
        uint32_t ds = ost__rd_le32(p);
        d->flags = (uint16_t)f;
        d->ds = ds;
        uint64_t total = (uint64_t)NODESIZE + ks + (f & F_BIGDATA ? 8u : ds);
        d->data = p + NODESIZE + (ks <= room ? ks : 0);
        d->ext = total > UINT32_MAX ? UINT32_MAX : even((uint32_t)total);
        if (total - NODESIZE > room) {
            d->bad = R_RUNS_PAST, d->v1 = total > UINT32_MAX ? UINT32_MAX : (uint32_t)total;
            continue;
        }
        if (ks > MAXKEY || ks < minks) {
            d->bad = R_KSIZE, d->v1 = minks;
            continue;
        }
        if (f) {
            bool fine = (f & ~ok) == 0 && !((f & F_BIGDATA) && (f & (F_SUBDATA | F_DUPDATA)));
            if (fine && (f & F_SUBDATA) && !t->is_main && !(f & F_DUPDATA)) fine = false;
            if (!fine) {
                d->bad = R_FLAGS;
                continue;
            }
            if ((f & F_SUBDATA) && ds != DBREC_SIZE) {
                d->bad = R_DSIZE, d->v1 = DBREC_SIZE;
                continue;
            }
        }
        if (dupvals && ds) {
            d->bad = R_DSIZE, d->v1 = 0;
            continue;
        }
        if (!g->subpage && !(f & F_BIGDATA) && total > nodemax) {
            d->bad = R_TOO_BIG, d->v1 = (uint32_t)total, d->v2 = nodemax;
            continue;
        }
    }
}

/* The bytes a node at off would take, read from its header; 0 when it
 * cannot be a node of g. For telling a lost node from a wrong size. */
static uint32_t ext_at(const page *g, uint32_t off) {
    if ((off & 1) || off + NODESIZE > g->sz) return 0;
    const uint8_t *p = g->pg + off;
    uint64_t n = NODESIZE + (uint64_t)ost__rd_le16(p + 6);
    if (!g->branch) n += ost__rd_le16(p + 4) & F_BIGDATA ? 8u : ost__rd_le32(p);
    return n > g->sz - off ? 0 : even((uint32_t)n);
}

/* Nodes must tile [upper, sz): each node begins where the one below it in
 * the page ends (liblmdb closes every gap). Marks the nodes that break it:
 * two pointers to one node (R_SAME), a node whose end is no node's start
 * (R_TILE: its size is wrong), a node starting inside another (R_INSIDE);
 * bytes no pointer reaches (a lost pointer, or a wrong mp_upper) are a
 * problem of the page. */
static void check_tiling(page *g, uint32_t upper) {
    /* The common case first: nodes laid out in (reverse) key order, each
     * ending where the one before it (after it) in key order begins. */
    int n = g->n;
    node *nd = g->nd;
    if (n > 0 && !nd[0].bad) {
        bool down = true, up = true;
        for (int i = 0; i < n && (down || up); i++) {
            const node *d = &nd[i];
            if (d->bad) {
                down = up = false;
                break;
            }
            /* down: node 0 at the page end, node n-1 at upper */
            if (down && (i == 0 ? (uint32_t)d->off + d->ext != g->sz
                                : (uint32_t)d->off + d->ext != nd[i - 1].off))
                down = false;
            if (up && (i == 0 ? d->off != upper : (uint32_t)nd[i - 1].off + nd[i - 1].ext != d->off))
                up = false;
        }
        if (down && nd[n - 1].off == upper) return;
        if (up && (uint32_t)nd[n - 1].off + nd[n - 1].ext == g->sz) return;
    }
    ost__pc *pc = g->r->pc;
    if (++pc->gen == 0) {
        memset(pc->stamp, 0, (size_t)pc->scratch_ps / 2 * sizeof *pc->stamp);
        pc->gen = 1;
    }
    uint32_t gen = pc->gen;
    for (int i = 0; i < g->n; i++) {
        node *d = &g->nd[i];
        if (d->bad == R_OFF_ODD || d->bad == R_OFF_RANGE) continue;
        uint32_t s = d->off / 2;
        if (pc->stamp[s] == gen) {
            d->bad = R_SAME, d->v1 = pc->who[s];
            continue;
        }
        pc->stamp[s] = gen;
        pc->who[s] = (uint16_t)i;
    }
#define STARTS(o) ((o) < g->sz && pc->stamp[(o) / 2] == gen)
    uint32_t pos = upper;
    bool lost = false;
    while (pos < g->sz) {
        if (!STARTS(pos)) {
            /* No node begins here: an unreferenced node or a wrong
             * mp_upper. Go on at the next node start. */
            if (!lost) {
                lost = true;
                if (pos == upper)
                    pproblem(g, "no node begins at mp_upper %u", upper);
                else
                    pproblem(g, "bytes from offset %u belong to no node (a lost node pointer)",
                             pos);
            }
            pos = (pos + 2) & ~1u;
            while (pos < g->sz && !STARTS(pos)) pos += 2;
            continue;
        }
        node *d = &g->nd[pc->who[pos / 2]];
        pc->stamp[pos / 2] = gen - 1; /* visited: not a start any more */
        uint32_t next = d->ext && d->ext <= g->sz - pos ? pos + d->ext : 0;
        if (d->bad == R_RUNS_PAST || !next) {
            pos += 2;
            while (pos < g->sz && !STARTS(pos)) pos += 2;
            continue;
        }
        if (next < g->sz && !STARTS(next)) {
            /* Its end is no node's start. If a node-shaped run of bytes
             * begins there and ends at a start, a pointer was lost and
             * this node is fine; else its size is wrong. */
            uint32_t e = ext_at(g, next);
            if (!(e && (next + e == g->sz || STARTS(next + e)))) {
                if (!d->bad) d->bad = R_TILE;
                pos += 2;
                while (pos < g->sz && !STARTS(pos)) pos += 2;
                continue;
            }
        }
        pos = next;
    }
    /* Nodes never reached begin inside another node. */
    for (int i = 0; i < g->n; i++) {
        node *d = &g->nd[i];
        if (d->bad == R_OFF_ODD || d->bad == R_OFF_RANGE || d->bad == R_SAME) continue;
        if (pc->stamp[d->off / 2] == gen && !d->bad) d->bad = R_INSIDE;
    }
#undef STARTS
}

/* Key order: keys ascending on the page and within [lo, hi). When the
 * order breaks, the nodes kept are the longest ascending run (patience
 * sorting), the others marked O_OUT. */
static void check_order(page *g) {
    ost__pc *pc = g->r->pc;
    int first = g->branch ? 1 : 0;
    /* The common case first: ascending throughout, and the first and last
     * keys within the bounds (one compare per key). */
    int lo_i = -1, hi_i = -1;
    bool fast = true;
    for (int i = first; i < g->n && fast; i++) {
        const node *d = &g->nd[i];
        if (d->bad) continue;
        if (g->cmp == C_INT && d->ks != 4 && d->ks != 8) fast = false;
        if (hi_i >= 0 && kcmp(g->cmp, g->nd[hi_i].key, g->nd[hi_i].ks, d->key, d->ks) >= 0)
            fast = false;
        if (lo_i < 0) lo_i = i;
        hi_i = i;
    }
    if (fast && (lo_i < 0 || ((!g->lo.p || kcmp(g->cmp, g->nd[lo_i].key, g->nd[lo_i].ks,
                                                g->lo.p, g->lo.n) >= 0) &&
                              (!g->hi.p || kcmp(g->cmp, g->nd[hi_i].key, g->nd[hi_i].ks,
                                                g->hi.p, g->hi.n) < 0))))
        return;
    int prev = -1;
    bool broken = false;
    for (int i = first; i < g->n; i++) {
        node *d = &g->nd[i];
        if (d->bad) continue;
        if ((g->lo.p && kcmp(g->cmp, d->key, d->ks, g->lo.p, g->lo.n) < 0) ||
            (g->hi.p && kcmp(g->cmp, d->key, d->ks, g->hi.p, g->hi.n) >= 0)) {
            d->order = O_BOUNDS;
            continue;
        }
        if (prev >= 0 && kcmp(g->cmp, g->nd[prev].key, g->nd[prev].ks, d->key, d->ks) >= 0)
            broken = true;
        prev = i;
    }
    if (g->cmp == C_INT) {
        for (int i = first; i < g->n; i++) {
            node *d = &g->nd[i];
            if (!d->bad && !d->order && d->ks != 4 && d->ks != 8) d->order = O_BOUNDS;
        }
    }
    if (!broken) return;
    /* the longest strictly ascending subsequence of the candidates */
    int32_t *tail = pc->lis_tail, *pv = pc->lis_prev;
    int len = 0;
    for (int i = first; i < g->n; i++) {
        node *d = &g->nd[i];
        if (d->bad || d->order) continue;
        int a = 0, b = len;
        while (a < b) {
            int mid = (a + b) / 2;
            node *e = &g->nd[tail[mid]];
            if (kcmp(g->cmp, e->key, e->ks, d->key, d->ks) < 0)
                a = mid + 1;
            else
                b = mid;
        }
        pv[i] = a > 0 ? tail[a - 1] : -1;
        tail[a] = i;
        if (a == len) len++;
        d->order = O_OUT; /* until found in the run */
    }
    for (int i = len ? tail[len - 1] : -1; i >= 0; i = pv[i]) g->nd[i].order = O_OK;
}

static void report_order(page *g) {
    for (int i = g->branch ? 1 : 0; i < g->n; i++) {
        node *d = &g->nd[i];
        if (d->bad) continue;
        if (d->order == O_BOUNDS) {
            if (g->cmp == C_INT && d->ks != 4 && d->ks != 8)
                nproblem(g, i, "key size %u in an integer-keyed database (4 or 8)", d->ks);
            else
                nproblem(g, i, "key outside the range the separators above give");
        } else if (d->order == O_OUT) {
            nproblem(g, i, "key out of order");
        }
    }
}

/* Checks the page g describes (header already read: lower, upper); fills
 * g->nd and g->n. Returns false when the page is unusable as a whole. */
static bool check_page(page *g, uint16_t pad, uint32_t lower, uint32_t upper) {
    uint32_t sz = g->sz;
    if (lower < PAGEHDRSZ || (lower & 1) || lower > upper || upper > sz) {
        pproblem(g, "mp_lower %u and mp_upper %u do not fit a page of %u bytes", lower, upper,
                 sz);
        return false;
    }
    g->n = (int)((lower - PAGEHDRSZ) / 2);
    if (g->n == 0) {
        pproblem(g, "no entries (LMDB frees an emptied page)");
        return false;
    }
    if (g->leaf2) {
        uint32_t ks = g->ks2;
        if (pad != ks) {
            pproblem(g, "LEAF2 key size %u, the database says %u", pad, ks);
            return false;
        }
        if ((uint64_t)g->n * ks > sz - PAGEHDRSZ ||
            upper - lower != sz - PAGEHDRSZ - (uint32_t)g->n * ks) {
            pproblem(g, "%d keys of %u bytes do not fit mp_lower %u and mp_upper %u", g->n, ks,
                     lower, upper);
            return false;
        }
        for (int i = 0; i < g->n; i++) {
            node *d = &g->nd[i];
            memset(d, 0, sizeof *d);
            d->key = g->pg + PAGEHDRSZ + (uint32_t)i * ks;
            d->ks = ks;
        }
    } else {
        read_nodes(g, lower, upper);
        check_tiling(g, upper);
    }
    check_order(g);
    for (int i = 0; i < g->n; i++)
        if (g->nd[i].bad) report_bad_node(g, i);
    report_order(g);
    return true;
}

static void page_live(page *g) {
    run *r = g->r;
    if (!r->live) return;
    uint64_t o = g->fileoff;
    if (!g->subpage) live(r, o, 8, OST__PC_LIVE_STRUCT); /* a sub-page's number is not read */
    if (g->leaf2) live(r, o + 8, 2, OST__PC_LIVE_STRUCT);
    live(r, o + 10, 6, OST__PC_LIVE_STRUCT);
    if (!g->leaf2) live(r, o + PAGEHDRSZ, 2 * (uint64_t)g->n, OST__PC_LIVE_STRUCT);
    for (int i = 0; i < g->n; i++) {
        node *d = &g->nd[i];
        if (d->bad || d->order) continue;
        uint64_t no = o + (uint64_t)(d->key - g->pg);
        if (!g->leaf2) live(r, no - NODESIZE, NODESIZE, OST__PC_LIVE_STRUCT);
        if (!g->branch || i > 0) live(r, no, d->ks, OST__PC_LIVE_KEY);
    }
}

/* ---- the walk: trees ------------------------------------------------------ */

static void walk_tree(run *r, tree *t);
static void leaf_entries(page *g);

/* Marks page pgno used; false (reported) when it already was. how says
 * what reached it, for the message. */
static bool mark(run *r, tree *t, uint64_t pgno, uint64_t from, kb lo, kb hi, const char *how) {
    if (bit_get(r->used, pgno)) {
        kproblem(r, t, from, lo, hi,
                 "page %llu (%s): %s page %llu, which another place already uses (a cycle or "
                 "a shared page)",
                 (ull)from, t->name, how, (ull)pgno);
        return false;
    }
    bit_set(r->used, pgno);
    if (r->freed && !t->is_free && bit_get(r->freed, pgno)) {
        kproblem(r, t, pgno, lo, hi, "page %llu (%s, %s) is in use and also in the free list",
                 (ull)pgno, t->name, how);
    }
    return true;
}

/* Is pgno a page number a tree may use? Reports the pointer otherwise. */
static bool pgno_ok(run *r, tree *t, uint64_t pgno, uint64_t from, int from_node, kb lo,
                    kb hi) {
    const char *why = NULL;
    char b[64];
    if (pgno < 2)
        why = "a meta page";
    else if (pgno > r->last_pg)
        fmt(b, sizeof b, "beyond the last page %llu", (ull)r->last_pg), why = b;
    else if (pgno >= r->pc->fpages)
        fmt(b, sizeof b, "beyond the end of the file (%llu pages)", (ull)r->pc->fpages), why = b;
    if (!why) return true;
    if (from_node < 0)
        kproblem(r, t, from, lo, hi, "%s: the root: page %llu is %s", t->name, (ull)pgno, why);
    else
        kproblem(r, t, from, lo, hi, "page %llu (%s, branch): node %d: page %llu is %s",
                 (ull)from, t->name, from_node, (ull)pgno, why);
    return false;
}

/* Visits page pgno at level (1: the root) of tree t; from is the page
 * holding the pointer to it. */
static void visit(run *r, tree *t, uint64_t pgno, unsigned level, kb lo, kb hi, uint64_t from,
                  int from_node) {
    if (r->stop || r->oom) return;
    if (!pgno_ok(r, t, pgno, from, from_node, lo, hi)) return;
    if (!mark(r, t, pgno, from, lo, hi, level == 1 ? "root" : "child")) return;
    ost__pc *pc = r->pc;
    page g;
    memset(&g, 0, sizeof g);
    g.r = r;
    g.t = t;
    g.pgno = pgno;
    g.fileoff = pgno * pc->psize;
    g.pg = pc->base + g.fileoff;
    g.sz = pc->psize;
    g.lo = lo;
    g.hi = hi;
    g.cmp = t->cmp;
    bool want_leaf = level == t->rec.depth;
    g.kind = want_leaf ? "leaf" : "branch";
    uint64_t hdr = ost__rd_le64(g.pg);
    uint16_t pad = ost__rd_le16(g.pg + 8), flags = ost__rd_le16(g.pg + 10);
    if (hdr != pgno) {
        pproblem(&g, "the page header says page %llu (not this page, or overwritten)",
                 (ull)hdr);
        return;
    }
    unsigned want = want_leaf ? P_LEAF | (t->is_dup && (t->flags & DB_DUPFIXED) ? P_LEAF2 : 0)
                              : P_BRANCH;
    if (flags != want) {
        pproblem(&g, "page flags 0x%x, but level %u of %u needs 0x%x (%s)", flags, level,
                 (unsigned)t->rec.depth, want, want_leaf ? "a leaf" : "a branch page");
        return;
    }
    g.branch = !want_leaf;
    g.leaf2 = (flags & P_LEAF2) != 0;
    g.ks2 = t->rec.pad;
    r->depth++;
    g.nd = level_nodes(r);
    if (!g.nd) {
        r->depth--;
        return;
    }
    if (!check_page(&g, pad, ost__rd_le16(g.pg + 12), ost__rd_le16(g.pg + 14))) {
        page_done(&g);
        r->depth--;
        return;
    }
    page_live(&g);
    if (g.branch) {
        t->branch++;
        for (int i = 0; i < g.n && !r->stop && !r->oom; i++) {
            node *d = &g.nd[i];
            if (d->bad) continue; /* its pointer cannot be read */
            /* The child's range: from this separator (or the nearest sound
             * one below, or the page's bound) to the next sound one. */
            kb clo = g.lo, chi = g.hi;
            if (i > 0 && d->order == O_OK)
                clo = node_key(&g, i);
            else
                for (int j = i - 1; j >= 1; j--)
                    if (node_ok(&g, j)) {
                        clo = node_key(&g, j);
                        break;
                    }
            for (int j = i + 1; j < g.n; j++)
                if (node_ok(&g, j)) {
                    chi = node_key(&g, j);
                    break;
                }
            visit(r, t, d->child, level + 1, clo, chi, pgno, i);
        }
    } else {
        t->leaf++;
        leaf_entries(&g);
    }
    page_done(&g);
    r->depth--;
}

/* Checks the overflow run of leaf node i; on success *val is the value. */
static bool overflow(page *g, int i, const uint8_t **val) {
    run *r = g->r;
    ost__pc *pc = r->pc;
    node *d = &g->nd[i];
    uint64_t ov = ost__rd_le64(d->data);
    if (r->live) live(r, g->fileoff + (uint64_t)(d->data - g->pg), 8, OST__PC_LIVE_STRUCT);
    if (ov < 2 || ov > r->last_pg || ov >= pc->fpages) {
        nproblem(g, i, "overflow page %llu is %s", (ull)ov,
                 ov < 2 ? "a meta page" : ov > r->last_pg ? "beyond the last page"
                                                          : "beyond the end of the file");
        return false;
    }
    const uint8_t *op = pc->base + ov * pc->psize;
    uint64_t hdr = ost__rd_le64(op);
    uint16_t flags = ost__rd_le16(op + 10);
    uint32_t npages = ost__rd_le32(op + 12);
    if (hdr != ov) {
        nproblem(g, i, "overflow page %llu: the page header says page %llu", (ull)ov, (ull)hdr);
        return false;
    }
    if (flags != P_OVERFLOW) {
        nproblem(g, i, "overflow page %llu: page flags 0x%x (an overflow page has 0x%x)",
                 (ull)ov, flags, P_OVERFLOW);
        return false;
    }
    uint64_t end = ov + npages - 1;
    if (npages == 0 || end > r->last_pg || end >= pc->fpages) {
        nproblem(g, i, "overflow run of %u pages from page %llu %s", npages, (ull)ov,
                 npages == 0 ? "is empty"
                 : end > r->last_pg ? "runs beyond the last page"
                                    : "runs past the end of the file");
        return false;
    }
    if ((uint64_t)d->ds > (uint64_t)npages * pc->psize - PAGEHDRSZ) {
        nproblem(g, i, "a value of %u bytes does not fit its overflow run of %u pages at %llu",
                 d->ds, npages, (ull)ov);
        return false;
    }
    kb lo, hi;
    node_range(g, i, &lo, &hi);
    for (uint64_t p = ov; p <= end; p++) {
        if (bit_get(r->used, p)) {
            nproblem(g, i, "overflow run of %u pages at %llu: page %llu is used elsewhere too",
                     npages, (ull)ov, (ull)p);
            return false;
        }
        bit_set(r->used, p);
        if (r->freed && !g->t->is_free && bit_get(r->freed, p))
            kproblem(r, g->t, p, lo, hi,
                     "page %llu (%s, overflow) is in use and also in the free list", (ull)p,
                     g->t->name);
    }
    g->t->overflow += npages;
    if (r->live) {
        live(r, ov * pc->psize, 8, OST__PC_LIVE_STRUCT);
        live(r, ov * pc->psize + 10, 6, OST__PC_LIVE_STRUCT);
        if (!g->t->is_free) live(r, ov * pc->psize + PAGEHDRSZ, d->ds, OST__PC_LIVE_DATA);
    }
    *val = op + PAGEHDRSZ;
    return true;
}

/* A free-list record: the pages transaction key freed. */
static void free_record(page *g, int i, const uint8_t *v, uint32_t vlen) {
    run *r = g->r;
    node *d = &g->nd[i];
    if (d->ks != 8) {
        nproblem(g, i, "key size %u (a free-list key is a transaction id, 8 bytes)", d->ks);
        return;
    }
    uint64_t txn = ost__rd_le64(d->key);
    if (txn > r->m->txnid) {
        nproblem(g, i, "free-list record of transaction %llu, newer than the snapshot's %llu",
                 (ull)txn, (ull)r->m->txnid);
        return;
    }
    if (vlen < 8) {
        nproblem(g, i, "free-list record of transaction %llu: %u bytes, no count", (ull)txn,
                 vlen);
        return;
    }
    uint64_t count = ost__rd_le64(v);
    if (count > (vlen - 8) / 8) {
        nproblem(g, i,
                 "free-list record of transaction %llu: count %llu does not fit its %u bytes",
                 (ull)txn, (ull)count, vlen);
        return;
    }
    live(r, (uint64_t)(v - r->pc->base), 8 + 8 * count, OST__PC_LIVE_STRUCT);
    uint64_t prev = UINT64_MAX;
    bool unsorted = false;
    for (uint64_t k = 0; k < count; k++) {
        uint64_t p = ost__rd_le64(v + 8 + 8 * k);
        if (p >= prev) unsorted = true;
        prev = p;
        if (p < 2 || p > r->last_pg || p >= r->pc->fpages) {
            nproblem(g, i, "free-list record of transaction %llu lists page %llu, %s", (ull)txn,
                     (ull)p,
                     p < 2 ? "a meta page"
                     : p > r->last_pg ? "beyond the last page"
                                      : "beyond the end of the file");
            continue;
        }
        if (bit_get(r->freed, p)) {
            nproblem(g, i, "free-list record of transaction %llu lists page %llu, already listed",
                     (ull)txn, (ull)p);
            continue;
        }
        bit_set(r->freed, p);
        r->nfree++;
    }
    if (unsorted)
        nproblem(g, i, "free-list record of transaction %llu: page numbers not descending",
                 (ull)txn);
}

/* Delivers one entry to each's callback. */
static void deliver(page *g, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl) {
    run *r = g->r;
    if (r->mode != MODE_EACH || !r->fn || r->stop) return;
    int rc = r->fn(r->fud, k, kl, v, vl, g->pgno);
    if (rc) r->stop = rc;
}

/* A sub-page of duplicates in leaf node i of g. */
static void dup_subpage(page *g, int i) {
    run *r = g->r;
    tree *t = g->t;
    node *d = &g->nd[i];
    page s;
    memset(&s, 0, sizeof s);
    s.r = r;
    s.t = t;
    s.pgno = g->pgno;
    fmt(s.kindbuf, sizeof s.kindbuf, "leaf, node %d's duplicates", i);
    s.kind = s.kindbuf;
    s.pg = d->data;
    s.sz = d->ds;
    s.fileoff = g->fileoff + (uint64_t)(d->data - g->pg);
    s.subpage = true;
    s.cmp = t->dcmp;
    if (d->ds < PAGEHDRSZ) {
        nproblem(g, i, "a sub-page of duplicates of %u bytes, less than a page header", d->ds);
        return;
    }
    uint16_t flags = ost__rd_le16(s.pg + 10) & (uint16_t)~P_DIRTY;
    unsigned want = P_LEAF | P_SUBP | (t->flags & DB_DUPFIXED ? P_LEAF2 : 0);
    if (flags != want) {
        nproblem(g, i, "sub-page flags 0x%x (0x%x expected)", ost__rd_le16(s.pg + 10), want);
        return;
    }
    s.leaf2 = (flags & P_LEAF2) != 0;
    uint16_t pad = ost__rd_le16(s.pg + 8);
    s.ks2 = pad; /* a sub-page says its own key size */
    if (s.leaf2 && (pad == 0 || pad > MAXKEY)) {
        nproblem(g, i, "sub-page key size %u", pad);
        return;
    }
    r->depth++;
    s.nd = level_nodes(r);
    if (!s.nd) {
        r->depth--;
        return;
    }
    kb none = {0};
    s.lo = none;
    s.hi = none;
    if (check_page(&s, pad, ost__rd_le16(s.pg + 12), ost__rd_le16(s.pg + 14))) {
        page_live(&s);
        for (int j = 0; j < s.n && !r->stop; j++) {
            if (!node_ok(&s, j)) continue;
            t->entries++;
            deliver(g, d->key, d->ks, s.nd[j].key, s.nd[j].ks);
        }
    }
    page_done(&s);
    r->depth--;
}

/* A sub-database of duplicates in leaf node i of g. */
static void dup_subdb(page *g, int i) {
    run *r = g->r;
    tree *t = g->t;
    node *d = &g->nd[i];
    tree s;
    memset(&s, 0, sizeof s);
    rd_dbrec(&s.rec, d->data);
    if (r->live) live(r, g->fileoff + (uint64_t)(d->data - g->pg), DBREC_SIZE, OST__PC_LIVE_STRUCT);
    char err[128];
    unsigned allowed = DB_DUPFIXED | DB_INTEGERKEY;
    if (!check_dbrec(&s.rec, r->last_pg, allowed, false, err, sizeof err)) {
        nproblem(g, i, "sub-database of duplicates: %s", err);
        return;
    }
    if (((s.rec.flags & DB_DUPFIXED) != 0) != ((t->flags & DB_DUPFIXED) != 0) ||
        (s.rec.flags & DB_DUPFIXED ? s.rec.pad == 0 || s.rec.pad > MAXKEY : s.rec.pad != 0) ||
        s.rec.depth == 0) {
        nproblem(g, i, "sub-database of duplicates: flags 0x%x, key size %u, depth %u",
                 s.rec.flags, s.rec.pad, s.rec.depth);
        return;
    }
    s.name = t->name;
    s.holder = g->pgno;
    s.is_dup = true;
    s.flags = t->flags;
    s.cmp = t->dcmp;
    s.dcmp = t->dcmp;
    s.dupkey = d->key;
    s.dupklen = d->ks;
    walk_tree(r, &s);
    t->entries += s.entries;
    t->problems += s.problems;
    r->st.branch += s.branch;
    r->st.leaf += s.leaf;
    r->st.overflow += s.overflow;
}

/* A named database record in the main database's leaf node i. */
static void named_record(page *g, int i) {
    run *r = g->r;
    node *d = &g->nd[i];
    if (r->live) live(r, g->fileoff + (uint64_t)(d->data - g->pg), DBREC_SIZE, OST__PC_LIVE_STRUCT);
    if (r->nnamed == r->capnamed) {
        size_t cap = r->capnamed ? 2 * r->capnamed : 16;
        named *nn = ost__mem_realloc(r->named, cap * sizeof *nn);
        if (!nn) {
            r->oom = true;
            return;
        }
        r->named = nn;
        r->capnamed = cap;
    }
    named *nd = &r->named[r->nnamed++];
    memset(nd, 0, sizeof *nd);
    nd->name = d->key;
    nd->len = d->ks;
    nd->holder = g->pgno;
    rd_dbrec(&nd->rec, d->data);
    char err[128], name[200];
    nd->ok = check_dbrec(&nd->rec, r->last_pg, DB_PERSISTENT, true, err, sizeof err);
    if (!nd->ok) {
        /* the whole named database is lost: it is the db named */
        printable(name, sizeof name, d->key, d->ks);
        kb none = {0};
        g->t->problems++;
        dproblem(r, name, g->pgno, true, none, none,
                 "page %llu (main, leaf): node %d: the record of database %s: %s", (ull)g->pgno,
                 i, name, err);
    }
}

/* The entries of a checked leaf page (or LEAF2 page). */
static void leaf_entries(page *g) {
    run *r = g->r;
    tree *t = g->t;
    for (int i = 0; i < g->n && !r->stop && !r->oom; i++) {
        node *d = &g->nd[i];
        if (d->bad || d->order) continue;
        if (g->leaf2 || t->is_dup) {
            t->entries++;
            deliver(g, t->dupkey, t->dupklen, d->key, d->ks);
            continue;
        }
        const uint8_t *v = d->data;
        if (d->flags & F_BIGDATA) {
            if (!overflow(g, i, &v)) continue;
        } else if (r->live && !(d->flags & (F_SUBDATA | F_DUPDATA)) && !t->is_free) {
            live(r, g->fileoff + (uint64_t)(d->data - g->pg), d->ds, OST__PC_LIVE_DATA);
        }
        if (t->is_free) {
            t->entries++;
            if (r->freed) free_record(g, i, v, d->ds);
            continue;
        }
        if (d->flags & F_DUPDATA) {
            if (d->flags & F_SUBDATA)
                dup_subdb(g, i);
            else
                dup_subpage(g, i);
            continue;
        }
        t->entries++;
        if (t->is_main && (d->flags & F_SUBDATA)) named_record(g, i);
        deliver(g, d->key, d->ks, v, d->ds);
    }
}

/* Walks tree t from its root; compares the counts when nothing was wrong. */
static void walk_tree(run *r, tree *t) {
    if (t->rec.depth == 0) return;
    kb none = {0};
    uint64_t before = t->problems;
    visit(r, t, t->rec.root, 1, none, none, t->holder, -1);
    if (r->stop || r->oom || t->problems != before || r->mode == MODE_EACH) return;
    const dbrec *d = &t->rec;
    if (d->branch != t->branch || d->leaf != t->leaf || d->overflow != t->overflow ||
        d->entries != t->entries) {
        kproblem(r, t, t->holder, none, none,
                 "%s%s: the record says %llu entries in %llu branch, %llu leaf and %llu overflow "
                 "pages; the walk found %llu entries in %llu, %llu and %llu",
                 t->name, t->is_dup ? " (a key's duplicates)" : "", (ull)d->entries,
                 (ull)d->branch, (ull)d->leaf, (ull)d->overflow, (ull)t->entries, (ull)t->branch,
                 (ull)t->leaf, (ull)t->overflow);
    }
}

/* ---- runs ---------------------------------------------------------------- */

static int run_begin(ost__pc *pc, run *r, int mode) {
    memset(r, 0, sizeof *r);
    r->pc = pc;
    r->mode = mode;
    if (pc->cur < 0) return OST_ECORRUPT;
    r->m = &pc->m[pc->cur];
    pc->fpages = pc->size / pc->psize;
    r->last_pg = r->m->last_pg;
    r->lim = r->last_pg + 1 < pc->fpages ? r->last_pg + 1 : pc->fpages;
    size_t words = (size_t)((r->lim + 63) / 64) + 1;
    r->used = ost__mem_alloc(words * sizeof *r->used);
    if (!r->used) return OST_ENOMEM;
    memset(r->used, 0, words * sizeof *r->used);
    if (mode != MODE_EACH) {
        r->freed = ost__mem_alloc(words * sizeof *r->freed);
        if (!r->freed) return OST_ENOMEM;
        memset(r->freed, 0, words * sizeof *r->freed);
    }
    bit_set(r->used, 0);
    bit_set(r->used, 1);
    r->st.psize = pc->psize;
    r->st.pages = pc->fpages;
    r->st.txnid = r->m->txnid;
    r->st.last_pg = r->last_pg;
    return 0;
}

static void run_end(run *r) {
    ost__mem_free(r->used);
    ost__mem_free(r->freed);
    ost__mem_free(r->named);
}

static void init_tree(tree *t, const char *name, const dbrec *rec, uint64_t holder) {
    memset(t, 0, sizeof *t);
    t->name = name;
    t->rec = *rec;
    t->holder = holder;
    t->flags = rec->flags;
    t->cmp = key_order(rec->flags);
    t->dcmp = dup_order(rec->flags);
}

static dbslot *add_slot(ost__pc *pc, const char *name, const dbrec *rec, bool *oom) {
    if (pc->ndbs == pc->capdbs) {
        size_t cap = pc->capdbs ? 2 * pc->capdbs : 16;
        dbslot *n = ost__mem_realloc(pc->dbs, cap * sizeof *n);
        if (!n) {
            *oom = true;
            return NULL;
        }
        pc->dbs = n;
        pc->capdbs = cap;
    }
    size_t len = strlen(name);
    char *copy = ost__mem_alloc(len + 1);
    if (!copy) {
        *oom = true;
        return NULL;
    }
    memcpy(copy, name, len + 1);
    dbslot *s = &pc->dbs[pc->ndbs++];
    memset(s, 0, sizeof *s);
    s->name = copy;
    s->st.name = copy;
    s->st.flags = rec->flags;
    s->st.depth = rec->depth;
    s->st.rec_branch = rec->branch;
    s->st.rec_leaf = rec->leaf;
    s->st.rec_overflow = rec->overflow;
    s->st.rec_entries = rec->entries;
    return s;
}

static void slot_fill(dbslot *s, const tree *t) {
    if (!s) return;
    s->st.branch = t->branch;
    s->st.leaf = t->leaf;
    s->st.overflow = t->overflow;
    s->st.entries = t->entries;
    s->st.problems = t->problems;
}

static void add_totals(run *r, const tree *t, bool entries) {
    r->st.branch += t->branch;
    r->st.leaf += t->leaf;
    r->st.overflow += t->overflow;
    if (entries) r->st.entries += t->entries;
}

/* The meta pages' problems, as walk reports. */
static void report_metas(run *r) {
    ost__pc *pc = r->pc;
    for (int i = 0; i < 2; i++) {
        const meta *m = &pc->m[i];
        if (m->sane) continue;
        if (i == pc->cur && m->err_db) continue; /* walk_all names the database */
        problem(r, "meta page", (uint64_t)i, "%s: meta page %d%s: %s", pc->file, i,
                i == pc->cur ? "" : " (not the one walked)", m->err);
    }
    /* LMDB writes the two meta pages in turn, transaction N into page
     * N % 2, so their ids are one apart (or both 0 before the first
     * commit): other ids mean one of them was damaged, and the one the
     * higher id makes current may be an older commit */
    const meta *a = &pc->m[0], *b = &pc->m[1];
    uint64_t hi = a->txnid > b->txnid ? a->txnid : b->txnid;
    uint64_t lo = a->txnid > b->txnid ? b->txnid : a->txnid;
    if (a->sane && b->sane && hi - lo != 1 && hi)
        problem(r, "meta page", (uint64_t)(a->txnid > b->txnid ? 0 : 1),
                "%s: meta pages 0 and 1 have transaction ids %llu and %llu: LMDB writes them "
                "one commit apart, so one of them is damaged",
                pc->file, (ull)a->txnid, (ull)b->txnid);
    if (pc->size % pc->psize)
        problem(r, NULL, UINT64_MAX, "%s: %llu bytes, not a whole number of %u-byte pages",
                pc->file, (ull)pc->size, pc->psize);
}

/* The whole snapshot: free list, main database, named databases, then the
 * pages in neither. */
static void walk_all(run *r) {
    ost__pc *pc = r->pc;
    const meta *m = r->m;
    free_dbs(pc);
    report_metas(r);
    bool oom = false;
    char name[200];

    tree ft;
    init_tree(&ft, "free list", &m->db[0], (uint64_t)pc->cur);
    ft.is_free = true;
    ft.cmp = C_INT;
    ft.flags = 0;
    char err[128];
    dbslot *fs = add_slot(pc, "free list", &m->db[0], &oom);
    if (check_dbrec(&m->db[0], r->last_pg, 0xffffu, false, err, sizeof err))
        walk_tree(r, &ft);
    else
        problem(r, "free list", (uint64_t)pc->cur, "%s: meta page %d: free list: %s", pc->file,
                pc->cur, err);
    slot_fill(fs, &ft);
    add_totals(r, &ft, false);
    /* The free list's own pages must not be listed free. */
    for (uint64_t p = 2; p < r->lim; p++)
        if (bit_get(r->used, p) && bit_get(r->freed, p)) {
            kb none = {0};
            kproblem(r, &ft, p, none, none,
                     "page %llu (free list) is a page of the free list and also listed free",
                     (ull)p);
        }

    tree mt;
    init_tree(&mt, "main", &m->db[1], (uint64_t)pc->cur);
    mt.is_main = true;
    dbslot *ms = add_slot(pc, "main", &m->db[1], &oom);
    if (check_dbrec(&m->db[1], r->last_pg, DB_PERSISTENT, true, err, sizeof err))
        walk_tree(r, &mt);
    else
        problem(r, "main", (uint64_t)pc->cur, "%s: meta page %d: main database: %s", pc->file,
                pc->cur, err);
    slot_fill(ms, &mt);
    add_totals(r, &mt, true);
    /* named databases' records are entries of main, not data */
    r->st.entries -= r->nnamed;

    for (size_t i = 0; i < r->nnamed && !r->oom; i++) {
        named *nd = &r->named[i];
        printable(name, sizeof name, nd->name, nd->len);
        tree t;
        dbslot *s = add_slot(pc, name, &nd->rec, &oom);
        init_tree(&t, s ? s->name : "?", &nd->rec, nd->holder);
        if (nd->ok) walk_tree(r, &t);
        slot_fill(s, &t);
        add_totals(r, &t, true);
    }
    if (oom) r->oom = true;
    if (r->oom) return;

    /* Page accounting: every page from 2 to the last one in a tree or the
     * free list. Pages used twice were reported as they were reached. */
    uint64_t run_start = 0, n = 0;
    for (uint64_t p = 2; p <= r->lim; p++) {
        bool leaked = p < r->lim && !bit_get(r->used, p) && !bit_get(r->freed, p);
        if (leaked) {
            if (!n) run_start = p;
            n++;
            continue;
        }
        if (!n) continue;
        if (n == 1)
            problem(r, NULL, run_start,
                    "page %llu is neither in use nor in the free list (leaked, or its tree's "
                    "pointer is damaged)",
                    (ull)run_start);
        else
            problem(r, NULL, run_start,
                    "pages %llu to %llu (%llu pages) are neither in use nor in the free list "
                    "(leaked, or their tree's pointer is damaged)",
                    (ull)run_start, (ull)(run_start + n - 1), (ull)n);
        n = 0;
    }
    r->st.free = r->nfree;
}

static int run_result(run *r, ost__pc_stats *stats) {
    if (r->more && r->report) {
        ost__pc_problem p;
        memset(&p, 0, sizeof p);
        p.pgno = UINT64_MAX;
        fmt(p.msg, sizeof p.msg, "... %llu more problems", (ull)r->more);
        r->report(r->ud, &p);
    }
    if (stats) *stats = r->st;
    if (r->oom) return OST_ENOMEM;
    return r->damaged ? OST_ECORRUPT : 0;
}

/* No meta page to walk from: report why. */
static int no_meta(ost__pc *pc, ost__pc_report report, void *ud) {
    run r;
    memset(&r, 0, sizeof r);
    r.pc = pc;
    r.report = report;
    r.ud = ud;
    for (int i = 0; i < 2; i++)
        problem(&r, "meta page", (uint64_t)i, "%s: meta page %d: %s", pc->file, i,
                pc->m[i].err[0] ? pc->m[i].err : "not usable");
    return OST_ECORRUPT;
}

int ost__pc_walk(ost__pc *pc, ost__pc_report report, void *ud, ost__pc_stats *stats) {
    if (stats) memset(stats, 0, sizeof *stats);
    if (!pc) return OST_EINVAL;
    if (pc->cur < 0) return no_meta(pc, report, ud);
    run r;
    int rc = run_begin(pc, &r, MODE_WALK);
    if (rc) {
        run_end(&r);
        return rc;
    }
    r.report = report;
    r.ud = ud;
    walk_all(&r);
    rc = run_result(&r, stats);
    run_end(&r);
    return rc;
}

int ost__pc_db(ost__pc *pc, size_t i, ost__pc_dbstat *out) {
    if (!pc || !out) return OST_EINVAL;
    if (i >= pc->ndbs) return OST_ENOTFOUND;
    *out = pc->dbs[i].st;
    return 0;
}

int ost__pc_live(ost__pc *pc, void (*fn)(void *ud, uint64_t off, uint64_t len, int kind),
                 void *ud) {
    if (!pc || !fn) return OST_EINVAL;
    if (pc->cur < 0) return OST_ECORRUPT;
    run r;
    int rc = run_begin(pc, &r, MODE_LIVE);
    if (rc) {
        run_end(&r);
        return rc;
    }
    r.live = fn;
    r.lud = ud;
    /* The meta pages: every field but the fixed address (used only with
     * MDB_FIXEDMAP) of both (liblmdb checks both at open, and the meta
     * check every field). */
    for (int i = 0; i < 2; i++) {
        const meta *m = &pc->m[i];
        if (!m->found) continue;
        uint64_t o = m->off;
        fn(ud, o, 8, OST__PC_LIVE_META); /* page number */
        fn(ud, o + 10, 2, OST__PC_LIVE_META);
        fn(ud, o + OFF_MAGIC, 8, OST__PC_LIVE_META);
        if (m->db[0].flags & ENV_FIXEDMAP) fn(ud, o + OFF_ADDRESS, 8, OST__PC_LIVE_META);
        fn(ud, o + OFF_MAPSIZE, META_END - OFF_MAPSIZE, OST__PC_LIVE_META);
    }
    walk_all(&r);
    rc = run_result(&r, NULL);
    run_end(&r);
    return rc;
}

int ost__pc_each(ost__pc *pc, const char *db, ost__pc_entry_fn fn, ost__pc_report report,
                 void *ud) {
    if (!pc || !fn) return OST_EINVAL;
    if (pc->cur < 0) return no_meta(pc, report, ud);
    run r;
    int rc = run_begin(pc, &r, MODE_EACH);
    if (rc) {
        run_end(&r);
        return rc;
    }
    r.report = report;
    r.ud = ud;
    const meta *m = r.m;
    char err[128];
    tree mt;
    init_tree(&mt, "main", &m->db[1], (uint64_t)pc->cur);
    mt.is_main = true;
    if (!check_dbrec(&m->db[1], r.last_pg, DB_PERSISTENT, true, err, sizeof err)) {
        problem(&r, "meta page", (uint64_t)pc->cur, "%s: meta page %d: main database: %s",
                pc->file, pc->cur, err);
    } else {
        if (!db) {
            r.fn = fn;
            r.fud = ud;
        }
        walk_tree(&r, &mt);
    }
    if (db && !r.oom && !r.stop) {
        size_t len = strlen(db);
        named *found = NULL;
        for (size_t i = 0; i < r.nnamed; i++)
            if (r.named[i].len == len && !memcmp(r.named[i].name, db, len)) found = &r.named[i];
        if (!found) {
            rc = r.damaged ? OST_ECORRUPT : OST_ENOTFOUND;
            run_end(&r);
            return rc;
        }
        char name[200];
        printable(name, sizeof name, found->name, found->len);
        if (found->ok) {
            tree t;
            init_tree(&t, name, &found->rec, found->holder);
            r.fn = fn;
            r.fud = ud;
            walk_tree(&r, &t);
        }
    }
    if (r.stop) {
        rc = r.stop;
        run_end(&r);
        return rc;
    }
    rc = run_result(&r, NULL);
    run_end(&r);
    return rc;
}

/* ---- scan ------------------------------------------------------------------ */

int ost__pc_scan(ost__pc *pc, ost__pc_entry_fn fn, void *ud) {
    if (!pc || !fn) return OST_EINVAL;
    unsigned saved = pc->psize;
    unsigned ps = saved ? saved : guess_psize(pc);
    if (!ps || ps > pc->scratch_ps) return OST_ECORRUPT;
    pc->psize = ps; /* read_nodes reads it */
    run r;
    memset(&r, 0, sizeof r);
    r.pc = pc;
    r.mode = MODE_EACH;
    pc->fpages = pc->size / ps;
    r.last_pg = pc->fpages - 1;
    tree t;
    memset(&t, 0, sizeof t);
    t.name = "?";
    t.is_main = true; /* every node flag is allowed */
    t.flags = DB_DUPSORT;
    node *nd = level_nodes(&r);
    int rc = nd ? 0 : OST_ENOMEM;
    for (uint64_t p = 2; nd && p < pc->fpages && !rc; p++) {
        const uint8_t *pg = pc->base + p * ps;
        if (ost__rd_le64(pg) != p || ost__rd_le16(pg + 10) != P_LEAF) continue;
        uint32_t lower = ost__rd_le16(pg + 12), upper = ost__rd_le16(pg + 14);
        if (lower < PAGEHDRSZ || (lower & 1) || lower > upper || upper > ps) continue;
        page g;
        memset(&g, 0, sizeof g);
        g.r = &r;
        g.t = &t;
        g.pgno = p;
        g.kind = "leaf";
        g.pg = pg;
        g.sz = ps;
        g.fileoff = p * ps;
        g.nd = nd;
        g.n = (int)((lower - PAGEHDRSZ) / 2);
        read_nodes(&g, lower, upper);
        check_tiling(&g, upper);
        for (int i = 0; i < g.n && !rc; i++) {
            node *d = &g.nd[i];
            if (d->bad || (d->flags & (F_SUBDATA | F_DUPDATA))) continue;
            const uint8_t *v = d->data;
            if (d->flags & F_BIGDATA) {
                uint64_t ov = ost__rd_le64(d->data);
                if (ov < 2 || ov >= pc->fpages) continue;
                const uint8_t *op = pc->base + ov * ps;
                uint32_t np = ost__rd_le32(op + 12);
                if (ost__rd_le64(op) != ov || ost__rd_le16(op + 10) != P_OVERFLOW || np == 0 ||
                    np > pc->fpages - ov || (uint64_t)d->ds > (uint64_t)np * ps - PAGEHDRSZ)
                    continue;
                v = op + PAGEHDRSZ;
            }
            rc = fn(ud, d->key, d->ks, v, d->ds, p);
        }
    }
    pc->psize = saved;
    return rc;
}

int ost__pc_meta_txnid(ost__pc *pc, int which, uint64_t *txnid) {
    if (!pc || which < 0 || which > 1 || !txnid) return OST_EINVAL;
    if (!pc->m[which].usable) return OST_ECORRUPT;
    *txnid = pc->m[which].txnid;
    return 0;
}

int ost__pc_raw(ost__pc *pc, const uint8_t **base, uint64_t *size, unsigned *psize) {
    if (!pc || !base || !size || !psize) return OST_EINVAL;
    *base = pc->base;
    *size = pc->size;
    *psize = pc->psize;
    return pc->psize ? 0 : OST_ECORRUPT;
}
