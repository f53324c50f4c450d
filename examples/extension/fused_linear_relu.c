/* The fused linear + bias + relu op declared in fused.cnext: its shape function, its CPU kernel
 * and its backward. cinder-extgen generates fused_linear_relu(x, w, b) and the registration; this
 * file is all the op's author writes.
 *
 *   y = relu(x @ w^T + b)      x: [N, in], w: [out, in], b: [out] or absent -> y: [N, out]
 *
 * The kernel is one GEMM (cn_cpu_gemm, the one cinder's own kernels use) followed by one pass that adds the bias and clamps at zero,
 * instead of the three passes (matmul, add, relu) of the unfused composition, split by blocks of
 * output columns over cinder's CPU threads (cn_cpu_parallel_for). The backward uses public ops
 * only. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/cinder.h"
#include "fused.h"
#include "fused_operand.h"

#define OP "fused_linear_relu"

/* ---- shape --------------------------------------------------------------------------------- */

cn_status fused_linear_relu_shape(const cn_view *in, int n_in, const int64_t *ints,
                                  const double *reals, cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    const cn_view *x = &in[FUSED_LINEAR_RELU_IN_X], *w = &in[FUSED_LINEAR_RELU_IN_W];
    const cn_view *b = &in[FUSED_LINEAR_RELU_IN_B];
    if (x->ndim != 2 || w->ndim != 2)
        return cn_set_error(CN_ERR_SHAPE, OP,
                            "x must be [N, in] and w [out, in], but x has %d "
                            "dims and w %d; reshape x to 2-D first",
                            x->ndim, w->ndim);
    if (x->shape[1] != w->shape[1])
        return cn_set_error(CN_ERR_SHAPE, OP,
                            "x is [%lld, %lld] but w is [%lld, %lld]: their "
                            "last dims (in) must agree",
                            (long long)x->shape[0], (long long)x->shape[1], (long long)w->shape[0],
                            (long long)w->shape[1]);
    if (b->ndim >= 0 && (b->ndim != 1 || b->shape[0] != w->shape[0]))
        return cn_set_error(CN_ERR_SHAPE, OP,
                            "b must be [%lld] (one entry per output of w), "
                            "but it has %d dims",
                            (long long)w->shape[0], b->ndim);
    if (x->dtype != CN_F32 && x->dtype != CN_F64)
        return cn_set_error(CN_ERR_DTYPE, OP,
                            "x is %s; the kernel takes f32 or f64 (cast with "
                            "cn_cast)",
                            cn_dtype_name(x->dtype));
    if (w->dtype != x->dtype || (b->ndim >= 0 && b->dtype != x->dtype))
        return cn_set_error(CN_ERR_DTYPE, OP,
                            "x is %s but w is %s%s%s: all inputs must share a "
                            "dtype (cast with cn_cast)",
                            cn_dtype_name(x->dtype), cn_dtype_name(w->dtype),
                            b->ndim >= 0 ? " and b " : "",
                            b->ndim >= 0 ? cn_dtype_name(b->dtype) : "");
    out[FUSED_LINEAR_RELU_OUT_Y].dtype = x->dtype;
    out[FUSED_LINEAR_RELU_OUT_Y].ndim = 2;
    out[FUSED_LINEAR_RELU_OUT_Y].shape[0] = x->shape[0];
    out[FUSED_LINEAR_RELU_OUT_Y].shape[1] = w->shape[0];
    return CN_OK;
}

/* ---- CPU kernel ---------------------------------------------------------------------------- */

/* A [rows, cols] view as a row-major GEMM operand: as stored (rows contiguous), transposed
 * (columns contiguous), or packed into a dense copy (any other strides, broadcasts included). */
typedef struct operand {
    const void *data;
    int trans; /* stored transposed */
    int64_t ld;
    void *packed; /* owned copy, or NULL */
} operand;

static cn_status make_operand(const cn_view *v, size_t esize, operand *o) {
    int64_t r = v->shape[0], c = v->shape[1];
    o->packed = NULL;
    o->data = v->data;
    if (fused_plan_operand(v, &o->trans, &o->ld)) return CN_OK;
    o->packed = malloc((size_t)(r * c) * esize);
    if (!o->packed)
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, OP, "packing a [%lld, %lld] operand",
                            (long long)r, (long long)c);
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++)
            memcpy((char *)o->packed + (size_t)(i * c + j) * esize,
                   (const char *)v->data + (size_t)(i * v->strides[0] + j * v->strides[1]) * esize,
                   esize);
    o->data = o->packed;
    return CN_OK;
}

/* y[i, j] = max(acc[i, j] + b[j], 0) for the columns j in [lo, hi); acc is dense [N, O] (it may
 * be y itself when y is dense). Rows with unit column strides take a loop the compiler
 * vectorises; any other strides, the general one. */
#define FINISH(T, name)                                                                            \
    static void name(const cn_view *y, const T *acc, const cn_view *b, int64_t n, int64_t o,       \
                     int64_t lo, int64_t hi) {                                                     \
        T *yd = y->data;                                                                           \
        const T *bd = b->data;                                                                     \
        int64_t ys0 = y->strides[0], ys1 = y->strides[1], bs = bd ? b->strides[0] : 0;            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            const T *arow = acc + i * o;                                                           \
            T *yrow = yd + i * ys0;                                                                \
            if (ys1 == 1 && bs == 1) {                                                             \
                for (int64_t j = lo; j < hi; j++) {                                                \
                    T z = arow[j] + bd[j];                                                         \
                    yrow[j] = z > 0 ? z : (T)0;                                                    \
                }                                                                                  \
            } else {                                                                               \
                for (int64_t j = lo; j < hi; j++) {                                                \
                    T z = arow[j] + (bd ? bd[j * bs] : (T)0);                                      \
                    yrow[j * ys1] = z > 0 ? z : (T)0;                                              \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
FINISH(float, finish_f32)
FINISH(double, finish_f64)

/* Columns of y are computed in blocks of this many (the GEMM kernels' register tile), and a
 * product below PARALLEL_MACS multiply-adds stays on one thread. */
#define COLUMN_BLOCK 16
#define PARALLEL_MACS (1 << 21)

/* One forward: y = relu(a @ bt^T + bias), with its operands ready. */
typedef struct forward_job {
    const cn_view *y, *bias;
    operand a, bt;
    void *acc;
    int64_t n, k, o;
    int f64;
} forward_job;

/* Column blocks [begin, end) of y: their GEMM (rows of w), then their bias and relu while the
 * block is still in cache. */
static void forward_columns(void *ctx, int64_t begin, int64_t end) {
    const forward_job *j = ctx;
    int64_t lo = begin * COLUMN_BLOCK, hi = end * COLUMN_BLOCK < j->o ? end * COLUMN_BLOCK : j->o;
    if (lo >= hi) return;
    size_t esize = j->f64 ? sizeof(double) : sizeof(float);
    char *acc = (char *)j->acc + (size_t)lo * esize;
    int m = (int)j->n, cols = (int)(hi - lo), k = (int)j->k, o = (int)j->o;
    if (k == 0) { /* an empty sum; BLAS is not needed */
        for (int64_t i = 0; i < j->n; i++)
            memset(acc + (size_t)(i * j->o) * esize, 0, (size_t)cols * esize);
    } else {
        /* w's rows lo..hi: rows of the stored matrix, or its columns when stored transposed */
        const char *w = (const char *)j->bt.data + (size_t)(j->bt.trans ? lo : lo * j->bt.ld) * esize;
        /* acc[N, O] = x[N, K] @ w^T: w enters transposed, so flip how it is stored. The sizes
         * were checked by the caller, so this cannot fail. */
        cn_cpu_gemm(j->f64 ? CN_F64 : CN_F32, j->a.trans, !j->bt.trans, m, cols, k, j->a.data,
                    j->a.ld, w, j->bt.ld, 0.0, acc, o);
    }
    if (j->f64)
        finish_f64(j->y, j->acc, j->bias, j->n, j->o, lo, hi);
    else
        finish_f32(j->y, j->acc, j->bias, j->n, j->o, lo, hi);
}

cn_status fused_linear_relu_cpu(const cn_kernel_args *args) {
    const cn_view *x = &args->in[FUSED_LINEAR_RELU_IN_X], *w = &args->in[FUSED_LINEAR_RELU_IN_W];
    const cn_view *b = &args->in[FUSED_LINEAR_RELU_IN_B], *y = &args->out[FUSED_LINEAR_RELU_OUT_Y];
    int64_t n = x->shape[0], k = x->shape[1], o = w->shape[0];
    if (n == 0 || o == 0) return CN_OK;
    if (n > INT_MAX || k > INT_MAX || o > INT_MAX)
        return cn_set_error(CN_ERR_OVERFLOW, OP,
                            "[%lld, %lld] x [%lld, %lld] exceeds the int "
                            "sizes of BLAS",
                            (long long)n, (long long)k, (long long)o, (long long)k);
    int f64 = x->dtype == CN_F64;
    size_t esize = f64 ? sizeof(double) : sizeof(float);

    /* GEMM straight into y when it is dense, else into scratch that the last pass reads */
    int y_dense = (o == 1 || y->strides[1] == 1) && (n == 1 || y->strides[0] == o);
    void *acc = y_dense ? y->data : malloc((size_t)(n * o) * esize);
    if (!acc)
        return cn_set_error(CN_ERR_OUT_OF_MEMORY, OP, "scratch for a [%lld, %lld] product",
                            (long long)n, (long long)o);
    cn_view none = {0};
    forward_job j = {.y = y, .bias = b->ndim >= 0 ? b : &none, .acc = acc, .n = n, .k = k,
                     .o = o, .f64 = f64};
    cn_status st = CN_OK;
    if (k == 0 || ((st = make_operand(x, esize, &j.a)) == CN_OK &&
                   (st = make_operand(w, esize, &j.bt)) == CN_OK)) {
        /* blocks of columns on cinder's CPU threads, when the product is large enough to be
         * worth it: one per thread, since each block packs all of x again (the MLP's first
         * layer on Zen 4: 64-column blocks ran at 64-76 GFLOP/s inside a step, 128-column
         * blocks at 83-98; docs/benchmarks.md). A thread that starts late leaves its block to
         * the others. */
        int64_t blocks = (o + COLUMN_BLOCK - 1) / COLUMN_BLOCK;
        int64_t chunks = (double)n * (double)k * (double)o < PARALLEL_MACS ? 1 : cn_cpu_threads();
        cn_cpu_parallel_for(blocks, chunks, forward_columns, &j);
    }
    free(j.a.packed);
    free(j.bt.packed);
    if (!y_dense) free(acc);
    return st;
}

/* ---- backward ------------------------------------------------------------------------------ */

/* With z = x @ w^T + b and y = relu(z), the gradient reaching z is g' = g where y > 0, else 0
 * (y > 0 exactly where z > 0). Then gx = g' @ w, gw = g'^T @ x, gb = sum of g' over rows.
 *   g, g', y: [N, out]; x, gx: [N, in]; w, gw: [out, in]; b, gb: [out] */
cn_status fused_linear_relu_backward(cn_tensor *const *in, const int *needs_grad, int n_in, cn_tensor *const *out,
                                     cn_tensor *const *grad_out, int n_out, const int64_t *ints,
                                     const double *reals, cn_tensor **grad_in) {
    (void)n_in, (void)n_out, (void)ints, (void)reals;
    cn_tensor *x = in[FUSED_LINEAR_RELU_IN_X], *w = in[FUSED_LINEAR_RELU_IN_W];
    cn_tensor *b = in[FUSED_LINEAR_RELU_IN_B];
    cn_tensor *y = out[FUSED_LINEAR_RELU_OUT_Y], *g = grad_out[FUSED_LINEAR_RELU_OUT_Y];

    cn_tensor *zero = cn_zeros(NULL, 0, cn_dtype_of(y), cn_device_of(y));
    cn_tensor *live = cn_gt(y, zero);
    cn_tensor *gz = cn_where(live, g, zero);
    cn_tensor *gzt = cn_transpose(gz, 0, 1);
    /* only what is needed: the input of a first layer (a data batch) takes no gradient */
    int need_x = needs_grad[FUSED_LINEAR_RELU_IN_X], need_w = needs_grad[FUSED_LINEAR_RELU_IN_W];
    int need_b = b && needs_grad[FUSED_LINEAR_RELU_IN_B];
    cn_tensor *gx = need_x ? cn_matmul(gz, w) : NULL;
    cn_tensor *gw = need_w ? cn_matmul(gzt, x) : NULL;
    cn_tensor *gb = need_b ? cn_sum_dim(gz, 0, 0) : NULL;
    cn_release(zero);
    cn_release(live);
    cn_release(gz);
    cn_release(gzt);
    if ((need_x && !gx) || (need_w && !gw) || (need_b && !gb)) {
        cn_release(gx);
        cn_release(gw);
        cn_release(gb);
        return cn_last_status();
    }
    /* made here, so handed over as they are: each grad_in entry gives cinder one reference
     * (a tensor the backward was given would go in as cn_retain(t); extension.h) */
    grad_in[FUSED_LINEAR_RELU_IN_X] = gx;
    grad_in[FUSED_LINEAR_RELU_IN_W] = gw;
    grad_in[FUSED_LINEAR_RELU_IN_B] = gb;
    return CN_OK;
}
