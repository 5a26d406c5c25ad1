/* base/: the shared small parts at the bottom of the library (endian
 * codecs, CRC-32C, message formatting and path display, the grow helper,
 * the sort of oids), each on its own. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../base/crc32c.h"
#include "../base/endian.h"
#include "../base/grow.h"
#include "../base/sort.h"
#include "../base/text.h"
#include "leakcheck.h"

/* ---- endian ------------------------------------------------------------------ */

OST_TEST(base, endian_writes_each_order_byte_by_byte) {
    uint8_t b[8];
    ost__be64(b, 0x0102030405060708ULL);
    cr_assert_arr_eq(b, ((uint8_t[]){1, 2, 3, 4, 5, 6, 7, 8}), 8);
    ost__le64(b, 0x0102030405060708ULL);
    cr_assert_arr_eq(b, ((uint8_t[]){8, 7, 6, 5, 4, 3, 2, 1}), 8);
    ost__be32(b, 0x01020304u);
    cr_assert_arr_eq(b, ((uint8_t[]){1, 2, 3, 4}), 4);
    ost__le32(b, 0x01020304u);
    cr_assert_arr_eq(b, ((uint8_t[]){4, 3, 2, 1}), 4);
    ost__be16(b, 0x0102);
    cr_assert_arr_eq(b, ((uint8_t[]){1, 2}), 2);
    ost__le16(b, 0x0102);
    cr_assert_arr_eq(b, ((uint8_t[]){2, 1}), 2);
}

OST_TEST(base, endian_round_trips_at_any_alignment) {
    uint8_t buf[16];
    const uint64_t vals[] = {0, 1, 0xff, 0x8000000000000000ULL, UINT64_MAX, 0x0123456789abcdefULL};
    for (size_t off = 0; off < 8; off++)
        for (size_t i = 0; i < sizeof vals / sizeof *vals; i++) {
            uint64_t v = vals[i];
            ost__be64(buf + off, v);
            cr_assert_eq(ost__rd_be64(buf + off), v);
            ost__le64(buf + off, v);
            cr_assert_eq(ost__rd_le64(buf + off), v);
            ost__be32(buf + off, (uint32_t)v);
            cr_assert_eq(ost__rd_be32(buf + off), (uint32_t)v);
            ost__le32(buf + off, (uint32_t)v);
            cr_assert_eq(ost__rd_le32(buf + off), (uint32_t)v);
            ost__be16(buf + off, (uint16_t)v);
            cr_assert_eq(ost__rd_be16(buf + off), (uint16_t)v);
            ost__le16(buf + off, (uint16_t)v);
            cr_assert_eq(ost__rd_le16(buf + off), (uint16_t)v);
        }
}

OST_TEST(base, big_endian_keys_sort_as_numbers) {
    uint8_t a[8], b[8];
    ost__be64(a, 255);
    ost__be64(b, 256);
    cr_assert_lt(memcmp(a, b, 8), 0);
}

/* ---- CRC-32C -------------------------------------------------------------------- */

OST_TEST(base, crc32c_gives_the_known_vectors) {
    cr_assert_eq(ost__crc32c(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(ost__crc32c_soft(0, "123456789", 9), 0xE3069283u);
    cr_assert_eq(ost__crc32c(0, "", 0), 0u);
    uint8_t z[32] = {0};
    cr_assert_eq(ost__crc32c(0, z, 32), 0x8A9136AAu); /* RFC 3720, B.4 */
}

OST_TEST(base, crc32c_continues_across_pieces) {
    const char *s = "123456789";
    for (size_t k = 0; k <= 9; k++) {
        cr_assert_eq(ost__crc32c(ost__crc32c(0, s, k), s + k, 9 - k), 0xE3069283u, "cut at %zu", k);
        cr_assert_eq(ost__crc32c_soft(ost__crc32c_soft(0, s, k), s + k, 9 - k), 0xE3069283u);
    }
}

/* ---- grow ---------------------------------------------------------------------- */

OST_TEST(base, grow_doubles_from_the_minimum) {
    size_t cap;
    cr_assert_eq(ost__grow_cap(0, 1, 8, 16, &cap), 0);
    cr_assert_eq(cap, 16);
    cr_assert_eq(ost__grow_cap(16, 17, 8, 16, &cap), 0);
    cr_assert_eq(cap, 32);
    cr_assert_eq(ost__grow_cap(16, 100, 8, 16, &cap), 0);
    cr_assert_eq(cap, 128);
    cr_assert_eq(ost__grow_cap(0, 3, 1, 0, &cap), 0);
    cr_assert_eq(cap, 4);
}

OST_TEST(base, grow_refuses_sizes_that_overflow) {
    size_t cap = 7;
    cr_assert_eq(ost__grow_cap(1, SIZE_MAX, 1, 0, &cap), OST__GROW_NOMEM);
    cr_assert_eq(cap, 7, "untouched on failure");
    cr_assert_eq(ost__grow_cap(1, SIZE_MAX / 8 + 2, 16, 0, &cap), OST__GROW_NOMEM);
    cr_assert_eq(cap, 7);
    int *arr = NULL;
    size_t n = 0;
    cr_assert_eq(ost__grow((void **)&arr, &n, SIZE_MAX / 2, sizeof *arr, 4), OST__GROW_NOMEM);
    cr_assert_null(arr);
    cr_assert_eq(n, 0);
}

OST_TEST(base, grow_keeps_the_elements) {
    int *arr = NULL;
    size_t cap = 0;
    for (int i = 0; i < 1000; i++) {
        cr_assert_eq(ost__reserve((void **)&arr, &cap, (size_t)i + 1, sizeof *arr, 4), 0);
        arr[i] = i;
    }
    cr_assert_eq(cap, 1024);
    for (int i = 0; i < 1000; i++) cr_assert_eq(arr[i], i);
    free(arr);
}

/* ---- sort ---------------------------------------------------------------------- */

OST_TEST(base, sort_unique_sorts_and_drops_repeats) {
    uint64_t v[] = {5, 3, 5, 1, UINT64_MAX, 3, 0};
    size_t n = ost__sort_unique(v, 7);
    cr_assert_eq(n, 5);
    cr_assert_arr_eq(v, ((uint64_t[]){0, 1, 3, 5, UINT64_MAX}), 5 * sizeof *v);
    cr_assert_eq(ost__sort_unique(v, 0), 0);
}

OST_TEST(base, sort_unique_agrees_with_qsort_on_many) {
    size_t n = 5000;
    uint64_t *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        a[i] = b[i] = 1000000 + x % 3000; /* oids of one store: close, with repeats */
    }
    size_t got = ost__sort_unique(a, n);
    qsort(b, n, sizeof *b, ost__u64_cmp);
    size_t u = 1;
    for (size_t i = 1; i < n; i++)
        if (b[i] != b[u - 1]) b[u++] = b[i];
    cr_assert_eq(got, u);
    cr_assert_arr_eq(a, b, u * sizeof *a);
    free(a);
    free(b);
}

/* ---- text ----------------------------------------------------------------------- */

OST_TEST(base, vfmt_keeps_both_ends_of_a_long_message) {
    char m[32];
    ost__fmt(m, sizeof m, "%s", "the start of a message that goes on and on: the end");
    cr_assert_lt(strlen(m), sizeof m);
    cr_assert(strncmp(m, "the start", 9) == 0, "%s", m);
    cr_assert_not_null(strstr(m, "..."), "%s", m);
    cr_assert(strcmp(m + strlen(m) - 7, "the end") == 0, "%s", m);
    ost__fmt(m, sizeof m, "short %d", 7);
    cr_assert_str_eq(m, "short 7");
}

OST_TEST(base, path_show_escapes_what_would_break_a_line) {
    char d[OST__PATH_SHOWN];
    cr_assert_str_eq(ost__path_show(d, sizeof d, "a\nb\\c\xff"), "a\\nb\\\\c\\xff");
    cr_assert_str_eq(ost__path_show(d, sizeof d, NULL), "(null)");
    cr_assert(ost__utf8_strict("\xc3\xa9", 2));
    cr_assert_not(ost__utf8_strict("\xed\xa0\x80", 3), "a lone surrogate");
}
