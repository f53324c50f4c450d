/* CPU elementwise kernels: unary, scalar, binary, comparison, logic and where.
 *
 * Each kernel picks a row function for the dtype (the router has refused dtypes the backend does
 * not declare for the op: backend.c) and hands it to the strided iterator (strided.c), which calls
 * it on runs of elements (operand 0 is the output). A row function switches on the op once per
 * run, outside the element loop, and each loop has a dense path over restrict pointers that the
 * compiler can vectorise. The switch is the one place that knows an op: adding an elementwise op
 * is its case there (and its row in backend.c). An op without a case is an error naming op and
 * backend, found before anything is written (see run below), never another op's result.
 *
 * Integer arithmetic wraps (it is done in the unsigned type) rather than being undefined on
 * overflow. Float maximum/minimum propagate NaN. */

/* Nothing here reads floating-point exception flags; without this gcc does not vectorise the
 * compare-selects in exp_f32 (see reduce.c). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdatomic.h>
#include <stdint.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/gelu_math.h"
#include "cinder/ops.h" /* cn_gelu_approx */
#include "core/backend_common.h"
#include "core/scalar_compare.h"

/* What a row function needs besides the data. */
typedef struct ew_ctx {
    cn_op op;
    int gelu_tanh;          /* gelu: 1 for the tanh approximation */
    double s0, s1;          /* the scalar (add/mul/pow_scalar) or lo, hi (clamp), for floats */
    int64_t i0, i1;         /* the same for integers, already saturated to the dtype's range */
    int fixed;              /* the comparisons with a scalar on integers: -1, or the answer */
    atomic_int *found_zero; /* integer div: set when a divisor is zero */
    atomic_int *unknown;    /* set by a row function whose switch has no case for op */
} ew_ctx;

/* The default of every switch over ops below: no case for this op (run reports it). */
#define UNKNOWN_OP(c) atomic_store_explicit((c)->unknown, 1, memory_order_relaxed)

/* ---- run loops -------------------------------------------------------------------------------- *
 * Used inside row functions, whose parameters are (char **ptrs, const int64_t *step, int64_t n,
 * const void *ctx). EXPR computes an output element from x (and y, and c for where). */

/* out = EXPR(x) */
#define MAP1(TO, TX, EXPR)                                                                     \
    do {                                                                                       \
        if (step[0] == (int64_t)sizeof(TO) && step[1] == (int64_t)sizeof(TX)) {                \
            TO *restrict o_ = (TO *)ptrs[0];                                                   \
            const TX *restrict x_ = (const TX *)ptrs[1];                                       \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const TX x = x_[i_];                                                           \
                o_[i_] = (EXPR);                                                               \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const TX x = *(const TX *)(ptrs[1] + i_ * step[1]);                            \
                *(TO *)(ptrs[0] + i_ * step[0]) = (EXPR);                                      \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* out = EXPR(x, y), with dense paths for both inputs dense and for one broadcast (stride 0). */
#define MAP2(TO, TX, TY, EXPR)                                                                 \
    do {                                                                                       \
        const int dense_o_ = step[0] == (int64_t)sizeof(TO);                                   \
        const int dense_x_ = step[1] == (int64_t)sizeof(TX);                                   \
        const int dense_y_ = step[2] == (int64_t)sizeof(TY);                                   \
        TO *restrict o_ = (TO *)ptrs[0];                                                       \
        if (dense_o_ && dense_x_ && dense_y_) {                                                \
            const TX *restrict x_ = (const TX *)ptrs[1];                                       \
            const TY *restrict y_ = (const TY *)ptrs[2];                                       \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const TX x = x_[i_];                                                           \
                const TY y = y_[i_];                                                           \
                o_[i_] = (EXPR);                                                               \
            }                                                                                  \
        } else if (dense_o_ && dense_x_ && step[2] == 0) {                                     \
            const TX *restrict x_ = (const TX *)ptrs[1];                                       \
            const TY y = *(const TY *)ptrs[2];                                                 \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const TX x = x_[i_];                                                           \
                o_[i_] = (EXPR);                                                               \
            }                                                                                  \
        } else if (dense_o_ && step[1] == 0 && dense_y_) {                                     \
            const TX x = *(const TX *)ptrs[1];                                                 \
            const TY *restrict y_ = (const TY *)ptrs[2];                                       \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const TY y = y_[i_];                                                           \
                o_[i_] = (EXPR);                                                               \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const TX x = *(const TX *)(ptrs[1] + i_ * step[1]);                            \
                const TY y = *(const TY *)(ptrs[2] + i_ * step[2]);                            \
                *(TO *)(ptrs[0] + i_ * step[0]) = (EXPR);                                      \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* ---- scalar helpers -------------------------------------------------------------------------- */

/* Numerically stable logistic: exp only ever sees -|x|, so it cannot overflow, and for large
 * negative x the result underflows to 0 instead of becoming inf/inf. */
static inline float sigmoid_f32(float x) {
    float e = expf(-fabsf(x));
    float r = 1.0f / (1.0f + e);
    return x >= 0.0f ? r : e * r;
}

static inline double sigmoid_f64(double x) {
    double e = exp(-fabs(x));
    double r = 1.0 / (1.0 + e);
    return x >= 0.0 ? r : e * r;
}

/* The dense f32 gelu loops, one per form, compiled for AVX2 (with FMA) and AVX-512 as well
 * (with 16 lanes the polynomials' constants stay in the 32 vector registers: about twice as fast
 * as AVX2). */
CPU_CLONES_EXP static void gelu_row_f32(char **ptrs, const int64_t *step, int64_t n,
                                        int tanh_form) {
    if (tanh_form)
        MAP1(float, float, gelu_f32(x, 1));
    else
        MAP1(float, float, gelu_f32(x, 0));
}

/* The activations of PyTorch's names (hard_sigmoid is hardsigmoid, hard_swish hardswish):
 *   hard_sigmoid(x) = min(max(x + 3, 0), 6) / 6, hard_swish(x) = x hard_sigmoid(x) (NaN passes
 *     through the comparisons, as through std::min/max);
 *   log_sigmoid(x) = min(x, 0) - log1p(exp(-|x|)): exp never overflows, and -log(1 + e^-x) does
 *     not round to 0 for large x or lose x for very negative x;
 *   softplus(x) = log1p(exp(beta x)) / beta, or x where beta x > threshold (PyTorch's switch). */
#define DEFINE_ACTIVATIONS(S, T, EXP, LOG1P, FABS)                                             \
    static inline T hard_sigmoid_##S(T x) {                                                    \
        T t = x + (T)3;                                                                        \
        t = t < (T)0 ? (T)0 : t;                                                               \
        t = t > (T)6 ? (T)6 : t;                                                               \
        return t / (T)6;                                                                       \
    }                                                                                          \
    static inline T log_sigmoid_##S(T x) {                                                     \
        return (x < (T)0 ? x : (T)0) - LOG1P(EXP(-FABS(x)));                                   \
    }                                                                                          \
    static inline T softplus_##S(T x, T beta, T threshold) {                                   \
        return x * beta > threshold ? x : LOG1P(EXP(x * beta)) / beta;                         \
    }

DEFINE_ACTIVATIONS(f32, float, expf, log1pf, fabsf)
DEFINE_ACTIVATIONS(f64, double, exp, log1p, fabs)

/* A double truncated toward zero and saturated to [lo, hi]; NaN gives 0. */
static int64_t to_int_sat(double v, int64_t lo, int64_t hi) {
    if (isnan(v)) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi; /* (double)INT64_MAX is 2^63: compare before converting */
    return (int64_t)v;
}

/* The range of an integer dtype. */
static void int_range(cn_dtype dt, int64_t *lo, int64_t *hi) {
    if (dt == CN_I32) {
        *lo = INT32_MIN;
        *hi = INT32_MAX;
    } else {
        *lo = INT64_MIN;
        *hi = INT64_MAX;
    }
}

/* x mod y with the sign of y, as torch.remainder: fmod's result (exact, with x's sign) moved by
 * one y when the signs differ. y = 0 gives NaN. */
static inline float remainder_f32(float x, float y) {
    float r = fmodf(x, y);
    return r != 0.0f && ((r < 0.0f) != (y < 0.0f)) ? r + y : r;
}

static inline double remainder_f64(double x, double y) {
    double r = fmod(x, y);
    return r != 0.0 && ((r < 0.0) != (y < 0.0)) ? r + y : r;
}

/* The integer remainders, shifts and powers on a signed type T of W bits with unsigned twin U, as
 * PyTorch defines them (never C's undefined cases):
 *   remainder: the sign of y (torch.remainder); fmod: the sign of x (torch.fmod). y != 0 (the
 *     callers check); x % -1 is 0, also for the minimum (where C's % overflows).
 *   left shift: 0 when the count is negative or >= W; otherwise x << y in U (bits shifted out
 *     are lost, the sign bit included).
 *   right shift: arithmetic (the sign fills in); a count that is negative or >= W shifts by
 *     W - 1 (0 or -1), as PyTorch's a >> (W - 1). Negative x goes through ~x, so no signed
 *     shift of a negative value is left to the implementation.
 *   power: x^y by squaring in U (wrapping modulo 2^W); for y < 0 PyTorch's 1 / x^-y truncated:
 *     1 for x = 1, +-1 for x = -1 (by y's parity), else 0 (0^-1 too). 0^0 is 1. */
#define DEFINE_INT_HELPERS(S, T, U)                                                            \
    static inline T remainder_##S(T x, T y) {                                                  \
        if (y == -1) return 0;                                                                 \
        T r = (T)(x % y);                                                                      \
        return r != 0 && ((r < 0) != (y < 0)) ? (T)(r + y) : r;                                \
    }                                                                                          \
    static inline T fmod_##S(T x, T y) { return y == -1 ? (T)0 : (T)(x % y); }                 \
    static inline T shl_##S(T x, T y) {                                                        \
        return y < 0 || y >= (T)(8 * sizeof(T)) ? (T)0 : (T)((U)x << y);                       \
    }                                                                                          \
    static inline T shr_##S(T x, T y) {                                                        \
        if (y < 0 || y >= (T)(8 * sizeof(T))) y = (T)(8 * sizeof(T) - 1);                      \
        return x < 0 ? (T) ~(~x >> y) : (T)(x >> y);                                           \
    }                                                                                          \
    static inline T pow_##S(T x, T y) {                                                        \
        if (y < 0) return x == 1 ? (T)1 : x == -1 ? (T)((y & 1) ? -1 : 1) : (T)0;              \
        U r = 1, b = (U)x;                                                                     \
        for (; y > 0; y >>= 1) {                                                               \
            if (y & 1) r *= b;                                                                 \
            b *= b;                                                                            \
        }                                                                                      \
        return (T)r;                                                                           \
    }

DEFINE_INT_HELPERS(i32, int32_t, uint32_t)
DEFINE_INT_HELPERS(i64, int64_t, uint64_t)

static cn_status bad_dtype(const cn_kernel_args *a, cn_dtype dt) {
    return cn__kernel_dtype_error("cpu", a->op, dt);
}

/* Runs fn over views (views[0] the output) with c. A row function whose switch has no case for
 * c->op writes nothing and marks the op unknown, so the output stays unwritten and the call is an
 * error naming op, backend and kernel, never another op's result. (The op table test runs every
 * op on every backend, so this is a safety net, free on the hot path.) */
static cn_status run(const cn_kernel_args *a, const char *kernel, int nops,
                     const cn_view *const *views, cpu_row_fn fn, ew_ctx *c) {
    atomic_int unknown = 0;
    c->unknown = &unknown;
    cpu_map(nops, views, fn, c);
    if (atomic_load_explicit(&unknown, memory_order_relaxed))
        return cn__kernel_op_error("cpu", kernel, a->op);
    return CN_OK;
}

/* ---- unary ----------------------------------------------------------------------------------- */

/* exp on f32 with exp_f32 (within 0.94 ulp; libm's expf does not vectorise), 8 lanes where the
 * CPU has AVX2 and FMA; a dense run takes 16 lanes of exp_clamped512 where it has AVX-512 (the
 * same bits). */
CPU_CLONES_EXP static void exp_row_f32_plain(char **ptrs, const int64_t *step, int64_t n) {
    MAP1(float, float, exp_f32(x));
}

/* erf and log_sigmoid on f32, whose exp_f32 needs the clones' FMA (elsewhere fmaf is a call) */
CPU_CLONES_EXP static void erf_row_f32(char **ptrs, const int64_t *step, int64_t n) {
    MAP1(float, float, erf_f32(x));
}

CPU_CLONES_EXP static void log_sigmoid_row_f32(char **ptrs, const int64_t *step, int64_t n) {
    MAP1(float, float, log_sigmoid_f32(x));
}

#if CPU_EXP512
__attribute__((target("avx512f"))) static void exp_dense512(float *restrict y,
                                                            const float *restrict x, int64_t n) {
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(y + i, exp512(_mm512_loadu_ps(x + i)));
    for (; i < n; i++) y[i] = exp_f32(x[i]);
}
#endif

static void exp_row_f32(char **ptrs, const int64_t *step, int64_t n) {
#if CPU_EXP512
    if (step[0] == (int64_t)sizeof(float) && step[1] == (int64_t)sizeof(float) &&
        cpu_has_avx512()) {
        exp_dense512((float *)ptrs[0], (const float *)ptrs[1], n);
        return;
    }
#endif
    exp_row_f32_plain(ptrs, step, n);
}

static void unary_f32(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const ew_ctx *c = ctx;
    switch (c->op) {
    case CN_OP_NEG: MAP1(float, float, -x); break;
    case CN_OP_ABS: MAP1(float, float, fabsf(x)); break;
    case CN_OP_RELU: MAP1(float, float, x < 0.0f ? 0.0f : x); break;
    case CN_OP_EXP: exp_row_f32(ptrs, step, n); break;
    case CN_OP_LOG: MAP1(float, float, logf(x)); break;
    case CN_OP_LOG1P: MAP1(float, float, log1pf(x)); break;
    case CN_OP_SQRT: MAP1(float, float, sqrtf(x)); break;
    case CN_OP_RSQRT: MAP1(float, float, 1.0f / sqrtf(x)); break;
    case CN_OP_SIN: MAP1(float, float, sinf(x)); break;
    case CN_OP_COS: MAP1(float, float, cosf(x)); break;
    case CN_OP_TANH: MAP1(float, float, tanhf(x)); break;
    case CN_OP_SIGMOID: MAP1(float, float, sigmoid_f32(x)); break;
    case CN_OP_SILU: MAP1(float, float, x * sigmoid_f32(x)); break;
    case CN_OP_GELU: gelu_row_f32(ptrs, step, n, c->gelu_tanh); break;
    case CN_OP_ERF: erf_row_f32(ptrs, step, n); break;
    case CN_OP_FLOOR: MAP1(float, float, floorf(x)); break;
    case CN_OP_CEIL: MAP1(float, float, ceilf(x)); break;
    case CN_OP_ROUND: MAP1(float, float, rintf(x)); break; /* half to even (the default mode) */
    case CN_OP_TRUNC: MAP1(float, float, truncf(x)); break;
    case CN_OP_SIGN: MAP1(float, float, (float)((0.0f < x) - (x < 0.0f))); break; /* NaN, -0: 0 */
    case CN_OP_RECIPROCAL: MAP1(float, float, 1.0f / x); break;
    case CN_OP_TAN: MAP1(float, float, tanf(x)); break;
    case CN_OP_ASIN: MAP1(float, float, asinf(x)); break;
    case CN_OP_ACOS: MAP1(float, float, acosf(x)); break;
    case CN_OP_ATAN: MAP1(float, float, atanf(x)); break;
    case CN_OP_SINH: MAP1(float, float, sinhf(x)); break;
    case CN_OP_COSH: MAP1(float, float, coshf(x)); break;
    case CN_OP_ASINH: MAP1(float, float, asinhf(x)); break;
    case CN_OP_ACOSH: MAP1(float, float, acoshf(x)); break;
    case CN_OP_ATANH: MAP1(float, float, atanhf(x)); break;
    case CN_OP_IS_NAN: MAP1(uint8_t, float, (uint8_t)(isnan(x) != 0)); break;
    case CN_OP_IS_INF: MAP1(uint8_t, float, (uint8_t)(isinf(x) != 0)); break;
    case CN_OP_HARD_SIGMOID: MAP1(float, float, hard_sigmoid_f32(x)); break;
    case CN_OP_LOG_SIGMOID: log_sigmoid_row_f32(ptrs, step, n); break;
    case CN_OP_HARD_SWISH: MAP1(float, float, x * hard_sigmoid_f32(x)); break;
    default: UNKNOWN_OP(c); break;
    }
}

static void unary_f64(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const ew_ctx *c = ctx;
    switch (c->op) {
    case CN_OP_NEG: MAP1(double, double, -x); break;
    case CN_OP_ABS: MAP1(double, double, fabs(x)); break;
    case CN_OP_RELU: MAP1(double, double, x < 0.0 ? 0.0 : x); break;
    case CN_OP_EXP: MAP1(double, double, exp(x)); break;
    case CN_OP_LOG: MAP1(double, double, log(x)); break;
    case CN_OP_LOG1P: MAP1(double, double, log1p(x)); break;
    case CN_OP_SQRT: MAP1(double, double, sqrt(x)); break;
    case CN_OP_RSQRT: MAP1(double, double, 1.0 / sqrt(x)); break;
    case CN_OP_SIN: MAP1(double, double, sin(x)); break;
    case CN_OP_COS: MAP1(double, double, cos(x)); break;
    case CN_OP_TANH: MAP1(double, double, tanh(x)); break;
    case CN_OP_SIGMOID: MAP1(double, double, sigmoid_f64(x)); break;
    case CN_OP_SILU: MAP1(double, double, x * sigmoid_f64(x)); break;
    case CN_OP_GELU: MAP1(double, double, gelu_f64(x, c->gelu_tanh)); break;
    case CN_OP_ERF: MAP1(double, double, erf(x)); break;
    case CN_OP_FLOOR: MAP1(double, double, floor(x)); break;
    case CN_OP_CEIL: MAP1(double, double, ceil(x)); break;
    case CN_OP_ROUND: MAP1(double, double, rint(x)); break; /* half to even (the default mode) */
    case CN_OP_TRUNC: MAP1(double, double, trunc(x)); break;
    case CN_OP_SIGN: MAP1(double, double, (double)((0.0 < x) - (x < 0.0))); break; /* NaN, -0: 0 */
    case CN_OP_RECIPROCAL: MAP1(double, double, 1.0 / x); break;
    case CN_OP_TAN: MAP1(double, double, tan(x)); break;
    case CN_OP_ASIN: MAP1(double, double, asin(x)); break;
    case CN_OP_ACOS: MAP1(double, double, acos(x)); break;
    case CN_OP_ATAN: MAP1(double, double, atan(x)); break;
    case CN_OP_SINH: MAP1(double, double, sinh(x)); break;
    case CN_OP_COSH: MAP1(double, double, cosh(x)); break;
    case CN_OP_ASINH: MAP1(double, double, asinh(x)); break;
    case CN_OP_ACOSH: MAP1(double, double, acosh(x)); break;
    case CN_OP_ATANH: MAP1(double, double, atanh(x)); break;
    case CN_OP_IS_NAN: MAP1(uint8_t, double, (uint8_t)(isnan(x) != 0)); break;
    case CN_OP_IS_INF: MAP1(uint8_t, double, (uint8_t)(isinf(x) != 0)); break;
    case CN_OP_HARD_SIGMOID: MAP1(double, double, hard_sigmoid_f64(x)); break;
    case CN_OP_LOG_SIGMOID: MAP1(double, double, log_sigmoid_f64(x)); break;
    case CN_OP_HARD_SWISH: MAP1(double, double, x * hard_sigmoid_f64(x)); break;
    default: UNKNOWN_OP(c); break;
    }
}

/* neg, abs, relu, the roundings, sign and bitwise_not on a signed integer type T with unsigned
 * twin U (so -INT_MIN wraps); is_nan and is_inf are false on integers (bool out). */
#define DEFINE_UNARY_INT(NAME, T, U)                                                           \
    static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {           \
        const ew_ctx *c = ctx;                                                                 \
        switch (c->op) {                                                                       \
        case CN_OP_NEG: MAP1(T, T, (T)((U)0 - (U)x)); break;                                   \
        case CN_OP_ABS: MAP1(T, T, x < 0 ? (T)((U)0 - (U)x) : x); break;                       \
        case CN_OP_RELU: MAP1(T, T, x < 0 ? (T)0 : x); break;                                  \
        case CN_OP_FLOOR:                                                                      \
        case CN_OP_CEIL:                                                                       \
        case CN_OP_ROUND:                                                                      \
        case CN_OP_TRUNC: MAP1(T, T, x); break; /* an integer is its own rounding */           \
        case CN_OP_SIGN: MAP1(T, T, (T)((x > 0) - (x < 0))); break;                            \
        case CN_OP_BITWISE_NOT: MAP1(T, T, (T)~x); break;                                      \
        case CN_OP_IS_NAN:                                                                     \
        case CN_OP_IS_INF: MAP1(uint8_t, T, ((void)x, (uint8_t)0)); break;                     \
        default: UNKNOWN_OP(c); break;                                                         \
        }                                                                                      \
    }

DEFINE_UNARY_INT(unary_i32, int32_t, uint32_t)
DEFINE_UNARY_INT(unary_i64, int64_t, uint64_t)

/* in[0] -> out[0], same dtype (bool for is_nan and is_inf). ints[0] = cn_gelu_approx for gelu.
 * Integers: neg, abs, relu, floor, ceil, round, trunc, sign, bitwise_not, is_nan, is_inf. */
cn_status cpu_unary(const cn_kernel_args *a) {
    cpu_row_fn fn;
    switch (a->in[0].dtype) {
    case CN_F32: fn = unary_f32; break;
    case CN_F64: fn = unary_f64; break;
    case CN_I32: fn = unary_i32; break;
    case CN_I64: fn = unary_i64; break;
    default: return bad_dtype(a, a->in[0].dtype);
    }
    ew_ctx c = {.op = a->op};
    if (a->op == CN_OP_GELU) c.gelu_tanh = a->n_ints > 0 && a->ints[0] == CN_GELU_TANH;
    const cn_view *views[2] = {&a->out[0], &a->in[0]};
    return run(a, "cpu_unary", 2, views, fn, &c);
}

/* ---- with scalars ---------------------------------------------------------------------------- */

/* add/mul/pow/remainder_scalar, clamp and the activations with attributes on a float type T;
 * POW, REM, EXPM1 are its functions, S the suffix of its helpers. Clamp lets NaN through. */
#define DEFINE_SCALAR_FLOAT(NAME, T, POW, REM, EXPM1, S)                                       \
    static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {           \
        const ew_ctx *c = ctx;                                                                 \
        const T s = (T)c->s0, lo = (T)c->s0, hi = (T)c->s1;                                    \
        switch (c->op) {                                                                       \
        case CN_OP_ADD_SCALAR: MAP1(T, T, x + s); break;                                       \
        case CN_OP_MUL_SCALAR: MAP1(T, T, x * s); break;                                       \
        case CN_OP_POW_SCALAR: MAP1(T, T, POW(x, s)); break;                                   \
        case CN_OP_CLAMP: MAP1(T, T, x < lo ? lo : (x > hi ? hi : x)); break;                  \
        case CN_OP_REMAINDER_SCALAR: MAP1(T, T, REM(x, s)); break;                             \
        case CN_OP_LEAKY_RELU: MAP1(T, T, x > (T)0 ? x : x * s); break;                        \
        case CN_OP_ELU: MAP1(T, T, x > (T)0 ? x : s * EXPM1(x)); break;                        \
        case CN_OP_SOFTPLUS: MAP1(T, T, softplus_##S(x, s, hi)); break; /* beta, threshold */  \
        case CN_OP_EQ_SCALAR: MAP1(uint8_t, T, (uint8_t)(x == s)); break;                      \
        case CN_OP_NE_SCALAR: MAP1(uint8_t, T, (uint8_t)(x != s)); break;                      \
        case CN_OP_LT_SCALAR: MAP1(uint8_t, T, (uint8_t)(x < s)); break;                       \
        case CN_OP_LE_SCALAR: MAP1(uint8_t, T, (uint8_t)(x <= s)); break;                      \
        case CN_OP_GT_SCALAR: MAP1(uint8_t, T, (uint8_t)(x > s)); break;                       \
        case CN_OP_GE_SCALAR: MAP1(uint8_t, T, (uint8_t)(x >= s)); break;                      \
        default: UNKNOWN_OP(c); break;                                                         \
        }                                                                                      \
    }

DEFINE_SCALAR_FLOAT(scalar_f32, float, powf, remainder_f32, expm1f, f32)
DEFINE_SCALAR_FLOAT(scalar_f64, double, pow, remainder_f64, expm1, f64)

/* add/mul_scalar (wrapping), clamp, remainder_scalar (s != 0: cpu_scalar checks), the bitwise
 * ops and the comparisons with a scalar (against the bound of core/scalar_compare.h, or its fixed
 * answer) on a signed integer type T with unsigned twin U and helpers _S. */
#define CMP_INT(T, OP) MAP1(uint8_t, T, (uint8_t)(c->fixed >= 0 ? c->fixed : (x OP s)))
#define DEFINE_SCALAR_INT(NAME, T, U, S)                                                       \
    static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {           \
        const ew_ctx *c = ctx;                                                                 \
        const T s = (T)c->i0, lo = (T)c->i0, hi = (T)c->i1;                                    \
        switch (c->op) {                                                                       \
        case CN_OP_ADD_SCALAR: MAP1(T, T, (T)((U)x + (U)s)); break;                            \
        case CN_OP_MUL_SCALAR: MAP1(T, T, (T)((U)x * (U)s)); break;                            \
        case CN_OP_POW_SCALAR: MAP1(T, T, pow_##S(x, s)); break; /* s >= 0: the front-end */  \
        case CN_OP_CLAMP: MAP1(T, T, x < lo ? lo : (x > hi ? hi : x)); break;                  \
        case CN_OP_REMAINDER_SCALAR: MAP1(T, T, remainder_##S(x, s)); break;                   \
        case CN_OP_BITWISE_AND_SCALAR: MAP1(T, T, (T)(x & s)); break;                          \
        case CN_OP_BITWISE_OR_SCALAR: MAP1(T, T, (T)(x | s)); break;                           \
        case CN_OP_BITWISE_XOR_SCALAR: MAP1(T, T, (T)(x ^ s)); break;                          \
        case CN_OP_BITWISE_LEFT_SHIFT_SCALAR: MAP1(T, T, shl_##S(x, s)); break;                \
        case CN_OP_BITWISE_RIGHT_SHIFT_SCALAR: MAP1(T, T, shr_##S(x, s)); break;               \
        case CN_OP_EQ_SCALAR: CMP_INT(T, ==); break;                                           \
        case CN_OP_NE_SCALAR: CMP_INT(T, !=); break;                                           \
        case CN_OP_LT_SCALAR: CMP_INT(T, <); break;                                            \
        case CN_OP_LE_SCALAR: CMP_INT(T, <=); break;                                           \
        case CN_OP_GT_SCALAR: CMP_INT(T, >); break;                                            \
        case CN_OP_GE_SCALAR: CMP_INT(T, >=); break;                                           \
        default: UNKNOWN_OP(c); break;                                                         \
        }                                                                                      \
    }

DEFINE_SCALAR_INT(scalar_i32, int32_t, uint32_t, i32)
DEFINE_SCALAR_INT(scalar_i64, int64_t, uint64_t, i64)

/* in[0] -> out[0], same dtype (bool for the comparisons). reals[0] = the scalar, or reals[0..1]
 * = lo, hi for clamp, beta, threshold for softplus.
 * Integers: the scalar is truncated toward zero; clamp keeps x within [ceil(lo), floor(hi)]
 * (the integers inside [lo, hi]); both saturate to the dtype's range. lo > hi gives hi. */
cn_status cpu_scalar(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    cpu_row_fn fn;
    switch (dt) {
    case CN_F32: fn = scalar_f32; break;
    case CN_F64: fn = scalar_f64; break;
    case CN_I32: fn = scalar_i32; break;
    case CN_I64: fn = scalar_i64; break;
    default: return bad_dtype(a, dt);
    }
    int need = a->op == CN_OP_CLAMP || a->op == CN_OP_SOFTPLUS ? 2 : 1;
    if (a->n_reals < need)
        return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                            "the kernel needs %d scalar argument(s) but got %d; call the op "
                            "through its cn_ function",
                            need, a->n_reals);

    ew_ctx c = {.op = a->op, .s0 = a->reals[0], .s1 = need > 1 ? a->reals[1] : 0.0};
    if (dt == CN_I32 || dt == CN_I64) {
        int64_t lo, hi;
        int_range(dt, &lo, &hi);
        if (a->op == CN_OP_CLAMP) {
            c.i0 = to_int_sat(ceil(c.s0), lo, hi);
            c.i1 = to_int_sat(floor(c.s1), lo, hi);
        } else if (a->op >= CN_OP_EQ_SCALAR && a->op <= CN_OP_GE_SCALAR) {
            c.fixed = cn__int_compare_bound(a->op, c.s0, lo, hi, &c.i0);
        } else {
            c.i0 = to_int_sat(c.s0, lo, hi);
        }
        if (a->op == CN_OP_REMAINDER_SCALAR && c.i0 == 0)
            return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                                "integer division by zero: the scalar divisor s = %g is 0 in %s; "
                                "pass a nonzero s, or cast x to a float dtype to get NaN instead",
                                c.s0, cn_dtype_name(dt));
    }
    const cn_view *views[2] = {&a->out[0], &a->in[0]};
    return run(a, "cpu_scalar", 2, views, fn, &c);
}

/* ---- binary ---------------------------------------------------------------------------------- */

/* The float binary ops on a float type T; POW, ATAN2, FMOD, HYPOT and REM are the f32 or the f64
 * functions (REM: remainder_f32 or remainder_f64). CLONES: CPU_CLONES or nothing (see
 * binary_f32_wide). */
#define DEFINE_BINARY_FLOAT(NAME, T, POW, ATAN2, FMOD, HYPOT, REM, CLONES)                     \
    CLONES static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {    \
        const ew_ctx *c = ctx;                                                                 \
        switch (c->op) {                                                                       \
        case CN_OP_ADD: MAP2(T, T, T, x + y); break;                                           \
        case CN_OP_SUB: MAP2(T, T, T, x - y); break;                                           \
        case CN_OP_MUL: MAP2(T, T, T, x * y); break;                                           \
        case CN_OP_DIV: MAP2(T, T, T, x / y); break;                                           \
        case CN_OP_POW: MAP2(T, T, T, POW(x, y)); break;                                       \
        case CN_OP_MAXIMUM: MAP2(T, T, T, (x != x || x > y) ? x : y); break;                   \
        case CN_OP_MINIMUM: MAP2(T, T, T, (x != x || x < y) ? x : y); break;                   \
        case CN_OP_ATAN2: MAP2(T, T, T, ATAN2(x, y)); break;                                   \
        case CN_OP_REMAINDER: MAP2(T, T, T, REM(x, y)); break;                                 \
        case CN_OP_FMOD: MAP2(T, T, T, FMOD(x, y)); break;                                     \
        case CN_OP_HYPOT: MAP2(T, T, T, HYPOT(x, y)); break;                                   \
        case CN_OP_PRELU: MAP2(T, T, T, x > (T)0 ? x : y * x); break; /* y: the weight */      \
        default: UNKNOWN_OP(c); break;                                                         \
        }                                                                                      \
    }

DEFINE_BINARY_FLOAT(binary_f32, float, powf, atan2f, fmodf, hypotf, remainder_f32, )
DEFINE_BINARY_FLOAT(binary_f64, double, pow, atan2, fmod, hypot, remainder_f64, )
/* binary_f32 also compiled for AVX2, for runs split over threads (run_binary): on data in the
 * cores' caches (an add of up to 128K f32) its 8-wide loops are a third faster than SSE2's, with
 * the same results. A tiny op keeps binary_f32, a few instructions shorter. */
DEFINE_BINARY_FLOAT(binary_f32_wide, float, powf, atan2f, fmodf, hypotf, remainder_f32,
                    CPU_CLONES)

/* add sub mul div maximum minimum remainder fmod and the bitwise ops on a signed integer type T
 * with unsigned twin U and helpers _S. Division truncates; the caller has checked for zero
 * divisors; MIN / -1 wraps to MIN. */
#define DEFINE_BINARY_INT(NAME, T, U, S)                                                       \
    static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {           \
        const ew_ctx *c = ctx;                                                                 \
        switch (c->op) {                                                                       \
        case CN_OP_ADD: MAP2(T, T, T, (T)((U)x + (U)y)); break;                                \
        case CN_OP_SUB: MAP2(T, T, T, (T)((U)x - (U)y)); break;                                \
        case CN_OP_MUL: MAP2(T, T, T, (T)((U)x * (U)y)); break;                                \
        case CN_OP_DIV: MAP2(T, T, T, y == -1 ? (T)((U)0 - (U)x) : (T)(x / y)); break;         \
        case CN_OP_MAXIMUM: MAP2(T, T, T, x > y ? x : y); break;                               \
        case CN_OP_MINIMUM: MAP2(T, T, T, x < y ? x : y); break;                               \
        case CN_OP_REMAINDER: MAP2(T, T, T, remainder_##S(x, y)); break;                       \
        case CN_OP_POW: MAP2(T, T, T, pow_##S(x, y)); break;                                   \
        case CN_OP_FMOD: MAP2(T, T, T, fmod_##S(x, y)); break;                                 \
        case CN_OP_BITWISE_AND: MAP2(T, T, T, (T)(x & y)); break;                              \
        case CN_OP_BITWISE_OR: MAP2(T, T, T, (T)(x | y)); break;                               \
        case CN_OP_BITWISE_XOR: MAP2(T, T, T, (T)(x ^ y)); break;                              \
        case CN_OP_BITWISE_LEFT_SHIFT: MAP2(T, T, T, shl_##S(x, y)); break;                    \
        case CN_OP_BITWISE_RIGHT_SHIFT: MAP2(T, T, T, shr_##S(x, y)); break;                   \
        default: UNKNOWN_OP(c); break;                                                         \
        }                                                                                      \
    }

DEFINE_BINARY_INT(binary_i32, int32_t, uint32_t, i32)
DEFINE_BINARY_INT(binary_i64, int64_t, uint64_t, i64)

/* Sets *found_zero when the run (operand 0: the divisor) holds a zero. */
#define DEFINE_FIND_ZERO(NAME, T)                                                              \
    static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {           \
        const ew_ctx *c = ctx;                                                                 \
        int zero = 0;                                                                          \
        for (int64_t i = 0; i < n; i++) zero |= *(const T *)(ptrs[0] + i * step[0]) == 0;      \
        if (zero) atomic_store_explicit(c->found_zero, 1, memory_order_relaxed);               \
    }

DEFINE_FIND_ZERO(find_zero_i32, int32_t)
DEFINE_FIND_ZERO(find_zero_i64, int64_t)

/* ---- binary on dense operands: split with cache affinity ------------------------------------- *
 * The commonest large binary op is two dense tensors of the output's shape (a + b of two
 * activations). The strided iterator cuts such a run into chunks that go to whichever thread
 * claims them first, so an op over data that fits in the cores' private caches (64K-256K f32: up
 * to 3 MB with the output) finds about half of it in the other core's cache each time it runs.
 * cpu_map_dense gives each core the same parts op after op instead. (Measured on 2 cores: add of
 * 64K and 256K f32 about twice as fast as through the iterator, with the AVX2 loop of
 * binary_f32_wide.) */

/* ---- binary f32 arithmetic into a large output: streaming stores ------------------------------ *
 * When an op's operands and output together pass about three quarters of the L3 (32 MB on the
 * Zen 4 of docs/benchmarks.md), its inputs come from memory anyway, and ordinary stores cost
 * twice: each output line is read before it is written (write-allocate), and the lines they
 * leave push the inputs of the next op out of the L3. Streaming stores write whole lines to
 * memory without either. Measured there (2 threads, this loop alone): add of 4M f32 (48 MB) 46
 * -> 66 GB/s, of 16M 38 -> 51 (with 64-byte stores, before the loop below took 32-byte ones on
 * every CPU); at 1M-1.5M f32 (12-18 MB, in the L3) ordinary stores are faster, by up to 2x. On a
 * Zen 3 with AVX2 (32 MB of L3): 4M 42-46 -> 58-65 GB/s, 16M 37 -> 46.
 * add sub mul div only: one vector instruction each, the same bits as the scalar loop. */
#define STREAM_BYTES ((int64_t)24 << 20)

#if CPU_EXP256
/* out = x OP y over dense f32 runs (VOP: OP on 8 lanes); ordinary stores up to the output's
 * first 64-byte boundary and after its last whole vector, streaming stores between (two 32-byte
 * stores a line: the write-combining buffer sends the line whole). One loop for every CPU with
 * AVX2, AVX-512 ones included: the op runs at memory speed, not at the vector width. */
#define STREAM_LOOP(VOP, OP)                                                                   \
    do {                                                                                       \
        int64_t i_ = 0, head_ = (int64_t)((64 - ((uintptr_t)o & 63)) & 63) / 4;               \
        for (; i_ < head_ && i_ < n; i_++) o[i_] = x[i_] OP y[i_];                             \
        for (; i_ + 8 <= n; i_ += 8)                                                           \
            _mm256_stream_ps(o + i_, VOP(_mm256_loadu_ps(x + i_), _mm256_loadu_ps(y + i_)));   \
        for (; i_ < n; i_++) o[i_] = x[i_] OP y[i_];                                           \
    } while (0)

/* binary_f32's add sub mul div on dense runs whose output is float-aligned (run_binary checks
 * both), with streaming stores; fenced, so that the lines are visible before the pool reports
 * the part done. */
__attribute__((target("avx2"))) static void binary_stream_f32(char **ptrs, const int64_t *step,
                                                              int64_t n, const void *ctx) {
    (void)step;
    const ew_ctx *c = ctx;
    float *restrict o = (float *)ptrs[0];
    const float *restrict x = (const float *)ptrs[1], *restrict y = (const float *)ptrs[2];
    switch (c->op) {
    case CN_OP_ADD: STREAM_LOOP(_mm256_add_ps, +); break;
    case CN_OP_SUB: STREAM_LOOP(_mm256_sub_ps, -); break;
    case CN_OP_MUL: STREAM_LOOP(_mm256_mul_ps, *); break;
    case CN_OP_DIV: STREAM_LOOP(_mm256_div_ps, /); break;
    default: UNKNOWN_OP(c); break;
    }
    _mm_sfence();
}
#undef STREAM_LOOP
#endif

/* The row function for fn over n dense elements of views: binary_f32 becomes binary_f32_wide,
 * or binary_stream_f32 for a large output (above). */
static cpu_row_fn dense_binary_fn(cpu_row_fn fn, const ew_ctx *c, const cn_view *const *views,
                                  int64_t n) {
    if (fn != binary_f32) return fn;
#if CPU_EXP256
    int arith = c->op == CN_OP_ADD || c->op == CN_OP_SUB || c->op == CN_OP_MUL ||
                c->op == CN_OP_DIV;
    if (arith && n >= STREAM_BYTES / 12 && ((uintptr_t)views[0]->data & 3) == 0 &&
        cpu_has_avx2_fma())
        return binary_stream_f32;
#else
    (void)c, (void)views, (void)n;
#endif
    return binary_f32_wide;
}

/* run for three operands, with two shortcuts: dense ones too small to split are one call of fn
 * (as in cpu_map), larger dense ones are split by cpu_map_dense. */
static cn_status run_binary(const cn_kernel_args *a, const cn_view *const *views, cpu_row_fn fn,
                            ew_ctx *c) {
    atomic_int unknown = 0;
    c->unknown = &unknown;
    int dense;
    int64_t n = cpu_count_dense(3, views, &dense);
    if (!dense) n = -1;
    if (n > 0 && n < 2 * CPU_PARALLEL_GRAIN) {
        char *ptrs[3];
        int64_t step[3];
        for (int k = 0; k < 3; k++) {
            ptrs[k] = views[k]->data;
            step[k] = (int64_t)cn_dtype_size(views[k]->dtype);
        }
        fn(ptrs, step, n, c);
    } else if (n > 0 && cpu_threads() > 1) {
        cpu_map_dense(3, views, n, 2 * CPU_PARALLEL_GRAIN, dense_binary_fn(fn, c, views, n), c);
    } else {
        cpu_map(3, views, n > 0 ? dense_binary_fn(fn, c, views, n) : fn, c);
    }
    if (atomic_load_explicit(&unknown, memory_order_relaxed))
        return cn__kernel_op_error("cpu", "cpu_binary", a->op);
    return CN_OK;
}

/* in[0] op in[1] -> out[0], all one dtype. Integer division (div, remainder, fmod) checks every
 * divisor before writing anything, so a division by zero fails cleanly. */
cn_status cpu_binary(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    cpu_row_fn fn;
    switch (dt) {
    case CN_F32: fn = binary_f32; break;
    case CN_F64: fn = binary_f64; break;
    case CN_I32: fn = binary_i32; break;
    case CN_I64: fn = binary_i64; break;
    default: return bad_dtype(a, dt);
    }

    atomic_int found_zero = 0;
    ew_ctx c = {.op = a->op, .found_zero = &found_zero};
    cpu_iter it;
    int divides = a->op == CN_OP_DIV || a->op == CN_OP_REMAINDER || a->op == CN_OP_FMOD;
    if (divides && (dt == CN_I32 || dt == CN_I64)) {
        const cn_view *divisor[1] = {&a->in[1]};
        cpu_iter_init(&it, 1, divisor);
        cpu_iter_run(&it, dt == CN_I32 ? find_zero_i32 : find_zero_i64, &c);
        if (atomic_load(&found_zero))
            return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                                "integer division by zero: the divisor (%s) has a zero element; "
                                "mask the zeros with cn_where, or cast both inputs to a float "
                                "dtype to get inf/nan instead",
                                cn_dtype_name(dt));
    }
    const cn_view *views[3] = {&a->out[0], &a->in[0], &a->in[1]};
    return run_binary(a, views, fn, &c);
}

/* ---- comparisons and logic ------------------------------------------------------------------- */

/* eq ne lt le gt ge on T -> bool (uint8_t 0/1). NaN compares unequal to everything. */
#define DEFINE_COMPARE(NAME, T)                                                                \
    static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {           \
        const ew_ctx *c = ctx;                                                                 \
        switch (c->op) {                                                                       \
        case CN_OP_EQ: MAP2(uint8_t, T, T, x == y); break;                                     \
        case CN_OP_NE: MAP2(uint8_t, T, T, x != y); break;                                     \
        case CN_OP_LT: MAP2(uint8_t, T, T, x < y); break;                                      \
        case CN_OP_LE: MAP2(uint8_t, T, T, x <= y); break;                                     \
        case CN_OP_GT: MAP2(uint8_t, T, T, x > y); break;                                      \
        case CN_OP_GE: MAP2(uint8_t, T, T, x >= y); break;                                     \
        default: UNKNOWN_OP(c); break;                                                         \
        }                                                                                      \
    }

DEFINE_COMPARE(compare_f32, float)
DEFINE_COMPARE(compare_f64, double)
DEFINE_COMPARE(compare_i32, int32_t)
DEFINE_COMPARE(compare_i64, int64_t)
DEFINE_COMPARE(compare_u8, uint8_t) /* u8 and bool */

/* in[0] op in[1] -> out[0] bool; the inputs share a dtype. */
cn_status cpu_compare(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    cpu_row_fn fn;
    switch (dt) {
    case CN_F32: fn = compare_f32; break;
    case CN_F64: fn = compare_f64; break;
    case CN_I32: fn = compare_i32; break;
    case CN_I64: fn = compare_i64; break;
    case CN_U8:
    case CN_BOOL: fn = compare_u8; break;
    default: return bad_dtype(a, dt);
    }
    ew_ctx c = {.op = a->op};
    const cn_view *views[3] = {&a->out[0], &a->in[0], &a->in[1]};
    return run(a, "cpu_compare", 3, views, fn, &c);
}

static void logical_row(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const ew_ctx *c = ctx;
    switch (c->op) {
    case CN_OP_LOGICAL_AND: MAP2(uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) & (y != 0))); break;
    case CN_OP_LOGICAL_OR: MAP2(uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) | (y != 0))); break;
    case CN_OP_LOGICAL_NOT: MAP1(uint8_t, uint8_t, (uint8_t)(x == 0)); break;
    case CN_OP_LOGICAL_XOR: MAP2(uint8_t, uint8_t, uint8_t, (uint8_t)((x != 0) ^ (y != 0))); break;
    default: UNKNOWN_OP(c); break;
    }
}

/* logical_and / or / xor: in[0], in[1] bool -> out[0] bool; logical_not: in[0] -> out[0]. */
cn_status cpu_logical(const cn_kernel_args *a) {
    int unary = a->op == CN_OP_LOGICAL_NOT;
    ew_ctx c = {.op = a->op};
    const cn_view *views[3] = {&a->out[0], &a->in[0], unary ? NULL : &a->in[1]};
    return run(a, "cpu_logical", unary ? 2 : 3, views, logical_row, &c);
}

/* ---- where ----------------------------------------------------------------------------------- */

/* out = cond ? a : b, moving elements as raw T-sized words (any dtype of that size). */
#define DEFINE_WHERE(NAME, T)                                                                  \
    static void NAME(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {           \
        (void)ctx;                                                                             \
        const int64_t es = (int64_t)sizeof(T);                                                 \
        if (step[0] == es && step[1] == 1 && step[2] == es && step[3] == es) {                 \
            T *restrict o = (T *)ptrs[0];                                                      \
            const uint8_t *restrict cond = (const uint8_t *)ptrs[1];                           \
            const T *restrict x = (const T *)ptrs[2];                                          \
            const T *restrict y = (const T *)ptrs[3];                                          \
            /* both sides loaded whatever cond says, so the loop vectorises as a blend */      \
            for (int64_t i = 0; i < n; i++) {                                                  \
                const T xi = x[i], yi = y[i];                                                  \
                o[i] = cond[i] ? xi : yi;                                                      \
            }                                                                                  \
        } else if (step[0] == es && step[1] == 1 && step[2] == es && step[3] == 0) {           \
            /* y one value (a broadcast scalar): where(mask, g, 0) of a relu's backward */     \
            T *restrict o = (T *)ptrs[0];                                                      \
            const uint8_t *restrict cond = (const uint8_t *)ptrs[1];                           \
            const T *restrict x = (const T *)ptrs[2];                                          \
            const T y = *(const T *)ptrs[3];                                                   \
            for (int64_t i = 0; i < n; i++) {                                                  \
                const T xi = x[i];                                                             \
                o[i] = cond[i] ? xi : y;                                                       \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i = 0; i < n; i++) {                                                  \
                const uint8_t cond = *(const uint8_t *)(ptrs[1] + i * step[1]);                \
                const char *src = cond ? ptrs[2] + i * step[2] : ptrs[3] + i * step[3];        \
                *(T *)(ptrs[0] + i * step[0]) = *(const T *)src;                               \
            }                                                                                  \
        }                                                                                      \
    }

DEFINE_WHERE(where_8, uint8_t)
DEFINE_WHERE(where_16, uint16_t)
DEFINE_WHERE(where_32, uint32_t)
DEFINE_WHERE(where_64, uint64_t)

/* in = (cond bool, a, b) -> out[0] of a's dtype. */
cn_status cpu_where(const cn_kernel_args *a) {
    cn_dtype dt = a->in[1].dtype;
    cpu_row_fn fn;
    switch (cn_dtype_size(dt)) {
    case 1: fn = where_8; break;
    case 2: fn = where_16; break;
    case 4: fn = where_32; break;
    case 8: fn = where_64; break;
    default: return bad_dtype(a, dt);
    }
    const cn_view *views[4] = {&a->out[0], &a->in[0], &a->in[1], &a->in[2]};
    cpu_map(4, views, fn, NULL);
    return CN_OK;
}
