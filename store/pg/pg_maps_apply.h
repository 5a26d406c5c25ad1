/* Map entries of a package, applied in the commit's transaction through
 * the engine's own operations: the checks and messages of store/maps.c's
 * ost__maps_apply, which takes an engine table on the main branch. Once
 * that version is merged, PG_MAPS_APPLY calls it and this copy goes.
 * Included by pg.c only, after the entry operations. */
#ifndef OST_PG_MAPS_APPLY_H
#define OST_PG_MAPS_APPLY_H

/* The key's repr for a message, from its encoding and the map's kind. */
static void pg_key_text(ost__sess *s, uint64_t map, const uint8_t *k, size_t kl, char *out,
                        size_t cap) {
    snprintf(out, cap, "(%zu encoded bytes)", kl);
    ost__recview rv;
    size_t off = 4 + 5 + 4;
    if (pg_get(s, map, &rv)) return;
    const uint8_t *p = rv.pickle;
    size_t n = rv.len;
    if (n < off + 5 || p[off] != 'X') return;
    uint32_t l = (uint32_t)p[off + 1] | (uint32_t)p[off + 2] << 8 | (uint32_t)p[off + 3] << 16 |
                 (uint32_t)p[off + 4] << 24;
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

static int pg_maps_apply(ost__sess *s, ost__pkg *p, uint64_t serial) {
    struct {
        uint64_t map;
        int64_t delta;
    } *d = NULL;
    size_t nd = 0, capd = 0;
    int rc = 0;
    for (size_t i = 0; i < p->nments && !rc; i++) {
        ost__ment *me = &p->ments[i];
        const uint8_t *k = p->bytes + me->koff;
        int64_t dl = 0;
        if (me->flags & OST__MENT_BLIND) {
            bool existed;
            rc = pg_ent_put(s, me->map, k, me->klen, serial, p->bytes + me->voff, me->vlen,
                            &existed, NULL);
            dl = !existed;
        } else {
            ost__entry e;
            rc = pg_ent_get(s, me->map, k, me->klen, &e);
            uint64_t cur = rc == 0 ? e.serial : 0;
            if (rc == OST_ENOTFOUND) rc = 0;
            if (rc) break;
            if (cur != me->base) {
                char kt[200];
                pg_key_text(s, me->map, k, me->klen, kt, sizeof kt);
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
                    rc = pg_ent_del(s, me->map, k, me->klen);
                    dl = -1;
                }
            } else {
                rc = pg_ent_put(s, me->map, k, me->klen, serial, p->bytes + me->voff, me->vlen,
                                NULL, NULL);
                dl = !cur;
            }
        }
        if (rc) break;
        size_t j = 0;
        while (j < nd && d[j].map != me->map) j++;
        if (j == nd) {
            if (ost__reserve((void **)&d, &capd, nd + 1, sizeof *d, 8)) {
                rc = OST_ENOMEM;
                break;
            }
            d[nd].map = me->map;
            d[nd++].delta = 0;
        }
        d[j].delta += dl;
    }
    for (size_t j = 0; j < nd && !rc; j++) {
        rc = pg_map_count_add(s, d[j].map, d[j].delta, serial);
        if (rc == OST_ECONFLICT)
            ost__fmt(p->msg, sizeof p->msg,
                     "conflict on map %llu: it was removed (pack) after this transaction read it",
                     (unsigned long long)d[j].map);
        else if (rc == OST_ECORRUPT)
            ost__fmt(p->msg, sizeof p->msg, "map %llu: its record is not a map record",
                     (unsigned long long)d[j].map);
    }
    if (rc == OST_ENOMEM) ost__fmt(p->msg, sizeof p->msg, "out of memory");
    free(d);
    return rc;
}

#define PG_MAPS_APPLY(s, p, serial) pg_maps_apply(s, p, serial)

#endif
