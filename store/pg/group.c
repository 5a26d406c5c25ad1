/* A PostgreSQL commit group of plain packages in two round trips (pg.h,
 * ost__pg_group_fast): the banner below says how. Called by commit.c
 * before its statement-per-package path. */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- a group in two round trips --------------------------------------------------------
 * A group of plain packages (records and counters' adds only: no entries
 * of ordered maps, not a loader's batch) skips the statement-per-package
 * path: one pipeline (libpq's pipeline mode: the statements go out
 * together, the results come back together) begins the transaction,
 * locks the rows of every record the group overwrites, every counter it
 * adds to and the meta row, reads the serials, and the states of the
 * counters and of the records whose class resolves conflicts; the client
 * checks each package in the group's order, as apply does, a package also
 * conflicting with a record an earlier package of the group writes (a
 * class's resolver merges either conflict, from the state read or the
 * earlier package's), and applies each package's counter adds, all or
 * none; a second pipeline writes the accepted packages' records with
 * their serials, the counters' new records, the commit log rows and the
 * last serial in one statement, commits and waits for the flush. So a group of 16 one-object commits
 * costs 2 round trips instead of 35, and holds the meta row lock for one.
 * Anything it cannot decide (a pack moved meta.low under a package that
 * refers to stored objects, a statement failing before the commit) rolls
 * back and leaves the group to commit.c's path, which gives each package
 * its own outcome; nothing was written then. */

/* The most records and bytes of a group that takes this path. */
#define FAST_RECS 4096
#define FAST_BYTES ((size_t)4 << 20)

/* An oid -> serial table of the records a group's accepted packages
 * write, with the record that writes it last (w: its package and index). */
typedef struct {
    const ost__pkg *p;
    size_t j;
} gwriter;
typedef struct {
    uint64_t *k, *v;
    gwriter *w;
    size_t mask;
} oidset;

/* The slot of oid: its key is oid + 1 (0 is an empty slot; the root's
 * oid is 0) once set. */
static uint64_t *oidset_slot(oidset *t, uint64_t oid) {
    size_t i = (size_t)((oid + 1) * 0x9E3779B97F4A7C15ull >> 20) & t->mask;
    while (t->k[i] && t->k[i] != oid + 1) i = (i + 1) & t->mask;
    return &t->k[i];
}

/* The row of oid in r, whose first column holds oids in ascending order,
 * or -1. */
static int row_of(const PGresult *r, uint64_t oid) {
    int lo = 0, hi = r ? PQntuples(r) : 0;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if (rd64(PQgetvalue(r, mid, 0)) < oid) lo = mid + 1;
        else hi = mid;
    }
    return r && lo < PQntuples(r) && rd64(PQgetvalue(r, lo, 0)) == oid ? lo : -1;
}

/* A counter a group adds to: its record as the group's accepted packages
 * leave it, and the serial of the last of them (0: none added yet). */
typedef struct {
    uint64_t oid, serial;
    uint32_t cid;
    uint8_t *state;
    size_t len;
} gcounter;

/* Applies the counters' adds of package p, which takes serial `serial`
 * if they all fit, to ctr[0, nctr) (by oid ascending): all or none. 0;
 * 1 when a counter is not in ctr (the other path decides); or the code
 * with p->msg set (OST_ELIMIT past 64 bits, OST_ECORRUPT, OST_ENOMEM). */
static int group_counts(const ost__host *host, ost__pkg *p, gcounter *ctr, size_t nctr,
                        uint64_t serial) {
    uint8_t *next[8] = {0};
    size_t at[8], nn = 0;
    int rc = 0;
    for (size_t i = 0; i < p->nments && !rc; i++) {
        const ost__ment *me = &p->ments[i];
        int64_t delta = ost__ment_delta(p, me);
        if (!delta) continue;
        size_t lo = 0, hi = nctr;
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (ctr[mid].oid < me->map) lo = mid + 1;
            else hi = mid;
        }
        if (lo == nctr || ctr[lo].oid != me->map || nn == 8) {
            rc = 1; /* not read, or more counters than this path keeps */
            break;
        }
        uint8_t *copy = malloc(ctr[lo].len ? ctr[lo].len : 1);
        if (!copy) {
            rc = OST_ENOMEM;
            break;
        }
        memcpy(copy, ctr[lo].state, ctr[lo].len);
        next[nn] = copy;
        at[nn++] = lo;
        rc = ost__record_count_add(copy, ctr[lo].len, delta, true);
        if (rc) rc = host->count_fail(p, me->map, delta, true, rc);
    }
    for (size_t i = 0; i < nn; i++) {
        if (rc) {
            free(next[i]);
            continue;
        }
        free(ctr[at[i]].state);
        ctr[at[i]].state = next[i];
        ctr[at[i]].serial = serial;
    }
    return rc;
}

/* Record j of package p, read at another serial than cur, the one the
 * store (a row of rf) or an earlier package of the group (w) holds: goes
 * to its class's resolver (ost__pkg_resolve). 0 when it merged, 1 when
 * the committed state is not at hand (the other path decides), else the
 * conflict with p->msg set. */
static int group_resolve(ost__engine *e, ost__pkg *p, size_t j, uint64_t cur, const gwriter *w,
                         const PGresult *rf) {
    if (w) {
        const ost__rec *o = &w->p->recs[w->j];
        return e->host->resolve(e->st, p, j, cur, o->cid, w->p->bytes + o->off, o->len);
    }
    int r = row_of(rf, p->recs[j].oid);
    if (r < 0) return 1;
    return e->host->resolve(e->st, p, j, cur, rd32(PQgetvalue(rf, r, 1)), PQgetvalue(rf, r, 2),
                            (size_t)PQgetlength(rf, r, 2));
}

/* Whether the packages of pkgs[0, n) not skipped may take the fast path. */
static bool fast_fits(ost__engine *e, ost__pkg *const *pkgs, size_t n, size_t *nrecs) {
    size_t recs = 0, bytes = 0, count = 0;
    for (size_t i = 0; i < n; i++) {
        const ost__pkg *p = pkgs[i];
        if (pkg_skip(p)) continue;
        if (!ost__pkg_counts_only(p) || p->nrecs >= (size_t)COPY_MIN) return false;
        recs += p->nrecs;
        bytes += p->nbytes;
        count++;
    }
    *nrecs = recs;
    return count && count <= GROUP_MAX && recs <= FAST_RECS && bytes <= FAST_BYTES && !e->read_only;
}

/* What a group holds from its first round trip to its end, freed by
 * fast_free: the packages this path takes, the rows to lock, the records
 * its accepted packages write, the results of the first round trip and
 * the array parameters of both. */
typedef struct {
    ost__sess *s;
    ost__pkg *const *pkgs;
    size_t n;
    bool *mine;     /* the packages this path takes */
    uint64_t *lk;   /* the rows to lock: every record overwritten and every
                     * counter added to, sorted, once */
    size_t nl;
    uint64_t *fe;   /* of them, the rows whose state the group reads: the
                     * counters, and records that may resolve a conflict */
    size_t nf;
    size_t ncount;  /* counters' adds in the group */
    gcounter *ctr;  /* the counters, by oid ascending */
    size_t nctr;
    oidset done;    /* the records of the accepted packages, with their serials */
    uint8_t *logb;  /* the oids of the commit log rows */
    PGresult *res[5];
    int k;          /* statements of the first round trip: res[0, k) */
    arr al, af, ao, asr, ac, ast, ls, lg;
} fastgroup;

/* How far a group got: on to the next step, out (nothing to undo), done
 * (each package has its outcome), or back to the other path with every
 * package as it came, after a ROLLBACK (rollback) or without one, the
 * server having ended the transaction (restore). */
enum { FAST_ON, FAST_OUT, FAST_DONE, FAST_ROLLBACK, FAST_RESTORE };

/* Allocates what g needs for nrecs records and makes the array of the
 * rows to lock: false when memory ran out. */
static bool fast_setup(fastgroup *g, size_t nrecs) {
    ost__pkg *const *pkgs = g->pkgs;
    size_t n = g->n;
    size_t nments = 0;
    for (size_t i = 0; i < n; i++) nments += pkg_skip(pkgs[i]) ? 0 : pkgs[i]->nments;
    g->lk = malloc((nrecs + nments + 1) * sizeof *g->lk);
    g->fe = malloc((nrecs + nments + 1) * sizeof *g->fe);
    size_t tcap = 16;
    while (tcap < 2 * nrecs) tcap *= 2;
    g->done = (oidset){calloc(tcap, sizeof(uint64_t)), calloc(tcap, sizeof(uint64_t)),
                       calloc(tcap, sizeof(gwriter)), tcap - 1};
    g->logb = malloc(nrecs * 8 + 1);
    g->mine = calloc(n, sizeof *g->mine);
    if (!g->lk || !g->fe || !g->done.k || !g->done.v || !g->done.w || !g->logb || !g->mine)
        return false;
    for (size_t i = 0; i < n; i++) g->mine[i] = !pkg_skip(pkgs[i]);
    size_t nl = 0, nf = 0;
    for (size_t i = 0; i < n; i++) {
        if (!g->mine[i]) continue;
        const ost__pkg *p = pkgs[i];
        for (size_t j = 0; j < p->nrecs; j++)
            if (p->recs[j].read_serial) {
                g->lk[nl++] = p->recs[j].oid;
                if (g->s->e->host->resolvable(p, j)) g->fe[nf++] = p->recs[j].oid;
            }
        for (size_t j = 0; j < p->nments; j++) g->lk[nl++] = g->fe[nf++] = p->ments[j].map;
    }
    g->ncount = nments;
    g->nl = nl = ost__sort_unique(g->lk, nl);
    g->nf = nf = ost__sort_unique(g->fe, nf);
    arr_begin(&g->al, OIDTYPE_INT8);
    for (size_t i = 0; i < nl; i++) arr_add_i64(&g->al, g->lk[i]);
    arr_begin(&g->af, OIDTYPE_INT8);
    for (size_t i = 0; i < nf; i++) arr_add_i64(&g->af, g->fe[i]);
    return !arr_end(&g->al) && !arr_end(&g->af);
}

/* The counters of the group, as stored (rows of rf), into g->ctr: false
 * when one is not there (pack removed it: the other path says so) or
 * memory ran out. */
static bool fast_counters(fastgroup *g, const PGresult *rf) {
    if (!g->ncount) return true;
    if (!(g->ctr = calloc(g->ncount, sizeof *g->ctr))) return false;
    for (size_t i = 0; i < g->n; i++)
        for (size_t j = 0; g->mine[i] && j < g->pkgs[i]->nments; j++) {
            uint64_t oid = g->pkgs[i]->ments[j].map;
            bool have = false;
            for (size_t q = 0; q < g->nctr && !have; q++) have = g->ctr[q].oid == oid;
            if (have) continue;
            int r = row_of(rf, oid);
            if (r < 0) return false;
            size_t len = (size_t)PQgetlength(rf, r, 2);
            gcounter c = {oid, 0, rd32(PQgetvalue(rf, r, 1)), malloc(len ? len : 1), len};
            if (!c.state) return false;
            memcpy(c.state, PQgetvalue(rf, r, 2), len);
            size_t q = g->nctr++; /* kept by oid ascending */
            while (q && g->ctr[q - 1].oid > oid) {
                g->ctr[q] = g->ctr[q - 1];
                q--;
            }
            g->ctr[q] = c;
        }
    return true;
}

/* Round trip 1: begins the transaction, locks the rows and the meta row,
 * and reads the locked rows' serials (*rl, NULL when none is locked),
 * meta's last serial and low, and the states of g->fe (*rf, NULL when
 * none), the counters among them into g->ctr. FAST_ON, FAST_OUT (the
 * pipeline failed: nothing was written, the other path says what is
 * wrong) or FAST_ROLLBACK (an answer the path cannot use). */
static int fast_lock(fastgroup *g, PGresult **rl, PGresult **rf, uint64_t *last, uint64_t *low) {
    ost__sess *s = g->s;
    params ql = {0}, qf = {0};
    p_bytes(&ql, g->al.b, g->al.n);
    p_bytes(&qf, g->af.b, g->af.n);
    pstmt st1[5];
    int k = 0, at_lock = -1, at_fetch = -1;
    st1[k++] = (pstmt){-1, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL};
    if (g->nl) {
        at_lock = k;
        st1[k++] = (pstmt){PS_LOCK, NULL, &ql};
    }
    int at_meta = k;
    st1[k++] = (pstmt){PS_META_LOCK, NULL, NULL};
    if (g->nf) { /* after the locks: the rows hold still */
        at_fetch = k;
        st1[k++] = (pstmt){-1, "SELECT oid, cid, state FROM ost_records WHERE oid = "
                               "ANY($1::bigint[]) ORDER BY oid", &qf};
    }
    g->k = k;
    int failed;
    s->write = true;
    if (ost__pg_pipe_run(s, "commit: locking records", st1, k, g->res, &failed)) {
        if (s->conn) PQclear(PQexec(s->conn, "ROLLBACK"));
        return FAST_OUT; /* nothing was written: the other path says what is wrong */
    }
    PGresult *rm = g->res[at_meta];
    *rl = at_lock >= 0 ? g->res[at_lock] : NULL;
    /* the columns checked as ost__pg_run_ps checks them (a pipeline's results do
     * not pass through it); a result of another shape goes to the other
     * path, whose ost__pg_run_ps says what is wrong */
    if (*rl && ost__pg_res_check(s->e, *rl, "commit: locking records", ost__pg_ps_shape[PS_LOCK]))
        return FAST_ROLLBACK;
    if (PQntuples(rm) != 1 || PQgetlength(rm, 0, 0) != 8 || PQgetlength(rm, 0, 1) != 8)
        return FAST_ROLLBACK;
    *last = rd64(PQgetvalue(rm, 0, 0));
    *low = rd64(PQgetvalue(rm, 0, 1));
    if (*last >= OST__SERIAL_LIMIT - 1 - GROUP_MAX) return FAST_ROLLBACK;
    *rf = at_fetch >= 0 ? g->res[at_fetch] : NULL;
    if (*rf && ost__pg_res_check(s->e, *rf, "commit: reading states", "LIB")) return FAST_ROLLBACK;
    return fast_counters(g, *rf) ? FAST_ON : FAST_ROLLBACK;
}

/* The checks, package by package in the group's order, against the locked
 * rows rl and the records of the packages accepted before (a conflict
 * going to the class's resolver where there is one, with the states rf
 * read), then its counters' adds: a package that fails gets its outcome,
 * one that passes the next serial after last (*serial: the last one
 * given). FAST_ON, or FAST_ROLLBACK when a package needs the other path
 * (a pack moved low under its references, a state not at hand). */
static int fast_check(fastgroup *g, const PGresult *rl, const PGresult *rf, uint64_t last,
                      uint64_t low, uint64_t *serial) {
    int nt = rl ? PQntuples(rl) : 0;
    *serial = last;
    for (size_t i = 0; i < g->n; i++) {
        ost__pkg *p = g->pkgs[i];
        if (!g->mine[i]) continue;
        if (p->nrefs && low != p->low) return FAST_ROLLBACK; /* pack: the references need a look */
        int rc = 0;
        for (size_t j = 0; j < p->nrecs && !rc; j++) {
            ost__rec *rec = &p->recs[j];
            if (!rec->read_serial) continue;
            uint64_t *slot = oidset_slot(&g->done, rec->oid);
            if (*slot) { /* an earlier package of the group writes it */
                uint64_t cur = g->done.v[slot - g->done.k];
                if (cur != rec->read_serial && g->s->e->host->resolvable(p, j))
                    rc = group_resolve(g->s->e, p, j, cur, &g->done.w[slot - g->done.k], rf);
                else if (cur != rec->read_serial)
                    rc = g->s->e->host->conflict(p, OST__CONFL_CHANGED, rec->oid, cur, rec->read_serial);
                if (rc == 1) return FAST_ROLLBACK;
                continue;
            }
            int lo = 0, hi = nt;
            while (lo < hi) {
                int mid = (lo + hi) / 2;
                if (rd64(PQgetvalue(rl, mid, 0)) < rec->oid) lo = mid + 1;
                else hi = mid;
            }
            if (lo == nt || rd64(PQgetvalue(rl, lo, 0)) != rec->oid)
                rc = g->s->e->host->conflict(p, OST__CONFL_REMOVED, rec->oid, 0, 0);
            else if (rd64(PQgetvalue(rl, lo, 1)) != rec->read_serial && g->s->e->host->resolvable(p, j))
                rc = group_resolve(g->s->e, p, j, rd64(PQgetvalue(rl, lo, 1)), NULL, rf);
            else if (rd64(PQgetvalue(rl, lo, 1)) != rec->read_serial)
                rc = g->s->e->host->conflict(p, OST__CONFL_CHANGED, rec->oid,
                                       rd64(PQgetvalue(rl, lo, 1)), rec->read_serial);
            if (rc == 1) return FAST_ROLLBACK;
        }
        /* a merge may refer to objects the package did not */
        if (!rc && p->nrefs && low != p->low) return FAST_ROLLBACK;
        if (!rc && p->nments) rc = group_counts(g->s->e->host, p, g->ctr, g->nctr, *serial + 1);
        if (rc == 1) return FAST_ROLLBACK;
        if (rc) {
            p->rc = rc;
            continue;
        }
        p->serial = ++*serial;
        for (size_t j = 0; j < p->nrecs; j++) {
            uint64_t *slot = oidset_slot(&g->done, p->recs[j].oid);
            *slot = p->recs[j].oid + 1;
            g->done.v[slot - g->done.k] = p->serial;
            g->done.w[slot - g->done.k] = (gwriter){p, j};
        }
    }
    return FAST_ON;
}

/* Round trip 2: writes the accepted packages' records with their serials,
 * their commit log rows and the last serial, commits and waits for the
 * flush. FAST_DONE with *whole (a failure after the COMMIT went out is
 * each accepted package's), FAST_ROLLBACK (out of memory), or
 * FAST_RESTORE (the server refused the write or the COMMIT: nothing is
 * committed, the transaction is rolled back). */
static int fast_write(fastgroup *g, uint64_t serial, int *whole) {
    ost__sess *s = g->s;
    ost__pkg *const *pkgs = g->pkgs;
    size_t n = g->n;
    arr_begin(&g->ao, OIDTYPE_INT8);
    arr_begin(&g->asr, OIDTYPE_INT8);
    arr_begin(&g->ac, OIDTYPE_INT4);
    arr_begin(&g->ast, OIDTYPE_BYTEA);
    arr_begin(&g->ls, OIDTYPE_INT8);
    arr_begin(&g->lg, OIDTYPE_BYTEA);
    uint8_t *o = g->logb;
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        if (!g->mine[i] || !p->serial) continue;
        uint8_t *l0 = o;
        for (size_t j = 0; j < p->nrecs; j++) {
            ost__rec *r = &p->recs[j];
            arr_add_i64(&g->ao, r->oid);
            arr_add_i64(&g->asr, p->serial);
            arr_add_i32(&g->ac, r->cid);
            arr_add(&g->ast, p->bytes + r->off, r->len);
            if (r->read_serial) {
                ost__be64(o, r->oid);
                o += 8;
            }
        }
        arr_add_i64(&g->ls, p->serial);
        arr_add(&g->lg, l0, (size_t)(o - l0));
    }
    for (size_t q = 0; q < g->nctr; q++) /* the counters added to: their new records */
        if (g->ctr[q].serial) {
            arr_add_i64(&g->ao, g->ctr[q].oid);
            arr_add_i64(&g->asr, g->ctr[q].serial);
            arr_add_i32(&g->ac, g->ctr[q].cid);
            arr_add(&g->ast, g->ctr[q].state, g->ctr[q].len);
        }
    if (arr_end(&g->ao) || arr_end(&g->asr) || arr_end(&g->ac) || arr_end(&g->ast) ||
        arr_end(&g->ls) || arr_end(&g->lg))
        return FAST_ROLLBACK;
    params qw = {0};
    p_bytes(&qw, g->ao.b, g->ao.n);
    p_bytes(&qw, g->asr.b, g->asr.n);
    p_bytes(&qw, g->ac.b, g->ac.n);
    p_bytes(&qw, g->ast.b, g->ast.n);
    p_bytes(&qw, g->ls.b, g->ls.n);
    p_bytes(&qw, g->lg.b, g->lg.n);
    p_i64(&qw, serial);
    for (int i = 0; i < g->k; i++) {
        PQclear(g->res[i]);
        g->res[i] = NULL;
    }
    /* COMMIT answers once the server flushed its commit record (the
     * session's synchronous_commit: ost__pg_commit's comment) */
    pstmt st2[2] = {{PS_GWRITE, NULL, &qw}, {-1, "COMMIT", NULL}};
    int n2 = 2, failed;
    int rc = ost__pg_pipe_run(s, "commit", st2, n2, g->res, &failed);
    bool broken = rc && failed == n2;
    if (rc && !broken && failed < 2) {
        /* the write or the COMMIT failed and the server said so: nothing
         * is committed; roll back, the other path takes the group */
        PQclear(PQexec(s->conn, "ROLLBACK"));
        if (PQstatus(s->conn) == CONNECTION_OK) return FAST_RESTORE;
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
    return FAST_DONE;
}

/* Every package this path took as it came: the other path decides. */
static void fast_restore(fastgroup *g) {
    for (size_t i = 0; i < g->n; i++) /* as they came: the other path decides */
        if (g->mine[i]) {
            g->pkgs[i]->rc = 0;
            g->pkgs[i]->msg[0] = 0;
            g->pkgs[i]->serial = 0;
            g->pkgs[i]->conflict_oid = UINT64_MAX;
        }
}

/* Frees what g holds; the session's transaction is no longer a commit's. */
static void fast_free(fastgroup *g) {
    g->s->write = false;
    for (size_t i = 0; i < sizeof g->res / sizeof *g->res; i++) PQclear(g->res[i]);
    arr_free(&g->al);
    arr_free(&g->af);
    for (size_t q = 0; q < g->nctr; q++) free(g->ctr[q].state);
    free(g->ctr);
    free(g->fe);
    arr_free(&g->ao);
    arr_free(&g->asr);
    arr_free(&g->ac);
    arr_free(&g->ast);
    arr_free(&g->ls);
    arr_free(&g->lg);
    free(g->logb);
    free(g->mine);
    free(g->lk);
    free(g->done.k);
    free(g->done.v);
    free(g->done.w);
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
    fastgroup g = {.s = s, .pkgs = pkgs, .n = n};
    PGresult *rl = NULL, *rf = NULL;
    uint64_t last = 0, low = 0, serial = 0;
    int step = fast_setup(&g, nrecs) ? fast_lock(&g, &rl, &rf, &last, &low) : FAST_OUT;
    if (step == FAST_ON) step = fast_check(&g, rl, rf, last, low, &serial);
    if (step == FAST_ON && serial == last) { /* every package conflicted: nothing to write */
        PQclear(PQexec(s->conn, "ROLLBACK"));
        *whole = 0;
        step = FAST_DONE;
    }
    if (step == FAST_ON) step = fast_write(&g, serial, whole);
    if (step == FAST_ROLLBACK) PQclear(PQexec(s->conn, "ROLLBACK"));
    if (step == FAST_ROLLBACK || step == FAST_RESTORE) fast_restore(&g);
    fast_free(&g);
    return step == FAST_DONE;
}
