/* Backward formulas of linear (y = x w^T + b on x [M, K], w [N, K], b [N]; g [M, N]) and of
 * linear_gelu (y = gelu(x w^T + b)), through the public ops; formulas.c's table points here.
 * linear, input i's gradient:
 *     x: g w [M, K],   w: g^T x [N, K] (one GEMM over all M rows),   b: g summed over rows.
 * linear_gelu's node is (x, w, d[, b]), d = gelu' of the pre-activation that the forward wrote:
 * the same with g d (one product) in place of g, gelu never recomputed. */
#include "autodiff/formula_helpers.h"

cn_tensor *ad_grad_linear(ad_node *n, cn_tensor *g, int i) {
    if (i == 2) return cn_sum_dim(g, 0, 0);
    cn_tensor *other = ad_input_value(n, i == 0 ? 1 : 0);
    if (!other) return NULL;
    return i == 0 ? cn_matmul(g, other) : cn_matmul(cn_transpose(g, 0, 1), other);
}

cn_status ad_grad_linear_gelu(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    int has_b = n->ints[1] != 0;
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1), *d = ad_input_value(n, 2);
    if (!x || !w || !d) return cn_last_status();
    cn_tensor *gp = cn_mul(g, d); /* the pre-activation's gradient */
    if (!gp) return cn_last_status();
    if (n->in[0].node && !(gin[0] = cn_retain(cn_matmul(gp, w)))) return cn_last_status();
    if (n->in[1].node && !(gin[1] = cn_retain(cn_matmul(cn_transpose(gp, 0, 1), x))))
        return cn_last_status();
    if (has_b && n->in[3].node && !(gin[3] = cn_retain(cn_sum_dim(gp, 0, 0))))
        return cn_last_status();
    return CN_OK;
}
