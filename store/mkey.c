/* The keys of maps as stored (include/ostore/maps.h, docs/maps.md): key
 * kinds ("int", "(str, int)"), the encoding whose bytewise order is
 * Python's order, and its decoding. Values only: it calls no other file of
 * the store, and the maps (store/maps.c), the raw snapshots
 * (store/snap.c) and pack (store/pack.c) build on it.
 *
 * Keys are encoded so that bytewise order is Python's order:
 *   int    8 bytes big-endian of the value with its sign bit flipped;
 *   str    the UTF-8 bytes; bytes: the bytes themselves;
 *   tuple  the elements' encodings one after the other, where a str or
 *          bytes element has each 0x00 written as 00 01 and ends with
 *          00 00, so that a shorter element sorts first. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define KMAX OST_MAP_KEY_MAX

/* ---- kinds ---------------------------------------------------------------- */

static const char *el_name(uint8_t e) {
    return e == 'i' ? "int" : e == 's' ? "str" : "bytes";
}

int ost__mkind_parse(const char *s, ost__mkind *k) {
    memset(k, 0, sizeof *k);
    if (!s) return OST_EINVAL;
    while (*s == ' ') s++;
    bool tuple = *s == '(';
    if (tuple) s++;
    for (;;) {
        while (*s == ' ') s++;
        if (tuple && *s == ')' && k->n > 0) {
            s++;
            break;
        }
        uint8_t e;
        if (strncmp(s, "int", 3) == 0) e = 'i', s += 3;
        else if (strncmp(s, "str", 3) == 0) e = 's', s += 3;
        else if (strncmp(s, "bytes", 5) == 0) e = 'b', s += 5;
        else return OST_EINVAL;
        if (k->n == OST__MKIND_MAX) return OST_ELIMIT;
        k->el[k->n++] = e;
        while (*s == ' ') s++;
        if (!tuple) break;
        if (*s == ',') s++;
        else if (*s != ')') return OST_EINVAL;
    }
    while (*s == ' ') s++;
    if (*s) return OST_EINVAL;
    k->tuple = tuple;
    char *o = k->canon;
    if (!tuple) {
        strcpy(o, el_name(k->el[0]));
        return 0;
    }
    *o++ = '(';
    for (int i = 0; i < k->n; i++) {
        if (i) o += sprintf(o, ", ");
        o += sprintf(o, "%s", el_name(k->el[i]));
    }
    strcpy(o, k->n == 1 ? ",)" : ")");
    return 0;
}

/* ---- key encoding ------------------------------------------------------- */

static const char *article(const char *noun) {
    return strchr("aeiou", noun[0]) ? "an" : "a";
}

/* Encodes one element of kind e from v into out (at *n); on failure the
 * reason goes to err. */
static int enc_el(uint8_t e, bool in_tuple, ost_value v, uint8_t *out, size_t *n, char *err,
                  size_t cap) {
    int t = ost_typeof(v);
    if (e == 'i') {
        int64_t i;
        if (t != OST_T_INT && t != OST_T_BOOL) goto wrong;
        if (ost_int_value(v, &i)) {
            snprintf(err, cap, "an int key must fit in 64 bits");
            return OST_ELIMIT;
        }
        if (*n + 8 > KMAX) goto toolong;
        ost__be64(out + *n, (uint64_t)i ^ ((uint64_t)1 << 63));
        *n += 8;
        return 0;
    }
    if ((e == 's' && t != OST_T_STR) || (e == 'b' && t != OST_T_BYTES)) goto wrong;
    size_t len;
    const uint8_t *p = (const uint8_t *)ost_data(v, &len);
    if (!in_tuple) {
        if (*n + len > KMAX) goto toolong;
        memcpy(out + *n, p, len);
        *n += len;
        return 0;
    }
    for (size_t i = 0; i < len; i++) {
        if (*n + 2 > KMAX) goto toolong;
        out[(*n)++] = p[i];
        if (!p[i]) out[(*n)++] = 1;
    }
    if (*n + 2 > KMAX) goto toolong;
    out[(*n)++] = 0;
    out[(*n)++] = 0;
    return 0;
wrong:
    snprintf(err, cap, "%s is %s %s, not %s %s", in_tuple ? "a key element" : "the key",
             article(ost_type_name(t)), ost_type_name(t), article(el_name(e)), el_name(e));
    return OST_ETYPE;
toolong:
    snprintf(err, cap,
             "the encoded key is longer than %d bytes (LMDB's key limit of 511 less the "
             "8-byte map oid)",
             KMAX);
    return OST_EINVAL;
}

int ost__mkey_encode(const ost__mkind *k, ost_value key, bool prefix, uint8_t *out, size_t *n,
                     char *err, size_t cap) {
    *n = 0;
    if (!key) {
        snprintf(err, cap, "no key given");
        return OST_EINVAL;
    }
    if (!k->tuple) return enc_el(k->el[0], false, key, out, n, err, cap);
    if (ost_typeof(key) != OST_T_TUPLE) {
        const char *tn = ost_type_name(ost_typeof(key));
        snprintf(err, cap, "the key is %s %s, not a tuple of %d", article(tn), tn, k->n);
        return OST_ETYPE;
    }
    size_t len = ost_len(key);
    if (len > k->n || (!prefix && len != k->n) || (prefix && len == 0)) {
        snprintf(err, cap, "the key is a tuple of %zu, not of %d", len, k->n);
        return OST_ETYPE;
    }
    for (size_t i = 0; i < len; i++) {
        int rc = enc_el(k->el[i], true, ost_item(key, i), out, n, err, cap);
        if (rc) return rc;
    }
    return 0;
}

/* Decodes an encoded key to a new value; 0 when the bytes are damaged. */
ost_value ost__mkey_decode(const ost__mkind *k, const uint8_t *p, size_t n) {
    if (!k->tuple) {
        if (k->el[0] == 'i') return n == 8 ? ost_int((int64_t)(ost__rd_be64(p) ^ ((uint64_t)1 << 63))) : 0;
        return k->el[0] == 's' ? ost_str((const char *)p, n) : ost_bytes(p, n);
    }
    ost_value t = ost_tuple_new(k->n);
    if (!t) return 0;
    size_t off = 0;
    uint8_t tmp[KMAX];
    for (int i = 0; i < k->n; i++) {
        ost_value v = 0;
        if (k->el[i] == 'i') {
            if (off + 8 > n) goto bad;
            v = ost_int((int64_t)(ost__rd_be64(p + off) ^ ((uint64_t)1 << 63)));
            off += 8;
        } else {
            size_t m = 0;
            for (;;) {
                if (off >= n) goto bad;
                uint8_t b = p[off++];
                if (b) {
                    tmp[m++] = b;
                    continue;
                }
                if (off >= n) goto bad;
                uint8_t x = p[off++];
                if (x == 0) break;
                if (x != 1) goto bad;
                tmp[m++] = 0;
            }
            v = k->el[i] == 's' ? ost_str((const char *)tmp, m) : ost_bytes(tmp, m);
        }
        if (!v || ost_tuple_set(t, (size_t)i, v)) goto bad;
    }
    if (off != n) goto bad;
    return t;
bad:
    ost_decref(t);
    return 0;
}

/* ---- keys as stored (include/ostore/maps.h) -------------------------------------- */

int ost_map_kind_canon(const char *kind, char *out, size_t cap) {
    ost__mkind k;
    if (ost__mkind_parse(kind, &k)) return OST_EINVAL;
    if (strlen(k.canon) >= cap) return OST_ELIMIT;
    memcpy(out, k.canon, strlen(k.canon) + 1);
    return 0;
}

int ost_map_key_encode(const char *kind, ost_value key, bool prefix, uint8_t *out, size_t *n,
                       char *err, size_t cap) {
    ost__mkind k;
    *n = 0;
    int prc = ost__mkind_parse(kind, &k);
    if (prc) {
        if (prc == OST_ELIMIT)
            snprintf(err, cap, "'%s' is not a key kind: a tuple kind has at most %d elements",
                     kind, OST__MKIND_MAX);
        else snprintf(err, cap, "'%s' is not a key kind", kind ? kind : "(null)");
        return OST_EINVAL;
    }
    return ost__mkey_encode(&k, key, prefix, out, n, err, cap);
}

ost_value ost_map_key_decode(const char *kind, const uint8_t *p, size_t n) {
    ost__mkind k;
    if (ost__mkind_parse(kind, &k)) return 0;
    return ost__mkey_decode(&k, p, n);
}

size_t ost_map_prefix_end(const uint8_t *p, size_t n, uint8_t *out) {
    while (n > 0 && p[n - 1] == 0xff) n--;
    if (n == 0) return 0;
    memmove(out, p, n);
    out[n - 1]++;
    return n;
}
