/* Issue 16's convolutions (cn_conv_transpose2d, cn_conv1d, cn_conv_transpose1d, cn_conv3d,
 * cn_conv_transpose3d) beyond the op table's PyTorch cases: conv3d at a point by its definition and
 * conv_transpose3d as its adjoint; a reference loop written here for conv_transpose2d on non-contiguous
 * operands; the adjoint identity <conv_transpose2d(x, w), y> = <x, conv2d(y, w)>; conv1d and
 * conv_transpose1d equal to the 2-D ops on a unit height (strided 1-D views included); gradients
 * through an output_padding past the stride; and every misuse: ranks, channels, groups, bias,
 * negative values, PyTorch's output_padding rule, outputs that vanish or pass int64, dtypes. */
#include "harness.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static cn_tensor *rand_tensor(const int64_t *shape, int ndim, cn_dtype dt) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = th_alloc_doubles(n);
    th_fill_eighths(&rng_state, v, n);
    cn_tensor *t = th_own(th_tensor(v, shape, ndim, dt));
    free(v);
    return t;
}

/* PyTorch's conv_transpose2d by its definition (scatter form, unlike the kernels' gather). */
static double *ref_conv_transpose2d(const double *x, const int64_t *xs, const double *w,
                                    const int64_t *ws, const double *b,
                                    const cn_conv_transpose2d_params *p, int64_t *os) {
    int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], G = p->groups;
    int64_t Og = ws[1], KH = ws[2], KW = ws[3], O = Og * G, Cg = C / G;
    int64_t OH = (H - 1) * p->stride[0] - 2 * p->padding[0] + p->dilation[0] * (KH - 1) +
                 p->output_padding[0] + 1;
    int64_t OW = (W - 1) * p->stride[1] - 2 * p->padding[1] + p->dilation[1] * (KW - 1) +
                 p->output_padding[1] + 1;
    os[0] = N, os[1] = O, os[2] = OH, os[3] = OW;
    double *out = th_alloc_doubles(N * O * OH * OW);
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t r = 0; r < OH * OW; r++) out[(n * O + o) * OH * OW + r] = b ? b[o] : 0;
    for (int64_t n = 0; n < N; n++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t i = 0; i < H; i++)
                for (int64_t j = 0; j < W; j++)
                    for (int64_t ol = 0; ol < Og; ol++)
                        for (int64_t kh = 0; kh < KH; kh++)
                            for (int64_t kw = 0; kw < KW; kw++) {
                                int64_t r = i * p->stride[0] - p->padding[0] + kh * p->dilation[0];
                                int64_t q = j * p->stride[1] - p->padding[1] + kw * p->dilation[1];
                                if (r < 0 || r >= OH || q < 0 || q >= OW) continue;
                                int64_t o = (c / Cg) * Og + ol;
                                out[((n * O + o) * OH + r) * OW + q] +=
                                    x[((n * C + c) * H + i) * W + j] *
                                    w[((c * Og + ol) * KH + kh) * KW + kw];
                            }
    return out;
}

static void check_transpose(const char *what, cn_tensor *x, cn_tensor *w, cn_tensor *b,
                            cn_conv_transpose2d_params p) {
    double *xv = th_values(x), *wv = th_values(w), *bv = b ? th_values(b) : NULL;
    int64_t os[4];
    double *want = ref_conv_transpose2d(xv, cn_shape(x), wv, cn_shape(w), bv, &p, os);
    cn_tensor *y = th_own(cn_conv_transpose2d(x, w, b, &p));
    th_check_shape(what, y, os, 4);
    th_check_values(what, y, want, os[0] * os[1] * os[2] * os[3], th_tol_of(cn_dtype_of(x)));
    free(xv);
    free(wv);
    free(bv);
    free(want);
}

static void test_transpose2d_non_contiguous(void) {
    const cn_dtype dts[] = {CN_F32, CN_F64};
    for (int k = 0; k < 2; k++) {
        cn_dtype dt = dts[k];
        cn_tensor *nhwc = rand_tensor((int64_t[]){2, 4, 5, 4}, 4, dt);
        cn_tensor *x = th_own(cn_permute(nhwc, (int[]){0, 3, 1, 2})); /* [2, 4, 4, 5] */
        CHECK(x && !cn_is_contiguous(x));
        /* every other filter: w [4, 3, 3, 2] with a dim-0 stride of 2 filters */
        cn_tensor *w4 = th_own(cn_slice(rand_tensor((int64_t[]){8, 3, 3, 2}, 4, dt), 0, 0, 8, 2));
        cn_tensor *b = th_own(cn_slice(rand_tensor((int64_t[]){12}, 1, dt), 0, 0, 12, 2));
        check_transpose("channels-last x, strided w", x, w4, b,
                        (cn_conv_transpose2d_params){{2, 3}, {1, 2}, {1, 2}, {2, 1}, 2});
        check_transpose("output_padding below the dilation", x, w4, NULL,
                        (cn_conv_transpose2d_params){{1, 1}, {0, 1}, {2, 1}, {3, 2}, 2});
    }
    th_release_owned();
}

/* sum(a * b) as a double */
static double dot(cn_tensor *a, cn_tensor *b) {
    cn_tensor *s = th_own(cn_sum(th_own(cn_mul(a, b))));
    double v = 0;
    CHECK(s && th_read(s, &v) == 1);
    return v;
}

static void test_transpose2d_is_conv2d_adjoint(void) {
    cn_tensor *x = rand_tensor((int64_t[]){2, 4, 3, 4}, 4, CN_F64);
    cn_tensor *w = rand_tensor((int64_t[]){4, 3, 3, 2}, 4, CN_F64); /* groups 2: O = 6 */
    cn_conv_transpose2d_params pt = {{2, 1}, {1, 0}, {1, 0}, {1, 2}, 2};
    cn_tensor *y = th_own(cn_conv_transpose2d(x, w, NULL, &pt));
    CHECK(y);
    if (!y) return;
    cn_tensor *r = rand_tensor(cn_shape(y), 4, CN_F64);
    cn_conv2d_params pc = {{2, 1}, {1, 0}, {1, 2}, 2};
    cn_tensor *back = th_own(cn_conv2d(r, w, NULL, &pc));
    th_check_shape("adjoint", back, cn_shape(x), 4);
    CHECK_NEAR(dot(y, r), dot(x, back), 1e-9);
    th_release_owned();
}

/* conv1d and conv_transpose1d are the 2-D ops on [N, C, 1, L]; strided 1-D views included */
static void test_1d_is_2d_with_unit_height(void) {
    cn_tensor *base = rand_tensor((int64_t[]){2, 9, 4}, 3, CN_F32);
    cn_tensor *x = th_own(cn_transpose(base, 1, 2)); /* [2, 4, 9], L stride 4 */
    cn_tensor *w = rand_tensor((int64_t[]){6, 2, 3}, 3, CN_F32);
    cn_tensor *b = rand_tensor((int64_t[]){6}, 1, CN_F32);
    cn_conv1d_params p1 = {2, 1, 2, 2};
    cn_conv2d_params p2 = {{1, 2}, {0, 1}, {1, 2}, 2};
    cn_tensor *y1 = th_own(cn_conv1d(x, w, b, &p1));
    cn_tensor *y2 = th_own(cn_conv2d(th_own(cn_unsqueeze(x, 2)), th_own(cn_unsqueeze(w, 2)), b,
                                     &p2));
    CHECK(y1 && y2);
    if (y1 && y2) {
        double *want = th_values(y2);
        th_check_shape("conv1d", y1, (int64_t[]){2, 6, 4}, 3);
        th_check_values("conv1d", y1, want, 2 * 6 * 4, 0);
        free(want);
    }
    cn_tensor *xt = th_own(cn_transpose(rand_tensor((int64_t[]){2, 5, 4}, 3, CN_F32), 1, 2));
    cn_tensor *wt = rand_tensor((int64_t[]){4, 3, 3}, 3, CN_F32);
    cn_conv_transpose1d_params q1 = {2, 1, 1, 1, 2};
    cn_conv_transpose2d_params q2 = {{1, 2}, {0, 1}, {0, 1}, {1, 1}, 2};
    cn_tensor *t1 = th_own(cn_conv_transpose1d(xt, wt, b, &q1));
    cn_tensor *t2 = th_own(cn_conv_transpose2d(th_own(cn_unsqueeze(xt, 2)),
                                               th_own(cn_unsqueeze(wt, 2)), b, &q2));
    CHECK(t1 && t2);
    if (t1 && t2) {
        double *want = th_values(t2);
        th_check_shape("conv_transpose1d", t1, (int64_t[]){2, 6, 10}, 3);
        th_check_values("conv_transpose1d", t1, want, 2 * 6 * 10, 0);
        free(want);
    }
    th_release_owned();
}

/* The gradients of sum(conv_transpose2d(x, w) * r) with an output_padding past the stride (the
 * formula cuts conv2d(r, w) to x's rows and zero-extends x for the weight) equal those of the
 * adjoint side sum(x * conv2d(r, w)[rows of x]), both by cn_backward. */
static cn_grads *grads_of(cn_tensor *loss) {
    cn_grads *g = cn_backward(loss);
    CHECK(g != NULL);
    return g;
}

static void test_transpose2d_gradient_past_the_stride(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *xc = rand_tensor((int64_t[]){1, 2, 3, 3}, 4, CN_F64);
    cn_tensor *wc = rand_tensor((int64_t[]){2, 2, 2, 2}, 4, CN_F64);
    cn_tensor *x = th_own(cn_require_grad(cn_to_device(xc, ad)));
    cn_tensor *w = th_own(cn_require_grad(cn_to_device(wc, ad)));
    cn_conv_transpose2d_params p = {{1, 2}, {0, 1}, {2, 1}, {3, 2}, 1};
    cn_tensor *y = th_own(cn_conv_transpose2d(x, w, NULL, &p));
    CHECK(y);
    if (!y) return;
    th_check_shape("output rows past the stride", y, (int64_t[]){1, 2, 8, 6}, 4);
    cn_tensor *r = th_own(cn_to_device(rand_tensor(cn_shape(y), 4, CN_F64), ad));
    cn_grads *g1 = grads_of(th_own(cn_sum(th_own(cn_mul(y, r)))));
    cn_tensor *x2 = th_own(cn_require_grad(cn_to_device(xc, ad)));
    cn_tensor *w2 = th_own(cn_require_grad(cn_to_device(wc, ad)));
    cn_conv2d_params pc = {{1, 2}, {0, 1}, {3, 2}, 1};
    cn_tensor *c = th_own(cn_conv2d(r, w2, NULL, &pc));
    CHECK(c && cn_shape(c)[2] == 5 && cn_shape(c)[3] == 3); /* 2 rows past x's 3 */
    if (c && g1) {
        cn_tensor *cut = th_own(cn_slice(c, 2, 0, 3, 1));
        cn_grads *g2 = grads_of(th_own(cn_sum(th_own(cn_mul(cut, x2)))));
        if (g2) {
            double *gx = th_values(cn_grad(g2, x2)), *gw = th_values(cn_grad(g2, w2));
            th_check_values("grad x", cn_grad(g1, x), gx, 18, 1e-12);
            th_check_values("grad w", cn_grad(g1, w), gw, 16, 1e-12);
            free(gx);
            free(gw);
            cn_grads_free(g2);
        }
    }
    cn_grads_free(g1);
    th_release_owned();
}

static void test_transpose2d_errors(void) {
    cn_device cpu = cn_cpu();
    cn_tensor *x = th_own(cn_ones((int64_t[]){1, 4, 3, 3}, 4, CN_F32, cpu));
    cn_tensor *w = th_own(cn_ones((int64_t[]){4, 3, 2, 2}, 4, CN_F32, cpu));
    const char *op = "conv_transpose2d";
    /* ranks */
    cn_tensor *x3 = th_own(cn_ones((int64_t[]){4, 3, 3}, 3, CN_F32, cpu));
    CHECK_FAILS(cn_conv_transpose2d(x3, w, NULL, NULL), CN_ERR_SHAPE, "cn_unsqueeze(x, 0)");
    cn_tensor *w3 = th_own(cn_ones((int64_t[]){4, 3, 2}, 3, CN_F32, cpu));
    CHECK_FAILS(cn_conv_transpose2d(x, w3, NULL, NULL), CN_ERR_SHAPE, "[C, O/groups, KH, KW]");
    /* channels: w's dim 0 must be x's C; groups must divide C */
    cn_tensor *w5 = th_own(cn_ones((int64_t[]){5, 3, 2, 2}, 4, CN_F32, cpu));
    CHECK_FAILS(cn_conv_transpose2d(x, w5, NULL, NULL), CN_ERR_SHAPE, "'w'");
    cn_conv_transpose2d_params g3 = {.groups = 3};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &g3), CN_ERR_SHAPE, "groups");
    /* bias of O = 3 x groups */
    cn_conv_transpose2d_params g2 = {.groups = 2};
    cn_tensor *b3 = th_own(cn_ones((int64_t[]){3}, 1, CN_F32, cpu));
    CHECK_FAILS(cn_conv_transpose2d(x, w, b3, &g2), CN_ERR_SHAPE, "[O] = [6]");
    cn_tensor *y = th_own(cn_conv_transpose2d(x, w, b3, NULL)); /* groups 1: O = 3 */
    th_check_shape("bias [3]", y, (int64_t[]){1, 3, 4, 4}, 4);
    /* negative values */
    cn_conv_transpose2d_params neg_s = {.stride = {-1, 1}};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &neg_s), CN_ERR_INVALID_ARG, "non-negative");
    cn_conv_transpose2d_params neg_p = {.padding = {0, -1}};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &neg_p), CN_ERR_INVALID_ARG, "padding -1");
    cn_conv_transpose2d_params neg_op = {.output_padding = {-1, 0}};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &neg_op), CN_ERR_INVALID_ARG,
                "output_padding -1");
    cn_conv_transpose2d_params neg_d = {.dilation = {1, -2}};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &neg_d), CN_ERR_INVALID_ARG, "dilation -2");
    cn_conv_transpose2d_params neg_g = {.groups = -2};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &neg_g), CN_ERR_INVALID_ARG, "groups -2");
    /* PyTorch's rule: output_padding below the stride or the dilation */
    cn_conv_transpose2d_params op_big = {.stride = {2, 2}, .output_padding = {2, 0}};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &op_big), CN_ERR_INVALID_ARG,
                "smaller than the stride (2) or the dilation (1)");
    cn_conv_transpose2d_params op_dil = {.stride = {2, 2}, .output_padding = {0, 2},
                                         .dilation = {1, 3}};
    th_check_shape("output_padding 2 < dilation 3",
                   th_own(cn_conv_transpose2d(x, w, NULL, &op_dil)), (int64_t[]){1, 3, 6, 10}, 4);
    /* outputs that vanish, or pass int64; an empty input plane */
    cn_conv_transpose2d_params pad = {.padding = {3, 0}};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &pad), CN_ERR_SHAPE, "less padding");
    cn_conv_transpose2d_params huge = {.stride = {INT64_MAX / 2, 1}};
    CHECK_FAILS(cn_conv_transpose2d(x, w, NULL, &huge), CN_ERR_OVERFLOW, op);
    cn_tensor *x0 = th_own(cn_ones((int64_t[]){1, 4, 0, 3}, 4, CN_F32, cpu));
    CHECK_FAILS(cn_conv_transpose2d(x0, w, NULL, NULL), CN_ERR_SHAPE, "empty spatial dim");
    /* kinds and dtypes */
    cn_tensor *xi = th_own(cn_ones((int64_t[]){1, 4, 3, 3}, 4, CN_I32, cpu));
    CHECK_FAILS(cn_conv_transpose2d(xi, w, NULL, NULL), CN_ERR_KIND, op);
    cn_tensor *wd = th_own(cn_ones((int64_t[]){4, 3, 2, 2}, 4, CN_F64, cpu));
    CHECK_FAILS(cn_conv_transpose2d(x, wd, NULL, NULL), CN_ERR_DTYPE, op);
    CHECK_FAILS(cn_conv_transpose2d(NULL, w, NULL, NULL), CN_ERR_NULL_ARG, op);
    th_release_owned();
}

static void test_1d_errors(void) {
    cn_device cpu = cn_cpu();
    cn_tensor *x = th_own(cn_ones((int64_t[]){1, 4, 6}, 3, CN_F32, cpu));
    cn_tensor *w = th_own(cn_ones((int64_t[]){2, 4, 3}, 3, CN_F32, cpu)); /* conv1d: O = 2 */
    cn_tensor *x4 = th_own(cn_ones((int64_t[]){1, 4, 1, 6}, 4, CN_F32, cpu));
    CHECK_FAILS(cn_conv1d(x4, w, NULL, NULL), CN_ERR_SHAPE, "[N, C, L]");
    cn_tensor *w4 = th_own(cn_ones((int64_t[]){2, 4, 1, 3}, 4, CN_F32, cpu));
    CHECK_FAILS(cn_conv1d(x, w4, NULL, NULL), CN_ERR_SHAPE, "[O, C/groups, K]");
    cn_tensor *w3c = th_own(cn_ones((int64_t[]){2, 3, 3}, 3, CN_F32, cpu));
    CHECK_FAILS(cn_conv1d(x, w3c, NULL, NULL), CN_ERR_SHAPE, "conv1d");
    cn_conv1d_params g3 = {.groups = 3};
    CHECK_FAILS(cn_conv1d(x, w, NULL, &g3), CN_ERR_SHAPE, "divisible by groups");
    cn_conv1d_params neg = {.padding = -1};
    CHECK_FAILS(cn_conv1d(x, w, NULL, &neg), CN_ERR_INVALID_ARG, "conv1d");
    cn_conv1d_params dil = {.dilation = 3};
    CHECK_FAILS(cn_conv1d(x, w, NULL, &dil), CN_ERR_SHAPE, "smaller kernel");
    cn_conv1d_params huge = {.padding = INT64_MAX / 2};
    CHECK_FAILS(cn_conv1d(x, w, NULL, &huge), CN_ERR_OVERFLOW, "conv1d");
    cn_tensor *b = th_own(cn_ones((int64_t[]){3}, 1, CN_F32, cpu));
    CHECK_FAILS(cn_conv1d(x, w, b, NULL), CN_ERR_SHAPE, "[O] = [2]");

    cn_tensor *wt = th_own(cn_ones((int64_t[]){4, 2, 3}, 3, CN_F32, cpu)); /* O = 2 x groups */
    CHECK_FAILS(cn_conv_transpose1d(x4, wt, NULL, NULL), CN_ERR_SHAPE, "conv_transpose1d");
    CHECK_FAILS(cn_conv_transpose1d(x, w, NULL, NULL), CN_ERR_SHAPE, "[C, O/groups, ...]");
    cn_conv_transpose1d_params opad = {.stride = 2, .output_padding = 2, .dilation = 2};
    CHECK_FAILS(cn_conv_transpose1d(x, wt, NULL, &opad), CN_ERR_INVALID_ARG, "output_padding 2");
    cn_conv_transpose1d_params negop = {.output_padding = -1};
    CHECK_FAILS(cn_conv_transpose1d(x, wt, NULL, &negop), CN_ERR_INVALID_ARG, "conv_transpose1d");
    cn_conv_transpose1d_params pad = {.padding = 5};
    CHECK_FAILS(cn_conv_transpose1d(x, wt, NULL, &pad), CN_ERR_SHAPE, "less padding");
    cn_conv_transpose1d_params g2 = {.groups = 2};
    th_check_shape("conv_transpose1d groups 2", th_own(cn_conv_transpose1d(x, wt, NULL, &g2)),
                   (int64_t[]){1, 4, 8}, 3);
    cn_tensor *xi = th_own(cn_ones((int64_t[]){1, 4, 6}, 3, CN_I64, cpu));
    CHECK_FAILS(cn_conv_transpose1d(xi, wt, NULL, NULL), CN_ERR_KIND, "conv_transpose1d");
    th_release_owned();
}

/* conv3d by its definition at a few points, and conv_transpose3d as its adjoint */
static void test_3d_against_definitions(void) {
    cn_tensor *x = rand_tensor((int64_t[]){2, 4, 4, 5, 3}, 5, CN_F64);
    cn_tensor *w = rand_tensor((int64_t[]){6, 2, 2, 3, 2}, 5, CN_F64);
    cn_tensor *b = rand_tensor((int64_t[]){6}, 1, CN_F64);
    cn_conv3d_params p = {{2, 1, 1}, {1, 0, 1}, {1, 2, 1}, 2};
    cn_tensor *y = th_own(cn_conv3d(x, w, b, &p));
    th_check_shape("conv3d", y, (int64_t[]){2, 6, 3, 1, 4}, 5);
    double *xv = th_values(x), *wv = th_values(w), *bv = th_values(b), *yv = th_values(y);
    if (xv && wv && bv && yv) {
        /* y[1, 4, 2, 0, 3]: group 1 (channels 2, 3) */
        double want = bv[4];
        for (int c = 0; c < 2; c++)
            for (int kd = 0; kd < 2; kd++)
                for (int kh = 0; kh < 3; kh++)
                    for (int kw = 0; kw < 2; kw++) {
                        int64_t d = 2 * 2 - 1 + kd, h = 0 + 2 * kh, ww = 3 - 1 + kw;
                        if (d < 0 || d >= 4 || h >= 5 || ww < 0 || ww >= 3) continue;
                        want += xv[(((1 * 4 + 2 + c) * 4 + d) * 5 + h) * 3 + ww] *
                                wv[(((4 * 2 + c) * 2 + kd) * 3 + kh) * 2 + kw];
                    }
        CHECK_NEAR(yv[(((1 * 6 + 4) * 3 + 2) * 1 + 0) * 4 + 3], want, 1e-12);
    }
    free(xv), free(wv), free(bv), free(yv);
    /* <conv_transpose3d(r, w), x'> = <r, conv3d(x', w)> */
    cn_tensor *r = rand_tensor((int64_t[]){2, 6, 3, 1, 4}, 5, CN_F64);
    cn_conv_transpose3d_params pt = {{2, 1, 1}, {1, 0, 1}, {1, 0, 0}, {1, 2, 1}, 2};
    cn_tensor *t = th_own(cn_conv_transpose3d(r, w, NULL, &pt));
    th_check_shape("conv_transpose3d", t, (int64_t[]){2, 4, 5, 5, 3}, 5);
    cn_tensor *x2 = rand_tensor((int64_t[]){2, 4, 5, 5, 3}, 5, CN_F64);
    cn_tensor *c = th_own(cn_conv3d(x2, w, NULL, &p));
    if (t && c) CHECK_NEAR(dot(t, x2), dot(r, c), 1e-9);
    th_release_owned();
}

static void test_3d_errors(void) {
    cn_device cpu = cn_cpu();
    cn_tensor *x = th_own(cn_ones((int64_t[]){1, 4, 3, 3, 3}, 5, CN_F32, cpu));
    cn_tensor *w = th_own(cn_ones((int64_t[]){2, 4, 2, 2, 2}, 5, CN_F32, cpu));
    cn_tensor *x4 = th_own(cn_ones((int64_t[]){1, 4, 3, 3}, 4, CN_F32, cpu));
    CHECK_FAILS(cn_conv3d(x4, w, NULL, NULL), CN_ERR_SHAPE, "[N, C, D, H, W]");
    CHECK_FAILS(cn_conv_transpose3d(x, x4, NULL, NULL), CN_ERR_SHAPE,
                "[C, O/groups, KD, KH, KW]");
    cn_conv3d_params g3 = {.groups = 3};
    CHECK_FAILS(cn_conv3d(x, w, NULL, &g3), CN_ERR_SHAPE, "conv3d");
    cn_conv3d_params neg = {.dilation = {1, 1, -1}};
    CHECK_FAILS(cn_conv3d(x, w, NULL, &neg), CN_ERR_INVALID_ARG, "dilation -1");
    cn_conv3d_params dil = {.dilation = {1, 3, 1}};
    CHECK_FAILS(cn_conv3d(x, w, NULL, &dil), CN_ERR_SHAPE, "smaller kernel");
    cn_tensor *b = th_own(cn_ones((int64_t[]){4}, 1, CN_F32, cpu));
    CHECK_FAILS(cn_conv3d(x, w, b, NULL), CN_ERR_SHAPE, "[O] = [2]");
    cn_tensor *wt = th_own(cn_ones((int64_t[]){4, 2, 2, 2, 2}, 5, CN_F32, cpu));
    cn_conv_transpose3d_params op = {.stride = {1, 2, 1}, .output_padding = {0, 2, 0}};
    CHECK_FAILS(cn_conv_transpose3d(x, wt, NULL, &op), CN_ERR_INVALID_ARG,
                "smaller than the stride (2) or the dilation (1)");
    cn_conv_transpose3d_params pad = {.padding = {0, 0, 3}};
    CHECK_FAILS(cn_conv_transpose3d(x, wt, NULL, &pad), CN_ERR_SHAPE, "less padding");
    cn_conv_transpose3d_params huge = {.dilation = {1, INT64_MAX / 2, 1}};
    CHECK_FAILS(cn_conv_transpose3d(x, wt, NULL, &huge), CN_ERR_OVERFLOW, "conv_transpose3d");
    CHECK_FAILS(cn_conv_transpose3d(x, w, NULL, NULL), CN_ERR_SHAPE, "conv_transpose3d");
    cn_tensor *xd = th_own(cn_ones((int64_t[]){1, 4, 3, 3, 3}, 5, CN_F64, cpu));
    CHECK_FAILS(cn_conv3d(xd, w, NULL, NULL), CN_ERR_DTYPE, "conv3d");
    th_release_owned();
}

int main(void) {
    RUN(test_transpose2d_non_contiguous);
    RUN(test_transpose2d_is_conv2d_adjoint);
    RUN(test_1d_is_2d_with_unit_height);
    RUN(test_transpose2d_gradient_past_the_stride);
    RUN(test_transpose2d_errors);
    RUN(test_1d_errors);
    RUN(test_3d_against_definitions);
    RUN(test_3d_errors);
    return th_finish();
}
