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
    ost_value *slots; /* class values (globals), 0 = empty */
    size_t mask, count;
    ost_unknown_policy policy;
    alias *aliases;
    size_t naliases, capaliases;
};

static uint64_t name_hash(const char *m, const char *n) {
    uint64_t h = 1469598103934665603ULL;
    for (; *m; m++) h = (h ^ (uint8_t)*m) * 1099511628211ULL;
    h = (h ^ 0xff) * 1099511628211ULL;
    for (; *n; n++) h = (h ^ (uint8_t)*n) * 1099511628211ULL;
    return h;
}

static const char *gmod(ost_value g) { return ost_data(ost_global_module(g), NULL); }
static const char *gname(ost_value g) { return ost_data(ost_global_name(g), NULL); }

ost_registry *ost_registry_new(void) {
    ost_registry *reg = calloc(1, sizeof *reg);
    if (!reg) return NULL;
    reg->slots = calloc(16, sizeof *reg->slots);
    if (!reg->slots) {
        free(reg);
        return NULL;
    }
    reg->mask = 15;
    return reg;
}

void ost_registry_free(ost_registry *reg) {
    if (!reg) return;
    for (size_t i = 0; i <= reg->mask; i++) ost_decref(reg->slots[i]);
    for (size_t i = 0; i < reg->naliases; i++) free(reg->aliases[i].module);
    free(reg->aliases);
    free(reg->slots);
    free(reg);
}

static ost_value *find_slot(const ost_registry *reg, const char *m, const char *n) {
    size_t i = (size_t)name_hash(m, n) & reg->mask;
    for (;;) {
        ost_value *s = &reg->slots[i];
        if (!*s || (strcmp(gmod(*s), m) == 0 && strcmp(gname(*s), n) == 0)) return s;
        i = (i + 1) & reg->mask;
    }
}

static const alias *find_alias(const ost_registry *reg, const char *m, const char *n) {
    for (size_t i = 0; i < reg->naliases; i++)
        if (strcmp(reg->aliases[i].module, m) == 0 && strcmp(reg->aliases[i].name, n) == 0)
            return &reg->aliases[i];
    return NULL;
}

/* The class module.name names, directly or as an alias (borrowed), or 0. */
static ost_value lookup(const ost_registry *reg, const char *m, const char *n) {
    ost_value c = *find_slot(reg, m, n);
    if (c || !reg->naliases) return c;
    const alias *a = find_alias(reg, m, n);
    return a ? a->cls : 0;
}

static int grow(ost_registry *reg) {
    size_t n = (reg->mask + 1) * 2;
    ost_value *s = calloc(n, sizeof *s);
    if (!s) return OST_ENOMEM;
    ost_registry old = *reg;
    reg->slots = s;
    reg->mask = n - 1;
    for (size_t i = 0; i <= old.mask; i++)
        if (old.slots[i]) *find_slot(reg, gmod(old.slots[i]), gname(old.slots[i])) = old.slots[i];
    free(old.slots);
    return 0;
}

int ost_registry_add(ost_registry *reg, const ost_class_def *def, ost_value *cls) {
    if (cls) *cls = 0;
    if (!reg || !def || !def->module || !def->name) return OST_EINVAL;
    if (lookup(reg, def->module, def->name)) return OST_EEXIST;
    if ((reg->count + 1) * 2 > reg->mask + 1 && grow(reg)) return OST_ENOMEM;
    ost_value c = ost_class_new(def);
    if (c) OST__O(c)->flags |= OST__F_SHARED; /* readers of many threads use it */
    if (!c) return ost__class_def_ok(def) ? OST_ENOMEM : OST_EINVAL;
    *find_slot(reg, def->module, def->name) = c;
    reg->count++;
    if (cls) *cls = c;
    return 0;
}

ost_value ost_registry_get(const ost_registry *reg, const char *module, const char *name) {
    if (!reg || !module || !name) return 0;
    return lookup(reg, module, name);
}

int ost_registry_alias(ost_registry *reg, const char *module, const char *name, ost_value cls) {
    if (!reg || !module || !name || ost__type(cls) != OST_T_GLOBAL) return OST_EINVAL;
    ost_value mine = *find_slot(reg, ost_data(ost_global_module(cls), NULL),
                                ost_data(ost_global_name(cls), NULL));
    if (mine != cls) return OST_EINVAL; /* not a class of this registry */
    if (lookup(reg, module, name)) return OST_EEXIST;
    size_t ml = strlen(module), nl = strlen(name);
    if (ost_utf8_check(module, ml, NULL) || ost_utf8_check(name, nl, NULL)) return OST_EINVAL;
    if (reg->naliases == reg->capaliases) {
        size_t cap = reg->capaliases ? reg->capaliases * 2 : 4;
        alias *a = realloc(reg->aliases, cap * sizeof *a);
        if (!a) return OST_ENOMEM;
        reg->aliases = a;
        reg->capaliases = cap;
    }
    char *b = malloc(ml + nl + 2);
    if (!b) return OST_ENOMEM;
    memcpy(b, module, ml + 1);
    memcpy(b + ml + 1, name, nl + 1);
    reg->aliases[reg->naliases++] = (alias){b, b + ml + 1, cls};
    return 0;
}

size_t ost_registry_count(const ost_registry *reg) { return reg ? reg->count : 0; }

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
