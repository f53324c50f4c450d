/* Front-ends of the elementwise ops: kind and dtype checks, broadcasting, output allocation. */
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* One elementwise call: up to three inputs broadcast together. value_from is the first input
 * whose dtype the value inputs share (where's cond is not a value input). */
typedef struct ew_call {
    cn_op op;
    int n;
    cn_tensor *in[3];
    const char *const *names; /* one per input, for messages */
    unsigned kinds[3];
    int value_from;          /* inputs value_from..n-1 must share a dtype */
    int out_dtype;           /* -1: the value inputs' dtype */
    int64_t ints[1];
    int n_ints;
    double reals[2];
    int n_reals;
} ew_call;

static const char *const x_name[1] = {"x"};
static const char *const ab_names[2] = {"a", "b"};
static const char *const where_names[3] = {"cond", "a", "b"};

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

static cn_tensor *elementwise(const ew_call *c) {
    const char *op = cn_op_name(c->op);
    cn_device dev;
    const cn_backend *b = cn__route(op, c->in, c->names, c->n, &dev);
    if (!b) return NULL;
    for (int i = 0; i < c->n; i++)
        if (cn__check_kind(op, c->names[i], c->in[i], c->kinds[i]) != CN_OK) return NULL;
    for (int i = c->value_from + 1; i < c->n; i++)
        if (c->in[i]->dtype != c->in[c->value_from]->dtype &&
            cn__check_same_dtype(op, c->names[c->value_from], c->in[c->value_from], c->names[i],
                                 c->in[i]) != CN_OK)
            return NULL;

    /* the usual case, inputs of one shape, takes that shape as it is; the rest broadcasts */
    const int64_t *shape = c->in[0]->shape;
    int ndim = c->in[0]->ndim, broadcast = 0;
    int64_t joint[CN_MAX_DIMS];
    for (int i = 1; i < c->n && !broadcast; i++) broadcast = !same_shape(c->in[0], c->in[i]);
    if (broadcast) {
        memcpy(joint, shape, sizeof(int64_t) * (size_t)ndim);
        shape = joint;
        if (c->n == 2) {
            if (cn__broadcast_shapes(op, c->names[0], c->in[0], c->names[1], c->in[1], joint,
                                     &ndim) != CN_OK)
                return NULL;
        } else {
            for (int i = 1; i < c->n; i++)
                if (fold_shape(op, joint, &ndim, c->in[i], c->names[i]) != CN_OK) return NULL;
        }
    }

    cn_dtype out_dtype = c->out_dtype >= 0 ? (cn_dtype)c->out_dtype
                                           : c->in[c->value_from]->dtype;
    cn_tensor *out = cn__tensor_alloc_routed(op, b, shape, ndim, out_dtype, dev);
    if (!out) return NULL;
    cn_view views[3];
    for (int i = 0; i < c->n; i++) {
        if (broadcast)
            cn__broadcast_view(c->in[i], shape, ndim, &views[i]);
        else
            cn__tensor_as_view(c->in[i], &views[i]);
    }
    if (cn__launch(b, dev, c->op, views, c->n, &out, 1, c->ints, c->n_ints, c->reals,
                   c->n_reals) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(c->op, out, c->in, c->n, c->ints, c->n_ints, c->reals, c->n_reals);
}

static cn_tensor *unary(cn_op op, cn_tensor *x, unsigned kinds) {
    ew_call c = {.op = op, .n = 1, .in = {x}, .names = x_name, .kinds = {kinds}, .out_dtype = -1};
    return elementwise(&c);
}

static cn_tensor *binary(cn_op op, cn_tensor *a, cn_tensor *b, unsigned kinds, int out_dtype) {
    ew_call c = {.op = op, .n = 2, .in = {a, b}, .names = ab_names, .kinds = {kinds, kinds},
                 .out_dtype = out_dtype};
    return elementwise(&c);
}

static cn_tensor *with_scalars(cn_op op, cn_tensor *x, unsigned kinds, double r0, double r1,
                               int n_reals) {
    ew_call c = {.op = op, .n = 1, .in = {x}, .names = x_name, .kinds = {kinds}, .out_dtype = -1,
                 .reals = {r0, r1}, .n_reals = n_reals};
    return elementwise(&c);
}

cn_tensor *cn_add(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_ADD, a, b, CN_KINDS_NUMERIC, -1); }
cn_tensor *cn_sub(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_SUB, a, b, CN_KINDS_NUMERIC, -1); }
cn_tensor *cn_mul(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_MUL, a, b, CN_KINDS_NUMERIC, -1); }
cn_tensor *cn_div(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_DIV, a, b, CN_KINDS_NUMERIC, -1); }
cn_tensor *cn_pow(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_POW, a, b, CN_KINDS_FLOAT, -1); }
cn_tensor *cn_maximum(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_MAXIMUM, a, b, CN_KINDS_NUMERIC, -1); }
cn_tensor *cn_minimum(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_MINIMUM, a, b, CN_KINDS_NUMERIC, -1); }

cn_tensor *cn_neg(cn_tensor *x) { return unary(CN_OP_NEG, x, CN_KINDS_NUMERIC); }
cn_tensor *cn_abs(cn_tensor *x) { return unary(CN_OP_ABS, x, CN_KINDS_NUMERIC); }
cn_tensor *cn_relu(cn_tensor *x) { return unary(CN_OP_RELU, x, CN_KINDS_NUMERIC); }
cn_tensor *cn_exp(cn_tensor *x) { return unary(CN_OP_EXP, x, CN_KINDS_FLOAT); }
cn_tensor *cn_log(cn_tensor *x) { return unary(CN_OP_LOG, x, CN_KINDS_FLOAT); }
cn_tensor *cn_log1p(cn_tensor *x) { return unary(CN_OP_LOG1P, x, CN_KINDS_FLOAT); }
cn_tensor *cn_sqrt(cn_tensor *x) { return unary(CN_OP_SQRT, x, CN_KINDS_FLOAT); }
cn_tensor *cn_rsqrt(cn_tensor *x) { return unary(CN_OP_RSQRT, x, CN_KINDS_FLOAT); }
cn_tensor *cn_sin(cn_tensor *x) { return unary(CN_OP_SIN, x, CN_KINDS_FLOAT); }
cn_tensor *cn_cos(cn_tensor *x) { return unary(CN_OP_COS, x, CN_KINDS_FLOAT); }
cn_tensor *cn_tanh(cn_tensor *x) { return unary(CN_OP_TANH, x, CN_KINDS_FLOAT); }
cn_tensor *cn_sigmoid(cn_tensor *x) { return unary(CN_OP_SIGMOID, x, CN_KINDS_FLOAT); }
cn_tensor *cn_silu(cn_tensor *x) { return unary(CN_OP_SILU, x, CN_KINDS_FLOAT); }
cn_tensor *cn__erf(cn_tensor *x) { return unary(CN_OP_ERF, x, CN_KINDS_FLOAT); }

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
    ew_call c = {.op = CN_OP_GELU, .n = 1, .in = {x}, .names = x_name, .kinds = {CN_KINDS_FLOAT},
                 .out_dtype = -1, .ints = {approx}, .n_ints = 1};
    return elementwise(&c);
}

cn_tensor *cn_add_scalar(cn_tensor *x, double s) {
    CN__CHECK_LIVE("add_scalar", x);
    if (x && cn__check_int_scalar("add_scalar", "s", s, x->dtype) != CN_OK) return NULL;
    return with_scalars(CN_OP_ADD_SCALAR, x, CN_KINDS_NUMERIC, s, 0, 1);
}
cn_tensor *cn_mul_scalar(cn_tensor *x, double s) {
    CN__CHECK_LIVE("mul_scalar", x);
    if (x && cn__check_int_scalar("mul_scalar", "s", s, x->dtype) != CN_OK) return NULL;
    return with_scalars(CN_OP_MUL_SCALAR, x, CN_KINDS_NUMERIC, s, 0, 1);
}
cn_tensor *cn_pow_scalar(cn_tensor *x, double p) {
    return with_scalars(CN_OP_POW_SCALAR, x, CN_KINDS_FLOAT, p, 0, 1);
}

cn_tensor *cn_clamp(cn_tensor *x, double lo, double hi) {
    if (x && !(lo <= hi)) {
        cn_set_error(CN_ERR_INVALID_ARG, "clamp", "lo = %g is not <= hi = %g; swap them", lo, hi);
        return NULL;
    }
    return with_scalars(CN_OP_CLAMP, x, CN_KINDS_NUMERIC, lo, hi, 2);
}

cn_tensor *cn_where(cn_tensor *cond, cn_tensor *a, cn_tensor *b) {
    ew_call c = {.op = CN_OP_WHERE, .n = 3, .in = {cond, a, b}, .names = where_names,
                 .kinds = {CN_KINDS_BOOL, CN_KINDS_ALL, CN_KINDS_ALL}, .value_from = 1,
                 .out_dtype = -1};
    return elementwise(&c);
}

cn_tensor *cn_cast(cn_tensor *x, cn_dtype dtype) {
    if (x && cn_dtype_size(dtype) == 0) {
        cn_set_error(CN_ERR_DTYPE, "cast", "target dtype value %d is not a cn_dtype; use CN_F32, "
                     "CN_I64, ...", (int)dtype);
        return NULL;
    }
    ew_call c = {.op = CN_OP_CAST, .n = 1, .in = {x}, .names = x_name, .kinds = {CN_KINDS_ALL},
                 .out_dtype = dtype};
    return elementwise(&c);
}

cn_tensor *cn_eq(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_EQ, a, b, CN_KINDS_ALL, CN_BOOL); }
cn_tensor *cn_ne(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_NE, a, b, CN_KINDS_ALL, CN_BOOL); }
cn_tensor *cn_lt(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_LT, a, b, CN_KINDS_ALL, CN_BOOL); }
cn_tensor *cn_le(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_LE, a, b, CN_KINDS_ALL, CN_BOOL); }
cn_tensor *cn_gt(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_GT, a, b, CN_KINDS_ALL, CN_BOOL); }
cn_tensor *cn_ge(cn_tensor *a, cn_tensor *b) { return binary(CN_OP_GE, a, b, CN_KINDS_ALL, CN_BOOL); }

cn_tensor *cn_logical_and(cn_tensor *a, cn_tensor *b) {
    return binary(CN_OP_LOGICAL_AND, a, b, CN_KINDS_BOOL, CN_BOOL);
}
cn_tensor *cn_logical_or(cn_tensor *a, cn_tensor *b) {
    return binary(CN_OP_LOGICAL_OR, a, b, CN_KINDS_BOOL, CN_BOOL);
}
cn_tensor *cn_logical_not(cn_tensor *x) { return unary(CN_OP_LOGICAL_NOT, x, CN_KINDS_BOOL); }
