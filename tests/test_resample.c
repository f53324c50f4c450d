/* The resampling ops of issue 16 through the public API, beyond the op table's PyTorch cases
 * (tests/test_op_table.c): small results worked out by hand (the comments show how), strided
 * inputs, the gradient's conservation of mass, and every misuse: a clear status and message
 * naming the call and the argument, the inputs untouched and nothing leaked. */
#include "harness.h"

/* Every test runs in a scope, which releases its inputs and results at its end. */
static cn_tensor *f64(const double *v, const int64_t *shape, int nd) {
    return th_tensor(v, shape, nd, CN_F64);
}

/* ---- values by hand ------------------------------------------------------------------------ */

/* x = [0, 1] (L = 2) to L = 4.
 * linear, align_corners: src = o * (2 - 1) / (4 - 1) = 0, 1/3, 2/3, 1: [0, 1/3, 2/3, 1].
 * linear, half-pixel: src = (o + 0.5) / 2 - 0.5 = -0.25 (clamped to 0), 0.25, 0.75, 1.25 (the
 *   last entry with both taps on 1): [0, 0.25, 0.75, 1].
 * nearest: 4 = 2 * 2, entry o / 2: [0, 0, 1, 1].
 * x = [1, 2, 3] to L = 5, nearest: floor(o * 0.6) = 0, 0, 1, 1, 2: [1, 1, 2, 2, 3]; with the
 * scale factor 1.7 (out floor(5.1) = 5), floor(o / 1.7) = 0, 0, 1, 1, 2 as well, and with
 * scale 1.2 (out 3 = in) nearest is the identity (PyTorch's shortcut). */
static void test_values_by_hand(void) {
    cn_scope_begin();
    const int64_t s2[3] = {1, 1, 2}, s3[3] = {1, 1, 3}, four[1] = {4}, five[1] = {5};
    const double v2[2] = {0, 1}, v3[3] = {1, 2, 3};
    cn_tensor *x = f64(v2, s2, 3), *y = f64(v3, s3, 3);
    const double al[4] = {0, 1.0 / 3, 2.0 / 3, 1}, hp[4] = {0, 0.25, 0.75, 1}, nn[4] = {0, 0, 1, 1};
    th_check_values("linear align", cn_interpolate(x, 1, four, NULL, CN_INTERP_LINEAR, 1), al, 4,
                    1e-15);
    th_check_values("linear", cn_interpolate(x, 1, four, NULL, CN_INTERP_LINEAR, 0), hp, 4, 0);
    th_check_values("nearest 2x", cn_interpolate(x, 1, four, NULL, CN_INTERP_NEAREST, 0), nn, 4,
                    0);
    const double n5[5] = {1, 1, 2, 2, 3};
    th_check_values("nearest 5", cn_interpolate(y, 1, five, NULL, CN_INTERP_NEAREST, 0), n5, 5, 0);
    const double s17[1] = {1.7}, s12[1] = {1.2};
    th_check_values("nearest scale", cn_interpolate(y, 1, NULL, s17, CN_INTERP_NEAREST, 0), n5, 5,
                    0);
    th_check_values("nearest same", cn_interpolate(y, 1, NULL, s12, CN_INTERP_NEAREST, 0), v3, 3,
                    0);
    /* bicubic of a constant is the constant (the weights sum to 1, border taps clamped) */
    const int64_t s44[4] = {1, 1, 2, 2}, out[2] = {3, 5};
    const double c4[4] = {2.5, 2.5, 2.5, 2.5};
    double c15[15];
    for (int i = 0; i < 15; i++) c15[i] = 2.5;
    th_check_values("bicubic constant",
                    cn_interpolate(f64(c4, s44, 4), 2, out, NULL, CN_INTERP_BICUBIC, 0), c15, 15,
                    1e-14);
    cn_scope_end();
}

/* A transposed (strided) x gives what its contiguous copy gives. */
static void test_strided_input(void) {
    cn_scope_begin();
    const int64_t s[4] = {1, 2, 5, 4}, out[2] = {7, 6};
    double v[40];
    for (int i = 0; i < 40; i++) v[i] = (i * 7 % 11) * 0.25 - 1;
    cn_tensor *t = cn_transpose(f64(v, s, 4), 2, 3), *c = cn_clone(t);
    for (int mode = 0; mode < 3; mode++) {
        cn_tensor *a = cn_interpolate(t, 2, out, NULL, (cn_interp_mode)mode, 0);
        cn_tensor *b = cn_interpolate(c, 2, out, NULL, (cn_interp_mode)mode, 0);
        double want[2 * 7 * 6];
        CHECK(th_read(b, want) == 84);
        th_check_values("strided x", a, want, 84, 0);
    }
    cn_scope_end();
}

/* The gradient of sum(interpolate(x)) puts every output's unit weight back on x: the entries
 * of x's gradient sum to the output's size (linear and bicubic weights sum to 1 per output
 * entry, nearest reads one entry), downsampling included (entries nobody reads get 0). */
static void test_gradient_conserves_mass(void) {
    cn_scope_begin();
    const int64_t s[4] = {2, 1, 6, 5}, sizes[3][2] = {{11, 3}, {2, 9}, {6, 5}};
    double v[60];
    for (int i = 0; i < 60; i++) v[i] = i * 0.1;
    for (int mode = 0; mode < 3; mode++)
        for (int k = 0; k < 3; k++)
            for (int align = 0; align < (mode ? 2 : 1); align++) {
                cn_tensor *x = cn_require_grad(
                    cn_from_inner(f64(v, s, 4), cn_autodiff(cn_cpu())));
                cn_tensor *y = cn_interpolate(x, 2, sizes[k], NULL, (cn_interp_mode)mode, align);
                cn_grads *g = cn_backward(cn_sum(y));
                CHECK(g != NULL);
                if (!g) continue;
                double gx[60], total = 0;
                CHECK(th_read(cn_grad(g, x), gx) == 60);
                for (int i = 0; i < 60; i++) total += gx[i];
                double want = 2.0 * (double)(sizes[k][0] * sizes[k][1]);
                if (fabs(total - want) > 1e-9) {
                    fprintf(stderr, "mode %d sizes %d align %d: gradient sums to %g, want %g\n",
                            mode, k, align, total, want);
                    th_checks_failed++;
                }
                cn_grads_free(g);
            }
    cn_scope_end();
}

/* ---- misuse: the status, the call and argument named, nothing leaked --------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t s4[4] = {1, 2, 3, 4}, s3[3] = {1, 2, 3}, s2[2] = {2, 3}, e4[4] = {1, 2, 0, 4};
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = i;
    cn_tensor *x = f64(v, s4, 4), *x1 = f64(v, s3, 3), *x2 = f64(v, s2, 2);
    cn_tensor *xi = cn_cast(x, CN_I32), *empty = cn_zeros(e4, 4, CN_F64, cn_cpu());
    const int64_t ok[2] = {5, 6}, zero[2] = {5, 0}, neg[2] = {-1, 2};
    const double sc[2] = {2, 2}, sc0[2] = {2, 0}, scnan[2] = {NAN, 1}, tiny[2] = {0.1, 1};
    const double scinf[2] = {INFINITY, 1}, huge[2] = {1e300, 1};
    int64_t live = cn_live_tensors();

    CHECK_FAILS(cn_interpolate(NULL, 2, ok, NULL, CN_INTERP_LINEAR, 0), CN_ERR_NULL_ARG, "x");
    CHECK_FAILS(cn_interpolate(xi, 2, ok, NULL, CN_INTERP_LINEAR, 0), CN_ERR_KIND, "'x'");
    /* rank and n */
    CHECK_FAILS(cn_interpolate(x, 3, ok, NULL, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG, "'n'");
    CHECK_FAILS(cn_interpolate(x, 1, ok, NULL, CN_INTERP_LINEAR, 0), CN_ERR_SHAPE,
                "must have 3 dims for n = 1");
    CHECK_FAILS(cn_interpolate(x2, 1, ok, NULL, CN_INTERP_LINEAR, 0), CN_ERR_SHAPE, "[N, C, L]");
    CHECK_FAILS(cn_interpolate(empty, 2, ok, NULL, CN_INTERP_LINEAR, 0), CN_ERR_SHAPE,
                "empty spatial dim 2");
    /* size and scale */
    CHECK_FAILS(cn_interpolate(x, 2, NULL, NULL, CN_INTERP_LINEAR, 0), CN_ERR_NULL_ARG,
                "both NULL");
    CHECK_FAILS(cn_interpolate(x, 2, ok, sc, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG,
                "both given");
    CHECK_FAILS(cn_interpolate(x, 2, zero, NULL, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG,
                "'size[1]' is 0");
    CHECK_FAILS(cn_interpolate(x, 2, neg, NULL, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG,
                "'size[0]' is -1");
    CHECK_FAILS(cn_interpolate(x, 2, NULL, sc0, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG,
                "'scale[1]'");
    CHECK_FAILS(cn_interpolate(x, 2, NULL, scnan, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG,
                "positive and finite");
    CHECK_FAILS(cn_interpolate(x, 2, NULL, scinf, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG,
                "positive and finite");
    CHECK_FAILS(cn_interpolate(x, 2, NULL, tiny, CN_INTERP_LINEAR, 0), CN_ERR_INVALID_ARG,
                "empty output");
    CHECK_FAILS(cn_interpolate(x, 2, NULL, huge, CN_INTERP_NEAREST, 0), CN_ERR_OVERFLOW,
                "beyond int64");
    /* mode and align_corners */
    CHECK_FAILS(cn_interpolate(x, 2, ok, NULL, (cn_interp_mode)3, 0), CN_ERR_INVALID_ARG,
                "'mode' 3");
    CHECK_FAILS(cn_interpolate(x, 2, ok, NULL, (cn_interp_mode)-1, 0), CN_ERR_INVALID_ARG,
                "not a cn_interp_mode");
    CHECK_FAILS(cn_interpolate(x1, 1, ok, NULL, CN_INTERP_BICUBIC, 0), CN_ERR_INVALID_ARG,
                "bicubic");
    CHECK_FAILS(cn_interpolate(x, 2, ok, NULL, CN_INTERP_NEAREST, 1), CN_ERR_INVALID_ARG,
                "'align_corners'");
    CHECK_FAILS(cn_interpolate(x, 2, ok, NULL, CN_INTERP_LINEAR, 2), CN_ERR_INVALID_ARG,
                "'align_corners' is 2");

    /* nothing leaked, x untouched */
    CHECK(cn_live_tensors() == live);
    th_check_values("x after the misuse", x, v, 24, 0);
    cn_scope_end();
}

int main(void) {
    RUN(test_values_by_hand);
    RUN(test_strided_input);
    RUN(test_gradient_conserves_mass);
    RUN(test_misuse);
    return th_finish();
}
