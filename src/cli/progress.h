/* Progress of a training epoch, on stdout.
 *
 * On a terminal: one bar redrawn in place with '\r' (at most ten times a second, and at the last
 * batch), cleared at the end of the epoch:
 *     epoch 1/5 [=========>          ] 212/469  loss 0.6123  41020 samples/s  ETA 0:03
 * where loss is the running mean over the epoch so far.
 *
 * Elsewhere (a pipe, a file, a test): a plain line each time another tenth of the epoch is done:
 *     epoch 1/5 [ 50%] batch 235/469: loss 0.5012, 40873 samples/s, ETA 3 s
 * where loss is the mean over the batches since the previous line, so that the lines show the
 * loss falling within the epoch. */
#ifndef CINDER_CLI_PROGRESS_H
#define CINDER_CLI_PROGRESS_H

#include <stdint.h>

typedef struct cli_progress {
    int tty;             /* draw a bar (1) or print plain lines (0) */
    int epoch, epochs;   /* 1-based */
    int64_t total, done; /* batches in the epoch; batches done */
    int64_t samples;     /* samples done */
    double loss_sum;     /* over the epoch */
    double chunk_sum;    /* over the batches since the last plain line */
    int64_t chunk_n;
    double start, drawn; /* cli_now() at the start and at the last redraw */
} cli_progress;

/* Seconds on a monotonic clock. */
double cli_now(void);

/* Starts epoch `epoch` of `epochs` with `total` batches; tty: whether stdout is a terminal. */
void cli_progress_begin(cli_progress *p, int epoch, int epochs, int64_t total, int tty);

/* Counts one batch of `samples` samples whose loss was `loss`, and draws or prints. */
void cli_progress_step(cli_progress *p, double loss, int64_t samples);

/* Clears the bar (on a terminal) so that the epoch's summary line takes its place. */
void cli_progress_end(cli_progress *p);

/* The epoch's mean loss so far. */
double cli_progress_mean_loss(const cli_progress *p);

#endif
