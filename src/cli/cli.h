/* The `cinder` program: one function per subcommand, listed in the table in main.c.
 *
 * A subcommand gets argc/argv starting at its own name (argv[0] = "explain") and returns the
 * process exit status: CLI_EXIT_OK, CLI_EXIT_FAILURE when the work itself failed, or
 * CLI_EXIT_USAGE when the command line or query was not understood. To add a subcommand, write
 * src/cli/<name>.c with a `int cli_<name>(int argc, char **argv)`, declare it here and add a row
 * to the table in main.c. */
#ifndef CINDER_CLI_CLI_H
#define CINDER_CLI_CLI_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

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

/* train_gpt.c: `cinder train --model gpt [--data FILE] ...`: trains a character-level GPT on a
 * text file (cli_train hands such command lines to it). */
int cli_train_gpt(int argc, char **argv);

/* generate.c: `cinder generate --load FILE [--prompt TEXT] [--tokens N] ...`: samples text from a
 * GPT that `cinder train --model gpt --save FILE` wrote. */
int cli_generate(int argc, char **argv);

/* eval.c: `cinder eval --load FILE [--data DIR] [--device D]`: the test accuracy of a model that
 * `cinder train --save` wrote. */
int cli_eval(int argc, char **argv);

/* quantize.c: `cinder quantize --load FILE --scheme S --out FILE`: writes a checkpoint of
 * `cinder train --save` with its weights quantized (q8_block, q8_channel, q4_block), for eval. */
int cli_quantize(int argc, char **argv);

/* inspect.c: `cinder inspect FILE [--name NAME]`: each tensor of a safetensors file, its name,
 * shape, dtype and values (cn_format). */
int cli_inspect(int argc, char **argv);

/* main.c: the options text of `cinder <cmd> --help` (what the command does and each option);
 * NULL for an unknown command. */
const char *cli_command_help(const char *cmd);

/* ---- options.c: reading a subcommand's options ----------------------------------------------
 * Options are `--name value` or `--name=value`, flags `--name`. Each function prints what is
 * wrong, prefixed with "cinder <cmd>: ", on stderr. cli_option and cli_flag refuse (-1, printed
 * as an internal error) a name that `cinder <cmd> --help` does not list, so every option that a
 * parser asks about is documented: a parser tries each name in turn, so any run with an unknown
 * argument checks them all (tests/test_cli.c does, for every command). */

/* 1 when argv[*i] is the option `name` ("--epochs"), with *value set to its value and *i moved to
 * the value's argument; 0 when argv[*i] is something else; -1 (printed) when the value is
 * missing or the option is not in the help. */
int cli_option(int argc, char **argv, int *i, const char *cmd, const char *name,
               const char **value);

/* 1 when arg is the flag `name` ("--json"), 0 when it is something else; -1 (printed) when the
 * flag is not in the help. */
int cli_flag(const char *arg, const char *cmd, const char *name);

/* Where the options that every model of `cinder train` reads alike go (train.c, train_gpt.c). */
typedef struct cli_run_fields {
    const char **device, **data, **save, **plot, **log, **resume;
    int *balanced;       /* --checkpointing balanced */
    int64_t *stop_after; /* --stop-after-steps */
} cli_run_fields;

/* Reads argv[*i] when it is one of --device, --threads (which sets the CPU pool),
 * --checkpointing, --data, --save, --plot, --log, --resume or --stop-after-steps, into the
 * fields f points to. Returns what cli_option returns (0: none of them); *bad is set to 1 when
 * the value is wrong (printed). */
int cli_run_option(int argc, char **argv, int *i, const char *cmd, const cli_run_fields *f,
                   int *bad);

/* Parses a whole decimal integer in [min, max]; 0, or -1 (printed). */
int cli_parse_int(const char *cmd, const char *name, const char *text, int64_t min, int64_t max,
                  int64_t *out);

/* Parses a whole finite real number in [min, max]; 0, or -1 (printed). */
int cli_parse_real(const char *cmd, const char *name, const char *text, double min, double max,
                   double *out);

/* Parses a device name ("cpu", "cuda", "cuda:1") with cn_device_parse, and checks that it is
 * available; 0, or -1 (printed with cinder's message, e.g. CUDA not compiled in or no GPU).
 * text NULL (no --device given): $CINDER_DEVICE when set and not empty, else "cpu". */
int cli_parse_device(const char *cmd, const char *text, cn_device *out);

/* Parses --threads N (1..CN_CPU_MAX_THREADS) and sets the CPU pool's size (cn_cpu_set_threads),
 * which must happen before the command's first CPU op; 0, or -1 (printed). */
int cli_parse_threads(const char *cmd, const char *text);

/* ---- warm.c: the CPU GEMM's one-time start beside the data's loading -------------------------- */

typedef struct cli_warm {
    pthread_t thread;
    int started;
} cli_warm;

/* On the CPU (device's backend), starts a thread that makes one small cn_cpu_gemm, so that oneDNN
 * generates its kernels while the command loads its data (on another device, or with no thread to
 * be had, nothing: the first product then pays, as before). Call after the pool's size is set
 * (cli_parse_threads) and pair with cli_warm_end before the first training step. */
void cli_warm_begin(cn_device device, cli_warm *w);
/* Joins the thread, if one was started. */
void cli_warm_end(cli_warm *w);

/* ---- json.c: writing JSON ------------------------------------------------------------------- */

/* s as a JSON string, quoted and escaped (", \, control characters); NULL as null. */
void cli_json_string(FILE *f, const char *s);

/* v as a JSON number with `digits` significant digits (%.*g); null when v is not finite (JSON
 * has no NaN or infinity). */
void cli_json_number(FILE *f, double v, int digits);

#endif
