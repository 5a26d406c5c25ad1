/* The engine conformance suite: store/engine.h's operations, the same
 * tests for every engine. An engine joins with one line of `engines`
 * below (its table and how a test gets a fresh, empty address) and one
 * test in tests/meson.build that sets OST_TEST_ENGINE to its name
 * (lmdb-engine, pg-engine). A test that cannot apply to an engine skips
 * with the reason (cr_skip_test), so Criterion's summary counts it.
 *
 * PostgreSQL runs against a private server (tests/pg/pgserver.sh), which
 * exports OST_TEST_PG (the address), OST_TEST_PG_RESTART (a command that
 * restarts the server) and OST_TEST_PG_DIR. Each test works in a schema
 * of its own (the address's search_path), made with psql. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "engine.h"
#include "knobs.h"
#include "leakcheck.h"
#include "rmtree.h"
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
    /* One open of a store per process (LMDB: an environment opened twice
     * in one process breaks its locks): tests that race two handles race
     * two threads on the one handle instead. */
    bool one_open;
    /* What records a new store holds (LMDB's open writes the root). */
    uint64_t base_records;
    /* What an open without create says of an address with no store. */
    const char *no_store_msg;
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

/* LMDB: a new directory under /tmp, removed when the process ends; the
 * store is a subdirectory not made yet. */
static char g_lmdb_tmp[64];

static void lmdb_cleanup(void) {
    if (g_lmdb_tmp[0]) rmtree(g_lmdb_tmp);
}

static int lmdb_fresh(char *out, size_t cap) {
    static unsigned seq;
    if (!g_lmdb_tmp[0]) {
        strcpy(g_lmdb_tmp, "/tmp/ostore-engine-XXXXXX");
        if (!mkdtemp(g_lmdb_tmp)) return 1;
        atexit(lmdb_cleanup);
    }
    snprintf(out, cap, "%s/s%u", g_lmdb_tmp, seq++);
    return 0;
}

/* mem: a name of its own for each test (a named store lives until the
 * process ends, so that a test can close and reopen it). */
static int mem_fresh(char *out, size_t cap) {
    static unsigned seq;
    snprintf(out, cap, "mem:t%ld_%u", (long)getpid(), seq++);
    return 0;
}

extern const ost__engine_ops ost__lmdb_engine, ost__mem_engine;
#ifdef OST_HAVE_POSTGRESQL
extern const ost__engine_ops ost__pg_engine;
#endif

static const engine_case engines[] = {
#ifdef OST_HAVE_POSTGRESQL
    {"postgresql", &ost__pg_engine, pg_fresh, psql, false, 0, "no ostore schema at "},
#endif
    {"lmdb", &ost__lmdb_engine, lmdb_fresh, NULL, true, 1, "No such file or directory"},
    {"mem", &ost__mem_engine, mem_fresh, NULL, false, 1, "no store at mem:"},
};

static const engine_case *E;
static char addr[1024];

/* Skips the test on the in-memory engine, saying why: what needs another
 * process (a store in memory is its process's alone) or bytes to damage. */
#define NOT_IN_MEMORY(why)                                                   \
    do {                                                                     \
        if (!strcmp(E->name, "mem")) cr_skip_test("not in memory: %s", why); \
    } while (0)
static ost_store *st;
static ost__engine *eng;

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
    int rc = E->ops->open(&ost__store_host, st, addr, &o, &eng);
    cr_assert_eq(rc, 0, "open: %s", ost_store_errmsg(st));
    /* as ost_store_open does after the engine's open: the store's copy of
     * the address as messages show it (engines fill only their own) */
    snprintf(st->shown, sizeof st->shown, "%s", E->ops->shown(eng));
    if (KNOBS_ON) knob_set(OST__K_PG_PAGE_ROWS, 2); /* paging shows with a few rows */
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
    uint64_t serials[64]; /* changes: the serial of each oid */
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

static void scan_from(ost__sess *s, uint64_t from, dump *d) {
    memset(d, 0, sizeof *d);
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    cr_assert_eq(E->ops->scan(s, from, 0, dump_fn, d), 0, "%s", ost_store_errmsg(st));
    E->ops->snap_end(s);
}

static void scan_all(ost__sess *s, dump *d) { scan_from(s, 0, d); }

/* ---- opening ---------------------------------------------------------------------- */

/* The table of engines (store/engines.c) gives each engine its own
 * addresses, and only those. */
OST_TEST(engine, the_table_gives_it_its_addresses) {
    bool pg = !strcmp(E->name, "postgresql"), lmdb = !strcmp(E->name, "lmdb"),
         mem = !strcmp(E->name, "mem");
    cr_assert_eq(ost__engine_for("postgresql://h/db") == E->ops, pg);
    cr_assert_eq(ost__engine_for("postgres://h/db") == E->ops, pg);
    cr_assert_eq(ost__engine_for("postgres:host=/tmp dbname=x") == E->ops, pg);
    cr_assert_eq(ost__engine_for("/var/lib/store") == E->ops, lmdb);
    cr_assert_eq(ost__engine_for("store") == E->ops, lmdb);
    cr_assert_eq(ost__engine_for("postgresql") == E->ops, lmdb); /* a directory of that name */
    cr_assert_eq(ost__engine_for("mem:") == E->ops, mem);
    cr_assert_eq(ost__engine_for("mem:x") == E->ops, mem);
    cr_assert_eq(ost__engine_for("./mem:x") == E->ops, lmdb); /* a directory of that name */
    cr_assert_eq(E->ops->version, OST__ENGINE_VERSION);
}

OST_TEST(engine, creates_then_reopens_with_counters) {
    ost_store_stats ss;
    cr_assert_eq(E->ops->stat(eng, &ss), 0);
    cr_assert_eq(ss.records, E->base_records);
    cr_assert_eq(ss.next_oid, 1);
    cr_assert_eq(ss.last_serial, E->base_records); /* LMDB's open commits the root */
    const char *shown = E->ops->shown(eng);
    cr_assert(strstr(shown, E->one_open ? g_lmdb_tmp : E->sql ? "search_path" : addr), "shown: %s",
              shown);
    E->ops->close(eng);
    eng = NULL;
    ost_store_options o;
    ost_store_options_init(&o);
    cr_assert_eq(E->ops->open(&ost__store_host, st, addr, &o, &eng), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(E->ops->stat(eng, &ss), 0);
    cr_assert_eq(ss.next_oid, 1);
    /* create on an existing store keeps it */
    uint64_t f = oids(5);
    E->ops->close(eng);
    o.create = true;
    cr_assert_eq(E->ops->open(&ost__store_host, st, addr, &o, &eng), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(oids(1), f + 5);
}

OST_TEST(engine, refuses_a_database_without_the_schema) {
    char a2[1024];
    cr_assert(!E->fresh(a2, sizeof a2));
    ost_store_options o;
    ost_store_options_init(&o);
    ost__engine *e2 = NULL;
    ost_store *st2 = ost_store_new();
    cr_assert(st2);
    int rc = E->ops->open(&ost__store_host, st2, a2, &o, &e2);
    cr_assert_eq(rc, OST_ENOTFOUND, "rc %d", rc);
    cr_assert_null(e2);
    cr_assert(strstr(ost_store_errmsg(st2), E->no_store_msg), "%s", ost_store_errmsg(st2));
    ost_store_close(st2);
}

OST_TEST(engine, refuses_another_format) {
    if (!E->sql) cr_skip_test("%s: no SQL to edit the format with (tests/test_safety.c covers it)", E->name);
    cr_assert_eq(E->sql(addr, "UPDATE ost_meta SET format = 99"), 0);
    ost_store_options o;
    ost_store_options_init(&o);
    ost__engine *e2 = NULL;
    cr_assert_eq(E->ops->open(&ost__store_host, st, addr, &o, &e2), OST_EVERSION);
    cr_assert(strstr(ost_store_errmsg(st), "store format 99, this library reads 3"), "%s",
              ost_store_errmsg(st));
}

/* Issue 30, item 5: the engine reads nothing it has not checked. A column
 * whose type changed under an open store (ALTER TABLE by another program)
 * is refused with OST_ECORRUPT naming it, where the engine read the int's
 * 4 bytes and 4 past them as a bigint (a garbage serial, rc 0), or the
 * first half of a bigint as a class id (0, rc 0). Reopened, the store is
 * refused as not ostore's, naming the column. */
OST_TEST(engine, a_column_of_another_type_is_refused_not_misread) {
    if (!E->sql) cr_skip_test("%s: no SQL to change a column with", E->name);
    uint64_t f = oids(1);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 7, "v1", 2);
    cr_assert_eq(commit1(s, p), 0);
    static const struct {
        const char *alter, *undo, *what;
    } cases[] = {
        {"ALTER TABLE ost_records ALTER COLUMN serial TYPE int",
         "ALTER TABLE ost_records ALTER COLUMN serial TYPE bigint",
         "column serial is integer, ostore reads bigint"},
        {"ALTER TABLE ost_records ALTER COLUMN cid TYPE bigint",
         "ALTER TABLE ost_records ALTER COLUMN cid TYPE int",
         "column cid is bigint, ostore reads integer"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cr_assert_eq(E->sql(addr, cases[i].alter), 0, "%s", cases[i].alter);
        dump d = {0};
        cr_assert_eq(E->ops->snap_begin(s, NULL), 0, "%s", ost_store_errmsg(st));
        int rc = E->ops->scan(s, 0, 0, dump_fn, &d);
        E->ops->snap_end(s);
        cr_assert_eq(rc, OST_ECORRUPT, "%s: scan gave %s (%s): %s", cases[i].alter,
                     ost_err_name(rc), ost_store_errmsg(st), d.buf);
        const char *m = ost_store_errmsg(st);
        cr_assert(strstr(m, cases[i].what) && strstr(m, "scanning records") &&
                      strstr(m, "search_path"),
                  "%s: %s", cases[i].alter, m);
        /* a commit over the record, from a session that prepares its
         * statements after the change (on one prepared before, the server
         * refuses the plan itself), reads the serial through the lock
         * statement (a group's pipeline, then the path that says why):
         * refused, never a conflict or a commit from a misread serial */
        if (i == 0) { /* a commit reads serials only (a cid is written, not read) */
            ost__sess *s2;
            cr_assert_eq(E->ops->sess_open(eng, &s2), 0);
            ost__pkg *q = pkg();
            ost__pkg_add(q, f, p->serial, 7, "v2", 2);
            rc = commit1(s2, q);
            cr_assert_eq(rc, OST_ECORRUPT, "%s: a commit over it gave %s (%s)", cases[i].alter,
                         ost_err_name(rc), q->msg);
            ost__pkg_free(q);
            E->ops->sess_close(s2);
        }
        /* a new handle refuses the store, naming the column */
        ost_store_options o;
        ost_store_options_init(&o);
        ost_store *st2 = ost_store_new();
        ost__engine *e2 = NULL;
        rc = E->ops->open(&ost__store_host, st2, addr, &o, &e2);
        cr_assert_eq(rc, OST_ECORRUPT, "%s: open gave %s", cases[i].alter, ost_err_name(rc));
        cr_assert(strstr(ost_store_errmsg(st2), "not an ostore schema: column ost_records."),
                  "%s", ost_store_errmsg(st2));
        ost_store_close(st2);
        cr_assert_eq(E->sql(addr, cases[i].undo), 0, "%s", cases[i].undo);
    }
    /* meta's counters too (the engine's own connection) */
    cr_assert_eq(E->sql(addr, "ALTER TABLE ost_meta ALTER COLUMN next_oid TYPE int"), 0);
    ost_store_stats ss;
    int rc = E->ops->stat(eng, &ss);
    cr_assert_eq(rc, OST_ECORRUPT, "stat gave %s, next_oid %llu", ost_err_name(rc),
                 (unsigned long long)ss.next_oid);
    cr_assert(strstr(ost_store_errmsg(st), "column next_oid is integer, ostore reads bigint"), "%s",
              ost_store_errmsg(st));
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

/* Tables of ostore's names that another program made: open (with create
 * or not) refuses them, saying what differs, and creates nothing (before,
 * create made the four tables missing beside a foreign ost_records, which
 * stayed when the store's first read failed). */
OST_TEST(engine, tables_that_are_not_ostores_are_refused_and_nothing_is_made) {
    if (!E->sql) cr_skip_test("%s: no SQL to make foreign tables with", E->name);
    static const struct {
        const char *make, *why;
    } cases[] = {
        {"CREATE TABLE ost_records (oid bigint PRIMARY KEY, x int)",
         "not an ostore schema: table ost_records has no column serial"},
        {"CREATE VIEW ost_meta AS SELECT 1 AS id",
         "not an ostore schema: ost_meta is not a table (relkind 'v')"},
        {"CREATE TABLE ost_txlog (serial bigint PRIMARY KEY, oids bytea NOT NULL)",
         "not an ostore schema: table ost_meta is missing (ost_txlog is there)"},
        {"CREATE TABLE ost_classes (id int PRIMARY KEY, module text, name text)",
         "not an ostore schema: table ost_classes has no unique key (module,name)"},
        {"CREATE TABLE ost_ments (map bigint, key bytea, value bytea, serial bigint, PRIMARY KEY "
         "(map, key))",
         "not an ostore schema: the columns of table ost_ments are not in ostore's order (serial "
         "is column 3)"},
        {"CREATE TABLE ost_txlog (serial bigint PRIMARY KEY, oids bytea, extra int)",
         "not an ostore schema: table ost_txlog has a column extra that ostore's has not"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char a2[1024];
        cr_assert(!E->fresh(a2, sizeof a2));
        cr_assert_eq(E->sql(a2, cases[i].make), 0, "%s", cases[i].make);
        for (int create = 0; create < 2; create++) {
            ost_store_options o;
            ost_store_options_init(&o);
            o.create = create;
            ost__engine *e2 = NULL;
            ost_store *st2 = ost_store_new();
            int rc = E->ops->open(&ost__store_host, st2, a2, &o, &e2);
            cr_assert_eq(rc, OST_ECORRUPT, "%s (create %d): %s: %s", cases[i].make, create,
                         ost_err_name(rc), ost_store_errmsg(st2));
            cr_assert_null(e2);
            cr_assert(strstr(ost_store_errmsg(st2), cases[i].why), "%s (create %d): %s",
                      cases[i].make, create, ost_store_errmsg(st2));
            ost_store_close(st2);
        }
        /* nothing made: the one relation of the case is all there is */
#ifdef OST_HAVE_POSTGRESQL
        char q[512];
        snprintf(q, sizeof q,
                 "DO \\$\\$ BEGIN IF (SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid "
                 "= c.relnamespace WHERE n.nspname = '%s' AND c.relkind IN ('r', 'v')) <> 1 THEN "
                 "RAISE 'made'; END IF; END \\$\\$",
                 g_schema);
        cr_assert_eq(E->sql(a2, q), 0, "%s: an open made tables", cases[i].make);
#endif
    }
}

/* A role with rights on the tables alone (no CREATE in the schema, as an
 * application's role often is) opens a store read-write: the open makes
 * ost_mapdels only when it is missing, since CREATE TABLE IF NOT EXISTS
 * asks for the right to create even when the table is there (before:
 * "permission denied for schema" at every read-write open). */
OST_TEST(engine, a_role_without_create_rights_opens_a_store_read_write) {
#ifdef OST_HAVE_POSTGRESQL
    if (strcmp(E->name, "postgresql")) cr_skip_test("no roles on %s", E->name);
    const char *base = getenv("OST_TEST_PG");
    cr_assert(base && strstr(addr, "user=postgres"), "%s", addr);
    ost_store_options o; /* the store: setup made it */
    ost_store_options_init(&o);
    ost__engine *e2 = NULL;
    char role[96], sql[1024];
    snprintf(role, sizeof role, "app_%s", g_schema);
    snprintf(sql, sizeof sql,
             "DROP ROLE IF EXISTS %s; CREATE ROLE %s LOGIN; GRANT USAGE ON SCHEMA %s TO %s; GRANT "
             "SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %s TO %s",
             role, role, g_schema, role, g_schema, role);
    cr_assert_eq(psql(base, sql), 0, "%s", sql);
    /* the same address as that role */
    char as[1100];
    const char *u = strstr(addr, "user=postgres");
    snprintf(as, sizeof as, "%.*suser=%s%s", (int)(u - addr), addr, role, u + strlen("user=postgres"));
    ost_store *st2 = ost_store_new();
    int rc = E->ops->open(&ost__store_host, st2, as, &o, &e2);
    cr_expect_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_store_errmsg(st2));
    if (!rc) E->ops->close(e2);
    ost_store_close(st2);
    snprintf(sql, sizeof sql, "DROP OWNED BY %s; DROP ROLE %s", role, role);
    cr_assert_eq(psql(base, sql), 0, "%s", sql);
#else
    cr_skip_test("built without the PostgreSQL engine");
#endif
}

OST_TEST(engine, bad_addresses_fail_with_a_clear_message) {
    if (strcmp(E->name, "postgresql")) cr_skip_test("no server addresses on %s (the store suite tests bad paths)", E->name);
    ost_store_options o;
    ost_store_options_init(&o);
    ost__engine *e2 = NULL;
    /* nothing listens on port 1 of this machine: refused at once */
    int rc = E->ops->open(&ost__store_host, st, "postgresql://ostore:s3cret@127.0.0.1:1/ostore?connect_timeout=2", &o, &e2);
    cr_assert_eq(rc, OST_EIO);
    const char *m = ost_store_errmsg(st);
    cr_assert(strstr(m, "postgresql://ostore@127.0.0.1:1/ostore"), "%s", m);
    cr_assert(strstr(m, "cannot connect"), "%s", m);
    cr_assert(!strstr(m, "s3cret"), "%s", m);
    cr_assert(!strchr(m, '\n'), "%s", m);
    rc = E->ops->open(&ost__store_host, st, "postgres:host=127.0.0.1 port=1 password=s3cret connect_timeout=2", &o, &e2);
    cr_assert_eq(rc, OST_EIO);
    m = ost_store_errmsg(st);
    cr_assert(strstr(m, "host=127.0.0.1 port=1"), "%s", m);
    cr_assert(!strstr(m, "s3cret"), "%s", m);
    /* no such database on the test server */
    char bad[1200];
    const char *dir = getenv("OST_TEST_PG_DIR");
    cr_assert(dir);
    snprintf(bad, sizeof bad, "postgresql:///nosuchdb?host=%s&user=postgres&password=s3cret", dir);
    rc = E->ops->open(&ost__store_host, st, bad, &o, &e2);
    cr_assert_eq(rc, OST_EIO);
    m = ost_store_errmsg(st);
    cr_assert(strstr(m, "database \"nosuchdb\" does not exist"), "%s", m);
    cr_assert(!strstr(m, "s3cret"), "%s", m);
    cr_assert_null(e2);
}

/* ---- classes and oids ---------------------------------------------------------------- */

OST_TEST(engine, class_ids_are_created_once_and_found) {
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
        if (E->one_open) { /* two threads on the one handle */
            r[i].st = st;
            r[i].e = eng;
            continue;
        }
        r[i].st = ost_store_new();
        cr_assert_eq(E->ops->open(&ost__store_host, r[i].st, addr, &o, &r[i].e), 0);
    }
    pthread_t t[2];
    for (int i = 0; i < 2; i++) pthread_create(&t[i], NULL, fn, &r[i]);
    for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 2; i++) {
        cr_assert_eq(r[i].rc, 0, "%s", ost_store_errmsg(r[i].st));
        if (E->one_open) continue;
        E->ops->close(r[i].e);
        ost_store_close(r[i].st);
    }
}

OST_TEST(engine, racing_class_ids_agree) {
    racer r[2];
    two_racers(r, race_classes);
    for (int i = 0; i < 20; i++) cr_assert_eq(r[0].ids[i], r[1].ids[i], "class %d", i);
    for (int i = 1; i < 20; i++) cr_assert_neq(r[0].ids[i], r[0].ids[i - 1]);
}

static int u64cmp(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

OST_TEST(engine, oid_blocks_never_overlap) {
    racer r[2];
    two_racers(r, race_oids);
    uint64_t all[200];
    memcpy(all, r[0].blocks, sizeof r[0].blocks);
    memcpy(all + 100, r[1].blocks, sizeof r[1].blocks);
    qsort(all, 200, sizeof all[0], u64cmp);
    cr_assert_geq(all[0], 1);
    for (int i = 1; i < 200; i++) cr_assert_geq(all[i], all[i - 1] + 10, "block %d", i);
}

OST_TEST(engine, oids_stop_short_of_2_to_the_63) {
    uint64_t f = oids(1);
    uint64_t x;
    cr_assert_eq(E->ops->reserve_oids(eng, ((uint64_t)1 << 63), &x), OST_ELIMIT);
    cr_assert(strstr(ost_store_errmsg(st), "2^63"), "%s", ost_store_errmsg(st));
    cr_assert_eq(oids(1), f + 1, "a refused block takes nothing");
}

/* ---- commits and reads ----------------------------------------------------------------- */

OST_TEST(engine, commits_new_records_then_reads_them) {
    ost_store_stats base;
    cr_assert_eq(E->ops->stat(eng, &base), 0);
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
    cr_assert_eq(p->serial, E->base_records + 1);
    ost__snapinfo si;
    cr_assert_eq(E->ops->snap_begin(s, &si), 0);
    cr_assert_eq(si.last_serial, E->base_records + 1);
    cr_assert_geq(si.next_oid, f + 5);
    ost__recview rv;
    cr_assert_eq(E->ops->get(s, f + 3, &rv), 0);
    cr_assert_eq(rv.serial, E->base_records + 1);
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
    cr_assert_eq(ss.records, E->base_records + 5);
    cr_assert_eq(ss.bytes, base.bytes + 5 * 16 + 5 * strlen(pk[0]));
    cr_assert_eq(ss.last_serial, E->base_records + 1);
    ost__pkg_free(p);
    E->ops->sess_close(s);
}

OST_TEST(engine, serials_follow_commit_order) {
    uint64_t f = oids(10);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    uint64_t prev = last_serial(s);
    for (int i = 0; i < 10; i++) {
        ost__pkg_reset(p);
        ost__pkg_add(p, f + (uint64_t)i, 0, 1, "x.", 2);
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

OST_TEST(engine, the_second_of_two_writers_conflicts) {
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

OST_TEST(engine, concurrent_writers_of_one_oid_one_wins) {
    uint64_t f = oids(2);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "v.", 2);
    ost__pkg_add(p, f + 1, 0, 1, "v.", 2);
    cr_assert_eq(commit1(s, p), 0);
    uint64_t s1 = p->serial;
    enum { N = 6 };
    ost__pkg *ps[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        ps[i] = pkg();
        /* in both orders: the row locks must not deadlock for good */
        ost__pkg_add(ps[i], i % 2 ? f : f + 1, s1, 1, "w.", 2);
        ost__pkg_add(ps[i], i % 2 ? f + 1 : f, s1, 1, "w.", 2);
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

/* The record of oid in a snapshot of its own: its pickle as a string
 * (cap bytes at most) and serial; false when there is none. */
static bool rec_of(ost__sess *s, uint64_t oid, char *out, size_t cap, uint64_t *serial) {
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0, "%s", ost_store_errmsg(st));
    ost__recview r;
    int rc = E->ops->get(s, oid, &r);
    if (!rc) {
        snprintf(out, cap, "%.*s", (int)r.len, (const char *)r.pickle);
        *serial = r.serial;
    }
    E->ops->snap_end(s);
    cr_assert(rc == 0 || rc == OST_ENOTFOUND, "%s", ost_store_errmsg(st));
    return rc == 0;
}

/* One commit call with several packages (a group of the group
 * committer): each commits or fails on its own, a later package's checks
 * see the writes of the earlier ones, and a package that fails after
 * writing (a reference pack removed; on a server, a statement refused)
 * takes nothing of the others with it. */
OST_TEST(engine, a_group_commits_each_package_on_its_own) {
    uint64_t f = oids(6);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f + 1, 0, 1, "old", 3);
    cr_assert_eq(commit1(s, p), 0);
    ost__pkg_free(p);
    uint64_t ls = last_serial(s);
    enum { N = 6 };
    ost__pkg *ps[N];
    for (int i = 0; i < N; i++) ps[i] = pkg();
    ost__pkg_add(ps[0], f, 0, 1, "a0", 2);                /* new: commits */
    ost__pkg_add(ps[1], f + 1, ls + 100, 1, "b1", 2);     /* stale: conflict before writing */
    ost__pkg_add(ps[2], f + 4, 0, 1, "c2", 2);            /* a reference pack removed: */
    ost__pkg_ref(ps[2], f + 5);                           /* conflict after writing */
    ps[2]->low = 12345;
    if (E->sql) { /* one oid twice: the server refuses the statement */
        ost__pkg_add(ps[3], f + 3, 0, 1, "d3", 2);
        ost__pkg_add(ps[3], f + 3, 0, 1, "e3", 2);
    }
    ost__pkg_add(ps[4], f, ls + 1, 1, "a4", 2); /* f as ps[0] of this group wrote it */
    ost__pkg_add(ps[5], f + 2, 0, 1, "f5", 2);
    cr_assert_eq(E->ops->commit(s, ps, N), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(ps[0]->rc, 0, "%s", ps[0]->msg);
    cr_assert_eq(ps[0]->serial, ls + 1);
    cr_assert_eq(ps[1]->rc, OST_ECONFLICT);
    cr_assert_eq(ps[1]->conflict_oid, f + 1);
    cr_assert_eq(ps[2]->rc, OST_ECONFLICT);
    cr_assert_eq(ps[2]->conflict_oid, f + 5, "%s", ps[2]->msg);
    if (E->sql) cr_assert_neq(ps[3]->rc, 0);
    cr_assert_eq(ps[4]->rc, 0, "%s", ps[4]->msg);
    cr_assert_eq(ps[5]->rc, 0, "%s", ps[5]->msg);
    cr_assert(ps[4]->serial > ps[0]->serial && ps[5]->serial > ps[4]->serial);
    cr_assert_eq(last_serial(s), ps[5]->serial);
    char v[16];
    uint64_t ser;
    cr_assert(rec_of(s, f, v, sizeof v, &ser));
    cr_assert_str_eq(v, "a4");
    cr_assert_eq(ser, ps[4]->serial);
    cr_assert(rec_of(s, f + 1, v, sizeof v, &ser));
    cr_assert_str_eq(v, "old");
    cr_assert(rec_of(s, f + 2, v, sizeof v, &ser));
    cr_assert_str_eq(v, "f5");
    cr_assert(!rec_of(s, f + 3, v, sizeof v, &ser));
    cr_assert(!rec_of(s, f + 4, v, sizeof v, &ser));
    for (int i = 0; i < N; i++) ost__pkg_free(ps[i]);
    E->ops->sess_close(s);
}

#ifdef OST_HAVE_POSTGRESQL
/* The server drops the engine's connection and takes no new one while
 * oids are reserved: OST_EIO with the cause, no crash (the retry on a new
 * connection used an unset connection when it could not connect), and
 * the next reservation works once the server takes connections again. */
OST_TEST(engine, reserving_oids_with_the_server_gone_says_so) {
    if (!E->sql) cr_skip_test("%s: no server", E->name);
    uint64_t first;
    cr_assert_eq(E->ops->reserve_oids(eng, 10, &first), 0, "%s", ost_store_errmsg(st));
    const char *admin = getenv("OST_TEST_PG_ADMIN");
    cr_assert(admin, "needs OST_TEST_PG_ADMIN (tests/pg/pgserver.sh)");
    cr_assert_eq(psql(admin, "ALTER DATABASE ostore ALLOW_CONNECTIONS false"), 0);
    cr_assert_eq(psql(admin, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                             "datname = 'ostore' AND pid <> pg_backend_pid()"),
                 0);
    int rc = E->ops->reserve_oids(eng, 10, &first);
    char msg[512];
    snprintf(msg, sizeof msg, "%s", ost_store_errmsg(st));
    cr_assert_eq(psql(admin, "ALTER DATABASE ostore ALLOW_CONNECTIONS true"), 0);
    cr_assert_eq(rc, OST_EIO, "%s", msg);
    cr_assert(strstr(msg, "cannot connect"), "%s", msg);
    uint64_t again;
    cr_assert_eq(E->ops->reserve_oids(eng, 10, &again), 0, "%s", ost_store_errmsg(st));
    cr_assert_geq(again, first + 10, "no oid twice");
}
#endif

/* A group of plain packages (records only: PostgreSQL commits it in two
 * round trips, ost__pg_group_fast) has the outcomes a package at a time gives:
 * a package conflicts with a record an earlier package of the group
 * wrote unless it read that very serial, and a package the server
 * refuses sends the group the slow way, with the same outcomes. */
OST_TEST(engine, a_group_of_plain_packages_has_each_outcome) {
    uint64_t f = oids(8);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f + 1, 0, 1, "old", 3);
    ost__pkg_add(p, f + 5, 0, 1, "old", 3);
    cr_assert_eq(commit1(s, p), 0);
    uint64_t s0 = p->serial;
    ost__pkg_free(p);
    for (int round = 0; round < 2; round++) {
        uint64_t ls = last_serial(s), o = f + (uint64_t)(round ? 6 : 0);
        enum { N = 6 };
        ost__pkg *ps[N];
        for (int i = 0; i < N; i++) ps[i] = pkg();
        ost__pkg_add(ps[0], o, 0, 1, "a0", 2);                 /* new */
        ost__pkg_add(ps[1], f + 1, ls + 100, 1, "b1", 2);      /* stale */
        ost__pkg_add(ps[2], o, ls + 1, 1, "c2", 2);            /* read what ps[0] writes */
        ost__pkg_add(ps[3], o, ls, 1, "d3", 2);                /* read before ps[0] */
        ost__pkg_add(ps[4], f + 5, round ? s0 : s0 + 50, 1, "e4", 2);
        if (round == 1 && E->sql) { /* one oid twice: the server refuses the write */
            ost__pkg_add(ps[5], f + 7, 0, 1, "x5", 2);
            ost__pkg_add(ps[5], f + 7, 0, 1, "y5", 2);
        }
        cr_assert_eq(E->ops->commit(s, ps, N), 0, "%s", ost_store_errmsg(st));
        cr_assert_eq(ps[0]->rc, 0, "%s", ps[0]->msg);
        cr_assert_eq(ps[0]->serial, ls + 1);
        cr_assert_eq(ps[1]->rc, OST_ECONFLICT);
        cr_assert_eq(ps[1]->conflict_oid, f + 1);
        cr_assert_eq(ps[2]->rc, 0, "%s", ps[2]->msg);
        cr_assert_eq(ps[2]->serial, ls + 2);
        cr_assert_eq(ps[3]->rc, OST_ECONFLICT);
        char want[200];
        snprintf(want, sizeof want,
                 "conflict on oid %llu: commit %llu changed it after this transaction read it "
                 "(at commit %llu)",
                 (unsigned long long)o, (unsigned long long)(ls + 2), (unsigned long long)ls);
        cr_assert_str_eq(ps[3]->msg, want);
        /* f + 5 read at a serial it never had (round 0), then at its own */
        if (round == 0) {
            cr_assert_eq(ps[4]->rc, OST_ECONFLICT);
        } else {
            cr_assert_eq(ps[4]->rc, 0, "%s", ps[4]->msg);
            cr_assert_eq(ps[4]->serial, ls + 3);
        }
        if (round == 1 && E->sql) cr_assert_neq(ps[5]->rc, 0);
        char v[16];
        uint64_t ser;
        cr_assert(rec_of(s, o, v, sizeof v, &ser));
        cr_assert_str_eq(v, "c2");
        cr_assert_eq(ser, ls + 2);
        cr_assert(rec_of(s, f + 1, v, sizeof v, &ser));
        cr_assert_str_eq(v, "old");
        cr_assert(!rec_of(s, f + 7, v, sizeof v, &ser));
        cr_assert_eq(last_serial(s), round ? ls + 3 : ls + 2);
        for (int i = 0; i < N; i++) ost__pkg_free(ps[i]);
    }
    E->ops->sess_close(s);
}

OST_TEST(engine, a_failed_package_leaves_nothing) {
    uint64_t f = oids(4);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "one", 3);
    cr_assert_eq(commit1(s, p), 0);
    /* f again, so that a serial before the last is one f had (not 0: new) */
    ost__pkg_reset(p);
    ost__pkg_add(p, f, last_serial(s), 1, "one", 3);
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
    /* a write the server refuses (one oid twice in a package): the
     * package fails with the server's cause, nothing is written, and the
     * session goes on (LMDB has no server: the last write of an oid wins,
     * and the store never sends such a package) */
    if (E->sql) {
        ost__pkg_reset(p);
        ost__pkg_add(p, f + 1, 0, 1, "a.", 2);
        ost__pkg_add(p, f + 1, 0, 1, "b.", 2);
        (void)E->ops->commit(s, &p, 1);
        cr_assert_neq(p->rc, 0);
        cr_assert(strstr(p->msg, st->shown), "%s", p->msg);
        scan_all(s, &after);
        cr_assert_str_eq(after.buf, before.buf);
        cr_assert_eq(last_serial(s), ls);
    }
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

OST_TEST(engine, each_package_of_a_call_has_its_own_outcome) {
    uint64_t f = oids(3);
    ost__sess *s = sess();
    ost__pkg *p[3] = {pkg(), pkg(), pkg()};
    ost__pkg_add(p[0], f, 0, 1, "a.", 2);
    ost__pkg_add(p[1], f + 1, 0, 1, "b.", 2);
    ost__pkg_add(p[1], f, 777, 1, "b.", 2); /* stale */
    ost__pkg_add(p[2], f + 2, 0, 1, "c.", 2);
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

static void collect(void *ud, uint64_t oid, uint64_t serial) {
    dump *d = ud;
    if (d->count < 64) {
        d->oids[d->count] = oid;
        d->serials[d->count] = serial;
    }
    d->count++;
}

OST_TEST(engine, changes_between_snapshots_then_a_gap_after_sweep) {
    uint64_t f = oids(4);
    ost__sess *s = sess(), *w = sess();
    ost__pkg *p = pkg();
    for (int i = 0; i < 4; i++) ost__pkg_add(p, f + (uint64_t)i, 0, 1, "x.", 2);
    cr_assert_eq(commit1(w, p), 0);
    uint64_t s0 = p->serial;
    ost__snapinfo a, b;
    cr_assert_eq(E->ops->snap_begin(s, &a), 0);
    cr_assert_eq(a.last_serial, s0);
    /* a writer changes f+1, then f+2 and f+3; a new object is no change */
    uint64_t done[3];
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 1, s0, 1, "y.", 2);
    cr_assert_eq(commit1(w, p), 0);
    done[0] = p->serial;
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 2, s0, 1, "y.", 2);
    ost__pkg_add(p, f + 3, s0, 1, "y.", 2);
    cr_assert_eq(commit1(w, p), 0);
    done[1] = p->serial;
    uint64_t g = oids(1);
    ost__pkg_reset(p);
    ost__pkg_add(p, g, 0, 1, "n.", 2);
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
    /* in serial order, each with the commit that changed it */
    cr_assert_eq(d.oids[0], f + 1);
    cr_assert_eq(d.serials[0], done[0]);
    cr_assert_eq(d.serials[1], done[1]);
    cr_assert_eq(d.serials[2], done[1]);
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

OST_TEST(engine, sweep_removes_exactly_the_unkept_unwritten_records) {
    uint64_t f = oids(6);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    for (int i = 0; i < 6; i++) ost__pkg_add(p, f + (uint64_t)i, 0, 1, "x.", 2);
    cr_assert_eq(commit1(s, p), 0);
    uint64_t mark = p->serial;
    /* written after the mark: kept though keep refuses it */
    ost__pkg_reset(p);
    ost__pkg_add(p, f + 4, mark, 1, "y.", 2);
    cr_assert_eq(commit1(s, p), 0);
    ost__snapinfo a;
    cr_assert_eq(E->ops->snap_begin(s, &a), 0);
    E->ops->snap_end(s);
    uint64_t removed = 99;
    cr_assert_eq(E->ops->sweep(s, mark, keep_odd, &f, &removed), 0, "%s", ost_store_errmsg(st));
    cr_assert_eq(removed, 2); /* f and f+2; f+4 was written after the mark */
    dump d;
    scan_from(s, f, &d);
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
    ost__pkg_add(p, f, mark, 1, "z.", 2);
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

OST_TEST(engine, map_entries_in_bytewise_order_both_ways) {
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

static bool keep_all_but(void *ud, uint64_t oid) { return oid != *(uint64_t *)ud; }

OST_TEST(engine, map_entries_deleted_conflicting_dropped_and_listed) {
    ost__entry e0;
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
    /* a writer that read k2 at s1 conflicts; one adding k1 that it read
     * absent in a snapshot older than the delete conflicts (the delete's
     * record, ent_get_del); one whose snapshot saw the delete does not */
    ost__pkg *q = pkg();
    ost__pkg_ment(q, m, s1, (const uint8_t *)"k2", 2, "x", 1, 0);
    cr_assert_eq(commit1(s2, q), OST_ECONFLICT);
    char want[200];
    snprintf(want, sizeof want, "conflict on map %llu, key b'k2': commit %llu changed it after this transaction read it",
             (unsigned long long)m, (unsigned long long)ser2);
    cr_assert_str_eq(q->msg, want);
    ost__pkg_reset(q);
    q->since = s1;
    ost__pkg_ment(q, m, 0, (const uint8_t *)"k1", 2, "x", 1, 0);
    cr_assert_eq(commit1(s2, q), OST_ECONFLICT);
    snprintf(want, sizeof want, "conflict on map %llu, key b'k1': commit %llu deleted it after this transaction began",
             (unsigned long long)m, (unsigned long long)ser2);
    cr_assert_str_eq(q->msg, want);
    ost__pkg_reset(q);
    q->since = ser2;
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
    /* a sweep that removes the map's record removes its entries */
    uint64_t removed = 0;
    cr_assert_eq(E->ops->sweep(s, last_serial(s), keep_all_but, &m, &removed), 0, "%s",
                 ost_store_errmsg(st));
    cr_assert_eq(removed, 1);
    cr_assert_eq(E->ops->snap_begin(s, NULL), 0);
    cr_assert_eq(E->ops->ent_get(s, m, (const uint8_t *)"k3", 2, &e0), OST_ENOTFOUND);
    E->ops->snap_end(s);
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

OST_TEST(engine, a_restarted_server_fails_once_then_recovers) {
    const char *restart = getenv("OST_TEST_PG_RESTART");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to restart", E->name);
    cr_assert(restart, "OST_TEST_PG_RESTART is not set (tests/pg/pgserver.sh sets it)");
    uint64_t f = oids(1);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "x.", 2);
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
    ost__pkg_add(p, f, rv.serial, 1, "y.", 2);
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

/* A commit is acknowledged only once the server flushed its WAL past the
 * commit record (issue 30: the flush wait, SELECT txid_current(), wrote no
 * WAL, so PostgreSQL committed it asynchronously and nothing waited).
 * Right after each commit call returns, the server's flush LSN must have
 * reached its insert LSN. Nothing else may write WAL meanwhile: the server
 * runs with wal_level minimal (no running-xacts records), autovacuum off,
 * no checkpoint due, and the WAL writer slowed to 10 s so that it does not
 * flush for the commit; the settings go back at the end (two restarts).
 * Both paths: a plain package (the two-pipeline path) and one of 300
 * records (COPY, the statement path). */
static const char *const flush_settings[] = {"wal_level", "max_wal_senders", "autovacuum",
                                             "wal_writer_delay", "checkpoint_timeout"};

OST_TEST(engine, a_commit_returns_after_the_server_flushed_it) {
    const char *admin = getenv("OST_TEST_PG_ADMIN"), *restart = getenv("OST_TEST_PG_RESTART");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server WAL", E->name);
    cr_assert(admin && restart, "run through tests/pg/pgserver.sh");
    static const char *const values[] = {"minimal", "0", "off", "'10s'", "'1h'"};
    char sql[128];
    for (int i = 0; i < 5; i++) {
        snprintf(sql, sizeof sql, "ALTER SYSTEM SET %s = %s", flush_settings[i], values[i]);
        cr_assert_eq(psql(admin, sql), 0, "%s", sql);
    }
    cr_assert_eq(system(restart), 0);
    /* fails (division by zero) unless everything inserted is flushed */
    const char *flushed =
        "SELECT 1 / (pg_current_wal_flush_lsn() >= pg_current_wal_insert_lsn())::int";
    enum { BIG = 300 };
    uint64_t f = oids(2 * BIG + 2);
    ost__sess *s = sess();
    int bad = 0;
    for (int round = 0; round < 2; round++) {
        ost__pkg *p = pkg();
        size_t n = round == 0 ? 1 : BIG; /* 1: the short path; BIG: COPY */
        for (size_t i = 0; i < n; i++) ost__pkg_add(p, f + round * 2 + i * 2, 0, 1, "x.", 2);
        int rc = E->ops->commit(s, &p, 1);
        int prc = p->rc;
        bool ok = rc == 0 && prc == 0 && psql(admin, flushed) == 0;
        if (!ok) cr_log_error("%zu records: rc %d, package %d, flushed: no", n, rc, prc);
        bad += !ok;
        ost__pkg_free(p);
    }
    E->ops->sess_close(s);
    for (int i = 0; i < 5; i++) {
        snprintf(sql, sizeof sql, "ALTER SYSTEM RESET %s", flush_settings[i]);
        psql(admin, sql);
    }
    cr_assert_eq(system(restart), 0);
    cr_assert_eq(bad, 0, "a commit returned before the server flushed it");
}

/* No session sees a commit before the server flushed it (issue 30's
 * review: a group committed with synchronous_commit off, then waited for
 * its flush, was visible in between; a reader could cache a commit that a
 * crash then lost, and take the next commit of the same serial for it).
 * The server delays every flush by commit_delay (100 ms; fsync on, and
 * commit_siblings 0 so that it always applies: XLogFlush in
 * src/backend/access/transam/xlog.c sleeps when "CommitDelay > 0 &&
 * enableFsync && MinimumActiveBackends(CommitSiblings)"). A reader polls
 * the last serial while a commit runs: it may see the commit only once
 * that flush began, at least 100 ms after the commit call started (before
 * the fix: within a few ms, then the flush wait slept). Both commit paths,
 * 3 commits each. The settings go back at the end (two restarts). */
static const char *const delay_settings[] = {"fsync", "commit_delay", "commit_siblings"};

typedef struct {
    ost__sess *s;
    uint64_t want;
    double seen; /* seconds on CLOCK_MONOTONIC when the reader saw it */
    volatile bool stop;
} vis_poll;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *vis_reader(void *arg) {
    vis_poll *v = arg;
    while (!v->stop && !v->seen) {
        ost__snapinfo si;
        if (E->ops->snap_begin(v->s, &si)) continue;
        if (si.last_serial >= v->want) v->seen = now_s();
        E->ops->snap_end(v->s);
    }
    return NULL;
}

OST_TEST(engine, no_session_sees_a_commit_before_the_server_flushed_it) {
    const char *admin = getenv("OST_TEST_PG_ADMIN"), *restart = getenv("OST_TEST_PG_RESTART");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server WAL", E->name);
    cr_assert(admin && restart, "run through tests/pg/pgserver.sh");
    static const char *const values[] = {"on", "100000", "0"};
    char sql[128];
    for (int i = 0; i < 3; i++) {
        snprintf(sql, sizeof sql, "ALTER SYSTEM SET %s = %s", delay_settings[i], values[i]);
        cr_assert_eq(psql(admin, sql), 0, "%s", sql);
    }
    cr_assert_eq(system(restart), 0);
    enum { BIG = 300 };
    uint64_t f = oids(6 * BIG + 6);
    ost__sess *w = sess(), *r;
    cr_assert_eq(E->ops->sess_open(eng, &r), 0);
    int early = 0;
    double least = 1e9;
    for (int round = 0; round < 6; round++) {
        uint64_t last = last_serial(r);
        ost__pkg *p = pkg();
        size_t n = round % 2 == 0 ? 1 : BIG; /* 1: the pipeline path; BIG: COPY */
        for (size_t i = 0; i < n; i++) ost__pkg_add(p, f + (uint64_t)round * BIG + i, 0, 1, "x.", 2);
        vis_poll v = {r, last + 1, 0, false};
        pthread_t th;
        double t0 = now_s();
        cr_assert_eq(pthread_create(&th, NULL, vis_reader, &v), 0);
        int rc = E->ops->commit(w, &p, 1);
        v.stop = true;
        pthread_join(th, NULL);
        cr_assert_eq(rc, 0, "%s", ost_store_errmsg(st));
        cr_assert_eq(p->rc, 0, "%s", p->msg);
        if (v.seen) {
            if (v.seen - t0 < least) least = v.seen - t0;
            early += v.seen - t0 < 0.1;
        }
        ost__pkg_free(p);
    }
    E->ops->sess_close(r);
    E->ops->sess_close(w);
    for (int i = 0; i < 3; i++) {
        snprintf(sql, sizeof sql, "ALTER SYSTEM RESET %s", delay_settings[i]);
        psql(admin, sql);
    }
    cr_assert_eq(system(restart), 0);
    cr_assert_eq(early, 0, "%d of 6 commits were seen before their flush (the first %.3f s after "
                 "the commit began; the flush waits 0.1 s)", early, least);
}

/* A commit call whose server went away: every package of it carries the
 * failure, not only the first (issue 30: the others kept rc 0, told
 * committed though nothing was written), and all of them commit once the
 * server is back. */
OST_TEST(engine, a_group_whose_server_stopped_fails_every_package) {
    const char *stop = getenv("OST_TEST_PG_STOP"), *start = getenv("OST_TEST_PG_START");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to stop", E->name);
    cr_assert(stop && start, "OST_TEST_PG_STOP/START are not set (tests/pg/pgserver.sh sets them)");
    enum { N = 6 };
    uint64_t f = oids(N + 1);
    ost__sess *s = sess();
    ost__pkg *p = pkg();
    ost__pkg_add(p, f, 0, 1, "x.", 2);
    cr_assert_eq(commit1(s, p), 0, "%s", p->msg); /* the session's connection is up */
    ost__pkg *ps[N];
    for (int i = 0; i < N; i++) {
        ps[i] = pkg();
        ost__pkg_add(ps[i], f + 1 + (uint64_t)i, 0, 1, "y.", 2);
    }
    cr_assert_eq(system(stop), 0);
    int rc = E->ops->commit(s, ps, N);
    int rcs[N];
    uint64_t serials[N];
    for (int i = 0; i < N; i++) {
        rcs[i] = ps[i]->rc;
        serials[i] = ps[i]->serial;
    }
    cr_assert_eq(system(start), 0); /* before any assertion: the next tests need it */
    cr_assert_eq(rc, OST_EIO, "%s", ost_err_name(rc));
    for (int i = 0; i < N; i++) {
        cr_assert_eq(rcs[i], OST_EIO, "package %d of %d: %s (told committed, nothing written)", i,
                     N, ost_err_name(rcs[i]));
        cr_assert_eq(serials[i], 0);
        cr_assert(ps[i]->msg[0], "package %d has no message", i);
    }
    /* nothing of them was written; the same call commits them all now */
    rc = E->ops->commit(s, ps, N);
    if (rc == OST_EIO) rc = E->ops->commit(s, ps, N); /* the broken connection, once */
    cr_assert_eq(rc, 0, "%s", ost_store_errmsg(st));
    for (int i = 0; i < N; i++) {
        cr_assert_eq(ps[i]->rc, 0, "%s", ps[i]->msg);
        ost__pkg_free(ps[i]);
    }
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

static bool g_stopped; /* a test stopped the server: teardown starts it */

static void api_teardown(void) {
    if (g_stopped && system(getenv("OST_TEST_PG_START")) != 0)
        fprintf(stderr, "api teardown: cannot start the server again\n");
    g_stopped = false;
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

OST_TEST(api, open_by_address_commit_and_read_back_in_another_handle) {
    ost_store *a = api_open(true, false);
    ost_store_stats ss;
    cr_assert_eq(ost_store_stat(a, &ss), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(ss.records, 1, "a new store holds its root only");
    /* a server's address is not a path */
    cr_assert_eq(ost_store_addr_is_path(g_addr), E->one_open);
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
    /* pack and check run on the engine: nothing is garbage here */
    uint64_t removed = 9, records = 0;
    cr_assert_eq(ost_store_pack(b, &removed), 0, "%s", ost_store_errmsg(b));
    cr_assert_eq(removed, 0);
    cr_assert_eq(ost_store_check(b, NULL, NULL, &records), 0, "%s", ost_store_errmsg(b));
    cr_assert_eq(records, 51);
    ost_conn_close(c);
    ost_store_close(b);
}

OST_TEST(api, two_handles_conflict_and_invalidate) {
    if (E->one_open) /* LMDB: one handle per store in a process */
        cr_skip_test("%s: two handles of one store in a process (test_store.c uses two processes)", E->name);
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

OST_TEST(api, ordered_maps_and_the_loader) {

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

/* ---- several processes on one store (PostgreSQL: they stand in for hosts) ---- */

/* In a child: a failed expectation says why on stderr and exits with the
 * line (never Criterion's assertions, which belong to the test process). */
#define CHILD_CHECK(cond, ...)                                                \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "child %d, line %d: ", (int)getpid(), __LINE__);  \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            _exit(__LINE__ % 200 + 1);                                        \
        }                                                                     \
    } while (0)

static pid_t fork_child(void) {
    fflush(NULL);
    pid_t p = fork();
    cr_assert_neq(p, -1, "fork: %s", strerror(errno));
    return p;
}

/* Exit status of a child; 128 + signal when it was killed. */
static int child_status(pid_t p) {
    int status;
    while (waitpid(p, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* In a child: the store at g_addr and a connection on it. */
static void child_open(ost_store **s, ost_conn **c) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.registry = g_reg;
    *s = ost_store_new();
    CHILD_CHECK(*s, "ost_store_new");
    int rc = ost_store_open(*s, g_addr, &o);
    CHILD_CHECK(rc == 0, "open: %s %s", ost_err_name(rc), ost_store_errmsg(*s));
    CHILD_CHECK(ost_conn_open(*s, c) == 0, "conn");
}

/* One attempt of ost_txn_run: root["counter"].n += 1. */
static int increment(void *ud, ost_conn *c) {
    (void)ud;
    ost_value ctr = ost_root_get_c(c, "counter");
    if (!ctr) return OST_EIO;
    int64_t n;
    int rc = ost_int_value(ost_instance_getattr(ctr, "n"), &n);
    return rc ? rc : ost_instance_setattr(ctr, "n", ost_int(n + 1));
}

OST_TEST(api, four_processes_times_fifty_increments_with_retries_make_exactly_200) {
    NOT_IN_MEMORY("other processes do not share a store in memory");
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(ost_root_set_c(c, "counter", item("c", 0)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    pid_t pids[4];
    for (int i = 0; i < 4; i++) {
        if ((pids[i] = fork_child()) == 0) {
            close(fds[0]);
            ost_store *s;
            ost_conn *cc;
            child_open(&s, &cc);
            unsigned tried_all = 0;
            for (int k = 0; k < 50; k++) {
                unsigned tried = 0;
                int rc = ost_txn_run(cc, 1000, increment, NULL, &tried);
                CHILD_CHECK(rc == 0, "increment %d: %s %s", k, ost_err_name(rc),
                            ost_conn_errmsg(cc));
                tried_all += tried;
            }
            ost_store_close(s);
            CHILD_CHECK(write(fds[1], &tried_all, sizeof tried_all) == sizeof tried_all, "pipe");
            _exit(0);
        }
    }
    close(fds[1]);
    unsigned attempts = 0, t;
    for (int i = 0; i < 4; i++)
        cr_assert_eq(child_status(pids[i]), 0, "child %d (its stderr says why)", i);
    while (read(fds[0], &t, sizeof t) == (ssize_t)sizeof t) attempts += t;
    close(fds[0]);
    ost_abort(c);
    cr_assert_eq(item_n(ost_root_get_c(c, "counter")), 200);
    ost_store_stats ss;
    cr_assert_eq(ost_store_stat(a, &ss), 0);
    cr_assert_eq(ss.last_serial, 2 + 200, "one commit per increment, none lost or doubled");
    cr_assert_geq(attempts, 200);
    cr_log_info("4 x 50 increments: %u attempts (%u conflicts retried)", attempts, attempts - 200);
    ost_conn_close(c);
    ost_store_close(a);
}

OST_TEST(api, a_process_sees_another_processes_commit_at_its_next_transaction) {
    NOT_IN_MEMORY("other processes do not share a store in memory");
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(ost_root_set_c(c, "counter", item("c", 0)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_value x = ost_root_get_c(c, "counter");
    cr_assert_eq(item_n(x), 0);
    for (int round = 1; round <= 5; round++) {
        pid_t p = fork_child();
        if (p == 0) {
            ost_store *s;
            ost_conn *cc;
            child_open(&s, &cc);
            ost_value y = ost_root_get_c(cc, "counter");
            CHILD_CHECK(y, "read: %s", ost_conn_errmsg(cc));
            CHILD_CHECK(ost_instance_setattr(y, "n", ost_int(round)) == 0, "setattr");
            int rc = ost_commit(cc);
            CHILD_CHECK(rc == 0, "commit: %s %s", ost_err_name(rc), ost_conn_errmsg(cc));
            ost_store_close(s);
            _exit(0);
        }
        cr_assert_eq(child_status(p), 0, "round %d: the child failed (its stderr says why)", round);
        /* within the transaction: the snapshot it began with */
        cr_assert_eq(item_n(x), round - 1, "round %d: a transaction sees one snapshot", round);
        ost_abort(c); /* the next transaction: the child's commit, the object invalidated */
        cr_assert_eq(item_n(x), round, "round %d: the next transaction sees the commit", round);
    }
    ost_conn_close(c);
    ost_store_close(a);
}

/* msg is one line naming the store's shown address. */
static void expect_names_store(ost_store *s, const char *msg) {
    cr_assert(strstr(msg, s->shown), "the message names %s: %s", s->shown, msg);
    cr_assert(!strchr(msg, '\n'), "one line: %s", msg);
}

/* In a child: 1 when an exclusive open of g_addr is refused with
 * "store is locked", 0 when it opens, 2 otherwise. */
static int excl_in_child(void) {
    pid_t p = fork_child();
    if (p == 0) {
        ost_store_options o;
        ost_store_options_init(&o);
        o.exclusive = true;
        ost_store *s = ost_store_new();
        int rc = s ? ost_store_open(s, g_addr, &o) : OST_ENOMEM;
        int code = !rc ? 0 : rc == OST_EBUSY && strstr(ost_store_errmsg(s), "store is locked") ? 1 : 2;
        if (code == 2) fprintf(stderr, "child: %s: %s\n", ost_err_name(rc), ost_store_errmsg(s));
        ost_store_close(s);
        _exit(code);
    }
    return child_status(p);
}

OST_TEST(api, an_exclusive_lock_a_server_restart_dropped_is_taken_again_or_refused) {
    const char *restart = getenv("OST_TEST_PG_RESTART");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to restart", E->name);
    cr_assert(restart, "OST_TEST_PG_RESTART is not set (tests/pg/pgserver.sh sets it)");
    ost_store_close(api_open(true, false));
    ost_store_options o;
    ost_store_options_init(&o);
    o.exclusive = true;
    ost_store *a = ost_store_new();
    cr_assert_eq(ost_store_open(a, g_addr, &o), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(excl_in_child(), 1, "held");
    /* the key is the schema's: a store in another schema of the same
     * database takes its own lock meanwhile */
    char other[sizeof g_addr];
    cr_assert(!E->fresh(other, sizeof other), "cannot make a fresh address");
    cr_assert_neq(strcmp(other, g_addr), 0);
    ost_store_options oc = o;
    oc.create = true;
    ost_store *x = ost_store_new();
    cr_assert_eq(ost_store_open(x, other, &oc), 0, "%s", ost_store_errmsg(x));
    ost_store_close(x);
    ost_store_stats s;
    /* nobody took it meanwhile: the reconnection takes it again */
    cr_assert_eq(system(restart), 0);
    cr_assert_eq(ost_store_stat(a, &s), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(excl_in_child(), 1, "held again after the reconnection");
    /* another handle took it while the connection was down: refused, to
     * the engine's calls and to a connection's commits alike */
    ost_conn *ca;
    cr_assert_eq(ost_conn_open(a, &ca), 0);
    cr_assert_eq(ost_root_set_c(ca, "k", ost_int(1)), 0);
    cr_assert_eq(ost_commit(ca), 0, "%s", ost_conn_errmsg(ca));
    cr_assert_eq(system(restart), 0);
    ost_store *b = ost_store_new();
    cr_assert_eq(ost_store_open(b, g_addr, &o), 0, "%s", ost_store_errmsg(b));
    int rc = 0;
    for (int i = 0; i < 3; i++) { /* the first may fail on the broken session */
        ost_abort(ca);
        rc = ost_root_set_c(ca, "k", ost_int(2 + i)); /* the root's load may be refused */
        if (!rc) rc = ost_commit(ca);
        cr_assert_neq(rc, 0, "attempt %d: a commit without the lock went through", i);
    }
    cr_assert_eq(rc, OST_EBUSY, "%s: %s", ost_err_name(rc), ost_conn_errmsg(ca));
    cr_assert(strstr(ost_conn_errmsg(ca), "store is locked"), "%s", ost_conn_errmsg(ca));
    ost_abort(ca);
    cr_assert_eq(ost_store_stat(a, &s), OST_EBUSY);
    cr_assert(strstr(ost_store_errmsg(a), "store is locked"), "%s", ost_store_errmsg(a));
    ost_conn *cb;
    cr_assert_eq(ost_conn_open(b, &cb), 0);
    int64_t k = 0;
    cr_assert_eq(ost_int_value(ost_root_get_c(cb, "k"), &k), 0, "%s", ost_conn_errmsg(cb));
    cr_assert_eq(k, 1, "nothing of the refused commits was written");
    ost_conn_close(cb);
    ost_store_close(b);
    cr_assert_eq(ost_store_stat(a, &s), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(excl_in_child(), 1, "held again once the other let it go");
    cr_assert_eq(ost_root_set_c(ca, "k", ost_int(9)), 0);
    rc = ost_commit(ca);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_conn_errmsg(ca));
    ost_conn_close(ca);
    ost_store_close(a);
    cr_assert_eq(excl_in_child(), 0, "free after the close");
}

OST_TEST(api, a_restart_under_an_open_connection_fails_clearly_and_the_next_transaction_reconnects) {
    const char *restart = getenv("OST_TEST_PG_RESTART");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to restart", E->name);
    cr_assert(restart, "OST_TEST_PG_RESTART is not set (tests/pg/pgserver.sh sets it)");
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value l = ost_list_new(0);
    for (int i = 0; i < 3; i++) ost_list_append(l, item("x", i));
    cr_assert_eq(ost_root_set_c(c, "items", l), 0);
    cr_assert_eq(ost_root_set_c(c, "counter", item("c", 0)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value items = ost_root_get_c(c, "items");
    cr_assert(items, "%s", ost_conn_errmsg(c));
    ost_value it = ost_item(items, 2);
    cr_assert(ost_is_ghost(it));
    cr_assert_eq(system(restart), 0);
    /* the transaction's snapshot went with the server: loading a ghost fails */
    int rc = ost_activate(c, it);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    expect_names_store(a, ost_conn_errmsg(c));
    ost_abort(c);
    /* the next transaction reconnects: reads and commits */
    cr_assert_eq(item_n(it), 2, "%s", ost_conn_errmsg(c));
    ost_value ctr = ost_root_get_c(c, "counter");
    cr_assert(ctr, "%s", ost_conn_errmsg(c));
    ost_instance_setattr(ctr, "n", ost_int(1));
    rc = ost_commit(c);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    /* a restart between the changes and the commit: the commit fails
     * clearly, or (on a new session) succeeds; never a partial write */
    ost_instance_setattr(ctr, "n", ost_int(2));
    cr_assert_eq(system(restart), 0);
    rc = ost_commit(c);
    if (rc) {
        cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
        expect_names_store(a, ost_conn_errmsg(c));
        ost_abort(c);
        cr_assert_eq(item_n(ctr), 1, "the failed commit wrote nothing");
        ost_instance_setattr(ctr, "n", ost_int(2));
        rc = ost_commit(c);
        cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    }
    ost_abort(c);
    cr_assert_eq(item_n(ctr), 2);
    ost_conn_close(c);
    ost_store_close(a);
}

/* ---- the view a commit hands to the next transaction (PostgreSQL) -------------------- */

/* Views the PostgreSQL engine's transactions adopted, and views its
 * sessions imported: test knobs (store/testctl.h); a test that counts them
 * skips in a build without the knobs. */
static uint64_t adopted_views(void) { return (uint64_t)knob(OST__K_PG_ADOPTED); }
static uint64_t imported_views(void) { return (uint64_t)knob(OST__K_PG_IMPORTED); }

/* Sets root key to a new item with n in its own commit on c. */
static void put_item(ost_conn *c, const char *key, int64_t n) {
    cr_assert_eq(ost_root_set_c(c, key, item(key, n)), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
}

/* Sets the n of root key's item to n in its own commit on c. */
static void set_item(ost_conn *c, const char *key, int64_t n) {
    ost_value x = ost_root_get_c(c, key);
    cr_assert(x, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_instance_setattr(x, "n", ost_int(n)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
}

OST_TEST(api, a_commit_hands_the_next_transaction_a_view_as_of_it_whatever_commits_after) {
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no views (its snapshots cost no round trip)", E->name);
    need_knobs(); /* counts views */
    for (int group = 0; group < 2; group++) {
        ost_store *a = api_open(!group, group), *b = api_open(false, false);
        ost_conn *ca, *cb;
        cr_assert_eq(ost_conn_open(a, &ca), 0);
        cr_assert_eq(ost_conn_open(b, &cb), 0);
        put_item(cb, "x", 1);
        put_item(cb, "seen", 1);
        put_item(cb, "z", 0);
        ost_abort(ca);
        /* ca caches seen; then its commit hands it the view after it */
        cr_assert_eq(item_n(ost_root_get_c(ca, "seen")), 1);
        uint64_t adopted = adopted_views(), imported = imported_views();
        set_item(ca, "z", 5);
        /* views with group commit only: without, the connection renews */
        cr_assert_eq(adopted_views(), adopted + (unsigned)group, "group %d: adopted", group);
        cr_assert_eq(imported_views(), imported, "nothing read yet");
        /* other commits land before ca's transaction reads anything */
        ost_abort(cb);
        set_item(cb, "x", 2);
        set_item(cb, "seen", 2);
        /* x, never loaded by ca, is read as of ca's view: 1, not 2; and
         * seen, cached, is not invalidated within the transaction */
        ost_value x = ost_root_get_c(ca, "x");
        cr_assert(x, "%s", ost_conn_errmsg(ca));
        cr_assert_eq(item_n(x), 1, "group %d: read as of the view", group);
        cr_assert_eq(imported_views(), imported + (unsigned)group, "the first read imported the view");
        cr_assert_eq(item_n(ost_root_get_c(ca, "seen")), 1);
        /* the next transaction sees both */
        ost_abort(ca);
        cr_assert_eq(item_n(x), 2);
        cr_assert_eq(item_n(ost_root_get_c(ca, "seen")), 2);
        /* a view's commit log turns what others changed into ghosts */
        set_item(cb, "x", 3);
        set_item(ca, "z", 6); /* adopts a view after cb's commit */
        cr_assert_eq(imported_views(), imported + (unsigned)group, "invalidations need no import");
        cr_assert(ost_is_ghost(x), "group %d: x was invalidated by the view's log", group);
        cr_assert_eq(item_n(x), 3);
        ost_conn_close(ca);
        ost_conn_close(cb);
        ost_store_close(a);
        ost_store_close(b);
    }
}

OST_TEST(api, views_still_held_are_kept_and_when_none_is_free_a_commit_renews) {
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no views", E->name);
    need_knobs(); /* counts views */
    enum { N = 6 };
    ost_store *a = api_open(true, true);
    ost_conn *c[N], *cw;
    cr_assert_eq(ost_conn_open(a, &cw), 0);
    for (int i = 0; i < N; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%d", i);
        cr_assert_eq(ost_conn_open(a, &c[i]), 0);
        put_item(cw, k, 0);
    }
    put_item(cw, "x", 0);
    /* each connection commits in turn after x changed, and keeps the view
     * it adopted (it reads nothing), so that no view can end: the engine
     * has 4, then the commits renew */
    uint64_t adopted = adopted_views();
    for (int i = 0; i < N; i++) {
        char k[8];
        snprintf(k, sizeof k, "k%d", i);
        set_item(cw, "x", i + 1);
        ost_abort(c[i]);
        set_item(c[i], k, 1); /* x is i + 1 as of the snapshot after it */
    }
    uint64_t n = adopted_views() - adopted;
    cr_assert(n >= 4 && n < 2 * N, "4 views, then renewals: %llu adopted", (unsigned long long)n);
    /* each reads as of its own snapshot, a view (some no longer current)
     * or a renewal */
    for (int i = 0; i < N; i++) {
        ost_value x = ost_root_get_c(c[i], "x");
        cr_assert(x, "%d: %s", i, ost_conn_errmsg(c[i]));
        cr_assert_eq(item_n(x), i + 1, "connection %d", i);
    }
    /* the views are free again: the next commit adopts one */
    for (int i = 0; i < N; i++) ost_abort(c[i]);
    adopted = adopted_views();
    set_item(c[0], "k0", 2);
    cr_assert_eq(adopted_views(), adopted + 1);
    for (int i = 0; i < N; i++) ost_conn_close(c[i]);
    ost_conn_close(cw);
    ost_store_close(a);
}

#ifdef OST_HAVE_POSTGRESQL
#include <libpq-fe.h>

/* Server connections of ostore to the test's database that sit idle in
 * a transaction (a snapshot held open). */
static int idle_in_txn(void) {
    PGconn *pc = PQconnectdb(getenv("OST_TEST_PG"));
    cr_assert_eq(PQstatus(pc), CONNECTION_OK, "%s", PQerrorMessage(pc));
    PGresult *r = PQexec(pc, "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                             "current_database() AND application_name = 'ostore' AND state = "
                             "'idle in transaction'");
    cr_assert_eq(PQresultStatus(r), PGRES_TUPLES_OK, "%s", PQerrorMessage(pc));
    int n = atoi(PQgetvalue(r, 0, 0));
    PQclear(r);
    PQfinish(pc);
    return n;
}
#else
static int idle_in_txn(void) { return 0; }
#endif

OST_TEST(api, a_handle_whose_connections_closed_holds_no_snapshot) {
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server snapshots", E->name);
    need_knobs(); /* counts views */
    ost_store *a = api_open(true, true);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    put_item(c, "x", 1);
    uint64_t adopted = adopted_views();
    set_item(c, "x", 2);
    cr_assert_eq(adopted_views(), adopted + 1);
    cr_assert_geq(idle_in_txn(), 1, "the view c adopted is open");
    ost_conn_close(c);
    cr_assert_eq(idle_in_txn(), 0, "no snapshot held once the connections closed");
    ost_store_close(a);
}

/* Threads of the invariant test. The writer (id 0) sets a and b to the
 * same new value in each commit. The others each commit a counter of
 * their own (no conflicts: the views their commits leave them are
 * adopted), then read a and b, which the writer's commits turned into
 * ghosts: loaded through the view they imported, they must agree. */
typedef struct {
    ost_store *st;
    int id, want, bad, err;
    char msg[256];
} pair_arg;

static void *pair_thread(void *arg) {
    pair_arg *p = arg;
    ost_conn *c;
    if ((p->err = ost_conn_open(p->st, &c))) return NULL;
    char own[16];
    snprintf(own, sizeof own, "t%d", p->id);
    for (int i = 1; i <= p->want && !p->err; i++) {
        if (p->id == 0) {
            ost_value a = ost_root_get_c(c, "a"), b = ost_root_get_c(c, "b");
            if (!a || !b) p->err = OST_EIO;
            else {
                ost_instance_setattr(a, "n", ost_int(i));
                ost_instance_setattr(b, "n", ost_int(i));
            }
        } else {
            ost_value a = ost_root_get_c(c, "a"), b = ost_root_get_c(c, "b"), t = ost_root_get_c(c, own);
            int64_t na = -1, nb = -2;
            if (!a || !b || !t || ost_int_value(ost_instance_getattr(a, "n"), &na) ||
                ost_int_value(ost_instance_getattr(b, "n"), &nb))
                p->err = OST_EIO;
            else {
                p->bad += na != nb;
                ost_instance_setattr(t, "n", ost_int(i));
            }
        }
        if (p->err) {
            snprintf(p->msg, sizeof p->msg, "read: %s", ost_conn_errmsg(c));
            break;
        }
        int rc = ost_commit(c);
        if (rc) {
            snprintf(p->msg, sizeof p->msg, "commit: %s", ost_conn_errmsg(c));
            p->err = rc;
        }
    }
    ost_conn_close(c);
    return NULL;
}

OST_TEST(api, threads_adopting_and_importing_views_always_read_one_snapshot) {
    enum { T = 4, EACH = 60 };
    ost_store *a = api_open(true, true);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    put_item(c, "a", 0);
    put_item(c, "b", 0);
    for (int i = 1; i < T; i++) {
        char k[16];
        snprintf(k, sizeof k, "t%d", i);
        put_item(c, k, 0);
    }
    ost_conn_close(c);
    uint64_t imported = KNOBS_ON ? imported_views() : 0;
    pair_arg args[T];
    pthread_t th[T];
    for (int i = 0; i < T; i++) {
        args[i] = (pair_arg){.st = a, .id = i, .want = EACH};
        cr_assert_eq(pthread_create(&th[i], NULL, pair_thread, &args[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        cr_assert_eq(args[i].err, 0, "thread %d: %s", i, args[i].msg);
        cr_assert_eq(args[i].bad, 0, "thread %d read a and b from two snapshots", i);
    }
    if (!strcmp(E->name, "postgresql") && KNOBS_ON)
        cr_assert_gt(imported_views(), imported, "the threads imported views");
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(item_n(ost_root_get_c(c, "a")), EACH);
    cr_assert_eq(item_n(ost_root_get_c(c, "b")), EACH);
    ost_conn_close(c);
    ost_store_close(a);
}

OST_TEST(api, a_restart_under_an_adopted_view_fails_its_read_clearly_and_the_next_transaction_recovers) {
    const char *restart = getenv("OST_TEST_PG_RESTART");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to restart", E->name);
    need_knobs(); /* counts views */
    cr_assert(restart, "OST_TEST_PG_RESTART is not set (tests/pg/pgserver.sh sets it)");
    ost_store *a = api_open(true, true);
    ost_conn *c, *c2;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(ost_conn_open(a, &c2), 0);
    put_item(c, "x", 1);
    put_item(c2, "w", 7);
    uint64_t w = ost_oid(c2, ost_root_get_c(c2, "w"));
    ost_conn_close(c2);
    ost_abort(c); /* a snapshot after w's commit: the next view covers it */
    uint64_t adopted = adopted_views();
    set_item(c, "x", 2);
    cr_assert_eq(adopted_views(), adopted + 1);
    ost_value x = ost_root_get_c(c, "x"); /* cached: no read */
    cr_assert(x && !ost_is_ghost(x));
    cr_assert_eq(system(restart), 0);
    /* the view went with the server: a read of the transaction fails,
     * and so does the next, until the transaction ends */
    ost_value y = 0;
    int rc = ost_conn_get(c, w, &y); /* a ghost (the root names it) or a read */
    if (!rc) rc = ost_activate(c, y);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    cr_assert(strstr(ost_conn_errmsg(c), "abort and retry"), "%s", ost_conn_errmsg(c));
    expect_names_store(a, ost_conn_errmsg(c));
    rc = y ? ost_activate(c, y) : ost_conn_get(c, w, &y);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    cr_assert(strstr(ost_conn_errmsg(c), "snapshot was lost"), "%s", ost_conn_errmsg(c));
    ost_abort(c);
    cr_assert_eq(item_n(x), 2, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_conn_get(c, w, &y), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(item_n(y), 7);
    cr_assert_eq(ost_instance_setattr(x, "n", ost_int(3)), 0);
    rc = ost_commit(c);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    ost_abort(c);
    cr_assert_eq(item_n(x), 3);
    ost_conn_close(c);
    ost_store_close(a);
}

OST_TEST(api, a_stopped_server_fails_clearly_naming_the_address_and_never_hangs) {
    const char *stop = getenv("OST_TEST_PG_STOP"), *start = getenv("OST_TEST_PG_START");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to stop", E->name);
    cr_assert(stop && start, "OST_TEST_PG_STOP/START are not set (tests/pg/pgserver.sh sets them)");
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(ost_root_set_c(c, "counter", item("c", 0)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_value ctr = ost_root_get_c(c, "counter");
    cr_assert_eq(item_n(ctr), 0);
    g_stopped = true;
    cr_assert_eq(system(stop), 0);
    /* a commit on the open connection */
    double t0 = now_s();
    ost_instance_setattr(ctr, "n", ost_int(1));
    int rc = ost_commit(c);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    expect_names_store(a, ost_conn_errmsg(c));
    ost_abort(c);
    /* a new transaction and a new handle: each fails within the connect
     * timeout (10 s), saying where and why */
    cr_assert_null(ost_root_get_c(c, "counter"));
    expect_names_store(a, ost_conn_errmsg(c));
    ost_store_options o;
    ost_store_options_init(&o);
    o.registry = g_reg;
    ost_store *b = ost_store_new();
    rc = ost_store_open(b, g_addr, &o);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), ost_store_errmsg(b));
    cr_assert(strstr(ost_store_errmsg(b), "cannot connect"), "%s", ost_store_errmsg(b));
    cr_assert(strstr(ost_store_errmsg(b), "ostore"), "names the database: %s", ost_store_errmsg(b));
    double took = now_s() - t0;
    cr_assert_lt(took, 12.0, "the failures took %.1f s", took);
    cr_log_info("stopped server: commit, read and open failed in %.3f s; open said: %s", took,
                ost_store_errmsg(b));
    ost_store_close(b);
    /* the server back: the next transaction reconnects */
    cr_assert_eq(system(start), 0);
    g_stopped = false;
    ost_abort(c);
    ctr = ost_root_get_c(c, "counter");
    cr_assert(ctr, "%s", ost_conn_errmsg(c));
    cr_assert_eq(item_n(ctr), 0, "the failed commit wrote nothing");
    ost_instance_setattr(ctr, "n", ost_int(1));
    rc = ost_commit(c);
    cr_assert_eq(rc, 0, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(a);
}

/* A server that takes the connection but never answers (a socket that
 * listens and never accepts: libpq's startup packet waits in its queue):
 * the open fails at the connect timeout, the address's connect_timeout or
 * else the engine's 10 s, naming the address and the cause, instead of
 * hanging. */
OST_TEST(api, a_server_that_never_answers_fails_at_the_connect_timeout) {
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to connect to", E->name);
    char dir[] = "/tmp/ost_mute_XXXXXX";
    cr_assert(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/.s.PGSQL.5432", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
    cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof sa), 0, "bind: %s", strerror(errno));
    cr_assert_eq(listen(fd, 8), 0, "listen: %s", strerror(errno));
    static const struct {
        const char *query;
        double lo, hi;
    } tries[] = {{"&connect_timeout=2", 1.5, 8.0}, {"", 9.5, 16.0}};
    for (size_t i = 0; i < 2; i++) {
        char addr[256];
        snprintf(addr, sizeof addr, "postgresql:///ostore?host=%s%s", dir, tries[i].query);
        ost_store_options o;
        ost_store_options_init(&o);
        o.registry = g_reg;
        ost_store *b = ost_store_new();
        double t0 = now_s();
        int rc = ost_store_open(b, addr, &o);
        double took = now_s() - t0;
        const char *msg = ost_store_errmsg(b);
        cr_assert_eq(rc, OST_EIO, "%s: %s: %s", addr, ost_err_name(rc), msg);
        cr_assert(strstr(msg, "cannot connect"), "%s", msg);
        cr_assert(strstr(msg, dir), "names the address: %s", msg);
        cr_assert(strstr(msg, "timeout"), "says why: %s", msg);
        cr_assert(!strchr(msg, '\n'), "one line: %s", msg);
        cr_assert(took >= tries[i].lo && took < tries[i].hi, "%s: failed after %.2f s", addr, took);
        cr_log_info("a mute server: open failed in %.2f s: %s", took, msg);
        ost_store_close(b);
    }
    close(fd);
    unlink(sa.sun_path);
    rmdir(dir);
}

/* ---- raw access and imports (include/ostore/raw.h) on the engine ------------------
 * What ostore export, import, copy, ls, cat and info read and write with. */

TestSuite(raw, .init = api_setup, .fini = api_teardown, .timeout = 120);

/* A store with 30 items under the root and a map of 25 int keys. */
static void raw_fill(ost_store *a) {
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value l = ost_list_new(0);
    for (int i = 0; i < 30; i++) ost_list_append(l, item("x", i));
    cr_assert_eq(ost_root_set_c(c, "items", l), 0);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_root_set_c(c, "m", ost_incref(m)), 0);
    for (int i = 0; i < 25; i++) cr_assert_eq(ost_map_set(c, m, ost_int(i * 2), ost_int(i)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
}

OST_TEST(raw, snapshot_reads_records_classes_entries_and_counters) {
    ost_store *a = api_open(true, false);
    raw_fill(a);
    if (KNOBS_ON) knob_set(OST__K_PG_PAGE_ROWS, 7); /* scans and entry cursors page */
    ost_snap *s;
    cr_assert_eq(ost_snap_open(a, &s), 0, "%s", ost_store_errmsg(a));
    ost_snap_stats si;
    cr_assert_eq(ost_snap_stat(s, &si), 0, "%s", ost_snap_errmsg(s));
    cr_assert_str_eq(si.engine, E->name);
    cr_assert_eq(si.format, OST_STORE_FORMAT);
    cr_assert_eq(si.records, 32, "root, 30 items, the map: %llu", (unsigned long long)si.records);
    cr_assert_eq(si.entries, 25);
    if (E->one_open) {
        cr_assert_gt(si.page_size, 0, "LMDB's pages");
        cr_assert_gt(si.pages_used, 0);
        cr_assert_gt(si.map_size, 0);
    } else {
        cr_assert_eq(si.page_size, 0, "LMDB's alone");
        cr_assert_eq(si.pages_used, 0);
        cr_assert_eq(si.map_size, 0);
    }
    cr_assert_gt(si.next_oid, 31);
    cr_assert_gt(si.next_class, 1);

    /* a commit after the snapshot opened is not seen */
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(ost_root_set_c(c, "later", item("y", 1)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);

    /* classes in id order, the item class among them */
    uint32_t id, prev = 0, item_cid = 0;
    const char *m, *n;
    size_t ncls = 0;
    for (size_t i = 0; ost_snap_class(s, i, &id, &m, &n) == 0; i++, ncls++) {
        cr_assert_gt(id, prev);
        prev = id;
        if (!strcmp(m, "shop") && !strcmp(n, "Item")) item_cid = id;
    }
    cr_assert_geq(ncls, 3);
    cr_assert(item_cid);
    cr_assert_eq(ost_snap_class(s, ncls, &id, &m, &n), OST_ENOTFOUND);

    /* records in oid order, as stored, through several pages */
    ost_snap_cursor *cur;
    cr_assert_eq(ost_snap_records(s, 0, &cur), 0);
    ost_raw_record r;
    uint64_t count = 0, items = 0, last = 0, first_item = 0;
    int rc;
    while ((rc = ost_snap_next(cur, &r)) == 0) {
        cr_assert_null(r.damage);
        if (count) cr_assert_gt(r.oid, last);
        last = r.oid;
        cr_assert_gt(r.len, 2);
        cr_assert_eq(r.pickle[0], 0x80, "a pickle with its PROTO");
        cr_assert_eq(r.size, r.len + 16);
        cr_assert_leq(r.serial, si.last_serial);
        if (r.class_id == item_cid && !items++) first_item = r.oid;
        count++;
    }
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_snap_errmsg(s));
    cr_assert_eq(count, 32, "the later commit is not in the snapshot");
    cr_assert_eq(items, 30);
    ost_snap_cursor_close(cur);
    /* from an oid on */
    cr_assert_eq(ost_snap_records(s, last, &cur), 0);
    cr_assert_eq(ost_snap_next(cur, &r), 0);
    cr_assert_eq(r.oid, last);
    cr_assert_eq(ost_snap_next(cur, &r), OST_ENOTFOUND);
    ost_snap_cursor_close(cur);
    /* one record, and one that is not there */
    ost_raw_record g;
    cr_assert_eq(ost_snap_get(s, first_item, &g), 0, "%s", ost_snap_errmsg(s));
    cr_assert_eq(g.class_id, item_cid);
    cr_assert_eq(ost_snap_get(s, si.next_oid + 100, &g), OST_ENOTFOUND);
    cr_assert(strstr(ost_snap_errmsg(s), "no such object"), "%s", ost_snap_errmsg(s));

    /* the map and its entries, in key order, from a key on */
    uint64_t map;
    cr_assert_eq(ost_snap_next_map(s, 0, &map), 0, "%s", ost_snap_errmsg(s));
    uint64_t other;
    cr_assert_eq(ost_snap_next_map(s, map, &other), OST_ENOTFOUND);
    ost_entry_cursor *ec;
    cr_assert_eq(ost_snap_entries(s, map, NULL, 0, &ec), 0, "%s", ost_snap_errmsg(s));
    ost_raw_entry e;
    size_t ents = 0;
    const uint8_t *pk = NULL;
    uint8_t prevk[OST_MAP_KEY_MAX];
    size_t prevlen = 0;
    while ((rc = ost_raw_entry_next(ec, &e)) == 0) {
        cr_assert_null(e.damage);
        cr_assert_gt(e.vlen, 0);
        if (pk) {
            size_t mn = prevlen < e.klen ? prevlen : e.klen;
            int d = memcmp(prevk, e.key, mn);
            cr_assert(d < 0 || (d == 0 && prevlen < e.klen), "keys ascend bytewise");
        }
        memcpy(prevk, e.key, e.klen);
        prevlen = e.klen;
        pk = prevk;
        ents++;
    }
    cr_assert_eq(rc, OST_ENOTFOUND, "%s", ost_snap_errmsg(s));
    cr_assert_eq(ents, 25);
    ost_entry_cursor_close(ec);
    uint8_t key[64];
    size_t klen;
    char err[128];
    cr_assert_eq(ost_map_key_encode("int", ost_int(41), false, key, &klen, err, sizeof err), 0);
    cr_assert_eq(ost_snap_entries(s, map, key, klen, &ec), 0);
    ents = 0;
    while ((rc = ost_raw_entry_next(ec, &e)) == 0) {
        if (!ents) {
            ost_value k = ost_map_key_decode("int", e.key, e.klen);
            int64_t kv;
            cr_assert_eq(ost_int_value(k, &kv), 0);
            cr_assert_eq(kv, 42, "the first key >= 41");
            ost_decref(k);
        }
        ents++;
    }
    cr_assert_eq(ents, 4, "42, 44, 46, 48");
    ost_entry_cursor_close(ec);
    /* a map without entries gives an empty cursor */
    cr_assert_eq(ost_snap_entries(s, first_item, NULL, 0, &ec), 0);
    cr_assert_eq(ost_raw_entry_next(ec, &e), OST_ENOTFOUND);
    ost_entry_cursor_close(ec);
    /* the checks the engine makes: sound */
    cr_assert_eq(ost_snap_verify(s), 0, "%s", ost_snap_errmsg(s));
    ost_snap_close(s);

    /* verify finds counters behind the rows (LMDB's page walk has its
     * own tests: tests/test_pagecheck.c) */
    if (!E->sql) {
        ost_store_close(a);
        return;
    }
    char sql[256];
    snprintf(sql, sizeof sql, "UPDATE %s.ost_meta SET next_class = 1", g_schema);
    cr_assert_eq(E->sql(getenv("OST_TEST_PG"), sql), 0);
    cr_assert_eq(ost_snap_open(a, &s), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(ost_snap_verify(s), OST_ECORRUPT);
    cr_assert(strstr(ost_snap_errmsg(s), "next_class 1 is not above class id"), "%s",
              ost_snap_errmsg(s));
    ost_snap_close(s);
    ost_store_close(a);
}

static ost_store *raw_open_at(const char *address, bool create) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    ost_store *s = ost_store_new();
    cr_assert(s);
    cr_assert_eq(ost_store_open(s, address, &o), 0, "open %s: %s", address, ost_store_errmsg(s));
    return s;
}

/* Records and entries of a source snapshot into an import; 0 or the code. */
static int raw_copy_into(ost_snap *s, ost_import *im) {
    uint32_t id;
    const char *m, *n;
    int rc;
    for (size_t i = 0; ost_snap_class(s, i, &id, &m, &n) == 0; i++)
        if ((rc = ost_import_class(im, id, m, strlen(m), n, strlen(n)))) return rc;
    ost_snap_cursor *cur;
    cr_assert_eq(ost_snap_records(s, 0, &cur), 0);
    ost_raw_record r;
    while ((rc = ost_snap_next(cur, &r)) == 0)
        if ((rc = ost_import_record(im, r.oid, r.serial, r.class_id, r.pickle, r.len))) break;
    ost_snap_cursor_close(cur);
    if (rc != OST_ENOTFOUND) return rc;
    uint64_t map = 0;
    while (ost_snap_next_map(s, map, &map) == 0) {
        ost_entry_cursor *ec;
        cr_assert_eq(ost_snap_entries(s, map, NULL, 0, &ec), 0);
        ost_raw_entry e;
        while ((rc = ost_raw_entry_next(ec, &e)) == 0)
            if ((rc = ost_import_entry(im, map, e.key, e.klen, e.serial, e.value, e.vlen))) break;
        ost_entry_cursor_close(ec);
        if (rc != OST_ENOTFOUND) return rc;
    }
    return 0;
}

OST_TEST(raw, import_copies_exactly_and_a_failed_one_leaves_nothing) {
    if (!strcmp(E->name, "lmdb")) cr_skip_test("%s: LMDB checks a map's record at each entry, not at commit (engine.h); tests/test_raw.c covers LMDB imports", E->name);
    ost_store *src = api_open(true, false);
    raw_fill(src);
    ost_snap *s;
    cr_assert_eq(ost_snap_open(src, &s), 0, "%s", ost_store_errmsg(src));
    ost_snap_stats si;
    cr_assert_eq(ost_snap_stat(s, &si), 0);

    /* into a store that holds objects: refused, nothing changed */
    ost_import *im;
    cr_assert_eq(ost_import_begin(src, 0, &im), OST_EEXIST);
    cr_assert(strstr(ost_store_errmsg(src), "not a new store"), "%s", ost_store_errmsg(src));
    cr_assert_null(im);

    /* a failed import: entries under an oid that is not a map (checked at
     * commit on PostgreSQL): nothing is left, the root is still there */
    char dst_addr[1024];
    cr_assert(!E->fresh(dst_addr, sizeof dst_addr));
    ost_store *dst = raw_open_at(dst_addr, true);
    cr_assert_eq(ost_import_begin(dst, 0, &im), 0, "%s", ost_store_errmsg(dst));
    cr_assert_eq(ost_import_class(im, 1, "m", 1, "C", 1), 0, "%s", ost_store_errmsg(dst));
    cr_assert_eq(ost_import_class(im, 1, "m", 1, "D", 1), OST_EEXIST, "an id twice");
    cr_assert_eq(ost_import_record(im, 5, 3, 1, "\x80\x02N.", 4), 0, "%s", ost_store_errmsg(dst));
    cr_assert_eq(ost_import_record(im, 5, 3, 1, "\x80\x02N.", 4), OST_EINVAL, "oids ascend");
    cr_assert(strstr(ost_store_errmsg(dst), "oids must ascend"), "%s", ost_store_errmsg(dst));
    cr_assert_eq(ost_import_entry(im, 5, (const uint8_t *)"k", 1, 3, "\x80\x02N.", 4), 0, "%s",
                 ost_store_errmsg(dst));
    cr_assert_eq(ost_import_entry(im, 5, (const uint8_t *)"a", 1, 3, "\x80\x02N.", 4), OST_EINVAL,
                 "keys ascend");
    cr_assert_eq(ost_import_commit(im, OST_STORE_FORMAT, 6, 3, 2), OST_EINVAL);
    cr_assert(strstr(ost_store_errmsg(dst), "entries under oid 5, which has no record of class"),
              "%s", ost_store_errmsg(dst));
    ost_store_stats ds;
    cr_assert_eq(ost_store_stat(dst, &ds), 0);
    cr_assert_eq(ds.records, 1, "the root alone, as before the import");
    cr_assert_eq(ds.next_oid, 1);
    /* counters that do not fit: refused before anything is written */
    cr_assert_eq(ost_import_begin(dst, 0, &im), 0, "%s", ost_store_errmsg(dst));
    cr_assert_eq(ost_import_class(im, 1, "m", 1, "C", 1), 0);
    cr_assert_eq(ost_import_record(im, 9, 3, 1, "\x80\x02N.", 4), 0);
    cr_assert_eq(ost_import_commit(im, OST_STORE_FORMAT, 9, 3, 2), OST_EINVAL);
    cr_assert(strstr(ost_store_errmsg(dst), "next_oid 9 does not fit"), "%s", ost_store_errmsg(dst));
    cr_assert_eq(ost_store_stat(dst, &ds), 0);
    cr_assert_eq(ds.records, 1);
    /* an abort leaves nothing either */
    cr_assert_eq(ost_import_begin(dst, 0, &im), 0, "%s", ost_store_errmsg(dst));
    cr_assert_eq(raw_copy_into(s, im), 0, "%s", ost_store_errmsg(dst));
    ost_import_abort(im);
    cr_assert_eq(ost_store_stat(dst, &ds), 0);
    cr_assert_eq(ds.records, 1);

    /* the whole source, exactly */
    cr_assert_eq(ost_import_begin(dst, 0, &im), 0, "%s", ost_store_errmsg(dst));
    cr_assert_eq(raw_copy_into(s, im), 0, "%s", ost_store_errmsg(dst));
    cr_assert_eq(ost_import_commit(im, si.format, si.next_oid, si.last_serial, si.next_class), 0,
                 "%s", ost_store_errmsg(dst));
    ost_snap *d;
    cr_assert_eq(ost_snap_open(dst, &d), 0, "%s", ost_store_errmsg(dst));
    ost_snap_stats di;
    cr_assert_eq(ost_snap_stat(d, &di), 0);
    cr_assert_eq(di.records, si.records);
    cr_assert_eq(di.entries, si.entries);
    cr_assert_eq(di.next_oid, si.next_oid);
    cr_assert_eq(di.last_serial, si.last_serial);
    cr_assert_eq(di.next_class, si.next_class);
    ost_snap_cursor *ca, *cb;
    cr_assert_eq(ost_snap_records(s, 0, &ca), 0);
    cr_assert_eq(ost_snap_records(d, 0, &cb), 0);
    ost_raw_record ra, rb;
    int ka, kb;
    while ((ka = ost_snap_next(ca, &ra)) == 0) {
        kb = ost_snap_next(cb, &rb);
        cr_assert_eq(kb, 0);
        cr_assert_eq(ra.oid, rb.oid);
        cr_assert_eq(ra.serial, rb.serial);
        cr_assert_eq(ra.class_id, rb.class_id);
        cr_assert_eq(ra.len, rb.len);
        cr_assert_eq(memcmp(ra.pickle, rb.pickle, ra.len), 0);
    }
    cr_assert_eq(ost_snap_next(cb, &rb), OST_ENOTFOUND);
    ost_snap_cursor_close(ca);
    ost_snap_cursor_close(cb);
    cr_assert_eq(ost_snap_verify(d), 0, "%s", ost_snap_errmsg(d));
    ost_snap_close(d);
    /* and the copy opens and reads through connections and maps */
    ost_conn *c;
    cr_assert_eq(ost_conn_open(dst, &c), 0);
    ost_value m = ost_root_get_c(c, "m");
    cr_assert(m, "%s", ost_conn_errmsg(c));
    uint64_t n;
    cr_assert_eq(ost_map_len(c, m, &n), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(n, 25);
    ost_value v;
    cr_assert_eq(ost_map_get(c, m, ost_int(10), &v), 0, "%s", ost_conn_errmsg(c));
    int64_t vi;
    cr_assert_eq(ost_int_value(v, &vi), 0);
    cr_assert_eq(vi, 5);
    ost_conn_close(c);
    ost_store_close(dst);
    ost_snap_close(s);
    ost_store_close(src);
}

/* ---- pack and check on the engine ------------------------------------------------ */

static uint64_t records_of(ost_store *s) {
    ost_store_stats ss;
    cr_assert_eq(ost_store_stat(s, &ss), 0, "%s", ost_store_errmsg(s));
    return ss.records;
}

/* The oid of m[i] (an item). */
static uint64_t map_oid(ost_conn *c, ost_value m, int64_t i) {
    ost_value k = ost_int(i), v;
    int rc = ost_map_get(c, m, k, &v);
    ost_decref(k);
    cr_assert_eq(rc, 0, "m[%lld]: %s", (long long)i, ost_conn_errmsg(c));
    return ost_oid(c, v);
}

typedef struct {
    size_t n;
    uint64_t oid[8], missing[8];
    int err[8];
    char msg[8][200];
} check_reports;

static void collect_problem(void *ud, uint64_t oid, uint64_t missing, int err, const char *msg) {
    check_reports *r = ud;
    if (r->n < 8) {
        r->oid[r->n] = oid;
        r->missing[r->n] = missing;
        r->err[r->n] = err;
        snprintf(r->msg[r->n], sizeof r->msg[0], "%s", msg);
    }
    r->n++;
}

OST_TEST(api, pack_removes_what_the_root_and_the_maps_no_longer_reach) {
    if (E->one_open) cr_skip_test("%s: two handles of one store in a process; test_store.c and test_maps.c cover pack on LMDB", E->name);
    ost_store *a = api_open(true, false), *b = api_open(false, false);
    ost_conn *c, *cb;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(ost_conn_open(b, &cb), 0);
    /* kept: a chain from the root, and items that only a map's entries reach */
    ost_value k1 = item("keep", 1);
    ost_instance_setattr(k1, "next", item("keep2", 2));
    cr_assert_eq(ost_root_set_c(c, "keep", k1), 0);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_root_set_c(c, "m", ost_incref(m)), 0);
    for (int i = 0; i < 6; i++) cr_assert_eq(ost_map_set(c, m, ost_int(i), item("v", i)), 0);
    /* to be garbage: a chain the root lets go */
    ost_value g = item("g", 1);
    ost_instance_setattr(g, "next", item("g2", 2));
    cr_assert_eq(ost_root_set_c(c, "g", g), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    uint64_t keep2 = ost_oid(c, ost_instance_getattr(k1, "next"));
    uint64_t go = ost_oid(c, g), go2 = ost_oid(c, ost_instance_getattr(g, "next"));
    uint64_t v[6];
    for (int i = 0; i < 6; i++) v[i] = map_oid(c, m, i);
    cr_assert_eq(records_of(a), 12, "root, 2 kept, map, 6 values, 2 garbage");
    /* another handle holds the garbage in its cache */
    ost_value gb = ost_root_get_c(cb, "g");
    cr_assert(gb, "%s", ost_conn_errmsg(cb));
    cr_assert_eq(item_n(gb), 1);
    ost_incref(gb);
    /* the root lets g go; two entries go with their values */
    cr_assert_eq(ost_root_set_c(c, "g", OST_NONE), 0);
    for (int i = 4; i < 6; i++) {
        ost_value k = ost_int(i);
        cr_assert_eq(ost_map_del(c, m, k), 0, "%s", ost_conn_errmsg(c));
        ost_decref(k);
    }
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    uint64_t removed = 0;
    cr_assert_eq(ost_store_pack(a, &removed), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(removed, 4, "g, g2 and the two values: %llu", (unsigned long long)removed);
    cr_assert_eq(records_of(a), 8);
    /* what stays loads, in a new transaction; what went is gone */
    ost_abort(c);
    ost_value x;
    cr_assert_eq(ost_conn_get(c, keep2, &x), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(item_n(x), 2);
    for (int i = 0; i < 4; i++) {
        cr_assert_eq(ost_conn_get(c, v[i], &x), 0, "%s", ost_conn_errmsg(c));
        cr_assert_eq(item_n(x), i);
    }
    uint64_t gone[4] = {go, go2, v[4], v[5]};
    for (int i = 0; i < 4; i++)
        cr_assert_eq(ost_conn_get(c, gone[i], &x), OST_ENOTFOUND, "oid %llu",
                     (unsigned long long)gone[i]);
    m = ost_root_get_c(c, "m");
    uint64_t n;
    cr_assert_eq(ost_map_len(c, m, &n), 0);
    cr_assert_eq(n, 4);
    /* the other handle's next transaction drops what the pack removed
     * (the commit log has a gap), and a commit that refers to it again
     * fails rather than store a dangling reference */
    ost_abort(cb);
    cr_assert_eq(ost_conn_get(cb, go, &x), OST_ENOTFOUND);
    cr_assert_eq(ost_root_set_c(cb, "back", gb), 0);
    cr_assert_neq(ost_commit(cb), 0, "a reference to a packed object was stored");
    ost_abort(cb);
    cr_assert_eq(records_of(b), 8);
    /* a sane store: check finds nothing */
    check_reports r = {0};
    uint64_t records = 0;
    cr_assert_eq(ost_store_check(a, collect_problem, &r, &records), 0, "%s (%s)", ost_store_errmsg(a),
                 r.msg[0]);
    cr_assert_eq(r.n, 0);
    cr_assert_eq(records, 8);
    ost_conn_close(c);
    ost_conn_close(cb);
    ost_store_close(a);
    ost_store_close(b);
}

/* A committer on a handle of its own, while the test packs. */
typedef struct {
    int n;          /* commits to make */
    int done;       /* made */
    int failed;     /* a commit failed other than by conflict */
    char msg[300];
    volatile int stop;
} committer;

static void *commit_loop(void *ud) {
    committer *w = ud;
    ost_store_options o;
    ost_store_options_init(&o);
    o.registry = g_reg;
    ost_store *s = ost_store_new();
    if (ost_store_open(s, g_addr, &o)) {
        snprintf(w->msg, sizeof w->msg, "open: %s", ost_store_errmsg(s));
        w->failed = 1;
        ost_store_close(s);
        return NULL;
    }
    ost_conn *c;
    ost_conn_open(s, &c);
    for (int i = 0; i < w->n && !w->failed;) {
        ost_value m = ost_root_get_c(c, "m");
        int rc = m ? ost_map_set(c, m, ost_int(i), item("w", i)) : OST_ENOTFOUND;
        /* the last tmp becomes garbage each time */
        if (!rc) rc = ost_root_set_c(c, "tmp", item("t", i));
        if (!rc) rc = ost_commit(c);
        if (rc == 0) {
            i++;
            w->done = i;
        } else if (rc != OST_ECONFLICT) {
            snprintf(w->msg, sizeof w->msg, "commit %d: %s: %s", i, ost_err_name(rc),
                     ost_conn_errmsg(c));
            w->failed = 1;
        }
        ost_abort(c);
    }
    ost_conn_close(c);
    ost_store_close(s);
    return NULL;
}

OST_TEST(api, pack_during_commits_of_another_handle_keeps_what_they_wrote) {
    if (E->one_open) cr_skip_test("%s: two handles of one store in a process; test_store.c covers pack during commits on LMDB", E->name);
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_root_set_c(c, "m", ost_incref(m)), 0);
    cr_assert_eq(ost_root_set_c(c, "tmp", item("t", -1)), 0); /* garbage at the first commit */
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    committer w = {.n = 60};
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, commit_loop, &w), 0);
    int packs = 0;
    uint64_t removed, total = 0;
    while (!w.failed && w.done < w.n) {
        cr_assert_eq(ost_store_pack(a, &removed), 0, "%s", ost_store_errmsg(a));
        total += removed;
        packs++;
    }
    pthread_join(t, NULL);
    cr_assert(!w.failed, "%s", w.msg);
    cr_assert_eq(ost_store_pack(a, &removed), 0, "%s", ost_store_errmsg(a));
    total += removed;
    cr_assert_geq(packs, 2, "packs ran while the other handle committed");
    /* every value the committer wrote is there, and the last tmp */
    ost_abort(c);
    m = ost_root_get_c(c, "m");
    uint64_t n;
    cr_assert_eq(ost_map_len(c, m, &n), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(n, (uint64_t)w.n);
    for (int i = 0; i < w.n; i++) {
        ost_value k = ost_int(i), v;
        cr_assert_eq(ost_map_get(c, m, k, &v), 0, "m[%d]: %s", i, ost_conn_errmsg(c));
        ost_decref(k);
        cr_assert_eq(item_n(v), i);
    }
    cr_assert_eq(item_n(ost_root_get_c(c, "tmp")), w.n - 1);
    /* root, map, its values and one tmp: the first commit's tmp and the
     * committer's earlier ones went */
    cr_assert_eq(records_of(a), (uint64_t)w.n + 3);
    cr_assert_eq(total, (uint64_t)w.n, "%llu removed", (unsigned long long)total);
    check_reports r = {0};
    cr_assert_eq(ost_store_check(a, collect_problem, &r, NULL), 0, "%s (%s)", ost_store_errmsg(a), r.msg[0]);
    ost_conn_close(c);
    ost_store_close(a);
}

OST_TEST(api, check_reports_a_dangling_reference_and_an_unknown_class) {
    if (E->one_open) cr_skip_test("%s: no SQL to damage rows with; test_store.c and test_safety.c cover check's reports on LMDB", E->name);
    NOT_IN_MEMORY("no SQL to damage rows with, and nothing but the engine writes its versions");
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value x = item("a", 1);
    ost_instance_setattr(x, "next", item("b", 2));
    cr_assert_eq(ost_root_set_c(c, "a", x), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    uint64_t oa = ost_oid(c, x), ob = ost_oid(c, ost_instance_getattr(x, "next"));
    ost_conn_close(c);
    /* b's row goes behind the store's back: a's reference dangles */
    char sql[300];
    snprintf(sql, sizeof sql, "DELETE FROM ost_records WHERE oid = %llu", (unsigned long long)ob);
    cr_assert_eq(E->sql(g_addr, sql), 0, "psql %s", sql);
    check_reports r = {0};
    uint64_t records = 0;
    cr_assert_eq(ost_store_check(a, collect_problem, &r, &records), OST_ECORRUPT);
    cr_assert_eq(records, 2);
    cr_assert_eq(r.n, 1, "%zu problems (%s)", r.n, r.msg[0]);
    char want[200];
    snprintf(want, sizeof want, "oid %llu refers to missing oid %llu", (unsigned long long)oa,
             (unsigned long long)ob);
    cr_assert_str_eq(r.msg[0], want);
    cr_assert_eq(r.oid[0], oa);
    cr_assert_eq(r.missing[0], ob);
    cr_assert_eq(r.err[0], OST_ENOTFOUND);
    char whole[sizeof a->shown + 40];
    snprintf(whole, sizeof whole, "%s: 1 problems found", a->shown);
    cr_assert_str_eq(ost_store_errmsg(a), whole);
    /* pack will not guess what the missing record referred to */
    uint64_t removed = 7;
    cr_assert_eq(ost_store_pack(a, &removed), OST_ECORRUPT);
    cr_assert_eq(removed, 0);
    cr_assert(strstr(ost_store_errmsg(a), "nothing was removed"), "%s", ost_store_errmsg(a));
    cr_assert_eq(records_of(a), 2);
    /* a record of a class the table does not have */
    snprintf(sql, sizeof sql,
             "INSERT INTO ost_records (oid, serial, cid, state) SELECT 900, serial, 777, state "
             "FROM ost_records WHERE oid = %llu",
             (unsigned long long)oa);
    cr_assert_eq(E->sql(g_addr, sql), 0, "psql %s", sql);
    memset(&r, 0, sizeof r);
    cr_assert_eq(ost_store_check(a, collect_problem, &r, &records), OST_ECORRUPT);
    cr_assert_eq(records, 3);
    cr_assert_eq(r.n, 2, "%zu problems", r.n);
    /* in scan order, a reference to a higher oid once every record is read */
    cr_assert_str_eq(r.msg[0], "oid 900: class id 777 is not in the class table");
    cr_assert_eq(r.oid[0], 900);
    cr_assert_eq(r.err[0], OST_ECORRUPT);
    cr_assert_str_eq(r.msg[1], want);
    /* forced, pack removes the unreachable record of the unknown class */
    cr_assert_eq(ost_store_pack_ex(a, OST_PACK_FORCE, &removed), 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(removed, 1);
    ost_store_close(a);
}

/* Runs the CLI (OSTORE_CLI) with COMMAND on the test's address; its
 * output (stdout and stderr) in out, its exit status returned. */
static int cli(const char *command, char *out, size_t cap) {
    const char *exe = getenv("OSTORE_CLI");
    cr_assert(exe, "OSTORE_CLI is not set");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s' 2>&1", exe, command, g_addr);
    FILE *f = popen(cmd, "r");
    cr_assert(f);
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = 0;
    int st = pclose(f);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

OST_TEST(api, the_cli_checks_and_packs_a_server_store) {
    NOT_IN_MEMORY("the CLI is another process, which a store in memory does not reach");
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value l = ost_list_new(0);
    for (int i = 0; i < 30; i++) ost_list_append(l, item("x", i));
    cr_assert_eq(ost_root_set_c(c, "items", l), 0);
    cr_assert_eq(ost_root_set_c(c, "g", item("g", 0)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(ost_root_set_c(c, "g", OST_NONE), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_conn_close(c);
    ost_store_close(a);
    char out[4096];
    cr_assert_eq(cli("check", out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "checked 32 records"), "%s", out);
    cr_assert(strstr(out, "no problems"), "%s", out);
    cr_assert_eq(cli("pack", out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "removed 1 object unreachable from the root"), "%s", out);
    cr_assert(strstr(out, "31 objects remain"), "%s", out);
    cr_assert_eq(cli("check", out, sizeof out), 0, "%s", out);
    cr_assert(strstr(out, "checked 31 records"), "%s", out);
}

/* A commit between the mark and the sweep links again an object the
 * mark found unreachable (another handle still held it): the catch-up
 * after the mark sees it, and the sweep keeps it. */
static ost_conn *g_relinker;
static ost_value g_relinked;
static int g_relink_rc = -1;

static void relink_hook(ost_store *s, int step) {
    (void)s;
    if (step != 0) return;
    ost_root_set_c(g_relinker, "back", g_relinked);
    g_relink_rc = ost_commit(g_relinker);
}

OST_TEST(api, pack_keeps_an_object_a_commit_links_again_during_the_pack) {
    if (E->one_open) cr_skip_test("%s: two handles of one store in a process; test_store.c has the same test on LMDB", E->name);
    need_knobs(); /* the commit runs in pack's hook */
    ost_store *a = api_open(true, false), *b = api_open(false, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    cr_assert_eq(ost_conn_open(b, &g_relinker), 0);
    cr_assert_eq(ost_root_set_c(c, "x", item("x", 7)), 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    g_relinked = ost_root_get_c(g_relinker, "x"); /* b holds x */
    cr_assert(g_relinked, "%s", ost_conn_errmsg(g_relinker));
    cr_assert_eq(item_n(g_relinked), 7);
    ost_incref(g_relinked);
    uint64_t xo = ost_oid(g_relinker, g_relinked);
    cr_assert_eq(ost_root_set_c(c, "x", OST_NONE), 0); /* x is garbage now */
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    ost_abort(g_relinker);
    knob_hook(OST__TC_PACK_STEP, relink_hook);
    uint64_t removed = 9;
    int rc = ost_store_pack(a, &removed);
    knob_hook(OST__TC_PACK_STEP, (ost__tc_pack_fn)0);
    cr_assert_eq(rc, 0, "%s", ost_store_errmsg(a));
    cr_assert_eq(g_relink_rc, 0, "the commit during the pack: %s", ost_conn_errmsg(g_relinker));
    cr_assert_eq(removed, 0, "x is linked again");
    ost_abort(c);
    ost_value x;
    cr_assert_eq(ost_conn_get(c, xo, &x), 0, "%s", ost_conn_errmsg(c));
    cr_assert_eq(item_n(x), 7);
    check_reports r = {0};
    cr_assert_eq(ost_store_check(a, collect_problem, &r, NULL), 0, "%s", r.msg[0]);
    ost_conn_close(c);
    ost_conn_close(g_relinker);
    ost_store_close(a);
    ost_store_close(b);
}

OST_TEST(api, prefetch_loads_ghosts_in_one_trip) {
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
    /* a record deleted behind the store's back: ENOTFOUND with the oid
     * (LMDB: tests/test_store.c's prefetch tests) */
    if (!E->sql) {
        ost_conn_close(c);
        ost_store_close(b);
        return;
    }
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

OST_TEST(api, loader_batches_go_by_copy_and_a_failed_one_leaves_nothing) {
    if (!E->sql) cr_skip_test("%s: no COPY; tests/test_batch.c covers the loader's batches", E->name);
    ost_store *a = api_open(true, false);
    ost_conn *c;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = 1000; /* past the knob PG_COPY_MIN (256): COPY */
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

/* Issue 30, item 5: a server that went away is OST_EIO, and the message
 * names the address and what was being done, in one line: a map write
 * said only "map N: input/output error" (the engine's message dropped),
 * and a snapshot begun on a connection the server had closed said
 * "beginning a snapshot: ADDR: beginning a snapshot:  server closed..."
 * (the store's message formatted from itself). */
OST_TEST(api, a_server_gone_is_eio_naming_the_address_and_what_was_done) {
    const char *stop = getenv("OST_TEST_PG_STOP");
    if (strcmp(E->name, "postgresql")) cr_skip_test("%s: no server to stop", E->name);
    cr_assert(stop, "OST_TEST_PG_STOP is not set (tests/pg/pgserver.sh sets it)");
    /* a class no commit has stored yet: its id is asked of the server */
    static const char *ofields[] = {"n"};
    ost_class_def odef = {.module = "shop", .name = "Other", .fields = ofields, .nfields = 1,
                          .persistent = true};
    ost_value other;
    cr_assert_eq(ost_registry_add(g_reg, &odef, &other), 0);
    ost_store *a = api_open(true, false);
    ost_conn *c, *c2;
    cr_assert_eq(ost_conn_open(a, &c), 0);
    ost_value m;
    cr_assert_eq(ost_map_new(c, "int", &m), 0);
    for (int i = 0; i < 10; i++) cr_assert_eq(ost_map_set(c, m, ost_int(i), item("i", i)), 0);
    cr_assert_eq(ost_root_set_c(c, "m", ost_incref(m)) /* m is borrowed */, 0);
    cr_assert_eq(ost_commit(c), 0, "%s", ost_conn_errmsg(c));
    /* c2 holds a connection (its first snapshot, begun by the open) that
     * the server will close under it */
    cr_assert_eq(ost_conn_open(a, &c2), 0);
    /* c3 in a snapshot, the map's entries not read yet */
    ost_conn *c3;
    cr_assert_eq(ost_conn_open(a, &c3), 0);
    ost_value m3 = ost_root_get_c(c3, "m");
    cr_assert(m3, "%s", ost_conn_errmsg(c3));
    cr_assert_eq(ost_activate(c3, m3), 0, "%s", ost_conn_errmsg(c3));
    /* c5's cursor holds a page of entries whose items it has not read: its
     * first step asks for an oid (a step for a value would read the
     * records of the whole page's items ahead) */
    ost_conn *c5;
    cr_assert_eq(ost_conn_open(a, &c5), 0);
    ost_value m5 = ost_root_get_c(c5, "m");
    cr_assert(m5, "%s", ost_conn_errmsg(c5));
    ost_map_cursor *cur;
    cr_assert_eq(ost_map_cursor_open(c5, m5, NULL, &cur), 0, "%s", ost_conn_errmsg(c5));
    ost_value k5, v5;
    uint64_t o5;
    cr_assert_eq(ost_map_cursor_next_oid(cur, &k5, &o5), 0, "%s", ost_conn_errmsg(c5));
    g_stopped = true;
    cr_assert_eq(system(stop), 0);
    /* a map read */
    ost_value v;
    int rc = ost_map_get(c3, m3, ost_int(5), &v);
    const char *msg = ost_conn_errmsg(c3);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), msg);
    expect_names_store(a, msg);
    cr_assert(strstr(msg, "map entry"), "says what was done: %s", msg);
    ost_conn_close(c3);
    /* an entry whose value refers to an object that cannot be read now:
     * the step (reading the page's records ahead, or the class table for
     * the class the reference names) or the ghost's load fails as the
     * server's failure, not damage ("does not decode", OST_ECORRUPT) */
    rc = ost_map_cursor_next(cur, &k5, &v5);
    if (rc == 0) {
        cr_assert(ost_is_ghost(v5));
        rc = ost_activate(c5, v5);
    }
    msg = ost_conn_errmsg(c5);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), msg);
    expect_names_store(a, msg);
    cr_assert((strstr(msg, "reading a record") || strstr(msg, "reading a class")) &&
                  !strstr(msg, "does not decode"),
              "%s", msg);
    ost_map_cursor_close(cur);
    ost_conn_close(c5);
    /* a snapshot on the connection the server closed */
    rc = ost_conn_get(c2, 0, &v);
    msg = ost_conn_errmsg(c2);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), msg);
    expect_names_store(a, msg);
    const char *first = strstr(msg, "beginning a snapshot");
    cr_assert(first && !strstr(first + 1, "beginning a snapshot"), "once: %s", msg);
    cr_assert(!strstr(strstr(msg, a->shown) + 1, a->shown), "the address once: %s", msg);
    cr_assert(strstr(msg, "server closed the connection"), "the server's cause: %s", msg);
    /* a commit of an object of that class: its class id cannot be had */
    ost_value o = ost_instance_new(ost_incref(other));
    cr_assert(o);
    cr_assert_eq(ost_root_set_c(c, "other", o), 0, "%s", ost_conn_errmsg(c));
    rc = ost_commit(c);
    msg = ost_conn_errmsg(c);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), msg);
    expect_names_store(a, msg);
    cr_assert(strstr(msg, "cannot connect") || strstr(msg, "reading a class"), "%s", msg);
    ost_abort(c);
    /* a new connection: nothing to connect to */
    ost_conn *c4 = NULL;
    rc = ost_conn_open(a, &c4);
    if (!rc) {
        rc = ost_conn_get(c4, 0, &v);
        msg = ost_conn_errmsg(c4);
    } else
        msg = ost_store_errmsg(a);
    cr_assert_eq(rc, OST_EIO, "%s: %s", ost_err_name(rc), msg);
    expect_names_store(a, msg);
    cr_assert(strstr(msg, "cannot connect"), "%s", msg);
    cr_log_info("server gone: %s", msg);
    ost_conn_close(c4);
    ost_conn_close(c);
    ost_conn_close(c2);
    ost_store_close(a);
}
