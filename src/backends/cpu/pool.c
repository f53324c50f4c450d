/* CPU 2-D max and average pooling.
 *
 * x: [N, C, H, W] (any strides) -> out: [N, C, OH, OW] contiguous, with
 * out[n, c, oh, ow] = max or mean of x[n, c, oh*sh - ph + i, ow*sw - pw + j], 0 <= i < KH,
 * 0 <= j < KW. Max skips padded positions (they count as -inf); avg counts them as zeros and
 * divides by KH*KW (PyTorch's count_include_pad=True). One (n, c) plane per task. */
#include <math.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

typedef struct pool_geom {
    int64_t H, W, OH, OW;
    int64_t KH, KW, sh, sw, ph, pw;
    int64_t xs_h, xs_w;         /* element strides of x along H and W */
    int is_max;
} pool_geom;

/* The window of output index o along one axis, clipped to [0, size): [*lo, *hi). */
static void clip_window(int64_t o, int64_t stride, int64_t pad, int64_t k, int64_t size,
                        int64_t *lo, int64_t *hi) {
    int64_t start = o * stride - pad, end = start + k;
    *lo = start < 0 ? 0 : start;
    *hi = end > size ? size : end;
}

#define DEFINE_POOL_PLANE(T, name)                                                              \
    static void name(const pool_geom *g, const T *x, T *out) {                                  \
        T area = (T)(g->KH * g->KW);                                                            \
        for (int64_t oh = 0; oh < g->OH; oh++) {                                                \
            int64_t h0, h1;                                                                     \
            clip_window(oh, g->sh, g->ph, g->KH, g->H, &h0, &h1);                               \
            for (int64_t ow = 0; ow < g->OW; ow++) {                                            \
                int64_t w0, w1;                                                                 \
                clip_window(ow, g->sw, g->pw, g->KW, g->W, &w0, &w1);                           \
                T acc = g->is_max ? (T)-INFINITY : (T)0;                                        \
                for (int64_t h = h0; h < h1; h++) {                                             \
                    const T *row = x + h * g->xs_h;                                             \
                    if (g->is_max) {                                                            \
                        for (int64_t w = w0; w < w1; w++) {                                     \
                            T v = row[w * g->xs_w];                                             \
                            if (v > acc || isnan(v)) acc = v; /* NaN wins, as in PyTorch */     \
                        }                                                                       \
                    } else {                                                                    \
                        for (int64_t w = w0; w < w1; w++) acc += row[w * g->xs_w];              \
                    }                                                                           \
                }                                                                               \
                out[oh * g->OW + ow] = g->is_max ? acc : acc / area;                            \
            }                                                                                   \
        }                                                                                       \
    }
DEFINE_POOL_PLANE(float, pool_plane_f32)
DEFINE_POOL_PLANE(double, pool_plane_f64)
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
    int64_t C = cg->c, planes = cg->n * C, plane = g.OH * g.OW;
    size_t es = cn_dtype_size(dt);
    double work = (double)planes * (double)plane * (double)(g.KH * g.KW);

    pool_job j = {.g = &g, .xv = xv, .ov = ov, .dt = dt, .es = es, .C = C, .plane = plane};
    int64_t chunks = work < 2.0 * CPU_PARALLEL_GRAIN ? 1 : cpu_chunks(planes, 1);
    cpu_parallel(planes, chunks, pool_planes, &j);
    return CN_OK;
}
