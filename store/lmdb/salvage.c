/* Salvage of a damaged store (salvage.h): read with pagecheck.c, written
 * with import.c. */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "entries.h"
#include "import.h"
#include "pagecheck.h"
#include "salvage.h"
#include "engine.h"

/* A record found: pickle points into the damaged file's mapping, which
 * stays until the end. */
typedef struct {
    uint64_t oid, serial;
    uint32_t cid;
    const uint8_t *pickle;
    size_t len;
    uint64_t pgno;
    bool scanned; /* found by the scan, not in the tree */
    uint8_t prio; /* which copy wins: lower first, then the newest (PRIO) */
} srec;

/* A map entry found: key is the whole key (map oid first). */
typedef struct {
    const uint8_t *key;
    size_t klen;
    uint64_t serial;
    const uint8_t *val;
    size_t vlen;
    uint8_t scanned; /* 0 the tree, 1 the scan of sane pages, 2 the byte search */
    uint8_t prio;
} sent;

/* A record seen damaged: oid and the class id its header gives. */
typedef struct {
    uint64_t oid;
    uint32_t cid;
    const char *why;
} sbad;

typedef struct {
    uint32_t id;
    const char *mod, *name; /* into the mapping, NUL-separated: mod ends at the NUL */
    size_t ml, nl;
} scls;

#define ARR(T) \
    struct {   \
        T *v;  \
        size_t n, cap; \
    }

typedef struct {
    ost__pc *pc;
    ost__salvage_fn report;
    void *ud;
    ost__salvage_stats *st;
    const ost__salvage_api *api; /* the store's public API, to write the new store */
    uint64_t format;
    bool have_meta[4];
    uint64_t meta[4]; /* format, next_oid, last_serial, next_class */
    ARR(srec) recs;
    ARR(sent) ents;
    ARR(sbad) bad;
    ARR(scls) cls;
    uint64_t bad_ents;
    bool fallback;      /* a meta page is damaged: the newest copy of anything wins, and a
                         * copy from the commit after the last one readable is taken */
    const char *cur_db; /* the database the walk of the moment reads */
    bool damaged_db;    /* ... reported problems */
    bool nomem;
    char (*stand)[40];  /* stand-in names of classes whose entries are lost */
    size_t nstand, capstand;
} salv;

#define PUSH(a, item)                                                   \
    do {                                                                \
        if (ost__reserve((void **)&(a).v, &(a).cap, (a).n + 1,          \
                         sizeof *(a).v, 256)) {                         \
            s->nomem = true;                                            \
            break;                                                      \
        }                                                               \
        (a).v[(a).n++] = (item);                                        \
    } while (0)

/* The record of oid whose header and pickle are v[0, len) (len at least
 * OST_HDR_SIZE), found on page pg; scanned as srec's. */
static srec rec_at(uint64_t oid, const uint8_t *v, size_t len, uint64_t pg, bool scanned) {
    return (srec){oid, ost__rd_le64(v), ost__rd_le32(v + 8), v + OST_HDR_SIZE, len - OST_HDR_SIZE,
                  pg, scanned, 0};
}

static void say(salv *s, int kind, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(salv *s, int kind, const char *fmt, ...) {
    if (!s->report) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    s->report(s->ud, kind, line);
}

/* Whether record value v (n bytes) of oid verifies: its checksum (format
 * 3), or zero reserved bytes and a pickle whose opcodes read (older). */
static void ignore_pid(void *ud, uint64_t oid) {
    (void)ud;
    (void)oid;
}
static bool rec_ok(uint64_t format, uint64_t oid, const uint8_t *v, size_t n) {
    if (n < OST_HDR_SIZE + 2) return false;
    if (format >= 3) return ost__rec_crc_ok(oid, v, n);
    if (ost__rd_le32(v + 12)) return false;
    return ost__scan_pids(v + OST_HDR_SIZE, n - OST_HDR_SIZE, ignore_pid, NULL) == 0;
}

/* Whether entry (key, v) verifies; the pickle starts at *off. */
static bool ent_ok(uint64_t format, const uint8_t *key, size_t klen, const uint8_t *v, size_t n,
                   size_t *off) {
    if (klen < 8 || klen > 8 + OST_MAP_KEY_MAX) return false;
    if (format >= 3) {
        *off = 12;
        return ost__ent_crc_ok(key, klen, v, n);
    }
    if (n < 8) return false;
    *off = 8;
    return n == 8 || ost__scan_pids(v + 8, n - 8, ignore_pid, NULL) == 0;
}

/* ---- reading the damaged store -------------------------------------------------- */

static void on_problem(void *ud, const ost__pc_problem *p) {
    salv *s = ud;
    s->damaged_db = true;
    s->st->problems++;
    char line[400];
    ost__problem_text(p, line, sizeof line);
    say(s, OST__SALV_DAMAGE, "%s", line);
}

static int meta_cb(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, uint64_t pg) {
    salv *s = ud;
    (void)pg;
    static const char *const names[4] = {"format", "next_oid", "last_serial", "next_class"};
    for (int i = 0; i < 4; i++)
        if (kl == strlen(names[i]) && memcmp(k, names[i], kl) == 0 && vl == 8) {
            s->have_meta[i] = true;
            s->meta[i] = ost__rd_le64(v);
        }
    return 0;
}

/* A class name import takes: not empty, UTF-8, no control characters. */
static bool good_name(const uint8_t *p, size_t n) {
    if (!n || n > 65535 || !ost__utf8_strict((const char *)p, n)) return false;
    for (size_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] == 0x7f) return false;
    return true;
}

static int class_cb(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                    uint64_t pg) {
    salv *s = ud;
    (void)pg;
    if (kl != 5 || k[0] != 'i') return 0;
    const uint8_t *nul = memchr(v, 0, vl);
    if (!nul) return 0;
    scls c = {.mod = (const char *)v, .ml = (size_t)(nul - v), .name = (const char *)nul + 1};
    c.nl = vl - c.ml - 1;
    memcpy(&c.id, k + 1, 4); /* native order, as the store writes it */
    if (!c.id || !good_name(v, c.ml) || !good_name(nul + 1, c.nl)) return 0;
    for (size_t i = 0; i < s->cls.n; i++)
        if (s->cls.v[i].id == c.id) return 0; /* the tree's, or the scan's first */
    PUSH(s->cls, c);
    return s->nomem ? OST_ENOMEM : 0;
}

static int rec_cb(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, uint64_t pg) {
    salv *s = ud;
    if (kl != 8) return 0;
    uint64_t oid = ost__rd_be64(k);
    if (!rec_ok(s->format, oid, v, vl)) {
        sbad b = {oid, vl >= 12 ? ost__rd_le32(v + 8) : 0,
                  vl < OST_HDR_SIZE + 2 ? "too short for its header"
                  : s->format >= 3      ? "its checksum does not match its bytes"
                                        : "its header or pickle is damaged"};
        PUSH(s->bad, b);
        return s->nomem ? OST_ENOMEM : 0;
    }
    PUSH(s->recs, rec_at(oid, v, vl, pg, false));
    return s->nomem ? OST_ENOMEM : 0;
}

static int ent_cb(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, uint64_t pg) {
    salv *s = ud;
    (void)pg;
    size_t off = 0;
    if (!ent_ok(s->format, k, kl, v, vl, &off)) {
        s->bad_ents++;
        return 0;
    }
    sent e = {k, kl, ost__rd_le64(v), v + off, vl - off, false, 0};
    PUSH(s->ents, e);
    return s->nomem ? OST_ENOMEM : 0;
}

/* The scan: any leaf entry of any page that verifies as a record or an
 * entry (format 3 only: without checksums a stale copy cannot be told). */
typedef struct {
    salv *s;
    bool recs, ents, cls;
} scan_ctx;

static int scan_cb(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, uint64_t pg) {
    scan_ctx *c = ud;
    salv *s = c->s;
    if (c->cls && kl == 5 && k[0] == 'i') return class_cb(s, k, kl, v, vl, pg);
    if (c->recs && kl == 8 && vl >= OST_HDR_SIZE + 2 && rec_ok(3, ost__rd_be64(k), v, vl)) {
        PUSH(s->recs, rec_at(ost__rd_be64(k), v, vl, pg, true));
        return s->nomem ? OST_ENOMEM : 0;
    }
    size_t off;
    if (c->ents && kl >= 8 && ent_ok(3, k, kl, v, vl, &off)) {
        sent e = {k, kl, ost__rd_le64(v), v + off, vl - off, true, 0};
        PUSH(s->ents, e);
        return s->nomem ? OST_ENOMEM : 0;
    }
    return 0;
}

/* The newest serial a copy may carry: the last commit meta records.
 * With a meta page damaged, that record may be an older snapshot's and
 * the newest commits' pages are intact (a commit writes its pages before
 * its meta page): no bound then, the newest copy wins (and a commit whose
 * meta page was never written may come back too; docs/recovery.md). */
static uint64_t serial_bound(const salv *s) {
    if (!s->have_meta[2] || s->fallback) return UINT64_MAX;
    return s->meta[2];
}

/* ---- pages too damaged to parse ------------------------------------------------ */

static const scls *class_of(const salv *s, uint32_t id);

/* The length of the record value at v (at most max bytes) of oid whose
 * checksum verifies, or 0: the stored length may be what was damaged, so
 * every length is tried, the CRC extended a byte at a time (a pickle ends
 * with STOP, which most lengths fail at once). */
static size_t find_rec_len(uint64_t oid, const uint8_t *v, size_t max) {
    if (max < OST_HDR_SIZE + 2) return 0;
    uint8_t kb[8];
    ost__be64(kb, oid);
    uint32_t want = ost__rd_le32(v + 12);
    uint32_t c = ost__crc32c(ost__crc32c(0, kb, 8), v, 12);
    size_t done = OST_HDR_SIZE;
    for (size_t len = OST_HDR_SIZE + 2; len <= max; len++) {
        if (v[len - 1] != '.') continue;
        c = ost__crc32c(c, v + done, len - done);
        done = len;
        if (c == want) return len;
    }
    return 0;
}

static bool in_sorted(const uint64_t *v, size_t n, uint64_t x) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v[mid] == x) return true;
        if (v[mid] < x) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

/* Looks through every page, byte by byte, for leaf nodes of records of
 * the oids in want (sorted) that the page checks could not parse: a node
 * whose flags or size were damaged, a key with a changed byte (then each
 * wanted oid is tried against the checksum), a page whose pointers or
 * header are gone. A node is [size u16 lo, u16 hi][flags u16][key size u16
 * = 8][the oid][the value, or the number of its first overflow page]. */
/* Whether oid is among the first n records (sorted by oid, one copy
 * each) with a copy at least as new as serial (0: any copy). */
static bool have_rec_since(const salv *s, size_t n, uint64_t oid, uint64_t serial) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->recs.v[mid].oid == oid) return s->recs.v[mid].serial >= serial;
        if (s->recs.v[mid].oid < oid) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

static bool have_rec(const salv *s, size_t n, uint64_t oid) { return have_rec_since(s, n, oid, 0); }

static void lenient_scan(salv *s, const uint64_t *want, size_t nwant) {
    const uint8_t *base;
    uint64_t size;
    unsigned ps;
    if (ost__pc_raw(s->pc, &base, &size, &ps) || ps < 512) return;
    size_t known = s->recs.n; /* sorted (dedupe_recs): what is recovered so far */
    uint64_t last = serial_bound(s);
    /* the last page may be cut short (a truncated file): its bytes count */
    for (uint64_t pg = 2; pg * ps < size; pg++) {
        const uint8_t *p = base + pg * ps;
        size_t avail = size - pg * ps < ps ? (size_t)(size - pg * ps) : ps;
        for (size_t o = 16; o + 16 + OST_HDR_SIZE + 2 <= avail; o += 2) { /* nodes are 2-aligned */
            uint64_t oid = ost__rd_be64(p + o + 8);
            /* key size 8 as a record's; else (a damaged key size) a wanted
             * oid, or a sound record whose checksum says so */
            bool ksize_ok = p[o + 6] == 8 && p[o + 7] == 0;
            bool wanted = in_sorted(want, nwant, oid);
            const uint8_t *v = p + o + 16;
            size_t room = avail - (o + 16);
            size_t claimed = ost__rd_le32(p + o);
            uint16_t fl = ost__rd_le16(p + o + 4);
            /* an overflow value: its run of pages */
            if ((fl & 1) && claimed > room) {
                uint64_t opg = ost__rd_le64(v);
                if ((ksize_ok || wanted) && opg >= 2 && opg < size / ps &&
                    claimed <= size - opg * ps - 16 && (wanted || !have_rec(s, known, oid)) &&
                    rec_ok(3, oid, base + opg * ps + 16, claimed)) {
                    const uint8_t *ov = base + opg * ps + 16;
                    PUSH(s->recs, rec_at(oid, ov, claimed, pg, true));
                }
                continue;
            }
            /* inline: a plausible header first (serial, class), then the length */
            uint64_t serial = ost__rd_le64(v);
            /* a class id, in the table or not (it may be lost) */
            uint32_t cid = ost__rd_le32(v + 8);
            if (serial == 0 || serial > last || cid == 0 || cid >= (1u << 24)) continue;
            if (wanted) {
                size_t len = claimed <= room && rec_ok(3, oid, v, claimed) ? claimed
                                                                          : find_rec_len(oid, v, room);
                if (len) {
                    PUSH(s->recs, rec_at(oid, v, len, pg, true));
                }
                continue;
            }
            if (claimed <= room && claimed > OST_HDR_SIZE && v[claimed - 1] == '.' &&
                rec_ok(3, oid, v, claimed)) {
                /* a sound record the scan of whole pages did not give (on
                 * the cut last page of a truncated file, or a page whose
                 * header is damaged), or a newer copy than the one it gave
                 * (an older copy on a free page): the newest wins
                 * (dedupe_recs) */
                if (!have_rec_since(s, known, oid, serial)) {
                    PUSH(s->recs, rec_at(oid, v, claimed, pg, true));
                }
                continue;
            }
            /* a damaged size: every length, for a record not recovered */
            if (ksize_ok && !have_rec(s, known, oid)) {
                size_t len = find_rec_len(oid, v, room);
                if (len) {
                    PUSH(s->recs, rec_at(oid, v, len, pg, true));
                    continue;
                }
            }
            /* a damaged key: which wanted oid does the checksum hold? */
            if (!ksize_ok || nwant > 256) continue;
            for (size_t i = 0; i < nwant; i++) {
                size_t len = find_rec_len(want[i], v, room);
                if (len) {
                    PUSH(s->recs, rec_at(want[i], v, len, pg, true));
                    break;
                }
            }
        }
        if (s->nomem) return;
    }
}

/* The length of the entry value at v (at most max bytes) under key whose
 * checksum verifies, or 0 (a set's entry: 12 bytes; a map's ends with
 * STOP). */
static size_t find_ent_len(const uint8_t *key, size_t klen, const uint8_t *v, size_t max) {
    if (max < 12) return 0;
    uint32_t want = ost__rd_le32(v + 8);
    uint32_t c = ost__crc32c(ost__crc32c(0, key, klen), v, 8);
    if (c == want) return 12;
    size_t done = 12;
    for (size_t len = 14; len <= max; len++) {
        if (v[len - 1] != '.') continue;
        c = ost__crc32c(c, v + done, len - done);
        done = len;
        if (c == want) return len;
    }
    return 0;
}

/* The same search for the entries of the maps in want (sorted): a node
 * whose key starts with a wanted map's oid. */
/* The key sizes (with the map oid) the entries of map m found so far
 * have, at most max of them, in klens; how many. s->ents sorted. */
static size_t map_klens(const salv *s, uint64_t m, size_t *klens, size_t max) {
    size_t n = 0;
    for (size_t i = 0; i < s->ents.n; i++) {
        if (ost__rd_be64(s->ents.v[i].key) != m) continue;
        size_t kl = s->ents.v[i].klen, j = 0;
        while (j < n && klens[j] != kl) j++;
        if (j == n && n < max) klens[n++] = kl;
    }
    return n;
}

static void lenient_scan_entries(salv *s, const uint64_t *want, size_t nwant) {
    const uint8_t *base;
    uint64_t size;
    unsigned ps;
    if (!nwant || ost__pc_raw(s->pc, &base, &size, &ps) || ps < 512) return;
    uint64_t last = serial_bound(s);
    /* a damaged key size: the sizes the map's other keys have are tried
     * (one for an int map) */
    enum { KL_MAX = 16 };
    size_t (*klens)[KL_MAX] = calloc(nwant, sizeof *klens);
    size_t *nkl = calloc(nwant, sizeof *nkl);
    if (!klens || !nkl) {
        free(klens);
        free(nkl);
        s->nomem = true;
        return;
    }
    for (size_t i = 0; i < nwant; i++) nkl[i] = map_klens(s, want[i], klens[i], KL_MAX);
    for (uint64_t pg = 2; pg * ps < size; pg++) {
        const uint8_t *p = base + pg * ps;
        size_t ps_ = size - pg * ps < ps ? (size_t)(size - pg * ps) : ps; /* a cut last page */
        for (size_t o = 16; o + 8 + 8 + 12 <= ps_; o += 2) {
            const uint8_t *k = p + o + 8;
            size_t w = 0, lo = 0, hi = nwant;
            uint64_t m = ost__rd_be64(k);
            while (lo < hi) { /* want[w] == m */
                w = (lo + hi) / 2;
                if (want[w] == m) break;
                if (want[w] < m) lo = w + 1;
                else hi = w;
            }
            if (lo >= hi) continue;
            size_t stated = ost__rd_le16(p + o + 6);
            size_t claimed = ost__rd_le16(p + o);
            for (size_t t = 0; t <= nkl[w]; t++) {
                size_t klen = t == 0 ? stated : klens[w][t - 1];
                if (t && klen == stated) continue;
                if (klen < 8 || klen > 8 + OST_MAP_KEY_MAX || o + 8 + klen + 12 > ps_) continue;
                const uint8_t *v = k + klen;
                uint64_t serial = ost__rd_le64(v);
                if (serial == 0 || serial > last) continue;
                size_t room = ps_ - (size_t)(v - p);
                size_t len = 0, off;
                if (claimed <= room && ent_ok(3, k, klen, v, claimed, &off)) len = claimed;
                else len = find_ent_len(k, klen, v, room);
                if (!len) continue;
                sent e = {k, klen, serial, v + 12, len - 12, 2, 0};
                PUSH(s->ents, e);
                break;
            }
        }
        if (s->nomem) break;
    }
    free(klens);
    free(nkl);
}

/* ---- choosing among copies ------------------------------------------------------ */

/* By oid; the tree's copy first (prio 0), then the newest; when a meta
 * page was damaged (the tree is an older snapshot's) every copy has prio
 * 0: the newest first. */
static int cmp_rec(const void *a, const void *b) {
    const srec *x = a, *y = b;
    if (x->oid != y->oid) return x->oid < y->oid ? -1 : 1;
    if (x->prio != y->prio) return x->prio > y->prio ? 1 : -1;
    if (x->serial != y->serial) return x->serial > y->serial ? -1 : 1;
    return x->scanned < y->scanned ? -1 : x->scanned > y->scanned;
}

static int kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : al < bl ? -1 : al > bl;
}

static int cmp_ent(const void *a, const void *b) {
    const sent *x = a, *y = b;
    int c = kcmp(x->key, x->klen, y->key, y->klen);
    if (c) return c;
    if (x->prio != y->prio) return x->prio > y->prio ? 1 : -1;
    if (x->serial != y->serial) return x->serial > y->serial ? -1 : 1;
    return x->scanned < y->scanned ? -1 : x->scanned > y->scanned;
}

static int cmp_cls(const void *a, const void *b) {
    uint32_t x = ((const scls *)a)->id, y = ((const scls *)b)->id;
    return x < y ? -1 : x > y;
}

/* qsort, but an empty array (NULL) is fine: qsort(NULL, 0, ...) is
 * undefined behaviour (UBSan stops on it). */
static void sort(void *v, size_t n, size_t sz, int (*cmp)(const void *, const void *)) {
    if (n > 1) qsort(v, n, sz, cmp);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static const scls *class_of(const salv *s, uint32_t id) {
    size_t lo = 0, hi = s->cls.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->cls.v[mid].id == id) return &s->cls.v[mid];
        if (s->cls.v[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

static uint32_t class_id(const salv *s, const char *mod, const char *name) {
    for (size_t i = 0; i < s->cls.n; i++)
        if (s->cls.v[i].ml == strlen(mod) && memcmp(s->cls.v[i].mod, mod, s->cls.v[i].ml) == 0 &&
            s->cls.v[i].nl == strlen(name) && memcmp(s->cls.v[i].name, name, s->cls.v[i].nl) == 0)
            return s->cls.v[i].id;
    return 0;
}

static const srec *find_rec(const salv *s, uint64_t oid) {
    size_t lo = 0, hi = s->recs.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->recs.v[mid].oid == oid) return &s->recs.v[mid];
        if (s->recs.v[mid].oid < oid) lo = mid + 1;
        else hi = mid;
    }
    return NULL;
}

/* References to oids without a recovered record: (missing oid, holder). */
typedef struct {
    uint64_t oid, holder;
} sref;
typedef struct {
    salv *s;
    uint64_t holder;
    ARR(sref) missing;
} refs_ctx;

static void note_ref(void *ud, uint64_t oid) {
    refs_ctx *r = ud;
    salv *s = r->s;
    if (find_rec(s, oid)) return;
    sref x = {oid, r->holder};
    PUSH(r->missing, x);
}

static bool is_bad(const salv *s, uint64_t oid) {
    size_t lo = 0, hi = s->bad.n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (s->bad.v[mid].oid == oid) return true;
        if (s->bad.v[mid].oid < oid) lo = mid + 1;
        else hi = mid;
    }
    return false;
}

/* One copy per oid: the tree's, else the newest found; a copy newer than
 * the last commit (written by a commit that never finished) is not one. */
static void dedupe_recs(salv *s) {
    for (size_t i = 0; i < s->recs.n; i++)
        s->recs.v[i].prio = s->fallback ? 0 : s->recs.v[i].scanned ? 1 : 0;
    sort(s->recs.v, s->recs.n, sizeof *s->recs.v, cmp_rec);
    size_t n = 0;
    for (size_t i = 0; i < s->recs.n; i++) {
        srec *r = &s->recs.v[i];
        if (n && s->recs.v[n - 1].oid == r->oid) continue;
        if (r->scanned && r->serial > serial_bound(s)) continue;
        /* a verified record whose class entry is lost still comes back
         * (under a stand-in name, ost__salvage); without checksums nothing
         * says the record is one */
        if (s->format < 3 && !class_of(s, r->cid)) {
            sbad b = {r->oid, r->cid, "its class id is not in the class table"};
            PUSH(s->bad, b);
            continue;
        }
        s->recs.v[n++] = *r;
    }
    s->recs.n = n;
}

/* ---- writing the new store ------------------------------------------------------ */

static void remove_store(const char *dir, bool made_dir) {
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/data.mdb", dir);
    unlink(p);
    snprintf(p, sizeof p, "%s/lock.mdb", dir);
    unlink(p);
    if (made_dir) rmdir(dir);
}

static int fail(char *msg, size_t cap, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(char *msg, size_t cap, int code, const char *fmt, ...) {
    if (msg && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, cap, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* {'data': {}} as protocol 2: a new, empty root. */
static const uint8_t empty_root[] = {0x80, 0x02, '}', 'q', 0x00, 'X', 0x04, 0x00, 0x00, 0x00,
                                     'd', 'a', 't', 'a', 'q', 0x01, '}', 'q', 0x02, 's', '.'};

static int write_store(salv *s, const char *dst, uint8_t **patched, char *msg, size_t cap) {
    struct stat sb;
    bool made_dir = stat(dst, &sb) != 0;
    char datafile[PATH_MAX];
    snprintf(datafile, sizeof datafile, "%s/data.mdb", dst);
    if (!made_dir && stat(datafile, &sb) == 0)
        return fail(msg, cap, OST_EEXIST, "%s: holds a store already: salvage writes a new one",
                    dst);
    ost_store *st = s->api->store_new();
    if (!st) return fail(msg, cap, OST_ENOMEM, "out of memory");
    ost_store_options o;
    s->api->options_init(&o);
    o.create = true;
    int rc = s->api->store_open(st, dst, &o);
    if (rc) {
        fail(msg, cap, rc, "%s", s->api->store_errmsg(st));
        s->api->store_close(st);
        if (made_dir) rmdir(dst);
        return rc;
    }
    uint64_t bytes = 0;
    for (size_t i = 0; i < s->recs.n; i++) bytes += s->recs.v[i].len + 64;
    for (size_t i = 0; i < s->ents.n; i++) bytes += s->ents.v[i].klen + s->ents.v[i].vlen + 64;
    ost_import *im = NULL;
    rc = s->api->import_begin(st, bytes * 2 + (64u << 20), &im);
    uint32_t max_cid = 0;
    for (size_t i = 0; !rc && i < s->cls.n; i++) {
        const scls *c = &s->cls.v[i];
        rc = s->api->import_class(im, c->id, c->mod, c->ml, c->name, c->nl);
        if (c->id > max_cid) max_cid = c->id;
    }
    uint64_t max_oid = 0, max_serial = 1;
    for (size_t i = 0; !rc && i < s->recs.n; i++) {
        const srec *r = &s->recs.v[i];
        rc = s->api->import_record(im, r->oid, r->serial, r->cid, patched[i] ? patched[i] : r->pickle,
                               r->len);
        if (r->oid > max_oid) max_oid = r->oid;
        if (r->serial > max_serial) max_serial = r->serial;
    }
    for (size_t i = 0; !rc && i < s->ents.n; i++) {
        const sent *e = &s->ents.v[i];
        rc = s->api->import_entry(im, ost__rd_be64(e->key), e->key + 8, e->klen - 8, e->serial,
                                  e->val, e->vlen);
        if (e->serial > max_serial) max_serial = e->serial;
    }
    if (rc) {
        fail(msg, cap, rc, "%s: writing the new store: %s", dst, s->api->store_errmsg(st));
        s->api->import_abort(im);
        s->api->store_close(st);
        remove_store(dst, made_dir);
        return rc;
    }
    /* the counters: what meta said when it is sane, else what was found */
    uint64_t next_oid = max_oid + 1, last = max_serial, next_class = (uint64_t)max_cid + 1;
    if (s->have_meta[1] && s->meta[1] > next_oid && s->meta[1] - next_oid < ((uint64_t)1 << 32))
        next_oid = s->meta[1];
    if (s->have_meta[2] && s->meta[2] > last && s->meta[2] - last < ((uint64_t)1 << 32))
        last = s->meta[2];
    if (s->have_meta[3] && s->meta[3] > next_class && s->meta[3] < ((uint64_t)1 << 32))
        next_class = s->meta[3];
    rc = s->api->import_commit(im, OST_STORE_FORMAT, next_oid, last, next_class);
    if (rc) fail(msg, cap, rc, "%s: writing the new store: %s", dst, s->api->store_errmsg(st));
    s->st->last_serial = last;
    s->api->store_close(st);
    if (rc) remove_store(dst, made_dir);
    return rc;
}

/* ---- the whole ---------------------------------------------------------------------- */

/* Opens the damaged file src into s->pc and picks the snapshot to read:
 * the one liblmdb would use, or else the other one (a damaged meta page is
 * reported, and makes s->fallback). Returns 0, or an error with msg set
 * and s->pc closed. */
static int open_source(salv *s, const char *src, char *msg, size_t cap) {
    int rc = ost__pc_open(src, &s->pc, msg, cap);
    if (rc) return rc;
    char why[256];
    if (ost__pc_meta_check(s->pc, why, sizeof why)) {
        say(s, OST__SALV_DAMAGE, "%s", why);
        s->st->problems++;
        s->fallback = true;
    }
    /* the snapshot liblmdb would use, or else the other one */
    if (ost__pc_use_meta(s->pc, -1) && ost__pc_use_meta(s->pc, 0) && ost__pc_use_meta(s->pc, 1)) {
        ost__pc_close(s->pc);
        return fail(msg, cap, OST_ECORRUPT,
                    "%s: both meta pages are damaged beyond use: nothing can be read (restore "
                    "from an export or a backup)",
                    src);
    }
    return 0;
}

/* Walks every page of s->pc (on_problem counts what is damaged) and reads
 * the meta database, which gives s->format (3 when it is unreadable).
 * Returns 0, or OST_ENOMEM. */
static int walk_pages(salv *s) {
    if (ost__pc_walk(s->pc, on_problem, s, NULL) == OST_ENOMEM) return OST_ENOMEM;
    ost__pc_each(s->pc, "meta", meta_cb, NULL, s);
    s->format = s->have_meta[0] && s->meta[0] >= 1 && s->meta[0] <= 3 ? s->meta[0] : 3;
    s->st->format = s->have_meta[0] ? s->meta[0] : 0;
    if (!s->have_meta[0])
        say(s, OST__SALV_NOTE, "the store's format is unreadable: records are taken as format 3");
    return 0;
}

/* Reads the classes, records and map entries of the trees; on any damage
 * (format 3 only) the whole file is scanned too, and *sc says which kinds
 * were scanned for. Returns 0, or OST_ENOMEM. */
static int read_trees(salv *s, scan_ctx *sc) {
    /* the trees; on any damage the whole file is scanned too (a damaged
     * meta page or main tree can hide whole databases, a cut file pages) */
    bool any = s->st->problems != 0;
    int rc = ost__pc_each(s->pc, "classes", class_cb, NULL, s);
    sc->cls = any || rc != 0;
    rc = ost__pc_each(s->pc, "records", rec_cb, NULL, s);
    sc->recs = any || rc != 0 || s->bad.n;
    rc = ost__pc_each(s->pc, "mapents", ent_cb, NULL, s);
    sc->ents = any || (rc != 0 && rc != OST_ENOTFOUND) || s->bad_ents;
    if (s->nomem) return OST_ENOMEM;
    if (s->format < 3 && (sc->recs || sc->ents || sc->cls)) {
        say(s, OST__SALV_NOTE,
            "a format-%llu store has no checksums: copies of records outside the B-trees "
            "cannot be told from stale ones, so the file is not scanned for them",
            (unsigned long long)s->format);
        sc->recs = sc->ents = false;
    }
    if (sc->recs || sc->ents || sc->cls) {
        size_t before_r = s->recs.n, before_e = s->ents.n;
        ost__pc_scan(s->pc, scan_cb, sc);
        if (s->nomem) return OST_ENOMEM;
        say(s, OST__SALV_NOTE,
            "scanned every page of the file for intact copies: %zu record and %zu entry copies "
            "found outside the trees",
            s->recs.n - before_r, s->ents.n - before_e);
    }
    return 0;
}

/* Up to three rounds (format 3 only) of searching the pages byte by byte
 * (lenient_scan) for the oids still wanted: damaged records, the root and
 * what recovered records refer to; each round's finds are deduplicated.
 * An allocation failure sets s->nomem. */
static void search_wanted(salv *s) {
    for (int round = 0; round < 3 && s->format >= 3 && !s->nomem; round++) {
        ARR(uint64_t) want = {0};
        for (size_t i = 0; i < s->bad.n; i++)
            if (!find_rec(s, s->bad.v[i].oid)) PUSH(want, s->bad.v[i].oid);
        if (!find_rec(s, 0)) PUSH(want, 0);
        refs_ctx wx = {.s = s};
        for (size_t i = 0; i < s->recs.n; i++)
            ost__scan_pids(s->recs.v[i].pickle, s->recs.v[i].len, note_ref, &wx);
        for (size_t i = 0; i < s->ents.n; i++)
            if (s->ents.v[i].vlen) ost__scan_pids(s->ents.v[i].val, s->ents.v[i].vlen, note_ref, &wx);
        for (size_t i = 0; i < wx.missing.n; i++) PUSH(want, wx.missing.v[i].oid);
        free(wx.missing.v);
        /* with nothing wanted, one search still looks for sound records the
         * scan of whole pages missed (a cut last page) */
        if ((!want.n && (round || !s->st->problems)) || s->nomem) {
            free(want.v);
            break;
        }
        sort(want.v, want.n, sizeof *want.v, cmp_u64);
        size_t u = 0;
        for (size_t i = 0; i < want.n; i++)
            if (!u || want.v[u - 1] != want.v[i]) want.v[u++] = want.v[i];
        size_t before = s->recs.n;
        lenient_scan(s, want.v, u);
        free(want.v);
        if (s->recs.n == before) break;
        say(s, OST__SALV_NOTE,
            "found %zu record%s of wanted oids in nodes the page checks could not parse "
            "(damaged sizes, flags or keys; each checked against its checksum)",
            s->recs.n - before, s->recs.n - before == 1 ? "" : "s");
        dedupe_recs(s);
    }
}

/* When map entries were damaged or scanned for (format 3 only): searches
 * the pages byte by byte (lenient_scan_entries) for the entries of maps
 * whose records count more entries than were found. An allocation failure
 * sets s->nomem. */
static void search_short_maps(salv *s, const scan_ctx *sc) {
    if (s->format < 3 || !(sc->ents || s->bad_ents)) return;
    sort(s->ents.v, s->ents.n, sizeof *s->ents.v, cmp_ent);
    ARR(uint64_t) want = {0};
    size_t ei = 0;
    for (size_t i = 0; i < s->recs.n; i++) {
        uint64_t count, found = 0;
        const srec *r = &s->recs.v[i];
        if (ost__map_record_count(r->pickle, r->len, &count)) continue;
        while (ei < s->ents.n && ost__rd_be64(s->ents.v[ei].key) < r->oid) ei++;
        for (size_t j = ei; j < s->ents.n && ost__rd_be64(s->ents.v[j].key) == r->oid; j++)
            if (j == ei || kcmp(s->ents.v[j].key, s->ents.v[j].klen, s->ents.v[j - 1].key,
                                s->ents.v[j - 1].klen))
                found++;
        if (found < count) PUSH(want, r->oid);
    }
    lenient_scan_entries(s, want.v, want.n);
    free(want.v);
}

/* One copy per map key: the tree's, else the newest found (a copy newer
 * than the last commit is none), as dedupe_recs does for records. */
static void dedupe_ents(salv *s) {
    for (size_t i = 0; i < s->ents.n; i++)
        s->ents.v[i].prio = s->fallback ? 0 : s->ents.v[i].scanned ? 1 : 0;
    sort(s->ents.v, s->ents.n, sizeof *s->ents.v, cmp_ent);
    size_t n = 0;
    for (size_t i = 0; i < s->ents.n; i++) {
        sent *e = &s->ents.v[i];
        if (n && kcmp(s->ents.v[n - 1].key, s->ents.v[n - 1].klen, e->key, e->klen) == 0) continue;
        if (e->scanned && e->serial > serial_bound(s)) continue;
        s->ents.v[n++] = *e;
    }
    s->ents.n = n;
}

/* Reports how many map entries the byte search found, when it found any. */
static void note_searched_ents(salv *s) {
    size_t searched = 0;
    for (size_t i = 0; i < s->ents.n; i++) searched += s->ents.v[i].scanned == 2;
    if (searched)
        say(s, OST__SALV_NOTE,
            "found %zu map entr%s in nodes the page checks could not parse (each checked against "
            "its checksum)",
            searched, searched == 1 ? "y" : "ies");
}

/* Classes whose entries are lost: their records keep their bytes under a
 * stand-in class ostore.salvage.LostClass<id>, each reported. The names
 * are kept in s->stand (freed with s), which s->cls points into. Returns
 * 0, or OST_ENOMEM. */
static int name_lost_classes(salv *s) {
    for (size_t i = 0; i < s->recs.n; i++) {
        uint32_t cid = s->recs.v[i].cid;
        if (class_of(s, cid)) continue;
        if (ost__reserve((void **)&s->stand, &s->capstand, s->nstand + 1, sizeof *s->stand, 16))
            return OST_ENOMEM;
        snprintf(s->stand[s->nstand], sizeof s->stand[0], "LostClass%u", cid);
        scls c = {cid, "ostore.salvage", NULL, 14, strlen(s->stand[s->nstand])};
        s->nstand++;
        PUSH(s->cls, c);
        if (s->nomem) return OST_ENOMEM;
        sort(s->cls.v, s->cls.n, sizeof *s->cls.v, cmp_cls);
        size_t count = 0;
        for (size_t j = 0; j < s->recs.n; j++) count += s->recs.v[j].cid == cid;
        say(s, OST__SALV_LOST,
            "class id %u: its name is lost; its %zu record%s keep their bytes under the name "
            "ostore.salvage.LostClass%u",
            cid, count, count == 1 ? "" : "s", cid);
    }
    for (size_t i = 0, k = 0; i < s->cls.n && k < s->nstand; i++) /* the names, now stand is fixed */
        if (!s->cls.v[i].name) {
            uint32_t id = s->cls.v[i].id;
            for (size_t j = 0; j < s->nstand; j++) {
                char want[40];
                snprintf(want, sizeof want, "LostClass%u", id);
                if (strcmp(want, s->stand[j]) == 0) s->cls.v[i].name = s->stand[j];
            }
            k++;
        }
    return 0;
}

/* When no copy of the root (oid 0) was found: an empty PersistentMapping
 * in its place (with that class when the store had none), reported and
 * counted in stats->root_lost. Returns 0, or OST_ENOMEM. */
static int ensure_root(salv *s) {
    uint32_t root_cid = class_id(s, "persistent.mapping", "PersistentMapping");
    if (find_rec(s, 0)) return 0;
    if (!root_cid) {
        uint32_t id = 1;
        for (size_t i = 0; i < s->cls.n; i++)
            if (s->cls.v[i].id >= id) id = s->cls.v[i].id + 1;
        scls c = {id, "persistent.mapping", "PersistentMapping", 18, 17};
        PUSH(s->cls, c);
        root_cid = id;
    }
    srec r = {0, 1, root_cid, empty_root, sizeof empty_root, 0, false, 0};
    PUSH(s->recs, r);
    if (s->nomem) return OST_ENOMEM;
    sort(s->recs.v, s->recs.n, sizeof *s->recs.v, cmp_rec);
    s->st->root_lost = 1;
    say(s, OST__SALV_LOST,
        "oid 0 (the root): no intact copy: the new store has an empty root, and the objects "
        "recovered are reachable from nothing ('ostore pack' would remove them all)");
    return 0;
}

/* Drops the entries whose map record (of class map_cid, or set_cid with
 * empty values) was not recovered, reporting each such map once. */
static void drop_orphan_entries(salv *s, uint32_t map_cid, uint32_t set_cid) {
    size_t n = 0;
    uint64_t dropped_map = UINT64_MAX;
    for (size_t i = 0; i < s->ents.n; i++) {
        sent *e = &s->ents.v[i];
        uint64_t m = ost__rd_be64(e->key);
        const srec *r = find_rec(s, m);
        bool ok = r && r->cid && (r->cid == map_cid || r->cid == set_cid) &&
                  (r->cid == set_cid ? e->vlen == 0 : e->vlen != 0);
        if (!ok) {
            s->st->dropped_entries++;
            if (m != dropped_map)
                say(s, OST__SALV_LOST, "map %llu: its record is lost; its entries are dropped",
                    (unsigned long long)m);
            dropped_map = m;
            continue;
        }
        s->ents.v[n++] = *e;
    }
    s->ents.n = n;
}

/* Frees patched, an array of s->recs.n copies (each may be NULL); NULL is
 * ignored. */
static void free_patched(const salv *s, uint8_t **patched) {
    if (!patched) return;
    for (size_t i = 0; i < s->recs.n; i++) free(patched[i]);
    free(patched);
}

/* The counts of the maps and sets (classes map_cid and set_cid) recovered:
 * each record whose count differs from the entries recovered gets a
 * patched copy with that count, reported. *patched gets a new array of
 * s->recs.n pointers, NULL where the record is written as found, owned by
 * the caller (free_patched). Returns 0, or OST_ENOMEM with nothing
 * allocated. */
static int patch_map_counts(salv *s, uint32_t map_cid, uint32_t set_cid, uint8_t ***patched) {
    uint8_t **p = calloc(s->recs.n ? s->recs.n : 1, sizeof *p);
    if (!p) return OST_ENOMEM;
    size_t ei = 0;
    for (size_t i = 0; i < s->recs.n; i++) {
        const srec *r = &s->recs.v[i];
        if (!r->cid || (r->cid != map_cid && r->cid != set_cid)) continue;
        uint64_t count = 0, was;
        while (ei < s->ents.n && ost__rd_be64(s->ents.v[ei].key) < r->oid) ei++;
        while (ei < s->ents.n && ost__rd_be64(s->ents.v[ei].key) == r->oid) count++, ei++;
        if (ost__map_record_count(r->pickle, r->len, &was) || was == count) continue;
        if (!(p[i] = malloc(r->len))) {
            free_patched(s, p);
            return OST_ENOMEM;
        }
        memcpy(p[i], r->pickle, r->len);
        ost__map_record_setcount(p[i], r->len, count);
        if (was > count) {
            s->st->lost_entries += was - count;
            say(s, OST__SALV_LOST,
                "map %llu: %llu of its %llu entries (damaged, no intact copy found); its count is "
                "now %llu",
                (unsigned long long)r->oid, (unsigned long long)(was - count),
                (unsigned long long)was, (unsigned long long)count);
        } else {
            say(s, OST__SALV_NOTE,
                "map %llu: its count is now %llu, the entries recovered (it was %llu)",
                (unsigned long long)r->oid, (unsigned long long)count, (unsigned long long)was);
        }
    }
    *patched = p;
    return 0;
}

/* Reports what was lost, counting it in stats->lost_records: damaged
 * records without an intact copy, and oids that recovered records and
 * entries refer to and that were not recovered; then the entries that
 * failed their checksum. Returns 0, or OST_ENOMEM (before the references'
 * reports). */
static int report_lost(salv *s) {
    sort(s->bad.v, s->bad.n, sizeof *s->bad.v, cmp_u64); /* oid first in sbad */
    for (size_t i = 0; i < s->bad.n; i++) {
        const sbad *b = &s->bad.v[i];
        if ((i && s->bad.v[i - 1].oid == b->oid) || find_rec(s, b->oid)) continue;
        const scls *c = class_of(s, b->cid);
        s->st->lost_records++;
        say(s, OST__SALV_LOST, "oid %llu (%s%.*s%s%.*s): %s", (unsigned long long)b->oid,
            c ? "" : "class unknown", c ? (int)c->ml : 0, c ? c->mod : "", c ? "." : "",
            c ? (int)c->nl : 0, c ? c->name : "", b->why);
    }
    refs_ctx rx = {.s = s};
    for (size_t i = 0; i < s->recs.n; i++) {
        rx.holder = s->recs.v[i].oid;
        ost__scan_pids(s->recs.v[i].pickle, s->recs.v[i].len, note_ref, &rx);
    }
    for (size_t i = 0; i < s->ents.n; i++) {
        rx.holder = ost__rd_be64(s->ents.v[i].key);
        if (s->ents.v[i].vlen) ost__scan_pids(s->ents.v[i].val, s->ents.v[i].vlen, note_ref, &rx);
    }
    if (s->nomem) {
        free(rx.missing.v);
        return OST_ENOMEM;
    }
    sort(rx.missing.v, rx.missing.n, sizeof *rx.missing.v, cmp_u64); /* by oid */
    for (size_t i = 0; i < rx.missing.n; i++) {
        const sref *m = &rx.missing.v[i];
        if ((i && rx.missing.v[i - 1].oid == m->oid) || is_bad(s, m->oid)) continue;
        s->st->lost_records++;
        say(s, OST__SALV_LOST, "oid %llu (class unknown): oid %llu refers to it; no intact copy found",
            (unsigned long long)m->oid, (unsigned long long)m->holder);
    }
    free(rx.missing.v);
    if (s->bad_ents)
        say(s, OST__SALV_NOTE,
            "%llu map entr%s failed %s checksum in the trees (counted above when no intact copy "
            "was found)",
            (unsigned long long)s->bad_ents, s->bad_ents == 1 ? "y" : "ies",
            s->bad_ents == 1 ? "its" : "their");
    return 0;
}

/* Reports the records that came from outside the trees (the first 50 each,
 * then how many more), since they may be older than what was lost. */
static void report_scanned(salv *s) {
    size_t told = 0;
    for (size_t i = 0; i < s->recs.n; i++) {
        const srec *r = &s->recs.v[i];
        if (!r->scanned) continue;
        if (told++ < 50)
            say(s, OST__SALV_NOTE,
                "oid %llu: recovered from page %llu, not through the B-tree (a node the page "
                "checks refused, or a free page's older copy), as of commit %llu",
                (unsigned long long)r->oid, (unsigned long long)r->pgno,
                (unsigned long long)r->serial);
    }
    if (told > 50) say(s, OST__SALV_NOTE, "... and %zu more records recovered so", told - 50);
}

/* Fills the counts of s->st that the new store's contents give. */
static void count_stats(salv *s) {
    ost__salvage_stats *stats = s->st;
    stats->damaged = s->bad_ents;
    for (size_t i = 0; i < s->bad.n; i++)
        if (!i || s->bad.v[i - 1].oid != s->bad.v[i].oid) stats->damaged++;
    stats->records = s->recs.n;
    stats->entries = s->ents.n;
    stats->classes = s->cls.n;
    for (size_t i = 0; i < s->recs.n; i++) stats->records_scanned += s->recs.v[i].scanned;
    for (size_t i = 0; i < s->ents.n; i++) stats->entries_scanned += s->ents.v[i].scanned;
}

int ost__salvage(const ost__salvage_api *api, const char *src, const char *dst,
                 ost__salvage_fn report, void *ud, ost__salvage_stats *stats, char *msg,
                 size_t cap) {
    ost__salvage_stats dummy;
    if (!stats) stats = &dummy;
    memset(stats, 0, sizeof *stats);
    if (msg && cap) msg[0] = 0;
    if (!src || !dst) return fail(msg, cap, OST_EINVAL, "salvage: no path given");
    salv sv = {.api = api, .report = report, .ud = ud, .st = stats};
    salv *s = &sv;
    int rc = open_source(s, src, msg, cap);
    if (rc) return rc;
    scan_ctx sc = {.s = s};
    uint8_t **patched = NULL; /* map records with their counts set (patch_map_counts) */
    if (walk_pages(s) || read_trees(s, &sc)) goto nomem;

    /* one copy per oid and per key, after the searches for what is missing */
    sort(s->cls.v, s->cls.n, sizeof *s->cls.v, cmp_cls);
    dedupe_recs(s);
    search_wanted(s);
    search_short_maps(s, &sc);
    dedupe_ents(s);
    if (s->nomem) goto nomem;
    note_searched_ents(s);

    /* the classes, the root, the maps' entries and counts */
    if (name_lost_classes(s) || ensure_root(s)) goto nomem;
    uint32_t map_cid = class_id(s, "ostore.maps", "OrderedMap");
    uint32_t set_cid = class_id(s, "ostore.maps", "OrderedSet");
    drop_orphan_entries(s, map_cid, set_cid);
    if (patch_map_counts(s, map_cid, set_cid, &patched)) goto nomem;

    /* the report, then the new store */
    if (report_lost(s)) goto nomem;
    report_scanned(s);
    count_stats(s);
    rc = write_store(s, dst, patched, msg, cap);
    goto out;
nomem:
    rc = fail(msg, cap, OST_ENOMEM, "salvage: out of memory");
out:
    free_patched(s, patched);
    ost__pc_close(s->pc);
    free(s->recs.v);
    free(s->ents.v);
    free(s->bad.v);
    free(s->cls.v);
    free(s->stand);
    return rc;
}
