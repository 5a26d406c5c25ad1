/* A pickletools-like disassembler: one line per opcode with its offset,
 * indentation by MARK depth, and its argument. Checks lengths, not
 * meaning.
 *
 * The listing is written as it goes, a few KiB at a time, to a callback,
 * so memory stays bounded however long it gets; and it stays linear in the
 * input: the indentation stops at DIS_MAX_INDENT levels (30,000 nested
 * MARKs, a 30 KB pickle, made 900 million blanks), and a deeper line shows
 * its depth as a number, [N], where the name would have gone deeper. */
#include <stdarg.h>
#include <stdio.h>

#include "internal.h"
#include "opcodes.h"

const char *ost__op_name(int op);

#define DIS_MAX_INDENT 32 /* levels of 2 blanks */
#define DIS_CHUNK 4096    /* bytes kept before they go to the callback */

enum { A_NONE, A_U1, A_U2, A_I4, A_U4, A_LINE, A_LINE2, A_F8, A_FRAME,
       A_LONG1, A_LONG4, A_TEXT1, A_TEXT4, A_TEXT8, A_BYTES1, A_BYTES4,
       A_BYTES8, A_STR1, A_STR4 };

static int arg_kind(int op) {
    switch (op) {
    case OP_PROTO: case OP_BININT1: case OP_BINGET: case OP_BINPUT:
    case OP_EXT1: return A_U1;
    case OP_BININT2: case OP_EXT2: return A_U2;
    case OP_BININT: return A_I4;
    case OP_LONG_BINGET: case OP_LONG_BINPUT: case OP_EXT4: return A_U4;
    case OP_FLOAT: case OP_INT: case OP_LONG: case OP_PERSID: case OP_STRING:
    case OP_UNICODE: case OP_GET: case OP_PUT: return A_LINE;
    case OP_GLOBAL: case OP_INST: return A_LINE2;
    case OP_BINFLOAT: return A_F8;
    case OP_FRAME: return A_FRAME;
    case OP_LONG1: return A_LONG1;
    case OP_LONG4: return A_LONG4;
    case OP_SHORT_BINUNICODE: return A_TEXT1;
    case OP_BINUNICODE: return A_TEXT4;
    case OP_BINUNICODE8: return A_TEXT8;
    case OP_SHORT_BINBYTES: return A_BYTES1;
    case OP_BINBYTES: return A_BYTES4;
    case OP_BINBYTES8: case OP_BYTEARRAY8: return A_BYTES8;
    case OP_SHORT_BINSTRING: return A_STR1;
    case OP_BINSTRING: return A_STR4;
    default: return A_NONE;
    }
}

/* The listing on its way to the callback. */
typedef struct {
    ost_buf buf;     /* text not yet handed to fn */
    ost_write_fn fn; /* NULL: check the pickle, write nothing */
    void *ud;
    int err; /* OST_ENOMEM or fn's code: nothing more is written */
} dis_out;

static void emit(dis_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(dis_out *o, const char *fmt, ...) {
    if (!o->fn || o->err) return;
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n < sizeof tmp) {
        o->err = ost__buf_append(&o->buf, tmp, (size_t)n);
        return;
    }
    if ((o->err = ost__buf_reserve(&o->buf, (size_t)n))) return;
    va_start(ap, fmt);
    vsnprintf(o->buf.data + o->buf.len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->buf.len += (size_t)n;
}

/* Hands what is kept to fn: at a line's end once DIS_CHUNK bytes wait, or
 * everything (all). */
static void flush(dis_out *o, bool all) {
    if (!o->fn || o->err || !o->buf.len || (!all && o->buf.len < DIS_CHUNK)) return;
    int rc = o->fn(o->ud, o->buf.data, o->buf.len);
    o->buf.len = 0;
    if (rc) o->err = rc < 0 ? rc : OST_EIO;
}

/* The argument of a LONG, text or bytes opcode: n bytes at p. Text and
 * bytes of more than 200 bytes show as their size. */
static int dis_payload(dis_out *o, int k, const uint8_t *p, uint64_t n,
                       const ost_repr_options *ro) {
    bool text = k == A_TEXT1 || k == A_TEXT4 || k == A_TEXT8;
    bool num = k == A_LONG1 || k == A_LONG4;
    if (text && ost_utf8_check((const char *)p, (size_t)n, NULL)) {
        emit(o, " <invalid UTF-8>\n");
        return OST_EUTF8;
    }
    if (!o->fn || o->err) return 0;
    if (!num && n > 200) {
        emit(o, " <%llu bytes>", (unsigned long long)n);
        return 0;
    }
    ost_value v = num ? ost_int_from_bytes(p, (size_t)n)
                  : text ? ost_str((const char *)p, (size_t)n)
                         : ost_bytes(p, (size_t)n);
    if (!v) {
        o->err = OST_ENOMEM;
        return 0;
    }
    ost_repr_options ropt = *ro;
    ropt.max_len = 0;
    emit(o, " ");
    int rc = o->err ? 0 : ost_repr_ex(v, &o->buf, &ropt);
    if (rc) o->err = rc;
    ost_decref(v);
    return 0;
}

int ost_pickle_dis_ex(const void *data, size_t len, const ost_repr_options *opt,
                      ost_write_fn fn, void *ud, size_t *erroff) {
    ost_repr_options def;
    if (!opt) {
        ost_repr_options_init(&def);
        opt = &def;
    }
    if (!data && len) return OST_EINVAL;
    dis_out o = {.fn = fn, .ud = ud};
    const uint8_t *base = data, *p = base, *end = len ? base + len : base;
    size_t depth = 0, memo_n = 0;
    int rc = 0;
    while (p < end && !o.err) {
        const uint8_t *at = p;
        int op = *p++;
        const char *name = ost__op_name(op);
        char code[8];
        if (op >= 0x20 && op < 0x7f) snprintf(code, sizeof code, "%c", op);
        else snprintf(code, sizeof code, "\\x%02x", op);
        if (name[0] == '?') {
            rc = OST_EBADOPCODE;
            emit(&o, "%5zu: %-4s <unknown opcode>\n", (size_t)(at - base), code);
            goto bad;
        }
        if (op == OP_MARK) depth++;
        else if ((op == OP_TUPLE || op == OP_LIST || op == OP_DICT || op == OP_APPENDS ||
                  op == OP_SETITEMS || op == OP_ADDITEMS || op == OP_FROZENSET ||
                  op == OP_POP_MARK || op == OP_INST || op == OP_OBJ) && depth > 0)
            depth--;
        size_t level = op == OP_MARK ? depth - 1 : depth;
        if (level <= DIS_MAX_INDENT) {
            emit(&o, "%5zu: %-4s %*s%-16s", (size_t)(at - base), code, (int)(2 * level), "",
                 name);
        } else {
            /* the indentation of DIS_MAX_INDENT levels ends in the depth */
            char tag[32];
            snprintf(tag, sizeof tag, "[%zu] ", level);
            emit(&o, "%5zu: %-4s %*s%-16s", (size_t)(at - base), code, 2 * DIS_MAX_INDENT, tag,
                 name);
        }
        size_t left = (size_t)(end - p);
        uint64_t n = 0;
        int k = arg_kind(op);
        int w = 0;
        switch (k) {
        case A_NONE:
            if (op == OP_MEMOIZE) emit(&o, " (as %zu)", memo_n++);
            break;
        case A_U1: case A_U2: case A_U4: case A_I4: case A_FRAME:
            w = k == A_U1 ? 1 : k == A_U2 ? 2 : k == A_FRAME ? 8 : 4;
            if (left < (size_t)w) goto trunc;
            for (int i = 0; i < w; i++) n |= (uint64_t)p[i] << (8 * i);
            p += w;
            if (k == A_I4) emit(&o, " %d", (int32_t)(uint32_t)n);
            else emit(&o, " %llu", (unsigned long long)n);
            if (op == OP_BINPUT || op == OP_LONG_BINPUT) memo_n++;
            if (op == OP_FRAME && n > (uint64_t)(end - p)) goto trunc;
            break;
        case A_F8: {
            if (left < 8) goto trunc;
            if (fn) {
                uint64_t bits = ost__rd_be64(p);
                double d;
                memcpy(&d, &bits, 8);
                char f[40];
                ost__float_repr(d, f, sizeof f);
                emit(&o, " %s", f);
            }
            p += 8;
            break;
        }
        case A_LINE:
        case A_LINE2: {
            for (int lines = k == A_LINE ? 1 : 2; lines > 0; lines--) {
                const uint8_t *e = memchr(p, '\n', (size_t)(end - p));
                if (!e) goto trunc;
                emit(&o, " %.*s", (int)(e - p), (const char *)p);
                p = e + 1;
            }
            if (op == OP_PUT) memo_n++;
            break;
        }
        default: {
            w = (k == A_LONG1 || k == A_TEXT1 || k == A_BYTES1 || k == A_STR1) ? 1
                : (k == A_TEXT8 || k == A_BYTES8) ? 8 : 4;
            if (left < (size_t)w) goto trunc;
            for (int i = 0; i < w; i++) n |= (uint64_t)p[i] << (8 * i);
            p += w;
            if (n > (uint64_t)(end - p)) goto trunc;
            if ((rc = dis_payload(&o, k, p, n, opt))) goto bad;
            p += n;
            break;
        }
        }
        emit(&o, "\n");
        flush(&o, false);
        if (op == OP_STOP) {
            flush(&o, true);
            ost_buf_free(&o.buf);
            return o.err;
        }
        continue;
    trunc:
        emit(&o, " <truncated>\n");
        rc = OST_ETRUNCATED;
    bad:
        if (erroff) *erroff = (size_t)(at - base);
        flush(&o, true);
        ost_buf_free(&o.buf);
        return o.err ? o.err : rc;
    }
    if (!o.err) {
        if (erroff) *erroff = len;
        emit(&o, "<no STOP>\n");
        rc = OST_ETRUNCATED;
    }
    flush(&o, true);
    ost_buf_free(&o.buf);
    return o.err ? o.err : rc;
}

static int append_to(void *ud, const void *data, size_t len) {
    return ost__buf_append(ud, data, len);
}

int ost_pickle_dis(const void *data, size_t len, ost_buf *out, size_t *erroff) {
    if (ost__buf_reserve(out, 0)) return OST_ENOMEM;
    return ost_pickle_dis_ex(data, len, NULL, append_to, out, erroff);
}

int ost__scan_pids(const void *data, size_t len, void (*fn)(void *ud, uint64_t oid),
                   void *ud) {
    const uint8_t *p = data, *end = p + len;
    /* the ops just before: an int (last), two ints (prev, last), or the
     * pair TUPLE2 made of two ints (pair: its first, the oid) */
    bool have_int = false, have_two = false, have_pair = false;
    uint64_t last = 0, prev = 0, pair = 0;
    while (p < end) {
        int op = *p++;
        if (op == OP_STOP) return 0;
        if (ost__op_name(op)[0] == '?') return OST_EBADOPCODE;
        if (op == OP_BINPERSID) {
            if (have_int) fn(ud, last);
            else if (have_pair) fn(ud, pair);
            have_int = have_two = have_pair = false;
            continue;
        }
        if (op == OP_TUPLE2) {
            have_pair = have_two;
            pair = prev;
            have_int = have_two = false;
            continue;
        }
        int k = arg_kind(op);
        size_t left = (size_t)(end - p);
        uint64_t n = 0, val = 0;
        int w;
        bool is_int = false;
        switch (k) {
        case A_NONE: break;
        case A_U1: case A_U2: case A_U4: case A_I4: case A_FRAME: case A_F8:
            w = k == A_U1 ? 1 : k == A_U2 ? 2 : (k == A_FRAME || k == A_F8) ? 8 : 4;
            if (left < (size_t)w) return OST_ETRUNCATED;
            for (int i = 0; i < w && k != A_F8; i++) n |= (uint64_t)p[i] << (8 * i);
            p += w;
            if (op == OP_BININT1 || op == OP_BININT2 || (op == OP_BININT && (int32_t)n >= 0)) {
                is_int = true;
                val = n;
            }
            break;
        case A_LINE:
        case A_LINE2:
            for (int lines = k == A_LINE ? 1 : 2; lines > 0; lines--) {
                const uint8_t *e = memchr(p, '\n', (size_t)(end - p));
                if (!e) return OST_ETRUNCATED;
                p = e + 1;
            }
            break;
        default:
            w = (k == A_LONG1 || k == A_TEXT1 || k == A_BYTES1 || k == A_STR1) ? 1
                : (k == A_TEXT8 || k == A_BYTES8) ? 8 : 4;
            if (left < (size_t)w) return OST_ETRUNCATED;
            for (int i = 0; i < w; i++) n |= (uint64_t)p[i] << (8 * i);
            p += w;
            if (n > (uint64_t)(end - p)) return OST_ETRUNCATED;
            if (op == OP_LONG1 && n <= 8 && n > 0 && !(p[n - 1] & 0x80)) {
                for (size_t i = 0; i < n; i++) val |= (uint64_t)p[i] << (8 * i);
                is_int = true;
            }
            p += n;
            break;
        }
        /* MEMOIZE / PUT / FRAME between the pid and BINPERSID keep it */
        if (op == OP_MEMOIZE || op == OP_BINPUT || op == OP_LONG_BINPUT || op == OP_FRAME)
            continue;
        have_two = is_int && have_int;
        prev = last;
        have_int = is_int;
        last = val;
        have_pair = false;
    }
    return OST_ETRUNCATED;
}

int ost_pickle_refs(const void *data, size_t len, void (*fn)(void *ud, uint64_t oid), void *ud) {
    return ost__scan_pids(data, len, fn, ud);
}
