/* LMDB and PostgreSQL side by side, with PostgreSQL's own references, in
 * one run (issue 13; docs/benchmarks.md has the figures):
 *
 *   PGSERVER_FSYNC=on PGSERVER_SHARED_BUFFERS=2GB PGSERVER_HUGE_PAGES=on \
 *       tests/pg/pgserver.sh build/bench/bench_engines \
 *       [--objects N] [--reads R] [--demo PATH-TO-ostore] [--no-copy]
 *
 * On each engine, through the public API (ostore.h):
 *   1. the bulk loader: N new objects (default 2,000,000) of a class with
 *      three fields, in the loader's default batches;
 *   2. one-object commits (each changes one object of its own) from 1 and
 *      from 16 threads, each thread with its own connection, opened before
 *      the clock starts; the commits a group of the group committer. In
 *      four rounds, 1 thread, 16, 16, 1 (4,000 commits a side from one
 *      thread, 2,000 a thread from 16: rounds of 0.5 to 1 s, long enough
 *      that a round's start and end do not weigh), so that both sides
 *      meet the same disk: its sync time drifts from one minute to the
 *      next; before them, a round of 50 commits a thread from 16, not
 *      timed (what a store sets up at its first commits);
 *   3. R random reads (default 20,000) of those objects one at a time
 *      (ost_conn_get and ost_activate), then PF_TIMES x R with prefetch
 *      (ost_conn_get_many, 1,000 oids a call: as many keys would be 20
 *      calls and 80 ms, too short a measure to say a rate, so both last
 *      about a second); first each on a fresh
 *      connection (its server process has touched nothing yet), then on
 *      a warm one: a connection that first read every object once in oid
 *      order, as a long-running application's connections have;
 *   4. with --demo, `ostore demo ADDR --objects N/10` and its walk line.
 * And in the same run, libpq against the same server (the references):
 *   a. COPY ... FROM STDIN (binary) of the rows the loader wrote (read
 *      back first), into a table of the same shape, in one transaction;
 *   b. a prepared single-row SELECT by primary key, R random keys;
 *   c. 1,000 random keys per `= ANY($1)` query, PF_TIMES x R keys;
 *   b and c on a fresh connection, then after the same warm-up (every row
 *   once, in key order, 1,000 keys per `= ANY($1)`), with the keys of 3.
 *   Each is measured beside ostore's figure it is compared with (a right
 *   after the loader, b and c in reads()), not after the whole run: the
 *   machine's speed drifts within a minute.
 * Then the ratios against the references and the targets of issue 13.
 * --no-copy makes the PostgreSQL loader write by INSERT as before COPY
 * (a test knob: a build configured with -Dtest_knobs=enabled, or a debug
 * one);
 * BENCH_NO_GROUP=1 in the environment opens both stores without
 * group_commit (every connection then commits on its own session);
 * BENCH_ONLY_PG=1 skips LMDB; BENCH_PREFETCH_CONNECTIONS=N sets the
 * stores' prefetch_connections (default 2: PostgreSQL reads a prefetch of
 * 1,000 in two parts on two server connections at once). */
#define _POSIX_C_SOURCE 200809L
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ostore.h"
#include "store_internal.h" /* the group committer's counters */

#define DIE(...)                                                                                   \
    do {                                                                                           \
        fprintf(stderr, "bench_engines: " __VA_ARGS__);                                           \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint64_t rnd_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) { /* xorshift64* */
    rnd_state ^= rnd_state >> 12;
    rnd_state ^= rnd_state << 25;
    rnd_state ^= rnd_state >> 27;
    return rnd_state * 2685821657736338717ULL;
}

static ost_registry *g_reg;
/* ost_store_options.prefetch_connections: 2, or BENCH_PREFETCH_CONNECTIONS */
static unsigned g_prefetch_connections = 2;
static ost_value g_item;

typedef struct {
    double load, c1, c16, per_group, single, prefetched, single_cold, prefetched_cold;
    uint64_t first, n; /* the loaded oids: [first, first + n) */
    /* PostgreSQL's references, measured beside ostore's figures (rows/s) */
    double copy, sel, sel_cold, any, any_cold;
    uint64_t copy_rows;
} figures;

static ost_store *open_at(const char *addr, bool create) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    o.registry = g_reg;
    o.prefetch_connections = g_prefetch_connections;
    o.group_commit = !getenv("BENCH_NO_GROUP"); /* both engines: the store's group committer thread */
    o.map_size = (size_t)4 << 30;
    ost_store *st = ost_store_new();
    if (!st || ost_store_open(st, addr, &o)) DIE("open: %s", st ? ost_store_errmsg(st) : "no memory");
    return st;
}

static ost_value new_item(int64_t i) {
    ost_value a = ost_instance_new(ost_incref(g_item));
    char name[32];
    snprintf(name, sizeof name, "item-%lld", (long long)i);
    ost_instance_setattr(a, "name", ost_str_c(name));
    ost_instance_setattr(a, "n", ost_int(i));
    ost_instance_setattr(a, "next", OST_NONE);
    return a;
}

static void load(ost_store *st, uint64_t n, figures *f) {
    ost_conn *c;
    if (ost_conn_open(st, &c)) DIE("conn");
    ost_loader *l;
    ost_loader_options lo;
    ost_loader_options_init(&lo);
    if (ost_loader_open(c, &lo, &l)) DIE("loader: %s", ost_conn_errmsg(c));
    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        ost_value v = new_item((int64_t)i);
        uint64_t oid;
        if (ost_loader_add(l, v, &oid)) DIE("loader_add: %s", ost_loader_errmsg(l));
        if (!i) f->first = oid;
        ost_decref(v);
    }
    if (ost_loader_close(l)) DIE("loader: %s", ost_conn_errmsg(c));
    f->load = (double)n / (now() - t0);
    f->n = n;
    ost_conn_close(c);
}

typedef struct {
    ost_store *st;
    int id, n;
    pthread_barrier_t *ready; /* every connection is open: the clock starts */
} worker;

static void *commit_worker(void *arg) {
    worker *w = arg;
    ost_conn *c;
    if (ost_conn_open(w->st, &c)) DIE("conn");
    char key[32];
    snprintf(key, sizeof key, "counter-%d", w->id);
    ost_value it = ost_root_get_c(c, key);
    if (!it) DIE("no %s", key);
    pthread_barrier_wait(w->ready);
    for (int i = 0; i < w->n; i++) {
        ost_instance_setattr(it, "n", ost_int(i + 1));
        int rc = ost_commit(c);
        if (rc) DIE("commit: %s", ost_conn_errmsg(c));
    }
    ost_conn_close(c);
    return NULL;
}

/* The seconds `threads` threads took to commit `each` times, each on a
 * connection of its own opened before the clock starts (on PostgreSQL
 * that starts a server process: not a commit's cost); *groups gets the
 * groups of the store's group committer they made. */
static double commits(ost_store *st, int threads, int each, uint64_t *groups) {
    pthread_t t[16];
    worker w[16];
    pthread_barrier_t ready;
    pthread_barrier_init(&ready, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){st, i, each, &ready};
        pthread_create(&t[i], NULL, commit_worker, &w[i]);
    }
    pthread_barrier_wait(&ready);
    uint64_t g0 = st->gc_groups;
    double t0 = now();
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    double secs = now() - t0;
    pthread_barrier_destroy(&ready);
    *groups = st->gc_groups - g0;
    return secs;
}

/* r random oids of the loaded objects, from seed. */
static void random_oids(const figures *f, uint64_t *oids, uint64_t r, uint64_t seed) {
    rnd_state = seed;
    for (uint64_t i = 0; i < r; i++) oids[i] = f->first + rnd() % f->n;
}

/* The seconds r reads take, one at a time, a transaction per 1,000. */
static double single_reads(ost_conn *c, const uint64_t *oids, uint64_t r) {
    double t0 = now();
    for (uint64_t i = 0; i < r; i++) {
        ost_value o;
        if (ost_conn_get(c, oids[i], &o) || ost_activate(c, o)) DIE("get: %s", ost_conn_errmsg(c));
        if (i % 1000 == 999) ost_abort(c); /* a new transaction: the cache trims itself */
    }
    ost_abort(c);
    return now() - t0;
}

/* The seconds r reads take with ost_conn_get_many, 1,000 a call and a
 * transaction. */
static double prefetched_reads(ost_conn *c, const uint64_t *oids, uint64_t r, ost_value *objs) {
    double t0 = now();
    for (uint64_t i = 0; i < r; i += 1000) {
        size_t k = r - i < 1000 ? (size_t)(r - i) : 1000;
        if (ost_conn_get_many(c, oids + i, k, objs)) DIE("get_many: %s", ost_conn_errmsg(c));
        for (size_t j = 0; j < k; j++)
            if (ost_is_ghost(objs[j])) DIE("a prefetched object is a ghost");
        ost_abort(c);
    }
    return now() - t0;
}

/* The warm-up: every loaded object, in oid order, 1,000 a call (not
 * timed), twice: the second time the calls start 500 further, so that
 * with prefetch_connections 2 each server process has read every page
 * (each reads half of a call). */
static void warm_up(ost_conn *c, const figures *f, ost_value *objs) {
    uint64_t oids[1000];
    for (uint64_t from = 0; from <= 500; from += 500)
        for (uint64_t at = from; at < f->n; at += 1000) {
            size_t k = f->n - at < 1000 ? (size_t)(f->n - at) : 1000;
            for (size_t j = 0; j < k; j++) oids[j] = f->first + at + j;
            if (ost_conn_get_many(c, oids, k, objs)) DIE("warm-up: %s", ost_conn_errmsg(c));
            ost_abort(c);
        }
}

/* Seeds of the random keys, shared with the references: other keys for
 * each measure, so that no page one measure read is favoured in the next. */
enum { SEED_SINGLE_COLD = 42, SEED_MANY_COLD = 4242, SEED_SINGLE = 43, SEED_MANY = 4243 };

/* Keys read with prefetch (and by the `= ANY` reference) per key read one
 * at a time: a prefetch reads ten times as fast, at least, so the two
 * measures take about as long. */
enum { PF_TIMES = 10 };

/* The references (below), for reads() and engine_run(). */
static double ref_copy(PGconn *c, uint64_t *rows);
static PGconn *prepare_refs(const char *base);
static double ref_select(PGconn *c, const uint64_t *oids, uint64_t r);
static double ref_any(PGconn *c, const figures *f, const uint64_t *oids, uint64_t r);

/* ostore's reads; with base (PostgreSQL), the references' beside them, on
 * the same keys: each fresh measure right after ostore's, and the warm
 * ones in halves, ostore, reference, reference, ostore, so that a drift
 * of the machine's speed within the minute falls on both alike. */
static void reads(ost_store *st, uint64_t r, figures *f, const char *base) {
    uint64_t rp = r * PF_TIMES, h = r / 2, hp = rp / 2;
    uint64_t *oids = malloc(rp * sizeof *oids);
    ost_value *objs = malloc(1000 * sizeof *objs);
    if (!oids || !objs) DIE("out of memory");
    ost_conn *c;
    /* fresh connections */
    if (ost_conn_open(st, &c)) DIE("conn");
    random_oids(f, oids, r, SEED_SINGLE_COLD);
    f->single_cold = (double)r / single_reads(c, oids, r);
    ost_conn_close(c);
    PGconn *rc = base ? prepare_refs(base) : NULL;
    if (rc) f->sel_cold = (double)r / ref_select(rc, oids, r);
    if (ost_conn_open(st, &c)) DIE("conn");
    random_oids(f, oids, rp, SEED_MANY_COLD);
    f->prefetched_cold = (double)rp / prefetched_reads(c, oids, rp, objs);
    ost_conn_close(c);
    if (rc) {
        f->any_cold = (double)rp / ref_any(rc, f, oids, rp);
        PQfinish(rc);
    }
    /* warm ones */
    if (ost_conn_open(st, &c)) DIE("conn");
    warm_up(c, f, objs);
    rc = base ? prepare_refs(base) : NULL;
    if (rc) (void)ref_any(rc, f, NULL, f->n); /* one process: once is enough */
    random_oids(f, oids, r, SEED_SINGLE);
    double mine = single_reads(c, oids, h), theirs = 0;
    if (rc) theirs = ref_select(rc, oids, h) + ref_select(rc, oids + h, r - h);
    mine += single_reads(c, oids + h, r - h);
    f->single = (double)r / mine;
    if (rc) f->sel = (double)r / theirs;
    random_oids(f, oids, rp, SEED_MANY);
    mine = prefetched_reads(c, oids, hp, objs);
    if (rc) theirs = ref_any(rc, f, oids, hp) + ref_any(rc, f, oids + hp, rp - hp);
    mine += prefetched_reads(c, oids + hp, rp - hp, objs);
    f->prefetched = (double)rp / mine;
    if (rc) {
        f->any = (double)rp / theirs;
        PQfinish(rc);
    }
    ost_conn_close(c);
    free(oids);
    free(objs);
}

/* The run on one engine; with pc and base (PostgreSQL), the references'
 * measures beside ostore's: COPY right after the loader, the reads in
 * reads(). */
static void engine_run(const char *name, const char *addr, uint64_t n, uint64_t r, figures *f,
                       PGconn *pc, const char *base) {
    ost_store *st = open_at(addr, true);
    load(st, n, f);
    printf("%-10s load:   %llu objects, %.0f objects/s\n", name, (unsigned long long)n, f->load);
    if (pc) {
        f->copy = ref_copy(pc, &f->copy_rows);
        printf("reference  COPY FROM STDIN (binary) of the %llu rows the loader wrote: %.0f rows/s\n",
               (unsigned long long)f->copy_rows, f->copy);
    }
    fflush(stdout);
    /* the counters of the commit threads */
    ost_conn *c;
    if (ost_conn_open(st, &c)) DIE("conn");
    for (int i = 0; i < 16; i++) {
        char key[32];
        snprintf(key, sizeof key, "counter-%d", i);
        ost_root_set_c(c, key, new_item(i));
    }
    if (ost_commit(c)) DIE("commit: %s", ost_conn_errmsg(c));
    ost_conn_close(c);
    /* a round not timed first: what a store makes once, at its first
     * commits, is not a commit's cost (PostgreSQL: the connections of the
     * views its commits leave, docs/postgresql.md) */
    uint64_t g, g16 = 0;
    (void)commits(st, 16, 50, &g);
    /* 1 thread, 16, 16, 1: the disk's sync time drifts within a minute,
     * and both sides meet the same drift */
    double s1 = commits(st, 1, 2000, &g);
    double s16 = commits(st, 16, 1000, &g);
    g16 += g;
    s16 += commits(st, 16, 1000, &g);
    g16 += g;
    s1 += commits(st, 1, 2000, &g);
    f->c1 = 4000 / s1;
    f->c16 = 32000 / s16;
    f->per_group = g16 ? 32000.0 / (double)g16 : 0;
    printf("%-10s commits of one object: 1 thread %.0f/s, 16 threads %.0f/s (x%.2f, %.1f a group)\n",
           name, f->c1, f->c16, f->c16 / f->c1, f->per_group);
    fflush(stdout);
    reads(st, r, f, pc ? base : NULL);
    printf("%-10s random reads, fresh connection: one at a time %.0f objects/s, prefetched "
           "(1,000 a call) %.0f objects/s (x%.1f)\n",
           name, f->single_cold, f->prefetched_cold, f->prefetched_cold / f->single_cold);
    printf("%-10s random reads, warm connection:  one at a time %.0f objects/s, prefetched "
           "(1,000 a call) %.0f objects/s (x%.1f)\n",
           name, f->single, f->prefetched, f->prefetched / f->single);
    if (pc) {
        printf("reference  prepared SELECT by primary key, 1 client: fresh connection %.0f rows/s, "
               "warm %.0f rows/s\n", f->sel_cold, f->sel);
        printf("reference  1,000 random keys per = ANY($1): fresh connection %.0f rows/s, warm %.0f "
               "rows/s\n", f->any_cold, f->any);
    }
    fflush(stdout);
    ost_store_close(st);
}

/* ---- the references: libpq alone ------------------------------------------------------ */

static PGresult *exec_ok(PGconn *c, const char *sql) {
    PGresult *r = PQexec(c, sql);
    ExecStatusType s = PQresultStatus(r);
    if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) DIE("%s: %s", sql, PQerrorMessage(c));
    return r;
}

typedef struct {
    char *b;
    size_t n, cap;
} buf;

static void buf_add(buf *b, const char *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->b = realloc(b->b, b->cap);
        if (!b->b) DIE("out of memory");
    }
    memcpy(b->b + b->n, d, n);
    b->n += n;
}

static double ref_copy(PGconn *c, uint64_t *rows) {
    /* the rows the loader wrote, as COPY's binary format gives them */
    PGresult *r = PQexec(c, "COPY (SELECT oid, serial, cid, state FROM ost_records) TO STDOUT "
                            "(FORMAT binary)");
    if (PQresultStatus(r) != PGRES_COPY_OUT) DIE("copy out: %s", PQerrorMessage(c));
    PQclear(r);
    buf b = {0};
    char *d;
    int len;
    while ((len = PQgetCopyData(c, &d, 0)) > 0) {
        buf_add(&b, d, (size_t)len);
        PQfreemem(d);
    }
    while ((r = PQgetResult(c))) {
        if (PQresultStatus(r) == PGRES_COMMAND_OK) *rows = strtoull(PQcmdTuples(r), NULL, 10);
        PQclear(r);
    }
    PQclear(exec_ok(c, "DROP TABLE IF EXISTS raw_copy"));
    PQclear(exec_ok(c, "CREATE TABLE raw_copy (oid bigint PRIMARY KEY, serial bigint NOT NULL, "
                       "cid int NOT NULL, state bytea NOT NULL)"));
    double t0 = now();
    PQclear(exec_ok(c, "BEGIN"));
    r = PQexec(c, "COPY raw_copy FROM STDIN (FORMAT binary)");
    if (PQresultStatus(r) != PGRES_COPY_IN) DIE("copy in: %s", PQerrorMessage(c));
    PQclear(r);
    for (size_t o = 0; o < b.n; o += 1 << 20) {
        size_t k = b.n - o < (1u << 20) ? b.n - o : 1u << 20;
        if (PQputCopyData(c, b.b + o, (int)k) != 1) DIE("copy data: %s", PQerrorMessage(c));
    }
    if (PQputCopyEnd(c, NULL) != 1) DIE("copy end: %s", PQerrorMessage(c));
    while ((r = PQgetResult(c))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK) DIE("copy: %s", PQerrorMessage(c));
        PQclear(r);
    }
    PQclear(exec_ok(c, "COMMIT"));
    double secs = now() - t0;
    free(b.b);
    return (double)*rows / secs;
}

static void be64(char *b, uint64_t v) {
    for (int i = 7; i >= 0; i--, v >>= 8) b[i] = (char)(v & 0xff);
}

/* The seconds a prepared single-row SELECT by primary key ("one",
 * prepared by prepare_refs) takes for each of oids[0, r). */
static double ref_select(PGconn *c, const uint64_t *oids, uint64_t r) {
    double t0 = now();
    for (uint64_t i = 0; i < r; i++) {
        char k[8];
        be64(k, oids[i]);
        const char *v[1] = {k};
        int l[1] = {8}, fm[1] = {1};
        PGresult *q = PQexecPrepared(c, "one", 1, v, l, fm, 1);
        if (PQresultStatus(q) != PGRES_TUPLES_OK || PQntuples(q) != 1) DIE("select: %s", PQerrorMessage(c));
        PQclear(q);
    }
    return now() - t0;
}

/* The seconds 1,000 keys per prepared `= ANY($1)` ("many") take for
 * oids[0, r); oids NULL: the r keys from f->first, in order (the
 * warm-up). */
static double ref_any(PGconn *c, const figures *f, const uint64_t *oids, uint64_t r) {
    /* a binary int8[]: ndim 1, no nulls, element type 20, then (length, value) each */
    size_t cap = 20 + 1000 * 12;
    char *a = malloc(cap);
    double t0 = now();
    for (uint64_t i = 0; i < r; i += 1000) {
        int k = (int)(r - i < 1000 ? r - i : 1000);
        char *o = a;
        uint32_t hdr[5] = {1, 0, 20, (uint32_t)k, 1};
        for (int j = 0; j < 5; j++, o += 4)
            for (int b = 0; b < 4; b++) o[b] = (char)(hdr[j] >> (24 - 8 * b));
        for (int j = 0; j < k; j++) {
            o[0] = o[1] = o[2] = 0, o[3] = 8;
            be64(o + 4, oids ? oids[i + (uint64_t)j] : f->first + i + (uint64_t)j);
            o += 12;
        }
        const char *v[1] = {a};
        int l[1] = {(int)(o - a)}, fm[1] = {1};
        PGresult *q = PQexecPrepared(c, "many", 1, v, l, fm, 1);
        if (PQresultStatus(q) != PGRES_TUPLES_OK) DIE("any: %s", PQerrorMessage(c));
        PQclear(q);
    }
    free(a);
    return now() - t0;
}

/* A new connection to the references' table, its statements prepared. */
static PGconn *prepare_refs(const char *base) {
    PGconn *c = PQconnectdb(base);
    if (PQstatus(c) != CONNECTION_OK) DIE("%s", PQerrorMessage(c));
    PQclear(exec_ok(c, "SET search_path TO bench_engines"));
    PGresult *p = PQprepare(c, "one", "SELECT serial, cid, state FROM raw_copy WHERE oid = $1::bigint",
                            1, NULL);
    if (PQresultStatus(p) != PGRES_COMMAND_OK) DIE("prepare: %s", PQerrorMessage(c));
    PQclear(p);
    p = PQprepare(c, "many", "SELECT oid, serial, cid, state FROM raw_copy WHERE oid = ANY($1::bigint[])",
                  1, NULL);
    if (PQresultStatus(p) != PGRES_COMMAND_OK) DIE("prepare: %s", PQerrorMessage(c));
    PQclear(p);
    return c;
}

static void walk_line(const char *ostore, const char *addr, uint64_t n) {
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "'%s' demo '%s' --objects %llu 2>&1 | grep -E '^(load|walk|ostore):'",
             ostore, addr, (unsigned long long)n);
    fflush(stdout);
    if (system(cmd)) printf("  (the demo failed on %s)\n", addr);
}

int main(int argc, char **argv) {
    uint64_t n = 2000000, r = 20000;
    const char *demo = NULL, *dir = "/tmp/bench_engines.lmdb";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--objects") && i + 1 < argc) n = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--reads") && i + 1 < argc) r = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--demo") && i + 1 < argc) demo = argv[++i];
        else if (!strcmp(argv[i], "--lmdb") && i + 1 < argc) dir = argv[++i];
        else if (!strcmp(argv[i], "--no-copy")) {
            /* the fewest new records a package writes by COPY, out of
             * reach (the figures before COPY): the test knob PG_COPY_MIN
             * (store/testctl.h) */
            int rc = ost__knob_set(OST__K_PG_COPY_MIN, 1 << 30);
            if (rc)
                DIE("--no-copy: %s: it needs a build with the test knobs (meson configure "
                    "-Dtest_knobs=enabled)", ost_err_name(rc));
        }
        else
            DIE("usage: bench_engines [--objects N] [--reads R] [--demo OSTORE] [--lmdb DIR] "
                "[--no-copy]");
    }
    const char *pcs = getenv("BENCH_PREFETCH_CONNECTIONS");
    if (pcs) g_prefetch_connections = (unsigned)strtoul(pcs, NULL, 10);
    const char *base = getenv("OST_TEST_PG");
    if (!base) DIE("run it through tests/pg/pgserver.sh (OST_TEST_PG is not set)");
    if (n < 1000 || r < 1000) DIE("--objects and --reads take at least 1000");
    static const char *fields[] = {"name", "n", "next"};
    ost_class_def def = {.module = "bench", .name = "Item", .fields = fields, .nfields = 3,
                         .persistent = true};
    g_reg = ost_registry_new();
    if (!g_reg || ost_registry_add(g_reg, &def, &g_item)) DIE("registry");

    /* a schema of its own on the server, a fresh directory for LMDB */
    PGconn *pc = PQconnectdb(base);
    if (PQstatus(pc) != CONNECTION_OK) DIE("%s", PQerrorMessage(pc));
    char sql[2400], pgaddr[1024], demo_addr[1024];
    PQclear(exec_ok(pc, "DROP SCHEMA IF EXISTS bench_engines CASCADE"));
    PQclear(exec_ok(pc, "DROP SCHEMA IF EXISTS bench_demo CASCADE"));
    PQclear(exec_ok(pc, "CREATE SCHEMA bench_engines"));
    PQclear(exec_ok(pc, "CREATE SCHEMA bench_demo"));
    PQclear(exec_ok(pc, "SET search_path TO bench_engines"));
    const char *sep = strchr(base, '?') ? "&" : "?";
    snprintf(pgaddr, sizeof pgaddr, "%s%soptions=-csearch_path%%3Dbench_engines", base, sep);
    snprintf(demo_addr, sizeof demo_addr, "%s%soptions=-csearch_path%%3Dbench_demo", base, sep);
    snprintf(sql, sizeof sql, "rm -rf '%s' && mkdir -p '%s'", dir, dir);
    if (system(sql)) DIE("cannot make %s", dir);
    PGresult *fs = exec_ok(pc, "SHOW fsync");
    PGresult *sc = exec_ok(pc, "SHOW synchronous_commit");
    printf("bench_engines: %llu objects, %llu random reads; PostgreSQL fsync=%s "
           "synchronous_commit=%s, prefetch_connections %u; LMDB in %s\n",
           (unsigned long long)n, (unsigned long long)r, PQgetvalue(fs, 0, 0),
           PQgetvalue(sc, 0, 0), g_prefetch_connections, dir);
    PQclear(fs);
    PQclear(sc);

    figures fl = {0}, fp = {0};
    if (!getenv("BENCH_ONLY_PG")) engine_run("lmdb", dir, n, r, &fl, NULL, NULL);
    engine_run("postgresql", pgaddr, n, r, &fp, pc, base);
    PQfinish(pc);

    if (demo) {
        printf("demo walk (--objects %llu):\n", (unsigned long long)(n / 10));
        char ddir[1100];
        snprintf(ddir, sizeof ddir, "%s.demo", dir);
        snprintf(sql, sizeof sql, "rm -rf '%s'", ddir);
        if (system(sql)) DIE("cannot remove %s", ddir);
        printf("lmdb:\n");
        walk_line(demo, ddir, n / 10);
        printf("postgresql:\n");
        walk_line(demo, demo_addr, n / 10);
    }

    struct {
        const char *what;
        double got, want;
    } t[] = {
        {"PG loader / raw COPY", fp.load / fp.copy, 0.8},
        {"PG single reads / prepared SELECT (warm)", fp.single / fp.sel, 0.8},
        {"PG single reads / prepared SELECT (fresh)", fp.single_cold / fp.sel_cold, 0.8},
        {"PG prefetched reads, objects/s (warm)", fp.prefetched, 100000},
        {"PG prefetched reads, objects/s (fresh)", fp.prefetched_cold, 100000},
        {"PG prefetched / single reads (warm)", fp.prefetched / fp.single, 10},
        {"PG prefetched / single reads (fresh)", fp.prefetched_cold / fp.single_cold, 10},
        {"PG commits 16 threads / 1 thread", fp.c16 / fp.c1, 5},
        {"PG prefetched reads / = ANY reference (warm)", fp.prefetched / fp.any, 0},
        {"PG prefetched reads / = ANY reference (fresh)", fp.prefetched_cold / fp.any_cold, 0},
        {"LMDB loader / PG loader", fl.load / fp.load, 0},
        {"LMDB single reads / PG single reads", fl.single / fp.single, 0},
    };
    printf("ratios (issue 13 targets):\n");
    for (size_t i = 0; i < sizeof t / sizeof *t; i++) {
        if (t[i].want)
            printf("  %-46s %12.2f  target >= %-8g %s\n", t[i].what, t[i].got, t[i].want,
                   t[i].got >= t[i].want ? "MET" : "MISSED");
        else
            printf("  %-46s %12.2f\n", t[i].what, t[i].got);
    }
    ost_registry_free(g_reg);
    return 0;
}
