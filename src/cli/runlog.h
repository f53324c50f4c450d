/* `cinder train --log FILE`: the run as JSON Lines, one object per line, each line flushed as it
 * is written (so `tail -f FILE | jq .` follows the run, and a run that stops keeps every line
 * before it). Three kinds of line, told apart by "event":
 *
 *   {"event":"start","model":"mlp","device":"cpu","threads":4,"optimizer":"sgd","lr":0.1,
 *    "batch":128,"epochs":5,"steps_per_epoch":469,"train_images":60000,"test_images":10000,
 *    "parameters":235146,"parameter_bytes":940584,"seed":42}
 *   {"event":"step","epoch":1,"step":10,"global_step":10,"loss":0.51,"lr":0.1,
 *    "samples_per_s":71000.0,"elapsed_s":0.42}
 *   {"event":"epoch","epoch":1,"train_loss":0.5123,"test_accuracy":0.8512,"lr":0.0905,
 *    "epoch_time_s":4.21,"elapsed_s":4.21}
 *
 * A step line for every optimisation step: step counts from 1 in each epoch, global_step over the
 * run; loss is that batch's; lr the learning rate the step used; samples_per_s the rate over the
 * epoch so far. An epoch line after each epoch's evaluation: train_loss the mean over its steps
 * (the figure the epoch line on stdout prints), lr the last step's, epoch_time_s training plus
 * evaluation. elapsed_s counts from the start of training. Numbers are JSON numbers; one that is
 * not finite (a diverged loss) is null. pandas: pd.read_json(FILE, lines=True). */
#ifndef CINDER_CLI_RUNLOG_H
#define CINDER_CLI_RUNLOG_H

#include <stdint.h>
#include <stdio.h>

typedef struct cli_log {
    FILE *f;          /* NULL: no log (every call does nothing), or writing stopped */
    const char *path; /* borrowed */
    int failed;       /* a write failed (printed); the lines after it were not written */
} cli_log;

/* What the start line says about the run. */
typedef struct cli_log_run {
    const char *model, *device, *optimizer;
    int threads;
    double lr;
    int64_t batch, epochs, steps_per_epoch, train_images, test_images;
    int64_t parameters, parameter_bytes, seed;
    /* the keys of train_images and test_images: NULL for those; the gpt's "train_tokens" and
     * "val_tokens" */
    const char *train_key, *test_key;
} cli_log_run;

/* Opens `path` for writing, replacing what it held, or appending to it (a resumed run continues
 * its log) (path NULL: no log). 0, or -1 after printing why on stderr ("cinder train: cannot
 * write the log ...: <reason>"). */
int cli_log_open(cli_log *l, const char *path, int append);

void cli_log_start(cli_log *l, const cli_log_run *run);
void cli_log_step(cli_log *l, int epoch, int64_t step, int64_t global_step, double loss, double lr,
                  double samples_per_s, double elapsed_s);
/* `metric` is the key of `value`: "test_accuracy" for mlp and cnn, "val_loss" for the gpt. */
void cli_log_epoch(cli_log *l, int epoch, double train_loss, const char *metric, double value,
                   double lr, double epoch_time_s, double elapsed_s);

/* Closes the file; 0, or -1 when a write (or the close) failed, printed when it happened. */
int cli_log_close(cli_log *l);

#endif
