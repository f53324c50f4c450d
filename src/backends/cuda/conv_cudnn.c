/* Convolution through cuDNN (forward, input gradient, weight gradient), used by conv.cu when
 * cinder is built with cuDNN and cn_cuda_set_cudnn_enabled has not switched it off.
 *
 * Each function builds descriptors for the views as they are (strided inputs are described by
 * their strides; the filter must be packed, so a strided weight is copied first), asks cuDNN's
 * heuristics for algorithms and runs the first usable one whose workspace fits. The choice is
 * kept per geometry (as PyTorch keeps its per shape): asking the heuristics on every call made a
 * small convolution's forward and backward 12x slower than PyTorch's on an H200. f32 and f64 are
 * restricted to CUDNN_FMA_MATH, so no TF32 tensor-core path changes f32 results; f16 and bf16
 * use tensor cores with f32 accumulation. Whatever cuDNN cannot take (a broadcast stride, a
 * size beyond int, no usable algorithm) returns CU_NOT_HANDLED, and the caller runs its own
 * kernels instead. */
#include <limits.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"

#ifndef CINDER_HAVE_CUDNN

cn_status cu_cudnn_conv_forward(cu_dev *d, const cn_kernel_args *a, const cu_conv_geom *g) {
    (void)d, (void)a, (void)g;
    return CU_NOT_HANDLED;
}

cn_status cu_cudnn_conv_backward_input(cu_dev *d, const cn_kernel_args *a,
                                       const cu_conv_geom *g) {
    (void)d, (void)a, (void)g;
    return CU_NOT_HANDLED;
}

cn_status cu_cudnn_conv_backward_weight(cu_dev *d, const cn_kernel_args *a,
                                        const cu_conv_geom *g) {
    (void)d, (void)a, (void)g;
    return CU_NOT_HANDLED;
}

#else

#include <cudnn.h>

/* The most workspace an algorithm may ask for. */
#define WORKSPACE_MAX ((size_t)1 << 30)

static int cudnn_broken[CU_MAX_DEVICES]; /* cudnnCreate failed: do not try again */

/* The device's cuDNN handle, made on first use; NULL when cuDNN cannot be used. */
static cudnnHandle_t handle_of(cu_dev *d) {
    cu_lock();
    if (!d->cudnn && !cudnn_broken[d->index]) {
        cudnnHandle_t h;
        if (cudnnCreate(&h) == CUDNN_STATUS_SUCCESS) {
            if (cudnnSetStream(h, d->stream) == CUDNN_STATUS_SUCCESS)
                d->cudnn = h;
            else
                cudnnDestroy(h);
        }
        if (!d->cudnn) cudnn_broken[d->index] = 1;
        (void)cudaGetLastError();
    }
    cu_unlock();
    return (cudnnHandle_t)d->cudnn;
}

/* Everything the heuristics' answer depends on. Zeroed with the descs that hold it, so that memcmp sees
 * no stray padding. */
typedef struct algo_key {
    int device, dir, dtype;
    int64_t x[8], y[8], w[4]; /* shapes, then strides */
    int64_t conv[7];          /* strides, paddings, dilations, groups */
} algo_key;

typedef struct descs {
    cudnnTensorDescriptor_t x, y;  /* input and output (or their gradients) */
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
    cudnnMathType_t math;
    int f64;
    algo_key key; /* the geometry here; run() adds the device and the direction */
} descs;

static void destroy(descs *s) {
    if (s->x) cudnnDestroyTensorDescriptor(s->x);
    if (s->y) cudnnDestroyTensorDescriptor(s->y);
    if (s->w) cudnnDestroyFilterDescriptor(s->w);
    if (s->conv) cudnnDestroyConvolutionDescriptor(s->conv);
}

static cudnnDataType_t data_type(cn_dtype dt) {
    switch (dt) {
    case CN_F64: return CUDNN_DATA_DOUBLE;
    case CN_F16: return CUDNN_DATA_HALF;
    case CN_BF16: return CUDNN_DATA_BFLOAT16;
    default: return CUDNN_DATA_FLOAT;
    }
}

/* A 4-d tensor descriptor of v with its strides; 0 when cuDNN cannot describe it. A size-1 dim's
 * stride never matters, so it is given a dense value (cuDNN rejects some odd ones). */
static int set_tensor(cudnnTensorDescriptor_t t, const cn_view *v) {
    int dims[4], strides[4];
    int64_t dense = 1;
    for (int k = 3; k >= 0; k--) {
        int64_t st = v->shape[k] == 1 ? dense : v->strides[k];
        if (v->shape[k] > INT_MAX || st <= 0 || st > INT_MAX) return 0;
        dims[k] = (int)v->shape[k];
        strides[k] = (int)st;
        dense *= v->shape[k];
    }
    return cudnnSetTensor4dDescriptorEx(t, data_type(v->dtype), dims[0], dims[1], dims[2],
                                        dims[3], strides[0], strides[1], strides[2],
                                        strides[3]) == CUDNN_STATUS_SUCCESS;
}

/* Descriptors for x (view xv), y (view yv) and a packed filter of shape ws. 0: not describable. */
static int make_descs(descs *s, const cu_conv_geom *g, const cn_view *xv, const cn_view *yv,
                      const int64_t *ws, cn_dtype dt) {
    memset(s, 0, sizeof *s);
    s->f64 = dt == CN_F64;
    algo_key *k = &s->key;
    k->dtype = (int)dt;
    for (int i = 0; i < 4; i++) {
        k->x[i] = xv->shape[i];
        k->x[4 + i] = xv->strides[i];
        k->y[i] = yv->shape[i];
        k->y[4 + i] = yv->strides[i];
        k->w[i] = ws[i];
    }
    const int64_t conv[7] = {g->sh, g->sw, g->ph, g->pw, g->dh, g->dw, g->groups};
    memcpy(k->conv, conv, sizeof conv);
    s->math = dt == CN_F32 || dt == CN_F64 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
    for (int k = 0; k < 4; k++)
        if (ws[k] > INT_MAX) return 0;
    if (g->ph > INT_MAX || g->pw > INT_MAX || g->sh > INT_MAX || g->sw > INT_MAX ||
        g->dh > INT_MAX || g->dw > INT_MAX || g->groups > INT_MAX)
        return 0;
    if (cudnnCreateTensorDescriptor(&s->x) != CUDNN_STATUS_SUCCESS ||
        cudnnCreateTensorDescriptor(&s->y) != CUDNN_STATUS_SUCCESS ||
        cudnnCreateFilterDescriptor(&s->w) != CUDNN_STATUS_SUCCESS ||
        cudnnCreateConvolutionDescriptor(&s->conv) != CUDNN_STATUS_SUCCESS)
        return 0;
    if (!set_tensor(s->x, xv) || !set_tensor(s->y, yv)) return 0;
    if (cudnnSetFilter4dDescriptor(s->w, data_type(dt), CUDNN_TENSOR_NCHW, (int)ws[0], (int)ws[1],
                                   (int)ws[2], (int)ws[3]) != CUDNN_STATUS_SUCCESS)
        return 0;
    if (cudnnSetConvolution2dDescriptor(s->conv, (int)g->ph, (int)g->pw, (int)g->sh, (int)g->sw,
                                        (int)g->dh, (int)g->dw, CUDNN_CROSS_CORRELATION,
                                        s->f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT) !=
            CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionGroupCount(s->conv, (int)g->groups) != CUDNN_STATUS_SUCCESS ||
        cudnnSetConvolutionMathType(s->conv, s->math) != CUDNN_STATUS_SUCCESS)
        return 0;
    int n, c, h, w; /* cuDNN must agree with the router on the output size */
    if (cudnnGetConvolution2dForwardOutputDim(s->conv, s->x, s->w, &n, &c, &h, &w) !=
            CUDNN_STATUS_SUCCESS ||
        n != g->N || c != g->O || h != g->OH || w != g->OW)
        return 0;
    return 1;
}

/* One candidate algorithm, whichever direction. */
typedef struct choice {
    int algo;
    size_t memory;
    cudnnMathType_t math;
} choice;

/* The first candidate that cuDNN can run with our math restriction and whose workspace fits. */
static int pick(const descs *s, const choice *c, const cudnnStatus_t *status, int n, choice *out) {
    for (int i = 0; i < n; i++) {
        if (status[i] != CUDNN_STATUS_SUCCESS || c[i].memory > WORKSPACE_MAX) continue;
        /* f32/f64: only plain FMA kernels (f64 has no TF32 path, so the default is fine too) */
        if (s->math == CUDNN_FMA_MATH && c[i].math != CUDNN_FMA_MATH &&
            !(s->f64 && c[i].math == CUDNN_DEFAULT_MATH))
            continue;
        *out = c[i];
        return 1;
    }
    return 0;
}

#define MAX_ALGOS 16

/* ---- the choices made, per geometry ------------------------------------------------------------ */

typedef struct algo_entry {
    algo_key key;
    choice c;
    int usable; /* 0: no algorithm fits, the caller's own kernels run */
} algo_entry;

#define ALGO_CACHE 64 /* geometries kept; the oldest is replaced */

static algo_entry algo_cache[ALGO_CACHE];
static int algo_used, algo_next;

/* 1 with *e filled when key was seen. */
static int cache_get(const algo_key *key, algo_entry *e) {
    int found = 0;
    cu_lock();
    for (int i = 0; i < algo_used && !found; i++)
        if (memcmp(&algo_cache[i].key, key, sizeof *key) == 0) {
            *e = algo_cache[i];
            found = 1;
        }
    cu_unlock();
    return found;
}

static void cache_put(const algo_entry *e) {
    cu_lock();
    algo_cache[algo_next] = *e;
    algo_next = (algo_next + 1) % ALGO_CACHE;
    if (algo_used < ALGO_CACHE) algo_used++;
    cu_unlock();
}

/* Packs w into scratch when it is not dense; *data is where the packed filter lives. */
static cn_status packed_filter(cu_dev *d, const char *op, const cn_view *w, const void **data,
                               void **owned) {
    *owned = NULL;
    *data = w->data;
    int64_t want = 1;
    int dense = 1;
    for (int k = 3; k >= 0; k--) {
        if (w->shape[k] != 1 && w->strides[k] != want) dense = 0;
        want *= w->shape[k];
    }
    if (dense) return CN_OK;
    cn_status s = cu_scratch(d, op, (size_t)want * cn_dtype_size(w->dtype), owned);
    if (s != CN_OK) return s;
    cn_view dst = *w;
    dst.data = *owned;
    int64_t st = 1;
    for (int k = 3; k >= 0; k--) {
        dst.strides[k] = st;
        st *= w->shape[k];
    }
    s = cu_copy_view(d, op, &dst, w);
    if (s != CN_OK) {
        cu_scratch_free(d, *owned);
        *owned = NULL;
        return s;
    }
    *data = *owned;
    return CN_OK;
}

/* The result of running an algorithm: CN_OK, CU_NOT_HANDLED (cuDNN declined), or an error. */
static cn_status run_status(const char *op, cudnnStatus_t st, const char *what) {
    if (st == CUDNN_STATUS_SUCCESS) return CN_OK;
    (void)cudaGetLastError();
    if (st == CUDNN_STATUS_NOT_SUPPORTED || st == CUDNN_STATUS_BAD_PARAM) return CU_NOT_HANDLED;
    return cn_set_error(CN_ERR_BACKEND, op, "%s failed: %s; calling cn_cuda_set_cudnn_enabled with 0 makes "
                        "convolutions use cinder's own kernels", what, cudnnGetErrorString(st));
}

/* The three directions differ only in their heuristics and run calls. */
typedef enum direction { FORWARD, BACKWARD_INPUT, BACKWARD_WEIGHT } direction;

static int heuristics(cudnnHandle_t h, direction dir, const descs *s, choice *c,
                      cudnnStatus_t *status) {
    int n = 0;
    if (dir == FORWARD) {
        cudnnConvolutionFwdAlgoPerf_t p[MAX_ALGOS];
        if (cudnnGetConvolutionForwardAlgorithm_v7(h, s->x, s->w, s->conv, s->y, MAX_ALGOS, &n,
                                                   p) != CUDNN_STATUS_SUCCESS)
            return 0;
        for (int i = 0; i < n; i++) {
            c[i] = (choice){(int)p[i].algo, p[i].memory, p[i].mathType};
            status[i] = p[i].status;
        }
    } else if (dir == BACKWARD_INPUT) {
        cudnnConvolutionBwdDataAlgoPerf_t p[MAX_ALGOS];
        if (cudnnGetConvolutionBackwardDataAlgorithm_v7(h, s->w, s->y, s->conv, s->x, MAX_ALGOS,
                                                        &n, p) != CUDNN_STATUS_SUCCESS)
            return 0;
        for (int i = 0; i < n; i++) {
            c[i] = (choice){(int)p[i].algo, p[i].memory, p[i].mathType};
            status[i] = p[i].status;
        }
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t p[MAX_ALGOS];
        if (cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, s->x, s->y, s->conv, s->w,
                                                          MAX_ALGOS, &n, p) !=
            CUDNN_STATUS_SUCCESS)
            return 0;
        for (int i = 0; i < n; i++) {
            c[i] = (choice){(int)p[i].algo, p[i].memory, p[i].mathType};
            status[i] = p[i].status;
        }
    }
    return n;
}

/* Runs direction dir. x, y: the image-shaped and output-shaped tensors (data pointers and
 * descriptors in s); w: the packed filter. The written one is x (input gradient), y (forward) or
 * w (weight gradient); beta = 0 overwrites it. */
static cn_status run(cu_dev *d, const char *op, direction dir, descs *s, const void *x,
                     const void *w, const void *y, void *out) {
    cudnnHandle_t h = handle_of(d);
    if (!h) return CU_NOT_HANDLED;
    s->key.device = d->index;
    s->key.dir = (int)dir;
    algo_entry e;
    if (!cache_get(&s->key, &e)) {
        choice c[MAX_ALGOS];
        cudnnStatus_t status[MAX_ALGOS];
        int n = heuristics(h, dir, s, c, status);
        e.key = s->key;
        e.usable = n > 0 && pick(s, c, status, n, &e.c);
        cache_put(&e);
    }
    if (!e.usable) return CU_NOT_HANDLED;
    choice best = e.c;
    if (cudnnSetConvolutionMathType(s->conv, best.math) != CUDNN_STATUS_SUCCESS)
        return CU_NOT_HANDLED;
    void *ws = NULL;
    cn_status r = best.memory ? cu_scratch(d, op, best.memory, &ws) : CN_OK;
    if (r != CN_OK) return r;
    double one_d = 1.0, zero_d = 0.0;
    float one_f = 1.0f, zero_f = 0.0f;
    const void *alpha = s->f64 ? (const void *)&one_d : (const void *)&one_f;
    const void *beta = s->f64 ? (const void *)&zero_d : (const void *)&zero_f;
    cudnnStatus_t st;
    if (dir == FORWARD)
        st = cudnnConvolutionForward(h, alpha, s->x, x, s->w, w, s->conv,
                                     (cudnnConvolutionFwdAlgo_t)best.algo, ws, best.memory, beta,
                                     s->y, out);
    else if (dir == BACKWARD_INPUT)
        st = cudnnConvolutionBackwardData(h, alpha, s->w, w, s->y, y, s->conv,
                                          (cudnnConvolutionBwdDataAlgo_t)best.algo, ws,
                                          best.memory, beta, s->x, out);
    else
        st = cudnnConvolutionBackwardFilter(h, alpha, s->x, x, s->y, y, s->conv,
                                            (cudnnConvolutionBwdFilterAlgo_t)best.algo, ws,
                                            best.memory, beta, s->w, out);
    cu_scratch_free(d, ws);
    return run_status(op, st, dir == FORWARD          ? "cudnnConvolutionForward"
                              : dir == BACKWARD_INPUT ? "cudnnConvolutionBackwardData"
                                                      : "cudnnConvolutionBackwardFilter");
}

/* in = (x, w, optional b); out = y. */
cn_status cu_cudnn_conv_forward(cu_dev *d, const cn_kernel_args *a, const cu_conv_geom *g) {
    const char *op = "conv2d";
    const cn_view *xv = &a->in[0], *wv = &a->in[1], *yv = &a->out[0];
    descs s;
    cn_status r = CU_NOT_HANDLED;
    if (make_descs(&s, g, xv, yv, wv->shape, yv->dtype)) {
        const void *w;
        void *owned;
        r = packed_filter(d, op, wv, &w, &owned);
        if (r == CN_OK) r = run(d, op, FORWARD, &s, xv->data, w, NULL, yv->data);
        cu_scratch_free(d, owned);
    }
    destroy(&s);
    if (r == CN_OK && a->n_in > 2) r = cu_conv_add_bias(d, op, g, yv, &a->in[2]);
    return r;
}

/* in = (g, w); out = gx. */
cn_status cu_cudnn_conv_backward_input(cu_dev *d, const cn_kernel_args *a,
                                       const cu_conv_geom *g) {
    const char *op = "conv2d_backward_input";
    const cn_view *gv = &a->in[0], *wv = &a->in[1], *xv = &a->out[0];
    descs s;
    cn_status r = CU_NOT_HANDLED;
    if (make_descs(&s, g, xv, gv, wv->shape, xv->dtype)) {
        const void *w;
        void *owned;
        r = packed_filter(d, op, wv, &w, &owned);
        if (r == CN_OK) r = run(d, op, BACKWARD_INPUT, &s, NULL, w, gv->data, xv->data);
        cu_scratch_free(d, owned);
    }
    destroy(&s);
    return r;
}

/* in = (g, x); out = gw (contiguous, so it is a packed filter). */
cn_status cu_cudnn_conv_backward_weight(cu_dev *d, const cn_kernel_args *a,
                                        const cu_conv_geom *g) {
    const char *op = "conv2d_backward_weight";
    const cn_view *gv = &a->in[0], *xv = &a->in[1], *wv = &a->out[0];
    descs s;
    cn_status r = CU_NOT_HANDLED;
    if (make_descs(&s, g, xv, gv, wv->shape, wv->dtype))
        r = run(d, op, BACKWARD_WEIGHT, &s, xv->data, NULL, gv->data, wv->data);
    destroy(&s);
    return r;
}

#endif
