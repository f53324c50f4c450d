/* Philox 4x32-10 and the random streams built on it: THE definition of cinder's random numbers.
 *
 * Every backend must produce bit-identical results for the same generator state (tensor.h), so
 * this header is written once for C and CUDA (CN_HOST_DEVICE) and each backend calls it rather
 * than re-deriving the arithmetic. What follows is normative; a backend that cannot include this
 * header must reproduce it exactly.
 *
 * The block function (Salmon et al., "Parallel Random Numbers: As Easy as 1, 2, 3", SC11):
 * Philox 4x32 with 10 rounds, multipliers 0xD2511F53 and 0xCD9E8D57, Weyl key increments
 * 0x9E3779B9 and 0xBB67AE85. It matches Random123's philox4x32_10 known-answer vectors.
 *
 * The stream. A random call with generator (seed, offset) fills element i (row-major, i = 0..n-1)
 * from one block:
 *     counter = { lo32(offset + i), hi32(offset + i), 0, 0 }   (offset + i wraps mod 2^64)
 *     key     = { lo32(seed), hi32(seed) }
 *     w0, w1, w2, w3 = philox4x32_10(counter, key)
 * and the call advances the generator's offset by n.
 *
 * Uniform in [low, high):
 *     f32, f16, bf16:  u = (w0 >> 8) * 2^-24                       (24 random bits, [0, 1))
 *     f64:             u = ((uint64)w0 << 21 | w1 >> 11) * 2^-53     (53 random bits, [0, 1))
 *     v = low + (high - low) * u, in double, each operation rounded on its own (no FMA);
 *     v is rounded to f32 (f16/bf16: to f32, then to f16/bf16, round-to-nearest-even each time)
 *     or kept as f64. If the rounded value is >= high (only rounding can do that) and low < high,
 *     it becomes the largest value of the dtype below high.
 * Normal with mean and std (Box-Muller, cosine branch only):
 *     u1 = (((uint64)w0 << 21 | w1 >> 11) + 1) * 2^-53   (in (0, 1], so log(u1) is finite)
 *     u2 = ((uint64)w2 << 21 | w3 >> 11) * 2^-53         (in [0, 1))
 *     z  = sqrt(-2 * cn_philox_log(u1)) * cn_philox_cos2pi(u2)
 *     v  = mean + std * z in double, rounded to the dtype as above (without the high rule).
 *
 * log and cos are defined here, by fixed polynomials over basic IEEE operations, rather than
 * taken from the platform's libm: libm and CUDA's math library may differ in the last bit, which
 * would break bit-identity for f64. All double arithmetic in this file must be evaluated as
 * written, each operation rounded to nearest: on CUDA the CN_D* macros use the explicit _rn
 * intrinsics (nvcc would otherwise fuse multiply-adds); on the host see CN_PHILOX_NO_FMA. */
#ifndef CINDER_CORE_PHILOX_H
#define CINDER_CORE_PHILOX_H

#include <math.h>
#include <stdint.h>

#ifndef CN_HOST_DEVICE
#ifdef __CUDACC__
#define CN_HOST_DEVICE __host__ __device__
#else
#define CN_HOST_DEVICE
#endif
#endif

/* Opens every function below that does floating-point arithmetic: clang fuses a * b + c into an
 * FMA by default when the target has one, and this pragma (scoped to the function body) stops
 * it. GCC ignores the pragma; it does not fuse in ISO C mode (cinder builds as C11), but does in
 * GNU C and in C++ (g++, nvcc's host pass) on FMA targets (-march=haswell and later): compile
 * such includers with -ffp-contract=off. */
#if defined(__clang__)
#define CN_PHILOX_NO_FMA _Pragma("STDC FP_CONTRACT OFF")
#else
#define CN_PHILOX_NO_FMA
#endif

/* In device code, explicit round-to-nearest operations, which nvcc never fuses. */
#ifdef __CUDA_ARCH__
#define CN_DADD(a, b) __dadd_rn((a), (b))
#define CN_DMUL(a, b) __dmul_rn((a), (b))
#define CN_DDIV(a, b) __ddiv_rn((a), (b))
#else
#define CN_DADD(a, b) ((a) + (b))
#define CN_DMUL(a, b) ((a) * (b))
#define CN_DDIV(a, b) ((a) / (b))
#endif

/* ---- the block function ---------------------------------------------------------------------- */

#define CN_PHILOX_M0 0xD2511F53u
#define CN_PHILOX_M1 0xCD9E8D57u
#define CN_PHILOX_W0 0x9E3779B9u
#define CN_PHILOX_W1 0xBB67AE85u

/* Philox 4x32-10: out = the 4 words for counter ctr under key. */
static inline CN_HOST_DEVICE void cn_philox4x32_10(const uint32_t ctr[4], const uint32_t key[2],
                                                   uint32_t out[4]) {
    uint32_t c0 = ctr[0], c1 = ctr[1], c2 = ctr[2], c3 = ctr[3];
    uint32_t k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        uint64_t p0 = (uint64_t)CN_PHILOX_M0 * c0;
        uint64_t p1 = (uint64_t)CN_PHILOX_M1 * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0;
        uint32_t n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c0 = n0;
        c1 = (uint32_t)p1;
        c2 = n2;
        c3 = (uint32_t)p0;
        k0 += CN_PHILOX_W0;
        k1 += CN_PHILOX_W1;
    }
    out[0] = c0;
    out[1] = c1;
    out[2] = c2;
    out[3] = c3;
}

/* The block for element i of a call with generator (seed, offset). */
static inline CN_HOST_DEVICE void cn_philox_block(uint64_t seed, uint64_t offset, uint64_t i,
                                                  uint32_t w[4]) {
    uint64_t c = offset + i;
    const uint32_t ctr[4] = {(uint32_t)c, (uint32_t)(c >> 32), 0u, 0u};
    const uint32_t key[2] = {(uint32_t)seed, (uint32_t)(seed >> 32)};
    cn_philox4x32_10(ctr, key, w);
}

/* ---- unit values ----------------------------------------------------------------------------- */

/* [0, 1) from 24 bits of a (exact in float and double). */
static inline CN_HOST_DEVICE double cn_philox_unit24(uint32_t a) {
    return (double)(a >> 8) * (1.0 / 16777216.0);
}

/* [0, 1) from 53 bits of a and b (exact in double). */
static inline CN_HOST_DEVICE double cn_philox_unit53(uint32_t a, uint32_t b) {
    uint64_t bits = ((uint64_t)a << 21) | (b >> 11);
    return (double)bits * (1.0 / 9007199254740992.0);
}

/* ---- log and cos, defined by fixed polynomials ----------------------------------------------- */

/* Natural log of u in (0, 1], accurate to a few ulp. u = m * 2^e with m in [sqrt(1/2), sqrt(2))
 * (exact, frexp), then log(m) = 2 atanh(s), s = (m - 1) / (m + 1), |s| < 0.172, by its Taylor
 * series to s^21 (truncation error < 3e-17 relative). */
static inline CN_HOST_DEVICE double cn_philox_log(double u) {
    CN_PHILOX_NO_FMA
    int e;
    double m = frexp(u, &e); /* m in [0.5, 1) */
    if (m < 0.70710678118654757) {
        m = m * 2.0; /* exact */
        e -= 1;
    }
    double s = CN_DDIV(m - 1.0, CN_DADD(m, 1.0)); /* m - 1 is exact (Sterbenz) */
    double z = CN_DMUL(s, s);
    double p = 0.047619047619047616;              /* 1/21 */
    p = CN_DADD(CN_DMUL(p, z), 0.052631578947368418);  /* 1/19 */
    p = CN_DADD(CN_DMUL(p, z), 0.058823529411764705);  /* 1/17 */
    p = CN_DADD(CN_DMUL(p, z), 0.066666666666666666);  /* 1/15 */
    p = CN_DADD(CN_DMUL(p, z), 0.076923076923076927);  /* 1/13 */
    p = CN_DADD(CN_DMUL(p, z), 0.090909090909090912);  /* 1/11 */
    p = CN_DADD(CN_DMUL(p, z), 0.1111111111111111);    /* 1/9 */
    p = CN_DADD(CN_DMUL(p, z), 0.14285714285714285);   /* 1/7 */
    p = CN_DADD(CN_DMUL(p, z), 0.2);                   /* 1/5 */
    p = CN_DADD(CN_DMUL(p, z), 0.33333333333333331);   /* 1/3 */
    p = CN_DADD(CN_DMUL(p, z), 1.0);
    double log_m = CN_DMUL(CN_DMUL(2.0, s), p);
    return CN_DADD(CN_DMUL((double)e, 0.69314718055994529), log_m); /* + e * ln 2 */
}

/* sin(x) for x in [0, pi/4], Taylor series to x^17 (truncation error < 1e-16 relative). */
static inline CN_HOST_DEVICE double cn_philox_sin_small(double x) {
    CN_PHILOX_NO_FMA
    double z = CN_DMUL(x, x);
    double p = 2.8114572543455206e-15;                  /*  1/17! */
    p = CN_DADD(CN_DMUL(p, z), -7.6471637318198164e-13); /* -1/15! */
    p = CN_DADD(CN_DMUL(p, z), 1.6059043836821613e-10);  /*  1/13! */
    p = CN_DADD(CN_DMUL(p, z), -2.505210838544172e-08);  /* -1/11! */
    p = CN_DADD(CN_DMUL(p, z), 2.7557319223985893e-06);  /*  1/9! */
    p = CN_DADD(CN_DMUL(p, z), -0.00019841269841269841); /* -1/7! */
    p = CN_DADD(CN_DMUL(p, z), 0.0083333333333333332);   /*  1/5! */
    p = CN_DADD(CN_DMUL(p, z), -0.16666666666666666);    /* -1/3! */
    p = CN_DADD(CN_DMUL(p, z), 1.0);
    return CN_DMUL(x, p);
}

/* cos(x) for x in [0, pi/4], Taylor series to x^18 (truncation error < 1e-17). */
static inline CN_HOST_DEVICE double cn_philox_cos_small(double x) {
    CN_PHILOX_NO_FMA
    double z = CN_DMUL(x, x);
    double p = -1.5619206968586225e-16;                 /* -1/18! */
    p = CN_DADD(CN_DMUL(p, z), 4.7794773323873853e-14);  /*  1/16! */
    p = CN_DADD(CN_DMUL(p, z), -1.1470745597729725e-11); /* -1/14! */
    p = CN_DADD(CN_DMUL(p, z), 2.08767569878681e-09);    /*  1/12! */
    p = CN_DADD(CN_DMUL(p, z), -2.7557319223985888e-07); /* -1/10! */
    p = CN_DADD(CN_DMUL(p, z), 2.4801587301587302e-05);  /*  1/8! */
    p = CN_DADD(CN_DMUL(p, z), -0.0013888888888888889);  /* -1/6! */
    p = CN_DADD(CN_DMUL(p, z), 0.041666666666666664);    /*  1/4! */
    p = CN_DADD(CN_DMUL(p, z), -0.5);                    /* -1/2! */
    return CN_DADD(CN_DMUL(p, z), 1.0);
}

/* cos(2 pi u) for u in [0, 1). The reduction is exact: 4u = q + r (quadrant q, r in [0, 1)), and
 * for r > 1/2 the complementary angle (1 - r) is used, so the polynomials see [0, pi/4]. */
static inline CN_HOST_DEVICE double cn_philox_cos2pi(double u) {
    CN_PHILOX_NO_FMA
    double t = u * 4.0;
    int q = (int)t;
    double r = t - (double)q;
    int flip = r > 0.5;
    if (flip) r = 1.0 - r;
    double x = CN_DMUL(r, 1.5707963267948966); /* r * pi/2 */
    /* cos(q pi/2 + y): q=0 cos y, q=1 -sin y, q=2 -cos y, q=3 sin y; y = pi/2 - x when flipped */
    int use_sin = (q & 1) ^ flip;
    double v = use_sin ? cn_philox_sin_small(x) : cn_philox_cos_small(x);
    return (q == 1 || q == 2) ? -v : v;
}

/* ---- the distributions ----------------------------------------------------------------------- */

/* Element i of a uniform f32 call (also the f32 value that f16/bf16 then round from). */
static inline CN_HOST_DEVICE float cn_philox_uniform_f32(uint64_t seed, uint64_t offset,
                                                         uint64_t i, double low, double high) {
    CN_PHILOX_NO_FMA
    uint32_t w[4];
    cn_philox_block(seed, offset, i, w);
    double v = CN_DADD(low, CN_DMUL(CN_DADD(high, -low), cn_philox_unit24(w[0])));
    float f = (float)v;
    if ((double)f >= high && low < high) { /* the largest float below high */
        f = (float)high;
        if ((double)f >= high) f = nextafterf(f, -INFINITY);
    }
    return f;
}

/* Element i of a uniform f64 call. */
static inline CN_HOST_DEVICE double cn_philox_uniform_f64(uint64_t seed, uint64_t offset,
                                                          uint64_t i, double low, double high) {
    CN_PHILOX_NO_FMA
    uint32_t w[4];
    cn_philox_block(seed, offset, i, w);
    double v = CN_DADD(low, CN_DMUL(CN_DADD(high, -low), cn_philox_unit53(w[0], w[1])));
    if (v >= high && low < high) v = nextafter(high, -INFINITY);
    return v;
}

/* Element i of a normal call, in double; f32/f16/bf16 round this value. */
static inline CN_HOST_DEVICE double cn_philox_normal(uint64_t seed, uint64_t offset, uint64_t i,
                                                     double mean, double std) {
    CN_PHILOX_NO_FMA
    uint32_t w[4];
    cn_philox_block(seed, offset, i, w);
    double u1 = CN_DADD(cn_philox_unit53(w[0], w[1]), 1.0 / 9007199254740992.0); /* exact */
    double u2 = cn_philox_unit53(w[2], w[3]);
    double radius = sqrt(CN_DMUL(-2.0, cn_philox_log(u1)));
    double z = CN_DMUL(radius, cn_philox_cos2pi(u2));
    return CN_DADD(mean, CN_DMUL(std, z));
}

#endif
