/* The LMDB engine's table of operations (store/engine.h): snapshots,
 * reads, class ids, oid blocks, commits of packages (conflict checks,
 * records, the txlog, last_serial), the sweep of a pack, the page checks
 * of pack and check, and map entries, on the environment env.c opens.
 * Every result leaves here as an OST_E* code. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "import.h"
#include "salvage.h"

/* ---- the engine object ------------------------------------------------------------ */

/* A path is LMDB's: every address no engine before it in the table
 * claims (store/engines.c). */
static bool lmdb_claims(const char *addr) { return addr != NULL; }

/* env.c opens the environment and makes the engine object (en from
 * then on), and closes both. */
static int lmdb_open(const ost__host *host, ost_store *st, const char *addr,
                     const ost_store_options *o, ost__engine **out) {
    return ost__lmdb_env_open(host, st, addr, o, out);
}

static const char *lmdb_shown(ost__engine *e) { return e->shown; }

static const char *lmdb_path(ost__engine *e) { return e->path; }

static void lmdb_close(ost__engine *e) { ost__lmdb_env_close(e); }

static int lmdb_stat(ost__engine *e, ost_store_stats *out) { return ost__lmdb_stat(e, out); }

/* ---- sessions and snapshots --------------------------------------------------------- */

static int lmdb_sess_open(ost__engine *e, ost__sess **out) {
    ost__sess *s = calloc(1, sizeof *s);
    if (!s) return ost__lmdb_fail(e, OST_ENOMEM, "%s: out of memory", e->shown);
    s->e = e;
    *out = s;
    return 0;
}

static void unlist(ost__sess *s) {
    if (!s->listed) return;
    uv_mutex_lock(&s->e->lock);
    for (ost__sess **pp = &s->e->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    s->listed = false;
    uv_mutex_unlock(&s->e->lock);
}

static void lmdb_sess_close(ost__sess *s) {
    if (!s) return;
    uv_rwlock_rdlock(&s->e->maplock);
    if (s->rtxn) mdb_txn_abort(s->rtxn);
    s->rtxn = NULL;
    s->live = false;
    uv_rwlock_rdunlock(&s->e->maplock);
    unlist(s);
    ost__gd_unbind(s->gd);
    uv_mutex_lock(&s->e->lock);
    ost__gd *old = s->e->spare_gd;
    s->e->spare_gd = s->gd;
    uv_mutex_unlock(&s->e->lock);
    ost__gd_free(old);
    free(s);
}

void ost__lmdb_sess_reset_all(ost__engine *en) {
    if (!en) return;
    uv_mutex_lock(&en->lock);
    for (ost__sess *s = en->sessions; s; s = s->next)
        if (s->live) {
            mdb_txn_reset(s->rtxn);
            s->live = false;
            ost__gd_unbind(s->gd);
        }
    uv_mutex_unlock(&en->lock);
}

static int fail_mdb(ost__sess *s, int rc, const char *what) {
    s->mdb_rc = rc;
    return ost__lmdb_fail(s->e, ost__mdb_code(rc), "%s: %s: %s", s->e->shown, what,
                        ost__mdb_strerror(s->e, rc));
}

/* A damaged snapshot, as the guard (guard.h) found it: the store's
 * message, prefixed by what was being read. */
static int damaged(ost__sess *s, int rc, const char *what) {
    if (rc != OST_ECORRUPT) return ost__lmdb_fail(s->e, rc, "%s: %s: %s", s->e->shown, what, ost_strerror(rc));
    return ost__lmdb_fail(s->e, OST_ECORRUPT,
                        "%s: %s: damaged store: %s ('ostore check' lists the damage, 'ostore "
                        "salvage' copies what is intact)",
                        s->e->shown, what, ost__gd_msg(s->gd));
}

/* Binds the session's guard to its just (re)opened read transaction: 0,
 * 1 (renew and try again: guard.h), or a code with the message set. */
static int bind_guard(ost__sess *s) {
    if (!s->gd) { /* the last closed session's, whose checks may still hold */
        uv_mutex_lock(&s->e->lock);
        s->gd = s->e->spare_gd;
        s->e->spare_gd = NULL;
        uv_mutex_unlock(&s->e->lock);
    }
    if (!s->gd) {
        int rc = ost__gd_new(s->e, &s->gd);
        if (rc) return ost__lmdb_fail(s->e, rc, "%s: out of memory", s->e->shown);
    }
    int rc = ost__gd_bind(s->gd, s->rtxn);
    if (rc < 0) return damaged(s, rc, "cannot read the snapshot");
    return rc;
}

static void format_refresh(ost__sess *s);

/* Pins the snapshot: takes the maplock for reading (so no resize unmaps
 * what reads return) with the snapshot open, reopened when a resize closed
 * it since the last pin. Pins nest; the caller unpins whatever the result.
 * Inside commit the write transaction is open and the maplock held. */
static int lock_snap(ost__sess *s) {
    ost__engine *en = s->e;
    if (s->wtxn) return 0;
    if (s->pins++) return s->live ? 0 : ost__lmdb_fail(en, OST_EINVAL, "%s: no snapshot is open", en->shown);
    for (int tries = 0;; tries++) {
        uv_rwlock_rdlock(&en->maplock);
        if (s->live) return 0;
        if (!s->in_snap) return ost__lmdb_fail(en, OST_EINVAL, "%s: no snapshot is open", en->shown);
        int rc = s->rtxn ? mdb_txn_renew(s->rtxn) : mdb_txn_begin(en->env, NULL, MDB_RDONLY, &s->rtxn);
        if (!rc) {
            int grc = bind_guard(s);
            if (grc) {
                mdb_txn_reset(s->rtxn);
                if (grc != 1) return grc;
                if (tries == 8)
                    return ost__lmdb_fail(en, OST_EBUSY,
                                        "%s: cannot start a read transaction: its meta page was "
                                        "rewritten at each of 8 tries (writers commit too fast)",
                                        en->shown);
                uv_rwlock_rdunlock(&en->maplock);
                continue;
            }
            s->live = true;
            s->gen++;
            if (s->began) s->moved = true; /* reopened inside the snapshot */
            s->began = true;
            if (!s->listed) {
                uv_mutex_lock(&en->lock);
                s->next = s->e->sessions;
                s->e->sessions = s;
                s->listed = true;
                uv_mutex_unlock(&en->lock);
            }
            format_refresh(s);
            return 0;
        }
        if (s->rtxn) {
            mdb_txn_abort(s->rtxn);
            s->rtxn = NULL;
        }
        if (rc != MDB_MAP_RESIZED || tries == 8) return fail_mdb(s, rc, "cannot start a read transaction");
        uv_rwlock_rdunlock(&en->maplock);
        if ((rc = ost__remap(en, rc))) {
            uv_rwlock_rdlock(&en->maplock);
            return fail_mdb(s, rc, "adopting the map another process grew");
        }
    }
}

static void unlock(ost__sess *s) {
    if (!s->wtxn && !--s->pins) uv_rwlock_rdunlock(&s->e->maplock);
}

static int lmdb_pin(ost__sess *s) {
    int rc = lock_snap(s);
    if (rc) unlock(s); /* nothing stays pinned on failure */
    return rc;
}
static void lmdb_unpin(ost__sess *s) { unlock(s); }

static MDB_txn *txn_of(ost__sess *s) { return s->wtxn ? s->wtxn : s->rtxn; }

/* A get from database db (OST__GD_*; dbi its handle): through the guard in
 * the read snapshot, through liblmdb in the write transaction. 0,
 * MDB_NOTFOUND, an LMDB code, or OST_ECORRUPT (the guard's message). */
static int sget(ost__sess *s, int db, MDB_dbi dbi, MDB_val *k, MDB_val *v) {
    if (s->wtxn) return mdb_get(s->wtxn, dbi, k, v);
    int rc = ost__gd_get(s->gd, db, k->mv_data, k->mv_size, v);
    return rc == OST_ENOTFOUND ? MDB_NOTFOUND : rc;
}

/* A counter of the meta table; 0 when absent or damaged. */
static uint64_t meta_u64(ost__sess *s, const char *key) {
    MDB_val k = {strlen(key), (void *)key}, v;
    if (sget(s, OST__GD_META, s->e->meta, &k, &v) || v.mv_size != 8) return 0;
    return ost__rd_le64(v.mv_data);
}

/* The store's format, as the snapshot's meta table says (store_internal.h:
 * a store another process upgrades is read by its new format). */
static void format_refresh(ost__sess *s) {
    ost__engine *en = s->e;
    if (__atomic_load_n(&en->format, __ATOMIC_RELAXED) >= OST_STORE_FORMAT) return;
    ost__format_seen(en, meta_u64(s, "format"));
}

static int lmdb_snap_begin(ost__sess *s, ost__snapinfo *info) {
    if (s->in_snap || s->wtxn)
        return ost__lmdb_fail(s->e, OST_EINVAL, "%s: the session has a snapshot or a write open",
                            s->e->shown);
    s->in_snap = true;
    s->moved = false;
    s->began = false;
    int rc = lock_snap(s);
    if (!rc && info) {
        info->last_serial = meta_u64(s, "last_serial");
        info->low = meta_u64(s, "low");
        info->next_oid = meta_u64(s, "next_oid");
    }
    unlock(s);
    if (rc) s->in_snap = false;
    return rc;
}

static void lmdb_snap_end(ost__sess *s) {
    bool lock = !s->pins; /* pinned: the maplock is held already */
    if (lock) uv_rwlock_rdlock(&s->e->maplock);
    if (s->live) mdb_txn_reset(s->rtxn);
    s->live = false;
    s->in_snap = false;
    ost__gd_unbind(s->gd);
    if (lock) uv_rwlock_rdunlock(&s->e->maplock);
}

static bool lmdb_snap_moved(ost__sess *s) {
    bool m = s->moved;
    s->moved = false;
    return m;
}

/* ---- reads ------------------------------------------------------------------------ */

/* Reads oid's record in the session's transaction into r. */
static int get_in(ost__sess *s, uint64_t oid, ost__recview *r) {
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v;
    int rc = sget(s, OST__GD_RECS, s->e->recs, &k, &v);
    if (rc == OST_ECORRUPT) {
        char what[48];
        snprintf(what, sizeof what, "oid %llu", (unsigned long long)oid);
        return damaged(s, rc, what);
    }
    if (rc == MDB_NOTFOUND)
        return ost__lmdb_fail(s->e, OST_ENOTFOUND, "oid %llu: no such object",
                            (unsigned long long)oid);
    if (rc) return fail_mdb(s, rc, "reading a record");
    int dmg = ost__rec_open(s->e, oid, &v, &r->serial, &r->cid);
    if (dmg)
        return ost__lmdb_fail(s->e, OST_ECORRUPT, "%s: oid %llu: damaged record (%s)",
                            s->e->shown, (unsigned long long)oid, ost__damage_text(dmg));
    r->pickle = (const uint8_t *)v.mv_data + OST_HDR_SIZE;
    r->len = v.mv_size - OST_HDR_SIZE;
    r->damage = NULL;
    r->stored = 0;
    return 0;
}

static int lmdb_get(ost__sess *s, uint64_t oid, ost__recview *r) {
    int rc = lock_snap(s);
    if (!rc) rc = get_in(s, oid, r);
    unlock(s);
    return rc;
}

static int lmdb_get_many(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    int rc = lock_snap(s);
    for (size_t i = 0; !rc && i < n; i++) {
        ost__recview r;
        rc = get_in(s, oids[i], &r);
        if (rc == OST_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (!rc) rc = fn(ud, oids[i], &r);
    }
    unlock(s);
    return rc;
}

/* A cursor of the session's transaction over one database: the guard's in
 * the read snapshot, liblmdb's in the write transaction. Results as
 * liblmdb's (MDB_NOTFOUND at the end), or OST_ECORRUPT from the guard. */
typedef struct {
    MDB_cursor *mc;
    ost__gdcur gc;
} scur;

static int scur_open(ost__sess *s, int db, MDB_dbi dbi, scur *c) {
    c->mc = NULL;
    if (s->wtxn) return mdb_cursor_open(s->wtxn, dbi, &c->mc);
    ost__gdcur_init(&c->gc, s->gd, db);
    return 0;
}

static int scur_get(scur *c, MDB_val *k, MDB_val *v, MDB_cursor_op op) {
    if (c->mc) return mdb_cursor_get(c->mc, k, v, op);
    int rc = op == MDB_SET_RANGE ? ost__gdcur_seek(&c->gc, k->mv_data, k->mv_size, k, v)
             : op == MDB_NEXT    ? ost__gdcur_next(&c->gc, k, v)
                                 : OST_EINVAL;
    return rc == OST_ENOTFOUND ? MDB_NOTFOUND : rc;
}

static void scur_close(scur *c) {
    if (c->mc) mdb_cursor_close(c->mc);
}

/* A cursor's failure: the guard's damage, or liblmdb's code. */
static int scur_fail(ost__sess *s, int rc, const char *what) {
    return OST__OURS(rc) ? damaged(s, rc, what) : fail_mdb(s, rc, what);
}

static int lmdb_scan(ost__sess *s, uint64_t from, uint64_t to, ost__rec_fn fn, void *ud) {
    int rc = lock_snap(s);
    scur cur;
    if (!rc && (rc = scur_open(s, OST__GD_RECS, s->e->recs, &cur))) rc = fail_mdb(s, rc, "scan");
    if (!rc) {
        uint8_t kb[8];
        ost__be64(kb, from);
        MDB_val k = {8, kb}, v;
        int mrc;
        uint64_t last = from; /* the scan is at or after it */
        for (mrc = scur_get(&cur, &k, &v, MDB_SET_RANGE); mrc == 0 && !rc;
             mrc = scur_get(&cur, &k, &v, MDB_NEXT)) {
            if (k.mv_size != 8) {
                /* a record that cannot be named: stop rather than pass it
                 * over (an iterator must not skip records silently) */
                rc = ost__lmdb_fail(s->e, OST_ECORRUPT,
                                  "%s: records: a key of %zu bytes (not an oid: damaged) after "
                                  "oid %llu ('ostore check' lists the damage)",
                                  s->e->shown, k.mv_size, (unsigned long long)last);
                break;
            }
            uint64_t oid = ost__rd_be64(k.mv_data);
            last = oid;
            if (to && oid >= to) break;
            ost__recview r = {0};
            if (!v.mv_data) { /* its node is damaged: the guard says how */
                damaged(s, OST_ECORRUPT, "reading the records");
                ost__lmdb_fail(s->e, OST_ECORRUPT, "%s: oid %llu: damaged record (%s)", s->e->shown,
                             (unsigned long long)oid, ost__gd_msg(s->gd));
                r = (ost__recview){.damage = "its node in the page is damaged", .stored = 0};
                rc = fn(ud, oid, &r);
                continue;
            }
            int dmg = ost__rec_open(s->e, oid, &v, &r.serial, &r.cid);
            if (dmg) {
                ost__lmdb_fail(s->e, OST_ECORRUPT, "%s: oid %llu: damaged record (%s)",
                             s->e->shown, (unsigned long long)oid, ost__damage_text(dmg));
                r = (ost__recview){.damage = ost__damage_text(dmg), .stored = v.mv_size};
            } else {
                r.pickle = (const uint8_t *)v.mv_data + OST_HDR_SIZE;
                r.len = v.mv_size - OST_HDR_SIZE;
            }
            rc = fn(ud, oid, &r);
        }
        if (!rc && mrc && mrc != MDB_NOTFOUND) rc = scur_fail(s, mrc, "reading the records");
        scur_close(&cur);
    }
    unlock(s);
    return rc;
}

static int lmdb_changes(ost__sess *s, uint64_t after, uint64_t upto,
                        void (*fn)(void *ud, uint64_t oid, uint64_t serial), void *ud,
                        bool *gap) {
    *gap = false;
    if (upto <= after) return 0;
    int rc = lock_snap(s);
    if (rc) {
        unlock(s);
        return rc;
    }
    /* serials of commits that changed no existing object have no entry,
     * so a gap is told by the log's low-water mark */
    if (meta_u64(s, "low") > after + 1) {
        *gap = true;
        unlock(s);
        return 0;
    }
    scur cur;
    if ((rc = scur_open(s, OST__GD_TXLOG, s->e->txlog, &cur))) {
        rc = fail_mdb(s, rc, "reading the txlog");
        unlock(s);
        return rc;
    }
    uint8_t kb[8];
    ost__be64(kb, after + 1);
    MDB_val k = {8, kb}, v;
    bool said = false; /* rc's message is set */
    for (rc = scur_get(&cur, &k, &v, MDB_SET_RANGE); rc == 0;
         rc = scur_get(&cur, &k, &v, MDB_NEXT)) {
        if (k.mv_size != 8) {
            rc = ost__lmdb_fail(s->e, OST_ECORRUPT, "%s: txlog: a key of %zu bytes (damaged)",
                              s->e->shown, k.mv_size);
            said = true;
            break;
        }
        uint64_t serial = ost__rd_be64(k.mv_data);
        if (serial > upto) break;
        if (!v.mv_data) {
            rc = damaged(s, OST_ECORRUPT, "reading the txlog");
            said = true;
            break;
        }
        for (size_t off = 0; off + 8 <= v.mv_size; off += 8)
            fn(ud, ost__rd_be64((uint8_t *)v.mv_data + off), serial);
    }
    scur_close(&cur);
    rc = said ? rc
         : rc && rc != MDB_NOTFOUND       ? scur_fail(s, rc, "reading the txlog")
                                          : 0;
    unlock(s);
    return rc;
}

/* A class table value (module NUL name) as a view; false when damaged. */
static bool class_view(uint32_t id, const MDB_val *v, ost__classview *out) {
    const char *m = v->mv_data;
    const char *z = memchr(m, 0, v->mv_size);
    if (!z || z == m || (size_t)(z - m) + 1 >= v->mv_size) return false;
    *out = (ost__classview){id, m, z + 1, (size_t)(z - m), v->mv_size - (size_t)(z - m) - 1};
    return true;
}

static int lmdb_class_get(ost__sess *s, uint32_t id, ost__classview *out) {
    int rc = lock_snap(s);
    if (!rc) {
        char ikey[5] = {'i'};
        memcpy(ikey + 1, &id, 4);
        MDB_val k = {5, ikey}, v;
        rc = sget(s, OST__GD_CLASSES, s->e->classes, &k, &v);
        if (rc == MDB_NOTFOUND)
            rc = ost__lmdb_fail(s->e, OST_ENOTFOUND, "%s: no class %u", s->e->shown, id);
        else if (rc)
            rc = scur_fail(s, rc, "reading the class table");
        else if (!class_view(id, &v, out))
            rc = ost__lmdb_fail(s->e, OST_ECORRUPT, "%s: class %u: damaged entry", s->e->shown,
                              id);
    }
    unlock(s);
    return rc;
}

static int cmp_classview(const void *a, const void *b) {
    uint32_t x = ((const ost__classview *)a)->id, y = ((const ost__classview *)b)->id;
    return x < y ? -1 : x > y;
}

static int lmdb_class_each(ost__sess *s, int (*fn)(void *ud, const ost__classview *c), void *ud) {
    int rc = lock_snap(s);
    scur cur;
    ost__classview *all = NULL;
    size_t n = 0, cap = 0;
    if (!rc && (rc = scur_open(s, OST__GD_CLASSES, s->e->classes, &cur)))
        rc = fail_mdb(s, rc, "reading the class table");
    if (!rc) {
        /* keys 'i' + the id in host order, which is not id order: the views
         * (into the snapshot) are gathered and sorted */
        char ikey[1] = {'i'};
        MDB_val k = {1, ikey}, v;
        int mrc;
        for (mrc = scur_get(&cur, &k, &v, MDB_SET_RANGE); mrc == 0 && !rc;
             mrc = scur_get(&cur, &k, &v, MDB_NEXT)) {
            if (k.mv_size != 5 || ((char *)k.mv_data)[0] != 'i') break;
            uint32_t id;
            memcpy(&id, (char *)k.mv_data + 1, 4);
            if (ost__reserve((void **)&all, &cap, n + 1, sizeof *all, 16)) {
                rc = ost__lmdb_fail(s->e, OST_ENOMEM, "%s: out of memory", s->e->shown);
                break;
            }
            if (!v.mv_data) {
                rc = damaged(s, OST_ECORRUPT, "reading the class table");
                break;
            }
            if (class_view(id, &v, &all[n])) n++;
        }
        if (!rc && mrc && mrc != MDB_NOTFOUND) rc = scur_fail(s, mrc, "reading the class table");
        scur_close(&cur);
    }
    if (!rc && n) qsort(all, n, sizeof *all, cmp_classview);
    for (size_t i = 0; !rc && i < n; i++) rc = fn(ud, &all[i]);
    free(all);
    unlock(s);
    return rc;
}

/* ---- class ids and oid blocks ------------------------------------------------------ */

struct class_try {
    const char *m, *n;
    size_t ml, nl;
    bool create;
    uint32_t *id;
    char dmg[256]; /* the damage ost__gd_check_tables found */
};

static int class_try(ost__engine *en, MDB_txn *t, void *ud) {
    struct class_try *ct = ud;
    if (!ct->create) {
        /* a read transaction of liblmdb's: the class table's pages are
         * checked first (guard.h) */
        int rc = ost__gd_check_tables(en, t, ct->dmg, sizeof ct->dmg);
        if (rc) return rc == OST_ECORRUPT ? OST__PAGE_DAMAGE : rc;
        return ost__class_find_name(en, t, ct->m, ct->ml, ct->n, ct->nl, ct->id);
    }
    return ost__class_id_name(en, t, ct->m, ct->ml, ct->n, ct->nl, ct->id);
}

static int lmdb_class_id(ost__engine *e, const char *module, size_t mlen, const char *name,
                         size_t nlen, bool create, uint32_t *id) {
    ost__engine *en = e;
    if (!module || !name || !mlen || !nlen || mlen + nlen + 2 > 1000)
        return ost__lmdb_fail(en, OST_EINVAL, "%s: bad class name", en->shown);
    if (create && en->read_only)
        return ost__lmdb_fail(en, OST_EREADONLY, "%s: read-only: cannot add class %.*s.%.*s",
                            en->shown, (int)mlen, module, (int)nlen, name);
    struct class_try ct = {module, name, mlen, nlen, create, id, {0}};
    int rc = ost__lmdb_txn_retry(en, create ? 0 : MDB_RDONLY, class_try, &ct);
    if (rc == OST__PAGE_DAMAGE)
        return ost__lmdb_fail(en, OST_ECORRUPT, "%s: class %.*s.%.*s: damaged store: %s ('ostore "
                            "check' lists the damage)", en->shown, (int)mlen, module, (int)nlen,
                            name, ct.dmg);
    if (OST__OURS(rc)) return ost__lmdb_fail(en, rc, "%s: class %.*s.%.*s: %s", en->shown, (int)mlen,
                                           module, (int)nlen, name, ost_strerror(rc));
    if (rc == MDB_NOTFOUND)
        return ost__lmdb_fail(en, OST_ENOTFOUND, "%s: no class %.*s.%.*s", en->shown, (int)mlen,
                            module, (int)nlen, name);
    if (rc)
        return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: class %.*s.%.*s: %s", en->shown,
                            (int)mlen, module, (int)nlen, name, ost__mdb_strerror(en, rc));
    return 0;
}

/* ---- oid blocks ---------------------------------------------------------------- */

/* Moves meta.next_oid on by want in t: 0; OST_ECORRUPT when meta.next_oid
 * is past OST__OID_LIMIT (damage: the block would wrap to oids in use),
 * OST_ELIMIT when the block would pass it; or an LMDB code. */
struct oid_try {
    uint64_t want, first;
};

static int oid_try(ost__engine *en, MDB_txn *t, void *ud) {
    struct oid_try *ot = ud;
    MDB_val k = {8, "next_oid"}, v;
    int rc = mdb_get(t, en->meta, &k, &v);
    if (!rc && v.mv_size != 8) rc = MDB_CORRUPTED;
    if (rc) return rc;
    uint64_t next = ost__rd_le64(v.mv_data);
    /* damaged meta (or 2^63 oids): the block would wrap to oids in use */
    if (next > OST__OID_LIMIT) return OST_ECORRUPT;
    if (ot->want > OST__OID_LIMIT - next) return OST_ELIMIT;
    uint8_t b[8];
    ost__le64(b, next + ot->want);
    MDB_val nv = {8, b};
    rc = mdb_put(t, en->meta, &k, &nv, 0);
    if (!rc) ot->first = next;
    return rc;
}

/* Takes want oids from meta.next_oid in a write transaction of its own:
 * the caller owns [*first, *first + want). Thread safe. The message of a
 * failure is worded from LMDB's own result, so that a write cut short by a
 * full disk (EIO from mdb_page_flush) says so. */
static int lmdb_reserve_oids(ost__engine *e, uint64_t want, uint64_t *first) {
    ost__engine *en = e;
    if (en->read_only) return OST_EREADONLY;
    struct oid_try ot = {want, 0};
    int rc = ost__lmdb_txn_retry(en, 0, oid_try, &ot);
    if (!rc) {
        *first = ot.first;
        return 0;
    }
    if (rc == OST_ELIMIT)
        return ost__lmdb_fail(en, rc, "%s: no %llu more oids below 2^63", en->shown,
                            (unsigned long long)want);
    if (OST__OURS(rc))
        return ost__lmdb_fail(en, rc, "%s: reserving oids: %s", en->shown, ost_strerror(rc));
    return ost__lmdb_fail(en, ost__mdb_code(rc), "%s: reserving oids: %s", en->shown,
                        ost__mdb_strerror(en, rc));
}

/* ---- commits ------------------------------------------------------------------------ */

/* Writes p's records under commit serial in t; *nlog counts those that
 * replace a stored record (they go to the txlog). New objects' oids ascend
 * past every stored one (oid blocks are handed out in order), so they are
 * appended through one cursor that stays on the last leaf: mdb_put would
 * descend the tree from the root for each (a third of a loader batch's
 * apply time at 100,000 records). Returns an LMDB code. */
static int put_records(ost__engine *en, MDB_txn *t, ost__pkg *p, uint64_t serial, size_t *nlog) {
    MDB_cursor *cur = NULL;
    bool append = true;
    int rc = 0;
    for (size_t i = 0; i < p->nrecs; i++) {
        ost__rec *r = &p->recs[i];
        uint8_t kb[8];
        ost__be64(kb, r->oid);
        MDB_val rk = {8, kb}, rv = {r->len + OST_HDR_SIZE, NULL};
        if (!r->read_serial && append) {
            if (!cur && (rc = mdb_cursor_open(t, en->recs, &cur))) break;
            rc = mdb_cursor_put(cur, &rk, &rv, MDB_RESERVE | MDB_APPEND);
            if (rc == MDB_KEYEXIST) {
                /* another writer's oids are above ours: plain puts from now */
                append = false;
                rv = (MDB_val){r->len + OST_HDR_SIZE, NULL};
                rc = mdb_put(t, en->recs, &rk, &rv, MDB_RESERVE);
            }
        } else
            rc = mdb_put(t, en->recs, &rk, &rv, MDB_RESERVE);
        if (rc) break;
        ost__hdr_write(rv.mv_data, serial, r->cid);
        memcpy((uint8_t *)rv.mv_data + OST_HDR_SIZE, p->bytes + r->off, r->len);
        ost__rec_seal(rv.mv_data, rv.mv_size, r->oid);
        if (r->read_serial) (*nlog)++;
    }
    if (cur) mdb_cursor_close(cur);
    return rc;
}

/* Checks, before package p writes anything, that each of its counters'
 * adds (p holds no other map entries) will apply: the counter is there,
 * sound, and stays within 64 bits. So a package of a flat group fails
 * before its writes (flat_group). 0 or the code with p->msg set. */
static int counts_fit(ost__sess *s, ost__pkg *p) {
    for (size_t i = 0; i < p->nments; i++) {
        const ost__ment *me = &p->ments[i];
        int64_t delta = ost__ment_delta(p, me);
        if (!delta) continue;
        uint8_t kb[8];
        ost__be64(kb, me->map);
        MDB_val k = {8, kb}, v;
        int rc = mdb_get(s->wtxn, s->e->recs, &k, &v);
        if (rc == MDB_NOTFOUND) return s->e->host->count_fail(p, me->map, delta, true, OST_ECONFLICT);
        if (rc) return rc;
        uint64_t serial;
        uint32_t cid;
        uint8_t copy[OST_HDR_SIZE + 600];
        if (ost__rec_open(s->e, me->map, &v, &serial, &cid) || v.mv_size > sizeof copy)
            return s->e->host->count_fail(p, me->map, delta, true, OST_ECORRUPT);
        memcpy(copy, v.mv_data, v.mv_size);
        rc = ost__record_count_add(copy + OST_HDR_SIZE, v.mv_size - OST_HDR_SIZE, delta, true);
        if (rc) return s->e->host->count_fail(p, me->map, delta, true, rc);
    }
    return 0;
}

/* Applies package p inside s's write transaction (itself nested or not):
 * conflict checks, records, map entries, txlog, last_serial. Returns an
 * LMDB code or a negative ost code with p->msg set. */
static int apply(ost__sess *s, ost__pkg *p) {
    ost__engine *en = s->e;
    MDB_txn *t = s->wtxn;
    /* nothing to write (changed ghosts only): no commit, no serial */
    if (!p->nrecs && !p->nments) {
        p->serial = 0;
        return 0;
    }
    MDB_val k = {11, "last_serial"}, v;
    int rc = mdb_get(t, en->meta, &k, &v);
    if (rc) return rc;
    if (v.mv_size != 8) return MDB_CORRUPTED;
    uint64_t last = ost__rd_le64(v.mv_data);
    if (last >= OST__SERIAL_LIMIT - 1) return MDB_CORRUPTED; /* damaged meta: it would wrap */
    uint64_t serial = last + 1;
    for (size_t i = 0; i < p->nrecs; i++) {
        ost__rec *r = &p->recs[i];
        if (!r->read_serial) continue;
        uint8_t kb[8];
        ost__be64(kb, r->oid);
        MDB_val rk = {8, kb}, rv;
        rc = mdb_get(t, en->recs, &rk, &rv);
        uint64_t cur = 0;
        uint32_t cid;
        if (rc == MDB_NOTFOUND) return en->host->conflict(p, OST__CONFL_REMOVED, r->oid, 0, 0);
        if (rc) return rc;
        int dmg = ost__rec_open(en, r->oid, &rv, &cur, &cid);
        if (dmg) {
            snprintf(p->msg, sizeof p->msg, "oid %llu: damaged record (%s): not overwritten",
                     (unsigned long long)r->oid, ost__damage_text(dmg));
            return OST_ECORRUPT;
        }
        if (cur != r->read_serial) {
            /* the class's resolver may merge it (decoded from the map:
             * nothing is written before the checks end) */
            rc = en->host->resolve(en->st, p, i, cur, cid, (const uint8_t *)rv.mv_data + OST_HDR_SIZE,
                                  rv.mv_size - OST_HDR_SIZE);
            if (rc) return rc;
        }
    }
    /* a pack since the connection checked its cache may have removed an
     * object that the records refer to (one made unreachable, then linked
     * again): storing the reference would leave it dangling */
    uint64_t low = meta_u64(s, "low");
    for (size_t i = 0; low != p->low && i < p->nrefs; i++) {
        uint8_t kb[8];
        ost__be64(kb, p->refs[i]);
        MDB_val rk = {8, kb}, rv;
        rc = mdb_get(t, en->recs, &rk, &rv);
        if (rc == MDB_NOTFOUND) return en->host->conflict(p, OST__CONFL_REF_GONE, p->refs[i], 0, 0);
        if (rc) return rc;
    }
    if (p->nments && ost__pkg_counts_only(p) && (rc = counts_fit(s, p))) return rc;
    size_t nlog = 0;
    if ((rc = put_records(en, t, p, serial, &nlog))) return rc;
    if (p->nrecs > 1) OST__HOOK(mid_write, ()); /* tests: testctl.h */
    if (p->nments) {
        s->mdb_rc = 0;
        rc = en->host->apply_maps(en->st, &ost__lmdb_engine, s, p, serial);
        /* a full map comes back as the LMDB code, which the caller cures */
        if (rc && OST__REMAP(s->mdb_rc)) return s->mdb_rc;
        if (rc) return rc;
    }
    if (nlog) {
        uint8_t kb[8];
        ost__be64(kb, serial);
        MDB_val lk = {8, kb}, lv = {nlog * 8, NULL};
        rc = mdb_put(t, en->txlog, &lk, &lv, MDB_RESERVE);
        if (rc) return rc;
        uint8_t *out = lv.mv_data;
        for (size_t i = 0; i < p->nrecs; i++)
            if (p->recs[i].read_serial) {
                ost__be64(out, p->recs[i].oid);
                out += 8;
            }
    }
    uint8_t b[8];
    ost__le64(b, serial);
    v = (MDB_val){8, b};
    rc = mdb_put(t, en->meta, &k, &v, 0);
    if (!rc) p->serial = serial;
    return rc;
}

static void set_outcome(ost__engine *en, ost__pkg *p, int rc, const char *what) {
    if (rc == 0) {
        p->rc = 0;
        return;
    }
    if (OST__OURS(rc)) { /* our code: message set by apply */
        p->rc = rc;
        if (!p->msg[0]) ost__fmt(p->msg, sizeof p->msg, "%s: %s failed: %s", en->shown, what,
                                 ost_strerror(rc));
        return;
    }
    p->rc = ost__mdb_code(rc);
    if (rc == MDB_MAP_FULL) p->rc = OST_ENOMEM;
    ost__fmt(p->msg, sizeof p->msg, "%s: %s failed: %s", en->shown, what,
             ost__mdb_strerror(en, rc));
}

/* flat_group's outcome when every package was applied or refused */
#define FLAT_DONE 0

/* Applies a group's packages one after another in t itself, without a
 * nested transaction each (a child transaction costs LMDB a dirty list
 * and copies of the pages it touches: most of a group's apply time at 16
 * threads). Equivalent to the nested way as long as a package that fails
 * fails before it writes: apply checks the serials and references first
 * (OST_ECONFLICT, OST_ECORRUPT for a damaged record) and that its
 * counters' adds fit (counts_fit), and only then writes (a group with
 * entries of ordered maps, whose checks go with their writes, goes the
 * nested way; a counter's add past 64 bits spoils the flat try, and the
 * nested way refuses that package alone). Returns FLAT_DONE with each package's outcome
 * set, or the code of the first write that failed (t is then spoilt:
 * the caller aborts it). */
static int flat_group(ost__sess *s, MDB_txn *t, ost__pkg *const *pkgs, size_t n) {
    for (size_t i = 0; i < n; i++) {
        ost__pkg *p = pkgs[i];
        p->rc = 0;
        p->msg[0] = 0;
        s->wtxn = t;
        int prc = apply(s, p);
        s->wtxn = NULL;
        /* tests (testctl.h): the flat try fails from package k on */
        if (!prc && OST__KNOB(lmdb_flat_spoil) >= 0 && (int)i >= OST__KNOB(lmdb_flat_spoil)) {
            OST__KNOB_RESET(lmdb_flat_spoil);
            prc = MDB_TXN_FULL; /* as a write that failed */
        }
        if (prc && prc != OST_ECONFLICT && prc != OST_ECORRUPT) return prc;
        set_outcome(s->e, p, prc, "commit");
        if (prc) p->serial = 0;
    }
    return FLAT_DONE;
}

/* One try of a group: 0, or the LMDB code of a failure of the whole group
 * (MDB_MAP_FULL and MDB_MAP_RESIZED: grow the map and try again). A
 * package's own failure is its outcome, not the group's. */
static int commit_once(ost__sess *s, ost__pkg *const *pkgs, size_t n) {
    ost__engine *en = s->e;
    uint64_t started = uv_hrtime(), applied = 0;
    MDB_txn *parent;
    int rc = mdb_txn_begin(en->env, NULL, 0, &parent);
    if (rc) return rc;
    if (n == 1) {
        /* one package (a loader's batch, a lone commit): applied in the
         * transaction itself, without the cost of a nested one (pages
         * copied from the parent, dirty lists merged); a failure aborts
         * it, which stores nothing, as an aborted child would */
        ost__pkg *p = pkgs[0];
        p->rc = 0;
        p->msg[0] = 0;
        s->wtxn = parent;
        int prc = apply(s, p);
        s->wtxn = NULL;
        if (prc) {
            mdb_txn_abort(parent);
            if (OST__REMAP(prc)) return prc;
            set_outcome(en, p, prc, "commit");
            p->serial = 0;
            rc = 0;
        } else {
            set_outcome(en, p, 0, "commit");
            applied = uv_hrtime();
            rc = mdb_txn_commit(parent);
        }
    } else {
        /* map entries' checks go with their writes; counters' adds are
         * checked before (counts_fit) */
        bool flat = true;
        for (size_t i = 0; i < n && flat; i++) flat = ost__pkg_counts_only(pkgs[i]);
        if (flat) {
            int frc = flat_group(s, parent, pkgs, n);
            if (frc == FLAT_DONE) goto applied;
            /* a write failed in the flat try: the transaction is spoilt,
             * and the group is applied again, each package nested */
            mdb_txn_abort(parent);
            if (OST__REMAP(frc)) return frc;
            OST__COUNT(lmdb_flat_redos, 1);
            if ((rc = mdb_txn_begin(en->env, NULL, 0, &parent))) return rc;
        }
        for (size_t i = 0; i < n; i++) {
            ost__pkg *p = pkgs[i];
            MDB_txn *child;
            p->rc = 0;
            p->msg[0] = 0;
            int prc = mdb_txn_begin(en->env, parent, 0, &child);
            if (!prc) {
                s->wtxn = child;
                prc = apply(s, p);
                s->wtxn = NULL;
                if (prc) mdb_txn_abort(child);
                else prc = mdb_txn_commit(child);
            }
            if (OST__REMAP(prc)) {
                rc = prc;
                break;
            }
            set_outcome(en, p, prc, "commit");
            if (prc) p->serial = 0;
        }
    applied:
        applied = uv_hrtime();
        if (rc) mdb_txn_abort(parent);
        else rc = mdb_txn_commit(parent);
    }
    uint64_t ended = uv_hrtime();
    if (!applied) applied = ended;
    s->apply_ns += applied - started;
    s->commit_ns += ended - applied;
    return rc;
}

static int lmdb_commit(ost__sess *s, ost__pkg *const *pkgs, size_t n) {
    ost__engine *en = s->e;
    if (!n) return 0;
    if (s->in_snap || s->wtxn)
        return ost__lmdb_fail(en, OST_EINVAL, "%s: commit with a snapshot open", en->shown);
    size_t bytes = 0, items = 0;
    for (size_t i = 0; i < n; i++) {
        bytes += pkgs[i]->nbytes;
        items += pkgs[i]->nrecs + pkgs[i]->nments;
    }
    ost__ensure_room(en, bytes, items); /* else MDB_MAP_FULL, grown below */
    int rc;
    for (;;) {
        uv_rwlock_rdlock(&en->maplock);
        rc = commit_once(s, pkgs, n);
        uv_rwlock_rdunlock(&en->maplock);
        if (!OST__REMAP(rc)) break;
        if ((rc = ost__remap(en, rc))) break;
    }
    if (!rc) return 0;
    for (size_t i = 0; i < n; i++) {
        /* the group's commit failed: nothing of it is stored */
        set_outcome(en, pkgs[i], rc, n > 1 ? "group commit" : "commit");
        pkgs[i]->serial = 0;
    }
    return ost__lmdb_fail(en, pkgs[0]->rc, "%s", pkgs[0]->msg);
}

/* ---- pack --------------------------------------------------------------------------- */

struct sweep_ctx {
    bool (*keep)(void *ud, uint64_t oid);
    void *ud;
    ost__engine *en;
    MDB_txn *t;
};

/* The entries of a map go with its record: those of a map the mark kept,
 * or whose record stays because a commit after the mark wrote it (a map
 * made or changed during the pack), stay. */
static int sweep_map(void *ud, uint64_t map) {
    struct sweep_ctx *sc = ud;
    if (sc->keep(sc->ud, map)) return 0;
    uint8_t kb[8];
    ost__be64(kb, map);
    MDB_val k = {8, kb}, v;
    int rc = mdb_get(sc->t, sc->en->recs, &k, &v);
    if (rc == MDB_NOTFOUND) return 1;
    return rc ? rc : 0;
}

/* A map whose record the sweep removed (or that never had one): its
 * deletion records go too. */
static bool sweep_dels_gone(void *ud, uint64_t map) {
    struct sweep_ctx *sc = ud;
    uint8_t kb[8];
    ost__be64(kb, map);
    MDB_val k = {8, kb}, v;
    return mdb_get(sc->t, sc->en->recs, &k, &v) == MDB_NOTFOUND;
}

static int sweep_once(ost__sess *s, uint64_t mark, bool (*keep)(void *ud, uint64_t oid), void *ud,
                      uint64_t *removed) {
    ost__engine *en = s->e;
    MDB_txn *t;
    int rc = mdb_txn_begin(en->env, NULL, 0, &t);
    if (rc) return rc;
    MDB_cursor *cur;
    uint64_t gone = 0;
    rc = mdb_cursor_open(t, en->recs, &cur);
    if (!rc) {
        MDB_val k, v;
        while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
            /* a key that is no oid: nothing can reach it (check reports it) */
            if (k.mv_size == 8) {
                uint64_t oid = ost__rd_be64(k.mv_data), serial;
                uint32_t cid;
                if (keep(ud, oid)) continue;
                /* written after the mark: the mark could not see what it
                 * links. A damaged record no commit wrote as it is: it goes
                 * with the rest of what the mark did not reach. */
                if (ost__rec_open(en, oid, &v, &serial, &cid) == 0 && serial > mark) continue;
            }
            if ((rc = mdb_cursor_del(cur, 0))) break;
            gone++;
        }
        mdb_cursor_close(cur);
        if (rc == MDB_NOTFOUND) rc = 0;
    }
    struct sweep_ctx sc = {keep, ud, en, t};
    if (!rc) rc = ost__ent_each_map(en, t, sweep_map, &sc);
    if (!rc) rc = ost__ent_dels_sweep(en, t, sweep_dels_gone, &sc);
    if (!rc) rc = mdb_drop(t, en->txlog, 0);
    if (!rc) {
        s->wtxn = t;
        uint64_t last = meta_u64(s, "last_serial");
        s->wtxn = NULL;
        uint8_t b[8];
        ost__le64(b, last + 1);
        MDB_val key = {3, "low"}, val = {8, b};
        rc = mdb_put(t, en->meta, &key, &val, 0);
    }
    if (rc) {
        mdb_txn_abort(t);
        return rc;
    }
    rc = mdb_txn_commit(t);
    if (!rc) *removed = gone;
    return rc;
}

static int lmdb_sweep(ost__sess *s, uint64_t mark, bool (*keep)(void *ud, uint64_t oid), void *ud,
                      uint64_t *removed) {
    ost__engine *en = s->e;
    *removed = 0;
    if (en->read_only) return ost__lmdb_fail(en, OST_EREADONLY, "%s: read-only", en->shown);
    int rc;
    for (;;) {
        uv_rwlock_rdlock(&en->maplock);
        rc = sweep_once(s, mark, keep, ud, removed);
        uv_rwlock_rdunlock(&en->maplock);
        if (!OST__REMAP(rc)) break;
        if ((rc = ost__remap(en, rc))) break;
    }
    if (OST__OURS(rc)) return ost__lmdb_fail(en, rc, "%s: pack: %s", en->shown, ost_strerror(rc));
    return rc ? fail_mdb(s, rc, "pack") : 0;
}

/* ---- map entries ---------------------------------------------------------------------- */

/* An entries.h result as an OST_E* code, keeping the LMDB code for commit. */
static int ent_rc(ost__sess *s, int rc) {
    if (rc == OST__PAGE_DAMAGE) return OST_ECORRUPT; /* the message is set */
    if (!rc || OST__OURS(rc)) {
        if (rc == OST_ECORRUPT)
            ost__lmdb_fail(s->e, rc, "%s: a damaged map entry", s->e->shown);
        return rc;
    }
    return fail_mdb(s, rc, "map entries");
}

/* Inside commit the write transaction is open and the maplock held;
 * otherwise the snapshot is reopened as reads do. */
#define ENT_CALL(s, expr)                                                                          \
    do {                                                                                           \
        if ((s)->wtxn) return ent_rc((s), (expr));                                                 \
        int rc_ = lock_snap(s);                                                                    \
        if (!rc_) rc_ = ent_rc((s), (expr));                                                       \
        unlock(s);                                                                                 \
        return rc_;                                                                                \
    } while (0)

static int lmdb_ent_get(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                        ost__entry *e) {
    ENT_CALL(s, s->wtxn ? ost__ent_get(s->e, s->wtxn, map, key, klen, e)
                        : ost__ent_gget(s->e, s->gd, map, key, klen, e));
}

static int need_write(ost__sess *s) {
    return ost__lmdb_fail(s->e, OST_EINVAL, "%s: a write outside a commit", s->e->shown);
}

static int lmdb_ent_put(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                        uint64_t serial, const void *data, size_t len, bool *existed,
                        bool *append) {
    if (!s->wtxn) return need_write(s);
    return ent_rc(s, ost__ent_put(s->e, s->wtxn, map, key, klen, serial, data, len, existed,
                                  append));
}

static int lmdb_ent_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                        uint64_t serial) {
    if (!s->wtxn) return need_write(s);
    int rc = ost__ent_del(s->e, s->wtxn, map, key, klen);
    if (!rc) rc = ost__ent_del_record(s->e, s->wtxn, map, key, klen, serial);
    return ent_rc(s, rc);
}

/* LMDB has one writer: inside commit, the write transaction sees every
 * commit before it, deletion records included. */
static int lmdb_ent_get_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                            ost__entry *e, uint64_t *deleted) {
    *deleted = 0;
    if (!s->wtxn) return need_write(s);
    int rc = ost__ent_get(s->e, s->wtxn, map, key, klen, e);
    if (rc == OST_ENOTFOUND) {
        int drc = ost__ent_deleted(s->e, s->wtxn, map, key, klen, deleted);
        if (drc == OST_ECORRUPT)
            return ost__lmdb_fail(s->e, drc, "%s: map %llu: a damaged deletion record",
                                s->e->shown, (unsigned long long)map);
        if (drc) return ent_rc(s, drc);
    }
    return ent_rc(s, rc);
}

static int lmdb_ent_drop_map(ost__sess *s, uint64_t map, uint64_t *n) {
    if (!s->wtxn) return need_write(s);
    return ent_rc(s, ost__ent_drop_map(s->e, s->wtxn, map, n));
}

static int lmdb_map_count_add(ost__sess *s, uint64_t map, int64_t delta, uint64_t serial,
                              bool counter) {
    if (!s->wtxn) return need_write(s);
    return ent_rc(s, ost__map_count_add(s->e, s->wtxn, map, delta, serial, counter));
}

/* Cursors live in the snapshot (the maplock is not held between calls: a
 * resize that closes the snapshot invalidates them, as it does a
 * connection's map cursors, which check the snapshot generation). */
static int lmdb_ecur_open(ost__sess *s, uint64_t map, ost__ecur **out) {
    ENT_CALL(s, s->wtxn ? ost__ecur_open(s->e, s->wtxn, map, out)
                        : ost__ecur_gopen(s->e, s->gd, map, out));
}

/* Cursors are used while their session is pinned (engine.h): a resize
 * between pins resets the cursor's transaction, and liblmdb then refuses
 * the cursor (MDB_BAD_TXN): OST_EBUSY, reopen it. */
static int ecur_rc(int rc) {
    if (rc == OST__PAGE_DAMAGE) return OST_ECORRUPT; /* the message is set */
    if (!rc || OST__OURS(rc)) return rc;
    return rc == MDB_BAD_TXN ? OST_EBUSY : ost__mdb_code(rc);
}

static int lmdb_ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse) {
    return ecur_rc(ost__ecur_seek(ec, key, klen, reverse));
}

static int lmdb_ecur_step(ost__ecur *ec, bool reverse) {
    return ecur_rc(ost__ecur_step(ec, reverse));
}

static int lmdb_ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e) {
    return ecur_rc(ost__ecur_get(ec, key, klen, e));
}

static void lmdb_ecur_close(ost__ecur *ec) { ost__ecur_close(ec); }

static int lmdb_ent_each_map(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud) {
    ENT_CALL(s, s->wtxn ? ost__ent_each_map(s->e, s->wtxn, fn, ud)
                        : ost__ent_geach_map(s->e, s->gd, fn, ud));
}

/* ---- raw access ---------------------------------------------------------------------- */

static int raw_meta(ost__sess *s, const char *key, uint64_t *out) {
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = sget(s, OST__GD_META, s->e->meta, &k, &v);
    if (rc == OST_ECORRUPT) return damaged(s, rc, "reading meta");
    if (rc == MDB_NOTFOUND)
        return ost__lmdb_fail(s->e, OST_ECORRUPT, "%s: damaged meta (no %s)", s->e->shown, key);
    if (rc) return fail_mdb(s, rc, "reading meta");
    if (v.mv_size != 8)
        return ost__lmdb_fail(s->e, OST_ECORRUPT, "%s: damaged meta (%s is %zu bytes, not 8)",
                            s->e->shown, key, v.mv_size);
    *out = ost__rd_le64(v.mv_data);
    return 0;
}

/* The map size dir/data.mdb's meta page records (the writer's setting;
 * 0 if unknown), read through a read-only environment without a lock file
 * (the meta pages are read with read(), not through the map). */
static uint64_t recorded_map_size(const char *dir) {
    MDB_env *env;
    uint64_t size = 0;
    if (mdb_env_create(&env)) return 0;
    mdb_env_set_maxdbs(env, 8);
    if (mdb_env_open(env, dir, MDB_RDONLY | MDB_NOLOCK | MDB_NOTLS, 0644) == 0) {
        MDB_envinfo ei;
        if (mdb_env_info(env, &ei) == 0) size = ei.me_mapsize;
    }
    mdb_env_close(env);
    return size;
}

static int lmdb_snap_stat(ost__sess *s, ost_snap_stats *out) {
    memset(out, 0, sizeof *out);
    out->engine = "lmdb";
    int rc = lock_snap(s);
    if (!rc) rc = raw_meta(s, "format", &out->format);
    if (!rc) rc = raw_meta(s, "next_oid", &out->next_oid);
    if (!rc) rc = raw_meta(s, "last_serial", &out->last_serial);
    if (!rc) rc = raw_meta(s, "next_class", &out->next_class);
    if (!rc && !s->wtxn) {
        /* liblmdb's mdb_stat reads the named databases' records from the
         * main database: the guard reads them first */
        uint64_t n;
        int grc = ost__gd_entries(s->gd, OST__GD_RECS, &n);
        if (!grc && !s->e->no_ments) grc = ost__gd_entries(s->gd, OST__GD_MENTS, &n);
        if (grc == OST_ECORRUPT) rc = damaged(s, grc, "reading the database records");
    }
    if (!rc) {
        ost__engine *en = s->e;
        MDB_stat ms;
        if (mdb_stat(txn_of(s), en->recs, &ms) == 0) out->records = ms.ms_entries;
        if (!en->no_ments && mdb_stat(txn_of(s), en->ments, &ms) == 0) {
            out->entries = ms.ms_entries;
            out->entry_bytes = (uint64_t)ms.ms_psize *
                               (ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages);
        }
        MDB_envinfo ei;
        if (mdb_env_info(en->env, &ei) == 0 && mdb_env_stat(en->env, &ms) == 0) {
            out->page_size = ms.ms_psize;
            out->pages_used = (uint64_t)ei.me_last_pgno + 1;
            out->map_size = ei.me_mapsize;
        }
        /* the writer's setting, as the meta page records it (a read-only
         * handle maps what it was given) */
        uint64_t recorded = recorded_map_size(en->path);
        if (recorded) out->map_size = recorded;
    }
    unlock(s);
    return rc;
}

/* Every page of the file, with ostore's own page reader (pagecheck.c). */
static int lmdb_verify(ost__sess *s, char *first, size_t cap) {
    int rc = lock_snap(s);
    if (!rc) rc = ost__walk_first(s->e, txn_of(s), false, first, cap);
    unlock(s);
    return rc;
}

/* check's walk of the pages (verify.c), on the pinned snapshot. */
static int lmdb_check_pages(ost__sess *s, ost_check_fn report, void *ud, uint64_t *problems,
                            uint64_t *records) {
    int rc = lock_snap(s);
    if (!rc) rc = ost__lmdb_check_pages(s->e, txn_of(s), report, ud, problems, records);
    unlock(s);
    return rc;
}

static void lmdb_commit_split(ost__sess *s, uint64_t *apply_ns, uint64_t *commit_ns) {
    *apply_ns += s->apply_ns;
    *commit_ns += s->commit_ns;
    s->apply_ns = s->commit_ns = 0;
}

/* The import is import.c's, on the store's environment. */
static int lmdb_imp_begin(ost__engine *e, uint64_t size_hint, ost__import **out) {
    return ost__import_begin(e, size_hint, out);
}

const ost__engine_ops ost__lmdb_engine = {
    .version = OST__ENGINE_VERSION,
    .name = "lmdb",
    .flags = OST__ENG_ONE_WRITER | OST__ENG_SNAP_MAY_MOVE | OST__ENG_LOCAL_READS |
             OST__ENG_MAKES_ROOT | OST__ENG_VERIFY_FIRST,
    .open = lmdb_open,
    .shown = lmdb_shown,
    .path = lmdb_path,
    .close = lmdb_close,
    .stat = lmdb_stat,
    .sess_open = lmdb_sess_open,
    .sess_close = lmdb_sess_close,
    .snap_begin = lmdb_snap_begin,
    .snap_end = lmdb_snap_end,
    .snap_moved = lmdb_snap_moved,
    .pin = lmdb_pin,
    .unpin = lmdb_unpin,
    .get = lmdb_get,
    .get_many = lmdb_get_many,
    .scan = lmdb_scan,
    .changes = lmdb_changes,
    .class_get = lmdb_class_get,
    .class_each = lmdb_class_each,
    .class_id = lmdb_class_id,
    .reserve_oids = lmdb_reserve_oids,
    .commit = lmdb_commit,
    .sweep = lmdb_sweep,
    .ent_get = lmdb_ent_get,
    .ent_put = lmdb_ent_put,
    .ent_del = lmdb_ent_del,
    .ent_get_del = lmdb_ent_get_del,
    .ent_drop_map = lmdb_ent_drop_map,
    .ecur_open = lmdb_ecur_open,
    .ecur_seek = lmdb_ecur_seek,
    .ecur_step = lmdb_ecur_step,
    .ecur_get = lmdb_ecur_get,
    .ecur_close = lmdb_ecur_close,
    .ent_each_map = lmdb_ent_each_map,
    .map_count_add = lmdb_map_count_add,
    .snap_stat = lmdb_snap_stat,
    .verify = lmdb_verify,
    .check_pages = lmdb_check_pages,
    .commit_split = lmdb_commit_split,
    .imp_begin = lmdb_imp_begin,
    .imp_class = ost__import_class,
    .imp_record = ost__import_record,
    .imp_entry = ost__import_ment,
    .imp_commit = ost__import_commit,
    .imp_abort = ost__import_abort,
    .drop = ost__lmdb_drop,
};

/* Paths, as messages show them (ost__path_show). */
static void lmdb_show(const char *addr, char *out, size_t cap) { ost__path_show(out, cap, addr); }

const ost__engine_entry ost__lmdb_entry = {
    .label = "LMDB",
    .claims = lmdb_claims,
    .show = lmdb_show,
    .paths = true,
    .ops = &ost__lmdb_engine,
    .missing = NULL,
    .salvage = ost__salvage,
};
