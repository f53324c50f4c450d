/* Quantized storage, shared by dispatch (cn_quantize, cn_dequantize, views, transfers, files)
 * and the backends' quantized kernels. The layout is documented in cinder/quant.h:
 *
 *   bytes [0, data)             the packed values, indexed by storage element e (the element
 *                               index a view's offset and strides reach): int8 byte e for the q8
 *                               dtypes; for q4_block the low nibble of byte e/2 when e is even,
 *                               the high nibble when odd, holding q + 8 (q in -8..7)
 *   bytes [q_scales_at, ...)    the scales, scale e / q_group for element e: f32 for q8_tensor and
 *                               q8_channel, f16 (IEEE half) for the block dtypes
 *
 * The value of element e is q(e) * scale(e / q_group). */
#ifndef CINDER_CORE_QUANT_H
#define CINDER_CORE_QUANT_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cinder/tensor.h"

#define CN__QBLOCK 32 /* elements per block of the block dtypes */

static inline int cn__is_quant(cn_dtype dt) { return dt >= CN_Q8_TENSOR && dt <= CN_Q4_BLOCK; }
static inline int cn__quant_is_block(cn_dtype dt) { return dt == CN_Q8_BLOCK || dt == CN_Q4_BLOCK; }
/* bytes of one scale */
static inline int cn__quant_scale_size(cn_dtype dt) { return cn__quant_is_block(dt) ? 2 : 4; }

/* IEEE half from float, rounding to nearest even (as F16C's vcvtps2ph and ggml's reference). */
static inline uint16_t cn__f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504: infinity */
    if (ax < 0x38800000u) {                                   /* subnormal half (or zero) */
        float a;
        memcpy(&a, &ax, 4);
        /* a * 2^24 is the value in units of the smallest half; rint rounds to nearest even */
        return (uint16_t)(sign | (uint32_t)nearbyintf(a * 16777216.0f));
    }
    uint32_t mant = ax & 0x7fffffu, exp = (ax >> 23) - 112u; /* rebias 127 -> 15 */
    uint32_t h = (exp << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) h++; /* a carry moves into the exponent */
    return (uint16_t)(sign | h);
}

static inline float cn__f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    float v;
    if (exp == 0) {
        v = (float)mant * (1.0f / 16777216.0f); /* subnormal: mant * 2^-24, exact */
    } else if (exp == 31) {
        v = mant ? NAN : INFINITY;
    } else {
        uint32_t x = ((exp + 112u) << 23) | (mant << 13);
        memcpy(&v, &x, 4);
    }
    return sign ? -v : v;
}

/* The integer value of storage element e (data: the packed bytes). */
static inline int cn__quant_q(cn_dtype dt, const uint8_t *data, int64_t e) {
    if (dt == CN_Q4_BLOCK) {
        uint8_t b = data[e >> 1];
        return (int)((e & 1) ? b >> 4 : b & 15) - 8;
    }
    return (int)(int8_t)data[e];
}

/* Scale number i (scales: the scales' bytes). */
static inline float cn__quant_scale(cn_dtype dt, const uint8_t *scales, int64_t i) {
    if (cn__quant_is_block(dt)) {
        uint16_t h;
        memcpy(&h, scales + 2 * i, 2);
        return cn__f16_to_f32(h);
    }
    float f;
    memcpy(&f, scales + 4 * i, 4);
    return f;
}

#endif
