/* The CUDA backend's linear: y = x w^T + b as cuBLAS's GEMM (the matmul kernel, on a transposed
 * view of w) followed by the bias added in place by the binary add kernel (one pass over y; the
 * CPU fuses it with the GEMM, cuBLAS's epilogue is not reached through cublasGemmEx); and
 * linear_gelu, the same and then gelu (and its derivative) in one more pass; linear_add, the
 * same and then the residual added in one more pass. */
#include "backends/cuda/cuda_internal.h"
#include "core/backend_common.h"

cn_status cuda_linear(const cn_kernel_args *a) {
    const cn_view *xv = &a->in[0], *wv = &a->in[1], *yv = &a->out[0];
    cn_view wt = *wv; /* [N, K] seen as w^T [K, N] */
    wt.shape[0] = wv->shape[1], wt.shape[1] = wv->shape[0];
    wt.strides[0] = wv->strides[1], wt.strides[1] = wv->strides[0];
    const cn_view mm_in[2] = {*xv, wt};
    cn_kernel_args m = *a;
    m.op = CN_OP_MATMUL;
    m.n_in = 2, m.in = mm_in;
    m.n_ints = 0, m.n_reals = 0;
    cn_status s = cuda_matmul(&m);
    if (s != CN_OK || a->n_in < 3) return s;
    cn_view bias = a->in[2]; /* [N] broadcast over the M rows */
    bias.ndim = 2;
    bias.shape[0] = yv->shape[0], bias.shape[1] = yv->shape[1];
    bias.strides[1] = a->in[2].strides[0], bias.strides[0] = 0;
    const cn_view add_in[2] = {*yv, bias};
    cn_kernel_args add = *a;
    add.op = CN_OP_ADD;
    add.n_in = 2, add.in = add_in;
    add.n_ints = 0, add.n_reals = 0;
    return cuda_binary(&add);
}

/* linear_gelu: the linear above (without its d output), then gelu in place over y and gelu' of
 * the same values into d when ints[1] asks for it (one elementwise pass, elementwise.cu). */
cn_status cuda_linear_gelu(const cn_kernel_args *a) {
    cn_kernel_args lin = *a;
    lin.op = CN_OP_LINEAR;
    lin.n_out = 1;
    lin.n_ints = 0;
    cn_status s = cuda_linear(&lin);
    return s == CN_OK ? cuda_gelu_epilogue(a) : s;
}

/* linear_add (in = x, w, r[, b]): the linear above on (x, w[, b]), then r added in place by the
 * binary add kernel (one more pass over y). */
cn_status cuda_linear_add(const cn_kernel_args *a) {
    const cn_view lin_in[3] = {a->in[0], a->in[1], a->n_in > 3 ? a->in[3] : a->in[1]};
    cn_kernel_args lin = *a;
    lin.op = CN_OP_LINEAR;
    lin.in = lin_in;
    lin.n_in = a->n_in > 3 ? 3 : 2;
    cn_status s = cuda_linear(&lin);
    if (s != CN_OK) return s;
    const cn_view add_in[2] = {a->out[0], a->in[2]};
    cn_kernel_args add = *a;
    add.op = CN_OP_ADD;
    add.n_in = 2, add.in = add_in;
    add.n_ints = 0, add.n_reals = 0;
    return cuda_binary(&add);
}
