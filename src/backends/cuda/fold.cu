/* CUDA kernels of unfold4d (im2col) and fold4d (col2im), one thread per output element, as the
 * CPU computes them (cpu/fold.c): unfold gathers one x entry (0 in the padding); fold sums, for
 * one x entry, the column entries that unfold would read from it (no atomics: deterministic).
 * In double; every float dtype. */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct fold_geom {
    cu_nd x, cols;   /* x: [N, C, H, W]; cols: [N, C * KH * KW, OH * OW] */
    int64_t k[8];    /* kernel h, w, dilation h, w, padding h, w, stride h, w */
    int64_t oh, ow;  /* the block counts */
    int64_t n;
    int es, dt;
} fold_geom;

__global__ void unfold4d_kernel(const __grid_constant__ fold_geom g, char *cols, const char *x) {
    CU_GRID_LOOP(p, g.n) {
        const int64_t R = g.cols.shape[1], L = g.cols.shape[2];
        int64_t l = p % L, r = p / L % R, n = p / (L * R);
        int64_t jw = r % g.k[1], i = r / g.k[1] % g.k[0], c = r / (g.k[0] * g.k[1]);
        int64_t h = l / g.ow * g.k[6] - g.k[4] + i * g.k[2];
        int64_t w = l % g.ow * g.k[7] - g.k[5] + jw * g.k[3];
        double v = 0;
        if (h >= 0 && h < g.x.shape[2] && w >= 0 && w < g.x.shape[3])
            v = cu_load_f(x + (n * g.x.stride[0] + c * g.x.stride[1] + h * g.x.stride[2] +
                               w * g.x.stride[3]) * g.es,
                          g.dt);
        cu_store_from_double(cols + cu_nd_offset(g.cols, p) * g.es, g.dt, v);
    }
}

__global__ void fold4d_kernel(const __grid_constant__ fold_geom g, char *x, const char *cols) {
    CU_GRID_LOOP(p, g.n) {
        const int64_t C = g.x.shape[1], H = g.x.shape[2], W = g.x.shape[3];
        int64_t w = p % W, h = p / W % H, c = p / (W * H) % C, n = p / (W * H * C);
        double s = 0;
        for (int64_t i = 0; i < g.k[0]; i++) {
            int64_t th = h + g.k[4] - i * g.k[2];
            if (th < 0 || th % g.k[6] != 0 || th / g.k[6] >= g.oh) continue;
            for (int64_t jw = 0; jw < g.k[1]; jw++) {
                int64_t tw = w + g.k[5] - jw * g.k[3];
                if (tw < 0 || tw % g.k[7] != 0 || tw / g.k[7] >= g.ow) continue;
                int64_t r = (c * g.k[0] + i) * g.k[1] + jw, l = th / g.k[6] * g.ow + tw / g.k[7];
                s += cu_load_f(cols + (n * g.cols.stride[0] + r * g.cols.stride[1] +
                                       l * g.cols.stride[2]) * g.es,
                               g.dt);
            }
        }
        cu_store_from_double(x + cu_nd_offset(g.x, p) * g.es, g.dt, s);
    }
}

/* unfold4d: in = (x [N, C, H, W]), out = (cols); fold4d: in = (cols), out = (x). ints: kernel h,
 * w, dilation h, w, padding h, w, stride h, w. */
extern "C" cn_status cuda_fold4d(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    int fold = a->op == CN_OP_FOLD4D;
    const cn_view *x = fold ? &a->out[0] : &a->in[0], *cols = fold ? &a->in[0] : &a->out[0];
    if (a->n_ints != 8 || x->ndim != 4 || cols->ndim != 3)
        return cn_set_error(CN_ERR_SHAPE, op, "need 4-D x, 3-D columns, 8 ints");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    fold_geom g;
    memset(&g, 0, sizeof g);
    g.x = cu_nd_of(x);
    g.cols = cu_nd_of(cols);
    for (int i = 0; i < 8; i++) g.k[i] = a->ints[i];
    g.oh = (x->shape[2] + 2 * g.k[4] - g.k[2] * (g.k[0] - 1) - 1) / g.k[6] + 1;
    g.ow = (x->shape[3] + 2 * g.k[5] - g.k[3] * (g.k[1] - 1) - 1) / g.k[7] + 1;
    g.n = cn__view_numel(fold ? x : cols);
    g.es = (int)cn_dtype_size(x->dtype);
    g.dt = (int)x->dtype;
    if (fold)
        fold4d_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g, (char *)x->data,
                                                                    (const char *)cols->data);
    else
        unfold4d_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(g, (char *)cols->data,
                                                                      (const char *)x->data);
    return cu_check_launch(op, fold ? "fold4d_kernel" : "unfold4d_kernel");
}
