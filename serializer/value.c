/* Value constructors, accessors, reference counting, dicts and sets. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "internal.h"

static const char *const type_names[OST_T__COUNT] = {
    "invalid", "NoneType", "bool", "int", "float", "str", "bytes",
    "bytearray", "tuple", "list", "dict", "set", "frozenset", "instance",
    "global", "reduce", "persistent"};

ost_type ost_typeof(ost_value v) { return (ost_type)ost__type(v); }

const char *ost_type_name(ost_type t) {
    return (unsigned)t < OST_T__COUNT ? type_names[t] : "invalid";
}

ost_value ost_incref(ost_value v) {
    ost__incref(v);
    return v;
}

uint32_t ost_refcount(ost_value v) {
    return ost__is_heap(v) ? OST__O(v)->refcnt : 0;
}

/* ---- sizes and children ---------------------------------------------------- */

size_t ost__obj_size(const ost_obj *o) {
    switch (o->type) {
    case OST_T_FLOAT: return sizeof(ost_float_obj);
    case OST_T_INT: return sizeof(ost_int_obj) + ((const ost_int_obj *)o)->n;
    case OST_T_STR:
    case OST_T_BYTES:
    case OST_T_BYTEARRAY:
        if (o->flags & OST__F_LENT) return sizeof(ost_lent_obj);
        return sizeof(ost_str_obj) + ((const ost_str_obj *)o)->len + 1;
    case OST_T_TUPLE:
        return sizeof(ost_tuple_obj) +
               ((const ost_tuple_obj *)o)->len * sizeof(ost_value);
    case OST_T_LIST: return sizeof(ost_list_obj);
    case OST_T_DICT:
    case OST_T_SET:
    case OST_T_FROZENSET: return sizeof(ost_dict_obj);
    case OST_T_INSTANCE:
        if (o->flags & OST__F_SLOTS)
            return sizeof(ost_slots_obj) + ost__nslots((const ost_slots_obj *)o) * sizeof(ost_value);
        return sizeof(ost_inst_obj);
    case OST_T_GLOBAL: return sizeof(ost_global_obj);
    case OST_T_REDUCE: return sizeof(ost_reduce_obj);
    case OST_T_PERSREF: return sizeof(ost_persref_obj);
    }
    return 0;
}

void ost__children(ost_value v, void (*fn)(ost_value, void *), void *ud) {
    ost_obj *o = OST__O(v);
    switch (o->type) {
    case OST_T_TUPLE: {
        ost_tuple_obj *t = (ost_tuple_obj *)o;
        for (size_t i = 0; i < t->len; i++) fn(t->items[i], ud);
        break;
    }
    case OST_T_LIST: {
        ost_list_obj *l = (ost_list_obj *)o;
        for (size_t i = 0; i < l->len; i++) fn(l->items[i], ud);
        break;
    }
    case OST_T_DICT:
    case OST_T_SET:
    case OST_T_FROZENSET: {
        ost_dict_obj *d = (ost_dict_obj *)o;
        for (size_t i = 0; i < d->used; i++) {
            if (!d->entries[i].key) continue;
            fn(d->entries[i].key, ud);
            if (d->entries[i].val) fn(d->entries[i].val, ud);
        }
        break;
    }
    case OST_T_INSTANCE:
        fn(((ost_inst_obj *)o)->cls, ud);
        if (o->flags & OST__F_SLOTS) {
            ost_slots_obj *so = (ost_slots_obj *)o;
            for (size_t i = 0, n = ost__nslots(so); i < n; i++)
                if (so->slots[i]) fn(so->slots[i], ud);
            if (OST_UNLIKELY(o->flags & OST__F_EXTRA)) fn(ost__extra((ost_value)o), ud);
        } else {
            fn(((ost_inst_obj *)o)->state, ud);
            if (((ost_inst_obj *)o)->items) fn(((ost_inst_obj *)o)->items, ud);
        }
        break;
    case OST_T_GLOBAL:
        fn(((ost_global_obj *)o)->module, ud);
        fn(((ost_global_obj *)o)->name, ud);
        break;
    case OST_T_REDUCE: {
        ost_reduce_obj *r = (ost_reduce_obj *)o;
        fn(r->callable, ud);
        fn(r->args, ud);
        if (r->kwargs) fn(r->kwargs, ud);
        if (r->state) fn(r->state, ud);
        if (r->listitems) fn(r->listitems, ud);
        if (r->dictitems) fn(r->dictitems, ud);
        break;
    }
    case OST_T_PERSREF: fn(((ost_persref_obj *)o)->pid, ud); break;
    default: break;
    }
}

const ost__pers_ops *ost__pers;

void ost__pers_register(const ost__pers_ops *ops) {
    __atomic_store_n(&ost__pers, ops, __ATOMIC_RELEASE);
}

/* ---- freeing ---------------------------------------------------------------- */

/* Objects whose count reached zero wait here, so that freeing a chain of a
 * million objects does not recurse. The stack is reused per thread. */
typedef struct {
    ost_obj **items;
    size_t len, cap;
} free_stack;
static OST__TLS_HOT free_stack t_fs;
static OST__TLS_HOT int t_freeing;

static void free_one(ost_obj *o);
static void free_storage(ost_obj *o);

/* The free stack of a thread is given back when the thread ends. */
static pthread_key_t g_fs_key;
static pthread_once_t g_fs_once = PTHREAD_ONCE_INIT;
static void fs_release(void *items) {
    free(items);
    t_fs.items = NULL;
    t_fs.cap = t_fs.len = 0;
}
static void fs_key_init(void) { pthread_key_create(&g_fs_key, fs_release); }

static void child_dead(ost_value c, void *ud) {
    (void)ud;
    if (!ost__is_heap(c)) return;
    ost_obj *o = OST__O(c);
    if (!ost__decref_last(o)) return;
    switch (o->type) { /* no children: freed now, not queued */
    case OST_T_FLOAT:
    case OST_T_INT:
    case OST_T_STR:
    case OST_T_BYTES:
    case OST_T_BYTEARRAY: free_storage(o); return;
    default: break;
    }
    if (t_fs.len == t_fs.cap) {
        size_t cap = t_fs.cap ? t_fs.cap * 2 : 256;
        ost_obj **n = realloc(t_fs.items, cap * sizeof *n);
        if (!n) { /* rare: fall back to recursion for this object */
            free_one(o);
            return;
        }
        if (!t_fs.items) { /* first use in this thread */
            pthread_once(&g_fs_once, fs_key_init);
            pthread_setspecific(g_fs_key, n);
        } else if (n != t_fs.items)
            pthread_setspecific(g_fs_key, n);
        t_fs.items = n;
        t_fs.cap = cap;
    }
    t_fs.items[t_fs.len++] = o;
}

/* Frees what an object owns besides its child references, then it. */
static void free_storage(ost_obj *o) {
    if (OST_UNLIKELY(o->flags & OST__F_PERSISTENT) && ost__pers)
        ost__pers->freed((ost_value)o); /* a bulk loader forgets it */
    /* the kept fields were released with the children: forget the entry */
    if (OST_UNLIKELY(o->flags & OST__F_EXTRA)) (void)ost__extra_take((ost_value)o);
    /* only an mmap'ed block needs its size to be freed: a pooled one
     * knows its size class, a malloc'ed one needs none (and instances,
     * whose size comes from their class, already released, are never
     * mmap'ed) */
    size_t n = o->sizeclass == OST__SC_MMAP ? ost__obj_size(o) : 0;
    switch (o->type) {
    case OST_T_LIST:
        ost__arr_free(ost__pooled(o), ((ost_list_obj *)o)->items,
                      ((ost_list_obj *)o)->cap * sizeof(ost_value));
        break;
    case OST_T_DICT:
    case OST_T_SET:
    case OST_T_FROZENSET:
        ost__arr_free(ost__pooled(o), ((ost_dict_obj *)o)->entries,
                      ((ost_dict_obj *)o)->cap * sizeof(ost_entry));
        ost__mem_free(((ost_dict_obj *)o)->index);
        break;
    case OST_T_BYTES:
        if (o->flags & OST__F_LENT) ost__lender_drop(((ost_lent_obj *)o)->lender);
        break;
    case OST_T_GLOBAL: {
        ost__klass *k = ((ost_global_obj *)o)->k;
        if (k) {
            for (size_t i = 0; i < k->nfields; i++) {
                ost_decref(k->fields[i]);
                ost_decref(k->fields[i]);
            }
            for (size_t i = 0; i < k->naliases; i++) ost_decref(k->alias_names[i]);
            /* def.nfields: a class that failed to build has nfields 0 */
            for (size_t i = 0; k->defaults && i < k->def.nfields; i++) ost_decref(k->defaults[i]);
            ost__mem_free(k);
        }
        break;
    }
    default: break;
    }
    ost__obj_free(o, n);
}

static void free_one(ost_obj *o) {
    if (o->type == OST_T_LIST) { /* the big containers: no call per item */
        ost_list_obj *l = (ost_list_obj *)o;
        for (size_t i = 0; i < l->len; i++)
            if (ost__is_heap(l->items[i])) child_dead(l->items[i], NULL);
    } else
        ost__children((ost_value)o, child_dead, NULL);
    free_storage(o);
}

static void dealloc(ost_obj *o) {
    if (t_freeing) { /* called from inside a free: just queue it */
        o->refcnt = 1;
        child_dead((ost_value)o, NULL);
        return;
    }
    t_freeing = 1;
    free_one(o);
    while (t_fs.len) free_one(t_fs.items[--t_fs.len]);
    t_freeing = 0;
    if (t_fs.cap > 4096) { /* give back what a huge graph needed */
        free(t_fs.items);
        pthread_setspecific(g_fs_key, NULL);
        t_fs.items = NULL;
        t_fs.cap = 0;
    }
}

void ost_decref(ost_value v) {
    if (!ost__is_heap(v)) return;
    ost_obj *o = OST__O(v);
    if (ost__decref_last(o)) dealloc(o);
}

/* ost_release: trial deletion (as CPython's collector) over the graph
 * reachable from v. */
typedef struct {
    ost__ptrtab tab; /* object -> internal references seen */
    ost_value *stack;
    size_t len, cap;
    ost_value *ext; /* references from garbage to persistent objects */
    size_t next, capext;
    int err;
} rel_ctx;

/* Persistent objects are held by their connection's cache, and shared
 * classes by their registry: ost_release treats them as held from outside
 * and does not walk into them. */
static inline bool rel_boundary(ost_value ch) {
    return (OST__O(ch)->flags & (OST__F_PERSISTENT | OST__F_SHARED)) != 0;
}

static void rel_push(rel_ctx *c, ost_value v) {
    if (ost__reserve((void **)&c->stack, &c->cap, c->len + 1, sizeof *c->stack, 256)) {
        c->err = OST_ENOMEM;
        return;
    }
    c->stack[c->len++] = v;
}

static void rel_visit(ost_value ch, void *ud) {
    rel_ctx *c = ud;
    if (!ost__is_heap(ch) || c->err || rel_boundary(ch)) return;
    ost__ptr_slot *s = ost__ptrtab_find(&c->tab, ch);
    if (s->key) {
        s->val++;
        return;
    }
    if (ost__ptrtab_put(&c->tab, ch, 1)) {
        c->err = OST_ENOMEM;
        return;
    }
    rel_push(c, ch);
}

static void rel_mark(ost_value ch, void *ud) {
    rel_ctx *c = ud;
    if (!ost__is_heap(ch) || c->err) return;
    ost__ptr_slot *s = ost__ptrtab_find(&c->tab, ch);
    if (s->key && s->val != UINT64_MAX) {
        s->val = UINT64_MAX;
        rel_push(c, ch);
    }
}

static void rel_unlink(ost_value ch, void *ud) {
    rel_ctx *c = ud;
    if (!ost__is_heap(ch)) return;
    ost__ptr_slot *s = ost__ptrtab_find(&c->tab, ch);
    /* a reference from garbage to a live object is dropped */
    if (s->key && s->val == UINT64_MAX) OST__O(ch)->refcnt--;
    else if (!s->key) { /* a persistent object: dropped after the frees */
        if (ost__reserve((void **)&c->ext, &c->capext, c->next + 1, sizeof *c->ext, 16))
            return; /* keep the reference: a leak, never a crash */
        c->ext[c->next++] = ch;
    }
}

/* Looks for a possible cycle near the released object: fails (ok false)
 * when an object two references below it can hold references itself.
 * Leaves (numbers, text, globals, which hold only their two names) and the
 * objects the walk stops at cannot be part of a cycle. */
typedef struct {
    bool ok;
    int depth;
} rel_probe_ctx;

static void rel_probe(ost_value ch, void *ud) {
    rel_probe_ctx *p = ud;
    if (!p->ok || !ost__is_heap(ch) || rel_boundary(ch)) return;
    switch (OST__O(ch)->type) {
    case OST_T_INT:
    case OST_T_FLOAT:
    case OST_T_STR:
    case OST_T_BYTES:
    case OST_T_BYTEARRAY:
    case OST_T_GLOBAL: return;
    default:
        if (p->depth) {
            p->ok = false;
            return;
        }
        p->depth = 1;
        ost__children(ch, rel_probe, p);
        p->depth = 0;
    }
}

void ost_release(ost_value v) {
    if (!ost__is_heap(v)) return;
    /* The common cases (an object cache drops a record's object, a reader
     * drops a record's state dict): v and what it refers to have only
     * leaves below them, so no cycle passes through them and the walk
     * below would come to what ost_decref does; it costs two allocations
     * and three scans of a table. */
    rel_probe_ctx probe = {true, 0};
    ost__children(v, rel_probe, &probe);
    if (probe.ok) {
        ost_decref(v);
        return;
    }
    rel_ctx c = {0};
    if (ost__ptrtab_init(&c.tab, 4)) goto fallback; /* most graphs released are small */
    ost__ptrtab_put(&c.tab, v, 1); /* the reference being released */
    rel_push(&c, v);
    /* 1. find everything reachable, counting internal references */
    while (c.len && !c.err) {
        ost_value x = c.stack[--c.len];
        ost__children(x, rel_visit, &c);
    }
    if (c.err) goto fallback;
    /* 2. objects with more references than seen are held from outside:
     * they and all they reach stay alive (val = UINT64_MAX marks live) */
    for (size_t i = 0; i <= c.tab.mask; i++) {
        ost__ptr_slot *s = &c.tab.slots[i];
        if (s->key && s->val != UINT64_MAX && OST__O(s->key)->refcnt > s->val) {
            s->val = UINT64_MAX;
            rel_push(&c, s->key);
            while (c.len && !c.err) {
                ost_value x = c.stack[--c.len];
                ost__children(x, rel_mark, &c);
            }
        }
    }
    if (c.err) goto fallback;
    /* 3. the rest is garbage: drop its references to live objects, then
     * free it without looking at counts */
    for (size_t i = 0; i <= c.tab.mask; i++) {
        ost__ptr_slot *s = &c.tab.slots[i];
        if (s->key && s->val != UINT64_MAX) ost__children(s->key, rel_unlink, &c);
    }
    for (size_t i = 0; i <= c.tab.mask; i++) {
        ost__ptr_slot *s = &c.tab.slots[i];
        if (s->key && s->val != UINT64_MAX) free_storage(OST__O(s->key));
    }
    /* v held from outside as well: only the released reference goes */
    if (ost__ptrtab_find(&c.tab, v)->val == UINT64_MAX) OST__O(v)->refcnt--;
    for (size_t i = 0; i < c.next; i++) ost_decref(c.ext[i]);
    free(c.ext);
    ost__ptrtab_free(&c.tab);
    free(c.stack);
    return;
fallback:
    ost__ptrtab_free(&c.tab);
    free(c.stack);
    free(c.ext);
    ost_decref(v);
}

/* ---- scalars --------------------------------------------------------------- */

ost_value ost_int(int64_t i) {
    if (i >= OST_SMALLINT_MIN && i <= OST_SMALLINT_MAX) return ost__small(i);
    uint8_t b[8];
    ost__le64(b, (uint64_t)i);
    return ost_int_from_bytes(b, 8);
}

ost_value ost_int_from_bytes(const uint8_t *le, size_t n) {
    /* strip redundant sign bytes */
    while (n > 1 && ((le[n - 1] == 0 && !(le[n - 2] & 0x80)) ||
                     (le[n - 1] == 0xff && (le[n - 2] & 0x80))))
        n--;
    if (n == 0) return ost__small(0);
    if (n <= 8) {
        uint64_t u = 0;
        for (size_t k = 0; k < n; k++) u |= (uint64_t)le[k] << (8 * k);
        if (n < 8 && (le[n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * n);
        int64_t i = (int64_t)u;
        if (i >= OST_SMALLINT_MIN && i <= OST_SMALLINT_MAX) return ost__small(i);
    }
    if (n > UINT32_MAX) return 0;
    ost_int_obj *o = (ost_int_obj *)ost__obj_alloc(sizeof *o + n, OST_T_INT);
    if (!o) return 0;
    o->n = (uint32_t)n;
    memcpy(o->b, le, n);
    return (ost_value)o;
}

int ost_int_value(ost_value v, int64_t *out) {
    if (ost__is_small(v)) {
        *out = ost__small_val(v);
        return 0;
    }
    if (v == OST_TRUE || v == OST_FALSE) {
        *out = v == OST_TRUE;
        return 0;
    }
    if (ost__type(v) != OST_T_INT) return OST_ETYPE;
    ost_int_obj *o = (ost_int_obj *)v;
    if (o->n > 8) return OST_ELIMIT;
    uint64_t u = 0;
    for (size_t k = 0; k < o->n; k++) u |= (uint64_t)o->b[k] << (8 * k);
    if (o->n < 8 && (o->b[o->n - 1] & 0x80)) u |= ~(uint64_t)0 << (8 * o->n);
    *out = (int64_t)u;
    return 0;
}

size_t ost_int_to_bytes(ost_value v, uint8_t *buf, size_t cap) {
    int t = ost__type(v);
    if (t == OST_T_INT && !ost__is_small(v)) {
        ost_int_obj *o = (ost_int_obj *)v;
        if (cap >= o->n) memcpy(buf, o->b, o->n);
        return o->n;
    }
    int64_t i;
    if (ost_int_value(v, &i)) return 0;
    if (i == 0) return 0;
    uint8_t b[8];
    size_t n = 8;
    ost__le64(b, (uint64_t)i);
    while (n > 1 && ((b[n - 1] == 0 && !(b[n - 2] & 0x80)) ||
                     (b[n - 1] == 0xff && (b[n - 2] & 0x80))))
        n--;
    if (cap >= n) memcpy(buf, b, n);
    return n;
}

ost_value ost_int_from_decimal(const char *s, size_t n) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (i == n) return 0;
    /* magnitude as little-endian bytes, multiplied by 10 per digit */
    size_t cap = (n - i) / 2 + 2;
    uint8_t *mag = calloc(cap + 1, 1);
    if (!mag) return 0;
    size_t len = 1;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            free(mag);
            return 0;
        }
        unsigned carry = (unsigned)(s[i] - '0');
        for (size_t k = 0; k < len; k++) {
            unsigned x = mag[k] * 10u + carry;
            mag[k] = (uint8_t)x;
            carry = x >> 8;
        }
        if (carry) mag[len++] = (uint8_t)carry;
    }
    mag[len++] = 0; /* room for the sign bit */
    if (neg) { /* two's complement */
        unsigned carry = 1;
        for (size_t k = 0; k < len; k++) {
            unsigned x = (uint8_t)~mag[k] + carry;
            mag[k] = (uint8_t)x;
            carry = x >> 8;
        }
    }
    ost_value v = ost_int_from_bytes(mag, len);
    free(mag);
    return v;
}

ost_value ost_float(double d) {
    ost_value iv = ost__ifloat(d);
    if (iv) return iv;
    ost_float_obj *o = (ost_float_obj *)ost__obj_alloc(sizeof *o, OST_T_FLOAT);
    if (!o) return 0;
    o->d = d;
    return (ost_value)o;
}

double ost_float_value(ost_value v) {
    int t = ost__type(v);
    if (t == OST_T_FLOAT) return ost__float_get(v);
    if (t == OST_T_INT || t == OST_T_BOOL) {
        int64_t i;
        if (ost_int_value(v, &i) == 0) return (double)i;
        /* big int: fold its bytes */
        ost_int_obj *o = (ost_int_obj *)v;
        bool neg = o->b[o->n - 1] & 0x80;
        double d = 0;
        for (size_t k = o->n; k-- > 0;) d = d * 256.0 + (neg ? (uint8_t)~o->b[k] : o->b[k]);
        return neg ? -(d + 1) : d;
    }
    return NAN;
}

/* ---- text and bytes --------------------------------------------------------- */

int ost_utf8_check(const char *str, size_t n, size_t *bad) {
    const uint8_t *s = (const uint8_t *)str;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs, eight bytes at a time */
        while (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (w & 0x8080808080808080ULL) break;
            i += 8;
        }
        if (i >= n) break;
        if (n - i < 8) { /* a short tail: one test when it is all ASCII */
            uint8_t acc = 0;
            for (size_t k = i; k < n; k++) acc |= s[k];
            if (acc < 0x80) break;
        }
        uint8_t c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) need = 1;
        else if (c == 0xe0) need = 2, lo = 0xa0;
        else if (c >= 0xe1 && c <= 0xef) need = 2; /* ED: surrogates pass */
        else if (c == 0xf0) need = 3, lo = 0x90;
        else if (c >= 0xf1 && c <= 0xf3) need = 3;
        else if (c == 0xf4) need = 3, hi = 0x8f;
        else goto fail;
        if (n - i <= need) goto fail;
        if (s[i + 1] < lo || s[i + 1] > hi) goto fail;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xc0) != 0x80) goto fail;
        i += need + 1;
    }
    return 0;
fail:
    if (bad) *bad = i;
    return OST_EUTF8;
}

ost_value ost__str_new_uninit(int type, size_t n) {
    if (n > OST__STR_MAX) return 0;
    ost_str_obj *o = (ost_str_obj *)ost__obj_alloc(sizeof *o + n + 1, type);
    if (!o) return 0;
    o->len = (uint32_t)n;
    o->data[n] = 0;
    return (ost_value)o;
}

static ost_value str_copy(int type, const void *p, size_t n) {
    ost_value v = ost__str_new_uninit(type, n);
    if (v && n) memcpy(((ost_str_obj *)v)->data, p, n);
    return v;
}

ost_value ost_str(const char *s, size_t n) {
    if (ost_utf8_check(s, n, NULL)) return 0;
    return str_copy(OST_T_STR, s, n);
}
ost_value ost_str_c(const char *s) { return ost_str(s, strlen(s)); }
ost_value ost_bytes(const void *p, size_t n) {
    return str_copy(OST_T_BYTES, p, n);
}
ost_value ost_bytearray(const void *p, size_t n) {
    return str_copy(OST_T_BYTEARRAY, p, n);
}

const char *ost_data(ost_value v, size_t *len) {
    int t = ost__type(v);
    if (t != OST_T_STR && t != OST_T_BYTES && t != OST_T_BYTEARRAY) {
        if (len) *len = 0;
        return NULL;
    }
    ost_str_obj *o = (ost_str_obj *)v;
    if (len) *len = o->len;
    return ost__sdata(o);
}

size_t ost_len(ost_value v) {
    switch (ost__type(v)) {
    case OST_T_STR:
    case OST_T_BYTES:
    case OST_T_BYTEARRAY: return ((ost_str_obj *)v)->len;
    case OST_T_TUPLE: return ((ost_tuple_obj *)v)->len;
    case OST_T_LIST: return ((ost_list_obj *)v)->len;
    case OST_T_DICT:
    case OST_T_SET:
    case OST_T_FROZENSET: return ((ost_dict_obj *)v)->len;
    default: return 0;
    }
}

/* ---- tuples and lists ---------------------------------------------------- */

ost_value ost__tuple_new_uninit(size_t n) {
    if (n > (SIZE_MAX - sizeof(ost_tuple_obj)) / sizeof(ost_value)) return 0;
    return (ost_value)ost__obj_alloc(
        sizeof(ost_tuple_obj) + n * sizeof(ost_value), OST_T_TUPLE);
}

ost_value ost_tuple_new(size_t n) {
    ost_value v = ost__tuple_new_uninit(n);
    if (!v) return 0;
    ost_tuple_obj *t = (ost_tuple_obj *)v;
    t->len = n;
    for (size_t i = 0; i < n; i++) t->items[i] = OST_NONE;
    return v;
}

int ost_tuple_set(ost_value t, size_t i, ost_value item) {
    if (ost__type(t) != OST_T_TUPLE || i >= ((ost_tuple_obj *)t)->len || !item) {
        ost_decref(item);
        return OST_EINVAL;
    }
    ost_tuple_obj *o = (ost_tuple_obj *)t;
    ost_value old = o->items[i];
    o->items[i] = item;
    ost_decref(old);
    return 0;
}

ost_value ost_list_new(size_t cap) {
    ost_list_obj *l = (ost_list_obj *)ost__obj_alloc(sizeof *l, OST_T_LIST);
    if (!l) return 0;
    l->len = 0;
    l->cap = 0;
    l->items = NULL;
    if (cap) {
        if (cap > SIZE_MAX / sizeof(ost_value) ||
            !(l->items = ost__arr_alloc(ost__pooled(&l->h), cap * sizeof(ost_value)))) {
            ost__obj_free(&l->h, sizeof *l);
            return 0;
        }
        l->cap = cap;
    }
    return (ost_value)l;
}

int ost__list_reserve(ost_list_obj *l, size_t extra) {
    if (l->cap - l->len >= extra) return 0;
    size_t cap = l->cap ? l->cap : 4;
    while (cap - l->len < extra) {
        if (cap > SIZE_MAX / 2 / sizeof(ost_value)) return OST_ENOMEM;
        cap *= 2;
    }
    ost_value *n = ost__arr_realloc(ost__pooled(&l->h), l->items, l->cap * sizeof *n,
                                    cap * sizeof *n);
    if (!n) return OST_ENOMEM;
    l->items = n;
    l->cap = cap;
    return 0;
}

int ost_list_append(ost_value lv, ost_value item) {
    if (ost__type(lv) != OST_T_LIST || !item) {
        ost_decref(item);
        return OST_ETYPE;
    }
    ost_list_obj *l = (ost_list_obj *)lv;
    if (OST_UNLIKELY(l->len == l->cap) && ost__list_reserve(l, 1)) {
        ost_decref(item);
        return OST_ENOMEM;
    }
    l->items[l->len++] = item;
    return 0;
}

int ost_list_set(ost_value lv, size_t i, ost_value item) {
    if (ost__type(lv) != OST_T_LIST || i >= ((ost_list_obj *)lv)->len || !item) {
        ost_decref(item);
        return OST_EINVAL;
    }
    ost_list_obj *l = (ost_list_obj *)lv;
    ost_value old = l->items[i];
    l->items[i] = item;
    ost_decref(old);
    return 0;
}

ost_value ost_item(ost_value seq, size_t i) {
    int t = ost__type(seq);
    if (t == OST_T_TUPLE && i < ((ost_tuple_obj *)seq)->len)
        return ((ost_tuple_obj *)seq)->items[i];
    if (t == OST_T_LIST && i < ((ost_list_obj *)seq)->len)
        return ((ost_list_obj *)seq)->items[i];
    return 0;
}

/* ---- hashing ---------------------------------------------------------------- */

#define HASH_BITS 61
#define HASH_MOD (((uint64_t)1 << HASH_BITS) - 1)

static uint64_t hash_u64(uint64_t u) { return u % HASH_MOD; }

static uint64_t hash_int(ost_value v) {
    int64_t i;
    if (ost_int_value(v, &i) == 0) {
        if (i >= 0) return hash_u64((uint64_t)i);
        uint64_t m = hash_u64((uint64_t)0 - (uint64_t)i);
        return (uint64_t)0 - m;
    }
    ost_int_obj *o = (ost_int_obj *)v;
    bool neg = o->b[o->n - 1] & 0x80;
    /* |v| for negative v is ~v + 1 */
    uint64_t x = 0;
    for (size_t k = o->n; k-- > 0;) {
        uint8_t byte = neg ? (uint8_t)~o->b[k] : o->b[k];
        x = (uint64_t)(((unsigned __int128)x * 256 + byte) % HASH_MOD);
    }
    if (neg) x = (x + 1) % HASH_MOD;
    return neg ? (uint64_t)0 - x : x;
}

static uint64_t hash_double(double v) {
    if (isinf(v)) return v > 0 ? 314159 : (uint64_t)-314159;
    if (isnan(v)) return 0;
    int e;
    double m = frexp(v, &e);
    int sign = 1;
    if (m < 0) {
        sign = -1;
        m = -m;
    }
    uint64_t x = 0;
    while (m) {
        x = ((x << 28) & HASH_MOD) | x >> (HASH_BITS - 28);
        m *= 268435456.0;
        e -= 28;
        uint64_t y = (uint64_t)m;
        m -= (double)y;
        x += y;
        if (x >= HASH_MOD) x -= HASH_MOD;
    }
    e = e >= 0 ? e % HASH_BITS : HASH_BITS - 1 - ((-1 - e) % HASH_BITS);
    x = ((x << e) & HASH_MOD) | x >> (HASH_BITS - e);
    return sign < 0 ? (uint64_t)0 - x : x;
}

static uint64_t hash_bytes(const char *p, size_t n, uint64_t seed) {
    uint64_t h = seed ^ (n * 0x9e3779b97f4a7c15ULL);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
    }
    uint64_t w = 0;
    memcpy(&w, p + i, n - i);
    h = (h ^ w) * 0x94d049bb133111ebULL;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 32;
    return h ? h : 1;
}

static uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

/* Hash of a value that needs no walk: not a non-empty tuple, and not an
 * instance, reduce value or persistent reference (ost__hash follows
 * those to their class, callable or pid). */
static int hash_leaf(ost_value v, uint64_t *out) {
    switch (ost__type(v)) {
    case OST_T_NONE: *out = 0x1234567; return 0;
    case OST_T_BOOL: *out = v == OST_TRUE; return 0;
    case OST_T_INT: *out = hash_int(v); return 0;
    case OST_T_FLOAT: *out = hash_double(ost__float_get(v)); return 0;
    case OST_T_STR:
    case OST_T_BYTES: {
        ost_str_obj *s = (ost_str_obj *)v;
        *out = hash_bytes(ost__sdata(s), s->len, 0x5bd1e995);
        return 0;
    }
    case OST_T_TUPLE: /* empty */
        *out = 0x345678;
        return 0;
    case OST_T_FROZENSET: {
        ost_dict_obj *d = (ost_dict_obj *)v;
        uint64_t h = 0x7a6b5c + d->len;
        for (size_t i = 0; i < d->used; i++)
            if (d->entries[i].key) h += mix(d->entries[i].hash);
        *out = h;
        return 0;
    }
    case OST_T_GLOBAL: {
        ost_global_obj *g = (ost_global_obj *)v;
        uint64_t a, b;
        hash_leaf(g->module, &a);
        hash_leaf(g->name, &b);
        *out = mix(a) ^ b;
        return 0;
    }
    default: return OST_ETYPE;
    }
}

/* Tuples nest without limit (a pickle of a million TUPLE1 opcodes makes a
 * million levels, and may use it as a dict key), so the hash walks them
 * with an explicit stack instead of recursing: each frame folds its items'
 * hashes, h = mix(h ^ hash(item)) + i, in order. */
typedef struct {
    ost_tuple_obj *t;
    size_t i;
    uint64_t h;
} hash_frame;

/* Tuples can also share items: t0 = (t1, t1), t1 = (t2, t2)... (DUP and
 * TUPLE2 forty times in 80 bytes of pickle) has 2^40 paths. Past
 * HASH_MEMO_AFTER tuples, the hash of each finished tuple is kept by
 * address, so the walk visits each tuple once. */
#define HASH_MEMO_AFTER 4096

int ost__hash(ost_value v, uint64_t *out) {
    switch (ost__type(v)) { /* the common case: no walk, nothing to set up */
    case OST_T_INSTANCE:
    case OST_T_REDUCE:
    case OST_T_PERSREF:
    case OST_T_TUPLE: break;
    default: return hash_leaf(v, out);
    }
    hash_frame local[8], *st = local;
    size_t n = 0, cap = 8, steps = 0;
    ost__ptrtab memo = {0};
    uint64_t x;
    int rc = 0;
    for (;;) {
        /* descend to a leaf, opening a frame per non-empty tuple */
        switch (ost__type(v)) {
        case OST_T_INSTANCE: /* equal instances share a class */
            v = ((ost_inst_obj *)v)->cls;
            continue;
        case OST_T_REDUCE: v = ((ost_reduce_obj *)v)->callable; continue;
        case OST_T_PERSREF: v = ((ost_persref_obj *)v)->pid; continue;
        case OST_T_TUPLE:
            if (ost_len(v)) {
                if (memo.slots) {
                    ost__ptr_slot *s = ost__ptrtab_find(&memo, v);
                    if (s->key) {
                        x = s->val;
                        goto ascend;
                    }
                } else if (++steps > HASH_MEMO_AFTER && ost__ptrtab_init(&memo, 64)) {
                    rc = OST_ENOMEM;
                    goto out;
                }
                if (n == cap) {
                    hash_frame *s = st == local ? malloc(2 * cap * sizeof *s)
                                                : realloc(st, 2 * cap * sizeof *s);
                    if (!s) {
                        rc = OST_ENOMEM;
                        goto out;
                    }
                    if (st == local) memcpy(s, local, sizeof local);
                    st = s;
                    cap *= 2;
                }
                hash_frame *f = &st[n++];
                f->t = (ost_tuple_obj *)v;
                f->i = 0;
                f->h = 0x345678 + f->t->len;
                v = f->t->items[0];
                continue;
            }
            break;
        default: break;
        }
        if ((rc = hash_leaf(v, &x)) != 0) goto out;
    ascend: /* fold x into the open frames until one has items left */
        for (;;) {
            if (!n) {
                *out = x;
                goto out;
            }
            hash_frame *f = &st[n - 1];
            f->h = mix(f->h ^ x) + f->i;
            if (++f->i < f->t->len) {
                v = f->t->items[f->i];
                break;
            }
            x = f->h;
            n--;
            if (memo.slots && !ost__ptrtab_find(&memo, (uintptr_t)f->t)->key &&
                ost__ptrtab_put(&memo, (uintptr_t)f->t, x)) {
                rc = OST_ENOMEM;
                goto out;
            }
        }
    }
out:
    if (st != local) free(st);
    ost__ptrtab_free(&memo);
    return rc;
}

int ost_hash(ost_value v, uint64_t *out) { return ost__hash(v, out); }

/* ---- dicts and sets ------------------------------------------------------- */

static ost_value dict_alloc(int type) {
    ost_dict_obj *d = (ost_dict_obj *)ost__obj_alloc(sizeof *d, type);
    if (!d) return 0;
    d->len = d->used = d->cap = 0;
    d->entries = NULL;
    d->index = NULL;
    d->mask = 0;
    return (ost_value)d;
}
ost_value ost_dict_new(void) { return dict_alloc(OST_T_DICT); }
ost_value ost_set_new(void) { return dict_alloc(OST_T_SET); }
ost_value ost_frozenset_new(void) { return dict_alloc(OST_T_FROZENSET); }

static inline bool key_eq(ost_value a, uint64_t ha, const ost_entry *e) {
    if (e->key == a) return true;
    if (e->hash != ha) return false;
    if (ost__type(a) == OST_T_STR && ost__type(e->key) == OST_T_STR) {
        ost_str_obj *x = (ost_str_obj *)a, *y = (ost_str_obj *)e->key;
        return x->len == y->len && memcmp(x->data, y->data, x->len) == 0;
    }
    return ost_equal(a, e->key);
}

/* Returns the entry index of key, or -1. */
static ptrdiff_t dict_find(ost_dict_obj *d, ost_value key, uint64_t h) {
    if (!d->mask) {
        for (size_t i = 0; i < d->used; i++)
            if (d->entries[i].key && key_eq(key, h, &d->entries[i]))
                return (ptrdiff_t)i;
        return -1;
    }
    size_t i = (size_t)mix(h) & d->mask;
    for (;;) {
        uint32_t s = d->index[i];
        if (!s) return -1;
        ost_entry *e = &d->entries[s - 1];
        if (e->key && key_eq(key, h, e)) return (ptrdiff_t)(s - 1);
        i = (i + 1) & d->mask;
    }
}

static int dict_reindex(ost_dict_obj *d, size_t want) {
    size_t n = 16;
    while (n < want * 2) n <<= 1;
    uint32_t *idx = ost__mem_alloc(n * sizeof *idx);
    if (!idx) return OST_ENOMEM;
    memset(idx, 0, n * sizeof *idx);
    ost__mem_free(d->index);
    d->index = idx;
    d->mask = n - 1;
    for (size_t k = 0; k < d->used; k++) {
        if (!d->entries[k].key) continue;
        size_t i = (size_t)mix(d->entries[k].hash) & d->mask;
        while (idx[i]) i = (i + 1) & d->mask;
        idx[i] = (uint32_t)(k + 1);
    }
    return 0;
}

/* Inserts a new key (known to be absent) with hash h. Steals nothing. */
static int dict_add(ost_dict_obj *d, ost_value key, ost_value val, uint64_t h) {
    if (d->used == d->cap) {
        if (d->len < d->used / 2 && d->used > 8) { /* compact tombstones */
            size_t j = 0;
            for (size_t i = 0; i < d->used; i++)
                if (d->entries[i].key) d->entries[j++] = d->entries[i];
            d->used = j;
            if (d->mask && dict_reindex(d, d->cap)) {
                /* the old index points at moved entries: drop it and
                 * search linearly until a later reindex succeeds */
                ost__mem_free(d->index);
                d->index = NULL;
                d->mask = 0;
                return OST_ENOMEM;
            }
        } else {
            size_t cap = d->cap ? d->cap * 2 : 4;
            if (cap >= UINT32_MAX) return OST_ENOMEM;
            ost_entry *e = ost__arr_realloc(ost__pooled(&d->h), d->entries,
                                            d->cap * sizeof *e, cap * sizeof *e);
            if (!e) return OST_ENOMEM;
            d->entries = e;
            d->cap = cap;
        }
    }
    if (d->used >= OST__DICT_LINEAR && (d->used + 1) * 2 > d->mask + 1) {
        if (dict_reindex(d, d->cap > d->used + 1 ? d->cap : d->used + 1))
            return OST_ENOMEM;
    }
    ost_entry *e = &d->entries[d->used];
    e->key = key;
    e->val = val;
    e->hash = h;
    if (d->mask) {
        size_t i = (size_t)mix(h) & d->mask;
        while (d->index[i]) i = (i + 1) & d->mask;
        d->index[i] = (uint32_t)(d->used + 1);
    }
    d->used++;
    d->len++;
    return 0;
}

int ost__dict_insert_keep(ost_value dv, ost_value key, ost_value val, uint64_t h,
                          ost_value drop[2]) {
    ost_dict_obj *d = (ost_dict_obj *)dv;
    drop[0] = drop[1] = 0;
    ptrdiff_t at = dict_find(d, key, h);
    if (at >= 0) {
        ost_entry *e = &d->entries[at];
        drop[0] = key;
        if (val) {
            drop[1] = e->val;
            e->val = val;
        }
        return 0;
    }
    int rc = dict_add(d, key, val, h);
    if (rc) {
        drop[0] = key;
        drop[1] = val;
    }
    return rc;
}

int ost__dict_insert(ost_value dv, ost_value key, ost_value val, uint64_t h) {
    ost_dict_obj *d = (ost_dict_obj *)dv;
    ptrdiff_t at = dict_find(d, key, h);
    if (at >= 0) {
        ost_entry *e = &d->entries[at];
        ost_decref(key);
        if (val) {
            ost_value old = e->val;
            e->val = val;
            ost_decref(old);
        }
        return 0;
    }
    int rc = dict_add(d, key, val, h);
    if (rc) {
        ost_decref(key);
        ost_decref(val);
    }
    return rc;
}

int ost_dict_set(ost_value d, ost_value key, ost_value val) {
    uint64_t h;
    int rc;
    if (ost__type(d) != OST_T_DICT || !key || !val) rc = OST_EINVAL;
    else if ((rc = ost__hash(key, &h)) == 0)
        return ost__dict_insert(d, key, val, h);
    ost_decref(key);
    ost_decref(val);
    return rc;
}

ost_value ost_dict_get(ost_value dv, ost_value key) {
    uint64_t h;
    if (ost__type(dv) != OST_T_DICT || ost__hash(key, &h)) return 0;
    ost_dict_obj *d = (ost_dict_obj *)dv;
    ptrdiff_t at = dict_find(d, key, h);
    return at >= 0 ? d->entries[at].val : 0;
}

ost_value ost_dict_get_c(ost_value d, const char *key) {
    size_t n = strlen(key);
    ost_value k = str_copy(OST_T_STR, key, n);
    if (!k) return 0;
    ost_value v = ost_dict_get(d, k);
    ost_decref(k);
    return v;
}

int ost_dict_del(ost_value dv, ost_value key) {
    uint64_t h;
    int t = ost__type(dv);
    if ((t != OST_T_DICT && t != OST_T_SET) || ost__hash(key, &h))
        return OST_ENOTFOUND;
    ost_dict_obj *d = (ost_dict_obj *)dv;
    ptrdiff_t at = dict_find(d, key, h);
    if (at < 0) return OST_ENOTFOUND;
    ost_entry *e = &d->entries[at];
    ost_value k = e->key, v = e->val;
    e->key = 0;
    e->val = 0;
    d->len--;
    /* The entry's index slot stays: lookups probe past deleted entries,
     * and the slot is dropped at the next reindex (growth or compaction).
     * Rebuilding the index here made each delete cost O(size). */
    ost_decref(k);
    ost_decref(v);
    return 0;
}

bool ost_dict_next(ost_value dv, size_t *pos, ost_value *key, ost_value *val) {
    int t = ost__type(dv);
    if (t != OST_T_DICT && t != OST_T_SET && t != OST_T_FROZENSET) return false;
    ost_dict_obj *d = (ost_dict_obj *)dv;
    while (*pos < d->used) {
        ost_entry *e = &d->entries[(*pos)++];
        if (!e->key) continue;
        if (key) *key = e->key;
        if (val) *val = e->val;
        return true;
    }
    return false;
}

int ost_set_add(ost_value s, ost_value item) {
    uint64_t h;
    int rc, t = ost__type(s);
    if ((t != OST_T_SET && t != OST_T_FROZENSET) || !item) rc = OST_EINVAL;
    else if ((rc = ost__hash(item, &h)) == 0)
        return ost__dict_insert(s, item, 0, h);
    ost_decref(item);
    return rc;
}

bool ost_set_contains(ost_value s, ost_value item) {
    uint64_t h;
    int t = ost__type(s);
    if ((t != OST_T_SET && t != OST_T_FROZENSET) || ost__hash(item, &h))
        return false;
    return dict_find((ost_dict_obj *)s, item, h) >= 0;
}

/* ---- globals, instances, reduce, persistent ------------------------------ */

ost_value ost_global(const char *module, const char *name) {
    ost_value m = ost_str_c(module), n = ost_str_c(name);
    ost_global_obj *g = NULL;
    if (m && n) g = (ost_global_obj *)ost__obj_alloc(sizeof *g, OST_T_GLOBAL);
    if (!g) {
        ost_decref(m);
        ost_decref(n);
        return 0;
    }
    g->module = m;
    g->name = n;
    g->k = NULL;
    return (ost_value)g;
}

/* Index of field name in def's fields, or -1. */
static ptrdiff_t def_field(const ost_class_def *def, const char *name) {
    for (size_t i = 0; i < def->nfields; i++)
        if (strcmp(def->fields[i], name) == 0) return (ptrdiff_t)i;
    return -1;
}

/* Whether def's field aliases are sound: each names a declared field, is
 * not a declared field itself, and is not repeated. */
static bool def_aliases_ok(const ost_class_def *def) {
    if (def->nfield_aliases && (!def->field_aliases || !def->nfields)) return false;
    if (def->nfield_aliases > SIZE_MAX / 2 / sizeof(ost_value)) return false;
    for (size_t i = 0; i < def->nfield_aliases; i++) {
        const char *old = def->field_aliases[2 * i], *to = def->field_aliases[2 * i + 1];
        if (!old || !to || def_field(def, old) >= 0 || def_field(def, to) < 0) return false;
        for (size_t j = 0; j < i; j++)
            if (strcmp(def->field_aliases[2 * j], old) == 0) return false;
    }
    return true;
}

/* ---- field defaults ------------------------------------------------------ */

#define DEFAULT_DEPTH 32 /* tuples in a default nest at most this deep */

static const char default_too_deep[] = "tuple nested more than 32 deep";

/* What keeps v from being a default, or NULL when it may be one (None, a
 * bool, an int, a float, a str, bytes, or a tuple of those): the name of
 * the type refused (at any depth), or default_too_deep. */
static const char *default_refusal(ost_value v, int depth) {
    int t = ost__type(v);
    switch (t) {
    case OST_T_NONE:
    case OST_T_BOOL:
    case OST_T_INT:
    case OST_T_FLOAT:
    case OST_T_STR:
    case OST_T_BYTES: return NULL;
    case OST_T_TUPLE: {
        if (depth >= DEFAULT_DEPTH) return default_too_deep;
        ost_tuple_obj *tu = (ost_tuple_obj *)v;
        for (size_t i = 0; i < tu->len; i++) {
            const char *why = default_refusal(tu->items[i], depth + 1);
            if (why) return why;
        }
        return NULL;
    }
    default: return ost_type_name(t);
    }
}

/* Whether def's defaults are allowed (ost_class_def.defaults); if not,
 * the value message says which field and why. */
static bool def_defaults_ok(const ost_class_def *def) {
    if (!def->defaults) return true;
    if (!def->nfields) {
        ost__value_fail(OST_EINVAL, "class %s.%s: defaults given, but the class declares no "
                        "fields", def->module, def->name);
        return false;
    }
    for (size_t i = 0; i < def->nfields; i++) {
        ost_value v = def->defaults[i];
        const char *why = v ? default_refusal(v, 0) : NULL; /* 0: no default */
        if (!why) continue;
        bool phrase = why == default_too_deep;
        bool in_tuple = ost__type(v) == OST_T_TUPLE && !phrase;
        const char *an = !phrase && strchr("aeiou", why[0]) ? "an" : "a";
        ost__value_fail(OST_EINVAL, "class %s.%s: the default of field '%s' is %s%s %s: a "
                        "default must be None, a bool, an int, a float, a str, bytes or a "
                        "tuple of those",
                        def->module, def->name, def->fields[i],
                        in_tuple ? "a tuple holding " : "", an, why);
        return false;
    }
    return true;
}

/* Marks v and what it holds (a default: tuples of scalars) shared: its
 * count then changes atomically, as instances of many threads take and
 * drop references to it. */
static void mark_shared(ost_value v) {
    if (!ost__is_heap(v)) return;
    OST__O(v)->flags |= OST__F_SHARED;
    if (ost__type(v) == OST_T_TUPLE) {
        ost_tuple_obj *t = (ost_tuple_obj *)v;
        for (size_t i = 0; i < t->len; i++) mark_shared(t->items[i]);
    }
}

/* A copy of default v (checked by def_defaults_ok) that only the class
 * holds: immediates as they are, heap values made anew. 0 on ENOMEM. */
static ost_value copy_default(ost_value v) {
    if (!ost__is_heap(v)) return v;
    size_t n;
    const char *d;
    switch (ost__type(v)) {
    case OST_T_INT: {
        size_t need = ost_int_to_bytes(v, NULL, 0);
        uint8_t small[64], *b = need <= sizeof small ? small : ost__mem_alloc(need);
        if (!b) return 0;
        ost_int_to_bytes(v, b, need);
        ost_value c = ost_int_from_bytes(b, need);
        if (b != small) ost__mem_free(b);
        return c;
    }
    case OST_T_FLOAT: return ost_float(ost__float_get(v));
    case OST_T_STR: d = ost_data(v, &n); return ost_str(d, n);
    case OST_T_BYTES: d = ost_data(v, &n); return ost_bytes(d, n);
    case OST_T_TUPLE: {
        ost_tuple_obj *t = (ost_tuple_obj *)v;
        ost_value c = ost_tuple_new(t->len);
        for (size_t i = 0; c && i < t->len; i++) {
            ost_value x = copy_default(t->items[i]);
            if (!x || ost_tuple_set(c, i, x)) {
                ost_decref(c);
                c = 0;
            }
        }
        return c;
    }
    default: return 0; /* refused by def_defaults_ok */
    }
}

/* Whether name may be a class's or a field's: a store's class table
 * names a class version `Name(field,field)` (docs/format.md), so neither
 * holds '(', ')' or ','; nor is either empty. */
bool ost__name_ok(const char *name) {
    return name && name[0] && !strpbrk(name, "(),");
}

bool ost__class_def_ok(const ost_class_def *def) {
    if (!def || !def->module || !def->name || (def->nfields && !def->fields)) return false;
    if (!ost__name_ok(def->name)) return false;
    for (size_t i = 0; i < def->nfields; i++)
        if (!ost__name_ok(def->fields[i])) return false;
    if (def->nfields > UINT32_MAX) return false; /* an instance counts its slots in 32 bits */
    for (size_t i = 0; i < def->nfields; i++)
        for (size_t j = 0; j < i; j++)
            if (!def->fields[i] || strcmp(def->fields[i], def->fields[j]) == 0) return false;
    if (def->nfields && !def->fields[0]) return false;
    if (!def_aliases_ok(def)) return false;
    if (ost_utf8_check(def->module, strlen(def->module), NULL) ||
        ost_utf8_check(def->name, strlen(def->name), NULL))
        return false;
    if (def->resolve && !def->persistent) {
        ost__value_fail(OST_EINVAL, "class %s.%s: a conflict resolver is given, but the class "
                        "is not persistent", def->module, def->name);
        return false;
    }
    return def_defaults_ok(def);
}

ost_resolve_fn ost__class_resolver(ost_value cls, void **ud) {
    if (ost__type(cls) != OST_T_GLOBAL || !ost__klass_of(cls)) return NULL;
    const ost__klass *k = ost__klass_of(cls);
    if (ud) *ud = k->def.ud;
    return k->def.resolve;
}

ost_value ost_class_new(const ost_class_def *def) {
    if (!ost__class_def_ok(def)) return 0;
    ost_value g = ost_global(def->module, def->name);
    if (!g) return 0;
    size_t na = def->nfield_aliases, nd = def->defaults ? def->nfields : 0;
    ost__klass *k = ost__mem_alloc(sizeof *k + (def->nfields + na + nd) * sizeof(ost_value) +
                                   na * sizeof(uint32_t));
    if (!k) {
        ost_decref(g);
        return 0;
    }
    k->def = *def;
    k->def.module = ((ost_str_obj *)((ost_global_obj *)g)->module)->data;
    k->def.name = ((ost_str_obj *)((ost_global_obj *)g)->name)->data;
    k->def.fields = NULL;
    k->def.field_aliases = NULL;
    k->def.defaults = NULL;
    k->fields = (ost_value *)(k + 1);
    k->nfields = 0;
    k->alias_names = k->fields + def->nfields;
    /* the defaults before alias_to: ost_value alignment */
    k->defaults = nd ? k->alias_names + na : NULL;
    if (nd) memset(k->defaults, 0, nd * sizeof(ost_value));
    k->alias_to = (uint32_t *)(k->alias_names + na + nd);
    k->naliases = 0;
    ((ost_global_obj *)g)->k = k;
    for (size_t i = 0; i < nd; i++) {
        if (!def->defaults[i]) continue;
        ost_value d = copy_default(def->defaults[i]);
        if (!d) {
            ost_decref(g);
            return 0;
        }
        mark_shared(d);
        k->defaults[i] = d;
    }
    for (size_t i = 0; i < na; i++) {
        ost_value a = ost_str_c(def->field_aliases[2 * i]);
        if (!a) {
            ost_decref(g);
            return 0;
        }
        k->alias_to[i] = (uint32_t)def_field(def, def->field_aliases[2 * i + 1]);
        k->alias_names[k->naliases++] = a;
    }
    for (size_t i = 0; i < def->nfields; i++) {
        ost_value f = ost_str_c(def->fields[i]);
        if (!f) {
            ost_decref(g);
            return 0;
        }
        ost_incref(f); /* count 2: memoized in every pickle, like Python's */
        k->fields[k->nfields++] = f;
    }
    return g;
}

bool ost_class_is_persistent(ost_value cls) {
    return ost__type(cls) == OST_T_GLOBAL && ost__klass_of(cls) &&
           ost__klass_of(cls)->def.persistent;
}

size_t ost_class_nfields(ost_value cls) {
    return ost__type(cls) == OST_T_GLOBAL && ost__klass_of(cls)
               ? ost__klass_of(cls)->nfields : 0;
}

static ptrdiff_t field_index(ost__klass *k, const char *name, size_t n) {
    for (size_t i = 0; i < k->nfields; i++) {
        ost_str_obj *f = (ost_str_obj *)k->fields[i];
        if (f->len == n && memcmp(f->data, name, n) == 0) return (ptrdiff_t)i;
    }
    return -1;
}

ptrdiff_t ost_class_field(ost_value cls, const char *name) {
    if (!ost_class_nfields(cls) || !name) return -1;
    return field_index(ost__klass_of(cls), name, strlen(name));
}

ptrdiff_t ost__field_index(ost_value cls, const char *name, size_t n) {
    if (!ost_class_nfields(cls)) return -1;
    return field_index(ost__klass_of(cls), name, n);
}

/* ---- unknown fields of slotted instances ------------------------------------ */

/* instance -> its kept fields (a dict, one reference held here), for the
 * instances with OST__F_EXTRA set. One table for the process: instances
 * of several threads' connections use it, so a mutex guards it; only
 * records with fields their class lacks come here. */
static pthread_mutex_t g_extra_mu = PTHREAD_MUTEX_INITIALIZER;
static ost__ptrtab g_extra;

ost_value ost__extra(ost_value inst) {
    if (!(OST__O(inst)->flags & OST__F_EXTRA)) return 0;
    pthread_mutex_lock(&g_extra_mu);
    ost__ptr_slot *sl = ost__ptrtab_find(&g_extra, (uintptr_t)inst);
    ost_value d = sl->key ? (ost_value)sl->val : 0;
    pthread_mutex_unlock(&g_extra_mu);
    return d;
}

ost_value ost__extra_take(ost_value inst) {
    if (!(OST__O(inst)->flags & OST__F_EXTRA)) return 0;
    pthread_mutex_lock(&g_extra_mu);
    ost__ptr_slot *sl = ost__ptrtab_find(&g_extra, (uintptr_t)inst);
    ost_value d = sl->key ? (ost_value)sl->val : 0;
    ost__ptrtab_del(&g_extra, (uintptr_t)inst);
    if (!g_extra.count) ost__ptrtab_free(&g_extra); /* none left: give it back */
    pthread_mutex_unlock(&g_extra_mu);
    OST__O(inst)->flags &= (uint8_t)~OST__F_EXTRA;
    return d;
}

/* Keeps d (the reference passes to the table) as inst's fields; inst has
 * none yet. 0 or OST_ENOMEM (then d is still the caller's). */
static int extra_put(ost_value inst, ost_value d) {
    pthread_mutex_lock(&g_extra_mu);
    int rc = g_extra.mask ? 0 : ost__ptrtab_init(&g_extra, 16);
    if (!rc) rc = ost__ptrtab_put(&g_extra, (uintptr_t)inst, (uint64_t)d);
    pthread_mutex_unlock(&g_extra_mu);
    if (!rc) OST__O(inst)->flags |= OST__F_EXTRA;
    return rc;
}

int ost__slots_put(ost_value obj, ost_value key, ost_value val) {
    ost_slots_obj *so = (ost_slots_obj *)obj;
    ptrdiff_t i = -1;
    if (ost__type(key) == OST_T_STR) {
        ost__klass *k = ost__klass_of(so->cls);
        ost_str_obj *s = (ost_str_obj *)key;
        i = field_index(k, s->data, s->len);
        for (size_t a = 0; i < 0 && a < k->naliases; a++) {
            ost_str_obj *f = (ost_str_obj *)k->alias_names[a];
            if (f->len == s->len && memcmp(f->data, s->data, s->len) == 0)
                i = (ptrdiff_t)k->alias_to[a];
        }
    }
    if (i >= 0 && (size_t)i < ost__nslots(so)) {
        /* direct: no activation or change tracking while loading */
        ost_value old = so->slots[i];
        so->slots[i] = ost_incref(val);
        ost_decref(old);
        return 0;
    }
    ost_value extra = ost__extra(obj);
    if (!extra) {
        if (!(extra = ost_dict_new())) return OST_ENOMEM;
        int rc = extra_put(obj, extra);
        if (rc) {
            ost_decref(extra);
            return rc;
        }
    }
    return ost_dict_set(extra, ost_incref(key), ost_incref(val));
}

ost_value ost_instance_extra(ost_value v) {
    if (ost__type(v) != OST_T_INSTANCE || !ost__slotted(v)) return 0;
    OST__UNGHOST(v);
    return ost__extra(v);
}

ost_value ost_global_module(ost_value g) {
    return ost__type(g) == OST_T_GLOBAL ? ((ost_global_obj *)g)->module : 0;
}
ost_value ost_global_name(ost_value g) {
    return ost__type(g) == OST_T_GLOBAL ? ((ost_global_obj *)g)->name : 0;
}

void ost__slots_defaults(ost_value inst) {
    ost_slots_obj *so = (ost_slots_obj *)inst;
    const ost_value *d = ost__klass_of(so->cls)->defaults;
    if (!d) return;
    for (size_t i = 0, n = ost__nslots(so); i < n; i++)
        if (!so->slots[i] && d[i]) so->slots[i] = ost_incref(d[i]);
}

ost_value ost_instance_new(ost_value cls) {
    ost_value v = ost__instance_new_unset(cls);
    if (v && ost__slotted(v)) ost__slots_defaults(v);
    return v;
}

ost_value ost__instance_new_unset(ost_value cls) {
    if (ost__type(cls) != OST_T_GLOBAL) {
        ost_decref(cls);
        return 0;
    }
    size_t nf = ost_class_nfields(cls);
    if (nf) {
        ost_slots_obj *so = (ost_slots_obj *)ost__obj_alloc(
            sizeof *so + nf * sizeof(ost_value), OST_T_INSTANCE);
        if (!so) {
            ost_decref(cls);
            return 0;
        }
        so->h.flags |= OST__F_SLOTS;
        so->pidx = 0;
        so->pbytes = 0;
        so->cls = cls;
        memset(so->slots, 0, nf * sizeof(ost_value));
        return (ost_value)so;
    }
    ost_inst_obj *o = (ost_inst_obj *)ost__obj_alloc(sizeof *o, OST_T_INSTANCE);
    if (!o) {
        ost_decref(cls);
        return 0;
    }
    o->pidx = 0;
    o->pbytes = 0;
    o->cls = cls;
    o->state = OST_NONE;
    o->items = 0;
    return (ost_value)o;
}


int ost__activate(ost_value v) {
    if (!(OST__O(v)->flags & OST__F_GHOST)) return 0;
    return ost__pers ? ost__pers->activate(v) : OST_EINVAL;
}

void ost__touch(ost_value v) {
    ost_obj *o = OST__O(v);
    if ((o->flags & (OST__F_PERSISTENT | OST__F_CHANGED)) == OST__F_PERSISTENT &&
        ost__pers)
        ost__pers->changed(v);
}

ost_value ost_instance_slot(ost_value v, size_t i) {
    if (ost__type(v) != OST_T_INSTANCE || !ost__slotted(v)) return 0;
    OST__UNGHOST(v);
    ost_slots_obj *so = (ost_slots_obj *)v;
    return i < ost__nslots(so) ? so->slots[i] : 0;
}

/* Loads a ghost before it changes: a change to a ghost that cannot load
 * (damaged record, closed connection) would be lost at commit, which
 * writes no ghost. Returns the code loading failed with. */
static int unghost_to_change(ost_value v, ost_value val) {
    int rc = OST_UNLIKELY(OST__O(v)->flags & OST__F_GHOST) ? ost__activate(v) : 0;
    if (rc) ost_decref(val);
    return rc;
}

int ost_instance_set_slot(ost_value v, size_t i, ost_value val) {
    if (ost__type(v) != OST_T_INSTANCE || !ost__slotted(v) || !val ||
        i >= ost__nslots((ost_slots_obj *)v)) {
        ost_decref(val);
        return OST_EINVAL;
    }
    int rc = unghost_to_change(v, val);
    if (rc) return rc;
    ost__touch(v);
    ost_slots_obj *so = (ost_slots_obj *)v;
    ost_value old = so->slots[i];
    so->slots[i] = val;
    ost_decref(old);
    return 0;
}

ost_value ost_instance_class(ost_value v) {
    return ost__type(v) == OST_T_INSTANCE ? ((ost_inst_obj *)v)->cls : 0;
}
ost_value ost_instance_state(ost_value v) {
    if (ost__type(v) != OST_T_INSTANCE || ost__slotted(v)) return 0;
    OST__UNGHOST(v);
    if (OST__O(v)->flags & OST__F_GHOST) return 0; /* it could not load */
    return ((ost_inst_obj *)v)->state;
}

int ost_instance_set_state(ost_value v, ost_value state) {
    if (ost__type(v) != OST_T_INSTANCE || !state || ost__slotted(v)) {
        ost_decref(state);
        return OST_EINVAL;
    }
    int rc = unghost_to_change(v, state);
    if (rc) return rc;
    ost__touch(v);
    ost_inst_obj *o = (ost_inst_obj *)v;
    ost_value old = o->state;
    o->state = state;
    ost_decref(old);
    return 0;
}

int ost_instance_setattr(ost_value v, const char *name, ost_value val) {
    if (ost__type(v) != OST_T_INSTANCE || !val) {
        ost_decref(val);
        return OST_EINVAL;
    }
    if (ost__slotted(v)) {
        ptrdiff_t i = ost_class_field(((ost_slots_obj *)v)->cls, name);
        if (i < 0) {
            ost_decref(val);
            return ost__field_missing(((ost_slots_obj *)v)->cls, name);
        }
        return ost_instance_set_slot(v, (size_t)i, val);
    }
    int rc = unghost_to_change(v, val);
    if (rc) return rc;
    ost__touch(v);
    ost_inst_obj *o = (ost_inst_obj *)v;
    if (o->state == OST_NONE) {
        ost_value d = ost_dict_new();
        if (!d) {
            ost_decref(val);
            return OST_ENOMEM;
        }
        o->state = d;
    }
    if (ost__type(o->state) != OST_T_DICT) {
        ost_decref(val);
        return OST_ETYPE;
    }
    ost_value k = ost_str_c(name);
    if (!k) {
        ost_decref(val);
        return OST_ENOMEM;
    }
    return ost_dict_set(o->state, k, val);
}

ost_value ost_instance_getattr(ost_value v, const char *name) {
    if (ost__type(v) == OST_T_INSTANCE && ost__slotted(v)) {
        ptrdiff_t i = ost_class_field(((ost_slots_obj *)v)->cls, name);
        OST__UNGHOST(v);
        return i < 0 ? 0 : ((ost_slots_obj *)v)->slots[i];
    }
    ost_value st = ost_instance_state(v);
    return ost__type(st) == OST_T_DICT ? ost_dict_get_c(st, name) : 0;
}

ost_value ost_instance_items(ost_value v) {
    if (ost__type(v) != OST_T_INSTANCE || ost__slotted(v)) return 0;
    return ((ost_inst_obj *)v)->items;
}

int ost_instance_set_items(ost_value v, ost_value items) {
    int t = ost__type(items);
    if (ost__type(v) != OST_T_INSTANCE || ost__slotted(v) ||
        (OST__O(v)->flags & OST__F_PERSISTENT) ||
        ost_class_is_persistent(((ost_inst_obj *)v)->cls)) {
        ost_decref(items);
        return OST_EINVAL;
    }
    if (items && t != OST_T_LIST && t != OST_T_DICT) {
        ost_decref(items);
        return OST_ETYPE;
    }
    ost_inst_obj *o = (ost_inst_obj *)v;
    ost_value old = o->items;
    o->items = items;
    ost_decref(old);
    return 0;
}

ost_value ost_reduce_new(ost_reduce_kind kind, ost_value callable,
                         ost_value args) {
    ost_reduce_obj *r = NULL;
    if (callable && args && (unsigned)kind <= OST_REDUCE_NEWOBJ_EX)
        r = (ost_reduce_obj *)ost__obj_alloc(sizeof *r, OST_T_REDUCE);
    if (!r) {
        ost_decref(callable);
        ost_decref(args);
        return 0;
    }
    r->kind = kind;
    r->callable = callable;
    r->args = args;
    r->kwargs = r->state = r->listitems = r->dictitems = 0;
    return (ost_value)r;
}

#define REDUCE_GET(field)                                                  \
    ost_value ost_reduce_##field(ost_value r) {                            \
        return ost__type(r) == OST_T_REDUCE ? ((ost_reduce_obj *)r)->field \
                                            : 0;                           \
    }
REDUCE_GET(callable)
REDUCE_GET(args)
REDUCE_GET(kwargs)
REDUCE_GET(state)
REDUCE_GET(listitems)
REDUCE_GET(dictitems)

ost_reduce_kind ost_reduce_kind_of(ost_value r) {
    return ost__type(r) == OST_T_REDUCE ? ((ost_reduce_obj *)r)->kind
                                        : OST_REDUCE_CALL;
}

static int reduce_replace(ost_value r, ost_value *slot, ost_value v) {
    (void)r;
    ost_value old = *slot;
    *slot = v;
    ost_decref(old);
    return 0;
}

int ost_reduce_set_kwargs(ost_value r, ost_value kwargs) {
    if (ost__type(r) != OST_T_REDUCE || !kwargs) {
        ost_decref(kwargs);
        return OST_EINVAL;
    }
    return reduce_replace(r, &((ost_reduce_obj *)r)->kwargs, kwargs);
}

int ost_reduce_set_state(ost_value r, ost_value state) {
    if (ost__type(r) != OST_T_REDUCE || !state) {
        ost_decref(state);
        return OST_EINVAL;
    }
    return reduce_replace(r, &((ost_reduce_obj *)r)->state, state);
}

int ost_reduce_append(ost_value r, ost_value item) {
    if (ost__type(r) != OST_T_REDUCE || !item) {
        ost_decref(item);
        return OST_EINVAL;
    }
    ost_reduce_obj *o = (ost_reduce_obj *)r;
    if (!o->listitems && !(o->listitems = ost_list_new(0))) {
        ost_decref(item);
        return OST_ENOMEM;
    }
    return ost_list_append(o->listitems, item);
}

int ost_reduce_setitem(ost_value r, ost_value key, ost_value val) {
    if (ost__type(r) != OST_T_REDUCE || !key || !val) {
        ost_decref(key);
        ost_decref(val);
        return OST_EINVAL;
    }
    ost_reduce_obj *o = (ost_reduce_obj *)r;
    ost_value t = ost_tuple_new(2);
    if (!t || (!o->dictitems && !(o->dictitems = ost_list_new(0)))) {
        ost_decref(t);
        ost_decref(key);
        ost_decref(val);
        return OST_ENOMEM;
    }
    ost_tuple_set(t, 0, key);
    ost_tuple_set(t, 1, val);
    return ost_list_append(o->dictitems, t);
}

ost_value ost_persref(ost_value pid) {
    ost_persref_obj *p = NULL;
    if (pid) p = (ost_persref_obj *)ost__obj_alloc(sizeof *p, OST_T_PERSREF);
    if (!p) {
        ost_decref(pid);
        return 0;
    }
    p->pid = pid;
    return (ost_value)p;
}

ost_value ost_persref_pid(ost_value p) {
    return ost__type(p) == OST_T_PERSREF ? ((ost_persref_obj *)p)->pid : 0;
}

void ost__slots_clear(ost_value inst) {
    ost_slots_obj *so = (ost_slots_obj *)inst;
    for (size_t i = 0, n = ost__nslots(so); i < n; i++) {
        ost_value x = so->slots[i];
        so->slots[i] = 0; /* unset before release: a cycle may come back here */
        ost_release(x);
    }
    if (OST_UNLIKELY(so->h.flags & OST__F_EXTRA)) ost_release(ost__extra_take(inst));
}
