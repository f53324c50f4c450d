/* The `cinder` program: one function per subcommand, listed in the table in main.c.
 *
 * A subcommand gets argc/argv starting at its own name (argv[0] = "explain") and returns the
 * process exit status: CLI_EXIT_OK, CLI_EXIT_FAILURE when the work itself failed, or
 * CLI_EXIT_USAGE when the command line or query was not understood. To add a subcommand, write
 * src/cli/<name>.c with a `int cli_<name>(int argc, char **argv)`, declare it here and add a row
 * to the table in main.c. */
#ifndef CINDER_CLI_CLI_H
#define CINDER_CLI_CLI_H

#include <stdint.h>

#include "cinder/device.h"

#define CLI_EXIT_OK      0
#define CLI_EXIT_FAILURE 1
#define CLI_EXIT_USAGE   2

/* explain.c: `cinder explain <code | name | slug | message>`, `--json [query]`, `--list`. */
int cli_explain(int argc, char **argv);

/* info.c: `cinder info`: version, backends, build configuration. */
int cli_info(int argc, char **argv);

/* train.c: `cinder train [--model mlp|cnn] [--epochs N] ...`: trains a model on Fashion-MNIST,
 * printing progress and each epoch's test accuracy; optionally saves it and plots the curves. */
int cli_train(int argc, char **argv);

/* eval.c: `cinder eval --load FILE [--data DIR] [--device D]`: the test accuracy of a model that
 * `cinder train --save` wrote. */
int cli_eval(int argc, char **argv);

/* inspect.c: `cinder inspect FILE [--name NAME]`: each tensor of a safetensors file, its name,
 * shape, dtype and values (cn_format). */
int cli_inspect(int argc, char **argv);

/* ---- options.c: reading a subcommand's options ----------------------------------------------
 * Options are `--name value` or `--name=value`. Each function prints what is wrong, prefixed with
 * "cinder <cmd>: ", on stderr. */

/* 1 when argv[*i] is the option `name` ("--epochs"), with *value set to its value and *i moved to
 * the value's argument; 0 when argv[*i] is something else; -1 (printed) when the value is
 * missing. */
int cli_option(int argc, char **argv, int *i, const char *cmd, const char *name,
               const char **value);

/* Parses a whole decimal integer in [min, max]; 0, or -1 (printed). */
int cli_parse_int(const char *cmd, const char *name, const char *text, int64_t min, int64_t max,
                  int64_t *out);

/* Parses a whole finite real number in [min, max]; 0, or -1 (printed). */
int cli_parse_real(const char *cmd, const char *name, const char *text, double min, double max,
                   double *out);

/* Parses a device name ("cpu", "cuda", "cuda:1") with cn_device_parse, and checks that it is
 * available; 0, or -1 (printed with cinder's message, e.g. CUDA not compiled in or no GPU). */
int cli_parse_device(const char *cmd, const char *text, cn_device *out);

#endif
