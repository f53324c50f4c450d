/* The strided iterator shared by the CPU's elementwise kernels. */
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"
#include "core/dtype.h"

/* The element count of the output's shape; *dense tells whether every operand is dense in
 * row-major order over it (each stride equals the count of the dims inside it; size-1 dims take
 * any stride). One pass, as it runs for every tiny op. */
int64_t cpu_count_dense(int nops, const cn_view *const *views, int *dense) {
    const cn_view *out = views[0];
    int64_t numel = 1;
    int ok = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        int64_t size = out->shape[d];
        if (size != 1)
            for (int k = 0; k < nops; k++) ok &= views[k]->strides[d] == numel;
        numel *= size;
    }
    *dense = ok;
    return numel;
}

void cpu_iter_init(cpu_iter *it, int nops, const cn_view *const *views) {
    const cn_view *out = views[0];
    it->nops = nops;
    it->numel = cn__view_numel(out);
    for (int k = 0; k < nops; k++) it->base[k] = (char *)views[k]->data;
    if (it->numel == 0) { /* nothing to visit; other sizes may be huge, so do not merge them */
        it->ndim = 1;
        it->shape[0] = 0;
        for (int k = 0; k < nops; k++) it->strides[k][0] = 0;
        return;
    }

    int64_t es[CPU_ITER_MAX_OPS];
    for (int k = 0; k < nops; k++) es[k] = (int64_t)cn__dtype_size(views[k]->dtype);
    int dense;
    cpu_count_dense(nops, views, &dense);
    if (dense) { /* the usual case: one run, nothing to merge */
        it->ndim = 1;
        it->shape[0] = it->numel;
        for (int k = 0; k < nops; k++) it->strides[k][0] = es[k];
        return;
    }
    /* drop size-1 dims and merge the dims every operand steps through as one */
    int nd = cn__merge_dims(nops, views, es, it->shape, it->strides);
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

typedef struct iter_job {
    const cpu_iter *it;
    cpu_row_fn fn;
    const void *ctx;
} iter_job;

/* Blocks [begin, end) of 16 elements, so vector loops start on a boundary. */
static void iter_blocks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const iter_job *j = ctx;
    int64_t n = j->it->numel, b = begin * 16, e = end * 16 < n ? end * 16 : n;
    if (b < e) iter_range(j->it, b, e, j->fn, j->ctx);
}

void cpu_iter_run(const cpu_iter *it, cpu_row_fn fn, const void *ctx) {
    int64_t n = it->numel;
    if (n == 0) return;
    int64_t chunks = cpu_chunks(n, CPU_PARALLEL_GRAIN);
    if (chunks == 1 && it->ndim == 1) { /* one run (dense or merged data): fn on it directly */
        char *ptrs[CPU_ITER_MAX_OPS];
        int64_t step[CPU_ITER_MAX_OPS];
        for (int k = 0; k < it->nops; k++) {
            ptrs[k] = it->base[k];
            step[k] = it->strides[k][0];
        }
        fn(ptrs, step, n, ctx);
        return;
    }
    if (chunks == 1) {
        iter_range(it, 0, n, fn, ctx);
        return;
    }
    iter_job j = {it, fn, ctx};
    cpu_parallel((n + 15) / 16, chunks, iter_blocks, &j);
}

/* cpu_map's general case, apart so that the shortcut's frame stays small. */
static __attribute__((noinline)) void map_iter(int nops, const cn_view *const *views,
                                               cpu_row_fn fn, const void *ctx) {
    cpu_iter it;
    cpu_iter_init(&it, nops, views);
    cpu_iter_run(&it, fn, ctx);
}

void cpu_map(int nops, const cn_view *const *views, cpu_row_fn fn, const void *ctx) {
    int dense;
    int64_t numel = cpu_count_dense(nops, views, &dense);
    if (dense && numel > 0 && numel < 2 * CPU_PARALLEL_GRAIN) {
        char *ptrs[CPU_ITER_MAX_OPS];
        int64_t step[CPU_ITER_MAX_OPS];
        for (int k = 0; k < nops; k++) {
            ptrs[k] = views[k]->data;
            step[k] = (int64_t)cn__dtype_size(views[k]->dtype);
        }
        fn(ptrs, step, numel, ctx);
        return;
    }
    map_iter(nops, views, fn, ctx);
}

/* ---- dense operands: a fixed part per core ---------------------------------------------------- */
#define DENSE_PARTS_PER_THREAD 2

typedef struct dense_job {
    int nops;
    char *base[CPU_ITER_MAX_OPS];
    int64_t step[CPU_ITER_MAX_OPS];
    int64_t n;
    cpu_row_fn fn;
    const void *ctx;
} dense_job;

/* Units [begin, end) of 16 elements. */
static void dense_part(void *vctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const dense_job *d = vctx;
    int64_t b = begin * 16, e = end * 16 < d->n ? end * 16 : d->n;
    if (b >= e) return;
    char *ptrs[CPU_ITER_MAX_OPS];
    for (int k = 0; k < d->nops; k++) ptrs[k] = d->base[k] + b * d->step[k];
    d->fn(ptrs, d->step, e - b, d->ctx);
}

void cpu_map_dense(int nops, const cn_view *const *views, int64_t n, int64_t split_from,
                   cpu_row_fn fn, const void *ctx) {
    dense_job d = {.nops = nops, .n = n, .fn = fn, .ctx = ctx};
    for (int k = 0; k < nops; k++) {
        d.base[k] = (char *)views[k]->data;
        d.step[k] = (int64_t)cn_dtype_size(views[k]->dtype);
    }
    int threads = n >= split_from ? cpu_threads() : 1;
    if (threads <= 1) {
        dense_part(&d, 0, 0, (n + 15) / 16);
        return;
    }
    cpu_parallel_affine((n + 15) / 16, (int64_t)threads * DENSE_PARTS_PER_THREAD, dense_part, &d);
}
