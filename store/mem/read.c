/* The in-memory engine's sessions, snapshots and reads (mem.h): records,
 * the commit log, the class table, and the raw snapshot's counters and
 * check. Reads hold db->lock for reading while they look, and never while
 * they call the caller back: they gather views first (what a view points
 * to lives until the snapshot ends). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

/* ---- sessions and snapshots ---------------------------------------------------------- */

int ost__mem_sess_open(ost__engine *e, ost__sess **out) {
    ost__sess *s = calloc(1, sizeof *s);
    if (!s) return mem_fail(e, OST_ENOMEM, "%s: out of memory", e->shown);
    s->e = e;
    s->db = e->db;
    pthread_mutex_lock(&s->db->slock);
    s->next = s->db->sessions;
    s->db->sessions = s;
    pthread_mutex_unlock(&s->db->slock);
    *out = s;
    return 0;
}

void ost__mem_sess_close(ost__sess *s) {
    if (!s) return;
    mem_db *db = s->db;
    pthread_mutex_lock(&db->slock);
    for (ost__sess **pp = &db->sessions; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    pthread_mutex_unlock(&db->slock);
    free(s->undo);
    free(s);
}

int ost__mem_snap_begin(ost__sess *s, ost__snapinfo *info) {
    if (s->in_snap || s->in_commit)
        return mem_fail(s->e, OST_EINVAL, "%s: the session has a snapshot or a write open",
                        s->e->shown);
    mem_db *db = s->db;
    pthread_rwlock_rdlock(&db->lock);
    pthread_mutex_lock(&db->slock); /* the trim sees the snapshot from now on */
    s->ver = db->ver;
    s->meta = db->meta;
    s->in_snap = true;
    s->gen++;
    pthread_mutex_unlock(&db->slock);
    pthread_rwlock_unlock(&db->lock);
    if (info) *info = (ost__snapinfo){s->meta.last_serial, s->meta.low, s->meta.next_oid};
    return 0;
}

void ost__mem_snap_end(ost__sess *s) {
    pthread_mutex_lock(&s->db->slock);
    s->in_snap = false;
    s->pins = 0;
    s->gen++;
    pthread_mutex_unlock(&s->db->slock);
}

/* A snapshot never moves by itself. */
bool ost__mem_snap_moved(ost__sess *s) {
    (void)s;
    return false;
}

/* Views live until the snapshot ends: a pin only counts. */
int ost__mem_pin(ost__sess *s) {
    if (s->in_commit) return 0;
    if (!s->in_snap) return mem_fail(s->e, OST_EINVAL, "%s: no snapshot is open", s->e->shown);
    s->pins++;
    return 0;
}

void ost__mem_unpin(ost__sess *s) {
    if (s->pins) s->pins--;
}

int mem_rlock(ost__sess *s) {
    if (s->in_commit) return 0;
    if (!s->in_snap) return mem_fail(s->e, OST_EINVAL, "%s: no snapshot is open", s->e->shown);
    pthread_rwlock_rdlock(&s->db->lock);
    return 0;
}

void mem_runlock(ost__sess *s) {
    if (!s->in_commit) pthread_rwlock_unlock(&s->db->lock);
}

/* ---- records ------------------------------------------------------------------------ */

/* The version of oid's record s sees (NULL: none). Lock held. */
static const mem_ver *rec_at(ost__sess *s, uint64_t oid) {
    uint8_t k[8];
    ost__be64(k, oid);
    mem_node *n = mem_list_find(&s->db->recs, k, 8);
    return n ? mem_see(n, s->ver) : NULL;
}

/* Record view *r of version v (valid while a snapshot sees v). */
static void view(const mem_ver *v, ost__recview *r) {
    *r = (ost__recview){v->serial, v->cid, v->data, v->len, NULL, 0};
}

int ost__mem_get(ost__sess *s, uint64_t oid, ost__recview *r) {
    int rc = mem_rlock(s);
    if (rc) return rc;
    const mem_ver *v = rec_at(s, oid);
    if (v) view(v, r);
    mem_runlock(s);
    if (!v) return mem_fail(s->e, OST_ENOTFOUND, "oid %llu: no such object", (unsigned long long)oid);
    return 0;
}

int ost__mem_get_many(ost__sess *s, const uint64_t *oids, size_t n, ost__rec_fn fn, void *ud) {
    for (size_t i = 0; i < n; i++) {
        int rc = mem_rlock(s);
        if (rc) return rc;
        const mem_ver *v = rec_at(s, oids[i]);
        ost__recview r;
        if (v) view(v, &r);
        mem_runlock(s);
        if (v && (rc = fn(ud, oids[i], &r))) return rc;
    }
    return 0;
}

#define BATCH 256

int ost__mem_scan(ost__sess *s, uint64_t from, uint64_t to, ost__rec_fn fn, void *ud) {
    uint64_t oids[BATCH];
    ost__recview rv[BATCH];
    bool more = true;
    while (more) {
        int rc = mem_rlock(s);
        if (rc) return rc;
        uint8_t k[8];
        ost__be64(k, from);
        size_t n = 0;
        mem_node *x = mem_list_seek(&s->db->recs, k, 8);
        for (; x && n < BATCH; x = x->next[0]) {
            uint64_t oid = ost__rd_be64(x->key);
            if (to && oid >= to) break;
            const mem_ver *v = mem_see(x, s->ver);
            if (!v) continue;
            oids[n] = oid;
            view(v, &rv[n++]);
        }
        more = n == BATCH && x && oids[n - 1] != UINT64_MAX;
        mem_runlock(s);
        for (size_t i = 0; i < n; i++)
            if ((rc = fn(ud, oids[i], &rv[i]))) return rc;
        if (more) from = oids[n - 1] + 1;
    }
    return 0;
}

/* ---- the commit log -------------------------------------------------------------------- */

typedef struct {
    uint64_t oid, serial;
} change;

int ost__mem_changes(ost__sess *s, uint64_t after, uint64_t upto,
                     void (*fn)(void *ud, uint64_t oid, uint64_t serial), void *ud, bool *gap) {
    *gap = false;
    if (upto <= after) return 0;
    int rc = mem_rlock(s);
    if (rc) return rc;
    if (s->meta.low > after + 1) { /* a pack trimmed the log: as LMDB tells it */
        *gap = true;
        mem_runlock(s);
        return 0;
    }
    mem_db *db = s->db;
    size_t lo = 0, hi = db->nlog;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (db->log[mid].serial <= after) lo = mid + 1;
        else hi = mid;
    }
    change *all = NULL;
    size_t n = 0, cap = 0;
    for (size_t i = lo; i < db->nlog && db->log[i].serial <= upto && !rc; i++) {
        const mem_log *l = &db->log[i];
        if (l->ver > s->ver || (l->gone && l->gone <= s->ver)) continue;
        if (mem_grow((void **)&all, &cap, n + l->n, sizeof *all)) {
            rc = mem_fail(s->e, OST_ENOMEM, "%s: out of memory", s->e->shown);
            break;
        }
        for (size_t j = 0; j < l->n; j++) all[n++] = (change){l->oids[j], l->serial};
    }
    mem_runlock(s);
    for (size_t i = 0; !rc && i < n; i++) fn(ud, all[i].oid, all[i].serial);
    free(all);
    return rc;
}

/* ---- classes ------------------------------------------------------------------------- */

/* Class view *out of class c (valid until the store goes). */
static void cview(const mem_class *c, ost__classview *out) {
    *out = (ost__classview){c->id, c->module, c->name, c->mlen, c->nlen};
}

int ost__mem_class_get(ost__sess *s, uint32_t id, ost__classview *out) {
    int rc = mem_rlock(s);
    if (rc) return rc;
    const mem_class *c = mem_class_at(s->db, id, s->ver);
    if (c) cview(c, out);
    mem_runlock(s);
    return c ? 0 : mem_fail(s->e, OST_ENOTFOUND, "%s: no class %u", s->e->shown, id);
}

int ost__mem_class_each(ost__sess *s, int (*fn)(void *ud, const ost__classview *c), void *ud) {
    int rc = mem_rlock(s);
    if (rc) return rc;
    mem_db *db = s->db;
    ost__classview *all = db->ncls ? malloc(db->ncls * sizeof *all) : NULL;
    size_t n = 0;
    for (size_t i = 0; all && i < db->ncls; i++)
        if (db->cls[i].ver <= s->ver) cview(&db->cls[i], &all[n++]);
    bool oom = db->ncls && !all;
    mem_runlock(s);
    if (oom) return mem_fail(s->e, OST_ENOMEM, "%s: out of memory", s->e->shown);
    for (size_t i = 0; !rc && i < n; i++) rc = fn(ud, &all[i]);
    free(all);
    return rc;
}

/* ---- raw access ---------------------------------------------------------------------- */

int ost__mem_snap_stat(ost__sess *s, ost_snap_stats *out) {
    memset(out, 0, sizeof *out);
    out->engine = "mem";
    int rc = mem_rlock(s);
    if (rc) return rc;
    out->format = s->meta.format;
    out->next_oid = s->meta.next_oid;
    out->last_serial = s->meta.last_serial;
    out->next_class = s->meta.next_class;
    for (mem_node *n = mem_list_first(&s->db->recs); n; n = n->next[0])
        if (mem_see(n, s->ver)) out->records++;
    for (mem_node *n = mem_list_first(&s->db->ents); n; n = n->next[0]) {
        const mem_ver *v = mem_see(n, s->ver);
        if (!v) continue;
        out->entries++;
        out->entry_bytes += n->klen + 8 + v->len; /* key, serial, value */
    }
    mem_runlock(s);
    return 0;
}

/* Notes a problem: the first in first[0, cap), the others counted. */
static void problem(char *first, size_t cap, unsigned *n, const char *text) {
    if (!(*n)++) snprintf(first, cap, "%s", text);
}

/* What PostgreSQL's verify checks, as nothing here can be damaged but by
 * what was imported: the counters cover the records, entries and classes,
 * and every record's class is in the table. */
int ost__mem_verify(ost__sess *s, char *first, size_t cap) {
    int rc = mem_rlock(s);
    if (rc) return rc;
    unsigned n = 0;
    char t[200];
    const mem_meta *m = &s->meta;
    for (mem_node *x = mem_list_first(&s->db->recs); x; x = x->next[0]) {
        const mem_ver *v = mem_see(x, s->ver);
        if (!v) continue;
        uint64_t oid = ost__rd_be64(x->key);
        if (oid && oid >= m->next_oid) {
            snprintf(t, sizeof t, "oid %llu: at or past next_oid %llu", (unsigned long long)oid,
                     (unsigned long long)m->next_oid);
            problem(first, cap, &n, t);
        }
        if (v->serial > m->last_serial) {
            snprintf(t, sizeof t, "oid %llu: serial %llu past last_serial %llu",
                     (unsigned long long)oid, (unsigned long long)v->serial,
                     (unsigned long long)m->last_serial);
            problem(first, cap, &n, t);
        }
        if (!mem_class_at(s->db, v->cid, s->ver) || v->cid >= m->next_class) {
            snprintf(t, sizeof t, "oid %llu: class id %u is not in the class table",
                     (unsigned long long)oid, v->cid);
            problem(first, cap, &n, t);
        }
    }
    mem_runlock(s);
    if (!n) return 0;
    if (n > 1) {
        size_t l = strlen(first);
        snprintf(first + l, cap > l ? cap - l : 0, ", and %u more", n - 1);
    }
    return OST_ECORRUPT;
}
