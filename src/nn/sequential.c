/* Sequential (torch.nn.Sequential): children "0", "1", ... applied in order. */
#include <stdio.h>

#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* Two exact rewrites that save passes over the largest activations:
 * - a ReLU child followed by a MaxPool2d child runs as the pool, then the relu: max and relu
 *   commute (relu is monotone, and the max pool ignores padding), and so do their gradients
 *   (both send g to the window's first maximum when it is positive, nothing otherwise), while
 *   the relu and its backward now touch the pooled tensor, a quarter of the size for 2x2
 *   windows, and the pool's backward hands the layer before a gradient already masked (only a
 *   zero's sign may differ: relu keeps -0);
 * - a Conv2d child followed by a ReLU child (not itself followed by a MaxPool2d) runs as one
 *   fused op (cn_conv2d_relu: the same values and gradients, without writing the convolution's
 *   output and reading it back for the relu). */
static cn_tensor *sequential_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *h = x; /* each child's output is owned by this forward's scope */
    int n = cn_module_child_count(m);
    for (int i = 0; i < n && h; i++) {
        cn_module *c = cn_module_child(m, i);
        cn_module *next = i + 1 < n ? cn_module_child(m, i + 1) : NULL;
        cn_module *after = i + 2 < n ? cn_module_child(m, i + 2) : NULL;
        if (nn_is_relu(c) && next && nn_is_max_pool2d(next)) {
            h = cn_module_forward(next, h);
            if (h) h = cn_module_forward(c, h);
            i++;
        } else if (nn_is_conv2d(c) && next && nn_is_relu(next) &&
                   !(after && nn_is_max_pool2d(after))) {
            h = nn_conv2d_relu_forward(c, h);
            i++;
        } else {
            h = cn_module_forward(c, h);
        }
    }
    return h; /* x itself for no children: the wrapper makes it a view */
}

static const cn_module_vtable sequential_vtable = {"Sequential", sequential_forward, NULL, NULL};

cn_module *cn_sequential_new(cn_module *const *modules, int n) {
    const char *op = "sequential_new";
    int ok = 1;
    if (n < 0 || (n > 0 && !modules)) {
        if (n < 0)
            cn_set_error(CN_ERR_INVALID_ARG, op, "n = %d; give 0 or more modules", n);
        else
            cn__null_arg(op, "modules");
        return NULL;
    }
    for (int i = 0; i < n && ok; i++)
        if (!modules[i]) {
            cn__null_arg(op, "modules[i]"); /* keeps the failed constructor's error */
            ok = 0;
        }
    cn_module *m = ok ? cn_module_new(&sequential_vtable, NULL) : NULL;
    for (int i = 0; i < n; i++) {
        if (!m) { /* takes ownership also on failure */
            cn_module_free(modules[i]);
            continue;
        }
        char name[16];
        snprintf(name, sizeof name, "%d", i);
        if (cn_module_add_child(m, name, modules[i]) != CN_OK) { /* which freed modules[i] */
            cn_module_free(m);
            m = NULL;
        }
    }
    return m;
}
