/* CPU layer_norm and rms_norm, forward and backward, fused: x (dense) is M rows of N elements
 * (its last k dims), each normalised on its own.
 *
 *   layer_norm: mean = sum(x) / N, var = sum((x - mean)^2) / N (two passes: no cancellation),
 *               rstd = 1 / sqrt(var + eps), y = (x - mean) rstd w + b
 *   rms_norm:   rstd = 1 / sqrt(sum(x^2) / N + eps), y = x rstd w         (mean = 0 below)
 *
 * Backward, with xhat = (x - mean) rstd and gw = g w (g without a weight), per row:
 *   dx = rstd (gw - sum(gw) / N - xhat sum(gw xhat) / N)      (rms_norm: without the sum(gw) term)
 * the two sums (a loop each over the row, which stays in cache: two accumulators in one loop
 * vectorise badly), then dx; and dw = sum over rows of g xhat, db = sum of g, which
 * each chunk of rows adds into partial rows of its own, combined in chunk order at the end (a
 * result depends on the number of chunks, never on timing).
 *
 * Sums run in the dtype (float for f32, as PyTorch's CPU kernels) over LANES independent partial
 * sums, so the loops vectorise without -ffast-math; the row statistics are finished in double.
 * Rows are split over the pool. Every view is dense (the router makes them so). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h" /* CPU_CLONES */
#include "core/alloc.h"
#include "core/backend_common.h"

typedef struct norm_job {
    int rms;
    int64_t n;              /* row length N */
    double eps;
    const void *x, *g, *w, *b, *mean_in, *rstd_in;
    void *y, *mean, *rstd, *dx;
    void *part;             /* backward: per chunk, [want_dw ? N : 0] + [want_db ? N : 0] */
    int want_dw, want_db;
} norm_job;

#define DEF_NORM(T, SUF, LANES)                                                                \
    /* sum(p) and sum((p - c)^2) over LANES partial sums */                                   \
    static inline double sum_##SUF(const T *p, int64_t n) {                                    \
        T acc[LANES] = {0};                                                                    \
        int64_t i = 0;                                                                         \
        for (; i + LANES <= n; i += LANES)                                                     \
            for (int j = 0; j < LANES; j++) acc[j] += p[i + j];                                \
        double s = 0;                                                                          \
        for (; i < n; i++) s += p[i];                                                          \
        for (int j = 0; j < LANES; j++) s += acc[j];                                           \
        return s;                                                                              \
    }                                                                                          \
    static inline double sumsq_##SUF(const T *p, int64_t n, T c) {                             \
        T acc[LANES] = {0};                                                                    \
        int64_t i = 0;                                                                         \
        for (; i + LANES <= n; i += LANES)                                                     \
            for (int j = 0; j < LANES; j++) {                                                  \
                T d = p[i + j] - c;                                                            \
                acc[j] += d * d;                                                               \
            }                                                                                  \
        double s = 0;                                                                          \
        for (; i < n; i++) s += (double)(p[i] - c) * (double)(p[i] - c);                       \
        for (int j = 0; j < LANES; j++) s += acc[j];                                           \
        return s;                                                                              \
    }                                                                                          \
    CPU_CLONES static void forward_##SUF(void *ctx, int64_t chunk, int64_t r0, int64_t r1) {   \
        (void)chunk;                                                                           \
        const norm_job *J = ctx;                                                               \
        const int64_t n = J->n;                                                                \
        const T *restrict w = J->w, *restrict b = J->b;                                        \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            const T *restrict x = (const T *)J->x + r * n;                                     \
            T *restrict y = (T *)J->y + r * n;                                                 \
            T m = 0;                                                                           \
            if (!J->rms) m = n ? (T)(sum_##SUF(x, n) / (double)n) : (T)0;                      \
            double var = n ? sumsq_##SUF(x, n, m) / (double)n : 0;                             \
            T rs = (T)(1.0 / sqrt(var + J->eps));                                              \
            if (!J->rms) ((T *)J->mean)[r] = m;                                                \
            ((T *)J->rstd)[r] = rs;                                                            \
            if (w && b)                                                                        \
                for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * rs * w[i] + b[i];          \
            else if (w)                                                                        \
                for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * rs * w[i];                 \
            else if (b)                                                                        \
                for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * rs + b[i];                 \
            else                                                                               \
                for (int64_t i = 0; i < n; i++) y[i] = (x[i] - m) * rs;                        \
        }                                                                                      \
    }                                                                                          \
    /* sum(g w) (w NULL: sum(g)) and sum(g w (x - c)), each over LANES partial sums */       \
    static inline double dot_##SUF(const T *restrict g, const T *restrict w, int64_t n) {      \
        T acc[LANES] = {0};                                                                    \
        int64_t i = 0;                                                                         \
        if (w)                                                                                 \
            for (; i + LANES <= n; i += LANES)                                                 \
                for (int j = 0; j < LANES; j++) acc[j] += g[i + j] * w[i + j];                 \
        else                                                                                   \
            for (; i + LANES <= n; i += LANES)                                                 \
                for (int j = 0; j < LANES; j++) acc[j] += g[i + j];                            \
        double s = 0;                                                                          \
        for (; i < n; i++) s += w ? (double)g[i] * w[i] : g[i];                                \
        for (int j = 0; j < LANES; j++) s += acc[j];                                           \
        return s;                                                                              \
    }                                                                                          \
    static inline double dot3_##SUF(const T *restrict g, const T *restrict w,                  \
                                    const T *restrict x, T c, int64_t n) {                     \
        T acc[LANES] = {0};                                                                    \
        int64_t i = 0;                                                                         \
        if (w)                                                                                 \
            for (; i + LANES <= n; i += LANES)                                                 \
                for (int j = 0; j < LANES; j++) acc[j] += g[i + j] * w[i + j] * (x[i + j] - c); \
        else                                                                                   \
            for (; i + LANES <= n; i += LANES)                                                 \
                for (int j = 0; j < LANES; j++) acc[j] += g[i + j] * (x[i + j] - c);           \
        double s = 0;                                                                          \
        for (; i < n; i++) s += (double)(w ? g[i] * w[i] : g[i]) * (double)(x[i] - c);         \
        for (int j = 0; j < LANES; j++) s += acc[j];                                           \
        return s;                                                                              \
    }                                                                                          \
    CPU_CLONES static void backward_##SUF(void *ctx, int64_t chunk, int64_t r0, int64_t r1) {  \
        const norm_job *J = ctx;                                                               \
        const int64_t n = J->n;                                                                \
        const T *restrict w = J->w;                                                            \
        T *restrict dw = J->want_dw ? (T *)J->part + chunk * n * (J->want_dw + J->want_db)     \
                                    : NULL;                                                    \
        T *restrict db = J->want_db ? (T *)J->part + chunk * n * (J->want_dw + J->want_db) +   \
                                          (J->want_dw ? n : 0)                                 \
                                    : NULL;                                                    \
        const T inv_n = n ? (T)(1.0 / (double)n) : (T)0;                                       \
        for (int64_t r = r0; r < r1; r++) {                                                    \
            const T *restrict x = (const T *)J->x + r * n;                                     \
            const T *restrict g = (const T *)J->g + r * n;                                     \
            T *restrict dx = (T *)J->dx + r * n;                                               \
            const T m = J->rms ? (T)0 : ((const T *)J->mean_in)[r];                            \
            const T rs = ((const T *)J->rstd_in)[r];                                           \
            /* sum(gw) / N and sum(gw xhat) / N */                                             \
            const T c1 = J->rms ? (T)0 : (T)dot_##SUF(g, w, n) * inv_n;                        \
            const T c2 = (T)dot3_##SUF(g, w, x, m, n) * rs * inv_n;                            \
            if (w)                                                                             \
                for (int64_t i = 0; i < n; i++) {                                              \
                    T xh = (x[i] - m) * rs;                                                    \
                    dx[i] = rs * (g[i] * w[i] - c1 - xh * c2);                                 \
                }                                                                              \
            else                                                                               \
                for (int64_t i = 0; i < n; i++) {                                              \
                    T xh = (x[i] - m) * rs;                                                    \
                    dx[i] = rs * (g[i] - c1 - xh * c2);                                        \
                }                                                                              \
            if (dw)                                                                            \
                for (int64_t i = 0; i < n; i++) dw[i] += g[i] * ((x[i] - m) * rs);             \
            if (db)                                                                            \
                for (int64_t i = 0; i < n; i++) db[i] += g[i];                                 \
        }                                                                                      \
    }                                                                                          \
    /* out[i] = the sum over chunks of part[c][off + i] (dw, db: n each) */                    \
    static void combine_##SUF(const norm_job *J, int64_t chunks, int64_t off, T *out) {        \
        const int64_t n = J->n, stride = n * (J->want_dw + J->want_db);                        \
        const T *p = (const T *)J->part + off;                                                 \
        memcpy(out, p, sizeof(T) * (size_t)n);                                                 \
        for (int64_t c = 1; c < chunks; c++)                                                   \
            for (int64_t i = 0; i < n; i++) out[i] += p[c * stride + i];                       \
    }
DEF_NORM(float, f32, 16)
DEF_NORM(double, f64, 8)
#undef DEF_NORM

/* The rows of x (view v, whose last k dims are a row) and the row length. */
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

/* How many chunks M rows of N elements deserve. */
static int64_t row_chunks(int64_t m, int64_t n) {
    int64_t grain = n > 0 ? CPU_PARALLEL_GRAIN / n : CPU_PARALLEL_GRAIN;
    int64_t c = cpu_chunks(m, grain > 0 ? grain : 1);
    return c < m ? c : (m > 0 ? m : 1);
}

/* layer_norm (rms = 0) and rms_norm: in = x[, w][, b]; out = y, [mean,] rstd. */
cn_status cpu_norm(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) return cn__kernel_dtype_error("cpu", a->op, dt);
    int rms = a->op == CN_OP_RMS_NORM, has_w = a->ints[1] != 0, has_b = !rms && a->ints[2] != 0;
    norm_job J = {.rms = rms, .eps = a->reals[0], .x = a->in[0].data,
                  .w = has_w ? a->in[1].data : NULL, .b = has_b ? a->in[1 + has_w].data : NULL,
                  .y = a->out[0].data, .mean = rms ? NULL : a->out[1].data,
                  .rstd = a->out[rms ? 1 : 2].data};
    int64_t m;
    rows_of(&a->in[0], a->ints[0], &m, &J.n);
    cpu_parallel(m, row_chunks(m, J.n), dt == CN_F32 ? forward_f32 : forward_f64, &J);
    return CN_OK;
}

/* layer_norm_backward: in = g, x, mean, rstd[, w]; ints = k, has_w, want_dw, want_db; out =
 * dx[, dw][, db]. rms_norm_backward: in = g, x, rstd[, w]; ints = k, has_w, want_dw; out =
 * dx[, dw]. */
cn_status cpu_norm_backward(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) return cn__kernel_dtype_error("cpu", a->op, dt);
    int rms = a->op == CN_OP_RMS_NORM_BACKWARD, n_stats = rms ? 1 : 2;
    int has_w = a->ints[1] != 0;
    norm_job J = {.rms = rms, .g = a->in[0].data, .x = a->in[1].data,
                  .mean_in = rms ? NULL : a->in[2].data, .rstd_in = a->in[1 + n_stats].data,
                  .w = has_w ? a->in[2 + n_stats].data : NULL, .dx = a->out[0].data,
                  .want_dw = a->ints[2] != 0, .want_db = !rms && a->ints[3] != 0};
    int64_t m;
    rows_of(&a->in[1], a->ints[0], &m, &J.n);
    size_t es = cn_dtype_size(dt);
    int n_red = J.want_dw + J.want_db;
    if (m == 0) { /* no rows: dw and db are sums of nothing */
        for (int i = 1; i <= n_red; i++) memset(a->out[i].data, 0, es * (size_t)J.n);
        return CN_OK;
    }
    int64_t chunks = row_chunks(m, J.n);
    if (n_red) {
        /* sizes: x's numel fits, and chunks <= rows, so chunks * N * 2 elements do */
        J.part = cn__calloc(cn_op_name(a->op), (size_t)(chunks * J.n * n_red) + 1, es);
        if (!J.part) return CN_ERR_OUT_OF_MEMORY;
    }
    cpu_parallel(m, chunks, dt == CN_F32 ? backward_f32 : backward_f64, &J);
    for (int i = 0; i < n_red; i++) {
        int64_t off = i == 0 && J.want_dw ? 0 : (J.want_dw ? J.n : 0);
        if (dt == CN_F32)
            combine_f32(&J, chunks, off, a->out[1 + i].data);
        else
            combine_f64(&J, chunks, off, a->out[1 + i].data);
    }
    cn__free(J.part);
    return CN_OK;
}
