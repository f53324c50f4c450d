/* The fused normalisations (cn_layer_norm, cn_rms_norm) beyond the op table's small PyTorch cases
 * (tests/test_op_table.c): rows of hundreds of elements over many threads' chunks, normalised
 * over 1 and 2 dims, strided inputs, with and without weight and bias, f64 and f32, each against
 * the composed formula through public ops (mean_dim, sub, mul, rsqrt: an independent path),
 * values and the gradients of x, weight and bias; f32 rows far from zero (the two-pass variance
 * keeps its precision where E[x^2] - E[x]^2 would lose it all), against a double-precision
 * loop; a backend without the fused kernels (the composed ops, same values and gradients); the
 * modules (LayerNorm through the fused op, RMSNorm's parameter and default eps); and every
 * misuse, which leaves the inputs untouched and nothing allocated. */
#include <float.h>
#include <math.h>

#include "harness.h"

static cn_tensor *randn(uint64_t seed, const int64_t *shape, int nd, cn_dtype dt) {
    cn_generator g = cn_generator_new(seed);
    return cn_rand_normal(&g, shape, nd, 0.0, 1.0, dt, cn_cpu());
}

static cn_tensor *leaf(cn_tensor *t) {
    return t ? cn_require_grad(cn_from_inner(t, cn_autodiff(cn_cpu()))) : NULL;
}


/* The mean over x's last k dims, kept. */
static cn_tensor *trailing_mean(cn_tensor *x, int k) {
    cn_tensor *m = x;
    for (int i = 0; i < k && m; i++) m = cn_mean_dim(m, cn_ndim(x) - 1 - i, 1);
    return m;
}

/* The composed formulas through public ops (eps as given: no default here). */
static cn_tensor *composed(int rms, cn_tensor *x, int k, cn_tensor *w, cn_tensor *b, double eps) {
    cn_tensor *c = rms ? x : cn_sub(x, trailing_mean(x, k));
    cn_tensor *y = cn_mul(c, cn_rsqrt(cn_add_scalar(trailing_mean(cn_mul(c, c), k), eps)));
    if (w) y = cn_mul(y, w);
    if (b) y = cn_add(y, b);
    return y;
}

static cn_tensor *fused(int rms, cn_tensor *x, int k, cn_tensor *w, cn_tensor *b, double eps) {
    const int64_t *shape = cn_shape(x) + cn_ndim(x) - k;
    return rms ? cn_rms_norm(x, shape, k, w, eps) : cn_layer_norm(x, shape, k, w, b, eps);
}

/* x [A, B, C] (made as [A, C, B] and transposed when strided), normalised over its last k dims;
 * values, and the gradients of L = sum(y * r) for x, w and b, in both paths. */
static void compare(int rms, int64_t A, int64_t B, int64_t C, int k, int has_w, int has_b,
                    int strided, cn_dtype dt, double tol) {
    cn_scope_begin();
    int64_t xs[3] = {A, B, C}, ts[3] = {A, C, B};
    cn_tensor *x = strided ? cn_transpose(randn(1, ts, 3, dt), 1, 2) : randn(1, xs, 3, dt);
    const int64_t *ns = xs + 3 - k;
    cn_tensor *w = has_w ? cn_add_scalar(randn(2, ns, k, dt), 1.0) : NULL;
    cn_tensor *b = has_b && !rms ? randn(3, ns, k, dt) : NULL;
    cn_tensor *r = randn(4, xs, 3, dt);
    th_check_close("y", fused(rms, x, k, w, b, 1e-5), composed(rms, x, k, w, b, 1e-5), tol);
    cn_tensor *in[3] = {x, w, b}, *grads[2][3] = {{0}};
    for (int path = 0; path < 2; path++) {
        cn_tensor *l[3];
        for (int i = 0; i < 3; i++) l[i] = in[i] ? leaf(in[i]) : NULL;
        cn_tensor *y = path ? composed(rms, l[0], k, l[1], l[2], 1e-5)
                            : fused(rms, l[0], k, l[1], l[2], 1e-5);
        cn_grads *g = cn_backward(cn_sum(cn_mul(y, r)));
        CHECK(g != NULL);
        for (int i = 0; g && i < 3; i++)
            if (l[i]) {
                cn_tensor *gi = cn_grad(g, l[i]);
                grads[path][i] = gi ? cn_clone(gi) : NULL;
                CHECK(gi != NULL);
            }
        cn_grads_free(g);
    }
    const char *names[3] = {"dx", "dw", "db"};
    for (int i = 0; i < 3; i++)
        if (in[i]) th_check_close(names[i], grads[0][i], grads[1][i], tol);
    cn_scope_end();
}

/* Rows of 300 and of 7 * 300 elements, 96 of them (several chunks of the pool), f64. */
static void test_layer_norm_matches_the_composed_formula(void) {
    compare(0, 8, 12, 300, 1, 1, 1, 0, CN_F64, 1e-12);
    compare(0, 6, 7, 300, 2, 1, 1, 1, CN_F64, 1e-12);
    compare(0, 8, 12, 45, 1, 0, 1, 1, CN_F64, 1e-12);
    compare(0, 8, 12, 45, 2, 1, 0, 0, CN_F64, 1e-12);
    compare(0, 3, 5, 33, 1, 0, 0, 0, CN_F64, 1e-12);
}

static void test_rms_norm_matches_the_composed_formula(void) {
    compare(1, 8, 12, 300, 1, 1, 0, 0, CN_F64, 1e-12);
    compare(1, 6, 7, 300, 2, 1, 0, 1, CN_F64, 1e-12);
    compare(1, 8, 12, 45, 1, 0, 0, 1, CN_F64, 1e-12);
}

/* f32: sums in float over 16 lanes, within float's precision of the composed f32 path. */
static void test_f32_matches(void) {
    compare(0, 8, 12, 300, 1, 1, 1, 1, CN_F32, 2e-5);
    compare(1, 8, 12, 300, 2, 1, 0, 0, CN_F32, 2e-5);
}

/* f32 rows of 1000 values 1e4 + N(0, 1): the two-pass variance against a double loop on the same
 * float values. One pass (E[x^2] - E[x]^2 in float) would have an error near 1e8 * 2^-24 = 6,
 * six times the variance itself. */
static void test_f32_rows_far_from_zero_keep_their_precision(void) {
    cn_scope_begin();
    enum { R = 4, N = 1000 };
    const int64_t xs[2] = {R, N};
    cn_tensor *x = cn_cast(cn_add_scalar(randn(7, xs, 2, CN_F64), 1e4), CN_F32);
    double *xv = th_values(x);
    cn_tensor *y = cn_layer_norm(x, xs + 1, 1, NULL, NULL, 1e-5);
    double *yv = th_values(y);
    CHECK(xv && yv);
    double worst = 0;
    for (int r = 0; xv && yv && r < R; r++) {
        double mean = 0, var = 0;
        for (int i = 0; i < N; i++) mean += xv[r * N + i] / N;
        for (int i = 0; i < N; i++) var += (xv[r * N + i] - mean) * (xv[r * N + i] - mean) / N;
        for (int i = 0; i < N; i++) {
            double want = (xv[r * N + i] - mean) / sqrt(var + 1e-5);
            double e = fabs(yv[r * N + i] - want);
            worst = e > worst ? e : worst;
        }
    }
    printf("     f32 rows at 1e4: largest error %.3g\n", worst);
    CHECK(worst < 2e-3); /* the mean's own float rounding, 1e4 * 2^-24 ~ 6e-4, over sigma 1 */
    free(xv);
    free(yv);
    cn_scope_end();
}

/* ---- a backend without the fused kernels ---------------------------------------------------- */

/* The CPU's kernels without the four of the normalisations, as a program's backend written before
 * them would be: cn_layer_norm and cn_rms_norm compose public ops there (values and gradients as
 * the fused ops' on the CPU). */
static void test_a_backend_without_the_kernels_gets_the_composed_ops(void) {
    cn_scope_begin();
    cn_backend b = *cn_backend_get(CN_BACKEND_CPU);
    b.name = "cpu_without_norm";
    b.kernels[CN_OP_LAYER_NORM] = b.kernels[CN_OP_LAYER_NORM_BACKWARD] = NULL;
    b.kernels[CN_OP_RMS_NORM] = b.kernels[CN_OP_RMS_NORM_BACKWARD] = NULL;
    int id = cn_backend_register(&b);
    CHECK(id > 0);
    cn_device dev = {(int16_t)id, 0, 0, 0};
    const int64_t xs[3] = {3, 4, 20};
    cn_tensor *x = randn(31, xs, 3, CN_F64), *w = randn(32, xs + 1, 2, CN_F64);
    cn_tensor *bias = randn(33, xs + 1, 2, CN_F64), *r = randn(34, xs, 3, CN_F64);
    const char *names[4] = {"y", "dx", "dw", "db"};
    for (int rms = 0; rms < 2; rms++) {
        cn_tensor *got[2][4] = {{0}}; /* per backend: y, dx, dw, db (on the CPU) */
        for (int where = 0; where < 2; where++) {
            cn_device conc = where ? dev : cn_cpu(), d = cn_autodiff(conc);
            cn_tensor *in[3] = {x, w, rms ? NULL : bias}, *l[3] = {0};
            for (int i = 0; i < 3; i++)
                if (in[i]) l[i] = cn_require_grad(cn_from_inner(cn_to_device(in[i], conc), d));
            cn_tensor *y = fused(rms, l[0], 2, l[1], l[2], 1e-5);
            cn_tensor *loss = y ? cn_sum(cn_mul(y, cn_from_inner(cn_to_device(r, conc), d)))
                                : NULL;
            cn_grads *g = loss ? cn_backward(loss) : NULL;
            CHECK(g != NULL);
            got[where][0] = y ? cn_to_device(cn_inner(y), cn_cpu()) : NULL;
            for (int i = 0; g && i < 3; i++)
                if (l[i]) got[where][1 + i] = cn_to_device(cn_grad(g, l[i]), cn_cpu());
            cn_grads_free(g);
        }
        for (int i = 0; i < 4; i++)
            if (i < 3 || !rms) th_check_close(names[i], got[1][i], got[0][i], 1e-13);
    }
    cn_scope_end();
}

/* ---- modules --------------------------------------------------------------------------------- */

static void test_layernorm_module_is_the_fused_op(void) {
    cn_scope_begin();
    const int64_t xs[3] = {4, 3, 8};
    cn_tensor *x = randn(11, xs, 3, CN_F32);
    cn_module *ln = cn_layernorm_new(xs + 1, 2, 1e-5, 1, cn_cpu(), CN_F32);
    CHECK(ln != NULL);
    cn_tensor *w = cn_module_find(ln, "weight"), *b = cn_module_find(ln, "bias");
    CHECK(w && b);
    cn_tensor *y = cn_module_forward(ln, x), *want = cn_layer_norm(x, xs + 1, 2, w, b, 1e-5);
    th_check_close("LayerNorm", y, want, 0); /* bit for bit */
    cn_module_free(ln);
    cn_scope_end();
}

static void test_rmsnorm_module(void) {
    cn_scope_begin();
    const int64_t xs[2] = {5, 6};
    cn_tensor *x = randn(12, xs, 2, CN_F64);
    cn_module *m = cn_rmsnorm_new(xs + 1, 1, CN_RMS_NORM_EPS_DEFAULT, 1, cn_autodiff(cn_cpu()),
                                  CN_F64);
    CHECK(m != NULL);
    int np = -1;
    const cn_param *p = cn_module_params(m, &np);
    CHECK(np == 1 && p && strcmp(p[0].name, "weight") == 0);
    cn_tensor *w = cn_module_find(m, "weight");
    double wv[6];
    CHECK(w && th_read(w, wv) == 6);
    for (int i = 0; i < 6; i++) CHECK(wv[i] == 1.0); /* ones, as torch.nn.RMSNorm */
    cn_tensor *y = cn_module_forward(m, cn_from_inner(x, cn_autodiff(cn_cpu())));
    th_check_close("RMSNorm", y, composed(1, x, 1, NULL, NULL, DBL_EPSILON), 1e-14);
    CHECK(cn_requires_grad(y));
    cn_module_free(m);
    /* without affine: no parameter */
    m = cn_rmsnorm_new(xs + 1, 1, 1e-6, 0, cn_cpu(), CN_F32);
    CHECK(m && (cn_module_params(m, &np), np == 0));
    cn_module_free(m);
    CHECK(cn_rmsnorm_new(xs + 1, 1, -0.5, 1, cn_cpu(), CN_F32) == NULL &&
          cn_last_status() == CN_ERR_INVALID_ARG && strstr(cn_last_error(), "rmsnorm_new"));
    cn_clear_error(); /* a NULL argument keeps an earlier error (the NULL may come from it) */
    CHECK(cn_rmsnorm_new(NULL, 1, 1e-6, 1, cn_cpu(), CN_F32) == NULL &&
          cn_last_status() == CN_ERR_NULL_ARG);
    cn_clear_error();
    CHECK(cn_rmsnorm_new(xs + 1, 1, 1e-6, 1, cn_cpu(), CN_I32) == NULL &&
          cn_last_status() == CN_ERR_DTYPE);
    cn_clear_error();
    cn_scope_end();
}

/* ---- misuse ---------------------------------------------------------------------------------- */

static void test_misuse(void) {
    cn_scope_begin();
    const int64_t s234[3] = {2, 3, 4}, s34[2] = {3, 4}, s4[1] = {4}, s5[1] = {5};
    const int64_t s43[2] = {4, 3}, neg[1] = {-4};
    cn_tensor *x = randn(1, s234, 3, CN_F64), *w = randn(2, s34, 2, CN_F64);
    cn_tensor *w4 = randn(3, s4, 1, CN_F64), *w5 = randn(4, s5, 1, CN_F64);
    cn_tensor *w43 = randn(5, s43, 2, CN_F64), *wf = cn_cast(w, CN_F32);
    cn_tensor *xi = cn_cast(x, CN_I64), *wi = cn_cast(w, CN_I64);
    double before[24];
    CHECK(th_read(x, before) == 24);
    int64_t live = cn_live_tensors();
    const char *ln = "layer_norm", *rn = "rms_norm";
    CHECK_FAILS(cn_layer_norm(NULL, s34, 2, NULL, NULL, 1e-5), CN_ERR_NULL_ARG, ln);
    CHECK_FAILS(cn_layer_norm(x, NULL, 2, NULL, NULL, 1e-5), CN_ERR_NULL_ARG, "normalized_shape");
    CHECK_FAILS(cn_layer_norm(xi, s34, 2, NULL, NULL, 1e-5), CN_ERR_KIND, "'x'");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, wi, NULL, 1e-5), CN_ERR_KIND, "'weight'");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, w, wf, 1e-5), CN_ERR_DTYPE, "'bias'");
    CHECK_FAILS(cn_layer_norm(x, s34, 0, NULL, NULL, 1e-5), CN_ERR_INVALID_ARG, "ndim = 0");
    CHECK_FAILS(cn_layer_norm(x, s34, CN_MAX_DIMS + 1, NULL, NULL, 1e-5), CN_ERR_INVALID_ARG,
                "ndim");
    CHECK_FAILS(cn_layer_norm(x, neg, 1, NULL, NULL, 1e-5), CN_ERR_INVALID_ARG, ">= 0");
    CHECK_FAILS(cn_layer_norm(x, s43, 2, NULL, NULL, 1e-5), CN_ERR_SHAPE, "trailing dims");
    CHECK_FAILS(cn_layer_norm(x, s5, 1, NULL, NULL, 1e-5), CN_ERR_SHAPE, "[5]");
    CHECK_FAILS(cn_layer_norm(w4, s34, 2, NULL, NULL, 1e-5), CN_ERR_SHAPE, "trailing dims");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, w4, NULL, 1e-5), CN_ERR_SHAPE, "'weight'");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, w43, NULL, 1e-5), CN_ERR_SHAPE, "normalized_shape");
    CHECK_FAILS(cn_layer_norm(x, s4, 1, NULL, w5, 1e-5), CN_ERR_SHAPE, "'bias'");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, w, NULL, -1e-5), CN_ERR_INVALID_ARG, "eps");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, w, NULL, NAN), CN_ERR_INVALID_ARG, "eps");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, w, NULL, INFINITY), CN_ERR_INVALID_ARG, "finite");
    CHECK_FAILS(cn_layer_norm(x, s34, 2, w, NULL, CN_RMS_NORM_EPS_DEFAULT), CN_ERR_INVALID_ARG,
                "1e-5");
    CHECK_FAILS(cn_rms_norm(NULL, s34, 2, NULL, 1e-5), CN_ERR_NULL_ARG, rn);
    CHECK_FAILS(cn_rms_norm(xi, s34, 2, NULL, 1e-5), CN_ERR_KIND, rn);
    CHECK_FAILS(cn_rms_norm(x, s43, 2, NULL, 1e-5), CN_ERR_SHAPE, rn);
    CHECK_FAILS(cn_rms_norm(x, s34, 2, w4, 1e-5), CN_ERR_SHAPE, "'weight'");
    CHECK_FAILS(cn_rms_norm(x, s34, 2, wf, 1e-5), CN_ERR_DTYPE, "'weight'");
    CHECK_FAILS(cn_rms_norm(x, s34, 2, w, -0.5), CN_ERR_INVALID_ARG, "CN_RMS_NORM_EPS_DEFAULT");
    CHECK_FAILS(cn_rms_norm(x, s34, 2, w, NAN), CN_ERR_INVALID_ARG, "eps");
    /* no partial results left behind, the inputs untouched and usable */
    CHECK(cn_live_tensors() == live);
    double after[24];
    CHECK(th_read(x, after) == 24 && memcmp(before, after, sizeof before) == 0);
    CHECK(cn_layer_norm(x, s34, 2, w, NULL, 0.0) != NULL);
    CHECK(cn_rms_norm(x, s4, 1, w4, CN_RMS_NORM_EPS_DEFAULT) != NULL);
    cn_scope_end();
}

int main(void) {
    RUN(test_layer_norm_matches_the_composed_formula);
    RUN(test_rms_norm_matches_the_composed_formula);
    RUN(test_f32_matches);
    RUN(test_f32_rows_far_from_zero_keep_their_precision);
    RUN(test_a_backend_without_the_kernels_gets_the_composed_ops);
    RUN(test_layernorm_module_is_the_fused_op);
    RUN(test_rmsnorm_module);
    RUN(test_misuse);
    return th_finish();
}
