/* base/text.c: text for messages (text.h): the formatter that keeps a
 * cut message's end, and the display of paths, one line each. */
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* ---- messages ----------------------------------------------------------------- */

/* The start of the UTF-8 character at or before s[i] (a continuation byte
 * moves back, at most three times). */
static size_t char_start(const char *s, size_t i) {
    for (int k = 0; k < 3 && i > 0 && ((uint8_t)s[i] & 0xc0) == 0x80; k++) i--;
    return i;
}

/* Copies msg[0..n) into dst[0..cap) whole, or without its middle. */
static void fit(char *dst, size_t cap, const char *msg, size_t n) {
    if (n < cap) {
        memcpy(dst, msg, n + 1);
        return;
    }
    if (cap < 16) { /* no room for both ends: the start */
        memcpy(dst, msg, cap - 1);
        dst[char_start(dst, cap - 1)] = 0;
        return;
    }
    size_t room = cap - 1 - 3, head = char_start(msg, room / 3);
    size_t tail = n - (room - head);
    while (tail < n && ((uint8_t)msg[tail] & 0xc0) == 0x80) tail++; /* a whole character */
    memcpy(dst, msg, head);
    memcpy(dst + head, "...", 3);
    memcpy(dst + head + 3, msg + tail, n - tail + 1);
}

/* Formats into dst[0, cap), keeping a too long message's two ends
 * (text.h). A second pass formats the whole, on the stack up to 2 KiB,
 * else from malloc; without memory, the start as vsnprintf cut it. */
void ost__vfmt(char *dst, size_t cap, const char *fmt, va_list ap) {
    if (!cap) return;
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(dst, cap, fmt, ap);
    if (n >= 0 && (size_t)n >= cap) {
        char small[2048];
        char *whole = (size_t)n < sizeof small ? small : malloc((size_t)n + 1);
        if (whole) { /* else the start, as vsnprintf cut it */
            vsnprintf(whole, (size_t)n + 1, fmt, again);
            fit(dst, cap, whole, (size_t)n);
            if (whole != small) free(whole);
        } else
            dst[char_start(dst, cap - 1)] = 0;
    }
    va_end(again);
}

/* ost__vfmt of the arguments that follow fmt (text.h). */
void ost__fmt(char *dst, size_t cap, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    ost__vfmt(dst, cap, fmt, ap);
    va_end(ap);
}

/* ---- paths in messages ----------------------------------------------------------- */

/* The length of the valid UTF-8 character at s[0..left) (strictly: no
 * surrogates, no overlong forms) and its code point, or 0 when s starts no
 * such character. left >= 1. */
static size_t utf8_char(const uint8_t *s, size_t left, uint32_t *u) {
    uint8_t c = s[0];
    if (c < 0x80) {
        *u = c;
        return 1;
    }
    size_t need;
    uint8_t lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) need = 1, *u = c & 0x1f;
    else if (c == 0xe0) need = 2, lo = 0xa0, *u = 0;
    else if (c == 0xed) need = 2, hi = 0x9f, *u = 0xd; /* no surrogates */
    else if (c >= 0xe1 && c <= 0xef) need = 2, *u = c & 0x0f;
    else if (c == 0xf0) need = 3, lo = 0x90, *u = 0;
    else if (c >= 0xf1 && c <= 0xf3) need = 3, *u = c & 0x07;
    else if (c == 0xf4) need = 3, hi = 0x8f, *u = 4;
    else return 0;
    if (left <= need || s[1] < lo || s[1] > hi) return 0;
    for (size_t k = 2; k <= need; k++)
        if ((s[k] & 0xc0) != 0x80) return 0;
    for (size_t k = 1; k <= need; k++) *u = *u << 6 | (s[k] & 0x3f);
    return need + 1;
}

/* The shown form of the character or byte at s into out (up to 10
 * bytes, not terminated): its length; *used gets the bytes of s it
 * stands for. */
static size_t show_unit(const char *s, size_t left, char out[12], size_t *used) {
    uint32_t u;
    size_t n = utf8_char((const uint8_t *)s, left, &u);
    if (!n) { /* a byte that is not UTF-8 */
        *used = 1;
        return (size_t)snprintf(out, 12, "\\x%02x", (uint8_t)s[0]);
    }
    *used = n;
    switch (u) {
    case '\\': memcpy(out, "\\\\", 2); return 2;
    case '\n': memcpy(out, "\\n", 2); return 2;
    case '\r': memcpy(out, "\\r", 2); return 2;
    case '\t': memcpy(out, "\\t", 2); return 2;
    }
    if (ost__printable(u)) {
        memcpy(out, s, n);
        return n;
    }
    if (u < 0x100) return (size_t)snprintf(out, 12, "\\x%02x", (unsigned)u);
    if (u < 0x10000) return (size_t)snprintf(out, 12, "\\u%04x", (unsigned)u);
    return (size_t)snprintf(out, 12, "\\U%08x", (unsigned)u);
}

/* Whether every character of s[0, n) is strict UTF-8 (text.h). */
bool ost__utf8_strict(const char *s, size_t n) {
    uint32_t u;
    for (size_t i = 0, k; i < n; i += k)
        if (!(k = utf8_char((const uint8_t *)s + i, n - i, &u))) return false;
    return true;
}

/* path as messages show it, in dst[0, cap) (text.h): the shown length
 * first, then the whole, or a head and the tail that fits. Returns dst. */
char *ost__path_show(char *dst, size_t cap, const char *path) {
    char unit[12];
    size_t used, total = 0;
    if (!path) path = "(null)";
    const char *end = path + strlen(path);
    for (const char *s = path; *s; s += used) total += show_unit(s, (size_t)(end - s), unit, &used);
    /* the whole, or a head of about a third and a tail of the rest */
    size_t room = total < cap ? total : cap - 1 - 3;
    size_t head_room = total < cap ? total : room / 3, o = 0;
    const char *s = path;
    while (*s) {
        size_t k = show_unit(s, (size_t)(end - s), unit, &used);
        if (o + k > head_room) break;
        memcpy(dst + o, unit, k);
        o += k;
        s += used;
    }
    if (total < cap) {
        dst[o] = 0;
        return dst;
    }
    memcpy(dst + o, "...", 3);
    o += 3;
    /* the tail: the units that end the shown path within what is left */
    size_t before = 0, tail_room = cap - 1 - o;
    for (s = path; *s; s += used) { /* skip units until the rest fits */
        if (total - before <= tail_room) break;
        before += show_unit(s, (size_t)(end - s), unit, &used);
    }
    for (; *s; s += used) {
        size_t k = show_unit(s, (size_t)(end - s), unit, &used);
        memcpy(dst + o, unit, k);
        o += k;
    }
    dst[o] = 0;
    return dst;
}

/* The kind of file of st_mode mode, a static string (text.h). */
const char *ost__file_kind(unsigned mode) {
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFDIR: return "a directory";
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    default: return "not a regular file";
    }
}

/* ---- code points ---------------------------------------------------------------- */

/* Code points Python's repr escapes: controls, a few separators and format
 * characters, surrogates, non-characters. An approximation of
 * str.isprintable() without the Unicode database. True for the others. */
bool ost__printable(uint32_t u) {
    if (u < 0x20 || (u >= 0x7f && u <= 0xa0) || u == 0xad) return false;
    if (u >= 0xd800 && u <= 0xdfff) return false;
    if (u == 0x2028 || u == 0x2029 || (u >= 0x200b && u <= 0x200f)) return false;
    if ((u >= 0x2060 && u <= 0x206f) || u == 0xfeff || u == 0x3000) return false;
    if (u >= 0xfff0 && u <= 0xfffb) return false;
    if ((u & 0xfffe) == 0xfffe || (u >= 0xfdd0 && u <= 0xfdef)) return false;
    if (u >= 0xe0000) return false;
    if ((u >= 0xe000 && u <= 0xf8ff) || u >= 0xf0000) return false; /* private */
    return true;
}
