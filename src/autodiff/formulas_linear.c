/* Backward formula of linear (y = x w^T + b on x [M, K], w [N, K], b [N]; g [M, N]), through the
 * public ops; formulas.c's table points here. Input i's gradient:
 *     x: g w [M, K],   w: g^T x [N, K] (one GEMM over all M rows),   b: g summed over rows. */
#include "autodiff/formula_helpers.h"

cn_tensor *ad_grad_linear(ad_node *n, cn_tensor *g, int i) {
    if (i == 2) return cn_sum_dim(g, 0, 0);
    cn_tensor *other = ad_input_value(n, i == 0 ? 1 : 0);
    if (!other) return NULL;
    return i == 0 ? cn_matmul(g, other) : cn_matmul(cn_transpose(g, 0, 1), other);
}
