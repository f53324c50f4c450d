/* `cinder inspect FILE [--name NAME]`: what a safetensors checkpoint holds. For each tensor, in
 * the file's order, its name, shape and dtype, then its values as PyTorch's repr writes them
 * (cn_format: summarised with "..." past 1000 elements):
 *
 *     mlp.safetensors: 6 tensors
 *
 *     fc1.weight: [256, 784] f32
 *     tensor([[-0.0123,  0.0456, ...
 *
 * --name NAME shows that tensor only. Any file in the format works, not only cinder's. */
#include <stdio.h>
#include <string.h>

#include "cinder/cinder.h"
#include "cli/cli.h"

#define CMD "inspect"

/* "[256, 784] f32" */
static void print_header(const char *name, const cn_tensor *t) {
    printf("%s: [", name);
    for (int d = 0; d < cn_ndim(t); d++)
        printf("%s%lld", d ? ", " : "", (long long)cn_shape(t)[d]);
    printf("] %s\n", cn_dtype_name(cn_dtype_of(t)));
}

/* Prints one tensor; CN_OK or the error status. */
static cn_status show(const cn_safetensors *h, const char *name) {
    cn_tensor *t = cn_safetensors_get(h, name);
    if (!t) return cn_last_status();
    print_header(name, t);
    cn_status st = cn_print(t, stdout);
    cn_release(t);
    return st;
}

int cli_inspect(int argc, char **argv) {
    const char *path = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r = cli_option(argc, argv, &i, CMD, "--name", &v);
        if (r < 0) return CLI_EXIT_USAGE;
        if (r > 0) {
            only = v;
        } else if (argv[i][0] == '-' || path) {
            fprintf(stderr,
                    "cinder inspect: unexpected argument '%s' (see `cinder inspect "
                    "--help`)\n",
                    argv[i]);
            return CLI_EXIT_USAGE;
        } else {
            path = argv[i];
        }
    }
    if (!path) {
        fprintf(stderr, "cinder inspect: FILE is required: a safetensors checkpoint, such as "
                        "one `cinder train --save FILE` wrote\n");
        return CLI_EXIT_USAGE;
    }
    cn_safetensors *h = NULL;
    if (cn_safetensors_load(path, cn_cpu(), &h) != CN_OK) {
        fprintf(stderr, "cinder inspect: %s\n", cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    cn_status st = CN_OK;
    if (only) {
        st = show(h, only);
    } else {
        int n = cn_safetensors_count(h);
        printf("%s: %d tensor%s\n", path, n, n == 1 ? "" : "s");
        for (int i = 0; i < n && st == CN_OK; i++) {
            printf("\n");
            st = show(h, cn_safetensors_name(h, i));
        }
    }
    if (st != CN_OK) fprintf(stderr, "cinder inspect: %s\n", cn_last_error());
    cn_safetensors_free(h);
    return st == CN_OK ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
}
