/* Error names and messages, generated from OST_ERRNO_MAP. */
#include <stdio.h>

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

void ost__vfmt(char *dst, size_t cap, const char *fmt, va_list ap) {
    vsnprintf(dst, cap, fmt, ap);
}
