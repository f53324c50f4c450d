/* The resampling ops and signal windows of issue 16 through the public API, beyond the op table's
 * PyTorch cases (tests/test_op_table.c): small results worked out by hand (the comments show how),
 * strided inputs, the gradient's conservation of mass, and every misuse: a clear status and message
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
 * scale 1.2 (out 3 = in) floor(o / 1.2) = 0, 0, 1: [1, 1, 2] (PyTorch's 1-D kernel; its 2-D
 * one takes out == in as the identity: [1, 2, 3] along W of a [1, 1, 1, 3]). */
static void test_values_by_hand(void) {
    cn_scope_begin();
    const int64_t s2[3] = {1, 1, 2}, s3[3] = {1, 1, 3}, four[1] = {4}, five[1] = {5};
    const double v2[2] = {0, 1}, v3[3] = {1, 2, 3};
    cn_tensor *x = f64(v2, s2, 3), *y = f64(v3, s3, 3);
    const double al[4] = {0, 1.0 / 3, 2.0 / 3, 1}, hp[4] = {0, 0.25, 0.75, 1}, nn[4] = {0, 0, 1, 1};
    th_check_values("linear align", cn_interpolate(x, 1, four, NULL, CN_INTERP_LINEAR, 1), al, 4,
                    1e-15);
    th_check_values("linear", cn_interpolate(x, 1, four, NULL, CN_INTERP_LINEAR, 0), hp, 4, 0);
    th_check_values("nearest 2x", cn_interpolate(x, 1, four, NULL, CN_INTERP_NEAREST, 0), nn, 4, 0);
    const double n5[5] = {1, 1, 2, 2, 3};
    th_check_values("nearest 5", cn_interpolate(y, 1, five, NULL, CN_INTERP_NEAREST, 0), n5, 5, 0);
    const double s17[1] = {1.7}, s12[1] = {1.2};
    th_check_values("nearest scale", cn_interpolate(y, 1, NULL, s17, CN_INTERP_NEAREST, 0), n5, 5,
                    0);
    const double n3[3] = {1, 1, 2}, s2d[2] = {1, 1.2};
    const int64_t s13[4] = {1, 1, 1, 3};
    th_check_values("nearest same 1-D", cn_interpolate(y, 1, NULL, s12, CN_INTERP_NEAREST, 0), n3,
                    3, 0);
    th_check_values("nearest same 2-D",
                    cn_interpolate(f64(v3, s13, 4), 2, NULL, s2d, CN_INTERP_NEAREST, 0), v3, 3, 0);
    /* bicubic of a constant is the constant (the weights sum to 1, border taps clamped) */
    const int64_t s44[4] = {1, 1, 2, 2}, out[2] = {3, 5};
    const double c4[4] = {2.5, 2.5, 2.5, 2.5};
    double c15[15];
    for (int i = 0; i < 15; i++)
        c15[i] = 2.5;
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
    for (int i = 0; i < 40; i++)
        v[i] = (i * 7 % 11) * 0.25 - 1;
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
    for (int i = 0; i < 60; i++)
        v[i] = i * 0.1;
    for (int mode = 0; mode < 3; mode++)
        for (int k = 0; k < 3; k++)
            for (int align = 0; align < (mode ? 2 : 1); align++) {
                cn_tensor *x = cn_require_grad(cn_from_inner(f64(v, s, 4), cn_autodiff(cn_cpu())));
                cn_tensor *y = cn_interpolate(x, 2, sizes[k], NULL, (cn_interp_mode)mode, align);
                cn_grads *g = cn_backward(cn_sum(y));
                CHECK(g != NULL);
                if (!g) continue;
                double gx[60], total = 0;
                CHECK(th_read(cn_grad(g, x), gx) == 60);
                for (int i = 0; i < 60; i++)
                    total += gx[i];
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

/* x = [[1, 2], [3, 4]] sampled at (gx, gy):
 * (0, 0), either alignment: the centre, the mean 2.5.
 * (-1, -1), align_corners: the first pixel's centre: 1.
 * (-1, -1), half-pixel: the outer corner, p = ((-1 + 1) * 2 - 1) / 2 = -0.5 in x and y: taps -1
 *   (outside) and 0 with weights 1/2 each way. zeros: 1 * 1/4 = 0.25; border (p clipped to 0):
 *   1; reflection (-0.5 reflects to itself, then is clipped to 0): 1.
 * (0.75, -1), nearest, half-pixel: px = (1.75 * 2 - 1) / 2 = 1.25 -> 1, py = -0.5 -> rounds
 *   half to even, to -0 = 0: x[0][1] = 2. */
static void test_grid_sample_by_hand(void) {
    cn_scope_begin();
    const int64_t s[4] = {1, 1, 2, 2}, g1[4] = {1, 1, 1, 2};
    const double xv[4] = {1, 2, 3, 4}, c[2] = {0, 0}, corner[2] = {-1, -1}, nv[2] = {0.75, -1};
    cn_tensor *x = f64(xv, s, 4), *gc = f64(c, g1, 4), *gk = f64(corner, g1, 4);
    const double mean[1] = {2.5}, one[1] = {1}, quarter[1] = {0.25}, two[1] = {2};
    th_check_values("centre", cn_grid_sample_2d(x, gc, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0),
                    mean, 1, 0);
    th_check_values("centre aligned",
                    cn_grid_sample_2d(x, gc, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 1), mean, 1, 0);
    th_check_values("corner aligned",
                    cn_grid_sample_2d(x, gk, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 1), one, 1, 0);
    th_check_values("corner zeros",
                    cn_grid_sample_2d(x, gk, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0), quarter, 1,
                    0);
    th_check_values("corner border",
                    cn_grid_sample_2d(x, gk, CN_GRID_BILINEAR, CN_GRID_PAD_BORDER, 0), one, 1, 0);
    th_check_values("corner reflection",
                    cn_grid_sample_2d(x, gk, CN_GRID_BILINEAR, CN_GRID_PAD_REFLECTION, 0), one, 1,
                    0);
    th_check_values("nearest half to even",
                    cn_grid_sample_2d(x, f64(nv, g1, 4), CN_GRID_NEAREST, CN_GRID_PAD_ZEROS, 0),
                    two, 1, 0);
    cn_scope_end();
}

/* ---- windows -------------------------------------------------------------------------------- */

/* Six entries of each window, periodic and symmetric, as torch.*_window(6, periodic,
 * dtype=torch.float64) prints them (PyTorch 2.15, %.17g); by hand, the periodic hann is
 * 0.5 - 0.5 cos(pi k / 3) = 0, 1/4, 3/4, 1, 3/4, 1/4. n = 1 is [1], n = 0 empty. */
static void test_windows(void) {
    cn_scope_begin();
    static const double want[3][2][6] = {
        {{0, 0.24999999999999994, 0.74999999999999989, 1, 0.75000000000000022, 0.25000000000000033},
         {0, 0.34549150281252627, 0.90450849718747373, 0.90450849718747373, 0.34549150281252639,
          0}},
        {{0.080000000000000016, 0.30999999999999994, 0.76999999999999991, 1, 0.77000000000000024,
          0.31000000000000033},
         {0.080000000000000016, 0.39785218258752419, 0.91214781741247575, 0.91214781741247597,
          0.39785218258752431, 0.080000000000000016}},
        {{0, 0.12999999999999995, 0.62999999999999989, 1, 0.63000000000000034, 0.13000000000000023},
         {0, 0.20077014326253045, 0.84922985673746942, 0.84922985673746965, 0.20077014326253056,
          0}}};
    cn_tensor *(*const fns[3])(int64_t, int, cn_dtype,
                               cn_device) = {cn_hann_window, cn_hamming_window, cn_blackman_window};
    for (int f = 0; f < 3; f++)
        for (int p = 0; p < 2; p++) {
            th_check_values("window f64", fns[f](6, !p, CN_F64, cn_cpu()), want[f][p], 6, 1e-15);
            cn_tensor *w32 = fns[f](6, !p, CN_F32, cn_cpu());
            CHECK(w32 && cn_dtype_of(w32) == CN_F32);
            th_check_values("window f32", w32, want[f][p], 6, 1e-7);
            const double one[1] = {1};
            th_check_values("window of 1", fns[f](1, !p, CN_F64, cn_cpu()), one, 1, 0);
            cn_tensor *e = fns[f](0, !p, CN_F64, cn_cpu());
            CHECK(e && cn_numel(e) == 0 && cn_ndim(e) == 1);
        }
    /* misuse: a negative n, a non-float dtype, periodic not 0 or 1 */
    int64_t live = cn_live_tensors();
    CHECK_FAILS(cn_hann_window(-1, 1, CN_F32, cn_cpu()), CN_ERR_INVALID_ARG, "'n' is -1");
    CHECK_FAILS(cn_hamming_window(4, 1, CN_I32, cn_cpu()), CN_ERR_DTYPE, "not a float dtype");
    CHECK_FAILS(cn_blackman_window(4, 2, CN_F64, cn_cpu()), CN_ERR_INVALID_ARG, "'periodic'");
    CHECK_FAILS(cn_hann_window(INT64_MAX, 1, CN_F64, cn_cpu()), CN_ERR_OVERFLOW, "too large");
    CHECK(cn_live_tensors() == live);
    cn_scope_end();
}

/* ---- misuse: the status, the call and argument named, nothing leaked --------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t s4[4] = {1, 2, 3, 4}, s3[3] = {1, 2, 3}, s2[2] = {2, 3}, e4[4] = {1, 2, 0, 4};
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = i;
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

    /* grid_sample_2d: NULLs, kinds and dtypes, shapes (grid's N, its last dim, x's rank and
     * empty planes), the mode, padding and align_corners */
    const int64_t gs[4] = {1, 3, 3, 2}, gbad[4] = {1, 3, 3, 3}, gn[4] = {2, 3, 3, 2};
    cn_tensor *grid = cn_zeros(gs, 4, CN_F64, cn_cpu()), *g32 = cn_cast(grid, CN_F32);
    cn_tensor *g3 = cn_zeros(gbad, 4, CN_F64, cn_cpu()), *g2n = cn_zeros(gn, 4, CN_F64, cn_cpu());
    live = cn_live_tensors();
    CHECK_FAILS(cn_grid_sample_2d(NULL, grid, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0),
                CN_ERR_NULL_ARG, "x");
    CHECK_FAILS(cn_grid_sample_2d(x, NULL, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0), CN_ERR_NULL_ARG,
                "grid");
    CHECK_FAILS(cn_grid_sample_2d(xi, grid, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0), CN_ERR_KIND,
                "'x'");
    CHECK_FAILS(cn_grid_sample_2d(x, g32, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0), CN_ERR_DTYPE,
                "grid");
    CHECK_FAILS(cn_grid_sample_2d(x, g3, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0), CN_ERR_SHAPE,
                "[N, OH, OW, 2]");
    CHECK_FAILS(cn_grid_sample_2d(x, g2n, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0), CN_ERR_SHAPE,
                "with x's N");
    CHECK_FAILS(cn_grid_sample_2d(x1, grid, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0), CN_ERR_SHAPE,
                "[N, C, H, W]");
    CHECK_FAILS(cn_grid_sample_2d(empty, grid, CN_GRID_BILINEAR, CN_GRID_PAD_ZEROS, 0),
                CN_ERR_SHAPE, "H, W >= 1");
    CHECK_FAILS(cn_grid_sample_2d(x, grid, (cn_grid_mode)2, CN_GRID_PAD_ZEROS, 0),
                CN_ERR_INVALID_ARG, "'mode' 2");
    CHECK_FAILS(cn_grid_sample_2d(x, grid, CN_GRID_BILINEAR, (cn_grid_padding)3, 0),
                CN_ERR_INVALID_ARG, "'padding' 3");
    CHECK_FAILS(cn_grid_sample_2d(x, grid, CN_GRID_NEAREST, CN_GRID_PAD_BORDER, -1),
                CN_ERR_INVALID_ARG, "'align_corners' is -1");

    /* nothing leaked, x untouched */
    CHECK(cn_live_tensors() == live);
    th_check_values("x after the misuse", x, v, 24, 0);
    cn_scope_end();
}

int main(void) {
    RUN(test_values_by_hand);
    RUN(test_strided_input);
    RUN(test_gradient_conserves_mass);
    RUN(test_grid_sample_by_hand);
    RUN(test_windows);
    RUN(test_misuse);
    return th_finish();
}
