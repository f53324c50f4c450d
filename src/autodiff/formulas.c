/* The backward formula of every differentiable op, written with the public ops on concrete
 * tensors (the autodiff layer never calls a backend). g is the gradient of the op's output;
 * each formula returns the gradients of the inputs that have a node, shaped like those inputs.
 *
 * The table at the end gives each differentiable row of the op table (core/op_table.h) its
 * formula, in one of four forms: a unary derivative (multiplied into g here), a broadcast binary
 * pair (reduced to the input shapes here), one input's gradient, or the whole node's.
 * tests/test_op_table.c requires an entry for every op the op table marks differentiable. */
#include <math.h>
#include <string.h>

#include "autodiff/autodiff_internal.h"
#include "autodiff/formula_helpers.h"
#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"

#define SQRT1_2 0.70710678118654752440
#define PI 3.14159265358979323846

/* ---- helpers (results are scope-owned temporaries; the shared ones: formula_helpers.h) ------ */

/* The shape of a reduction's output with the reduced dim kept (size 1). */
static int keep_shape(const ad_input *a, int dim, int64_t *shape) {
    memcpy(shape, a->shape, sizeof(int64_t) * (size_t)a->ndim);
    if (a->ndim > 0) shape[dim] = 1;
    return a->ndim;
}

static cn_tensor *keep(cn_tensor *g, const ad_input *a, int dim) {
    int64_t shape[CN_MAX_DIMS];
    int nd = keep_shape(a, dim, shape);
    return g ? cn_reshape(g, shape, nd) : NULL;
}

/* ---- unary and scalar ops: d(out)/d(x), from x (the input) or y (the output) ------------- */

static cn_tensor *d_abs(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_sub(mask_like(cn_gt(x, scalar_like(x, 0)), x),
                  mask_like(cn_lt(x, scalar_like(x, 0)), x));
}
static cn_tensor *d_relu(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return mask_like(cn_gt(y, scalar_like(y, 0)), y);
}
static cn_tensor *d_exp(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return y;
}
static cn_tensor *d_log(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_div(scalar_like(x, 1), x);
}
static cn_tensor *d_log1p(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_div(scalar_like(x, 1), cn_add_scalar(x, 1));
}
static cn_tensor *d_sqrt(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return cn_div(scalar_like(y, 0.5), y);
}
static cn_tensor *d_rsqrt(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return cn_mul_scalar(cn_pow_scalar(y, 3), -0.5);
}
static cn_tensor *d_sin(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_cos(x);
}
static cn_tensor *d_cos(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_neg(cn_sin(x));
}
static cn_tensor *d_tanh(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return cn_add_scalar(cn_neg(cn_mul(y, y)), 1);
}
static cn_tensor *d_sigmoid(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return cn_mul(y, cn_add_scalar(cn_neg(y), 1));
}
static cn_tensor *d_silu(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    cn_tensor *s = cn_sigmoid(x);
    /* s * (1 + x * (1 - s)) */
    return cn_mul(s, cn_add_scalar(cn_mul(x, cn_add_scalar(cn_neg(s), 1)), 1));
}
static cn_tensor *d_gelu(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)y;
    if (n->ints[0] == CN_GELU_ERF) {
        /* Phi(x) + x phi(x) */
        cn_tensor *cdf = cn_mul_scalar(cn_add_scalar(cn__erf(cn_mul_scalar(x, SQRT1_2)), 1), 0.5);
        cn_tensor *pdf = cn_mul_scalar(cn_exp(cn_mul_scalar(cn_mul(x, x), -0.5)),
                                       1.0 / sqrt(2 * PI));
        return cn_add(cdf, cn_mul(x, pdf));
    }
    /* u = k (x + c x^3), t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) */
    const double k = sqrt(2 / PI), c = 0.044715;
    cn_tensor *x2 = cn_mul(x, x);
    cn_tensor *t = cn_tanh(cn_mul_scalar(cn_add(x, cn_mul_scalar(cn_mul(x2, x), c)), k));
    cn_tensor *left = cn_mul_scalar(cn_add_scalar(t, 1), 0.5);
    cn_tensor *sech2 = cn_add_scalar(cn_neg(cn_mul(t, t)), 1);
    cn_tensor *inner = cn_mul_scalar(cn_add_scalar(cn_mul_scalar(x2, 3 * c), 1), 0.5 * k);
    return cn_add(left, cn_mul(cn_mul(x, sech2), inner));
}
static cn_tensor *d_erf(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_mul_scalar(cn_exp(cn_neg(cn_mul(x, x))), 2.0 / sqrt(PI));
}
static cn_tensor *d_reciprocal(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return cn_neg(cn_mul(y, y));
}
static cn_tensor *d_tan(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)x;
    return cn_add_scalar(cn_mul(y, y), 1);
}
/* 1 / sqrt(s (x^2 - 1)): asin and acos (s = -1), acosh (s = 1) */
static cn_tensor *inv_sqrt_square_minus_1(cn_tensor *x, double s) {
    return cn_rsqrt(cn_mul_scalar(cn_add_scalar(cn_mul(x, x), -1), s));
}
static cn_tensor *d_asin(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return inv_sqrt_square_minus_1(x, -1);
}
static cn_tensor *d_acos(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_neg(inv_sqrt_square_minus_1(x, -1));
}
static cn_tensor *d_atan(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_reciprocal(cn_add_scalar(cn_mul(x, x), 1));
}
static cn_tensor *d_sinh(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_cosh(x);
}
static cn_tensor *d_cosh(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_sinh(x);
}
static cn_tensor *d_asinh(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_rsqrt(cn_add_scalar(cn_mul(x, x), 1));
}
static cn_tensor *d_acosh(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return inv_sqrt_square_minus_1(x, 1);
}
static cn_tensor *d_atanh(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_reciprocal(cn_add_scalar(cn_neg(cn_mul(x, x)), 1));
}
static cn_tensor *d_pow_scalar(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)y;
    return cn_mul_scalar(cn_pow_scalar(x, n->reals[0] - 1), n->reals[0]);
}
static cn_tensor *d_clamp(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)y;
    return mask_like(cn_logical_and(cn_ge(x, scalar_like(x, n->reals[0])),
                                    cn_le(x, scalar_like(x, n->reals[1]))),
                     x);
}

/* the activations, as PyTorch's backward functions: leaky_relu 1 or the slope, elu 1 or
 * alpha e^x, softplus 1 past the threshold or sigmoid(beta x), hard_sigmoid 1/6 inside (-3, 3),
 * hard_swish 0 below -3, x/3 + 1/2 up to 3, 1 above, log_sigmoid sigmoid(-x) (stable for any x) */
static cn_tensor *positive_or(cn_tensor *x, cn_tensor *other) {
    return cn_where(cn_gt(x, scalar_like(x, 0)), scalar_like(x, 1), other);
}
static cn_tensor *d_leaky_relu(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)y;
    return positive_or(x, scalar_like(x, n->reals[0]));
}
static cn_tensor *d_elu(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)y;
    return positive_or(x, cn_mul_scalar(cn_exp(x), n->reals[0]));
}
static cn_tensor *d_softplus(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)y;
    cn_tensor *bx = cn_mul_scalar(x, n->reals[0]);
    return cn_where(cn_gt(bx, scalar_like(x, n->reals[1])), scalar_like(x, 1), cn_sigmoid(bx));
}
static cn_tensor *d_hard_sigmoid(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    cn_tensor *inside = cn_logical_and(cn_gt(x, scalar_like(x, -3)), cn_lt(x, scalar_like(x, 3)));
    return cn_mul_scalar(mask_like(inside, x), 1.0 / 6);
}
static cn_tensor *d_hard_swish(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    cn_tensor *middle = cn_where(cn_le(x, scalar_like(x, 3)),
                                 cn_add_scalar(cn_mul_scalar(x, 1.0 / 3), 0.5), scalar_like(x, 1));
    return cn_where(cn_lt(x, scalar_like(x, -3)), scalar_like(x, 0), middle);
}
static cn_tensor *d_log_sigmoid(ad_node *n, cn_tensor *x, cn_tensor *y) {
    (void)n, (void)y;
    return cn_sigmoid(cn_neg(x));
}

/* ---- broadcast binary ops: the gradients at the output's shape ---------------------------- */

static void g_add(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                  cn_tensor **gb) {
    (void)n, (void)x, (void)y;
    *ga = g;
    *gb = g;
}
static void g_sub(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                  cn_tensor **gb) {
    (void)n, (void)x, (void)y;
    *ga = g;
    *gb = cn_neg(g);
}
static void g_mul(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                  cn_tensor **gb) {
    (void)n;
    *ga = cn_mul(g, y);
    *gb = cn_mul(g, x);
}
static void g_div(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                  cn_tensor **gb) {
    (void)n;
    *ga = cn_div(g, y);
    *gb = cn_neg(cn_div(cn_mul(g, x), cn_mul(y, y)));
}
static void g_pow(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                  cn_tensor **gb) {
    cn_tensor *out = ad_output_value(n);
    *ga = cn_mul(g, cn_mul(y, cn_pow(x, cn_add_scalar(y, -1))));
    *gb = cn_mul(g, cn_mul(out, cn_log(x)));
}
/* maximum and minimum: ties split the gradient evenly, as PyTorch does */
static void extreme(cn_tensor *win, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                    cn_tensor **gb) {
    cn_tensor *ma = cn_add(mask_like(win, x), cn_mul_scalar(mask_like(cn_eq(x, y), x), 0.5));
    *ga = cn_mul(g, ma);
    *gb = cn_mul(g, cn_add_scalar(cn_neg(ma), 1));
}
static void g_maximum(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                      cn_tensor **gb) {
    (void)n;
    extreme(cn_gt(x, y), g, x, y, ga, gb);
}
static void g_minimum(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                      cn_tensor **gb) {
    (void)n;
    extreme(cn_lt(x, y), g, x, y, ga, gb);
}
/* atan2(a, b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) */
static void g_atan2(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                    cn_tensor **gb) {
    (void)n;
    cn_tensor *scaled = cn_div(g, cn_add(cn_mul(x, x), cn_mul(y, y)));
    *ga = cn_mul(scaled, y);
    *gb = cn_neg(cn_mul(scaled, x));
}

/* remainder(a, b) = a - floor(a / b) b, fmod(a, b) = a - trunc(a / b) b: d/da = 1, d/db the
 * quotient negated (the jumps ignored, as in PyTorch) */
static void g_remainder(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                        cn_tensor **gb) {
    (void)n;
    *ga = g;
    *gb = cn_neg(cn_mul(g, cn_floor(cn_div(x, y))));
}
static void g_fmod(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                   cn_tensor **gb) {
    (void)n;
    *ga = g;
    *gb = cn_neg(cn_mul(g, cn_trunc(cn_div(x, y))));
}
/* hypot(a, b) = h: d/da = a / h, d/db = b / h */
static void g_hypot(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                    cn_tensor **gb) {
    cn_tensor *scaled = cn_div(g, ad_output_value(n));
    *ga = cn_mul(scaled, x);
    *gb = cn_mul(scaled, y);
}

/* prelu(x, w) = x > 0 ? x : w x (w broadcast along x's dim 1): d/dx = 1 or w, d/dw = 0 or x */
static void g_prelu(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                    cn_tensor **gb) {
    (void)n;
    cn_tensor *positive = cn_gt(x, scalar_like(x, 0));
    *ga = cn_where(positive, g, cn_mul(g, y));
    *gb = cn_where(positive, scalar_like(x, 0), cn_mul(g, x));
}

/* ---- reductions over dim ints[0] and softmax: the input's gradient ------------------------ */

/* g with the reduced dim kept (size 1), and that dim's size */
static cn_tensor *kept(ad_node *n, cn_tensor *g) { return keep(g, &n->in[0], (int)n->ints[0]); }
static int64_t reduced(ad_node *n) {
    const ad_input *a = &n->in[0];
    return a->ndim ? a->shape[n->ints[0]] : 1;
}

static cn_tensor *r_sum(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_expand(kept(n, g), n->in[0].shape, n->in[0].ndim);
}
static cn_tensor *r_mean(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_expand(cn_mul_scalar(kept(n, g), 1.0 / (double)reduced(n)), n->in[0].shape,
                     n->in[0].ndim);
}
/* max and min: the gradient goes to the first extreme, as the index ops find it */
static cn_tensor *r_extreme(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    const ad_input *a = &n->in[0];
    int d = (int)n->ints[0];
    cn_tensor *x = ad_input_value(n, 0);
    if (!x) return NULL;
    if (a->ndim == 0) return g;
    cn_tensor *idx = n->op == CN_OP_MAX ? cn_argmax_dim(x, d, 1) : cn_argmin_dim(x, d, 1);
    return cn_scatter_add(zeros_of(a, g), d, idx, kept(n, g));
}
/* prod: d/dx_i is the product of the others. With no zero in the slice that is y / x_i; with one
 * zero, the product of the nonzeros at the zero and 0 elsewhere; with two or more, 0 (y / x_i
 * would be 0 / 0 at a zero). */
static cn_tensor *r_prod(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    int d = (int)n->ints[0], nd = n->in[0].ndim;
    cn_tensor *x = ad_input_value(n, 0);
    if (!x) return NULL;
    cn_tensor *is_zero = cn_eq(x, scalar_like(x, 0));
    cn_tensor *x1 = cn_where(is_zero, scalar_like(x, 1), x); /* zeros as ones */
    cn_tensor *zeros = cn_cast(is_zero, CN_I64), *p1 = x1;   /* per slice, kept dim */
    if (nd > 0) {
        zeros = cn_sum_dim(zeros, d, 1);
        p1 = cn_prod_dim(x1, d, 1);
    }
    cn_tensor *no_zero = cn_eq(zeros, scalar_like(zeros, 0));
    cn_tensor *at_the_zero = cn_logical_and(cn_eq(zeros, scalar_like(zeros, 1)), is_zero);
    cn_tensor *others = cn_where(no_zero, cn_div(p1, x1),
                                 cn_where(at_the_zero, p1, scalar_like(x, 0)));
    return cn_mul(kept(n, g), others);
}
static cn_tensor *r_var(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    int d = (int)n->ints[0];
    cn_tensor *x = ad_input_value(n, 0);
    cn_tensor *centered = cn_sub(x, cn_mean_dim(x, d, 1));
    double scale = 2.0 / (double)(reduced(n) - n->ints[1]);
    return cn_mul(cn_mul_scalar(centered, scale), kept(n, g));
}
static cn_tensor *r_logsumexp(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    cn_tensor *x = ad_input_value(n, 0), *y = ad_output_value(n);
    return cn_mul(kept(n, g), cn_exp(cn_sub(x, kept(n, y))));
}
/* softmax and log_softmax: one pass per row where the backend has the fused kernel (ints[0]
 * is the dim), the composed formulas on a backend without it (a program's) */
static cn_tensor *r_softmax(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    cn_tensor *y = ad_output_value(n);
    if (y && cn__has_kernel(CN_OP_SOFTMAX_BACKWARD, y))
        return cn__softmax_backward(g, y, (int)n->ints[0], 0);
    return cn_mul(y, cn_sub(g, cn_sum_dim(cn_mul(g, y), (int)n->ints[0], 1)));
}
static cn_tensor *r_log_softmax(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    cn_tensor *y = ad_output_value(n);
    if (y && cn__has_kernel(CN_OP_SOFTMAX_BACKWARD, y))
        return cn__softmax_backward(g, y, (int)n->ints[0], 1);
    return cn_sub(g, cn_mul(cn_exp(y), cn_sum_dim(g, (int)n->ints[0], 1)));
}

/* ---- scans and sorts along ints[0]: the input's gradient ---------------------------------- */

static cn_tensor *s_cumsum(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn__cumsum_reverse(g, (int)n->ints[0]);
}
static cn_tensor *s_cumprod(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn__cumprod_backward(g, ad_input_value(n, 0), (int)n->ints[0]);
}
/* cummax, cummin, sort: g scattered back to the selected elements, whose indices the op gives
 * again on the saved input (it is deterministic: the same indices as in the forward) */
static cn_tensor *s_selected(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    const ad_input *a = &n->in[0];
    int d = (int)n->ints[0];
    cn_tensor *x = ad_input_value(n, 0), *idx = NULL, *v = NULL;
    if (!x) return NULL;
    if (a->ndim == 0) return g;
    if (n->op == CN_OP_SORT)
        v = cn_sort(x, d, (int)n->ints[1], &idx);
    else
        v = n->op == CN_OP_CUMMAX ? cn_cummax(x, d, &idx) : cn_cummin(x, d, &idx);
    cn_release(v);
    cn_tensor *out = idx ? cn_scatter_add(zeros_of(a, g), d, idx, g) : NULL;
    cn_release(idx);
    return out;
}

/* ---- one input's gradient: scalar ops, layout, indexing, pooling -------------------------- */

static cn_tensor *i_neg(ad_node *n, cn_tensor *g, int i) {
    (void)n, (void)i;
    return cn_neg(g);
}
static cn_tensor *i_identity(ad_node *n, cn_tensor *g, int i) { /* add/remainder_scalar, copy */
    (void)n, (void)i;
    return g;
}
static cn_tensor *i_zero(ad_node *n, cn_tensor *g, int i) { /* floor, ceil, round, trunc, sign */
    return zeros_of(&n->in[i], g);
}
static cn_tensor *i_mul_scalar(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_mul_scalar(g, n->reals[0]);
}
static cn_tensor *i_cast(ad_node *n, cn_tensor *g, int i) { return cn_cast(g, n->in[i].dtype); }
static cn_tensor *i_transpose(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_transpose(g, (int)n->ints[0], (int)n->ints[1]);
}
static cn_tensor *i_permute(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    int inverse[CN_MAX_DIMS];
    for (int d = 0; d < n->n_ints; d++) inverse[n->ints[d]] = d;
    return cn_permute(g, inverse);
}
static cn_tensor *i_view(ad_node *n, cn_tensor *g, int i) {
    return cn_reshape(g, n->in[i].shape, n->in[i].ndim);
}
static cn_tensor *i_expand(ad_node *n, cn_tensor *g, int i) { return sum_to_input(g, &n->in[i]); }
static cn_tensor *i_slice(ad_node *n, cn_tensor *g, int i) {
    const int64_t *k = n->ints;
    cn_tensor *z = zeros_of(&n->in[i], g);
    int dim = (int)k[0];
    /* just past the last element taken (start + step * len would pass int64 for a huge step
     * that kept one element; the last element's index is inside the input) */
    int64_t len = n->shape[dim], end = len > 0 ? k[1] + k[2] * (len - 1) + 1 : k[1];
    cn_tensor *part = cn_slice(z, dim, k[1], end, k[2]);
    if (!part || cn_copy_(part, g) != CN_OK) return NULL;
    return z;
}
static cn_tensor *i_cat(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    int64_t at = 0;
    for (int j = 0; j < i; j++) at += n->in[j].shape[dim];
    return cn_slice(g, dim, at, at + n->in[i].shape[dim], 1);
}
static cn_tensor *i_gather(ad_node *n, cn_tensor *g, int i) {
    return cn_scatter_add(zeros_of(&n->in[i], g), (int)n->ints[0], ad_input_value(n, 1), g);
}
static cn_tensor *i_scatter_add(ad_node *n, cn_tensor *g, int i) {
    return i == 0 ? g : cn_gather(g, (int)n->ints[0], ad_input_value(n, 1));
}
static cn_tensor *i_index_select(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    int64_t shape[CN_MAX_DIMS];
    for (int d = 0; d < n->ndim; d++) shape[d] = d == dim ? n->shape[d] : 1;
    cn_tensor *idx = cn_expand(cn_reshape(ad_input_value(n, 1), shape, n->ndim), n->shape,
                               n->ndim);
    return cn_scatter_add(zeros_of(&n->in[i], g), dim, idx, g);
}
static cn_tensor *i_max_pool2d(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn__max_pool2d_backward(g, ad_input_value(n, 0), n->ints);
}
static cn_tensor *i_avg_pool2d(ad_node *n, cn_tensor *g, int i) {
    return cn__avg_pool2d_backward(g, n->in[i].shape, n->ints);
}
static cn_tensor *i_where(ad_node *n, cn_tensor *g, int i) {
    cn_tensor *cond = ad_input_value(n, 0), *zero = scalar_like(g, 0);
    return sum_to_input(i == 1 ? cn_where(cond, g, zero) : cn_where(cond, zero, g), &n->in[i]);
}

/* ---- whole nodes -------------------------------------------------------------------------- */

/* matmul with numpy promotion: 1-D operands were [1, K] (a) and [K, 1] (b). */
static cn_status matmul_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    const ad_input *a = &n->in[0], *b = &n->in[1];
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return cn_last_status();
    cn_tensor *g2 = g;
    if (a->ndim == 1) {
        x = cn_unsqueeze(x, 0);
        g2 = cn_unsqueeze(g2, b->ndim == 1 ? 0 : -2);
    }
    if (b->ndim == 1) {
        w = cn_unsqueeze(w, 1);
        g2 = cn_unsqueeze(g2, -1);
    }
    if (a->node) {
        cn_tensor *ga = cn_matmul(g2, cn_transpose(w, -1, -2));
        int64_t shape[CN_MAX_DIMS];
        int nd = a->ndim == 1 ? 2 : a->ndim;
        memcpy(shape, a->shape, sizeof shape);
        if (a->ndim == 1) {
            shape[0] = 1;
            shape[1] = a->shape[0];
        }
        gin[0] = cn_retain(cn_reshape(sum_to(ga, shape, nd), a->shape, a->ndim));
        if (!gin[0]) return cn_last_status();
    }
    if (b->node && b->ndim == 2 && a->ndim > 2) {
        /* a weight shared by every batch entry (a linear layer on [B.., T, K]): one GEMM over all
         * B.. * T rows, instead of a batch of products of K = T and their sum */
        int64_t k = b->shape[0], nn = b->shape[1], rows = 1;
        for (int d = 0; d < a->ndim - 1; d++) rows *= a->shape[d];
        const int64_t xs[2] = {rows, k}, gs[2] = {rows, nn};
        cn_tensor *gb = cn_matmul(cn_transpose(cn_reshape(x, xs, 2), 0, 1), cn_reshape(g2, gs, 2));
        gin[1] = cn_retain(gb);
        if (!gin[1]) return cn_last_status();
    } else if (b->node) {
        cn_tensor *gb = cn_matmul(cn_transpose(x, -1, -2), g2);
        int64_t shape[CN_MAX_DIMS];
        int nd = b->ndim == 1 ? 2 : b->ndim;
        memcpy(shape, b->shape, sizeof shape);
        if (b->ndim == 1) shape[1] = 1;
        gin[1] = cn_retain(cn_reshape(sum_to(gb, shape, nd), b->shape, b->ndim));
        if (!gin[1]) return cn_last_status();
    }
    return CN_OK;
}

/* conv2d's gradients with respect to x (input 0), w (input 1) and b (input bias_at, when the
 * node has it), from the gradient g of the convolution's output. */
static cn_status conv_grads(ad_node *n, cn_tensor *g, cn_tensor **gin, int bias_at);

static cn_status conv_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    return conv_grads(n, g, gin, 2);
}

/* conv2d_max_pool2d (inputs x, w, idx[, b]): g goes back through the pool by its kept choices,
 * to the convolution's output of the size conv2d computes; then conv2d's gradients. */
static cn_status conv_pool_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    cn_tensor *idx = ad_input_value(n, 2);
    if (!idx) return cn_last_status();
    if (cn__has_kernel(CN_OP_CONV2D_MAX_POOL2D_BACKWARD, g)) /* one kernel (formulas_conv.c) */
        return ad_grad_conv2d_max_pool2d(n, g, gin);
    const int64_t *xs = n->in[0].shape, *ws = n->in[1].shape, *c = n->ints;
    int64_t z_shape[4] = {xs[0], ws[0], cn__conv_out_size(xs[2], ws[2], c[0], c[2], c[4]),
                          cn__conv_out_size(xs[3], ws[3], c[1], c[3], c[5])};
    cn_tensor *gz = cn__max_pool2d_backward_index(g, idx, z_shape, c[7]);
    if (!gz) return cn_last_status(); /* gz: owned by the backward's scope */
    return conv_grads(n, gz, gin, 3);
}

/* conv2d_relu: g masked by the output (relu's gradient, fused where the backend can), then
 * conv2d's gradients of that. */
static cn_status conv_relu_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    cn_tensor *y = ad_output_value(n);
    if (!y) return cn_last_status();
    cn_tensor *gm = cn__has_kernel(CN_OP_ACTIVATION_BACKWARD, y)
                        ? cn__activation_backward(g, y, CN_OP_RELU, 0)
                        : cn_mul(g, d_relu(n, NULL, y));
    if (!gm) return cn_last_status(); /* gm: owned by the backward's scope, as every temporary */
    return conv_grads(n, gm, gin, 2);
}

static cn_status conv_grads(ad_node *n, cn_tensor *g, cn_tensor **gin, int bias_at) {
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return cn_last_status();
    if (n->in[0].node && !(gin[0] = cn_retain(cn__conv2d_backward_input(g, w, n->in[0].shape,
                                                                        n->ints))))
        return cn_last_status();
    if (n->in[1].node && !(gin[1] = cn_retain(cn__conv2d_backward_weight(g, x, n->in[1].shape,
                                                                         n->ints))))
        return cn_last_status();
    if (n->n_in > bias_at && n->in[bias_at].node) {
        /* the bias: g summed over N, OH, OW; [N, O, OH * OW] sums whole planes in one pass (g is
         * dense here, so the reshape is a view) instead of rows of OW */
        const int64_t *gs = cn_shape(g);
        int64_t planes[3] = {gs[0], gs[1], gs[2] * gs[3]};
        gin[bias_at] = cn_retain(cn_sum_dim(cn_sum_dim(cn_reshape(g, planes, 3), 2, 0), 0, 0));
        if (!gin[bias_at]) return cn_last_status();
    }
    return CN_OK;
}

/* ---- the table ---------------------------------------------------------------------------- */

/* One of the four forms per differentiable op. */
typedef struct formula {
    /* unary: gin = g * derivative(x, y) */
    cn_tensor *(*derivative)(ad_node *n, cn_tensor *x, cn_tensor *y);
    /* unary activations: gin = activation_backward(g, x or y) in one pass where the backend has
     * the kernel; derivative otherwise */
    int fused;
    /* two broadcast inputs: the gradients at the output's shape, reduced to the inputs' here */
    void (*binary)(ad_node *n, cn_tensor *g, cn_tensor *x, cn_tensor *y, cn_tensor **ga,
                   cn_tensor **gb);
    /* each input that has a node */
    cn_tensor *(*input)(ad_node *n, cn_tensor *g, int i);
    /* the whole node */
    cn_status (*node)(ad_node *n, cn_tensor *g, cn_tensor **gin);
} formula;

static const formula formulas[CN__OP_ALL] = {
    [CN_OP_NEG] = {.input = i_neg},
    [CN_OP_ABS] = {.derivative = d_abs},
    [CN_OP_RELU] = {.derivative = d_relu, .fused = 1},
    [CN_OP_EXP] = {.derivative = d_exp},
    [CN_OP_LOG] = {.derivative = d_log},
    [CN_OP_LOG1P] = {.derivative = d_log1p},
    [CN_OP_SQRT] = {.derivative = d_sqrt},
    [CN_OP_RSQRT] = {.derivative = d_rsqrt},
    [CN_OP_SIN] = {.derivative = d_sin},
    [CN_OP_COS] = {.derivative = d_cos},
    [CN_OP_TANH] = {.derivative = d_tanh, .fused = 1},
    [CN_OP_SIGMOID] = {.derivative = d_sigmoid, .fused = 1},
    [CN_OP_SILU] = {.derivative = d_silu, .fused = 1},
    [CN_OP_GELU] = {.derivative = d_gelu, .fused = 1},
    [CN_OP_ERF] = {.derivative = d_erf},
    [CN_OP_FLOOR] = {.input = i_zero},
    [CN_OP_CEIL] = {.input = i_zero},
    [CN_OP_ROUND] = {.input = i_zero},
    [CN_OP_TRUNC] = {.input = i_zero},
    [CN_OP_SIGN] = {.input = i_zero},
    [CN_OP_RECIPROCAL] = {.derivative = d_reciprocal},
    [CN_OP_TAN] = {.derivative = d_tan},
    [CN_OP_ASIN] = {.derivative = d_asin},
    [CN_OP_ACOS] = {.derivative = d_acos},
    [CN_OP_ATAN] = {.derivative = d_atan},
    [CN_OP_SINH] = {.derivative = d_sinh},
    [CN_OP_COSH] = {.derivative = d_cosh},
    [CN_OP_ASINH] = {.derivative = d_asinh},
    [CN_OP_ACOSH] = {.derivative = d_acosh},
    [CN_OP_ATANH] = {.derivative = d_atanh},
    [CN_OP_ADD_SCALAR] = {.input = i_identity},
    [CN_OP_MUL_SCALAR] = {.input = i_mul_scalar},
    [CN_OP_POW_SCALAR] = {.derivative = d_pow_scalar},
    [CN_OP_CLAMP] = {.derivative = d_clamp},
    [CN_OP_ADD] = {.binary = g_add},
    [CN_OP_SUB] = {.binary = g_sub},
    [CN_OP_MUL] = {.binary = g_mul},
    [CN_OP_DIV] = {.binary = g_div},
    [CN_OP_POW] = {.binary = g_pow},
    [CN_OP_MAXIMUM] = {.binary = g_maximum},
    [CN_OP_MINIMUM] = {.binary = g_minimum},
    [CN_OP_ATAN2] = {.binary = g_atan2},
    [CN_OP_REMAINDER] = {.binary = g_remainder},
    [CN_OP_FMOD] = {.binary = g_fmod},
    [CN_OP_HYPOT] = {.binary = g_hypot},
    [CN_OP_REMAINDER_SCALAR] = {.input = i_identity},
    [CN_OP_LEAKY_RELU] = {.derivative = d_leaky_relu},
    [CN_OP_PRELU] = {.binary = g_prelu},
    [CN_OP_HARD_SIGMOID] = {.derivative = d_hard_sigmoid, .fused = 1},
    [CN_OP_LOG_SIGMOID] = {.derivative = d_log_sigmoid, .fused = 1},
    [CN_OP_HARD_SWISH] = {.derivative = d_hard_swish, .fused = 1},
    [CN_OP_SOFTPLUS] = {.derivative = d_softplus},
    [CN_OP_ELU] = {.derivative = d_elu},
    [CN_OP_WHERE] = {.input = i_where},
    [CN_OP_CAST] = {.input = i_cast},
    [CN_OP_COPY] = {.input = i_identity},
    [CN_OP_SUM] = {.input = r_sum},
    [CN_OP_MEAN] = {.input = r_mean},
    [CN_OP_MAX] = {.input = r_extreme},
    [CN_OP_MIN] = {.input = r_extreme},
    [CN_OP_PROD] = {.input = r_prod},
    [CN_OP_VAR] = {.input = r_var},
    [CN_OP_LOGSUMEXP] = {.input = r_logsumexp},
    [CN_OP_SOFTMAX] = {.input = r_softmax},
    [CN_OP_LOG_SOFTMAX] = {.input = r_log_softmax},
    [CN_OP_MATMUL] = {.node = matmul_formula},
    [CN_OP_GATHER] = {.input = i_gather},
    [CN_OP_SCATTER_ADD] = {.input = i_scatter_add},
    [CN_OP_INDEX_SELECT] = {.input = i_index_select},
    [CN_OP_CONV2D] = {.node = conv_formula},
    [CN_OP_CONV2D_RELU] = {.node = conv_relu_formula},
    [CN_OP_CONV2D_MAX_POOL2D] = {.node = conv_pool_formula},
    [CN_OP_MAX_POOL2D] = {.input = i_max_pool2d},
    [CN_OP_AVG_POOL2D] = {.input = i_avg_pool2d},
    [CN_OP_CUMSUM] = {.input = s_cumsum},
    [CN_OP_CUMPROD] = {.input = s_cumprod},
    [CN_OP_CUMMAX] = {.input = s_selected},
    [CN_OP_CUMMIN] = {.input = s_selected},
    [CN_OP_SORT] = {.input = s_selected},
    [CN_OP_MASKED_FILL] = {.input = ad_grad_masked_fill},
    [CN_OP_TRIL] = {.input = ad_grad_tril},
    [CN_OP_TRIU] = {.input = ad_grad_triu},
    [CN_OP_FLIP] = {.input = ad_grad_flip},
    [CN_OP_REPEAT] = {.input = ad_grad_repeat},
    [CN_OP_SCATTER] = {.input = ad_grad_scatter},
    [CN_OP_SLICE_ASSIGN] = {.input = ad_grad_slice_assign},
    [CN_OP_INDEX_COPY] = {.input = ad_grad_index_copy},
    [CN_OP_INDEX_ADD] = {.input = ad_grad_index_add},
    [CN_OP_UNFOLD] = {.input = ad_grad_unfold},
    [CN_OP_MASKED_SELECT] = {.input = ad_grad_masked_select},
    [CN_OP_GATHER_ND] = {.input = ad_grad_gather_nd},
    [CN_OP_SCATTER_ND] = {.input = ad_grad_scatter_nd},
    [CN_OP_SDPA] = {.node = ad_grad_sdpa},
    [CN_OP_CTC_LOSS] = {.input = ad_grad_ctc_loss},
    [CN_OP_CONV_TRANSPOSE2D] = {.input = ad_grad_conv_transpose2d},
    [CN_OP_CONV1D] = {.input = ad_grad_conv1d},
    [CN_OP_CONV_TRANSPOSE1D] = {.input = ad_grad_conv_transpose1d},
    [CN_OP_CONV3D] = {.input = ad_grad_conv3d},
    [CN_OP_CONV_TRANSPOSE3D] = {.input = ad_grad_conv_transpose3d},
    [CN_OP_INTERPOLATE] = {.input = ad_grad_interpolate},
    [CN_OP_GRID_SAMPLE_2D] = {.input = ad_grad_grid_sample_2d},
    [CN_OP_PAD] = {.input = ad_grad_pad},
    [CN_OP_ADAPTIVE_AVG_POOL] = {.input = ad_grad_adaptive_avg_pool},
    [CN_OP_MAX_POOL2D_WITH_INDICES] = {.input = ad_grad_max_pool2d_with_indices},
    [CN_OP_UNFOLD4D] = {.input = ad_grad_unfold4d},
    [CN_OP_FOLD4D] = {.input = ad_grad_fold4d},
    [CN_OP_DEFORM_CONV2D] = {.node = ad_grad_deform_conv2d},
    [CN_OP_RFFT] = {.input = ad_grad_rfft},
    [CN_OP_IRFFT] = {.input = ad_grad_irfft},
    [CN_OP_LINEAR] = {.input = ad_grad_linear},
    [CN_OP_LINEAR_GELU] = {.node = ad_grad_linear_gelu},
    [CN_OP_LINEAR_ADD] = {.input = ad_grad_linear_add},
    [CN_OP_LAYER_NORM] = {.node = ad_grad_layer_norm},
    [CN_OP_RMS_NORM] = {.node = ad_grad_rms_norm},
    [CN_OP_QUANT_LINEAR] = {.node = ad_grad_quant_linear},
    [CN__OP_TRANSPOSE] = {.input = i_transpose},
    [CN__OP_PERMUTE] = {.input = i_permute},
    [CN__OP_SLICE] = {.input = i_slice},
    [CN__OP_VIEW] = {.input = i_view},
    [CN__OP_EXPAND] = {.input = i_expand},
    [CN__OP_CAT] = {.input = i_cat},
};

int ad_has_formula(int op) {
    if (op < 0 || op >= CN__OP_ALL) return 0;
    const formula *f = &formulas[op];
    return f->derivative || f->binary || f->input || f->node;
}

static cn_status run_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    const formula *f = ad_has_formula(n->op) ? &formulas[n->op] : NULL;
    if (!f)
        return cn_set_error(CN_ERR_BACKEND, "backward", "no gradient formula for '%s'; this is "
                            "a bug in cinder: please report it", ad_op_name(n->op));
    if (f->node) return f->node(n, g, gin);
    unsigned saves = ad_op_saves(n->op);
    cn_tensor *x = (saves & CN__SAVE_IN(0)) ? ad_input_value(n, 0) : NULL;
    if (f->derivative) {
        cn_tensor *y = (saves & CN__SAVE_OUT) ? ad_output_value(n) : NULL;
        cn_tensor *s = x ? x : y;
        if (f->fused && s && cn__has_kernel(CN_OP_ACTIVATION_BACKWARD, s)) {
            int approx = n->op == CN_OP_GELU ? (int)n->ints[0] : 0;
            gin[0] = cn_retain(cn__activation_backward(g, s, (cn_op)n->op, approx));
        } else {
            cn_tensor *d = s ? f->derivative(n, x, y) : NULL;
            gin[0] = cn_retain(cn_mul(g, d));
        }
    } else if (f->binary) {
        cn_tensor *y = (saves & CN__SAVE_IN(1)) ? ad_input_value(n, 1) : NULL;
        cn_tensor *ga = NULL, *gb = NULL;
        f->binary(n, g, x, y, &ga, &gb);
        if (n->in[0].node) gin[0] = cn_retain(sum_to_input(ga, &n->in[0]));
        if (n->in[1].node) gin[1] = cn_retain(sum_to_input(gb, &n->in[1]));
    } else {
        for (int i = 0; i < n->n_in; i++) {
            if (!n->in[i].node) continue;
            gin[i] = cn_retain(f->input(n, g, i));
            if (!gin[i]) break;
        }
    }
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i].node && !gin[i]) {
            if (cn_last_status() == CN_OK)
                cn_set_error(CN_ERR_BACKEND, "backward", "the gradient formula of '%s' gave no "
                             "gradient for input %d; this is a bug in cinder: please report it",
                             ad_op_name(n->op), i);
            return cn_last_status();
        }
    return CN_OK;
}

cn_status ad_backward_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    if (cn_scope_begin() != CN_OK) return cn_last_status();
    cn_status s = run_formula(n, g, gin);
    cn_scope_end(); /* temporaries die; each gin[i] holds its own reference */
    if (s != CN_OK)
        for (int i = 0; i < n->n_in; i++) {
            cn_release(gin[i]);
            gin[i] = NULL;
        }
    return s;
}
