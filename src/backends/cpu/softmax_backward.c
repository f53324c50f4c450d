/* CPU softmax_backward: the gradient of softmax or log_softmax along a dim in one pass per row
 * (two reads of it), from the output gradient g and the forward's output y:
 *     softmax:      gx = y * (g - sum(g * y))
 *     log_softmax:  gx = g - exp(y) * sum(g)
 * instead of the composed formulas' four or five ops and their temporaries. g and y: any
 * strides, one shape; gx: contiguous. Sums in double. Rows are split over the pool. */
#include <math.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

typedef struct sb_job {
    const cn_view *g, *y, *out;
    int dim, log, nd;
    int64_t n;        /* the dim's size */
    int64_t inner;    /* elements after the dim (out is contiguous) */
} sb_job;

/* The element offsets of row r (all indices but the dim's) in a view of the job's shape. */
static int64_t row_offset(const sb_job *j, const cn_view *v, int64_t r) {
    int64_t off = 0;
    for (int d = j->nd - 1; d >= 0; d--) {
        if (d == j->dim) continue;
        int64_t size = v->shape[d];
        off += (r % size) * v->strides[d];
        r /= size;
    }
    return off;
}

#define DEFINE_ROWS(T, SUF)                                                                    \
    static void rows_##SUF(const sb_job *j, int64_t begin, int64_t end) {                      \
        const int64_t n = j->n, gs = j->g->strides[j->dim], ys = j->y->strides[j->dim];        \
        for (int64_t r = begin; r < end; r++) {                                                \
            const T *g = (const T *)j->g->data + row_offset(j, j->g, r);                       \
            const T *y = (const T *)j->y->data + row_offset(j, j->y, r);                       \
            T *o = (T *)j->out->data + (r / j->inner) * n * j->inner + r % j->inner;           \
            const int64_t os = j->inner;                                                       \
            double sum = 0;                                                                    \
            if (j->log) {                                                                      \
                for (int64_t i = 0; i < n; i++) sum += (double)g[i * gs];                      \
                T s = (T)sum;                                                                  \
                for (int64_t i = 0; i < n; i++) o[i * os] = g[i * gs] - (T)exp(y[i * ys]) * s; \
            } else {                                                                           \
                for (int64_t i = 0; i < n; i++) sum += (double)g[i * gs] * (double)y[i * ys];  \
                T s = (T)sum;                                                                  \
                for (int64_t i = 0; i < n; i++) o[i * os] = y[i * ys] * (g[i * gs] - s);       \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_ROWS(float, f32)
DEFINE_ROWS(double, f64)
#undef DEFINE_ROWS

static void sb_rows(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const sb_job *j = ctx;
    if (j->out->dtype == CN_F32)
        rows_f32(j, begin, end);
    else
        rows_f64(j, begin, end);
}

cn_status cpu_softmax_backward(const cn_kernel_args *a) {
    const cn_view *g = &a->in[0], *y = &a->in[1], *out = &a->out[0];
    if (out->dtype != CN_F32 && out->dtype != CN_F64) /* unreachable: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", a->op, out->dtype);
    int nd = out->ndim, dim = nd > 0 ? (int)a->ints[0] : 0;
    if (nd > 0 && (dim < 0 || dim >= nd))
        return cn_set_error(CN_ERR_INVALID_ARG, "softmax_backward",
                            "dim %d is out of range for %d dims", dim, nd);
    sb_job j = {.g = g, .y = y, .out = out, .dim = dim, .log = a->ints[1] != 0, .nd = nd,
                .n = nd > 0 ? out->shape[dim] : 1, .inner = 1};
    int64_t numel = 1;
    for (int d = 0; d < nd; d++) numel *= out->shape[d];
    for (int d = dim + 1; d < nd; d++) j.inner *= out->shape[d];
    if (numel == 0) return CN_OK;
    int64_t rows = numel / j.n;
    int64_t chunks = numel < 2 * CPU_PARALLEL_GRAIN ? 1 : cpu_chunks(rows, 1);
    cpu_parallel(rows, chunks, sb_rows, &j);
    return CN_OK;
}
