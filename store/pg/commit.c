/* The PostgreSQL engine's commits (pg.h): each package applied in a READ
 * COMMITTED transaction (locks, serial checks, conflicts resolved by the
 * class, the serial, the writes), a group in one transaction with its
 * spoilt packages taken out, and the view polled for the sessions of the
 * group. Uses group.c, write.c and snap.c. */
#include <stdlib.h>

#include "pg.h"

/* ---- commit ------------------------------------------------------------------------ */

/* Record i of p, which commit cur replaced after p's transaction read
 * it: its committed state, read in the commit's transaction (the row is
 * locked), goes to the class's resolver (ost__pkg_resolve). 0 when it
 * merged; else the code, p->msg set, nothing written. */
static int pg_resolve(ost__sess *s, ost__pkg *p, size_t i, uint64_t cur, bool *retry) {
    int rc = 0;
    params q = {0};
    p_i64(&q, p->recs[i].oid);
    PGresult *r = ost__pg_run_as(s->e, s->conn, "commit: reading a record to resolve a conflict",
                                 "SELECT cid, state FROM ost_records WHERE oid = $1::bigint", &q,
                                 &rc, retry, "IB");
    if (!r) {
        ost__fmt(p->msg, sizeof p->msg, "%s", s->e->host->errmsg(s->e->st));
        return rc;
    }
    if (PQntuples(r) != 1) {
        PQclear(r);
        return s->e->host->conflict(p, OST__CONFL_REMOVED, p->recs[i].oid, 0, 0);
    }
    rc = s->e->host->resolve(s->e->st, p, i, cur, rd32(PQgetvalue(r, 0, 0)), PQgetvalue(r, 0, 1),
                          (size_t)PQgetlength(r, 0, 1));
    PQclear(r);
    return rc;
}

/* Applies p in the open READ COMMITTED transaction: locks, checks, the
 * serial, writes. 0, OST_ECONFLICT (p->msg, p->conflict_oid), another
 * code of ours with p->msg, or a statement's failure (*retry says whether
 * the whole package may run again). */
static int apply(ost__sess *s, ost__pkg *p, bool *retry) {
    ost__engine *e = s->e;
    int rc = 0;
    /* the rows to lock: records overwritten, maps changed */
    size_t nl = 0;
    uint64_t *lk = malloc((p->nrecs + p->nments + 1) * sizeof *lk);
    if (!lk) return ost__pg_pkg_fail(s, p, ost__pg_fail(e, OST_ENOMEM, "out of memory"));
    for (size_t i = 0; i < p->nrecs; i++)
        if (p->recs[i].read_serial) lk[nl++] = p->recs[i].oid;
    for (size_t i = 0; i < p->nments; i++)
        if (!nl || p->ments[i].map != lk[nl - 1]) lk[nl++] = p->ments[i].map;
    nl = ost__sort_unique(lk, nl);
    PGresult *r = NULL;
    if (nl) {
        arr a = {0};
        arr_begin(&a, OIDTYPE_INT8);
        for (size_t i = 0; i < nl; i++) arr_add_i64(&a, lk[i]);
        if (arr_end(&a)) rc = ost__pg_fail(e, OST_ENOMEM, "out of memory");
        params q = {0};
        p_bytes(&q, a.b, a.n);
        if (!rc)
            r = ost__pg_run_ps(s, PS_LOCK, "commit: locking records", &q, &rc, retry);
        arr_free(&a);
    }
    free(lk);
    if (rc) return ost__pg_pkg_fail(s, p, rc);
    /* the serial checks, in the package's order, against the locked rows
     * (found by binary search: they came sorted) */
    int nt = r ? PQntuples(r) : 0;
    for (size_t i = 0; i < p->nrecs; i++) {
        ost__rec *rec = &p->recs[i];
        if (!rec->read_serial) continue;
        int lo = 0, hi = nt;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (rd64(PQgetvalue(r, mid, 0)) < rec->oid) lo = mid + 1;
            else hi = mid;
        }
        if (lo == nt || rd64(PQgetvalue(r, lo, 0)) != rec->oid) {
            s->e->host->conflict(p, OST__CONFL_REMOVED, rec->oid, 0, 0);
            PQclear(r);
            return OST_ECONFLICT;
        }
        uint64_t cur = rd64(PQgetvalue(r, lo, 1));
        if (cur != rec->read_serial) {
            int crc = s->e->host->resolvable(p, i) ? pg_resolve(s, p, i, cur, retry)
                                                : s->e->host->conflict(p, OST__CONFL_CHANGED, rec->oid,
                                                                    cur, rec->read_serial);
            if (crc) {
                PQclear(r);
                return crc;
            }
        }
    }
    PQclear(r);
    r = NULL;
    s->wrote = true; /* from here on a failure leaves writes of p behind */
    /* the serial: the meta row stays locked until the commit */
    size_t nlog = 0;
    for (size_t i = 0; i < p->nrecs; i++) nlog += p->recs[i].read_serial != 0;
    size_t next = 0;
    uint64_t last = 0, low = 0;
    if (!nlog && p->nrecs >= (size_t)COPY_MIN) {
        /* new objects only (a loader's batch): the serial, then COPY */
        r = ost__pg_run_as(
            e, s->conn, "commit: taking a serial",
            "UPDATE ost_meta SET last_serial = last_serial + 1 WHERE id = 1 RETURNING "
            "last_serial - 1, low",
            NULL, &rc, retry, "LL");
        if (!r) return ost__pg_pkg_fail(s, p, rc);
        if (PQntuples(r) != 1) {
            PQclear(r);
            return ost__pg_pkg_fail(
                s, p, ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)", e->shown));
        }
        last = rd64(PQgetvalue(r, 0, 0));
        low = rd64(PQgetvalue(r, 0, 1));
        PQclear(r);
        if (last < OST__SERIAL_LIMIT - 1 && (rc = ost__pg_copy_records(s, p, last + 1, retry)))
            return ost__pg_pkg_fail(s, p, rc);
        next = p->nrecs;
        goto have_serial;
    }
    /* One statement takes the serial (which locks the meta row until the
     * commit), writes the first chunk of records and the commit log row:
     * the fewer round trips under the lock, the more commits a second. */
    uint8_t *logb = malloc(nlog * 8 + 1), *o = logb;
    arr ao = {0}, ac = {0}, as = {0};
    if (!logb || ost__pg_records_chunk(p, &next, &ao, &ac, &as))
        rc = ost__pg_fail(e, OST_ENOMEM, "out of memory");
    for (size_t i = 0; logb && i < p->nrecs; i++)
        if (p->recs[i].read_serial) {
            ost__be64(o, p->recs[i].oid);
            o += 8;
        }
    if (!rc) {
        params q = {0};
        p_bytes(&q, ao.b, ao.n);
        p_bytes(&q, ac.b, ac.n);
        p_bytes(&q, as.b, as.n);
        p_bytes(&q, logb, nlog * 8);
        r = ost__pg_run_ps(s, PS_WRITE, "commit: writing records", &q, &rc, retry);
    }
    free(logb);
    arr_free(&ao);
    arr_free(&ac);
    arr_free(&as);
    if (!r) return ost__pg_pkg_fail(s, p, rc); /* the statement failed: nothing of it is there */
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__pg_pkg_fail(s, p, ost__pg_fail(e, OST_ECORRUPT, "%s: damaged meta (no row)",
                                                   e->shown));
    }
    last = rd64(PQgetvalue(r, 0, 0));
    low = rd64(PQgetvalue(r, 0, 1));
    PQclear(r);
have_serial:
    if (last >= OST__SERIAL_LIMIT - 1)
        return ost__pg_pkg_fail(s, p,
                                ost__pg_fail(e, OST_ECORRUPT,
                                             "%s: damaged meta (last_serial %llu)", e->shown,
                                             (unsigned long long)last));
    uint64_t serial = last + 1;
    /* a pack since the connection checked its cache may have removed an
     * object the records refer to */
    if (low != p->low && p->nrefs) {
        arr a = {0};
        arr_begin(&a, OIDTYPE_INT8);
        for (size_t i = 0; i < p->nrefs; i++) arr_add_i64(&a, p->refs[i]);
        if (arr_end(&a)) rc = ost__pg_fail(e, OST_ENOMEM, "out of memory");
        params q = {0};
        p_bytes(&q, a.b, a.n);
        r = rc ? NULL
               : ost__pg_run_as(
                     e, s->conn, "commit: checking references",
                     "SELECT oid FROM ost_records WHERE oid = ANY($1::bigint[]) ORDER BY oid", &q,
                     &rc, retry, "L");
        arr_free(&a);
        if (!r) return ost__pg_pkg_fail(s, p, rc);
        int n = PQntuples(r);
        for (size_t i = 0; i < p->nrefs; i++) {
            int lo = 0, hi = n;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (rd64(PQgetvalue(r, mid, 0)) < p->refs[i]) lo = mid + 1;
                else hi = mid;
            }
            if (lo == n || rd64(PQgetvalue(r, lo, 0)) != p->refs[i]) {
                s->e->host->conflict(p, OST__CONFL_REF_GONE, p->refs[i], 0, 0);
                PQclear(r);
                return OST_ECONFLICT;
            }
        }
        PQclear(r);
    }
    if (next < p->nrecs && (rc = ost__pg_put_records(s, p, next, serial)))
        return ost__pg_pkg_fail(s, p, rc);
    if (p->nments) {
        rc = ost__pg_ments_by_copy(p) ? ost__pg_copy_ments(s, p, serial, retry)
                              : s->e->host->apply_maps(s->e->st, &ost__pg_engine, s, p, serial);
        if (rc) {
            if (!p->msg[0]) ost__pg_pkg_fail(s, p, rc);
            return rc;
        }
    }
    p->serial = serial;
    return 0;
}

/* Gives rc (the store's message) to every package of pkgs[from, to) not
 * failed already, and takes back their serials. */
static void fail_range(ost__sess *s, ost__pkg *const *pkgs, size_t from, size_t to, int rc) {
    for (size_t i = from; i < to; i++) {
        ost__pkg *p = pkgs[i];
        if (p->rc || (!p->nrecs && !p->nments)) continue;
        ost__pg_pkg_fail(s, p, rc);
        p->serial = 0;
    }
}

/* Begins the transaction of a commit group on s's connection: READ
 * COMMITTED, its COMMIT as the session's synchronous_commit says (on for
 * full durability: ost__pg_commit). 0 or the failure. */
static int begin_group(ost__engine *e, ost__sess *s) {
    return ost__pg_run0(e, s->conn, "commit: begin", "BEGIN ISOLATION LEVEL READ COMMITTED", NULL);
}

/* Commits a group of packages in one READ COMMITTED transaction (one
 * COMMIT, one flush), as LMDB's group committer does in one write
 * transaction: each package is applied after the ones before it, so its
 * serial checks see their writes, and takes the next serial. A package
 * that fails before writing (a conflict found by its serial checks: the
 * usual failure) drops out and the transaction goes on. One that fails
 * after writing (a reference a pack removed, a map entry conflict, a
 * statement error) spoils the transaction: it is rolled back, that
 * package drops out with its own outcome (or, for a deadlock or a
 * serialization failure, is tried again, 5 times at most), and the
 * packages before it are applied again in a new transaction; none of
 * them was visible meanwhile. So each package commits atomically and on
 * its own, as engine.h asks. With full durability its COMMIT returns
 * once the server flushed it, and no other session saw it before
 * (ost__pg_commit). */
static int commit_call(ost__sess *s, ost__pkg *const *pkgs, size_t n) {
    ost__engine *e = s->e;
    int whole = 0;
    if (s->snap || s->lazy) ost__pg_snap_end(s);
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        p->rc = 0;
        p->msg[0] = 0;
        p->serial = 0;
        p->conflict_oid = UINT64_MAX;
        if (e->read_only && (p->nrecs || p->nments)) {
            p->rc = ost__pg_fail(e, OST_EREADONLY, "%s: commit: the store is read-only", e->shown);
            ost__fmt(p->msg, sizeof p->msg, "%s", e->host->errmsg(e->st));
        }
    }
    if (ost__pg_group_fast(s, pkgs, n, &whole)) return whole;
    size_t i = 0;
    while (i < n && !whole) {
        while (i < n && pkg_skip(pkgs[i])) i++;
        if (i == n) break;
        size_t first = i, count = 0;
        uint8_t tries[GROUP_MAX] = {0};
        int rc = ost__pg_sess_conn(s);
        if (!rc) rc = begin_group(e, s);
        if (rc) {
            if (s->conn && PQstatus(s->conn) == CONNECTION_OK) PQclear(PQexec(s->conn, "ROLLBACK"));
            ost__pg_pkg_fail(s, pkgs[i], rc);
            if (rc == OST_EIO && (!s->conn || PQstatus(s->conn) != CONNECTION_OK)) {
                /* the call ends here: every package not tried yet carries
                 * the failure (none of them is written), not rc 0 */
                whole = rc;
                fail_range(s, pkgs, i + 1, n, rc);
            }
            i++;
            continue;
        }
        s->write = true;
        size_t j = first;
        while (j < n && count < GROUP_MAX && !whole) {
            ost__pkg *p = pkgs[j];
            if (pkg_skip(p)) {
                j++;
                continue;
            }
            p->msg[0] = 0;
            p->serial = 0;
            p->conflict_oid = UINT64_MAX;
            s->wrote = false;
            bool retry = false;
            rc = apply(s, p, &retry);
            ost__pg_keep_clear(s);
            if (!rc) {
                count++;
                j++;
                continue;
            }
            bool live = PQstatus(s->conn) == CONNECTION_OK;
            if (live && !s->wrote && PQtransactionStatus(s->conn) == PQTRANS_INTRANS) {
                p->rc = rc; /* nothing of p was written: the others go on */
                j++;
                continue;
            }
            /* the transaction is spoiled: roll it back, drop p (or try it
             * again) and apply the packages before it again */
            if (live) PQclear(PQexec(s->conn, "ROLLBACK"));
            if (!live || PQstatus(s->conn) != CONNECTION_OK) {
                p->rc = rc;
                whole = rc == OST_EIO ? rc : OST_EIO;
                break;
            }
            if (retry && j - first < GROUP_MAX && tries[j - first] < 5) {
                tries[j - first]++;
                p->rc = 0;
            } else
                p->rc = rc;
            for (size_t k = first; k < j; k++) pkgs[k]->serial = 0;
            rc = begin_group(e, s);
            if (rc) {
                whole = rc;
                break;
            }
            j = first;
            count = 0;
        }
        if (!whole) {
            rc = 0; /* run sets it on failure only */
            PGresult *r = ost__pg_run(e, s->conn, "commit", "COMMIT", NULL, &rc, NULL);
            PQclear(r);
            if (rc == OST_EIO && PQstatus(s->conn) != CONNECTION_OK) whole = rc;
            else if (rc) fail_range(s, pkgs, first, j, rc);
        }
        if (whole) {
            /* nothing of this transaction is known committed */
            if (s->conn && PQstatus(s->conn) == CONNECTION_OK) PQclear(PQexec(s->conn, "ROLLBACK"));
            fail_range(s, pkgs, first, n, whole);
        }
        s->write = false;
        i = j;
    }
    return whole;
}

/* Whether a connection begins its next transaction after one of pkgs[0,
 * n) that committed (not only loader batches did), and then in *first
 * the lowest serial they committed. */
static bool commit_adopters(ost__pkg *const *pkgs, size_t n, uint64_t *first) {
    bool adopters = false;
    *first = 0;
    for (size_t i = 0; i < n; i++)
        if (!pkgs[i]->rc && pkgs[i]->serial) {
            if (!*first || pkgs[i]->serial < *first) *first = pkgs[i]->serial;
            adopters |= pkgs[i]->next_txn; /* not a loader's batch alone */
        }
    return adopters;
}

/* ost__pg_commit: commit_call, then, when a connection's package committed,
 * the view its session adopts (snap_adopt), polled now.
 *
 * Durability. With full durability every session has synchronous_commit
 * on (connect), and a group's transaction keeps it: its COMMIT returns
 * only after the server flushed the commit record, and no other session
 * can see the commit before that. CommitTransaction
 * (src/backend/access/transam/xact.c) calls RecordTransactionCommit,
 * which for a transaction that wrote WAL with synchronous_commit on
 * flushes the WAL past its commit record (XLogFlush(XactLastRecEnd)),
 * before ProcArrayEndTransaction takes the xid out of the running set;
 * until then every snapshot holds the transaction as in progress. So a
 * commit lost in a server crash was neither acknowledged nor seen, and
 * its serial, which the next commit after the restart takes again, was
 * never in any connection's cache. Committing with synchronous_commit off
 * and waiting for the flush after COMMIT (what this engine did) made the
 * commit visible first: a reader could cache a commit that the crash then
 * lost, and take the new commit of the same serial for it (a lost update
 * through the cache). The cost is that a group's row locks, the meta
 * row's among them, are held through its flush: groups of different
 * processes flush one after another (PostgreSQL's commit_delay can merge
 * them). docs/postgresql.md, "Durability", says how it is tested. */
int ost__pg_commit(ost__sess *s, ost__pkg *const *pkgs, size_t n) {
    int rc = commit_call(s, pkgs, n);
    uint64_t first = 0;
    bool adopters = !rc && commit_adopters(pkgs, n, &first);
    /* with group commit only: without it, each connection commits on its
     * own session, and its renewal costs the one round trip a poll would */
    if (adopters && s->e->group_commit) ost__pg_view_poll(s->e, first - 1);
    return rc;
}
