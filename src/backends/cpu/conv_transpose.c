/* CPU transposed convolution (conv_transpose2d, and conv_transpose1d through it), and conv1d
 * through conv2d's kernel.
 *
 * conv_transpose2d is conv2d's adjoint: when the convolution of its output's size gives back x's
 * size (output_padding below the stride, the usual case), conv2d's input-gradient kernel (GEMM +
 * col2im, conv_backward.c) computes it, plus the bias. Otherwise (an output_padding of at least
 * the stride, which PyTorch allows below the dilation) the gather below does:
 *
 * conv_transpose2d, x: [N, C, H, W] (any strides), w: [C, O/g, KH, KW] (any strides), b: [O] or
 * absent -> out: [N, O, OH, OW] contiguous, in gather form: each output entry sums, over its
 * group's input channels and the taps (kh, kw) whose input row i = (r + ph - kh*dh) / sh and
 * column j = (q + pw - kw*dw) / sw divide exactly and lie inside x, x[n, c, i, j] w[c, o', kh, kw]
 * (f64 accumulation, then rounded once to the output's dtype). The geometry (backend.h) is the
 * transposed convolution's own: output_padding is already in oh, ow, and the output rows it adds
 * past the last tap's reach come out as the bias, as PyTorch's do. One task per output plane
 * (n, o), split over the pool. */
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

typedef struct ct_job {
    const cn_conv_geometry *g;
    const cn_view *xv, *wv, *bv;
    void *out;
    cn_dtype dt;
} ct_job;

/* Element k of v (f32 or f64) at element offset off, as a double. */
static double load(const cn_view *v, int64_t off) {
    return v->dtype == CN_F32 ? (double)((const float *)v->data)[off]
                              : ((const double *)v->data)[off];
}

/* The input index t / s when t = pos + pad - k*dil divides by s and lands in [0, n); else -1. */
static int64_t tap_source(int64_t pos, int64_t pad, int64_t k, int64_t dil, int64_t s,
                          int64_t n) {
    int64_t t = pos + pad - k * dil;
    if (t < 0 || t % s) return -1;
    t /= s;
    return t < n ? t : -1;
}

static void ct_tasks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const ct_job *j = ctx;
    const cn_conv_geometry *g = j->g;
    const cn_view *xv = j->xv, *wv = j->wv;
    int64_t Cg = g->c / g->groups, Og = g->o / g->groups, P = g->oh * g->ow;
    for (int64_t t = begin; t < end; t++) {
        int64_t n = t / g->o, o = t % g->o, grp = o / Og, ol = o % Og;
        double bias = j->bv ? load(j->bv, o * j->bv->strides[0]) : 0.0;
        for (int64_t r = 0; r < g->oh; r++) {
            for (int64_t q = 0; q < g->ow; q++) {
                double acc = bias;
                for (int64_t kh = 0; kh < g->kh; kh++) {
                    int64_t i = tap_source(r, g->ph, kh, g->dh, g->sh, g->h);
                    if (i < 0) continue;
                    for (int64_t kw = 0; kw < g->kw; kw++) {
                        int64_t jj = tap_source(q, g->pw, kw, g->dw, g->sw, g->w);
                        if (jj < 0) continue;
                        int64_t xo = n * xv->strides[0] + i * xv->strides[2] +
                                     jj * xv->strides[3];
                        int64_t wo = ol * wv->strides[1] + kh * wv->strides[2] +
                                     kw * wv->strides[3];
                        for (int64_t c = grp * Cg; c < (grp + 1) * Cg; c++)
                            acc += load(xv, xo + c * xv->strides[1]) *
                                   load(wv, wo + c * wv->strides[0]);
                    }
                }
                int64_t oo = t * P + r * g->ow + q;
                if (j->dt == CN_F32)
                    ((float *)j->out)[oo] = (float)acc;
                else
                    ((double *)j->out)[oo] = acc;
            }
        }
    }
}

cn_status cpu_conv_transpose2d(const cn_kernel_args *args) {
    const cn_conv_geometry *g = cn__kernel_geometry("cpu", args);
    if (!g) return CN_ERR_INVALID_ARG;
    if (args->op == CN_OP_CONV_TRANSPOSE1D && args->in[0].ndim == 3) {
        cn_kernel_args b;
        cn_view in[4], out[4];
        cn__args_unit_height(args, &b, in, out);
        return cpu_conv_transpose2d(&b);
    }
    cn_dtype dt = args->out[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", args->op, dt);
    int64_t tasks = g->n * g->o;
    if (tasks == 0 || g->oh * g->ow == 0) return CN_OK;
    /* The adjoint's geometry: the convolution of the output-shaped side (c = o, h = oh) with w
     * [C, O/groups, ..] back to x's size. When that convolution makes exactly x's size (an
     * output_padding below the stride), conv2d's input-gradient kernel (GEMM + col2im) computes
     * the transposed convolution; the bias is added after. */
    cn_conv_geometry adj = {.n = g->n, .c = g->o, .h = g->oh, .w = g->ow, .o = g->c, .oh = g->h,
                            .ow = g->w, .kh = g->kh, .kw = g->kw, .sh = g->sh, .sw = g->sw,
                            .ph = g->ph, .pw = g->pw, .dh = g->dh, .dw = g->dw,
                            .groups = g->groups};
    if ((g->oh + 2 * g->ph - g->dh * (g->kh - 1) - 1) / g->sh + 1 == g->h &&
        (g->ow + 2 * g->pw - g->dw * (g->kw - 1) - 1) / g->sw + 1 == g->w) {
        cn_kernel_args a = *args;
        a.n_in = 2;
        a.conv = &adj;
        cn_status s = cpu_conv2d_backward_input(&a);
        if (s != CN_OK || args->n_in < 3) return s;
        const cn_view *bv = &args->in[2];
        int64_t P = g->oh * g->ow;
        for (int64_t t = 0; t < tasks; t++) {
            double b = load(bv, (t % g->o) * bv->strides[0]);
            if (dt == CN_F32)
                for (int64_t i = 0; i < P; i++) ((float *)args->out[0].data)[t * P + i] += (float)b;
            else
                for (int64_t i = 0; i < P; i++) ((double *)args->out[0].data)[t * P + i] += b;
        }
        return CN_OK;
    }
    ct_job j = {.g = g, .xv = &args->in[0], .wv = &args->in[1],
                .bv = args->n_in > 2 ? &args->in[2] : NULL, .out = args->out[0].data, .dt = dt};
    double work = (double)(g->oh * g->ow) * (double)(g->c / g->groups) * (double)g->kh *
                  (double)g->kw / ((double)g->sh * (double)g->sw);
    cpu_parallel(tasks, cpu_chunks(tasks, work > 4096 ? 1 : (int64_t)(4096 / (work + 1)) + 1),
                 ct_tasks, &j);
    return CN_OK;
}

cn_status cpu_conv1d(const cn_kernel_args *args) {
    cn_kernel_args b;
    cn_view in[4], out[4];
    cn__args_unit_height(args, &b, in, out);
    return cpu_conv2d(&b);
}
