/* The map of a pristine store that tests/damage/damage_test.py damages:
 * where in data.mdb each record and map entry lies, which bytes the
 * current snapshot depends on, and what every page is. The damage test
 * uses it to aim its changes and to tell, for each changed byte, whose
 * bytes it changed (a record's key or value, a map entry's, a page
 * header, unused space), so it can say what each command must still do.
 *
 * Usage: damage_map STORE_DIR. The file is read into memory and opened
 * with ost__pc_open_mem (store/lmdb/pagecheck.h), so every key and value
 * pointer ost__pc_each gives lies in that buffer and its offset is a file
 * offset; the program checks that each does and exits 1 if one does not
 * (or if the store is damaged: the map is of a pristine store only).
 *
 * Output, one item a line, numbers decimal, offsets and lengths in bytes
 * from the start of data.mdb:
 *
 *   psize PSIZE                  the page size
 *   pages N                      whole pages in the file
 *   filesize BYTES
 *   meta CUR                     the meta page liblmdb uses (0 or 1)
 *   page PGNO KIND DB            every page: KIND meta, branch, leaf,
 *                                overflow (each page of a run), or unused
 *                                (not in the snapshot's trees: free pages
 *                                and pages past the last one in use); DB
 *                                the database whose tree holds it: free
 *                                (the free list), main, or a named one
 *                                (records, mapents, ...), "-" for none
 *   rec OID OFF LEN KOFF KLEN NOFF PGNO
 *                                a record of "records": its value at
 *                                [OFF, OFF+LEN) (in the overflow run for a
 *                                big value), its key at [KOFF, KOFF+KLEN),
 *                                its 8-byte node header at NOFF, on leaf
 *                                page PGNO (a big value's node holds the
 *                                run's page number right after the key)
 *   ent MAPOID KEYHEX OFF LEN KOFF KLEN NOFF PGNO
 *                                a map entry of "mapents" (KEYHEX the
 *                                encoded key after the map's oid, "-" when
 *                                empty), fields as for rec
 *   kv DB KEYHEX OFF LEN KOFF KLEN NOFF PGNO
 *                                an entry of another named database (meta,
 *                                classes, txlog) or of main (the named
 *                                databases' records)
 *   live OFF LEN KIND            bytes the snapshot depends on, from
 *                                ost__pc_live, adjacent ranges of a kind
 *                                merged: KIND meta, struct, key or data
 *
 * The page kinds and databases come from this program's own walk of the
 * B-trees (a pristine file is trusted, but every read is bounds-checked
 * all the same).
 *
 * damage_map --walk STORE_DIR opens a damaged copy the same way and runs
 * ost__pc_meta_check and ost__pc_walk on it, printing "problem MESSAGE"
 * for the first few problems and "problems N" last; exit 1 when it found
 * any. The damage test runs it when ostore check passes on a copy with
 * live bytes changed, to say whether the page walk sees the damage. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../store/lmdb/pagecheck.h"
#include "ostore.h"

static const uint8_t *buf;
static size_t buflen;

static void die(const char *what) {
    fprintf(stderr, "damage_map: %s\n", what);
    exit(1);
}

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const uint8_t *p) { return rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* The offset of [p, p+n) in the file, which it must lie in. */
static uint64_t off_of(const uint8_t *p, size_t n, const char *what) {
    if (p < buf || (size_t)(p - buf) > buflen || n > buflen - (size_t)(p - buf)) {
        fprintf(stderr, "damage_map: %s: pointer %p (+%zu) is outside the file buffer\n", what,
                (const void *)p, n);
        exit(1);
    }
    return (uint64_t)(p - buf);
}

static void hex(const uint8_t *p, size_t n) {
    if (!n) fputc('-', stdout);
    for (size_t i = 0; i < n; i++) printf("%02x", p[i]);
}

/* ---- entries: rec, ent, kv ----------------------------------------------- */

typedef struct {
    const char *db; /* NULL: main */
    uint64_t count;
} each_ctx;

static int on_entry(void *ud, const uint8_t *key, size_t klen, const uint8_t *val, size_t vlen,
                    uint64_t pgno) {
    each_ctx *c = ud;
    uint64_t koff = off_of(key, klen, "key");
    uint64_t voff = off_of(val, vlen, "value");
    if (koff < 8) die("a key without room for its node header");
    uint64_t noff = koff - 8;
    c->count++;
    if (c->db && !strcmp(c->db, "records")) {
        if (klen != 8) die("a records key that is not 8 bytes");
        uint64_t oid = 0;
        for (int i = 0; i < 8; i++) oid = oid << 8 | key[i];
        printf("rec %llu %llu %zu %llu %zu %llu %llu\n", (unsigned long long)oid,
               (unsigned long long)voff, vlen, (unsigned long long)koff, klen,
               (unsigned long long)noff, (unsigned long long)pgno);
    } else if (c->db && !strcmp(c->db, "mapents")) {
        if (klen < 8) die("a mapents key shorter than 8 bytes");
        uint64_t oid = 0;
        for (int i = 0; i < 8; i++) oid = oid << 8 | key[i];
        printf("ent %llu ", (unsigned long long)oid);
        hex(key + 8, klen - 8);
        printf(" %llu %zu %llu %zu %llu %llu\n", (unsigned long long)voff, vlen,
               (unsigned long long)koff, klen, (unsigned long long)noff,
               (unsigned long long)pgno);
    } else {
        printf("kv %s ", c->db ? c->db : "main");
        hex(key, klen);
        printf(" %llu %zu %llu %zu %llu %llu\n", (unsigned long long)voff, vlen,
               (unsigned long long)koff, klen, (unsigned long long)noff,
               (unsigned long long)pgno);
    }
    return 0;
}

static void on_problem(void *ud, const ost__pc_problem *p) {
    (void)ud;
    fprintf(stderr, "damage_map: the store is damaged: %s\n", p->msg);
    exit(1);
}

static void entries_of(ost__pc *pc, const char *db) {
    each_ctx c = {db, 0};
    int rc = ost__pc_each(pc, db, on_entry, on_problem, &c);
    if (rc == OST_ENOTFOUND && db && strcmp(db, "records")) return; /* an optional database */
    if (rc) {
        fprintf(stderr, "damage_map: walking %s: %s\n", db ? db : "main", ost_strerror(rc));
        exit(1);
    }
}

/* ---- live ranges ------------------------------------------------------------ */

typedef struct {
    uint64_t off, len;
    int kind;
} range;

static range *ranges;
static size_t nranges, capranges;

static void on_live(void *ud, uint64_t off, uint64_t len, int kind) {
    (void)ud;
    if (off > buflen || len > buflen - off) die("a live range outside the file");
    if (nranges == capranges) {
        capranges = capranges ? 2 * capranges : 4096;
        ranges = realloc(ranges, capranges * sizeof *ranges);
        if (!ranges) die("out of memory");
    }
    ranges[nranges++] = (range){off, len, kind};
}

static int by_off(const void *a, const void *b) {
    const range *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static void print_live(void) {
    static const char *const kinds[] = {"meta", "struct", "key", "data"};
    qsort(ranges, nranges, sizeof *ranges, by_off);
    size_t i = 0;
    while (i < nranges) {
        range r = ranges[i++];
        while (i < nranges && ranges[i].kind == r.kind && ranges[i].off <= r.off + r.len) {
            uint64_t end = ranges[i].off + ranges[i].len;
            if (end > r.off + r.len) r.len = end - r.off;
            i++;
        }
        if (r.kind < 0 || r.kind > 3) die("a live range of an unknown kind");
        printf("live %llu %llu %s\n", (unsigned long long)r.off, (unsigned long long)r.len,
               kinds[r.kind]);
    }
}

/* ---- page kinds: our own walk of the trees ----------------------------------- */

enum { PK_UNUSED, PK_META, PK_BRANCH, PK_LEAF, PK_OVERFLOW };
static const char *const pk_names[] = {"unused", "meta", "branch", "leaf", "overflow"};

static unsigned psize;
static uint64_t npages;
static uint8_t *pkind;
static char **pdb;     /* database name per page, NULL for none */
static char *dbnames[64];
static int ndbnames;

static const uint8_t *page_at(uint64_t pgno) {
    if (pgno >= npages) die("a page number past the end of the file");
    return buf + pgno * psize;
}

static void claim(uint64_t pgno, int kind, char *db) {
    if (pgno >= npages) die("a page number past the end of the file");
    if (pkind[pgno] != PK_UNUSED) die("a page reached twice");
    pkind[pgno] = (uint8_t)kind;
    pdb[pgno] = db;
}

static void walk(uint64_t pgno, char *db, int depth, bool is_main);

/* A named database's record (48 bytes) in the main database: walk its tree. */
static void walk_dbrec(const uint8_t *rec, char *db, int depth) {
    uint64_t root = rd64(rec + 40);
    if (root != UINT64_MAX) walk(root, db, depth + 1, false);
}

static void walk(uint64_t pgno, char *db, int depth, bool is_main) {
    if (depth > 64) die("trees deeper than 64 levels");
    const uint8_t *pg = page_at(pgno);
    uint16_t flags = rd16(pg + 10), lower = rd16(pg + 12);
    bool branch = flags & 0x01;
    if (!(flags & 0x03) || (flags & 0x20)) die("an unexpected page type in a tree");
    claim(pgno, branch ? PK_BRANCH : PK_LEAF, db);
    if (lower < 16 || lower > psize) die("a page's mp_lower out of range");
    unsigned n = (lower - 16u) / 2u;
    for (unsigned i = 0; i < n; i++) {
        uint16_t no = rd16(pg + 16 + 2 * i);
        if (no + 8u > psize) die("a node past its page");
        const uint8_t *nd = pg + no;
        uint16_t ks = rd16(nd + 6);
        if (no + 8u + ks > psize) die("a key past its page");
        if (branch) {
            uint64_t child = rd16(nd) | (uint64_t)rd16(nd + 2) << 16 | (uint64_t)rd16(nd + 4) << 32;
            walk(child, db, depth + 1, is_main);
            continue;
        }
        uint32_t ds = rd16(nd) | (uint32_t)rd16(nd + 2) << 16;
        uint16_t nf = rd16(nd + 4);
        const uint8_t *data = nd + 8 + ks;
        if (nf & 0x01) { /* F_BIGDATA: an overflow run */
            if (no + 16u + ks > psize) die("an overflow page number past its page");
            uint64_t ov = rd64(data);
            uint32_t run = rd32(page_at(ov) + 12);
            for (uint32_t j = 0; j < run; j++) claim(ov + j, PK_OVERFLOW, db);
            continue;
        }
        if (no + 8u + ks + ds > psize) die("inline data past its page");
        if (nf & 0x02) { /* F_SUBDATA: a named database, or a duplicates sub-database */
            if (ds != 48) die("a database record that is not 48 bytes");
            char *name = db;
            if (is_main && !(nf & 0x04)) {
                if (ndbnames == 64) die("too many databases");
                name = malloc(ks + 1u);
                if (!name) die("out of memory");
                memcpy(name, nd + 8, ks);
                name[ks] = 0;
                dbnames[ndbnames++] = name;
            }
            walk_dbrec(data, name, depth);
        }
    }
}

static void print_pages(int cur) {
    pkind = calloc(npages, 1);
    pdb = calloc(npages, sizeof *pdb);
    if (!pkind || !pdb) die("out of memory");
    static char free_name[] = "free", main_name[] = "main";
    pkind[0] = pkind[1] = PK_META;
    const uint8_t *m = buf + (uint64_t)cur * psize;
    uint64_t free_root = rd64(m + 40 + 40), main_root = rd64(m + 88 + 40);
    if (free_root != UINT64_MAX) walk(free_root, free_name, 0, false);
    if (main_root != UINT64_MAX) walk(main_root, main_name, 0, true);
    for (uint64_t p = 0; p < npages; p++)
        printf("page %llu %s %s\n", (unsigned long long)p, pk_names[pkind[p]],
               pdb[p] ? pdb[p] : "-");
}

/* Reads dir/data.mdb into buf (at least one byte allocated). */
static uint8_t *read_file(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/data.mdb", dir);
    FILE *f = fopen(path, "rb");
    if (!f) die("cannot open data.mdb");
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    if (sz < 0) die("cannot size data.mdb");
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc((size_t)sz + 1);
    if (!b || fread(b, 1, (size_t)sz, f) != (size_t)sz) die("cannot read data.mdb");
    fclose(f);
    buf = b;
    buflen = (size_t)sz;
    return b;
}

/* ---- --walk: what the page walk says of a damaged copy ---------------------- */

static unsigned long nproblems;
static char last_printed[512];

static void print_problem(void *ud, const ost__pc_problem *p) {
    (void)ud;
    if (nproblems++ < 3 && strcmp(p->msg, last_printed)) printf("problem %s\n", p->msg);
    snprintf(last_printed, sizeof last_printed, "%s", p->msg);
}

static int walk_mode(const char *dir) {
    uint8_t *b = read_file(dir);
    ost__pc *pc;
    char msg[512];
    int rc = ost__pc_open_mem(buf, buflen, &pc, msg, sizeof msg);
    if (rc) {
        printf("problem the open fails: %s\nproblems 1\n", msg);
        free(b);
        return 1;
    }
    if (ost__pc_meta_check(pc, msg, sizeof msg)) {
        printf("problem %s\n", msg);
        snprintf(last_printed, sizeof last_printed, "%s", msg);
        nproblems++;
    }
    rc = ost__pc_walk(pc, print_problem, NULL, NULL);
    if (rc && !nproblems) printf("problem the walk fails: %s\n", ost_strerror(rc));
    if (rc && !nproblems) nproblems++;
    printf("problems %lu\n", nproblems);
    ost__pc_close(pc);
    free(b);
    return nproblems ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--walk")) return walk_mode(argv[2]);
    if (argc != 2) {
        fprintf(stderr, "usage: damage_map [--walk] STORE_DIR\n");
        return 2;
    }
    uint8_t *b = read_file(argv[1]);
    if (!buflen) die("an empty data.mdb");

    ost__pc *pc;
    char msg[512];
    if (ost__pc_open_mem(buf, buflen, &pc, msg, sizeof msg)) die(msg);
    if (ost__pc_meta_check(pc, msg, sizeof msg)) die(msg);
    ost__pc_stats st;
    int rc = ost__pc_walk(pc, on_problem, NULL, &st);
    if (rc) die("the pristine store does not pass ost__pc_walk");
    psize = st.psize;
    npages = buflen / psize;
    /* liblmdb's choice: the higher transaction id, meta page 0 on a tie. */
    int cur = rd64(buf + psize + 144) > rd64(buf + 144) ? 1 : 0;
    if (rd64(buf + (uint64_t)cur * psize + 144) != st.txnid) die("meta page choice disagrees");
    printf("psize %u\npages %llu\nfilesize %zu\nmeta %d\n", psize, (unsigned long long)npages,
           buflen, cur);
    print_pages(cur);

    entries_of(pc, "records");
    entries_of(pc, "mapents");
    entries_of(pc, NULL);
    for (int i = 0; i < ndbnames; i++)
        if (strcmp(dbnames[i], "records") && strcmp(dbnames[i], "mapents"))
            entries_of(pc, dbnames[i]);

    rc = ost__pc_live(pc, on_live, NULL);
    if (rc) die("ost__pc_live failed on the pristine store");
    print_live();
    ost__pc_close(pc);
    free(ranges);
    free(b);
    if (fflush(stdout) || ferror(stdout)) die("cannot write the output");
    return 0;
}
