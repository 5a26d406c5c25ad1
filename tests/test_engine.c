/* The engine conformance suite: store/engine.h's operations, the same
 * tests for every engine. An engine joins with one line of `engines`
 * below (its table and how a test gets a fresh, empty address) and one
 * test in tests/meson.build that sets OST_TEST_ENGINE to its name.
 *
 * PostgreSQL runs against a private server (tests/pg/pgserver.sh), which
 * exports OST_TEST_PG (the address), OST_TEST_PG_RESTART (a command that
 * restarts the server) and OST_TEST_PG_DIR. Each test works in a schema
 * of its own (the address's search_path), made with psql. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine.h"
#include "store_internal.h"

/* ---- the engines ------------------------------------------------------------- */

typedef struct {
    const char *name;
    const ost__engine_ops *ops;
    /* Writes a fresh address (no store there yet) into out: 0, or
     * nonzero when the engine cannot be tested here. */
    int (*fresh)(char *out, size_t cap);
    /* Runs SQL (or the engine's equivalent) against the store at addr;
     * NULL when the engine has none. */
    int (*sql)(const char *addr, const char *sql);
} engine_case;

#ifdef OST_HAVE_POSTGRESQL
static unsigned g_seq;
static char g_schema[64];

static int psql(const char *addr, const char *sql) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "psql -q -X -v ON_ERROR_STOP=1 '%s' -c \"%s\" >/dev/null 2>&1", addr,
             sql);
    return system(cmd);
}

/* A schema of its own for each test: search_path in the address. */
static int pg_fresh(char *out, size_t cap) {
    const char *base = getenv("OST_TEST_PG");
    if (!base) return 1;
    snprintf(g_schema, sizeof g_schema, "t%ld_%u", (long)getpid(), g_seq++);
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", g_schema);
    if (psql(base, sql)) return 1;
    snprintf(out, cap, "%s%soptions=-csearch_path%%3D%s", base, strchr(base, '?') ? "&" : "?",
             g_schema);
    return 0;
}
#endif

static const engine_case engines[] = {
#ifdef OST_HAVE_POSTGRESQL
    {"postgresql", &ost__pg_engine, pg_fresh, psql},
#endif
    /* {"lmdb", &ost__lmdb_engine, lmdb_fresh, NULL}, */
};

static const engine_case *E;
static char addr[1024];
static ost_store *st;
static ost__engine *eng;
extern int ost__pg_page_rows;

static const engine_case *engine_pick(void) {
    const char *want = getenv("OST_TEST_ENGINE");
    for (size_t i = 0; i < sizeof engines / sizeof engines[0]; i++)
        if (!want || !strcmp(want, engines[i].name)) return &engines[i];
    return NULL;
}

static void setup(void) {
    E = engine_pick();
    cr_assert(E, "no engine %s in this build", getenv("OST_TEST_ENGINE"));
    cr_assert(!E->fresh(addr, sizeof addr), "cannot make a fresh address (is the server up?)");
    st = ost_store_new();
    cr_assert(st);
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    int rc = E->ops->open(st, addr, &o, &eng);
    cr_assert_eq(rc, 0, "open: %s", ost_store_errmsg(st));
    ost__pg_page_rows = 2; /* paging shows with a few rows */
}

static void teardown(void) {
    if (eng) E->ops->close(eng);
    eng = NULL;
    ost_store_close(st);
    st = NULL;
}

TestSuite(engine, .init = setup, .fini = teardown, .timeout = 60);

/* ---- helpers ------------------------------------------------------------------- */

static ost__sess *sess(void) {
    ost__sess *s;
    cr_assert_eq(E->ops->sess_open(eng, &s), 0);
    return s;
}

static uint64_t oids(uint64_t n) {
    uint64_t first;
    cr_assert_eq(E->ops->reserve_oids(eng, n, &first), 0, "%s", ost_store_errmsg(st));
    return first;
}

static uint32_t cls(const char *m, const char *n) {
    uint32_t id;
    cr_assert_eq(E->ops->class_id(eng, m, strlen(m), n, strlen(n), true, &id), 0, "%s",
                 ost_store_errmsg(st));
    return id;
}

/* Commits one package, returns its outcome. */
static int commit1(ost__sess *s, ost__pkg *p) {
    int rc = E->ops->commit(s, &p, 1);
    cr_assert_eq(rc, 0, "commit call: %s", ost_store_errmsg(st));
    return p->rc;
}

static ost__pkg *pkg(void) {
    ost__pkg *p = ost__pkg_new();
    cr_assert(p);
    ost__pkg_reset(p);
    return p;
}

static uint64_t last_serial(ost__sess *s) {
    ost__snapinfo si;
    cr_assert_eq(E->ops->snap_begin(s, &si), 0, "%s", ost_store_errmsg(st));
    E->ops->snap_end(s);
    return si.last_serial;
}

/* A scan's records as text, to compare a store before and after. */
typedef struct {
    char buf[8192];
    size_t n;
    uint64_t oids[64];
    size_t count;
} dump;

static int dump_fn(void *ud, uint64_t oid, const ost__recview *r) {
    dump *d = ud;
    if (d->count < 64) d->oids[d->count] = oid;
    d->count++;
    d->n += (size_t)snprintf(d->buf + d->n, sizeof d->buf - d->n, "%llu:%llu:%u:%.*s;",
                             (unsigned long long)oid, (unsigned long long)r->serial, r->cid,
                             (int)r->len, (const char *)r->pickle);
    return 0;
}

static void scan_all(ost__sess *s, dump *d) {
    memset(d, 0, sizeof *d);
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    cr_assert_eq(E->ops->scan(s, 0, 0, dump_fn, d), 0, "%s", ost_store_errmsg(st));
    E->ops->snap_end(s);
}

/* ---- opening ---------------------------------------------------------------------- */

Test(engine, claims_its_addresses_and_no_path) {
    if (strcmp(E->name, "postgresql")) return;
    cr_assert(E->ops->claims("postgresql://h/db"));
    cr_assert(E->ops->claims("postgres://h/db"));
    cr_assert(E->ops->claims("postgres:host=/tmp dbname=x"));
    cr_assert(!E->ops->claims("/var/lib/store"));
    cr_assert(!E->ops->claims("store"));
    cr_assert(!E->ops->claims("postgresql"));
}

Test(engine, creates_then_reopens_with_counters) {
    ost_store_stats ss;
    cr_assert_eq(E->ops->stat(eng, &ss), 0);
    cr_assert_eq(ss.records, 0);
    cr_assert_eq(ss.next_oid, 1);
    cr_assert_eq(ss.last_serial, 1);
    cr_assert(strstr(st->shown, "search_path"), "shown: %s", st->shown);
    E->ops->close(eng);
    eng = NULL;
    ost_store_options o;
    ost_store_options_init(&o);
    cr_assert_eq(E->ops->open(st, addr, &o, &eng), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(E->ops->stat(eng, &ss), 0);
    cr_assert_eq(ss.next_oid, 1);
    /* create on an existing store keeps it */
    uint64_t f = oids(5);
    E->ops->close(eng);
    o.create = true;
    cr_assert_eq(E->ops->open(st, addr, &o, &eng), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(oids(1), f + 5);
}

Test(engine, refuses_a_database_without_the_schema) {
    char a2[1024];
    cr_assert(!E->fresh(a2, sizeof a2));
    ost_store_options o;
    ost_store_options_init(&o);
    ost__engine *e2 = NULL;
    int rc = E->ops->open(st, a2, &o, &e2);
    cr_assert_eq(rc, OST_ENOTFOUND, "rc %d", rc);
    cr_assert_null(e2);
    cr_assert(strstr(ost_store_errmsg(st), "no ostore schema at "), "%s", ost_store_errmsg(st));
}

Test(engine, refuses_another_format) {
    if (!E->sql) return;
    cr_assert_eq(E->sql(addr, "UPDATE ost_meta SET format = 99"), 0);
    ost_store_options o;
    ost_store_options_init(&o);
    ost__engine *e2 = NULL;
    cr_assert_eq(E->ops->open(st, addr, &o, &e2), OST_EVERSION);
    cr_assert(strstr(ost_store_errmsg(st), "store format 99, this library reads 3"), "%s",
              ost_store_errmsg(st));
}

Test(engine, bad_addresses_fail_with_a_clear_message) {
    if (strcmp(E->name, "postgresql")) return;
    ost_store_options o;
    ost_store_options_init(&o);
    ost__engine *e2 = NULL;
    /* nothing listens on port 1 of this machine: refused at once */
    int rc = E->ops->open(st, "postgresql://ostore:s3cret@127.0.0.1:1/ostore?connect_timeout=2", &o, &e2);
    cr_assert_eq(rc, OST_EIO);
    const char *m = ost_store_errmsg(st);
    cr_assert(strstr(m, "postgresql://ostore@127.0.0.1:1/ostore"), "%s", m);
    cr_assert(strstr(m, "cannot connect"), "%s", m);
    cr_assert(!strstr(m, "s3cret"), "%s", m);
    cr_assert(!strchr(m, '\n'), "%s", m);
    rc = E->ops->open(st, "postgres:host=127.0.0.1 port=1 password=s3cret connect_timeout=2", &o, &e2);
    cr_assert_eq(rc, OST_EIO);
    m = ost_store_errmsg(st);
    cr_assert(strstr(m, "host=127.0.0.1 port=1"), "%s", m);
    cr_assert(!strstr(m, "s3cret"), "%s", m);
    /* no such database on the test server */
    char bad[1200];
    const char *dir = getenv("OST_TEST_PG_DIR");
    cr_assert(dir);
    snprintf(bad, sizeof bad, "postgresql:///nosuchdb?host=%s&user=postgres&password=s3cret", dir);
    rc = E->ops->open(st, bad, &o, &e2);
    cr_assert_eq(rc, OST_EIO);
    m = ost_store_errmsg(st);
    cr_assert(strstr(m, "database \"nosuchdb\" does not exist"), "%s", m);
    cr_assert(!strstr(m, "s3cret"), "%s", m);
    cr_assert_null(e2);
}

/* ---- classes and oids ---------------------------------------------------------------- */

Test(engine, class_ids_are_created_once_and_found) {
    uint32_t a = cls("mod", "A"), b = cls("mod", "B");
    cr_assert_neq(a, b);
    cr_assert_eq(cls("mod", "A"), a);
    uint32_t id;
    cr_assert_eq(E->ops->class_id(eng, "mod", 3, "C", 1, false, &id), OST_ENOTFOUND);
    ost__sess *s = sess();
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    ost__classview cv;
    cr_assert_eq(E->ops->class_get(s, b, &cv), 0);
    cr_assert_eq(cv.nlen, 1);
    cr_assert_eq(cv.name[0], 'B');
    cr_assert_eq(E->ops->class_get(s, 999, &cv), OST_ENOTFOUND);
    E->ops->snap_end(s);
    E->ops->sess_close(s);
}

typedef struct {
    ost_store *st;
    ost__engine *e;
    uint32_t ids[20];
    uint64_t blocks[100];
    int rc;
} racer;

static void *race_classes(void *arg) {
    racer *r = arg;
    for (int i = 0; i < 20 && !r->rc; i++) {
        char n[16];
        snprintf(n, sizeof n, "K%d", i);
        r->rc = E->ops->class_id(r->e, "race", 4, n, strlen(n), true, &r->ids[i]);
    }
    return NULL;
}

static void *race_oids(void *arg) {
    racer *r = arg;
    for (int i = 0; i < 100 && !r->rc; i++) r->rc = E->ops->reserve_oids(r->e, 10, &r->blocks[i]);
    return NULL;
}

static void two_racers(racer *r, void *(*fn)(void *)) {
    ost_store_options o;
    ost_store_options_init(&o);
    for (int i = 0; i < 2; i++) {
        memset(&r[i], 0, sizeof r[i]);
        r[i].st = ost_store_new();
        cr_assert_eq(E->ops->open(r[i].st, addr, &o, &r[i].e), 0);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, fn, &r[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(r[i].rc, 0, "%s", ost_store_errmsg(r[i].st));
        E->ops->close(r[i].e);
        ost_store_close(r[i].st);
    }
}

Test(engine, racing_class_ids_agree) {
    racer r[2];
    two_racers(r, race_classes);
    for (int i = 0; i < 20; i++) cr_assert_eq(r[0].ids[i], r[1].ids[i], "class %d", i);
    for (int i = 1; i < 20; i++) cr_assert_neq(r[0].ids[i], r[0].ids[i - 1]);
}

static int u64cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

Test(engine, oid_blocks_never_overlap) {
    racer r[2];
    two_racers(r, race_oids);
    uint64_t all[200];
    memcpy(all, r[0].blocks, sizeof r[0].blocks);
    memcpy(all + 100, r[1].blocks, sizeof r[1].blocks);
    qsort(all, 200, sizeof all[0], u64cmp);
    cr_assert_geq(all[0], 1);
    for (int i = 1; i < 200; i++) cr_assert_geq(all[i], all[i - 1] + 10, "block %d", i);
}

Test(engine, oids_stop_short_of_2_to_the_63) {
    uint64_t f = oids(1);
    uint64_t x;
    cr_assert_eq(E->ops->reserve_oids(eng, ((uint64_t)1 << 63), &x), OST_ELIMIT);
    cr_assert(strstr(ost_store_errmsg(st), "2^63"), "%s", ost_store_errmsg(st));
    cr_assert_eq(oids(1), f + 1, "a refused block takes nothing");
}

/* ---- commits and reads ----------------------------------------------------------------- */

Test(engine, commits_new_records_then_reads_them) {
    uint32_t c = cls("m", "Rec");
    uint64_t f = oids(5);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    char pk[5][16];
    for (int i = 0; i < 5; i++) {
        snprintf(pk[i], sizeof pk[i], "pickle-%d", i);
        cr_assert_eq(ost__pkg_add(p, f + (uint64_t)i, 0, c, pk[i], strlen(pk[i])), 0);
    }
    cr_assert_eq(commit1(s, p), 0, "%s", p->msg);
    cr_assert_eq(p->serial, 2);
    ost__snapinfo si;
    cr_assert_eq(E->ops->snap_begin(s, &si), 0);
    cr_assert_eq(si.last_serial, 2);
    cr_assert_geq(si.next_oid, f + 5);
    ost__recview rv;
    cr_assert_eq(E->ops->get(s, f + 3, &rv), 0);
    cr_assert_eq(rv.serial, 2);
    cr_assert_eq(rv.cid, c);
    cr_assert_eq(rv.len, strlen(pk[3]));
    cr_assert(!memcmp(rv.pickle, pk[3], rv.len));
    /* a pin nests and keeps the views */
    cr_assert_eq(E->ops->pin(s), 0);
    cr_assert_eq(E->ops->pin(s), 0);
    E->ops->unpin(s);
    E->ops->unpin(s);
    cr_assert(!memcmp(rv.pickle, pk[3], rv.len));
    cr_assert(!E->ops->snap_moved(s));
    cr_assert_eq(E->ops->get(s, f + 99, &rv), OST_ENOTFOUND);
    cr_assert(strstr(ost_store_errmsg(st), "no such object"));
    uint64_t want[3] = {f + 4, f + 99, f};
    dump d = {0};
    cr_assert_eq(E->ops->get_many(s, want, 3, dump_fn, &d), 0);
    cr_assert_eq(d.count, 2);
    /* a range scan in oid order, across pages of 2 rows */
    memset(&d, 0, sizeof d);
    cr_assert_eq(E->ops->scan(s, f + 1, f + 5, dump_fn, &d), 0);
    cr_assert_eq(d.count, 4);
    for (size_t i = 0; i < 4; i++) cr_assert_eq(d.oids[i], f + 1 + i);
    E->ops->snap_end(s);
    ost_store_stats ss;
    cr_assert_eq(E->ops->stat(eng, &ss), 0);
    cr_assert_eq(ss.records, 5);
    cr_assert_eq(ss.bytes, 5 * 16 + 5 * strlen(pk[0]));
    cr_assert_eq(ss.last_serial, 2);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

Test(engine, serials_follow_commit_order) {
    uint64_t f = oids(10);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    uint64_t prev = last_serial(s);
    for (int i = 0; i < 10; i++) {
        ost__pkg_reset(p);
        ost__pkg_add(p, f + (uint64_t)i, 0, 1, "x", 1);
        cr_assert_eq(commit1(s, p), 0);
        cr_assert_eq(p->serial, prev + 1);
        prev = p->serial;
    }
    cr_assert_eq(last_serial(s), prev);
    /* nothing to write: no serial */
    ost__pkg_reset(p);
    cr_assert_eq(commit1(s, p), 0);
    cr_assert_eq(p->serial, 0);
    cr_assert_eq(last_serial(s), prev);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

Test(engine, the_second_of_two_writers_conflicts) {
    uint64_t f = oids(1);
    ost__sess *a = sess(), *b = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "v1", 2);
    cr_assert_eq(commit1(a, p), 0);
    uint64_t s1 = p->serial;
    /* both read it at s1 and change it */
    ost__pkg *pa = pkg(), *pb = pkg();
    ost__pkg_add(pa, f, s1, 1, "va", 2);
    ost__pkg_add(pb, f, s1, 1, "vb", 2);
    cr_assert_eq(commit1(a, pa), 0);
    cr_assert_eq(commit1(b, pb), OST_ECONFLICT);
    cr_assert_eq(pb->conflict_oid, f);
    char want[200];
    snprintf(want, sizeof want,
             "conflict on oid %llu: commit %llu changed it after this transaction read it (at "
             "commit %llu)",
             (unsigned long long)f, (unsigned long long)pa->serial, (unsigned long long)s1);
    cr_assert_str_eq(pb->msg, want);
    cr_assert_eq(pb->serial, 0);
    /* b's session goes on */
    ost__pkg_reset(pb);
    ost__pkg_add(pb, f, pa->serial, 1, "vb", 2);
    cr_assert_eq(commit1(b, pb), 0, "%s", pb->msg);
    ost__pkg_free(p);
    ost__pkg_free(pa);
    ost__pkg_free(pb);
    E->ops->sess_close(a);
    E->ops->sess_close(b);
}

static void *commit_thread(void *arg) {
    ost__pkg *p = arg;
    ost__sess *s;
    if (E->ops->sess_open(eng, &s)) return NULL;
    E->ops->commit(s, &p, 1);
    E->ops->sess_close(s);
    return NULL;
}

Test(engine, concurrent_writers_of_one_oid_one_wins) {
    uint64_t f = oids(2);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "v", 1);
    ost__pkg_add(p, f + 1, 0, 1, "v", 1);
    cr_assert_eq(commit1(s, p), 0);
    uint64_t s1 = p->serial;
    enum { N = 6 };
    ost__pkg *ps[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ps[i] = pkg();
        /* in both orders: the row locks must not deadlock for good */
        ost__pkg_add(ps[i], i % 2 ? f : f + 1, s1, 1, "w", 1);
        ost__pkg_add(ps[i], i % 2 ? f + 1 : f, s1, 1, "w", 1);
        pthread_create(&t[i], NULL, commit_thread, ps[i]);
    }
    int ok = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(t[i], NULL);
        if (ps[i]->rc == 0) ok++;
        else cr_assert_eq(ps[i]->rc, OST_ECONFLICT, "%s", ps[i]->msg);
    }
    cr_assert_eq(ok, 1);
    for (int i = 0; i < N; i++) ost__pkg_free(ps[i]);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

Test(engine, a_failed_package_leaves_nothing) {
    uint64_t f = oids(4);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "one", 3);
    cr_assert_eq(commit1(s, p), 0);
    dump before, after;
    scan_all(s, &before);
    uint64_t ls = last_serial(s);
    /* a new record, a changed one, and a stale one: conflict */
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 1, 0, 1, "new", 3);
    ost__pkg_add(p, f, ls, 1, "two", 3);
    ost__pkg_add(p, f, ls - 1, 1, "two", 3);
    cr_assert_eq(commit1(s, p), OST_ECONFLICT);
    scan_all(s, &after);
    cr_assert_str_eq(after.buf, before.buf);
    cr_assert_eq(last_serial(s), ls);
    /* a reference to a removed object after a pack (p->low differs) */
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 2, 0, 1, "ref", 3);
    ost__pkg_ref(p, f + 3); /* never stored */
    p->low = 12345;
    cr_assert_eq(commit1(s, p), OST_ECONFLICT);
    char want[200];
    snprintf(want, sizeof want,
             "conflict on oid %llu: this commit refers to it, and pack removed it after this "
             "transaction read it",
             (unsigned long long)(f + 3));
    cr_assert_str_eq(p->msg, want);
    scan_all(s, &after);
    cr_assert_str_eq(after.buf, before.buf);
    /* with the same low, refs are not checked */
    ost_store_stats ss;
    cr_assert_eq(E->ops->stat(eng, &ss), 0);
    ost__snapinfo si;
    cr_assert_eq(E->ops->snap_begin(s, &si), 0);
    E->ops->snap_end(s);
    p->low = si.low;
    cr_assert_eq(commit1(s, p), 0, "%s", p->msg);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

Test(engine, each_package_of_a_call_has_its_own_outcome) {
    uint64_t f = oids(3);
    ost__sess *s = sess();
    ost__pkg *p[3] = {pkg(), pkg(), pkg()};
    ost__pkg_add(p[0], f, 0, 1, "a", 1);
    ost__pkg_add(p[1], f + 1, 0, 1, "b", 1);
    ost__pkg_add(p[1], f, 777, 1, "b", 1); /* stale */
    ost__pkg_add(p[2], f + 2, 0, 1, "c", 1);
    cr_assert_eq(E->ops->commit(s, p, 3), 0);
    cr_assert_eq(p[0]->rc, 0);
    cr_assert_eq(p[1]->rc, OST_ECONFLICT);
    cr_assert_eq(p[2]->rc, 0);
    cr_assert_eq(p[2]->serial, p[0]->serial + 1);
    cr_assert_eq(p[1]->conflict_oid, f);
    ost__recview rv;
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    cr_assert_eq(E->ops->get(s, f + 1, &rv), OST_ENOTFOUND);
    cr_assert_eq(E->ops->get(s, f + 2, &rv), 0);
    E->ops->snap_end(s);
    for (int i = 0; i < 3; i++) ost__pkg_free(p[i]);
    E->ops->sess_close(s);
}

/* ---- invalidations and sweep ------------------------------------------------------------ */

static bool keep_all(void *ud, uint64_t oid) {
    (void)ud;
    (void)oid;
    return true;
}

static void collect(void *ud, uint64_t oid) {
    dump *d = ud;
    if (d->count < 64) d->oids[d->count] = oid;
    d->count++;
}

Test(engine, changes_between_snapshots_then_a_gap_after_sweep) {
    uint64_t f = oids(4);
    ost__sess *s = sess(), *w = sess();
    ost__pkg *p = pkg();
    for (int i = 0; i < 4; i++) ost__pkg_add(p, f + (uint64_t)i, 0, 1, "x", 1);
    cr_assert_eq(commit1(w, p), 0);
    uint64_t s0 = p->serial;
    ost__snapinfo a, b;
    cr_assert_eq(E->ops->snap_begin(s, &a), 0);
    cr_assert_eq(a.last_serial, s0);
    /* a writer changes f+1, then f+2 and f+3; a new object is no change */
    uint64_t done[3];
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 1, s0, 1, "y", 1);
    cr_assert_eq(commit1(w, p), 0);
    done[0] = p->serial;
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 2, s0, 1, "y", 1);
    ost__pkg_add(p, f + 3, s0, 1, "y", 1);
    cr_assert_eq(commit1(w, p), 0);
    done[1] = p->serial;
    uint64_t g = oids(1);
    ost__pkg_reset(p);
    ost__pkg_add(p, g, 0, 1, "n", 1);
    cr_assert_eq(commit1(w, p), 0);
    done[2] = p->serial;
    /* the old snapshot still sees the old state */
    ost__recview rv;
    cr_assert_eq(E->ops->get(s, f + 1, &rv), 0);
    cr_assert_eq(rv.serial, s0);
    E->ops->snap_end(s);
    cr_assert_eq(E->ops->snap_begin(s, &b), 0);
    cr_assert_eq(b.last_serial, done[2]);
    dump d = {0};
    bool gap = true;
    cr_assert_eq(E->ops->changes(s, a.last_serial, b.last_serial, collect, &d, &gap), 0);
    cr_assert(!gap);
    cr_assert_eq(d.count, 3);
    qsort(d.oids, 3, sizeof d.oids[0], u64cmp);
    cr_assert_eq(d.oids[0], f + 1);
    cr_assert_eq(d.oids[2], f + 3);
    /* up to the middle commit only */
    memset(&d, 0, sizeof d);
    cr_assert_eq(E->ops->changes(s, a.last_serial, done[0], collect, &d, &gap), 0);
    cr_assert_eq(d.count, 1);
    E->ops->snap_end(s);
    /* a sweep trims the log: an old view has a gap, a current one none */
    uint64_t removed;
    cr_assert_eq(E->ops->sweep(w, b.last_serial, keep_all, NULL, &removed), 0, "%s",
                 ost_store_errmsg(st));
    cr_assert_eq(removed, 0);
    ost__snapinfo c;
    cr_assert_eq(E->ops->snap_begin(s, &c), 0);
    gap = false;
    cr_assert_eq(E->ops->changes(s, a.last_serial, c.last_serial, collect, &d, &gap), 0);
    cr_assert(gap);
    cr_assert_eq(E->ops->changes(s, c.last_serial, c.last_serial, collect, &d, &gap), 0);
    cr_assert(!gap);
    E->ops->snap_end(s);
    ost__pkg_free(p);
    E->ops->sess_close(s);
    E->ops->sess_close(w);
}

static bool keep_odd(void *ud, uint64_t oid) {
    uint64_t base = *(uint64_t *)ud;
    return (oid - base) % 2 == 1;
}

Test(engine, sweep_removes_exactly_the_unkept_unwritten_records) {
    uint64_t f = oids(6);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    for (int i = 0; i < 6; i++) ost__pkg_add(p, f + (uint64_t)i, 0, 1, "x", 1);
    cr_assert_eq(commit1(s, p), 0);
    uint64_t mark = p->serial;
    /* written after the mark: kept though keep refuses it */
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 4, mark, 1, "y", 1);
    cr_assert_eq(commit1(s, p), 0);
    ost__snapinfo a;
    cr_assert_eq(E->ops->snap_begin(s, &a), 0);
    E->ops->snap_end(s);
    uint64_t removed = 99;
    cr_assert_eq(E->ops->sweep(s, mark, keep_odd, &f, &removed), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(removed, 2); /* f and f+2; f+4 was written after the mark */
    dump d;
    scan_all(s, &d);
    cr_assert_eq(d.count, 4);
    cr_assert_eq(d.oids[0], f + 1);
    cr_assert_eq(d.oids[1], f + 3);
    cr_assert_eq(d.oids[2], f + 4);
    cr_assert_eq(d.oids[3], f + 5);
    ost__snapinfo b;
    cr_assert_eq(E->ops->snap_begin(s, &b), 0);
    cr_assert_neq(b.low, a.low);
    cr_assert_eq(b.low, a.last_serial + 1);
    bool gap = false;
    memset(&d, 0, sizeof d);
    cr_assert_eq(E->ops->changes(s, mark - 1, b.last_serial, collect, &d, &gap), 0);
    cr_assert(gap, "an old view has a gap after the sweep");
    cr_assert_eq(E->ops->changes(s, b.last_serial, b.last_serial, collect, &d, &gap), 0);
    cr_assert(!gap);
    E->ops->snap_end(s);
    /* a commit of a swept oid read before: conflict, "removed (pack)" */
    ost__pkg_reset(p);
    ost__pkg_add(p, f, mark, 1, "z", 1);
    cr_assert_eq(commit1(s, p), OST_ECONFLICT);
    cr_assert(strstr(p->msg, "it was removed (pack) after this transaction read it"), "%s", p->msg);
    /* keep everything: nothing goes */
    cr_assert_eq(E->ops->sweep(s, b.last_serial, keep_all, NULL, &removed), 0);
    cr_assert_eq(removed, 0);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

/* ---- map entries ---------------------------------------------------------------------- */

/* Stores a map record (kind "bytes", count 0) at a new oid. */
static uint64_t new_map(ost__sess *s) {
    uint64_t m = oids(1);
    uint8_t rec[128];
    size_t n = ost__map_record(rec, sizeof rec, "bytes", 0);
    cr_assert(n);
    ost__pkg *p = pkg();
    ost__pkg_add(p, m, 0, cls("ostore.maps", "OrderedMap"), rec, n);
    cr_assert_eq(commit1(s, p), 0, "%s", p->msg);
    ost__pkg_free(p);
    return m;
}

static uint64_t map_count(ost__sess *s, uint64_t m) {
    ost__recview rv;
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    cr_assert_eq(E->ops->get(s, m, &rv), 0);
    uint64_t c;
    cr_assert_eq(ost__map_record_count(rv.pickle, rv.len, &c), 0);
    E->ops->snap_end(s);
    return c;
}

static const struct {
    const char *k;
    size_t n;
} keys[] = {{"b", 1}, {"a", 1}, {"\xff", 1}, {"ab", 2}, {"\x00", 1}, {"a\x00", 2}};
/* bytewise, shorter first: \x00 < a < a\x00 < ab < b < \xff */
static const int order[] = {4, 1, 5, 3, 0, 2};

Test(engine, map_entries_in_bytewise_order_both_ways) {
    ost__sess *s = sess();
    uint64_t m = new_map(s), m2 = new_map(s);
    ost__pkg *p = pkg();
    for (int i = 0; i < 6; i++)
        ost__pkg_ment(p, m, 0, (const uint8_t *)keys[i].k, keys[i].n, "v", 1, 0);
    ost__pkg_ment(p, m2, 0, (const uint8_t *)"z", 1, "w", 1, 0);
    cr_assert_eq(commit1(s, p), 0, "%s", p->msg);
    uint64_t s1 = p->serial;
    cr_assert_eq(map_count(s, m), 6);
    cr_assert_eq(map_count(s, m2), 1);
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    ost__entry e;
    cr_assert_eq(E->ops->ent_get(s, m, (const uint8_t *)"ab", 2, &e), 0);
    cr_assert_eq(e.serial, s1);
    cr_assert_eq(e.len, 1);
    cr_assert_eq(E->ops->ent_get(s, m, (const uint8_t *)"zz", 2, &e), OST_ENOTFOUND);
    ost__ecur *ec;
    cr_assert_eq(E->ops->ecur_open(s, m, &ec), 0);
    const uint8_t *k;
    size_t kl;
    /* forward over pages of 2 */
    int rc = E->ops->ecur_seek(ec, NULL, 0, false);
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(rc, 0, "step %d", i);
        cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
        cr_assert_eq(kl, keys[order[i]].n, "at %d", i);
        cr_assert(!memcmp(k, keys[order[i]].k, kl), "at %d", i);
        rc = E->ops->ecur_step(ec, false);
    }
    cr_assert_eq(rc, OST_ENOTFOUND);
    /* backward from the end */
    rc = E->ops->ecur_seek(ec, NULL, 0, true);
    for (int i = 5; i >= 0; i--) {
        cr_assert_eq(rc, 0, "back %d", i);
        cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
        cr_assert(kl == keys[order[i]].n && !memcmp(k, keys[order[i]].k, kl), "back at %d", i);
        rc = E->ops->ecur_step(ec, true);
    }
    cr_assert_eq(rc, OST_ENOTFOUND);
    /* seek between keys, then turn around */
    cr_assert_eq(E->ops->ecur_seek(ec, (const uint8_t *)"a\x01", 2, false), 0);
    cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
    cr_assert(kl == 2 && !memcmp(k, "ab", 2));
    cr_assert_eq(E->ops->ecur_step(ec, true), 0);
    cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
    cr_assert(kl == 2 && !memcmp(k, "a\x00", 2));
    cr_assert_eq(E->ops->ecur_step(ec, true), 0);
    cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
    cr_assert(kl == 1 && k[0] == 'a');
    cr_assert_eq(E->ops->ecur_step(ec, false), 0);
    cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
    cr_assert(kl == 2 && !memcmp(k, "a\x00", 2));
    cr_assert_eq(E->ops->ecur_seek(ec, (const uint8_t *)"a\x01", 2, true), 0);
    cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
    cr_assert(kl == 2 && !memcmp(k, "a\x00", 2));
    /* past the ends */
    cr_assert_eq(E->ops->ecur_seek(ec, (const uint8_t *)"\xff\x00", 2, false), OST_ENOTFOUND);
    cr_assert_eq(E->ops->ecur_seek(ec, (const uint8_t *)"", 0, true), OST_ENOTFOUND);
    E->ops->ecur_close(ec);
    /* the other map's entries stay apart */
    cr_assert_eq(E->ops->ecur_open(s, m2, &ec), 0);
    cr_assert_eq(E->ops->ecur_seek(ec, NULL, 0, true), 0);
    cr_assert_eq(E->ops->ecur_get(ec, &k, &kl, &e), 0);
    cr_assert(kl == 1 && k[0] == 'z');
    cr_assert_eq(E->ops->ecur_step(ec, true), OST_ENOTFOUND);
    E->ops->ecur_close(ec);
    E->ops->snap_end(s);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

static int list_maps(void *ud, uint64_t map) {
    dump *d = ud;
    d->oids[d->count++] = map;
    return 0;
}

Test(engine, map_entries_deleted_conflicting_dropped_and_listed) {
    ost__sess *s = sess(), *s2 = sess();
    uint64_t m = new_map(s), m2 = new_map(s);
    ost__pkg *p = pkg();
    ost__pkg_ment(p, m, 0, (const uint8_t *)"k1", 2, "v", 1, 0);
    ost__pkg_ment(p, m, 0, (const uint8_t *)"k2", 2, "v", 1, 0);
    ost__pkg_ment(p, m2, 0, (const uint8_t *)"k", 1, "v", 1, 0);
    cr_assert_eq(commit1(s, p), 0, "%s", p->msg);
    uint64_t s1 = p->serial;
    /* delete k1, change k2 */
    ost__pkg_reset(p);
    ost__pkg_ment(p, m, s1, (const uint8_t *)"k1", 2, NULL, 0, OST__MENT_DEL);
    ost__pkg_ment(p, m, s1, (const uint8_t *)"k2", 2, "w", 1, 0);
    cr_assert_eq(commit1(s, p), 0, "%s", p->msg);
    uint64_t ser2 = p->serial;
    cr_assert_eq(map_count(s, m), 1);
    /* a writer that read k2 at s1 conflicts; one adding k1 after it was
     * read absent does not */
    ost__pkg *q = pkg();
    ost__pkg_ment(q, m, s1, (const uint8_t *)"k2", 2, "x", 1, 0);
    cr_assert_eq(commit1(s2, q), OST_ECONFLICT);
    char want[200];
    snprintf(want, sizeof want, "conflict on map %llu, key b'k2': commit %llu changed it after this transaction read it",
             (unsigned long long)m, (unsigned long long)ser2);
    cr_assert_str_eq(q->msg, want);
    ost__pkg_reset(q);
    ost__pkg_ment(q, m, 0, (const uint8_t *)"k1", 2, "x", 1, 0);
    cr_assert_eq(commit1(s2, q), 0, "%s", q->msg);
    cr_assert_eq(map_count(s, m), 2);
    /* blind puts (the loader's) count only new keys */
    ost__pkg_reset(q);
    ost__pkg_ment(q, m, 0, (const uint8_t *)"k1", 2, "y", 1, OST__MENT_BLIND);
    ost__pkg_ment(q, m, 0, (const uint8_t *)"k3", 2, "y", 1, OST__MENT_BLIND);
    cr_assert_eq(commit1(s2, q), 0, "%s", q->msg);
    cr_assert_eq(map_count(s, m), 3);
    /* each_map, in oid order */
    dump d = {0};
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    cr_assert_eq(E->ops->ent_each_map(s, list_maps, &d), 0);
    E->ops->snap_end(s);
    cr_assert_eq(d.count, 2);
    cr_assert_eq(d.oids[0], m);
    cr_assert_eq(d.oids[1], m2);
    /* drop_map outside a snapshot (a tool's own statement) */
    uint64_t n = 0;
    cr_assert_eq(E->ops->ent_drop_map(s, m, &n), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(n, 3);
    memset(&d, 0, sizeof d);
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    cr_assert_eq(E->ops->ent_each_map(s, list_maps, &d), 0);
    E->ops->snap_end(s);
    cr_assert_eq(d.count, 1);
    cr_assert_eq(d.oids[0], m2);
    /* a map whose record is gone: its count cannot be updated */
    ost__pkg_reset(q);
    uint64_t ghost = oids(1);
    ost__pkg_ment(q, ghost, 0, (const uint8_t *)"k", 1, "v", 1, 0);
    cr_assert_eq(commit1(s2, q), OST_ECONFLICT);
    snprintf(want, sizeof want, "conflict on map %llu: it was removed (pack) after this transaction read it",
             (unsigned long long)ghost);
    cr_assert_str_eq(q->msg, want);
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    ost__entry e;
    cr_assert_eq(E->ops->ent_get(s, ghost, (const uint8_t *)"k", 1, &e), OST_ENOTFOUND);
    E->ops->snap_end(s);
    ost__pkg_free(p);
    ost__pkg_free(q);
    E->ops->sess_close(s);
    E->ops->sess_close(s2);
}

/* ---- the server going away ------------------------------------------------------------- */

Test(engine, a_restarted_server_fails_once_then_recovers) {
    const char *restart = getenv("OST_TEST_PG_RESTART");
    if (strcmp(E->name, "postgresql") || !restart) return;
    uint64_t f = oids(1);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "x", 1);
    cr_assert_eq(commit1(s, p), 0);
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    ost__recview rv;
    cr_assert_eq(E->ops->get(s, f, &rv), 0);
    cr_assert_eq(system(restart), 0);
    /* the snapshot's connection is gone */
    cr_assert_eq(E->ops->get(s, f, &rv), OST_EIO);
    const char *m = ost_store_errmsg(st);
    cr_assert(strstr(m, st->shown), "%s", m);
    cr_assert(!strchr(m, '\n'), "%s", m);
    E->ops->snap_end(s);
    /* the next snapshot reconnects */
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(E->ops->get(s, f, &rv), 0);
    E->ops->snap_end(s);
    /* a commit on a connection the restart broke reconnects too */
    cr_assert_eq(system(restart), 0);
    ost__pkg_reset(p);
    ost__pkg_add(p, f, rv.serial, 1, "y", 1);
    int rc = E->ops->commit(s, &p, 1);
    if (rc) {
        cr_assert_eq(rc, OST_EIO);
        cr_assert_eq(p->rc, OST_EIO);
        rc = E->ops->commit(s, &p, 1);
    }
    cr_assert_eq(rc, 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(p->rc, 0, "%s", p->msg);
    /* the engine's own connection (class ids, oids) too */
    cr_assert_eq(system(restart), 0);
    cr_assert_geq(oids(1), f + 1);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

/* ---- the public API on the engine ---------------------------------------------
 * ost_store_open dispatches on the address; connections, commits, conflicts,
 * invalidations, maps, iterators and the bulk loader then run on the engine
 * through the table. (LMDB runs them in every other suite.) */

static ost_value g_item; /* the class of the items (registry) */
static ost_registry *g_reg;
static char g_addr[1024];

static void api_setup(void) {
    E = engine_pick();
    cr_assert(E, "no engine %s in this build", getenv("OST_TEST_ENGINE"));
    cr_assert(!E->fresh(g_addr, sizeof g_addr), "cannot make a fresh address");
    static const char *fields[] = {"name", "n", "next"};
    ost_class_def def = {.module = "shop", .name = "Item", .fields = fields, .nfields = 3,
                         .persistent = true};
    g_reg = ost_registry_new();
    cr_assert_eq(ost_registry_add(g_reg, &def, &g_item), 0);
}

static void api_teardown(void) {
    ost_registry_free(g_reg);
    g_reg = NULL;
}

static ost_store *api_open(bool create, bool group) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    o.group_commit = group;
    o.registry = g_reg;
    ost_store *s = ost_store_new();
    cr_assert(s);
    int rc = ost_store_open(s, g_addr, &o);
    cr_assert_eq(rc, 0, "open %s: %s", g_addr, ost_store_errmsg(s));
    return s;
}

static ost_value item(const char *name, int64_t n) {
    ost_value a = ost_instance_new(ost_incref(g_item));
    cr_assert(a);
    ost_instance_setattr(a, "name", ost_str_c(name));
    ost_instance_setattr(a, "n", ost_int(n));
    return a;
}

static int64_t item_n(ost_value a) {
    int64_t v = -1;
    cr_assert_eq(ost_int_value(ost_instance_getattr(a, "n"), &v), 0);
    return v;
}

TestSuite(api, .init = api_setup, .fini = api_teardown, .timeout = 120);

Test(api, open_by_address_commit_and_read_back_in_another_handle) {
    if (strcmp(E->name, "postgresql")) return; /* LMDB: the store suite */
    ost_store *a = api_open(true, false);
    ost_store_stats ss;
    cr_assert_eq(ost_store_stat(a, &ss), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(ss.records, 1, "a new store holds its root only");
    /* the address is shown without a password, and is not a path */
    cr_assert(!ost_store_addr_is_path(g_addr));
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value l = ost_list_new(0);
    for (int i = 0; i < 50; i++) ost_list_append(l, item("x", i));
    cr_assert_eq(ost_root_set_c(c, "items", l), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(a);

    ost_store *b = api_open(false, false);
    cr_assert_eq(ost_conn_open(b, &c), 0);
    ost_value got = ost_root_get_c(c, "items");
    cr_assert(got, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_len(got), 50);
    ost_value it = ost_item(got, 49);
    cr_assert(ost_is_ghost(it));
    cr_assert_eq(item_n(it), 49);
    /* iterators walk the records of a class */
    ost_iter *iter;
    cr_assert_eq(ost_iter_open(c, g_item, &iter), 0, "%s", ost_conn_errmsg(c));
    ost_record_info info;
    size_t count = 0;
    int rc;
    while ((rc = ost_iter_next(iter, &info, NULL)) == 0) count++;
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_conn_errmsg(c));
    cr_assert_eq(count, 50);
    ost_iter_close(iter);
    /* what the engine has not yet: a clear refusal */
    uint64_t removed;
    cr_assert_eq(ost_store_pack(b, &removed), OST_EINVAL);
    cr_assert(strstr(ost_store_errmsg(b), "not available on the postgresql engine"), "%s",
              ost_store_errmsg(b));
    ost_conn_close(c);
    ost_store_close(b);
}

Test(api, two_handles_conflict_and_invalidate) {
    if (strcmp(E->name, "postgresql")) return;
    ost_store *a = api_open(true, false), *b = api_open(false, false);
    ost_conn *ca, *cb;
    cr_assert_eq(ost_conn_open(a, &ca), 0);
    cr_assert_eq(ost_conn_open(b, &cb), 0);
    cr_assert_eq(ost_root_set_c(ca, "counter", item("c", 0)), 0);
    cr_assert_eq(ost_commit(ca), 0, "%s", ost_conn_errmsg(ca));
    ost_abort(cb); /* a new transaction sees the commit */
    ost_value xa = ost_root_get_c(ca, "counter"), xb = ost_root_get_c(cb, "counter");
    cr_assert(xb, "%s", ost_conn_errmsg(cb));
    cr_assert_eq(item_n(xb), 0);
    ost_instance_setattr(xa, "n", ost_int(1));
    ost_instance_setattr(xb, "n", ost_int(2));
    cr_assert_eq(ost_commit(ca), 0, "%s", ost_conn_errmsg(ca));
    uint64_t oid = ost_oid(cb, xb);
    cr_assert_eq(ost_commit(cb), OST_ECONFLICT);
    char want[64];
    snprintf(want, sizeof want, "conflict on oid %llu", (unsigned long long)oid);
    cr_assert(strstr(ost_conn_errmsg(cb), want), "%s", ost_conn_errmsg(cb));
    ost_abort(cb);
    /* the abort's new snapshot invalidated it: it reloads the winner's state */
    cr_assert_eq(item_n(xb), 1);
    ost_conn_close(ca);
    ost_conn_close(cb);
    ost_store_close(a);
    ost_store_close(b);
}

Test(api, ordered_maps_and_the_loader) {
    if (strcmp(E->name, "postgresql")) return;
    ost_store *a = api_open(true, true); /* loader and group commit on the engine */
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_root_set_c(c, "m", ost_incref(m)), 0); /* m is borrowed: the root's own */
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    m = ost_root_get_c(c, "m");
    ost_loader *l;
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = 300; /* several batches */
    cr_assert_eq(ost_loader_open(c, &lo, &l), 0, "%s", ost_conn_errmsg(c));
    for (int i = 999; i >= 0; i--) {
        ost_value v = item("k", i);
        uint64_t oid;
        cr_assert_eq(ost_loader_add(l, v, &oid), 0, "%s", ost_loader_errmsg(l));
        /* steals v: the map's value is the stored object */
        cr_assert_eq(ost_loader_map_set(l, m, ost_int(i), v), 0, "%s", ost_loader_errmsg(l));
    }
    cr_assert_eq(ost_loader_close(l), 0);
    uint64_t n;
    cr_assert_eq(ost_map_len(c, m, &n), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(n, 1000);
    cr_assert_eq(ost_map_set(c, m, ost_int(-5), ost_int(7)), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_map_del(c, m, ost_int(10)), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    /* in key order, both ways, from the engine's entries */
    ost_map_cursor *cur;
    cr_assert_eq(ost_map_cursor_open(c, m, NULL, &cur), 0, "%s", ost_conn_errmsg(c));
    ost_value k, v;
    int64_t prev = INT64_MIN, ki, seen = 0;
    int rc;
    while ((rc = ost_map_cursor_next(cur, &k, &v)) == 0) {
        cr_assert_eq(ost_int_value(k, &ki), 0);
        cr_assert_gt(ki, prev);
        prev = ki;
        seen++;
        if (ki >= 0) cr_assert_eq(item_n(v), ki);
    }
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_conn_errmsg(c));
    cr_assert_eq(seen, 1000);
    ost_map_cursor_close(cur);
    ost_value last;
    cr_assert_eq(ost_map_last(c, m, &last), 0);
    cr_assert_eq(ost_int_value(last, &ki), 0);
    cr_assert_eq(ki, 999);
    ost_decref(last);
    ost_conn_close(c);
    ost_store_close(a);
}

Test(api, prefetch_loads_ghosts_in_one_trip) {
    if (strcmp(E->name, "postgresql")) return;
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value l = ost_list_new(0);
    for (int i = 0; i < 200; i++) {
        ost_value x = item("x", i);
        ost_instance_setattr(x, "next", item("kid", 1000 + i));
        ost_list_append(l, x);
    }
    cr_assert_eq(ost_root_set_c(c, "items", l), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(a);

    ost_store *b = api_open(false, false);
    cr_assert_eq(ost_conn_open(b, &c), 0);
    ost_value got = ost_root_get_c(c, "items");
    cr_assert(got, "%s", ost_conn_errmsg(c));
    ost_value objs[203];
    for (int i = 0; i < 200; i++) {
        objs[i] = ost_item(got, (size_t)i);
        cr_assert(ost_is_ghost(objs[i]));
    }
    objs[200] = ost_int(3);
    objs[201] = got;
    objs[202] = item("new", 5);
    cr_assert_eq(ost_prefetch(c, objs, 203), 0, "%s", ost_conn_errmsg(c));
    for (int i = 0; i < 200; i++) {
        cr_assert_not(ost_is_ghost(objs[i]));
        ost_value kid = ost_instance_getattr(objs[i], "next");
        cr_assert(ost_is_ghost(kid));
        cr_assert_eq(item_n(objs[i]), i);
        cr_assert_eq(item_n(kid), 1000 + i);
    }
    ost_decref(objs[202]);
    /* by oids, in another connection */
    ost_conn *d;
    cr_assert_eq(ost_conn_open(b, &d), 0);
    uint64_t oids[4] = {ost_oid(c, objs[10]), ost_oid(c, objs[150]),
                        ost_oid(c, ost_instance_getattr(objs[3], "next")), 0};
    ost_value got4[4];
    cr_assert_eq(ost_conn_get_many(d, oids, 4, got4), 0, "%s", ost_conn_errmsg(d));
    cr_assert_eq(item_n(got4[0]), 10);
    cr_assert_eq(item_n(got4[1]), 150);
    cr_assert_eq(item_n(got4[2]), 1003);
    cr_assert_eq(got4[3], ost_conn_root(d), "oid 0 is the root");
    oids[3] = 1u << 30;
    cr_assert_eq(ost_conn_get_many(d, oids, 4, got4), OST_ENOTFOUND);
    cr_assert_eq(got4[0], 0);
    ost_conn_close(d);
    cr_assert_eq(ost_prefetch(c, NULL, 0), 0);
    cr_assert_eq(ost_prefetch(NULL, objs, 1), OST_EINVAL);
    cr_assert_eq(ost_prefetch(c, NULL, 1), OST_EINVAL);
    cr_assert(strstr(ost_conn_errmsg(c), "objs is NULL"), "%s", ost_conn_errmsg(c));
    /* a record deleted behind the store's back: ENOTFOUND with the oid */
    cr_assert_eq(ost_invalidate(c, objs[7]), 0);
    cr_assert_eq(ost_invalidate(c, objs[8]), 0);
    uint64_t gone = ost_oid(c, objs[8]);
    char sql[128];
    snprintf(sql, sizeof sql, "DELETE FROM ost_records WHERE oid = %llu", (unsigned long long)gone);
    cr_assert_eq(E->sql(g_addr, sql), 0);
    ost_abort(c); /* the next snapshot no longer has it */
    cr_assert_eq(ost_prefetch(c, objs, 200), OST_ENOTFOUND);
    char want[64];
    snprintf(want, sizeof want, "oid %llu", (unsigned long long)gone);
    cr_assert(strstr(ost_conn_errmsg(c), want), "%s", ost_conn_errmsg(c));
    cr_assert(ost_is_ghost(objs[7]), "nothing was loaded");
    ost_conn_close(c);
    ost_store_close(b);
}

Test(api, loader_batches_go_by_copy_and_a_failed_one_leaves_nothing) {
    if (strcmp(E->name, "postgresql")) return;
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = 1000; /* past ost__pg_copy_min: COPY */
    ost_loader *l;
    cr_assert_eq(ost_loader_open(c, &lo, &l), 0, "%s", ost_conn_errmsg(c));
    uint64_t first = 0, oid;
    for (int i = 0; i < 2500; i++) {
        ost_value v = item("copied", i);
        cr_assert_eq(ost_loader_add(l, v, &oid), 0, "%s", ost_loader_errmsg(l));
        if (!i) first = oid;
        ost_decref(v);
    }
    cr_assert_eq(ost_loader_close(l), 0, "%s", ost_conn_errmsg(c));
    ost_store_stats ss;
    cr_assert_eq(ost_store_stat(a, &ss), 0);
    cr_assert_eq(ss.records, 2501);
    /* the states, classes and serials COPY wrote read back */
    ost_abort(c);
    for (uint64_t o = first; o < first + 2500; o += 499) {
        ost_value got;
        cr_assert_eq(ost_conn_get(c, o, &got), 0, "%s", ost_conn_errmsg(c));
        cr_assert_eq(ost_instance_class(got), g_item);
        cr_assert_eq(item_n(got), (int64_t)(o - first));
    }
    uint64_t serial = ss.last_serial;
    /* a row in the way of the next batch: its COPY fails, the whole
     * batch (and its serial) rolls back */
    char sql[160];
    snprintf(sql, sizeof sql,
             "INSERT INTO ost_records VALUES (%llu, 1, 1, '\\\\x80')",
             (unsigned long long)(ss.next_oid + 700));
    cr_assert_eq(E->sql(g_addr, sql), 0);
    cr_assert_eq(ost_loader_open(c, &lo, &l), 0, "%s", ost_conn_errmsg(c));
    int rc = 0;
    for (int i = 0; i < 1500 && !rc; i++) {
        ost_value v = item("blocked", i);
        rc = ost_loader_add(l, v, &oid);
        ost_decref(v);
    }
    char lmsg[512];
    snprintf(lmsg, sizeof lmsg, "%s", ost_loader_errmsg(l));
    int crc = ost_loader_close(l);
    cr_assert(rc || crc, "the batch over the row in the way failed");
    cr_assert(strstr(ost_conn_errmsg(c), "COPY") || strstr(lmsg, "COPY"), "%s / %s",
              ost_conn_errmsg(c), lmsg);
    cr_assert(strstr(ost_conn_errmsg(c), "duplicate") || strstr(lmsg, "duplicate"), "%s / %s",
              ost_conn_errmsg(c), lmsg);
    cr_assert_eq(ost_store_stat(a, &ss), 0);
    cr_assert_eq(ss.records, 2502, "nothing of the failed batch: %llu records",
                 (unsigned long long)ss.records);
    cr_assert_eq(ss.last_serial, serial, "no serial taken");
    ost_conn_close(c);
    ost_store_close(a);
}
