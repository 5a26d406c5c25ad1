/* The structural check of a store's file before liblmdb touches its data
 * (issue 11): the cheap check of the meta pages at open, and the walk of
 * every page of a snapshot (store/pagecheck.c) that check, pack and the
 * CLI run first. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pagecheck.h"
#include "../store_internal.h"

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

int ost__walk_snapshot(ost_store *st, MDB_txn *t, bool write, ost__pc_report report, void *ud,
                       ost__pc **out) {
    ost__pc *pc;
    char msg[512];
    if (out) *out = NULL;
    int rc = ost__pc_open(st->path, &pc, msg, sizeof msg);
    if (rc) return ost__st_fail(st, rc, "%s", msg);
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

int ost__walk_first(ost_store *st, MDB_txn *t, bool write, char *first, size_t cap) {
    first_ctx f = {first, cap, 0};
    first[0] = 0;
    int rc = ost__walk_snapshot(st, t, write, note_first, &f, NULL);
    if (f.n > 1) {
        size_t len = strlen(first);
        snprintf(first + len, cap - len, ", and %llu more", (unsigned long long)(f.n - 1));
    }
    return rc;
}
