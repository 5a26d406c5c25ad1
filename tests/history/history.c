/* A model-checked history test (issue 30, item 3): randomized histories of
 * operations on objects and ordered maps, run through the public API
 * (include/ostore.h) as a program would, each result compared with a
 * reference model of what docs/api.md and docs/maps.md promise.
 *
 *   history model ADDR   one process, NCONN connections on one store; a
 *                        deterministic scheduler interleaves their
 *                        operations (get, set, delete, ranges forward and
 *                        reverse, first/last, contains, counts, commits,
 *                        aborts, reopening the store). The model keeps the
 *                        committed state and, per connection, the snapshot
 *                        its transaction began on plus its own changes,
 *                        and decides every return code: a commit must fail
 *                        with OST_ECONFLICT exactly when a commit since the
 *                        transaction's snapshot wrote (set or deleted) an
 *                        object or a map key that this transaction wrote.
 *   history procs ADDR   two worker processes run random transactions on
 *                        one store and log each one (its writes and what it
 *                        read of what it writes) before committing, and its
 *                        serial after; the parent SIGKILLs workers (LMDB)
 *                        or the PostgreSQL server (PostgreSQL) now and then
 *                        and, after each restart and at the end, checks the
 *                        store against the log (procs.c).
 *
 * ADDR is a directory to make stores in (one per history) or "pg": the
 * database of $OST_TEST_PG (tests/pg/pgserver.sh), each history under a
 * root key of its own.
 *
 * Seeds: CI runs fixed seeds (meson.build). OST_HISTORY_SEED=N replays the
 * one history of seed N (printing its operations with
 * OST_HISTORY_VERBOSE=1); OST_HISTORY_LONG=SECONDS draws a seed from
 * /dev/urandom, prints it, and runs histories of consecutive seeds for
 * that long. A failure prints the seed, the operations of the history up to
 * the failure and the command that replays it. */
#include "history.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* ---- failures and the operation log ------------------------------------------ */

static char *g_oplog;
static size_t g_oplen, g_opcap;
static bool g_verbose;
uint64_t h_seed;
unsigned h_nops = 200;
char h_keep[600];
static const char *g_note; /* the bug a regression seed found */
const char *h_mode = "model";
const char *h_engine = "lmdb";

void h_log(const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof line) n = sizeof line - 1;
    if (g_verbose) fprintf(stderr, "  %s\n", line);
    if (g_oplen + (size_t)n + 2 > g_opcap) {
        size_t cap = g_opcap ? g_opcap * 2 : 65536;
        while (cap < g_oplen + (size_t)n + 2) cap *= 2;
        char *p = realloc(g_oplog, cap);
        if (!p) return;
        g_oplog = p;
        g_opcap = cap;
    }
    memcpy(g_oplog + g_oplen, line, (size_t)n);
    g_oplen += (size_t)n;
    g_oplog[g_oplen++] = '\n';
    g_oplog[g_oplen] = 0;
}

void h_log_reset(void) {
    g_oplen = 0;
    if (g_oplog) g_oplog[0] = 0;
}

void h_fail(const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (!g_verbose && g_oplen) {
        /* the last operations only: the history up to the failure */
        const char *p = g_oplog;
        size_t lines = 0;
        for (size_t i = g_oplen; i-- > 0;)
            if (g_oplog[i] == '\n' && ++lines > 400) {
                p = g_oplog + i + 1;
                fprintf(stderr, "  ... (earlier operations left out)\n");
                break;
            }
        fprintf(stderr, "operations of the history (connection: call -> result):\n%s", p);
    }
    fprintf(stderr, "history %s FAILED (engine %s, seed %llu): %s\n", h_mode, h_engine,
            (unsigned long long)h_seed, msg);
    if (g_note) fprintf(stderr, "(a regression seed: it found \"%s\" before)\n", g_note);
    if (h_keep[0]) fprintf(stderr, "(its files are kept in %s)\n", h_keep);
    if (!strcmp(h_mode, "procs"))
        fprintf(stderr,
                "replay: OST_HISTORY_SEED=%llu history procs ADDR 0 %u (the same choices and kill times; "
                "the processes may interleave otherwise)\n",
                (unsigned long long)h_seed, h_nops);
    else
        fprintf(stderr, "replay: OST_HISTORY_SEED=%llu OST_HISTORY_VERBOSE=1 history model ADDR 0 1 %u\n",
                (unsigned long long)h_seed, h_nops);
    fprintf(stderr, "  (ADDR: tmp for LMDB, or pg under tests/pg/pgserver.sh)\n");
    fflush(stderr);
    _exit(1);
}

/* ---- random numbers: splitmix64, the same sequence on every machine -------- */

uint64_t h_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

unsigned h_below(uint64_t *s, unsigned n) { return (unsigned)(h_rand(s) % n); }

/* ---- the store ---------------------------------------------------------------- */

ost_registry *h_registry(ost_value *obj_cls, ost_value *marker_cls) {
    static const char *fields[] = {"v"};
    ost_registry *reg = ost_registry_new();
    if (!reg) h_fail("ost_registry_new: out of memory");
    ost_class_def d = {
        .module = "history", .name = "Obj", .fields = fields, .nfields = 1, .persistent = true};
    if (ost_registry_add(reg, &d, obj_cls)) h_fail("ost_registry_add history.Obj");
    d.name = "Marker";
    if (ost_registry_add(reg, &d, marker_cls)) h_fail("ost_registry_add history.Marker");
    return reg;
}

ost_store *h_open(const char *addr, ost_registry *reg, bool group) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    o.group_commit = group;
    o.durability = OST_SYNC_FULL;
    ost_store *st = ost_store_new();
    if (!st) h_fail("ost_store_new: out of memory");
    int rc = ost_store_open(st, addr, &o);
    if (rc) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", ost_store_errmsg(st));
        ost_store_close(st);
        h_fail("open %s: %s: %s", addr, ost_err_name(rc), msg);
    }
    return st;
}

ost_conn *h_conn(ost_store *st) {
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    if (rc) h_fail("ost_conn_open: %s: %s", ost_err_name(rc), ost_store_errmsg(st));
    return c;
}

/* The int value of x, or fails naming what. */
int64_t h_int(ost_value x, const char *what) {
    int64_t v;
    if (!x || ost_int_value(x, &v)) h_fail("%s: not an int (type %s)", what, ost_type_name(ost_typeof(x)));
    return v;
}

/* Key i (0 <= i < NKEY, or -1 and NKEY for bounds beyond every key) of
 * map m: map 0 is an "int" map (keys -6 ..), map 1 a "str" map ("k00" ..,
 * "k" before every key and "l" after). A new reference. */
ost_value h_key(int m, int i) {
    if (m == 0) return ost_int(i - NKEY / 2);
    char s[8];
    if (i < 0)
        snprintf(s, sizeof s, "k");
    else if (i >= NKEY)
        snprintf(s, sizeof s, "l");
    else
        snprintf(s, sizeof s, "k%02d", i);
    return ost_str_c(s);
}

/* The index of key k of map m, or fails. */
int h_key_index(int m, ost_value k) {
    if (m == 0) {
        int64_t v = h_int(k, "an int map's key");
        if (v < -NKEY / 2 || v >= NKEY - NKEY / 2) h_fail("key %lld is none of the history's", (long long)v);
        return (int)(v + NKEY / 2);
    }
    size_t n;
    const char *s = ost_typeof(k) == OST_T_STR ? ost_data(k, &n) : NULL;
    if (!s || n != 3 || s[0] != 'k') h_fail("a str map's key is not kNN");
    return (s[1] - '0') * 10 + (s[2] - '0');
}

const char *h_kind(int m) { return m == 0 ? "int" : "str"; }

/* ---- the model ------------------------------------------------------------------ */

typedef struct {
    int64_t obj[NOBJ];
    bool has[NMAP][NKEY];
    int64_t val[NMAP][NKEY];
} mstate;

typedef struct {
    ost_conn *c;
    uint64_t snapver; /* the model's commits its snapshot holds */
    mstate snap;      /* the committed state its snapshot holds */
    mstate view;      /* its snapshot with its own changes */
    bool wobj[NOBJ], wkey[NMAP][NKEY];
    bool dirty;
} mconn;

typedef struct {
    const char *addr;
    bool pg;
    ost_registry *reg;
    ost_value obj_cls, marker_cls;
    ost_store *st;
    char dir[512]; /* the history's store (LMDB) */
    char name[48]; /* its root key */
    mstate committed;
    uint64_t ver;                              /* commits made */
    uint64_t objver[NOBJ], keyver[NMAP][NKEY]; /* the commit that last wrote each */
    mconn conn[NCONN];
    uint64_t rng;
    uint64_t rng2; /* a stream of its own for the store's options, so that
                    * the operations of a seed stay what they were */
    uint64_t rng3; /* and one for the changes made inside ranges */
    int64_t nextval;
    /* figures */
    unsigned long ops, commits, conflicts, aborts, reopens, ranges;
} hist;

static unsigned long g_ops, g_commits, g_conflicts, g_aborts, g_reopens, g_ranges, g_hists;

/* The history's objects and maps, as connection c sees them: the list
 * under its root key holds NOBJ objects then NMAP maps (borrowed). */
static ost_value handle(hist *h, int k, int i) {
    ost_value lst = ost_root_get_c(h->conn[k].c, h->name);
    if (!lst) h_fail("c%d: root[%s] is missing: %s", k, h->name, ost_conn_errmsg(h->conn[k].c));
    ost_value v = ost_item(lst, (size_t)i);
    if (!v) h_fail("c%d: root[%s][%d] is missing", k, h->name, i);
    return v;
}

/* Starts connection k's next transaction in the model: its snapshot is the
 * committed state now (the library begins it at commit and abort:
 * store/conn.c, begin_txn). */
static void model_begin(hist *h, int k) {
    mconn *m = &h->conn[k];
    m->snapver = h->ver;
    m->snap = h->committed;
    m->view = h->committed;
    memset(m->wobj, 0, sizeof m->wobj);
    memset(m->wkey, 0, sizeof m->wkey);
    m->dirty = false;
}

static void open_conns(hist *h) {
    for (int k = 0; k < NCONN; k++) {
        h->conn[k].c = h_conn(h->st);
        /* a small cache now and then: objects become ghosts between
         * transactions and load again */
        if (h_below(&h->rng, 3) == 0) ost_conn_set_cache_size(h->conn[k].c, 1 + h_below(&h->rng, 3));
        /* the first read starts its transaction, hence its snapshot */
        (void)handle(h, k, 0);
        model_begin(h, k);
    }
}

static void close_all(hist *h) {
    for (int k = 0; k < NCONN; k++) {
        ost_conn_close(h->conn[k].c);
        h->conn[k].c = NULL;
    }
    ost_store_close(h->st);
    h->st = NULL;
}

/* ---- operations, each checked against the model ------------------------------------ */

static void op_obj_get(hist *h, int k) {
    mconn *m = &h->conn[k];
    int j = (int)h_below(&h->rng, NOBJ);
    ost_value o = handle(h, k, j), v = 0;
    int rc = ost_instance_getattr_ex(o, "v", &v);
    h_log("c%d: obj%d.v -> %s %lld", k, j, ost_err_name(rc), rc ? 0LL : (long long)h_int(v, "v"));
    if (rc) h_fail("c%d: reading obj%d: %s: %s", k, j, ost_err_name(rc), ost_value_errmsg());
    int64_t got = h_int(v, "obj.v");
    if (got != m->view.obj[j])
        h_fail("c%d: obj%d.v is %lld, the model says %lld", k, j, (long long)got, (long long)m->view.obj[j]);
}

static void op_obj_set(hist *h, int k) {
    mconn *m = &h->conn[k];
    int j = (int)h_below(&h->rng, NOBJ);
    int64_t val = h->nextval++;
    int rc = ost_instance_setattr(handle(h, k, j), "v", ost_int(val));
    h_log("c%d: obj%d.v = %lld -> %s", k, j, (long long)val, ost_err_name(rc));
    if (rc) h_fail("c%d: setting obj%d: %s: %s", k, j, ost_err_name(rc), ost_value_errmsg());
    m->view.obj[j] = val;
    m->wobj[j] = true;
    m->dirty = true;
}

static void show_key(int mi, int i, char *buf, size_t cap) {
    if (mi == 0)
        snprintf(buf, cap, "%d", i - NKEY / 2);
    else if (i < 0)
        snprintf(buf, cap, "'k'");
    else if (i >= NKEY)
        snprintf(buf, cap, "'l'");
    else
        snprintf(buf, cap, "'k%02d'", i);
}

static void op_map_get(hist *h, int k) {
    mconn *m = &h->conn[k];
    int mi = (int)h_below(&h->rng, NMAP), i = (int)h_below(&h->rng, NKEY);
    ost_value key = h_key(mi, i), v = 0;
    int rc = ost_map_get(m->c, handle(h, k, NOBJ + mi), key, &v);
    ost_decref(key);
    char ks[16];
    show_key(mi, i, ks, sizeof ks);
    h_log("c%d: map%d.get(%s) -> %s %lld", k, mi, ks, ost_err_name(rc),
          rc || !v ? 0LL : (long long)h_int(v, "value"));
    int want = m->view.has[mi][i] ? 0 : OST_ENOTFOUND;
    if (rc != want)
        h_fail("c%d: map%d.get(%s) returned %s, the model says %s (%s)", k, mi, ks, ost_err_name(rc),
               ost_err_name(want), ost_conn_errmsg(m->c));
    if (!rc && h_int(v, "value") != m->view.val[mi][i])
        h_fail("c%d: map%d.get(%s) gave %lld, the model says %lld", k, mi, ks, (long long)h_int(v, "value"),
               (long long)m->view.val[mi][i]);
}

static void op_map_contains(hist *h, int k) {
    mconn *m = &h->conn[k];
    int mi = (int)h_below(&h->rng, NMAP), i = (int)h_below(&h->rng, NKEY);
    ost_value key = h_key(mi, i);
    int rc = ost_map_contains(m->c, handle(h, k, NOBJ + mi), key);
    ost_decref(key);
    char ks[16];
    show_key(mi, i, ks, sizeof ks);
    h_log("c%d: map%d.contains(%s) -> %d", k, mi, ks, rc);
    if (rc != (int)m->view.has[mi][i])
        h_fail("c%d: map%d.contains(%s) returned %d, the model says %d (%s)", k, mi, ks, rc,
               (int)m->view.has[mi][i], rc < 0 ? ost_conn_errmsg(m->c) : "");
}

static void op_map_set(hist *h, int k) {
    mconn *m = &h->conn[k];
    int mi = (int)h_below(&h->rng, NMAP), i = (int)h_below(&h->rng, NKEY);
    int64_t val = h->nextval++;
    int rc = ost_map_set(m->c, handle(h, k, NOBJ + mi), h_key(mi, i), ost_int(val));
    char ks[16];
    show_key(mi, i, ks, sizeof ks);
    h_log("c%d: map%d[%s] = %lld -> %s", k, mi, ks, (long long)val, ost_err_name(rc));
    if (rc) h_fail("c%d: map%d[%s] = ...: %s: %s", k, mi, ks, ost_err_name(rc), ost_conn_errmsg(m->c));
    m->view.has[mi][i] = true;
    m->view.val[mi][i] = val;
    m->wkey[mi][i] = true;
    m->dirty = true;
}

static void op_map_del(hist *h, int k) {
    mconn *m = &h->conn[k];
    int mi = (int)h_below(&h->rng, NMAP), i = (int)h_below(&h->rng, NKEY);
    ost_value key = h_key(mi, i);
    int rc = ost_map_del(m->c, handle(h, k, NOBJ + mi), key);
    ost_decref(key);
    char ks[16];
    show_key(mi, i, ks, sizeof ks);
    h_log("c%d: del map%d[%s] -> %s", k, mi, ks, ost_err_name(rc));
    int want = m->view.has[mi][i] ? 0 : OST_ENOTFOUND;
    if (rc != want)
        h_fail("c%d: del map%d[%s] returned %s, the model says %s (%s)", k, mi, ks, ost_err_name(rc),
               ost_err_name(want), ost_conn_errmsg(m->c));
    if (!rc) {
        m->view.has[mi][i] = false;
        m->wkey[mi][i] = true;
        m->dirty = true;
    }
}

static void op_map_len(hist *h, int k) {
    mconn *m = &h->conn[k];
    int mi = (int)h_below(&h->rng, NMAP);
    uint64_t n = 0, want = 0;
    int rc = ost_map_len(m->c, handle(h, k, NOBJ + mi), &n);
    for (int i = 0; i < NKEY; i++) want += m->view.has[mi][i];
    h_log("c%d: len(map%d) -> %s %llu", k, mi, ost_err_name(rc), (unsigned long long)n);
    if (rc) h_fail("c%d: len(map%d): %s: %s", k, mi, ost_err_name(rc), ost_conn_errmsg(m->c));
    if (n != want)
        h_fail("c%d: len(map%d) is %llu, the model says %llu", k, mi, (unsigned long long)n,
               (unsigned long long)want);
}

static void op_map_end(hist *h, int k) {
    mconn *m = &h->conn[k];
    int mi = (int)h_below(&h->rng, NMAP);
    bool last = h_below(&h->rng, 2);
    ost_value key = 0;
    int rc = last ? ost_map_last(m->c, handle(h, k, NOBJ + mi), &key)
                  : ost_map_first(m->c, handle(h, k, NOBJ + mi), &key);
    int want = -1;
    for (int i = 0; i < NKEY; i++)
        if (m->view.has[mi][i] && (want < 0 || last)) want = i;
    int got = rc ? -1 : h_key_index(mi, key);
    ost_decref(key);
    h_log("c%d: map%d.%s() -> %s %d", k, mi, last ? "last" : "first", ost_err_name(rc), got);
    if (rc != (want < 0 ? OST_ENOTFOUND : 0) || got != want)
        h_fail("c%d: map%d.%s() gave key index %d (%s), the model says %d", k, mi, last ? "last" : "first",
               got, ost_err_name(rc), want);
}

/* Whether key index i is within range r of from/to (key indexes). */
static bool in_range(const ost_map_range *r, int from, int to, int i) {
    if (r->from && (i < from || (r->from_exclusive && i == from))) return false;
    if (r->to && (i > to || (r->to_exclusive && i == to))) return false;
    return true;
}

/* A range with random bounds (none, a key, or beyond every key; each
 * inclusive or exclusive), forward or reverse: every key and value in
 * order. Now and then the transaction sets or deletes a key of the map
 * between two steps: docs/maps.md says a cursor sees the map as it is at
 * each step, so the next step gives the first key beyond the last one
 * given in the map as it is then (with stream rng3, so that the other
 * choices of a seed stay what they were). */
static void op_map_range(hist *h, int k) {
    mconn *m = &h->conn[k];
    int mi = (int)h_below(&h->rng, NMAP);
    int from = h_below(&h->rng, 4) == 0 ? INT32_MIN : (int)h_below(&h->rng, NKEY + 2) - 1;
    int to = h_below(&h->rng, 4) == 0 ? INT32_MAX : (int)h_below(&h->rng, NKEY + 2) - 1;
    ost_map_range r = {0};
    r.from_exclusive = h_below(&h->rng, 2);
    r.to_exclusive = h_below(&h->rng, 2);
    r.reverse = h_below(&h->rng, 2);
    bool change = h_below(&h->rng3, 3) == 0;
    if (from != INT32_MIN) r.from = h_key(mi, from);
    if (to != INT32_MAX) r.to = h_key(mi, to);
    char fs[16] = "-", ts[16] = "-";
    if (r.from) show_key(mi, from, fs, sizeof fs);
    if (r.to) show_key(mi, to, ts, sizeof ts);
    ost_value map = handle(h, k, NOBJ + mi);
    ost_map_cursor *cur = NULL;
    int rc = ost_map_cursor_open(m->c, map, &r, &cur);
    if (rc) h_fail("c%d: cursor on map%d: %s: %s", k, mi, ost_err_name(rc), ost_conn_errmsg(m->c));
    char got[512];
    size_t gl = 0;
    got[0] = 0;
    int n = 0, last = r.reverse ? NKEY : -1;
    for (;; n++) {
        /* the model's next key: the first beyond the last one given, in
         * the map as it is now */
        int want = -1;
        if (r.reverse) {
            for (int i = last - 1; i >= 0 && want < 0; i--)
                if (m->view.has[mi][i] && in_range(&r, from, to, i)) want = i;
        } else {
            for (int i = last + 1; i < NKEY && want < 0; i++)
                if (m->view.has[mi][i] && in_range(&r, from, to, i)) want = i;
        }
        ost_value kv = 0, vv = 0;
        rc = ost_map_cursor_next(cur, &kv, &vv);
        if (rc && rc != OST_ENOTFOUND)
            h_fail("c%d: cursor step on map%d: %s: %s", k, mi, ost_err_name(rc), ost_conn_errmsg(m->c));
        int i = rc ? -1 : h_key_index(mi, kv);
        int64_t v = rc ? 0 : h_int(vv, "value");
        if (!rc && gl < sizeof got - 24)
            gl += (size_t)snprintf(got + gl, sizeof got - gl, " %d=%lld", i, (long long)v);
        if (i != want || (!rc && m->view.val[mi][i] != v)) {
            ost_map_cursor_close(cur);
            h_log("c%d: range map%d from %s%s to %s%s%s -> [%s ]", k, mi, fs, r.from_exclusive ? "(x)" : "",
                  ts, r.to_exclusive ? "(x)" : "", r.reverse ? " reversed" : "", got);
            h_fail("c%d: range of map%d from %s%s to %s%s%s: step %d gave %s index %d = %lld; the model says "
                   "index %d = %lld",
                   k, mi, fs, r.from_exclusive ? " (excl)" : "", ts, r.to_exclusive ? " (excl)" : "",
                   r.reverse ? " reversed" : "", n, rc ? "no entry," : "", i, (long long)v, want,
                   want >= 0 ? (long long)m->view.val[mi][want] : 0LL);
        }
        if (rc) break;
        last = i;
        if (change && h_below(&h->rng3, 2)) {
            /* a change between two steps, anywhere in the map */
            int ci = (int)h_below(&h->rng3, NKEY);
            char ks[16];
            show_key(mi, ci, ks, sizeof ks);
            if (m->view.has[mi][ci] && h_below(&h->rng3, 2)) {
                ost_value key = h_key(mi, ci);
                rc = ost_map_del(m->c, map, key);
                ost_decref(key);
                gl += (size_t)snprintf(got + gl, sizeof got - gl, " (del %s: %s)", ks, ost_err_name(rc));
                if (rc) h_fail("c%d: del map%d[%s] inside a range: %s", k, mi, ks, ost_err_name(rc));
                m->view.has[mi][ci] = false;
            } else {
                int64_t val = h->nextval++;
                rc = ost_map_set(m->c, map, h_key(mi, ci), ost_int(val));
                gl += (size_t)snprintf(got + gl, sizeof got - gl, " (set %s = %lld: %s)", ks, (long long)val,
                                       ost_err_name(rc));
                if (rc) h_fail("c%d: map%d[%s] = ... inside a range: %s", k, mi, ks, ost_err_name(rc));
                m->view.has[mi][ci] = true;
                m->view.val[mi][ci] = val;
            }
            m->wkey[mi][ci] = true;
            m->dirty = true;
            rc = 0;
        }
    }
    ost_map_cursor_close(cur);
    h_log("c%d: range map%d from %s%s to %s%s%s -> [%s ]", k, mi, fs, r.from_exclusive ? "(x)" : "", ts,
          r.to_exclusive ? "(x)" : "", r.reverse ? " reversed" : "", got);
    ost_decref(r.from);
    ost_decref(r.to);
    h->ranges++;
}

/* Commit: the model decides whether it conflicts (an object or key this
 * transaction wrote was written by a commit after its snapshot). */
static void op_commit(hist *h, int k) {
    mconn *m = &h->conn[k];
    char why[128] = "";
    for (int j = 0; j < NOBJ && !why[0]; j++)
        if (m->wobj[j] && h->objver[j] > m->snapver)
            snprintf(why, sizeof why, "obj%d written by model commit %llu after snapshot %llu", j,
                     (unsigned long long)h->objver[j], (unsigned long long)m->snapver);
    for (int mi = 0; mi < NMAP && !why[0]; mi++)
        for (int i = 0; i < NKEY && !why[0]; i++)
            if (m->wkey[mi][i] && h->keyver[mi][i] > m->snapver) {
                char ks[16];
                show_key(mi, i, ks, sizeof ks);
                snprintf(why, sizeof why, "map%d[%s] written by model commit %llu after snapshot %llu", mi,
                         ks, (unsigned long long)h->keyver[mi][i], (unsigned long long)m->snapver);
            }
    int want = why[0] ? OST_ECONFLICT : 0;
    int rc = ost_commit(m->c);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ost_conn_errmsg(m->c));
    h_log("c%d: commit -> %s%s%s (model: %s%s%s)", k, ost_err_name(rc), rc ? ": " : "", rc ? msg : "",
          ost_err_name(want), why[0] ? ", " : "", why);
    if (rc != want)
        h_fail("c%d: commit returned %s%s%s%s, the model says %s%s%s", k, ost_err_name(rc), rc ? " (" : "",
               rc ? msg : "", rc ? ")" : "", ost_err_name(want), why[0] ? ": " : "",
               why[0] ? why : " (no commit since its snapshot wrote what it wrote)");
    if (rc) {
        h->conflicts++;
        ost_abort(m->c);
    } else if (m->dirty) {
        h->ver++;
        for (int j = 0; j < NOBJ; j++)
            if (m->wobj[j]) {
                h->committed.obj[j] = m->view.obj[j];
                h->objver[j] = h->ver;
            }
        for (int mi = 0; mi < NMAP; mi++)
            for (int i = 0; i < NKEY; i++)
                /* a key absent from the snapshot that the transaction set
                 * and deleted again: the commit leaves it as it was and
                 * other transactions do not conflict with it (its own
                 * commit still does, above, when another commit wrote the
                 * key meanwhile) */
                if (m->wkey[mi][i] && (m->view.has[mi][i] || m->snap.has[mi][i])) {
                    h->committed.has[mi][i] = m->view.has[mi][i];
                    h->committed.val[mi][i] = m->view.val[mi][i];
                    h->keyver[mi][i] = h->ver;
                }
    }
    h->commits++;
    model_begin(h, k);
}

static void op_abort(hist *h, int k) {
    ost_abort(h->conn[k].c);
    h_log("c%d: abort", k);
    h->aborts++;
    model_begin(h, k);
}

/* Closes every connection and the store, and opens them again: every
 * transaction's changes are dropped, as by abort. */
static void op_reopen(hist *h) {
    close_all(h);
    h_log("reopen the store");
    h->st = h_open(h->pg ? h->addr : h->dir, h->reg, h_below(&h->rng2, 2));
    open_conns(h);
    h->reopens++;
}

/* Everything committed, read by a new connection: every object, every
 * entry in order, the counts. */
static void check_committed(hist *h, const char *when) {
    ost_conn *c = h_conn(h->st);
    ost_value lst = ost_root_get_c(c, h->name);
    if (!lst) h_fail("%s: root[%s] is missing: %s", when, h->name, ost_conn_errmsg(c));
    for (int j = 0; j < NOBJ; j++) {
        ost_value v = 0;
        int rc = ost_instance_getattr_ex(ost_item(lst, (size_t)j), "v", &v);
        if (rc) h_fail("%s: obj%d: %s: %s", when, j, ost_err_name(rc), ost_value_errmsg());
        if (h_int(v, "v") != h->committed.obj[j])
            h_fail("%s: obj%d.v is %lld, the model says %lld", when, j, (long long)h_int(v, "v"),
                   (long long)h->committed.obj[j]);
    }
    for (int mi = 0; mi < NMAP; mi++) {
        ost_value map = ost_item(lst, (size_t)(NOBJ + mi));
        ost_map_cursor *cur;
        int rc = ost_map_cursor_open(c, map, NULL, &cur);
        if (rc) h_fail("%s: cursor on map%d: %s", when, mi, ost_err_name(rc));
        int next = 0;
        uint64_t n = 0, want = 0;
        ost_value kv, vv;
        while ((rc = ost_map_cursor_next(cur, &kv, &vv)) == 0) {
            int i = h_key_index(mi, kv);
            while (next < NKEY && !h->committed.has[mi][next]) next++;
            if (i != next || h_int(vv, "value") != h->committed.val[mi][i])
                h_fail("%s: map%d's entry %d = %lld, the model's next is %d = %lld", when, mi, i,
                       (long long)h_int(vv, "value"), next,
                       next < NKEY ? (long long)h->committed.val[mi][next] : 0LL);
            next++;
        }
        ost_map_cursor_close(cur);
        if (rc != OST_ENOTFOUND) h_fail("%s: cursor step on map%d: %s", when, mi, ost_err_name(rc));
        while (next < NKEY && !h->committed.has[mi][next]) next++;
        if (next < NKEY) h_fail("%s: map%d lacks entry %d of the model", when, mi, next);
        for (int i = 0; i < NKEY; i++) want += h->committed.has[mi][i];
        if ((rc = ost_map_len(c, map, &n)) || n != want)
            h_fail("%s: len(map%d) is %llu (%s), the model says %llu", when, mi, (unsigned long long)n,
                   ost_err_name(rc), (unsigned long long)want);
    }
    ost_conn_close(c);
}

/* Makes the history's objects and maps, each committed empty (objects:
 * v = 0), under its root key. */
static void setup(hist *h) {
    ost_conn *c = h_conn(h->st);
    ost_value lst = ost_list_new(NOBJ + NMAP);
    for (int j = 0; j < NOBJ; j++) {
        ost_value o = ost_instance_new(ost_incref(h->obj_cls));
        if (!o || ost_instance_setattr(o, "v", ost_int(0))) h_fail("making obj%d", j);
        ost_list_append(lst, o);
    }
    for (int mi = 0; mi < NMAP; mi++) {
        ost_value map;
        int rc = ost_map_new(c, h_kind(mi), &map);
        if (rc) h_fail("ost_map_new: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
        ost_list_append(lst, ost_incref(map));
    }
    int rc = ost_root_set_c(c, h->name, lst);
    if (!rc) rc = ost_commit(c);
    if (rc) h_fail("setting the history up: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    ost_conn_close(c);
    memset(&h->committed, 0, sizeof h->committed);
    h->ver = 0;
    memset(h->objver, 0, sizeof h->objver);
    memset(h->keyver, 0, sizeof h->keyver);
}

/* One history of nops operations from seed. */
static void run_history(const char *addr, uint64_t seed, unsigned nops) {
    hist h;
    memset(&h, 0, sizeof h);
    h.addr = addr;
    h.pg = !strcmp(addr, "pg") || !ost_store_addr_is_path(addr);
    if (!strcmp(addr, "pg")) {
        h.addr = getenv("OST_TEST_PG");
        if (!h.addr) h_fail("ADDR pg needs OST_TEST_PG (run under tests/pg/pgserver.sh)");
    }
    h.rng = seed;
    h.nextval = 1;
    h_seed = seed;
    h_nops = nops;
    h_log_reset();
    snprintf(h.name, sizeof h.name, "history-%d-%llu", (int)getpid(), (unsigned long long)seed);
    if (!h.pg) snprintf(h.dir, sizeof h.dir, "%s/s%llu", addr, (unsigned long long)seed);
    h.reg = h_registry(&h.obj_cls, &h.marker_cls);
    h.rng2 = seed ^ 0x67c0ull;
    h.rng3 = seed ^ 0x3a9eull;
    h.st = h_open(h.pg ? h.addr : h.dir, h.reg, h_below(&h.rng2, 2));
    setup(&h);
    open_conns(&h);
    for (unsigned n = 0; n < nops; n++) {
        int k = (int)h_below(&h.rng, NCONN);
        unsigned p = h_below(&h.rng, 1000);
        h.ops++;
        if (p < 150)
            op_map_get(&h, k);
        else if (p < 320)
            op_map_set(&h, k);
        else if (p < 430)
            op_map_del(&h, k);
        else if (p < 470)
            op_map_contains(&h, k);
        else if (p < 510)
            op_map_len(&h, k);
        else if (p < 590)
            op_map_range(&h, k);
        else if (p < 620)
            op_map_end(&h, k);
        else if (p < 720)
            op_obj_get(&h, k);
        else if (p < 800)
            op_obj_set(&h, k);
        else if (p < 950)
            op_commit(&h, k);
        else if (p < 990)
            op_abort(&h, k);
        else
            op_reopen(&h);
    }
    for (int k = 0; k < NCONN; k++) op_commit(&h, k);
    check_committed(&h, "at the end");
    close_all(&h);
    ost_registry_free(h.reg);
    if (!h.pg) h_rmtree(h.dir);
    g_hists++;
    g_ops += h.ops;
    g_commits += h.commits;
    g_conflicts += h.conflicts;
    g_aborts += h.aborts;
    g_reopens += h.reopens;
    g_ranges += h.ranges;
}

/* ---- seeds and modes ------------------------------------------------------------- */

uint64_t h_random_seed(void) {
    uint64_t s = 0;
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, &s, sizeof s) != (ssize_t)sizeof s)
        s = (uint64_t)time(NULL) ^ (uint64_t)getpid() << 32;
    if (fd >= 0) close(fd);
    return s % 1000000000000ull;
}

double h_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void h_rmtree(const char *path) {
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0) fprintf(stderr, "history: could not remove %s\n", path);
}

/* Seeds of histories that found a bug, run first in every fixed-seed run
 * (with 200 operations each), whatever the range asked for. */
static const struct {
    uint64_t seed;
    const char *bug;
} regressions[] = {
    /* issue 30 item 2: c0 sets map1['k05'] (absent in its snapshot); c1
     * sets it and commits; c2 deletes it and commits; c0's commit returned
     * OST_OK instead of OST_ECONFLICT */
    {35, "a map key set then deleted by other commits raised no conflict"},
    /* the same on the int map: c2 sets map0[5] and commits, then deletes
     * it and commits; c1, whose snapshot is older, sets it: OST_OK */
    {216, "a map key set then deleted by other commits raised no conflict (int map)"},
};

static int model_main(const char *addr, uint64_t first, unsigned count, unsigned nops) {
    double t0 = h_now();
    const char *lng = getenv("OST_HISTORY_LONG");
    const char *one = getenv("OST_HISTORY_SEED");
    if (one) {
        run_history(addr, strtoull(one, NULL, 10), nops);
    } else if (lng) {
        double secs = atof(lng);
        uint64_t s = h_random_seed();
        printf("history model: long mode for %.0f s from seed %llu (engine %s)\n", secs,
               (unsigned long long)s, h_engine);
        fflush(stdout);
        while (h_now() - t0 < secs) run_history(addr, s++, nops);
    } else {
        for (size_t i = 0; i < sizeof regressions / sizeof *regressions; i++) {
            g_note = regressions[i].bug;
            run_history(addr, regressions[i].seed, 200);
            g_note = NULL;
        }
        for (unsigned i = 0; i < count; i++) run_history(addr, first + i, nops);
    }
    printf("history model: engine %s, %lu histories of %u operations and %d connections: %lu operations, "
           "%lu commits (%lu conflicts, as the model said), %lu aborts, %lu ranges, %lu reopens, all as the "
           "model says, in %.1f s\n",
           h_engine, g_hists, nops, NCONN, g_ops, g_commits, g_conflicts, g_aborts, g_ranges, g_reopens,
           h_now() - t0);
    return 0;
}

static void usage(void) {
    fprintf(stderr, "usage: history model ADDR [FIRST_SEED [COUNT [OPS]]]   COUNT histories of OPS operations\n"
                    "       history procs ADDR [SEED [KILLS]]                two workers, KILLS kills\n"
                    "  ADDR: tmp (LMDB stores in a temporary directory), a directory, or pg ($OST_TEST_PG)\n"
                    "  OST_HISTORY_SEED=N replays seed N; OST_HISTORY_LONG=SECONDS draws a seed and\n"
                    "  runs for that long; OST_HISTORY_VERBOSE=1 prints every operation of a model history\n");
    exit(2);
}

int main(int argc, char **argv) {
    if (argc < 3) usage();
    g_verbose = getenv("OST_HISTORY_VERBOSE") && atoi(getenv("OST_HISTORY_VERBOSE"));
    setvbuf(stdout, NULL, _IOLBF, 0);
    const char *addr = argv[2];
    char tmp[] = "/tmp/ostore-history-XXXXXX";
    bool made = false;
    if (!strcmp(addr, "pg")) {
        h_engine = "postgresql";
    } else if (!strcmp(addr, "tmp")) {
        if (!mkdtemp(tmp)) h_fail("mkdtemp: %s", strerror(errno));
        addr = tmp;
        snprintf(h_keep, sizeof h_keep, "%s", tmp);
        made = true;
    }
    uint64_t first = argc > 3 ? strtoull(argv[3], NULL, 10) : 1;
    unsigned count = argc > 4 ? (unsigned)atoi(argv[4]) : 10;
    unsigned nops = argc > 5 ? (unsigned)atoi(argv[5]) : 200;
    int rc;
    if (!strcmp(argv[1], "model")) {
        h_mode = "model";
        rc = model_main(addr, first, count, nops);
    } else if (!strcmp(argv[1], "procs")) {
        h_mode = "procs";
        rc = procs_main(addr, first, count, nops);
    } else {
        usage();
        rc = 2;
    }
    if (made) h_rmtree(tmp);
    return rc;
}
