/* CPU 2-D convolution: im2col + GEMM through OpenBLAS.
 *
 * x: [N, C, H, W] (any strides), w: [O, C/g, KH, KW] (any strides), b: [O] or absent
 * -> out: [N, O, OH, OW] contiguous.
 * For each image n and group g the receptive fields are unrolled into a column matrix
 * col: [C/g*KH*KW, OH*OW], and out[n, group g] = w_g [O/g, C/g*KH*KW] @ col, plus the bias.
 * A 1x1 convolution with unit stride and no padding reads x in place as the column matrix. */
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/im2col.h"
#include "core/alloc.h"

/* OpenBLAS runs a GEMM with M*N*K at or below this on the calling thread alone, so such calls
 * may run side by side from our threads (see matmul.c). */
#define BLAS_SERIAL_MNK 262144.0

/* Below this many multiply-adds in total the images run on one thread. */
#define CONV_PARALLEL_MACS 65536.0

/* Per-thread scratch sizes are rounded to cache lines so that threads never share one. */
static size_t round_line(size_t n) { return (n + 63) & ~(size_t)63; }

/* out rows [Og, P] += b[o] (or = b[o] when k_empty, the GEMM having written nothing). */
static void add_bias(cn_dtype dt, void *out, const cn_view *b, int64_t o0, int64_t Og,
                     int64_t P, int k_empty) {
    for (int64_t o = 0; o < Og; o++) {
        if (dt == CN_F32) {
            float *row = (float *)out + o * P;
            float v = b ? ((const float *)b->data)[(o0 + o) * b->strides[0]] : 0.0f;
            for (int64_t p = 0; p < P; p++) row[p] = k_empty ? v : row[p] + v;
        } else {
            double *row = (double *)out + o * P;
            double v = b ? ((const double *)b->data)[(o0 + o) * b->strides[0]] : 0.0;
            for (int64_t p = 0; p < P; p++) row[p] = k_empty ? v : row[p] + v;
        }
    }
}

/* ---- the kernel ----------------------------------------------------------------------------- */

cn_status cpu_conv2d(const cn_kernel_args *args) {
    const cn_view *xv = &args->in[0], *wv = &args->in[1], *ov = &args->out[0];
    const cn_view *bv = args->n_in > 2 ? &args->in[2] : NULL;
    cn_dtype dt = ov->dtype;
    size_t es = cn_dtype_size(dt);
    if (dt != CN_F32 && dt != CN_F64)
        return cn_set_error(CN_ERR_DTYPE, "conv2d", "the CPU kernel takes f32 or f64, not %s",
                            cn_dtype_name(dt));

    cpu_conv_geom g;
    cn_status st = cpu_conv_geom_init(&g, "conv2d", xv->shape, wv->shape, ov->shape, args->ints);
    if (st != CN_OK) return st;
    int64_t tasks = g.N * g.groups;
    if (tasks == 0 || g.Og == 0 || g.P == 0) return CN_OK;
    if (g.K == 0) { /* no input channels: the output is the bias */
        for (int64_t n = 0; n < g.N; n++)
            add_bias(dt, (char *)ov->data + (size_t)(n * g.O * g.P) * es, bv, 0, g.O, g.P, 1);
        return CN_OK;
    }
    if (g.Og > INT_MAX || g.P > INT_MAX || g.K > INT_MAX)
        return cn_set_error(CN_ERR_BACKEND, "conv2d",
                            "the per-group GEMM (%lld x %lld x %lld) exceeds BLAS's int range; "
                            "split the batch or the channels",
                            (long long)g.Og, (long long)g.K, (long long)g.P);

    /* Weights as [O, K] with leading dim w_ld: in place when each filter is dense. */
    int64_t w_ld;
    int w_direct = cpu_weights_direct(wv, g.K, &w_ld);

    /* A 1x1, stride-1, unpadded convolution of dense planes: x itself is the column matrix,
     * [Cg, P] with leading dim xs[1]. */
    int direct_cols = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                      g.pw == 0 && cpu_dense_from(xv, 2) &&
                      (g.Cg == 1 || (xv->strides[1] >= g.P && xv->strides[1] <= INT_MAX));
    int64_t col_ld = direct_cols && g.Cg > 1 ? xv->strides[1] : g.P;

    /* Small GEMMs run side by side on our threads, one (image, group) each; big ones one after
     * another on OpenBLAS's threads. */
    double mnk = (double)g.Og * (double)g.P * (double)g.K;
    int nthreads = 1;
#ifdef _OPENMP
    if (tasks > 1 && mnk <= BLAS_SERIAL_MNK && mnk * (double)tasks >= CONV_PARALLEL_MACS) {
        nthreads = omp_get_max_threads();
        if (nthreads > tasks) nthreads = (int)tasks;
    }
#endif
    size_t w_bytes = w_direct ? 0 : round_line((size_t)(g.O * g.K) * es);
    size_t col_bytes = direct_cols ? 0 : round_line((size_t)(g.K * g.P) * es);
    char *scratch = NULL;
    if (w_bytes + col_bytes) {
        scratch = cn__malloc("conv2d", w_bytes + col_bytes * (size_t)nthreads);
        if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    }
    const char *wdata = (const char *)wv->data;
    if (!w_direct) {
        cpu_pack_weights(wv, scratch);
        wdata = scratch;
    }
    const int64_t xs[3] = {xv->strides[1], xv->strides[2], xv->strides[3]};

#pragma omp parallel for num_threads(nthreads) schedule(dynamic) if (nthreads > 1)
    for (int64_t t = 0; t < tasks; t++) {
#ifdef _OPENMP
        int tid = omp_get_thread_num();
#else
        int tid = 0;
#endif
        int64_t n = t / g.groups, grp = t % g.groups;
        const char *x = (const char *)xv->data +
                        (n * xv->strides[0] + grp * g.Cg * xv->strides[1]) * (int64_t)es;
        const void *col = x;
        if (!direct_cols) {
            char *mine = scratch + w_bytes + col_bytes * (size_t)tid;
            if (dt == CN_F32)
                cpu_im2col_f32(&g, (const float *)x, xs, (float *)mine);
            else
                cpu_im2col_f64(&g, (const double *)x, xs, (double *)mine);
            col = mine;
        }
        const char *wg = wdata + (size_t)(grp * g.Og * w_ld) * es;
        char *out = (char *)ov->data + (size_t)((n * g.O + grp * g.Og) * g.P) * es;
        if (dt == CN_F32)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.Og, (int)g.P, (int)g.K,
                        1.0f, (const float *)wg, (int)w_ld, (const float *)col, (int)col_ld, 0.0f,
                        (float *)out, (int)g.P);
        else
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g.Og, (int)g.P, (int)g.K,
                        1.0, (const double *)wg, (int)w_ld, (const double *)col, (int)col_ld, 0.0,
                        (double *)out, (int)g.P);
        if (bv) add_bias(dt, out, bv, grp * g.Og, g.Og, g.P, 0);
    }
    cn__free(scratch);
    return CN_OK;
}
