/* SQLite-style allocation-failure testing: the forward pass of a small model is run once to
 * count its allocations, then again with the 1st, 2nd, ... N-th allocation failing. Each run must
 * fail cleanly (NULL, CN_ERR_OUT_OF_MEMORY naming an op), leak nothing, and leave the runtime
 * working: a normal run afterwards gives the reference loss. The same on the autodiff device
 * (which records a graph node per op), plain and with balanced checkpointing, and over
 * cn_backward: each failing backward returns NULL with CN_ERR_OUT_OF_MEMORY, frees what it made,
 * and leaves the graph whole, so the retry gives the reference gradients bit for bit. */
#include "harness.h"

typedef struct model {
    cn_tensor *x, *labels, *w1, *b1, *w2, *b2, *conv_w;
} model;

/* loss = mean NLL of log_softmax(linear(relu(linear(flatten(maxpool(conv(x))))))) */
static cn_tensor *forward(const model *m) {
    cn_conv2d_params cp = {{1, 1}, {1, 1}, {1, 1}, 1};
    cn_pool2d_params pp = {{2, 2}, {2, 2}, {0, 0}};
    cn_tensor *loss = NULL;
    if (cn_scope_begin() != CN_OK) return NULL;
    cn_tensor *c = cn_relu(cn_conv2d(m->x, m->conv_w, NULL, &cp));
    cn_tensor *p = cn_max_pool2d(c, &pp);
    int64_t flat[2] = {4, -1};
    cn_tensor *h = cn_relu(cn_linear(cn_reshape(p, flat, 2), m->w1, m->b1));
    cn_tensor *logits = cn_linear(h, m->w2, m->b2);
    cn_tensor *lp = cn_log_softmax(logits, 1);
    int64_t col[2] = {4, 1};
    cn_tensor *picked = cn_gather(lp, 1, cn_reshape(m->labels, col, 2));
    loss = cn_keep(cn_neg(cn_mean(picked)));
    cn_scope_end();
    return loss;
}

/* On `dev`; on an autodiff device the weights are leaves that require grad. */
static model make_model(cn_device dev) {
    cn_generator g = cn_generator_new(7);
    model m;
    int64_t xs[4] = {4, 2, 6, 6}, cw[4] = {3, 2, 3, 3}, w1[2] = {8, 27}, b1[1] = {8},
            w2[2] = {5, 8}, b2[1] = {5};
    m.x = cn_rand_normal(&g, xs, 4, 0, 1, CN_F64, cn_cpu());
    m.conv_w = cn_rand_normal(&g, cw, 4, 0, 0.3, CN_F64, cn_cpu());
    m.w1 = cn_rand_normal(&g, w1, 2, 0, 0.3, CN_F64, cn_cpu());
    m.b1 = cn_rand_normal(&g, b1, 1, 0, 0.1, CN_F64, cn_cpu());
    m.w2 = cn_rand_normal(&g, w2, 2, 0, 0.3, CN_F64, cn_cpu());
    m.b2 = cn_rand_normal(&g, b2, 1, 0, 0.1, CN_F64, cn_cpu());
    int64_t labels[4] = {0, 3, 1, 4}, ln = 4;
    m.labels = cn_from_data(labels, &ln, 1, CN_I64, cn_cpu());
    cn_tensor **all[7] = {&m.x, &m.conv_w, &m.w1, &m.b1, &m.w2, &m.b2, &m.labels};
    for (int i = 0; i < 7 && dev.autodiff; i++) {
        cn_tensor *on = cn_from_inner(*all[i], dev);
        cn_release(*all[i]);
        *all[i] = i >= 1 && i <= 5 ? cn_require_grad(on) : on;
    }
    return m;
}

static void free_model(model *m) {
    cn_release(m->x);
    cn_release(m->labels);
    cn_release(m->w1);
    cn_release(m->b1);
    cn_release(m->w2);
    cn_release(m->b2);
    cn_release(m->conv_w);
}

/* The forward sweep on `dev`. */
static void forward_sweep(cn_device dev, const char *what) {
    model m = make_model(dev);
    cn_tensor *ref = forward(&m);
    CHECK(ref != NULL);
    double ref_loss = 0;
    th_read(ref, &ref_loss);
    CHECK(isfinite(ref_loss) && ref_loss > 0);
    cn_release(ref);

    int64_t before = cn_alloc_count();
    cn_tensor *again = forward(&m);
    int64_t count = cn_alloc_count() - before;
    cn_release(again);
    CHECK(count > 20);

    int64_t base = cn_live_tensors(), bytes = cn_live_bytes();
    int failures = 0;
    for (int64_t n = 1; n <= count; n++) {
        cn_clear_error();
        cn_alloc_fail_after(n);
        cn_tensor *loss = forward(&m);
        cn_alloc_fail_after(0);
        if (loss) {
            fprintf(stderr, "allocation %lld failed but forward succeeded\n", (long long)n);
            cn_release(loss);
            failures++;
        } else if (cn_last_status() != CN_ERR_OUT_OF_MEMORY || !strstr(cn_last_error(), ":")) {
            fprintf(stderr, "allocation %lld: status %s, message '%s'\n", (long long)n,
                    cn_status_name(cn_last_status()), cn_last_error());
            failures++;
        }
        if (cn_live_tensors() != base || cn_live_bytes() != bytes) {
            fprintf(stderr, "allocation %lld: %lld tensors, %lld bytes leaked\n", (long long)n,
                    (long long)(cn_live_tensors() - base), (long long)(cn_live_bytes() - bytes));
            failures++;
            break;
        }
        CHECK(cn_scope_depth() == 0);
    }
    printf("     forward on %s: %lld allocations, %d failed uncleanly\n", what, (long long)count,
           failures);
    CHECK(failures == 0);
    cn_clear_error();
    /* the runtime still works */
    cn_tensor *after = forward(&m);
    double after_loss = 0;
    CHECK(th_read(after, &after_loss) == 1);
    CHECK_NEAR(after_loss, ref_loss, 1e-12);
    cn_release(after);
    free_model(&m);
}

static void test_every_allocation_failure_is_clean(void) { forward_sweep(cn_cpu(), "cpu"); }

static void test_every_allocation_failure_is_clean_on_the_autodiff_device(void) {
    forward_sweep(cn_autodiff(cn_cpu()), "autodiff(cpu)");
    forward_sweep(cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED),
                  "autodiff(cpu, balanced)");
}

enum { N_PARAMS = 5, MAX_PARAM = 216 }; /* w1 is [8, 27] */

/* The gradients of the five weights, in double; 0 when one cannot be read. */
static int read_grads(const model *m, const cn_grads *g, double out[N_PARAMS][MAX_PARAM]) {
    cn_tensor *params[N_PARAMS] = {m->conv_w, m->w1, m->b1, m->w2, m->b2};
    memset(out, 0, sizeof(double) * N_PARAMS * MAX_PARAM);
    for (int i = 0; i < N_PARAMS; i++) {
        cn_tensor *dp = cn_grad(g, params[i]);
        if (!dp || cn_numel(dp) > MAX_PARAM || th_read(dp, out[i]) != cn_numel(dp)) return 0;
    }
    return 1;
}

/* cn_backward with its n-th allocation failing, for every n: NULL and CN_ERR_OUT_OF_MEMORY, the
 * counters back to where they were before the call, and the graph whole: the retry on the same
 * loss succeeds with the reference gradients, bit for bit. The oracle is an undisturbed backward
 * of the same forward. */
static void backward_sweep(cn_device dev, const char *what) {
    model m = make_model(dev);
    double want[N_PARAMS][MAX_PARAM], got[N_PARAMS][MAX_PARAM];
    cn_tensor *loss = forward(&m);
    int64_t before = cn_alloc_count();
    cn_grads *g = cn_backward(loss);
    int64_t count = cn_alloc_count() - before;
    CHECK(g != NULL && read_grads(&m, g, want));
    cn_grads_free(g);
    cn_release(loss);
    CHECK(count > 20);

    int failures = 0;
    for (int64_t n = 1; n <= count + 1; n++) {
        loss = forward(&m);
        int64_t base = cn_live_tensors(), bytes = cn_live_bytes();
        cn_clear_error();
        cn_alloc_fail_after(n);
        g = cn_backward(loss);
        cn_alloc_fail_after(0);
        if (g) { /* only once every allocation it makes succeeds */
            if (n <= count) {
                fprintf(stderr, "%s: allocation %lld failed but backward succeeded\n", what,
                        (long long)n);
                failures++;
            }
            CHECK(read_grads(&m, g, got) && memcmp(got, want, sizeof want) == 0);
            cn_grads_free(g);
            cn_release(loss);
            continue;
        }
        if (cn_last_status() != CN_ERR_OUT_OF_MEMORY || !strstr(cn_last_error(), ": ")) {
            fprintf(stderr, "%s: allocation %lld: status %s, message '%s'\n", what, (long long)n,
                    cn_status_name(cn_last_status()), cn_last_error());
            failures++;
        }
        if (cn_live_tensors() != base || cn_live_bytes() != bytes || cn_scope_depth() != 0) {
            fprintf(stderr, "%s: allocation %lld: %lld tensors, %lld bytes leaked\n", what,
                    (long long)n, (long long)(cn_live_tensors() - base),
                    (long long)(cn_live_bytes() - bytes));
            failures++;
        }
        cn_clear_error();
        g = cn_backward(loss); /* the graph survived the failure */
        if (!g || !read_grads(&m, g, got) || memcmp(got, want, sizeof want) != 0) {
            fprintf(stderr, "%s: allocation %lld: the retry %s\n", what, (long long)n,
                    g ? "gave other gradients" : cn_last_error());
            failures++;
        }
        cn_grads_free(g);
        cn_release(loss);
    }
    printf("     backward on %s: %lld allocations, %d failed uncleanly\n", what, (long long)count,
           failures);
    CHECK(failures == 0);
    free_model(&m);
}

static void test_every_allocation_failure_in_backward_keeps_the_graph(void) {
    backward_sweep(cn_autodiff(cn_cpu()), "autodiff(cpu)");
    backward_sweep(cn_autodiff_checkpointed(cn_cpu(), CN_CHECKPOINT_BALANCED),
                   "autodiff(cpu, balanced)");
}

int main(void) {
    RUN(test_every_allocation_failure_is_clean);
    RUN(test_every_allocation_failure_is_clean_on_the_autodiff_device);
    RUN(test_every_allocation_failure_in_backward_keeps_the_graph);
    return th_finish();
}
