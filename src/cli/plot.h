/* Training curves as a self-contained SVG file (`cinder train --plot FILE.svg`): two panels over
 * the same x axis (training progress in epochs):
 *   top     the training loss: the mean over every few batches (a thin line) and each epoch's
 *           mean (dots joined by a line);
 *   bottom  the test accuracy after each epoch (the gpt: its validation loss) (dots joined by a
 *           line, values written beside).
 * Axes with ticks, axis labels, a legend and a title; no scripts, fonts or files outside it, so
 * any browser shows it. */
#ifndef CINDER_CLI_PLOT_H
#define CINDER_CLI_PLOT_H

#include <stdint.h>

typedef struct cli_curves {
    const char *title;         /* e.g. "cinder train: mlp, sgd lr 0.1, batch 128" */
    const float *batch_loss;   /* every step's loss, in order */
    int64_t n_batches;         /* entries in batch_loss */
    int64_t batches_per_epoch; /* to place batch i at epoch (i + 1) / batches_per_epoch */
    const double *epoch_loss;  /* each epoch's mean training loss */
    const double *accuracy;    /* each epoch's test accuracy, in [0, 1] */
    int n_epochs;              /* entries in epoch_loss and accuracy */
    /* what `accuracy` holds: NULL for the test accuracy (in [0, 1]); otherwise its name (the
     * gpt's "validation loss"), any finite values */
    const char *metric;
} cli_curves;

/* Whether `cli_plot_write` can write the format that `path`'s extension names: 1 for ".svg"
 * (any case), the only format; 0 for anything else (".png", ".pdf", no extension), for which
 * CLI_PLOT_FORMATS says what to use instead. */
int cli_plot_supported(const char *path);

#define CLI_PLOT_FORMATS                                                                           \
    "SVG only: give a file name ending in .svg (convert it with, e.g., "                           \
    "`rsvg-convert -o curves.png curves.svg`)"

/* Writes the plot to `path` as SVG. 0, or -1 with errno set when the file cannot be written. */
int cli_plot_write(const char *path, const cli_curves *c);

#endif
