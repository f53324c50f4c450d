/* CUDA softmax_backward (the CPU's cpu/softmax_backward.c): one thread per row along the dim,
 * two passes over it, the sum in double (float for f16/bf16 through cu_ld/cu_st's float). */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct sb_geom {
    int nd, dim, log, dt, es;
    int64_t shape[CN_MAX_DIMS], gs[CN_MAX_DIMS], ys[CN_MAX_DIMS];
    int64_t n, inner, rows;
    const char *g, *y;
    char *out;
} sb_geom;

template <typename T> __global__ void softmax_backward_kernel(const __grid_constant__ sb_geom p) {
    CU_GRID_LOOP(r, p.rows) {
        int64_t go = 0, yo = 0, rest = r;
        for (int d = p.nd - 1; d >= 0; d--) {
            if (d == p.dim) continue;
            int64_t i = rest % p.shape[d];
            rest /= p.shape[d];
            go += i * p.gs[d];
            yo += i * p.ys[d];
        }
        const int64_t gstep = p.nd ? p.gs[p.dim] : 0, ystep = p.nd ? p.ys[p.dim] : 0;
        const int64_t oo = (r / p.inner) * p.n * p.inner + r % p.inner;
        double sum = 0;
        for (int64_t i = 0; i < p.n; i++) {
            double gv = (double)cu_ld<T>(p.g + (go + i * gstep) * p.es, p.dt);
            sum += p.log ? gv : gv * (double)cu_ld<T>(p.y + (yo + i * ystep) * p.es, p.dt);
        }
        T s = (T)sum;
        for (int64_t i = 0; i < p.n; i++) {
            T gv = cu_ld<T>(p.g + (go + i * gstep) * p.es, p.dt);
            T yv = cu_ld<T>(p.y + (yo + i * ystep) * p.es, p.dt);
            T v = p.log ? gv - (T)exp((double)yv) * s : yv * (gv - s);
            cu_st<T>(p.out + (oo + i * p.inner) * p.es, p.dt, v);
        }
    }
}

extern "C" cn_status cuda_softmax_backward(const cn_kernel_args *a) {
    const char *op = "softmax_backward";
    const cn_view *g = &a->in[0], *y = &a->in[1], *out = &a->out[0];
    sb_geom p;
    memset(&p, 0, sizeof p);
    p.nd = out->ndim;
    p.dim = p.nd ? (int)a->ints[0] : 0;
    if (p.nd && (p.dim < 0 || p.dim >= p.nd))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "dim %d is out of range for %d dims", p.dim,
                            p.nd);
    p.log = a->ints[1] != 0;
    int64_t numel = 1;
    for (int d = 0; d < p.nd; d++) {
        p.shape[d] = out->shape[d];
        p.gs[d] = g->strides[d];
        p.ys[d] = y->strides[d];
        numel *= out->shape[d];
    }
    if (numel == 0) return CN_OK;
    p.n = p.nd ? out->shape[p.dim] : 1;
    p.inner = 1;
    for (int d = p.dim + 1; d < p.nd; d++) p.inner *= out->shape[d];
    p.rows = numel / p.n;
    p.g = (const char *)g->data, p.y = (const char *)y->data, p.out = (char *)out->data;
    p.dt = out->dtype;
    p.es = (int)cn_dtype_size(out->dtype);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    if (p.dt == CN_F64)
        softmax_backward_kernel<double><<<cu_blocks(p.rows), CU_THREADS, 0, d->stream>>>(p);
    else
        softmax_backward_kernel<float><<<cu_blocks(p.rows), CU_THREADS, 0, d->stream>>>(p);
    return cu_check_launch(op, "softmax_backward_kernel");
}
