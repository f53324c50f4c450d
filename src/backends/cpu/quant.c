/* CPU quantized linear (issue 19): y[m, n] = sum_k x[m, k] W[n, k] (+ bias[n]) for f32
 * activations x [M, K] and a quantized weight W [N, K] (core/quant.h's layout).
 *
 * Each row of x is quantized to int8 first (symmetric, round to nearest with ties away from
 * zero): per block of 32 for the block weights (one f32 scale amax / 127 a block, as ggml's
 * Q8_0 activations), per row for q8_tensor / q8_channel. Then, for each weight row n (the
 * threads split the rows of W), the row is unpacked once to int8 (q4: the nibbles minus 8), its
 * scales to f32, and dotted with every activation row: int8 x int8 products summed in int32 per
 * block of 32, scaled to f32 (blocks: sum_b dx_b dw_b dot_b; rows: dx dw sum_b dot_b, summed in
 * int64). The int8 dots run on AVX-512 VNNI (vpdpbusd), AVX2 (vpmaddubsw + vpmaddwd) or
 * portable C, chosen at run time (cpu_quant_isa; CINDER_QUANT_ISA=vnni|avx2|c asks for a path,
 * never one the CPU lacks). The signed x signed products use the usual sign trick: |a| (u8) times
 * b * sign(a) (s8), exact since |a| <= 127 (no pair sum reaches vpmaddubsw's saturation). */
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
#define QX86 1
#else
#define QX86 0
#endif

typedef enum { ISA_C = 0, ISA_AVX2 = 1, ISA_VNNI = 2 } qisa;

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
        return ISA_VNNI;
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
    return best;
}

const char *cn_cpu_quant_isa(void) {
    static const char *const names[3] = {"c", "avx2", "vnni"};
    return names[cpu_quant_isa()];
}

/* ---- the int8 dots: n blocks of 32 ------------------------------------------------------------ */

/* blocks: sum_b sa[b] * sb[b] * dot(a_b, b_b), in f32 */
static float dot_blocks_c(const int8_t *a, const float *sa, const int8_t *b, const float *sb,
                          int64_t nb) {
    float sum = 0.0f;
    for (int64_t i = 0; i < nb; i++) {
        int32_t d = 0;
        for (int j = 0; j < 32; j++) d += (int32_t)a[32 * i + j] * (int32_t)b[32 * i + j];
        sum += sa[i] * sb[i] * (float)d;
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
#define T_AVX2 __attribute__((target("avx2,fma,f16c")))
#define T_VNNI __attribute__((target("avx2,fma,f16c,avx512f,avx512vl,avx512bw,avx512vnni")))

T_AVX2 static inline int32_t hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
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
T_AVX2 static float dot_blocks_avx2(const int8_t *a, const float *sa, const int8_t *b,
                                    const float *sb, int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i d0 = dot32_avx2(_mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        __m256i d1 = dot32_avx2(_mm256_loadu_si256((const __m256i *)(a + 32 * i + 32)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i + 32)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(sa[i] * sb[i]), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(sa[i + 1] * sb[i + 1]),
                               acc1);
    }
    for (; i < nb; i++) {
        __m256i d = dot32_avx2(_mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                               _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(sa[i] * sb[i]), acc0);
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

T_VNNI static float dot_blocks_vnni(const int8_t *a, const float *sa, const int8_t *b,
                                    const float *sb, int64_t nb) {
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    const __m256i z = _mm256_setzero_si256();
    int64_t i = 0;
    for (; i + 1 < nb; i += 2) {
        __m256i d0 = dot32_vnni(z, _mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        __m256i d1 = dot32_vnni(z, _mm256_loadu_si256((const __m256i *)(a + 32 * i + 32)),
                                _mm256_loadu_si256((const __m256i *)(b + 32 * i + 32)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d0), _mm256_set1_ps(sa[i] * sb[i]), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d1), _mm256_set1_ps(sa[i + 1] * sb[i + 1]),
                               acc1);
    }
    for (; i < nb; i++) {
        __m256i d = dot32_vnni(z, _mm256_loadu_si256((const __m256i *)(a + 32 * i)),
                               _mm256_loadu_si256((const __m256i *)(b + 32 * i)));
        acc0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(sa[i] * sb[i]), acc0);
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

/* n f16 scales to f32 (F16C: exact, as the scalar conversion) */
T_AVX2 static void scales_f16_avx2(const uint8_t *src, int64_t n, float *dst) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(src + 2 * i))));
    for (; i < n; i++) dst[i] = cn__quant_scale(CN_Q8_BLOCK, src, i);
}

/* 16 packed bytes (32 nibbles, element 2j low) to 32 int8 values q - 8 */
T_AVX2 static void unpack_q4_avx2(const uint8_t *src, int8_t *dst) {
    __m128i v = _mm_loadu_si128((const __m128i *)src), m = _mm_set1_epi8(15);
    __m128i lo = _mm_and_si128(v, m), hi = _mm_and_si128(_mm_srli_epi16(v, 4), m);
    __m128i eight = _mm_set1_epi8(8);
    _mm_storeu_si128((__m128i *)dst, _mm_sub_epi8(_mm_unpacklo_epi8(lo, hi), eight));
    _mm_storeu_si128((__m128i *)(dst + 16), _mm_sub_epi8(_mm_unpackhi_epi8(lo, hi), eight));
}
#endif

/* ---- the kernel ----------------------------------------------------------------------------- */

typedef struct qjob {
    qisa isa;
    cn_dtype scheme;
    int block;                /* block scheme: scales per 32 */
    int64_t M, N, K, nb;      /* nb: blocks of 32 in a (zero-padded) row */
    const float *x;           /* [M, K] */
    int8_t *xq;               /* [M, 32 nb] */
    float *xs;                /* [M, nb] (blocks) or [M] (rows) */
    const uint8_t *w, *scales;
    int64_t w_off, w_s0, group;
    const float *bias;
    int64_t bias_stride;
    float *y;                 /* [M, N] */
    int failed;
} qjob;

/* Quantizes activation rows [m0, m1) to int8. */
static void quantize_rows(void *ctx, int64_t chunk, int64_t m0, int64_t m1) {
    (void)chunk;
    qjob *j = ctx;
    int64_t K = j->K, nb = j->nb, per = j->block ? 32 : K;
    for (int64_t m = m0; m < m1; m++) {
        const float *x = j->x + m * K;
        int8_t *q = j->xq + m * 32 * nb;
        memset(q, 0, (size_t)(32 * nb));
        int64_t groups = j->block ? nb : 1;
        for (int64_t g = 0; g < groups; g++) {
            int64_t k0 = g * per, k1 = k0 + per < K ? k0 + per : K;
            float amax = 0.0f;
            for (int64_t k = k0; k < k1; k++) amax = fmaxf(amax, fabsf(x[k]));
            const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
            for (int64_t k = k0; k < k1; k++) {
                float r = roundf(x[k] * id);
                q[k] = (int8_t)(r > 127.0f ? 127 : r < -127.0f ? -127 : (int)r);
            }
            j->xs[m * groups + g] = d;
        }
    }
}

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
        } else if (j->scheme == CN_Q4_BLOCK) {
            const uint8_t *src = j->w + (e0 >> 1);
            for (int64_t b = 0; b < nb; b++) {
#if QX86
                if (j->isa != ISA_C) {
                    unpack_q4_avx2(src + 16 * b, wrow + 32 * b);
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
                scales_f16_avx2(j->scales + 2 * (e0 / 32), nb, ws);
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
                const float *xs = j->xs + m * nb;
#if QX86
                v = j->isa == ISA_VNNI   ? dot_blocks_vnni(xq, xs, wr, ws, nb)
                    : j->isa == ISA_AVX2 ? dot_blocks_avx2(xq, xs, wr, ws, nb)
                                         : dot_blocks_c(xq, xs, wr, ws, nb);
#else
                v = dot_blocks_c(xq, xs, wr, ws, nb);
#endif
            } else {
                int64_t d;
#if QX86
                d = j->isa == ISA_VNNI   ? dot_row_vnni(xq, wr, nb)
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
    int64_t groups = j.block ? j.nb : 1;
    j.xq = cn__malloc("quant_linear", (size_t)(j.M * 32 * j.nb + 1));
    j.xs = j.xq ? cn__malloc("quant_linear", (size_t)(j.M * groups + 1) * sizeof(float)) : NULL;
    if (!j.xs) {
        cn__free(j.xq);
        return CN_ERR_OUT_OF_MEMORY;
    }
    double work = (double)j.M * (double)j.K;
    cpu_parallel(j.M, work >= 65536.0 ? cpu_chunks(j.M, 1 + 65536 / (j.K + 1)) : 1,
                 quantize_rows, &j);
    double macs = work * (double)j.N;
    int64_t chunks = macs >= 262144.0 ? cpu_chunks(j.N, 1 + (int64_t)(262144.0 / (work + 1))) : 1;
    cpu_parallel(j.N, chunks, weight_rows, &j);
    cn__free(j.xq);
    cn__free(j.xs);
    return j.failed ? CN_ERR_OUT_OF_MEMORY : CN_OK;
}
