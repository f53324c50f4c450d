/* cn_conv2d, cn_max_pool2d and cn_avg_pool2d against direct loops written here (in double):
 * stride, padding, dilation, groups (incl. depthwise), bias or none, non-contiguous inputs and
 * weights, hand-computed cases, and the router's errors. */
#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------- */

/* Deterministic values k/8 for k in [-16, 16] (th_fill_eighths): exact in f32, so products and
 * short sums are too. */
static uint64_t rng_state = 0x2545f4914f6cdd1dull;
static cn_tensor *rand_tensor(const int64_t *shape, int ndim, cn_dtype dt) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = th_alloc_doubles(n);
    th_fill_eighths(&rng_state, v, n);
    cn_tensor *t = th_own(th_tensor(v, shape, ndim, dt));
    free(v);
    return t;
}

/* ---- conv2d --------------------------------------------------------------------------------- */

/* The reference: the definition of a grouped, strided, padded, dilated cross-correlation. */
static double *ref_conv2d(const double *x, const int64_t *xs, const double *w, const int64_t *ws,
                          const double *b, cn_conv2d_params p, int64_t *os) {
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3];
    int64_t O = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3];
    int64_t sh = p.stride[0] ? p.stride[0] : 1, sw = p.stride[1] ? p.stride[1] : 1;
    int64_t dh = p.dilation[0] ? p.dilation[0] : 1, dw = p.dilation[1] ? p.dilation[1] : 1;
    int64_t ph = p.padding[0], pw = p.padding[1], G = p.groups ? p.groups : 1, Og = O / G;
    int64_t OH = (H + 2 * ph - dh * (KH - 1) - 1) / sh + 1;
    int64_t OW = (W + 2 * pw - dw * (KW - 1) - 1) / sw + 1;
    os[0] = N, os[1] = O, os[2] = OH, os[3] = OW;
    double *out = th_alloc_doubles(N * O * OH * OW);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double s = b ? b[o] : 0.0;
                    int64_t g = o / Og;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * sh - ph + kh * dh, iw = ow * sw - pw + kw * dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += x[((n * C + g * Cg + c) * H + ih) * W + iw] *
                                     w[((o * Cg + c) * KH + kh) * KW + kw];
                            }
                    out[((n * O + o) * OH + oh) * OW + ow] = s;
                }
    (void)C;
    return out;
}

/* Checks cn_conv2d(x, w, b, p) against the reference; x, w, b may be any views. */
static void check_conv(const char *what, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                       cn_conv2d_params p) {
    double *xv = th_values(x), *wv = th_values(w), *bv = b ? th_values(b) : NULL;
    int64_t os[4];
    double *want = ref_conv2d(xv, cn_shape(x), wv, cn_shape(w), bv, p, os);
    cn_tensor *y = th_own(cn_conv2d(x, w, b, &p));
    th_check_shape(what, y, os, 4);
    th_check_values(what, y, want, os[0] * os[1] * os[2] * os[3], th_tol_of(cn_dtype_of(x)));
    free(xv);
    free(wv);
    free(bv);
    free(want);
}

static const cn_conv2d_params plain = {{1, 1}, {0, 0}, {1, 1}, 1};

static void test_conv2d_hand_computed(void) {
    /* x = 1..9 as 3x3, w = [[1, 0], [0, -1]]: each output is x[i][j] - x[i+1][j+1] = -4 */
    double xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, wv[4] = {1, 0, 0, -1}, bv[1] = {0.5};
    cn_tensor *x = th_own(th_tensor(xv, (int64_t[]){1, 1, 3, 3}, 4, CN_F32));
    cn_tensor *w = th_own(th_tensor(wv, (int64_t[]){1, 1, 2, 2}, 4, CN_F32));
    cn_tensor *b = th_own(th_tensor(bv, (int64_t[]){1}, 1, CN_F32));
    cn_tensor *y = th_own(cn_conv2d(x, w, NULL, NULL));
    th_check_shape("hand conv", y, (int64_t[]){1, 1, 2, 2}, 4);
    th_check_values("hand conv", y, (double[]){-4, -4, -4, -4}, 4, 0);
    th_check_values("hand conv + bias", th_own(cn_conv2d(x, w, b, NULL)),
                    (double[]){-3.5, -3.5, -3.5, -3.5}, 4, 0);
    /* padding 1, stride 2: out[i][j] = x[2i-1][2j-1] - x[2i][2j], zero outside the image */
    cn_conv2d_params p = {{2, 2}, {1, 1}, {1, 1}, 1};
    th_check_values("hand conv, stride 2, padding 1", th_own(cn_conv2d(x, w, NULL, &p)),
                    (double[]){-1, -3, -7, -4}, 4, 0);
    th_release_owned();
}

static void test_conv2d_stride_padding_dilation(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        cn_tensor *x = rand_tensor((int64_t[]){2, 3, 9, 8}, 4, dt);
        cn_tensor *w = rand_tensor((int64_t[]){4, 3, 3, 3}, 4, dt);
        cn_tensor *b = rand_tensor((int64_t[]){4}, 1, dt);
        check_conv("plain, bias", x, w, b, plain);
        check_conv("plain, no bias", x, w, NULL, plain);
        check_conv("stride (2, 1)", x, w, b, (cn_conv2d_params){{2, 1}, {0, 0}, {1, 1}, 1});
        check_conv("padding (1, 2)", x, w, b, (cn_conv2d_params){{1, 1}, {1, 2}, {1, 1}, 1});
        check_conv("dilation (2, 3)", x, w, b, (cn_conv2d_params){{1, 1}, {0, 0}, {2, 3}, 1});
        check_conv("all at once", x, w, b, (cn_conv2d_params){{2, 3}, {2, 1}, {2, 1}, 1});
        check_conv("zero params mean defaults", x, w, b, (cn_conv2d_params){{0, 0}, {0, 0},
                                                                           {0, 0}, 0});
        cn_tensor *w2 = rand_tensor((int64_t[]){5, 3, 2, 4}, 4, dt); /* non-square kernel */
        check_conv("kernel 2x4, padding", x, w2, NULL,
                   (cn_conv2d_params){{1, 2}, {1, 2}, {1, 1}, 1});
        cn_tensor *w1 = rand_tensor((int64_t[]){6, 3, 1, 1}, 4, dt); /* 1x1: x read in place */
        check_conv("1x1", x, w1, rand_tensor((int64_t[]){6}, 1, dt), plain);
        check_conv("1x1, stride 2", x, w1, NULL, (cn_conv2d_params){{2, 2}, {0, 0}, {1, 1}, 1});
        check_conv("1x1, padding 1", x, w1, NULL, (cn_conv2d_params){{1, 1}, {1, 1}, {1, 1}, 1});
    }
    th_release_owned();
}

/* Unit stride with output rows as wide as the input's ("same" padding across): im2col copies each
 * column row as one shifted block (im2col.c). Kernel widths 1, 3, 5, heights with padding from
 * none to more than the kernel (whole column rows outside the image), a one-column image, and
 * channels sliced out of a wider tensor (a channel stride that is not H*W). */
static void test_conv2d_same_width(void) {
    const int64_t ks[][2] = {{3, 3}, {1, 1}, {5, 5}, {3, 1}, {1, 5}, {2, 3}};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = i ? CN_F64 : CN_F32;
        cn_tensor *x = rand_tensor((int64_t[]){2, 3, 7, 6}, 4, dt);
        cn_tensor *narrow = rand_tensor((int64_t[]){1, 2, 5, 1}, 4, dt);
        cn_tensor *wide = rand_tensor((int64_t[]){2, 5, 6, 6}, 4, dt);
        cn_tensor *sliced = th_own(cn_slice(wide, 1, 1, 4, 1)); /* [2, 3, 6, 6] */
        for (size_t k = 0; k < sizeof ks / sizeof ks[0]; k++) {
            int64_t kh = ks[k][0], kw = ks[k][1], pw = (kw - 1) / 2;
            if (kw % 2 == 0) continue; /* an even kernel width never keeps the width */
            cn_tensor *w = rand_tensor((int64_t[]){4, 3, kh, kw}, 4, dt);
            cn_tensor *w2 = rand_tensor((int64_t[]){2, 2, kh, kw}, 4, dt);
            cn_tensor *b = rand_tensor((int64_t[]){4}, 1, dt);
            const int64_t phs[] = {0, (kh - 1) / 2, kh, kh + 2};
            for (int j = 0; j < 4; j++) {
                cn_conv2d_params p = {{1, 1}, {phs[j], pw}, {1, 1}, 1};
                check_conv("same width", x, w, b, p);
                check_conv("same width, sliced channels", sliced, w, NULL, p);
                check_conv("same width, one column", narrow, w2, NULL, p);
            }
        }
        cn_tensor *w23 = rand_tensor((int64_t[]){4, 3, 2, 3}, 4, dt);
        check_conv("same width, even height", x, w23, NULL,
                   (cn_conv2d_params){{1, 1}, {1, 1}, {1, 1}, 1});
    }
    th_release_owned();
}

static void test_conv2d_groups_and_depthwise(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        cn_tensor *x = rand_tensor((int64_t[]){2, 4, 7, 6}, 4, dt);
        cn_tensor *w = rand_tensor((int64_t[]){6, 2, 3, 3}, 4, dt);
        cn_tensor *b = rand_tensor((int64_t[]){6}, 1, dt);
        check_conv("groups 2", x, w, b, (cn_conv2d_params){{1, 1}, {1, 1}, {1, 1}, 2});
        check_conv("groups 2, no bias, stride 2", x, w, NULL,
                   (cn_conv2d_params){{2, 2}, {0, 1}, {1, 1}, 2});
        cn_tensor *wd = rand_tensor((int64_t[]){8, 1, 3, 3}, 4, dt); /* depthwise, multiplier 2 */
        cn_tensor *bd = rand_tensor((int64_t[]){8}, 1, dt);
        check_conv("depthwise x2", x, wd, bd, (cn_conv2d_params){{1, 1}, {1, 1}, {1, 1}, 4});
        cn_tensor *wd1 = rand_tensor((int64_t[]){4, 1, 3, 3}, 4, dt); /* depthwise, 1:1 */
        check_conv("depthwise", x, wd1, NULL, (cn_conv2d_params){{1, 1}, {1, 1}, {2, 2}, 4});
        cn_tensor *w11 = rand_tensor((int64_t[]){4, 2, 1, 1}, 4, dt); /* grouped 1x1 */
        check_conv("grouped 1x1", x, w11, NULL, (cn_conv2d_params){{1, 1}, {0, 0}, {1, 1}, 2});
    }
    th_release_owned();
}

static void test_conv2d_non_contiguous_operands(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        /* channels-last storage viewed as NCHW */
        cn_tensor *nhwc = rand_tensor((int64_t[]){2, 7, 6, 3}, 4, dt);
        cn_tensor *x = th_own(cn_permute(nhwc, (int[]){0, 3, 1, 2}));
        CHECK(x && !cn_is_contiguous(x));
        cn_tensor *w = rand_tensor((int64_t[]){4, 3, 3, 3}, 4, dt);
        cn_tensor *b = rand_tensor((int64_t[]){4}, 1, dt);
        check_conv("channels-last x", x, w, b, (cn_conv2d_params){{1, 1}, {1, 1}, {1, 1}, 1});
        cn_tensor *w1 = rand_tensor((int64_t[]){5, 3, 1, 1}, 4, dt);
        check_conv("channels-last x, 1x1", x, w1, NULL, plain);

        /* every other column: a width stride of 2 */
        cn_tensor *wide = rand_tensor((int64_t[]){2, 3, 6, 14}, 4, dt);
        cn_tensor *xs = th_own(cn_slice(wide, 3, 0, 14, 2));
        check_conv("strided columns", xs, w, b, (cn_conv2d_params){{2, 1}, {1, 0}, {1, 1}, 1});
        check_conv("strided columns, 1x1", xs, w1, NULL, plain);

        /* a channel slice (the batch stride is not C*H*W) */
        cn_tensor *many = rand_tensor((int64_t[]){2, 6, 5, 5}, 4, dt);
        cn_tensor *xc = th_own(cn_slice(many, 1, 1, 4, 1));
        check_conv("channel slice, 1x1", xc, w1, rand_tensor((int64_t[]){5}, 1, dt), plain);
        check_conv("channel slice", xc, w, NULL, plain);

        /* batch-major storage [C, N, H, W] viewed as NCHW: the channel stride exceeds H*W */
        cn_tensor *cnhw = rand_tensor((int64_t[]){3, 2, 5, 4}, 4, dt);
        cn_tensor *xb = th_own(cn_permute(cnhw, (int[]){1, 0, 2, 3}));
        check_conv("batch-major x, 1x1", xb, w1, NULL, plain);
        check_conv("batch-major x", xb, w, b, plain);

        /* every other filter: dense filters, but the filter stride exceeds C*KH*KW */
        cn_tensor *w_store = rand_tensor((int64_t[]){8, 3, 3, 3}, 4, dt);
        cn_tensor *w_every2 = th_own(cn_slice(w_store, 0, 0, 8, 2));
        check_conv("every other filter", x, w_every2, b, plain);

        /* weights stored [O, C, KW, KH] and transposed; bias taken every other element */
        cn_tensor *wt_store = rand_tensor((int64_t[]){4, 3, 2, 3}, 4, dt);
        cn_tensor *wt = th_own(cn_transpose(wt_store, 2, 3)); /* [4, 3, 3, 2] */
        cn_tensor *b_store = rand_tensor((int64_t[]){8}, 1, dt);
        cn_tensor *bs = th_own(cn_slice(b_store, 0, 0, 8, 2));
        check_conv("transposed weights, strided bias", x, wt, bs,
                   (cn_conv2d_params){{1, 1}, {1, 0}, {1, 1}, 1});
        /* weights broadcast over the output channels (stride 0) */
        cn_tensor *w_one = rand_tensor((int64_t[]){1, 3, 3, 3}, 4, dt);
        cn_tensor *w_exp = th_own(cn_expand(w_one, (int64_t[]){4, 3, 3, 3}, 4));
        check_conv("expanded weights", x, w_exp, NULL, plain);
    }
    th_release_owned();
}

/* Enough images that they run side by side on several threads, and a case big enough that each
 * image's GEMM runs on OpenBLAS's threads instead. */
static void test_conv2d_batched_paths(void) {
    cn_tensor *x = rand_tensor((int64_t[]){64, 1, 28, 28}, 4, CN_F32);
    cn_tensor *w = rand_tensor((int64_t[]){32, 1, 3, 3}, 4, CN_F32);
    cn_tensor *b = rand_tensor((int64_t[]){32}, 1, CN_F32);
    check_conv("batch 64, 1 -> 32 channels", x, w, b,
               (cn_conv2d_params){{1, 1}, {1, 1}, {1, 1}, 1});
    cn_tensor *x2 = rand_tensor((int64_t[]){2, 16, 14, 14}, 4, CN_F64);
    cn_tensor *w2 = rand_tensor((int64_t[]){32, 16, 3, 3}, 4, CN_F64);
    check_conv("big per-image GEMM", x2, w2, NULL, plain);
    th_release_owned();
}

static void test_conv2d_empty_dims(void) {
    /* no input channels: an empty sum, so the output is the bias (or zero) */
    cn_tensor *x = th_own(cn_zeros((int64_t[]){2, 0, 4, 4}, 4, CN_F32, cn_cpu()));
    cn_tensor *w = th_own(cn_zeros((int64_t[]){3, 0, 3, 3}, 4, CN_F32, cn_cpu()));
    cn_tensor *b = th_own(th_tensor((double[]){1, -2, 0.5}, (int64_t[]){3}, 1, CN_F32));
    cn_tensor *y = th_own(cn_conv2d(x, w, b, NULL));
    th_check_shape("C = 0", y, (int64_t[]){2, 3, 2, 2}, 4);
    double want[24];
    for (int i = 0; i < 24; i++) want[i] = (double[]){1, -2, 0.5}[(i / 4) % 3];
    th_check_values("C = 0", y, want, 24, 0);
    double zeros[24] = {0};
    th_check_values("C = 0, no bias", th_own(cn_conv2d(x, w, NULL, NULL)), zeros, 24, 0);
    /* no images, no filters */
    cn_tensor *x0 = th_own(cn_zeros((int64_t[]){0, 2, 4, 4}, 4, CN_F32, cn_cpu()));
    cn_tensor *w2 = th_own(cn_ones((int64_t[]){3, 2, 3, 3}, 4, CN_F32, cn_cpu()));
    th_check_shape("N = 0", th_own(cn_conv2d(x0, w2, NULL, NULL)), (int64_t[]){0, 3, 2, 2}, 4);
    cn_tensor *x2 = th_own(cn_ones((int64_t[]){1, 2, 4, 4}, 4, CN_F32, cn_cpu()));
    cn_tensor *w0 = th_own(cn_zeros((int64_t[]){0, 2, 3, 3}, 4, CN_F32, cn_cpu()));
    th_check_shape("O = 0", th_own(cn_conv2d(x2, w0, NULL, NULL)), (int64_t[]){1, 0, 2, 2}, 4);
    th_release_owned();
}

static void test_conv2d_errors(void) {
    cn_tensor *x = th_own(cn_ones((int64_t[]){1, 3, 5, 5}, 4, CN_F32, cn_cpu()));
    cn_tensor *w = th_own(cn_ones((int64_t[]){2, 2, 3, 3}, 4, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_conv2d(x, w, NULL, NULL), CN_ERR_SHAPE, "conv2d"); /* channel mismatch */
    cn_tensor *w3 = th_own(cn_ones((int64_t[]){2, 3, 3, 3}, 4, CN_F32, cn_cpu()));
    cn_conv2d_params g2 = {{1, 1}, {0, 0}, {1, 1}, 2};
    CHECK_FAILS(cn_conv2d(x, w3, NULL, &g2), CN_ERR_SHAPE, "conv2d"); /* 3 % 2 groups */
    cn_tensor *big = th_own(cn_ones((int64_t[]){1, 3, 7, 7}, 4, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_conv2d(x, big, NULL, NULL), CN_ERR_SHAPE, "conv2d"); /* kernel > input */
    cn_conv2d_params dil = {{1, 1}, {0, 0}, {3, 3}, 1};
    CHECK_FAILS(cn_conv2d(x, w3, NULL, &dil), CN_ERR_SHAPE, "conv2d"); /* dilated kernel */
    cn_tensor *bad_b = th_own(cn_ones((int64_t[]){3}, 1, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_conv2d(x, w3, bad_b, NULL), CN_ERR_SHAPE, "conv2d");
    cn_tensor *xd = th_own(cn_ones((int64_t[]){1, 3, 5, 5}, 4, CN_F64, cn_cpu()));
    CHECK_FAILS(cn_conv2d(xd, w3, NULL, NULL), CN_ERR_DTYPE, "conv2d");
    cn_tensor *xi = th_own(cn_ones((int64_t[]){1, 3, 5, 5}, 4, CN_I32, cn_cpu()));
    CHECK_FAILS(cn_conv2d(xi, w3, NULL, NULL), CN_ERR_KIND, "conv2d");
    cn_tensor *x3 = th_own(cn_ones((int64_t[]){3, 5, 5}, 3, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_conv2d(x3, w3, NULL, NULL), CN_ERR_SHAPE, "conv2d");
    /* an empty kernel with a dilation near INT64_MAX: the output size's arithmetic passes int64
     * (found by fuzz_ops; fuzz/corpus/ops/empty-kernel-huge-dilation) */
    cn_tensor *w0 = th_own(cn_ones((int64_t[]){2, 3, 0, 0}, 4, CN_F32, cn_cpu()));
    cn_conv2d_params huge = {{1, 1}, {4, 4}, {INT64_MAX - 3, INT64_MAX - 3}, 1};
    CHECK_FAILS(cn_conv2d(x, w0, NULL, &huge), CN_ERR_OVERFLOW, "conv2d");
    /* an empty kernel, stride 1 and padding that makes the room exactly INT64_MAX: the + 1 of
     * the output size passes int64 (found by fuzz_ops in CI) */
    cn_conv2d_params edge = {{1, 1}, {(INT64_MAX - 5) / 2, 0}, {1, 1}, 1};
    CHECK_FAILS(cn_conv2d(x, w0, NULL, &edge), CN_ERR_OVERFLOW, "conv2d");
    th_release_owned();
}

/* ---- pooling -------------------------------------------------------------------------------- */

static double *ref_pool2d(const double *x, const int64_t *xs, cn_pool2d_params p, int is_max,
                          int64_t *os) {
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], KH = p.kernel[0], KW = p.kernel[1];
    int64_t sh = p.stride[0] ? p.stride[0] : KH, sw = p.stride[1] ? p.stride[1] : KW;
    int64_t ph = p.padding[0], pw = p.padding[1];
    int64_t OH = (H + 2 * ph - KH) / sh + 1, OW = (W + 2 * pw - KW) / sw + 1;
    os[0] = N, os[1] = C, os[2] = OH, os[3] = OW;
    double *out = th_alloc_doubles(N * C * OH * OW);
    for (int64_t nc = 0; nc < N * C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = is_max ? -INFINITY : 0.0;
                for (int64_t i = 0; i < KH; i++)
                    for (int64_t j = 0; j < KW; j++) {
                        int64_t h = oh * sh - ph + i, w = ow * sw - pw + j;
                        if (h < 0 || h >= H || w < 0 || w >= W) continue; /* padding */
                        double v = x[(nc * H + h) * W + w];
                        if (is_max)
                            acc = (isnan(v) || isnan(acc)) ? NAN : (v > acc ? v : acc);
                        else
                            acc += v;
                    }
                out[(nc * OH + oh) * OW + ow] = is_max ? acc : acc / (double)(KH * KW);
            }
    return out;
}

static void check_pool(const char *what, cn_tensor *x, cn_pool2d_params p) {
    double *xv = th_values(x);
    for (int is_max = 0; is_max < 2; is_max++) {
        int64_t os[4];
        double *want = ref_pool2d(xv, cn_shape(x), p, is_max, os);
        cn_tensor *y = th_own(is_max ? cn_max_pool2d(x, &p) : cn_avg_pool2d(x, &p));
        char name[160];
        snprintf(name, sizeof name, "%s (%s)", what, is_max ? "max" : "avg");
        th_check_shape(name, y, os, 4);
        th_check_values(name, y, want, os[0] * os[1] * os[2] * os[3], th_tol_of(cn_dtype_of(x)));
        free(want);
    }
    free(xv);
}

static void test_pool_hand_computed(void) {
    double xv[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cn_tensor *x = th_own(th_tensor(xv, (int64_t[]){1, 1, 3, 3}, 4, CN_F32));
    cn_pool2d_params p = {{2, 2}, {1, 1}, {0, 0}};
    th_check_values("hand max", th_own(cn_max_pool2d(x, &p)), (double[]){5, 6, 8, 9}, 4, 0);
    th_check_values("hand avg", th_own(cn_avg_pool2d(x, &p)), (double[]){3, 4, 6, 7}, 4, 0);
    /* kernel 2, stride 2, padding 1: windows over rows/cols {-1, 0} and {1, 2}; avg divides by
     * 4 including the padded zeros */
    cn_pool2d_params q = {{2, 2}, {2, 2}, {1, 1}};
    th_check_values("hand max, padded", th_own(cn_max_pool2d(x, &q)), (double[]){1, 3, 7, 9}, 4, 0);
    th_check_values("hand avg, padded", th_own(cn_avg_pool2d(x, &q)),
                    (double[]){0.25, 1.25, 2.75, 7.0}, 4, 0);
    /* all-negative input: padded positions must not win as zeros */
    cn_tensor *neg = th_own(cn_full((int64_t[]){1, 1, 2, 2}, 4, -3.0, CN_F64, cn_cpu()));
    th_check_values("max ignores padding", th_own(cn_max_pool2d(neg, &q)), (double[]){-3, -3, -3, -3},
                    4, 0);
    /* NaN propagates through max, as in PyTorch */
    double nv[4] = {1, NAN, 3, 4};
    cn_tensor *xn = th_own(th_tensor(nv, (int64_t[]){1, 1, 2, 2}, 4, CN_F32));
    cn_pool2d_params whole = {{2, 2}, {0, 0}, {0, 0}};
    cn_tensor *mn = th_own(cn_max_pool2d(xn, &whole));
    double got = 0;
    CHECK(th_read(mn, &got) == 1 && isnan(got));
    th_release_owned();
}

static void test_pool_matches_reference(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dts[i];
        cn_tensor *x = rand_tensor((int64_t[]){2, 3, 9, 8}, 4, dt);
        check_pool("2x2", x, (cn_pool2d_params){{2, 2}, {0, 0}, {0, 0}});
        check_pool("3x3 stride 2 padding 1", x, (cn_pool2d_params){{3, 3}, {2, 2}, {1, 1}});
        check_pool("3x2 stride (1, 2) padding (1, 1)", x,
                   (cn_pool2d_params){{3, 2}, {1, 2}, {1, 1}});
        check_pool("5x4 stride 3 padding (2, 2)", x, (cn_pool2d_params){{5, 4}, {3, 3}, {2, 2}});
        check_pool("1x1", x, (cn_pool2d_params){{1, 1}, {1, 1}, {0, 0}});
        cn_tensor *nhwc = rand_tensor((int64_t[]){2, 8, 7, 3}, 4, dt);
        cn_tensor *xp = th_own(cn_permute(nhwc, (int[]){0, 3, 1, 2}));
        check_pool("channels-last input", xp, (cn_pool2d_params){{3, 3}, {2, 2}, {1, 1}});
        cn_tensor *wide = rand_tensor((int64_t[]){2, 3, 6, 12}, 4, dt);
        cn_tensor *xs = th_own(cn_slice(wide, 3, 1, 12, 2));
        check_pool("strided columns", xs, (cn_pool2d_params){{2, 2}, {1, 1}, {1, 1}});
        cn_tensor *big = rand_tensor((int64_t[]){8, 16, 16, 16}, 4, dt); /* threaded */
        check_pool("8x16 planes", big, (cn_pool2d_params){{2, 2}, {2, 2}, {0, 0}});
    }
    th_release_owned();
}

static void test_pool_errors(void) {
    cn_tensor *x = th_own(cn_ones((int64_t[]){1, 2, 5, 5}, 4, CN_F32, cn_cpu()));
    cn_pool2d_params too_much_pad = {{2, 2}, {1, 1}, {2, 0}};
    CHECK_FAILS(cn_max_pool2d(x, &too_much_pad), CN_ERR_INVALID_ARG, "max_pool2d");
    CHECK_FAILS(cn_avg_pool2d(x, &too_much_pad), CN_ERR_INVALID_ARG, "avg_pool2d");
    cn_pool2d_params huge = {{7, 7}, {1, 1}, {0, 0}};
    CHECK_FAILS(cn_max_pool2d(x, &huge), CN_ERR_SHAPE, "max_pool2d");
    cn_pool2d_params zero = {{0, 2}, {1, 1}, {0, 0}};
    CHECK_FAILS(cn_avg_pool2d(x, &zero), CN_ERR_INVALID_ARG, "avg_pool2d");
    cn_tensor *xi = th_own(cn_ones((int64_t[]){1, 2, 5, 5}, 4, CN_I64, cn_cpu()));
    cn_pool2d_params ok = {{2, 2}, {0, 0}, {0, 0}};
    CHECK_FAILS(cn_max_pool2d(xi, &ok), CN_ERR_KIND, "max_pool2d");
    cn_tensor *x2 = th_own(cn_ones((int64_t[]){5, 5}, 2, CN_F32, cn_cpu()));
    CHECK_FAILS(cn_avg_pool2d(x2, &ok), CN_ERR_SHAPE, "avg_pool2d");
    th_release_owned();
}

/* The pooling kernel takes its geometry from the router (cn_kernel_args.conv), computed and
 * checked once there; a direct call without one is refused, naming the op, instead of deriving
 * sizes from the ints and reading past the input. */
static void test_pool_kernel_needs_the_routers_geometry(void) {
    float x[16], y[9] = {0};
    for (int i = 0; i < 16; i++) x[i] = (float)i;
    cn_view v[2] = {
        {x, CN_F32, 4, {1, 1, 4, 4}, {16, 16, 4, 1}},
        {y, CN_F32, 4, {1, 1, 3, 3}, {9, 9, 3, 1}},
    };
    int64_t ints[6] = {2, 2, 1, 1, 0, 0};
    cn_kernel_args args = {.op = CN_OP_MAX_POOL2D, .n_in = 1, .in = v, .n_out = 1,
                           .out = &v[1], .n_ints = 6, .ints = ints};
    cn_kernel_fn k = cn_backend_get(CN_BACKEND_CPU)->kernels[CN_OP_MAX_POOL2D];
    cn_clear_error();
    CHECK(k(&args) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "max_pool2d") != NULL);
    cn_conv_geometry g = {.n = 1, .c = 1, .h = 4, .w = 4, .o = 1, .oh = 3, .ow = 3, .kh = 2,
                          .kw = 2, .sh = 1, .sw = 1, .dh = 1, .dw = 1, .groups = 1};
    args.conv = &g;
    cn_clear_error();
    CHECK(k(&args) == CN_OK);
    /* 2x2 windows at stride 1 over 0..15 row-major: the maximum is the bottom-right corner */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) CHECK(y[i * 3 + j] == (float)((i + 1) * 4 + j + 1));
    cn_clear_error();
}

int main(void) {
    RUN(test_conv2d_hand_computed);
    RUN(test_conv2d_stride_padding_dilation);
    RUN(test_conv2d_same_width);
    RUN(test_conv2d_groups_and_depthwise);
    RUN(test_conv2d_non_contiguous_operands);
    RUN(test_conv2d_batched_paths);
    RUN(test_conv2d_empty_dims);
    RUN(test_conv2d_errors);
    RUN(test_pool_hand_computed);
    RUN(test_pool_matches_reference);
    RUN(test_pool_errors);
    RUN(test_pool_kernel_needs_the_routers_geometry);
    return th_finish();
}
