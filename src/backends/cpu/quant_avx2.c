/* The quantized linear of the block schemes (q8_block, q4_block) on AVX2 without AVX-512 VNNI
 * (AMD Zen 2 / 3, Intel before Ice Lake), from A2_MIN_M rows of x: register-blocked tiles, as the
 * VNNI tile kernel, where the row kernel (weight_rows in quant.c) dots each activation row with
 * each weight row on its own.
 *
 * The activations come quantized (quant.c's quantize_rows: int8 [M, 32 nb], row scales [M]). The
 * weight is repacked 16 output columns (a panel) at a time into a buffer of the chunk's: per block
 * of 32 and vector of 8 columns, 8 vectors whose int32 lane c holds bytes 4t..4t+3 of the block of
 * column c (t = 0..7; q4 unpacked to q - 8), and the columns' f32 scales. A tile of 4 activation
 * rows x 8 columns keeps its accumulators in registers over all blocks: per block and row, 4
 * activation bytes are broadcast to every lane and multiplied with the sign trick (|w| as unsigned
 * bytes times x with w's sign, vpmaddubsw: a pair sums to at most 2 * 127 * 127, no saturation;
 * vpmaddwd by 1 sums the pairs to int32). Each block's int32 sums are scaled and added in f32 as
 * the VNNI and AMX kernels do (over b in order: C = fma(f32(dot_b), dw_b, C), then C dx + bias):
 * the same bits as theirs. */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"

#if defined(__x86_64__) || defined(__i386__)
#include "backends/cpu/quant_x86.h"

#define A2_NP 16  /* columns per panel: two vectors of 8 */
#define A2_MB 128 /* activation rows per unit of work (a repacked panel serves them all) */
#define A2_RM 4   /* activation rows per tile */

/* Panel n0 into pw (per block b and vector jj: 8 vectors of 32 bytes at ((b * 2 + jj) * 8 + t)
 * * 32), its scales into ps ((b * 2 + jj) * 8 + c) and its bias into pb (16); columns past N
 * repeat column n0 with scale 0. tmp: nb floats. */
T_AVX2 static void a2_repack(const cpu_qlinear *q, int64_t n0, int8_t *pw, float *ps, float *pb,
                             float *tmp) {
    const int64_t nb = q->nb;
    for (int jj = 0; jj < 2; jj++) {
        const uint8_t *row[8];
        int valid[8];
        for (int c = 0; c < 8; c++) {
            int64_t n = n0 + 8 * jj + c;
            valid[c] = n < q->N;
            int64_t e0 = q->w_off + (valid[c] ? n : n0) * q->w_s0;
            row[c] = q->w + (q->q4 ? e0 >> 1 : e0);
            pb[8 * jj + c] = valid[c] && q->bias ? q->bias[n * q->bias_stride] : 0.0f;
            quant_scales_f16_avx2(q->scales + 2 * (e0 / 32), nb, tmp);
            for (int64_t b = 0; b < nb; b++)
                ps[(b * 2 + jj) * 8 + c] = valid[c] ? tmp[b] : 0.0f;
        }
        for (int64_t b = 0; b < nb; b++) {
            __m256i v[8];
            for (int c = 0; c < 8; c++) {
                if (q->q4) { /* the nibbles as unsigned bytes u = q + 8 (a2_tile) */
                    _Alignas(32) int8_t un[32];
                    quant_unpack_q4_avx2(row[c] + 16 * b, un);
                    v[c] = _mm256_add_epi8(_mm256_load_si256((const __m256i *)un),
                                           _mm256_set1_epi8(8));
                } else {
                    v[c] = _mm256_loadu_si256((const __m256i *)(row[c] + 32 * b));
                }
            }
            /* 8 x 8 int32 transpose: vector t gets dword t of every column */
            __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
            __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
            __m256i t4 = _mm256_unpacklo_epi32(v[4], v[5]), t5 = _mm256_unpackhi_epi32(v[4], v[5]);
            __m256i t6 = _mm256_unpacklo_epi32(v[6], v[7]), t7 = _mm256_unpackhi_epi32(v[6], v[7]);
            __m256i u[8] = {_mm256_unpacklo_epi64(t0, t2), _mm256_unpackhi_epi64(t0, t2),
                            _mm256_unpacklo_epi64(t1, t3), _mm256_unpackhi_epi64(t1, t3),
                            _mm256_unpacklo_epi64(t4, t6), _mm256_unpackhi_epi64(t4, t6),
                            _mm256_unpacklo_epi64(t5, t7), _mm256_unpackhi_epi64(t5, t7)};
            __m256i *dst = (__m256i *)(pw + (b * 2 + jj) * 8 * 32);
            for (int t = 0; t < 4; t++) {
                _mm256_storeu_si256(dst + t, _mm256_permute2x128_si256(u[t], u[4 + t], 0x20));
                _mm256_storeu_si256(dst + 4 + t, _mm256_permute2x128_si256(u[t], u[4 + t], 0x31));
            }
        }
    }
}

/* rows [m0, m0 + RM) x the panel at column n0 (nn of its columns exist), one vector of 8
 * columns after the other (both at once would not fit AVX2's 16 registers); q8 (q4: a2_tile_q4) */
T_AVX2 static inline __attribute__((always_inline)) void a2_tile(const cpu_qlinear *q, int RM,
                                                                 const int8_t *pw, const float *ps,
                                                                 const float *pb, int64_t m0,
                                                                 int64_t n0, int64_t nn) {
    const int64_t nb = q->nb, K = 32 * nb;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int jj = 0; jj < 2 && 8 * jj < nn; jj++) {
        __m256 c[A2_RM];
        for (int i = 0; i < RM; i++)
            c[i] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const __m256i *wv = (const __m256i *)(pw + (b * 2 + jj) * 8 * 32);
            __m256i a[A2_RM];
            for (int i = 0; i < RM; i++)
                a[i] = _mm256_setzero_si256();
            for (int t = 0; t < 8; t++) {
                __m256i w = _mm256_loadu_si256(wv + t), aw = _mm256_abs_epi8(w);
                for (int i = 0; i < RM; i++) {
                    int32_t xv;
                    memcpy(&xv, q->xq + (m0 + i) * K + 32 * b + 4 * t, 4);
                    __m256i p =
                        _mm256_maddubs_epi16(aw, _mm256_sign_epi8(_mm256_set1_epi32(xv), w));
                    a[i] = _mm256_add_epi32(a[i], _mm256_madd_epi16(p, ones));
                    /* the sum kept a running one in a register: gcc otherwise reassociates the
                     * 8 steps into a tree and spills the products to the stack */
                    __asm__("" : "+x"(a[i]));
                }
            }
            __m256 s = _mm256_loadu_ps(ps + (b * 2 + jj) * 8);
            for (int i = 0; i < RM; i++)
                c[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(a[i]), s, c[i]);
        }
        __m256 bias = _mm256_loadu_ps(pb + 8 * jj);
        int64_t left = nn - 8 * jj < 8 ? nn - 8 * jj : 8;
        for (int i = 0; i < RM; i++) {
            _Alignas(32) float out[8];
            _mm256_store_ps(out, _mm256_add_ps(_mm256_mul_ps(c[i], _mm256_set1_ps(q->xs[m0 + i])),
                                               bias));
            memcpy(q->y + (m0 + i) * q->N + n0 + 8 * jj, out, sizeof(float) * (size_t)left);
        }
    }
}

/* a2_tile for q4, both vectors of 8 columns at once. The weight bytes are u = q + 8 in [0, 15],
 * vpmaddubsw's unsigned operand as they are (no sign trick); a pair is at most 2 * 15 * 127, so a
 * block's 8 steps add up in int16 (at most 30480), and the row's corr (a2_corr) takes 8 x back out
 * of each int16 lane before vpmaddwd: the same int32 block dots as a2_tile's, scaled and summed
 * in the same order. Each broadcast of 4 activation bytes serves 16 columns: a step is 2.5 vector
 * operations (3 one vector at a time; q8's is 5). */
T_AVX2 static inline __attribute__((always_inline)) void
a2_tile_q4(const cpu_qlinear *q, int RM, const int8_t *pw, const float *ps, const float *pb,
           const int32_t *corr, int64_t m0, int64_t n0, int64_t nn) {
    const int64_t nb = q->nb, K = 32 * nb;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 c[A2_RM][2];
    for (int i = 0; i < RM; i++)
        c[i][0] = c[i][1] = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const __m256i *wv = (const __m256i *)(pw + b * 2 * 8 * 32);
        __m256i a[A2_RM][2];
        for (int i = 0; i < RM; i++)
            a[i][0] = a[i][1] = _mm256_setzero_si256();
        for (int t = 0; t < 8; t++) {
            __m256i w0 = _mm256_loadu_si256(wv + t), w1 = _mm256_loadu_si256(wv + 8 + t);
            for (int i = 0; i < RM; i++) {
                int32_t xv;
                memcpy(&xv, q->xq + (m0 + i) * K + 32 * b + 4 * t, 4);
                __m256i xb = _mm256_set1_epi32(xv);
                a[i][0] = _mm256_add_epi16(a[i][0], _mm256_maddubs_epi16(w0, xb));
                a[i][1] = _mm256_add_epi16(a[i][1], _mm256_maddubs_epi16(w1, xb));
                __asm__("" : "+x"(a[i][0]), "+x"(a[i][1])); /* as a2_tile's */
            }
        }
        for (int i = 0; i < RM; i++) {
            __m256i cr = _mm256_set1_epi32(corr[(m0 + i) * nb + b]);
            for (int jj = 0; jj < 2; jj++)
                c[i][jj] = _mm256_fmadd_ps(
                    _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_sub_epi16(a[i][jj], cr), ones)),
                    _mm256_loadu_ps(ps + (b * 2 + jj) * 8), c[i][jj]);
        }
    }
    for (int jj = 0; jj < 2 && 8 * jj < nn; jj++) {
        __m256 bias = _mm256_loadu_ps(pb + 8 * jj);
        int64_t left = nn - 8 * jj < 8 ? nn - 8 * jj : 8;
        for (int i = 0; i < RM; i++) {
            _Alignas(32) float out[8];
            _mm256_store_ps(out, _mm256_add_ps(_mm256_mul_ps(c[i][jj],
                                                             _mm256_set1_ps(q->xs[m0 + i])),
                                               bias));
            memcpy(q->y + (m0 + i) * q->N + n0 + 8 * jj, out, sizeof(float) * (size_t)left);
        }
    }
}

/* the tile kernel of the scheme (Q4 and RM constants where a2_rows calls it) */
T_AVX2 static inline __attribute__((always_inline)) void
a2_tile_any(const cpu_qlinear *q, int RM, int Q4, const int8_t *pw, const float *ps,
            const float *pb, const int32_t *corr, int64_t m0, int64_t n0, int64_t nn) {
    if (Q4)
        a2_tile_q4(q, RM, pw, ps, pb, corr, m0, n0, nn);
    else
        a2_tile(q, RM, pw, ps, pb, m0, n0, nn);
}

/* Rows [m, m1) of x against the panel at n0: tiles of A2_RM rows, then the rest as one tile. */
T_AVX2 static inline __attribute__((always_inline)) void
a2_rows(const cpu_qlinear *q, int Q4, const int8_t *pw, const float *ps, const float *pb,
        const int32_t *corr, int64_t m, int64_t m1, int64_t n0, int64_t nn) {
    for (; m + A2_RM <= m1; m += A2_RM)
        a2_tile_any(q, A2_RM, Q4, pw, ps, pb, corr, m, n0, nn);
    switch (m1 - m) {
    case 3:
        a2_tile_any(q, 3, Q4, pw, ps, pb, corr, m, n0, nn);
        break;
    case 2:
        a2_tile_any(q, 2, Q4, pw, ps, pb, corr, m, n0, nn);
        break;
    case 1:
        a2_tile_any(q, 1, Q4, pw, ps, pb, corr, m, n0, nn);
        break;
    default:
        break;
    }
}

typedef struct a2job {
    const cpu_qlinear *q;
    const int32_t *corr; /* q4: a2_corr's [M, nb] */
    int failed;
} a2job;

/* q4: for each row and block of the quantized activations, 8 times the sums of the block's
 * elements 4t, 4t + 1 (low int16) and 4t + 2, 4t + 3 (high) over t = 0..7: what the unsigned
 * nibbles' 8 adds to a2_tile's int16 lanes (at most 8 * 2 * 8 * 127 = 16256 each). */
T_AVX2 static void a2_corr(const cpu_qlinear *q, int32_t *corr) {
    const int64_t nb = q->nb;
    for (int64_t e = 0; e < q->M * nb; e++) {
        __m256i h = _mm256_maddubs_epi16(_mm256_set1_epi8(8),
                                         _mm256_loadu_si256((const __m256i *)(q->xq + 32 * e)));
        __m128i v = _mm_add_epi16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
        v = _mm_add_epi16(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(1, 0, 3, 2)));
        v = _mm_add_epi16(v, _mm_shuffle_epi32(v, _MM_SHUFFLE(2, 3, 0, 1)));
        corr[e] = _mm_cvtsi128_si32(v);
    }
}

/* Work tiles [t0, t1): tile t is rows [A2_MB * (t / panels), +A2_MB) x panel t % panels. */
T_AVX2 static void a2_tiles(void *ctx, int64_t chunk, int64_t t0, int64_t t1) {
    (void)chunk;
    a2job *j = ctx;
    const cpu_qlinear *q = j->q;
    const int64_t nb = q->nb, panels = (q->N + A2_NP - 1) / A2_NP;
    int8_t *pw = cn__malloc("quant_linear", (size_t)(nb * 2 * 8 * 32 + 32));
    float *ps = cn__malloc("quant_linear", (size_t)(nb * 16 + 16 + nb + 8) * sizeof(float));
    if (!pw || !ps) {
        j->failed = 1; /* the error is set; the caller reports it */
        cn__free(pw);
        cn__free(ps);
        return;
    }
    float *pb = ps + nb * 16, *tmp = pb + 16;
    int64_t repacked = -1;
    for (int64_t t = t0; t < t1; t++) {
        int64_t mb = t / panels, p = t % panels, n0 = p * A2_NP;
        int64_t nn = q->N - n0 < A2_NP ? q->N - n0 : A2_NP;
        if (p != repacked) a2_repack(q, n0, pw, ps, pb, tmp);
        repacked = p;
        int64_t m = A2_MB * mb, m1 = m + A2_MB < q->M ? m + A2_MB : q->M;
        if (q->q4)
            a2_rows(q, 1, pw, ps, pb, j->corr, m, m1, n0, nn);
        else
            a2_rows(q, 0, pw, ps, pb, NULL, m, m1, n0, nn);
    }
    cn__free(pw);
    cn__free(ps);
}

cn_status cpu_quant_tiles_avx2(const cpu_qlinear *q) {
    int32_t *corr = NULL;
    if (q->q4) {
        corr = cn__malloc("quant_linear", (size_t)(q->M * q->nb + 1) * sizeof(int32_t));
        if (!corr) return CN_ERR_OUT_OF_MEMORY;
        a2_corr(q, corr);
    }
    a2job j = {.q = q, .corr = corr};
    int64_t tiles = ((q->M + A2_MB - 1) / A2_MB) * ((q->N + A2_NP - 1) / A2_NP);
    double macs = (double)q->M * 32.0 * (double)q->nb * (double)q->N;
    int64_t most = 16 * (int64_t)cpu_threads();
    cpu_parallel(tiles, macs >= 262144.0 ? (tiles < most ? tiles : most) : 1, a2_tiles, &j);
    cn__free(corr);
    return j.failed ? CN_ERR_OUT_OF_MEMORY : CN_OK;
}

#else

cn_status cpu_quant_tiles_avx2(const cpu_qlinear *q) {
    (void)q;
    return CN_ERR_BACKEND;
}

#endif
