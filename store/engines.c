/* The table of engines (store/engine.h, ost__engine_entry): one line per
 * engine, in the order they are asked to claim an address, LMDB last (it
 * claims every path). Adding an engine is its folder and one line here.
 * Also what the store asks of the table: which engine an address is
 * for, how an address is shown, whether it is a path. */
#include <stdio.h>
#include <string.h>

#include "store_internal.h"

extern const ost__engine_entry ost__pg_entry, ost__mem_entry, ost__lmdb_entry;

const ost__engine_entry *const ost__engines[] = {
    &ost__pg_entry,
    &ost__mem_entry,
    &ost__lmdb_entry,
    NULL,
};

/* The entry that claims addr (the last one claims every path). */
static const ost__engine_entry *entry_for(const char *addr) {
    for (size_t i = 0; ost__engines[i]; i++)
        if (ost__engines[i]->claims(addr)) return ost__engines[i];
    return NULL;
}

const ost__engine_entry *ost__engine_entry_for(const char *addr) {
    return addr ? entry_for(addr) : NULL;
}

const ost__engine_ops *ost__engine_for(const char *addr) {
    const ost__engine_entry *en = addr ? entry_for(addr) : NULL;
    return en ? en->ops : NULL;
}

int ost__engine_missing(ost_store *st, const char *addr) {
    char shown[OST__PATH_SHOWN];
    const ost__engine_entry *en = entry_for(addr);
    ost_store_addr_show(shown, sizeof shown, addr);
    if (!en) return ost__st_fail(st, OST_EINVAL, "%s: no engine takes this address", shown);
    return ost__st_fail(st, OST_EUNSUPPORTED, "%s: a %s address, and %s", shown, en->label,
                        en->missing ? en->missing : "its engine is missing");
}

bool ost_store_addr_is_path(const char *addr) {
    const ost__engine_entry *en = addr ? entry_for(addr) : NULL;
    return en && en->paths;
}

char *ost_store_addr_show(char *dst, size_t cap, const char *addr) {
    const ost__engine_entry *en = addr ? entry_for(addr) : NULL;
    if (!en || en->paths) return ost_path_show(dst, cap, addr);
    en->show(addr, dst, cap);
    return dst;
}
