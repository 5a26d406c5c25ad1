/* The PostgreSQL engine's benchmark (docs/postgresql.md has the figures):
 *
 *   tests/pg/pgserver.sh build/bench/bench_pg [records]
 *
 * against the private server of the tests (PGSERVER_FSYNC=on makes it
 * flush as a production server does). Three comparisons, each printed
 * with its ratio:
 *   1. loading: `records` records (default 100,000, 100-byte pickles)
 *      committed through the engine in packages of 1,000, against psql's
 *      \copy of the same bytes into a table of the same shape;
 *   2. reads: every record by get (one round trip each) against get_many
 *      (100 oids a round trip);
 *   3. commits of one small record each: 1 thread against 16 (one
 *      session each), the server's group commit merging the flushes. */
#define BENCH_NAME "bench_pg"
#include <pthread.h>
#include <unistd.h>

#include "benchlib.h"
#include "engine.h"
#include "store_internal.h"

static const ost__engine_ops *E = &ost__pg_engine;
static ost_store *st;
static ost__engine *eng;

#define PICKLE 100

static void make_pickle(uint8_t *b, uint64_t oid) {
    memset(b, 'a' + (int)(oid % 26), PICKLE);
    memcpy(b, &oid, sizeof oid);
}

static int count_fn(void *ud, uint64_t oid, const ost__recview *r) {
    (void)oid;
    *(uint64_t *)ud += r->len;
    return 0;
}

typedef struct {
    int n;
    double secs;
} worker;

static void *commit_worker(void *arg) {
    worker *w = arg;
    ost__sess *s;
    CHECK(E->sess_open(eng, &s), "sess_open");
    ost__pkg *p = ost__pkg_new();
    uint8_t b[PICKLE];
    uint64_t base; /* one block: reserve_oids commits (and flushes) itself */
    CHECK(E->reserve_oids(eng, (uint64_t)w->n, &base), "reserve_oids");
    for (int i = 0; i < w->n; i++) {
        uint64_t oid = base + (uint64_t)i;
        ost__pkg_reset(p);
        make_pickle(b, oid);
        ost__pkg_add(p, oid, 0, 1, b, PICKLE);
        CHECK(E->commit(s, &p, 1), "commit");
        CHECK(p->rc, p->msg);
    }
    ost__pkg_free(p);
    E->sess_close(s);
    return NULL;
}

static double commits(int threads, int total) {
    pthread_t t[16];
    worker w[16];
    double t0 = now();
    for (int i = 0; i < threads; i++) {
        w[i].n = total / threads;
        pthread_create(&t[i], NULL, commit_worker, &w[i]);
    }
    for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
    return (double)(total / threads * threads) / (now() - t0);
}

int main(int argc, char **argv) {
    const char *addr = getenv("OST_TEST_PG");
    if (!addr) DIE("run it through tests/pg/pgserver.sh (OST_TEST_PG is not set)");
    uint64_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 100000;
    st = ost_store_new();
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    if (E->open(st, addr, &o, &eng)) DIE("open: %s", ost_store_errmsg(st));
    uint32_t cid;
    CHECK(E->class_id(eng, "bench", 5, "Rec", 3, true, &cid), "class_id");
    uint64_t first;
    CHECK(E->reserve_oids(eng, n, &first), "reserve_oids");

    /* 1. packages against \copy */
    ost__sess *s;
    CHECK(E->sess_open(eng, &s), "sess_open");
    ost__pkg *p = ost__pkg_new();
    uint8_t b[PICKLE];
    double t0 = now();
    for (uint64_t i = 0; i < n;) {
        ost__pkg_reset(p);
        for (int j = 0; j < 1000 && i < n; j++, i++) {
            make_pickle(b, first + i);
            ost__pkg_add(p, first + i, 0, cid, b, PICKLE);
        }
        CHECK(E->commit(s, &p, 1), "commit");
        CHECK(p->rc, p->msg);
    }
    double t_pkg = now() - t0;
    char path[] = "/tmp/bench_pg.XXXXXX";
    int fd = mkstemp(path);
    FILE *f = fdopen(fd, "w");
    for (uint64_t i = 0; i < n; i++) {
        make_pickle(b, first + i);
        fprintf(f, "%llu\t2\t%u\t\\\\x", (unsigned long long)(first + i), cid);
        for (int j = 0; j < PICKLE; j++) fprintf(f, "%02x", b[j]);
        fputc('\n', f);
    }
    fclose(f);
    chmod(path, 0644);
    char cmd[2048];
    snprintf(cmd, sizeof cmd,
             "psql -q -X '%s' -c 'CREATE TABLE bench_copy (oid bigint PRIMARY KEY, serial bigint, "
             "cid int, state bytea)' && psql -q -X '%s' -c \"\\\\copy bench_copy FROM '%s'\"",
             addr, addr, path);
    t0 = now();
    if (system(cmd)) DIE("psql \\copy failed");
    double t_copy = now() - t0;
    unlink(path);
    printf("load %llu records of %d bytes: packages of 1000 %.2f s (%.0f rec/s), psql \\copy "
           "%.2f s (%.0f rec/s), packages/copy time %.2f\n",
           (unsigned long long)n, PICKLE, t_pkg, (double)n / t_pkg, t_copy, (double)n / t_copy,
           t_pkg / t_copy);

    /* 2. get against get_many */
    uint64_t m = n < 20000 ? n : 20000, bytes = 0;
    CHECK(E->snap_begin(s, NULL), "snap_begin");
    t0 = now();
    for (uint64_t i = 0; i < m; i++) {
        ost__recview r;
        CHECK(E->get(s, first + i, &r), "get");
        bytes += r.len;
    }
    double t_get = now() - t0;
    E->snap_end(s);
    CHECK(E->snap_begin(s, NULL), "snap_begin");
    uint64_t ids[100];
    t0 = now();
    for (uint64_t i = 0; i < m; i += 100) {
        size_t k = 0;
        for (; k < 100 && i + k < m; k++) ids[k] = first + i + k;
        CHECK(E->get_many(s, ids, k, count_fn, &bytes), "get_many");
    }
    double t_many = now() - t0;
    E->snap_end(s);
    printf("read %llu records: get %.0f rec/s, get_many (100 a trip) %.0f rec/s, ratio %.1f\n",
           (unsigned long long)m, (double)m / t_get, (double)m / t_many, t_get / t_many);

    /* 3. commits: 1 thread against 16 */
    double c1 = commits(1, 1600), c16 = commits(16, 3200);
    printf("commits of one record: 1 thread %.0f/s, 16 threads %.0f/s, ratio %.2f\n", c1, c16,
           c16 / c1);
    ost__pkg_free(p);
    E->sess_close(s);
    E->close(eng);
    ost_store_close(st);
    return 0;
}
