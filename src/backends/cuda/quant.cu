/* CUDA quantized linear (issue 19; the CPU's cpu/quant.c): one thread per output y[m, n]. The
 * thread quantizes its activation row to int8 as the CPU does (per block of 32 for the block
 * weights, per row otherwise: scale amax / 127, round half away from zero), reads the packed
 * weight (core/quant.h's layout) and sums int8 products in int32 per block, scaled to f32. A
 * simple kernel (no shared-memory tiling, no dp4a): correct on any device, not tuned. */
#include <cuda_fp16.h>
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct qgeom {
    int q4, block, f16_scales;
    int64_t m, n, k, w_off, w_s0, group, bias_stride;
    const float *x, *bias;
    const uint8_t *w, *scales;
    float *y;
} qgeom;

__device__ __forceinline__ float q_scale(const qgeom &p, int64_t i) {
    if (p.f16_scales) {
        unsigned short h = (unsigned short)(p.scales[2 * i] | (p.scales[2 * i + 1] << 8));
        return __half2float(__ushort_as_half(h));
    }
    float f;
    memcpy(&f, p.scales + 4 * i, 4);
    return f;
}

__device__ __forceinline__ int q_value(const qgeom &p, int64_t e) {
    if (p.q4) {
        uint8_t b = p.w[e >> 1];
        return (int)((e & 1) ? b >> 4 : b & 15) - 8;
    }
    return (int)(int8_t)p.w[e];
}

__device__ __forceinline__ int q_act(float v, float id) {
    float r = roundf(v * id);
    return r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r;
}

__global__ void quant_linear_kernel(const __grid_constant__ qgeom p) {
    CU_GRID_LOOP(i, p.m * p.n) {
        int64_t m = i / p.n, n = i - m * p.n;
        const float *x = p.x + m * p.k;
        int64_t e0 = p.w_off + n * p.w_s0;
        float acc = 0.0f;
        if (p.block) {
            for (int64_t b = 0; b < p.k / 32; b++) {
                float amax = 0.0f;
                for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[32 * b + j]));
                const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
                int s = 0;
                for (int j = 0; j < 32; j++)
                    s += q_act(x[32 * b + j], id) * q_value(p, e0 + 32 * b + j);
                acc += d * q_scale(p, e0 / 32 + b) * (float)s;
            }
        } else {
            float amax = 0.0f;
            for (int64_t j = 0; j < p.k; j++) amax = fmaxf(amax, fabsf(x[j]));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            long long s = 0;
            for (int64_t j = 0; j < p.k; j++) s += q_act(x[j], id) * q_value(p, e0 + j);
            acc = d * q_scale(p, e0 / p.group) * (float)s;
        }
        p.y[i] = acc + (p.bias ? p.bias[n * p.bias_stride] : 0.0f);
    }
}

/* in = x, w[, bias]; ints = has_bias, w_offset, group, scales_at; out = y (backend.h) */
extern "C" cn_status cuda_quant_linear(const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_view *x = &a->in[0], *w = &a->in[1];
    if (x->dtype != CN_F32) return cn__kernel_dtype_error("cuda", a->op, x->dtype);
    qgeom p;
    memset(&p, 0, sizeof p);
    p.q4 = w->dtype == CN_Q4_BLOCK;
    p.block = w->dtype == CN_Q8_BLOCK || w->dtype == CN_Q4_BLOCK;
    p.f16_scales = p.block;
    p.m = x->shape[0];
    p.n = w->shape[0];
    p.k = w->shape[1];
    p.w_off = a->ints[1];
    p.w_s0 = w->strides[0];
    p.group = a->ints[2];
    p.x = (const float *)x->data;
    p.w = (const uint8_t *)w->data;
    p.scales = (const uint8_t *)w->data + a->ints[3];
    if (a->ints[0]) {
        p.bias = (const float *)a->in[2].data;
        p.bias_stride = a->in[2].strides[0];
    }
    p.y = (float *)a->out[0].data;
    if (p.m * p.n == 0) return CN_OK;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    quant_linear_kernel<<<cu_blocks(p.m * p.n), CU_THREADS, 0, d->stream>>>(p);
    return cu_check_launch(op, "quant_linear_kernel");
}
