/* A Python-like repr of values: ost_repr and ost_repr_ex. Shared objects
 * print once, labelled (see "shared objects" below), ints past a number of
 * digits in hexadecimal, and the text can be capped. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"

#define REPR_MAX_DEPTH 1000

/* err values of a print that are not errors: the text reached max_len
 * (REPR_CUT), or a plain print met a mutable value (REPR_MUTABLE). */
#define REPR_CUT 1
#define REPR_MUTABLE 2

typedef struct {
    ost_buf *out;
    size_t start;     /* out->len when the print began */
    size_t max_len;   /* bytes of text at most; 0: no limit */
    size_t int_digits; /* decimal digits of an int at most, else hex; 0: no limit */
    ost__ptrtab seen; /* objects that may be labelled: SEEN_* bits */
    ost_buf scratch;  /* the text of a short immutable value */
    uint64_t labels;  /* labels given so far */
    bool counting;    /* the first pass: prints nothing */
    bool plain;       /* prints without labels, depth limit or cycle checks */
    int err;          /* an OST_E* code or REPR_CUT / REPR_MUTABLE */
} repr_ctx;

/* Appends s[0..n), or as much of it as max_len leaves (cut at a UTF-8
 * character boundary), then stops the print with REPR_CUT. */
static void put(repr_ctx *c, const char *s, size_t n) {
    if (c->err || c->counting) return;
    if (c->max_len) {
        size_t room = c->max_len - (c->out->len - c->start);
        if (n > room) {
            while (room > 0 && ((unsigned char)s[room] & 0xc0) == 0x80) room--;
            if (room) c->err = ost__buf_append(c->out, s, room);
            if (!c->err) c->err = REPR_CUT;
            return;
        }
    }
    c->err = ost__buf_append(c->out, s, n);
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

/* Hexadecimal text of a heap int as Python's hex() gives it (0x1f, -0x1f):
 * linear in its size. */
static int int_hex(const ost_int_obj *o, ost_buf *out) {
    static const char xd[] = "0123456789abcdef";
    size_t n = o->n;
    bool neg = o->b[n - 1] & 0x80;
    char *d = malloc(2 * n + 3);
    if (!d) return OST_ENOMEM;
    /* the magnitude's digits, least significant first, from the end */
    char *e = d + 2 * n + 3, *p = e;
    unsigned carry = neg;
    for (size_t k = 0; k < n; k++) {
        unsigned b = (neg ? (uint8_t)~o->b[k] : o->b[k]) + carry;
        carry = b >> 8;
        *--p = xd[b & 0xf];
        *--p = xd[(b >> 4) & 0xf];
    }
    while (p < e - 1 && *p == '0') p++;
    *--p = 'x';
    *--p = '0';
    if (neg) *--p = '-';
    int rc = ost__buf_append(out, p, (size_t)(e - p));
    free(d);
    return rc;
}

/* The text of int v: decimal, or hexadecimal when the decimal text would
 * have more than max_digits digits (0: no limit). The digits are counted
 * from the bit length, and only an int near the limit is converted to
 * find out, so the work is linear past the limit. */
static int int_text(ost_value v, size_t max_digits, ost_buf *out) {
    int64_t i;
    if (ost_int_value(v, &i) == 0) {
        char tmp[32];
        int k = snprintf(tmp, sizeof tmp, "%lld", (long long)i);
        size_t digits = (size_t)k - (i < 0);
        if (!max_digits || digits <= max_digits) return ost__buf_append(out, tmp, (size_t)k);
        uint64_t m = i < 0 ? 0 - (uint64_t)i : (uint64_t)i;
        return ost__buf_printf(out, "%s0x%llx", i < 0 ? "-" : "", (unsigned long long)m);
    }
    const ost_int_obj *o = (const ost_int_obj *)v;
    if (!max_digits) return ost__int_decimal(v, out);
    /* the bit length of |v| (of |v| - 1 for a negative v, which has the
     * same or one bit fewer) */
    size_t top = o->n - 1;
    uint8_t sign = o->b[top] & 0x80 ? 0xff : 0;
    while (top > 0 && o->b[top] == sign) top--;
    unsigned tb = (uint8_t)(o->b[top] ^ sign), bl = 0;
    while (tb) bl++, tb >>= 1;
    double bits = 8.0 * (double)top + bl;
    /* 2^(bits-2) <= |v| < 2^(bits+1): digits between these bounds */
    double lo = floor((bits - 2) * 0.301029995) + 1, hi = floor((bits + 1) * 0.30103) + 1;
    if (lo > (double)max_digits) return int_hex(o, out);
    size_t at = out->len;
    int rc = ost__int_decimal(v, out);
    if (rc || hi <= (double)max_digits) return rc;
    size_t digits = out->len - at - (out->data[at] == '-');
    if (digits <= max_digits) return 0;
    out->len = at;
    out->data[at] = 0;
    return int_hex(o, out);
}

/* ---- shared objects ------------------------------------------------------
 *
 * A graph can reach one object many times: 63 levels of tuples that each
 * hold the level below twice are a pickle of a few hundred bytes whose
 * naive repr has 2^63 parts. So repr prints an object that the graph reaches more than
 * once in full the first time, after a label #N=, and as #N# afterwards,
 * as Lisp's printer does with *print-circle*. A reach of an object while
 * it is being printed (a cycle) still prints as Python does: [...],
 * {...}, (...) or ....
 *
 * Which objects: every list, dict, set, bytearray, instance and reduce
 * value, whose identity means something (a change through one reference
 * shows through the other). An immutable value (str, bytes, int, tuple,
 * frozenset, persistent reference) is labelled only when its text is
 * longer than REPR_SHORT bytes or holds a mutable value; a short one
 * prints in full at every reach, as Python prints it, so that the tuple
 * (1, 2) that CPython shares between two constants still reads (1, 2).
 * Globals, floats, None and booleans always print in full. Then every
 * reach prints at most REPR_SHORT bytes plus what the graph holds once,
 * and the text is linear in the size of the graph (up to global names,
 * which print in full each time: max_len bounds those).
 *
 * Two passes of one walk. The first prints nothing: it marks, in the
 * identity table c->seen, each object reached a second time. The second
 * prints, numbering labels in the order their objects first print, and
 * prints a short shared immutable value by a plain walk (render_short)
 * instead of the tracked one. Every decision on the way (depth, cycle,
 * first or later reach) is the same in both passes, and what the second
 * skips (short values) holds nothing labelled, so the second pass meets
 * each labelled object first where the first pass did. */

#define REPR_SHORT 64

#define SEEN_ACTIVE 1u     /* being printed: a reach now is a cycle */
#define SEEN_SHARED 2u     /* reached more than once (first pass) */
#define SEEN_PRINTED 4u    /* printed in full (second pass) */
#define SEEN_LONG 8u       /* shared and not short: labelled */
#define SEEN_LABEL_SHIFT 4 /* the label's number (second pass) */

enum { REACH_NEW, REACH_CYCLE, REACH_AGAIN, REACH_DONE };

static bool is_mutable(int t) {
    return t == OST_T_LIST || t == OST_T_DICT || t == OST_T_SET || t == OST_T_BYTEARRAY ||
           t == OST_T_INSTANCE || t == OST_T_REDUCE;
}

/* True when the str or bytes s[0..n) prints as itself between quotes:
 * printable ASCII without a backslash or a quote. */
static bool plain_ascii(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch < 0x20 || ch > 0x7e || ch == '\\' || ch == '\'' || ch == '"') return false;
    }
    return true;
}

static size_t scalar_bound(ost_value v);

/* Whether repr keeps track of v: a heap value that may be labelled. What
 * it leaves out prints in REPR_SHORT bytes or fewer and holds no mutable
 * value, so it prints the same whether tracked or not (scalar_bound). */
static bool may_track(ost_value v) {
    if (!ost__is_heap(v)) return false;
    int t = ost__type(v);
    if (t == OST_T_GLOBAL || t == OST_T_FLOAT) return false; /* counts shared by threads */
    /* the one reference to an object of count 1 is its one parent's, and
     * a parent prints in full once, so the walk reaches it once, and never
     * in a cycle (its own descendants hold no reference to it) */
    if (OST__O(v)->refcnt == 1) return false;
    if (is_mutable(t)) return true;
    switch (t) {
    case OST_T_TUPLE: {
        /* a few scalars, such as (i, 2.5), are short */
        size_t n = ost_len(v), sum = 3;
        for (size_t i = 0; i < n && sum <= REPR_SHORT; i++)
            sum += scalar_bound(ost_item(v, i)) + 2;
        return sum > REPR_SHORT;
    }
    case OST_T_FROZENSET: return ost_len(v) > 0;
    case OST_T_STR:
    case OST_T_BYTES:
    case OST_T_INT: return scalar_bound(v) > REPR_SHORT;
    case OST_T_PERSREF: return scalar_bound(((ost_persref_obj *)v)->pid) > REPR_SHORT - 12;
    default: return false;
    }
}

/* The most bytes the text of v can take when v is a scalar whose text is
 * short (SIZE_MAX / 4 for anything else): a str or bytes of 15 bytes at
 * most prints in 4 * 15 + 3 bytes, a longer one of plain ASCII in its
 * length + 3; an int in 20 bytes (immediates) or 64 (heap ints of 26
 * bytes at most: 63 digits and a sign, or 52 hex digits); a float in 24
 * ("-2.2250738585072014e-308"). */
static size_t scalar_bound(ost_value v) {
    switch (ost__type(v)) {
    case OST_T_NONE: return 4;
    case OST_T_BOOL: return 5;
    case OST_T_FLOAT: return 24;
    case OST_T_INT: return ost__is_small(v) ? 20 : ((ost_int_obj *)v)->n <= 26 ? 64 : SIZE_MAX / 4;
    case OST_T_STR:
    case OST_T_BYTES: {
        const ost_str_obj *o = (const ost_str_obj *)v;
        if (o->len <= 15) return 4 * o->len + 3;
        if (o->len <= REPR_SHORT - 3 && plain_ascii(ost__sdata(o), o->len)) return o->len + 3;
        return SIZE_MAX / 4;
    }
    default: return SIZE_MAX / 4;
    }
}

static void repr_value(repr_ctx *c, ost_value v, int depth);

/* Renders v into c->scratch by a plain walk: true when its text is at most
 * REPR_SHORT bytes and holds no mutable value. */
static bool render_short(repr_ctx *c, ost_value v) {
    c->scratch.len = 0;
    repr_ctx p = {.out = &c->scratch, .max_len = REPR_SHORT, .int_digits = c->int_digits,
                  .plain = true};
    repr_value(&p, v, 0);
    if (p.err < 0) c->err = p.err;
    return p.err == 0;
}

/* In the second pass: whether v, reached more than once, prints in full
 * at every reach (a short immutable value), with its text in c->scratch. */
static bool short_shared(repr_ctx *c, ost_value v) {
    ost__ptr_slot *s = ost__ptrtab_find(&c->seen, v);
    if (!s->key || !(s->val & SEEN_SHARED) || (s->val & SEEN_LONG)) return false;
    if (!is_mutable(ost__type(v)) && render_short(c, v)) return true; /* again at each reach */
    ost__ptrtab_find(&c->seen, v)->val |= SEEN_LONG;
    return false;
}

static void put_label(repr_ctx *c, uint64_t val, char end) {
    char tmp[32];
    int k = snprintf(tmp, sizeof tmp, "#%llu%c", (unsigned long long)(val >> SEEN_LABEL_SHIFT),
                     end);
    put(c, tmp, (size_t)k);
}

/* Records a reach of v (may_track(v) is true): REACH_NEW to print it in
 * full (its label is printed first when it is shared; leave() ends it),
 * REACH_CYCLE while it is being printed, REACH_AGAIN when it printed
 * before (the caller prints back_ref()), REACH_DONE when this printed it
 * (a short shared immutable value). */
static int reach(repr_ctx *c, ost_value v) {
    ost__ptr_slot *s = ost__ptrtab_find(&c->seen, v);
    if (!s->key) {
        if (ost__ptrtab_put(&c->seen, v, SEEN_ACTIVE | (c->counting ? 0 : SEEN_PRINTED))) {
            c->err = OST_ENOMEM;
            return REACH_DONE;
        }
        return REACH_NEW;
    }
    if (s->val & SEEN_ACTIVE) return REACH_CYCLE;
    if (c->counting) {
        s->val |= SEEN_SHARED;
        return REACH_AGAIN;
    }
    if (short_shared(c, v)) {
        put(c, c->scratch.data, c->scratch.len);
        return REACH_DONE;
    }
    s = ost__ptrtab_find(&c->seen, v);
    if (s->val & SEEN_PRINTED) return REACH_AGAIN;
    s->val |= SEEN_ACTIVE | SEEN_PRINTED;
    if (s->val & SEEN_SHARED) {
        s->val |= ++c->labels << SEEN_LABEL_SHIFT;
        put_label(c, s->val, '=');
    }
    return REACH_NEW;
}

static void back_ref(repr_ctx *c, ost_value v) {
    put_label(c, ost__ptrtab_find(&c->seen, v)->val, '#');
}

static void leave(repr_ctx *c, ost_value v) {
    ost__ptrtab_find(&c->seen, v)->val &= ~(uint64_t)SEEN_ACTIVE;
}

/* True in the second pass when v is tracked and reached more than once. */
static bool shared(repr_ctx *c, ost_value v) {
    if (c->counting || c->plain || !may_track(v)) return false;
    ost__ptr_slot *s = ost__ptrtab_find(&c->seen, v);
    return s->key && (s->val & SEEN_SHARED);
}

static const char *cycle_text(ost_value v) {
    switch (ost__type(v)) {
    case OST_T_TUPLE: return "(...)";
    case OST_T_LIST: return "[...]";
    case OST_T_DICT: return "{...}";
    default: return "...";
    }
}

/* ---- the walk ------------------------------------------------------------ */

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

/* An attribute name of an instance's dict state: a str prints bare, as in
 * name=value, unless it is a long one reached more than once. */
static void repr_attr(repr_ctx *c, ost_value key, int depth) {
    if (ost__type(key) != OST_T_STR || (shared(c, key) && !short_shared(c, key))) {
        repr_value(c, key, depth + 1);
        return;
    }
    bool track = c->counting && may_track(key) && depth + 1 <= REPR_MAX_DEPTH;
    if (track && reach(c, key) == REACH_NEW) leave(c, key);
    puts_(c, ((ost_str_obj *)key)->data);
}

static void repr_instance(repr_ctx *c, ost_value v, int depth) {
    ost_inst_obj *o = (ost_inst_obj *)v;
    repr_global(c, o->cls);
    puts_(c, "(");
    if (o->h.flags & OST__F_GHOST) {
        puts_(c, "<ghost>"); /* repr never loads state */
    } else if (ost__slotted(v)) {
        ost_slots_obj *so = (ost_slots_obj *)v;
        ost__klass *k = ost__klass_of(so->cls);
        size_t shown = 0;
        for (size_t i = 0, n = ost__nslots(so); i < n && !c->err; i++) {
            if (!so->slots[i]) continue;
            if (shown++) puts_(c, ", ");
            puts_(c, ((ost_str_obj *)k->fields[i])->data);
            puts_(c, "=");
            repr_value(c, so->slots[i], depth + 1);
        }
        /* fields the class does not declare, kept from the state read */
        size_t pos = 0;
        ost_value key, val;
        ost_value extra = ost__extra(v);
        while (extra && ost_dict_next(extra, &pos, &key, &val) && !c->err) {
            if (shown++) puts_(c, ", ");
            repr_attr(c, key, depth);
            puts_(c, "=");
            repr_value(c, val, depth + 1);
        }
    } else if (ost__type(o->state) == OST_T_DICT && !shared(c, o->state)) {
        /* inline: the dict is reached here, one level down, as its items;
         * a shared one prints whole, as __state__=#N={...} */
        bool track = !c->plain && may_track(o->state) && depth + 1 <= REPR_MAX_DEPTH;
        int r = track ? reach(c, o->state) : REACH_NEW;
        if (r == REACH_CYCLE) puts_(c, "__state__={...}");
        if (r == REACH_NEW) {
            size_t pos = 0, k = 0;
            ost_value key, val;
            while (ost_dict_next(o->state, &pos, &key, &val) && !c->err) {
                if (k++) puts_(c, ", ");
                repr_attr(c, key, depth);
                puts_(c, "=");
                repr_value(c, val, depth + 1);
            }
            if (track) leave(c, o->state);
        }
    } else if (o->state != OST_NONE) {
        puts_(c, "__state__=");
        repr_value(c, o->state, depth + 1);
    }
    puts_(c, ")");
    /* the items of a list or dict subclass's instance, as a reduce value's */
    if (!(o->h.flags & OST__F_GHOST) && !ost__slotted(v) && o->items) {
        puts_(c, ost__type(o->items) == OST_T_LIST ? ".extend(" : ".update(");
        repr_value(c, o->items, depth + 1);
        puts_(c, ")");
    }
}

static void repr_reduce(repr_ctx *c, ost_value v, int depth) {
    ost_reduce_obj *r = (ost_reduce_obj *)v;
    repr_value(c, r->callable, depth + 1);
    if (r->kind != OST_REDUCE_CALL) puts_(c, ".__new__");
    puts_(c, "(");
    if (ost__type(r->args) != OST_T_TUPLE) {
        repr_value(c, r->args, depth + 1);
    } else if (shared(c, r->args) && short_shared(c, r->args)) {
        /* the items of a short tuple: its text without the brackets */
        const ost_buf *b = &c->scratch;
        put(c, b->data + 1, b->len - (ost_len(r->args) == 1 ? 3 : 2));
    } else if (shared(c, r->args)) {
        puts_(c, "*"); /* f(*#N=(1, 2)) */
        repr_value(c, r->args, depth + 1);
    } else {
        /* inline, as the instance's dict state above */
        bool track = !c->plain && may_track(r->args) && depth + 1 <= REPR_MAX_DEPTH;
        int rc = track ? reach(c, r->args) : REACH_NEW;
        if (rc == REACH_CYCLE) puts_(c, "*(...)");
        if (rc == REACH_NEW) {
            repr_items(c, r->args, depth);
            if (track) leave(c, r->args);
        }
    }
    if (r->kwargs) {
        puts_(c, ", **");
        repr_value(c, r->kwargs, depth + 1);
    }
    puts_(c, ")");
    static const char *const calls[3] = {".extend(", ".update(", ".__setstate__("};
    ost_value after[3] = {r->listitems, r->dictitems, r->state};
    for (int i = 0; i < 3; i++)
        if (after[i]) {
            puts_(c, calls[i]);
            repr_value(c, after[i], depth + 1);
            puts_(c, ")");
        }
}

/* Prints v in full. */
static void repr_body(repr_ctx *c, ost_value v, int depth) {
    char tmp[64];
    int t = ost__type(v);
    switch (t) {
    case OST_T_NONE: puts_(c, "None"); return;
    case OST_T_BOOL: puts_(c, v == OST_TRUE ? "True" : "False"); return;
    case OST_T_INT: {
        if (c->counting) return;
        int64_t i;
        if (ost__is_small(v) && (i = ost__small_val(v), 1) && c->int_digits >= 19) {
            int k = snprintf(tmp, sizeof tmp, "%lld", (long long)i);
            put(c, tmp, (size_t)k); /* at most 19 digits: decimal */
            return;
        }
        ost_buf b = {0};
        int rc = int_text(v, c->int_digits, &b);
        if (rc) c->err = rc;
        else put(c, b.data, b.len);
        ost_buf_free(&b);
        return;
    }
    case OST_T_FLOAT:
        if (c->counting) return;
        ost__float_repr(ost__float_get(v), tmp, sizeof tmp);
        puts_(c, tmp);
        return;
    case OST_T_STR: {
        if (c->counting) return;
        ost_str_obj *s = (ost_str_obj *)v;
        repr_text(c, s->data, s->len, false);
        return;
    }
    case OST_T_BYTES:
    case OST_T_BYTEARRAY: {
        if (c->counting) return;
        ost_str_obj *s = (ost_str_obj *)v;
        bool ba = s->h.type == OST_T_BYTEARRAY;
        puts_(c, ba ? "bytearray(b" : "b");
        repr_text(c, ost__sdata(s), s->len, ba ? 2 : 1);
        if (ba) puts_(c, ")");
        return;
    }
    case OST_T_TUPLE:
        puts_(c, "(");
        repr_items(c, v, depth);
        puts_(c, ost_len(v) == 1 ? ",)" : ")");
        return;
    case OST_T_LIST:
        puts_(c, "[");
        repr_items(c, v, depth);
        puts_(c, "]");
        return;
    case OST_T_DICT: {
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
        return;
    }
    case OST_T_SET:
    case OST_T_FROZENSET: {
        bool fz = t == OST_T_FROZENSET;
        if (!ost_len(v)) {
            puts_(c, fz ? "frozenset()" : "set()");
            return;
        }
        puts_(c, fz ? "frozenset({" : "{");
        size_t pos = 0, k = 0;
        ost_value key;
        while (ost_dict_next(v, &pos, &key, NULL) && !c->err) {
            if (k++) puts_(c, ", ");
            repr_value(c, key, depth + 1);
        }
        puts_(c, fz ? "})" : "}");
        return;
    }
    case OST_T_INSTANCE: repr_instance(c, v, depth); return;
    case OST_T_GLOBAL: repr_global(c, v); return;
    case OST_T_REDUCE: repr_reduce(c, v, depth); return;
    case OST_T_PERSREF:
        puts_(c, "persistent(");
        repr_value(c, ((ost_persref_obj *)v)->pid, depth + 1);
        puts_(c, ")");
        return;
    default: puts_(c, "<invalid>"); return;
    }
}

static void repr_value(repr_ctx *c, ost_value v, int depth) {
    if (c->err) return;
    if (c->plain) {
        /* short immutable values only: no depth limit, no cycles */
        if (is_mutable(ost__type(v))) c->err = REPR_MUTABLE;
        else repr_body(c, v, depth);
        return;
    }
    if (depth > REPR_MAX_DEPTH) {
        puts_(c, "<...>");
        return;
    }
    if (!may_track(v)) {
        repr_body(c, v, depth);
        return;
    }
    switch (reach(c, v)) {
    case REACH_NEW: break;
    case REACH_CYCLE: puts_(c, cycle_text(v)); return;
    case REACH_AGAIN: back_ref(c, v); return;
    default: return;
    }
    repr_body(c, v, depth);
    leave(c, v);
}

void ost_repr_options_init(ost_repr_options *o) {
    o->int_digits = OST_REPR_INT_DIGITS;
    o->max_len = 0;
    o->load_ghost = false;
}

int ost_repr_ex(ost_value v, ost_buf *out, const ost_repr_options *o) {
    ost_repr_options def;
    if (!o) {
        ost_repr_options_init(&def);
        o = &def;
    }
    if (o->load_ghost && ost__is_heap(v) && (OST__O(v)->flags & OST__F_GHOST)) {
        ost__value_fail(0, "%s", "");
        int rc = ost__activate(v);
        if (rc) {
            if (!ost_value_errmsg()[0])
                ost__value_fail(rc, "repr: the ghost did not load (%s): its connection is closed "
                                    "or belongs to another thread", ost_strerror(rc));
            return rc;
        }
    }
    repr_ctx c = {.out = out, .start = out->len, .max_len = o->max_len,
                  .int_digits = o->int_digits, .counting = true};
    if (ost__ptrtab_init(&c.seen, 16)) return OST_ENOMEM;
    if (ost__buf_reserve(out, 0)) c.err = OST_ENOMEM;
    repr_value(&c, v, 0); /* finds the shared objects */
    c.counting = false;
    if (!c.err) repr_value(&c, v, 0);
    ost__ptrtab_free(&c.seen);
    ost_buf_free(&c.scratch);
    if (c.err == REPR_CUT)
        c.err = ost__buf_printf(out, "... (output truncated at %zu bytes)", o->max_len);
    return c.err;
}

int ost_repr(ost_value v, ost_buf *out) { return ost_repr_ex(v, out, NULL); }
