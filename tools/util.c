/* ostore CLI: messages, argument parsing, opening stores, output helpers. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

/* ---- messages and usage ---------------------------------------------------- */

const char *shown(const char *path) {
    static _Thread_local char ring[4][OST_PATH_SHOWN];
    static _Thread_local unsigned next;
    return ost_store_addr_show(ring[next++ % 4], OST_PATH_SHOWN, path);
}

int fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fputs("ostore: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return EXIT_FAIL;
}

int bad_usage(const cli_cmd *cmd, const char *fmt, ...) {
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        fputs("ostore: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
    fputs(cmd->usage, stderr);
    fprintf(stderr, "Try 'ostore %s --help' for more.\n", cmd->name);
    return EXIT_USAGE;
}

int print_help(const cli_cmd *cmd) {
    fputs(cmd->usage, stdout);
    fprintf(stdout, "\n%s\n", cmd->summary);
    if (cmd->help && cmd->help[0]) fprintf(stdout, "\n%s", cmd->help);
    return EXIT_OK;
}

bool is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* ---- argument parsing ---------------------------------------------------- */

bool parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return false;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return false;
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

int parse_args(const cli_cmd *cmd, int argc, char **argv, const cli_opt *opts, size_t nopts,
               const char **pos, size_t min_pos, size_t max_pos, size_t *npos) {
    size_t n = 0;
    bool only_pos = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!only_pos && is_help(a)) {
            print_help(cmd);
            return -1;
        }
        if (!only_pos && strcmp(a, "--") == 0) {
            only_pos = true;
            continue;
        }
        if (!only_pos && a[0] == '-' && a[1]) {
            const char *eq = strchr(a, '=');
            size_t nl = eq ? (size_t)(eq - a) : strlen(a);
            const cli_opt *o = NULL;
            for (size_t k = 0; k < nopts; k++)
                if (strlen(opts[k].name) == nl && strncmp(opts[k].name, a, nl) == 0) o = &opts[k];
            if (!o) return bad_usage(cmd, "%s: unknown option %s", cmd->name, a);
            if (!o->takes_value) {
                if (eq) return bad_usage(cmd, "%s: option %s takes no value", cmd->name, o->name);
                *o->value = "1";
            } else if (eq) {
                *o->value = eq + 1;
            } else {
                if (++i == argc) return bad_usage(cmd, "%s: option %s needs a value", cmd->name, a);
                *o->value = argv[i];
            }
            continue;
        }
        if (n == max_pos) return bad_usage(cmd, "%s: too many arguments", cmd->name);
        pos[n++] = a;
    }
    if (n < min_pos) return bad_usage(cmd, "%s: missing arguments", cmd->name);
    if (npos) *npos = n;
    return EXIT_OK;
}

int repr_options(const cli_cmd *cmd, const char *int_digits, const char *max_output,
                 ost_repr_options *o) {
    ost_repr_options_init(o);
    o->max_len = CLI_MAX_OUTPUT;
    uint64_t n;
    if (int_digits) {
        if (!parse_u64(int_digits, &n) || (uint64_t)(size_t)n != n)
            return bad_usage(cmd, "%s: --int-digits needs a number of digits (0: no limit), not '%s'",
                             cmd->name, int_digits);
        o->int_digits = (size_t)n;
    }
    if (max_output) {
        if (!parse_u64(max_output, &n) || (uint64_t)(size_t)n != n)
            return bad_usage(cmd, "%s: --max-output needs a number of bytes (0: no limit), not '%s'",
                             cmd->name, max_output);
        o->max_len = (size_t)n;
    }
    return EXIT_OK;
}

int write_stdout(void *ud, const void *data, size_t len) {
    (void)ud;
    return fwrite(data, 1, len, stdout) == len ? 0 : OST_EIO;
}

/* ---- stores --------------------------------------------------------------- */

static bool g_no_walk;

void open_store_no_walk(void) { g_no_walk = true; }

static int open_how(const char *dir, bool write, bool excl, ost_store **out) {
    *out = NULL;
    struct stat sb;
    if (ost_store_addr_is_path(dir) && stat(dir, &sb) != 0)
        return errno == ENOENT ? fail("%s: %s (no store here: 'ostore demo', 'ostore import' "
                                      "and 'ostore copy' make one)", shown(dir), strerror(errno))
                               : fail("%s: %s", shown(dir), strerror(errno));
    if (ost_store_addr_is_path(dir) && !S_ISDIR(sb.st_mode))
        return fail("%s: not a directory (a store is a directory)", shown(dir));
    /* ost_store_open checks the meta pages and the file's length before
     * liblmdb maps it, and names what is not a regular file */
    ost_store *st = ost_store_new();
    if (!st) return fail("out of memory");
    ost_store_options o;
    ost_store_options_init(&o);
    o.read_only = !write;
    o.exclusive = excl;
    int orc = ost_store_open(st, dir, &o);
    char data[PATH_MAX + 16];
    snprintf(data, sizeof data, "%s/data.mdb", dir);
    if (orc == OST_ENOTFOUND && ost_store_addr_is_path(dir) && access(data, F_OK) != 0 &&
        errno == ENOENT) {
        /* the library's hint names its option: say the commands instead */
        ost_store_close(st);
        return fail("%s: no store here (no data.mdb: 'ostore demo', 'ostore import' and "
                    "'ostore copy' make one)", shown(dir));
    }
    if (orc) {
        int r = fail("%s", ost_store_errmsg(st));
        ost_store_close(st);
        return r;
    }
    /* the walk checks LMDB's pages: a server address has none */
    if (!g_no_walk && ost_store_addr_is_path(dir) && raw_verify_pages(st, dir)) {
        ost_store_close(st);
        return EXIT_FAIL;
    }
    *out = st;
    return EXIT_OK;
}

int open_store(const char *dir, bool write, ost_store **out) {
    return open_how(dir, write, false, out);
}

int open_store_excl(const char *dir, ost_store **out) { return open_how(dir, true, true, out); }

/* ---- output helpers ------------------------------------------------------ */

const char *fmt_count(char *buf, size_t cap, uint64_t n) {
    char digits[32];
    int len = snprintf(digits, sizeof digits, "%llu", (unsigned long long)n);
    size_t o = 0;
    for (int i = 0; i < len && o + 2 < cap; i++) {
        if (i && (len - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = digits[i];
    }
    buf[o] = 0;
    return buf;
}

const char *fmt_bytes(char *buf, size_t cap, double b) {
    if (b < 1024) snprintf(buf, cap, "%.0f B", b);
    else if (b < 1024.0 * 1024) snprintf(buf, cap, "%.1f KiB", b / 1024);
    else if (b < 1024.0 * 1024 * 1024) snprintf(buf, cap, "%.1f MiB", b / 1048576);
    else snprintf(buf, cap, "%.2f GiB", b / 1073741824.0);
    return buf;
}

double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

uint64_t file_size(const char *dir, const char *name) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct stat sb;
    return stat(path, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

/* ---- progress bar ---------------------------------------------------------- */

void progress_start(progress *p, bool on, const char *label, uint64_t total) {
    p->on = on;
    p->label = label;
    p->total = total;
    p->start = p->last = now_s();
    p->last -= 1;
}

void progress_update(progress *p, uint64_t done, const char *unit) {
    if (!p->on) return;
    double t = now_s();
    if (t - p->last < 0.1 && done < p->total) return;
    p->last = t;
    enum { W = 30 };
    double frac = p->total ? (double)done / (double)p->total : 0;
    if (frac > 1) frac = 1;
    char bar[W + 1];
    int fill = (int)(frac * W);
    for (int i = 0; i < W; i++) bar[i] = i < fill ? '#' : '-';
    bar[W] = 0;
    char a[32], b[32];
    double rate = t > p->start ? (double)done / (t - p->start) : 0;
    printf("\r  %-8s [%s] %3.0f%%  %s/%s %s  (%s/s)\033[K", p->label, bar, frac * 100,
           fmt_count(a, sizeof a, done), fmt_count(b, sizeof b, p->total), unit,
           fmt_count((char[32]){0}, 32, (uint64_t)rate));
    fflush(stdout);
}

void progress_note(progress *p, const char *text) {
    if (!p->on) return;
    printf("\r  %-8s %s\033[K", p->label, text);
    fflush(stdout);
}

void progress_end(progress *p) {
    if (!p->on) return;
    printf("\r\033[K");
    fflush(stdout);
}

/* ---- crash guard ---------------------------------------------------------------- */

#if defined(__SANITIZE_ADDRESS__)
#define CLI_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CLI_ASAN 1
#endif
#endif

static char g_crash_msg[PATH_MAX + 128];
static size_t g_crash_len;

static void on_crash(int sig) {
    (void)sig;
    ssize_t w = write(2, g_crash_msg, g_crash_len);
    (void)w;
    _exit(EXIT_FAIL);
}

void guard_crashes(const char *dir) {
#ifndef CLI_ASAN
    int n = snprintf(g_crash_msg, sizeof g_crash_msg,
                     "ostore: %s: crashed while reading the store (the store may be damaged; "
                     "try 'ostore check')\n",
                     shown(dir));
    g_crash_len = n < 0 ? 0 : (size_t)n < sizeof g_crash_msg ? (size_t)n : sizeof g_crash_msg - 1;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sigemptyset(&sa.sa_mask);
    /* the walk of the pages comes first, so these are a last guard: an
     * assertion or a division inside liblmdb on damage the walk missed */
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    sigaction(SIGFPE, &sa, NULL);
    sigaction(SIGILL, &sa, NULL);
    sigaction(SIGABRT, &sa, NULL);
#else
    (void)dir;
    (void)on_crash;
#endif
}
