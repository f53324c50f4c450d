/* Backward formulas of the fused normalisations (layer_norm, rms_norm): each calls its backward
 * kernel once with the row statistics the forward saved (never recomputed), which gives x's
 * gradient in one pass per row and the weight's and bias's as sums over the rows. A layer_norm
 * node has the inputs (x, mean, rstd[, w][, b]) and ints (k, has_w, has_b); an rms_norm node
 * (x, rstd[, w]) and ints (k, has_w). The statistics are concrete tensors: they get no gradient.
 * cn_backward runs formulas without recording, so these kernels are never differentiated. */
#include "autodiff/formula_helpers.h"
#include "dispatch/backward_ops.h"

cn_status ad_grad_layer_norm(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    int k = (int)n->ints[0], has_w = n->ints[1] != 0, has_b = n->ints[2] != 0;
    int wi = 3, bi = 3 + has_w;
    cn_tensor *x = ad_input_value(n, 0), *mean = ad_input_value(n, 1);
    cn_tensor *rstd = ad_input_value(n, 2), *w = has_w ? ad_input_value(n, wi) : NULL;
    if (!x || !mean || !rstd || (has_w && !w)) return cn_last_status();
    int want_dw = has_w && n->in[wi].node, want_db = has_b && n->in[bi].node;
    cn_tensor *grads[3];
    cn_status s = cn__layer_norm_backward(g, x, mean, rstd, w, k, want_dw, want_db, grads);
    if (s != CN_OK) return s; /* grads: owned by the backward's scope, as every temporary */
    if (n->in[0].node) gin[0] = cn_retain(grads[0]);
    if (want_dw) gin[wi] = cn_retain(grads[1]);
    if (want_db) gin[bi] = cn_retain(grads[2]);
    return CN_OK;
}

cn_status ad_grad_rms_norm(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    int k = (int)n->ints[0], has_w = n->ints[1] != 0;
    cn_tensor *x = ad_input_value(n, 0), *rstd = ad_input_value(n, 1);
    cn_tensor *w = has_w ? ad_input_value(n, 2) : NULL;
    if (!x || !rstd || (has_w && !w)) return cn_last_status();
    int want_dw = has_w && n->in[2].node;
    cn_tensor *grads[3];
    cn_status s = cn__rms_norm_backward(g, x, rstd, w, k, want_dw, grads);
    if (s != CN_OK) return s;
    if (n->in[0].node) gin[0] = cn_retain(grads[0]);
    if (want_dw) gin[2] = cn_retain(grads[1]);
    return CN_OK;
}
