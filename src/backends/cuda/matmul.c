/* CUDA matrix multiply through cuBLAS: batched, strided, f32/f64 and f16/bf16 with f32
 * accumulation (cublasGemmStridedBatchedEx).
 *
 * a: [B.., M, K] @ b: [B.., K, N] -> out: [B.., M, N] contiguous; batch dims of a and b may have
 * any strides, 0 included (broadcast). cuBLAS is column-major, so the row-major product is done
 * as out^T [N, M] = b^T [N, K] @ a^T [K, M]: a row-major matrix is its transpose in column-major
 * terms, read in place. An operand is read in place when each matrix is row- or column-major
 * with a valid leading dimension and its batch dims fold into one stride (0 for a broadcast);
 * otherwise it is packed into a dense scratch copy first.
 *
 * Precision: f32 uses CUBLAS_COMPUTE_32F (plain FP32, no TF32), f64 CUBLAS_COMPUTE_64F, f16 and
 * bf16 CUBLAS_COMPUTE_32F (tensor cores, f32 sums, one rounding to the output). */
#include <limits.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "core/backend_common.h"

/* ---- one GEMM ------------------------------------------------------------------------------------ */

static cudaDataType_t cuda_type(cn_dtype dt) {
    switch (dt) {
    case CN_F64: return CUDA_R_64F;
    case CN_F16: return CUDA_R_16F;
    case CN_BF16: return CUDA_R_16BF;
    default: return CUDA_R_32F;
    }
}

cn_status cu_gemm(cu_dev *d, const char *op, const cu_gemm_args *g) {
    if (g->m == 0 || g->n == 0 || g->batch == 0) return CN_OK;
    if (g->m > INT_MAX || g->n > INT_MAX || g->k > INT_MAX || g->lda > INT_MAX ||
        g->ldb > INT_MAX || g->ldc > INT_MAX)
        return cn_set_error(CN_ERR_BACKEND, op,
                            "a matrix dim or leading dimension (m=%lld, n=%lld, k=%lld) exceeds "
                            "cuBLAS's int range; split the product into smaller blocks",
                            (long long)g->m, (long long)g->n, (long long)g->k);
    int f64 = g->dtype == CN_F64;
    cublasComputeType_t compute = f64 ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
    double alpha_d = 1.0, beta_d = g->beta;
    float alpha_f = 1.0f, beta_f = (float)g->beta;
    const void *alpha = f64 ? (const void *)&alpha_d : (const void *)&alpha_f;
    const void *beta = f64 ? (const void *)&beta_d : (const void *)&beta_f;
    size_t es = cn_dtype_size(g->dtype), ces = cn_dtype_size(g->c_dtype);
    /* cuBLAS takes an int batch count: larger batches go in slices */
    for (int64_t b0 = 0; b0 < g->batch; b0 += INT_MAX) {
        int64_t nb = g->batch - b0 < INT_MAX ? g->batch - b0 : INT_MAX;
        cublasStatus_t st = cublasGemmStridedBatchedEx(
            d->blas, g->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, g->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
            (int)g->m, (int)g->n, (int)g->k, alpha,
            (const char *)g->a + (size_t)(b0 * g->stride_a) * es, cuda_type(g->dtype), (int)g->lda,
            g->stride_a, (const char *)g->b + (size_t)(b0 * g->stride_b) * es, cuda_type(g->dtype),
            (int)g->ldb, g->stride_b, beta, (char *)g->c + (size_t)(b0 * g->stride_c) * ces,
            cuda_type(g->c_dtype), (int)g->ldc, g->stride_c, (int)nb, compute,
            CUBLAS_GEMM_DEFAULT);
        if (st != CUBLAS_STATUS_SUCCESS) return cu_blas_error(op, st, "cublasGemmStridedBatchedEx");
    }
    return CN_OK;
}

/* ---- one operand ---------------------------------------------------------------------------------- */

/* How cuBLAS reads an operand of the batch: a [rows, cols] matrix per batch element. */
typedef struct operand {
    const void *data;
    int col_major;       /* 1: unit row stride (the matrix is stored transposed) */
    int64_t ld;          /* leading dimension */
    int64_t batch_stride;
    void *packed;        /* scratch holding a dense copy, or NULL */
} operand;

/* The batch dims of v (all but the last two; size-1 dims ignored) as one stride, when batch
 * element i sits at i * stride: each dim steps exactly over the ones inside it, or all are 0 (a
 * broadcast). */
static int fold_batch(const cn_view *v, int64_t *stride) {
    int64_t size = 1, inner = 0;
    int seen = 0;
    for (int k = v->ndim - 3; k >= 0; k--) {
        if (v->shape[k] == 1) continue;
        if (!seen) {
            inner = v->strides[k];
            seen = 1;
        } else if (v->strides[k] != inner * size) {
            return 0;
        }
        size *= v->shape[k];
    }
    *stride = inner;
    return 1;
}

static int plan_operand(const cn_view *v, int64_t rows, int64_t cols, operand *o) {
    int nd = v->ndim;
    int64_t rs = v->strides[nd - 2], cs = v->strides[nd - 1];
    int64_t min_row_ld = cols > 1 ? cols : 1, min_col_ld = rows > 1 ? rows : 1;
    if (!fold_batch(v, &o->batch_stride)) return 0;
    if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= min_row_ld)) {
        o->col_major = 0;
        o->ld = rows > 1 ? rs : min_row_ld;
        return o->ld <= INT_MAX;
    }
    if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= min_col_ld)) {
        o->col_major = 1;
        o->ld = cols > 1 ? cs : min_col_ld;
        return o->ld <= INT_MAX;
    }
    return 0;
}

/* Fills o for v: in place when possible, otherwise a dense [batch.., rows, cols] copy. */
static cn_status prepare_operand(cu_dev *d, const cn_view *v, int64_t count, int64_t rows,
                                 int64_t cols, operand *o) {
    memset(o, 0, sizeof *o);
    o->data = v->data;
    if (plan_operand(v, rows, cols, o)) return CN_OK;
    size_t es = cn_dtype_size(v->dtype);
    cn_status s = cu_scratch(d, "matmul", (size_t)(count * rows * cols) * es, &o->packed);
    if (s != CN_OK) return s;
    cn_view dst = *v;
    dst.data = o->packed;
    int64_t stride = 1;
    for (int k = v->ndim - 1; k >= 0; k--) {
        dst.strides[k] = stride;
        stride *= v->shape[k];
    }
    s = cu_copy_view(d, "matmul", &dst, v);
    if (s != CN_OK) {
        cu_scratch_free(d, o->packed);
        o->packed = NULL;
        return s;
    }
    o->data = o->packed;
    o->col_major = 0;
    o->ld = cols > 1 ? cols : 1;
    o->batch_stride = rows * cols;
    return CN_OK;
}

/* ---- the kernel ------------------------------------------------------------------------------------ */

cn_status cuda_matmul(const cn_kernel_args *args) {
    const char *op = "matmul";
    const cn_view *av = &args->in[0], *bv = &args->in[1], *cv = &args->out[0];
    cn_dtype dt = cv->dtype;
    /* Unreachable through the router: dtypes[op] (backend.c) admits f32, f64, f16 and bf16, and
     * the front-end gives a, b and out one dtype. Kept because cuBLAS would read another dtype's
     * bytes as one of those (past the end of a 1-byte buffer). */
    int is_int = dt == CN_I32 || dt == CN_I64;
    if ((dt != CN_F32 && dt != CN_F64 && dt != CN_F16 && dt != CN_BF16 && !is_int) ||
        av->dtype != dt || bv->dtype != dt)
        return cn__kernel_dtype_error("cuda", args->op, av->dtype != dt ? av->dtype : bv->dtype);
    int nd = cv->ndim;
    if (nd < 2 || av->ndim != nd || bv->ndim != nd)
        return cn_set_error(CN_ERR_SHAPE, op, "operands must share ndim >= 2; call cn_matmul");
    if (is_int) { /* i32, i64: a kernel of our own (matmul_int.cu) */
        cu_dev *di = cu_device(op, args->device);
        return di ? cu_matmul_int(di, args) : cn_last_status();
    }
    int64_t M = av->shape[nd - 2], K = av->shape[nd - 1], N = bv->shape[nd - 1];
    int64_t count = 1;
    for (int k = 0; k < nd - 2; k++) count *= cv->shape[k];
    if (count == 0 || M == 0 || N == 0) return CN_OK;
    cu_dev *d = cu_device(op, args->device);
    if (!d) return cn_last_status();
    size_t es = cn_dtype_size(dt);
    if (K == 0) /* an empty sum */
        return cu_check(op, cudaMemsetAsync(cv->data, 0, (size_t)(count * M * N) * es, d->stream),
                        "cudaMemsetAsync");

    operand a, b;
    cn_status s = prepare_operand(d, av, count, M, K, &a);
    if (s != CN_OK) return s;
    s = prepare_operand(d, bv, count, K, N, &b);
    if (s == CN_OK) {
        /* out^T [N, M] = op(b) [N, K] @ op(a) [K, M]; a row-major operand is already its
         * transpose in column-major terms, a column-major one needs the transpose flag */
        cu_gemm_args g;
        memset(&g, 0, sizeof g);
        g.dtype = g.c_dtype = dt;
        g.trans_a = b.col_major;
        g.trans_b = a.col_major;
        g.m = N, g.n = M, g.k = K;
        g.a = b.data, g.lda = b.ld, g.stride_a = b.batch_stride;
        g.b = a.data, g.ldb = a.ld, g.stride_b = a.batch_stride;
        g.c = cv->data, g.ldc = N, g.stride_c = M * N;
        g.batch = count;
        s = cu_gemm(d, op, &g);
    }
    cu_scratch_free(d, a.packed);
    cu_scratch_free(d, b.packed);
    return s;
}
