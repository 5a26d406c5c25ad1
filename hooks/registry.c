/* The class registry: module.name -> class value, open addressing. */
#include <stdlib.h>
#include <string.h>

#include "../serializer/internal.h"

struct ost_registry {
    ost__nametab tab; /* module.name -> class value (a global) */
    ost_unknown_policy policy;
};

ost_registry *ost_registry_new(void) { return calloc(1, sizeof(ost_registry)); }

static void drop_class(uint64_t v) { ost_decref((ost_value)v); }

void ost_registry_free(ost_registry *reg) {
    if (!reg) return;
    ost__nametab_free(&reg->tab, drop_class);
    free(reg);
}

static ost_value lookup(const ost_registry *reg, const char *m, const char *n) {
    ost__name_slot *s = ost__nametab_get(&reg->tab, m, strlen(m), n, strlen(n));
    return s ? (ost_value)s->val : 0;
}

int ost_registry_add(ost_registry *reg, const ost_class_def *def, ost_value *cls) {
    if (cls) *cls = 0;
    if (!reg || !def || !def->module || !def->name) return OST_EINVAL;
    if (lookup(reg, def->module, def->name)) return OST_EEXIST;
    ost_value c = ost_class_new(def);
    if (c) OST__O(c)->flags |= OST__F_SHARED; /* readers of many threads use it */
    if (!c) {
        /* tell bad definitions from memory shortage */
        for (size_t i = 0; i < def->nfields; i++) {
            if (!def->fields || !def->fields[i]) return OST_EINVAL;
            for (size_t j = 0; j < i; j++)
                if (strcmp(def->fields[i], def->fields[j]) == 0) return OST_EINVAL;
        }
        if (ost_utf8_check(def->module, strlen(def->module), NULL) ||
            ost_utf8_check(def->name, strlen(def->name), NULL))
            return OST_EINVAL;
        return OST_ENOMEM;
    }
    if (ost__nametab_put(&reg->tab, def->module, strlen(def->module), def->name,
                         strlen(def->name), (uint64_t)c)) {
        ost_decref(c);
        return OST_ENOMEM;
    }
    if (cls) *cls = c;
    return 0;
}

ost_value ost_registry_get(const ost_registry *reg, const char *module, const char *name) {
    if (!reg || !module || !name) return 0;
    return lookup(reg, module, name);
}

size_t ost_registry_count(const ost_registry *reg) { return reg ? reg->tab.count : 0; }

void ost_registry_set_policy(ost_registry *reg, ost_unknown_policy policy) {
    reg->policy = policy;
}

int ost_registry_find_global(void *ud, const char *module, const char *name, ost_value *cls) {
    ost_registry *reg = ud;
    ost_value c = lookup(reg, module, name);
    if (c) {
        *cls = ost_incref(c);
        return 0;
    }
    return reg->policy == OST_UNKNOWN_ERROR ? OST_EUNKNOWNCLASS : 0;
}

void ost_reader_set_registry(ost_reader *r, ost_registry *reg) {
    ost_reader_set_find_global(r, reg ? ost_registry_find_global : NULL, reg);
}
