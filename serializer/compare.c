/* Deep equality (Python's ==) and strict graph identity, both iterative and
 * safe on cycles. */
#include <math.h>
#include <stdlib.h>

#include "internal.h"

typedef struct {
    ost_value a, b;
} pair;

typedef struct {
    pair *items;
    size_t len, cap;
    /* pairs already assumed equal (coinduction makes cycles terminate) */
    pair *seen;
    size_t seen_mask, seen_count;
    bool oom;
} cmp_ctx;

static void push(cmp_ctx *c, ost_value a, ost_value b) {
    if (ost__reserve((void **)&c->items, &c->cap, c->len + 1, sizeof *c->items, 64)) {
        c->oom = true;
        return;
    }
    c->items[c->len++] = (pair){a, b};
}

/* Returns true if (a, b) was seen before; records it otherwise. */
static bool seen(cmp_ctx *c, ost_value a, ost_value b) {
    if ((c->seen_count + 1) * 2 > c->seen_mask + 1) {
        size_t n = c->seen_mask ? (c->seen_mask + 1) * 2 : 64;
        pair *s = calloc(n, sizeof *s);
        if (!s) {
            c->oom = true;
            return true;
        }
        for (size_t i = 0; c->seen_mask && i <= c->seen_mask; i++) {
            if (!c->seen[i].a) continue;
            size_t j = ost__ptr_hash(c->seen[i].a ^ (c->seen[i].b << 1)) & (n - 1);
            while (s[j].a) j = (j + 1) & (n - 1);
            s[j] = c->seen[i];
        }
        free(c->seen);
        c->seen = s;
        c->seen_mask = n - 1;
    }
    size_t j = ost__ptr_hash(a ^ (b << 1)) & c->seen_mask;
    while (c->seen[j].a) {
        if (c->seen[j].a == a && c->seen[j].b == b) return true;
        j = (j + 1) & c->seen_mask;
    }
    c->seen[j] = (pair){a, b};
    c->seen_count++;
    return false;
}

static bool is_num(int t) {
    return t == OST_T_INT || t == OST_T_BOOL || t == OST_T_FLOAT;
}

/* Python's exact comparison of an int (or bool) with a double. */
static bool int_eq_double(ost_value i, double d) {
    if (!isfinite(d) || d != floor(d)) return false;
    int64_t x;
    if (ost_int_value(i, &x) == 0) {
        /* int64 covers [-2**63, 2**63): -2**63 itself is in range */
        if (d < -9223372036854775808.0 || d >= 9223372036854775808.0) return false;
        return (int64_t)d == x;
    }
    /* big int: d must be big too; compare exact bytes */
    if (fabs(d) < 9223372036854775808.0) return false;
    int e;
    double m = frexp(fabs(d), &e); /* |d| = m * 2^e, m in [0.5,1) */
    uint64_t mant = (uint64_t)ldexp(m, 53);
    int shift = e - 53; /* >= 11 here */
    size_t nbytes = (size_t)(shift / 8) + 10;
    uint8_t *b = calloc(nbytes, 1);
    if (!b) return false;
    for (int k = 0; k < 64; k++)
        if (mant >> k & 1) {
            int bit = k + shift;
            b[bit / 8] |= (uint8_t)(1u << (bit % 8));
        }
    if (d < 0) {
        unsigned carry = 1;
        for (size_t k = 0; k < nbytes; k++) {
            unsigned x2 = (uint8_t)~b[k] + carry;
            b[k] = (uint8_t)x2;
            carry = x2 >> 8;
        }
    }
    ost_value v = ost_int_from_bytes(b, nbytes);
    free(b);
    bool eq = v && ost_equal(i, v);
    ost_decref(v);
    return eq;
}

static bool num_eq(ost_value a, ost_value b, int ta, int tb) {
    if (ta == OST_T_FLOAT && tb == OST_T_FLOAT)
        return ost__float_get(a) == ost__float_get(b);
    if (ta == OST_T_FLOAT) return int_eq_double(b, ost__float_get(a));
    if (tb == OST_T_FLOAT) return int_eq_double(a, ost__float_get(b));
    int64_t x, y;
    int ra = ost_int_value(a, &x), rb = ost_int_value(b, &y);
    if (ra == 0 && rb == 0) return x == y;
    if (ra == 0 || rb == 0) return false;
    ost_int_obj *p = (ost_int_obj *)a, *q = (ost_int_obj *)b;
    return p->n == q->n && memcmp(p->b, q->b, p->n) == 0;
}

static int kind(int t) { /* Python classes that compare with each other */
    if (t == OST_T_BYTEARRAY) return OST_T_BYTES;
    if (t == OST_T_FROZENSET) return OST_T_SET;
    return t;
}

static bool opt_push(cmp_ctx *c, ost_value a, ost_value b) {
    if (!a || !b) return a == b;
    push(c, a, b);
    return true;
}

static bool step_equal(cmp_ctx *c, ost_value a, ost_value b) {
    if (a == b) return true;
    int ta = ost__type(a), tb = ost__type(b);
    if (is_num(ta) && is_num(tb)) return num_eq(a, b, ta, tb);
    if (kind(ta) != kind(tb)) return false;
    switch (ta) {
    case OST_T_NONE: return true;
    case OST_T_STR:
    case OST_T_BYTES:
    case OST_T_BYTEARRAY: {
        ost_str_obj *x = (ost_str_obj *)a, *y = (ost_str_obj *)b;
        return x->len == y->len && memcmp(ost__sdata(x), ost__sdata(y), x->len) == 0;
    }
    case OST_T_TUPLE:
    case OST_T_LIST: {
        size_t n = ost_len(a);
        if (n != ost_len(b)) return false;
        if (seen(c, a, b)) return true;
        for (size_t i = n; i-- > 0;) push(c, ost_item(a, i), ost_item(b, i));
        return true;
    }
    case OST_T_DICT: {
        if (ost_len(a) != ost_len(b)) return false;
        if (seen(c, a, b)) return true;
        size_t pos = 0;
        ost_value k, v;
        while (ost_dict_next(a, &pos, &k, &v)) {
            ost_value w = ost_dict_get(b, k);
            if (!w) return false;
            push(c, v, w);
        }
        return true;
    }
    case OST_T_SET:
    case OST_T_FROZENSET: {
        if (ost_len(a) != ost_len(b)) return false;
        size_t pos = 0;
        ost_value k;
        while (ost_dict_next(a, &pos, &k, NULL))
            if (!ost_set_contains(b, k)) return false;
        return true;
    }
    case OST_T_INSTANCE:
        if (ost__slotted(a) != ost__slotted(b)) return false;
        if (seen(c, a, b)) return true;
        push(c, ((ost_inst_obj *)a)->cls, ((ost_inst_obj *)b)->cls);
        if (ost__slotted(a)) {
            ost_slots_obj *x = (ost_slots_obj *)a, *y = (ost_slots_obj *)b;
            size_t n = ost__nslots(x);
            if (n != ost__nslots(y)) return false;
            for (size_t i = 0; i < n; i++)
                if (!opt_push(c, x->slots[i], y->slots[i])) return false;
            return opt_push(c, ost__extra(a), ost__extra(b));
        }
        push(c, ((ost_inst_obj *)a)->state, ((ost_inst_obj *)b)->state);
        return opt_push(c, ((ost_inst_obj *)a)->items, ((ost_inst_obj *)b)->items);
    case OST_T_GLOBAL:
        push(c, ((ost_global_obj *)a)->module, ((ost_global_obj *)b)->module);
        push(c, ((ost_global_obj *)a)->name, ((ost_global_obj *)b)->name);
        return true;
    case OST_T_REDUCE: {
        ost_reduce_obj *x = (ost_reduce_obj *)a, *y = (ost_reduce_obj *)b;
        if (x->kind != y->kind) return false;
        if (seen(c, a, b)) return true;
        push(c, x->callable, y->callable);
        push(c, x->args, y->args);
        return opt_push(c, x->kwargs, y->kwargs) &&
               opt_push(c, x->state, y->state) &&
               opt_push(c, x->listitems, y->listitems) &&
               opt_push(c, x->dictitems, y->dictitems);
    }
    case OST_T_PERSREF:
        push(c, ((ost_persref_obj *)a)->pid, ((ost_persref_obj *)b)->pid);
        return true;
    default: return false;
    }
}

bool ost_equal(ost_value a, ost_value b) {
    if (a == b) return true;
    cmp_ctx c = {0};
    bool eq = true;
    push(&c, a, b);
    while (eq && c.len && !c.oom) {
        pair p = c.items[--c.len];
        eq = step_equal(&c, p.a, p.b);
    }
    if (c.oom) eq = false;
    free(c.items);
    free(c.seen);
    return eq;
}

/* ---- strict graph identity ------------------------------------------------- */

static bool tracked(int t) { /* types whose sharing must match */
    return t >= OST_T_BYTEARRAY && t != OST_T_GLOBAL;
}

typedef struct {
    cmp_ctx c;
    ost__ptrtab ab, ba;
} same_ctx;

static bool step_same(same_ctx *s, ost_value a, ost_value b) {
    cmp_ctx *c = &s->c;
    if (!a || !b) return a == b;
    if (ost__is_heap(a) != ost__is_heap(b)) return false;
    if (!ost__is_heap(a)) return a == b;
    int ta = ost__type(a), tb = ost__type(b);
    if (ta != tb) return false;
    /* the empty tuple is not memoized (as in Python, where it is one
     * object): two references to one may come back as two */
    if (tracked(ta) && !(ta == OST_T_TUPLE && ost_len(a) == 0)) {
        ost__ptr_slot *x = ost__ptrtab_find(&s->ab, a);
        ost__ptr_slot *y = ost__ptrtab_find(&s->ba, b);
        if (x->key || y->key) return x->key && y->key && x->val == b && y->val == a;
        if (ost__ptrtab_put(&s->ab, a, b) || ost__ptrtab_put(&s->ba, b, a)) {
            c->oom = true;
            return false;
        }
    }
    switch (ta) {
    case OST_T_FLOAT: {
        double x = ost__float_get(a), y = ost__float_get(b);
        return memcmp(&x, &y, sizeof(double)) == 0;
    }
    case OST_T_INT: return num_eq(a, b, ta, tb);
    case OST_T_STR:
    case OST_T_BYTES:
    case OST_T_BYTEARRAY: {
        ost_str_obj *x = (ost_str_obj *)a, *y = (ost_str_obj *)b;
        return x->len == y->len && memcmp(ost__sdata(x), ost__sdata(y), x->len) == 0;
    }
    case OST_T_TUPLE:
    case OST_T_LIST: {
        size_t n = ost_len(a);
        if (n != ost_len(b)) return false;
        for (size_t i = n; i-- > 0;) push(c, ost_item(a, i), ost_item(b, i));
        return true;
    }
    case OST_T_DICT:
    case OST_T_SET:
    case OST_T_FROZENSET: {
        if (ost_len(a) != ost_len(b)) return false;
        size_t p = 0, q = 0;
        ost_value k1, v1, k2, v2;
        while (ost_dict_next(a, &p, &k1, &v1) && ost_dict_next(b, &q, &k2, &v2)) {
            push(c, k1, k2);
            if (v1 || v2) push(c, v1, v2);
        }
        return true;
    }
    case OST_T_INSTANCE:
        if (ost__slotted(a) || ost__slotted(b)) {
            ost_slots_obj *x = (ost_slots_obj *)a, *y = (ost_slots_obj *)b;
            if (!ost__slotted(a) || !ost__slotted(b)) return false;
            size_t n = ost__nslots(x);
            if (n != ost__nslots(y)) return false;
            push(c, x->cls, y->cls);
            for (size_t i = 0; i < n; i++) {
                if (!x->slots[i] || !y->slots[i]) {
                    if (x->slots[i] != y->slots[i]) return false;
                    continue;
                }
                push(c, x->slots[i], y->slots[i]);
            }
            ost_value xe = ost__extra(a), ye = ost__extra(b);
            if (!xe || !ye) return xe == ye;
            push(c, xe, ye);
            return true;
        }
        {
            ost_inst_obj *x = (ost_inst_obj *)a, *y = (ost_inst_obj *)b;
            ost_value xs[3] = {x->cls, x->state, x->items}, ys[3] = {y->cls, y->state, y->items};
            for (int i = 0; i < 3; i++) {
                if (!xs[i] || !ys[i]) {
                    if (xs[i] != ys[i]) return false;
                    continue;
                }
                push(c, xs[i], ys[i]);
            }
            return true;
        }
    case OST_T_GLOBAL:
    case OST_T_REDUCE:
    case OST_T_PERSREF: {
        /* same layout of child slots: walk them pairwise */
        ost_value *x = (ost_value *)((char *)a + sizeof(ost_obj));
        ost_value *y = (ost_value *)((char *)b + sizeof(ost_obj));
        size_t n = ta == OST_T_REDUCE ? 6 : ta == OST_T_PERSREF ? 1 : 2;
        if (ta == OST_T_REDUCE &&
            ((ost_reduce_obj *)a)->kind != ((ost_reduce_obj *)b)->kind)
            return false;
        for (size_t i = 0; i < n; i++) {
            if (!x[i] || !y[i]) {
                if (x[i] != y[i]) return false;
                continue;
            }
            push(c, x[i], y[i]);
        }
        return true;
    }
    default: return false;
    }
}

bool ost_same_graph(ost_value a, ost_value b) {
    same_ctx s = {0};
    bool eq = true;
    if (ost__ptrtab_init(&s.ab, 64) || ost__ptrtab_init(&s.ba, 64)) {
        eq = false;
        goto out;
    }
    push(&s.c, a, b);
    while (eq && s.c.len && !s.c.oom) {
        pair p = s.c.items[--s.c.len];
        eq = step_same(&s, p.a, p.b);
    }
    if (s.c.oom) eq = false;
out:
    free(s.c.items);
    ost__ptrtab_free(&s.ab);
    ost__ptrtab_free(&s.ba);
    return eq;
}
