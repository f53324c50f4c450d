/* Memory behaviour of the autodiff layer, measured with cn_live_bytes / cn_live_tensors:
 * - CN_CHECKPOINT_BALANCED keeps far fewer bytes alive in a deep elementwise-heavy graph than
 *   plain recording, and gives the same gradients (the oracle is the non-checkpointed run);
 * - cn_backward frees the values its graph saved, while the root stays usable;
 * - a 1,000-step SGD training loop keeps an exactly flat footprint (LeakSanitizer, in the
 *   sanitizer build, checks that nothing outside tensors leaks either). */
#include "harness.h"

/* ---- the deep elementwise network ------------------------------------------------------------ */

enum { ROWS = 64, FEATURES = 128, LAYERS = 21 };

/* One memory-bound layer; i picks which, so the net mixes activations, products and sums. Every
 * input is released by the caller: the graph alone decides what stays alive. c: a constant. */
static cn_tensor *elementwise_layer(int i, cn_tensor *h, cn_tensor *c) {
    cn_tensor *t, *out;
    switch (i % 7) {
    case 0:
        return cn_tanh(h);
    case 1:
        return cn_mul(h, h);
    case 2:
        return cn_mul(h, c); /* c: [1, FEATURES], untracked, broadcast over rows */
    case 3:
        t = cn_mul_scalar(h, 0.5);
        out = cn_exp(t);
        cn_release(t);
        return out;
    case 4:
        return cn_sigmoid(h);
    case 5:
        t = cn_sin(h);
        out = cn_add(h, t);
        cn_release(t);
        return out;
    default:
        return cn_silu(h);
    }
}

/* loss = mean(layers(x @ w)); returns only the loss, the caller having released every
 * intermediate as a training loop does once the graph is built. */
static cn_tensor *deep_net(cn_tensor *x, cn_tensor *w, cn_tensor *c) {
    cn_tensor *h = cn_matmul(x, w); /* [ROWS, FEATURES] */
    for (int i = 0; i < LAYERS; i++) {
        cn_tensor *next = elementwise_layer(i, h, c);
        cn_release(h);
        h = next;
    }
    cn_tensor *loss = cn_mean(h);
    cn_release(h);
    return loss;
}

/* The leaves and the constant of deep_net on one device, from a fixed seed, so that two devices
 * get identical numbers. */
typedef struct deep_inputs {
    cn_tensor *x, *w, *c;
} deep_inputs;

static deep_inputs deep_inputs_on(cn_device dev) {
    cn_generator gen = cn_generator_new(1234);
    const int64_t xs[2] = {ROWS, FEATURES}, ws[2] = {FEATURES, FEATURES}, cs[2] = {1, FEATURES};
    deep_inputs in;
    in.x = cn_require_grad(cn_rand_normal(&gen, xs, 2, 0, 1, CN_F64, dev));
    in.w = cn_require_grad(cn_rand_normal(&gen, ws, 2, 0, 0.1, CN_F64, dev));
    in.c = cn_rand_uniform(&gen, cs, 2, 0.5, 1.5, CN_F64, dev);
    CHECK(in.x && in.w && in.c);
    return in;
}

static void deep_inputs_release(deep_inputs *in) {
    cn_release(in->x);
    cn_release(in->w);
    cn_release(in->c);
}

/* The gradient of t as doubles (malloc'd, numel entries), or NULL. */
static double *grad_values(cn_grads *g, cn_tensor *t) {
    cn_tensor *gt = g ? cn_grad(g, t) : NULL;
    if (!gt || cn_dtype_of(gt) != CN_F64 || cn_numel(gt) != cn_numel(t)) return NULL;
    double *v = malloc(sizeof(double) * (size_t)cn_numel(gt));
    if (v && cn_read(gt, v, sizeof(double) * (size_t)cn_numel(gt)) != CN_OK) {
        free(v);
        return NULL;
    }
    return v;
}

/* Checks got against want element by element with a purely relative tolerance (the gradients of
 * a deep net are small, so an absolute floor would hide differences), and that want is not all
 * zeros, which would make the comparison vacuous. */
static void check_relative(const char *what, const double *got, const double *want, int64_t n,
                           double tol) {
    if (!got || !want) {
        fprintf(stderr, "%s: gradient missing (%s)\n", what, cn_last_error());
        th_checks_failed++;
        return;
    }
    double largest = 0;
    for (int64_t i = 0; i < n; i++) {
        double scale = fmax(fabs(got[i]), fabs(want[i]));
        largest = fmax(largest, fabs(want[i]));
        if (!(fabs(got[i] - want[i]) <= tol * scale)) {
            fprintf(stderr, "%s[%lld] = %.17g, want %.17g (relative tol %g)\n", what, (long long)i,
                    got[i], want[i], tol);
            th_checks_failed++;
            return;
        }
    }
    if (!(largest > 0)) {
        fprintf(stderr, "%s: every gradient is zero\n", what);
        th_checks_failed++;
    }
}

/* ---- checkpointing saves memory, not accuracy ------------------------------------------------ */

/* Builds deep_net on dev; returns the bytes its graph keeps alive once only the loss is held, and
 * the gradients of x and w (malloc'd) through *gx, *gw. */
static int64_t graph_bytes_and_grads(cn_device dev, double **gx, double **gw) {
    int64_t start_bytes = cn_live_bytes(), start_tensors = cn_live_tensors();
    deep_inputs in = deep_inputs_on(dev);
    int64_t inputs_bytes = cn_live_bytes();
    cn_tensor *loss = deep_net(in.x, in.w, in.c);
    CHECK(loss != NULL && cn_requires_grad(loss));
    /* the loss's own storage is part of what the caller holds, not of the graph */
    int64_t graph =
        cn_live_bytes() - inputs_bytes - (loss ? (int64_t)cn_dtype_size(cn_dtype_of(loss)) : 0);
    cn_grads *g = loss ? cn_backward(loss) : NULL;
    CHECK(g != NULL);
    *gx = grad_values(g, in.x);
    *gw = grad_values(g, in.w);
    cn_grads_free(g);
    cn_release(loss);
    deep_inputs_release(&in);
    CHECK(cn_live_bytes() == start_bytes);
    CHECK(cn_live_tensors() == start_tensors);
    return graph;
}

static void test_balanced_checkpointing_keeps_fewer_bytes_with_same_gradients(void) {
    double *gx_plain = NULL, *gw_plain = NULL, *gx_ckpt = NULL, *gw_ckpt = NULL;
    int64_t plain = graph_bytes_and_grads(cn_autodiff(cn_cpu()), &gx_plain, &gw_plain);
    int64_t ckpt = graph_bytes_and_grads(cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED),
                                         &gx_ckpt, &gw_ckpt);
    int64_t activation = (int64_t)ROWS * FEATURES * (int64_t)sizeof(double);
    printf("     deep net (matmul + %d elementwise layers, [%d, %d] f64 = %lld bytes each): graph "
           "keeps %lld bytes without checkpointing, %lld with BALANCED (%.1f%%)\n",
           LAYERS, ROWS, FEATURES, (long long)activation, (long long)plain, (long long)ckpt,
           plain > 0 ? 100.0 * (double)ckpt / (double)plain : 0.0);
    /* plain recording keeps many activations; checkpointing at most a few */
    CHECK(plain >= 8 * activation);
    CHECK(ckpt >= 0);
    CHECK(3 * ckpt < plain);
    check_relative("checkpointed grad x", gx_ckpt, gx_plain, (int64_t)ROWS * FEATURES, 1e-10);
    check_relative("checkpointed grad w", gw_ckpt, gw_plain, (int64_t)FEATURES * FEATURES, 1e-10);
    free(gx_plain);
    free(gw_plain);
    free(gx_ckpt);
    free(gw_ckpt);
}

/* ---- backward frees the graph it consumed ---------------------------------------------------- */

static void check_backward_frees_graph(cn_device dev, const char *label) {
    int64_t start_bytes = cn_live_bytes(), start_tensors = cn_live_tensors();
    deep_inputs in = deep_inputs_on(dev);
    int64_t inputs_bytes = cn_live_bytes(), inputs_tensors = cn_live_tensors();
    cn_tensor *loss = deep_net(in.x, in.w, in.c);
    int64_t loss_bytes = loss ? (int64_t)cn_dtype_size(cn_dtype_of(loss)) * cn_numel(loss) : 0;
    int64_t before = cn_live_bytes();
    cn_grads *g = loss ? cn_backward(loss) : NULL;
    CHECK(g != NULL);
    int64_t with_grads = cn_live_bytes();
    /* the gradients are at most one tensor of each leaf's size */
    int64_t grads_bound = (int64_t)sizeof(double) * (cn_numel(in.x) + cn_numel(in.w));
    CHECK(with_grads - grads_bound < before);
    cn_grads_free(g);
    int64_t after = cn_live_bytes();
    printf("     %s: %lld bytes alive with the graph, %lld after backward (gradients "
           "freed); inputs and loss: %lld\n",
           label, (long long)(before - start_bytes), (long long)(after - start_bytes),
           (long long)(inputs_bytes - start_bytes + loss_bytes));
    /* nothing of the graph is left: only the inputs and the root itself */
    CHECK(after < before);
    CHECK(after == inputs_bytes + loss_bytes);
    CHECK(cn_live_tensors() == inputs_tensors + 1);
    /* the root still lives and reads back */
    double value = NAN;
    CHECK(loss && cn_read(loss, &value, sizeof value) == CN_OK && isfinite(value));
    cn_release(loss);
    deep_inputs_release(&in);
    CHECK(cn_live_bytes() == start_bytes);
    CHECK(cn_live_tensors() == start_tensors);
}

static void test_backward_frees_saved_values_and_keeps_root(void) {
    check_backward_frees_graph(cn_autodiff(cn_cpu()), "no checkpointing");
    check_backward_frees_graph(cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED),
                               "BALANCED");
}

/* ---- a training loop keeps a flat footprint -------------------------------------------------- */

enum { SAMPLES = 64, IN = 16, HIDDEN = 32, CLASSES = 4, STEPS = 1000, STEADY_STEP = 10 };

/* A 16-32-4 tanh MLP and its data, all on one autodiff device. */
typedef struct mlp_task {
    cn_tensor *w1, *b1, *w2, *b2; /* w1: [HIDDEN, IN], b1: [HIDDEN], w2: [CLASSES, HIDDEN] */
    cn_tensor *x;                 /* [SAMPLES, IN], untracked */
    cn_tensor *labels;            /* [SAMPLES, 1] i64 */
} mlp_task;

/* Labels come from a random linear teacher, so the task is learnable. */
static mlp_task mlp_task_new(cn_device ad) {
    cn_generator gen = cn_generator_new(7);
    const int64_t xs[2] = {SAMPLES, IN}, ts[2] = {IN, CLASSES};
    const int64_t w1s[2] = {HIDDEN, IN}, b1s[1] = {HIDDEN}, w2s[2] = {CLASSES, HIDDEN},
                  b2s[1] = {CLASSES};
    mlp_task m;
    m.x = cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32, ad);
    cn_tensor *teacher = cn_rand_normal(&gen, ts, 2, 0, 1, CN_F32, ad);
    cn_tensor *scores = cn_matmul(m.x, teacher);
    m.labels = cn_argmax_dim(scores, 1, 1);
    cn_release(scores);
    cn_release(teacher);
    m.w1 = cn_require_grad(cn_rand_normal(&gen, w1s, 2, 0, 0.25, CN_F32, ad));
    m.b1 = cn_require_grad(cn_zeros(b1s, 1, CN_F32, ad));
    m.w2 = cn_require_grad(cn_rand_normal(&gen, w2s, 2, 0, 0.18, CN_F32, ad));
    m.b2 = cn_require_grad(cn_zeros(b2s, 1, CN_F32, ad));
    CHECK(m.x && m.labels && m.w1 && m.b1 && m.w2 && m.b2);
    return m;
}

static void mlp_task_free(mlp_task *m) {
    cn_tensor *all[6] = {m->w1, m->b1, m->w2, m->b2, m->x, m->labels};
    for (int i = 0; i < 6; i++)
        cn_release(all[i]);
}

/* Cross-entropy of the MLP on the task's data (scope-owned, like every intermediate). */
static cn_tensor *mlp_loss(const mlp_task *m) {
    cn_tensor *h = cn_tanh(cn_linear(m->x, m->w1, m->b1));           /* [SAMPLES, HIDDEN] */
    cn_tensor *logp = cn_log_softmax(cn_linear(h, m->w2, m->b2), 1); /* [SAMPLES, CLASSES] */
    return cn_neg(cn_mean(cn_gather(logp, 1, m->labels)));
}

static int sgd_update(cn_tensor *w, cn_grads *g, double lr) {
    cn_tensor *dw = cn_grad(g, w);
    return dw && cn_copy_(w, cn_sub(w, cn_mul_scalar(dw, lr))) == CN_OK;
}

/* One step as a training loop writes it: everything made inside the step's scope dies with it.
 * Writes the loss before the update into *loss; returns 0 on failure. */
static int train_step(mlp_task *m, double lr, float *loss_value) {
    int ok = cn_scope_begin() == CN_OK;
    cn_tensor *loss = mlp_loss(m);
    ok = ok && loss && cn_read(loss, loss_value, sizeof *loss_value) == CN_OK;
    cn_grads *g = ok ? cn_backward(loss) : NULL;
    ok = ok && g;
    if (ok) {
        cn_no_grad_begin();
        ok = sgd_update(m->w1, g, lr) && sgd_update(m->b1, g, lr) && sgd_update(m->w2, g, lr) &&
             sgd_update(m->b2, g, lr);
        cn_no_grad_end();
    }
    cn_grads_free(g);
    cn_scope_end();
    return ok;
}

static void test_training_loop_memory_is_flat(void) {
    int64_t start_bytes = cn_live_bytes(), start_tensors = cn_live_tensors();
    mlp_task m = mlp_task_new(cn_autodiff(cn_cpu()));
    float first = NAN, last = NAN;
    int64_t steady_bytes = 0, steady_tensors = 0, drifted = 0;
    int ok = 1;
    for (int step = 1; step <= STEPS && ok; step++) {
        ok = train_step(&m, 0.5, &last);
        if (step == 1) first = last;
        if (step == STEADY_STEP) {
            steady_bytes = cn_live_bytes();
            steady_tensors = cn_live_tensors();
        } else if (step > STEADY_STEP &&
                   (cn_live_bytes() != steady_bytes || cn_live_tensors() != steady_tensors)) {
            if (!drifted)
                fprintf(stderr, "step %d: %lld bytes, %lld tensors alive; step %d: %lld, %lld\n",
                        step, (long long)cn_live_bytes(), (long long)cn_live_tensors(), STEADY_STEP,
                        (long long)steady_bytes, (long long)steady_tensors);
            drifted++;
        }
    }
    CHECK(ok);
    printf("     %d SGD steps: loss %.4f -> %.4f; %lld bytes / %lld tensors alive after step %d "
           "and %lld / %lld after step %d\n",
           STEPS, first, last, (long long)steady_bytes, (long long)steady_tensors, STEADY_STEP,
           (long long)cn_live_bytes(), (long long)cn_live_tensors(), STEPS);
    CHECK(drifted == 0);
    CHECK(cn_live_bytes() == steady_bytes);
    CHECK(cn_live_tensors() == steady_tensors);
    /* it learned: cross-entropy starts near ln(4) */
    CHECK(isfinite(first) && isfinite(last));
    CHECK(last < 0.5f * first);
    mlp_task_free(&m);
    CHECK(cn_live_bytes() == start_bytes);
    CHECK(cn_live_tensors() == start_tensors);
}

/* The status is sticky and only failed calls set it, so a loop that checks cn_last_status() after
 * each step must find CN_OK after a successful one. */
static void test_successful_training_step_leaves_no_error_set(void) {
    mlp_task m = mlp_task_new(cn_autodiff(cn_cpu()));
    float loss = NAN;
    cn_clear_error();
    CHECK(train_step(&m, 0.5, &loss));
    if (cn_last_status() != CN_OK) {
        fprintf(stderr, "a successful step left %s set: \"%s\"\n", cn_status_name(cn_last_status()),
                cn_last_error());
        th_checks_failed++;
    }
    cn_clear_error();
    mlp_task_free(&m);
}

int main(void) {
    RUN(test_balanced_checkpointing_keeps_fewer_bytes_with_same_gradients);
    RUN(test_backward_frees_saved_values_and_keeps_root);
    RUN(test_training_loop_memory_is_flat);
    RUN(test_successful_training_step_leaves_no_error_set);
    return th_finish();
}
