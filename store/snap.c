/* Raw access (include/ostore/raw.h): snapshots read record by record, map
 * entries as stored, the class table and the counters; imports; salvage.
 * What the ostore CLI reads and writes stores with. Snapshots and imports
 * reach the store only through its engine table (store/engine.h: sessions,
 * scan, get, the entry cursor, snap_stat, verify, imp_*), so they work on
 * every engine; salvage reads a damaged LMDB directory with ostore's own
 * page reader and stays LMDB's. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "store_internal.h"
#include "ostore/raw.h"

/* A snapshot is an engine session of its own with its read snapshot open
 * and pinned from ost_snap_open to ost_snap_close, so what get returns
 * stays valid (LMDB: it points into the map, which no resize unmaps
 * meanwhile; PostgreSQL keeps the results until the snapshot ends). */

typedef struct {
    uint32_t id;
    char *module, *name;
} snap_class;

/* Records of a cursor, copied out of one scan call: a scan's views live
 * only while its callback runs on PostgreSQL (a page of rows at a time),
 * so the cursor copies a batch and walks it, then scans on from the oid
 * after its last. */
typedef struct {
    uint64_t oid, serial;
    uint32_t cid;
    size_t off, len, stored; /* the pickle at buf + off */
    const char *damage;
} snap_rec;

#define BATCH_RECS 4096
#define BATCH_BYTES ((size_t)4 << 20)
/* what a batch callback returns to stop the scan (not an OST_E* code) */
#define BATCH_FULL 1

struct ost_snap {
    uint32_t magic; /* OST__H_SNAP (ost_errmsg) */
    ost_store *st;
    const ost__engine_ops *ops;
    ost__sess *sess;
    bool pinned;
    ost__snapinfo info;
    snap_class *cls; /* in ascending id order */
    size_t ncls, capcls;
    uint64_t *maps; /* the oids that have entries, ascending; made by the first next_map */
    size_t nmaps, capmaps;
    bool maps_known;
    bool counted; /* in st->nraw */
    char msg[512];
};

/* Counts a raw snapshot or import in or out of st->nraw (a drop waits
 * for none to be open). */
static void raw_count(ost_store *st, int d) {
    uv_mutex_lock(&st->lock);
    st->nraw += (size_t)d;
    uv_mutex_unlock(&st->lock);
}

struct ost_snap_cursor {
    ost_snap *s;
    uint64_t next;  /* the oid the next scan starts at */
    bool done;      /* the last scan reached the end */
    snap_rec *recs; /* the batch */
    size_t n, at, caprecs;
    uint8_t *buf;   /* the batch's pickles */
    size_t used, capbuf;
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

/* An engine operation's failure as the snapshot's: the engine set the
 * store's message for this thread. */
static int eng_fail(ost_snap *s, int code) {
    return snap_fail(s, code, "%s", ost_store_errmsg(s->st));
}

static int cmp_class(const void *a, const void *b) {
    uint32_t x = ((const snap_class *)a)->id, y = ((const snap_class *)b)->id;
    return x < y ? -1 : x > y;
}

/* class_each's callback: copies the class into s->cls. */
static int add_class(void *ud, const ost__classview *c) {
    ost_snap *s = ud;
    if (ost__reserve((void **)&s->cls, &s->capcls, s->ncls + 1, sizeof *s->cls, 16))
        return OST_ENOMEM;
    char *m = strndup(c->module, c->mlen), *nm = strndup(c->name, c->nlen);
    if (!m || !nm) {
        free(m);
        free(nm);
        return OST_ENOMEM;
    }
    s->cls[s->ncls++] = (snap_class){c->id, m, nm};
    return 0;
}

/* Reads the class table into s->cls. */
static int load_classes(ost_snap *s) {
    int rc = s->ops->class_each(s->sess, add_class, s);
    if (rc == OST_ENOMEM) return snap_fail(s, rc, "%s: out of memory", s->st->shown);
    if (rc) return eng_fail(s, rc);
    if (s->ncls) qsort(s->cls, s->ncls, sizeof *s->cls, cmp_class);
    return 0;
}

int ost_snap_open(ost_store *st, ost_snap **out) {
    *out = NULL;
    if (!st || !st->eng || !st->ops) return OST_EINVAL;
    ost_snap *s = calloc(1, sizeof *s);
    if (!s) return ost__st_fail(st, OST_ENOMEM, "%s: out of memory", st->shown);
    s->magic = OST__H_SNAP;
    s->st = st;
    s->ops = st->ops;
    int rc = s->ops->sess_open(st->eng, &s->sess);
    if (rc) {
        free(s);
        return rc;
    }
    if ((rc = s->ops->snap_begin(s->sess, &s->info))) {
        s->ops->sess_close(s->sess);
        free(s);
        return rc;
    }
    if ((rc = s->ops->pin(s->sess))) {
        ost_snap_close(s);
        return rc;
    }
    s->pinned = true;
    if ((rc = load_classes(s))) {
        ost__st_fail(st, rc, "%s", s->msg);
        ost_snap_close(s);
        return rc;
    }
    s->counted = true;
    raw_count(st, 1);
    *out = s;
    return 0;
}

void ost_snap_close(ost_snap *s) {
    if (!s) return;
    if (s->counted) raw_count(s->st, -1);
    if (s->pinned) s->ops->unpin(s->sess);
    s->ops->snap_end(s->sess);
    s->ops->sess_close(s->sess);
    for (size_t i = 0; i < s->ncls; i++) {
        free(s->cls[i].module);
        free(s->cls[i].name);
    }
    free(s->cls);
    free(s->maps);
    free(s);
}

const char *ost_snap_errmsg(const ost_snap *s) { return s ? s->msg : ""; }

const char *ost_store_path(const ost_store *st) {
    const char *p = st && st->eng && st->ops->path ? st->ops->path(st->eng) : NULL;
    return p ? p : "";
}

int ost_snap_stat(ost_snap *s, ost_snap_stats *out) {
    int rc = s->ops->snap_stat(s->sess, out);
    return rc ? eng_fail(s, rc) : 0;
}

int ost_snap_class(ost_snap *s, size_t i, uint32_t *id, const char **module, const char **name) {
    if (i >= s->ncls) return OST_ENOTFOUND;
    if (id) *id = s->cls[i].id;
    if (module) *module = s->cls[i].module;
    if (name) *name = s->cls[i].name;
    return 0;
}

/* Fills r from the engine's view v of oid. */
static void fill(ost_raw_record *r, uint64_t oid, const ost__recview *v) {
    memset(r, 0, sizeof *r);
    r->oid = oid;
    if (!v->pickle) { /* damaged: scan says what and its size */
        r->damage = v->damage ? v->damage : "damaged";
        r->size = v->stored;
        return;
    }
    r->serial = v->serial;
    r->class_id = v->cid;
    r->pickle = v->pickle;
    r->len = v->len;
    r->size = v->len + OST_HDR_SIZE;
}

/* A scan callback that keeps the one view it is given. */
typedef struct {
    uint64_t oid;
    ost__recview v;
    bool got;
} one_rec;

static int take_one(void *ud, uint64_t oid, const ost__recview *v) {
    one_rec *o = ud;
    o->oid = oid;
    o->v = *v;
    o->got = true;
    return BATCH_FULL;
}

int ost_snap_get(ost_snap *s, uint64_t oid, ost_raw_record *r) {
    ost__recview v = {0};
    int rc = s->ops->get(s->sess, oid, &v);
    if (rc == OST_ECORRUPT && oid < UINT64_MAX) {
        /* a damaged record: the scan of its one oid says what is wrong; the
         * view lives while the session is pinned (LMDB is the engine that
         * checks records) */
        one_rec o = {0};
        int src = s->ops->scan(s->sess, oid, oid + 1, take_one, &o);
        if ((src == 0 || src == BATCH_FULL) && o.got) {
            fill(r, oid, &o.v);
            return 0;
        }
    }
    if (rc == OST_ENOTFOUND)
        return snap_fail(s, OST_ENOTFOUND, "oid %llu: no such object", (unsigned long long)oid);
    if (rc) return eng_fail(s, rc);
    fill(r, oid, &v);
    return 0;
}

int ost_snap_records(ost_snap *s, uint64_t from, ost_snap_cursor **out) {
    *out = NULL;
    ost_snap_cursor *c = calloc(1, sizeof *c);
    if (!c) return snap_fail(s, OST_ENOMEM, "%s: out of memory", s->st->shown);
    c->s = s;
    c->next = from;
    *out = c;
    return 0;
}

/* scan's callback: copies the record into the cursor's batch. */
static int batch_add(void *ud, uint64_t oid, const ost__recview *v) {
    ost_snap_cursor *c = ud;
    if (c->n == BATCH_RECS || (c->n && c->used + v->len > BATCH_BYTES)) return BATCH_FULL;
    if (ost__reserve((void **)&c->recs, &c->caprecs, c->n + 1, sizeof *c->recs, 256) ||
        ost__reserve((void **)&c->buf, &c->capbuf, c->used + v->len, 1, 1 << 16))
        return OST_ENOMEM;
    snap_rec *sr = &c->recs[c->n++];
    *sr = (snap_rec){oid, v->serial, v->cid, c->used, v->len, v->stored, NULL};
    if (!v->pickle) sr->damage = v->damage ? v->damage : "damaged";
    else if (v->len) memcpy(c->buf + c->used, v->pickle, v->len);
    c->used += v->len;
    c->next = oid + 1;
    return 0;
}

/* Scans the next batch from c->next. */
static int batch_fill(ost_snap_cursor *c) {
    c->n = c->at = c->used = 0;
    ost_snap *s = c->s;
    int rc = s->ops->scan(s->sess, c->next, 0, batch_add, c);
    if (rc == OST_ENOMEM && !c->n)
        return snap_fail(s, rc, "%s: out of memory", s->st->shown);
    if (rc == OST_ENOMEM) rc = BATCH_FULL; /* walk what was copied, then try again */
    if (rc && rc != BATCH_FULL) return eng_fail(s, rc);
    if (rc != BATCH_FULL || c->next == 0 /* past UINT64_MAX */) c->done = true;
    return 0;
}

int ost_snap_next(ost_snap_cursor *c, ost_raw_record *r) {
    if (c->at == c->n) {
        if (c->done) return OST_ENOTFOUND;
        int rc = batch_fill(c);
        if (rc) return rc;
        if (!c->n) return OST_ENOTFOUND;
    }
    const snap_rec *sr = &c->recs[c->at++];
    ost__recview v = {sr->serial, sr->cid, sr->damage ? NULL : c->buf + sr->off, sr->len,
                      sr->damage, sr->stored};
    fill(r, sr->oid, &v);
    return 0;
}

void ost_snap_cursor_close(ost_snap_cursor *c) {
    if (!c) return;
    free(c->recs);
    free(c->buf);
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
    if (!c) return snap_fail(s, OST_ENOMEM, "%s: out of memory", s->st->shown);
    c->s = s;
    c->map = map;
    if (from) {
        memcpy(c->from, from, fromlen);
        c->fromlen = fromlen;
        c->has_from = true;
    }
    int rc = s->ops->ecur_open(s->sess, map, &c->ec);
    if (rc == OST_ENOTFOUND) { /* a format-1 store opened read-only: no entries */
        c->ec = NULL;
        c->done = true;
    } else if (rc) {
        free(c);
        return eng_fail(s, rc);
    }
    *out = c;
    return 0;
}

int ost_raw_entry_next(ost_entry_cursor *c, ost_raw_entry *e) {
    memset(e, 0, sizeof *e);
    if (c->done) return OST_ENOTFOUND;
    const ost__engine_ops *ops = c->s->ops;
    int rc = c->started ? ops->ecur_step(c->ec, false)
                        : ops->ecur_seek(c->ec, c->has_from ? c->from : NULL, c->fromlen, false);
    c->started = true;
    if (rc == OST_ENOTFOUND) {
        c->done = true;
        return OST_ENOTFOUND;
    }
    ost__entry en;
    if (!rc) rc = ops->ecur_get(c->ec, &e->key, &e->klen, &en);
    if (rc == OST_ECORRUPT) {
        e->damage = "its checksum does not match its bytes";
        return 0;
    }
    if (rc) {
        c->done = true;
        return snap_fail(c->s, rc, "%s: map %llu: reading its entries: %s", c->s->st->shown,
                         (unsigned long long)c->map, ost_strerror(rc));
    }
    e->serial = en.serial;
    e->value = en.data;
    e->vlen = en.len;
    return 0;
}

void ost_entry_cursor_close(ost_entry_cursor *c) {
    if (!c) return;
    if (c->ec) c->s->ops->ecur_close(c->ec);
    free(c);
}

/* ent_each_map's callback: collects the map oids (0: go on, never drop). */
static int add_map(void *ud, uint64_t map) {
    ost_snap *s = ud;
    if (ost__reserve((void **)&s->maps, &s->capmaps, s->nmaps + 1, sizeof *s->maps, 16))
        return OST_ENOMEM;
    if (!s->nmaps || s->maps[s->nmaps - 1] != map) s->maps[s->nmaps++] = map;
    return 0;
}

int ost_snap_next_map(ost_snap *s, uint64_t after, uint64_t *map) {
    if (!s->maps_known) {
        int rc = s->ops->ent_each_map(s->sess, add_map, s);
        if (rc == OST_ENOMEM) return snap_fail(s, rc, "%s: out of memory", s->st->shown);
        if (rc) return eng_fail(s, rc);
        s->maps_known = true;
    }
    /* the first map above after (after 0: the first map, the root never is) */
    size_t lo = 0, hi = s->nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->maps[mid] <= after && after) lo = mid + 1;
        else hi = mid;
    }
    if (lo == s->nmaps) return OST_ENOTFOUND;
    *map = s->maps[lo];
    return 0;
}

int ost_snap_verify(ost_snap *s) {
    if (!s->ops->verify) return 0;
    char first[400];
    first[0] = 0;
    int rc = s->ops->verify(s->sess, first, sizeof first);
    if (rc == OST_ECORRUPT && first[0]) return snap_fail(s, rc, "%s", first);
    if (rc) return eng_fail(s, rc);
    return 0;
}

/* ---- import ------------------------------------------------------------------ */

/* The engine's import (engine.h: imp_*) with the checks that do not depend
 * on the engine: class names, and the counters and format at commit
 * against what was added. */
struct ost_import {
    ost_store *st;
    const ost__engine_ops *ops;
    ost__import *im;
    uint64_t records, entries;
    uint64_t top_oid, top_serial; /* the largest oid and serial added */
    uint32_t top_cid;
};

int ost_import_begin(ost_store *st, uint64_t size_hint, ost_import **out) {
    *out = NULL;
    if (!st || !st->eng || !st->ops) return OST_EINVAL;
    if (st->read_only) return ost__st_fail(st, OST_EREADONLY, "%s: opened read-only", st->shown);
    uv_mutex_lock(&st->lock);
    bool conns = st->conns != NULL;
    uv_mutex_unlock(&st->lock);
    if (conns) return ost__st_fail(st, OST_EBUSY, "%s: connections are open", st->shown);
    ost_import *im = calloc(1, sizeof *im);
    if (!im) return ost__st_fail(st, OST_ENOMEM, "%s: out of memory", st->shown);
    im->st = st;
    im->ops = st->ops;
    int rc = im->ops->imp_begin(st->eng, size_hint, &im->im);
    if (rc) {
        free(im);
        return rc;
    }
    raw_count(st, 1);
    *out = im;
    return 0;
}

int ost_import_class(ost_import *im, uint32_t id, const char *module, size_t mlen,
                     const char *name, size_t nlen) {
    ost_store *st = im->st;
    if (id == 0) return ost__st_fail(st, OST_EINVAL, "class id 0 (class ids start at 1)");
    /* a name the class table cannot give back (the records of the class
     * would become undecodable: check calls them of an unknown class) */
    const char *parts[2] = {module, name}, *what[2] = {"module", "name"};
    size_t lens[2] = {mlen, nlen};
    for (int i = 0; i < 2; i++) {
        const char *why = !lens[i] ? "is empty"
                          : memchr(parts[i], 0, lens[i]) ? "holds a NUL byte"
                          : !ost__utf8_strict(parts[i], lens[i]) ? "is not valid UTF-8"
                          : NULL;
        if (why) return ost__st_fail(st, OST_EINVAL, "class id %u: its %s %s", id, what[i], why);
    }
    if (mlen + nlen + 2 > 1000)
        return ost__st_fail(st, OST_EINVAL,
                            "class id %u: module and name are %zu bytes, more than the 998 a "
                            "class table entry holds",
                            id, mlen + nlen);
    int rc = im->ops->imp_class(im->im, id, module, mlen, name, nlen);
    if (!rc && id > im->top_cid) im->top_cid = id;
    return rc;
}

int ost_import_record(ost_import *im, uint64_t oid, uint64_t serial, uint32_t class_id,
                      const void *pickle, size_t len) {
    int rc = im->ops->imp_record(im->im, oid, serial, class_id, pickle, len);
    if (rc) return rc;
    im->records++;
    if (oid > im->top_oid) im->top_oid = oid;
    if (serial > im->top_serial) im->top_serial = serial;
    return 0;
}

int ost_import_entry(ost_import *im, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial, const void *value, size_t vlen) {
    ost_store *st = im->st;
    if (klen > OST_MAP_KEY_MAX)
        return ost__st_fail(st, OST_EINVAL, "map %llu: a %zu-byte key (the longest is %d bytes)",
                            (unsigned long long)map, klen, OST_MAP_KEY_MAX);
    if (serial == 0)
        return ost__st_fail(st, OST_EINVAL, "map %llu: an entry with serial 0",
                            (unsigned long long)map);
    int rc = im->ops->imp_entry(im->im, map, key, klen, serial, value, vlen);
    if (rc) return rc;
    im->entries++;
    if (serial > im->top_serial) im->top_serial = serial;
    return 0;
}

/* Whether the counters and the format fit what was added: 0 or OST_EINVAL
 * with the store's message. */
static int import_counters_check(ost_import *im, uint64_t format, uint64_t next_oid,
                                 uint64_t last_serial, uint64_t next_class) {
    ost_store *st = im->st;
    if (format < 1 || format > OST_STORE_FORMAT)
        return ost__st_fail(st, OST_EINVAL, "store format %llu: this ostore writes formats 1 to %d",
                            (unsigned long long)format, OST_STORE_FORMAT);
    if (format < 2 && im->entries)
        return ost__st_fail(st, OST_EINVAL,
                            "a format-%llu store has no map entries, yet %llu were given",
                            (unsigned long long)format, (unsigned long long)im->entries);
    const char *bad = NULL;
    uint64_t val = 0;
    if (next_oid > OST__OID_LIMIT || (im->records && next_oid <= im->top_oid))
        bad = "next_oid", val = next_oid;
    else if (last_serial >= OST__SERIAL_LIMIT || last_serial < im->top_serial || !last_serial)
        bad = "last_serial", val = last_serial;
    else if (next_class > OST__CLASS_LIMIT || next_class <= im->top_cid || !next_class)
        bad = "next_class", val = next_class;
    if (bad)
        return ost__st_fail(st, OST_EINVAL,
                            "%s %llu does not fit what was imported (largest oid %llu, serial %llu, "
                            "class id %u) or is past its limit",
                            bad, (unsigned long long)val, (unsigned long long)im->top_oid,
                            (unsigned long long)im->top_serial, im->top_cid);
    return 0;
}

int ost_import_commit(ost_import *im, uint64_t format, uint64_t next_oid, uint64_t last_serial,
                      uint64_t next_class) {
    ost_store *st = im->st;
    int rc = import_counters_check(im, format, next_oid, last_serial, next_class);
    raw_count(st, -1);
    if (rc) {
        im->ops->imp_abort(im->im);
        free(im);
        return rc;
    }
    rc = im->ops->imp_commit(im->im, format, next_oid, last_serial, next_class);
    free(im);
    if (!rc) {
        /* class ids cached before the import may name other classes now */
        uv_mutex_lock(&st->lock);
        ost__class_cache_free(st);
        uv_mutex_unlock(&st->lock);
    }
    return rc;
}

void ost_import_abort(ost_import *im) {
    if (!im) return;
    raw_count(im->st, -1);
    im->ops->imp_abort(im->im);
    free(im);
}

/* ost_store_drop_new and ost_store_drop: the engine removes the store in
 * one write transaction that checks it (only_new); the handle is then
 * shut, so every later call but ost_store_close fails with OST_EINVAL. */
static int store_drop(ost_store *st, bool only_new) {
    if (!st || !st->eng || !st->ops) return OST_EINVAL;
    if (st->read_only) return ost__st_fail(st, OST_EREADONLY, "%s: opened read-only", st->shown);
    uv_mutex_lock(&st->lock);
    bool busy = st->conns != NULL, raw = st->nraw != 0;
    uv_mutex_unlock(&st->lock);
    if (busy) return ost__st_fail(st, OST_EBUSY, "%s: connections are open", st->shown);
    if (raw)
        return ost__st_fail(st, OST_EBUSY, "%s: a raw snapshot or an import is open", st->shown);
    int rc = st->ops->drop(st->eng, only_new);
    if (!rc) ost__store_shut(st);
    return rc;
}

int ost_store_drop_new(ost_store *st) { return store_drop(st, true); }

int ost_store_drop(ost_store *st) { return store_drop(st, false); }

/* ---- salvage ----------------------------------------------------------------- */

/* What an engine's salvage writes through (engine.h). */
static const ost__salvage_api salvage_api = {
    .store_new = ost_store_new,
    .options_init = ost_store_options_init,
    .store_open = ost_store_open,
    .store_errmsg = ost_store_errmsg,
    .store_close = ost_store_close,
    .import_begin = ost_import_begin,
    .import_class = ost_import_class,
    .import_record = ost_import_record,
    .import_entry = ost_import_entry,
    .import_commit = ost_import_commit,
    .import_abort = ost_import_abort,
};

int ost_salvage(const char *src, const char *dst, ost_salvage_fn report, void *ud,
                ost_salvage_stats *stats, char *msg, size_t cap) {
    const ost__engine_entry *en = ost__engine_entry_for(src);
    if (en && en->salvage) return en->salvage(&salvage_api, src, dst, report, ud, stats, msg, cap);
    if (stats) memset(stats, 0, sizeof *stats);
    if (!src || !dst) {
        if (msg && cap) snprintf(msg, cap, "salvage: no path given");
        return OST_EINVAL;
    }
    char shown[OST__PATH_SHOWN];
    ost_store_addr_show(shown, sizeof shown, src);
    if (msg && cap)
        snprintf(msg, cap, "%s: salvage reads the files of an embedded (LMDB) store; a %s store has "
                 "none to read", shown, en ? en->label : "this");
    return OST_EUNSUPPORTED;
}
