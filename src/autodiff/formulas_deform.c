/* Backward formula of deformable convolution (deform_conv2d), registered in formulas.c's table.
 * The node's inputs are (x, offset, w[, mask][, b]), ints[8] saying whether the mask is there.
 * One backward kernel gives the gradients of x, offset, w and the mask at once (it recomputes the
 * samples from the saved inputs); the bias's is g summed over N, OH and OW. */
#include "autodiff/formula_helpers.h"
#include "dispatch/backward_ops.h"

cn_status ad_grad_deform_conv2d(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    int has_mask = (int)n->ints[8], bias_at = 3 + has_mask;
    int want = 0;
    for (int i = 0; i < bias_at; i++)
        want |= n->in[i].node != NULL;
    if (want) {
        cn_tensor *x = ad_input_value(n, 0), *offset = ad_input_value(n, 1);
        cn_tensor *w = ad_input_value(n, 2), *mask = has_mask ? ad_input_value(n, 3) : NULL;
        if (!x || !offset || !w || (has_mask && !mask)) return cn_last_status();
        cn_tensor *grads[4];
        cn_status s = cn__deform_conv2d_backward(g, x, offset, w, mask, n->ints, grads);
        if (s != CN_OK) return s; /* grads: owned by the backward's scope, as every temporary */
        for (int i = 0; i < bias_at; i++)
            if (n->in[i].node) gin[i] = cn_retain(grads[i]);
    }
    if (n->n_in > bias_at && n->in[bias_at].node) {
        const int64_t *gs = cn_shape(g);
        int64_t planes[3] = {gs[0], gs[1], gs[2] * gs[3]};
        gin[bias_at] = cn_retain(cn_sum_dim(cn_sum_dim(cn_reshape(g, planes, 3), 2, 0), 0, 0));
        if (!gin[bias_at]) return cn_last_status();
    }
    return CN_OK;
}
