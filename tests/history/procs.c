/* The history test's multi-process part (history procs ADDR SEED KILLS):
 * two worker processes (two connections each, a transaction on one or the
 * other; every other incarnation with group commit) run the same kind of
 * random transactions on one store while the parent kills them
 * (SIGKILL) or, on PostgreSQL, kills the server (tests/pg/pgkill.h: the
 * postmaster and every backend, SIGKILL, then a restart with crash
 * recovery) or terminates the workers' backends.
 *
 * Each transaction of worker slot s reads what it is about to write (NW
 * objects or map keys), writes new values (map keys: set, or delete when
 * present), and sets its slot's marker object to the transaction's id.
 * Before committing, the worker appends an intent line to a shared log
 * ("I slot id: what it read and what it writes"); after ost_commit
 * returns 0, an acknowledgment with the commit's serial (the serial of its
 * marker's record, read in the next snapshot); after OST_ECONFLICT a
 * conflict line. When the commit's outcome is unknown (the worker was
 * killed, or the server went away under it), the marker settles it: the
 * transaction committed exactly when the marker holds its id.
 *
 * The check (after each kill and at the end) reads the store in one
 * snapshot, takes the commits it must hold (acknowledged ones with a
 * serial up to the snapshot's, and each slot's unsettled last one when
 * its marker says so), and replays them in serial order from the initial
 * state:
 *   - each commit read, of what it wrote, what the commit before it in
 *     serial order left (else an update was lost, or a conflict missed);
 *   - no two commits share a serial (an acknowledged commit lost and its
 *     serial given again);
 *   - the store holds exactly the replayed state: objects and their
 *     records' serials, markers, every map entry in order, the counts; so
 *     every acknowledged write is there, and nothing of a commit that did
 *     not happen (a partial commit would show as writes of no commit).
 *
 * A write may also add to the tally, an object whose class resolves
 * conflicts (ost_class_def.resolve: both sides' additions count), so
 * that concurrent additions merge instead of conflicting: the replay
 * does not check what such a write read, and the tally must hold exactly
 * the sum of the additions of the commits replayed (a merge lost, applied
 * twice, or applied by a commit that did not happen shows there). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "history.h"
#include "../pg/pgkill.h"

#define NSLOT 2
#define NW 3           /* writes a transaction makes at most */
#define TALLY (NOBJ + NMAP + NSLOT) /* the tally's place in the root's list */
#define ID_INC 1000000 /* ids: incarnation * ID_INC + sequence */

/* ---- the log ------------------------------------------------------------------ */

/* One write: item kind 'o' (object j), 'm' (map mi, key i) or 't' (the
 * tally); what the transaction read of it and what it wrote (-1: absent,
 * for map keys; for the tally, what it added). */
typedef struct {
    char kind;
    int mi, i;
    int64_t prev, next;
} hw;

typedef struct {
    int slot;
    int64_t id;
    int nw;
    hw w[NW];
    char outcome;    /* 'A' committed, 'C' conflict, 'N' not committed, 0: not known */
    uint64_t serial; /* for 'A' */
} htx;

static char g_logpath[600];

static void log_line(const char *line) {
    int fd = open(g_logpath, O_WRONLY | O_APPEND | O_CREAT, 0644);
    if (fd < 0) h_fail("open %s: %s", g_logpath, strerror(errno));
    size_t n = strlen(line);
    /* one write: a kill leaves a line whole or absent */
    if (write(fd, line, n) != (ssize_t)n) h_fail("write %s: %s", g_logpath, strerror(errno));
    close(fd);
}

/* Reads the log: transactions in the order their intents were logged,
 * with their outcomes. *n gets the count; the array is malloc'd. */
static htx *read_log(size_t *n) {
    FILE *f = fopen(g_logpath, "r");
    htx *t = NULL;
    size_t nt = 0, cap = 0;
    *n = 0;
    if (!f) return NULL;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        if (!strchr(line, '\n')) continue; /* a line cut by a kill: none are, one write each */
        int slot;
        long long id;
        char *p = line + 2;
        if (sscanf(p, "%d %lld", &slot, &id) != 2 || slot < 0 || slot >= NSLOT) continue;
        if (line[0] == 'I') {
            if (nt == cap) {
                cap = cap ? cap * 2 : 1024;
                t = realloc(t, cap * sizeof *t);
                if (!t) h_fail("out of memory");
            }
            htx *x = &t[nt++];
            memset(x, 0, sizeof *x);
            x->slot = slot;
            x->id = id;
            char *q = strchr(p, ':');
            while (q && x->nw < NW) {
                hw *w = &x->w[x->nw];
                int used = 0;
                long long pv, nv;
                if (sscanf(q + 1, " %c %d %d %lld %lld%n", &w->kind, &w->mi, &w->i, &pv, &nv, &used) != 5)
                    break;
                w->prev = pv;
                w->next = nv;
                x->nw++;
                q += 1 + used;
                q = strchr(q, ',');
            }
        } else if (line[0] == 'A' || line[0] == 'C' || line[0] == 'N') {
            for (size_t k = nt; k-- > 0;)
                if (t[k].slot == slot && t[k].id == id) {
                    t[k].outcome = line[0];
                    unsigned long long s = 0;
                    if (line[0] == 'A' && sscanf(p, "%*d %*d %llu", &s) == 1) t[k].serial = s;
                    break;
                }
        }
    }
    fclose(f);
    *n = nt;
    return t;
}

/* ---- the shared setup ------------------------------------------------------------ */

typedef struct {
    const char *addr; /* the store */
    char name[48];    /* root key: NOBJ objects, NMAP maps, NSLOT markers */
    ost_registry *reg;
    ost_value obj_cls, marker_cls, tally_cls;
    bool pg;
    uint64_t seed;
} penv;

static ost_value item(ost_conn *c, const penv *e, int i, int *rc) {
    ost_value lst = ost_root_get_c(c, e->name);
    if (!lst) {
        *rc = OST_EIO;
        return 0;
    }
    *rc = 0;
    return ost_item(lst, (size_t)i);
}

/* The marker of slot s in c's snapshot: its v and its record's serial. 0
 * or a code. */
static int read_marker(ost_conn *c, const penv *e, int s, int64_t *v, uint64_t *serial) {
    int rc;
    ost_value m = item(c, e, NOBJ + NMAP + s, &rc);
    if (rc) return rc;
    ost_value x = 0;
    if ((rc = ost_instance_getattr_ex(m, "v", &x))) return rc;
    *v = h_int(x, "marker.v");
    uint64_t oid = ost_oid(c, m);
    ost_iter *it;
    if ((rc = ost_iter_open(c, e->marker_cls, &it))) return rc;
    ost_record_info info;
    *serial = 0;
    while ((rc = ost_iter_next(it, &info, NULL)) == 0)
        if (info.oid == oid) {
            *serial = info.serial;
            break;
        }
    ost_iter_close(it);
    return rc == OST_ENOTFOUND ? OST_ECORRUPT : rc;
}

/* ---- a worker ------------------------------------------------------------------------ */

static volatile sig_atomic_t g_stop;
static void on_term(int sig) {
    (void)sig;
    g_stop = 1;
}

/* Settles transaction id of slot s, whose commit's outcome is unknown: in
 * a new snapshot, its marker holds id exactly when it committed. Retries
 * while the store cannot be read (the server restarting). */
static void settle(ost_conn *c, const penv *e, int s, int64_t id, const char *why) {
    for (int tries = 0;; tries++) {
        ost_abort(c);
        int64_t v;
        uint64_t serial;
        int rc = read_marker(c, e, s, &v, &serial);
        if (!rc) {
            char line[128];
            if (v == id)
                snprintf(line, sizeof line, "A %d %lld %llu %s\n", s, (long long)id,
                         (unsigned long long)serial, why);
            else
                snprintf(line, sizeof line, "N %d %lld %s\n", s, (long long)id, why);
            log_line(line);
            return;
        }
        if (!e->pg || tries > 600)
            h_fail("worker %d: reading its marker: %s: %s", s, ost_err_name(rc), ost_conn_errmsg(c));
        pgkill_sleep_ms(100);
    }
}

static _Noreturn void worker(const penv *e, int s, int inc) {
    signal(SIGTERM, on_term);
    /* a parent that fails ends its workers with it */
    prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (getppid() == 1) _exit(1);
    uint64_t rng = e->seed * 1000003u + (uint64_t)s * 7919u + (uint64_t)inc * 104729u;
    h_seed = e->seed;
    ost_store *st = NULL;
    /* two connections, a transaction on one or the other: each sees the
     * other's commits and the other process's at its next transaction */
    ost_conn *cs[2] = {NULL, NULL}, *c;
    for (int tries = 0;; tries++) {
        ost_store_options o;
        ost_store_options_init(&o);
        o.registry = e->reg;
        o.group_commit = (e->seed + (uint64_t)s + (uint64_t)inc) % 2; /* every other incarnation */
        st = ost_store_new();
        if (!st) h_fail("out of memory");
        int rc = ost_store_open(st, e->addr, &o);
        if (!rc && !(rc = ost_conn_open(st, &cs[0])) && !(rc = ost_conn_open(st, &cs[1]))) break;
        if (!e->pg || tries > 600)
            h_fail("worker %d: open: %s: %s", s, ost_err_name(rc), ost_store_errmsg(st));
        ost_conn_close(cs[0]);
        cs[0] = NULL;
        ost_store_close(st);
        pgkill_sleep_ms(100);
    }
    c = cs[0];
    /* the last transaction of the slot's previous incarnation, killed */
    size_t nt;
    htx *t = read_log(&nt);
    for (size_t k = nt; k-- > 0;)
        if (t[k].slot == s) {
            if (!t[k].outcome) settle(c, e, s, t[k].id, "after a kill");
            break;
        }
    free(t);
    int64_t seq = 0;
    while (!g_stop) {
        int64_t id = (int64_t)inc * ID_INC + ++seq;
        c = cs[h_below(&rng, 2)];
        ost_abort(c); /* a new snapshot */
        htx x = {.slot = s, .id = id};
        int nw = 1 + (int)h_below(&rng, NW), rc = 0;
        for (int k = 0; k < nw && !rc; k++) {
            hw w = {0};
            unsigned pick = (unsigned)h_below(&rng, 8);
            if (pick == 0) {
                w.kind = 't';
            } else if (pick < 3) {
                w.kind = 'o';
                w.i = (int)h_below(&rng, NOBJ);
            } else {
                w.kind = 'm';
                w.mi = (int)h_below(&rng, NMAP);
                w.i = (int)h_below(&rng, NKEY);
            }
            bool dup = false;
            for (int q = 0; q < x.nw; q++)
                dup |= x.w[q].kind == w.kind && x.w[q].mi == w.mi && x.w[q].i == w.i;
            if (dup) continue;
            w.next = id * 16 + k;
            if (w.kind == 't') {
                ost_value o = item(c, e, TALLY, &rc), v = 0;
                w.next = 1 + (int64_t)h_below(&rng, 9);
                if (!rc) rc = ost_instance_getattr_ex(o, "v", &v);
                if (!rc) {
                    w.prev = h_int(v, "tally.v");
                    rc = ost_instance_setattr(o, "v", ost_int(w.prev + w.next));
                }
            } else if (w.kind == 'o') {
                ost_value o = item(c, e, w.i, &rc), v = 0;
                if (!rc) rc = ost_instance_getattr_ex(o, "v", &v);
                if (!rc) {
                    w.prev = h_int(v, "obj.v");
                    rc = ost_instance_setattr(o, "v", ost_int(w.next));
                }
            } else {
                ost_value m = item(c, e, NOBJ + w.mi, &rc), v = 0, key = h_key(w.mi, w.i);
                if (!rc) rc = ost_map_get(c, m, key, &v);
                if (rc == OST_ENOTFOUND) {
                    w.prev = -1;
                    rc = 0;
                } else if (!rc) {
                    w.prev = h_int(v, "value");
                }
                if (!rc && w.prev >= 0 && h_below(&rng, 2)) {
                    w.next = -1;
                    rc = ost_map_del(c, m, key);
                } else if (!rc) {
                    rc = ost_map_set(c, m, ost_incref(key), ost_int(w.next));
                }
                ost_decref(key);
            }
            if (!rc) x.w[x.nw++] = w;
        }
        if (!rc) {
            int mrc;
            ost_value mk = item(c, e, NOBJ + NMAP + s, &mrc);
            rc = mrc ? mrc : ost_instance_setattr(mk, "v", ost_int(id));
        }
        if (rc) {
            /* a read failed before the commit: nothing logged, nothing to settle */
            if (!e->pg)
                h_fail("worker %d: transaction %lld: %s: %s", s, (long long)id, ost_err_name(rc),
                       ost_conn_errmsg(c));
            pgkill_sleep_ms(50);
            continue;
        }
        char line[512];
        int len = snprintf(line, sizeof line, "I %d %lld:", s, (long long)id);
        for (int k = 0; k < x.nw; k++)
            len += snprintf(line + len, sizeof line - (size_t)len, "%s %c %d %d %lld %lld", k ? "," : "",
                            x.w[k].kind, x.w[k].mi, x.w[k].i, (long long)x.w[k].prev, (long long)x.w[k].next);
        snprintf(line + len, sizeof line - (size_t)len, "\n");
        log_line(line);
        rc = ost_commit(c);
        if (rc == 0) {
            int64_t v;
            uint64_t serial;
            int r2 = read_marker(c, e, s, &v, &serial);
            if (r2 == 0 && v == id) {
                snprintf(line, sizeof line, "A %d %lld %llu\n", s, (long long)id, (unsigned long long)serial);
                log_line(line);
            } else if (r2 == 0) {
                h_fail("worker %d: transaction %lld committed, but the next snapshot's marker holds %lld", s,
                       (long long)id, (long long)v);
            } else {
                settle(c, e, s, id, "acknowledged; serial read later");
            }
        } else if (rc == OST_ECONFLICT) {
            snprintf(line, sizeof line, "C %d %lld\n", s, (long long)id);
            log_line(line);
            ost_abort(c);
        } else {
            if (!e->pg)
                h_fail("worker %d: commit of %lld: %s: %s", s, (long long)id, ost_err_name(rc),
                       ost_conn_errmsg(c));
            settle(c, e, s, id, "commit failed");
        }
    }
    ost_conn_close(cs[0]);
    ost_conn_close(cs[1]);
    ost_store_close(st);
    _exit(0);
}

/* ---- the check -------------------------------------------------------------------------- */

typedef struct {
    unsigned long checks, committed, conflicts, settled_after_kill, pending_committed, pending_not;
    unsigned long tally_adds; /* additions to the tally among the commits checked */
} pstats;

static int cmp_serial(const void *a, const void *b) {
    const htx *x = *(const htx *const *)a, *y = *(const htx *const *)b;
    return x->serial < y->serial ? -1 : x->serial > y->serial;
}

static void check(const penv *e, const char *when, pstats *ps) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.registry = e->reg;
    o.read_only = !e->pg;
    ost_store *st = ost_store_new();
    int rc = ost_store_open(st, e->addr, &o);
    if (rc) h_fail("%s: open: %s: %s", when, ost_err_name(rc), ost_store_errmsg(st));
    ost_conn *c = h_conn(st);
    /* the snapshot: objects, markers, entries */
    int64_t obj[NOBJ], mark[NSLOT], tally;
    uint64_t objser[NOBJ], markser[NSLOT], snap = 0;
    {
        ost_value x = 0, ob = item(c, e, TALLY, &rc);
        if (!rc) rc = ost_instance_getattr_ex(ob, "v", &x);
        if (rc) h_fail("%s: reading the tally: %s: %s", when, ost_err_name(rc), ost_conn_errmsg(c));
        tally = h_int(x, "tally.v");
    }
    for (int j = 0; j < NOBJ; j++) {
        ost_value x = 0;
        ost_value ob = item(c, e, j, &rc);
        if (!rc) rc = ost_instance_getattr_ex(ob, "v", &x);
        if (rc) h_fail("%s: reading obj%d: %s: %s", when, j, ost_err_name(rc), ost_conn_errmsg(c));
        obj[j] = h_int(x, "obj.v");
        uint64_t oid = ost_oid(c, ob);
        ost_iter *it;
        ost_record_info info;
        objser[j] = 0;
        if ((rc = ost_iter_open(c, e->obj_cls, &it))) h_fail("%s: ost_iter_open: %s", when, ost_err_name(rc));
        while (ost_iter_next(it, &info, NULL) == 0)
            if (info.oid == oid) objser[j] = info.serial;
        ost_iter_close(it);
    }
    for (int s = 0; s < NSLOT; s++) {
        if ((rc = read_marker(c, e, s, &mark[s], &markser[s])))
            h_fail("%s: reading marker %d: %s: %s", when, s, ost_err_name(rc), ost_conn_errmsg(c));
        if (markser[s] > snap) snap = markser[s];
    }
    bool has[NMAP][NKEY] = {{0}};
    int64_t val[NMAP][NKEY];
    uint64_t len[NMAP];
    for (int mi = 0; mi < NMAP; mi++) {
        ost_value m = item(c, e, NOBJ + mi, &rc);
        ost_map_cursor *cur;
        if (!rc) rc = ost_map_cursor_open(c, m, NULL, &cur);
        if (rc) h_fail("%s: cursor on map%d: %s", when, mi, ost_err_name(rc));
        ost_value kv, vv;
        int last = -1;
        while ((rc = ost_map_cursor_next(cur, &kv, &vv)) == 0) {
            int i = h_key_index(mi, kv);
            if (i <= last) h_fail("%s: map%d's cursor gave key %d after %d", when, mi, i, last);
            last = i;
            has[mi][i] = true;
            val[mi][i] = h_int(vv, "value");
        }
        ost_map_cursor_close(cur);
        if (rc != OST_ENOTFOUND) h_fail("%s: cursor step on map%d: %s", when, mi, ost_err_name(rc));
        if ((rc = ost_map_len(c, m, &len[mi]))) h_fail("%s: len(map%d): %s", when, mi, ost_err_name(rc));
    }
    ost_conn_close(c);
    ost_store_close(st);

    /* the commits the snapshot must hold, in serial order */
    size_t nt;
    htx *t = read_log(&nt);
    htx **com = malloc((nt + 1) * sizeof *com);
    size_t nc = 0;
    int last[NSLOT] = {-1, -1};
    for (size_t k = 0; k < nt; k++) last[t[k].slot] = (int)k;
    for (size_t k = 0; k < nt; k++) {
        htx *x = &t[k];
        if (x->outcome == 'A' && x->serial <= snap)
            com[nc++] = x;
        else if (!x->outcome && (int)k == last[x->slot] && mark[x->slot] == x->id) {
            x->serial = markser[x->slot]; /* unsettled, and the marker says committed */
            com[nc++] = x;
        } else if (!x->outcome && (int)k != last[x->slot])
            h_fail("%s: transaction %lld of slot %d has no outcome logged, yet its slot went on", when,
                   (long long)x->id, x->slot);
    }
    qsort(com, nc, sizeof *com, cmp_serial);
    /* replay */
    int64_t robj[NOBJ] = {0}, rmark[NSLOT] = {0}, rval[NMAP][NKEY], rtally = 0;
    unsigned long adds = 0;
    uint64_t robjser[NOBJ] = {0};
    bool rhas[NMAP][NKEY] = {{0}};
    for (size_t k = 0; k < nc; k++) {
        htx *x = com[k];
        if (k && com[k - 1]->serial == x->serial)
            h_fail(
                "%s: commits %lld (slot %d) and %lld (slot %d) both have serial %llu: one of them was lost "
                "and its serial given again",
                when, (long long)com[k - 1]->id, com[k - 1]->slot, (long long)x->id, x->slot,
                (unsigned long long)x->serial);
        for (int q = 0; q < x->nw; q++) {
            hw *w = &x->w[q];
            if (w->kind == 't') { /* merged, whatever it read */
                rtally += w->next;
                adds++;
                continue;
            }
            int64_t before = w->kind == 'o' ? robj[w->i] : rhas[w->mi][w->i] ? rval[w->mi][w->i] : -1;
            if (before != w->prev)
                h_fail("%s: commit %llu (slot %d, transaction %lld) read %s%d[%d] = %lld, but the commits "
                       "before "
                       "it in serial order left %lld: an update was lost or a conflict missed",
                       when, (unsigned long long)x->serial, x->slot, (long long)x->id,
                       w->kind == 'o' ? "obj" : "map", w->kind == 'o' ? w->i : w->mi,
                       w->kind == 'o' ? 0 : w->i, (long long)w->prev, (long long)before);
            if (w->kind == 'o') {
                robj[w->i] = w->next;
                robjser[w->i] = x->serial;
            } else {
                rhas[w->mi][w->i] = w->next >= 0;
                rval[w->mi][w->i] = w->next;
            }
        }
        rmark[x->slot] = x->id;
    }
    /* the store against the replay */
    for (int j = 0; j < NOBJ; j++)
        if (obj[j] != robj[j] || (robjser[j] && objser[j] != robjser[j]))
            h_fail("%s: obj%d holds %lld (record serial %llu); the %zu commits replayed leave %lld (serial "
                   "%llu)",
                   when, j, (long long)obj[j], (unsigned long long)objser[j], nc, (long long)robj[j],
                   (unsigned long long)robjser[j]);
    if (tally != rtally)
        h_fail("%s: the tally holds %lld; the %lu additions of the %zu commits replayed make %lld: a "
               "resolved conflict lost or added one",
               when, (long long)tally, adds, nc, (long long)rtally);
    ps->tally_adds = adds;
    for (int s = 0; s < NSLOT; s++)
        if (mark[s] != rmark[s])
            h_fail("%s: marker %d holds %lld; the commits replayed leave %lld", when, s, (long long)mark[s],
                   (long long)rmark[s]);
    for (int mi = 0; mi < NMAP; mi++) {
        uint64_t n = 0;
        for (int i = 0; i < NKEY; i++) {
            n += rhas[mi][i];
            if (has[mi][i] != rhas[mi][i] || (has[mi][i] && val[mi][i] != rval[mi][i]))
                h_fail("%s: map%d[%d] is %s %lld; the %zu commits replayed leave %s %lld", when, mi, i,
                       has[mi][i] ? "present," : "absent", has[mi][i] ? (long long)val[mi][i] : 0LL, nc,
                       rhas[mi][i] ? "present," : "absent", rhas[mi][i] ? (long long)rval[mi][i] : 0LL);
        }
        if (len[mi] != n)
            h_fail("%s: len(map%d) is %llu, the entries are %llu", when, mi, (unsigned long long)len[mi],
                   (unsigned long long)n);
    }
    ps->checks++;
    ps->committed = nc;
    ps->conflicts = 0;
    for (size_t k = 0; k < nt; k++) ps->conflicts += t[k].outcome == 'C';
    free(com);
    free(t);
}

/* ---- the parent ---------------------------------------------------------------------------- */

/* history.Tally's resolver: the additions of both sides count. */
static int tally_resolve(void *ud, ost_value old, ost_value committed, ost_value mine) {
    (void)ud;
    int64_t o = h_int(ost_instance_getattr(old, "v"), "old.v");
    int64_t c = h_int(ost_instance_getattr(committed, "v"), "committed.v");
    int64_t m = h_int(ost_instance_getattr(mine, "v"), "mine.v");
    return ost_instance_setattr(mine, "v", ost_int(c + (m - o)));
}

static pid_t spawn(const penv *e, int s, int inc) {
    fflush(NULL);
    pid_t p = fork();
    if (p < 0) h_fail("fork: %s", strerror(errno));
    if (p == 0) worker(e, s, inc);
    return p;
}

/* Fails when worker pid of slot s ended by itself (it found a problem and
 * said so on stderr). */
static void poll_worker(pid_t pid, int s) {
    int status;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid)
        h_fail("worker %d (pid %ld) ended by itself (status %d): see its message above", s, (long)pid,
               status);
}

static void setup(penv *e) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.registry = e->reg;
    o.create = true;
    ost_store *st = ost_store_new();
    int rc = ost_store_open(st, e->addr, &o);
    if (rc) h_fail("open %s: %s: %s", e->addr, ost_err_name(rc), ost_store_errmsg(st));
    ost_conn *c = h_conn(st);
    ost_value lst = ost_list_new(0);
    for (int j = 0; j <= TALLY; j++) {
        ost_value v;
        if (j >= NOBJ && j < NOBJ + NMAP) {
            if ((rc = ost_map_new(c, h_kind(j - NOBJ), &v))) h_fail("ost_map_new: %s", ost_err_name(rc));
            v = ost_incref(v);
        } else {
            v = ost_instance_new(
                ost_incref(j < NOBJ ? e->obj_cls : j == TALLY ? e->tally_cls : e->marker_cls));
            ost_instance_setattr(v, "v", ost_int(0));
        }
        ost_list_append(lst, v);
    }
    if ((rc = ost_root_set_c(c, e->name, lst)) || (rc = ost_commit(c)))
        h_fail("setting up: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(st);
}

int procs_main(const char *addr, uint64_t first, unsigned count, unsigned nops) {
    (void)nops;
    double t0 = h_now();
    penv e = {0};
    e.pg = !strcmp(addr, "pg");
    const char *lng = getenv("OST_HISTORY_LONG"), *one = getenv("OST_HISTORY_SEED");
    e.seed = one ? strtoull(one, NULL, 10) : lng ? h_random_seed() : first;
    h_seed = e.seed;
    double secs = lng ? atof(lng) : 0;
    unsigned kills = lng ? UINT32_MAX : count;
    h_nops = count;
    char tmp[] = "/tmp/ostore-history-procs-XXXXXX", dir[600], data[600];
    if (!mkdtemp(tmp)) h_fail("mkdtemp: %s", strerror(errno));
    snprintf(g_logpath, sizeof g_logpath, "%s/log", tmp);
    snprintf(h_keep, sizeof h_keep, "%.200s (the log: %.300s)", tmp, g_logpath);
    if (e.pg) {
        e.addr = getenv("OST_TEST_PG");
        if (!e.addr || pgkill_datadir(data, sizeof data))
            h_fail("ADDR pg needs OST_TEST_PG and OST_TEST_PG_DIR (run under tests/pg/pgserver.sh)");
        if (pgkill_adopt()) h_fail("pgkill_adopt failed (message above)");
    } else {
        snprintf(dir, sizeof dir, "%s/store", strcmp(addr, "tmp") ? addr : tmp);
        e.addr = dir;
    }
    snprintf(e.name, sizeof e.name, "procs-%ld-%llu", (long)getpid(), (unsigned long long)e.seed);
    e.reg = h_registry(&e.obj_cls, &e.marker_cls);
    static const char *tfields[] = {"v"};
    ost_class_def td = {.module = "history", .name = "Tally", .fields = tfields, .nfields = 1,
                        .persistent = true, .resolve = tally_resolve};
    if (ost_registry_add(e.reg, &td, &e.tally_cls)) h_fail("ost_registry_add history.Tally");
    printf("history procs: engine %s, seed %llu, %s\n", h_engine, (unsigned long long)e.seed,
           lng ? "long mode" : "fixed seed");
    setup(&e);
    uint64_t rng = e.seed ^ 0x5eedull;
    pid_t pid[NSLOT];
    int inc[NSLOT] = {0};
    for (int s = 0; s < NSLOT; s++) pid[s] = spawn(&e, s, 0);
    pstats ps = {0};
    unsigned wkills = 0, skills = 0, terms = 0, inflight = 0;
    for (unsigned n = 0; n < kills && (!lng || h_now() - t0 < secs); n++) {
        /* LMDB: a kill every 50 to 300 ms; PostgreSQL: 300 to 1500 ms */
        pgkill_sleep_ms(e.pg ? 300 + (long)h_below(&rng, 1200) : 50 + (long)h_below(&rng, 250));
        for (int s = 0; s < NSLOT; s++) poll_worker(pid[s], s);
        unsigned what = e.pg ? h_below(&rng, 4) : 0; /* PG: 0 worker, 1-2 server kill, 3 terminate */
        char when[96];
        if (what == 0) {
            int s = (int)h_below(&rng, NSLOT);
            kill(pid[s], SIGKILL);
            int status;
            if (waitpid(pid[s], &status, 0) != pid[s]) h_fail("waitpid: %s", strerror(errno));
            if (!WIFSIGNALED(status))
                h_fail("worker %d ended by itself (status %d) before its kill: see above", s, status);
            /* was a commit in flight? (its intent logged, no outcome) */
            size_t nt;
            htx *t = read_log(&nt);
            for (size_t k = nt; k-- > 0;)
                if (t[k].slot == s) {
                    inflight += !t[k].outcome;
                    break;
                }
            free(t);
            snprintf(when, sizeof when, "after killing worker %d (kill %u)", s, n + 1);
            check(&e, when, &ps);
            pid[s] = spawn(&e, s, ++inc[s]);
            wkills++;
        } else if (what < 3) {
            if (pgkill_server(data) < 0) h_fail("killing the server failed (message above)");
            if (pgkill_start()) h_fail("restarting the server failed (message above)");
            snprintf(when, sizeof when, "after server kill %u", skills + 1);
            check(&e, when, &ps);
            skills++;
        } else {
            const char *admin = getenv("OST_TEST_PG_ADMIN");
            (void)pgkill_terminate_backends(admin ? admin : "", "ostore");
            terms++;
        }
    }
    for (int s = 0; s < NSLOT; s++) {
        poll_worker(pid[s], s);
        kill(pid[s], SIGTERM);
    }
    for (int s = 0; s < NSLOT; s++) {
        int status;
        /* a worker spawned just before may end by SIGTERM before it set
         * its handler: as a kill, which the check settles by its marker */
        if (waitpid(pid[s], &status, 0) != pid[s] || !((WIFEXITED(status) && !WEXITSTATUS(status)) ||
                                                       (WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM)))
            h_fail("worker %d did not end cleanly (status %d): see above", s, status);
    }
    check(&e, "at the end", &ps);
    /* how the commits in flight at a kill ended */
    unsigned long kc = 0, kn = 0;
    FILE *f = fopen(g_logpath, "r");
    char line[1024];
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "after a kill") || strstr(line, "commit failed")) {
            kc += line[0] == 'A';
            kn += line[0] == 'N';
        }
    if (f) fclose(f);
    printf(
        "history procs: engine %s, seed %llu: %u worker kills (%u with a commit in flight), %u server kills, "
        "%u backend terminations; commits whose outcome a kill hid: %lu committed, %lu not; %lu commits "
        "checked in serial order (%lu additions to the tally merged), %lu conflicts; %lu checks, all "
        "as logged, in %.1f s\n",
        h_engine, (unsigned long long)e.seed, wkills, inflight, skills, terms, kc, kn, ps.committed,
        ps.tally_adds, ps.conflicts, ps.checks, h_now() - t0);
    ost_registry_free(e.reg);
    h_rmtree(tmp);
    return 0;
}
