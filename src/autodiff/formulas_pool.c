/* Backward formulas of issue 16's padding and pooling ops (pad, the adaptive average pools),
 * through the router entries of their backward kernels (dispatch/backward_ops.h); formulas.c's
 * table points here. Each returns input i's gradient. */
#include "autodiff/formula_helpers.h"
#include "dispatch/backward_ops.h"

/* pad: g summed back one padded dim at a time (the last first), each the adjoint of that dim's
 * padding: cropped, with what reflect, replicate or circular copied added to its source. */
cn_tensor *ad_grad_pad(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    int mode = (int)n->ints[0], skip = (int)n->ints[1], dims = (n->n_ints - 2) / 2;
    cn_tensor *cur = g;
    for (int j = 0; cur && j < dims; j++) {
        int d = a->ndim - 1 - skip - j;
        cur = cn__pad_backward(cur, d, n->ints[2 + 2 * j], n->ints[3 + 2 * j], mode, a->shape[d]);
    }
    return cur;
}

cn_tensor *ad_grad_adaptive_avg_pool(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    return cn__adaptive_avg_pool_backward(g, a->shape, a->ndim, (int)n->ints[0]);
}
