/* Extension ops through the runtime API: routing, autodiff, checkpointing, and every routing
 * invariant, each with its own status code, no leak, and inputs left as they were. */
#include "harness.h"

/* ---- a few ops for the tests --------------------------------------------------------------- */

static int64_t numel_of(const cn_view *v) {
    int64_t n = 1;
    for (int d = 0; d < v->ndim; d++) n *= v->shape[d];
    return n;
}

/* out[k] = same geometry as input 0 (or the first present input), same dtype */
static cn_status like_first(const cn_view *in, int n_in, const int64_t *ints, const double *reals,
                            cn_view *out, int n_out) {
    (void)ints;
    (void)reals;
    int i = 0;
    while (i < n_in && in[i].ndim < 0) i++;
    for (int k = 0; k < n_out; k++) out[k] = in[i];
    return CN_OK;
}

/* y = a * x + b (contiguous f64 in the tests): a = reals[0], b = reals[1] */
static cn_status affine_cpu(const cn_kernel_args *a) {
    const double *x = a->in[0].data;
    double *y = a->out[0].data;
    for (int64_t i = 0; i < numel_of(&a->out[0]); i++) y[i] = a->reals[0] * x[i] + a->reals[1];
    return CN_OK;
}

static cn_status affine_backward(cn_tensor *const *in, const int *needs_grad, int n_in, cn_tensor *const *out,
                                 cn_tensor *const *gout, int n_out, const int64_t *ints,
                                 const double *reals, cn_tensor **gin) {
    (void)in, (void)needs_grad, (void)n_in, (void)out, (void)n_out, (void)ints;
    gin[0] = cn_mul_scalar(gout[0], reals[0]);
    return gin[0] ? CN_OK : cn_last_status();
}

/* which inputs the last sumdiff backward was asked for */
static int sumdiff_needs[2];

/* (s, d) = (p.a + p.b, p.a - p.b) for a struct input p {a, b} */
static cn_status sumdiff_cpu(const cn_kernel_args *a) {
    const double *x = a->in[0].data, *y = a->in[1].data;
    double *s = a->out[0].data, *d = a->out[1].data;
    for (int64_t i = 0; i < numel_of(&a->out[0]); i++) {
        s[i] = x[i] + y[i];
        d[i] = x[i] - y[i];
    }
    return CN_OK;
}

static cn_status sumdiff_backward(cn_tensor *const *in, const int *needs_grad, int n_in, cn_tensor *const *out,
                                  cn_tensor *const *gout, int n_out, const int64_t *ints,
                                  const double *reals, cn_tensor **gin) {
    (void)in, (void)n_in, (void)out, (void)n_out, (void)ints, (void)reals;
    sumdiff_needs[0] = needs_grad[0];
    sumdiff_needs[1] = needs_grad[1];
    gin[0] = cn_add(gout[0], gout[1]);
    gin[1] = cn_sub(gout[0], gout[1]);
    return gin[0] && gin[1] ? CN_OK : cn_last_status();
}

/* masked: out = x where the (optional, union) mask holds, else 0 */
static cn_status masked_cpu(const cn_kernel_args *a) {
    const double *x = a->in[0].data;
    const uint8_t *m = a->in[1].data; /* NULL on the `none` variant */
    double *y = a->out[0].data;
    for (int64_t i = 0; i < numel_of(&a->out[0]); i++) y[i] = (!m || m[i]) ? x[i] : 0;
    return CN_OK;
}

/* What the backward of test_backward_rules returns, to test the ownership rule of its results
 * and the checks of its gradients (extension.h). */
enum {
    BW_MADE,           /* a tensor it made, as it is: right */
    BW_GIVEN_RETAINED, /* cn_retain(grad_out[0]): right */
    BW_MADE_RETAINED,  /* cn_retain of a tensor it made: one reference too many */
    BW_GIVEN_BORROWED, /* grad_out[0] itself: no reference of its own */
    BW_SHARED_RETAINED,/* one made tensor for x and z, retained for the second: right */
    BW_SHARED_BORROWED,/* one made tensor for x and z, not retained: one reference short */
    BW_F32,            /* an f32 gradient for the f64 input */
    BW_AUTODIFF,       /* a gradient on the autodiff device */
    BW_OTHER_BACKEND,  /* a gradient on another backend */
};
static int bw_mode;
static int other_backend = -1;

/* d(a x + b)/dx = a, computed as the mode says; z (optional) gets the same gradient */
static cn_status rules_backward(cn_tensor *const *in, const int *needs_grad, int n_in,
                                cn_tensor *const *out, cn_tensor *const *gout, int n_out,
                                const int64_t *ints, const double *reals, cn_tensor **gin) {
    (void)needs_grad, (void)n_in, (void)out, (void)n_out, (void)ints;
    cn_tensor *g = cn_mul_scalar(gout[0], reals[0]);
    if (!g) return cn_last_status();
    switch (bw_mode) {
    case BW_MADE: gin[0] = g; break;
    case BW_GIVEN_RETAINED: gin[0] = cn_retain(gout[0]); break;
    case BW_MADE_RETAINED: gin[0] = cn_retain(g); break;
    case BW_GIVEN_BORROWED: gin[0] = gout[0]; break;
    case BW_SHARED_RETAINED: gin[0] = g, gin[1] = cn_retain(g); break;
    case BW_SHARED_BORROWED: gin[0] = gin[1] = g; break;
    case BW_F32: gin[0] = cn_cast(g, CN_F32); break;
    case BW_AUTODIFF:
        gin[0] = cn_zeros(cn_shape(in[0]), 1, CN_F64, cn_autodiff(cn_cpu()));
        break;
    case BW_OTHER_BACKEND:
        gin[0] = cn_zeros(cn_shape(in[0]), 1, CN_F64,
                          (cn_device){(int16_t)other_backend, 0, 0, 0});
        break;
    }
    return gin[0] ? CN_OK : cn_last_status();
}

/* Counts the runs of the kernel of test_counted (memory-bound; y = a x + b, as affine). */
static int counted_runs;
static cn_status counted_cpu(const cn_kernel_args *a) {
    counted_runs++;
    return affine_cpu(a);
}

/* Fails without setting an error: the launch must give it one. */
static cn_status silent_failure_cpu(const cn_kernel_args *a) {
    (void)a;
    return CN_ERR_INVALID_ARG;
}

static const cn_ext_op *affine, *concrete_only, *nondiff, *pick, *pair, *sumdiff, *masked,
    *affine_mb, *rules, *counted, *silent;

static const char *const y_name[] = {"y"};
static const char *const ab_names[] = {"a", "b"};
static const char *const sd_names[] = {"s", "d"};

static void define_ops(void) {
    static const cn_ext_tensor_arg x_arg[] = {{"x", CN_KIND_FLOAT, 0, -1, 0}};
    cn_ext_schema s = {.name = "test_affine", .n_tensors = 1, .tensors = x_arg, .n_reals = 2,
                       .real_names = ab_names, .n_outputs = 1, .output_names = y_name,
                       .shape = like_first};
    affine = cn_ext_define(&s);
    cn_ext_register_kernel(affine, "cpu", affine_cpu);
    cn_ext_register_backward(affine, affine_backward);

    s.name = "test_affine_memory_bound";
    s.flags = CN_EXT_MEMORY_BOUND;
    affine_mb = cn_ext_define(&s);
    cn_ext_register_kernel(affine_mb, "cpu", affine_cpu);
    cn_ext_register_backward(affine_mb, affine_backward);

    s.name = "test_counted";
    counted = cn_ext_define(&s);
    cn_ext_register_kernel(counted, "cpu", counted_cpu);
    cn_ext_register_backward(counted, affine_backward);

    s.name = "test_silent_failure";
    s.flags = 0;
    silent = cn_ext_define(&s);
    cn_ext_register_kernel(silent, "cpu", silent_failure_cpu);

    s.name = "test_concrete_only";
    s.flags = 0;
    concrete_only = cn_ext_define(&s);
    cn_ext_register_kernel(concrete_only, "cpu", affine_cpu);

    s.name = "test_non_differentiable";
    s.flags = CN_EXT_NON_DIFFERENTIABLE;
    nondiff = cn_ext_define(&s);
    cn_ext_register_kernel(nondiff, "cpu", affine_cpu);

    static const cn_ext_tensor_arg pick_args[] = {{"ids", CN_KIND_INT, 0, -1, 0},
                                                  {"table", CN_KIND_FLOAT, 0, -1, 0}};
    cn_ext_schema p = {.name = "test_pick", .n_tensors = 2, .tensors = pick_args, .n_outputs = 1,
                       .output_names = y_name, .shape = like_first};
    pick = cn_ext_define(&p);
    cn_ext_register_kernel(pick, "cpu", affine_cpu);

    static const cn_ext_group pgroup[] = {{"p", CN_EXT_STRUCT, 0, NULL}};
    static const cn_ext_tensor_arg pair_args[] = {{"p.a", CN_KIND_FLOAT, 0, 0, 0},
                                                  {"p.b", CN_KIND_FLOAT, 0, 0, 0}};
    cn_ext_schema q = {.name = "test_pair", .n_tensors = 2, .tensors = pair_args, .n_groups = 1,
                       .groups = pgroup, .n_outputs = 2, .output_names = sd_names,
                       .shape = like_first, .flags = CN_EXT_SAME_TRACKING};
    pair = cn_ext_define(&q);
    cn_ext_register_kernel(pair, "cpu", sumdiff_cpu);
    cn_ext_register_backward(pair, sumdiff_backward);
    q.name = "test_sumdiff";
    q.flags = 0;
    sumdiff = cn_ext_define(&q);
    cn_ext_register_kernel(sumdiff, "cpu", sumdiff_cpu);
    cn_ext_register_backward(sumdiff, sumdiff_backward);

    static const char *const variants[] = {"none", "dense"};
    static const cn_ext_group mgroup[] = {{"mask", CN_EXT_UNION, 2, variants}};
    static const cn_ext_tensor_arg m_args[] = {{"x", CN_KIND_FLOAT, 1, -1, 0},
                                               {"mask.dense", CN_KIND_BOOL, 0, 0, 1}};
    cn_ext_schema m = {.name = "test_masked", .n_tensors = 2, .tensors = m_args, .n_groups = 1,
                       .groups = mgroup, .n_outputs = 1, .output_names = y_name,
                       .shape = like_first, .flags = CN_EXT_NON_DIFFERENTIABLE};
    masked = cn_ext_define(&m);
    cn_ext_register_kernel(masked, "cpu", masked_cpu);

    static const cn_ext_tensor_arg xz_args[] = {{"x", CN_KIND_FLOAT, 0, -1, 0},
                                                {"z", CN_KIND_FLOAT, 1, -1, 0}};
    cn_ext_schema r = {.name = "test_backward_rules", .n_tensors = 2, .tensors = xz_args,
                       .n_reals = 2, .real_names = ab_names, .n_outputs = 1,
                       .output_names = y_name, .shape = like_first};
    rules = cn_ext_define(&r);
    cn_ext_register_kernel(rules, "cpu", affine_cpu);
    cn_ext_register_backward(rules, rules_backward);
    if (other_backend < 0) {
        cn_backend copy = *cn_backend_get(CN_BACKEND_CPU);
        copy.name = "ext_other";
        other_backend = cn_backend_register(&copy);
    }
}

static cn_tensor *vec(cn_device dev, double a, double b, int grad) {
    double v[2] = {a, b};
    int64_t n = 2;
    cn_tensor *t = cn_from_data(v, &n, 1, CN_F64, dev);
    return grad ? cn_require_grad(t) : t;
}

static cn_tensor *call1(const cn_ext_op *op, cn_ext_route route, cn_tensor *x, double a,
                        double b) {
    double reals[2] = {a, b};
    cn_tensor *out = NULL;
    cn_ext_call(op, route, &x, NULL, NULL, reals, &out);
    return out;
}

/* ---- a quantized input (issue 19): y = x * dequantize(w), x f64 and w q8_tensor, both 1-D;
 * ints = w's layout (cn_quant_layout: offset, group, scales_at) --------------------------------- */

static const cn_ext_op *qscale;

static cn_status qscale_cpu(const cn_kernel_args *a) {
    const double *x = a->in[0].data;
    const uint8_t *w = a->in[1].data; /* the storage's first byte */
    double *y = a->out[0].data;
    int64_t off = a->ints[0], group = a->ints[1], at = a->ints[2];
    for (int64_t i = 0; i < numel_of(&a->out[0]); i++) {
        int64_t e = off + i * a->in[1].strides[0];
        float scale;
        memcpy(&scale, w + at + 4 * (e / group), 4);
        y[i] = x[i] * (double)(int8_t)w[e] * scale;
    }
    return CN_OK;
}

static cn_status qscale_backward(cn_tensor *const *in, const int *needs_grad, int n_in,
                                 cn_tensor *const *out, cn_tensor *const *gout, int n_out,
                                 const int64_t *ints, const double *reals, cn_tensor **gin) {
    (void)n_in, (void)out, (void)n_out, (void)ints, (void)reals;
    if (needs_grad[1]) return cn_set_error(CN_ERR_BACKEND, "test_qscale", "w asked for a grad");
    gin[0] = cn_mul(gout[0], cn_dequantize(in[1], CN_F64));
    return gin[0] ? CN_OK : cn_last_status();
}

static cn_tensor *call_qscale(cn_ext_route route, cn_tensor *x, cn_tensor *w) {
    int64_t ints[3] = {0, 1, 0};
    if (cn_kind_of(w) == CN_KIND_QUANTIZED) cn_quant_layout(w, &ints[0], &ints[1], &ints[2]);
    cn_tensor *in[2] = {x, w}, *out = NULL;
    cn_ext_call(qscale, route, in, NULL, ints, NULL, &out);
    return out;
}

/* w = quantize([127, -63.5, 10]) per tensor: scale 1, q = [127, -64, 10] (ties to even) */
static cn_tensor *q_weight(cn_device dev) {
    double v[3] = {127, -63.5, 10};
    int64_t n = 3;
    cn_tensor *f = cn_from_data(v, &n, 1, CN_F64, dev);
    cn_tensor *q = cn_quantize(f, CN_Q8_TENSOR);
    cn_release(f);
    return q;
}

/* The quantized arm of the routing: a declared quantized input passes through unchanged on the
 * concrete and on the autodiff route (untracked, no gradient asked for), and the kinds are
 * checked both ways. */
static void test_quantized_input(void) {
    static const cn_ext_tensor_arg args[] = {{"x", CN_KIND_FLOAT, 0, -1, 0},
                                             {"w", CN_KIND_QUANTIZED, 0, -1, 0}};
    static const char *const qi[] = {"offset", "group", "scales_at"};
    cn_ext_schema s = {.name = "test_qscale", .n_tensors = 2, .tensors = args, .n_ints = 3,
                       .int_names = qi, .n_outputs = 1, .output_names = y_name,
                       .shape = like_first};
    if (!qscale) {
        qscale = cn_ext_define(&s);
        CHECK(qscale != NULL);
        CHECK(cn_ext_register_kernel(qscale, "cpu", qscale_cpu) == CN_OK);
        CHECK(cn_ext_register_backward(qscale, qscale_backward) == CN_OK);
    }
    cn_scope_begin();
    int64_t n3 = 3;
    double xv[3] = {1, 2, -0.5};
    /* concrete */
    cn_tensor *w = q_weight(cn_cpu()), *x = cn_from_data(xv, &n3, 1, CN_F64, cn_cpu());
    th_check_values("quantized input, concrete", call_qscale(CN_EXT_ROUTE_AUTO, x, w),
                    (double[]){127, -128, -5}, 3, 0);
    /* a view of w (its last two elements): the layout follows it */
    th_check_values("quantized view", call_qscale(CN_EXT_ROUTE_AUTO, cn_slice(x, 0, 1, 3, 1),
                                                   cn_slice(w, 0, 1, 3, 1)),
                    (double[]){-128, -5}, 2, 0);
    /* autodiff: x tracked, w (plain or on the autodiff device) passes through untracked */
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *wa = cn_to_device(w, ad);
    cn_tensor *ws[2] = {w, wa};
    for (int k = 0; k < 2; k++) {
        cn_tensor *xt = cn_require_grad(cn_from_data(xv, &n3, 1, CN_F64, ad));
        cn_tensor *y = call_qscale(CN_EXT_ROUTE_AUTO, xt, ws[k]);
        CHECK(y && cn_requires_grad(y) && !cn_requires_grad(ws[k]));
        cn_grads *g = y ? cn_backward(cn_sum(y)) : NULL;
        th_check_values("quantized input, gradient", g ? cn_grad(g, xt) : NULL,
                        (double[]){127, -64, 10}, 3, 0);
        if (g) CHECK(cn_grad_find(g, ws[k]) == NULL);
        cn_grads_free(g);
    }
    /* the kinds, both ways; a tracked float in the quantized slot */
    cn_tensor *wf = cn_from_data(xv, &n3, 1, CN_F64, cn_cpu());
    CHECK_FAILS(call_qscale(CN_EXT_ROUTE_AUTO, x, wf), CN_ERR_KIND, "cn_quantize(w");
    CHECK_FAILS(call_qscale(CN_EXT_ROUTE_AUTO, w, w), CN_ERR_KIND, "cn_dequantize(x");
    cn_tensor *xt = cn_require_grad(cn_from_data(xv, &n3, 1, CN_F64, ad));
    CHECK_FAILS(call_qscale(CN_EXT_ROUTE_AUTO, xt, xt), CN_ERR_AUTODIFF_NONFLOAT,
                "only float tensors may use an autodiff primitive");
    cn_scope_end();
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_concrete_call(void) {
    cn_tensor *x = vec(cn_cpu(), 1, 2, 0);
    cn_tensor *y = call1(affine, CN_EXT_ROUTE_AUTO, x, 3, 1);
    th_check_values("affine on cpu", y, (double[]){4, 7}, 2, 0);
    CHECK(!cn_device_of(y).autodiff);
    cn_release(y);
    cn_release(x);
}

static void test_autodiff_route_and_gradient(void) {
    cn_device devs[2] = {cn_autodiff(cn_cpu()),
                         cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED)};
    for (int k = 0; k < 2; k++) {
        for (int mb = 0; mb < 2; mb++) {
            cn_tensor *x = vec(devs[k], 1, 2, 1);
            cn_scope_begin();
            /* loss = sum(exp(affine(x))) : d/dx = 3 exp(3x + 1) */
            cn_tensor *y = call1(mb ? affine_mb : affine, CN_EXT_ROUTE_AUTO, x, 3, 1);
            CHECK(y && cn_requires_grad(y) && cn_device_eq(cn_device_of(y), devs[k]));
            cn_grads *g = cn_backward(cn_sum(cn_exp(y)));
            th_check_values("extension gradient", g ? cn_grad(g, x) : NULL,
                            (double[]){3 * exp(4.0), 3 * exp(7.0)}, 2, 1e-12);
            cn_grads_free(g);
            cn_scope_end();
            cn_release(x);
        }
    }
}

static void test_multi_output_struct(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *a = vec(ad, 1, 2, 1), *b = vec(ad, 5, 7, 1);
    cn_scope_begin();
    cn_tensor *in[2] = {a, b}, *out[2];
    int tags[1] = {0};
    CHECK(cn_ext_call(sumdiff, CN_EXT_ROUTE_AUTO, in, tags, NULL, NULL, out) == CN_OK);
    th_check_values("s", out[0], (double[]){6, 9}, 2, 0);
    th_check_values("d", out[1], (double[]){-4, -5}, 2, 0);
    /* loss = sum(2 s + 3 d): da = 2 + 3, db = 2 - 3 */
    cn_grads *g = cn_backward(cn_sum(cn_add(cn_mul_scalar(out[0], 2), cn_mul_scalar(out[1], 3))));
    th_check_values("grad a", g ? cn_grad(g, a) : NULL, (double[]){5, 5}, 2, 0);
    th_check_values("grad b", g ? cn_grad(g, b) : NULL, (double[]){-1, -1}, 2, 0);
    cn_grads_free(g);
    /* only one output used: the other's gradient is zero */
    CHECK(cn_ext_call(sumdiff, CN_EXT_ROUTE_AUTO, in, tags, NULL, NULL, out) == CN_OK);
    g = cn_backward(cn_sum(out[1]));
    th_check_values("grad a, d only", g ? cn_grad(g, a) : NULL, (double[]){1, 1}, 2, 0);
    th_check_values("grad b, d only", g ? cn_grad(g, b) : NULL, (double[]){-1, -1}, 2, 0);
    cn_grads_free(g);
    cn_scope_end();
    cn_release(a);
    cn_release(b);
}

static void test_union_variants(void) {
    cn_tensor *x = vec(cn_cpu(), 3, 4, 0);
    uint8_t mv[2] = {0, 1};
    int64_t n = 2;
    cn_tensor *m = cn_from_data(mv, &n, 1, CN_BOOL, cn_cpu());
    cn_tensor *in[2] = {x, m}, *out = NULL;
    int dense[1] = {1}, none[1] = {0};
    CHECK(cn_ext_call(masked, CN_EXT_ROUTE_AUTO, in, dense, NULL, NULL, &out) == CN_OK);
    th_check_values("dense mask", out, (double[]){0, 4}, 2, 0);
    cn_release(out);
    cn_tensor *in_none[2] = {x, NULL};
    CHECK(cn_ext_call(masked, CN_EXT_ROUTE_AUTO, in_none, none, NULL, NULL, &out) == CN_OK);
    th_check_values("no mask", out, (double[]){3, 4}, 2, 0);
    cn_release(out);
    /* a member of the inactive variant must be NULL */
    cn_clear_error();
    CHECK(cn_ext_call(masked, CN_EXT_ROUTE_AUTO, in, none, NULL, NULL, &out) ==
              CN_ERR_INVALID_ARG && out == NULL);
    CHECK(strstr(cn_last_error(), "mask.dense") != NULL);
    /* no tensor at all: every input absent */
    cn_tensor *nothing[2] = {NULL, NULL};
    cn_clear_error();
    CHECK(cn_ext_call(masked, CN_EXT_ROUTE_AUTO, nothing, none, NULL, NULL, &out) ==
          CN_ERR_EXT_NO_TENSOR);
    CHECK(strstr(cn_last_error(), "test_masked") != NULL);
    cn_clear_error();
    cn_release(x);
    cn_release(m);
}

/* Asserts a call failed with status and a message containing needle, and left x as it was. */
static void expect_failure(cn_status got, cn_status want, const char *needle, cn_tensor *x,
                           const double *xv) {
    CHECK(got == want);
    CHECK(cn_last_status() == want);
    if (!strstr(cn_last_error(), needle)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", cn_last_error(), needle);
        th_checks_failed++;
    }
    if (x) th_check_values("input untouched", x, xv, 2, 0);
    cn_clear_error();
}

static void test_reached_concrete_dispatch(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = vec(ad, 1, 2, 1);
    double reals[2] = {3, 1}, xv[2] = {1, 2};
    cn_tensor *out = (cn_tensor *)1;
    cn_clear_error();
    /* an op without backward, given a tracked float */
    cn_status s = cn_ext_call(concrete_only, CN_EXT_ROUTE_AUTO, &x, NULL, NULL, reals, &out);
    CHECK(out == NULL);
    expect_failure(s, CN_ERR_AUTODIFF_REACHED_CONCRETE,
                   "autodiff float input reached concrete dispatch", x, xv);
    s = cn_ext_call(concrete_only, CN_EXT_ROUTE_AUTO, &x, NULL, NULL, reals, &out);
    expect_failure(s, CN_ERR_AUTODIFF_REACHED_CONCRETE, "cn_inner(x)", x, xv);
    s = cn_ext_call(concrete_only, CN_EXT_ROUTE_AUTO, &x, NULL, NULL, reals, &out);
    expect_failure(s, CN_ERR_AUTODIFF_REACHED_CONCRETE, "register a backward", x, xv);
    /* a differentiable op forced onto the concrete route */
    s = cn_ext_call(affine, CN_EXT_ROUTE_CONCRETE, &x, NULL, NULL, reals, &out);
    expect_failure(s, CN_ERR_AUTODIFF_REACHED_CONCRETE, "concrete kernel", x, xv);

    /* the ways out: strip the wrapper, or no-grad mode */
    cn_tensor *inner = cn_inner(x);
    CHECK(cn_ext_call(concrete_only, CN_EXT_ROUTE_AUTO, &inner, NULL, NULL, reals, &out) == CN_OK);
    th_check_values("via cn_inner", out, (double[]){4, 7}, 2, 0);
    cn_release(out);
    cn_release(inner);
    cn_no_grad_begin();
    CHECK(cn_ext_call(concrete_only, CN_EXT_ROUTE_AUTO, &x, NULL, NULL, reals, &out) == CN_OK);
    CHECK(!cn_requires_grad(out));
    cn_release(out);
    cn_no_grad_end();
    /* declared non-differentiable: untracked outputs by the author's choice */
    CHECK(cn_ext_call(nondiff, CN_EXT_ROUTE_AUTO, &x, NULL, NULL, reals, &out) == CN_OK);
    CHECK(out && !cn_requires_grad(out) && cn_device_of(out).autodiff);
    cn_release(out);
    cn_release(x);
}

static void test_nonfloat_primitive(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *tracked = vec(ad, 1, 2, 1), *table = vec(ad, 3, 4, 0);
    cn_tensor *in[2] = {tracked, table}, *out = NULL;
    double xv[2] = {1, 2};
    cn_clear_error();
    cn_status s = cn_ext_call(pick, CN_EXT_ROUTE_AUTO, in, NULL, NULL, NULL, &out);
    expect_failure(s, CN_ERR_AUTODIFF_NONFLOAT, "only float tensors may use an autodiff primitive",
                   tracked, xv);
    CHECK(out == NULL);
    cn_release(tracked);
    cn_release(table);
}

static void test_plain_enabled(void) {
    cn_device malformed = {CN_BACKEND_CPU, 0, 0, CN_CHECKPOINT_BALANCED};
    cn_tensor *x = vec(malformed, 1, 2, 0);
    double reals[2] = {1, 0}, xv[2] = {1, 2};
    cn_tensor *out = NULL;
    cn_clear_error();
    cn_status s = cn_ext_call(affine, CN_EXT_ROUTE_AUTO, &x, NULL, NULL, reals, &out);
    expect_failure(s, CN_ERR_AUTODIFF_PLAIN_ENABLED,
                   "an enabled float tensor must use an autodiff primitive", NULL, NULL);
    double back[2];
    CHECK(cn_read(x, back, sizeof back) == CN_OK && back[0] == xv[0] && back[1] == xv[1]);
    /* built-in ops guard it too */
    CHECK_FAILS(cn_exp(x), CN_ERR_AUTODIFF_PLAIN_ENABLED, "cn_autodiff_checkpointed");
    cn_release(x);
}

static void test_mixed_tracking(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *a = vec(ad, 1, 2, 1), *b = vec(cn_cpu(), 3, 4, 0);
    cn_tensor *in[2] = {a, b}, *out[2] = {NULL, NULL};
    int tags[1] = {0};
    double av[2] = {1, 2};
    cn_clear_error();
    cn_status s = cn_ext_call(pair, CN_EXT_ROUTE_AUTO, in, tags, NULL, NULL, out);
    expect_failure(s, CN_ERR_EXT_MIXED_TRACKING, "'p.b'", a, av);
    CHECK(out[0] == NULL && out[1] == NULL);
    /* without the flag, the plain float is lifted as a constant */
    cn_scope_begin();
    CHECK(cn_ext_call(sumdiff, CN_EXT_ROUTE_AUTO, in, tags, NULL, NULL, out) == CN_OK);
    cn_grads *g = cn_backward(cn_sum(out[0]));
    th_check_values("constant lifted", g ? cn_grad(g, a) : NULL, (double[]){1, 1}, 2, 0);
    CHECK(sumdiff_needs[0] == 1 && sumdiff_needs[1] == 0); /* the constant needs no gradient */
    cn_grads_free(g);
    cn_scope_end();
    cn_release(a);
    cn_release(b);
}

static void test_devices_and_kernels(void) {
    cn_device other = {(int16_t)other_backend, 0, 0, 0};
    cn_tensor *a = vec(cn_cpu(), 1, 2, 0), *b = vec(other, 3, 4, 0);
    cn_tensor *in[2] = {a, b}, *out[2];
    int tags[1] = {0};
    double av[2] = {1, 2}, reals[2] = {1, 0};
    cn_clear_error();
    expect_failure(cn_ext_call(sumdiff, CN_EXT_ROUTE_AUTO, in, tags, NULL, NULL, out),
                   CN_ERR_DEVICE_MISMATCH, "ext_other:0", a, av);
    /* a backend without a kernel for the op: cn_ext_has_kernel says so first, without an error */
    CHECK(cn_ext_has_kernel(affine, cn_cpu()) == 1);
    CHECK(cn_ext_has_kernel(affine, cn_autodiff(cn_cpu())) == 1); /* the concrete backend's */
    CHECK(cn_ext_has_kernel(affine, other) == 0);
    CHECK(cn_ext_has_kernel(NULL, cn_cpu()) == 0);
    CHECK(cn_ext_has_kernel(affine, (cn_device){CN_BACKEND_INVALID, 0, 0, 0}) == 0);
    CHECK(cn_last_status() == CN_OK);
    cn_tensor *o = NULL;
    expect_failure(cn_ext_call(affine, CN_EXT_ROUTE_AUTO, &b, NULL, NULL, reals, &o),
                   CN_ERR_NO_KERNEL, "'test_affine' has no kernel for backend 'ext_other'", NULL,
                   NULL);
    /* checkpointing strategies differ */
    cn_tensor *c = vec(cn_autodiff(cn_cpu()), 1, 2, 1);
    cn_tensor *d = vec(cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED), 3, 4, 1);
    cn_tensor *cd[2] = {c, d};
    expect_failure(cn_ext_call(sumdiff, CN_EXT_ROUTE_AUTO, cd, tags, NULL, NULL, out),
                   CN_ERR_CHECKPOINT_MISMATCH, "test_sumdiff", c, av);
    cn_release(a);
    cn_release(b);
    cn_release(c);
    cn_release(d);
}

static void test_schema_errors(void) {
    cn_ext_schema s = {.name = "bad", .n_outputs = 0, .shape = like_first};
    CHECK_FAILS((cn_tensor *)cn_ext_define(&s), CN_ERR_INVALID_ARG, "no outputs");
    s.n_outputs = 1;
    s.output_names = y_name;
    s.name = "test_affine";
    CHECK_FAILS((cn_tensor *)cn_ext_define(&s), CN_ERR_INVALID_ARG, "taken");
    CHECK(cn_ext_find("test_affine") == affine);
    cn_clear_error();
    CHECK(cn_ext_register_kernel(affine, "", affine_cpu) == CN_ERR_INVALID_ARG);
    cn_clear_error();
}

/* A kernel for a backend not registered yet (as cuda is before its module loads) waits under
 * its name, without loading anything, and serves once a backend of that name registers. */
static void test_kernel_for_a_later_backend(void) {
    static const cn_ext_tensor_arg x_arg[] = {{"x", CN_KIND_FLOAT, 0, -1, 0}};
    cn_ext_schema s = {.name = "test_late", .n_tensors = 1, .tensors = x_arg, .n_reals = 2,
                       .real_names = ab_names, .n_outputs = 1, .output_names = y_name,
                       .shape = like_first};
    const cn_ext_op *late = cn_ext_define(&s);
    CHECK(late != NULL);
    CHECK(cn_backend_find("ext_late") < 0);
    CHECK(cn_ext_register_kernel(late, "ext_late", affine_cpu) == CN_OK);
    CHECK(cn_ext_register_kernel(late, "ext_late", affine_cpu) == CN_OK); /* the same: no change */
    CHECK(cn_ext_register_kernel(late, "ext_late", masked_cpu) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "'test_late'") && strstr(cn_last_error(), "'ext_late'"));
    cn_clear_error();
    /* at most 4 backends wait per op */
    const char *more[3] = {"ext_wait1", "ext_wait2", "ext_wait3"};
    for (int i = 0; i < 3; i++) CHECK(cn_ext_register_kernel(late, more[i], affine_cpu) == CN_OK);
    CHECK(cn_ext_register_kernel(late, "ext_wait4", affine_cpu) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "not registered yet") != NULL);
    cn_clear_error();

    cn_backend copy = *cn_backend_get(CN_BACKEND_CPU);
    copy.name = "ext_late";
    int id = cn_backend_register(&copy);
    CHECK(id >= 0);
    cn_device dev = {(int16_t)id, 0, 0, 0};
    CHECK(cn_ext_has_kernel(late, dev) == 1);
    cn_tensor *x = vec(dev, 1, 2, 0);
    cn_tensor *y = call1(late, CN_EXT_ROUTE_AUTO, x, 3, 1);
    th_check_values("the waiting kernel", y, (double[]){4, 7}, 2, 0);
    CHECK(cn_ext_register_kernel(late, "ext_late", masked_cpu) == CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_release(y);
    cn_release(x);
}

/* One backward through test_backward_rules (y = 3 x + 1, z optional and tracked when given)
 * in the current bw_mode: the status of cn_backward, with the gradients checked on success. */
static cn_status backward_in_mode(int mode, int with_z) {
    bw_mode = mode;
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = vec(ad, 1, 2, 1), *z = with_z ? vec(ad, 5, 6, 1) : NULL;
    cn_status st;
    cn_scope_begin();
    cn_tensor *in[2] = {x, z}, *y = NULL;
    double reals[2] = {3, 1};
    CHECK(cn_ext_call(rules, CN_EXT_ROUTE_AUTO, in, NULL, NULL, reals, &y) == CN_OK);
    cn_grads *g = cn_backward(cn_sum(y));
    st = g ? CN_OK : cn_last_status();
    if (g) { /* d(sum(3x + 1))/dx = 3 (1 where the backward passes grad_out); z: x's, if any */
        double w = mode == BW_GIVEN_RETAINED ? 1 : 3;
        th_check_values("grad x", cn_grad(g, x), (double[]){w, w}, 2, 0);
        if (mode == BW_SHARED_RETAINED)
            th_check_values("grad z", cn_grad(g, z), (double[]){w, w}, 2, 0);
    }
    cn_grads_free(g);
    cn_scope_end();
    cn_release(x);
    cn_release(z);
    return st;
}

/* Expects the backward in `mode` to fail with status and a message naming the op and the input
 * `needle`; then the same graph shape works again in a right mode (the runtime is usable). */
static void expect_backward_failure(int mode, int with_z, cn_status status, const char *needle) {
    cn_clear_error();
    CHECK(backward_in_mode(mode, with_z) == status);
    CHECK(strstr(cn_last_error(), "test_backward_rules") != NULL);
    if (!strstr(cn_last_error(), needle)) {
        fprintf(stderr, "mode %d: message \"%s\" lacks \"%s\"\n", mode, cn_last_error(), needle);
        th_checks_failed++;
    }
    cn_clear_error();
    CHECK(backward_in_mode(BW_MADE, with_z) == CN_OK);
}

/* The ownership rule of a backward's results: a tensor it made goes into grad_in as it is, a
 * tensor it was given goes in cn_retain-ed; breaking it either way is an error, not a leak (the
 * runner counts live tensors) nor a double release. */
static void test_backward_ownership_rule(void) {
    CHECK(backward_in_mode(BW_MADE, 0) == CN_OK);
    CHECK(backward_in_mode(BW_GIVEN_RETAINED, 0) == CN_OK);
    CHECK(backward_in_mode(BW_SHARED_RETAINED, 1) == CN_OK);
    expect_backward_failure(BW_MADE_RETAINED, 0, CN_ERR_INVALID_ARG, "without cn_retain");
    expect_backward_failure(BW_MADE_RETAINED, 0, CN_ERR_INVALID_ARG, "gradient of 'x'");
    expect_backward_failure(BW_GIVEN_BORROWED, 0, CN_ERR_INVALID_ARG, "cn_retain(t)");
    expect_backward_failure(BW_GIVEN_BORROWED, 0, CN_ERR_INVALID_ARG, "gradient of 'x'");
    expect_backward_failure(BW_SHARED_BORROWED, 1, CN_ERR_INVALID_ARG, "every entry after");
}

/* A gradient must have its input's dtype and concrete device, not only its shape. */
static void test_backward_gradient_checks(void) {
    expect_backward_failure(BW_F32, 0, CN_ERR_DTYPE, "'x', which is f64");
    expect_backward_failure(BW_AUTODIFF, 0, CN_ERR_DEVICE_MISMATCH, "'x', which lives on cpu:0");
    expect_backward_failure(BW_OTHER_BACKEND, 0, CN_ERR_DEVICE_MISMATCH, "ext_other:0");
}

/* The first float input a plain constant (on the CPU, or untracked on the autodiff device), a
 * later one tracked: the output is tracked on the autodiff device, and d = p.a - p.b gives the
 * tracked p.b the gradient -1. */
static void test_constant_first_tracked_later(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    for (int k = 0; k < 2; k++) {
        cn_tensor *a = vec(k ? ad : cn_cpu(), 3, 4, 0), *b = vec(ad, 1, 2, 1);
        cn_tensor *in[2] = {a, b}, *out[2] = {NULL, NULL};
        int tags[1] = {0};
        cn_scope_begin();
        CHECK(cn_ext_call(sumdiff, CN_EXT_ROUTE_AUTO, in, tags, NULL, NULL, out) == CN_OK);
        CHECK(out[1] && cn_requires_grad(out[1]) && cn_device_eq(cn_device_of(out[1]), ad));
        th_check_values("d", out[1], (double[]){2, 2}, 2, 0);
        cn_grads *g = cn_backward(cn_sum(out[1]));
        th_check_values("grad of the tracked p.b", g ? cn_grad(g, b) : NULL,
                        (double[]){-1, -1}, 2, 0);
        CHECK(sumdiff_needs[0] == 0 && sumdiff_needs[1] == 1);
        cn_grads_free(g);
        cn_scope_end();
        cn_release(a);
        cn_release(b);
    }
}

/* An input modified in place after the op saved it: the error names the op, not "extension". */
static void test_inplace_error_names_op(void) {
    cn_device ad = cn_autodiff(cn_cpu());
    cn_tensor *x = vec(ad, 1, 2, 1), *ones = vec(cn_cpu(), 1, 1, 0);
    cn_scope_begin();
    cn_tensor *y = call1(affine, CN_EXT_ROUTE_AUTO, x, 3, 1);
    cn_no_grad_begin();
    CHECK(cn_copy_(x, ones) == CN_OK);
    cn_no_grad_end();
    cn_clear_error();
    CHECK_FAILS((cn_tensor *)cn_backward(cn_sum(y)), CN_ERR_AUTODIFF_MODIFIED,
                "input 0 of 'test_affine'");
    cn_scope_end();
    cn_release(x);
    cn_release(ones);
}

/* One router: an extension call is routed and launched as a built-in op is. Devices that differ
 * fail with the router's own message (the one cn_add gives, with the op's argument names); outputs
 * without elements skip the kernel, as for built-in ops; a kernel that fails without a message
 * gets one naming the op and the backend. */
static void test_routed_like_builtin_ops(void) {
    cn_device other = {(int16_t)other_backend, 0, 0, 0};
    cn_tensor *a = vec(cn_cpu(), 1, 2, 0), *b = vec(other, 3, 4, 0);
    const char *rule = "so both live on one device";
    CHECK_FAILS(cn_add(a, b), CN_ERR_DEVICE_MISMATCH, rule);
    cn_tensor *in[2] = {a, b}, *out[2] = {NULL, NULL};
    int tags[1] = {0};
    double av[2] = {1, 2}, reals[2] = {3, 1};
    expect_failure(cn_ext_call(sumdiff, CN_EXT_ROUTE_AUTO, in, tags, NULL, NULL, out),
                   CN_ERR_DEVICE_MISMATCH, rule, a, av);

    int64_t zero = 0;
    cn_tensor *empty = cn_zeros(&zero, 1, CN_F64, cn_cpu()), *y;
    counted_runs = 0;
    y = call1(counted, CN_EXT_ROUTE_AUTO, empty, 3, 1);
    CHECK(y && cn_ndim(y) == 1 && cn_shape(y)[0] == 0 && counted_runs == 0);
    cn_release(y);
    y = call1(counted, CN_EXT_ROUTE_AUTO, a, 3, 1);
    CHECK(y && counted_runs == 1);
    cn_release(y);

    cn_clear_error();
    cn_status s = cn_ext_call(silent, CN_EXT_ROUTE_AUTO, &a, NULL, NULL, reals, &y);
    CHECK(y == NULL);
    expect_failure(s, CN_ERR_INVALID_ARG, "the kernel of 'test_silent_failure' for backend 'cpu' "
                   "failed without a message", a, av);
    cn_release(empty);
    cn_release(a);
    cn_release(b);
}

/* Under CN_CHECKPOINT_BALANCED a memory-bound extension op keeps no outputs: its backward runs
 * the kernel again, through the replay the extension layer hands the graph. Elsewhere the kernel
 * runs once. */
static void test_checkpoint_replays_kernel(void) {
    cn_device devs[2] = {cn_autodiff(cn_cpu()),
                         cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED)};
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = vec(devs[k], 1, 2, 1);
        cn_scope_begin();
        counted_runs = 0;
        cn_tensor *y = call1(counted, CN_EXT_ROUTE_AUTO, x, 3, 1);
        CHECK(y && counted_runs == 1);
        cn_grads *g = cn_backward(cn_sum(y));
        th_check_values("replayed gradient", g ? cn_grad(g, x) : NULL, (double[]){3, 3}, 2, 0);
        if (counted_runs != 1 + k) {
            fprintf(stderr, "device %d: the kernel ran %d times, want %d\n", k, counted_runs,
                    1 + k);
            th_checks_failed++;
        }
        cn_grads_free(g);
        cn_scope_end();
        cn_release(x);
    }
}

/* Registration: a NULL function is an error of its own (not an earlier one kept), a second
 * kernel or backward is refused and the first stays, and a non-differentiable op takes none. */
static void test_registration_errors(void) {
    double reals[2] = {3, 1};
    cn_clear_error();
    CHECK(cn_ext_call(affine, CN_EXT_ROUTE_AUTO, NULL, NULL, NULL, reals, NULL) != CN_OK);
    CHECK(cn_ext_register_backward(affine, NULL) == CN_ERR_NULL_ARG);
    CHECK(strstr(cn_last_error(), "ext_register_backward") &&
          strstr(cn_last_error(), "'backward'") && strstr(cn_last_error(), "test_affine"));
    cn_clear_error();
    CHECK(cn_ext_call(affine, CN_EXT_ROUTE_AUTO, NULL, NULL, NULL, reals, NULL) != CN_OK);
    CHECK(cn_ext_register_kernel(affine, "cpu", NULL) == CN_ERR_NULL_ARG);
    CHECK(strstr(cn_last_error(), "ext_register_kernel") && strstr(cn_last_error(), "'kernel'"));
    CHECK(cn_ext_register_kernel(affine, NULL, affine_cpu) == CN_ERR_NULL_ARG);
    CHECK(strstr(cn_last_error(), "'backend'") != NULL);
    cn_clear_error();
    /* a NULL op from a failed call keeps that call's error */
    CHECK(cn_ext_find("no_such_op") == NULL);
    cn_set_error(CN_ERR_INVALID_ARG, "earlier", "an earlier failure");
    CHECK(cn_ext_register_backward(NULL, affine_backward) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "an earlier failure") != NULL);
    cn_clear_error();

    /* the same function again is no change; another is refused and the first keeps working */
    CHECK(cn_ext_register_kernel(affine, "cpu", affine_cpu) == CN_OK);
    CHECK(cn_ext_register_backward(affine, affine_backward) == CN_OK);
    CHECK(cn_ext_register_kernel(affine, "cpu", masked_cpu) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "'test_affine'") && strstr(cn_last_error(), "'cpu'"));
    CHECK(cn_ext_register_backward(affine, sumdiff_backward) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "'test_affine' already has a backward") != NULL);
    cn_clear_error();
    cn_tensor *x = vec(cn_autodiff(cn_cpu()), 1, 2, 1);
    cn_scope_begin();
    cn_tensor *y = call1(affine, CN_EXT_ROUTE_AUTO, x, 3, 1);
    th_check_values("the first kernel", y, (double[]){4, 7}, 2, 0);
    cn_grads *g = cn_backward(cn_sum(y));
    th_check_values("the first backward", g ? cn_grad(g, x) : NULL, (double[]){3, 3}, 2, 0);
    cn_grads_free(g);

    /* a backward for an op declared non-differentiable would never run */
    CHECK(cn_ext_register_backward(nondiff, affine_backward) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "'test_non_differentiable'") &&
          strstr(cn_last_error(), "non-differentiable"));
    cn_clear_error();
    y = call1(nondiff, CN_EXT_ROUTE_AUTO, x, 3, 1);
    CHECK(y && !cn_requires_grad(y));
    cn_scope_end();
    cn_release(x);
}

int main(void) {
    define_ops();
    CHECK(affine && affine_mb && concrete_only && nondiff && pick && pair && sumdiff && masked &&
          rules && counted && silent);
    RUN(test_concrete_call);
    RUN(test_autodiff_route_and_gradient);
    RUN(test_multi_output_struct);
    RUN(test_union_variants);
    RUN(test_reached_concrete_dispatch);
    RUN(test_nonfloat_primitive);
    RUN(test_plain_enabled);
    RUN(test_mixed_tracking);
    RUN(test_devices_and_kernels);
    RUN(test_schema_errors);
    RUN(test_kernel_for_a_later_backend);
    RUN(test_backward_ownership_rule);
    RUN(test_backward_gradient_checks);
    RUN(test_constant_first_tracked_later);
    RUN(test_inplace_error_names_op);
    RUN(test_registration_errors);
    RUN(test_routed_like_builtin_ops);
    RUN(test_checkpoint_replays_kernel);
    RUN(test_quantized_input);
    return th_finish();
}
