/* ostore pickles: a writer (protocols 2 to 5) and a reader (protocols 0 to 5)
 * of real Python pickles, for the values of value.h.
 *
 * A writer or reader is a reusable handle: it keeps its buffers, memo and
 * stacks between calls, so dumping or loading many small records allocates
 * almost nothing. A handle belongs to one thread at a time. */
#ifndef OSTORE_PICKLE_H
#define OSTORE_PICKLE_H

#include "value.h"

#ifdef __cplusplus
extern "C" {
#endif

#define OST_PICKLE_DEFAULT_PROTOCOL 4
#define OST_PICKLE_HIGHEST_PROTOCOL 5

/* ---- writer ------------------------------------------------------------- */

/* A pickle writer (ost_writer_new): an opaque, reusable handle. */
typedef struct ost_writer ost_writer;

/* Receives pickle bytes in sink mode. Return 0, or a negative code that
 * stops the dump and is returned by ost_dump. */
typedef int (*ost_write_fn)(void *ud, const void *data, size_t len);

/* Decides whether an object is stored by reference. Return 0 with *pid
 * left 0 for "pickle it inline", 0 with *pid set to a new reference for
 * "persistent, with this pid" (written as BINPERSID, PERSID for protocol
 * 0), or a negative code to stop the dump with that code. */
typedef int (*ost_persistent_id_fn)(void *ud, ost_value obj, ost_value *pid);

/* Which objects a persistent_id hook is asked about
 * (ost_writer_set_persistent_id). */
typedef enum {
    /* the hook sees each distinct instance once (the default) */
    OST_PID_INSTANCES = 0,
    /* the hook sees every heap object before the memo, as Python's does */
    OST_PID_ALL = 1
} ost_pid_scope;

/* What ost_writer_stats tells of the last dump. */
typedef struct {
    uint64_t objects;    /* heap objects written inline */
    uint64_t memo_hits;  /* references written as memo GETs */
    uint64_t hook_calls; /* persistent_id calls */
    uint64_t bytes;      /* bytes of the last pickle */
    uint64_t renamed;    /* protocol 2 globals spelled, as Python 3 does,
                          * with a Python 2 name that reads back as another
                          * name of the same Python object */
} ost_dump_stats;

/* New writer: protocol 4, framing on, buffer mode. NULL on ENOMEM. */
OST_EXTERN ost_writer *ost_writer_new(void);
/* Frees the writer and its buffer. NULL is allowed. */
OST_EXTERN void ost_writer_free(ost_writer *w);
/* Sets the protocol (2 to 5). 0 or OST_EPROTOCOL. */
OST_EXTERN int ost_writer_set_protocol(ost_writer *w, int protocol);
/* Turns FRAME opcodes (protocols 4 and 5) on or off. */
OST_EXTERN void ost_writer_set_framing(ost_writer *w, bool on);
/* Sends output to fn in pieces (NULL returns to buffer mode). */
OST_EXTERN void ost_writer_set_sink(ost_writer *w, ost_write_fn fn, void *ud);
/* Installs a persistent_id hook with its scope (fn NULL removes it). */
OST_EXTERN void ost_writer_set_persistent_id(ost_writer *w,
                                             ost_persistent_id_fn fn,
                                             void *ud, ost_pid_scope scope);

/* Pickles v. In buffer mode *data and *len (if not NULL) receive the
 * pickle, owned by the writer and valid until its next dump or free; in
 * sink mode they receive NULL and the total length. Never recurses on the
 * C stack. Returns 0 or a negative code (OST_ENOMEM, OST_EINVAL for
 * OST_NOVALUE, a sink or hook error); the message is in
 * ost_writer_errmsg. */
OST_EXTERN int ost_dump(ost_writer *w, ost_value v, const void **data,
                        size_t *len);
/* Pickles only the state of instance inst: what BUILD gives it (its
 * attribute dict, its slots as a dict, or its class's getstate result).
 * This is a store record's body. Same ownership and errors as ost_dump;
 * OST_EINVAL for an instance with items (ost_instance_items). */
OST_EXTERN int ost_dump_state(ost_writer *w, ost_value inst, const void **data,
                              size_t *len);
/* Statistics of the last dump. */
OST_EXTERN void ost_writer_stats(const ost_writer *w, ost_dump_stats *st);
/* Message of the last failure ("" if none); owned by the writer. */
OST_EXTERN const char *ost_writer_errmsg(const ost_writer *w);

/* ---- reader ------------------------------------------------------------- */

/* A pickle reader (ost_reader_new): an opaque, reusable handle. */
typedef struct ost_reader ost_reader;

/* Resolves a global named in a pickle (module and name are NUL-terminated
 * UTF-8). Return 0 leaving *cls 0 to accept it as a generic global, 0 with
 * *cls set to a new reference of the global to use, or a negative code
 * (such as OST_EUNKNOWNCLASS) to fail the load. Never called for the
 * builtins the reader knows (set, frozenset, bytearray, bytes,
 * _codecs.encode, copyreg._reconstructor). */
typedef int (*ost_find_global_fn)(void *ud, const char *module,
                                  const char *name, ost_value *cls);
/* Turns a persistent id into an object: return 0 with *obj set to a new
 * reference, or a negative code to fail the load. */
typedef int (*ost_persistent_load_fn)(void *ud, ost_value pid,
                                      ost_value *obj);

/* A reader's limits on one load (ost_reader_get_limits,
 * ost_reader_set_limits): a pickle that passes one fails with OST_ELIMIT. */
typedef struct {
    size_t max_depth;     /* nesting: containers inside containers as the
                           * pickle builds them, and open MARKs (each
                           * counts one level); docs/pickle.md#limits */
    size_t max_memo;      /* memo entries */
    size_t max_container; /* items of one container, and stack length */
    size_t max_bytes;     /* bytes allocated for values in one load */
} ost_limits;

/* New reader with default limits (depth 10000000, memo 2^26 entries,
 * container 2^31 items, 4 GiB) and Python 2 str read as ASCII. NULL on
 * ENOMEM. */
OST_EXTERN ost_reader *ost_reader_new(void);
/* Frees the reader. NULL is allowed. */
OST_EXTERN void ost_reader_free(ost_reader *r);
/* Copies the reader's limits into *l. */
OST_EXTERN void ost_reader_get_limits(const ost_reader *r, ost_limits *l);
/* Sets the limits; a zero field keeps its current value. */
OST_EXTERN void ost_reader_set_limits(ost_reader *r, const ost_limits *l);
/* What a Python 2 str (STRING, BINSTRING, SHORT_BINSTRING) becomes: the
 * choices of Python's Unpickler(encoding=...), with errors='strict'. */
typedef enum {
    /* a str; a byte above 0x7f fails the load with OST_EDECODE (the
     * default, as Python's encoding='ASCII') */
    OST_PY2STR_ASCII = 0,
    /* a str, each byte one character U+0000..U+00FF (encoding='latin1') */
    OST_PY2STR_LATIN1 = 1,
    /* a bytes value (encoding='bytes') */
    OST_PY2STR_BYTES = 2
} ost_py2str;

/* Sets how Python 2 str is read, for this and later loads. 0, or
 * OST_EINVAL for a value not in ost_py2str (nothing changes then). */
OST_EXTERN int ost_reader_set_py2str(ost_reader *r, ost_py2str mode);
/* Returns how Python 2 str is read. */
OST_EXTERN ost_py2str ost_reader_get_py2str(const ost_reader *r);
/* Installs the global resolver (NULL: every global is generic). */
OST_EXTERN void ost_reader_set_find_global(ost_reader *r,
                                           ost_find_global_fn fn, void *ud);
/* Installs the persistent_load hook (NULL: pids fail the load). */
OST_EXTERN void ost_reader_set_persistent_load(ost_reader *r,
                                               ost_persistent_load_fn fn,
                                               void *ud);

/* Reads one pickle from data[0..len), up to its STOP. On success *out gets
 * a new reference and *consumed (if not NULL) the bytes read. On failure
 * *out is 0, everything built is freed, and the code is OST_ETRUNCATED,
 * OST_EBADOPCODE, OST_EBADPICKLE, OST_EMEMO, OST_ELIMIT, OST_EUTF8,
 * OST_EUNSUPPORTED, OST_EPROTOCOL, OST_ENOPERSLOAD, OST_ENOMEM or a hook's
 * code; ost_reader_errmsg says what, ost_reader_erroffset where. The
 * reader never executes anything a pickle names. */
OST_EXTERN int ost_load(ost_reader *r, const void *data, size_t len,
                        ost_value *out, size_t *consumed);
/* What ost_load_lent calls once the lent buffer is no longer used. */
typedef void (*ost_release_fn)(void *ud, const void *data, size_t len);
/* Bytes values of at least this many bytes share a lent buffer. */
#define OST_LEND_MIN 65536
/* ost_load, but the caller lends data[0..len) to the values loaded instead
 * of having them copy it: each bytes value (not bytearray) of at least
 * OST_LEND_MIN bytes points into data, so a large payload costs no copy.
 * The caller must keep data valid and unchanged until release(ud, data,
 * len) is called, which happens exactly once, on the thread that drops
 * the last value pointing into data: when that value is freed, or before
 * ost_load_lent returns if no value points into it (always on failure).
 * release may be NULL when the caller knows that data outlives every
 * value loaded. Such a bytes value's ost_data is not followed by a NUL.
 * Ownership of *out and errors as ost_load. */
OST_EXTERN int ost_load_lent(ost_reader *r, const void *data, size_t len,
                             ost_release_fn release, void *ud, ost_value *out,
                             size_t *consumed);
/* Reads a pickle made by ost_dump_state and gives its value to inst as
 * BUILD would (fills slots, calls setstate, or replaces the state), without
 * marking inst changed; then a slot still unset gets its field's default
 * (ost_class_def.defaults), as for a state written before the field was
 * added. Errors as ost_load; inst is unchanged on failure. */
OST_EXTERN int ost_load_state(ost_reader *r, ost_value inst, const void *data,
                              size_t len);
/* Message of the last failure, with its byte offset ("" if none). */
OST_EXTERN const char *ost_reader_errmsg(const ost_reader *r);
/* Byte offset of the opcode that failed. */
OST_EXTERN size_t ost_reader_erroffset(const ost_reader *r);

/* ---- disassembly ---------------------------------------------------------- */

/* Appends a pickletools-like listing of the pickle in data[0..len) to out,
 * one opcode a line with its offset, its indentation by MARK depth (2
 * blanks a level up to 32 levels; a deeper line's indentation ends with
 * its depth, [N]) and its argument (text and bytes of more than 200 bytes
 * as their size; ints as ost_repr prints them). Returns 0, OST_ENOMEM, or
 * a reader error code when the input is malformed (the listing then ends
 * at the bad opcode, and *erroff receives its offset if erroff is not
 * NULL). */
OST_EXTERN int ost_pickle_dis(const void *data, size_t len, ost_buf *out,
                              size_t *erroff);
/* The same listing, handed to fn in pieces as it is made (whole lines, a
 * few KiB at a time, a longer line at once), so memory stays bounded by
 * the longest line whatever the length of the listing; ints in arguments
 * print as ost_repr_ex prints them with o (NULL: the defaults; max_len is
 * not used). With fn NULL, only checks the pickle as the listing would,
 * with the same result. Returns 0, a reader error code as ost_pickle_dis
 * (what came before the bad opcode has been handed to fn), OST_ENOMEM, or
 * fn's negative code, which stops the listing (a positive one stops it
 * with OST_EIO). */
OST_EXTERN int ost_pickle_dis_ex(const void *data, size_t len, const ost_repr_options *o,
                                 ost_write_fn fn, void *ud, size_t *erroff);

/* Calls fn(ud, oid) for each persistent reference of the pickle
 * data[0, len) whose pid is an int (an oid, as stores of format 3 and
 * before write them) or a pair of ints (oid, class id: format 4), by
 * walking the opcodes without building values: what pack and check follow.
 * 0, or a reader code (OST_EBADOPCODE, OST_ETRUNCATED) for a malformed
 * pickle, after the references before the fault were given to fn. */
OST_EXTERN int ost_pickle_refs(const void *data, size_t len, void (*fn)(void *ud, uint64_t oid),
                               void *ud);

#ifdef __cplusplus
}
#endif

#endif
