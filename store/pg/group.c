/* A PostgreSQL commit group of plain packages in two round trips (pg.h,
 * ost__pg_group_fast): the banner below says how. Called by commit.c
 * before its statement-per-package path. */
#include <stdlib.h>

#include "pg.h"

/* ---- a group in two round trips --------------------------------------------------------
 * A group of plain packages (records only: no map entries, not a loader's
 * batch) skips the statement-per-package path: one pipeline (libpq's
 * pipeline mode: the statements go out together, the results come back
 * together) begins the transaction, locks the rows of every record the
 * group overwrites and the meta row, and reads the serials; the client
 * checks each package in the group's order, as apply does, a package also
 * conflicting with a record an earlier package of the group writes; a
 * second pipeline writes the accepted packages' records with their
 * serials, their commit log rows and the last serial in one statement,
 * commits and waits for the flush. So a group of 16 one-object commits
 * costs 2 round trips instead of 35, and holds the meta row lock for one.
 * Anything it cannot decide (a pack moved meta.low under a package that
 * refers to stored objects, a statement failing before the commit) rolls
 * back and leaves the group to commit.c's path, which gives each package
 * its own outcome; nothing was written then. */

/* The most records and bytes of a group that takes this path. */
#define FAST_RECS 4096
#define FAST_BYTES ((size_t)4 << 20)

/* An oid -> serial table of the records a group's accepted packages write. */
typedef struct {
    uint64_t *k, *v;
    size_t mask;
} oidset;

/* The slot of oid: its key is oid + 1 (0 is an empty slot; the root's
 * oid is 0) once set. */
static uint64_t *oidset_slot(oidset *t, uint64_t oid) {
    size_t i = (size_t)((oid + 1) * 0x9E3779B97F4A7C15ull >> 20) & t->mask;
    while (t->k[i] && t->k[i] != oid + 1) i = (i + 1) & t->mask;
    return &t->k[i];
}

/* Whether the packages of pkgs[0, n) not skipped may take the fast path. */
static bool fast_fits(ost__engine *e, ost__pkg *const *pkgs, size_t n, size_t *nrecs) {
    size_t recs = 0, bytes = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        const ost__pkg *p = pkgs[i];
        if (pkg_skip(p)) continue;
        if (p->nments || p->nrecs >= (size_t)COPY_MIN) return false;
        recs += p->nrecs;
        bytes += p->nbytes;
        count++;
    }
    *nrecs = recs;
    return count && count <= GROUP_MAX && recs <= FAST_RECS && bytes <= FAST_BYTES && !e->read_only;
}

/* Commits pkgs[0, n) as the comment above says. Returns false, with every
 * package as it came, when the group must take the other path; true with
 * *whole (ost__pg_commit's result) when it is done. */
bool ost__pg_group_fast(ost__sess *s, ost__pkg *const *pkgs, size_t n, int *whole) {
    ost__engine *e = s->e;
    size_t nrecs;
    if (!fast_fits(e, pkgs, n, &nrecs)) return false;
    if (ost__pg_sess_conn(s) || ost__pg_ps_ready(s, PS_LOCK) || ost__pg_ps_ready(s, PS_GWRITE) ||
        ost__pg_ps_ready(s, PS_META_LOCK))
        return false;
    /* the rows to lock: every record overwritten, sorted, once */
    uint64_t *lk = malloc((nrecs + 1) * sizeof *lk);
    size_t tcap = 16;
    while (tcap < 2 * nrecs) tcap *= 2;
    oidset done = {calloc(tcap, sizeof(uint64_t)), calloc(tcap, sizeof(uint64_t)), tcap - 1};
    bool handled = false;
    PGresult *res[5] = {0};
    arr al = {0}, ao = {0}, asr = {0}, ac = {0}, ast = {0}, ls = {0}, lg = {0};
    uint8_t *logb = malloc(nrecs * 8 + 1);
    bool *mine = calloc(n, sizeof *mine); /* the packages this path takes */
    if (!lk || !done.k || !done.v || !logb || !mine) goto out;
    for (size_t i = 0; i < n; i++) mine[i] = !pkg_skip(pkgs[i]);
    size_t nl = 0;
    for (size_t i = 0; i < n; i++)
        if (mine[i])
            for (size_t j = 0; j < pkgs[i]->nrecs; j++)
                if (pkgs[i]->recs[j].read_serial) lk[nl++] = pkgs[i]->recs[j].oid;
    nl = ost__sort_unique(lk, nl);
    arr_begin(&al, OIDTYPE_INT8);
    for (size_t i = 0; i < nl; i++) arr_add_i64(&al, lk[i]);
    if (arr_end(&al)) goto out;

    /* round trip 1: begin, lock, read the serials and meta */
    params ql = {0};
    p_bytes(&ql, al.b, al.n);
    pstmt st1[4];
    int k = 0, at_lock = -1;
    st1[k++] = (pstmt){-1, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL};
    if (nl) {
        at_lock = k;
        st1[k++] = (pstmt){PS_LOCK, NULL, &ql};
    }
    int at_meta = k;
    st1[k++] = (pstmt){PS_META_LOCK, NULL, NULL};
    int failed;
    s->write = true;
    if (ost__pg_pipe_run(s, "commit: locking records", st1, k, res, &failed)) {
        if (s->conn) PQclear(PQexec(s->conn, "ROLLBACK"));
        goto out; /* nothing was written: the other path says what is wrong */
    }
    PGresult *rl = at_lock >= 0 ? res[at_lock] : NULL, *rm = res[at_meta];
    /* the columns checked as ost__pg_run_ps checks them (a pipeline's results do
     * not pass through it); a result of another shape goes to the other
     * path, whose ost__pg_run_ps says what is wrong */
    if (rl && ost__pg_res_check(e, rl, "commit: locking records", ost__pg_ps_shape[PS_LOCK]))
        goto rollback;
    if (PQntuples(rm) != 1 || PQgetlength(rm, 0, 0) != 8 || PQgetlength(rm, 0, 1) != 8)
        goto rollback;
    uint64_t last = rd64(PQgetvalue(rm, 0, 0)), low = rd64(PQgetvalue(rm, 0, 1));
    if (last >= OST__SERIAL_LIMIT - 1 - GROUP_MAX) goto rollback;

    /* the checks, package by package in the group's order */
    int nt = rl ? PQntuples(rl) : 0;
    uint64_t serial = last;
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        if (!mine[i]) continue;
        if (p->nrefs && low != p->low) goto rollback; /* pack: the references need a look */
        int rc = 0;
        for (size_t j = 0; j < p->nrecs && !rc; j++) {
            ost__rec *rec = &p->recs[j];
            if (!rec->read_serial) continue;
            uint64_t *slot = oidset_slot(&done, rec->oid);
            if (*slot) { /* an earlier package of the group writes it */
                uint64_t cur = done.v[slot - done.k];
                if (cur != rec->read_serial && ost__pkg_resolvable(p, j))
                    goto rollback; /* apply resolves it */
                if (cur != rec->read_serial)
                    rc = ost__pkg_conflict(p, OST__CONFL_CHANGED, rec->oid, cur, rec->read_serial);
                continue;
            }
            int lo = 0, hi = nt;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (rd64(PQgetvalue(rl, mid, 0)) < rec->oid) lo = mid + 1;
                else hi = mid;
            }
            if (lo == nt || rd64(PQgetvalue(rl, lo, 0)) != rec->oid)
                rc = ost__pkg_conflict(p, OST__CONFL_REMOVED, rec->oid, 0, 0);
            else if (rd64(PQgetvalue(rl, lo, 1)) != rec->read_serial && ost__pkg_resolvable(p, j))
                goto rollback; /* apply resolves it */
            else if (rd64(PQgetvalue(rl, lo, 1)) != rec->read_serial)
                rc = ost__pkg_conflict(p, OST__CONFL_CHANGED, rec->oid,
                                       rd64(PQgetvalue(rl, lo, 1)), rec->read_serial);
        }
        if (rc) {
            p->rc = rc;
            continue;
        }
        p->serial = ++serial;
        for (size_t j = 0; j < p->nrecs; j++) {
            uint64_t *slot = oidset_slot(&done, p->recs[j].oid);
            *slot = p->recs[j].oid + 1;
            done.v[slot - done.k] = p->serial;
        }
    }
    if (serial == last) { /* every package conflicted: nothing to write */
        PQclear(PQexec(s->conn, "ROLLBACK"));
        *whole = 0;
        handled = true;
        goto out;
    }

    /* round trip 2: write, commit, wait for the flush */
    arr_begin(&ao, OIDTYPE_INT8);
    arr_begin(&asr, OIDTYPE_INT8);
    arr_begin(&ac, OIDTYPE_INT4);
    arr_begin(&ast, OIDTYPE_BYTEA);
    arr_begin(&ls, OIDTYPE_INT8);
    arr_begin(&lg, OIDTYPE_BYTEA);
    uint8_t *o = logb;
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        if (!mine[i] || !p->serial) continue;
        uint8_t *l0 = o;
        for (size_t j = 0; j < p->nrecs; j++) {
            ost__rec *r = &p->recs[j];
            arr_add_i64(&ao, r->oid);
            arr_add_i64(&asr, p->serial);
            arr_add_i32(&ac, r->cid);
            arr_add(&ast, p->bytes + r->off, r->len);
            if (r->read_serial) {
                ost__be64(o, r->oid);
                o += 8;
            }
        }
        arr_add_i64(&ls, p->serial);
        arr_add(&lg, l0, (size_t)(o - l0));
    }
    if (arr_end(&ao) || arr_end(&asr) || arr_end(&ac) || arr_end(&ast) || arr_end(&ls) ||
        arr_end(&lg))
        goto rollback;
    params qw = {0};
    p_bytes(&qw, ao.b, ao.n);
    p_bytes(&qw, asr.b, asr.n);
    p_bytes(&qw, ac.b, ac.n);
    p_bytes(&qw, ast.b, ast.n);
    p_bytes(&qw, ls.b, ls.n);
    p_bytes(&qw, lg.b, lg.n);
    p_i64(&qw, serial);
    for (int i = 0; i < k; i++) {
        PQclear(res[i]);
        res[i] = NULL;
    }
    /* COMMIT answers once the server flushed its commit record (the
     * session's synchronous_commit: ost__pg_commit's comment) */
    pstmt st2[2] = {{PS_GWRITE, NULL, &qw}, {-1, "COMMIT", NULL}};
    int n2 = 2;
    int rc = ost__pg_pipe_run(s, "commit", st2, n2, res, &failed);
    bool broken = rc && failed == n2;
    if (rc && !broken && failed < 2) {
        /* the write or the COMMIT failed and the server said so: nothing
         * is committed; roll back, the other path takes the group */
        PQclear(PQexec(s->conn, "ROLLBACK"));
        if (PQstatus(s->conn) == CONNECTION_OK) goto restore;
        broken = true;
    }
    if (rc) {
        /* not known committed (the connection broke after the COMMIT
         * went out): each accepted package carries the failure */
        for (size_t i = 0; i < n; i++)
            if (!pkgs[i]->rc && pkgs[i]->serial) {
                ost__pg_pkg_fail(s, pkgs[i], rc);
                pkgs[i]->serial = 0;
            }
        *whole = !broken && s->conn && PQstatus(s->conn) == CONNECTION_OK ? 0 : OST_EIO;
    } else
        *whole = 0;
    handled = true;
    goto out;
rollback:
    PQclear(PQexec(s->conn, "ROLLBACK"));
restore:
    for (size_t i = 0; i < n; i++) /* as they came: the other path decides */
        if (mine[i]) {
            pkgs[i]->rc = 0;
            pkgs[i]->msg[0] = 0;
            pkgs[i]->serial = 0;
            pkgs[i]->conflict_oid = UINT64_MAX;
        }
out:
    s->write = false;
    for (size_t i = 0; i < sizeof res / sizeof *res; i++) PQclear(res[i]);
    arr_free(&al);
    arr_free(&ao);
    arr_free(&asr);
    arr_free(&ac);
    arr_free(&ast);
    arr_free(&ls);
    arr_free(&lg);
    free(logb);
    free(mine);
    free(lk);
    free(done.k);
    free(done.v);
    return handled;
}
