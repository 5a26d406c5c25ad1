/* The persistent_id benchmark, ostore's side: a graph of 1,000,000 heap
 * objects of which 1% are instances, dumped with no hook, with a hook in
 * scope "instances" and with a hook in scope "all". Prints one line per
 * case: name, median seconds, hook calls, pickle bytes. Driven by
 * bench_hooks.py, which adds Python's figures and the ratios. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ostore.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Groups of 100 heap objects: 33 tuples (i, i), 33 str, 33 float and one
 * instance with attributes {'x': i}; 10,000 groups. */
static ost_value build(long groups) {
    ost_value cls = ost_global("bench", "Item");
    ost_value root = ost_list_new((size_t)groups * 100);
    for (long g = 0; g < groups; g++) {
        for (int k = 0; k < 33; k++) {
            long i = g * 100 + k;
            ost_value t = ost_tuple_new(2);
            ost_tuple_set(t, 0, ost_int(i));
            ost_tuple_set(t, 1, ost_int(k));
            ost_list_append(root, t);
            char s[24];
            int n = snprintf(s, sizeof s, "s%ld", i);
            ost_list_append(root, ost_str(s, (size_t)n));
            ost_list_append(root, ost_float(i * 0.5));
        }
        ost_value inst = ost_instance_new(ost_incref(cls));
        ost_instance_setattr(inst, "x", ost_int(g));
        ost_list_append(root, inst);
    }
    ost_decref(cls);
    return root;
}

static int not_persistent(void *ud, ost_value obj, ost_value *pid) {
    (void)obj;
    (void)pid;
    (*(uint64_t *)ud)++;
    return 0;
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 7;
    long groups = argc > 2 ? atol(argv[2]) : 10000;
    ost_value g = build(groups);
    ost_writer *w = ost_writer_new();
    const char *names[3] = {"none", "instances", "all"};
    double t[3][64];
    uint64_t calls[3] = {0};
    size_t len[3] = {0};
    if (reps > 64) reps = 64;
    /* the cases take turns, so that a noisy moment hurts them alike */
    for (int r = 0; r < reps; r++)
        for (int mode = 0; mode < 3; mode++) {
            calls[mode] = 0;
            ost_writer_set_persistent_id(w, mode ? not_persistent : NULL, &calls[mode],
                                         mode == 2 ? OST_PID_ALL : OST_PID_INSTANCES);
            double t0 = now();
            if (ost_dump(w, g, NULL, &len[mode])) {
                fprintf(stderr, "dump: %s\n", ost_writer_errmsg(w));
                return 1;
            }
            t[mode][r] = now() - t0;
        }
    for (int mode = 0; mode < 3; mode++) {
        qsort(t[mode], (size_t)reps, sizeof t[mode][0], cmp);
        printf("%s %.6f %llu %zu\n", names[mode], t[mode][reps / 2],
               (unsigned long long)calls[mode], len[mode]);
    }
    ost_writer_free(w);
    ost_decref(g);
    return 0;
}
