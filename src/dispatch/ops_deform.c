/* Front-end of deformable convolution (torchvision.ops.deform_conv2d, burn's deform_conv2d) and
 * the router entry of its backward kernel. One check for both: the ranks, dtypes, the
 * parameters, the channels and groups, the output size (cn_conv2d's), and the offset's, mask's
 * and bias's shapes against it; then the geometry (cn_conv_geometry, as conv2d's) the kernels
 * read, and the ints of backend.h's contract. */
#include <stdio.h>
#include <string.h>

#include "cinder/ops.h"
#include "core/error_internal.h"
#include "dispatch/backward_ops.h"
#include "dispatch/router.h"

/* The checked call: its inputs (x, offset, w[, mask][, b]) and the ints and geometry for the
 * kernels. */
typedef struct deform_call {
    cn_tensor *in[5];
    const char *names[5];
    int n_in, has_mask;
    int64_t ints[9];
    cn_conv_geometry geom;
} deform_call;

/* t is [a0, a1, a2, a3], else CN_ERR_SHAPE naming arg and what it must be (`why`). */
static cn_status check_shape4(const char *op, const char *arg, const cn_tensor *t,
                              const int64_t *want, const char *why) {
    if (t->ndim == 4 && memcmp(t->shape, want, sizeof(int64_t) * 4) == 0) return CN_OK;
    char a[128];
    return cn_set_error(CN_ERR_SHAPE, op, "'%s' is %s; it must be [%lld, %lld, %lld, %lld] (%s)",
                        arg, cn_tensor_str(t, a, sizeof a), (long long)want[0], (long long)want[1],
                        (long long)want[2], (long long)want[3], why);
}

/* Checks x, offset, w, mask (or NULL), b (or NULL) and the parameters ints (stride h, w,
 * padding h, w, dilation h, w, groups, offset_groups: 0 taken as 1 where the public call says)
 * and fills *c. */
static cn_status check_deform(const char *op, cn_tensor *x, cn_tensor *offset, cn_tensor *w,
                              cn_tensor *mask, cn_tensor *b, const int64_t *p, deform_call *c) {
    memset(c, 0, sizeof *c);
    c->in[0] = x, c->in[1] = offset, c->in[2] = w;
    c->names[0] = "x", c->names[1] = "offset", c->names[2] = "w";
    c->n_in = 3;
    if (mask) c->in[c->n_in] = mask, c->names[c->n_in++] = "mask";
    if (b) c->in[c->n_in] = b, c->names[c->n_in++] = "b";
    c->has_mask = mask != NULL;
    for (int i = 0; i < c->n_in; i++)
        if (cn__check_kind(op, c->names[i], c->in[i], CN_KINDS_FLOAT) != CN_OK ||
            cn__check_same_dtype(op, "x", x, c->names[i], c->in[i]) != CN_OK)
            return cn_last_status();
    if (cn__check_4d(op, "x", x, "[N, C, H, W]") != CN_OK ||
        cn__check_4d(op, "offset", offset, "[N, 2 * offset_groups * KH * KW, OH, OW]") != CN_OK ||
        cn__check_4d(op, "w", w, "[O, C/groups, KH, KW]") != CN_OK ||
        (mask && cn__check_4d(op, "mask", mask, "[N, offset_groups * KH * KW, OH, OW]") != CN_OK))
        return cn_last_status();
    int64_t s[2], pad[2], d[2], groups = p[6] ? p[6] : 1, og = p[7] ? p[7] : 1;
    for (int i = 0; i < 2; i++) {
        s[i] = p[i] ? p[i] : 1;
        pad[i] = p[2 + i];
        d[i] = p[4 + i] ? p[4 + i] : 1;
        if (s[i] < 0 || pad[i] < 0 || d[i] < 0 || groups < 0 || og < 0)
            return cn_set_error(CN_ERR_INVALID_ARG, op,
                                "stride (%lld, %lld), padding (%lld, %lld), dilation (%lld, "
                                "%lld), groups %lld and offset_groups %lld must be non-negative "
                                "(0 means 1 for stride, dilation and the groups)",
                                (long long)p[0], (long long)p[1], (long long)p[2], (long long)p[3],
                                (long long)p[4], (long long)p[5], (long long)p[6], (long long)p[7]);
    }
    char a[128], e[128];
    int64_t N = x->shape[0], C = x->shape[1], O = w->shape[0], KH = w->shape[2], KW = w->shape[3],
            cw;
    if (KH < 1 || KW < 1)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "'w' %s has an empty kernel; deformable "
                            "convolution needs KH, KW >= 1",
                            cn_tensor_str(w, a, sizeof a));
    if (C % groups || O % groups || __builtin_mul_overflow(w->shape[1], groups, &cw) || cw != C)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "'x' %s has %lld channels but 'w' %s expects %lld "
                            "x groups (%lld); w must be [O, C/groups, KH, KW] with O and C "
                            "divisible by groups",
                            cn_tensor_str(x, a, sizeof a), (long long)C,
                            cn_tensor_str(w, e, sizeof e), (long long)w->shape[1],
                            (long long)groups);
    if (C % og)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "'x' %s has %lld channels, not divisible by "
                            "offset_groups %lld; each offset group takes C / offset_groups "
                            "channels",
                            cn_tensor_str(x, a, sizeof a), (long long)C, (long long)og);
    if (b && (b->ndim != 1 || b->shape[0] != O))
        return cn_set_error(CN_ERR_SHAPE, op, "'b' is %s; it must be [O] = [%lld]",
                            cn_tensor_str(b, a, sizeof a), (long long)O);
    int64_t oh = cn__conv_out_size(x->shape[2], KH, s[0], pad[0], d[0]);
    int64_t ow = cn__conv_out_size(x->shape[3], KW, s[1], pad[1], d[1]);
    if (oh == -2 || ow == -2)
        return cn_set_error(CN_ERR_OVERFLOW, op,
                            "the padding or dilation makes sizes beyond "
                            "int64 (the padded input or the dilated window); check them for a "
                            "mistake");
    if (oh < 1 || ow < 1)
        return cn_set_error(CN_ERR_SHAPE, op,
                            "the kernel of 'w' %s (dilated) is larger than the "
                            "padded input 'x' %s; pad the input or use a smaller kernel",
                            cn_tensor_str(w, e, sizeof e), cn_tensor_str(x, a, sizeof a));
    int64_t taps, off_ch;
    if (__builtin_mul_overflow(og, KH, &taps) || __builtin_mul_overflow(taps, KW, &taps) ||
        __builtin_mul_overflow(taps, 2, &off_ch))
        return cn_set_error(CN_ERR_OVERFLOW, op,
                            "offset_groups %lld x KH x KW x 2 passes int64; "
                            "check offset_groups for a mistake",
                            (long long)og);
    const int64_t off_want[4] = {N, off_ch, oh, ow}, mask_want[4] = {N, taps, oh, ow};
    char why[160];
    snprintf(why, sizeof why,
             "a (dy, dx) pair per offset group (%lld) and tap (%lld x %lld) at "
             "each output position",
             (long long)og, (long long)KH, (long long)KW);
    if (check_shape4(op, "offset", offset, off_want, why) != CN_OK) return cn_last_status();
    snprintf(why, sizeof why,
             "a weight per offset group (%lld) and tap (%lld x %lld) at each "
             "output position",
             (long long)og, (long long)KH, (long long)KW);
    if (mask && check_shape4(op, "mask", mask, mask_want, why) != CN_OK) return cn_last_status();
    const int64_t ints[9] = {s[0], s[1], pad[0], pad[1], d[0], d[1], groups, og, c->has_mask};
    memcpy(c->ints, ints, sizeof ints);
    c->geom = (cn_conv_geometry){.n = N,
                                 .c = C,
                                 .h = x->shape[2],
                                 .w = x->shape[3],
                                 .o = O,
                                 .oh = oh,
                                 .ow = ow,
                                 .kh = KH,
                                 .kw = KW,
                                 .sh = s[0],
                                 .sw = s[1],
                                 .ph = pad[0],
                                 .pw = pad[1],
                                 .dh = d[0],
                                 .dw = d[1],
                                 .groups = groups};
    return CN_OK;
}

cn_tensor *cn_deform_conv2d(cn_tensor *x, cn_tensor *offset, cn_tensor *w, cn_tensor *mask,
                            cn_tensor *b, const cn_deform_conv2d_params *p) {
    const char *op = "deform_conv2d";
    if (!x || !offset || !w) {
        cn__null_arg(op, !x ? "x" : !offset ? "offset" : "w");
        return NULL;
    }
    cn_deform_conv2d_params d = {{1, 1}, {0, 0}, {1, 1}, 1, 1};
    if (p) d = *p;
    const int64_t params[8] = {d.stride[0],   d.stride[1],   d.padding[0], d.padding[1],
                               d.dilation[0], d.dilation[1], d.groups,     d.offset_groups};
    /* the device first (its errors come before the shapes'), over the inputs given */
    cn_tensor *given[5] = {x, offset, w, mask, b};
    const char *gnames[5] = {"x", "offset", "w", "mask", "b"};
    cn_tensor *route[5];
    const char *rnames[5];
    int nr = 0;
    for (int i = 0; i < 5; i++)
        if (given[i]) route[nr] = given[i], rnames[nr++] = gnames[i];
    cn_device dev;
    const cn_backend *be = cn__route(op, route, rnames, nr, &dev);
    deform_call c;
    if (!be || check_deform(op, x, offset, w, mask, b, params, &c) != CN_OK) return NULL;
    const int64_t shape[4] = {c.geom.n, c.geom.o, c.geom.oh, c.geom.ow};
    cn_tensor *out = cn__tensor_alloc(op, shape, 4, x->dtype, dev);
    if (!out) return NULL;
    cn_view v[5];
    for (int i = 0; i < c.n_in; i++)
        cn__tensor_as_view(c.in[i], &v[i]);
    if (cn__launch_geom(be, dev, CN_OP_DEFORM_CONV2D, v, c.n_in, &out, 1, c.ints, 9, &c.geom) !=
        CN_OK) {
        cn_release(out);
        return NULL;
    }
    return cn__record(CN_OP_DEFORM_CONV2D, out, c.in, c.n_in, c.ints, 9, NULL, 0);
}

cn_status cn__deform_conv2d_backward(cn_tensor *g, cn_tensor *x, cn_tensor *offset, cn_tensor *w,
                                     cn_tensor *mask, const int64_t *ints, cn_tensor **grads) {
    const char *op = "deform_conv2d_backward";
    for (int i = 0; i < 4; i++)
        grads[i] = NULL;
    if (!g || !x || !offset || !w) {
        cn__null_arg(op, !g ? "g" : !x ? "x" : !offset ? "offset" : "w");
        return cn_last_status();
    }
    cn_tensor *in[5] = {g, x, offset, w, mask};
    const char *names[5] = {"g", "x", "offset", "w", "mask"};
    int n_in = mask ? 5 : 4;
    cn_device dev;
    const cn_backend *be = cn__route(op, in, names, n_in, &dev);
    deform_call c;
    if (!be || check_deform(op, x, offset, w, mask, NULL, ints, &c) != CN_OK ||
        cn__check_same_dtype(op, "x", x, "g", g) != CN_OK)
        return cn_last_status();
    const int64_t gshape[4] = {c.geom.n, c.geom.o, c.geom.oh, c.geom.ow};
    if (check_shape4(op, "g", g, gshape, "deform_conv2d's output") != CN_OK)
        return cn_last_status();
    cn_tensor *outs[4] = {NULL, NULL, NULL, NULL};
    int n_out = mask ? 4 : 3;
    for (int i = 0; i < n_out; i++) {
        const cn_tensor *like = in[1 + i];
        if (!(outs[i] = cn__tensor_alloc(op, like->shape, 4, x->dtype, dev))) {
            for (int k = 0; k < i; k++)
                cn_release(outs[k]);
            return cn_last_status();
        }
    }
    cn_view v[5];
    for (int i = 0; i < n_in; i++)
        cn__tensor_as_view(in[i], &v[i]);
    if (cn__launch_geom(be, dev, CN_OP_DEFORM_CONV2D_BACKWARD, v, n_in, outs, n_out, c.ints, 9,
                        &c.geom) != CN_OK) {
        for (int k = 0; k < n_out; k++)
            cn_release(outs[k]);
        return cn_last_status();
    }
    for (int i = 0; i < n_out; i++)
        grads[i] = outs[i];
    return CN_OK;
}
