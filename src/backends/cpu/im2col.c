/* im2col, col2im and weight packing for the CPU convolution kernels (see im2col.h). */

/* The zeroing loops here are short (a column or two at an edge, a row of 14 or 28): kept as
 * loops, not turned into memset calls, which cost more per call than the stores (a CNN's
 * im2col made thousands of 4-byte memset calls per image). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-tree-loop-distribute-patterns")
#endif

#include "backends/cpu/im2col.h"

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

#include <limits.h>
#include <string.h>

/* ---- geometry ------------------------------------------------------------------------------- */

cn_status cpu_conv_geom_init(cpu_conv_geom *g, const cn_kernel_args *args) {
    const cn_conv_geometry *c = cn__kernel_geometry("cpu", args);
    if (!c) return CN_ERR_INVALID_ARG;
    cn_dtype dt = args->out[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", args->op, dt);
    *g = (cpu_conv_geom){
        .N = c->n, .C = c->c, .H = c->h, .W = c->w,
        .O = c->o, .KH = c->kh, .KW = c->kw,
        .OH = c->oh, .OW = c->ow,
        .sh = c->sh, .sw = c->sw, .ph = c->ph, .pw = c->pw,
        .dh = c->dh, .dw = c->dw, .groups = c->groups,
        .Cg = c->c / c->groups, .Og = c->o / c->groups,
    };
    /* sizes of empty tensors may be huge: the products saturate, and are then never used (the
     * router runs no kernel for an empty output, and the kernels stop at an empty operand) */
    if (__builtin_mul_overflow(g->Cg, g->KH, &g->K) || __builtin_mul_overflow(g->K, g->KW, &g->K))
        g->K = INT64_MAX;
    if (__builtin_mul_overflow(g->OH, g->OW, &g->P)) g->P = INT64_MAX;
    return CN_OK;
}

/* The output columns ow whose input column ow*sw - pw + kw*dw lies in [0, W): [*lo, *hi). */
static void valid_cols(const cpu_conv_geom *g, int64_t kw, int64_t *lo, int64_t *hi) {
    int64_t off = g->pw - kw * g->dw; /* need ow*sw >= off and ow*sw <= W-1 + off */
    /* ceilings and sums written so that a stride or padding near INT64_MAX cannot overflow */
    int64_t l = off <= 0 ? 0 : (off - 1) / g->sw + 1;
    int64_t last, h;
    if (__builtin_add_overflow(g->W - 1, off, &last)) h = g->OW;
    else h = last < 0 ? 0 : last / g->sw + 1;
    if (h > g->OW) h = g->OW;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* ---- im2col --------------------------------------------------------------------------------- */

/* Unit stride and dilation, output rows as wide as the input's (padding (KW-1)/2 on each side:
 * "same" convolutions) over dense rows: each column row is then the plane shifted by one offset,
 * so it is one copy of the in-image rows plus zeros at the clipped edges, instead of a copy per
 * output row (which, for rows of 14 or 28 values, costs more in calls than in bytes). */
static int im2col_shifted(const cpu_conv_geom *g, const int64_t *xs) {
    return g->sh == 1 && g->sw == 1 && g->dh == 1 && g->dw == 1 && g->OW == g->W &&
           xs[2] == 1 && xs[1] == g->W;
}

#define DEFINE_IM2COL_SHIFTED(T, name)                                                         \
    static void name(const cpu_conv_geom *g, const T *x, int64_t cs, T *col) {                 \
        const int64_t W = g->W, HW = g->H * g->W;                                              \
        T *dst = col;                                                                          \
        for (int64_t c = 0; c < g->Cg; c++) {                                                  \
            const T *plane = x + c * cs;                                                       \
            for (int64_t kh = 0; kh < g->KH; kh++) {                                           \
                /* output rows whose input row oh - ph + kh lies in the image */               \
                int64_t oh0 = g->ph - kh > 0 ? g->ph - kh : 0;                                 \
                int64_t oh1 = g->H + g->ph - kh < g->OH ? g->H + g->ph - kh : g->OH;           \
                if (oh0 > g->OH) oh0 = g->OH;                                                  \
                if (oh1 < oh0) oh1 = oh0;                                                      \
                for (int64_t kw = 0; kw < g->KW; kw++, dst += g->P) {                          \
                    int64_t lo, hi;                                                            \
                    valid_cols(g, kw, &lo, &hi);                                               \
                    int64_t r1 = lo == hi ? oh0 : oh1; /* no column in the image: all zero */  \
                    /* (most column rows need neither: no call for nothing) */                 \
                    for (int64_t i = 0; i < oh0 * W; i++) dst[i] = 0;                          \
                    for (int64_t i = r1 * W; i < g->P; i++) dst[i] = 0;                        \
                    if (oh0 == r1) continue;                                                   \
                    /* dst[i] = plane[i + off] over the in-image rows, clipped to the plane;    \
                     * what the clipping skips and what wraps across rows are the edge         \
                     * columns [0, lo) and [hi, W), zeroed after */                            \
                    int64_t off = (kh - g->ph) * W + (kw - g->pw);                             \
                    int64_t a = oh0 * W, b = r1 * W;                                           \
                    if (a + off < 0) a = -off;                                                 \
                    if (b + off > HW) b = HW - off;                                            \
                    if (b > a) memcpy(dst + a, plane + a + off, sizeof(T) * (size_t)(b - a));  \
                    for (int64_t oh = oh0; oh < r1; oh++) {                                    \
                        T *d = dst + oh * W;                                                   \
                        for (int64_t ow = 0; ow < lo; ow++) d[ow] = 0;                         \
                        for (int64_t ow = hi; ow < W; ow++) d[ow] = 0;                         \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_IM2COL_SHIFTED(float, im2col_shifted_f32)
DEFINE_IM2COL_SHIFTED(double, im2col_shifted_f64)
#undef DEFINE_IM2COL_SHIFTED

/* cpu_im2col_shifted512 where it serves (f32 only) */
static int im2col_fast_f32(const cpu_conv_geom *g, const float *x, int64_t cs, float *col) {
    if (!cpu_im2col512(g)) return 0;
    cpu_im2col_shifted512(g, x, cs, col);
    return 1;
}
static int im2col_fast_f64(const cpu_conv_geom *g, const double *x, int64_t cs, double *col) {
    (void)g, (void)x, (void)cs, (void)col;
    return 0;
}

#define DEFINE_IM2COL(T, name, shifted, fast)                                                  \
    void name(const cpu_conv_geom *g, const T *x, const int64_t *xs, T *col) {                 \
        if (im2col_shifted(g, xs)) {                                                           \
            if (fast(g, x, xs[0], col)) return;                                                \
            shifted(g, x, xs[0], col);                                                         \
            return;                                                                            \
        }                                                                                      \
        T *dst = col;                                                                          \
        for (int64_t c = 0; c < g->Cg; c++) {                                                  \
            const T *plane = x + c * xs[0];                                                    \
            for (int64_t kh = 0; kh < g->KH; kh++) {                                           \
                for (int64_t kw = 0; kw < g->KW; kw++, dst += g->P) {                          \
                    int64_t lo, hi;                                                            \
                    valid_cols(g, kw, &lo, &hi);                                               \
                    int64_t iw0 = lo * g->sw - g->pw + kw * g->dw;                             \
                    int64_t step; /* overflows only when sw > W: one column at most */         \
                    if (__builtin_mul_overflow(g->sw, xs[2], &step)) step = 0;                 \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                   \
                        T *d = dst + oh * g->OW;                                               \
                        int64_t ih = oh * g->sh - g->ph + kh * g->dh;                          \
                        if (ih < 0 || ih >= g->H || lo == hi) {                                \
                            memset(d, 0, sizeof(T) * (size_t)g->OW);                           \
                            continue;                                                          \
                        }                                                                      \
                        const T *s = plane + ih * xs[1] + iw0 * xs[2];                         \
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
DEFINE_IM2COL(float, cpu_im2col_f32, im2col_shifted_f32, im2col_fast_f32)
DEFINE_IM2COL(double, cpu_im2col_f64, im2col_shifted_f64, im2col_fast_f64)
#undef DEFINE_IM2COL

/* ---- col2im --------------------------------------------------------------------------------- */

/* The shifted form of im2col's "same"-width case, backwards: each column row's in-image rows
 * add to the plane shifted by one offset, as one run; the entries that fall in the padding (the
 * edge columns, which the run would wrap into the neighbouring rows) are zeroed in col first,
 * so they add +0 (which leaves every value as it was, but a -0 sum becomes +0). */
#define DEFINE_COL2IM_SHIFTED(T, name)                                                         \
    static void name(const cpu_conv_geom *g, T *col, T *x) {                                   \
        const int64_t W = g->W, HW = g->H * g->W;                                              \
        T *src = col;                                                                          \
        for (int64_t c = 0; c < g->Cg; c++) {                                                  \
            T *plane = x + c * HW;                                                             \
            for (int64_t kh = 0; kh < g->KH; kh++) {                                           \
                int64_t oh0 = g->ph - kh > 0 ? g->ph - kh : 0;                                 \
                int64_t oh1 = g->H + g->ph - kh < g->OH ? g->H + g->ph - kh : g->OH;           \
                if (oh0 > g->OH) oh0 = g->OH;                                                  \
                if (oh1 < oh0) oh1 = oh0;                                                      \
                for (int64_t kw = 0; kw < g->KW; kw++, src += g->P) {                          \
                    int64_t lo, hi;                                                            \
                    valid_cols(g, kw, &lo, &hi);                                               \
                    if (lo == hi || oh0 == oh1) continue;                                      \
                    for (int64_t oh = oh0; oh < oh1; oh++) {                                   \
                        T *r = src + oh * W;                                                   \
                        for (int64_t ow = 0; ow < lo; ow++) r[ow] = 0;                         \
                        for (int64_t ow = hi; ow < W; ow++) r[ow] = 0;                         \
                    }                                                                          \
                    int64_t off = (kh - g->ph) * W + (kw - g->pw);                             \
                    int64_t a = oh0 * W, b = oh1 * W;                                          \
                    if (a + off < 0) a = -off;                                                 \
                    if (b + off > HW) b = HW - off;                                            \
                    T *d = plane + off;                                                        \
                    for (int64_t i = a; i < b; i++) d[i] += src[i];                            \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_COL2IM_SHIFTED(float, col2im_shifted_f32)
DEFINE_COL2IM_SHIFTED(double, col2im_shifted_f64)
#undef DEFINE_COL2IM_SHIFTED

/* Walks the column matrix in the same order as im2col and adds each in-image entry back into its
 * source pixel; padded entries are dropped. */
#define DEFINE_COL2IM(T, name, shifted)                                                        \
    void name(const cpu_conv_geom *g, T *col, T *x) {                                          \
        const int64_t dense[3] = {g->H * g->W, g->W, 1};                                       \
        if (im2col_shifted(g, dense)) {                                                        \
            shifted(g, col, x);                                                                \
            return;                                                                            \
        }                                                                                      \
        const T *src = col;                                                                    \
        for (int64_t c = 0; c < g->Cg; c++) {                                                  \
            T *plane = x + c * g->H * g->W;                                                    \
            for (int64_t kh = 0; kh < g->KH; kh++) {                                           \
                for (int64_t kw = 0; kw < g->KW; kw++, src += g->P) {                          \
                    int64_t lo, hi;                                                            \
                    valid_cols(g, kw, &lo, &hi);                                               \
                    if (lo == hi) continue;                                                    \
                    int64_t iw0 = lo * g->sw - g->pw + kw * g->dw;                             \
                    for (int64_t oh = 0; oh < g->OH; oh++) {                                   \
                        int64_t ih = oh * g->sh - g->ph + kh * g->dh;                          \
                        if (ih < 0 || ih >= g->H) continue;                                    \
                        const T *s = src + oh * g->OW + lo;                                    \
                        T *d = plane + ih * g->W + iw0;                                        \
                        int64_t n = hi - lo;                                                   \
                        if (g->sw == 1)                                                        \
                            for (int64_t i = 0; i < n; i++) d[i] += s[i];                      \
                        else                                                                   \
                            for (int64_t i = 0; i < n; i++) d[i * g->sw] += s[i];              \
                    }                                                                          \
                }                                                                              \
            }                                                                                  \
        }                                                                                      \
    }
DEFINE_COL2IM(float, cpu_col2im_f32, col2im_shifted_f32)
DEFINE_COL2IM(double, cpu_col2im_f64, col2im_shifted_f64)
#undef DEFINE_COL2IM

/* ---- work sharing --------------------------------------------------------------------------- */

/* A GEMM with at most this many multiply-adds is one call (cpu_gemm splits bigger ones over the
 * threads), so tasks of such GEMMs always run side by side (see matmul.c). */
#define BLAS_SERIAL_MNK 2097152.0

/* Below this many multiply-adds in total the images run on one thread. */
#define CONV_PARALLEL_MACS 65536.0

/* Chunks per thread: the pool's threads claim chunks as they come free, so a thread that a loaded
 * machine has descheduled leaves its share to the others. */
#define CONV_CHUNKS_PER_THREAD 4

int64_t cpu_conv_chunks(int64_t tasks, double mnk, size_t per_chunk) {
    if (tasks < 2 || mnk * (double)tasks < CONV_PARALLEL_MACS) return 1;
    int64_t threads = cpu_threads();
    int64_t most = CONV_CHUNKS_PER_THREAD * threads;
    if (most > tasks) most = tasks;
    if (mnk <= BLAS_SERIAL_MNK) return most; /* one GEMM is too small to split anyway */
    /* A big GEMM: whole tasks per thread when each thread gets two or more and the scratch
     * stays bounded, else one task at a time split by cpu_gemm. */
    if (per_chunk && (size_t)most > CPU_CONV_SCRATCH_BYTES / per_chunk)
        most = (int64_t)(CPU_CONV_SCRATCH_BYTES / per_chunk);
    return threads > 1 && tasks >= 2 * threads && most >= threads ? most : 1;
}

/* ---- weights -------------------------------------------------------------------------------- */

int cpu_dense_from(const cn_view *v, int from) {
    int64_t want = 1;
    for (int d = v->ndim - 1; d >= from; d--) {
        if (v->shape[d] != 1 && v->strides[d] != want) return 0;
        want *= v->shape[d];
    }
    return 1;
}

int cpu_weights_direct(const cn_view *w, int64_t K, int64_t *ld) {
    int64_t O = w->shape[0];
    int direct = cpu_dense_from(w, 1) &&
                 (O == 1 || (w->strides[0] >= K && w->strides[0] <= INT_MAX));
    *ld = direct && O > 1 ? w->strides[0] : K;
    if (*ld < 1) *ld = 1; /* BLAS wants a leading dim >= 1 even for empty rows */
    return direct;
}

void cpu_pack_weights(const cn_view *w, void *dst) {
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
