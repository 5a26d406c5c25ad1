/* Everything the in-memory engine asks of the rest of the store, in one
 * place: host.c is the only file of store/mem/ that includes
 * store_internal.h or touches a field of struct ost_store or struct
 * ost__pkg. Each function below is one service the store lends an
 * engine (the store's thread message, a package's contents and outcome,
 * conflicts and their resolvers, applying map entries, a map's count, a
 * new store's root, the format), as SQLite hands sqlite3_vfs to a file.
 * When store/engine.h gets its table of host callbacks (ost__host), this
 * file becomes calls through it and nothing else in store/mem/ changes. */
#ifndef OST_STORE_MEM_HOST_H
#define OST_STORE_MEM_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../engine.h"

/* Sets the calling thread's message of st to text and returns code. */
int mem_host_fail(ost_store *st, int code, const char *text);

/* A record of a package, as mem_host_rec gives it: data[0, len) is its
 * state pickle, valid until the package changes (a resolver's merge). */
typedef struct {
    uint64_t oid, read_serial; /* read_serial 0: a new object */
    uint32_t cid;
    const uint8_t *data;
    size_t len;
} mem_hrec;

/* A package's contents: its records, the references to check after a
 * pack (when low differs from the store's), whether it has map entries. */
size_t mem_host_nrecs(const ost__pkg *p);
void mem_host_rec(const ost__pkg *p, size_t i, mem_hrec *r);
size_t mem_host_nrefs(const ost__pkg *p);
uint64_t mem_host_ref(const ost__pkg *p, size_t i);
uint64_t mem_host_low(const ost__pkg *p);
size_t mem_host_nments(const ost__pkg *p);
/* Resets p's outcome before it is applied (rc 0, no message). */
void mem_host_begin(ost__pkg *p);
/* Sets p's outcome: rc (0 or an OST_E* code) and serial (0 on failure).
 * A failure whose message the package lacks gets "shown: commit failed:
 * <the code's text>". */
void mem_host_outcome(ost__pkg *p, const char *shown, int rc, uint64_t serial);
/* Sets p's message to text (truncated to fit). */
void mem_host_msg(ost__pkg *p, const char *text);

/* The conflicts of a package, worded as docs/tutorial.md says, the same
 * for every engine (ost__pkg_conflict): why is MEM_CONFL_*; returns
 * OST_ECONFLICT with p's message and conflict oid set. */
#define MEM_CONFL_REMOVED 1 /* pack removed a record the package rewrites */
#define MEM_CONFL_REF_GONE 2 /* pack removed an object the package refers to */
int mem_host_conflict(ost__pkg *p, int why, uint64_t oid);
/* Record i of p was read at another serial than commit cur left it
 * (class id cid, state pickle[0, n)): runs its class's resolver
 * (ost__pkg_resolve). 0 when merged (record i then holds the merged
 * state), else OST_ECONFLICT or another code with p's message set. */
int mem_host_resolve(ost_store *st, ost__pkg *p, size_t i, uint64_t cur, uint32_t cid,
                     const void *pickle, size_t n);
/* Applies p's map entries under serial, calling back ops' ent_* and
 * map_count_add on s (ost__maps_apply). 0 or a code with p's message set. */
int mem_host_apply_maps(const ost__engine_ops *ops, ost__sess *s, ost__pkg *p, uint64_t serial);
/* Adds delta to the count in the map's (counter's) record pickle p[0, n)
 * in place (ost__record_count_add): 0, OST_ECORRUPT or OST_ELIMIT. */
int mem_host_count_add(uint8_t *p, size_t n, int64_t delta, bool counter);

/* The root of a new store: its class (module and name, static) and its
 * state pickle in a new malloc'd buffer *out of *len bytes (the caller
 * frees it). 0 or OST_ENOMEM. */
int mem_host_root(ost_store *st, const char **module, const char **name, uint8_t **out,
                  size_t *len);
/* Tells the store its format and the address its messages show. */
void mem_host_opened(ost_store *st, uint64_t format, const char *shown);
/* Whether the store has connections open (an import refuses then). */
bool mem_host_conns_open(ost_store *st);

#endif
