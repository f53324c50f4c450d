/* CUDA elementwise kernels: unary, scalar, binary, comparison, logic and where, plus the strided
 * iterator they share (the same dim-merging as the CPU's strided.c).
 *
 * Semantics follow the CPU kernels (cpu/elementwise.c): integer arithmetic wraps, integer
 * division truncates and fails cleanly on a zero divisor, float maximum/minimum propagate NaN,
 * clamp lets NaN through. f16 and bf16, which the CPU kernels do not take, are computed in float
 * and rounded once on store.
 *
 * One kernel per op family and compute type (float, double, int64); the op is a launch-uniform
 * switch inside the loop. Each switch is a __host__ __device__ function that says whether it has
 * a case for the op: the host asks it before launching (op_known), so an op without a case is an
 * error naming op and backend, never another op's result. Adding an elementwise op is its case
 * in the family's switch (and its row in backend.c). Dtypes are the router's: it refuses those
 * the backend does not declare for the op (backend.c). */
#include <math.h>

#include "backends/cuda/common.cuh"
#include "core/backend_common.h"
#include "core/scalar_compare.h"
#include "cinder/ops.h" /* cn_gelu_approx */

/* ---- the iterator (host) ------------------------------------------------------------------------ */

extern "C" void cu_iter_init(cu_iter *it, int nops, const cn_view *const *views) {
    it->nops = nops;
    it->numel = cn__view_numel(views[0]);
    for (int k = 0; k < CU_ITER_MAX_OPS; k++) {
        it->base[k] = k < nops ? (char *)views[k]->data : 0;
        it->esize[k] = k < nops ? (int64_t)cn_dtype_size(views[k]->dtype) : 0;
    }
    /* dims past ndim are size 1, stride 0: the kernels' offset loops may read them */
    for (int k = 0; k < CU_ITER_MAX_OPS; k++)
        for (int d = 0; d < CN_MAX_DIMS; d++) it->strides[k][d] = 0;
    for (int d = 0; d < CN_MAX_DIMS; d++) it->shape[d] = 1;
    if (it->numel == 0) { /* nothing to visit; other sizes may be huge, so do not merge them */
        it->ndim = 1;
        it->shape[0] = 0;
        return;
    }
    /* drop size-1 dims and merge the dims every operand steps through as one */
    int nd = cn__merge_dims(nops, views, it->esize, it->shape, it->strides);
    for (int d = nd; d < CN_MAX_DIMS; d++) {
        it->shape[d] = 1;
        for (int k = 0; k < CU_ITER_MAX_OPS; k++) it->strides[k][d] = 0;
    }
    it->ndim = nd;
}

extern "C" int cu_iter_dense(const cu_iter *it) {
    if (it->ndim != 1) return 0;
    if (it->shape[0] <= 1) return 1; /* one element is dense whatever its (zero) strides */
    for (int k = 0; k < it->nops; k++)
        if (it->strides[k][0] != it->esize[k]) return 0;
    return 1;
}

/* ---- scalar math, overloaded for float and double ---------------------------------------------- */

#define CU_HD __host__ __device__ __forceinline__
#define CU_MATH1(name, f32, f64)                                                                 \
    CU_HD float name(float x) { return f32(x); }                                                 \
    CU_HD double name(double x) { return f64(x); }
CU_MATH1(m_exp, expf, exp)
CU_MATH1(m_log, logf, log)
CU_MATH1(m_log1p, log1pf, log1p)
CU_MATH1(m_sqrt, sqrtf, sqrt)
CU_MATH1(m_sin, sinf, sin)
CU_MATH1(m_cos, cosf, cos)
CU_MATH1(m_tanh, tanhf, tanh)
CU_MATH1(m_erf, erff, erf)
CU_MATH1(m_fabs, fabsf, fabs)
CU_MATH1(m_floor, floorf, floor)
CU_MATH1(m_ceil, ceilf, ceil)
CU_MATH1(m_rint, rintf, rint) /* half to even, as torch.round */
CU_MATH1(m_trunc, truncf, trunc)
CU_MATH1(m_tan, tanf, tan)
CU_MATH1(m_asin, asinf, asin)
CU_MATH1(m_acos, acosf, acos)
CU_MATH1(m_atan, atanf, atan)
CU_MATH1(m_sinh, sinhf, sinh)
CU_MATH1(m_cosh, coshf, cosh)
CU_MATH1(m_asinh, asinhf, asinh)
CU_MATH1(m_acosh, acoshf, acosh)
CU_MATH1(m_atanh, atanhf, atanh)
CU_MATH1(m_expm1, expm1f, expm1)
CU_HD float m_pow(float x, float y) { return powf(x, y); }
CU_HD double m_pow(double x, double y) { return pow(x, y); }
CU_HD float m_atan2(float y, float x) { return atan2f(y, x); }
CU_HD double m_atan2(double y, double x) { return atan2(y, x); }
CU_HD float m_fmod(float x, float y) { return fmodf(x, y); }
CU_HD double m_fmod(double x, double y) { return fmod(x, y); }
CU_HD float m_hypot(float x, float y) { return hypotf(x, y); }
CU_HD double m_hypot(double x, double y) { return hypot(x, y); }

/* x mod y with the sign of y (torch.remainder), as on the CPU. */
template <typename T> CU_HD T m_remainder(T x, T y) {
    T r = m_fmod(x, y);
    return r != (T)0 && ((r < (T)0) != (y < (T)0)) ? r + y : r;
}

/* The integer remainders and shifts in 64 bits for a dtype of `bits` bits, as on the CPU
 * (cpu/elementwise.c): y != 0 (checked before launching), x % -1 is 0; shifts by a count < 0 or
 * >= bits give 0 (left) or x >> (bits - 1) (right, arithmetic). An i32 value sign-extended to 64
 * bits keeps its low 32 bits right through each. */
CU_HD int64_t int_remainder(int64_t x, int64_t y) {
    if (y == -1 || y == 0) return 0;
    int64_t r = x % y;
    return r != 0 && ((r < 0) != (y < 0)) ? r + y : r;
}
CU_HD int64_t int_fmod(int64_t x, int64_t y) { return y == -1 || y == 0 ? 0 : x % y; }
CU_HD int64_t int_shl(int64_t x, int64_t y, int bits) {
    return y < 0 || y >= bits ? 0 : (int64_t)((uint64_t)x << y);
}
CU_HD int64_t int_shr(int64_t x, int64_t y, int bits) {
    if (y < 0 || y >= bits) y = bits - 1;
    return x < 0 ? ~(~x >> y) : x >> y;
}
/* x^y wrapping (the low bits of the 64-bit power are the narrower dtype's); y < 0: 1 / x^-y
 * truncated, as PyTorch (1, +-1 or 0). */
CU_HD int64_t int_pow(int64_t x, int64_t y) {
    if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)x;
    for (; y > 0; y >>= 1) {
        if (y & 1) r *= b;
        b *= b;
    }
    return (int64_t)r;
}

/* Numerically stable logistic: exp only sees -|x|. */
template <typename T> CU_HD T sigmoid(T x) {
    T e = m_exp(-m_fabs(x));
    T r = (T)1 / ((T)1 + e);
    return x >= (T)0 ? r : e * r;
}

template <typename T> CU_HD T gelu(T x, int tanh_form) {
    if (tanh_form)
        return (T)0.5 * x *
               ((T)1 + m_tanh((T)0.797884560802865356 * (x + (T)0.044715 * x * x * x)));
    return (T)0.5 * x * ((T)1 + m_erf(x * (T)0.707106781186547524));
}

/* The activations as on the CPU (cpu/elementwise.c): NaN passes through hard_sigmoid's
 * comparisons; log_sigmoid = min(x, 0) - log1p(exp(-|x|)) never overflows; softplus switches to
 * x where beta x > threshold. */
template <typename T> CU_HD T hard_sigmoid(T x) {
    T t = x + (T)3;
    t = t < (T)0 ? (T)0 : t;
    t = t > (T)6 ? (T)6 : t;
    return t / (T)6;
}
template <typename T> CU_HD T log_sigmoid(T x) {
    return (x < (T)0 ? x : (T)0) - m_log1p(m_exp(-m_fabs(x)));
}
template <typename T> CU_HD T softplus(T x, T beta, T threshold) {
    return x * beta > threshold ? x : m_log1p(m_exp(x * beta)) / beta;
}

/* The fused backward of an activation: *z = g * f'(s), s the forward's output (relu, tanh,
 * sigmoid) or input (silu, gelu, hard_sigmoid, log_sigmoid, hard_swish), as on the CPU
 * (cpu/activation.c). */
template <typename T> CU_HD bool act_backward_op(int act, T g, T s, int gelu_tanh, T *z) {
    switch (act) {
    case CN_OP_RELU: *z = s > (T)0 ? g : (T)0; return true;
    case CN_OP_TANH: *z = g * ((T)1 - s * s); return true;
    case CN_OP_SIGMOID: *z = g * s * ((T)1 - s); return true;
    case CN_OP_SILU: {
        T sig = (T)1 / ((T)1 + m_exp(-s));
        *z = g * sig * ((T)1 + s * ((T)1 - sig));
        return true;
    }
    case CN_OP_GELU: {
        const T k = (T)0.79788456080286535588, c = (T)0.044715;
        if (gelu_tanh) {
            T t = m_tanh(k * (s + c * s * s * s));
            *z = g * ((T)0.5 * ((T)1 + t) +
                      (T)0.5 * s * ((T)1 - t * t) * k * ((T)1 + (T)3 * c * s * s));
        } else {
            T cdf = (T)0.5 * ((T)1 + m_erf(s * (T)0.70710678118654752440));
            *z = g * (cdf + s * (T)0.39894228040143267794 * m_exp((T)-0.5 * s * s));
        }
        return true;
    }
    case CN_OP_HARD_SIGMOID: *z = s > (T)-3 && s < (T)3 ? g * ((T)1 / (T)6) : (T)0; return true;
    case CN_OP_LOG_SIGMOID: { /* sigmoid(-s), without overflow */
        T e = m_exp(-m_fabs(s));
        *z = g * ((s > (T)0 ? e : (T)1) / ((T)1 + e));
        return true;
    }
    case CN_OP_HARD_SWISH:
        *z = s < (T)-3 ? (T)0 : (s <= (T)3 ? g * (s / (T)3 + (T)0.5) : g);
        return true;
    default: return false;
    }
}

/* ---- kernels ----------------------------------------------------------------------------------- */

/* What a kernel needs besides the iterator. */
typedef struct ew_params {
    int op;
    int gelu_tanh;
    int dt_out, dt_in; /* dt_in: the (shared) dtype of the value inputs */
    int bits;          /* integer ops: the width of dt_in (the shifts need it) */
    double s0, s1;     /* scalar, or lo and hi (floats) */
    int64_t i0, i1;    /* the same for integers, saturated to the dtype's range */
} ew_params;

/* The op switches: *z = op(x[, y]) and true, or false for an op without a case. */

template <typename T> CU_HD bool unary_op(int op, T x, int gelu_tanh, T *z) {
    switch (op) {
    case CN_OP_NEG: *z = -x; return true;
    case CN_OP_ABS: *z = m_fabs(x); return true;
    case CN_OP_RELU: *z = x < (T)0 ? (T)0 : x; return true;
    case CN_OP_EXP: *z = m_exp(x); return true;
    case CN_OP_LOG: *z = m_log(x); return true;
    case CN_OP_LOG1P: *z = m_log1p(x); return true;
    case CN_OP_SQRT: *z = m_sqrt(x); return true;
    case CN_OP_RSQRT: *z = (T)1 / m_sqrt(x); return true;
    case CN_OP_SIN: *z = m_sin(x); return true;
    case CN_OP_COS: *z = m_cos(x); return true;
    case CN_OP_TANH: *z = m_tanh(x); return true;
    case CN_OP_SIGMOID: *z = sigmoid(x); return true;
    case CN_OP_SILU: *z = x * sigmoid(x); return true;
    case CN_OP_GELU: *z = gelu(x, gelu_tanh); return true;
    case CN_OP_ERF: *z = m_erf(x); return true;
    case CN_OP_FLOOR: *z = m_floor(x); return true;
    case CN_OP_CEIL: *z = m_ceil(x); return true;
    case CN_OP_ROUND: *z = m_rint(x); return true;
    case CN_OP_TRUNC: *z = m_trunc(x); return true;
    case CN_OP_SIGN: *z = (T)(((T)0 < x) - (x < (T)0)); return true; /* NaN, -0: 0 */
    case CN_OP_RECIPROCAL: *z = (T)1 / x; return true;
    case CN_OP_TAN: *z = m_tan(x); return true;
    case CN_OP_ASIN: *z = m_asin(x); return true;
    case CN_OP_ACOS: *z = m_acos(x); return true;
    case CN_OP_ATAN: *z = m_atan(x); return true;
    case CN_OP_SINH: *z = m_sinh(x); return true;
    case CN_OP_COSH: *z = m_cosh(x); return true;
    case CN_OP_ASINH: *z = m_asinh(x); return true;
    case CN_OP_ACOSH: *z = m_acosh(x); return true;
    case CN_OP_ATANH: *z = m_atanh(x); return true;
    case CN_OP_HARD_SIGMOID: *z = hard_sigmoid(x); return true;
    case CN_OP_LOG_SIGMOID: *z = log_sigmoid(x); return true;
    case CN_OP_HARD_SWISH: *z = x * hard_sigmoid(x); return true;
    default: return false;
    }
}

/* The float predicates: bool out. */
template <typename T> CU_HD bool unary_bool_op(int op, T x, uint8_t *z) {
    switch (op) {
    case CN_OP_IS_NAN: *z = x != x; return true;
    case CN_OP_IS_INF: *z = isinf(x) != 0; return true;
    default: return false;
    }
}

/* neg, abs, relu, the roundings (which keep an integer), sign and bitwise_not on integers: in 64
 * bits, wrapping (so -INT_MIN is INT_MIN after the store); is_nan and is_inf: false. */
CU_HD bool unary_int_op(int op, int64_t x, int64_t *z) {
    int64_t neg = (int64_t)(0ull - (uint64_t)x);
    switch (op) {
    case CN_OP_NEG: *z = neg; return true;
    case CN_OP_ABS: *z = x < 0 ? neg : x; return true;
    case CN_OP_RELU: *z = x < 0 ? 0 : x; return true;
    case CN_OP_FLOOR:
    case CN_OP_CEIL:
    case CN_OP_ROUND:
    case CN_OP_TRUNC: *z = x; return true;
    case CN_OP_SIGN: *z = (x > 0) - (x < 0); return true;
    case CN_OP_BITWISE_NOT: *z = ~x; return true;
    case CN_OP_IS_NAN:
    case CN_OP_IS_INF: *z = 0; return true; /* stored as bool: an integer is never NaN or inf */
    default: return false;
    }
}

/* Clamp lets NaN through. */
template <typename T> CU_HD bool scalar_op(int op, T x, T s, T hi, T *z) {
    switch (op) {
    case CN_OP_ADD_SCALAR: *z = x + s; return true;
    case CN_OP_MUL_SCALAR: *z = x * s; return true;
    case CN_OP_POW_SCALAR: *z = m_pow(x, s); return true;
    case CN_OP_CLAMP: *z = x < s ? s : (x > hi ? hi : x); return true; /* s: lo */
    case CN_OP_REMAINDER_SCALAR: *z = m_remainder(x, s); return true;
    case CN_OP_LEAKY_RELU: *z = x > (T)0 ? x : x * s; return true;
    case CN_OP_ELU: *z = x > (T)0 ? x : s * m_expm1(x); return true;
    case CN_OP_SOFTPLUS: *z = softplus(x, s, hi); return true; /* beta, threshold */
    default: return false;
    }
}

/* The comparisons with a scalar: bool out. */
template <typename T> CU_HD bool scalar_bool_op(int op, T x, T s, uint8_t *z) {
    switch (op) {
    case CN_OP_EQ_SCALAR: *z = x == s; return true;
    case CN_OP_NE_SCALAR: *z = x != s; return true;
    case CN_OP_LT_SCALAR: *z = x < s; return true;
    case CN_OP_LE_SCALAR: *z = x <= s; return true;
    case CN_OP_GT_SCALAR: *z = x > s; return true;
    case CN_OP_GE_SCALAR: *z = x >= s; return true;
    default: return false;
    }
}

/* The comparisons (stored as bool) take s as core/scalar_compare.h's bound and hi as its fixed
 * answer, or -1. */
CU_HD bool scalar_int_op(int op, int64_t x, int64_t s, int64_t hi, int bits, int64_t *z) {
    switch (op) {
    case CN_OP_ADD_SCALAR: *z = (int64_t)((uint64_t)x + (uint64_t)s); return true;
    case CN_OP_MUL_SCALAR: *z = (int64_t)((uint64_t)x * (uint64_t)s); return true;
    case CN_OP_CLAMP: *z = x < s ? s : (x > hi ? hi : x); return true; /* s: lo */
    case CN_OP_REMAINDER_SCALAR: *z = int_remainder(x, s); return true;
    case CN_OP_POW_SCALAR: *z = int_pow(x, s); return true;
    case CN_OP_BITWISE_AND_SCALAR: *z = x & s; return true;
    case CN_OP_BITWISE_OR_SCALAR: *z = x | s; return true;
    case CN_OP_BITWISE_XOR_SCALAR: *z = x ^ s; return true;
    case CN_OP_BITWISE_LEFT_SHIFT_SCALAR: *z = int_shl(x, s, bits); return true;
    case CN_OP_BITWISE_RIGHT_SHIFT_SCALAR: *z = int_shr(x, s, bits); return true;
    case CN_OP_EQ_SCALAR: *z = hi >= 0 ? hi : x == s; return true;
    case CN_OP_NE_SCALAR: *z = hi >= 0 ? hi : x != s; return true;
    case CN_OP_LT_SCALAR: *z = hi >= 0 ? hi : x < s; return true;
    case CN_OP_LE_SCALAR: *z = hi >= 0 ? hi : x <= s; return true;
    case CN_OP_GT_SCALAR: *z = hi >= 0 ? hi : x > s; return true;
    case CN_OP_GE_SCALAR: *z = hi >= 0 ? hi : x >= s; return true;
    default: return false;
    }
}

/* Float maximum/minimum propagate NaN. */
template <typename T> CU_HD bool binary_op(int op, T x, T y, T *z) {
    switch (op) {
    case CN_OP_ADD: *z = x + y; return true;
    case CN_OP_SUB: *z = x - y; return true;
    case CN_OP_MUL: *z = x * y; return true;
    case CN_OP_DIV: *z = x / y; return true;
    case CN_OP_POW: *z = m_pow(x, y); return true;
    case CN_OP_MAXIMUM: *z = (x != x || x > y) ? x : y; return true;
    case CN_OP_MINIMUM: *z = (x != x || x < y) ? x : y; return true;
    case CN_OP_ATAN2: *z = m_atan2(x, y); return true;
    case CN_OP_REMAINDER: *z = m_remainder(x, y); return true;
    case CN_OP_FMOD: *z = m_fmod(x, y); return true;
    case CN_OP_HYPOT: *z = m_hypot(x, y); return true;
    case CN_OP_PRELU: *z = x > (T)0 ? x : y * x; return true; /* y: the weight */
    default: return false;
    }
}

/* Integers in 64 bits; i32 results keep the low 32 bits, which is what 32-bit wrapping gives.
 * Division: the divisors were checked for zero; x / -1 is negation (wraps at the minimum). */
CU_HD bool binary_int_op(int op, int64_t x, int64_t y, int bits, int64_t *z) {
    switch (op) {
    case CN_OP_ADD: *z = (int64_t)((uint64_t)x + (uint64_t)y); return true;
    case CN_OP_SUB: *z = (int64_t)((uint64_t)x - (uint64_t)y); return true;
    case CN_OP_MUL: *z = (int64_t)((uint64_t)x * (uint64_t)y); return true;
    case CN_OP_DIV:
        *z = y == -1 ? (int64_t)(0ull - (uint64_t)x) : (y == 0 ? 0 : x / y);
        return true;
    case CN_OP_MAXIMUM: *z = x > y ? x : y; return true;
    case CN_OP_MINIMUM: *z = x < y ? x : y; return true;
    case CN_OP_REMAINDER: *z = int_remainder(x, y); return true;
    case CN_OP_POW: *z = int_pow(x, y); return true;
    case CN_OP_FMOD: *z = int_fmod(x, y); return true;
    case CN_OP_BITWISE_AND: *z = x & y; return true;
    case CN_OP_BITWISE_OR: *z = x | y; return true;
    case CN_OP_BITWISE_XOR: *z = x ^ y; return true;
    case CN_OP_BITWISE_LEFT_SHIFT: *z = int_shl(x, y, bits); return true;
    case CN_OP_BITWISE_RIGHT_SHIFT: *z = int_shr(x, y, bits); return true;
    default: return false;
    }
}

/* NaN compares unequal to everything. */
template <typename T> CU_HD bool compare_op(int op, T x, T y, uint8_t *z) {
    switch (op) {
    case CN_OP_EQ: *z = x == y; return true;
    case CN_OP_NE: *z = x != y; return true;
    case CN_OP_LT: *z = x < y; return true;
    case CN_OP_LE: *z = x <= y; return true;
    case CN_OP_GT: *z = x > y; return true;
    case CN_OP_GE: *z = x >= y; return true;
    default: return false;
    }
}

CU_HD bool logical_op(int op, uint8_t x, uint8_t y, uint8_t *z) {
    switch (op) {
    case CN_OP_LOGICAL_AND: *z = x & y; return true;
    case CN_OP_LOGICAL_OR: *z = x | y; return true;
    case CN_OP_LOGICAL_NOT: *z = !x; return true;
    case CN_OP_LOGICAL_XOR: *z = x ^ y; return true;
    default: return false;
    }
}

/* ---- kernels: the switches above over a strided iterator ------------------------------------ */

template <typename T> __global__ void unary_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        T x = cu_ld<T>(it.base[1] + off[1], p.dt_in), z = x;
        unary_op<T>(p.op, x, p.gelu_tanh, &z);
        cu_st<T>(it.base[0] + off[0], p.dt_out, z);
    }
}

template <typename T>
__global__ void unary_bool_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        uint8_t z = 0;
        unary_bool_op<T>(p.op, cu_ld<T>(it.base[1] + off[1], p.dt_in), &z);
        *(uint8_t *)(it.base[0] + off[0]) = z;
    }
}

__global__ void unary_int_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        int64_t x = cu_ld<int64_t>(it.base[1] + off[1], p.dt_in), z = x;
        unary_int_op(p.op, x, &z);
        cu_st<int64_t>(it.base[0] + off[0], p.dt_out, z);
    }
}

template <typename T> __global__ void scalar_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    const T s = (T)p.s0, hi = (T)p.s1;
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        T x = cu_ld<T>(it.base[1] + off[1], p.dt_in), z = x;
        scalar_op<T>(p.op, x, s, hi, &z);
        cu_st<T>(it.base[0] + off[0], p.dt_out, z);
    }
}

/* s as x's dtype holds it (f16 and bf16 round it, as PyTorch converts the scalar), so that
 * x == 0.1 is true where x holds 0.1 rounded. */
template <typename T>
__global__ void scalar_bool_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    T s = (T)p.s0;
    if (p.dt_in == CN_F16) s = (T)cu_f16_to_f32(cu_f32_to_f16((float)s));
    if (p.dt_in == CN_BF16) s = (T)cu_bf16_to_f32(cu_f32_to_bf16((float)s));
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        uint8_t z = 0;
        scalar_bool_op<T>(p.op, cu_ld<T>(it.base[1] + off[1], p.dt_in), s, &z);
        *(uint8_t *)(it.base[0] + off[0]) = z;
    }
}

__global__ void scalar_int_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[2];
        cu_offsets<2>(it, i, off);
        int64_t x = cu_ld<int64_t>(it.base[1] + off[1], p.dt_in), z = x;
        scalar_int_op(p.op, x, p.i0, p.i1, p.bits, &z);
        cu_st<int64_t>(it.base[0] + off[0], p.dt_out, z);
    }
}

template <typename T> __global__ void binary_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[3];
        cu_offsets<3>(it, i, off);
        T x = cu_ld<T>(it.base[1] + off[1], p.dt_in), y = cu_ld<T>(it.base[2] + off[2], p.dt_in);
        T z = x;
        binary_op<T>(p.op, x, y, &z);
        cu_st<T>(it.base[0] + off[0], p.dt_out, z);
    }
}

/* Binary float ops on dense f32 operands whose bases are 16-byte aligned: four elements a step
 * through float4 loads and stores, the rest (n % 4) by the first threads. One 4-byte access a
 * thread left the add of 4M-16M elements at 0.6 of PyTorch's on an H200 (docs/benchmarks.md). */
__global__ void binary_f32x4_kernel(float *out, const float *x, const float *y, int64_t n, int op) {
    int64_t n4 = n / 4;
    const float4 *x4 = (const float4 *)x, *y4 = (const float4 *)y;
    float4 *o4 = (float4 *)out;
    CU_GRID_LOOP(i, n4) {
        float4 a = x4[i], b = y4[i], z = a;
        binary_op<float>(op, a.x, b.x, &z.x);
        binary_op<float>(op, a.y, b.y, &z.y);
        binary_op<float>(op, a.z, b.z, &z.z);
        binary_op<float>(op, a.w, b.w, &z.w);
        o4[i] = z;
    }
    int64_t t = (int64_t)blockIdx.x * blockDim.x + threadIdx.x, j = n4 * 4 + t;
    if (j < n) {
        float z = x[j];
        binary_op<float>(op, x[j], y[j], &z);
        out[j] = z;
    }
}

template <typename T>
__global__ void act_backward_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[3];
        cu_offsets<3>(it, i, off);
        T g = cu_ld<T>(it.base[1] + off[1], p.dt_in), s = cu_ld<T>(it.base[2] + off[2], p.dt_in);
        T z = g;
        act_backward_op<T>((int)p.i0, g, s, p.gelu_tanh, &z);
        cu_st<T>(it.base[0] + off[0], p.dt_out, z);
    }
}

__global__ void binary_int_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[3];
        cu_offsets<3>(it, i, off);
        int64_t x = cu_ld<int64_t>(it.base[1] + off[1], p.dt_in);
        int64_t y = cu_ld<int64_t>(it.base[2] + off[2], p.dt_in), z = x;
        binary_int_op(p.op, x, y, p.bits, &z);
        cu_st<int64_t>(it.base[0] + off[0], p.dt_out, z);
    }
}

/* Sets *flag when operand 0 (an integer view) holds a zero. */
__global__ void find_zero_kernel(const __grid_constant__ cu_iter it, int dt, int64_t *flag) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[1];
        cu_offsets<1>(it, i, off);
        if (cu_load_i(it.base[0] + off[0], dt) == 0) *flag = 1;
    }
}

template <typename T> __global__ void compare_kernel(const __grid_constant__ cu_iter it, ew_params p) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[3];
        cu_offsets<3>(it, i, off);
        T x = cu_ld<T>(it.base[1] + off[1], p.dt_in), y = cu_ld<T>(it.base[2] + off[2], p.dt_in);
        uint8_t z = 0;
        compare_op<T>(p.op, x, y, &z);
        *(uint8_t *)(it.base[0] + off[0]) = z;
    }
}

__global__ void logical_kernel(const __grid_constant__ cu_iter it, int op) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[3];
        cu_offsets<3>(it, i, off);
        uint8_t x = *(const uint8_t *)(it.base[1] + off[1]) != 0, y = 0, z = 0;
        if (op != CN_OP_LOGICAL_NOT) y = *(const uint8_t *)(it.base[2] + off[2]) != 0;
        logical_op(op, x, y, &z);
        *(uint8_t *)(it.base[0] + off[0]) = z;
    }
}

/* out = cond ? a : b, moving es-byte words (any dtype of that size). */
__global__ void where_kernel(const __grid_constant__ cu_iter it, int es) {
    CU_GRID_LOOP(i, it.numel) {
        int64_t off[4];
        cu_offsets<4>(it, i, off);
        const char *src = *(const uint8_t *)(it.base[1] + off[1]) ? it.base[2] + off[2]
                                                                   : it.base[3] + off[3];
        cu_move(it.base[0] + off[0], src, es);
    }
}

/* ---- host entry points -------------------------------------------------------------------------- */

static int is_float_dt(cn_dtype dt) {
    return dt == CN_F32 || dt == CN_F64 || dt == CN_F16 || dt == CN_BF16;
}

static int is_int_dt(cn_dtype dt) { return dt == CN_I32 || dt == CN_I64; }

static cn_status unknown_op(const cn_kernel_args *a, const char *kernel) {
    return cn__kernel_op_error("cuda", kernel, a->op);
}

static cn_status bad_dtype(const cn_kernel_args *a, cn_dtype dt) {
    return cn__kernel_dtype_error("cuda", a->op, dt);
}

/* Builds the iterator over out[0] and the n inputs. */
static void make_iter(cu_iter *it, const cn_kernel_args *a, int n_in) {
    const cn_view *views[CU_ITER_MAX_OPS] = {&a->out[0]};
    for (int k = 0; k < n_in; k++) views[k + 1] = &a->in[k];
    cu_iter_init(it, n_in + 1, views);
}

/* The float kernel (T float or double) for dtype dt, launched over it. */
#define LAUNCH_FLOAT(KERNEL, dt, it, p)                                                         \
    do {                                                                                        \
        if ((dt) == CN_F64)                                                                     \
            KERNEL<double><<<cu_blocks((it).numel), CU_THREADS, 0, d->stream>>>(it, p);         \
        else                                                                                    \
            KERNEL<float><<<cu_blocks((it).numel), CU_THREADS, 0, d->stream>>>(it, p);          \
    } while (0)

extern "C" cn_status cuda_unary(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    double zf;
    int64_t zi;
    /* the switch the kernel runs, asked on the host whether it has the op */
    uint8_t zb;
    int to_bool = !is_int_dt(dt) && unary_bool_op<double>(a->op, 1.0, &zb); /* is_nan, is_inf */
    if (is_int_dt(dt) ? !unary_int_op(a->op, 1, &zi)
                      : !to_bool && !unary_op<double>(a->op, 1.0, 0, &zf))
        return unknown_op(a, "cuda_unary");
    if (!is_float_dt(dt) && !is_int_dt(dt)) return bad_dtype(a, dt);
    cu_iter it;
    make_iter(&it, a, 1);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    ew_params p = {};
    p.op = a->op;
    p.dt_in = dt;
    p.dt_out = a->out[0].dtype; /* dt, or bool for is_nan and is_inf */
    p.gelu_tanh = a->op == CN_OP_GELU && a->n_ints > 0 && a->ints[0] == CN_GELU_TANH;
    if (is_int_dt(dt))
        unary_int_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, p);
    else if (to_bool)
        LAUNCH_FLOAT(unary_bool_kernel, dt, it, p);
    else
        LAUNCH_FLOAT(unary_kernel, dt, it, p);
    return cu_check_launch(cn_op_name(a->op), "unary_kernel");
}

/* A double truncated toward zero and saturated to [lo, hi]; NaN gives 0 (as on the CPU). */
static int64_t to_int_sat(double v, int64_t lo, int64_t hi) {
    if (isnan(v)) return 0;
    if (v <= (double)lo) return lo;
    if (v >= (double)hi) return hi;
    return (int64_t)v;
}

extern "C" cn_status cuda_scalar(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    double zf;
    int64_t zi;
    uint8_t zb;
    int to_bool = scalar_bool_op<double>(a->op, 1.0, 1.0, &zb); /* the comparisons */
    if (is_int_dt(dt) ? !scalar_int_op(a->op, 1, 1, 1, 64, &zi)
                      : !to_bool && !scalar_op<double>(a->op, 1.0, 1.0, 1.0, &zf))
        return unknown_op(a, "cuda_scalar");
    if (!is_float_dt(dt) && !is_int_dt(dt)) return bad_dtype(a, dt);
    int need = a->op == CN_OP_CLAMP || a->op == CN_OP_SOFTPLUS ? 2 : 1;
    if (a->n_reals < need)
        return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                            "the kernel needs %d scalar argument(s) but got %d; call the op "
                            "through its cn_ function",
                            need, a->n_reals);
    ew_params p = {};
    p.op = a->op;
    p.dt_in = dt;
    p.dt_out = a->out[0].dtype; /* dt, or bool for the comparisons */
    p.s0 = a->reals[0];
    p.s1 = need > 1 ? a->reals[1] : 0.0;
    if (is_int_dt(dt)) { /* the integers inside [lo, hi] for clamp; truncation otherwise */
        int64_t lo = dt == CN_I32 ? INT32_MIN : INT64_MIN;
        int64_t hi = dt == CN_I32 ? INT32_MAX : INT64_MAX;
        if (a->op == CN_OP_CLAMP) {
            p.i0 = to_int_sat(ceil(p.s0), lo, hi);
            p.i1 = to_int_sat(floor(p.s1), lo, hi);
        } else if (to_bool) {
            p.i1 = cn__int_compare_bound((cn_op)a->op, p.s0, lo, hi, &p.i0);
        } else {
            p.i0 = to_int_sat(p.s0, lo, hi);
        }
        p.bits = dt == CN_I32 ? 32 : 64;
        if (a->op == CN_OP_REMAINDER_SCALAR && p.i0 == 0)
            return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op),
                                "integer division by zero: the scalar divisor s = %g is 0 in %s; "
                                "pass a nonzero s, or cast x to a float dtype to get NaN instead",
                                p.s0, cn_dtype_name(dt));
    }
    cu_iter it;
    make_iter(&it, a, 1);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    if (is_int_dt(dt))
        scalar_int_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, p);
    else if (to_bool)
        LAUNCH_FLOAT(scalar_bool_kernel, dt, it, p);
    else
        LAUNCH_FLOAT(scalar_kernel, dt, it, p);
    return cu_check_launch(cn_op_name(a->op), "scalar_kernel");
}

/* Integer division (div, remainder, fmod) checks every divisor before anything is written, so that a zero divisor is a
 * clean error as on the CPU (this waits for the GPU). */
static cn_status check_divisors(cu_dev *d, const cn_kernel_args *a) {
    const char *op = cn_op_name(a->op);
    const cn_view *divisor[1] = {&a->in[1]};
    cu_iter it;
    cu_iter_init(&it, 1, divisor);
    if (it.numel == 0) return CN_OK;
    int64_t *flag;
    cn_status s = cu_scratch(d, op, sizeof *flag, (void **)&flag);
    if (s != CN_OK) return s;
    int64_t found = 0;
    s = cu_check(op, cudaMemsetAsync(flag, 0, sizeof *flag, d->stream), "cudaMemsetAsync");
    if (s == CN_OK) {
        find_zero_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, a->in[1].dtype,
                                                                            flag);
        s = cu_check_launch(op, "find_zero_kernel");
    }
    if (s == CN_OK) s = cu_read_i64(d, op, flag, &found);
    cu_scratch_free(d, flag);
    if (s == CN_OK && found)
        s = cn_set_error(CN_ERR_INVALID_ARG, op,
                         "integer division by zero: the divisor (%s) has a zero element; mask "
                         "the zeros with cn_where, or cast both inputs to a float dtype to get "
                         "inf/nan instead",
                         cn_dtype_name(a->in[1].dtype));
    return s;
}

extern "C" cn_status cuda_binary(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    double zf;
    int64_t zi;
    if (is_int_dt(dt) ? !binary_int_op(a->op, 1, 1, 64, &zi)
                      : !binary_op<double>(a->op, 1.0, 1.0, &zf))
        return unknown_op(a, "cuda_binary");
    if (!is_float_dt(dt) && !is_int_dt(dt)) return bad_dtype(a, dt);
    cu_iter it;
    make_iter(&it, a, 2);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    ew_params p = {};
    p.op = a->op;
    p.dt_in = p.dt_out = dt;
    if (is_int_dt(dt)) {
        p.bits = dt == CN_I32 ? 32 : 64;
        if (a->op == CN_OP_DIV || a->op == CN_OP_REMAINDER || a->op == CN_OP_FMOD) {
            cn_status s = check_divisors(d, a);
            if (s != CN_OK) return s;
        }
        binary_int_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, p);
    } else if (dt == CN_F32 && cu_iter_dense(&it) &&
               (((uintptr_t)it.base[0] | (uintptr_t)it.base[1] | (uintptr_t)it.base[2]) & 15) == 0) {
        binary_f32x4_kernel<<<cu_blocks((it.numel + 3) / 4), CU_THREADS, 0, d->stream>>>(
            (float *)it.base[0], (const float *)it.base[1], (const float *)it.base[2], it.numel,
            p.op);
    } else {
        LAUNCH_FLOAT(binary_kernel, dt, it, p);
    }
    return cu_check_launch(cn_op_name(a->op), "binary_kernel");
}

extern "C" cn_status cuda_compare(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    uint8_t z;
    if (!compare_op<double>(a->op, 1.0, 1.0, &z)) return unknown_op(a, "cuda_compare");
    if ((int)dt < 0 || dt >= CN_DTYPE_COUNT) return bad_dtype(a, dt);
    cu_iter it;
    make_iter(&it, a, 2);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    ew_params p = {};
    p.op = a->op;
    p.dt_in = dt;
    p.dt_out = CN_BOOL;
    unsigned blocks = cu_blocks(it.numel);
    if (dt == CN_F64)
        compare_kernel<double><<<blocks, CU_THREADS, 0, d->stream>>>(it, p);
    else if (is_float_dt(dt)) /* f16/bf16 widen to float exactly */
        compare_kernel<float><<<blocks, CU_THREADS, 0, d->stream>>>(it, p);
    else
        compare_kernel<int64_t><<<blocks, CU_THREADS, 0, d->stream>>>(it, p);
    return cu_check_launch(cn_op_name(a->op), "compare_kernel");
}

extern "C" cn_status cuda_logical(const cn_kernel_args *a) {
    uint8_t z;
    if (!logical_op(a->op, 1, 1, &z)) return unknown_op(a, "cuda_logical");
    int unary = a->op == CN_OP_LOGICAL_NOT;
    cu_iter it;
    make_iter(&it, a, unary ? 1 : 2);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    logical_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, a->op);
    return cu_check_launch(cn_op_name(a->op), "logical_kernel");
}

/* linear_gelu's epilogue: y[i] = gelu(y[i]) and, when d is not NULL, d[i] = gelu'(y[i]) (of the
 * value before), over n dense values */
template <typename T> __global__ void gelu_inplace_kernel(T *y, T *d, int64_t n, int tanh_form) {
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)blockDim.x * gridDim.x) {
        T x = y[i], z;
        if (d) {
            act_backward_op<T>(CN_OP_GELU, (T)1, x, tanh_form, &z);
            d[i] = z;
        }
        y[i] = gelu<T>(x, tanh_form);
    }
}

/* out[0] (dense f32 or f64) through gelu in place, gelu' into out[1] when ints[1] asks for it;
 * ints[0] = cn_gelu_approx (cuda_linear_gelu, after the product and the bias) */
extern "C" cn_status cuda_gelu_epilogue(const cn_kernel_args *a) {
    const cn_view *y = &a->out[0];
    cn_dtype dt = y->dtype;
    if (dt != CN_F32 && dt != CN_F64) return bad_dtype(a, dt);
    int64_t n = 1;
    for (int i = 0; i < y->ndim; i++) n *= y->shape[i];
    if (n == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    int tanh_form = a->ints[0] == CN_GELU_TANH;
    void *dd = a->ints[1] && a->n_out > 1 ? a->out[1].data : NULL;
    if (dt == CN_F32)
        gelu_inplace_kernel<float><<<cu_blocks(n), CU_THREADS, 0, d->stream>>>(
            (float *)y->data, (float *)dd, n, tanh_form);
    else
        gelu_inplace_kernel<double><<<cu_blocks(n), CU_THREADS, 0, d->stream>>>(
            (double *)y->data, (double *)dd, n, tanh_form);
    return cu_check_launch(cn_op_name(a->op), "gelu_inplace_kernel");
}

/* in[0] g, in[1] s -> out[0]; ints[0] the forward op, ints[1] cn_gelu_approx. */
extern "C" cn_status cuda_activation_backward(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    double zf;
    if (a->n_ints < 2 || !act_backward_op<double>((int)a->ints[0], 1.0, 1.0, 0, &zf))
        return cn_set_error(CN_ERR_INVALID_ARG, "activation_backward",
                            "ints[0] is not an activation this kernel differentiates (relu, "
                            "tanh, sigmoid, silu, gelu, hard_sigmoid, log_sigmoid, hard_swish); "
                            "backward formulas call it");
    if (!is_float_dt(dt)) return bad_dtype(a, dt);
    cu_iter it;
    make_iter(&it, a, 2);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    ew_params p = {};
    p.op = a->op;
    p.dt_in = p.dt_out = dt;
    p.i0 = a->ints[0];
    p.gelu_tanh = a->ints[1] == CN_GELU_TANH;
    LAUNCH_FLOAT(act_backward_kernel, dt, it, p);
    return cu_check_launch(cn_op_name(a->op), "act_backward_kernel");
}

extern "C" cn_status cuda_where(const cn_kernel_args *a) {
    cn_dtype dt = a->in[1].dtype;
    size_t es = cn_dtype_size(dt);
    if (es == 0) return bad_dtype(a, dt);
    cu_iter it;
    make_iter(&it, a, 3);
    if (it.numel == 0) return CN_OK;
    cu_dev *d = cu_device(cn_op_name(a->op), a->device);
    if (!d) return cn_last_status();
    where_kernel<<<cu_blocks(it.numel), CU_THREADS, 0, d->stream>>>(it, (int)es);
    return cu_check_launch(cn_op_name(a->op), "where_kernel");
}
