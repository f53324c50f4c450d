/* The 3-D convolutions' kernels (conv3d, conv_transpose3d, conv3d_backward_weight), shared by the
 * CPU and CUDA backends: their geometry, read from the call's views and ints (these ops have no
 * cn_conv_geometry, which is 2-D), and the value of one output element of each, computed by its
 * definition in f64 (float operands are widened). Everything is static inline and, under nvcc,
 * __host__ __device__, so both backends compile the very same arithmetic.
 *
 * The geometry is always that of the convolution x [N, C, in..] * w [O, C/groups, k..] ->
 * y [N, O, out..]: conv3d computes y; conv_transpose3d, whose input is y-shaped and whose weight
 * [O, C/groups, k..] is its own [C_in, C_out/groups, k..], computes the x-shaped adjoint (its
 * output_padding is in the x-shape it is given); conv3d_backward_weight computes w's gradient
 * from y's gradient and x. Each sums only over positions inside the tensors, so a y that is
 * shorter than the convolution would make (a transposed convolution's input) is exact too. */
#ifndef CINDER_CORE_CONV3D_COMMON_H
#define CINDER_CORE_CONV3D_COMMON_H

#include <stdint.h>

#include "cinder/backend.h"

#ifdef __CUDACC__
#define CN__HD static inline __host__ __device__
#else
#define CN__HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct cn__conv3d_geom {
    int64_t n, c, o, groups, cg, og;
    int64_t in[3], out[3], k[3], s[3], p[3], d[3];
    int64_t out_n, in_n, k_n; /* the products of out, in, k */
} cn__conv3d_geom;

/* The geometry of a call of conv3d (in = x, w, [b]; out = y), conv_transpose3d (in = y, w, [b];
 * out = x) or conv3d_backward_weight (in = gy, x; out = gw); ints: stride (3), padding (3),
 * [output_padding (3), conv_transpose3d only], dilation (3), groups. The router checked them. */
static inline void cn__conv3d_geom_of(const cn_kernel_args *a, cn__conv3d_geom *g) {
    const cn_view *x, *y, *w;
    if (a->op == CN_OP_CONV3D) {
        x = &a->in[0], w = &a->in[1], y = &a->out[0];
    } else if (a->op == CN_OP_CONV_TRANSPOSE3D) {
        y = &a->in[0], w = &a->in[1], x = &a->out[0];
    } else {
        y = &a->in[0], x = &a->in[1], w = &a->out[0];
    }
    const int64_t *k = a->ints;
    int at_d = a->op == CN_OP_CONV_TRANSPOSE3D ? 9 : 6;
    g->n = x->shape[0], g->c = x->shape[1], g->o = y->shape[1], g->groups = k[at_d + 3];
    g->cg = g->c / g->groups, g->og = g->o / g->groups;
    g->out_n = g->in_n = g->k_n = 1;
    for (int i = 0; i < 3; i++) {
        g->in[i] = x->shape[2 + i], g->out[i] = y->shape[2 + i], g->k[i] = w->shape[2 + i];
        g->s[i] = k[i], g->p[i] = k[3 + i], g->d[i] = k[at_d + i];
        g->out_n *= g->out[i], g->in_n *= g->in[i], g->k_n *= g->k[i];
    }
}

/* Element off (in elements) of a float view, as a double. */
CN__HD double cn__conv3d_load(const cn_view *v, int64_t off) {
    return v->dtype == CN_F32 ? (double)((const float *)v->data)[off]
                              : ((const double *)v->data)[off];
}

/* pos[3] of flat (row-major over sizes[3]) */
CN__HD void cn__conv3d_unflat(int64_t flat, const int64_t *sizes, int64_t *pos) {
    pos[2] = flat % sizes[2];
    flat /= sizes[2];
    pos[1] = flat % sizes[1];
    pos[0] = flat / sizes[1];
}

/* y[idx] (idx row-major over [N, O, out..]) = b[o] + sum over c, k of x[.., q*s - p + k*d] w. */
CN__HD double cn__conv3d_forward_at(const cn__conv3d_geom *g, const cn_view *x,
                                    const cn_view *w, const cn_view *b, int64_t idx) {
    int64_t q[3], kk[3], pos[3];
    cn__conv3d_unflat(idx % g->out_n, g->out, q);
    int64_t no = idx / g->out_n, n = no / g->o, o = no % g->o, grp = o / g->og;
    double acc = b ? cn__conv3d_load(b, o * b->strides[0]) : 0.0;
    for (int64_t t = 0; t < g->k_n; t++) {
        cn__conv3d_unflat(t, g->k, kk);
        int inside = 1;
        for (int i = 0; i < 3; i++) {
            pos[i] = q[i] * g->s[i] - g->p[i] + kk[i] * g->d[i];
            inside &= pos[i] >= 0 && pos[i] < g->in[i];
        }
        if (!inside) continue;
        int64_t xo = n * x->strides[0] + pos[0] * x->strides[2] + pos[1] * x->strides[3] +
                     pos[2] * x->strides[4];
        int64_t wo = o * w->strides[0] + kk[0] * w->strides[2] + kk[1] * w->strides[3] +
                     kk[2] * w->strides[4];
        for (int64_t cl = 0; cl < g->cg; cl++)
            acc += cn__conv3d_load(x, xo + (grp * g->cg + cl) * x->strides[1]) *
                   cn__conv3d_load(w, wo + cl * w->strides[1]);
    }
    return acc;
}

/* x-shaped out[idx] (row-major over [N, C, in..]) = b[c] + sum over o of its group and the taps
 * k with r = q*s - p + k*d for a q inside y, of y[.., q] w[o, c', k]. */
CN__HD double cn__conv3d_transposed_at(const cn__conv3d_geom *g, const cn_view *y,
                                       const cn_view *w, const cn_view *b, int64_t idx) {
    int64_t r[3], kk[3], q[3];
    cn__conv3d_unflat(idx % g->in_n, g->in, r);
    int64_t nc = idx / g->in_n, n = nc / g->c, c = nc % g->c, grp = c / g->cg, cl = c % g->cg;
    double acc = b ? cn__conv3d_load(b, c * b->strides[0]) : 0.0;
    for (int64_t t = 0; t < g->k_n; t++) {
        cn__conv3d_unflat(t, g->k, kk);
        int inside = 1;
        for (int i = 0; i < 3; i++) {
            int64_t u = r[i] + g->p[i] - kk[i] * g->d[i];
            inside &= u >= 0 && u % g->s[i] == 0 && u / g->s[i] < g->out[i];
            q[i] = u / g->s[i];
        }
        if (!inside) continue;
        int64_t yo = n * y->strides[0] + q[0] * y->strides[2] + q[1] * y->strides[3] +
                     q[2] * y->strides[4];
        int64_t wo = cl * w->strides[1] + kk[0] * w->strides[2] + kk[1] * w->strides[3] +
                     kk[2] * w->strides[4];
        for (int64_t o = grp * g->og; o < (grp + 1) * g->og; o++)
            acc += cn__conv3d_load(y, yo + o * y->strides[1]) *
                   cn__conv3d_load(w, wo + o * w->strides[0]);
    }
    return acc;
}

/* gw[idx] (row-major over [O, C/groups, k..]) = sum over n and q inside gy of
 * gy[n, o, q] x[n, c, q*s - p + k*d] (inside x). */
CN__HD double cn__conv3d_weight_grad_at(const cn__conv3d_geom *g, const cn_view *gy,
                                        const cn_view *x, int64_t idx) {
    int64_t kk[3], q[3], pos[3];
    cn__conv3d_unflat(idx % g->k_n, g->k, kk);
    int64_t ocl = idx / g->k_n, o = ocl / g->cg, c = (o / g->og) * g->cg + ocl % g->cg;
    double acc = 0.0;
    for (int64_t t = 0; t < g->out_n; t++) {
        cn__conv3d_unflat(t, g->out, q);
        int inside = 1;
        for (int i = 0; i < 3; i++) {
            pos[i] = q[i] * g->s[i] - g->p[i] + kk[i] * g->d[i];
            inside &= pos[i] >= 0 && pos[i] < g->in[i];
        }
        if (!inside) continue;
        int64_t go = o * gy->strides[1] + q[0] * gy->strides[2] + q[1] * gy->strides[3] +
                     q[2] * gy->strides[4];
        int64_t xo = c * x->strides[1] + pos[0] * x->strides[2] + pos[1] * x->strides[3] +
                     pos[2] * x->strides[4];
        for (int64_t n = 0; n < g->n; n++)
            acc += cn__conv3d_load(gy, go + n * gy->strides[0]) *
                   cn__conv3d_load(x, xo + n * x->strides[0]);
    }
    return acc;
}

/* Element idx of the op's output (dense, row-major), by the op. */
CN__HD double cn__conv3d_at(cn_op op, const cn__conv3d_geom *g, const cn_view *in0,
                            const cn_view *in1, const cn_view *b, int64_t idx) {
    if (op == CN_OP_CONV3D) return cn__conv3d_forward_at(g, in0, in1, b, idx);
    if (op == CN_OP_CONV_TRANSPOSE3D) return cn__conv3d_transposed_at(g, in0, in1, b, idx);
    return cn__conv3d_weight_grad_at(g, in0, in1, idx);
}

#ifdef __cplusplus
}
#endif

#endif
