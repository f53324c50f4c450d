/* Sequential (torch.nn.Sequential): children "0", "1", ... applied in order. */
#include <stdio.h>

#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* Exact rewrites that save passes over the largest activations (the values and gradients are
 * the children's, one after another; only a zero's sign may differ, relu keeping -0):
 * - a ReLU followed by a MaxPool2d runs as the pool, then the relu: max and relu commute (relu
 *   is monotone, and the max pool ignores padding), and so do their gradients (both send g to
 *   the window's first maximum when it is positive, nothing otherwise); the relu and its
 *   backward then touch the pooled tensor, a quarter of the size for 2x2 windows;
 * - a Conv2d followed by a MaxPool2d of k x k windows at stride k, unpadded (with a ReLU
 *   between them, moved after the pool as above), runs as one op, cn_conv2d_max_pool2d: each
 *   image's convolution output is pooled while in cache and never written out, and the
 *   backward goes through the pool by the choices kept (a byte per window);
 * - a Conv2d followed by a ReLU (and no MaxPool2d) runs as cn_conv2d_relu: the relu is applied
 *   in the convolution's epilogue. */
static cn_tensor *sequential_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *h = x; /* each child's output is owned by this forward's scope */
    int n = cn_module_child_count(m);
    for (int i = 0; i < n && h; i++) {
        cn_module *c = cn_module_child(m, i);
        cn_module *next = i + 1 < n ? cn_module_child(m, i + 1) : NULL;
        cn_module *after = i + 2 < n ? cn_module_child(m, i + 2) : NULL;
        int relu_next = next && nn_is_relu(next);
        int64_t k = !next ? 0 : relu_next ? (after ? nn_max_pool2d_tiles(after) : 0)
                                          : nn_max_pool2d_tiles(next);
        if (nn_is_conv2d(c) && k) { /* conv, [relu,] pool */
            h = nn_conv2d_max_pool2d_forward(c, h, k);
            if (h && relu_next) h = cn_module_forward(next, h);
            i += relu_next ? 2 : 1;
        } else if (nn_is_relu(c) && next && nn_is_max_pool2d(next)) {
            h = cn_module_forward(next, h);
            if (h) h = cn_module_forward(c, h);
            i++;
        } else if (nn_is_conv2d(c) && relu_next && !(after && nn_is_max_pool2d(after))) {
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
