/* Front-ends of issue 16's convolutions: conv_transpose2d, conv1d, conv_transpose1d, conv3d and
 * conv_transpose3d (PyTorch's F.conv_transpose2d, F.conv1d, ...). One front-end for all: defaults,
 * argument and shape checks (each error naming the public call), the output size, and the
 * geometry the kernels read (backend.h: a transposed convolution's geometry is its own, with
 * output_padding in the output size; a 1-D one is the 2-D one with a height of 1). */
#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* What the public calls pass: nd spatial dims (1, 2 or 3), as the user gave them. */
typedef struct conv_spec {
    int nd, transposed;
    int64_t stride[3], padding[3], out_pad[3], dilation[3], groups;
} conv_spec;

/* The shapes' names in the messages, by nd - 1. */
static const char *const x_form[3] = {"[N, C, L]", "[N, C, H, W]", "[N, C, D, H, W]"};
static const char *const w_form[3] = {"[O, C/groups, K]", "[O, C/groups, KH, KW]",
                                      "[O, C/groups, KD, KH, KW]"};
static const char *const wt_form[3] = {"[C, O/groups, K]", "[C, O/groups, KH, KW]",
                                       "[C, O/groups, KD, KH, KW]"};

/* A transposed convolution's output size along one dim, (in - 1) s - 2 p + d (k - 1) + op + 1;
 * INT64_MIN when it passes int64 (all arguments checked non-negative, s and d >= 1). */
static int64_t transposed_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d,
                               int64_t op) {
    int64_t a, span, pp;
    if (__builtin_mul_overflow(in - 1, s, &a) || __builtin_mul_overflow(d, k - 1, &span) ||
        __builtin_mul_overflow(p, 2, &pp) || __builtin_add_overflow(a, span, &a) ||
        __builtin_sub_overflow(a, pp, &a) || __builtin_add_overflow(a, op + 1, &a))
        return INT64_MIN;
    return a;
}

static cn_tensor *conv_more(cn_op kind, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                            const conv_spec *sp) {
    const char *op = cn_op_name(kind);
    cn_tensor *in[3] = {x, w, b};
    const char *names[3] = {"x", "w", "b"};
    int n = b ? 3 : 2, nd = sp->nd, tr = sp->transposed;
    cn_device dev;
    const cn_backend *be = cn__route_floats(op, in, names, n, 0, &dev);
    if (!be) return NULL;
    char a[128], c[128];
    if (x->ndim != nd + 2) {
        cn_set_error(CN_ERR_SHAPE, op, "'x' is %s; it must be %d-D %s (add a batch dim with "
                     "cn_unsqueeze(x, 0))", cn_tensor_str(x, a, sizeof a), nd + 2,
                     x_form[nd - 1]);
        return NULL;
    }
    if (w->ndim != nd + 2) {
        cn_set_error(CN_ERR_SHAPE, op, "'w' is %s; it must be %d-D %s",
                     cn_tensor_str(w, a, sizeof a), nd + 2, (tr ? wt_form : w_form)[nd - 1]);
        return NULL;
    }
    /* defaults, then the values' ranges */
    int64_t s[3], p[3], opad[3], d[3], groups = sp->groups ? sp->groups : 1;
    for (int i = 0; i < nd; i++) {
        s[i] = sp->stride[i] ? sp->stride[i] : 1;
        d[i] = sp->dilation[i] ? sp->dilation[i] : 1;
        p[i] = sp->padding[i];
        opad[i] = tr ? sp->out_pad[i] : 0;
        if (s[i] < 0 || d[i] < 0 || p[i] < 0 || opad[i] < 0 || groups < 0) {
            if (tr)
                cn_set_error(CN_ERR_INVALID_ARG, op, "stride %lld, padding %lld, output_padding "
                             "%lld, dilation %lld, groups %lld: each must be non-negative (0 "
                             "means 1 for stride, dilation and groups)", (long long)s[i],
                             (long long)p[i], (long long)opad[i], (long long)d[i],
                             (long long)groups);
            else
                cn_set_error(CN_ERR_INVALID_ARG, op, "stride %lld, padding %lld, dilation %lld, "
                             "groups %lld: each must be non-negative (0 means 1 for stride, "
                             "dilation and groups)", (long long)s[i], (long long)p[i],
                             (long long)d[i], (long long)groups);
            return NULL;
        }
        if (opad[i] >= s[i] && opad[i] >= d[i]) {
            cn_set_error(CN_ERR_INVALID_ARG, op, "output_padding %lld must be smaller than the "
                         "stride (%lld) or the dilation (%lld); the extra output size it adds "
                         "can only be within one step", (long long)opad[i], (long long)s[i],
                         (long long)d[i]);
            return NULL;
        }
    }
    /* channels: conv: C = w[1] * groups, O = w[0]; transposed: C = w[0], O = w[1] * groups */
    int64_t N = x->shape[0], C = x->shape[1], O, cw;
    int bad;
    if (!tr) {
        O = w->shape[0];
        bad = C % groups || O % groups || __builtin_mul_overflow(w->shape[1], groups, &cw) ||
              cw != C;
    } else {
        bad = C % groups || w->shape[0] != C || __builtin_mul_overflow(w->shape[1], groups, &O);
    }
    if (bad) {
        if (!tr)
            cn_set_error(CN_ERR_SHAPE, op, "'x' %s has %lld channels but 'w' %s expects %lld x "
                         "groups (%lld); w must be [O, C/groups, ...] with O and C divisible by "
                         "groups", cn_tensor_str(x, a, sizeof a), (long long)C,
                         cn_tensor_str(w, c, sizeof c), (long long)w->shape[1], (long long)groups);
        else
            cn_set_error(CN_ERR_SHAPE, op, "'x' %s has %lld channels but 'w' %s has %lld in its "
                         "dim 0, groups %lld; w must be [C, O/groups, ...] with C divisible by "
                         "groups", cn_tensor_str(x, a, sizeof a), (long long)C,
                         cn_tensor_str(w, c, sizeof c), (long long)w->shape[0], (long long)groups);
        return NULL;
    }
    if (b && (b->ndim != 1 || b->shape[0] != O)) {
        cn_set_error(CN_ERR_SHAPE, op, "'b' is %s; it must be [O] = [%lld]",
                     cn_tensor_str(b, a, sizeof a), (long long)O);
        return NULL;
    }
    /* output sizes */
    int64_t osz[3];
    for (int i = 0; i < nd; i++) {
        int64_t len = x->shape[2 + i], k = w->shape[2 + i];
        if (tr) {
            if (len == 0) {
                cn_set_error(CN_ERR_SHAPE, op, "'x' %s has an empty spatial dim; a transposed "
                             "convolution needs at least one input position",
                             cn_tensor_str(x, a, sizeof a));
                return NULL;
            }
            osz[i] = transposed_size(len, k, s[i], p[i], d[i], opad[i]);
            if (osz[i] == INT64_MIN) {
                cn_set_error(CN_ERR_OVERFLOW, op, "the stride, dilation or kernel make an output "
                             "size beyond int64; check them for a mistake");
                return NULL;
            }
            if (osz[i] < 1) {
                cn_set_error(CN_ERR_SHAPE, op, "the padding %lld removes the whole output of 'x' "
                             "%s and 'w' %s (size %lld); use less padding",
                             (long long)p[i], cn_tensor_str(x, a, sizeof a),
                             cn_tensor_str(w, c, sizeof c), (long long)osz[i]);
                return NULL;
            }
        } else {
            osz[i] = cn__conv_out_size(len, k, s[i], p[i], d[i]);
            if (osz[i] == -2) {
                cn_set_error(CN_ERR_OVERFLOW, op, "the padding or dilation makes sizes beyond "
                             "int64 (the padded input or the dilated window); check them for a "
                             "mistake");
                return NULL;
            }
            if (osz[i] < 1) {
                cn_set_error(CN_ERR_SHAPE, op, "the kernel of 'w' %s (dilated) is larger than "
                             "the padded input 'x' %s; pad the input or use a smaller kernel",
                             cn_tensor_str(w, c, sizeof c), cn_tensor_str(x, a, sizeof a));
                return NULL;
            }
        }
    }
    int64_t shape[5] = {N, O, osz[0], osz[1], osz[2]};
    cn_tensor *out = cn__tensor_alloc(op, shape, nd + 2, x->dtype, dev);
    if (!out) return NULL;
    cn_view views[3];
    for (int i = 0; i < n; i++) cn__tensor_as_view(in[i], &views[i]);
    /* ints (backend.h); the geometry in 2-D, a 1-D one with a unit height */
    int64_t ints[13];
    int n_ints = 0;
    for (int i = 0; i < nd; i++) ints[n_ints++] = s[i];
    for (int i = 0; i < nd; i++) ints[n_ints++] = p[i];
    if (tr)
        for (int i = 0; i < nd; i++) ints[n_ints++] = opad[i];
    for (int i = 0; i < nd; i++) ints[n_ints++] = d[i];
    ints[n_ints++] = groups;
    if (nd == 3) { /* no cn_conv_geometry: the kernels read the views and ints */
        if (cn__launch(be, dev, kind, views, n, &out, 1, ints, n_ints, NULL, 0) != CN_OK) {
            cn_release(out);
            return NULL;
        }
        if (!tr) return cn__record(kind, out, in, n, ints, n_ints, NULL, 0);
        /* the node keeps conv3d's 10 ints: the formula finds the output_padding in the shapes */
        const int64_t c10[10] = {s[0], s[1], s[2], p[0], p[1], p[2], d[0], d[1], d[2], groups};
        return cn__record(kind, out, in, n, c10, 10, NULL, 0);
    }
    int l = nd - 1; /* the last spatial dim */
    cn_conv_geometry g = {.n = N, .c = C, .h = nd == 2 ? x->shape[2] : 1, .w = x->shape[2 + l],
                          .o = O, .oh = nd == 2 ? osz[0] : 1, .ow = osz[l],
                          .kh = nd == 2 ? w->shape[2] : 1, .kw = w->shape[2 + l],
                          .sh = nd == 2 ? s[0] : 1, .sw = s[l], .ph = nd == 2 ? p[0] : 0,
                          .pw = p[l], .dh = nd == 2 ? d[0] : 1, .dw = d[l], .groups = groups};
    if (cn__launch_geom(be, dev, kind, views, n, &out, 1, ints, n_ints, &g) != CN_OK) {
        cn_release(out);
        return NULL;
    }
    if (kind == CN_OP_CONV_TRANSPOSE2D) {
        /* the node keeps conv2d's 7 ints (a node holds at most CN_MAX_DIMS): the formula finds
         * the output_padding in the shapes */
        const int64_t c7[7] = {s[0], s[1], p[0], p[1], d[0], d[1], groups};
        return cn__record(kind, out, in, n, c7, 7, NULL, 0);
    }
    return cn__record(kind, out, in, n, ints, n_ints, NULL, 0);
}

cn_tensor *cn_conv_transpose2d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                               const cn_conv_transpose2d_params *p) {
    conv_spec sp = {.nd = 2, .transposed = 1};
    if (p)
        for (int i = 0; i < 2; i++) {
            sp.stride[i] = p->stride[i];
            sp.padding[i] = p->padding[i];
            sp.out_pad[i] = p->output_padding[i];
            sp.dilation[i] = p->dilation[i];
        }
    sp.groups = p ? p->groups : 1;
    return conv_more(CN_OP_CONV_TRANSPOSE2D, x, w, b, &sp);
}

cn_tensor *cn_conv1d(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv1d_params *p) {
    conv_spec sp = {.nd = 1};
    if (p) {
        sp.stride[0] = p->stride;
        sp.padding[0] = p->padding;
        sp.dilation[0] = p->dilation;
        sp.groups = p->groups;
    }
    return conv_more(CN_OP_CONV1D, x, w, b, &sp);
}

cn_tensor *cn_conv_transpose1d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                               const cn_conv_transpose1d_params *p) {
    conv_spec sp = {.nd = 1, .transposed = 1};
    if (p) {
        sp.stride[0] = p->stride;
        sp.padding[0] = p->padding;
        sp.out_pad[0] = p->output_padding;
        sp.dilation[0] = p->dilation;
        sp.groups = p->groups;
    }
    return conv_more(CN_OP_CONV_TRANSPOSE1D, x, w, b, &sp);
}

cn_tensor *cn_conv3d(cn_tensor *x, cn_tensor *w, cn_tensor *b, const cn_conv3d_params *p) {
    conv_spec sp = {.nd = 3};
    if (p) {
        for (int i = 0; i < 3; i++) {
            sp.stride[i] = p->stride[i];
            sp.padding[i] = p->padding[i];
            sp.dilation[i] = p->dilation[i];
        }
        sp.groups = p->groups;
    }
    return conv_more(CN_OP_CONV3D, x, w, b, &sp);
}

cn_tensor *cn_conv_transpose3d(cn_tensor *x, cn_tensor *w, cn_tensor *b,
                               const cn_conv_transpose3d_params *p) {
    conv_spec sp = {.nd = 3, .transposed = 1};
    if (p) {
        for (int i = 0; i < 3; i++) {
            sp.stride[i] = p->stride[i];
            sp.padding[i] = p->padding[i];
            sp.out_pad[i] = p->output_padding[i];
            sp.dilation[i] = p->dilation[i];
        }
        sp.groups = p->groups;
    }
    return conv_more(CN_OP_CONV_TRANSPOSE3D, x, w, b, &sp);
}

/* ---- conv3d's weight gradient (for the autodiff layer) ------------------------------------- */

cn_tensor *cn__conv3d_backward_weight(cn_tensor *g, cn_tensor *x, const int64_t *w_shape,
                                      const int64_t *ints) {
    const char *op = cn_op_name(CN_OP_CONV3D_BACKWARD_WEIGHT);
    cn_tensor *in[2] = {g, x};
    const char *names[2] = {"g", "x"};
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, 2, &dev);
    if (!be || cn__check_same_dtype(op, "g", g, "x", x) != CN_OK) return NULL;
    int ok = g->ndim == 5 && x->ndim == 5 && g->shape[0] == x->shape[0] && ints[9] >= 1 &&
             w_shape[0] == g->shape[1] && w_shape[0] % ints[9] == 0 &&
             x->shape[1] == w_shape[1] * ints[9];
    for (int i = 0; i < 3; i++)
        ok = ok && ints[i] >= 1 && ints[3 + i] >= 0 && ints[6 + i] >= 1 && w_shape[2 + i] >= 0;
    if (!ok) {
        cn_set_error(CN_ERR_SHAPE, op, "the gradient, the input and the weight's shape with "
                     "these ints do not describe one 3-D convolution; pass conv3d's");
        return NULL;
    }
    cn_tensor *out = cn__tensor_alloc(op, w_shape, 5, g->dtype, dev);
    if (!out) return NULL;
    cn_view views[2];
    for (int i = 0; i < 2; i++) cn__tensor_as_view(in[i], &views[i]);
    if (cn__launch(be, dev, CN_OP_CONV3D_BACKWARD_WEIGHT, views, 2, &out, 1, ints, 10, NULL, 0) !=
        CN_OK) {
        cn_release(out);
        return NULL;
    }
    return out;
}
