/* `cinder eval --load FILE [--data DIR] [--device D] [--threads N] [--test-limit N]`: rebuilds
 * the model that `cinder train --save FILE` wrote, loads its parameters and prints its accuracy
 * on the Fashion-MNIST test set, normalised as in training:
 *
 *     test accuracy 0.8512 (8512 correct)
 *
 * (the count makes the figure exact, for comparing with another framework's). The checkpoint
 * holds only parameters; the model (mlp or cnn) is recognised from them (models.h:
 * cli_model_detect). Its keys are those of the equivalent PyTorch nn.Sequential (models.h), so a
 * checkpoint that PyTorch saved with safetensors loads too (docs/pytorch.md). The model runs on a
 * concrete device, in evaluation mode, so the numbers are those training printed after its last
 * epoch. A checkpoint that `cinder quantize` wrote runs with its quantized weights (models.h:
 * cli_model_load_quantized), and the first line names their scheme:
 *
 *     mlp (weights q4_block) from q.safetensors: 10000 test images */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cinder/cinder.h"
#include "cli/cli.h"
#include "cli/models.h"

#define CMD        "eval"
#define EVAL_BATCH 500

typedef struct eval_options {
    const char *load, *data, *device;
    int64_t test_limit; /* 0: every image */
} eval_options;

static int parse_options(int argc, char **argv, eval_options *o) {
    *o = (eval_options){.device = NULL}; /* cli_parse_device: $CINDER_DEVICE, else cpu */
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r, bad = 0;
        if ((r = cli_option(argc, argv, &i, CMD, "--load", &v)) != 0)
            o->load = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--data", &v)) != 0)
            o->data = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--device", &v)) != 0)
            o->device = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--threads", &v)) != 0)
            bad = r > 0 && cli_parse_threads(CMD, v); /* before any CPU op */
        else if ((r = cli_option(argc, argv, &i, CMD, "--test-limit", &v)) != 0)
            bad = r > 0 && cli_parse_int(CMD, "--test-limit", v, 1, 10000, &o->test_limit);
        else {
            fprintf(stderr, "cinder eval: unknown argument '%s' (see `cinder eval --help`)\n",
                    argv[i]);
            bad = 1;
        }
        if (r < 0 || bad) return CLI_EXIT_USAGE;
    }
    if (!o->load) {
        fprintf(stderr, "cinder eval: --load FILE is required: a checkpoint that "
                        "`cinder train --save FILE` wrote\n");
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* Builds the checkpoint's model on `device` with its parameters; CN_OK or the error status. */
static cn_status load_model(const char *path, cn_device device, cli_model *m) {
    cn_safetensors *h = NULL;
    cli_model_kind kind;
    cn_generator unused = cn_generator_new(0); /* initial values, all overwritten */
    cn_status st = cn_safetensors_load(path, device, &h);
    if (st == CN_OK) st = cli_model_detect(h, path, &kind);
    if (st == CN_OK && cli_checkpoint_quantized(h)) {
        st = cli_model_load_quantized(h, path, kind, m);
    } else {
        if (st == CN_OK) st = cli_model_new(kind, device, &unused, m);
        if (st == CN_OK) st = cli_model_load(m, h, path);
    }
    cn_safetensors_free(h);
    return st;
}

int cli_eval(int argc, char **argv) {
    eval_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_EXIT_OK) return rc;
    cn_device device;
    if (cli_parse_device(CMD, o.device, &device) != 0) return CLI_EXIT_FAILURE;

    cli_warm warm;
    cli_warm_begin(device, &warm); /* oneDNN's kernels generated while the files load */
    cli_model m = {0};
    if (load_model(o.load, device, &m) != CN_OK) {
        cli_warm_end(&warm);
        fprintf(stderr, "cinder eval: cannot load the model: %s\n", cn_last_error());
        cli_model_free(&m);
        return CLI_EXIT_FAILURE;
    }
    cli_data d;
    cn_status loaded = cli_data_load(o.data, device, 0, 0, o.test_limit, &d);
    cli_warm_end(&warm);
    if (loaded != CN_OK) {
        fprintf(stderr, "cinder eval: cannot load Fashion-MNIST: %s\n", cn_last_error());
        cli_model_free(&m);
        return CLI_EXIT_FAILURE;
    }
    double accuracy = cli_model_accuracy(&m, d.test_x, d.test_y, EVAL_BATCH);
    if (accuracy < 0) {
        fprintf(stderr, "cinder eval: evaluation failed: %s\n", cn_last_error());
        rc = CLI_EXIT_FAILURE;
    } else {
        const int64_t images = cn_shape(d.test_x)[0];
        char weights[64] = "";
        if (m.weights != CN_F32)
            snprintf(weights, sizeof weights, " (weights %s)",
                     m.weights == CN_DTYPE_COUNT ? "quantized, schemes mixed"
                                                 : cn_dtype_name(m.weights));
        printf("%s%s from %s: %lld test images\ntest accuracy %.4f (%lld correct)\n",
               cli_model_name(m.kind), weights, o.load, (long long)images, accuracy,
               (long long)llround(accuracy * (double)images));
        rc = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
    }
    cli_data_free(&d);
    cli_model_free(&m);
    return rc;
}
