/* deform_conv2d through the public API, beyond the op table's cases (tests/test_op_table.c: its
 * values and every gradient against a float64 reference that the generator checks against
 * torchvision.ops.deform_conv2d, and finite differences):
 * - with zero offsets and no mask (or a mask of ones) it is cn_conv2d, with every stride,
 *   padding, dilation and groups tried here, in f64 and f32 (cn_conv2d is the oracle);
 * - with offsets of one integer (dy, dx) everywhere it is cn_conv2d, unpadded, of x shifted by
 *   (dy, dx) inside a zero border (built here on the host);
 * - a mask scales each tap: a mask of 0.5 halves the bias-free output;
 * - samples wholly outside x (huge or NaN offsets) read nothing: the output is the bias;
 * - an empty batch gives an empty output, and a zero weight gradient through autodiff;
 * - a batch that the CPU cuts into chunks gives its images' outputs and gradients, the weight's
 *   and bias's summed (the images run one by one are the oracle);
 * - strided, transposed and broadcast inputs give their contiguous copies' values;
 * - every misuse is a clear error naming deform_conv2d and the argument, nothing leaked. */
#include "harness.h"

#include <math.h>

static cn_tensor *from(const double *v, const int64_t *shape, int nd, cn_dtype dt) {
    return th_tensor(v, shape, nd, dt);
}

/* n deterministic values in [-1, 1) (eighths). */
static double *values(uint64_t seed, int64_t n) {
    double *v = th_alloc_doubles(n);
    th_fill_eighths(&seed, v, n);
    return v;
}

static int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d) {
    return (in + 2 * p - d * (k - 1) - 1) / s + 1;
}

/* ---- zero offsets: conv2d -----------------------------------------------------------------------
 */

static void test_zero_offsets_are_conv2d(void) {
    static const struct {
        int64_t x[4], w[4], s[2], p[2], d[2], groups, og;
    } cfgs[] = {{{2, 3, 5, 6}, {4, 3, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, 1},
                {{1, 4, 7, 6}, {6, 2, 2, 3}, {2, 1}, {1, 2}, {1, 2}, 2, 2},
                {{2, 4, 6, 6}, {4, 1, 3, 3}, {2, 2}, {0, 3}, {2, 1}, 4, 1}};
    for (size_t c = 0; c < sizeof cfgs / sizeof *cfgs; c++)
        for (int k = 0; k < 2; k++) {
            cn_dtype dt = k ? CN_F32 : CN_F64;
            cn_scope_begin();
            const int64_t *xs = cfgs[c].x, *ws = cfgs[c].w;
            int64_t oh = out_size(xs[2], ws[2], cfgs[c].s[0], cfgs[c].p[0], cfgs[c].d[0]);
            int64_t ow = out_size(xs[3], ws[3], cfgs[c].s[1], cfgs[c].p[1], cfgs[c].d[1]);
            int64_t taps = cfgs[c].og * ws[2] * ws[3];
            const int64_t os[4] = {xs[0], 2 * taps, oh, ow}, ms[4] = {xs[0], taps, oh, ow};
            const int64_t bs[1] = {ws[0]};
            double *xv = values(1 + c, xs[0] * xs[1] * xs[2] * xs[3]);
            double *wv = values(7 + c, ws[0] * ws[1] * ws[2] * ws[3]);
            double *bv = values(11 + c, ws[0]);
            cn_tensor *x = from(xv, xs, 4, dt), *w = from(wv, ws, 4, dt), *b = from(bv, bs, 1, dt);
            cn_tensor *off = cn_zeros(os, 4, dt, cn_cpu()), *ones = cn_ones(ms, 4, dt, cn_cpu());
            cn_conv2d_params cp = {{cfgs[c].s[0], cfgs[c].s[1]},
                                   {cfgs[c].p[0], cfgs[c].p[1]},
                                   {cfgs[c].d[0], cfgs[c].d[1]},
                                   cfgs[c].groups};
            cn_deform_conv2d_params dp = {{cfgs[c].s[0], cfgs[c].s[1]},
                                          {cfgs[c].p[0], cfgs[c].p[1]},
                                          {cfgs[c].d[0], cfgs[c].d[1]},
                                          cfgs[c].groups,
                                          cfgs[c].og};
            double *want = th_values(cn_conv2d(x, w, b, &cp));
            char what[96];
            snprintf(what, sizeof what, "zero offsets cfg %zu %s", c, cn_dtype_name(dt));
            th_check_values(what, cn_deform_conv2d(x, off, w, NULL, b, &dp), want,
                            xs[0] * ws[0] * oh * ow, th_tol_of(dt));
            snprintf(what, sizeof what, "zero offsets, unit mask cfg %zu %s", c, cn_dtype_name(dt));
            th_check_values(what, cn_deform_conv2d(x, off, w, ones, b, &dp), want,
                            xs[0] * ws[0] * oh * ow, th_tol_of(dt));
            free(want);
            free(xv);
            free(wv);
            free(bv);
            cn_scope_end();
        }
}

/* ---- integer offsets: conv2d of a shifted input ------------------------------------------------
 */

/* Offsets (dy, dx) = (1, -2) at every tap, stride 1, padding 2, dilation (1, 2): tap (i, j) of
 * output (oh, ow) reads x[oh - 2 + i + 1, ow - 2 + 2 j - 2]. The unpadded conv2d of xs
 * [H + 4, W + 4] with xs[a, b] = x[a - 2 + 1, b - 2 - 2] (0 outside x) reads the same. A mask of
 * 0.5 everywhere halves the result. */
static void test_integer_offsets_shift(void) {
    cn_scope_begin();
    const int64_t xs_[4] = {1, 2, 5, 6}, ws[4] = {3, 2, 3, 2}, pad = 2, dy = 1, dx = -2;
    const int64_t H = xs_[2], W = xs_[3], PH = H + 2 * pad, PW = W + 2 * pad;
    double *xv = values(21, 2 * H * W), *wv = values(22, 3 * 2 * 3 * 2);
    double *sv = th_alloc_doubles(2 * PH * PW);
    for (int64_t c = 0; c < 2; c++)
        for (int64_t a = 0; a < PH; a++)
            for (int64_t b = 0; b < PW; b++) {
                int64_t h = a - pad + dy, w = b - pad + dx;
                sv[(c * PH + a) * PW + b] =
                    h >= 0 && h < H && w >= 0 && w < W ? xv[(c * H + h) * W + w] : 0.0;
            }
    const int64_t ss[4] = {1, 2, PH, PW};
    int64_t oh = out_size(H, 3, 1, pad, 1), ow = out_size(W, 2, 1, pad, 2);
    const int64_t os[4] = {1, 2 * 6, oh, ow}, ms[4] = {1, 6, oh, ow};
    double *ov = th_alloc_doubles(12 * oh * ow);
    for (int64_t k = 0; k < 6; k++)
        for (int64_t p = 0; p < oh * ow; p++) {
            ov[(2 * k) * oh * ow + p] = (double)dy;
            ov[(2 * k + 1) * oh * ow + p] = (double)dx;
        }
    cn_tensor *x = from(xv, xs_, 4, CN_F64), *w = from(wv, ws, 4, CN_F64);
    cn_tensor *off = from(ov, os, 4, CN_F64);
    cn_conv2d_params cp = {{1, 1}, {0, 0}, {1, 2}, 1};
    cn_deform_conv2d_params dp = {{1, 1}, {pad, pad}, {1, 2}, 1, 1};
    double *want = th_values(cn_conv2d(from(sv, ss, 4, CN_F64), w, NULL, &cp));
    th_check_values("integer offsets", cn_deform_conv2d(x, off, w, NULL, NULL, &dp), want,
                    3 * oh * ow, 1e-12);
    for (int64_t i = 0; i < 3 * oh * ow; i++)
        want[i] *= 0.5;
    cn_tensor *half = cn_full(ms, 4, 0.5, CN_F64, cn_cpu());
    th_check_values("integer offsets, mask 0.5", cn_deform_conv2d(x, off, w, half, NULL, &dp), want,
                    3 * oh * ow, 1e-12);
    free(want);
    free(xv);
    free(wv);
    free(sv);
    free(ov);
    cn_scope_end();
}

/* ---- samples outside x, an empty batch ----------------------------------------------------------
 */

/* Offsets of +-1e6 and NaN put every sample outside x: no corner is read, the output is b. */
static void test_samples_outside(void) {
    cn_scope_begin();
    const int64_t xs[4] = {1, 2, 3, 3}, ws[4] = {2, 2, 2, 2}, os[4] = {1, 8, 2, 2};
    const int64_t bs[1] = {2};
    const double bv[2] = {0.25, -1.5};
    double *xv = values(31, 18), *wv = values(32, 16), ov[32];
    for (int i = 0; i < 32; i++)
        ov[i] = i % 3 == 0 ? 1e6 : i % 3 == 1 ? -1e6 : NAN;
    const double want[8] = {0.25, 0.25, 0.25, 0.25, -1.5, -1.5, -1.5, -1.5};
    th_check_values("samples outside",
                    cn_deform_conv2d(from(xv, xs, 4, CN_F64), from(ov, os, 4, CN_F64),
                                     from(wv, ws, 4, CN_F64), NULL, from(bv, bs, 1, CN_F64), NULL),
                    want, 8, 0);
    free(xv);
    free(wv);
    cn_scope_end();
}

/* N = 0: an empty output; through autodiff the weight's gradient is zero and the bias's too. */
static void test_empty_batch(void) {
    cn_scope_begin();
    const int64_t xs[4] = {0, 2, 3, 3}, ws[4] = {2, 2, 2, 2}, os[4] = {0, 8, 2, 2};
    const int64_t bs[1] = {2}, ys[4] = {0, 2, 2, 2};
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = cn_zeros(xs, 4, CN_F64, ad), *off = cn_zeros(os, 4, CN_F64, ad);
    cn_tensor *w = cn_require_grad(cn_ones(ws, 4, CN_F64, ad));
    cn_tensor *b = cn_require_grad(cn_ones(bs, 1, CN_F64, ad));
    cn_tensor *y = cn_deform_conv2d(x, off, w, NULL, b, NULL);
    th_check_shape("empty batch", y, ys, 4);
    cn_grads *g = y ? cn_backward(cn_sum(y)) : NULL;
    CHECK(g != NULL);
    const double zeros[16] = {0};
    if (g) {
        th_check_values("empty batch dL/dw", cn_grad(g, w), zeros, 16, 0);
        th_check_values("empty batch dL/db", cn_grad(g, b), zeros, 2, 0);
    }
    cn_grads_free(g);
    cn_scope_end();
}

/* ---- the batch, chunked over the pool, against its images one by one ------------------------ */

/* 4 images with enough work that the CPU kernel cuts the batch into chunks (forward and
 * backward; each chunk sums its weight gradient privately): the output and every gradient of
 * the batch must be those of the images run one at a time, the weight's and the bias's being
 * the sum over the images. L = sum(y * R). */
static void test_batch_is_its_images(void) {
    cn_scope_begin();
    enum { N = 4 };
    const int64_t ws[4] = {16, 4, 3, 3}, bs[1] = {16}, ys[4] = {N, 16, 6, 6};
    const int64_t nx = 4 * 36, no = 36 * 36, nm = 18 * 36, ny = 16 * 36, nw = 16 * 36;
    double *xv = values(41, N * nx), *ov = values(42, N * no), *mv = values(43, N * nm);
    double *wv = values(44, nw), *bv = values(45, 16), *rv = values(46, N * ny);
    for (int64_t i = 0; i < N * no; i++)
        ov[i] = 3 * ov[i] + 0.0625; /* off the grid of x */
    cn_deform_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, 1, 2};
    cn_device ad = cn_autodiff(cn_cpu());
    double *want[6], *gw_sum = th_alloc_doubles(nw), *gb_sum = th_alloc_doubles(16);
    const int64_t counts[4] = {ny, nx, no, nm}; /* per image */
    for (int n = -1; n < N; n++) {              /* -1: the batch, then image n */
        int64_t k = n < 0 ? N : 1, at = n < 0 ? 0 : n;
        int64_t xs1[4] = {k, 4, 6, 6}, os1[4] = {k, 36, 6, 6}, ms1[4] = {k, 18, 6, 6};
        int64_t ys1[4] = {k, 16, 6, 6};
        cn_tensor *in[5] = {
            cn_from_data(xv + at * nx, xs1, 4, CN_F64, ad),
            cn_from_data(ov + at * no, os1, 4, CN_F64, ad), cn_from_data(wv, ws, 4, CN_F64, ad),
            cn_from_data(mv + at * nm, ms1, 4, CN_F64, ad), cn_from_data(bv, bs, 1, CN_F64, ad)};
        for (int i = 0; i < 5; i++)
            in[i] = cn_require_grad(in[i]);
        cn_tensor *y = cn_deform_conv2d(in[0], in[1], in[2], in[3], in[4], &p);
        cn_tensor *r = cn_from_data(rv + at * ny, ys1, 4, CN_F64, ad);
        cn_grads *g = y ? cn_backward(cn_sum(cn_mul(y, r))) : NULL;
        CHECK(g != NULL);
        if (!g) break;
        cn_tensor *got[6] = {y,
                             cn_grad(g, in[0]),
                             cn_grad(g, in[1]),
                             cn_grad(g, in[3]),
                             cn_grad(g, in[2]),
                             cn_grad(g, in[4])};
        if (n < 0) {
            th_check_shape("batch", y, ys, 4);
            for (int i = 0; i < 6; i++)
                want[i] = th_values(got[i]);
        } else {
            static const char *const names[4] = {"y", "dL/dx", "dL/doffset", "dL/dmask"};
            for (int i = 0; i < 4; i++) {
                char what[64];
                snprintf(what, sizeof what, "image %d's %s", n, names[i]);
                th_check_values(what, got[i], want[i] + n * counts[i], counts[i], 1e-13);
            }
            double *gw = th_values(got[4]), *gb = th_values(got[5]);
            for (int64_t i = 0; i < nw; i++)
                gw_sum[i] += gw[i];
            for (int64_t i = 0; i < 16; i++)
                gb_sum[i] += gb[i];
            free(gw);
            free(gb);
        }
        cn_grads_free(g);
    }
    for (int64_t i = 0; i < nw; i++)
        CHECK_NEAR(gw_sum[i], want[4][i], 1e-12);
    for (int64_t i = 0; i < 16; i++)
        CHECK_NEAR(gb_sum[i], want[5][i], 1e-12);
    for (int i = 0; i < 6; i++)
        free(want[i]);
    free(gw_sum);
    free(gb_sum);
    free(xv);
    free(ov);
    free(mv);
    free(wv);
    free(bv);
    free(rv);
    cn_scope_end();
}

/* ---- strided inputs ------------------------------------------------------------------------ */

/* x transposed in its last two dims, the offsets every other entry of a wider tensor, w
 * transposed (not dense: the kernel packs it), the mask broadcast over the batch (stride 0):
 * the same values, bit for bit, as their contiguous copies. */
static void test_strided_inputs(void) {
    cn_scope_begin();
    const int64_t xt[4] = {2, 2, 5, 4}, ow2[4] = {2, 18, 4, 10}, ws[4] = {3, 2, 3, 3};
    const int64_t m1[4] = {1, 9, 4, 5}, ms[4] = {2, 9, 4, 5};
    double *xv = values(51, 80), *ov = values(52, 2 * 18 * 40), *wv = values(53, 54);
    double *mv = values(54, 180);
    cn_tensor *x = cn_transpose(from(xv, xt, 4, CN_F64), 2, 3);
    cn_tensor *off = cn_slice(from(ov, ow2, 4, CN_F64), 3, 0, 10, 2);
    cn_tensor *w = cn_transpose(from(wv, ws, 4, CN_F64), 2, 3);
    cn_tensor *mask = cn_expand(from(mv, m1, 4, CN_F64), ms, 4);
    cn_deform_conv2d_params p = {{1, 1}, {1, 1}, {1, 1}, 1, 1};
    double *want = th_values(cn_deform_conv2d(cn_contiguous(x), cn_contiguous(off),
                                              cn_contiguous(w), cn_contiguous(mask), NULL, &p));
    th_check_values("strided inputs", cn_deform_conv2d(x, off, w, mask, NULL, &p), want,
                    2 * 3 * 4 * 5, 0);
    free(want);
    free(xv);
    free(ov);
    free(wv);
    free(mv);
    cn_scope_end();
}

/* ---- misuse --------------------------------------------------------------------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t xs[4] = {1, 4, 5, 5}, ws[4] = {4, 2, 3, 3}, os[4] = {1, 36, 3, 3};
    const int64_t ms[4] = {1, 18, 3, 3}, bs[1] = {4};
    cn_device cpu = cn_cpu();
    cn_tensor *x = cn_zeros(xs, 4, CN_F64, cpu), *w = cn_zeros(ws, 4, CN_F64, cpu);
    cn_tensor *off = cn_zeros(os, 4, CN_F64, cpu), *mask = cn_zeros(ms, 4, CN_F64, cpu);
    cn_tensor *b = cn_zeros(bs, 1, CN_F64, cpu);
    cn_deform_conv2d_params p = {{1, 1}, {0, 0}, {1, 1}, 2, 2};
    /* the good call first: every misuse below differs from it in one thing */
    cn_tensor *ok = cn_deform_conv2d(x, off, w, mask, b, &p);
    CHECK(ok != NULL);
    const int64_t ys[4] = {1, 4, 3, 3};
    th_check_shape("deform good call", ok, ys, 4);

    CHECK_FAILS(cn_deform_conv2d(NULL, off, w, mask, b, &p), CN_ERR_NULL_ARG, "'x'");
    CHECK_FAILS(cn_deform_conv2d(x, NULL, w, mask, b, &p), CN_ERR_NULL_ARG, "'offset'");
    CHECK_FAILS(cn_deform_conv2d(x, off, NULL, mask, b, &p), CN_ERR_NULL_ARG, "'w'");
    /* dtypes: an int input, inputs of two float dtypes */
    cn_tensor *xi = cn_zeros(xs, 4, CN_I64, cpu), *off32 = cn_zeros(os, 4, CN_F32, cpu);
    CHECK_FAILS(cn_deform_conv2d(xi, off, w, mask, b, &p), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_deform_conv2d(x, off32, w, mask, b, &p), CN_ERR_DTYPE, "'offset'");
    /* ranks */
    const int64_t x3s[3] = {4, 5, 5};
    CHECK_FAILS(cn_deform_conv2d(cn_zeros(x3s, 3, CN_F64, cpu), off, w, mask, b, &p), CN_ERR_SHAPE,
                "'x'");
    const int64_t o3s[3] = {36, 3, 3};
    CHECK_FAILS(cn_deform_conv2d(x, cn_zeros(o3s, 3, CN_F64, cpu), w, mask, b, &p), CN_ERR_SHAPE,
                "'offset'");
    /* the offset's channels: not 2 * offset_groups * KH * KW (here 2 * 2 * 9 = 36) */
    const int64_t o18[4] = {1, 18, 3, 3};
    CHECK_FAILS(cn_deform_conv2d(x, cn_zeros(o18, 4, CN_F64, cpu), w, mask, b, &p), CN_ERR_SHAPE,
                "it must be [1, 36, 3, 3] (a (dy, dx) pair per offset group");
    /* the offset's spatial size is not the output's, its batch not x's */
    const int64_t o44[4] = {1, 36, 4, 4}, o2[4] = {2, 36, 3, 3};
    CHECK_FAILS(cn_deform_conv2d(x, cn_zeros(o44, 4, CN_F64, cpu), w, mask, b, &p), CN_ERR_SHAPE,
                "'offset' is [1, 36, 4, 4]");
    CHECK_FAILS(cn_deform_conv2d(x, cn_zeros(o2, 4, CN_F64, cpu), w, mask, b, &p), CN_ERR_SHAPE,
                "'offset'");
    /* the mask's shape: channels, spatial size */
    const int64_t m36[4] = {1, 36, 3, 3}, m22[4] = {1, 18, 2, 2};
    CHECK_FAILS(cn_deform_conv2d(x, off, w, cn_zeros(m36, 4, CN_F64, cpu), b, &p), CN_ERR_SHAPE,
                "it must be [1, 18, 3, 3] (a weight per offset group");
    CHECK_FAILS(cn_deform_conv2d(x, off, w, cn_zeros(m22, 4, CN_F64, cpu), b, &p), CN_ERR_SHAPE,
                "'mask'");
    /* C % offset_groups: 4 channels, 3 offset groups (offset and mask sized for 3) */
    cn_deform_conv2d_params p3 = p;
    p3.offset_groups = 3;
    const int64_t o54[4] = {1, 54, 3, 3}, m27[4] = {1, 27, 3, 3};
    CHECK_FAILS(cn_deform_conv2d(x, cn_zeros(o54, 4, CN_F64, cpu), w, cn_zeros(m27, 4, CN_F64, cpu),
                                 b, &p3),
                CN_ERR_SHAPE, "not divisible by offset_groups 3");
    /* groups: w's channels times groups is not C; groups not dividing C */
    cn_deform_conv2d_params g1 = p;
    g1.groups = 1;
    CHECK_FAILS(cn_deform_conv2d(x, off, w, mask, b, &g1), CN_ERR_SHAPE, "groups");
    cn_deform_conv2d_params g3 = p;
    g3.groups = 3;
    CHECK_FAILS(cn_deform_conv2d(x, off, w, mask, b, &g3), CN_ERR_SHAPE, "groups");
    /* negative parameters */
    cn_deform_conv2d_params neg = p;
    neg.padding[1] = -1;
    CHECK_FAILS(cn_deform_conv2d(x, off, w, mask, b, &neg), CN_ERR_INVALID_ARG, "non-negative");
    neg = p;
    neg.offset_groups = -2;
    CHECK_FAILS(cn_deform_conv2d(x, off, w, mask, b, &neg), CN_ERR_INVALID_ARG, "offset_groups -2");
    /* the bias's shape; an empty kernel; a kernel larger than the padded input */
    const int64_t b5[1] = {5}, w0[4] = {4, 2, 0, 3}, w9[4] = {4, 2, 9, 3};
    CHECK_FAILS(cn_deform_conv2d(x, off, w, mask, cn_zeros(b5, 1, CN_F64, cpu), &p), CN_ERR_SHAPE,
                "'b'");
    CHECK_FAILS(cn_deform_conv2d(x, off, cn_zeros(w0, 4, CN_F64, cpu), mask, b, &p), CN_ERR_SHAPE,
                "empty kernel");
    CHECK_FAILS(cn_deform_conv2d(x, off, cn_zeros(w9, 4, CN_F64, cpu), mask, b, &p), CN_ERR_SHAPE,
                "larger than the padded input");
    /* sizes past int64 */
    cn_deform_conv2d_params big = p;
    big.dilation[0] = INT64_MAX;
    CHECK_FAILS(cn_deform_conv2d(x, off, w, mask, b, &big), CN_ERR_OVERFLOW, "int64");
    big = p;
    big.offset_groups = INT64_MAX / 4;
    CHECK_FAILS(cn_deform_conv2d(x, off, w, mask, b, &big), CN_ERR_SHAPE, "offset_groups");
    /* the runtime is still usable, the inputs untouched (zeros) */
    const double zeros[36] = {0};
    th_check_values("after misuse", cn_deform_conv2d(x, off, w, mask, b, &p), zeros, 36, 0);
    cn_scope_end();
}

int main(void) {
    RUN(test_zero_offsets_are_conv2d);
    RUN(test_integer_offsets_shift);
    RUN(test_samples_outside);
    RUN(test_empty_batch);
    RUN(test_batch_is_its_images);
    RUN(test_strided_inputs);
    RUN(test_misuse);
    return th_finish();
}
