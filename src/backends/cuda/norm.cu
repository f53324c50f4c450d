/* CUDA layer_norm and rms_norm, forward and backward (the CPU's cpu/norm.c): x (dense) is M rows
 * of N elements. One block per row computes the row's sums (in double, through shared memory)
 * and writes y, or dx; dw and db take one thread per column, summing over the rows in order. */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

#define NORM_THREADS 256

typedef struct norm_geom {
    int rms, has_w, has_b, want_dw, want_db;
    int64_t m, n;
    double eps;
    const void *x, *g, *w, *b, *mean_in, *rstd_in;
    void *y, *mean, *rstd, *dx, *dw, *db;
} norm_geom;

/* The sum of every thread's v over the block (sh: NORM_THREADS doubles), on every thread. */
__device__ double block_sum(double v, double *sh) {
    sh[threadIdx.x] = v;
    __syncthreads();
    for (int s = NORM_THREADS / 2; s > 0; s >>= 1) {
        if ((int)threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    double r = sh[0];
    __syncthreads();
    return r;
}

template <typename T> __global__ void norm_forward_kernel(const __grid_constant__ norm_geom p) {
    __shared__ double sh[NORM_THREADS];
    const T *w = (const T *)p.w, *b = (const T *)p.b;
    for (int64_t r = blockIdx.x; r < p.m; r += gridDim.x) {
        const T *x = (const T *)p.x + r * p.n;
        T *y = (T *)p.y + r * p.n;
        double s = 0;
        if (!p.rms) {
            for (int64_t i = threadIdx.x; i < p.n; i += NORM_THREADS) s += (double)x[i];
            s = block_sum(s, sh);
        }
        double m = p.rms || p.n == 0 ? 0.0 : s / (double)p.n;
        double q = 0;
        for (int64_t i = threadIdx.x; i < p.n; i += NORM_THREADS) {
            double d = (double)x[i] - m;
            q += d * d;
        }
        q = block_sum(q, sh);
        double rs = 1.0 / sqrt((p.n ? q / (double)p.n : 0.0) + p.eps);
        if (threadIdx.x == 0) {
            if (!p.rms) ((T *)p.mean)[r] = (T)m;
            ((T *)p.rstd)[r] = (T)rs;
        }
        for (int64_t i = threadIdx.x; i < p.n; i += NORM_THREADS) {
            double v = ((double)x[i] - m) * rs;
            if (w) v *= (double)w[i];
            if (b) v += (double)b[i];
            y[i] = (T)v;
        }
    }
}

template <typename T> __global__ void norm_dx_kernel(const __grid_constant__ norm_geom p) {
    __shared__ double sh[NORM_THREADS];
    const T *w = (const T *)p.w;
    for (int64_t r = blockIdx.x; r < p.m; r += gridDim.x) {
        const T *x = (const T *)p.x + r * p.n, *g = (const T *)p.g + r * p.n;
        T *dx = (T *)p.dx + r * p.n;
        double m = p.rms ? 0.0 : (double)((const T *)p.mean_in)[r];
        double rs = (double)((const T *)p.rstd_in)[r];
        double s1 = 0, s2 = 0;
        for (int64_t i = threadIdx.x; i < p.n; i += NORM_THREADS) {
            double gw = (double)g[i] * (w ? (double)w[i] : 1.0);
            s1 += gw;
            s2 += gw * ((double)x[i] - m) * rs;
        }
        s1 = p.rms ? 0.0 : block_sum(s1, sh);
        s2 = block_sum(s2, sh);
        double c1 = s1 / (double)p.n, c2 = s2 / (double)p.n;
        for (int64_t i = threadIdx.x; i < p.n; i += NORM_THREADS) {
            double gw = (double)g[i] * (w ? (double)w[i] : 1.0);
            dx[i] = (T)(rs * (gw - c1 - ((double)x[i] - m) * rs * c2));
        }
    }
}

/* column j of dw / db: the sums over the rows, in row order */
template <typename T> __global__ void norm_dwdb_kernel(const __grid_constant__ norm_geom p) {
    CU_GRID_LOOP(j, p.n) {
        double sw = 0, sb = 0;
        for (int64_t r = 0; r < p.m; r++) {
            double g = (double)((const T *)p.g)[r * p.n + j];
            double m = p.rms ? 0.0 : (double)((const T *)p.mean_in)[r];
            double rs = (double)((const T *)p.rstd_in)[r];
            sw += g * ((double)((const T *)p.x)[r * p.n + j] - m) * rs;
            sb += g;
        }
        if (p.dw) ((T *)p.dw)[j] = (T)sw;
        if (p.db) ((T *)p.db)[j] = (T)sb;
    }
}

static void rows_of(const cn_view *v, int64_t k, int64_t *m, int64_t *n) {
    *m = 1;
    *n = 1;
    for (int d = 0; d < v->ndim; d++) {
        if (d < v->ndim - k)
            *m *= v->shape[d];
        else
            *n *= v->shape[d];
    }
}

static unsigned row_blocks(int64_t m) { return (unsigned)(m < 65535 ? (m > 0 ? m : 1) : 65535); }

/* layer_norm and rms_norm: in = x[, w][, b]; out = y, [mean,] rstd (backend.h) */
extern "C" cn_status cuda_norm(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    cn_dtype dt = a->in[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) return cn__kernel_dtype_error("cuda", a->op, dt);
    norm_geom p;
    memset(&p, 0, sizeof p);
    p.rms = a->op == CN_OP_RMS_NORM;
    p.has_w = a->ints[1] != 0;
    p.has_b = !p.rms && a->ints[2] != 0;
    p.eps = a->reals[0];
    rows_of(&a->in[0], a->ints[0], &p.m, &p.n);
    p.x = a->in[0].data;
    p.w = p.has_w ? a->in[1].data : NULL;
    p.b = p.has_b ? a->in[1 + p.has_w].data : NULL;
    p.y = a->out[0].data;
    p.mean = p.rms ? NULL : a->out[1].data;
    p.rstd = a->out[p.rms ? 1 : 2].data;
    if (p.m == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    if (dt == CN_F64)
        norm_forward_kernel<double><<<row_blocks(p.m), NORM_THREADS, 0, d->stream>>>(p);
    else
        norm_forward_kernel<float><<<row_blocks(p.m), NORM_THREADS, 0, d->stream>>>(p);
    return cu_check_launch(op, "norm_forward_kernel");
}

/* layer_norm_backward: in = g, x, mean, rstd[, w]; out = dx[, dw][, db]. rms_norm_backward: in =
 * g, x, rstd[, w]; out = dx[, dw]. */
extern "C" cn_status cuda_norm_backward(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    cn_dtype dt = a->in[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) return cn__kernel_dtype_error("cuda", a->op, dt);
    norm_geom p;
    memset(&p, 0, sizeof p);
    p.rms = a->op == CN_OP_RMS_NORM_BACKWARD;
    int n_stats = p.rms ? 1 : 2;
    p.has_w = a->ints[1] != 0;
    p.want_dw = a->ints[2] != 0;
    p.want_db = !p.rms && a->ints[3] != 0;
    rows_of(&a->in[1], a->ints[0], &p.m, &p.n);
    p.g = a->in[0].data;
    p.x = a->in[1].data;
    p.mean_in = p.rms ? NULL : a->in[2].data;
    p.rstd_in = a->in[1 + n_stats].data;
    p.w = p.has_w ? a->in[2 + n_stats].data : NULL;
    p.dx = a->out[0].data;
    int at = 1;
    p.dw = p.want_dw ? a->out[at++].data : NULL;
    p.db = p.want_db ? a->out[at++].data : NULL;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    if (p.m > 0 && p.n > 0) {
        if (dt == CN_F64)
            norm_dx_kernel<double><<<row_blocks(p.m), NORM_THREADS, 0, d->stream>>>(p);
        else
            norm_dx_kernel<float><<<row_blocks(p.m), NORM_THREADS, 0, d->stream>>>(p);
        cn_status s = cu_check_launch(op, "norm_dx_kernel");
        if (s != CN_OK) return s;
    }
    if ((p.dw || p.db) && p.n > 0) {
        if (dt == CN_F64)
            norm_dwdb_kernel<double><<<cu_blocks(p.n), CU_THREADS, 0, d->stream>>>(p);
        else
            norm_dwdb_kernel<float><<<cu_blocks(p.n), CU_THREADS, 0, d->stream>>>(p);
        return cu_check_launch(op, "norm_dwdb_kernel");
    }
    return CN_OK;
}
