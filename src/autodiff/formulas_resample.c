/* Backward formulas of the resampling ops of issue 16 (interpolate), written like those of
 * formulas.c, whose table points here. Each returns input i's gradient. */
#include "autodiff/formula_helpers.h"
#include "dispatch/backward_ops.h"

/* interpolate: the adjoint of the resampling, from the node's attributes and x's shape. */
cn_tensor *ad_grad_interpolate(ad_node *n, cn_tensor *g, int i) {
    return cn__interpolate_backward(g, n->in[i].shape, n->in[i].ndim, n->ints, n->reals);
}
