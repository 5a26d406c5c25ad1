/* The reader of the library damage test (tests/damage/lib_damage_test.py):
 * a program on the public API only, as any program reading a store would
 * be, that reads everything a store holds and prints what each call said,
 * one line each, so that the driver can compare a damaged copy's answers
 * with the pristine store's.
 *
 * Usage: lib_reader STORE_DIR MAX_OID
 *
 * It opens the store read-only (no registry: every class is a generic
 * one), then in one connection:
 *
 * 1. walks every record with an iterator (ost_iter_next with an object),
 *    activating each object and printing a hash of its repr:
 *      iter OID ok HASH | iter OID damaged | iter OID err CODE
 *    An error of ost_iter_next itself ends the walk ("iterstop CODE"); its
 *    normal end is "iterend". Each object is invalidated after its repr,
 *    so that every repr shows the objects it refers to as ghosts, whatever
 *    was read before.
 * 2. gets every oid from 1 to MAX_OID (ost_conn_get and ost_activate):
 *      get OID ok HASH | get OID notfound | get OID err CODE
 * 3. for every map the walk found (ost_is_map), its count and its entries
 *    through a cursor over the whole map:
 *      map OID len N | map OID lenerr CODE | map OID geterr CODE
 *      ent MAP ok KEYHASH VALHASH | ent MAP err CODE
 *    ending with "entend MAP" (OST_ENOTFOUND) or "entstop MAP CODE" (two
 *    errors in a row: a cursor that meets damaged pages reports the same
 *    error at each step).
 *
 * Every error line is followed by "msg TEXT" (the connection's message),
 * for the driver's report. Exit status 0 when the store opened ("open
 * err CODE" and exit 0 too when it did not: a refusal is an answer); 2 for
 * bad usage. A signal ends it with no "done" line, which the driver counts
 * as a crash. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ostore.h>

static uint64_t fnv(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3ULL;
    return h;
}

static uint64_t repr_hash(ost_value v) {
    ost_buf b = {0};
    uint64_t h = ost_repr(v, &b) == 0 ? fnv(b.data, b.len) : 0;
    ost_buf_free(&b);
    return h;
}

static void say_err(ost_conn *c, const char *what, uint64_t oid, int rc) {
    printf("%s %" PRIu64 " err %s\nmsg %s\n", what, oid, ost_err_name(rc), ost_conn_errmsg(c));
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: lib_reader STORE_DIR MAX_OID\n");
        return 2;
    }
    uint64_t max_oid = strtoull(argv[2], NULL, 10);
    setvbuf(stdout, NULL, _IOFBF, 1 << 16);
    ost_store *st = ost_store_new();
    ost_store_options o;
    ost_store_options_init(&o);
    o.read_only = true;
    int rc = ost_store_open(st, argv[1], &o);
    if (rc) {
        printf("open err %s\nmsg %s\ndone\n", ost_err_name(rc), ost_store_errmsg(st));
        ost_store_close(st);
        return 0;
    }
    ost_conn *c;
    rc = ost_conn_open(st, &c);
    if (rc) {
        printf("conn err %s\nmsg %s\ndone\n", ost_err_name(rc), ost_store_errmsg(st));
        ost_store_close(st);
        return 0;
    }
    ost_conn_set_cache_size(c, 100);

    /* 1. the iterator */
    uint64_t *maps = NULL;
    size_t nmaps = 0, cap = 0;
    ost_iter *it;
    rc = ost_iter_open(c, 0, &it);
    if (rc) {
        printf("iterstop %s\nmsg %s\n", ost_err_name(rc), ost_conn_errmsg(c));
    } else {
        for (;;) {
            ost_record_info info;
            ost_value obj;
            rc = ost_iter_next(it, &info, &obj);
            if (rc == OST_ENOTFOUND) {
                printf("iterend\n");
                break;
            }
            if (rc) {
                printf("iterstop %s\nmsg %s\n", ost_err_name(rc), ost_conn_errmsg(c));
                break;
            }
            if (info.damaged || !obj) {
                printf("iter %" PRIu64 " damaged\n", info.oid);
                continue;
            }
            int arc = ost_activate(c, obj);
            if (arc) {
                say_err(c, "iter", info.oid, arc);
            } else {
                printf("iter %" PRIu64 " ok %016" PRIx64 "\n", info.oid, repr_hash(obj));
                if (ost_is_map(obj)) {
                    if (nmaps == cap) {
                        cap = cap ? cap * 2 : 16;
                        maps = realloc(maps, cap * sizeof *maps);
                        if (!maps) return 3;
                    }
                    maps[nmaps++] = info.oid;
                }
            }
            ost_invalidate(c, obj);
        }
        ost_iter_close(it);
    }
    ost_abort(c);

    /* 2. every oid by get */
    for (uint64_t oid = 1; oid <= max_oid; oid++) {
        ost_value obj;
        rc = ost_conn_get(c, oid, &obj);
        if (rc == OST_ENOTFOUND) {
            printf("get %" PRIu64 " notfound\n", oid);
            continue;
        }
        if (!rc) rc = ost_activate(c, obj);
        if (rc) {
            say_err(c, "get", oid, rc);
        } else {
            printf("get %" PRIu64 " ok %016" PRIx64 "\n", oid, repr_hash(obj));
            ost_invalidate(c, obj);
        }
        if (oid % 1000 == 0) ost_abort(c);
    }
    ost_abort(c);

    /* 3. the maps */
    for (size_t i = 0; i < nmaps; i++) {
        uint64_t mo = maps[i];
        ost_value m;
        rc = ost_conn_get(c, mo, &m);
        if (!rc) rc = ost_activate(c, m);
        if (rc) {
            say_err(c, "map", mo, rc);
            continue;
        }
        uint64_t n;
        rc = ost_map_len(c, m, &n);
        if (rc) printf("map %" PRIu64 " lenerr %s\nmsg %s\n", mo, ost_err_name(rc), ost_conn_errmsg(c));
        else printf("map %" PRIu64 " len %" PRIu64 "\n", mo, n);
        ost_map_cursor *cur;
        rc = ost_map_cursor_open(c, m, NULL, &cur);
        if (rc) {
            printf("entstop %" PRIu64 " %s\nmsg %s\n", mo, ost_err_name(rc), ost_conn_errmsg(c));
            continue;
        }
        int errs = 0;
        for (;;) {
            ost_value k, v;
            rc = ost_map_cursor_next(cur, &k, &v);
            if (rc == OST_ENOTFOUND) {
                printf("entend %" PRIu64 "\n", mo);
                break;
            }
            if (rc) {
                if (++errs == 2) {
                    printf("entstop %" PRIu64 " %s\nmsg %s\n", mo, ost_err_name(rc), ost_conn_errmsg(c));
                    break;
                }
                printf("ent %" PRIu64 " err %s\nmsg %s\n", mo, ost_err_name(rc), ost_conn_errmsg(c));
                continue;
            }
            errs = 0;
            printf("ent %" PRIu64 " ok %016" PRIx64 " %016" PRIx64 "\n", mo, repr_hash(k),
                   v ? repr_hash(v) : 0);
        }
        ost_map_cursor_close(cur);
        ost_abort(c);
    }
    free(maps);
    ost_conn_close(c);
    ost_store_close(st);
    printf("done\n");
    return 0;
}
