/* The PostgreSQL engine's sessions and snapshots (pg.h): a session's
 * snapshot begins in one round trip (a pipeline that also ends the old
 * one and reads the commit log since), and after a commit the sessions of
 * the group adopt one view polled for all of them ("views after a
 * commit" below). Also whether a read may run (ost__pg_read_ready). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* ---- sessions and snapshots ------------------------------------------------------ */

int ost__pg_sess_open(ost__engine *e, ost__sess **out) {
    ost__sess *s = calloc(1, sizeof *s);
    if (!s) return ost__pg_fail(e, OST_ENOMEM, "out of memory");
    s->e = e;
    *out = s;
    return 0;
}

static void lazy_end(ost__sess *s);

/* Ends the snapshot. The COMMIT goes out without waiting for its answer
 * (the server ends the transaction at once, and the session reads the
 * answer at its next statement, drain): one round trip less a
 * transaction. */
void ost__pg_snap_end(ost__sess *s) {
    lazy_end(s);
    s->lost = false;
    if (s->snap && s->conn && PQstatus(s->conn) == CONNECTION_OK) {
        if (PQsendQuery(s->conn, "COMMIT")) s->end_sent = true;
        else PQclear(PQexec(s->conn, "COMMIT"));
    }
    s->snap = false;
    PQclear(s->pre);
    s->pre = NULL;
    ost__pg_keep_clear(s);
}

void ost__pg_sess_close(ost__sess *s) {
    if (!s) return;
    ost__pg_snap_end(s);
    /* the newest view ends with the connections that could adopt it: a
     * handle whose connections closed holds no snapshot */
    if (!s->is_view) ost__pg_views_end(s->e);
    ost__pg_drain(s);
    ost__pg_help_close(s, true);
    if (s->conn) PQfinish(s->conn);
    free(s->kept);
    free(s);
}

/* Reads meta's counters in the open transaction. */
int ost__pg_read_meta(ost__sess *s, ost__snapinfo *info) {
    int rc = 0;
    PGresult *r = ost__pg_run_as(s->e, s->conn, "reading meta",
                                 "SELECT last_serial, low, next_oid FROM ost_meta WHERE id = 1",
                                 NULL, &rc, NULL, "LLL");
    if (!r) return rc;
    if (PQntuples(r) != 1) {
        PQclear(r);
        return ost__pg_fail(s->e, OST_ECORRUPT, "%s: damaged meta (no row)", s->e->shown);
    }
    info->last_serial = rd64(PQgetvalue(r, 0, 0));
    info->low = rd64(PQgetvalue(r, 0, 1));
    info->next_oid = rd64(PQgetvalue(r, 0, 2));
    PQclear(r);
    return 0;
}

/* ost__pg_snap_begin's first half: sends its round trip without waiting for
 * the answer, which snap_recv reads. 0, or the failure (nothing sent). */
static int snap_send(ost__sess *s, snapsend *ss) {
    lazy_end(s);
    s->lost = false;
    bool end = s->snap; /* the open snapshot's COMMIT goes first */
    if (end) {
        s->snap = false;
        PQclear(s->pre);
        s->pre = NULL;
        ost__pg_keep_clear(s);
    }
    PGconn *was = s->conn;
    int rc = ost__pg_sess_conn(s);
    if (rc) return rc;
    if (s->conn != was) end = false; /* a new connection: nothing to end */
    uint64_t from = s->info.last_serial;
    bool pre = s->had_snap;
    if ((rc = ost__pg_ps_ready(s, PS_META)) || (pre && (rc = ost__pg_ps_ready(s, PS_CHANGES)))) {
        /* ost__pg_ps_ready's message, copied: formatting the store's message
         * from itself wrote over what it read ("beginning a snapshot:"
         * twice, the cause cut) */
        char cause[300];
        const char *m = s->e->host->errmsg(s->e->st);
        size_t n = strlen(s->e->shown);
        if (!strncmp(m, s->e->shown, n) && !strncmp(m + n, ": ", 2)) m += n + 2;
        snprintf(cause, sizeof cause, "%s", m);
        return ost__pg_fail(s->e, rc, "%s: beginning a snapshot: %s", s->e->shown, cause);
    }
    params q = {0};
    p_i64(&q, from);
    p_i64(&q, (uint64_t)INT64_MAX);
    p_i64(&q, (uint64_t)PAGE_ROWS);
    pstmt st[4] = {{-1, "COMMIT", NULL},
                   {-1, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", NULL},
                   {PS_META, NULL, NULL},
                   {PS_CHANGES, NULL, &q}};
    s->snap = true; /* ost__pg_snap_end ends what was begun, whatever fails */
    *ss = (snapsend){end, pre, false, (end ? 1 : 0) + (pre ? 3 : 2), from};
    TRIP();
    ss->sent = ost__pg_pipe_send(s->conn, end ? st : st + 1, ss->n);
    return 0;
}

/* ost__pg_snap_begin's second half: reads the answer to what snap_send sent
 * (ss). 0 or the failure (the snapshot is then ended). */
static int snap_recv(ost__sess *s, const snapsend *ss, ost__snapinfo *info) {
    bool end = ss->end, pre = ss->pre;
    uint64_t from = ss->from;
    PGresult *all[4] = {NULL}, **res = all + 1;
    int failed;
    char cause[240];
    int rc =
        ost__pg_pipe_recv(s->conn, ss->sent, ss->n, end ? all : res, &failed, cause, sizeof cause);
    if (rc) {
        ost__pg_pipe_fail(s, "beginning a snapshot", rc, failed == ss->n, cause);
        ost__pg_snap_end(s);
        return rc;
    }
    PQclear(all[0]);
    PGresult *r = res[1];
    bool ok = PQntuples(r) == 1;
    int bad =
        ok ? ost__pg_res_check(s->e, r, "beginning a snapshot (meta)", ost__pg_ps_shape[PS_META])
           : 0;
    if (!bad && pre) bad = ost__pg_res_check(s->e, res[2], "beginning a snapshot (the commit log)",
                                             ost__pg_ps_shape[PS_CHANGES]);
    ok = ok && !bad;
    if (ok) {
        /* a negative counter, which only damage writes, becomes the u64
         * of the same bits: the store's checks report it as absurd */
        s->info.last_serial = rd64(PQgetvalue(r, 0, 0));
        s->info.low = rd64(PQgetvalue(r, 0, 1));
        s->info.next_oid = rd64(PQgetvalue(r, 0, 2));
    }
    PQclear(res[0]);
    PQclear(r);
    if (!ok) {
        PQclear(pre ? res[2] : NULL);
        ost__pg_snap_end(s);
        return bad ? bad : ost__pg_fail(s->e, OST_ECORRUPT, "%s: damaged meta (no row)", s->e->shown);
    }
    s->had_snap = true;
    /* the helpers of large reads connect with the session's first
     * snapshot, not inside its first prefetch: a connection costs 12-14 ms
     * on the development machine, a tenth of a fresh connection's first
     * 20,000 prefetched reads (a failure only makes the session read
     * alone) */
    if (s->e->par > 1 && !s->help_off) (void)ost__pg_help_connect(s, s->e->par - 1);
    if (pre) {
        /* complete up to the last row when the page is full, else up to
         * the snapshot's last serial */
        int nt = PQntuples(res[2]);
        s->pre = res[2];
        s->pre_from = from;
        s->pre_to = nt == PAGE_ROWS ? rd64(PQgetvalue(res[2], nt - 1, 0)) : s->info.last_serial;
    }
    if (info) *info = s->info;
    return 0;
}

/* Begins the snapshot and reads meta in one round trip (a pipeline of
 * prepared statements), ending the open one first in the same round trip
 * (snap_renew). After a first snapshot, the same round trip reads the
 * commit log rows since the previous one's last serial (a page of them at
 * most), which changes then serves: the rows a REPEATABLE READ snapshot
 * sees are those of the commits meta's last_serial counts, as they commit
 * together. */
int ost__pg_snap_begin(ost__sess *s, ost__snapinfo *info) {
    snapsend ss;
    int rc = snap_send(s, &ss);
    return rc ? rc : snap_recv(s, &ss, info);
}

/* ---- views after a commit (snap_adopt) -------------------------------------------------
 * Right after a commit, every connection whose package it carried begins
 * its next transaction (store/conn.c, begin_txn). Each used to renew its
 * snapshot on its own server connection: a round trip that, at 16
 * committing threads, cost the server processes about 67 us of CPU per
 * commit, more than the commit itself. Instead, the session that made the
 * commit (the group committer's, most often) polls once for all of them,
 * on a connection of the engine's own: it begins a REPEATABLE READ
 * snapshot there and reads meta and the commit log rows since the last
 * poll, in one round trip (ost__pg_snap_begin), and publishes it as the
 * current view. Each session of the group then adopts that view: it takes
 * the view's counters and log rows (the store's invalidations need no
 * more) and opens nothing on its own connection. Only when the
 * transaction reads from the server does the session begin its own
 * transaction on the view's snapshot (pg_export_snapshot on the view's
 * connection, once a view; SET TRANSACTION SNAPSHOT on the session's): it
 * sees exactly what the view saw, whatever committed since. A view's
 * snapshot stays open while it is current or adopted and not imported;
 * then its transaction ends. NVIEWS views at most: when none is free, no
 * poll is made and the sessions renew as before. */

/* Under e->vlock: ends the view's snapshot once no session may still
 * import it. */
static void view_idle(pgview *v) {
    if (v->refs || v->current || v->busy || !v->s) return;
    if (v->s->snap) ost__pg_snap_end(v->s);
    v->snapid[0] = 0;
}

/* Drops the session's adopted view, if any: its snapshot is no longer the
 * view's. */
static void lazy_end(ost__sess *s) {
    if (s->pre_shared) {
        s->pre = NULL;
        s->pre_shared = false;
    }
    pgview *v = s->lazy;
    if (!v) return;
    s->lazy = NULL;
    pthread_mutex_lock(&s->e->vlock);
    v->refs--;
    view_idle(v);
    pthread_mutex_unlock(&s->e->vlock);
}

/* Ends every view no session holds (a drop or an import must lock the
 * tables, which an open snapshot's table locks would block). */
void ost__pg_views_end(ost__engine *e) {
    pthread_mutex_lock(&e->vlock);
    for (int i = 0; i < NVIEWS; i++) {
        e->views[i].current = false;
        view_idle(&e->views[i]);
    }
    e->view_last = 0; /* an import may start the serials over */
    pthread_mutex_unlock(&e->vlock);
}

/* Closes the views' sessions (the engine closes: no session is left). */
void ost__pg_views_close(ost__engine *e) {
    for (int i = 0; i < NVIEWS; i++) {
        pgview *v = &e->views[i];
        ost__pg_sess_close(v->s);
        v->s = NULL;
        v->refs = 0;
        v->current = v->busy = false;
        v->snapid[0] = 0;
    }
}

/* Marks v, whose poll ended with rc, no longer busy: the current view if
 * the poll succeeded and no newer view came meanwhile, else idle. */
static void view_done(ost__engine *e, pgview *v, int rc) {
    pthread_mutex_lock(&e->vlock);
    v->busy = false;
    if (!rc && v->s->info.last_serial >= e->view_last) {
        for (int i = 0; i < NVIEWS; i++)
            if (e->views[i].current) {
                e->views[i].current = false;
                view_idle(&e->views[i]);
            }
        v->current = true;
        v->snapid[0] = 0;
        e->view_last = v->s->info.last_serial;
    } else
        view_idle(v); /* failed, or a newer view came meanwhile */
    pthread_mutex_unlock(&e->vlock);
}

/* The store's message, kept across a view's poll: a poll's failure is no
 * failure of the commit that made it. */
static void msg_keep(ost__engine *e, char *msg, size_t cap) {
    snprintf(msg, cap, "%s", e->host->errmsg(e->st));
}

static void msg_back(ost__engine *e, int rc, const char *msg) {
    if (rc && msg[0]) ost__pg_fail(e, rc, "%s", msg);
    else if (rc) e->host->clear(e->st);
}

/* After a commit, the first half of a view's poll: takes a free view and
 * sends the beginning of its snapshot (ss), with the commit log rows
 * after `from` (or after the last view's serial, if lower), without
 * waiting for the answer (view_recv reads it). The view, busy; NULL when
 * none is free or the send failed (the sessions then renew). The
 * caller's message of the store is kept. */
static pgview *view_send(ost__engine *e, uint64_t from, snapsend *ss) {
    pgview *v = NULL;
    pthread_mutex_lock(&e->vlock);
    for (int i = 0; i < NVIEWS && !v; i++) {
        pgview *w = &e->views[i];
        if (!w->busy && !w->current && !w->refs) v = w;
    }
    if (v) {
        v->busy = true;
        if (e->view_last && e->view_last < from) from = e->view_last;
    }
    pthread_mutex_unlock(&e->vlock);
    if (!v) return NULL;
    char msg[512]; /* the store's message buffer's size (store.c) */
    msg_keep(e, msg, sizeof msg);
    int rc = 0;
    if (!v->s && !(rc = ost__pg_sess_open(e, &v->s))) {
        v->s->help_off = true; /* no prefetch helpers */
        v->s->is_view = true;
    }
    if (!rc) {
        v->s->info.last_serial = from; /* its log rows start after from */
        v->s->had_snap = true;
        rc = snap_send(v->s, ss);
        /* not sent: snap_recv closes the connection and ends the snapshot */
        if (!rc && !ss->sent) rc = snap_recv(v->s, ss, NULL);
    }
    if (rc) {
        view_done(e, v, rc);
        v = NULL;
    }
    msg_back(e, rc, msg);
    return v;
}

/* The second half: reads the answer to what view_send sent for v (ss).
 * keep: v becomes the store's current view (views after a commit,
 * above); else the snapshot is read and dropped. The caller's message of
 * the store is kept. */
static void view_recv(ost__engine *e, pgview *v, const snapsend *ss, bool keep) {
    char msg[512];
    msg_keep(e, msg, sizeof msg);
    int rc = snap_recv(v->s, ss, NULL);
    view_done(e, v, rc ? rc : keep ? 0 : OST_ENOTFOUND);
    msg_back(e, rc, msg);
}

/* After a commit: a view of the store as it is now, in one round trip
 * (view_send, view_recv). */
void ost__pg_view_poll(ost__engine *e, uint64_t from) {
    snapsend ss;
    pgview *v = view_send(e, from, &ss);
    if (v) view_recv(e, v, &ss, true);
}

int ost__pg_snap_adopt(ost__sess *s, uint64_t serial, uint64_t after, ost__snapinfo *info) {
    ost__engine *e = s->e;
    pgview *v = NULL;
    pthread_mutex_lock(&e->vlock);
    for (int i = 0; i < NVIEWS && !v; i++)
        if (e->views[i].current) v = &e->views[i];
    /* new enough, and its log rows cover what the store asks changes for
     * (after this session's last snapshot): else renewing costs less than
     * importing the view for the rest of the log */
    const ost__sess *vs = v ? v->s : NULL;
    if (vs && vs->info.last_serial >= serial && vs->info.last_serial >= s->info.last_serial &&
        vs->pre && after >= vs->pre_from && vs->pre_to >= vs->info.last_serial)
        v->refs++;
    else
        v = NULL;
    pthread_mutex_unlock(&e->vlock);
    if (!v) return OST_ENOTFOUND;
    /* the open snapshot ends (its COMMIT is not waited for) */
    ost__pg_snap_end(s);
    /* the view's session changes only when no session holds it */
    s->lazy = v;
    s->pre = v->s->pre;
    s->pre_shared = true;
    s->pre_from = v->s->pre_from;
    s->pre_to = v->s->pre_to;
    s->info = v->s->info;
    s->had_snap = true;
    OST__COUNT(pg_adopted, 1); /* tests: testctl.h */
    if (info) *info = s->info;
    return 0;
}

/* Whether id looks like what pg_export_snapshot returns (hex digits and
 * dashes): it goes into a statement's text. */
static bool snapid_ok(const char *id) {
    if (!*id) return false;
    for (; *id; id++)
        if (!(*id == '-' || (*id >= '0' && *id <= '9') || (*id >= 'A' && *id <= 'F') ||
              (*id >= 'a' && *id <= 'f')))
            return false;
    return true;
}

/* Begins the session's transaction on the snapshot named id: 0 or the
 * failure. A connection the server closed while it sat idle (nothing
 * tells before it is used) is made again once: the view still holds the
 * snapshot. */
static int import_on(ost__sess *s, const char *id) {
    ost__engine *e = s->e;
    char sql[160];
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SET TRANSACTION SNAPSHOT '%s'", id);
    int rc = 0;
    for (int tries = 0; tries < 2; tries++) {
        if ((rc = ost__pg_sess_conn(s))) return rc;
        rc = ost__pg_exec_simple(e, s->conn, "beginning this transaction's snapshot", sql);
        if (!rc) return 0;
        if (PQstatus(s->conn) == CONNECTION_OK) {
            if (PQtransactionStatus(s->conn) != PQTRANS_IDLE) PQclear(PQexec(s->conn, "ROLLBACK"));
            return rc;
        }
    }
    return rc;
}

/* A read of a session with an adopted view: its own transaction begins
 * on the view's snapshot. Whatever happens, the view is released; on
 * failure the snapshot is lost: reads fail (OST_EIO) until it ends. */
static int view_import(ost__sess *s) {
    ost__engine *e = s->e;
    pgview *v = s->lazy;
    char id[sizeof v->snapid] = "", cause[240] = "the connection to the server was lost";
    /* the session's ref keeps the view's snapshot (and session) as they
     * are; importers of the same view take turns on its connection */
    pthread_mutex_lock(&v->xlock);
    if (!v->snapid[0] && v->s->conn && PQstatus(v->s->conn) == CONNECTION_OK) {
        PGresult *r = PQexec(v->s->conn, "SELECT pg_export_snapshot()");
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
            PQgetlength(r, 0, 0) < (int)sizeof v->snapid && snapid_ok(PQgetvalue(r, 0, 0)))
            snprintf(v->snapid, sizeof v->snapid, "%s", PQgetvalue(r, 0, 0));
        else
            ost__pg_cause(v->s->conn, r, cause, sizeof cause);
        PQclear(r);
    }
    snprintf(id, sizeof id, "%s", v->snapid);
    pthread_mutex_unlock(&v->xlock);
    int rc = id[0] ? import_on(s, id) : OST_EIO;
    if (rc && id[0]) snprintf(cause, sizeof cause, "%s", e->host->errmsg(e->st));
    lazy_end(s); /* imported or lost: the view is not needed */
    if (rc) {
        s->lost = true;
        return ost__pg_fail(e, rc, "%s: cannot share this transaction's snapshot: %s (abort and retry)",
                            e->shown, cause);
    }
    s->snap = true;
    OST__COUNT(pg_imported, 1); /* tests: testctl.h */
    return 0;
}

bool ost__pg_snap_moved(ost__sess *s) {
    (void)s;
    return false; /* a REPEATABLE READ snapshot never moves */
}

/* Pins hold nothing more here: the snapshot never reopens by itself, and
 * every view stays valid until snap_end (keep). */
int ost__pg_pin(ost__sess *s) {
    s->pins++;
    return 0;
}

void ost__pg_unpin(ost__sess *s) {
    if (s->pins) s->pins--;
}

/* Whether a read may run: in a snapshot, inside commit, or (tools, tests)
 * in autocommit on a live connection. */
int ost__pg_read_ready(ost__sess *s) {
    if (s->snap || s->write) return 0;
    if (s->lazy) return view_import(s);
    if (s->lost)
        return ost__pg_fail(s->e, OST_EIO,
                            "%s: this transaction's snapshot was lost: abort and retry", s->e->shown);
    return ost__pg_sess_conn(s);
}

size_t ost__pg_views_mark(ost__sess *s) { return s->nkept; }

void ost__pg_views_release(ost__sess *s, size_t mark) {
    while (s->nkept > mark) PQclear(s->kept[--s->nkept]);
}
