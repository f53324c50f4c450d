/* Issue 16's remaining elementwise ops on the CPU, through the public API: the edges that the
 * PyTorch cases of test_op_table (i64 and floats) do not reach, against values worked out by hand
 * from PyTorch's definitions, and the misuse of each op: wrong kinds and dtypes, zero integer
 * divisors, scalars that are no integer, all clear errors naming the op and the argument, with
 * nothing written. */
#include <stdint.h>

#include "harness.h"

#define N_OF(a) ((int64_t)(sizeof(a) / sizeof(*(a))))

static cn_tensor *vec(const double *v, int64_t n, cn_dtype dt) {
    int64_t shape[1] = {n};
    return th_tensor(v, shape, 1, dt);
}

/* ---- remainder and fmod --------------------------------------------------------------------- */

/* The sign conventions on every dtype: remainder takes the divisor's sign, fmod the dividend's;
 * x % -1 is 0 at the minimum (C's % overflows there). */
static void test_remainder_and_fmod_signs_on_every_dtype(void) {
    const double a[] = {5, -5, 5, -5, -6, 0, 7};
    const double b[] = {3, 3, -3, -3, 3, -2, 7};
    const double rem[] = {2, 1, -1, -2, 0, 0, 0}, fm[] = {2, -2, 2, -2, 0, 0, 0};
    const cn_dtype dts[] = {CN_F32, CN_F64, CN_I32, CN_I64};
    for (int d = 0; d < 4; d++) {
        cn_tensor *ta = vec(a, N_OF(a), dts[d]), *tb = vec(b, N_OF(b), dts[d]);
        cn_tensor *r = cn_remainder(ta, tb), *f = cn_fmod(ta, tb);
        th_check_values("remainder signs", r, rem, N_OF(rem), 0);
        th_check_values("fmod signs", f, fm, N_OF(fm), 0);
        cn_release(f);
        cn_release(r);
        cn_release(tb);
        cn_release(ta);
    }
    const double mins[] = {-2147483648.0, -2147483647.0, 2147483647.0}, m1[] = {-1};
    const double zeros[] = {0, 0, 0};
    cn_tensor *x = vec(mins, 3, CN_I32), *y = vec(m1, 1, CN_I32);
    cn_tensor *r = cn_remainder(x, y), *f = cn_fmod(x, y);
    th_check_values("i32 remainder by -1", r, zeros, 3, 0);
    th_check_values("i32 fmod by -1", f, zeros, 3, 0);
    cn_release(f);
    cn_release(r);
    cn_release(y);
    cn_release(x);
}

static void test_float_remainder_by_zero_is_nan(void) {
    const double a[] = {1, -2}, z[] = {0, 0}, want[] = {NAN, NAN};
    cn_tensor *ta = vec(a, 2, CN_F32), *tz = vec(z, 2, CN_F32);
    cn_tensor *r = cn_remainder(ta, tz);
    th_check_values("remainder by 0.0", r, want, 2, 0);
    cn_release(r);
    r = cn_remainder_scalar(ta, 0);
    th_check_values("remainder_scalar by 0.0", r, want, 2, 0);
    cn_release(r);
    cn_release(tz);
    cn_release(ta);
}

static void test_integer_remainder_by_zero_is_an_error(void) {
    const double a[] = {1, 2, 3}, b[] = {1, 0, 1};
    for (int d = 0; d < 2; d++) {
        cn_dtype dt = d ? CN_I64 : CN_I32;
        cn_tensor *ta = vec(a, 3, dt), *tb = vec(b, 3, dt);
        CHECK_FAILS(cn_remainder(ta, tb), CN_ERR_INVALID_ARG, "division by zero");
        CHECK_FAILS(cn_fmod(ta, tb), CN_ERR_INVALID_ARG, "division by zero");
        CHECK_FAILS(cn_remainder_scalar(ta, 0), CN_ERR_INVALID_ARG, "s = 0");
        CHECK_FAILS(cn_remainder_scalar(ta, 2.5), CN_ERR_INVALID_ARG, "not an integer");
        CHECK_FAILS(cn_remainder_scalar(ta, NAN), CN_ERR_INVALID_ARG, "remainder_scalar");
        const double want[] = {1, 2, 3};
        th_check_values("the inputs are untouched", ta, want, 3, 0);
        cn_release(tb);
        cn_release(ta);
    }
}

static void test_remainder_scalar_follows_the_divisor_sign(void) {
    const double a[] = {5, -5, 0, 7.5};
    const double want_pos[] = {2, 1, 0, 1.5}, want_neg[] = {-1, -2, 0, -1.5};
    cn_tensor *t = vec(a, 4, CN_F64);
    cn_tensor *p = cn_remainder_scalar(t, 3), *n = cn_remainder_scalar(t, -3);
    th_check_values("remainder_scalar 3", p, want_pos, 4, 0);
    th_check_values("remainder_scalar -3", n, want_neg, 4, 0);
    cn_release(n);
    cn_release(p);
    cn_release(t);
}

/* ---- hypot, is_nan, is_inf ----------------------------------------------------------------- */

static void test_hypot_does_not_overflow(void) {
    const double a[] = {3e200, 3, -5, INFINITY}, b[] = {4e200, 4, 12, NAN};
    const double want[] = {5e200, 5, 13, INFINITY}; /* hypot(inf, NaN) is inf (C, PyTorch) */
    cn_tensor *ta = vec(a, 4, CN_F64), *tb = vec(b, 4, CN_F64);
    cn_tensor *h = cn_hypot(ta, tb);
    th_check_values("hypot", h, want, 4, 1e-15);
    cn_release(h);
    cn_tensor *i = vec(a, 4, CN_I64);
    CHECK_FAILS(cn_hypot(i, i), CN_ERR_KIND, "hypot");
    cn_release(i);
    cn_release(tb);
    cn_release(ta);
}

static void test_is_nan_and_is_inf_on_floats_and_ints(void) {
    const double v[] = {0, -0.0, NAN, INFINITY, -INFINITY, 1e308, -1};
    const double nan_want[] = {0, 0, 1, 0, 0, 0, 0}, inf_want[] = {0, 0, 0, 1, 1, 0, 0};
    const cn_dtype fl[] = {CN_F32, CN_F64};
    for (int d = 0; d < 2; d++) {
        cn_tensor *t = vec(v, N_OF(v), fl[d]);
        cn_tensor *n = cn_is_nan(t), *i = cn_is_inf(t);
        CHECK(n && cn_dtype_of(n) == CN_BOOL && i && cn_dtype_of(i) == CN_BOOL);
        th_check_values("is_nan", n, nan_want, N_OF(v), 0);
        /* 1e308 is inf once stored as f32 */
        double want[7];
        for (int k = 0; k < 7; k++)
            want[k] = fl[d] == CN_F32 && k == 5 ? 1 : inf_want[k];
        th_check_values("is_inf", i, want, N_OF(v), 0);
        cn_release(i);
        cn_release(n);
        cn_release(t);
    }
    const double iv[] = {0, -1, 2147483647.0}, none[] = {0, 0, 0};
    cn_tensor *t = vec(iv, 3, CN_I32);
    cn_tensor *n = cn_is_nan(t), *i = cn_is_inf(t);
    th_check_values("is_nan of ints", n, none, 3, 0);
    th_check_values("is_inf of ints", i, none, 3, 0);
    cn_release(i);
    cn_release(n);
    cn_release(t);
    cn_tensor *b = vec(iv, 3, CN_BOOL);
    CHECK_FAILS(cn_is_nan(b), CN_ERR_KIND, "is_nan");
    cn_release(b);
}

/* ---- bitwise -------------------------------------------------------------------------------- */

/* Shift counts at and past both ends of i32 and i64, as PyTorch gives them: left shifts drop the
 * bits shifted out and give 0 past the width or below 0; right shifts fill in the sign, and past
 * the width or below 0 shift by width - 1. */
static void test_shift_counts_at_the_edges(void) {
    const double x[] = {5, -5, 1, -1, 3, -8, 7, -7};
    const double y32[] = {-1, -1, 31, 31, 32, 32, 33, 100};
    const double shl32[] = {0, 0, -2147483648.0, -2147483648.0, 0, 0, 0, 0};
    const double shr32[] = {0, -1, 0, -1, 0, -1, 0, -1};
    cn_tensor *tx = vec(x, 8, CN_I32), *ty = vec(y32, 8, CN_I32);
    cn_tensor *l = cn_bitwise_left_shift(tx, ty), *r = cn_bitwise_right_shift(tx, ty);
    th_check_values("i32 left shift edges", l, shl32, 8, 0);
    th_check_values("i32 right shift edges", r, shr32, 8, 0);
    cn_release(r);
    cn_release(l);
    cn_release(ty);
    cn_release(tx);

    const double y64[] = {-3, 0, 63, 63, 64, 64, 2, 1};
    const double shl64[] = {0, -5, -9223372036854775808.0, -9223372036854775808.0, 0, 0, 28, -14};
    const double shr64[] = {0, -5, 0, -1, 0, -1, 1, -4};
    tx = vec(x, 8, CN_I64), ty = vec(y64, 8, CN_I64);
    l = cn_bitwise_left_shift(tx, ty), r = cn_bitwise_right_shift(tx, ty);
    th_check_values("i64 left shift edges", l, shl64, 8, 0);
    th_check_values("i64 right shift edges", r, shr64, 8, 0);
    cn_release(r);
    cn_release(l);
    /* the scalar forms agree */
    const double shl3[] = {40, -40, 8, -8, 24, -64, 56, -56};
    l = cn_bitwise_left_shift_scalar(tx, 3);
    th_check_values("left shift by 3", l, shl3, 8, 0);
    cn_release(l);
    const double all_sign[] = {0, -1, 0, -1, 0, -1, 0, -1};
    r = cn_bitwise_right_shift_scalar(tx, 64);
    th_check_values("right shift by 64", r, all_sign, 8, 0);
    cn_release(r);
    r = cn_bitwise_right_shift_scalar(tx, -1);
    th_check_values("right shift by -1", r, all_sign, 8, 0);
    cn_release(r);
    cn_release(ty);
    cn_release(tx);
}

static void test_bitwise_truth_on_i32(void) {
    const double a[] = {12, -1, 0x7fffffff, -2147483648.0}, b[] = {10, 5, -1, -1};
    const double and_[] = {8, 5, 0x7fffffff, -2147483648.0}, or_[] = {14, -1, -1, -1};
    const double xor_[] = {6, -6, -2147483648.0, 0x7fffffff};
    const double not_[] = {-13, 0, -2147483648.0, 0x7fffffff};
    cn_tensor *ta = vec(a, 4, CN_I32), *tb = vec(b, 4, CN_I32);
    cn_tensor *r[4] = {cn_bitwise_and(ta, tb), cn_bitwise_or(ta, tb), cn_bitwise_xor(ta, tb),
                       cn_bitwise_not(ta)};
    th_check_values("and", r[0], and_, 4, 0);
    th_check_values("or", r[1], or_, 4, 0);
    th_check_values("xor", r[2], xor_, 4, 0);
    th_check_values("not", r[3], not_, 4, 0);
    for (int k = 0; k < 4; k++)
        cn_release(r[k]);
    cn_tensor *s[3] = {cn_bitwise_and_scalar(ta, -1), cn_bitwise_or_scalar(ta, 0),
                       cn_bitwise_xor_scalar(ta, -1)};
    th_check_values("and -1", s[0], a, 4, 0);
    th_check_values("or 0", s[1], a, 4, 0);
    th_check_values("xor -1", s[2], not_, 4, 0);
    for (int k = 0; k < 3; k++)
        cn_release(s[k]);
    cn_release(tb);
    cn_release(ta);
}

/* Bitwise ops on floats, bools and u8, and scalars that are no integer of x's dtype: errors that
 * name the op and say what to use instead. */
static void test_bitwise_misuse_is_a_clear_error(void) {
    const double v[] = {1, 2};
    cn_tensor *f = vec(v, 2, CN_F32), *b = vec(v, 2, CN_BOOL), *u = vec(v, 2, CN_U8);
    cn_tensor *i = vec(v, 2, CN_I32), *j = vec(v, 2, CN_I64);
    CHECK_FAILS(cn_bitwise_and(f, f), CN_ERR_KIND, "bitwise_and");
    CHECK_FAILS(cn_bitwise_or(b, b), CN_ERR_KIND, "bitwise_or");
    CHECK_FAILS(cn_bitwise_xor(u, u), CN_ERR_DTYPE, "u8");
    CHECK_FAILS(cn_bitwise_not(f), CN_ERR_KIND, "bitwise_not");
    CHECK_FAILS(cn_bitwise_left_shift(i, j), CN_ERR_DTYPE, "bitwise_left_shift");
    CHECK_FAILS(cn_bitwise_right_shift_scalar(f, 1), CN_ERR_KIND, "bitwise_right_shift_scalar");
    CHECK_FAILS(cn_bitwise_and_scalar(i, 1.5), CN_ERR_INVALID_ARG, "not an integer");
    CHECK_FAILS(cn_bitwise_or_scalar(i, 4e9), CN_ERR_INVALID_ARG, "out of range");
    CHECK_FAILS(cn_bitwise_xor_scalar(j, NAN), CN_ERR_INVALID_ARG, "NaN");
    CHECK_FAILS(cn_logical_xor(i, i), CN_ERR_KIND, "logical_xor");
    CHECK_FAILS(cn_remainder(i, j), CN_ERR_DTYPE, "remainder");
    cn_release(j);
    cn_release(i);
    cn_release(u);
    cn_release(b);
    cn_release(f);
}

static void test_logical_xor_truth_table(void) {
    const double a[] = {0, 0, 1, 1}, b[] = {0, 1, 0, 1}, want[] = {0, 1, 1, 0};
    cn_tensor *ta = vec(a, 4, CN_BOOL), *tb = vec(b, 4, CN_BOOL);
    cn_tensor *x = cn_logical_xor(ta, tb);
    CHECK(x && cn_dtype_of(x) == CN_BOOL);
    th_check_values("logical_xor", x, want, 4, 0);
    cn_release(x);
    cn_release(tb);
    cn_release(ta);
}

/* ---- integer powers -------------------------------------------------------------------------- */

/* i32 powers wrap as 32-bit multiplication does (3^40 mod 2^32, as PyTorch gives it); negative
 * exponents give 1 / x^-y truncated; pow_scalar refuses what PyTorch refuses. */
static void test_int_pow_wraps_and_truncates_negative_exponents(void) {
    const double x[] = {3, 2, -3, 1, -1, -1, 0, 0, 5};
    const double y[] = {40, 31, 3, -7, -3, -4, 0, -1, -2};
    const double want[] = {689956897, -2147483648.0, -27, 1, -1, 1, 1, 0, 0};
    cn_tensor *tx = vec(x, 9, CN_I32), *ty = vec(y, 9, CN_I32);
    cn_tensor *p = cn_pow(tx, ty);
    CHECK(p && cn_dtype_of(p) == CN_I32);
    th_check_values("i32 pow", p, want, 9, 0);
    cn_release(p);
    const double cube[] = {27, 8, -27, 1, -1, -1, 0, 0, 125};
    p = cn_pow_scalar(tx, 3);
    th_check_values("i32 pow_scalar 3", p, cube, 9, 0);
    cn_release(p);
    CHECK_FAILS(cn_pow_scalar(tx, -1), CN_ERR_INVALID_ARG, "negative powers");
    CHECK_FAILS(cn_pow_scalar(tx, 0.5), CN_ERR_INVALID_ARG, "whole exponent");
    cn_release(ty);
    cn_release(tx);
}

/* ---- comparisons with a scalar ------------------------------------------------------------- */

typedef cn_tensor *(*cmp_fn)(cn_tensor *, double);
static const cmp_fn cmps[6] = {cn_eq_scalar, cn_ne_scalar, cn_lt_scalar,
                               cn_le_scalar, cn_gt_scalar, cn_ge_scalar};

/* x against s with every comparison; want[k][i] for eq, ne, lt, le, gt, ge. */
static void check_compares(const char *what, cn_tensor *x, double s, const double want[6][3]) {
    static const char *const names[6] = {"eq", "ne", "lt", "le", "gt", "ge"};
    for (int k = 0; k < 6; k++) {
        char label[128];
        snprintf(label, sizeof label, "%s: %s %g", what, names[k], s);
        cn_tensor *y = cmps[k](x, s);
        CHECK(y && cn_dtype_of(y) == CN_BOOL);
        th_check_values(label, y, want[k], 3, 0);
        cn_release(y);
    }
}

/* Integers against scalars past their range, fractional, NaN, and 2^53 (where a comparison in
 * doubles would round the i64 2^53 + 1 down to it): exact answers. */
static void test_int_compare_with_a_scalar_is_exact(void) {
    const int64_t big[3] = {INT64_MAX, INT64_MIN, 9007199254740993LL}; /* 2^53 + 1 */
    const int64_t shape[1] = {3};
    cn_tensor *x = cn_from_data(big, shape, 1, CN_I64, cn_cpu());
    const double at_2_63[6][3] = {{0, 0, 0}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
    check_compares("i64 vs 2^63", x, 0x1p63, at_2_63);
    const double at_min[6][3] = {{0, 1, 0}, {1, 0, 1}, {0, 0, 0}, {0, 1, 0}, {1, 0, 1}, {1, 1, 1}};
    check_compares("i64 vs -2^63", x, -0x1p63, at_min);
    const double at_2_53[6][3] = {{0, 0, 0}, {1, 1, 1}, {0, 1, 0}, {0, 1, 0}, {1, 0, 1}, {1, 0, 1}};
    check_compares("i64 vs 2^53", x, 0x1p53, at_2_53);
    const double at_nan[6][3] = {{0, 0, 0}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}};
    check_compares("i64 vs NaN", x, NAN, at_nan);
    cn_release(x);
    const double small[3] = {2, 3, -3};
    cn_tensor *y = vec(small, 3, CN_I32);
    const double at_half[6][3] = {{0, 0, 0}, {1, 1, 1}, {1, 0, 1}, {1, 0, 1}, {0, 1, 0}, {0, 1, 0}};
    check_compares("i32 vs 2.5", y, 2.5, at_half);
    const double at_far[6][3] = {{0, 0, 0}, {1, 1, 1}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}};
    check_compares("i32 vs 1e10", y, 1e10, at_far);
    check_compares("i32 vs inf", y, INFINITY, at_far);
    const double at_neg_far[6][3] = {{0, 0, 0}, {1, 1, 1}, {0, 0, 0},
                                     {0, 0, 0}, {1, 1, 1}, {1, 1, 1}};
    check_compares("i32 vs -1e10", y, -1e10, at_neg_far);
    const double at_3[6][3] = {{0, 1, 0}, {1, 0, 1}, {1, 0, 1}, {1, 1, 1}, {0, 0, 0}, {0, 1, 0}};
    check_compares("i32 vs 3", y, 3, at_3);
    cn_tensor *b = vec(small, 3, CN_BOOL);
    CHECK_FAILS(cn_lt_scalar(b, 1), CN_ERR_KIND, "lt_scalar");
    cn_release(b);
    cn_release(y);
}

/* On f32 the scalar is rounded to f32 first, as PyTorch converts it: 0.1f == 0.1. */
static void test_float_compare_rounds_the_scalar_to_the_dtype(void) {
    const double v[3] = {0.1, 0.2, NAN};
    cn_tensor *x = vec(v, 3, CN_F32);
    const double at_01[6][3] = {{1, 0, 0}, {0, 1, 1}, {0, 0, 0}, {1, 0, 0}, {0, 1, 0}, {1, 1, 0}};
    check_compares("f32 vs 0.1", x, 0.1, at_01);
    cn_release(x);
}

/* ---- activations ---------------------------------------------------------------------------- */

/* log_sigmoid far out, in both dtypes: no overflow to -inf or NaN, and no rounding of the tiny
 * values at large x to 0 (values from torch.nn.functional.logsigmoid in each dtype). */
static void test_log_sigmoid_is_exact_far_out(void) {
    const double x[] = {-1000, 40, 90, 0};
    const double want64[] = {-1000, -4.2483542552915889e-18, -8.1940126239905147e-40,
                             -0.69314718055994531};
    const double want32[] = {-1000, -4.24835413e-18, -8.19400869e-40, -0.693147182};
    for (int d = 0; d < 2; d++) {
        cn_tensor *t = vec(x, 4, d ? CN_F32 : CN_F64), *y = cn_log_sigmoid(t);
        double got[4];
        CHECK(y && th_read(y, got) == 4);
        const double *want = d ? want32 : want64;
        for (int k = 0; y && k < 4; k++) {
            double rel = fabs(got[k] - want[k]) / fabs(want[k]);
            if (!(rel <= (d ? 1e-6 : 1e-13))) {
                fprintf(stderr, "log_sigmoid(%g) in %s = %.17g, want %.17g\n", x[k],
                        d ? "f32" : "f64", got[k], want[k]);
                th_checks_failed++;
            }
        }
        cn_release(y);
        cn_release(t);
    }
}

/* softmin against torch.nn.functional.softmin's values (float64), along both dims. */
static void test_softmin_matches_pytorch(void) {
    const double x[] = {1.0, -2.0, 0.5, 3.0, 3.0, -1.0};
    const double dim1[] = {0.043986480292057845, 0.88349207402719454,  0.072521445680747754,
                           0.017668422014048044, 0.017668422014048044, 0.96466315597190377};
    const double dim0[] = {0.88079707797788231, 0.99330714907571527,   0.18242552380635632,
                           0.11920292202211755, 0.0066928509242848563, 0.81757447619364365};
    const int64_t shape[2] = {2, 3};
    cn_tensor *t = th_tensor(x, shape, 2, CN_F64);
    cn_tensor *a = cn_softmin(t, 1), *b = cn_softmin(t, -2);
    th_check_values("softmin dim 1", a, dim1, 6, 1e-15);
    th_check_values("softmin dim 0", b, dim0, 6, 1e-15);
    cn_release(b);
    cn_release(a);
    cn_release(t);
}

/* Bad attributes and shapes of the activations: errors naming the op and the argument. */
static void test_activation_misuse_is_a_clear_error(void) {
    const double v[] = {1, -2, 3, -4, 5, -6};
    const int64_t s23[2] = {2, 3}, s22[2] = {2, 2};
    cn_tensor *x = th_tensor(v, s23, 2, CN_F32), *xi = th_tensor(v, s23, 2, CN_I32);
    cn_tensor *w2 = vec(v, 2, CN_F32), *w3 = vec(v, 3, CN_F32), *w3d = vec(v, 3, CN_F64);
    cn_tensor *wm = th_tensor(v, s22, 2, CN_F32);
    CHECK_FAILS(cn_leaky_relu(x, NAN), CN_ERR_INVALID_ARG, "negative_slope");
    CHECK_FAILS(cn_leaky_relu(xi, 0.1), CN_ERR_KIND, "leaky_relu");
    CHECK_FAILS(cn_elu(x, INFINITY), CN_ERR_INVALID_ARG, "alpha");
    CHECK_FAILS(cn_softplus(x, 0, 20), CN_ERR_INVALID_ARG, "beta");
    CHECK_FAILS(cn_softplus(x, 1, NAN), CN_ERR_INVALID_ARG, "threshold");
    CHECK_FAILS(cn_prelu(x, w2), CN_ERR_SHAPE, "'weight'");
    CHECK_FAILS(cn_prelu(x, wm), CN_ERR_SHAPE, "prelu");
    CHECK_FAILS(cn_prelu(x, w3d), CN_ERR_DTYPE, "'weight'");
    CHECK_FAILS(cn_prelu(xi, w3), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_prelu(x, NULL), CN_ERR_NULL_ARG, "weight");
    CHECK_FAILS(cn_hard_sigmoid(xi), CN_ERR_KIND, "hard_sigmoid");
    CHECK_FAILS(cn_log_sigmoid(xi), CN_ERR_KIND, "log_sigmoid");
    CHECK_FAILS(cn_softmin(xi, 0), CN_ERR_KIND, "softmin");
    CHECK_FAILS(cn_softmin(x, 2), CN_ERR_INVALID_ARG, "softmin");
    /* a weight per channel broadcasts along dim 1 */
    cn_tensor *y = cn_prelu(x, w3);
    const double want[] = {1, 4, 3, -4, 5, -18}; /* w = [1, -2, 3] */
    th_check_values("prelu per channel", y, want, 6, 0);
    cn_release(y);
    cn_release(wm);
    cn_release(w3d);
    cn_release(w3);
    cn_release(w2);
    cn_release(xi);
    cn_release(x);
}

int main(void) {
    RUN(test_remainder_and_fmod_signs_on_every_dtype);
    RUN(test_float_remainder_by_zero_is_nan);
    RUN(test_integer_remainder_by_zero_is_an_error);
    RUN(test_remainder_scalar_follows_the_divisor_sign);
    RUN(test_hypot_does_not_overflow);
    RUN(test_is_nan_and_is_inf_on_floats_and_ints);
    RUN(test_shift_counts_at_the_edges);
    RUN(test_bitwise_truth_on_i32);
    RUN(test_bitwise_misuse_is_a_clear_error);
    RUN(test_logical_xor_truth_table);
    RUN(test_int_pow_wraps_and_truncates_negative_exponents);
    RUN(test_int_compare_with_a_scalar_is_exact);
    RUN(test_float_compare_rounds_the_scalar_to_the_dtype);
    RUN(test_log_sigmoid_is_exact_far_out);
    RUN(test_softmin_matches_pytorch);
    RUN(test_activation_misuse_is_a_clear_error);
    return th_finish();
}
