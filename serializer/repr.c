/* A Python-like repr of values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define REPR_MAX_DEPTH 1000

typedef struct {
    ost_buf *out;
    ost__ptrtab active; /* containers being printed: cycles show as ... */
    int err;
} repr_ctx;

static void put(repr_ctx *c, const char *s, size_t n) {
    if (!c->err) c->err = ost__buf_append(c->out, s, n);
}
static void puts_(repr_ctx *c, const char *s) { put(c, s, strlen(s)); }

/* Decodes one code point (input is valid surrogatepass UTF-8). */
static uint32_t utf8_next(const uint8_t *s, size_t *i) {
    uint8_t c = s[*i];
    if (c < 0x80) return s[(*i)++];
    if (c < 0xe0) {
        uint32_t u = (uint32_t)(c & 0x1f) << 6 | (s[*i + 1] & 0x3f);
        *i += 2;
        return u;
    }
    if (c < 0xf0) {
        uint32_t u = (uint32_t)(c & 0x0f) << 12 |
                     (uint32_t)(s[*i + 1] & 0x3f) << 6 | (s[*i + 2] & 0x3f);
        *i += 3;
        return u;
    }
    uint32_t u = (uint32_t)(c & 0x07) << 18 | (uint32_t)(s[*i + 1] & 0x3f) << 12 |
                 (uint32_t)(s[*i + 2] & 0x3f) << 6 | (s[*i + 3] & 0x3f);
    *i += 4;
    return u;
}

/* Code points Python's repr escapes: controls, a few separators and format
 * characters, surrogates, non-characters. An approximation of
 * str.isprintable() without the Unicode database. */
bool ost__printable(uint32_t u) {
    if (u < 0x20 || (u >= 0x7f && u <= 0xa0) || u == 0xad) return false;
    if (u >= 0xd800 && u <= 0xdfff) return false;
    if (u == 0x2028 || u == 0x2029 || (u >= 0x200b && u <= 0x200f)) return false;
    if ((u >= 0x2060 && u <= 0x206f) || u == 0xfeff || u == 0x3000) return false;
    if (u >= 0xfff0 && u <= 0xfffb) return false;
    if ((u & 0xfffe) == 0xfffe || (u >= 0xfdd0 && u <= 0xfdef)) return false;
    if (u >= 0xe0000) return false;
    if ((u >= 0xe000 && u <= 0xf8ff) || u >= 0xf0000) return false; /* private */
    return true;
}

/* bytes: 0 for str, 1 for bytes, 2 for bytearray, whose repr escapes a
 * single quote even inside double quotes (CPython's bytearray_repr). */
static void repr_text(repr_ctx *c, const char *p, size_t n, int bytes) {
    bool sq = memchr(p, '\'', n) != NULL, dq = memchr(p, '"', n) != NULL;
    char q = sq && !dq ? '"' : '\'';
    char tmp[16];
    put(c, &q, 1);
    const uint8_t *s = (const uint8_t *)p;
    for (size_t i = 0; i < n;) {
        uint32_t u = bytes ? s[i++] : utf8_next(s, &i);
        if (u == (uint32_t)q || u == '\\' || (bytes == 2 && u == '\'')) {
            tmp[0] = '\\';
            tmp[1] = (char)u;
            put(c, tmp, 2);
        } else if (u == '\n') puts_(c, "\\n");
        else if (u == '\r') puts_(c, "\\r");
        else if (u == '\t') puts_(c, "\\t");
        else if (u < 0x20 || u == 0x7f || (bytes && u >= 0x80) ||
                 (!bytes && u < 0x100 && !ost__printable(u))) {
            snprintf(tmp, sizeof tmp, "\\x%02x", u);
            puts_(c, tmp);
        } else if (u < 0x80) {
            tmp[0] = (char)u;
            put(c, tmp, 1);
        } else if (!ost__printable(u)) {
            snprintf(tmp, sizeof tmp, u < 0x10000 ? "\\u%04x" : "\\U%08x", u);
            puts_(c, tmp);
        } else {
            size_t start = i;
            /* copy the original bytes of this code point */
            size_t len = u < 0x800 ? 2 : u < 0x10000 ? 3 : 4;
            put(c, p + start - len, len);
        }
    }
    put(c, &q, 1);
}

/* Python's repr of a float: shortest text that reads back the same. */
void ost__float_repr(double d, char *out, size_t cap) {
    if (isnan(d)) {
        snprintf(out, cap, "nan");
        return;
    }
    if (isinf(d)) {
        snprintf(out, cap, d > 0 ? "inf" : "-inf");
        return;
    }
    char buf[40];
    int prec;
    for (prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
        if (strtod(buf, NULL) == d) break;
    }
    /* buf is [-]D[.DDD]e[+-]XX: split digits and exponent */
    char digits[24];
    size_t nd = 0;
    const char *p = buf;
    bool neg = *p == '-';
    if (neg) p++;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    while (nd > 1 && digits[nd - 1] == '0') nd--;
    digits[nd] = 0;
    int exp = atoi(p + 1); /* value = 0.D1D2.. * 10^(exp+1) */
    int dp = exp + 1;      /* position of the decimal point */
    char *o = out;
    size_t left = cap;
#define EMIT(...)                                           \
    do {                                                    \
        int k_ = snprintf(o, left, __VA_ARGS__);            \
        if (k_ > 0 && (size_t)k_ < left) o += k_, left -= (size_t)k_; \
    } while (0)
    if (neg) EMIT("-");
    if (dp > 16 || dp < -3) {
        EMIT("%c", digits[0]);
        if (nd > 1) EMIT(".%s", digits + 1);
        EMIT("e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    } else if (dp <= 0) {
        EMIT("0.");
        for (int k = 0; k < -dp; k++) EMIT("0");
        EMIT("%s", digits);
    } else if ((size_t)dp >= nd) {
        EMIT("%s", digits);
        for (int k = (int)nd; k < dp; k++) EMIT("0");
        EMIT(".0");
    } else {
        EMIT("%.*s.%s", dp, digits, digits + dp);
    }
#undef EMIT
}

/* Decimal text of any int. */
int ost__int_decimal(ost_value v, ost_buf *out) {
    int64_t i;
    if (ost_int_value(v, &i) == 0) return ost__buf_printf(out, "%lld", (long long)i);
    ost_int_obj *o = (ost_int_obj *)v;
    bool neg = o->b[o->n - 1] & 0x80;
    size_t n = o->n;
    uint32_t *limbs = malloc((n / 4 + 1) * sizeof *limbs); /* base 2^32 */
    char *dec = malloc(n * 3 + 4);
    if (!limbs || !dec) {
        free(limbs);
        free(dec);
        return OST_ENOMEM;
    }
    size_t nl = (n + 3) / 4;
    memset(limbs, 0, nl * sizeof *limbs);
    unsigned carry = neg;
    for (size_t k = 0; k < n; k++) {
        unsigned b = neg ? (uint8_t)~o->b[k] : o->b[k];
        b += carry;
        carry = b >> 8;
        limbs[k / 4] |= (uint32_t)(b & 0xff) << (8 * (k % 4));
    }
    size_t nd = 0;
    while (nl) {
        uint64_t rem = 0;
        for (size_t k = nl; k-- > 0;) {
            uint64_t cur = rem << 32 | limbs[k];
            limbs[k] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (nl && !limbs[nl - 1]) nl--;
        for (int k = 0; k < 9 && (nl || rem); k++) {
            dec[nd++] = (char)('0' + rem % 10);
            rem /= 10;
        }
    }
    if (!nd) dec[nd++] = '0';
    if (neg) dec[nd++] = '-';
    for (size_t k = 0; k < nd / 2; k++) {
        char t = dec[k];
        dec[k] = dec[nd - 1 - k];
        dec[nd - 1 - k] = t;
    }
    int rc = ost__buf_append(out, dec, nd);
    free(limbs);
    free(dec);
    return rc;
}

static void repr_value(repr_ctx *c, ost_value v, int depth);

static bool enter(repr_ctx *c, ost_value v, const char *cyc) {
    ost__ptr_slot *s = ost__ptrtab_find(&c->active, v);
    if (s->key) {
        puts_(c, cyc);
        return false;
    }
    if (ost__ptrtab_put(&c->active, v, 1)) c->err = OST_ENOMEM;
    return !c->err;
}

static void leave(repr_ctx *c, ost_value v) { ost__ptrtab_del(&c->active, v); }

static void repr_global(repr_ctx *c, ost_value g) {
    ost_global_obj *o = (ost_global_obj *)g;
    puts_(c, ((ost_str_obj *)o->module)->data);
    puts_(c, ".");
    puts_(c, ((ost_str_obj *)o->name)->data);
}

static void repr_items(repr_ctx *c, ost_value v, int depth) {
    size_t n = ost_len(v);
    for (size_t i = 0; i < n && !c->err; i++) {
        if (i) puts_(c, ", ");
        repr_value(c, ost_item(v, i), depth + 1);
    }
}

static void repr_value(repr_ctx *c, ost_value v, int depth) {
    char tmp[64];
    if (c->err) return;
    if (depth > REPR_MAX_DEPTH) {
        puts_(c, "<...>");
        return;
    }
    switch (ost__type(v)) {
    case OST_T_NONE: puts_(c, "None"); return;
    case OST_T_BOOL: puts_(c, v == OST_TRUE ? "True" : "False"); return;
    case OST_T_INT:
        if (!c->err) c->err = ost__int_decimal(v, c->out);
        return;
    case OST_T_FLOAT:
        ost__float_repr(((ost_float_obj *)v)->d, tmp, sizeof tmp);
        puts_(c, tmp);
        return;
    case OST_T_STR: {
        ost_str_obj *s = (ost_str_obj *)v;
        repr_text(c, s->data, s->len, false);
        return;
    }
    case OST_T_BYTES:
    case OST_T_BYTEARRAY: {
        ost_str_obj *s = (ost_str_obj *)v;
        bool ba = s->h.type == OST_T_BYTEARRAY;
        puts_(c, ba ? "bytearray(b" : "b");
        repr_text(c, s->data, s->len, ba ? 2 : 1);
        if (ba) puts_(c, ")");
        return;
    }
    case OST_T_TUPLE:
        if (!enter(c, v, "(...)")) return;
        puts_(c, "(");
        repr_items(c, v, depth);
        puts_(c, ost_len(v) == 1 ? ",)" : ")");
        break;
    case OST_T_LIST:
        if (!enter(c, v, "[...]")) return;
        puts_(c, "[");
        repr_items(c, v, depth);
        puts_(c, "]");
        break;
    case OST_T_DICT: {
        if (!enter(c, v, "{...}")) return;
        puts_(c, "{");
        size_t pos = 0, k = 0;
        ost_value key, val;
        while (ost_dict_next(v, &pos, &key, &val) && !c->err) {
            if (k++) puts_(c, ", ");
            repr_value(c, key, depth + 1);
            puts_(c, ": ");
            repr_value(c, val, depth + 1);
        }
        puts_(c, "}");
        break;
    }
    case OST_T_SET:
    case OST_T_FROZENSET: {
        bool fz = ost__type(v) == OST_T_FROZENSET;
        if (!enter(c, v, "...")) return;
        if (!ost_len(v)) {
            puts_(c, fz ? "frozenset()" : "set()");
            break;
        }
        puts_(c, fz ? "frozenset({" : "{");
        size_t pos = 0, k = 0;
        ost_value key;
        while (ost_dict_next(v, &pos, &key, NULL) && !c->err) {
            if (k++) puts_(c, ", ");
            repr_value(c, key, depth + 1);
        }
        puts_(c, fz ? "})" : "}");
        break;
    }
    case OST_T_INSTANCE: {
        ost_inst_obj *o = (ost_inst_obj *)v;
        if (!enter(c, v, "...")) return;
        repr_global(c, o->cls);
        puts_(c, "(");
        if (o->h.flags & OST__F_GHOST) {
            puts_(c, "<ghost>"); /* repr never loads state */
        } else if (ost__slotted(v)) {
            ost_slots_obj *so = (ost_slots_obj *)v;
            ost__klass *k = ost__klass_of(so->cls);
            size_t shown = 0;
            for (size_t i = 0; i < so->n && !c->err; i++) {
                if (!so->slots[i]) continue;
                if (shown++) puts_(c, ", ");
                puts_(c, ((ost_str_obj *)k->fields[i])->data);
                puts_(c, "=");
                repr_value(c, so->slots[i], depth + 1);
            }
        } else if (ost__type(o->state) == OST_T_DICT) {
            size_t pos = 0, k = 0;
            ost_value key, val;
            while (ost_dict_next(o->state, &pos, &key, &val) && !c->err) {
                if (k++) puts_(c, ", ");
                if (ost__type(key) == OST_T_STR) puts_(c, ((ost_str_obj *)key)->data);
                else repr_value(c, key, depth + 1);
                puts_(c, "=");
                repr_value(c, val, depth + 1);
            }
        } else if (o->state != OST_NONE) {
            puts_(c, "__state__=");
            repr_value(c, o->state, depth + 1);
        }
        puts_(c, ")");
        break;
    }
    case OST_T_GLOBAL: repr_global(c, v); return;
    case OST_T_REDUCE: {
        ost_reduce_obj *r = (ost_reduce_obj *)v;
        if (!enter(c, v, "...")) return;
        repr_value(c, r->callable, depth + 1);
        if (r->kind != OST_REDUCE_CALL) puts_(c, ".__new__");
        puts_(c, "(");
        if (ost__type(r->args) == OST_T_TUPLE) repr_items(c, r->args, depth);
        else repr_value(c, r->args, depth + 1);
        if (r->kwargs) {
            puts_(c, ", **");
            repr_value(c, r->kwargs, depth + 1);
        }
        puts_(c, ")");
        if (r->listitems) {
            puts_(c, ".extend(");
            repr_value(c, r->listitems, depth + 1);
            puts_(c, ")");
        }
        if (r->dictitems) {
            puts_(c, ".update(");
            repr_value(c, r->dictitems, depth + 1);
            puts_(c, ")");
        }
        if (r->state) {
            puts_(c, ".__setstate__(");
            repr_value(c, r->state, depth + 1);
            puts_(c, ")");
        }
        break;
    }
    case OST_T_PERSREF:
        puts_(c, "persistent(");
        repr_value(c, ((ost_persref_obj *)v)->pid, depth + 1);
        puts_(c, ")");
        return;
    default: puts_(c, "<invalid>"); return;
    }
    leave(c, v);
}

int ost_repr(ost_value v, ost_buf *out) {
    repr_ctx c = {.out = out};
    if (ost__ptrtab_init(&c.active, 16)) return OST_ENOMEM;
    if (ost__buf_reserve(out, 0)) c.err = OST_ENOMEM;
    repr_value(&c, v, 0);
    ost__ptrtab_free(&c.active);
    return c.err;
}
