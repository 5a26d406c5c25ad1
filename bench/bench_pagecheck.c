/* The page walker's speed (store/lmdb/pagecheck.c), and a look at what it finds.
 *
 *     bench_pagecheck DIR [REPEAT]
 *
 * Opens DIR/data.mdb, prints the meta check, the first 20 problems of a
 * walk and how long that first walk took (it faults the mapping in; the
 * file's pages come from the page cache if they are there), the walk's
 * counts per database (walked / recorded, comparable with `mdb_stat -a -e
 * DIR`), then times REPEAT more walks (default 5: the best is printed),
 * one pass of each over every database and one scan: milliseconds, MB/s
 * and milliseconds per 100 MB of file. Exits 1 when the walk found a
 * problem. */
#define BENCH_NAME "bench_pagecheck"
#include "benchlib.h"
#include "lmdb/pagecheck.h"

static int nprob;

static void show(void *ud, const ost__pc_problem *p) {
    (void)ud;
    if (nprob++ < 20) printf("  problem: [%s] %s\n", p->db ? p->db : "-", p->msg);
}

static int count(void *ud, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl,
                 uint64_t pgno) {
    (void)k, (void)kl, (void)v, (void)pgno;
    uint64_t *n = ud;
    n[0]++;
    n[1] += vl;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) DIE("usage: bench_pagecheck DIR [REPEAT]");
    int repeat = argc > 2 ? atoi(argv[2]) : 5;
    if (repeat < 1) repeat = 1;
    char msg[512];
    ost__pc *pc;
    double t0 = now();
    int rc = ost__pc_open(argv[1], &pc, msg, sizeof msg);
    if (rc) DIE("open: %s: %s", ost_err_name(rc), msg);
    rc = ost__pc_meta_check(pc, msg, sizeof msg);
    double t1 = now();
    printf("meta check: %s%s%s (open + check %.3f ms)\n", rc ? ost_err_name(rc) : "sane",
           rc ? ": " : "", rc ? msg : "", (t1 - t0) * 1e3);

    ost__pc_stats st;
    t0 = now();
    rc = ost__pc_walk(pc, show, NULL, &st);
    t1 = now();
    printf("walk: %s, %d problems (the first walk, faulting the mapping in: %.1f ms)\n",
           rc ? ost_err_name(rc) : "clean", nprob, (t1 - t0) * 1e3);
    double mb = (double)st.pages * st.psize / 1e6;
    printf("file: %llu pages of %u bytes (%.1f MB), last page %llu, txnid %llu\n",
           (unsigned long long)st.pages, st.psize, mb, (unsigned long long)st.last_pg,
           (unsigned long long)st.txnid);
    printf("walked: %llu branch, %llu leaf, %llu overflow pages, %llu free; %llu entries\n",
           (unsigned long long)st.branch, (unsigned long long)st.leaf,
           (unsigned long long)st.overflow, (unsigned long long)st.free,
           (unsigned long long)st.entries);
    ost__pc_dbstat d;
    for (size_t i = 0; ost__pc_db(pc, i, &d) == 0; i++)
        printf("  %-10s depth %llu: branch %llu/%llu leaf %llu/%llu overflow %llu/%llu "
               "entries %llu/%llu\n",
               d.name, (unsigned long long)d.depth, (unsigned long long)d.branch,
               (unsigned long long)d.rec_branch, (unsigned long long)d.leaf,
               (unsigned long long)d.rec_leaf, (unsigned long long)d.overflow,
               (unsigned long long)d.rec_overflow, (unsigned long long)d.entries,
               (unsigned long long)d.rec_entries);

    double best = 1e30;
    for (int i = 0; i < repeat; i++) {
        double a = now();
        ost__pc_walk(pc, NULL, NULL, NULL);
        double b = now() - a;
        if (b < best) best = b;
    }
    printf("walk: best of %d %.1f ms, %.0f MB/s, %.1f ms per 100 MB\n", repeat, best * 1e3,
           mb / best, best * 1e3 * 100 / mb);

    double a = now();
    uint64_t n[2] = {0, 0};
    for (size_t i = 2; ost__pc_db(pc, i, &d) == 0; i++) {
        char name[256];
        snprintf(name, sizeof name, "%s", d.name);
        ost__pc_each(pc, name, count, NULL, n);
    }
    double b = now() - a;
    printf("each over every named database: %llu entries, %llu value bytes, %.1f ms\n",
           (unsigned long long)n[0], (unsigned long long)n[1], b * 1e3);

    a = now();
    n[0] = n[1] = 0;
    ost__pc_scan(pc, count, n);
    b = now() - a;
    printf("scan: %llu entries in sane leaf pages, %.1f ms, %.1f ms per 100 MB\n",
           (unsigned long long)n[0], b * 1e3, b * 1e3 * 100 / mb);
    ost__pc_close(pc);
    return nprob ? 1 : 0;
}
