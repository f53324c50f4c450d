/* Backward formulas of issue 16's convolutions (conv_transpose2d, conv1d, conv_transpose1d,
 * conv3d, conv_transpose3d), written with the public ops and conv2d's and conv3d's
 * weight-gradient kernels on concrete tensors like those
 * of formulas.c, whose table points here. Each returns input i's gradient (0: x, 1: w, 2: b).
 *
 * A transposed convolution is the adjoint of the convolution with the same weight: its input's
 * gradient is that convolution of g, and its weight's gradient is conv2d's weight gradient with
 * the roles of input and output swapped (g as the convolution's input, x as its output's
 * gradient). With an output_padding of at least the stride (allowed below the dilation) the
 * convolution of g is longer than x by whole steps: the extra entries are cut off, and x is
 * zero-extended to match for the weight's gradient (the zeros add nothing; conv3d's weight
 * kernel sums over the positions there are, so it needs no extension). */
#include "autodiff/formula_helpers.h"
#include "dispatch/backward_ops.h"

/* t (dense or not) with its dims from 2 on cut or zero-extended to sizes[0..nd) (the concrete
 * results of public ops: scope-owned). */
static cn_tensor *fit_spatial(cn_tensor *t, const int64_t *sizes, int nd) {
    for (int i = 0; t && i < nd; i++) {
        int64_t have = cn_shape(t)[2 + i];
        if (have > sizes[i]) {
            t = cn_slice(t, 2 + i, 0, sizes[i], 1);
        } else if (have < sizes[i]) {
            int64_t zs[5];
            for (int k = 0; k < nd + 2; k++) zs[k] = cn_shape(t)[k];
            zs[2 + i] = sizes[i] - have;
            cn_tensor *parts[2] = {t, cn_zeros(zs, nd + 2, cn_dtype_of(t), cn_device_of(t))};
            t = parts[1] ? cn_cat(parts, 2, 2 + i) : NULL;
        }
    }
    return t;
}

/* The bias's gradient: g summed over every dim but 1. */
static cn_tensor *bias_grad(cn_tensor *g) {
    cn_tensor *cur = g;
    while (cur && cn_ndim(cur) > 2) cur = cn_sum_dim(cur, 2, 0);
    return cur ? cn_sum_dim(cur, 0, 0) : NULL;
}

/* conv2d's weight gradient of a convolution with output gradient go [N, O', ...] and input xi
 * [N, C', ...] (nd spatial dims; 1-D ones seen with a unit height), reshaped to w_shape;
 * c7: conv2d's 7 ints. */
static cn_tensor *weight_grad(cn_tensor *go, cn_tensor *xi, const ad_input *w, const int64_t *c7) {
    if (!go || !xi) return NULL;
    if (w->ndim == 4) return cn__conv2d_backward_weight(go, xi, w->shape, c7);
    int64_t ws[4] = {w->shape[0], w->shape[1], 1, w->shape[2]};
    cn_tensor *gw = cn__conv2d_backward_weight(cn_unsqueeze(go, 2), cn_unsqueeze(xi, 2), ws, c7);
    return gw ? cn_reshape(gw, w->shape, 3) : NULL;
}

/* node ints: conv2d's 7 (stride h, w, padding h, w, dilation h, w, groups; ops_conv_more.c
 * leaves the output_padding out, the shapes holding it) */
cn_tensor *ad_grad_conv_transpose2d(ad_node *n, cn_tensor *g, int i) {
    const int64_t *k = n->ints;
    if (i == 2) return bias_grad(g);
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return NULL;
    if (i == 0) {
        cn_conv2d_params p = {{k[0], k[1]}, {k[2], k[3]}, {k[4], k[5]}, k[6]};
        return fit_spatial(cn_conv2d(g, w, NULL, &p), n->in[0].shape + 2, 2);
    }
    const int64_t *gs = cn_shape(g), *ws = n->in[1].shape;
    int64_t full[2] = {cn__conv_out_size(gs[2], ws[2], k[0], k[2], k[4]),
                       cn__conv_out_size(gs[3], ws[3], k[1], k[3], k[5])};
    return weight_grad(fit_spatial(x, full, 2), g, &n->in[1], k);
}

/* ints: stride, padding, dilation, groups */
cn_tensor *ad_grad_conv1d(ad_node *n, cn_tensor *g, int i) {
    const int64_t *k = n->ints;
    if (i == 2) return bias_grad(g);
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return NULL;
    if (i == 0) {
        /* the transposed convolution, its output_padding the input's tail that no window
         * reached (the remainder of the division by the stride: below the stride) */
        int64_t L = n->in[0].shape[2], K = n->in[1].shape[2], OL = cn_shape(g)[2];
        int64_t base = (OL - 1) * k[0] - 2 * k[1] + k[2] * (K - 1) + 1;
        cn_conv_transpose1d_params p = {k[0], k[1], L - base, k[2], k[3]};
        return cn_conv_transpose1d(g, w, NULL, &p);
    }
    const int64_t c7[7] = {1, k[0], 0, k[1], 1, k[2], k[3]};
    return weight_grad(g, x, &n->in[1], c7);
}

/* ints: stride, padding, output_padding, dilation, groups */
cn_tensor *ad_grad_conv_transpose1d(ad_node *n, cn_tensor *g, int i) {
    const int64_t *k = n->ints;
    if (i == 2) return bias_grad(g);
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return NULL;
    if (i == 0) {
        cn_conv1d_params p = {k[0], k[1], k[3], k[4]};
        return fit_spatial(cn_conv1d(g, w, NULL, &p), n->in[0].shape + 2, 1);
    }
    int64_t full = cn__conv_out_size(cn_shape(g)[2], n->in[1].shape[2], k[0], k[1], k[3]);
    const int64_t c7[7] = {1, k[0], 0, k[1], 1, k[3], k[4]};
    return weight_grad(fit_spatial(x, &full, 1), g, &n->in[1], c7);
}

/* The output_padding that makes a transposed convolution of an input of size out (kernel k)
 * come back to size in: the tail of the input no window of the convolution reached (below the
 * stride). */
static int64_t tail_of(int64_t in, int64_t out, int64_t k, int64_t s, int64_t p, int64_t d) {
    return in - ((out - 1) * s - 2 * p + d * (k - 1) + 1);
}

/* ints: stride (3), padding (3), dilation (3), groups */
cn_tensor *ad_grad_conv3d(ad_node *n, cn_tensor *g, int i) {
    const int64_t *k = n->ints;
    if (i == 2) return bias_grad(g);
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return NULL;
    if (i == 1) return cn__conv3d_backward_weight(g, x, n->in[1].shape, k);
    cn_conv_transpose3d_params p = {.groups = k[9]};
    for (int d = 0; d < 3; d++) {
        p.stride[d] = k[d], p.padding[d] = k[3 + d], p.dilation[d] = k[6 + d];
        p.output_padding[d] = tail_of(n->in[0].shape[2 + d], cn_shape(g)[2 + d],
                                      n->in[1].shape[2 + d], k[d], k[3 + d], k[6 + d]);
    }
    return cn_conv_transpose3d(g, w, NULL, &p);
}

/* node ints: conv3d's 10 (ops_conv_more.c leaves the output_padding out) */
cn_tensor *ad_grad_conv_transpose3d(ad_node *n, cn_tensor *g, int i) {
    const int64_t *k = n->ints;
    if (i == 2) return bias_grad(g);
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return NULL;
    /* the adjoint convolution: x is its output's gradient, g its input */
    if (i == 1) return cn__conv3d_backward_weight(x, g, n->in[1].shape, k);
    cn_conv3d_params p = {{k[0], k[1], k[2]}, {k[3], k[4], k[5]}, {k[6], k[7], k[8]}, k[9]};
    return fit_spatial(cn_conv3d(g, w, NULL, &p), n->in[0].shape + 2, 3);
}

/* conv2d_max_pool2d (inputs x, w, idx[, b]): the gradients of x and w and each plane's sum of
 * the convolution's output gradient from one kernel; the bias's gradient is the sum of those
 * over the batch (the values of formulas.c's conv_pool_formula, bit for bit on the CPU). */
cn_status ad_grad_conv2d_max_pool2d(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1), *idx = ad_input_value(n, 2);
    if (!x || !w || !idx) return cn_last_status();
    const int want[3] = {n->in[0].node != NULL, n->in[1].node != NULL,
                         n->n_in > 3 && n->in[3].node != NULL};
    if (!want[0] && !want[1] && !want[2]) return CN_OK;
    cn_tensor *grads[3];
    cn_status s = cn__conv2d_max_pool2d_backward(g, idx, x, w, n->ints, want, grads);
    if (s != CN_OK) return s; /* grads: owned by the backward's scope, as every temporary */
    for (int i = 0; i < 2; i++)
        if (want[i]) gin[i] = cn_retain(grads[i]);
    if (want[2] && !(gin[3] = cn_retain(cn_sum_dim(grads[2], 0, 0)))) return cn_last_status();
    return CN_OK;
}
