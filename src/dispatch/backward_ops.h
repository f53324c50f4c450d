/* Router entries for the kernels that only backward formulas use. The autodiff layer calls these
 * (never a backend): they check devices and allocate like every other op. */
#ifndef CINDER_DISPATCH_BACKWARD_OPS_H
#define CINDER_DISPATCH_BACKWARD_OPS_H

#include "cinder/backend.h" /* cn_op */
#include "cinder/tensor.h"

/* g: [N,O,OH,OW], w: [O,C/g,KH,KW] -> gradient of conv2d's input, x_shape [N,C,H,W].
 * ints: conv2d's 7 (stride h,w, padding h,w, dilation h,w, groups). */
cn_tensor *cn__conv2d_backward_input(cn_tensor *g, cn_tensor *w, const int64_t *x_shape,
                                     const int64_t *ints);
/* g: [N,O,OH,OW], x: [N,C,H,W] -> gradient of conv2d's weight, w_shape [O,C/g,KH,KW]. */
cn_tensor *cn__conv2d_backward_weight(cn_tensor *g, cn_tensor *x, const int64_t *w_shape,
                                      const int64_t *ints);
/* g: [N,O,OD,OH,OW], x: [N,C,D,H,W] -> gradient of conv3d's weight, w_shape [O,C/g,KD,KH,KW];
 * ints: conv3d's 10 (stride, padding, dilation: d, h, w each; groups). Sums over g's positions
 * only, so g may be shorter than the convolution of x makes (a transposed convolution's input). */
cn_tensor *cn__conv3d_backward_weight(cn_tensor *g, cn_tensor *x, const int64_t *w_shape,
                                      const int64_t *ints);
/* g: [N,C,OH,OW], x: [N,C,H,W] -> gradient of max_pool2d's input. ints: the pool's 6. */
cn_tensor *cn__max_pool2d_backward(cn_tensor *g, cn_tensor *x, const int64_t *ints);
/* g: [N,C,OH,OW] -> gradient of avg_pool2d's input of shape x_shape. */
cn_tensor *cn__avg_pool2d_backward(cn_tensor *g, const int64_t *x_shape, const int64_t *ints);

/* g: [N,C,PH,PW], idx: conv2d_max_pool2d's choices (u8, g's shape) -> the gradient of the
 * pool's input, z_shape [N,C,H,W]. */
cn_tensor *cn__max_pool2d_backward_index(cn_tensor *g, cn_tensor *idx, const int64_t *z_shape,
                                         int64_t k);
/* The gradients of conv2d_max_pool2d (x, w, the forward's ints and its choices idx) from its
 * output's gradient g, in one kernel: grads[0] = x's (when want[0]), grads[1] = w's (want[1]),
 * grads[2] = [N, O], each plane's sum of the convolution's output gradient (want[2]; the bias's
 * gradient is its sum over dim 0), new tensors, NULL where not wanted. The same values as
 * cn__max_pool2d_backward_index, then cn__conv2d_backward_input / _weight and the sum over the
 * planes (bit for bit on the CPU). On failure all are NULL and the error is returned. */
cn_status cn__conv2d_max_pool2d_backward(cn_tensor *g, cn_tensor *idx, cn_tensor *x, cn_tensor *w,
                                         const int64_t *ints, const int *want, cn_tensor **grads);
/* The output size of a convolution or pool along one dim (-1: the window does not fit, -2: past
 * int64), as cn_conv2d computes it. */
int64_t cn__conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil);

/* erf, elementwise (float). */
cn_tensor *cn__erf(cn_tensor *x);

/* g * f'(s) in one pass, f the activation `op` (CN_OP_RELU, _TANH, _SIGMOID: s its output;
 * CN_OP_SILU, _GELU, _HARD_SIGMOID, _LOG_SIGMOID, _HARD_SWISH: s its input; approx:
 * cn_gelu_approx for gelu). g and s of one shape. */
cn_tensor *cn__activation_backward(cn_tensor *g, cn_tensor *s, cn_op op, int approx);

/* The reverse cumsum of g along dim (element i: the sum of g[i..n-1]): cumsum's gradient. */
cn_tensor *cn__cumsum_reverse(cn_tensor *g, int dim);
/* cumprod's gradient from its output gradient g and its input x (one shape, float), along dim:
 * exact where x has zeros (no division by x). */
cn_tensor *cn__cumprod_backward(cn_tensor *g, cn_tensor *x, int dim);

/* softmax's (log = 0) or log_softmax's (log = 1) input gradient along dim in one pass per row,
 * from g and the forward's output y (one shape, float). */
cn_tensor *cn__softmax_backward(cn_tensor *g, cn_tensor *y, int dim, int log);
/* scaled_dot_product_attention's forward (cn_scaled_dot_product_attention's checks and
 * output), also handing back *lse: each query row's log-sum-exp [B.., Lq], a new concrete
 * tensor (NULL on failure). */
cn_tensor *cn__sdpa_forward(cn_tensor *q, cn_tensor *k, cn_tensor *v, cn_tensor *mask,
                            int causal, double scale, cn_tensor **lse);
/* Its backward kernel: from g (the output's gradient), q, k, v, the output o, lse and the mask
 * (or NULL), with the forward's causal and scale (the resolved one, never 0), writes new tensors
 * grads[0..2] = dq, dk, dv and, when want_dmask, grads[3] = the scores' gradient [B.., Lq, Lk]
 * (else NULL). On failure all are NULL and the error is returned. */
cn_status cn__sdpa_backward(cn_tensor *g, cn_tensor *q, cn_tensor *k, cn_tensor *v, cn_tensor *o,
                            cn_tensor *lse, cn_tensor *mask, int causal, double scale,
                            int want_dmask, cn_tensor **grads);

/* The fused normalisations' forward (cn_layer_norm's / cn_rms_norm's checks and output), also
 * handing back each row's statistics, new concrete tensors of x's leading dims (NULL on
 * failure): *mean and *rstd for layer_norm, *rstd for rms_norm. */
cn_tensor *cn__layer_norm_forward(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                                  cn_tensor *weight, cn_tensor *bias, double eps,
                                  cn_tensor **mean, cn_tensor **rstd);
cn_tensor *cn__rms_norm_forward(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                                cn_tensor *weight, double eps, cn_tensor **rstd);
/* Their backward kernels: from g (y's gradient), x, the forward's statistics and the weight (or
 * NULL), over x's last k dims, new tensors grads[0] = dx, grads[1] = dw when want_dw, grads[2] =
 * db when want_db (layer_norm only), else NULL. On failure all are NULL and the error is
 * returned. */
cn_status cn__layer_norm_backward(cn_tensor *g, cn_tensor *x, cn_tensor *mean, cn_tensor *rstd,
                                  cn_tensor *w, int k, int want_dw, int want_db,
                                  cn_tensor **grads);
cn_status cn__rms_norm_backward(cn_tensor *g, cn_tensor *x, cn_tensor *rstd, cn_tensor *w, int k,
                                int want_dw, cn_tensor **grads);

/* ctc_loss's backward kernel: from g [N] (each sample's loss gradient), log_probs [T, N, C] and
 * the forward's dense i64 targets and lengths (the node's saved inputs), with its ints (blank,
 * concatenated, zero_infinity), the gradient of log_probs [T, N, C]. */
cn_tensor *cn__ctc_loss_backward(cn_tensor *g, cn_tensor *log_probs, cn_tensor *targets,
                                 cn_tensor *input_lengths, cn_tensor *target_lengths,
                                 const int64_t *ints);
/* g: interpolate's output gradient ([N, C, OL] or [N, C, OH, OW]) -> the gradient of its input,
 * of shape x_shape (x_ndim 3 or 4): each g entry added back at the taps it was read from. ints:
 * interpolate's 2 (mode, align_corners); reals: its 2 scale factors (0: none). */
cn_tensor *cn__interpolate_backward(cn_tensor *g, const int64_t *x_shape, int x_ndim,
                                    const int64_t *ints, const double *reals);
/* g: grid_sample_2d's output gradient [N, C, OH, OW], x and grid its inputs, ints its 3 (mode,
 * padding, align_corners) -> the gradient of x (which = 0) or of grid (which = 1). */
cn_tensor *cn__grid_sample_2d_backward(cn_tensor *g, cn_tensor *x, cn_tensor *grid,
                                       const int64_t *ints, int which);
/* pad's gradient along one dim (ops_pool.c): g summed back to x's size out_size along dim, the
 * entries that mode (a cn_pad_mode) copied added to the ones they copy; left/right: that dim's
 * padding. */
cn_tensor *cn__pad_backward(cn_tensor *g, int dim, int64_t left, int64_t right, int mode,
                            int64_t out_size);
/* The adaptive average pools' gradient: g (the pool's output) -> the input's gradient of
 * x_shape (ndim dims, the last k pooled). */
cn_tensor *cn__adaptive_avg_pool_backward(cn_tensor *g, const int64_t *x_shape, int ndim, int k);

/* deform_conv2d's backward kernel (ops_deform.c): from g (the output's gradient [N, O, OH, OW]),
 * the forward's x, offset, w and mask (or NULL) and its 9 ints (stride h, w, padding h, w,
 * dilation h, w, groups, offset_groups, has_mask), writes new tensors grads[0..2] = the
 * gradients of x, offset and w and grads[3] = the mask's (NULL without a mask). On failure all
 * are NULL and the error is returned. */
cn_status cn__deform_conv2d_backward(cn_tensor *g, cn_tensor *x, cn_tensor *offset, cn_tensor *w,
                                     cn_tensor *mask, const int64_t *ints, cn_tensor **grads);

/* Whether the backend holding t runs `op` on t's dtype: backward formulas take a fused kernel
 * where there is one, and compose public ops on a backend written before it (a program's). */
int cn__has_kernel(cn_op op, const cn_tensor *t);

#endif
