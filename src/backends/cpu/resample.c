/* CPU kernels of the resampling ops (issue 16): interpolate and its backward, on [N, C, L] or
 * [N, C, H, W], and grid_sample_2d and its backward, in f32 and f64.
 *
 * Each output entry is the weighted sum of its taps along H and W (core/resample_math.h, shared
 * with CUDA so both read the same entries), accumulated in double. The backward is written as a
 * gather: each entry of x's gradient sums the g entries whose taps include it (found by
 * bisection, cn_rs_range), weighted as the forward read it. So each entry is written once, in a
 * fixed order: no scratch, no atomics, and the same sums on any number of threads. Inputs may be
 * strided; the output is contiguous. Work is split over output entries on the backend's pool. */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/resample_math.h"

typedef struct rs_job {
    const cn_view *src; /* forward: x; backward: g */
    const cn_view *dst; /* forward: out; backward: x's gradient (contiguous) */
    cn_rs_axis ah, aw;  /* H (size 1 to 1 for [N, C, L]) and W (or L) */
    int64_t c, dh, dw;  /* dst's C, H, W (H = 1 for 1-D) */
    int backward;
} rs_job;

static inline double load(const cn_view *v, int64_t off) {
    return v->dtype == CN_F64 ? ((const double *)v->data)[off]
                              : (double)((const float *)v->data)[off];
}

static inline void store(const cn_view *v, int64_t off, double x) {
    if (v->dtype == CN_F64)
        ((double *)v->data)[off] = x;
    else
        ((float *)v->data)[off] = (float)x;
}

/* The element offset of [n, c, h, w] in v (h ignored for 1-D). */
static inline int64_t offset4(const cn_view *v, int64_t n, int64_t c, int64_t h, int64_t w) {
    if (v->ndim == 3) return n * v->strides[0] + c * v->strides[1] + w * v->strides[2];
    return n * v->strides[0] + c * v->strides[1] + h * v->strides[2] + w * v->strides[3];
}

static void rs_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const rs_job *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        int64_t w = p % j->dw, r = p / j->dw;
        int64_t h = r % j->dh;
        r /= j->dh;
        int64_t c = r % j->c, n = r / j->c;
        double acc = 0;
        if (!j->backward) {
            int64_t ih[CN_RS_MAX_TAPS], iw[CN_RS_MAX_TAPS];
            double wh[CN_RS_MAX_TAPS], ww[CN_RS_MAX_TAPS];
            int nh = cn_rs_taps(&j->ah, h, ih, wh), nw = cn_rs_taps(&j->aw, w, iw, ww);
            for (int a = 0; a < nh; a++) {
                double row = 0;
                for (int b = 0; b < nw; b++)
                    row += ww[b] * load(j->src, offset4(j->src, n, c, ih[a], iw[b]));
                acc += wh[a] * row;
            }
        } else {
            int64_t h0, h1, w0, w1;
            cn_rs_range(&j->ah, h, &h0, &h1);
            cn_rs_range(&j->aw, w, &w0, &w1);
            for (int64_t oh = h0; oh <= h1; oh++) {
                double wh = cn_rs_weight(&j->ah, oh, h), row = 0;
                if (wh == 0) continue;
                for (int64_t ow = w0; ow <= w1; ow++) {
                    double ww = cn_rs_weight(&j->aw, ow, w);
                    if (ww != 0) row += ww * load(j->src, offset4(j->src, n, c, oh, ow));
                }
                acc += wh * row;
            }
        }
        store(j->dst, p, acc);
    }
}

/* forward: in = (x), out = (y); backward: in = (g, y-shaped), out = (x's gradient). ints = mode,
 * align_corners; reals = the scale factors per spatial dim (0: none). The router checked the
 * shapes, sizes (>= 1 along the spatial dims) and the mode. */
cn_status cpu_interpolate(const cn_kernel_args *a) {
    const cn_view *src = &a->in[0], *dst = &a->out[0];
    const cn_view *x = a->op == CN_OP_INTERPOLATE ? src : dst;
    const cn_view *y = a->op == CN_OP_INTERPOLATE ? dst : src;
    int mode = (int)a->ints[0], align = (int)a->ints[1];
    rs_job j = {.src = src, .dst = dst, .backward = a->op == CN_OP_INTERPOLATE_BACKWARD};
    if (x->ndim == 3) {
        j.ah = (cn_rs_axis){1, 1, CN_RS_NEAREST, 0, 0, 0};
        j.aw = (cn_rs_axis){x->shape[2], y->shape[2], mode, align, a->reals[0], 0};
    } else {
        j.ah = (cn_rs_axis){x->shape[2], y->shape[2], mode, align, a->reals[0], 1};
        j.aw = (cn_rs_axis){x->shape[3], y->shape[3], mode, align, a->reals[1], 1};
    }
    j.c = dst->shape[1];
    j.dh = dst->ndim == 3 ? 1 : dst->shape[2];
    j.dw = dst->shape[dst->ndim - 1];
    int64_t n = dst->shape[0] * j.c * j.dh * j.dw;
    cpu_parallel(n, cpu_chunks(n * 16, CPU_PARALLEL_GRAIN), rs_chunk, &j);
    return CN_OK;
}

/* ---- grid_sample_2d ------------------------------------------------------------------------
 * Each output entry sums its grid point's taps (core/resample_math.h). The input's gradient
 * scatters g back along the same taps, one (n, c) plane per task, the grid points in order (so
 * the sums do not depend on the threads); the grid's sums over the channels g * x * the
 * weights' derivatives, times the coordinates' derivatives. */

typedef struct gs_job {
    const cn_view *x, *grid, *g, *out;
    int mode, padding, align;
    int64_t c, h, w, oh, ow;
} gs_job;

static inline void gs_point(const gs_job *j, int64_t n, int64_t y, int64_t x, cn_gs_taps *t) {
    const cn_view *gr = j->grid;
    int64_t off = n * gr->strides[0] + y * gr->strides[1] + x * gr->strides[2];
    cn_gs_taps_of(j->mode, j->padding, j->align, j->h, j->w, load(gr, off),
                  load(gr, off + gr->strides[3]), t);
}

static inline double gs_x(const gs_job *j, int64_t n, int64_t c, int64_t y, int64_t x) {
    return load(j->x, offset4(j->x, n, c, y, x));
}

/* out [N, C, OH, OW]: entry p. */
static void gs_forward_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const gs_job *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        int64_t x = p % j->ow, r = p / j->ow, y = r % j->oh;
        r /= j->oh;
        int64_t c = r % j->c, n = r / j->c;
        cn_gs_taps t;
        gs_point(j, n, y, x, &t);
        double acc = 0;
        for (int k = 0; k < t.n; k++)
            acc += t.w[k] * gs_x(j, n, c, t.y[k], t.x[k]);
        store(j->out, p, acc);
    }
}

/* x's gradient [N, C, H, W]: plane p = (n, c), zeroed, then every grid point's g added along
 * its taps. */
static void gs_input_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const gs_job *j = ctx;
    int64_t plane = j->h * j->w;
    for (int64_t p = begin; p < end; p++) {
        int64_t n = p / j->c, c = p % j->c;
        for (int64_t i = 0; i < plane; i++)
            store(j->out, p * plane + i, 0);
        for (int64_t y = 0; y < j->oh; y++)
            for (int64_t x = 0; x < j->ow; x++) {
                cn_gs_taps t;
                gs_point(j, n, y, x, &t);
                double gv = load(j->g, offset4(j->g, n, c, y, x));
                for (int k = 0; k < t.n; k++) {
                    int64_t o = p * plane + t.y[k] * j->w + t.x[k];
                    store(j->out, o, load(j->out, o) + t.w[k] * gv);
                }
            }
    }
}

/* the grid's gradient [N, OH, OW, 2]: grid point p. */
static void gs_grid_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const gs_job *j = ctx;
    for (int64_t p = begin; p < end; p++) {
        int64_t x = p % j->ow, r = p / j->ow, y = r % j->oh, n = r / j->oh;
        cn_gs_taps t;
        gs_point(j, n, y, x, &t);
        double sx = 0, sy = 0;
        if (j->mode == CN_GS_BILINEAR)
            for (int64_t c = 0; c < j->c; c++) {
                double gv = load(j->g, offset4(j->g, n, c, y, x));
                for (int k = 0; k < t.n; k++) {
                    double v = gv * gs_x(j, n, c, t.y[k], t.x[k]);
                    sx += v * t.wx[k];
                    sy += v * t.wy[k];
                }
            }
        store(j->out, 2 * p, sx * t.dx);
        store(j->out, 2 * p + 1, sy * t.dy);
    }
}

/* forward: in = (x [N, C, H, W], grid [N, OH, OW, 2]), out [N, C, OH, OW]; backward: in = (g,
 * x, grid), ints[3] = 0: out x's gradient, 1: the grid's. ints = mode, padding, align_corners.
 * The router checked the shapes and attributes. */
cn_status cpu_grid_sample_2d(const cn_kernel_args *a) {
    int fwd = a->op == CN_OP_GRID_SAMPLE_2D;
    gs_job j = {.x = &a->in[fwd ? 0 : 1],
                .grid = &a->in[fwd ? 1 : 2],
                .g = fwd ? NULL : &a->in[0],
                .out = &a->out[0],
                .mode = (int)a->ints[0],
                .padding = (int)a->ints[1],
                .align = (int)a->ints[2]};
    j.c = j.x->shape[1];
    j.h = j.x->shape[2];
    j.w = j.x->shape[3];
    j.oh = j.grid->shape[1];
    j.ow = j.grid->shape[2];
    int64_t n = j.x->shape[0];
    if (fwd) {
        int64_t total = n * j.c * j.oh * j.ow;
        cpu_parallel(total, cpu_chunks(total * 8, CPU_PARALLEL_GRAIN), gs_forward_chunk, &j);
    } else if (a->ints[3] == 0) {
        int64_t planes = n * j.c,
                chunks = cpu_chunks(planes * (j.oh * j.ow * 8 + j.h * j.w), CPU_PARALLEL_GRAIN);
        cpu_parallel(planes, chunks < planes ? chunks : planes, gs_input_chunk, &j);
    } else {
        int64_t total = n * j.oh * j.ow;
        cpu_parallel(total, cpu_chunks(total * j.c * 8, CPU_PARALLEL_GRAIN), gs_grid_chunk, &j);
    }
    return CN_OK;
}
