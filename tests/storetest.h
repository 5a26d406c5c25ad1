/* Test helpers for the Criterion suites that open stores (test_store.c,
 * test_batch.c, test_maps.c): assertions for loops and for child processes,
 * opening a store and a connection, commits, stats and the root, the
 * reports of ost_store_check, messages that name a number, raw LMDB access
 * to a closed store, the byte orders of the records, and child processes.
 *
 * Each suite keeps its own fixture (a temporary directory and a registry)
 * and passes the directory and registry in. With OST_TEST_ENGINE=postgresql
 * the "directory" is the address of a fresh database instead, and
 * LMDB_ONLY(why) skips what only LMDB has (see "the engine under test").
 * Functions are static inline so that a suite that leaves one unused
 * compiles without a warning. */
#ifndef OST_TESTS_STORETEST_H
#define OST_TESTS_STORETEST_H

#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <lmdb.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#ifdef OST_HAVE_POSTGRESQL
#include <libpq-fe.h>
#endif

#include <uv.h>

#include "ostore.h"
#include "rmtree.h"

/* ---- the engine under test ------------------------------------------------ */

/* The suites that include this run on LMDB (a directory) by default and on
 * PostgreSQL when OST_TEST_ENGINE=postgresql, under tests/pg/pgserver.sh
 * (which exports OST_TEST_PG, the address of the database "ostore", and
 * OST_TEST_PG_ADMIN): each test then gets a fresh database ost_t<pid>_<n>,
 * made at setup and dropped at teardown, and its address in place of the
 * directory. */
static inline bool on_pg(void) {
    const char *e = getenv("OST_TEST_ENGINE");
    return e && !strcmp(e, "postgresql");
}

/* With OST_TEST_ENGINE=mem, each test's "directory" is a fresh address
 * of the in-memory engine, mem:t<pid>_<n>: a named store, which lives
 * until the test's process ends, so that a test can close and reopen
 * it. */
static inline bool on_mem(void) {
    const char *e = getenv("OST_TEST_ENGINE");
    return e && !strcmp(e, "mem");
}

/* Whether the suite runs on LMDB (the default engine). */
static inline bool on_lmdb(void) { return !on_pg() && !on_mem(); }

/* Skips the test on PostgreSQL and in memory, saying why: for what only
 * LMDB has (its files, its map size, its pages, the raw API). */
#define LMDB_ONLY(why)                                            \
    do {                                                          \
        if (on_pg() || on_mem()) cr_skip_test("LMDB only: %s", why); \
    } while (0)

/* Skips the test in memory alone, saying why: what a store in memory
 * cannot have (another process sharing it, a crash to recover from,
 * bytes to damage), where PostgreSQL runs the test. */
#define NOT_IN_MEMORY(why)                                        \
    do {                                                          \
        if (on_mem()) cr_skip_test("not in memory: %s", why);     \
    } while (0)

#ifdef OST_HAVE_POSTGRESQL
static char pg_dbname[64]; /* the test's database, "" when none */

/* Runs sql on the server's admin database (OST_TEST_PG_ADMIN). */
static inline void pg_admin(const char *sql) {
    const char *admin = getenv("OST_TEST_PG_ADMIN");
    cr_assert(admin, "OST_TEST_ENGINE=postgresql needs OST_TEST_PG_ADMIN (tests/pg/pgserver.sh)");
    PGconn *pc = PQconnectdb(admin);
    if (PQstatus(pc) != CONNECTION_OK) {
        char err[512];
        snprintf(err, sizeof err, "%s", pc ? PQerrorMessage(pc) : "out of memory");
        PQfinish(pc);
        cr_assert_fail("connect %s: %s", admin, err);
    }
    PGresult *r = PQexec(pc, sql);
    bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
    char err[512];
    snprintf(err, sizeof err, "%s", PQerrorMessage(pc));
    PQclear(r);
    PQfinish(pc);
    cr_assert(ok, "%s: %s", sql, err);
}

/* Makes a fresh database and writes its address into dir: OST_TEST_PG
 * with the database name replaced (postgresql://HOST/NAME?PARAMS). */
static inline void pg_fresh_db(char *dir, size_t dircap) {
    static unsigned seq;
    const char *base = getenv("OST_TEST_PG");
    cr_assert(base, "OST_TEST_ENGINE=postgresql needs OST_TEST_PG (tests/pg/pgserver.sh)");
    const char *host = strstr(base, "://");
    cr_assert(host, "OST_TEST_PG is not a postgresql:// URI: %s", base);
    const char *name = strchr(host + 3, '/');
    cr_assert(name, "OST_TEST_PG names no database: %s", base);
    const char *params = strchr(name, '?');
    if (!params) params = name + strlen(name);
    snprintf(pg_dbname, sizeof pg_dbname, "ost_t%ld_%u", (long)getpid(), seq++);
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE DATABASE %s", pg_dbname);
    pg_admin(sql);
    int n = snprintf(dir, dircap, "%.*s/%s%s", (int)(name - base), base, pg_dbname, params);
    cr_assert(n > 0 && (size_t)n < dircap, "the address does not fit: %s", base);
}

/* Drops the test's database, closing what connections the test left
 * (children killed mid-commit). */
static inline void pg_drop_db(void) {
    if (!pg_dbname[0]) return;
    char sql[128];
    snprintf(sql, sizeof sql, "DROP DATABASE IF EXISTS %s WITH (FORCE)", pg_dbname);
    pg_dbname[0] = 0;
    pg_admin(sql);
}
#endif

/* ---- the fixture ----------------------------------------------------------- */

/* A suite's setup: makes the directory tmp (a mkdtemp template such as
 * "/tmp/ostore-maps-XXXXXX", replaced by the name made), sets dir to
 * tmp/db (the store's path, not made) and returns a new registry. On
 * PostgreSQL (on_pg) dir is the address of a fresh, empty database
 * instead. */
static inline ost_registry *fixture_setup(char *tmp, char *dir, size_t dircap) {
    cr_assert(mkdtemp(tmp), "mkdtemp: %s", strerror(errno));
    snprintf(dir, dircap, "%s/db", tmp);
    if (on_mem()) {
        static unsigned seq;
        snprintf(dir, dircap, "mem:t%ld_%u", (long)getpid(), seq++);
    }
    if (on_pg()) {
#ifdef OST_HAVE_POSTGRESQL
        pg_fresh_db(dir, dircap);
#else
        cr_assert_fail("OST_TEST_ENGINE=postgresql: this build has no PostgreSQL engine");
#endif
    }
    ost_registry *reg = ost_registry_new();
    cr_assert(reg);
    return reg;
}

/* A suite's teardown: removes tmp and all in it (and the test's database
 * on PostgreSQL), frees *reg. */
static inline void fixture_teardown(const char *tmp, ost_registry **reg) {
    rmtree(tmp);
#ifdef OST_HAVE_POSTGRESQL
    pg_drop_db();
#endif
    ost_registry_free(*reg);
    *reg = NULL;
}

/* ---- assertions ---------------------------------------------------------- */

/* An assertion for loops over many objects: Criterion reports every
 * cr_assert, passed or not, to its runner, and hundreds of thousands of
 * reports make the runner itself misbehave (a leak under ASan when two
 * tests run at once); this one reports only a failure. */
#define REQUIRE(cond, ...)                        \
    do {                                          \
        if (!(cond)) cr_assert_fail(__VA_ARGS__); \
    } while (0)

/* In a child: reports a failed expectation and returns its line as the
 * exit code (never Criterion's assertions, which belong to the test
 * process). */
#define CHILD_CHECK(cond, ...)                                              \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "child %d, line %d: ", (int)getpid(), __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            return __LINE__ % 200 + 1;                                      \
        }                                                                   \
    } while (0)

/* On a thread of the test: records a failed expectation in ta->msg and
 * its line in ta->line, and jumps to the label out; the test asserts on
 * them after joining the thread. ta points to the thread's argument. */
#define THREAD_CHECK(cond, ...)                             \
    do {                                                    \
        if (!(cond)) {                                      \
            snprintf(ta->msg, sizeof ta->msg, __VA_ARGS__); \
            ta->line = __LINE__;                            \
            goto out;                                       \
        }                                                   \
    } while (0)

/* ---- stores, connections, commits ---------------------------------------- */

/* Options with reg as the registry; create as given, the rest defaults. */
static inline ost_store_options options_for(ost_registry *reg, bool create) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    o.registry = reg;
    return o;
}

/* The store at dir opened with o; fails the test if it does not open. */
static inline ost_store *open_with(const char *dir, const ost_store_options *o) {
    ost_store *st = ost_store_new();
    cr_assert(st);
    int rc = ost_store_open(st, dir, o);
    cr_assert_eq(rc, 0, "open %s: %s: %s", dir, ost_err_name(rc), ost_store_errmsg(st));
    return st;
}

/* The store at dir opened read-only with reg. */
static inline ost_store *open_read_only(const char *dir, ost_registry *reg) {
    ost_store_options o = options_for(reg, false);
    o.read_only = true;
    return open_with(dir, &o);
}

static inline ost_conn *conn_of(ost_store *st) {
    ost_conn *c;
    int rc = ost_conn_open(st, &c);
    cr_assert_eq(rc, 0, "conn_open: %s", ost_err_name(rc));
    return c;
}

/* The hot-object workload's threads (test_store.c, test_maps.c): each
 * runs n transactions of fn through ost_txn_run(c, 10, fn, its own arg,
 * ...) on a connection of its own (id tells the threads apart). */
typedef struct {
    ost_store *st;
    ost_txn_fn fn;
    int id, n, failed, line;
    unsigned retries;
    char msg[300];
} txn_thread_arg;

static inline void txn_thread(void *arg) {
    txn_thread_arg *h = arg;
    ost_conn *c;
    if (ost_conn_open(h->st, &c)) {
        h->line = __LINE__;
        return;
    }
    for (int i = 0; i < h->n; i++) {
        unsigned tried = 0;
        int rc = ost_txn_run(c, 10, h->fn, h, &tried);
        h->retries += tried - 1;
        if (rc) {
            h->failed++;
            snprintf(h->msg, sizeof h->msg, "%s: %s", ost_err_name(rc), ost_conn_errmsg(c));
        }
    }
    ost_conn_close(c);
}

/* Runs t threads (at most 16) of n transactions of fn each on st, and
 * asserts that each opened its connection, failed no transaction and
 * never retried (why: what makes that so). */
static inline void run_txn_threads(ost_store *st, ost_txn_fn fn, int t, int n, const char *why) {
    uv_thread_t th[16];
    txn_thread_arg a[16];
    cr_assert_leq(t, 16);
    for (int i = 0; i < t; i++) {
        a[i] = (txn_thread_arg){.st = st, .fn = fn, .id = i, .n = n};
        cr_assert_eq(uv_thread_create(&th[i], txn_thread, &a[i]), 0);
    }
    for (int i = 0; i < t; i++) {
        uv_thread_join(&th[i]);
        cr_assert_eq(a[i].line, 0, "thread %d could not open a connection", i);
        cr_assert_eq(a[i].failed, 0, "thread %d: %d transactions failed: %s", i, a[i].failed,
                     a[i].msg);
        cr_assert_eq(a[i].retries, 0u, "thread %d retried %u times: %s", i, a[i].retries, why);
    }
}

static inline void commit_ok(ost_conn *c) {
    int rc = ost_commit(c);
    cr_assert_eq(rc, 0, "commit: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
}

static inline ost_store_stats stats(ost_store *st) {
    ost_store_stats s;
    int rc = ost_store_stat(st, &s);
    cr_assert_eq(rc, 0, "stat: %s", ost_store_errmsg(st));
    return s;
}

/* root[key] = v; steals v. */
static inline void root_set(ost_conn *c, const char *key, ost_value v) {
    int rc = ost_root_set(c, ost_str_c(key), v);
    cr_assert_eq(rc, 0, "root_set %s: %s: %s", key, ost_err_name(rc), ost_conn_errmsg(c));
}

/* root[key] (borrowed), or 0. */
static inline ost_value root_get(ost_conn *c, const char *key) {
    ost_value k = ost_str_c(key);
    ost_value v = ost_root_get(c, k);
    ost_decref(k);
    return v;
}

/* ---- messages -------------------------------------------------------------- */

/* The message names "<label> <n>" ("oid 1" does not match "oid 12"). */
static inline void expect_labelled(const char *msg, const char *label, uint64_t n) {
    char want[64];
    snprintf(want, sizeof want, "%s %llu", label, (unsigned long long)n);
    const char *p = strstr(msg, want);
    while (p && p[strlen(want)] >= '0' && p[strlen(want)] <= '9') p = strstr(p + 1, want);
    cr_assert(p, "the message names %s: %s", want, msg);
}

/* The message names "oid <oid>". */
static inline void expect_oid_in(const char *msg, uint64_t oid) {
    expect_labelled(msg, "oid", oid);
}

/* The message names "map <oid>". */
static inline void expect_map_oid(const char *msg, uint64_t oid) {
    expect_labelled(msg, "map", oid);
}

/* ---- ost_store_check --------------------------------------------------------- */

/* The reports of ost_store_check: all are counted, the first 16 kept. */
typedef struct {
    int n;
    uint64_t oid[16], missing[16];
    int err[16];
    char msg[16][400];
} reports;

/* An ost_store_check callback; ud is a reports. */
static inline void collect(void *ud, uint64_t oid, uint64_t missing, int err, const char *msg) {
    reports *r = ud;
    if (r->n < 16) {
        r->oid[r->n] = oid;
        r->missing[r->n] = missing;
        r->err[r->n] = err;
        snprintf(r->msg[r->n], sizeof r->msg[0], "%s", msg);
    }
    r->n++;
}

/* ost_store_check finds nothing wrong; and, when want_records is not 0,
 * counts that many records. */
static inline void check_clean(ost_store *st, uint64_t want_records) {
    reports r = {0};
    uint64_t records = 0;
    int rc = ost_store_check(st, collect, &r, &records);
    cr_assert_eq(rc, 0, "check: %s: %s", ost_err_name(rc),
                 r.n ? r.msg[0] : ost_store_errmsg(st));
    cr_assert_eq(r.n, 0, "check: oid %llu missing %llu %s: %s", (unsigned long long)r.oid[0],
                 (unsigned long long)r.missing[0], ost_err_name(r.err[0]), r.msg[0]);
    if (want_records) cr_assert_eq(records, want_records);
}

/* ---- checksums, computed here independently of the library ------------- */

/* CRC-32C, bit by bit (docs/format.md). */
static inline uint32_t t_crc32c(uint32_t crc, const void *p, size_t n) {
    const uint8_t *b = p;
    crc = ~crc;
    while (n--) {
        crc ^= *b++;
        for (int k = 0; k < 8; k++) crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
    }
    return ~crc;
}

/* Puts the format-3 checksum into record rec[0, n) of oid. */
static inline void seal_record(uint8_t *rec, size_t n, uint64_t oid) {
    uint8_t k[8];
    for (int i = 0; i < 8; i++) k[i] = (uint8_t)(oid >> (56 - 8 * i));
    uint32_t c = t_crc32c(t_crc32c(t_crc32c(0, k, 8), rec, 12), rec + 16, n - 16);
    for (int i = 0; i < 4; i++) rec[12 + i] = (uint8_t)(c >> (8 * i));
}

/* Puts the format-3 checksum into map entry value val[0, vlen) of the
 * full key (map oid + encoded key). */
static inline void seal_entry(const void *key, size_t klen, uint8_t *val, size_t vlen) {
    uint32_t c = t_crc32c(t_crc32c(t_crc32c(0, key, klen), val, 8), val + 12, vlen - 12);
    for (int i = 0; i < 4; i++) val[8 + i] = (uint8_t)(c >> (8 * i));
}

/* ---- raw LMDB access (only while the store is closed in this process) --- */

static inline MDB_env *raw_env(const char *dir) {
    MDB_env *env;
    cr_assert_eq(mdb_env_create(&env), 0);
    cr_assert_eq(mdb_env_set_maxdbs(env, 8), 0);
    int rc = mdb_env_open(env, dir, 0, 0644);
    cr_assert_eq(rc, 0, "raw open %s: %s", dir, mdb_strerror(rc));
    return env;
}

/* db[key] = val (val NULL: delete key); makes db if it is not there. */
static inline void raw_put(const char *dir, const char *db, const void *key, size_t klen,
                           const void *val, size_t vlen) {
    MDB_env *env = raw_env(dir);
    MDB_txn *t;
    MDB_dbi dbi;
    cr_assert_eq(mdb_txn_begin(env, NULL, 0, &t), 0);
    cr_assert_eq(mdb_dbi_open(t, db, MDB_CREATE, &dbi), 0);
    MDB_val k = {klen, (void *)key}, v = {vlen, (void *)val};
    int rc = val ? mdb_put(t, dbi, &k, &v, 0) : mdb_del(t, dbi, &k, NULL);
    cr_assert_eq(rc, 0, "raw put/del: %s", mdb_strerror(rc));
    cr_assert_eq(mdb_txn_commit(t), 0);
    mdb_env_close(env);
}

/* Turns the format-3 store at dir (closed) into one of format fmt (1 or
 * 2) as an older ostore wrote it: records without checksums, map entries
 * without them (format 2) or no map entries database at all (format 1). */
static inline void make_old_format(const char *dir, int fmt) {
    MDB_env *env = raw_env(dir);
    MDB_txn *t;
    MDB_dbi recs, ments, meta;
    MDB_cursor *cur;
    MDB_val k, v;
    cr_assert_eq(mdb_txn_begin(env, NULL, 0, &t), 0);
    cr_assert_eq(mdb_dbi_open(t, "records", 0, &recs), 0);
    cr_assert_eq(mdb_cursor_open(t, recs, &cur), 0);
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
        uint8_t *b = malloc(v.mv_size);
        memcpy(b, v.mv_data, v.mv_size);
        memset(b + 12, 0, 4);
        uint8_t kb[8]; /* k points into the page the put changes */
        memcpy(kb, k.mv_data, 8);
        MDB_val kc = {8, kb}, nv = {v.mv_size, b};
        cr_assert_eq(mdb_cursor_put(cur, &kc, &nv, MDB_CURRENT), 0);
        free(b);
    }
    mdb_cursor_close(cur);
    cr_assert_eq(mdb_dbi_open(t, "mapents", 0, &ments), 0);
    if (fmt == 1) {
        cr_assert_eq(mdb_drop(t, ments, 1), 0);
    } else {
        cr_assert_eq(mdb_cursor_open(t, ments, &cur), 0);
        while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) {
            uint8_t *b = malloc(v.mv_size);
            memcpy(b, v.mv_data, 8);
            memcpy(b + 8, (uint8_t *)v.mv_data + 12, v.mv_size - 12);
            uint8_t kb[600];
            memcpy(kb, k.mv_data, k.mv_size);
            MDB_val kc = {k.mv_size, kb}, nv = {v.mv_size - 4, b};
            cr_assert_eq(mdb_cursor_put(cur, &kc, &nv, MDB_CURRENT), 0);
            free(b);
        }
        mdb_cursor_close(cur);
    }
    cr_assert_eq(mdb_dbi_open(t, "meta", 0, &meta), 0);
    uint8_t f[8] = {(uint8_t)fmt};
    MDB_val fk = {6, "format"}, fv = {8, f};
    cr_assert_eq(mdb_put(t, meta, &fk, &fv, 0), 0);
    cr_assert_eq(mdb_txn_commit(t), 0);
    mdb_env_close(env);
}

/* A malloc'd copy of db[key], or NULL; db must be there. */
static inline uint8_t *raw_get(const char *dir, const char *db, const void *key, size_t klen,
                               size_t *len) {
    MDB_env *env = raw_env(dir);
    MDB_txn *t;
    MDB_dbi dbi;
    cr_assert_eq(mdb_txn_begin(env, NULL, MDB_RDONLY, &t), 0);
    cr_assert_eq(mdb_dbi_open(t, db, 0, &dbi), 0);
    MDB_val k = {klen, (void *)key}, v;
    uint8_t *out = NULL;
    if (mdb_get(t, dbi, &k, &v) == 0) {
        out = malloc(v.mv_size ? v.mv_size : 1);
        memcpy(out, v.mv_data, v.mv_size);
        *len = v.mv_size;
    }
    mdb_txn_abort(t);
    mdb_env_close(env);
    return out;
}

/* v as 8 bytes big-endian: an oid as a key of "records", a map's oid at the
 * head of a key of "mapents". */
static inline void put_be64(uint8_t *b, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) b[i] = (uint8_t)v;
}

/* 8 bytes little-endian, as the serial at the head of a record. */
static inline uint64_t get_le64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

/* ---- child processes ---------------------------------------------------- */

static inline pid_t spawn(int (*fn)(void *), void *arg) {
    fflush(NULL);
    pid_t p = fork();
    cr_assert_neq(p, -1, "fork: %s", strerror(errno));
    if (p == 0) _exit(fn(arg));
    return p;
}

/* Exit status of a child; 128 + signal when it was killed. */
static inline int wait_child(pid_t p) {
    int status;
    while (waitpid(p, &status, 0) < 0)
        if (errno != EINTR) return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* In a child: opens the store at dir with o, then a connection on it.
 * Returns 0, or (having said on stderr what failed) an exit code. */
static inline int child_open(const char *dir, const ost_store_options *o, ost_store **st,
                             ost_conn **c) {
    *st = ost_store_new();
    CHILD_CHECK(*st, "ost_store_new");
    int rc = ost_store_open(*st, dir, o);
    CHILD_CHECK(rc == 0, "open: %s %s", ost_err_name(rc), ost_store_errmsg(*st));
    CHILD_CHECK(ost_conn_open(*st, c) == 0, "conn");
    return 0;
}

/* Kills a child that writes counts to the pipe fd reads: reads want counts,
 * each step more than the one before (the first *last + step), sleeps
 * pause microseconds, kills pid with SIGKILL and waits for it, then reads
 * the counts it wrote before it died, each step more again. *last gets the
 * last count read; returns the child's status as wait_child gives it. round
 * numbers the messages. */
static inline int kill_after_counts(pid_t pid, int fd, int want, uint64_t step, uint64_t *last,
                                    unsigned pause, int round) {
    uint64_t n;
    for (int i = 0; i < want; i++) {
        cr_assert_eq(read(fd, &n, sizeof n), (ssize_t)sizeof n,
                     "round %d: the child died by itself", round);
        cr_assert_eq(n, *last + step, "round %d: each count is %llu more than the last", round,
                     (unsigned long long)step);
        *last = n;
    }
    if (pause) usleep(pause);
    kill(pid, SIGKILL);
    int status = wait_child(pid);
    while (read(fd, &n, sizeof n) == (ssize_t)sizeof n) {
        cr_assert_eq(n, *last + step, "round %d: each count is %llu more than the last", round,
                     (unsigned long long)step);
        *last = n;
    }
    return status;
}

/* A loader's progress callback for a child: writes the count of objects
 * stored so far to the pipe whose write end is *(int *)ud. */
static inline void report_progress(void *ud, uint64_t objects, uint64_t bytes) {
    (void)bytes;
    ssize_t n;
    do
        n = write(*(int *)ud, &objects, sizeof objects);
    while (n < 0 && errno == EINTR);
}

/* A loader on c that commits every batch objects and reports each batch to
 * the pipe whose write end is *fd; the code of ost_loader_open. */
static inline int open_reporting_loader(ost_conn *c, size_t batch, int *fd, ost_loader **l) {
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    lo.batch_objects = batch;
    lo.progress = report_progress;
    lo.ud = fd;
    return ost_loader_open(c, &lo, l);
}

#endif
