/* The value allocator: size-class free lists carved from 64 KiB chunks, one
 * set per thread, for the millions of small objects a graph holds; large
 * blocks come from mmap with transparent huge pages, since first-touch page
 * faults dominate copying into fresh memory. A custom allocator (for failure
 * injection) bypasses the pools. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "internal.h"

#if defined(__SANITIZE_ADDRESS__)
#define OST_POOL_DEFAULT false /* let ASan see every object */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define OST_POOL_DEFAULT false
#endif
#endif
#ifndef OST_POOL_DEFAULT
#define OST_POOL_DEFAULT true
#endif

#define SC_STEP 8 /* 8-byte steps: a 35-byte str takes 40, not 48 */
#define SC_COUNT 32 /* pooled sizes: 8 .. 256 bytes */
#define CHUNK_SIZE (64 * 1024)
#define MMAP_MIN (1024 * 1024)
#define HUGE_ALIGN (2 * 1024 * 1024)

static ost_allocator g_alloc = {malloc, realloc, free};
static bool g_pool = OST_POOL_DEFAULT;

typedef struct free_node {
    struct free_node *next;
} free_node;

static OST__TLS_HOT free_node *t_free[SC_COUNT + 1];
static OST__TLS_HOT char *t_bump;
static OST__TLS_HOT size_t t_bump_left;
static OST__TLS_HOT uint64_t t_live;
static OST__TLS_HOT uint64_t t_pool_bytes;

void ost_set_allocator(const ost_allocator *a) {
    if (a && a->malloc && a->realloc && a->free) {
        g_alloc = *a;
        g_pool = false;
    } else {
        g_alloc.malloc = malloc;
        g_alloc.realloc = realloc;
        g_alloc.free = free;
        g_pool = OST_POOL_DEFAULT;
    }
}

void ost_alloc_stats_get(ost_alloc_stats *st) {
    st->live_objects = t_live;
    st->pool_bytes = t_pool_bytes;
}

void *ost__mem_alloc(size_t n) { return g_alloc.malloc(n ? n : 1); }
void *ost__mem_realloc(void *p, size_t n) {
    return g_alloc.realloc(p, n ? n : 1);
}
void ost__mem_free(void *p) {
    if (p) g_alloc.free(p);
}

static void *pool_refill(unsigned sc) {
    size_t sz = (size_t)sc * SC_STEP;
    if (t_bump_left < sz) {
        /* The tail of the old chunk goes to the free lists it fits. */
        while (t_bump_left >= SC_STEP) {
            unsigned c = (unsigned)(t_bump_left / SC_STEP);
            if (c > SC_COUNT) c = SC_COUNT;
            free_node *f = (free_node *)t_bump;
            f->next = t_free[c];
            t_free[c] = f;
            t_bump += (size_t)c * SC_STEP;
            t_bump_left -= (size_t)c * SC_STEP;
        }
        char *chunk = malloc(CHUNK_SIZE);
        if (!chunk) return NULL;
        t_pool_bytes += CHUNK_SIZE;
        t_bump = chunk;
        t_bump_left = CHUNK_SIZE;
    }
    void *p = t_bump;
    t_bump += sz;
    t_bump_left -= sz;
    return p;
}

/* Not inlined: keeps the pooled path of ost__obj_alloc short. */
static __attribute__((noinline)) void *big_alloc(size_t n) {
    size_t len = (n + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
    /* Over-allocate to align on a huge page boundary, then trim. */
    char *p = mmap(NULL, len + HUGE_ALIGN, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    uintptr_t a = ((uintptr_t)p + HUGE_ALIGN - 1) & ~(uintptr_t)(HUGE_ALIGN - 1);
    size_t head = a - (uintptr_t)p;
    if (head) munmap(p, head);
    size_t tail = HUGE_ALIGN - head;
    if (tail) munmap((char *)a + len, tail);
#ifdef MADV_HUGEPAGE
    madvise((void *)a, len, MADV_HUGEPAGE);
#endif
    return (void *)a;
}

void *ost__buf_map(size_t n, size_t *len) {
    if (!g_pool) return NULL; /* ASan, or a custom allocator: malloc'ed buffers */
    size_t l = (n + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
    if (l < n) return NULL;
    void *p = big_alloc(l);
    if (p) *len = l;
    return p;
}

void ost__buf_unmap(void *p, size_t len) {
    if (p) munmap(p, len);
}

ost_obj *ost__obj_alloc(size_t n, int type) {
    ost_obj *o;
    uint16_t sc;
    if (g_pool && n <= SC_COUNT * SC_STEP) {
        sc = (uint16_t)((n + SC_STEP - 1) / SC_STEP);
        free_node *f = t_free[sc];
        if (OST_LIKELY(f != NULL)) {
            t_free[sc] = f->next;
            o = (ost_obj *)f;
        } else {
            o = pool_refill(sc);
            if (!o) return NULL;
        }
    } else if (g_pool && n >= MMAP_MIN && type != OST_T_INSTANCE) {
        /* not an instance: its size, which munmap needs, comes from its
         * class, which may be gone when it is freed */
        o = big_alloc(n);
        if (!o) return NULL;
        sc = OST__SC_MMAP;
    } else {
        o = g_alloc.malloc(n);
        if (!o) return NULL;
        sc = OST__SC_MALLOC;
    }
    o->refcnt = 1;
    o->type = (uint8_t)type;
    o->flags = 0;
    o->sizeclass = sc;
    t_live++;
    return o;
}

void ost__obj_free(ost_obj *o, size_t n) {
    t_live--;
    if (o->sizeclass == OST__SC_MALLOC) {
        g_alloc.free(o);
    } else if (o->sizeclass == OST__SC_MMAP) {
        size_t len = (n + HUGE_ALIGN - 1) & ~(size_t)(HUGE_ALIGN - 1);
        munmap(o, len);
    } else {
        /* the class first: the link overwrites the header it is in */
        unsigned sc = o->sizeclass;
        free_node *f = (free_node *)o;
        f->next = t_free[sc];
        t_free[sc] = f;
    }
}

/* ---- container arrays ------------------------------------------------------ */

/* The item arrays of lists and the entry arrays of dicts and sets. A
 * container that came from the pools keeps its small arrays in the pools
 * too, with no header: the container knows their size (its cap), so a
 * dict of five keys costs no malloc. Whether an array is pooled depends
 * only on the container's own size class and the array's size, both fixed
 * between allocation and free. */
static inline bool arr_pooled(bool pooled, size_t n) {
    return pooled && n && n <= SC_COUNT * SC_STEP;
}
static inline unsigned arr_class(size_t n) { return (unsigned)((n + SC_STEP - 1) / SC_STEP); }

void *ost__arr_alloc(bool pooled, size_t n) {
    if (!arr_pooled(pooled, n)) return ost__mem_alloc(n);
    unsigned sc = arr_class(n);
    free_node *f = t_free[sc];
    if (OST_LIKELY(f != NULL)) {
        t_free[sc] = f->next;
        return f;
    }
    return pool_refill(sc);
}

void ost__arr_free(bool pooled, void *p, size_t n) {
    if (!p) return;
    if (!arr_pooled(pooled, n)) {
        ost__mem_free(p);
        return;
    }
    free_node *f = p;
    unsigned sc = arr_class(n);
    f->next = t_free[sc];
    t_free[sc] = f;
}

void *ost__arr_realloc(bool pooled, void *p, size_t old, size_t n) {
    if (!p) return ost__arr_alloc(pooled, n);
    bool po = arr_pooled(pooled, old), pn = arr_pooled(pooled, n);
    if (!po && !pn) return ost__mem_realloc(p, n);
    if (po && pn && arr_class(old) == arr_class(n)) return p;
    void *q = ost__arr_alloc(pooled, n);
    if (!q) return NULL;
    memcpy(q, p, old < n ? old : n);
    ost__arr_free(pooled, p, old);
    return q;
}

/* ---- identity table ---------------------------------------------------- */

int ost__ptrtab_init(ost__ptrtab *t, size_t hint) {
    size_t n = 16;
    while (n < hint * 2) n <<= 1;
    t->slots = ost__mem_alloc(n * sizeof *t->slots);
    if (!t->slots) {
        t->mask = 0;
        return OST_ENOMEM;
    }
    memset(t->slots, 0, n * sizeof *t->slots);
    t->mask = n - 1;
    t->count = 0;
    return 0;
}

void ost__ptrtab_clear(ost__ptrtab *t) {
    if (t->count) memset(t->slots, 0, (t->mask + 1) * sizeof *t->slots);
    t->count = 0;
}

void ost__ptrtab_free(ost__ptrtab *t) {
    ost__mem_free(t->slots);
    t->slots = NULL;
    t->mask = 0;
    t->count = 0;
}

int ost__ptrtab_grow(ost__ptrtab *t) {
    size_t n = (t->mask + 1) * 2;
    ost__ptr_slot *s = ost__mem_alloc(n * sizeof *s);
    if (!s) return OST_ENOMEM;
    memset(s, 0, n * sizeof *s);
    ost__ptrtab old = *t;
    t->slots = s;
    t->mask = n - 1;
    for (size_t i = 0; i <= old.mask; i++) {
        if (old.slots[i].key) {
            ost__ptr_slot *d = ost__ptrtab_find(t, old.slots[i].key);
            *d = old.slots[i];
        }
    }
    ost__mem_free(old.slots);
    return 0;
}

void ost__ptrtab_del(ost__ptrtab *t, uintptr_t key) {
    if (!t->slots) return;
    ost__ptr_slot *s = ost__ptrtab_find(t, key);
    if (!s->key) return;
    size_t i = (size_t)(s - t->slots);
    s->key = 0;
    t->count--;
    /* re-insert the rest of the cluster so lookups still reach it */
    for (i = (i + 1) & t->mask; t->slots[i].key; i = (i + 1) & t->mask) {
        ost__ptr_slot e = t->slots[i];
        t->slots[i].key = 0;
        *ost__ptrtab_find(t, e.key) = e;
    }
}

/* ---- buffers ------------------------------------------------------------ */

int ost__buf_reserve(ost_buf *b, size_t extra) {
    if (extra >= SIZE_MAX - b->len) return OST_ENOMEM;
    return ost__reserve((void **)&b->data, &b->cap, b->len + extra + 1, 1, 64);
}

int ost__buf_append(ost_buf *b, const void *p, size_t n) {
    if (ost__buf_reserve(b, n)) return OST_ENOMEM;
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

int ost__buf_vprintf(ost_buf *b, const char *fmt, va_list ap) {
    va_list again;
    va_copy(again, ap);
    char tmp[256];
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap), rc = 0;
    if (n < 0) rc = OST_EINVAL;
    else if ((size_t)n < sizeof tmp) rc = ost__buf_append(b, tmp, (size_t)n);
    else if (ost__buf_reserve(b, (size_t)n)) rc = OST_ENOMEM;
    else {
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, again);
        b->len += (size_t)n;
    }
    va_end(again);
    return rc;
}

int ost__buf_printf(ost_buf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = ost__buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

void ost_buf_free(ost_buf *b) {
    if (!b) return;
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ---- arrays --------------------------------------------------------------- */

/* base/grow.c grows them; its failure is the library's OST_ENOMEM. */
_Static_assert(OST__GROW_NOMEM == OST_ENOMEM, "base/grow.h's failure is OST_ENOMEM");

/* ---- names table ---------------------------------------------------------- */

static ost__name_slot *name_probe(const ost__nametab *t, uint64_t h, const char *m,
                                  size_t ml, const char *n, size_t nl) {
    size_t i = (size_t)h & t->mask;
    for (;;) {
        ost__name_slot *s = &t->slots[i];
        if (!s->key || (s->hash == h && s->ml == ml && s->nl == nl &&
                        memcmp(s->key, m, ml) == 0 && memcmp(s->key + ml + 1, n, nl) == 0))
            return s;
        i = (i + 1) & t->mask;
    }
}

ost__name_slot *ost__nametab_get(const ost__nametab *t, const char *m, size_t ml,
                                 const char *n, size_t nl) {
    if (!t->slots) return NULL;
    ost__name_slot *s = name_probe(t, ost__name_hash(m, ml, n, nl), m, ml, n, nl);
    return s->key ? s : NULL;
}

int ost__nametab_put(ost__nametab *t, const char *m, size_t ml, const char *n, size_t nl,
                     uint64_t val) {
    if (!t->slots || (t->count + 1) * 2 > t->mask + 1) {
        size_t size = t->slots ? (t->mask + 1) * 2 : 16;
        ost__name_slot *ns = calloc(size, sizeof *ns);
        if (!ns) return OST_ENOMEM;
        for (size_t i = 0; t->slots && i <= t->mask; i++) {
            if (!t->slots[i].key) continue;
            size_t j = (size_t)t->slots[i].hash & (size - 1);
            while (ns[j].key) j = (j + 1) & (size - 1);
            ns[j] = t->slots[i];
        }
        free(t->slots);
        t->slots = ns;
        t->mask = size - 1;
    }
    if (ml > SIZE_MAX - nl - 2) return OST_ENOMEM;
    char *key = malloc(ml + nl + 2);
    if (!key) return OST_ENOMEM;
    memcpy(key, m, ml);
    key[ml] = 0;
    memcpy(key + ml + 1, n, nl);
    key[ml + 1 + nl] = 0;
    uint64_t h = ost__name_hash(m, ml, n, nl);
    ost__name_slot *s = name_probe(t, h, m, ml, n, nl);
    *s = (ost__name_slot){key, ml, nl, h, val};
    t->count++;
    return 0;
}

void ost__nametab_free(ost__nametab *t, void (*drop)(uint64_t val)) {
    for (size_t i = 0; t->slots && i <= t->mask; i++)
        if (t->slots[i].key) {
            if (drop) drop(t->slots[i].val);
            free(t->slots[i].key);
        }
    free(t->slots);
    t->slots = NULL;
    t->mask = t->count = 0;
}
