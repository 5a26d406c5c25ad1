/* The in-memory engine's own semantics (store/mem/, docs/engines.md, "The
 * in-memory engine"): named stores shared by the handles of a process and
 * kept after the last close until ost_store_drop; private stores new at
 * each open; names checked; snapshots isolated from a concurrent writer;
 * large stores. The conformance suite (mem-engine) and the store, batch
 * and maps suites (store-mem, batch-mem, maps-mem) test everything else
 * the engine shares with LMDB and PostgreSQL. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "leakcheck.h"
#include "ostore.h"

/* A name of its own for each test: the tests of a run share no store. */
static char g_addr[64];

static void setup(void) { snprintf(g_addr, sizeof g_addr, "mem:m%ld", (long)getpid()); }

TestSuite(mem, .init = setup, .timeout = 60);

/* The store at addr opened with create as given; NULL with *rc and the
 * message in msg when it does not open. */
static ost_store *try_open(const char *addr, bool create, int *rc, char *msg, size_t cap) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    ost_store *st = ost_store_new();
    cr_assert(st);
    *rc = ost_store_open(st, addr, &o);
    if (!*rc) return st;
    snprintf(msg, cap, "%s", ost_store_errmsg(st));
    ost_store_close(st);
    return NULL;
}

static ost_store *open_ok(const char *addr, bool create) {
    int rc;
    char msg[512];
    ost_store *st = try_open(addr, create, &rc, msg, sizeof msg);
    cr_assert(st, "open %s: %s: %s", addr, ost_err_name(rc), msg);
    return st;
}

static ost_conn *conn(ost_store *st) {
    ost_conn *c;
    cr_assert_eq(ost_conn_open(st, &c), 0);
    return c;
}

/* root[key] = n, committed. */
static void put(ost_conn *c, const char *key, int64_t n) {
    cr_assert_eq(ost_root_set_c(c, key, ost_int(n)), 0);
    int rc = ost_commit(c);
    cr_assert_eq(rc, 0, "commit: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
}

/* root[key] as an int, -1 when absent. */
static int64_t get(ost_conn *c, const char *key) {
    ost_value v = ost_root_get_c(c, key);
    int64_t n = -1;
    if (v) cr_assert_eq(ost_int_value(v, &n), 0);
    return n;
}

OST_TEST(mem, a_named_store_survives_close_and_reopen_in_the_process) {
    ost_store *st = open_ok(g_addr, true);
    ost_conn *c = conn(st);
    put(c, "x", 42);
    ost_conn_close(c);
    ost_store_close(st);
    st = open_ok(g_addr, false); /* no create: it is there */
    c = conn(st);
    cr_assert_eq(get(c, "x"), 42);
    ost_store_stats ss;
    cr_assert_eq(ost_store_stat(st, &ss), 0);
    cr_assert_eq(ss.records, 1);
    cr_assert_eq(ss.last_serial, 2, "the root's creation, then the commit");
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(mem, a_private_store_is_new_at_each_open_and_gone_at_close) {
    ost_store *a = open_ok("mem:", true), *b = open_ok("mem:", true);
    ost_conn *ca = conn(a), *cb = conn(b);
    put(ca, "x", 1);
    ost_abort(cb);
    cr_assert_eq(get(cb, "x"), -1, "two opens of mem: are two stores");
    ost_conn_close(ca);
    ost_store_close(a);
    a = open_ok("mem:", true);
    ca = conn(a);
    cr_assert_eq(get(ca, "x"), -1, "a new one");
    ost_conn_close(ca);
    ost_conn_close(cb);
    ost_store_close(a);
    ost_store_close(b);
    int rc;
    char msg[512];
    cr_assert_null(try_open("mem:", false, &rc, msg, sizeof msg));
    cr_assert_eq(rc, OST_ENOTFOUND);
    cr_assert(strstr(msg, "no store at mem:"), "%s", msg);
}

OST_TEST(mem, drop_removes_a_named_store) {
    ost_store *st = open_ok(g_addr, true);
    ost_conn *c = conn(st);
    put(c, "x", 7);
    ost_conn_close(c);
    cr_assert_eq(ost_store_drop_new(st), OST_EEXIST, "it is not new");
    cr_assert(strstr(ost_store_errmsg(st), "not a new store"), "%s", ost_store_errmsg(st));
    cr_assert_eq(ost_store_drop(st), 0, "%s", ost_store_errmsg(st));
    ost_store_close(st);
    int rc;
    char msg[512];
    cr_assert_null(try_open(g_addr, false, &rc, msg, sizeof msg));
    cr_assert_eq(rc, OST_ENOTFOUND);
    cr_assert(strstr(msg, "no store at") && strstr(msg, g_addr), "%s", msg);
    st = open_ok(g_addr, true); /* a new one of that name */
    c = conn(st);
    cr_assert_eq(get(c, "x"), -1);
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(mem, bad_names_are_refused_with_a_message) {
    char longname[80];
    memset(longname, 'a', sizeof longname);
    memcpy(longname, "mem:", 4);
    longname[4 + 65] = 0; /* 65 characters: one too many */
    const char *bad[] = {"mem:a/b", "mem:a b", "mem:caf\xc3\xa9", "mem:x:y", longname};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        int rc;
        char msg[512];
        cr_assert_null(try_open(bad[i], true, &rc, msg, sizeof msg), "%s", bad[i]);
        cr_assert_eq(rc, OST_EINVAL, "%s: %s", bad[i], ost_err_name(rc));
        cr_assert(strstr(msg, "bad name for an in-memory store"), "%s", msg);
    }
    longname[4 + 64] = 0; /* 64: the longest */
    ost_store_close(open_ok(longname, true));
    ost_store_close(open_ok("mem:A-z_0.9", true));
    cr_assert(!ost_store_addr_is_path("mem:x"), "not a directory");
    cr_assert(ost_store_addr_is_path("./mem:x"), "a directory named mem:x");
}

OST_TEST(mem, two_handles_on_one_name_see_each_others_commits) {
    ost_store *a = open_ok(g_addr, true), *b = open_ok(g_addr, false);
    ost_conn *ca = conn(a), *cb = conn(b);
    put(ca, "x", 1);
    cr_assert_eq(get(cb, "x"), 1, "b's first transaction began after a's commit");
    put(cb, "x", 2);
    cr_assert_eq(get(ca, "x"), 1, "a's transaction keeps its snapshot");
    ost_abort(ca);
    cr_assert_eq(get(ca, "x"), 2, "the next one sees b's commit");
    /* a conflict across the handles */
    cr_assert_eq(ost_root_set_c(ca, "x", ost_int(3)), 0);
    put(cb, "x", 4);
    int rc = ost_commit(ca);
    cr_assert_eq(rc, OST_ECONFLICT, "%s: %s", ost_err_name(rc), ost_conn_errmsg(ca));
    ost_abort(ca);
    ost_conn_close(ca);
    ost_conn_close(cb);
    ost_store_close(a);
    /* the store lives while b holds it, and after */
    ost_store_close(b);
    a = open_ok(g_addr, false);
    ca = conn(a);
    cr_assert_eq(get(ca, "x"), 4);
    ost_conn_close(ca);
    ost_store_close(a);
}

OST_TEST(mem, an_exclusive_open_keeps_other_handles_out) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.exclusive = true;
    ost_store *a = ost_store_new();
    cr_assert_eq(ost_store_open(a, g_addr, &o), 0, "%s", ost_store_errmsg(a));
    int rc;
    char msg[512];
    cr_assert_null(try_open(g_addr, false, &rc, msg, sizeof msg));
    cr_assert_eq(rc, OST_EBUSY);
    cr_assert(strstr(msg, "store is locked"), "%s", msg);
    ost_store_close(a);
    ost_store_close(open_ok(g_addr, false));
}

/* The writer of the isolation test: n commits of root["x"] = i on a
 * handle of its own. */
typedef struct {
    int n, rc;
} writer_arg;

static void writer(void *arg) {
    writer_arg *w = arg;
    ost_store *st = ost_store_new();
    ost_conn *c = NULL;
    w->rc = st ? ost_store_open(st, g_addr, NULL) : OST_ENOMEM;
    if (!w->rc) w->rc = ost_conn_open(st, &c);
    for (int i = 1; !w->rc && i <= w->n; i++) {
        w->rc = ost_root_set_c(c, "x", ost_int(i));
        if (!w->rc) w->rc = ost_commit(c);
        if (!w->rc) w->rc = ost_root_set_c(c, "y", ost_int(i)); /* a second commit per round */
        if (!w->rc) w->rc = ost_commit(c);
    }
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(mem, a_snapshot_sees_exactly_its_commits_while_a_writer_goes_on) {
    ost_store *st = open_ok(g_addr, true);
    ost_conn *c = conn(st);
    put(c, "x", 0);
    put(c, "y", 0);
    writer_arg w = {2000, 0};
    uv_thread_t th;
    cr_assert_eq(uv_thread_create(&th, writer, &w), 0);
    /* raw snapshots: counters and the root's record stay what they were */
    for (int round = 0; round < 200; round++) {
        ost_snap *s;
        cr_assert_eq(ost_snap_open(st, &s), 0, "%s", ost_store_errmsg(st));
        ost_snap_stats a, b;
        ost_raw_record r1, r2;
        cr_assert_eq(ost_snap_stat(s, &a), 0);
        cr_assert_eq(ost_snap_get(s, 0, &r1), 0, "%s", ost_snap_errmsg(s));
        uint64_t serial1 = r1.serial;
        usleep(100);
        cr_assert_eq(ost_snap_get(s, 0, &r2), 0, "%s", ost_snap_errmsg(s));
        cr_assert_eq(ost_snap_stat(s, &b), 0);
        cr_assert_eq(a.last_serial, b.last_serial, "round %d", round);
        cr_assert_eq(serial1, r2.serial, "round %d: the root as of the snapshot", round);
        cr_assert_leq(r2.serial, a.last_serial);
        ost_snap_close(s);
    }
    /* a transaction: x and y from one commit (the writer sets x, then y) */
    for (int round = 0; round < 200; round++) {
        ost_abort(c);
        int64_t x = get(c, "x"), y = get(c, "y");
        cr_assert(y == x || y == x - 1, "round %d: x %lld y %lld", round, (long long)x,
                  (long long)y);
    }
    uv_thread_join(&th);
    cr_assert_eq(w.rc, 0, "writer: %s", ost_err_name(w.rc));
    ost_abort(c);
    cr_assert_eq(get(c, "x"), 2000);
    cr_assert_eq(get(c, "y"), 2000);
    cr_assert_eq(ost_store_check(st, NULL, NULL, NULL), 0, "%s", ost_store_errmsg(st));
    ost_conn_close(c);
    ost_store_close(st);
}

OST_TEST(mem, a_large_map_loads_and_walks_in_order) {
    enum { N = 200000 };
    ost_store *st = open_ok(g_addr, true);
    ost_conn *c = conn(st);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_root_set_c(c, "m", ost_incref(m)), 0);
    uint64_t t0 = uv_hrtime();
    /* keys in a scrambled order: the list inserts anywhere */
    for (int64_t i = 0; i < N; i++) {
        int64_t k = (i * 7919) % N;
        cr_assert_eq(ost_map_set(c, m, ost_int(k), ost_int(-k)), 0);
        if (i % 20000 == 19999) cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    }
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    uint64_t t1 = uv_hrtime();
    uint64_t n;
    cr_assert_eq(ost_map_len(c, m, &n), 0);
    cr_assert_eq(n, (uint64_t)N);
    ost_map_cursor *cur;
    cr_assert_eq(ost_map_cursor_open(c, m, NULL, &cur), 0, "%s", ost_conn_errmsg(c));
    ost_value k, v;
    int64_t want = 0;
    int rc;
    while ((rc = ost_map_cursor_next(cur, &k, &v)) == 0) {
        int64_t kk, vv;
        if (ost_int_value(k, &kk) || ost_int_value(v, &vv) || kk != want || vv != -want)
            cr_assert_fail("entry %lld out of order or wrong", (long long)want);
        want++;
    }
    ost_map_cursor_close(cur);
    cr_assert_eq(rc, OST_ENOTFOUND);
    cr_assert_eq(want, N);
    uint64_t t2 = uv_hrtime();
    cr_log_info("%d entries: loaded in %.2f s, walked in %.2f s", N, (t1 - t0) / 1e9, (t2 - t1) / 1e9);
    cr_assert_lt(t1 - t0, (uint64_t)30e9, "the load is not quadratic");
    ost_conn_close(c);
    ost_store_close(st);
}

/* The table of engines gives mem: addresses to this engine: they are no
 * paths, messages show them as they are, and salvage, which reads an
 * LMDB store's files, refuses one saying why and touching nothing. */
OST_TEST(mem, its_addresses_are_no_paths_and_salvage_refuses_them) {
    cr_assert(!ost_store_addr_is_path(g_addr));
    cr_assert(ost_store_addr_is_path("./mem:x")); /* a directory so named */
    char shown[OST_PATH_SHOWN];
    cr_assert_str_eq(ost_store_addr_show(shown, sizeof shown, g_addr), g_addr);
    ost_salvage_stats ss;
    char msg[256] = "";
    cr_assert_eq(ost_salvage(g_addr, "/nonexistent/ostore-salvage-dst", NULL, NULL, &ss, msg,
                             sizeof msg),
                 OST_EUNSUPPORTED);
    cr_assert(strstr(msg, g_addr) && strstr(msg, "in-memory store has none to read"), "%s", msg);
    cr_assert_eq(access("/nonexistent/ostore-salvage-dst", F_OK), -1);
}
