/* Max pooling of k x k windows at stride k, unpadded, that keeps each window's choice, and the
 * backward from those choices: the two halves of conv2d_max_pool2d (conv.c pools each image's
 * convolution output while it is in cache) and max_pool2d_backward_index.
 *
 * The choice of a window is max_pool2d's: its first NaN, else its first maximum, in row-major
 * order, kept as i * k + j (a byte: k <= 15). The pooled value is the chosen element, so the
 * values are max_pool2d's; the backward writes 0 + g at the choice and +0 elsewhere, as
 * max_pool2d_backward does, so the gradients are the same bit for bit. */

/* Nothing here reads floating-point exception flags: lets gcc turn the compares into selects. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/pool512.h"
#include "core/backend_common.h"

/* ---- the forward: one plane ------------------------------------------------------------------ */

/* 2x2 windows: the maximum m of the values (a NaN only where it comes first), then, from the
 * last position to the first, the first position that holds m, then the first NaN; the value is
 * m, or the first NaN. Selects only, in lanes as wide as T (I), so that a row of windows
 * vectorises (ROW_LOOP: no scalar tail on rows of 7 or 14 windows). */
#define POOL_BLOCK 64 /* windows whose choices a row keeps in I lanes at once */

#define DEFINE_POOL2(T, I, SUF, LANES)                                                          \
    static inline T pool2_at_##SUF(const T *r0, const T *r1, int64_t i, I *choice) {            \
        T a = r0[2 * i], b = r0[2 * i + 1], c = r1[2 * i], d = r1[2 * i + 1];                   \
        T m = a;                                                                                \
        m = b > m ? b : m;                                                                      \
        m = c > m ? c : m;                                                                      \
        m = d > m ? d : m;                                                                      \
        I k = 3;                                                                                \
        k = c == m ? 2 : k;                                                                     \
        k = b == m ? 1 : k;                                                                     \
        k = a == m ? 0 : k;                                                                     \
        k = d != d ? 3 : k;                                                                     \
        k = c != c ? 2 : k;                                                                     \
        k = b != b ? 1 : k;                                                                     \
        k = a != a ? 0 : k;                                                                     \
        T v = d != d ? d : m;                                                                   \
        v = c != c ? c : v;                                                                     \
        v = b != b ? b : v;                                                                     \
        v = a != a ? a : v;                                                                     \
        *choice = k;                                                                            \
        return v;                                                                               \
    }                                                                                           \
    CPU_CLONES static void pool2_row_##SUF(const T *restrict r0, const T *restrict r1,          \
                                           T *restrict out, int64_t n) {                        \
        ROW_LOOP(n, LANES, {                                                                    \
            I k_;                                                                               \
            out[i] = pool2_at_##SUF(r0, r1, i, &k_);                                            \
        });                                                                                     \
    }                                                                                           \
    /* the choices in I lanes (a byte lane would make the vectors 32 windows wide: longer than \
     * the rows), narrowed to bytes after */                                                    \
    CPU_CLONES static void pool2_row_choice_##SUF(const T *restrict r0, const T *restrict r1,   \
                                                  T *restrict out, I *restrict kk, int64_t n) { \
        ROW_LOOP(n, LANES, out[i] = pool2_at_##SUF(r0, r1, i, &kk[i]));                         \
    }                                                                                           \
    static void pool2_row_idx_##SUF(const T *r0, const T *r1, T *out, uint8_t *idx,             \
                                    int64_t n) {                                                \
        I kk[POOL_BLOCK];                                                                       \
        for (int64_t b = 0; b < n; b += POOL_BLOCK) {                                           \
            int64_t m = n - b < POOL_BLOCK ? n - b : POOL_BLOCK;                                \
            pool2_row_choice_##SUF(r0 + 2 * b, r1 + 2 * b, out + b, kk, m);                     \
            for (int64_t i = 0; i < m; i++) idx[b + i] = (uint8_t)kk[i];                        \
        }                                                                                       \
    }                                                                                           \
    /* v where mask is all ones, +0 where it is 0: arithmetic, so the compiler sees no branch */ \
    static inline T keep_if_##SUF(T v, I mask) {                                                \
        I bits;                                                                                 \
        memcpy(&bits, &v, sizeof v);                                                            \
        bits &= mask;                                                                           \
        memcpy(&v, &bits, sizeof v);                                                            \
        return v;                                                                               \
    }                                                                                           \
    /* the backward of one row of windows: 0 + g at the choice, +0 at the other three */        \
    CPU_CLONES static void back2_lanes_##SUF(const T *restrict g, const I *restrict kk,         \
                                             T *restrict d0, T *restrict d1, int64_t n) {       \
        ROW_LOOP(n, LANES, {                                                                    \
            T v_ = (T)0 + g[i];                                                                 \
            d0[2 * i] = keep_if_##SUF(v_, -(I)(kk[i] == 0));                                    \
            d0[2 * i + 1] = keep_if_##SUF(v_, -(I)(kk[i] == 1));                                \
            d1[2 * i] = keep_if_##SUF(v_, -(I)(kk[i] == 2));                                    \
            d1[2 * i + 1] = keep_if_##SUF(v_, -(I)(kk[i] == 3));                                \
        });                                                                                     \
    }                                                                                           \
    static void back2_row_##SUF(const T *g, const uint8_t *idx, T *d0, T *d1, int64_t n) {      \
        I kk[POOL_BLOCK];                                                                       \
        for (int64_t b = 0; b < n; b += POOL_BLOCK) {                                           \
            int64_t m = n - b < POOL_BLOCK ? n - b : POOL_BLOCK;                                \
            for (int64_t i = 0; i < m; i++) kk[i] = idx[b + i];                                 \
            back2_lanes_##SUF(g + b, kk, d0 + 2 * b, d1 + 2 * b, m);                            \
        }                                                                                       \
    }
DEFINE_POOL2(float, int32_t, f32, 4)
DEFINE_POOL2(double, int64_t, f64, 2)
#undef DEFINE_POOL2

/* Whether pool512.c serves the type (2x2 windows of f32 planes where the CPU has AVX-512). */
#define POOL512_f32 1
#define POOL512_f64 0

/* Any k: the window's elements in row-major order, the first NaN ending the search. */
#define DEFINE_POOL_PLANE(T, SUF)                                                               \
    void cpu_pool_index_plane_##SUF(const T *z, int64_t W, int64_t k, int64_t PH, int64_t PW,   \
                                    T *out, uint8_t *idx) {                                     \
        if (k == 2 && POOL512_##SUF && cpu_pool512()) {                                         \
            cpu_pool2_plane512_f32((const float *)z, W, PH, PW, NULL, (float *)out, idx);       \
            return;                                                                             \
        }                                                                                       \
        for (int64_t ph = 0; ph < PH; ph++) {                                                   \
            const T *r = z + ph * k * W;                                                        \
            T *o = out + ph * PW;                                                               \
            uint8_t *id = idx ? idx + ph * PW : NULL;                                           \
            if (k == 2) {                                                                       \
                if (id)                                                                         \
                    pool2_row_idx_##SUF(r, r + W, o, id, PW);                                   \
                else                                                                            \
                    pool2_row_##SUF(r, r + W, o, PW);                                           \
                continue;                                                                       \
            }                                                                                   \
            for (int64_t pw = 0; pw < PW; pw++) {                                               \
                const T *win = r + pw * k;                                                      \
                int best = 0;                                                                   \
                T m = win[0];                                                                   \
                for (int64_t e = 0; e < k * k && m == m; e++) {                                 \
                    T v = win[(e / k) * W + e % k];                                             \
                    if (v > m || v != v) {                                                      \
                        m = v;                                                                  \
                        best = (int)e;                                                          \
                    }                                                                           \
                }                                                                               \
                o[pw] = m;                                                                      \
                if (id) id[pw] = (uint8_t)best;                                                 \
            }                                                                                   \
        }                                                                                       \
    }
DEFINE_POOL_PLANE(float, f32)
DEFINE_POOL_PLANE(double, f64)
#undef DEFINE_POOL_PLANE

/* ---- the backward ---------------------------------------------------------------------------- */

typedef struct back_job {
    const cn_view *gv, *iv, *ov;
    int64_t C, H, W, PH, PW, k;
    size_t es;
    cn_dtype dt;
} back_job;

/* One plane of gz [H, W] (cpu_internal.h). Every element is written: the windows' (0 + g or
 * +0), then the rows and columns past the last window (+0). */
#define DEFINE_BACK_PLANE(T, SUF)                                                               \
    void cpu_pool_index_back_plane_##SUF(const T *g, int64_t gs_h, int64_t gs_w,                \
                                         const uint8_t *idx, int64_t H, int64_t W, int64_t PH,  \
                                         int64_t PW, int64_t k, T *gz) {                        \
        int64_t done = 0; /* the rows of windows done by pool512.c */                           \
        if (k == 2 && gs_w == 1 && POOL512_##SUF && cpu_pool512()) {                            \
            cpu_pool2_back_plane512_f32((const float *)g, gs_h, idx, PH, PW, W, (float *)gz);   \
            done = PH;                                                                          \
        }                                                                                       \
        for (int64_t ph = done; ph < PH; ph++) {                                                \
            const T *gr = g + ph * gs_h;                                                        \
            const uint8_t *ir = idx + ph * PW;                                                  \
            T *d = gz + ph * k * W;                                                             \
            if (k == 2 && gs_w == 1) {                                                          \
                back2_row_##SUF(gr, ir, d, d + W, PW);                                          \
                for (int64_t c = PW * 2; c < W; c++) d[c] = d[W + c] = 0;                       \
                continue;                                                                       \
            }                                                                                   \
            for (int64_t i = 0; i < k; i++) {                                                   \
                T *row = d + i * W;                                                             \
                for (int64_t pw = 0; pw < PW; pw++) {                                           \
                    T v = (T)0 + gr[pw * gs_w];                                                 \
                    int64_t at = (int64_t)ir[pw] - i * k; /* the choice's column, if in row i */ \
                    for (int64_t c = 0; c < k; c++) row[pw * k + c] = at == c ? v : (T)0;       \
                }                                                                               \
                for (int64_t c = PW * k; c < W; c++) row[c] = 0;                                \
            }                                                                                   \
        }                                                                                       \
        if (PH * k < H) memset(gz + PH * k * W, 0, sizeof(T) * (size_t)((H - PH * k) * W));     \
    }
DEFINE_BACK_PLANE(float, f32)
DEFINE_BACK_PLANE(double, f64)
#undef DEFINE_BACK_PLANE

static void back_planes(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const back_job *j = ctx;
    const cn_view *gv = j->gv;
    for (int64_t q = begin; q < end; q++) {
        int64_t n = q / j->C, c = q % j->C;
        const char *g = (const char *)gv->data +
                        (n * gv->strides[0] + c * gv->strides[1]) * (int64_t)j->es;
        const uint8_t *idx = (const uint8_t *)j->iv->data + q * j->PH * j->PW;
        char *gz = (char *)j->ov->data + (size_t)(q * j->H * j->W) * j->es;
        if (j->dt == CN_F32)
            cpu_pool_index_back_plane_f32((const float *)g, gv->strides[2], gv->strides[3], idx,
                                          j->H, j->W, j->PH, j->PW, j->k, (float *)gz);
        else
            cpu_pool_index_back_plane_f64((const double *)g, gv->strides[2], gv->strides[3], idx,
                                          j->H, j->W, j->PH, j->PW, j->k, (double *)gz);
    }
}

cn_status cpu_max_pool2d_backward_index(const cn_kernel_args *args) {
    const cn_conv_geometry *cg = cn__kernel_geometry("cpu", args);
    if (!cg) return CN_ERR_INVALID_ARG;
    const cn_view *ov = &args->out[0];
    if (ov->dtype != CN_F32 && ov->dtype != CN_F64) /* unreachable through the router (dtypes) */
        return cn__kernel_dtype_error("cpu", args->op, ov->dtype);
    back_job j = {.gv = &args->in[0], .iv = &args->in[1], .ov = ov, .C = cg->c, .H = cg->h,
                  .W = cg->w, .PH = cg->oh, .PW = cg->ow, .k = cg->kh,
                  .es = cn_dtype_size(ov->dtype), .dt = ov->dtype};
    int64_t planes = cg->n * cg->c;
    if (planes == 0 || j.H * j.W == 0) return CN_OK;
    double work = (double)planes * (double)(j.H * j.W);
    int64_t chunks = work < 2.0 * CPU_PARALLEL_GRAIN ? 1 : cpu_chunks(planes, 1);
    cpu_parallel(planes, chunks, back_planes, &j);
    return CN_OK;
}
