/* The hot-counter benchmark (issue 33): T threads, each running
 * transactions through ost_txn_run(c, 10, ...) with group commit for SECS
 * seconds. A transaction sets a field of one issue (drawn at random from
 * 10,000, as a bug tracker updates an issue) and, but in mode "none",
 * adds 1 to one statistics object shared by every thread:
 *
 *   none     no shared object: the workload's own rate
 *   field    the statistics object's int field += 1 (every two
 *            transactions that overlap conflict on it and retry)
 *   counter  ost_counter_add on one ostore.maps.Counter (adds merge)
 *   resolver the field += 1, on a class whose conflict resolver
 *            (ost_class_def.resolve) adds both sides' increments
 *
 *   bench_hot DIR|postgresql://... T SECS MODE [--durable]
 *
 * prints one JSON object: commits, commits/s, failed transactions (gave up
 * after 10 attempts), retries, and the shared value against the commits
 * (exact: it must equal them). DIR must not exist (it is made and left
 * for the caller to delete); a database address must hold no store.
 * Without --durable, commits are not synced (OST_SYNC_NONE): the figure is
 * the store's, not the disk's. The report, with the ratios against "none"
 * measured in the same run: bench/bench_hot.py. */
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#define BENCH_NAME "bench_hot"
#include "benchlib.h"
#include "ostore.h"

enum { ISSUES = 10000, ATTEMPTS = 10, MAX_THREADS = 64 };
enum { MODE_NONE, MODE_FIELD, MODE_COUNTER, MODE_RESOLVER };

static ost_registry *g_reg;
static ost_value g_issue, g_stats;
static int g_mode;
static double g_end;

typedef struct {
    ost_store *st;
    uint64_t rng;
    uint64_t commits, failed, retries;
    char msg[256];
} worker;

static uint64_t next_rand(uint64_t *s) {
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

/* Stats's resolver in mode "resolver": both sides' increments count. */
static int hits_resolve(void *ud, ost_value old, ost_value committed, ost_value mine) {
    (void)ud;
    int64_t o, c, m;
    if (ost_instance_get_int(old, "hits", &o) || ost_instance_get_int(committed, "hits", &c) ||
        ost_instance_get_int(mine, "hits", &m))
        return 1;
    return ost_instance_setattr(mine, "hits", ost_int(c + (m - o)));
}

/* One attempt: issues[i].updates += 1, and the shared statistics. */
static int txn(void *ud, ost_conn *c) {
    worker *w = ud;
    ost_value issues = ost_root_get_c(c, "issues");
    ost_value stats = ost_root_get_c(c, "stats");
    if (!issues || !stats) return OST_ENOTFOUND;
    ost_value key = ost_int((int64_t)(next_rand(&w->rng) % ISSUES)), it;
    int rc = ost_map_get(c, issues, key, &it);
    ost_decref(key);
    if (rc) return rc;
    if ((rc = ost_activate(c, it))) return rc;
    int64_t n = 0;
    ost_int_value(ost_instance_getattr(it, "updates"), &n);
    if ((rc = ost_instance_setattr(it, "updates", ost_int(n + 1)))) return rc;
    if (g_mode == MODE_COUNTER) return ost_counter_add(c, stats, 1);
    if (g_mode == MODE_FIELD || g_mode == MODE_RESOLVER) {
        if ((rc = ost_activate(c, stats))) return rc;
        int64_t h = 0;
        ost_int_value(ost_instance_getattr(stats, "hits"), &h);
        return ost_instance_setattr(stats, "hits", ost_int(h + 1));
    }
    return 0;
}

static void run(void *arg) {
    worker *w = arg;
    ost_conn *c;
    if (ost_conn_open(w->st, &c)) DIE("conn_open: %s", ost_store_errmsg(w->st));
    while (now() < g_end) {
        unsigned tried = 0;
        int rc = ost_txn_run(c, ATTEMPTS, txn, w, &tried);
        w->retries += tried ? tried - 1 : 0;
        if (rc == OST_ECONFLICT) {
            w->failed++;
            snprintf(w->msg, sizeof w->msg, "%s", ost_conn_errmsg(c));
        } else if (rc) {
            DIE("transaction: %s: %s", ost_err_name(rc), ost_conn_errmsg(c));
        } else {
            w->commits++;
        }
    }
    ost_conn_close(c);
}

static void setup(ost_store *st) {
    ost_conn *c;
    CHECK(ost_conn_open(st, &c), "conn_open");
    ost_value issues;
    CHECK(ost_map_new(c, "int", &issues), "map_new");
    CHECK(ost_root_set_c(c, "issues", ost_incref(issues)), "root_set");
    for (int64_t i = 0; i < ISSUES; i++) {
        ost_value it = ost_instance_new(ost_incref(g_issue));
        if (!it) DIE("out of memory");
        CHECK(ost_instance_setattr(it, "number", ost_int(i)), "setattr");
        CHECK(ost_instance_setattr(it, "updates", ost_int(0)), "setattr");
        CHECK(ost_map_set(c, issues, ost_int(i), it), "map_set");
    }
    ost_value stats;
    if (g_mode == MODE_COUNTER) {
        CHECK(ost_counter_new(c, 0, &stats), "counter_new");
        stats = ost_incref(stats);
    } else {
        stats = ost_instance_new(ost_incref(g_stats));
        if (!stats) DIE("out of memory");
        CHECK(ost_instance_setattr(stats, "hits", ost_int(0)), "setattr");
    }
    CHECK(ost_root_set_c(c, "stats", stats), "root_set");
    if (ost_commit(c)) DIE("commit: %s", ost_conn_errmsg(c));
    ost_conn_close(c);
}

/* The shared value after the run: the counter's, or the field's. */
static int64_t shared_value(ost_store *st) {
    ost_conn *c;
    CHECK(ost_conn_open(st, &c), "conn_open");
    ost_value stats = ost_root_get_c(c, "stats");
    int64_t v = 0;
    if (g_mode == MODE_COUNTER) CHECK(ost_counter_get(c, stats, &v), "counter_get");
    else if (g_mode == MODE_FIELD || g_mode == MODE_RESOLVER) {
        CHECK(ost_activate(c, stats), "activate");
        ost_int_value(ost_instance_getattr(stats, "hits"), &v);
    }
    ost_conn_close(c);
    return v;
}

int main(int argc, char **argv) {
    if (argc < 5)
        DIE("usage: bench_hot DIR|postgresql://... THREADS SECONDS none|field|counter|resolver [--durable]");
    int threads = atoi(argv[2]);
    double secs = atof(argv[3]);
    if (threads < 1 || threads > MAX_THREADS || secs <= 0) DIE("bad THREADS or SECONDS");
    if (!strcmp(argv[4], "none")) g_mode = MODE_NONE;
    else if (!strcmp(argv[4], "field")) g_mode = MODE_FIELD;
    else if (!strcmp(argv[4], "counter")) g_mode = MODE_COUNTER;
    else if (!strcmp(argv[4], "resolver")) g_mode = MODE_RESOLVER;
    else DIE("MODE is none, field, counter or resolver, not '%s'", argv[4]);
    bool durable = argc > 5 && !strcmp(argv[5], "--durable");

    g_reg = ost_registry_new();
    ost_class_def issue = {.module = "bench", .name = "Issue", .persistent = true};
    ost_class_def stats = {.module = "bench", .name = "Stats", .persistent = true,
                           .resolve = g_mode == MODE_RESOLVER ? hits_resolve : NULL};
    if (!g_reg || ost_registry_add(g_reg, &issue, &g_issue) ||
        ost_registry_add(g_reg, &stats, &g_stats))
        DIE("registry");
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = g_reg;
    o.group_commit = true;
    o.durability = durable ? OST_SYNC_FULL : OST_SYNC_NONE;
    ost_store *st = ost_store_new();
    if (!st || ost_store_open(st, argv[1], &o)) DIE("open: %s", ost_store_errmsg(st));
    setup(st);

    worker w[MAX_THREADS];
    uv_thread_t th[MAX_THREADS];
    double t0 = now();
    g_end = t0 + secs;
    for (int i = 0; i < threads; i++) {
        w[i] = (worker){.st = st, .rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(i + 1)};
        if (uv_thread_create(&th[i], run, &w[i])) DIE("thread");
    }
    uint64_t commits = 0, failed = 0, retries = 0;
    const char *last = "";
    for (int i = 0; i < threads; i++) {
        uv_thread_join(&th[i]);
        commits += w[i].commits;
        failed += w[i].failed;
        retries += w[i].retries;
        if (w[i].msg[0]) last = w[i].msg;
    }
    double wall = now() - t0;
    int64_t shared = shared_value(st);
    bool exact = g_mode == MODE_NONE || shared == (int64_t)commits;
    printf("{\"mode\": \"%s\", \"threads\": %d, \"seconds\": %.3f, \"commits\": %" PRIu64
           ", \"commits_per_s\": %.1f, \"failed\": %" PRIu64 ", \"retries\": %" PRIu64
           ", \"shared\": %" PRId64 ", \"exact\": %s, \"durable\": %s}\n",
           argv[4], threads, wall, commits, (double)commits / wall, failed, retries, shared,
           exact ? "true" : "false", durable ? "true" : "false");
    if (failed) fprintf(stderr, "bench_hot: the last failure: %s\n", last);
    ost_store_close(st);
    ost_registry_free(g_reg);
    return exact ? 0 : 1;
}
