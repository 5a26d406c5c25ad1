/* fuzz-pagecheck-smoke: the page walker's fuzz target without libFuzzer.
 *
 *     fuzz_pc_smoke SEEDS [TOTAL]
 *
 * SEEDS is the pack make_pc_seeds --pack writes (real data.mdb files). Each
 * seed must walk clean; then come the inputs the fuzzer once broke the
 * walker with (regressions, below), truncations of each seed at every page
 * boundary and at 16 spread offsets, and TOTAL (default 4000) mutations
 * from ost_fuzz_pagecheck_mutate with fixed seeds, each in a heap block of
 * exactly its size. Any broken promise aborts inside the target; run under
 * ASan and UBSan it also catches reads outside the file. Deterministic:
 * the same inputs every run (a failure names the mutation to replay). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_pagecheck.h"

typedef struct {
    uint8_t *data;
    size_t len;
} seed;

/* ---- regressions: mutations that once broke the walker --------------------
 * Each is (seed index, mutation seed) of ost_fuzz_pagecheck_mutate, so it
 * replays without a binary file. */
static const struct {
    const char *what;
    int seed;
    uint64_t mutation;
} regressions[] = {
    {"none yet", 0, 0},
};

static int verbose; /* OST_PC_SMOKE_VERBOSE set: name each input before running it */

/* Runs one input from a heap block of exactly n bytes; what, a and b name
 * it (a sanitizer's report comes from inside; run again verbose to see
 * which input it was). */
static void run(const uint8_t *b, size_t n, const char *what, size_t a, uint64_t c) {
    if (verbose) fprintf(stderr, "%s %zu %llu (%zu bytes)\n", what, a, (unsigned long long)c, n);
    uint8_t *copy = malloc(n ? n : 1);
    if (!copy) abort();
    memcpy(copy, b, n);
    ost_fuzz_pagecheck_one(copy, n);
    free(copy);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: fuzz_pc_smoke SEEDS [TOTAL]\n");
        return 2;
    }
    long total = argc > 2 ? atol(argv[2]) : 4000;
    verbose = getenv("OST_PC_SMOKE_VERBOSE") != NULL;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 2;
    }
    char magic[8];
    if (fread(magic, 1, 8, f) != 8 || memcmp(magic, "OSTPCSD1", 8)) {
        fprintf(stderr, "%s: not a seed pack\n", argv[1]);
        return 2;
    }
    seed seeds[16];
    int ns = 0;
    uint8_t l[4];
    while (ns < 16 && fread(l, 1, 4, f) == 4) {
        size_t n = (size_t)l[0] | (size_t)l[1] << 8 | (size_t)l[2] << 16 | (size_t)l[3] << 24;
        seeds[ns].data = malloc(n);
        if (!seeds[ns].data || fread(seeds[ns].data, 1, n, f) != n) {
            fprintf(stderr, "%s: truncated pack\n", argv[1]);
            return 2;
        }
        seeds[ns++].len = n;
    }
    fclose(f);
    if (!ns) {
        fprintf(stderr, "%s: no seeds\n", argv[1]);
        return 2;
    }
    long inputs = 0;
    for (int i = 0; i < ns; i++) {
        if (ost_fuzz_pagecheck_one(seeds[i].data, seeds[i].len) != 1) {
            fprintf(stderr, "fuzz_pc_smoke: seed %d does not walk clean\n", i);
            return 1;
        }
        inputs++;
    }
    size_t cap = 0;
    for (int i = 0; i < ns; i++)
        if (seeds[i].len > cap) cap = seeds[i].len;
    uint8_t *buf = malloc(cap);
    if (!buf) return 1;
    for (size_t r = 0; r < sizeof regressions / sizeof *regressions; r++) {
        if (!regressions[r].mutation) continue;
        const seed *s = &seeds[regressions[r].seed % ns];
        memcpy(buf, s->data, s->len);
        size_t n = ost_fuzz_pagecheck_mutate(buf, s->len, cap, regressions[r].mutation);
        fprintf(stderr, "regression: %s\n", regressions[r].what);
        run(buf, n, "seed, mutation", (size_t)regressions[r].seed, regressions[r].mutation);
        inputs++;
    }
    /* truncations: at every page boundary, and at spread offsets */
    for (int i = 0; i < ns; i++) {
        const seed *s = &seeds[i];
        for (size_t cut = 4096; cut < s->len; cut += 4096, inputs++)
            run(s->data, cut, "seed, cut at", (size_t)i, cut);
        for (size_t k = 1; k <= 16; k++, inputs++)
            run(s->data, s->len * k / 17, "seed, cut at", (size_t)i, s->len * k / 17);
    }
    /* mutations with fixed seeds */
    for (long m = 1; m <= total; m++, inputs++) {
        const seed *s = &seeds[m % ns];
        memcpy(buf, s->data, s->len);
        size_t n = ost_fuzz_pagecheck_mutate(buf, s->len, cap, (uint64_t)m);
        run(buf, n, "seed, mutation", (size_t)(m % ns), (uint64_t)m);
    }
    free(buf);
    for (int i = 0; i < ns; i++) free(seeds[i].data);
    printf("fuzz_pc_smoke: %ld inputs from %d seeds, no broken promise\n", inputs, ns);
    return 0;
}
