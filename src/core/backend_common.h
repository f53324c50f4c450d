/* What every backend shares: view sizes, merging the dims of strided views, and the errors a
 * kernel raises for a dtype or an op it was not built for.
 *
 * This is the backends' common code (issue 14's "backends/common"). It lives in core because the
 * layering (docs/architecture.md, ../shared/tools/check-layers) lets a backend include core and
 * its own folder only, not another backend folder. Everything here is static inline: it computes
 * on view geometry alone (nothing device-specific), and it compiles into each backend as it is,
 * from .c and .cu files alike, so the CUDA module needs no symbol of libcinder for it (the errors
 * go through cn_set_error, cn_op_name and cn_dtype_name, which the module gets from its host
 * table: backends/cuda/host_module.c). */
#ifndef CINDER_CORE_BACKEND_COMMON_H
#define CINDER_CORE_BACKEND_COMMON_H

#include <limits.h>
#include <stdint.h>

#include "cinder/backend.h"
#include "cinder/error.h"
#include "cinder/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------------------------- */

/* The element count of v; 0 as soon as any dim is 0 (the product of the others may not fit). */
static inline int64_t cn__view_numel(const cn_view *v) {
    for (int d = 0; d < v->ndim; d++)
        if (v->shape[d] == 0) return 0;
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}

/* v itself, or for a 0-d view the equivalent [1] view, so that loops always have a last dim. */
static inline cn_view cn__view_at_least_1d(const cn_view *v) {
    cn_view r = *v;
    if (r.ndim == 0) {
        r.ndim = 1;
        r.shape[0] = 1;
        r.strides[0] = 0;
    }
    return r;
}

/* ---------------------------------------------------------------------------------------------- */

/* The most operands cn__merge_dims walks together (an output and three inputs: where). */
#define CN__MERGE_MAX_OPS 4

/* Appends a dim of one strided operand to (shape, stride)[0..*nd): a size-1 dim is dropped, and a
 * dim is merged into the previous one when one stride steps through both (the previous stride is
 * this one's times its size). */
static inline void cn__dims_push(int *nd, int64_t *shape, int64_t *stride, int64_t size,
                                 int64_t st) {
    if (size == 1) return;
    if (*nd > 0 && stride[*nd - 1] == st * size) {
        shape[*nd - 1] *= size;
        stride[*nd - 1] = st;
        return;
    }
    shape[*nd] = size;
    stride[*nd] = st;
    (*nd)++;
}

/* The dims of nops views of views[0]'s shape (without a zero size), walked together: size-1 dims
 * dropped, and dim d merged into d+1 wherever every operand steps through both as one, so dense
 * data becomes one run. Writes shape[0..nd) and strides[k][0..nd) in bytes (element strides times
 * esize[k]) and returns nd >= 1 (a scalar, or all dims of size 1: one dim of size 1, stride 0).
 * Entries past nd are left as they were. */
static inline int cn__merge_dims(int nops, const cn_view *const *views, const int64_t *esize,
                                 int64_t *shape, int64_t (*strides)[CN_MAX_DIMS]) {
    const cn_view *out = views[0];
    int nd = 0;
    for (int d = 0; d < out->ndim; d++) {
        if (out->shape[d] == 1) continue;
        shape[nd] = out->shape[d];
        for (int k = 0; k < nops; k++) strides[k][nd] = views[k]->strides[d] * esize[k];
        if (nd > 0) {
            int mergeable = 1;
            for (int k = 0; k < nops; k++)
                if (strides[k][nd - 1] != strides[k][nd] * shape[nd]) mergeable = 0;
            if (mergeable) {
                shape[nd - 1] *= shape[nd];
                for (int k = 0; k < nops; k++) strides[k][nd - 1] = strides[k][nd];
                shape[nd] = 1;
                continue;
            }
        }
        nd++;
    }
    if (nd == 0) {
        shape[0] = 1;
        for (int k = 0; k < nops; k++) strides[k][0] = 0;
        nd = 1;
    }
    return nd;
}

/* ---------------------------------------------------------------------------------------------- */

/* The argument checks of the GEMMs that extension kernels call (cn_cpu_gemm, cn_cuda_gemm), as
 * their documentation lists them: the dtype (f32 or f64, and f16 or bf16 where half_ok), negative
 * sizes, a leading dimension smaller than its row, a NULL operand of a non-empty product, and the
 * libraries' int sizes. Row-major: a is [m, k] (stored [k, m] when ta), b [k, n] (stored [n, k]
 * when tb), c [m, n]. CN_OK (with *empty set when m or n is 0: nothing to compute) or the error,
 * naming op. */
static inline cn_status cn__gemm_check(const char *op, cn_dtype dtype, int half_ok, int ta, int tb,
                                       int64_t m, int64_t n, int64_t k, const void *a,
                                       int64_t lda, const void *b, int64_t ldb, const void *c,
                                       int64_t ldc, int *empty) {
    *empty = 0;
    int half = dtype == CN_F16 || dtype == CN_BF16;
    if (dtype != CN_F32 && dtype != CN_F64 && !(half_ok && half))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "dtype %s: the GEMM takes %s; cast the "
                            "operands with cn_cast", cn_dtype_name(dtype),
                            half_ok ? "f32, f64, f16 or bf16" : "f32 or f64");
    if (m < 0 || n < 0 || k < 0)
        return cn_set_error(CN_ERR_INVALID_ARG, op, "negative size (m %lld, n %lld, k %lld)",
                            (long long)m, (long long)n, (long long)k);
    /* the rows as stored: a is [m, k] or [k, m], b [k, n] or [n, k] */
    int64_t a_row = ta ? m : k, b_row = tb ? k : n;
    if (lda < (a_row > 1 ? a_row : 1) || ldb < (b_row > 1 ? b_row : 1) || ldc < (n > 1 ? n : 1))
        return cn_set_error(CN_ERR_INVALID_ARG, op, "a leading dimension is smaller than its "
                            "row (lda %lld for %lld, ldb %lld for %lld, ldc %lld for %lld)",
                            (long long)lda, (long long)a_row, (long long)ldb, (long long)b_row,
                            (long long)ldc, (long long)n);
    if (m == 0 || n == 0) {
        *empty = 1;
        return CN_OK;
    }
    if ((k > 0 && (!a || !b)) || !c)
        return cn_set_error(CN_ERR_NULL_ARG, op, "'%s' is NULL for a [%lld, %lld] product",
                            !c ? "c" : !a ? "a" : "b", (long long)m, (long long)n);
    /* OpenBLAS and cuBLAS take int sizes */
    if (m > INT_MAX || n > INT_MAX || k > INT_MAX || lda > INT_MAX || ldb > INT_MAX ||
        ldc > INT_MAX)
        return cn_set_error(CN_ERR_OVERFLOW, op, "[%lld, %lld] x [%lld, %lld] exceeds the int "
                            "sizes of the GEMM libraries; split the product",
                            (long long)m, (long long)k, (long long)k, (long long)n);
    return CN_OK;
}

/* A kernel reached with a dtype its backend does not declare for op (cn_backend.dtypes): the
 * router refuses those before launching, so this is a guard against a wrong table or a direct
 * call. CN_ERR_DTYPE, naming op, dtype and backend. */
static inline cn_status cn__kernel_dtype_error(const char *backend, cn_op op, cn_dtype dt) {
    return cn_set_error(CN_ERR_DTYPE, cn_op_name(op),
                        "the %s backend has no %s kernel for dtype %s; cast the input with "
                        "cn_cast to a dtype the backend declares for the op",
                        backend, cn_op_name(op), cn_dtype_name(dt));
}

/* A kernel reached with an op it has no case for (an op its backend's table points at it but
 * that its switch lacks): CN_ERR_NO_KERNEL, naming op, backend and kernel, never a fall-through
 * to another op. */
static inline cn_status cn__kernel_op_error(const char *backend, const char *kernel, cn_op op) {
    return cn_set_error(CN_ERR_NO_KERNEL, cn_op_name(op),
                        "the %s backend's %s has no case for '%s'; add the op's case to the "
                        "kernel's op switch, or fix the backend's kernel table",
                        backend, kernel, cn_op_name(op));
}

/* The geometry of a window op's call (conv2d, the pools, their backward kernels): args->conv,
 * which the router computes and checks once; NULL with CN_ERR_INVALID_ARG for a call without
 * one (a direct call that bypassed the router), so a kernel never derives it from ints. */
static inline const cn_conv_geometry *cn__kernel_geometry(const char *backend,
                                                          const cn_kernel_args *a) {
    if (a->conv) return a->conv;
    cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                 "the %s kernel needs the geometry (cn_kernel_args.conv) that the router "
                 "computes; call the op through its cn_ function",
                 backend);
    return NULL;
}

/* ---- 1-D convolutions as 2-D ones (conv1d, conv_transpose1d) ----------------------------------
 * A 1-D convolution's geometry is the 2-D one with h = kh = 1 (backend.h), so a backend runs it
 * with its 2-D kernel once every 3-D operand [a, b, L] is seen as [a, b, 1, L]: the size-1 dim
 * gets the stride a dense tensor would have there (b's stride is left as it is). */
static inline void cn__view_unit_height(const cn_view *v, cn_view *r) {
    *r = *v;
    if (v->ndim != 3) return;
    r->ndim = 4;
    r->shape[3] = v->shape[2];
    r->strides[3] = v->strides[2];
    r->shape[2] = 1;
    r->strides[2] = v->shape[2] * v->strides[2];
}

/* *b: a's call with its inputs and outputs (at most 4 of each) seen through
 * cn__view_unit_height, into in[] and out[]. */
static inline void cn__args_unit_height(const cn_kernel_args *a, cn_kernel_args *b, cn_view *in,
                                        cn_view *out) {
    *b = *a;
    for (int i = 0; i < a->n_in && i < 4; i++) cn__view_unit_height(&a->in[i], &in[i]);
    for (int i = 0; i < a->n_out && i < 4; i++) cn__view_unit_height(&a->out[i], &out[i]);
    b->in = in;
    b->out = out;
}

#ifdef __cplusplus
}
#endif

#endif
