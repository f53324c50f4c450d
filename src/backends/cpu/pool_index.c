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
#include "core/backend_common.h"

/* ---- the forward: one plane ------------------------------------------------------------------ */

/* 2x2 windows: the maximum m of the values (a NaN only where it comes first), then, from the
 * last position to the first, the first position that holds m, then the first NaN. Selects
 * only, so a row of windows vectorises. */
#define DEFINE_POOL2_ROW(T, SUF)                                                                \
    CPU_CLONES static void pool2_row_##SUF(const T *restrict r0, const T *restrict r1,          \
                                           T *restrict out, uint8_t *restrict idx, int64_t n) { \
        for (int64_t i = 0; i < n; i++) {                                                       \
            T a = r0[2 * i], b = r0[2 * i + 1], c = r1[2 * i], d = r1[2 * i + 1];               \
            T m = a;                                                                            \
            m = b > m ? b : m;                                                                  \
            m = c > m ? c : m;                                                                  \
            m = d > m ? d : m;                                                                  \
            int k = 3;                                                                          \
            k = c == m ? 2 : k;                                                                 \
            k = b == m ? 1 : k;                                                                 \
            k = a == m ? 0 : k;                                                                 \
            k = d != d ? 3 : k;                                                                 \
            k = c != c ? 2 : k;                                                                 \
            k = b != b ? 1 : k;                                                                 \
            k = a != a ? 0 : k;                                                                 \
            T v = k == 0 ? a : k == 1 ? b : k == 2 ? c : d;                                     \
            out[i] = v;                                                                         \
            if (idx) idx[i] = (uint8_t)k;                                                       \
        }                                                                                       \
    }
DEFINE_POOL2_ROW(float, f32)
DEFINE_POOL2_ROW(double, f64)
#undef DEFINE_POOL2_ROW

/* Any k: the window's elements in row-major order, the first NaN ending the search. */
#define DEFINE_POOL_PLANE(T, SUF)                                                               \
    void cpu_pool_index_plane_##SUF(const T *z, int64_t W, int64_t k, int64_t PH, int64_t PW,   \
                                    T *out, uint8_t *idx) {                                     \
        for (int64_t ph = 0; ph < PH; ph++) {                                                   \
            const T *r = z + ph * k * W;                                                        \
            T *o = out + ph * PW;                                                               \
            uint8_t *id = idx ? idx + ph * PW : NULL;                                           \
            if (k == 2) {                                                                       \
                pool2_row_##SUF(r, r + W, o, id, PW);                                           \
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

/* One plane of gz [H, W] from g's plane (element strides gs_h, gs_w) and its choices. Every
 * element is written: the windows' (0 + g or +0), then the rows and columns past the last
 * window (+0). */
#define DEFINE_BACK_PLANE(T, SUF)                                                               \
    static void back_plane_##SUF(const back_job *j, const T *g, int64_t gs_h, int64_t gs_w,     \
                                 const uint8_t *idx, T *gz) {                                   \
        const int64_t W = j->W, k = j->k;                                                       \
        for (int64_t ph = 0; ph < j->PH; ph++) {                                                \
            const T *gr = g + ph * gs_h;                                                        \
            const uint8_t *ir = idx + ph * j->PW;                                               \
            T *d = gz + ph * k * W;                                                             \
            for (int64_t i = 0; i < k; i++) {                                                   \
                T *row = d + i * W;                                                             \
                for (int64_t pw = 0; pw < j->PW; pw++) {                                        \
                    T v = (T)0 + gr[pw * gs_w];                                                 \
                    int64_t at = (int64_t)ir[pw] - i * k; /* the choice's column, if in row i */ \
                    for (int64_t c = 0; c < k; c++) row[pw * k + c] = at == c ? v : (T)0;       \
                }                                                                               \
                for (int64_t c = j->PW * k; c < W; c++) row[c] = 0;                             \
            }                                                                                   \
        }                                                                                       \
        if (j->PH * k < j->H)                                                                   \
            memset(gz + j->PH * k * W, 0, sizeof(T) * (size_t)((j->H - j->PH * k) * W));        \
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
            back_plane_f32(j, (const float *)g, gv->strides[2], gv->strides[3], idx, (float *)gz);
        else
            back_plane_f64(j, (const double *)g, gv->strides[2], gv->strides[3], idx,
                           (double *)gz);
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
