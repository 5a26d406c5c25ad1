/* The count a map's or a counter's record holds (maprec.h). */
#include "maprec.h"

#include "ostore/common.h"

/* The u64 little-endian at b. */
static uint64_t rd_le64(const uint8_t *b) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | b[i];
    return v;
}

int ost__record_value(const uint8_t *p, size_t n, int64_t *value) {
    if (n < 16 || p[0] != 0x80 || p[n - 1] != '.' || p[n - 2] != 'u' || p[n - 11] != 8 ||
        p[n - 12] != 0x8a)
        return OST_ECORRUPT;
    *value = (int64_t)rd_le64(p + n - 10);
    return 0;
}

int ost__map_record_count(const uint8_t *p, size_t n, uint64_t *count) {
    int64_t v;
    if (ost__record_value(p, n, &v) || v < 0) return OST_ECORRUPT; /* a count is >= 0 */
    *count = (uint64_t)v;
    return 0;
}

void ost__map_record_setcount(uint8_t *p, size_t n, uint64_t count) {
    for (int i = 0; i < 8; i++) p[n - 10 + i] = (uint8_t)(count >> (8 * i));
}


int ost__record_count_add(uint8_t *p, size_t n, int64_t delta, bool counter) {
    int64_t v, sum;
    if (ost__record_value(p, n, &v) || (!counter && v < 0)) return OST_ECORRUPT;
    if (__builtin_add_overflow(v, delta, &sum)) return counter ? OST_ELIMIT : OST_ECORRUPT;
    if (!counter && sum < 0) return OST_ECORRUPT; /* a map's count below 0: damage */
    ost__map_record_setcount(p, n, (uint64_t)sum);
    return 0;
}
