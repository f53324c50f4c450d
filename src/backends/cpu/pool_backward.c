/* CPU gradients of 2-D max and average pooling (forward: pool.c).
 *
 * max: in = (g [N, C, OH, OW], x [N, C, H, W]), any strides -> gx [N, C, H, W] contiguous. Each
 *   window's g goes to the element the forward picked: the first maximum in row-major window
 *   order over the in-image positions (the first NaN when the window holds one; the first
 *   in-image position when every value is -inf, as PyTorch does).
 * avg: in = (g) -> gx: each window adds g / (KH*KW) to its in-image positions (padded positions
 *   counted in the divisor, PyTorch's count_include_pad=True).
 * Overlapping windows add up. One (n, c) plane per task, zeroed first. */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

typedef struct pool_geom {
    int64_t H, W, OH, OW;
    int64_t KH, KW, sh, sw, ph, pw;
    int64_t gs_h, gs_w;         /* element strides of g along OH and OW */
    int64_t xs_h, xs_w;         /* element strides of x along H and W (max only) */
} pool_geom;

/* The window of output index o along one axis, clipped to [0, size): [*lo, *hi). */
static void clip_window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size,
                        int64_t *lo, int64_t *hi) {
    int64_t start = o * stride - pad, end = start + k;
    *lo = start < 0 ? 0 : start;
    *hi = end > size ? size : end;
}

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

/* gx: one dense [H, W] plane, zeroed; g, x: the plane's origin in each input. */
#define DEFINE_MAX_PLANE(T, name)                                                               \
    static void name(const pool_geom *p, const T *g, const T *x, T *gx) {                       \
        for (int64_t oh = 0; oh < p->OH; oh++) {                                                \
            int64_t h0, h1;                                                                     \
            clip_window(oh, p->sh, p->ph, p->KH, p->H, &h0, &h1);                               \
            for (int64_t ow = 0; ow < p->OW; ow++) {                                            \
                int64_t w0, w1;                                                                 \
                clip_window(ow, p->sw, p->pw, p->KW, p->W, &w0, &w1);                           \
                if (h0 >= h1 || w0 >= w1) continue;                                             \
                /* The first maximum, without branches on the data (random values defeat the    \
                 * predictor); a window holding a NaN is rescanned for its first NaN. */        \
                int64_t best = h0 * p->W + w0;                                                  \
                T m = (T)-INFINITY;                                                             \
                int nan = 0;                                                                    \
                for (int64_t h = h0; h < h1; h++) {                                             \
                    const T *row = x + h * p->xs_h;                                             \
                    for (int64_t w = w0; w < w1; w++) {                                         \
                        T v = row[w * p->xs_w];                                                 \
                        int64_t take = -(int64_t)(v > m);                                       \
                        best ^= (best ^ (h * p->W + w)) & take;                                 \
                        m = v > m ? v : m;                                                      \
                        nan |= v != v;                                                          \
                    }                                                                           \
                }                                                                               \
                if (nan) best = first_nan_##T(p, x, h0, h1, w0, w1);                            \
                gx[best] += g[oh * p->gs_h + ow * p->gs_w];                                     \
            }                                                                                   \
        }                                                                                       \
    }
DEFINE_MAX_PLANE(float, max_plane_f32)
DEFINE_MAX_PLANE(double, max_plane_f64)
#undef DEFINE_MAX_PLANE

#define DEFINE_AVG_PLANE(T, name)                                                               \
    static void name(const pool_geom *p, const T *g, T *gx) {                                   \
        T inv = (T)1 / (T)(p->KH * p->KW);                                                      \
        for (int64_t oh = 0; oh < p->OH; oh++) {                                                \
            int64_t h0, h1;                                                                     \
            clip_window(oh, p->sh, p->ph, p->KH, p->H, &h0, &h1);                               \
            for (int64_t ow = 0; ow < p->OW; ow++) {                                            \
                int64_t w0, w1;                                                                 \
                clip_window(ow, p->sw, p->pw, p->KW, p->W, &w0, &w1);                           \
                T v = g[oh * p->gs_h + ow * p->gs_w] * inv;                                     \
                for (int64_t h = h0; h < h1; h++) {                                             \
                    T *row = gx + h * p->W;                                                     \
                    for (int64_t w = w0; w < w1; w++) row[w] += v;                              \
                }                                                                               \
            }                                                                                   \
        }                                                                                       \
    }
DEFINE_AVG_PLANE(float, avg_plane_f32)
DEFINE_AVG_PLANE(double, avg_plane_f64)
#undef DEFINE_AVG_PLANE

typedef struct pool_back_job {
    const pool_geom *p;
    const cn_view *gv, *xv, *ov;
    cn_dtype dt;
    size_t es;
    int64_t C, plane;
    int is_max;
} pool_back_job;

/* (n, c) planes [begin, end) of gx, each zeroed and then filled from its windows. */
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
        memset(gx, 0, (size_t)j->plane * es);
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
    cn_dtype dt = ov->dtype;
    size_t es = cn_dtype_size(dt);
    int64_t C = cg->c, planes = cg->n * C, plane = p.H * p.W;
    if (planes == 0 || plane == 0) return CN_OK;
    double work = (double)planes * (double)(p.OH * p.OW) * (double)(p.KH * p.KW);

    pool_back_job j = {.p = &p, .gv = gv, .xv = xv, .ov = ov, .dt = dt, .es = es, .C = C,
                       .plane = plane, .is_max = is_max};
    int64_t chunks = work < 2.0 * CPU_PARALLEL_GRAIN ? 1 : cpu_chunks(planes, 1);
    cpu_parallel(planes, chunks, pool_back_planes, &j);
    return CN_OK;
}
