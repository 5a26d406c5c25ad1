/* The in-memory engine's stores (mem.h): addresses, the process's registry
 * of named stores, open, close, stat and drop; and what the other files
 * share: write transactions (push, undo, publish) and the trim of what no
 * snapshot sees any more. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "host.h"
#include "mem.h"

/* ---- small helpers ----------------------------------------------------------------- */

int mem_grow(void **p, size_t *cap, size_t need, size_t sz) {
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap : 8;
    while (n < need) {
        if (n > SIZE_MAX / 2 / sz) return OST_ENOMEM;
        n *= 2;
    }
    void *q = realloc(*p, n * sz);
    if (!q) return OST_ENOMEM;
    *p = q;
    *cap = n;
    return 0;
}

size_t mem_ekey(uint8_t *buf, uint64_t map, const uint8_t *key, size_t klen) {
    ost__be64(buf, map);
    if (klen) memcpy(buf + 8, key, klen);
    return 8 + klen;
}

int mem_fail(ost__engine *e, int code, const char *fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return mem_host_fail(e, code, buf);
}

const mem_class *mem_class_at(const mem_db *db, uint32_t id, uint64_t ver) {
    size_t lo = 0, hi = db->ncls;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (db->cls[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    if (lo < db->ncls && db->cls[lo].id == id && db->cls[lo].ver <= ver) return &db->cls[lo];
    return NULL;
}

int mem_class_add(mem_db *db, uint32_t id, uint64_t ver, const char *module, size_t mlen,
                  const char *name, size_t nlen) {
    if (mem_grow((void **)&db->cls, &db->capcls, db->ncls + 1, sizeof *db->cls)) return OST_ENOMEM;
    char *b = malloc(mlen + nlen + 2); /* module NUL name NUL */
    if (!b) return OST_ENOMEM;
    memcpy(b, module, mlen);
    b[mlen] = 0;
    memcpy(b + mlen + 1, name, nlen);
    b[mlen + 1 + nlen] = 0;
    size_t at = db->ncls;
    while (at && db->cls[at - 1].id > id) at--;
    memmove(db->cls + at + 1, db->cls + at, (db->ncls - at) * sizeof *db->cls);
    db->cls[at] = (mem_class){id, ver, b, b + mlen + 1, mlen, nlen};
    db->ncls++;
    return 0;
}

/* ---- write transactions and the trim ----------------------------------------------- */

uint64_t mem_oldest(mem_db *db) {
    uint64_t v = db->ver;
    pthread_mutex_lock(&db->slock);
    for (ost__sess *s = db->sessions; s; s = s->next)
        if (s->in_snap && s->ver < v) v = s->ver;
    pthread_mutex_unlock(&db->slock);
    return v;
}

int mem_push(ost__sess *s, mem_list *l, mem_node *n, mem_ver *v) {
    if (!v || mem_grow((void **)&s->undo, &s->capundo, s->nundo + 1, sizeof *s->undo)) {
        free(v);
        return OST_ENOMEM;
    }
    pthread_rwlock_wrlock(&s->db->lock);
    v->older = n->head;
    n->head = v;
    pthread_rwlock_unlock(&s->db->lock);
    s->undo[s->nundo++] = (mem_ref){l, n};
    return 0;
}

int mem_write(ost__sess *s, mem_list *l, const uint8_t *k, size_t kl, mem_ver *v) {
    if (!v || mem_grow((void **)&s->undo, &s->capundo, s->nundo + 1, sizeof *s->undo)) {
        free(v);
        return OST_ENOMEM;
    }
    mem_node *n;
    pthread_rwlock_wrlock(&s->db->lock);
    int rc = mem_list_get(l, k, kl, &n);
    if (!rc) {
        v->older = n->head;
        n->head = v;
    }
    pthread_rwlock_unlock(&s->db->lock);
    if (rc) {
        free(v);
        return rc;
    }
    s->undo[s->nundo++] = (mem_ref){l, n};
    return 0;
}

int mem_log_add(ost__sess *s, uint64_t serial, uint64_t *oids, size_t n) {
    mem_db *db = s->db;
    pthread_rwlock_wrlock(&db->lock);
    int rc = mem_grow((void **)&db->log, &db->caplog, db->nlog + 1, sizeof *db->log);
    if (!rc) db->log[db->nlog++] = (mem_log){serial, s->ver, 0, oids, n};
    pthread_rwlock_unlock(&db->lock);
    if (rc) free(oids);
    return rc;
}

void mem_log_cut(ost__sess *s, size_t n) {
    mem_db *db = s->db;
    pthread_rwlock_wrlock(&db->lock);
    while (db->nlog > n) free(db->log[--db->nlog].oids);
    pthread_rwlock_unlock(&db->lock);
}

void mem_log_trim_all(ost__sess *s) {
    mem_db *db = s->db;
    pthread_rwlock_wrlock(&db->lock);
    for (size_t i = 0; i < db->nlog; i++)
        if (!db->log[i].gone) db->log[i].gone = s->ver;
    pthread_rwlock_unlock(&db->lock);
}

void mem_undo(ost__sess *s, size_t mark) {
    if (s->nundo <= mark) return;
    pthread_rwlock_wrlock(&s->db->lock);
    while (s->nundo > mark) {
        mem_ref r = s->undo[--s->nundo];
        mem_ver *v = r.n->head;
        r.n->head = v->older;
        free(v);
        if (!r.n->head) mem_list_remove(r.l, r.n); /* made by the undone write */
    }
    pthread_rwlock_unlock(&s->db->lock);
}

/* Trims listed node r: true when it is settled (removed, or one version
 * and no tombstone: it leaves the list), false when it keeps versions
 * some snapshot may need. */
static bool trim_one(mem_ref r, uint64_t minv) {
    if (mem_trim(r.n, minv)) {
        mem_list_remove(r.l, r.n);
        return true;
    }
    if (r.n->head->older || r.n->head->gone) return false;
    r.n->listed = false;
    return true;
}

/* Moves the trimmed lines at the start of the commit log out. */
static void log_trim(mem_db *db, uint64_t minv) {
    size_t k = 0;
    while (k < db->nlog && db->log[k].gone && db->log[k].gone <= minv) free(db->log[k++].oids);
    if (!k) return;
    memmove(db->log, db->log + k, (db->nlog - k) * sizeof *db->log);
    db->nlog -= k;
}

void mem_gc(mem_db *db, ost__sess *s) {
    uint64_t minv = mem_oldest(db);
    size_t from = db->ntrim;
    /* the nodes this transaction touched join the list, each once (a
     * node that cannot join keeps its old versions until the store goes) */
    for (size_t i = 0; s && i < s->nundo; i++) {
        mem_ref r = s->undo[i];
        if (r.n->listed) continue;
        if (mem_grow((void **)&db->trim, &db->captrim, db->ntrim + 1, sizeof *db->trim)) break;
        r.n->listed = true;
        db->trim[db->ntrim++] = r;
    }
    if (s) s->nundo = 0;
    /* the whole list when the oldest snapshot moved on, else the new part */
    if (minv != db->trim_minv) {
        from = 0;
        db->trim_minv = minv;
        log_trim(db, minv);
    }
    size_t k = from;
    for (size_t i = from; i < db->ntrim; i++)
        if (!trim_one(db->trim[i], minv)) db->trim[k++] = db->trim[i];
    db->ntrim = k;
}

void mem_wbegin(ost__sess *s) {
    pthread_mutex_lock(&s->db->wlock);
    s->in_commit = true;
    s->ver = s->db->ver + 1;
    s->meta = s->db->meta;
    s->nundo = 0;
}

void mem_wend(ost__sess *s, bool commit) {
    mem_db *db = s->db;
    if (!commit) mem_undo(s, 0);
    pthread_rwlock_wrlock(&db->lock);
    if (commit) {
        db->meta = s->meta;
        db->ver = s->ver;
    }
    mem_gc(db, s);
    pthread_rwlock_unlock(&db->lock);
    s->in_commit = false;
    pthread_mutex_unlock(&db->wlock);
}

bool mem_is_new(mem_db *db, const mem_meta *m, uint64_t ver, uint64_t *nrec) {
    uint64_t n = 0, others = 0;
    for (mem_node *x = mem_list_first(&db->recs); x; x = x->next[0])
        if (mem_see(x, ver)) {
            n++;
            if (ost__rd_be64(x->key)) others++;
        }
    bool ents = false;
    for (mem_node *x = mem_list_first(&db->ents); x && !ents; x = x->next[0]) ents = mem_see(x, ver);
    *nrec = n;
    return !others && !ents && m->next_oid == 1 && m->last_serial <= 1;
}

/* ---- the registry of named stores --------------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_db *g_named; /* under g_lock */

/* Frees db and everything in it. */
static void db_free(mem_db *db) {
    mem_list_free(&db->recs);
    mem_list_free(&db->ents);
    mem_list_free(&db->dels);
    for (size_t i = 0; i < db->ncls; i++) free(db->cls[i].module);
    for (size_t i = 0; i < db->nold_cls; i++) free(db->old_cls[i].module);
    free(db->cls);
    free(db->old_cls);
    for (size_t i = 0; i < db->nlog; i++) free(db->log[i].oids);
    free(db->log);
    free(db->trim);
    pthread_rwlock_destroy(&db->lock);
    pthread_mutex_destroy(&db->wlock);
    pthread_mutex_destroy(&db->slock);
    free(db);
}

/* A new store holding what LMDB's open writes into a new one: the meta
 * counters (format, next oid 1, last commit 1, next class 2) and the root
 * (oid 0, class 1, commit 1). 0 or OST_ENOMEM. */
static int db_new(ost__engine *e, const char *name, mem_db **out) {
    mem_db *db = calloc(1, sizeof *db);
    if (!db) return OST_ENOMEM;
    snprintf(db->name, sizeof db->name, "%s", name);
    pthread_rwlock_init(&db->lock, NULL);
    pthread_mutex_init(&db->wlock, NULL);
    pthread_mutex_init(&db->slock, NULL);
    int rc = mem_list_init(&db->recs);
    if (!rc) rc = mem_list_init(&db->ents);
    if (!rc) rc = mem_list_init(&db->dels);
    db->ver = 1;
    db->meta = (mem_meta){OST_STORE_FORMAT, 1, 1, 0, 2};
    static const char m[] = "persistent.mapping", n[] = "PersistentMapping";
    uint8_t *pickle = NULL;
    size_t len = 0;
    if (!rc) rc = mem_host_root(e, &pickle, &len);
    if (!rc) rc = mem_class_add(db, 1, 1, m, strlen(m), n, strlen(n));
    mem_node *node;
    uint8_t key[8] = {0};
    if (!rc) rc = mem_list_get(&db->recs, key, 8, &node);
    if (!rc && !(node->head = mem_ver_new(1, 1, 1, false, pickle, len))) {
        mem_list_remove(&db->recs, node);
        rc = OST_ENOMEM;
    }
    free(pickle);
    if (rc) {
        db_free(db);
        return rc;
    }
    *out = db;
    return 0;
}

/* ---- addresses ---------------------------------------------------------------------- */

bool ost__mem_claims(const char *addr) { return addr && !strncmp(addr, "mem:", 4); }

/* Whether name is a store name: 1 to 64 of [A-Za-z0-9_.-]. */
static bool name_ok(const char *name) {
    size_t n = strlen(name);
    if (!n || n > MEM_NAME_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '-';
        if (!ok) return false;
    }
    return true;
}

/* Finds (or, create, makes and lists) the store of name and takes a
 * reference on it for e (exclusively when excl). Under g_lock. 0, or
 * OST_ENOTFOUND, OST_EBUSY, OST_ENOMEM with the message set. */
static int named_take(ost__engine *e, const char *name, bool create, bool excl) {
    mem_db *db = g_named;
    while (db && strcmp(db->name, name)) db = db->next;
    if (!db && !create)
        return mem_fail(e, OST_ENOTFOUND,
                        "%s: no store at %s: a named in-memory store lives from an open with "
                        "create until ost_store_drop or the end of the process",
                        e->shown, e->shown);
    if (db && (db->excl || (excl && db->refs)))
        return mem_fail(e, OST_EBUSY, "%s: store is locked (another handle of this process holds "
                        "it %s)", e->shown, db->excl ? "exclusively" : "open");
    if (!db) {
        int rc = db_new(e, name, &db);
        if (rc) return mem_fail(e, rc, "%s: out of memory", e->shown);
        db->next = g_named;
        g_named = db;
    }
    db->refs++;
    db->excl = excl;
    e->excl = excl;
    e->db = db;
    return 0;
}

void ost__mem_show(const char *addr, char *out, size_t cap) { ost_path_show(out, cap, addr); }

int ost__mem_open(const ost__host *host, ost_store *st, const char *addr,
                  const ost_store_options *o, ost__engine **out) {
    *out = NULL;
    ost__engine *e = calloc(1, sizeof *e);
    if (!e) return ost__eng_fail(host, st, OST_ENOMEM, "out of memory");
    e->host = host;
    e->st = st;
    const char *name = ost__mem_claims(addr) ? addr + 4 : "";
    ost__mem_show(addr ? addr : "", e->shown, sizeof e->shown);
    int rc = 0;
    if (!ost__mem_claims(addr))
        rc = mem_fail(e, OST_EINVAL, "%s: not an in-memory address (mem: or mem:NAME)", e->shown);
    else if (*name && !name_ok(name))
        rc = mem_fail(e, OST_EINVAL, "%s: bad name for an in-memory store: 1 to %d characters of "
                      "A-Z, a-z, 0-9, '_', '.', '-'", e->shown, MEM_NAME_MAX);
    else if (o && ((unsigned)o->durability > OST_SYNC_NONE || (o->create && o->read_only)))
        rc = mem_fail(e, OST_EINVAL, "%s: bad options", e->shown);
    else if (o && o->prefetch_connections > 8) /* as every engine checks it */
        rc = mem_fail(e, OST_EINVAL, "%s: prefetch_connections is %u: at most 8 (0 or 1: one)",
                      e->shown, o->prefetch_connections);
    if (rc) {
        free(e);
        return rc;
    }
    e->read_only = o && o->read_only;
    bool create = !o || o->create, excl = o && o->exclusive;
    if (!*name) {
        /* private: new at each open, gone at close */
        if (!create) rc = mem_fail(e, OST_ENOTFOUND, "%s: no store at mem: (a private in-memory "
                                   "store exists only from an open with create)", e->shown);
        else if ((rc = db_new(e, "", &e->db))) rc = mem_fail(e, rc, "%s: out of memory", e->shown);
        if (!rc) e->db->refs = 1;
    } else {
        pthread_mutex_lock(&g_lock);
        rc = named_take(e, name, create, excl);
        pthread_mutex_unlock(&g_lock);
    }
    if (rc) {
        free(e);
        return rc;
    }
    mem_host_format(e, OST_STORE_FORMAT);
    *out = e;
    return 0;
}

void ost__mem_close(ost__engine *e) {
    if (!e) return;
    mem_db *db = e->db;
    pthread_mutex_lock(&g_lock);
    bool last = --db->refs == 0;
    if (e->excl) db->excl = false;
    bool gone = last && (!db->name[0] || db->dropped);
    pthread_mutex_unlock(&g_lock);
    if (gone) db_free(db);
    free(e);
}

int ost__mem_stat(ost__engine *e, ost_store_stats *out) {
    mem_db *db = e->db;
    memset(out, 0, sizeof *out);
    pthread_rwlock_rdlock(&db->lock);
    for (mem_node *n = mem_list_first(&db->recs); n; n = n->next[0]) {
        const mem_ver *v = mem_see(n, db->ver);
        if (!v) continue;
        out->records++;
        out->bytes += 16 + v->len; /* as LMDB counts: its header and the pickle */
    }
    out->next_oid = db->meta.next_oid;
    out->last_serial = db->meta.last_serial;
    pthread_rwlock_unlock(&db->lock);
    return 0;
}

/* Removes a named store's name from the registry (its data goes with the
 * last handle's close); a private store goes at close anyway. When
 * only_new, first checks that it is new: OST_EEXIST otherwise. */
int ost__mem_drop(ost__engine *e, bool only_new) {
    mem_db *db = e->db;
    if (e->read_only) return mem_fail(e, OST_EREADONLY, "%s: opened read-only", e->shown);
    pthread_mutex_lock(&g_lock);
    pthread_mutex_lock(&db->wlock);
    pthread_rwlock_rdlock(&db->lock);
    uint64_t nrec;
    int rc = 0;
    if (only_new && !mem_is_new(db, &db->meta, db->ver, &nrec))
        rc = mem_fail(e, OST_EEXIST,
                      "%s: not a new store (%llu objects, last commit %llu); only a new store is "
                      "removed",
                      e->shown, (unsigned long long)nrec, (unsigned long long)db->meta.last_serial);
    if (!rc && db->name[0] && !db->dropped) {
        for (mem_db **pp = &g_named; *pp; pp = &(*pp)->next)
            if (*pp == db) {
                *pp = db->next;
                break;
            }
        db->dropped = true;
    }
    pthread_rwlock_unlock(&db->lock);
    pthread_mutex_unlock(&db->wlock);
    pthread_mutex_unlock(&g_lock);
    return rc;
}
