/* ostore: the command-line tool.
 *
 *   ostore demo [DIR]                  build, check and time a 1M-object store
 *   ostore info DB                     format, counts, sizes, classes
 *   ostore ls DB [--class C] [--limit N]
 *   ostore cat DB OID [--dis]          an object's state, or its pickle
 *   ostore cat DB OID [--from K] [--to K|--before K] [--limit N|all]   a map's entries
 *   ostore cat DB OID --prefix K [--limit N|all]   the keys that start with K
 *   ostore refs DB OID                 what it references, what references it
 *   ostore check DB                    decode every record, follow every reference
 *   ostore pack DB                     remove what the root does not reach
 *   ostore upgrade DB                  bring an older store to format 4
 *   ostore salvage DAMAGED NEW         copy what is intact into a new store
 *   ostore export DB FILE              a versioned dump (docs/cli.md)
 *   ostore import DB FILE              load a dump into a new store
 *   ostore pickle dis|show|repickle    pickles outside a store
 *   ostore version, ostore --version
 *   ostore help [CMD], ostore CMD --help
 *
 * Exit status: 0 success, 1 a failed operation (one line on stderr), 2 bad
 * usage (the usage on stderr). Each command lives in a cmd_*.c file. */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const cli_cmd *const commands[] = {
    &cmd_demo, &cmd_info, &cmd_ls,     &cmd_cat,    &cmd_refs,    &cmd_check,
    &cmd_pack, &cmd_upgrade, &cmd_salvage, &cmd_export, &cmd_import, &cmd_copy, &cmd_pickle, &cmd_version, &cmd_help,
};
#define NCOMMANDS (sizeof commands / sizeof *commands)

static const char usage_text[] =
    "usage: ostore COMMAND [ARGS]\n"
    "       ostore demo [DIR | postgresql://...] [--objects N] [--quiet]\n"
    "       ostore info DB\n"
    "       ostore ls DB [--class MODULE.NAME] [--limit N]\n"
    "       ostore cat DB OID [--dis]\n"
    "       ostore cat DB OID [--from KEY] [--to KEY|--before KEY] [--limit N|all]\n"
    "       ostore cat DB OID --prefix KEY [--limit N|all]\n"
    "       ostore refs DB OID\n"
    "       ostore check DB\n"
    "       ostore pack DB [--force]\n"
    "       ostore upgrade DB\n"
    "       ostore salvage DAMAGED NEWSTORE\n"
    "       ostore export DB FILE|-\n"
    "       ostore import DB FILE|-\n"
    "       ostore pickle dis FILE|-\n"
    "       ostore pickle show [--encoding E] FILE|-\n"
    "       ostore pickle repickle [--protocol N] [--no-frame] [--encoding E] FILE|-\n"
    "       ostore version\n"
    "       ostore help [COMMAND]\n";

static const cli_cmd *find(const char *name) {
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (strcmp(commands[i]->name, name) == 0) return commands[i];
    return NULL;
}

static int general_usage(const char *why) {
    if (why) fprintf(stderr, "ostore: %s\n", why);
    fputs(usage_text, stderr);
    return EXIT_USAGE;
}

static int general_help(void) {
    printf("ostore %s: durable graphs of objects kept as Python pickles in LMDB.\n\n",
           ost_version_string());
    puts("usage: ostore COMMAND [ARGS]\n\ncommands:");
    for (size_t i = 0; i < NCOMMANDS; i++)
        printf("  %-8s %s\n", commands[i]->name, commands[i]->summary);
    puts("\nDB is a store directory (it holds data.mdb and lock.mdb) or, in a build with the\n"
         "PostgreSQL engine, a database address (postgresql://..., postgres://..., or\n"
         "postgres: and a conninfo): every command but upgrade and salvage takes one.\n"
         "'ostore help COMMAND' or 'ostore COMMAND --help' tells more about a command.\n"
         "\nExit status: 0 success, 1 the operation failed (one line on stderr),\n"
         "2 bad usage (the usage on stderr). See also ostore(1) and docs/cli.md.");
    return EXIT_OK;
}

static int run_help(int argc, char **argv) {
    if (argc == 0) return general_help();
    if (argc > 1) return bad_usage(&cmd_help, "help: too many arguments");
    if (is_help(argv[0])) return print_help(&cmd_help);
    const cli_cmd *c = find(argv[0]);
    if (!c) return bad_usage(&cmd_help, "help: unknown command '%s'", argv[0]);
    return print_help(c);
}

static int run_version(int argc, char **argv) {
    if (argc == 1 && is_help(argv[0])) return print_help(&cmd_version);
    if (argc) return bad_usage(&cmd_version, "version: too many arguments");
    printf("ostore %s\n", ost_version_string());
    return EXIT_OK;
}

const cli_cmd cmd_help = {
    .name = "help",
    .summary = "Show the commands, or one command's help.",
    .usage = "usage: ostore help [COMMAND]\n",
    .help = "",
    .run = run_help,
};

const cli_cmd cmd_version = {
    .name = "version",
    .summary = "Print the version of ostore (also: ostore --version).",
    .usage = "usage: ostore version\n",
    .help = "",
    .run = run_version,
};

int main(int argc, char **argv) {
    setvbuf(stderr, NULL, _IOLBF, 0);
    if (argc < 2) return general_usage(NULL);
    const char *name = argv[1];
    if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0) return general_help();
    if (strcmp(name, "--version") == 0 || strcmp(name, "-V") == 0) return run_version(0, NULL);
    const cli_cmd *c = find(name);
    if (!c) {
        fprintf(stderr, "ostore: unknown command '%s'\n", name);
        return general_usage(NULL);
    }
    int rc = c->run(argc - 2, argv + 2);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        /* a closed pipe (ostore ls DB | head) is not worth a message */
        return rc ? rc : EXIT_FAIL;
    }
    return rc;
}
