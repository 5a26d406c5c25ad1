/* ost__flat_scan: a check of a flat record (internal.h, "flat records")
 * without building values, for ost_store_check, which must know that
 * every record decodes and what each refers to. */
#include "internal.h"
#include "opcodes.h"

#define FLAT_REFS 64 /* references reported at most; more: the general way */

int ost__flat_scan(const void *data, size_t len,
                   void (*ref)(void *ud, uint64_t oid, uint32_t cid), void *ud) {
    const uint8_t *p = data, *end = p + len, *q;
    uint64_t oids[FLAT_REFS];
    uint32_t cids[FLAT_REFS];
    size_t nrefs = 0, n;
    /* what is on the stack: values above the marks, and whether the value
     * under each mark is a list (the only thing APPENDS may add to) */
    uint32_t sp = 0, mark[2], nm = 0;
    bool list_at[FLAT_REFS + 4] = {false};
    if (len < 4 || p[0] != OP_PROTO || p[1] < 2 || p[1] > 5) return 1;
    p += 2;
    for (;;) {
        if (p >= end || sp >= FLAT_REFS) return 1;
        int op = *p;
        int64_t a;
        bool is_list = false;
        switch (op) {
        case OP_BININT1:
        case OP_BININT2:
        case OP_BININT:
        case OP_LONG1:
            if (nrefs < FLAT_REFS && (q = ost__flat_ref(p, end, &oids[nrefs], &cids[nrefs]))) {
                nrefs++;
                p = q;
            } else if (!(p = ost__flat_int(p, end, &a)))
                return 1;
            break;
        case OP_NONE:
        case OP_NEWTRUE:
        case OP_NEWFALSE: p++; break;
        case OP_BINFLOAT:
            if (end - p < 9) return 1;
            p += 9;
            break;
        case OP_SHORT_BINUNICODE:
        case OP_SHORT_BINBYTES:
        case OP_BINUNICODE:
        case OP_BINBYTES: {
            size_t hdr = op == OP_SHORT_BINUNICODE || op == OP_SHORT_BINBYTES ? 2 : 5;
            if ((size_t)(end - p) < hdr) return 1;
            n = hdr == 2 ? p[1] : ost__rd_le32(p + 1);
            if ((size_t)(end - p) - hdr < n) return 1;
            size_t bad;
            if ((op == OP_SHORT_BINUNICODE || op == OP_BINUNICODE) &&
                ost_utf8_check((const char *)p + hdr, n, &bad))
                return 1;
            p += hdr + n;
            break;
        }
        case OP_EMPTY_LIST:
            is_list = true;
            p++;
            break;
        case OP_MARK:
            if (nm == 2) return 1;
            mark[nm++] = sp;
            p++;
            continue;
        case OP_APPEND:
        case OP_APPENDS: {
            uint32_t base;
            if (!ost__flat_append_at(op, sp, mark, nm, &base) || !list_at[base - 1]) return 1;
            sp = base;
            nm -= op == OP_APPENDS;
            p++;
            continue;
        }
        case OP_TUPLE1:
        case OP_TUPLE2:
        case OP_TUPLE3:
        case OP_TUPLE: {
            /* the state itself: the whole stack, then STOP, the end */
            if (!ost__flat_tuple_ends(op, p, end, sp, mark, nm)) return 1;
            for (size_t i = 0; i < nrefs; i++) ref(ud, oids[i], cids[i]);
            return 0;
        }
        default: return 1;
        }
        list_at[sp++] = is_list;
    }
}
