/* ostore CLI: what the command files share.
 *
 * Exit statuses, for every command: 0 success, 1 a failed operation (one
 * line on stderr, "ostore: ..." naming the path or oid), 2 bad usage (the
 * command's usage on stderr). Read-only commands open the store read-only;
 * commands that rewrite a store (pack, upgrade, import, copy, the demo's
 * load) open it with the store's exclusive lock (open_store_excl, the
 * exclusive option of ost_store_options), so that two ostore processes
 * never pack or import the same store at once. */
#ifndef OSTORE_CLI_H
#define OSTORE_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/grow.h"
#include "../base/sort.h"
#include "ostore.h"

#define EXIT_OK 0
#define EXIT_FAIL 1
#define EXIT_USAGE 2

/* One command: its name, a one-line summary, its usage and help text. */
typedef struct {
    const char *name;
    const char *summary;
    const char *usage; /* "ostore NAME ARGS" lines */
    const char *help;  /* paragraphs after the usage */
    int (*run)(int argc, char **argv);
} cli_cmd;

extern const cli_cmd cmd_pickle, cmd_version, cmd_demo, cmd_info, cmd_ls, cmd_cat,
    cmd_refs, cmd_check, cmd_pack, cmd_upgrade, cmd_salvage, cmd_export, cmd_import, cmd_copy,
    cmd_help;

/* ---- messages and usage ---------------------------------------------------- */

/* A path as messages show it, for every message and output line that names
 * a file or directory: control characters, backslashes and bytes that are
 * not UTF-8 escaped as Python's repr would (\n, \x1b, \xff), a path of
 * more than 200 bytes shortened in the middle with "..." (ost_path_show).
 * The string lives in one of four per-thread buffers, valid until the
 * fourth call after this one on the same thread. */
const char *shown(const char *path);
/* Prints "ostore: " + the message + newline on stderr; returns EXIT_FAIL. */
int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints "ostore: " + why (if not NULL) and the command's usage on
 * stderr; returns EXIT_USAGE. */
int bad_usage(const cli_cmd *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the command's full help on stdout; returns EXIT_OK. */
int print_help(const cli_cmd *cmd);
/* True when a is "-h" or "--help". */
bool is_help(const char *a);

/* ---- argument parsing ---------------------------------------------------- */

/* Parses a decimal unsigned number (digits only, optional _ or ,
 * separators not allowed). Returns false on bad text or overflow. */
bool parse_u64(const char *s, uint64_t *out);

/* Splits argv into options and positional arguments: a generic loop. Each
 * entry of opts names an option ("--limit"), whether it takes a value,
 * and where the value (or "1" for a flag) goes. Returns EXIT_OK, or
 * EXIT_USAGE after printing the usage (unknown option, missing value, too
 * many or too few positionals). --help prints the help and returns -1. */
typedef struct {
    const char *name;
    bool takes_value;
    const char **value;
} cli_opt;
int parse_args(const cli_cmd *cmd, int argc, char **argv, const cli_opt *opts, size_t nopts,
               const char **pos, size_t min_pos, size_t max_pos, size_t *npos);

/* The default of --max-output: a value's text is cut after 64 MiB. */
#define CLI_MAX_OUTPUT ((size_t)64 << 20)
/* Fills *o for printing values (cat, pickle show, pickle dis): the
 * library's defaults, max_len CLI_MAX_OUTPUT, then the texts of
 * --int-digits N and --max-output N when given (not NULL; 0 is no limit).
 * EXIT_OK, or EXIT_USAGE after printing cmd's usage. */
int repr_options(const cli_cmd *cmd, const char *int_digits, const char *max_output,
                 ost_repr_options *o);

/* An ost_write_fn that writes to stdout: 0, or OST_EIO when fwrite fails. */
int write_stdout(void *ud, const void *data, size_t len);

/* ---- stores --------------------------------------------------------------- */

/* Opens the store at dir (a directory, or a database URI such as
 * postgresql://...) read-only (or read-write), with a message naming dir
 * on failure; a directory must exist and be one. */
int open_store(const char *dir, bool write, ost_store **out);
/* open_store read-write with the store's exclusive lock (the option
 * exclusive of ost_store_options), for the commands that rewrite a store
 * over several transactions: a second one fails with "store is locked". */
int open_store_excl(const char *dir, ost_store **out);
/* open_store runs ostore's own walk of every page of the store (liblmdb
 * trusts its file, and damage makes it crash) and refuses a damaged store
 * with one line, unless this was called before it: check, which reports
 * the damage itself, calls it. */
void open_store_no_walk(void);
/* The walk itself on an open store: EXIT_OK, or EXIT_FAIL after naming
 * the first problem. */
int raw_verify_pages(ost_store *st, const char *db);

/* ---- raw records (through a snapshot of include/ostore/raw.h) ---------- */

typedef struct raw_txn raw_txn;
/* A read transaction on an open store, with the class table loaded. */
int raw_begin(ost_store *st, raw_txn **out);
void raw_end(raw_txn *t);
/* The class name of an id ("module.name"; a class version's is its
 * class's), or "?<id>" when unknown. The string lives as long as t. */
const char *raw_class_name(raw_txn *t, uint32_t cid);
/* The class id of "module.name" (its own entry or one of its versions,
 * "module.name(f1,f2)": format 4), or false when the store has no such
 * class. */
bool raw_class_id(raw_txn *t, const char *qualname, uint32_t *cid);
/* For the id of a class version (format 4), its field list as the class
 * table names it, "f1,f2)" (up to and with the closing parenthesis; lives
 * as long as t); NULL for a class's own id or an unknown one. */
const char *raw_class_fields(raw_txn *t, uint32_t cid);
/* Number of class ids in the table, and the id at index i (ascending). */
size_t raw_class_count(raw_txn *t);
uint32_t raw_class_at(raw_txn *t, size_t i, const char **module, const char **name);
/* The index of class id cid in that order, or -1. */
ptrdiff_t raw_class_index(raw_txn *t, uint32_t cid);

typedef struct {
    uint64_t oid;
    uint64_t serial;
    uint32_t cid;
    bool bad_header; /* key malformed or record damaged: serial and cid are 0 */
    const char *damage; /* what is wrong then (static text) */
    const uint8_t *pickle; /* valid until the next raw call */
    size_t len;            /* pickle length */
    size_t size;           /* whole record: header + pickle */
} raw_rec;

/* Iterates the records in oid order: 1 with *r filled, 0 at the end, or
 * a negative code (message already printed). */
typedef struct raw_iter raw_iter;
int raw_iter_open(raw_txn *t, raw_iter **it);
int raw_iter_next(raw_iter *it, raw_rec *r);
void raw_iter_close(raw_iter *it);
/* One record by oid: 0, OST_ENOTFOUND, or another code. */
int raw_get(raw_txn *t, uint64_t oid, raw_rec *r);
/* Calls fn for each oid the record's pickle references (persistent ids),
 * without building values. 0, or a code when the pickle is malformed. */
int raw_scan_refs(const raw_rec *r, void (*fn)(void *ud, uint64_t oid), void *ud);
/* The same for any pickle (a map entry's value). */
int raw_scan_pickle_refs(const uint8_t *p, size_t n, void (*fn)(void *ud, uint64_t oid), void *ud);

/* A reader whose persistent_load keeps references as persistent(OID)
 * values (ost_persref), owned by t; NULL on ENOMEM. */
ost_reader *raw_reader(raw_txn *t);
/* A reader's persistent_load for showing a store's records: a reference
 * prints as persistent(oid), whether its pid is the oid (formats 1 to 3)
 * or (oid, class id) (format 4: the class id is not shown; the record of
 * the oid names its class). A new reference in *obj; 0 or OST_ENOMEM. */
int raw_keep_pid(void *ud, ost_value pid, ost_value *obj);
/* The store and the snapshot under t (for tools/raw_maps.c). */
ost_store *raw_store(raw_txn *t);
ost_snap *raw_snap(raw_txn *t);

/* ---- maps (tools/raw.c and tools/raw_maps.c) ------------------------------ */

/* 1 when r is the record of a map (class ostore.maps.OrderedMap), 2 of a
 * set (ostore.maps.OrderedSet), 0 otherwise. */
int raw_map_class(raw_txn *t, const raw_rec *r);

/* What a map's record says: {'kind': KIND, 'count': N}. */
typedef struct {
    bool is_set;
    char kind[64];  /* canonical: "int", "(int, str)" */
    uint64_t count; /* the number of entries the record counts */
} raw_map;
/* Reads the record of a map or set: 0 with *m filled, or OST_ECORRUPT with
 * the reason in err when it holds no valid kind and count (OST_ENOMEM). */
int raw_map_read(raw_txn *t, const raw_rec *r, raw_map *m, char *err, size_t cap);
/* The same for a record's pickle p[0..n) read with rd; m->is_set is kept. */
int raw_map_parse(ost_reader *rd, const uint8_t *p, size_t n, raw_map *m, char *err, size_t cap);

/* One entry of a map, valid until the cursor moves. */
typedef struct {
    const uint8_t *key; /* the encoded key (docs/format.md) */
    size_t klen;
    uint64_t serial;
    const uint8_t *val; /* the value pickle; empty for a set */
    size_t vlen;
} raw_ent;
typedef struct raw_ents raw_ents;
/* A cursor over the entries of map oid in key order, starting at the
 * first key >= from (NULL: at the map's first entry). EXIT_OK or
 * EXIT_FAIL (message printed). */
int raw_ents_open(raw_txn *t, uint64_t map, const uint8_t *from, size_t fromlen, raw_ents **out);
/* 1 with *e filled, 0 past the map's last entry, or -1 (message printed,
 * naming the map). */
/* Makes raw_ents_next step past damaged entries silently (check lists
 * them) instead of failing. */
void raw_ents_skip_damaged(raw_ents *c);
/* How many damaged entries raw_ents_next stepped past. */
uint64_t raw_ents_skipped(const raw_ents *c);
int raw_ents_next(raw_ents *c, raw_ent *e);
void raw_ents_close(raw_ents *c);
/* Calls fn(ud, map) for each oid that has entries, in ascending order,
 * until fn returns nonzero (then returns that). EXIT_FAIL after printing
 * a message when the entries cannot be read. */
int raw_each_map(raw_txn *t, int (*fn)(void *ud, uint64_t map), void *ud);

/* Keys. raw_key_decode gives the key of encoded bytes as a new value, or 0
 * when they are not a key of that kind. raw_key_parse reads the text of a
 * key (the syntax of 'ostore cat --help'): 0 with *out a new value and
 * enc[0..*enclen) its encoding (enc holds OST_MAP_KEY_MAX bytes), or -1
 * with the reason in err. With prefix, a tuple kind takes fewer elements
 * (a bound). */
ost_value raw_key_decode(const char *kind, const uint8_t *k, size_t n);
int raw_key_parse(const char *kind, const char *text, bool prefix, ost_value *out, uint8_t *enc,
                  size_t *enclen, char *err, size_t cap);
/* Compares encoded keys as the store orders them (bytewise, shorter first). */
int raw_key_cmp(const uint8_t *a, size_t al, const uint8_t *b, size_t bl);
/* The repr of a value pickle into out (emptied first), references as
 * persistent(OID), printed with o: 0, or a code with the reader's message
 * in err. */
int raw_value_repr(raw_txn *t, const uint8_t *p, size_t n, const ost_repr_options *o,
                   ost_buf *out, char *err, size_t cap);

/* ---- output helpers ------------------------------------------------------ */

/* Formats n with thousands separators into buf (returns buf). */
const char *fmt_count(char *buf, size_t cap, uint64_t n);
/* Formats a byte size as "123 B", "4.5 KiB", "12.3 MiB", "1.20 GiB". */
const char *fmt_bytes(char *buf, size_t cap, double bytes);
/* Seconds since an arbitrary start, monotonic. */
double now_s(void);
/* Size of a file in bytes, or 0 when it cannot be read. */
uint64_t file_size(const char *dir, const char *name);

/* A progress bar on a terminal (nothing otherwise). */
typedef struct {
    bool on;
    const char *label;
    uint64_t total;
    double start, last;
} progress;
void progress_start(progress *p, bool on, const char *label, uint64_t total);
void progress_update(progress *p, uint64_t done, const char *unit);
/* Shows a line of text in the bar's place (for steps with no count). */
void progress_note(progress *p, const char *text);
void progress_end(progress *p);

/* Installs handlers that turn SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT
 * (liblmdb's assertions abort) while reading a store into
 * "ostore: DIR: ... (the store may be damaged)" and exit 1 (not under
 * AddressSanitizer, which reports such crashes itself). */
void guard_crashes(const char *dir);

#endif
