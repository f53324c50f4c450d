/* A model's summary, printed by `cinder train` before it trains (like Keras' model.summary()):
 * one line per layer (each child of the model's container, in order) with its kind, its
 * parameters by the names the checkpoint uses and their shapes, and its parameter count; then the
 * totals:
 *
 *     model mlp: 3 layers
 *        #  layer            parameters                          count
 *        0  FusedLinearReLU  0.weight [256, 784], 0.bias [256]  200960
 *        1  FusedLinearReLU  2.weight [128, 256], 2.bias [128]   32896
 *        2  Linear           4.weight [10, 128], 4.bias [10]      1290
 *       total: 235146 parameters, 940584 bytes (918.5 KiB)
 *
 * A layer without parameters (ReLU, MaxPool2d, Flatten) shows "-" and 0. */
#ifndef CINDER_CLI_SUMMARY_H
#define CINDER_CLI_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "cinder/cinder.h"

/* The parameter count and their bytes (elements times the dtype's size) of `net`; CN_OK, or the
 * error status. */
cn_status cli_summary_totals(cn_module *net, int64_t *params, int64_t *bytes);

/* Prints the summary of `net`, called `name`, to f; CN_OK, or the error status (nothing printed
 * when the parameters cannot be listed). */
cn_status cli_summary_print(FILE *f, cn_module *net, const char *name);

#endif
