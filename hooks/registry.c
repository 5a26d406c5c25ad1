/* The class registry: module.name -> class value, open addressing. */
#include <stdlib.h>
#include <string.h>

#include "../serializer/internal.h"

struct ost_registry {
    ost_value *slots; /* class values (globals), 0 = empty */
    size_t mask, count;
    ost_unknown_policy policy;
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
    if (*find_slot(reg, def->module, def->name)) return OST_EEXIST;
    if ((reg->count + 1) * 2 > reg->mask + 1 && grow(reg)) return OST_ENOMEM;
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
    *find_slot(reg, def->module, def->name) = c;
    reg->count++;
    if (cls) *cls = c;
    return 0;
}

ost_value ost_registry_get(const ost_registry *reg, const char *module, const char *name) {
    if (!reg || !module || !name) return 0;
    return *find_slot(reg, module, name);
}

size_t ost_registry_count(const ost_registry *reg) { return reg ? reg->count : 0; }

void ost_registry_set_policy(ost_registry *reg, ost_unknown_policy policy) {
    reg->policy = policy;
}

int ost_registry_find_global(void *ud, const char *module, const char *name, ost_value *cls) {
    ost_registry *reg = ud;
    ost_value c = *find_slot(reg, module, name);
    if (c) {
        *cls = ost_incref(c);
        return 0;
    }
    return reg->policy == OST_UNKNOWN_ERROR ? OST_EUNKNOWNCLASS : 0;
}

void ost_reader_set_registry(ost_reader *r, ost_registry *reg) {
    ost_reader_set_find_global(r, reg ? ost_registry_find_global : NULL, reg);
}
