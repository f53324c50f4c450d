/* Autodiff against the reference cases of shared/oracle/autodiff-cases.md (gradients from burn's
 * test suite), with and without checkpointing, plus the autodiff layer's rules and errors. */
#include "harness.h"

static cn_device devices[2];

static cn_tensor *leaf(cn_device dev, const double *v, int64_t r, int64_t c) {
    int64_t shape[2] = {r, c};
    float f[16];
    for (int64_t i = 0; i < r * c; i++) f[i] = (float)v[i];
    return cn_require_grad(cn_from_data(f, shape, c == 0 ? 1 : 2, CN_F32, dev));
}

static cn_tensor *vec2(cn_device dev, double a, double b) {
    float f[2] = {(float)a, (float)b};
    int64_t n = 2;
    return cn_require_grad(cn_from_data(f, &n, 1, CN_F32, dev));
}

/* Checks the gradient of t in g against want (n values) with relative tolerance tol. */
static void check_grad(const char *what, cn_grads *g, cn_tensor *t, const double *want, int n,
                       double tol) {
    cn_tensor *gt = g ? cn_grad(g, t) : NULL;
    th_check_values(what, gt, want, n, tol);
    if (gt) CHECK(cn_ndim(gt) == cn_ndim(t) && cn_numel(gt) == cn_numel(t));
}

typedef cn_tensor *(*binop)(cn_tensor *, cn_tensor *);

static void elementwise_case(cn_device dev, const char *name, binop f, double a0, double a1,
                             double b0, double b1, const double *ga, const double *gb) {
    cn_tensor *a = vec2(dev, a0, a1), *b = vec2(dev, b0, b1);
    cn_tensor *y = f(a, b);
    cn_grads *g = cn_backward(y);
    CHECK(g != NULL);
    check_grad(name, g, a, ga, 2, 1e-4);
    check_grad(name, g, b, gb, 2, 1e-4);
    cn_grads_free(g);
    cn_release(y);
    cn_release(a);
    cn_release(b);
}

static void test_oracle_elementwise(void) {
    for (int k = 0; k < 2; k++) {
        cn_device d = devices[k];
        elementwise_case(d, "1 add", cn_add, 2, 5, 4, 1, (double[]){1, 1}, (double[]){1, 1});
        elementwise_case(d, "2 sub", cn_sub, 2, 5, 4, 1, (double[]){1, 1}, (double[]){-1, -1});
        elementwise_case(d, "3 mul", cn_mul, 1, 7, 4, 7, (double[]){4, 7}, (double[]){1, 7});
        elementwise_case(d, "4 div", cn_div, 1, 7, 4, 7, (double[]){0.25, 0.14285715},
                         (double[]){-0.0625, -0.14285715});
    }
}

static void test_oracle_matmul(void) {
    for (int k = 0; k < 2; k++) {
        cn_tensor *A = leaf(devices[k], (double[]){1, 7, 2, 3}, 2, 2);
        cn_tensor *B = leaf(devices[k], (double[]){4, 7, 2, 3}, 2, 2);
        cn_tensor *Y = cn_matmul(A, B);
        cn_grads *g = cn_backward(Y);
        check_grad("5 matmul gA", g, A, (double[]){11, 5, 11, 5}, 4, 1e-4);
        check_grad("5 matmul gB", g, B, (double[]){3, 3, 10, 10}, 4, 1e-4);
        cn_grads_free(g);
        cn_release(Y);
        cn_release(A);
        cn_release(B);
    }
}

static void test_oracle_chains(void) {
    for (int k = 0; k < 2; k++) {
        cn_device d = devices[k];
        cn_tensor *d1 = leaf(d, (double[]){1, 7, 13, -3}, 2, 2);
        cn_tensor *d2 = leaf(d, (double[]){4, 7, 2, 3}, 2, 2);
        cn_tensor *d3 = leaf(d, (double[]){2, 2, 2, 2}, 2, 2);
        cn_scope_begin();
        cn_tensor *y = cn_mul(d1, cn_mul(cn_mul(d1, d2), d3));
        cn_grads *g = cn_backward(y);
        check_grad("6 mul chain g1", g, d1, (double[]){16, 196, 104, -36}, 4, 1e-4);
        check_grad("6 mul chain g2", g, d2, (double[]){2, 98, 338, 18}, 4, 1e-4);
        cn_grads_free(g);
        y = cn_div(cn_div(d1, d2), d3);
        g = cn_backward(y);
        check_grad("7 div chain g1", g, d1, (double[]){0.125, 0.07142857, 0.25, 0.16666667}, 4,
                   1e-4);
        check_grad("7 div chain g2", g, d2, (double[]){-0.03125, -0.07142857, -1.625, 0.16666667},
                   4, 1e-4);
        check_grad("7 div chain g3", g, d3, (double[]){-0.0625, -0.25, -1.625, 0.25}, 4, 1e-4);
        cn_grads_free(g);
        cn_scope_end();
        cn_release(d1);
        cn_release(d2);
        cn_release(d3);
    }
}

static void test_oracle_relu_and_mean(void) {
    for (int k = 0; k < 2; k++) {
        cn_device d = devices[k];
        cn_tensor *X = leaf(d, (double[]){1, 7, -2, -3}, 2, 2);
        cn_tensor *W = leaf(d, (double[]){4, -7, 2, 3}, 2, 2);
        cn_scope_begin();
        cn_grads *g = cn_backward(cn_matmul(cn_relu(cn_matmul(X, W)), W));
        check_grad("8 relu gX", g, X, (double[]){-47, 9, -35, 15}, 4, 1e-4);
        check_grad("8 relu gW", g, W, (double[]){15, 13, -2, 39}, 4, 1e-4);
        cn_grads_free(g);
        int64_t one[2] = {1, 1};
        g = cn_backward(cn_mul(X, cn_reshape(cn_mean(cn_matmul(X, W)), one, 2)));
        check_grad("9 mean gX", g, X, (double[]){3.5, 9.5, 3.5, 9.5}, 4, 1e-4);
        check_grad("9 mean gW", g, W, (double[]){-0.75, -0.75, 3, 3}, 4, 1e-4);
        cn_grads_free(g);
        cn_scope_end();
        cn_release(X);
        cn_release(W);
    }
}

static void test_exp_and_sigmoid_edge(void) {
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = vec2(devices[k], -90, 1.5);
        cn_scope_begin();
        cn_grads *g = cn_backward(cn_sigmoid(x));
        double s = 1 / (1 + exp(-1.5));
        check_grad("sigmoid at -90 is 0, not NaN", g, x, (double[]){0, s * (1 - s)}, 2, 1e-4);
        cn_grads_free(g);
        g = cn_backward(cn_exp(x));
        check_grad("exp", g, x, (double[]){exp(-90.0), exp(1.5)}, 2, 1e-3);
        cn_grads_free(g);
        cn_scope_end();
        cn_release(x);
    }
}

static void test_broadcast_gradient_is_reduced(void) {
    cn_device d = devices[0];
    double av[6] = {1, 2, 3, 4, 5, 6};
    cn_tensor *a = leaf(d, av, 2, 3);
    cn_tensor *b = leaf(d, (double[]){10, 20, 30}, 1, 3);
    cn_scope_begin();
    cn_grads *g = cn_backward(cn_mul(a, b));
    check_grad("broadcast gb sums rows", g, b, (double[]){5, 7, 9}, 3, 1e-6);
    check_grad("broadcast ga", g, a, (double[]){10, 20, 30, 10, 20, 30}, 6, 1e-6);
    cn_grads_free(g);
    cn_scope_end();
    cn_release(a);
    cn_release(b);
}

static void test_plain_float_is_constant_and_int_keeps_context(void) {
    cn_device ad = devices[0];
    cn_tensor *w = vec2(ad, 3, 4);
    float cv[2] = {2, 5};
    int64_t n = 2;
    cn_tensor *c = cn_from_data(cv, &n, 1, CN_F32, cn_cpu()); /* plain: a constant */
    cn_scope_begin();
    cn_tensor *y = cn_mul(w, c);
    CHECK(cn_requires_grad(y) && cn_device_of(y).autodiff);
    cn_grads *g = cn_backward(y);
    check_grad("constant operand", g, w, (double[]){2, 5}, 2, 0);
    CHECK(cn_grad(g, c) == NULL && cn_last_status() == CN_ERR_AUTODIFF_NO_GRAD);
    cn_clear_error();
    cn_grads_free(g);
    /* int tensors stay on the autodiff device: casting back gives an autodiff float */
    cn_tensor *i = cn_argmax_dim(cn_reshape(w, (int64_t[]){1, 2}, 2), 1, 0);
    CHECK(cn_dtype_of(i) == CN_I64 && cn_device_of(i).autodiff && !cn_requires_grad(i));
    cn_tensor *f = cn_cast(i, CN_F32);
    CHECK(cn_device_of(f).autodiff && cn_kind_of(f) == CN_KIND_FLOAT);
    cn_scope_end();
    cn_release(w);
    cn_release(c);
}

static void test_no_grad_detach_inner(void) {
    cn_device ad = devices[0];
    cn_tensor *w = vec2(ad, 1, 2);
    cn_scope_begin();
    cn_no_grad_begin();
    cn_no_grad_begin();
    CHECK(!cn_grad_enabled());
    cn_no_grad_end();
    cn_tensor *y = cn_mul(w, w);
    CHECK(!cn_requires_grad(y));
    cn_no_grad_end();
    CHECK(cn_grad_enabled());
    cn_tensor *d = cn_detach(w);
    CHECK(!cn_requires_grad(d) && cn_device_eq(cn_device_of(d), ad));
    cn_tensor *inner = cn_inner(w);
    CHECK(!cn_device_of(inner).autodiff && !cn_requires_grad(inner));
    th_check_values("inner shares data", inner, (double[]){1, 2}, 2, 0);
    cn_tensor *back = cn_from_inner(inner, ad);
    CHECK(back && cn_device_of(back).autodiff && !cn_requires_grad(back));
    cn_scope_end();
    cn_release(w);
}

static void test_retain_grad(void) {
    cn_device ad = devices[0];
    cn_tensor *x = vec2(ad, 3, -1);
    cn_scope_begin();
    cn_tensor *h = cn_retain_grad(cn_mul(x, x));       /* h = x^2 */
    cn_grads *g = cn_backward(cn_mul_scalar(h, 5));    /* y = 5 h */
    check_grad("retained dy/dh", g, h, (double[]){5, 5}, 2, 0);
    check_grad("dy/dx", g, x, (double[]){30, -10}, 2, 1e-6);
    cn_grads_free(g);
    cn_scope_end();
    cn_release(x);
}

static void test_errors(void) {
    cn_device ad = devices[0];
    float v[2] = {1, 2};
    int64_t n = 2;
    cn_tensor *plain = cn_from_data(v, &n, 1, CN_F32, ad);
    cn_clear_error();
    CHECK(cn_backward(plain) == NULL && cn_last_status() == CN_ERR_AUTODIFF_NO_GRAD);
    CHECK(strstr(cn_last_error(), "backward") && strstr(cn_last_error(), "cn_require_grad"));
    cn_clear_error();
    cn_tensor *concrete = cn_from_data(v, &n, 1, CN_F32, cn_cpu());
    CHECK_FAILS(cn_require_grad(concrete), CN_ERR_AUTODIFF_DEVICE, "cn_autodiff");
    cn_tensor *iv = cn_cast(plain, CN_I32);
    CHECK_FAILS(cn_require_grad(iv), CN_ERR_KIND, "require_grad");

    /* in-place change of a saved tensor: backward fails, nothing is lost */
    cn_tensor *w = vec2(ad, 3, 4), *x = vec2(ad, 5, 6);
    cn_scope_begin();
    cn_tensor *y = cn_sum(cn_mul(w, x));
    cn_clear_error();
    CHECK(cn_copy_(x, w) == CN_ERR_AUTODIFF_INPLACE);
    cn_clear_error();
    cn_no_grad_begin();
    CHECK(cn_copy_(x, w) == CN_OK);
    cn_no_grad_end();
    cn_clear_error();
    CHECK(cn_backward(y) == NULL && cn_last_status() == CN_ERR_AUTODIFF_MODIFIED);
    CHECK(strstr(cn_last_error(), "mul") != NULL);
    cn_clear_error();

    /* a second backward through a consumed graph */
    cn_tensor *z = cn_sum(cn_mul(w, w));
    cn_grads *g = cn_backward(z);
    CHECK(g != NULL);
    cn_grads_free(g);
    cn_clear_error();
    CHECK(cn_backward(z) == NULL && cn_last_status() == CN_ERR_AUTODIFF_GRAPH);
    cn_clear_error();
    cn_scope_end();

    /* different checkpointing strategies do not mix */
    cn_tensor *other = vec2(devices[1], 1, 1);
    CHECK_FAILS(cn_add(w, other), CN_ERR_CHECKPOINT_MISMATCH, "checkpointing");
    cn_release(other);
    cn_release(w);
    cn_release(x);
    cn_release(iv);
    cn_release(plain);
    cn_release(concrete);
}

/* The gradient of prod is the product of the other entries, zeros included (hand-computed, as
 * PyTorch gives): rows with no zero, one zero and two zeros, along a dim and over everything. */
static void test_prod_gradient_with_zeros(void) {
    for (int k = 0; k < 2; k++) {
        cn_scope_begin();
        const double xv[9] = {2, 3, 4, 2, 0, 5, 0, 7, 0};
        const int64_t s[2] = {3, 3};
        cn_tensor *x = cn_require_grad(cn_from_inner(th_tensor(xv, s, 2, CN_F64), devices[k]));
        cn_grads *g = cn_backward(cn_sum(cn_prod_dim(x, 1, 0)));
        const double want[9] = {12, 8, 6, 0, 10, 0, 0, 0, 0};
        check_grad("prod_dim with zeros", g, x, want, 9, 1e-12);
        cn_grads_free(g);
        const double one[4] = {2, 0, 3, 5};
        const int64_t s4[1] = {4};
        cn_tensor *y = cn_require_grad(cn_from_inner(th_tensor(one, s4, 1, CN_F64), devices[k]));
        g = cn_backward(cn_prod(y));
        const double want1[4] = {0, 30, 0, 0};
        check_grad("prod with one zero", g, y, want1, 4, 1e-12);
        cn_grads_free(g);
        cn_scope_end();
    }
}

/* The gradient-ready hook (cn_set_grad_ready_hook): called once per leaf, after every
 * contribution to its gradient is summed, with the gradient the cn_grads then holds. Hand
 * computed: loss = sum(a * b + a * a + 3 b) with a = [1, 2], b = [3, 4] gives da = b + 2a =
 * [5, 8] and db = a + 3 = [4, 5]. */
typedef struct hook_log {
    int calls;
    double seen[2];
    cn_tensor *grad; /* the tensor the hook was given */
    cn_status answer;
} hook_log;

static cn_status log_hook(cn_tensor *grad, void *ctx) {
    hook_log *h = ctx;
    h->calls++;
    h->grad = grad;
    if (cn_read(grad, h->seen, sizeof h->seen) != CN_OK) return cn_last_status();
    if (h->answer != CN_OK) return cn_set_error(h->answer, "test_hook", "refused on purpose");
    return CN_OK;
}

static void test_grad_ready_hook(void) {
    cn_device dev = cn_autodiff(cn_cpu());
    int64_t n = 2;
    double av[2] = {1, 2}, bv[2] = {3, 4};
    cn_tensor *a = cn_require_grad(cn_from_data(av, &n, 1, CN_F64, dev));
    cn_tensor *b = cn_require_grad(cn_from_data(bv, &n, 1, CN_F64, dev));
    hook_log ha = {0}, hb = {0};
    CHECK(cn_set_grad_ready_hook(a, log_hook, &ha) == CN_OK);
    CHECK(cn_set_grad_ready_hook(b, log_hook, &hb) == CN_OK);
    cn_scope_begin();
    cn_tensor *loss = cn_sum(cn_add(cn_add(cn_mul(a, b), cn_mul(a, a)), cn_mul_scalar(b, 3)));
    cn_grads *g = cn_backward(loss);
    CHECK(g != NULL);
    CHECK(ha.calls == 1 && hb.calls == 1);
    CHECK(ha.seen[0] == 5 && ha.seen[1] == 8);
    CHECK(hb.seen[0] == 4 && hb.seen[1] == 5);
    CHECK(g && ha.grad == cn_grad(g, a) && hb.grad == cn_grad(g, b));
    cn_grads_free(g);

    /* a hook's error fails that backward with its status, and the graph stays usable */
    hb.answer = CN_ERR_BACKEND;
    cn_tensor *loss2 = cn_sum(cn_mul(a, b));
    cn_clear_error();
    CHECK(cn_backward(loss2) == NULL);
    CHECK(cn_last_status() == CN_ERR_BACKEND && strstr(cn_last_error(), "refused on purpose"));
    cn_clear_error();
    hb.answer = CN_OK;
    g = cn_backward(loss2);
    CHECK(g != NULL && hb.seen[0] == 1 && hb.seen[1] == 2);
    cn_grads_free(g);

    /* removed: not called again; only leaves take one */
    int before = ha.calls;
    CHECK(cn_set_grad_ready_hook(a, NULL, NULL) == CN_OK);
    g = cn_backward(cn_sum(cn_mul(a, b)));
    CHECK(g != NULL && ha.calls == before);
    cn_grads_free(g);
    CHECK_STATUS_FAILS(cn_set_grad_ready_hook(cn_mul(a, b), log_hook, &ha),
                       CN_ERR_AUTODIFF_NO_GRAD, "computed from one");
    CHECK_STATUS_FAILS(cn_set_grad_ready_hook(cn_ones(&n, 1, CN_F64, dev), log_hook, &ha),
                       CN_ERR_AUTODIFF_NO_GRAD, "cn_require_grad");
    CHECK_STATUS_FAILS(cn_set_grad_ready_hook(NULL, log_hook, &ha), CN_ERR_NULL_ARG, "t");
    cn_scope_end();
    (void)loss;
    cn_release(a);
    cn_release(b);
}

/* cn_grads_new / cn_grads_set: gradients from elsewhere, read back by cn_grad as copies, and an
 * optimizer step from them: SGD without momentum moves w by -lr * g (hand computed). */
static void test_grads_set(void) {
    cn_device dev = cn_autodiff(cn_cpu());
    int64_t n = 2;
    double wv[2] = {1, -1}, gv[2] = {0.5, 2}, got[2];
    cn_tensor *w = cn_require_grad(cn_from_data(wv, &n, 1, CN_F64, dev));
    cn_tensor *g = cn_from_data(gv, &n, 1, CN_F64, cn_cpu());
    cn_grads *grads = cn_grads_new();
    CHECK(grads && cn_grads_set(grads, w, g) == CN_OK);
    CHECK(cn_grad(grads, w) != g && cn_read(cn_grad(grads, w), got, sizeof got) == CN_OK);
    CHECK(got[0] == 0.5 && got[1] == 2);
    gv[0] = 4; /* replacing */
    cn_tensor *g2 = cn_from_data(gv, &n, 1, CN_F64, cn_cpu());
    CHECK(cn_grads_set(grads, w, g2) == CN_OK);
    cn_param p = {"w", w};
    cn_optimizer *opt = cn_sgd_new(&p, 1, 0.5, 0, 0, 0, 0);
    CHECK(opt && cn_optimizer_step(opt, grads) == CN_OK);
    CHECK(cn_read(w, got, sizeof got) == CN_OK && got[0] == 1 - 0.5 * 4 && got[1] == -1 - 0.5 * 2);
    cn_optimizer_free(opt);
    int64_t three = 3;
    cn_tensor *bad_shape = cn_ones(&three, 1, CN_F64, cn_cpu());
    cn_tensor *bad_dtype = cn_ones(&n, 1, CN_F32, cn_cpu());
    CHECK_STATUS_FAILS(cn_grads_set(grads, w, bad_shape), CN_ERR_SHAPE, "shape of 't'");
    CHECK_STATUS_FAILS(cn_grads_set(grads, w, bad_dtype), CN_ERR_DTYPE, "dtype of 't'");
    CHECK_STATUS_FAILS(cn_grads_set(grads, g, g), CN_ERR_AUTODIFF_NO_GRAD, "not tracked");
    CHECK_STATUS_FAILS(cn_grads_set(NULL, w, g), CN_ERR_NULL_ARG, "grads");
    CHECK(cn_read(cn_grad(grads, w), got, sizeof got) == CN_OK && got[0] == 4); /* unchanged */
    cn_grads_free(grads);
    cn_release(bad_shape);
    cn_release(bad_dtype);
    cn_release(g);
    cn_release(g2);
    cn_release(w);
}

int main(void) {
    devices[0] = cn_autodiff(cn_cpu());
    devices[1] = cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED);
    RUN(test_oracle_elementwise);
    RUN(test_oracle_matmul);
    RUN(test_oracle_chains);
    RUN(test_oracle_relu_and_mean);
    RUN(test_exp_and_sigmoid_edge);
    RUN(test_broadcast_gradient_is_reduced);
    RUN(test_plain_float_is_constant_and_int_keeps_context);
    RUN(test_no_grad_detach_inner);
    RUN(test_retain_grad);
    RUN(test_errors);
    RUN(test_prod_gradient_with_zeros);
    RUN(test_grad_ready_hook);
    RUN(test_grads_set);
    return th_finish();
}
