/* CUDA kernels of the adaptive average pools (x's last k = 1..3 dims) and their backward, and of
 * max pooling with indices (at the end), one thread per output element, as the CPU computes them
 * (cpu/pool_more.c): output index o of a pooled dim (input size n, output size m) averages
 * [floor(o n / m), ceil((o + 1) n / m)); the backward gives input index i the sum of
 * g / (window size) over o in [floor(i m / n), floor(((i + 1) m - 1) / n)]. In double; every
 * float dtype. */
#include <math.h>
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct adaptive_geom {
    cu_nd out, in; /* forward: in = x; backward: in = g */
    int64_t n;
    int k, backward, es, dt;
} adaptive_geom;

__device__ __forceinline__ void adaptive_window(int64_t o, int64_t n, int64_t m, int64_t *lo,
                                                int64_t *hi) {
    *lo = o * n / m;
    *hi = ((o + 1) * n + m - 1) / m;
}

__global__ void adaptive_avg_pool_kernel(const __grid_constant__ adaptive_geom g, char *out,
                                         const char *in) {
    CU_GRID_LOOP(p, g.n) {
        const int nd = g.out.nd, lead = nd - g.k;
        int64_t q = p, oo = 0, io = 0, c[CN_MAX_DIMS];
        for (int d = nd - 1; d >= 0; d--) {
            int64_t t = q / g.out.shape[d];
            c[d] = q - t * g.out.shape[d];
            q = t;
            oo += c[d] * g.out.stride[d];
            if (d < lead) io += c[d] * g.in.stride[d];
        }
        int64_t lo[3] = {0, 0, 0}, hi[3] = {1, 1, 1}, st[3] = {0, 0, 0};
        for (int i = 0; i < g.k; i++) {
            int d = lead + i;
            int64_t n = g.out.shape[d], m = g.in.shape[d];
            st[i] = g.in.stride[d];
            if (!g.backward) {
                adaptive_window(c[d], m, n, &lo[i], &hi[i]);
            } else {
                lo[i] = c[d] * m / n;
                hi[i] = ((c[d] + 1) * m - 1) / n + 1;
            }
        }
        double s = 0;
        for (int64_t a = lo[0]; a < hi[0]; a++)
            for (int64_t b = lo[1]; b < hi[1]; b++)
                for (int64_t e = lo[2]; e < hi[2]; e++) {
                    double v = cu_load_f(in + (io + a * st[0] + b * st[1] + e * st[2]) * g.es,
                                         g.dt);
                    if (g.backward) {
                        const int64_t o[3] = {a, b, e};
                        int64_t count = 1;
                        for (int i = 0; i < g.k; i++) {
                            int64_t wl, wh;
                            adaptive_window(o[i], g.out.shape[lead + i], g.in.shape[lead + i],
                                            &wl, &wh);
                            count *= wh - wl;
                        }
                        v /= (double)count;
                    }
                    s += v;
                }
        if (!g.backward) s /= (double)((hi[0] - lo[0]) * (hi[1] - lo[1]) * (hi[2] - lo[2]));
        cu_store_from_double(out + oo * g.es, g.dt, s);
    }
}

/* adaptive_avg_pool: in = (x), ints[0] = k; out = x's shape with its last k dims the output
 * sizes. adaptive_avg_pool_backward: in = (g), ints[0] = k; out = the pool's input shape. */
extern "C" cn_status cuda_adaptive_avg_pool(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_view *out = &a->out[0], *in = &a->in[0];
    int k = (int)a->ints[0];
    if (k < 1 || k > 3 || out->ndim != in->ndim || k > out->ndim)
        return cn_set_error(CN_ERR_SHAPE, op, "need k in [1, 3] pooled dims");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    adaptive_geom g;
    memset(&g, 0, sizeof g);
    g.out = cu_nd_of(out);
    g.in = cu_nd_of(in);
    g.n = cn__view_numel(out);
    g.k = k;
    g.backward = a->op == CN_OP_ADAPTIVE_AVG_POOL_BACKWARD;
    g.es = (int)cn_dtype_size(out->dtype);
    g.dt = (int)out->dtype;
    adaptive_avg_pool_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(
        g, (char *)out->data, (const char *)in->data);
    return cu_check_launch(op, "adaptive_avg_pool_kernel");
}

/* ---- max pooling with indices ---------------------------------------------------------------- *
 * As the CPU's (cpu/pool_more.c): the first maximum in row-major order, a NaN over numbers (the
 * last NaN), an all -inf window its first position inside the input. */

typedef struct max_pool_geom {
    cu_nd x, out, idx;
    int64_t k[8]; /* kh, kw, sh, sw, ph, pw, dh, dw */
    int64_t n;
    int es, dt;
} max_pool_geom;

__global__ void max_pool_indices_kernel(const __grid_constant__ max_pool_geom g, char *out,
                                        int64_t *idx, const char *x) {
    CU_GRID_LOOP(p, g.n) {
        const int64_t C = g.out.shape[1], OH = g.out.shape[2], OW = g.out.shape[3];
        const int64_t H = g.x.shape[2], W = g.x.shape[3];
        int64_t ow = p % OW, oh = p / OW % OH, c = p / (OW * OH) % C, n = p / (OW * OH * C);
        const char *plane = x + (n * g.x.stride[0] + c * g.x.stride[1]) * g.es;
        int64_t h0 = oh * g.k[2] - g.k[4], w0 = ow * g.k[3] - g.k[5];
        int64_t hf = h0, wf = w0;
        while (hf < 0) hf += g.k[6];
        while (wf < 0) wf += g.k[7];
        double best = -INFINITY;
        /* PyTorch's start, which may lie outside the plane when the window holds only padding
         * (then the maximum is -inf); unsigned so that absurd sizes wrap instead of overflowing */
        int64_t at = (int64_t)((uint64_t)hf * (uint64_t)W + (uint64_t)wf);
        for (int64_t i = 0; i < g.k[0]; i++) {
            int64_t h = h0 + i * g.k[6];
            if (h < 0 || h >= H) continue;
            for (int64_t j = 0; j < g.k[1]; j++) {
                int64_t w = w0 + j * g.k[7];
                if (w < 0 || w >= W) continue;
                double v = cu_load_f(plane + (h * g.x.stride[2] + w * g.x.stride[3]) * g.es, g.dt);
                if (v > best || v != v) {
                    best = v;
                    at = h * W + w;
                }
            }
        }
        cu_store_from_double(out + cu_nd_offset(g.out, p) * g.es, g.dt, best);
        idx[cu_nd_offset(g.idx, p)] = at;
    }
}

/* in = (x [N, C, H, W]), ints = kernel h, w, stride h, w, padding h, w, dilation h, w; out =
 * (values [N, C, OH, OW], i64 indices of the same shape). */
extern "C" cn_status cuda_max_pool2d_with_indices(const cn_kernel_args *a) {
    const char *op = "max_pool2d_with_indices";
    const cn_view *x = &a->in[0], *out = &a->out[0], *idx = &a->out[1];
    if (a->n_out != 2 || a->n_ints != 8 || x->ndim != 4 || out->ndim != 4 || idx->ndim != 4 ||
        idx->dtype != CN_I64)
        return cn_set_error(CN_ERR_SHAPE, op, "need 4-D x, values and i64 indices, and 8 ints");
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    max_pool_geom g;
    memset(&g, 0, sizeof g);
    g.x = cu_nd_of(x);
    g.out = cu_nd_of(out);
    g.idx = cu_nd_of(idx);
    for (int i = 0; i < 8; i++) g.k[i] = a->ints[i];
    g.n = cn__view_numel(out);
    g.es = (int)cn_dtype_size(x->dtype);
    g.dt = (int)x->dtype;
    max_pool_indices_kernel<<<cu_blocks(g.n), CU_THREADS, 0, d->stream>>>(
        g, (char *)out->data, (int64_t *)idx->data, (const char *)x->data);
    return cu_check_launch(op, "max_pool_indices_kernel");
}
