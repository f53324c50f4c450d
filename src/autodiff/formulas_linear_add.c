/* Backward formula of linear_add (y = x w^T + b + r on x [M, K], w [N, K], r [M, N], b [N];
 * g [M, N]), through the public ops; formulas.c's table points here. The node's inputs are
 * (x, w, r[, b]); input i's gradient:
 *     x: g w [M, K],   w: g^T x [N, K] (one GEMM over all M rows),   r: g itself,
 *     b: g summed over rows
 * (linear's, and add's pass-through for r). */
#include "autodiff/formula_helpers.h"

cn_tensor *ad_grad_linear_add(ad_node *n, cn_tensor *g, int i) {
    if (i == 2) return g;
    if (i == 3) return cn_sum_dim(g, 0, 0);
    cn_tensor *other = ad_input_value(n, i == 0 ? 1 : 0);
    if (!other) return NULL;
    return i == 0 ? cn_matmul(g, other) : cn_matmul(cn_transpose(g, 0, 1), other);
}
