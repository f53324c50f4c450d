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
#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"

#define SQRT1_2 0.70710678118654752440
#define PI 3.14159265358979323846

/* ---- helpers (results are scope-owned temporaries) ------------------------------------------ */

/* A 0-d tensor holding v, in t's dtype and on t's device: broadcasts against anything. */
static cn_tensor *scalar_like(cn_tensor *t, double v) {
    return t ? cn_full(NULL, 0, v, cn_dtype_of(t), cn_device_of(t)) : NULL;
}

/* A float mask (1 where m, 0 elsewhere) in t's dtype. */
static cn_tensor *mask_like(cn_tensor *m, cn_tensor *t) {
    return m && t ? cn_cast(m, cn_dtype_of(t)) : NULL;
}

/* Sums g over the dims that broadcasting stretched, back to `shape`. */
static cn_tensor *sum_to(cn_tensor *g, const int64_t *shape, int ndim) {
    cn_tensor *cur = g;
    while (cur && cn_ndim(cur) > ndim) cur = cn_sum_dim(cur, 0, 0);
    for (int d = 0; cur && d < ndim; d++)
        if (shape[d] == 1 && cn_shape(cur)[d] != 1) cur = cn_sum_dim(cur, d, 1);
    return cur;
}

static cn_tensor *sum_to_input(cn_tensor *g, const ad_input *a) {
    return sum_to(g, a->shape, a->ndim);
}

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

static cn_tensor *zeros_of(const ad_input *a, cn_tensor *like) {
    return like ? cn_zeros(a->shape, a->ndim, a->dtype, cn_device_of(like)) : NULL;
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
static cn_tensor *r_softmax(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    cn_tensor *y = ad_output_value(n);
    return cn_mul(y, cn_sub(g, cn_sum_dim(cn_mul(g, y), (int)n->ints[0], 1)));
}
static cn_tensor *r_log_softmax(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    cn_tensor *y = ad_output_value(n);
    return cn_sub(g, cn_mul(cn_exp(y), cn_sum_dim(g, (int)n->ints[0], 1)));
}

/* ---- one input's gradient: scalar ops, layout, indexing, pooling -------------------------- */

static cn_tensor *i_neg(ad_node *n, cn_tensor *g, int i) {
    (void)n, (void)i;
    return cn_neg(g);
}
static cn_tensor *i_identity(ad_node *n, cn_tensor *g, int i) { /* add_scalar, copy */
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
    cn_tensor *part = cn_slice(z, dim, k[1], k[1] + k[2] * n->shape[dim], k[2]);
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

/* ---- indexing of issue 16 ------------------------------------------------------------------ */

static cn_tensor *i_masked_fill(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_masked_fill(g, ad_input_value(n, 1), 0.0);
}
static cn_tensor *i_tril(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_tril(g, n->ints[0]);
}
static cn_tensor *i_triu(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    return cn_triu(g, n->ints[0]);
}
static cn_tensor *i_flip(ad_node *n, cn_tensor *g, int i) {
    (void)i;
    int dims[CN_MAX_DIMS];
    for (int d = 0; d < n->n_ints; d++) dims[d] = (int)n->ints[d];
    return cn_flip(g, dims, n->n_ints);
}
/* repeat: g summed over the copies, one repeated dim at a time: [before, r * size, after] seen as
 * [before, r, size * after] and summed over r. */
static cn_tensor *i_repeat(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    int nd = n->n_ints, lead = nd - a->ndim;
    cn_tensor *cur = g;
    for (int d = 0; cur && d < nd; d++) {
        int64_t r = n->ints[d], size = d < lead ? 1 : a->shape[d - lead];
        if (r == 1) continue;
        int64_t shape[CN_MAX_DIMS], before = 1, after = 1;
        memcpy(shape, cn_shape(cur), sizeof(int64_t) * (size_t)nd);
        for (int k = 0; k < d; k++) before *= shape[k];
        for (int k = d + 1; k < nd; k++) after *= shape[k];
        int64_t split[3] = {before, r, size * after};
        shape[d] = size;
        cur = cn_reshape(cn_sum_dim(cn_reshape(cur, split, 3), 1, 0), shape, nd);
    }
    return cur ? cn_reshape(cur, a->shape, a->ndim) : NULL;
}
/* 0, 1, ..., len - 1 along dim of a tensor of `shape` (i64, expanded: a view). */
static cn_tensor *positions(const int64_t *shape, int nd, int dim, cn_device dev) {
    int64_t one[CN_MAX_DIMS];
    for (int d = 0; d < nd; d++) one[d] = d == dim ? shape[d] : 1;
    cn_tensor *pos = cn_arange(0, (double)shape[dim], 1, CN_I64, dev);
    return cn_expand(cn_reshape(pos, one, nd), shape, nd);
}
/* scatter: x's gradient is g with the written positions zeroed; src's is g at the position each
 * entry was written to, where that entry won (the last write along dim), else 0. The winners are
 * found by scattering each entry's position along dim and reading back which one stayed. */
static cn_tensor *i_scatter(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    cn_tensor *idx = ad_input_value(n, 1);
    if (!idx) return NULL;
    if (i == 0) return cn_scatter(g, dim, idx, zeros_of(&n->in[2], g));
    if (cn_ndim(idx) == 0) return cn_gather(g, dim, idx);
    cn_device dev = cn_device_of(g);
    cn_tensor *pos = positions(cn_shape(idx), cn_ndim(idx), dim, dev);
    cn_tensor *none = cn_full(n->in[0].shape, n->in[0].ndim, -1, CN_I64, dev);
    cn_tensor *won = cn_eq(cn_gather(cn_scatter(none, dim, idx, pos), dim, idx), pos);
    return cn_where(won, cn_gather(g, dim, idx), scalar_like(g, 0));
}
static cn_tensor *i_slice_assign(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    int64_t start = n->ints[1], step = n->ints[2], len = n->in[1].shape[dim];
    int64_t end = len ? start + (len - 1) * step + 1 : start;
    if (i == 0) return cn_slice_assign(g, zeros_of(&n->in[1], g), dim, start, end, step);
    return cn_slice(g, dim, start, end, step);
}
/* index_copy: as scatter, the winners among repeated index values found by copying positions. */
static cn_tensor *i_index_copy(ad_node *n, cn_tensor *g, int i) {
    int dim = (int)n->ints[0];
    cn_tensor *idx = ad_input_value(n, 1);
    if (!idx) return NULL;
    if (i == 0) return cn_index_copy(g, dim, idx, zeros_of(&n->in[2], g));
    cn_device dev = cn_device_of(g);
    int64_t len = cn_shape(idx)[0], size = n->in[0].shape[dim];
    cn_tensor *pos = cn_arange(0, (double)len, 1, CN_I64, dev);
    cn_tensor *none = cn_full(&size, 1, -1, CN_I64, dev);
    cn_tensor *won = cn_eq(cn_index_select(cn_index_copy(none, 0, idx, pos), 0, idx), pos);
    int64_t along[CN_MAX_DIMS];
    for (int d = 0; d < n->in[2].ndim; d++) along[d] = d == dim ? len : 1;
    return cn_where(cn_reshape(won, along, n->in[2].ndim), cn_index_select(g, dim, idx),
                    scalar_like(g, 0));
}
static cn_tensor *i_index_add(ad_node *n, cn_tensor *g, int i) {
    return i == 0 ? g : cn_index_select(g, (int)n->ints[0], ad_input_value(n, 1));
}
/* unfold: window w's entry j came from w * step + j along dim; g's last dim is moved next to dim
 * and merged with the windows, then index_add sums it back (overlaps add up). */
static cn_tensor *i_unfold(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    int dim = (int)n->ints[0], nd = a->ndim;
    int64_t size = n->ints[1], step = n->ints[2], windows = n->shape[dim];
    int perm[CN_MAX_DIMS], k = 0;
    for (int d = 0; d < nd; d++) {
        perm[k++] = d;
        if (d == dim) perm[k++] = nd;
    }
    int64_t merged[CN_MAX_DIMS];
    memcpy(merged, a->shape, sizeof(int64_t) * (size_t)nd);
    merged[dim] = windows * size;
    cn_tensor *src = cn_reshape(cn_permute(g, perm), merged, nd);
    cn_device dev = cn_device_of(g);
    const int64_t col[2] = {windows, 1}, row[2] = {1, size}, flat[1] = {windows * size};
    cn_tensor *starts = cn_reshape(
        cn_mul_scalar(cn_arange(0, (double)windows, 1, CN_I64, dev), (double)step), col, 2);
    cn_tensor *offsets = cn_reshape(cn_arange(0, (double)size, 1, CN_I64, dev), row, 2);
    cn_tensor *idx = cn_reshape(cn_add(starts, offsets), flat, 1);
    return cn_index_add(zeros_of(a, g), dim, idx, src);
}
/* masked_select: g goes back to the selected positions of the broadcast shape (found by nonzero
 * on the flattened mask), then is summed over the dims x was broadcast along. */
static cn_tensor *i_masked_select(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[0], *m = &n->in[1];
    cn_tensor *mask = ad_input_value(n, 1);
    if (!mask) return NULL;
    int nd = a->ndim > m->ndim ? a->ndim : m->ndim;
    int64_t shape[CN_MAX_DIMS], numel = 1;
    for (int d = 0; d < nd; d++) {
        int da = d - (nd - a->ndim), dm = d - (nd - m->ndim);
        int64_t sa = da >= 0 ? a->shape[da] : 1, sm = dm >= 0 ? m->shape[dm] : 1;
        shape[d] = sa == 1 ? sm : sa;
        numel *= shape[d];
    }
    const int64_t flat[1] = {numel}, count[1] = {cn_numel(g)};
    cn_tensor *where = cn_reshape(cn_nonzero(cn_reshape(cn_expand(mask, shape, nd), flat, 1)),
                                  count, 1);
    cn_tensor *spread = cn_index_add(cn_zeros(flat, 1, a->dtype, cn_device_of(g)), 0, where, g);
    return sum_to_input(cn_reshape(spread, shape, nd), &n->in[i]);
}

static cn_tensor *i_gather_nd(ad_node *n, cn_tensor *g, int i) {
    return cn_scatter_nd(zeros_of(&n->in[i], g), ad_input_value(n, 1), g, CN_SCATTER_ADD);
}
/* The number b of the tuple each entry of updates ([B.., slice]) belongs to, as i64. */
static cn_tensor *tuple_numbers(const ad_input *upd, const ad_input *idx, cn_device dev) {
    int bnd = idx->ndim - 1;
    int64_t tuples = 1, shape[CN_MAX_DIMS];
    for (int d = 0; d < bnd; d++) tuples *= idx->shape[d];
    for (int d = 0; d < upd->ndim; d++) shape[d] = d < bnd ? upd->shape[d] : 1;
    cn_tensor *b = cn_reshape(cn_arange(0, (double)tuples, 1, CN_I64, dev), shape, upd->ndim);
    return cn_expand(b, upd->shape, upd->ndim);
}
/* scatter_nd, by reduction (see cn_scatter_nd): x is input 0, updates input 2. */
static cn_tensor *i_scatter_nd(ad_node *n, cn_tensor *g, int i) {
    const ad_input *xa = &n->in[0], *ua = &n->in[2];
    cn_tensor *idx = ad_input_value(n, 1);
    if (!idx) return NULL;
    cn_device dev = cn_device_of(g);
    switch ((cn_scatter_reduce)n->ints[0]) {
    case CN_SCATTER_ADD: return i == 0 ? g : cn_gather_nd(g, idx);
    case CN_SCATTER_ASSIGN: {
        if (i == 0) return cn_scatter_nd(g, idx, zeros_of(ua, g), CN_SCATTER_ASSIGN);
        cn_tensor *b = tuple_numbers(ua, &n->in[1], dev);
        cn_tensor *none = cn_full(xa->shape, xa->ndim, -1, CN_I64, dev);
        cn_tensor *won = cn_eq(cn_gather_nd(cn_scatter_nd(none, idx, b, CN_SCATTER_ASSIGN), idx), b);
        return cn_where(won, cn_gather_nd(g, idx), scalar_like(g, 0));
    }
    case CN_SCATTER_MUL: {
        cn_tensor *x = ad_input_value(n, 0), *u = ad_input_value(n, 2);
        cn_tensor *ones = cn_full(xa->shape, xa->ndim, 1, xa->dtype, dev);
        if (i == 0) return cn_mul(g, cn_scatter_nd(ones, idx, u, CN_SCATTER_MUL));
        /* the product of the other updates of each tuple's slice, as r_prod: with no zero among
         * them p / u, with one zero the product of the nonzeros at the zero and 0 elsewhere */
        cn_tensor *zero = cn_eq(u, scalar_like(u, 0));
        cn_tensor *u1 = cn_where(zero, scalar_like(u, 1), u);
        cn_tensor *zeros = cn_scatter_nd(cn_zeros(xa->shape, xa->ndim, CN_I64, dev), idx,
                                         cn_cast(zero, CN_I64), CN_SCATTER_ADD);
        cn_tensor *zb = cn_gather_nd(zeros, idx);
        cn_tensor *pb = cn_gather_nd(cn_scatter_nd(ones, idx, u1, CN_SCATTER_MUL), idx);
        cn_tensor *alone = cn_logical_and(cn_eq(zb, scalar_like(zb, 1)), zero);
        cn_tensor *others = cn_where(cn_eq(zb, scalar_like(zb, 0)), cn_div(pb, u1),
                                     cn_where(alone, pb, scalar_like(u, 0)));
        return cn_mul(cn_gather_nd(cn_mul(g, x), idx), others);
    }
    default: { /* min, max: to the entries equal to the result, shared among ties */
        cn_tensor *x = ad_input_value(n, 0), *u = ad_input_value(n, 2), *y = ad_output_value(n);
        cn_tensor *hit_x = mask_like(cn_eq(x, y), g);
        cn_tensor *hit_u = mask_like(cn_eq(u, cn_gather_nd(y, idx)), g);
        cn_tensor *count = cn_add(hit_x, cn_scatter_nd(zeros_of(xa, g), idx, hit_u, CN_SCATTER_ADD));
        cn_tensor *share = cn_div(g, cn_maximum(count, scalar_like(g, 1)));
        return i == 0 ? cn_mul(share, hit_x) : cn_mul(cn_gather_nd(share, idx), hit_u);
    }
    }
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
    if (b->node) {
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

static cn_status conv_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    cn_tensor *x = ad_input_value(n, 0), *w = ad_input_value(n, 1);
    if (!x || !w) return cn_last_status();
    if (n->in[0].node && !(gin[0] = cn_retain(cn__conv2d_backward_input(g, w, n->in[0].shape,
                                                                        n->ints))))
        return cn_last_status();
    if (n->in[1].node && !(gin[1] = cn_retain(cn__conv2d_backward_weight(g, x, n->in[1].shape,
                                                                         n->ints))))
        return cn_last_status();
    if (n->n_in == 3 && n->in[2].node) {
        /* the bias: g summed over N, OH, OW; [N, O, OH * OW] sums whole planes in one pass (g is
         * dense here, so the reshape is a view) instead of rows of OW */
        const int64_t *gs = cn_shape(g);
        int64_t planes[3] = {gs[0], gs[1], gs[2] * gs[3]};
        gin[2] = cn_retain(cn_sum_dim(cn_sum_dim(cn_reshape(g, planes, 3), 2, 0), 0, 0));
        if (!gin[2]) return cn_last_status();
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
    [CN_OP_MAX_POOL2D] = {.input = i_max_pool2d},
    [CN_OP_AVG_POOL2D] = {.input = i_avg_pool2d},
    [CN_OP_MASKED_FILL] = {.input = i_masked_fill},
    [CN_OP_TRIL] = {.input = i_tril},
    [CN_OP_TRIU] = {.input = i_triu},
    [CN_OP_FLIP] = {.input = i_flip},
    [CN_OP_REPEAT] = {.input = i_repeat},
    [CN_OP_SCATTER] = {.input = i_scatter},
    [CN_OP_SLICE_ASSIGN] = {.input = i_slice_assign},
    [CN_OP_INDEX_COPY] = {.input = i_index_copy},
    [CN_OP_INDEX_ADD] = {.input = i_index_add},
    [CN_OP_UNFOLD] = {.input = i_unfold},
    [CN_OP_MASKED_SELECT] = {.input = i_masked_select},
    [CN_OP_GATHER_ND] = {.input = i_gather_nd},
    [CN_OP_SCATTER_ND] = {.input = i_scatter_nd},
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
