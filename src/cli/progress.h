/* Progress of a training epoch, on stderr (stdout keeps the results: the run, the model, the
 * epoch lines).
 *
 * On a terminal (stderr is one): one line redrawn in place with '\r' (at most ten times a second,
 * and at the last batch), sized to the terminal's width (TIOCGWINSZ, else $COLUMNS, else 80
 * columns, asked at every redraw so that a resize is followed), ended with a newline when the
 * epoch ends, so the last state of each epoch stays on the screen:
 *     epoch 1/5 [=========>          ] 212/469  loss 0.6123  41020 samples/s  ETA 0:03
 * where loss is the running mean over the epoch so far. The line never reaches the last column
 * (a terminal would wrap it and every redraw would add a line): narrower terminals get a shorter
 * bar, then no samples/s, then no bar, then the line cut at the width.
 *
 * Elsewhere (a pipe, a file, a test): a plain line each time another tenth of the epoch is done:
 *     epoch 1/5 [ 50%] batch 235/469: loss 0.5012, 40873 samples/s, ETA 3 s
 * where loss is the mean over the batches since the previous line, so that the lines show the
 * loss falling within the epoch. */
#ifndef CINDER_CLI_PROGRESS_H
#define CINDER_CLI_PROGRESS_H

#include <stdint.h>

typedef struct cli_progress {
    int tty;             /* redraw one line (1) or print plain lines (0) */
    int epoch, epochs;   /* 1-based */
    int64_t total, done; /* batches in the epoch; batches done */
    int64_t samples;     /* samples done */
    double loss_sum;     /* over the epoch */
    double chunk_sum;    /* over the batches since the last plain line */
    int64_t chunk_n;
    double start, drawn; /* cli_now() at the start and at the last redraw */
    int shown;           /* the line has been drawn at least once (it needs its newline) */
    int quiet;           /* counts but shows nothing (the ranks other than 0 of --ddp) */
} cli_progress;

/* Seconds on a monotonic clock. */
double cli_now(void);

/* Whether progress goes to a terminal (stderr is one): the `tty` of cli_progress_begin. */
int cli_progress_is_terminal(void);

/* The width in columns of the terminal on stderr: TIOCGWINSZ, else $COLUMNS (a whole number
 * from 1 to 10000), else 80. */
int cli_progress_width(void);

/* Starts epoch `epoch` of `epochs` with `total` batches; tty: cli_progress_is_terminal(). */
void cli_progress_begin(cli_progress *p, int epoch, int epochs, int64_t total, int tty);

/* Counts one batch of `samples` samples whose loss was `loss`, and draws or prints. */
void cli_progress_step(cli_progress *p, double loss, int64_t samples);

/* Ends the epoch's line (on a terminal, with a newline, when it was drawn), so that what is
 * printed next starts on a line of its own. */
void cli_progress_end(cli_progress *p);

/* The epoch's mean loss so far. */
double cli_progress_mean_loss(const cli_progress *p);

#endif
