/* The gradients of conv2d, max_pool2d and avg_pool2d (the router's backward entries, on the CPU)
 * against oracles written here:
 * - central finite differences, through the forward ops, of L = sum(forward(x) * R) for a fixed
 *   R, whose gradients are exactly what the backward entries compute with g = R;
 * - the adjoint loops of each op's definition, in double.
 * Inputs are k/8 with small k, so every product and short sum is exact in f32 and f64, and the
 * finite differences of these piecewise-linear losses are exact too. */
#include "dispatch/backward_ops.h"
#include "harness.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static int64_t numel4(const int64_t *s) { return s[0] * s[1] * s[2] * s[3]; }

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* n values k/8, k in [-16, 16] (many ties). */
static double *rand_values(int64_t n) {
    double *v = th_alloc_doubles(n);
    th_fill_eighths(&rng_state, v, n);
    return v;
}

/* n distinct values (a shuffle of (k - n/2)/8), so that every max window has one maximum. */
static double *distinct_values(int64_t n) {
    double *v = th_alloc_doubles(n);
    for (int64_t i = 0; i < n; i++) v[i] = (double)(i - n / 2) / 8.0;
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)(th_lcg(&rng_state) % (uint64_t)(i + 1));
        double t = v[i];
        v[i] = v[j];
        v[j] = t;
    }
    return v;
}

static cn_tensor *rand_tensor(const int64_t *shape, int ndim, cn_dtype dt) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = rand_values(n);
    cn_tensor *t = th_own(th_tensor(v, shape, ndim, dt));
    free(v);
    return t;
}

/* ---- conv2d: oracles ------------------------------------------------------------------------ */

typedef struct conv_case {
    int64_t sh, sw, ph, pw, dh, dw, groups;
} conv_case;

static cn_conv2d_params params_of(conv_case c) {
    return (cn_conv2d_params){{c.sh, c.sw}, {c.ph, c.pw}, {c.dh, c.dw}, c.groups};
}

static void ints_of(conv_case c, int64_t *ints) {
    int64_t v[7] = {c.sh, c.sw, c.ph, c.pw, c.dh, c.dw, c.groups};
    memcpy(ints, v, sizeof v);
}

static void conv_out_shape(const int64_t *xs, const int64_t *ws, conv_case c, int64_t *os) {
    os[0] = xs[0];
    os[1] = ws[0];
    os[2] = (xs[2] + 2 * c.ph - c.dh * (ws[2] - 1) - 1) / c.sh + 1;
    os[3] = (xs[3] + 2 * c.pw - c.dw * (ws[3] - 1) - 1) / c.sw + 1;
}

/* The adjoint of the definition y[n,o,oh,ow] = sum x[n, grp*Cg + c, ih, iw] * w[o, c, kh, kw]:
 * every term sends g * w to x's gradient and g * x to w's. gx, gw: zeroed, dense. */
static void ref_conv2d_backward(const double *x, const int64_t *xs, const double *w,
                                const int64_t *ws, const double *g, conv_case p, double *gx,
                                double *gw) {
    int64_t C = xs[1], H = xs[2], W = xs[3], Cg = ws[1], KH = ws[2], KW = ws[3];
    int64_t os[4];
    conv_out_shape(xs, ws, p, os);
    int64_t Og = os[1] / p.groups;
    for (int64_t n = 0; n < os[0]; n++)
        for (int64_t o = 0; o < os[1]; o++)
            for (int64_t oh = 0; oh < os[2]; oh++)
                for (int64_t ow = 0; ow < os[3]; ow++) {
                    double gv = g[((n * os[1] + o) * os[2] + oh) * os[3] + ow];
                    int64_t grp = o / Og;
                    for (int64_t c = 0; c < Cg; c++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t ih = oh * p.sh - p.ph + kh * p.dh;
                                int64_t iw = ow * p.sw - p.pw + kw * p.dw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                int64_t xi = ((n * C + grp * Cg + c) * H + ih) * W + iw;
                                int64_t wi = ((o * Cg + c) * KH + kh) * KW + kw;
                                gx[xi] += gv * w[wi];
                                gw[wi] += gv * x[xi];
                            }
                }
}

/* L = sum(conv2d(x, w) * R), through cn_conv2d in f64. */
static double conv_loss(const double *x, const int64_t *xs, const double *w, const int64_t *ws,
                        const double *R, conv_case p) {
    cn_tensor *xt = th_tensor(x, xs, 4, CN_F64), *wt = th_tensor(w, ws, 4, CN_F64);
    cn_conv2d_params cp = params_of(p);
    cn_tensor *y = cn_conv2d(xt, wt, NULL, &cp);
    double L = NAN;
    if (y) {
        int64_t n = cn_numel(y);
        double *yv = th_values(y);
        L = 0;
        for (int64_t i = 0; i < n; i++) L += yv[i] * R[i];
        free(yv);
    }
    cn_release(y);
    cn_release(xt);
    cn_release(wt);
    return L;
}

/* d L / d v[i] for every i by central differences (L is linear in v: h = 1 is exact). */
static void conv_fd(double *v, int64_t n, const double *x, const int64_t *xs, const double *w,
                    const int64_t *ws, const double *R, conv_case p, double *out) {
    for (int64_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + 1.0;
        double up = conv_loss(x, xs, w, ws, R, p);
        v[i] = keep - 1.0;
        double down = conv_loss(x, xs, w, ws, R, p);
        v[i] = keep;
        out[i] = (up - down) / 2.0;
    }
}

/* Runs both backward entries with g and checks them against the adjoint loops. x, w, g may be
 * any views (g of conv2d's output shape). */
static void check_conv_backward(const char *what, cn_tensor *x, cn_tensor *w, cn_tensor *g,
                                conv_case p) {
    const int64_t *xs = cn_shape(x), *ws = cn_shape(w);
    double *xv = th_values(x), *wv = th_values(w), *gv = th_values(g);
    double *gx = th_alloc_doubles(numel4(xs)), *gw = th_alloc_doubles(numel4(ws));
    ref_conv2d_backward(xv, xs, wv, ws, gv, p, gx, gw);
    int64_t ints[7];
    ints_of(p, ints);
    double tol = th_tol_of(cn_dtype_of(x));
    char name[160];
    cn_tensor *gx_t = th_own(cn__conv2d_backward_input(g, w, xs, ints));
    snprintf(name, sizeof name, "%s: input gradient", what);
    th_check_shape(name, gx_t, xs, 4);
    th_check_values(name, gx_t, gx, numel4(xs), tol);
    cn_tensor *gw_t = th_own(cn__conv2d_backward_weight(g, x, ws, ints));
    snprintf(name, sizeof name, "%s: weight gradient", what);
    th_check_shape(name, gw_t, ws, 4);
    th_check_values(name, gw_t, gw, numel4(ws), tol);
    free(xv);
    free(wv);
    free(gv);
    free(gx);
    free(gw);
}

/* check_conv_backward with fresh random x [xs], w [ws] and g. */
static void check_conv_case(const char *what, const int64_t *xs, const int64_t *ws, conv_case p,
                            cn_dtype dt) {
    int64_t os[4];
    conv_out_shape(xs, ws, p, os);
    check_conv_backward(what, rand_tensor(xs, 4, dt), rand_tensor(ws, 4, dt),
                        rand_tensor(os, 4, dt), p);
}

/* ---- conv2d: tests -------------------------------------------------------------------------- */

static const cn_dtype dtypes[2] = {CN_F32, CN_F64};

/* The backward entries are the derivatives of the forward: finite differences of cn_conv2d. */
static void test_conv2d_gradients_match_finite_differences(void) {
    struct {
        const char *what;
        int64_t xs[4], ws[4];
        conv_case p;
    } cases[] = {
        {"stride 2, padding 1, dilation 2, groups 2, kernel 2x3",
         {2, 4, 7, 6}, {6, 2, 2, 3}, {2, 2, 1, 1, 2, 2, 2}},
        {"depthwise x2, padding (1, 0), stride (1, 2)",
         {1, 3, 6, 7}, {6, 1, 3, 3}, {1, 2, 1, 0, 1, 1, 3}},
        {"plain 3x3", {2, 2, 5, 5}, {3, 2, 3, 3}, {1, 1, 0, 0, 1, 1, 1}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const int64_t *xs = cases[k].xs, *ws = cases[k].ws;
        conv_case p = cases[k].p;
        int64_t os[4];
        conv_out_shape(xs, ws, p, os);
        double *x = rand_values(numel4(xs)), *w = rand_values(numel4(ws));
        double *R = rand_values(numel4(os));
        double *fx = th_alloc_doubles(numel4(xs)), *fw = th_alloc_doubles(numel4(ws));
        conv_fd(x, numel4(xs), x, xs, w, ws, R, p, fx);
        conv_fd(w, numel4(ws), x, xs, w, ws, R, p, fw);
        cn_tensor *gt = th_own(th_tensor(R, os, 4, CN_F64));
        cn_tensor *xt = th_own(th_tensor(x, xs, 4, CN_F64)), *wt = th_own(th_tensor(w, ws, 4, CN_F64));
        int64_t ints[7];
        ints_of(p, ints);
        th_check_values(cases[k].what, th_own(cn__conv2d_backward_input(gt, wt, xs, ints)), fx,
                        numel4(xs), 1e-12);
        th_check_values(cases[k].what, th_own(cn__conv2d_backward_weight(gt, xt, ws, ints)), fw,
                        numel4(ws), 1e-12);
        free(x);
        free(w);
        free(R);
        free(fx);
        free(fw);
        th_release_owned();
    }
}

static void test_conv2d_backward_stride_padding_dilation(void) {
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dtypes[i];
        const int64_t xs[4] = {2, 3, 9, 8}, ws[4] = {4, 3, 3, 3};
        check_conv_case("plain", xs, ws, (conv_case){1, 1, 0, 0, 1, 1, 1}, dt);
        check_conv_case("stride (2, 1)", xs, ws, (conv_case){2, 1, 0, 0, 1, 1, 1}, dt);
        check_conv_case("stride 3 (rows and columns skipped)", xs, ws,
                        (conv_case){3, 3, 0, 0, 1, 1, 1}, dt);
        check_conv_case("padding (1, 2)", xs, ws, (conv_case){1, 1, 1, 2, 1, 1, 1}, dt);
        check_conv_case("dilation (2, 3)", xs, ws, (conv_case){1, 1, 0, 0, 2, 3, 1}, dt);
        check_conv_case("all at once", xs, ws, (conv_case){2, 3, 2, 1, 2, 1, 1}, dt);
        check_conv_case("padding wider than the reach of some taps", (int64_t[]){1, 2, 3, 3},
                        (int64_t[]){2, 2, 3, 3}, (conv_case){1, 1, 2, 2, 1, 1, 1}, dt);
        check_conv_case("kernel 2x4, stride (1, 2), padding (1, 2)", xs,
                        (int64_t[]){5, 3, 2, 4}, (conv_case){1, 2, 1, 2, 1, 1, 1}, dt);
        check_conv_case("kernel 1x3", xs, (int64_t[]){2, 3, 1, 3},
                        (conv_case){1, 1, 0, 1, 1, 1, 1}, dt);
        check_conv_case("kernel 3x1", xs, (int64_t[]){2, 3, 3, 1},
                        (conv_case){2, 1, 1, 0, 1, 1, 1}, dt);
        const int64_t w1[4] = {6, 3, 1, 1}; /* 1x1: the GEMM writes gx / reads x in place */
        check_conv_case("1x1", xs, w1, (conv_case){1, 1, 0, 0, 1, 1, 1}, dt);
        check_conv_case("1x1, stride 2", xs, w1, (conv_case){2, 2, 0, 0, 1, 1, 1}, dt);
        check_conv_case("1x1, padding 1", xs, w1, (conv_case){1, 1, 1, 1, 1, 1, 1}, dt);
        check_conv_case("kernel as large as the padded input", (int64_t[]){1, 2, 4, 3},
                        (int64_t[]){3, 2, 6, 5}, (conv_case){1, 1, 1, 1, 1, 1, 1}, dt);
        th_release_owned();
    }
}

static void test_conv2d_backward_groups_and_depthwise(void) {
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dtypes[i];
        const int64_t xs[4] = {2, 4, 7, 6};
        check_conv_case("groups 2", xs, (int64_t[]){6, 2, 3, 3},
                        (conv_case){1, 1, 1, 1, 1, 1, 2}, dt);
        check_conv_case("groups 2, stride 2, padding (0, 1)", xs, (int64_t[]){6, 2, 3, 3},
                        (conv_case){2, 2, 0, 1, 1, 1, 2}, dt);
        check_conv_case("depthwise x2", xs, (int64_t[]){8, 1, 3, 3},
                        (conv_case){1, 1, 1, 1, 1, 1, 4}, dt);
        check_conv_case("depthwise, dilation 2", xs, (int64_t[]){4, 1, 3, 3},
                        (conv_case){1, 1, 1, 1, 2, 2, 4}, dt);
        check_conv_case("depthwise, kernel 2x3, stride (2, 1)", xs, (int64_t[]){4, 1, 2, 3},
                        (conv_case){2, 1, 1, 0, 1, 1, 4}, dt);
        check_conv_case("grouped 1x1", xs, (int64_t[]){4, 2, 1, 1},
                        (conv_case){1, 1, 0, 0, 1, 1, 2}, dt);
        th_release_owned();
    }
}

static void test_conv2d_backward_strided_operands(void) {
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dtypes[i];
        conv_case pad1 = {1, 1, 1, 1, 1, 1, 1}, plain = {1, 1, 0, 0, 1, 1, 1};
        cn_tensor *x = rand_tensor((int64_t[]){2, 3, 7, 6}, 4, dt);
        cn_tensor *w = rand_tensor((int64_t[]){4, 3, 3, 3}, 4, dt);
        cn_tensor *w1 = rand_tensor((int64_t[]){5, 3, 1, 1}, 4, dt);

        /* g stored channels-last [N, OH, OW, O], viewed as [N, O, OH, OW]: packed per block */
        cn_tensor *g_nhwc = rand_tensor((int64_t[]){2, 7, 6, 4}, 4, dt);
        cn_tensor *g_perm = th_own(cn_permute(g_nhwc, (int[]){0, 3, 1, 2}));
        CHECK(g_perm && !cn_is_contiguous(g_perm));
        check_conv_backward("channels-last g", x, w, g_perm, pad1);
        /* g broadcast from one value (the gradient of a sum): every stride 0 */
        cn_tensor *g_one = rand_tensor((int64_t[]){1, 1, 1, 1}, 4, dt);
        check_conv_backward("expanded g", x, w,
                            th_own(cn_expand(g_one, (int64_t[]){2, 4, 7, 6}, 4)), pad1);
        check_conv_backward("expanded g, 1x1", x, w1,
                            th_own(cn_expand(g_one, (int64_t[]){2, 5, 7, 6}, 4)), plain);
        /* a channel slice of g (batch stride above O*OH*OW), a row slice of g (dense planes,
         * channel stride above OH*OW): both read in place */
        cn_tensor *g_many = rand_tensor((int64_t[]){2, 9, 7, 6}, 4, dt);
        check_conv_backward("channel slice of g", x, w, th_own(cn_slice(g_many, 1, 2, 6, 1)), pad1);
        check_conv_backward("channel slice of g, 1x1", x, w1,
                            th_own(cn_slice(g_many, 1, 1, 6, 1)), plain);
        cn_tensor *g_tall = rand_tensor((int64_t[]){2, 5, 9, 6}, 4, dt);
        check_conv_backward("row slice of g", x, w,
                            th_own(cn_slice(th_own(cn_slice(g_tall, 1, 0, 4, 1)), 2, 1, 8, 1)), pad1);
        check_conv_backward("row slice of g, 1x1", x, w1, th_own(cn_slice(g_tall, 2, 2, 9, 1)),
                            plain);
        /* every other column of g */
        cn_tensor *g_wide = rand_tensor((int64_t[]){2, 4, 7, 12}, 4, dt);
        check_conv_backward("column-strided g", x, w, th_own(cn_slice(g_wide, 3, 0, 12, 2)), pad1);

        /* x channels-last, x every other column, x a channel slice */
        cn_tensor *x_nhwc = rand_tensor((int64_t[]){2, 7, 6, 3}, 4, dt);
        cn_tensor *x_perm = th_own(cn_permute(x_nhwc, (int[]){0, 3, 1, 2}));
        int64_t os[4];
        conv_out_shape(cn_shape(x_perm), cn_shape(w), pad1, os);
        cn_tensor *g = rand_tensor(os, 4, dt);
        check_conv_backward("channels-last x", x_perm, w, g, pad1);
        conv_out_shape(cn_shape(x_perm), cn_shape(w1), plain, os);
        check_conv_backward("channels-last x, 1x1", x_perm, w1, rand_tensor(os, 4, dt), plain);
        cn_tensor *x_wide = rand_tensor((int64_t[]){2, 3, 7, 12}, 4, dt);
        cn_tensor *x_cols = th_own(cn_slice(x_wide, 3, 0, 12, 2));
        check_conv_backward("column-strided x", x_cols, w, g, pad1);
        check_conv_backward("column-strided x, 1x1", x_cols, w1, rand_tensor(os, 4, dt), plain);
        cn_tensor *x_many = rand_tensor((int64_t[]){2, 6, 7, 6}, 4, dt);
        cn_tensor *x_ch = th_own(cn_slice(x_many, 1, 2, 5, 1));
        check_conv_backward("channel slice of x", x_ch, w, g, pad1);
        check_conv_backward("channel slice of x, 1x1", x_ch, w1, rand_tensor(os, 4, dt), plain);
        cn_tensor *x_tall = rand_tensor((int64_t[]){2, 3, 10, 6}, 4, dt);
        cn_tensor *x_rows = th_own(cn_slice(x_tall, 2, 3, 10, 1)); /* channel stride 60 > 42 */
        check_conv_backward("row slice of x", x_rows, w, g, pad1);
        check_conv_backward("row slice of x, 1x1", x_rows, w1, rand_tensor(os, 4, dt), plain);

        /* w stored [O, C, KW, KH] and transposed; w broadcast over O (stride 0): both packed */
        cn_tensor *w_store = rand_tensor((int64_t[]){4, 3, 2, 3}, 4, dt);
        cn_tensor *w_t = th_own(cn_transpose(w_store, 2, 3)); /* [4, 3, 3, 2] */
        conv_out_shape(cn_shape(x), cn_shape(w_t), pad1, os);
        check_conv_backward("transposed w", x, w_t, rand_tensor(os, 4, dt), pad1);
        cn_tensor *w_one = rand_tensor((int64_t[]){1, 3, 3, 3}, 4, dt);
        check_conv_backward("expanded w", x, th_own(cn_expand(w_one, (int64_t[]){4, 3, 3, 3}, 4)),
                            g, pad1);
        /* a filter slice of w: dense filters, filter stride above C*KH*KW (read in place) */
        cn_tensor *w_big = rand_tensor((int64_t[]){4, 5, 3, 3}, 4, dt);
        check_conv_backward("channel slice of w", x, th_own(cn_slice(w_big, 1, 1, 4, 1)), g, pad1);
        th_release_owned();
    }
}

/* g the same for every image (batch stride 0) but not one value: each group's block is packed
 * once and read by every (image, group) task, threaded or not; and g's rows of unit stride in
 * planes that are not dense (copied row by row). */
static void test_conv2d_backward_g_shared_over_batch(void) {
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dtypes[i];
        conv_case pad1 = {1, 1, 1, 1, 1, 1, 1}, grouped = {1, 1, 1, 1, 1, 1, 2};
        cn_tensor *x = rand_tensor((int64_t[]){3, 4, 7, 6}, 4, dt);
        cn_tensor *g_img = rand_tensor((int64_t[]){1, 6, 7, 6}, 4, dt);
        cn_tensor *g_batch = th_own(cn_expand(g_img, (int64_t[]){3, 6, 7, 6}, 4));
        check_conv_backward("g expanded over the batch", x,
                            rand_tensor((int64_t[]){6, 4, 3, 3}, 4, dt), g_batch, pad1);
        check_conv_backward("g expanded over the batch, groups 2", x,
                            rand_tensor((int64_t[]){6, 2, 3, 3}, 4, dt), g_batch, grouped);
        /* g expanded over the batch and the rows: rows of stride 1 read from one row */
        cn_tensor *g_row = rand_tensor((int64_t[]){1, 6, 1, 6}, 4, dt);
        check_conv_backward("g expanded over the batch and rows", x,
                            rand_tensor((int64_t[]){6, 4, 3, 3}, 4, dt),
                            th_own(cn_expand(g_row, (int64_t[]){3, 6, 7, 6}, 4)), pad1);
        /* the benchmark's shape at a batch that the threads split */
        cn_tensor *g_big = rand_tensor((int64_t[]){1, 32, 28, 28}, 4, dt);
        check_conv_backward("benchmark-like, g expanded over the batch",
                            rand_tensor((int64_t[]){6, 1, 28, 28}, 4, dt),
                            rand_tensor((int64_t[]){32, 1, 3, 3}, 4, dt),
                            th_own(cn_expand(g_big, (int64_t[]){6, 32, 28, 28}, 4)), pad1);
        /* columns 2..7 of every row of g: unit-stride rows, row stride 12 */
        cn_tensor *g_wide = rand_tensor((int64_t[]){3, 6, 7, 12}, 4, dt);
        check_conv_backward("column slice of g", x, rand_tensor((int64_t[]){6, 4, 3, 3}, 4, dt),
                            th_own(cn_slice(g_wide, 3, 2, 8, 1)), pad1);
        th_release_owned();
    }
}

/* Shapes big enough for the threaded paths: many small GEMMs side by side (the weight gradient
 * summed over per-thread partials), and GEMMs big enough for OpenBLAS's own threads. */
static void test_conv2d_backward_threaded_paths(void) {
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dtypes[i];
        check_conv_case("benchmark-like: 1x28x28 -> 32, 3x3, padding 1", (int64_t[]){6, 1, 28, 28},
                        (int64_t[]){32, 1, 3, 3}, (conv_case){1, 1, 1, 1, 1, 1, 1}, dt);
        check_conv_case("16 -> 16 channels, 16x16 (big GEMMs)", (int64_t[]){2, 16, 16, 16},
                        (int64_t[]){16, 16, 3, 3}, (conv_case){1, 1, 1, 1, 1, 1, 1}, dt);
        th_release_owned();
    }
}

static void test_conv2d_backward_empty_batch(void) {
    cn_tensor *x = th_own(cn_zeros((int64_t[]){0, 2, 5, 5}, 4, CN_F32, cn_cpu()));
    cn_tensor *g = th_own(cn_zeros((int64_t[]){0, 3, 3, 3}, 4, CN_F32, cn_cpu()));
    cn_tensor *w = rand_tensor((int64_t[]){3, 2, 3, 3}, 4, CN_F32);
    int64_t ints[7] = {1, 1, 0, 0, 1, 1, 1};
    cn_tensor *gw = th_own(cn__conv2d_backward_weight(g, x, cn_shape(w), ints));
    double zeros[54] = {0};
    th_check_values("empty batch: the weight gradient is zero", gw, zeros, 54, 0);
    cn_tensor *gx = th_own(cn__conv2d_backward_input(g, w, cn_shape(x), ints));
    th_check_shape("empty batch: input gradient", gx, cn_shape(x), 4);
    th_release_owned();
}

/* The router's backward entries check nothing themselves; the kernels refuse arguments that do
 * not describe the forward op rather than index out of range. */
static void test_conv2d_backward_rejects_inconsistent_arguments(void) {
    cn_tensor *g = rand_tensor((int64_t[]){2, 4, 5, 5}, 4, CN_F32);
    cn_tensor *w = rand_tensor((int64_t[]){4, 3, 3, 3}, 4, CN_F32);
    cn_tensor *w64 = rand_tensor((int64_t[]){4, 3, 3, 3}, 4, CN_F64);
    int64_t ints[7] = {1, 1, 0, 0, 1, 1, 1}, zero_stride[7] = {0, 1, 0, 0, 1, 1, 1};
    int64_t xs[4] = {2, 3, 7, 7}, wrong_c[4] = {2, 5, 7, 7}, wrong_h[4] = {2, 3, 9, 7};
    cn_tensor *ok = th_own(cn__conv2d_backward_input(g, w, xs, ints));
    CHECK(ok != NULL);
    CHECK_FAILS(cn__conv2d_backward_input(g, w, wrong_c, ints), CN_ERR_SHAPE,
                "do not describe one convolution");
    CHECK_FAILS(cn__conv2d_backward_input(g, w, wrong_h, ints), CN_ERR_SHAPE,
                "do not describe one convolution");
    CHECK_FAILS(cn__conv2d_backward_input(g, w, xs, zero_stride), CN_ERR_INVALID_ARG, "stride");
    CHECK_FAILS(cn__conv2d_backward_input(g, w64, xs, ints), CN_ERR_DTYPE, "f64");
    cn_tensor *x = rand_tensor(xs, 4, CN_F32);
    int64_t w_wrong[4] = {4, 3, 2, 3};
    CHECK_FAILS(cn__conv2d_backward_weight(g, x, w_wrong, ints), CN_ERR_SHAPE,
                "do not describe one convolution");
    th_release_owned();
}

/* Every scratch allocation of the kernels fails cleanly: NULL, CN_ERR_OUT_OF_MEMORY, no leak. */
static void test_conv2d_backward_allocation_failures(void) {
    cn_tensor *g_nhwc = rand_tensor((int64_t[]){2, 5, 5, 4}, 4, CN_F64);
    cn_tensor *g = th_own(cn_permute(g_nhwc, (int[]){0, 3, 1, 2})); /* packed: needs scratch */
    cn_tensor *w_store = rand_tensor((int64_t[]){4, 3, 3, 3}, 4, CN_F64);
    cn_tensor *w = th_own(cn_transpose(w_store, 2, 3));
    cn_tensor *x = rand_tensor((int64_t[]){2, 3, 7, 7}, 4, CN_F64);
    int64_t ints[7] = {1, 1, 0, 0, 1, 1, 1};
    for (int which = 0; which < 2; which++) {
        int succeeded = 0;
        for (int64_t k = 1; k <= 16 && !succeeded; k++) {
            cn_clear_error();
            cn_alloc_fail_after(k);
            cn_tensor *r = which ? cn__conv2d_backward_weight(g, x, cn_shape(w), ints)
                                 : cn__conv2d_backward_input(g, w, cn_shape(x), ints);
            cn_alloc_fail_after(0);
            if (r) {
                succeeded = 1;
                CHECK(k > 1); /* at least the output and the scratch were at risk */
                cn_release(r);
            } else {
                CHECK(cn_last_status() == CN_ERR_OUT_OF_MEMORY);
            }
        }
        CHECK(succeeded);
    }
    cn_clear_error();
    th_release_owned();
}

/* ---- pooling: oracles ----------------------------------------------------------------------- */

typedef struct pool_case {
    int64_t kh, kw, sh, sw, ph, pw;
} pool_case;

static void pool_out_shape(const int64_t *xs, pool_case p, int64_t *os) {
    os[0] = xs[0];
    os[1] = xs[1];
    os[2] = (xs[2] + 2 * p.ph - p.kh) / p.sh + 1;
    os[3] = (xs[3] + 2 * p.pw - p.kw) / p.sw + 1;
}

static void pool_ints(pool_case p, int64_t *ints) {
    int64_t v[6] = {p.kh, p.kw, p.sh, p.sw, p.ph, p.pw};
    memcpy(ints, v, sizeof v);
}

/* Each window's g goes to its first maximum in row-major order over in-image positions (a NaN
 * counts as the maximum; the first in-image position when nothing beats -inf); avg spreads
 * g / (kh*kw) over the in-image positions. gx: zeroed, dense. */
static void ref_pool_backward(int is_max, const double *x, const int64_t *xs, const double *g,
                              pool_case p, double *gx) {
    int64_t os[4];
    pool_out_shape(xs, p, os);
    int64_t H = xs[2], W = xs[3];
    for (int64_t q = 0; q < xs[0] * xs[1]; q++)
        for (int64_t oh = 0; oh < os[2]; oh++)
            for (int64_t ow = 0; ow < os[3]; ow++) {
                double gv = g[(q * os[2] + oh) * os[3] + ow];
                int64_t best = -1;
                for (int64_t i = 0; i < p.kh; i++)
                    for (int64_t j = 0; j < p.kw; j++) {
                        int64_t h = oh * p.sh - p.ph + i, w = ow * p.sw - p.pw + j;
                        if (h < 0 || h >= H || w < 0 || w >= W) continue;
                        int64_t at = (q * H + h) * W + w;
                        if (!is_max) {
                            gx[at] += gv / (double)(p.kh * p.kw);
                        } else if (best < 0 || (!isnan(x[best]) &&
                                                (isnan(x[at]) || x[at] > x[best]))) {
                            best = at;
                        }
                    }
                if (is_max && best >= 0) gx[best] += gv;
            }
}

/* L = sum(pool(x) * R) through the forward op, in f64. */
static double pool_loss(int is_max, const double *x, const int64_t *xs, const double *R,
                        pool_case p) {
    cn_tensor *xt = th_tensor(x, xs, 4, CN_F64);
    cn_pool2d_params pp = {{p.kh, p.kw}, {p.sh, p.sw}, {p.ph, p.pw}};
    cn_tensor *y = is_max ? cn_max_pool2d(xt, &pp) : cn_avg_pool2d(xt, &pp);
    double L = NAN;
    if (y) {
        double *yv = th_values(y);
        L = 0;
        for (int64_t i = 0; i < cn_numel(y); i++) L += yv[i] * R[i];
        free(yv);
    }
    cn_release(y);
    cn_release(xt);
    return L;
}

static cn_tensor *pool_backward(int is_max, cn_tensor *g, cn_tensor *x, pool_case p) {
    int64_t ints[6];
    pool_ints(p, ints);
    return is_max ? cn__max_pool2d_backward(g, x, ints)
                  : cn__avg_pool2d_backward(g, cn_shape(x), ints);
}

/* Runs the backward entry with g and checks it against the reference loops. */
static void check_pool_backward(const char *what, int is_max, cn_tensor *x, cn_tensor *g,
                                pool_case p) {
    const int64_t *xs = cn_shape(x);
    double *xv = th_values(x), *gv = th_values(g), *want = th_alloc_doubles(numel4(xs));
    ref_pool_backward(is_max, xv, xs, gv, p, want);
    cn_tensor *gx = th_own(pool_backward(is_max, g, x, p));
    th_check_shape(what, gx, xs, 4);
    th_check_values(what, gx, want, numel4(xs), th_tol_of(cn_dtype_of(x)));
    free(xv);
    free(gv);
    free(want);
}

/* ---- pooling: tests ------------------------------------------------------------------------- */

static const pool_case pool_cases[] = {
    {3, 3, 2, 2, 0, 0}, /* overlapping windows */
    {3, 3, 2, 2, 1, 1}, /* overlapping, padded */
    {2, 3, 1, 2, 1, 1}, /* non-square, stride 1 rows */
    {2, 2, 2, 2, 0, 0}, /* disjoint windows, a row and a column left over */
    {3, 2, 3, 1, 1, 0},
};
#define N_POOL_CASES (sizeof pool_cases / sizeof *pool_cases)

/* With distinct inputs every max window has one maximum, so L is differentiable; moving an input
 * by h = 1/64 never changes a window's winner (neighbours are 1/8 apart). Avg is linear (h = 1);
 * its 1/9 is inexact, hence the tolerance. */
static void test_pool_gradients_match_finite_differences(void) {
    const int64_t xs[4] = {2, 3, 7, 6};
    for (int is_max = 0; is_max < 2; is_max++)
        for (size_t k = 0; k < N_POOL_CASES; k++) {
            pool_case p = pool_cases[k];
            int64_t os[4];
            pool_out_shape(xs, p, os);
            double *x = distinct_values(numel4(xs)), *R = rand_values(numel4(os));
            double *want = th_alloc_doubles(numel4(xs)), h = is_max ? 1.0 / 64 : 1.0;
            for (int64_t i = 0; i < numel4(xs); i++) {
                double keep = x[i];
                x[i] = keep + h;
                double up = pool_loss(is_max, x, xs, R, p);
                x[i] = keep - h;
                double down = pool_loss(is_max, x, xs, R, p);
                x[i] = keep;
                want[i] = (up - down) / (2 * h);
            }
            cn_tensor *xt = th_own(th_tensor(x, xs, 4, CN_F64));
            cn_tensor *gt = th_own(th_tensor(R, os, 4, CN_F64));
            char what[96];
            snprintf(what, sizeof what, "%s pool case %zu vs finite differences",
                     is_max ? "max" : "avg", k);
            th_check_values(what, th_own(pool_backward(is_max, gt, xt, p)), want, numel4(xs),
                            1e-10);
            free(x);
            free(R);
            free(want);
            th_release_owned();
        }
}

/* Many ties (33 levels): the first maximum of each window takes the gradient, in f32 and f64,
 * with strided x and g. */
static void test_pool_backward_against_reference_loops(void) {
    for (int i = 0; i < 2; i++) {
        cn_dtype dt = dtypes[i];
        for (int is_max = 0; is_max < 2; is_max++)
            for (size_t k = 0; k < N_POOL_CASES; k++) {
                pool_case p = pool_cases[k];
                cn_tensor *x = rand_tensor((int64_t[]){2, 3, 9, 8}, 4, dt);
                int64_t os[4];
                pool_out_shape(cn_shape(x), p, os);
                check_pool_backward("contiguous", is_max, x, rand_tensor(os, 4, dt), p);
                /* x channels-last, g channels-last */
                cn_tensor *x_nhwc = rand_tensor((int64_t[]){2, 9, 8, 3}, 4, dt);
                cn_tensor *x_perm = th_own(cn_permute(x_nhwc, (int[]){0, 3, 1, 2}));
                cn_tensor *g_nhwc = rand_tensor((int64_t[]){os[0], os[2], os[3], os[1]}, 4, dt);
                cn_tensor *g_perm = th_own(cn_permute(g_nhwc, (int[]){0, 3, 1, 2}));
                check_pool_backward("channels-last x and g", is_max, x_perm, g_perm, p);
                /* x every other column; g broadcast from one value */
                cn_tensor *x_wide = rand_tensor((int64_t[]){2, 3, 9, 16}, 4, dt);
                cn_tensor *x_cols = th_own(cn_slice(x_wide, 3, 1, 16, 2));
                cn_tensor *g_one = rand_tensor((int64_t[]){1, 1, 1, 1}, 4, dt);
                check_pool_backward("column-strided x, expanded g", is_max, x_cols,
                                    th_own(cn_expand(g_one, os, 4)), p);
            }
        th_release_owned();
    }
}

static void test_max_pool_backward_ties_nan_and_inf(void) {
    int64_t s22[4] = {1, 1, 2, 2}, ints[6] = {2, 2, 1, 1, 1, 1};
    /* all equal, kernel 2, stride 1, padding 1: window (oh, ow) starts at (oh-1, ow-1), and its
     * first in-image position is (max(oh-1, 0), max(ow-1, 0)) */
    cn_tensor *x = th_own(th_tensor((double[]){5, 5, 5, 5}, s22, 4, CN_F32));
    cn_tensor *g = th_own(cn_ones((int64_t[]){1, 1, 3, 3}, 4, CN_F32, cn_cpu()));
    th_check_values("ties go to the first position", th_own(cn__max_pool2d_backward(g, x, ints)),
                    (double[]){4, 2, 2, 1}, 4, 0);
    /* one window over [1, NaN; NaN, 2]: the first NaN wins, as the forward's NaN output says */
    int64_t one[6] = {2, 2, 2, 2, 0, 0};
    cn_tensor *g1 = th_own(th_tensor((double[]){3}, (int64_t[]){1, 1, 1, 1}, 4, CN_F64));
    cn_tensor *xn = th_own(th_tensor((double[]){1, NAN, NAN, 2}, s22, 4, CN_F64));
    th_check_values("NaN takes the gradient", th_own(cn__max_pool2d_backward(g1, xn, one)),
                    (double[]){0, 3, 0, 0}, 4, 0);
    cn_tensor *xn2 = th_own(th_tensor((double[]){5, 9, NAN, 7}, s22, 4, CN_F64));
    th_check_values("NaN after the maximum", th_own(cn__max_pool2d_backward(g1, xn2, one)),
                    (double[]){0, 0, 3, 0}, 4, 0);
    /* nothing beats -inf: the first position, as in PyTorch */
    cn_tensor *xi = th_own(th_tensor((double[]){-INFINITY, -INFINITY, -INFINITY, -INFINITY}, s22, 4,
                                  CN_F64));
    th_check_values("all -inf", th_own(cn__max_pool2d_backward(g1, xi, one)),
                    (double[]){3, 0, 0, 0}, 4, 0);
    /* a -inf before the maximum */
    cn_tensor *xm = th_own(th_tensor((double[]){-INFINITY, -1, 4, 4}, s22, 4, CN_F64));
    th_check_values("first of two maxima", th_own(cn__max_pool2d_backward(g1, xm, one)),
                    (double[]){0, 0, 3, 0}, 4, 0);
    th_release_owned();
}

static void test_avg_pool_backward_hand_computed(void) {
    /* 3x3 input, kernel 2, stride 1, padding 1 -> 4x4 windows of 4 (padded ones included):
     * each input pixel lies in exactly 4 windows, so g = 1 gives 4 * 1/4 everywhere */
    int64_t ints[6] = {2, 2, 1, 1, 1, 1};
    cn_tensor *g = th_own(cn_ones((int64_t[]){1, 1, 4, 4}, 4, CN_F64, cn_cpu()));
    double want[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    th_check_values("avg, padded windows count the padding",
                    th_own(cn__avg_pool2d_backward(g, (int64_t[]){1, 1, 3, 3}, ints)), want, 9, 0);
    th_release_owned();
}

static void test_pool_backward_rejects_inconsistent_arguments(void) {
    cn_tensor *x = rand_tensor((int64_t[]){1, 2, 6, 6}, 4, CN_F32);
    cn_tensor *g = rand_tensor((int64_t[]){1, 2, 3, 3}, 4, CN_F32);
    int64_t ok[6] = {2, 2, 2, 2, 0, 0}, bad_kernel[6] = {3, 3, 2, 2, 0, 0};
    int64_t zero_stride[6] = {2, 2, 0, 2, 0, 0};
    cn_tensor *r = th_own(cn__max_pool2d_backward(g, x, ok));
    CHECK(r != NULL);
    CHECK_FAILS(cn__max_pool2d_backward(g, x, bad_kernel), CN_ERR_SHAPE, "does not match");
    CHECK_FAILS(cn__avg_pool2d_backward(g, (int64_t[]){1, 3, 6, 6}, ok), CN_ERR_SHAPE,
                "does not match");
    CHECK_FAILS(cn__avg_pool2d_backward(g, cn_shape(x), zero_stride), CN_ERR_INVALID_ARG,
                "stride");
    th_release_owned();
}

int main(void) {
    RUN(test_conv2d_gradients_match_finite_differences);
    RUN(test_conv2d_backward_stride_padding_dilation);
    RUN(test_conv2d_backward_groups_and_depthwise);
    RUN(test_conv2d_backward_strided_operands);
    RUN(test_conv2d_backward_g_shared_over_batch);
    RUN(test_conv2d_backward_threaded_paths);
    RUN(test_conv2d_backward_empty_batch);
    RUN(test_conv2d_backward_rejects_inconsistent_arguments);
    RUN(test_conv2d_backward_allocation_failures);
    RUN(test_pool_gradients_match_finite_differences);
    RUN(test_pool_backward_against_reference_loops);
    RUN(test_max_pool_backward_ties_nan_and_inf);
    RUN(test_avg_pool_backward_hand_computed);
    RUN(test_pool_backward_rejects_inconsistent_arguments);
    return th_finish();
}
