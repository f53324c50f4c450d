/* The fused convolutions against their definitions, bit for bit on the CPU in values and in
 * every gradient (autodiff of sum(y * R)):
 * - conv2d_relu = relu(conv2d(...)), NaN passing through the relu;
 * - conv2d_max_pool2d = max_pool2d(conv2d(...)) over k x k windows at stride k, with ties, NaN,
 *   sizes that leave rows and columns out of the last window, groups, threaded batches;
 * - Sequential's rewrites (Conv2d+ReLU fused; ReLU+MaxPool2d run as pool then relu;
 *   Conv2d[+ReLU]+MaxPool2d fused), keeping parameter names;
 * and errors naming the fused ops. PyTorch's values and finite differences are in
 * test_op_table (the conv2d_relu and conv2d_max_pool2d cases). */
#include <math.h>

#include "dispatch/backward_ops.h"
#include "harness.h"

static uint64_t rng_state = 0x243f6a8885a308d3ull;

static cn_tensor *rand_tensor(const int64_t *shape, int ndim, cn_dtype dt, cn_device dev) {
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= shape[i];
    double *v = th_alloc_doubles(n);
    for (int64_t i = 0; i < n; i++) v[i] = ((double)th_lcg(&rng_state) / 2147483648.0 - 0.5) * 2;
    cn_tensor *t = th_tensor(v, shape, ndim, dt);
    free(v);
    cn_tensor *d = cn_to_device(t, dev);
    cn_release(t);
    return th_own(d);
}

/* Checks a and b hold the same values bit for bit (NaN matching NaN). */
static void check_same(const char *what, cn_tensor *a, cn_tensor *b) {
    if (!a || !b || cn_numel(a) != cn_numel(b)) {
        fprintf(stderr, "%s: missing or mismatched (%s)\n", what, cn_last_error());
        th_checks_failed++;
        return;
    }
    double *va = th_values(a), *vb = th_values(b);
    for (int64_t i = 0; i < cn_numel(a); i++)
        if (!(va[i] == vb[i] && signbit(va[i]) == signbit(vb[i])) && !(isnan(va[i]) && isnan(vb[i]))) {
            fprintf(stderr, "%s[%lld]: %.17g, want %.17g\n", what, (long long)i, va[i], vb[i]);
            th_checks_failed++;
            break;
        }
    free(va);
    free(vb);
}

typedef struct geom {
    const char *name;
    int64_t x[4], w[4];
    cn_conv2d_params p;
    int bias;
} geom;

static const geom geoms[] = {
    {"cnn conv1 (threaded, 1 channel)", {64, 1, 28, 28}, {32, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 1},
    {"cnn conv2", {8, 32, 14, 14}, {64, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 1},
    {"stride, dilation, groups, no bias", {2, 4, 9, 8}, {6, 2, 3, 2}, {{2, 1}, {1, 0}, {1, 2}, 2}, 0},
    {"1x1 in place", {3, 5, 4, 6}, {7, 5, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, 1},
};

static void test_values_and_gradients_match_the_two_ops(void) {
    for (size_t k = 0; k < sizeof geoms / sizeof geoms[0]; k++)
        for (int d = 0; d < 2; d++) {
            const geom *G = &geoms[k];
            cn_dtype dt = d ? CN_F64 : CN_F32;
            cn_device ad = cn_autodiff(cn_cpu());
            cn_tensor *x = cn_require_grad(rand_tensor(G->x, 4, dt, ad));
            cn_tensor *w = cn_require_grad(rand_tensor(G->w, 4, dt, ad));
            cn_tensor *b = G->bias ? cn_require_grad(rand_tensor(&G->w[0], 1, dt, ad)) : NULL;
            cn_tensor *fused = th_own(cn_conv2d_relu(x, w, b, &G->p));
            cn_tensor *conv = th_own(cn_conv2d(x, w, b, &G->p));
            cn_tensor *two = th_own(cn_relu(conv));
            check_same(G->name, fused, two);
            /* gradients of sum(y * R), R a fixed random tensor */
            cn_tensor *r = fused ? rand_tensor(cn_shape(fused), 4, dt, cn_cpu()) : NULL;
            cn_tensor *ra = r ? th_own(cn_to_device(r, ad)) : NULL;
            cn_grads *gf = cn_backward(th_own(cn_sum(th_own(cn_mul(fused, ra)))));
            cn_grads *gt = cn_backward(th_own(cn_sum(th_own(cn_mul(two, ra)))));
            CHECK(gf && gt);
            if (gf && gt) {
                check_same("grad x", cn_grad(gf, x), cn_grad(gt, x));
                check_same("grad w", cn_grad(gf, w), cn_grad(gt, w));
                if (b) check_same("grad b", cn_grad(gf, b), cn_grad(gt, b));
            }
            cn_grads_free(gf);
            cn_grads_free(gt);
            th_release_owned();
        }
}

/* conv2d_max_pool2d against max_pool2d(conv2d(...)) with its k x k windows at stride k. */
static void test_conv_max_pool_matches_the_two_ops(void) {
    typedef struct {
        const char *name;
        int64_t x[4], w[4];
        cn_conv2d_params p;
        int64_t k;
        int bias, eighths;
    } pcase;
    static const pcase cases[] = {
        {"cnn conv1 (threaded)", {64, 1, 28, 28}, {32, 1, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 2, 1, 0},
        {"cnn conv2", {8, 32, 14, 14}, {64, 32, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}, 2, 1, 0},
        {"ties (eighths, 1x1)", {2, 2, 6, 6}, {3, 2, 1, 1}, {{1, 1}, {0, 0}, {1, 1}, 1}, 2, 0, 1},
        {"k 3, rows and columns left over", {2, 3, 11, 8}, {4, 3, 2, 2}, {{1, 1}, {0, 0}, {1, 1}, 1}, 3, 1, 0},
        {"groups, stride, dilation, odd sizes", {3, 4, 13, 9}, {6, 2, 3, 2}, {{2, 1}, {1, 0}, {1, 2}, 2}, 2, 0, 0},
        {"k 5", {1, 2, 12, 11}, {2, 2, 2, 2}, {{1, 1}, {1, 1}, {1, 1}, 1}, 5, 1, 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 2; d++) {
            const pcase *P = &cases[c];
            cn_dtype dt = d ? CN_F64 : CN_F32;
            cn_device ad = cn_autodiff(cn_cpu());
            cn_tensor *x, *w;
            if (P->eighths) { /* small integers over 8: exact products, many equal outputs */
                int64_t nx = P->x[0] * P->x[1] * P->x[2] * P->x[3];
                double *v = th_alloc_doubles(nx);
                for (int64_t i = 0; i < nx; i++)
                    v[i] = (double)((int64_t)(th_lcg(&rng_state) % 5) - 2) / 8;
                x = th_own(th_tensor(v, P->x, 4, dt));
                free(v);
                x = th_own(cn_to_device(x, ad));
                double wv[64];
                for (int i = 0; i < 64; i++) wv[i] = (double)(i % 3) - 1;
                w = th_own(cn_to_device(th_own(th_tensor(wv, P->w, 4, dt)), ad));
            } else {
                x = rand_tensor(P->x, 4, dt, ad);
                w = rand_tensor(P->w, 4, dt, ad);
            }
            x = cn_require_grad(x);
            w = cn_require_grad(w);
            cn_tensor *b = P->bias ? cn_require_grad(rand_tensor(&P->w[0], 1, dt, ad)) : NULL;
            const cn_pool2d_params pp = {{P->k, P->k}, {P->k, P->k}, {0, 0}};
            cn_tensor *fused = th_own(cn_conv2d_max_pool2d(x, w, b, &P->p, P->k));
            cn_tensor *two = th_own(cn_max_pool2d(th_own(cn_conv2d(x, w, b, &P->p)), &pp));
            check_same(P->name, fused, two);
            cn_tensor *r = fused ? rand_tensor(cn_shape(fused), 4, dt, ad) : NULL;
            cn_grads *gf = cn_backward(th_own(cn_sum(th_own(cn_mul(fused, r)))));
            cn_grads *gt = cn_backward(th_own(cn_sum(th_own(cn_mul(two, r)))));
            CHECK(gf && gt);
            if (gf && gt) {
                check_same("pool grad x", cn_grad(gf, x), cn_grad(gt, x));
                check_same("pool grad w", cn_grad(gf, w), cn_grad(gt, w));
                if (b) check_same("pool grad b", cn_grad(gf, b), cn_grad(gt, b));
            }
            cn_grads_free(gf);
            cn_grads_free(gt);
            /* untracked (the concrete route, no choices kept): the same values */
            cn_tensor *xc = th_own(cn_to_device(x, cn_cpu())), *wc = th_own(cn_to_device(w, cn_cpu()));
            cn_tensor *bc = b ? th_own(cn_to_device(b, cn_cpu())) : NULL;
            check_same("pool, concrete", th_own(cn_conv2d_max_pool2d(xc, wc, bc, &P->p, P->k)),
                       two);
            th_release_owned();
        }
}

/* A NaN in a window is its choice, as in max_pool2d: the value is NaN, the gradient goes there. */
static void test_conv_max_pool_nan(void) {
    double xv[16] = {1, 2, 3, 4, 5, NAN, 7, 8, -1, -2, -3, -4, -5, -6, NAN, NAN}, wv[1] = {1};
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = cn_require_grad(th_own(cn_to_device(
        th_own(th_tensor(xv, (int64_t[]){1, 1, 4, 4}, 4, CN_F32)), ad)));
    cn_tensor *w = th_own(cn_to_device(th_own(th_tensor(wv, (int64_t[]){1, 1, 1, 1}, 4, CN_F32)), ad));
    const cn_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}};
    cn_tensor *fused = th_own(cn_conv2d_max_pool2d(x, w, NULL, NULL, 2));
    cn_tensor *two = th_own(cn_max_pool2d(th_own(cn_conv2d(x, w, NULL, NULL)), &pp));
    th_check_values("nan pool", fused, (double[]){NAN, 8, -1, NAN}, 4, 0);
    check_same("nan pool vs two ops", fused, two);
    cn_grads *gf = cn_backward(th_own(cn_sum(fused)));
    cn_grads *gt = cn_backward(th_own(cn_sum(two)));
    if (gf && gt) check_same("nan pool grad", cn_grad(gf, x), cn_grad(gt, x));
    cn_grads_free(gf);
    cn_grads_free(gt);
    th_release_owned();
}

/* relu keeps NaN (v < 0 ? 0 : v), in the fused op as in relu's kernel. */
static void test_nan_passes_through(void) {
    double xv[4] = {1, NAN, 2, -3}, wv[1] = {1};
    cn_tensor *x = th_own(th_tensor(xv, (int64_t[]){1, 1, 2, 2}, 4, CN_F32));
    cn_tensor *w = th_own(th_tensor(wv, (int64_t[]){1, 1, 1, 1}, 4, CN_F32));
    th_check_values("nan", th_own(cn_conv2d_relu(x, w, NULL, NULL)), (double[]){1, NAN, 2, 0}, 4,
                    0);
    th_release_owned();
}

/* Sequential(Conv2d, ReLU, MaxPool2d, Conv2d, ReLU) (the pool before the first relu, the second
 * conv and relu fused) gives the unfused ops' values and gradients, and its parameters keep
 * their names ("0.weight", "3.bias"). */
static void test_sequential_fuses_conv_and_relu(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    cn_generator g = cn_generator_new(7), *gen = &g;
    const cn_conv2d_params same = {.padding = {1, 1}};
    const cn_pool2d_params pool2 = {.kernel = {2, 2}, .stride = {2, 2}};
    cn_module *layers[5] = {
        cn_conv2d_new(2, 4, 3, 3, &same, 1, ad, CN_F32, gen), cn_activation_new(CN_ACT_RELU),
        cn_max_pool2d_new(&pool2), cn_conv2d_new(4, 3, 3, 3, &same, 1, ad, CN_F32, gen),
        cn_activation_new(CN_ACT_RELU)};
    cn_module *net = cn_sequential_new(layers, 5);
    CHECK(net != NULL);
    if (!net) return;
    cn_tensor *w0 = cn_module_find(net, "0.weight"), *b0 = cn_module_find(net, "0.bias");
    cn_tensor *w3 = cn_module_find(net, "3.weight"), *b3 = cn_module_find(net, "3.bias");
    CHECK(w0 && b0 && w3 && b3);
    cn_tensor *x = cn_require_grad(rand_tensor((int64_t[]){3, 2, 6, 6}, 4, CN_F32, ad));
    cn_tensor *y = th_own(cn_module_forward(net, x));
    cn_tensor *h = th_own(cn_relu(th_own(cn_conv2d(x, w0, b0, &same))));
    h = th_own(cn_max_pool2d(h, &pool2));
    cn_tensor *want = th_own(cn_relu(th_own(cn_conv2d(h, w3, b3, &same))));
    check_same("sequential forward", y, want);
    cn_grads *gy = cn_backward(th_own(cn_sum(th_own(cn_mul(y, y)))));
    cn_grads *gw = cn_backward(th_own(cn_sum(th_own(cn_mul(want, want)))));
    CHECK(gy && gw);
    if (gy && gw) {
        check_same("sequential grad x", cn_grad(gy, x), cn_grad(gw, x));
        check_same("sequential grad 0.weight", cn_grad(gy, w0), cn_grad(gw, w0));
        check_same("sequential grad 0.bias", cn_grad(gy, b0), cn_grad(gw, b0));
        check_same("sequential grad 3.weight", cn_grad(gy, w3), cn_grad(gw, w3));
        check_same("sequential grad 3.bias", cn_grad(gy, b3), cn_grad(gw, b3));
    }
    cn_grads_free(gy);
    cn_grads_free(gw);
    th_release_owned();
    cn_module_free(net);
}

/* Sequential(ReLU, MaxPool2d) runs the pool first: the same values and gradients as relu then
 * pool, with ties (values k/4 for k in -4..4), windows that padding clips, and all-negative
 * windows. */
static void test_sequential_commutes_relu_and_max_pool(void) {
    const cn_pool2d_params pools[2] = {{.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1}},
                                       {.kernel = {2, 2}, .stride = {2, 2}}};
    for (int k = 0; k < 2; k++) {
        cn_device ad = cn_autodiff(cn_cpu());
        cn_module *layers[2] = {cn_activation_new(CN_ACT_RELU), cn_max_pool2d_new(&pools[k])};
        cn_module *net = cn_sequential_new(layers, 2);
        CHECK(net != NULL);
        if (!net) return;
        int64_t n = 2 * 3 * 7 * 8;
        double *v = th_alloc_doubles(n);
        for (int64_t i = 0; i < n; i++) v[i] = (double)((int64_t)(th_lcg(&rng_state) % 9) - 4) / 4;
        for (int64_t i = 0; i < 8; i++) v[i] = -1; /* the first row all negative */
        cn_tensor *x0 = th_own(th_tensor(v, (int64_t[]){2, 3, 7, 8}, 4, CN_F32));
        free(v);
        cn_tensor *x = cn_require_grad(th_own(cn_to_device(x0, ad)));
        cn_tensor *y = th_own(cn_module_forward(net, x));
        cn_tensor *want = th_own(cn_max_pool2d(th_own(cn_relu(x)), &pools[k]));
        check_same("relu, max pool", y, want);
        cn_tensor *r = want ? rand_tensor(cn_shape(want), 4, CN_F32, ad) : NULL;
        cn_grads *gy = cn_backward(th_own(cn_sum(th_own(cn_mul(y, r)))));
        cn_grads *gw = cn_backward(th_own(cn_sum(th_own(cn_mul(want, r)))));
        CHECK(gy && gw);
        if (gy && gw) check_same("relu, max pool: grad x", cn_grad(gy, x), cn_grad(gw, x));
        cn_grads_free(gy);
        cn_grads_free(gw);
        th_release_owned();
        cn_module_free(net);
    }
}

/* A window larger than the convolution's output: max_pool2d's error, as the two ops give; a k
 * outside 2..15 names the fused op; the backward's choices must be u8 of g's shape. */
static void test_conv_max_pool_errors(void) {
    cn_tensor *x = rand_tensor((int64_t[]){1, 2, 4, 4}, 4, CN_F32, cn_cpu());
    cn_tensor *w = rand_tensor((int64_t[]){2, 2, 3, 3}, 4, CN_F32, cn_cpu());
    CHECK_FAILS(cn_conv2d_max_pool2d(x, w, NULL, NULL, 3), CN_ERR_SHAPE, "max_pool2d");
    CHECK_FAILS(cn_conv2d_max_pool2d(x, w, NULL, NULL, 1), CN_ERR_INVALID_ARG,
                "conv2d_max_pool2d");
    CHECK_FAILS(cn_conv2d_max_pool2d(x, w, NULL, NULL, 16), CN_ERR_INVALID_ARG,
                "conv2d_max_pool2d");
    cn_tensor *g = rand_tensor((int64_t[]){1, 2, 2, 2}, 4, CN_F32, cn_cpu());
    cn_tensor *bad = th_own(cn_zeros((int64_t[]){1, 2, 2, 2}, 4, CN_I64, cn_cpu()));
    CHECK_FAILS(cn__max_pool2d_backward_index(g, bad, (int64_t[]){1, 2, 4, 4}, 2), CN_ERR_SHAPE,
                "max_pool2d_backward_index");
    cn_tensor *idx = th_own(cn_zeros((int64_t[]){1, 2, 2, 2}, 4, CN_U8, cn_cpu()));
    CHECK_FAILS(cn__max_pool2d_backward_index(g, idx, (int64_t[]){1, 2, 6, 4}, 2), CN_ERR_SHAPE,
                "max_pool2d_backward_index");
    /* by hand: choice 0 is each window's top-left element; row 4 lies past the last window */
    double *gv = th_values(g), want[40] = {0};
    for (int c = 0; c < 2; c++)
        for (int ph = 0; ph < 2; ph++)
            for (int pw = 0; pw < 2; pw++) want[c * 20 + 2 * ph * 4 + 2 * pw] = gv[c * 4 + ph * 2 + pw];
    free(gv);
    th_check_values("backward from choices", th_own(cn__max_pool2d_backward_index(
                                                 g, idx, (int64_t[]){1, 2, 5, 4}, 2)),
                    want, 40, 0);
    th_release_owned();
}

/* conv2d_max_pool2d_backward (the kernel the fused op's gradient runs on the CPU) against the
 * unfused calls: gz = max_pool2d_backward_index(g, choices), then conv2d_backward_input and
 * _weight of gz and the sum of each plane of gz (sum over dim 2 of [N, O, OH * OW]), bit for bit;
 * each output alone and all three; g a strided view; one plane of 2^16 elements (the sum split
 * across the threads, as cn_sum_dim splits a few long rows); random choices. */
static void test_conv_pool_backward_kernel_matches_the_unfused_calls(void) {
    typedef struct {
        const char *name;
        int64_t x[4], w[4], ints[8];
        int strided_g;
    } bcase;
    static const bcase cases[] = {
        {"cnn conv2 (chunked)", {8, 32, 14, 14}, {64, 32, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 2}, 0},
        {"cnn conv1, g strided", {16, 1, 28, 28}, {32, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 2}, 1},
        {"groups, stride, dilation, k 3", {3, 4, 13, 11}, {6, 2, 3, 2}, {2, 1, 1, 0, 1, 2, 2, 3}, 1},
        {"1x1 in place", {2, 5, 6, 8}, {4, 5, 1, 1}, {1, 1, 0, 0, 1, 1, 1, 2}, 0},
        {"one long plane", {1, 1, 256, 256}, {1, 1, 1, 1}, {1, 1, 0, 0, 1, 1, 1, 2}, 0},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < 2; d++) {
            const bcase *B = &cases[c];
            cn_dtype dt = d ? CN_F64 : CN_F32;
            const int64_t *q = B->ints, k = q[7];
            int64_t z[4] = {B->x[0], B->w[0],
                            cn__conv_out_size(B->x[2], B->w[2], q[0], q[2], q[4]),
                            cn__conv_out_size(B->x[3], B->w[3], q[1], q[3], q[5])};
            int64_t gs[4] = {z[0], z[1], z[2] / k, z[3] / k};
            cn_tensor *x = rand_tensor(B->x, 4, dt, cn_cpu());
            cn_tensor *w = rand_tensor(B->w, 4, dt, cn_cpu());
            cn_tensor *g = rand_tensor(gs, 4, dt, cn_cpu());
            if (B->strided_g) { /* the same values, read through a transposed copy */
                int64_t ts[4] = {gs[0], gs[1], gs[3], gs[2]};
                g = th_own(cn_transpose(th_own(cn_contiguous(th_own(cn_transpose(g, 2, 3)))),
                                        2, 3));
                CHECK(!cn_is_contiguous(g) && cn_shape(g)[2] == ts[3]);
            }
            int64_t n = gs[0] * gs[1] * gs[2] * gs[3];
            double *iv = th_alloc_doubles(n);
            for (int64_t i = 0; i < n; i++) iv[i] = (double)(th_lcg(&rng_state) % (k * k));
            cn_tensor *idx = th_own(cn_cast(th_own(th_tensor(iv, gs, 4, CN_F64)), CN_U8));
            free(iv);
            cn_tensor *gz = th_own(cn__max_pool2d_backward_index(g, idx, z, k));
            const int64_t planes[3] = {z[0], z[1], z[2] * z[3]};
            cn_tensor *want[3] = {
                th_own(cn__conv2d_backward_input(gz, w, B->x, q)),
                th_own(cn__conv2d_backward_weight(gz, x, B->w, q)),
                th_own(cn_sum_dim(th_own(cn_reshape(gz, planes, 3)), 2, 0))};
            static const char *names[3] = {"gx", "gw", "gb"};
            for (int m = 0; m < 4; m++) { /* m < 3: output m alone; 3: all three */
                const int asked[3] = {m == 0 || m == 3, m == 1 || m == 3, m == 2 || m == 3};
                cn_tensor *got[3];
                CHECK(cn__conv2d_max_pool2d_backward(g, idx, x, w, q, asked, got) == CN_OK);
                for (int i = 0; i < 3; i++) {
                    char what[160];
                    snprintf(what, sizeof what, "%s %s %s (asked %d)", B->name,
                             cn_dtype_name(dt), names[i], m);
                    if (asked[i])
                        check_same(what, th_own(got[i]), want[i]);
                    else
                        CHECK(got[i] == NULL);
                }
            }
            th_release_owned();
        }
}

/* The fused backward's misuse: each error names it, and no gradient is handed back. */
static void test_conv_pool_backward_errors(void) {
    const char *op = "conv2d_max_pool2d_backward";
    cn_tensor *x = rand_tensor((int64_t[]){1, 2, 4, 4}, 4, CN_F32, cn_cpu());
    cn_tensor *w = rand_tensor((int64_t[]){2, 2, 3, 3}, 4, CN_F32, cn_cpu());
    cn_tensor *g = rand_tensor((int64_t[]){1, 2, 1, 1}, 4, CN_F32, cn_cpu());
    cn_tensor *g64 = rand_tensor((int64_t[]){1, 2, 1, 1}, 4, CN_F64, cn_cpu());
    cn_tensor *idx = th_own(cn_zeros((int64_t[]){1, 2, 1, 1}, 4, CN_U8, cn_cpu()));
    cn_tensor *idx64 = th_own(cn_zeros((int64_t[]){1, 2, 1, 1}, 4, CN_I64, cn_cpu()));
    const int64_t ints[8] = {1, 1, 0, 0, 1, 1, 1, 2}, k16[8] = {1, 1, 0, 0, 1, 1, 1, 16};
    const int64_t pad[8] = {1, 1, 1, 1, 1, 1, 1, 2};
    const int all[3] = {1, 1, 1}, none[3] = {0, 0, 0};
    cn_tensor *got[3];
    struct {
        cn_status s;
        cn_tensor *g, *idx;
        const int64_t *ints;
        const int *want;
    } bad[] = {
        {CN_ERR_SHAPE, g, idx64, ints, all},     /* choices not u8 */
        {CN_ERR_DTYPE, g64, idx, ints, all},     /* g f64, x and w f32 */
        {CN_ERR_INVALID_ARG, g, idx, ints, none}, /* nothing asked for */
        {CN_ERR_INVALID_ARG, g, idx, k16, all},  /* k past 15 */
        {CN_ERR_SHAPE, g, idx, pad, all},        /* padding 1: z is 4 x 4, its pool 2 x 2 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        got[0] = got[1] = got[2] = x; /* overwritten with NULL */
        cn_status s = cn__conv2d_max_pool2d_backward(bad[i].g, bad[i].idx, x, w, bad[i].ints,
                                                     bad[i].want, got);
        CHECK(s == bad[i].s);
        CHECK(got[0] == NULL && got[1] == NULL && got[2] == NULL);
        CHECK(strstr(cn_last_error(), op) != NULL);
    }
    th_release_owned();
}

static void test_errors_name_the_fused_op(void) {
    cn_tensor *x = rand_tensor((int64_t[]){1, 3, 4, 4}, 4, CN_F32, cn_cpu());
    cn_tensor *w = rand_tensor((int64_t[]){2, 2, 3, 3}, 4, CN_F32, cn_cpu());
    cn_tensor *x64 = rand_tensor((int64_t[]){1, 2, 4, 4}, 4, CN_F64, cn_cpu());
    cn_tensor *xi = th_own(cn_cast(x, CN_I32));
    CHECK_FAILS(cn_conv2d_relu(x, w, NULL, NULL), CN_ERR_SHAPE, "conv2d_relu");
    CHECK_FAILS(cn_conv2d_relu(x64, w, NULL, NULL), CN_ERR_DTYPE, "conv2d_relu");
    CHECK_FAILS(cn_conv2d_relu(xi, w, NULL, NULL), CN_ERR_KIND, "conv2d_relu");
    CHECK_FAILS(cn_conv2d_relu(NULL, w, NULL, NULL), CN_ERR_NULL_ARG, "conv2d_relu");
    th_release_owned();
}

int main(void) {
    RUN(test_values_and_gradients_match_the_two_ops);
    RUN(test_nan_passes_through);
    RUN(test_conv_max_pool_matches_the_two_ops);
    RUN(test_conv_max_pool_nan);
    RUN(test_conv_max_pool_errors);
    RUN(test_conv_pool_backward_kernel_matches_the_unfused_calls);
    RUN(test_conv_pool_backward_errors);
    RUN(test_sequential_fuses_conv_and_relu);
    RUN(test_sequential_commutes_relu_and_max_pool);
    RUN(test_errors_name_the_fused_op);
    return th_finish();
}
