/* Inputs at the edges of the contract (issue 12): in-place copies whose source overlaps the
 * destination or whose destination overlaps itself, sizes, steps, strides and offsets near
 * INT64_MAX (slices, empty tensors with huge dims, cat, split, conv and pool geometry), and
 * float scalars that do not fit an integer dtype. Each either gives the value written out here
 * by hand or fails with a clear error that leaves its inputs as they were. Run under UBSan with
 * float-cast-overflow (CINDER_SANITIZE), an overflow in the library stops the program. */
#include <stdint.h>

#include "harness.h"

/* ---- helpers ------------------------------------------------------------------------------- */

static cn_tensor *f64_tensor(const double *v, const int64_t *shape, int ndim) {
    return cn_from_data(v, shape, ndim, CN_F64, cn_cpu());
}

/* Checks t is a tensor of `shape` with no elements, then releases it. */
static void expect_empty(const char *what, cn_tensor *t, const int64_t *shape, int ndim) {
    if (!t) {
        fprintf(stderr, "%s: NULL (%s)\n", what, cn_last_error());
        th_checks_failed++;
        return;
    }
    th_check_shape(what, t, shape, ndim);
    CHECK(cn_numel(t) == 0);
    cn_release(t);
}

/* ---- in-place copies: overlap ---------------------------------------------------------------- */

/* cn_copy_(a, a^T) is as if a^T were read before the write: [[1,2],[3,4]] -> [[1,3],[2,4]]
 * (the element-by-element copy gave [1,3,3,4]). */
static void test_copy_from_own_transpose(void) {
    const double v[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    const int64_t s2[2] = {2, 2}, s3[2] = {3, 3};
    cn_tensor *a = f64_tensor(v, s2, 2), *at = cn_transpose(a, 0, 1);
    CHECK(cn_copy_(a, at) == CN_OK);
    const double want2[4] = {1, 3, 2, 4};
    th_check_values("a = a^T (2x2)", a, want2, 4, 0);
    cn_release(at);
    cn_release(a);
    cn_tensor *b = f64_tensor(v, s3, 2), *bt = cn_transpose(b, 0, 1);
    CHECK(cn_copy_(b, bt) == CN_OK);
    const double want3[9] = {1, 4, 7, 2, 5, 8, 3, 6, 9};
    th_check_values("b = b^T (3x3)", b, want3, 9, 0);
    cn_release(bt);
    cn_release(b);
}

/* x[2:8:2] = x[0:6:2] over x = 0..7 shifts the even entries by one place: [0,1,0,3,2,5,4,7].
 * Copied element by element in order, each write fed the next read: [0,1,0,3,0,5,0,7]. */
static void test_copy_between_overlapping_slices(void) {
    double v[8];
    for (int i = 0; i < 8; i++) v[i] = i;
    const int64_t s[1] = {8};
    cn_tensor *x = f64_tensor(v, s, 1);
    cn_tensor *dst = cn_slice(x, 0, 2, 8, 2), *src = cn_slice(x, 0, 0, 6, 2);
    CHECK(cn_copy_(dst, src) == CN_OK);
    const double want[8] = {0, 1, 0, 3, 2, 5, 4, 7};
    th_check_values("x[2::2] = x[:6:2]", x, want, 8, 0);
    cn_release(dst);
    cn_release(src);
    /* disjoint parts of one storage copy directly: x[0:4] = x[4:8] */
    cn_tensor *lo = cn_slice(x, 0, 0, 4, 1), *hi = cn_slice(x, 0, 4, 8, 1);
    CHECK(cn_copy_(lo, hi) == CN_OK);
    const double want2[8] = {2, 5, 4, 7, 2, 5, 4, 7};
    th_check_values("x[:4] = x[4:]", x, want2, 8, 0);
    /* a tensor copied onto itself is unchanged */
    CHECK(cn_copy_(x, x) == CN_OK);
    th_check_values("x = x", x, want2, 8, 0);
    cn_release(lo);
    cn_release(hi);
    cn_release(x);
}

/* A destination whose elements share memory (expanded: stride 0) is refused, naming copy_ and
 * the way out; nothing is written, and the runtime goes on. */
static void test_copy_into_expanded_refused(void) {
    const double row[3] = {1, 2, 3}, v[6] = {10, 11, 12, 13, 14, 15};
    const int64_t s13[2] = {1, 3}, s23[2] = {2, 3};
    cn_tensor *base = f64_tensor(row, s13, 2), *e = cn_expand(base, s23, 2);
    cn_tensor *src = f64_tensor(v, s23, 2);
    CHECK_STATUS_FAILS(cn_copy_(e, src), CN_ERR_INVALID_ARG, "copy_: invalid argument");
    CHECK(cn_copy_(e, src) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "share one memory location") != NULL);
    CHECK(strstr(cn_last_error(), "cn_clone") != NULL);
    cn_clear_error();
    th_check_values("base after the refused copy", base, row, 3, 0);
    th_check_values("src after the refused copy", src, v, 6, 0);
    /* even a source that fits without broadcasting, and a scalar one */
    const double seven = 7;
    cn_tensor *sc = cn_from_data(&seven, NULL, 0, CN_F64, cn_cpu());
    CHECK_STATUS_FAILS(cn_copy_(e, sc), CN_ERR_INVALID_ARG, "'dst'");
    th_check_values("base after the refused scalar copy", base, row, 3, 0);
    /* the unexpanded tensor takes the write */
    CHECK(cn_copy_(base, sc) == CN_OK);
    const double sevens[3] = {7, 7, 7};
    th_check_values("base = 7", base, sevens, 3, 0);
    cn_release(sc);
    cn_release(src);
    cn_release(e);
    cn_release(base);
}

/* ---- slices with extreme bounds and steps ---------------------------------------------------- */

static void test_slice_extreme_bounds(void) {
    const double v[6] = {0, 1, 2, 3, 4, 5};
    const int64_t s23[2] = {2, 3};
    cn_tensor *x = f64_tensor(v, s23, 2);
    /* a step past the end keeps the first element: x[::INT64_MAX] along either dim */
    cn_tensor *r = cn_slice(x, 0, 0, 2, INT64_MAX);
    const int64_t s13[2] = {1, 3}, s21[2] = {2, 1};
    const double row0[3] = {0, 1, 2}, col0[2] = {0, 3}, col1[2] = {1, 4};
    th_check_shape("x[::max]", r, s13, 2);
    th_check_values("x[::max]", r, row0, 3, 0);
    cn_release(r);
    r = cn_slice(x, 1, 0, INT64_MAX, INT64_MAX);
    th_check_shape("x[:, ::max]", r, s21, 2);
    th_check_values("x[:, ::max]", r, col0, 2, 0);
    cn_release(r);
    r = cn_slice(x, 1, 1, INT64_MAX, INT64_MAX - 1);
    th_check_values("x[:, 1::max-1]", r, col1, 2, 0);
    cn_release(r);
    /* bounds at the int64 extremes clamp, as Python's do */
    r = cn_slice(x, 1, INT64_MIN, INT64_MAX, 1);
    th_check_values("x[:, min:max]", r, v, 6, 0);
    cn_release(r);
    const int64_t s20[2] = {2, 0};
    expect_empty("x[:, max:min]", cn_slice(x, 1, INT64_MAX, INT64_MIN, 1), s20, 2);
    expect_empty("x[:, max:max:max]", cn_slice(x, 1, INT64_MAX, INT64_MAX, INT64_MAX), s20, 2);
    r = cn_slice(x, 1, -INT64_MAX, -1, 2); /* x[:, 0:2:2] */
    th_check_values("x[:, -max:-1:2]", r, col0, 2, 0);
    cn_release(r);
    CHECK_FAILS(cn_slice(x, 0, 0, 2, INT64_MIN), CN_ERR_INVALID_ARG, "slice");
    cn_release(x);
}

/* ---- empty tensors with huge dims ------------------------------------------------------------ */

/* [INT64_MAX, 5, 0, 1] has no elements, but the products of its other sizes overflow: every op
 * gives an empty result of the right shape, or a clear error. */
static void test_empty_tensor_with_huge_dims(void) {
    const int64_t M = INT64_MAX;
    const int64_t s[4] = {M, 5, 0, 1};
    cn_tensor *z = cn_zeros(s, 4, CN_F32, cn_cpu());
    CHECK(z && cn_numel(z) == 0);
    if (!z) return;

    /* views */
    const int64_t t01[4] = {5, M, 0, 1}, t03[4] = {1, 5, 0, M};
    expect_empty("transpose 0 1", cn_transpose(z, 0, 1), t01, 4);
    expect_empty("transpose 0 3", cn_transpose(z, 0, 3), t03, 4);
    const int perm[4] = {3, 2, 1, 0};
    const int64_t p[4] = {1, 0, 5, M};
    expect_empty("permute", cn_permute(z, perm), p, 4);
    const int64_t sl[4] = {(M - 2) / 3 + 1, 5, 0, 1};
    expect_empty("slice 1::3", cn_slice(z, 0, 1, M, 3), sl, 4);
    const int64_t sl2[4] = {M, 1, 0, 1};
    expect_empty("slice dim 1 ::max", cn_slice(z, 1, 0, M, M), sl2, 4);
    for (int d = 0; d <= 4; d++) {
        int64_t u[5];
        for (int k = 0, j = 0; k < 5; k++) u[k] = k == d ? 1 : s[j++];
        expect_empty("unsqueeze", cn_unsqueeze(z, d), u, 5);
    }
    const int64_t sq[3] = {M, 5, 0};
    expect_empty("squeeze 3", cn_squeeze(z, 3), sq, 3);
    const int64_t ex[5] = {M, M, 5, 0, 7};
    expect_empty("expand", cn_expand(z, ex, 5), ex, 5);
    const int64_t rs[3] = {0, M, M}, flat[1] = {0};
    expect_empty("reshape [0, max, max]", cn_reshape(z, rs, 3), rs, 3);
    const int64_t minus1[1] = {-1};
    expect_empty("reshape [-1]", cn_reshape(z, minus1, 1), flat, 1);
    const int64_t bad[2] = {-1, 0};
    CHECK_FAILS(cn_reshape(z, bad, 2), CN_ERR_SHAPE, "reshape");
    expect_empty("contiguous", cn_contiguous(z), s, 4);
    expect_empty("clone", cn_clone(z), s, 4);
    cn_tensor *zt = cn_transpose(z, 1, 2);
    const int64_t t12[4] = {M, 0, 5, 1};
    expect_empty("contiguous of a transpose", cn_contiguous(zt), t12, 4);

    /* elementwise, casts, copies */
    expect_empty("add", cn_add(z, z), s, 4);
    expect_empty("add of a transpose", cn_add(zt, zt), t12, 4);
    expect_empty("exp", cn_exp(zt), t12, 4);
    expect_empty("mul_scalar", cn_mul_scalar(z, 2), s, 4);
    expect_empty("cast", cn_cast(zt, CN_I64), t12, 4);
    expect_empty("lt", cn_lt(z, z), s, 4);
    CHECK(cn_copy_(z, z) == CN_OK);
    CHECK(cn_copy_(zt, zt) == CN_OK);

    /* cat, stack, split, chunk */
    cn_tensor *two[2] = {z, z};
    const int64_t c1[4] = {M, 10, 0, 1}, st[5] = {2, M, 5, 0, 1};
    expect_empty("cat dim 1", cn_cat(two, 2, 1), c1, 4);
    expect_empty("stack", cn_stack(two, 2, 0), st, 5);
    CHECK_FAILS(cn_cat(two, 2, 0), CN_ERR_OVERFLOW, "cat");
    cn_tensor *parts[4] = {0};
    CHECK(cn_split(z, M / 2 + 1, 0, parts, 4) == 2);
    const int64_t p0[4] = {M / 2 + 1, 5, 0, 1}, p1[4] = {M / 2, 5, 0, 1};
    expect_empty("split part 0", parts[0], p0, 4);
    expect_empty("split part 1", parts[1], p1, 4);
    CHECK(cn_chunk(z, 3, 0, parts, 4) == 3);
    for (int i = 0; i < 3; i++) cn_release(parts[i]);
    CHECK(cn_split(z, M, 0, parts, 4) == 1);
    expect_empty("split size max", parts[0], s, 4);

    /* reductions and softmax */
    cn_tensor *sum = cn_sum(z);
    const double zero = 0;
    th_check_values("sum", sum, &zero, 1, 0);
    cn_release(sum);
    const int64_t r0[4] = {1, 5, 0, 1};
    expect_empty("sum_dim 0", cn_sum_dim(z, 0, 1), r0, 4);
    expect_empty("max_dim 3", cn_max_dim(z, 3, 1), s, 4);
    CHECK_FAILS(cn_sum_dim(z, 2, 1), CN_ERR_OVERFLOW, "sum"); /* [max, 5, 1, 1] is too large */
    CHECK_FAILS(cn_max_dim(z, 2, 0), CN_ERR_SHAPE, "max");
    expect_empty("softmax dim 0", cn_softmax(z, 0), s, 4);
    expect_empty("softmax dim 3", cn_softmax(z, 3), s, 4);
    expect_empty("log_softmax of a transpose", cn_log_softmax(zt, -1), t12, 4);
    cn_release(zt);
    cn_release(z);

    /* an empty tensor whose contiguous strides saturate: a slice whose stride would pass int64
     * is refused */
    const int64_t mm0[3] = {M, M, 0};
    cn_tensor *w = cn_empty(mm0, 3, CN_U8, cn_cpu());
    CHECK_FAILS(cn_slice(w, 0, 0, M, 2), CN_ERR_OVERFLOW, "slice");
    const int64_t w1[3] = {1, M, 0};
    expect_empty("slice of it, one row", cn_slice(w, 0, 5, M, M), w1, 3);
    cn_release(w);

    /* eye with an empty side */
    const int64_t e0[2] = {0, M};
    expect_empty("eye(0, max)", cn_eye(0, M, CN_F32, cn_cpu()), e0, 2);
    CHECK(cn_last_status() == CN_OK);
}

static void test_split_and_chunk_huge_sizes(void) {
    const double v[5] = {0, 1, 2, 3, 4};
    const int64_t s[1] = {5};
    cn_tensor *x = f64_tensor(v, s, 1), *parts[2] = {0};
    CHECK(cn_split(x, INT64_MAX, 0, parts, 2) == 1);
    th_check_values("split(x, max)", parts[0], v, 5, 0);
    cn_release(parts[0]);
    CHECK(cn_split(x, INT64_MAX - 2, 0, parts, 2) == 1);
    th_check_values("split(x, max - 2)", parts[0], v, 5, 0);
    cn_release(parts[0]);
    CHECK(cn_chunk(x, INT32_MAX, 0, parts, 2) == 5); /* pieces of one */
    th_check_values("chunk 0", parts[0], v, 1, 0);
    th_check_values("chunk 1", parts[1], v + 1, 1, 0);
    cn_release(parts[0]);
    cn_release(parts[1]);
    cn_release(x);
}

/* ---- conv2d and pooling geometry ------------------------------------------------------------- */

static void test_conv_and_pool_extreme_geometry(void) {
    double xv[16], wv[4] = {1, 10, 100, 1000};
    for (int i = 0; i < 16; i++) xv[i] = i;
    const int64_t xs[4] = {1, 1, 4, 4}, ws[4] = {1, 1, 2, 2}, one[4] = {1, 1, 1, 1};
    cn_tensor *x = f64_tensor(xv, xs, 4), *w = f64_tensor(wv, ws, 4);
    /* a stride past the input keeps the first window: 0*1 + 1*10 + 4*100 + 5*1000 */
    cn_conv2d_params p = {{INT64_MAX, INT64_MAX}, {0, 0}, {1, 1}, 1};
    cn_tensor *y = cn_conv2d(x, w, NULL, &p);
    const double first = 5410;
    th_check_shape("conv2d stride max", y, one, 4);
    th_check_values("conv2d stride max", y, &first, 1, 0);
    cn_release(y);
    /* padding or dilation whose sums pass int64: a clear error */
    cn_conv2d_params pad = {{1, 1}, {INT64_MAX / 2 + 1, 0}, {1, 1}, 1};
    CHECK_FAILS(cn_conv2d(x, w, NULL, &pad), CN_ERR_OVERFLOW, "conv2d");
    cn_conv2d_params pad2 = {{INT64_MAX, INT64_MAX}, {INT64_MAX, INT64_MAX}, {1, 1}, 1};
    CHECK_FAILS(cn_conv2d(x, w, NULL, &pad2), CN_ERR_OVERFLOW, "padding");
    cn_conv2d_params dil = {{1, 1}, {0, 0}, {INT64_MAX, 1}, 1};
    CHECK_FAILS(cn_conv2d(x, w, NULL, &dil), CN_ERR_OVERFLOW, "dilation");
    /* a dilation as large as fits, over a window of 2: larger than the input */
    cn_conv2d_params dil2 = {{1, 1}, {0, 0}, {INT64_MAX - 1, 1}, 1};
    CHECK_FAILS(cn_conv2d(x, w, NULL, &dil2), CN_ERR_SHAPE, "conv2d");
    /* groups whose product with w's channels passes int64 */
    const int64_t x0s[4] = {1, 0, 4, 4}, w0s[4] = {0, 2, 1, 1};
    cn_tensor *x0 = cn_zeros(x0s, 4, CN_F64, cn_cpu()), *w0 = cn_zeros(w0s, 4, CN_F64, cn_cpu());
    cn_conv2d_params g = {{1, 1}, {0, 0}, {1, 1}, INT64_MAX};
    CHECK_FAILS(cn_conv2d(x0, w0, NULL, &g), CN_ERR_SHAPE, "groups");
    cn_release(x0);
    cn_release(w0);

    /* pooling: a kernel and padding near INT64_MAX */
    cn_pool2d_params pp = {{INT64_MAX, 2}, {1, 1}, {INT64_MAX / 2, 0}};
    CHECK_FAILS(cn_max_pool2d(x, &pp), CN_ERR_OVERFLOW, "max_pool2d");
    CHECK_FAILS(cn_avg_pool2d(x, &pp), CN_ERR_OVERFLOW, "avg_pool2d");
    cn_pool2d_params big = {{2, 2}, {INT64_MAX, INT64_MAX}, {0, 0}};
    y = cn_max_pool2d(x, &big);
    const double m5 = 5;
    th_check_values("max_pool2d stride max", y, &m5, 1, 0);
    cn_release(y);
    th_check_values("x untouched", x, xv, 16, 0);
    cn_release(w);
    cn_release(x);
}

/* ---- float scalars for integer tensors ------------------------------------------------------- */

static void test_full_out_of_range_for_int_dtypes(void) {
    const int64_t s[1] = {2};
    cn_device cpu = cn_cpu();
    CHECK_FAILS(cn_full(s, 1, NAN, CN_I64, cpu), CN_ERR_INVALID_ARG, "NaN has no integer value");
    CHECK_FAILS(cn_full(s, 1, NAN, CN_I32, cpu), CN_ERR_INVALID_ARG, "full");
    CHECK_FAILS(cn_full(s, 1, 1e300, CN_I32, cpu), CN_ERR_INVALID_ARG, "out of range");
    CHECK_FAILS(cn_full(s, 1, INFINITY, CN_I64, cpu), CN_ERR_INVALID_ARG, "value");
    CHECK_FAILS(cn_full(s, 1, -INFINITY, CN_U8, cpu), CN_ERR_INVALID_ARG, "u8");
    CHECK_FAILS(cn_full(s, 1, 2147483648.0, CN_I32, cpu), CN_ERR_INVALID_ARG, "i32");
    CHECK_FAILS(cn_full(s, 1, -2147483649.0, CN_I32, cpu), CN_ERR_INVALID_ARG, "i32");
    CHECK_FAILS(cn_full(s, 1, 0x1p63, CN_I64, cpu), CN_ERR_INVALID_ARG, "i64");
    CHECK_FAILS(cn_full(s, 1, 256, CN_U8, cpu), CN_ERR_INVALID_ARG, "[0, 255]");
    CHECK_FAILS(cn_full(s, 1, -1, CN_U8, cpu), CN_ERR_INVALID_ARG, "u8");
    /* in range after truncation toward zero: accepted, truncated */
    struct { double v; cn_dtype dt; double want; } ok[] = {
        {2147483647.9, CN_I32, 2147483647.0}, {-2147483648.9, CN_I32, -2147483648.0},
        {-0x1p63, CN_I64, -0x1p63}, {0x1p63 - 1024, CN_I64, 0x1p63 - 1024},
        {255.9, CN_U8, 255}, {-0.9, CN_U8, 0}, {-2.7, CN_I32, -2}};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cn_tensor *t = cn_full(s, 1, ok[i].v, ok[i].dt, cpu);
        double want[2] = {ok[i].want, ok[i].want};
        th_check_values("full in range", t, want, 2, 0);
        cn_release(t);
    }
    /* arange into an integer dtype: its first and last values must fit */
    CHECK_FAILS(cn_arange(0, 4e9, 1e9, CN_I32, cpu), CN_ERR_INVALID_ARG, "the last value");
    CHECK_FAILS(cn_arange(-3e9, 0, 1e9, CN_I32, cpu), CN_ERR_INVALID_ARG, "start");
    cn_tensor *ar = cn_arange(0, 3e9, 1e9, CN_I32, cpu); /* 2e9 still fits */
    const double ar_want[4] = {0, 1e9, 2e9, 3e9};
    th_check_values("arange i32", ar, ar_want, 3, 0);
    cn_release(ar);
    ar = cn_arange(0, 4e9, 1e9, CN_I64, cpu);
    th_check_values("arange i64", ar, ar_want, 4, 0);
    cn_release(ar);
    /* float and bool dtypes take any value: NaN stays NaN, NaN is true */
    cn_tensor *f = cn_full(s, 1, NAN, CN_F32, cpu), *b = cn_full(s, 1, NAN, CN_BOOL, cpu);
    const double nans[2] = {NAN, NAN}, ones[2] = {1, 1};
    th_check_values("full NaN f32", f, nans, 2, 0);
    th_check_values("full NaN bool", b, ones, 2, 0);
    cn_release(f);
    cn_release(b);
}

static void test_int_scalar_ops_out_of_range(void) {
    const double v[3] = {1, -2, 3};
    const int64_t s[1] = {3};
    cn_tensor *i32 = th_tensor(v, s, 1, CN_I32), *i64 = th_tensor(v, s, 1, CN_I64);
    CHECK_FAILS(cn_add_scalar(i32, 1e300), CN_ERR_INVALID_ARG, "add_scalar");
    CHECK_FAILS(cn_add_scalar(i64, NAN), CN_ERR_INVALID_ARG, "NaN");
    CHECK_FAILS(cn_mul_scalar(i32, -1e10), CN_ERR_INVALID_ARG, "mul_scalar");
    CHECK_FAILS(cn_mul_scalar(i64, INFINITY), CN_ERR_INVALID_ARG, "s = inf");
    th_check_values("i32 untouched", i32, v, 3, 0);
    /* in range: the scalar is truncated toward zero, then the integer op wraps */
    cn_tensor *r = cn_add_scalar(i32, 2.9);
    const double plus2[3] = {3, 0, 5};
    th_check_values("i32 + 2.9", r, plus2, 3, 0);
    cn_release(r);
    r = cn_mul_scalar(i64, -0x1p62);
    double got[3];
    CHECK(th_read(r, got) == 3);
    CHECK(got[0] == -0x1p62); /* 1 * -2^62 */
    CHECK(got[1] == -0x1p63); /* -2 * -2^62 = 2^63 wraps to -2^63 */
    CHECK(got[2] == 0x1p62);  /* 3 * -2^62 = -3 * 2^62 wraps to 2^62 */
    cn_release(r);
    /* clamp bounds saturate to the dtype's range (documented): a huge range keeps every value */
    r = cn_clamp(i32, -1e300, 1e300);
    th_check_values("clamp(i32, -1e300, 1e300)", r, v, 3, 0);
    cn_release(r);
    /* floats take any scalar */
    cn_tensor *f = th_tensor(v, s, 1, CN_F64);
    r = cn_add_scalar(f, 1e300);
    const double big[3] = {1e300, 1e300, 1e300};
    th_check_values("f64 + 1e300", r, big, 3, 1e-15);
    cn_release(r);
    cn_release(f);
    cn_release(i64);
    cn_release(i32);
}

/* cn_cast of float values to integers is defined on every value: truncation toward zero,
 * saturation at the dtype's range, NaN -> 0 (copy.c; the CUDA kernel follows the same rule). */
static void test_cast_float_to_int_saturates(void) {
    const double v[8] = {NAN, 1e300, -1e300, INFINITY, -INFINITY, 2.9, -2.9, 0x1p63};
    const int64_t s[1] = {8};
    cn_tensor *x = f64_tensor(v, s, 1);
    cn_tensor *f32 = cn_cast(x, CN_F32);
    const double w32[8] = {0, 2147483647.0, -2147483648.0, 2147483647.0, -2147483648.0, 2, -2,
                           2147483647.0};
    const double w8[8] = {0, 255, 0, 255, 0, 2, 0, 255};
    cn_tensor *from[2] = {x, f32};
    for (int k = 0; k < 2; k++) {
        cn_tensor *a = cn_cast(from[k], CN_I32), *b = cn_cast(from[k], CN_I64),
                  *c = cn_cast(from[k], CN_U8);
        th_check_values("cast to i32", a, w32, 8, 0);
        int64_t got64[8];
        CHECK(b && cn_read(b, got64, sizeof got64) == CN_OK);
        CHECK(got64[0] == 0 && got64[1] == INT64_MAX && got64[2] == INT64_MIN &&
              got64[3] == INT64_MAX && got64[4] == INT64_MIN && got64[5] == 2 &&
              got64[6] == -2 && got64[7] == INT64_MAX);
        th_check_values("cast to u8", c, w8, 8, 0);
        cn_release(a);
        cn_release(b);
        cn_release(c);
    }
    cn_release(f32);
    cn_release(x);
}

/* Found by fuzz_ops: a stride near INT64_MAX with padding, where the valid-column arithmetic of
 * im2col overflowed (padding + stride - 1 > INT64_MAX). x [1,1,4,4], w [1,1,2,2], stride
 * (1, INT64_MAX - 2), padding (0, 4), dilation (1, 4): one output column, whose window reads
 * input column -4 (padding) and 0; by hand each row oh gives
 * w[0][1]*x[oh][0] + w[1][1]*x[oh+1][0] = 10*4oh + 1000*4(oh+1). */
static void test_conv_huge_stride_with_padding(void) {
    double xv[16], wv[4] = {1, 10, 100, 1000};
    for (int i = 0; i < 16; i++) xv[i] = i;
    const int64_t xs[4] = {1, 1, 4, 4}, ws[4] = {1, 1, 2, 2}, ys[4] = {1, 1, 3, 1};
    cn_tensor *x = f64_tensor(xv, xs, 4), *w = f64_tensor(wv, ws, 4);
    cn_conv2d_params p = {{1, INT64_MAX - 2}, {0, 4}, {1, 4}, 1};
    cn_tensor *y = cn_conv2d(x, w, NULL, &p);
    double want[3];
    for (int oh = 0; oh < 3; oh++) want[oh] = 10.0 * 4 * oh + 1000.0 * 4 * (oh + 1);
    th_check_shape("conv2d huge stride, padding", y, ys, 4);
    th_check_values("conv2d huge stride, padding", y, want, 3, 0);
    cn_release(y);
    cn_release(w);
    cn_release(x);
}

/* Found by fuzz_ops: when a later piece of cn_split fails, the caller's array must hold what it
 * held before (ops.h: nothing written), not pointers to the released earlier pieces. */
static void test_split_failure_writes_nothing(void) {
    const int64_t shape[1] = {40};
    cn_tensor *x = cn_zeros(shape, 1, CN_F32, cn_cpu());
    for (int max = 3; max <= 40; max += 37) { /* the small path and the allocated one */
        int64_t base = cn_alloc_count();
        cn_tensor *probe[40];
        CHECK(cn_split(x, 1, 0, probe, max) == 40);
        int64_t per_call = cn_alloc_count() - base;
        for (int i = 0; i < max; i++) cn_release(probe[i]);
        for (int64_t n = 1; n <= per_call; n++) {
            cn_tensor *sentinel = (cn_tensor *)&n, *parts[40];
            for (int i = 0; i < 40; i++) parts[i] = sentinel;
            cn_alloc_fail_after(n);
            int got = cn_split(x, 1, 0, parts, max);
            cn_alloc_fail_after(0);
            if (got == -1) {
                CHECK(cn_last_status() == CN_ERR_OUT_OF_MEMORY);
                for (int i = 0; i < 40; i++) CHECK(parts[i] == sentinel);
            } else {
                for (int i = 0; i < max; i++) cn_release(parts[i]);
            }
            cn_clear_error();
        }
    }
    cn_release(x);
}

int main(void) {
    RUN(test_copy_from_own_transpose);
    RUN(test_copy_between_overlapping_slices);
    RUN(test_copy_into_expanded_refused);
    RUN(test_slice_extreme_bounds);
    RUN(test_empty_tensor_with_huge_dims);
    RUN(test_split_and_chunk_huge_sizes);
    RUN(test_conv_and_pool_extreme_geometry);
    RUN(test_conv_huge_stride_with_padding);
    RUN(test_split_failure_writes_nothing);
    RUN(test_full_out_of_range_for_int_dtypes);
    RUN(test_int_scalar_ops_out_of_range);
    RUN(test_cast_float_to_int_saturates);
    return th_finish();
}
