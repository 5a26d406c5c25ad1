/* The structural check of a store's file before liblmdb touches its data
 * (issue 11): the cheap check of the meta pages at open, and the walk of
 * every page of a snapshot (store/pagecheck.c) that check, pack and the
 * CLI run first. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "pagecheck.h"
#include "store_internal.h"

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
