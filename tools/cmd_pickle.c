/* ostore CLI: `ostore pickle dis|show|repickle`, pickles outside a store. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"

static int usage(const char *why) {
    if (why) fprintf(stderr, "ostore: %s\n", why);
    fputs(cmd_pickle.usage, stderr);
    return EXIT_USAGE;
}

/* Reads a whole file ("-" is stdin) into a malloc'd buffer. */
static int slurp(const char *path, unsigned char **out, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ostore: %s: %s\n", path, strerror(errno));
        return 1;
    }
    size_t cap = 1 << 16, n = 0;
    unsigned char *buf = malloc(cap);
    for (;;) {
        if (!buf) break;
        if (ost__reserve((void **)&buf, &cap, n + 1, 1, 0)) {
            free(buf);
            buf = NULL;
            break;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0) break;
    }
    int err = ferror(f);
    if (f != stdin) fclose(f);
    if (!buf || err) {
        free(buf);
        fprintf(stderr, "ostore: %s: %s\n", path, buf ? "read error" : "out of memory");
        return 1;
    }
    *out = buf;
    *len = n;
    return 0;
}

/* Without a store, a persistent id is shown as a persistent reference. */
static int keep_pid(void *ud, ost_value pid, ost_value *obj) {
    (void)ud;
    *obj = ost_persref(ost_incref(pid));
    return *obj ? 0 : OST_ENOMEM;
}

/* The --encoding choices: Python's Unpickler(encoding=...) for Python 2
 * str. Returns 0 and sets *mode, or -1 for an unknown name. */
static int py2str_mode(const char *name, ost_py2str *mode) {
    if (!strcasecmp(name, "ascii")) *mode = OST_PY2STR_ASCII;
    else if (!strcasecmp(name, "latin1") || !strcasecmp(name, "latin-1"))
        *mode = OST_PY2STR_LATIN1;
    else if (!strcmp(name, "bytes")) *mode = OST_PY2STR_BYTES;
    else return -1;
    return 0;
}

static int load(const char *path, ost_py2str py2str, ost_value *v) {
    unsigned char *buf;
    size_t len;
    if (slurp(path, &buf, &len)) return 1;
    ost_reader *r = ost_reader_new();
    if (!r) {
        free(buf);
        fprintf(stderr, "ostore: out of memory\n");
        return 1;
    }
    ost_reader_set_persistent_load(r, keep_pid, NULL);
    ost_reader_set_py2str(r, py2str);
    int rc = ost_load(r, buf, len, v, NULL);
    if (rc) fprintf(stderr, "ostore: %s: %s\n", path, ost_reader_errmsg(r));
    ost_reader_free(r);
    free(buf);
    return rc ? 1 : 0;
}

/* A bad pickle prints nothing but the error: the pickle is checked first,
 * then its listing is written to stdout as it is made, so memory stays
 * bounded however long the listing. */
static int cmd_dis(const char *path, const ost_repr_options *o) {
    unsigned char *buf;
    size_t len, off = 0;
    if (slurp(path, &buf, &len)) return 1;
    int rc = ost_pickle_dis_ex(buf, len, o, NULL, NULL, &off);
    if (rc) {
        fprintf(stderr, "ostore: %s: %s at offset %zu\n", path, ost_err_name(rc), off);
    } else if ((rc = ost_pickle_dis_ex(buf, len, o, write_stdout, NULL, &off)) ||
               fflush(stdout)) {
        fprintf(stderr, "ostore: write error: %s\n", rc == OST_EIO || !rc ? strerror(errno)
                                                                        : ost_strerror(rc));
        rc = 1;
    }
    free(buf);
    return rc ? 1 : 0;
}

static int cmd_show(const char *path, ost_py2str py2str, const ost_repr_options *o) {
    ost_value v;
    if (load(path, py2str, &v)) return 1;
    ost_buf out = {0};
    int rc = ost_repr_ex(v, &out, o);
    ost_release(v);
    if (rc) {
        fprintf(stderr, "ostore: %s\n", ost_strerror(rc));
        ost_buf_free(&out);
        return 1;
    }
    fwrite(out.data, 1, out.len, stdout);
    fputc('\n', stdout);
    ost_buf_free(&out);
    return 0;
}

static int cmd_repickle(int protocol, bool frame, ost_py2str py2str, const char *path) {
    ost_value v;
    if (load(path, py2str, &v)) return 1;
    ost_writer *w = ost_writer_new();
    const void *data;
    size_t len;
    int rc = w ? ost_writer_set_protocol(w, protocol) : OST_ENOMEM;
    if (w) ost_writer_set_framing(w, frame);
    if (!rc) rc = ost_dump(w, v, &data, &len);
    if (rc) fprintf(stderr, "ostore: %s\n", w ? ost_writer_errmsg(w) : "out of memory");
    else if (fwrite(data, 1, len, stdout) != len || fflush(stdout)) {
        fprintf(stderr, "ostore: write error: %s\n", strerror(errno));
        rc = 1;
    }
    ost_release(v);
    ost_writer_free(w);
    return rc ? 1 : 0;
}

static int run_pickle(int argc, char **argv) {
    if (argc < 1) return usage("pickle: missing subcommand");
    if (is_help(argv[0])) return print_help(&cmd_pickle);
    const char *sub = argv[0];
    int protocol = OST_PICKLE_DEFAULT_PROTOCOL;
    bool frame = true;
    ost_py2str py2str = OST_PY2STR_ASCII;
    const char *path = NULL, *digits = NULL, *max_out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_help(a)) return print_help(&cmd_pickle);
        if ((strcmp(a, "--int-digits") == 0 && strcmp(sub, "repickle") != 0) ||
            (strcmp(a, "--max-output") == 0 && strcmp(sub, "show") == 0)) {
            if (++i == argc) {
                fprintf(stderr, "ostore: %s needs a value\n", a);
                return usage(NULL);
            }
            *(a[2] == 'i' ? &digits : &max_out) = argv[i];
        } else if (strcmp(sub, "repickle") == 0 && strcmp(a, "--protocol") == 0) {
            if (++i == argc) return usage("--protocol needs a value");
            char *end;
            long n = strtol(argv[i], &end, 10);
            if (*end || end == argv[i] || n < 2 || n > OST_PICKLE_HIGHEST_PROTOCOL)
                return usage("--protocol must be 2, 3, 4 or 5");
            protocol = (int)n;
        } else if (strcmp(sub, "repickle") == 0 && strcmp(a, "--no-frame") == 0) {
            frame = false;
        } else if (strcmp(sub, "dis") != 0 && strcmp(a, "--encoding") == 0) {
            if (++i == argc) return usage("--encoding needs a value");
            if (py2str_mode(argv[i], &py2str))
                return usage("--encoding must be ascii, latin1 or bytes");
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "ostore: unknown option %s\n", a);
            return usage(NULL);
        } else if (path) {
            return usage("too many arguments");
        } else
            path = a;
    }
    if (!path) return usage("missing FILE (use - for standard input)");
    ost_repr_options ro;
    if (repr_options(&cmd_pickle, digits, max_out, &ro)) return EXIT_USAGE;
    if (strcmp(sub, "dis") == 0) return cmd_dis(path, &ro);
    if (strcmp(sub, "show") == 0) return cmd_show(path, py2str, &ro);
    if (strcmp(sub, "repickle") == 0) return cmd_repickle(protocol, frame, py2str, path);
    fprintf(stderr, "ostore: unknown pickle subcommand '%s'\n", sub);
    return usage(NULL);
}

const cli_cmd cmd_pickle = {
    .name = "pickle",
    .summary = "Disassemble, print or rewrite a Python pickle (a file, or - for stdin).",
    .usage = "usage: ostore pickle dis [--int-digits N] FILE|-\n"
             "       ostore pickle show [--int-digits N] [--max-output N] [--encoding E] FILE|-\n"
             "       ostore pickle repickle [--protocol N] [--no-frame] [--encoding E] FILE|-\n",
    .help = "  dis       list the pickle's opcodes, one a line, with offsets, indentation\n"
            "            by MARK depth (up to 32 levels, then the depth as [N]) and\n"
            "            arguments; --int-digits N as for show\n"
            "  show      load it (nothing is imported or called) and print the value,\n"
            "            Python-like; persistent ids print as persistent(pid), and an\n"
            "            object reached more than once prints once, labelled #N=, then\n"
            "            as #N#\n"
            "            --int-digits N  an int of more than N decimal digits prints in\n"
            "                            hexadecimal, 0x... (default 4300, as Python;\n"
            "                            0: always decimal)\n"
            "            --max-output N  cut the text after N bytes, marked '... (output\n"
            "                            truncated at N bytes)' (default 64 MiB; 0: no limit)\n"
            "  repickle  load it and write it again to stdout with protocol N (2-5,\n"
            "            default 4); --no-frame leaves out FRAME opcodes\n"
            "  --encoding E  (show, repickle) what a Python 2 str becomes, as Python's\n"
            "            Unpickler(encoding=E): ascii (the default; a byte above 0x7f\n"
            "            is an error naming its offset), latin1 (each byte one\n"
            "            character) or bytes\n"
            "\nExit status: 0 ok, 1 bad pickle or unreadable file, 2 bad usage.\n",
    .run = run_pickle,
};
