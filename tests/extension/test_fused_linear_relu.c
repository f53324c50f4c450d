/* The extension op fused_linear_relu (examples/extension) against its oracle, the unfused
 * composition of built-in ops cn_relu(cn_linear(x, w, b)): outputs and the gradients of x, w and
 * b agree in f64 to 1e-12, with and without the optional bias, for dense and strided inputs.
 * Where a GPU is usable, its CUDA kernel (fused_linear_relu_cuda.cu) against the same oracle
 * computed on the CPU: f64 to 1e-12, f32 to 1e-5, strided, broadcast (packed) and empty inputs,
 * and the gradients under autodiff(cuda); without one that part says so and passes. */
#include "harness.h"

#include "cinder/cuda.h"

#include "fused.h"

enum { N = 5, IN = 4, OUT = 3 };

/* x: [N, IN], w: [OUT, IN], b: [OUT], r: [N, OUT] (weights of the loss), all f64 on the CPU. */
typedef struct data {
    cn_tensor *x, *w, *b, *r;
} data;

static data make_data(uint64_t seed, cn_dtype dtype) {
    cn_generator gen = cn_generator_new(seed);
    int64_t xs[2] = {N, IN}, ws[2] = {OUT, IN}, bs[1] = {OUT}, rs[2] = {N, OUT};
    data d = {cn_rand_normal(&gen, xs, 2, 0, 1, dtype, cn_cpu()),
              cn_rand_normal(&gen, ws, 2, 0, 1, dtype, cn_cpu()),
              cn_rand_normal(&gen, bs, 1, 0, 1, dtype, cn_cpu()),
              cn_rand_normal(&gen, rs, 2, 0, 1, dtype, cn_cpu())};
    return d;
}

static void free_data(data *d) {
    cn_release(d->x);
    cn_release(d->w);
    cn_release(d->b);
    cn_release(d->r);
}

/* Checks a == b elementwise within tol (b is the oracle). */
static void check_same(const char *what, cn_tensor *got, cn_tensor *want, double tol) {
    CHECK(got && want);
    if (!got || !want) return;
    CHECK(cn_ndim(got) == cn_ndim(want));
    th_check_shape(what, got, cn_shape(want), cn_ndim(want));
    double v[64];
    int64_t n = th_read(want, v);
    CHECK(n >= 0 && n <= 64);
    if (n >= 0 && n <= 64) th_check_values(what, got, v, n, tol);
}

/* ---- forward ------------------------------------------------------------------------------- */

static void test_forward_matches_unfused_f64(void) {
    data d = make_data(1, CN_F64);
    for (int with_b = 0; with_b < 2; with_b++) {
        cn_tensor *b = with_b ? d.b : NULL;
        cn_tensor *got = fused_linear_relu(d.x, d.w, b);
        cn_tensor *lin = cn_linear(d.x, d.w, b);
        cn_tensor *want = cn_relu(lin);
        check_same(with_b ? "y with b" : "y without b", got, want, 1e-12);
        CHECK(cn_dtype_of(got) == CN_F64);
        cn_release(got);
        cn_release(lin);
        cn_release(want);
    }
    free_data(&d);
}

static void test_forward_has_zeros_and_positives(void) {
    /* the relu must actually cut something, or the comparisons prove little */
    data d = make_data(1, CN_F64);
    cn_tensor *y = fused_linear_relu(d.x, d.w, d.b);
    double v[N * OUT];
    CHECK(th_read(y, v) == N * OUT);
    int zeros = 0, positives = 0;
    for (int i = 0; i < N * OUT; i++) {
        zeros += v[i] == 0;
        positives += v[i] > 0;
    }
    CHECK(zeros > 0 && positives > 0);
    cn_release(y);
    free_data(&d);
}

static void test_forward_f32(void) {
    data d = make_data(2, CN_F32);
    cn_tensor *got = fused_linear_relu(d.x, d.w, d.b);
    cn_tensor *lin = cn_linear(d.x, d.w, d.b);
    cn_tensor *want = cn_relu(lin);
    CHECK(cn_dtype_of(got) == CN_F32);
    check_same("y f32", got, want, 1e-5);
    cn_release(got);
    cn_release(lin);
    cn_release(want);
    free_data(&d);
}

/* w given as the transpose of a [IN, OUT] tensor (a column-major operand), x as every other row
 * of a [2N, IN] tensor (packed by the kernel), b broadcast from one value (stride 0). */
static void test_forward_strided_inputs(void) {
    cn_generator gen = cn_generator_new(3);
    int64_t xs[2] = {2 * N, IN}, wts[2] = {IN, OUT}, one[1] = {1}, bs[1] = {OUT};
    cn_tensor *xbig = cn_rand_normal(&gen, xs, 2, 0, 1, CN_F64, cn_cpu());
    cn_tensor *wt = cn_rand_normal(&gen, wts, 2, 0, 1, CN_F64, cn_cpu());
    cn_tensor *b1 = cn_rand_normal(&gen, one, 1, 0, 1, CN_F64, cn_cpu());
    cn_tensor *x = cn_slice(xbig, 0, 0, 2 * N, 2);
    cn_tensor *w = cn_transpose(wt, 0, 1);
    cn_tensor *b = cn_expand(b1, bs, 1);
    CHECK(!cn_is_contiguous(x) && !cn_is_contiguous(w) && cn_strides(b)[0] == 0);
    cn_tensor *got = fused_linear_relu(x, w, b);
    cn_tensor *lin = cn_linear(x, w, b);
    cn_tensor *want = cn_relu(lin);
    check_same("y strided", got, want, 1e-12);
    /* x again, stored column-major: [N, IN] with unit stride down the columns */
    cn_tensor *xc = cn_contiguous(x);
    cn_tensor *xc_t = cn_transpose(xc, 0, 1);
    cn_tensor *xt = cn_contiguous(xc_t);
    cn_tensor *xcol = cn_transpose(xt, 0, 1);
    CHECK(cn_strides(xcol)[0] == 1);
    cn_tensor *got2 = fused_linear_relu(xcol, w, b);
    check_same("y column-major x", got2, want, 1e-12);
    /* x broadcast from one row (stride 0 down the rows): the kernel packs it */
    int64_t x_shape[2] = {N, IN};
    cn_tensor *row = cn_slice(x, 0, 0, 1, 1);
    cn_tensor *xb = cn_expand(row, x_shape, 2);
    cn_tensor *got3 = fused_linear_relu(xb, w, b);
    cn_tensor *lin3 = cn_linear(xb, w, b);
    cn_tensor *want3 = cn_relu(lin3);
    CHECK(cn_strides(xb)[0] == 0);
    check_same("y broadcast x", got3, want3, 1e-12);
    cn_release(got3);
    cn_release(lin3);
    cn_release(want3);
    cn_release(xb);
    cn_release(row);
    cn_release(got2);
    cn_release(xcol);
    cn_release(xt);
    cn_release(xc_t);
    cn_release(xc);
    cn_release(got);
    cn_release(lin);
    cn_release(want);
    cn_release(x);
    cn_release(w);
    cn_release(b);
    cn_release(xbig);
    cn_release(wt);
    cn_release(b1);
}

/* max |a - b| over all elements, in f64 (read back whole). */
static double max_abs_diff(cn_tensor *a, cn_tensor *b) {
    int64_t n = cn_numel(b);
    double *x = malloc(sizeof(double) * (size_t)n), *y = malloc(sizeof(double) * (size_t)n);
    double worst = INFINITY;
    if (th_read(a, x) == n && th_read(b, y) == n) {
        worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double d = fabs(x[i] - y[i]);
            worst = d > worst || isnan(d) ? d : worst;
        }
    }
    free(x);
    free(y);
    return worst;
}

/* A product large enough for the kernel to split y's columns over the CPU threads, with a column
 * count (70) that is not a multiple of the 16-column blocks, for w as stored and transposed. */
static void test_forward_large_split_over_threads(void) {
    cn_generator gen = cn_generator_new(11);
    int64_t xs[2] = {96, 400}, ws[2] = {70, 400}, wts[2] = {400, 70}, bs[1] = {70};
    cn_tensor *x = cn_rand_normal(&gen, xs, 2, 0, 1, CN_F64, cn_cpu());
    cn_tensor *w = cn_rand_normal(&gen, ws, 2, 0, 0.05, CN_F64, cn_cpu());
    cn_tensor *wt_store = cn_rand_normal(&gen, wts, 2, 0, 0.05, CN_F64, cn_cpu());
    cn_tensor *b = cn_rand_normal(&gen, bs, 1, 0, 1, CN_F64, cn_cpu());
    cn_tensor *wt = cn_transpose(wt_store, 0, 1); /* [70, 400], columns contiguous */
    cn_tensor *ws_[2] = {w, wt};
    for (int k = 0; k < 2; k++) {
        cn_tensor *got = fused_linear_relu(x, ws_[k], b);
        cn_tensor *lin = cn_linear(x, ws_[k], b);
        cn_tensor *want = cn_relu(lin);
        th_check_shape("y large", got, cn_shape(want), 2);
        double diff = max_abs_diff(got, want);
        CHECK(diff <= 1e-12);
        cn_release(got);
        cn_release(lin);
        cn_release(want);
    }
    cn_release(x);
    cn_release(w);
    cn_release(wt);
    cn_release(wt_store);
    cn_release(b);
}

/* No inputs features (in = 0): y = relu(b) on every row. No rows (N = 0): an empty [0, OUT]. */
static void test_forward_empty_sizes(void) {
    int64_t x0s[2] = {N, 0}, w0s[2] = {OUT, 0}, bs[1] = {OUT};
    double bv[OUT] = {-1, 0.5, 2};
    cn_tensor *x0 = cn_zeros(x0s, 2, CN_F64, cn_cpu()), *w0 = cn_zeros(w0s, 2, CN_F64, cn_cpu());
    cn_tensor *b = cn_from_data(bv, bs, 1, CN_F64, cn_cpu());
    cn_tensor *y = fused_linear_relu(x0, w0, b);
    double want[N * OUT];
    for (int i = 0; i < N; i++)
        for (int j = 0; j < OUT; j++)
            want[i * OUT + j] = bv[j] > 0 ? bv[j] : 0;
    th_check_values("y with in = 0", y, want, N * OUT, 0);
    cn_release(y);

    data d = make_data(8, CN_F64);
    int64_t e_shape[2] = {0, IN}, y_shape[2] = {0, OUT};
    cn_tensor *xe = cn_zeros(e_shape, 2, CN_F64, cn_cpu());
    cn_tensor *ye = fused_linear_relu(xe, d.w, d.b);
    th_check_shape("y with N = 0", ye, y_shape, 2);
    cn_release(ye);
    cn_release(xe);
    free_data(&d);
    cn_release(x0);
    cn_release(w0);
    cn_release(b);
}

/* ---- gradients ----------------------------------------------------------------------------- */

typedef struct grads3 {
    cn_tensor *y, *gx, *gw, *gb;
} grads3;

/* y = f(x, w, b) on autodiff(cpu); loss = sum(y * r); returns y and the leaves' gradients (moved
 * to the concrete CPU). */
static grads3 run_backward(int fused, const data *d, int with_b) {
    grads3 out = {0};
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = cn_require_grad(cn_to_device(d->x, ad));
    cn_tensor *w = cn_require_grad(cn_to_device(d->w, ad));
    cn_tensor *b = with_b ? cn_require_grad(cn_to_device(d->b, ad)) : NULL;
    cn_tensor *r = cn_to_device(d->r, ad);
    cn_tensor *lin = fused ? NULL : cn_linear(x, w, b);
    cn_tensor *y = fused ? fused_linear_relu(x, w, b) : cn_relu(lin);
    CHECK(y && cn_requires_grad(y));
    cn_tensor *yr = cn_mul(y, r);
    cn_tensor *loss = cn_sum(yr);
    cn_grads *g = cn_backward(loss);
    CHECK(g != NULL);
    out.y = cn_inner(y);
    out.gx = cn_inner(cn_grad(g, x));
    out.gw = cn_inner(cn_grad(g, w));
    out.gb = with_b ? cn_inner(cn_grad(g, b)) : NULL;
    cn_grads_free(g);
    cn_release(loss);
    cn_release(yr);
    cn_release(y);
    cn_release(lin);
    cn_release(r);
    cn_release(b);
    cn_release(w);
    cn_release(x);
    return out;
}

static void free_grads3(grads3 *g) {
    cn_release(g->y);
    cn_release(g->gx);
    cn_release(g->gw);
    cn_release(g->gb);
}

static void check_gradients(int with_b) {
    data d = make_data(4, CN_F64);
    grads3 got = run_backward(1, &d, with_b), want = run_backward(0, &d, with_b);
    check_same("y", got.y, want.y, 1e-12);
    check_same("grad x", got.gx, want.gx, 1e-12);
    check_same("grad w", got.gw, want.gw, 1e-12);
    if (with_b)
        check_same("grad b", got.gb, want.gb, 1e-12);
    else
        CHECK(got.gb == NULL);
    free_grads3(&got);
    free_grads3(&want);
    free_data(&d);
}

static void test_gradients_match_unfused_with_bias(void) { check_gradients(1); }
static void test_gradients_match_unfused_without_bias(void) { check_gradients(0); }

/* Only w requires grad: x and b are constants on the same autodiff device. */
static void test_gradient_of_one_input(void) {
    data d = make_data(5, CN_F64);
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = cn_to_device(d.x, ad), *b = cn_to_device(d.b, ad);
    cn_tensor *w = cn_require_grad(cn_to_device(d.w, ad));
    cn_tensor *w2 = cn_require_grad(cn_to_device(d.w, ad));
    cn_tensor *y = fused_linear_relu(x, w, b), *lin = cn_linear(x, w2, b), *y2 = cn_relu(lin);
    cn_tensor *s = cn_sum(y), *s2 = cn_sum(y2);
    cn_grads *g = cn_backward(s), *g2 = cn_backward(s2);
    cn_tensor *gw = cn_inner(cn_grad(g, w)), *gw2 = cn_inner(cn_grad(g2, w2));
    check_same("grad w alone", gw, gw2, 1e-12);
    cn_release(gw);
    cn_release(gw2);
    cn_grads_free(g);
    cn_grads_free(g2);
    cn_release(s);
    cn_release(s2);
    cn_release(y);
    cn_release(y2);
    cn_release(lin);
    cn_release(x);
    cn_release(b);
    cn_release(w);
    cn_release(w2);
    free_data(&d);
}

/* ---- the CUDA kernel ------------------------------------------------------------------------ */

static cn_device gpu;

/* The views of test_forward_strided_inputs, made on `dev`: y = f(x, w, b) for x every other row,
 * w transposed, b broadcast (stride 0); then x broadcast from one row (packed by the kernels);
 * then x column-major (the GEMM's transposed a) with w as stored (its untransposed b). */
static void strided_case(cn_device dev, cn_tensor **y1, cn_tensor **y2, cn_tensor **y3) {
    cn_generator gen = cn_generator_new(3);
    int64_t xs[2] = {2 * N, IN}, wts[2] = {IN, OUT}, one[1] = {1}, bs[1] = {OUT};
    int64_t x_shape[2] = {N, IN};
    cn_scope_begin();
    cn_tensor *xbig = cn_to_device(cn_rand_normal(&gen, xs, 2, 0, 1, CN_F64, cn_cpu()), dev);
    cn_tensor *wt = cn_to_device(cn_rand_normal(&gen, wts, 2, 0, 1, CN_F64, cn_cpu()), dev);
    cn_tensor *b1 = cn_to_device(cn_rand_normal(&gen, one, 1, 0, 1, CN_F64, cn_cpu()), dev);
    cn_tensor *x = cn_slice(xbig, 0, 0, 2 * N, 2), *w = cn_transpose(wt, 0, 1);
    cn_tensor *b = cn_expand(b1, bs, 1);
    cn_tensor *xb = cn_expand(cn_slice(x, 0, 0, 1, 1), x_shape, 2);
    CHECK(x && !cn_is_contiguous(x) && w && !cn_is_contiguous(w) && b && cn_strides(b)[0] == 0);
    CHECK(xb && cn_strides(xb)[0] == 0);
    cn_tensor *xcol = cn_transpose(cn_contiguous(cn_transpose(x, 0, 1)), 0, 1);
    cn_tensor *wrow = cn_contiguous(w);
    CHECK(xcol && cn_strides(xcol)[0] == 1 && wrow && cn_strides(wrow)[1] == 1);
    *y1 = cn_keep(cn_to_device(fused_linear_relu(x, w, b), cn_cpu()));
    *y2 = cn_keep(cn_to_device(fused_linear_relu(xb, w, b), cn_cpu()));
    *y3 = cn_keep(cn_to_device(fused_linear_relu(xcol, wrow, b), cn_cpu()));
    cn_scope_end();
}

static void test_cuda_kernel_forward(void) {
    if (gpu.backend == CN_BACKEND_INVALID) return;
    CHECK(cn_ext_has_kernel(cn_ext_find("fused_linear_relu"), gpu) == 1);
    for (int f64 = 0; f64 < 2; f64++)
        for (int with_b = 0; with_b < 2; with_b++) {
            data d = make_data(20 + f64, f64 ? CN_F64 : CN_F32);
            cn_scope_begin();
            cn_tensor *b = with_b ? d.b : NULL;
            cn_tensor *want = cn_relu(cn_linear(d.x, d.w, b));
            cn_tensor *got = fused_linear_relu(cn_to_device(d.x, gpu), cn_to_device(d.w, gpu),
                                               b ? cn_to_device(b, gpu) : NULL);
            CHECK(got && cn_device_eq(cn_device_of(got), gpu));
            check_same(f64 ? "cuda y f64" : "cuda y f32", cn_to_device(got, cn_cpu()), want,
                       f64 ? 1e-12 : 1e-5);
            cn_scope_end();
            free_data(&d);
        }
    cn_tensor *c1, *c2, *c3, *g1, *g2, *g3;
    strided_case(cn_cpu(), &c1, &c2, &c3);
    strided_case(gpu, &g1, &g2, &g3);
    check_same("cuda y strided", g1, c1, 1e-12);
    check_same("cuda y broadcast x", g2, c2, 1e-12);
    check_same("cuda y column-major x", g3, c3, 1e-12);
    check_same("cpu y column-major x", c3, c1, 1e-12); /* the same product, stored otherwise */
    cn_release(c1);
    cn_release(c2);
    cn_release(c3);
    cn_release(g1);
    cn_release(g2);
    cn_release(g3);

    /* a product of 96 x 400 x 70 in f32, and the empty sizes */
    cn_scope_begin();
    cn_generator gen = cn_generator_new(11);
    int64_t xs[2] = {96, 400}, ws[2] = {70, 400}, bs[1] = {70};
    cn_tensor *x = cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32, cn_cpu());
    cn_tensor *w = cn_rand_normal(&gen, ws, 2, 0, 0.05, CN_F32, cn_cpu());
    cn_tensor *b = cn_rand_normal(&gen, bs, 1, 0, 1, CN_F32, cn_cpu());
    cn_tensor *got = fused_linear_relu(cn_to_device(x, gpu), cn_to_device(w, gpu),
                                       cn_to_device(b, gpu));
    CHECK(max_abs_diff(cn_to_device(got, cn_cpu()), cn_relu(cn_linear(x, w, b))) <= 1e-4);
    int64_t x0s[2] = {N, 0}, w0s[2] = {OUT, 0}, e_shape[2] = {0, IN}, y_shape[2] = {0, OUT};
    double bv[OUT] = {-1, 0.5, 2}, want0[N * OUT];
    int64_t b0s[1] = {OUT}, wes[2] = {OUT, IN};
    for (int i = 0; i < N * OUT; i++) want0[i] = bv[i % OUT] > 0 ? bv[i % OUT] : 0;
    cn_tensor *y0 = fused_linear_relu(cn_zeros(x0s, 2, CN_F64, gpu), cn_zeros(w0s, 2, CN_F64, gpu),
                                      cn_from_data(bv, b0s, 1, CN_F64, gpu));
    th_check_values("cuda y with in = 0", y0, want0, N * OUT, 0);
    cn_tensor *ye = fused_linear_relu(cn_zeros(e_shape, 2, CN_F64, gpu),
                                      cn_zeros(wes, 2, CN_F64, gpu), NULL);
    th_check_shape("cuda y with N = 0", ye, y_shape, 2);
    cn_scope_end();
}

/* y and the gradients under autodiff(cuda), against the unfused ones on autodiff(cpu). */
static void test_cuda_kernel_gradients(void) {
    if (gpu.backend == CN_BACKEND_INVALID) return;
    data d = make_data(24, CN_F64);
    grads3 want = run_backward(0, &d, 1);
    cn_device ad = cn_autodiff(gpu);
    cn_scope_begin();
    cn_tensor *x = cn_require_grad(cn_to_device(d.x, ad));
    cn_tensor *w = cn_require_grad(cn_to_device(d.w, ad));
    cn_tensor *b = cn_require_grad(cn_to_device(d.b, ad));
    cn_tensor *y = fused_linear_relu(x, w, b);
    CHECK(y && cn_requires_grad(y));
    cn_grads *g = cn_backward(cn_sum(cn_mul(y, cn_to_device(d.r, ad))));
    CHECK(g != NULL);
    if (g) {
        check_same("cuda y (autodiff)", cn_to_device(cn_inner(y), cn_cpu()), want.y, 1e-12);
        check_same("cuda grad x", cn_to_device(cn_inner(cn_grad(g, x)), cn_cpu()), want.gx, 1e-12);
        check_same("cuda grad w", cn_to_device(cn_inner(cn_grad(g, w)), cn_cpu()), want.gw, 1e-12);
        check_same("cuda grad b", cn_to_device(cn_inner(cn_grad(g, b)), cn_cpu()), want.gb, 1e-12);
    }
    cn_grads_free(g);
    cn_scope_end();
    free_grads3(&want);
    free_data(&d);
}

/* ---- the generated glue -------------------------------------------------------------------- */

static void test_register_is_idempotent(void) {
    CHECK(fused_register() == CN_OK);
    CHECK(fused_register() == CN_OK);
    CHECK(cn_ext_find("fused_linear_relu") != NULL);
}

static void test_shape_errors_name_the_op(void) {
    data d = make_data(6, CN_F64);
    int64_t bad[2] = {OUT, IN + 1};
    cn_tensor *wbad = cn_zeros(bad, 2, CN_F64, cn_cpu());
    CHECK_FAILS(fused_linear_relu(d.x, wbad, d.b), CN_ERR_SHAPE, "fused_linear_relu");
    cn_tensor *b32 = cn_cast(d.b, CN_F32);
    CHECK_FAILS(fused_linear_relu(d.x, d.w, b32), CN_ERR_DTYPE, "all inputs must share a dtype");
    CHECK_FAILS(fused_linear_relu(d.x, NULL, d.b), CN_ERR_NULL_ARG, "w");
    cn_release(b32);
    cn_release(wbad);
    free_data(&d);
}

/* A NULL input produced by a failed call keeps that call's error, as built-in ops do. */
static void test_null_input_keeps_earlier_error(void) {
    data d = make_data(7, CN_F64);
    cn_tensor *bad = cn_matmul(d.x, d.x); /* [N, IN] @ [N, IN]: a shape error */
    CHECK(bad == NULL && cn_last_status() == CN_ERR_SHAPE);
    cn_tensor *y = fused_linear_relu(bad, d.w, d.b);
    CHECK(y == NULL && cn_last_status() == CN_ERR_SHAPE);
    cn_clear_error();
    free_data(&d);
}

int main(void) {
    gpu = (cn_device){CN_BACKEND_INVALID, 0, 0, 0};
    if (cn_backend_load("cuda") >= 0 && cn_backend_device_count("cuda") > 0) {
        if (cn_device_parse("cuda:0", &gpu) != CN_OK) gpu.backend = CN_BACKEND_INVALID;
    } else {
        printf("cuda: no usable GPU here (%s); the CUDA kernel's tests pass without running\n",
               cn_cuda_unavailable_reason());
    }
    cn_clear_error();
    RUN(test_register_is_idempotent);
    RUN(test_forward_matches_unfused_f64);
    RUN(test_forward_has_zeros_and_positives);
    RUN(test_forward_f32);
    RUN(test_forward_strided_inputs);
    RUN(test_forward_large_split_over_threads);
    RUN(test_forward_empty_sizes);
    RUN(test_gradients_match_unfused_with_bias);
    RUN(test_gradients_match_unfused_without_bias);
    RUN(test_gradient_of_one_input);
    RUN(test_shape_errors_name_the_op);
    RUN(test_null_input_keeps_earlier_error);
    RUN(test_cuda_kernel_forward);
    RUN(test_cuda_kernel_gradients);
    return th_finish();
}
