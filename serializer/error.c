/* Error names and messages, generated from OST_ERRNO_MAP; the version; the
 * public faces of base/text.c (ost_path_show, ost_file_kind). */
#include "internal.h"

const char *ost_strerror(int err) {
    switch (err) {
    case OST_OK: return "success";
#define X(name, val, msg) \
    case OST_##name: return msg;
        OST_ERRNO_MAP(X)
#undef X
    default: return "unknown error";
    }
}

const char *ost_err_name(int err) {
    switch (err) {
    case OST_OK: return "OST_OK";
#define X(name, val, msg) \
    case OST_##name: return "OST_" #name;
        OST_ERRNO_MAP(X)
#undef X
    default: return "OST_UNKNOWN";
    }
}

unsigned ost_version(void) { return OST_VERSION_HEX; }

const char *ost_version_string(void) {
#define OST__S(x) #x
#define OST__V(a, b, c) OST__S(a) "." OST__S(b) "." OST__S(c)
    return OST__V(OST_VERSION_MAJOR, OST_VERSION_MINOR, OST_VERSION_PATCH);
}

/* ---- paths in messages (base/text.c) ------------------------------------------- */

char *ost_path_show(char *dst, size_t cap, const char *path) {
    return ost__path_show(dst, cap, path);
}

const char *ost_file_kind(unsigned mode) { return ost__file_kind(mode); }
