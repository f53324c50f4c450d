/* CPU gradients of 2-D max and average pooling (forward: pool.c).
 *
 * max: in = (g [N, C, OH, OW], x [N, C, H, W]), any strides -> gx [N, C, H, W] contiguous. Each
 *   window's g goes to the element the forward picked: the first maximum in row-major window
 *   order over the in-image positions (the first NaN when the window holds one; the first
 *   in-image position when every value is -inf, as PyTorch does).
 * avg: in = (g) -> gx: each window adds g / (KH*KW) to its in-image positions (padded positions
 *   counted in the divisor, PyTorch's count_include_pad=True).
 * Overlapping windows add up. One (n, c) plane per task, zeroed first.
 *
 * The common windows (2x2 and 3x3, stride 2) over dense planes take a fast path: the windows
 * that lie wholly inside the image go through loops over a row of windows that the compiler
 * vectorises, the windows that padding clips through the general loop, in the general loop's
 * order, (oh, ow) row-major; each element of gx receives the same additions in the same order
 * as in the general loop, so the results are bit-identical. */

/* Nothing here reads floating-point exception flags; without this gcc keeps every float compare
 * of the max loops behind a branch and they do not vectorise (see reduce.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "core/backend_common.h"

typedef struct pool_geom {
    int64_t H, W, OH, OW;
    int64_t KH, KW, sh, sw, ph, pw;
    int64_t gs_h, gs_w;   /* element strides of g along OH and OW */
    int64_t xs_h, xs_w;   /* element strides of x along H and W (max only) */
    int fast_k;           /* 2 or 3: the fast path's window (square, stride 2, dense planes) */
    int64_t ow_lo, ow_hi; /* fast path: the outputs [ow_lo, ow_hi) whose windows no column clips */
} pool_geom;

/* The window of output index o along one axis, clipped to [0, size): [*lo, *hi). */
static void clip_window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size,
                        int64_t *lo, int64_t *hi) {
    int64_t start = o * stride - pad, end = start + k;
    *lo = start < 0 ? 0 : start;
    *hi = end > size ? size : end;
}

/* ---- the general loops ----------------------------------------------------------------------- */

/* The plane index h*W + w of the first NaN in rows [h0, h1), columns [w0, w1) of x (one holds). */
#define DEFINE_FIRST_NAN(T)                                                                     \
    static int64_t first_nan_##T(const pool_geom *p, const T *x, int64_t h0, int64_t h1,        \
                                 int64_t w0, int64_t w1) {                                      \
        for (int64_t h = h0; h < h1; h++)                                                       \
            for (int64_t w = w0; w < w1; w++)                                                   \
                if (isnan(x[h * p->xs_h + w * p->xs_w])) return h * p->W + w;                   \
        return h0 * p->W + w0;                                                                  \
    }
DEFINE_FIRST_NAN(float)
DEFINE_FIRST_NAN(double)
#undef DEFINE_FIRST_NAN

/* Windows [ow0, ow1) of output row oh. gx: one dense [H, W] plane; g, x: the plane's origin in
 * each input. */
#define DEFINE_MAX_ROW(T, name)                                                                 \
    static void name(const pool_geom *p, const T *g, const T *x, T *gx, int64_t oh,             \
                     int64_t ow0, int64_t ow1) {                                                \
        int64_t h0, h1;                                                                         \
        clip_window(oh, p->sh, p->ph, p->KH, p->H, &h0, &h1);                                   \
        for (int64_t ow = ow0; ow < ow1; ow++) {                                                \
            int64_t w0, w1;                                                                     \
            clip_window(ow, p->sw, p->pw, p->KW, p->W, &w0, &w1);                               \
            if (h0 >= h1 || w0 >= w1) continue;                                                 \
            /* The first maximum, without branches on the data (random values defeat the        \
             * predictor); a window holding a NaN is rescanned for its first NaN. */            \
            int64_t best = h0 * p->W + w0;                                                      \
            T m = (T)-INFINITY;                                                                 \
            int nan = 0;                                                                        \
            for (int64_t h = h0; h < h1; h++) {                                                 \
                const T *row = x + h * p->xs_h;                                                 \
                for (int64_t w = w0; w < w1; w++) {                                             \
                    T v = row[w * p->xs_w];                                                     \
                    int64_t take = -(int64_t)(v > m);                                           \
                    best ^= (best ^ (h * p->W + w)) & take;                                     \
                    m = v > m ? v : m;                                                          \
                    nan |= v != v;                                                              \
                }                                                                               \
            }                                                                                   \
            if (nan) best = first_nan_##T(p, x, h0, h1, w0, w1);                                \
            gx[best] += g[oh * p->gs_h + ow * p->gs_w];                                         \
        }                                                                                       \
    }
DEFINE_MAX_ROW(float, max_row_f32)
DEFINE_MAX_ROW(double, max_row_f64)
#undef DEFINE_MAX_ROW

#define DEFINE_AVG_ROW(T, name)                                                                 \
    static void name(const pool_geom *p, const T *g, T *gx, int64_t oh, int64_t ow0,            \
                     int64_t ow1) {                                                             \
        T inv = (T)1 / (T)(p->KH * p->KW);                                                      \
        int64_t h0, h1;                                                                         \
        clip_window(oh, p->sh, p->ph, p->KH, p->H, &h0, &h1);                                   \
        for (int64_t ow = ow0; ow < ow1; ow++) {                                                \
            int64_t w0, w1;                                                                     \
            clip_window(ow, p->sw, p->pw, p->KW, p->W, &w0, &w1);                               \
            T v = g[oh * p->gs_h + ow * p->gs_w] * inv;                                         \
            for (int64_t h = h0; h < h1; h++) {                                                 \
                T *row = gx + h * p->W;                                                         \
                for (int64_t w = w0; w < w1; w++) row[w] += v;                                  \
            }                                                                                   \
        }                                                                                       \
    }
DEFINE_AVG_ROW(float, avg_row_f32)
DEFINE_AVG_ROW(double, avg_row_f64)
#undef DEFINE_AVG_ROW

/* ---- the fast path: whole windows, 2x2 and 3x3 at stride 2 ----------------------------------- *
 * One row of n windows: window i covers columns 2i .. 2i+K-1 of rows x0, x1 (, x2) of x and
 * d0, d1 (, d2) of gx (the pointers start at the first window's first column) and takes g[i].
 *
 * The choice is the general loop's, in selects that vectorise (one condition each): MAX_STEP
 * gives the maximum m of the values other than NaN (starting from the first value equals
 * starting from -inf: only a greater value moves m; a NaN first leaves m NaN, and then the
 * first NaN is the choice anyway); EQ_STEP, run from the last position to the first, leaves
 * the first position that holds m, the first maximum; NAN_STEP, likewise, the first NaN. */
#define MAX_STEP(v)    m = (v) > m ? (v) : m
#define EQ_STEP(j, v)  k = (v) == m ? (j) : k
#define NAN_STEP(j, v) k = (v) != (v) ? (j) : k


/* 2x2: windows do not overlap, so each element of gx gets at most one window's g; the rows are
 * written, not added to: 0 + g where the window's choice falls (the general loop's value:
 * -0 becomes +0), +0 elsewhere. I: an integer as wide as T, so the selects vectorise. */
#define DEFINE_FAST_ROWS(T, I, SUF, LANES)                                                      \
    /* v where mask is all ones, +0 where it is 0: arithmetic, so the compiler sees no branch */ \
    static inline T keep_if_##SUF(T v, I mask) {                                                \
        I bits;                                                                                 \
        memcpy(&bits, &v, sizeof v);                                                            \
        bits &= mask;                                                                           \
        memcpy(&v, &bits, sizeof v);                                                            \
        return v;                                                                               \
    }                                                                                           \
    static inline void max2_at_##SUF(const T *x0, const T *x1, const T *g, T *d0, T *d1,        \
                                     int64_t i) {                                               \
        T a = x0[2 * i], b = x0[2 * i + 1], c = x1[2 * i], d = x1[2 * i + 1];                   \
        T m = a;                                                                                \
        MAX_STEP(b);                                                                            \
        MAX_STEP(c);                                                                            \
        MAX_STEP(d);                                                                            \
        I k = 3;                                                                                \
        EQ_STEP(2, c);                                                                          \
        EQ_STEP(1, b);                                                                          \
        EQ_STEP(0, a);                                                                          \
        NAN_STEP(3, d);                                                                         \
        NAN_STEP(2, c);                                                                         \
        NAN_STEP(1, b);                                                                         \
        NAN_STEP(0, a);                                                                         \
        T v = (T)0 + g[i];                                                                      \
        d0[2 * i] = keep_if_##SUF(v, -(I)(k == 0));                                             \
        d0[2 * i + 1] = keep_if_##SUF(v, -(I)(k == 1));                                         \
        d1[2 * i] = keep_if_##SUF(v, -(I)(k == 2));                                             \
        d1[2 * i + 1] = keep_if_##SUF(v, -(I)(k == 3));                                         \
    }                                                                                           \
    /* 3x3: the choice of window i (row-major, 0..8) */                                         \
    static inline I max3_at_##SUF(const T *x0, const T *x1, const T *x2, int64_t i) {           \
        const T *r0 = x0 + 2 * i, *r1 = x1 + 2 * i, *r2 = x2 + 2 * i;                           \
        T m = r0[0];                                                                            \
        MAX_STEP(r0[1]);                                                                        \
        MAX_STEP(r0[2]);                                                                        \
        MAX_STEP(r1[0]);                                                                        \
        MAX_STEP(r1[1]);                                                                        \
        MAX_STEP(r1[2]);                                                                        \
        MAX_STEP(r2[0]);                                                                        \
        MAX_STEP(r2[1]);                                                                        \
        MAX_STEP(r2[2]);                                                                        \
        I k = 8;                                                                                \
        EQ_STEP(7, r2[1]);                                                                      \
        EQ_STEP(6, r2[0]);                                                                      \
        EQ_STEP(5, r1[2]);                                                                      \
        EQ_STEP(4, r1[1]);                                                                      \
        EQ_STEP(3, r1[0]);                                                                      \
        EQ_STEP(2, r0[2]);                                                                      \
        EQ_STEP(1, r0[1]);                                                                      \
        EQ_STEP(0, r0[0]);                                                                      \
        NAN_STEP(8, r2[2]);                                                                     \
        NAN_STEP(7, r2[1]);                                                                     \
        NAN_STEP(6, r2[0]);                                                                     \
        NAN_STEP(5, r1[2]);                                                                     \
        NAN_STEP(4, r1[1]);                                                                     \
        NAN_STEP(3, r1[0]);                                                                     \
        NAN_STEP(2, r0[2]);                                                                     \
        NAN_STEP(1, r0[1]);                                                                     \
        NAN_STEP(0, r0[0]);                                                                     \
        return k;                                                                               \
    }                                                                                           \
    static inline void avg2_at_##SUF(const T *g, T *d0, T *d1, int64_t i) {                     \
        T v = (T)0 + g[i] * ((T)1 / (T)4);                                                      \
        d0[2 * i] = v;                                                                          \
        d0[2 * i + 1] = v;                                                                      \
        d1[2 * i] = v;                                                                          \
        d1[2 * i + 1] = v;                                                                      \
    }                                                                                           \
    CPU_CLONES static void max2_row_##SUF(const T *restrict x0, const T *restrict x1,           \
                                          const T *restrict g, T *restrict d0,                  \
                                          T *restrict d1, int64_t n) {                          \
        ROW_LOOP(n, LANES, max2_at_##SUF(x0, x1, g, d0, d1, i));                                \
    }                                                                                           \
    /* 3x3: the choices into kk[i]; the caller adds. */                                         \
    CPU_CLONES static void max3_choice_##SUF(const T *restrict x0, const T *restrict x1,        \
                                             const T *restrict x2, I *restrict kk, int64_t n) { \
        ROW_LOOP(n, LANES, kk[i] = max3_at_##SUF(x0, x1, x2, i));                               \
    }                                                                                           \
    CPU_CLONES static void avg2_row_##SUF(const T *restrict g, T *restrict d0, T *restrict d1,  \
                                          int64_t n) {                                          \
        ROW_LOOP(n, LANES, avg2_at_##SUF(g, d0, d1, i));                                        \
    }                                                                                           \
    /* 3x3 on one row d of gx: column 2i gets window i-1's share, then window i's (the general  \
     * loop's order); column 0 has the clipped window's already, column 2n gets the next one's  \
     * after. Adds, so not through ROW_LOOP. */                                                 \
    CPU_CLONES static void avg3_row_##SUF(const T *restrict g, T *restrict d, int64_t n) {      \
        const T inv = (T)1 / (T)9;                                                              \
        d[0] += g[0] * inv;                                                                     \
        d[1] += g[0] * inv;                                                                     \
        for (int64_t i = 1; i < n; i++) {                                                       \
            d[2 * i] = (d[2 * i] + g[i - 1] * inv) + g[i] * inv;                                \
            d[2 * i + 1] += g[i] * inv;                                                         \
        }                                                                                       \
        d[2 * n] += g[n - 1] * inv;                                                             \
    }
DEFINE_FAST_ROWS(float, int32_t, f32, 4)
DEFINE_FAST_ROWS(double, int64_t, f64, 2)
#undef DEFINE_FAST_ROWS
#undef MAX_STEP
#undef EQ_STEP
#undef NAN_STEP

/* ---- one plane ------------------------------------------------------------------------------- *
 * gx: one dense [H, W] plane, zeroed; g, x: the plane's origin in each input. Output rows in
 * order, and in each the clipped windows on the left, the whole ones, the clipped ones on the
 * right: the general loop's order. */

#define MAX3_BLOCK 64 /* windows whose choices max3 keeps at once */

#define DEFINE_PLANES(T, I, SUF)                                                                \
    static void max_plane_##SUF(const pool_geom *p, const T *g, const T *x, T *gx) {            \
        /* 3x3: where in the window each choice k lies, relative to the window's origin */      \
        const int64_t W = p->W, at[9] = {0, 1, 2, W, W + 1, W + 2, 2 * W, 2 * W + 1, 2 * W + 2}; \
        for (int64_t oh = 0; oh < p->OH; oh++) {                                                \
            int64_t h0, h1;                                                                     \
            clip_window(oh, p->sh, p->ph, p->KH, p->H, &h0, &h1);                               \
            if (!p->fast_k || h1 - h0 < p->fast_k || p->ow_lo >= p->ow_hi) {                    \
                max_row_##SUF(p, g, x, gx, oh, 0, p->OW);                                       \
                continue;                                                                       \
            }                                                                                   \
            int64_t lo = p->ow_lo, n = p->ow_hi - lo, c0 = h0 * W + 2 * lo - p->pw;             \
            const T *gr = g + oh * p->OW + lo;                                                  \
            if (lo > 0) max_row_##SUF(p, g, x, gx, oh, 0, lo);                                  \
            if (p->fast_k == 2) {                                                               \
                max2_row_##SUF(x + c0, x + c0 + W, gr, gx + c0, gx + c0 + W, n);                \
            } else {                                                                            \
                I kk[MAX3_BLOCK];                                                               \
                for (int64_t b = 0; b < n; b += MAX3_BLOCK) {                                   \
                    int64_t m = n - b < MAX3_BLOCK ? n - b : MAX3_BLOCK;                        \
                    const T *xb = x + c0 + 2 * b;                                               \
                    max3_choice_##SUF(xb, xb + W, xb + 2 * W, kk, m);                           \
                    T *db = gx + c0 + 2 * b;                                                    \
                    for (int64_t i = 0; i < m; i++) db[2 * i + at[kk[i]]] += gr[b + i];         \
                }                                                                               \
            }                                                                                   \
            if (p->ow_hi < p->OW) max_row_##SUF(p, g, x, gx, oh, p->ow_hi, p->OW);              \
        }                                                                                       \
    }                                                                                           \
    static void avg_plane_##SUF(const pool_geom *p, const T *g, T *gx) {                        \
        const int64_t W = p->W;                                                                 \
        for (int64_t oh = 0; oh < p->OH; oh++) {                                                \
            int64_t h0, h1;                                                                     \
            clip_window(oh, p->sh, p->ph, p->KH, p->H, &h0, &h1);                               \
            if (!p->fast_k || h1 - h0 < p->fast_k || p->ow_lo >= p->ow_hi) {                    \
                avg_row_##SUF(p, g, gx, oh, 0, p->OW);                                          \
                continue;                                                                       \
            }                                                                                   \
            int64_t lo = p->ow_lo, n = p->ow_hi - lo, c0 = h0 * W + 2 * lo - p->pw;             \
            const T *gr = g + oh * p->OW + lo;                                                  \
            if (lo > 0) avg_row_##SUF(p, g, gx, oh, 0, lo);                                     \
            if (p->fast_k == 2) {                                                               \
                avg2_row_##SUF(gr, gx + c0, gx + c0 + W, n);                                    \
            } else {                                                                            \
                avg3_row_##SUF(gr, gx + c0, n);                                                 \
                avg3_row_##SUF(gr, gx + c0 + W, n);                                             \
                avg3_row_##SUF(gr, gx + c0 + 2 * W, n);                                         \
            }                                                                                   \
            if (p->ow_hi < p->OW) avg_row_##SUF(p, g, gx, oh, p->ow_hi, p->OW);                 \
        }                                                                                       \
    }
DEFINE_PLANES(float, int32_t, f32)
DEFINE_PLANES(double, int64_t, f64)
#undef DEFINE_PLANES

typedef struct pool_back_job {
    const pool_geom *p;
    const cn_view *gv, *xv, *ov;
    cn_dtype dt;
    size_t es;
    int64_t C, plane;
    int is_max;
    int covers; /* the 2x2 fast path writes every element of each plane: no zeroing first */
} pool_back_job;

/* (n, c) planes [begin, end) of gx, each zeroed (unless the windows cover it) and then filled
 * from its windows. */
static void pool_back_planes(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const pool_back_job *j = ctx;
    const cn_view *gv = j->gv, *xv = j->xv;
    size_t es = j->es;
    for (int64_t q = begin; q < end; q++) {
        int64_t n = q / j->C, c = q % j->C;
        const char *g = (const char *)gv->data +
                        (n * gv->strides[0] + c * gv->strides[1]) * (int64_t)es;
        char *gx = (char *)j->ov->data + (size_t)(q * j->plane) * es;
        if (!j->covers) memset(gx, 0, (size_t)j->plane * es);
        if (j->is_max) {
            const char *x = (const char *)xv->data +
                            (n * xv->strides[0] + c * xv->strides[1]) * (int64_t)es;
            if (j->dt == CN_F32)
                max_plane_f32(j->p, (const float *)g, (const float *)x, (float *)gx);
            else
                max_plane_f64(j->p, (const double *)g, (const double *)x, (double *)gx);
        } else if (j->dt == CN_F32) {
            avg_plane_f32(j->p, (const float *)g, (float *)gx);
        } else {
            avg_plane_f64(j->p, (const double *)g, (double *)gx);
        }
    }
}

/* The fast path's window size for p (2 or 3), or 0, and the outputs along W whose windows lie
 * wholly inside the image: ow*2 - pw >= 0 and ow*2 - pw + K <= W. */
static void choose_fast_path(pool_geom *p, int is_max) {
    int square = p->KH == p->KW && (p->KH == 2 || p->KH == 3) && p->sh == 2 && p->sw == 2;
    int dense = p->gs_w == 1 && p->gs_h == p->OW && (!is_max || (p->xs_w == 1 && p->xs_h == p->W));
    p->fast_k = square && dense ? (int)p->KH : 0;
    p->ow_lo = (p->pw + 1) / 2;
    p->ow_hi = p->W + p->pw >= p->KW ? (p->W + p->pw - p->KW) / 2 + 1 : 0;
    if (p->ow_hi > p->OW) p->ow_hi = p->OW;
}

cn_status cpu_pool2d_backward(const cn_kernel_args *args) {
    int is_max = args->op == CN_OP_MAX_POOL2D_BACKWARD;
    const cn_view *gv = &args->in[0], *xv = is_max ? &args->in[1] : NULL, *ov = &args->out[0];
    const cn_conv_geometry *cg = cn__kernel_geometry("cpu", args);
    if (!cg) return CN_ERR_INVALID_ARG;
    if (ov->dtype != CN_F32 && ov->dtype != CN_F64) /* unreachable through the router (dtypes) */
        return cn__kernel_dtype_error("cpu", args->op, ov->dtype);
    pool_geom p = {
        .H = cg->h, .W = cg->w, .OH = cg->oh, .OW = cg->ow,
        .KH = cg->kh, .KW = cg->kw, .sh = cg->sh, .sw = cg->sw, .ph = cg->ph, .pw = cg->pw,
        .gs_h = gv->strides[2], .gs_w = gv->strides[3],
        .xs_h = xv ? xv->strides[2] : 0, .xs_w = xv ? xv->strides[3] : 0,
    };
    choose_fast_path(&p, xv != NULL);
    cn_dtype dt = ov->dtype;
    size_t es = cn_dtype_size(dt);
    int64_t C = cg->c, planes = cg->n * C, plane = p.H * p.W;
    if (planes == 0 || plane == 0) return CN_OK;
    double work = (double)planes * (double)(p.OH * p.OW) * (double)(p.KH * p.KW);

    /* 2x2 windows at stride 2 tiling the plane exactly: each element lies in one whole window,
     * and the fast rows write (not add) all four of every window's elements */
    int covers = p.fast_k == 2 && p.ph == 0 && p.pw == 0 && p.H == 2 * p.OH && p.W == 2 * p.OW &&
                 p.ow_lo == 0 && p.ow_hi == p.OW;
    pool_back_job j = {.p = &p, .gv = gv, .xv = xv, .ov = ov, .dt = dt, .es = es, .C = C,
                       .plane = plane, .is_max = is_max, .covers = covers};
    int64_t chunks = work < 2.0 * CPU_PARALLEL_GRAIN ? 1 : cpu_chunks(planes, 1);
    cpu_parallel(planes, chunks, pool_back_planes, &j);
    return CN_OK;
}
