/* The fused backward of the activations: out = g * f'(s) in one pass over memory, where the
 * composed formula runs two to ten elementwise ops (a compare, a cast and a multiply for relu).
 * s is what the forward saved: its output for relu, tanh and sigmoid, its input for silu, gelu,
 * hard_sigmoid, log_sigmoid and hard_swish. ints[0] names the forward op, ints[1] the gelu
 * approximation.
 *
 * The strided iterator (strided.c) calls a row function on runs of elements; each has a dense
 * path the compiler vectorises (f32: exp through exp_f32, gelu's erf and sigmoid through
 * cpu_math.h; f64 stays on libm). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math") /* vectorises the selects, as in elementwise.c */
#endif

#include <math.h>
#include <stdatomic.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/gelu_math.h"
#include "cinder/ops.h" /* cn_gelu_approx */
#include "core/backend_common.h"

typedef struct act_ctx {
    int act;  /* the forward op */
    int tanh; /* gelu: the tanh approximation */
} act_ctx;

/* out[i] = EXPR(g, s) over a run; operands 0 out, 1 g, 2 s. */
#define ACT_LOOP(T, EXPR)                                                                      \
    do {                                                                                       \
        if (step[0] == (int64_t)sizeof(T) && step[1] == (int64_t)sizeof(T) &&                  \
            step[2] == (int64_t)sizeof(T)) {                                                   \
            T *restrict o_ = (T *)ptrs[0];                                                     \
            const T *restrict g_ = (const T *)ptrs[1], *restrict s_ = (const T *)ptrs[2];      \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const T g = g_[i_], s = s_[i_];                                                \
                o_[i_] = (EXPR);                                                               \
            }                                                                                  \
        } else {                                                                               \
            for (int64_t i_ = 0; i_ < n; i_++) {                                               \
                const T g = *(const T *)(ptrs[1] + i_ * step[1]);                              \
                const T s = *(const T *)(ptrs[2] + i_ * step[2]);                              \
                *(T *)(ptrs[0] + i_ * step[0]) = (EXPR);                                       \
            }                                                                                  \
        }                                                                                      \
    } while (0)

/* silu'(x) = sig (1 + x (1 - sig)), sig = 1 / (1 + e^-x) (e^-x = inf gives sig = 0). */
static inline float silu_grad_f32(float x) {
    float sig = 1.0f / (1.0f + exp_f32(-x));
    return sig * (1.0f + x * (1.0f - sig));
}

static inline double silu_grad_f64(double x) {
    double sig = 1.0 / (1.0 + exp(-x));
    return sig * (1.0 + x * (1.0 - sig));
}

/* log_sigmoid'(x) = sigmoid(-x) = e / (1 + e) for x > 0, 1 / (1 + e) otherwise, e = e^-|x|: no
 * overflow for any x. */
static inline float log_sigmoid_grad_f32(float x) {
    float e = exp_f32(-fabsf(x));
    return (x > 0.0f ? e : 1.0f) / (1.0f + e);
}

static inline double log_sigmoid_grad_f64(double x) {
    double e = exp(-fabs(x));
    return (x > 0.0 ? e : 1.0) / (1.0 + e);
}

/* hard_sigmoid' = 1/6 inside (-3, 3); hard_swish' = 0 below -3, x/3 + 1/2 up to 3, then 1 (as
 * PyTorch's hardsigmoid_backward and hardswish_backward). */
#define HARD_SIGMOID_GRAD(T, g, s) ((s) > (T)-3 && (s) < (T)3 ? (g) * ((T)1 / (T)6) : (T)0)
#define HARD_SWISH_GRAD(T, g, s)                                                               \
    ((s) < (T)-3 ? (T)0 : (s) <= (T)3 ? (g) * ((s) / (T)3 + (T)0.5) : (g))

CPU_CLONES_EXP static void silu_row_f32(char **ptrs, const int64_t *step, int64_t n) {
    ACT_LOOP(float, g * silu_grad_f32(s));
}

CPU_CLONES_EXP static void log_sigmoid_row_f32(char **ptrs, const int64_t *step, int64_t n) {
    ACT_LOOP(float, g * log_sigmoid_grad_f32(s));
}

/* gelu's f32 loops, compiled for AVX2 (with FMA) and AVX-512 as well (elementwise.c's forward
 * likewise) */
CPU_CLONES_EXP static void gelu_row_f32(char **ptrs, const int64_t *step, int64_t n,
                                        int tanh_form) {
    if (tanh_form)
        ACT_LOOP(float, g * gelu_grad_f32(s, 1));
    else
        ACT_LOOP(float, g * gelu_grad_f32(s, 0));
}

static void act_f32(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const act_ctx *c = ctx;
    switch (c->act) {
    case CN_OP_RELU: ACT_LOOP(float, s > 0.0f ? g : 0.0f); break;
    case CN_OP_TANH: ACT_LOOP(float, g * (1.0f - s * s)); break;
    case CN_OP_SIGMOID: ACT_LOOP(float, g * s * (1.0f - s)); break;
    case CN_OP_SILU: silu_row_f32(ptrs, step, n); break;
    case CN_OP_GELU: gelu_row_f32(ptrs, step, n, c->tanh); break;
    case CN_OP_HARD_SIGMOID: ACT_LOOP(float, HARD_SIGMOID_GRAD(float, g, s)); break;
    case CN_OP_LOG_SIGMOID: log_sigmoid_row_f32(ptrs, step, n); break;
    case CN_OP_HARD_SWISH: ACT_LOOP(float, HARD_SWISH_GRAD(float, g, s)); break;
    default: break; /* refused before the run (cpu_activation_backward) */
    }
}

static void act_f64(char **ptrs, const int64_t *step, int64_t n, const void *ctx) {
    const act_ctx *c = ctx;
    switch (c->act) {
    case CN_OP_RELU: ACT_LOOP(double, s > 0.0 ? g : 0.0); break;
    case CN_OP_TANH: ACT_LOOP(double, g * (1.0 - s * s)); break;
    case CN_OP_SIGMOID: ACT_LOOP(double, g * s * (1.0 - s)); break;
    case CN_OP_SILU: ACT_LOOP(double, g * silu_grad_f64(s)); break;
    case CN_OP_GELU: ACT_LOOP(double, g * gelu_grad_f64(s, c->tanh)); break;
    case CN_OP_HARD_SIGMOID: ACT_LOOP(double, HARD_SIGMOID_GRAD(double, g, s)); break;
    case CN_OP_LOG_SIGMOID: ACT_LOOP(double, g * log_sigmoid_grad_f64(s)); break;
    case CN_OP_HARD_SWISH: ACT_LOOP(double, HARD_SWISH_GRAD(double, g, s)); break;
    default: break;
    }
}

/* Whether act is an activation this kernel differentiates. */
static int known_activation(int64_t act) {
    return act == CN_OP_RELU || act == CN_OP_TANH || act == CN_OP_SIGMOID || act == CN_OP_SILU ||
           act == CN_OP_GELU || act == CN_OP_HARD_SIGMOID || act == CN_OP_LOG_SIGMOID ||
           act == CN_OP_HARD_SWISH;
}

/* in[0] g, in[1] s -> out[0], one float dtype. */
cn_status cpu_activation_backward(const cn_kernel_args *a) {
    cn_dtype dt = a->in[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) return cn__kernel_dtype_error("cpu", a->op, dt);
    if (a->n_ints < 2 || !known_activation(a->ints[0]))
        return cn_set_error(CN_ERR_INVALID_ARG, "activation_backward",
                            "ints[0] (%lld) is not an activation this kernel differentiates "
                            "(relu, tanh, sigmoid, silu, gelu, hard_sigmoid, log_sigmoid, "
                            "hard_swish); backward formulas call it",
                            a->n_ints > 0 ? (long long)a->ints[0] : -1LL);
    act_ctx c = {.act = (int)a->ints[0], .tanh = a->ints[1] == CN_GELU_TANH};
    const cn_view *views[3] = {&a->out[0], &a->in[0], &a->in[1]};
    cpu_map(3, views, dt == CN_F32 ? act_f32 : act_f64, &c);
    return CN_OK;
}
