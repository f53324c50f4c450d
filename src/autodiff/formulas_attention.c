/* Backward formulas of the fused attention (scaled_dot_product_attention) and of ctc_loss.
 * Attention's node has the inputs (q, k, v, lse[, mask]): the backward kernel recomputes the
 * probabilities block by block from q, k, v, lse and the mask, and gives q's, k's and v's
 * gradients, and the scores' gradient (the mask's, summed back over its broadcast dims here) only
 * when the mask is tracked. */
#include "autodiff/formula_helpers.h"
#include "dispatch/backward_ops.h"

cn_status ad_grad_sdpa(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    cn_tensor *q = ad_input_value(n, 0), *k = ad_input_value(n, 1), *v = ad_input_value(n, 2);
    cn_tensor *lse = ad_input_value(n, 3), *o = ad_output_value(n);
    int has_mask = n->n_in > 4;
    cn_tensor *mask = has_mask ? ad_input_value(n, 4) : NULL;
    if (!q || !k || !v || !lse || !o || (has_mask && !mask)) return cn_last_status();
    int want_dmask = has_mask && n->in[4].node != NULL;
    cn_tensor *grads[4];
    cn_status s = cn__sdpa_backward(g, q, k, v, o, lse, mask, (int)n->ints[0], n->reals[0],
                                    want_dmask, grads);
    if (s != CN_OK) return s; /* grads: owned by the backward's scope, as every temporary */
    for (int i = 0; i < 3; i++)
        if (n->in[i].node) gin[i] = cn_retain(grads[i]);
    if (want_dmask && !(gin[4] = cn_retain(sum_to_input(grads[3], &n->in[4]))))
        return cn_last_status();
    return CN_OK;
}

/* ctc_loss (inputs log_probs, targets, input_lengths, target_lengths; the last three are ints
 * without a gradient): the backward kernel recomputes alpha and beta from the saved inputs. */
cn_tensor *ad_grad_ctc_loss(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    cn_tensor *lp = ad_input_value(n, 0), *tg = ad_input_value(n, 1);
    cn_tensor *il = ad_input_value(n, 2), *tl = ad_input_value(n, 3);
    if (!lp || !tg || !il || !tl) return NULL;
    return cn__ctc_loss_backward(g, lp, tg, il, tl, n->ints);
}
