/* The `cinder` program: one function per subcommand, listed in the table in main.c.
 *
 * A subcommand gets argc/argv starting at its own name (argv[0] = "explain") and returns the
 * process exit status: CLI_EXIT_OK, CLI_EXIT_FAILURE when the work itself failed, or
 * CLI_EXIT_USAGE when the command line or query was not understood. To add a subcommand, write
 * src/cli/<name>.c with a `int cli_<name>(int argc, char **argv)`, declare it here and add a row
 * to the table in main.c. */
#ifndef CINDER_CLI_CLI_H
#define CINDER_CLI_CLI_H

#define CLI_EXIT_OK      0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE   2

/* explain.c: `cinder explain <code | name | slug | message>`, `--json [query]`, `--list`. */
int cli_explain(int argc, char **argv);

/* info.c: `cinder info`: version, backends, build configuration. */
int cli_info(int argc, char **argv);

#endif
