/* Test helper: an allocator for ost_set_allocator that fails allocation
 * number g_fail_at (1-based; 0 never) and counts the blocks outstanding. */
#ifndef OST_TESTS_FAILALLOC_H
#define OST_TESTS_FAILALLOC_H

#include <stdlib.h>

static long g_fail_at; /* fail the allocation with this number (1-based) */
static long g_count;   /* allocations attempted */
static long g_blocks;  /* blocks outstanding */
static long g_failed;  /* allocations failed */

static void *fail_malloc(size_t n) {
    if (++g_count == g_fail_at) {
        g_failed++;
        return NULL;
    }
    void *p = malloc(n);
    if (p) g_blocks++;
    return p;
}

static void *fail_realloc(void *p, size_t n) {
    if (++g_count == g_fail_at) {
        g_failed++;
        return NULL;
    }
    void *q = realloc(p, n);
    if (q && !p) g_blocks++;
    return q;
}

static void fail_free(void *p) {
    if (p) g_blocks--;
    free(p);
}

#endif
