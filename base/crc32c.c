/* CRC-32C (Castagnoli, polynomial 0x1EDC6F41, reflected 0x82F63B78), the
 * checksum of records and map entries (docs/format.md). On x86-64 with
 * SSE 4.2 the CRC32 instruction does it (about 8 bytes a cycle); elsewhere
 * a slicing-by-8 table (about a byte a cycle per table lookup group). Both
 * give the standard CRC-32C: crc32c("123456789") == 0xE3069283. */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

static uint32_t g_tab[8][256];
static pthread_once_t g_tab_once = PTHREAD_ONCE_INIT;

/* Fills g_tab: g_tab[0] the byte-at-a-time table of the reflected
 * polynomial, g_tab[t] the step of a byte followed by t zero bytes. */
static void make_tables(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        g_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++) g_tab[t][i] = (g_tab[t - 1][i] >> 8) ^ g_tab[0][g_tab[t - 1][i] & 0xff];
}

/* The CRC register crc (inverted) advanced over p[0, n) by the tables:
 * bytes to an 8-byte boundary, then 8 bytes a step. */
static uint32_t crc_table(uint32_t crc, const uint8_t *p, size_t n) {
    while (n && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ g_tab[0][(crc ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc; /* little-endian: the low 4 bytes take the crc */
        crc = g_tab[7][w & 0xff] ^ g_tab[6][(w >> 8) & 0xff] ^ g_tab[5][(w >> 16) & 0xff] ^
              g_tab[4][(w >> 24) & 0xff] ^ g_tab[3][(w >> 32) & 0xff] ^
              g_tab[2][(w >> 40) & 0xff] ^ g_tab[1][(w >> 48) & 0xff] ^ g_tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) crc = (crc >> 8) ^ g_tab[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && \
    __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define HAVE_HW 1
/* The same as crc_table, by SSE 4.2's CRC32 instruction. */
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const uint8_t *p, size_t n) {
    /* unaligned 8-byte loads cost x86 nothing; an alignment prologue of
     * byte steps cost more than it saved on records of a hundred bytes
     * (each step waits for the last: the instruction's latency) */
    uint64_t c = crc;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
        p += 8;
        n -= 8;
    }
    uint32_t c32 = (uint32_t)c;
    if (n & 4) {
        uint32_t w;
        memcpy(&w, p, 4);
        c32 = __builtin_ia32_crc32si(c32, w);
        p += 4;
    }
    if (n & 2) {
        uint16_t w;
        memcpy(&w, p, 2);
        c32 = __builtin_ia32_crc32hi(c32, w);
        p += 2;
    }
    if (n & 1) c32 = __builtin_ia32_crc32qi(c32, *p);
    return c32;
}
#endif

static uint32_t (*g_fn)(uint32_t, const uint8_t *, size_t);
static pthread_once_t g_fn_once = PTHREAD_ONCE_INIT;

/* Sets g_fn: the instruction when the CPU has it, else the tables. */
static void pick(void) {
#ifdef HAVE_HW
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2")) {
        __atomic_store_n(&g_fn, crc_hw, __ATOMIC_RELEASE);
        return;
    }
#endif
    pthread_once(&g_tab_once, make_tables);
    __atomic_store_n(&g_fn, crc_table, __ATOMIC_RELEASE);
}

/* The CRC-32C of p[0, n) continuing crc (crc32c.h): through g_fn. */
uint32_t ost__crc32c(uint32_t crc, const void *p, size_t n) {
    /* every read of a record calls this three times: the once-guard only
     * the first time */
    uint32_t (*f)(uint32_t, const uint8_t *, size_t) = __atomic_load_n(&g_fn, __ATOMIC_ACQUIRE);
    if (!f) {
        pthread_once(&g_fn_once, pick);
        f = g_fn;
    }
    return ~f(~crc, p, n);
}

/* The same by the tables, whatever the CPU has (crc32c.h). */
uint32_t ost__crc32c_soft(uint32_t crc, const void *p, size_t n) {
    pthread_once(&g_tab_once, make_tables);
    return ~crc_table(~crc, p, n);
}
