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

/* erf, elementwise (float). */
cn_tensor *cn__erf(cn_tensor *x);

/* g * f'(s) in one pass, f the activation `op` (CN_OP_RELU, _TANH, _SIGMOID: s its output;
 * CN_OP_SILU, _GELU, _HARD_SIGMOID, _LOG_SIGMOID, _HARD_SWISH: s its input; approx:
 * cn_gelu_approx for gelu). g and s of one shape. */
cn_tensor *cn__activation_backward(cn_tensor *g, cn_tensor *s, cn_op op, int approx);

/* Whether the backend holding t runs `op` on t's dtype: backward formulas take a fused kernel
 * where there is one, and compose public ops on a backend written before it (a program's). */
int cn__has_kernel(cn_op op, const cn_tensor *t);

#endif
