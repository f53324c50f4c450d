/* 2x2 max pooling at stride 2 with kept choices, and its backward, on AVX-512 (see pool512.h).
 *
 * pool_index.c's compiled loops take a row of 7 or 14 windows (the CNN's planes) a few lanes at
 * a time, its two input rows de-interleaved by scalar-like shuffles, and narrow the choices
 * through a buffer: about ten cycles a window, more than the convolution's im2col. Here a row's
 * 16 windows come from two masked loads per input row and one permute each for the even and the
 * odd columns; the choices are computed in mask registers and stored as bytes at once. The
 * selects are pool_index.c's, in its order, so values and choices are the same bit for bit. */
#include "backends/cpu/pool512.h"

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#include <immintrin.h>

#define AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

int cpu_pool512(void) {
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}

/* The first c lanes, c clipped to [0, 16]. */
static inline __mmask16 first(int64_t c) {
    return (__mmask16)(c <= 0 ? 0u : c >= 16 ? 0xffffu : (1u << c) - 1u);
}

/* n <= 16 windows whose rows 0 and 1 are x (32 values in x0, x1) and y -> o[0, n), id[0, n)
 * when id is not NULL. The window's a, b (row 0) and c, d (row 1); m = the first maximum under
 * >, the choice k = the first position equal to m, then the first NaN, and the value the chosen
 * element: the selects of pool_index.c's pool2_at, in its order. */
AVX512 static inline void pool2_windows(__m512 x0, __m512 x1, __m512 y0, __m512 y1, int64_t n,
                                        const float *bias, float *o, uint8_t *id) {
    const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28,
                                           30);
    const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
    __m512 a = _mm512_permutex2var_ps(x0, even, x1), b = _mm512_permutex2var_ps(x0, odd, x1);
    __m512 c = _mm512_permutex2var_ps(y0, even, y1), d = _mm512_permutex2var_ps(y0, odd, y1);
    if (bias) { /* the convolution's epilogue, z + b, as conv.c adds it */
        const __m512 bv = _mm512_set1_ps(*bias);
        a = _mm512_add_ps(a, bv);
        b = _mm512_add_ps(b, bv);
        c = _mm512_add_ps(c, bv);
        d = _mm512_add_ps(d, bv);
    }
    __m512 m = a;
    m = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(b, m, _CMP_GT_OQ), m, b);
    m = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(c, m, _CMP_GT_OQ), m, c);
    m = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(d, m, _CMP_GT_OQ), m, d);
    __m512i k = _mm512_set1_epi32(3);
    if (id) {
        k = _mm512_mask_mov_epi32(k, _mm512_cmp_ps_mask(c, m, _CMP_EQ_OQ), _mm512_set1_epi32(2));
        k = _mm512_mask_mov_epi32(k, _mm512_cmp_ps_mask(b, m, _CMP_EQ_OQ), _mm512_set1_epi32(1));
        k = _mm512_mask_mov_epi32(k, _mm512_cmp_ps_mask(a, m, _CMP_EQ_OQ),
                                  _mm512_setzero_si512());
    }
    __m512 v = m;
    /* the NaNs, where there are any (lanes past n hold zeros, or the bias) */
    if (_mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(c, d, _CMP_UNORD_Q)) {
        __mmask16 na = _mm512_cmp_ps_mask(a, a, _CMP_UNORD_Q);
        __mmask16 nb = _mm512_cmp_ps_mask(b, b, _CMP_UNORD_Q);
        __mmask16 nc = _mm512_cmp_ps_mask(c, c, _CMP_UNORD_Q);
        __mmask16 nd = _mm512_cmp_ps_mask(d, d, _CMP_UNORD_Q);
        v = _mm512_mask_mov_ps(v, nd, d);
        v = _mm512_mask_mov_ps(v, nc, c);
        v = _mm512_mask_mov_ps(v, nb, b);
        v = _mm512_mask_mov_ps(v, na, a);
        k = _mm512_mask_mov_epi32(k, nd, _mm512_set1_epi32(3));
        k = _mm512_mask_mov_epi32(k, nc, _mm512_set1_epi32(2));
        k = _mm512_mask_mov_epi32(k, nb, _mm512_set1_epi32(1));
        k = _mm512_mask_mov_epi32(k, na, _mm512_setzero_si512());
    }
    __mmask16 n16 = first(n);
    _mm512_mask_storeu_ps(o, n16, v);
    if (id) _mm512_mask_cvtepi32_storeu_epi8(id, n16, k);
}

AVX512 void cpu_pool2_plane512_f32(const float *z, int64_t W, int64_t PH, int64_t PW,
                                   const float *bias, float *out, uint8_t *idx) {
    int64_t ph = 0;
    if (PW <= 8) { /* two rows of windows per vector: rows 2 ph, 2 ph + 1 and 2 ph + 2, 2 ph + 3 */
        /* x0: 2 PW values of the first row, then the second's first; x1: the second's rest */
        const __mmask16 m0 = first(2 * PW), m1 = (__mmask16)(first(4 * PW) & ~m0);
        const __mmask16 m2 = first(4 * PW - 16);
        for (; ph + 2 <= PH; ph += 2) {
            const float *r0 = z + ph * 2 * W, *r1 = r0 + W, *s0 = r0 + 2 * W, *s1 = s0 + W;
            __m512 x0 = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(m0, r0), m1, s0 - 2 * PW);
            __m512 y0 = _mm512_mask_loadu_ps(_mm512_maskz_loadu_ps(m0, r1), m1, s1 - 2 * PW);
            __m512 x1 = _mm512_maskz_loadu_ps(m2, s0 + 16 - 2 * PW);
            __m512 y1 = _mm512_maskz_loadu_ps(m2, s1 + 16 - 2 * PW);
            pool2_windows(x0, x1, y0, y1, 2 * PW, bias, out + ph * PW,
                          idx ? idx + ph * PW : NULL);
        }
    }
    for (; ph < PH; ph++) {
        const float *r0 = z + ph * 2 * W, *r1 = r0 + W;
        float *o = out + ph * PW;
        uint8_t *id = idx ? idx + ph * PW : NULL;
        for (int64_t p = 0; p < PW; p += 16) {
            int64_t n = PW - p < 16 ? PW - p : 16;
            __mmask16 lo = first(2 * n), hi = first(2 * n - 16);
            __m512 x0 = _mm512_maskz_loadu_ps(lo, r0 + 2 * p);
            __m512 x1 = _mm512_maskz_loadu_ps(hi, r0 + 2 * p + 16);
            __m512 y0 = _mm512_maskz_loadu_ps(lo, r1 + 2 * p);
            __m512 y1 = _mm512_maskz_loadu_ps(hi, r1 + 2 * p + 16);
            pool2_windows(x0, x1, y0, y1, n, bias, o + p, id ? id + p : NULL);
        }
    }
}

/* n <= 16 windows: g[0, n) and their choices -> d0[0, 2n), d1[0, 2n). */
AVX512 static inline void back2_piece(const float *g, const uint8_t *id, int64_t n, float *d0,
                                      float *d1) {
    const __m512i lo_half = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22,
                                              7, 23);
    const __m512i hi_half = _mm512_add_epi32(lo_half, _mm512_set1_epi32(8));
    __mmask16 n16 = first(n);
    __m512i k = _mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(n16, id));
    __m512 v = _mm512_add_ps(_mm512_setzero_ps(), _mm512_maskz_loadu_ps(n16, g)); /* 0 + g */
    __m512 v0 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_setzero_si512()), v);
    __m512 v1 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(1)), v);
    __m512 v2 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(2)), v);
    __m512 v3 = _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(k, _mm512_set1_epi32(3)), v);
    __mmask16 lo = first(2 * n), hi = first(2 * n - 16);
    _mm512_mask_storeu_ps(d0, lo, _mm512_permutex2var_ps(v0, lo_half, v1));
    _mm512_mask_storeu_ps(d1, lo, _mm512_permutex2var_ps(v2, lo_half, v3));
    if (hi) {
        _mm512_mask_storeu_ps(d0 + 16, hi, _mm512_permutex2var_ps(v0, hi_half, v1));
        _mm512_mask_storeu_ps(d1 + 16, hi, _mm512_permutex2var_ps(v2, hi_half, v3));
    }
}

AVX512 void cpu_pool2_back_plane512_f32(const float *g, int64_t gs_h, const uint8_t *idx,
                                        int64_t PH, int64_t PW, int64_t W, float *gz) {
    for (int64_t ph = 0; ph < PH; ph++) {
        float *d = gz + ph * 2 * W;
        for (int64_t p = 0; p < PW; p += 16)
            back2_piece(g + ph * gs_h + p, idx + ph * PW + p, PW - p < 16 ? PW - p : 16,
                        d + 2 * p, d + W + 2 * p);
        for (int64_t c = 2 * PW; c < W; c++) d[c] = d[W + c] = 0;
    }
}

#else

int cpu_pool512(void) { return 0; }

/* never called: cpu_pool512 is 0 */
void cpu_pool2_plane512_f32(const float *z, int64_t W, int64_t PH, int64_t PW, const float *bias,
                            float *out, uint8_t *idx) {
    (void)z, (void)W, (void)PH, (void)PW, (void)bias, (void)out, (void)idx;
}

void cpu_pool2_back_plane512_f32(const float *g, int64_t gs_h, const uint8_t *idx, int64_t PH,
                                 int64_t PW, int64_t W, float *gz) {
    (void)g, (void)gs_h, (void)idx, (void)PH, (void)PW, (void)W, (void)gz;
}

#endif
