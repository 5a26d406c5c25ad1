/* Shared parts of the history test (tests/history/history.c: the model
 * part and the program; procs.c: the multi-process part). */
#ifndef OST_TESTS_HISTORY_H
#define OST_TESTS_HISTORY_H

#include <stdbool.h>
#include <stdint.h>

#include "ostore.h"

/* The history's objects and maps: NOBJ objects of class history.Obj (one
 * field, v, an int) and NMAP maps (map 0 of kind "int", map 1 of kind
 * "str"), each with NKEY possible keys, so that transactions meet often. */
#define NOBJ 4
#define NMAP 2
#define NKEY 12
#define NCONN 3

extern uint64_t h_seed;    /* the seed of the history running */
extern const char *h_mode; /* "model" or "procs", for messages */
extern const char *h_engine;
extern char h_keep[600]; /* a directory a failure leaves for a look ("" if none) */
extern unsigned h_nops; /* operations of a model history; kills of a procs run */

/* Appends a line to the history's operation log (printed on failure; on
 * stderr at once with OST_HISTORY_VERBOSE=1). */
void h_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void h_log_reset(void);
/* Prints the log, the failure, the seed and how to replay it, and exits
 * with status 1. */
_Noreturn void h_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* splitmix64 on *s; a number below n. */
uint64_t h_rand(uint64_t *s);
unsigned h_below(uint64_t *s, unsigned n);
uint64_t h_random_seed(void);
double h_now(void);
void h_rmtree(const char *path);

/* A registry with the classes history.Obj and history.Marker (borrowed
 * into *obj_cls and *marker_cls); the store at addr opened (made if need
 * be) with full durability, with group commit or without; a connection.
 * Each fails the test on error. */
ost_registry *h_registry(ost_value *obj_cls, ost_value *marker_cls);
ost_store *h_open(const char *addr, ost_registry *reg, bool group);
ost_conn *h_conn(ost_store *st);
/* The int in x, or fails naming what. */
int64_t h_int(ost_value x, const char *what);
/* Key i of map m (a new reference; -1 and NKEY are bounds beyond every
 * key), and the index of a key read back. */
ost_value h_key(int m, int i);
int h_key_index(int m, ost_value k);
const char *h_kind(int m);

int procs_main(const char *addr, uint64_t first, unsigned count, unsigned nops);

#endif
