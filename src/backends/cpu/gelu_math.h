/* gelu and its derivative, one definition for every CPU kernel that computes them: elementwise.c
 * (the gelu op), activation.c (its backward) and linear.c (linear_gelu, which computes both in
 * one pass and gives the same bits as those two). Include after cpu_math.h, in a file that turns
 * off trapping math (see cpu_math.h).
 *
 * gelu(x) = x Phi(x) = 0.5 x (1 + erf(x / sqrt 2)), or its tanh form 0.5 x (1 + tanh(u)), u =
 * sqrt(2/pi) (x + 0.044715 x^3), computed as x sigmoid(2u) (the same function). Both without the
 * cancellation of 1 + erf or 1 + tanh for x < 0. f32: branch-free (cpu_math.h), so the loops
 * vectorise; f64: libm's erfc and exp.
 *
 * gelu'(x): Phi(x) + x phi(x) for the exact form; for the tanh form, written as x sigmoid(a) with
 * a = 2u = 2k (x + c x^3), sigmoid(a) + x sigmoid'(a) 2k (1 + 3 c x^2). */
#ifndef CINDER_CPU_GELU_MATH_H
#define CINDER_CPU_GELU_MATH_H

#include <math.h>

#define GELU_SQRT1_2      0.70710678118654752440
#define GELU_INV_SQRT_2PI 0.39894228040143267794 /* 1 / sqrt(2 pi) */
#define GELU_K            0.79788456080286535588 /* sqrt(2 / pi) */
#define GELU_C            0.044715

static inline float gelu_f32(float x, int tanh_form) {
    if (tanh_form) {
        float dsig;
        float a = 1.5957691216057308f * (x + 0.044715f * (x * x * x)); /* 2u */
        return x * sigmoid_of_f32(a, &dsig);
    }
    return x * normal_cdf_f32(x);
}

static inline double gelu_f64(double x, int tanh_form) {
    if (tanh_form) {
        double a = 1.5957691216057308 * (x + 0.044715 * (x * x * x));
        double e = exp(-fabs(a));
        return x * (a >= 0 ? 1.0 : e) / (1.0 + e);
    }
    return 0.5 * x * erfc(-x * GELU_SQRT1_2);
}

static inline float gelu_grad_f32(float x, int tanh_form) {
    if (tanh_form) {
        float x2 = x * x, dsig;
        float a = (float)(2 * GELU_K) * (x + (float)GELU_C * (x2 * x));
        float sig = sigmoid_of_f32(a, &dsig);
        return sig + x * dsig * ((float)(2 * GELU_K) * (1.0f + (float)(3 * GELU_C) * x2));
    }
    return normal_cdf_f32(x) + x * (float)GELU_INV_SQRT_2PI * exp_f32(-0.5f * x * x);
}

static inline double gelu_grad_f64(double x, int tanh_form) {
    if (tanh_form) {
        double x2 = x * x;
        double a = 2 * GELU_K * (x + GELU_C * (x2 * x));
        double e = exp(-fabs(a)), r = 1.0 / (1.0 + e);
        double sig = a >= 0 ? r : e * r;
        return sig + x * (e * r * r) * (2 * GELU_K * (1.0 + 3 * GELU_C * x2));
    }
    return 0.5 * erfc(-x * GELU_SQRT1_2) + x * GELU_INV_SQRT_2PI * exp(-0.5 * x * x);
}

/* gelu(x), and gelu'(x) into *d: the same values as gelu_f32 and gelu_grad_f32 (the same
 * operations), with Phi (or the sigmoid) computed once. */
static inline float gelu_with_grad_f32(float x, int tanh_form, float *d) {
    if (tanh_form) {
        float x2 = x * x, dsig;
        float a = (float)(2 * GELU_K) * (x + (float)GELU_C * (x2 * x)); /* as 1.5957691216057308f */
        float sig = sigmoid_of_f32(a, &dsig);
        *d = sig + x * dsig * ((float)(2 * GELU_K) * (1.0f + (float)(3 * GELU_C) * x2));
        return x * sig;
    }
    float phi = normal_cdf_f32(x);
    *d = phi + x * (float)GELU_INV_SQRT_2PI * exp_f32(-0.5f * x * x);
    return x * phi;
}

/* The exact form's gelu and gelu' for |x| / sqrt 2 < 0.875 (|x| < 1.2374): normal_cdf_f32's
 * small branch alone, so the same operations and bits as gelu_with_grad_f32(x, 0, d) and
 * gelu_f32(x, 0) there, without the erfc branch (a division, an exp and a polynomial of degree
 * 11) that those compute and discard. gelu_out_of_small counts the values of x[0, n) out of
 * that range (a NaN is), for a loop that takes this path a block at a time. */
static inline int64_t gelu_out_of_small(const float *x, int64_t n) {
    int64_t out = 0;
    for (int64_t k = 0; k < n; k++) {
        float z = x[k] * 0.707106781186547524f;
        out += !((z < 0.0f ? -z : z) < 0.875f);
    }
    return out;
}

static inline float gelu_small_with_grad_f32(float x, float *d) {
    float z = x * 0.707106781186547524f; /* as normal_cdf_f32 computes it */
    float t = z < 0.0f ? -z : z;
    float e = 0.5f * erf_small_f32(t);
    float phi = z < 0.0f ? 0.5f - e : 0.5f + e;
    if (d) *d = phi + x * (float)GELU_INV_SQRT_2PI * exp_f32(-0.5f * x * x);
    return x * phi;
}

#endif
