/* Vectorisable math for the CPU kernels (reduce.c's softmax and logsumexp, elementwise.c's exp).
 * A file that includes this should turn off trapping math before its includes (see reduce.c):
 * gcc keeps a float compare-select (the clamps in exp_f32) behind a branch otherwise, and the
 * loop does not vectorise. */
#ifndef CINDER_CPU_MATH_H
#define CINDER_CPU_MATH_H

#include <stdint.h>

/* ---- exp for f32, vectorisable -------------------------------------------------------------- *
 * Straight-line code (no calls, no branches) so loops over it vectorise: exp(x) = 2^k e^r with
 * k = round(x / ln2) and r = x - k ln2 (ln2 split into a part exact in float and a remainder),
 * |r| <= ln2/2; e^r by its Taylor series to degree 7 (truncation < 1e-8 relative). 2^k is applied
 * as two halves so results in the subnormal range and overflow to inf come out right. Measured
 * within 1.2 ulp of the exact value over the normal range; NaN gives NaN, -inf 0, +inf inf. */
/* exp of xc already clamped to [-104, 89] (the shared body of exp_f32 and exp_nonpos_f32). */
static inline float exp_clamped_f32(float xc) {
    const float round_magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    float kf = (xc * 1.44269504f + round_magic) - round_magic;
    float r = xc - kf * 0.693359375f; /* ln2 = 0.693359375 - 2.12194440e-4 */
    r = r + kf * 2.12194440e-4f;
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
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

/* The exp-heavy loops (exp, softmax, logsumexp) are also compiled for AVX2, chosen at load time
 * where the CPU has it: the build targets baseline x86-64 (SSE2), and exp_f32 runs about twice as
 * fast on 8-wide vectors. Without FMA contraction (-std=c11) both versions round identically.
 * Not under ThreadSanitizer: the clones' resolver runs while the program is being relocated,
 * before the TSan runtime is up, and gcc instruments it, so the program crashes at load. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__) && \
    !defined(__SANITIZE_THREAD__)
#define CPU_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define CPU_CLONES
#endif

/* CPU_CLONES with an AVX-512 version as well, for the loops that run exp_f32 on a whole row
 * (softmax): with 8 lanes its constants and the row's partial sums spill out of the 16 vector
 * registers, with 16 lanes they fit in the 32 there are. The results are the same. */
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
