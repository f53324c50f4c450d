/* cinder: the backend interface, for people who write a backend.
 *
 * A backend is a table of kernels plus memory functions, registered at run time under a name.
 * The router (src/dispatch) is the only caller of these functions: it has already checked
 * devices, kinds, dtypes and shapes, broadcast the inputs, and allocated the outputs before a
 * kernel runs. A kernel only computes. A backend registered by a program is as good as a built-in
 * one: `cn_backend_register` gives it an id, and `cn_device_parse("name")` finds it. A backend may
 * also come as a module that cinder loads at run time (below: cn_backend_load).
 *
 * Kernel contracts, by op family (views: see cn_view):
 * - elementwise (unary, binary, scalar, clamp, where, compare, logical, cast, copy):
 *   every input view has the output's shape (the router broadcast them; strides may be 0);
 *   the output may be strided too (copy into a slice). Output dtype: the input's, bool for
 *   comparisons and logic, the target for cast. Attributes: reals[0] the scalar (add/mul/pow
 *   scalar), reals[0..1] = lo, hi (clamp), ints[0] = cn_gelu_approx (gelu).
 * - fill: out[0] (possibly strided) set to reals[0]. rand_uniform / rand_normal: out[0]
 *   contiguous; ints[0] = seed, ints[1] = offset; reals[0..1] = (low, high) or (mean, std).
 * - reductions: in[0] any strides; ints[0] = the (non-negative) dim; out[0] contiguous with the
 *   input's ndim and size 1 at dim. var: ints[1] = correction. argmax/argmin write i64.
 * - softmax / log_softmax: in[0] any strides, ints[0] = dim; out[0] contiguous, same shape.
 * - matmul: in[0] [B.., M, K], in[1] [B.., K, N], out[0] [B.., M, N] contiguous; all share ndim
 *   (>= 2) and batch dims (expanded inputs may have stride 0 there).
 * - gather: in = (x, index i64), ints[0] = dim, out has index's shape.
 *   scatter_add: in = (x, index i64, src), ints[0] = dim, out = x with src added (x's shape).
 *   index_select: in = (x, index 1-D i64), ints[0] = dim. one_hot: in = (index int),
 *   ints[0] = classes, out = index shape + [classes]. Out-of-range indices: CN_ERR_INDEX.
 * - conv2d: in = (x [N,C,H,W], w [O,C/g,KH,KW], optional b [O]); ints = stride h, w, padding h,
 *   w, dilation h, w, groups. max_pool2d / avg_pool2d: ints = kernel h, w, stride h, w,
 *   padding h, w.
 * - erf: elementwise unary, float.
 * - conv2d_relu: conv2d's inputs, ints and output, with relu applied to each output value
 *   (NaN stays NaN, as relu's kernels do): max(conv2d(x, w, b), 0) in one pass.
 * - conv2d_max_pool2d: conv2d's inputs; ints = conv2d's 7, then k (2 <= k <= 15): a max pool of
 *   k x k windows at stride k, unpadded, over the convolution's output z [N, O, OH, OW]. out[0]
 *   = the pool [N, O, OH / k, OW / k] (rows and columns past the last whole window dropped, as
 *   max_pool2d does), contiguous; when n_out is 2, out[1] = u8 of the same shape, contiguous:
 *   each window's choice i * k + j (row i, column j of the window): its first NaN, else its
 *   first maximum, in row-major order (max_pool2d's choice). args->conv: the convolution's.
 * - max_pool2d_backward_index: in = (g [N, C, PH, PW] any strides, idx u8 [N, C, PH, PW]
 *   contiguous: conv2d_max_pool2d's out[1]); ints = max_pool2d's 6 (k, k, k, k, 0, 0);
 *   args->conv: the pool's geometry (h, w: the pooled tensor's input); out = [N, C, H, W]
 *   contiguous: 0 + g at each window's chosen element, +0 elsewhere (max_pool2d_backward's
 *   values).
 * - softmax_backward: in = (g, y) of one shape (any strides), y the forward's output; ints[0] =
 *   the dim, ints[1] = 1 for log_softmax; out[0] contiguous: along each row of the dim,
 *   softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
 * - conv2d_backward_input: in = (g [N,O,OH,OW], w [O,C/g,KH,KW]), conv2d's ints; out = the
 *   input's gradient [N,C,H,W]. conv2d_backward_weight: in = (g, x [N,C,H,W]), conv2d's ints;
 *   out = the weight's gradient [O,C/g,KH,KW].
 * - max_pool2d_backward: in = (g [N,C,OH,OW], x [N,C,H,W]), the pool's ints; out = x's gradient
 *   (each window's gradient goes to its first maximum; overlapping windows add up).
 *   avg_pool2d_backward: in = (g), the pool's ints; out = x's gradient [N,C,H,W].
 * - sgd_step (in place, torch.optim.SGD's update of one parameter): in = (p, g[, buf]), one
 *   shape and one float dtype (the router sends only f32 and f64), each contiguous or strided
 *   (g may have stride 0; p and buf never overlap themselves; the three share no memory);
 *   out = (p[, buf]), the same views as in[0] and in[2]. reals = lr, momentum, dampening,
 *   weight_decay; ints[0] = nesterov, ints[1] = first (1 on the parameter's first step: buf's
 *   old contents are not read). buf is there only when momentum != 0 (n_in 3, n_out 2; else
 *   n_in 2, n_out 1). Elementwise, in the dtype's precision or better:
 *       g' = weight_decay != 0 ? g + weight_decay * p : g
 *       buf = first ? g' : momentum * buf + (1 - dampening) * g'        (with buf)
 *       d = buf ? (nesterov ? g' + momentum * buf : buf) : g'
 *       p = p - lr * d
 *   Whoever reads an element of p or buf also writes it, after reading.
 * - cumsum, cumprod, cummax, cummin, sort: in[0] any strides, ints[0] = the (non-negative) dim;
 *   out[0] contiguous, in[0]'s shape and dtype. cumsum: ints[1] = 1 scans from the end
 *   (out[i] = sum of in[i..n-1]). cummax / cummin: out[1] (i64, same shape) the index of the
 *   running extreme (the last one among equals; NaN beats everything and then stays). sort:
 *   ints[1] = descending; out[1] (i64) the source index of each value; stable; NaN sorts as the
 *   largest value. cumprod_backward: in = (g, x) of one shape, ints[0] = dim; out = x's gradient
 *   (no division: correct where x has zeros).
 * - any / all: a reduction (ints[0] = dim, out[0] bool with size 1 at dim) of any dtype; an
 *   element counts as true when it is != 0 (NaN is true).
 * - scaled_dot_product_attention: in = (q [B.., Lq, D], k [B.., Lk, D], v [B.., Lk, Dv][, mask
 *   [B.., Lq, Lk]]), one float dtype, any strides (the mask's may be 0: broadcast); ints[0] =
 *   causal (key j > query i is left out: top-left aligned), reals[0] = the scale. out[0] = o
 *   [B.., Lq, Dv] and out[1] = lse [B.., Lq] (the log of each row's softmax denominator),
 *   contiguous: o_i = sum_j softmax_j(scale q_i . k_j + mask_ij) v_j. A row with every key left
 *   out (mask -inf, or Lk = 0) gets o_i = 0 and lse_i = -inf. No [Lq, Lk] matrix is written.
 *   scaled_dot_product_attention_backward: in = (g [B.., Lq, Dv], q, k, v, o, lse[, mask]) as
 *   the forward's, same ints and reals; out = dq, dk, dv (q's, k's, v's shapes, contiguous) and,
 *   when n_out is 4, out[3] = the scores' gradient [B.., Lq, Lk] (the mask's, before any sum
 *   over its broadcast dims). Rows with lse = -inf contribute nothing.
 * - ctc_loss: in = (log_probs [T, N, C] float, any strides; targets i64 [N, S] (padded) or,
 *   when ints[1] = 1, [sum of target_lengths] (concatenated), contiguous; input_lengths and
 *   target_lengths i64 [N], contiguous), all checked by the router (lengths within T and S, the
 *   targets in [0, C) and not blank); ints[0] = blank, ints[2] = zero_infinity. out[0] [N] in
 *   log_probs' dtype, contiguous: -log p(target | log_probs) over CTC's alignments of the first
 *   input_lengths[n] steps; +inf when none exists (0 with zero_infinity).
 *   ctc_loss_backward: in = (g [N], then ctc_loss's four); same ints; out = [T, N, C]
 *   contiguous: g[n] * d(-log p)/d log_probs (0 past input_lengths[n]; a sample with no
 *   alignment: NaN, or 0 with zero_infinity).
 * A kernel that fails calls cn_set_error and returns its status; it must leave inputs untouched. */
#ifndef CINDER_BACKEND_H
#define CINDER_BACKEND_H

#include "cinder/api.h"

#include <stddef.h>
#include <stdint.h>

#include "cinder/error.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Every op a backend may implement. Append only: the numbers are part of the backend ABI. */
typedef enum cn_op {
    /* elementwise unary */
    CN_OP_NEG, CN_OP_ABS, CN_OP_RELU, CN_OP_EXP, CN_OP_LOG, CN_OP_LOG1P, CN_OP_SQRT, CN_OP_RSQRT,
    CN_OP_SIN, CN_OP_COS, CN_OP_TANH, CN_OP_SIGMOID, CN_OP_SILU, CN_OP_GELU,
    /* elementwise with scalars */
    CN_OP_ADD_SCALAR, CN_OP_MUL_SCALAR, CN_OP_POW_SCALAR, CN_OP_CLAMP,
    /* elementwise binary */
    CN_OP_ADD, CN_OP_SUB, CN_OP_MUL, CN_OP_DIV, CN_OP_POW, CN_OP_MAXIMUM, CN_OP_MINIMUM,
    /* comparisons and logic */
    CN_OP_EQ, CN_OP_NE, CN_OP_LT, CN_OP_LE, CN_OP_GT, CN_OP_GE,
    CN_OP_LOGICAL_AND, CN_OP_LOGICAL_OR, CN_OP_LOGICAL_NOT, CN_OP_WHERE,
    /* data movement and creation */
    CN_OP_CAST, CN_OP_COPY, CN_OP_FILL, CN_OP_RAND_UNIFORM, CN_OP_RAND_NORMAL,
    /* reductions */
    CN_OP_SUM, CN_OP_MEAN, CN_OP_MAX, CN_OP_MIN, CN_OP_PROD, CN_OP_ARGMAX, CN_OP_ARGMIN,
    CN_OP_VAR, CN_OP_LOGSUMEXP, CN_OP_SOFTMAX, CN_OP_LOG_SOFTMAX,
    /* linear algebra, indexing, convolution */
    CN_OP_MATMUL, CN_OP_GATHER, CN_OP_SCATTER_ADD, CN_OP_INDEX_SELECT, CN_OP_ONE_HOT,
    CN_OP_CONV2D, CN_OP_MAX_POOL2D, CN_OP_AVG_POOL2D,
    /* added for autodiff: erf, and the backward kernels of convolution and pooling */
    CN_OP_ERF, CN_OP_CONV2D_BACKWARD_INPUT, CN_OP_CONV2D_BACKWARD_WEIGHT,
    CN_OP_MAX_POOL2D_BACKWARD, CN_OP_AVG_POOL2D_BACKWARD,
    /* added for optimizers: the fused, in-place SGD update */
    CN_OP_SGD_STEP,
    /* added with the op table: atan2(a, b), elementwise binary, float */
    CN_OP_ATAN2,
    /* added for speed: the fused backward of an activation, g * f'(s) in one pass (in[0] g,
     * in[1] s: the forward's output for relu, tanh and sigmoid, its input for silu, gelu,
     * hard_sigmoid, log_sigmoid and hard_swish;
     * ints[0] the forward op, ints[1] cn_gelu_approx for gelu; same shapes, float) */
    CN_OP_ACTIVATION_BACKWARD,
    /* added with the rest of PyTorch's elementwise unary math (floor to sign also on ints) */
    CN_OP_FLOOR, CN_OP_CEIL, CN_OP_ROUND, CN_OP_TRUNC, CN_OP_SIGN, CN_OP_RECIPROCAL, CN_OP_TAN,
    CN_OP_ASIN, CN_OP_ACOS, CN_OP_ATAN, CN_OP_SINH, CN_OP_COSH, CN_OP_ASINH, CN_OP_ACOSH,
    CN_OP_ATANH,
    /* added for speed: conv2d followed by relu in one kernel (conv2d's inputs and ints; the
     * output is max(conv2d, 0), written once) */
    CN_OP_CONV2D_RELU,
    /* added for speed: conv2d followed by a max pool of non-overlapping square windows in one
     * kernel (the convolution's output is never written out), and that pool's backward from the
     * window positions it kept */
    CN_OP_CONV2D_MAX_POOL2D, CN_OP_MAX_POOL2D_BACKWARD_INDEX,
    /* added with the scans and sorts (issue 16), all along one dim ints[0]: cumsum (ints[1] = 1:
     * the reverse scan, from the end), cumprod, its backward (in = g, x), cummax and cummin
     * (out = values, i64 indices), sort (ints[1] = descending; out = values, i64 indices), and
     * any / all (reductions to bool) */
    CN_OP_CUMSUM, CN_OP_CUMPROD, CN_OP_CUMPROD_BACKWARD, CN_OP_CUMMAX, CN_OP_CUMMIN, CN_OP_SORT,
    CN_OP_ANY, CN_OP_ALL,
    /* added with issue 16's remaining elementwise ops: remainder (the divisor's sign, as
     * torch.remainder) and fmod (the dividend's) on floats and ints, hypot, is_nan and is_inf
     * (bool out); the integer bitwise ops and shifts, on two tensors or with reals[0] the scalar;
     * bool xor; and activations as direct ops: leaky_relu (reals[0] the slope), prelu (in[1]
     * the weight, broadcast against x), hard_sigmoid, log_sigmoid, hard_swish, softplus
     * (reals: beta, threshold), elu (reals[0] alpha); comparisons with a scalar (reals[0]; bool
     * out, exact on ints: core/scalar_compare.h) */
    CN_OP_REMAINDER, CN_OP_FMOD, CN_OP_HYPOT, CN_OP_REMAINDER_SCALAR, CN_OP_IS_NAN, CN_OP_IS_INF,
    CN_OP_BITWISE_AND, CN_OP_BITWISE_OR, CN_OP_BITWISE_XOR, CN_OP_BITWISE_LEFT_SHIFT,
    CN_OP_BITWISE_RIGHT_SHIFT, CN_OP_BITWISE_NOT, CN_OP_BITWISE_AND_SCALAR,
    CN_OP_BITWISE_OR_SCALAR, CN_OP_BITWISE_XOR_SCALAR, CN_OP_BITWISE_LEFT_SHIFT_SCALAR,
    CN_OP_BITWISE_RIGHT_SHIFT_SCALAR, CN_OP_LOGICAL_XOR, CN_OP_LEAKY_RELU, CN_OP_PRELU,
    CN_OP_HARD_SIGMOID, CN_OP_LOG_SIGMOID, CN_OP_HARD_SWISH, CN_OP_SOFTPLUS, CN_OP_ELU,
    CN_OP_EQ_SCALAR, CN_OP_NE_SCALAR, CN_OP_LT_SCALAR, CN_OP_LE_SCALAR, CN_OP_GT_SCALAR,
    CN_OP_GE_SCALAR,
    /* added with indexing (issue 16): masked_fill (in[1] a bool mask broadcast to x, reals[0] the
     * value), tril / triu (ints[0] the diagonal), flip (ints: the dims), repeat (ints: the
     * repeats, out[p] = x[p mod x's shape]), scatter (scatter_add's contract, assigning; the last
     * write along dim wins), slice_assign (in = (x, values), ints = dim, start, step: out = x with
     * the slice replaced), index_copy / index_add (in = (x, index 1-D i64, src), ints[0] = dim),
     * unfold (ints = dim, size, step: out = x's shape with the window count at dim, plus [size]),
     * nonzero (out [count, ndim] i64, count = the router's count of nonzero entries),
     * masked_select (in = (x, mask bool), both broadcast to one shape; out [count]),
     * gather_nd (in = (x, index i64 [.., K]); out = index's shape but the last + x's shape past
     * K), scatter_nd (in = (x, index [.., K], updates), ints[0] = cn_scatter_reduce: 0 assign,
     * 1 add, 2 mul, 3 min, 4 max; out = x's shape; repeated tuples reduce in index order) */
    CN_OP_MASKED_FILL, CN_OP_TRIL, CN_OP_TRIU, CN_OP_FLIP, CN_OP_REPEAT, CN_OP_SCATTER,
    CN_OP_SLICE_ASSIGN, CN_OP_INDEX_COPY, CN_OP_INDEX_ADD, CN_OP_UNFOLD, CN_OP_NONZERO,
    CN_OP_MASKED_SELECT, CN_OP_GATHER_ND, CN_OP_SCATTER_ND,
    /* added for speed (issue 17): softmax's and log_softmax's backward in one pass per row
     * (in[0] g, in[1] y: the forward's output; ints[0] the dim, ints[1] 1 for log_softmax) */
    CN_OP_SOFTMAX_BACKWARD,
    /* added with attention and ctc_loss (issue 16): scaled_dot_product_attention (in = q, k, v[,
     * mask]; out = o, lse; ints[0] causal, reals[0] scale) and its backward (in = g, q, k, v, o,
     * lse[, mask]; out = dq, dk, dv[, dmask]), which recomputes the probabilities block by block
     * (o, dq, dk, dv: the CPU's front-end hands its kernels views in q's, k's and v's layouts,
     * which they write through their strides; other backends get them dense);
     * ctc_loss (in = log_probs, targets, input_lengths, target_lengths; out = each sample's
     * negative log-likelihood; ints = blank, concatenated, zero_infinity) and its backward (in =
     * g, then ctc_loss's inputs; out = the log_probs' gradient) */
    CN_OP_SDPA, CN_OP_SDPA_BACKWARD, CN_OP_CTC_LOSS, CN_OP_CTC_LOSS_BACKWARD,
    /* added with the convolutions of issue 16 (window ops: the router passes a
     * cn_conv_geometry). conv_transpose2d: in = (x [N, C, H, W], w [C, O/groups, KH, KW],
     * optional b [O]), ints = stride h, w, padding h, w, output_padding h, w, dilation h, w,
     * groups; its geometry reads as that of the transposed convolution itself (c, h, w: x's;
     * o, oh, ow: the output's, output_padding included), out[n, o, r, q] = b[o] + the sum of
     * x[n, c, i, j] w[c, o', kh, kw] over r = i*sh - ph + kh*dh, q = j*sw - pw + kw*dw (its
     * autodiff node keeps conv2d's 7 ints: no output_padding, which the shapes hold).
     * conv1d (ints = stride, padding, dilation, groups) and conv_transpose1d (ints = stride,
     * padding, output_padding, dilation, groups) take [N, C, L] tensors and [.., K] weights;
     * their geometry is the 2-D one with h = kh = 1 (stride, dilation 1 and padding 0 along h),
     * and a kernel may view every 3-D operand as 4-D with a size-1 dim 2. conv3d (in = x
     * [N, C, D, H, W], w [O, C/groups, KD, KH, KW], optional b; ints = stride d, h, w, padding
     * d, h, w, dilation d, h, w, groups), conv_transpose3d (in = x, w [C, O/groups, KD, KH, KW],
     * optional b; ints = stride (3), padding (3), output_padding (3), dilation (3), groups) and
     * conv3d_backward_weight (in = (gy, x); conv3d's ints; out = gw, whose shape gives the
     * kernel's size) come with no cn_conv_geometry: their kernels read the views and ints
     * (core/conv3d_common.h) */
    CN_OP_CONV_TRANSPOSE2D, CN_OP_CONV1D, CN_OP_CONV_TRANSPOSE1D, CN_OP_CONV3D,
    CN_OP_CONV_TRANSPOSE3D, CN_OP_CONV3D_BACKWARD_WEIGHT,
    /* added with resampling (issue 16): interpolate (in[0] x [N, C, L] or [N, C, H, W]; out
     * [N, C, OL] or [N, C, OH, OW]; ints = mode (cn_interp_mode), align_corners; reals = the
     * user's scale factor per spatial dim, 0 where the size was given: core/resample_math.h
     * turns them into source positions) and its backward (in[0] g, out[0] x's shape; the same
     * attributes: the adjoint, each g entry added back at the source taps it was read from) */
    CN_OP_INTERPOLATE, CN_OP_INTERPOLATE_BACKWARD,
    /* grid_sample_2d: in = (x [N, C, H, W], grid [N, OH, OW, 2]), out [N, C, OH, OW]; ints =
     * mode (cn_grid_mode), padding (cn_grid_padding), align_corners. Its backward: in = (g, x,
     * grid), ints = the same 3 and which gradient (0: x's, out x's shape; 1: grid's, out grid's
     * shape) */
    CN_OP_GRID_SAMPLE_2D, CN_OP_GRID_SAMPLE_2D_BACKWARD,
    /* added with padding and pooling (issue 16): pad (in = x; ints[0] = cn_pad_mode, ints[1] =
     * skip, then (left, right) pairs for at most 3 dims: the first for dim ndim - 1 - skip, the
     * next for the dim before, ...; reals[0] = the constant; out = x's shape with each padded
     * dim grown by left + right, negative entries cropping first (circular wraps what is left)), pad_backward (in = g; ints = mode, dim, left, right: g summed
     * back along that one dim to out's size, the adjoint of pad along it; float),
     * adaptive_avg_pool (in = x; ints[0] = k: x's last k dims are pooled to out's sizes with
     * PyTorch's windows [floor(i * in / out), ceil((i + 1) * in / out)); float) and its
     * backward (in = g; ints[0] = k; out = the input's shape); max_pool2d_with_indices (in = x
     * [N, C, H, W]; ints = kernel h, w, stride h, w, padding h, w, dilation h, w; out = values
     * [N, C, OH, OW] (the sizes chosen by the router, ceil_mode included) and i64 indices
     * h * W + w of each maximum within its plane; float); unfold4d (im2col: in = x
     * [N, C, H, W]; ints = kernel h, w, dilation h, w, padding h, w, stride h, w; out =
     * [N, C * KH * KW, OH * OW], row (c * KH + i) * KW + j, column oh * OW + ow; float) and
     * fold4d (col2im, its adjoint: in = the columns, out = [N, C, H, W], overlaps summed) */
    CN_OP_PAD, CN_OP_PAD_BACKWARD, CN_OP_ADAPTIVE_AVG_POOL, CN_OP_ADAPTIVE_AVG_POOL_BACKWARD,
    CN_OP_MAX_POOL2D_WITH_INDICES, CN_OP_UNFOLD4D, CN_OP_FOLD4D,
    /* added for speed (issue 17): AdamW's update of one parameter in one pass, in place, as
     * torch.optim.AdamW's single-tensor rule (cn_adamw_step_ in ops.h): in = (p, g, exp_avg,
     * exp_avg_sq), out = (p, exp_avg, exp_avg_sq), the inputs' memory; reals = lr, beta1, beta2,
     * eps, weight_decay; ints = step (>= 1, for the bias corrections), first (the averages hold
     * nothing yet and are not read); one float dtype */
    CN_OP_ADAMW_STEP,
    /* added with deformable convolution (issue 16; torchvision.ops.deform_conv2d, DCNv1 and
     * DCNv2; window ops: args->conv is the geometry of the convolution, as conv2d's).
     * deform_conv2d: in = (x [N, C, H, W], offset [N, 2 * G * KH * KW, OH, OW], w [O, C/groups,
     * KH, KW][, mask [N, G * KH * KW, OH, OW]][, b [O]]), any strides; ints = stride h, w,
     * padding h, w, dilation h, w, groups, G (offset_groups, dividing C), has_mask (whether
     * in[3] is the mask; the bias is there when n_in is 4 + has_mask); out [N, O, OH, OW]
     * contiguous. Channel c of x reads the offsets of its group g = c / (C / G): tap (i, j) of
     * output (oh, ow) samples x[n, c] at y = oh * sh - ph + i * dh + offset[n, 2 * k, oh, ow],
     * x = ow * sw - pw + j * dw + offset[n, 2 * k + 1, oh, ow] (k = (g * KH + i) * KW + j),
     * bilinearly with zeros outside as torchvision's kernel does (core/deform_math.h: nothing
     * when y <= -1, y >= H, x <= -1 or x >= W; else the corners inside the image), times
     * mask[n, k, oh, ow] when there is one; out = b + the sum over the group's channels and
     * the taps of w[o, c', i, j] times that sample.
     * deform_conv2d_backward: in = (g [N, O, OH, OW], x, offset, w[, mask]), the forward's ints
     * (has_mask: in[4] is the mask); out = (x's, offset's and w's gradients[, mask's]) in their
     * shapes, contiguous, all from one kernel (the bias's is g summed, by the formula). The
     * offsets' gradient is torchvision's: d(sample)/dy from the four corners inside the image
     * (its get_coordinate_weight, with no test of the range of y and x) */
    CN_OP_DEFORM_CONV2D, CN_OP_DEFORM_CONV2D_BACKWARD,
    /* added with the real FFT (issue 16). A complex tensor is stored as real ones with a trailing
     * dim of 2 (real, imaginary), as torch.view_as_real lays it out. rfft: in = x (any strides,
     * f32 or f64); ints = dim (non-negative), n (>= 1), norm (cn_fft_norm); reals[0] = the scale
     * (1, 1 / n or 1 / sqrt(n)); out = x's shape with dim's size n / 2 + 1, plus [2], contiguous:
     * out[.., k, .., :] = scale * sum_j x[.., j, ..] exp(-2 pi i j k / n) over j < min(n, x's size
     * at dim) (x zero-padded or cut to n), the imaginary part of bin 0 (and of bin n / 2 when n is
     * even) exactly 0. irfft: in = the spectrum [.., F, .., 2] (any strides), same ints; reals[0] =
     * the scale (1 / n, 1 or 1 / sqrt(n)); out = the spectrum's shape less the trailing 2, with
     * dim's size n, contiguous: the real signal whose first n / 2 + 1 bins are the spectrum's
     * (cut, or zero-padded past F), the other bins their conjugates (Hermitian symmetry), so that
     * the imaginary parts of bin 0 and of the Nyquist bin n / 2 (n even) are ignored; times the
     * scale */
    CN_OP_RFFT, CN_OP_IRFFT,
    /* added with the fused normalisations (issue 17), over the last k = ints[0] dims of x, seen
     * as M rows of N elements (every view dense, row-major: the router makes them so):
     * layer_norm (in = x[, w][, b], w and b of the normalised shape; ints = k, has_w, has_b;
     * reals[0] = eps; out = y (x's shape), mean and rstd (x's leading dims, x's dtype): each
     * row's mean and 1 / sqrt(biased variance + eps)); its backward (in = g, x, mean, rstd[, w];
     * ints = k, has_w, want_dw, want_db; out = dx[, dw][, db]: dw = sum over rows of g * xhat,
     * db = sum of g, each of the normalised shape); rms_norm (in = x[, w]; ints = k, has_w;
     * reals[0] = eps; out = y, rstd = 1 / sqrt(mean(x^2) + eps)) and its backward (in = g, x,
     * rstd[, w]; ints = k, has_w, want_dw; out = dx[, dw]) */
    CN_OP_LAYER_NORM, CN_OP_LAYER_NORM_BACKWARD, CN_OP_RMS_NORM, CN_OP_RMS_NORM_BACKWARD,
    /* added for speed (issue 17): linear, y = x w^T + b as torch.nn.functional.linear (addmm)
     * in one kernel: in = (x [M, K], w [N, K][, b [N]]), any strides (the router folds x's
     * leading dims into M); out [M, N] contiguous, the bias added to each block of rows while
     * it is in cache instead of in a pass of its own; float */
    CN_OP_LINEAR,
    /* added with quantized tensors (issue 19; cinder/quant.h): quant_linear (in = x, w[, bias]:
     * x f32 [M, K] dense row-major; w the quantized weight [N, K], its dtype the scheme, its data
     * the first byte of its storage (not of its first element), strides [s0, 1] in storage
     * elements; bias f32 [N] (any stride); ints = has_bias, w_offset (the storage element of
     * w[0, 0]), group (storage elements per scale), scales_at (byte offset of the scales in the
     * storage); out = y f32, M * N dense: y = x @ dequant(w)^T + bias, with x quantized to int8
     * per row and int8 dots summed in int32) */
    CN_OP_QUANT_LINEAR,
    /* added for speed (issue 17, the GPT's MLP): linear_gelu, y = gelu(x w^T + b) in one kernel:
     * in = (x [M, K], w [N, K][, b [N]]) as linear's; ints = approx (cn_gelu_approx), want_d;
     * out = y [M, N] contiguous, and when want_d, d [M, N] contiguous = gelu'(x w^T + b) (what
     * the backward multiplies the output's gradient by, so that it never recomputes gelu);
     * float. Each block of rows gets the bias and gelu while it is in cache */
    CN_OP_LINEAR_GELU,
    /* added for speed (issue 15, the CNN's backward): conv2d_max_pool2d_backward, the whole
     * gradient of conv2d_max_pool2d in one kernel: in = (g [N, O, PH, PW] any strides, idx u8
     * [N, O, PH, PW] contiguous: the forward's out[1], x [N, C, H, W], w [O, C/g, KH, KW], both
     * any strides); ints = conv2d_max_pool2d's 8, then want_gx, want_gw, want_gb (0 or 1; at
     * least one); args->conv: the convolution's geometry; out = the wanted ones, in this order,
     * contiguous: gx [N, C, H, W], gw [O, C/g, KH, KW] (conv2d_backward_input's and
     * conv2d_backward_weight's values of gz = max_pool2d_backward_index(g, idx): on the CPU bit
     * for bit, each image's gz made and used while in cache, never written out), gb [N, O] (the
     * sum of each plane of gz, as sum over dim 2 of gz seen as [N, O, OH * OW]: the bias's
     * gradient is its sum over dim 0) */
    CN_OP_CONV2D_MAX_POOL2D_BACKWARD,
    /* added for speed (issue 17, the GPT's residual stream): linear_add, y = x w^T + b + r in one
     * kernel: in = (x [M, K], w [N, K], r [M, N][, b [N]]), x, w and b as linear's, r any
     * strides (the router folds its leading dims as x's); out = y [M, N] contiguous, each block
     * of rows getting the bias and then r added while it is in cache (the values of linear and
     * then add: (x w^T + b) + r); float */
    CN_OP_LINEAR_ADD,
    CN_OP_COUNT
} cn_op;

/* The name of an op as users see it ("add", "softmax"); "unknown" otherwise. */
CN_API const char *cn_op_name(cn_op op);

/* A strided view of device memory, as a kernel sees it. */
typedef struct cn_view {
    void *data;                     /* device address of element [0, ..., 0] */
    cn_dtype dtype;
    int ndim;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CN_MAX_DIMS];   /* in elements; 0 on broadcast dims */
} cn_view;

/* The geometry of a 2-D window op (conv2d, the pools and their backward kernels), computed and
 * checked once by the router: sizes are positive, the output sizes follow from the rest, and the
 * index arithmetic over any of the tensors fits in int64. Pools have o = c, groups = 1 and
 * dilation 1. */
typedef struct cn_conv_geometry {
    int64_t n, c, h, w;             /* the input [N, C, H, W] */
    int64_t o, oh, ow;              /* the output [N, O, OH, OW] */
    int64_t kh, kw;                 /* the window (conv: the weight's [O, C/groups, KH, KW]) */
    int64_t sh, sw, ph, pw, dh, dw; /* stride, padding, dilation */
    int64_t groups;
} cn_conv_geometry;

typedef struct cn_kernel_args {
    cn_op op;
    int device;                     /* device index within the backend */
    int n_in;
    const cn_view *in;
    int n_out;
    const cn_view *out;
    int n_ints;
    const int64_t *ints;
    int n_reals;
    const double *reals;
    void *ctx;                      /* the backend's ctx */
    const cn_conv_geometry *conv;   /* window ops only (conv2d, pools, their backward); else NULL */
} cn_kernel_args;

typedef cn_status (*cn_kernel_fn)(const cn_kernel_args *args);

typedef struct cn_backend {
    const char *name;               /* "cpu", "cuda", or a program's own */
    void *ctx;                      /* passed back to every function */
    int (*device_count)(void *ctx); /* usable devices (asked once, on first use); 0 = compiled
                                     * in but unavailable */
    /* Memory: the only code that touches device memory. alloc returns CN_ERR_OUT_OF_MEMORY with
     * the error set on failure; nbytes may be 0. */
    cn_status (*alloc)(void *ctx, int device, size_t nbytes, void **ptr);
    void (*free)(void *ctx, int device, void *ptr);
    cn_status (*copy_from_host)(void *ctx, int device, void *dst, const void *src, size_t nbytes);
    cn_status (*copy_to_host)(void *ctx, int device, void *dst, const void *src, size_t nbytes);
    /* Waits until queued work is done (NULL: the backend is synchronous). */
    cn_status (*synchronize)(void *ctx, int device);
    cn_kernel_fn kernels[CN_OP_COUNT]; /* NULL: the backend lacks the op (a clear error) */
    /* The dtypes each kernel takes, as a mask of (1u << cn_dtype) of the op's first value input
     * (the output's for fill and the random ops; the source's for cast). 0 with a kernel: every
     * dtype the op accepts. The router refuses any other dtype before the kernel runs, naming op,
     * dtype and backend, so a kernel need not check dtypes itself. */
    uint32_t dtypes[CN_OP_COUNT];
} cn_backend;

/* Registers a backend; the table is copied. Returns its id (>= 0), or -1 with the error set when
 * the name is taken, the table is incomplete (memory functions missing) or the registry is full.
 * The CPU backend registers itself as id 0. */
CN_API int cn_backend_register(const cn_backend *backend);

/* The registered table of a backend id, or NULL. For wrapping a backend (e.g. one that counts the
 * calls of the CPU kernels and forwards them). */
CN_API const cn_backend *cn_backend_get(int id);

/* The id of the backend registered under name, or -1. Never loads a module (cn_backend_load
 * does). */
CN_API int cn_backend_find(const char *name);

/* ---- backend modules -----------------------------------------------------------------------------
 * A backend may live in its own shared object, loaded at run time the first time one of its
 * devices is asked for (as ggml loads its backends): libcinder itself depends on nothing
 * GPU-related, and the CUDA backend is the module libcinder_cuda.so. A program can ship its own
 * backend the same way.
 *
 * A module exports one function, `cn_backend_module_init` (type cn_backend_module_init_fn). cinder
 * calls it once with the host services below and registers the table it returns. The module
 * calls back into cinder only through those services (its errors, its host allocations), so it
 * works the same in a program linked with libcinder.so or with libcinder.a, and needs no symbol
 * of either. Both sides carry CN_BACKEND_ABI_VERSION: a module built against another version of
 * this interface is refused with a clear error, never run.
 *
 * Where a backend named N is looked for (cn_backend_load("N"), cn_device_parse("N:0")), in order:
 *   1. each directory of the CINDER_BACKEND_PATH environment variable (':'-separated);
 *   2. the directory of the file that holds libcinder (the shared library, or the program that
 *      linked libcinder.a), then ../lib beside it (../<libdir> of the install, for a program in
 *      bin/);
 *   3. the directory libcinder was installed to (CN_MODULE_DIR of the build);
 *   4. the dynamic loader's own search (LD_LIBRARY_PATH, the program's RUNPATH, ld.so.cache);
 * the file being libcinder_N.so each time. A failed search is remembered: asking again reports the
 * same error without searching. Threads: loading is serialised; any thread may ask. */

/* The version of the backend interface (this header's structs and the op numbering). Bumped on
 * any incompatible change; a module must have been built with the same number. */
#define CN_BACKEND_ABI_VERSION 9

/* What cinder hands a module: its error path and its counted host allocator (so that the
 * allocation-failure mode, cn_alloc_fail_after, covers the module too). Valid for the life of the
 * process. */
typedef struct cn_backend_host {
    int abi_version;                /* CN_BACKEND_ABI_VERSION of the library */
    cn_status (*set_error)(cn_status s, const char *op, const char *fmt, ...);
    cn_status (*last_status)(void);
    void (*clear_error)(void);
    /* malloc / calloc / free through cinder's allocator; on failure they set
     * CN_ERR_OUT_OF_MEMORY naming op and return NULL. */
    void *(*malloc)(const char *op, size_t nbytes);
    void *(*calloc)(const char *op, size_t count, size_t size);
    void (*free)(void *ptr);
    /* Counts one device allocation; non-zero when the failure mode says it must fail. */
    int (*alloc_should_fail)(void);
    size_t (*dtype_size)(cn_dtype dtype);
    const char *(*dtype_name)(cn_dtype dtype);
    const char *(*op_name)(cn_op op);
} cn_backend_host;

/* What a module hands back. Owned by the module; must stay valid for the life of the process
 * (modules are never unloaded). */
typedef struct cn_backend_module {
    int abi_version;                /* CN_BACKEND_ABI_VERSION the module was built with */
    const cn_backend *backend;      /* the table to register; its name is the backend's */
    /* Why the backend sees no device ("" when it sees one), e.g. the driver's message; NULL if
     * the backend has nothing to say. */
    const char *(*unavailable_reason)(void);
    const void *api;                /* backend-specific functions (cinder/cuda.h's), or NULL */
} cn_backend_module;

typedef const cn_backend_module *(*cn_backend_module_init_fn)(const cn_backend_host *host);

/* Returns the id of the backend `name`, loading its module first when it is not registered yet
 * (see the search above). `name` may instead be a path (it contains a '/'): that file is loaded
 * and its backend registered under the name its table gives. -1 with the error set
 * (CN_ERR_UNKNOWN_DEVICE) when no module is found (the message lists every place looked at and
 * why each failed), when the module lacks cn_backend_module_init, was built for another
 * CN_BACKEND_ABI_VERSION, returns no table, or its name is taken. */
CN_API int cn_backend_load(const char *name);

/* Registers a backend module that is linked into the program (a static build: e.g.
 * cn_backend_add_module(cn_cuda_backend_module) with libcinder_cuda.a, see cinder/cuda.h).
 * Returns its id; an already registered backend of the same name returns -1 with the error set.
 * Same checks as cn_backend_load. */
CN_API int cn_backend_add_module(cn_backend_module_init_fn init);

/* What cinder knows of a backend, for `cinder info` and for programs that choose a device. */
typedef struct cn_backend_status {
    int id;              /* registry id, or -1 when it is not registered and could not be loaded */
    int devices;         /* usable devices (0 when none, or not loaded) */
    char module[512];    /* the module file it was loaded from; "" for one built into libcinder or
                          * registered by the program */
    char why[1024];      /* when id is -1: why loading failed (where it looked); when devices is
                          * 0: why there is no device, if the backend says; else "" */
} cn_backend_status;

/* Fills *out for the backend `name`, loading its module if needed (a failed load is reported in
 * out->why, not as an error). CN_ERR_NULL_ARG for a NULL argument; otherwise CN_OK. */
CN_API cn_status cn_backend_status_of(const char *name, cn_backend_status *out);

/* ---- threads for CPU kernels ---------------------------------------------------------------------
 * A CPU kernel (built-in, in a program's backend, or an extension's) that wants several cores uses
 * the CPU backend's thread pool through these, never OpenMP or threads of its own: a second pool
 * would compete with cinder's for the same cores, and each would wait on threads the other has
 * descheduled. */

/* The pool's threads, the caller included (>= 1): the count cn_cpu_set_threads asked for, else
 * OMP_NUM_THREADS when set, else the cores; at most CN_CPU_MAX_THREADS. The first call (or the
 * first CPU op that splits its work) starts the pool with that many threads, and the count is
 * then fixed for the life of the process. */
CN_API int cn_cpu_threads(void);

#define CN_CPU_MAX_THREADS 256

/* Sets the pool's size to n threads (the caller included), overriding OMP_NUM_THREADS. Valid
 * before the pool starts (before the first cn_cpu_threads or CPU op that splits its work; setting
 * it again before then replaces the earlier value). CN_OK; CN_ERR_INVALID_ARG when n is outside
 * 1..CN_CPU_MAX_THREADS, or when the pool has already started with another count (it cannot be
 * resized: asking for the count it has is CN_OK). Any thread may call it. */
CN_API cn_status cn_cpu_set_threads(int n);

/* Runs fn(ctx, begin, end) on each of `chunks` ranges that cut [0, n) into near-equal parts
 * (range c is [n*c/chunks, n*(c+1)/chunks)), on the pool's threads and the caller's, and returns
 * when all are done. chunks <= 1: one call on the caller. Which thread runs a range depends on
 * timing, so fn must not depend on it. A call from inside fn runs its ranges in order on the
 * calling thread. */
typedef void (*cn_range_fn)(void *ctx, int64_t begin, int64_t end);
CN_API void cn_cpu_parallel_for(int64_t n, int64_t chunks, cn_range_fn fn, void *ctx);

/* The GEMM of cinder's CPU kernels, for extension kernels: c = a @ b + beta * c on host memory,
 * row-major, dtype CN_F32 (oneDNN's JIT kernels for this CPU) or CN_F64 (OpenBLAS). a is [m, k]
 * at leading dimension lda, or stored as its transpose [k, m] when ta != 0; b is [k, n], or
 * [n, k] when tb != 0; c is [m, n] at ldc. beta 0 ignores c's old values (NaN included). It runs
 * on the calling thread only (the libraries' own threads would compete with the pool's): split a
 * large product into blocks of rows or columns of c with cn_cpu_parallel_for. Any thread may call
 * it, on disjoint c. CN_OK; CN_ERR_INVALID_ARG for another dtype, a negative size or a leading
 * dimension smaller than its row; CN_ERR_NULL_ARG for a NULL operand of a non-empty product;
 * CN_ERR_OVERFLOW when a size does not fit the libraries' ints. Nothing is written on an error. */
CN_API cn_status cn_cpu_gemm(cn_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k,
                             const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                             void *c, int64_t ldc);

#ifdef __cplusplus
}
#endif
#endif
