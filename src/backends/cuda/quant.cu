/* CUDA quantized linear (issue 19; the CPU's cpu/quant.c). Two kernels: the activation rows are
 * quantized to int8 as the CPU does (a scale a row, amax / 127 with amax the largest |x| not NaN,
 * round half away from zero; for a q4 weight each block of 32 stored as its 16 even elements then
 * its 16 odd ones, the order of a packed block's low then high nibbles), one thread per row; then
 * one thread per output y[m, n] sums the int8 products four at a time with dp4a (sm_61 and
 * later), in int32 per block scaled in f32 as the CPU's tile kernels do (over b in order:
 * acc = fma(f32(dot_b), dw_b, acc), then acc dx + bias), or in int32 runs added in int64 for the
 * per-row schemes (dx * dw * f32(dot)). Not tiled: correct on any device, not tuned. */
#include <cuda_fp16.h>
#include <string.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"

typedef struct qgeom {
    int q4, block, f16_scales;
    int64_t m, n, k, w_off, w_s0, group, bias_stride;
    int64_t kx, blocks; /* bytes of a quantized activation row (a multiple of 4); blocks of 32 */
    const float *x, *bias;
    const uint8_t *w, *scales;
    int8_t *xq;         /* [m, kx] */
    float *xs;          /* [m]: the rows' scales */
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

__device__ __forceinline__ int q_act(float v, float id) {
    float r = roundf(v * id);
    return r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r;
}

/* one thread per row m: writes its bytes of xq (the padding past k included) and its scale
 * (amax / 127 in IEEE division, as the CPU) */
__global__ void quant_act_kernel(const __grid_constant__ qgeom p) {
    CU_GRID_LOOP(m, p.m) {
        const float *x = p.x + m * p.k;
        int8_t *q = p.xq + m * p.kx;
        float amax = 0.0f;
        for (int64_t j = 0; j < p.k; j++) amax = fmaxf(amax, fabsf(x[j]));
        const float d = __fdiv_rn(amax, 127.0f), id = d != 0.0f ? __fdiv_rn(1.0f, d) : 0.0f;
        for (int64_t j = 0; j < p.k; j++) {
            int64_t at = j;
            if (p.q4) { /* in each block, the even elements first, then the odd ones */
                int64_t k0 = j & ~(int64_t)31, r = j - k0;
                at = k0 + (r & 1 ? 16 + r / 2 : r / 2);
            }
            q[at] = (int8_t)q_act(x[j], id);
        }
        for (int64_t j = p.k; j < p.kx; j++) q[j] = 0;
        p.xs[m] = d;
    }
}

/* 4 weight bytes of a per-row scheme from element e (those at or past `end` read as 0: a row's
 * last word may end before a multiple of 4, and the storage with it) */
__device__ __forceinline__ int w_word(const uint8_t *w, int64_t e, int64_t end) {
    unsigned v = 0;
    for (int t = 0; t < 4; t++)
        if (e + t < end) v |= (unsigned)w[e + t] << (8 * t);
    return (int)v;
}

__global__ void quant_linear_kernel(const __grid_constant__ qgeom p) {
    CU_GRID_LOOP(i, p.m * p.n) {
        int64_t m = i / p.n, n = i - m * p.n;
        const int *xw = (const int *)(p.xq + m * p.kx); /* kx: a multiple of 4 (cudaMalloc'd) */
        int64_t e0 = p.w_off + n * p.w_s0;
        float acc = 0.0f;
        if (p.block) {
            for (int64_t b = 0; b < p.blocks; b++) {
                int s = 0;
                if (p.q4) { /* 16 packed bytes: low nibbles = the even elements, high = odd */
                    const unsigned *ww = (const unsigned *)(p.w + (e0 >> 1) + 16 * b);
                    for (int t = 0; t < 4; t++) {
                        unsigned v = ww[t];
                        int lo = (int)__vsub4(v & 0x0F0F0F0Fu, 0x08080808u);
                        int hi = (int)__vsub4((v >> 4) & 0x0F0F0F0Fu, 0x08080808u);
                        s = __dp4a(xw[8 * b + t], lo, s);
                        s = __dp4a(xw[8 * b + 4 + t], hi, s);
                    }
                } else {
                    const int *ww = (const int *)(p.w + e0 + 32 * b);
                    for (int t = 0; t < 8; t++) s = __dp4a(xw[8 * b + t], ww[t], s);
                }
                acc = fmaf((float)s, q_scale(p, e0 / 32 + b), acc);
            }
            acc = __fmul_rn(acc, p.xs[m]); /* not contracted into the bias's add */
        } else {
            /* int32 runs of 2^14 words (each adds at most 4 * 127 * 127) added in int64 */
            long long s = 0;
            int64_t words = p.kx / 4, end = e0 + p.k;
            for (int64_t r0 = 0; r0 < words; r0 += 16384) {
                int64_t r1 = r0 + 16384 < words ? r0 + 16384 : words;
                int run = 0;
                for (int64_t t = r0; t < r1; t++) run = __dp4a(xw[t], w_word(p.w, e0 + 4 * t, end), run);
                s += run;
            }
            acc = p.xs[m] * q_scale(p, e0 / p.group) * (float)s;
        }
        p.y[i] = __fadd_rn(acc, p.bias ? p.bias[n * p.bias_stride] : 0.0f);
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
    p.blocks = p.block ? p.k / 32 : 0;
    p.kx = (p.k + 3) / 4 * 4;
    cu_dev *d = cu_device(op, a->device);
    if (!d) return cn_last_status();
    void *xq = NULL, *xs = NULL;
    cn_status st = cu_scratch(d, op, (size_t)(p.m * p.kx), &xq);
    if (st == CN_OK) st = cu_scratch(d, op, (size_t)p.m * sizeof(float), &xs);
    if (st == CN_OK) {
        p.xq = (int8_t *)xq;
        p.xs = (float *)xs;
        quant_act_kernel<<<cu_blocks(p.m), CU_THREADS, 0, d->stream>>>(p);
        st = cu_check_launch(op, "quant_act_kernel");
    }
    if (st == CN_OK) {
        quant_linear_kernel<<<cu_blocks(p.m * p.n), CU_THREADS, 0, d->stream>>>(p);
        st = cu_check_launch(op, "quant_linear_kernel");
    }
    cu_scratch_free(d, xq);
    cu_scratch_free(d, xs);
    return st;
}
