/* ostore CLI: maps seen through a snapshot (include/ostore/raw.h),
 * read-only: map records, cursors over map entries, and keys, decoded
 * for printing and parsed from the text of --from and --to.
 *
 * Key text (the syntax 'ostore cat --help' and docs/cli.md describe): an
 * int is a decimal number (-5, 42); a str or bytes element is a Python
 * string literal in single or double quotes ('a b', "it's", b'\x00'),
 * with the escapes \\ \' \" \n \r \t \0 \xhh and, in str, \uXXXX and
 * \UXXXXXXXX, or else bare text taken as it is. A tuple key is its
 * elements separated by commas, optionally in parentheses; fewer elements
 * than the kind has make a prefix ("5," or "(5,)" is (5,), which sorts
 * before every (5, ...)). So what 'ostore cat' prints as a key reads back
 * as the same key. In a tuple, spaces around an element are ignored and a
 * bare element ends at the next comma: quote an element to keep either. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* A key kind, read from its canonical text ("int", "(int, str)"): up to
 * 8 elements 'i', 's', 'b'. */
typedef struct {
    int n;
    bool tuple;
    char el[8];
    char canon[64];
} key_kind;

static int kind_parse(const char *kind, key_kind *k) {
    memset(k, 0, sizeof *k);
    if (!kind || ost_map_kind_canon(kind, k->canon, sizeof k->canon)) return -1;
    const char *p = k->canon;
    k->tuple = *p == '(';
    while (*p) {
        if (*p == '(' || *p == ')' || *p == ',' || *p == ' ') {
            p++;
            continue;
        }
        if (k->n == 8) return -1;
        k->el[k->n++] = *p == 'i' ? 'i' : *p == 's' ? 's' : 'b';
        while (*p >= 'a' && *p <= 'z') p++;
    }
    return k->n ? 0 : -1;
}

/* ---- map records ----------------------------------------------------------- */

int raw_map_parse(ost_reader *rd, const uint8_t *p, size_t n, raw_map *m, char *err, size_t cap) {
    bool is_set = m->is_set;
    memset(m, 0, sizeof *m);
    m->is_set = is_set;
    ost_value v = 0;
    int rc = ost_load(rd, p, n, &v, NULL);
    if (rc) {
        snprintf(err, cap, "the map's record does not decode: %s", ost_reader_errmsg(rd));
        return rc == OST_ENOMEM ? rc : OST_ECORRUPT;
    }
    ost_value kv = ost_typeof(v) == OST_T_DICT ? ost_dict_get_c(v, "kind") : 0;
    ost_value cv = ost_typeof(v) == OST_T_DICT ? ost_dict_get_c(v, "count") : 0;
    const char *ks = ost_typeof(kv) == OST_T_STR ? ost_data(kv, NULL) : NULL;
    int64_t count = -1;
    key_kind k;
    if (!ks || kind_parse(ks, &k)) {
        snprintf(err, cap, "the map's record has no valid key kind");
        rc = OST_ECORRUPT;
    } else if (ost_typeof(cv) != OST_T_INT || ost_int_value(cv, &count) || count < 0) {
        snprintf(err, cap, "the map's record has no valid count");
        rc = OST_ECORRUPT;
    } else {
        snprintf(m->kind, sizeof m->kind, "%s", k.canon);
        m->count = (uint64_t)count;
    }
    ost_release(v);
    return rc;
}

int raw_map_read(raw_txn *t, const raw_rec *r, raw_map *m, char *err, size_t cap) {
    memset(m, 0, sizeof *m);
    m->is_set = raw_map_class(t, r) == 2;
    ost_reader *rd = raw_reader(t);
    if (!rd) {
        snprintf(err, cap, "out of memory");
        return OST_ENOMEM;
    }
    if (r->bad_header) {
        snprintf(err, cap, "the map's record is damaged (%s)", r->damage);
        return OST_ECORRUPT;
    }
    return raw_map_parse(rd, r->pickle, r->len, m, err, cap);
}

/* ---- entries ------------------------------------------------------------------ */

struct raw_ents {
    raw_txn *t;
    ost_entry_cursor *ec;
    uint64_t map;
    bool done;
    bool skip_damaged; /* step past entries whose checksum fails */
    uint64_t skipped;  /* ... how many */
};

int raw_ents_open(raw_txn *t, uint64_t map, const uint8_t *from, size_t fromlen, raw_ents **out) {
    *out = NULL;
    raw_ents *c = calloc(1, sizeof *c);
    if (!c) return fail("out of memory");
    c->t = t;
    c->map = map;
    if (from && fromlen > OST_MAP_KEY_MAX) fromlen = OST_MAP_KEY_MAX;
    if (ost_snap_entries(raw_snap(t), map, from, fromlen, &c->ec)) {
        free(c);
        return fail("%s", ost_snap_errmsg(raw_snap(t)));
    }
    *out = c;
    return EXIT_OK;
}

void raw_ents_skip_damaged(raw_ents *c) { c->skip_damaged = true; }
uint64_t raw_ents_skipped(const raw_ents *c) { return c->skipped; }

int raw_ents_next(raw_ents *c, raw_ent *e) {
    if (c->done) return 0;
    ost_raw_entry en;
    int rc;
    while ((rc = ost_raw_entry_next(c->ec, &en)) == 0 && en.damage && c->skip_damaged)
        c->skipped++; /* check reports it */
    if (rc == OST_ENOTFOUND) {
        c->done = true;
        return 0;
    }
    if (rc) {
        c->done = true;
        fail("%s", ost_snap_errmsg(raw_snap(c->t)));
        return -1;
    }
    e->key = en.key;
    e->klen = en.klen;
    if (en.damage) {
        char text[160];
        size_t i;
        for (i = 0; i < e->klen && i < 24; i++) snprintf(text + 2 * i, 3, "%02x", e->key[i]);
        snprintf(text + 2 * i, 4, "%s", e->klen > 24 ? "..." : "");
        /* the key as the map's kind reads it, when its record says */
        raw_rec r;
        raw_map m;
        char err[64];
        if (raw_get(c->t, c->map, &r) == 0 && raw_map_read(c->t, &r, &m, err, sizeof err) == 0) {
            ost_value kv = raw_key_decode(m.kind, e->key, e->klen);
            ost_buf b = {0};
            if (kv && ost_repr(kv, &b) == 0) snprintf(text, sizeof text, "%.120s", b.data);
            ost_buf_free(&b);
            ost_decref(kv);
        }
        c->done = true;
        fail("%s: map %llu: the entry of key %s is damaged (its checksum does not match its "
             "bytes; 'ostore check' lists the damage)",
             ost_store_path(raw_store(c->t)), (unsigned long long)c->map, text);
        return -1;
    }
    e->serial = en.serial;
    e->val = en.value;
    e->vlen = en.vlen;
    return 1;
}

void raw_ents_close(raw_ents *c) {
    if (!c) return;
    ost_entry_cursor_close(c->ec);
    free(c);
}

int raw_each_map(raw_txn *t, int (*fn)(void *ud, uint64_t map), void *ud) {
    uint64_t map = 0;
    int rc;
    while ((rc = ost_snap_next_map(raw_snap(t), map, &map)) == 0) {
        int r = fn(ud, map);
        if (r) return r;
    }
    if (rc != OST_ENOTFOUND)
        return fail("%s: reading the map entries: %s", shown(ost_store_path(raw_store(t))),
                    ost_snap_errmsg(raw_snap(t)));
    return EXIT_OK;
}

int raw_value_repr(raw_txn *t, const uint8_t *p, size_t n, const ost_repr_options *o,
                   ost_buf *out, char *err, size_t cap) {
    out->len = 0;
    if (out->data) out->data[0] = 0;
    ost_reader *rd = raw_reader(t);
    if (!rd) {
        snprintf(err, cap, "out of memory");
        return OST_ENOMEM;
    }
    ost_value v = 0;
    int rc = n ? ost_load(rd, p, n, &v, NULL) : OST_ETRUNCATED;
    if (rc) {
        snprintf(err, cap, "%s", n ? ost_reader_errmsg(rd) : "an empty value");
        return rc;
    }
    rc = ost_repr_ex(v, out, o);
    ost_release(v);
    if (rc) snprintf(err, cap, "out of memory");
    return rc;
}

/* ---- keys ------------------------------------------------------------------- */

ost_value raw_key_decode(const char *kind, const uint8_t *k, size_t n) {
    return ost_map_key_decode(kind, k, n);
}

int raw_key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    int r = memcmp(a, b, al < bl ? al : bl);
    if (r) return r < 0 ? -1 : 1;
    return al < bl ? -1 : al > bl;
}

/* A growable byte string for one element. */
typedef struct {
    uint8_t *p;
    size_t n, cap;
    bool oom;
} bytes_buf;

static void bb_put(bytes_buf *b, const void *p, size_t n) {
    if (b->oom) return;
    if (n > SIZE_MAX - b->n || ost__reserve((void **)&b->p, &b->cap, b->n + n, 1, 64)) {
        b->oom = true;
        return;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

/* Appends code point u as UTF-8 (surrogates too, as 'surrogatepass'). */
static void bb_utf8(bytes_buf *b, uint32_t u) {
    uint8_t o[4];
    size_t n;
    if (u < 0x80) o[0] = (uint8_t)u, n = 1;
    else if (u < 0x800) o[0] = (uint8_t)(0xc0 | u >> 6), o[1] = (uint8_t)(0x80 | (u & 0x3f)), n = 2;
    else if (u < 0x10000)
        o[0] = (uint8_t)(0xe0 | u >> 12), o[1] = (uint8_t)(0x80 | (u >> 6 & 0x3f)),
        o[2] = (uint8_t)(0x80 | (u & 0x3f)), n = 3;
    else
        o[0] = (uint8_t)(0xf0 | u >> 18), o[1] = (uint8_t)(0x80 | (u >> 12 & 0x3f)),
        o[2] = (uint8_t)(0x80 | (u >> 6 & 0x3f)), o[3] = (uint8_t)(0x80 | (u & 0x3f)), n = 4;
    bb_put(b, o, n);
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                          : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* Reads the string literal at *pp (its opening quote; a b prefix already
 * skipped) into b, for a bytes element or not; *pp ends after the
 * closing quote. 0, or -1 with the reason in err. */
static int read_literal(const char **pp, bool bytes, bytes_buf *b, char *err, size_t cap) {
    const char *p = *pp;
    char q = *p++;
    for (;;) {
        char ch = *p;
        if (!ch) {
            snprintf(err, cap, "a string literal has no closing %c", q);
            return -1;
        }
        p++;
        if (ch == q) break;
        if (ch != '\\') {
            bb_put(b, &ch, 1);
            continue;
        }
        char e = *p++;
        uint32_t u = 0;
        int digits = 0;
        switch (e) {
        case '\\':
        case '\'':
        case '"': u = (uint8_t)e; break;
        case 'n': u = '\n'; break;
        case 'r': u = '\r'; break;
        case 't': u = '\t'; break;
        case '0': u = 0; break;
        case 'x': digits = 2; break;
        case 'u': digits = bytes ? -1 : 4; break;
        case 'U': digits = bytes ? -1 : 8; break;
        default: digits = -1;
        }
        if (digits < 0) {
            if (e)
                snprintf(err, cap,
                         "unknown escape \\%c in a %s literal (known: \\\\ \\' \\\" \\n "
                         "\\r \\t \\0 \\xhh%s)",
                         e, bytes ? "bytes" : "str", bytes ? "" : " \\uXXXX \\UXXXXXXXX");
            else
                snprintf(err, cap, "a string literal ends with a lone backslash");
            return -1;
        }
        for (int i = 0; i < digits; i++) {
            int h = hexval(p[i]);
            if (h < 0) {
                snprintf(err, cap, "\\%c needs %d hex digits", e, digits);
                return -1;
            }
            u = u << 4 | (uint32_t)h;
        }
        p += digits;
        if (u > 0x10ffff) {
            snprintf(err, cap, "\\U%08x is not a code point", u);
            return -1;
        }
        if (bytes) {
            uint8_t c8 = (uint8_t)u;
            bb_put(b, &c8, 1);
        } else {
            bb_utf8(b, u);
        }
    }
    *pp = p;
    return 0;
}

static const char *el_name(uint8_t e) { return e == 'i' ? "int" : e == 's' ? "str" : "bytes"; }

/* An int element from [s, s + n): a decimal number with an optional sign. */
static ost_value parse_int(const char *s, size_t n, char *err, size_t cap) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    if (i == n) goto bad;
    uint64_t v = 0;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') goto bad;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10) goto big;
        v = v * 10 + d;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) goto big;
    ost_value r = ost_int(neg ? (int64_t)(0 - v) : (int64_t)v);
    if (!r) snprintf(err, cap, "out of memory");
    return r;
bad:
    snprintf(err, cap, "'%.*s' is not an int (a decimal number such as -5 or 42)",
             (int)(n > 60 ? 60 : n), s);
    return 0;
big:
    snprintf(err, cap, "%.*s does not fit in 64 bits (int keys are 64-bit)", (int)(n > 60 ? 60 : n),
             s);
    return 0;
}

/* Makes a str or bytes element from its bytes. */
static ost_value text_el(uint8_t e, const uint8_t *p, size_t n, char *err, size_t cap) {
    if (e == 's' && ost_utf8_check((const char *)p, n, NULL)) {
        snprintf(err, cap, "the text is not valid UTF-8");
        return 0;
    }
    ost_value v = e == 's' ? ost_str((const char *)p, n) : ost_bytes(p, n);
    if (!v) snprintf(err, cap, "out of memory");
    return v;
}

/* Whether an element of kind e starts with a literal at p (and where its
 * quote is). A b prefix is a literal only for bytes. */
static const char *literal_at(uint8_t e, const char *p) {
    if (*p == '\'' || *p == '"') return p;
    if (*p == 'b' && (p[1] == '\'' || p[1] == '"')) return e == 'b' ? p + 1 : p;
    return NULL;
}

/* Reads one element of kind e at *pp. In a tuple a bare element ends at a
 * comma (spaces around it dropped); alone it is the whole text. */
static ost_value parse_el(uint8_t e, const char **pp, bool in_tuple, char *err, size_t cap) {
    const char *p = *pp;
    if (in_tuple)
        while (*p == ' ') p++;
    const char *lit = e == 'i' ? NULL : literal_at(e, p);
    if (lit && *lit == 'b') {
        snprintf(err, cap, "a bytes literal (b'...') where the key has a str");
        return 0;
    }
    if (lit) {
        bytes_buf b = {0};
        int rc = read_literal(&lit, e == 'b', &b, err, cap);
        ost_value v = 0;
        if (!rc && b.oom) snprintf(err, cap, "out of memory");
        else if (!rc) v = text_el(e, b.p, b.n, err, cap);
        free(b.p);
        *pp = lit;
        return v;
    }
    const char *end = in_tuple ? p + strcspn(p, ",") : p + strlen(p);
    const char *q = end;
    if (in_tuple || e == 'i') {
        while (q > p && q[-1] == ' ') q--;
        if (!in_tuple)
            while (*p == ' ') p++;
    }
    *pp = end;
    if (e == 'i') return parse_int(p, (size_t)(q - p), err, cap);
    return text_el(e, (const uint8_t *)p, (size_t)(q - p), err, cap);
}

/* Appends the encoding of element v (of kind e) to enc (docs/format.md). */
int raw_key_parse(const char *kind, const char *text, bool prefix, ost_value *out, uint8_t *enc,
                  size_t *enclen, char *err, size_t cap) {
    *out = 0;
    *enclen = 0;
    key_kind k;
    if (kind_parse(kind, &k)) {
        snprintf(err, cap, "unknown key kind %s", kind);
        return -1;
    }
    if (!k.tuple) {
        const char *p = text;
        ost_value v = parse_el(k.el[0], &p, false, err, cap);
        if (v && *p) {
            snprintf(err, cap, "text after the closing quote: '%.40s'", p);
            ost_decref(v);
            return -1;
        }
        if (!v) return -1;
        if (ost_map_key_encode(kind, v, prefix, enc, enclen, err, cap)) {
            ost_decref(v);
            return -1;
        }
        *out = v;
        return 0;
    }
    /* a tuple: elements separated by commas, in optional parentheses */
    size_t tl = strlen(text);
    char *buf = malloc(tl + 1);
    if (!buf) {
        snprintf(err, cap, "out of memory");
        return -1;
    }
    memcpy(buf, text, tl + 1);
    char *p = buf;
    while (*p == ' ') p++;
    char *end = p + strlen(p);
    while (end > p && end[-1] == ' ') end--;
    *end = 0;
    bool paren = *p == '(';
    if (paren) {
        if (end == p + 1 || end[-1] != ')') {
            snprintf(err, cap, "an opening parenthesis without a closing one");
            free(buf);
            return -1;
        }
        *--end = 0;
        p++;
    }
    ost_value items[8];
    size_t n = 0;
    int rc = 0;
    const char *q = p;
    for (;;) {
        while (*q == ' ') q++;
        if (!*q) break; /* the end, possibly after a trailing comma */
        if (n == (size_t)k.n) {
            snprintf(err, cap, "more than the %d element%s of a %s key", k.n, k.n == 1 ? "" : "s",
                     k.canon);
            rc = -1;
            break;
        }
        if (*q == ',') {
            snprintf(err, cap, "element %zu is empty", n + 1);
            rc = -1;
            break;
        }
        char why[200];
        ost_value v = parse_el(k.el[n], &q, true, why, sizeof why);
        if (!v) {
            snprintf(err, cap, "element %zu (%s): %s", n + 1, el_name(k.el[n]), why);
            rc = -1;
            break;
        }
        items[n++] = v;
        while (*q == ' ') q++;
        if (*q == ',') q++;
        else if (*q) {
            snprintf(err, cap, "element %zu: a comma expected before '%.40s'", n, q);
            rc = -1;
            break;
        }
    }
    free(buf);
    if (!rc && n == 0) {
        snprintf(err, cap, "an empty key");
        rc = -1;
    }
    if (!rc && n < (size_t)k.n && !prefix) {
        snprintf(err, cap, "%zu element%s, a %s key has %d", n, n == 1 ? "" : "s", k.canon, k.n);
        rc = -1;
    }
    ost_value t = 0;
    if (!rc && !(t = ost_tuple_new(n))) {
        snprintf(err, cap, "out of memory");
        rc = -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (t) ost_tuple_set(t, i, items[i]);
        else ost_decref(items[i]);
    }
    if (!rc && ost_map_key_encode(kind, t, prefix, enc, enclen, err, cap)) rc = -1;
    if (rc) {
        ost_decref(t);
        *enclen = 0;
        return -1;
    }
    *out = t;
    return 0;
}
