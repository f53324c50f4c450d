/* The options that every model of `cinder train` reads alike (cli.h: cli_run_option), in one
 * place for train.c and train_gpt.c. */
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/plot.h"

int cli_run_option(int argc, char **argv, int *i, const char *cmd, const cli_run_fields *f,
                   int *bad) {
    const char *v = NULL;
    int r;
    if ((r = cli_option(argc, argv, i, cmd, "--device", &v)) != 0) {
        *f->device = v;
    } else if ((r = cli_option(argc, argv, i, cmd, "--threads", &v)) != 0) {
        *bad = r > 0 && cli_parse_threads(cmd, v); /* sets the pool before any CPU op */
    } else if ((r = cli_option(argc, argv, i, cmd, "--checkpointing", &v)) != 0) {
        if (r > 0 && (strcmp(v, "balanced") == 0 || strcmp(v, "none") == 0)) {
            *f->balanced = strcmp(v, "balanced") == 0;
        } else if (r > 0) {
            fprintf(stderr, "cinder %s: unknown checkpointing '%s': choose balanced or none\n", cmd,
                    v);
            *bad = 1;
        }
    } else if ((r = cli_option(argc, argv, i, cmd, "--data", &v)) != 0) {
        *f->data = v;
    } else if ((r = cli_option(argc, argv, i, cmd, "--save", &v)) != 0) {
        *f->save = v;
    } else if ((r = cli_option(argc, argv, i, cmd, "--plot", &v)) != 0) {
        *f->plot = v;
        if (r > 0 && !cli_plot_supported(v)) {
            fprintf(stderr, "cinder %s: cannot write --plot %s: the plot is " CLI_PLOT_FORMATS "\n",
                    cmd, v);
            *bad = 1;
        }
    } else if ((r = cli_option(argc, argv, i, cmd, "--log", &v)) != 0) {
        *f->log = v;
    } else if ((r = cli_option(argc, argv, i, cmd, "--resume", &v)) != 0) {
        *f->resume = v;
    } else if ((r = cli_option(argc, argv, i, cmd, "--stop-after-steps", &v)) != 0) {
        *bad = r > 0 && cli_parse_int(cmd, "--stop-after-steps", v, 1, INT64_MAX, f->stop_after);
    }
    return r;
}
