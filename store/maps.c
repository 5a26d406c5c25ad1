/* Persistent ordered maps (include/ostore/maps.h, docs/maps.md).
 *
 * A map is a persistent instance of ostore.maps.OrderedMap (or
 * OrderedSet) whose record holds {'kind': ..., 'count': N}; its entries are
 * keys of the engine's ordered index, reached through store/entries.h.
 * Keys are encoded so that bytewise order is Python's order
 * (store/mkey.c).
 *
 * A connection keeps, per map it touched in the transaction, its pending
 * entries in a skip list ordered by encoded key: entries it set or deleted
 * (with the entry's serial when the transaction first looked at the key,
 * for the conflict check) and entries it read whose values are heap
 * objects (so that reading a key twice gives the same object). Reads
 * consult the skip list, then the snapshot; cursors merge the two by key.
 * Nodes are never removed before the transaction ends, so what a cursor
 * holds stays valid. At commit the dirty nodes become the package's map
 * entries, in key order; apply checks each key's serial and applies the
 * count as a delta. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_internal.h"

#define SL_MAX 16
#define MC_COUNTER OST__MC_COUNTER
#define KMAX OST_MAP_KEY_MAX

enum { P_DIRTY = 1, P_DEL = 2 };

typedef struct pnode {
    ost_value val;  /* a reference; 0 for a deleted entry */
    uint64_t base;  /* the entry's serial when first looked at (0: absent) */
    uint16_t klen;
    uint8_t flags, level;
    struct pnode *next[]; /* level pointers, then the key bytes */
} pnode;

#define PKEY(n) ((uint8_t *)&(n)->next[(n)->level])

struct ost__map {
    uint64_t oid;
    ost__mkind kind;
    bool is_set, is_new, touched;
    /* a counter (ostore.maps.Counter): no entries; delta is the
     * transaction's add, initial a new counter's first value */
    bool is_counter;
    int64_t initial;
    /* the object the last lookup's value referred to was in the cache
     * already: the next lookup reads the entry alone (lookup_get) */
    bool ref_held;
    int level;
    uint64_t rng;
    pnode *head;
    size_t ndirty;
    int64_t delta; /* count change of the transaction */
    struct ost__map *tnext;
};

static const ost__txn_part maps_part;

/* ---- keys ------------------------------------------------------------------ */

/* Encodes key for map oid; the connection's message names the map. */
static int encode_key(ost_conn *c, uint64_t oid, const ost__mkind *k, ost_value key, bool prefix,
                      uint8_t *out, size_t *n) {
    char why[200];
    int rc = ost__mkey_encode(k, key, prefix, out, n, why, sizeof why);
    if (rc)
        ost__c_fail(c, rc, "map %llu (keys %s): %s", (unsigned long long)oid, k->canon, why);
    return rc;
}

/* ---- the record: {'kind': k, 'count': n} ------------------------------------ */

/* PROTO 2, EMPTY_DICT, MARK, 'kind', kind, 'count', LONG1 of 8 bytes,
 * SETITEMS, STOP: the count sits at a fixed place from the end. */
size_t ost__map_record(uint8_t *out, size_t cap, const char *kind, uint64_t count) {
    size_t kl = strlen(kind), n = 0;
    size_t need = 2 + 1 + 1 + (5 + 4) + (5 + kl) + (5 + 5) + 10 + 2;
    if (need > cap) return 0;
    out[n++] = 0x80, out[n++] = 2, out[n++] = '}', out[n++] = '(';
    const char *strs[3] = {"kind", kind, "count"};
    for (int i = 0; i < 3; i++) {
        size_t l = strlen(strs[i]);
        out[n++] = 'X';
        ost__le32(out + n, (uint32_t)l);
        n += 4;
        memcpy(out + n, strs[i], l);
        n += l;
    }
    out[n++] = 0x8a, out[n++] = 8;
    ost__le64(out + n, count);
    n += 8;
    out[n++] = 'u', out[n++] = '.';
    return n;
}

bool ost_is_map(ost_value v) {
    if (ost_typeof(v) != OST_T_INSTANCE) return false;
    int mc = ost__map_class(ost_instance_class(v));
    return mc && mc != MC_COUNTER;
}

bool ost_is_counter(ost_value v) {
    return ost_typeof(v) == OST_T_INSTANCE && ost__map_class(ost_instance_class(v)) == MC_COUNTER;
}

/* ---- the skip list ---------------------------------------------------------- */

static int kcmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    int r = memcmp(a, b, al < bl ? al : bl);
    if (r) return r;
    return al < bl ? -1 : al > bl;
}

/* The first node >= key (gt: > key); upd[i] gets the last node before it
 * on level i. */
static pnode *sl_seek(ost__map *m, const uint8_t *k, size_t kl, bool gt, pnode **upd) {
    pnode *x = m->head;
    for (int i = m->level - 1; i >= 0; i--) {
        for (;;) {
            pnode *nx = x->next[i];
            if (!nx) break;
            int r = kcmp(PKEY(nx), nx->klen, k, kl);
            if (r < 0 || (gt && r == 0)) x = nx;
            else break;
        }
        if (upd) upd[i] = x;
    }
    return x->next[0];
}

/* The node of key exactly, or NULL. */
static pnode *sl_find(ost__map *m, const uint8_t *k, size_t kl) {
    if (!m->head->next[0]) return NULL;
    pnode *n = sl_seek(m, k, kl, false, NULL);
    return n && n->klen == kl && memcmp(PKEY(n), k, kl) == 0 ? n : NULL;
}

/* The last node < key (le: <= key), or NULL. */
static pnode *sl_before(ost__map *m, const uint8_t *k, size_t kl, bool le) {
    pnode *upd[SL_MAX];
    sl_seek(m, k, kl, le, upd);
    return m->level && upd[0] != m->head ? upd[0] : NULL;
}

static pnode *sl_last(ost__map *m) {
    pnode *x = m->head;
    for (int i = m->level - 1; i >= 0; i--)
        while (x->next[i]) x = x->next[i];
    return x == m->head ? NULL : x;
}

static pnode *sl_insert(ost__map *m, const uint8_t *k, size_t kl) {
    pnode *upd[SL_MAX];
    sl_seek(m, k, kl, false, upd);
    int lvl = 1;
    m->rng ^= m->rng << 13, m->rng ^= m->rng >> 7, m->rng ^= m->rng << 17;
    for (uint64_t r = m->rng; lvl < SL_MAX && (r & 3) == 0; r >>= 2) lvl++;
    pnode *n = malloc(sizeof *n + (size_t)lvl * sizeof(pnode *) + kl);
    if (!n) return NULL;
    n->val = 0;
    n->base = 0;
    n->klen = (uint16_t)kl;
    n->flags = 0;
    n->level = (uint8_t)lvl;
    memcpy(PKEY(n), k, kl);
    for (int i = m->level; i < lvl; i++) upd[i] = m->head;
    if (lvl > m->level) m->level = lvl;
    for (int i = 0; i < lvl; i++) {
        n->next[i] = upd[i]->next[i];
        upd[i]->next[i] = n;
    }
    return n;
}

static void sl_clear(ost__map *m) {
    pnode *n = m->head->next[0];
    while (n) {
        pnode *nx = n->next[0];
        ost_release(n->val);
        free(n);
        n = nx;
    }
    memset(m->head->next, 0, SL_MAX * sizeof(pnode *));
    m->level = 0;
    m->ndirty = 0;
    m->delta = 0;
}

/* ---- maps of a connection ----------------------------------------------------- */

static ost__map *map_alloc(ost_conn *c, uint64_t oid, const ost__mkind *k, bool is_set) {
    ost__map *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->head = calloc(1, sizeof(pnode) + SL_MAX * sizeof(pnode *));
    if (!m->head) {
        free(m);
        return NULL;
    }
    m->head->level = SL_MAX;
    m->oid = oid;
    m->kind = *k;
    m->is_set = is_set;
    m->rng = 0x9E3779B97F4A7C15ULL ^ (oid * 0xff51afd7ed558ccdULL);
    if (ost__ptrtab_put(&c->maps, (uintptr_t)(oid + 1), (uint64_t)(uintptr_t)m)) {
        free(m->head);
        free(m);
        return NULL;
    }
    c->part = &maps_part; /* the connection's transactions now include maps */
    return m;
}

static void map_free(ost_conn *c, ost__map *m) {
    sl_clear(m);
    ost__ptrtab_del(&c->maps, (uintptr_t)(m->oid + 1));
    free(m->head);
    free(m);
}

static void touch(ost_conn *c, ost__map *m) {
    if (m->touched) return;
    m->touched = true;
    m->tnext = c->mtouched;
    c->mtouched = m;
}

/* The map state of value v in connection c, made on first use from the
 * map's record. Call without the maplock held (it may load a ghost). */
static ost__map *map_of(ost_conn *c, ost_value v, int *rc) {
    *rc = 0;
    if (!c) {
        *rc = OST_EINVAL;
        return NULL;
    }
    c->msg[0] = 0;
    uint64_t oid = ost_oid(c, v);
    if (oid == UINT64_MAX) {
        *rc = ost__c_fail(c, OST_EINVAL, "not a persistent object of this connection");
        return NULL;
    }
    ost__ptr_slot *s = ost__ptrtab_find(&c->maps, (uintptr_t)(oid + 1));
    if (s->key && !((ost__map *)(uintptr_t)s->val)->is_counter) return (ost__map *)(uintptr_t)s->val;
    int mc = s->key ? MC_COUNTER : ost__map_class(ost_instance_class(v));
    if (mc && c->st->no_ments) {
        *rc = ost__c_fail(c, OST_EVERSION,
                          "map %llu: this handle opened the store read-only when it was format 1 "
                          "(no map entries); maps were stored since: open the store again",
                          (unsigned long long)oid);
        return NULL;
    }
    if (!mc || mc == MC_COUNTER) {
        *rc = ost__c_fail(c, OST_EINVAL, mc ? "oid %llu is a counter, not a map"
                                            : "oid %llu is not a map (its class is not ostore.maps.*)",
                          (unsigned long long)oid);
        return NULL;
    }
    if ((*rc = ost_activate(c, v))) return NULL;
    ost_value st = ost_instance_state(v);
    ost_value kv = ost_typeof(st) == OST_T_DICT ? ost_dict_get_c(st, "kind") : 0;
    const char *ks = ost_data(kv, NULL);
    ost__mkind k;
    if (!ks || ost_typeof(kv) != OST_T_STR || ost__mkind_parse(ks, &k)) {
        *rc = ost__c_fail(c, OST_ECORRUPT, "map %llu: its record has no valid key kind",
                          (unsigned long long)oid);
        return NULL;
    }
    ost__map *m = map_alloc(c, oid, &k, mc == 2);
    if (!m) *rc = ost__c_fail(c, OST_ENOMEM, "out of memory");
    return m;
}

/* OST_EBUSY while a loader is open on c, or (for changes) an asynchronous
 * commit is pending: it would end the transaction under them. */
static int busy(ost_conn *c, bool write) {
    if (c->loaders)
        return ost__c_fail(c, OST_EBUSY, "a bulk loader is open on this connection: close it first");
    if (write && c->async_pending)
        return ost__c_fail(c, OST_EBUSY, "an asynchronous commit is pending on this connection");
    return 0;
}

/* A new map, set or counter of class cls in c's transaction: an instance
 * whose state is {'kind': k's canon, 'count': count}, with an oid at
 * once, in the cache (which holds it: *out is borrowed), and its state
 * *mp, new (stored by the next commit). 0 or a code with c's message. */
static int new_object(ost_conn *c, ost_value cls, const ost__mkind *k, int64_t count,
                      bool is_set, const char *what, ost__map **mp, ost_value *out) {
    ost_value inst = ost_instance_new(ost_incref(cls)), state = ost_dict_new();
    int rc = inst && state ? 0 : OST_ENOMEM;
    if (!rc) rc = ost_dict_set(state, ost_str_c("kind"), ost_str_c(k->canon));
    if (!rc) rc = ost_dict_set(state, ost_str_c("count"), ost_int(count));
    if (!rc) {
        rc = ost_instance_set_state(inst, state);
        state = 0;
    }
    uint64_t oid;
    if (!rc) rc = ost__conn_new_oid(c, &oid);
    if (!rc) rc = ost__conn_cache_add(c, inst, oid);
    ost__map *m = NULL;
    if (!rc && !(m = map_alloc(c, oid, k, is_set))) {
        ost__conn_forget(c, oid);
        rc = OST_ENOMEM;
    }
    ost_decref(state);
    if (rc) {
        ost_decref(inst);
        return c->msg[0] ? rc : ost__c_fail(c, rc, "cannot make a %s: %s", what, ost_strerror(rc));
    }
    m->is_new = true;
    *mp = m;
    *out = inst;
    ost_decref(inst); /* the cache holds it */
    return 0;
}

static int make(ost_conn *c, const char *kind, bool is_set, ost_value *out) {
    if (out) *out = 0;
    if (!c || !out) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    c->msg[0] = 0;
    ost__mkind k;
    int prc = ost__mkind_parse(kind, &k);
    if (prc == OST_ELIMIT)
        return ost__c_fail(c, OST_EINVAL,
                           "bad key kind \"%.60s\": a tuple kind has at most %d elements",
                           kind, OST__MKIND_MAX);
    if (prc)
        return ost__c_fail(c, OST_EINVAL,
                           "bad key kind \"%.60s\": say int, str, bytes, or a tuple of them "
                           "such as (int, str)",
                           kind ? kind : "(null)");
    if (c->st->read_only)
        return ost__c_fail(c, OST_EREADONLY, "%s: the store is open read-only", c->st->shown);
    int brc = busy(c, true);
    if (brc) return brc;
    ost__map *m;
    int rc = new_object(c, is_set ? c->st->set_cls : c->st->map_cls, &k, 0, is_set, "map", &m,
                        out);
    if (!rc) touch(c, m);
    return rc;
}

int ost_map_new(ost_conn *c, const char *kind, ost_value *out) { return make(c, kind, false, out); }
int ost_keyset_new(ost_conn *c, const char *kind, ost_value *out) { return make(c, kind, true, out); }

/* The connection's copy of a canonical kind, kept until it closes (a
 * map's state may go sooner: abort drops a new map's). */
struct ost__kind_str {
    struct ost__kind_str *next;
    char s[sizeof(((ost__mkind *)0)->canon)];
};

static const char *intern_kind(ost_conn *c, const char *canon) {
    for (struct ost__kind_str *k = c->kinds; k; k = k->next)
        if (strcmp(k->s, canon) == 0) return k->s;
    struct ost__kind_str *k = malloc(sizeof *k);
    if (!k) return NULL;
    snprintf(k->s, sizeof k->s, "%s", canon);
    k->next = c->kinds;
    c->kinds = k;
    c->part = &maps_part; /* maps_free frees the kind strings */
    return k->s;
}

int ost_map_kind(ost_conn *c, ost_value v, const char **kind, bool *is_set) {
    int rc;
    ost__map *m = map_of(c, v, &rc);
    if (!m) return rc;
    const char *k = intern_kind(c, m->kind.canon);
    if (!k) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    if (kind) *kind = k;
    if (is_set) *is_set = m->is_set;
    return 0;
}

/* ---- reads ------------------------------------------------------------------ */

/* Decodes an entry's value (a new reference). Maplock held. */
static int decode_val(ost_conn *c, ost__map *m, const uint8_t *key, size_t kl,
                      const ost__entry *e, ost_value *out) {
    if (m->is_set) {
        *out = OST_NONE;
        return 0;
    }
    /* most values are references or ints: no reader for those */
    if (ost__conn_fast_ref(c, e->data, e->len, out) == 0) return 0;
    int64_t iv;
    if (ost__flat_lone_int(e->data, e->len, &iv) && (*out = ost_int(iv))) return 0;
    char inner[sizeof c->msg];
    c->msg[0] = 0;
    int rc = e->len ? ost_load(c->r, e->data, e->len, out, NULL) : OST_ETRUNCATED;
    if (!rc) return 0;
    ost__fmt(inner, sizeof inner, "%s", c->msg[0] ? c->msg : ost_reader_errmsg(c->r));
    ost_value kv = ost__mkey_decode(&m->kind, key, kl);
    ost_buf b = {0};
    if (!kv || ost_repr(kv, &b)) b.data = NULL;
    /* an object the value refers to that could not be read (the server
     * went away: OST_EIO) or no memory is that failure, not damage */
    bool io = rc == OST_EIO || rc == OST_ENOMEM;
    ost__c_fail(c, io ? rc : OST_ECORRUPT, "map %llu: the entry of key %.120s %s: %s",
                (unsigned long long)m->oid, b.data ? b.data : "(damaged)",
                io ? "cannot be loaded" : "does not decode", inner);
    ost_buf_free(&b);
    ost_decref(kv);
    return io ? rc : OST_ECORRUPT;
}

/* The entry of key k in the snapshot fails its checksum. */
static int damaged_entry(ost_conn *c, ost__map *m, const uint8_t *k, size_t kl) {
    ost_value kv = ost__mkey_decode(&m->kind, k, kl);
    ost_buf b = {0};
    if (!kv || ost_repr(kv, &b)) b.data = NULL;
    ost__c_fail(c, OST_ECORRUPT,
                "map %llu: the entry of key %.120s is damaged (its checksum does not match its "
                "bytes; 'ostore check' lists the damage)",
                (unsigned long long)m->oid, b.data ? b.data : "(a damaged key)");
    ost_buf_free(&b);
    ost_decref(kv);
    return OST_ECORRUPT;
}

/* An engine operation's failure (an OST_E* code, as every engine
 * operation returns: store/engine.h) as the connection's: the engine's
 * own message (the store's: on PostgreSQL the address, what was being
 * done and the server's cause), else the code's text. */
static int eng_fail(ost_conn *c, ost__map *m, int rc) {
    if (c->msg[0]) return rc;
    const char *why = ost_store_errmsg(c->st);
    return ost__c_fail(c, rc, "%s %llu: %s", m->is_counter ? "counter" : "map",
                       (unsigned long long)m->oid, why[0] ? why : ost_strerror(rc));
}

/* The base serial of an entry first looked at now: after the snapshot
 * moved on inside the transaction, an entry newer than the transaction's
 * start was written by a commit this transaction did not see when it
 * began, so a write based on it must conflict. */
static uint64_t entry_base(const ost_conn *c, const ost__entry *e) {
    return c->snap_moved && e->serial > c->txn_serial ? OST__BASE_MOVED : e->serial;
}

static bool node_present(const pnode *n) {
    return (n->flags & P_DIRTY) ? !(n->flags & P_DEL) : n->base != 0;
}

/* Looks key up: the pending node (*node) or the snapshot's entry (*e,
 * *found). Maplock held. */
static int lookup(ost_conn *c, ost__map *m, const uint8_t *k, size_t kl, pnode **node,
                  ost__entry *e, bool *found) {
    *found = false;
    *node = sl_find(m, k, kl);
    if (*node) return 0;
    int rc = c->st->ops->ent_get(c->sess, m->oid, k, kl, e);
    if (rc == OST_ENOTFOUND) return 0;
    if (rc == OST_ECORRUPT) return damaged_entry(c, m, k, kl);
    if (rc) return eng_fail(c, m, rc);
    *found = true;
    return 0;
}

static bool ref_only(const uint8_t *p, size_t n, uint64_t *oid);

/* lookup for ost_map_get: where the engine can, the snapshot's entry
 * comes with the record of the object its value refers to, in one round
 * trip (ent_get_ref), which the connection then makes the value's ghost
 * from instead of reading it again. That statement costs the server more
 * than the entry's alone (a second index probe), which a lookup of an
 * object the cache holds does not need: after a lookup whose object was
 * in the cache, the next one reads the entry alone. Maplock held. */
static int lookup_get(ost_conn *c, ost__map *m, const uint8_t *k, size_t kl, pnode **node,
                      ost__entry *e, bool *found) {
    const ost__engine_ops *ops = c->st->ops;
    if (!ops->ent_get_ref || m->is_set) return lookup(c, m, k, kl, node, e, found);
    uint64_t ref = UINT64_MAX, oid;
    ost__recview rec;
    int rc;
    if (m->ref_held) {
        if ((rc = lookup(c, m, k, kl, node, e, found)) || *node || !*found) return rc;
    } else {
        *found = false;
        *node = sl_find(m, k, kl);
        if (*node) return 0;
        rc = ops->ent_get_ref(c->sess, m->oid, k, kl, e, &ref, &rec);
        if (rc == OST_ENOTFOUND) return 0;
        if (rc == OST_ECORRUPT) return damaged_entry(c, m, k, kl);
        if (rc) return eng_fail(c, m, rc);
        *found = true;
    }
    if (ref_only(e->data, e->len, &oid)) {
        m->ref_held = ost__conn_holds(c, oid);
        /* the engine's guess, checked against this reading of the value;
         * the hint serves a cached ghost that has not read its record too
         * (ost__conn_hint passes over an object whose record was read) */
        if (ref == oid) ost__conn_hint(c, ref, &rec);
    }
    return 0;
}

/* Opens the map and the snapshot for a call on key; encodes the key. The
 * caller unlocks the maplock when this returns 0. */
static int begin_op(ost_conn *c, ost_value v, ost_value key, bool write, ost__map **mp,
                    uint8_t *kb, size_t *kl) {
    int rc = c ? busy(c, write) : OST_EINVAL;
    if (rc) return rc;
    ost__map *m = map_of(c, v, &rc);
    if (!m) return rc;
    if (kb && (rc = encode_key(c, m->oid, &m->kind, key, false, kb, kl))) return rc;
    if ((rc = ost__conn_pin(c))) return rc;
    *mp = m;
    return 0;
}

int ost_map_get(ost_conn *c, ost_value v, ost_value key, ost_value *val) {
    if (val) *val = 0;
    if (!val) return OST_EINVAL;
    ost__map *m = NULL;
    uint8_t kb[KMAX];
    size_t kl;
    int rc = begin_op(c, v, key, false, &m, kb, &kl);
    if (rc) return rc;
    pnode *n;
    ost__entry e;
    bool found;
    rc = lookup_get(c, m, kb, kl, &n, &e, &found);
    if (!rc && n) {
        if (node_present(n)) *val = n->val;
        else rc = OST_ENOTFOUND;
    } else if (!rc && !found) {
        rc = OST_ENOTFOUND;
    } else if (!rc) {
        ost_value x;
        rc = decode_val(c, m, kb, kl, &e, &x);
        if (!rc && ost__is_heap(x) && ost__pers_is(x, OST__F_PERSISTENT)) {
            /* a stored object: the connection's cache holds it (and gives
             * the same object each time) until the transaction ends */
            ost_decref(x);
        } else if (!rc && ost__is_heap(x)) {
            /* kept until the transaction ends: the same key gives the same object */
            n = sl_insert(m, kb, kl);
            if (!n) {
                ost_release(x);
                rc = ost__c_fail(c, OST_ENOMEM, "out of memory");
            } else {
                n->val = x;
                n->base = entry_base(c, &e);
                touch(c, m);
            }
        }
        if (!rc) *val = x;
    }
    ost__conn_unpin(c);
    if (rc == OST_ENOTFOUND) c->msg[0] = 0;
    return rc;
}

int ost_map_contains(ost_conn *c, ost_value v, ost_value key) {
    ost__map *m = NULL;
    uint8_t kb[KMAX];
    size_t kl;
    int rc = begin_op(c, v, key, false, &m, kb, &kl);
    if (rc) return rc;
    pnode *n;
    ost__entry e;
    bool found;
    rc = lookup(c, m, kb, kl, &n, &e, &found);
    ost__conn_unpin(c);
    if (rc) return rc;
    return n ? node_present(n) : found;
}

int ost_map_len(ost_conn *c, ost_value v, uint64_t *out) {
    if (out) *out = 0;
    if (!out) return OST_EINVAL;
    ost__map *m = NULL;
    int rc = begin_op(c, v, 0, false, &m, NULL, NULL);
    if (rc) return rc;
    uint64_t n = 0;
    if (!m->is_new) {
        ost__recview r;
        rc = c->st->ops->get(c->sess, m->oid, &r);
        if (!rc) rc = ost__map_record_count(r.pickle, r.len, &n);
        if (rc == OST_ENOTFOUND)
            rc = ost__c_fail(c, OST_ENOTFOUND, "map %llu: no record (removed by pack?)",
                             (unsigned long long)m->oid);
        else if (rc)
            rc = eng_fail(c, m, rc);
    }
    ost__conn_unpin(c);
    if (!rc) *out = n + (uint64_t)m->delta;
    return rc;
}

/* ---- writes ------------------------------------------------------------------ */

/* Sets (val != 0) or deletes (val 0) the key of kb; steals val. */
static int write_key(ost_conn *c, ost__map *m, const uint8_t *kb, size_t kl, ost_value val) {
    pnode *n;
    ost__entry e;
    bool found;
    int rc = lookup(c, m, kb, kl, &n, &e, &found);
    if (rc) {
        ost_release(val);
        return rc;
    }
    bool before;
    if (n) {
        before = node_present(n);
    } else {
        before = found;
        if (!val && !found) return OST_ENOTFOUND;
        if (!(n = sl_insert(m, kb, kl))) {
            ost_release(val);
            return ost__c_fail(c, OST_ENOMEM, "out of memory");
        }
        n->base = found ? entry_base(c, &e) : 0;
    }
    if (!val && !before) return OST_ENOTFOUND;
    if (!(n->flags & P_DIRTY)) m->ndirty++;
    ost_value old = n->val;
    n->val = val;
    n->flags = (uint8_t)(P_DIRTY | (val ? 0 : P_DEL));
    ost_release(old);
    m->delta += (val != 0) - before;
    touch(c, m);
    return 0;
}

static int check_writable(ost_conn *c) {
    if (c->st->read_only)
        return ost__c_fail(c, OST_EREADONLY, "%s: the store is open read-only", c->st->shown);
    return 0;
}

int ost_map_set(ost_conn *c, ost_value v, ost_value key, ost_value val) {
    ost__map *m = NULL;
    uint8_t kb[KMAX];
    size_t kl;
    int rc = c ? check_writable(c) : OST_EINVAL;
    if (!rc) rc = begin_op(c, v, key, true, &m, kb, &kl);
    if (!rc) {
        if (m->is_set && val && val != OST_NONE)
            rc = ost__c_fail(c, OST_ETYPE, "map %llu is a set: its entries have no value",
                             (unsigned long long)m->oid);
        else if (!m->is_set && !val)
            rc = ost__c_fail(c, OST_EINVAL, "map %llu: no value given", (unsigned long long)m->oid);
        else {
            rc = write_key(c, m, kb, kl, val ? val : OST_NONE);
            val = 0;
        }
        ost__conn_unpin(c);
    }
    ost_decref(key);
    ost_release(val);
    return rc;
}

int ost_map_add(ost_conn *c, ost_value v, ost_value key) { return ost_map_set(c, v, key, OST_NONE); }

int ost_map_del(ost_conn *c, ost_value v, ost_value key) {
    ost__map *m = NULL;
    uint8_t kb[KMAX];
    size_t kl;
    int rc = c ? check_writable(c) : OST_EINVAL;
    if (!rc) rc = begin_op(c, v, key, true, &m, kb, &kl);
    if (rc) return rc;
    rc = write_key(c, m, kb, kl, 0);
    ost__conn_unpin(c);
    if (rc == OST_ENOTFOUND) {
        ost_buf b = {0};
        ost_repr(key, &b);
        ost__c_fail(c, rc, "map %llu: no key %.200s", (unsigned long long)m->oid, b.data ? b.data : "");
        ost_buf_free(&b);
    }
    return rc;
}

/* ---- indexes kept from the objects' fields -------------------------------------- */

/* The key of obj in map v by fields (ost_map_set_by): a new reference in
 * *out, or a code with c's message set. */
static int key_by(ost_conn *c, ost_value v, const char *fields, ost_value obj, ost_value *out) {
    *out = 0;
    int rc;
    ost__map *m = map_of(c, v, &rc);
    if (!m) return rc;
    if (m->is_set || m->is_counter)
        return ost__c_fail(c, OST_EINVAL, "map %llu is a %s: an index by fields maps keys to "
                           "objects", (unsigned long long)m->oid, m->is_set ? "set" : "counter");
    if (!fields) return ost__c_fail(c, OST_EINVAL, "map %llu: no fields given", (unsigned long long)m->oid);
    ost_value vals[OST__MKIND_MAX];
    size_t n = 0;
    const char *p = fields;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && (*p == ' ' || *p == '\t')) p++, len--;
        while (len && (p[len - 1] == ' ' || p[len - 1] == '\t')) len--;
        char name[256];
        if (!len || len >= sizeof name || n == m->kind.n) {
            rc = ost__c_fail(c, OST_EINVAL, "map %llu: fields \"%.100s\": %s", (unsigned long long)m->oid,
                             fields, n == m->kind.n ? "more names than the key's elements"
                                                    : "an empty or overlong name");
            break;
        }
        memcpy(name, p, len);
        name[len] = 0;
        ost_value x;
        rc = ost_instance_getattr_ex(obj, name, &x);
        if (!rc && !x) rc = OST_ENOTFOUND;
        if (rc) {
            ost__c_fail(c, rc, "map %llu: field '%s' of the object %s", (unsigned long long)m->oid,
                        name, rc == OST_ENOTFOUND ? "is unset (or the object has no such field)"
                                                  : ost_value_errmsg());
            break;
        }
        vals[n++] = ost_incref(x);
        if (!end) break;
        p = end + 1;
    }
    if (!rc && n != m->kind.n)
        rc = ost__c_fail(c, OST_EINVAL, "map %llu: fields \"%.100s\" name %zu values, a key of kind %s "
                         "has %u", (unsigned long long)m->oid, fields, n, m->kind.canon, m->kind.n);
    if (!rc && !m->kind.tuple) {
        *out = vals[0];
        return 0;
    }
    ost_value t = rc ? 0 : ost_tuple_new(n);
    for (size_t i = 0; i < n; i++) {
        if (t) ost_tuple_set(t, i, vals[i]);
        else ost_decref(vals[i]);
    }
    if (!rc && !t) rc = ost__c_fail(c, OST_ENOMEM, "out of memory");
    *out = t;
    return rc;
}

int ost_map_set_by(ost_conn *c, ost_value m, const char *fields, ost_value obj) {
    ost_value key;
    int rc = key_by(c, m, fields, obj, &key);
    return rc ? rc : ost_map_set(c, m, key, ost_incref(obj));
}

int ost_map_del_by(ost_conn *c, ost_value m, const char *fields, ost_value obj) {
    ost_value key, cur = 0;
    int rc = key_by(c, m, fields, obj, &key);
    if (rc) return rc;
    rc = ost_map_get(c, m, key, &cur);
    if (!rc && cur != obj) rc = OST_ENOTFOUND;
    if (rc == OST_ENOTFOUND) {
        ost_buf b = {0};
        ost_repr(key, &b);
        uint64_t oid = cur ? ost_oid(c, cur) : UINT64_MAX;
        char other[48] = "";
        if (oid != UINT64_MAX) snprintf(other, sizeof other, " (oid %llu)", (unsigned long long)oid);
        ost__c_fail(c, rc, "map %llu: %s %.200s%s%s", (unsigned long long)ost_oid(c, m),
                    cur ? "the key made of the object's fields maps to another object:"
                        : "no key made of the object's fields:",
                    b.data ? b.data : "", cur ? other : "",
                    cur ? "; nothing removed" : "");
        ost_buf_free(&b);
    } else if (!rc) {
        rc = ost_map_del(c, m, key);
    }
    ost_decref(key);
    return rc;
}

int ost_map_each(ost_conn *c, ost_value m, const ost_map_range *r, ost_map_each_fn fn,
                 void *ud) {
    if (!fn) return c ? ost__c_fail(c, OST_EINVAL, "ost_map_each: no function") : OST_EINVAL;
    ost_map_cursor *cur;
    int rc = ost_map_cursor_open(c, m, r, &cur);
    ost_value k, v;
    int frc = 0;
    while (!rc && (rc = ost_map_cursor_next(cur, &k, &v)) == 0 && !(frc = fn(ud, k, v))) {}
    ost_map_cursor_close(cur);
    if (frc) return frc;
    return rc == OST_ENOTFOUND ? 0 : rc;
}

/* ---- counters ------------------------------------------------------------------ */

/* A counter's kind: no keys; "counter" as its record says. */
static const ost__mkind counter_kind = {.canon = "counter"};

/* The state of counter v in connection c, made on first use. */
static ost__map *counter_of(ost_conn *c, ost_value v, int *rc) {
    *rc = 0;
    uint64_t oid = ost_oid(c, v);
    if (oid == UINT64_MAX) {
        *rc = ost__c_fail(c, OST_EINVAL, "not a persistent object of this connection");
        return NULL;
    }
    ost__ptr_slot *s = ost__ptrtab_find(&c->maps, (uintptr_t)(oid + 1));
    if (s->key) {
        ost__map *m = (ost__map *)(uintptr_t)s->val;
        if (m->is_counter) return m;
    }
    if (s->key || ost__map_class(ost_instance_class(v)) != MC_COUNTER) {
        *rc = ost__c_fail(c, OST_EINVAL, "oid %llu is not a counter (ostore.maps.Counter)",
                          (unsigned long long)oid);
        return NULL;
    }
    ost__map *m = map_alloc(c, oid, &counter_kind, false);
    if (!m) *rc = ost__c_fail(c, OST_ENOMEM, "out of memory");
    else m->is_counter = true;
    return m;
}

int ost_counter_new(ost_conn *c, int64_t initial, ost_value *out) {
    if (out) *out = 0;
    if (!c || !out) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    c->msg[0] = 0;
    int rc = check_writable(c);
    if (!rc) rc = busy(c, true);
    if (rc) return rc;
    ost__map *m;
    rc = new_object(c, c->st->counter_cls, &counter_kind, initial, false, "counter", &m, out);
    if (rc) return rc;
    m->is_counter = true;
    m->initial = initial;
    touch(c, m);
    return 0;
}

int ost_counter_add(ost_conn *c, ost_value v, int64_t delta) {
    if (!c) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    c->msg[0] = 0;
    int rc = check_writable(c);
    if (!rc) rc = busy(c, true);
    if (rc) return rc;
    ost__map *m = counter_of(c, v, &rc);
    if (!m) return rc;
    int64_t sum;
    if (__builtin_add_overflow(m->delta, delta, &sum) ||
        (m->is_new && __builtin_add_overflow(m->initial, sum, &(int64_t){0})))
        return ost__c_fail(c, OST_ELIMIT, "counter %llu: the transaction's adds would pass the "
                           "64-bit range", (unsigned long long)m->oid);
    m->delta = sum;
    m->ndirty = 1;
    touch(c, m);
    return 0;
}

int ost_counter_get(ost_conn *c, ost_value v, int64_t *value) {
    if (value) *value = 0;
    if (!c || !value) return OST_EINVAL;
    if (!c->st) return ost__conn_dead(c);
    c->msg[0] = 0;
    int rc = busy(c, false);
    if (rc) return rc;
    ost__map *m = counter_of(c, v, &rc);
    if (!m) return rc;
    int64_t base = m->initial;
    if (!m->is_new) {
        if ((rc = ost__conn_pin(c))) return rc;
        ost__recview r;
        rc = c->st->ops->get(c->sess, m->oid, &r);
        if (!rc) rc = ost__record_value(r.pickle, r.len, &base);
        ost__conn_unpin(c);
        if (rc == OST_ENOTFOUND)
            return ost__c_fail(c, rc, "counter %llu: no record (removed by pack?)",
                               (unsigned long long)m->oid);
        if (rc == OST_ECORRUPT)
            return ost__c_fail(c, rc, "counter %llu: its record is not a counter record",
                               (unsigned long long)m->oid);
        if (rc) return eng_fail(c, m, rc);
    }
    if (__builtin_add_overflow(base, m->delta, value))
        return ost__c_fail(c, OST_ELIMIT, "counter %llu: its value and this transaction's adds "
                           "pass the 64-bit range", (unsigned long long)m->oid);
    return 0;
}

/* ---- cursors ------------------------------------------------------------------ */

struct ost_map_cursor {
    ost_conn *c;
    ost__map *m;
    uint64_t gen;     /* the transaction it belongs to */
    bool reverse, done;
    bool has_lo, has_hi, lo_ex, hi_ex, has_last;
    size_t lol, hil, lastl;
    uint8_t lo[KMAX], hi[KMAX], last[KMAX];
    ost__ecur *ec;    /* the snapshot's next candidate */
    const ost__engine_ops *ops; /* whose cursor ec is */
    uint64_t ec_gen;  /* snapshot the ecur belongs to */
    /* a walk of the whole map (no range): the snapshot's entries it met
     * (returned or reported damaged), counted while it stays in the
     * snapshot it started in, for the check of the map's count at its end */
    bool whole, moved;
    uint64_t met, start_gen;
    ost_value key, val;
    /* what the snapshot cursor's pages carry: keys only (ecur_keys_only),
     * and how many of its entries from the current one on the last read
     * ahead of their values' records covered (0: read ahead at the next
     * value) */
    bool ec_keys;
    int ahead;
};

/* Makes the range of every key whose encoding starts with the cursor's lo
 * (the encoded prefix: a tuple's elements end with their terminators, a
 * lone str or bytes key has none, so the bytes' prefix is the key's): lo
 * included, up to ost_map_prefix_end's bound, excluded. An empty prefix is
 * no bound at all. */
static void prefix_bounds(ost_map_cursor *cur) {
    cur->has_lo = cur->lol > 0;
    cur->lo_ex = false;
    cur->hil = ost_map_prefix_end(cur->lo, cur->lol, cur->hi);
    cur->has_hi = cur->hil > 0;
    cur->hi_ex = true;
}

int ost_map_cursor_open(ost_conn *c, ost_value v, const ost_map_range *r, ost_map_cursor **out) {
    if (out) *out = NULL;
    if (!out || !c) return OST_EINVAL;
    int rc = busy(c, false);
    if (rc) return rc;
    ost__map *m = map_of(c, v, &rc);
    if (!m) return rc;
    ost_map_cursor *cur = calloc(1, sizeof *cur);
    if (!cur) return ost__c_fail(c, OST_ENOMEM, "out of memory");
    cur->c = c;
    cur->m = m;
    cur->gen = c->txn_gen;
    if (r && r->prefix && (r->from || r->to)) {
        free(cur);
        return ost__c_fail(c, OST_EINVAL, "map %llu: a range takes a prefix or bounds (from, to), "
                           "not both", (unsigned long long)m->oid);
    }
    if (r && r->prefix) {
        cur->reverse = r->reverse;
        rc = encode_key(c, m->oid, &m->kind, r->prefix, true, cur->lo, &cur->lol);
        if (rc) {
            free(cur);
            return rc;
        }
        prefix_bounds(cur);
    } else if (r) {
        cur->reverse = r->reverse;
        if (r->from) {
            rc = encode_key(c, m->oid, &m->kind, r->from, true, cur->lo, &cur->lol);
            cur->has_lo = true;
            cur->lo_ex = r->from_exclusive;
        }
        if (!rc && r->to) {
            rc = encode_key(c, m->oid, &m->kind, r->to, true, cur->hi, &cur->hil);
            cur->has_hi = true;
            cur->hi_ex = r->to_exclusive;
        }
        if (rc) {
            free(cur);
            return rc;
        }
    }
    /* a cursor never outlives its transaction's map state: its steps check
     * the transaction first (abort frees a new map's state) */
    cur->ops = c->st->ops;
    cur->whole = !cur->has_lo && !cur->has_hi;
    *out = cur;
    return 0;
}

void ost_map_cursor_close(ost_map_cursor *cur) {
    if (!cur) return;
    if (cur->ec) cur->ops->ecur_close(cur->ec);
    ost_decref(cur->key);
    ost_release(cur->val);
    free(cur);
}

/* Whether key k is beyond the end of the range in the cursor's direction. */
static bool past_end(const ost_map_cursor *cur, const uint8_t *k, size_t kl) {
    if (!cur->reverse) {
        if (!cur->has_hi) return false;
        int r = kcmp(k, kl, cur->hi, cur->hil);
        return r > 0 || (r == 0 && cur->hi_ex);
    }
    if (!cur->has_lo) return false;
    int r = kcmp(k, kl, cur->lo, cur->lol);
    return r < 0 || (r == 0 && cur->lo_ex);
}

/* Where the next step starts: after the last key given (exclusive), else
 * at the range's first bound in the cursor's direction; *t NULL: the
 * map's end. */
static void start_point(const ost_map_cursor *cur, const uint8_t **t, size_t *tl, bool *ex) {
    *t = NULL;
    *tl = 0;
    *ex = false;
    if (cur->has_last) *t = cur->last, *tl = cur->lastl, *ex = true;
    else if (!cur->reverse && cur->has_lo) *t = cur->lo, *tl = cur->lol, *ex = cur->lo_ex;
    else if (cur->reverse && cur->has_hi) *t = cur->hi, *tl = cur->hil, *ex = cur->hi_ex;
}

/* Puts the snapshot cursor on the first entry after the position (or at
 * the start of the range). */
static int ec_position(ost_map_cursor *cur) {
    ost_conn *c = cur->c;
    const ost__engine_ops *ops = c->st->ops;
    if (cur->ec) ops->ecur_close(cur->ec);
    cur->ec = NULL;
    int rc = ops->ecur_open(c->sess, cur->m->oid, &cur->ec);
    if (rc) return rc;
    cur->ec_gen = c->snap_gen;
    cur->ahead = 0;
    if (ops->ecur_keys_only) ops->ecur_keys_only(cur->ec, cur->ec_keys);
    const uint8_t *t;
    size_t tl;
    bool ex;
    start_point(cur, &t, &tl, &ex);
    rc = ops->ecur_seek(cur->ec, t, tl, cur->reverse);
    if (rc == 0 && ex) {
        const uint8_t *k;
        size_t kl;
        ost__entry e;
        if ((rc = ops->ecur_get(cur->ec, &k, &kl, &e)) && rc != OST_ECORRUPT) return rc;
        if (kcmp(k, kl, t, tl) == 0) rc = ops->ecur_step(cur->ec, cur->reverse);
    }
    return rc == OST_ENOTFOUND ? 0 : rc;
}

/* The pending node after the position, in the cursor's direction. */
static pnode *pend_next(ost_map_cursor *cur) {
    ost__map *m = cur->m;
    if (!m->head->next[0]) return NULL;
    const uint8_t *t;
    size_t tl;
    bool ex;
    start_point(cur, &t, &tl, &ex);
    if (!cur->reverse) return t ? sl_seek(m, t, tl, ex, NULL) : m->head->next[0];
    return t ? sl_before(m, t, tl, !ex) : sl_last(m);
}

/* The end of a cursor's walk: OST_ENOTFOUND, or OST_ECORRUPT when it
 * walked the whole map in one snapshot, with no change of this
 * transaction to the map, and met another number of entries than the
 * map's record counts (a damaged key that the page checks and checksums
 * could not tell from another map's, or a lost entry: nothing else makes
 * them differ). */
static int whole_end(ost_map_cursor *cur) {
    ost_conn *c = cur->c;
    ost__map *m = cur->m;
    if (!cur->whole || cur->moved || m->is_new || m->head->next[0] || m->delta ||
        cur->start_gen != c->snap_gen)
        return OST_ENOTFOUND;
    ost__recview r;
    uint64_t n;
    int rc = c->st->ops->get(c->sess, m->oid, &r);
    if (!rc) rc = ost__map_record_count(r.pickle, r.len, &n);
    if (rc) return eng_fail(c, m, rc);
    if (n == cur->met) return OST_ENOTFOUND;
    return ost__c_fail(c, OST_ECORRUPT,
                       "map %llu: its walk met %llu entries and its record counts %llu: the "
                       "store is damaged ('ostore check' lists the damage, 'ostore salvage' "
                       "copies what is intact)",
                       (unsigned long long)m->oid, (unsigned long long)cur->met,
                       (unsigned long long)n);
}

/* The snapshot cursor failed (damaged pages, as the engine's message
 * says): it is dropped, so that the next step seeks again from the last
 * key given and meets the same damage, never the entries after it as if
 * nothing were missing. */
static int stuck(ost_map_cursor *cur, int rc) {
    if (cur->ec) cur->ops->ecur_close(cur->ec);
    cur->ec = NULL;
    cur->moved = true;
    return eng_fail(cur->c, cur->m, rc);
}

/* The oids the values of a page of entries refer to (read_ahead). */
typedef struct {
    uint64_t *oids;
    size_t n, cap;
    bool nomem;
} oidlist;

static void add_oid(void *ud, uint64_t oid) {
    oidlist *l = ud;
    if (l->nomem) return;
    if (ost__reserve((void **)&l->oids, &l->cap, l->n + 1, sizeof *l->oids, 256)) {
        l->nomem = true;
        return;
    }
    l->oids[l->n++] = oid;
}

static int page_pids(void *ud, const uint8_t *key, size_t klen, const ost__entry *e) {
    (void)key, (void)klen;
    if (e->len) (void)ost__scan_pids(e->data, e->len, add_oid, ud); /* damage: decode says */
    return ((oidlist *)ud)->nomem;
}

/* Before the values of a page of the snapshot's entries are decoded, on
 * an engine whose reads are round trips: the records of the persistent
 * objects they refer to that the connection does not hold, in one
 * get_many (the connection's read-ahead table), so that the ghosts the
 * decoding makes, and their loading, read no record each (a format-4
 * reference names the class, so only the load needs the record; a format-3
 * one needs it for the ghost's class too). The
 * page is what the engine's cursor holds already (ecur_ahead: no trip). */
static void read_ahead(ost_map_cursor *cur) {
    ost_conn *c = cur->c;
    const ost__engine_ops *ops = c->st->ops;
    if (cur->ahead > 0 || cur->m->is_set || !ops->ecur_ahead || (ops->flags & OST__ENG_LOCAL_READS))
        return;
    oidlist l = {0};
    cur->ahead = ops->ecur_ahead(cur->ec, cur->reverse, page_pids, &l);
    if (l.n) ost__conn_readahead(c, l.oids, l.n);
    free(l.oids);
}

/* Whether the value pickle p[0, n) is one persistent reference and
 * nothing else (what ostore writes for a persistent object as a map's
 * value): PROTO, an optional FRAME, the pid (an int, or a tuple of two
 * ints whose first is the oid), BINPERSID, an optional memo put, STOP.
 * *oid gets the pid's oid. */
static bool ref_only(const uint8_t *p, size_t n, uint64_t *oid) {
    size_t i = 0;
    uint64_t v[2];
    int nint = 0;
    if (i + 2 <= n && p[i] == 0x80) i += 2;               /* PROTO */
    if (i + 9 <= n && p[i] == 0x95) i += 9;               /* FRAME */
    while (i < n && nint < 2) {
        uint8_t op = p[i];
        uint64_t x = 0;
        if (op == 'K' && i + 2 <= n) x = p[i + 1], i += 2; /* BININT1 */
        else if (op == 'M' && i + 3 <= n) x = ost__rd_le16(p + i + 1), i += 3;
        else if (op == 'J' && i + 5 <= n && !(p[i + 4] & 0x80)) x = ost__rd_le32(p + i + 1), i += 5;
        else if (op == 0x8a && i + 2 <= n && p[i + 1] <= 8 && i + 2 + p[i + 1] <= n) {
            size_t w = p[i + 1]; /* LONG1: little-endian two's complement */
            if (w && (p[i + 1 + w] & 0x80)) return false;
            for (size_t j = 0; j < w; j++) x |= (uint64_t)p[i + 2 + j] << (8 * j);
            i += 2 + w;
        } else break;
        v[nint++] = x;
    }
    if (nint == 2) {
        if (i >= n || p[i] != 0x86) return false; /* TUPLE2 */
        i++;
        if (i < n && p[i] == 0x94) i++;             /* MEMOIZE */
    } else if (nint != 1) {
        return false;
    }
    if (i >= n || p[i++] != 'Q') return false;      /* BINPERSID */
    if (i < n && p[i] == 0x94) i++;                 /* MEMOIZE */
    else if (i + 2 <= n && p[i] == 'q') i += 2;     /* BINPUT */
    else if (i + 5 <= n && p[i] == 'r') i += 5;     /* LONG_BINPUT */
    if (i + 1 != n || p[i] != '.') return false;    /* STOP */
    *oid = v[0];
    return true;
}

/* The oid of the persistent object an entry's value refers to, or
 * UINT64_MAX when the value is no persistent object: read off the pickle
 * without making a ghost when it is a lone reference, else by decoding it.
 * Maplock held. */
static int entry_oid(ost_conn *c, ost__map *m, const uint8_t *key, size_t kl, const ost__entry *e,
                     uint64_t *oid) {
    *oid = UINT64_MAX;
    if (m->is_set) return 0;
    if (ref_only(e->data, e->len, oid)) return 0;
    ost_value v;
    int rc = decode_val(c, m, key, kl, e, &v);
    if (rc) return rc;
    if (ost__is_heap(v) && ost__pers_is(v, OST__F_PERSISTENT)) *oid = ost_oid(c, v);
    ost_release(v);
    return 0;
}

static int cursor_step(ost_map_cursor *cur, ost_value *key, ost_value *val, uint64_t *oid) {
    ost_conn *c = cur->c;
    ost__map *m = cur->m;
    const ost__engine_ops *ops = c->st->ops;
    int rc;
    /* a step that wants neither value nor oid reads no value: the pages
     * fetched from now on come without them; a step that wants one after
     * such pages seeks again from the last key given (one round trip) */
    bool keys = !val && !oid, again = false;
    if (cur->ec && ops->ecur_keys_only && cur->ec_keys != keys)
        again = ops->ecur_keys_only(cur->ec, keys) && !keys;
    cur->ec_keys = keys;
    if (!cur->ec || cur->ec_gen != c->snap_gen || again) {
        if (!cur->ec && !cur->has_last) cur->start_gen = c->snap_gen;
        else if (!again) cur->moved = true;
        if ((rc = ec_position(cur))) return stuck(cur, rc);
    }
    for (;;) {
        const uint8_t *dk = NULL, *k;
        size_t dkl = 0, kl;
        ost__entry e;
        rc = ops->ecur_get(cur->ec, &dk, &dkl, &e);
        bool damaged = rc == OST_ECORRUPT;
        if (rc == OST_ENOTFOUND) dk = NULL;
        else if (rc && !damaged) return stuck(cur, rc);
        pnode *n = pend_next(cur);
        if (!dk && !n) return whole_end(cur);
        int r = !dk ? 1 : !n ? -1 : kcmp(dk, dkl, PKEY(n), n->klen);
        if (cur->reverse && dk && n) r = -r;
        /* r < 0: the snapshot's entry comes first; > 0: the pending one; 0: both */
        if (r <= 0) k = dk, kl = dkl;
        else k = PKEY(n), kl = n->klen;
        if (past_end(cur, k, kl)) return OST_ENOTFOUND;
        memcpy(cur->last, k, kl); /* k may point into the cursor's page */
        cur->lastl = kl;
        cur->has_last = true;
        ost_value v = 0;
        uint64_t o = UINT64_MAX;
        bool present = false;
        int drc = 0;
        if (r <= 0) cur->met++;
        if (r < 0) {
            /* a keys-only step decodes no value, so a value that does not
             * decode is reported only to a step that asks for it */
            if (damaged) {
                drc = damaged_entry(c, m, cur->last, kl);
            } else if (val) {
                read_ahead(cur);
                drc = decode_val(c, m, cur->last, kl, &e, &v);
            } else if (oid) {
                drc = entry_oid(c, m, cur->last, kl, &e, &o);
            }
            present = !drc;
        } else if (node_present(n)) {
            present = true;
            if (val) v = ost_incref(n->val);
            else if (oid && ost__is_heap(n->val) && ost__pers_is(n->val, OST__F_PERSISTENT))
                o = ost_oid(c, n->val);
        }
        /* past a damaged entry too: the next step goes on after it */
        if (r <= 0) {
            if (cur->ahead > 0) cur->ahead--;
            if ((rc = ops->ecur_step(cur->ec, cur->reverse)) && rc != OST_ENOTFOUND) {
                /* this entry is sound; the next step seeks after it again
                 * and meets the failure itself */
                if (cur->ec) cur->ops->ecur_close(cur->ec);
                cur->ec = NULL;
                cur->moved = true;
                c->msg[0] = 0;
            }
        }
        if (drc) return drc;
        if (!present) continue; /* deleted in this transaction */
        ost_value kv = ost__mkey_decode(&m->kind, cur->last, kl);
        if (!kv) {
            ost_release(v);
            return ost__c_fail(c, OST_ECORRUPT, "map %llu: a key does not decode as %s",
                               (unsigned long long)m->oid, m->kind.canon);
        }
        ost_decref(cur->key);
        ost_release(cur->val);
        cur->key = kv;
        cur->val = v;
        if (key) *key = kv;
        if (val) *val = v;
        if (oid) *oid = o;
        return 0;
    }
}

/* A step of ost_map_cursor_next or ost_map_cursor_next_oid. */
static int cursor_next(ost_map_cursor *cur, ost_value *key, ost_value *val, uint64_t *oid) {
    if (key) *key = 0;
    if (val) *val = 0;
    if (oid) *oid = UINT64_MAX;
    if (!cur) return OST_EINVAL;
    ost_conn *c = cur->c;
    if (!c->st) return ost__conn_dead(c);
    if (cur->gen != c->txn_gen)
        return ost__c_fail(c, OST_ETXN, "map cursor: its transaction has ended");
    if (cur->done) return OST_ENOTFOUND;
    int rc = ost__conn_pin(c);
    if (rc) return rc;
    rc = cursor_step(cur, key, val, oid);
    ost__conn_unpin(c);
    if (rc == OST_ENOTFOUND) cur->done = true;
    return rc;
}

int ost_map_cursor_next(ost_map_cursor *cur, ost_value *key, ost_value *val) {
    return cursor_next(cur, key, val, NULL);
}

int ost_map_cursor_next_oid(ost_map_cursor *cur, ost_value *key, uint64_t *oid) {
    if (oid) *oid = UINT64_MAX;
    if (!oid) {
        if (key) *key = 0;
        if (cur) ost__c_fail(cur->c, OST_EINVAL, "ost_map_cursor_next_oid: oid is NULL");
        return OST_EINVAL;
    }
    return cursor_next(cur, key, NULL, oid);
}

static int end_key(ost_conn *c, ost_value v, bool last, ost_value *key) {
    if (key) *key = 0;
    if (!key) return OST_EINVAL;
    ost_map_range r = {.reverse = last};
    ost_map_cursor *cur;
    int rc = ost_map_cursor_open(c, v, &r, &cur);
    if (rc) return rc;
    ost_value k;
    rc = ost_map_cursor_next(cur, &k, NULL);
    if (!rc) *key = ost_incref(k);
    ost_map_cursor_close(cur);
    return rc;
}

int ost_map_first(ost_conn *c, ost_value v, ost_value *key) { return end_key(c, v, false, key); }
int ost_map_last(ost_conn *c, ost_value v, ost_value *key) { return end_key(c, v, true, key); }

/* ---- commit ------------------------------------------------------------------- */

bool ost__maps_touched(const ost_conn *c) { return c->mtouched != NULL; }

/* Whether the transaction changed a map: a new map or counter, or an
 * entry set or deleted. */
static bool maps_dirty(ost_conn *c) {
    for (ost__map *m = c->mtouched; m; m = m->tnext)
        if (m->is_new || m->ndirty) return true;
    return false;
}

/* A counter's part of the package: a new counter's record with its value,
 * or the add of the transaction (OST__MENT_COUNT). */
static int counter_prepare(ost_conn *c, ost__map *m, ost__pkg *p) {
    if (m->is_new) {
        uint8_t rec[128];
        size_t n = ost__map_record(rec, sizeof rec, counter_kind.canon,
                                   (uint64_t)(m->initial + m->delta));
        uint32_t cid;
        ost__st_clear(c->st);
        int rc = ost__class_id_cached(c->st, c->st->counter_cls, &cid);
        if (!rc) rc = ost__pkg_add(p, m->oid, 0, cid, rec, n);
        if (rc) {
            const char *why = ost_store_errmsg(c->st);
            return ost__c_fail(c, rc, "counter %llu: %s", (unsigned long long)m->oid,
                               why[0] ? why : ost_strerror(rc));
        }
        return 0;
    }
    if (!m->delta) return 0;
    uint8_t d[8];
    ost__le64(d, (uint64_t)m->delta);
    if (ost__pkg_ment(p, m->oid, 0, NULL, 0, d, 8, OST__MENT_COUNT))
        return ost__c_fail(c, OST_ENOMEM, "out of memory");
    return 0;
}

/* Adds the transaction's map changes to package p: new maps' and
 * counters' records, counters' adds, the dirty entries in key order. 0 or
 * a code with the connection's message set. */
static int maps_prepare(ost_conn *c, ost__pkg *p) {
    p->since = c->txn_serial;
    for (ost__map *m = c->mtouched; m; m = m->tnext) {
        if (m->is_counter) {
            int rc = counter_prepare(c, m, p);
            if (rc) return rc;
            continue;
        }
        if (m->is_new) {
            uint8_t rec[128];
            size_t n = ost__map_record(rec, sizeof rec, m->kind.canon, 0);
            uint32_t cid;
            ost__st_clear(c->st); /* the engine's message, if class_id fails */
            int rc = ost__class_id_cached(c->st, m->is_set ? c->st->set_cls : c->st->map_cls, &cid);
            if (!rc) rc = ost__pkg_add(p, m->oid, 0, cid, rec, n);
            if (rc) {
                const char *why = ost_store_errmsg(c->st);
                return ost__c_fail(c, rc, "map %llu: %s", (unsigned long long)m->oid,
                                   why[0] ? why : ost_strerror(rc));
            }
        }
        if (!m->ndirty) continue;
        for (pnode *n = m->head->next[0]; n; n = n->next[0]) {
            if (!(n->flags & P_DIRTY)) continue;
            const void *data = NULL;
            size_t len = 0;
            if (!(n->flags & P_DEL) && !m->is_set) {
                int rc = ost_dump(c->w, n->val, &data, &len);
                if (rc) {
                    if (c->msg[0]) return rc;
                    ost_value kv = ost__mkey_decode(&m->kind, PKEY(n), n->klen);
                    ost_buf b = {0};
                    ost_repr(kv, &b);
                    ost__c_fail(c, rc, "map %llu, key %.120s: %s", (unsigned long long)m->oid,
                                b.data ? b.data : "?", ost_writer_errmsg(c->w));
                    ost_buf_free(&b);
                    ost_decref(kv);
                    return rc;
                }
            }
            int rc = ost__pkg_ment(p, m->oid, n->base, PKEY(n), n->klen, data, len,
                                   (n->flags & P_DEL) ? OST__MENT_DEL : 0);
            if (rc) return ost__c_fail(c, rc, "out of memory");
        }
    }
    return 0;
}

/* The transaction ended (committed or not): the pending entries go; a new
 * map of a transaction not committed is forgotten. */
static void maps_txn_end(ost_conn *c, bool committed) {
    ost__map *m = c->mtouched, *next;
    c->mtouched = NULL;
    for (; m; m = next) {
        next = m->tnext;
        m->touched = false;
        m->tnext = NULL;
        sl_clear(m);
        if (m->is_new && !committed) {
            uint64_t oid = m->oid;
            map_free(c, m);
            ost__conn_forget(c, oid);
        } else {
            m->is_new = false;
        }
    }
}

/* The connection closes: frees every map state and kind string it holds. */
static void maps_free(ost_conn *c) {
    maps_txn_end(c, false);
    for (size_t i = 0; c->maps.mask && i <= c->maps.mask; i++) {
        ost__ptr_slot *s = &c->maps.slots[i];
        if (!s->key) continue;
        ost__map *m = (ost__map *)(uintptr_t)s->val;
        sl_clear(m);
        free(m->head);
        free(m);
    }
    ost__ptrtab_free(&c->maps);
    while (c->kinds) {
        struct ost__kind_str *k = c->kinds;
        c->kinds = k->next;
        free(k);
    }
}

/* The maps as a participant in the connection's transactions
 * (ost__txn_part): the connection (store/conn.c, below this file) calls
 * them through c->part, which map_alloc and intern_kind set when the
 * connection first keeps map state. */
static const ost__txn_part maps_part = {maps_dirty, maps_prepare, maps_txn_end, maps_free};

/* ---- apply (in the engine's write transaction) -------------------------------- */

/* The key's repr for a message, from its encoding. */
static void key_text(const ost__engine_ops *ops, ost__sess *s, uint64_t map, const uint8_t *k,
                     size_t kl, char *out, size_t cap) {
    snprintf(out, cap, "(%zu encoded bytes)", kl);
    ost__recview r;
    size_t off = 4 + 5 + 4;
    if (ops->get(s, map, &r)) return;
    const uint8_t *p = r.pickle;
    size_t n = r.len;
    /* the kind is the record's second string: 'kind', then the kind */
    if (n < off + 5 || p[off] != 'X') return;
    uint32_t l = ost__rd_le32(p + off + 1);
    char ks[80];
    if (l >= sizeof ks || off + 5 + l > n) return;
    memcpy(ks, p + off + 5, l);
    ks[l] = 0;
    ost__mkind kind;
    if (ost__mkind_parse(ks, &kind)) return;
    ost_value kv = ost__mkey_decode(&kind, k, kl);
    ost_buf b = {0};
    if (kv && ost_repr(kv, &b) == 0) snprintf(out, cap, "%.190s", b.data);
    ost_buf_free(&b);
    ost_decref(kv);
}

typedef struct {
    uint64_t map;
    int64_t delta;
    bool counter;
} mdelta;

int ost__maps_count_add(const ost__engine_ops *ops, ost__sess *s, ost__pkg *p, uint64_t map,
                        int64_t delta, uint64_t serial, bool counter) {
    return ost__maps_count_fail(p, map, delta, counter,
                                ops->map_count_add(s, map, delta, serial, counter));
}

int ost__maps_count_fail(ost__pkg *p, uint64_t map, int64_t delta, bool counter, int rc) {
    const char *what = counter ? "counter" : "map";
    if (rc == OST_ECONFLICT)
        ost__fmt(p->msg, sizeof p->msg,
                 "conflict on %s %llu: it was removed (pack) after this transaction read it", what,
                 (unsigned long long)map);
    else if (rc == OST_ECORRUPT)
        ost__fmt(p->msg, sizeof p->msg, "%s %llu: its record is not a %s record", what,
                 (unsigned long long)map, what);
    else if (rc == OST_ELIMIT)
        ost__fmt(p->msg, sizeof p->msg,
                 "counter %llu: adding %lld to it would pass the 64-bit range; nothing was "
                 "written", (unsigned long long)map, (long long)delta);
    return rc;
}

int ost__maps_apply(const ost__engine_ops *ops, ost__sess *s, ost__pkg *p, uint64_t serial) {
    mdelta small[8], *d = small;
    size_t nd = 0, capd = 8;
    int rc = 0;
    bool append = true; /* the loader's sorted batches of new keys append */
    for (size_t i = 0; i < p->nments && !rc; i++) {
        ost__ment *me = &p->ments[i];
        const uint8_t *k = p->bytes + me->koff;
        int64_t dl = 0;
        if (me->flags & OST__MENT_COUNT) {
            /* a counter's add: summed per counter below, never a conflict */
            dl = ost__ment_delta(p, me);
        } else if (me->flags & OST__MENT_BLIND) {
            bool existed;
            rc = ops->ent_put(s, me->map, k, me->klen, serial, p->bytes + me->voff, me->vlen,
                              &existed, &append);
            dl = !existed;
        } else {
            ost__entry e;
            uint64_t deleted = 0;
            rc = ops->ent_get_del(s, me->map, k, me->klen, &e, &deleted);
            uint64_t cur = rc == 0 ? e.serial : 0;
            if (rc == OST_ENOTFOUND) rc = 0;
            if (rc == OST_ECORRUPT) {
                char kt[160];
                key_text(ops, s, me->map, k, me->klen, kt, sizeof kt);
                snprintf(p->msg, sizeof p->msg,
                         "map %llu, key %.120s: the stored entry is damaged (its checksum does not "
                         "match); nothing was written ('ostore check', 'ostore salvage')",
                         (unsigned long long)me->map, kt);
            }
            if (rc) break;
            /* The rule (docs/maps.md): conflict when a commit after the
             * transaction's snapshot (p->since) wrote the key. Serials are
             * unique per commit and every write of an entry stamps it, so
             * an entry seen at serial base != 0 is unwritten since exactly
             * when it still has that serial. A key absent at the first look
             * (base 0) and absent now was written since exactly when its
             * last delete came after the snapshot: a set since then leaves
             * the key there or is undone by a later delete. */
            bool gone = !cur && !me->base && deleted > p->since;
            if (cur != me->base || gone) {
                char kt[200];
                key_text(ops, s, me->map, k, me->klen, kt, sizeof kt);
                if (me->base == OST__BASE_MOVED)
                    ost__fmt(p->msg, sizeof p->msg,
                             "conflict on map %llu, key %s: a commit changed it after this "
                             "transaction began (its snapshot was renewed when the map grew)",
                             (unsigned long long)me->map, kt);
                else if (cur)
                    ost__fmt(p->msg, sizeof p->msg,
                             "conflict on map %llu, key %s: commit %llu %s it after this "
                             "transaction read it",
                             (unsigned long long)me->map, kt, (unsigned long long)cur,
                             me->base ? "changed" : "added");
                else if (deleted)
                    ost__fmt(p->msg, sizeof p->msg,
                             "conflict on map %llu, key %s: commit %llu deleted it after this "
                             "transaction %s",
                             (unsigned long long)me->map, kt, (unsigned long long)deleted,
                             gone ? "began" : "read it");
                else
                    ost__fmt(p->msg, sizeof p->msg,
                             "conflict on map %llu, key %s: another commit deleted it after this "
                             "transaction read it",
                             (unsigned long long)me->map, kt);
                rc = OST_ECONFLICT;
                break;
            }
            if (me->flags & OST__MENT_DEL) {
                if (cur) {
                    rc = ops->ent_del(s, me->map, k, me->klen, serial);
                    dl = -1;
                }
            } else {
                rc = ops->ent_put(s, me->map, k, me->klen, serial, p->bytes + me->voff,
                                  me->vlen, NULL, NULL);
                dl = !cur;
            }
        }
        if (rc) break;
        if (!nd || d[nd - 1].map != me->map) {
            size_t j = 0;
            while (j < nd && d[j].map != me->map) j++;
            if (j == nd) {
                if (nd == capd) {
                    size_t nc;
                    mdelta *nn = NULL;
                    if (!ost__grow_cap(capd, nd + 1, sizeof *nn, 0, &nc)) nn = malloc(nc * sizeof *nn);
                    if (!nn) {
                        rc = OST_ENOMEM;
                        break;
                    }
                    memcpy(nn, d, nd * sizeof *d);
                    if (d != small) free(d);
                    d = nn;
                    capd = nc;
                }
                d[nd++] = (mdelta){me->map, 0, (me->flags & OST__MENT_COUNT) != 0};
            } else {
                mdelta t = d[j];
                d[j] = d[nd - 1];
                d[nd - 1] = t;
            }
        }
        /* one connection sends one add per counter: no sum overflows */
        d[nd - 1].delta += dl;
    }
    for (size_t j = 0; j < nd && !rc; j++)
        if (d[j].delta || !d[j].counter)
            rc = ost__maps_count_add(ops, s, p, d[j].map, d[j].delta, serial, d[j].counter);
    if (rc == OST_ENOMEM) ost__fmt(p->msg, sizeof p->msg, "out of memory");
    if (d != small) free(d);
    return rc;
}

/* ---- bulk loading ---------------------------------------------------------------- */

int ost__map_encode_for(ost_conn *c, ost_value v, ost_value key, uint64_t *oid, bool *is_set,
                        uint8_t *kb, size_t *kl) {
    int rc;
    ost__map *m = map_of(c, v, &rc);
    if (!m) return rc;
    if (m->is_new)
        return ost__c_fail(c, OST_EINVAL, "map %llu is not stored yet: commit it before loading into it",
                           (unsigned long long)m->oid);
    *oid = m->oid;
    *is_set = m->is_set;
    return encode_key(c, m->oid, &m->kind, key, false, kb, kl);
}

/* A batch's sort: an index of (map, the key's first 8 bytes) per entry,
 * compared as integers, with the whole key (then the order of adding)
 * deciding ties; then the batch's bytes are laid out again in that order,
 * so that the committer reads them in one sweep. */
typedef struct {
    uint64_t map, pre;
    uint32_t idx;
} sortent;

struct ost__msort {
    sortent *se, *tmp;
    size_t capse, captmp;
    ost__ment *ments;
    size_t capments;
    uint8_t *bytes;
    size_t capbytes;
};

static __thread const ost__pkg *t_sort_pkg;

static int sortent_cmp(const void *a, const void *b) {
    const sortent *x = a, *y = b;
    if (x->map != y->map) return x->map < y->map ? -1 : 1;
    if (x->pre != y->pre) return x->pre < y->pre ? -1 : 1;
    const ost__ment *mx = &t_sort_pkg->ments[x->idx], *my = &t_sort_pkg->ments[y->idx];
    const uint8_t *bytes = t_sort_pkg->bytes;
    int r = kcmp(bytes + mx->koff, mx->klen, bytes + my->koff, my->klen);
    if (r) return r;
    return x->idx < y->idx ? -1 : x->idx > y->idx; /* later sets win */
}

static uint64_t key_prefix(const uint8_t *k, size_t n) {
    uint64_t v = 0;
    for (size_t i = 0; i < 8; i++) v = v << 8 | (i < n ? k[i] : 0);
    return v;
}

/* A stable LSD radix sort of n entries by (map, pre), a byte a pass;
 * passes where every entry has the same byte are skipped (the high bytes
 * of int keys, a batch of one map). Returns the sorted array (a or tmp). */
static sortent *radix_sort(sortent *a, sortent *tmp, size_t n) {
    for (int pass = 0; pass < 16; pass++) {
        int shift = (pass & 7) * 8;
        bool map = pass >= 8;
        size_t count[256] = {0};
        for (size_t i = 0; i < n; i++) count[((map ? a[i].map : a[i].pre) >> shift) & 255]++;
        if (count[((map ? a[0].map : a[0].pre) >> shift) & 255] == n) continue;
        size_t sum = 0;
        for (int d = 0; d < 256; d++) {
            size_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++) tmp[count[((map ? a[i].map : a[i].pre) >> shift) & 255]++] = a[i];
        sortent *t = a;
        a = tmp;
        tmp = t;
    }
    return a;
}

void ost__msort_free(ost__msort *ms) {
    if (!ms) return;
    free(ms->tmp);
    free(ms->se);
    free(ms->ments);
    free(ms->bytes);
    free(ms);
}

/* Grows *p (of *cap elements of size sz) to hold n. */
static int grow(void **p, size_t *cap, size_t n, size_t sz) {
    return ost__reserve(p, cap, n, sz, 1024);
}

int ost__pkg_sort_ments(ost__pkg *p, ost__msort **msp) {
    if (p->nments < 2) return 0;
    /* already in order (ascending keys): nothing to do */
    size_t i = 1;
    for (; i < p->nments; i++) {
        const ost__ment *a = &p->ments[i - 1], *b = &p->ments[i];
        if (a->map > b->map) break;
        if (a->map == b->map &&
            kcmp(p->bytes + a->koff, a->klen, p->bytes + b->koff, b->klen) >= 0)
            break;
    }
    if (i == p->nments) return 0;
    if (!*msp && !(*msp = calloc(1, sizeof **msp))) return OST_ENOMEM;
    ost__msort *ms = *msp;
    if (grow((void **)&ms->se, &ms->capse, p->nments, sizeof *ms->se) ||
        grow((void **)&ms->tmp, &ms->captmp, p->nments, sizeof *ms->tmp) ||
        grow((void **)&ms->ments, &ms->capments, p->nments, sizeof *ms->ments) ||
        grow((void **)&ms->bytes, &ms->capbytes, p->nbytes, 1))
        return OST_ENOMEM;
    for (i = 0; i < p->nments; i++) {
        const ost__ment *m = &p->ments[i];
        ms->se[i] = (sortent){m->map, key_prefix(p->bytes + m->koff, m->klen), (uint32_t)i};
    }
    sortent *se = radix_sort(ms->se, ms->tmp, p->nments);
    /* equal (map, first 8 bytes): the whole keys decide, then the order of
     * adding (the radix sort kept it) */
    t_sort_pkg = p;
    for (size_t a = 0, b; a < p->nments; a = b) {
        for (b = a + 1; b < p->nments && se[b].map == se[a].map && se[b].pre == se[a].pre; b++) {
        }
        if (b - a > 1) qsort(se + a, b - a, sizeof *se, sortent_cmp);
    }
    t_sort_pkg = NULL;
    /* the records' bytes first, as they were, then the entries in order */
    size_t off = 0;
    for (i = 0; i < p->nrecs; i++) {
        ost__rec *r = &p->recs[i];
        memcpy(ms->bytes + off, p->bytes + r->off, r->len);
        r->off = off;
        off += r->len;
    }
    for (i = 0; i < p->nments; i++) {
        ost__ment m = p->ments[se[i].idx];
        size_t n = m.klen + m.vlen;
        memcpy(ms->bytes + off, p->bytes + m.koff, m.klen);
        if (m.vlen) memcpy(ms->bytes + off + m.klen, p->bytes + m.voff, m.vlen);
        m.koff = off;
        m.voff = off + m.klen;
        off += n;
        ms->ments[i] = m;
    }
    /* the package takes the sorted arrays; the scratch keeps the old ones */
    uint8_t *b = p->bytes;
    size_t cb = p->capbytes;
    p->bytes = ms->bytes, p->capbytes = ms->capbytes, p->nbytes = off;
    ms->bytes = b, ms->capbytes = cb;
    ost__ment *me = p->ments;
    size_t cm = p->capments;
    p->ments = ms->ments, p->capments = ms->capments;
    ms->ments = me, ms->capments = cm;
    return 0;
}
