/* What quant.c (the VNNI kernels) and quant_amx.c (the AMX tile kernel) share: the target
 * attributes of their AVX2 and 512-bit code, F16C scales and q4 unpacking, and the int8
 * quantization of activation rows (a scale a row, a block of 32 at a time), so that both paths see
 * the same int8 values bit for bit. x86-64 only. */
#ifndef CINDER_BACKENDS_CPU_QUANT_X86_H
#define CINDER_BACKENDS_CPU_QUANT_X86_H

#include <immintrin.h>
#include <stdint.h>

#include "core/quant.h"

#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define T_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

/* v rounded half away from zero (roundf) to int32 and clamped to [-127, 127], as every path
 * quantizes: trunc(v + copysign(0.49999997, v)), three operations (0.49999997 is the float below
 * 0.5: v + 0.5 would round up at v = 0.49999997); the same values as roundf then the clamp for
 * every float, NaN and infinities included (checked exhaustively over the 2^32 floats). */
T_VNNI static inline __m512i quant_round_clamp512(__m512 v) {
    const __m512i half = _mm512_castps_si512(_mm512_set1_ps(0.49999997f));
    const __m512 hv = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        half, _mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN), 0xF8)); /* half | sign of v */
    const __m512i q = _mm512_cvttps_epi32(_mm512_add_ps(v, hv));
    return _mm512_min_epi32(_mm512_max_epi32(q, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
}

/* The row's scale, as the portable quantize_rows takes it: d = amax / 127, amax the largest |x|
 * of the n floats at x (n a multiple of 32) that is not NaN (a max of exact values: the same in
 * any order); *id = 1 / d, or 0 when d is 0. */
T_VNNI static inline float quant_row_scale512(const float *x, int64_t n, float *id) {
    __m512 m0 = _mm512_setzero_ps(), m1 = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 32) { /* max_ps(v, m) is m where v is NaN */
        m0 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i)), m0);
        m1 = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + i + 16)), m1);
    }
    const float d = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1)) / 127.0f;
    *id = d != 0.0f ? 1.0f / d : 0.0f;
    return d;
}

/* The 32 floats at x quantized with the row's id = 1 / d (quant_row_scale512) as the portable
 * quantize_rows does (q = roundf(x id) clamped to [-127, 127]): the 32 int8 values in order; q4
 * (the activations of a q4_block weight) reorders them to the 16 even elements then the 16 odd
 * ones, the order of a packed q4 block's low then high nibbles. */
T_VNNI static inline __m256i quant_block512(const float *x, float id, int q4) {
    __m512 s = _mm512_set1_ps(id);
    __m512i a = quant_round_clamp512(_mm512_mul_ps(_mm512_loadu_ps(x), s));
    __m512i b = quant_round_clamp512(_mm512_mul_ps(_mm512_loadu_ps(x + 16), s));
    if (q4) {
        const __m512i even =
            _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
        const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
        __m512i e = _mm512_permutex2var_epi32(a, even, b);
        b = _mm512_permutex2var_epi32(a, odd, b);
        a = e;
    }
    return _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(a)),
                                   _mm512_cvtepi32_epi8(b), 1);
}

/* A q4 weight row's blocks b and b + 1 (16 packed bytes each at p; only b when two is 0) as the
 * nibbles q + 8: lanes of 128 bits [low nibbles of b, high of b, low of b + 1, high of b + 1]. */
T_VNNI static inline __m512i quant_q4_pair512(const uint8_t *p, int two) {
    const __m512i shv = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                          0x0004000400040004, 0x0004000400040004);
    __m256i h = two ? _mm256_loadu_si256((const __m256i *)p) : _mm256_maskz_loadu_epi8(0xFFFFu, p);
    __m512i z = _mm512_castsi256_si512(h);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0)); /* [b, b, b + 1, b + 1] */
    return _mm512_and_si512(_mm512_srlv_epi16(z, shv), _mm512_set1_epi8(15));
}

/* n f16 scales to f32 (F16C: exact, as the scalar conversion) */
T_AVX2 static inline void quant_scales_f16_avx2(const uint8_t *src, int64_t n, float *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * i))));
    for (; i < n; i++) dst[i] = cn__quant_scale(CN_Q8_BLOCK, src, i);
}

/* 16 packed bytes (32 nibbles, element 2j low) to 32 int8 values q - 8 */
T_AVX2 static inline void quant_unpack_q4_avx2(const uint8_t *src, int8_t *dst) {
    __m128i v = _mm_loadu_si128((const __m128i *)src), m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    __m128i eight = _mm_set1_epi8(8);
    _mm_storeu_si128((__m128i *)dst, _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight));
    _mm_storeu_si128((__m128i *)(dst + 16), _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight));
}

#endif
