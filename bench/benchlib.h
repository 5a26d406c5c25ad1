/* Helpers shared by the store benchmarks (bench_store.c, bench_maps.c):
 * dying with a message, clocks, and what /proc says of the process. Each
 * program defines BENCH_NAME before including this. */
#ifndef OST_BENCHLIB_H
#define OST_BENCHLIB_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "ostore.h"

#define DIE(...)                                  \
    do {                                          \
        fprintf(stderr, BENCH_NAME ": ");         \
        fprintf(stderr, __VA_ARGS__);             \
        fputc('\n', stderr);                      \
        exit(1);                                  \
    } while (0)

#define CHECK(rc, what)                                                           \
    do {                                                                          \
        int rc_ = (rc);                                                           \
        if (rc_) DIE("%s: %s (%s)", what, ost_err_name(rc_), ost_strerror(rc_)); \
    } while (0)

/* Seconds of clock id (CLOCK_MONOTONIC, CLOCK_THREAD_CPUTIME_ID, ...). */
static inline double clock_seconds(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double now(void) { return clock_seconds(CLOCK_MONOTONIC); }

/* The size of dir/file in bytes, 0 if it is missing. */
static inline uint64_t dir_file_size(const char *dir, const char *file) {
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, file);
    struct stat sb;
    return stat(p, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* Bytes this process caused to be written to storage (/proc/self/io). */
static inline uint64_t io_write_bytes(void) {
    FILE *f = fopen("/proc/self/io", "r");
    if (!f) return 0;
    char line[128];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "write_bytes: %" SCNu64, &v) == 1) break;
    fclose(f);
    return v;
}

#endif
