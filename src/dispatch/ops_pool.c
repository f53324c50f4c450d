/* Front-ends of issue 16's padding and pooling: pad (constant, reflect, replicate, circular), the
 * adaptive average pools (1-D to 3-D) and avg_pool1d, and the router entries of their backward
 * kernels. Each checks its arguments, computes the output's shape (sizes overflow-checked) and
 * runs its kernel through the router. */
#include <string.h>

#include "cinder/memory.h"
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* Routes x, allocates [shape] in dtype on its device, runs op on x's view with the attributes
 * and records it. NULL with the error set on failure (nothing leaked). */
static cn_tensor *run_one(cn_op op, cn_tensor *x, const int64_t *shape, int ndim,
                          const int64_t *ints, int n_ints, const double *reals, int n_reals) {
    const char *name = cn_op_name(op);
    cn_device dev;
    const cn_backend *b = cn__route(name, &x, (const char *const[]){"x"}, 1, &dev);
    if (!b) return NULL;
    cn_tensor *out = cn__tensor_alloc(name, shape, ndim, x->dtype, dev);
    if (!out) return NULL;
    cn_view v;
    cn__tensor_as_view(x, &v);
    if (cn__launch(b, dev, op, &v, 1, &out, 1, ints, n_ints, reals, n_reals) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(op, out, &x, 1, ints, n_ints, reals, n_reals);
}

/* ---- pad ----------------------------------------------------------------------------------- */

/* The kernel takes the pairs of at most 3 dims (a graph node keeps at most 8 ints: the mode, the
 * trailing dims skipped and 6 entries); cn_pad runs longer tuples as several pads of 3 dims. */
#define PAD_DIMS_PER_RUN 3

static const char *const PAD_MODES[] = {"constant", "reflect", "replicate", "circular"};

/* Checks the (left, right) entries of dim d (size `size`) under mode; writes its padded size. */
static cn_status check_pad_dim(const char *op, const cn_tensor *x, int d, int64_t left,
                               int64_t right, cn_pad_mode mode, int64_t *padded) {
    int64_t size = x->shape[d];
    char a[128];
    int64_t lr;
    if (__builtin_add_overflow(left, right, &lr) || __builtin_add_overflow(size, lr, padded))
        return cn_set_error(CN_ERR_OVERFLOW, op,
                            "padding (%lld, %lld) of dim %d makes a size "
                            "beyond int64; check the pad tuple for a mistake",
                            (long long)left, (long long)right, d);
    if ((mode == CN_PAD_REFLECT || mode == CN_PAD_REPLICATE) && (left < 0 || right < 0))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "padding (%lld, %lld) of dim %d is negative; "
                            "%s mode only grows a dim (crop with cn_slice first, or pad in "
                            "constant mode)",
                            (long long)left, (long long)right, d, PAD_MODES[mode]);
    if (mode == CN_PAD_REFLECT && (left >= size || right >= size))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "reflect padding (%lld, %lld) of dim %d of "
                            "'x' %s: each side must be smaller than the dim's size (%lld), as in "
                            "PyTorch; pad less, or use replicate or constant mode",
                            (long long)left, (long long)right, d, cn_tensor_str(x, a, sizeof a),
                            (long long)size);
    if (mode == CN_PAD_REPLICATE && size == 0 && (left > 0 || right > 0))
        return cn_set_error(CN_ERR_SHAPE, op,
                            "dim %d of 'x' %s is empty: replicate padding "
                            "has no edge to repeat; use constant mode",
                            d, cn_tensor_str(x, a, sizeof a));
    if (*padded < 0)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "padding (%lld, %lld) crops dim %d of 'x' %s to "
                            "size %lld; crop at most the whole dim",
                            (long long)left, (long long)right, d, cn_tensor_str(x, a, sizeof a),
                            (long long)*padded);
    /* circular wraps what the crops leave (as PyTorch): each side at most that much */
    int64_t kept = size - (left < 0 ? -left : 0) - (right < 0 ? -right : 0);
    if (mode == CN_PAD_CIRCULAR && (left > kept || right > kept))
        return cn_set_error(CN_ERR_INVALID_ARG, op,
                            "circular padding (%lld, %lld) of dim %d of "
                            "'x' %s wraps around more than once: each side must be at most the "
                            "dim's size after the crops (%lld), as in PyTorch; pad in several "
                            "steps",
                            (long long)left, (long long)right, d, cn_tensor_str(x, a, sizeof a),
                            (long long)kept);
    return CN_OK;
}

cn_tensor *cn_pad(cn_tensor *x, const int64_t *pad, int n, cn_pad_mode mode, double value) {
    const char *op = "pad";
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    if ((unsigned)mode > CN_PAD_CIRCULAR) {
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "mode %d is not a cn_pad_mode; use CN_PAD_CONSTANT, "
                     "CN_PAD_REFLECT, CN_PAD_REPLICATE or CN_PAD_CIRCULAR",
                     (int)mode);
        return NULL;
    }
    if (n < 0 || n % 2 != 0 || n / 2 > x->ndim) {
        char a[128];
        cn_set_error(CN_ERR_INVALID_ARG, op,
                     "n = %d pad entries for 'x' %s: give (left, right) "
                     "pairs, last dim first, for at most its %d dims",
                     n, cn_tensor_str(x, a, sizeof a), x->ndim);
        return NULL;
    }
    if (n > 0 && !pad) {
        cn__null_arg(op, "pad");
        return NULL;
    }
    if (mode == CN_PAD_CONSTANT && cn__check_int_scalar(op, "value", value, x->dtype) != CN_OK)
        return NULL;
    /* every entry is checked before anything runs */
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    for (int j = 0; j < n / 2; j++) {
        int d = x->ndim - 1 - j;
        if (check_pad_dim(op, x, d, pad[2 * j], pad[2 * j + 1], mode, &shape[d]) != CN_OK)
            return NULL;
    }
    if (n == 0) return cn_clone(x);
    double reals[1] = {mode == CN_PAD_CONSTANT ? value : 0.0};
    cn_tensor *cur = x;
    for (int first = 0; first < n / 2; first += PAD_DIMS_PER_RUN) {
        int dims = n / 2 - first < PAD_DIMS_PER_RUN ? n / 2 - first : PAD_DIMS_PER_RUN;
        int64_t ints[2 + 2 * PAD_DIMS_PER_RUN] = {mode, first};
        int64_t run_shape[CN_MAX_DIMS];
        memcpy(run_shape, cur->shape, sizeof(int64_t) * (size_t)cur->ndim);
        for (int j = 0; j < dims; j++) {
            int d = x->ndim - 1 - (first + j);
            ints[2 + 2 * j] = pad[2 * (first + j)];
            ints[3 + 2 * j] = pad[2 * (first + j) + 1];
            run_shape[d] = shape[d];
        }
        cn_tensor *next = run_one(CN_OP_PAD, cur, run_shape, x->ndim, ints, 2 + 2 * dims, reals, 1);
        if (cur != x) cn_release(cur);
        if (!next) return NULL;
        cur = next;
    }
    return cur;
}

/* g: pad's output gradient; out_size: x's size along dim. */
cn_tensor *cn__pad_backward(cn_tensor *g, int dim, int64_t left, int64_t right, int mode,
                            int64_t out_size) {
    const char *op = "pad_backward";
    if (!g) {
        cn__null_arg(op, "g");
        return NULL;
    }
    if (dim < 0 || dim >= g->ndim || out_size < 0 || g->shape[dim] != out_size + left + right) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "g's dim %d does not match a padding (%lld, %lld) of size "
                     "%lld",
                     dim, (long long)left, (long long)right, (long long)out_size);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, g->shape, sizeof(int64_t) * (size_t)g->ndim);
    shape[dim] = out_size;
    int64_t ints[4] = {mode, dim, left, right};
    return run_one(CN_OP_PAD_BACKWARD, g, shape, g->ndim, ints, 4, NULL, 0);
}

/* ---- adaptive average pooling --------------------------------------------------------------- */

static cn_tensor *adaptive_avg_pool(const char *op, cn_tensor *x, int k, const int64_t *out) {
    if (!x) {
        cn__null_arg(op, "x");
        return NULL;
    }
    char a[128];
    if (cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK) return NULL;
    if (x->ndim < k + 1) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "'x' is %s; it needs a leading (channel) dim and %d "
                     "pooled dims (add one with cn_unsqueeze(x, 0))",
                     cn_tensor_str(x, a, sizeof a), k);
        return NULL;
    }
    int64_t shape[CN_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    for (int i = 0; i < k; i++) {
        int d = x->ndim - k + i;
        if (out[i] < 1) {
            cn_set_error(CN_ERR_INVALID_ARG, op,
                         "output size %lld for dim %d: each output size "
                         "must be >= 1",
                         (long long)out[i], d);
            return NULL;
        }
        if (x->shape[d] < 1) {
            cn_set_error(CN_ERR_SHAPE, op,
                         "dim %d of 'x' %s is empty; there is nothing to "
                         "average",
                         d, cn_tensor_str(x, a, sizeof a));
            return NULL;
        }
        /* the windows' bounds compute (i + 1) * in: keep it within int64 */
        int64_t prod;
        if (__builtin_mul_overflow(out[i], x->shape[d], &prod)) {
            cn_set_error(CN_ERR_OVERFLOW, op,
                         "output size %lld times input size %lld of dim %d "
                         "passes int64; use a smaller output size",
                         (long long)out[i], (long long)x->shape[d], d);
            return NULL;
        }
        shape[d] = out[i];
    }
    int64_t ints[1] = {k};
    return run_one(CN_OP_ADAPTIVE_AVG_POOL, x, shape, x->ndim, ints, 1, NULL, 0);
}

cn_tensor *cn_adaptive_avg_pool1d(cn_tensor *x, int64_t out_l) {
    return adaptive_avg_pool("adaptive_avg_pool1d", x, 1, (const int64_t[]){out_l});
}
cn_tensor *cn_adaptive_avg_pool2d(cn_tensor *x, int64_t out_h, int64_t out_w) {
    return adaptive_avg_pool("adaptive_avg_pool2d", x, 2, (const int64_t[]){out_h, out_w});
}
cn_tensor *cn_adaptive_avg_pool3d(cn_tensor *x, int64_t out_d, int64_t out_h, int64_t out_w) {
    return adaptive_avg_pool("adaptive_avg_pool3d", x, 3, (const int64_t[]){out_d, out_h, out_w});
}

cn_tensor *cn__adaptive_avg_pool_backward(cn_tensor *g, const int64_t *x_shape, int ndim, int k) {
    const char *op = "adaptive_avg_pool_backward";
    if (!g) {
        cn__null_arg(op, "g");
        return NULL;
    }
    if (ndim != g->ndim || k < 1 || k > ndim ||
        memcmp(g->shape, x_shape, sizeof(int64_t) * (size_t)(ndim - k)) != 0) {
        cn_set_error(CN_ERR_SHAPE, op, "g does not match the pooled input's leading dims");
        return NULL;
    }
    int64_t ints[1] = {k};
    return run_one(CN_OP_ADAPTIVE_AVG_POOL_BACKWARD, g, x_shape, ndim, ints, 1, NULL, 0);
}

/* ---- avg_pool1d ----------------------------------------------------------------------------- */

/* The 1-D pools run the 2-D ones on [N, C, 1, L]: x must be [N, C, L]. 1 if it is, else 0 with
 * the error set. */
static int pool1d_input(const char *op, const cn_tensor *x) {
    if (!x) {
        cn__null_arg(op, "x");
        return 0;
    }
    if (x->ndim != 3) {
        char a[128];
        cn_set_error(CN_ERR_SHAPE, op,
                     "'x' is %s; it must be 3-D [N, C, L] (add a batch dim "
                     "with cn_unsqueeze(x, 0))",
                     cn_tensor_str(x, a, sizeof a));
        return 0;
    }
    return 1;
}

cn_tensor *cn_avg_pool1d(cn_tensor *x, int64_t kernel, int64_t stride, int64_t padding) {
    const char *op = "avg_pool1d";
    if (!pool1d_input(op, x)) return NULL;
    const cn_pool2d_params p = {{1, kernel}, {1, stride}, {0, padding}};
    cn_tensor *x4 = cn_unsqueeze(x, 2);
    if (!x4) return NULL;
    cn_tensor *y4 = cn_avg_pool2d(x4, &p);
    cn_release(x4);
    if (!y4) return NULL;
    cn_tensor *y = cn_squeeze(y4, 2);
    cn_release(y4);
    return y;
}

/* ---- max pooling with indices ---------------------------------------------------------------- */

/* PyTorch's pooling_output_shape: (in + 2 pad - dil (k - 1) - 1 [+ stride - 1 in ceil mode]) /
 * stride + 1, rounded down; in ceil mode one less when the last window would start past the input
 * and its left padding. -1: no window fits; -2: past int64. k, stride, dil >= 1; pad >= 0. */
static int64_t max_pool_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil,
                                 int ceil_mode) {
    int64_t span, num;
    if (__builtin_mul_overflow(dil, k - 1, &span) || __builtin_mul_overflow(pad, 2, &num) ||
        __builtin_add_overflow(num, in, &num) || __builtin_sub_overflow(num, span, &num) ||
        __builtin_sub_overflow(num, 1, &num) ||
        (ceil_mode && __builtin_add_overflow(num, stride - 1, &num)))
        return -2;
    if (num < 0) return -1;
    int64_t q = num / stride;
    if (q == INT64_MAX) return -2; /* stride 1: no room for the + 1 */
    int64_t out = q + 1;
    if (ceil_mode && (out - 1) * stride >= in + pad) out--;
    return out;
}

cn_tensor *cn_max_pool2d_ex(cn_tensor *x, const cn_max_pool2d_params *p, cn_tensor **indices) {
    const cn_op kind = CN_OP_MAX_POOL2D_WITH_INDICES;
    const char *op = cn_op_name(kind);
    if (indices) *indices = NULL;
    if (!x || !p) {
        cn__null_arg(op, !x ? "x" : "p");
        return NULL;
    }
    char a[128];
    if (cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK) return NULL;
    if (cn__check_4d(op, "x", x, "[N, C, H, W]") != CN_OK) return NULL;
    int64_t ints[8], o[2];
    for (int i = 0; i < 2; i++) {
        int64_t k = p->kernel[i], s = p->stride[i] ? p->stride[i] : k;
        int64_t pad = p->padding[i], dil = p->dilation[i] ? p->dilation[i] : 1;
        if (k < 1 || s < 1 || dil < 1 || pad < 0) {
            cn_set_error(CN_ERR_INVALID_ARG, op,
                         "kernel[%d] = %lld, stride[%d] = %lld, "
                         "padding[%d] = %lld, dilation[%d] = %lld: the kernel must be >= 1, "
                         "stride and dilation >= 1 (0: the default), padding >= 0",
                         i, (long long)k, i, (long long)p->stride[i], i, (long long)pad, i,
                         (long long)p->dilation[i]);
            return NULL;
        }
        /* PyTorch's rule: padding at most half the kernel (not the dilated window) */
        if (pad > k / 2) {
            cn_set_error(CN_ERR_INVALID_ARG, op,
                         "padding[%d] = %lld is more than half the "
                         "kernel (%lld); pad less",
                         i, (long long)pad, (long long)k);
            return NULL;
        }
        o[i] = max_pool_out_size(x->shape[2 + i], k, s, pad, dil, p->ceil_mode);
        if (o[i] == -2) {
            cn_set_error(CN_ERR_OVERFLOW, op,
                         "the kernel, dilation or padding makes sizes "
                         "beyond int64; check them for a mistake");
            return NULL;
        }
        if (o[i] < 1) {
            cn_set_error(CN_ERR_SHAPE, op,
                         "the dilated window of dim %d is larger than the "
                         "padded input 'x' %s; use a smaller kernel or dilation, or more "
                         "padding",
                         2 + i, cn_tensor_str(x, a, sizeof a));
            return NULL;
        }
        ints[i] = k, ints[2 + i] = s, ints[4 + i] = pad, ints[6 + i] = dil;
    }
    cn_device dev;
    const cn_backend *b = cn__route(op, &x, (const char *const[]){"x"}, 1, &dev);
    if (!b) return NULL;
    int64_t shape[4] = {x->shape[0], x->shape[1], o[0], o[1]};
    cn_tensor *out[2] = {cn__tensor_alloc(op, shape, 4, x->dtype, dev), NULL};
    if (out[0]) out[1] = cn__tensor_alloc(op, shape, 4, CN_I64, dev);
    cn_view v;
    cn__tensor_as_view(x, &v);
    if (!out[1] || cn__launch(b, dev, kind, &v, 1, out, 2, ints, 8, NULL, 0) != CN_OK) {
        cn_release(out[0]);
        cn_release(out[1]);
        return NULL;
    }
    cn_tensor *values = cn__record(kind, out[0], &x, 1, ints, 8, NULL, 0);
    if (values && indices)
        *indices = out[1];
    else
        cn_release(out[1]);
    return values;
}

cn_tensor *cn_max_pool1d(cn_tensor *x, int64_t kernel, int64_t stride, int64_t padding,
                         int64_t dilation, int ceil_mode, cn_tensor **indices) {
    const char *op = "max_pool1d";
    if (indices) *indices = NULL;
    if (!pool1d_input(op, x)) return NULL;
    const cn_max_pool2d_params p = {
        {1, kernel}, {1, stride}, {0, padding}, {1, dilation}, ceil_mode};
    cn_tensor *x4 = cn_unsqueeze(x, 2), *idx4 = NULL;
    if (!x4) return NULL;
    cn_tensor *y4 = cn_max_pool2d_ex(x4, &p, indices ? &idx4 : NULL);
    cn_release(x4);
    if (!y4) return NULL;
    cn_tensor *y = cn_squeeze(y4, 2);
    cn_release(y4);
    if (y && indices) {
        *indices = cn_squeeze(idx4, 2);
        if (!*indices) {
            cn_release(y);
            y = NULL;
        }
    }
    cn_release(idx4);
    return y;
}

/* ---- unfold4d / fold4d (im2col / col2im) ----------------------------------------------------- */

/* Checks p and the sizes (h, w) it slides over; writes the kernel's ints (kernel h, w, dilation
 * h, w, padding h, w, stride h, w) and the block counts oh, ow. */
static cn_status fold_geometry(const char *op, const cn_fold_params *p, int64_t h, int64_t w,
                               int64_t *ints, int64_t *oh, int64_t *ow) {
    const int64_t size[2] = {h, w};
    int64_t o[2];
    for (int i = 0; i < 2; i++) {
        int64_t k = p->kernel[i], dil = p->dilation[i] ? p->dilation[i] : 1;
        int64_t pad = p->padding[i], s = p->stride[i] ? p->stride[i] : 1;
        if (k < 1 || dil < 1 || pad < 0 || s < 1)
            return cn_set_error(CN_ERR_INVALID_ARG, op,
                                "kernel[%d] = %lld, dilation[%d] = %lld, "
                                "padding[%d] = %lld, stride[%d] = %lld: the kernel must be >= 1, "
                                "the others >= 0 (0 dilation or stride: 1)",
                                i, (long long)k, i, (long long)p->dilation[i], i, (long long)pad, i,
                                (long long)p->stride[i]);
        o[i] = cn__conv_out_size(size[i], k, s, pad, dil);
        if (o[i] == -2)
            return cn_set_error(CN_ERR_OVERFLOW, op,
                                "the kernel, dilation or padding makes sizes "
                                "beyond int64; check them for a mistake");
        if (o[i] < 1)
            return cn_set_error(CN_ERR_SHAPE, op,
                                "the dilated block (%lld along dim %d) is larger "
                                "than the padded input (%lld + 2 x %lld); use a smaller kernel or "
                                "more padding",
                                (long long)((k - 1) * dil + 1), 2 + i, (long long)size[i],
                                (long long)pad);
        ints[i] = k, ints[2 + i] = dil, ints[4 + i] = pad, ints[6 + i] = s;
    }
    *oh = o[0], *ow = o[1];
    return CN_OK;
}

cn_tensor *cn_unfold4d(cn_tensor *x, const cn_fold_params *p) {
    const char *op = "unfold4d";
    if (!x || !p) {
        cn__null_arg(op, !x ? "x" : "p");
        return NULL;
    }
    if (cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK) return NULL;
    if (cn__check_4d(op, "x", x, "[N, C, H, W]") != CN_OK) return NULL;
    int64_t ints[8], oh, ow, kk, rows, cols;
    if (fold_geometry(op, p, x->shape[2], x->shape[3], ints, &oh, &ow) != CN_OK) return NULL;
    if (__builtin_mul_overflow(ints[0], ints[1], &kk) ||
        __builtin_mul_overflow(x->shape[1], kk, &rows) || __builtin_mul_overflow(oh, ow, &cols)) {
        cn_set_error(CN_ERR_OVERFLOW, op, "the columns' sizes pass int64; use a smaller kernel");
        return NULL;
    }
    int64_t shape[3] = {x->shape[0], rows, cols};
    return run_one(CN_OP_UNFOLD4D, x, shape, 3, ints, 8, NULL, 0);
}

cn_tensor *cn_fold4d(cn_tensor *cols, int64_t out_h, int64_t out_w, const cn_fold_params *p) {
    const char *op = "fold4d";
    if (!cols || !p) {
        cn__null_arg(op, !cols ? "cols" : "p");
        return NULL;
    }
    char a[128];
    if (cn__check_kind(op, "cols", cols, CN_KINDS_FLOAT) != CN_OK) return NULL;
    if (out_h < 1 || out_w < 1) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "output size (%lld, %lld): both must be >= 1",
                     (long long)out_h, (long long)out_w);
        return NULL;
    }
    int64_t ints[8], oh, ow, kk, blocks;
    if (fold_geometry(op, p, out_h, out_w, ints, &oh, &ow) != CN_OK) return NULL;
    if (__builtin_mul_overflow(ints[0], ints[1], &kk) || __builtin_mul_overflow(oh, ow, &blocks)) {
        cn_set_error(CN_ERR_OVERFLOW, op, "the columns' sizes pass int64; use a smaller kernel");
        return NULL;
    }
    if (cols->ndim != 3 || cols->shape[1] % kk != 0 || cols->shape[2] != blocks) {
        cn_set_error(CN_ERR_SHAPE, op,
                     "'cols' is %s; it must be [N, C x %lld, %lld]: C times "
                     "the kernel's %lld x %lld entries, and the %lld x %lld blocks of a %lld x "
                     "%lld output",
                     cn_tensor_str(cols, a, sizeof a), (long long)kk, (long long)blocks,
                     (long long)ints[0], (long long)ints[1], (long long)oh, (long long)ow,
                     (long long)out_h, (long long)out_w);
        return NULL;
    }
    int64_t shape[4] = {cols->shape[0], cols->shape[1] / kk, out_h, out_w};
    return run_one(CN_OP_FOLD4D, cols, shape, 4, ints, 8, NULL, 0);
}
