/* The backward formula of every differentiable op, written with the public ops on concrete
 * tensors (the autodiff layer never calls a backend). g is the gradient of the op's output;
 * each formula returns the gradients of the inputs that have a node, shaped like those inputs. */
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

/* ---- the formulas -------------------------------------------------------------------------- */

/* Unary elementwise and scalar ops: d(out)/d(x) as a tensor, multiplied into g by the caller. */
static cn_tensor *unary_derivative(ad_node *n) {
    const double *r = n->reals;
    cn_tensor *x = NULL, *y = NULL;
    unsigned saves = ad_op_saves(n->op, n->n_in);
    if (saves & 1u) x = ad_input_value(n, 0);
    if (saves & AD_SAVE_OUT) y = ad_output_value(n);
    if (!x && !y) return NULL;
    switch (n->op) {
    case CN_OP_ABS:
        return cn_sub(mask_like(cn_gt(x, scalar_like(x, 0)), x),
                      mask_like(cn_lt(x, scalar_like(x, 0)), x));
    case CN_OP_RELU: return mask_like(cn_gt(y, scalar_like(y, 0)), y);
    case CN_OP_EXP: return y;
    case CN_OP_LOG: return cn_div(scalar_like(x, 1), x);
    case CN_OP_LOG1P: return cn_div(scalar_like(x, 1), cn_add_scalar(x, 1));
    case CN_OP_SQRT: return cn_div(scalar_like(y, 0.5), y);
    case CN_OP_RSQRT: return cn_mul_scalar(cn_pow_scalar(y, 3), -0.5);
    case CN_OP_SIN: return cn_cos(x);
    case CN_OP_COS: return cn_neg(cn_sin(x));
    case CN_OP_TANH: return cn_add_scalar(cn_neg(cn_mul(y, y)), 1);
    case CN_OP_SIGMOID: return cn_mul(y, cn_add_scalar(cn_neg(y), 1));
    case CN_OP_SILU: {
        cn_tensor *s = cn_sigmoid(x);
        /* s * (1 + x * (1 - s)) */
        return cn_mul(s, cn_add_scalar(cn_mul(x, cn_add_scalar(cn_neg(s), 1)), 1));
    }
    case CN_OP_GELU:
        if (n->ints[0] == CN_GELU_ERF) {
            /* Phi(x) + x phi(x) */
            cn_tensor *cdf = cn_mul_scalar(cn_add_scalar(cn__erf(cn_mul_scalar(x, SQRT1_2)),
                                                         1),
                                           0.5);
            cn_tensor *pdf = cn_mul_scalar(cn_exp(cn_mul_scalar(cn_mul(x, x), -0.5)),
                                           1.0 / sqrt(2 * PI));
            return cn_add(cdf, cn_mul(x, pdf));
        } else {
            /* u = k (x + c x^3), t = tanh(u): 0.5 (1 + t) + 0.5 x (1 - t^2) k (1 + 3 c x^2) */
            const double k = sqrt(2 / PI), c = 0.044715;
            cn_tensor *x2 = cn_mul(x, x);
            cn_tensor *t = cn_tanh(cn_mul_scalar(cn_add(x, cn_mul_scalar(cn_mul(x2, x), c)), k));
            cn_tensor *left = cn_mul_scalar(cn_add_scalar(t, 1), 0.5);
            cn_tensor *sech2 = cn_add_scalar(cn_neg(cn_mul(t, t)), 1);
            cn_tensor *inner = cn_mul_scalar(cn_add_scalar(cn_mul_scalar(x2, 3 * c), 1), 0.5 * k);
            return cn_add(left, cn_mul(cn_mul(x, sech2), inner));
        }
    case CN_OP_ERF:
        return cn_mul_scalar(cn_exp(cn_neg(cn_mul(x, x))), 2.0 / sqrt(PI));
    case CN_OP_POW_SCALAR: return cn_mul_scalar(cn_pow_scalar(x, r[0] - 1), r[0]);
    case CN_OP_CLAMP:
        return mask_like(cn_logical_and(cn_ge(x, scalar_like(x, r[0])),
                                        cn_le(x, scalar_like(x, r[1]))),
                         x);
    default: return NULL;
    }
}

static cn_status binary_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    const ad_input *a = &n->in[0], *b = &n->in[1];
    cn_tensor *ga = NULL, *gb = NULL;
    cn_tensor *x = (ad_op_saves(n->op, 2) & 1u) ? ad_input_value(n, 0) : NULL;
    cn_tensor *y = (ad_op_saves(n->op, 2) & 2u) ? ad_input_value(n, 1) : NULL;
    switch (n->op) {
    case CN_OP_ADD: ga = g; gb = g; break;
    case CN_OP_SUB: ga = g; gb = cn_neg(g); break;
    case CN_OP_MUL: ga = cn_mul(g, y); gb = cn_mul(g, x); break;
    case CN_OP_DIV:
        ga = cn_div(g, y);
        gb = cn_neg(cn_div(cn_mul(g, x), cn_mul(y, y)));
        break;
    case CN_OP_POW: {
        cn_tensor *out = ad_output_value(n);
        ga = cn_mul(g, cn_mul(y, cn_pow(x, cn_add_scalar(y, -1))));
        gb = cn_mul(g, cn_mul(out, cn_log(x)));
        break;
    }
    case CN_OP_MAXIMUM:
    case CN_OP_MINIMUM: {
        /* ties split the gradient evenly, as PyTorch does */
        cn_tensor *win = n->op == CN_OP_MAXIMUM ? cn_gt(x, y) : cn_lt(x, y);
        cn_tensor *ma = cn_add(mask_like(win, x), cn_mul_scalar(mask_like(cn_eq(x, y), x), 0.5));
        ga = cn_mul(g, ma);
        gb = cn_mul(g, cn_add_scalar(cn_neg(ma), 1));
        break;
    }
    default: break;
    }
    if (a->node) gin[0] = cn_retain((sum_to_input(ga, a)));
    if (b->node) gin[1] = cn_retain((sum_to_input(gb, b)));
    return (a->node && !gin[0]) || (b->node && !gin[1]) ? cn_last_status() : CN_OK;
}

static cn_tensor *reduction_formula(ad_node *n, cn_tensor *g) {
    const ad_input *a = &n->in[0];
    int d = (int)n->ints[0];
    int64_t count = a->ndim ? a->shape[d] : 1;
    /* softmax's gradient has the input's shape; the reductions' has the reduced one */
    int full = n->op == CN_OP_SOFTMAX || n->op == CN_OP_LOG_SOFTMAX;
    cn_tensor *gk = full ? g : keep(g, a, d);
    cn_tensor *x, *y;
    switch (n->op) {
    case CN_OP_SUM: return cn_expand(gk, a->shape, a->ndim);
    case CN_OP_MEAN: return cn_expand(cn_mul_scalar(gk, 1.0 / (double)count), a->shape, a->ndim);
    case CN_OP_MAX:
    case CN_OP_MIN: {
        x = ad_input_value(n, 0);
        if (a->ndim == 0) return g;
        cn_tensor *idx = n->op == CN_OP_MAX ? cn_argmax_dim(x, d, 1) : cn_argmin_dim(x, d, 1);
        return cn_scatter_add(zeros_of(a, g), d, idx, gk);
    }
    case CN_OP_PROD:
        x = ad_input_value(n, 0);
        y = ad_output_value(n);
        return cn_div(cn_mul(gk, keep(y, a, d)), x);
    case CN_OP_VAR: {
        x = ad_input_value(n, 0);
        cn_tensor *centered = cn_sub(x, cn_mean_dim(x, d, 1));
        double scale = 2.0 / (double)(count - n->ints[1]);
        return cn_mul(cn_mul_scalar(centered, scale), gk);
    }
    case CN_OP_LOGSUMEXP:
        x = ad_input_value(n, 0);
        y = ad_output_value(n);
        return cn_mul(gk, cn_exp(cn_sub(x, keep(y, a, d))));
    case CN_OP_SOFTMAX:
        y = ad_output_value(n);
        return cn_mul(y, cn_sub(g, cn_sum_dim(cn_mul(g, y), d, 1)));
    case CN_OP_LOG_SOFTMAX:
        y = ad_output_value(n);
        return cn_sub(g, cn_mul(cn_exp(y), cn_sum_dim(g, d, 1)));
    default: return NULL;
    }
}

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
    if (n->n_in == 3 && n->in[2].node &&
        !(gin[2] = cn_retain(cn_sum_dim(cn_sum_dim(cn_sum_dim(g, 3, 0), 2, 0), 0, 0))))
        return cn_last_status();
    return CN_OK;
}

/* Layout and indexing ops: each input's gradient. */
static cn_tensor *layout_formula(ad_node *n, cn_tensor *g, int i) {
    const ad_input *a = &n->in[i];
    const int64_t *k = n->ints;
    switch (n->op) {
    case CN_OP_CAST: return cn_cast(g, a->dtype);
    case CN_OP_COPY: return g;
    case AD_OP_TRANSPOSE: return cn_transpose(g, (int)k[0], (int)k[1]);
    case AD_OP_PERMUTE: {
        int inverse[CN_MAX_DIMS];
        for (int d = 0; d < n->n_ints; d++) inverse[k[d]] = d;
        return cn_permute(g, inverse);
    }
    case AD_OP_VIEW: return cn_reshape(g, a->shape, a->ndim);
    case AD_OP_EXPAND: return sum_to_input(g, a);
    case AD_OP_SLICE: {
        cn_tensor *z = zeros_of(a, g);
        int dim = (int)k[0];
        cn_tensor *part = cn_slice(z, dim, k[1], k[1] + k[2] * n->shape[dim], k[2]);
        if (!part || cn_copy_(part, g) != CN_OK) return NULL;
        return z;
    }
    case AD_OP_CAT: {
        int64_t at = 0;
        for (int j = 0; j < i; j++) at += n->in[j].shape[k[0]];
        return cn_slice(g, (int)k[0], at, at + a->shape[k[0]], 1);
    }
    case CN_OP_GATHER:
        return cn_scatter_add(zeros_of(a, g), (int)k[0], ad_input_value(n, 1), g);
    case CN_OP_SCATTER_ADD:
        return i == 0 ? g : cn_gather(g, (int)k[0], ad_input_value(n, 1));
    case CN_OP_INDEX_SELECT: {
        int dim = (int)k[0];
        int64_t shape[CN_MAX_DIMS];
        for (int d = 0; d < n->ndim; d++) shape[d] = d == dim ? n->shape[d] : 1;
        cn_tensor *idx = cn_expand(cn_reshape(ad_input_value(n, 1), shape, n->ndim), n->shape,
                                   n->ndim);
        return cn_scatter_add(zeros_of(a, g), dim, idx, g);
    }
    case CN_OP_MAX_POOL2D: return cn__max_pool2d_backward(g, ad_input_value(n, 0), k);
    case CN_OP_AVG_POOL2D: return cn__avg_pool2d_backward(g, a->shape, k);
    case CN_OP_WHERE: {
        cn_tensor *cond = ad_input_value(n, 0), *zero = scalar_like(g, 0);
        return sum_to_input(i == 1 ? cn_where(cond, g, zero) : cn_where(cond, zero, g), a);
    }
    default: return NULL;
    }
}

static cn_status dispatch_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    int op = n->op;
    switch (op) {
    case CN_OP_ADD: case CN_OP_SUB: case CN_OP_MUL: case CN_OP_DIV: case CN_OP_POW:
    case CN_OP_MAXIMUM: case CN_OP_MINIMUM:
        return binary_formula(n, g, gin);
    case CN_OP_MATMUL: return matmul_formula(n, g, gin);
    case CN_OP_CONV2D: return conv_formula(n, g, gin);
    case CN_OP_NEG: gin[0] = cn_retain(cn_neg(g)); break;
    case CN_OP_ADD_SCALAR: gin[0] = cn_retain((g)); break;
    case CN_OP_MUL_SCALAR: gin[0] = cn_retain(cn_mul_scalar(g, n->reals[0])); break;
    case CN_OP_SUM: case CN_OP_MEAN: case CN_OP_MAX: case CN_OP_MIN: case CN_OP_PROD:
    case CN_OP_VAR: case CN_OP_LOGSUMEXP: case CN_OP_SOFTMAX: case CN_OP_LOG_SOFTMAX:
        gin[0] = cn_retain(reduction_formula(n, g));
        break;
    default:
        if (op <= CN_OP_CLAMP || op == CN_OP_ERF) { /* unary elementwise */
            gin[0] = cn_retain(cn_mul(g, unary_derivative(n)));
            break;
        }
        for (int i = 0; i < n->n_in; i++) {
            if (!n->in[i].node) continue;
            gin[i] = cn_retain(layout_formula(n, g, i));
            if (!gin[i]) break;
        }
        break;
    }
    for (int i = 0; i < n->n_in; i++)
        if (n->in[i].node && !gin[i]) {
            if (cn_last_status() == CN_OK)
                cn_set_error(CN_ERR_BACKEND, "backward", "no gradient formula for '%s'; this is "
                             "a bug in cinder: please report it", ad_op_name(op));
            return cn_last_status();
        }
    return CN_OK;
}

cn_status ad_backward_formula(ad_node *n, cn_tensor *g, cn_tensor **gin) {
    if (cn_scope_begin() != CN_OK) return cn_last_status();
    cn_status s = dispatch_formula(n, g, gin);
    cn_scope_end(); /* temporaries die; each gin[i] holds its own reference */
    if (s != CN_OK)
        for (int i = 0; i < n->n_in; i++) {
            cn_release(gin[i]);
            gin[i] = NULL;
        }
    return s;
}
