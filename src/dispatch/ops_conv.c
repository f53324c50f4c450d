/* Front-ends of conv2d and pooling: parameter defaults, shape checks, output size, and the
 * geometry (cn_conv_geometry) the kernels read: computed and checked here once, for the forward
 * ops and the four backward kernels, so no kernel derives or re-checks it. */
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* Output size along one spatial dim; -1 when the (dilated) window does not fit, -2 when the
 * padded input or the window's span passes int64 (in, k >= 0; stride >= 1; pad, dil >= 0, as
 * the callers check). */
static int64_t out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
    int64_t span, padded, room;
    if (__builtin_mul_overflow(dil, k - 1, &span) || __builtin_add_overflow(span, 1, &span) ||
        __builtin_mul_overflow(pad, 2, &padded) || __builtin_add_overflow(padded, in, &padded))
        return -2;
    if (padded < span) return -1;
    /* an empty kernel (k = 0) makes span 1 - dil: the difference can pass int64 */
    if (__builtin_sub_overflow(padded, span, &room)) return -2;
    room /= stride; /* stride 1 with room = INT64_MAX leaves no room for the + 1 */
    return room == INT64_MAX ? -2 : room + 1;
}

/* The error for an out_size of -2. */
static void too_large(const char *op, const char *what) {
    cn_set_error(CN_ERR_OVERFLOW, op, "%s makes sizes beyond int64 (the padded input or the "
                 "dilated window); check them for a mistake", what);
}

cn_status cn__check_4d(const char *op, const char *arg, const cn_tensor *t, const char *want) {
    if (t->ndim == 4) return CN_OK;
    char a[128];
    return cn_set_error(CN_ERR_SHAPE, op, "'%s' is %s; it must be 4-D %s (add a batch dim with "
                        "cn_unsqueeze(%s, 0))", arg, cn_tensor_str(t, a, sizeof a), want, arg);
}

/* conv2d, conv2d_relu or conv2d_max_pool2d (kind; pool: the last's window k): one front-end,
 * the same checks and geometry. */
static cn_tensor *conv2d(cn_op kind, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                         const cn_conv2d_params *p, int64_t pool) {
    const char *op = cn_op_name(kind);
    cn_tensor *in[3] = {x, w, b};
    const char *names[3] = {"x", "w", "b"};
    int n = b ? 3 : 2;
    cn_device dev;
    const cn_backend *be = cn__route_floats(op, in, names, n, 0, &dev);
    if (!be) return NULL;
    if (cn__check_4d(op, "x", x, "[N, C, H, W]") != CN_OK ||
        cn__check_4d(op, "w", w, "[O, C/groups, KH, KW]") != CN_OK)
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
    if (kind == CN_OP_CONV2D_MAX_POOL2D && (pool < 2 || pool > 15)) {
        cn_set_error(CN_ERR_INVALID_ARG, op, "the pool's window k = %lld must be in 2..15; pool "
                     "with cn_max_pool2d instead", (long long)pool);
        return NULL;
    }
    if (kind != CN_OP_CONV2D &&
        (!cn__has_kernel(kind, x) ||
         (kind == CN_OP_CONV2D_MAX_POOL2D && (oh < pool || ow < pool)))) {
        /* a backend without the fused kernel, or a window larger than the convolution's output
         * (max_pool2d's error then): the two ops, the arguments being checked */
        cn_tensor *y = cn_conv2d(x, w, b, p), *out = NULL;
        const cn_pool2d_params pp = {{pool, pool}, {pool, pool}, {0, 0}};
        if (y) out = kind == CN_OP_CONV2D_RELU ? cn_relu(y) : cn_max_pool2d(y, &pp);
        cn_release(y);
        return out;
    }
    int pooled = kind == CN_OP_CONV2D_MAX_POOL2D;
    int64_t shape[4] = {N, O, pooled ? oh / pool : oh, pooled ? ow / pool : ow};
    cn_tensor *outs[2] = {cn__tensor_alloc(op, shape, 4, x->dtype, dev), NULL};
    if (!outs[0]) return NULL;
    /* the pool's choices, for the backward: only when the output will be tracked (an input
     * tracked on an autodiff device; a no-grad region then merely drops them) */
    int tracked = dev.autodiff && (x->autograd || w->autograd || (b && b->autograd));
    if (pooled && tracked) {
        cn_device concrete = dev;
        concrete.autodiff = 0;
        concrete.checkpoint = 0;
        outs[1] = cn__tensor_alloc(op, shape, 4, CN_U8, concrete);
        if (!outs[1]) {
            cn_release(outs[0]);
            return NULL;
        }
    }
    cn_view views[3];
    for (int i = 0; i < n; i++) cn__tensor_as_view(in[i], &views[i]);
    int64_t ints[8] = {d.stride[0],   d.stride[1],   d.padding[0], d.padding[1],
                       d.dilation[0], d.dilation[1], d.groups,     pool};
    int n_ints = pooled ? 8 : 7;
    cn_conv_geometry g = {.n = N, .c = C, .h = x->shape[2], .w = x->shape[3], .o = O, .oh = oh,
                          .ow = ow, .kh = w->shape[2], .kw = w->shape[3], .sh = d.stride[0],
                          .sw = d.stride[1], .ph = d.padding[0], .pw = d.padding[1],
                          .dh = d.dilation[0], .dw = d.dilation[1], .groups = d.groups};
    if (cn__launch_geom(be, dev, kind, views, n, outs, outs[1] ? 2 : 1, ints, n_ints, &g) !=
        CN_OK) {
        cn_release(outs[0]);
        cn_release(outs[1]);
        return NULL;
    }
    if (!pooled) return cn__record(kind, outs[0], in, n, ints, n_ints, NULL, 0);
    /* the node's inputs: (x, w, idx[, b]), idx saved in place of the convolution's output */
    cn_tensor *rec[4] = {x, w, outs[1], b};
    cn_tensor *out = outs[1] ? cn__record(kind, outs[0], rec, n + 1, ints, n_ints, NULL, 0)
                             : outs[0];
    cn_release(outs[1]);
    return out;
}

cn_tensor *cn_conv2d(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv2d_params *p) {
    return conv2d(CN_OP_CONV2D, x, w, b, p, 0);
}

cn_tensor *cn_conv2d_relu(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv2d_params *p) {
    return conv2d(CN_OP_CONV2D_RELU, x, w, b, p, 0);
}

cn_tensor *cn_conv2d_max_pool2d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                                 const cn_conv2d_params *p, int64_t k) {
    return conv2d(CN_OP_CONV2D_MAX_POOL2D, x, w, b, p, k);
}

int64_t cn__conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil) {
    return out_size(in, k, stride, pad, dil);
}

/* The geometry of pooling x [N, C, H, W] with ints (kernel h, w, stride h, w, padding h, w; as
 * checked by pool2d) to [N, C, oh, ow]: a window op with o = c, groups 1 and dilation 1. */
static void pool_geometry(const int64_t *x_shape, const int64_t *ints, int64_t oh, int64_t ow,
                          cn_conv_geometry *g) {
    *g = (cn_conv_geometry){.n = x_shape[0], .c = x_shape[1], .h = x_shape[2], .w = x_shape[3],
                            .o = x_shape[1], .oh = oh, .ow = ow, .kh = ints[0], .kw = ints[1],
                            .sh = ints[2], .sw = ints[3], .ph = ints[4], .pw = ints[5], .dh = 1,
                            .dw = 1, .groups = 1};
}

static cn_tensor *pool2d(cn_op kind, cn_tensor *x, const cn_pool2d_params *p) {
    const char *op = cn_op_name(kind);
    const char *names[1] = {"x"};
    cn_device dev;
    const cn_backend *be = cn__route(op, &x, names, 1, &dev);
    if (!be || cn__check_kind(op, "x", x, CN_KINDS_FLOAT) != CN_OK ||
        cn__check_4d(op, "x", x, "[N, C, H, W]") != CN_OK)
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
    cn_conv_geometry g;
    pool_geometry(x->shape, ints, o[0], o[1], &g);
    if (cn__launch_geom(be, dev, kind, &v, 1, &out, 1, ints, 6, &g) != CN_OK) {
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

/* ---- backward entries (for the autodiff layer) --------------------------------------------- *
 * The autodiff layer passes the forward's shapes and ints; the geometry is computed from them
 * here and checked against the gradient's shape, so the kernels get it as the forward did. */

/* The geometry of conv2d over x_shape and w_shape with the forward's normalised ints, checked
 * against the output gradient's shape g_shape; CN_ERR_SHAPE when they do not describe one
 * convolution. */
static cn_status conv_geometry(const char *op, const int64_t *x_shape, const int64_t *w_shape,
                               const int64_t *g_shape, const int64_t *ints, cn_conv_geometry *g) {
    *g = (cn_conv_geometry){.n = x_shape[0], .c = x_shape[1], .h = x_shape[2], .w = x_shape[3],
                            .o = w_shape[0], .oh = g_shape[2], .ow = g_shape[3],
                            .kh = w_shape[2], .kw = w_shape[3], .sh = ints[0], .sw = ints[1],
                            .ph = ints[2], .pw = ints[3], .dh = ints[4], .dw = ints[5],
                            .groups = ints[6]};
    if (g->sh < 1 || g->sw < 1 || g->dh < 1 || g->dw < 1 || g->groups < 1 || g->ph < 0 ||
        g->pw < 0)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "stride (%lld, %lld), padding (%lld, %lld), "
                            "dilation (%lld, %lld), groups %lld: pass the forward's normalised "
                            "values (stride, dilation, groups >= 1, padding >= 0)",
                            (long long)g->sh, (long long)g->sw, (long long)g->ph,
                            (long long)g->pw, (long long)g->dh, (long long)g->dw,
                            (long long)g->groups);
    int64_t cw;
    int ok = !__builtin_mul_overflow(w_shape[1], g->groups, &cw) &&
             cw == g->c && g->o % g->groups == 0 && g_shape[0] == g->n && g_shape[1] == g->o &&
             g->oh == out_size(g->h, g->kh, g->sh, g->ph, g->dh) &&
             g->ow == out_size(g->w, g->kw, g->sw, g->pw, g->dw);
    if (ok) return CN_OK;
    return cn_set_error(CN_ERR_SHAPE, op, "input [%lld, %lld, %lld, %lld], weight [%lld, %lld, "
                        "%lld, %lld] and gradient [%lld, %lld, %lld, %lld] with stride (%lld, "
                        "%lld), padding (%lld, %lld), dilation (%lld, %lld), groups %lld do not "
                        "describe one convolution", (long long)g->n, (long long)g->c,
                        (long long)g->h, (long long)g->w, (long long)g->o,
                        (long long)w_shape[1], (long long)g->kh, (long long)g->kw,
                        (long long)g_shape[0], (long long)g_shape[1], (long long)g->oh,
                        (long long)g->ow, (long long)g->sh, (long long)g->sw, (long long)g->ph,
                        (long long)g->pw, (long long)g->dh, (long long)g->dw,
                        (long long)g->groups);
}

/* The geometry of pooling x_shape with the forward's ints, checked against the output
 * gradient's shape g_shape (CN_ERR_SHAPE otherwise). */
static cn_status pool_geometry_checked(const char *op, const int64_t *x_shape,
                                       const int64_t *g_shape, const int64_t *ints,
                                       cn_conv_geometry *g) {
    pool_geometry(x_shape, ints, g_shape[2], g_shape[3], g);
    if (g->kh < 1 || g->kw < 1 || g->sh < 1 || g->sw < 1 || g->ph < 0 || g->pw < 0 ||
        g->ph > g->kh / 2 || g->pw > g->kw / 2)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "kernel (%lld, %lld), stride (%lld, %lld), "
                            "padding (%lld, %lld): pass the forward's normalised values (kernel, "
                            "stride >= 1, padding at most half the kernel)", (long long)g->kh,
                            (long long)g->kw, (long long)g->sh, (long long)g->sw,
                            (long long)g->ph, (long long)g->pw);
    int ok = g_shape[0] == g->n &&
             g_shape[1] == g->c && g->oh == out_size(g->h, g->kh, g->sh, g->ph, 1) &&
             g->ow == out_size(g->w, g->kw, g->sw, g->pw, 1);
    if (ok) return CN_OK;
    return cn_set_error(CN_ERR_SHAPE, op, "gradient [%lld, %lld, %lld, %lld] does not match "
                        "input [%lld, %lld, %lld, %lld] pooled with kernel (%lld, %lld), stride "
                        "(%lld, %lld), padding (%lld, %lld)", (long long)g_shape[0],
                        (long long)g_shape[1], (long long)g->oh, (long long)g->ow,
                        (long long)g->n, (long long)g->c, (long long)g->h, (long long)g->w,
                        (long long)g->kh, (long long)g->kw, (long long)g->sh, (long long)g->sw,
                        (long long)g->ph, (long long)g->pw);
}

/* Runs one backward kernel: inputs as they are (a the output gradient), output of `shape` in
 * a's dtype and device, with the geometry of the forward that `ints` describe. */
static cn_tensor *backward_kernel(cn_op kind, cn_tensor *a, cn_tensor *b, const int64_t *shape,
                                  const int64_t *ints, int n_ints) {
    const char *op = cn_op_name(kind);
    cn_tensor *in[2] = {a, b};
    const char *names[2] = {"g", "saved"};
    int n = b ? 2 : 1;
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, n, &dev);
    if (!be) return NULL;
    if (a->ndim != 4 || (b && b->ndim != 4)) {
        cn_set_error(CN_ERR_SHAPE, op, "the gradient and the saved tensor must be 4-D");
        return NULL;
    }
    if (kind == CN_OP_MAX_POOL2D_BACKWARD_INDEX) {
        /* b: the forward's choices, u8 and dense, of g's shape */
        if (b->dtype != CN_U8 || !cn_is_contiguous(b) ||
            memcmp(a->shape, b->shape, sizeof(int64_t) * 4) != 0) {
            cn_set_error(CN_ERR_SHAPE, op, "the choices must be conv2d_max_pool2d's: u8, dense, "
                         "of the gradient's shape");
            return NULL;
        }
    } else if (b && cn__check_same_dtype(op, "g", a, "saved", b) != CN_OK) {
        return NULL;
    }
    cn_conv_geometry g;
    cn_status s;
    switch (kind) {
    case CN_OP_CONV2D_BACKWARD_INPUT: /* b: the weight; shape: the input's */
        s = conv_geometry(op, shape, b->shape, a->shape, ints, &g);
        break;
    case CN_OP_CONV2D_BACKWARD_WEIGHT: /* b: the input; shape: the weight's */
        s = conv_geometry(op, b->shape, shape, a->shape, ints, &g);
        break;
    case CN_OP_MAX_POOL2D_BACKWARD_INDEX: /* b: the choices; shape: the pool's input */
        s = ints[0] == ints[1] && ints[0] == ints[2] && ints[0] == ints[3] && ints[0] >= 2 &&
                    ints[0] <= 15 && ints[4] == 0 && ints[5] == 0
                ? pool_geometry_checked(op, shape, a->shape, ints, &g)
                : cn_set_error(CN_ERR_INVALID_ARG, op, "the pool must be k x k at stride k, "
                               "unpadded, 2 <= k <= 15 (conv2d_max_pool2d's)");
        break;
    case CN_OP_MAX_POOL2D_BACKWARD: /* b: the input */
    case CN_OP_AVG_POOL2D_BACKWARD: s = pool_geometry_checked(op, shape, a->shape, ints, &g); break;
    default:
        cn_set_error(CN_ERR_NO_KERNEL, op, "not a backward kernel of a window op");
        return NULL;
    }
    if (s != CN_OK) return NULL;
    cn_tensor *out = cn__tensor_alloc(op, shape, 4, a->dtype, dev);
    if (!out) return NULL;
    cn_view views[2];
    for (int i = 0; i < n; i++) cn__tensor_as_view(in[i], &views[i]);
    if (cn__launch_geom(be, dev, kind, views, n, &out, 1, ints, n_ints, &g) != CN_OK) {
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
    return backward_kernel(CN_OP_MAX_POOL2D_BACKWARD, g, x, x ? x->shape : NULL, ints, 6);
}

cn_tensor *cn__max_pool2d_backward_index(cn_tensor *g, cn_tensor *idx, const int64_t *z_shape,
                                         int64_t k) {
    const int64_t ints[6] = {k, k, k, k, 0, 0};
    return backward_kernel(CN_OP_MAX_POOL2D_BACKWARD_INDEX, g, idx, z_shape, ints, 6);
}

cn_tensor *cn__avg_pool2d_backward(cn_tensor *g, const int64_t *x_shape, const int64_t *ints) {
    return backward_kernel(CN_OP_AVG_POOL2D_BACKWARD, g, NULL, x_shape, ints, 6);
}

cn_status cn__conv2d_max_pool2d_backward(cn_tensor *g, cn_tensor *idx, cn_tensor *x, cn_tensor *w,
                                         const int64_t *ints, const int *want, cn_tensor **grads) {
    const char *op = cn_op_name(CN_OP_CONV2D_MAX_POOL2D_BACKWARD);
    for (int i = 0; i < 3; i++) grads[i] = NULL;
    cn_tensor *in[4] = {g, idx, x, w};
    const char *names[4] = {"g", "idx", "x", "w"};
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, 4, &dev);
    if (!be) return cn_last_status();
    if (g->ndim != 4 || x->ndim != 4 || w->ndim != 4)
        return cn_set_error(CN_ERR_SHAPE, op, "g, x and w must be 4-D (the forward's)");
    if (cn__check_same_dtype(op, "g", g, "x", x) != CN_OK ||
        cn__check_same_dtype(op, "g", g, "w", w) != CN_OK)
        return cn_last_status();
    if (idx->dtype != CN_U8 || !cn_is_contiguous(idx) || idx->ndim != 4 ||
        memcmp(g->shape, idx->shape, sizeof(int64_t) * 4) != 0)
        return cn_set_error(CN_ERR_SHAPE, op, "the choices must be conv2d_max_pool2d's: u8, "
                            "dense, of the gradient's shape");
    if (!want[0] && !want[1] && !want[2])
        return cn_set_error(CN_ERR_INVALID_ARG, op, "no gradient asked for: want at least one "
                            "of gx, gw, gb");
    int64_t k = ints[7];
    if (k < 2 || k > 15)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "the pool's window k = %lld must be in "
                            "2..15 (conv2d_max_pool2d's)", (long long)k);
    /* the convolution's output z, checked as conv2d_backward_*'s gradient would be; g is its
     * pool (rows and columns past the last whole window dropped) */
    int64_t z_shape[4] = {x->shape[0], w->shape[0],
                          out_size(x->shape[2], w->shape[2], ints[0], ints[2], ints[4]),
                          out_size(x->shape[3], w->shape[3], ints[1], ints[3], ints[5])};
    if (z_shape[2] < 1 || z_shape[3] < 1)
        return cn_set_error(CN_ERR_SHAPE, op, "the kernel of w (dilated) does not fit the "
                            "padded x: pass the forward's x, w and ints");
    cn_conv_geometry geo;
    if (conv_geometry(op, x->shape, w->shape, z_shape, ints, &geo) != CN_OK)
        return cn_last_status();
    if (g->shape[0] != z_shape[0] || g->shape[1] != z_shape[1] || g->shape[2] != z_shape[2] / k ||
        g->shape[3] != z_shape[3] / k || g->shape[2] < 1 || g->shape[3] < 1)
        return cn_set_error(CN_ERR_SHAPE, op, "gradient [%lld, %lld, %lld, %lld] is not the %lld "
                            "x %lld pool of the convolution's output [%lld, %lld, %lld, %lld]",
                            (long long)g->shape[0], (long long)g->shape[1],
                            (long long)g->shape[2], (long long)g->shape[3], (long long)k,
                            (long long)k, (long long)z_shape[0], (long long)z_shape[1],
                            (long long)z_shape[2], (long long)z_shape[3]);
    const int64_t b_shape[2] = {z_shape[0], z_shape[1]};
    cn_tensor *outs[3];
    int n_out = 0;
    cn_status s = CN_OK;
    if (want[0] && s == CN_OK)
        s = (outs[n_out++] = cn__tensor_alloc(op, x->shape, 4, g->dtype, dev)) ? CN_OK
                                                                              : cn_last_status();
    if (want[1] && s == CN_OK)
        s = (outs[n_out++] = cn__tensor_alloc(op, w->shape, 4, g->dtype, dev)) ? CN_OK
                                                                              : cn_last_status();
    if (want[2] && s == CN_OK)
        s = (outs[n_out++] = cn__tensor_alloc(op, b_shape, 2, g->dtype, dev)) ? CN_OK
                                                                             : cn_last_status();
    if (s == CN_OK) {
        cn_view views[4];
        for (int i = 0; i < 4; i++) cn__tensor_as_view(in[i], &views[i]);
        int64_t all[11];
        memcpy(all, ints, sizeof(int64_t) * 8);
        for (int i = 0; i < 3; i++) all[8 + i] = want[i] != 0;
        s = cn__launch_geom(be, dev, CN_OP_CONV2D_MAX_POOL2D_BACKWARD, views, 4, outs, n_out,
                            all, 11, &geo);
    }
    for (int i = 0, o = 0; i < 3; i++) {
        if (!want[i]) continue;
        if (o < n_out && s == CN_OK)
            grads[i] = outs[o];
        else if (o < n_out)
            cn_release(outs[o]);
        o++;
    }
    return s;
}
