/* The code cinder-extgen generates from full.cnext, end to end through the runtime: composite
 * arguments are flattened into the documented slots (checked by stub kernels that record what
 * they receive), attributes arrive in order, union tags select members, several outputs come back
 * through out_ pointers, and the op flags reach the router. */
#include "harness.h"

#include "full.h"

/* ---- what the kernels saw ------------------------------------------------------------------ */

static struct {
    int calls, n_in, n_out;
    int present[8], ndim[8];
    int64_t ints[4];
    double reals[4];
} seen;

static struct {
    int calls;
    int present[8];
} seen_backward;

static void record(const cn_kernel_args *a) {
    seen.calls++;
    seen.n_in = a->n_in;
    seen.n_out = a->n_out;
    for (int i = 0; i < a->n_in && i < 8; i++) {
        seen.present[i] = a->in[i].data != NULL;
        seen.ndim[i] = a->in[i].ndim;
    }
    for (int i = 0; i < a->n_ints && i < 4; i++)
        seen.ints[i] = a->ints[i];
    for (int i = 0; i < a->n_reals && i < 4; i++)
        seen.reals[i] = a->reals[i];
}

/* Element i of a 0-d or 1-d view (0-d: its only element). */
static double f64_at(const cn_view *v, int64_t i) {
    return ((const double *)v->data)[v->ndim == 0 ? 0 : i * v->strides[0]];
}
static int64_t i64_at(const cn_view *v, int64_t i) {
    return ((const int64_t *)v->data)[v->ndim == 0 ? 0 : i * v->strides[0]];
}

static cn_status need_f64(const char *op, const cn_view *v, const char *name) {
    if (v->ndim >= 0 && v->dtype != CN_F64 && v->dtype != CN_I64 && v->dtype != CN_BOOL)
        return cn_set_error(CN_ERR_DTYPE, op, "the test kernels take f64, i64 and bool; %s is %s",
                            name, cn_dtype_name(v->dtype));
    return CN_OK;
}

/* ---- masked_affine ------------------------------------------------------------------------- */

cn_status full_masked_affine_shape(const cn_view *in, int n_in, const int64_t *ints,
                                   const double *reals, cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    const cn_view *x = &in[FULL_MASKED_AFFINE_IN_X];
    if (x->ndim != 1 || x->dtype != CN_F64)
        return cn_set_error(CN_ERR_SHAPE, "full_masked_affine", "x must be 1-D f64");
    if (need_f64("full_masked_affine", &in[FULL_MASKED_AFFINE_IN_P_SCALE], "p.scale") != CN_OK)
        return cn_last_status();
    out[0] = *x;
    return CN_OK;
}

cn_status full_masked_affine_cpu(const cn_kernel_args *a) {
    record(a);
    const cn_view *x = &a->in[FULL_MASKED_AFFINE_IN_X];
    const cn_view *scale = &a->in[FULL_MASKED_AFFINE_IN_P_SCALE];
    const cn_view *shift = &a->in[FULL_MASKED_AFFINE_IN_P_SHIFT];
    const cn_view *keep = &a->in[FULL_MASKED_AFFINE_IN_M_DENSE_KEEP];
    const cn_view *lo = &a->in[FULL_MASKED_AFFINE_IN_M_BAND_LO];
    const cn_view *hi = &a->in[FULL_MASKED_AFFINE_IN_M_BAND_HI];
    double fill = (double)a->ints[FULL_MASKED_AFFINE_INT_FILL];
    double eps = a->reals[FULL_MASKED_AFFINE_REAL_EPS];
    double *y = a->out[0].data;
    int64_t n = x->shape[0];
    for (int64_t i = 0; i < n; i++) {
        double v = f64_at(x, i) * f64_at(scale, i) + (shift->data ? f64_at(shift, i) : 0) + eps;
        int on = 1;
        if (keep->data) on = ((const unsigned char *)keep->data)[i * keep->strides[0]] != 0;
        if (lo->data) on = i >= i64_at(lo, 0) && (!hi->data || i < i64_at(hi, 0));
        y[i * a->out[0].strides[0]] = on ? v : fill;
    }
    return CN_OK;
}

#ifdef CINDER_HAVE_CUDA
/* full.cnext lists cuda: with the CUDA backend built, the registration needs this symbol. The
 * tests run on the CPU, so it only has to exist. */
cn_status full_masked_affine_cuda(const cn_kernel_args *a) {
    (void)a;
    return cn_set_error(CN_ERR_NO_KERNEL, "full_masked_affine", "the test has no CUDA kernel");
}
#endif

/* gx = g * scale where the mask keeps, else 0; the other inputs get no gradient. */
cn_status full_masked_affine_backward(cn_tensor *const *in, const int *needs_grad, int n_in, cn_tensor *const *out,
                                      cn_tensor *const *grad_out, int n_out, const int64_t *ints,
                                      const double *reals, cn_tensor **grad_in) {
    (void)needs_grad, (void)out, (void)n_out, (void)ints, (void)reals;
    seen_backward.calls++;
    for (int i = 0; i < n_in && i < 8; i++)
        seen_backward.present[i] = in[i] != NULL;
    cn_tensor *x = in[FULL_MASKED_AFFINE_IN_X];
    cn_tensor *keep = in[FULL_MASKED_AFFINE_IN_M_DENSE_KEEP];
    cn_tensor *lo = in[FULL_MASKED_AFFINE_IN_M_BAND_LO], *hi = in[FULL_MASKED_AFFINE_IN_M_BAND_HI];
    cn_tensor *gx = cn_mul(grad_out[0], in[FULL_MASKED_AFFINE_IN_P_SCALE]);
    cn_tensor *mask = keep ? cn_retain(keep) : NULL;
    if (lo) {
        cn_tensor *idx = cn_arange(0, (double)cn_shape(x)[0], 1, CN_I64, cn_device_of(x));
        mask = cn_ge(idx, lo);
        if (hi) {
            cn_tensor *below = cn_lt(idx, hi), *both = cn_logical_and(mask, below);
            cn_release(below);
            cn_release(mask);
            mask = both;
        }
        cn_release(idx);
    }
    if (mask) {
        cn_tensor *zero = cn_zeros(NULL, 0, CN_F64, cn_device_of(x));
        cn_tensor *masked = cn_where(mask, gx, zero);
        cn_release(zero);
        cn_release(gx);
        cn_release(mask);
        gx = masked;
    }
    if (!gx) return cn_last_status();
    grad_in[FULL_MASKED_AFFINE_IN_X] = gx;
    return CN_OK;
}

/* ---- row_stats: [R, C] -> mean [R], argmax [R], positive [R] ------------------------------- */

cn_status full_row_stats_shape(const cn_view *in, int n_in, const int64_t *ints,
                               const double *reals, cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    if (in[0].ndim != 2 || in[0].dtype != CN_F64)
        return cn_set_error(CN_ERR_SHAPE, "full_row_stats", "x must be 2-D f64");
    cn_dtype dt[3] = {CN_F64, CN_I64, CN_BOOL};
    for (int k = 0; k < 3; k++) {
        out[k].dtype = dt[k];
        out[k].ndim = 1;
        out[k].shape[0] = in[0].shape[0];
    }
    return CN_OK;
}

cn_status full_row_stats_cpu(const cn_kernel_args *a) {
    record(a);
    const cn_view *x = &a->in[0];
    for (int64_t r = 0; r < x->shape[0]; r++) {
        const double *row = (const double *)x->data + r * x->strides[0];
        double sum = 0, best = row[0];
        int64_t arg = 0;
        for (int64_t c = 0; c < x->shape[1]; c++) {
            double v = row[c * x->strides[1]];
            sum += v;
            if (v > best) best = v, arg = c;
        }
        double mean = sum / (double)x->shape[1];
        ((double *)a->out[FULL_ROW_STATS_OUT_MEAN].data)[r] = mean;
        ((int64_t *)a->out[FULL_ROW_STATS_OUT_ARGMAX].data)[r] = arg;
        ((unsigned char *)a->out[FULL_ROW_STATS_OUT_POSITIVE].data)[r] = mean > 0;
    }
    return CN_OK;
}

/* ---- both, plain, iota --------------------------------------------------------------------- */

static cn_status same_as_first(const cn_view *in, cn_view *out) {
    out[0] = in[0];
    return CN_OK;
}

cn_status full_both_shape(const cn_view *in, int n_in, const int64_t *ints, const double *reals,
                          cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    if (in[0].ndim != 1 || in[1].ndim != 1 || in[0].shape[0] != in[1].shape[0])
        return cn_set_error(CN_ERR_SHAPE, "full_both", "a and b must be 1-D of one length");
    return same_as_first(in, out);
}

cn_status full_both_cpu(const cn_kernel_args *a) {
    record(a);
    for (int64_t i = 0; i < a->in[0].shape[0]; i++)
        ((double *)a->out[0].data)[i] = f64_at(&a->in[0], i) + f64_at(&a->in[1], i);
    return CN_OK;
}

cn_status full_both_backward(cn_tensor *const *in, const int *needs_grad, int n_in, cn_tensor *const *out,
                             cn_tensor *const *grad_out, int n_out, const int64_t *ints,
                             const double *reals, cn_tensor **grad_in) {
    (void)in, (void)needs_grad, (void)n_in, (void)out, (void)n_out, (void)ints, (void)reals;
    grad_in[0] = cn_retain(grad_out[0]);
    grad_in[1] = cn_retain(grad_out[0]);
    return CN_OK;
}

cn_status full_plain_shape(const cn_view *in, int n_in, const int64_t *ints, const double *reals,
                           cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    return same_as_first(in, out);
}

cn_status full_plain_cpu(const cn_kernel_args *a) {
    record(a);
    for (int64_t i = 0; i < a->in[0].shape[0]; i++)
        ((double *)a->out[0].data)[i] = 2 * f64_at(&a->in[0], i);
    return CN_OK;
}

cn_status full_iota_shape(const cn_view *in, int n_in, const int64_t *ints, const double *reals,
                          cn_view *out, int n_out) {
    (void)in, (void)n_in, (void)reals, (void)n_out;
    if (ints[FULL_IOTA_INT_N] < 0)
        return cn_set_error(CN_ERR_INVALID_ARG, "full_iota", "n must be >= 0");
    out[0].dtype = CN_F64;
    out[0].ndim = 1;
    out[0].shape[0] = ints[FULL_IOTA_INT_N];
    return CN_OK;
}

cn_status full_iota_cpu(const cn_kernel_args *a) {
    record(a);
    for (int64_t i = 0; i < a->out[0].shape[0]; i++)
        ((double *)a->out[0].data)[i] = (double)i;
    return CN_OK;
}

/* ---- qscale: a quantized input ------------------------------------------------------------ */

cn_status full_qscale_shape(const cn_view *in, int n_in, const int64_t *ints, const double *reals,
                            cn_view *out, int n_out) {
    (void)n_in, (void)ints, (void)reals, (void)n_out;
    if (in[1].dtype != CN_Q8_TENSOR || in[1].ndim != 1 || in[0].shape[0] != in[1].shape[0])
        return cn_set_error(CN_ERR_SHAPE, "full_qscale", "w must be a q8_tensor of x's length");
    return same_as_first(in, out);
}

cn_status full_qscale_cpu(const cn_kernel_args *a) {
    record(a);
    const uint8_t *w = a->in[FULL_QSCALE_IN_W].data;
    int64_t off = a->ints[FULL_QSCALE_INT_OFFSET], group = a->ints[FULL_QSCALE_INT_GROUP];
    int64_t at = a->ints[FULL_QSCALE_INT_SCALES_AT];
    for (int64_t i = 0; i < a->in[0].shape[0]; i++) {
        int64_t e = off + i * a->in[FULL_QSCALE_IN_W].strides[0];
        float scale;
        memcpy(&scale, w + at + 4 * (e / group), 4);
        ((double *)a->out[0].data)[i] = f64_at(&a->in[0], i) * (int8_t)w[e] * scale;
    }
    return CN_OK;
}

cn_status full_qscale_backward(cn_tensor *const *in, const int *needs_grad, int n_in,
                               cn_tensor *const *out, cn_tensor *const *grad_out, int n_out,
                               const int64_t *ints, const double *reals, cn_tensor **grad_in) {
    (void)n_in, (void)out, (void)n_out, (void)ints, (void)reals;
    if (needs_grad[FULL_QSCALE_IN_W])
        return cn_set_error(CN_ERR_BACKEND, "full_qscale", "a gradient was asked for w");
    grad_in[0] = cn_mul(grad_out[0], cn_dequantize(in[FULL_QSCALE_IN_W], CN_F64));
    return grad_in[0] ? CN_OK : cn_last_status();
}

/* ---- helpers ------------------------------------------------------------------------------- */

static cn_tensor *f64v(const double *v, int64_t n) {
    return cn_from_data(v, &n, 1, CN_F64, cn_cpu());
}

static cn_tensor *i64_scalar(int64_t v) { return cn_from_data(&v, NULL, 0, CN_I64, cn_cpu()); }

static void check_present(const int *got, const int *want, int n, const char *what) {
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "%s: slot %d present=%d, want %d\n", what, i, got[i], want[i]);
            th_checks_failed++;
        }
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_slots_follow_declaration_order(void) {
    /* structs flatten member by member; unions variant by variant, tensor-less ones taking none */
    CHECK(FULL_MASKED_AFFINE_IN_X == 0);
    CHECK(FULL_MASKED_AFFINE_IN_P_SCALE == 1 && FULL_MASKED_AFFINE_IN_P_SHIFT == 2);
    CHECK(FULL_MASKED_AFFINE_IN_M_DENSE_KEEP == 3);
    CHECK(FULL_MASKED_AFFINE_IN_M_BAND_LO == 4 && FULL_MASKED_AFFINE_IN_M_BAND_HI == 5);
    CHECK(FULL_MASKED_AFFINE_N_IN == 6 && FULL_MASKED_AFFINE_N_OUT == 1);
    CHECK(FULL_MASKED_AFFINE_INT_FILL == 0 && FULL_MASKED_AFFINE_REAL_EPS == 0);
    CHECK(FULL_ROW_STATS_OUT_MEAN == 0 && FULL_ROW_STATS_OUT_ARGMAX == 1);
    CHECK(FULL_ROW_STATS_OUT_POSITIVE == 2 && FULL_ROW_STATS_N_OUT == 3);
    CHECK(FULL_MASK_NONE == 0 && FULL_MASK_DENSE == 1 && FULL_MASK_BAND == 2);
    CHECK(FULL_IOTA_N_IN == 0 && FULL_IOTA_INT_N == 0);
}

static void test_register_defines_every_op(void) {
    CHECK(full_register() == CN_OK);
    CHECK(full_register() == CN_OK);
    const char *names[] = {"full_masked_affine", "full_row_stats", "full_both", "full_plain",
                           "full_iota"};
    for (int i = 0; i < 5; i++)
        CHECK(cn_ext_find(names[i]) != NULL);
}

static void test_struct_and_union_none(void) {
    double xv[4] = {1, -2, 3, 4}, sv[4] = {2, 2, 2, 2};
    cn_tensor *x = f64v(xv, 4), *scale = f64v(sv, 4);
    full_affine p = {scale, NULL};
    int before = seen.calls;
    cn_tensor *y = full_masked_affine(x, p, full_mask_none(), -9, 0.5);
    CHECK(seen.calls == before + 1 && seen.n_in == 6 && seen.n_out == 1);
    int want[6] = {1, 1, 0, 0, 0, 0};
    check_present(seen.present, want, 6, "none");
    CHECK(seen.ndim[2] == -1 && seen.ints[0] == -9 && seen.reals[0] == 0.5);
    double yv[4] = {2.5, -3.5, 6.5, 8.5};
    th_check_values("masked_affine none", y, yv, 4, 0);
    cn_release(y);
    cn_release(x);
    cn_release(scale);
}

static void test_union_dense_and_shift(void) {
    double xv[3] = {1, 2, 3}, sv[3] = {1, 1, 1}, hv[3] = {10, 20, 30};
    unsigned char kv[3] = {1, 0, 1};
    int64_t n = 3;
    cn_tensor *x = f64v(xv, 3), *scale = f64v(sv, 3), *shift = f64v(hv, 3);
    cn_tensor *keep = cn_from_data(kv, &n, 1, CN_BOOL, cn_cpu());
    full_affine p = {scale, shift};
    cn_tensor *y = full_masked_affine(x, p, full_mask_dense(keep), 7, 0);
    int want[6] = {1, 1, 1, 1, 0, 0};
    check_present(seen.present, want, 6, "dense");
    double yv[3] = {11, 7, 33};
    th_check_values("masked_affine dense", y, yv, 3, 0);
    cn_release(y);
    cn_release(x);
    cn_release(scale);
    cn_release(shift);
    cn_release(keep);
}

static void test_union_band_optional_member(void) {
    double xv[5] = {1, 2, 3, 4, 5}, one = 1;
    cn_tensor *x = f64v(xv, 5), *scale = cn_from_data(&one, NULL, 0, CN_F64, cn_cpu());
    cn_tensor *lo = i64_scalar(1), *hi = i64_scalar(3);
    full_affine p = {scale, NULL};
    cn_tensor *y = full_masked_affine(x, p, full_mask_band(lo, NULL), 0, 0);
    int want[6] = {1, 1, 0, 0, 1, 0};
    check_present(seen.present, want, 6, "band without hi");
    double yv[5] = {0, 2, 3, 4, 5};
    th_check_values("band without hi", y, yv, 5, 0);
    cn_release(y);
    y = full_masked_affine(x, p, full_mask_band(lo, hi), 0, 0);
    int want2[6] = {1, 1, 0, 0, 1, 1};
    check_present(seen.present, want2, 6, "band with hi");
    double yv2[5] = {0, 2, 3, 0, 0};
    th_check_values("band with hi", y, yv2, 5, 0);
    cn_release(y);
    cn_release(x);
    cn_release(scale);
    cn_release(lo);
    cn_release(hi);
}

static void test_union_bad_tag_is_an_error(void) {
    double xv[2] = {1, 2};
    cn_tensor *x = f64v(xv, 2), *scale = f64v(xv, 2);
    full_affine p = {scale, NULL};
    full_mask m = full_mask_none();
    m.tag = (full_mask_tag)9;
    CHECK_FAILS(full_masked_affine(x, p, m, 0, 0), CN_ERR_INVALID_ARG, "m.tag = 9");
    /* a required struct member left NULL */
    full_affine missing = {NULL, NULL};
    CHECK_FAILS(full_masked_affine(x, missing, full_mask_none(), 0, 0), CN_ERR_NULL_ARG, "p.scale");
    cn_release(x);
    cn_release(scale);
}

/* The backward gets the same flattened inputs, with inactive union members NULL. */
static void check_masked_gradient(cn_device ad) {
    double xv[4] = {1, 2, 3, 4}, sv[4] = {3, 3, 3, 3};
    unsigned char kv[4] = {1, 1, 0, 1};
    int64_t n = 4;
    cn_tensor *xc = f64v(xv, 4), *sc = f64v(sv, 4);
    cn_tensor *kc = cn_from_data(kv, &n, 1, CN_BOOL, cn_cpu());
    cn_tensor *x = cn_require_grad(cn_to_device(xc, ad));
    cn_tensor *scale = cn_to_device(sc, ad), *keep = cn_to_device(kc, ad);
    full_affine p = {scale, NULL};
    cn_tensor *y = full_masked_affine(x, p, full_mask_dense(keep), 0, 0);
    CHECK(y && cn_requires_grad(y));
    cn_tensor *s = cn_sum(y);
    int before = seen_backward.calls;
    cn_grads *g = cn_backward(s);
    CHECK(g && seen_backward.calls == before + 1);
    int want[6] = {1, 1, 0, 1, 0, 0};
    check_present(seen_backward.present, want, 6, "backward inputs");
    double gv[4] = {3, 3, 0, 3};
    th_check_values("grad x", cn_grad(g, x), gv, 4, 0);
    cn_grads_free(g);
    cn_release(s);
    cn_release(y);
    cn_release(x);
    cn_release(scale);
    cn_release(keep);
    cn_release(xc);
    cn_release(sc);
    cn_release(kc);
}

static void test_gradient_through_union(void) { check_masked_gradient(cn_autodiff(cn_cpu())); }

/* memory_bound: under checkpointing the op is run again in backward, with the same tags. */
static void test_gradient_checkpointed_recomputes(void) {
    int before = seen.calls;
    check_masked_gradient(cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED));
    CHECK(seen.calls == before + 2);
}

static void test_several_outputs(void) {
    double xv[6] = {1, 5, 3, -4, -1, -7};
    int64_t shape[2] = {2, 3};
    cn_tensor *x = cn_from_data(xv, shape, 2, CN_F64, cn_cpu());
    cn_tensor *mean = NULL, *argmax = NULL, *positive = NULL;
    CHECK(full_row_stats(x, &mean, &argmax, &positive) == CN_OK);
    double mv[2] = {3, -4}, av[2] = {1, 1}, pv[2] = {1, 0};
    th_check_values("mean", mean, mv, 2, 1e-15);
    th_check_values("argmax", argmax, av, 2, 0);
    th_check_values("positive", positive, pv, 2, 0);
    CHECK(cn_dtype_of(argmax) == CN_I64 && cn_dtype_of(positive) == CN_BOOL);
    cn_release(mean);
    cn_release(argmax);
    cn_release(positive);

    /* every out_ pointer is required; the others are cleared */
    mean = argmax = x;
    cn_clear_error();
    CHECK(full_row_stats(x, &mean, &argmax, NULL) == CN_ERR_NULL_ARG);
    CHECK(strstr(cn_last_error(), "out_positive") != NULL);
    cn_clear_error();
    cn_release(x);
}

/* non_differentiable: tracked inputs are allowed and the outputs are untracked. */
static void test_non_differentiable_outputs_untracked(void) {
    double xv[4] = {1, 2, 3, 4};
    int64_t shape[2] = {2, 2};
    cn_tensor *xc = cn_from_data(xv, shape, 2, CN_F64, cn_cpu());
    cn_tensor *x = cn_require_grad(cn_to_device(xc, cn_autodiff(cn_cpu())));
    cn_tensor *mean = NULL, *argmax = NULL, *positive = NULL;
    CHECK(full_row_stats(x, &mean, &argmax, &positive) == CN_OK);
    CHECK(mean && !cn_requires_grad(mean) && cn_device_of(mean).autodiff);
    CHECK(argmax && cn_device_of(argmax).autodiff);
    cn_release(mean);
    cn_release(argmax);
    cn_release(positive);
    cn_release(x);
    cn_release(xc);
}

static void test_same_tracking_rejects_mixed(void) {
    double v[2] = {1, 2};
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *c = f64v(v, 2);
    cn_tensor *a = cn_require_grad(cn_to_device(c, ad)), *b = cn_to_device(c, ad);
    CHECK_FAILS(full_both(a, b), CN_ERR_EXT_MIXED_TRACKING, "full_both");
    cn_tensor *b2 = cn_require_grad(cn_to_device(c, ad));
    cn_tensor *s = full_both(a, b2);
    CHECK(s && cn_requires_grad(s));
    cn_release(s);
    cn_release(a);
    cn_release(b);
    cn_release(b2);
    cn_release(c);
}

/* An op declared without `autodiff` is concrete-only: a tracked input is an error. */
static void test_concrete_only_rejects_tracked(void) {
    double v[2] = {1, 2};
    cn_tensor *c = f64v(v, 2);
    cn_tensor *x = cn_require_grad(cn_to_device(c, cn_autodiff(cn_cpu())));
    CHECK_FAILS(full_plain(x), CN_ERR_AUTODIFF_REACHED_CONCRETE, "full_plain");
    cn_tensor *y = full_plain(c);
    double want[2] = {2, 4};
    th_check_values("plain", y, want, 2, 0);
    cn_release(y);
    cn_release(x);
    cn_release(c);
}

/* An op with no tensor input and one backend runs on that backend. */
static void test_no_tensor_op_runs_on_its_backend(void) {
    cn_tensor *y = full_iota(4);
    double want[4] = {0, 1, 2, 3};
    th_check_values("iota", y, want, 4, 0);
    cn_release(y);
    cn_clear_error();
}

/* The quantized input of qscale: w = quantize([127, -63.5, 10]) per tensor (scale 1, q = 127,
 * -64, 10) passes through unchanged on the concrete route and on the autodiff route, where only
 * x is differentiated; a float in its slot is a kind error naming cn_quantize. */
static void test_quantized_passes_through(void) {
    CHECK(FULL_QSCALE_IN_X == 0 && FULL_QSCALE_IN_W == 1 && FULL_QSCALE_N_IN == 2);
    double wv[3] = {127, -63.5, 10}, xv[3] = {1, 2, -0.5};
    cn_tensor *wf = f64v(wv, 3), *w = cn_quantize(wf, CN_Q8_TENSOR), *x = f64v(xv, 3);
    int64_t off = -1, group = -1, at = -1;
    CHECK(cn_quant_layout(w, &off, &group, &at) == CN_OK);
    cn_tensor *y = full_qscale(x, w, off, group, at);
    double want[3] = {127, -128, -5};
    th_check_values("qscale concrete", y, want, 3, 0);
    cn_release(y);
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *xt = cn_require_grad(cn_to_device(x, ad));
    y = full_qscale(xt, w, off, group, at);
    CHECK(y && cn_requires_grad(y) && !cn_requires_grad(w));
    cn_tensor *l = y ? cn_sum(y) : NULL;
    cn_grads *g = l ? cn_backward(l) : NULL;
    double gwant[3] = {127, -64, 10};
    th_check_values("qscale gradient", g ? cn_grad(g, xt) : NULL, gwant, 3, 0);
    cn_grads_free(g);
    cn_release(l);
    cn_release(y);
    CHECK_FAILS(full_qscale(x, wf, off, group, at), CN_ERR_KIND, "cn_quantize(w");
    cn_release(xt);
    cn_release(x);
    cn_release(w);
    cn_release(wf);
}

int main(void) {
    RUN(test_slots_follow_declaration_order);
    RUN(test_register_defines_every_op);
    RUN(test_struct_and_union_none);
    RUN(test_union_dense_and_shift);
    RUN(test_union_band_optional_member);
    RUN(test_union_bad_tag_is_an_error);
    RUN(test_gradient_through_union);
    RUN(test_gradient_checkpointed_recomputes);
    RUN(test_several_outputs);
    RUN(test_non_differentiable_outputs_untracked);
    RUN(test_same_tracking_rejects_mixed);
    RUN(test_concrete_only_rejects_tracked);
    RUN(test_no_tensor_op_runs_on_its_backend);
    RUN(test_quantized_passes_through);
    return th_finish();
}
