/* Interrupting and resuming `cinder train` (train.c).
 *
 * Interrupts: the first SIGINT or SIGTERM only records the signal (and says on stderr that the
 * run will stop after this step); the training loop looks at it between steps, writes a
 * resumable checkpoint and exits with 128 + the signal's number (130 for SIGINT, 143 for
 * SIGTERM). A second signal exits at once with 128 + its number, saving nothing; a checkpoint
 * being written then is left as it was (its temporary file is removed).
 *
 * The checkpoint is a training state (nn.h: cn_train_state_save): the model's parameters under
 * their names (so `cinder eval --load` reads it), the optimizer's state under "optimizer.", the
 * loss history as the tensors "history.batch_loss" (f32, one per step so far),
 * "history.epoch_loss" and "history.accuracy" (f64, one per finished epoch), and the metadata
 * that train.c writes: the run's settings and its position. */
#ifndef CINDER_CLI_RESUME_H
#define CINDER_CLI_RESUME_H

#include <stdint.h>
#include <stdio.h>

#include "cinder/cinder.h"

/* ---- interrupts ------------------------------------------------------------------------------ */

/* Installs the handlers of SIGINT and SIGTERM (the previous ones are kept for
 * cli_interrupt_uninstall). */
void cli_interrupt_install(void);
void cli_interrupt_uninstall(void);

/* The first signal received since cli_interrupt_install, or 0. */
int cli_interrupt_signal(void);

/* "SIGINT", "SIGTERM" (or "signal N"). */
const char *cli_signal_name(int sig);

/* While a checkpoint is written to `path` (cn_safetensors_save writes "<path>.tmp" and renames
 * it), a second signal removes the temporary file before it exits. NULL: no checkpoint is being
 * written. */
void cli_interrupt_guard(const char *path);

/* ---- the resume command ---------------------------------------------------------------------- */

/* Prints "cinder <cmd> <argv[1..argc) without --resume and --stop-after-steps> --resume PATH"
 * and a newline to f, each argument quoted for a POSIX shell where it needs it. */
void cli_print_resume_command(FILE *f, const char *cmd, int argc, char **argv, const char *path);

/* ---- the training state ---------------------------------------------------------------------- */

/* The loss history that a checkpoint carries, so that --plot and the epoch lines of a resumed
 * run are those of a run that never stopped. */
typedef struct cli_history_view {
    const float *batch_loss; /* one per step */
    int64_t steps;
    const double *epoch_loss, *accuracy; /* one per finished epoch */
    int64_t epochs;
    /* what `accuracy` holds, naming its tensor "history.<metric>": NULL for "accuracy" (the
     * test accuracy of mlp and cnn); the gpt's is "val_loss" */
    const char *metric;
} cli_history_view;

/* Writes the training state of net and opt with the history and the metadata keys[i]: values[i]
 * to `path` (atomically: an existing file is replaced only once the new one is complete). */
cn_status cli_state_save(const char *path, cn_module *net, cn_optimizer *opt,
                         const cli_history_view *h, const char *const *keys,
                         const char *const *values, int n_meta);

/* The metadata `key` of the checkpoint h (read from `path`) as text, or NULL after printing
 * "cinder train: cannot resume from PATH: ..." when it is absent. */
const char *cli_state_text(const cn_safetensors *h, const char *path, const char *key);

/* Loads the checkpoint of --resume at `path` into *h and checks that it holds a run's training
 * state; CLI_EXIT_OK, else CLI_EXIT_FAILURE (printed; *h may need cn_safetensors_free). */
int cli_resume_open(const char *path, cn_device inner, cn_safetensors **h);

/* A run's settings as --resume takes them from a checkpoint: setting k is saved under keys[k]
 * and set with the option --keys[k]. text(ctx, k, buf, size) gives its value in the run as
 * text, set(ctx, k, text) sets it from text (0, or -1 when the text is not one of its values);
 * setting real_k (-1: none) is a real number, compared as one. */
typedef struct cli_settings {
    const char *const *keys;
    int n;
    unsigned given; /* bit k: setting k was given on the command line */
    int real_k;
    const char *(*text)(void *ctx, int k, char *buf, size_t size);
    int (*set)(void *ctx, int k, const char *text);
    void *ctx;
} cli_settings;

/* Takes the settings of the run saved in h (from `path`): each one given on the command line
 * must agree with the saved one (else CLI_EXIT_USAGE, printed with the way out); the others are
 * set from it (CLI_EXIT_FAILURE, printed, when the file's value is not one of the setting's). */
int cli_resume_settings(const cn_safetensors *h, const char *path, const cli_settings *s);

/* The same as a whole number in [min, max]; 0, or -1 (printed). */
int cli_state_int(const cn_safetensors *h, const char *path, const char *key, int64_t min,
                  int64_t max, int64_t *out);

/* Copies the history of h into the arrays (room for `steps` losses and `epochs` epochs), checking
 * that h holds exactly that many; `metric` names the per-epoch figure as cli_history_view's does
 * (NULL: "accuracy"). 0, or -1 (printed). */
int cli_state_history(const cn_safetensors *h, const char *path, float *batch_loss, int64_t steps,
                      double *epoch_loss, double *accuracy, int64_t epochs, const char *metric);

#endif
