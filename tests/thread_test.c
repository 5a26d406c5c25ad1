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
 * after it. Usage: thread_test [DIR]; exits 0 when every check held. */
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
    g_st = ost_store_new();
    if (!g_st || ost_store_open(g_st, dir, &o)) {
        fprintf(stderr, "thread_test: open %s: %s\n", dir, ost_store_errmsg(g_st));
        return 1;
    }
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(intptr_t)i);
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    ost_conn *c;
    int64_t n = -1;
    if (ost_conn_open(g_st, &c) == 0) {
        ost_int_value(ost_root_get_c(c, "counter"), &n);
        ost_conn_close(c);
    }
    if (n != THREADS * ROUNDS) {
        char m[64];
        snprintf(m, sizeof m, "%lld, not %d", (long long)n, THREADS * ROUNDS);
        bad("counter", m);
    }
    ost_store_close(g_st);
    for (int i = 0; i < THREADS; i++) ost_conn_close(g_conns[i]); /* after the store: allowed */
    if (argc == 1) {
        *strrchr(dir, '/') = 0;
        rmtree(dir);
    }
    printf("thread_test: %d threads x %d commits, %s\n", THREADS, ROUNDS,
           g_bad ? "FAILED" : "ok");
    return g_bad ? 1 : 0;
}
