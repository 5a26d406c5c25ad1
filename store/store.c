/* The store handle: its open (the engine that claims the address, then
 * what every engine's store needs) and close, the store's counters and
 * class values. The per-thread messages are store/msg.c's.
 * Every engine's own work is behind its table (store/engine.h): LMDB's in
 * store/lmdb/, PostgreSQL's in store/pg/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "../serializer/internal.h"
#include "store_internal.h"

#define ROOT_OID 0


/* ---- open and close ------------------------------------------------------- */

void ost_store_options_init(ost_store_options *o) {
    memset(o, 0, sizeof *o);
    o->durability = OST_SYNC_FULL;
    o->max_readers = 126;
}

ost_store *ost_store_new(void) {
    ost_store *st = calloc(1, sizeof *st);
    if (!st) return NULL;
    st->magic = OST__H_STORE;
    if (uv_mutex_init(&st->lock)) {
        free(st);
        return NULL;
    }
    if (ost__msgs_init(st)) {
        uv_mutex_destroy(&st->lock);
        free(st);
        return NULL;
    }
    return st;
}

/* In a store of an engine whose open does not make the root
 * (OST__ENG_MAKES_ROOT): writes the root record when the store has none,
 * in a commit of its own. Another process that creates it at the same time
 * wins alike. */
static int ensure_root(ost_store *st) {
    const ost__engine_ops *ops = st->ops;
    ost__sess *s;
    int rc = ops->sess_open(st->eng, &s);
    if (rc) return rc;
    ost__recview r;
    rc = ops->snap_begin(s, NULL);
    if (!rc) {
        rc = ops->get(s, ROOT_OID, &r);
        ops->snap_end(s);
    }
    if (rc != OST_ENOTFOUND || st->read_only) {
        ops->sess_close(s);
        return rc == OST_ENOTFOUND ? 0 : rc; /* a read-only open reads what is there */
    }
    uint32_t cid;
    ost_writer *w = ost_writer_new();
    ost__pkg *pkg = ost__pkg_new();
    ost_value inst = 0;
    const void *p;
    size_t n;
    rc = !w || !pkg ? OST_ENOMEM : ost__root_dump(st->root_cls, w, &inst, &p, &n);
    if (!rc) rc = ost__class_id_cached(st, st->root_cls, &cid);
    if (!rc) {
        ost__pkg_reset(pkg);
        rc = ost__pkg_add(pkg, ROOT_OID, 0, cid, p, n);
    }
    if (!rc) {
        (void)ops->commit(s, &pkg, 1);
        rc = pkg->rc;
        if (rc) { /* made meanwhile by another process? */
            int grc = ops->snap_begin(s, NULL);
            if (!grc) {
                if (ops->get(s, ROOT_OID, &r) == 0) rc = 0;
                ops->snap_end(s);
            }
            if (rc) ost__st_fail(st, rc, "%s: cannot create the root: %s", st->shown, pkg->msg);
        }
    } else
        ost__st_fail(st, rc, "%s: cannot create the root: %s", st->shown, ost_strerror(rc));
    ost_decref(inst);
    ost_writer_free(w);
    ost__pkg_free(pkg);
    ops->sess_close(s);
    return rc;
}

/* What every engine's store needs before the engine opens: the classes the
 * store itself knows (the root, maps and sets; a new store's root is
 * written with it), the registry and durability. 0 or a code with the
 * message set; store_unset undoes it. */
static int store_setup(ost_store *st, const ost_store_options *opts) {
    st->read_only = opts->read_only;
    st->group_commit = opts->group_commit && !opts->read_only;
    st->durability = opts->durability;
    st->registry = opts->registry;
    ost_class_def rdef = {.module = "persistent.mapping", .name = "PersistentMapping",
                          .persistent = true};
    ost_value rc_cls = st->registry ? ost_registry_get(st->registry, rdef.module, rdef.name) : 0;
    st->root_cls = rc_cls ? ost_incref(rc_cls) : ost_class_new(&rdef);
    if (st->root_cls) ost__pers_mark(st->root_cls, OST__F_SHARED, 0); /* all connections' */
    ost_class_def mdef = {.module = "ostore.maps", .name = "OrderedMap", .persistent = true};
    st->map_cls = ost_class_new(&mdef);
    mdef.name = "OrderedSet";
    st->set_cls = ost_class_new(&mdef);
    mdef.name = "Counter";
    st->counter_cls = ost_class_new(&mdef);
    if (st->map_cls) ost__pers_mark(st->map_cls, OST__F_SHARED, 0);
    if (st->set_cls) ost__pers_mark(st->set_cls, OST__F_SHARED, 0);
    if (st->counter_cls) ost__pers_mark(st->counter_cls, OST__F_SHARED, 0);
    if (!st->root_cls || !st->map_cls || !st->set_cls || !st->counter_cls)
        return ost__st_fail(st, OST_ENOMEM, "out of memory");
    return 0;
}

static void store_unset(ost_store *st) {
    ost_decref(st->root_cls);
    ost_decref(st->map_cls);
    ost_decref(st->set_cls);
    ost_decref(st->counter_cls);
    st->root_cls = st->map_cls = st->set_cls = st->counter_cls = 0;
}

int ost_store_open(ost_store *st, const char *addr, const ost_store_options *opts) {
    ost_store_options def;
    if (!st) return OST_EINVAL;
    ost__st_clear(st);
    if (!addr) return ost__st_fail(st, OST_EINVAL, "no path given");
    if (st->eng) { /* the address as given, without a password */
        char shown[OST__PATH_SHOWN];
        ost_store_addr_show(shown, sizeof shown, addr);
        return ost__st_fail(st, OST_EINVAL, "%s: this handle is open already", shown);
    }
    if (!opts) {
        ost_store_options_init(&def);
        opts = &def;
    }
    const ost__engine_ops *ops = ost__engine_for(addr);
    if (!ops) return ost__engine_missing(st, addr);
    int rc = store_setup(st, opts);
    if (rc) {
        store_unset(st);
        return rc;
    }
    /* the engine checks the options and the address (which may hold a
     * password: it makes st->shown) */
    ost__engine *e = NULL;
    if ((rc = ops->open(&ost__store_host, st, addr, opts, &e))) {
        store_unset(st);
        return rc;
    }
    st->ops = ops;
    st->eng = e;
    snprintf(st->shown, sizeof st->shown, "%s", ops->shown(e));
    /* a format-1 store opened read-only has no map entries, even after
     * another process upgrades it */
    st->no_ments = st->read_only && st->format < 2;
    if (st->group_commit && ost__committer_start(st))
        rc = ost__st_fail(st, OST_ENOMEM, "cannot start the group committer thread");
    if (!rc && !(ops->flags & OST__ENG_MAKES_ROOT)) rc = ensure_root(st);
    if (rc) ost__store_shut(st);
    return rc;
}

void ost__store_shut(ost_store *st) {
    while (st->conns) ost__conn_detach(st->conns);
    ost__committer_stop(st);
    ost__engine *e = st->eng;
    st->eng = NULL;
    if (e) st->ops->close(e);
    ost__class_cache_free(st);
    store_unset(st);
    st->shown[0] = 0;
    st->no_ments = false;
    st->format = 0;
}

void ost_store_close(ost_store *st) {
    if (!st) return;
    ost__store_shut(st);
    uv_mutex_destroy(&st->lock);
    ost__msgs_free(st);
    free(st);
}

int ost_store_stat(ost_store *st, ost_store_stats *out) {
    if (!st || !st->eng || !out) return OST_EINVAL;
    memset(out, 0, sizeof *out);
    return st->ops->stat(st->eng, out);
}

/* ---- a store and a connection at once ------------------------------------------ */

int ost_open(const char *path, const ost_store_options *o, ost_store **st, ost_conn **c) {
    if (c) *c = NULL;
    if (st) *st = NULL;
    if (!st || !c) return OST_EINVAL;
    if (!(*st = ost_store_new())) return OST_ENOMEM;
    int rc = ost_store_open(*st, path, o);
    if (!rc && (rc = ost_conn_open(*st, c)) != 0)
        ost__st_fail(*st, rc, "opening a connection: %s", ost_strerror(rc));
    return rc;
}
