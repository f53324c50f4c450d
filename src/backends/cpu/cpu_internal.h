/* The CPU backend's internals: kernel entry points (one per op family) and the strided iterator
 * that elementwise kernels share. */
#ifndef CINDER_CPU_INTERNAL_H
#define CINDER_CPU_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "cinder/backend.h"

/* Work below two grains (elements, or multiply-adds) runs on the calling thread alone: handing
 * it to another thread costs more than it saves. PyTorch's grain is the same. */
#define CPU_PARALLEL_GRAIN 32768

/* ---- kernels, by file ---------------------------------------------------------------------- */
/* elementwise.c */
cn_status cpu_unary(const cn_kernel_args *a);
cn_status cpu_scalar(const cn_kernel_args *a);   /* add/mul/pow_scalar, clamp */
cn_status cpu_binary(const cn_kernel_args *a);
cn_status cpu_activation_backward(const cn_kernel_args *a);
cn_status cpu_softmax_backward(const cn_kernel_args *a); /* softmax_backward.c */
cn_status cpu_compare(const cn_kernel_args *a);
cn_status cpu_logical(const cn_kernel_args *a);
cn_status cpu_where(const cn_kernel_args *a);
/* copy.c */
cn_status cpu_cast(const cn_kernel_args *a);     /* also serves CN_OP_COPY */
cn_status cpu_fill(const cn_kernel_args *a);
cn_status cpu_rand(const cn_kernel_args *a);     /* uniform and normal */
/* reduce.c */
cn_status cpu_reduce(const cn_kernel_args *a);
cn_status cpu_softmax(const cn_kernel_args *a);  /* softmax and log_softmax */
/* matmul.c */
cn_status cpu_matmul(const cn_kernel_args *a);
/* index.c */
cn_status cpu_gather(const cn_kernel_args *a);
cn_status cpu_scatter_add(const cn_kernel_args *a);
cn_status cpu_index_select(const cn_kernel_args *a);
cn_status cpu_one_hot(const cn_kernel_args *a);
cn_status cpu_scatter(const cn_kernel_args *a);
cn_status cpu_index_put(const cn_kernel_args *a); /* index_copy and index_add */
cn_status cpu_gather_nd(const cn_kernel_args *a);
cn_status cpu_scatter_nd(const cn_kernel_args *a);
/* index_ops.c */
cn_status cpu_masked_fill(const cn_kernel_args *a);
cn_status cpu_triangle(const cn_kernel_args *a); /* tril and triu */
cn_status cpu_flip(const cn_kernel_args *a);
cn_status cpu_repeat(const cn_kernel_args *a);
cn_status cpu_slice_assign(const cn_kernel_args *a);
cn_status cpu_unfold(const cn_kernel_args *a);
cn_status cpu_nonzero(const cn_kernel_args *a);
cn_status cpu_masked_select(const cn_kernel_args *a);
/* conv.c */
cn_status cpu_conv2d(const cn_kernel_args *a);
/* pool.c */
cn_status cpu_pool2d(const cn_kernel_args *a);   /* max and avg */
/* conv_transpose.c: conv_transpose2d / conv_transpose1d (one kernel), and conv1d (conv2d's
 * kernel on its operands seen as 4-D) */
cn_status cpu_conv_transpose2d(const cn_kernel_args *a);
cn_status cpu_conv1d(const cn_kernel_args *a);
/* conv3d.c: conv3d, conv_transpose3d, conv3d_backward_weight (one kernel) */
cn_status cpu_conv3d(const cn_kernel_args *a);
/* conv_backward.c */
cn_status cpu_conv2d_backward_input(const cn_kernel_args *a);
cn_status cpu_conv2d_backward_weight(const cn_kernel_args *a);
/* conv_pool_backward.c: conv2d_max_pool2d_backward */
cn_status cpu_conv2d_max_pool2d_backward(const cn_kernel_args *a);
/* pool_backward.c */
cn_status cpu_pool2d_backward(const cn_kernel_args *a); /* max and avg */
/* pool_index.c: max_pool2d_backward_index, and the pool of conv2d_max_pool2d's planes: z, a
 * dense plane with rows W apart, pooled by k x k windows at stride k into out [PH, PW] and the
 * choices into idx (u8, when not NULL) */
cn_status cpu_max_pool2d_backward_index(const cn_kernel_args *a);
void cpu_pool_index_plane_f32(const float *z, int64_t W, int64_t k, int64_t PH, int64_t PW,
                              float *out, uint8_t *idx);
void cpu_pool_index_plane_f64(const double *z, int64_t W, int64_t k, int64_t PH, int64_t PW,
                              double *out, uint8_t *idx);
/* One plane of max_pool2d_backward_index: gz [H, W] dense from g's plane (element strides gs_h,
 * gs_w) pooled into [PH, PW] by k x k windows at stride k, and its choices idx [PH, PW]; every
 * element written (0 + g at the choice, +0 elsewhere and past the last whole window). */
void cpu_pool_index_back_plane_f32(const float *g, int64_t gs_h, int64_t gs_w,
                                   const uint8_t *idx, int64_t H, int64_t W, int64_t PH,
                                   int64_t PW, int64_t k, float *gz);
void cpu_pool_index_back_plane_f64(const double *g, int64_t gs_h, int64_t gs_w,
                                   const uint8_t *idx, int64_t H, int64_t W, int64_t PH,
                                   int64_t PW, int64_t k, double *gz);
/* reduce.c: the sums of `rows` dense rows of n elements (row r at p + r * n) into out, each as
 * cpu_reduce sums the last dim of a dense [count, n] matrix (count: all its rows), bit for bit */
void cpu_sum_rows_f32(const float *p, int64_t rows, int64_t n, int64_t count, float *out);
void cpu_sum_rows_f64(const double *p, int64_t rows, int64_t n, int64_t count, double *out);
/* scan.c: cumsum, cumprod, cummax, cummin, sort, any, all; cumprod's backward */
cn_status cpu_scan(const cn_kernel_args *a);
cn_status cpu_cumprod_backward(const cn_kernel_args *a);
/* resample.c: interpolate, grid_sample_2d and their backward kernels (f32, f64) */
cn_status cpu_interpolate(const cn_kernel_args *a);
cn_status cpu_grid_sample_2d(const cn_kernel_args *a);
/* optim.c */
cn_status cpu_sgd_step(const cn_kernel_args *a);
cn_status cpu_adamw_step(const cn_kernel_args *a);
cn_status cpu_linear(const cn_kernel_args *a);
cn_status cpu_linear_gelu(const cn_kernel_args *a);
cn_status cpu_linear_add(const cn_kernel_args *a);
/* attention.c: scaled_dot_product_attention and its backward */
cn_status cpu_sdpa(const cn_kernel_args *a);
cn_status cpu_sdpa_backward(const cn_kernel_args *a);
/* ctc.c: ctc_loss and its backward */
cn_status cpu_ctc_loss(const cn_kernel_args *a);
cn_status cpu_ctc_loss_backward(const cn_kernel_args *a);

/* padding and pooling (issue 16). pad.c: pad (every dtype but f16/bf16) and its backward along
 * one dim; pool_more.c: the adaptive average pools and their backward, max pooling with indices
 * (f32, f64) */
cn_status cpu_pad(const cn_kernel_args *a);
cn_status cpu_pad_backward(const cn_kernel_args *a);
cn_status cpu_adaptive_avg_pool(const cn_kernel_args *a);
cn_status cpu_max_pool2d_with_indices(const cn_kernel_args *a);
/* fold.c: unfold4d (im2col) and fold4d (col2im), f32 and f64 */
cn_status cpu_fold4d(const cn_kernel_args *a);
/* deform_conv.c: deform_conv2d and its backward (one kernel), f32 and f64 */
cn_status cpu_deform_conv2d(const cn_kernel_args *a);
/* fft.c: rfft and irfft along one dim (f32: kissfft; f64: a direct DFT in double) */
cn_status cpu_fft(const cn_kernel_args *a);
/* norm.c: layer_norm and rms_norm (one kernel), and their backward (one kernel); f32, f64 */
cn_status cpu_norm(const cn_kernel_args *a);
/* quant.c: the quantized linear (issue 19): f32 activations, int8 / 4-bit weights */
cn_status cpu_quant_linear(const cn_kernel_args *a);
/* quant_amx.c and quant_avx2.c: the block schemes' linear on the AMX tile unit and in AVX2
 * register tiles. A block weight [N, K] (storage element e of row n at w_off + n * w_s0; q4:
 * packed), x f32 [M, K] dense with K = 32 nb (AVX2: xq, xs, x quantized by quant.c: int8 [M, K]
 * and the row scales [M]), y f32 [M, N] dense, bias f32 with its stride or NULL. */
typedef struct cpu_qlinear {
    int q4;
    int64_t M, N, nb;
    const float *x;
    const int8_t *xq;
    const float *xs;
    const uint8_t *w, *scales;
    int64_t w_off, w_s0;
    const float *bias;
    int64_t bias_stride;
    float *y;
} cpu_qlinear;
/* 1 when this CPU has amx-int8 and the kernel granted this process the tile state (asked once;
 * any thread). */
int cpu_amx_ready(void);
/* CN_ERR_OUT_OF_MEMORY (the error set) when a buffer cannot be had; only where cpu_amx_ready. */
cn_status cpu_quant_linear_amx(const cpu_qlinear *q);
/* CN_ERR_OUT_OF_MEMORY (the error set) when a buffer cannot be had; only where AVX2 and F16C. */
cn_status cpu_quant_tiles_avx2(const cpu_qlinear *q);
cn_status cpu_norm_backward(const cn_kernel_args *a);

/* ---- values of any dtype ------------------------------------------------------------------------ */

/* The bytes of v in dt, in b[0..8): f32, f64, the ints (truncated toward zero: the router checked
 * the range), u8, bool (nonzero is true); the rest of b zeroed (index_ops.c). */
void cpu_value_bytes(cn_dtype dt, double v, unsigned char *b);

/* Moves one element of es bytes (1, 2, 4 or 8): a switch of fixed-size copies, each of which the
 * compiler makes one load and one store. */
static inline void cpu_move_elem(char *dst, const char *src, size_t es) {
    switch (es) {
    case 1: memcpy(dst, src, 1); break;
    case 2: memcpy(dst, src, 2); break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* An f32 or f64 element at p, as a double; and the other way (kernels that work in double). */
static inline double cpu_load_f(const char *p, cn_dtype dt) {
    if (dt == CN_F32) {
        float f;
        memcpy(&f, p, sizeof f);
        return f;
    }
    double v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void cpu_store_f(char *p, cn_dtype dt, double v) {
    if (dt == CN_F32) {
        float f = (float)v;
        memcpy(p, &f, sizeof f);
    } else {
        memcpy(p, &v, sizeof v);
    }
}

/* ---- threads (parallel.c) --------------------------------------------------------------------- *
 * Kernels run in parallel only through cpu_parallel, on the backend's pool (never OpenMP's
 * parallel regions: see parallel.c for why). */

/* Runs chunk `chunk`, the indices [begin, end) of the work. */
typedef void (*cpu_range_fn)(void *ctx, int64_t chunk, int64_t begin, int64_t end);

/* Cuts [0, n) into `chunks` ranges (chunk c is [n*c/chunks, n*(c+1)/chunks)) and runs fn on each,
 * on the pool's threads and the caller's, returning when all are done. Which thread runs a chunk
 * depends on timing: fn may keep per-chunk state (indexed by chunk) but never per-thread state,
 * so results depend only on the number of chunks. Inside a chunk, or while another thread's call
 * is running, the chunks run on the caller in order. chunks <= 1: fn(ctx, 0, 0, n) here. */
void cpu_parallel(int64_t n, int64_t chunks, cpu_range_fn fn, void *ctx);

/* cpu_parallel with the same chunks, but each thread takes first the chunks of its own stripe
 * (chunks [s C / T, (s + 1) C / T) for the core it runs on, s of T threads), then any left: work
 * cut the same way op after op finds its data in the cache of the core that last touched it.
 * Results are cpu_parallel's; more than 64 chunks simply take cpu_parallel. */
void cpu_parallel_affine(int64_t n, int64_t chunks, cpu_range_fn fn, void *ctx);

/* How many chunks n units of work deserve when `grain` units are worth a thread: 1 below
 * 2 * grain, else n / grain up to a few per thread. */
int64_t cpu_chunks(int64_t n, int64_t grain);

/* The pool's threads, the caller included (>= 1): OMP_NUM_THREADS when set, else the cores. */
int cpu_threads(void);

/* ---- GEMM (gemm.c) --------------------------------------------------------------------------- *
 * c[m, n] = a[m, k] @ b[k, n] + beta * c, row-major, with c at leading dimension ldc; a is stored
 * transposed ([k, m], leading dimension lda) when ta != 0, likewise b ([n, k]) when tb != 0. One OpenBLAS call (OpenBLAS runs on one
 * thread), or for a large product one per block of rows or columns of c on the pool. f32 or f64;
 * every dim and leading dimension at most INT_MAX (the caller checks). */
void cpu_gemm(cn_dtype dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
              int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);

/* ---- strided iteration ---------------------------------------------------------------------- *
 * Walks up to CPU_ITER_MAX_OPS views of one shape (operand 0 is the output) in row-major order,
 * calling a row function on runs along the innermost (coalesced) dim. Dims that are contiguous
 * across all operands are merged first, so dense data becomes a single long run. */
#define CPU_ITER_MAX_OPS 4

typedef struct cpu_iter {
    int nops;
    int ndim;                                    /* >= 1 after coalescing */
    int64_t numel;
    int64_t shape[CN_MAX_DIMS];
    int64_t strides[CPU_ITER_MAX_OPS][CN_MAX_DIMS]; /* in bytes */
    char *base[CPU_ITER_MAX_OPS];
} cpu_iter;

/* ptrs[k] points at the run's first element of operand k; step[k] is its byte stride. */
typedef void (*cpu_row_fn)(char **ptrs, const int64_t *step, int64_t n, const void *ctx);

void cpu_iter_init(cpu_iter *it, int nops, const cn_view *const *views);

/* Runs fn over every element, split across threads when numel >= 2 * CPU_PARALLEL_GRAIN. */
void cpu_iter_run(const cpu_iter *it, cpu_row_fn fn, const void *ctx);

/* cpu_iter_init and cpu_iter_run in one, with a shortcut for the commonest case of tiny ops:
 * dense operands too small to split are one call of fn. */
void cpu_map(int nops, const cn_view *const *views, cpu_row_fn fn, const void *ctx);
/* fn over nops dense views of n elements (the first the output), split over the pool's threads
 * when n >= split_from: two parts per thread on 16-element bounds (a cache line of f32), each
 * core taking the same parts op after op (cpu_parallel_affine), so that data a core wrote in one
 * op is in its cache in the next; else one call. fn must compute each element alone (results
 * then do not depend on the split). */
void cpu_map_dense(int nops, const cn_view *const *views, int64_t n, int64_t split_from,
                   cpu_row_fn fn, const void *ctx);
/* The element count of views[0]'s shape; *dense: whether every operand is dense in row-major
 * order over it (size-1 dims take any stride). */
int64_t cpu_count_dense(int nops, const cn_view *const *views, int *dense);

#endif
