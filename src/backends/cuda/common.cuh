/* Device-side helpers shared by the CUDA kernels: launch sizes, strided offsets, and loading and
 * storing elements of any dtype.
 *
 * Kernels choose the dtype of an element at run time (a switch that every thread of a launch
 * takes the same way) instead of being instantiated per dtype: the loops are memory-bound, and
 * this keeps the number of kernels, and the build time, small. Arithmetic happens in a compute
 * type: float for f32/f16/bf16, double for f64, int64 for the integer dtypes and bool.
 *
 * f16 and bf16 are converted by hand with the CPU backend's exact rules (copy.c): round to
 * nearest even, a NaN becomes a quiet NaN (f16: sign | 0x7e00; bf16: the top half | 0x40),
 * overflow goes to inf, and small values underflow gradually through the f16 subnormals. */
#ifndef CINDER_CUDA_COMMON_CUH
#define CINDER_CUDA_COMMON_CUH

#include <stdint.h>

#include <cuda_runtime.h>

#include "backends/cuda/cuda_internal.h"

#define CU_THREADS 256

/* Blocks for a grid-stride loop over n items. */
static inline unsigned cu_blocks(int64_t n, int threads = CU_THREADS) {
    int64_t b = (n + threads - 1) / threads;
    if (b < 1) b = 1;
    if (b > 65535) b = 65535; /* plenty to fill the GPU; the loops stride over the rest */
    return (unsigned)b;
}

#define CU_GRID_LOOP(i, n)                                                                    \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n);                 \
         i += (int64_t)blockDim.x * gridDim.x)

/* ---- strided offsets ------------------------------------------------------------------------- */

/* Byte offsets of element i (row-major) of each of the first NOPS operands of it. */
template <int NOPS>
__device__ __forceinline__ void cu_offsets(const cu_iter &it, int64_t i, int64_t *off) {
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] = 0;
    int64_t r = i;
    for (int d = it.ndim - 1; d > 0; d--) {
        int64_t q = r / it.shape[d];
        int64_t idx = r - q * it.shape[d];
        r = q;
#pragma unroll
        for (int k = 0; k < NOPS; k++) off[k] += idx * it.strides[k][d];
    }
#pragma unroll
    for (int k = 0; k < NOPS; k++) off[k] += r * it.strides[k][0];
}

/* An n-d view of elements, for kernels that index by coordinates. */
typedef struct cu_nd {
    int nd;
    int64_t shape[CN_MAX_DIMS];
    int64_t stride[CN_MAX_DIMS]; /* in elements */
} cu_nd;

static inline cu_nd cu_nd_of(const cn_view *v) {
    cu_nd n;
    n.nd = v->ndim;
    for (int d = 0; d < CN_MAX_DIMS; d++) {
        n.shape[d] = d < v->ndim ? v->shape[d] : 1;
        n.stride[d] = d < v->ndim ? v->strides[d] : 0;
    }
    return n;
}

/* Element offset of position p (row-major over v's shape). */
__device__ __forceinline__ int64_t cu_nd_offset(const cu_nd &v, int64_t p) {
    int64_t off = 0;
    for (int d = v.nd - 1; d >= 0; d--) {
        int64_t q = p / v.shape[d];
        off += (p - q * v.shape[d]) * v.stride[d];
        p = q;
    }
    return off;
}

/* ---- f16 and bf16 ------------------------------------------------------------------------------ */

__device__ __forceinline__ uint16_t cu_f32_to_f16(float f) {
    uint32_t x = __float_as_uint(f);
    uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
    uint32_t mag = x & 0x7fffffffu;
    if (mag > 0x7f800000u) return sign | 0x7e00u;  /* NaN */
    if (mag >= 0x477ff000u) return sign | 0x7c00u; /* rounds to 65520 or more: inf */
    if (mag >= 0x38800000u) {                      /* a normal f16: round at mantissa bit 13 */
        uint32_t rounded = mag + 0xfffu + ((mag >> 13) & 1u);
        return sign | (uint16_t)((rounded - 0x38000000u) >> 13);
    }
    uint32_t e = mag >> 23; /* a subnormal f16: m * 2^-24 */
    if (e < 102) return sign;
    uint32_t full = (mag & 0x7fffffu) | 0x800000u;
    uint32_t shift = 126 - e;
    uint32_t m = full >> shift;
    uint32_t rem = full & ((1u << shift) - 1u), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (m & 1u))) m++;
    return sign | (uint16_t)m;
}

__device__ __forceinline__ float cu_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return __uint_as_float(sign | 0x7f800000u | (m << 13));
    if (e != 0) return __uint_as_float(sign | ((e + 112) << 23) | (m << 13));
    float v = (float)m * 5.9604644775390625e-8f; /* 2^-24: exact */
    return sign ? -v : v;
}

__device__ __forceinline__ uint16_t cu_f32_to_bf16(float f) {
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40u);
    return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

__device__ __forceinline__ float cu_bf16_to_f32(uint16_t b) {
    return __uint_as_float((uint32_t)b << 16);
}

/* ---- loads and stores ---------------------------------------------------------------------------- */

__device__ __forceinline__ bool cu_is_float(int dt) {
    return dt == CN_F32 || dt == CN_F64 || dt == CN_F16 || dt == CN_BF16;
}

/* f32, f16, bf16 as float. */
__device__ __forceinline__ float cu_load_f32(const char *p, int dt) {
    if (dt == CN_F32) return *(const float *)p;
    if (dt == CN_F16) return cu_f16_to_f32(*(const uint16_t *)p);
    return cu_bf16_to_f32(*(const uint16_t *)p);
}

__device__ __forceinline__ void cu_store_f32(char *p, int dt, float v) {
    if (dt == CN_F32)
        *(float *)p = v;
    else if (dt == CN_F16)
        *(uint16_t *)p = cu_f32_to_f16(v);
    else
        *(uint16_t *)p = cu_f32_to_bf16(v);
}

/* Any float dtype, exactly, as double. */
__device__ __forceinline__ double cu_load_f(const char *p, int dt) {
    if (dt == CN_F64) return *(const double *)p;
    return (double)cu_load_f32(p, dt);
}

/* i32, i64, u8, bool as int64 (u8 and bool zero-extended). */
__device__ __forceinline__ int64_t cu_load_i(const char *p, int dt) {
    if (dt == CN_I64) return *(const int64_t *)p;
    if (dt == CN_I32) return *(const int32_t *)p;
    return *(const uint8_t *)p;
}

/* The compute type's load and store: T = float (f32/f16/bf16), double (f64), int64_t (ints). */
template <typename T> __device__ __forceinline__ T cu_ld(const char *p, int dt);
template <> __device__ __forceinline__ float cu_ld<float>(const char *p, int dt) {
    return cu_load_f32(p, dt);
}
template <> __device__ __forceinline__ double cu_ld<double>(const char *p, int dt) {
    (void)dt;
    return *(const double *)p;
}
template <> __device__ __forceinline__ int64_t cu_ld<int64_t>(const char *p, int dt) {
    return cu_load_i(p, dt);
}

template <typename T> __device__ __forceinline__ void cu_st(char *p, int dt, T v);
template <> __device__ __forceinline__ void cu_st<float>(char *p, int dt, float v) {
    cu_store_f32(p, dt, v);
}
template <> __device__ __forceinline__ void cu_st<double>(char *p, int dt, double v) {
    (void)dt;
    *(double *)p = v;
}
/* Integers keep the low bits (wrapping, as the CPU's unsigned arithmetic does). */
template <> __device__ __forceinline__ void cu_st<int64_t>(char *p, int dt, int64_t v) {
    if (dt == CN_I64)
        *(int64_t *)p = v;
    else if (dt == CN_I32)
        *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v;
    else
        *(uint8_t *)p = (uint8_t)(uint64_t)v;
}

/* A float (or a double) truncated toward zero and saturated to [lo, hi]; NaN gives 0. The bounds
 * are exact doubles (2^63 for INT64_MAX), so the comparisons decide before any conversion. */
__device__ __forceinline__ int64_t cu_float_to_int(double v, int64_t lo, int64_t hi) {
    if (v != v) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}

/* Stores a value held exactly as double (from a float dtype) into any dtype, by cn_cast's rules:
 * f16/bf16 through f32; float -> int truncates and saturates; bool is v != 0 (NaN -> true). */
__device__ __forceinline__ void cu_store_from_double(char *p, int dt, double v) {
    switch (dt) {
    case CN_F32: *(float *)p = (float)v; break;
    case CN_F64: *(double *)p = v; break;
    case CN_F16: *(uint16_t *)p = cu_f32_to_f16((float)v); break;
    case CN_BF16: *(uint16_t *)p = cu_f32_to_bf16((float)v); break;
    case CN_I32: *(int32_t *)p = (int32_t)cu_float_to_int(v, INT32_MIN, INT32_MAX); break;
    case CN_I64: *(int64_t *)p = cu_float_to_int(v, INT64_MIN, INT64_MAX); break;
    case CN_U8: *(uint8_t *)p = (uint8_t)cu_float_to_int(v, 0, 255); break;
    default: *(uint8_t *)p = v != 0.0; break;
    }
}

/* Stores an integer (from an int or bool dtype) into any dtype: narrower ints wrap. */
__device__ __forceinline__ void cu_store_from_int(char *p, int dt, int64_t v) {
    switch (dt) {
    case CN_F32: *(float *)p = (float)v; break;
    case CN_F64: *(double *)p = (double)v; break;
    case CN_F16: *(uint16_t *)p = cu_f32_to_f16((float)v); break;
    case CN_BF16: *(uint16_t *)p = cu_f32_to_bf16((float)v); break;
    case CN_I32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; break;
    case CN_I64: *(int64_t *)p = v; break;
    case CN_U8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
    default: *(uint8_t *)p = v != 0; break;
    }
}

/* Moves one element of es bytes. */
__device__ __forceinline__ void cu_move(char *dst, const char *src, int es) {
    switch (es) {
    case 1: *(uint8_t *)dst = *(const uint8_t *)src; break;
    case 2: *(uint16_t *)dst = *(const uint16_t *)src; break;
    case 4: *(uint32_t *)dst = *(const uint32_t *)src; break;
    default: *(uint64_t *)dst = *(const uint64_t *)src; break;
    }
}

#endif
