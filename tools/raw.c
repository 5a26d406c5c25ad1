/* ostore CLI: read-only access to the records of an open store through a
 * snapshot of the public raw API (include/ostore/raw.h), for info, ls,
 * cat, refs, check and export, which look at records without building
 * objects. The layout is docs/format.md. */
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct {
    uint32_t id;
    const char *module, *name; /* owned by the snapshot */
    char *qual; /* module.Name, a class version's without its field list */
    const char *fields; /* a class version's field list, "f1,f2)" in name; or NULL */
} raw_class;

struct raw_txn {
    ost_store *st;
    ost_snap *s;
    raw_class *cls;
    size_t ncls;
    uint32_t map_cid, set_cid; /* ostore.maps.OrderedMap and OrderedSet */
    bool has_map_cid, has_set_cid;
    ost_reader *rd; /* made on first use */
    char unknown[32];
};

struct raw_iter {
    raw_txn *t;
    ost_snap_cursor *cur;
};

static int cmp_class(const void *a, const void *b) {
    uint32_t x = ((const raw_class *)a)->id, y = ((const raw_class *)b)->id;
    return x < y ? -1 : x > y;
}

int raw_begin(ost_store *st, raw_txn **out) {
    *out = NULL;
    raw_txn *t = calloc(1, sizeof *t);
    if (!t) return fail("out of memory");
    t->st = st;
    if (ost_snap_open(st, &t->s)) {
        free(t);
        return fail("%s", ost_store_errmsg(st));
    }
    uint32_t id;
    const char *m, *n;
    for (size_t i = 0; ost_snap_class(t->s, i, &id, &m, &n) == 0; i++) {
        raw_class *nc = realloc(t->cls, (t->ncls + 1) * sizeof *nc);
        size_t ql = strlen(m) + 2 * strlen(n) + 3; /* module.Name, NUL, the field list */
        char *q = nc ? malloc(ql) : NULL;
        if (!q) {
            if (nc) t->cls = nc;
            raw_end(t);
            return fail("out of memory");
        }
        t->cls = nc;
        /* a class version, Name(f1,f2) (format 4), is shown as its class */
        const char *open = strchr(n, '(');
        size_t nl = strlen(n);
        bool version = open && nl && n[nl - 1] == ')';
        int at = snprintf(q, ql, "%s.%.*s", m, version ? (int)(open - n) : (int)nl, n);
        char *fl = version ? strcpy(q + at + 1, open + 1) : NULL;
        t->cls[t->ncls++] = (raw_class){id, m, n, q, fl};
    }
    if (t->ncls) qsort(t->cls, t->ncls, sizeof *t->cls, cmp_class);
    t->has_map_cid = raw_class_id(t, "ostore.maps.OrderedMap", &t->map_cid);
    t->has_set_cid = raw_class_id(t, "ostore.maps.OrderedSet", &t->set_cid);
    *out = t;
    return EXIT_OK;
}

void raw_end(raw_txn *t) {
    if (!t) return;
    ost_reader_free(t->rd);
    for (size_t i = 0; i < t->ncls; i++) free(t->cls[i].qual);
    free(t->cls);
    ost_snap_close(t->s);
    free(t);
}

static raw_class *find_class(raw_txn *t, uint32_t cid) {
    raw_class key = {.id = cid};
    return t->ncls ? bsearch(&key, t->cls, t->ncls, sizeof *t->cls, cmp_class) : NULL;
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

const char *raw_class_fields(raw_txn *t, uint32_t cid) {
    raw_class *c = find_class(t, cid);
    return c ? c->fields : NULL;
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

static void fill(raw_rec *r, const ost_raw_record *x) {
    memset(r, 0, sizeof *r);
    r->oid = x->oid;
    r->serial = x->serial;
    r->cid = x->class_id;
    r->size = x->size;
    r->bad_header = x->damage != NULL;
    r->damage = x->damage;
    r->pickle = x->pickle;
    r->len = x->len;
}

int raw_iter_open(raw_txn *t, raw_iter **out) {
    *out = NULL;
    raw_iter *it = calloc(1, sizeof *it);
    if (!it) return fail("out of memory");
    it->t = t;
    if (ost_snap_records(t->s, 0, &it->cur)) {
        free(it);
        return fail("%s", ost_snap_errmsg(t->s));
    }
    *out = it;
    return EXIT_OK;
}

int raw_iter_next(raw_iter *it, raw_rec *r) {
    ost_raw_record x;
    int rc = ost_snap_next(it->cur, &x);
    if (rc == OST_ENOTFOUND) return 0;
    if (rc) {
        fail("%s", ost_snap_errmsg(it->t->s));
        return -1;
    }
    fill(r, &x);
    return 1;
}

void raw_iter_close(raw_iter *it) {
    if (!it) return;
    ost_snap_cursor_close(it->cur);
    free(it);
}

int raw_get(raw_txn *t, uint64_t oid, raw_rec *r) {
    ost_raw_record x;
    int rc = ost_snap_get(t->s, oid, &x);
    if (rc) return rc;
    fill(r, &x);
    return 0;
}

int raw_scan_refs(const raw_rec *r, void (*fn)(void *ud, uint64_t oid), void *ud) {
    if (r->bad_header) return OST_ECORRUPT;
    return ost_pickle_refs(r->pickle, r->len, fn, ud);
}

int raw_scan_pickle_refs(const uint8_t *p, size_t n, void (*fn)(void *ud, uint64_t oid),
                         void *ud) {
    return ost_pickle_refs(p, n, fn, ud);
}

/* ---- maps --------------------------------------------------------------------- */

int raw_map_class(raw_txn *t, const raw_rec *r) {
    if (r->bad_header) return 0;
    if (t->has_map_cid && r->cid == t->map_cid) return 1;
    if (t->has_set_cid && r->cid == t->set_cid) return 2;
    return 0;
}

int raw_keep_pid(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    /* format 4's (oid, class id): the oid; the class is the record's */
    if (ost_typeof(pid) == OST_T_TUPLE && ost_len(pid) == 2 &&
        ost_typeof(ost_item(pid, 0)) == OST_T_INT && ost_typeof(ost_item(pid, 1)) == OST_T_INT)
        pid = ost_item(pid, 0);
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

ost_reader *raw_reader(raw_txn *t) {
    if (!t->rd && (t->rd = ost_reader_new())) ost_reader_set_persistent_load(t->rd, raw_keep_pid, NULL);
    return t->rd;
}

ost_snap *raw_snap(raw_txn *t) { return t->s; }
ost_store *raw_store(raw_txn *t) { return t->st; }

/* ---- the page walk ----------------------------------------------------------------- */

int raw_verify_pages(ost_store *st, const char *db) {
    ost_snap *s;
    if (ost_snap_open(st, &s)) return fail("%s", ost_store_errmsg(st));
    int rc = ost_snap_verify(s);
    if (rc == OST_ECORRUPT)
        rc = fail("%s: damaged store: %s ('ostore check %s' lists the damage, 'ostore salvage "
                  "%s NEWSTORE' copies what is intact)",
                  db, ost_snap_errmsg(s), db, db);
    else if (rc)
        rc = fail("%s: %s", db, ost_snap_errmsg(s));
    ost_snap_close(s);
    return rc ? EXIT_FAIL : EXIT_OK;
}
