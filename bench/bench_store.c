/* The store benchmark, C side: one command per measurement, each printing
 * one JSON object on stdout. bench/bench_store.py runs them and prints the
 * report; run this directly only to look at one figure.
 *
 *   bench_store load DIR N        (a) N new small instances through the bulk
 *                                     loader, then raw LMDB MDB_APPEND puts of
 *                                     the same records in batches of the same
 *                                     size, both with durable commits
 *   bench_store events DIR N      (b) N small events, one commit each versus
 *                                     batched through the loader
 *   bench_store group DIR T SECS GC
 *                                 (c) T threads doing one-object durable
 *                                     transactions for SECS seconds, with
 *                                     group_commit (GC 1) or without (GC 0)
 *   bench_store reads DIR N R     (d) R random reads by oid from a warm store
 *                                     of N small objects, raw LMDB gets of the
 *                                     same keys, and the memory of N active
 *                                     objects in a connection's cache
 *
 * A "small instance" is bench.Item with four fields: n (an int), name (a
 * short str), x (a float) and ref (a reference to the previous object).
 * DIR must not exist; the command creates it and leaves it for the caller to
 * delete. */
#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BENCH_NAME "bench_store"
#include "benchlib.h"
#include "ostore.h"
#include "../store/lmdb/engine.h"
#include "../store/store_internal.h"



/* CPU time of the calling thread. */
static double thread_cpu(void) { return clock_seconds(CLOCK_THREAD_CPUTIME_ID); }

/* ---- classes ---------------------------------------------------------------- */

static const char *item_fields[] = {"n", "name", "x", "ref"};
static const char *counter_fields[] = {"value"};

static ost_registry *g_reg;
static ost_value g_item, g_event, g_chunk, g_counter;

static void classes(void) {
    g_reg = ost_registry_new();
    ost_class_def item = {.module = "bench", .name = "Item", .fields = item_fields, .nfields = 4,
                          .persistent = true};
    /* an event's state is the list [i, "ev<i>", i * 0.5] */
    ost_class_def event = {.module = "bench", .name = "Event", .persistent = true};
    /* a chunk's state is a list of up to 100 events */
    ost_class_def chunk = {.module = "bench", .name = "Chunk", .persistent = true};
    ost_class_def counter = {.module = "bench", .name = "Counter", .fields = counter_fields,
                             .nfields = 1, .persistent = true};
    if (!g_reg || ost_registry_add(g_reg, &item, &g_item) ||
        ost_registry_add(g_reg, &event, &g_event) || ost_registry_add(g_reg, &chunk, &g_chunk) ||
        ost_registry_add(g_reg, &counter, &g_counter))
        DIE("registry");
}

static ost_store *open_store(const char *dir, bool create, bool group_commit,
                             ost_durability dur) {
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = create;
    o.registry = g_reg;
    o.group_commit = group_commit;
    o.durability = dur;
    ost_store *st = ost_store_new();
    if (!st) DIE("out of memory");
    int rc = ost_store_open(st, dir, &o);
    if (rc) DIE("open %s: %s", dir, ost_store_errmsg(st));
    return st;
}

static ost_conn *conn_of(ost_store *st) {
    ost_conn *c;
    CHECK(ost_conn_open(st, &c), "conn_open");
    return c;
}

/* prefix followed by the decimal digits of i >= 0 (snprintf would cost
 * more than storing the object); returns the length. */
static int name_of(char *out, const char *prefix, int64_t i) {
    int n = (int)strlen(prefix);
    memcpy(out, prefix, (size_t)n);
    char d[24];
    int k = 0;
    uint64_t u = (uint64_t)i;
    do d[k++] = (char)('0' + u % 10);
    while (u /= 10);
    while (k) out[n++] = d[--k];
    out[n] = 0;
    return n;
}

static ost_value new_item(int64_t i, ost_value ref) {
    ost_value it = ost_instance_new(ost_incref(g_item));
    char name[32];
    int n = name_of(name, "item", i);
    if (!it || ost_instance_set_slot(it, 0, ost_int(i)) ||
        ost_instance_set_slot(it, 1, ost_str(name, (size_t)n)) ||
        ost_instance_set_slot(it, 2, ost_float((double)i * 0.5)) || ost_instance_set_slot(it, 3, ref))
        DIE("out of memory");
    return it;
}



/* A status line of /proc/self/status in bytes (VmRSS, RssAnon, ...). */
static uint64_t proc_status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    uint64_t v = 0;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v * 1024;
}

static uint64_t heap_bytes(void) {
    struct mallinfo2 mi = mallinfo2();
    return (uint64_t)mi.uordblks + (uint64_t)mi.hblkhd;
}

/* ======================================================================= */
/* (a) the bulk loader against raw LMDB appends                             */
/* ======================================================================= */

#define MILLION 1000000

static int raw_env_open(const char *dir, size_t map, unsigned flags, MDB_env **env) {
    int rc = mdb_env_create(env);
    if (!rc) rc = mdb_env_set_maxdbs(*env, 8);
    if (!rc && map) rc = mdb_env_set_mapsize(*env, map);
    if (!rc) rc = mdb_env_open(*env, dir, flags, 0644);
    return rc;
}

static void print_rates(const char *key, const double *marks, size_t nmarks, uint64_t n) {
    printf("\"%s\": [", key);
    for (size_t i = 1; i < nmarks; i++) {
        uint64_t cnt = (i * (uint64_t)MILLION <= n) ? MILLION : n - (i - 1) * (uint64_t)MILLION;
        printf("%s%.0f", i > 1 ? ", " : "", (double)cnt / (marks[i] - marks[i - 1]));
    }
    printf("]");
}

/* The loader's progress: when each million became durable, and the
 * committer's apply and commit time up to then. */
typedef struct {
    ost_store *st;
    double *at;
    uint64_t *apply, *commit;
    size_t next, n;
} load_marks;

static void on_progress(void *ud, uint64_t objects, uint64_t bytes) {
    (void)bytes;
    load_marks *m = ud;
    while (m->next < m->n && objects >= (m->next + 1) * (uint64_t)MILLION) {
        m->at[m->next + 1] = now();
        m->apply[m->next + 1] = m->st->gc_apply_ns;
        m->commit[m->next + 1] = m->st->gc_commit_ns;
        m->next++;
    }
}

static void cmd_load(const char *dir, uint64_t n) {
    ost_store *st = open_store(dir, true, false, OST_SYNC_FULL);
    ost_conn *c = conn_of(st);
    ost_loader_options lo;
    ost_loader_options_init(&lo); /* the defaults: batches of 100,000 */
    size_t batch = lo.batch_objects;
    size_t nmarks = (size_t)((n + MILLION - 1) / MILLION) + 1;
    double *marks = calloc(nmarks + 1, sizeof *marks);
    double *cpumarks = calloc(nmarks + 1, sizeof *cpumarks);
    load_marks dm = {.st = st, .at = calloc(nmarks + 1, sizeof(double)),
                     .apply = calloc(nmarks + 1, sizeof(uint64_t)),
                     .commit = calloc(nmarks + 1, sizeof(uint64_t)), .n = n / MILLION};
    lo.progress = on_progress;
    lo.ud = &dm;
    ost_loader *l;
    CHECK(ost_loader_open(c, &lo, &l), "loader_open");
    uint64_t io0 = io_write_bytes(), apply0 = st->gc_apply_ns, commit0 = st->gc_commit_ns;
    double t0 = now(), cpu0 = thread_cpu();
    marks[0] = t0;
    cpumarks[0] = cpu0;
    dm.at[0] = t0;
    dm.apply[0] = apply0;
    dm.commit[0] = commit0;
    ost_value prev = OST_NONE;
    for (uint64_t i = 0; i < n; i++) {
        ost_value it = new_item((int64_t)i, prev); /* steals prev */
        int rc = ost_loader_add(l, it, NULL);
        if (rc) DIE("loader_add %" PRIu64 ": %s", i, ost_loader_errmsg(l));
        /* what was added is serialized: dropping the reference to the
         * previous item frees it, so memory stays flat */
        ost_instance_set_slot(it, 3, OST_NONE);
        prev = it;
        if ((i + 1) % MILLION == 0) {
            marks[(i + 1) / MILLION] = now();
            cpumarks[(i + 1) / MILLION] = thread_cpu();
        }
    }
    ost_decref(prev);
    int rc = ost_loader_close(l);
    if (rc) DIE("loader_close: %s", ost_conn_errmsg(c));
    double t1 = now(), cpu1 = thread_cpu();
    marks[nmarks - 1] = t1; /* the last mark includes the final commit */
    uint64_t io1 = io_write_bytes();
    /* the committer thread's time: applying the batches, committing them */
    double capply = (double)(st->gc_apply_ns - apply0) / 1e9,
           ccommit = (double)(st->gc_commit_ns - commit0) / 1e9;
    ost_store_stats s;
    CHECK(ost_store_stat(st, &s), "stat");
    ost_store_close(st);
    if (s.records != n + 1) DIE("%" PRIu64 " records, expected %" PRIu64, s.records, n + 1);

    /* raw LMDB: the same record bytes, appended in batches of the same size,
     * one durable commit per batch; only the write transactions are timed */
    MDB_env *src, *dst;
    char rawdir[4096];
    snprintf(rawdir, sizeof rawdir, "%s/raw", dir);
    if (mkdir(rawdir, 0755)) DIE("mkdir %s: %s", rawdir, strerror(errno));
    if (raw_env_open(dir, 0, MDB_RDONLY, &src)) DIE("raw open %s", dir);
    if (raw_env_open(rawdir, (size_t)16 << 30, 0, &dst)) DIE("raw open %s", rawdir);
    MDB_txn *rt;
    MDB_dbi srecs, drecs;
    MDB_cursor *cur;
    if (mdb_txn_begin(src, NULL, MDB_RDONLY, &rt) || mdb_dbi_open(rt, "records", 0, &srecs) ||
        mdb_cursor_open(rt, srecs, &cur))
        DIE("raw read");
    {
        MDB_txn *t;
        if (mdb_txn_begin(dst, NULL, 0, &t) || mdb_dbi_open(t, "records", MDB_CREATE, &drecs) ||
            mdb_txn_commit(t))
            DIE("raw dbi");
    }
    size_t cap = 1 << 20, used;
    uint8_t *buf = malloc(cap);
    size_t *off = malloc(batch * sizeof *off), *len = malloc(batch * sizeof *len);
    uint64_t (*keys)[1] = malloc(batch * sizeof *keys);
    double *rmarks = calloc(nmarks + 1, sizeof *rmarks);
    double raw_time = 0, mark_time = 0;
    uint64_t copied = 0, raw_bytes = 0;
    MDB_val k, v;
    int crc = mdb_cursor_get(cur, &k, &v, MDB_FIRST);
    if (!crc && k.mv_size == 8 && ost__rd_be64(k.mv_data) == 0) /* the root */
        crc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
    uint64_t rio0 = io_write_bytes();
    while (copied < n) {
        size_t m = 0;
        used = 0;
        for (; m < batch && !crc; m++) {
            if (used + v.mv_size > cap) {
                while (used + v.mv_size > cap) cap *= 2;
                buf = realloc(buf, cap);
            }
            memcpy(buf + used, v.mv_data, v.mv_size);
            memcpy(keys[m], k.mv_data, 8);
            off[m] = used;
            len[m] = v.mv_size;
            used += v.mv_size;
            crc = mdb_cursor_get(cur, &k, &v, MDB_NEXT);
        }
        if (!m) DIE("raw: the source ended after %" PRIu64 " records", copied);
        double a = now();
        MDB_txn *t;
        if (mdb_txn_begin(dst, NULL, 0, &t)) DIE("raw txn");
        for (size_t j = 0; j < m; j++) {
            MDB_val kk = {8, keys[j]}, vv = {len[j], buf + off[j]};
            int prc = mdb_put(t, drecs, &kk, &vv, MDB_APPEND);
            if (prc) DIE("raw put: %s", mdb_strerror(prc));
            raw_bytes += len[j];
        }
        if (mdb_txn_commit(t)) DIE("raw commit");
        raw_time += now() - a;
        uint64_t before = copied;
        copied += m;
        if (copied / MILLION != before / MILLION || copied == n) {
            mark_time = raw_time;
            rmarks[(copied + MILLION - 1) / MILLION] = mark_time;
        }
    }
    uint64_t rio1 = io_write_bytes();
    mdb_cursor_close(cur);
    mdb_txn_abort(rt);
    mdb_env_close(src);
    mdb_env_close(dst);

    printf("{\"objects\": %" PRIu64 ", \"batch\": %zu, \"seconds\": %.4f, \"caller_cpu\": %.4f, "
           "\"committer_apply\": %.4f, \"committer_commit\": %.4f, ",
           n, batch, t1 - t0, cpu1 - cpu0, capply, ccommit);
    print_rates("per_million", marks, nmarks, n);
    printf(", \"record_bytes\": %" PRIu64 ", \"map_size\": %" PRIu64 ", \"io_bytes\": %" PRIu64
           ", \"raw_seconds\": %.4f, \"raw_bytes\": %" PRIu64 ", \"raw_io_bytes\": %" PRIu64 ", ",
           s.bytes, s.map_size, io1 - io0, raw_time, raw_bytes, rio1 - rio0);
    print_rates("raw_per_million", rmarks, nmarks, n);
    /* when each whole million was durable (the progress callback), and the
     * committer's ms per million: the add-time marks above count 9 batch
     * commits in the first million and 11 in the last when the committer
     * is the bottleneck (the first batches of a million are still being
     * written when it is added; the last million waits for the final
     * commits) */
    printf(", ");
    print_rates("durable_per_million", dm.at, dm.next + 1, dm.next * (uint64_t)MILLION);
    printf(", \"committer_ms_per_million\": [");
    for (size_t i = 1; i <= dm.next; i++)
        printf("%s[%.1f, %.1f]", i > 1 ? ", " : "", (double)(dm.apply[i] - dm.apply[i - 1]) / 1e6,
               (double)(dm.commit[i] - dm.commit[i - 1]) / 1e6);
    printf("], \"caller_cpu_ms_per_million\": [");
    for (size_t i = 1; i * MILLION <= n; i++)
        printf("%s%.1f", i > 1 ? ", " : "", (cpumarks[i] - cpumarks[i - 1]) * 1e3);
    printf("]}\n");
    free(cpumarks);
    free(dm.at);
    free(dm.apply);
    free(dm.commit);
    free(buf);
    free(off);
    free(len);
    free(keys);
    free(marks);
    free(rmarks);
}

/* ======================================================================= */
/* (b) small events: one commit each, or batched                            */
/* ======================================================================= */

enum { CHUNK = 100 };

static ost_value new_event(int64_t i) {
    ost_value ev = ost_instance_new(ost_incref(g_event));
    ost_value l = ost_list_new(3);
    char name[32];
    int n = name_of(name, "ev", i);
    if (!ev || !l || ost_list_append(l, ost_int(i)) || ost_list_append(l, ost_str(name, (size_t)n)) ||
        ost_list_append(l, ost_float((double)i * 0.5)) || ost_instance_set_state(ev, l))
        DIE("out of memory");
    return ev;
}

/* Both layouts are the same: root['chunks'] is a list of Chunks, each
 * holding up to CHUNK events, as a B-tree's buckets would. */
static void events_one_commit_each(const char *dir, uint64_t n, ost_durability dur,
                                   double *secs, ost_store_stats *s, uint64_t *io) {
    ost_store *st = open_store(dir, true, false, dur);
    ost_conn *c = conn_of(st);
    ost_value chunks = ost_list_new(0);
    CHECK(ost_root_set(c, ost_str_c("chunks"), ost_incref(chunks)), "root_set");
    CHECK(ost_commit(c), "commit");
    ost_value chunk = 0;
    uint64_t io0 = io_write_bytes();
    double t0 = now();
    for (uint64_t i = 0; i < n; i++) {
        if (i % CHUNK == 0) {
            chunk = ost_instance_new(ost_incref(g_chunk));
            ost_instance_set_state(chunk, ost_list_new(CHUNK));
            CHECK(ost_list_append(chunks, chunk), "append");
            ost_changed(ost_conn_root(c));
        }
        CHECK(ost_list_append(ost_instance_state(chunk), new_event((int64_t)i)), "append");
        ost_changed(chunk);
        int rc = ost_commit(c);
        if (rc) DIE("commit %" PRIu64 ": %s", i, ost_conn_errmsg(c));
    }
    *secs = now() - t0;
    *io = io_write_bytes() - io0;
    ost_decref(chunks);
    CHECK(ost_store_stat(st, s), "stat");
    ost_store_close(st);
}

static void events_loader(const char *dir, uint64_t n, double *secs, ost_store_stats *s,
                          uint64_t *io) {
    ost_store *st = open_store(dir, true, false, OST_SYNC_FULL);
    ost_conn *c = conn_of(st);
    ost_value chunks = ost_list_new(0);
    uint64_t io0 = io_write_bytes();
    double t0 = now();
    ost_loader *l;
    CHECK(ost_loader_open(c, NULL, &l), "loader_open");
    for (uint64_t i = 0; i < n; i += CHUNK) {
        ost_value chunk = ost_instance_new(ost_incref(g_chunk));
        ost_value evs = ost_list_new(CHUNK);
        for (uint64_t j = i; j < i + CHUNK && j < n; j++) ost_list_append(evs, new_event((int64_t)j));
        ost_instance_set_state(chunk, evs);
        int rc = ost_loader_add(l, chunk, NULL); /* the events are new objects it reaches */
        if (rc) DIE("loader_add: %s", ost_loader_errmsg(l));
        CHECK(ost_list_append(chunks, chunk), "append");
    }
    int rc = ost_loader_close(l);
    if (rc) DIE("loader_close: %s", ost_conn_errmsg(c));
    CHECK(ost_root_set(c, ost_str_c("chunks"), chunks), "root_set");
    CHECK(ost_commit(c), "commit");
    *secs = now() - t0;
    *io = io_write_bytes() - io0;
    CHECK(ost_store_stat(st, s), "stat");
    ost_store_close(st);
}

static void cmd_events(const char *dir, uint64_t n) {
    char d1[4096], d2[4096], d3[4096];
    snprintf(d1, sizeof d1, "%s/each", dir);
    snprintf(d2, sizeof d2, "%s/each-nosync", dir);
    snprintf(d3, sizeof d3, "%s/loader", dir);
    if (mkdir(dir, 0755)) DIE("mkdir %s: %s", dir, strerror(errno));
    double s1, s2, s3;
    ost_store_stats a, b, l;
    uint64_t io1, io2, io3;
    events_one_commit_each(d1, n, OST_SYNC_FULL, &s1, &a, &io1);
    events_one_commit_each(d2, n, OST_SYNC_NONE, &s2, &b, &io2);
    events_loader(d3, n, &s3, &l, &io3);
    printf("{\"events\": %" PRIu64 ", \"chunk\": %d", n, CHUNK);
    struct {
        const char *name, *d;
        double s;
        ost_store_stats *st;
        uint64_t io;
    } rows[] = {{"each", d1, s1, &a, io1}, {"each_nosync", d2, s2, &b, io2}, {"loader", d3, s3, &l, io3}};
    for (int i = 0; i < 3; i++)
        printf(", \"%s\": {\"seconds\": %.4f, \"records\": %" PRIu64 ", \"record_bytes\": %" PRIu64
               ", \"file_bytes\": %" PRIu64 ", \"io_bytes\": %" PRIu64 "}",
               rows[i].name, rows[i].s, rows[i].st->records, rows[i].st->bytes,
               dir_file_size(rows[i].d, "data.mdb"), rows[i].io);
    printf("}\n");
}

/* ======================================================================= */
/* (c) group commit                                                         */
/* ======================================================================= */

static atomic_bool g_stop;

typedef struct {
    ost_store *st;
    uint64_t oid;
    uv_barrier_t *start;
    uint64_t commits;
    int err;
} gc_arg;

static void gc_thread(void *arg) {
    gc_arg *a = arg;
    ost_conn *c;
    ost_value ctr = 0;
    int rc = ost_conn_open(a->st, &c);
    if (!rc) rc = ost_conn_get(c, a->oid, &ctr);
    if (!rc) rc = ost_activate(c, ctr);
    uv_barrier_wait(a->start);
    int64_t v = 0;
    while (!rc && !atomic_load_explicit(&g_stop, memory_order_relaxed)) {
        ost_instance_set_slot(ctr, 0, ost_int(++v));
        rc = ost_commit(c);
        if (!rc) a->commits++;
    }
    a->err = rc;
    ost_conn_close(c);
}

static void cmd_group(const char *dir, int nthreads, double secs, bool gc) {
    ost_store *st = open_store(dir, true, gc, OST_SYNC_FULL);
    ost_conn *c = conn_of(st);
    uint64_t *oids = calloc((size_t)nthreads, sizeof *oids);
    ost_value *ctrs = calloc((size_t)nthreads, sizeof *ctrs);
    for (int i = 0; i < nthreads; i++) {
        ctrs[i] = ost_instance_new(ost_incref(g_counter));
        ost_instance_set_slot(ctrs[i], 0, ost_int(0));
        char key[16];
        snprintf(key, sizeof key, "c%d", i);
        CHECK(ost_root_set(c, ost_str_c(key), ost_incref(ctrs[i])), "root_set");
    }
    CHECK(ost_commit(c), "commit");
    for (int i = 0; i < nthreads; i++) {
        oids[i] = ost_oid(c, ctrs[i]);
        ost_decref(ctrs[i]);
    }
    ost_conn_close(c);
    uv_barrier_t start;
    uv_barrier_init(&start, (unsigned)nthreads + 1);
    atomic_store(&g_stop, false);
    gc_arg *args = calloc((size_t)nthreads, sizeof *args);
    uv_thread_t *th = calloc((size_t)nthreads, sizeof *th);
    for (int i = 0; i < nthreads; i++) {
        args[i] = (gc_arg){.st = st, .oid = oids[i], .start = &start};
        if (uv_thread_create(&th[i], gc_thread, &args[i])) DIE("thread");
    }
    uint64_t groups0 = st->gc_groups, idle0 = st->gc_idle_ns, gather0 = st->gc_gather_ns,
             apply0 = st->gc_apply_ns, commit0 = st->gc_commit_ns;
    uv_barrier_wait(&start);
    double t0 = now();
    while (now() - t0 < secs) usleep(10000);
    atomic_store(&g_stop, true);
    uint64_t total = 0;
    for (int i = 0; i < nthreads; i++) {
        uv_thread_join(&th[i]);
        if (args[i].err) DIE("thread %d: %s", i, ost_err_name(args[i].err));
        total += args[i].commits;
    }
    double t1 = now();
    uint64_t groups = st->gc_groups - groups0;
    /* the committer's time per group: idle, gathering, applying, committing */
    double g = groups ? (double)groups * 1e3 : 1;
    double idle = (double)(st->gc_idle_ns - idle0) / g;
    double gather = (double)(st->gc_gather_ns - gather0) / g;
    double apply = (double)(st->gc_apply_ns - apply0) / g;
    double commit = (double)(st->gc_commit_ns - commit0) / g;
    uv_barrier_destroy(&start);
    ost_store_close(st);
    printf("{\"threads\": %d, \"group_commit\": %s, \"seconds\": %.4f, \"commits\": %" PRIu64
           ", \"groups\": %" PRIu64 ", \"group_us\": {\"idle\": %.1f, \"gather\": %.1f, "
           "\"apply\": %.1f, \"commit\": %.1f}}\n",
           nthreads, gc ? "true" : "false", t1 - t0, total, groups, idle, gather, apply, commit);
    free(oids);
    free(ctrs);
    free(args);
    free(th);
}

/* ======================================================================= */
/* (d) random reads and the memory of active objects                        */
/* ======================================================================= */

static uint64_t rng_state = 0x9E3779B97F4A7C15ULL;
static uint64_t rng(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

enum { READ_TXN = 1000, READ_CACHE = 1000 };

/* The timed read loop (a function of its own, for profilers). */
static __attribute__((noinline)) uint64_t read_objects(ost_conn *c, const uint64_t *keys,
                                                       uint64_t r, uint64_t *decoded) {
    uint64_t sum = 0;
    for (uint64_t i = 0; i < r; i++) {
        ost_value o;
        int rc = ost_conn_get(c, keys[i], &o);
        if (rc) DIE("get %" PRIu64 ": %s", keys[i], ost_conn_errmsg(c));
        *decoded += ost_is_ghost(o);
        rc = ost_activate(c, o);
        if (rc) DIE("activate: %s", ost_conn_errmsg(c));
        sum += (uint64_t)ost__small_val(ost_instance_slot(o, 0));
        if ((i + 1) % READ_TXN == 0) ost_abort(c);
    }
    return sum;
}

static void cmd_reads(const char *dir, uint64_t n, uint64_t r) {
    ost_store *st = open_store(dir, true, false, OST_SYNC_FULL);
    ost_conn *c = conn_of(st);
    uint64_t *oids = malloc(n * sizeof *oids);
    {
        ost_loader *l;
        CHECK(ost_loader_open(c, NULL, &l), "loader_open");
        ost_value prev = OST_NONE;
        for (uint64_t i = 0; i < n; i++) {
            ost_value it = new_item((int64_t)i, prev);
            if (ost_loader_add(l, it, &oids[i])) DIE("loader_add: %s", ost_loader_errmsg(l));
            ost_instance_set_slot(it, 3, OST_NONE);
            prev = it;
        }
        ost_decref(prev);
        if (ost_loader_close(l)) DIE("loader_close: %s", ost_conn_errmsg(c));
    }
    ost_conn_close(c);
    uint64_t *keys = malloc(r * sizeof *keys);
    for (uint64_t i = 0; i < r; i++) keys[i] = oids[rng() % n];

    /* warm: every record once, through LMDB */
    MDB_txn *t;
    MDB_cursor *cur;
    MDB_val k, v;
    uint64_t sum = 0;
    if (mdb_txn_begin(st->eng->env, NULL, MDB_RDONLY, &t) || mdb_cursor_open(t, st->eng->recs, &cur))
        DIE("warm");
    while (mdb_cursor_get(cur, &k, &v, MDB_NEXT) == 0) sum += ((uint8_t *)v.mv_data)[v.mv_size - 1];
    mdb_cursor_close(cur);
    mdb_txn_abort(t);

    /* ostore: get and decode each, the cache kept small by a transaction
     * boundary every READ_TXN reads */
    c = conn_of(st);
    ost_conn_set_cache_size(c, READ_CACHE);
    uint64_t decoded = 0;
    double t0 = now(), c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    sum += read_objects(c, keys, r, &decoded);
    double t_ost = now() - t0, c_ost = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;
    ost_conn_close(c);

    /* raw LMDB: the same keys, a read transaction per READ_TXN gets */
    t0 = now();
    c0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    if (mdb_txn_begin(st->eng->env, NULL, MDB_RDONLY, &t)) DIE("raw txn");
    for (uint64_t i = 0; i < r; i++) {
        uint8_t kb[8];
        ost__be64(kb, keys[i]);
        MDB_val kk = {8, kb};
        if (mdb_get(t, st->eng->recs, &kk, &v)) DIE("raw get");
        sum += ((uint8_t *)v.mv_data)[v.mv_size - 2];
        if ((i + 1) % READ_TXN == 0) {
            mdb_txn_reset(t);
            if (mdb_txn_renew(t)) DIE("renew");
        }
    }
    mdb_txn_abort(t);
    double t_raw = now() - t0, c_raw = clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - c0;

    /* memory: n objects active in one connection's cache */
    c = conn_of(st);
    ost_conn_set_cache_size(c, n + 1);
    ost_alloc_stats a0, a1;
    malloc_trim(0);
    uint64_t rss0 = proc_status_kb("RssAnon"), heap0 = heap_bytes();
    ost_alloc_stats_get(&a0);
    for (uint64_t i = 0; i < n; i++) {
        ost_value o;
        if (ost_conn_get(c, oids[i], &o) || ost_activate(c, o)) DIE("get: %s", ost_conn_errmsg(c));
    }
    ost_alloc_stats_get(&a1);
    uint64_t rss1 = proc_status_kb("RssAnon"), heap1 = heap_bytes();
    size_t active = 0, cached = ost_conn_cache_count(c, &active);
    ost_conn_close(c);
    ost_store_close(st);
    printf("{\"cpu_seconds\": %.4f, \"raw_cpu_seconds\": %.4f, ", c_ost, c_raw);
    printf("\"objects\": %" PRIu64 ", \"reads\": %" PRIu64 ", \"seconds\": %.4f, \"decoded\": %" PRIu64
           ", \"raw_seconds\": %.4f, \"cached\": %zu, \"active\": %zu, \"rss_bytes\": %" PRIu64
           ", \"heap_bytes\": %" PRIu64 ", \"values\": %" PRIu64 ", \"checksum\": %" PRIu64 "}\n",
           n, r, t_ost, decoded, t_raw, cached, active, rss1 - rss0, heap1 - heap0,
           a1.live_objects - a0.live_objects, sum);
    free(keys);
    free(oids);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: bench_store load|events|group|reads DIR N ...\n");
        return 2;
    }
    classes();
    const char *cmd = argv[1], *dir = argv[2];
    uint64_t n = strtoull(argv[3], NULL, 10);
    if (strcmp(cmd, "load") == 0) cmd_load(dir, n);
    else if (strcmp(cmd, "events") == 0) cmd_events(dir, n);
    else if (strcmp(cmd, "group") == 0 && argc == 6)
        cmd_group(dir, (int)n, atof(argv[4]), atoi(argv[5]) != 0);
    else if (strcmp(cmd, "reads") == 0 && argc == 5) cmd_reads(dir, n, strtoull(argv[4], NULL, 10));
    else {
        fprintf(stderr, "bench_store: bad command\n");
        return 2;
    }
    ost_registry_free(g_reg);
    return 0;
}
