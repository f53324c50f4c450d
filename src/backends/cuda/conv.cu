/* CUDA 2-D convolution, forward and both gradients: cuDNN when it is available and takes the
 * case (conv_cudnn.c), otherwise im2col / col2im kernels plus batched cuBLAS GEMMs.
 *
 * Shapes (NCHW): x [N, C, H, W], w [O, Cg, KH, KW] with Cg = C / groups, out [N, O, OH, OW].
 * Per image n and group g, with K = Cg*KH*KW and P = OH*OW, the receptive fields unroll into
 *   col[(c*KH + kh)*KW + kw, oh*OW + ow] = x[n, g*Cg + c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw]
 * (zero outside the image), and (row-major products)
 *   forward: out[n, g] [Og, P] = w_g [Og, K] @ col [K, P]                (+ bias)
 *   input:   cols [K, P] = w_g^T @ g[n, g] [Og, P];  gx[n, g] = col2im(cols)
 *   weight:  gw_g [Og, K] = sum over n of g[n, g] [Og, P] @ col^T [P, K]
 * Images are processed in chunks whose column matrices fit a scratch budget. col2im gathers
 * (one thread per input element, adding in (kh, kw) order), so there are no atomics. */
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

/* Scratch for the column matrices of one chunk of images. */
#define CONV_COL_BUDGET ((size_t)256 << 20)

/* ---- geometry ----------------------------------------------------------------------------------- */

extern "C" cn_status cu_conv_geom_init(cu_conv_geom *g, const cn_kernel_args *a) {
    memset(g, 0, sizeof *g);
    const cn_conv_geometry *c = cn__kernel_geometry("cuda", a);
    if (!c) return CN_ERR_INVALID_ARG;
    g->N = c->n, g->C = c->c, g->H = c->h, g->W = c->w;
    g->O = c->o, g->KH = c->kh, g->KW = c->kw;
    g->OH = c->oh, g->OW = c->ow;
    g->sh = c->sh, g->sw = c->sw, g->ph = c->ph, g->pw = c->pw;
    g->dh = c->dh, g->dw = c->dw, g->groups = c->groups;
    g->Cg = c->c / c->groups;
    g->Og = c->o / c->groups;
    /* sizes of empty tensors may be huge: saturate (such products are never used) */
    if (__builtin_mul_overflow(g->Cg, g->KH, &g->K) || __builtin_mul_overflow(g->K, g->KW, &g->K))
        g->K = INT64_MAX;
    if (__builtin_mul_overflow(g->OH, g->OW, &g->P)) g->P = INT64_MAX;
    return CN_OK;
}

/* ---- kernels ------------------------------------------------------------------------------------ */

/* col [nb, groups, K, P] for images n0 .. n0+nb-1. xs: x's element strides. */
__global__ void im2col_kernel(const __grid_constant__ cu_conv_geom g, const char *x,
                              const __grid_constant__ cu_nd xs, int64_t n0, int64_t nb, char *col,
                              int es) {
    const int64_t total = nb * g.groups * g.K * g.P, kk_size = g.KH * g.KW;
    CU_GRID_LOOP(e, total) {
        int64_t p = e % g.P, t = e / g.P;
        int64_t kk = t % g.K;
        t /= g.K;
        int64_t grp = t % g.groups, i = t / g.groups;
        int64_t c = kk / kk_size, r = kk - c * kk_size;
        int64_t kh = r / g.KW, kw = r - kh * g.KW;
        int64_t oh = p / g.OW, ow = p - oh * g.OW;
        int64_t ih = oh * g.sh - g.ph + kh * g.dh, iw = ow * g.sw - g.pw + kw * g.dw;
        char *dst = col + e * es;
        if (ih < 0 || ih >= g.H || iw < 0 || iw >= g.W) {
            const uint64_t zero = 0;
            cu_move(dst, (const char *)&zero, es);
        } else {
            int64_t off = (n0 + i) * xs.stride[0] + (grp * g.Cg + c) * xs.stride[1] +
                          ih * xs.stride[2] + iw * xs.stride[3];
            cu_move(dst, x + off * es, es);
        }
    }
}

/* gx [nb, C, H, W] (contiguous, images n0..) = col2im of cols [nb, groups, K, P]. */
template <typename T>
__global__ void col2im_kernel(const __grid_constant__ cu_conv_geom g, const char *cols,
                              int64_t n0, int64_t nb, char *gx, int dt, int es) {
    const int64_t total = nb * g.C * g.H * g.W;
    CU_GRID_LOOP(e, total) {
        int64_t w = e % g.W, t = e / g.W;
        int64_t h = t % g.H;
        t /= g.H;
        int64_t ch = t % g.C, i = t / g.C;
        int64_t grp = ch / g.Cg, c = ch - grp * g.Cg;
        const char *base = cols + ((i * g.groups + grp) * g.K + c * g.KH * g.KW) * g.P * es;
        T acc = (T)0;
        for (int64_t kh = 0; kh < g.KH; kh++) {
            int64_t a = h + g.ph - kh * g.dh; /* = oh * sh */
            if (a < 0 || a % g.sh) continue;
            int64_t oh = a / g.sh;
            if (oh >= g.OH) continue;
            for (int64_t kw = 0; kw < g.KW; kw++) {
                int64_t b = w + g.pw - kw * g.dw;
                if (b < 0 || b % g.sw) continue;
                int64_t ow = b / g.sw;
                if (ow >= g.OW) continue;
                acc += cu_ld<T>(base + ((kh * g.KW + kw) * g.P + oh * g.OW + ow) * es, dt);
            }
        }
        cu_st<T>(gx + ((n0 * g.C) * g.H * g.W + e) * es, dt, acc);
    }
}

/* out [N, O, P] (contiguous) += b[o], or = b[o] when `set`. */
template <typename T>
__global__ void bias_kernel(char *out, int64_t N, int64_t O, int64_t P, const char *b,
                            int64_t bs, int dt, int es, int set) {
    CU_GRID_LOOP(e, N * O * P) {
        int64_t o = (e / P) % O;
        T v = cu_ld<T>(b + o * bs * es, dt);
        char *dst = out + e * es;
        cu_st<T>(dst, dt, set ? v : cu_ld<T>(dst, dt) + v);
    }
}

/* out[e] = relu(out[e]) over n values (conv2d_relu's activation; v < 0 ? 0 : v keeps NaN). */
template <typename T>
__global__ void relu_kernel(char *out, int64_t n, int dt, int es) {
    CU_GRID_LOOP(e, n) {
        char *dst = out + e * es;
        T v = cu_ld<T>(dst, dt);
        cu_st<T>(dst, dt, v < (T)0 ? (T)0 : v);
    }
}

/* ---- host helpers ------------------------------------------------------------------------------- */


/* Non-zero when v is dense row-major (size-1 dims ignored). */
static int is_dense(const cn_view *v) {
    int64_t want = 1;
    for (int k = v->ndim - 1; k >= 0; k--) {
        if (v->shape[k] != 1 && v->strides[k] != want) return 0;
        want *= v->shape[k];
    }
    return 1;
}

static cn_view dense_view(const cn_view *v, void *data) {
    cn_view r = *v;
    r.data = data;
    int64_t s = 1;
    for (int k = v->ndim - 1; k >= 0; k--) {
        r.strides[k] = s;
        s *= v->shape[k];
    }
    return r;
}

/* v's data, dense: in place, or copied into scratch (*owned, to free). */
static cn_status dense_data(cu_dev *d, const char *op, const cn_view *v, const void **data,
                            void **owned) {
    *owned = NULL;
    *data = v->data;
    if (is_dense(v)) return CN_OK;
    int64_t n = 1;
    for (int k = 0; k < v->ndim; k++) n *= v->shape[k];
    cn_status s = cu_scratch(d, op, (size_t)n * cn_dtype_size(v->dtype), owned);
    if (s != CN_OK) return s;
    cn_view dst = dense_view(v, *owned);
    s = cu_copy_view(d, op, &dst, v);
    if (s != CN_OK) {
        cu_scratch_free(d, *owned);
        *owned = NULL;
        return s;
    }
    *data = *owned;
    return CN_OK;
}

/* Images per chunk so that their column matrices fit the budget (at least 1). */
static int64_t chunk_images(const cu_conv_geom *g, size_t es) {
    size_t per = (size_t)(g->groups * g->K * g->P) * es;
    int64_t nb = per ? (int64_t)(CONV_COL_BUDGET / per) : g->N;
    if (nb < 1) nb = 1;
    return nb < g->N ? nb : g->N;
}

static cn_status launch_im2col(cu_dev *d, const char *op, const cu_conv_geom *g,
                               const cn_view *xv, int64_t n0, int64_t nb, void *col) {
    int64_t total = nb * g->groups * g->K * g->P;
    im2col_kernel<<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
        *g, (const char *)xv->data, cu_nd_of(xv), n0, nb, (char *)col,
        (int)cn_dtype_size(xv->dtype));
    return cu_check_launch(op, "im2col_kernel");
}

static cn_status launch_bias(cu_dev *d, const char *op, const cu_conv_geom *g, const cn_view *ov,
                             const cn_view *bv, int set) {
    int64_t total = g->N * g->O * g->P;
    if (total == 0) return CN_OK;
    int es = (int)cn_dtype_size(ov->dtype);
    if (ov->dtype == CN_F64)
        bias_kernel<double><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
            (char *)ov->data, g->N, g->O, g->P, (const char *)bv->data, bv->strides[0],
            ov->dtype, es, set);
    else
        bias_kernel<float><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
            (char *)ov->data, g->N, g->O, g->P, (const char *)bv->data, bv->strides[0],
            ov->dtype, es, set);
    return cu_check_launch(op, "bias_kernel");
}

extern "C" cn_status cu_conv_add_bias(cu_dev *d, const char *op, const cu_conv_geom *g,
                                      const cn_view *out, const cn_view *b) {
    return launch_bias(d, op, g, out, b, 0);
}

/* ---- forward ------------------------------------------------------------------------------------ */

/* in = (x, w, optional b); conv2d's ints; out [N, O, OH, OW] contiguous. */
static cn_status conv_forward(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_view *xv = &a->in[0], *wv = &a->in[1], *ov = &a->out[0];
    const cn_view *bv = a->n_in > 2 ? &a->in[2] : NULL;
    cu_conv_geom g; /* dtypes: f32, f64, f16 or bf16 (backend.c), all alike */
    cn_status s = cu_conv_geom_init(&g, a);
    if (s != CN_OK) return s;
    if (g.N * g.groups == 0 || g.Og == 0 || g.P == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    size_t es = cn_dtype_size(ov->dtype);
    if (g.K == 0) { /* no input channels: the output is the bias (or zero) */
        if (bv) return launch_bias(d, op, &g, ov, bv, 1);
        return cu_check(op, cudaMemsetAsync(ov->data, 0, (size_t)(g.N * g.O * g.P) * es,
                                            d->stream), "cudaMemsetAsync");
    }
    if (cu_cudnn_enabled()) {
        s = cu_cudnn_conv_forward(d, a, &g);
        if (s != CU_NOT_HANDLED) return s;
    }

    const void *w;
    void *w_owned, *col = NULL;
    s = dense_data(d, op, wv, &w, &w_owned);
    if (s != CN_OK) return s;
    int64_t nb = chunk_images(&g, es);
    s = cu_scratch(d, op, (size_t)(nb * g.groups * g.K * g.P) * es, &col);
    for (int64_t n0 = 0; s == CN_OK && n0 < g.N; n0 += nb) {
        int64_t m = g.N - n0 < nb ? g.N - n0 : nb;
        s = launch_im2col(d, op, &g, xv, n0, m, col);
        for (int64_t grp = 0; s == CN_OK && grp < g.groups; grp++) {
            cu_gemm_args ga;
            memset(&ga, 0, sizeof ga);
            ga.dtype = ga.c_dtype = ov->dtype;
            ga.m = g.P, ga.n = g.Og, ga.k = g.K;
            ga.a = (const char *)col + (size_t)(grp * g.K * g.P) * es;
            ga.lda = g.P, ga.stride_a = g.groups * g.K * g.P;
            ga.b = (const char *)w + (size_t)(grp * g.Og * g.K) * es;
            ga.ldb = g.K, ga.stride_b = 0;
            ga.c = (char *)ov->data + (size_t)((n0 * g.O + grp * g.Og) * g.P) * es;
            ga.ldc = g.P, ga.stride_c = g.O * g.P;
            ga.batch = m;
            s = cu_gemm(d, op, &ga);
        }
    }
    if (s == CN_OK && bv) s = launch_bias(d, op, &g, ov, bv, 0);
    cu_scratch_free(d, col);
    cu_scratch_free(d, w_owned);
    return s;
}

/* *z: a dense [N, O, OH, OW] view of the convolution's output in dtype dt, on scratch (free its
 * data with cu_scratch_free) */
static cn_status conv_out_scratch(cu_dev *d, const char *op, const cn_conv_geometry *c,
                                  cn_dtype dt, cn_view *z) {
    memset(z, 0, sizeof *z);
    z->dtype = dt;
    z->ndim = 4;
    const int64_t zs[4] = {c->n, c->o, c->oh, c->ow};
    int64_t st = 1;
    for (int k = 3; k >= 0; k--) {
        z->shape[k] = zs[k];
        z->strides[k] = st;
        st *= zs[k];
    }
    return cu_scratch(d, op, (size_t)st * cn_dtype_size(dt), &z->data);
}

/* conv2d_max_pool2d: the convolution into a scratch buffer, then its pool (pool.cu). */
static cn_status conv_pool_forward(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_conv_geometry *c = cn__kernel_geometry("cuda", a);
    if (!c) return CN_ERR_INVALID_ARG;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    const cn_view *ov = &a->out[0];
    cn_view z;
    cn_status s = conv_out_scratch(d, op, c, ov->dtype, &z);
    if (s != CN_OK) return s;
    cn_kernel_args conv = *a;
    conv.op = CN_OP_CONV2D;
    conv.n_out = 1;
    conv.out = &z;
    conv.n_ints = 7;
    s = conv_forward(&conv);
    if (s == CN_OK)
        s = cu_pool_index(d, op, &z, a->ints[7], ov, a->n_out > 1 ? &a->out[1] : NULL);
    cu_scratch_free(d, z.data);
    return s;
}

/* conv2d, conv2d_relu (the convolution, then relu over its output in a second pass: cuDNN's
 * fused conv-bias-activation is not used yet) and conv2d_max_pool2d. */
extern "C" cn_status cuda_conv2d(const cn_kernel_args *a) {
    if (a->op == CN_OP_CONV2D_MAX_POOL2D) return conv_pool_forward(a);
    cn_status s = conv_forward(a);
    if (s != CN_OK || a->op != CN_OP_CONV2D_RELU) return s;
    const cn_view *ov = &a->out[0];
    int64_t total = 1;
    for (int k = 0; k < ov->ndim; k++) total *= ov->shape[k];
    if (total == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    int es = (int)cn_dtype_size(ov->dtype);
    if (ov->dtype == CN_F64)
        relu_kernel<double><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
            (char *)ov->data, total, ov->dtype, es);
    else
        relu_kernel<float><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
            (char *)ov->data, total, ov->dtype, es);
    return cu_check_launch(cn_op_name(a->op), "relu_kernel");
}

/* ---- the input's gradient ----------------------------------------------------------------------- */

/* in = (g [N,O,OH,OW], w [O,Cg,KH,KW]); out = gx [N,C,H,W] contiguous. */
extern "C" cn_status cuda_conv2d_backward_input(const cn_kernel_args *a) {
    const char *op = "conv2d_backward_input";
    const cn_view *gv = &a->in[0], *wv = &a->in[1], *ov = &a->out[0];
    cu_conv_geom g; /* dtypes: f32, f64, f16 or bf16 (backend.c), all alike */
    cn_status s = cu_conv_geom_init(&g, a);
    if (s != CN_OK) return s;
    int64_t plane = g.Cg * g.H * g.W;
    if (g.N * g.groups == 0 || plane == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    size_t es = cn_dtype_size(ov->dtype);
    if (g.Og == 0 || g.K == 0 || g.P == 0) /* nothing flows back */
        return cu_check(op, cudaMemsetAsync(ov->data, 0, (size_t)(g.N * g.C * g.H * g.W) * es,
                                            d->stream), "cudaMemsetAsync");
    if (cu_cudnn_enabled()) {
        s = cu_cudnn_conv_backward_input(d, a, &g);
        if (s != CU_NOT_HANDLED) return s;
    }

    const void *w, *gd;
    void *w_owned, *g_owned = NULL, *cols = NULL;
    s = dense_data(d, op, wv, &w, &w_owned);
    if (s == CN_OK) s = dense_data(d, op, gv, &gd, &g_owned);
    int64_t nb = chunk_images(&g, es);
    if (s == CN_OK) s = cu_scratch(d, op, (size_t)(nb * g.groups * g.K * g.P) * es, &cols);
    for (int64_t n0 = 0; s == CN_OK && n0 < g.N; n0 += nb) {
        int64_t m = g.N - n0 < nb ? g.N - n0 : nb;
        for (int64_t grp = 0; s == CN_OK && grp < g.groups; grp++) {
            /* cols^T [P, K] = g^T [P, Og] @ w_g [Og, K], column-major */
            cu_gemm_args ga;
            memset(&ga, 0, sizeof ga);
            ga.dtype = ga.c_dtype = ov->dtype;
            ga.trans_b = 1;
            ga.m = g.P, ga.n = g.K, ga.k = g.Og;
            ga.a = (const char *)gd + (size_t)((n0 * g.O + grp * g.Og) * g.P) * es;
            ga.lda = g.P, ga.stride_a = g.O * g.P;
            ga.b = (const char *)w + (size_t)(grp * g.Og * g.K) * es;
            ga.ldb = g.K, ga.stride_b = 0;
            ga.c = (char *)cols + (size_t)(grp * g.K * g.P) * es;
            ga.ldc = g.P, ga.stride_c = g.groups * g.K * g.P;
            ga.batch = m;
            s = cu_gemm(d, op, &ga);
        }
        if (s != CN_OK) break;
        int64_t total = m * g.C * g.H * g.W;
        if (ov->dtype == CN_F64)
            col2im_kernel<double><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
                g, (const char *)cols, n0, m, (char *)ov->data, ov->dtype, (int)es);
        else
            col2im_kernel<float><<<cu_blocks(total), CU_THREADS, 0, d->stream>>>(
                g, (const char *)cols, n0, m, (char *)ov->data, ov->dtype, (int)es);
        s = cu_check_launch(op, "col2im_kernel");
    }
    cu_scratch_free(d, cols);
    cu_scratch_free(d, g_owned);
    cu_scratch_free(d, w_owned);
    return s;
}

/* ---- the weight's gradient ---------------------------------------------------------------------- */

/* in = (g [N,O,OH,OW], x [N,C,H,W]); out = gw [O,Cg,KH,KW] contiguous. f16/bf16 accumulate the
 * images in an f32 buffer and round once at the end. */
extern "C" cn_status cuda_conv2d_backward_weight(const cn_kernel_args *a) {
    const char *op = "conv2d_backward_weight";
    const cn_view *gv = &a->in[0], *xv = &a->in[1], *ov = &a->out[0];
    cu_conv_geom g; /* dtypes: f32, f64, f16 or bf16 (backend.c), all alike */
    cn_status s = cu_conv_geom_init(&g, a);
    if (s != CN_OK) return s;
    int64_t numel = g.O * g.K;
    if (numel == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    cn_dtype dt = ov->dtype;
    size_t es = cn_dtype_size(dt);
    if (g.N * g.groups == 0 || g.P == 0) /* an empty batch: the gradient is zero */
        return cu_check(op, cudaMemsetAsync(ov->data, 0, (size_t)numel * es, d->stream),
                        "cudaMemsetAsync");
    if (cu_cudnn_enabled()) {
        s = cu_cudnn_conv_backward_weight(d, a, &g);
        if (s != CU_NOT_HANDLED) return s;
    }

    int half = dt == CN_F16 || dt == CN_BF16;
    const void *gd;
    void *g_owned, *col = NULL, *acc = ov->data, *acc_owned = NULL;
    s = dense_data(d, op, gv, &gd, &g_owned);
    if (s == CN_OK && half) {
        s = cu_scratch(d, op, (size_t)numel * sizeof(float), &acc_owned);
        acc = acc_owned;
    }
    size_t acc_es = half ? sizeof(float) : es;
    if (s == CN_OK)
        s = cu_check(op, cudaMemsetAsync(acc, 0, (size_t)numel * acc_es, d->stream),
                     "cudaMemsetAsync");
    int64_t nb = chunk_images(&g, es);
    if (s == CN_OK) s = cu_scratch(d, op, (size_t)(nb * g.groups * g.K * g.P) * es, &col);
    for (int64_t n0 = 0; s == CN_OK && n0 < g.N; n0 += nb) {
        int64_t m = g.N - n0 < nb ? g.N - n0 : nb;
        s = launch_im2col(d, op, &g, xv, n0, m, col);
        for (int64_t i = 0; s == CN_OK && i < m; i++) {
            /* gw_g^T [K, Og] += col [K, P] @ g^T [P, Og], column-major; batched over groups */
            cu_gemm_args ga;
            memset(&ga, 0, sizeof ga);
            ga.dtype = dt;
            ga.c_dtype = half ? CN_F32 : dt;
            ga.trans_a = 1;
            ga.m = g.K, ga.n = g.Og, ga.k = g.P;
            ga.a = (const char *)col + (size_t)(i * g.groups * g.K * g.P) * es;
            ga.lda = g.P, ga.stride_a = g.K * g.P;
            ga.b = (const char *)gd + (size_t)((n0 + i) * g.O * g.P) * es;
            ga.ldb = g.P, ga.stride_b = g.Og * g.P;
            ga.c = acc;
            ga.ldc = g.K, ga.stride_c = g.Og * g.K;
            ga.batch = g.groups;
            ga.beta = 1.0;
            s = cu_gemm(d, op, &ga);
        }
    }
    if (s == CN_OK && half) { /* round the f32 sums once */
        cn_view src = *ov, dst = *ov;
        src.dtype = CN_F32;
        src = dense_view(&src, acc);
        s = cu_copy_view(d, op, &dst, &src);
    }
    cu_scratch_free(d, col);
    cu_scratch_free(d, acc_owned);
    cu_scratch_free(d, g_owned);
    return s;
}

/* ---- conv2d_max_pool2d's backward ----------------------------------------------------------- */

/* out[r] = the sum of the n elements of row r of a dense [rows, n] matrix (one thread a row, in
 * the compute type T: double for f64, float otherwise). */
template <typename T>
__global__ void plane_sum_kernel(const char *z, char *out, int64_t rows, int64_t n, int dt,
                                 int es) {
    int64_t r = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) return;
    T acc = 0;
    for (int64_t i = 0; i < n; i++) acc += cu_ld<T>(z + (size_t)(r * n + i) * es, dt);
    cu_st<T>(out + (size_t)r * es, dt, acc);
}

/* in = (g [N,O,PH,PW], idx u8, x, w); ints = conv2d's 7, k, want_gx, want_gw, want_gb; out = the
 * wanted of gx, gw, gb [N, O]: the convolution's output gradient gz into a scratch buffer
 * (max_pool2d_backward_index), then conv2d's two backward kernels and the planes' sums of it. */
extern "C" cn_status cuda_conv2d_max_pool2d_backward(const cn_kernel_args *a) {
    const char *op = "conv2d_max_pool2d_backward";
    const cn_conv_geometry *c = cn__kernel_geometry("cuda", a);
    if (!c) return CN_ERR_INVALID_ARG;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    const cn_view *gv = &a->in[0];
    int64_t k = a->ints[7];
    size_t es = cn_dtype_size(gv->dtype);
    cn_view z;
    cn_status s = conv_out_scratch(d, op, c, gv->dtype, &z);
    if (s != CN_OK) return s;
    /* gz: the pool's backward, its geometry that of a k x k pool of z */
    cn_conv_geometry pg = {.n = c->n, .c = c->o, .h = c->oh, .w = c->ow, .o = c->o,
                           .oh = c->oh / k, .ow = c->ow / k, .kh = k, .kw = k, .sh = k, .sw = k};
    const int64_t pool_ints[6] = {k, k, k, k, 0, 0};
    cn_kernel_args pa = *a;
    pa.op = CN_OP_MAX_POOL2D_BACKWARD_INDEX;
    pa.n_in = 2;
    pa.n_out = 1;
    pa.out = &z;
    pa.ints = pool_ints;
    pa.n_ints = 6;
    pa.conv = &pg;
    s = cuda_max_pool2d_backward_index(&pa);
    int o = 0;
    for (int i = 0; i < 3 && s == CN_OK; i++) {
        if (!a->ints[8 + i]) continue;
        const cn_view *ov = &a->out[o++];
        if (i == 2) {
            int64_t rows = c->n * c->o, n = c->oh * c->ow;
            if (rows == 0) continue;
            if (gv->dtype == CN_F64)
                plane_sum_kernel<double><<<cu_blocks(rows), CU_THREADS, 0, d->stream>>>(
                    (const char *)z.data, (char *)ov->data, rows, n, gv->dtype, (int)es);
            else
                plane_sum_kernel<float><<<cu_blocks(rows), CU_THREADS, 0, d->stream>>>(
                    (const char *)z.data, (char *)ov->data, rows, n, gv->dtype, (int)es);
            s = cu_check_launch(op, "plane_sum_kernel");
            continue;
        }
        cn_view in2[2] = {z, a->in[i == 0 ? 3 : 2]}; /* (gz, w) or (gz, x) */
        cn_kernel_args ca = *a;
        ca.op = i == 0 ? CN_OP_CONV2D_BACKWARD_INPUT : CN_OP_CONV2D_BACKWARD_WEIGHT;
        ca.in = in2;
        ca.n_in = 2;
        ca.out = ov;
        ca.n_out = 1;
        ca.n_ints = 7;
        s = i == 0 ? cuda_conv2d_backward_input(&ca) : cuda_conv2d_backward_weight(&ca);
    }
    cu_scratch_free(d, z.data);
    return s;
}
