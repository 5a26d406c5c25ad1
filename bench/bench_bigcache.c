/* One-object commits on a connection whose cache holds many objects
 * (docs/benchmarks.md, "A commit's cost with a big cache"):
 *
 *   build/bench/bench_bigcache DIR [CACHED]
 *
 * On an LMDB store in DIR (made fresh; OST_SYNC_NONE, so that the figure
 * is the CPU a commit costs, not a sync), a list of CACHED persistent
 * objects (default 90,000, under the default cache size of 100,000) is
 * committed and stays cached; then 5,000 commits each change one of them.
 * The same is done with 100 cached objects, and the report gives both
 * costs and their ratio: a commit's work should not grow with the
 * objects the cache holds. */
#define _POSIX_C_SOURCE 200809L
#define BENCH_NAME "bench_bigcache"
#include "benchlib.h"

/* Microseconds a one-object commit costs with n objects cached. */
static double commit_us(const char *dir, ost_registry *reg, ost_value cls, int n) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) DIE("cannot remove %s", dir);
    ost_store_options o;
    ost_store_options_init(&o);
    o.create = true;
    o.registry = reg;
    o.durability = OST_SYNC_NONE;
    o.map_size = (size_t)1 << 30;
    ost_store *st = ost_store_new();
    if (!st || ost_store_open(st, dir, &o)) DIE("open: %s", st ? ost_store_errmsg(st) : "no memory");
    ost_conn *c;
    if (ost_conn_open(st, &c)) DIE("conn");
    ost_value l = ost_list_new(0);
    for (int i = 0; i < n; i++) {
        ost_value it = ost_instance_new(ost_incref(cls));
        ost_instance_setattr(it, "v", ost_int(i));
        if (ost_list_append(l, it)) DIE("out of memory");
    }
    if (ost_root_set_c(c, "items", l) || ost_commit(c)) DIE("commit: %s", ost_conn_errmsg(c));
    ost_value first = ost_item(ost_root_get_c(c, "items"), 0);
    enum { COMMITS = 5000 };
    double t0 = now();
    for (int i = 0; i < COMMITS; i++) {
        ost_instance_setattr(first, "v", ost_int(i));
        if (ost_commit(c)) DIE("commit: %s", ost_conn_errmsg(c));
    }
    double us = (now() - t0) / COMMITS * 1e6;
    size_t active;
    size_t cached = ost_conn_cache_count(c, &active);
    if (cached < (size_t)n) DIE("only %zu objects cached", cached);
    ost_conn_close(c);
    ost_store_close(st);
    return us;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) DIE("usage: bench_bigcache DIR [CACHED]");
    int n = argc == 3 ? atoi(argv[2]) : 90000;
    if (n < 100) DIE("CACHED takes at least 100");
    static const char *fields[] = {"v"};
    ost_class_def def = {.module = "bench", .name = "Item", .fields = fields, .nfields = 1,
                         .persistent = true};
    ost_registry *reg = ost_registry_new();
    ost_value cls;
    if (!reg || ost_registry_add(reg, &def, &cls)) DIE("registry");
    double small = commit_us(argv[1], reg, cls, 100);
    double big = commit_us(argv[1], reg, cls, n);
    printf("one-object commit, OST_SYNC_NONE: %.1f us with 100 objects cached, %.1f us with %d "
           "(x%.2f)\n",
           small, big, n, big / small);
    ost_registry_free(reg);
    return 0;
}
