/* ostore maps: persistent ordered maps and sets of any size.
 *
 * A map is a persistent object of a connection (an instance of the class
 * ostore.maps.OrderedMap, or ostore.maps.OrderedSet for a set) that other
 * persistent objects and the root refer to like any other. Its entries are
 * not inside its record: each entry is its own key in the engine's ordered
 * index (map oid + an order-preserving encoding of the key,
 * docs/format.md), so a lookup is one B-tree descent, a commit writes only
 * the entries that changed, and two transactions that write different keys
 * never conflict. The map's own record holds its key kind and its count.
 *
 * Keys: one kind per map, declared when it is made, as a string:
 *   "int"    64-bit signed integers (bool counts as int, as in Python)
 *   "str"    text, ordered by code point
 *   "bytes"  byte strings, ordered bytewise
 *   "(int, str)", "(str, bytes, int)", ...  tuples of those, in that
 *            order, compared lexicographically (composite keys), of at
 *            most OST_MAP_KIND_MAX elements.
 * The order is Python's order for those types. An encoded key may not pass
 * OST_MAP_KEY_MAX bytes (LMDB's key limit less the map oid).
 *
 * Values: anything the writer pickles, persistent objects included (stored
 * as references). Values are stored by value: a list read from a map and
 * then changed is not stored again until it is set again. A set's entries
 * have no value (its cursor and ost_map_get give None).
 *
 * Transactions: reads see the connection's snapshot plus its own
 * uncommitted changes. Getting the same key twice in one transaction gives
 * the same object. Conflicts are per key: a commit fails with
 * OST_ECONFLICT (naming the map's oid and the key) when another commit
 * wrote (set or deleted) a key that this transaction wrote since this
 * transaction first looked at it; the count is applied as a delta and never
 * conflicts. Abort drops the changes. Other connections see committed
 * changes at their next transaction.
 *
 * Snapshots: LMDB can grow its map only while no snapshot of the process is
 * open, so a commit that grows the map renews the snapshots of the other
 * connections; a transaction's reads see the newer commits from then on,
 * and a key it writes that such a commit wrote conflicts at commit.
 *
 * Busy: while a bulk loader is open on a connection, map calls on it fail
 * with OST_EBUSY (the loader ends its snapshot), and so do map changes
 * while an asynchronous commit is pending.
 *
 * Threads: a map belongs to the connection it was made or loaded in, and is
 * used on that connection's thread, as every persistent object is.
 * Errors: every call returns 0 or a negative OST_E* code, with the detail
 * in ost_conn_errmsg(c). A handle that opened a format-1 store read-only
 * (no map entries then) answers OST_EVERSION for maps another process
 * stored since: open the store again. */
#ifndef OSTORE_MAPS_H
#define OSTORE_MAPS_H

#include "store.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Longest encoded key: LMDB's 511-byte key limit less the 8-byte map oid. */
#define OST_MAP_KEY_MAX 503
/* Most elements of a tuple key kind: "(int, int, ..., int)" of 8. */
#define OST_MAP_KIND_MAX 8

/* Makes a new, empty map whose keys are of kind (see above) in connection
 * c's transaction, and gives it an oid at once (as ZODB's Connection.add);
 * it is stored by the next commit, and pack removes it later unless a
 * stored object refers to it. *out is a borrowed reference held by the
 * connection's cache. 0, OST_EINVAL (bad kind: the message names it, and
 * the limit when a tuple has more than OST_MAP_KIND_MAX elements),
 * OST_EREADONLY, OST_ENOMEM. */
OST_EXTERN int ost_map_new(ost_conn *c, const char *kind, ost_value *out);
/* The same for a set: a map whose entries have keys only (indexes are
 * built from sets). */
OST_EXTERN int ost_keyset_new(ost_conn *c, const char *kind, ost_value *out);

/* True when v is a map or a set (ghost or not), of any connection. */
OST_EXTERN bool ost_is_map(ost_value v);
/* The canonical key kind of map m ("int", "(int, str)"; owned by the
 * connection, valid while it is open) and whether m is a set. 0,
 * OST_EINVAL (not a map of c), or what loading the map failed with. */
OST_EXTERN int ost_map_kind(ost_conn *c, ost_value m, const char **kind,
                            bool *is_set);

/* Number of entries, in O(1): the count committed in the snapshot plus
 * this transaction's changes. 0 or a code. */
OST_EXTERN int ost_map_len(ost_conn *c, ost_value m, uint64_t *n);
/* m[key]: *val gets a borrowed reference, valid until the transaction
 * ends or the key is set or deleted in it (None for a set). key is
 * borrowed. 0, OST_ENOTFOUND (no such key: *val is 0), OST_ETYPE (key of
 * the wrong kind), OST_ELIMIT (an int key beyond 64 bits), OST_EINVAL (no
 * key, a key too long, or m not a map of c), OST_ECORRUPT (the entry does
 * not decode, or, written before format 4, refers to an object that is
 * gone: a format-4 reference names its object's class, so the object is
 * a ghost and its load fails then). */
OST_EXTERN int ost_map_get(ost_conn *c, ost_value m, ost_value key,
                           ost_value *val);
/* 1 when key is in m, 0 when not, or a negative code as ost_map_get. */
OST_EXTERN int ost_map_contains(ost_conn *c, ost_value m, ost_value key);
/* m[key] = val; steals key and val, also when it fails. For a set, val
 * must be 0 or None (ost_map_add says it better). 0, OST_ETYPE, OST_ELIMIT,
 * OST_EINVAL, OST_ENOMEM, OST_EREADONLY. The value is pickled at commit. */
OST_EXTERN int ost_map_set(ost_conn *c, ost_value m, ost_value key,
                           ost_value val);
/* Adds key to set (or map: value None); steals key. As ost_map_set. */
OST_EXTERN int ost_map_add(ost_conn *c, ost_value m, ost_value key);
/* Removes key (borrowed). 0, OST_ENOTFOUND, or as ost_map_set. */
OST_EXTERN int ost_map_del(ost_conn *c, ost_value m, ost_value key);
/* An index kept from the objects themselves: m[key] = obj, where key is
 * made of obj's fields named in `fields`, comma-separated in the key's
 * order: "number" for a map of kind "int", "project,number" for one of
 * kind "(str, int)" (blanks around a name are ignored). obj is borrowed
 * (the map takes its own reference; a ghost loads first). 0; OST_ENOTFOUND
 * (a field is unset), OST_EINVAL (not as many names as the key has
 * elements, an empty name, no such field, m a set or no map of c), or
 * ost_map_set's codes, with ost_errmsg(c) naming the field or the key. */
OST_EXTERN int ost_map_set_by(ost_conn *c, ost_value m, const char *fields, ost_value obj);
/* Removes obj from an index kept by ost_map_set_by: the key made of its
 * fields (as ost_map_set_by makes it), when that key maps to obj itself.
 * 0; OST_ENOTFOUND when the key is absent or maps to another object (its
 * fields changed since it was indexed, or another object holds the key:
 * nothing is removed, and the message says which); or ost_map_set_by's
 * codes. Remove an object from its indexes before changing the fields of
 * their keys, and index it again after. */
OST_EXTERN int ost_map_del_by(ost_conn *c, ost_value m, const char *fields, ost_value obj);
/* The smallest and the largest key: *key gets a new reference. 0,
 * OST_ENOTFOUND (the map is empty), or a code. */
OST_EXTERN int ost_map_first(ost_conn *c, ost_value m, ost_value *key);
OST_EXTERN int ost_map_last(ost_conn *c, ost_value m, ost_value *key);

/* ---- cursors ---------------------------------------------------------------- */

/* A range: each bound is a key of the map's kind, or 0 for no bound; both
 * bounds are included unless marked exclusive (the CLI's --from and --to
 * include theirs too; its --before excludes). For a tuple kind a bound may
 * be a shorter tuple, ordered as in Python: (5,) sorts before every
 * (5, x), so to=(5,) inclusive ends before (5, 0): use prefix for "every
 * key that starts with".
 *
 * prefix, instead of from and to, selects every key that starts with it:
 * for a str or bytes kind, the keys that start with that text or those
 * bytes ("proj-07" gives "proj-07" and "proj-070", "" gives all); for a
 * tuple kind, a tuple of 1 to n elements, the keys whose first elements
 * equal those (("proj-07",) gives ("proj-07", 1) and ("proj-07", 2), not
 * ("proj-070", 1)); for int, that one key. A range with a prefix and a
 * bound is OST_EINVAL. All values are borrowed. */
typedef struct {
    ost_value from, to;                /* the bounds (0: none) */
    bool from_exclusive, to_exclusive; /* leave the bound itself out */
    bool reverse; /* from the top down: starts at `to` */
    ost_value prefix; /* or 0: see above */
} ost_map_range;

/* A cursor over a map's entries (ost_map_cursor_open): an opaque handle. */
typedef struct ost_map_cursor ost_map_cursor;

/* Opens a cursor over the entries of m within range r (NULL: all) in key
 * order, or reversed. Its memory does not grow with the map. It sees the
 * map as it is at each step: entries this transaction sets beyond the
 * cursor's position are visited when reached, entries it deletes are not,
 * and each key is visited once, in order. It is valid until the
 * transaction ends (then steps return OST_ETXN). 0, OST_ETYPE (a bound of
 * the wrong kind), OST_EINVAL, OST_ENOMEM. */
OST_EXTERN int ost_map_cursor_open(ost_conn *c, ost_value m,
                                   const ost_map_range *r,
                                   ost_map_cursor **out);
/* Steps to the next entry: *key and *val (either may be NULL) get
 * borrowed references, valid until the next step or the close (a value
 * also got by ost_map_get is that same object). 0, OST_ENOTFOUND past the
 * last entry, OST_ETXN after the transaction ended, OST_ECORRUPT: a
 * damaged entry (the next step goes on after it), damaged pages (every
 * later step says so again), or a walk of the whole map, in one snapshot
 * and with no change of the transaction to the map, that met another
 * number of entries than the map's count (docs/recovery.md). A step
 * that asks for no value (val NULL) reads and decodes none (on PostgreSQL
 * a walk of keys only fetches its pages without values), so a value that
 * does not decode is OST_ECORRUPT only to a step that asks for it. Steps
 * that ask for values read the records of the persistent objects a page
 * of entries refers to in one round trip, not one each (docs/maps.md). */
OST_EXTERN int ost_map_cursor_next(ost_map_cursor *cur, ost_value *key,
                                   ost_value *val);
/* Steps as ost_map_cursor_next, giving the entry's key (*key, borrowed as
 * there; key may be NULL) and, in *oid, the oid of the persistent object
 * its value refers to, without making that object's ghost or reading its
 * record: UINT64_MAX when the value is not a stored persistent object (an
 * int, a list, None in a set, or an object this transaction set that gets
 * its oid at commit), as ost_oid says. A value that is not a lone
 * reference is decoded to tell. 0, OST_EINVAL (cur or oid NULL: *key is
 * then 0), or the codes of ost_map_cursor_next. */
OST_EXTERN int ost_map_cursor_next_oid(ost_map_cursor *cur, ost_value *key, uint64_t *oid);
/* Frees the cursor. NULL is allowed. */
OST_EXTERN void ost_map_cursor_close(ost_map_cursor *cur);

/* What ost_map_each calls for each entry: key and val are borrowed for the
 * call (val None for a set); 0 goes on, anything else stops the walk. */
typedef int (*ost_map_each_fn)(void *ud, ost_value key, ost_value val);
/* A range query in one call: calls fn(ud, key, val) for each entry of m
 * within range r (NULL: all), in the order a cursor over r gives them
 * (open, step, close: ost_map_cursor_next's rules). Returns 0 when every
 * entry was visited, what fn returned when it stopped the walk (nonzero),
 * or the cursor's code (OST_ETYPE for a bound of the wrong kind,
 * OST_ECORRUPT, ...; ost_conn_errmsg says why). */
OST_EXTERN int ost_map_each(ost_conn *c, ost_value m, const ost_map_range *r,
                            ost_map_each_fn fn, void *ud);

/* ---- counters ------------------------------------------------------------------ */

/* A counter (class ostore.maps.Counter, ZODB's BTrees.Length as the model)
 * is a persistent object holding a signed 64-bit value whose changes are
 * additions: a commit adds its transaction's sum to the value committed
 * then, whatever other commits added since this transaction began, so two
 * transactions that add to one counter never conflict and no addition is
 * lost. Use one for the statistics that every transaction updates (a count
 * of items, a total), where a field would make every two writers conflict.
 * Its record is {'kind': 'counter', 'count': value} (docs/format.md).
 * Threads and busy rules as for maps. */

/* Makes a new counter of value initial in c's transaction and gives it an
 * oid at once; it is stored by the next commit (refer to it from a stored
 * object, as to a map). *out is a borrowed reference held by the
 * connection's cache. 0, OST_EINVAL, OST_EREADONLY, OST_EBUSY,
 * OST_ENOMEM. */
OST_EXTERN int ost_counter_new(ost_conn *c, int64_t initial, ost_value *out);
/* Adds delta (negative to subtract) to counter v (borrowed) in c's
 * transaction; the commit adds the transaction's sum to the committed
 * value (a commit that would take it past the 64-bit range fails with
 * OST_ELIMIT and writes nothing). 0, OST_EINVAL (v not a counter of c),
 * OST_ELIMIT (the transaction's adds pass the 64-bit range), OST_EREADONLY,
 * OST_EBUSY. */
OST_EXTERN int ost_counter_add(ost_conn *c, ost_value v, int64_t delta);
/* The counter's value as this transaction sees it: the value committed in
 * its snapshot plus its own adds. 0, OST_EINVAL, OST_ENOTFOUND (its record
 * is gone: removed by pack), OST_ECORRUPT (its record is not a counter's),
 * OST_ELIMIT, or an engine's code. */
OST_EXTERN int ost_counter_get(ost_conn *c, ost_value v, int64_t *value);
/* True when v is a counter (ghost or not), of any connection. */
OST_EXTERN bool ost_is_counter(ost_value v);

/* ---- keys as stored ------------------------------------------------------------ */

/* The canonical form of key kind `kind` ("int", "(int, str)": the form
 * ost_map_kind gives) into out[0, cap): 0, or OST_EINVAL when kind is not
 * a kind (cap of 64 holds every canonical kind). */
OST_EXTERN int ost_map_kind_canon(const char *kind, char *out, size_t cap);
/* Encodes key (borrowed) for a map of kind `kind` into out (room for
 * OST_MAP_KEY_MAX bytes), in the order-preserving form the store keeps
 * (docs/format.md); with prefix, a tuple kind also takes a shorter tuple
 * (a bound for a range). 0 with *n set, or OST_EINVAL / OST_ETYPE /
 * OST_ELIMIT with the reason in err[0, cap). */
OST_EXTERN int ost_map_key_encode(const char *kind, ost_value key, bool prefix, uint8_t *out,
                                  size_t *n, char *err, size_t cap);
/* The key that encoded bytes p[0, n) hold for kind `kind`: a new
 * reference, or 0 when they are not a key of that kind (or on ENOMEM). */
OST_EXTERN ost_value ost_map_key_decode(const char *kind, const uint8_t *p, size_t n);
/* The end of a prefix range over encoded keys: writes to out (room for n
 * bytes) the first encoding after every key whose encoding starts with
 * p[0, n) (p with its trailing 0xff bytes dropped and its last byte
 * raised), and returns its length, to be used as an exclusive bound; 0
 * when no encoding follows them (n is 0 or p is all 0xff: no upper bound).
 * p and out may be the same. The prefix of a key is encoded by
 * ost_map_key_encode with prefix true (ost_map_range's prefix says which
 * keys start with it). */
OST_EXTERN size_t ost_map_prefix_end(const uint8_t *p, size_t n, uint8_t *out);

/* ---- bulk loading ------------------------------------------------------------ */

/* Adds m[key] = val to the loader's current batch; steals key and val.
 * m must be a map (or set: val 0) of the loader's connection that is
 * stored already (commit it before opening the loader: a loader opens only
 * on a transaction that used no map, else OST_EBUSY). The value is
 * pickled now (new persistent objects it reaches are stored in the same
 * batch); within a batch entries are written in key order, so random keys
 * touch each leaf page once per batch. An existing key is overwritten.
 * Errors and batching as ost_loader_add; a batch counts entries as
 * objects. */
OST_EXTERN int ost_loader_map_set(ost_loader *l, ost_value m, ost_value key,
                                  ost_value val);

#ifdef __cplusplus
}
#endif

#endif
