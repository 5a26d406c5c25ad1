/* ostore: durable graphs of C objects.
 *
 * common.h: version, export macro and the error codes shared by every layer.
 * Every function that can fail returns 0 on success or a negative OST_E* code;
 * the handle involved (writer, reader, store) keeps a message with details. */
#ifndef OSTORE_COMMON_H
#define OSTORE_COMMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(OSTORE_BUILDING) && defined(__GNUC__)
#define OST_EXTERN __attribute__((visibility("default")))
#else
#define OST_EXTERN
#endif

#define OST_VERSION_MAJOR 0
#define OST_VERSION_MINOR 1
#define OST_VERSION_PATCH 0
#define OST_VERSION_HEX \
    ((OST_VERSION_MAJOR << 16) | (OST_VERSION_MINOR << 8) | OST_VERSION_PATCH)

/* The error list, as an X-macro: name, value, message. Values never change
 * once released; new codes are appended. */
#define OST_ERRNO_MAP(X)                                                    \
    X(ENOMEM, -1, "out of memory")                                          \
    X(EINVAL, -2, "invalid argument")                                       \
    X(ETRUNCATED, -3, "pickle data truncated")                              \
    X(EBADOPCODE, -4, "unknown pickle opcode")                              \
    X(EBADPICKLE, -5, "malformed pickle")                                   \
    X(EMEMO, -6, "bad memo reference")                                      \
    X(ELIMIT, -7, "limit exceeded")                                         \
    X(EUNSUPPORTED, -8, "unsupported feature")                              \
    X(EUTF8, -9, "invalid UTF-8 text")                                      \
    X(EUNKNOWNCLASS, -10, "unknown class")                                  \
    X(ENOPERSLOAD, -11, "persistent id without persistent_load")            \
    X(EPROTOCOL, -12, "unsupported pickle protocol")                        \
    X(EIO, -13, "input/output error")                                       \
    X(ETYPE, -14, "wrong value type")                                       \
    X(EHOOK, -15, "error raised by a hook")                                 \
    X(ENOTFOUND, -16, "not found")                                          \
    X(EEXIST, -17, "already exists")                                        \
    X(ECONFLICT, -18, "conflicting change")                                 \
    X(ECORRUPT, -19, "damaged store")                                       \
    X(EVERSION, -20, "incompatible format version")                         \
    X(EREADONLY, -21, "store is read-only")                                 \
    X(EBUSY, -22, "resource busy")                                          \
    X(ETXN, -23, "transaction is not usable")                               \
    X(EVETO, -24, "commit vetoed by a hook")                                \
    X(EDECODE, -25, "text cannot be decoded")

/* The error codes as an enum: OST_OK and one OST_<name> = value for each
 * entry of OST_ERRNO_MAP. Functions return them as int. */
typedef enum {
    OST_OK = 0, /* success */
#define OST__ERRENUM(name, val, msg) OST_##name = (val),
    OST_ERRNO_MAP(OST__ERRENUM) /* OST_ENOMEM = -1 to OST_EDECODE = -25 */
#undef OST__ERRENUM
} ost_errno;

/* Returns a static, human readable message for an error code ("unknown
 * error" for codes not in the list). Never NULL. */
OST_EXTERN const char *ost_strerror(int err);

/* Returns the symbolic name of an error code, such as "OST_ETRUNCATED", or
 * "OST_UNKNOWN". Never NULL. */
OST_EXTERN const char *ost_err_name(int err);

/* The message of the last failure on handle, whatever handle it is: an
 * ost_writer, ost_reader, ost_store, ost_conn, ost_loader or ost_snap
 * (what ost_writer_errmsg ... ost_snap_errmsg say); NULL: the value
 * layer's message of this thread (ost_value_errmsg). So one check macro
 * serves every call:
 *     #define CHECK(call, h) if ((call) != 0) die(ost_errmsg(h))
 * The text is owned by the handle and valid until its next call. handle
 * must be a live handle of one of those types (another pointer gives
 * "ost_errmsg: not an ostore handle" at best). Never NULL. */
OST_EXTERN const char *ost_errmsg(const void *handle);

/* The size of a buffer for ost_path_show: a path is shown in at most
 * OST_PATH_SHOWN - 1 bytes. */
#define OST_PATH_SHOWN 201
/* Writes path into dst[0, cap) as ostore's messages show paths, and
 * returns dst: control characters, backslashes and bytes that are not
 * UTF-8 escaped as Python's repr would (\n, \x1b, \xff); a path longer
 * than cap - 1 bytes loses its middle ("..."), keeping its start and its
 * file name. cap must be at least 8. NULL shows as "(null)". */
OST_EXTERN char *ost_path_show(char *dst, size_t cap, const char *path);
/* What a file of st_mode mode is, for messages: "a regular file", "a
 * directory", "a FIFO", "a character device"... (a static string). */
OST_EXTERN const char *ost_file_kind(unsigned mode);

/* Returns OST_VERSION_HEX of the library actually linked. */
OST_EXTERN unsigned ost_version(void);

/* Returns the linked library's version as "major.minor.patch". */
OST_EXTERN const char *ost_version_string(void);

#ifdef __cplusplus
}
#endif

#endif
