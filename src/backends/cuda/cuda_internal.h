/* The CUDA backend's internals, shared by its C files (backend.c, allocator.c, matmul.c,
 * conv_cudnn.c) and its CUDA files (one per op family). Everything here is C: the .cu files see
 * it through extern "C".
 *
 * Model. Each device has one stream; every kernel, copy and library call of the backend goes on
 * it, so work runs in call order and a block of freed memory can be handed to the next
 * allocation at once (the next user is ordered after the last one). Host code waits only where
 * it needs a value: copy_to_host, synchronize, and the checks that must fail cleanly before a
 * kernel writes anything (integer division by zero, out-of-range indices). */
#ifndef CINDER_CUDA_INTERNAL_H
#define CINDER_CUDA_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cinder/backend.h"
#include "cinder/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Devices the backend addresses; more are ignored. */
#define CU_MAX_DEVICES 16

/* ---- the host (host_module.c in libcinder_cuda.so, host_static.c in libcinder_cuda.a) -------- */

/* Keeps the services cinder handed the module (cn_backend_module_init). The module's calls of
 * cn_set_error, cn_dtype_size, ... go through them in the shared module, and straight to the
 * linked-in libcinder in the static archive. Returns 0 when the host's ABI version differs. */
int cu_host_attach(const cn_backend_host *host);

/* ---- devices (backend.c) ----------------------------------------------------------------------- */

/* Per-device state, made on first use of the device. */
typedef struct cu_dev {
    int index;
    cudaStream_t stream;    /* every operation of the backend on this device */
    cublasHandle_t blas;    /* bound to stream */
    void *cudnn;            /* cudnnHandle_t, made on the first cuDNN convolution (conv_cudnn.c) */
} cu_dev;

/* Makes `device` current on this thread and returns its state, creating it on first use. NULL
 * with the error set (CN_ERR_DEVICE_UNAVAILABLE, CN_ERR_BACKEND) on failure; op names the caller. */
cu_dev *cu_device(const char *op, int device);

/* Serialises the creation of library handles that are made lazily (cuDNN). */
void cu_lock(void);
void cu_unlock(void);

/* Records a failed CUDA runtime call: CN_ERR_BACKEND (CN_ERR_OUT_OF_MEMORY for an allocation
 * failure) with CUDA's own message, naming op and what was called. Clears CUDA's non-sticky
 * error state. Returns the status. */
cn_status cu_error(const char *op, cudaError_t e, const char *what);

/* CN_OK when e is cudaSuccess, else cu_error. */
cn_status cu_check(const char *op, cudaError_t e, const char *what);

/* After a kernel launch: reports a launch failure (bad configuration, no kernel image for this
 * GPU). Errors of the running kernel surface later, at the next synchronisation. */
cn_status cu_check_launch(const char *op, const char *kernel);

/* Records a failed cuBLAS call (CN_ERR_BACKEND with cuBLAS's status name). */
cn_status cu_blas_error(const char *op, cublasStatus_t s, const char *what);

/* Waits for the device's stream. */
cn_status cu_sync(cu_dev *d, const char *op);

/* Reads one int64 from device memory (waits for the stream first). */
cn_status cu_read_i64(cu_dev *d, const char *op, const int64_t *src, int64_t *out);

/* Kernel scratch memory from the caching allocator (failure injection and OOM handling
 * included). Free it as soon as the kernels that use it are queued: stream order protects it. */
cn_status cu_scratch(cu_dev *d, const char *op, size_t nbytes, void **ptr);
void cu_scratch_free(cu_dev *d, void *ptr);

/* Non-zero when convolutions may use cuDNN (compiled in and not switched off). */
int cu_cudnn_enabled(void);

/* ---- the caching allocator (allocator.c) -------------------------------------------------------- */

/* Returns a block of at least nbytes (nbytes may be 0) on `device`, which must be current. On a
 * driver failure the device's cache is emptied and the allocation retried once; then
 * CN_ERR_OUT_OF_MEMORY with the error set, naming op. Counts as one allocation for
 * cn_alloc_fail_after. */
cn_status cu_cache_alloc(int device, const char *op, size_t nbytes, void **ptr);

/* Returns ptr (from cu_cache_alloc on this device) to the cache. Never calls the driver. */
void cu_cache_free(int device, void *ptr);

/* Frees every cached block of `device` (current; its stream idle). */
cn_status cu_cache_empty(int device);

void cu_cache_stats(int device, cn_cuda_memory_stats_t *out);
void cu_cache_reset_peaks(int device);

/* ---- shared geometry --------------------------------------------------------------------------- */

/* Up to CU_ITER_MAX_OPS views of one shape (operand 0 the output), with size-1 dims dropped and
 * dims merged where every operand steps through them as one, exactly as the CPU's iterator does.
 * Passed by value to elementwise kernels. */
#define CU_ITER_MAX_OPS 4

typedef struct cu_iter {
    int nops;
    int ndim;                                      /* >= 1 */
    int64_t numel;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CU_ITER_MAX_OPS][CN_MAX_DIMS]; /* in bytes */
    int64_t esize[CU_ITER_MAX_OPS];                /* element sizes */
    char *base[CU_ITER_MAX_OPS];
} cu_iter;

void cu_iter_init(cu_iter *it, int nops, const cn_view *const *views);

/* Non-zero when every operand of it is dense (one run with unit element stride). */
int cu_iter_dense(const cu_iter *it);

/* ---- helpers shared across op families --------------------------------------------------------- */

/* copy.cu: dst (any strides) = src (same shape, any strides), converting dtype by the cast
 * rules when they differ. Queued on d's stream. */
cn_status cu_copy_view(cu_dev *d, const char *op, const cn_view *dst, const cn_view *src);

/* matmul.c: one (batched) GEMM in cuBLAS's column-major terms:
 * C_i = op(A_i) op(B_i) + beta C_i, i < batch, with op(X) = X or X^T. A and B have `dtype`
 * (f32, f64, f16, bf16); C has c_dtype (the same, or f32 to accumulate f16/bf16 products in f32).
 * f16/bf16 and f32 accumulate in f32 (no TF32), f64 in f64. */
typedef struct cu_gemm_args {
    cn_dtype dtype, c_dtype;
    int trans_a, trans_b;
    int64_t m, n, k;
    const void *a;
    int64_t lda, stride_a;
    const void *b;
    int64_t ldb, stride_b;
    void *c;
    int64_t ldc, stride_c;
    int64_t batch;
    double beta;
} cu_gemm_args;

cn_status cu_gemm(cu_dev *d, const char *op, const cu_gemm_args *g);

/* conv.cu: the geometry of a convolution call, from the router's (args->conv) and the per-group
 * sizes it implies. */
typedef struct cu_conv_geom {
    int64_t N, C, H, W;
    int64_t O, KH, KW;
    int64_t OH, OW, P;
    int64_t sh, sw, ph, pw, dh, dw, groups;
    int64_t Cg, Og, K;
} cu_conv_geom;

cn_status cu_conv_geom_init(cu_conv_geom *g, const cn_kernel_args *a);

/* conv.cu: out [N, O, OH, OW] (contiguous) += b[o] (b: [O], any stride). */
cn_status cu_conv_add_bias(cu_dev *d, const char *op, const cu_conv_geom *g, const cn_view *out,
                           const cn_view *b);

/* conv_cudnn.c: the cuDNN versions of the three convolution kernels. Each returns CN_OK when
 * cuDNN did the work, 1 (with no error set) when cuDNN cannot take this case so that the caller
 * falls back to its own kernels, or an error status. */
#define CU_NOT_HANDLED ((cn_status)1)
cn_status cu_cudnn_conv_forward(cu_dev *d, const cn_kernel_args *a, const cu_conv_geom *g);
cn_status cu_cudnn_conv_backward_input(cu_dev *d, const cn_kernel_args *a, const cu_conv_geom *g);
cn_status cu_cudnn_conv_backward_weight(cu_dev *d, const cn_kernel_args *a,
                                        const cu_conv_geom *g);

/* ---- kernels, by file ---------------------------------------------------------------------------- */
/* elementwise.cu */
cn_status cuda_unary(const cn_kernel_args *a);
cn_status cuda_scalar(const cn_kernel_args *a);
cn_status cuda_binary(const cn_kernel_args *a);
cn_status cuda_activation_backward(const cn_kernel_args *a);
cn_status cuda_softmax_backward(const cn_kernel_args *a); /* softmax_backward.cu */
cn_status cuda_compare(const cn_kernel_args *a);
cn_status cuda_logical(const cn_kernel_args *a);
cn_status cuda_where(const cn_kernel_args *a);
/* copy.cu */
cn_status cuda_cast(const cn_kernel_args *a); /* also serves CN_OP_COPY */
cn_status cuda_fill(const cn_kernel_args *a);
cn_status cuda_rand(const cn_kernel_args *a);
/* reduce.cu */
cn_status cuda_reduce(const cn_kernel_args *a);
cn_status cuda_softmax(const cn_kernel_args *a);
/* matmul.c */
cn_status cuda_matmul(const cn_kernel_args *a);
/* index.cu */
cn_status cuda_gather(const cn_kernel_args *a);
cn_status cuda_scatter_add(const cn_kernel_args *a);
cn_status cuda_index_select(const cn_kernel_args *a);
cn_status cuda_one_hot(const cn_kernel_args *a);
cn_status cuda_scatter(const cn_kernel_args *a);
cn_status cuda_index_put(const cn_kernel_args *a); /* index_copy and index_add */
cn_status cuda_gather_nd(const cn_kernel_args *a);
cn_status cuda_scatter_nd(const cn_kernel_args *a);
/* index_ops.cu */
cn_status cuda_masked_fill(const cn_kernel_args *a);
cn_status cuda_triangle(const cn_kernel_args *a); /* tril and triu */
cn_status cuda_flip(const cn_kernel_args *a);
cn_status cuda_repeat(const cn_kernel_args *a);
cn_status cuda_slice_assign(const cn_kernel_args *a);
cn_status cuda_unfold(const cn_kernel_args *a);
cn_status cuda_nonzero(const cn_kernel_args *a);
cn_status cuda_masked_select(const cn_kernel_args *a);
/* resample.cu: interpolate and interpolate_backward (f32, f64, f16, bf16), grid_sample_2d
 * (the same) and its backward (f32, f64) */
cn_status cuda_interpolate(const cn_kernel_args *a);
cn_status cuda_grid_sample_2d(const cn_kernel_args *a);
/* pad.cu and pool_more.cu: padding and pooling (issue 16) */
cn_status cuda_pad(const cn_kernel_args *a);
cn_status cuda_pad_backward(const cn_kernel_args *a);
cn_status cuda_adaptive_avg_pool(const cn_kernel_args *a); /* and its backward */
cn_status cuda_max_pool2d_with_indices(const cn_kernel_args *a);
cn_status cuda_fold4d(const cn_kernel_args *a); /* fold.cu: unfold4d and fold4d */
/* deform_conv.cu: deform_conv2d and its backward (one entry; every float dtype) */
cn_status cuda_deform_conv2d(const cn_kernel_args *a);
/* fft.cu: rfft and irfft through cuFFT (f32, f64) */
cn_status cuda_fft(const cn_kernel_args *a);
/* norm.cu: layer_norm and rms_norm (one kernel), their backward (one kernel); f32, f64 */
cn_status cuda_norm(const cn_kernel_args *a);
cn_status cuda_norm_backward(const cn_kernel_args *a);
/* quant.cu: the quantized linear (issue 19), one thread per output; f32 activations */
cn_status cuda_quant_linear(const cn_kernel_args *a);
/* conv.cu */
cn_status cuda_conv2d(const cn_kernel_args *a);
cn_status cuda_conv2d_backward_input(const cn_kernel_args *a);
cn_status cuda_conv2d_backward_weight(const cn_kernel_args *a);
/* conv_transpose.cu: conv_transpose2d / conv_transpose1d (one kernel), and conv1d (conv2d's
 * kernel on its operands seen as 4-D) */
cn_status cuda_conv_transpose2d(const cn_kernel_args *a);
cn_status cuda_conv1d(const cn_kernel_args *a);
/* conv3d.cu: conv3d, conv_transpose3d, conv3d_backward_weight (one kernel; f32, f64) */
cn_status cuda_conv3d(const cn_kernel_args *a);
/* pool.cu */
cn_status cuda_pool2d(const cn_kernel_args *a);          /* max and avg */
cn_status cuda_pool2d_backward(const cn_kernel_args *a); /* max and avg */
cn_status cuda_max_pool2d_backward_index(const cn_kernel_args *a);
/* conv2d_max_pool2d_backward (conv.cu): composed of the pool's and the convolution's backward
 * kernels over a scratch gz, and the planes' sums of it */
cn_status cuda_conv2d_max_pool2d_backward(const cn_kernel_args *a);
/* matmul_int.cu: matmul's i32 and i64 (cuda_matmul hands them over) */
cn_status cu_matmul_int(cu_dev *d, const cn_kernel_args *args);
/* conv2d_max_pool2d's pool (pool.cu): z [N, C, H, W] by k x k windows at stride k into out and,
 * when idx is not NULL, the choices (u8). */
cn_status cu_pool_index(cu_dev *d, const char *op, const cn_view *z, int64_t k,
                        const cn_view *out, const cn_view *idx);
/* scan.cu: cumsum, cumprod, cummax, cummin, sort, any, all; cumprod's backward */
cn_status cuda_scan(const cn_kernel_args *a);
cn_status cuda_cumprod_backward(const cn_kernel_args *a);
/* optim.cu */
cn_status cuda_sgd_step(const cn_kernel_args *a);
cn_status cuda_adamw_step(const cn_kernel_args *a);
cn_status cuda_linear(const cn_kernel_args *a);
cn_status cuda_linear_gelu(const cn_kernel_args *a);
cn_status cuda_linear_add(const cn_kernel_args *a);
/* elementwise.cu: linear_gelu's epilogue over its dense output (out[0], and out[1] = gelu') */
cn_status cuda_gelu_epilogue(const cn_kernel_args *a);
/* attention.cu: scaled_dot_product_attention and its backward */
cn_status cuda_sdpa(const cn_kernel_args *a);
cn_status cuda_sdpa_backward(const cn_kernel_args *a);
/* ctc.cu: ctc_loss and its backward */
cn_status cuda_ctc_loss(const cn_kernel_args *a);
cn_status cuda_ctc_loss_backward(const cn_kernel_args *a);

#ifdef __cplusplus
}
#endif
#endif
