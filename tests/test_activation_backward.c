/* The fused backward of the activations (CN_OP_ACTIVATION_BACKWARD): the gradient of sum(w * f(x))
 * through relu, tanh, sigmoid, silu, gelu (both forms), hard_sigmoid, log_sigmoid and hard_swish,
 * in f32 and f64, on a strided input,
 * against the derivative written out in double here; the same on a backend without the fused
 * kernel (a program's, written before it), where the formula composes public ops instead; and
 * the kernel's refusal of an activation it does not know. The fused kernel is the one that runs
 * on the CPU: a counting backend sees it called. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cinder/autodiff.h"
#include "cinder/backend.h"
#include "cinder/cinder.h"
#include "dispatch/backward_ops.h"
#include "harness.h"

#define N_ACTS 9
#define ROWS 5
#define COLS 7

typedef struct act {
    const char *name;
    cn_op op;
    int approx;
} act;

static const act acts[N_ACTS] = {
    {"relu", CN_OP_RELU, 0},    {"tanh", CN_OP_TANH, 0}, {"sigmoid", CN_OP_SIGMOID, 0},
    {"silu", CN_OP_SILU, 0},    {"gelu_erf", CN_OP_GELU, CN_GELU_ERF},
    {"gelu_tanh", CN_OP_GELU, CN_GELU_TANH},
    {"hard_sigmoid", CN_OP_HARD_SIGMOID, 0}, {"log_sigmoid", CN_OP_LOG_SIGMOID, 0},
    {"hard_swish", CN_OP_HARD_SWISH, 0},
};

static cn_tensor *apply(const act *a, cn_tensor *x) {
    switch (a->op) {
    case CN_OP_RELU: return cn_relu(x);
    case CN_OP_TANH: return cn_tanh(x);
    case CN_OP_SIGMOID: return cn_sigmoid(x);
    case CN_OP_SILU: return cn_silu(x);
    case CN_OP_HARD_SIGMOID: return cn_hard_sigmoid(x);
    case CN_OP_LOG_SIGMOID: return cn_log_sigmoid(x);
    case CN_OP_HARD_SWISH: return cn_hard_swish(x);
    default: return cn_gelu(x, (cn_gelu_approx)a->approx);
    }
}

/* f'(x) in double, written out from the definitions. */
static double derivative(const act *a, double x) {
    const double pi = 3.14159265358979323846;
    switch (a->op) {
    case CN_OP_RELU: return x > 0 ? 1 : 0;
    case CN_OP_TANH: return 1 - tanh(x) * tanh(x);
    case CN_OP_SIGMOID: {
        double s = 1 / (1 + exp(-x));
        return s * (1 - s);
    }
    case CN_OP_SILU: {
        double s = 1 / (1 + exp(-x));
        return s + x * s * (1 - s);
    }
    /* the inputs keep off +-3, where the hard ones have their kinks */
    case CN_OP_HARD_SIGMOID: return fabs(x) < 3 ? 1.0 / 6 : 0;
    case CN_OP_LOG_SIGMOID: return 1 / (1 + exp(x)); /* sigmoid(-x); x within [-6, 6] */
    case CN_OP_HARD_SWISH: return x < -3 ? 0 : x <= 3 ? 2 * x / 6 + 0.5 : 1;
    default:
        if (a->approx == CN_GELU_TANH) {
            double k = sqrt(2 / pi), c = 0.044715, t = tanh(k * (x + c * x * x * x));
            return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * c * x * x);
        }
        return 0.5 * (1 + erf(x / sqrt(2))) + x * exp(-0.5 * x * x) / sqrt(2 * pi);
    }
}

/* x[i] spread over [-6, 6] (both tails of the sigmoids, relu's two sides; no exact 0), w[i] in
 * [-1, 1]. x is given transposed ([COLS, ROWS] -> a strided [ROWS, COLS] view). */
static void inputs(double *xt, double *w) {
    for (int i = 0; i < ROWS * COLS; i++) {
        xt[i] = -6.0 + 12.0 * (i + 0.5) / (ROWS * COLS) + 0.013 * (i % 3);
        w[i] = cos(1.7 * i);
    }
}

/* The gradient of sum(w * f(x)) on `dev` for activation a in dtype dt, checked elementwise. */
static void check_gradient(const act *a, cn_dtype dt, cn_device dev, const char *where) {
    cn_scope_begin();
    double xt[ROWS * COLS], w[ROWS * COLS], want[ROWS * COLS];
    inputs(xt, w);
    const int64_t ts[2] = {COLS, ROWS}, s[2] = {ROWS, COLS};
    cn_tensor *x0 = cn_transpose(cn_to_device(th_tensor(xt, ts, 2, dt), dev), 0, 1);
    cn_tensor *x = cn_require_grad(cn_from_inner(x0, cn_autodiff(dev)));
    cn_tensor *wt = cn_to_device(th_tensor(w, s, 2, dt), dev);
    cn_tensor *loss = cn_sum(cn_mul(apply(a, x), cn_from_inner(wt, cn_autodiff(dev))));
    cn_grads *g = cn_backward(loss);
    CHECK(g != NULL);
    double xv[ROWS * COLS];
    CHECK(th_read(cn_inner(x), xv) == ROWS * COLS); /* x as rounded to dt, row-major */
    for (int i = 0; i < ROWS * COLS; i++) {
        double wi = dt == CN_F32 ? (double)(float)w[i] : w[i];
        want[i] = wi * derivative(a, xv[i]);
    }
    char what[96];
    snprintf(what, sizeof what, "d/dx %s %s on %s", a->name, cn_dtype_name(dt), where);
    th_check_values(what, g ? cn_grad(g, x) : NULL, want, ROWS * COLS,
                    dt == CN_F32 ? 2e-6 : 1e-13);
    cn_grads_free(g);
    cn_scope_end();
}

static void test_fused_gradients_match_the_derivatives(void) {
    for (int k = 0; k < N_ACTS; k++) {
        check_gradient(&acts[k], CN_F32, cn_cpu(), "cpu");
        check_gradient(&acts[k], CN_F64, cn_cpu(), "cpu");
    }
}

/* ---- backends with and without the kernel -------------------------------------------------- */

static const cn_backend *cpu_table;
static int64_t fused_calls;

static cn_status counting_kernel(const cn_kernel_args *a) {
    if (a->op == CN_OP_ACTIVATION_BACKWARD) fused_calls++;
    return cpu_table->kernels[a->op](a);
}

/* The CPU's kernels behind a counter; `without` drops the fused kernel, as a program's backend
 * written before it would lack it. Registered once (the registry lives as long as the process). */
static cn_device forwarding_device(int without) {
    static int ids[2] = {-1, -1};
    if (ids[without] < 0) {
        cpu_table = cn_backend_get(CN_BACKEND_CPU);
        cn_backend b = *cpu_table;
        b.name = without ? "cpu_without_activation_backward" : "cpu_counting_activations";
        for (int op = 0; op < CN_OP_COUNT; op++)
            b.kernels[op] = cpu_table->kernels[op] ? counting_kernel : NULL;
        if (without) b.kernels[CN_OP_ACTIVATION_BACKWARD] = NULL;
        ids[without] = cn_backend_register(&b);
        CHECK(ids[without] > 0);
    }
    cn_device d = {(int16_t)ids[without], 0, 0, 0};
    return d;
}

static void test_the_fused_kernel_runs_where_the_backend_has_it(void) {
    for (int k = 0; k < N_ACTS; k++) {
        int64_t before = fused_calls;
        check_gradient(&acts[k], CN_F64, forwarding_device(0), "a counting backend");
        CHECK(fused_calls == before + 1);
    }
}

static void test_a_backend_without_it_gets_the_composed_formula(void) {
    for (int k = 0; k < N_ACTS; k++) {
        int64_t before = fused_calls;
        check_gradient(&acts[k], CN_F32, forwarding_device(1), "a backend without it");
        check_gradient(&acts[k], CN_F64, forwarding_device(1), "a backend without it");
        CHECK(fused_calls == before);
    }
}

static void test_an_unknown_activation_is_refused(void) {
    cn_scope_begin();
    const double v[3] = {1, -2, 3};
    const int64_t s[1] = {3};
    cn_tensor *g = th_tensor(v, s, 1, CN_F32), *x = th_tensor(v, s, 1, CN_F32);
    CHECK_FAILS(cn__activation_backward(g, x, CN_OP_EXP, 0), CN_ERR_INVALID_ARG,
                "not an activation");
    th_check_values("g untouched", g, v, 3, 0);
    cn_scope_end();
}

int main(void) {
    RUN(test_fused_gradients_match_the_derivatives);
    RUN(test_the_fused_kernel_runs_where_the_backend_has_it);
    RUN(test_a_backend_without_it_gets_the_composed_formula);
    RUN(test_an_unknown_activation_is_refused);
    return th_finish();
}
