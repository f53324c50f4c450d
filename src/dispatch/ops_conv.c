/* Front-ends of conv2d and pooling: parameter defaults, shape checks, output size. */
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* Output size along one spatial dim; -1 when the (dilated) window does not fit, -2 when the
 * padded input or the window's span passes int64 (in, k >= 0; stride >= 1; pad, dil >= 0, as
 * the callers check). */
static int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
    int64_t span, padded;
    if (__builtin_mul_overflow(dil, k - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
        __builtin_mul_overflow(pad, 2, &padded) || __builtin_add_overflow(padded, in, &padded))
        return -2;
    if (padded < span) return -1;
    return (padded - span) / stride + 1;
}

/* The error for an out_size of -2. */
static void too_large(const char *op, const char *what) {
    cn_set_error(CN_ERR_OVERFLOW, op, "%s makes sizes beyond int64 (the padded input or the "
                 "dilated window); check them for a mistake", what);
}

static cn_status check_4d(const char *op, const char *arg, const cn_tensor *t, const char *want) {
    if (t->ndim == 4) return CN_OK;
    char a[128];
    return cn_set_error(CN_ERR_SHAPE, op, "'%s' is %s; it must be 4-D %s (add a batch dim with "
                        "cn_unsqueeze(%s, 0))", arg, cn_tensor_str(t, a, sizeof a), want, arg);
}

cn_tensor *cn_conv2d(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv2d_params *p) {
    const char *op = "conv2d";
    cn_tensor *in[3] = {x, w, b};
    const char *names[3] = {"x", "w", "b"};
    int n = b ? 3 : 2;
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, n, &dev);
    if (!be) return NULL;
    for (int i = 0; i < n; i++)
        if (cn__check_kind(op, names[i], in[i], CN_KINDS_FLOAT) != CN_OK ||
            cn__check_same_dtype(op, "x", x, names[i], in[i]) != CN_OK)
            return NULL;
    if (check_4d(op, "x", x, "[N, C, H, W]") != CN_OK ||
        check_4d(op, "w", w, "[O, C/groups, KH, KW]") != CN_OK)
        return NULL;
    cn_conv2d_params d = {{1, 1}, {0, 0}, {1, 1}, 1};
    if (p) d = *p;
    for (int i = 0; i < 2; i++) {
        if (d.stride[i] == 0) d.stride[i] = 1;
        if (d.dilation[i] == 0) d.dilation[i] = 1;
    }
    if (d.groups == 0) d.groups = 1;
    if (d.stride[0] < 0 || d.stride[1] < 0 || d.padding[0] < 0 || d.padding[1] < 0 ||
        d.dilation[0] < 0 || d.dilation[1] < 0 || d.groups < 0) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "stride, padding, dilation and groups must be "
                     "non-negative (0 means the default)");
        return NULL;
    }
    char a[128], c[128];
    int64_t N = x->shape[0], C = x->shape[1], O = w->shape[0];
    int64_t cw;
    if (C % d.groups || O % d.groups || __builtin_mul_overflow(w->shape[1], d.groups, &cw) ||
        cw != C) {
        cn_set_error(CN_ERR_SHAPE, op, "'x' %s has %lld channels but 'w' %s expects %lld x "
                     "groups (%lld); w must be [O, C/groups, KH, KW] with O and C divisible by "
                     "groups", cn_tensor_str(x, a, sizeof a), (long long)C,
                     cn_tensor_str(w, c, sizeof c), (long long)w->shape[1], (long long)d.groups);
        return NULL;
    }
    if (b && (b->ndim != 1 || b->shape[0] != O)) {
        cn_set_error(CN_ERR_SHAPE, op, "'b' is %s; it must be [O] = [%lld]",
                     cn_tensor_str(b, a, sizeof a), (long long)O);
        return NULL;
    }
    int64_t oh = out_size(x->shape[2], w->shape[2], d.stride[0], d.padding[0], d.dilation[0]);
    int64_t ow = out_size(x->shape[3], w->shape[3], d.stride[1], d.padding[1], d.dilation[1]);
    if (oh == -2 || ow == -2) {
        too_large(op, "the padding or dilation");
        return NULL;
    }
    if (oh < 1 || ow < 1) {
        cn_set_error(CN_ERR_SHAPE, op, "the kernel of 'w' %s (dilated) is larger than the padded "
                     "input 'x' %s; pad the input or use a smaller kernel",
                     cn_tensor_str(w, c, sizeof c), cn_tensor_str(x, a, sizeof a));
        return NULL;
    }
    int64_t shape[4] = {N, O, oh, ow};
    cn_tensor *out = cn__tensor_alloc(op, shape, 4, x->dtype, dev);
    if (!out) return NULL;
    cn_view views[3];
    for (int i = 0; i < n; i++) cn__tensor_as_view(in[i], &views[i]);
    int64_t ints[7] = {d.stride[0],   d.stride[1],   d.padding[0], d.padding[1],
                       d.dilation[0], d.dilation[1], d.groups};
    if (cn__launch(be, dev, CN_OP_CONV2D, views, n, &out, 1, ints, 7, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(CN_OP_CONV2D, out, in, n, ints, 7, NULL, 0);
}

static cn_tensor *pool2d(cn_op kind, cn_tensor *x, const cn_pool2d_params *p) {
    const char *op = cn_op_name(kind);
    const char *names[1] = {"x"};
    cn_device dev;
    const cn_backend *be = cn__route(op, &x, names, 1, &dev);
    if (!be || cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK ||
        check_4d(op, "x", x, "[N, C, H, W]") != CN_OK)
        return NULL;
    if (!p) {
        cn__null_arg(op, "p");
        return NULL;
    }
    cn_pool2d_params d = *p;
    int64_t o[2];
    char a[128];
    for (int i = 0; i < 2; i++) {
        if (d.stride[i] == 0) d.stride[i] = d.kernel[i];
        if (d.kernel[i] < 1 || d.stride[i] < 1 || d.padding[i] < 0 ||
            d.padding[i] > d.kernel[i] / 2) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "kernel (%lld, %lld), stride (%lld, %lld), "
                         "padding (%lld, %lld): kernel and stride must be >= 1 and padding at "
                         "most half the kernel", (long long)d.kernel[0], (long long)d.kernel[1],
                         (long long)d.stride[0], (long long)d.stride[1], (long long)d.padding[0],
                         (long long)d.padding[1]);
            return NULL;
        }
        o[i] = out_size(x->shape[2 + i], d.kernel[i], d.stride[i], d.padding[i], 1);
        if (o[i] == -2) {
            too_large(op, "the kernel or padding");
            return NULL;
        }
        if (o[i] < 1) {
            cn_set_error(CN_ERR_SHAPE, op, "the window (%lld, %lld) is larger than the padded "
                         "input 'x' %s; use a smaller kernel or more padding",
                         (long long)d.kernel[0], (long long)d.kernel[1],
                         cn_tensor_str(x, a, sizeof a));
            return NULL;
        }
    }
    int64_t shape[4] = {x->shape[0], x->shape[1], o[0], o[1]};
    cn_tensor *out = cn__tensor_alloc(op, shape, 4, x->dtype, dev);
    if (!out) return NULL;
    cn_view v;
    cn__tensor_as_view(x, &v);
    int64_t ints[6] = {d.kernel[0], d.kernel[1], d.stride[0], d.stride[1], d.padding[0],
                       d.padding[1]};
    if (cn__launch(be, dev, kind, &v, 1, &out, 1, ints, 6, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(kind, out, &x, 1, ints, 6, NULL, 0);
}

cn_tensor *cn_max_pool2d(cn_tensor *x, const cn_pool2d_params *p) {
    return pool2d(CN_OP_MAX_POOL2D, x, p);
}
cn_tensor *cn_avg_pool2d(cn_tensor *x, const cn_pool2d_params *p) {
    return pool2d(CN_OP_AVG_POOL2D, x, p);
}

/* ---- backward entries (for the autodiff layer) --------------------------------------------- */

/* Runs one backward kernel: inputs as they are, output of `shape` in g's dtype and device. */
static cn_tensor *backward_kernel(cn_op kind, cn_tensor *a, cn_tensor *b, const int64_t *shape,
                                  const int64_t *ints, int n_ints) {
    const char *op = cn_op_name(kind);
    cn_tensor *in[2] = {a, b};
    const char *names[2] = {"g", "saved"};
    int n = b ? 2 : 1;
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, n, &dev);
    if (!be) return NULL;
    cn_tensor *out = cn__tensor_alloc(op, shape, 4, a->dtype, dev);
    if (!out) return NULL;
    cn_view views[2];
    for (int i = 0; i < n; i++) cn__tensor_as_view(in[i], &views[i]);
    if (cn__launch(be, dev, kind, views, n, &out, 1, ints, n_ints, NULL, 0) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return out;
}

cn_tensor *cn__conv2d_backward_input(cn_tensor *g, cn_tensor *w, const int64_t *x_shape,
                                     const int64_t *ints) {
    return backward_kernel(CN_OP_CONV2D_BACKWARD_INPUT, g, w, x_shape, ints, 7);
}

cn_tensor *cn__conv2d_backward_weight(cn_tensor *g, cn_tensor *x, const int64_t *w_shape,
                                      const int64_t *ints) {
    return backward_kernel(CN_OP_CONV2D_BACKWARD_WEIGHT, g, x, w_shape, ints, 7);
}

cn_tensor *cn__max_pool2d_backward(cn_tensor *g, cn_tensor *x, const int64_t *ints) {
    return backward_kernel(CN_OP_MAX_POOL2D_BACKWARD, g, x, x->shape, ints, 6);
}

cn_tensor *cn__avg_pool2d_backward(cn_tensor *g, const int64_t *x_shape, const int64_t *ints) {
    return backward_kernel(CN_OP_AVG_POOL2D_BACKWARD, g, NULL, x_shape, ints, 6);
}
