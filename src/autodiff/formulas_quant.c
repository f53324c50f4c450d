/* Backward formula of the quantized linear (issue 19; cinder/quant.h). A node has the inputs
 * (x, wq[, bias]) and ints (has_bias, ...). The weight is a constant (quantized tensors are
 * never tracked): the gradients are those of x @ W^T + bias with W the dequantized weight, the
 * activations' int8 rounding passed straight through (the straight-through estimator of
 * quantization-aware training and QLoRA): dx = g @ W, dbias = g summed over the rows. */
#include "autodiff/formula_helpers.h"
#include "cinder/quant.h"

cn_status ad_grad_quant_linear(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    int has_bias = n->ints[0] != 0;
    if (n->in[0].node) {
        cn_tensor *wq = ad_input_value(n, 1);
        cn_tensor *w = wq ? cn_dequantize(wq, cn_dtype_of(g)) : NULL;
        cn_tensor *dx = w ? cn_matmul(g, w) : NULL;
        if (!dx) return cn_last_status();
        gin[0] = cn_retain(dx);
    }
    if (has_bias && n->in[2].node) {
        int64_t N = cn_shape(g)[cn_ndim(g) - 1], rows[2] = {-1, N};
        cn_tensor *g2 = cn_reshape(g, rows, 2);
        cn_tensor *db = g2 ? cn_sum_dim(g2, 0, 0) : NULL;
        if (!db) return cn_last_status();
        gin[2] = cn_retain(db);
    }
    return CN_OK;
}
