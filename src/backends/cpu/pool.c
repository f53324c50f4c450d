/* CPU 2-D max and average pooling.
 *
 * x: [N, C, H, W] (any strides) -> out: [N, C, OH, OW] contiguous, with
 * out[n, c, oh, ow] = max or mean of x[n, c, oh*sh - ph + i, ow*sw - pw + j], 0 <= i < KH,
 * 0 <= j < KW. Max skips padded positions (they count as -inf); avg counts them as zeros and
 * divides by KH*KW (PyTorch's count_include_pad=True). One (n, c) plane per task.
 *
 * The common windows (2x2 and 3x3, stride 2) over a dense plane take a fast path: the windows
 * that lie wholly inside the image go through loops over a row of outputs that the compiler
 * vectorises; the windows that padding clips go through the general loop. Both compute each
 * output with the same operations in the same order, so the results are bit-identical. */

/* Nothing here reads floating-point exception flags; without this gcc keeps every float compare
 * of the max loops behind a branch and they do not vectorise (see reduce.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "core/backend_common.h"

typedef struct pool_geom {
    int64_t H, W, OH, OW;
    int64_t KH, KW, sh, sw, ph, pw;
    int64_t xs_h, xs_w;   /* element strides of x along H and W */
    int is_max;
    int fast_k;           /* 2 or 3: the fast path's window (square, stride 2, dense plane) */
    int64_t ow_lo, ow_hi; /* fast path: the outputs [ow_lo, ow_hi) whose windows no column clips */
} pool_geom;

/* The window of output index o along one axis, clipped to [0, size): [*lo, *hi). */
static void clip_window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size,
                        int64_t *lo, int64_t *hi) {
    int64_t start = o * stride - pad, end = start + k;
    *lo = start < 0 ? 0 : start;
    *hi = end > size ? size : end;
}

/* ---- the general loop ------------------------------------------------------------------------ */

/* Outputs [ow0, ow1) of output row oh; x: the plane's origin, out: the plane. The max keeps the
 * last NaN it meets, else the first of equal maxima; the sum runs from 0 in window order. */
#define DEFINE_POOL_ROW(T, name)                                                                \
    static void name(const pool_geom *g, const T *x, T *out, int64_t oh, int64_t ow0,           \
                     int64_t ow1) {                                                             \
        T area = (T)g->KH * (T)g->KW;                                                             \
        int64_t h0, h1;                                                                         \
        clip_window(oh, g->sh, g->ph, g->KH, g->H, &h0, &h1);                                   \
        for (int64_t ow = ow0; ow < ow1; ow++) {                                                \
            int64_t w0, w1;                                                                     \
            clip_window(ow, g->sw, g->pw, g->KW, g->W, &w0, &w1);                               \
            T acc = g->is_max ? (T)-INFINITY : (T)0;                                            \
            for (int64_t h = h0; h < h1; h++) {                                                 \
                const T *row = x + h * g->xs_h;                                                 \
                if (g->is_max) {                                                                \
                    for (int64_t w = w0; w < w1; w++) {                                         \
                        T v = row[w * g->xs_w];                                                 \
                        if (v > acc || isnan(v)) acc = v; /* NaN wins, as in PyTorch */         \
                    }                                                                           \
                } else {                                                                        \
                    for (int64_t w = w0; w < w1; w++) acc += row[w * g->xs_w];                  \
                }                                                                               \
            }                                                                                   \
            out[oh * g->OW + ow] = g->is_max ? acc : acc / area;                                \
        }                                                                                       \
    }
DEFINE_POOL_ROW(float, pool_row_f32)
DEFINE_POOL_ROW(double, pool_row_f64)
#undef DEFINE_POOL_ROW

/* ---- the fast path: whole windows, 2x2 and 3x3 at stride 2 ----------------------------------- *
 * One output row: out[i] for i in [0, n) pools rows r0, r1 (, r2) at columns 2i .. 2i+K-1 (the
 * row pointers start at the first window's first column). MAX_STEP is the general loop's update
 * without its branch; starting from the first value equals starting from -inf. */
#define MAX_STEP(acc, v) (acc) = (((v) > (acc)) | ((v) != (v))) ? (v) : (acc)


#define DEFINE_FAST_ROWS(T, SUF, LANES)                                                         \
    static inline T max2_at_##SUF(const T *r0, const T *r1, int64_t i) {                        \
        T acc = r0[2 * i];                                                                      \
        MAX_STEP(acc, r0[2 * i + 1]);                                                           \
        MAX_STEP(acc, r1[2 * i]);                                                               \
        MAX_STEP(acc, r1[2 * i + 1]);                                                           \
        return acc;                                                                             \
    }                                                                                           \
    static inline T max3_at_##SUF(const T *r0, const T *r1, const T *r2, int64_t i) {           \
        T acc = r0[2 * i];                                                                      \
        MAX_STEP(acc, r0[2 * i + 1]);                                                           \
        MAX_STEP(acc, r0[2 * i + 2]);                                                           \
        MAX_STEP(acc, r1[2 * i]);                                                               \
        MAX_STEP(acc, r1[2 * i + 1]);                                                           \
        MAX_STEP(acc, r1[2 * i + 2]);                                                           \
        MAX_STEP(acc, r2[2 * i]);                                                               \
        MAX_STEP(acc, r2[2 * i + 1]);                                                           \
        MAX_STEP(acc, r2[2 * i + 2]);                                                           \
        return acc;                                                                             \
    }                                                                                           \
    /* sums from 0, as the general loop (-0 becomes +0) */                                      \
    static inline T avg2_at_##SUF(const T *r0, const T *r1, int64_t i) {                        \
        T acc = (T)0 + r0[2 * i];                                                               \
        acc += r0[2 * i + 1];                                                                   \
        acc += r1[2 * i];                                                                       \
        acc += r1[2 * i + 1];                                                                   \
        return acc / (T)4;                                                                      \
    }                                                                                           \
    static inline T avg3_at_##SUF(const T *r0, const T *r1, const T *r2, int64_t i) {           \
        T acc = (T)0 + r0[2 * i];                                                               \
        acc += r0[2 * i + 1];                                                                   \
        acc += r0[2 * i + 2];                                                                   \
        acc += r1[2 * i];                                                                       \
        acc += r1[2 * i + 1];                                                                   \
        acc += r1[2 * i + 2];                                                                   \
        acc += r2[2 * i];                                                                       \
        acc += r2[2 * i + 1];                                                                   \
        acc += r2[2 * i + 2];                                                                   \
        return acc / (T)9;                                                                      \
    }                                                                                           \
    CPU_CLONES static void max2_row_##SUF(const T *restrict r0, const T *restrict r1,           \
                                          T *restrict out, int64_t n) {                         \
        ROW_LOOP(n, LANES, out[i] = max2_at_##SUF(r0, r1, i));                                  \
    }                                                                                           \
    CPU_CLONES static void max3_row_##SUF(const T *restrict r0, const T *restrict r1,           \
                                          const T *restrict r2, T *restrict out, int64_t n) {   \
        ROW_LOOP(n, LANES, out[i] = max3_at_##SUF(r0, r1, r2, i));                              \
    }                                                                                           \
    CPU_CLONES static void avg2_row_##SUF(const T *restrict r0, const T *restrict r1,           \
                                          T *restrict out, int64_t n) {                         \
        ROW_LOOP(n, LANES, out[i] = avg2_at_##SUF(r0, r1, i));                                  \
    }                                                                                           \
    CPU_CLONES static void avg3_row_##SUF(const T *restrict r0, const T *restrict r1,           \
                                          const T *restrict r2, T *restrict out, int64_t n) {   \
        ROW_LOOP(n, LANES, out[i] = avg3_at_##SUF(r0, r1, r2, i));                              \
    }
DEFINE_FAST_ROWS(float, f32, 4)
DEFINE_FAST_ROWS(double, f64, 2)
#undef DEFINE_FAST_ROWS
#undef MAX_STEP

/* ---- one plane ------------------------------------------------------------------------------- */

/* x: the plane's origin; out: the dense [OH, OW] plane. */
#define DEFINE_POOL_PLANE(T, SUF)                                                               \
    static void pool_plane_##SUF(const pool_geom *g, const T *x, T *out) {                      \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                \
            int64_t h0, h1;                                                                     \
            clip_window(oh, g->sh, g->ph, g->KH, g->H, &h0, &h1);                               \
            if (!g->fast_k || h1 - h0 < g->fast_k || g->ow_lo >= g->ow_hi) {                    \
                pool_row_##SUF(g, x, out, oh, 0, g->OW);                                        \
                continue;                                                                       \
            }                                                                                   \
            int64_t lo = g->ow_lo, n = g->ow_hi - lo;                                           \
            const T *r0 = x + h0 * g->W + 2 * lo - g->pw, *r1 = r0 + g->W;                      \
            T *o = out + oh * g->OW + lo;                                                       \
            if (lo > 0) pool_row_##SUF(g, x, out, oh, 0, lo);                                   \
            if (g->fast_k == 2 && g->is_max) max2_row_##SUF(r0, r1, o, n);                      \
            else if (g->fast_k == 2) avg2_row_##SUF(r0, r1, o, n);                              \
            else if (g->is_max) max3_row_##SUF(r0, r1, r1 + g->W, o, n);                        \
            else avg3_row_##SUF(r0, r1, r1 + g->W, o, n);                                       \
            if (g->ow_hi < g->OW) pool_row_##SUF(g, x, out, oh, g->ow_hi, g->OW);               \
        }                                                                                       \
    }
DEFINE_POOL_PLANE(float, f32)
DEFINE_POOL_PLANE(double, f64)
#undef DEFINE_POOL_PLANE

typedef struct pool_job {
    const pool_geom *g;
    const cn_view *xv, *ov;
    cn_dtype dt;
    size_t es;
    int64_t C, plane;
} pool_job;

/* (n, c) planes [begin, end). */
static void pool_planes(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const pool_job *j = ctx;
    const cn_view *xv = j->xv;
    for (int64_t p = begin; p < end; p++) {
        int64_t n = p / j->C, c = p % j->C;
        const char *x = (const char *)xv->data + (n * xv->strides[0] + c * xv->strides[1]) *
                                                     (int64_t)j->es;
        char *out = (char *)j->ov->data + (size_t)(p * j->plane) * j->es;
        if (j->dt == CN_F32)
            pool_plane_f32(j->g, (const float *)x, (float *)out);
        else
            pool_plane_f64(j->g, (const double *)x, (double *)out);
    }
}

/* The fast path's window size for g (2 or 3), or 0, and the outputs along W whose windows lie
 * wholly inside the image: ow*2 - pw >= 0 and ow*2 - pw + K <= W. */
static void choose_fast_path(pool_geom *g) {
    int square = g->KH == g->KW && (g->KH == 2 || g->KH == 3) && g->sh == 2 && g->sw == 2;
    int dense = g->xs_w == 1 && g->xs_h == g->W;
    g->fast_k = square && dense ? (int)g->KH : 0;
    g->ow_lo = (g->pw + 1) / 2;
    g->ow_hi = g->W + g->pw >= g->KW ? (g->W + g->pw - g->KW) / 2 + 1 : 0;
    if (g->ow_hi > g->OW) g->ow_hi = g->OW;
}

cn_status cpu_pool2d(const cn_kernel_args *args) {
    const cn_view *xv = &args->in[0], *ov = &args->out[0];
    cn_dtype dt = ov->dtype;
    const cn_conv_geometry *cg = cn__kernel_geometry("cpu", args);
    if (!cg) return CN_ERR_INVALID_ARG;
    if (ov->dtype != CN_F32 && ov->dtype != CN_F64) /* unreachable through the router (dtypes) */
        return cn__kernel_dtype_error("cpu", args->op, ov->dtype);
    pool_geom g = {
        .H = cg->h, .W = cg->w, .OH = cg->oh, .OW = cg->ow,
        .KH = cg->kh, .KW = cg->kw, .sh = cg->sh, .sw = cg->sw, .ph = cg->ph, .pw = cg->pw,
        .xs_h = xv->strides[2], .xs_w = xv->strides[3],
        .is_max = args->op == CN_OP_MAX_POOL2D,
    };
    choose_fast_path(&g);
    int64_t C = cg->c, planes = cg->n * C, plane = g.OH * g.OW;
    size_t es = cn_dtype_size(dt);
    double work = (double)planes * (double)plane * (double)g.KH * (double)g.KW;

    pool_job j = {.g = &g, .xv = xv, .ov = ov, .dt = dt, .es = es, .C = C, .plane = plane};
    int64_t chunks = work < 2.0 * CPU_PARALLEL_GRAIN ? 1 : cpu_chunks(planes, 1);
    cpu_parallel(planes, chunks, pool_planes, &j);
    return CN_OK;
}
