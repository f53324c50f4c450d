/* Losses, optimizers, schedules and clipping of nn.h against references written here in double:
 * cross-entropy (with and without label smoothing) against a direct log-sum-exp computation and
 * its gradient against finite differences of that reference; MSE; SGD (momentum, dampening,
 * Nesterov, weight decay) and AdamW against hand-written re-implementations of PyTorch's update
 * rules over three steps; a step that fails (every allocation in turn) changes nothing; StepLR
 * and CosineAnnealingLR against tabulated values and PyTorch's recursive forms; clipping against
 * a computed norm; and a Linear-ReLU-Linear model trained for 200 steps. The fused SGD step
 * (cn_sgd_step_, cinder/ops.h) is also tested directly. */
#include "harness.h"

static const cn_device CPU = {CN_BACKEND_CPU, 0, 0, 0};

static cn_device ad(void) { return cn_autodiff(cn_cpu()); }

static double scalar(cn_tensor *t) {
    double v = NAN;
    if (!t || th_read(t, &v) != 1) {
        fprintf(stderr, "scalar: cannot read (%s)\n", cn_last_error());
        th_checks_failed++;
    }
    return v;
}

/* A tracked leaf on cn_autodiff(inner) with the given values. */
static cn_tensor *leaf_on(const double *v, const int64_t *shape, int ndim, cn_dtype dt,
                          cn_device inner) {
    cn_tensor *t = th_tensor(v, shape, ndim, dt);
    cn_tensor *a = cn_to_device(t, cn_autodiff(inner));
    cn_release(t);
    return cn_require_grad(a);
}

/* A tracked leaf on the autodiff CPU device with the given values. */
static cn_tensor *leaf(const double *v, const int64_t *shape, int ndim, cn_dtype dt) {
    return leaf_on(v, shape, ndim, dt, CPU);
}

/* ---- cross-entropy and MSE ------------------------------------------------------------------- */

enum { CE_N = 4, CE_C = 5 };

/* The definition, in double: mean_i -((1 - s) logp[i, y_i] + s mean_c logp[i, c]). */
static double ref_cross_entropy(const double *z, const int64_t *y, double s) {
    double total = 0;
    for (int i = 0; i < CE_N; i++) {
        double mx = -INFINITY, sum = 0, mean_logp = 0;
        for (int c = 0; c < CE_C; c++)
            mx = fmax(mx, z[i * CE_C + c]);
        for (int c = 0; c < CE_C; c++)
            sum += exp(z[i * CE_C + c] - mx);
        double lse = mx + log(sum);
        for (int c = 0; c < CE_C; c++)
            mean_logp += (z[i * CE_C + c] - lse) / CE_C;
        total += -((1 - s) * (z[i * CE_C + y[i]] - lse) + s * mean_logp);
    }
    return total / CE_N;
}

static void test_cross_entropy_matches_reference_and_finite_differences(void) {
    cn_scope_begin();
    const double z[CE_N * CE_C] = {0.5,  -1.2, 2.0, 0.1,  -0.3, 1.5, 1.4,  -2.0, 0.0,  0.7,
                                   -0.2, 0.3,  0.9, -1.1, 2.2,  3.0, -3.0, 0.5,  0.25, -0.75};
    const int64_t y[CE_N] = {2, 0, 4, 1}, zs[2] = {CE_N, CE_C}, ys[1] = {CE_N};
    cn_tensor *labels = cn_from_data(y, ys, 1, CN_I64, CPU);
    const double smoothing[3] = {0.0, 0.1, 0.5};
    for (int k = 0; k < 3; k++) {
        const double s = smoothing[k];
        cn_tensor *logits = leaf(z, zs, 2, CN_F64);
        cn_tensor *loss = cn_cross_entropy(logits, labels, s);
        CHECK(loss && cn_ndim(loss) == 0 && cn_requires_grad(loss));
        CHECK_NEAR(scalar(loss), ref_cross_entropy(z, y, s), 1e-14);
        /* f32 logits and i32 labels give the same within f32 rounding */
        cn_tensor *l32 = cn_cross_entropy(th_tensor(z, zs, 2, CN_F32), cn_cast(labels, CN_I32), s);
        CHECK_NEAR(scalar(l32), ref_cross_entropy(z, y, s), 1e-6);
        cn_grads *g = cn_backward(loss);
        double *gz = th_values(cn_grad(g, logits));
        cn_grads_free(g);
        /* central differences of the reference (an independent oracle) */
        const double h = 1e-5;
        for (int i = 0; i < CE_N * CE_C; i++) {
            double zp[CE_N * CE_C], zm[CE_N * CE_C];
            memcpy(zp, z, sizeof zp);
            memcpy(zm, z, sizeof zm);
            zp[i] += h;
            zm[i] -= h;
            double fd = (ref_cross_entropy(zp, y, s) - ref_cross_entropy(zm, y, s)) / (2 * h);
            CHECK_NEAR(gz[i], fd, 1e-8);
        }
        free(gz);
    }
    /* log-softmax keeps huge logits finite */
    const double big[2] = {1000, 0};
    const int64_t bs[2] = {1, 2}, one[1] = {1}, label1 = 1;
    cn_tensor *lb = cn_cross_entropy(th_tensor(big, bs, 2, CN_F32),
                                     cn_from_data(&label1, one, 1, CN_I64, CPU), 0.0);
    CHECK_NEAR(scalar(lb), 1000.0, 1e-6);
    /* errors */
    cn_tensor *logits = th_tensor(z, zs, 2, CN_F64);
    CHECK_FAILS(cn_cross_entropy(logits, labels, 1.5), CN_ERR_INVALID_ARG, "label_smoothing");
    CHECK_FAILS(cn_cross_entropy(logits, cn_cast(labels, CN_F64), 0), CN_ERR_KIND, "labels");
    CHECK_FAILS(cn_cross_entropy(logits, cn_slice(labels, 0, 0, 3, 1), 0), CN_ERR_SHAPE, "[N]");
    const int64_t bad[4] = {0, 5, 1, 2};
    CHECK_FAILS(cn_cross_entropy(logits, cn_from_data(bad, ys, 1, CN_I64, CPU), 0), CN_ERR_INDEX,
                "");
    cn_scope_end();
}

/* A label outside [0, C) is the caller's error in cn_cross_entropy: the message names
 * cross_entropy (the op called), not the internal gather, and 'labels' with the first bad value
 * and its position; for i64 and i32 labels, on the CPU and on the autodiff device, with label
 * smoothing too. Nothing leaks, and the logits are usable afterwards. */
static void test_cross_entropy_label_out_of_range_names_cross_entropy(void) {
    cn_scope_begin();
    const double z[CE_N * CE_C] = {0};
    const int64_t zs[2] = {CE_N, CE_C}, ys[1] = {CE_N};
    const int64_t too_big[CE_N] = {0, 1, 5, 2}, negative[CE_N] = {-1, 0, 1, 7};
    const cn_device devices[2] = {CPU, cn_autodiff(CPU)};
    for (int d = 0; d < 2; d++) {
        cn_tensor *logits = cn_to_device(th_tensor(z, zs, 2, CN_F64), devices[d]);
        if (d == 1) logits = cn_require_grad(logits);
        for (int dt = 0; dt < 2; dt++) {
            for (int which = 0; which < 2; which++) {
                cn_tensor *labels = cn_from_data(which ? negative : too_big, ys, 1, CN_I64,
                                                 devices[d]);
                if (dt == 1) labels = cn_cast(labels, CN_I32);
                int64_t live = cn_live_tensors();
                for (int smooth = 0; smooth < 2; smooth++) {
                    cn_clear_error();
                    cn_tensor *loss = cn_cross_entropy(logits, labels, smooth ? 0.1 : 0.0);
                    CHECK(loss == NULL);
                    CHECK(cn_last_status() == CN_ERR_INDEX);
                    const char *msg = cn_last_error();
                    const char *want = which ? "holds -1 at position 0" : "holds 5 at position 2";
                    if (strncmp(msg, "cross_entropy: ", 15) != 0 || strstr(msg, "gather") ||
                        !strstr(msg, "'labels'") || !strstr(msg, want) ||
                        !strstr(msg, "0..4")) {
                        fprintf(stderr, "device %d dtype %d: message \"%s\"\n", d, dt, msg);
                        th_checks_failed++;
                    }
                    CHECK(cn_live_tensors() == live);
                }
            }
        }
        /* the logits still work */
        const int64_t good[CE_N] = {0, 1, 4, 2};
        cn_clear_error();
        cn_tensor *loss = cn_cross_entropy(logits, cn_from_data(good, ys, 1, CN_I64, devices[d]),
                                           0.0);
        CHECK_NEAR(scalar(loss), log((double)CE_C), 1e-14); /* uniform logits: ln C */
    }
    cn_scope_end();
}

static void test_mse_loss_value_and_gradient(void) {
    cn_scope_begin();
    const double p[6] = {0.5, -1, 2, 3, 0, 1.25}, t[6] = {1, -1, 0, 2.5, -0.5, 1};
    const int64_t s[2] = {2, 3};
    cn_tensor *pred = leaf(p, s, 2, CN_F64);
    cn_tensor *loss = cn_mse_loss(pred, th_tensor(t, s, 2, CN_F64));
    double want = 0, gwant[6];
    for (int i = 0; i < 6; i++) {
        want += (p[i] - t[i]) * (p[i] - t[i]) / 6;
        gwant[i] = 2 * (p[i] - t[i]) / 6;
    }
    CHECK_NEAR(scalar(loss), want, 1e-15);
    cn_grads *g = cn_backward(loss);
    th_check_values("mse grad", cn_grad(g, pred), gwant, 6, 1e-15);
    cn_grads_free(g);
    const int64_t s2[1] = {3};
    CHECK_FAILS(cn_mse_loss(pred, cn_zeros(s2, 1, CN_F64, CPU)), CN_ERR_SHAPE, "same shape");
    cn_scope_end();
}

/* Wrong kinds and dtypes given to a loss are reported by the loss the caller called, naming its
 * own arguments, not by the internal op that would trip over them (log_softmax, sub, mean). */
static void test_loss_kind_and_dtype_errors_name_the_loss(void) {
    cn_scope_begin();
    const int64_t s[2] = {2, 3}, ls[1] = {2}, labels[2] = {0, 2};
    cn_tensor *y = cn_from_data(labels, ls, 1, CN_I64, CPU);
    CHECK_FAILS(cn_cross_entropy(cn_zeros(s, 2, CN_I64, CPU), y, 0.0), CN_ERR_KIND,
                "cross_entropy: ");
    CHECK_FAILS(cn_cross_entropy(cn_zeros(s, 2, CN_I32, CPU), y, 0.0), CN_ERR_KIND, "'logits'");
    cn_tensor *f32 = cn_zeros(s, 2, CN_F32, CPU);
    CHECK_FAILS(cn_mse_loss(cn_zeros(s, 2, CN_I64, CPU), cn_zeros(s, 2, CN_I64, CPU)),
                CN_ERR_KIND, "mse_loss: ");
    CHECK_FAILS(cn_mse_loss(f32, cn_zeros(s, 2, CN_F64, CPU)), CN_ERR_DTYPE, "mse_loss: ");
    CHECK_FAILS(cn_mse_loss(f32, cn_zeros(s, 2, CN_I64, CPU)), CN_ERR_DTYPE, "'target'");
    cn_scope_end();
}

/* ---- optimizers on a quadratic ------------------------------------------------------------------
 * * loss = sum(a * (w - c)^2) over two parameters, so g = 2 a (w - c). */

enum { Q_N = 6 }; /* parameter 0: [2, 2] (4 values), parameter 1: [2] (2 values) */
static const double Q_W0[Q_N] = {0.5, -1.0, 2.0, 0.25, 1.5, -0.5};
static const double Q_A[Q_N] = {1.0, 0.5, 2.0, 0.1, 3.0, 1.5};
static const double Q_C[Q_N] = {0.0, 1.0, -1.0, 0.5, 0.2, 0.3};

typedef struct quad {
    cn_tensor *w1, *w2; /* leaves */
    cn_param params[2];
} quad;

/* The quadratic's parameters on cn_autodiff(inner). */
static quad quad_on(cn_dtype dt, cn_device inner) {
    quad q;
    const int64_t s1[2] = {2, 2}, s2[1] = {2};
    q.w1 = leaf_on(Q_W0, s1, 2, dt, inner);
    q.w2 = leaf_on(Q_W0 + 4, s2, 1, dt, inner);
    q.params[0] = (cn_param){"w1", q.w1};
    q.params[1] = (cn_param){"w2", q.w2};
    return q;
}

static quad quad_new(cn_dtype dt) { return quad_on(dt, CPU); }

static cn_grads *quad_backward(quad *q) {
    cn_tensor *w = cn_cat((cn_tensor *[]){cn_reshape(q->w1, (int64_t[]){4}, 1), q->w2}, 2, 0);
    const int64_t s[1] = {Q_N};
    cn_dtype dt = cn_dtype_of(q->w1);
    cn_device dev = cn_inner_device(cn_device_of(q->w1)); /* the constants live beside w */
    cn_tensor *c = cn_to_device(th_tensor(Q_C, s, 1, dt), dev);
    cn_tensor *a = cn_to_device(th_tensor(Q_A, s, 1, dt), dev);
    cn_tensor *d = cn_sub(w, c);
    return cn_backward(cn_sum(cn_mul(a, cn_mul(d, d))));
}

static void quad_values(quad *q, double *out) {
    double *a = th_values(q->w1), *b = th_values(q->w2);
    memcpy(out, a, 4 * sizeof(double));
    memcpy(out + 4, b, 2 * sizeof(double));
    free(a);
    free(b);
}

typedef struct sgd_config {
    double lr, momentum, dampening, weight_decay;
    int nesterov;
} sgd_config;

/* torch.optim.SGD's _single_tensor_sgd, element by element. */
static void ref_sgd(const sgd_config *c, int steps, double *w) {
    double buf[Q_N];
    for (int t = 0; t < steps; t++)
        for (int i = 0; i < Q_N; i++) {
            double g = 2 * Q_A[i] * (w[i] - Q_C[i]);
            if (c->weight_decay != 0) g += c->weight_decay * w[i];
            if (c->momentum != 0) {
                if (t == 0)
                    buf[i] = g;
                else
                    buf[i] = c->momentum * buf[i] + (1 - c->dampening) * g;
                if (c->nesterov)
                    g = g + c->momentum * buf[i];
                else
                    g = buf[i];
            }
            w[i] -= c->lr * g;
        }
}

/* Three steps of SGD on the quadratic on cn_autodiff(inner), each against ref_sgd. */
static void run_sgd_on(const sgd_config *c, cn_dtype dt, double tol, cn_device inner) {
    cn_scope_begin();
    quad q = quad_on(dt, inner);
    cn_optimizer *opt =
        cn_sgd_new(q.params, 2, c->lr, c->momentum, c->dampening, c->nesterov, c->weight_decay);
    CHECK(opt != NULL);
    for (int step = 1; step <= 3 && opt; step++) {
        cn_grads *g = quad_backward(&q);
        CHECK(cn_optimizer_step(opt, g) == CN_OK);
        cn_grads_free(g);
        double got[Q_N], want[Q_N];
        memcpy(want, Q_W0, sizeof want);
        ref_sgd(c, step, want);
        quad_values(&q, got);
        for (int i = 0; i < Q_N; i++)
            CHECK_NEAR(got[i], want[i], tol);
    }
    CHECK(cn_requires_grad(q.w1) && cn_requires_grad(q.w2));
    cn_optimizer_free(opt);
    cn_scope_end();
}

static void run_sgd(const sgd_config *c, cn_dtype dt, double tol) { run_sgd_on(c, dt, tol, CPU); }

static void test_sgd_matches_pytorch_update_rules(void) {
    const sgd_config configs[] = {
        {0.1, 0, 0, 0, 0},      /* plain */
        {0.05, 0.9, 0, 0, 0},   /* momentum */
        {0.05, 0.9, 0.3, 0, 0}, /* momentum with dampening */
        {0.05, 0.9, 0, 0, 1},   /* Nesterov */
        {0.1, 0, 0, 0.2, 0},    /* weight decay */
        {0.05, 0.5, 0, 0.1, 1}, /* everything */
    };
    for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
        run_sgd(&configs[k], CN_F64, 1e-14);
        run_sgd(&configs[k], CN_F32, 2e-6);
    }
    cn_scope_begin();
    quad q = quad_new(CN_F32);
    CHECK(cn_sgd_new(q.params, 2, 0.1, 0.0, 0, 1, 0) == NULL); /* Nesterov without momentum */
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG);
    CHECK(cn_sgd_new(q.params, 2, -0.1, 0.0, 0, 0, 0) == NULL);
    CHECK(cn_sgd_new(q.params, 0, 0.1, 0.0, 0, 0, 0) == NULL);
    cn_param twice[2] = {q.params[0], q.params[0]};
    CHECK(cn_sgd_new(twice, 2, 0.1, 0.0, 0, 0, 0) == NULL && strstr(cn_last_error(), "twice"));
    cn_clear_error();
    cn_scope_end();
}

typedef struct adamw_config {
    double lr, beta1, beta2, eps, weight_decay;
} adamw_config;

/* torch.optim.AdamW's _single_tensor_adamw (amsgrad off), element by element. */
static void ref_adamw(const adamw_config *c, int steps, double *w) {
    double m[Q_N] = {0}, v[Q_N] = {0};
    for (int t = 1; t <= steps; t++)
        for (int i = 0; i < Q_N; i++) {
            double g = 2 * Q_A[i] * (w[i] - Q_C[i]);
            w[i] *= 1 - c->lr * c->weight_decay;
            m[i] += (g - m[i]) * (1 - c->beta1); /* exp_avg.lerp_(grad, 1 - beta1) */
            v[i] = v[i] * c->beta2 + (1 - c->beta2) * g * g;
            double bc1 = 1 - pow(c->beta1, t), bc2 = 1 - pow(c->beta2, t);
            double denom = sqrt(v[i]) / sqrt(bc2) + c->eps;
            w[i] -= c->lr / bc1 * m[i] / denom;
        }
}

static void run_adamw_on(const adamw_config *c, cn_dtype dt, double tol, cn_device inner) {
    cn_scope_begin();
    quad q = quad_on(dt, inner);
    cn_optimizer *opt =
        cn_adamw_new(q.params, 2, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay);
    CHECK(opt != NULL);
    for (int step = 1; step <= 3 && opt; step++) {
        cn_grads *g = quad_backward(&q);
        CHECK(cn_optimizer_step(opt, g) == CN_OK);
        cn_grads_free(g);
        double got[Q_N], want[Q_N];
        memcpy(want, Q_W0, sizeof want);
        ref_adamw(c, step, want);
        quad_values(&q, got);
        for (int i = 0; i < Q_N; i++)
            CHECK_NEAR(got[i], want[i], tol);
    }
    cn_optimizer_free(opt);
    cn_scope_end();
}

static void run_adamw(const adamw_config *c, cn_dtype dt, double tol) {
    run_adamw_on(c, dt, tol, CPU);
}

static void test_adamw_matches_pytorch_update_rules(void) {
    const adamw_config configs[] = {
        {1e-3, 0.9, 0.999, 1e-8, 0.01}, /* PyTorch's defaults */
        {0.1, 0.8, 0.99, 1e-3, 0.5},
        {0.05, 0.0, 0.5, 0.0, 0.0},
    };
    for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
        run_adamw(&configs[k], CN_F64, 1e-13);
        run_adamw(&configs[k], CN_F32, 2e-6);
    }
    cn_scope_begin();
    quad q = quad_new(CN_F32);
    CHECK(cn_adamw_new(q.params, 2, 0.1, 1.0, 0.999, 1e-8, 0) == NULL &&
          cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_scope_end();
}

/* Parameters without a gradient are skipped (and leave no error behind); the learning rate can
 * change between steps; state survives the scopes the steps run in. */
static void test_step_skips_params_without_gradient_and_state_outlives_scopes(void) {
    cn_scope_begin();
    quad q = quad_new(CN_F64);
    const double unused_v[3] = {1, 2, 3};
    const int64_t s3[1] = {3};
    cn_tensor *unused = leaf(unused_v, s3, 1, CN_F64);
    cn_param params[3] = {q.params[0], q.params[1], {"unused", unused}};
    cn_optimizer *opt = cn_sgd_new(params, 3, 0.05, 0.9, 0, 0, 0);
    sgd_config c = {0.05, 0.9, 0, 0, 0};
    int64_t live = cn_live_tensors(), after_first = 0;
    for (int step = 1; step <= 3; step++) {
        cn_scope_begin(); /* a training loop's scope: state made in it must survive */
        cn_grads *g = quad_backward(&q);
        cn_clear_error();
        CHECK(cn_optimizer_step(opt, g) == CN_OK);
        CHECK(cn_last_status() == CN_OK);
        cn_grads_free(g);
        cn_scope_end();
        if (step == 1)
            after_first = cn_live_tensors();
        else
            CHECK(cn_live_tensors() == after_first); /* state replaced, not accumulated */
    }
    CHECK(after_first == live + 2); /* one momentum buffer per parameter with a gradient */
    double got[Q_N], want[Q_N];
    memcpy(want, Q_W0, sizeof want);
    ref_sgd(&c, 3, want);
    quad_values(&q, got);
    for (int i = 0; i < Q_N; i++)
        CHECK_NEAR(got[i], want[i], 1e-14);
    th_check_values("unused param", unused, unused_v, 3, 0);
    CHECK(cn_optimizer_set_lr(opt, 0.5) == CN_OK && cn_optimizer_get_lr(opt) == 0.5);
    CHECK(cn_optimizer_set_lr(opt, -1) == CN_ERR_INVALID_ARG && cn_optimizer_get_lr(opt) == 0.5);
    cn_clear_error();
    /* with lr 0 and no momentum a step changes nothing */
    cn_optimizer *frozen = cn_sgd_new(q.params, 2, 0.0, 0, 0, 0, 0);
    cn_grads *g = quad_backward(&q);
    CHECK(cn_optimizer_step(frozen, g) == CN_OK);
    cn_grads_free(g);
    double again[Q_N];
    quad_values(&q, again);
    for (int i = 0; i < Q_N; i++)
        CHECK(again[i] == got[i]);
    cn_optimizer_free(frozen);
    cn_optimizer_free(opt);
    cn_scope_end();
}

static cn_device forwarding_device(int without_fused_steps);

/* SQLite-style: make each allocation of a step fail in turn. A failed step leaves the parameters
 * and the optimizer's state as they were, so retrying it gives exactly the undisturbed result.
 * On the CPU (the fused adamw_step kernel) and on a backend without it (the composed rule, which
 * allocates many temporaries). */
static void failed_step_changes_nothing_on(cn_device dev, int min_failures) {
    const adamw_config c = {0.1, 0.9, 0.999, 1e-8, 0.1};
    double want[Q_N];
    memcpy(want, Q_W0, sizeof want);
    ref_adamw(&c, 2, want);
    int failures = 0, done = 0;
    for (int64_t k = 1; k < 2000 && !done; k++) {
        cn_scope_begin();
        quad q = quad_on(CN_F64, dev);
        cn_optimizer *opt =
            cn_adamw_new(q.params, 2, c.lr, c.beta1, c.beta2, c.eps, c.weight_decay);
        cn_grads *g = quad_backward(&q);
        CHECK(cn_optimizer_step(opt, g) == CN_OK);
        cn_grads_free(g);
        double before[Q_N], after[Q_N];
        quad_values(&q, before);
        g = quad_backward(&q);
        cn_alloc_fail_after(k);
        cn_status s = cn_optimizer_step(opt, g);
        cn_alloc_fail_after(0);
        if (s != CN_OK) {
            failures++;
            CHECK(s == CN_ERR_OUT_OF_MEMORY);
            quad_values(&q, after);
            CHECK(memcmp(before, after, sizeof before) == 0);
            cn_clear_error();
            CHECK(cn_optimizer_step(opt, g) == CN_OK); /* the retry */
        } else {
            done = 1;
        }
        cn_grads_free(g);
        quad_values(&q, after);
        for (int i = 0; i < Q_N; i++)
            CHECK_NEAR(after[i], want[i], 1e-13);
        cn_optimizer_free(opt);
        cn_scope_end();
    }
    printf("     a step of AdamW on 2 parameters failed cleanly at each of its %d allocations\n",
           failures);
    CHECK(done && failures >= min_failures);
}

static void test_failed_step_changes_nothing(void) {
    failed_step_changes_nothing_on(CPU, 1);
    failed_step_changes_nothing_on(forwarding_device(1), 6);
}

/* ---- the fused SGD step -----------------------------------------------------------------------
 * SGD runs the backend's sgd_step kernel, one in-place pass per parameter. Its oracle is PyTorch's
 * single-tensor rule written out again here in double, element by element. */

/* torch.optim.SGD on one element: p, and buf when momentum != 0, updated in place. */
static void ref_sgd_element(const cn_sgd_hyper *h, int first, double *p, double g, double *buf) {
    double d = g;
    if (h->weight_decay != 0) d += h->weight_decay * *p;
    if (h->momentum != 0) {
        *buf = first ? d : h->momentum * *buf + (1 - h->dampening) * d;
        d = h->nesterov ? d + h->momentum * *buf : *buf;
    }
    *p -= h->lr * d;
}

static const cn_sgd_hyper SGD_CASES[] = {
    {0.1, 0, 0, 0, 0},      /* plain */
    {0.05, 0.9, 0, 0, 0},   /* momentum */
    {0.05, 0.9, 0.3, 0, 0}, /* momentum with dampening */
    {0.05, 0.9, 0, 0, 1},   /* Nesterov */
    {0.1, 0, 0, 0.2, 0},    /* weight decay */
    {0.05, 0.5, 0, 0.1, 1}, /* everything */
};
enum { N_SGD_CASES = sizeof SGD_CASES / sizeof *SGD_CASES };

/* Values in [-1, 1) from a seeded linear congruential generator (inputs only). */
static void fill_values(double *v, int64_t n, uint64_t seed) {
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        v[i] = (double)(seed >> 11) / 4503599627370496.0 - 1.0; /* 2^52 */
    }
}

/* A CPU tensor [r, c] of dt laid out as `layout` (0: contiguous; 1: transposed, the memory of a
 * [c, r] tensor; 2: every other column of an [r, 2c] tensor) with values from seed. */
static cn_tensor *laid_out(int64_t r, int64_t c, cn_dtype dt, int layout, uint64_t seed) {
    int64_t n = r * c * (layout == 2 ? 2 : 1);
    double *v = malloc(sizeof(double) * (size_t)n);
    fill_values(v, n, seed);
    const int64_t contiguous[2] = {r, c}, transposed[2] = {c, r}, wide[2] = {r, 2 * c};
    const int64_t *shape = layout == 1 ? transposed : layout == 2 ? wide : contiguous;
    cn_tensor *base = th_tensor(v, shape, 2, dt), *t = base;
    free(v);
    if (layout == 1) t = cn_transpose(base, 0, 1);
    if (layout == 2) t = cn_slice(base, 1, 0, 2 * c, 2);
    return t;
}

/* cn_sgd_step_ against ref_sgd_element over two steps (the buffer's first step, then a later
 * one), for each case, dtype and layout; the larger sizes take the threaded path and a ragged
 * tail. g may also be a broadcast view (stride 0), as gradients in a cn_grads may be. */
static void test_sgd_step_kernel_matches_double_loop(void) {
    /* 132355 elements: several chunks; 25283: split from the optimizers' 16K (below the 64K of
     * elementwise ops), 3 past a 16-element bound */
    const int64_t sizes[3][2] = {{3, 5}, {257, 515}, {131, 193}};
    const cn_dtype dts[2] = {CN_F64, CN_F32};
    int checked = 0;
    for (int z = 0; z < 3; z++)
        for (int d = 0; d < 2; d++)
            for (int k = 0; k < N_SGD_CASES; k++)
                for (int layout = 0; layout < 4; layout++) {
                    cn_scope_begin();
                    const cn_sgd_hyper *h = &SGD_CASES[k];
                    const int64_t r = sizes[z][0], c = sizes[z][1], n = r * c;
                    const cn_dtype dt = dts[d];
                    /* layouts 0-2: p in that layout, g and buf in the next one (so each pair
                     * of layouts meets); 3: p and buf contiguous, g broadcast along dim 0 */
                    int pl = layout == 3 ? 0 : layout, gl = layout == 3 ? 0 : (layout + 1) % 3;
                    cn_tensor *p = laid_out(r, c, dt, pl, 11 + (uint64_t)k);
                    cn_tensor *buf = h->momentum != 0 ? laid_out(r, c, dt, gl, 99) : NULL;
                    double *pv = th_values(p), *bv = malloc(sizeof(double) * (size_t)n);
                    for (int step = 0; step < 2; step++) {
                        cn_tensor *g = layout == 3
                                           ? cn_expand(laid_out(1, c, dt, 0, 7 + (uint64_t)step),
                                                       (int64_t[]){r, c}, 2)
                                           : laid_out(r, c, dt, gl, 7 + (uint64_t)step);
                        double *gv = th_values(g);
                        CHECK(cn_sgd_step_(p, g, buf, h, step == 0) == CN_OK);
                        for (int64_t i = 0; i < n; i++)
                            ref_sgd_element(h, step == 0, &pv[i], gv[i], &bv[i]);
                        free(gv);
                        const double tol = dt == CN_F64 ? 1e-15 : 1e-6;
                        th_check_values("sgd_step p", p, pv, n, tol);
                        if (buf) th_check_values("sgd_step buf", buf, bv, n, tol);
                        checked++;
                    }
                    free(pv);
                    free(bv);
                    cn_scope_end();
                }
    CHECK(checked == 3 * 2 * N_SGD_CASES * 4 * 2);
    cn_clear_error();
}

/* got is want; an error's message contains needle; CN_SGD_UNFUSED comes with no error set. */
static void check_status(cn_status got, cn_status want, const char *needle) {
    CHECK(got == want);
    if (want != CN_OK && want != CN_SGD_UNFUSED && !strstr(cn_last_error(), needle)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", cn_last_error(), needle);
        th_checks_failed++;
    }
    if (want == CN_SGD_UNFUSED) CHECK(cn_last_status() == CN_OK); /* a signal, not an error */
    cn_clear_error();
}

/* ---- backends that forward to the CPU's kernels ---------------------------------------------- */

static const cn_backend *cpu_table;
static int64_t calls[CN_OP_COUNT];

static cn_status counting_kernel(const cn_kernel_args *a) {
    calls[a->op]++;
    return cpu_table->kernels[a->op](a);
}

/* A registered backend that forwards every CPU kernel and counts the calls; with
 * without_fused_steps, its table lacks CN_OP_SGD_STEP and CN_OP_ADAMW_STEP, like a program's
 * backend written before the ops existed. Registered on first use (the registry lives as long as
 * the process). */
static cn_device forwarding_device(int without_fused_steps) {
    static int ids[2] = {-1, -1};
    int w = without_fused_steps != 0;
    if (ids[w] < 0) {
        cpu_table = cn_backend_get(CN_BACKEND_CPU);
        cn_backend b = *cpu_table;
        b.name = w ? "cpu_without_sgd_step" : "counting_cpu";
        for (int op = 0; op < CN_OP_COUNT; op++)
            b.kernels[op] = cpu_table->kernels[op] ? counting_kernel : NULL;
        if (w) b.kernels[CN_OP_SGD_STEP] = b.kernels[CN_OP_ADAMW_STEP] = NULL;
        ids[w] = cn_backend_register(&b);
        CHECK(ids[w] > 0);
    }
    cn_device d = {(int16_t)ids[w], 0, 0, 0};
    return d;
}

static int64_t calls_except(cn_op op) {
    int64_t n = 0;
    for (int k = 0; k < CN_OP_COUNT; k++)
        if (k != (int)op) n += calls[k];
    return n;
}

/* Every check of cn_sgd_step_ fails cleanly, names sgd_step and the argument, and writes
 * nothing; a backend without the kernel, or a dtype it does not take, is the CN_SGD_UNFUSED
 * signal with no error set. */
static void test_sgd_step_checks_write_nothing(void) {
    cn_scope_begin();
    const int64_t s[2] = {2, 3}, s3[2] = {3, 2};
    const double pv[6] = {1, 2, 3, 4, 5, 6}, gv[6] = {0.5, -1, 2, 0, 1, -2};
    const double bv[6] = {9, 8, 7, 6, 5, 4};
    cn_tensor *p = th_tensor(pv, s, 2, CN_F64), *g = th_tensor(gv, s, 2, CN_F64);
    cn_tensor *buf = th_tensor(bv, s, 2, CN_F64);
    const cn_sgd_hyper plain = {0.1, 0, 0, 0, 0}, mom = {0.1, 0.9, 0, 0, 0};
    check_status(cn_sgd_step_(NULL, g, NULL, &plain, 1), CN_ERR_NULL_ARG, "'p'");
    check_status(cn_sgd_step_(p, NULL, NULL, &plain, 1), CN_ERR_NULL_ARG, "'g'");
    check_status(cn_sgd_step_(p, g, NULL, &mom, 1), CN_ERR_INVALID_ARG, "'buf' is NULL");
    check_status(cn_sgd_step_(p, g, buf, &plain, 1), CN_ERR_INVALID_ARG, "momentum != 0");
    check_status(cn_sgd_step_(p, th_tensor(gv, s3, 2, CN_F64), NULL, &plain, 1), CN_ERR_SHAPE,
                 "sgd_step: incompatible shapes: 'g'");
    check_status(cn_sgd_step_(p, g, cn_reshape(buf, s3, 2), &mom, 1), CN_ERR_SHAPE, "'buf'");
    check_status(cn_sgd_step_(p, th_tensor(gv, s, 2, CN_F32), NULL, &plain, 1), CN_ERR_DTYPE,
                 "'g'");
    check_status(cn_sgd_step_(cn_cast(p, CN_I64), cn_cast(g, CN_I64), NULL, &plain, 1), CN_ERR_KIND,
                 "'p'");
    check_status(cn_sgd_step_(cn_to_device(p, ad()), g, NULL, &plain, 1),
                 CN_ERR_AUTODIFF_REACHED_CONCRETE, "cn_inner(p)");
    check_status(cn_sgd_step_(p, cn_to_device(g, forwarding_device(0)), NULL, &plain, 1),
                 CN_ERR_DEVICE_MISMATCH, "cn_to_device");
    const int64_t row[2] = {1, 3};
    cn_tensor *shared = cn_expand(th_tensor(pv, row, 2, CN_F64), s, 2);
    check_status(cn_sgd_step_(shared, g, NULL, &plain, 1), CN_ERR_INVALID_ARG, "stride 0");
    check_status(cn_sgd_step_(p, g, cn_expand(th_tensor(bv, row, 2, CN_F64), s, 2), &mom, 1),
                 CN_ERR_INVALID_ARG, "'buf'");
    check_status(cn_sgd_step_(p, cn_transpose(cn_transpose(p, 0, 1), 0, 1), NULL, &plain, 1),
                 CN_ERR_INVALID_ARG, "'p' and 'g' share memory");
    check_status(cn_sgd_step_(p, g, g, &mom, 1), CN_ERR_INVALID_ARG, "'g' and 'buf'");
    th_check_values("p after the failed checks", p, pv, 6, 0);
    th_check_values("g after the failed checks", g, gv, 6, 0);
    th_check_values("buf after the failed checks", buf, bv, 6, 0);
    /* the signals: the backend lacks the kernel; a float dtype the kernels do not take */
    cn_device other = forwarding_device(1);
    cn_tensor *po = cn_to_device(p, other), *go = cn_to_device(g, other);
    check_status(cn_sgd_step_check(po, go, NULL, &plain), CN_SGD_UNFUSED, "");
    check_status(cn_sgd_step_(po, go, NULL, &plain, 1), CN_SGD_UNFUSED, "");
    th_check_values("p on a backend without the kernel", po, pv, 6, 0);
    check_status(cn_sgd_step_(cn_cast(p, CN_F16), cn_cast(g, CN_F16), NULL, &plain, 1),
                 CN_SGD_UNFUSED, "");
    check_status(cn_sgd_step_check(p, g, buf, &mom), CN_OK, "");
    cn_scope_end();
}

/* The optimizer's SGD runs one sgd_step kernel per parameter with a gradient and no other
 * kernel (one pass, no temporaries), with PyTorch's numbers; an unused parameter is skipped. */
static void test_sgd_step_is_one_kernel_per_parameter(void) {
    cn_device dev = forwarding_device(0);
    for (int k = 0; k < N_SGD_CASES; k++) {
        const cn_sgd_hyper *h = &SGD_CASES[k];
        const sgd_config c = {h->lr, h->momentum, h->dampening, h->weight_decay, h->nesterov};
        cn_scope_begin();
        quad q = quad_on(CN_F64, dev);
        const double unused_v[3] = {1, 2, 3};
        const int64_t s3[1] = {3};
        cn_tensor *unused = leaf_on(unused_v, s3, 1, CN_F64, dev);
        cn_param params[3] = {q.params[0], {"unused", unused}, q.params[1]};
        cn_optimizer *opt =
            cn_sgd_new(params, 3, c.lr, c.momentum, c.dampening, c.nesterov, c.weight_decay);
        for (int step = 1; step <= 3 && opt; step++) {
            cn_grads *g = quad_backward(&q);
            int64_t fused = calls[CN_OP_SGD_STEP], other = calls_except(CN_OP_SGD_STEP);
            CHECK(cn_optimizer_step(opt, g) == CN_OK);
            CHECK(calls[CN_OP_SGD_STEP] == fused + 2);
            CHECK(calls_except(CN_OP_SGD_STEP) == other);
            cn_grads_free(g);
            double got[Q_N], want[Q_N];
            memcpy(want, Q_W0, sizeof want);
            ref_sgd(&c, step, want);
            quad_values(&q, got);
            for (int i = 0; i < Q_N; i++)
                CHECK_NEAR(got[i], want[i], 1e-14);
        }
        th_check_values("unused param", unused, unused_v, 3, 0);
        cn_optimizer_free(opt);
        cn_scope_end();
    }
}

/* A backend whose table lacks sgd_step gets the composed rule: the same numbers. */
static void test_sgd_falls_back_to_composed_ops_without_the_kernel(void) {
    cn_device dev = forwarding_device(1);
    for (int k = 0; k < N_SGD_CASES; k++) {
        const cn_sgd_hyper *h = &SGD_CASES[k];
        const sgd_config c = {h->lr, h->momentum, h->dampening, h->weight_decay, h->nesterov};
        int64_t subs = calls[CN_OP_SUB];
        run_sgd_on(&c, CN_F64, 1e-14, dev);
        run_sgd_on(&c, CN_F32, 2e-6, dev);
        CHECK(calls[CN_OP_SUB] > subs); /* p - lr * d, composed */
    }
}

/* Every check of cn_adamw_step_ fails cleanly, names adamw_step and the argument, and writes
 * nothing; a backend without the kernel is the CN_SGD_UNFUSED signal with no error set. */
static void test_adamw_step_checks_write_nothing(void) {
    cn_scope_begin();
    const int64_t s[2] = {2, 3}, s3[2] = {3, 2}, row[2] = {1, 3};
    const double pv[6] = {1, 2, 3, 4, 5, 6}, gv[6] = {0.5, -1, 2, 0, 1, -2};
    const double mv[6] = {9, 8, 7, 6, 5, 4}, vv[6] = {1, 1, 2, 2, 3, 3};
    cn_tensor *p = th_tensor(pv, s, 2, CN_F64), *g = th_tensor(gv, s, 2, CN_F64);
    cn_tensor *m = th_tensor(mv, s, 2, CN_F64), *v = th_tensor(vv, s, 2, CN_F64);
    const cn_adamw_hyper h = {0.1, 0.9, 0.999, 1e-8, 0.01, 1};
    cn_adamw_hyper bad = h;
    check_status(cn_adamw_step_(p, g, m, v, NULL, 1), CN_ERR_NULL_ARG, "'h'");
    check_status(cn_adamw_step_(p, g, NULL, v, &h, 1), CN_ERR_NULL_ARG, "'exp_avg'");
    bad.step = 0;
    check_status(cn_adamw_step_(p, g, m, v, &bad, 1), CN_ERR_INVALID_ARG, "counts this update");
    bad = h;
    bad.beta2 = NAN;
    check_status(cn_adamw_step_(p, g, m, v, &bad, 1), CN_ERR_INVALID_ARG, "h->beta2");
    check_status(cn_adamw_step_(p, g, cn_reshape(m, s3, 2), v, &h, 1), CN_ERR_SHAPE,
                 "'exp_avg'");
    check_status(cn_adamw_step_(p, g, m, th_tensor(vv, s, 2, CN_F32), &h, 1), CN_ERR_DTYPE,
                 "'exp_avg_sq'");
    check_status(cn_adamw_step_(cn_to_device(p, ad()), g, m, v, &h, 1),
                 CN_ERR_AUTODIFF_REACHED_CONCRETE, "cn_inner(p)");
    check_status(cn_adamw_step_(p, g, cn_expand(th_tensor(mv, row, 2, CN_F64), s, 2), v, &h, 1),
                 CN_ERR_INVALID_ARG, "stride 0");
    check_status(cn_adamw_step_(p, g, m, m, &h, 1), CN_ERR_INVALID_ARG,
                 "'exp_avg' and 'exp_avg_sq' share memory");
    th_check_values("p after the failed checks", p, pv, 6, 0);
    th_check_values("exp_avg after the failed checks", m, mv, 6, 0);
    th_check_values("exp_avg_sq after the failed checks", v, vv, 6, 0);
    cn_device other = forwarding_device(1);
    cn_tensor *po = cn_to_device(p, other), *go = cn_to_device(g, other);
    cn_tensor *mo = cn_to_device(m, other), *vo = cn_to_device(v, other);
    check_status(cn_adamw_step_(po, go, mo, vo, &h, 1), CN_SGD_UNFUSED, "");
    th_check_values("p on a backend without the kernel", po, pv, 6, 0);
    check_status(cn_adamw_step_check(p, g, m, v, &h), CN_OK, "");
    cn_scope_end();
}

/* The optimizer's AdamW runs one adamw_step kernel per parameter with a gradient and no other
 * kernel, with PyTorch's numbers (ref_adamw); a backend without the kernel gets the composed
 * rule and the same numbers. */
static void test_adamw_step_is_one_kernel_per_parameter(void) {
    const adamw_config configs[] = {{1e-3, 0.9, 0.999, 1e-8, 0.01}, {0.05, 0.0, 0.5, 0.0, 0.0}};
    for (size_t k = 0; k < sizeof configs / sizeof *configs; k++) {
        const adamw_config *c = &configs[k];
        cn_scope_begin();
        quad q = quad_on(CN_F64, forwarding_device(0));
        cn_optimizer *opt =
            cn_adamw_new(q.params, 2, c->lr, c->beta1, c->beta2, c->eps, c->weight_decay);
        for (int step = 1; step <= 3 && opt; step++) {
            cn_grads *g = quad_backward(&q);
            int64_t fused = calls[CN_OP_ADAMW_STEP], other = calls_except(CN_OP_ADAMW_STEP);
            CHECK(cn_optimizer_step(opt, g) == CN_OK);
            CHECK(calls[CN_OP_ADAMW_STEP] == fused + 2);
            CHECK(calls_except(CN_OP_ADAMW_STEP) == other);
            cn_grads_free(g);
            double got[Q_N], want[Q_N];
            memcpy(want, Q_W0, sizeof want);
            ref_adamw(c, step, want);
            quad_values(&q, got);
            for (int i = 0; i < Q_N; i++)
                CHECK_NEAR(got[i], want[i], 1e-13);
        }
        cn_optimizer_free(opt);
        cn_scope_end();
        int64_t subs = calls[CN_OP_SUB];
        run_adamw_on(c, CN_F64, 1e-13, forwarding_device(1));
        run_adamw_on(c, CN_F32, 2e-6, forwarding_device(1));
        CHECK(calls[CN_OP_SUB] > subs); /* composed */
    }
}

/* A parameter that is a transposed view (strides (1, 2)) is updated through the view, so the
 * tensor it views sees the update too. */
static void test_sgd_updates_a_strided_parameter_in_place(void) {
    cn_scope_begin();
    const sgd_config c = {0.05, 0.5, 0, 0.1, 1};
    const int64_t bs[2] = {3, 2}, ws[2] = {2, 3};
    const double a[6] = {1.0, 0.5, 2.0, 0.1, 3.0, 1.5}, target[6] = {0, 1, -1, 0.5, 0.2, 0.3};
    const double base_v[6] = {0.5, -1.0, 2.0, 0.25, 1.5, -0.5}; /* [3, 2] */
    cn_tensor *base = cn_to_device(th_tensor(base_v, bs, 2, CN_F64), ad());
    cn_tensor *w = cn_require_grad(cn_transpose(base, 0, 1)); /* [2, 3], not contiguous */
    CHECK(w && !cn_is_contiguous(w));
    cn_param params[1] = {{"w", w}};
    cn_optimizer *opt =
        cn_sgd_new(params, 1, c.lr, c.momentum, c.dampening, c.nesterov, c.weight_decay);
    double want[6], buf[6]; /* w in row-major order of its [2, 3] shape */
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = base_v[j * 2 + i];
    int64_t fused = calls[CN_OP_SGD_STEP];
    for (int step = 0; step < 3; step++) {
        cn_tensor *d = cn_sub(w, th_tensor(target, ws, 2, CN_F64));
        cn_grads *g = cn_backward(cn_sum(cn_mul(th_tensor(a, ws, 2, CN_F64), cn_mul(d, d))));
        CHECK(cn_optimizer_step(opt, g) == CN_OK);
        cn_grads_free(g);
        const cn_sgd_hyper h = {c.lr, c.momentum, c.dampening, c.weight_decay, c.nesterov};
        for (int i = 0; i < 6; i++)
            ref_sgd_element(&h, step == 0, &want[i], 2 * a[i] * (want[i] - target[i]), &buf[i]);
        th_check_values("strided parameter", w, want, 6, 1e-14);
    }
    CHECK(calls[CN_OP_SGD_STEP] == fused); /* the CPU, not the counting backend */
    double want_base[6];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            want_base[j * 2 + i] = want[i * 3 + j];
    th_check_values("the tensor under the view", base, want_base, 6, 1e-14);
    cn_optimizer_free(opt);
    cn_scope_end();
}

/* A step that fails a check fails before writing: parameter 0 is fine, parameter 1 is an
 * expanded view whose elements share memory (an in-place update would apply several times). */
static void test_sgd_step_that_fails_a_check_writes_nothing(void) {
    cn_scope_begin();
    const int64_t s[2] = {2, 3}, row[2] = {1, 3};
    const double v[6] = {1, 2, 3, 4, 5, 6}, r[3] = {0.5, -1, 2};
    cn_tensor *w = leaf(v, s, 2, CN_F32);
    cn_tensor *shared =
        cn_require_grad(cn_expand(cn_to_device(th_tensor(r, row, 2, CN_F32), ad()), s, 2));
    cn_param params[2] = {{"w", w}, {"shared", shared}};
    cn_optimizer *opt = cn_sgd_new(params, 2, 0.1, 0.9, 0, 0, 0);
    cn_grads *g = cn_backward(cn_add(cn_sum(cn_mul(w, w)), cn_sum(cn_mul(shared, w))));
    int64_t live = cn_live_tensors();
    cn_clear_error();
    CHECK(cn_optimizer_step(opt, g) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "sgd_step") && strstr(cn_last_error(), "stride 0"));
    cn_clear_error();
    CHECK(cn_live_tensors() == live); /* no momentum buffer was adopted */
    cn_grads_free(g);
    th_check_values("w after the failed step", w, v, 6, 0);
    const double expanded[6] = {0.5, -1, 2, 0.5, -1, 2};
    th_check_values("shared after the failed step", shared, expanded, 6, 0);
    cn_optimizer_free(opt);
    cn_scope_end();
}

/* Make each allocation of an SGD step fail in turn, on the first step (which makes the momentum
 * buffers) and on a later one: the parameters and buffers stay as they were, so the retry gives
 * exactly the undisturbed result. */
static void test_failed_sgd_step_changes_nothing(void) {
    const sgd_config c = {0.05, 0.9, 0.3, 0.1, 0};
    double want[Q_N];
    memcpy(want, Q_W0, sizeof want);
    ref_sgd(&c, 2, want);
    for (int failing = 1; failing <= 2; failing++) {
        int failures = 0, done = 0;
        for (int64_t k = 1; k < 2000 && !done; k++) {
            cn_scope_begin();
            quad q = quad_new(CN_F64);
            cn_optimizer *opt =
                cn_sgd_new(q.params, 2, c.lr, c.momentum, c.dampening, c.nesterov, c.weight_decay);
            for (int step = 1; step <= 2; step++) {
                cn_grads *g = quad_backward(&q);
                double before[Q_N], after[Q_N];
                quad_values(&q, before);
                if (step == failing) cn_alloc_fail_after(k);
                cn_status s = cn_optimizer_step(opt, g);
                cn_alloc_fail_after(0);
                if (step == failing && s != CN_OK) {
                    failures++;
                    CHECK(s == CN_ERR_OUT_OF_MEMORY);
                    quad_values(&q, after);
                    CHECK(memcmp(before, after, sizeof before) == 0);
                    cn_clear_error();
                    CHECK(cn_optimizer_step(opt, g) == CN_OK); /* the retry */
                } else if (step == failing) {
                    done = 1;
                }
                cn_grads_free(g);
            }
            double after[Q_N];
            quad_values(&q, after);
            for (int i = 0; i < Q_N; i++)
                CHECK_NEAR(after[i], want[i], 1e-14);
            cn_optimizer_free(opt);
            cn_scope_end();
        }
        printf("     SGD step %d on 2 parameters failed cleanly at each of its %d allocations\n",
               failing, failures);
        CHECK(done && failures >= 2);
    }
}

/* The fused step bumps the parameter's version counter like cn_copy_ does: a value saved for a
 * backward that has not run yet is stale after the step, and that backward says so. The same
 * holds on the composed path. */
static void test_sgd_step_invalidates_saved_tensors(void) {
    for (int fallback = 0; fallback < 2; fallback++) {
        cn_scope_begin();
        cn_device inner = fallback ? forwarding_device(1) : CPU;
        const int64_t s[1] = {3};
        const double wv[3] = {1, 2, 3}, xv[3] = {0.5, -1, 2};
        cn_tensor *w = leaf_on(wv, s, 1, CN_F64, inner), *x = leaf_on(xv, s, 1, CN_F64, inner);
        cn_tensor *y = cn_sum(cn_mul(w, x)); /* mul saves w for x's gradient */
        cn_param params[1] = {{"w", w}};
        cn_optimizer *opt = cn_sgd_new(params, 1, 0.1, 0.9, 0, 0, 0);
        cn_grads *g = cn_backward(cn_sum(cn_mul(w, w)));
        CHECK(cn_optimizer_step(opt, g) == CN_OK);
        cn_grads_free(g);
        cn_clear_error();
        CHECK(cn_backward(y) == NULL && cn_last_status() == CN_ERR_AUTODIFF_MODIFIED);
        CHECK(strstr(cn_last_error(), "mul") != NULL);
        cn_clear_error();
        cn_optimizer_free(opt);
        cn_scope_end();
    }
}

/* ---- schedules ------------------------------------------------------------------------------- */

static void test_lr_schedules_match_closed_forms_and_recursions(void) {
    cn_lr_schedule step = cn_lr_step(0.1, 3, 0.5);
    const double want_step[8] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025};
    for (int e = 0; e < 8; e++)
        CHECK_NEAR(cn_lr_schedule_at(&step, e), want_step[e], 1e-15);
    /* StepLR's recursive form: multiply by gamma when epoch % step_size == 0 */
    double lr = 0.1;
    for (int e = 1; e <= 40; e++) {
        if (e % 3 == 0) lr *= 0.5;
        CHECK_NEAR(cn_lr_schedule_at(&step, e), lr, 1e-12);
    }
    cn_lr_schedule cosine = cn_lr_cosine(1.0, 4, 0.0);
    const double want_cos[5] = {1.0, 0.85355339059327373, 0.5, 0.14644660940672627, 0.0};
    for (int e = 0; e <= 4; e++)
        CHECK_NEAR(cn_lr_schedule_at(&cosine, e), want_cos[e], 1e-15);
    /* CosineAnnealingLR's recursive (chainable) form up to T_max */
    cn_lr_schedule c2 = cn_lr_cosine(0.2, 50, 0.01);
    const double pi = 3.14159265358979323846;
    lr = 0.2;
    for (int e = 1; e <= 50; e++) {
        lr = 0.01 + (lr - 0.01) * (1 + cos(pi * e / 50)) / (1 + cos(pi * (e - 1) / 50));
        CHECK_NEAR(cn_lr_schedule_at(&c2, e), lr, 1e-12);
    }
    cn_clear_error();
    CHECK(isnan(cn_lr_schedule_at(&step, -1)) && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_lr_schedule bad = cn_lr_step(0.1, 0, 0.5);
    cn_clear_error();
    CHECK(isnan(cn_lr_schedule_at(&bad, 1)) && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
}

/* ---- clipping -------------------------------------------------------------------------------- */

static void test_clip_grad_norm_scales_by_global_norm(void) {
    cn_scope_begin();
    const double w1v[3] = {1, -2, 0.5}, w2v[4] = {0.5, 1.5, -1, 2}, k1[3] = {3, -1, 2};
    const int64_t s1[1] = {3}, s2[2] = {2, 2};
    cn_tensor *w1 = leaf(w1v, s1, 1, CN_F64), *w2 = leaf(w2v, s2, 2, CN_F64);
    cn_tensor *w3 = leaf(w1v, s1, 1, CN_F64); /* not in the loss: no gradient */
    cn_param params[3] = {{"w1", w1}, {"w2", w2}, {"w3", w3}};
    /* loss = sum(k1 * w1) + sum(w2^2): g1 = k1, g2 = 2 w2 */
    double sq = 0, g2[4];
    for (int i = 0; i < 3; i++)
        sq += k1[i] * k1[i];
    for (int i = 0; i < 4; i++) {
        g2[i] = 2 * w2v[i];
        sq += g2[i] * g2[i];
    }
    double norm = sqrt(sq);
    for (int clip = 0; clip < 2; clip++) {
        cn_grads *g = cn_backward(
            cn_add(cn_sum(cn_mul(w1, th_tensor(k1, s1, 1, CN_F64))), cn_sum(cn_mul(w2, w2))));
        double max_norm = clip ? norm / 4 : norm * 2;
        cn_clear_error();
        CHECK_NEAR(cn_clip_grad_norm(g, params, 3, max_norm), norm, 1e-14);
        CHECK(cn_last_status() == CN_OK);
        double f = clip ? max_norm / (norm + 1e-6) : 1.0;
        double want1[3], want2[4];
        for (int i = 0; i < 3; i++)
            want1[i] = k1[i] * f;
        for (int i = 0; i < 4; i++)
            want2[i] = g2[i] * f;
        th_check_values("clipped g1", cn_grad(g, w1), want1, 3, 1e-14);
        th_check_values("clipped g2", cn_grad(g, w2), want2, 4, 1e-14);
        if (clip) { /* the clipped gradients have norm max_norm (up to the 1e-6) */
            double *a = th_values(cn_grad(g, w1)), *b = th_values(cn_grad(g, w2)), s = 0;
            for (int i = 0; i < 3; i++)
                s += a[i] * a[i];
            for (int i = 0; i < 4; i++)
                s += b[i] * b[i];
            CHECK_NEAR(sqrt(s), max_norm, 1e-6);
            free(a);
            free(b);
        }
        cn_grads_free(g);
    }
    /* gradients that are broadcast views of one shared value are each scaled once */
    cn_grads *g = cn_backward(cn_add(cn_sum(w1), cn_sum(w2))); /* all gradients are 1 */
    double total = cn_clip_grad_norm(g, params, 2, 1.0);
    CHECK_NEAR(total, sqrt(7.0), 1e-14);
    const double f = 1.0 / (sqrt(7.0) + 1e-6), ones1[3] = {f, f, f}, ones2[4] = {f, f, f, f};
    th_check_values("shared g1", cn_grad(g, w1), ones1, 3, 1e-14);
    th_check_values("shared g2", cn_grad(g, w2), ones2, 4, 1e-14);
    CHECK(cn_clip_grad_norm(g, params, 2, -1.0) == -1.0 && cn_last_status() == CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_grads_free(g);
    cn_scope_end();
}

/* ---- training a small model ------------------------------------------------------------------ */

enum { T_SAMPLES = 64, T_STEPS = 200 };

/* Four Gaussian blobs at (+-1, +-1); the class is the XOR of the signs: not linearly separable. */
static void xor_data(cn_tensor **x, cn_tensor **labels) {
    double xv[T_SAMPLES * 2];
    int64_t yv[T_SAMPLES];
    cn_generator gen = cn_generator_new(2024);
    const int64_t s[2] = {T_SAMPLES, 2};
    cn_tensor *noise = cn_rand_normal(&gen, s, 2, 0.0, 0.15, CN_F64, CPU);
    double *nv = th_values(noise);
    for (int i = 0; i < T_SAMPLES; i++) {
        int a = i & 1, b = (i >> 1) & 1;
        xv[i * 2] = (a ? 1 : -1) + nv[i * 2];
        xv[i * 2 + 1] = (b ? 1 : -1) + nv[i * 2 + 1];
        yv[i] = a ^ b;
    }
    free(nv);
    *x = cn_cast(th_tensor(xv, s, 2, CN_F64), CN_F32);
    const int64_t ys[1] = {T_SAMPLES};
    *labels = cn_from_data(yv, ys, 1, CN_I64, CPU);
}

static void train_xor(int use_adamw) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(11);
    cn_device dev = ad();
    cn_module *net = cn_sequential_new((cn_module *[]){cn_linear_new(2, 16, 1, dev, CN_F32, &gen),
                                                       cn_activation_new(CN_ACT_RELU),
                                                       cn_linear_new(16, 2, 1, dev, CN_F32, &gen)},
                                       3);
    int n = 0;
    const cn_param *params = cn_module_params(net, &n);
    CHECK(n == 4);
    cn_optimizer *opt = use_adamw ? cn_adamw_new(params, n, 0.05, 0.9, 0.999, 1e-8, 0.01)
                                  : cn_sgd_new(params, n, 0.2, 0.9, 0, 1, 1e-4);
    cn_lr_schedule sched = cn_lr_cosine(cn_optimizer_get_lr(opt), T_STEPS, 0.001);
    cn_tensor *x, *labels;
    xor_data(&x, &labels);
    double first = NAN, last = NAN;
    int64_t steady = 0;
    int ok = 1;
    for (int step = 0; step < T_STEPS && ok; step++) {
        cn_scope_begin();
        ok = cn_optimizer_set_lr(opt, cn_lr_schedule_at(&sched, step)) == CN_OK;
        cn_tensor *loss = cn_cross_entropy(cn_module_forward(net, x), labels, 0.0);
        double v = scalar(loss);
        if (step == 0) first = v;
        last = v;
        cn_grads *g = loss ? cn_backward(loss) : NULL;
        ok = ok && g && cn_clip_grad_norm(g, params, n, 5.0) >= 0 &&
             cn_optimizer_step(opt, g) == CN_OK;
        cn_grads_free(g);
        cn_scope_end();
        if (step == 10) steady = cn_live_tensors();
        if (step > 10 && cn_live_tensors() != steady) {
            fprintf(stderr, "step %d: %lld tensors alive, %lld at step 10\n", step,
                    (long long)cn_live_tensors(), (long long)steady);
            ok = 0;
        }
    }
    CHECK(ok);
    /* accuracy in evaluation mode */
    cn_module_train(net, 0);
    cn_no_grad_begin();
    cn_tensor *pred = cn_argmax_dim(cn_module_forward(net, x), 1, 0);
    cn_no_grad_end();
    double *pv = th_values(pred), *lv = th_values(labels);
    int correct = 0;
    for (int i = 0; i < T_SAMPLES; i++)
        correct += pv[i] == lv[i];
    printf("     %s, %d steps: cross-entropy %.4f -> %.4f, accuracy %d/%d\n",
           use_adamw ? "AdamW" : "SGD (Nesterov)", T_STEPS, first, last, correct, T_SAMPLES);
    CHECK(last < 0.05 && last < first / 10);
    CHECK(correct == T_SAMPLES);
    free(pv);
    free(lv);
    cn_optimizer_free(opt);
    cn_module_free(net);
    cn_scope_end();
}

static void test_mlp_trains_to_low_loss_with_adamw(void) { train_xor(1); }
static void test_mlp_trains_to_low_loss_with_sgd(void) { train_xor(0); }

/* Parameter groups: two parameters, the loss sum(a * c1) + sum(b * c2) (gradients c1, c2). Group
 * A has its own lr and weight decay, group B the optimizer's; after set_lr, A's lr follows in
 * proportion. SGD (no momentum, so each step is p -= lr * (g + wd * p)) and AdamW's first step
 * (p = p * (1 - lr * wd) - lr * g / (|g| + eps)), by hand in double. */
static void test_param_groups(void) {
    const double a0[2] = {1.0, -2.0}, b0[2] = {0.5, 3.0}, c1[2] = {0.25, -1.0},
                 c2[2] = {2.0, 0.5};
    const int64_t shape[1] = {2};
    for (int kind = 0; kind < 2; kind++) {
        cn_tensor *a = leaf(a0, shape, 1, CN_F64), *b = leaf(b0, shape, 1, CN_F64);
        cn_param pa = {"a", a}, pb = {"b", b};
        cn_param_group groups[2] = {{&pa, 1, 0.05, 0.5}, {&pb, 1, CN_GROUP_DEFAULT,
                                                          CN_GROUP_DEFAULT}};
        /* the optimizer's lr 0.2, weight decay 0.1 (group B's) */
        cn_optimizer *o = kind == 0 ? cn_sgd_new_groups(groups, 2, 0.2, 0, 0, 0, 0.1)
                                    : cn_adamw_new_groups(groups, 2, 0.2, 0.9, 0.999, 1e-8, 0.1);
        CHECK(o != NULL);
        double wa[2], wb[2];
        memcpy(wa, a0, sizeof wa);
        memcpy(wb, b0, sizeof wb);
        for (int step = 0; step < 2 && o; step++) {
            if (step == 1) CHECK(cn_optimizer_set_lr(o, 0.4) == CN_OK); /* A's: 0.05 -> 0.1 */
            double lra = step ? 0.1 : 0.05, lrb = step ? 0.4 : 0.2;
            cn_tensor *ct1 = th_own(th_tensor(c1, shape, 1, CN_F64));
            cn_tensor *ct2 = th_own(th_tensor(c2, shape, 1, CN_F64));
            cn_tensor *loss = th_own(cn_add(th_own(cn_sum(th_own(cn_mul(a, th_own(cn_to_device(ct1, ad())))))),
                                            th_own(cn_sum(th_own(cn_mul(b, th_own(cn_to_device(ct2, ad()))))))));
            cn_grads *g = cn_backward(loss);
            CHECK(g && cn_optimizer_step(o, g) == CN_OK);
            cn_grads_free(g);
            for (int i = 0; i < 2; i++) {
                if (kind == 0) {
                    wa[i] -= lra * (c1[i] + 0.5 * wa[i]);
                    wb[i] -= lrb * (c2[i] + 0.1 * wb[i]);
                } else if (step == 0) { /* AdamW's first step */
                    wa[i] = wa[i] * (1 - lra * 0.5) - lra * c1[i] / (fabs(c1[i]) + 1e-8);
                    wb[i] = wb[i] * (1 - lrb * 0.1) - lrb * c2[i] / (fabs(c2[i]) + 1e-8);
                }
            }
            if (kind == 1 && step == 1) break; /* AdamW's second step: covered elsewhere */
            th_check_values(kind ? "adamw group a" : "sgd group a", a, wa, 2, 1e-12);
            th_check_values(kind ? "adamw group b" : "sgd group b", b, wb, 2, 1e-12);
            th_release_owned();
        }
        CHECK(o && cn_optimizer_get_lr(o) == 0.4);
        cn_optimizer_free(o);
        th_release_owned();
        cn_release(a);
        cn_release(b);
    }
    /* errors: a negative group value, a group lr with the optimizer's lr 0, no parameters */
    cn_tensor *a = leaf(a0, shape, 1, CN_F64);
    cn_param pa = {"a", a};
    cn_param_group bad[1] = {{&pa, 1, -0.5, CN_GROUP_DEFAULT}};
    CHECK_FAILS((cn_tensor *)cn_sgd_new_groups(bad, 1, 0.1, 0, 0, 0, 0), CN_ERR_INVALID_ARG,
                "group 0");
    cn_param_group zero_lr[1] = {{&pa, 1, 0.5, CN_GROUP_DEFAULT}};
    CHECK_FAILS((cn_tensor *)cn_adamw_new_groups(zero_lr, 1, 0.0, 0.9, 0.999, 1e-8, 0),
                CN_ERR_INVALID_ARG, "positive lr");
    cn_param_group empty[1] = {{&pa, 0, CN_GROUP_DEFAULT, CN_GROUP_DEFAULT}};
    CHECK_FAILS((cn_tensor *)cn_sgd_new_groups(empty, 1, 0.1, 0, 0, 0, 0), CN_ERR_INVALID_ARG,
                "at least one");
    cn_release(a);
}

int main(void) {
    RUN(test_param_groups);
    RUN(test_cross_entropy_matches_reference_and_finite_differences);
    RUN(test_cross_entropy_label_out_of_range_names_cross_entropy);
    RUN(test_mse_loss_value_and_gradient);
    RUN(test_loss_kind_and_dtype_errors_name_the_loss);
    RUN(test_sgd_matches_pytorch_update_rules);
    RUN(test_adamw_matches_pytorch_update_rules);
    RUN(test_adamw_step_checks_write_nothing);
    RUN(test_adamw_step_is_one_kernel_per_parameter);
    RUN(test_step_skips_params_without_gradient_and_state_outlives_scopes);
    RUN(test_failed_step_changes_nothing);
    RUN(test_sgd_step_kernel_matches_double_loop);
    RUN(test_sgd_step_checks_write_nothing);
    RUN(test_sgd_step_is_one_kernel_per_parameter);
    RUN(test_sgd_falls_back_to_composed_ops_without_the_kernel);
    RUN(test_sgd_updates_a_strided_parameter_in_place);
    RUN(test_sgd_step_that_fails_a_check_writes_nothing);
    RUN(test_failed_sgd_step_changes_nothing);
    RUN(test_sgd_step_invalidates_saved_tensors);
    RUN(test_lr_schedules_match_closed_forms_and_recursions);
    RUN(test_clip_grad_norm_scales_by_global_norm);
    RUN(test_mlp_trains_to_low_loss_with_adamw);
    RUN(test_mlp_trains_to_low_loss_with_sgd);
    return th_finish();
}
