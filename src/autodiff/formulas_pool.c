/* Backward formulas of issue 16's padding and pooling ops (pad, the adaptive average pools, max
 * pooling with indices, unfold4d / fold4d), through public ops and the router entries of their
 * backward kernels (dispatch/backward_ops.h); formulas.c's table points here. Each returns input
 * i's gradient. */
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

/* max_pool2d_with_indices: the indices recomputed from the saved input (ceil mode is whatever
 * gives the node's output sizes), then g added at them within each [H, W] plane:
 * scatter_add over [N, C, H * W] of g seen as [N, C, OH * OW]. A window of padding only (its
 * maximum -inf, its index PyTorch's, outside the plane) passes nothing back. */
cn_tensor *ad_grad_max_pool2d_with_indices(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    cn_tensor *x = ad_input_value(n, i);
    if (!x) return NULL;
    const int64_t *k = n->ints;
    cn_max_pool2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}, 0};
    for (int d = 0; d < 2; d++) {
        int64_t span = k[6 + d] * (k[d] - 1) + 1;
        int64_t floor_size = (a->shape[2 + d] + 2 * k[4 + d] - span) / k[2 + d] + 1;
        if (n->shape[2 + d] != floor_size) p.ceil_mode = 1;
    }
    cn_tensor *idx = NULL, *v = cn_max_pool2d_ex(x, &p, &idx);
    cn_release(v);
    if (!idx) return NULL;
    const int64_t *s = a->shape;
    int64_t planes[3] = {s[0], s[1], s[2] * s[3]}, outs[3] = {s[0], s[1], -1};
    cn_tensor *flat_idx = cn_reshape(idx, outs, 3);
    cn_release(idx);
    cn_tensor *inside =
        cn_logical_and(cn_ge_scalar(flat_idx, 0), cn_lt_scalar(flat_idx, (double)planes[2]));
    cn_tensor *safe_idx = cn_where(inside, flat_idx, cn_zeros(NULL, 0, CN_I64, cn_device_of(g)));
    cn_tensor *safe_g = cn_where(inside, cn_reshape(g, outs, 3), scalar_like(g, 0));
    cn_tensor *sum =
        cn_scatter_add(cn_zeros(planes, 3, a->dtype, cn_device_of(g)), 2, safe_idx, safe_g);
    cn_release(flat_idx);
    return cn_reshape(sum, s, 4);
}

/* unfold4d and fold4d are each other's adjoint: the gradient of one is the other applied to g,
 * with the same kernel, dilation, padding and stride (ints), fold back to x's own sizes. */
static cn_fold_params fold_params_of(const int64_t *k) {
    return (cn_fold_params){{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, {k[6], k[7]}};
}
cn_tensor *ad_grad_unfold4d(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    cn_fold_params p = fold_params_of(n->ints);
    return cn_fold4d(g, a->shape[2], a->shape[3], &p);
}
cn_tensor *ad_grad_fold4d(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    cn_fold_params p = fold_params_of(n->ints);
    return cn_unfold4d(g, &p);
}
