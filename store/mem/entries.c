/* The in-memory engine's map entries (mem.h; store/entries.h says what
 * each operation does): the list db->ents keyed by map oid (8 bytes
 * big-endian) + encoded key, so that keys order bytewise within a map as
 * LMDB orders them, and db->dels with the serial of each key's last
 * delete. Writes only inside commit (s->in_commit: the write lock held). */
#include <stdlib.h>
#include <string.h>

#include "../maprec.h"
#include "mem.h"

/* The refusal of a write outside a commit: OST_EINVAL, as LMDB says it. */
static int need_write(ost__sess *s) {
    return mem_fail(s->e, OST_EINVAL, "%s: a write outside a commit", s->e->shown);
}

/* The node of (map, key) in l (NULL: none). Lock held. */
static mem_node *find(mem_list *l, uint64_t map, const uint8_t *key, size_t klen) {
    uint8_t k[MEM_KEYMAX];
    return mem_list_find(l, k, mem_ekey(k, map, key, klen));
}

/* Entry view *e of version v (valid while a snapshot sees v). */
static void entry_of(const mem_ver *v, ost__entry *e) { *e = (ost__entry){v->serial, v->data, v->len}; }

int ost__mem_ent_get(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen, ost__entry *e) {
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    int rc = mem_rlock(s);
    if (rc) return rc;
    mem_node *n = find(&s->db->ents, map, key, klen);
    const mem_ver *v = n ? mem_see(n, s->ver) : NULL;
    if (v) entry_of(v, e);
    mem_runlock(s);
    return v ? 0 : OST_ENOTFOUND;
}

/* Pushes a version of (map, key) in list l: a value, or a tombstone when
 * gone. 0 or OST_ENOMEM. */
static int put(ost__sess *s, mem_list *l, uint64_t map, const uint8_t *key, size_t klen,
               uint64_t serial, bool gone, const void *data, size_t len) {
    uint8_t k[MEM_KEYMAX];
    return mem_write(s, l, k, mem_ekey(k, map, key, klen),
                     mem_ver_new(s->ver, serial, 0, gone, data, len));
}

int ost__mem_ent_put(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial, const void *data, size_t len, bool *existed, bool *append) {
    (void)append; /* a hint for LMDB's appends: the list finds its place as fast */
    if (!s->in_commit) return need_write(s);
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    if (existed) {
        mem_node *n = find(&s->db->ents, map, key, klen);
        *existed = n && mem_see(n, s->ver);
    }
    return put(s, &s->db->ents, map, key, klen, serial, false, data, len);
}

int ost__mem_ent_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                     uint64_t serial) {
    if (!s->in_commit) return need_write(s);
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    mem_node *n = find(&s->db->ents, map, key, klen);
    if (!n || !mem_see(n, s->ver)) return OST_ENOTFOUND;
    int rc = put(s, &s->db->ents, map, key, klen, serial, true, NULL, 0);
    if (!rc) rc = put(s, &s->db->dels, map, key, klen, serial, false, NULL, 0);
    return rc;
}

int ost__mem_ent_get_del(ost__sess *s, uint64_t map, const uint8_t *key, size_t klen,
                         ost__entry *e, uint64_t *deleted) {
    *deleted = 0;
    if (!s->in_commit) return need_write(s);
    if (klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    mem_node *n = find(&s->db->ents, map, key, klen);
    const mem_ver *v = n ? mem_see(n, s->ver) : NULL;
    if (v) {
        entry_of(v, e);
        return 0;
    }
    mem_node *d = find(&s->db->dels, map, key, klen);
    const mem_ver *dv = d ? mem_see(d, s->ver) : NULL;
    if (dv) *deleted = dv->serial;
    return OST_ENOTFOUND;
}

int mem_drop_keys(ost__sess *s, mem_list *l, uint64_t map, uint64_t *n) {
    uint8_t k[8];
    ost__be64(k, map);
    for (mem_node *x = mem_list_seek(l, k, 8); x && ost__rd_be64(x->key) == map; x = x->next[0]) {
        if (!mem_see(x, s->ver)) continue;
        int rc = mem_push(s, l, x, mem_ver_new(s->ver, 0, 0, true, NULL, 0));
        if (rc) return rc;
        if (n) (*n)++;
    }
    return 0;
}

int ost__mem_ent_drop_map(ost__sess *s, uint64_t map, uint64_t *n) {
    if (!s->in_commit) return need_write(s);
    if (n) *n = 0;
    int rc = mem_drop_keys(s, &s->db->ents, map, n);
    return rc ? rc : mem_drop_keys(s, &s->db->dels, map, NULL);
}

int ost__mem_map_count_add(ost__sess *s, uint64_t map, int64_t delta, uint64_t serial,
                           bool counter) {
    if (!s->in_commit) return need_write(s);
    uint8_t k[8];
    ost__be64(k, map);
    mem_node *n = mem_list_find(&s->db->recs, k, 8);
    const mem_ver *v = n ? mem_see(n, s->ver) : NULL;
    if (!v) return OST_ECONFLICT; /* pack removed the map */
    mem_ver *nv = mem_ver_new(s->ver, serial, v->cid, false, v->data, v->len);
    if (!nv) return OST_ENOMEM;
    int rc = ost__record_count_add(nv->data, nv->len, delta, counter);
    if (rc) {
        free(nv);
        return rc;
    }
    return mem_push(s, &s->db->recs, n, nv);
}

int mem_maps_of(ost__sess *s, mem_list *l, uint64_t **maps, size_t *n) {
    size_t cap = 0;
    *maps = NULL;
    *n = 0;
    for (mem_node *x = mem_list_first(l); x; x = x->next[0]) {
        if (!mem_see(x, s->ver)) continue;
        uint64_t m = ost__rd_be64(x->key);
        if (*n && (*maps)[*n - 1] == m) continue;
        if (mem_grow((void **)maps, &cap, *n + 1, sizeof **maps)) return OST_ENOMEM;
        (*maps)[(*n)++] = m;
    }
    return 0;
}

int ost__mem_ent_each_map(ost__sess *s, int (*fn)(void *ud, uint64_t map), void *ud) {
    int rc = mem_rlock(s);
    if (rc) return rc;
    uint64_t *maps;
    size_t n;
    rc = mem_maps_of(s, &s->db->ents, &maps, &n);
    mem_runlock(s);
    if (rc) rc = mem_fail(s->e, rc, "%s: out of memory", s->e->shown);
    for (size_t i = 0; !rc && i < n; i++) {
        int frc = fn(ud, maps[i]);
        if (frc < 0) rc = frc;
        else if (frc == 1 && !s->in_commit) rc = OST_EINVAL; /* a drop needs the commit */
        else if (frc == 1) rc = ost__mem_ent_drop_map(s, maps[i], NULL);
    }
    free(maps);
    return rc;
}

/* ---- the entry cursor ------------------------------------------------------------------ */

/* A cursor over one map's entries in the session's snapshot (or its
 * commit): on the node n, which its snapshot sees. */
struct ost__ecur {
    ost__sess *s;
    uint64_t map;
    uint64_t gen; /* the snapshot it belongs to (s->gen) */
    mem_node *n;  /* NULL: on no entry */
};

int ost__mem_ecur_open(ost__sess *s, uint64_t map, ost__ecur **out) {
    if (!s->in_snap && !s->in_commit)
        return mem_fail(s->e, OST_EINVAL, "%s: no snapshot is open", s->e->shown);
    ost__ecur *ec = calloc(1, sizeof *ec);
    if (!ec) return mem_fail(s->e, OST_ENOMEM, "%s: out of memory", s->e->shown);
    *ec = (ost__ecur){s, map, s->gen, NULL};
    *out = ec;
    return 0;
}

/* Takes the lock for a move of ec: OST_EBUSY when its snapshot ended
 * (reopen the cursor), as LMDB answers. */
static int cur_lock(ost__ecur *ec) {
    if (!ec->s->in_commit && (!ec->s->in_snap || ec->gen != ec->s->gen)) return OST_EBUSY;
    return mem_rlock(ec->s);
}

/* From x on (or back), the first node the snapshot sees; then whether it
 * is of the cursor's map: 0 on it, OST_ENOTFOUND off the map. */
static int settle(ost__ecur *ec, mem_node *x, bool reverse) {
    while (x && !mem_see(x, ec->s->ver)) x = reverse ? x->prev : x->next[0];
    ec->n = x && ost__rd_be64(x->key) == ec->map ? x : NULL;
    return ec->n ? 0 : OST_ENOTFOUND;
}

int ost__mem_ecur_seek(ost__ecur *ec, const uint8_t *key, size_t klen, bool reverse) {
    if (key && klen > OST_MAP_KEY_MAX) return OST_EINVAL;
    int rc = cur_lock(ec);
    if (rc) return rc;
    mem_list *l = &ec->s->db->ents;
    uint8_t k[MEM_KEYMAX];
    size_t kl = mem_ekey(k, ec->map, key, key ? klen : 0);
    if (!reverse) {
        rc = settle(ec, mem_list_seek(l, k, kl), false);
    } else {
        mem_node *x;
        if (key) { /* the last entry <= key */
            x = mem_list_seek(l, k, kl);
            if (x && !mem_kcmp(x->key, x->klen, k, kl) && mem_see(x, ec->s->ver)) {
                ec->n = x;
                mem_runlock(ec->s);
                return 0;
            }
        } else if (ec->map == UINT64_MAX) {
            x = NULL;
        } else { /* the map's last: before the next map's first */
            ost__be64(k, ec->map + 1);
            x = mem_list_seek(l, k, 8);
        }
        rc = settle(ec, x ? x->prev : mem_list_last(l), true);
    }
    mem_runlock(ec->s);
    return rc;
}

int ost__mem_ecur_step(ost__ecur *ec, bool reverse) {
    if (!ec->n) return OST_ENOTFOUND;
    int rc = cur_lock(ec);
    if (rc) return rc;
    rc = settle(ec, reverse ? ec->n->prev : ec->n->next[0], reverse);
    mem_runlock(ec->s);
    return rc;
}

int ost__mem_ecur_get(ost__ecur *ec, const uint8_t **key, size_t *klen, ost__entry *e) {
    if (!ec->n) return OST_ENOTFOUND;
    int rc = cur_lock(ec);
    if (rc) return rc;
    const mem_ver *v = mem_see(ec->n, ec->s->ver);
    *key = ec->n->key + 8;
    *klen = ec->n->klen - 8u;
    if (v) entry_of(v, e);
    mem_runlock(ec->s);
    return v ? 0 : OST_ENOTFOUND;
}

void ost__mem_ecur_close(ost__ecur *ec) { free(ec); }
