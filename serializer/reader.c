/* The pickle reader: protocols 0 to 5, a bounded stack machine that never
 * executes what a pickle names. Lengths from the input are checked against
 * the bytes that remain before anything is allocated for them. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "internal.h"
#include "opcodes.h"

struct ost_reader {
    uint32_t magic; /* OST__H_READER */
    ost_limits lim;
    ost_find_global_fn find_global;
    void *fg_ud;
    ost_persistent_load_fn pers_load;
    void *pl_ud;
    ost_value *stack;
    uint32_t *dep; /* per stack slot: how deep its value nests (see nest) */
    size_t sp, stcap, dcap; /* dcap >= stcap */
    size_t *marks;
    size_t nmarks, mcap;
    ost_value *memo; /* dense part: index -> value (0 = unset) */
    size_t memo_cap, memo_hi, memo_count;
    size_t memo_dense; /* indexes below this are dense in this load (memo_cap
                        * may be larger, kept from an earlier load) */
    ost__ptrtab sparse; /* index + 1 -> value, for far indexes */
    ost_value trash;    /* list of values popped while loading */
    ost_value pid_pair; /* the tuple load_pair_pid lends its hook, or 0 */
    size_t bytes;       /* bytes allocated for values so far */
    const uint8_t *base, *end;
    int proto; /* of the pickle being read: PROTO's, 0 without one */
    ost__lender *lender; /* ost_load_lent's buffer, NULL in ost_load */
    ost_py2str py2str; /* what a Python 2 str becomes */
    int err;
    size_t erroff;
    char msg[320];
    /* ost_load_state's direct path: the pickle's outermost EMPTY_DICT is
     * slot_target itself, and SETITEM(S) on it fill its slots, with no
     * dict built, hashed and dropped. slot_used says it happened; slot_odd
     * that the pickle reached the instance some other way (GET or DUP of
     * the dict), which the direct path cannot honour: it then reads again
     * the usual way. */
    ost_value slot_target;
    bool slot_used, slot_odd;
};

#define DEFAULT_LIMITS \
    {10000000, (size_t)1 << 26, (size_t)1 << 31, (size_t)4 << 30}

ost_reader *ost_reader_new(void) {
    ost_reader *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->magic = OST__H_READER;
    r->lim = (ost_limits)DEFAULT_LIMITS;
    return r;
}

static void clear_memo(ost_reader *r);

void ost_reader_free(ost_reader *r) {
    if (!r) return;
    clear_memo(r);
    ost__ptrtab_free(&r->sparse);
    ost_decref(r->pid_pair);
    free(r->memo);
    free(r->stack);
    free(r->dep);
    free(r->marks);
    free(r);
}

void ost_reader_get_limits(const ost_reader *r, ost_limits *l) { *l = r->lim; }

void ost_reader_set_limits(ost_reader *r, const ost_limits *l) {
    if (l->max_depth) r->lim.max_depth = l->max_depth;
    if (l->max_memo) r->lim.max_memo = l->max_memo;
    if (l->max_container) r->lim.max_container = l->max_container;
    if (l->max_bytes) r->lim.max_bytes = l->max_bytes;
}

int ost_reader_set_py2str(ost_reader *r, ost_py2str mode) {
    if (!r || (unsigned)mode > OST_PY2STR_BYTES) return OST_EINVAL;
    r->py2str = mode;
    return 0;
}

ost_py2str ost_reader_get_py2str(const ost_reader *r) { return r->py2str; }

void ost_reader_set_find_global(ost_reader *r, ost_find_global_fn fn, void *ud) {
    r->find_global = fn;
    r->fg_ud = ud;
}

void ost_reader_set_persistent_load(ost_reader *r, ost_persistent_load_fn fn,
                                    void *ud) {
    r->pers_load = fn;
    r->pl_ud = ud;
}

const char *ost_reader_errmsg(const ost_reader *r) { return r->msg; }
size_t ost_reader_erroffset(const ost_reader *r) { return r->erroff; }

/* ---- errors ------------------------------------------------------------- */

static const char *op_name(int op);

static int rfail(ost_reader *r, const uint8_t *at, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int rfail(ost_reader *r, const uint8_t *at, int code, const char *fmt, ...) {
    if (r->err) return r->err; /* keep the first error */
    char detail[240];
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(detail, sizeof detail, fmt, ap);
    va_end(ap);
    r->err = code;
    r->erroff = (size_t)(at - r->base);
    snprintf(r->msg, sizeof r->msg, "%s at offset %zu: %s", ost_err_name(code),
             r->erroff, detail);
    return code;
}

#define NOMEM(at) rfail(r, at, OST_ENOMEM, "out of memory")

/* ---- stack and memo ------------------------------------------------------ */

static int account(ost_reader *r, const uint8_t *at, size_t n) {
    r->bytes += n;
    if (r->bytes > r->lim.max_bytes)
        return rfail(r, at, OST_ELIMIT, "values would take more than %zu bytes "
                     "(limit max_bytes)", r->lim.max_bytes);
    return 0;
}

static int push_slow(ost_reader *r, const uint8_t *at, ost_value v);

/* Pushes v (stolen). The common case inline; push_slow checks, grows and
 * fails exactly as before. */
static inline int push(ost_reader *r, const uint8_t *at, ost_value v) {
    if (OST_LIKELY(v && r->sp < r->stcap && r->sp < r->lim.max_container)) {
        r->dep[r->sp] = 0;
        r->stack[r->sp++] = v;
        return 0;
    }
    return push_slow(r, at, v);
}

static __attribute__((noinline)) int push_slow(ost_reader *r, const uint8_t *at,
                                               ost_value v) {
    if (!v) return NOMEM(at);
    /* checked on every push, not only when the stack grows, so that a
     * limit between two growth steps holds exactly */
    if (OST_UNLIKELY(r->sp >= r->lim.max_container)) {
        ost_decref(v);
        return rfail(r, at, OST_ELIMIT, "stack longer than %zu (limit max_container)",
                     r->lim.max_container);
    }
    if (OST_UNLIKELY(r->sp == r->stcap)) {
        if (ost__grow((void **)&r->stack, &r->stcap, r->sp + 1, sizeof *r->stack, 256)) {
            ost_decref(v);
            return NOMEM(at);
        }
        if (ost__reserve((void **)&r->dep, &r->dcap, r->stcap, sizeof *r->dep, 256)) {
            r->stcap = r->dcap; /* the stack has room for that many at least */
            ost_decref(v);
            return NOMEM(at);
        }
    }
    r->dep[r->sp] = 0;
    r->stack[r->sp++] = v;
    return 0;
}

/* ---- nesting ---------------------------------------------------------------
 * One limit, max_depth, bounds how deep a pickle nests: open MARKs (each
 * counts one level, load_mark), and containers inside containers as the
 * pickle builds them on the stack. dep[i] is the depth of the value in
 * slot i: 0 for a scalar, 1 for a container with no container inside, one
 * more than its deepest item otherwise. Siblings (the items of one
 * container) do not add up. A value fetched from the memo counts 0: a
 * graph made deeper through the memo is safe too, since nothing in ostore
 * recurses on the C stack; the limit is for programs that walk what they
 * read. */

/* The deepest value in stack slots [from, to). */
static inline uint32_t max_dep(const ost_reader *r, size_t from, size_t to) {
    uint32_t m = 0;
    for (size_t i = from; i < to; i++)
        if (r->dep[i] > m) m = r->dep[i];
    return m;
}

/* Slot i now holds a value nested d deep (or what it had, if deeper). */
static int nest(ost_reader *r, const uint8_t *at, size_t i, uint64_t d) {
    if (OST_UNLIKELY(d > r->lim.max_depth || d > UINT32_MAX))
        return rfail(r, at, OST_ELIMIT, "containers nested deeper than %zu (limit max_depth)",
                     r->lim.max_depth);
    if (d > r->dep[i]) r->dep[i] = (uint32_t)d;
    return 0;
}

static size_t mark_base(const ost_reader *r) {
    return r->nmarks ? r->marks[r->nmarks - 1] : 0;
}

/* Values above the current mark. */
static inline size_t above(const ost_reader *r) { return r->sp - mark_base(r); }

static int need(ost_reader *r, const uint8_t *at, size_t n, int op) {
    if (OST_LIKELY(above(r) >= n)) return 0;
    return rfail(r, at, OST_EBADPICKLE, "%s needs %zu value%s on the stack, found %zu",
                 op_name(op), n, n == 1 ? "" : "s", above(r));
}

static int pop_mark(ost_reader *r, const uint8_t *at, int op, size_t *base) {
    *base = 0;
    if (!r->nmarks)
        return rfail(r, at, OST_EBADPICKLE, "%s without a MARK", op_name(op));
    *base = r->marks[--r->nmarks];
    return 0;
}

static void trash(ost_reader *r, ost_value v) {
    if (!ost__is_heap(v)) return;
    if (!r->trash && !(r->trash = ost_list_new(16))) {
        ost_decref(v); /* could leak a cycle, but only when out of memory */
        return;
    }
    ost_list_append(r->trash, v);
}

static ost_value memo_get(ost_reader *r, size_t idx) {
    /* an index the dense part grew over may have been put in the sparse
     * part before it did */
    if (idx < r->memo_hi && r->memo[idx]) return r->memo[idx];
    if (r->sparse.count) {
        ost__ptr_slot *s = ost__ptrtab_find(&r->sparse, idx + 1);
        if (s->key) return (ost_value)s->val;
    }
    return 0;
}

static int memo_put(ost_reader *r, const uint8_t *at, size_t idx, ost_value v) {
    ost__incref(v);
    /* dense while indexes stay near the input consumed, else sparse; the
     * choice depends on this load alone, never on what an earlier load
     * left allocated, so that every load of the same input does the same */
    size_t pos = (size_t)(at - r->base);
    if (idx < r->memo_dense || idx <= pos * 2 + 64) {
        if (idx >= r->memo_dense) {
            size_t cap = r->memo_dense ? r->memo_dense : 64;
            while (cap <= idx) cap *= 2;
            if (cap > r->memo_cap) {
                ost_value *m = realloc(r->memo, cap * sizeof *m);
                if (!m) {
                    ost_decref(v);
                    return NOMEM(at);
                }
                memset(m + r->memo_cap, 0, (cap - r->memo_cap) * sizeof *m);
                r->memo = m;
                r->memo_cap = cap;
            }
            r->memo_dense = cap;
        }
        if (idx >= r->memo_hi) r->memo_hi = idx + 1;
        ost_value old = r->memo[idx];
        r->memo[idx] = v;
        if (old) trash(r, old);
        else r->memo_count++;
    } else {
        if (!r->sparse.slots && ost__ptrtab_init(&r->sparse, 16)) {
            ost_decref(v);
            return NOMEM(at);
        }
        ost__ptr_slot *s = ost__ptrtab_find(&r->sparse, idx + 1);
        if (s->key) {
            trash(r, (ost_value)s->val);
            s->val = v;
        } else if (ost__ptrtab_put(&r->sparse, idx + 1, v)) {
            ost_decref(v);
            return NOMEM(at);
        } else
            r->memo_count++;
    }
    if (r->memo_count > r->lim.max_memo)
        return rfail(r, at, OST_ELIMIT, "more than %zu memo entries (limit max_memo)",
                     r->lim.max_memo);
    return 0;
}

/* Moves every value the load still holds (stack, memo, trash) into one
 * list and releases it, so cycles among them are freed too. */
static void clear_memo(ost_reader *r) {
    for (size_t i = 0; i < r->memo_hi; i++) {
        ost_decref(r->memo[i]);
        r->memo[i] = 0;
    }
    r->memo_hi = 0;
    r->memo_dense = 0;
    for (size_t i = 0; r->sparse.slots && i <= r->sparse.mask; i++)
        if (r->sparse.slots[i].key) ost_decref((ost_value)r->sparse.slots[i].val);
    if (r->sparse.slots) ost__ptrtab_clear(&r->sparse);
    r->memo_count = 0;
    if (r->memo_cap > 65536) { /* a huge pickle's memo: give it back */
        free(r->memo);
        r->memo = NULL;
        r->memo_cap = 0;
    }
}

static void release_all(ost_reader *r, bool failed) {
    if (!failed && !r->trash) {
        clear_memo(r);
        return;
    }
    /* gather every held reference in one list and collect it */
    ost_value all = r->trash ? r->trash : ost_list_new(0);
    r->trash = 0;
    if (all) {
        for (size_t i = 0; i < r->memo_hi; i++)
            if (r->memo[i]) {
                ost_list_append(all, r->memo[i]);
                r->memo[i] = 0;
            }
        for (size_t i = 0; r->sparse.slots && i <= r->sparse.mask; i++)
            if (r->sparse.slots[i].key) {
                ost_list_append(all, (ost_value)r->sparse.slots[i].val);
                r->sparse.slots[i].key = 0;
            }
        r->sparse.count = 0;
        while (r->sp) ost_list_append(all, r->stack[--r->sp]);
        ost_release(all);
    }
    while (r->sp) ost_decref(r->stack[--r->sp]);
    clear_memo(r);
}

/* ---- reading helpers ------------------------------------------------------- */

static inline bool has(const ost_reader *r, const uint8_t *p, size_t n) {
    return (size_t)(r->end - p) >= n;
}

static int truncated(ost_reader *r, const uint8_t *at, int op, size_t want,
                     const uint8_t *p) {
    return rfail(r, at, OST_ETRUNCATED, "%s needs %zu bytes, %zu left", op_name(op),
                 want, (size_t)(r->end - p));
}

static inline uint64_t rd_le(const uint8_t *p, int n) {
    uint64_t v = 0;
    for (int k = 0; k < n; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

/* Finds the end of a text argument (a line); returns NULL if none. */
static const uint8_t *line_end(const ost_reader *r, const uint8_t *p) {
    return memchr(p, '\n', (size_t)(r->end - p));
}

/* True when p[0..n) is ASCII. Text of up to 16 bytes in the input with
 * 16 bytes of it left from p is checked in two 8-byte loads, the bytes past n
 * masked off; else one pass with no branch per byte. */
static inline bool ascii(const ost_reader *r, const uint8_t *p, size_t n) {
    const uint64_t hi = 0x8080808080808080ULL;
    /* p may be text from elsewhere (a global's name): loads past n only
     * inside the input */
    if (n <= 16 && p >= r->base && p < r->end && has(r, p, 16)) {
        uint64_t a, b;
        memcpy(&a, p, 8);
        memcpy(&b, p + 8, 8);
        if (n < 8) a &= ((uint64_t)1 << (8 * n)) - 1, b = 0;
        else if (n < 16) b &= ((uint64_t)1 << (8 * (n - 8))) - 1;
        return ((a | b) & hi) == 0;
    }
    uint8_t acc = 0;
    for (size_t i = 0; i < n; i++) acc |= p[i];
    return acc < 0x80;
}

/* Fails (OST_ELIMIT) when a str, bytes or bytearray value of n bytes is
 * beyond what a value holds. */
static int too_long(ost_reader *r, const uint8_t *at, size_t n) {
    if (OST_LIKELY(n <= OST__STR_MAX)) return 0;
    return rfail(r, at, OST_ELIMIT, "a value of %zu bytes: a str, bytes or bytearray "
                 "holds at most %zu", n, OST__STR_MAX);
}

static ost_value new_str(ost_reader *r, const uint8_t *at, const uint8_t *p, size_t n) {
    size_t bad;
    /* most text is short ASCII: no call to check it */
    if (OST_UNLIKELY(!(n <= 64 && ascii(r, p, n)) && ost_utf8_check((const char *)p, n, &bad))) {
        rfail(r, at, OST_EUTF8, "invalid UTF-8 in %s at byte %zu of the text",
              op_name(*at), bad);
        return 0;
    }
    if (account(r, at, n + 32) || too_long(r, at, n)) return 0;
    ost_str_obj *o = (ost_str_obj *)ost__obj_alloc(sizeof *o + n + 1, OST_T_STR);
    if (!o) {
        NOMEM(at);
        return 0;
    }
    o->len = (uint32_t)n;
    memcpy(o->data, p, n);
    o->data[n] = 0;
    return (ost_value)o;
}

static ost_value new_bytes(ost_reader *r, const uint8_t *at, int type,
                           const uint8_t *p, size_t n) {
    if (account(r, at, n + 32) || too_long(r, at, n)) return 0;
    ost_value v = ost__str_new_uninit(type, n);
    if (!v) {
        NOMEM(at);
        return 0;
    }
    if (p) memcpy(((ost_str_obj *)v)->data, p, n);
    return v;
}

/* A bytes value pointing into the lent input (ost_load_lent). */
static ost_value lent_bytes(ost_reader *r, const uint8_t *at, const uint8_t *p, size_t n) {
    if (account(r, at, sizeof(ost_lent_obj)) || too_long(r, at, n)) return 0;
    ost_lent_obj *o = (ost_lent_obj *)ost__obj_alloc(sizeof *o, OST_T_BYTES);
    if (!o) {
        NOMEM(at);
        return 0;
    }
    o->h.flags |= OST__F_LENT;
    o->len = (uint32_t)n;
    o->ptr = (const char *)p;
    o->lender = r->lender;
    __atomic_fetch_add(&r->lender->refs, 1, __ATOMIC_RELAXED);
    return (ost_value)o;
}

void ost__lender_drop(ost__lender *l) {
    if (__atomic_sub_fetch(&l->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
    if (l->release) l->release(l->ud, l->data, l->len);
    free(l);
}

/* Latin-1 bytes (Python 2 str) to a str: ASCII stays, other bytes become
 * U+0080..U+00FF. */
static ost_value latin1_str(ost_reader *r, const uint8_t *at, const uint8_t *p, size_t n) {
    size_t un = ost__latin1_utf8_len(p, n);
    if (account(r, at, un + 32)) return 0;
    ost_value v = ost__str_new_uninit(OST_T_STR, un);
    if (!v) {
        NOMEM(at);
        return 0;
    }
    ost__latin1_to_utf8(((ost_str_obj *)v)->data, p, n);
    return v;
}

/* A Python 2 str (STRING, BINSTRING, SHORT_BINSTRING; p[0..n) after
 * escapes) as the reader's py2str mode says, as Python's Unpickler with
 * that encoding and errors='strict'. */
static ost_value py2_str(ost_reader *r, const uint8_t *at, const uint8_t *p, size_t n) {
    if (r->py2str == OST_PY2STR_BYTES) return new_bytes(r, at, OST_T_BYTES, p, n);
    if (r->py2str == OST_PY2STR_ASCII)
        for (size_t i = 0; i < n; i++)
            if (OST_UNLIKELY(p[i] >= 0x80)) {
                rfail(r, at, OST_EDECODE,
                      "%s: byte 0x%02x at index %zu of a Python 2 str is not ASCII "
                      "(Python's encoding='ASCII'; read it as latin1 or bytes)",
                      op_name(*at), p[i], i);
                return 0;
            }
    return latin1_str(r, at, p, n);
}

static size_t put_utf8(char *d, uint32_t u) {
    if (u < 0x80) {
        d[0] = (char)u;
        return 1;
    }
    if (u < 0x800) {
        d[0] = (char)(0xc0 | u >> 6);
        d[1] = (char)(0x80 | (u & 0x3f));
        return 2;
    }
    if (u < 0x10000) {
        d[0] = (char)(0xe0 | u >> 12);
        d[1] = (char)(0x80 | ((u >> 6) & 0x3f));
        d[2] = (char)(0x80 | (u & 0x3f));
        return 3;
    }
    d[0] = (char)(0xf0 | u >> 18);
    d[1] = (char)(0x80 | ((u >> 12) & 0x3f));
    d[2] = (char)(0x80 | ((u >> 6) & 0x3f));
    d[3] = (char)(0x80 | (u & 0x3f));
    return 4;
}

static int hexval(uint8_t c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* UNICODE's raw-unicode-escape: \uXXXX and \UXXXXXXXX, other bytes are
 * Latin-1. */
static ost_value raw_unicode(ost_reader *r, const uint8_t *at, const uint8_t *p, size_t n) {
    /* n is a line of the input, under OST__STR_MAX / 2 or refused: the
     * text is at most twice as long */
    if (account(r, at, n * 2 + 32) || too_long(r, at, n * 2)) return 0;
    ost_value v = ost__str_new_uninit(OST_T_STR, n * 2);
    if (!v) {
        NOMEM(at);
        return 0;
    }
    char *d = ((ost_str_obj *)v)->data;
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        if (p[i] == '\\' && i + 1 < n && (p[i + 1] == 'u' || p[i + 1] == 'U')) {
            int digits = p[i + 1] == 'u' ? 4 : 8;
            uint32_t u = 0;
            if (i + 2 + (size_t)digits > n) goto bad;
            for (int k = 0; k < digits; k++) {
                int h = hexval(p[i + 2 + k]);
                if (h < 0) goto bad;
                u = u << 4 | (uint32_t)h;
            }
            if (u > 0x10ffff) goto bad;
            j += put_utf8(d + j, u);
            i += 2 + (size_t)digits;
        } else
            j += put_utf8(d + j, p[i++]);
    }
    ((ost_str_obj *)v)->len = (uint32_t)j;
    d[j] = 0;
    return v;
bad:
    ost_decref(v);
    rfail(r, at, OST_EBADPICKLE, "bad \\u escape in UNICODE text");
    return 0;
}

/* STRING's quoted repr with backslash escapes, as Python 2 wrote it. */
static ost_value quoted_string(ost_reader *r, const uint8_t *at, const uint8_t *p, size_t n) {
    if (n < 2 || (p[0] != '\'' && p[0] != '"') || p[n - 1] != p[0]) {
        rfail(r, at, OST_EBADPICKLE, "STRING argument is not a quoted string");
        return 0;
    }
    p++;
    n -= 2;
    uint8_t *tmp = malloc(n + 1);
    if (!tmp) {
        NOMEM(at);
        return 0;
    }
    size_t j = 0;
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i++];
        if (c != '\\') {
            tmp[j++] = c;
            continue;
        }
        if (i == n) { /* CPython: "Trailing \\ in string" */
            free(tmp);
            rfail(r, at, OST_EBADPICKLE, "STRING ends in a trailing backslash");
            return 0;
        }
        c = p[i++];
        switch (c) {
        case 'n': tmp[j++] = '\n'; break;
        case 't': tmp[j++] = '\t'; break;
        case 'r': tmp[j++] = '\r'; break;
        case 'a': tmp[j++] = 7; break;
        case 'b': tmp[j++] = 8; break;
        case 'f': tmp[j++] = 12; break;
        case 'v': tmp[j++] = 11; break;
        case '\\': case '\'': case '"': tmp[j++] = c; break;
        case '\n': break;
        case 'x': {
            int h1 = i < n ? hexval(p[i]) : -1, h2 = i + 1 < n ? hexval(p[i + 1]) : -1;
            if (h1 < 0 || h2 < 0) {
                free(tmp);
                rfail(r, at, OST_EBADPICKLE, "bad \\x escape at index %zu of the STRING text",
                      i - 2);
                return 0;
            }
            tmp[j++] = (uint8_t)(h1 << 4 | h2);
            i += 2;
            break;
        }
        default:
            if (c >= '0' && c <= '7') {
                unsigned o = c - '0';
                for (int k = 0; k < 2 && i < n && p[i] >= '0' && p[i] <= '7'; k++)
                    o = o * 8 + (p[i++] - '0');
                tmp[j++] = (uint8_t)o;
            } else {
                tmp[j++] = '\\';
                tmp[j++] = c;
            }
        }
    }
    ost_value v = py2_str(r, at, tmp, j);
    free(tmp);
    return v;
}

/* ---- globals ------------------------------------------------------------ */

static bool gl_is(ost_value g, const char *m, const char *n) {
    if (ost__type(g) != OST_T_GLOBAL) return false;
    ost_global_obj *o = (ost_global_obj *)g;
    return strcmp(((ost_str_obj *)o->module)->data, m) == 0 &&
           strcmp(((ost_str_obj *)o->name)->data, n) == 0;
}

static bool known_builtin(const char *m, const char *n) {
    if (strcmp(m, "builtins") == 0)
        return !strcmp(n, "set") || !strcmp(n, "frozenset") ||
               !strcmp(n, "bytearray") || !strcmp(n, "bytes") ||
               !strcmp(n, "object") || !strcmp(n, "getattr");
    if (strcmp(m, "_codecs") == 0) return !strcmp(n, "encode");
    if (strcmp(m, "copyreg") == 0)
        return !strcmp(n, "_reconstructor") || !strcmp(n, "__newobj__") ||
               !strcmp(n, "__newobj_ex__");
    return false;
}

/* Python 2 names of Python 3 globals, as CPython's _compat_pickle maps them
 * when it loads a pickle of protocol 0, 1 or 2 (fix_imports): first
 * (module, name) pairs, then whole modules. Generated from Python 3.11. */
static const char *const compat_names[][4] = {
    {"UserDict", "IterableUserDict", "collections", "UserDict"},
    {"UserDict", "UserDict", "collections", "UserDict"},
    {"UserList", "UserList", "collections", "UserList"},
    {"UserString", "UserString", "collections", "UserString"},
    {"__builtin__", "basestring", "builtins", "str"},
    {"__builtin__", "intern", "sys", "intern"},
    {"__builtin__", "long", "builtins", "int"},
    {"__builtin__", "reduce", "functools", "reduce"},
    {"__builtin__", "unichr", "builtins", "chr"},
    {"__builtin__", "unicode", "builtins", "str"},
    {"__builtin__", "xrange", "builtins", "range"},
    {"_multiprocessing", "Connection", "multiprocessing.connection", "Connection"},
    {"_socket", "fromfd", "socket", "fromfd"},
    {"exceptions", "ArithmeticError", "builtins", "ArithmeticError"},
    {"exceptions", "AssertionError", "builtins", "AssertionError"},
    {"exceptions", "AttributeError", "builtins", "AttributeError"},
    {"exceptions", "BaseException", "builtins", "BaseException"},
    {"exceptions", "BufferError", "builtins", "BufferError"},
    {"exceptions", "BytesWarning", "builtins", "BytesWarning"},
    {"exceptions", "DeprecationWarning", "builtins", "DeprecationWarning"},
    {"exceptions", "EOFError", "builtins", "EOFError"},
    {"exceptions", "EnvironmentError", "builtins", "EnvironmentError"},
    {"exceptions", "Exception", "builtins", "Exception"},
    {"exceptions", "FloatingPointError", "builtins", "FloatingPointError"},
    {"exceptions", "FutureWarning", "builtins", "FutureWarning"},
    {"exceptions", "GeneratorExit", "builtins", "GeneratorExit"},
    {"exceptions", "IOError", "builtins", "IOError"},
    {"exceptions", "ImportError", "builtins", "ImportError"},
    {"exceptions", "ImportWarning", "builtins", "ImportWarning"},
    {"exceptions", "IndentationError", "builtins", "IndentationError"},
    {"exceptions", "IndexError", "builtins", "IndexError"},
    {"exceptions", "KeyError", "builtins", "KeyError"},
    {"exceptions", "KeyboardInterrupt", "builtins", "KeyboardInterrupt"},
    {"exceptions", "LookupError", "builtins", "LookupError"},
    {"exceptions", "MemoryError", "builtins", "MemoryError"},
    {"exceptions", "NameError", "builtins", "NameError"},
    {"exceptions", "NotImplementedError", "builtins", "NotImplementedError"},
    {"exceptions", "OSError", "builtins", "OSError"},
    {"exceptions", "OverflowError", "builtins", "OverflowError"},
    {"exceptions", "PendingDeprecationWarning", "builtins", "PendingDeprecationWarning"},
    {"exceptions", "ReferenceError", "builtins", "ReferenceError"},
    {"exceptions", "RuntimeError", "builtins", "RuntimeError"},
    {"exceptions", "RuntimeWarning", "builtins", "RuntimeWarning"},
    {"exceptions", "StandardError", "builtins", "Exception"},
    {"exceptions", "StopIteration", "builtins", "StopIteration"},
    {"exceptions", "SyntaxError", "builtins", "SyntaxError"},
    {"exceptions", "SyntaxWarning", "builtins", "SyntaxWarning"},
    {"exceptions", "SystemError", "builtins", "SystemError"},
    {"exceptions", "SystemExit", "builtins", "SystemExit"},
    {"exceptions", "TabError", "builtins", "TabError"},
    {"exceptions", "TypeError", "builtins", "TypeError"},
    {"exceptions", "UnboundLocalError", "builtins", "UnboundLocalError"},
    {"exceptions", "UnicodeDecodeError", "builtins", "UnicodeDecodeError"},
    {"exceptions", "UnicodeEncodeError", "builtins", "UnicodeEncodeError"},
    {"exceptions", "UnicodeError", "builtins", "UnicodeError"},
    {"exceptions", "UnicodeTranslateError", "builtins", "UnicodeTranslateError"},
    {"exceptions", "UnicodeWarning", "builtins", "UnicodeWarning"},
    {"exceptions", "UserWarning", "builtins", "UserWarning"},
    {"exceptions", "ValueError", "builtins", "ValueError"},
    {"exceptions", "Warning", "builtins", "Warning"},
    {"exceptions", "ZeroDivisionError", "builtins", "ZeroDivisionError"},
    {"itertools", "ifilter", "builtins", "filter"},
    {"itertools", "ifilterfalse", "itertools", "filterfalse"},
    {"itertools", "imap", "builtins", "map"},
    {"itertools", "izip", "builtins", "zip"},
    {"itertools", "izip_longest", "itertools", "zip_longest"},
    {"multiprocessing", "AuthenticationError", "multiprocessing.context", "AuthenticationError"},
    {"multiprocessing", "BufferTooShort", "multiprocessing.context", "BufferTooShort"},
    {"multiprocessing", "ProcessError", "multiprocessing.context", "ProcessError"},
    {"multiprocessing", "TimeoutError", "multiprocessing.context", "TimeoutError"},
    {"multiprocessing.forking", "Popen", "multiprocessing.popen_fork", "Popen"},
    {"multiprocessing.process", "Process", "multiprocessing.context", "Process"},
    {"socket", "_socketobject", "socket", "SocketType"},
    {"urllib", "ContentTooShortError", "urllib.error", "ContentTooShortError"},
    {"urllib", "getproxies", "urllib.request", "getproxies"},
    {"urllib", "pathname2url", "urllib.request", "pathname2url"},
    {"urllib", "quote", "urllib.parse", "quote"},
    {"urllib", "quote_plus", "urllib.parse", "quote_plus"},
    {"urllib", "unquote", "urllib.parse", "unquote"},
    {"urllib", "unquote_plus", "urllib.parse", "unquote_plus"},
    {"urllib", "url2pathname", "urllib.request", "url2pathname"},
    {"urllib", "urlcleanup", "urllib.request", "urlcleanup"},
    {"urllib", "urlencode", "urllib.parse", "urlencode"},
    {"urllib", "urlopen", "urllib.request", "urlopen"},
    {"urllib", "urlretrieve", "urllib.request", "urlretrieve"},
    {"urllib2", "HTTPError", "urllib.error", "HTTPError"},
    {"urllib2", "URLError", "urllib.error", "URLError"},
    {"whichdb", "whichdb", "dbm", "whichdb"},
};
static const char *const compat_modules[][2] = {
    {"BaseHTTPServer", "http.server"},
    {"CGIHTTPServer", "http.server"},
    {"ConfigParser", "configparser"},
    {"Cookie", "http.cookies"},
    {"Dialog", "tkinter.dialog"},
    {"DocXMLRPCServer", "xmlrpc.server"},
    {"FileDialog", "tkinter.filedialog"},
    {"HTMLParser", "html.parser"},
    {"Queue", "queue"},
    {"ScrolledText", "tkinter.scrolledtext"},
    {"SimpleDialog", "tkinter.simpledialog"},
    {"SimpleHTTPServer", "http.server"},
    {"SimpleXMLRPCServer", "xmlrpc.server"},
    {"SocketServer", "socketserver"},
    {"StringIO", "io"},
    {"Tix", "tkinter.tix"},
    {"Tkconstants", "tkinter.constants"},
    {"Tkdnd", "tkinter.dnd"},
    {"Tkinter", "tkinter"},
    {"UserDict", "collections"},
    {"UserList", "collections"},
    {"UserString", "collections"},
    {"__builtin__", "builtins"},
    {"_abcoll", "collections.abc"},
    {"_elementtree", "xml.etree.ElementTree"},
    {"_winreg", "winreg"},
    {"anydbm", "dbm"},
    {"cPickle", "pickle"},
    {"cStringIO", "io"},
    {"commands", "subprocess"},
    {"cookielib", "http.cookiejar"},
    {"copy_reg", "copyreg"},
    {"dbhash", "dbm.bsd"},
    {"dbm", "dbm.ndbm"},
    {"dumbdbm", "dbm.dumb"},
    {"dummy_thread", "_dummy_thread"},
    {"gdbm", "dbm.gnu"},
    {"htmlentitydefs", "html.entities"},
    {"httplib", "http.client"},
    {"markupbase", "_markupbase"},
    {"repr", "reprlib"},
    {"robotparser", "urllib.robotparser"},
    {"test.test_support", "test.support"},
    {"thread", "_thread"},
    {"tkColorChooser", "tkinter.colorchooser"},
    {"tkCommonDialog", "tkinter.commondialog"},
    {"tkFileDialog", "tkinter.filedialog"},
    {"tkFont", "tkinter.font"},
    {"tkMessageBox", "tkinter.messagebox"},
    {"tkSimpleDialog", "tkinter.simpledialog"},
    {"ttk", "tkinter.ttk"},
    {"urllib2", "urllib.request"},
    {"urlparse", "urllib.parse"},
    {"whichdb", "dbm"},
    {"xmlrpclib", "xmlrpc.client"},
};

static bool span_is(const uint8_t *p, size_t n, const char *s) {
    return strlen(s) == n && memcmp(p, s, n) == 0;
}

/* The Python 3 name a protocol 0-2 pickle's module.name stands for. */
static void py2_forward(const uint8_t **m, size_t *ml, const uint8_t **n, size_t *nl) {
    for (size_t i = 0; i < sizeof compat_names / sizeof *compat_names; i++)
        if (span_is(*m, *ml, compat_names[i][0]) && span_is(*n, *nl, compat_names[i][1])) {
            *m = (const uint8_t *)compat_names[i][2], *ml = strlen(compat_names[i][2]);
            *n = (const uint8_t *)compat_names[i][3], *nl = strlen(compat_names[i][3]);
            return;
        }
    for (size_t i = 0; i < sizeof compat_modules / sizeof *compat_modules; i++)
        if (span_is(*m, *ml, compat_modules[i][0])) {
            *m = (const uint8_t *)compat_modules[i][1], *ml = strlen(compat_modules[i][1]);
            return;
        }
}

bool ost__py2_reads_as(const char *m2, const char *n2, const char *m, const char *n) {
    const uint8_t *pm = (const uint8_t *)m2, *pn = (const uint8_t *)n2;
    size_t ml = strlen(m2), nl = strlen(n2);
    py2_forward(&pm, &ml, &pn, &nl);
    return span_is(pm, ml, m) && span_is(pn, nl, n);
}

bool ost__py2_reads_as_builtin(const char *m2, const char *n2) {
    const uint8_t *pm = (const uint8_t *)m2, *pn = (const uint8_t *)n2;
    size_t ml = strlen(m2), nl = strlen(n2);
    py2_forward(&pm, &ml, &pn, &nl);
    char m[32], n[32];
    if (ml >= sizeof m || nl >= sizeof n) return false;
    memcpy(m, pm, ml);
    m[ml] = 0;
    memcpy(n, pn, nl);
    n[nl] = 0;
    return known_builtin(m, n);
}

static ost_value make_global_as_is(ost_reader *r, const uint8_t *at, const uint8_t *m,
                                   size_t ml, const uint8_t *n, size_t nl);

/* Makes the value for global module.name (text not yet validated). */
static ost_value make_global(ost_reader *r, const uint8_t *at, const uint8_t *m,
                             size_t ml, const uint8_t *n, size_t nl) {
    /* Python 3 writes Python 2 names for protocols 0-2 (fix_imports),
     * __builtin__ and copy_reg among them */
    if (r->proto < 3) py2_forward(&m, &ml, &n, &nl);
    return make_global_as_is(r, at, m, ml, n, nl);
}

/* The same for a name already in its Python 3 spelling. */
static ost_value make_global_as_is(ost_reader *r, const uint8_t *at, const uint8_t *m,
                                   size_t ml, const uint8_t *n, size_t nl) {
    if (memchr(m, 0, ml) || memchr(n, 0, nl)) {
        rfail(r, at, OST_EBADPICKLE, "global name with a NUL byte");
        return 0;
    }
    ost_value ms = new_str(r, at, m, ml);
    if (!ms) return 0;
    ost_value ns = new_str(r, at, n, nl);
    if (!ns) {
        ost_decref(ms);
        return 0;
    }
    const char *mc = ((ost_str_obj *)ms)->data, *nc = ((ost_str_obj *)ns)->data;
    if (r->find_global && !known_builtin(mc, nc)) {
        ost_value cls = 0;
        int rc = r->find_global(r->fg_ud, mc, nc, &cls);
        if (rc || cls) {
            if (rc) {
                ost_decref(cls);
                rfail(r, at, rc, "global %s.%s refused: %s", mc, nc, ost_strerror(rc));
                cls = 0;
            }
            ost_decref(ms);
            ost_decref(ns);
            return cls;
        }
    }
    ost_global_obj *g = (ost_global_obj *)ost__obj_alloc(sizeof *g, OST_T_GLOBAL);
    if (!g) {
        ost_decref(ms);
        ost_decref(ns);
        NOMEM(at);
        return 0;
    }
    g->module = ms;
    g->name = ns;
    g->k = NULL;
    return (ost_value)g;
}

/* ---- building ----------------------------------------------------------- */

static ost_value inst_items(ost_reader *r, const uint8_t *at, int op, ost_value inst,
                            int want);

static ost_value new_instance(ost_reader *r, const uint8_t *at, ost_value cls) {
    ost_value v = ost_instance_new(ost_incref(cls));
    if (!v) NOMEM(at);
    return v;
}

/* What REDUCE / NEWOBJ build: known builtins become real values, a class
 * with no arguments an instance, anything else a reduce value. */
static ost_value build_call(ost_reader *r, const uint8_t *at, int kind,
                            ost_value fn, ost_value args, ost_value kwargs) {
    int ta = ost__type(args);
    size_t na = ta == OST_T_TUPLE ? ost_len(args) : 0;
    if (kind != OST_REDUCE_CALL && ta != OST_T_TUPLE) {
        rfail(r, at, OST_EBADPICKLE, "NEWOBJ arguments are a %s, not a tuple",
              ost_type_name(ost__type(args)));
        return 0;
    }
    if (ost__type(fn) == OST_T_GLOBAL && ta == OST_T_TUPLE) {
        ost_value a0 = na > 0 ? ost_item(args, 0) : 0;
        if (kind == OST_REDUCE_CALL) {
            if ((gl_is(fn, "builtins", "set") || gl_is(fn, "builtins", "frozenset")) &&
                na <= 1 && (na == 0 || ost__type(a0) == OST_T_LIST ||
                            ost__type(a0) == OST_T_TUPLE)) {
                ost_value s = gl_is(fn, "builtins", "set") ? ost_set_new() : ost_frozenset_new();
                if (!s) {
                    NOMEM(at);
                    return 0;
                }
                for (size_t i = 0; i < ost_len(a0); i++) {
                    int rc = ost_set_add(s, ost_incref(ost_item(a0, i)));
                    if (rc) {
                        ost_decref(s);
                        rfail(r, at, rc == OST_ETYPE ? OST_EBADPICKLE : rc,
                              "set item is not hashable");
                        return 0;
                    }
                }
                if (account(r, at, 32 + na * 24)) {
                    ost_decref(s);
                    return 0;
                }
                return s;
            }
            if (gl_is(fn, "builtins", "bytearray") || gl_is(fn, "builtins", "bytes")) {
                bool ba = gl_is(fn, "builtins", "bytearray");
                int t = ba ? OST_T_BYTEARRAY : OST_T_BYTES;
                if (na == 0) return new_bytes(r, at, t, NULL, 0);
                if (na == 1 && ost__type(a0) == OST_T_BYTES) {
                    size_t n;
                    const char *d = ost_data(a0, &n);
                    return new_bytes(r, at, t, (const uint8_t *)d, n);
                }
                /* bytearray(str, 'latin-1') and the like: fall through */
            }
            bool encode = gl_is(fn, "_codecs", "encode");
            bool ba2 = gl_is(fn, "builtins", "bytearray") && na == 2;
            if ((encode || ba2) && na == 2 && ost__type(a0) == OST_T_STR &&
                ost__type(ost_item(args, 1)) == OST_T_STR) {
                const char *enc = ost_data(ost_item(args, 1), NULL);
                if (!strcmp(enc, "latin1") || !strcmp(enc, "latin-1") ||
                    !strcmp(enc, "iso-8859-1")) {
                    size_t n;
                    const uint8_t *s = (const uint8_t *)ost_data(a0, &n);
                    ost_value b = new_bytes(r, at, ba2 ? OST_T_BYTEARRAY : OST_T_BYTES, NULL, n);
                    if (!b) return 0;
                    ost_str_obj *bo = (ost_str_obj *)b;
                    ptrdiff_t j = ost__utf8_to_latin1((uint8_t *)bo->data, s, n);
                    if (j < 0) {
                        ost_decref(b);
                        rfail(r, at, OST_EBADPICKLE,
                              "text has characters beyond Latin-1 for bytes");
                        return 0;
                    }
                    bo->len = (size_t)j;
                    bo->data[j] = 0;
                    return b;
                }
            }
            if (gl_is(fn, "copyreg", "_reconstructor") && na == 3 &&
                ost__type(a0) == OST_T_GLOBAL &&
                gl_is(ost_item(args, 1), "builtins", "object") &&
                ost_item(args, 2) == OST_NONE)
                return new_instance(r, at, a0);
            ost__klass *k0 = ost__type(a0) == OST_T_GLOBAL ? ost__klass_of(a0) : NULL;
            if (gl_is(fn, "copyreg", "_reconstructor") && na == 3 &&
                ost__type(a0) == OST_T_GLOBAL && (!k0 || (!k0->nfields && !k0->def.persistent)))
                /* below protocol 2 an instance of a dict or list subclass
                 * is _reconstructor(cls, dict, dict(self)) */
                for (int k = 0; k < 2; k++) {
                    int t = k ? OST_T_LIST : OST_T_DICT;
                    ost_value st = ost_item(args, 2);
                    if (!gl_is(ost_item(args, 1), "builtins", k ? "list" : "dict") ||
                        (ost__type(st) != t && st != OST_NONE))
                        continue;
                    ost_value inst = new_instance(r, at, a0), items = 0;
                    if (inst && st != OST_NONE && ost_len(st)) {
                        items = inst_items(r, at, OP_REDUCE, inst, t);
                        size_t pos = 0;
                        ost_value key, val;
                        int rc = !items ? r->err
                                        : account(r, at, ost_len(st) * sizeof(ost_entry));
                        for (size_t i = 0; !rc && t == OST_T_LIST && i < ost_len(st); i++)
                            rc = ost_list_append(items, ost_incref(ost_item(st, i)));
                        while (!rc && t == OST_T_DICT && ost_dict_next(st, &pos, &key, &val))
                            rc = ost_dict_set(items, ost_incref(key), ost_incref(val));
                        if (rc) {
                            if (!r->err) NOMEM(at);
                            trash(r, inst);
                            inst = 0;
                        }
                    }
                    return inst;
                }
            if (gl_is(fn, "copyreg", "__newobj__") && na >= 1 &&
                ost__type(a0) == OST_T_GLOBAL) {
                if (na == 1) return new_instance(r, at, a0);
                ost_value rest = ost_tuple_new(na - 1);
                if (!rest) {
                    NOMEM(at);
                    return 0;
                }
                for (size_t i = 1; i < na; i++)
                    ost_tuple_set(rest, i - 1, ost_incref(ost_item(args, i)));
                ost_value v = ost_reduce_new(OST_REDUCE_NEWOBJ, ost_incref(a0), rest);
                if (!v) NOMEM(at);
                return v;
            }
            if (gl_is(fn, "builtins", "getattr") && na == 2 &&
                ost__type(a0) == OST_T_GLOBAL && ost__type(ost_item(args, 1)) == OST_T_STR) {
                /* Below protocol 4 Python spells the nested class
                 * Outer.Inner as getattr(Outer, 'Inner'): the global
                 * module.Outer.Inner, resolved as one */
                ost_global_obj *pg = (ost_global_obj *)a0;
                ost_str_obj *pm = (ost_str_obj *)pg->module, *pn = (ost_str_obj *)pg->name;
                ost_str_obj *ln = (ost_str_obj *)ost_item(args, 1);
                char *dotted = malloc(pn->len + ln->len + 2);
                if (!dotted) {
                    NOMEM(at);
                    return 0;
                }
                memcpy(dotted, pn->data, pn->len);
                dotted[pn->len] = '.';
                memcpy(dotted + pn->len + 1, ln->data, ln->len);
                /* the parent's module is in its Python 3 spelling already:
                 * mapping it again turned dbm (anydbm) into dbm.ndbm */
                ost_value g = make_global_as_is(r, at, (const uint8_t *)pm->data, pm->len,
                                                (const uint8_t *)dotted, pn->len + 1 + ln->len);
                free(dotted);
                return g;
            }
            if (gl_is(fn, "copyreg", "__newobj_ex__") && na == 3 &&
                ost__type(a0) == OST_T_GLOBAL &&
                ost__type(ost_item(args, 1)) == OST_T_TUPLE &&
                ost__type(ost_item(args, 2)) == OST_T_DICT)
                return build_call(r, at, OST_REDUCE_NEWOBJ_EX, a0, ost_item(args, 1),
                                  ost_item(args, 2));
        } else if (na == 0 && (!kwargs || ost_len(kwargs) == 0)) {
            return new_instance(r, at, fn);
        } else if (ost__klass_of(fn) && ost__klass_of(fn)->def.setnewargs &&
                   (!kwargs || ost_len(kwargs) == 0)) {
            ost__klass *k = ost__klass_of(fn);
            ost_value inst = new_instance(r, at, fn);
            if (!inst) return 0;
            int rc = k->def.setnewargs(k->def.ud, inst, args);
            if (rc) {
                ost_decref(inst);
                rfail(r, at, rc, "setnewargs of %s.%s failed: %s", k->def.module,
                      k->def.name, ost_strerror(rc));
                return 0;
            }
            return inst;
        }
    }
    ost_value v = ost_reduce_new(kind, ost_incref(fn), ost_incref(args));
    if (v && kwargs && ost_reduce_set_kwargs(v, ost_incref(kwargs))) {
        ost_decref(v);
        v = 0;
    }
    if (!v) NOMEM(at);
    return v;
}

/* The items of an instance of a list subclass (want OST_T_LIST) or dict
 * subclass (OST_T_DICT) that APPENDS or SETITEMS fill, made on first use;
 * 0 after a failure. */
static ost_value inst_items(ost_reader *r, const uint8_t *at, int op, ost_value inst,
                            int want) {
    ost_inst_obj *in = (ost_inst_obj *)inst;
    if (ost__slotted(inst) || (OST__O(inst)->flags & OST__F_PERSISTENT) ||
        ost_class_is_persistent(in->cls)) {
        ost_global_obj *g = (ost_global_obj *)in->cls;
        rfail(r, at, OST_EUNSUPPORTED,
              "%s on an instance of %s.%s: a class with fields or a persistent class "
              "keeps no items", op_name(op), ((ost_str_obj *)g->module)->data,
              ((ost_str_obj *)g->name)->data);
        return 0;
    }
    if (!in->items) {
        if (account(r, at, 64)) return 0;
        in->items = want == OST_T_LIST ? ost_list_new(0) : ost_dict_new();
        if (!in->items) NOMEM(at);
    } else if (ost__type(in->items) != want) {
        rfail(r, at, OST_EBADPICKLE, "%s on an instance that holds %s items", op_name(op),
              want == OST_T_LIST ? "dict" : "list");
        return 0;
    }
    return in->items;
}

static int add_items_(ost_reader *r, const uint8_t *at, int op, size_t base);

/* Adds the values of slots [base, sp) to the list, set, reduce value or
 * instance in slot base - 1, which nests one deeper than the deepest. */
static int add_items(ost_reader *r, const uint8_t *at, int op, size_t base) {
    uint32_t m = max_dep(r, base, r->sp);
    int rc = add_items_(r, at, op, base);
    return rc ? rc : nest(r, at, base - 1, (uint64_t)m + 1);
}

static int add_items_(ost_reader *r, const uint8_t *at, int op, size_t base) {
    ost_value target = r->stack[base - 1];
    int t = ost__type(target);
    if (t == OST_T_INSTANCE && op != OP_ADDITEMS) { /* a list subclass's */
        /* no items: none kept, as the writer writes none (Python too) */
        if (r->sp == base) return 0;
        if (!(target = inst_items(r, at, op, target, OST_T_LIST))) return r->err;
        t = OST_T_LIST;
    }
    size_t n = r->sp - base;
    int rc = 0;
    if (t == OST_T_LIST && op != OP_ADDITEMS) {
        ost_list_obj *l = (ost_list_obj *)target;
        if (l->len + n > r->lim.max_container)
            return rfail(r, at, OST_ELIMIT, "list longer than %zu (limit max_container)",
                         r->lim.max_container);
        if (account(r, at, n * sizeof(ost_value))) return r->err;
        if (ost__list_reserve(l, n)) return NOMEM(at);
        if (n) /* items may be NULL for an empty list */
            memcpy(l->items + l->len, r->stack + base, n * sizeof(ost_value));
        l->len += n;
        r->sp = base;
        return 0;
    }
    /* a frozenset is filled by FROZENSET only: ADDITEMS on one could change
     * a dict key or set item after it was hashed (Python refuses it too) */
    if ((t == OST_T_SET && op == OP_ADDITEMS) || (t == OST_T_FROZENSET && op == OP_FROZENSET)) {
        if (ost_len(target) + n > r->lim.max_container)
            return rfail(r, at, OST_ELIMIT, "set larger than %zu (limit max_container)",
                         r->lim.max_container);
        if (account(r, at, n * sizeof(ost_entry))) return r->err;
        for (size_t i = base; i < r->sp && !rc; i++) {
            /* an unhashable item stays on the stack (ost_set_add would drop
             * it with a plain decref, leaking the cycles it is part of) */
            uint64_t h;
            ost_value drop[2];
            if ((rc = ost__hash(r->stack[i], &h))) break;
            rc = ost__dict_insert_keep(target, r->stack[i], 0, h, drop);
            r->stack[i] = 0;
            trash(r, drop[0]); /* a repeated item: its cycles are collected */
        }
        /* what is left goes where release_all collects cycles */
        for (size_t i = base; i < r->sp; i++) trash(r, r->stack[i]);
        r->sp = base;
        if (rc == OST_ETYPE)
            return rfail(r, at, OST_EBADPICKLE, "%s: unhashable item", op_name(op));
        return rc ? NOMEM(at) : 0;
    }
    if (t == OST_T_REDUCE && op != OP_ADDITEMS) {
        for (size_t i = base; i < r->sp && !rc; i++) {
            rc = ost_reduce_append(target, r->stack[i]);
            r->stack[i] = 0;
        }
        for (size_t i = base; i < r->sp; i++) ost_decref(r->stack[i]);
        r->sp = base;
        return rc ? NOMEM(at) : 0;
    }
    return rfail(r, at, OST_EBADPICKLE, "%s on a %s (only %s)", op_name(op),
                 ost_type_name(t),
                 op == OP_ADDITEMS ? "sets" : "lists, list subclasses and reduce values");
}

static int set_items_(ost_reader *r, const uint8_t *at, int op, size_t base);

/* Sets the key-value pairs of slots [base, sp) in the dict, reduce value or
 * instance in slot base - 1, which nests one deeper than the deepest. */
static int set_items(ost_reader *r, const uint8_t *at, int op, size_t base) {
    uint32_t m = max_dep(r, base, r->sp);
    int rc = set_items_(r, at, op, base);
    return rc ? rc : nest(r, at, base - 1, (uint64_t)m + 1);
}

static int set_items_(ost_reader *r, const uint8_t *at, int op, size_t base) {
    ost_value target = r->stack[base - 1];
    int t = ost__type(target);
    size_t n = r->sp - base;
    int rc = 0;
    if (n % 2)
        return rfail(r, at, OST_EBADPICKLE, "%s with an odd number of values (%zu)",
                     op_name(op), n);
    if (target == r->slot_target && target) { /* ost_load_state's direct path */
        if (account(r, at, n / 2 * sizeof(ost_entry))) return r->err;
        for (size_t i = base; i < r->sp; i += 2) {
            if (!rc) rc = ost__slots_put(target, r->stack[i], r->stack[i + 1]);
            if (rc) { /* cycles are collected */
                trash(r, r->stack[i]);
                trash(r, r->stack[i + 1]);
            } else { /* the slots hold them now */
                ost_decref(r->stack[i]);
                ost_decref(r->stack[i + 1]);
            }
            r->stack[i] = r->stack[i + 1] = 0;
        }
        r->sp = base;
        return rc ? NOMEM(at) : 0;
    }
    if (t == OST_T_INSTANCE) { /* a dict subclass's */
        if (n == 0) return 0; /* no items: none kept, as for APPENDS */
        if (!(target = inst_items(r, at, op, target, OST_T_DICT))) return r->err;
        t = OST_T_DICT;
    }
    if (t == OST_T_DICT) {
        if (ost_len(target) + n / 2 > r->lim.max_container)
            return rfail(r, at, OST_ELIMIT, "dict larger than %zu (limit max_container)",
                         r->lim.max_container);
        if (account(r, at, n / 2 * sizeof(ost_entry))) return r->err;
        size_t i;
        for (i = base; i < r->sp; i += 2) {
            uint64_t h;
            ost_value k = r->stack[i], v = r->stack[i + 1];
            if (ost__hash(k, &h)) {
                rc = OST_ETYPE;
                break;
            }
            r->stack[i] = r->stack[i + 1] = 0;
            ost_value drop[2];
            rc = ost__dict_insert_keep(target, k, v, h, drop);
            /* a repeated key and the value it replaces: cycles collected */
            trash(r, drop[0]);
            trash(r, drop[1]);
            if (rc) break;
        }
        for (; i < r->sp; i++) trash(r, r->stack[i]); /* cycles are collected */
        r->sp = base;
        if (rc == OST_ETYPE)
            return rfail(r, at, OST_EBADPICKLE, "%s: unhashable key", op_name(op));
        return rc ? NOMEM(at) : 0;
    }
    if (t == OST_T_REDUCE) {
        size_t i;
        for (i = base; i < r->sp && !rc; i += 2) {
            rc = ost_reduce_setitem(target, r->stack[i], r->stack[i + 1]);
            r->stack[i] = r->stack[i + 1] = 0;
        }
        for (; i < r->sp; i++) ost_decref(r->stack[i]);
        r->sp = base;
        return rc ? NOMEM(at) : 0;
    }
    return rfail(r, at, OST_EBADPICKLE,
                 "%s on a %s (only dicts, dict subclasses and reduce values)", op_name(op),
                 ost_type_name(t));
}

/* Fills the slots of an instance of a class with fields from a state dict
 * (or Python's (dict, slots-dict) pair). */
static int fill_slots(ost_reader *r, const uint8_t *at, ost_value obj, ost_value state) {
    ost_slots_obj *so = (ost_slots_obj *)obj;
    ost_value parts[2] = {state, 0};
    if (ost__type(state) == OST_T_TUPLE && ost_len(state) == 2) {
        parts[0] = ost_item(state, 0);
        parts[1] = ost_item(state, 1);
    }
    for (int k = 0; k < 2; k++) {
        ost_value d = parts[k];
        if (!d || d == OST_NONE) continue;
        if (ost__type(d) != OST_T_DICT)
            return rfail(r, at, OST_EBADPICKLE, "state of a %s.%s is a %s, not a dict",
                         ost__klass_of(so->cls)->def.module, ost__klass_of(so->cls)->def.name,
                         ost_type_name(ost__type(d)));
        size_t pos = 0;
        ost_value key, val;
        /* fields the class does not declare are kept (ost_instance_extra) */
        while (ost_dict_next(d, &pos, &key, &val))
            if (ost__slots_put(obj, key, val)) return NOMEM(at);
    }
    return 0;
}

static int build(ost_reader *r, const uint8_t *at) {
    ost_value state = r->stack[--r->sp];
    ost_value obj = r->stack[r->sp - 1];
    int t = ost__type(obj);
    if (t == OST_T_INSTANCE) {
        ost_inst_obj *in = (ost_inst_obj *)obj;
        ost__klass *k = ost__klass_of(in->cls);
        if (k && k->def.setstate) {
            int rc = k->def.setstate(k->def.ud, obj, state);
            trash(r, state);
            return rc ? rfail(r, at, rc, "setstate of %s.%s failed: %s", k->def.module,
                              k->def.name, ost_strerror(rc))
                      : 0;
        }
        if (ost__slotted(obj)) {
            int rc = fill_slots(r, at, obj, state);
            trash(r, state);
            return rc;
        }
        if (ost__type(in->state) == OST_T_DICT && ost__type(state) == OST_T_DICT) {
            /* a second BUILD updates the attributes, as __dict__.update */
            size_t pos = 0;
            ost_value k, v;
            int rc = 0;
            while (!rc && ost_dict_next(state, &pos, &k, &v))
                rc = ost_dict_set(in->state, ost_incref(k), ost_incref(v));
            trash(r, state);
            return rc ? NOMEM(at) : 0;
        }
        ost_value old = in->state; /* direct, as for slots */
        in->state = state;
        ost_decref(old);
        return 0;
    }
    if (t == OST_T_REDUCE) {
        ost_reduce_set_state(obj, state);
        return 0;
    }
    trash(r, state);
    return rfail(r, at, OST_EBADPICKLE, "BUILD on a %s (only instances and reduce values)",
                 ost_type_name(t));
}

static int persistent(ost_reader *r, const uint8_t *at, ost_value pid) {
    if (!r->pers_load) {
        trash(r, pid);
        return rfail(r, at, OST_ENOPERSLOAD,
                     "persistent id found but no persistent_load hook is set");
    }
    ost_value obj = 0;
    int rc = r->pers_load(r->pl_ud, pid, &obj);
    trash(r, pid);
    if (rc || !obj) {
        ost_decref(obj);
        return rfail(r, at, rc ? rc : OST_EHOOK, "persistent_load failed: %s",
                     ost_strerror(rc ? rc : OST_EHOOK));
    }
    return push(r, at, obj);
}

/* Parses a decimal memo index from a text line. */
static int line_index(ost_reader *r, const uint8_t *at, const uint8_t *p,
                      const uint8_t *e, size_t *out) {
    size_t v = 0;
    if (p == e) return rfail(r, at, OST_EBADPICKLE, "empty memo index");
    for (; p < e; p++) {
        if (*p < '0' || *p > '9' || v > (SIZE_MAX - 9) / 10)
            return rfail(r, at, OST_EBADPICKLE, "bad memo index text");
        v = v * 10 + (size_t)(*p - '0');
    }
    *out = v;
    return 0;
}

/* ---- the machine ------------------------------------------------------------
 *
 * One load_ function per opcode family, as _pickle.c has. Each takes the
 * opcode's offset (at, for messages), the opcode and the read position
 * (*pp, just after the opcode, advanced over the arguments), and returns
 * 0 or nonzero after a failure (the error is in r, or ost_load says
 * "malformed pickle"). */

#define FAIL return -1
#define NEED(n)                                                 \
    do {                                                        \
        if (OST_UNLIKELY(!has(r, p, (n)))) {                    \
            truncated(r, at, op, (size_t)(n), p);               \
            FAIL;                                               \
        }                                                       \
    } while (0)
#define CHECK(x)                      \
    do {                              \
        if (OST_UNLIKELY((x) != 0)) { \
            FAIL;                     \
        }                             \
    } while (0)
#define PUSH(v) CHECK(push(r, at, (v)))
#define LINE(e)                                                               \
    do {                                                                      \
        (e) = line_end(r, p);                                                 \
        if (!(e)) {                                                           \
            rfail(r, at, OST_ETRUNCATED, "%s: no end of line", op_name(op));  \
            FAIL;                                                             \
        }                                                                     \
    } while (0)

/* The tuple of the values stack[base..sp), which it takes, leaving sp at
 * base; 0 when out of memory (the stack unchanged). */
static ost_value tuple_from_stack(ost_reader *r, size_t base) {
    size_t n = r->sp - base;
    ost_value t = ost__tuple_new_uninit(n);
    if (!t) return 0;
    ((ost_tuple_obj *)t)->len = n;
    memcpy(((ost_tuple_obj *)t)->items, r->stack + base, n * sizeof(ost_value));
    r->sp = base;
    return t;
}

/* A new container c goes under the values above base, which then fill it
 * (fill is add_items or set_items). */
static int under_and_fill(ost_reader *r, const uint8_t *at, int op, size_t base,
                          ost_value c, int (*fill)(ost_reader *, const uint8_t *, int, size_t)) {
    CHECK(push(r, at, c));
    memmove(r->stack + base + 1, r->stack + base, (r->sp - 1 - base) * sizeof(ost_value));
    memmove(r->dep + base + 1, r->dep + base, (r->sp - 1 - base) * sizeof *r->dep);
    r->stack[base] = c;
    r->dep[base] = 1;
    return fill(r, at, op, base + 1);
}

/* PROTO, FRAME */
static int load_proto(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp;
    NEED(1);
    if (*p > OST_PICKLE_HIGHEST_PROTOCOL)
        return rfail(r, at, OST_EPROTOCOL, "unsupported protocol %u", *p);
    r->proto = *p++;
    *pp = p;
    return 0;
}

static int load_frame(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp;
    NEED(8);
    uint64_t n = rd_le(p, 8);
    p += 8;
    if (n > (uint64_t)(r->end - p))
        return rfail(r, at, OST_ETRUNCATED, "FRAME of %llu bytes, %zu left",
                     (unsigned long long)n, (size_t)(r->end - p));
    *pp = p;
    return 0;
}

/* MARK, POP, POP_MARK, DUP */
static int load_mark(ost_reader *r, const uint8_t *at) {
    if (OST_UNLIKELY(r->nmarks == r->mcap)) {
        if (r->nmarks >= r->lim.max_depth)
            return rfail(r, at, OST_ELIMIT, "more than %zu nested MARKs (limit max_depth)",
                         r->lim.max_depth);
        if (ost__grow((void **)&r->marks, &r->mcap, r->nmarks + 1, sizeof *r->marks, 64))
            return NOMEM(at);
    }
    if (r->nmarks >= r->lim.max_depth)
        return rfail(r, at, OST_ELIMIT, "more than %zu nested MARKs (limit max_depth)",
                     r->lim.max_depth);
    r->marks[r->nmarks++] = r->sp;
    return 0;
}

static int load_pop(ost_reader *r, const uint8_t *at, int op) {
    if (op == OP_POP) {
        if (above(r)) trash(r, r->stack[--r->sp]);
        else if (r->nmarks) r->nmarks--;
        else return rfail(r, at, OST_EBADPICKLE, "POP with an empty stack");
        return 0;
    }
    size_t base;
    CHECK(pop_mark(r, at, op, &base));
    while (r->sp > base) trash(r, r->stack[--r->sp]);
    return 0;
}

static int load_dup(ost_reader *r, const uint8_t *at, int op) {
    CHECK(need(r, at, 1, op));
    if (OST_UNLIKELY(r->stack[r->sp - 1] == r->slot_target)) r->slot_odd = true;
    CHECK(push(r, at, ost_incref(r->stack[r->sp - 1])));
    r->dep[r->sp - 1] = r->dep[r->sp - 2];
    return 0;
}

/* Pushes a new empty container (level 1). */
static int push_empty(ost_reader *r, const uint8_t *at, ost_value c) {
    CHECK(push(r, at, c));
    r->dep[r->sp - 1] = 1;
    return 0;
}

/* Pushes v, made of the values that were in slots [base, sp) before they
 * went into it, one level deeper than the deepest of them (d). */
static int push_made(ost_reader *r, const uint8_t *at, ost_value v, uint32_t d) {
    CHECK(push(r, at, v));
    return nest(r, at, r->sp - 1, (uint64_t)d + 1);
}

/* BININT1, BININT2, BININT */
static inline int load_binint(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp;
    int w = op == OP_BININT1 ? 1 : op == OP_BININT2 ? 2 : 4;
    NEED(w);
    int64_t v = op == OP_BININT ? (int64_t)(int32_t)(uint32_t)rd_le(p, 4)
                                : (int64_t)rd_le(p, w);
    *pp = p + w;
    return push(r, at, ost__small(v));
}

/* LONG1, LONG4 */
static int load_long_bin(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp;
    int w = op == OP_LONG1 ? 1 : 4;
    NEED(w);
    uint64_t n = rd_le(p, w);
    if (op == OP_LONG4 && (int32_t)(uint32_t)n < 0)
        return rfail(r, at, OST_EBADPICKLE, "LONG4 with a negative length");
    p += w;
    NEED(n);
    CHECK(account(r, at, n + 16));
    PUSH(ost_int_from_bytes(p, (size_t)n));
    *pp = p + n;
    return 0;
}

static int load_binfloat(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp;
    NEED(8);
    uint64_t bits = ost__rd_be64(p);
    double d;
    memcpy(&d, &bits, 8);
    *pp = p + 8;
    return push(r, at, ost_float(d));
}

/* INT, LONG: decimal text */
static int load_int_text(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp, *e;
    LINE(e);
    size_t n = (size_t)(e - p);
    if (op == OP_INT && n == 2 && p[0] == '0' && (p[1] == '0' || p[1] == '1')) {
        PUSH(p[1] == '1' ? OST_TRUE : OST_FALSE);
        *pp = e + 1;
        return 0;
    }
    if (op == OP_LONG && n && p[n - 1] == 'L') n--;
    CHECK(account(r, at, n / 2 + 16));
    /* check the text first: ost_int_from_decimal returns 0 for bad text
     * and for ENOMEM alike */
    size_t d0 = n && (p[0] == '-' || p[0] == '+');
    bool digits = n > d0;
    for (size_t k = d0; k < n && digits; k++) digits = p[k] >= '0' && p[k] <= '9';
    if (!digits) return rfail(r, at, OST_EBADPICKLE, "%s: bad integer text", op_name(op));
    ost_value v = ost_int_from_decimal((const char *)p, n);
    if (!v) return NOMEM(at);
    PUSH(v);
    *pp = e + 1;
    return 0;
}

/* FLOAT: text */
static int load_float_text(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp, *e;
    LINE(e);
    char buf[64];
    size_t n = (size_t)(e - p);
    if (n == 0 || n >= sizeof buf) return rfail(r, at, OST_EBADPICKLE, "FLOAT: bad text");
    memcpy(buf, p, n);
    buf[n] = 0;
    char *endp;
    double d = strtod(buf, &endp);
    if (endp != buf + n) return rfail(r, at, OST_EBADPICKLE, "FLOAT: bad text '%s'", buf);
    PUSH(ost_float(d));
    *pp = e + 1;
    return 0;
}

/* The counted strings: [SHORT_]BINUNICODE[8], [SHORT_]BINBYTES[8],
 * BYTEARRAY8, [SHORT_]BINSTRING */
static int load_counted(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp;
    int w = (op == OP_SHORT_BINUNICODE || op == OP_SHORT_BINBYTES ||
             op == OP_SHORT_BINSTRING) ? 1
            : (op == OP_BINUNICODE8 || op == OP_BINBYTES8 || op == OP_BYTEARRAY8) ? 8
                                                                                   : 4;
    NEED(w);
    uint64_t n = rd_le(p, w);
    if (op == OP_BINSTRING && (int32_t)(uint32_t)n < 0)
        return rfail(r, at, OST_EBADPICKLE, "BINSTRING with a negative length");
    p += w;
    NEED(n);
    ost_value v;
    if (op == OP_SHORT_BINUNICODE || op == OP_BINUNICODE || op == OP_BINUNICODE8)
        v = new_str(r, at, p, (size_t)n);
    else if (op == OP_SHORT_BINSTRING || op == OP_BINSTRING)
        v = py2_str(r, at, p, (size_t)n);
    else if (r->lender && n >= OST_LEND_MIN && op != OP_BYTEARRAY8)
        v = lent_bytes(r, at, p, (size_t)n);
    else
        v = new_bytes(r, at, op == OP_BYTEARRAY8 ? OST_T_BYTEARRAY : OST_T_BYTES, p,
                      (size_t)n);
    if (!v) FAIL;
    *pp = p + n;
    return push(r, at, v);
}

/* SHORT_BINUNICODE, the commonest opcode of text-heavy pickles: text of
 * under 16 bytes with 16 bytes of input after it is read as two 8-byte
 * words, checked for ASCII with one mask test and stored as whole words
 * into a pooled str, as many as its size class has room for (16 bytes
 * hold 4 bytes of text and NUL after the 12 of header and length, 24 hold
 * 12, 32 hold 20). Anything else goes through
 * load_counted, which checks, fails and builds the same way. */
static inline int load_short_str(ost_reader *r, const uint8_t *at, const uint8_t **pp) {
    const uint8_t *p = *pp;
    if (OST_LIKELY(has(r, p, 17)) && p[0] < 16) {
        size_t n = p[0];
        uint64_t a, b;
        memcpy(&a, p + 1, 8);
        memcpy(&b, p + 9, 8);
        if (n < 8) a &= ((uint64_t)1 << (8 * n)) - 1, b = 0;
        else b &= ((uint64_t)1 << (8 * (n - 8))) - 1;
        if (((a | b) & 0x8080808080808080ULL) == 0) {
            if (account(r, at, n + 32)) return -1;
            ost_str_obj *o = (ost_str_obj *)ost__obj_alloc(sizeof *o + n + 1, OST_T_STR);
            if (!o) return NOMEM(at);
            o->len = (uint32_t)n;
            if (OST_LIKELY(ost__pooled(&o->h))) { /* see above: the NUL is in a or b */
                if (n < 4) {
                    memcpy(o->data, &a, 4);
                } else {
                    memcpy(o->data, &a, 8);
                    if (n >= 12) memcpy(o->data + 8, &b, 8);
                    else if (n >= 8) memcpy(o->data + 8, &b, 4);
                }
            } else {
                memcpy(o->data, p + 1, n);
                o->data[n] = 0;
            }
            *pp = p + 1 + n;
            return push(r, at, (ost_value)o);
        }
    }
    return load_counted(r, at, OP_SHORT_BINUNICODE, pp);
}

/* STRING, UNICODE: text lines */
static int load_line_string(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp, *e;
    LINE(e);
    ost_value v = op == OP_STRING ? quoted_string(r, at, p, (size_t)(e - p))
                                  : raw_unicode(r, at, p, (size_t)(e - p));
    if (!v) FAIL;
    *pp = e + 1;
    return push(r, at, v);
}

/* EMPTY_TUPLE, TUPLE1, TUPLE2, TUPLE3, TUPLE */
static int load_tuple(ost_reader *r, const uint8_t *at, int op) {
    if (op == OP_EMPTY_TUPLE) return push_empty(r, at, ost_tuple_new(0)); /* len set to 0 */
    size_t base, n;
    if (op == OP_TUPLE) {
        CHECK(pop_mark(r, at, op, &base));
        n = r->sp - base;
    } else {
        n = (size_t)(op - OP_TUPLE1 + 1);
        CHECK(need(r, at, n, op));
        base = r->sp - n;
    }
    CHECK(account(r, at, 16 + n * sizeof(ost_value)));
    uint32_t d = max_dep(r, base, r->sp);
    ost_value t = tuple_from_stack(r, base);
    if (!t) return NOMEM(at);
    return push_made(r, at, t, d);
}

/* EMPTY_LIST, LIST, APPEND, APPENDS, ADDITEMS */
static int load_list(ost_reader *r, const uint8_t *at, int op) {
    if (op == OP_EMPTY_LIST) {
        CHECK(account(r, at, 48));
        return push_empty(r, at, ost_list_new(0));
    }
    size_t base;
    CHECK(pop_mark(r, at, op, &base));
    size_t n = r->sp - base;
    CHECK(account(r, at, 48 + n * sizeof(ost_value)));
    ost_value l = ost_list_new(n);
    if (!l) return NOMEM(at);
    if (n) /* ost_list_new(0) has no items array */
        memcpy(((ost_list_obj *)l)->items, r->stack + base, n * sizeof(ost_value));
    ((ost_list_obj *)l)->len = n;
    uint32_t d = max_dep(r, base, r->sp);
    r->sp = base;
    return push_made(r, at, l, d);
}

static int load_append(ost_reader *r, const uint8_t *at, int op) {
    if (op == OP_APPEND) {
        CHECK(need(r, at, 2, op));
        return add_items(r, at, op, r->sp - 1);
    }
    size_t base;
    CHECK(pop_mark(r, at, op, &base));
    if (base == 0 || (r->nmarks && r->marks[r->nmarks - 1] >= base))
        return rfail(r, at, OST_EBADPICKLE, "%s with nothing to add to", op_name(op));
    return add_items(r, at, op, base);
}

/* EMPTY_DICT, DICT, SETITEM, SETITEMS */
static int load_dict(ost_reader *r, const uint8_t *at, int op) {
    size_t base;
    switch (op) {
    case OP_EMPTY_DICT:
        CHECK(account(r, at, 64));
        if (OST_UNLIKELY(r->slot_target != 0) && !r->slot_used && r->sp == 0 && !r->nmarks) {
            r->slot_used = true;
            return push_empty(r, at, ost_incref(r->slot_target));
        }
        return push_empty(r, at, ost_dict_new());
    case OP_DICT: {
        CHECK(pop_mark(r, at, op, &base));
        ost_value d = ost_dict_new();
        if (!d) return NOMEM(at);
        return under_and_fill(r, at, op, base, d, set_items);
    }
    case OP_SETITEM:
        CHECK(need(r, at, 3, op));
        return set_items(r, at, op, r->sp - 2);
    default: /* SETITEMS */
        CHECK(pop_mark(r, at, op, &base));
        if (base == 0 || (r->nmarks && r->marks[r->nmarks - 1] >= base))
            return rfail(r, at, OST_EBADPICKLE, "SETITEMS with no dict to fill");
        return set_items(r, at, op, base);
    }
}

/* EMPTY_SET, FROZENSET */
static int load_set(ost_reader *r, const uint8_t *at, int op) {
    if (op == OP_EMPTY_SET) {
        CHECK(account(r, at, 64));
        return push_empty(r, at, ost_set_new());
    }
    size_t base;
    CHECK(pop_mark(r, at, op, &base));
    ost_value s = ost_frozenset_new();
    if (!s) return NOMEM(at);
    return under_and_fill(r, at, OP_FROZENSET, base, s, add_items);
}

/* The memo index argument of GET, BINGET, LONG_BINGET, PUT, BINPUT,
 * LONG_BINPUT (MEMOIZE has none). */
static inline int memo_index(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp,
                             size_t *idx) {
    const uint8_t *p = *pp;
    if (op == OP_GET || op == OP_PUT) {
        const uint8_t *e;
        LINE(e);
        CHECK(line_index(r, at, p, e, idx));
        *pp = e + 1;
        return 0;
    }
    int w = op == OP_BINGET || op == OP_BINPUT ? 1 : 4;
    NEED(w);
    *idx = (size_t)rd_le(p, w);
    *pp = p + w;
    return 0;
}

/* BINGET, LONG_BINGET, GET */
static inline int load_get(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    size_t idx = 0;
    CHECK(memo_index(r, at, op, pp, &idx));
    ost_value v = memo_get(r, idx);
    if (!v) return rfail(r, at, OST_EMEMO, "memo index %zu is not set", idx);
    if (OST_UNLIKELY(v == r->slot_target)) r->slot_odd = true;
    ost__incref(v); /* inline: ost_incref is a call */
    return push(r, at, v);
}

/* BINPUT, LONG_BINPUT, PUT, MEMOIZE */
static inline int load_put(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    size_t idx = 0;
    if (op == OP_MEMOIZE) idx = r->memo_count;
    else CHECK(memo_index(r, at, op, pp, &idx));
    if (!above(r)) return rfail(r, at, OST_EBADPICKLE, "%s with an empty stack", op_name(op));
    return memo_put(r, at, idx, r->stack[r->sp - 1]);
}

/* GLOBAL, INST: module and name on two lines */
static int load_global(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    const uint8_t *p = *pp, *e1, *e2;
    LINE(e1);
    const uint8_t *n = e1 + 1;
    e2 = memchr(n, '\n', (size_t)(r->end - n));
    if (!e2) return rfail(r, at, OST_ETRUNCATED, "%s: no end of line", op_name(op));
    ost_value g = make_global(r, at, p, (size_t)(e1 - p), n, (size_t)(e2 - n));
    if (!g) FAIL;
    *pp = e2 + 1;
    if (op == OP_GLOBAL) return push(r, at, g);
    size_t base;
    if (pop_mark(r, at, op, &base)) {
        ost_decref(g);
        FAIL;
    }
    uint32_t d = max_dep(r, base, r->sp);
    ost_value args = tuple_from_stack(r, base);
    if (!args) {
        ost_decref(g);
        return NOMEM(at);
    }
    /* a find_global result that is not a global cannot be an instance's
     * class: keep the call as data, as OBJ does */
    ost_value v = ost_len(args) || ost__type(g) != OST_T_GLOBAL
                      ? build_call(r, at, OST_REDUCE_CALL, g, args, 0)
                      : new_instance(r, at, g);
    ost_decref(g);
    ost_decref(args);
    if (!v) FAIL;
    return push_made(r, at, v, d);
}

static int load_stack_global(ost_reader *r, const uint8_t *at, int op) {
    CHECK(need(r, at, 2, op));
    ost_value m = r->stack[r->sp - 2], n = r->stack[r->sp - 1];
    if (ost__type(m) != OST_T_STR || ost__type(n) != OST_T_STR)
        return rfail(r, at, OST_EBADPICKLE, "STACK_GLOBAL needs two str, got %s and %s",
                     ost_type_name(ost__type(m)), ost_type_name(ost__type(n)));
    ost_value g = make_global(r, at, (const uint8_t *)((ost_str_obj *)m)->data,
                              ((ost_str_obj *)m)->len,
                              (const uint8_t *)((ost_str_obj *)n)->data,
                              ((ost_str_obj *)n)->len);
    if (!g) FAIL;
    r->sp -= 2;
    ost_decref(m);
    ost_decref(n);
    return push(r, at, g);
}

static int load_obj(ost_reader *r, const uint8_t *at, int op) {
    size_t base;
    CHECK(pop_mark(r, at, op, &base));
    if (r->sp == base) return rfail(r, at, OST_EBADPICKLE, "OBJ without a class");
    ost_value cls = r->stack[base];
    uint32_t d = max_dep(r, base, r->sp);
    ost_value args = tuple_from_stack(r, base + 1);
    if (!args) return NOMEM(at);
    r->sp = base;
    ost_value v = ost_len(args) ? build_call(r, at, OST_REDUCE_CALL, cls, args, 0)
                  : ost__type(cls) == OST_T_GLOBAL
                      ? new_instance(r, at, cls)
                      : build_call(r, at, OST_REDUCE_CALL, cls, args, 0);
    ost_decref(cls);
    ost_decref(args);
    if (!v) FAIL;
    return push_made(r, at, v, d);
}

/* REDUCE, NEWOBJ, NEWOBJ_EX */
static int load_reduce(ost_reader *r, const uint8_t *at, int op) {
    size_t n = op == OP_NEWOBJ_EX ? 3 : 2;
    CHECK(need(r, at, n, op));
    ost_value fn = r->stack[r->sp - n], args = r->stack[r->sp - n + 1];
    ost_value kw = op == OP_NEWOBJ_EX ? r->stack[r->sp - 1] : 0;
    if (kw && ost__type(kw) != OST_T_DICT)
        return rfail(r, at, OST_EBADPICKLE, "NEWOBJ_EX keyword arguments are not a dict");
    if (op == OP_REDUCE && ost__type(args) != OST_T_TUPLE)
        return rfail(r, at, OST_EBADPICKLE, "REDUCE arguments are a %s, not a tuple",
                     ost_type_name(ost__type(args)));
    if (op != OP_REDUCE && ost__type(fn) != OST_T_GLOBAL)
        return rfail(r, at, OST_EBADPICKLE, "%s class is a %s, not a global", op_name(op),
                     ost_type_name(ost__type(fn)));
    int kind = op == OP_REDUCE   ? OST_REDUCE_CALL
               : op == OP_NEWOBJ ? OST_REDUCE_NEWOBJ
                                 : OST_REDUCE_NEWOBJ_EX;
    ost_value v = build_call(r, at, kind, fn, args, kw);
    if (!v) FAIL;
    /* the object stands where its arguments' tuple stood */
    uint32_t d = max_dep(r, r->sp - n, r->sp);
    r->sp -= n;
    ost_decref(fn);
    ost_decref(args);
    ost_decref(kw);
    return push_made(r, at, v, d ? d - 1 : 0);
}

static int load_build(ost_reader *r, const uint8_t *at, int op) {
    CHECK(need(r, at, 2, op));
    /* an instance's attributes are one level below it, as its state
     * dict's values are below the dict */
    uint32_t d = r->dep[r->sp - 1];
    CHECK(build(r, at));
    return nest(r, at, r->sp - 1, d);
}

/* TUPLE2 right before BINPERSID, of two immediates: the pair pid of a
 * store's reference (oid, class id), handed to persistent_load in a tuple
 * the reader keeps for the next one instead of a new tuple that would go
 * to the trash: a walk meets one per reference. A hook that keeps the pid
 * (its count grew) keeps that tuple; the next pair gets a new one. */
static int load_pair_pid(ost_reader *r, const uint8_t *at, const uint8_t **pp) {
    ost_value t = r->pid_pair;
    if (!t) {
        CHECK(account(r, at, 16 + 2 * sizeof(ost_value)));
        if (!(t = r->pid_pair = ost_tuple_new(2))) return NOMEM(at);
    }
    ost_tuple_set(t, 0, r->stack[r->sp - 2]);
    ost_tuple_set(t, 1, r->stack[r->sp - 1]);
    r->sp -= 2;
    *pp += 1; /* the BINPERSID */
    ost_value obj = 0;
    int rc = r->pers_load(r->pl_ud, t, &obj);
    if (ost_refcount(t) > 1) {
        ost_decref(t);
        r->pid_pair = 0;
    }
    if (rc || !obj) {
        ost_decref(obj);
        return rfail(r, at + 1, rc ? rc : OST_EHOOK, "persistent_load failed: %s",
                     ost_strerror(rc ? rc : OST_EHOOK));
    }
    return push(r, at + 1, obj);
}

/* PERSID, BINPERSID */
static int load_persid(ost_reader *r, const uint8_t *at, int op, const uint8_t **pp) {
    if (op == OP_BINPERSID) {
        CHECK(need(r, at, 1, op));
        return persistent(r, at, r->stack[--r->sp]);
    }
    const uint8_t *p = *pp, *e;
    LINE(e);
    ost_value pid = new_str(r, at, p, (size_t)(e - p));
    if (!pid) FAIL;
    *pp = e + 1;
    return persistent(r, at, pid);
}

/* EXT1, EXT2, EXT4, NEXT_BUFFER, and unknown opcodes */
static int load_unsupported(ost_reader *r, const uint8_t *at, int op) {
    if (op == OP_EXT1 || op == OP_EXT2 || op == OP_EXT4)
        return rfail(r, at, OST_EUNSUPPORTED, "%s: the extension registry is not supported",
                     op_name(op));
    if (op == OP_NEXT_BUFFER)
        return rfail(r, at, OST_EUNSUPPORTED,
                     "NEXT_BUFFER: out-of-band buffers are not supported");
    return rfail(r, at, OST_EBADOPCODE, "unknown opcode 0x%02x", op);
}

/* STOP: the value on top is the result; anything under it is dropped. */
static int load_stop(ost_reader *r, const uint8_t *at, ost_value *out) {
    if (r->sp == 0 || above(r) == 0)
        return rfail(r, at, OST_EBADPICKLE, "STOP with an empty stack");
    ost_value v = r->stack[--r->sp];
    while (r->sp) trash(r, r->stack[--r->sp]); /* extra values */
    release_all(r, false);
    *out = v;
    return 0;
}

int ost_load(ost_reader *r, const void *data, size_t len, ost_value *out,
             size_t *consumed) {
    if (out) *out = 0;
    if (consumed) *consumed = 0;
    if (!r || !out || (!data && len)) return OST_EINVAL;
    const uint8_t *p = data, *at = p;
    r->base = p;
    r->end = p + len;
    r->err = 0;
    r->erroff = 0;
    r->msg[0] = 0;
    r->bytes = 0;
    r->proto = 0;
    r->sp = 0;
    r->nmarks = 0;
    if (OST_UNLIKELY(!r->stack)) { /* never NULL: "(t" copies 0 items from it */
        r->stack = malloc(256 * sizeof *r->stack);
        r->dep = r->stack ? malloc(256 * sizeof *r->dep) : NULL;
        if (!r->dep) {
            free(r->stack);
            r->stack = NULL;
            return NOMEM(p);
        }
        r->stcap = r->dcap = 256;
    }
    for (;;) {
        at = p;
        if (OST_UNLIKELY(p >= r->end)) {
            rfail(r, at, OST_ETRUNCATED, "pickle ends without STOP");
            break;
        }
        int op = *p++, rc;
        switch (op) {
        case OP_STOP:
            if (load_stop(r, at, out)) goto fail;
            if (consumed) *consumed = (size_t)(p - r->base);
            return 0;
        case OP_PROTO: rc = load_proto(r, at, op, &p); break;
        case OP_FRAME: rc = load_frame(r, at, op, &p); break;
        case OP_MARK: rc = load_mark(r, at); break;
        case OP_POP:
        case OP_POP_MARK: rc = load_pop(r, at, op); break;
        case OP_DUP: rc = load_dup(r, at, op); break;
        case OP_NONE: rc = push(r, at, OST_NONE); break;
        case OP_NEWTRUE: rc = push(r, at, OST_TRUE); break;
        case OP_NEWFALSE: rc = push(r, at, OST_FALSE); break;
        case OP_BININT1:
        case OP_BININT2:
        case OP_BININT: rc = load_binint(r, at, op, &p); break;
        case OP_LONG1:
        case OP_LONG4: rc = load_long_bin(r, at, op, &p); break;
        case OP_BINFLOAT: rc = load_binfloat(r, at, op, &p); break;
        case OP_INT:
        case OP_LONG: rc = load_int_text(r, at, op, &p); break;
        case OP_FLOAT: rc = load_float_text(r, at, op, &p); break;
        case OP_SHORT_BINUNICODE: rc = load_short_str(r, at, &p); break;
        case OP_BINUNICODE:
        case OP_BINUNICODE8:
        case OP_SHORT_BINBYTES:
        case OP_BINBYTES:
        case OP_BINBYTES8:
        case OP_BYTEARRAY8:
        case OP_SHORT_BINSTRING:
        case OP_BINSTRING: rc = load_counted(r, at, op, &p); break;
        case OP_STRING:
        case OP_UNICODE: rc = load_line_string(r, at, op, &p); break;
        case OP_TUPLE2:
            if (p < r->end && *p == OP_BINPERSID && r->pers_load && above(r) >= 2 &&
                ost_is_immediate(r->stack[r->sp - 1]) && ost_is_immediate(r->stack[r->sp - 2])) {
                rc = load_pair_pid(r, at, &p);
                break;
            }
            /* fall through */
        case OP_EMPTY_TUPLE:
        case OP_TUPLE1:
        case OP_TUPLE3:
        case OP_TUPLE: rc = load_tuple(r, at, op); break;
        case OP_EMPTY_LIST:
        case OP_LIST: rc = load_list(r, at, op); break;
        case OP_APPEND:
        case OP_APPENDS:
        case OP_ADDITEMS: rc = load_append(r, at, op); break;
        case OP_EMPTY_DICT:
        case OP_DICT:
        case OP_SETITEM:
        case OP_SETITEMS: rc = load_dict(r, at, op); break;
        case OP_EMPTY_SET:
        case OP_FROZENSET: rc = load_set(r, at, op); break;
        case OP_BINGET:
        case OP_LONG_BINGET:
        case OP_GET: rc = load_get(r, at, op, &p); break;
        case OP_BINPUT:
        case OP_LONG_BINPUT:
        case OP_PUT:
        case OP_MEMOIZE: rc = load_put(r, at, op, &p); break;
        case OP_GLOBAL:
        case OP_INST: rc = load_global(r, at, op, &p); break;
        case OP_STACK_GLOBAL: rc = load_stack_global(r, at, op); break;
        case OP_OBJ: rc = load_obj(r, at, op); break;
        case OP_REDUCE:
        case OP_NEWOBJ:
        case OP_NEWOBJ_EX: rc = load_reduce(r, at, op); break;
        case OP_BUILD: rc = load_build(r, at, op); break;
        case OP_PERSID:
        case OP_BINPERSID: rc = load_persid(r, at, op, &p); break;
        case OP_READONLY_BUFFER: rc = need(r, at, 1, op); break;
        default: rc = load_unsupported(r, at, op); break;
        }
        if (OST_UNLIKELY(rc)) break;
    }
fail:
    if (!r->err) rfail(r, at, OST_EBADPICKLE, "malformed pickle");
    release_all(r, true);
    return r->err;
}

/* ---- opcode names (shared with the disassembler) --------------------------- */

static const char *op_name(int op) {
    switch (op) {
#define N(x) \
    case OP_##x: return #x;
        N(MARK) N(STOP) N(POP) N(POP_MARK) N(DUP) N(FLOAT) N(INT) N(BININT)
        N(BININT1) N(LONG) N(BININT2) N(NONE) N(PERSID) N(BINPERSID) N(REDUCE)
        N(STRING) N(BINSTRING) N(SHORT_BINSTRING) N(UNICODE) N(BINUNICODE)
        N(APPEND) N(BUILD) N(GLOBAL) N(DICT) N(EMPTY_DICT) N(APPENDS) N(GET)
        N(BINGET) N(INST) N(LONG_BINGET) N(LIST) N(EMPTY_LIST) N(OBJ) N(PUT)
        N(BINPUT) N(LONG_BINPUT) N(SETITEM) N(TUPLE) N(EMPTY_TUPLE) N(SETITEMS)
        N(BINFLOAT) N(PROTO) N(NEWOBJ) N(EXT1) N(EXT2) N(EXT4) N(TUPLE1)
        N(TUPLE2) N(TUPLE3) N(NEWTRUE) N(NEWFALSE) N(LONG1) N(LONG4)
        N(BINBYTES) N(SHORT_BINBYTES) N(SHORT_BINUNICODE) N(BINUNICODE8)
        N(BINBYTES8) N(EMPTY_SET) N(ADDITEMS) N(FROZENSET) N(NEWOBJ_EX)
        N(STACK_GLOBAL) N(MEMOIZE) N(FRAME) N(BYTEARRAY8) N(NEXT_BUFFER)
        N(READONLY_BUFFER)
#undef N
    default: return "?";
    }
}

const char *ost__op_name(int op) { return op_name(op); }

int ost_load_lent(ost_reader *r, const void *data, size_t len, ost_release_fn release,
                  void *ud, ost_value *out, size_t *consumed) {
    ost__lender *l = r && out && (data || !len) ? malloc(sizeof *l) : NULL;
    if (!l) {
        if (out) *out = 0;
        if (consumed) *consumed = 0;
        if (release) release(ud, data, len);
        return r && out && (data || !len) ? OST_ENOMEM : OST_EINVAL;
    }
    *l = (ost__lender){1, release, ud, data, len};
    r->lender = l;
    int rc = ost_load(r, data, len, out, consumed);
    r->lender = NULL;
    ost__lender_drop(l); /* the values that point into data hold it now */
    return rc;
}

/* Whether ost_load_state may fill inst's slots straight from the pickle:
 * a slotted instance with nothing set (a store's ghost being loaded) whose
 * class takes its state as a dict (no setstate). */
static bool direct_ok(ost_value inst) {
    if (!ost__slotted(inst)) return false;
    ost_slots_obj *so = (ost_slots_obj *)inst;
    ost__klass *k = ost__klass_of(so->cls);
    if (!k || k->def.setstate || (so->h.flags & OST__F_EXTRA)) return false;
    for (size_t i = 0, n = k->nfields; i < n; i++)
        if (so->slots[i]) return false;
    return true;
}


int ost__apply_state(ost_reader *r, ost_value inst, ost_value state) {
    static const uint8_t none[1];
    if (!r || ost__type(inst) != OST_T_INSTANCE || !state) {
        ost_decref(state);
        return OST_EINVAL;
    }
    r->base = none;
    r->end = none + 1;
    r->sp = 0;
    if (push(r, r->base, ost_incref(inst)) || push(r, r->base, state)) {
        release_all(r, true);
        return r->err;
    }
    int rc = build(r, r->base);
    while (r->sp) ost_decref(r->stack[--r->sp]);
    release_all(r, rc != 0);
    return rc;
}

int ost_load_state(ost_reader *r, ost_value inst, const void *data, size_t len) {
    if (!r || ost__type(inst) != OST_T_INSTANCE) return OST_EINVAL;
    ost_value v;
    int rc;
    if (direct_ok(inst)) {
        /* the state dict's items go straight to the slots (the record of
         * an object is `{` MARK items SETITEMS STOP): no dict is built */
        r->slot_target = inst;
        r->slot_used = r->slot_odd = false;
        rc = ost_load(r, data, len, &v, NULL);
        bool used = r->slot_used, odd = r->slot_odd;
        r->slot_target = 0;
        r->slot_used = r->slot_odd = false;
        if (!rc && used && !odd && v == inst) {
            ost_decref(v);
            ost__slots_defaults(inst); /* fields the state lacks */
            return 0;
        }
        if (used) {
            /* something else (an error, or a pickle that used the dict in
             * another way): undo, and read it the usual way, which gives
             * the usual result or error */
            if (!rc) ost_release(v);
            ost__slots_clear(inst);
            rc = ost_load(r, data, len, &v, NULL);
        } /* else: not a dict state; v and rc are what the usual way gives */
    } else
        rc = ost_load(r, data, len, &v, NULL);
    if (rc) return rc;
    /* apply as BUILD does, with the instance and state on the stack */
    r->base = data;
    r->end = (const uint8_t *)data + len;
    r->sp = 0;
    if (push(r, r->base, ost_incref(inst)) || push(r, r->base, v)) {
        release_all(r, true);
        return r->err;
    }
    /* the state applies after the pickle's last opcode, its STOP: an error
     * in applying it names that offset */
    rc = build(r, len ? r->end - 1 : r->base);
    while (r->sp) ost_decref(r->stack[--r->sp]);
    release_all(r, rc != 0);
    if (!rc && ost__slotted(inst)) ost__slots_defaults(inst); /* fields the state lacks */
    return rc;
}
