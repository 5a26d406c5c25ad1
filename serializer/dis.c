/* A pickletools-like disassembler: one line per opcode with its offset,
 * indentation by MARK depth, and its argument. Checks lengths, not
 * meaning. */
#include <stdio.h>

#include "internal.h"
#include "opcodes.h"

const char *ost__op_name(int op);

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

int ost_pickle_dis(const void *data, size_t len, ost_buf *out, size_t *erroff) {
    const uint8_t *base = data, *p = base, *end = base + len;
    int depth = 0, rc = 0;
    size_t memo_n = 0;
    while (p < end) {
        const uint8_t *at = p;
        int op = *p++;
        const char *name = ost__op_name(op);
        char code[8];
        if (op >= 0x20 && op < 0x7f) snprintf(code, sizeof code, "%c", op);
        else snprintf(code, sizeof code, "\\x%02x", op);
        if (name[0] == '?') {
            rc = OST_EBADOPCODE;
            ost__buf_printf(out, "%5zu: %-4s <unknown opcode>\n", (size_t)(at - base), code);
            goto bad;
        }
        if (op == OP_MARK) depth++;
        else if ((op == OP_TUPLE || op == OP_LIST || op == OP_DICT || op == OP_APPENDS ||
                  op == OP_SETITEMS || op == OP_ADDITEMS || op == OP_FROZENSET ||
                  op == OP_POP_MARK || op == OP_INST || op == OP_OBJ) && depth > 0)
            depth--;
        ost__buf_printf(out, "%5zu: %-4s %*s%-16s", (size_t)(at - base), code,
                        2 * (op == OP_MARK ? depth - 1 : depth), "", name);
        size_t left = (size_t)(end - p);
        uint64_t n = 0;
        int k = arg_kind(op);
        int w = 0;
        switch (k) {
        case A_NONE:
            if (op == OP_MEMOIZE) ost__buf_printf(out, " (as %zu)", memo_n++);
            break;
        case A_U1: case A_U2: case A_U4: case A_I4: case A_FRAME:
            w = k == A_U1 ? 1 : k == A_U2 ? 2 : k == A_FRAME ? 8 : 4;
            if (left < (size_t)w) goto trunc;
            for (int i = 0; i < w; i++) n |= (uint64_t)p[i] << (8 * i);
            p += w;
            if (k == A_I4) ost__buf_printf(out, " %d", (int32_t)(uint32_t)n);
            else ost__buf_printf(out, " %llu", (unsigned long long)n);
            if (op == OP_BINPUT || op == OP_LONG_BINPUT) memo_n++;
            if (op == OP_FRAME && n > (uint64_t)(end - p)) goto trunc;
            break;
        case A_F8: {
            if (left < 8) goto trunc;
            uint64_t bits = 0;
            for (int i = 0; i < 8; i++) bits = bits << 8 | p[i];
            double d;
            memcpy(&d, &bits, 8);
            char f[40];
            ost__float_repr(d, f, sizeof f);
            ost__buf_printf(out, " %s", f);
            p += 8;
            break;
        }
        case A_LINE:
        case A_LINE2: {
            for (int lines = k == A_LINE ? 1 : 2; lines > 0; lines--) {
                const uint8_t *e = memchr(p, '\n', (size_t)(end - p));
                if (!e) goto trunc;
                ost__buf_printf(out, " %.*s", (int)(e - p), (const char *)p);
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
            ost_value v = 0;
            if (k == A_LONG1 || k == A_LONG4) v = ost_int_from_bytes(p, (size_t)n);
            else if (k == A_TEXT1 || k == A_TEXT4 || k == A_TEXT8) {
                v = ost_str((const char *)p, (size_t)n);
                if (!v) {
                    ost__buf_printf(out, " <invalid UTF-8>\n");
                    rc = OST_EUTF8;
                    goto bad;
                }
            } else v = ost_bytes(p, (size_t)n);
            if (v) {
                ost__buf_printf(out, " ");
                if (n > 200 && ost__type(v) != OST_T_INT) {
                    ost__buf_printf(out, "<%llu bytes>", (unsigned long long)n);
                } else
                    ost_repr(v, out);
                ost_decref(v);
            }
            p += n;
            break;
        }
        }
        ost__buf_printf(out, "\n");
        if (op == OP_STOP) {
            return 0;
        }
        continue;
    trunc:
        ost__buf_printf(out, " <truncated>\n");
        rc = OST_ETRUNCATED;
    bad:
        if (erroff) *erroff = (size_t)(at - base);
        return rc;
    }
    if (erroff) *erroff = len;
    ost__buf_printf(out, "<no STOP>\n");
    return OST_ETRUNCATED;
}

int ost__scan_pids(const void *data, size_t len, void (*fn)(void *ud, uint64_t oid),
                   void *ud) {
    const uint8_t *p = data, *end = p + len;
    bool have_int = false;
    uint64_t last = 0;
    while (p < end) {
        int op = *p++;
        if (op == OP_STOP) return 0;
        if (ost__op_name(op)[0] == '?') return OST_EBADOPCODE;
        if (op == OP_BINPERSID) {
            if (have_int) fn(ud, last);
            have_int = false;
            continue;
        }
        int k = arg_kind(op);
        size_t left = (size_t)(end - p);
        uint64_t n = 0;
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
                last = n;
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
                last = 0;
                for (size_t i = 0; i < n; i++) last |= (uint64_t)p[i] << (8 * i);
                is_int = true;
            }
            p += n;
            break;
        }
        /* MEMOIZE / PUT / FRAME between the pid and BINPERSID keep it */
        if (op != OP_MEMOIZE && op != OP_BINPUT && op != OP_LONG_BINPUT && op != OP_FRAME)
            have_int = is_int;
    }
    return OST_ETRUNCATED;
}
