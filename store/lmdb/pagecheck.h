/* A bounds-checked reader of LMDB's data file (data.mdb), independent of
 * liblmdb, for checking and salvaging damaged stores. Internal: not API.
 *
 * liblmdb trusts its file: a damaged data.mdb makes it divide by zero, fail
 * an assertion, fault or overflow the heap. This module reads the same
 * format (LMDB 0.9.x, data version 1, the 64-bit layout of x86-64 and
 * arm64 Linux) without ever calling liblmdb, never reads outside the file,
 * always ends (every page is visited at most once per call), and uses
 * memory bounded by the file's page count (bitmaps of one bit per page)
 * and its page size. store/lmdb/pagecheck.c opens with the format facts it
 * relies on and the list of what it checks.
 *
 * Caveats:
 * 1. The file is mapped read-only (MAP_SHARED) for the handle's life. Run
 *    the checks on a file no writer is changing: LMDB never shrinks the
 *    file, but pages a writer rewrites under a walk look damaged, and a
 *    file cut short by someone else after the open faults (SIGBUS).
 * 2. A handle is not thread-safe: one call at a time. Handles are
 *    independent.
 * 3. Pointers given to callbacks (keys, values, problems' keys) point into
 *    the mapping or the handle and are valid only during the callback.
 * 4. After fork, only the process that opened a handle may use it.
 *
 * Results: 0, or a negative OST_E* code: OST_ECORRUPT for damage,
 * OST_ENOTFOUND for a missing file or database, OST_EIO for a file that
 * cannot be read, OST_ENOMEM, OST_EINVAL for bad arguments. */
#ifndef OST_STORE_PAGECHECK_H
#define OST_STORE_PAGECHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A read-only view of one data.mdb file. */
typedef struct ost__pc ost__pc;

/* One problem found. Everything it points to is valid during the report
 * callback only. */
typedef struct {
    /* The database whose data the problem hides or makes suspect: "meta
     * page", "free list", "main", or a named database ("records",
     * "mapents", ...; non-printable bytes of a name as \xNN); NULL for a
     * problem of the file or of page accounting. */
    const char *db;
    /* The page at fault (for a bad pointer, the page holding it);
     * UINT64_MAX for none. */
    uint64_t pgno;
    /* true when the damage hides the entries of db with keys in [key_lo,
     * key_hi) (bounds from the branch separators above the page, or from
     * the intact neighbours of a damaged node); for "records" these are
     * oids as 8 bytes big-endian. key_lo NULL: from the first key; key_hi
     * NULL: to the last. A bound may be damaged itself (it was read from
     * a page that passed its checks). */
    bool has_keys;
    const uint8_t *key_lo, *key_hi;
    size_t klo_len, khi_len;
    /* One line: "page 1234 (records, leaf): node 3 at offset 4090 runs
     * past the page end". */
    char msg[256];
} ost__pc_problem;

typedef void (*ost__pc_report)(void *ud, const ost__pc_problem *p);

/* Counts of one ost__pc_walk, over every tree of the snapshot walked (the
 * free list, the main database, named databases, sorted-duplicate
 * sub-databases). */
typedef struct {
    uint64_t pages;    /* whole pages in the file */
    uint64_t branch;   /* branch pages walked */
    uint64_t leaf;     /* leaf pages walked */
    uint64_t overflow; /* overflow pages walked (every page of each run) */
    uint64_t free;     /* distinct pages the free list names */
    uint64_t entries;  /* entries of the main and named databases (each duplicate counts) */
    unsigned psize;    /* page size */
    uint64_t txnid;    /* the walked meta page's transaction id */
    uint64_t last_pg;  /* the walked meta page's last page number */
} ost__pc_stats;

/* What one walk found in one database, as ost__pc_db gives it. */
typedef struct {
    const char *name;   /* as ost__pc_problem.db; valid until the next walk, live or close */
    unsigned flags;     /* LMDB's database flags (MDB_DUPSORT ...) as recorded */
    uint64_t depth;     /* as recorded */
    uint64_t branch, leaf, overflow, entries; /* as walked */
    uint64_t rec_branch, rec_leaf, rec_overflow, rec_entries; /* as recorded */
    uint64_t problems;  /* problems reported in this database (capped ones too) */
} ost__pc_dbstat;

/* Opens dir/data.mdb read-only and reads its meta pages. Refuses a
 * missing file (OST_ENOTFOUND), one that is not a regular file or cannot
 * be read (OST_EIO), and one too small for two meta pages (OST_ECORRUPT);
 * msg (cap bytes, may be NULL) gets one line naming the file. Damage in
 * the meta pages does not refuse the open: ost__pc_meta_check says what
 * it is. *out gets the handle, to be closed with ost__pc_close. */
int ost__pc_open(const char *dir, ost__pc **out, char *msg, size_t cap);

/* The same on n bytes at buf, which are borrowed (not copied) and must
 * stay unchanged until ost__pc_close; for fuzzing and tests. */
int ost__pc_open_mem(const void *buf, size_t n, ost__pc **out, char *msg, size_t cap);

/* Frees the handle and unmaps the file. Accepts NULL. */
void ost__pc_close(ost__pc *pc);

/* The cheap check: both meta pages (page flags and number, magic, version,
 * page size a power of two from 512 to 32768 and equal in both, map size
 * holding the used pages, last page within the file, transaction id of
 * the page's parity, the free and main database records: flags, depth <=
 * 32, root within the used pages, counts that fit). Reads two pages. Returns 0 when both are sane; otherwise OST_ECORRUPT
 * with one line in msg naming the meta page and the field, e.g.
 * "data.mdb: meta page 0: page size 0 (must be a power of two from 512 to
 * 32768)". When only the older meta page is damaged it says so ("the
 * current meta page 1 is sane"): liblmdb reads both and refuses the file,
 * and ost__pc_walk can still walk the current one. */
int ost__pc_meta_check(ost__pc *pc, char *msg, size_t cap);

/* Which meta page the walks start from: -1 (the default) the one liblmdb
 * picks (the sane one with the higher transaction id, meta page 0 on a
 * tie), 0 or 1 that page, e.g. the previous snapshot for salvage (its
 * pages stay intact until two more commits). OST_ECORRUPT when that meta
 * page is too damaged to walk from (bad page flags, magic, version or
 * page size). */
int ost__pc_use_meta(ost__pc *pc, int which);

/* The transaction id of meta page which (0 or 1): 0, or OST_ECORRUPT
 * when that page is not usable. With ost__pc_use_meta, a caller that holds
 * a liblmdb read transaction walks exactly its snapshot, whose pages no
 * writer reuses while the transaction lasts. */
int ost__pc_meta_txnid(ost__pc *pc, int which, uint64_t *txnid);

/* The full structural walk of the snapshot of the chosen meta page: the
 * free list, the main database and every named database in it, each
 * sorted-duplicate sub-database, each overflow run. Every problem goes to
 * report (which may be NULL); the walk skips what a problem makes
 * unreadable (a page, a node, a subtree) and goes on with the rest. At
 * most 1000 problems are reported, then one "... N more problems"; at
 * most 8 per page. stats (may be NULL) gets the counts. Returns 0 when
 * nothing was found, OST_ECORRUPT when something was, OST_ENOMEM. */
int ost__pc_walk(ost__pc *pc, ost__pc_report report, void *ud, ost__pc_stats *stats);

/* After ost__pc_walk (or ost__pc_live): database i (0 the free list, 1 the
 * main database, then the named ones found in it, in key order; one whose
 * record is damaged has nothing walked) in *out; OST_ENOTFOUND past the
 * last. */
int ost__pc_db(ost__pc *pc, size_t i, ost__pc_dbstat *out);

/* Calls fn for each entry of database db (a name, NUL-terminated; NULL the
 * main database) in key order, through the pages and nodes that pass the
 * walk's checks; a damaged node or subtree is reported (report may be
 * NULL) and skipped. For a sorted-duplicate database fn gets each
 * duplicate as its own entry. val is the value (for an overflow value,
 * its bytes in the run when the run is sane); pgno the leaf page holding
 * the entry. fn returns nonzero to stop: ost__pc_each returns that value.
 * Otherwise 0, or OST_ECORRUPT if something was reported, OST_ENOTFOUND
 * when there is no such database, OST_ENOMEM. Page accounting (leaked and
 * doubly used pages, the free list) is ost__pc_walk's, not this. */
typedef int (*ost__pc_entry_fn)(void *ud, const uint8_t *key, size_t klen, const uint8_t *val,
                                size_t vlen, uint64_t pgno);
int ost__pc_each(ost__pc *pc, const char *db, ost__pc_entry_fn fn, ost__pc_report report,
                 void *ud);

/* For salvage: calls fn for every entry of every page of the file (used or
 * not: free pages hold older copies of entries) that reads as a sane leaf
 * page with nodes (the nodes that pass the checks of one page), in page
 * order, with pgno the page. Entries of every database come mixed,
 * including stale ones. Values of overflow runs come when the run is
 * sane; sub-databases and duplicate sub-pages are skipped. Needs a page
 * size: from a sane meta page, else guessed from pages whose header
 * number matches their place. fn returns nonzero to stop (returned). */
int ost__pc_scan(ost__pc *pc, ost__pc_entry_fn fn, void *ud);

/* The file's bytes as the handle reads them (the mapping, or the buffer
 * of ost__pc_open_mem), its size and its page size (of the chosen meta
 * page, else guessed): for salvage, which looks for entries in pages too
 * damaged to parse. OST_ECORRUPT when no page size is known. */
int ost__pc_raw(ost__pc *pc, const uint8_t **base, uint64_t *size, unsigned *psize);

/* For tests: calls fn for every byte range of the file that the chosen
 * snapshot depends on or that holds its live data, with the kind of bytes:
 * OST__PC_LIVE_META, the meta pages' used fields (the other meta page's
 * too: liblmdb checks them); OST__PC_LIVE_STRUCT, page headers, node
 * pointer arrays, node headers, overflow page numbers, database records
 * and free-list page numbers; OST__PC_LIVE_KEY, keys; OST__PC_LIVE_DATA,
 * values (inline and in overflow runs). A harness that changes a byte can
 * so tell whether it hit live bytes or unused space. Returns as
 * ost__pc_walk (without reporting). */
enum { OST__PC_LIVE_META, OST__PC_LIVE_STRUCT, OST__PC_LIVE_KEY, OST__PC_LIVE_DATA };
int ost__pc_live(ost__pc *pc, void (*fn)(void *ud, uint64_t off, uint64_t len, int kind),
                 void *ud);

#endif
