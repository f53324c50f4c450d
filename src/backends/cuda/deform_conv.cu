/* CUDA deformable convolution (deform_conv2d) and its backward, each entry computed by its
 * definition by one thread, in double, with the CPU's sampling (core/deform_math.h: torchvision's
 * corners and weights); no atomics, so the results are deterministic. Simple rather than fast:
 * no GEMM lowering, and x's gradient costs each x entry a walk over all KH KW OH OW samples of
 * its offset group (quadratic in the image size), so it suits small maps (detection heads), not
 * large ones. Every float dtype (loads and stores convert).
 *
 * Forward: one thread per output entry (n, o, oh, ow) sums over its group's channels and taps.
 * Backward (backend.h's contract: out = gx, goffset, gw[, gmask]):
 * - gx: one thread per x entry (n, c, h, w) walks the samples of c's offset group and takes
 *   those within one row and column of (h, w) (the corners that read it), with the columns'
 *   gradient cg = sum over the group's outputs o of w[o, c', i, j] g[n, o, oh, ow];
 * - goffset and gmask: one thread per (n, tap row k, oh, ow) sums over the offset group's
 *   channels: m cg d(sample)/dy, m cg d(sample)/dx and cg sample;
 * - gw: one thread per weight entry sums g times the sample over the images and positions. */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"
#include "core/deform_math.h"

typedef struct dc_geom {
    int64_t N, C, H, W, O, OH, OW, KH, KW, sh, sw, ph, pw, dh, dw, groups, G;
    int64_t Cg, Og, cpg, KK, P;
    int has_mask, has_b;
} dc_geom;

__device__ __forceinline__ double dc_ld(const cn_view &v, int64_t off) {
    return cu_load_f((const char *)v.data + off * (int64_t)(v.dtype == CN_F64   ? 8
                                                            : v.dtype == CN_F32 ? 4
                                                                                : 2),
                     (int)v.dtype);
}

__device__ __forceinline__ double dc_ld4(const cn_view &v, int64_t a, int64_t b, int64_t c,
                                         int64_t d) {
    return dc_ld(v, a * v.strides[0] + b * v.strides[1] + c * v.strides[2] + d * v.strides[3]);
}

/* The corners of tap row k = (og KH + i) KW + j at output p of image n, and the mask. */
__device__ void dc_taps(const dc_geom &g, const cn_view &off, const cn_view &mask, int64_t n,
                        int64_t k, int64_t i, int64_t j, int64_t p, cn_dc_taps *t, double *m) {
    int64_t oh = p / g.OW, ow = p % g.OW;
    double dy = dc_ld4(off, n, 2 * k, oh, ow), dx = dc_ld4(off, n, 2 * k + 1, oh, ow);
    cn_dc_taps_at(cn_dc_pos(oh, g.sh, g.ph, i, g.dh, dy), cn_dc_pos(ow, g.sw, g.pw, j, g.dw, dx),
                  g.H, g.W, t);
    *m = g.has_mask ? dc_ld4(mask, n, k, oh, ow) : 1.0;
}

/* x[n, c] at corner index at (row * W + column) */
__device__ __forceinline__ double dc_x(const dc_geom &g, const cn_view &x, int64_t n, int64_t c,
                                       int64_t at) {
    return dc_ld4(x, n, c, at / g.W, at % g.W);
}

/* The columns' gradient of channel c, tap (i, j), position p of image n. */
__device__ double dc_cg(const dc_geom &g, const cn_view &gy, const cn_view &w, int64_t n, int64_t c,
                        int64_t i, int64_t j, int64_t p) {
    int64_t grp = c / g.Cg, cl = c % g.Cg, oh = p / g.OW, ow = p % g.OW;
    double s = 0;
    for (int64_t o = grp * g.Og; o < (grp + 1) * g.Og; o++)
        s += dc_ld4(w, o, cl, i, j) * dc_ld4(gy, n, o, oh, ow);
    return s;
}

__global__ void
deform_forward_kernel(const __grid_constant__ dc_geom g, const __grid_constant__ cn_view x,
                      const __grid_constant__ cn_view off, const __grid_constant__ cn_view w,
                      const __grid_constant__ cn_view mask, const __grid_constant__ cn_view b,
                      char *out, int es, int dt, int64_t total) {
    CU_GRID_LOOP(e, total) {
        int64_t p = e % g.P, o = e / g.P % g.O, n = e / (g.P * g.O), grp = o / g.Og;
        double s = g.has_b ? dc_ld(b, o * b.strides[0]) : 0.0;
        for (int64_t cl = 0; cl < g.Cg; cl++) {
            int64_t c = grp * g.Cg + cl, og = c / g.cpg;
            for (int64_t i = 0; i < g.KH; i++)
                for (int64_t j = 0; j < g.KW; j++) {
                    cn_dc_taps t;
                    double m, v = 0;
                    dc_taps(g, off, mask, n, (og * g.KH + i) * g.KW + j, i, j, p, &t, &m);
                    for (int q = 0; q < 4; q++)
                        if (t.w[q] != 0) v += t.w[q] * dc_x(g, x, n, c, t.at[q]);
                    s += dc_ld4(w, o, cl, i, j) * m * v;
                }
        }
        cu_store_from_double(out + e * es, dt, s);
    }
}

__global__ void deform_grad_x_kernel(const __grid_constant__ dc_geom g,
                                     const __grid_constant__ cn_view gy,
                                     const __grid_constant__ cn_view off,
                                     const __grid_constant__ cn_view w,
                                     const __grid_constant__ cn_view mask, char *gx, int es, int dt,
                                     int64_t total) {
    CU_GRID_LOOP(e, total) {
        int64_t at = e % (g.H * g.W), c = e / (g.H * g.W) % g.C, n = e / (g.H * g.W * g.C);
        int64_t h = at / g.W, wc = at % g.W, og = c / g.cpg;
        double s = 0;
        for (int64_t i = 0; i < g.KH; i++)
            for (int64_t j = 0; j < g.KW; j++) {
                int64_t k = (og * g.KH + i) * g.KW + j;
                for (int64_t p = 0; p < g.P; p++) {
                    int64_t oh = p / g.OW, ow = p % g.OW;
                    double y = cn_dc_pos(oh, g.sh, g.ph, i, g.dh, dc_ld4(off, n, 2 * k, oh, ow));
                    double xx =
                        cn_dc_pos(ow, g.sw, g.pw, j, g.dw, dc_ld4(off, n, 2 * k + 1, oh, ow));
                    if (!(fabs(y - (double)h) < 1 && fabs(xx - (double)wc) < 1)) continue;
                    cn_dc_taps t;
                    double m;
                    dc_taps(g, off, mask, n, k, i, j, p, &t, &m);
                    double wt = 0;
                    for (int q = 0; q < 4; q++)
                        if (t.at[q] == at) wt += t.w[q];
                    if (wt != 0) s += m * wt * dc_cg(g, gy, w, n, c, i, j, p);
                }
            }
        cu_store_from_double(gx + e * es, dt, s);
    }
}

__global__ void
deform_grad_offset_kernel(const __grid_constant__ dc_geom g, const __grid_constant__ cn_view gy,
                          const __grid_constant__ cn_view x, const __grid_constant__ cn_view off,
                          const __grid_constant__ cn_view w, const __grid_constant__ cn_view mask,
                          char *goff, char *gmask, int es, int dt, int64_t total) {
    CU_GRID_LOOP(e, total) {
        int64_t p = e % g.P, k = e / g.P % (g.G * g.KK), n = e / (g.P * g.G * g.KK);
        int64_t og = k / g.KK, i = k % g.KK / g.KW, j = k % g.KW;
        cn_dc_taps t;
        double m, sy = 0, sx = 0, sm = 0;
        dc_taps(g, off, mask, n, k, i, j, p, &t, &m);
        for (int64_t c = og * g.cpg; c < (og + 1) * g.cpg; c++) {
            double v = 0, vy = 0, vx = 0;
            for (int q = 0; q < 4; q++) {
                if (t.at[q] < 0) continue;
                double xv = dc_x(g, x, n, c, t.at[q]);
                v += t.w[q] * xv;
                vy += t.wy[q] * xv;
                vx += t.wx[q] * xv;
            }
            double d = dc_cg(g, gy, w, n, c, i, j, p);
            sy += m * d * vy;
            sx += m * d * vx;
            sm += d * v;
        }
        int64_t base = (n * 2 * g.G * g.KK + 2 * k) * g.P + p;
        cu_store_from_double(goff + base * es, dt, sy);
        cu_store_from_double(goff + (base + g.P) * es, dt, sx);
        if (g.has_mask) cu_store_from_double(gmask + e * es, dt, sm);
    }
}

__global__ void deform_grad_w_kernel(const __grid_constant__ dc_geom g,
                                     const __grid_constant__ cn_view gy,
                                     const __grid_constant__ cn_view x,
                                     const __grid_constant__ cn_view off,
                                     const __grid_constant__ cn_view mask, char *gw, int es, int dt,
                                     int64_t total) {
    CU_GRID_LOOP(e, total) {
        int64_t j = e % g.KW, i = e / g.KW % g.KH, cl = e / g.KK % g.Cg, o = e / (g.KK * g.Cg);
        int64_t c = o / g.Og * g.Cg + cl, k = (c / g.cpg * g.KH + i) * g.KW + j;
        double s = 0;
        for (int64_t n = 0; n < g.N; n++)
            for (int64_t p = 0; p < g.P; p++) {
                cn_dc_taps t;
                double m, v = 0;
                dc_taps(g, off, mask, n, k, i, j, p, &t, &m);
                for (int q = 0; q < 4; q++)
                    if (t.w[q] != 0) v += t.w[q] * dc_x(g, x, n, c, t.at[q]);
                s += dc_ld4(gy, n, o, p / g.OW, p % g.OW) * m * v;
            }
        cu_store_from_double(gw + e * es, dt, s);
    }
}

/* deform_conv2d: in = (x, offset, w[, mask][, b]), out = (y); its backward: in = (g, x, offset,
 * w[, mask]), out = (gx, goffset, gw[, gmask]). ints[7] = offset_groups, ints[8] = has_mask. */
extern "C" cn_status cuda_deform_conv2d(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_conv_geometry *c = cn__kernel_geometry("cuda", a);
    if (!c) return CN_ERR_INVALID_ARG;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    int bwd = a->op == CN_OP_DEFORM_CONV2D_BACKWARD;
    const cn_view *in = a->in + bwd;
    dc_geom g;
    memset(&g, 0, sizeof g);
    g.N = c->n, g.C = c->c, g.H = c->h, g.W = c->w, g.O = c->o, g.OH = c->oh, g.OW = c->ow;
    g.KH = c->kh, g.KW = c->kw, g.sh = c->sh, g.sw = c->sw, g.ph = c->ph, g.pw = c->pw;
    g.dh = c->dh, g.dw = c->dw, g.groups = c->groups, g.G = a->ints[7];
    g.Cg = g.C / g.groups, g.Og = g.O / g.groups, g.cpg = g.C / g.G, g.KK = g.KH * g.KW;
    g.P = g.OH * g.OW;
    g.has_mask = (int)a->ints[8];
    g.has_b = !bwd && a->n_in > 3 + g.has_mask;
    const cn_view none = in[0];
    const cn_view mask = g.has_mask ? in[3] : none, b = g.has_b ? in[3 + g.has_mask] : none;
    int dt = (int)a->out[0].dtype, es = (int)cn_dtype_size(a->out[0].dtype);
    if (!bwd) {
        int64_t total = cn__view_numel(&a->out[0]);
        deform_forward_kernel<<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
            g, in[0], in[1], in[2], mask, b, (char *)a->out[0].data, es, dt, total);
        return cu_check_launch(op, "deform_forward_kernel");
    }
    const cn_view gy = a->in[0];
    int64_t nx = cn__view_numel(&a->out[0]), no = g.N * g.G * g.KK * g.P;
    int64_t nw = cn__view_numel(&a->out[2]);
    if (nx > 0) {
        deform_grad_x_kernel<<<cu_blocks(nx), CU_THREADS, 0, d->stream>>>(
            g, gy, in[1], in[2], mask, (char *)a->out[0].data, es, dt, nx);
        cn_status s = cu_check_launch(op, "deform_grad_x_kernel");
        if (s != CN_OK) return s;
    }
    if (no > 0) {
        deform_grad_offset_kernel<<<cu_blocks(no), CU_THREADS, 0, d->stream>>>(
            g, gy, in[0], in[1], in[2], mask, (char *)a->out[1].data,
            g.has_mask ? (char *)a->out[3].data : NULL, es, dt, no);
        cn_status s = cu_check_launch(op, "deform_grad_offset_kernel");
        if (s != CN_OK) return s;
    }
    if (nw > 0) {
        deform_grad_w_kernel<<<cu_blocks(nw), CU_THREADS, 0, d->stream>>>(
            g, gy, in[0], in[1], mask, (char *)a->out[2].data, es, dt, nw);
        return cu_check_launch(op, "deform_grad_w_kernel");
    }
    return CN_OK;
}
