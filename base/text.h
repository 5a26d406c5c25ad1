/* base/text.h: text for messages. One formatter of messages into a fixed
 * buffer (every handle's message goes through ost__vfmt) and one display
 * of paths and text in them, so that a message stays one line and its
 * end, which says what went wrong, survives a cut. No state: every
 * function is safe from any thread. */
#ifndef OST_BASE_TEXT_H
#define OST_BASE_TEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Formats a message into dst[0..cap) (NUL terminated; nothing when cap is
 * 0). A message longer than cap - 1 bytes loses its middle, not its end:
 * the start and the end are kept around "...", cut at UTF-8 character
 * boundaries. ap is consumed as vsnprintf consumes it. */
void ost__vfmt(char *dst, size_t cap, const char *fmt, va_list ap);
/* ost__vfmt with the arguments inline. */
void ost__fmt(char *dst, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The size of a buffer for ost__path_show: a path is shown in at most
 * OST__PATH_SHOWN - 1 bytes. */
#define OST__PATH_SHOWN 201
/* Writes path as messages name it into dst[0..cap), cap >= 16, and
 * returns dst. Every message that names a file or directory shows it
 * through this function, so that a message stays one line of text:
 * control characters, DEL and the other code points Python's repr
 * escapes become \n, \t, \r, \xhh, \uXXXX or \UXXXXXXXX, a backslash
 * becomes \\, and each byte that is not part of valid UTF-8 becomes \xhh
 * (as Python shows the bytes of a path). When what results is longer than
 * cap - 1 bytes, its middle is replaced by "...", keeping the start (where
 * the path is) and the end (the file's name); an escape is never cut.
 * path NULL shows as "(null)". */
char *ost__path_show(char *dst, size_t cap, const char *path);
/* True when s[0..n) is UTF-8 as Python's bytes.decode() accepts it: no
 * lone surrogates, no overlong forms (ost_utf8_check allows surrogates). */
bool ost__utf8_strict(const char *s, size_t n);
/* True for a code point Python's repr shows as it is (str.isprintable(),
 * approximately): false for controls, separators, surrogates... */
bool ost__printable(uint32_t u);
/* What a file of st_mode mode is, for messages: "a FIFO", "a directory",
 * "a character device"... (a static string). */
const char *ost__file_kind(unsigned mode);

#endif
