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

/* ---- elementwise, binary (broadcasting; float and int, pow float only) ----------------------- */
CN_API cn_tensor *cn_add(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_sub(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_mul(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_div(cn_tensor *a, cn_tensor *b); /* ints: truncating; division by zero is an error */
CN_API cn_tensor *cn_pow(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_maximum(cn_tensor *a, cn_tensor *b);
CN_API cn_tensor *cn_minimum(cn_tensor *a, cn_tensor *b);

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

/* ---- elementwise with scalars ---------------------------------------------------------------- */
/* Float and int. On an int tensor s is truncated toward zero and must then fit x's dtype: NaN,
 * infinities and values out of its range are CN_ERR_INVALID_ARG (cast x to a float dtype to
 * compute with them); the integer arithmetic itself wraps modulo 2^bits. */
CN_API cn_tensor *cn_add_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_mul_scalar(cn_tensor *x, double s);
CN_API cn_tensor *cn_pow_scalar(cn_tensor *x, double p);  /* float */
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

/* ---- reductions ----------------------------------------------------------------------------- *
 * The plain form reduces all elements to a 0-d tensor; the _dim form reduces one dim, keeping it
 * with size 1 when keepdim is non-zero. sum/prod/max/min accept float and int, mean/var/logsumexp
 * float only. argmax/argmin return i64 (the first index of the extreme; over all elements: the
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

/* ---- linear algebra ------------------------------------------------------------------------- */
/* a: [..., M, K], b: [..., K, N] -> [..., M, N]; batch dims broadcast; 1-D operands are promoted
 * as in numpy.matmul. Float only. */
CN_API cn_tensor *cn_matmul(cn_tensor *a, cn_tensor *b);
/* x: [..., in], w: [out, in], b: [out] or NULL -> x @ w^T + b. */
CN_API cn_tensor *cn_linear(cn_tensor *x, cn_tensor *w, cn_tensor *b);

/* ---- layout --------------------------------------------------------------------------------- */
/* Concatenates n tensors (same dtype, device, and shape except along dim). Sizes along dim that
 * add up past int64 are CN_ERR_OVERFLOW. */
CN_API cn_tensor *cn_cat(cn_tensor *const *ts, int n, int dim);
/* Stacks n tensors of one shape along a new dim. */
CN_API cn_tensor *cn_stack(cn_tensor *const *ts, int n, int dim);
/* A dense copy of x with storage of its own (like torch.clone); differentiable. */
CN_API cn_tensor *cn_clone(cn_tensor *x);

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

typedef struct cn_pool2d_params {
    int64_t kernel[2];
    int64_t stride[2];   /* 0 is taken as the kernel size */
    int64_t padding[2];  /* at most half the kernel */
} cn_pool2d_params;

/* x: [N, C, H, W] -> [N, C, OH, OW]. Max ignores padding; avg counts padded zeros (PyTorch's
 * count_include_pad=True default). A padded input that passes int64 is CN_ERR_OVERFLOW. */
CN_API cn_tensor *cn_max_pool2d(cn_tensor *x, const cn_pool2d_params *p);
CN_API cn_tensor *cn_avg_pool2d(cn_tensor *x, const cn_pool2d_params *p);

#ifdef __cplusplus
}
#endif
#endif
