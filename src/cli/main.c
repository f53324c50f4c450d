/* The `cinder` program: dispatches to a subcommand from one table.
 *
 *     cinder explain 3            describe an error code
 *     cinder info                 version, backends, build configuration */
#include <stdio.h>
#include <string.h>

#include "cinder/version.h"
#include "cli/cli.h"

typedef struct cli_command {
    const char *name;
    const char *args;    /* argument synopsis for the usage line */
    const char *summary; /* one line for the command list */
    int (*run)(int argc, char **argv);
} cli_command;

/* One row per subcommand. */
static const cli_command commands[] = {
    {"explain", "<code | name | slug | message text> | --json [query] | --list",
     "describe an error: what it means, how to fix it", cli_explain},
    {"info", "", "print the version, the backends and the build configuration", cli_info},
};

#define N_COMMANDS (sizeof commands / sizeof *commands)

static void print_usage(FILE *f) {
    fprintf(f, "usage: cinder <command> [arguments]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n`cinder <command> --help` shows a command's arguments; "
               "`cinder --version` the version.\n");
}

static void print_command_usage(FILE *f, const cli_command *c) {
    fprintf(f, "usage: cinder %s%s%s\n  %s\n", c->name, c->args[0] ? " " : "", c->args, c->summary);
}

static const cli_command *find_command(const char *name) {
    for (size_t i = 0; i < N_COMMANDS; i++) {
        if (strcmp(commands[i].name, name) == 0) return &commands[i];
    }
    return NULL;
}

static int is_help(const char *arg) {
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0 || strcmp(arg, "help") == 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *name = argv[1];
    if (is_help(name)) {
        const cli_command *c = argc > 2 ? find_command(argv[2]) : NULL;
        if (c)
            print_command_usage(stdout, c);
        else
            print_usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(name, "--version") == 0) {
        printf("cinder %s\n", cn_version());
        return CLI_EXIT_OK;
    }
    const cli_command *c = find_command(name);
    if (!c) {
        fprintf(stderr, "cinder: unknown command '%s'\n\n", name);
        print_usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (argc > 2 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
        print_command_usage(stdout, c);
        return CLI_EXIT_OK;
    }
    return c->run(argc - 1, argv + 1);
}
