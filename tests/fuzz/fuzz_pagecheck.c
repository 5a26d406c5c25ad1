/* Fuzz target of the page walker (store/lmdb/pagecheck.c): the input is a whole
 * data.mdb file.
 *
 * Every entry point runs on it through ost__pc_open_mem: the meta check,
 * the walk from the chosen meta page and from each meta page, each over
 * the main database and every named one, the scan, the live ranges. What
 * must hold whatever the bytes (fuzz_pagecheck.h) is checked here; ASan
 * and UBSan catch the rest (libFuzzer hands the input in a heap block of
 * exactly its size, so one byte read past the file is an error).
 *
 * Built two ways: with OST_LIBFUZZER, for clang's -fsanitize=fuzzer
 * (tests/fuzz/run_fuzz.sh pagecheck), with a custom mutator that knows the
 * format half the time; and without, linked into the smoke driver
 * (pc_smoke.c) and the seed maker (make_pc_seeds.c). */
#include "fuzz_pagecheck.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ostore.h"
#include "lmdb/pagecheck.h"

static const uint8_t *g_data;
static size_t g_len;

static void bug(const char *what, const char *detail) {
    fprintf(stderr, "\nfuzz_pagecheck: BUG: %s%s%s (input of %zu bytes)\n", what,
            detail && *detail ? ": " : "", detail ? detail : "", g_len);
    abort();
}

static bool inside(const uint8_t *p, size_t n) {
    return p >= g_data && (size_t)(p - g_data) <= g_len && n <= g_len - (size_t)(p - g_data);
}

typedef struct {
    int n;
} reports;

static void on_problem(void *ud, const ost__pc_problem *p) {
    reports *r = ud;
    r->n++;
    size_t ml = strnlen(p->msg, sizeof p->msg);
    if (ml == 0 || ml == sizeof p->msg) bug("a problem without a one-line message", NULL);
    if (strchr(p->msg, '\n')) bug("a problem message of more than one line", p->msg);
    if (!p->has_keys && (p->key_lo || p->key_hi)) bug("keys without has_keys", p->msg);
    if (p->key_lo && (p->klo_len > 511 || !inside(p->key_lo, p->klo_len)))
        bug("a problem's key_lo outside the file", p->msg);
    if (p->key_hi && (p->khi_len > 511 || !inside(p->key_hi, p->khi_len)))
        bug("a problem's key_hi outside the file", p->msg);
}

typedef struct {
    reports rep;
    uint64_t n;
    bool check_order;
    const uint8_t *last;
    size_t lastlen;
} entries;

static int on_entry(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                    uint64_t pgno) {
    entries *e = ud;
    if (!inside(k, kl) || !inside(v, vl)) bug("an entry outside the file", NULL);
    if (kl > 511) bug("a key of more than 511 bytes", NULL);
    if (pgno < 2) bug("an entry on a meta page", NULL);
    if (e->check_order && e->n) {
        size_t m = kl < e->lastlen ? kl : e->lastlen;
        int d = m ? memcmp(e->last, k, m) : 0;
        if (d > 0 || (d == 0 && e->lastlen >= kl)) bug("each gave keys out of order", NULL);
    }
    e->last = k;
    e->lastlen = kl;
    e->n++;
    return 0;
}

static void on_problem_e(void *ud, const ost__pc_problem *p) { on_problem(&((entries *)ud)->rep, p); }

typedef struct {
    uint8_t *seen; /* one bit per byte of the file */
    bool overlap;
} livemap;

static void on_live(void *ud, uint64_t off, uint64_t len, int kind) {
    livemap *m = ud;
    if (kind < OST__PC_LIVE_META || kind > OST__PC_LIVE_DATA) bug("a live range of no kind", NULL);
    if (off > g_len || len > g_len - off) bug("a live range outside the file", NULL);
    for (uint64_t i = off; i < off + len; i++) {
        if (m->seen[i >> 3] >> (i & 7) & 1) m->overlap = true;
        m->seen[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
}

/* The walk from the meta page chosen; returns whether it was clean, and
 * checks what a clean walk promises. */
static bool walk_and_check(ost__pc *pc) {
    reports r = {0};
    ost__pc_stats st;
    int rc = ost__pc_walk(pc, on_problem, &r, &st);
    if (rc != 0 && rc != OST_ECORRUPT) bug("walk failed otherwise than OST_ECORRUPT", ost_err_name(rc));
    if ((rc == 0) != (r.n == 0)) bug("walk's result disagrees with its reports", ost_err_name(rc));
    if (rc) return false;
    if (st.branch + st.leaf + st.overflow + st.free + 2 != st.last_pg + 1)
        bug("a clean walk's pages do not add up to the last page", NULL);
    /* each over every database gives its walked count, in order */
    ost__pc_dbstat d;
    for (size_t i = 1; ost__pc_db(pc, i, &d) == 0; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", d.name);
        if (i > 1 && strchr(name, '\\')) continue; /* shown escaped: not its real name */
        entries e = {0};
        e.check_order = !(d.flags & 0x4e); /* bytewise keys, no duplicates */
        int erc = ost__pc_each(pc, i == 1 ? NULL : name, on_entry, on_problem_e, &e);
        if (erc != 0) bug("each failed on a file that walks clean", name);
        if (e.rep.n) bug("each reported a problem on a file that walks clean", name);
        if (e.n != d.entries) bug("each gave another count than the walk", name);
    }
    /* live ranges: in the file, disjoint */
    livemap m = {calloc(g_len / 8 + 1, 1), false};
    if (!m.seen) return true;
    rc = ost__pc_live(pc, on_live, &m);
    if (rc) bug("live failed on a file that walks clean", ost_err_name(rc));
    if (m.overlap) bug("live ranges overlap on a file that walks clean", NULL);
    free(m.seen);
    return true;
}

int ost_fuzz_pagecheck_one(const uint8_t *data, size_t len) {
    g_data = data;
    g_len = len;
    ost__pc *pc;
    char msg[256];
    int rc = ost__pc_open_mem(data, len, &pc, msg, sizeof msg);
    if (rc) {
        if (rc != OST_ECORRUPT) bug("open failed otherwise than OST_ECORRUPT", ost_err_name(rc));
        if (!msg[0]) bug("open refused without a message", NULL);
        return 0;
    }
    rc = ost__pc_meta_check(pc, msg, sizeof msg);
    if (rc && (rc != OST_ECORRUPT || !msg[0])) bug("meta check without a message", NULL);
    bool clean = walk_and_check(pc);
    if (clean && rc) bug("a clean walk of a file whose meta check failed", msg);
    bool again = walk_and_check(pc);
    if (again != clean) bug("two walks disagree", NULL);
    entries e = {0};
    rc = ost__pc_each(pc, "records", on_entry, on_problem_e, &e);
    if (rc < 0 && rc != OST_ECORRUPT && rc != OST_ENOTFOUND) bug("each failed", ost_err_name(rc));
    e.n = 0;
    rc = ost__pc_scan(pc, on_entry, &e);
    if (rc != 0 && rc != OST_ECORRUPT) bug("scan failed", ost_err_name(rc));
    for (int which = 0; which < 2; which++)
        if (ost__pc_use_meta(pc, which) == 0) walk_and_check(pc);
    ost__pc_close(pc);
    return clean;
}

/* ---- a mutator that knows the format -------------------------------------- */

static uint64_t mstate;
static uint64_t mrand(void) {
    uint64_t x = mstate;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    mstate = x;
    return x * 0x2545F4914F6CDD1DULL;
}
static size_t below(size_t n) { return n ? (size_t)(mrand() % n) : 0; }

static void put(uint8_t *p, uint64_t v, int n) {
    for (int i = 0; i < n; i++) p[i] = (uint8_t)(v >> 8 * i);
}

size_t ost_fuzz_pagecheck_mutate(uint8_t *data, size_t len, size_t max, uint64_t seed) {
    mstate = seed * 0x9E3779B97F4A7C15ULL + 1;
    if (!mstate) mstate = 1;
    size_t ps = len >= 48 ? (size_t)(data[40] | data[41] << 8 | data[42] << 16) : 4096;
    if (ps < 512 || ps > 32768 || (ps & (ps - 1))) ps = 4096;
    size_t pages = len / ps;
    int rounds = 1 + (int)below(3);
    for (int k = 0; k < rounds && len; k++) {
        size_t pg = pages ? below(pages) : 0, base = pg * ps;
        size_t room = len - base < ps ? len - base : ps;
        switch (below(8)) {
        case 0: /* flip a bit anywhere */
            data[below(len)] ^= (uint8_t)(1u << below(8));
            break;
        case 1: /* a page header field: number, flags, lower, upper, run length */
            if (room >= 16) {
                static const uint8_t at[] = {0, 8, 10, 12, 14};
                size_t o = at[below(sizeof at)];
                uint64_t v = below(2) ? below(pages + 3) : (uint64_t)mrand() & 0xffff;
                put(data + base + o, v, o == 0 ? 8 : 2);
            }
            break;
        case 2: { /* a node pointer or a node header field */
            if (room < 24) break;
            size_t o = 16 + 2 * below(16);
            uint16_t off = (uint16_t)(data[base + o] | data[base + o + 1] << 8);
            if (below(2) || (size_t)off + 8 > room) {
                put(data + base + o, below(2) ? below(room) : room - 2 * below(8), 2);
            } else {
                static const uint16_t v[] = {0, 1, 2, 8, 48, 511, 512, 0x7fff, 0xffff};
                put(data + base + off + 2 * below(4),
                    below(2) ? v[below(sizeof v / sizeof *v)] : below(pages + 3), 2);
            }
            break;
        }
        case 3: /* a page copied over another: shared pages, cycles */
            if (pages > 3) {
                size_t from = below(pages);
                if (from != pg && (from + 1) * ps <= len && room == ps)
                    memmove(data + base, data + from * ps, ps);
            }
            break;
        case 4: /* truncated at a page boundary or anywhere */
            if (below(4) == 0) len = below(2) && pages > 2 ? (2 + below(pages - 2)) * ps : below(len);
            break;
        case 5: /* a 64-bit page number at a random place of a page */
            if (room >= 8) put(data + base + below(room - 7), below(pages + 3), 8);
            break;
        case 6: /* a meta page field */
            if (len >= 2 * ps) {
                static const uint16_t mo[] = {16, 20, 32, 40, 44, 46, 48, 56, 64, 72,
                                              80, 88, 92, 94, 96, 104, 112, 120, 128, 136, 144};
                size_t o = below(2) * ps + mo[below(sizeof mo / sizeof *mo)];
                put(data + o, below(2) ? below(pages + 3) : mrand(), below(2) ? 2 : 8);
            }
            break;
        default: /* a byte anywhere */
            data[below(len)] = (uint8_t)mrand();
            break;
        }
    }
    (void)max;
    return len;
}

#ifdef OST_LIBFUZZER
size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

/* Half the time libFuzzer's own mutations, half the time ours. */
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max, unsigned int seed) {
    if (seed & 1) return LLVMFuzzerMutate(data, size, max);
    return ost_fuzz_pagecheck_mutate(data, size, max, seed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len) {
    ost_fuzz_pagecheck_one(data, len);
    return 0;
}
#endif
