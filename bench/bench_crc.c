/* What the checksum of records and map entries costs (docs/format.md,
 * base/crc32c.c): the CRC-32C of an 80-byte record as a read verifies it
 * (the oid, the header, the pickle: three calls), and the throughput on
 * 1 MiB, with the SSE 4.2 instruction and with the table the library falls
 * back on. Prints ns per record and GB/s.
 *
 *     ./build/bench/bench_crc */
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "../base/crc32c.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static uint8_t buf[1 << 20];

int main(void) {
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)(i * 31);
    uint32_t c = 0;
    enum { N = 10000000, BIG = 1000 };
    for (int pass = 0; pass < 2; pass++) {
        uint32_t (*f)(uint32_t, const void *, size_t) = pass ? ost__crc32c_soft : ost__crc32c;
        double t0 = now();
        for (int i = 0; i < N; i++) {
            const uint8_t *r = buf + (i & 1023) * 8;
            c = f(f(f(c, r, 8), r + 8, 12), r + 24, 64); /* oid, header, pickle */
        }
        double t1 = now();
        for (int i = 0; i < BIG; i++) c = f(c, buf, sizeof buf);
        double t2 = now();
        printf("%-7s a record of 80 bytes (oid + header + pickle): %5.1f ns; 1 MiB: %5.2f GB/s\n",
               pass ? "table" : "default", (t1 - t0) / N * 1e9,
               (double)BIG * sizeof buf / (t2 - t1) / 1e9);
    }
    return c == 0x12345678; /* keeps the loops */
}
