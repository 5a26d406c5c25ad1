/* Threads sharing one store, for ThreadSanitizer (scripts/tsan.sh runs it
 * in a -Db_sanitize=thread build; Criterion's worker processes do not run
 * under TSan, so this is a plain program, also run by every build).
 *
 * Four threads, each with its own connection on one store with group
 * commit, raise a shared counter under the root through ost_txn_run (real
 * conflicts, retried), and between commits make a store call fail with a
 * message naming the thread, checking that ost_store_errmsg shows their
 * own message (it is per thread). Then each thread leaves its connection
 * open, the main thread closes the store, and closes the connections
 * after it. Each thread also adds to a shared object whose class resolves
 * conflicts (ost_class_def.resolve): the resolver runs in the group
 * committer on the threads' packages, and no such transaction retries.
 * Usage: thread_test [DIR]; exits 0 when every check held. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ostore.h"
#include "rmtree.h"

#define THREADS 4
#define ROUNDS 50

static ost_store *g_st;
static ost_conn *g_conns[THREADS];
static int g_bad;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void bad(const char *what, const char *detail) {
    pthread_mutex_lock(&g_lock);
    g_bad++;
    fprintf(stderr, "thread_test: %s: %s\n", what, detail);
    pthread_mutex_unlock(&g_lock);
}

static int raise_counter(void *ud, ost_conn *c) {
    (void)ud;
    int64_t n = 0;
    ost_int_value(ost_root_get_c(c, "counter"), &n);
    return ost_root_set_c(c, "counter", ost_int(n + 1));
}

/* tt.Stats's resolver: the hits of both sides add up */
static int g_resolved; /* the resolver's calls */
static int stats_resolve(void *ud, ost_value old, ost_value committed, ost_value mine) {
    (void)ud;
    __atomic_add_fetch(&g_resolved, 1, __ATOMIC_RELAXED);
    int64_t o, c, m;
    if (ost_instance_get_int(old, "hits", &o) || ost_instance_get_int(committed, "hits", &c) ||
        ost_instance_get_int(mine, "hits", &m))
        return 1;
    return ost_instance_setattr(mine, "hits", ost_int(c + (m - o)));
}

static int add_hit(void *ud, ost_conn *c) {
    (void)ud;
    ost_value s = ost_root_get_c(c, "stats");
    int64_t n = 0;
    int rc = s ? ost_instance_get_int(s, "hits", &n) : OST_ENOTFOUND;
    return rc ? rc : ost_instance_setattr(s, "hits", ost_int(n + 1));
}

static void *worker(void *p) {
    int id = (int)(intptr_t)p;
    ost_conn *c;
    if (ost_conn_open(g_st, &c)) {
        bad("conn_open", ost_store_errmsg(g_st));
        return NULL;
    }
    char path[64], want[64];
    snprintf(path, sizeof path, "/nonexistent/thread-%d", id);
    snprintf(want, sizeof want, "thread-%d:", id);
    for (int i = 0; i < ROUNDS; i++) {
        unsigned tried;
        int rc = ost_txn_run(c, 1000, raise_counter, NULL, &tried);
        if (rc) bad("ost_txn_run", ost_conn_errmsg(c));
        rc = ost_txn_run(c, 1, add_hit, NULL, &tried);
        if (rc) bad("ost_txn_run with a resolver", ost_conn_errmsg(c));
        if (ost_store_open(g_st, path, NULL) != OST_EINVAL) bad("open", "not OST_EINVAL");
        if (!strstr(ost_store_errmsg(g_st), want)) bad(want, ost_store_errmsg(g_st));
    }
    g_conns[id] = c; /* left open: the store closes first */
    return NULL;
}

int main(int argc, char **argv) {
    char dir[128];
    if (argc > 1)
        snprintf(dir, sizeof dir, "%s", argv[1]);
    else {
        char tmpl[] = "/tmp/ostore-threads-XXXXXX";
        if (!mkdtemp(tmpl)) return 2;
        snprintf(dir, sizeof dir, "%s/db", tmpl);
    }
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.group_commit = true;
    o.durability = OST_SYNC_NONE;
    static const char *fields[] = {"hits"};
    ost_value Stats;
    o.registry = ost_registry_new();
    ost_class_def def = {.module = "tt", .name = "Stats", .fields = fields, .nfields = 1,
                         .persistent = true, .resolve = stats_resolve};
    if (!o.registry || ost_registry_add(o.registry, &def, &Stats)) return 1;
    g_st = ost_store_new();
    if (!g_st || ost_store_open(g_st, dir, &o)) {
        fprintf(stderr, "thread_test: open %s: %s\n", dir, ost_store_errmsg(g_st));
        return 1;
    }
    ost_conn *c0;
    if (ost_conn_open(g_st, &c0) ||
        ost_root_set_c(c0, "stats", ost_instance_of(ost_incref(Stats), 1, (ost_value[]){ost_int(0)})) ||
        ost_commit(c0)) {
        fprintf(stderr, "thread_test: the stats object: %s\n", ost_errmsg(c0));
        return 1;
    }
    ost_conn_close(c0);
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    ost_conn *c;
    int64_t n = -1;
    int64_t hits = -1;
    if (ost_conn_open(g_st, &c) == 0) {
        ost_int_value(ost_root_get_c(c, "counter"), &n);
        ost_instance_get_int(ost_root_get_c(c, "stats"), "hits", &hits);
        ost_conn_close(c);
    }
    if (n != THREADS * ROUNDS || hits != THREADS * ROUNDS) {
        char m[64];
        snprintf(m, sizeof m, "%lld and %lld, not %d", (long long)n, (long long)hits,
                 THREADS * ROUNDS);
        bad("counter and hits", m);
    }
    ost_store_close(g_st);
    ost_registry_free(o.registry);
    for (int i = 0; i < THREADS; i++) ost_conn_close(g_conns[i]); /* after the store: allowed */
    if (argc == 1) {
        *strrchr(dir, '/') = 0;
        rmtree(dir);
    }
    printf("thread_test: %d threads x %d commits, %d conflicts resolved, %s\n", THREADS, ROUNDS,
           g_resolved, g_bad ? "FAILED" : "ok");
    return g_bad ? 1 : 0;
}
