/* ostore CLI: read-only access to the records of an open store through
 * its LMDB handles (store/store_internal.h), for info, ls, cat, refs,
 * check and export, which look at records without building objects. The
 * layout is docs/format.md. */
#include <stdlib.h>
#include <string.h>

#include "../store/store_internal.h"
#include "cli.h"

typedef struct {
    uint32_t id;
    char *module, *name, *qual;
} raw_class;

struct raw_txn {
    ost_store *st;
    MDB_txn *t;
    raw_class *cls;
    size_t ncls;
    uint32_t map_cid, set_cid; /* ostore.maps.OrderedMap and OrderedSet */
    bool has_map_cid, has_set_cid;
    ost_reader *rd; /* made on first use */
    char unknown[32];
};

struct raw_iter {
    raw_txn *t;
    MDB_cursor *cur;
    bool started;
};

static int cmp_class(const void *a, const void *b) {
    uint32_t x = ((const raw_class *)a)->id, y = ((const raw_class *)b)->id;
    return x < y ? -1 : x > y;
}

static int mdb_fail(raw_txn *t, int rc, const char *what) {
    return fail("%s: %s: %s", shown(t->st->path), what, mdb_strerror(rc));
}

int raw_begin(ost_store *st, raw_txn **out) {
    *out = NULL;
    raw_txn *t = calloc(1, sizeof *t);
    if (!t) return fail("out of memory");
    t->st = st;
    uv_rwlock_rdlock(&st->maplock);
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &t->t);
    if (rc) {
        uv_rwlock_rdunlock(&st->maplock);
        free(t);
        return fail("%s: cannot start a read transaction: %s", shown(st->path), mdb_strerror(rc));
    }
    ost__format_refresh(st, t->t);
    MDB_cursor *cur;
    rc = mdb_cursor_open(t->t, st->classes, &cur);
    if (rc) {
        mdb_fail(t, rc, "classes");
        raw_end(t);
        return EXIT_FAIL;
    }
    MDB_val k, v;
    size_t cap = 0;
    while ((rc = mdb_cursor_get(cur, &k, &v, MDB_NEXT)) == 0) {
        if (k.mv_size != 5 || ((char *)k.mv_data)[0] != 'i') continue;
        const char *m = v.mv_data;
        const char *z = memchr(m, 0, v.mv_size);
        if (!z) continue; /* check reports records whose class cannot be named */
        if (t->ncls == cap) {
            cap = cap ? cap * 2 : 16;
            raw_class *n = realloc(t->cls, cap * sizeof *n);
            if (!n) {
                rc = ENOMEM;
                break;
            }
            t->cls = n;
        }
        raw_class *c = &t->cls[t->ncls];
        memcpy(&c->id, (char *)k.mv_data + 1, 4);
        size_t ml = (size_t)(z - m), nl = v.mv_size - ml - 1;
        c->module = strndup(m, ml);
        c->name = strndup(z + 1, nl);
        c->qual = malloc(ml + nl + 2);
        if (!c->module || !c->name || !c->qual) {
            free(c->module);
            free(c->name);
            free(c->qual);
            rc = ENOMEM;
            break;
        }
        snprintf(c->qual, ml + nl + 2, "%s.%s", c->module, c->name);
        t->ncls++;
    }
    mdb_cursor_close(cur);
    if (rc != MDB_NOTFOUND) {
        mdb_fail(t, rc, "reading the class table");
        raw_end(t);
        return EXIT_FAIL;
    }
    if (t->ncls) qsort(t->cls, t->ncls, sizeof *t->cls, cmp_class);
    t->has_map_cid = raw_class_id(t, "ostore.maps.OrderedMap", &t->map_cid);
    t->has_set_cid = raw_class_id(t, "ostore.maps.OrderedSet", &t->set_cid);
    *out = t;
    return EXIT_OK;
}

void raw_end(raw_txn *t) {
    if (!t) return;
    mdb_txn_abort(t->t);
    uv_rwlock_rdunlock(&t->st->maplock);
    ost_reader_free(t->rd);
    for (size_t i = 0; i < t->ncls; i++) {
        free(t->cls[i].module);
        free(t->cls[i].name);
        free(t->cls[i].qual);
    }
    free(t->cls);
    free(t);
}

static raw_class *find_class(raw_txn *t, uint32_t cid) {
    raw_class key = {.id = cid};
    return bsearch(&key, t->cls, t->ncls, sizeof *t->cls, cmp_class);
}

const char *raw_class_name(raw_txn *t, uint32_t cid) {
    raw_class *c = find_class(t, cid);
    if (c) return c->qual;
    snprintf(t->unknown, sizeof t->unknown, "?class-%u", cid);
    return t->unknown;
}

bool raw_class_id(raw_txn *t, const char *qualname, uint32_t *cid) {
    for (size_t i = 0; i < t->ncls; i++)
        if (strcmp(t->cls[i].qual, qualname) == 0) {
            *cid = t->cls[i].id;
            return true;
        }
    return false;
}

size_t raw_class_count(raw_txn *t) { return t->ncls; }

ptrdiff_t raw_class_index(raw_txn *t, uint32_t cid) {
    raw_class *c = find_class(t, cid);
    return c ? c - t->cls : -1;
}

uint32_t raw_class_at(raw_txn *t, size_t i, const char **module, const char **name) {
    if (module) *module = t->cls[i].module;
    if (name) *name = t->cls[i].name;
    return t->cls[i].id;
}

static void fill(raw_txn *t, raw_rec *r, const MDB_val *k, const MDB_val *v) {
    memset(r, 0, sizeof *r);
    r->oid = k->mv_size == 8 ? ost__rd_be64(k->mv_data) : UINT64_MAX;
    r->size = v->mv_size;
    int dmg = k->mv_size != 8 ? -1 : ost__rec_open(t->st, r->oid, v, &r->serial, &r->cid);
    if (dmg) {
        r->bad_header = true;
        r->damage = dmg < 0 ? "its key is not an oid" : ost__damage_text(dmg);
        r->serial = 0;
        r->cid = 0;
        return;
    }
    r->pickle = (const uint8_t *)v->mv_data + OST_HDR_SIZE;
    r->len = v->mv_size - OST_HDR_SIZE;
}

int raw_iter_open(raw_txn *t, raw_iter **out) {
    *out = NULL;
    raw_iter *it = calloc(1, sizeof *it);
    if (!it) return fail("out of memory");
    it->t = t;
    int rc = mdb_cursor_open(t->t, t->st->recs, &it->cur);
    if (rc) {
        free(it);
        return mdb_fail(t, rc, "records");
    }
    *out = it;
    return EXIT_OK;
}

int raw_iter_next(raw_iter *it, raw_rec *r) {
    MDB_val k, v;
    int rc = mdb_cursor_get(it->cur, &k, &v, it->started ? MDB_NEXT : MDB_FIRST);
    it->started = true;
    if (rc == MDB_NOTFOUND) return 0;
    if (rc) {
        mdb_fail(it->t, rc, "reading records");
        return -1;
    }
    fill(it->t, r, &k, &v);
    return 1;
}

void raw_iter_close(raw_iter *it) {
    if (!it) return;
    mdb_cursor_close(it->cur);
    free(it);
}

int raw_get(raw_txn *t, uint64_t oid, raw_rec *r) {
    uint8_t kb[8];
    ost__be64(kb, oid);
    MDB_val k = {8, kb}, v;
    int rc = mdb_get(t->t, t->st->recs, &k, &v);
    if (rc == MDB_NOTFOUND) return OST_ENOTFOUND;
    if (rc) return ost__mdb_code(rc);
    fill(t, r, &k, &v);
    return 0;
}

int raw_meta(raw_txn *t, const char *key, uint64_t *out) {
    MDB_val k = {strlen(key), (void *)key}, v;
    int rc = mdb_get(t->t, t->st->meta, &k, &v);
    if (rc) return ost__mdb_code(rc);
    if (v.mv_size != 8) return OST_ECORRUPT;
    uint64_t x = 0;
    for (int i = 7; i >= 0; i--) x = x << 8 | ((uint8_t *)v.mv_data)[i];
    *out = x;
    return 0;
}

uint64_t raw_count(raw_txn *t) {
    MDB_stat ms;
    return mdb_stat(t->t, t->st->recs, &ms) == 0 ? ms.ms_entries : 0;
}

void raw_env(raw_txn *t, uint64_t *psize, uint64_t *pages_used, uint64_t *map_size) {
    MDB_envinfo ei;
    MDB_stat ms;
    mdb_env_info(t->st->env, &ei);
    mdb_env_stat(t->st->env, &ms);
    *psize = ms.ms_psize;
    *pages_used = (uint64_t)ei.me_last_pgno + 1;
    *map_size = ei.me_mapsize;
}

int raw_scan_refs(const raw_rec *r, void (*fn)(void *ud, uint64_t oid), void *ud) {
    if (r->bad_header) return OST_ECORRUPT;
    return ost__scan_pids(r->pickle, r->len, fn, ud);
}

int raw_scan_pickle_refs(const uint8_t *p, size_t n, void (*fn)(void *ud, uint64_t oid),
                         void *ud) {
    return ost__scan_pids(p, n, fn, ud);
}

/* ---- maps --------------------------------------------------------------------- */

int raw_map_class(raw_txn *t, const raw_rec *r) {
    if (r->bad_header) return 0;
    if (t->has_map_cid && r->cid == t->map_cid) return 1;
    if (t->has_set_cid && r->cid == t->set_cid) return 2;
    return 0;
}

/* References print as persistent(oid), as stored. */
static int keep_pid(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

ost_reader *raw_reader(raw_txn *t) {
    if (!t->rd && (t->rd = ost_reader_new())) ost_reader_set_persistent_load(t->rd, keep_pid, NULL);
    return t->rd;
}

void raw_ents_stat(raw_txn *t, uint64_t *entries, uint64_t *bytes) {
    MDB_stat ms;
    *entries = *bytes = 0;
    if (t->st->no_ments || mdb_stat(t->t, t->st->ments, &ms)) return;
    *entries = ms.ms_entries;
    *bytes = (uint64_t)ms.ms_psize * (ms.ms_branch_pages + ms.ms_leaf_pages + ms.ms_overflow_pages);
}

void *raw_mdb_txn(raw_txn *t) { return t->t; }
ost_store *raw_store(raw_txn *t) { return t->st; }

/* ---- the page walk ----------------------------------------------------------------- */

int raw_verify_pages(ost_store *st, const char *db) {
    uv_rwlock_rdlock(&st->maplock);
    MDB_txn *t;
    int rc = mdb_txn_begin(st->env, NULL, MDB_RDONLY, &t);
    if (rc) {
        uv_rwlock_rdunlock(&st->maplock);
        return fail("%s: cannot start a read transaction: %s", db, mdb_strerror(rc));
    }
    char first[400];
    rc = ost__walk_first(st, t, false, first, sizeof first);
    mdb_txn_abort(t);
    uv_rwlock_rdunlock(&st->maplock);
    if (rc == OST_ECORRUPT)
        return fail("%s: damaged store: %s ('ostore check %s' lists the damage, 'ostore salvage "
                    "%s NEWSTORE' copies what is intact)",
                    db, first, db, db);
    if (rc) return fail("%s: %s", db, ost_store_errmsg(st));
    return EXIT_OK;
}
