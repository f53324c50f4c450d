/* CPU quantized linear (issue 19): y[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) for f32
 * activations x [M, K] and a quantized weight W [N, K] (core/quant.h's layout).
 *
 * Each row of x is quantized to int8 first (symmetric, round to nearest with ties away from
 * zero), one f32 scale dx = amax / 127 a row for every scheme (as fbgemm's dynamic activations,
 * per row rather than per tensor: no f32 work a block for the activations' scales, so the block
 * kernels' scaling is one fma a block, not a multiply and an fma). Then, for each weight row n
 * (the threads split the rows of W), the row is unpacked once to int8 (q4: the nibbles minus 8),
 * its scales to f32, and dotted with every activation row: int8 x int8 products summed in int32
 * per block of 32, scaled to f32 (blocks: dx (sum_b dw_b dot_b); rows: dx dw sum_b dot_b, summed
 * in int64). The int8 dots run on AVX-512 VNNI (vpdpbusd), AVX2 (vpmaddubsw + vpmaddwd) or
 * portable C, chosen at run time (cpu_quant_isa; CINDER_QUANT_ISA=vnni|avx2|c asks for a path,
 * never one the CPU lacks); the block schemes from AMX_MIN_M rows take the AMX tile unit where
 * the CPU and the kernel allow it (quant_amx.c: the bits of the VNNI tile kernel, below). The
 * signed x signed products use the usual sign trick: |a| (u8) times
 * b * sign(a) (s8), exact since |a| <= 127 (no pair sum reaches vpmaddubsw's saturation).
 *
 * The block schemes on VNNI take their own path (vnni_blocks, below): activations quantized once
 * (the same values), then a 512-bit row kernel for 1-5 rows and a register-blocked kernel that
 * reads the weight in place (broadcast) from 6 rows. Every path computes each output from the
 * same int8 products; the block paths differ only in the order of the f32 sums (tests/test_quant.c
 * checks each against the double-precision product of the same int8 values: within 1e-5 of the sum
 * of |terms|). No output depends on the number of threads or on how the work is cut. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "cinder/quant.h"
#include "core/alloc.h"
#include "core/quant.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <immintrin.h>

#include "backends/cpu/quant_x86.h"

#define QX86 1
#else
#define QX86 0
#endif

typedef enum { ISA_C = 0, ISA_AVX2 = 1, ISA_VNNI = 2, ISA_AMX = 3 } qisa;

#if QX86
/* F16C from CPUID leaf 1 (ECX bit 29): clang's __builtin_cpu_supports does not know "f16c". */
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && ((c >> 29) & 1u);
}
#endif

static qisa best_isa(void) {
#if QX86
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
    if (avx2 && __builtin_cpu_supports("avx512vnni") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw"))
        return cpu_amx_ready() ? ISA_AMX : ISA_VNNI;
    if (avx2) return ISA_AVX2;
#endif
    return ISA_C;
}

/* The path the next call takes: the widest the CPU has, or a narrower one CINDER_QUANT_ISA
 * asks for. */
static qisa cpu_quant_isa(void) {
    qisa best = best_isa();
    const char *e = getenv("CINDER_QUANT_ISA");
    if (e && !strcmp(e, "c")) return ISA_C;
    if (e && !strcmp(e, "avx2") && best >= ISA_AVX2) return ISA_AVX2;
    if (e && !strcmp(e, "vnni") && best >= ISA_VNNI) return ISA_VNNI;
    return best;
}

const char *cn_cpu_quant_isa(void) {
    static const char *const names[4] = {"c", "avx2", "vnni", "amx"};
    return names[cpu_quant_isa()];
}

/* ---- the int8 dots: n blocks of 32 ------------------------------------------------------------ */

/* blocks: sum_b sb[b] * dot(a_b, b_b), in f32 (the row's scale applied by the caller) */
static float dot_blocks_c(const int8_t *a, const int8_t *b, const float *sb, int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int32_t d = 0;
        for (int j = 0; j < 32; j++) d += (int32_t)a[32 * i + j] * (int32_t)b[32 * i + j];
        sum += sb[i] * (float)d;
    }
    return sum;
}

/* rows: the whole dot, in int64 */
static int64_t dot_row_c(const int8_t *a, const int8_t *b, int64_t nb) {
    int64_t sum = 0;
    for (int64_t i = 0; i < 32 * nb; i++) sum += (int32_t)a[i] * (int32_t)b[i];
    return sum;
}

#if QX86

T_AVX2 static inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

T_AVX2 static inline float hsum_max_f32(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

T_AVX2 static inline float hsum_f32(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* 8 int32 lanes whose sum is the dot of the 32 bytes of a and b (AVX2) */
T_AVX2 static inline __m256i dot32_avx2(__m256i a, __m256i b) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* two accumulators: consecutive blocks do not wait on each other's fmadd */
T_AVX2 static float dot_blocks_avx2(const int8_t *a, const int8_t *b, const float *sb,
                                    int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i d0 = dot32_avx2(_mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        __m256i d1 = dot32_avx2(_mm256_loadu_si256((const __m256i *)(a + 32 * i + 32)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i + 32)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(sb[i]), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(sb[i + 1]), acc1);
    }
    for (; i < nb; i++) {
        __m256i d = dot32_avx2(_mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                               _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(sb[i]), acc0);
    }
    return hsum_f32(_mm256_add_ps(acc0, acc1));
}

/* activation block b as [its 16 evens | its 16 odds] */
T_AVX2 static inline __m256i q4_even_odd_avx2(const int8_t *xq, int64_t b) {
    const __m256i even_odd = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
                                              0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
    __m256i v = _mm256_shuffle_epi8(_mm256_loadu_si256((const __m256i *)(xq + 32 * b)), even_odd);
    return _mm256_permute4x64_epi64(v, _MM_SHUFFLE(3, 1, 2, 0));
}

/* q4_block on AVX2, a few activation rows (the row kernel): the packed weight is dotted as it
 * is, without unpacking it to bytes first. A packed block holds element 2i in the low nibble of
 * byte i and 2i + 1 in the high one; the nibbles u = q + 8 are unsigned bytes, vpmaddubsw's first
 * operand (pairs at most 2 * 15 * 127: no saturation). The activations are reordered once per
 * call to line up with them, two blocks at a time: one 32-byte load of blocks b and b + 1 gives
 * their low nibbles (v & 15) and high nibbles ((v >> 4) & 15), so block pair b is stored as
 * [evens of b | evens of b + 1] then [odds of b | odds of b + 1] (64 bytes), and a last block
 * left over as [evens | odds]. corr, 8 x the pair sums that line up with each int16 lane
 * (vpmaddubsw of 8 with the same bytes), takes the 8 back out exactly: (u - 8) x = u x - 8 x, in
 * int16 (both halves' products plus corr stay within 7620 + 4064). corr is indexed by block: 16
 * int16 at block b for the pair starting there, or for the last block. */
T_AVX2 static void q4_prep_avx2(const int8_t *xq, int64_t nb, int8_t *xr, int16_t *corr) {
    const __m256i eight = _mm256_set1_epi8(8);
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) {
        __m256i v0 = q4_even_odd_avx2(xq, b), v1 = q4_even_odd_avx2(xq, b + 1);
        __m256i ev = _mm256_permute2x128_si256(v0, v1, 0x20);
        __m256i od = _mm256_permute2x128_si256(v0, v1, 0x31);
        _mm256_storeu_si256((__m256i *)(xr + 32 * b), ev);
        _mm256_storeu_si256((__m256i *)(xr + 32 * b + 32), od);
        _mm256_storeu_si256((__m256i *)(corr + 16 * b),
                            _mm256_add_epi16(_mm256_maddubs_epi16(eight, ev),
                                             _mm256_maddubs_epi16(eight, od)));
    }
    if (b < nb) { /* the last block of an odd count, as it is */
        __m256i v = q4_even_odd_avx2(xq, b);
        _mm256_storeu_si256((__m256i *)(xr + 32 * b), v);
        _mm256_storeu_si256((__m256i *)(corr + 16 * b), _mm256_maddubs_epi16(eight, v));
    }
}

/* 8 int32 lanes whose sum is the dot of packed q4 block w (16 bytes) with prepared block xr (the
 * last block of an odd count) */
T_AVX2 static inline __m256i dot_q4_block_avx2(const uint8_t *w, const int8_t *xr,
                                               const int16_t *corr) {
    __m128i v = _mm_loadu_si128((const __m128i *)w);
    __m256i u = _mm256_and_si256(
        _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1),
        _mm256_set1_epi8(15));
    __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(u, _mm256_loadu_si256((const __m256i *)xr)),
                                 _mm256_loadu_si256((const __m256i *)corr));
    return _mm256_madd_epi16(p, _mm256_set1_epi16(1));
}

/* Block pair b (w: 32 packed bytes) against its prepared 64 bytes: int32 lanes 0-3 sum to block
 * b's dot, lanes 4-7 to block b + 1's; scaled by sb[b] and sb[b + 1] into acc. */
T_AVX2 static inline __m256 dot_q4_pair_avx2(const uint8_t *w, const int8_t *xr,
                                             const int16_t *corr, const float *sb, __m256 acc) {
    const __m256i m15 = _mm256_set1_epi8(15);
    __m256i v = _mm256_loadu_si256((const __m256i *)w);
    __m256i lo = _mm256_and_si256(v, m15), hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), m15);
    __m256i p = _mm256_add_epi16(
        _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)xr)),
        _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(xr + 32))));
    p = _mm256_sub_epi16(p, _mm256_loadu_si256((const __m256i *)corr));
    __m256i d = _mm256_madd_epi16(p, _mm256_set1_epi16(1));
    __m256 s = _mm256_permutevar8x32_ps(_mm256_castpd_ps(_mm256_broadcast_sd((const double *)sb)),
                                        _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), s, acc);
}

/* dot_blocks_avx2 of a packed q4 row w with a prepared activation row (q4_prep_avx2) */
T_AVX2 static float dot_q4_blocks_avx2(const int8_t *xr, const int16_t *corr, const uint8_t *w,
                                       const float *sb, int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 3 < nb; i += 4) { /* two pairs: two accumulators */
        acc0 = dot_q4_pair_avx2(w + 16 * i, xr + 32 * i, corr + 16 * i, sb + i, acc0);
        acc1 = dot_q4_pair_avx2(w + 16 * i + 32, xr + 32 * i + 64, corr + 16 * i + 32, sb + i + 2,
                                acc1);
    }
    if (i + 1 < nb) {
        acc0 = dot_q4_pair_avx2(w + 16 * i, xr + 32 * i, corr + 16 * i, sb + i, acc0);
        i += 2;
    }
    if (i < nb) {
        __m256i d = dot_q4_block_avx2(w + 16 * i, xr + 32 * i, corr + 16 * i);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(sb[i]), acc1);
    }
    return hsum_f32(_mm256_add_ps(acc0, acc1));
}

T_AVX2 static int64_t dot_row_avx2(const int8_t *a, const int8_t *b, int64_t nb) {
    int64_t sum = 0;
    /* each block adds at most 8 * 127 * 127 * 4 / 8 per lane: 1024 blocks stay far below 2^31 */
    for (int64_t i0 = 0; i0 < nb; i0 += 1024) {
        int64_t i1 = i0 + 1024 < nb ? i0 + 1024 : nb;
        __m256i acc = _mm256_setzero_si256();
        for (int64_t i = i0; i < i1; i++)
            acc = _mm256_add_epi32(acc, dot32_avx2(_mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                                                   _mm256_loadu_si256((const __m256i *)(b + 32 * i))));
        sum += hsum_i32(acc);
    }
    return sum;
}

/* vpdpbusd: u8 x s8 products summed in groups of 4 into the int32 lanes */
T_VNNI static inline __m256i dot32_vnni(__m256i acc, __m256i a, __m256i b) {
    return _mm256_dpbusd_epi32(acc, _mm256_sign_epi8(a, a), _mm256_sign_epi8(b, a));
}

T_VNNI static float dot_blocks_vnni(const int8_t *a, const int8_t *b, const float *sb,
                                    int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256i z = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i d0 = dot32_vnni(z, _mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        __m256i d1 = dot32_vnni(z, _mm256_loadu_si256((const __m256i *)(a + 32 * i + 32)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i + 32)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(sb[i]), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(sb[i + 1]), acc1);
    }
    for (; i < nb; i++) {
        __m256i d = dot32_vnni(z, _mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                               _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(sb[i]), acc0);
    }
    return hsum_f32(_mm256_add_ps(acc0, acc1));
}

T_VNNI static int64_t dot_row_vnni(const int8_t *a, const int8_t *b, int64_t nb) {
    int64_t sum = 0;
    for (int64_t i0 = 0; i0 < nb; i0 += 1024) {
        int64_t i1 = i0 + 1024 < nb ? i0 + 1024 : nb;
        __m256i acc = _mm256_setzero_si256();
        for (int64_t i = i0; i < i1; i++)
            acc = dot32_vnni(acc, _mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                             _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        sum += hsum_i32(acc);
    }
    return sum;
}

/* ---- the block schemes on AVX-512 VNNI: 512-bit vectors, activations quantized once -------------
 *
 * vpdpbusd multiplies unsigned bytes by signed bytes; one side is offset by o to be unsigned and
 * the offset is taken back exactly in int32. The activation rows are quantized once per call
 * (vquantize_rows: bit for bit as quantize_rows, vectorized) into rows of kx bytes (a multiple of
 * 64, padded with x = 0), with dx, the row scales [M].
 *
 * Few rows (M < VGEMM_MIN_M): gemv_rows, each weight row read once, two blocks a vector (lanes
 * 0-7 block b, 8-15 block b + 1). The weight is the unsigned side (q8: q + 128 = q ^ 0x80; q4:
 * the stored nibble q + 8, as it is), so dot(x, q) = dot(x, q + o) - o * sum(x): lane [M, kx / 4]
 * holds -o * the sum of each 4 activation bytes (the int32 lanes of a dot), which starts each
 * dot. q4 activation blocks are stored as [the 16 even elements, the 16 odd ones], the order of a
 * packed block's low nibbles then its high nibbles, so a weight block unpacks with a shuffle, a
 * shift and an and. Each block's 8 int32 lanes go to f32, scaled by dw; the lanes are summed at
 * the end, then scaled by the row's dx.
 * More rows: the broadcast kernel (below: bcast_cols), the weight read in place. An output's
 * arithmetic (over b in order: C = fma(f32(dot_b), dw_b, C), then C dx + bias) does not depend on
 * the tile, the chunk or the thread that computes it. */
/* weight rows ahead that the row kernel prefetches: 2 measured 0.93x the time of 4 (one thread, CPU
 * time, alternated; 1 as 2, none 1.05x) */
#define GEMV_AHEAD  2
/* rows from which the broadcast kernel runs (below, the row kernel reads each weight row once for
 * all rows; the broadcast kernel pads the rows to 16) */
#define VGEMM_MIN_M 6
/* rows from which the AMX tile kernel runs (quant_amx.c; fewer than 16 are padded to a tile:
 * faster than VNNI's tiles for q8, as fast for q4, measured) */
#define AMX_MIN_M 6

typedef struct vjob {
    int q4;
    int64_t M, N, nb, kx;
    const float *x;
    int bc;        /* the broadcast kernel runs: xq, lane and dx in its layout (bquantize_groups) */
    int64_t G;     /* bc: groups of 16 rows (the last padded with zero rows) */
    int8_t *xq;    /* [M, kx] */
    float *dx;     /* [M]; bc: [16 G], a group's 16 rows together */
    int32_t *lane; /* [M, kx / 4]; bc: the blocks' corrections */
    const uint8_t *w, *scales;
    int64_t w_off, w_s0;
    const float *bias;
    int64_t bias_stride;
    float *y;
    int failed;
} vjob;

T_VNNI static void vquantize_rows(void *ctx, int64_t chunk, int64_t m0, int64_t m1) {
    (void)chunk;
    vjob *j = ctx;
    const int64_t nb = j->nb, kx = j->kx, K = 32 * nb;
    const int32_t off = j->q4 ? 8 : 128;
    const __m256i ones = _mm256_set1_epi8(1);
    const __m256i noff = _mm256_set1_epi32(-off);
    for (int64_t m = m0; m < m1; m++) {
        const float *x = j->x + m * K;
        int8_t *q = j->xq + m * kx;
        int32_t *lane = j->lane + m * (kx / 4);
        memset(q + K, 0, (size_t)(kx - K));
        memset(lane + K / 4, 0, (size_t)(kx - K));
        float id;
        j->dx[m] = quant_row_scale512(x, K, &id);
        for (int64_t b = 0; b < nb; b++) {
            const __m256i bytes = quant_block512(x + 32 * b, id, j->q4);
            _mm256_storeu_si256((__m256i *)(q + 32 * b), bytes);
            __m256i sums = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, bytes);
            _mm256_storeu_si256((__m256i *)(lane + 8 * b), _mm256_mullo_epi32(sums, noff));
        }
    }
}

/* weight row n: its packed bytes and its f16 scales */
static inline const uint8_t *vrow(const vjob *j, int64_t n) {
    int64_t e0 = j->w_off + n * j->w_s0;
    return j->w + (j->q4 ? e0 >> 1 : e0);
}
static inline const uint8_t *vrow_scales(const vjob *j, int64_t n) {
    return j->scales + 2 * ((j->w_off + n * j->w_s0) / 32);
}

/* blocks b and b + 1 of a weight row (only b when one is 0), offset to unsigned (q4: the stored
 * q + 8), as a dot reads them: lanes 0-7 block b, 8-15 block b + 1 */
T_VNNI static inline __m512i vpair(int q4, const uint8_t *p, int two, __m512i x80) {
    if (q4) return quant_q4_pair512(p, two);
    __m512i z = two ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(0xFFFFFFFFull, p);
    return _mm512_xor_si512(z, x80);
}

static const int32_t vpair_idx[8][16] = {
    {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1},
    {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3},
    {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5},
    {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7},
    {8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9},
    {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11},
    {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13},
    {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}};

/* weight rows [n0, n1) against the MR (< VGEMM_MIN_M) activation rows; Q4: the weight's scheme
 * (a constant of each instance, as MR) */
T_VNNI static inline __attribute__((always_inline)) void gemv_body(vjob *j, int MR, int Q4,
                                                                   int64_t n0, int64_t n1) {
    const int64_t nb = j->nb, kx = j->kx, N = j->N;
    const int64_t bstep = Q4 ? 16 : 32; /* bytes of a packed block */
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    __m512i idx[8];
    for (int p = 0; p < 8; p++)
        idx[p] = _mm512_loadu_si512(vpair_idx[p]);
    for (int64_t n = n0; n < n1; n++) {
        const uint8_t *wr = vrow(j, n), *sc = vrow_scales(j, n);
        /* the row GEMV_AHEAD rows on (the last rows: this one again), fetched while this one is
         * dotted (the weight streams from the last-level cache or memory, row after row: a
         * hardware prefetcher stops at each 4 KiB page) */
        const uint8_t *ahead = vrow(j, n + GEMV_AHEAD < n1 ? n + GEMV_AHEAD : n);
        /* two accumulators a row (even and odd pairs of blocks): the adds do not wait on each
         * other */
        __m512 acc[2][VGEMM_MIN_M - 1];
        for (int m = 0; m < MR; m++)
            acc[0][m] = acc[1][m] = _mm512_setzero_ps();
        int64_t g = 0;
        for (; g + 16 <= nb; g += 16) { /* whole groups of 16 blocks */
            const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(sc + 2 * g)));
            for (int p = 0; p < 8; p++) {
                int64_t b = g + 2 * p;
                _mm_prefetch((const char *)ahead + bstep * b, _MM_HINT_T0);
                __m512i w = vpair(Q4, wr + bstep * b, 1, x80);
                const __m512 sp = _mm512_permutexvar_ps(idx[p], dw);
                for (int m = 0; m < MR; m++) {
                    __m512i d = _mm512_loadu_si512(j->lane + m * (kx / 4) + 8 * b);
                    d = _mm512_dpbusd_epi32(d, w, _mm512_loadu_si512(j->xq + m * kx + 32 * b));
                    acc[p & 1][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sp, acc[p & 1][m]);
                }
            }
        }
        if (g < nb) { /* the last, partial group */
            int64_t ng = nb - g;
            __mmask16 k = (__mmask16)((1u << ng) - 1u);
            const __m512 dw = _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(k, sc + 2 * g));
            for (int64_t p = 0; 2 * p < ng; p++) {
                int64_t b = g + 2 * p;
                __m512i w = vpair(Q4, wr + bstep * b, b + 1 < nb, x80);
                const __m512 sp = _mm512_permutexvar_ps(idx[p], dw);
                for (int m = 0; m < MR; m++) {
                    __m512i d = _mm512_loadu_si512(j->lane + m * (kx / 4) + 8 * b);
                    d = _mm512_dpbusd_epi32(d, w, _mm512_loadu_si512(j->xq + m * kx + 32 * b));
                    acc[p & 1][m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sp, acc[p & 1][m]);
                }
            }
        }
        float bias = j->bias ? j->bias[n * j->bias_stride] : 0.0f;
        for (int m = 0; m < MR; m++)
            j->y[m * N + n] =
                _mm512_reduce_add_ps(_mm512_add_ps(acc[0][m], acc[1][m])) * j->dx[m] + bias;
    }
}

T_VNNI static void gemv_rows(void *ctx, int64_t chunk, int64_t n0, int64_t n1) {
    (void)chunk;
    vjob *j = ctx;
#define GEMV_CASES(Q4)                                                                             \
    switch (j->M) {                                                                                \
    case 1:                                                                                        \
        gemv_body(j, 1, Q4, n0, n1);                                                               \
        break;                                                                                     \
    case 2:                                                                                        \
        gemv_body(j, 2, Q4, n0, n1);                                                               \
        break;                                                                                     \
    case 3:                                                                                        \
        gemv_body(j, 3, Q4, n0, n1);                                                               \
        break;                                                                                     \
    case 4:                                                                                        \
        gemv_body(j, 4, Q4, n0, n1);                                                               \
        break;                                                                                     \
    default:                                                                                       \
        gemv_body(j, 5, Q4, n0, n1);                                                               \
        break;                                                                                     \
    }
    if (j->q4)
        GEMV_CASES(1)
    else
        GEMV_CASES(0)
#undef GEMV_CASES
}

/* ---- the broadcast kernel: the weight read in place, 16 activation rows a vector ---------------
 *
 * From VGEMM_MIN_M rows. The activations are quantized (the same values) into groups of 16 rows,
 * up to four groups (64 rows) a row tile; per tile, block b and step u (0..7), the 16 rows'
 * bytes 4u..4u+3 of the block make a vector (the signed side, x as it is), and a weight row's
 * bytes 4u..4u+3 are broadcast to every lane as the unsigned side (q8: q + 128, q4: the stored
 * nibbles q + 8: the low nibbles for u < 4, the high for u >= 4, as the q4 activations are
 * ordered: the even elements, then the odd), so one vpdpbusd is 16 rows' 4 products. Each
 * block's dot starts from -o * the block's sum of x (o = 128 | 8). A tile of RV groups keeps
 * RV x BR accumulators in registers over all blocks (BR weight rows, output columns: 3 for 4
 * groups, else 4; for 1 group 6 and 12 measured no faster, their row pointers spilled), and
 * scales each block's int32 sums as the AMX and AVX2 tile kernels do: C = fma(f32(dot_b), dw_b,
 * C), then C dx + bias, the same bits. The weight is never repacked (repacking it cost a quarter
 * of the time at 64 rows, measured: a 4096 x 4096 weight unpacked each call beside tiles bound by
 * vpdpbusd); a tile's f32 work (an fma a vector of outputs a block, on the ports of vpdpbusd) is
 * 1 of its 9 cycles (with block scales for the activations too, a multiply more: the call took
 * 1.1x the time, measured). */
#define BCU 2  /* row tiles (of 64 rows) a unit of work: their activations stay in L2 */
#define BW  48 /* weight rows (output columns) a unit of work: a multiple of every BR and of 16 */

/* 16 vectors of 16 floats transposed in place: v[i] lane k becomes v[k] lane i */
T_VNNI static inline void btranspose16(__m512 v[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(v[i], v[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(v[i], v[i + 1]);
    }
    for (int i = 0; i < 16; i += 4)
        for (int h = 0; h < 2; h++) {
            v[i + 2 * h] = _mm512_castpd_ps(
                _mm512_unpacklo_pd(_mm512_castps_pd(t[i + h]), _mm512_castps_pd(t[i + h + 2])));
            v[i + 2 * h + 1] = _mm512_castpd_ps(
                _mm512_unpackhi_pd(_mm512_castps_pd(t[i + h]), _mm512_castps_pd(t[i + h + 2])));
        }
    for (int i = 0; i < 16; i += 8)
        for (int h = 0; h < 4; h++) {
            t[i + h] = _mm512_shuffle_f32x4(v[i + h], v[i + h + 4], 0x88);
            t[i + h + 4] = _mm512_shuffle_f32x4(v[i + h], v[i + h + 4], 0xDD);
        }
    for (int h = 0; h < 8; h++) {
        v[h] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0x88);
        v[h + 8] = _mm512_shuffle_f32x4(t[h], t[h + 8], 0xDD);
    }
}

/* Groups [g0, g1) of 16 activation rows (the rows past M: zeros) into the broadcast kernel's
 * layout: row tile tl (rows 64 tl ..) at xq + 2048 nb tl, with gt groups; (block b, step u,
 * group g) at ((b 8 + u) gt + g) 64, row r of the group at 4 r; the corrections at
 * 64 nb tl + (b gt + g) 16 + r; the row scales dx in row order (16 g + r). A group's block is
 * quantized 16 rows a vector (lane r: row r), its 32 elements transposed in registers (a row at a
 * time, with the 4-byte stores of the layout, it took 3% of the kernel's time; 450 cycles per 16
 * row-blocks now against 1230): in each lane the values of quant_block512 with the row's scale
 * (quant_row_scale512), so the same bytes, dx and sums bit for bit. */
T_VNNI static void bquantize_groups(void *ctx, int64_t chunk, int64_t g0, int64_t g1) {
    (void)chunk;
    vjob *j = ctx;
    const int64_t nb = j->nb, K = 32 * nb;
    const int q4 = j->q4, sh = q4 ? 3 : 7; /* the offset o = 8 | 128 = 1 << sh */
    const __m512i ff = _mm512_set1_epi32(0xFF);
    for (int64_t g = g0; g < g1; g++) {
        const int64_t tl = g / 4, gi = g % 4, gt = j->G - 4 * tl < 4 ? j->G - 4 * tl : 4;
        int8_t *xt = j->xq + 2048 * nb * tl + 64 * gi;
        int32_t *ct = j->lane + 64 * nb * tl + 16 * gi;
        /* row r of the group at xr[r] (past M: row M - 1, loaded as zeros, mask 0, scale 0) */
        const float *xr[16];
        __mmask16 live[16];
        _Alignas(64) float dr[16], idr[16];
        for (int r = 0; r < 16; r++) {
            xr[r] = j->x + (16 * g + r < j->M ? 16 * g + r : j->M - 1) * K;
            live[r] = 16 * g + r < j->M ? 0xFFFF : 0;
            dr[r] = idr[r] = 0.0f;
            if (live[r]) dr[r] = quant_row_scale512(xr[r], K, &idr[r]);
        }
        memcpy(j->dx + 16 * g, dr, sizeof dr);
        const __m512 id = _mm512_load_ps(idr);
        for (int64_t b = 0; b < nb; b++) {
            __m512i sum = _mm512_setzero_si512();
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) { /* elements 16 h + k, k < 16 */
                __m512 e[16];
                for (int r = 0; r < 16; r++)
                    e[r] = _mm512_maskz_loadu_ps(live[r], xr[r] + 32 * b + 16 * h);
                btranspose16(e);
                __m512i q[16];
                for (int k = 0; k < 16; k++) {
                    q[k] = quant_round_clamp512(_mm512_mul_ps(e[k], id));
                    sum = _mm512_add_epi32(sum, q[k]);
                }
                /* 4 of the block's 8 steps: q8, step 4 h + w: elements 4 w ..; q4 (the even
                 * elements first, then the odd), steps 2 h + w (even) and 4 + 2 h + w (odd) */
                for (int w = 0; w < 4; w++) {
                    const int u = q4 ? (w < 2 ? 2 * h + w : 2 + 2 * h + w) : 4 * h + w;
                    __m512i t4[4];
                    for (int t = 0; t < 4; t++)
                        t4[t] = q4 ? q[2 * (4 * (w & 1) + t) + (w >> 1)] : q[4 * w + t];
                    __m512i v = _mm512_and_si512(t4[0], ff);
                    v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(t4[1], ff), 8));
                    v = _mm512_or_si512(v, _mm512_slli_epi32(_mm512_and_si512(t4[2], ff), 16));
                    v = _mm512_or_si512(v, _mm512_slli_epi32(t4[3], 24));
                    _mm512_storeu_si512(xt + ((b * 8 + u) * gt) * 64, v);
                }
            }
            const __m512i zero = _mm512_setzero_si512();
            /* -o * the block's sum */
            _mm512_storeu_si512(ct + b * gt * 16,
                                _mm512_sub_epi32(zero, _mm512_slli_epi32(sum, sh)));
        }
    }
}

/* blocks ahead that btile prefetches its weight rows (then the next tile's): 256 bytes, 0.93x
 * (q8) and 0.96x (q4) the cycles of none, the rows streaming from memory (a row of q8 is a 4 KiB
 * page: the hardware prefetcher starts anew at each) */
#define BC_AHEAD(Q4) ((Q4) ? 16 : 8)

/* One row tile (RV groups of 16 rows at xt, ct; their row scales at dt) x the BR weight rows wr
 * (their f32 scales at dw[r * nb + b]; nx: the rows that come next): the 16 RV x BR outputs,
 * before the bias, into out[r * 64 + row]. */
T_VNNI static inline __attribute__((always_inline)) void
btile(const vjob *j, int RV, int BR, int Q4, const int8_t *xt, const int32_t *ct, const float *dt,
      const uint8_t *const *wr, const uint8_t *const *nx, const float *dw, float *out) {
    const int64_t nb = j->nb, bstep = Q4 ? 16 : 32;
    const __m512i x80 = _mm512_set1_epi8((char)0x80), m15 = _mm512_set1_epi8(15);
    __m512 c[12]; /* [v * BR + r], RV * BR <= 12 */
    for (int i = 0; i < RV * BR; i++)
        c[i] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i a[12];
        for (int v = 0; v < RV; v++)
            for (int r = 0; r < BR; r++)
                a[v * BR + r] = _mm512_loadu_si512(ct + (b * RV + v) * 16);
        const int8_t *xb = xt + b * 8 * RV * 64;
        const int64_t ahead = b + BC_AHEAD(Q4);
        for (int r = 0; r < BR; r++)
            _mm_prefetch((const char *)(ahead < nb ? wr[r] + bstep * ahead
                                                   : nx[r] + bstep * (ahead - nb)),
                         _MM_HINT_T0);
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) {
            __m512i xv[4];
            /* in registers: as memory operands of the BR vpdpbusd each, the loads measured
             * 1.2x the time */
            for (int v = 0; v < RV; v++)
                __asm__ volatile("vmovdqu64 %1, %0"
                                 : "=v"(xv[v])
                                 : "m"(*(const __m512i *)(xb + (u * RV + v) * 64)));
            for (int r = 0; r < BR; r++) {
                /* a load each (q4: steps u and u + 4 read the same 4 bytes; kept in registers
                 * meanwhile, the broadcasts of a tile spill) */
                __m512i w;
                __asm__ volatile("vpbroadcastd %1, %0"
                                 : "=v"(w)
                                 : "m"(*(const int32_t *)(wr[r] + (Q4 ? 16 * b + 4 * (u & 3)
                                                                      : 32 * b + 4 * u))));
                if (!Q4)
                    w = _mm512_xor_si512(w, x80);
                else if (u < 4)
                    w = _mm512_and_si512(w, m15);
                else
                    w = _mm512_and_si512(_mm512_srli_epi16(w, 4), m15);
                for (int v = 0; v < RV; v++)
                    a[v * BR + r] = _mm512_dpbusd_epi32(a[v * BR + r], w, xv[v]);
            }
        }
        for (int r = 0; r < BR; r++) {
            const __m512 s = _mm512_set1_ps(dw[r * nb + b]);
            for (int v = 0; v < RV; v++)
                c[v * BR + r] =
                    _mm512_fmadd_ps(_mm512_cvtepi32_ps(a[v * BR + r]), s, c[v * BR + r]);
        }
    }
    for (int v = 0; v < RV; v++) {
        const __m512 d = _mm512_loadu_ps(dt + 16 * v);
        for (int r = 0; r < BR; r++)
            _mm512_storeu_ps(out + r * 64 + 16 * v, _mm512_mul_ps(c[v * BR + r], d));
    }
}

/* Row tile tl (gt groups) x the weight rows [c0, c1) (their scales in dw, from row c0), BR at a
 * time; the outputs into ob (64 floats a weight row, from c0). */
T_VNNI static inline __attribute__((always_inline)) void
bcast_tile(const vjob *j, int RV, int BR, int Q4, int64_t tl, int64_t c0, int64_t c1,
           const float *dw, float *ob) {
    const int64_t nb = j->nb, N = j->N;
    const int8_t *xt = j->xq + 2048 * nb * tl;
    const int32_t *ct = j->lane + 64 * nb * tl;
    const float *dt = j->dx + 64 * tl;
    for (int64_t n0 = c0; n0 < c1; n0 += BR) {
        const uint8_t *wr[12], *nx[12];
        for (int r = 0; r < BR; r++) {
            /* past N: row N - 1 again, not stored */
            wr[r] = vrow(j, n0 + r < N ? n0 + r : N - 1);
            nx[r] = vrow(j, n0 + BR + r < N ? n0 + BR + r : N - 1);
        }
        btile(j, RV, BR, Q4, xt, ct, dt, wr, nx, dw + (n0 - c0) * nb, ob + (n0 - c0) * 64);
    }
}

/* A row tile's outputs o (a column of 64 rows a weight row, columns c0 ..) plus the bias (from
 * c0) into y's rows m0 .., columns [c0, c1): 16 x 16 blocks transposed in registers (a float at a
 * time, perf put 5% of the kernel's samples on this copy; 2% now). The same additions. */
T_VNNI static inline void bstore_tile(const vjob *j, const float *o, const float *bias, int64_t m0,
                                      int64_t c0, int64_t c1) {
    const int64_t N = j->N, rows = j->M - m0 < 64 ? j->M - m0 : 64;
    for (int64_t c = c0; c < c1; c += 16) {
        const int64_t nc = c1 - c < 16 ? c1 - c : 16;
        const __mmask16 k = (__mmask16)((1u << nc) - 1u);
        const __m512 bv = _mm512_loadu_ps(bias + (c - c0));
        for (int64_t i0 = 0; i0 < rows; i0 += 16) {
            __m512 v[16];
            for (int q = 0; q < 16; q++) /* columns past c1: not computed, not stored */
                v[q] = q < nc ? _mm512_loadu_ps(o + (c - c0 + q) * 64 + i0) : _mm512_setzero_ps();
            btranspose16(v);
            for (int64_t i = 0; i < 16 && i0 + i < rows; i++)
                _mm512_mask_storeu_ps(j->y + (m0 + i0 + i) * N + c, k, _mm512_add_ps(v[i], bv));
        }
    }
}

/* Work items [t0, t1): item t is the BCU row tiles of unit t / runs x the BW weight rows from
 * BW * (t % runs). Each tile's outputs gather in ob (a column of 64 rows a weight row) and go to
 * y at the end of the item (bstore_tile): stored as they came (a float every N in y, 64 lines a
 * tile) they cost 0.15x the time. */
T_VNNI static void bcast_cols(void *ctx, int64_t chunk, int64_t t0, int64_t t1) {
    (void)chunk;
    vjob *j = ctx;
    const int64_t nb = j->nb, N = j->N, runs = (N + BW - 1) / BW, tiles = (j->G + 3) / 4;
    float *dw =
        cn__aligned_alloc("quant_linear", (size_t)(BW * nb + BCU * BW * 64) * sizeof(float));
    if (!dw) {
        j->failed = 1; /* the error is set; the caller reports it */
        return;
    }
    float *ob = dw + BW * nb; /* [BCU][BW][64] */
    for (int64_t t = t0; t < t1; t++) {
        int64_t unit = t / runs, c0 = BW * (t % runs), c1 = c0 + BW < N ? c0 + BW : N;
        int64_t tl0 = BCU * unit, tl1 = BCU * (unit + 1) < tiles ? BCU * (unit + 1) : tiles;
        for (int64_t n = c0; n < c0 + BW; n++) {
            const uint8_t *sc = vrow_scales(j, n < N ? n : N - 1);
            /* the next item's scales, wanted in an item's time (a miss each line otherwise) */
            const uint8_t *sn = vrow_scales(j, n + BW < N ? n + BW : N - 1);
            for (int64_t l = 0; l < 2 * nb; l += 64)
                _mm_prefetch((const char *)sn + l, _MM_HINT_T1);
            quant_scales_f16_avx2(sc, nb, dw + (n - c0) * nb);
        }
        for (int64_t tl = tl0; tl < tl1; tl++) {
            float *o = ob + (tl - tl0) * BW * 64;
            int q4 = j->q4;
#define BCAST_TILE(RV, BR)                                                                         \
    (q4 ? bcast_tile(j, RV, BR, 1, tl, c0, c1, dw, o) : bcast_tile(j, RV, BR, 0, tl, c0, c1, dw, o))
            switch (j->G - 4 * tl < 4 ? j->G - 4 * tl : 4) { /* the tile's groups */
            case 4: BCAST_TILE(4, 3); break;
            case 3: BCAST_TILE(3, 4); break;
            case 2: BCAST_TILE(2, 4); break;
            default: BCAST_TILE(1, 4); break;
            }
#undef BCAST_TILE
        }
        float bias[BW];
        for (int64_t c = c0; c < c0 + BW; c++)
            bias[c - c0] = j->bias && c < c1 ? j->bias[c * j->bias_stride] : 0.0f;
        for (int64_t tl = tl0; tl < tl1; tl++)
            bstore_tile(j, ob + (tl - tl0) * BW * 64, bias, 64 * tl, c0, c1);
    }
    cn__aligned_free(dw);
}

/* The block schemes on VNNI (j: the job's shapes and pointers); CN_ERR_OUT_OF_MEMORY when a
 * buffer cannot be had (the error is set). */
static cn_status vnni_blocks(vjob *j) {
    const int64_t M = j->M, nb = j->nb;
    j->bc = M >= VGEMM_MIN_M;
    j->kx = 64 * ((nb + 1) / 2);
    j->G = (M + 15) / 16;
    /* the row kernel: M rows of kx bytes, kx / 4 lanes a row; the broadcast kernel: 16 G rows
     * of 32 nb bytes, a correction a block */
    const int64_t rows = j->bc ? 16 * j->G : M;
    const size_t xbytes = (size_t)(rows * (j->bc ? 32 * nb : j->kx)),
                 lbytes = (size_t)(j->bc ? rows * nb * 4 : rows * j->kx);
    j->xq = cn__aligned_alloc("quant_linear", xbytes + 64);
    j->lane = j->xq ? cn__aligned_alloc("quant_linear", lbytes + 64) : NULL;
    j->dx = j->lane ? cn__aligned_alloc("quant_linear", (size_t)(rows + 16) * sizeof(float)) : NULL;
    cn_status st = CN_OK;
    if (!j->dx) {
        st = CN_ERR_OUT_OF_MEMORY;
    } else {
        double work = (double)M * 32.0 * (double)nb;
        if (j->bc)
            cpu_parallel(j->G,
                         work >= 65536.0 ? cpu_chunks(j->G, 1 + 65536 / (512 * nb + 1)) : 1,
                         bquantize_groups, j);
        else
            cpu_parallel(rows, work >= 65536.0 ? cpu_chunks(rows, 1 + 65536 / (32 * nb + 1)) : 1,
                         vquantize_rows, j);
        double macs = work * (double)j->N;
        if (j->bc) {
            int64_t units = (j->G + 4 * BCU - 1) / (4 * BCU), runs = (j->N + BW - 1) / BW;
            /* a chunk an item (BW columns, ~70 us at 64 rows x 4096): the thread that finishes
             * first waits half an item on average, not half of 2-3 items as with 16 chunks a
             * thread (and a thread that the machine's load delays holds back less) */
            int64_t items = units * runs;
            cpu_parallel(items, macs >= 262144.0 ? items : 1, bcast_cols, j);
        } else {
            int64_t chunks =
                macs >= 262144.0 ? cpu_chunks(j->N, 1 + (int64_t)(262144.0 / (work + 1))) : 1;
            cpu_parallel(j->N, chunks, gemv_rows, j);
        }
        if (j->failed) st = CN_ERR_OUT_OF_MEMORY;
    }
    cn__aligned_free(j->xq);
    cn__aligned_free(j->lane);
    cn__aligned_free(j->dx);
    return st;
}
#endif

/* rows of x from which the AVX2 path takes its tile kernel (quant_avx2.c) for the block schemes */
#define A2_MIN_M 4

/* ---- the kernel ----------------------------------------------------------------------------- */

typedef struct qjob {
    qisa isa;
    cn_dtype scheme;
    int block;           /* block scheme: scales per 32 */
    int64_t M, N, K, nb; /* nb: blocks of 32 in a (zero-padded) row */
    const float *x;      /* [M, K] */
    int8_t *xq;          /* [M, 32 nb] */
    int8_t *xr;          /* q4 on AVX2's row kernel: [M, 32 nb] (q4_prep_avx2), or NULL */
    int16_t *corr;       /* and its [M, 16 nb] pair sums times 8 */
    float *xs;           /* [M]: the rows' scales */
    const uint8_t *w, *scales;
    int64_t w_off, w_s0, group;
    const float *bias;
    int64_t bias_stride;
    float *y;                 /* [M, N] */
    int failed;
} qjob;

/* v rounded half away from zero (roundf) and clamped to [-127, 127]: an activation's byte */
static inline int8_t quant_round_clamp(float v) {
    float r = roundf(v);
    return (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
}

/* Quantizes activation rows [m0, m1) to int8, a scale a row (the largest |x| not NaN / 127). */
static void quantize_rows(void *ctx, int64_t chunk, int64_t m0, int64_t m1) {
    (void)chunk;
    qjob *j = ctx;
    int64_t K = j->K, nb = j->nb;
    for (int64_t m = m0; m < m1; m++) {
        const float *x = j->x + m * K;
        int8_t *q = j->xq + m * 32 * nb;
        memset(q, 0, (size_t)(32 * nb));
        float amax = 0.0f;
        for (int64_t k = 0; k < K; k++) amax = fmaxf(amax, fabsf(x[k]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        for (int64_t k = 0; k < K; k++) q[k] = quant_round_clamp(x[k] * id);
        j->xs[m] = d;
    }
}

#if QX86
/* quantize_rows on AVX2: the same bytes and scales (the largest |x| not NaN: max_ps keeps its
 * second operand where the first is NaN, as fmaxf keeps the number; the rounding as
 * quant_round_clamp512's, which equals roundf then the clamp), 32 floats at a time. */
T_AVX2 static void quantize_rows_avx2(void *ctx, int64_t chunk, int64_t m0, int64_t m1) {
    (void)chunk;
    qjob *j = ctx;
    const int64_t K = j->K, nb = j->nb, K32 = K / 32 * 32;
    const __m256 sign = _mm256_set1_ps(-0.0f), half = _mm256_set1_ps(0.49999997f);
    const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int64_t m = m0; m < m1; m++) {
        const float *x = j->x + m * K;
        int8_t *q = j->xq + m * 32 * nb;
        memset(q + K32, 0, (size_t)(32 * nb - K32));
        __m256 mx = _mm256_setzero_ps();
        for (int64_t k = 0; k < K32; k += 8)
            mx = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), mx);
        float amax = hsum_max_f32(mx);
        for (int64_t k = K32; k < K; k++) amax = fmaxf(amax, fabsf(x[k]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        const __m256 vid = _mm256_set1_ps(id);
        for (int64_t k = 0; k < K32; k += 32) {
            __m256i v[4];
            for (int i = 0; i < 4; i++) {
                __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + k + 8 * i), vid);
                __m256i r = _mm256_cvttps_epi32(_mm256_add_ps(f, _mm256_or_ps(half,
                                                                             _mm256_and_ps(f, sign))));
                v[i] = _mm256_min_epi32(_mm256_max_epi32(r, lo), hi);
            }
            __m256i b = _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]),
                                           _mm256_packs_epi32(v[2], v[3]));
            _mm256_storeu_si256((__m256i *)(q + k), _mm256_permutevar8x32_epi32(b, order));
        }
        for (int64_t k = K32; k < K; k++) q[k] = quant_round_clamp(x[k] * id);
        j->xs[m] = d;
    }
}
#endif

/* Weight rows [n0, n1) against every activation row. */
static void weight_rows(void *ctx, int64_t chunk, int64_t n0, int64_t n1) {
    (void)chunk;
    qjob *j = ctx;
    int64_t K = j->K, nb = j->nb, M = j->M, N = j->N;
    int8_t *wrow = cn__malloc("quant_linear", (size_t)(32 * nb + 1));
    float *ws = cn__malloc("quant_linear", (size_t)(nb + 1) * sizeof(float));
    if (!wrow || !ws) {
        j->failed = 1; /* the error is set; the caller reports it */
        cn__free(wrow);
        cn__free(ws);
        return;
    }
    memset(wrow, 0, (size_t)(32 * nb));
    for (int64_t n = n0; n < n1; n++) {
        int64_t e0 = j->w_off + n * j->w_s0;
        const int8_t *wr = wrow;
        if (j->scheme != CN_Q4_BLOCK && K % 32 == 0) {
            wr = (const int8_t *)(j->w + e0); /* whole blocks: read the row in place */
        } else if (j->xr) {
            /* packed: dot_q4_blocks_avx2 reads it in place */
        } else if (j->scheme == CN_Q4_BLOCK) {
            const uint8_t *src = j->w + (e0 >> 1);
            for (int64_t b = 0; b < nb; b++) {
#if QX86
                if (j->isa != ISA_C) {
                    quant_unpack_q4_avx2(src + 16 * b, wrow + 32 * b);
                    continue;
                }
#endif
                for (int i = 0; i < 16; i++) {
                    uint8_t v = src[16 * b + i];
                    wrow[32 * b + 2 * i] = (int8_t)((v & 15) - 8);
                    wrow[32 * b + 2 * i + 1] = (int8_t)((v >> 4) - 8);
                }
            }
        } else {
            memcpy(wrow, j->w + e0, (size_t)K); /* the padding past K stays zero */
        }
        float sw = 0.0f;
        if (j->block) {
#if QX86
            if (j->isa != ISA_C)
                quant_scales_f16_avx2(j->scales + 2 * (e0 / 32), nb, ws);
            else
#endif
                for (int64_t b = 0; b < nb; b++)
                    ws[b] = cn__quant_scale(j->scheme, j->scales, e0 / 32 + b);
        } else
            sw = cn__quant_scale(j->scheme, j->scales, e0 / j->group);
        float bias = j->bias ? j->bias[n * j->bias_stride] : 0.0f;
        for (int64_t m = 0; m < M; m++) {
            const int8_t *xq = j->xq + m * 32 * nb;
            float v;
            if (j->block) {
#if QX86
                v = j->xr ? dot_q4_blocks_avx2(j->xr + m * 32 * nb, j->corr + m * 16 * nb,
                                               j->w + (e0 >> 1), ws, nb)
                    : j->isa >= ISA_VNNI ? dot_blocks_vnni(xq, wr, ws, nb)
                    : j->isa == ISA_AVX2 ? dot_blocks_avx2(xq, wr, ws, nb)
                                         : dot_blocks_c(xq, wr, ws, nb);
#else
                v = dot_blocks_c(xq, wr, ws, nb);
#endif
                v *= j->xs[m];
            } else {
                int64_t d;
#if QX86
                d = j->isa >= ISA_VNNI   ? dot_row_vnni(xq, wr, nb)
                    : j->isa == ISA_AVX2 ? dot_row_avx2(xq, wr, nb)
                                         : dot_row_c(xq, wr, nb);
#else
                d = dot_row_c(xq, wr, nb);
#endif
                v = j->xs[m] * sw * (float)d;
            }
            j->y[m * N + n] = v + bias;
        }
    }
    cn__free(wrow);
    cn__free(ws);
}

/* in = x f32 [M, K] (dense), w (the quantized weight: data at its storage's first byte, shape
 * [N, K], strides [s0, 1]), bias f32 [N] when ints[0]; ints = has_bias, w_offset, group,
 * scales_at; out = y f32, M * N dense. */
cn_status cpu_quant_linear(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *w = &a->in[1];
    qjob j = {.isa = cpu_quant_isa(), .scheme = w->dtype, .block = cn__quant_is_block(w->dtype),
              .M = x->shape[0], .N = w->shape[0], .K = w->shape[1], .x = x->data,
              .w = w->data, .w_off = a->ints[1], .w_s0 = w->strides[0], .group = a->ints[2],
              .y = a->out[0].data};
    j.scales = (const uint8_t *)w->data + a->ints[3];
    if (a->ints[0]) {
        j.bias = a->in[2].data;
        j.bias_stride = a->in[2].strides[0];
    }
    j.nb = (j.K + 31) / 32;
#if QX86
    if (j.isa == ISA_AMX && j.block && j.M >= AMX_MIN_M) {
        cpu_qlinear q = {.q4 = j.scheme == CN_Q4_BLOCK, .M = j.M, .N = j.N, .nb = j.nb, .x = j.x,
                         .w = j.w, .scales = j.scales, .w_off = j.w_off, .w_s0 = j.w_s0,
                         .bias = j.bias, .bias_stride = j.bias_stride, .y = j.y};
        return cpu_quant_linear_amx(&q);
    }
    if (j.isa >= ISA_VNNI && j.block) {
        vjob v = {.q4 = j.scheme == CN_Q4_BLOCK,
                  .M = j.M,
                  .N = j.N,
                  .nb = j.nb,
                  .x = j.x,
                  .w = j.w,
                  .scales = j.scales,
                  .w_off = j.w_off,
                  .w_s0 = j.w_s0,
                  .bias = j.bias,
                  .bias_stride = j.bias_stride,
                  .y = j.y};
        return vnni_blocks(&v);
    }
#endif
    j.xq = cn__malloc("quant_linear", (size_t)(j.M * 32 * j.nb + 1));
    j.xs = j.xq ? cn__malloc("quant_linear", (size_t)(j.M + 1) * sizeof(float)) : NULL;
    if (!j.xs) {
        cn__free(j.xq);
        return CN_ERR_OUT_OF_MEMORY;
    }
    double work = (double)j.M * (double)j.K;
    cpu_parallel(j.M, work >= 65536.0 ? cpu_chunks(j.M, 1 + 65536 / (j.K + 1)) : 1,
#if QX86
                 j.isa == ISA_AVX2 ? quantize_rows_avx2 :
#endif
                                   quantize_rows,
                 &j);
    cn_status st = CN_OK;
    if (j.isa == ISA_AVX2 && j.block && j.M >= A2_MIN_M) {
        cpu_qlinear q = {.q4 = j.scheme == CN_Q4_BLOCK, .M = j.M, .N = j.N, .nb = j.nb,
                         .xq = j.xq, .xs = j.xs, .w = j.w, .scales = j.scales, .w_off = j.w_off,
                         .w_s0 = j.w_s0, .bias = j.bias, .bias_stride = j.bias_stride, .y = j.y};
        st = cpu_quant_tiles_avx2(&q);
    } else {
#if QX86
        if (j.isa == ISA_AVX2 && j.scheme == CN_Q4_BLOCK) {
            j.xr = cn__malloc("quant_linear", (size_t)(j.M * 32 * j.nb + 1));
            j.corr = j.xr ? cn__malloc("quant_linear", (size_t)(j.M * 16 * j.nb + 1) * 2) : NULL;
            if (!j.corr) {
                cn__free(j.xr);
                cn__free(j.xq);
                cn__free(j.xs);
                return CN_ERR_OUT_OF_MEMORY;
            }
            for (int64_t m = 0; m < j.M; m++)
                q4_prep_avx2(j.xq + m * 32 * j.nb, j.nb, j.xr + m * 32 * j.nb,
                             j.corr + m * 16 * j.nb);
        }
#endif
        double macs = work * (double)j.N;
        int64_t chunks =
            macs >= 262144.0 ? cpu_chunks(j.N, 1 + (int64_t)(262144.0 / (work + 1))) : 1;
        cpu_parallel(j.N, chunks, weight_rows, &j);
        if (j.failed) st = CN_ERR_OUT_OF_MEMORY;
    }
    cn__free(j.xr);
    cn__free(j.corr);
    cn__free(j.xq);
    cn__free(j.xs);
    return st;
}
