/* CUDA 2-D max and average pooling, forward and backward, with the CPU's semantics (cpu/pool.c,
 * cpu/pool_backward.c).
 *
 * Forward: x [N, C, H, W] (any strides) -> out [N, C, OH, OW] contiguous, one thread per output.
 * out = max or mean of x[n, c, oh*sh - ph + i, ow*sw - pw + j], 0 <= i < KH, 0 <= j < KW; max
 * skips padded positions (and returns a NaN of the window if it holds one), avg counts them as
 * zeros and divides by KH*KW (PyTorch's count_include_pad=True).
 *
 * Backward: one thread per input element gathers from the windows that contain it, in the
 * order (oh, ow) ascending, which is the order in which the CPU adds them: no atomics, and the
 * same sums. max: a window's gradient goes to the element the forward picked (its first maximum
 * in row-major window order; the first NaN when it holds one; the first in-image position when
 * every value is -inf). avg: each window adds g / (KH*KW) to its in-image positions.
 *
 * f32, f64, and f16/bf16 computed in float. */
#include <math.h>
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct pool_geom {
    int64_t N, C, H, W, OH, OW;
    int64_t KH, KW, sh, sw, ph, pw;
    int64_t xs[4], gs[4];  /* element strides of x and of g (backward) */
    const char *x, *g;
    char *out;
    unsigned char *idx;    /* conv2d_max_pool2d's choices (its pool and that pool's backward) */
    int dt, es, is_max;
} pool_geom;

/* The window of output index o along one axis, clipped to [0, size): [*lo, *hi). */
__device__ __forceinline__ void clip_window(int64_t o, int64_t stride, int64_t pad, int64_t k,
                                            int64_t size, int64_t *lo, int64_t *hi) {
    int64_t start = o * stride - pad, end = start + k;
    *lo = start < 0 ? 0 : start;
    *hi = end > size ? size : end;
}

template <typename T> __global__ void pool_forward_kernel(const __grid_constant__ pool_geom p) {
    const int64_t total = p.N * p.C * p.OH * p.OW;
    const T inv = (T)1 / (T)(p.KH * p.KW);
    CU_GRID_LOOP(i, total) {
        int64_t ow = i % p.OW, t = i / p.OW;
        int64_t oh = t % p.OH;
        t /= p.OH;
        int64_t c = t % p.C, n = t / p.C;
        int64_t h0, h1, w0, w1;
        clip_window(oh, p.sh, p.ph, p.KH, p.H, &h0, &h1);
        clip_window(ow, p.sw, p.pw, p.KW, p.W, &w0, &w1);
        const char *plane = p.x + (n * p.xs[0] + c * p.xs[1]) * p.es;
        T acc = p.is_max ? (T)-INFINITY : (T)0;
        for (int64_t h = h0; h < h1; h++) {
            const char *row = plane + h * p.xs[2] * p.es;
            for (int64_t w = w0; w < w1; w++) {
                T v = cu_ld<T>(row + w * p.xs[3] * p.es, p.dt);
                if (p.is_max) {
                    if (v > acc || v != v) acc = v; /* NaN wins, as in PyTorch */
                } else {
                    acc += v;
                }
            }
        }
        cu_st<T>(p.out + i * p.es, p.dt, p.is_max ? acc : acc * inv);
    }
}

/* The plane index h*W + w that max pooling picks in rows [h0, h1), columns [w0, w1). */
template <typename T>
__device__ __forceinline__ int64_t window_argmax(const pool_geom &p, const char *plane,
                                                 int64_t h0, int64_t h1, int64_t w0, int64_t w1) {
    int64_t best = h0 * p.W + w0, first_nan = -1;
    T m = (T)-INFINITY;
    for (int64_t h = h0; h < h1; h++) {
        const char *row = plane + h * p.xs[2] * p.es;
        for (int64_t w = w0; w < w1; w++) {
            T v = cu_ld<T>(row + w * p.xs[3] * p.es, p.dt);
            if (v > m) {
                m = v;
                best = h * p.W + w;
            }
            if (v != v && first_nan < 0) first_nan = h * p.W + w;
        }
    }
    return first_nan >= 0 ? first_nan : best;
}

/* The output rows (or columns) whose windows contain input index x: [*lo, *hi). */
__device__ __forceinline__ void covering(int64_t x, int64_t stride, int64_t pad, int64_t k,
                                         int64_t osize, int64_t *lo, int64_t *hi) {
    /* o*stride - pad <= x < o*stride - pad + k */
    int64_t a = x + pad - k + 1; /* o*stride >= a */
    int64_t l = a <= 0 ? 0 : (a + stride - 1) / stride;
    int64_t h = (x + pad) / stride + 1; /* o*stride <= x + pad */
    *lo = l;
    *hi = h < osize ? h : osize;
}

template <typename T> __global__ void pool_backward_kernel(const __grid_constant__ pool_geom p) {
    const int64_t total = p.N * p.C * p.H * p.W;
    const T inv = (T)1 / (T)(p.KH * p.KW);
    CU_GRID_LOOP(i, total) {
        int64_t w = i % p.W, t = i / p.W;
        int64_t h = t % p.H;
        t /= p.H;
        int64_t c = t % p.C, n = t / p.C;
        int64_t oh0, oh1, ow0, ow1;
        covering(h, p.sh, p.ph, p.KH, p.OH, &oh0, &oh1);
        covering(w, p.sw, p.pw, p.KW, p.OW, &ow0, &ow1);
        const char *gplane = p.g + (n * p.gs[0] + c * p.gs[1]) * p.es;
        const char *xplane = p.is_max ? p.x + (n * p.xs[0] + c * p.xs[1]) * p.es : 0;
        T acc = (T)0;
        for (int64_t oh = oh0; oh < oh1; oh++) {
            int64_t h0, h1;
            clip_window(oh, p.sh, p.ph, p.KH, p.H, &h0, &h1);
            for (int64_t ow = ow0; ow < ow1; ow++) {
                T gv = cu_ld<T>(gplane + (oh * p.gs[2] + ow * p.gs[3]) * p.es, p.dt);
                if (p.is_max) {
                    int64_t w0, w1;
                    clip_window(ow, p.sw, p.pw, p.KW, p.W, &w0, &w1);
                    if (window_argmax<T>(p, xplane, h0, h1, w0, w1) == h * p.W + w) acc += gv;
                } else {
                    acc += gv * inv;
                }
            }
        }
        cu_st<T>(p.out + i * p.es, p.dt, acc);
    }
}

/* conv2d_max_pool2d's pool: k x k windows at stride k (KH) over x, one thread per output: the
 * first NaN, else the first maximum (row-major), its value to out and its place i * k + j to
 * idx when there is one (the CPU's pool_index.c). */
template <typename T> __global__ void pool_index_kernel(const __grid_constant__ pool_geom p) {
    const int64_t total = p.N * p.C * p.OH * p.OW, k = p.KH;
    CU_GRID_LOOP(i, total) {
        int64_t ow = i % p.OW, t = i / p.OW;
        int64_t oh = t % p.OH;
        t /= p.OH;
        int64_t c = t % p.C, n = t / p.C;
        const char *win =
            p.x + (n * p.xs[0] + c * p.xs[1] + oh * k * p.xs[2] + ow * k * p.xs[3]) * p.es;
        T m = cu_ld<T>(win, p.dt);
        int best = 0;
        for (int64_t e = 1; e < k * k && m == m; e++) {
            T v = cu_ld<T>(win + ((e / k) * p.xs[2] + (e % k) * p.xs[3]) * p.es, p.dt);
            if (v > m || v != v) {
                m = v;
                best = (int)e;
            }
        }
        cu_st<T>(p.out + i * p.es, p.dt, m);
        if (p.idx) p.idx[i] = (unsigned char)best;
    }
}

/* Its backward, one thread per input element: 0 + g where the element is its window's choice,
 * +0 elsewhere (and past the last window). */
template <typename T>
__global__ void pool_index_backward_kernel(const __grid_constant__ pool_geom p) {
    const int64_t total = p.N * p.C * p.H * p.W, k = p.KH;
    CU_GRID_LOOP(i, total) {
        int64_t w = i % p.W, t = i / p.W;
        int64_t h = t % p.H;
        t /= p.H;
        int64_t c = t % p.C, n = t / p.C, oh = h / k, ow = w / k;
        T v = (T)0;
        if (oh < p.OH && ow < p.OW &&
            p.idx[((n * p.C + c) * p.OH + oh) * p.OW + ow] == (h % k) * k + w % k)
            v = (T)0 + cu_ld<T>(p.g + (n * p.gs[0] + c * p.gs[1] + oh * p.gs[2] + ow * p.gs[3]) *
                                          p.es,
                                p.dt);
        cu_st<T>(p.out + i * p.es, p.dt, v);
    }
}

/* ---- host ------------------------------------------------------------------------------------- */

/* The geometry of the call (the router's, args->conv) into p; CN_ERR_INVALID_ARG without one. */
static cn_status geom_from(pool_geom *p, const cn_kernel_args *a) {
    memset(p, 0, sizeof *p);
    const cn_conv_geometry *c = cn__kernel_geometry("cuda", a);
    if (!c) return CN_ERR_INVALID_ARG;
    p->N = c->n, p->C = c->c, p->H = c->h, p->W = c->w, p->OH = c->oh, p->OW = c->ow;
    p->KH = c->kh, p->KW = c->kw, p->sh = c->sh, p->sw = c->sw, p->ph = c->ph, p->pw = c->pw;
    return CN_OK;
}

#define LAUNCH_T(KERNEL, dt, n, p)                                                              \
    do {                                                                                        \
        if ((dt) == CN_F64)                                                                     \
            KERNEL<double><<<cu_blocks(n), CU_THREADS, 0, d->stream>>>(p);                      \
        else                                                                                    \
            KERNEL<float><<<cu_blocks(n), CU_THREADS, 0, d->stream>>>(p);                       \
    } while (0)

/* in = (x [N,C,H,W]); the geometry in args->conv; out [N,C,OH,OW]. */
extern "C" cn_status cuda_pool2d(const cn_kernel_args *a) {
    const char *op = a->op == CN_OP_MAX_POOL2D ? "max_pool2d" : "avg_pool2d";
    const cn_view *xv = &a->in[0], *ov = &a->out[0];
    pool_geom p; /* dtypes: f32, f64, f16 or bf16 (backend.c), all alike */
    cn_status s = geom_from(&p, a);
    if (s != CN_OK) return s;
    int64_t total = p.N * p.C * p.OH * p.OW;
    if (total == 0) return CN_OK;
    for (int k = 0; k < 4; k++) p.xs[k] = xv->strides[k];
    p.x = (const char *)xv->data;
    p.out = (char *)ov->data;
    p.dt = ov->dtype;
    p.es = (int)cn_dtype_size(ov->dtype);
    p.is_max = a->op == CN_OP_MAX_POOL2D;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    LAUNCH_T(pool_forward_kernel, p.dt, total, p);
    return cu_check_launch(op, "pool_forward_kernel");
}

/* max: in = (g [N,C,OH,OW], x [N,C,H,W]); avg: in = (g); the geometry in args->conv; out = x's
 * gradient. */
extern "C" cn_status cuda_pool2d_backward(const cn_kernel_args *a) {
    int is_max = a->op == CN_OP_MAX_POOL2D_BACKWARD;
    const char *op = is_max ? "max_pool2d_backward" : "avg_pool2d_backward";
    const cn_view *gv = &a->in[0], *ov = &a->out[0];
    if (is_max && a->n_in < 2)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "needs the gradient and the pooled input");
    const cn_view *xv = is_max ? &a->in[1] : NULL;
    pool_geom p; /* dtypes: f32, f64, f16 or bf16 (backend.c), all alike */
    cn_status s = geom_from(&p, a);
    if (s != CN_OK) return s;
    int64_t total = p.N * p.C * p.H * p.W;
    if (total == 0) return CN_OK;
    for (int k = 0; k < 4; k++) {
        p.gs[k] = gv->strides[k];
        p.xs[k] = xv ? xv->strides[k] : 0;
    }
    p.g = (const char *)gv->data;
    p.x = xv ? (const char *)xv->data : NULL;
    p.out = (char *)ov->data;
    p.dt = ov->dtype;
    p.es = (int)cn_dtype_size(ov->dtype);
    p.is_max = is_max;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    LAUNCH_T(pool_backward_kernel, p.dt, total, p);
    return cu_check_launch(op, "pool_backward_kernel");
}

/* conv2d_max_pool2d's pool of z [N, C, H, W] (any strides) by k x k windows at stride k into
 * out [N, C, H / k, W / k] and idx (u8, same shape; NULL: not kept). */
extern "C" cn_status cu_pool_index(cu_dev *d, const char *op, const cn_view *z, int64_t k,
                                   const cn_view *out, const cn_view *idx) {
    pool_geom p;
    memset(&p, 0, sizeof p);
    p.N = z->shape[0], p.C = z->shape[1], p.H = z->shape[2], p.W = z->shape[3];
    p.OH = p.H / k, p.OW = p.W / k, p.KH = p.KW = p.sh = p.sw = k;
    int64_t total = p.N * p.C * p.OH * p.OW;
    if (total == 0) return CN_OK;
    for (int i = 0; i < 4; i++) p.xs[i] = z->strides[i];
    p.x = (const char *)z->data;
    p.out = (char *)out->data;
    p.idx = idx ? (unsigned char *)idx->data : NULL;
    p.dt = out->dtype;
    p.es = (int)cn_dtype_size(out->dtype);
    LAUNCH_T(pool_index_kernel, p.dt, total, p);
    return cu_check_launch(op, "pool_index_kernel");
}

/* in = (g [N,C,PH,PW], idx u8 [N,C,PH,PW] dense); the pool's geometry in args->conv; out = the
 * gradient of the pool's input [N,C,H,W]. */
extern "C" cn_status cuda_max_pool2d_backward_index(const cn_kernel_args *a) {
    const char *op = "max_pool2d_backward_index";
    const cn_view *gv = &a->in[0], *iv = &a->in[1], *ov = &a->out[0];
    pool_geom p;
    cn_status s = geom_from(&p, a);
    if (s != CN_OK) return s;
    int64_t total = p.N * p.C * p.H * p.W;
    if (total == 0) return CN_OK;
    for (int k = 0; k < 4; k++) p.gs[k] = gv->strides[k];
    p.g = (const char *)gv->data;
    p.idx = (unsigned char *)iv->data;
    p.out = (char *)ov->data;
    p.dt = ov->dtype;
    p.es = (int)cn_dtype_size(ov->dtype);
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    LAUNCH_T(pool_index_backward_kernel, p.dt, total, p);
    return cu_check_launch(op, "pool_index_backward_kernel");
}
