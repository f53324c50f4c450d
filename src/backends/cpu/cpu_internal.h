/* The CPU backend's internals: kernel entry points (one per op family) and the strided iterator
 * that elementwise kernels share. */
#ifndef CINDER_CPU_INTERNAL_H
#define CINDER_CPU_INTERNAL_H

#include <stdint.h>

#include "cinder/backend.h"

/* Work below this many elements runs on one thread: waking the pool costs more than it saves. */
#define CPU_PARALLEL_GRAIN 32768

/* ---- kernels, by file ---------------------------------------------------------------------- */
/* elementwise.c */
cn_status cpu_unary(const cn_kernel_args *a);
cn_status cpu_scalar(const cn_kernel_args *a);   /* add/mul/pow_scalar, clamp */
cn_status cpu_binary(const cn_kernel_args *a);
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
/* conv.c */
cn_status cpu_conv2d(const cn_kernel_args *a);
/* pool.c */
cn_status cpu_pool2d(const cn_kernel_args *a);   /* max and avg */
/* conv_backward.c */
cn_status cpu_conv2d_backward_input(const cn_kernel_args *a);
cn_status cpu_conv2d_backward_weight(const cn_kernel_args *a);
/* pool_backward.c */
cn_status cpu_pool2d_backward(const cn_kernel_args *a); /* max and avg */

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

/* Runs fn over every element, split across threads when numel >= CPU_PARALLEL_GRAIN. */
void cpu_iter_run(const cpu_iter *it, cpu_row_fn fn, const void *ctx);

#endif
