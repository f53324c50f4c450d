/* CUDA matmul of i32 and i64 (cuBLAS has no integer GEMM of these types): one thread per output
 * element, the sum along k in the dtype with wrapping (computed unsigned), as the CPU's loop
 * (cpu/matmul.c). a: [B.., M, K], b: [B.., K, N] (any strides, batch dims may be 0-stride);
 * out: [B.., M, N] contiguous. */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct imatmul_geom {
    int nb;                             /* batch dims */
    int64_t shape[CN_MAX_DIMS];         /* the output's batch shape */
    int64_t sa[CN_MAX_DIMS], sb[CN_MAX_DIMS];
    int64_t M, K, N, total;
    int64_t am, ak, bk, bn;             /* strides of the matrix dims */
    const void *a, *b;
    void *c;
} imatmul_geom;

template <typename T, typename U>
__global__ void imatmul_kernel(const __grid_constant__ imatmul_geom g) {
    CU_GRID_LOOP(e, g.total) {
        int64_t n = e % g.N, t = e / g.N, m = t % g.M, bi = t / g.M, oa = 0, ob = 0;
        for (int d = g.nb - 1; d >= 0; d--) {
            int64_t i = bi % g.shape[d];
            bi /= g.shape[d];
            oa += i * g.sa[d];
            ob += i * g.sb[d];
        }
        const T *a = (const T *)g.a + oa + m * g.am;
        const T *b = (const T *)g.b + ob + n * g.bn;
        U acc = 0;
        for (int64_t k = 0; k < g.K; k++) acc += (U)a[k * g.ak] * (U)b[k * g.bk];
        ((T *)g.c)[e] = (T)acc;
    }
}

extern "C" cn_status cu_matmul_int(cu_dev *d, const cn_kernel_args *args) {
    const char *op = "matmul";
    const cn_view *av = &args->in[0], *bv = &args->in[1], *cv = &args->out[0];
    int nd = cv->ndim;
    imatmul_geom g;
    memset(&g, 0, sizeof g);
    g.nb = nd - 2;
    for (int k = 0; k < nd - 2; k++) {
        g.shape[k] = cv->shape[k];
        g.sa[k] = av->strides[k];
        g.sb[k] = bv->strides[k];
    }
    g.M = av->shape[nd - 2], g.K = av->shape[nd - 1], g.N = bv->shape[nd - 1];
    g.am = av->strides[nd - 2], g.ak = av->strides[nd - 1];
    g.bk = bv->strides[nd - 2], g.bn = bv->strides[nd - 1];
    g.total = g.M * g.N;
    for (int k = 0; k < nd - 2; k++) g.total *= g.shape[k];
    if (g.total == 0) return CN_OK;
    g.a = av->data, g.b = bv->data, g.c = cv->data;
    if (cv->dtype == CN_I32)
        imatmul_kernel<int32_t, uint32_t><<<cu_blocks(g.total), CU_THREADS, 0, d->stream>>>(g);
    else
        imatmul_kernel<int64_t, uint64_t><<<cu_blocks(g.total), CU_THREADS, 0, d->stream>>>(g);
    return cu_check_launch(op, "imatmul_kernel");
}
