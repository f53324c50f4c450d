/* The strided iterator shared by the CPU's elementwise kernels. */
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/cpu/cpu_internal.h"

void cpu_iter_init(cpu_iter *it, int nops, const cn_view *const *views) {
    const cn_view *out = views[0];
    it->nops = nops;
    it->numel = 1;
    for (int d = 0; d < out->ndim; d++) it->numel = out->shape[d] == 0 ? 0 : it->numel;
    for (int d = 0; it->numel && d < out->ndim; d++) it->numel *= out->shape[d];
    for (int k = 0; k < nops; k++) it->base[k] = (char *)views[k]->data;
    if (it->numel == 0) { /* nothing to visit; other sizes may be huge, so do not merge them */
        it->ndim = 1;
        it->shape[0] = 0;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
        return;
    }

    /* Drop size-1 dims, then merge dim d into d+1 when every operand steps through them as one. */
    int nd = 0;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] == 1) continue;
        it->shape[nd] = out->shape[d];
        for (int k = 0; k < nops; k++) {
            size_t es = cn_dtype_size(views[k]->dtype);
            it->strides[k][nd] = views[k]->strides[d] * (int64_t)es;
        }
        if (nd > 0) {
            int mergeable = 1;
            for (int k = 0; k < nops; k++)
                if (it->strides[k][nd - 1] != it->strides[k][nd] * it->shape[nd]) mergeable = 0;
            if (mergeable) {
                it->shape[nd - 1] *= it->shape[nd];
                for (int k = 0; k < nops; k++) it->strides[k][nd - 1] = it->strides[k][nd];
                continue;
            }
        }
        nd++;
    }
    if (nd == 0) { /* a scalar, or all dims of size 1 */
        it->shape[0] = 1;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
        nd = 1;
    }
    it->ndim = nd;
}

/* Visits linear indices [begin, end) as runs along the innermost dim. */
static void iter_range(const cpu_iter *it, int64_t begin, int64_t end, cpu_row_fn fn,
                       const void *ctx) {
    int nd = it->ndim;
    int64_t inner = it->shape[nd - 1];
    int64_t idx[CN_MAX_DIMS];
    int64_t rem = begin;
    for (int d = nd - 1; d >= 0; d--) {
        idx[d] = rem % it->shape[d];
        rem /= it->shape[d];
    }
    int64_t step[CPU_ITER_MAX_OPS];
    for (int k = 0; k < it->nops; k++) step[k] = it->strides[k][nd - 1];

    int64_t pos = begin;
    while (pos < end) {
        char *ptrs[CPU_ITER_MAX_OPS];
        for (int k = 0; k < it->nops; k++) {
            int64_t off = 0;
            for (int d = 0; d < nd; d++) off += idx[d] * it->strides[k][d];
            ptrs[k] = it->base[k] + off;
        }
        int64_t n = inner - idx[nd - 1];
        if (n > end - pos) n = end - pos;
        fn(ptrs, step, n, ctx);
        pos += n;
        /* advance the multi-index by n along the innermost dim, carrying outwards */
        idx[nd - 1] += n;
        for (int d = nd - 1; d > 0 && idx[d] >= it->shape[d]; d--) {
            idx[d] = 0;
            idx[d - 1]++;
        }
    }
}

void cpu_iter_run(const cpu_iter *it, cpu_row_fn fn, const void *ctx) {
    int64_t n = it->numel;
    if (n == 0) return;
    if (n < CPU_PARALLEL_GRAIN) {
        iter_range(it, 0, n, fn, ctx);
        return;
    }
#pragma omp parallel
    {
#ifdef _OPENMP
        int nt = omp_get_num_threads(), t = omp_get_thread_num();
#else
        int nt = 1, t = 0;
#endif
        /* contiguous slices, aligned to 16 elements so vector loops start on a boundary */
        int64_t chunk = ((n + nt - 1) / nt + 15) & ~(int64_t)15;
        int64_t b = (int64_t)t * chunk, e = b + chunk < n ? b + chunk : n;
        if (b < e) iter_range(it, b, e, fn, ctx);
    }
}
