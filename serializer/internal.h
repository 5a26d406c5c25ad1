/* Internal layout of ostore values, shared by the serializer's files.
 * Nothing here is public API. */
#ifndef OST_SERIALIZER_INTERNAL_H
#define OST_SERIALIZER_INTERNAL_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ostore.h"
#include "prim.h"
#include "../base/endian.h"

/* The hot per-thread state of the allocator and of freeing: initial-exec
 * TLS, a fixed offset from the thread pointer, instead of a
 * __tls_get_addr call per access, which the default model of a shared
 * library costs (3% of the demo's CPU in perf). The variables are a few
 * hundred bytes, well within the static TLS room glibc keeps for
 * libraries (also for one loaded with dlopen). */
#define OST__TLS_HOT __thread __attribute__((tls_model("initial-exec")))

#define OST_LIKELY(x) __builtin_expect(!!(x), 1)
#define OST_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* Header of every heap value: 8 bytes. */
typedef struct ost_obj {
    uint32_t refcnt;
    uint8_t type;  /* ost_type */
    uint8_t flags; /* OST__F_* */
    uint16_t sizeclass; /* pool class, OST__SC_MALLOC or OST__SC_MMAP */
} ost_obj;

#define OST__SC_MALLOC 0
#define OST__SC_MMAP 0xffff

typedef struct {
    ost_obj h;
    double d;
} ost_float_obj;

/* Heap ints: minimal little-endian two's complement, n >= 1. Ints that
 * fit the immediate range are never heap ints. */
typedef struct {
    ost_obj h;
    uint32_t n;
    uint8_t b[];
} ost_int_obj;

/* str, bytes and bytearray: inline data, NUL terminated, right after a
 * 32-bit length (a 10-byte str takes 24 bytes: 8 of header, 4 of length,
 * 11 of text and NUL). The hash is not cached: most strs are short (a
 * field's value, a dict's key, whose entry keeps its hash), and 8 bytes
 * more each cost more than hashing them again. A value holds at most
 * OST__STR_MAX bytes: ost_str and the others return 0 beyond it, and the
 * reader fails with OST_ELIMIT (docs/pickle.md, "Limits"). */
typedef struct {
    ost_obj h;
    uint32_t len;
    char data[];
} ost_str_obj;

#define OST__STR_MAX ((size_t)UINT32_MAX)

/* A bytes value with flag OST__F_LENT: ptr points into a lent buffer. */
typedef struct ost__lender ost__lender;
typedef struct {
    ost_obj h;
    uint32_t len; /* where ost_str_obj has its len */
    const char *ptr;
    ost__lender *lender;
} ost_lent_obj;

/* The data of a str, bytes or bytearray value. */
static inline char *ost__sdata(const ost_str_obj *s) {
    if (__builtin_expect(s->h.flags & 32 /* OST__F_LENT */, 0))
        return (char *)((const ost_lent_obj *)s)->ptr;
    return (char *)s->data;
}

typedef struct {
    ost_obj h;
    size_t len;
    ost_value items[];
} ost_tuple_obj;

typedef struct {
    ost_obj h;
    size_t len, cap;
    ost_value *items;
} ost_list_obj;

typedef struct {
    ost_value key; /* 0: deleted */
    ost_value val;
    uint64_t hash;
} ost_entry;

/* dict, set and frozenset. Entries keep insertion order; dicts of up to
 * OST__DICT_LINEAR entries have no index and are searched linearly. */
typedef struct {
    ost_obj h;
    size_t len;  /* live entries */
    size_t used; /* entries in use, deleted ones included */
    size_t cap;
    ost_entry *entries;
    uint32_t *index; /* open addressing; slot holds entry index + 1 */
    size_t mask;     /* index size - 1, or 0 without index */
} ost_dict_obj;

#define OST__DICT_LINEAR 8

/* Instances. Both kinds begin alike: pidx, pbytes, then cls at the same
 * offset. pidx and pbytes are for the store: a persistent object's entry in
 * its connection's cache is ents[pidx - 1] (0: none), so that finding it
 * needs no table, and pbytes is the size of the record its state came from
 * or went to (up to UINT32_MAX: larger records count as that), which the
 * cache's byte limit adds up.
 * An instance with a state (a dict of attributes, or what BUILD gave):
 * items is 0, or the list or dict of items of an instance of a list or dict
 * subclass (what APPENDS or SETITEMS added after NEWOBJ). */
typedef struct {
    ost_obj h;
    uint32_t pidx;
    uint32_t pbytes;
    ost_value cls;
    ost_value state;
    ost_value items;
} ost_inst_obj;

/* What ost_class_new adds to a global. */
typedef struct {
    ost_class_def def;  /* strings point into this block or the global */
    size_t nfields;
    ost_value *fields;  /* str values, one per field */
    size_t naliases;
    ost_value *alias_names; /* str values: former names of fields */
    uint32_t *alias_to;     /* the field each former name reads into */
    /* NULL, or nfields defaults (0: none), the class's own copies,
     * marked OST__F_SHARED through and through: instances of any thread
     * hold references to them (ost__slots_defaults). */
    ost_value *defaults;
} ost__klass;

typedef struct {
    ost_obj h;
    ost_value module, name;
    ost__klass *k; /* NULL for a plain global */
} ost_global_obj;

/* Instance of a class with fields (flag OST__F_SLOTS): no state, one slot
 * per field of its class (a class's fields never change, so the instance
 * does not count them: ost__nslots). Fields a record had that the class
 * does not declare are kept beside it, not in it (flag OST__F_EXTRA,
 * ost__extra): few instances have them, and a word in every instance would
 * cost 8 bytes of each cached object (docs/hooks.md, "Changing a class"). */
typedef struct {
    ost_obj h;
    uint32_t pidx;
    uint32_t pbytes;
    ost_value cls;
    ost_value slots[]; /* 0 = unset */
} ost_slots_obj;

/* The slots of a slotted instance: its class's fields. */
static inline size_t ost__nslots(const ost_slots_obj *so) {
    return ((const ost_global_obj *)so->cls)->k->nfields;
}

/* The unknown fields kept for slotted instance inst (a dict, borrowed), or
 * 0 when it has none. */
ost_value ost__extra(ost_value inst);
/* Removes inst's kept fields from the side table and returns them (the
 * reference passes to the caller; 0 when none). */
ost_value ost__extra_take(ost_value inst);

/* Unsets every slot and the kept unknown fields of a slotted instance,
 * releasing what they held. */
void ost__slots_clear(ost_value inst);
/* Gives each unset slot of slotted instance inst its field's default, if
 * the field has one (a new reference to the class's copy): what a new
 * instance starts with, and what a state that lacks the field leaves. */
void ost__slots_defaults(ost_value inst);
/* A new instance of cls (stolen) as ost_instance_new makes it, but with
 * every slot unset even where its field has a default: a store's ghost,
 * whose slots its record fills (and then ost__slots_defaults). */
ost_value ost__instance_new_unset(ost_value cls);

#define OST__F_SLOTS 1
#define OST__F_PERSISTENT 2 /* has an oid in a connection (store/) */
#define OST__F_GHOST 4      /* persistent, state not loaded yet */
#define OST__F_CHANGED 8    /* persistent, changed since loaded or stored */
/* Used by many threads at once (the classes of a registry, which every
 * connection's reader hands out): its count changes atomically. */
#define OST__F_SHARED 16
/* A bytes value whose data is in a buffer lent to ost_load_lent
 * (ost_lent_obj): every reader of a str-like value's data goes through
 * ost__sdata. */
#define OST__F_LENT 32
/* A slotted instance with unknown fields kept in the side table (ost__extra). */
#define OST__F_EXTRA 64

/* The buffer lent to ost_load_lent: one reference for the load, one per
 * bytes value pointing into it; the last one calls release. */
struct ost__lender {
    uint64_t refs; /* atomic */
    ost_release_fn release;
    void *ud;
    const void *data;
    size_t len;
};
void ost__lender_drop(ost__lender *l);

/* attr.c: sets the calling thread's value message (ost_value_errmsg) and
 * returns code; the message and OST_ENOTFOUND for a field that class cls
 * does not declare. */
int ost__value_fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ost__field_missing(ost_value cls, const char *name);
/* How the value layer reaches the store that owns its persistent objects
 * (those with OST__F_PERSISTENT set): the only way up from serializer/ to
 * store/. The store registers one table, once, before it makes its first
 * persistent object (ost__pers_register; a later call with the same table
 * changes nothing); the table is static and never changes after. Each
 * operation runs on the thread that uses the object, is handed a borrowed
 * reference, and is on a hot path (ost_changed, the free of an object):
 * one load of ost__pers and one indirect call.
 * - activate(obj): obj is a ghost (OST__F_GHOST): load its state. 0, or an
 *   OST_E* code with the value message set (ost_value_errmsg).
 * - changed(obj): obj, persistent and not yet OST__F_CHANGED, was changed:
 *   the store records it in its connection's transaction (and sets
 *   OST__F_CHANGED). 0, or OST_EINVAL when no open connection holds obj.
 * - freed(obj): obj is being freed (its last reference went): the store
 *   forgets it (a bulk loader's queued object). */
typedef struct {
    int (*activate)(ost_value obj);
    int (*changed)(ost_value obj);
    void (*freed)(ost_value obj);
} ost__pers_ops;
/* NULL until the store registers its table. */
extern const ost__pers_ops *ost__pers;
void ost__pers_register(const ost__pers_ops *ops);
int ost__activate(ost_value v);
void ost__touch(ost_value v);
#define OST__UNGHOST(v)                                                  \
    do {                                                                 \
        if (OST_UNLIKELY(OST__O(v)->flags & OST__F_GHOST)) ost__activate(v); \
    } while (0)



typedef struct {
    ost_obj h;
    ost_value callable, args, kwargs, state, listitems, dictitems;
    int kind;
} ost_reduce_obj;

typedef struct {
    ost_obj h;
    ost_value pid;
} ost_persref_obj;

#define OST__O(v) ((ost_obj *)(v))
/* The store's marks on an object (OST__F_PERSISTENT, OST__F_GHOST,
 * OST__F_CHANGED; OST__F_SHARED on the classes every connection shares):
 * store/ sets and clears them with ost__pers_mark and reads them with
 * ost__pers_is, never through the header itself; the value layer reads
 * them (OST__UNGHOST, ost_changed). mark clears `clear`, then sets `set`. */
static inline bool ost__pers_is(ost_value v, uint8_t f) { return (OST__O(v)->flags & f) != 0; }
static inline void ost__pers_mark(ost_value v, uint8_t set, uint8_t clear) {
    OST__O(v)->flags = (uint8_t)((OST__O(v)->flags & ~clear) | set);
}

static inline ost__klass *ost__klass_of(ost_value cls) {
    return ((ost_global_obj *)cls)->k;
}
static inline bool ost__slotted(ost_value v) {
    return (OST__O(v)->flags & OST__F_SLOTS) != 0;
}

static inline bool ost__is_small(ost_value v) { return (v & 1) != 0; }
static inline int64_t ost__small_val(ost_value v) {
    return (int64_t)(intptr_t)v >> 1;
}
static inline ost_value ost__small(int64_t i) {
    return (ost_value)(((uint64_t)i << 1) | 1);
}
static inline bool ost__is_heap(ost_value v) { return v && (v & 3) == 0; }

/* Immediate floats: a double whose binary exponent lies in [-62, 64]
 * (magnitudes from about 2.2e-19 to 3.7e19), and +0.0, is kept in the
 * value word itself, tagged 0xE in the low four bits (None, False and True
 * are 0x2, 0x6 and 0xA): sign in bit 63, the biased exponent less 960 (1
 * to 127) in bits 56..62, the 52 mantissa bits in 4..55; all zero above
 * the tag is +0.0. Every other double (-0.0, subnormals, tiny, huge, inf,
 * nan) is a heap float. The bits round-trip
 * exactly, so an immediate float and a heap float of the same value are
 * never both made: ost_float picks one by the value alone. */
#define OST__FLOAT_TAG 0xEu
#define OST__FLOAT_EBASE 960u
static inline bool ost__is_ifloat(ost_value v) { return (v & 0xF) == OST__FLOAT_TAG; }
/* Encodes d as an immediate float; 0 when it does not fit. */
static inline ost_value ost__ifloat(double d) {
    uint64_t b;
    memcpy(&b, &d, 8);
    if (b == 0) return (ost_value)OST__FLOAT_TAG;
    uint64_t e = (b >> 52) & 0x7ff, m = b & (((uint64_t)1 << 52) - 1);
    if (e <= OST__FLOAT_EBASE || e > OST__FLOAT_EBASE + 127) return 0;
    return (ost_value)((b & ((uint64_t)1 << 63)) | (e - OST__FLOAT_EBASE) << 56 | m << 4 |
                       OST__FLOAT_TAG);
}
static inline double ost__ifloat_val(ost_value v) {
    uint64_t x = (uint64_t)v, e = (x >> 56) & 0x7f, b;
    if (e == 0) b = 0;
    else b = (x & ((uint64_t)1 << 63)) | (e + OST__FLOAT_EBASE) << 52 | ((x >> 4) & (((uint64_t)1 << 52) - 1));
    double d;
    memcpy(&d, &b, 8);
    return d;
}
/* The double of a float value, immediate or heap. */
static inline double ost__float_get(ost_value v) {
    return ost__is_ifloat(v) ? ost__ifloat_val(v) : ((const ost_float_obj *)v)->d;
}

static inline int ost__type(ost_value v) {
    if (ost__is_small(v)) return OST_T_INT;
    if (ost__is_ifloat(v)) return OST_T_FLOAT;
    if (v == OST_NONE) return OST_T_NONE;
    if (v == OST_TRUE || v == OST_FALSE) return OST_T_BOOL;
    if (!v) return OST_T_INVALID;
    return OST__O(v)->type;
}
static inline void ost__incref(ost_value v) {
    if (!ost__is_heap(v)) return;
    ost_obj *o = OST__O(v);
    if (OST_UNLIKELY(o->flags & OST__F_SHARED))
        __atomic_fetch_add(&o->refcnt, 1, __ATOMIC_RELAXED);
    else
        o->refcnt++;
}
/* Drops a reference; true when it was the last one. */
static inline bool ost__decref_last(ost_obj *o) {
    if (OST_UNLIKELY(o->flags & OST__F_SHARED))
        return __atomic_sub_fetch(&o->refcnt, 1, __ATOMIC_ACQ_REL) == 0;
    return --o->refcnt == 0;
}

/* allocator (alloc.c) */
void *ost__mem_alloc(size_t n);
void *ost__mem_realloc(void *p, size_t n);
void ost__mem_free(void *p);
/* Allocates a heap value of n bytes (header included) with refcount 1. */
ost_obj *ost__obj_alloc(size_t n, int type);
void ost__obj_free(ost_obj *o, size_t n);
/* A large buffer of at least n bytes in whole 2 MiB huge pages (mmap,
 * MADV_HUGEPAGE); *len gets its size, for ost__buf_unmap. NULL when the
 * pools are off (ASan, a custom allocator: buffers stay malloc'ed, where
 * the sanitizer sees them) or mmap fails: the caller uses malloc. */
void *ost__buf_map(size_t n, size_t *len);
void ost__buf_unmap(void *p, size_t len);
size_t ost__obj_size(const ost_obj *o);
/* Item and entry arrays of containers, whose size the caller keeps. When
 * pooled (the container came from the pools: ost__pooled), arrays of up to
 * 256 bytes come from the pools too; others use the allocator. */
void *ost__arr_alloc(bool pooled, size_t n);
void *ost__arr_realloc(bool pooled, void *p, size_t old, size_t n);
void ost__arr_free(bool pooled, void *p, size_t n);
static inline bool ost__pooled(const ost_obj *o) {
    return o->sizeclass != OST__SC_MALLOC && o->sizeclass != OST__SC_MMAP;
}

/* values (value.c) */
ost_value ost__str_new_uninit(int type, size_t n); /* str/bytes/bytearray */
int ost__dict_insert(ost_value d, ost_value key, ost_value val, uint64_t h);
/* The same, but what it would drop (a repeated key, the value it replaces,
 * or both after a failure) goes to drop[0] and drop[1] (references the
 * caller owns; 0 when none), so that a caller can collect their cycles. */
int ost__dict_insert_keep(ost_value d, ost_value key, ost_value val, uint64_t h,
                          ost_value drop[2]);
int ost__hash(ost_value v, uint64_t *out);
ost_value ost__tuple_new_uninit(size_t n);
/* Calls fn for each child reference of a heap value. */
void ost__children(ost_value v, void (*fn)(ost_value child, void *ud),
                   void *ud);

/* A growable byte buffer (ost_buf) helpers. */
int ost__buf_reserve(ost_buf *b, size_t extra);
int ost__buf_append(ost_buf *b, const void *p, size_t n);
int ost__buf_printf(ost_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Identity table: pointer -> 64-bit value, open addressing, reused. */
typedef struct {
    uintptr_t key;
    uint64_t val;
} ost__ptr_slot;
typedef struct {
    ost__ptr_slot *slots;
    size_t mask; /* size - 1; 0 when unallocated */
    size_t count;
} ost__ptrtab;

int ost__ptrtab_init(ost__ptrtab *t, size_t hint);
void ost__ptrtab_clear(ost__ptrtab *t); /* keep memory, drop entries */
void ost__ptrtab_free(ost__ptrtab *t);
int ost__ptrtab_grow(ost__ptrtab *t);
/* Removes key (if present), keeping probe chains intact. */
void ost__ptrtab_del(ost__ptrtab *t, uintptr_t key);
/* ---- flat records (serializer/flat.c) -----------------------------------
 * The writer makes a positional record (format 4) a "flat" pickle: PROTO,
 * then a tuple (TUPLE1-3, or MARK ... TUPLE) of immediates (BININT1,
 * BININT2, BININT, LONG1, NONE, NEWTRUE, NEWFALSE, BINFLOAT), text and
 * bytes (SHORT_BINUNICODE, BINUNICODE, SHORT_BINBYTES, BINBYTES),
 * references (two ints, TUPLE2, BINPERSID: the pair pid) and lists of
 * them (EMPTY_LIST, then MARK ... APPENDS or APPEND), then STOP, the last
 * byte. Readers that need speed read that subset by hand (store/conn.c's
 * load_fast, ost__flat_scan) and give anything else to the general
 * reader, which words every error. */

/* An int at p (BININT1, BININT2, BININT, or LONG1 of 1 to 8 bytes) in *v;
 * the byte after it, or NULL when p holds none. */
static inline const uint8_t *ost__flat_int(const uint8_t *p, const uint8_t *end, int64_t *v) {
    ptrdiff_t left = end - p;
    if (left < 2) return NULL;
    switch (p[0]) {
    case 'K': *v = p[1]; return p + 2; /* BININT1 */
    case 'M':                          /* BININT2 */
        if (left < 3) return NULL;
        *v = ost__rd_le16(p + 1);
        return p + 3;
    case 'J': /* BININT */
        if (left < 5) return NULL;
        *v = (int32_t)ost__rd_le32(p + 1);
        return p + 5;
    case 0x8a: { /* LONG1: little-endian two's complement */
        unsigned n = p[1];
        if (n == 0 || n > 8 || left < 2 + (ptrdiff_t)n) return NULL;
        uint64_t u = 0;
        for (unsigned k = 0; k < n; k++) u |= (uint64_t)p[2 + k] << (8 * k);
        if (n < 8 && (p[1 + n] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
        *v = (int64_t)u;
        return p + 2 + n;
    }
    }
    return NULL;
}

/* The pair pid (oid, class id) at p, as the writer makes a reference:
 * two ints, TUPLE2, BINPERSID, with oid >= 0 and class id in 1 to
 * 2^32 - 1. The byte after it, or NULL. */
static inline const uint8_t *ost__flat_ref(const uint8_t *p, const uint8_t *end, uint64_t *oid,
                                           uint32_t *cid) {
    int64_t a, b;
    const uint8_t *q = ost__flat_int(p, end, &a);
    if (!q || !(q = ost__flat_int(q, end, &b)) || end - q < 2 || q[0] != 0x86 || q[1] != 'Q' ||
        a < 0 || b <= 0 || b > UINT32_MAX)
        return NULL;
    *oid = (uint64_t)a;
    *cid = (uint32_t)b;
    return q + 2;
}

/* A flat reader's stack: sp values, nm (0 to 2) marks at mark[]. Whether
 * APPEND ('a') or APPENDS ('e') may add to the value under its items,
 * which start at *base: one item above that value (APPEND), or those above
 * the last mark (APPENDS), the value itself above any mark before. */
static inline bool ost__flat_append_at(int op, uint32_t sp, const uint32_t *mark, uint32_t nm,
                                       uint32_t *base) {
    if (op == 'a') {
        *base = sp - 1;
        return sp >= 2 && (!nm || mark[nm - 1] <= sp - 2);
    }
    *base = nm ? mark[nm - 1] : 0;
    return nm && *base > 0 && !(nm == 2 && mark[0] >= *base);
}

/* Whether TUPLE1-3 or TUPLE at p closes the whole state: STOP follows as
 * the last byte, and the tuple takes every value on the stack (TUPLE: from
 * the one mark, at the bottom). */
static inline bool ost__flat_tuple_ends(int op, const uint8_t *p, const uint8_t *end, uint32_t sp,
                                        const uint32_t *mark, uint32_t nm) {
    if (end - p != 2 || p[1] != '.') return false;
    if (op == 't') return nm == 1 && mark[0] == 0;
    return nm == 0 && sp == (uint32_t)(op - 0x85 + 1);
}

/* Whether data[len] is one reference and nothing else (PROTO, the pair
 * pid, STOP: a map entry's value that is an object), its pid in *oid and
 * *cid. */
static inline bool ost__flat_lone_ref(const void *data, size_t len, uint64_t *oid, uint32_t *cid) {
    const uint8_t *p = data, *end = p + len, *q;
    return len >= 8 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5 &&
           (q = ost__flat_ref(p + 2, end, oid, cid)) && end - q == 1 && q[0] == '.';
}

/* True when data[len] is a pickle of one int as the writer makes it
 * (PROTO, an int opcode of ost__flat_int, STOP), with the int in *v: a
 * map value read without the general reader. */
static inline bool ost__flat_lone_int(const void *data, size_t len, int64_t *v) {
    const uint8_t *p = data, *end = p + len, *q;
    return len >= 5 && p[0] == 0x80 && p[1] >= 2 && p[1] <= 5 &&
           (q = ost__flat_int(p + 2, end, v)) && end - q == 1 && q[0] == '.';
}

/* Checks that data[len] is a flat record that the general reader reads
 * without error, and calls ref(ud, oid, cid) for each of its references
 * (in order). 0; 1 (nothing called) for a pickle that is not flat or that
 * holds more than 64 references: read it the general way. */
int ost__flat_scan(const void *data, size_t len,
                   void (*ref)(void *ud, uint64_t oid, uint32_t cid), void *ud);

/* Calls fn(oid) for each persistent reference whose pid is an int or a
 * pair of ints (oid, class id: format 4), found by walking the opcodes
 * without building values. 0 or a reader code. */
int ost__scan_pids(const void *data, size_t len,
                   void (*fn)(void *ud, uint64_t oid), void *ud);

static inline size_t ost__ptr_hash(uintptr_t p) {
    uint64_t x = (uint64_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 29;
    return (size_t)x;
}
/* Returns the slot of key: found (slot->key == key) or the empty slot
 * where it goes. The table must have been initialised. */
static inline ost__ptr_slot *ost__ptrtab_find(ost__ptrtab *t, uintptr_t key) {
    size_t i = ost__ptr_hash(key) & t->mask;
    for (;;) {
        ost__ptr_slot *s = &t->slots[i];
        if (s->key == key || s->key == 0) return s;
        i = (i + 1) & t->mask;
    }
}
/* Inserts key -> val (key must be absent). 0 or OST_ENOMEM. */
static inline int ost__ptrtab_put(ost__ptrtab *t, uintptr_t key,
                                  uint64_t val) {
    if (OST_UNLIKELY((t->count + 1) * 2 > t->mask + 1)) {
        int rc = ost__ptrtab_grow(t);
        if (rc) return rc;
    }
    ost__ptr_slot *s = ost__ptrtab_find(t, key);
    s->key = key;
    s->val = val;
    t->count++;
    return 0;
}

/* writer.c, for tests: on (the default) lets the writer use its one-pass
 * paths (small lists and dicts, plain instances, bursts of small ints and
 * floats); off writes those through the frames, item by item (the item
 * loops of step() stay as they are). The output must be the same. */
void ost__writer_set_fast_paths(ost_writer *w, bool on);
/* Whether a shared object the persistent_id hook answered for gets a memo
 * entry after its BINPERSID (on: the default, docs/hooks.md). Off, every
 * reference calls the hook and writes the pid again, as CPython's Pickler
 * does: the store's records, whose pids are small, save the MEMOIZE byte
 * and the memo insert per reference. */
void ost__writer_set_pid_memo(ost_writer *w, bool on);

/* writer.c, for the store's positional records (format 4): whether inst's
 * state can be written positionally (a slotted instance whose class
 * declares fields and has no getstate, every field set, no undeclared
 * attribute), and the dump of that state: PROTO, its slots in declared
 * order as a tuple (TUPLE1 to TUPLE3, or MARK ... TUPLE), STOP. The tuple
 * is never memoized. Same ownership and errors as ost_dump_state;
 * OST_EINVAL when ost__state_positional(inst) is false. */
bool ost__state_positional(ost_value inst);
/* reader.c: gives state (stolen) to inst as BUILD would (fills slots,
 * calls setstate, or replaces the state), as ost_load_state does with the
 * state it reads. 0 or the error BUILD gives (ost_reader_errmsg says it). */
int ost__apply_state(ost_reader *r, ost_value inst, ost_value state);
int ost__dump_fields(ost_writer *w, ost_value inst, const void **data, size_t *len);

/* reader.c: true when protocol 0-2 name m2.n2 reads back as m.n. */
bool ost__py2_reads_as(const char *m2, const char *n2, const char *m, const char *n);
/* reader.c: true when protocol 0-2 name m2.n2 reads back as one of the
 * builtins the reader builds values of its own from (set, bytes, ...). */
bool ost__py2_reads_as_builtin(const char *m2, const char *n2);

/* repr.c */
void ost__float_repr(double d, char *out, size_t cap);
int ost__int_decimal(ost_value v, ost_buf *out);
int ost__list_reserve(ost_list_obj *l, size_t extra);
/* True for a code point Python's repr shows as it is (str.isprintable(),
 * approximately): false for controls, separators, surrogates... */
bool ost__printable(uint32_t u);
ptrdiff_t ost__field_index(ost_value cls, const char *name, size_t n);
/* value.c: puts one item of a state dict into slotted instance obj: the
 * slot of a declared field or of a field alias when key names one, else
 * the instance's extra dict. key and val are borrowed. 0 or OST_ENOMEM. */
int ost__slots_put(ost_value obj, ost_value key, ost_value val);
/* value.c: the conflict resolver of class cls (ost_class_def.resolve) and,
 * in *ud when ud is not NULL, its ud; NULL when cls has none. */
ost_resolve_fn ost__class_resolver(ost_value cls, void **ud);
/* value.c: whether ost_class_new accepts def (else it fails for memory). */
bool ost__class_def_ok(const ost_class_def *def);
/* value.c: whether name may be a class's or field's name (not empty, no
 * '(', ')' or ','). */
bool ost__name_ok(const char *name);

/* error.c */
/* Formats a message into dst[0..cap). A message longer than cap - 1 bytes
 * loses its middle, not its end, which says what went wrong: the start and
 * the end are kept around "...", cut at UTF-8 character boundaries. */
void ost__vfmt(char *dst, size_t cap, const char *fmt, va_list ap);
void ost__fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The size of a buffer for ost__path_show: a path is shown in at most
 * OST__PATH_SHOWN - 1 bytes. */
#define OST__PATH_SHOWN 201
/* Writes path as messages name it into dst[0..cap), cap >= 16, and
 * returns dst. Every message that names a file or directory shows it
 * through this function, so that a message stays one line of text:
 * control characters, DEL and the other code points Python's repr
 * escapes become \n, \t, \r, \xhh, \uXXXX or \UXXXXXXXX, a backslash
 * becomes \\, and each byte that is not part of valid UTF-8 becomes \xhh
 * (as Python shows the bytes of a path). When what results is longer than
 * cap - 1 bytes, its middle is replaced by "...", keeping the start (where
 * the path is) and the end (the file's name); an escape is never cut. */
char *ost__path_show(char *dst, size_t cap, const char *path);
/* True when s[0..n) is UTF-8 as Python's bytes.decode() accepts it: no
 * lone surrogates, no overlong forms (ost_utf8_check allows surrogates). */
bool ost__utf8_strict(const char *s, size_t n);
/* What a file of st_mode mode is, for messages: "a FIFO", "a directory",
 * "a character device"... (a static string). */
const char *ost__file_kind(unsigned mode);

/* The first member of every handle that keeps a message: what it is, for
 * ost_errmsg (store/store.c), which takes any of them. */
enum {
    OST__H_WRITER = 0x6f737401,
    OST__H_READER,
    OST__H_STORE,
    OST__H_CONN,
    OST__H_LOADER,
    OST__H_SNAP
};

#endif
