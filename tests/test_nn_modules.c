/* Modules of nn.h against references written here in double: Linear and Conv2d against direct
 * loops, pooling and Flatten, activations against libm, Dropout's statistics and its identity in
 * evaluation, BatchNorm's batch statistics, running statistics (after several steps, updated by
 * hand here) and evaluation mode, LayerNorm, Embedding (values and gradient), Sequential's names
 * and composition, initialisers' ranges and moments, custom modules, ownership and errors. Every
 * test runs inside a scope, so the harness's leak check also covers the modules' parameters. */
#include "harness.h"

static const cn_device CPU = {CN_BACKEND_CPU, 0, 0, 0};

static cn_device ad(void) { return cn_autodiff(cn_cpu()); }

/* A normal random tensor on `dev` in f64 from a fixed seed. */
static cn_tensor *randn(uint64_t seed, const int64_t *shape, int ndim, cn_device dev) {
    cn_generator g = cn_generator_new(seed);
    return cn_rand_normal(&g, shape, ndim, 0.0, 1.0, CN_F64, dev);
}

/* Overwrites a parameter with given values (under no-grad: it may be tracked). */
static void set_values(cn_tensor *p, const double *v) {
    cn_tensor *src = th_tensor(v, cn_shape(p), cn_ndim(p), cn_dtype_of(p));
    cn_no_grad_begin();
    CHECK(cn_copy_(p, src) == CN_OK);
    cn_no_grad_end();
    cn_release(src);
}

static void check_param(cn_module *m, int i, const char *name, const int64_t *shape, int ndim) {
    int n = 0;
    const cn_param *ps = cn_module_params(m, &n);
    CHECK(ps != NULL && i < n);
    if (!ps || i >= n) return;
    if (strcmp(ps[i].name, name) != 0) {
        fprintf(stderr, "param %d is '%s', want '%s'\n", i, ps[i].name, name);
        th_checks_failed++;
    }
    th_check_shape(name, ps[i].tensor, shape, ndim);
}

/* ---- Linear ---------------------------------------------------------------------------------- */

static void test_linear_forward_matches_loops_and_default_init_bounds(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(1);
    enum { B = 5, IN = 7, OUT = 3 };
    cn_module *lin = cn_linear_new(IN, OUT, 1, ad(), CN_F64, &gen);
    CHECK(lin != NULL);
    const int64_t ws[2] = {OUT, IN}, bs[1] = {OUT}, xs[2] = {B, IN};
    check_param(lin, 0, "weight", ws, 2);
    check_param(lin, 1, "bias", bs, 1);
    cn_tensor *w = cn_module_find(lin, "weight"), *b = cn_module_find(lin, "bias");
    CHECK(cn_requires_grad(w) && cn_requires_grad(b));
    double *wv = th_values(w), *bv = th_values(b);
    /* PyTorch's default: U(-1/sqrt(in), 1/sqrt(in)) for both */
    double bound = 1.0 / sqrt((double)IN), wmax = 0;
    for (int i = 0; i < OUT * IN; i++)
        wmax = fmax(wmax, fabs(wv[i]));
    for (int i = 0; i < OUT; i++)
        CHECK(fabs(bv[i]) <= bound);
    CHECK(wmax <= bound && wmax > 0.5 * bound);
    cn_tensor *x = randn(11, xs, 2, CPU);
    double *xv = th_values(x);
    cn_tensor *y = cn_module_forward(lin, x);
    CHECK(cn_requires_grad(y));
    double want[B * OUT];
    for (int i = 0; i < B; i++)
        for (int o = 0; o < OUT; o++) {
            double s = bv[o];
            for (int k = 0; k < IN; k++)
                s += xv[i * IN + k] * wv[o * IN + k];
            want[i * OUT + o] = s;
        }
    const int64_t ys[2] = {B, OUT};
    th_check_shape("linear y", y, ys, 2);
    th_check_values("linear y", y, want, B * OUT, 1e-12);
    free(wv);
    free(bv);
    free(xv);
    cn_module_free(lin);
    cn_scope_end();
}

static void test_linear_is_seeded_and_bias_optional(void) {
    cn_scope_begin();
    cn_generator g1 = cn_generator_new(42), g2 = cn_generator_new(42), g3 = cn_generator_new(43);
    cn_module *a = cn_linear_new(4, 3, 0, ad(), CN_F32, &g1);
    cn_module *b = cn_linear_new(4, 3, 0, ad(), CN_F32, &g2);
    cn_module *c = cn_linear_new(4, 3, 0, ad(), CN_F32, &g3);
    int n = -1;
    cn_module_params(a, &n);
    CHECK(n == 1);
    CHECK(g1.offset == 12 && g2.offset == 12); /* the generator advanced by numel(weight) */
    double *va = th_values(cn_module_find(a, "weight")),
           *vb = th_values(cn_module_find(b, "weight")),
           *vc = th_values(cn_module_find(c, "weight"));
    CHECK(memcmp(va, vb, sizeof(double) * 12) == 0);
    CHECK(memcmp(va, vc, sizeof(double) * 12) != 0);
    CHECK(cn_dtype_of(cn_module_find(a, "weight")) == CN_F32);
    free(va);
    free(vb);
    free(vc);
    cn_module_free(a);
    cn_module_free(b);
    cn_module_free(c);
    cn_scope_end();
}

/* ---- Conv2d and pooling ---------------------------------------------------------------------- */

static void test_conv2d_forward_matches_loops(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(2);
    enum { N = 2, C = 4, H = 6, W = 5, O = 6, KH = 3, KW = 2, G = 2 };
    cn_conv2d_params p = {{2, 1}, {1, 1}, {1, 1}, G};
    cn_module *conv = cn_conv2d_new(C, O, KH, KW, &p, 1, ad(), CN_F64, &gen);
    CHECK(conv != NULL);
    const int64_t ws[4] = {O, C / G, KH, KW}, bs[1] = {O}, xs[4] = {N, C, H, W};
    check_param(conv, 0, "weight", ws, 4);
    check_param(conv, 1, "bias", bs, 1);
    double *w = th_values(cn_module_find(conv, "weight")),
           *b = th_values(cn_module_find(conv, "bias"));
    double bound = 1.0 / sqrt((double)(C / G * KH * KW));
    for (int i = 0; i < O * (C / G) * KH * KW; i++)
        CHECK(fabs(w[i]) <= bound);
    cn_tensor *x = randn(12, xs, 4, ad());
    double *xv = th_values(x);
    cn_tensor *y = cn_module_forward(conv, x);
    const int64_t OH = (H + 2 - KH) / 2 + 1, OW = (W + 2 - KW) / 1 + 1;
    const int64_t ys[4] = {N, O, OH, OW};
    th_check_shape("conv y", y, ys, 4);
    double *want = malloc(sizeof(double) * (size_t)(N * O * OH * OW));
    for (int n = 0; n < N; n++)
        for (int o = 0; o < O; o++)
            for (int oh = 0; oh < OH; oh++)
                for (int ow = 0; ow < OW; ow++) {
                    double s = b[o];
                    int g = o / (O / G);
                    for (int c = 0; c < C / G; c++)
                        for (int kh = 0; kh < KH; kh++)
                            for (int kw = 0; kw < KW; kw++) {
                                int ih = oh * 2 - 1 + kh, iw = ow - 1 + kw;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                                s += xv[((n * C + g * (C / G) + c) * H + ih) * W + iw] *
                                     w[((o * (C / G) + c) * KH + kh) * KW + kw];
                            }
                    want[((n * O + o) * OH + oh) * OW + ow] = s;
                }
    th_check_values("conv y", y, want, N * O * OH * OW, 1e-12);
    free(want);
    free(w);
    free(b);
    free(xv);
    cn_module_free(conv);
    CHECK(cn_conv2d_new(3, 4, 3, 3, &p, 1, ad(), CN_F32, &gen) == NULL); /* 3 % groups != 0 */
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_scope_end();
}

static void test_pooling_and_flatten_modules(void) {
    cn_scope_begin();
    const int64_t xs[4] = {2, 3, 4, 4};
    cn_tensor *x = randn(13, xs, 4, CPU);
    double *xv = th_values(x);
    cn_pool2d_params p = {{2, 2}, {2, 2}, {0, 0}};
    cn_module *mp = cn_max_pool2d_new(&p), *ap = cn_avg_pool2d_new(&p);
    cn_tensor *ym = cn_module_forward(mp, x), *ya = cn_module_forward(ap, x);
    double want_max[2 * 3 * 2 * 2], want_avg[2 * 3 * 2 * 2];
    for (int nc = 0; nc < 6; nc++)
        for (int oh = 0; oh < 2; oh++)
            for (int ow = 0; ow < 2; ow++) {
                double mx = -INFINITY, sum = 0;
                for (int kh = 0; kh < 2; kh++)
                    for (int kw = 0; kw < 2; kw++) {
                        double v = xv[nc * 16 + (oh * 2 + kh) * 4 + ow * 2 + kw];
                        mx = fmax(mx, v);
                        sum += v;
                    }
                want_max[nc * 4 + oh * 2 + ow] = mx;
                want_avg[nc * 4 + oh * 2 + ow] = sum / 4;
            }
    th_check_values("max pool", ym, want_max, 24, 0);
    th_check_values("avg pool", ya, want_avg, 24, 1e-15);
    CHECK(strcmp(cn_module_kind(mp), "MaxPool2d") == 0);
    int n = -1;
    CHECK(cn_module_params(mp, &n) != NULL && n == 0);

    cn_module *f1 = cn_flatten_new(1, -1), *f0 = cn_flatten_new(0, -1), *f12 = cn_flatten_new(1, 2);
    cn_tensor *y1 = cn_module_forward(f1, x), *y0 = cn_module_forward(f0, x),
              *y12 = cn_module_forward(f12, x);
    const int64_t s1[2] = {2, 48}, s0[1] = {96}, s12[3] = {2, 12, 4};
    th_check_shape("flatten(1, -1)", y1, s1, 2);
    th_check_shape("flatten(0, -1)", y0, s0, 1);
    th_check_shape("flatten(1, 2)", y12, s12, 3);
    th_check_values("flatten(1, -1)", y1, xv, 96, 0);
    th_check_values("flatten(1, 2)", y12, xv, 96, 0);
    /* a non-contiguous input flattens in row-major order of its shape */
    cn_tensor *xt = cn_transpose(x, 2, 3);
    double *xtv = th_values(xt);
    th_check_values("flatten(transposed)", cn_module_forward(f1, xt), xtv, 96, 0);
    cn_module *bad = cn_flatten_new(3, 1);
    CHECK_FAILS(cn_module_forward(bad, x), CN_ERR_INVALID_ARG, "start_dim");
    free(xv);
    free(xtv);
    cn_module_free(mp);
    cn_module_free(ap);
    cn_module_free(f1);
    cn_module_free(f0);
    cn_module_free(f12);
    cn_module_free(bad);
    cn_scope_end();
}

/* ---- activations ----------------------------------------------------------------------------- */

static double ref_activation(cn_activation a, double x) {
    switch (a) {
    case CN_ACT_RELU:
        return x > 0 ? x : 0;
    case CN_ACT_GELU:
        return 0.5 * x * (1 + erf(x / sqrt(2.0)));
    case CN_ACT_GELU_TANH:
        return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x)));
    case CN_ACT_TANH:
        return tanh(x);
    case CN_ACT_SIGMOID:
        return 1 / (1 + exp(-x));
    default:
        return x / (1 + exp(-x));
    }
}

static void test_activations_follow_their_formulas(void) {
    cn_scope_begin();
    const double xin[9] = {-4, -2.5, -1, -0.25, 0, 0.25, 1, 2.5, 4};
    const int64_t s[1] = {9};
    cn_tensor *x = th_tensor(xin, s, 1, CN_F64);
    static const char *const kinds[CN_ACT_COUNT] = {"ReLU", "GELU",    "GELU(tanh)",
                                                    "Tanh", "Sigmoid", "SiLU"};
    for (int a = 0; a < CN_ACT_COUNT; a++) {
        cn_module *m = cn_activation_new((cn_activation)a);
        double want[9];
        for (int i = 0; i < 9; i++)
            want[i] = ref_activation((cn_activation)a, xin[i]);
        th_check_values(kinds[a], cn_module_forward(m, x), want, 9, 1e-12);
        CHECK(strcmp(cn_module_kind(m), kinds[a]) == 0);
        cn_module_free(m);
    }
    CHECK(cn_activation_new(CN_ACT_COUNT) == NULL && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_scope_end();
}

/* ---- Dropout --------------------------------------------------------------------------------- */

static void test_dropout_statistics_in_training_and_identity_in_eval(void) {
    cn_scope_begin();
    enum { N = 200000 };
    const double p = 0.3;
    cn_generator gen = cn_generator_new(5);
    cn_module *drop = cn_dropout_new(p, &gen);
    const int64_t s[1] = {N};
    cn_tensor *x = cn_require_grad(cn_rand_uniform(&gen, s, 1, 1.0, 2.0, CN_F64, ad()));
    double *xv = th_values(x);
    cn_tensor *y = cn_module_forward(drop, x);
    double *yv = th_values(y);
    int64_t zeros = 0, scaled = 0;
    for (int i = 0; i < N; i++) {
        if (yv[i] == 0)
            zeros++;
        else if (fabs(yv[i] - xv[i] / (1 - p)) <= 1e-12 * yv[i])
            scaled++;
    }
    /* the zeroed fraction is Binomial(N, p) / N: std sqrt(p (1 - p) / N) ~ 0.001 */
    double frac = (double)zeros / N;
    printf("     dropout p = %.2f: %.4f of %d elements zeroed\n", p, frac, N);
    CHECK(fabs(frac - p) < 0.006);
    CHECK(zeros + scaled == N); /* every survivor is x / (1 - p) */
    /* the gradient of sum(y) is the mask / (1 - p) */
    cn_grads *g = cn_backward(cn_sum(y));
    double *gv = th_values(cn_grad(g, x));
    int grad_ok = 1;
    for (int i = 0; i < N; i++)
        grad_ok &= fabs(gv[i] - (yv[i] == 0 ? 0.0 : 1 / (1 - p))) < 1e-12;
    CHECK(grad_ok);
    cn_grads_free(g);
    /* a second forward draws a new mask, and so does a second dropout from the same generator,
     * while one from the same seed repeats the first mask */
    double *y2 = th_values(cn_module_forward(drop, x));
    CHECK(memcmp(y2, yv, sizeof(double) * N) != 0);
    cn_generator again = cn_generator_new(5);
    cn_module *twin = cn_dropout_new(p, &again), *next = cn_dropout_new(p, &again);
    double *yt = th_values(cn_module_forward(twin, x)), *yn = th_values(cn_module_forward(next, x));
    CHECK(memcmp(yt, yv, sizeof(double) * N) == 0);
    int64_t agree = 0;
    for (int i = 0; i < N; i++)
        agree += (yn[i] == 0) == (yv[i] == 0);
    CHECK(fabs((double)agree / N - (p * p + (1 - p) * (1 - p))) < 0.006); /* independent masks */
    free(yt);
    free(yn);
    cn_module_free(twin);
    cn_module_free(next);
    /* evaluation: the identity, exactly */
    cn_module_train(drop, 0);
    CHECK(!cn_module_is_training(drop));
    cn_tensor *ye = cn_module_forward(drop, x);
    CHECK(ye != x);
    th_check_values("dropout eval", ye, xv, N, 0);
    cn_module *all = cn_dropout_new(1.0, &gen);
    double zero[4] = {0, 0, 0, 0};
    const int64_t s4[1] = {4};
    th_check_values("dropout p = 1", cn_module_forward(all, cn_ones(s4, 1, CN_F32, CPU)), zero, 4,
                    0);
    CHECK(cn_dropout_new(1.5, &gen) == NULL && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    free(xv);
    free(yv);
    free(gv);
    free(y2);
    cn_module_free(drop);
    cn_module_free(all);
    cn_scope_end();
}

/* ---- BatchNorm ------------------------------------------------------------------------------- */

enum { BN_N = 4, BN_C = 3, BN_H = 2, BN_W = 5, BN_HW = BN_H * BN_W };

/* Per-channel mean and biased variance of x [N, C, H, W] (two passes in double). */
static void channel_stats(const double *x, double *mean, double *var) {
    const int n = BN_N * BN_HW;
    for (int c = 0; c < BN_C; c++) {
        double s = 0, q = 0;
        for (int i = 0; i < BN_N; i++)
            for (int k = 0; k < BN_HW; k++)
                s += x[(i * BN_C + c) * BN_HW + k];
        mean[c] = s / n;
        for (int i = 0; i < BN_N; i++)
            for (int k = 0; k < BN_HW; k++) {
                double d = x[(i * BN_C + c) * BN_HW + k] - mean[c];
                q += d * d;
            }
        var[c] = q / n;
    }
}

static void bn_reference(const double *x, const double *mean, const double *var, const double *w,
                         const double *b, double eps, double *y) {
    for (int i = 0; i < BN_N; i++)
        for (int c = 0; c < BN_C; c++)
            for (int k = 0; k < BN_HW; k++) {
                int at = (i * BN_C + c) * BN_HW + k;
                y[at] = (x[at] - mean[c]) / sqrt(var[c] + eps) * w[c] + b[c];
            }
}

static void test_batchnorm2d_train_running_stats_and_eval(void) {
    cn_scope_begin();
    const double eps = 1e-5, mom = 0.1;
    cn_module *bn = cn_batchnorm2d_new(BN_C, eps, mom, 1, ad(), CN_F64);
    CHECK(bn != NULL);
    int np = 0, nb = 0;
    const cn_param *ps = cn_module_params(bn, &np);
    const cn_param *bs = cn_module_buffers(bn, &nb);
    CHECK(np == 2 && nb == 3);
    CHECK(np == 2 && !strcmp(ps[0].name, "weight") && !strcmp(ps[1].name, "bias"));
    CHECK(nb == 3 && !strcmp(bs[0].name, "running_mean") && !strcmp(bs[1].name, "running_var") &&
          !strcmp(bs[2].name, "num_batches_tracked"));
    const double w[BN_C] = {1.5, -0.5, 2.0}, b[BN_C] = {0.1, 0.2, -0.3};
    set_values(cn_module_find(bn, "weight"), w);
    set_values(cn_module_find(bn, "bias"), b);
    /* three training steps on different batches; the running statistics by hand */
    double rm[BN_C] = {0, 0, 0}, rv[BN_C] = {1, 1, 1};
    const int64_t xs[4] = {BN_N, BN_C, BN_H, BN_W};
    const int n = BN_N * BN_HW;
    for (int step = 0; step < 3; step++) {
        cn_tensor *x = cn_mul_scalar(randn(100 + step, xs, 4, ad()), 1.0 + step);
        x = cn_add_scalar(x, 0.5 * step);
        double *xv = th_values(x), mean[BN_C], var[BN_C], want[BN_N * BN_C * BN_HW];
        channel_stats(xv, mean, var);
        bn_reference(xv, mean, var, w, b, eps, want);
        cn_tensor *y = cn_module_forward(bn, x);
        th_check_values("batchnorm train", y, want, BN_N * BN_C * BN_HW, 1e-10);
        for (int c = 0; c < BN_C; c++) {
            rm[c] = (1 - mom) * rm[c] + mom * mean[c];
            rv[c] = (1 - mom) * rv[c] + mom * var[c] * n / (n - 1);
        }
        free(xv);
    }
    th_check_values("running_mean", cn_module_find(bn, "running_mean"), rm, BN_C, 1e-12);
    th_check_values("running_var", cn_module_find(bn, "running_var"), rv, BN_C, 1e-12);
    const double three = 3;
    th_check_values("num_batches_tracked", cn_module_find(bn, "num_batches_tracked"), &three, 1, 0);
    CHECK(cn_dtype_of(cn_module_find(bn, "num_batches_tracked")) == CN_I64);
    CHECK(!cn_requires_grad(cn_module_find(bn, "running_mean")));
    /* evaluation: the running statistics normalise, and stay as they are */
    cn_module_train(bn, 0);
    cn_tensor *x = randn(200, xs, 4, ad());
    double *xv = th_values(x), want[BN_N * BN_C * BN_HW];
    bn_reference(xv, rm, rv, w, b, eps, want);
    th_check_values("batchnorm eval", cn_module_forward(bn, x), want, BN_N * BN_C * BN_HW, 1e-10);
    th_check_values("running_mean after eval", cn_module_find(bn, "running_mean"), rm, BN_C, 1e-12);
    free(xv);
    /* wrong channel count, and a single value per channel in training */
    const int64_t bad[4] = {2, 4, 2, 2}, one[4] = {1, BN_C, 1, 1};
    CHECK_FAILS(cn_module_forward(bn, cn_zeros(bad, 4, CN_F64, ad())), CN_ERR_SHAPE, "3 channels");
    cn_module_train(bn, 1);
    CHECK_FAILS(cn_module_forward(bn, cn_zeros(one, 4, CN_F64, ad())), CN_ERR_SHAPE, "variance");
    cn_module_free(bn);
    cn_scope_end();
}

/* The batch-statistics gradient, against central finite differences of the forward itself. */
static void test_batchnorm_gradient_matches_finite_differences(void) {
    cn_scope_begin();
    cn_module *bn = cn_batchnorm1d_new(3, 1e-5, 0.1, 1, ad(), CN_F64);
    const double w[3] = {1.5, -0.5, 2.0}, b[3] = {0.1, 0.2, -0.3};
    set_values(cn_module_find(bn, "weight"), w);
    set_values(cn_module_find(bn, "bias"), b);
    const int64_t xs[3] = {4, 3, 2};
    double *x0 = th_values(randn(7, xs, 3, CPU)), *c = th_values(randn(8, xs, 3, CPU));
    cn_tensor *cw = th_tensor(c, xs, 3, CN_F64);
    /* f(x) = sum(bn(x) * c) */
    cn_tensor *x = cn_require_grad(cn_to_device(th_tensor(x0, xs, 3, CN_F64), ad()));
    cn_grads *g = cn_backward(cn_sum(cn_mul(cn_module_forward(bn, x), cw)));
    double *gx = th_values(cn_grad(g, x)),
           *gw = th_values(cn_grad(g, cn_module_find(bn, "weight")));
    cn_grads_free(g);
    const double h = 1e-6;
    for (int i = 0; i < 24; i++) {
        double f[2];
        for (int sgn = 0; sgn < 2; sgn++) {
            double xp[24];
            memcpy(xp, x0, sizeof xp);
            xp[i] += sgn ? -h : h;
            cn_scope_begin();
            f[sgn] = NAN;
            th_read(cn_sum(cn_mul(cn_module_forward(bn, th_tensor(xp, xs, 3, CN_F64)), cw)),
                    &f[sgn]);
            cn_scope_end();
        }
        CHECK_NEAR(gx[i], (f[0] - f[1]) / (2 * h), 1e-6);
    }
    /* d/dweight_c = sum over channel c of xhat * c */
    for (int ch = 0; ch < 3; ch++) {
        double mean = 0, var = 0, want = 0;
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 2; l++)
                mean += x0[(i * 3 + ch) * 2 + l] / 8;
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 2; l++)
                var += pow(x0[(i * 3 + ch) * 2 + l] - mean, 2) / 8;
        for (int i = 0; i < 4; i++)
            for (int l = 0; l < 2; l++) {
                int at = (i * 3 + ch) * 2 + l;
                want += (x0[at] - mean) / sqrt(var + 1e-5) * c[at];
            }
        CHECK_NEAR(gw[ch], want, 1e-10);
    }
    free(x0);
    free(c);
    free(gx);
    free(gw);
    cn_module_free(bn);
    cn_scope_end();
}

static void test_batchnorm1d_on_2d_input_without_affine(void) {
    cn_scope_begin();
    cn_module *bn = cn_batchnorm1d_new(2, 1e-5, 0.5, 0, CPU, CN_F64);
    int np = -1, nb = -1;
    cn_module_params(bn, &np);
    cn_module_buffers(bn, &nb);
    CHECK(np == 0 && nb == 3);
    const double xv[8] = {1, 10, 2, 20, 3, 30, 6, 40}; /* [4, 2] */
    const int64_t xs[2] = {4, 2};
    cn_tensor *y = cn_module_forward(bn, th_tensor(xv, xs, 2, CN_F64));
    /* channel 0: 1 2 3 6, mean 3, var (4+1+0+9)/4 = 3.5; channel 1: mean 25, var 125 */
    double want[8];
    for (int i = 0; i < 4; i++) {
        want[i * 2] = (xv[i * 2] - 3) / sqrt(3.5 + 1e-5);
        want[i * 2 + 1] = (xv[i * 2 + 1] - 25) / sqrt(125 + 1e-5);
    }
    th_check_values("batchnorm1d", y, want, 8, 1e-12);
    /* momentum 0.5: running_mean = 0.5 * mean, running_var = 0.5 + 0.5 * unbiased var */
    const double rm[2] = {1.5, 12.5}, rv[2] = {0.5 + 0.5 * 14.0 / 3, 0.5 + 0.5 * 500.0 / 3};
    th_check_values("running_mean", cn_module_find(bn, "running_mean"), rm, 2, 1e-12);
    th_check_values("running_var", cn_module_find(bn, "running_var"), rv, 2, 1e-12);
    const int64_t bad[4] = {2, 2, 1, 1};
    CHECK_FAILS(cn_module_forward(bn, cn_zeros(bad, 4, CN_F64, CPU)), CN_ERR_SHAPE, "[N, C]");
    cn_module_free(bn);
    cn_scope_end();
}

/* ---- LayerNorm ------------------------------------------------------------------------------- */

static void test_layernorm_normalises_trailing_dims(void) {
    cn_scope_begin();
    const int64_t xs[3] = {2, 3, 4}, norm2[2] = {3, 4}, norm1[1] = {4};
    cn_tensor *x = randn(21, xs, 3, ad());
    double *xv = th_values(x);
    for (int k = 1; k <= 2; k++) {
        cn_module *ln = cn_layernorm_new(k == 2 ? norm2 : norm1, k, 1e-5, 1, ad(), CN_F64);
        int group = k == 2 ? 12 : 4;
        double w[12], b[12];
        for (int i = 0; i < group; i++) {
            w[i] = 0.5 + 0.1 * i;
            b[i] = -0.2 + 0.05 * i;
        }
        set_values(cn_module_find(ln, "weight"), w);
        set_values(cn_module_find(ln, "bias"), b);
        double want[24];
        for (int s = 0; s < 24 / group; s++) {
            double mean = 0, var = 0;
            for (int i = 0; i < group; i++)
                mean += xv[s * group + i] / group;
            for (int i = 0; i < group; i++)
                var += pow(xv[s * group + i] - mean, 2) / group;
            for (int i = 0; i < group; i++)
                want[s * group + i] = (xv[s * group + i] - mean) / sqrt(var + 1e-5) * w[i] + b[i];
        }
        cn_tensor *y = cn_module_forward(ln, x);
        th_check_shape("layernorm", y, xs, 3);
        th_check_values(k == 2 ? "layernorm [3, 4]" : "layernorm [4]", y, want, 24, 1e-12);
        CHECK(cn_requires_grad(y));
        cn_module_free(ln);
    }
    cn_module *ln = cn_layernorm_new(norm2, 2, 1e-5, 0, ad(), CN_F64);
    int np = -1;
    cn_module_params(ln, &np);
    CHECK(np == 0);
    const int64_t wrong[2] = {3, 5};
    CHECK_FAILS(cn_module_forward(ln, cn_zeros(wrong, 2, CN_F64, ad())), CN_ERR_SHAPE,
                "trailing dims");
    cn_module_free(ln);
    free(xv);
    cn_scope_end();
}

/* ---- Embedding ------------------------------------------------------------------------------- */

static void test_embedding_looks_up_rows_and_accumulates_gradients(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(9);
    enum { V = 5, D = 3 };
    cn_module *emb = cn_embedding_new(V, D, ad(), CN_F64, &gen);
    cn_tensor *w = cn_module_find(emb, "weight");
    double *wv = th_values(w);
    const int64_t idx[6] = {4, 0, 2, 2, 4, 4}, is[2] = {2, 3};
    cn_tensor *index = cn_from_data(idx, is, 2, CN_I64, CPU);
    cn_tensor *y = cn_module_forward(emb, index);
    const int64_t ys[3] = {2, 3, D};
    th_check_shape("embedding", y, ys, 3);
    double want[6 * D];
    for (int i = 0; i < 6; i++)
        for (int d = 0; d < D; d++)
            want[i * D + d] = wv[idx[i] * D + d];
    th_check_values("embedding", y, want, 6 * D, 0);
    /* i32 indices work too */
    th_check_values("embedding i32", cn_module_forward(emb, cn_cast(index, CN_I32)), want, 6 * D,
                    0);
    /* d sum(y * k) / d weight[r] = sum over lookups of r of k */
    double kv[6 * D], gwant[V * D] = {0};
    for (int i = 0; i < 6 * D; i++)
        kv[i] = 0.25 * (i + 1);
    for (int i = 0; i < 6; i++)
        for (int d = 0; d < D; d++)
            gwant[idx[i] * D + d] += kv[i * D + d];
    cn_grads *g = cn_backward(cn_sum(cn_mul(y, th_tensor(kv, ys, 3, CN_F64))));
    th_check_values("embedding grad", cn_grad(g, w), gwant, V * D, 1e-15);
    cn_grads_free(g);
    const int64_t oob = 5, one = 1;
    CHECK_FAILS(cn_module_forward(emb, cn_from_data(&oob, &one, 1, CN_I64, CPU)), CN_ERR_INDEX, "");
    const int64_t fs[1] = {2};
    CHECK_FAILS(cn_module_forward(emb, cn_zeros(fs, 1, CN_F32, CPU)), CN_ERR_KIND, "integer");
    /* N(0, 1) initialisation, as PyTorch's */
    cn_module *big = cn_embedding_new(1000, 100, CPU, CN_F32, &gen);
    double *bv = th_values(cn_module_find(big, "weight")), mean = 0, sq = 0;
    for (int i = 0; i < 100000; i++)
        mean += bv[i] / 100000;
    for (int i = 0; i < 100000; i++)
        sq += (bv[i] - mean) * (bv[i] - mean) / 100000;
    CHECK(fabs(mean) < 0.02 && fabs(sqrt(sq) - 1) < 0.02);
    free(bv);
    free(wv);
    cn_module_free(big);
    cn_module_free(emb);
    cn_scope_end();
}

/* ---- Sequential and custom modules ----------------------------------------------------------- */

static void test_sequential_names_params_like_state_dict_and_composes(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(3);
    cn_module *inner = cn_sequential_new(
        (cn_module *[]){cn_linear_new(4, 4, 1, ad(), CN_F64, &gen), cn_activation_new(CN_ACT_TANH)},
        2);
    cn_module *net = cn_sequential_new(
        (cn_module *[]){cn_linear_new(3, 4, 1, ad(), CN_F64, &gen), cn_activation_new(CN_ACT_RELU),
                        inner, cn_batchnorm1d_new(4, 1e-5, 0.1, 1, ad(), CN_F64),
                        cn_linear_new(4, 2, 0, ad(), CN_F64, &gen)},
        5);
    CHECK(net != NULL);
    int n = 0, nb = 0;
    const cn_param *ps = cn_module_params(net, &n);
    static const char *const want[] = {"0.weight", "0.bias", "2.0.weight", "2.0.bias",
                                       "3.weight", "3.bias", "4.weight"};
    CHECK(n == 7);
    for (int i = 0; i < n && i < 7; i++)
        if (strcmp(ps[i].name, want[i]) != 0) {
            fprintf(stderr, "param %d is '%s', want '%s'\n", i, ps[i].name, want[i]);
            th_checks_failed++;
        }
    const cn_param *bs = cn_module_buffers(net, &nb);
    CHECK(nb == 3 && !strcmp(bs[0].name, "3.running_mean"));
    CHECK(cn_module_find(net, "2.0.weight") == cn_module_find(inner, "0.weight"));
    CHECK(cn_module_find(net, "2.1.weight") == NULL && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    CHECK(cn_module_child_count(net) == 5 && cn_module_child(net, 2) == inner);
    /* training mode reaches every descendant */
    cn_module_train(net, 0);
    CHECK(!cn_module_is_training(cn_module_child(net, 3)) && !cn_module_is_training(inner));
    /* the composition, step by step */
    const int64_t xs[2] = {6, 3};
    cn_tensor *x = randn(31, xs, 2, ad());
    cn_tensor *y = cn_module_forward(net, x);
    cn_tensor *h = x;
    for (int i = 0; i < 5; i++)
        h = cn_module_forward(cn_module_child(net, i), h);
    double *hv = th_values(h);
    th_check_values("sequential", y, hv, 12, 0);
    CHECK(cn_requires_grad(y));
    free(hv);
    /* gradients reach every parameter */
    cn_module_train(net, 1);
    cn_grads *g = cn_backward(cn_sum(cn_module_forward(net, x)));
    for (int i = 0; i < n; i++)
        CHECK(cn_grad(g, ps[i].tensor) != NULL);
    cn_grads_free(g);
    /* an empty container is the identity */
    cn_module *id = cn_sequential_new(NULL, 0);
    cn_tensor *yi = cn_module_forward(id, x);
    CHECK(yi != NULL && yi != x);
    double *xv = th_values(x);
    th_check_values("empty sequential", yi, xv, 18, 0);
    free(xv);
    cn_module_free(id);
    cn_module_free(net);
    cn_scope_end();
}

static void test_sequential_takes_ownership_when_a_constructor_failed(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(3);
    int64_t live = cn_live_tensors();
    cn_clear_error();
    cn_module *net = cn_sequential_new((cn_module *[]){cn_linear_new(3, 4, 1, ad(), CN_F32, &gen),
                                                       cn_linear_new(0, 4, 1, ad(), CN_F32, &gen),
                                                       cn_activation_new(CN_ACT_RELU)},
                                       3);
    CHECK(net == NULL);
    /* the error is the failed constructor's, and the other modules were freed */
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "in_features"));
    CHECK(cn_live_tensors() == live);
    cn_clear_error();
    cn_scope_end();
}

/* A module defined outside the library: y = x * scale + shift, with one parameter. */
typedef struct affine_state {
    double shift;
} affine_state;

static cn_tensor *affine_forward(cn_module *m, cn_tensor *x) {
    affine_state *s = cn_module_state(m);
    return cn_add_scalar(cn_mul(x, cn_module_find(m, "scale")), s->shift);
}

static void affine_free(void *state) { free(state); }

static const cn_module_vtable affine_vtable = {"Affine", affine_forward, NULL, affine_free};

static void test_custom_module_through_the_vtable(void) {
    cn_scope_begin();
    affine_state *s = malloc(sizeof *s);
    s->shift = 1.0;
    cn_module *m = cn_module_new(&affine_vtable, s);
    const int64_t shape[1] = {3};
    /* scope-owned when registered: the module takes it over, so it outlives the scope */
    cn_scope_begin();
    CHECK(cn_module_add_param(m, "scale", cn_require_grad(cn_full(shape, 1, 2.0, CN_F64, ad()))) ==
          CN_OK);
    cn_scope_end();
    CHECK(cn_module_add_param(m, "scale", cn_require_grad(cn_zeros(shape, 1, CN_F64, ad()))) ==
          CN_ERR_INVALID_ARG);
    CHECK(cn_module_add_param(m, "a.b", cn_require_grad(cn_zeros(shape, 1, CN_F64, ad()))) ==
          CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_module *net = cn_sequential_new((cn_module *[]){cn_activation_new(CN_ACT_RELU), m}, 2);
    int n = 0;
    const cn_param *ps = cn_module_params(net, &n);
    CHECK(n == 1 && !strcmp(ps[0].name, "1.scale"));
    const double xin[3] = {-1, 0.5, 2}, want[3] = {1, 2, 5};
    th_check_values("custom", cn_module_forward(net, th_tensor(xin, shape, 1, CN_F64)), want, 3, 0);
    CHECK(!strcmp(cn_module_kind(m), "Affine"));
    cn_module_free(net);
    cn_scope_end();
}

/* A parameter on an autodiff device must require grad (else it would never train: an error
 * that names the way out, the tensor released); a buffer need not, and a parameter on a concrete
 * device (an inference model) is accepted. Children are found by name and by dotted path. */
static void test_params_must_train_and_children_by_name(void) {
    const int64_t shape[1] = {3};
    int64_t live0 = cn_live_tensors();
    cn_module *m = cn_module_new(&affine_vtable, calloc(1, sizeof(affine_state)));
    cn_clear_error();
    CHECK(cn_module_add_param(m, "frozen", cn_zeros(shape, 1, CN_F64, ad())) ==
          CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "module_add_param") && strstr(cn_last_error(), "'frozen'") &&
          strstr(cn_last_error(), "cn_module_add_buffer"));
    cn_clear_error();
    CHECK(cn_module_add_buffer(m, "frozen", cn_zeros(shape, 1, CN_F64, ad())) == CN_OK);
    CHECK(cn_module_add_param(m, "w", cn_zeros(shape, 1, CN_F64, cn_cpu())) == CN_OK);
    int n = -1;
    cn_module_params(m, &n);
    CHECK(n == 1);
    cn_module *inner = cn_sequential_new((cn_module *[]){cn_activation_new(CN_ACT_RELU), m}, 2);
    cn_module *net =
        cn_sequential_new((cn_module *[]){cn_activation_new(CN_ACT_TANH), inner}, 2);
    CHECK(cn_module_child_named(net, "1") == inner);
    CHECK(cn_module_child_named(net, "1.1") == m);
    CHECK(cn_module_child_named(net, "0") == cn_module_child(net, 0));
    cn_clear_error();
    CHECK(cn_module_child_named(net, "1.2") == NULL);
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "'1.2'") &&
          strstr(cn_last_error(), "'0', '1'"));
    CHECK(cn_module_child_named(net, "1.1.x") == NULL);
    CHECK(strstr(cn_last_error(), "none"));
    CHECK(cn_module_child_named(net, "") == NULL);
    cn_clear_error();
    CHECK(cn_module_child_named(NULL, "0") == NULL && cn_last_status() == CN_ERR_NULL_ARG);
    cn_clear_error();
    cn_module_free(net);
    CHECK(cn_live_tensors() == live0);
}

/* Modules made inside a scope keep their parameters past its end; forward results belong to the
 * caller's scope like any op's, and intermediates are gone when forward returns. */
static void test_module_lifetimes_and_scopes(void) {
    cn_generator gen = cn_generator_new(4);
    int64_t live0 = cn_live_tensors();
    cn_scope_begin();
    cn_module *net = cn_sequential_new((cn_module *[]){cn_linear_new(8, 16, 1, ad(), CN_F32, &gen),
                                                       cn_activation_new(CN_ACT_GELU),
                                                       cn_linear_new(16, 4, 1, ad(), CN_F32, &gen)},
                                       3);
    cn_scope_end();
    int64_t with_params = cn_live_tensors();
    CHECK(with_params > live0);
    int n = 0;
    const cn_param *ps = cn_module_params(net, &n);
    CHECK(n == 4);
    for (int i = 0; i < n; i++)
        CHECK(cn_requires_grad(ps[i].tensor) && cn_numel(ps[i].tensor) > 0);
    const int64_t xs[2] = {2, 8};
    cn_tensor *x = cn_ones(xs, 2, CN_F32, ad());
    cn_no_grad_begin();                       /* no graph: nothing but y outlives the call */
    cn_tensor *y = cn_module_forward(net, x); /* no scope open: the caller owns y */
    cn_no_grad_end();
    CHECK(y != NULL && !cn_requires_grad(y));
    CHECK(cn_live_tensors() == with_params + 2); /* x and y: every intermediate is gone */
    cn_release(y);
    y = cn_module_forward(net, x); /* with a graph, y's graph keeps what backward needs */
    cn_grads *g = cn_backward(y);
    CHECK(g != NULL);
    cn_grads_free(g);
    cn_release(y);
    CHECK(cn_live_tensors() == with_params + 1);
    cn_release(x);
    cn_module_free(net);
    CHECK(cn_live_tensors() == live0);
    CHECK(cn_module_forward(NULL, NULL) == NULL && cn_last_status() == CN_ERR_NULL_ARG);
    cn_clear_error();
}

/* SQLite-style: make each allocation of building a network and running it fail in turn. Every
 * failure is reported as such and leaves nothing behind (LeakSanitizer checks host memory). */
static void test_construction_and_forward_fail_cleanly_at_every_allocation(void) {
    const int64_t xs[2] = {5, 3};
    cn_tensor *x = randn(1, xs, 2, ad());
    int failures = 0, done = 0;
    for (int64_t k = 1; k < 5000 && !done; k++) {
        int64_t live = cn_live_tensors();
        cn_scope_begin();
        cn_generator gen = cn_generator_new(1);
        cn_alloc_fail_after(k);
        cn_module *net = cn_sequential_new(
            (cn_module *[]){cn_linear_new(3, 4, 1, ad(), CN_F64, &gen),
                            cn_batchnorm1d_new(4, 1e-5, 0.1, 1, ad(), CN_F64),
                            cn_activation_new(CN_ACT_RELU), cn_dropout_new(0.5, &gen),
                            cn_linear_new(4, 2, 1, ad(), CN_F64, &gen)},
            5);
        cn_tensor *y = net ? cn_module_forward(net, x) : NULL;
        cn_alloc_fail_after(0);
        if (y) {
            done = 1;
        } else {
            failures++;
            CHECK(cn_last_status() == CN_ERR_OUT_OF_MEMORY);
        }
        cn_clear_error();
        cn_module_free(net);
        cn_scope_end();
        CHECK(cn_live_tensors() == live);
    }
    printf("     building and running a 5-module network failed cleanly at each of its %d "
           "allocations\n",
           failures);
    CHECK(done && failures > 20);
    cn_release(x);
}

/* ---- initialisers ---------------------------------------------------------------------------- */

static void moments(cn_tensor *t, double *mean, double *std, double *maxabs) {
    double *v = th_values(t);
    int64_t n = cn_numel(t);
    double s = 0, q = 0, m = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    s /= (double)n;
    for (int64_t i = 0; i < n; i++) {
        q += (v[i] - s) * (v[i] - s);
        m = fmax(m, fabs(v[i]));
    }
    *mean = s;
    *std = sqrt(q / (double)n);
    *maxabs = m;
    free(v);
}

static void test_initialisers_ranges_and_moments(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(77);
    const int64_t shape[4] = {64, 32, 3, 3}; /* fan_in 288, fan_out 576 */
    cn_tensor *w = cn_require_grad(cn_zeros(shape, 4, CN_F32, ad()));
    int64_t fi = 0, fo = 0;
    CHECK(cn_init_fans(w, &fi, &fo) == CN_OK && fi == 288 && fo == 576);
    double mean, std, mx;
    /* Kaiming uniform, a = 0 (ReLU): bound sqrt(6 / fan_in), std bound / sqrt(3) */
    CHECK(cn_init_kaiming_uniform_(w, 0.0, CN_FAN_IN, &gen) == CN_OK);
    moments(w, &mean, &std, &mx);
    double bound = sqrt(6.0 / 288);
    CHECK(mx <= bound * (1 + 1e-6) && mx > 0.99 * bound);
    CHECK_NEAR(std, bound / sqrt(3.0), 0.01 * bound);
    CHECK(fabs(mean) < 0.01 * bound);
    /* Kaiming normal, fan_out, a = 1: gain 1, std 1 / sqrt(576) */
    CHECK(cn_init_kaiming_normal_(w, 1.0, CN_FAN_OUT, &gen) == CN_OK);
    moments(w, &mean, &std, &mx);
    CHECK_NEAR(std, 1.0 / 24, 0.01 / 24);
    /* Xavier uniform with gain 2: bound 2 sqrt(6 / (288 + 576)) */
    CHECK(cn_init_xavier_uniform_(w, 2.0, &gen) == CN_OK);
    moments(w, &mean, &std, &mx);
    bound = 2 * sqrt(6.0 / 864);
    CHECK(mx <= bound * (1 + 1e-6) && mx > 0.99 * bound);
    /* Xavier normal: std sqrt(2 / 864) */
    CHECK(cn_init_xavier_normal_(w, 1.0, &gen) == CN_OK);
    moments(w, &mean, &std, &mx);
    CHECK_NEAR(std, sqrt(2.0 / 864), 0.01 * sqrt(2.0 / 864));
    CHECK(cn_requires_grad(w)); /* still the same leaf */
    CHECK(cn_init_constant_(w, 0.25) == CN_OK);
    moments(w, &mean, &std, &mx);
    CHECK(mean == 0.25 && std == 0);
    /* seeded: the same seed gives the same numbers */
    cn_generator a = cn_generator_new(5), b = cn_generator_new(5);
    cn_tensor *u = cn_zeros(shape, 2, CN_F64, CPU), *v = cn_zeros(shape, 2, CN_F64, CPU);
    cn_init_xavier_uniform_(u, 1.0, &a);
    cn_init_xavier_uniform_(v, 1.0, &b);
    double *uv = th_values(u);
    th_check_values("xavier seeded", v, uv, 64 * 32, 0);
    free(uv);
    CHECK_NEAR(cn_init_gain(CN_ACT_RELU), sqrt(2.0), 1e-15);
    CHECK_NEAR(cn_init_gain(CN_ACT_TANH), 5.0 / 3, 1e-15);
    CHECK(isnan(cn_init_gain(CN_ACT_GELU)) && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    CHECK(cn_init_kaiming_uniform_(cn_zeros(shape, 1, CN_F32, CPU), 0, CN_FAN_IN, &gen) ==
          CN_ERR_SHAPE);
    CHECK(cn_init_normal_(cn_zeros(shape, 1, CN_I64, CPU), 0, 1, &gen) == CN_ERR_KIND);
    cn_clear_error();
    cn_scope_end();
}

static void test_constructor_errors(void) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(1);
    CHECK(cn_linear_new(4, 0, 1, ad(), CN_F32, &gen) == NULL &&
          cn_last_status() == CN_ERR_INVALID_ARG);
    CHECK(cn_linear_new(4, 2, 1, ad(), CN_I32, &gen) == NULL && cn_last_status() == CN_ERR_DTYPE);
    cn_clear_error();
    CHECK(cn_linear_new(4, 2, 1, ad(), CN_F32, NULL) == NULL &&
          cn_last_status() == CN_ERR_NULL_ARG);
    cn_clear_error();
    CHECK(cn_batchnorm2d_new(3, 0.0, 0.1, 1, ad(), CN_F32) == NULL &&
          cn_last_status() == CN_ERR_INVALID_ARG);
    CHECK(cn_layernorm_new(NULL, 1, 1e-5, 1, ad(), CN_F32) == NULL);
    cn_clear_error();
    /* a forward error names the op and leaves nothing behind */
    cn_module *lin = cn_linear_new(4, 2, 1, ad(), CN_F32, &gen);
    const int64_t xs[2] = {3, 5};
    CHECK_FAILS(cn_module_forward(lin, cn_zeros(xs, 2, CN_F32, ad())), CN_ERR_SHAPE, "inner dims");
    cn_module_free(lin);
    cn_scope_end();
}

int main(void) {
    RUN(test_params_must_train_and_children_by_name);
    RUN(test_linear_forward_matches_loops_and_default_init_bounds);
    RUN(test_linear_is_seeded_and_bias_optional);
    RUN(test_conv2d_forward_matches_loops);
    RUN(test_pooling_and_flatten_modules);
    RUN(test_activations_follow_their_formulas);
    RUN(test_dropout_statistics_in_training_and_identity_in_eval);
    RUN(test_batchnorm2d_train_running_stats_and_eval);
    RUN(test_batchnorm_gradient_matches_finite_differences);
    RUN(test_batchnorm1d_on_2d_input_without_affine);
    RUN(test_layernorm_normalises_trailing_dims);
    RUN(test_embedding_looks_up_rows_and_accumulates_gradients);
    RUN(test_sequential_names_params_like_state_dict_and_composes);
    RUN(test_sequential_takes_ownership_when_a_constructor_failed);
    RUN(test_custom_module_through_the_vtable);
    RUN(test_module_lifetimes_and_scopes);
    RUN(test_construction_and_forward_fail_cleanly_at_every_allocation);
    RUN(test_initialisers_ranges_and_moments);
    RUN(test_constructor_errors);
    return th_finish();
}
