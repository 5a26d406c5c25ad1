/* The structural check of a store's file before liblmdb touches its data
 * (issue 11): the cheap check of the meta pages at open, and the walk of
 * every page of a snapshot (store/pagecheck.c) that check, pack and the
 * CLI run first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pagecheck.h"
#include "engine.h"

int ost__meta_check(const char *dir, char *msg, size_t cap) {
    /* a writer of another process may be writing a meta page as it is
     * read: damage stays, a torn read does not */
    int rc = 0;
    for (int tries = 0; tries < 4; tries++) {
        ost__pc *pc;
        rc = ost__pc_open(dir, &pc, msg, cap);
        if (rc == OST_ENOTFOUND) return rc;
        if (!rc) {
            rc = ost__pc_meta_check(pc, msg, cap);
            ost__pc_close(pc);
        }
        if (!rc || rc == OST_ENOMEM) return rc;
        struct timespec ts = {0, 2000000}; /* 2 ms */
        nanosleep(&ts, NULL);
    }
    return rc;
}

int ost__walk_snapshot(ost__engine *en, MDB_txn *t, bool write, ost__pc_report report, void *ud,
                       ost__pc **out) {
    ost__pc *pc;
    char msg[512];
    if (out) *out = NULL;
    int rc = ost__pc_open(en->path, &pc, msg, sizeof msg);
    if (rc) return ost__lmdb_fail(en, rc, "%s", msg);
    /* the snapshot of t: a read transaction's own, a write transaction's
     * parent. Its pages are not reused while t lasts, so a writer of
     * another process changes nothing the walk reads. When its meta page
     * has been written over since (two commits), the newest is walked: its
     * pages were freed after t began, if at all, and are kept too. */
    uint64_t want = mdb_txn_id(t) - (write ? 1 : 0), id;
    for (int i = 0; i < 2; i++)
        if (ost__pc_meta_txnid(pc, i, &id) == 0 && id == want) ost__pc_use_meta(pc, i);
    rc = ost__pc_walk(pc, report, ud, NULL);
    if (out && rc != OST_ENOMEM) *out = pc;
    else ost__pc_close(pc);
    return rc;
}

void ost__problem_text(const ost__pc_problem *p, char *buf, size_t cap) {
    if (p->has_keys && p->db && strcmp(p->db, "records") == 0 && (!p->key_lo || p->klo_len == 8) &&
        (!p->key_hi || p->khi_len == 8)) {
        char lo[24] = "0", hi[24] = "the last";
        if (p->key_lo) snprintf(lo, sizeof lo, "%llu", (unsigned long long)ost__rd_be64(p->key_lo));
        if (p->key_hi) snprintf(hi, sizeof hi, "%llu", (unsigned long long)ost__rd_be64(p->key_hi));
        snprintf(buf, cap, "%s (records from oid %s to %s are behind it)", p->msg, lo, hi);
    } else {
        snprintf(buf, cap, "%s", p->msg);
    }
}

typedef struct {
    char *buf;
    size_t cap;
    uint64_t n;
} first_ctx;

static void note_first(void *ud, const ost__pc_problem *p) {
    first_ctx *f = ud;
    if (!f->n++) ost__problem_text(p, f->buf, f->cap);
}

int ost__walk_first(ost__engine *en, MDB_txn *t, bool write, char *first, size_t cap) {
    first_ctx f = {first, cap, 0};
    first[0] = 0;
    int rc = ost__walk_snapshot(en, t, write, note_first, &f, NULL);
    if (f.n > 1) {
        size_t len = strlen(first);
        snprintf(first + len, cap - len, ", and %llu more", (unsigned long long)(f.n - 1));
    }
    return rc;
}

/* ---- the page walk of ost_store_check ---------------------------------------------- */

/* Page problems go to the check's report, without an oid. */
typedef struct {
    ost_check_fn report;
    void *ud;
    uint64_t n;
    uint64_t records, entries; /* walked through the pages (damaged store) */
    uint64_t format;
} page_ctx;

static void page_problem(void *ud, const ost__pc_problem *p) {
    page_ctx *pc = ud;
    pc->n++;
    if (!pc->report) return;
    char msg[400];
    ost__problem_text(p, msg, sizeof msg);
    pc->report(pc->ud, UINT64_MAX, 0, OST_ECORRUPT, msg);
}

/* A damaged store: the records and entries that the pages still reach,
 * read through the walker (never liblmdb), each checked against its
 * checksum. */
static int each_record(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                       uint64_t pg) {
    page_ctx *pc = ud;
    (void)pg;
    pc->records++;
    uint64_t oid = kl == 8 ? ost__rd_be64(k) : UINT64_MAX;
    bool ok = kl == 8 && vl >= OST_HDR_SIZE + 2 &&
              (pc->format < 3 || ost__rec_crc_ok(oid, v, vl));
    if (!ok) {
        pc->n++;
        char msg[160];
        snprintf(msg, sizeof msg, "oid %llu: damaged record (%s)", (unsigned long long)oid,
                 kl != 8 ? "its key is not an oid" : "its checksum does not match its bytes");
        if (pc->report) pc->report(pc->ud, oid, 0, OST_ECORRUPT, msg);
    }
    return 0;
}

static int each_entry(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                      uint64_t pg) {
    page_ctx *pc = ud;
    (void)pg;
    pc->entries++;
    bool ok = kl >= 8 && (pc->format >= 3 ? ost__ent_crc_ok(k, kl, v, vl) : vl >= 8);
    if (!ok) {
        pc->n++;
        char msg[160];
        snprintf(msg, sizeof msg, "map %llu: a damaged entry (its checksum does not match its bytes)",
                 (unsigned long long)(kl >= 8 ? ost__rd_be64(k) : UINT64_MAX));
        if (pc->report) pc->report(pc->ud, kl >= 8 ? ost__rd_be64(k) : UINT64_MAX, 0, OST_ECORRUPT,
                                   msg);
    }
    return 0;
}

/* The previous snapshot: liblmdb opens it after a crash that cut the last
 * commit short, so its meta page and pages are checked too. Its pages are
 * not kept for this reader: a writer may reuse them during the walk, so
 * what it finds counts only when no commit happened meanwhile. */
typedef struct {
    page_ctx *pc;
    int meta;
    struct {
        char msg[300];
    } p[64];
    size_t n, more;
} prev_ctx;

static void prev_problem(void *ud, const ost__pc_problem *p) {
    prev_ctx *x = ud;
    if (x->n < sizeof x->p / sizeof *x->p)
        snprintf(x->p[x->n++].msg, sizeof x->p[0].msg, "the previous snapshot (meta page %d): %s",
                 x->meta, p->msg);
    else
        x->more++;
}

static int check_previous(ost__engine *en, ost__pc *pc, uint64_t txnid, page_ctx *pcx) {
    uint64_t id;
    int other = -1;
    for (int i = 0; i < 2; i++)
        if (ost__pc_meta_txnid(pc, i, &id) == 0 && id != txnid) other = i;
    if (other < 0 || ost__pc_use_meta(pc, other)) return 0;
    MDB_envinfo before, after;
    mdb_env_info(en->env, &before);
    prev_ctx *x = calloc(1, sizeof *x);
    if (!x) return OST_ENOMEM;
    x->pc = pcx;
    x->meta = other;
    int rc = ost__pc_walk(pc, prev_problem, x, NULL);
    mdb_env_info(en->env, &after);
    if (rc == OST_ECORRUPT && before.me_last_txnid == after.me_last_txnid) {
        for (size_t i = 0; i < x->n; i++) {
            pcx->n++;
            if (pcx->report) pcx->report(pcx->ud, UINT64_MAX, 0, OST_ECORRUPT, x->p[i].msg);
        }
        if (x->more) {
            char m[96];
            snprintf(m, sizeof m, "the previous snapshot: %zu more problems", x->more);
            pcx->n++;
            if (pcx->report) pcx->report(pcx->ud, UINT64_MAX, 0, OST_ECORRUPT, m);
        }
    } else {
        rc = 0; /* a commit came between: the old pages may have been reused */
    }
    free(x);
    return rc == OST_ENOMEM ? rc : rc ? OST_ECORRUPT : 0;
}

/* The walk of the snapshot's pages (liblmdb trusts them, so nothing else
 * reads the snapshot before it passes) and of the previous snapshot's. */
int ost__lmdb_check_pages(ost__engine *en, MDB_txn *t, ost_check_fn report, void *ud,
                          uint64_t *problems, uint64_t *records) {
    page_ctx pcx = {.report = report, .ud = ud, .format = en->format};
    ost__pc *pc = NULL;
    int wrc = ost__walk_snapshot(en, t, false, page_problem, &pcx, &pc);
    if (wrc == OST_ECORRUPT && pc) {
        ost__pc_each(pc, "records", each_record, NULL, &pcx);
        ost__pc_each(pc, "mapents", each_entry, NULL, &pcx);
    }
    if (wrc == 0 && pc) {
        /* the current snapshot is sound: liblmdb may read it; problems of
         * the previous one are counted with the rest */
        int prc = check_previous(en, pc, mdb_txn_id(t), &pcx);
        if (prc == OST_ENOMEM) wrc = prc;
    }
    *problems = pcx.n;
    ost__pc_close(pc);
    if (wrc == OST_ECORRUPT) {
        *records = pcx.records;
        return ost__lmdb_fail(en, OST_ECORRUPT,
                            "%s: %llu problems found: the store's pages are damaged, so "
                            "records were only checked against their checksums ('ostore "
                            "salvage' copies what is intact)",
                            en->shown, (unsigned long long)pcx.n);
    }
    return wrc;
}

