/* `cinder quantize --load FILE --scheme q8_block|q8_channel|q4_block --out FILE`: writes the
 * checkpoint of `cinder train --save` (mlp or cnn) with its weights quantized, for `cinder eval
 * --load` (and cn_safetensors_get) to run them as they are:
 *
 *     mlp from mlp.safetensors: weights quantized to q4_block
 *       0.weight  [256, 784] f32    -> [256, 800] q4_block    802816 -> 115200 bytes
 *       0.bias    [256] f32            kept                     1024 ->   1024 bytes
 *       ...
 *     3 weights quantized, 3 biases kept f32: 940584 -> 135928 bytes of tensors (6.92x smaller)
 *     wrote q.safetensors: 136800 bytes; mlp.safetensors: 941056 bytes (6.88x smaller)
 *
 * Every weight is quantized, the convs' too (as the [out, C * kh * kw] matrix that their im2col
 * multiplies by), so that the file shrinks by the scheme's whole ratio: a cnn whose convs stayed
 * f32 would be 3.4x (q8) and 5.6x (q4) smaller instead of 3.8x and 7.1x. The layout of the
 * file is in models.h ("quantized checkpoints"). The checkpoint is read as `cinder eval` reads
 * it (cli_model_load: PyTorch's and earlier cinder layouts too), so its shapes are checked
 * before anything is written; the output is written atomically (cn_safetensors_save). */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cinder/cinder.h"
#include "cli/cli.h"
#include "cli/models.h"

#define CMD "quantize"

static const struct {
    const char *name;
    cn_dtype scheme;
} schemes[] = {{"q8_block", CN_Q8_BLOCK}, {"q8_channel", CN_Q8_CHANNEL}, {"q4_block", CN_Q4_BLOCK}};

typedef struct quantize_options {
    const char *load, *out, *scheme_name;
    cn_dtype scheme;
} quantize_options;

static int parse_options(int argc, char **argv, quantize_options *o) {
    *o = (quantize_options){0};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r;
        if ((r = cli_option(argc, argv, &i, CMD, "--load", &v)) != 0)
            o->load = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--scheme", &v)) != 0)
            o->scheme_name = v;
        else if ((r = cli_option(argc, argv, &i, CMD, "--out", &v)) != 0)
            o->out = v;
        else {
            fprintf(stderr,
                    "cinder quantize: unknown argument '%s' (see `cinder quantize --help`)\n",
                    argv[i]);
            return CLI_EXIT_USAGE;
        }
        if (r < 0) return CLI_EXIT_USAGE;
    }
    const char *missing = !o->load          ? "--load FILE is required: a checkpoint that "
                                              "`cinder train --save FILE` wrote"
                          : !o->scheme_name ? "--scheme is required: q8_block, q8_channel or "
                                              "q4_block"
                          : !o->out         ? "--out FILE is required: where to write the "
                                              "quantized checkpoint"
                                            : NULL;
    if (missing) {
        fprintf(stderr, "cinder quantize: %s\n", missing);
        return CLI_EXIT_USAGE;
    }
    size_t k = 0;
    while (k < sizeof schemes / sizeof *schemes && strcmp(o->scheme_name, schemes[k].name) != 0)
        k++;
    if (k == sizeof schemes / sizeof *schemes) {
        fprintf(stderr,
                "cinder quantize: unknown scheme '%s' for --scheme: q8_block, q8_channel or "
                "q4_block\n",
                o->scheme_name);
        return CLI_EXIT_USAGE;
    }
    o->scheme = schemes[k].scheme;
    struct stat in, out;
    if (stat(o->load, &in) == 0 && stat(o->out, &out) == 0 && in.st_dev == out.st_dev &&
        in.st_ino == out.st_ino) {
        fprintf(stderr,
                "cinder quantize: --out '%s' is the --load file: writing over it would lose the "
                "f32 checkpoint; give another --out\n",
                o->out);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

/* The size of the file at `path`, or -1. */
static long long file_size(const char *path) {
    struct stat s;
    return stat(path, &s) == 0 ? (long long)s.st_size : -1;
}

/* The bytes t takes in a file: its values (and scales, when quantized); -1 with the error set. */
static long long tensor_bytes(cn_tensor *t) {
    if (cn_kind_of(t) != CN_KIND_QUANTIZED)
        return (long long)cn_numel(t) * (long long)cn_dtype_size(cn_dtype_of(t));
    cn_tensor *values = NULL, *scales = NULL;
    if (cn_quant_parts(t, &values, &scales) != CN_OK) return -1;
    long long bytes = (long long)cn_numel(values) +
                      (long long)cn_numel(scales) * (long long)cn_dtype_size(cn_dtype_of(scales));
    cn_release(values);
    cn_release(scales);
    return bytes;
}

/* "[256, 784] f32" into buf */
static const char *describe(const cn_tensor *t, char *buf, size_t size) {
    char shape[80];
    snprintf(buf, size, "%s %s", cli_shape_str(t, shape, sizeof shape),
             cn_dtype_name(cn_dtype_of(t)));
    return buf;
}

/* Reads the f32 model at o->load into *m (on the CPU); CN_OK, or the error printed. */
static int load_f32(const quantize_options *o, cli_model *m) {
    cn_safetensors *h = NULL;
    cli_model_kind kind;
    cn_generator unused = cn_generator_new(0); /* initial values, all overwritten */
    cn_status st = cn_safetensors_load(o->load, cn_cpu(), &h);
    const char *model = st == CN_OK ? cn_safetensors_metadata(h, "model") : NULL;
    if (st == CN_OK && cli_checkpoint_quantized(h)) {
        const char *was = cn_safetensors_metadata(h, "cinder.quantize");
        fprintf(stderr,
                "cinder quantize: '%s' is already quantized%s%s%s; give the f32 checkpoint that "
                "`cinder train --save` wrote\n",
                o->load, was ? " (" : "", was ? was : "", was ? ", by `cinder quantize`)" : "");
        cn_safetensors_free(h);
        return CLI_EXIT_FAILURE;
    }
    if (st == CN_OK && model && strcmp(model, "gpt") == 0) {
        fprintf(stderr,
                "cinder quantize: '%s' holds a gpt (`cinder train --model gpt`); quantize takes "
                "the mlp and cnn checkpoints of `cinder train --save`\n",
                o->load);
        cn_safetensors_free(h);
        return CLI_EXIT_FAILURE;
    }
    if (st == CN_OK) st = cli_model_detect(h, o->load, &kind);
    if (st == CN_OK) st = cli_model_new(kind, cn_cpu(), &unused, m);
    if (st == CN_OK) st = cli_model_load(m, h, o->load);
    cn_safetensors_free(h);
    if (st != CN_OK) {
        fprintf(stderr, "cinder quantize: cannot load the model: %s\n", cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

/* Quantizes the weights among params into out[] (names[] their names, in params' order), printing
 * each tensor's line; sums their f32 and written bytes. CLI_EXIT_OK or the error printed. */
static int quantize_params(const quantize_options *o, const cn_param *params, int n,
                           const char **names, cn_tensor **out, long long *before, long long *after,
                           int *nq) {
    for (int i = 0; i < n; i++) {
        cn_tensor *t = params[i].tensor;
        const char *dot = strrchr(params[i].name, '.');
        int weight = dot && strcmp(dot, ".weight") == 0;
        names[i] = params[i].name;
        out[i] = weight ? cli_quantize_weight(t, o->scheme) : cn_retain(t);
        long long f32 = (long long)cn_numel(t) * 4, bytes = out[i] ? tensor_bytes(out[i]) : -1;
        if (bytes < 0) {
            fprintf(stderr, "cinder quantize: cannot quantize '%s': %s\n", params[i].name,
                    cn_last_error());
            return CLI_EXIT_FAILURE;
        }
        char from[96], to[96];
        if (weight)
            printf("  %-9s %-17s -> %-21s %7lld -> %6lld bytes\n", params[i].name,
                   describe(t, from, sizeof from), describe(out[i], to, sizeof to), f32, bytes);
        else
            printf("  %-9s %-17s    %-21s %7lld -> %6lld bytes\n", params[i].name,
                   describe(t, from, sizeof from), "kept", f32, bytes);
        *before += f32;
        *after += bytes;
        *nq += weight;
    }
    return CLI_EXIT_OK;
}

int cli_quantize(int argc, char **argv) {
    quantize_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_EXIT_OK) return rc;
    cli_model m = {0};
    rc = load_f32(&o, &m);
    int n = 0;
    const cn_param *params = rc == CLI_EXIT_OK ? cn_module_params(m.net, &n) : NULL;
    if (rc == CLI_EXIT_OK && !params) {
        fprintf(stderr, "cinder quantize: %s\n", cn_last_error());
        rc = CLI_EXIT_FAILURE;
    }
    const char **names = params ? calloc((size_t)n, sizeof *names) : NULL;
    cn_tensor **out = params ? calloc((size_t)n, sizeof *out) : NULL;
    if (rc == CLI_EXIT_OK && (!names || !out)) {
        fprintf(stderr, "cinder quantize: no memory for %d tensors\n", n);
        rc = CLI_EXIT_FAILURE;
    }
    long long before = 0, after = 0;
    int nq = 0;
    if (rc == CLI_EXIT_OK) {
        printf("%s from %s: weights quantized to %s\n", cli_model_name(m.kind), o.load,
               o.scheme_name);
        rc = quantize_params(&o, params, n, names, out, &before, &after, &nq);
    }
    if (rc == CLI_EXIT_OK) {
        const char *keys[2] = {"model", "cinder.quantize"};
        const char *values[2] = {cli_model_name(m.kind), o.scheme_name};
        if (cn_safetensors_save_metadata(o.out, names, out, n, keys, values, 2) != CN_OK) {
            fprintf(stderr, "cinder quantize: cannot write the quantized model: %s\n",
                    cn_last_error());
            rc = CLI_EXIT_FAILURE;
        }
    }
    if (rc == CLI_EXIT_OK) {
        long long in_bytes = file_size(o.load), out_bytes = file_size(o.out);
        printf("%d weights quantized, %d biases kept f32: %lld -> %lld bytes of tensors (%.2fx "
               "smaller)\n",
               nq, n - nq, before, after, (double)before / (double)after);
        printf("wrote %s: %lld bytes; %s: %lld bytes (%.2fx smaller)\n", o.out, out_bytes, o.load,
               in_bytes, (double)in_bytes / (double)out_bytes);
        rc = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
    }
    for (int i = 0; out && i < n; i++)
        cn_release(out[i]);
    free(out);
    free(names);
    cli_model_free(&m);
    return rc;
}
