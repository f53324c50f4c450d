/* The CUDA kernel of the fused linear + bias + relu (fused.cnext), the counterpart of
 * fused_linear_relu_cpu: one GEMM (cn_cuda_gemm, the one cinder's CUDA kernels use) into y, then
 * one pass that adds the bias and clamps at zero. Everything goes on the backend's stream
 * (cn_cuda_stream), so it runs in order with cinder's kernels before and after it, and scratch
 * memory is freed in stream order. The backward (fused_linear_relu.c) uses public ops, so it runs
 * on the GPU as it is.
 *
 * Built by cinder_add_extension(... CUDA_SOURCES fused_linear_relu_cuda.cu) when the project has
 * CUDA, with CINDER_HAVE_CUDA defined so that fused.c registers this kernel. */
#include <cuda_runtime.h>

#include "cinder/cinder.h"
#include "cinder/cuda.h"
#include "fused.h"
#include "fused_operand.h"

#define OP "fused_linear_relu"

namespace {

constexpr int THREADS = 256;

/* A grid of at most 65,535 x THREADS threads that stride over n elements. */
unsigned blocks_for(int64_t n) {
    int64_t b = (n + THREADS - 1) / THREADS;
    return (unsigned)(b < 65535 ? (b > 0 ? b : 1) : 65535);
}

/* dst [rows, cols] dense = src viewed with strides (s0, s1) */
template <typename T>
__global__ void pack(T *dst, const T *src, int64_t rows, int64_t cols, int64_t s0, int64_t s1) {
    int64_t n = rows * cols;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / cols, c = i - r * cols;
        dst[i] = src[r * s0 + c * s1];
    }
}

/* y[i, j] = max(acc[i, j] + b[j], 0), acc dense [n, o] (y itself when y is dense); b may be NULL.
 * NaN stays 0, as on the CPU (z > 0 is false for it). */
template <typename T>
__global__ void bias_relu(T *y, int64_t ys0, int64_t ys1, const T *acc, const T *b, int64_t bs,
                          int64_t n, int64_t o) {
    int64_t total = n * o;
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < total;
         i += (int64_t)gridDim.x * blockDim.x) {
        int64_t r = i / o, c = i - r * o;
        T z = acc[i] + (b ? b[c * bs] : T(0));
        y[r * ys0 + c * ys1] = z > T(0) ? z : T(0);
    }
}

cn_status cuda_failed(cudaError_t e, const char *what) {
    return cn_set_error(e == cudaErrorMemoryAllocation ? CN_ERR_OUT_OF_MEMORY : CN_ERR_BACKEND, OP,
                        "%s failed: %s", what, cudaGetErrorString(e));
}

/* An operand of the GEMM on the GPU: read in place, or packed into stream-ordered scratch. */
struct operand {
    const void *data;
    int trans;
    int64_t ld;
    void *packed;
};

template <typename T>
cn_status make_operand(const cn_view *v, cudaStream_t s, operand *o) {
    o->packed = nullptr;
    o->data = v->data;
    if (fused_plan_operand(v, &o->trans, &o->ld)) return CN_OK;
    int64_t r = v->shape[0], c = v->shape[1];
    cudaError_t e = cudaMallocAsync(&o->packed, (size_t)(r * c) * sizeof(T), s);
    if (e != cudaSuccess) return cuda_failed(e, "cudaMallocAsync for a packed operand");
    pack<T><<<blocks_for(r * c), THREADS, 0, s>>>((T *)o->packed, (const T *)v->data, r, c,
                                                  v->strides[0], v->strides[1]);
    o->data = o->packed;
    e = cudaGetLastError();
    return e == cudaSuccess ? CN_OK : cuda_failed(e, "the pack kernel's launch");
}

template <typename T>
cn_status forward(const cn_kernel_args *args, cn_dtype dt) {
    const cn_view *x = &args->in[FUSED_LINEAR_RELU_IN_X], *w = &args->in[FUSED_LINEAR_RELU_IN_W];
    const cn_view *b = &args->in[FUSED_LINEAR_RELU_IN_B], *y = &args->out[FUSED_LINEAR_RELU_OUT_Y];
    int64_t n = x->shape[0], k = x->shape[1], o = w->shape[0];
    if (n == 0 || o == 0) return CN_OK;
    void *sv;
    if (cn_cuda_stream(args->device, &sv) != CN_OK) return cn_last_status();
    cudaStream_t s = (cudaStream_t)sv;

    /* GEMM straight into y when it is dense, else into scratch that the last pass reads */
    int y_dense = (o == 1 || y->strides[1] == 1) && (n == 1 || y->strides[0] == o);
    void *acc = y->data, *scratch = nullptr;
    cudaError_t e;
    if (!y_dense) {
        e = cudaMallocAsync(&scratch, (size_t)(n * o) * sizeof(T), s);
        if (e != cudaSuccess) return cuda_failed(e, "cudaMallocAsync for the product");
        acc = scratch;
    }
    operand a = {}, bt = {};
    cn_status st = CN_OK;
    if (k == 0) { /* an empty sum */
        e = cudaMemsetAsync(acc, 0, (size_t)(n * o) * sizeof(T), s);
        if (e != cudaSuccess) st = cuda_failed(e, "cudaMemsetAsync");
    } else if ((st = make_operand<T>(x, s, &a)) == CN_OK &&
               (st = make_operand<T>(w, s, &bt)) == CN_OK) {
        /* acc [n, o] = x [n, k] @ w^T: w enters transposed, so flip how it is stored */
        st = cn_cuda_gemm(args->device, dt, a.trans, !bt.trans, n, o, k, a.data, a.ld, bt.data,
                          bt.ld, 0.0, acc, o);
    }
    if (st == CN_OK) {
        const T *bias = b->ndim >= 0 ? (const T *)b->data : nullptr;
        bias_relu<T><<<blocks_for(n * o), THREADS, 0, s>>>(
            (T *)y->data, y->strides[0], y->strides[1], (const T *)acc, bias,
            bias ? b->strides[0] : 0, n, o);
        e = cudaGetLastError();
        if (e != cudaSuccess) st = cuda_failed(e, "the bias + relu kernel's launch");
    }
    /* freed in stream order: after the kernels above that read them */
    if (a.packed) cudaFreeAsync(a.packed, s);
    if (bt.packed) cudaFreeAsync(bt.packed, s);
    if (scratch) cudaFreeAsync(scratch, s);
    return st;
}

} // namespace

extern "C" cn_status fused_linear_relu_cuda(const cn_kernel_args *args) {
    /* the shape function admitted f32 and f64 only, all inputs alike */
    cn_dtype dt = args->in[FUSED_LINEAR_RELU_IN_X].dtype;
    return dt == CN_F64 ? forward<double>(args, dt) : forward<float>(args, dt);
}
