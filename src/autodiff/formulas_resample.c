/* Backward formulas of the resampling ops of issue 16 (interpolate, grid_sample_2d), written
 * like those of formulas.c, whose table points here. Each returns input i's gradient. */
#include "autodiff/formula_helpers.h"
#include "dispatch/backward_ops.h"

/* interpolate: the adjoint of the resampling, from the node's attributes and x's shape. */
cn_tensor *ad_grad_interpolate(ad_node *n, cn_tensor *g, int i) {
    return cn__interpolate_backward(g, n->in[i].shape, n->in[i].ndim, n->ints, n->reals);
}

/* grid_sample_2d: x's gradient (i = 0) or the grid's (i = 1), from both saved inputs. */
cn_tensor *ad_grad_grid_sample_2d(ad_node *n, cn_tensor *g, int i) {
    cn_tensor *x = ad_input_value(n, 0), *grid = ad_input_value(n, 1);
    return x && grid ? cn__grid_sample_2d_backward(g, x, grid, n->ints, i) : NULL;
}
