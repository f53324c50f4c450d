/* Helpers shared by the backward formulas (formulas.c, formulas_index.c), and the formulas that
 * live outside formulas.c. Results are scope-owned temporaries (formulas run in a scope). */
#ifndef CINDER_AUTODIFF_FORMULA_HELPERS_H
#define CINDER_AUTODIFF_FORMULA_HELPERS_H

#include "autodiff/autodiff_internal.h"
#include "cinder/memory.h"
#include "cinder/ops.h"

/* A 0-d tensor holding v, in t's dtype and on t's device: broadcasts against anything. */
static inline cn_tensor *scalar_like(cn_tensor *t, double v) {
    return t ? cn_full(NULL, 0, v, cn_dtype_of(t), cn_device_of(t)) : NULL;
}

/* A float mask (1 where m, 0 elsewhere) in t's dtype. */
static inline cn_tensor *mask_like(cn_tensor *m, cn_tensor *t) {
    return m && t ? cn_cast(m, cn_dtype_of(t)) : NULL;
}

/* Sums g over the dims that broadcasting stretched, back to `shape`. */
static inline cn_tensor *sum_to(cn_tensor *g, const int64_t *shape, int ndim) {
    cn_tensor *cur = g;
    while (cur && cn_ndim(cur) > ndim) cur = cn_sum_dim(cur, 0, 0);
    for (int d = 0; cur && d < ndim; d++)
        if (shape[d] == 1 && cn_shape(cur)[d] != 1) cur = cn_sum_dim(cur, d, 1);
    return cur;
}

static inline cn_tensor *sum_to_input(cn_tensor *g, const ad_input *a) {
    return sum_to(g, a->shape, a->ndim);
}

static inline cn_tensor *zeros_of(const ad_input *a, cn_tensor *like) {
    return like ? cn_zeros(a->shape, a->ndim, a->dtype, cn_device_of(like)) : NULL;
}

/* ---- formulas_index.c: the indexing ops of issue 16 (one input's gradient each) ------------- */
cn_tensor *ad_grad_masked_fill(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_tril(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_triu(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_flip(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_repeat(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_scatter(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_slice_assign(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_index_copy(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_index_add(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_unfold(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_masked_select(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_gather_nd(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_scatter_nd(ad_node *n, cn_tensor *g, int i);

/* ---- formulas_attention.c: the fused attention (the whole node) and ctc_loss ----------------- */
cn_status ad_grad_sdpa(ad_node *n, cn_tensor *g, cn_tensor **gin);
/* ctc_loss: log_probs' gradient (input 0; the others are ints) */
cn_tensor *ad_grad_ctc_loss(ad_node *n, cn_tensor *g, int i);
/* ---- formulas_norm.c: the fused normalisations (the whole node) ------------------------------ */
cn_status ad_grad_layer_norm(ad_node *n, cn_tensor *g, cn_tensor **gin);
cn_status ad_grad_rms_norm(ad_node *n, cn_tensor *g, cn_tensor **gin);
/* ---- formulas_conv.c: the convolutions of issue 16 (one input's gradient each) -------------- */
cn_tensor *ad_grad_conv_transpose2d(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_conv1d(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_conv_transpose1d(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_conv3d(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_conv_transpose3d(ad_node *n, cn_tensor *g, int i);
/* conv2d_max_pool2d (the whole node: inputs x, w, idx[, b]) through its backward kernel, where
 * the backend has it (formulas.c's formula otherwise) */
cn_status ad_grad_conv2d_max_pool2d(ad_node *n, cn_tensor *g, cn_tensor **gin);
/* ---- formulas_resample.c: the resampling ops of issue 16 ------------------------------------ */
cn_tensor *ad_grad_interpolate(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_grid_sample_2d(ad_node *n, cn_tensor *g, int i);
/* ---- formulas_pool.c: padding and pooling of issue 16 ---------------------------------------- */
cn_tensor *ad_grad_pad(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_adaptive_avg_pool(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_max_pool2d_with_indices(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_unfold4d(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_fold4d(ad_node *n, cn_tensor *g, int i);
/* ---- formulas_deform.c: deformable convolution (the whole node) ------------------------------ */
cn_status ad_grad_deform_conv2d(ad_node *n, cn_tensor *g, cn_tensor **gin);
/* ---- formulas_fft.c: the real FFT of issue 16 ---------------------------------------------- */
cn_tensor *ad_grad_rfft(ad_node *n, cn_tensor *g, int i);
cn_tensor *ad_grad_irfft(ad_node *n, cn_tensor *g, int i);
/* ---- formulas_linear.c: linear (x w^T + b in one kernel) ---------------------------------- */
cn_tensor *ad_grad_linear(ad_node *n, cn_tensor *g, int i);
/* linear_gelu: the whole node (x, w, d[, b]) */
cn_status ad_grad_linear_gelu(ad_node *n, cn_tensor *g, cn_tensor **gin);
/* ---- formulas_linear_add.c: linear_add (x w^T + b + r in one kernel) ---------------------- */
cn_tensor *ad_grad_linear_add(ad_node *n, cn_tensor *g, int i);
/* ---- formulas_quant.c: the quantized linear of issue 19 (the whole node: x and bias) -------- */
cn_status ad_grad_quant_linear(ad_node *n, cn_tensor *g, cn_tensor **gin);

#endif
