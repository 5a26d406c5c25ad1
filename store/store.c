/* The store handle: its open (the engine that claims the address, then
 * what every engine's store needs) and close, the per-thread messages,
 * record headers and checksums, the store's counters and class values.
 * Every engine's own work is behind its table (store/engine.h): LMDB's in
 * store/lmdb/, PostgreSQL's in store/pg/. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "../serializer/internal.h"
#include "store_internal.h"

#define ROOT_OID 0


/* ---- errors ---------------------------------------------------------------- */

/* A store's message is per thread, as ost_store_errmsg promises. The
 * store keeps one buffer for each thread that failed in it (st->msgs),
 * found by the thread's number (t_tid: never given twice, unlike a
 * pthread_t), and frees them when it closes; so a thread that uses many
 * stores loses none of their messages. The thread remembers the buffer
 * it used last under the store's uid (a number no other handle of the
 * process gets, so a new handle at a freed one's address never finds a
 * freed buffer), which spares the lock on the paths that clear the
 * message before each step. Without memory for a buffer, a thread-local
 * one serves the last store that failed. */
struct ost__msg {
    uint64_t tid;
    struct ost__msg *next;
    char text[512];
};
static uint64_t g_store_uid, g_tid;
static __thread uint64_t t_tid;
static __thread struct {
    uint64_t uid;
    char *text;
} t_last;
static __thread struct {
    uint64_t uid;
    char text[512];
} t_spare;

/* The calling thread's message buffer for st (made when make is true and
 * st has none), or NULL. */
static char *msg_slot(const ost_store *cst, bool make) {
    if (t_last.uid == cst->uid) return t_last.text;
    ost_store *st = (ost_store *)cst; /* the buffers' list is not the store's state */
    if (!t_tid) t_tid = __atomic_add_fetch(&g_tid, 1, __ATOMIC_RELAXED);
    uv_mutex_lock(&st->msg_lock);
    struct ost__msg *m = st->msgs;
    while (m && m->tid != t_tid) m = m->next;
    if (!m && make && (m = malloc(sizeof *m))) {
        m->tid = t_tid;
        m->text[0] = 0;
        m->next = st->msgs;
        st->msgs = m;
    }
    uv_mutex_unlock(&st->msg_lock);
    if (m) {
        t_last.uid = st->uid;
        t_last.text = m->text;
        return m->text;
    }
    if (t_spare.uid == st->uid) return t_spare.text;
    if (!make) return NULL;
    t_spare.uid = st->uid;
    t_spare.text[0] = 0;
    return t_spare.text;
}

void ost__st_clear(ost_store *st) {
    char *m = msg_slot(st, false);
    if (m) m[0] = 0;
}

int ost__st_vfail(ost_store *st, int code, const char *fmt, va_list ap) {
    ost__vfmt(msg_slot(st, true), sizeof t_spare.text, fmt, ap);
    return code;
}

int ost__st_fail(ost_store *st, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__st_vfail(st, code, fmt, ap);
    va_end(ap);
    return code;
}

int ost__c_fail(ost_conn *c, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
    return code;
}

const char *ost_store_errmsg(const ost_store *st) {
    const char *m = st ? msg_slot(st, false) : NULL;
    return m ? m : "";
}
const char *ost_conn_errmsg(const ost_conn *c) { return c ? c->msg : ""; }

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
    st->uid = __atomic_add_fetch(&g_store_uid, 1, __ATOMIC_RELAXED);
    if (uv_mutex_init(&st->lock)) {
        free(st);
        return NULL;
    }
    if (uv_mutex_init(&st->msg_lock)) {
        uv_mutex_destroy(&st->lock);
        free(st);
        return NULL;
    }
    return st;
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
    for (struct ost__msg *m = st->msgs, *next; m; m = next) {
        next = m->next;
        free(m);
    }
    uv_mutex_destroy(&st->msg_lock);
    free(st);
}

int ost_store_stat(ost_store *st, ost_store_stats *out) {
    if (!st || !st->eng || !out) return OST_EINVAL;
    memset(out, 0, sizeof *out);
    return st->ops->stat(st->eng, out);
}

/* ---- classes ------------------------------------------------------------------ */

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

const char *ost_errmsg(const void *handle) {
    if (!handle) return ost_value_errmsg();
    switch (*(const uint32_t *)handle) {
    case OST__H_WRITER: return ost_writer_errmsg(handle);
    case OST__H_READER: return ost_reader_errmsg(handle);
    case OST__H_STORE: return ost_store_errmsg(handle);
    case OST__H_CONN: return ost_conn_errmsg(handle);
    case OST__H_LOADER: return ost_loader_errmsg(handle);
    case OST__H_SNAP: return ost_snap_errmsg(handle);
    default: return "ost_errmsg: not an ostore handle";
    }
}
