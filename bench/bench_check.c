/* The library's check alone, to set beside `ostore check` (issue 33):
 *
 *   <builddir>/bench/bench_check STORE [RUNS]
 *
 * STORE is an LMDB store's directory or a PostgreSQL address. Opens it
 * read-only once, then times RUNS (default 3) calls of ost_store_check
 * and of ost_store_check_ex with OST_CHECK_REACH | OST_CHECK_COUNTERS
 * (what `ostore check` calls), alternating, and prints each run's wall
 * seconds with the records read and, for the second, the objects the root
 * reaches. The figures are in docs/benchmarks.md ("`ostore check` against
 * `ost_store_check`"). No peer: the CLI's time is the other column. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <ostore.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void count_problem(void *ud, uint64_t oid, uint64_t missing, int err, const char *msg) {
    (void)oid, (void)missing, (void)err, (void)msg;
    (*(uint64_t *)ud)++;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: bench_check STORE [RUNS]\n");
        return 2;
    }
    int runs = argc == 3 ? atoi(argv[2]) : 3;
    ost_store *st = ost_store_new();
    ost_store_options o;
    ost_store_options_init(&o);
    o.read_only = true;
    double t0 = now();
    if (!st || ost_store_open(st, argv[1], &o)) {
        fprintf(stderr, "bench_check: %s\n", st ? ost_store_errmsg(st) : "out of memory");
        ost_store_close(st);
        return 1;
    }
    printf("open: %.3f s\n", now() - t0);
    for (int i = 1; i <= runs; i++) {
        uint64_t problems = 0, records = 0;
        t0 = now();
        int rc = ost_store_check(st, count_problem, &problems, &records);
        double t1 = now();
        ost_check_stats cs;
        int rc2 = ost_store_check_ex(st, OST_CHECK_REACH | OST_CHECK_COUNTERS, count_problem,
                                     &problems, &cs);
        double t2 = now();
        printf("run %d: ost_store_check %.3f s (%llu records, %s); with reach and counters "
               "%.3f s (%llu reachable, %s)\n",
               i, t1 - t0, (unsigned long long)records, ost_err_name(rc), t2 - t1,
               (unsigned long long)cs.reachable, ost_err_name(rc2));
        if ((rc && rc != OST_ECORRUPT) || (rc2 && rc2 != OST_ECORRUPT)) {
            fprintf(stderr, "bench_check: %s\n", ost_store_errmsg(st));
            ost_store_close(st);
            return 1;
        }
    }
    ost_store_close(st);
    return 0;
}
