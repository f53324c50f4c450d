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
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"

/* OpenBLAS runs a GEMM with M*N*K at or below this on the calling thread alone, so such calls
 * may run side by side from our threads (see matmul.c). */
#define BLAS_SERIAL_MNK 262144.0

/* Below this many multiply-adds in total the images run on one thread. */
#define CONV_PARALLEL_MACS 65536.0

typedef struct conv_geom {
    int64_t N, C, H, W;         /* input */
    int64_t O, KH, KW;          /* weights */
    int64_t OH, OW, P;          /* output plane, P = OH * OW */
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t Cg, Og, K;          /* per group: in channels, out channels, K = Cg*KH*KW */
} conv_geom;

/* ---- im2col --------------------------------------------------------------------------------- */

/* The output columns ow whose input column ow*sw - pw + kw*dw lies in [0, W): [*lo, *hi). */
static void valid_cols(const conv_geom *g, int64_t kw, int64_t *lo, int64_t *hi) {
    int64_t off = g->pw - kw * g->dw; /* need ow*sw >= off and ow*sw <= W-1 + off */
    int64_t l = off <= 0 ? 0 : (off + g->sw - 1) / g->sw;
    int64_t h = g->W - 1 + off < 0 ? 0 : (g->W - 1 + off) / g->sw + 1;
    if (h > g->OW) h = g->OW;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* col[(c*KH + kh)*KW + kw, oh*OW + ow] = x[c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw], zero
 * outside the image. x points at channel 0 of the group in one image; xs = its C, H, W strides. */
#define DEFINE_IM2COL(T, name)                                                                 \
    static void name(const conv_geom *g, const T *x, const int64_t *xs, T *col) {              \
        T *dst = col;                                                                          \
        for (int64_t c = 0; c < g->Cg; c++) {                                                  \
            const T *plane = x + c * xs[0];                                                    \
            for (int64_t kh = 0; kh < g->KH; kh++) {                                           \
                for (int64_t kw = 0; kw < g->KW; kw++, dst += g->P) {                          \
                    int64_t lo, hi;                                                            \
                    valid_cols(g, kw, &lo, &hi);                                               \
                    int64_t iw0 = lo * g->sw - g->pw + kw * g->dw;                             \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                   \
                        T *d = dst + oh * g->OW;                                               \
                        int64_t ih = oh * g->sh - g->ph + kh * g->dh;                          \
                        if (ih < 0 || ih >= g->H) {                                            \
                            memset(d, 0, sizeof(T) * (size_t)g->OW);                           \
                            continue;                                                          \
                        }                                                                      \
                        const T *s = plane + ih * xs[1] + iw0 * xs[2];                         \
                        int64_t step = g->sw * xs[2];                                          \
                        for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;                         \
                        if (step == 1)                                                         \
                            memcpy(d + lo, s, sizeof(T) * (size_t)(hi - lo));                  \
                        else                                                                   \
                            for (int64_t ow = lo; ow < hi; ow++) d[ow] = s[(ow - lo) * step];  \
                        for (int64_t ow = hi; ow < g->OW; ow++) d[ow] = 0;                     \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_IM2COL(float, im2col_f32)
DEFINE_IM2COL(double, im2col_f64)
#undef DEFINE_IM2COL

/* ---- weights and bias ----------------------------------------------------------------------- */

/* Non-zero when dims [from, ndim) of v are dense row-major (size-1 dims ignored). */
static int dense_from(const cn_view *v, int from) {
    int64_t want = 1;
    for (int d = v->ndim - 1; d >= from; d--) {
        if (v->shape[d] != 1 && v->strides[d] != want) return 0;
        want *= v->shape[d];
    }
    return 1;
}

/* Copies w [O, Cg, KH, KW] (any strides) into dense [O, Cg*KH*KW]. */
static void pack_weights(const cn_view *w, void *dst) {
    const int64_t *n = w->shape, *s = w->strides;
    size_t es = cn_dtype_size(w->dtype);
    char *d = (char *)dst;
    for (int64_t o = 0; o < n[0]; o++)
        for (int64_t c = 0; c < n[1]; c++)
            for (int64_t kh = 0; kh < n[2]; kh++)
                for (int64_t kw = 0; kw < n[3]; kw++, d += es)
                    memcpy(d, (const char *)w->data +
                                  (o * s[0] + c * s[1] + kh * s[2] + kw * s[3]) * (int64_t)es,
                           es);
}

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

    conv_geom g = {
        .N = xv->shape[0], .C = xv->shape[1], .H = xv->shape[2], .W = xv->shape[3],
        .O = wv->shape[0], .KH = wv->shape[2], .KW = wv->shape[3],
        .OH = ov->shape[2], .OW = ov->shape[3],
        .sh = args->ints[0], .sw = args->ints[1], .ph = args->ints[2], .pw = args->ints[3],
        .dh = args->ints[4], .dw = args->ints[5], .groups = args->ints[6],
    };
    g.P = g.OH * g.OW;
    g.Cg = wv->shape[1];
    g.Og = g.O / g.groups;
    g.K = g.Cg * g.KH * g.KW;
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
    int w_direct = dense_from(wv, 1) && (g.O == 1 || (wv->strides[0] >= g.K &&
                                                       wv->strides[0] <= INT_MAX));
    int64_t w_ld = w_direct && g.O > 1 ? wv->strides[0] : g.K;

    /* A 1x1, stride-1, unpadded convolution of dense planes: x itself is the column matrix,
     * [Cg, P] with leading dim xs[1]. */
    int direct_cols = g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 &&
                      g.pw == 0 && dense_from(xv, 2) &&
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
    size_t w_bytes = w_direct ? 0 : (size_t)(g.O * g.K) * es;
    size_t col_bytes = direct_cols ? 0 : (size_t)(g.K * g.P) * es;
    char *scratch = NULL;
    if (w_bytes + col_bytes) {
        scratch = cn__malloc("conv2d", w_bytes + col_bytes * (size_t)nthreads);
        if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    }
    const char *wdata = (const char *)wv->data;
    if (!w_direct) {
        pack_weights(wv, scratch);
        wdata = scratch;
    }
    const int64_t xs[3] = {xv->strides[1], xv->strides[2], xv->strides[3]};

#pragma omp parallel for num_threads(nthreads) schedule(static) if (nthreads > 1)
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
                im2col_f32(&g, (const float *)x, xs, (float *)mine);
            else
                im2col_f64(&g, (const double *)x, xs, (double *)mine);
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
