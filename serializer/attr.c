/* Attribute access that tells "unset" from "failed", and the value
 * layer's per-thread message (ost_value_errmsg).
 *
 * Value functions have no handle to keep a message in, so the detail of
 * their last failure (which field of which class, why a ghost did not
 * load) is kept per thread, as errno is. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"

static __thread char t_msg[512];

const char *ost_value_errmsg(void) { return t_msg; }

int ost__value_fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(t_msg, sizeof t_msg, fmt, ap);
    va_end(ap);
    return code;
}

/* Appends "module.name" of global g to b[0..cap). */
static void global_text(ost_value g, char *b, size_t cap) {
    ost_value m = ost_global_module(g), n = ost_global_name(g);
    snprintf(b, cap, "%s.%s", m ? ost_data(m, NULL) : "?", n ? ost_data(n, NULL) : "?");
}

int ost__field_missing(ost_value cls, const char *name) {
    char cn[200], fields[200];
    global_text(cls, cn, sizeof cn);
    size_t used = 0, nf = ost_class_nfields(cls);
    fields[0] = 0;
    for (size_t i = 0; i < nf && used < sizeof fields; i++) {
        ost__klass *k = ost__klass_of(cls);
        const char *f = k && i < k->nfields ? ost_data(k->fields[i], NULL) : NULL;
        int w = snprintf(fields + used, sizeof fields - used, "%s%s", i ? ", " : "", f ? f : "?");
        if (w < 0) break;
        used += (size_t)w;
    }
    return ost__value_fail(OST_ENOTFOUND, "class %s has no field '%s' (its fields: %s)", cn,
                           name, fields);
}

int ost_instance_getattr_ex(ost_value inst, const char *name, ost_value *out) {
    if (out) *out = 0;
    if (!out || !name) return ost__value_fail(OST_EINVAL, "getattr: NULL name or out");
    if (ost_typeof(inst) != OST_T_INSTANCE)
        return ost__value_fail(OST_ETYPE, "getattr '%s' of a %s, not an instance", name,
                               ost_type_name(ost_typeof(inst)));
    ost_value cls = ost_instance_class(inst);
    if (ost__slotted(inst) && ost_class_field(cls, name) < 0)
        return ost__field_missing(cls, name);
    if (OST__O(inst)->flags & OST__F_GHOST) {
        t_msg[0] = 0;
        int rc = ost__activate(inst);
        if (rc) {
            if (!t_msg[0])
                ost__value_fail(rc, "getattr '%s': the ghost did not load (%s)%s", name,
                                ost_strerror(rc),
                                rc == OST_EINVAL ? ": its connection is closed, or belongs to "
                                                   "another thread"
                                                 : "");
            return rc;
        }
    }
    if (ost__slotted(inst)) {
        *out = ost_instance_slot(inst, (size_t)ost_class_field(cls, name));
        return 0;
    }
    ost_value st = ost_instance_state(inst);
    if (st == OST_NONE) return 0; /* no attribute set yet */
    if (ost_typeof(st) != OST_T_DICT) {
        char cn[200];
        global_text(cls, cn, sizeof cn);
        return ost__value_fail(OST_ETYPE, "getattr '%s': the state of this %s is a %s, not a dict "
                                          "of attributes",
                               name, cn, ost_type_name(ost_typeof(st)));
    }
    *out = ost_dict_get_c(st, name);
    return 0;
}

/* ---- shorter calls for the common cases ------------------------------------ */

int ost_instance_get_int(ost_value inst, const char *name, int64_t *out) {
    if (out) *out = 0;
    if (!out) return ost__value_fail(OST_EINVAL, "get_int: NULL out");
    ost_value v;
    int rc = ost_instance_getattr_ex(inst, name, &v);
    if (rc) return rc;
    if (!v) return ost__value_fail(OST_ENOTFOUND, "get_int: '%s' is not set", name);
    int t = ost_typeof(v);
    if (t != OST_T_INT && t != OST_T_BOOL)
        return ost__value_fail(OST_ETYPE, "get_int: '%s' is a %s, not an int", name,
                               ost_type_name(t));
    if (ost_int_value(v, out))
        return ost__value_fail(OST_ELIMIT, "get_int: '%s' does not fit in 64 bits", name);
    return 0;
}

ost_value ost_instance_of(ost_value cls, size_t n, const ost_value *values) {
    size_t nf = ost_typeof(cls) == OST_T_GLOBAL ? ost_class_nfields(cls) : 0;
    ost_value inst = 0;
    if (n > nf || (n && !values)) {
        ost__value_fail(OST_EINVAL, "instance_of: %zu values for a class of %zu fields", n, nf);
    } else if (!(inst = ost_instance_new(cls))) {
        cls = 0; /* stolen by ost_instance_new */
        ost__value_fail(OST_ENOMEM, "instance_of: out of memory");
    } else {
        cls = 0;
        size_t i = 0;
        for (; i < n; i++)
            if (!values[i] || ost_instance_set_slot(inst, i, values[i])) break;
        if (i == n) return inst;
        ost__value_fail(OST_EINVAL, "instance_of: value %zu is missing", i);
        for (i++; i < n; i++) ost_decref(values[i]);
        ost_decref(inst);
        return 0;
    }
    ost_decref(cls);
    for (size_t i = 0; values && i < n; i++) ost_decref(values[i]);
    return 0;
}

ost_value ost_tuple_of(size_t n, ...) {
    va_list ap;
    va_start(ap, n);
    ost_value t = ost_tuple_new(n);
    bool ok = t != 0;
    for (size_t i = 0; i < n; i++) {
        ost_value v = va_arg(ap, ost_value);
        if (!ok || !v) {
            ok = false;
            ost_decref(v);
        } else if (ost_tuple_set(t, i, v)) { /* it released v */
            ok = false;
        }
    }
    va_end(ap);
    if (ok) return t;
    ost_decref(t);
    ost__value_fail(OST_ENOMEM, "tuple_of: out of memory, or an item is missing");
    return 0;
}
