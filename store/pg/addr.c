/* The PostgreSQL engine's addresses and its line in the table of engines
 * (store/engines.c). This file needs nothing of the engine or of libpq:
 * a program linked statically against libostore.a links it always, and
 * the engine's operations (store/pg/engine.c, libpq) only when it asks
 * for them, since the entry refers to them weakly: an undefined weak
 * symbol does not make the link editor extract the archive member that
 * defines it (System V gABI, "Symbol Table": "The link editor does not
 * extract archive members to resolve undefined weak symbols"; GNU ld does
 * so, tests/install_test.py links such a program), and it is then 0. The
 * shared library always holds store/pg/engine.c. A static program that
 * wants the engine names it to the linker (-Wl,--undefined=ost__pg_engine
 * and a static libpq with what it needs: docs/tutorial.md, "Building a
 * program"). Without libpq at build time the entry is here all the same,
 * so that a PostgreSQL address says why it does not open rather than
 * passing for a path. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../engine.h"
#include "../../serializer/internal.h"

bool ost__pg_claims(const char *addr) {
    return addr && (!strncmp(addr, "postgresql://", 13) || !strncmp(addr, "postgres://", 11) ||
                    !strncmp(addr, "postgres:", 9));
}

/* Copies addr without any password into out[0, cap), as messages show it
 * (ost__path_show's escapes): a URI's user:password@ becomes user@ and its
 * password=... parameter goes; a conninfo string loses its password=...
 * pair. */
void ost__pg_show(const char *addr, char *out, size_t cap) {
    char *b = malloc(strlen(addr) + 1);
    if (!b) {
        snprintf(out, cap, "postgresql://...");
        return;
    }
    size_t n = 0;
    const char *p = addr;
    const char *sch = strstr(addr, "://");
    if (sch && (p == addr) && (!strncmp(addr, "postgres", 8))) {
        /* scheme, then the authority up to '/', '?' or the end */
        const char *auth = sch + 3;
        memcpy(b, addr, (size_t)(auth - addr));
        n = (size_t)(auth - addr);
        size_t alen = strcspn(auth, "/?");
        const char *at = memchr(auth, '@', alen);
        if (at) {
            const char *colon = memchr(auth, ':', (size_t)(at - auth));
            size_t ulen = colon ? (size_t)(colon - auth) : (size_t)(at - auth);
            memcpy(b + n, auth, ulen);
            n += ulen;
            memcpy(b + n, at, alen - (size_t)(at - auth));
            n += alen - (size_t)(at - auth);
        } else {
            memcpy(b + n, auth, alen);
            n += alen;
        }
        p = auth + alen;
        /* the path and query: drop a password=... parameter */
        while (*p) {
            if ((p[-1] == '?' || p[-1] == '&') && !strncmp(p, "password=", 9)) {
                p += strcspn(p, "&");
                if (*p == '&') p++;
                else if (n && (b[n - 1] == '&' || b[n - 1] == '?')) n--;
                continue;
            }
            b[n++] = *p++;
        }
    } else {
        /* key = value pairs, values maybe quoted */
        while (*p) {
            const char *k = p;
            while (*p == ' ' || *p == '\t') p++;
            bool pw = !strncmp(p, "password", 8) && (p[8] == '=' || p[8] == ' ');
            const char *q = p;
            while (*q && *q != '=') q++;
            if (*q == '=') q++;
            while (*q == ' ') q++;
            if (*q == '\'') {
                q++;
                while (*q && *q != '\'') q += (*q == '\\' && q[1]) ? 2 : 1;
                if (*q) q++;
            } else
                while (*q && *q != ' ' && *q != '\t') q++;
            if (!pw) {
                memcpy(b + n, k, (size_t)(q - k));
                n += (size_t)(q - k);
            }
            p = q;
            if (q == k) break;
        }
    }
    b[n] = 0;
    ost__path_show(out, cap, b);
    free(b);
}

#ifdef OST_HAVE_POSTGRESQL
extern const ost__engine_ops ost__pg_engine __attribute__((weak));
#define PG_OPS &ost__pg_engine
#define PG_MISSING                                                                          \
    "this program was linked without the PostgreSQL engine (a static link leaves it out " \
    "unless asked: docs/tutorial.md, \"Building a program\")"
#else
#define PG_OPS NULL
#define PG_MISSING                                                                      \
    "this ostore was built without the PostgreSQL engine (meson option postgresql " \
    "disabled, or libpq not found)"
#endif

const ost__engine_entry ost__pg_entry = {
    .label = "PostgreSQL",
    .claims = ost__pg_claims,
    .show = ost__pg_show,
    .paths = false,
    .ops = PG_OPS,
    .missing = PG_MISSING,
};
