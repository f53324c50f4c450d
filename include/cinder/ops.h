/* cinder: operations. Every op goes through the router (dispatch), which checks devices, kinds,
 * dtypes and shapes and calls the kernel of the backend the inputs live on.
 *
 * Conventions:
 * - Each op returns a new tensor (one reference for the caller) or NULL with the error set.
 * - Binary ops broadcast with NumPy rules and require both inputs to have the same dtype (cast
 *   one with cn_cast); they never promote silently.
 * - `dim` arguments may be negative (counting from the end).
 * - Float-only ops (exp, log, softmax, ...) reject int and bool tensors with CN_ERR_KIND. */
#ifndef CINDER_OPS_H
#define CINDER_OPS_H

#include "cinder/api.h"

#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- elementwise, binary (broadcasting; float and int) --------------------------------------- */
CN_API cn_tensor *cn_add(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_sub(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_mul(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_div(cn_tensor *a, cn_tensor *b); /* ints: truncating; division by zero is an error */
/* a^b. On ints (burn: powi) by repeated squaring, wrapping modulo 2^bits; 0^0 = 1; a negative
 * b gives 1 / a^-b truncated, as PyTorch: 1 for a = 1, +-1 for a = -1, else 0. */
CN_API cn_tensor *cn_pow(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_maximum(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_minimum(cn_tensor *a, cn_tensor *b);
/* The angle of the point (b, a) in radians, in [-pi, pi], as torch.atan2(a, b): float only;
 * atan2(0, 0) is 0. Differentiable: d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2). */
CN_API cn_tensor *cn_atan2(cn_tensor *a, cn_tensor *b);

/* ---- elementwise, unary --------------------------------------------------------------------- */
CN_API cn_tensor *cn_neg(cn_tensor *x);   /* float, int */
CN_API cn_tensor *cn_abs(cn_tensor *x);   /* float, int */
CN_API cn_tensor *cn_relu(cn_tensor *x);  /* float, int */
CN_API cn_tensor *cn_exp(cn_tensor *x);   /* the rest: float only */
CN_API cn_tensor *cn_log(cn_tensor *x);
CN_API cn_tensor *cn_log1p(cn_tensor *x);
CN_API cn_tensor *cn_sqrt(cn_tensor *x);
CN_API cn_tensor *cn_rsqrt(cn_tensor *x);
CN_API cn_tensor *cn_sin(cn_tensor *x);
CN_API cn_tensor *cn_cos(cn_tensor *x);
CN_API cn_tensor *cn_tanh(cn_tensor *x);
CN_API cn_tensor *cn_sigmoid(cn_tensor *x);
CN_API cn_tensor *cn_silu(cn_tensor *x);

typedef enum cn_gelu_approx { CN_GELU_ERF = 0, CN_GELU_TANH = 1 } cn_gelu_approx;
CN_API cn_tensor *cn_gelu(cn_tensor *x, cn_gelu_approx approx);

/* The Gauss error function, as torch.erf: float only (CN_ERR_KIND otherwise). Differentiable:
 * d/dx = 2/sqrt(pi) exp(-x^2). */
CN_API cn_tensor *cn_erf(cn_tensor *x);

/* Rounding and sign, as torch.floor, ceil, round, trunc and sign: float and int (int tensors
 * come back unchanged from the four roundings; sign gives -1, 0 or 1 in x's dtype). round rounds
 * half to even (0.5 -> 0, 1.5 -> 2, -2.5 -> -2), like torch.round. The roundings keep NaN,
 * +-inf and the sign of zero; sign(+-inf) is +-1 and, as in PyTorch, sign(NaN) and sign(-0.0)
 * are 0. Bool is CN_ERR_KIND. Differentiable with a zero gradient everywhere, as in PyTorch
 * (the jumps are ignored). */
CN_API cn_tensor *cn_floor(cn_tensor *x);
CN_API cn_tensor *cn_ceil(cn_tensor *x);
CN_API cn_tensor *cn_round(cn_tensor *x);
CN_API cn_tensor *cn_trunc(cn_tensor *x);
CN_API cn_tensor *cn_sign(cn_tensor *x);

/* The rest of the elementwise math, as the torch functions of the same names: float only
 * (CN_ERR_KIND on int and bool; cast first). Outside an op's domain the result is NaN, never an
 * error, as in PyTorch: asin and acos outside [-1, 1], acosh below 1, atanh outside [-1, 1]
 * (atanh(+-1) is +-inf); reciprocal(+-0) is +-inf, and sinh and cosh overflow to +-inf past
 * the dtype's range. Differentiable (the derivative is infinite or NaN where the function is
 * not differentiable: asin and acos at +-1, acosh at 1, atanh at +-1):
 *   reciprocal -1/x^2 = -y^2, tan 1 + y^2, asin 1/sqrt(1 - x^2), acos -1/sqrt(1 - x^2),
 *   atan 1/(1 + x^2), sinh cosh x, cosh sinh x, asinh 1/sqrt(x^2 + 1), acosh 1/sqrt(x^2 - 1),
 *   atanh 1/(1 - x^2). */
CN_API cn_tensor *cn_reciprocal(cn_tensor *x);
CN_API cn_tensor *cn_tan(cn_tensor *x);
CN_API cn_tensor *cn_asin(cn_tensor *x);
CN_API cn_tensor *cn_acos(cn_tensor *x);
CN_API cn_tensor *cn_atan(cn_tensor *x);
CN_API cn_tensor *cn_sinh(cn_tensor *x);
CN_API cn_tensor *cn_cosh(cn_tensor *x);
CN_API cn_tensor *cn_asinh(cn_tensor *x);
CN_API cn_tensor *cn_acosh(cn_tensor *x);
CN_API cn_tensor *cn_atanh(cn_tensor *x);

/* ---- elementwise with scalars ---------------------------------------------------------------- */
/* Float and int. On an int tensor s is truncated toward zero and must then fit x's dtype: NaN,
 * infinities and values out of its range are CN_ERR_INVALID_ARG (cast x to a float dtype to
 * compute with them); the integer arithmetic itself wraps modulo 2^bits. */
CN_API cn_tensor *cn_add_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_mul_scalar(cn_tensor *x, double s);
/* Float and int (burn: powf_scalar, powi_scalar); on an int tensor p must be a whole number >= 0
 * that fits x's dtype (CN_ERR_INVALID_ARG otherwise, as PyTorch refuses integers to negative
 * powers) and the power wraps as cn_pow's. */
CN_API cn_tensor *cn_pow_scalar(cn_tensor *x, double p);
/* Float and int; lo <= hi (NaN bounds are refused). On an int tensor x is kept within the
 * integers of [lo, hi], that is [ceil(lo), floor(hi)], both ends saturated to the dtype's range:
 * lo below the range (even -inf) or hi above it clamps nothing on its side. */
CN_API cn_tensor *cn_clamp(cn_tensor *x, double lo, double hi);

/* cond (bool) ? a : b, all three broadcast together; a and b share a dtype. */
CN_API cn_tensor *cn_where(cn_tensor *cond, cn_tensor *a, cn_tensor *b);

/* Converts to any dtype, defined for every value: float -> int truncates toward zero and
 * saturates at the target's range (+-inf and values beyond it give its min or max), NaN -> 0;
 * int -> narrower int wraps modulo 2^bits; anything -> bool is != 0 (NaN -> true); to a float
 * dtype rounds to nearest even (beyond its range: +-inf). Every backend follows these rules. */
CN_API cn_tensor *cn_cast(cn_tensor *x, cn_dtype dtype);

/* ---- comparisons (broadcasting, same dtype) -> bool; logic on bool ---------------------------- */
CN_API cn_tensor *cn_eq(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_ne(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_lt(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_le(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_gt(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_ge(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_logical_and(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_logical_or(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_logical_not(cn_tensor *x);

/* ---- more elementwise: remainders, hypot, NaN/inf tests, bitwise ops ------------------------- *
 * Each returns a new tensor (one reference for the caller) or NULL with the error set, inputs
 * untouched; like every op, safe to call from several threads on different tensors. The binary
 * ones broadcast and take two tensors of one dtype. */

/* The remainder of a / b with the sign of b, as torch.remainder (Python's %): a - floor(a / b) b;
 * remainder(-5, 3) = 1, remainder(5, -3) = -1. fmod keeps the sign of a instead, as torch.fmod
 * (C's fmod and %): a - trunc(a / b) b. Float and int. On floats b = 0 gives NaN; on ints a zero
 * element of b is CN_ERR_INVALID_ARG ("integer division by zero", nothing written: mask the
 * zeros with cn_where first, or cast to a float dtype), and x % -1 is 0 even for the minimum.
 * Differentiable (floats): d/da = 1, d/db = -floor(a / b) (remainder), -trunc(a / b) (fmod),
 * as in PyTorch (the jumps are ignored). burn's remainder is torch.remainder's. */
CN_API cn_tensor *cn_remainder(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_fmod(cn_tensor *a, cn_tensor *b);
/* cn_remainder with a scalar divisor s, as torch.remainder(x, s) (burn: remainder_scalar). On an
 * int tensor s must be a nonzero integer that fits x's dtype (CN_ERR_INVALID_ARG otherwise:
 * cast x to a float dtype for a fractional s); on floats s = 0 gives NaN. d/dx = 1. */
CN_API cn_tensor *cn_remainder_scalar(cn_tensor *x, double s);
/* sqrt(a^2 + b^2) without overflow or underflow in the squares, as torch.hypot: float only.
 * Differentiable: d/da = a / hypot(a, b), d/db = b / hypot(a, b) (NaN at a = b = 0). */
CN_API cn_tensor *cn_hypot(cn_tensor *a, cn_tensor *b);
/* x is NaN / x is +-inf, as torch.isnan and torch.isinf: bool out. Float and int (an int tensor
 * gives all false, as in PyTorch). No gradient. */
CN_API cn_tensor *cn_is_nan(cn_tensor *x);
CN_API cn_tensor *cn_is_inf(cn_tensor *x);

/* Bitwise and, or, xor, not and shifts on int tensors (i32, i64), as torch.bitwise_and, _or,
 * _xor, _not, bitwise_left_shift and bitwise_right_shift; float, bool and u8 tensors are
 * CN_ERR_KIND or CN_ERR_DTYPE (for bool use cn_logical_and, _or, _xor, _not). No gradient.
 * Shifts by a count y of a W-bit dtype are defined for every y, as PyTorch defines them (no C
 * undefined behaviour): left shift drops the bits shifted out (the sign bit too: 1 << 63 is the
 * i64 minimum) and gives 0 for y < 0 or y >= W; right shift is arithmetic (the sign fills in)
 * and for y < 0 or y >= W gives x >> (W - 1), that is 0 or -1. */
CN_API cn_tensor *cn_bitwise_and(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_bitwise_or(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_bitwise_xor(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_bitwise_left_shift(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_bitwise_right_shift(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_bitwise_not(cn_tensor *x);
/* The same with a scalar s (burn: bitwise_and_scalar, ...): s must be an integer that fits x's
 * dtype (CN_ERR_INVALID_ARG otherwise: a fraction, NaN or a value out of range). */
CN_API cn_tensor *cn_bitwise_and_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_bitwise_or_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_bitwise_xor_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_bitwise_left_shift_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_bitwise_right_shift_scalar(cn_tensor *x, double s);
/* a xor b on bool tensors (broadcasting), as torch.logical_xor (burn: bool_xor). Bool only. */
CN_API cn_tensor *cn_logical_xor(cn_tensor *a, cn_tensor *b);
/* x == s, x != s, x < s, x <= s, x > s, x >= s elementwise, bool out, as torch.eq(x, s) ...
 * (burn: equal_elem, not_equal_elem, lower_elem, lower_equal_elem, greater_elem,
 * greater_equal_elem): float and int. On floats s is first rounded to x's dtype, as PyTorch
 * converts the scalar (so x == 0.1 holds where x holds 0.1 rounded to f32); NaN compares unequal
 * to everything. On ints the comparison is exact for every s: x < 2.5 is x <= 2, x == 2.5 is
 * false, x < 1e30 is true, and no x is rounded to a double (an i64 of 2^53 + 1 is > 2^53), where
 * PyTorch would compare in float for a fractional s. No gradient. */
CN_API cn_tensor *cn_eq_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_ne_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_lt_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_le_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_gt_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_ge_scalar(cn_tensor *x, double s);

/* ---- activations as direct ops (float only: CN_ERR_KIND otherwise), as PyTorch's ---------- *
 * Each is one pass over x, differentiable, with PyTorch's gradient; NaN passes through. */
/* x > 0 ? x : negative_slope * x (F.leaky_relu). negative_slope must be finite
 * (CN_ERR_INVALID_ARG). d/dx = 1 or negative_slope (the slope at 0). */
CN_API cn_tensor *cn_leaky_relu(cn_tensor *x, double negative_slope);
/* x > 0 ? x : w x with a learned slope (F.prelu): weight is 1-D, [C] with C = x's dim 1 (one
 * slope per channel; x at least 2-D) or [1] (one for all); x's dtype. A weight of another shape
 * is CN_ERR_SHAPE. Differentiable in x (1 or w) and in weight (0 or x, summed over every dim but
 * the channels). */
CN_API cn_tensor *cn_prelu(cn_tensor *x, cn_tensor *weight);
/* min(max(x + 3, 0), 6) / 6 (F.hardsigmoid; burn: hard_sigmoid with PyTorch's constants);
 * d/dx = 1/6 inside (-3, 3), else 0. */
CN_API cn_tensor *cn_hard_sigmoid(cn_tensor *x);
/* x hard_sigmoid(x) (F.hardswish); d/dx = 0 below -3, x/3 + 1/2 up to 3, 1 above. */
CN_API cn_tensor *cn_hard_swish(cn_tensor *x);
/* log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)) (F.logsigmoid), exact to the last bits for
 * every x: no overflow for large -x (log_sigmoid(-1000) = -1000) and no rounding to 0 for large
 * x (log_sigmoid(40) = -4.2e-18). d/dx = sigmoid(-x), also computed without overflow. */
CN_API cn_tensor *cn_log_sigmoid(cn_tensor *x);
/* log1p(exp(beta x)) / beta, or x where beta x > threshold (F.softplus; PyTorch's defaults
 * are beta = 1, threshold = 20). beta finite and nonzero, threshold finite (CN_ERR_INVALID_ARG).
 * d/dx = sigmoid(beta x), or 1 past the threshold. */
CN_API cn_tensor *cn_softplus(cn_tensor *x, double beta, double threshold);
/* x > 0 ? x : alpha (exp(x) - 1) (F.elu); alpha finite (CN_ERR_INVALID_ARG). d/dx = 1 or
 * alpha exp(x). */
CN_API cn_tensor *cn_elu(cn_tensor *x, double alpha);
/* softmax(-x) along dim (F.softmin), computed as PyTorch computes it: cn_neg, then cn_softmax
 * (two passes, and two nodes in the graph). Errors as cn_softmax's, naming softmin. */
CN_API cn_tensor *cn_softmin(cn_tensor *x, int dim);

/* ---- reductions ----------------------------------------------------------------------------- *
 * The plain form reduces all elements to a 0-d tensor; the _dim form reduces one dim, keeping it
 * with size 1 when keepdim is non-zero. sum/prod/max/min accept float and int, var/logsumexp
 * float only; mean float, and int as burn's int_mean does (PyTorch has no int mean): the sum in
 * the tensor's dtype divided by the count, truncated toward zero, in that dtype (an int tensor
 * with no element to average is CN_ERR_INVALID_ARG). argmax/argmin return i64 (the first index of the extreme; over all elements: the
 * index into the row-major flattening). */
CN_API cn_tensor *cn_sum(cn_tensor *x);
CN_API cn_tensor *cn_sum_dim(cn_tensor *x, int dim, int keepdim);
CN_API cn_tensor *cn_mean(cn_tensor *x);
CN_API cn_tensor *cn_mean_dim(cn_tensor *x, int dim, int keepdim);
CN_API cn_tensor *cn_max(cn_tensor *x);
CN_API cn_tensor *cn_max_dim(cn_tensor *x, int dim, int keepdim);
CN_API cn_tensor *cn_min(cn_tensor *x);
CN_API cn_tensor *cn_min_dim(cn_tensor *x, int dim, int keepdim);
CN_API cn_tensor *cn_prod(cn_tensor *x);
CN_API cn_tensor *cn_prod_dim(cn_tensor *x, int dim, int keepdim);
CN_API cn_tensor *cn_argmax(cn_tensor *x);
CN_API cn_tensor *cn_argmax_dim(cn_tensor *x, int dim, int keepdim);
CN_API cn_tensor *cn_argmin(cn_tensor *x);
CN_API cn_tensor *cn_argmin_dim(cn_tensor *x, int dim, int keepdim);
/* Variance with Bessel-style `correction` (1 = sample variance, 0 = population). */
CN_API cn_tensor *cn_var(cn_tensor *x, int64_t correction);
CN_API cn_tensor *cn_var_dim(cn_tensor *x, int dim, int64_t correction, int keepdim);
CN_API cn_tensor *cn_logsumexp(cn_tensor *x);
CN_API cn_tensor *cn_logsumexp_dim(cn_tensor *x, int dim, int keepdim);

/* Numerically stable (max-subtracted) softmax and log-softmax along dim. Float only. */
CN_API cn_tensor *cn_softmax(cn_tensor *x, int dim);
CN_API cn_tensor *cn_log_softmax(cn_tensor *x, int dim);

/* ---- scans and sorts along a dim, any / all ------------------------------------------------ *
 * Each works along one dim (negative counts from the end; a 0-d x takes dim 0 or -1 and counts
 * as one element). The scans and sorts take float and int tensors (bool: CN_ERR_KIND, cast
 * first; any / all take bool too) and return a new tensor of x's dtype (or NULL with the error set: CN_ERR_NULL_ARG, CN_ERR_INVALID_ARG for a dim
 * out of range or a bad k, CN_ERR_KIND, the router's device errors; x is never modified).
 * The ops that find elements also give their i64 indices along dim: pass `indices` to receive
 * them (a new reference for the caller, set only on success, NULL on failure) or NULL when they
 * are not wanted. cummax, cummin, sort (and topk, argsort) compute values and indices in one
 * kernel; max / min with indices run max_dim's and argmax_dim's.
 * Differentiable on float tensors; the gradient of the values goes to the selected elements
 * (adding up where an element is selected more than once); the indices have none. Threads: as
 * every op (reads of x may run concurrently; tensor.h). */

/* Running sum and product along dim, as torch.cumsum and torch.cumprod (same shape). Ints keep
 * their dtype and wrap like it (as cn_sum; PyTorch widens ints to i64), f32 accumulates in
 * double. The gradient of cumprod is exact where x has zeros (it never divides by x). */
CN_API cn_tensor *cn_cumsum(cn_tensor *x, int dim);
CN_API cn_tensor *cn_cumprod(cn_tensor *x, int dim);
/* Running max / min along dim and the index where it was taken, as torch.cummax / cummin: among
 * equal values the last index; a NaN takes over from where it appears (each later NaN moves the
 * index to itself). */
CN_API cn_tensor *cn_cummax(cn_tensor *x, int dim, cn_tensor **indices);
CN_API cn_tensor *cn_cummin(cn_tensor *x, int dim, cn_tensor **indices);
/* Max / min along dim with the index of the first extreme (a NaN being the extreme, as in
 * PyTorch), as torch.max(x, dim) / torch.min(x, dim); keepdim as cn_max_dim. Values and indices
 * are cn_max_dim's and cn_argmax_dim's (and so are the errors, naming max / argmax). An empty
 * dim is CN_ERR_SHAPE. */
CN_API cn_tensor *cn_max_dim_indices(cn_tensor *x, int dim, int keepdim, cn_tensor **indices);
CN_API cn_tensor *cn_min_dim_indices(cn_tensor *x, int dim, int keepdim, cn_tensor **indices);
/* Sorts along dim, ascending or (descending != 0) descending, as torch.sort(stable=True): equal
 * values keep their order in both directions, NaN sorts as the largest value (last ascending,
 * first descending), -0.0 and 0.0 are equal. cn_argsort returns only the indices (i64). */
CN_API cn_tensor *cn_sort(cn_tensor *x, int dim, int descending, cn_tensor **indices);
CN_API cn_tensor *cn_argsort(cn_tensor *x, int dim, int descending);
/* The k largest (largest != 0) or smallest values along dim, as torch.topk: 0 <= k <= the size
 * of dim (else CN_ERR_INVALID_ARG). Always in sorted order (sorted is accepted for PyTorch's
 * signature), equal values by their index: the first k of cn_sort. */
CN_API cn_tensor *cn_topk(cn_tensor *x, int64_t k, int dim, int largest, int sorted,
                          cn_tensor **indices);
/* Whether any / all elements are non-zero (NaN counts as non-zero), over all elements (0-d) or
 * along dim (keepdim as cn_sum_dim), as torch.any / torch.all: float, int and bool (the CPU:
 * every dtype but f16 and bf16), bool result; over nothing, any is false and all is true. Not
 * differentiable (bool). */
CN_API cn_tensor *cn_any(cn_tensor *x);
CN_API cn_tensor *cn_any_dim(cn_tensor *x, int dim, int keepdim);
CN_API cn_tensor *cn_all(cn_tensor *x);
CN_API cn_tensor *cn_all_dim(cn_tensor *x, int dim, int keepdim);
/* The largest |x|, over all elements or along dim: cn_max(cn_abs(x)) (burn's max_abs); float and
 * int; differentiable where |x| is (not at 0). */
CN_API cn_tensor *cn_max_abs(cn_tensor *x);
CN_API cn_tensor *cn_max_abs_dim(cn_tensor *x, int dim, int keepdim);

/* ---- linear algebra ------------------------------------------------------------------------- */
/* a: [..., M, K], b: [..., K, N] -> [..., M, N]; batch dims broadcast; 1-D operands are promoted
 * as in numpy.matmul. Float, and i32 / i64 (burn's int_matmul, torch.matmul on integers; the
 * products and sums wrap around, and integers are never tracked by autodiff). */
CN_API cn_tensor *cn_matmul(cn_tensor *a, cn_tensor *b);
/* x: [..., in], w: [out, in], b: [out] or NULL -> x @ w^T + b. */
CN_API cn_tensor *cn_linear(cn_tensor *x, cn_tensor *w, cn_tensor *b);
/* gelu(x @ w^T + b): cn_gelu(cn_linear(x, w, b), approx) as one op (a transformer MLP's first
 * layer). x: [..., in], w: [out, in], b: [out] or NULL -> [..., out]; float. The CPU applies the
 * bias and gelu to each block of rows while it is in cache, and under autodiff writes gelu' of
 * the same values beside the output (one more [..., out] tensor, kept by the graph), so that the
 * backward multiplies by it instead of recomputing gelu; the values are those of the two ops.
 * Errors: cn_linear's, and CN_ERR_INVALID_ARG for an approx other than CN_GELU_ERF or
 * CN_GELU_TANH (nothing computed). Any thread, as every op. */
CN_API cn_tensor *cn_linear_gelu(cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_gelu_approx approx);
/* x @ w^T + b + r: cn_add(cn_linear(x, w, b), r) as one op (a transformer block's projection
 * back into its residual stream, r the stream). x: [..., in], w: [out, in], b: [out] or NULL,
 * r: [..., out], exactly the output's shape (no broadcasting), of x's dtype and device -> a new
 * [..., out]; float. The CPU adds the bias and then r to each block of rows while it is in cache,
 * instead of in a pass (and an output) of its own; the values are those of the two ops. r's
 * gradient is the output's. Errors: cn_linear's; CN_ERR_NULL_ARG for a NULL r; CN_ERR_SHAPE when
 * r's shape is not the output's; CN_ERR_KIND / CN_ERR_DTYPE / the router's device errors for an r
 * of another kind, dtype or device (nothing computed). Any thread, as every op. */
CN_API cn_tensor *cn_linear_add(cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_tensor *r);

/* ---- layout --------------------------------------------------------------------------------- */
/* Concatenates n tensors (same dtype, device, and shape except along dim). Sizes along dim that
 * add up past int64 are CN_ERR_OVERFLOW. */
CN_API cn_tensor *cn_cat(cn_tensor *const *ts, int n, int dim);
/* Stacks n tensors of one shape along a new dim. */
CN_API cn_tensor *cn_stack(cn_tensor *const *ts, int n, int dim);
/* A dense copy of x with storage of its own (like torch.clone); differentiable. */
CN_API cn_tensor *cn_clone(cn_tensor *x);
/* Non-zero when a and b are views of the same memory (one storage: a view of a view of x shares
 * x's), even where the elements they reach do not overlap; 0 when they do not, or either is NULL.
 * A tracked tensor and the concrete tensor under it (cn_inner) share memory. Sets no error, takes
 * no reference. */
CN_API int cn_shares_memory(const cn_tensor *a, const cn_tensor *b);

/* Views of consecutive pieces of `size` along dim (the last may be smaller). Returns the number
 * of pieces (like snprintf, even when more than max_parts) and writes references to the first
 * min(pieces, max_parts) into parts; -1 on error, with nothing written. */
CN_API int cn_split(cn_tensor *x, int64_t size, int dim, cn_tensor **parts, int max_parts);
/* `chunks` pieces of equal size (the last may be smaller), like torch.chunk. Same contract. */
CN_API int cn_chunk(cn_tensor *x, int chunks, int dim, cn_tensor **parts, int max_parts);
/* out[i][j] = x[index[i][j]][j] along dim (index: i64, same ndim as x, sizes <= x's off dim). */
CN_API cn_tensor *cn_gather(cn_tensor *x, int dim, cn_tensor *index);
/* A copy of x with src[i][j] added at out[index[i][j]][j] along dim (index, src same shape). */
CN_API cn_tensor *cn_scatter_add(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src);
/* Selects entries along dim by a 1-D i64 index. */
CN_API cn_tensor *cn_index_select(cn_tensor *x, int dim, cn_tensor *index);
/* index (int tensor, any shape) -> shape + [num_classes] of `dtype`, 1 at each index. */
CN_API cn_tensor *cn_one_hot(cn_tensor *index, int64_t num_classes, cn_dtype dtype);

/* ---- indexing: masks, triangles, flips, repeats and assignments (issue 16) -------------------- *
 * Each returns a new contiguous tensor (one reference for the caller; x and the other inputs are
 * never modified) or NULL with the error set and nothing leaked. Any thread may call them on
 * tensors it may read. Float, int and bool tensors are accepted (index_add: float and int), and
 * gradients flow to every float tensor input; index and mask inputs have none. Index values are
 * checked before anything is written: a value outside [0, size) is CN_ERR_INDEX naming its
 * position (negative values are not wrapped, unlike PyTorch's index_copy). A dim outside
 * [-ndim, ndim) is CN_ERR_INVALID_ARG, an index that is not i64 CN_ERR_DTYPE (or CN_ERR_KIND for
 * a float or bool one), a mask that is not bool CN_ERR_KIND. */

/* torch.masked_fill(x, mask, value): x with `value` wherever mask is true. mask is bool and
 * broadcasts to x's shape (the result has x's shape; a mask that would make it larger is
 * CN_ERR_SHAPE). value is converted to x's dtype (truncated toward zero for ints, where it must
 * lie in the dtype's range: CN_ERR_INVALID_ARG otherwise; nonzero is true for bool). The CPU
 * takes f32, f64, i32, i64, u8 and bool (f16 and bf16: CN_ERR_DTYPE; CUDA takes them). Gradient
 * to x: g, zero where the mask is true. */
CN_API cn_tensor *cn_masked_fill(cn_tensor *x, cn_tensor *mask, double value);

/* torch.tril / torch.triu over the last two dims of x (ndim >= 2, else CN_ERR_SHAPE): the entries
 * [.., i, j] with j - i <= diagonal (tril) or j - i >= diagonal (triu) are kept, the others are
 * zero (false for bool). Any diagonal is valid (0: the main one, > 0 above it, < 0 below).
 * Gradient: the same triangle of g. */
CN_API cn_tensor *cn_tril(cn_tensor *x, int64_t diagonal);
CN_API cn_tensor *cn_triu(cn_tensor *x, int64_t diagonal);

/* torch.flip(x, dims): x with the order of entries reversed along each of dims[0..n) (0 <= n <=
 * ndim; negative dims count from the end; a dim named twice is CN_ERR_INVALID_ARG, as in
 * PyTorch). dims may be NULL when n is 0 (a copy). Gradient: g flipped the same way. */
CN_API cn_tensor *cn_flip(cn_tensor *x, const int *dims, int n);

/* Tensor.repeat(*repeats): x tiled repeats[d] times along each dim. n >= ndim(x) (CN_ERR_SHAPE
 * otherwise); when n > ndim, x is treated as having n - ndim leading dims of size 1, so the
 * result has n dims of size x_size[d] * repeats[d]. A negative repeat is CN_ERR_INVALID_ARG, 0
 * gives an empty dim, and a size that passes int64 is CN_ERR_OVERFLOW. To repeat along one dim
 * only, pass 1 for the others. Gradient: the sum of g over the copies. */
CN_API cn_tensor *cn_repeat(cn_tensor *x, const int64_t *repeats, int n);

/* torch.scatter(x, dim, index, src): a copy of x with out[index[i][j]][j] = src[i][j] along dim
 * (index i64 with x's ndim and sizes no larger than x's off dim; src of index's shape and x's
 * dtype; as cn_scatter_add). Where index names one position more than once, the write with the
 * largest position along dim wins (PyTorch leaves this undefined; cinder picks the last write,
 * on every backend). Gradients: to x, g with zeros at the scattered positions; to src, g at the
 * position each entry was written to, and zero for the entries that a later write overwrote. */
CN_API cn_tensor *cn_scatter(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src);

/* torch.slice_scatter(x, values, dim, start, end, step) (x[.., start:end:step, ..] = values on a
 * copy): start and end as cn_slice takes them (negative from the end, clamped to the size); step
 * >= 1 (CN_ERR_INVALID_ARG otherwise). values must have x's dtype and the shape of that slice
 * (CN_ERR_SHAPE; it does not broadcast). burn's slice_assign for one dim; nest calls for more.
 * Gradients: to x, g with the slice zeroed; to values, the slice of g. */
CN_API cn_tensor *cn_slice_assign(cn_tensor *x, cn_tensor *values, int dim, int64_t start,
                                  int64_t end, int64_t step);

/* torch.index_copy(x, dim, index, src): a copy of x with the slices src[.., i, ..] written at
 * x[.., index[i], ..] along dim (index 1-D i64; src of x's dtype, with x's shape except
 * len(index) at dim: CN_ERR_SHAPE otherwise). A repeated index value keeps the last src slice
 * (PyTorch leaves this undefined). Gradients: to x, g zeroed in the written slices; to src, the
 * slices of g it was written to, zero for the overwritten ones. */
CN_API cn_tensor *cn_index_copy(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src);

/* torch.index_add(x, dim, index, src): as cn_index_copy, adding src's slices (repeated index
 * values add up, in index order). Float and int. burn's select_assign (whose default sums).
 * Gradients: to x, g; to src, g's slices at index (cn_index_select). */
CN_API cn_tensor *cn_index_add(cn_tensor *x, int dim, cn_tensor *index, cn_tensor *src);

/* Tensor.unfold(dim, size, step): every window of `size` consecutive entries along dim, starting
 * every `step` entries: the result has x's dims with (size_dim - size) / step + 1 windows at dim,
 * and a last dim of `size` (out[.., w, .., j] = x[.., w * step + j, ..]). A copy, where PyTorch's
 * is a view. x has at least 1 and at most CN_MAX_DIMS - 1 dims (CN_ERR_SHAPE); 0 <= size <=
 * size_dim and step >= 1 (CN_ERR_INVALID_ARG). Gradient: the windows' gradients summed back into
 * the entries they cover (overlapping windows add up). */
CN_API cn_tensor *cn_unfold(cn_tensor *x, int dim, int64_t size, int64_t step);

/* torch.nonzero(x) (torch.argwhere): the coordinates of the nonzero entries of x (true for bool;
 * NaN counts as nonzero, -0.0 as zero), one row each in row-major order: [count, ndim] of i64. The
 * count depends on the data: it is read back first (on a GPU this waits for the queued work). No
 * gradient (the result is i64). */
CN_API cn_tensor *cn_nonzero(cn_tensor *x);

/* torch.masked_select(x, mask): the entries of x where mask (bool) is true, in row-major order,
 * as a 1-D tensor of x's dtype; x and mask broadcast together (CN_ERR_SHAPE when they do not).
 * The count is read back first, as for cn_nonzero. Gradient to x: g put back at the selected
 * positions, zero elsewhere (summed over broadcast dims). */
CN_API cn_tensor *cn_masked_select(cn_tensor *x, cn_tensor *mask);

/* gather_nd / scatter_nd: ONNX's GatherND and ScatterND (TensorFlow's gather_nd and
 * tensor_scatter_nd_*; burn's gather_nd / scatter_nd), which PyTorch has no single call for.
 * index is i64 of shape [B.., K] with 1 <= K <= ndim(x): each of its B.. rows is a tuple of K
 * coordinates naming the slice x[i0, .., iK-1, ...] (a single entry when K = ndim(x)). Values
 * must lie in [0, size) of their dim (CN_ERR_INDEX; negative values are not wrapped, unlike
 * ONNX's). */

/* out[b..] = x[index[b..]]: shape B.. + x's shape past K (at most CN_MAX_DIMS dims: CN_ERR_SHAPE).
 * Gradient to x: g added back at each tuple (repeats add up). */
CN_API cn_tensor *cn_gather_nd(cn_tensor *x, cn_tensor *index);

/* How scatter_nd combines an update with what is there. */
typedef enum cn_scatter_reduce {
    CN_SCATTER_ASSIGN = 0, /* replace (ONNX's "none") */
    CN_SCATTER_ADD = 1,
    CN_SCATTER_MUL = 2,
    CN_SCATTER_MIN = 3,
    CN_SCATTER_MAX = 4
} cn_scatter_reduce;

/* A copy of x with each updates[b..] (shape B.. + x's shape past K, of x's dtype) combined into
 * the slice x[index[b..]] by `reduce`. Repeated tuples are applied in row-major order of index,
 * on every backend: with CN_SCATTER_ASSIGN the last one wins (ONNX leaves it undefined). ASSIGN
 * takes every dtype; the other reductions f32, f64, i32 and i64 (CN_ERR_KIND for bool, the
 * kernel's CN_ERR_DTYPE for u8, f16 and bf16). An unknown reduce is CN_ERR_INVALID_ARG.
 * Gradients: ASSIGN as cn_scatter (to x: g zeroed where written; to updates: g at their tuple
 * where they won); ADD: g to x, g gathered at each tuple to updates; MUL: g times the product of
 * the other factors (exact with zeros: no division by a zero factor); MIN / MAX: g to the
 * entries (x's or updates') equal to the result, shared equally among ties, as PyTorch's
 * scatter_reduce amin/amax. */
CN_API cn_tensor *cn_scatter_nd(cn_tensor *x, cn_tensor *index, cn_tensor *updates,
                                cn_scatter_reduce reduce);

/* ---- resampling (issue 16) ----------------------------------------------------------------- *
 * Each returns a new contiguous tensor (one reference for the caller; the inputs are never
 * modified) or NULL with the error set and nothing leaked. Any thread may call them on tensors it
 * may read. */

/* interpolate's modes (torch.nn.functional.interpolate's mode strings). */
typedef enum cn_interp_mode {
    CN_INTERP_NEAREST = 0, /* "nearest": entry floor(o * in / out), not "nearest-exact" */
    CN_INTERP_LINEAR = 1,  /* "linear" for [N, C, L], "bilinear" for [N, C, H, W] */
    CN_INTERP_BICUBIC = 2  /* "bicubic" ([N, C, H, W] only): Keys' cubic with A = -0.75 */
} cn_interp_mode;

/* torch.nn.functional.interpolate(x, size or scale_factor, mode, align_corners) (antialias off,
 * recompute_scale_factor None): x [N, C, L] (n = 1) or [N, C, H, W] (n = 2), f32 or f64 (other
 * dtypes: CN_ERR_KIND or the kernel's CN_ERR_DTYPE), resampled along its last n dims. Pass
 * exactly one of size (n output sizes, each >= 1) and scale (n factors, positive and finite:
 * each output size is floor(in * scale), which must be >= 1; the source positions then use 1 /
 * scale, not in / out, as PyTorch's do). Source positions follow PyTorch: half-pixel centres
 * (src = (o + 0.5) / scale - 0.5), or with align_corners = 1 the corners aligned
 * (src = o * (in - 1) / (out - 1)), nearest taking floor(o / scale) in float arithmetic; border
 * taps are clamped to the edge. Values match PyTorch's up to float rounding (f64: ~1e-15),
 * including its CPU quirk for nearest with a scale factor: in 2-D an output size equal to the
 * input's (or twice it) reads entry o (o / 2), in 1-D the formula's floor(o / scale).
 * Errors: x NULL (CN_ERR_NULL_ARG), n not 1 or 2 or x's ndim not n + 2 or an empty spatial dim
 * (CN_ERR_INVALID_ARG / CN_ERR_SHAPE), size and scale both NULL (CN_ERR_NULL_ARG) or both given,
 * a size < 1, a bad or too small scale, an unknown mode, bicubic with n = 1, align_corners not 0
 * or 1 or set with nearest (CN_ERR_INVALID_ARG), an output size past int64 (CN_ERR_OVERFLOW).
 * Gradient to x: the adjoint, each g entry added back at the entries it was read from with the
 * weights it was read with. */
CN_API cn_tensor *cn_interpolate(cn_tensor *x, int n, const int64_t *size, const double *scale,
                                 cn_interp_mode mode, int align_corners);

/* grid_sample_2d's modes and paddings (torch.nn.functional.grid_sample's strings). */
typedef enum cn_grid_mode { CN_GRID_BILINEAR = 0, CN_GRID_NEAREST = 1 } cn_grid_mode;
typedef enum cn_grid_padding {
    CN_GRID_PAD_ZEROS = 0,     /* "zeros": positions outside x read 0 */
    CN_GRID_PAD_BORDER = 1,    /* "border": positions clipped to x's edges */
    CN_GRID_PAD_REFLECTION = 2 /* "reflection": positions reflected off x's borders, then clipped */
} cn_grid_padding;

/* torch.nn.functional.grid_sample(x, grid, mode, padding_mode, align_corners) for 4-D x:
 * out[n, c, i, j] samples x[n, c] at grid[n, i, j] = (gx, gy), gx along W and gy along H,
 * normalized so that -1 and 1 are x's corner pixels' centres (align_corners = 1) or outer edges
 * (0). x [N, C, H, W] (H, W >= 1) and grid [N, OH, OW, 2] are f32 or f64 of one dtype; the result
 * is [N, C, OH, OW]. Nearest rounds half to even (nearbyint, as PyTorch). Errors: NULL inputs
 * (CN_ERR_NULL_ARG), a non-float x (CN_ERR_KIND), dtypes that differ (CN_ERR_DTYPE), shapes not
 * as above or grid's N not x's (CN_ERR_SHAPE), an unknown mode or padding, align_corners not 0
 * or 1 (CN_ERR_INVALID_ARG). Gradients: to x, g scattered back along the taps; to grid (bilinear),
 * the derivative of the sampled value in gx and gy (0 where clipped, sign-flipped where
 * reflected, as PyTorch); nearest's grid gradient is 0. */
CN_API cn_tensor *cn_grid_sample_2d(cn_tensor *x, cn_tensor *grid, cn_grid_mode mode,
                                    cn_grid_padding padding, int align_corners);

/* torch.hann_window / hamming_window / blackman_window(n, periodic, dtype, device): a 1-D tensor
 * of n entries (n = 1: [1]; n = 0: empty), w[k] = a0 - a1 cos(2 pi k / d) + a2 cos(4 pi k / d)
 * with d = n when periodic (the window of n + 1 entries without its last, for spectral analysis)
 * or n - 1 when symmetric (periodic = 0, for filter design): hann a = (0.5, 0.5), hamming (0.54,
 * 0.46), blackman (0.42, 0.5, 0.08). Computed on the host in f64, then converted to dtype (any
 * float dtype) on `device`: the same values on every backend; no gradient (a constant). Errors:
 * n < 0 or periodic not 0 or 1 (CN_ERR_INVALID_ARG), n past 2^53 (CN_ERR_OVERFLOW), a dtype
 * that is not a float one (CN_ERR_DTYPE), the device's errors. */
CN_API cn_tensor *cn_hann_window(int64_t n, int periodic, cn_dtype dtype, cn_device device);
CN_API cn_tensor *cn_hamming_window(int64_t n, int periodic, cn_dtype dtype, cn_device device);
CN_API cn_tensor *cn_blackman_window(int64_t n, int periodic, cn_dtype dtype, cn_device device);

/* ---- the real FFT (issue 16) ---------------------------------------------------------------- *
 * cinder has no complex dtype: a complex tensor is a real one with a trailing dim of 2 (real,
 * imaginary), the layout of torch.view_as_real. burn's rfft returns the two parts as two tensors
 * instead: cn_squeeze(cn_slice(y, -1, 0, 1, 1), -1) and cn_squeeze(cn_slice(y, -1, 1, 2, 1), -1)
 * are those parts (views), and cn_stack((cn_tensor *[]){re, im}, 2, -1) makes irfft's input from
 * them. One tensor keeps the transform one differentiable op.
 *
 * Each returns a new contiguous tensor (one reference for the caller; the input is never
 * modified) or NULL with the error set and nothing leaked. Any thread may call them on tensors it
 * may read.
 *
 * Precision and cost. f32 runs kissfft's FFT on the CPU (float arithmetic: errors of a few float
 * ulps times log n, relative to the signal's size; O(n log n) for lengths of small prime factors,
 * O(n p) for a prime factor p, as kissfft's generic butterfly is) and cuFFT on CUDA. kissfft computes in
 * float only, so f64 on the CPU is the DFT by its definition in double (the lines times matrices
 * of twiddles, on OpenBLAS; twiddle angles from exact index arithmetic): accurate to ~1e-15
 * relative, but O(n^2) per transform, fine for checks and signals of a few thousand points; for
 * long f64 signals cast to f32 (cn_cast) or run on CUDA, where cuFFT computes f64 in
 * O(n log n). f16 and bf16 are refused
 * (CN_ERR_DTYPE: cast to f32). */

/* Normalisation modes, torch.fft's norm strings. With the same mode on both sides irfft(rfft(x))
 * is x. */
typedef enum cn_fft_norm {
    CN_FFT_BACKWARD = 0, /* "backward" (PyTorch's default): rfft unscaled, irfft times 1 / n */
    CN_FFT_FORWARD = 1,  /* "forward": rfft times 1 / n, irfft unscaled */
    CN_FFT_ORTHO = 2     /* "ortho": both times 1 / sqrt(n) (the transform is orthonormal) */
} cn_fft_norm;

/* torch.view_as_real(torch.fft.rfft(x, n, dim, norm)): the DFT of the real signals along dim of
 * x (f32 or f64, any strides, ndim 1 to CN_MAX_DIMS - 1), of length n: x is cut to its first n
 * entries along dim, or zero-padded to n; n = -1 takes x's size there (PyTorch's None). Returns
 * x's shape with dim's size n / 2 + 1 (the bins 0..n/2: the rest are their conjugates), plus a
 * trailing dim of 2: y[.., k, .., 0] + i y[.., k, .., 1] = scale * sum_j x[.., j, ..]
 * exp(-2 pi i j k / n), scale from norm. The imaginary parts of bin 0 and, for even n, of bin
 * n / 2 are exactly 0. Any n >= 1 (odd ones too). dim may be negative (counted from the end).
 * Errors: x NULL (CN_ERR_NULL_ARG); int or bool x (CN_ERR_KIND: cast to f32 or f64); x 0-d or
 * with CN_MAX_DIMS dims, dim out of range (CN_ERR_SHAPE / CN_ERR_INVALID_ARG); n = 0, n < -1,
 * n = -1 with an empty dim, n past 2^31 - 1, an unknown norm (CN_ERR_INVALID_ARG); f16 / bf16
 * (CN_ERR_DTYPE). Gradient: the adjoint, an irfft of the output gradient with the bins that
 * stand for two (all but bin 0 and the Nyquist bin) halved, the norm's dual and the result cut
 * or zero-padded back to x's size at dim (formulas_fft.c derives it). */
CN_API cn_tensor *cn_rfft(cn_tensor *x, int64_t n, int dim, cn_fft_norm norm);

/* torch.fft.irfft(torch.view_as_complex(spectrum), n, dim, norm): the real signals of length n
 * whose spectrum along dim is `spectrum` [.., F, .., 2] (f32 or f64, any strides; the trailing
 * 2 holds real and imaginary parts, as cn_rfft returns them; dim counts the dims before it and
 * may be negative). The first n / 2 + 1 bins are used (spectrum cut, or zero-padded past F), the
 * others taken as their conjugates (Hermitian symmetry); the imaginary parts of bin 0 and, for
 * even n, of bin n / 2 are ignored, as PyTorch's CPU transform does (for such input PyTorch's
 * CUDA result is not defined). n = -1 takes 2 (F - 1) (PyTorch's None: pass n for an odd
 * length). Returns the spectrum's shape less the trailing 2, with dim's size n:
 * x[.., j, ..] = scale * sum over all n bins Z[k] exp(2 pi i j k / n), scale from norm.
 * Errors: spectrum NULL (CN_ERR_NULL_ARG); int or bool (CN_ERR_KIND); fewer than 2 dims or a
 * last dim other than 2 (CN_ERR_SHAPE: build it with cn_stack of the real and imaginary parts
 * along -1); dim out of range (CN_ERR_INVALID_ARG); n = 0, n < -1, n = -1 with F < 2, n past
 * 2^31 - 1, an unknown norm (CN_ERR_INVALID_ARG); f16 / bf16 (CN_ERR_DTYPE). Gradient: the
 * adjoint, an rfft of the output gradient with the bins that stand for two doubled, the norm's
 * dual, cut or zero-padded back to F bins (0 for the ignored imaginary parts). */
CN_API cn_tensor *cn_irfft(cn_tensor *spectrum, int64_t n, int dim, cn_fft_norm norm);

/* ---- convolution and pooling (NCHW) --------------------------------------------------------- */
typedef struct cn_conv2d_params {
    int64_t stride[2];   /* (h, w); 0 is taken as 1 */
    int64_t padding[2];  /* zero padding (h, w) */
    int64_t dilation[2]; /* 0 is taken as 1 */
    int64_t groups;      /* 0 is taken as 1 */
} cn_conv2d_params;

/* x: [N, C, H, W], w: [O, C/groups, KH, KW], b: [O] or NULL -> [N, O, OH, OW]. Float only.
 * Any int64 stride is accepted (a stride past the input keeps the first window); a padding or
 * dilation whose padded input or window span passes int64 is CN_ERR_OVERFLOW. */
CN_API cn_tensor *cn_conv2d(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv2d_params *p);
/* relu(cn_conv2d(x, w, b, p)) as one op (oneDNN's conv + relu post-op): the activation is applied
 * while each image's output is still in cache, and its gradient masks g by the output, so the
 * convolution's output is never written and read back for the relu. Same arguments, errors and
 * values as the two calls (bit for bit on the CPU); on a backend without a fused kernel it is
 * the two calls. `cn_sequential_new` models use it for each Conv2d followed by a ReLU. */
CN_API cn_tensor *cn_conv2d_relu(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                                 const cn_conv2d_params *p);
/* cn_max_pool2d(cn_conv2d(x, w, b, p), {{k, k}, {k, k}, {0, 0}}) as one op: each image's
 * convolution output is pooled by k x k windows at stride k while it is in cache, and never
 * written out; for the gradient the op keeps each window's choice (a byte) instead of that
 * output. Same values and gradients as the two calls (bit for bit on the CPU), same errors
 * (those of conv2d name conv2d_max_pool2d; a window larger than the convolution's output is
 * max_pool2d's error); k in 2..15, else CN_ERR_INVALID_ARG. On a backend without the fused
 * kernel it is the two calls. `cn_sequential_new` models use it for each Conv2d followed by
 * such a MaxPool2d (with or without a ReLU between). */
CN_API cn_tensor *cn_conv2d_max_pool2d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                                       const cn_conv2d_params *p, int64_t k);

typedef struct cn_pool2d_params {
    int64_t kernel[2];
    int64_t stride[2];   /* 0 is taken as the kernel size */
    int64_t padding[2];  /* at most half the kernel */
} cn_pool2d_params;

/* x: [N, C, H, W] -> [N, C, OH, OW]. Max ignores padding; avg counts padded zeros (PyTorch's
 * count_include_pad=True default). A padded input that passes int64 is CN_ERR_OVERFLOW. */
CN_API cn_tensor *cn_max_pool2d(cn_tensor *x, const cn_pool2d_params *p);
CN_API cn_tensor *cn_avg_pool2d(cn_tensor *x, const cn_pool2d_params *p);

/* ---- attention (issue 16) -------------------------------------------------------------------- */

/* torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p=0, is_causal,
 * scale) as one fused op: q [B.., Lq, D], k [B.., Lk, D], v [B.., Lk, Dv] -> [B.., Lq, Dv],
 *     out_i = sum_j softmax_j(scale * q_i . k_j + attn_mask_ij) v_j
 * q, k and v share one float dtype, a device and their batch dims B.. (none or several; expand
 * them with cn_expand to share); attn_mask is NULL or an additive float mask of that dtype that
 * broadcasts to [B.., Lq, Lk] (use -INFINITY to leave a key out). is_causal != 0 leaves out key
 * j > i for query i (top-left aligned when Lq != Lk, as PyTorch's is_causal), on top of the mask
 * when both are given (PyTorch refuses both at once). scale 0 means 1 / sqrt(D) (1 when D is 0);
 * otherwise it must be finite. No dropout.
 * A row whose keys are all left out (its mask all -inf, or Lk = 0) gives zeros, as PyTorch 2.5
 * and later do (older PyTorch gives NaN), and passes no gradient.
 * Memory: the forward computes blockwise with an online softmax and keeps only the output and
 * each row's log-sum-exp ([B.., Lq]); the backward recomputes the probabilities block by block
 * from q, k, v and those, so no [B.., Lq, Lk] tensor exists unless attn_mask itself needs a
 * gradient (its gradient has that size before the sum over its broadcast dims).
 * Gradients: to q, k, v, and to attn_mask when it is tracked.
 * Errors: CN_ERR_NULL_ARG; CN_ERR_KIND (not float); CN_ERR_DTYPE (dtypes differ); CN_ERR_SHAPE
 * (fewer than 2 dims, batch dims that differ, q's and k's D or k's and v's Lk that differ, a mask
 * that does not broadcast); CN_ERR_INVALID_ARG (scale NaN or infinite); the router's device
 * errors. Returns a new tensor; takes no reference. Threads: as every op (tensor.h). */
CN_API cn_tensor *cn_scaled_dot_product_attention(cn_tensor *q, cn_tensor *k, cn_tensor *v,
                                                  cn_tensor *attn_mask, int is_causal,
                                                  double scale);

/* ---- normalisation (issue 17) ---------------------------------------------------------------- */

/* torch.nn.functional.layer_norm(x, normalized_shape, weight, bias, eps) as one fused op: x's
 * last `ndim` dims must equal normalized_shape[0..ndim), and each slice over them (a row of
 * N = their product elements) is normalised with its own mean and biased variance,
 *     y = (x - mean) * rstd * weight + bias,    rstd = 1 / sqrt(var + eps)
 * weight and bias are NULL or tensors of shape normalized_shape, of x's float dtype and device
 * (either may be given without the other, as in PyTorch). eps must be finite and >= 0 (PyTorch's
 * default is 1e-5).
 * Numerics: the mean and variance are two passes over the row (mean, then the sum of squared
 * deviations: no cancellation), accumulated in x's dtype (f32 for f32, as PyTorch's CPU kernel)
 * with 16 (f32) or 8 (f64) partial sums, so the loops vectorise. The node keeps each row's mean
 * and rstd (x's leading dims, x's dtype) for the backward, which computes x's gradient in one
 * pass per row and the weight's and bias's as sums over rows (a partial sum per chunk of rows,
 * added in chunk order: the result follows the chunk count, set by the thread count, never the
 * timing).
 * Gradients: to x, weight and bias. There is no double backward in cinder (cn_backward runs its
 * formulas without recording), so no gradient of a gradient can be asked for, right or wrong.
 * On a backend without the fused kernel (a program's, written before it) it is the composed
 * formula through public ops (mean_dim, sub, mul, rsqrt, add): same values within rounding.
 * Errors: CN_ERR_NULL_ARG (x or normalized_shape NULL); CN_ERR_KIND (not float); CN_ERR_DTYPE
 * (weight's or bias's dtype is not x's); CN_ERR_INVALID_ARG (ndim outside [1, CN_MAX_DIMS], a
 * negative size in normalized_shape, eps negative or NaN or infinite); CN_ERR_SHAPE (x has fewer
 * than ndim dims or its trailing dims differ from normalized_shape, weight's or bias's shape is
 * not normalized_shape); the router's device errors. Returns a new tensor; takes no reference.
 * Threads: as every op (tensor.h). */
CN_API cn_tensor *cn_layer_norm(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                                cn_tensor *weight, cn_tensor *bias, double eps);

/* cn_rms_norm's eps when PyTorch's is None: the machine epsilon of x's dtype (torch.finfo(x.dtype)
 * .eps: 2^-23 for f32, 2^-52 for f64). Any other negative eps is an error. */
#define CN_RMS_NORM_EPS_DEFAULT (-1.0)

/* torch.nn.functional.rms_norm(x, normalized_shape, weight, eps) as one fused op: each slice over
 * x's last `ndim` dims (which must equal normalized_shape) is scaled by the inverse of its root
 * mean square,
 *     y = x * rstd * weight,    rstd = 1 / sqrt(mean(x^2) + eps)
 * weight: NULL or a tensor of shape normalized_shape, of x's float dtype and device. eps: finite
 * and >= 0, or CN_RMS_NORM_EPS_DEFAULT for PyTorch's eps=None (the dtype's epsilon).
 * Numerics, memory and gradients as cn_layer_norm's (the node keeps each row's rstd); gradients
 * to x and weight. Errors: as cn_layer_norm's (eps: negative other than
 * CN_RMS_NORM_EPS_DEFAULT, NaN or infinite is CN_ERR_INVALID_ARG). Returns a new tensor; takes no
 * reference. Threads: as every op (tensor.h). */
CN_API cn_tensor *cn_rms_norm(cn_tensor *x, const int64_t *normalized_shape, int ndim,
                              cn_tensor *weight, double eps);

/* ---- ctc_loss (issue 16) --------------------------------------------------------------------- */

/* How a loss combines its per-sample values (PyTorch's reduction=: 'none', 'mean', 'sum'). */
typedef enum cn_reduction {
    CN_REDUCTION_NONE = 0, /* one value per sample */
    CN_REDUCTION_MEAN = 1,
    CN_REDUCTION_SUM = 2
} cn_reduction;

/* torch.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank,
 * reduction, zero_infinity): the connectionist temporal classification loss, -log of the
 * probability of each target over all its alignments.
 * log_probs: [T, N, C] float (log-probabilities, e.g. from cn_log_softmax over C), or [T, C] for
 * one unbatched sample. targets: an int tensor, [N, S] padded (row n's first target_lengths[n]
 * entries are used) or 1-D, the targets concatenated (length the sum of target_lengths); [S] when
 * unbatched. input_lengths, target_lengths: int tensors of N entries ([N]; 0-d or [1] unbatched),
 * on log_probs' device. Target values in [0, C) and != blank; 0 <= input_lengths[n] <= T;
 * target_lengths[n] >= 0 (and <= S when padded). blank in [0, C).
 * Per-sample loss: +inf when no alignment fits input_lengths[n] steps (0 when zero_infinity).
 * reduction: NONE gives [N] ([] unbatched); MEAN: the mean over the batch of each loss divided by
 * max(target_lengths[n], 1), as PyTorch; SUM: the sum. A 0-d result otherwise.
 * Gradient: to log_probs, the exact d(loss)/d(log_probs) (alpha-beta), which finite differences
 * confirm; PyTorch's own kernel adds exp(log_probs) * g at every step t < input_lengths[n], a term
 * that vanishes when log_probs come from log_softmax (so gradients to the logits agree) but not
 * for log_probs used directly. An impossible sample's gradient is NaN, or 0 with zero_infinity,
 * as PyTorch's.
 * The lengths and targets are read to the host to be checked (on a GPU this waits for queued
 * work). Errors: CN_ERR_NULL_ARG; CN_ERR_KIND (log_probs not float, or an int argument not int);
 * CN_ERR_SHAPE (ranks, N or S that differ, a concatenated length that is not the sum);
 * CN_ERR_INVALID_ARG (blank outside [0, C), an unknown reduction, a length out of range);
 * CN_ERR_INDEX (a target outside [0, C) or equal to blank); the router's device errors. Returns a
 * new tensor; takes no reference. Threads: as every op (tensor.h). */
CN_API cn_tensor *cn_ctc_loss(cn_tensor *log_probs, cn_tensor *targets, cn_tensor *input_lengths,
                              cn_tensor *target_lengths, int64_t blank, cn_reduction reduction,
                              int zero_infinity);
/* ---- more convolutions (issue 16): transposed and 1-D, PyTorch's semantics ------------------- *
 * Like cn_conv2d: float only (f32, f64), inputs of one dtype and device, the result a new tensor
 * the caller releases; a NULL p takes the defaults (stride 1, padding 0, output_padding 0,
 * dilation 1, groups 1) and a 0 in stride, dilation or groups is taken as 1. Errors return NULL
 * with the inputs untouched: a negative value or an output_padding not below the stride or the
 * dilation (PyTorch's rule) is CN_ERR_INVALID_ARG; wrong ranks, channels that do not match the
 * weight, groups that do not divide them, a bias that is not [O], or an empty output is
 * CN_ERR_SHAPE; sizes past int64 are CN_ERR_OVERFLOW; each message names the call and the
 * argument. Gradients flow to x (the adjoint convolution), w and b. Threads: as every op (ops
 * run concurrently on distinct tensors). */
typedef struct cn_conv_transpose2d_params {
    int64_t stride[2];         /* (h, w); 0 is taken as 1 */
    int64_t padding[2];        /* removed from each side of the full output (h, w) */
    int64_t output_padding[2]; /* extra rows / columns at the end; < stride or < dilation */
    int64_t dilation[2];       /* 0 is taken as 1 */
    int64_t groups;            /* 0 is taken as 1 */
} cn_conv_transpose2d_params;

/* torch.nn.functional.conv_transpose2d: x [N, C, H, W], w [C, O/groups, KH, KW] (C divisible by
 * groups), b [O] or NULL -> [N, O, OH, OW] with OH = (H - 1) sh - 2 ph + dh (KH - 1) + oph + 1
 * (OW likewise): the adjoint of cn_conv2d with w, each input pixel spreading its weighted window
 * over the output at stride s. */
CN_API cn_tensor *cn_conv_transpose2d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                                      const cn_conv_transpose2d_params *p);

typedef struct cn_conv1d_params {
    int64_t stride;   /* 0 is taken as 1 */
    int64_t padding;  /* zero padding on both ends */
    int64_t dilation; /* 0 is taken as 1 */
    int64_t groups;   /* 0 is taken as 1 */
} cn_conv1d_params;

/* torch.nn.functional.conv1d: x [N, C, L], w [O, C/groups, K], b [O] or NULL -> [N, O, OL] with
 * OL = (L + 2 padding - dilation (K - 1) - 1) / stride + 1. Computed by conv2d's kernels on the
 * tensors seen as [N, C, 1, L] (exactly conv2d with a height of 1); the errors name conv1d. */
CN_API cn_tensor *cn_conv1d(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv1d_params *p);

typedef struct cn_conv_transpose1d_params {
    int64_t stride;         /* 0 is taken as 1 */
    int64_t padding;
    int64_t output_padding; /* < stride or < dilation */
    int64_t dilation;       /* 0 is taken as 1 */
    int64_t groups;         /* 0 is taken as 1 */
} cn_conv_transpose1d_params;

/* torch.nn.functional.conv_transpose1d: x [N, C, L], w [C, O/groups, K], b [O] or NULL ->
 * [N, O, OL] with OL = (L - 1) stride - 2 padding + dilation (K - 1) + output_padding + 1.
 * Computed by conv_transpose2d's kernels on the tensors seen as [N, C, 1, L]; the errors name
 * conv_transpose1d. */
CN_API cn_tensor *cn_conv_transpose1d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                                      const cn_conv_transpose1d_params *p);

typedef struct cn_conv3d_params {
    int64_t stride[3];   /* (d, h, w); 0 is taken as 1 */
    int64_t padding[3];  /* zero padding (d, h, w) */
    int64_t dilation[3]; /* 0 is taken as 1 */
    int64_t groups;      /* 0 is taken as 1 */
} cn_conv3d_params;

/* torch.nn.functional.conv3d: x [N, C, D, H, W], w [O, C/groups, KD, KH, KW], b [O] or NULL ->
 * [N, O, OD, OH, OW], each size as conv2d's. The CPU lowers it to GEMM per (image, group)
 * (vol2col); CUDA computes each output element by its definition (one thread each, f64 sums:
 * fine for small volumes, slow for large ones; no cuDNN path yet). */
CN_API cn_tensor *cn_conv3d(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv3d_params *p);

typedef struct cn_conv_transpose3d_params {
    int64_t stride[3];         /* (d, h, w); 0 is taken as 1 */
    int64_t padding[3];
    int64_t output_padding[3]; /* < stride or < dilation */
    int64_t dilation[3];       /* 0 is taken as 1 */
    int64_t groups;            /* 0 is taken as 1 */
} cn_conv_transpose3d_params;

/* torch.nn.functional.conv_transpose3d: x [N, C, D, H, W], w [C, O/groups, KD, KH, KW], b [O] or
 * NULL -> [N, O, OD, OH, OW], each size as conv_transpose2d's; computed as cn_conv3d's adjoint
 * (CPU: GEMM then col2vol; CUDA: by definition). */
CN_API cn_tensor *cn_conv_transpose3d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                                      const cn_conv_transpose3d_params *p);

/* ---- deformable convolution (issue 16) ------------------------------------------------------ */
typedef struct cn_deform_conv2d_params {
    int64_t stride[2];     /* (h, w); 0 is taken as 1 */
    int64_t padding[2];    /* (h, w) */
    int64_t dilation[2];   /* 0 is taken as 1 */
    int64_t groups;        /* the weight's groups; 0 is taken as 1 */
    int64_t offset_groups; /* the offsets' groups (G below); 0 is taken as 1 */
} cn_deform_conv2d_params;

/* torchvision.ops.deform_conv2d (burn's deform_conv2d, with its DeformConvOptions' weight_groups
 * and offset_groups): a convolution whose every tap samples x at a learned fractional position
 * (DCNv1), optionally scaled by a learned mask (DCNv2).
 *   x [N, C, H, W], offset [N, 2 G KH KW, OH, OW], w [O, C/groups, KH, KW], mask NULL or
 *   [N, G KH KW, OH, OW], b NULL or [O] -> [N, O, OH, OW], OH and OW as cn_conv2d's.
 * Channel c of x belongs to offset group g = c / (C / G). Output (oh, ow)'s tap (i, j) reads
 * channel c at y = oh sh - ph + i dh + offset[n, 2 k, oh, ow] and x = ow sw - pw + j dw +
 * offset[n, 2 k + 1, oh, ow], k = (g KH + i) KW + j (pairs (dy, dx) per tap, as torchvision),
 * bilinearly with zeros outside the image exactly as torchvision's kernel (nothing at all when
 * y <= -1, y >= H, x <= -1 or x >= W), times mask[n, k, oh, ow] when a mask is given; the
 * output is b plus the sum over the group's channels and the taps of w times those samples.
 * Zero offsets and no mask give cn_conv2d's values. A NULL p takes the defaults (stride 1,
 * padding 0, dilation 1, one group of each).
 * Gradients flow to x, offset, w, mask and b (torchvision's: the offsets' is the derivative of
 * the bilinear sample, which jumps where a sampling position crosses a row or column of x).
 * burn's DeformConvOptions map one to one (weight_groups is groups); wherever a burn backend's
 * kernel computes otherwise (some sample in f32), cinder follows torchvision.
 * The CPU lowers each image to a column matrix (deformable im2col) and GEMM; CUDA computes each
 * entry by its definition (one thread each, deterministic: no atomics; x's gradient walks every
 * sample of its group, so large feature maps are slow there).
 * Errors (NULL returned, inputs untouched): CN_ERR_NULL_ARG for a NULL x, offset or w;
 * CN_ERR_KIND / CN_ERR_DTYPE for non-float inputs or inputs of different dtypes;
 * CN_ERR_INVALID_ARG for a negative stride, padding, dilation, groups or offset_groups;
 * CN_ERR_SHAPE for wrong ranks, an empty kernel, channels that do not match w or groups, C not
 * divisible by offset_groups, an offset, mask or bias whose shape is not the one above, or an
 * empty output; CN_ERR_OVERFLOW for sizes past int64; the router's device errors. Each message
 * names deform_conv2d and the argument. Returns a new tensor the caller releases. Threads: as
 * every op (ops run concurrently on distinct tensors). */
CN_API cn_tensor *cn_deform_conv2d(cn_tensor *x, cn_tensor *offset, cn_tensor *w,
                                   cn_tensor *mask, cn_tensor *b,
                                   const cn_deform_conv2d_params *p);
/* ---- padding and pooling (issue 16) ----------------------------------------------------------- *
 * Each returns a new tensor the caller releases, or NULL with the error set (inputs untouched).
 * Threads: as every op (cinder/tensor.h): reading the inputs from several threads is safe. */

typedef enum cn_pad_mode {
    CN_PAD_CONSTANT = 0, /* the value */
    CN_PAD_REFLECT = 1,  /* mirrored without repeating the edge: [a b c] -> b [a b c] b */
    CN_PAD_REPLICATE = 2,/* the edge repeated: a [a b c] c */
    CN_PAD_CIRCULAR = 3  /* wrapped around: c [a b c] a */
} cn_pad_mode;

/* torch.nn.functional.pad(x, pad, mode, value): pad[0..n) is PyTorch's pad tuple (left, right)
 * of x's last dim, then of the one before, ...; n is even and n / 2 <= x's ndim. Each padded dim
 * grows by left + right. Negative entries crop (as PyTorch) in constant and circular modes (a
 * resulting size below 0 is CN_ERR_SHAPE); circular wraps what the crops leave. reflect needs
 * each entry < the dim's size, replicate a dim of size >= 1, circular each entry <= the size left
 * after the crops (PyTorch's rules; CN_ERR_INVALID_ARG otherwise); reflect and replicate take no
 * negative entries (CN_ERR_INVALID_ARG: crop with cn_slice first). Unlike PyTorch, every mode
 * pads any number of trailing dims of any tensor (PyTorch's reflect, replicate and circular take
 * the last 1 to 3 dims of a 2-D to 5-D tensor). value (constant mode only; ignored otherwise)
 * must be representable in x's dtype (CN_ERR_INVALID_ARG otherwise: an int tensor takes values
 * in its range, truncated toward zero; a bool any value, nonzero being true). Every dtype (the
 * CPU's kernel: all but f16/bf16); gradient (float): g cropped back, with the mirrored,
 * replicated or wrapped entries added to the entries they copy. pad may be NULL when n is 0 (a
 * copy, as cn_clone). An unknown mode is CN_ERR_INVALID_ARG. */
CN_API cn_tensor *cn_pad(cn_tensor *x, const int64_t *pad, int n, cn_pad_mode mode, double value);

/* torch.nn.functional.adaptive_avg_pool1d/2d/3d: x's last 1, 2 or 3 dims averaged over the
 * windows [floor(i * in / out), ceil((i + 1) * in / out)) of each output index i, so that the
 * result has the given sizes there. x: [..., L] / [..., H, W] / [..., D, H, W] with at least one
 * leading dim (PyTorch's [C, ...] or [N, C, ...]; more leading dims are batched too); every
 * output size >= 1 and every pooled input size >= 1 (CN_ERR_INVALID_ARG / CN_ERR_SHAPE
 * otherwise). Float; gradient: each g entry shared equally by its window's inputs. */
CN_API cn_tensor *cn_adaptive_avg_pool1d(cn_tensor *x, int64_t out_l);
CN_API cn_tensor *cn_adaptive_avg_pool2d(cn_tensor *x, int64_t out_h, int64_t out_w);
CN_API cn_tensor *cn_adaptive_avg_pool3d(cn_tensor *x, int64_t out_d, int64_t out_h,
                                         int64_t out_w);

/* torch.nn.functional.avg_pool1d(x, kernel, stride, padding) with PyTorch's defaults
 * (ceil_mode false, count_include_pad true: padded zeros count in the mean): x [N, C, L] ->
 * [N, C, (L + 2 padding - kernel) / stride + 1]. stride 0 is taken as kernel; padding at most
 * half the kernel (PyTorch's rule). cn_avg_pool2d over [N, C, 1, L] (its errors name
 * avg_pool2d's 'p' fields: kernel[1], stride[1], padding[1]). Float; gradient as avg_pool2d's. */
CN_API cn_tensor *cn_avg_pool1d(cn_tensor *x, int64_t kernel, int64_t stride, int64_t padding);

/* Max pooling with PyTorch's full set of options (cn_max_pool2d keeps its own, simpler ones). */
typedef struct cn_max_pool2d_params {
    int64_t kernel[2];   /* >= 1 */
    int64_t stride[2];   /* 0 is taken as the kernel size */
    int64_t padding[2];  /* at most half the kernel (PyTorch's rule) */
    int64_t dilation[2]; /* 0 is taken as 1 */
    int ceil_mode;       /* nonzero: output sizes round up, but the last window must start inside
                          * the input or its left padding (PyTorch's rule) */
} cn_max_pool2d_params;

/* torch.nn.functional.max_pool2d(x, ..., return_indices=True): x [N, C, H, W] -> the maxima
 * [N, C, OH, OW], OH = floor-or-ceil((H + 2 padding - dilation (kernel - 1) - 1) / stride) + 1
 * (likewise OW). Padding never wins (it is -inf); ties go to the first position in the window
 * (row-major), a NaN wins over any number (the last NaN of a window, as PyTorch's CPU kernel);
 * a window of padding only (possible with dilation) gives -inf, PyTorch's index for it (which
 * lies outside the plane) and no gradient.
 * When indices is non-NULL, *indices receives a new i64 tensor [N, C, OH, OW] (the caller
 * releases it) of each maximum's flat position h * W + w within its [H, W] plane (PyTorch's
 * indices, usable by max_unpool); *indices is NULL on failure. Float; gradient: g added at each
 * window's maximum (overlapping windows add up). Errors: p NULL, a non-4-D or non-float x,
 * kernel / stride / dilation < 0 or padding too large (CN_ERR_INVALID_ARG), a window larger
 * than the padded input (CN_ERR_SHAPE), sizes past int64 (CN_ERR_OVERFLOW). */
CN_API cn_tensor *cn_max_pool2d_ex(cn_tensor *x, const cn_max_pool2d_params *p,
                                   cn_tensor **indices);

/* torch.nn.functional.max_pool1d(x, kernel, stride, padding, dilation, ceil_mode,
 * return_indices): x [N, C, L] -> [N, C, OL], cn_max_pool2d_ex over [N, C, 1, L] (its errors
 * name max_pool2d_with_indices); indices (when non-NULL) are positions along L. */
CN_API cn_tensor *cn_max_pool1d(cn_tensor *x, int64_t kernel, int64_t stride, int64_t padding,
                                int64_t dilation, int ceil_mode, cn_tensor **indices);

/* The sliding blocks of torch.nn.functional.unfold / fold. */
typedef struct cn_fold_params {
    int64_t kernel[2];   /* >= 1 */
    int64_t dilation[2]; /* 0 is taken as 1 */
    int64_t padding[2];  /* zeros, >= 0 */
    int64_t stride[2];   /* 0 is taken as 1 */
} cn_fold_params;

/* torch.nn.functional.unfold (im2col): x [N, C, H, W] -> [N, C * KH * KW, L], L = OH * OW the
 * block positions (OH = (H + 2 padding - dilation (KH - 1) - 1) / stride + 1, likewise OW);
 * entry [n, (c * KH + i) * KW + j, oh * OW + ow] = x[n, c, oh * sh - ph + i * dh,
 * ow * sw - pw + j * dw], 0 in the padding. Float; gradient: fold of g. Errors: p NULL, x not
 * 4-D float, kernel < 1 or negative dilation / padding / stride (CN_ERR_INVALID_ARG), blocks
 * larger than the padded input (CN_ERR_SHAPE), sizes past int64 (CN_ERR_OVERFLOW). Unlike
 * PyTorch, x must have its batch dim (unsqueeze a [C, H, W] x). */
CN_API cn_tensor *cn_unfold4d(cn_tensor *x, const cn_fold_params *p);

/* torch.nn.functional.fold (col2im), unfold's adjoint: cols [N, C * KH * KW, L] -> [N, C, out_h,
 * out_w], each column's entries added at the positions unfold reads them from (overlapping blocks
 * add up; padding dropped). L must be the block count of an out_h x out_w input and cols' dim 1
 * a multiple of KH * KW (CN_ERR_SHAPE otherwise). Float; gradient: unfold of g. Other errors as
 * cn_unfold4d. */
CN_API cn_tensor *cn_fold4d(cn_tensor *cols, int64_t out_h, int64_t out_w,
                            const cn_fold_params *p);

/* ---- fused optimizer updates ---------------------------------------------------------------- *
 * One parameter's optimizer update, in place and in one pass of the backend's kernel
 * (CN_OP_SGD_STEP, backend.h), with no temporaries: what cn_optimizer_step (nn.h) runs for SGD.
 * They write concrete tensors' memory directly, past autodiff: pass the concrete tensors under
 * tracked parameters (cn_inner), under no-grad mode. A backend may lack the kernel (a program's
 * own, registered before the op existed): then they answer CN_SGD_UNFUSED, and the caller
 * computes the same update with other ops. Threads: writing p and buf races with any other use of
 * their memory (tensor.h); the caller serialises. */

/* torch.optim.SGD's hyperparameters, as cn_sgd_new takes them. */
typedef struct cn_sgd_hyper {
    double lr, momentum, dampening, weight_decay;
    int nesterov;
} cn_sgd_hyper;

/* Not an error but an answer of cn_sgd_step_check and cn_sgd_step_: the backend has no fused
 * kernel for this update (it lacks CN_OP_SGD_STEP, or the dtype is a float other than f32 and
 * f64). No error is set and nothing is written. Outside cn_status's codes (cn_status_name gives
 * "CN_UNKNOWN"), at a value that appending codes never reaches. */
#define CN_SGD_UNFUSED ((cn_status)100)

/* Checks one SGD update (cn_sgd_step_) without writing anything, so that an optimizer can check
 * every parameter before it writes the first. p, g, buf: concrete tensors (not on an autodiff
 * device) of one shape (no broadcasting; g may be a broadcast view), one float dtype and one
 * device; buf is the momentum buffer, given exactly when h->momentum != 0 (NULL otherwise). p
 * and buf are written, so their elements must not share memory (no stride 0 over a dim of size
 * > 1), and no two of the three may share memory (cn_shares_memory).
 * Returns CN_OK when cn_sgd_step_ would run the backend's kernel; CN_SGD_UNFUSED (no error set)
 * when the backend has no kernel for it; otherwise the error, set naming "sgd_step", the argument
 * and a way out: CN_ERR_NULL_ARG (p, g or h), CN_ERR_INVALID_ARG (buf given or missing against
 * momentum, memory shared), CN_ERR_SHAPE, CN_ERR_DTYPE, CN_ERR_KIND (not float),
 * CN_ERR_DEVICE_MISMATCH, CN_ERR_AUTODIFF_REACHED_CONCRETE (a tensor on an autodiff device), or
 * the router's device errors. Takes no reference. */
CN_API cn_status cn_sgd_step_check(cn_tensor *p, cn_tensor *g, cn_tensor *buf,
                                   const cn_sgd_hyper *h);

/* One SGD update of p (and buf) in place (torch.optim.SGD's single-tensor rule):
 *     g' = g + weight_decay * p
 *     buf = first ? g' : momentum * buf + (1 - dampening) * g'       (when buf)
 *     p = p - lr * (buf ? (nesterov ? g' + momentum * buf : buf) : g')
 * first: buf holds nothing yet (its old contents are not read). Bumps the version of p's and
 * buf's memory, so a value saved for a backward that has not run yet is stale (that backward
 * fails with CN_ERR_AUTODIFF_MODIFIED). Returns what cn_sgd_step_check returns (CN_SGD_UNFUSED
 * and errors leave everything untouched), or the kernel's error. Takes no reference. */
CN_API cn_status cn_sgd_step_(cn_tensor *p, cn_tensor *g, cn_tensor *buf, const cn_sgd_hyper *h,
                              int first);

/* torch.optim.AdamW's hyperparameters for one update; step counts this update, from 1. */
typedef struct cn_adamw_hyper {
    double lr, beta1, beta2, eps, weight_decay;
    int64_t step;
} cn_adamw_hyper;

/* Checks one AdamW update (cn_adamw_step_) without writing anything, as cn_sgd_step_check does
 * for SGD. p, g, exp_avg, exp_avg_sq: concrete tensors of one shape (g may be a broadcast view),
 * one float dtype and one device; p and the two averages are written, so none of them may have
 * elements that share memory, and no two of the four may share memory.
 * Returns CN_OK when cn_adamw_step_ would run the backend's kernel; CN_SGD_UNFUSED (no error
 * set; the same answer as SGD's) when the backend has no CN_OP_ADAMW_STEP kernel for the dtype;
 * otherwise the error, set naming "adamw_step", the argument and a way out: CN_ERR_NULL_ARG,
 * CN_ERR_INVALID_ARG (step < 1; lr, a beta, eps or weight_decay not finite; memory shared),
 * CN_ERR_SHAPE, CN_ERR_DTYPE, CN_ERR_KIND (not float), CN_ERR_DEVICE_MISMATCH,
 * CN_ERR_AUTODIFF_REACHED_CONCRETE (a tensor on an autodiff device), or the router's device
 * errors. Takes no reference. */
CN_API cn_status cn_adamw_step_check(cn_tensor *p, cn_tensor *g, cn_tensor *exp_avg,
                                     cn_tensor *exp_avg_sq, const cn_adamw_hyper *h);

/* One AdamW update of p and its averages in place, in one pass (torch.optim.AdamW's
 * single-tensor rule, with bc1 = 1 - beta1^step and bc2 = 1 - beta2^step):
 *     p = p * (1 - lr * weight_decay)                                  (skipped when it is 0)
 *     exp_avg = first ? (1 - beta1) g : exp_avg + (1 - beta1) (g - exp_avg)
 *     exp_avg_sq = first ? (1 - beta2) g^2 : beta2 exp_avg_sq + (1 - beta2) g^2
 *     p = p - (lr / bc1) exp_avg / (sqrt(exp_avg_sq) / sqrt(bc2) + eps)
 * f32 is computed in float with float coefficients, as PyTorch does. first: the averages hold
 * nothing yet (their old contents are not read; PyTorch's start at zero). Bumps the version of
 * the three written tensors' memory, as cn_sgd_step_ does. Returns what cn_adamw_step_check
 * returns (CN_SGD_UNFUSED and errors leave everything untouched), or the kernel's error. Takes no
 * reference. Threads: as every op (tensor.h). */
CN_API cn_status cn_adamw_step_(cn_tensor *p, cn_tensor *g, cn_tensor *exp_avg,
                                cn_tensor *exp_avg_sq, const cn_adamw_hyper *h, int first);

#ifdef __cplusplus
}
#endif
#endif
