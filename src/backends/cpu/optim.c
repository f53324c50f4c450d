/* The CPU's fused optimizer kernels: sgd_step, torch.optim.SGD's update of one parameter in one
 * pass over p, g and the momentum buffer, and adamw_step, torch.optim.AdamW's over p, g and the
 * two averages, in place (the contracts are in cinder/backend.h).
 *
 * The operands go through the strided iterator (strided.c, cpu_map) as (p, g[, buf]) or (p, g, m,
 * v): p is operand 0, the "output", and the state is read and written like p. Every element is
 * read and then written by the same row call, so updating in place is safe. Dense runs take loops
 * over restrict pointers (the router guarantees that no two operands share memory) that the
 * compiler vectorises; f32 is computed in float with float coefficients, as PyTorch does, f64 in
 * double. */

/* As in elementwise.c: nothing reads floating-point exception flags, and this lets gcc vectorise
 * the loops below (with -fno-math-errno, CMakeLists.txt, for AdamW's sqrt). */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

typedef struct sgd_ctx {
    double lr, momentum, dampening, weight_decay;
    int nesterov, first, has_buf;
} sgd_ctx;

/* ---- row functions ----------------------------------------------------------------------------
 * ptrs = (p, g[, buf]). The flags are the same for every element, so each loop's branches are
 * invariant and the compiler unswitches them. Weight decay is skipped, not multiplied by 0, when
 * it is 0, so an inf in p does not turn the gradient into NaN (PyTorch skips it too). */

static void sgd_row_f32(char **ptrs, const int64_t *step, int64_t n, const void *vctx) {
    const sgd_ctx *c = vctx;
    const float lr = (float)c->lr, wd = (float)c->weight_decay, mom = (float)c->momentum;
    const float keep = (float)(1.0 - c->dampening);
    const int decay = c->weight_decay != 0, nesterov = c->nesterov, first = c->first;
    const int64_t es = (int64_t)sizeof(float);
    if (!c->has_buf) {
        if (step[0] == es && step[1] == es) {
            float *restrict p = (float *)ptrs[0];
            const float *restrict g = (const float *)ptrs[1];
            for (int64_t i = 0; i < n; i++) {
                float gi = decay ? g[i] + wd * p[i] : g[i];
                p[i] = p[i] - lr * gi;
            }
            return;
        }
        for (int64_t i = 0; i < n; i++) {
            float *p = (float *)(ptrs[0] + i * step[0]);
            float g = *(const float *)(ptrs[1] + i * step[1]);
            float gi = decay ? g + wd * *p : g;
            *p = *p - lr * gi;
        }
        return;
    }
    if (step[0] == es && step[1] == es && step[2] == es) {
        float *restrict p = (float *)ptrs[0];
        const float *restrict g = (const float *)ptrs[1];
        float *restrict b = (float *)ptrs[2];
        for (int64_t i = 0; i < n; i++) {
            float gi = decay ? g[i] + wd * p[i] : g[i];
            float bi = first ? gi : mom * b[i] + keep * gi;
            b[i] = bi;
            p[i] = p[i] - lr * (nesterov ? gi + mom * bi : bi);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        float *p = (float *)(ptrs[0] + i * step[0]);
        float *b = (float *)(ptrs[2] + i * step[2]);
        float g = *(const float *)(ptrs[1] + i * step[1]);
        float gi = decay ? g + wd * *p : g;
        float bi = first ? gi : mom * *b + keep * gi;
        *b = bi;
        *p = *p - lr * (nesterov ? gi + mom * bi : bi);
    }
}

static void sgd_row_f64(char **ptrs, const int64_t *step, int64_t n, const void *vctx) {
    const sgd_ctx *c = vctx;
    const double lr = c->lr, wd = c->weight_decay, mom = c->momentum, keep = 1.0 - c->dampening;
    const int decay = c->weight_decay != 0, nesterov = c->nesterov, first = c->first;
    const int64_t es = (int64_t)sizeof(double);
    if (!c->has_buf) {
        if (step[0] == es && step[1] == es) {
            double *restrict p = (double *)ptrs[0];
            const double *restrict g = (const double *)ptrs[1];
            for (int64_t i = 0; i < n; i++) {
                double gi = decay ? g[i] + wd * p[i] : g[i];
                p[i] = p[i] - lr * gi;
            }
            return;
        }
        for (int64_t i = 0; i < n; i++) {
            double *p = (double *)(ptrs[0] + i * step[0]);
            double g = *(const double *)(ptrs[1] + i * step[1]);
            double gi = decay ? g + wd * *p : g;
            *p = *p - lr * gi;
        }
        return;
    }
    if (step[0] == es && step[1] == es && step[2] == es) {
        double *restrict p = (double *)ptrs[0];
        const double *restrict g = (const double *)ptrs[1];
        double *restrict b = (double *)ptrs[2];
        for (int64_t i = 0; i < n; i++) {
            double gi = decay ? g[i] + wd * p[i] : g[i];
            double bi = first ? gi : mom * b[i] + keep * gi;
            b[i] = bi;
            p[i] = p[i] - lr * (nesterov ? gi + mom * bi : bi);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        double *p = (double *)(ptrs[0] + i * step[0]);
        double *b = (double *)(ptrs[2] + i * step[2]);
        double g = *(const double *)(ptrs[1] + i * step[1]);
        double gi = decay ? g + wd * *p : g;
        double bi = first ? gi : mom * *b + keep * gi;
        *b = bi;
        *p = *p - lr * (nesterov ? gi + mom * bi : bi);
    }
}

/* ---- dense operands: a fixed part per core --------------------------------------------------- *
 * A step's parameter, gradient and state are each read and written once, so the update runs at
 * the speed the data comes from: the MLP's first weight matrix with its gradient and momentum is
 * 2.4 MB, more than a core's private cache, and through the strided iterator the chunk that a core
 * updated in one step went to either core in the next. Dense operands go instead to cpu_map_dense,
 * whose parts each core takes step after step, as it does the forward's and the weight gradient's
 * blocks of rows (gemm.c, cn_cpu_parallel_for). Each element's update is the same whichever thread
 * runs it. */

/* Dense parameters from this many elements are split over the threads: 16K, not the 64K of
 * elementwise ops, since an update streams two or three operands in and out (the MLP's second
 * weight, 32K elements, was updated by the main thread alone while the other core waited; on
 * Zen 4 at 2 threads the optimizer phase of its epoch fell in 4 of 5 alternated series, e.g.
 * 0.029 -> 0.024 s; docs/benchmarks.md). */
#define OPTIM_SPLIT_FROM 16384

/* cpu_map for the optimizers' operands (p first, as cpu_map takes them). */
static void optim_map(int nops, const cn_view *const *views, cpu_row_fn fn, const void *ctx) {
    int dense;
    int64_t n = cpu_count_dense(nops, views, &dense);
    if (dense)
        cpu_map_dense(nops, views, n, OPTIM_SPLIT_FROM, fn, ctx);
    else
        cpu_map(nops, views, fn, ctx);
}

/* ---- the kernel ------------------------------------------------------------------------------ */

cn_status cpu_sgd_step(const cn_kernel_args *a) {
    int has_buf = a->n_in == 3;
    /* the arity, the attributes and the in-place outputs are the router's (dispatch/ops_optim.c) */
    cn_dtype dt = a->in[0].dtype; /* one for all operands (the router's) */
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", a->op, dt);
    sgd_ctx c = {.lr = a->reals[0],
                 .momentum = a->reals[1],
                 .dampening = a->reals[2],
                 .weight_decay = a->reals[3],
                 .nesterov = a->ints[0] != 0,
                 .first = a->ints[1] != 0,
                 .has_buf = has_buf};
    /* p is operand 0; buf, written like p, rides along as an input view of the same memory */
    const cn_view *views[3] = {&a->out[0], &a->in[1], has_buf ? &a->out[1] : NULL};
    optim_map(has_buf ? 3 : 2, views, dt == CN_F32 ? sgd_row_f32 : sgd_row_f64, &c);
    return CN_OK;
}

/* ---- AdamW ----------------------------------------------------------------------------------- */

typedef struct adamw_ctx {
    double decay;     /* 1 - lr * weight_decay */
    double step_size; /* lr / bc1 */
    double bc2_sqrt;  /* sqrt(bc2) */
    double beta1, beta2, eps;
    int has_decay, first;
} adamw_ctx;

/* One element, in PyTorch's order of operations (torch.optim.adamw, single tensor): the decay
 * (a factor of exactly 1 without weight decay), exp_avg.lerp_(g, 1 - beta1),
 * exp_avg_sq.mul_(beta2).addcmul_(g, g, 1 - beta2), then p.addcdiv_(exp_avg, sqrt(exp_avg_sq) /
 * sqrt(bc2) + eps, -step_size). On the first step the averages start at zero and are not read
 * (they hold whatever cn_empty gave). */
#define ADAMW_ELEM(T, SQRT, P, G, M, V, FIRST)                                                      \
    do {                                                                                           \
        const T g_ = (G);                                                                          \
        const T m_ = (FIRST) ? w1 * g_ : (M) + w1 * (g_ - (M));                                    \
        const T v_ = (FIRST) ? w2 * g_ * g_ : b2 * (V) + w2 * g_ * g_;                             \
        (M) = m_;                                                                                  \
        (V) = v_;                                                                                  \
        (P) = (P) * decay - step_size * (m_ / (SQRT(v_) / bc2_sqrt + eps));                        \
    } while (0)

/* Each loop has its flag fixed, so the dense ones have no branch and vectorise. */
#define DEF_ADAMW_ROW(T, SUF, SQRT)                                                                \
    static void adamw_row_##SUF(char **ptrs, const int64_t *step, int64_t n, const void *vctx) {  \
        const adamw_ctx *c = vctx;                                                                 \
        const T decay = c->has_decay ? (T)c->decay : (T)1, step_size = (T)c->step_size;           \
        const T bc2_sqrt = (T)c->bc2_sqrt, eps = (T)c->eps;                                        \
        const T w1 = (T)(1.0 - c->beta1), b2 = (T)c->beta2, w2 = (T)(1.0 - c->beta2);             \
        const int64_t es = (int64_t)sizeof(T);                                                     \
        if (step[0] == es && step[1] == es && step[2] == es && step[3] == es) {                    \
            T *restrict p = (T *)ptrs[0], *restrict m = (T *)ptrs[2], *restrict v = (T *)ptrs[3];  \
            const T *restrict g = (const T *)ptrs[1];                                              \
            if (c->first)                                                                          \
                for (int64_t i = 0; i < n; i++) ADAMW_ELEM(T, SQRT, p[i], g[i], m[i], v[i], 1);       \
            else                                                                                   \
                for (int64_t i = 0; i < n; i++) ADAMW_ELEM(T, SQRT, p[i], g[i], m[i], v[i], 0);       \
            return;                                                                                \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T *p = (T *)(ptrs[0] + i * step[0]), *m = (T *)(ptrs[2] + i * step[2]);                \
            T *v = (T *)(ptrs[3] + i * step[3]);                                                   \
            ADAMW_ELEM(T, SQRT, *p, *(const T *)(ptrs[1] + i * step[1]), *m, *v, c->first);           \
        }                                                                                          \
    }

DEF_ADAMW_ROW(float, f32, sqrtf)
DEF_ADAMW_ROW(double, f64, sqrt)

cn_status cpu_adamw_step(const cn_kernel_args *a) {
    /* the arity, the attributes and the in-place outputs are the router's (dispatch/ops_optim.c) */
    cn_dtype dt = a->in[0].dtype;
    if (dt != CN_F32 && dt != CN_F64) /* unreachable through the router: dtypes[op] (backend.c) */
        return cn__kernel_dtype_error("cpu", a->op, dt);
    const double lr = a->reals[0], b1 = a->reals[1], b2 = a->reals[2], wd = a->reals[4];
    const double steps = (double)a->ints[0];
    adamw_ctx c = {.decay = 1.0 - lr * wd,
                   .step_size = lr / (1.0 - pow(b1, steps)),
                   .bc2_sqrt = sqrt(1.0 - pow(b2, steps)),
                   .beta1 = b1,
                   .beta2 = b2,
                   .eps = a->reals[3],
                   .has_decay = wd != 0,
                   .first = a->ints[1] != 0};
    /* p is operand 0; the averages, written like p, ride along as views of their memory */
    const cn_view *views[4] = {&a->out[0], &a->in[1], &a->out[1], &a->out[2]};
    optim_map(4, views, dt == CN_F32 ? adamw_row_f32 : adamw_row_f64, &c);
    return CN_OK;
}
