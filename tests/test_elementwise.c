/* Elementwise ops, cast, copy and fill on the CPU, through the public API, against references
 * written here: double-precision loops over libm, C's own operators, or values worked out by
 * hand (f16/bf16 bit patterns). Covers f32, f64, i32, i64 (and u8/bool where the op takes them),
 * broadcasting, transposed and stepped-slice inputs, runs long enough to be split across
 * threads, numerical edge cases (sigmoid far out, NaN, integer wrap-around, float-to-int
 * truncation and saturation), and the errors the kernels raise. A few tests call the CPU kernels
 * directly (through the backend table) to reach strided outputs, which no public op creates. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_math.h" /* exp_f32 as the baseline build compiles it */
#include "harness.h"

/* ---- helpers ------------------------------------------------------------------------------- */

#define N_OF(a) ((int64_t)(sizeof(a) / sizeof(*(a))))

static cn_tensor *vec(const double *v, int64_t n, cn_dtype dt) {
    int64_t shape[1] = {n};
    return th_tensor(v, shape, 1, dt);
}

/* The value a double takes once stored as dt (the test's inputs are rounded this way first, so
 * references see the same inputs as the kernels). */
static double as_dtype(double x, cn_dtype dt) {
    return dt == CN_F32 ? (double)(float)x : x;
}

/* A cpu kernel called directly, for views no public op produces. */
static cn_status call_kernel(cn_op op, const cn_view *in, int n_in, const cn_view *out,
                             const int64_t *ints, int n_ints, const double *reals, int n_reals) {
    const cn_backend *cpu = cn_backend_get(CN_BACKEND_CPU);
    cn_kernel_args a = {.op = op, .n_in = n_in, .in = in, .n_out = 1, .out = out,
                        .n_ints = n_ints, .ints = ints, .n_reals = n_reals, .reals = reals,
                        .ctx = cpu->ctx};
    return cpu->kernels[op](&a);
}

static cn_view view_of(void *data, cn_dtype dt, int ndim, const int64_t *shape,
                       const int64_t *strides) {
    cn_view v = {.data = data, .dtype = dt, .ndim = ndim};
    for (int d = 0; d < ndim; d++) {
        v.shape[d] = shape[d];
        v.strides[d] = strides[d];
    }
    return v;
}

/* ---- unary ---------------------------------------------------------------------------------- */

static double ref_neg(double x) { return -x; }
static double ref_relu(double x) { return x > 0 ? x : 0; }
static double ref_rsqrt(double x) { return 1 / sqrt(x); }
static double ref_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double ref_silu(double x) { return x / (1 + exp(-x)); }
static double ref_gelu_erf(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double ref_gelu_tanh(double x) {
    const double pi = 3.14159265358979323846;
    return 0.5 * x * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
}

typedef struct unary_case {
    cn_tensor *(*op)(cn_tensor *);
    double (*ref)(double);
    int positive_domain; /* log, sqrt, rsqrt */
} unary_case;

/* Indexed by the op; the test walks the enum and names each case by cn_op_name. (gelu, with its
 * mode, and erf, internal, are tested on their own below.) */
static const unary_case unary_cases[CN_OP_COUNT] = {
    [CN_OP_NEG] = {cn_neg, ref_neg, 0},           [CN_OP_ABS] = {cn_abs, fabs, 0},
    [CN_OP_RELU] = {cn_relu, ref_relu, 0},        [CN_OP_EXP] = {cn_exp, exp, 0},
    [CN_OP_LOG] = {cn_log, log, 1},               [CN_OP_LOG1P] = {cn_log1p, log1p, 0},
    [CN_OP_SQRT] = {cn_sqrt, sqrt, 1},            [CN_OP_RSQRT] = {cn_rsqrt, ref_rsqrt, 1},
    [CN_OP_SIN] = {cn_sin, sin, 0},               [CN_OP_COS] = {cn_cos, cos, 0},
    [CN_OP_TANH] = {cn_tanh, tanh, 0},            [CN_OP_SIGMOID] = {cn_sigmoid, ref_sigmoid, 0},
    [CN_OP_SILU] = {cn_silu, ref_silu, 0},
};

static void test_unary_float_ops_match_libm_in_double(void) {
    const double anywhere[] = {-3.5, -1, -0.25, 0, 0.3, 1, 2.5, 7};
    const double positive[] = {0.001, 0.25, 1, 2.5, 100};
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        double tol = dts[d] == CN_F32 ? 2e-6 : 1e-14;
        for (int k = 0; k < CN_OP_COUNT; k++) {
            const unary_case *u = &unary_cases[k];
            if (!u->op) continue;
            const double *src = u->positive_domain ? positive : anywhere;
            int64_t n = u->positive_domain ? N_OF(positive) : N_OF(anywhere);
            double in[8], want[8];
            for (int64_t i = 0; i < n; i++) {
                in[i] = as_dtype(src[i], dts[d]);
                want[i] = u->ref(in[i]);
            }
            cn_tensor *x = vec(in, n, dts[d]);
            cn_tensor *y = u->op(x);
            char what[64];
            snprintf(what, sizeof what, "%s %s", cn_op_name((cn_op)k), cn_dtype_name(dts[d]));
            th_check_values(what, y, want, n, tol);
            CHECK(y && cn_dtype_of(y) == dts[d]);
            cn_release(y);
            cn_release(x);
        }
    }
}

static void test_sigmoid_and_silu_stay_finite_far_out(void) {
    const double in[] = {-1000, -90, -30, 30, 90, 1000, -INFINITY, INFINITY};
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        double tol = dts[d] == CN_F32 ? 1e-7 : 1e-15;
        cn_tensor *x = vec(in, N_OF(in), dts[d]);
        cn_tensor *s = cn_sigmoid(x);
        double got[8];
        CHECK(th_read(s, got) == N_OF(in));
        for (int i = 0; i < 8; i++) {
            CHECK(!isnan(got[i]));
            CHECK(got[i] >= 0 && got[i] <= 1);
            CHECK_NEAR(got[i], ref_sigmoid(in[i]), tol);
        }
        CHECK(got[1] < 1e-38); /* sigmoid(-90) = 8.2e-40: zero to f32 precision, never NaN */
        cn_tensor *sl = cn_silu(x);
        CHECK(th_read(sl, got) == N_OF(in));
        for (int i = 0; i < 6; i++) CHECK_NEAR(got[i], in[i] > 0 ? in[i] : 0.0, 1e-9);
        cn_release(sl);
        cn_release(s);
        cn_release(x);
    }
}

static void test_gelu_erf_and_tanh_forms_follow_their_formulas(void) {
    const double in[] = {-4, -1.5, -1, -0.5, 0, 0.5, 1, 1.5, 4};
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        double tol = dts[d] == CN_F32 ? 2e-6 : 1e-14;
        double x_in[9], want_erf[9], want_tanh[9];
        for (int i = 0; i < 9; i++) {
            x_in[i] = as_dtype(in[i], dts[d]);
            want_erf[i] = ref_gelu_erf(x_in[i]);
            want_tanh[i] = ref_gelu_tanh(x_in[i]);
        }
        cn_tensor *x = vec(x_in, 9, dts[d]);
        cn_tensor *ge = cn_gelu(x, CN_GELU_ERF);
        cn_tensor *gt = cn_gelu(x, CN_GELU_TANH);
        th_check_values("gelu erf", ge, want_erf, 9, tol);
        th_check_values("gelu tanh", gt, want_tanh, 9, tol);
        double e[9], t[9];
        CHECK(th_read(ge, e) == 9 && th_read(gt, t) == 9);
        CHECK_NEAR(e[6], 0.8413447460685429, tol);  /* 1 * Phi(1), the standard normal cdf */
        CHECK(fabs(e[6] - t[6]) > 1e-4);            /* the forms differ: ints[0] was honoured */
        cn_release(gt);
        cn_release(ge);
        cn_release(x);
    }
}

static void test_erf_kernel_matches_libm(void) {
    double in[5] = {-2, -0.5, 0, 0.7, 3}, out[5];
    int64_t shape[1] = {5}, strides[1] = {1};
    cn_view vi = view_of(in, CN_F64, 1, shape, strides);
    cn_view vo = view_of(out, CN_F64, 1, shape, strides);
    CHECK(call_kernel(CN_OP_ERF, &vi, 1, &vo, NULL, 0, NULL, 0) == CN_OK);
    for (int i = 0; i < 5; i++) CHECK_NEAR(out[i], erf(in[i]), 1e-15);
}

static void test_int_unary_ops_wrap_instead_of_overflowing(void) {
    int32_t a32[] = {INT32_MIN, -7, 0, 5, INT32_MAX};
    int64_t a64[] = {INT64_MIN, -7, 0, 5, INT64_MAX};
    int64_t shape[1] = {5};
    cn_tensor *x32 = cn_from_data(a32, shape, 1, CN_I32, cn_cpu());
    cn_tensor *x64 = cn_from_data(a64, shape, 1, CN_I64, cn_cpu());
    cn_tensor *r[6] = {cn_neg(x32), cn_abs(x32), cn_relu(x32),
                       cn_neg(x64), cn_abs(x64), cn_relu(x64)};
    const int32_t want32[3][5] = {{INT32_MIN, 7, 0, -5, -INT32_MAX},
                                  {INT32_MIN, 7, 0, 5, INT32_MAX},
                                  {0, 0, 0, 5, INT32_MAX}};
    const int64_t want64[3][5] = {{INT64_MIN, 7, 0, -5, -INT64_MAX},
                                  {INT64_MIN, 7, 0, 5, INT64_MAX},
                                  {0, 0, 0, 5, INT64_MAX}};
    for (int k = 0; k < 3; k++) {
        int32_t g32[5];
        int64_t g64[5];
        CHECK(r[k] && cn_dtype_of(r[k]) == CN_I32);
        CHECK(r[k + 3] && cn_dtype_of(r[k + 3]) == CN_I64);
        CHECK(cn_read(r[k], g32, sizeof g32) == CN_OK);
        CHECK(cn_read(r[k + 3], g64, sizeof g64) == CN_OK);
        CHECK(memcmp(g32, want32[k], sizeof g32) == 0);
        CHECK(memcmp(g64, want64[k], sizeof g64) == 0);
    }
    for (int k = 0; k < 6; k++) cn_release(r[k]);
    cn_release(x64);
    cn_release(x32);
}

/* ulp(v): the spacing of f32 values at |v| (2^-149 below FLT_MIN). */
static double ulp_f32(double v) {
    v = fabs(v);
    if (v < FLT_MIN) return ldexp(1.0, -149);
    int e;
    frexp(v, &e);
    return ldexp(1.0, e - 24);
}

/* exp on f32 over a sweep of a million inputs (every 4099th bit pattern of each sign: NaNs,
 * infinities, subnormals, huge values; and values evenly spaced over [-110, 95], where exp goes
 * from 0 through the subnormals to overflow): within 2 ulp of libm's double exp (inf where exp(x)
 * is past FLT_MAX, FLT_MAX accepted at the edge), NaN for NaN; and the dense run (the AVX-512
 * path where the CPU has it) gives the same bits as a strided view of the same values (the
 * compiled loop, in the clone the CPU takes) and as exp_f32 compiled here, for baseline x86-64
 * (its fused multiply-adds through glibc's fmaf), so the result does not depend on the path. */
static void test_exp_f32_within_2_ulp_and_the_same_on_every_path(void) {
    enum { N = 1 << 20 };
    float *v = malloc(sizeof(float) * 2 * N), *strided = malloc(sizeof(float) * N);
    CHECK(v && strided);
    if (!v || !strided) goto done;
    for (int64_t i = 0; i < N; i++) {
        float x;
        if (i % 2) {
            uint32_t bits = (uint32_t)((uint64_t)(i / 2) * 4099u * 2u + (uint64_t)(i % 4 == 1));
            bits = (bits << 1 >> 1) | (uint32_t)(i % 4 == 3) << 31;
            memcpy(&x, &bits, sizeof x);
        } else {
            x = (float)(-110.0 + 205.0 * (double)i / N);
        }
        v[2 * i] = v[2 * i + 1] = x;
    }
    v[0] = NAN, v[2] = INFINITY, v[4] = -INFINITY, v[6] = -0.0f, v[8] = 88.72f, v[10] = -103.97f;
    for (int k = 0; k < 12; k += 2) v[k + 1] = v[k];
    int64_t shape[2] = {N, 2}, flat = 2 * N;
    cn_tensor *both = cn_from_data(v, shape, 2, CN_F32, cn_cpu());
    cn_tensor *col = cn_slice(both, 1, 0, 1, 1); /* [N, 1] at stride 2 */
    cn_tensor *all = cn_from_data(v, &flat, 1, CN_F32, cn_cpu());
    cn_tensor *ys = cn_exp(col), *yd = cn_exp(all);
    CHECK(ys && yd);
    float *full = malloc(sizeof(float) * 2 * N);
    if (ys && yd && full && cn_read(ys, strided, sizeof(float) * N) == CN_OK &&
        cn_read(yd, full, sizeof(float) * 2 * N) == CN_OK) {
        int64_t differ = 0, far = 0;
        for (int64_t i = 0; i < N; i++) {
            float x = v[2 * i], d = full[2 * i], s = strided[i];
            float b = exp_f32(x);
            if ((memcmp(&d, &s, sizeof d) || memcmp(&d, &b, sizeof d)) &&
                !(d != d && s != s && b != b)) {
                if (differ++ < 3)
                    printf("  exp(%a): dense %a, strided %a, baseline %a\n", x, d, s, b);
            }
            double want = exp((double)x);
            int ok = x != x               ? d != d
                     : want > FLT_MAX     ? (isinf(d) || d == FLT_MAX) && d > 0
                                          : fabs((double)d - want) <= 2 * ulp_f32(want);
            if (!ok && far++ < 3) printf("  exp(%a) = %a, want %a\n", x, d, want);
        }
        CHECK(differ == 0);
        CHECK(far == 0);
    }
    free(full);
    cn_release(ys);
    cn_release(yd);
    cn_release(col);
    cn_release(both);
    cn_release(all);
done:
    free(v);
    free(strided);
}

static void test_unary_reads_transposed_input(void) {
    /* x: [3, 4] row-major 0..11; xt = x^T: [4, 3], xt[i][j] = x[j][i] = 4j + i */
    cn_tensor *x = cn_arange(0, 12, 1, CN_F32, cn_cpu());
    int64_t s34[2] = {3, 4};
    cn_tensor *x2 = cn_reshape(x, s34, 2);
    cn_tensor *xt = cn_transpose(x2, 0, 1);
    CHECK(xt && !cn_is_contiguous(xt));
    cn_tensor *y = cn_exp(xt);
    double want[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) want[i * 3 + j] = exp((double)(4 * j + i));
    th_check_values("exp of transpose", y, want, 12, 2e-6);
    cn_release(y);
    cn_release(xt);
    cn_release(x2);
    cn_release(x);
}

/* ---- scalars -------------------------------------------------------------------------------- */

static void test_scalar_ops_on_floats(void) {
    const double in[] = {-2, -0.5, 0, 0.5, 3, NAN};
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        double tol = dts[d] == CN_F32 ? 1e-6 : 1e-15;
        cn_tensor *x = vec(in, N_OF(in), dts[d]);
        cn_tensor *add = cn_add_scalar(x, 1.25);
        cn_tensor *mul = cn_mul_scalar(x, -3);
        cn_tensor *clamp = cn_clamp(x, -1, 1);
        const double want_add[] = {-0.75, 0.75, 1.25, 1.75, 4.25, NAN};
        const double want_mul[] = {6, 1.5, 0, -1.5, -9, NAN};
        const double want_clamp[] = {-1, -0.5, 0, 0.5, 1, NAN}; /* NaN passes through */
        th_check_values("add_scalar", add, want_add, 6, tol);
        th_check_values("mul_scalar", mul, want_mul, 6, tol);
        th_check_values("clamp", clamp, want_clamp, 6, tol);
        cn_release(clamp);
        cn_release(mul);
        cn_release(add);
        cn_release(x);

        const double base[] = {0.5, 2, 3, 10};
        cn_tensor *b = vec(base, 4, dts[d]);
        cn_tensor *cube = cn_pow_scalar(b, 3);
        cn_tensor *root = cn_pow_scalar(b, 0.5);
        const double want_cube[] = {0.125, 8, 27, 1000};
        double want_root[4];
        for (int i = 0; i < 4; i++) want_root[i] = sqrt(base[i]);
        th_check_values("pow_scalar 3", cube, want_cube, 4, tol);
        th_check_values("pow_scalar 0.5", root, want_root, 4, tol);
        cn_release(root);
        cn_release(cube);
        cn_release(b);
    }
}

static void test_scalar_ops_on_ints_truncate_the_scalar(void) {
    const double in[] = {-5, -1, 0, 2, 5};
    const cn_dtype dts[] = {CN_I32, CN_I64};
    for (int d = 0; d < 2; d++) {
        cn_tensor *x = vec(in, 5, dts[d]);
        cn_tensor *add = cn_add_scalar(x, 2.7);   /* + 2 */
        cn_tensor *sub = cn_add_scalar(x, -2.7);  /* - 2 */
        cn_tensor *mul = cn_mul_scalar(x, -1.5);  /* * -1 */
        cn_tensor *clamp = cn_clamp(x, -1.5, 2.5); /* the integers in [-1.5, 2.5]: -1..2 */
        const double want_add[] = {-3, 1, 2, 4, 7}, want_sub[] = {-7, -3, -2, 0, 3};
        const double want_mul[] = {5, 1, 0, -2, -5}, want_clamp[] = {-1, -1, 0, 2, 2};
        th_check_values("int add_scalar", add, want_add, 5, 0);
        th_check_values("int add_scalar negative", sub, want_sub, 5, 0);
        th_check_values("int mul_scalar", mul, want_mul, 5, 0);
        th_check_values("int clamp", clamp, want_clamp, 5, 0);
        CHECK(clamp && cn_dtype_of(clamp) == dts[d]);
        cn_release(clamp);
        cn_release(mul);
        cn_release(sub);
        cn_release(add);
        cn_release(x);
    }
}

/* ---- binary --------------------------------------------------------------------------------- */

static double ref_add(double x, double y) { return x + y; }
static double ref_sub(double x, double y) { return x - y; }
static double ref_mul(double x, double y) { return x * y; }
static double ref_div(double x, double y) { return x / y; }
static double ref_maximum(double x, double y) { return isnan(x) || isnan(y) ? NAN : fmax(x, y); }
static double ref_minimum(double x, double y) { return isnan(x) || isnan(y) ? NAN : fmin(x, y); }

typedef struct binary_case {
    cn_tensor *(*op)(cn_tensor *, cn_tensor *);
    double (*ref)(double, double);
} binary_case;

/* Indexed by the op, walked over the enum and named by cn_op_name, like the unary cases. */
static const binary_case binary_cases[CN_OP_COUNT] = {
    [CN_OP_ADD] = {cn_add, ref_add},         [CN_OP_SUB] = {cn_sub, ref_sub},
    [CN_OP_MUL] = {cn_mul, ref_mul},         [CN_OP_DIV] = {cn_div, ref_div},
    [CN_OP_POW] = {cn_pow, pow},             [CN_OP_MAXIMUM] = {cn_maximum, ref_maximum},
    [CN_OP_MINIMUM] = {cn_minimum, ref_minimum},
};

static void test_binary_float_ops_match_double_reference(void) {
    const double a[] = {1.5, -2, 0.25, 3, 10, 0.5, NAN, 2};
    const double b[] = {2, 0.5, -4, 3, 0.1, 2.5, 1, NAN};
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        double tol = dts[d] == CN_F32 ? 1e-6 : 1e-15;
        cn_tensor *ta = vec(a, 8, dts[d]), *tb = vec(b, 8, dts[d]);
        for (int op = 0; op < CN_OP_COUNT; op++) {
            const binary_case *c = &binary_cases[op];
            if (!c->op) continue;
            double want[8];
            for (int i = 0; i < 8; i++)
                want[i] = c->ref(as_dtype(a[i], dts[d]), as_dtype(b[i], dts[d]));
            cn_tensor *r = c->op(ta, tb);
            char what[64];
            snprintf(what, sizeof what, "%s %s", cn_op_name((cn_op)op), cn_dtype_name(dts[d]));
            th_check_values(what, r, want, 8, tol);
            cn_release(r);
        }
        cn_release(tb);
        cn_release(ta);
    }
}

static void test_binary_int_ops_truncate_and_wrap(void) {
    const double a[] = {7, -7, 7, -7, 0, 9, 100};
    const double b[] = {2, 2, -2, -2, 5, 3, -7};
    const double want[][7] = {
        {9, -5, 5, -9, 5, 12, 93},      /* add */
        {5, -9, 9, -5, -5, 6, 107},     /* sub */
        {14, -14, -14, 14, 0, 27, -700}, /* mul */
        {3, -3, -3, 3, 0, 3, -14},      /* div truncates toward zero */
    };
    const double want_max[] = {7, 2, 7, -2, 5, 9, 100}, want_min[] = {2, -7, -2, -7, 0, 3, -7};
    const cn_dtype dts[] = {CN_I32, CN_I64};
    for (int d = 0; d < 2; d++) {
        cn_tensor *ta = vec(a, 7, dts[d]), *tb = vec(b, 7, dts[d]);
        static const cn_op int_ops[] = {CN_OP_ADD, CN_OP_SUB, CN_OP_MUL, CN_OP_DIV};
        for (int k = 0; k < 4; k++) {
            const cn_op op = int_ops[k];
            cn_tensor *r = binary_cases[op].op(ta, tb);
            th_check_values(cn_op_name(op), r, want[k], 7, 0);
            CHECK(r && cn_dtype_of(r) == dts[d]);
            cn_release(r);
        }
        cn_tensor *mx = cn_maximum(ta, tb), *mn = cn_minimum(ta, tb);
        th_check_values("int maximum", mx, want_max, 7, 0);
        th_check_values("int minimum", mn, want_min, 7, 0);
        cn_release(mn);
        cn_release(mx);
        cn_release(tb);
        cn_release(ta);
    }

    /* wrap-around at the extremes, read back exactly */
    int64_t s2[1] = {2};
    const int32_t x32[2] = {INT32_MAX, INT32_MIN}, y32[2] = {1, -1};
    const int64_t x64[2] = {INT64_MAX, INT64_MIN}, y64[2] = {1, -1};
    cn_tensor *a32 = cn_from_data(x32, s2, 1, CN_I32, cn_cpu());
    cn_tensor *b32 = cn_from_data(y32, s2, 1, CN_I32, cn_cpu());
    cn_tensor *a64 = cn_from_data(x64, s2, 1, CN_I64, cn_cpu());
    cn_tensor *b64 = cn_from_data(y64, s2, 1, CN_I64, cn_cpu());
    cn_tensor *sum32 = cn_add(a32, b32), *quo32 = cn_div(a32, b32);
    cn_tensor *sum64 = cn_add(a64, b64), *quo64 = cn_div(a64, b64);
    int32_t g32[2];
    int64_t g64[2];
    CHECK(cn_read(sum32, g32, sizeof g32) == CN_OK && g32[0] == INT32_MIN && g32[1] == INT32_MAX);
    CHECK(cn_read(quo32, g32, sizeof g32) == CN_OK && g32[0] == INT32_MAX && g32[1] == INT32_MIN);
    CHECK(cn_read(sum64, g64, sizeof g64) == CN_OK && g64[0] == INT64_MIN && g64[1] == INT64_MAX);
    CHECK(cn_read(quo64, g64, sizeof g64) == CN_OK && g64[0] == INT64_MAX && g64[1] == INT64_MIN);
    cn_release(quo64);
    cn_release(sum64);
    cn_release(quo32);
    cn_release(sum32);
    cn_release(b64);
    cn_release(a64);
    cn_release(b32);
    cn_release(a32);
}

static void test_int_division_by_zero_is_an_error(void) {
    const double a[] = {1, 2, 3}, b[] = {1, 0, 1}, zero[] = {0};
    const int64_t scalar_shape[1] = {1}; /* unused: ndim 0 */
    const cn_dtype dts[] = {CN_I32, CN_I64};
    for (int d = 0; d < 2; d++) {
        cn_tensor *ta = vec(a, 3, dts[d]), *tb = vec(b, 3, dts[d]);
        CHECK_FAILS(cn_div(ta, tb), CN_ERR_INVALID_ARG, "division by zero");
        cn_tensor *z = th_tensor(zero, scalar_shape, 0, dts[d]); /* a broadcast scalar divisor */
        CHECK_FAILS(cn_div(ta, z), CN_ERR_INVALID_ARG, "division by zero");
        cn_release(z);
        cn_release(tb);
        cn_release(ta);
    }
    /* floats divide by zero the IEEE way */
    cn_tensor *fa = vec(a, 3, CN_F32), *fb = vec(b, 3, CN_F32);
    cn_tensor *q = cn_div(fa, fb);
    const double want[] = {1, INFINITY, 3};
    th_check_values("float div by zero", q, want, 3, 0);
    cn_release(q);
    cn_release(fb);
    cn_release(fa);
}

static void test_int_division_by_zero_writes_nothing(void) {
    int32_t x[4] = {4, 8, 12, 16}, y[4] = {2, 2, 0, 2}, out[4] = {-1, -1, -1, -1};
    int64_t shape[1] = {4}, strides[1] = {1};
    cn_view in[2] = {view_of(x, CN_I32, 1, shape, strides), view_of(y, CN_I32, 1, shape, strides)};
    cn_view vo = view_of(out, CN_I32, 1, shape, strides);
    cn_clear_error();
    CHECK(call_kernel(CN_OP_DIV, in, 2, &vo, NULL, 0, NULL, 0) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "div") != NULL);
    for (int i = 0; i < 4; i++) CHECK(out[i] == -1);
    cn_clear_error();
}

static void test_binary_broadcasts_column_with_row(void) {
    /* a: [3, 1], b: [4] -> [3, 4]; a + b has a broadcast first operand in the inner run, b - a a
     * broadcast second one */
    const double av[] = {1, 2, 3}, bv[] = {10, 20, 30, 40};
    int64_t s31[2] = {3, 1}, s4[1] = {4}, s34[2] = {3, 4};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_I32, CN_I64};
    for (int d = 0; d < 4; d++) {
        cn_tensor *a = th_tensor(av, s31, 2, dts[d]), *b = th_tensor(bv, s4, 1, dts[d]);
        cn_tensor *sum = cn_add(a, b), *diff = cn_sub(b, a), *prod = cn_mul(a, b);
        double want_sum[12], want_diff[12], want_prod[12];
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) {
                want_sum[i * 4 + j] = av[i] + bv[j];
                want_diff[i * 4 + j] = bv[j] - av[i];
                want_prod[i * 4 + j] = av[i] * bv[j];
            }
        th_check_shape("broadcast add", sum, s34, 2);
        th_check_values("broadcast add", sum, want_sum, 12, 0);
        th_check_values("broadcast sub", diff, want_diff, 12, 0);
        th_check_values("broadcast mul", prod, want_prod, 12, 0);
        cn_release(prod);
        cn_release(diff);
        cn_release(sum);
        cn_release(b);
        cn_release(a);
    }
}

static void test_binary_reads_transposed_and_stepped_inputs(void) {
    /* xt = ([3, 4] 0..11)^T: xt[i][j] = 4j + i; ys = ([4, 6] 0..23)[:, ::2]: ys[i][j] = 6i + 2j */
    int64_t s34[2] = {3, 4}, s46[2] = {4, 6};
    const cn_dtype dts[] = {CN_F32, CN_I64};
    for (int d = 0; d < 2; d++) {
        cn_tensor *x = cn_arange(0, 12, 1, dts[d], cn_cpu());
        cn_tensor *y = cn_arange(0, 24, 1, dts[d], cn_cpu());
        cn_tensor *x2 = cn_reshape(x, s34, 2), *y2 = cn_reshape(y, s46, 2);
        cn_tensor *xt = cn_transpose(x2, 0, 1), *ys = cn_slice(y2, 1, 0, 6, 2);
        cn_tensor *r = cn_sub(xt, ys);
        double want[12];
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 3; j++) want[i * 3 + j] = (4 * j + i) - (6 * i + 2 * j);
        th_check_values("transposed - stepped", r, want, 12, 0);
        cn_release(r);
        cn_release(ys);
        cn_release(xt);
        cn_release(y2);
        cn_release(x2);
        cn_release(y);
        cn_release(x);
    }
}

static void test_long_runs_split_across_threads(void) {
    /* more elements than CPU_PARALLEL_GRAIN (32768), dense and broadcast */
    const int64_t rows = 301, cols = 211, n = rows * cols;
    int64_t s2[2] = {rows, cols}, col[2] = {rows, 1};
    cn_tensor *x = cn_arange(0, (double)n, 1, CN_F64, cn_cpu());
    cn_tensor *x2 = cn_reshape(x, s2, 2);
    cn_tensor *c = cn_arange(0, (double)rows, 1, CN_F64, cn_cpu());
    cn_tensor *c2 = cn_reshape(c, col, 2);
    cn_tensor *sum = cn_add(x2, c2);
    cn_tensor *halved = cn_mul_scalar(sum, 0.5);
    cn_tensor *f = cn_cast(halved, CN_F32);
    cn_tensor *s = cn_sigmoid(f);
    double *got = malloc(sizeof(double) * (size_t)n);
    CHECK(th_read(halved, got) == n);
    int bad = 0;
    for (int64_t i = 0; i < n && !bad; i++) bad = got[i] != 0.5 * (double)(i + i / cols);
    CHECK(!bad);
    CHECK(th_read(s, got) == n);
    for (int64_t i = 0; i < n && !bad; i++)
        bad = fabs(got[i] - ref_sigmoid((float)(0.5 * (double)(i + i / cols)))) > 1e-6;
    CHECK(!bad);
    free(got);
    cn_release(s);
    cn_release(f);
    cn_release(halved);
    cn_release(sum);
    cn_release(c2);
    cn_release(c);
    cn_release(x2);
    cn_release(x);
}

/* f32 add, sub, mul and div into an output of 8 MB and more (24 MB with the inputs), which the
 * kernel writes with streaming stores: every element against double arithmetic rounded to f32
 * (exact for these four: the double result rounds once more to the same float), with the output
 * on a 64-byte boundary and 3 floats past one (ordinary stores up to the boundary), and a tail
 * shorter than a vector. */
static void test_large_f32_binary_outputs_are_exact(void) {
    const int64_t n = ((int64_t)1 << 21) + 37;
    float *x = malloc(sizeof(float) * (size_t)n), *y = malloc(sizeof(float) * (size_t)n);
    float *out = aligned_alloc(64, (size_t)(n + 31) / 16 * 64); /* n + 16 floats, whole lines */
    CHECK(x && y && out);
    uint32_t r = 12345;
    for (int64_t i = 0; i < n; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = (float)((double)(r >> 8) / (1 << 24) * 200.0 - 100.0);
        r = r * 1664525u + 1013904223u;
        y[i] = (float)((double)(r >> 8) / (1 << 24) * 8.0 + 0.5); /* never 0 */
    }
    const cn_op ops[4] = {CN_OP_ADD, CN_OP_SUB, CN_OP_MUL, CN_OP_DIV};
    const int64_t shape[1] = {n}, strides[1] = {1};
    for (int k = 0; k < 4; k++)
        for (int shift = 0; shift <= 3; shift += 3) {
            float *o = out + shift;
            for (int64_t i = 0; i < n; i++) o[i] = NAN;
            cn_view in[2] = {view_of(x, CN_F32, 1, shape, strides),
                             view_of(y, CN_F32, 1, shape, strides)};
            cn_view ov = view_of(o, CN_F32, 1, shape, strides);
            CHECK(call_kernel(ops[k], in, 2, &ov, NULL, 0, NULL, 0) == CN_OK);
            int64_t bad = -1;
            for (int64_t i = 0; i < n && bad < 0; i++) {
                double a = x[i], b = y[i];
                double want = k == 0 ? a + b : k == 1 ? a - b : k == 2 ? a * b : a / b;
                if (o[i] != (float)want) bad = i;
            }
            if (bad >= 0)
                fprintf(stderr, "%s, output shifted by %d floats: element %lld wrong\n",
                        cn_op_name(ops[k]), shift, (long long)bad);
            CHECK(bad < 0);
        }
    free(x);
    free(y);
    free(out);
}

/* ---- comparisons, logic, where -------------------------------------------------------------- */

static void test_comparisons_on_every_dtype(void) {
    const double a[] = {1, 2, 3, 0, 200, 255};
    const double b[] = {2, 2, 2, 1, 100, 255};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_I32, CN_I64, CN_U8};
    cn_tensor *(*ops[6])(cn_tensor *, cn_tensor *) = {cn_eq, cn_ne, cn_lt, cn_le, cn_gt, cn_ge};
    for (int d = 0; d < 5; d++) {
        cn_tensor *ta = vec(a, 6, dts[d]), *tb = vec(b, 6, dts[d]);
        for (int k = 0; k < 6; k++) {
            double want[6];
            for (int i = 0; i < 6; i++) {
                double x = a[i], y = b[i];
                int r[6] = {x == y, x != y, x < y, x <= y, x > y, x >= y};
                want[i] = r[k];
            }
            cn_tensor *r = ops[k](ta, tb);
            CHECK(r && cn_dtype_of(r) == CN_BOOL);
            th_check_values("compare", r, want, 6, 0);
            cn_release(r);
        }
        cn_release(tb);
        cn_release(ta);
    }
    /* NaN is unequal to everything, itself included */
    const double n1[] = {NAN, NAN, 1}, n2[] = {NAN, 1, NAN};
    cn_tensor *x = vec(n1, 3, CN_F32), *y = vec(n2, 3, CN_F32);
    cn_tensor *eq = cn_eq(x, y), *ne = cn_ne(x, y), *le = cn_le(x, y);
    const double f[] = {0, 0, 0}, t[] = {1, 1, 1};
    th_check_values("NaN eq", eq, f, 3, 0);
    th_check_values("NaN ne", ne, t, 3, 0);
    th_check_values("NaN le", le, f, 3, 0);
    cn_release(le);
    cn_release(ne);
    cn_release(eq);
    cn_release(y);
    cn_release(x);
}

static void test_logic_truth_tables_and_bool_compare(void) {
    const double p[] = {0, 0, 1, 1}, q[] = {0, 1, 0, 1};
    cn_tensor *a = vec(p, 4, CN_BOOL), *b = vec(q, 4, CN_BOOL);
    cn_tensor *and_ = cn_logical_and(a, b), *or_ = cn_logical_or(a, b), *not_ = cn_logical_not(a);
    cn_tensor *lt = cn_lt(a, b), *eq = cn_eq(a, b);
    const double want_and[] = {0, 0, 0, 1}, want_or[] = {0, 1, 1, 1}, want_not[] = {1, 1, 0, 0};
    const double want_lt[] = {0, 1, 0, 0}, want_eq[] = {1, 0, 0, 1};
    th_check_values("and", and_, want_and, 4, 0);
    th_check_values("or", or_, want_or, 4, 0);
    th_check_values("not", not_, want_not, 4, 0);
    th_check_values("bool lt", lt, want_lt, 4, 0);
    th_check_values("bool eq", eq, want_eq, 4, 0);
    CHECK(not_ && cn_dtype_of(not_) == CN_BOOL);

    /* broadcast: [2, 1] and [2] */
    int64_t s21[2] = {2, 1}, s2[1] = {2};
    const double c[] = {0, 1}, r[] = {1, 0};
    cn_tensor *tc = th_tensor(c, s21, 2, CN_BOOL), *tr = th_tensor(r, s2, 1, CN_BOOL);
    cn_tensor *bor = cn_logical_or(tc, tr);
    const double want_bor[] = {1, 0, 1, 1};
    th_check_values("broadcast or", bor, want_bor, 4, 0);
    cn_release(bor);
    cn_release(tr);
    cn_release(tc);
    cn_release(eq);
    cn_release(lt);
    cn_release(not_);
    cn_release(or_);
    cn_release(and_);
    cn_release(b);
    cn_release(a);
}

static void test_where_selects_with_broadcast_for_every_width(void) {
    /* cond: [3, 1], a: [4], b: [3, 4] -> out[i][j] = cond[i] ? a[j] : b[i][j] */
    const double cv[] = {1, 0, 1}, av[] = {1, 2, 3, 4};
    double bv[12], want[12];
    for (int i = 0; i < 12; i++) bv[i] = 10 + i;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++) want[i * 4 + j] = cv[i] ? av[j] : bv[i * 4 + j];
    int64_t s31[2] = {3, 1}, s4[1] = {4}, s34[2] = {3, 4};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_I64, CN_U8};
    cn_tensor *cond = th_tensor(cv, s31, 2, CN_BOOL);
    for (int d = 0; d < 5; d++) {
        cn_tensor *a = th_tensor(av, s4, 1, dts[d]), *b = th_tensor(bv, s34, 2, dts[d]);
        cn_tensor *w = cn_where(cond, a, b);
        CHECK(w && cn_dtype_of(w) == dts[d]);
        th_check_values("where", w, want, 12, 0);
        cn_release(w);
        cn_release(b);
        cn_release(a);
    }
    cn_release(cond);
}

/* b a 0-d scalar (stride 0 everywhere: a relu's backward, where(mask, g, 0)), a and cond dense:
 * every width, over a size with a vector body and a tail. */
static void test_where_with_scalar_b(void) {
    enum { N = 37 };
    double cv[N], av[N], want[N];
    for (int i = 0; i < N; i++) {
        cv[i] = (i * 7) % 3 == 0;
        av[i] = i + 1;
        want[i] = cv[i] ? av[i] : 5;
    }
    int64_t s[2] = {1, N};
    const double five = 5;
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_I64, CN_U8};
    cn_tensor *cond = th_tensor(cv, s, 2, CN_BOOL);
    for (int d = 0; d < 5; d++) {
        cn_tensor *a = th_tensor(av, s, 2, dts[d]), *b = th_tensor(&five, NULL, 0, dts[d]);
        cn_tensor *w = cn_where(cond, a, b);
        CHECK(w && cn_dtype_of(w) == dts[d]);
        th_check_values("where scalar b", w, want, N, 0);
        cn_release(w);
        cn_release(b);
        cn_release(a);
    }
    cn_release(cond);
}

/* ---- cast, copy, fill ----------------------------------------------------------------------- */

static void test_cast_float_to_int_truncates_and_saturates(void) {
    const double in[] = {2.7, -2.7, 0.5, -0.5, 1e10, -1e10, NAN, 300, -5};
    int64_t s[1] = {9};
    cn_tensor *x = cn_from_data(in, s, 1, CN_F64, cn_cpu());
    cn_tensor *i32 = cn_cast(x, CN_I32), *i64 = cn_cast(x, CN_I64), *u8 = cn_cast(x, CN_U8);
    int32_t g32[9];
    int64_t g64[9];
    uint8_t g8[9];
    CHECK(cn_read(i32, g32, sizeof g32) == CN_OK);
    CHECK(cn_read(i64, g64, sizeof g64) == CN_OK);
    CHECK(cn_read(u8, g8, sizeof g8) == CN_OK);
    const int32_t w32[9] = {2, -2, 0, 0, INT32_MAX, INT32_MIN, 0, 300, -5};
    const int64_t w64[9] = {2, -2, 0, 0, 10000000000, -10000000000, 0, 300, -5};
    const uint8_t w8[9] = {2, 0, 0, 0, 255, 0, 0, 255, 0};
    CHECK(memcmp(g32, w32, sizeof g32) == 0);
    CHECK(memcmp(g64, w64, sizeof g64) == 0);
    CHECK(memcmp(g8, w8, sizeof g8) == 0);

    /* f32 source too, and int -> narrower int wraps */
    cn_tensor *f = cn_cast(x, CN_F32);
    cn_tensor *fi = cn_cast(f, CN_I32);
    CHECK(cn_read(fi, g32, sizeof g32) == CN_OK && g32[0] == 2 && g32[1] == -2);
    cn_tensor *wrap = cn_cast(i64, CN_U8);
    CHECK(cn_read(wrap, g8, sizeof g8) == CN_OK && g8[7] == 44 && g8[8] == 251);
    cn_release(wrap);
    cn_release(fi);
    cn_release(f);
    cn_release(u8);
    cn_release(i64);
    cn_release(i32);
    cn_release(x);
}

static void test_cast_to_and_from_bool(void) {
    const double in[] = {0, -0.0, 0.1, NAN, -3, INFINITY};
    const double want[] = {0, 0, 1, 1, 1, 1};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_BF16};
    for (int d = 0; d < 4; d++) {
        cn_tensor *x = vec(in, 6, dts[d]);
        cn_tensor *b = cn_cast(x, CN_BOOL);
        uint8_t raw[6];
        CHECK(b && cn_read(b, raw, sizeof raw) == CN_OK);
        for (int i = 0; i < 6; i++) CHECK(raw[i] == want[i]); /* stored as exactly 0 or 1 */
        cn_release(b);
        cn_release(x);
    }
    const double ints[] = {0, 7, -1};
    cn_tensor *x = vec(ints, 3, CN_I64), *b = cn_cast(x, CN_BOOL), *back = cn_cast(b, CN_F32);
    const double want_back[] = {0, 1, 1};
    th_check_values("i64 -> bool -> f32", back, want_back, 3, 0);
    cn_release(back);
    cn_release(b);
    cn_release(x);
}

static void test_f16_and_bf16_round_to_nearest_even(void) {
    /* bit patterns worked out by hand:
     * f16 (1-5-10): 1 = 0x3c00; 0.1 = 1.6 * 2^-4 -> exponent 11, mantissa round(0.6 * 1024) =
     *   614 -> 0x2e66 = 1638/16384 = 0.0999755859375; 65504 = max = 0x7bff; 65520 is the tie
     *   between 65504 and 2^16 and goes to the even side, inf; 2^-24 = smallest subnormal =
     *   0x0001; 2^-26 rounds to 0; 1 + 2^-11 is the tie between 1 and 1 + 2^-10 -> 1 (even);
     *   -2 = 0xc000; 1 + 2^-8 and 1 + 3 * 2^-8 are exact (0x3c04, 0x3c0c).
     * bf16 (1-8-7): 1 = 0x3f80; 0.1 -> mantissa round(0.6 * 128) = 77 -> 0x3dcd =
     *   205/2048 = 0.10009765625; 65504 -> 2^16 = 0x4780; 1 + 2^-8 is a tie -> 1;
     *   1 + 3 * 2^-8 is a tie -> 1 + 2^-6 (even) = 0x3f82. */
    const double in[] = {1, 0.1, 65504, 65520, INFINITY, 0x1p-24, 0x1p-26, 1 + 0x1p-11, -2,
                         1 + 0x1p-8, 1 + 3 * 0x1p-8};
    const uint16_t want_f16[] = {0x3c00, 0x2e66, 0x7bff, 0x7c00, 0x7c00, 0x0001,
                                 0x0000, 0x3c00, 0xc000, 0x3c04, 0x3c0c};
    const uint16_t want_bf16[] = {0x3f80, 0x3dcd, 0x4780, 0x4780, 0x7f80, 0x3380,
                                  0x3280, 0x3f80, 0xc000, 0x3f80, 0x3f82};
    const int n = 11;
    const cn_dtype src[] = {CN_F32, CN_F64};
    for (int s = 0; s < 2; s++) {
        cn_tensor *x = vec(in, n, src[s]);
        cn_tensor *h = cn_cast(x, CN_F16), *bh = cn_cast(x, CN_BF16);
        uint16_t gh[11], gb[11];
        CHECK(cn_read(h, gh, sizeof gh) == CN_OK && cn_read(bh, gb, sizeof gb) == CN_OK);
        for (int i = 0; i < n; i++) {
            if (gh[i] != want_f16[i]) {
                fprintf(stderr, "f16(%g) = 0x%04x, want 0x%04x\n", in[i], gh[i], want_f16[i]);
                th_checks_failed++;
            }
            if (gb[i] != want_bf16[i]) {
                fprintf(stderr, "bf16(%g) = 0x%04x, want 0x%04x\n", in[i], gb[i], want_bf16[i]);
                th_checks_failed++;
            }
        }
        /* and back: exact values */
        const double back_f16[] = {1, 0.0999755859375, 65504, INFINITY, INFINITY, 0x1p-24, 0,
                                   1, -2, 1 + 0x1p-8, 1 + 3 * 0x1p-8};
        const double back_bf16[] = {1, 0.10009765625, 65536, 65536, INFINITY, 0x1p-24, 0x1p-26,
                                    1, -2, 1, 1 + 0x1p-6};
        th_check_values("f16 round trip", h, back_f16, n, 0);
        th_check_values("bf16 round trip", bh, back_bf16, n, 0);
        cn_release(bh);
        cn_release(h);
        cn_release(x);
    }
    /* NaN stays NaN, negative zero keeps its sign */
    const double odd[] = {NAN, -0.0};
    cn_tensor *x = vec(odd, 2, CN_F32), *h = cn_cast(x, CN_F16), *b = cn_cast(x, CN_BF16);
    uint16_t gh[2], gb[2];
    CHECK(cn_read(h, gh, sizeof gh) == CN_OK && cn_read(b, gb, sizeof gb) == CN_OK);
    CHECK((gh[0] & 0x7c00) == 0x7c00 && (gh[0] & 0x03ff) != 0 && gh[1] == 0x8000);
    CHECK((gb[0] & 0x7f80) == 0x7f80 && (gb[0] & 0x007f) != 0 && gb[1] == 0x8000);
    cn_release(b);
    cn_release(h);
    cn_release(x);
}

static void test_f16_subnormals_convert_exactly_both_ways(void) {
    /* every f16 subnormal m * 2^-24 (m = 1..1023) is exact in f32 and must come back as itself */
    double v[1023];
    for (int m = 1; m <= 1023; m++) v[m - 1] = m * 0x1p-24;
    cn_tensor *x = vec(v, 1023, CN_F32), *h = cn_cast(x, CN_F16);
    uint16_t bits[1023];
    CHECK(cn_read(h, bits, sizeof bits) == CN_OK);
    int bad = 0;
    for (int m = 1; m <= 1023; m++) bad += bits[m - 1] != m;
    CHECK(bad == 0);
    th_check_values("f16 subnormals back", h, v, 1023, 0);
    cn_release(h);
    cn_release(x);
}

static void test_cast_and_copy_of_strided_views(void) {
    /* contiguous copy of a stepped slice (copy) and a cast of a transpose */
    int64_t s46[2] = {4, 6};
    cn_tensor *y = cn_arange(0, 24, 1, CN_I32, cn_cpu());
    cn_tensor *y2 = cn_reshape(y, s46, 2);
    cn_tensor *ys = cn_slice(y2, 1, 1, 6, 2); /* ys[i][j] = 6i + 1 + 2j, [4, 3] */
    cn_tensor *c = cn_contiguous(ys);
    cn_tensor *yt = cn_transpose(y2, 0, 1); /* [6, 4], yt[i][j] = 6j + i */
    cn_tensor *f = cn_cast(yt, CN_F64);
    double want_c[12], want_f[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++) want_c[i * 3 + j] = 6 * i + 1 + 2 * j;
    for (int i = 0; i < 6; i++)
        for (int j = 0; j < 4; j++) want_f[i * 4 + j] = 6 * j + i;
    CHECK(c && cn_is_contiguous(c));
    th_check_values("contiguous of slice", c, want_c, 12, 0);
    th_check_values("cast of transpose", f, want_f, 24, 0);
    cn_release(f);
    cn_release(yt);
    cn_release(c);
    cn_release(ys);
    cn_release(y2);
    cn_release(y);

    /* strided output (the kernel contract allows it): f32 [3, 2] transposed source into every
     * other f64 slot of a [2, 6] buffer; untouched slots keep their sentinel */
    float src[6] = {0, 1, 2, 3, 4, 5}; /* as [3, 2]; read transposed as [2, 3]: t[i][j] = 2j + i */
    double dst[12];
    for (int i = 0; i < 12; i++) dst[i] = -1;
    int64_t shape[2] = {2, 3}, in_strides[2] = {1, 2}, out_strides[2] = {6, 2};
    cn_view vi = view_of(src, CN_F32, 2, shape, in_strides);
    cn_view vo = view_of(dst, CN_F64, 2, shape, out_strides);
    CHECK(call_kernel(CN_OP_CAST, &vi, 1, &vo, NULL, 0, NULL, 0) == CN_OK);
    const double want_dst[12] = {0, -1, 2, -1, 4, -1, 1, -1, 3, -1, 5, -1};
    for (int i = 0; i < 12; i++) CHECK(dst[i] == want_dst[i]);

    /* same-dtype copy between two strided views */
    double dst2[12];
    for (int i = 0; i < 12; i++) dst2[i] = -1;
    cn_view vs = view_of(dst, CN_F64, 2, shape, out_strides);
    cn_view vd = view_of(dst2 + 1, CN_F64, 2, shape, out_strides);
    CHECK(call_kernel(CN_OP_COPY, &vs, 1, &vd, NULL, 0, NULL, 0) == CN_OK);
    for (int i = 0; i < 12; i++) CHECK(dst2[i] == (i % 2 ? want_dst[i - 1] : -1));
}

static void test_fill_every_dtype_and_strided(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_F16, CN_BF16, CN_I32, CN_I64, CN_U8, CN_BOOL};
    const double want[] = {2.5, 2.5, 2.5, 2.5, 2, 2, 2, 1};
    int64_t s23[2] = {2, 3};
    for (int d = 0; d < 8; d++) {
        cn_tensor *t = cn_full(s23, 2, 2.5, dts[d], cn_cpu());
        double w[6];
        for (int i = 0; i < 6; i++) w[i] = want[d];
        th_check_values(cn_dtype_name(dts[d]), t, w, 6, 0);
        cn_release(t);
    }
    cn_tensor *z = cn_zeros(s23, 2, CN_I64, cn_cpu()), *o = cn_ones(s23, 2, CN_F16, cn_cpu());
    const double zeros[6] = {0}, ones[6] = {1, 1, 1, 1, 1, 1};
    th_check_values("zeros", z, zeros, 6, 0);
    th_check_values("ones", o, ones, 6, 0);
    cn_release(o);
    cn_release(z);

    /* into every other element */
    int32_t buf[10];
    for (int i = 0; i < 10; i++) buf[i] = -1;
    int64_t shape[1] = {5}, strides[1] = {2};
    cn_view v = view_of(buf, CN_I32, 1, shape, strides);
    double seven = 7.9;
    CHECK(call_kernel(CN_OP_FILL, NULL, 0, &v, NULL, 0, &seven, 1) == CN_OK);
    for (int i = 0; i < 10; i++) CHECK(buf[i] == (i % 2 ? -1 : 7));
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_unsupported_dtypes_fail_with_the_dtype_named(void) {
    const double v[] = {1, 2};
    cn_tensor *h = vec(v, 2, CN_F16), *u = vec(v, 2, CN_U8);
    CHECK_FAILS(cn_exp(h), CN_ERR_DTYPE, "f16");
    CHECK_FAILS(cn_add(u, u), CN_ERR_DTYPE, "u8");
    cn_release(u);
    cn_release(h);
}

int main(void) {
    RUN(test_unary_float_ops_match_libm_in_double);
    RUN(test_sigmoid_and_silu_stay_finite_far_out);
    RUN(test_gelu_erf_and_tanh_forms_follow_their_formulas);
    RUN(test_erf_kernel_matches_libm);
    RUN(test_int_unary_ops_wrap_instead_of_overflowing);
    RUN(test_unary_reads_transposed_input);
    RUN(test_scalar_ops_on_floats);
    RUN(test_scalar_ops_on_ints_truncate_the_scalar);
    RUN(test_binary_float_ops_match_double_reference);
    RUN(test_binary_int_ops_truncate_and_wrap);
    RUN(test_int_division_by_zero_is_an_error);
    RUN(test_int_division_by_zero_writes_nothing);
    RUN(test_binary_broadcasts_column_with_row);
    RUN(test_binary_reads_transposed_and_stepped_inputs);
    RUN(test_long_runs_split_across_threads);
    RUN(test_large_f32_binary_outputs_are_exact);
    RUN(test_comparisons_on_every_dtype);
    RUN(test_logic_truth_tables_and_bool_compare);
    RUN(test_where_selects_with_broadcast_for_every_width);
    RUN(test_where_with_scalar_b);
    RUN(test_cast_float_to_int_truncates_and_saturates);
    RUN(test_cast_to_and_from_bool);
    RUN(test_f16_and_bf16_round_to_nearest_even);
    RUN(test_f16_subnormals_convert_exactly_both_ways);
    RUN(test_cast_and_copy_of_strided_views);
    RUN(test_fill_every_dtype_and_strided);
    RUN(test_unsupported_dtypes_fail_with_the_dtype_named);
    RUN(test_exp_f32_within_2_ulp_and_the_same_on_every_path);
    return th_finish();
}
