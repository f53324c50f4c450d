/* Padding and pooling of issue 16 through the public API, beyond the op table's PyTorch cases
 * (tests/test_op_table.c): avg_pool1d and max_pool1d (front-ends over the 2-D ops, so not rows of
 * their own), max pooling's ties, NaNs, dilation with ceil mode and windows of padding only, edge
 * shapes of pad (no entries, empty inputs and results, circular crops), and every misuse of pad,
 * the adaptive pools, the max pools and unfold4d / fold4d: a clear status and message naming the
 * call and the argument, the inputs untouched and nothing leaked. Expected values are worked out
 * by hand in the comments beside them. */
#include "harness.h"

#include <math.h>

static cn_tensor *f64(const double *v, const int64_t *shape, int nd) {
    return th_tensor(v, shape, nd, CN_F64);
}

/* A leaf on the autodiff CPU holding v. */
static cn_tensor *leaf(const double *v, const int64_t *shape, int nd) {
    return cn_require_grad(cn_from_inner(f64(v, shape, nd), cn_autodiff(cn_cpu())));
}

/* ---- avg_pool1d ----------------------------------------------------------------------------- */

/* x [1, 1, 5] = 1..5, kernel 3, stride 2, padding 1: windows (0, 1, 2), (2, 3, 4), (4, 5, 0)
 * with the padded zeros counted (PyTorch's count_include_pad default): [3 / 3, 9 / 3, 9 / 3] =
 * [1, 3, 3]. With L = sum(y * [1, 2, 4]) each window hands r / 3 to its entries: dL/dx =
 * [1/3, 1/3 + 2/3, 2/3, 2/3 + 4/3, 4/3]. Stride 0 is the kernel: kernel 2 gives [1.5, 3.5]. */
static void test_avg_pool1d(void) {
    cn_scope_begin();
    const int64_t s[3] = {1, 1, 5}, s3[3] = {1, 1, 3};
    const double xv[5] = {1, 2, 3, 4, 5}, rv[3] = {1, 2, 4}, want[3] = {1, 3, 3};
    const double want_dx[5] = {1.0 / 3, 1, 2.0 / 3, 2, 4.0 / 3}, want2[2] = {1.5, 3.5};
    const int64_t s2[3] = {1, 1, 2};
    th_check_values("avg_pool1d", cn_avg_pool1d(f64(xv, s, 3), 3, 2, 1), want, 3, 1e-15);
    cn_tensor *y2 = cn_avg_pool1d(f64(xv, s, 3), 2, 0, 0);
    th_check_shape("avg_pool1d stride 0", y2, s2, 3);
    th_check_values("avg_pool1d stride 0", y2, want2, 2, 0);
    cn_tensor *x = leaf(xv, s, 3);
    cn_tensor *r = cn_from_inner(f64(rv, s3, 3), cn_autodiff(cn_cpu()));
    cn_grads *g = cn_backward(cn_sum(cn_mul(cn_avg_pool1d(x, 3, 2, 1), r)));
    CHECK(g != NULL);
    if (g) th_check_values("avg_pool1d dL/dx", cn_grad(g, x), want_dx, 5, 1e-15);
    cn_grads_free(g);
    cn_scope_end();
}

/* adaptive_avg_pool1d of [1, 2, 3, 4, 5] to 3: windows [0, 2), [1, 4), [3, 5) (floor(i * 5 / 3)
 * to ceil((i + 1) * 5 / 3)), overlapping: [1.5, 3, 4.5]. */
static void test_adaptive_windows(void) {
    cn_scope_begin();
    const int64_t s[2] = {1, 5};
    const double xv[5] = {1, 2, 3, 4, 5}, want[3] = {1.5, 3, 4.5};
    th_check_values("adaptive windows", cn_adaptive_avg_pool1d(f64(xv, s, 2), 3), want, 3, 0);
    cn_scope_end();
}

/* ---- max pooling with indices -----------------------------------------------------------------
 */

/* x = [1, 5, 2, 5, 3, 0], kernel 3, stride 1: every window holds a 5; the one holding both 5s
 * (1..3) keeps the first: values [5, 5, 5, 5], indices [1, 1, 3, 3]. With L = sum(y * [1, 2, 4,
 * 8]): dL/dx = [0, 1 + 2, 0, 4 + 8, 0, 0]. Kernel 2, stride 2, padding 1: windows (-1, 0), (1, 2),
 * (3, 4), (5, 6) -> [1, 5, 5, 0] at [0, 1, 3, 5] (padding never wins). */
static void test_max_pool1d(void) {
    cn_scope_begin();
    const int64_t s6[3] = {1, 1, 6}, s4[3] = {1, 1, 4};
    const double xv[6] = {1, 5, 2, 5, 3, 0}, rv[4] = {1, 2, 4, 8};
    const double want[4] = {5, 5, 5, 5}, want_i[4] = {1, 1, 3, 3};
    const double want_dx[6] = {0, 3, 0, 12, 0, 0};
    cn_tensor *idx = NULL;
    th_check_values("max_pool1d ties", cn_max_pool1d(f64(xv, s6, 3), 3, 1, 0, 1, 0, &idx), want, 4,
                    0);
    th_check_values("max_pool1d ties indices", cn_keep(idx), want_i, 4, 0);
    cn_release(idx);
    const double want_p[4] = {1, 5, 5, 0}, want_pi[4] = {0, 1, 3, 5};
    th_check_values("max_pool1d padded", cn_max_pool1d(f64(xv, s6, 3), 2, 2, 1, 1, 0, &idx), want_p,
                    4, 0);
    th_check_values("max_pool1d padded indices", cn_keep(idx), want_pi, 4, 0);
    cn_release(idx);
    cn_tensor *x = leaf(xv, s6, 3);
    cn_tensor *r = cn_from_inner(f64(rv, s4, 3), cn_autodiff(cn_cpu()));
    cn_grads *g = cn_backward(cn_sum(cn_mul(cn_max_pool1d(x, 3, 1, 0, 1, 0, NULL), r)));
    CHECK(g != NULL);
    if (g) th_check_values("max_pool1d dL/dx", cn_grad(g, x), want_dx, 6, 0);
    cn_grads_free(g);
    cn_scope_end();
}

/* x = [4, 1, 3, 2, 0, 7], kernel 2, dilation 2 (span 3), stride 2: floor mode has windows
 * (0, 2), (2, 4) -> [4, 3] at [0, 2]; ceil mode adds (4, 6), which starts inside the input:
 * [4, 3, 0] at [0, 2, 4]. With L = 5 ceil mode would add (4, 6) too, but no more: 3 windows.
 * A NaN wins, the last one of its window: [1, NaN, 3, NaN] with kernel 4 -> index 3. */
static void test_max_pool_dilation_ceil_nan(void) {
    cn_scope_begin();
    const int64_t s6[3] = {1, 1, 6}, s2[3] = {1, 1, 2}, s3[3] = {1, 1, 3}, s4[3] = {1, 1, 4};
    const double xv[6] = {4, 1, 3, 2, 0, 7}, want_f[2] = {4, 3}, want_fi[2] = {0, 2};
    const double want_c[3] = {4, 3, 0}, want_ci[3] = {0, 2, 4};
    cn_tensor *idx = NULL;
    cn_tensor *y = cn_max_pool1d(f64(xv, s6, 3), 2, 2, 0, 2, 0, &idx);
    th_check_shape("dilated floor", y, s2, 3);
    th_check_values("dilated floor", y, want_f, 2, 0);
    th_check_values("dilated floor indices", cn_keep(idx), want_fi, 2, 0);
    cn_release(idx);
    y = cn_max_pool1d(f64(xv, s6, 3), 2, 2, 0, 2, 1, &idx);
    th_check_shape("dilated ceil", y, s3, 3);
    th_check_values("dilated ceil", y, want_c, 3, 0);
    th_check_values("dilated ceil indices", cn_keep(idx), want_ci, 3, 0);
    cn_release(idx);
    const double nv[4] = {1, NAN, 3, NAN}, want_n[1] = {3};
    y = cn_max_pool1d(f64(nv, s4, 3), 4, 0, 0, 0, 0, &idx);
    double got = 0;
    CHECK(y != NULL && th_read(y, &got) == 1 && isnan(got));
    th_check_values("NaN's index", cn_keep(idx), want_n, 1, 0);
    cn_release(idx);
    /* [0..5], kernel 2, padding 1, dilation 7: the one window holds positions -1 and 6, padding
     * only: -inf at PyTorch's index 6 (outside the plane), and no gradient */
    const double av[6] = {0, 1, 2, 3, 4, 5}, want_a[1] = {6}, zeros[6] = {0};
    y = cn_max_pool1d(f64(av, s6, 3), 2, 1, 1, 7, 0, &idx);
    CHECK(y != NULL && th_read(y, &got) == 1 && isinf(got) && got < 0);
    th_check_values("padding-only window's index", cn_keep(idx), want_a, 1, 0);
    cn_release(idx);
    cn_tensor *x = leaf(av, s6, 3);
    cn_grads *g = cn_backward(cn_sum(cn_max_pool1d(x, 2, 1, 1, 7, 0, NULL)));
    CHECK(g != NULL);
    if (g) th_check_values("padding-only window's gradient", cn_grad(g, x), zeros, 6, 0);
    cn_grads_free(g);
    cn_scope_end();
}

/* ---- pad edges ------------------------------------------------------------------------------ */

static void test_pad_edges(void) {
    cn_scope_begin();
    const int64_t s5[1] = {5}, s6[1] = {6}, s02[2] = {0, 2}, s22[2] = {2, 2}, s0[1] = {0};
    const double xv[5] = {0, 1, 2, 3, 4};
    cn_tensor *x = f64(xv, s5, 1);
    /* no entries: a copy with storage of its own */
    cn_tensor *same = cn_pad(x, NULL, 0, CN_PAD_REFLECT, 0);
    th_check_values("pad of nothing", same, xv, 5, 0);
    CHECK(same != NULL && !cn_shares_memory(same, x));
    /* circular crops first, then wraps what is left (PyTorch's order): [0..4] with (-1, 2) is
     * [1, 2, 3, 4] then 1, 2 after: [1, 2, 3, 4, 1, 2]; with (2, -1): [2, 3] + [0, 1, 2, 3] */
    const int64_t cr[2] = {-1, 2}, cl[2] = {2, -1};
    const double want_r[6] = {1, 2, 3, 4, 1, 2}, want_l[6] = {2, 3, 0, 1, 2, 3};
    th_check_values("circular crop right", cn_pad(x, cr, 2, CN_PAD_CIRCULAR, 0), want_r, 6, 0);
    th_check_values("circular crop left", cn_pad(x, cl, 2, CN_PAD_CIRCULAR, 0), want_l, 6, 0);
    th_check_shape("circular crop", cn_pad(x, cr, 2, CN_PAD_CIRCULAR, 0), s6, 1);
    /* cropped to nothing, and an empty input padded with the constant */
    const int64_t all[2] = {-2, -3}, rows[4] = {0, 0, 1, 1};
    th_check_shape("cropped to nothing", cn_pad(x, all, 2, CN_PAD_CONSTANT, 0), s0, 1);
    const double threes[4] = {3, 3, 3, 3};
    cn_tensor *e = cn_pad(cn_zeros(s02, 2, CN_F64, cn_cpu()), rows, 4, CN_PAD_CONSTANT, 3);
    th_check_shape("empty padded", e, s22, 2);
    th_check_values("empty padded", e, threes, 4, 0);
    /* reflect and replicate on ints: [0..4] with (2, 1) */
    const int64_t p21[2] = {2, 1};
    const double want_refl[8] = {2, 1, 0, 1, 2, 3, 4, 3}, want_rep[8] = {0, 0, 0, 1, 2, 3, 4, 4};
    cn_tensor *xi = cn_cast(x, CN_I32);
    th_check_values("reflect i32", cn_pad(xi, p21, 2, CN_PAD_REFLECT, 0), want_refl, 8, 0);
    th_check_values("replicate i32", cn_pad(xi, p21, 2, CN_PAD_REPLICATE, 0), want_rep, 8, 0);
    cn_scope_end();
}

/* ---- misuse: the status, the call and argument named, nothing leaked --------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t s23[2] = {2, 3}, s3[1] = {3}, s03[2] = {0, 3}, s123[3] = {1, 2, 3};
    const int64_t s20[2] = {2, 0};
    const double xv[6] = {1, 2, 3, 4, 5, 6};
    /* every input made first, so that the count of live tensors shows any the calls leak */
    cn_tensor *x = f64(xv, s23, 2), *xi = cn_cast(x, CN_I32), *x1 = f64(xv, s3, 1);
    cn_tensor *empty = cn_zeros(s03, 2, CN_F64, cn_cpu()), *x3 = f64(xv, s123, 3);
    cn_tensor *empty_l = cn_zeros(s20, 2, CN_F64, cn_cpu());
    int64_t live = cn_live_tensors();

    /* pad: the mode, the tuple's length, NULL arguments */
    const int64_t p11[2] = {1, 1}, p6[6] = {1, 1, 1, 1, 1, 1};
    CHECK_FAILS(cn_pad(x, p11, 2, (cn_pad_mode)7, 0), CN_ERR_INVALID_ARG, "mode 7");
    CHECK_FAILS(cn_pad(x, p11, 1, CN_PAD_CONSTANT, 0), CN_ERR_INVALID_ARG, "n = 1");
    CHECK_FAILS(cn_pad(x, p6, 6, CN_PAD_CONSTANT, 0), CN_ERR_INVALID_ARG, "n = 6");
    CHECK_FAILS(cn_pad(x, NULL, 2, CN_PAD_CONSTANT, 0), CN_ERR_NULL_ARG, "pad");
    CHECK_FAILS(cn_pad(NULL, p11, 2, CN_PAD_CONSTANT, 0), CN_ERR_NULL_ARG, "x");
    /* reflect: at most size - 1 per side, never negative; replicate: no negatives, no empty dim */
    const int64_t far[2] = {3, 0}, neg[2] = {-1, 1}, under[4] = {0, 0, -2, -1};
    CHECK_FAILS(cn_pad(x, far, 2, CN_PAD_REFLECT, 0), CN_ERR_INVALID_ARG,
                "smaller than the dim's size (3)");
    CHECK_FAILS(cn_pad(x, neg, 2, CN_PAD_REFLECT, 0), CN_ERR_INVALID_ARG, "is negative");
    CHECK_FAILS(cn_pad(x, neg, 2, CN_PAD_REPLICATE, 0), CN_ERR_INVALID_ARG, "is negative");
    const int64_t rows[4] = {0, 0, 1, 0};
    CHECK_FAILS(cn_pad(empty, rows, 4, CN_PAD_REPLICATE, 0), CN_ERR_SHAPE, "is empty");
    /* circular: at most what the crops leave per side */
    const int64_t wrap[2] = {4, 0}, wrap_crop[2] = {-2, 2};
    CHECK_FAILS(cn_pad(x, wrap, 2, CN_PAD_CIRCULAR, 0), CN_ERR_INVALID_ARG,
                "wraps around more than once");
    CHECK_FAILS(cn_pad(x, wrap_crop, 2, CN_PAD_CIRCULAR, 0), CN_ERR_INVALID_ARG,
                "after the crops (1)");
    /* crops past the size, an int constant out of range, sizes past int64 */
    CHECK_FAILS(cn_pad(x, under, 4, CN_PAD_CONSTANT, 0), CN_ERR_SHAPE, "crops dim 0");
    CHECK_FAILS(cn_pad(xi, p11, 2, CN_PAD_CONSTANT, 1e12), CN_ERR_INVALID_ARG, "value");
    const int64_t huge[2] = {INT64_MAX, 1};
    CHECK_FAILS(cn_pad(x, huge, 2, CN_PAD_CONSTANT, 0), CN_ERR_OVERFLOW, "beyond int64");

    /* adaptive pools: output sizes, the input's dims and kind, empty pooled dims, overflow */
    CHECK_FAILS(cn_adaptive_avg_pool1d(x, 0), CN_ERR_INVALID_ARG, "output size 0");
    CHECK_FAILS(cn_adaptive_avg_pool2d(x3, 1, -1), CN_ERR_INVALID_ARG, "output size -1");
    CHECK_FAILS(cn_adaptive_avg_pool1d(x1, 2), CN_ERR_SHAPE, "leading (channel) dim");
    CHECK_FAILS(cn_adaptive_avg_pool3d(x3, 1, 1, 1), CN_ERR_SHAPE, "3 pooled dims");
    CHECK_FAILS(cn_adaptive_avg_pool1d(xi, 2), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_adaptive_avg_pool1d(empty_l, 1), CN_ERR_SHAPE, "is empty");
    CHECK_FAILS(cn_adaptive_avg_pool1d(x, INT64_MAX / 2), CN_ERR_OVERFLOW, "passes int64");
    CHECK_FAILS(cn_adaptive_avg_pool2d(NULL, 1, 1), CN_ERR_NULL_ARG, "adaptive_avg_pool2d");

    /* avg_pool1d: 3-D only; avg_pool2d's checks of the window */
    CHECK_FAILS(cn_avg_pool1d(x, 2, 1, 0), CN_ERR_SHAPE, "3-D [N, C, L]");
    CHECK_FAILS(cn_avg_pool1d(x3, 0, 1, 0), CN_ERR_INVALID_ARG, "kernel");
    CHECK_FAILS(cn_avg_pool1d(x3, 2, 1, 2), CN_ERR_INVALID_ARG, "at most half the kernel");
    CHECK_FAILS(cn_avg_pool1d(x3, 5, 1, 0), CN_ERR_SHAPE, "larger than the padded input");

    /* max pooling: the params, x's dims and kind, the window, sizes past int64 */
    cn_tensor *x4 = cn_unsqueeze(x3, 0), *idx = x;
    live = cn_live_tensors();
    const cn_max_pool2d_params ok = {{2, 2}, {0, 0}, {0, 0}, {0, 0}, 0};
    cn_max_pool2d_params bad = ok;
    CHECK_FAILS(cn_max_pool2d_ex(x4, NULL, &idx), CN_ERR_NULL_ARG, "p");
    CHECK(idx == NULL);
    CHECK_FAILS(cn_max_pool2d_ex(x3, &ok, NULL), CN_ERR_SHAPE, "4-D [N, C, H, W]");
    cn_tensor *x4i = cn_cast(x4, CN_I32);
    live = cn_live_tensors();
    CHECK_FAILS(cn_max_pool2d_ex(x4i, &ok, NULL), CN_ERR_KIND, "'x'");
    bad.kernel[1] = 0;
    CHECK_FAILS(cn_max_pool2d_ex(x4, &bad, NULL), CN_ERR_INVALID_ARG, "kernel[1] = 0");
    bad = ok, bad.stride[0] = -1;
    CHECK_FAILS(cn_max_pool2d_ex(x4, &bad, NULL), CN_ERR_INVALID_ARG, "stride[0] = -1");
    bad = ok, bad.padding[1] = 2;
    CHECK_FAILS(cn_max_pool2d_ex(x4, &bad, NULL), CN_ERR_INVALID_ARG, "more than half");
    bad = ok, bad.kernel[1] = 4;
    CHECK_FAILS(cn_max_pool2d_ex(x4, &bad, NULL), CN_ERR_SHAPE, "larger than the padded input");
    bad = ok, bad.dilation[0] = INT64_MAX;
    CHECK_FAILS(cn_max_pool2d_ex(x4, &bad, NULL), CN_ERR_SHAPE, "larger than the padded input");
    bad = ok, bad.dilation[0] = INT64_MAX / 2 + 1, bad.kernel[0] = 3;
    CHECK_FAILS(cn_max_pool2d_ex(x4, &bad, NULL), CN_ERR_OVERFLOW, "beyond int64");
    CHECK_FAILS(cn_max_pool1d(x, 2, 1, 0, 1, 0, NULL), CN_ERR_SHAPE, "3-D [N, C, L]");

    /* unfold4d / fold4d: the params, the shapes, the block geometry */
    const cn_fold_params fp = {{2, 2}, {0, 0}, {0, 0}, {0, 0}};
    cn_fold_params fbad = fp;
    CHECK_FAILS(cn_unfold4d(x4, NULL), CN_ERR_NULL_ARG, "p");
    CHECK_FAILS(cn_unfold4d(x3, &fp), CN_ERR_SHAPE, "4-D [N, C, H, W]");
    CHECK_FAILS(cn_unfold4d(x4i, &fp), CN_ERR_KIND, "'x'");
    fbad.kernel[0] = 0;
    CHECK_FAILS(cn_unfold4d(x4, &fbad), CN_ERR_INVALID_ARG, "kernel[0] = 0");
    fbad = fp, fbad.padding[1] = -1;
    CHECK_FAILS(cn_unfold4d(x4, &fbad), CN_ERR_INVALID_ARG, "padding[1] = -1");
    fbad = fp, fbad.kernel[1] = 4;
    CHECK_FAILS(cn_unfold4d(x4, &fbad), CN_ERR_SHAPE, "larger than the padded input");
    fbad = fp, fbad.dilation[0] = INT64_MAX;
    CHECK_FAILS(cn_unfold4d(x4, &fbad), CN_ERR_OVERFLOW, "beyond int64");
    /* x4 [1, 1, 2, 3] unfolds with 2 x 2 blocks to [1, 4, 2]; fold back needs that shape */
    CHECK_FAILS(cn_fold4d(x3, 2, 3, &fp), CN_ERR_SHAPE, "[N, C x 4, 2]");
    CHECK_FAILS(cn_fold4d(x3, 0, 3, &fp), CN_ERR_INVALID_ARG, "output size (0, 3)");
    CHECK_FAILS(cn_fold4d(NULL, 2, 3, &fp), CN_ERR_NULL_ARG, "cols");
    CHECK(cn_live_tensors() == live);

    /* nothing leaked, x untouched */
    CHECK(cn_live_tensors() == live);
    th_check_values("x after the misuse", x, xv, 6, 0);
    cn_scope_end();
}

int main(void) {
    RUN(test_avg_pool1d);
    RUN(test_adaptive_windows);
    RUN(test_max_pool1d);
    RUN(test_max_pool_dilation_ceil_nan);
    RUN(test_pad_edges);
    RUN(test_misuse);
    return th_finish();
}
