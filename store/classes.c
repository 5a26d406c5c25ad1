/* The classes the store itself knows: the root's (persistent.mapping's
 * PersistentMapping) and the maps' (ostore.maps' OrderedMap, OrderedSet
 * and Counter): which they are, their values for a class table's entry,
 * and a new root's state. Values only: it calls no other file of the
 * store. */
#include <string.h>

#include "store_internal.h"

int ost__class_value(ost_store *st, const ost__classview *cv, ost_value *cls) {
    char buf[1024]; /* class_id refuses longer names */
    if (cv->mlen + cv->nlen + 2 > sizeof buf) return OST_ECORRUPT;
    char *mod = buf, *name = buf + cv->mlen + 1;
    memcpy(mod, cv->module, cv->mlen);
    mod[cv->mlen] = 0;
    memcpy(name, cv->name, cv->nlen);
    name[cv->nlen] = 0;
    /* a class version, `Name(f1,f2)` (format 4): the class is Name's */
    char *paren = strchr(name, '(');
    if (paren && cv->nlen && name[cv->nlen - 1] == ')') *paren = 0;
    if (strcmp(mod, "persistent.mapping") == 0 && strcmp(name, "PersistentMapping") == 0) {
        *cls = ost_incref(st->root_cls);
        return 0;
    }
    if (strcmp(mod, "ostore.maps") == 0 &&
        (strcmp(name, "OrderedMap") == 0 || strcmp(name, "OrderedSet") == 0)) {
        *cls = ost_incref(name[7] == 'M' ? st->map_cls : st->set_cls);
        return 0;
    }
    if (strcmp(mod, "ostore.maps") == 0 && strcmp(name, "Counter") == 0) {
        *cls = ost_incref(st->counter_cls);
        return 0;
    }
    ost_value c = st->registry ? ost_registry_get(st->registry, mod, name) : 0;
    *cls = c ? ost_incref(c) : ost_global(mod, name);
    return *cls ? 0 : OST_ENOMEM;
}

int ost__root_dump(ost_value cls, ost_writer *w, ost_value *inst, const void **p, size_t *n) {
    ost_value state = ost_dict_new(), data = ost_dict_new();
    int rc = !state || !data ? OST_ENOMEM : ost_dict_set(state, ost_str_c("data"), data);
    if (state && data) data = 0; /* the dict took it */
    *inst = rc ? 0 : ost_instance_new(ost_incref(cls));
    if (!rc && *inst) {
        ost_instance_set_state(*inst, ost_incref(state));
        rc = ost_dump_state(w, *inst, p, n);
    } else if (!rc)
        rc = OST_ENOMEM;
    ost_decref(state);
    ost_decref(data);
    return rc;
}

/* 1 for ostore.maps.OrderedMap, 2 for OrderedSet, 3 for Counter, 0 for
 * other classes: the classes whose records the store writes itself. */
int ost__map_class(ost_value cls) {
    size_t ml, nl;
    const char *m = ost_data(ost_global_module(cls), &ml);
    const char *n = ost_data(ost_global_name(cls), &nl);
    if (!m || !n || ml != 11 || memcmp(m, "ostore.maps", 11)) return 0;
    if (nl == 10 && memcmp(n, "OrderedMap", 10) == 0) return 1;
    if (nl == 10 && memcmp(n, "OrderedSet", 10) == 0) return 2;
    if (nl == 7 && memcmp(n, "Counter", 7) == 0) return OST__MC_COUNTER;
    return 0;
}

