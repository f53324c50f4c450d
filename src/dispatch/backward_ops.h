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
/* g: [N,C,OH,OW], x: [N,C,H,W] -> gradient of max_pool2d's input. ints: the pool's 6. */
cn_tensor *cn__max_pool2d_backward(cn_tensor *g, cn_tensor *x, const int64_t *ints);
/* g: [N,C,OH,OW] -> gradient of avg_pool2d's input of shape x_shape. */
cn_tensor *cn__avg_pool2d_backward(cn_tensor *g, const int64_t *x_shape, const int64_t *ints);

/* g: [N,C,PH,PW], idx: conv2d_max_pool2d's choices (u8, g's shape) -> the gradient of the
 * pool's input, z_shape [N,C,H,W]. */
cn_tensor *cn__max_pool2d_backward_index(cn_tensor *g, cn_tensor *idx, const int64_t *z_shape,
                                         int64_t k);
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

/* pad's gradient along one dim (ops_pool.c): g summed back to x's size out_size along dim, the
 * entries that mode (a cn_pad_mode) copied added to the ones they copy; left/right: that dim's
 * padding. */
cn_tensor *cn__pad_backward(cn_tensor *g, int dim, int64_t left, int64_t right, int mode,
                            int64_t out_size);
/* The adaptive average pools' gradient: g (the pool's output) -> the input's gradient of
 * x_shape (ndim dims, the last k pooled). */
cn_tensor *cn__adaptive_avg_pool_backward(cn_tensor *g, const int64_t *x_shape, int ndim, int k);

/* Whether the backend holding t runs `op` on t's dtype: backward formulas take a fused kernel
 * where there is one, and compose public ops on a backend written before it (a program's). */
int cn__has_kernel(cn_op op, const cn_tensor *t);

#endif
