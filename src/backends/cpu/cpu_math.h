/* Vectorisable math for the CPU kernels (reduce.c's softmax and logsumexp, elementwise.c's exp).
 * A file that includes this should turn off trapping math before its includes (see reduce.c):
 * gcc keeps a float compare-select (the clamps in exp_f32) behind a branch otherwise, and the
 * loop does not vectorise. */
#ifndef CINDER_CPU_MATH_H
#define CINDER_CPU_MATH_H

#include <math.h>
#include <stdint.h>

/* ---- exp for f32, vectorisable -------------------------------------------------------------- *
 * Straight-line code (no branches) so loops over it vectorise: exp(x) = 2^k e^r with
 * k = round(x / ln2) and r = x - k ln2 (ln2 split into a part exact in float and a remainder),
 * |r| <= ln2/2; e^r by its Taylor series to degree 7 (truncation < 1e-8 relative), in fused
 * multiply-adds: fmaf rounds once wherever it runs (an FMA instruction in CPU_CLONES_EXP's
 * clones, glibc's fmaf in the baseline build), so every path gives the same bits, and the chain
 * is half as long as with separate multiplies and adds (softmax's rows are bound by it: 1.3x).
 * 2^k is applied as two halves so results in the subnormal range and overflow to inf come out
 * right. Measured within 0.94 ulp of the exact value over the normal range (every third float
 * of [-103.9, 88.7] against libm's double exp; 1.22 ulp with separate multiplies and adds); NaN
 * gives NaN, -inf 0, +inf inf. */
/* exp of xc already clamped to [-104, 89] (the shared body of exp_f32 and exp_nonpos_f32). */
static inline float exp_clamped_f32(float xc) {
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float kf = (xc * 1.44269504f + round_magic) - round_magic;
    float r = xc - kf * 0.693359375f; /* exact: ln2 = 0.693359375 - 2.12194440e-4 */
    r = fmaf(kf, 2.12194440e-4f, r);
    float p = 1.0f / 5040.0f;
    p = fmaf(p, r, 1.0f / 720.0f);
    p = fmaf(p, r, 1.0f / 120.0f);
    p = fmaf(p, r, 1.0f / 24.0f);
    p = fmaf(p, r, 1.0f / 6.0f);
    p = fmaf(p, r, 0.5f);
    p = fmaf(p, r, 1.0f);
    p = fmaf(p, r, 1.0f);
    int32_t k = (int32_t)kf;          /* in [-150, 128] */
    int32_t k1 = k >> 1, k2 = k - k1; /* (gcc: arithmetic shift) both in [-75, 64]: normal */
    union {
        uint32_t u;
        float f;
    } s1, s2;
    s1.u = (uint32_t)(k1 + 127) << 23;
    s2.u = (uint32_t)(k2 + 127) << 23;
    return p * s1.f * s2.f;
}

static inline float exp_f32(float x) {
    float xc = x > -104.0f ? x : -104.0f; /* below: 0 even as a subnormal; NaN lands here too */
    xc = xc < 89.0f ? xc : 89.0f;         /* above: inf */
    float y = exp_clamped_f32(xc);
    return x == x ? y : x;
}

/* exp_f32 for softmax's x - max: x <= 0, or NaN (a row holding a NaN or +inf, or only -inf). The
 * same value as exp_f32 for x <= 0; a NaN gives 0 instead of NaN, which the caller turns into NaN
 * (the row's sum is then 0, and 0 * (1 / 0) is NaN). Without the upper clamp and the NaN test,
 * the vector loop has four fewer operations per element. */
static inline float exp_nonpos_f32(float x) {
    return exp_clamped_f32(x > -104.0f ? x : -104.0f);
}

/* A row of exps waiting to be scaled and stored (softmax's streamed rows, reduce.c): its `left`
 * values from e go to y, 64-byte aligned, each times inv, with non-temporal stores. */
typedef struct exp_pending {
    const float *e;
    float *y;
    int64_t left;
    float inv;
} exp_pending;

/* ---- exp for 16 lanes on AVX-512 ------------------------------------------------------------ *
 * exp_clamped_f32 of 16 values at once, written with intrinsics so that two instructions the
 * compiler does not find take the place of eleven: vrndscaleps rounds x log2(e) to the nearest
 * integer (the magic-constant add and subtract), vscalefps multiplies by 2^k (the exponent split
 * into two normal powers of two, built with integer shifts, and the two products). The bits are
 * exp_clamped_f32's: both round to nearest, ties to even, and p 2^k1 2^k2 rounds once, at the
 * last product, as p 2^k does (p 2^k1 is exact: 2^k1 >= 2^-75). The polynomial's fused
 * multiply-adds round as fmaf's do, so every path rounds alike. Callers check cpu_has_avx512(). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#include <immintrin.h>
#define CPU_EXP512 1

static inline int cpu_has_avx512(void) { return __builtin_cpu_supports("avx512f"); }

__attribute__((target("avx512f"))) static inline __m512 exp_clamped512(__m512 xc) {
    __m512 kf = _mm512_roundscale_ps(_mm512_mul_ps(xc, _mm512_set1_ps(1.44269504f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_sub_ps(xc, _mm512_mul_ps(kf, _mm512_set1_ps(0.693359375f)));
    r = _mm512_fmadd_ps(kf, _mm512_set1_ps(2.12194440e-4f), r);
    __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(1.0f / 5040.0f), r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, kf);
}

/* exp_f32 of 16 lanes: clamped to [-104, 89] as it is, a NaN given back unchanged. */
__attribute__((target("avx512f"))) static inline __m512 exp512(__m512 x) {
    /* max returns its second operand for a NaN: -104, whose result the blend replaces */
    __m512 e = exp_clamped512(
        _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-104.0f)), _mm512_set1_ps(89.0f)));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q), e, x);
}

/* y[i] = exp(x[i] - m) for i < n / 16 * 16, 16 lanes at a time, each value also added into lane
 * i % 16 of *acc, in the order a compiled loop over 16 lanes adds them. nonpos: x - m is <= 0 or
 * NaN, taken as exp_nonpos_f32 does (a NaN gives 0: softmax's rows); else as exp_f32 (clamps, NaN
 * kept). pf: each iteration prefetches one line of it into L2 (the next row, read while this
 * one's exps are computed), or NULL. pend: a row whose stores go out a 64-byte line an iteration
 * while its whole lines last (advanced past them), so that they overlap these exps, or NULL. x and
 * y may be the same array. Returns how many leading elements it did: the caller's loop does the
 * rest. */
__attribute__((target("avx512f"))) static inline int64_t
exp_sub512_acc(const float *x, float *y, int64_t n, float m, __m512 *acc, int nonpos,
               const float *pf, exp_pending *pend) {
    const __m512 vm = _mm512_set1_ps(m), lo = _mm512_set1_ps(-104.0f);
    const __m512 vinv = _mm512_set1_ps(pend ? pend->inv : 0.0f);
    const float *pe = pend ? pend->e : NULL;
    float *py = pend ? pend->y : NULL;
    int64_t lines = pend ? pend->left / 16 : 0;
    __m512 a = *acc;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (pf) _mm_prefetch((const char *)(pf + i), _MM_HINT_T1);
        if (lines > 0) {
            _mm512_stream_ps(py, _mm512_mul_ps(_mm512_loadu_ps(pe), vinv));
            py += 16, pe += 16, lines--;
        }
        __m512 v = _mm512_sub_ps(_mm512_loadu_ps(x + i), vm);
        /* nonpos: below -104 (or NaN: max returns its second operand) becomes -104 */
        __m512 e = nonpos ? exp_clamped512(_mm512_max_ps(v, lo)) : exp512(v);
        _mm512_storeu_ps(y + i, e);
        a = _mm512_add_ps(a, e);
    }
    if (pend) {
        pend->left -= pe - pend->e;
        pend->e = pe, pend->y = py;
    }
    *acc = a;
    return i;
}

/* exp_sub512_acc with the lane sums in memory: lane (16 floats) when not NULL. */
__attribute__((target("avx512f"))) static inline int64_t
exp_sub512(const float *x, float *y, int64_t n, float m, float *lane, int nonpos) {
    __m512 acc = lane ? _mm512_loadu_ps(lane) : _mm512_setzero_ps();
    int64_t i = exp_sub512_acc(x, y, n, m, &acc, nonpos, NULL, NULL);
    if (lane) _mm512_storeu_ps(lane, acc);
    return i;
}

/* A softmax leaf: y = exp_nonpos_f32(x - m) for all n, returning the sum that a loop over 16
 * lanes gives, lanes then halved (8, 4, 2, 1: _mm512_reduce_add_ps's order), then a running sum
 * of the tail added. The lanes stay in registers: exp_sub512's lane array, written as a vector
 * and read back as halves and scalars, stalls the loads that read it. pf and pend as
 * exp_sub512_acc. */
__attribute__((target("avx512f"))) static inline float
expsum_leaf512(const float *x, float *y, int64_t n, float m, const float *pf, exp_pending *pend) {
    __m512 acc = _mm512_setzero_ps();
    /* two copies of the loop: with NULL written out, the ordinary rows' has no store branch */
    int64_t i = pend ? exp_sub512_acc(x, y, n, m, &acc, 1, pf, pend)
                     : exp_sub512_acc(x, y, n, m, &acc, 1, pf, NULL);
    float s = 0;
    for (; i < n; i++) {
        y[i] = exp_nonpos_f32(x[i] - m);
        s += y[i];
    }
    return _mm512_reduce_add_ps(acc) + s;
}

/* ---- exp for 8 lanes on AVX2 with FMA ------------------------------------------------------- *
 * exp_clamped_f32 of 8 values, the same bits: vroundps rounds x log2(e) to the nearest integer,
 * ties to even, as the magic-constant add and subtract do; the exponent is applied as two
 * products in the same order, or as one where that gives the same bits. The compiler's own
 * vectorisation of exp_clamped_f32 keeps the clamp as blends after the polynomial and spills its
 * constants: 35 instructions for 8 lanes, here 24 (19 with one product). */
#define CPU_EXP256 1

static inline int cpu_has_avx2_fma(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

/* exp_clamped_f32 on 8 lanes, before 2^k: p = e^r, and kf = round(xc log2(e)). kf ln2's high part
 * is exact, so the fused subtraction rounds as exp_clamped_f32's separate one does. */
__attribute__((target("avx2,fma"))) static inline __m256 exp_poly256(__m256 xc, __m256 *kf_out) {
    __m256 kf = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(kf, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fmadd_ps(kf, _mm256_set1_ps(2.12194440e-4f), r);
    __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(1.0f / 5040.0f), r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    *kf_out = kf;
    return _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
}

/* p 2^k as exp_clamped_f32 applies it: two halves, each a normal power of two, any k in
 * [-150, 128]. */
__attribute__((target("avx2,fma"))) static inline __m256 exp_scale2_256(__m256 p, __m256 kf) {
    __m256i k = _mm256_cvttps_epi32(kf); /* an integer already */
    __m256i k1 = _mm256_srai_epi32(k, 1), bias = _mm256_set1_epi32(127);
    __m256i k2 = _mm256_sub_epi32(k, k1);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}

/* p 2^k in one product, for k in [-126, 127], where 2^k is a normal float: the same bits as
 * exp_scale2_256, whose first product is exact (p 2^k1 is normal), so that both round the exact
 * p 2^k once. */
__attribute__((target("avx2,fma"))) static inline __m256 exp_scale1_256(__m256 p, __m256 kf) {
    __m256i e = _mm256_add_epi32(_mm256_cvttps_epi32(kf), _mm256_set1_epi32(127));
    return _mm256_mul_ps(p, _mm256_castsi256_ps(_mm256_slli_epi32(e, 23)));
}

/* expsum_leaf512 on AVX2: y = exp_nonpos_f32(x - m) for all n, returning the same sum (16 lanes
 * as two vectors of 8, halved 8, 4, 2, 1, then the tail's running sum added). pf: the next row,
 * a line of it prefetched each iteration, or NULL. */
__attribute__((target("avx2,fma"))) static inline float
expsum_leaf256(const float *x, float *y, int64_t n, float m, const float *pf) {
    const __m256 vm = _mm256_set1_ps(m), lo = _mm256_set1_ps(-104.0f);
    const __m256 kmin = _mm256_set1_ps(-126.0f);
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        if (pf) _mm_prefetch((const char *)(pf + i), _MM_HINT_T0);
        /* below -104 (or NaN: max returns its second operand) becomes -104 */
        __m256 k0, k1;
        __m256 p0 = exp_poly256(_mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm), lo), &k0);
        __m256 p1 =
            exp_poly256(_mm256_max_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), vm), lo), &k1);
        /* k <= 0 here (x - m <= 0); below -126 (results near the subnormals) the two halves */
        __m256 e0, e1;
        if (_mm256_movemask_ps(_mm256_cmp_ps(_mm256_min_ps(k0, k1), kmin, _CMP_LT_OQ))) {
            e0 = exp_scale2_256(p0, k0);
            e1 = exp_scale2_256(p1, k1);
        } else {
            e0 = exp_scale1_256(p0, k0);
            e1 = exp_scale1_256(p1, k1);
        }
        _mm256_storeu_ps(y + i, e0);
        _mm256_storeu_ps(y + i + 8, e1);
        a0 = _mm256_add_ps(a0, e0);
        a1 = _mm256_add_ps(a1, e1);
    }
    float s = 0;
    for (; i < n; i++) {
        y[i] = exp_nonpos_f32(x[i] - m);
        s += y[i];
    }
    __m256 h8 = _mm256_add_ps(a0, a1);
    __m128 h4 = _mm_add_ps(_mm256_castps256_ps128(h8), _mm256_extractf128_ps(h8, 1));
    __m128 h2 = _mm_add_ps(h4, _mm_movehl_ps(h4, h4));
    __m128 h1 = _mm_add_ss(h2, _mm_movehdup_ps(h2));
    return _mm_cvtss_f32(h1) + s;
}
#else
#define CPU_EXP512 0
#define CPU_EXP256 0
static inline int cpu_has_avx2_fma(void) { return 0; }
static inline float expsum_leaf256(const float *x, float *y, int64_t n, float m, const float *pf) {
    (void)x, (void)y, (void)n, (void)m, (void)pf;
    return 0;
}
static inline int cpu_has_avx512(void) { return 0; }
static inline int64_t exp_sub512(const float *x, float *y, int64_t n, float m, float *lane,
                                 int nonpos) {
    (void)x, (void)y, (void)n, (void)m, (void)lane, (void)nonpos;
    return 0;
}
static inline float expsum_leaf512(const float *x, float *y, int64_t n, float m, const float *pf,
                                   exp_pending *pend) {
    (void)x, (void)y, (void)n, (void)m, (void)pf, (void)pend;
    return 0;
}
#endif
/* For code generated per type (f32, f64): whether exp_sub512 and expsum_leaf512 serve the type. */
#define CPU_EXP512_f32 CPU_EXP512
#define CPU_EXP512_f64 0
#define CPU_EXP256_f32 CPU_EXP256
#define CPU_EXP256_f64 0

/* ---- erf, erfc and the normal CDF for f32, vectorisable ------------------------------------- *
 * Branch-free (both branches computed, one selected), so loops over them vectorise where libm's
 * erff, a call per element, does not. With t = |x|:
 *   t <  0.875:  erf(t) = t + t Q(t^2), Q of degree 5
 *   t >= 0.875:  erfc(t) = exp(S(v) - t^2) (1/t), v = (1/t) A - B in [-1, 1] for t in
 *                [0.875, 10.25] (t clamped there: past it exp underflows), S of degree 11
 * (coefficients: scripts/fit_erf_f32.py). erf_f32 is within 2 ulp of the exact value (1.14 ulp
 * at worst over tests/test_gelu.c's dense sweep of floats); erfc_large_f32's relative error is
 * below 2e-5 down to FLT_MIN (its exp's argument, about -t^2, is rounded: a relative error of
 * about t^2 2^-24). */
static const float erf_small_q[6] = {-6.254293257e-04f, 5.042351317e-03f, -2.679867297e-02f,
                                     1.128267050e-01f,  -3.761257529e-01f, 1.283791661e-01f};

static inline float erf_small_f32(float t) { /* t in [-0.875, 0.875] (odd) */
    float s = t * t;
    float q = erf_small_q[0];
    for (int i = 1; i < 6; i++) q = q * s + erf_small_q[i];
    return t + t * q;
}

#if CPU_EXP512
/* erf_small_f32 of 16 lanes: the same operations in the same order (no FMA), the same bits */
__attribute__((target("avx512f"))) static inline __m512 erf_small512(__m512 t) {
    __m512 s = _mm512_mul_ps(t, t);
    __m512 q = _mm512_set1_ps(erf_small_q[0]);
    for (int i = 1; i < 6; i++)
        q = _mm512_add_ps(_mm512_mul_ps(q, s), _mm512_set1_ps(erf_small_q[i]));
    return _mm512_add_ps(t, _mm512_mul_ps(t, q));
}
#endif

/* erfc(t) = exp(S(v) - t2) / t for t >= 0 (or NaN: clamped to [0.875, 10.25]) and t2 = t^2 from
 * the caller, who may have it more precisely than t * t (normal_cdf_f32: x^2 / 2); past 10.25
 * any t2 >= 105 gives 0. */
static inline float erfc_core_f32(float t, float t2) {
    float tc = t < 10.25f ? t : 10.25f;
    tc = tc > 0.875f ? tc : 0.875f;
    float u = 1.0f / tc; /* the one division */
    float v = u * 1.913333297e+00f - 1.186666608e+00f;
    float p = 6.315355131e-05f;
    p = p * v + -5.253258223e-06f;
    p = p * v + -3.202587832e-04f;
    p = p * v + 4.585473507e-04f;
    p = p * v + -2.878940431e-04f;
    p = p * v + -2.386049164e-04f;
    p = p * v + 2.424700418e-03f;
    p = p * v + -8.445425890e-03f;
    p = p * v + 1.915965043e-02f;
    p = p * v + -1.802664995e-02f;
    p = p * v + -1.828704178e-01f;
    p = p * v + -7.126423717e-01f;
    return exp_nonpos_f32(p - t2) * u; /* the argument is below -1.6 */
}

static inline float erfc_large_f32(float t) {
    float tc = t < 10.25f ? t : 10.25f;
    return erfc_core_f32(t, tc * tc);
}

/* erf(x); NaN gives NaN, +-0 keeps its sign, +-inf gives +-1. */
static inline float erf_f32(float x) {
    float t = x < 0.0f ? -x : x;
    float xs = x < 0.875f ? x : 0.875f;
    float small = erf_small_f32(xs > -0.875f ? xs : -0.875f);
    float large = 1.0f - erfc_large_f32(t);
    float r = t < 0.875f ? small : x < 0.0f ? -large : large;
    return x == x ? r : x;
}

/* The standard normal CDF Phi(x) = erfc(-x / sqrt 2) / 2, computed as such for x < 0 (no
 * cancellation in 0.5 (1 + erf(x / sqrt 2)): relative accuracy down to the smallest values);
 * NaN gives NaN. Its error grows with x^2 in the left tail, from rounding the argument of exp,
 * about -x^2 / 2 (gelu within 5 + 1.5 x^2 ulp: tests/test_gelu.c). */
static inline float normal_cdf_f32(float x) {
    float z = x * 0.707106781186547524f;
    float t = z < 0.0f ? -z : z;
    float e = 0.5f * erf_small_f32(t < 0.875f ? t : 0.875f);
    float c = 0.5f * erfc_core_f32(t, 0.5f * (x * x)); /* z^2 without z's rounding */
    float small = z < 0.0f ? 0.5f - e : 0.5f + e;
    float large = z < 0.0f ? c : 1.0f - c;
    float r = t < 0.875f ? small : large;
    return x == x ? r : x;
}

/* The logistic function of a and its derivative sigma (1 - sigma), from e = exp(-|a|) <= 1: no
 * overflow for any a, no cancellation for either sign (the tanh form of gelu runs on these:
 * 0.5 (1 + tanh(u)) = sigma(2u)). */
static inline float sigmoid_of_f32(float a, float *dsig) {
    float e = exp_f32(a < 0.0f ? a : -a);
    float r = 1.0f / (1.0f + e);
    *dsig = e * r * r;
    return a >= 0.0f ? r : e * r;
}

/* Loops that gain from wider vectors are also compiled for AVX2, chosen at load time where the
 * CPU has it: the build targets baseline x86-64 (SSE2). Without FMA contraction
 * (-ffp-contract=off) every version rounds identically.
 * Not under ThreadSanitizer: the clones' resolver runs while the program is being relocated,
 * before the TSan runtime is up, and gcc instruments it, so the program crashes at load. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CPU_CLONES
#endif

/* The clones of every loop that runs exp_f32 (exp, softmax, logsumexp, gelu, silu, erf, ...):
 * AVX-512, and x86-64-v3 (AVX2 with FMA) rather than CPU_CLONES' AVX2, which lacks FMA: its
 * fmaf would be a call per operation. (arch=x86-64-v3 is chosen on any CPU with the level's
 * features, AMD's included; arch=haswell only on Intel's Haswell family.) With 16 lanes the
 * constants and a row's partial sums fit in AVX-512's 32 vector registers. The results are the
 * same on every clone. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define CPU_CLONES_EXP __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#else
#define CPU_CLONES_EXP
#endif

/* CPU_CLONES with an AVX-512 version as well, for loops without exp_f32 whose 16 lanes pay. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define CPU_CLONES_512 __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define CPU_CLONES_512
#endif

/* Runs STMT (on index i) for i in [0, n): a loop over the most multiples of LANES, then one over
 * the last LANES, which computes a few windows again with the same values. Each loop's vector
 * part (or the compiler's narrower vector epilogue) covers it whole, with no scalar tail, which
 * on rows of 7 or 14 windows cost more than the vectors. Only for STMT that writes, from inputs
 * alone. Fewer than LANES: the second loop takes them one by one. */
#define ROW_LOOP(n, LANES, STMT)                                                                \
    do {                                                                                        \
        int64_t m_ = (n) - (n) % (LANES);                                                       \
        for (int64_t i = 0; i < m_; i++) STMT;                                                  \
        for (int64_t i = m_ > 0 && m_ < (n) ? (n) - (LANES) : m_; i < (n); i++) STMT;           \
    } while (0)

#endif
