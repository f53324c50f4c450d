/* The CPU backend: host memory and the kernel table. */
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"

static int cpu_device_count(void *ctx) {
    (void)ctx;
    return 1;
}

static cn_status cpu_alloc(void *ctx, int device, size_t nbytes, void **ptr) {
    (void)ctx;
    (void)device;
    *ptr = cn__aligned_alloc("cpu alloc", nbytes);
    return *ptr ? CN_OK : CN_ERR_OUT_OF_MEMORY;
}

static void cpu_free(void *ctx, int device, void *ptr) {
    (void)ctx;
    (void)device;
    cn__aligned_free(ptr);
}

static cn_status cpu_copy_bytes(void *ctx, int device, void *dst, const void *src, size_t n) {
    (void)ctx;
    (void)device;
    if (n) memcpy(dst, src, n);
    return CN_OK;
}

/* Called once by the registry, which gives the CPU id 0. */
void cn__cpu_backend_fill(cn_backend *b) {
    memset(b, 0, sizeof *b);
    b->name = "cpu";
    b->device_count = cpu_device_count;
    b->alloc = cpu_alloc;
    b->free = cpu_free;
    b->copy_from_host = cpu_copy_bytes;
    b->copy_to_host = cpu_copy_bytes;

    cn_kernel_fn *k = b->kernels;
    const cn_op unary[] = {CN_OP_NEG,  CN_OP_ABS,  CN_OP_RELU, CN_OP_EXP,  CN_OP_LOG,
                           CN_OP_LOG1P, CN_OP_SQRT, CN_OP_RSQRT, CN_OP_SIN, CN_OP_COS,
                           CN_OP_TANH, CN_OP_SIGMOID, CN_OP_SILU, CN_OP_GELU};
    for (size_t i = 0; i < sizeof unary / sizeof *unary; i++) k[unary[i]] = cpu_unary;
    k[CN_OP_ADD_SCALAR] = k[CN_OP_MUL_SCALAR] = k[CN_OP_POW_SCALAR] = k[CN_OP_CLAMP] = cpu_scalar;
    k[CN_OP_ADD] = k[CN_OP_SUB] = k[CN_OP_MUL] = k[CN_OP_DIV] = cpu_binary;
    k[CN_OP_POW] = k[CN_OP_MAXIMUM] = k[CN_OP_MINIMUM] = cpu_binary;
    k[CN_OP_EQ] = k[CN_OP_NE] = k[CN_OP_LT] = k[CN_OP_LE] = k[CN_OP_GT] = k[CN_OP_GE] = cpu_compare;
    k[CN_OP_LOGICAL_AND] = k[CN_OP_LOGICAL_OR] = k[CN_OP_LOGICAL_NOT] = cpu_logical;
    k[CN_OP_WHERE] = cpu_where;
    k[CN_OP_CAST] = k[CN_OP_COPY] = cpu_cast;
    k[CN_OP_FILL] = cpu_fill;
    k[CN_OP_RAND_UNIFORM] = k[CN_OP_RAND_NORMAL] = cpu_rand;
    const cn_op reductions[] = {CN_OP_SUM,    CN_OP_MEAN,   CN_OP_MAX, CN_OP_MIN,
                                CN_OP_PROD,   CN_OP_ARGMAX, CN_OP_ARGMIN, CN_OP_VAR,
                                CN_OP_LOGSUMEXP};
    for (size_t i = 0; i < sizeof reductions / sizeof *reductions; i++)
        k[reductions[i]] = cpu_reduce;
    k[CN_OP_SOFTMAX] = k[CN_OP_LOG_SOFTMAX] = cpu_softmax;
    k[CN_OP_MATMUL] = cpu_matmul;
    k[CN_OP_GATHER] = cpu_gather;
    k[CN_OP_SCATTER_ADD] = cpu_scatter_add;
    k[CN_OP_INDEX_SELECT] = cpu_index_select;
    k[CN_OP_ONE_HOT] = cpu_one_hot;
    k[CN_OP_CONV2D] = cpu_conv2d;
    k[CN_OP_MAX_POOL2D] = k[CN_OP_AVG_POOL2D] = cpu_pool2d;
    k[CN_OP_ERF] = cpu_unary;
    k[CN_OP_CONV2D_BACKWARD_INPUT] = cpu_conv2d_backward_input;
    k[CN_OP_CONV2D_BACKWARD_WEIGHT] = cpu_conv2d_backward_weight;
    k[CN_OP_MAX_POOL2D_BACKWARD] = k[CN_OP_AVG_POOL2D_BACKWARD] = cpu_pool2d_backward;
}
