/* Everything the in-memory engine asks of the rest of the store, in one
 * place: the host table (ost__host, store/engine.h) its open was handed,
 * called only from host.c. Each function below is one service the store
 * lends an engine (the store's thread message, conflicts and their
 * resolvers, applying map entries, a new store's root, the format), as
 * SQLite hands sqlite3_vfs to a file. Besides these the engine uses only
 * engine.h's types and inline helpers, store/maprec.h (the count in a
 * map's record, below the engines) and the public headers. */
#ifndef OST_STORE_MEM_HOST_H
#define OST_STORE_MEM_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine.h"

/* Sets the calling thread's message of e's store to text; returns code. */
int mem_host_fail(ost__engine *e, int code, const char *text);
/* p's conflict of kind why (OST__CONFL_REMOVED, OST__CONFL_REF_GONE) on
 * oid, in the store's words: OST_ECONFLICT, p's message and conflict oid
 * set. */
int mem_host_conflict(ost__engine *e, ost__pkg *p, int why, uint64_t oid);
/* Record i of p was read at another serial than commit cur left it
 * (class id cid, state pickle[0, n)): runs its class's resolver. 0 when
 * merged (record i then holds the merged state), else OST_ECONFLICT or
 * another code with p's message set. */
int mem_host_resolve(ost__engine *e, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                     const void *pickle, size_t n);
/* Applies p's map entries under serial, calling back ops' ent_* and
 * map_count_add on s. 0 or a code with p's message set. */
int mem_host_apply_maps(ost__engine *e, const ost__engine_ops *ops, ost__sess *s, ost__pkg *p,
                        uint64_t serial);
/* The state pickle of a new store's root, of class (persistent.mapping,
 * PersistentMapping), in a new malloc'd buffer *out of *len bytes (the
 * caller frees it). 0 or OST_ENOMEM. */
int mem_host_root(ost__engine *e, uint8_t **out, size_t *len);
/* Tells the store its format. */
void mem_host_format(ost__engine *e, uint64_t format);

#endif
