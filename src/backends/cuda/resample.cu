/* CUDA kernels of the resampling ops (issue 16): interpolate and its backward, on [N, C, L] or
 * [N, C, H, W] in f32 and f64. One thread per output entry, computing what the CPU does
 * (cpu/resample.c) from the same taps (core/resample_math.h): the forward sums its taps, the
 * backward gathers, for each entry of x's gradient, the g entries that read it (no atomics: the
 * sums are deterministic). Accumulation in double; f16 and bf16 are rounded once, at the store. */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"
#include "core/resample_math.h"

typedef struct rs_geom {
    cu_nd src;          /* forward: x; backward: g; as [N, C, H, W] (H of size 1 for 1-D) */
    cn_rs_axis ah, aw;
    int64_t c, dh, dw;  /* the output's C, H, W (contiguous) */
    int64_t n;          /* output entries */
    int dt, es;         /* any float dtype (f16 and bf16 rounded once, from the sum) */
    int backward;
} rs_geom;

__device__ __forceinline__ double rs_load(const rs_geom &g, const char *src, int64_t n,
                                          int64_t c, int64_t h, int64_t w) {
    int64_t off = n * g.src.stride[0] + c * g.src.stride[1] + h * g.src.stride[2] +
                  w * g.src.stride[3];
    return cu_load_f(src + off * g.es, g.dt);
}

__global__ void interpolate_kernel(const __grid_constant__ rs_geom g, char *out,
                                   const char *src) {
    CU_GRID_LOOP(p, g.n) {
        int64_t w = p % g.dw, r = p / g.dw;
        int64_t h = r % g.dh;
        r /= g.dh;
        int64_t c = r % g.c, n = r / g.c;
        double acc = 0;
        if (!g.backward) {
            int64_t ih[CN_RS_MAX_TAPS], iw[CN_RS_MAX_TAPS];
            double wh[CN_RS_MAX_TAPS], ww[CN_RS_MAX_TAPS];
            int nh = cn_rs_taps(&g.ah, h, ih, wh), nw = cn_rs_taps(&g.aw, w, iw, ww);
            for (int a = 0; a < nh; a++) {
                double row = 0;
                for (int b = 0; b < nw; b++) row += ww[b] * rs_load(g, src, n, c, ih[a], iw[b]);
                acc += wh[a] * row;
            }
        } else {
            int64_t h0, h1, w0, w1;
            cn_rs_range(&g.ah, h, &h0, &h1);
            cn_rs_range(&g.aw, w, &w0, &w1);
            for (int64_t oh = h0; oh <= h1; oh++) {
                double wh = cn_rs_weight(&g.ah, oh, h), row = 0;
                if (wh == 0) continue;
                for (int64_t ow = w0; ow <= w1; ow++) {
                    double ww = cn_rs_weight(&g.aw, ow, w);
                    if (ww != 0) row += ww * rs_load(g, src, n, c, oh, ow);
                }
                acc += wh * row;
            }
        }
        if (g.dt == CN_F64)
            ((double *)out)[p] = acc;
        else
            cu_store_f32(out + p * g.es, g.dt, (float)acc);
    }
}

/* forward: in = (x), out = (y); backward: in = (g), out = (x's gradient). ints = mode,
 * align_corners; reals = the scale factors per spatial dim (0: none). The router checked the
 * shapes, sizes and mode. */
extern "C" cn_status cuda_interpolate(const cn_kernel_args *a) {
    int fwd = a->op == CN_OP_INTERPOLATE;
    const char *op = fwd ? "interpolate" : "interpolate_backward";
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    const cn_view *src = &a->in[0], *dst = &a->out[0];
    const cn_view *x = fwd ? src : dst, *y = fwd ? dst : src;
    int mode = (int)a->ints[0], align = (int)a->ints[1];
    rs_geom g;
    memset(&g, 0, sizeof g);
    g.backward = !fwd;
    g.dt = (int)src->dtype;
    g.es = (int)cn_dtype_size(src->dtype);
    g.src.nd = 4;
    g.src.stride[0] = src->strides[0];
    g.src.stride[1] = src->strides[1];
    if (x->ndim == 3) {
        g.ah = cn_rs_axis{1, 1, CN_RS_NEAREST, 0, 0.0, 0};
        g.aw = cn_rs_axis{x->shape[2], y->shape[2], mode, align, a->reals[0], 0};
        g.src.stride[2] = 0;
        g.src.stride[3] = src->strides[2];
    } else {
        g.ah = cn_rs_axis{x->shape[2], y->shape[2], mode, align, a->reals[0], 1};
        g.aw = cn_rs_axis{x->shape[3], y->shape[3], mode, align, a->reals[1], 1};
        g.src.stride[2] = src->strides[2];
        g.src.stride[3] = src->strides[3];
    }
    g.c = dst->shape[1];
    g.dh = dst->ndim == 3 ? 1 : dst->shape[2];
    g.dw = dst->shape[dst->ndim - 1];
    g.n = dst->shape[0] * g.c * g.dh * g.dw;
    interpolate_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g, (char *)dst->data,
                                                                     (const char *)src->data);
    return cu_check_launch(op, "interpolate_kernel");
}

/* ---- grid_sample_2d ------------------------------------------------------------------------
 * The forward: one thread per output entry. The input's gradient: one thread per (n, c) plane,
 * walking the grid points in order (as the CPU does: deterministic sums, no atomics). The grid's
 * gradient: one thread per grid point, summing over the channels. */

typedef struct gs_geom {
    cu_nd x, grid, g;  /* [N, C, H, W], [N, OH, OW, 2], [N, C, OH, OW] */
    int mode, padding, align, dt, es;
    int64_t c, h, w, oh, ow, n;
} gs_geom;

__device__ __forceinline__ double gs_ld(const gs_geom &g, const char *base, int64_t off) {
    return cu_load_f(base + off * g.es, g.dt);
}

__device__ __forceinline__ void gs_st(const gs_geom &g, char *base, int64_t off, double v) {
    if (g.dt == CN_F64)
        ((double *)base)[off] = v;
    else
        cu_store_f32(base + off * g.es, g.dt, (float)v);
}

__device__ __forceinline__ void gs_point(const gs_geom &g, const char *grid, int64_t n,
                                         int64_t y, int64_t x, cn_gs_taps *t) {
    int64_t off = n * g.grid.stride[0] + y * g.grid.stride[1] + x * g.grid.stride[2];
    cn_gs_taps_of(g.mode, g.padding, g.align, g.h, g.w, gs_ld(g, grid, off),
                  gs_ld(g, grid, off + g.grid.stride[3]), t);
}

__device__ __forceinline__ int64_t gs_off(const cu_nd &v, int64_t n, int64_t c, int64_t y,
                                          int64_t x) {
    return n * v.stride[0] + c * v.stride[1] + y * v.stride[2] + x * v.stride[3];
}

__global__ void grid_sample_kernel(const __grid_constant__ gs_geom g, char *out, const char *x,
                                   const char *grid) {
    CU_GRID_LOOP(p, g.n) {
        int64_t ox = p % g.ow, r = p / g.ow, oy = r % g.oh;
        r /= g.oh;
        int64_t c = r % g.c, n = r / g.c;
        cn_gs_taps t;
        gs_point(g, grid, n, oy, ox, &t);
        double acc = 0;
        for (int k = 0; k < t.n; k++)
            acc += t.w[k] * gs_ld(g, x, gs_off(g.x, n, c, t.y[k], t.x[k]));
        gs_st(g, out, p, acc);
    }
}

__global__ void grid_sample_input_kernel(const __grid_constant__ gs_geom g, char *out,
                                         const char *gr, const char *grid) {
    int64_t plane = g.h * g.w;
    CU_GRID_LOOP(p, g.n) { /* g.n = N * C planes */
        int64_t n = p / g.c, c = p % g.c;
        for (int64_t i = 0; i < plane; i++) gs_st(g, out, p * plane + i, 0);
        for (int64_t y = 0; y < g.oh; y++)
            for (int64_t x = 0; x < g.ow; x++) {
                cn_gs_taps t;
                gs_point(g, grid, n, y, x, &t);
                double gv = gs_ld(g, gr, gs_off(g.g, n, c, y, x));
                for (int k = 0; k < t.n; k++) {
                    int64_t o = p * plane + t.y[k] * g.w + t.x[k];
                    gs_st(g, out, o, gs_ld(g, out, o) + t.w[k] * gv);
                }
            }
    }
}

__global__ void grid_sample_grid_kernel(const __grid_constant__ gs_geom g, char *out,
                                        const char *gr, const char *x, const char *grid) {
    CU_GRID_LOOP(p, g.n) { /* g.n = N * OH * OW grid points */
        int64_t ox = p % g.ow, r = p / g.ow, oy = r % g.oh, n = r / g.oh;
        cn_gs_taps t;
        gs_point(g, grid, n, oy, ox, &t);
        double sx = 0, sy = 0;
        if (g.mode == CN_GS_BILINEAR)
            for (int64_t c = 0; c < g.c; c++) {
                double gv = gs_ld(g, gr, gs_off(g.g, n, c, oy, ox));
                for (int k = 0; k < t.n; k++) {
                    double v = gv * gs_ld(g, x, gs_off(g.x, n, c, t.y[k], t.x[k]));
                    sx += v * t.wx[k];
                    sy += v * t.wy[k];
                }
            }
        gs_st(g, out, 2 * p, sx * t.dx);
        gs_st(g, out, 2 * p + 1, sy * t.dy);
    }
}

/* forward: in = (x, grid), out [N, C, OH, OW]; backward: in = (g, x, grid), ints[3] = 0: out
 * x's gradient, 1: the grid's. ints = mode, padding, align_corners. The router checked the
 * shapes and attributes. */
extern "C" cn_status cuda_grid_sample_2d(const cn_kernel_args *a) {
    int fwd = a->op == CN_OP_GRID_SAMPLE_2D;
    const char *op = fwd ? "grid_sample_2d" : "grid_sample_2d_backward";
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    const cn_view *x = &a->in[fwd ? 0 : 1], *grid = &a->in[fwd ? 1 : 2], *out = &a->out[0];
    gs_geom g;
    memset(&g, 0, sizeof g);
    g.x = cu_nd_of(x);
    g.grid = cu_nd_of(grid);
    if (!fwd) g.g = cu_nd_of(&a->in[0]);
    g.mode = (int)a->ints[0];
    g.padding = (int)a->ints[1];
    g.align = (int)a->ints[2];
    g.dt = (int)x->dtype;
    g.es = (int)cn_dtype_size(x->dtype);
    g.c = x->shape[1];
    g.h = x->shape[2];
    g.w = x->shape[3];
    g.oh = grid->shape[1];
    g.ow = grid->shape[2];
    if (fwd) {
        g.n = x->shape[0] * g.c * g.oh * g.ow;
        grid_sample_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(
            g, (char *)out->data, (const char *)x->data, (const char *)grid->data);
        return cu_check_launch(op, "grid_sample_kernel");
    }
    if (a->ints[3] == 0) {
        g.n = x->shape[0] * g.c;
        grid_sample_input_kernel<<<cu_blocks(g.n, 64), 64, 0, d->stream>>>(
            g, (char *)out->data, (const char *)a->in[0].data, (const char *)grid->data);
        return cu_check_launch(op, "grid_sample_input_kernel");
    }
    g.n = x->shape[0] * g.oh * g.ow;
    grid_sample_grid_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(
        g, (char *)out->data, (const char *)a->in[0].data, (const char *)x->data,
        (const char *)grid->data);
    return cu_check_launch(op, "grid_sample_grid_kernel");
}
