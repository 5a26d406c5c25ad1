/* The class registry: module.name -> class value, open addressing; and a
 * short list of class aliases (former names of registered classes),
 * searched after the table misses. */
#include <stdlib.h>
#include <string.h>

#include "../serializer/internal.h"

typedef struct {
    char *module, *name; /* one block: module NUL name NUL */
    ost_value cls;       /* a class of the table (borrowed from it) */
} alias;

struct ost_registry {
    ost__nametab tab; /* module.name -> class value (a global) */
    ost_unknown_policy policy;
    alias *aliases;
    size_t naliases, capaliases;
};

ost_registry *ost_registry_new(void) { return calloc(1, sizeof(ost_registry)); }

static void drop_class(uint64_t v) { ost_decref((ost_value)v); }

void ost_registry_free(ost_registry *reg) {
    if (!reg) return;
    ost__nametab_free(&reg->tab, drop_class);
    for (size_t i = 0; i < reg->naliases; i++) free(reg->aliases[i].module);
    free(reg->aliases);
    free(reg);
}

static const alias *find_alias(const ost_registry *reg, const char *m, const char *n) {
    for (size_t i = 0; i < reg->naliases; i++)
        if (strcmp(reg->aliases[i].module, m) == 0 && strcmp(reg->aliases[i].name, n) == 0)
            return &reg->aliases[i];
    return NULL;
}

/* The class module.name names directly (borrowed), or 0. */
static ost_value lookup_own(const ost_registry *reg, const char *m, const char *n) {
    ost__name_slot *s = ost__nametab_get(&reg->tab, m, strlen(m), n, strlen(n));
    return s ? (ost_value)s->val : 0;
}

/* The class module.name names, directly or as an alias (borrowed), or 0. */
static ost_value lookup(const ost_registry *reg, const char *m, const char *n) {
    ost_value c = lookup_own(reg, m, n);
    if (c || !reg->naliases) return c;
    const alias *a = find_alias(reg, m, n);
    return a ? a->cls : 0;
}

int ost_registry_add(ost_registry *reg, const ost_class_def *def, ost_value *cls) {
    if (cls) *cls = 0;
    if (!reg || !def || !def->module || !def->name) return OST_EINVAL;
    if (lookup(reg, def->module, def->name)) return OST_EEXIST;
    ost_value c = ost_class_new(def);
    if (c) OST__O(c)->flags |= OST__F_SHARED; /* readers of many threads use it */
    if (!c) return ost__class_def_ok(def) ? OST_ENOMEM : OST_EINVAL;
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

int ost_registry_alias(ost_registry *reg, const char *module, const char *name, ost_value cls) {
    if (!reg || !module || !name || ost__type(cls) != OST_T_GLOBAL) return OST_EINVAL;
    ost_value mine = lookup_own(reg, ost_data(ost_global_module(cls), NULL),
                                ost_data(ost_global_name(cls), NULL));
    if (mine != cls) return OST_EINVAL; /* not a class of this registry */
    if (lookup(reg, module, name)) return OST_EEXIST;
    size_t ml = strlen(module), nl = strlen(name);
    if (ost_utf8_check(module, ml, NULL) || ost_utf8_check(name, nl, NULL) || !ost__name_ok(name))
        return OST_EINVAL;
    if (ost__reserve((void **)&reg->aliases, &reg->capaliases, reg->naliases + 1,
                     sizeof *reg->aliases, 4))
        return OST_ENOMEM;
    char *b = malloc(ml + nl + 2);
    if (!b) return OST_ENOMEM;
    memcpy(b, module, ml + 1);
    memcpy(b + ml + 1, name, nl + 1);
    reg->aliases[reg->naliases++] = (alias){b, b + ml + 1, cls};
    return 0;
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
