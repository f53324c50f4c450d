/* Front-ends of the elementwise ops: kind and dtype checks, broadcasting, output allocation. */
#include <math.h>
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* Input names for messages, by the number of inputs of the op's family. */
static const char *const x_name[1] = {"x"};
static const char *const ab_names[2] = {"a", "b"};
static const char *const where_names[3] = {"cond", "a", "b"};
static const char *const *const names_of[4] = {NULL, x_name, ab_names, where_names};

/* Folds t's shape into the running broadcast shape (numpy rules). */
static cn_status fold_shape(const char *op, int64_t *shape, int *ndim, const cn_tensor *t,
                            const char *name) {
    int nd = *ndim > t->ndim ? *ndim : t->ndim;
    int64_t out[CN_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int da = *ndim - nd + d, dt = t->ndim - nd + d;
        int64_t sa = da >= 0 ? shape[da] : 1, st = dt >= 0 ? t->shape[dt] : 1;
        if (sa != st && sa != 1 && st != 1) {
            char x[128], y[128];
            return cn_set_error(CN_ERR_SHAPE, op, "'%s' %s does not broadcast with the shape %s "
                                "of the other inputs (dim %d: %lld vs %lld); make the sizes "
                                "equal or 1, e.g. with cn_reshape or cn_unsqueeze", name,
                                cn_tensor_str(t, x, sizeof x), cn__shape_str(shape, *ndim, y,
                                                                             sizeof y),
                                d - nd, (long long)st, (long long)sa);
        }
        out[d] = sa == 1 ? st : sa;
    }
    memcpy(shape, out, sizeof(int64_t) * (size_t)nd);
    *ndim = nd;
    return CN_OK;
}

static int same_shape(const cn_tensor *a, const cn_tensor *b) {
    if (a->ndim != b->ndim) return 0;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return 0;
    return 1;
}

/* The one front-end of every elementwise op: the op table's row says how many inputs, their
 * kinds, which share a dtype, the output dtype and the attributes. target: the output dtype of a
 * CN__OUT_TARGET op (cast). */
cn_tensor *cn__elementwise(cn_op op, cn_tensor *const *in, const int64_t *ints,
                           const double *reals, cn_dtype target) {
    const cn__op_decl *d = &cn__op_table[op]; /* op is one of the front-ends' own */
    const char *name = d->name;
    int n = d->n_in, vf = d->value_from;
    const char *const *names = names_of[n];
    cn_device dev;
    const cn_backend *b = cn__route(name, in, names, n, &dev);
    if (!b) return NULL;
    /* The usual case in one test: the value inputs share a dtype of the kinds the op accepts,
     * which the backend's kernel takes (0 in b->dtypes: all of them), and any other input (where's
     * cond) is of its kind. Otherwise the checks one by one, for the message. */
    cn_kernel_fn k = b->kernels[op];
    cn_dtype dt = in[vf]->dtype;
    uint32_t takes = b->dtypes[op] ? b->dtypes[op] : ~0u;
    int usual = k && ((takes & cn__kinds_dtypes_table[d->kinds[vf]]) >> dt) & 1u;
    for (int i = 0; i < n; i++)
        usual &= i < vf ? (int)((d->kinds[i] >> cn__dtype_kind(in[i]->dtype)) & 1u)
                        : in[i]->dtype == dt;
    if (!usual) {
        for (int i = 0; i < n; i++)
            if (cn__check_kind(name, names[i], in[i], d->kinds[i]) != CN_OK) return NULL;
        for (int i = vf + 1; i < n; i++)
            if (in[i]->dtype != dt &&
                cn__check_same_dtype(name, names[vf], in[vf], names[i], in[i]) != CN_OK)
                return NULL;
    }

    /* the usual case, inputs of one shape, takes that shape as it is; the rest broadcasts */
    const int64_t *shape = in[0]->shape;
    int ndim = in[0]->ndim, broadcast = 0;
    int64_t joint[CN_MAX_DIMS];
    for (int i = 1; i < n && !broadcast; i++) broadcast = !same_shape(in[0], in[i]);
    if (broadcast) {
        memcpy(joint, shape, sizeof(int64_t) * (size_t)ndim);
        shape = joint;
        if (n == 2) {
            if (cn__broadcast_shapes(name, names[0], in[0], names[1], in[1], joint, &ndim) !=
                CN_OK)
                return NULL;
        } else {
            for (int i = 1; i < n; i++)
                if (fold_shape(name, joint, &ndim, in[i], names[i]) != CN_OK) return NULL;
        }
    }

    if (!usual) { /* the backend's refusal, before anything is allocated */
        cn__kernel_refused(b, op, dt);
        return NULL;
    }
    cn_dtype out_dtype = d->out == CN__OUT_INPUT ? dt : d->out == CN__OUT_BOOL ? CN_BOOL : target;
    cn_tensor *out = cn__tensor_alloc_routed(name, b, shape, ndim, out_dtype, dev);
    if (!out) return NULL;
    cn_view views[3], ov;
    for (int i = 0; i < n; i++) {
        if (broadcast)
            cn__broadcast_view(in[i], shape, ndim, &views[i]);
        else
            cn__tensor_as_view(in[i], &views[i]);
    }
    cn__tensor_as_view(out, &ov);
    if (cn__launch_kernel(NULL, k, b, dev, op, views, n, &ov, 1, ints, d->n_ints, reals,
                          d->n_reals, NULL) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    out->storage->version++;
    return cn__record(op, out, in, n, ints, d->n_ints, reals, d->n_reals);
}

static cn_tensor *unary(cn_op op, cn_tensor *x) { return cn__elementwise(op, &x, NULL, NULL, 0); }

static cn_tensor *binary(cn_op op, cn_tensor *a, cn_tensor *b) {
    cn_tensor *in[2] = {a, b};
    return cn__elementwise(op, in, NULL, NULL, 0);
}

static cn_tensor *with_scalars(cn_op op, cn_tensor *x, double r0, double r1) {
    double reals[2] = {r0, r1};
    return cn__elementwise(op, &x, NULL, reals, 0);
}

cn_tensor *cn_add(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_ADD, a, b); }
cn_tensor *cn_sub(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_SUB, a, b); }
cn_tensor *cn_mul(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_MUL, a, b); }
cn_tensor *cn_div(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_DIV, a, b); }
cn_tensor *cn_pow(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_POW, a, b); }
cn_tensor *cn_maximum(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_MAXIMUM, a, b); }
cn_tensor *cn_minimum(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_MINIMUM, a, b); }
cn_tensor *cn_atan2(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_ATAN2, a, b); }

cn_tensor *cn_neg(cn_tensor *x) { return unary(CN_OP_NEG, x); }
cn_tensor *cn_abs(cn_tensor *x) { return unary(CN_OP_ABS, x); }
cn_tensor *cn_relu(cn_tensor *x) { return unary(CN_OP_RELU, x); }
cn_tensor *cn_exp(cn_tensor *x) { return unary(CN_OP_EXP, x); }
cn_tensor *cn_log(cn_tensor *x) { return unary(CN_OP_LOG, x); }
cn_tensor *cn_log1p(cn_tensor *x) { return unary(CN_OP_LOG1P, x); }
cn_tensor *cn_sqrt(cn_tensor *x) { return unary(CN_OP_SQRT, x); }
cn_tensor *cn_rsqrt(cn_tensor *x) { return unary(CN_OP_RSQRT, x); }
cn_tensor *cn_sin(cn_tensor *x) { return unary(CN_OP_SIN, x); }
cn_tensor *cn_cos(cn_tensor *x) { return unary(CN_OP_COS, x); }
cn_tensor *cn_tanh(cn_tensor *x) { return unary(CN_OP_TANH, x); }
cn_tensor *cn_sigmoid(cn_tensor *x) { return unary(CN_OP_SIGMOID, x); }
cn_tensor *cn_silu(cn_tensor *x) { return unary(CN_OP_SILU, x); }
cn_tensor *cn_erf(cn_tensor *x) { return unary(CN_OP_ERF, x); }
cn_tensor *cn__erf(cn_tensor *x) { return cn_erf(x); }
cn_tensor *cn_floor(cn_tensor *x) { return unary(CN_OP_FLOOR, x); }
cn_tensor *cn_ceil(cn_tensor *x) { return unary(CN_OP_CEIL, x); }
cn_tensor *cn_round(cn_tensor *x) { return unary(CN_OP_ROUND, x); }
cn_tensor *cn_trunc(cn_tensor *x) { return unary(CN_OP_TRUNC, x); }
cn_tensor *cn_sign(cn_tensor *x) { return unary(CN_OP_SIGN, x); }
cn_tensor *cn_reciprocal(cn_tensor *x) { return unary(CN_OP_RECIPROCAL, x); }
cn_tensor *cn_tan(cn_tensor *x) { return unary(CN_OP_TAN, x); }
cn_tensor *cn_asin(cn_tensor *x) { return unary(CN_OP_ASIN, x); }
cn_tensor *cn_acos(cn_tensor *x) { return unary(CN_OP_ACOS, x); }
cn_tensor *cn_atan(cn_tensor *x) { return unary(CN_OP_ATAN, x); }
cn_tensor *cn_sinh(cn_tensor *x) { return unary(CN_OP_SINH, x); }
cn_tensor *cn_cosh(cn_tensor *x) { return unary(CN_OP_COSH, x); }
cn_tensor *cn_asinh(cn_tensor *x) { return unary(CN_OP_ASINH, x); }
cn_tensor *cn_acosh(cn_tensor *x) { return unary(CN_OP_ACOSH, x); }
cn_tensor *cn_atanh(cn_tensor *x) { return unary(CN_OP_ATANH, x); }

cn_tensor *cn__activation_backward(cn_tensor *g, cn_tensor *s, cn_op op, int approx) {
    cn_tensor *in[2] = {g, s};
    int64_t ints[2] = {op, approx};
    return cn__elementwise(CN_OP_ACTIVATION_BACKWARD, in, ints, NULL, 0);
}

cn_tensor *cn__softmax_backward(cn_tensor *g, cn_tensor *y, int dim, int log) {
    const char *op = "softmax_backward";
    cn_tensor *in[2] = {g, y};
    const char *names[2] = {"g", "y"};
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, 2, &dev);
    if (!be) return NULL;
    if (cn__check_kind(op, "g", g, CN_KINDS_FLOAT) != CN_OK ||
        cn__check_same_dtype(op, "g", g, "y", y) != CN_OK)
        return NULL;
    if (g->ndim != y->ndim || memcmp(g->shape, y->shape, sizeof(int64_t) * (size_t)g->ndim) ||
        (g->ndim > 0 && (dim < 0 || dim >= g->ndim))) {
        cn_set_error(CN_ERR_SHAPE, op, "g and y must have one shape and dim (%d) be one of its "
                     "dims", dim);
        return NULL;
    }
    cn_tensor *out = cn__tensor_alloc(op, g->shape, g->ndim, g->dtype, dev);
    if (!out) return NULL;
    cn_view views[2];
    cn__tensor_as_view(g, &views[0]);
    cn__tensor_as_view(y, &views[1]);
    int64_t ints[2] = {dim, log != 0};
    if (cn__launch(be, dev, CN_OP_SOFTMAX_BACKWARD, views, 2, &out, 1, ints, 2, NULL, 0) !=
        CN_OK) {
        cn_release(out);
        return NULL;
    }
    return out;
}

int cn__has_kernel(cn_op op, const cn_tensor *t) {
    const cn_backend *b = t && t->storage ? t->storage->backend : NULL;
    if (!b || !b->kernels[op]) return 0;
    return !b->dtypes[op] || ((b->dtypes[op] >> t->dtype) & 1u);
}

cn_tensor *cn_gelu(cn_tensor *x, cn_gelu_approx approx) {
    if (approx != CN_GELU_ERF && approx != CN_GELU_TANH) {
        if (!x) {
            cn__null_arg("gelu", "x");
            return NULL;
        }
        cn_set_error(CN_ERR_INVALID_ARG, "gelu", "approx = %d; use CN_GELU_ERF or CN_GELU_TANH",
                     (int)approx);
        return NULL;
    }
    int64_t ints[1] = {approx};
    return cn__elementwise(CN_OP_GELU, &x, ints, NULL, 0);
}

cn_tensor *cn_add_scalar(cn_tensor *x, double s) {
    CN__CHECK_LIVE("add_scalar", x);
    if (x && cn__check_int_scalar("add_scalar", "s", s, x->dtype) != CN_OK) return NULL;
    return with_scalars(CN_OP_ADD_SCALAR, x, s, 0);
}
cn_tensor *cn_mul_scalar(cn_tensor *x, double s) {
    CN__CHECK_LIVE("mul_scalar", x);
    if (x && cn__check_int_scalar("mul_scalar", "s", s, x->dtype) != CN_OK) return NULL;
    return with_scalars(CN_OP_MUL_SCALAR, x, s, 0);
}
cn_tensor *cn_pow_scalar(cn_tensor *x, double p) {
    CN__CHECK_LIVE("pow_scalar", x);
    if (x && cn__dtype_kind(x->dtype) == CN_KIND_INT && !(p >= 0 && p == trunc(p))) {
        cn_set_error(CN_ERR_INVALID_ARG, "pow_scalar", "p = %g and x is %s: an integer tensor "
                     "takes a whole exponent >= 0 (as in PyTorch, integers to negative powers "
                     "are not allowed); cast x to a float dtype (cn_cast(x, CN_F64))", p,
                     cn_dtype_name(x->dtype));
        return NULL;
    }
    if (x && cn__check_int_scalar("pow_scalar", "p", p, x->dtype) != CN_OK) return NULL;
    return with_scalars(CN_OP_POW_SCALAR, x, p, 0);
}

cn_tensor *cn_clamp(cn_tensor *x, double lo, double hi) {
    if (x && !(lo <= hi)) {
        cn_set_error(CN_ERR_INVALID_ARG, "clamp", "lo = %g is not <= hi = %g; swap them", lo, hi);
        return NULL;
    }
    return with_scalars(CN_OP_CLAMP, x, lo, hi);
}

/* ---- issue 16's remaining elementwise ops ------------------------------------------------- */

cn_tensor *cn_remainder(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_REMAINDER, a, b); }
cn_tensor *cn_fmod(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_FMOD, a, b); }
cn_tensor *cn_hypot(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_HYPOT, a, b); }
cn_tensor *cn_is_nan(cn_tensor *x) { return unary(CN_OP_IS_NAN, x); }
cn_tensor *cn_is_inf(cn_tensor *x) { return unary(CN_OP_IS_INF, x); }
cn_tensor *cn_bitwise_and(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_BITWISE_AND, a, b); }
cn_tensor *cn_bitwise_or(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_BITWISE_OR, a, b); }
cn_tensor *cn_bitwise_xor(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_BITWISE_XOR, a, b); }
cn_tensor *cn_bitwise_left_shift(cn_tensor *a, cn_tensor *b) {
    return binary(CN_OP_BITWISE_LEFT_SHIFT, a, b);
}
cn_tensor *cn_bitwise_right_shift(cn_tensor *a, cn_tensor *b) {
    return binary(CN_OP_BITWISE_RIGHT_SHIFT, a, b);
}
cn_tensor *cn_bitwise_not(cn_tensor *x) { return unary(CN_OP_BITWISE_NOT, x); }
cn_tensor *cn_logical_xor(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_LOGICAL_XOR, a, b); }

/* op with the scalar s, which on an int tensor must be a whole number that fits its dtype (the
 * kinds and dtypes themselves are the router's to check). */
static cn_tensor *with_int_scalar(cn_op op, cn_tensor *x, double s) {
    const char *name = cn__op_table[op].name;
    CN__CHECK_LIVE(name, x);
    if (x && cn__dtype_kind(x->dtype) == CN_KIND_INT) {
        if (cn__check_int_scalar(name, "s", s, x->dtype) != CN_OK) return NULL;
        if (s != trunc(s)) {
            cn_set_error(CN_ERR_INVALID_ARG, name, "s = %g is not an integer, and x is %s; pass "
                         "a whole number%s", s, cn_dtype_name(x->dtype),
                         op == CN_OP_REMAINDER_SCALAR
                             ? ", or cast x to a float dtype (cn_cast(x, CN_F64))"
                             : "");
            return NULL;
        }
        if (op == CN_OP_REMAINDER_SCALAR && s == 0) {
            cn_set_error(CN_ERR_INVALID_ARG, name, "integer division by zero: s = 0 and x is %s; "
                         "pass a nonzero s, or cast x to a float dtype to get NaN instead",
                         cn_dtype_name(x->dtype));
            return NULL;
        }
    }
    return with_scalars(op, x, s, 0);
}

cn_tensor *cn_remainder_scalar(cn_tensor *x, double s) {
    return with_int_scalar(CN_OP_REMAINDER_SCALAR, x, s);
}
cn_tensor *cn_bitwise_and_scalar(cn_tensor *x, double s) {
    return with_int_scalar(CN_OP_BITWISE_AND_SCALAR, x, s);
}
cn_tensor *cn_bitwise_or_scalar(cn_tensor *x, double s) {
    return with_int_scalar(CN_OP_BITWISE_OR_SCALAR, x, s);
}
cn_tensor *cn_bitwise_xor_scalar(cn_tensor *x, double s) {
    return with_int_scalar(CN_OP_BITWISE_XOR_SCALAR, x, s);
}
cn_tensor *cn_bitwise_left_shift_scalar(cn_tensor *x, double s) {
    return with_int_scalar(CN_OP_BITWISE_LEFT_SHIFT_SCALAR, x, s);
}
cn_tensor *cn_bitwise_right_shift_scalar(cn_tensor *x, double s) {
    return with_int_scalar(CN_OP_BITWISE_RIGHT_SHIFT_SCALAR, x, s);
}

cn_tensor *cn_eq_scalar(cn_tensor *x, double s) { return with_scalars(CN_OP_EQ_SCALAR, x, s, 0); }
cn_tensor *cn_ne_scalar(cn_tensor *x, double s) { return with_scalars(CN_OP_NE_SCALAR, x, s, 0); }
cn_tensor *cn_lt_scalar(cn_tensor *x, double s) { return with_scalars(CN_OP_LT_SCALAR, x, s, 0); }
cn_tensor *cn_le_scalar(cn_tensor *x, double s) { return with_scalars(CN_OP_LE_SCALAR, x, s, 0); }
cn_tensor *cn_gt_scalar(cn_tensor *x, double s) { return with_scalars(CN_OP_GT_SCALAR, x, s, 0); }
cn_tensor *cn_ge_scalar(cn_tensor *x, double s) { return with_scalars(CN_OP_GE_SCALAR, x, s, 0); }

/* ---- activations as direct ops ----------------------------------------------------------- */

cn_tensor *cn_hard_sigmoid(cn_tensor *x) { return unary(CN_OP_HARD_SIGMOID, x); }
cn_tensor *cn_log_sigmoid(cn_tensor *x) { return unary(CN_OP_LOG_SIGMOID, x); }
cn_tensor *cn_hard_swish(cn_tensor *x) { return unary(CN_OP_HARD_SWISH, x); }

/* Refuses a NaN or infinite attribute of op, naming it. */
static int finite_attr(const char *op, cn_tensor *x, const char *arg, double v, const char *hint) {
    if (!x || isfinite(v)) return 1;
    cn_set_error(CN_ERR_INVALID_ARG, op, "%s = %g; pass a finite value (%s)", arg, v, hint);
    return 0;
}

cn_tensor *cn_leaky_relu(cn_tensor *x, double negative_slope) {
    if (!finite_attr("leaky_relu", x, "negative_slope", negative_slope, "PyTorch's default is "
                     "0.01"))
        return NULL;
    return with_scalars(CN_OP_LEAKY_RELU, x, negative_slope, 0);
}
cn_tensor *cn_elu(cn_tensor *x, double alpha) {
    if (!finite_attr("elu", x, "alpha", alpha, "PyTorch's default is 1")) return NULL;
    return with_scalars(CN_OP_ELU, x, alpha, 0);
}
cn_tensor *cn_softplus(cn_tensor *x, double beta, double threshold) {
    if (!finite_attr("softplus", x, "beta", beta, "PyTorch's default is 1") ||
        !finite_attr("softplus", x, "threshold", threshold, "PyTorch's default is 20"))
        return NULL;
    if (x && beta == 0) {
        cn_set_error(CN_ERR_INVALID_ARG, "softplus", "beta = 0 divides by zero; pass a nonzero "
                     "beta (PyTorch's default is 1)");
        return NULL;
    }
    return with_scalars(CN_OP_SOFTPLUS, x, beta, threshold);
}

/* weight [C] (C = x's dim 1) or one element, viewed as [1, C, 1, ...] or 0-d to broadcast. */
cn_tensor *cn_prelu(cn_tensor *x, cn_tensor *weight) {
    const char *op = "prelu";
    if (!x || !weight) {
        cn__null_arg(op, !x ? "x" : "weight");
        return NULL;
    }
    CN__CHECK_LIVE(op, x);
    CN__CHECK_LIVE(op, weight);
    /* here, so that the messages name x and weight (the binary op's would say a and b) */
    if (cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK ||
        cn__check_same_dtype(op, "x", x, "weight", weight) != CN_OK)
        return NULL;
    char s[128], t[128];
    int64_t c = weight->ndim == 0 ? 1 : weight->shape[0];
    int64_t channels = x->ndim >= 2 ? x->shape[1] : 1;
    if (weight->ndim > 1 || (c != 1 && c != channels)) {
        cn_set_error(CN_ERR_SHAPE, op, "'weight' is %s but 'x' %s has %lld channel(s) (dim 1, or "
                     "1 below 2-D); pass a 1-D weight of [%lld] (one per channel) or [1] (one "
                     "for all)", cn_tensor_str(weight, s, sizeof s), cn_tensor_str(x, t, sizeof t),
                     (long long)channels, (long long)channels);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    int nd = c == 1 ? 0 : x->ndim;
    for (int d = 0; d < nd; d++) shape[d] = d == 1 ? c : 1;
    cn_tensor *w = cn_reshape(weight, shape, nd);
    if (!w) return NULL;
    cn_tensor *out = binary(CN_OP_PRELU, x, w);
    cn_release(w);
    return out;
}

/* softmax(-x), as torch.nn.functional.softmin computes it; checked first so that errors name
 * softmin. */
cn_tensor *cn_softmin(cn_tensor *x, int dim) {
    const char *names[1] = {"x"};
    cn_device dev;
    if (!cn__route("softmin", &x, names, 1, &dev) ||
        cn__check_kind("softmin", "x", x, CN_KINDS_FLOAT) != CN_OK ||
        cn__norm_dim("softmin", "dim", dim, x->ndim) < 0)
        return NULL;
    cn_tensor *neg = cn_neg(x);
    cn_tensor *out = neg ? cn_softmax(neg, dim) : NULL;
    cn_release(neg);
    return out;
}

cn_tensor *cn_where(cn_tensor *cond, cn_tensor *a, cn_tensor *b) {
    cn_tensor *in[3] = {cond, a, b};
    return cn__elementwise(CN_OP_WHERE, in, NULL, NULL, 0);
}

cn_tensor *cn_cast(cn_tensor *x, cn_dtype dtype) {
    if (x && cn_dtype_size(dtype) == 0) {
        cn_set_error(CN_ERR_DTYPE, "cast", "target dtype value %d is not a cn_dtype; use CN_F32, "
                     "CN_I64, ...", (int)dtype);
        return NULL;
    }
    return cn__elementwise(CN_OP_CAST, &x, NULL, NULL, dtype);
}

cn_tensor *cn_eq(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_EQ, a, b); }
cn_tensor *cn_ne(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_NE, a, b); }
cn_tensor *cn_lt(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_LT, a, b); }
cn_tensor *cn_le(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_LE, a, b); }
cn_tensor *cn_gt(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_GT, a, b); }
cn_tensor *cn_ge(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_GE, a, b); }

cn_tensor *cn_logical_and(cn_tensor *a, cn_tensor *b) {
    return binary(CN_OP_LOGICAL_AND, a, b);
}
cn_tensor *cn_logical_or(cn_tensor *a, cn_tensor *b) {
    return binary(CN_OP_LOGICAL_OR, a, b);
}
cn_tensor *cn_logical_not(cn_tensor *x) { return unary(CN_OP_LOGICAL_NOT, x); }
