/* Raw access (include/ostore/raw.h): snapshots read record by record, map
 * entries as stored, the class table and the counters; imports; salvage.
 * What the ostore CLI reads and writes stores with. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "entries.h"
#include "lmdb/import.h"
#include "lmdb/salvage.h"
#include "store_internal.h"
#include "ostore/raw.h"

typedef struct {
    uint32_t id;
    char *module, *name;
} snap_class;

struct ost_snap {
    ost_store *st;
    MDB_txn *t;
    snap_class *cls; /* in ascending id order */
    size_t ncls;
    char msg[512];
};

struct ost_snap_cursor {
    ost_snap *s;
    MDB_cursor *cur;
    uint64_t from;
    bool started;
};

struct ost_entry_cursor {
    ost_snap *s;
    uint64_t map;
    ost__ecur *ec; /* NULL: the store has no entries at all */
    bool started, done;
    uint8_t from[OST_MAP_KEY_MAX];
    size_t fromlen;
    bool has_from;
};

static int snap_fail(ost_snap *s, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int snap_fail(ost_snap *s, int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(s->msg, sizeof s->msg, fmt, ap);
    va_end(ap);
    return code;
}

/* An LMDB code after what, as the snapshot's failure. */
static int mdb_fail(ost_snap *s, int rc, const char *what) {
    return snap_fail(s, ost__mdb_code(rc), "%s: %s: %s", s->st->shown, what,
                     ost__mdb_strerror(s->st, rc));
}

static int cmp_class(const void *a, const void *b) {
    uint32_t x = ((const snap_class *)a)->id, y = ((const snap_class *)b)->id;
    return x < y ? -1 : x > y;
}

/* Reads the class table into s->cls. */
static int load_classes(ost_snap *s) {
    MDB_cursor *cur;
    int rc = mdb_cursor_open(s->t, s->st->classes, &cur);
    if (rc) return mdb_fail(s, rc, "classes");
    MDB_val k, v;
    size_t cap = 0;
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        if (k.mv_size != 5 || ((char *)k.mv_data)[0] != 'i') continue;
        const char *m = v.mv_data;
        const char *z = memchr(m, 0, v.mv_size);
        if (!z) continue; /* check reports the records whose class cannot be named */
        if (s->ncls == cap) {
            cap = cap ? cap * 2 : 16;
            snap_class *n = realloc(s->cls, cap * sizeof *n);
            if (!n) {
                rc = ENOMEM;
                break;
            }
            s->cls = n;
        }
        snap_class *c = &s->cls[s->ncls];
        memcpy(&c->id, (char *)k.mv_data + 1, 4);
        size_t ml = (size_t)(z - m);
        c->module = strndup(m, ml);
        c->name = strndup(z + 1, v.mv_size - ml - 1);
        if (!c->module || !c->name) {
            free(c->module);
            free(c->name);
            rc = ENOMEM;
            break;
        }
        s->ncls++;
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND) return mdb_fail(s, rc, "reading the class table");
    if (s->ncls) qsort(s->cls, s->ncls, sizeof *s->cls, cmp_class);
    return 0;
}

int ost_snap_open(ost_store *st, ost_snap **out) {
    *out = NULL;
    if (!st || !st->eng) return OST_EINVAL;
    if (!st->env) return ost__lmdb_only(st, "raw snapshots");
    ost_snap *s = calloc(1, sizeof *s);
    if (!s) return ost__st_fail(st, OST_ENOMEM, "out of memory");
    s->st = st;
    uv_rwlock_rdlock(&st->maplock);
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &s->t);
    if (rc) {
        uv_rwlock_rdunlock(&st->maplock);
        free(s);
        return ost__st_fail(st, ost__mdb_code(rc), "%s: cannot start a read transaction: %s",
                            st->shown, ost__mdb_strerror(st, rc));
    }
    ost__format_refresh(st, s->t);
    if ((rc = load_classes(s))) {
        ost__st_fail(st, rc, "%s", s->msg);
        ost_snap_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

void ost_snap_close(ost_snap *s) {
    if (!s) return;
    mdb_txn_abort(s->t);
    uv_rwlock_rdunlock(&s->st->maplock);
    for (size_t i = 0; i < s->ncls; i++) {
        free(s->cls[i].module);
        free(s->cls[i].name);
    }
    free(s->cls);
    free(s);
}

const char *ost_snap_errmsg(const ost_snap *s) { return s ? s->msg : ""; }

bool ost_store_addr_is_path(const char *addr) {
    static const char *const uri[] = {"postgresql://", "postgres://", "postgres:"};
    if (!addr) return false;
    for (size_t i = 0; i < sizeof uri / sizeof *uri; i++)
        if (!strncmp(addr, uri[i], strlen(uri[i]))) return false;
    return true;
}

const char *ost_store_path(const ost_store *st) { return st && st->path ? st->path : ""; }

static int meta_u64(ost_snap *s, const char *key, uint64_t *out) {
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(s->t, s->st->meta, &k, &v);
    if (rc == MDB_NOTFOUND)
        return snap_fail(s, OST_ECORRUPT, "%s: damaged meta (no %s)", s->st->shown, key);
    if (rc) return mdb_fail(s, rc, "reading meta");
    if (v.mv_size != 8)
        return snap_fail(s, OST_ECORRUPT, "%s: damaged meta (%s is %zu bytes, not 8)",
                         s->st->shown, key, v.mv_size);
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

int ost_snap_stat(ost_snap *s, ost_snap_stats *out) {
    memset(out, 0, sizeof *out);
    out->engine = "lmdb";
    int rc = meta_u64(s, "format", &out->format);
    if (!rc) rc = meta_u64(s, "next_oid", &out->next_oid);
    if (!rc) rc = meta_u64(s, "last_serial", &out->last_serial);
    if (!rc) rc = meta_u64(s, "next_class", &out->next_class);
    if (rc) return rc;
    MDB_stat ms;
    if (mdb_stat(s->t, s->st->recs, &ms) == 0) out->records = ms.ms_entries;
    if (!s->st->no_ments && mdb_stat(s->t, s->st->ments, &ms) == 0) {
        out->entries = ms.ms_entries;
        out->entry_bytes =
            (uint64_t)ms.ms_psize * (ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages);
    }
    MDB_envinfo ei;
    if (mdb_env_info(s->st->env, &ei) == 0 && mdb_env_stat(s->st->env, &ms) == 0) {
        out->page_size = ms.ms_psize;
        out->pages_used = (uint64_t)ei.me_last_pgno + 1;
        out->map_size = ei.me_mapsize;
    }
    /* the writer's setting, as the meta page records it (a read-only
     * handle maps what it was given) */
    uint64_t recorded = recorded_map_size(s->st->path);
    if (recorded) out->map_size = recorded;
    return 0;
}

int ost_snap_class(ost_snap *s, size_t i, uint32_t *id, const char **module, const char **name) {
    if (i >= s->ncls) return OST_ENOTFOUND;
    if (id) *id = s->cls[i].id;
    if (module) *module = s->cls[i].module;
    if (name) *name = s->cls[i].name;
    return 0;
}

/* Fills r from LMDB's key k and value v. */
static void fill(ost_snap *s, ost_raw_record *r, const MDB_val *k, const MDB_val *v) {
    memset(r, 0, sizeof *r);
    r->oid = k->mv_size == 8 ? ost__rd_be64(k->mv_data) : UINT64_MAX;
    r->size = v->mv_size;
    int dmg = k->mv_size != 8 ? -1 : ost__rec_open(s->st, r->oid, v, &r->serial, &r->class_id);
    if (dmg) {
        r->damage = dmg < 0 ? "its key is not an oid" : ost__damage_text(dmg);
        r->serial = 0;
        r->class_id = 0;
        return;
    }
    r->pickle = (const uint8_t *)v->mv_data + OST_HDR_SIZE;
    r->len = v->mv_size - OST_HDR_SIZE;
}

int ost_snap_get(ost_snap *s, uint64_t oid, ost_raw_record *r) {
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v;
    int rc = mdb_get(s->t, s->st->recs, &k, &v);
    if (rc == MDB_NOTFOUND)
        return snap_fail(s, OST_ENOTFOUND, "oid %llu: no such object", (unsigned long long)oid);
    if (rc) return mdb_fail(s, rc, "reading a record");
    fill(s, r, &k, &v);
    return 0;
}

int ost_snap_records(ost_snap *s, uint64_t from, ost_snap_cursor **out) {
    *out = NULL;
    ost_snap_cursor *c = calloc(1, sizeof *c);
    if (!c) return snap_fail(s, OST_ENOMEM, "out of memory");
    int rc = mdb_cursor_open(s->t, s->st->recs, &c->cur);
    if (rc) {
        free(c);
        return mdb_fail(s, rc, "records");
    }
    c->s = s;
    c->from = from;
    *out = c;
    return 0;
}

int ost_snap_next(ost_snap_cursor *c, ost_raw_record *r) {
    MDB_val k, v;
    int rc;
    if (c->started) {
        rc = mdb_cursor_get(c->cur, &k, &v, MDB_NEXT);
    } else if (c->from) {
        uint8_t kb[8];
        ost__be64(kb, c->from);
        k = (MDB_val){8, kb};
        rc = mdb_cursor_get(c->cur, &k, &v, MDB_SET_RANGE);
    } else {
        rc = mdb_cursor_get(c->cur, &k, &v, MDB_FIRST);
    }
    c->started = true;
    if (rc == MDB_NOTFOUND) return OST_ENOTFOUND;
    if (rc) return mdb_fail(c->s, rc, "reading records");
    fill(c->s, r, &k, &v);
    return 0;
}

void ost_snap_cursor_close(ost_snap_cursor *c) {
    if (!c) return;
    mdb_cursor_close(c->cur);
    free(c);
}

/* ---- map entries ---------------------------------------------------------- */

int ost_snap_entries(ost_snap *s, uint64_t map, const uint8_t *from, size_t fromlen,
                     ost_entry_cursor **out) {
    *out = NULL;
    if (from && fromlen > OST_MAP_KEY_MAX)
        return snap_fail(s, OST_EINVAL, "a key of %zu bytes: keys have at most %d", fromlen,
                         OST_MAP_KEY_MAX);
    ost_entry_cursor *c = calloc(1, sizeof *c);
    if (!c) return snap_fail(s, OST_ENOMEM, "out of memory");
    c->s = s;
    c->map = map;
    if (from) {
        memcpy(c->from, from, fromlen);
        c->fromlen = fromlen;
        c->has_from = true;
    }
    int rc = ost__ecur_open(s->st, s->t, map, &c->ec);
    if (rc == OST_ENOTFOUND) { /* a format-1 store opened read-only: no entries */
        c->ec = NULL;
        c->done = true;
    } else if (rc) {
        free(c);
        return snap_fail(s, ost__ent_code(rc), "%s: map %llu: reading its entries: %s",
                         s->st->shown, (unsigned long long)map, ost__ent_strerror(rc));
    }
    *out = c;
    return 0;
}

int ost_raw_entry_next(ost_entry_cursor *c, ost_raw_entry *e) {
    memset(e, 0, sizeof *e);
    if (c->done) return OST_ENOTFOUND;
    int rc = c->started ? ost__ecur_step(c->ec, false)
                        : ost__ecur_seek(c->ec, c->has_from ? c->from : NULL, c->fromlen, false);
    c->started = true;
    if (rc == OST_ENOTFOUND) {
        c->done = true;
        return OST_ENOTFOUND;
    }
    ost__entry en;
    if (!rc) rc = ost__ecur_get(c->ec, &e->key, &e->klen, &en);
    if (rc == OST_ECORRUPT) {
        e->damage = "its checksum does not match its bytes";
        return 0;
    }
    if (rc) {
        c->done = true;
        return snap_fail(c->s, ost__ent_code(rc), "%s: map %llu: reading its entries: %s",
                         c->s->st->shown, (unsigned long long)c->map, ost__ent_strerror(rc));
    }
    e->serial = en.serial;
    e->value = en.data;
    e->vlen = en.len;
    return 0;
}

void ost_entry_cursor_close(ost_entry_cursor *c) {
    if (!c) return;
    ost__ecur_close(c->ec);
    free(c);
}

int ost_snap_next_map(ost_snap *s, uint64_t after, uint64_t *map) {
    if (s->st->no_ments || after == UINT64_MAX) return OST_ENOTFOUND;
    MDB_cursor *cur;
    int rc = mdb_cursor_open(s->t, s->st->ments, &cur);
    if (rc) return mdb_fail(s, rc, "map entries");
    uint8_t kb[8];
    ost__be64(kb, after + 1);
    MDB_val k = {8, kb}, v;
    for (rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE); rc == 0 && k.mv_size < 8;
         rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) {
        /* not an entry key: check reports it */
    }
    if (rc == 0) *map = ost__rd_be64(k.mv_data);
    mdb_cursor_close(cur);
    if (rc == MDB_NOTFOUND) return OST_ENOTFOUND;
    if (rc) return mdb_fail(s, rc, "reading the map entries");
    return 0;
}

int ost_snap_verify(ost_snap *s) {
    char first[400];
    int rc = ost__walk_first(s->st, s->t, false, first, sizeof first);
    if (rc == OST_ECORRUPT) return snap_fail(s, rc, "%s", first);
    if (rc) return snap_fail(s, rc, "%s", ost_store_errmsg(s->st));
    return 0;
}

/* ---- import ------------------------------------------------------------------ */

struct ost_import {
    ost__import *im;
};

int ost_import_begin(ost_store *st, uint64_t size_hint, ost_import **out) {
    *out = NULL;
    if (!st || !st->eng) return OST_EINVAL;
    if (!st->env) return ost__lmdb_only(st, "imports");
    ost_import *im = malloc(sizeof *im);
    if (!im) return ost__st_fail(st, OST_ENOMEM, "out of memory");
    int rc = ost__import_begin(st, size_hint, &im->im);
    if (rc) {
        free(im);
        return rc;
    }
    *out = im;
    return 0;
}

int ost_import_class(ost_import *im, uint32_t id, const char *module, size_t mlen,
                     const char *name, size_t nlen) {
    return ost__import_class(im->im, id, module, mlen, name, nlen);
}

int ost_import_record(ost_import *im, uint64_t oid, uint64_t serial, uint32_t class_id,
                      const void *pickle, size_t len) {
    return ost__import_record(im->im, oid, serial, class_id, pickle, len);
}

int ost_import_entry(ost_import *im, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial, const void *value, size_t vlen) {
    return ost__import_ment(im->im, map, key, klen, serial, value, vlen);
}

int ost_import_commit(ost_import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                      uint64_t next_class) {
    int rc = ost__import_commit(im->im, format, next_oid, last_serial, next_class);
    free(im);
    return rc;
}

void ost_import_abort(ost_import *im) {
    if (!im) return;
    ost__import_abort(im->im);
    free(im);
}

/* ---- salvage ----------------------------------------------------------------- */

int ost_salvage(const char *src, const char *dst, ost_salvage_fn report, void *ud,
                ost_salvage_stats *stats, char *msg, size_t cap) {
    return ost__salvage(src, dst, report, ud, stats, msg, cap);
}

/* ---- keys as stored (include/ostore/maps.h) -------------------------------------- */

int ost_map_kind_canon(const char *kind, char *out, size_t cap) {
    ost__mkind k;
    if (ost__mkind_parse(kind, &k)) return OST_EINVAL;
    if (strlen(k.canon) >= cap) return OST_ELIMIT;
    memcpy(out, k.canon, strlen(k.canon) + 1);
    return 0;
}

int ost_map_key_encode(const char *kind, ost_value key, bool prefix, uint8_t *out, size_t *n,
                       char *err, size_t cap) {
    ost__mkind k;
    *n = 0;
    if (ost__mkind_parse(kind, &k)) {
        snprintf(err, cap, "'%s' is not a key kind", kind ? kind : "(null)");
        return OST_EINVAL;
    }
    return ost__mkey_encode(&k, key, prefix, out, n, err, cap);
}

ost_value ost_map_key_decode(const char *kind, const uint8_t *p, size_t n) {
    ost__mkind k;
    if (ost__mkind_parse(kind, &k)) return 0;
    return ost__mkey_decode(&k, p, n);
}
