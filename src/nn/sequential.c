/* Sequential (torch.nn.Sequential): children "0", "1", ... applied in order. */
#include <stdio.h>

#include "core/error_internal.h"
#include "nn/nn_internal.h"

/* A Conv2d child followed by a ReLU child runs as one fused op (cn_conv2d_relu: the same values
 * and gradients, without writing the convolution's output and reading it back for the relu). */
static cn_tensor *sequential_forward(cn_module *m, cn_tensor *x) {
    cn_tensor *h = x; /* each child's output is owned by this forward's scope */
    int n = cn_module_child_count(m);
    for (int i = 0; i < n && h; i++) {
        cn_module *c = cn_module_child(m, i);
        if (i + 1 < n && nn_is_conv2d(c) && nn_is_relu(cn_module_child(m, i + 1))) {
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
