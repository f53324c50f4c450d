/* Front-ends of reductions and softmax: dim handling, keepdim, the all-elements form. */
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/router.h"

void cn__drop_dim(cn_tensor *t, int d) {
    for (int k = d; k < t->ndim - 1; k++) {
        t->shape[k] = t->shape[k + 1];
        t->strides[k] = t->strides[k + 1];
    }
    t->ndim--;
}

static int extreme_op(cn_op op) {
    return op == CN_OP_MAX || op == CN_OP_MIN || op == CN_OP_ARGMAX || op == CN_OP_ARGMIN;
}

static unsigned reduce_kinds(cn_op op) {
    return op == CN_OP_MEAN || op == CN_OP_VAR || op == CN_OP_LOGSUMEXP ? CN_KINDS_FLOAT
                                                                         : CN_KINDS_NUMERIC;
}

/* Reduces dim `dim` of x (a 0-d x counts as shape [1]). */
static cn_tensor *reduce_dim(cn_op op, cn_tensor *x, int dim, int keepdim, int64_t correction) {
    const char *name = cn_op_name(op);
    cn_device dev;
    const char *names[1] = {"x"};
    const cn_backend *b = cn__route(name, &x, names, 1, &dev);
    if (!b || cn__check_kind(name, "x", x, reduce_kinds(op)) != CN_OK) return NULL;
    int d = cn__norm_dim(name, "dim", dim, x->ndim);
    if (d < 0) return NULL;

    cn_view in;
    cn__tensor_as_view(x, &in);
    if (x->ndim == 0) { /* view the scalar as [1] */
        in.ndim = 1;
        in.shape[0] = 1;
        in.strides[0] = 1;
    }
    if (in.shape[d] == 0 && extreme_op(op)) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, name, "dim %d of 'x' %s is empty, and an empty set has no "
                     "%s; check the tensor is not empty before reducing it", d,
                     cn_tensor_str(x, a, sizeof a), name);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, in.shape, sizeof(int64_t) * (size_t)in.ndim);
    shape[d] = 1;
    cn_dtype out_dtype = op == CN_OP_ARGMAX || op == CN_OP_ARGMIN ? CN_I64 : x->dtype;
    cn_tensor *out = cn__tensor_alloc(name, shape, in.ndim, out_dtype, dev);
    if (!out) return NULL;
    int64_t ints[2] = {d, correction};
    if (cn__launch(b, dev, op, &in, 1, &out, 1, ints, op == CN_OP_VAR ? 2 : 1, NULL, 0) !=
        CN_OK) {
        cn_release(out);
        return NULL;
    }
    if (!keepdim || x->ndim == 0) cn__drop_dim(out, d);
    return cn__record(op, out, &x, 1, ints, 2, NULL, 0);
}

/* Reduces all elements to a 0-d tensor (argmax/argmin index the row-major flattening). */
static cn_tensor *reduce_all(cn_op op, cn_tensor *x, int64_t correction) {
    if (!x) {
        cn__null_arg(cn_op_name(op), "x");
        return NULL;
    }
    int64_t flat = -1;
    cn_tensor *f = cn_reshape(x, &flat, 1);
    if (!f) return NULL;
    cn_tensor *out = reduce_dim(op, f, 0, 0, correction);
    cn_release(f);
    return out;
}

cn_tensor *cn_sum(cn_tensor *x) { return reduce_all(CN_OP_SUM, x, 0); }
cn_tensor *cn_sum_dim(cn_tensor *x, int dim, int keepdim) {
    return reduce_dim(CN_OP_SUM, x, dim, keepdim, 0);
}
/* The mean of an int tensor, as burn's int_mean (PyTorch has none): the sum in x's dtype divided
 * by the count, truncated toward zero (cn_div on ints). whole: over all elements, else along
 * dim. No elements is an error: an int has no NaN to give. */
static cn_tensor *int_mean(cn_tensor *x, int whole, int dim, int keepdim) {
    const char *op = "mean";
    int64_t count = 1;
    if (whole) {
        count = cn_numel(x);
    } else {
        int d = cn__norm_dim(op, "dim", dim, x->ndim);
        if (d < 0) return NULL;
        count = x->ndim == 0 ? 1 : x->shape[d];
    }
    if (count == 0) {
        char buf[128];
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "'x' is %s, with no element to average; an int mean of nothing has no "
                     "value (a float one is NaN): cast 'x' to a float dtype first",
                     cn_tensor_str(x, buf, sizeof buf));
        return NULL;
    }
    cn_tensor *sum = whole ? cn_sum(x) : cn_sum_dim(x, dim, keepdim);
    cn_tensor *n = sum ? cn_full(NULL, 0, (double)count, x->dtype, x->device) : NULL;
    cn_tensor *out = n ? cn_div(sum, n) : NULL;
    cn_release(sum);
    cn_release(n);
    return out;
}

cn_tensor *cn_mean(cn_tensor *x) {
    if (x && cn__dtype_kind(x->dtype) == CN_KIND_INT) return int_mean(x, 1, 0, 0);
    return reduce_all(CN_OP_MEAN, x, 0);
}
cn_tensor *cn_mean_dim(cn_tensor *x, int dim, int keepdim) {
    if (x && cn__dtype_kind(x->dtype) == CN_KIND_INT) return int_mean(x, 0, dim, keepdim);
    return reduce_dim(CN_OP_MEAN, x, dim, keepdim, 0);
}
cn_tensor *cn_max(cn_tensor *x) { return reduce_all(CN_OP_MAX, x, 0); }
cn_tensor *cn_max_dim(cn_tensor *x, int dim, int keepdim) {
    return reduce_dim(CN_OP_MAX, x, dim, keepdim, 0);
}
cn_tensor *cn_min(cn_tensor *x) { return reduce_all(CN_OP_MIN, x, 0); }
cn_tensor *cn_min_dim(cn_tensor *x, int dim, int keepdim) {
    return reduce_dim(CN_OP_MIN, x, dim, keepdim, 0);
}
cn_tensor *cn_prod(cn_tensor *x) { return reduce_all(CN_OP_PROD, x, 0); }
cn_tensor *cn_prod_dim(cn_tensor *x, int dim, int keepdim) {
    return reduce_dim(CN_OP_PROD, x, dim, keepdim, 0);
}
cn_tensor *cn_argmax(cn_tensor *x) { return reduce_all(CN_OP_ARGMAX, x, 0); }
cn_tensor *cn_argmax_dim(cn_tensor *x, int dim, int keepdim) {
    return reduce_dim(CN_OP_ARGMAX, x, dim, keepdim, 0);
}
cn_tensor *cn_argmin(cn_tensor *x) { return reduce_all(CN_OP_ARGMIN, x, 0); }
cn_tensor *cn_argmin_dim(cn_tensor *x, int dim, int keepdim) {
    return reduce_dim(CN_OP_ARGMIN, x, dim, keepdim, 0);
}
cn_tensor *cn_logsumexp(cn_tensor *x) { return reduce_all(CN_OP_LOGSUMEXP, x, 0); }
cn_tensor *cn_logsumexp_dim(cn_tensor *x, int dim, int keepdim) {
    return reduce_dim(CN_OP_LOGSUMEXP, x, dim, keepdim, 0);
}

static int bad_correction(int64_t correction) {
    if (correction >= 0) return 0;
    cn_set_error(CN_ERR_INVALID_ARG, "var", "correction = %lld; use 0 (population) or 1 (sample)",
                 (long long)correction);
    return 1;
}

cn_tensor *cn_var(cn_tensor *x, int64_t correction) {
    if (x && bad_correction(correction)) return NULL;
    return reduce_all(CN_OP_VAR, x, correction);
}
cn_tensor *cn_var_dim(cn_tensor *x, int dim, int64_t correction, int keepdim) {
    if (x && bad_correction(correction)) return NULL;
    return reduce_dim(CN_OP_VAR, x, dim, keepdim, correction);
}

static cn_tensor *softmax_like(cn_op op, cn_tensor *x, int dim) {
    const char *name = cn_op_name(op);
    cn_device dev;
    const char *names[1] = {"x"};
    const cn_backend *b = cn__route(name, &x, names, 1, &dev);
    if (!b || cn__check_kind(name, "x", x, CN_KINDS_FLOAT) != CN_OK) return NULL;
    int d = cn__norm_dim(name, "dim", dim, x->ndim);
    if (d < 0) return NULL;
    cn_view in;
    cn__tensor_as_view(x, &in);
    if (x->ndim == 0) {
        in.ndim = 1;
        in.shape[0] = 1;
        in.strides[0] = 1;
    }
    cn_tensor *out = cn__tensor_alloc(name, in.shape, in.ndim, x->dtype, dev);
    if (!out) return NULL;
    int64_t ints[1] = {d};
    if (cn__launch(b, dev, op, &in, 1, &out, 1, ints, 1, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    if (x->ndim == 0) cn__drop_dim(out, 0);
    return cn__record(op, out, &x, 1, ints, 1, NULL, 0);
}

cn_tensor *cn_softmax(cn_tensor *x, int dim) { return softmax_like(CN_OP_SOFTMAX, x, dim); }
cn_tensor *cn_log_softmax(cn_tensor *x, int dim) { return softmax_like(CN_OP_LOG_SOFTMAX, x, dim); }
