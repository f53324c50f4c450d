/* Optimizer and training state (nn.h): the state tensors of SGD and AdamW, named like PyTorch's
 * optimizer state_dict, hold the values of the update rules computed here in double; a state
 * loaded into a new optimizer over a copy of the model continues with the same bits as the
 * optimizer that never stopped (and a copy without the state does not, so the comparison can
 * fail); loads refuse every mismatch and change nothing; a whole training state written to a file
 * with metadata and extra tensors reads back and continues bit-identically; cn_batches_seek lands
 * where a reset and that many batches would; cn_safetensors_save_metadata round-trips its
 * strings. */
#define _POSIX_C_SOURCE 200809L

#include <unistd.h>

#include "harness.h"

static cn_device ad(void) { return cn_autodiff(cn_cpu()); }

static char tmp_dir[] = "/tmp/cinder_test_train_state_XXXXXX";

static const char *tmp_path(const char *name) {
    static char path[4][256];
    static int next;
    char *p = path[next++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", tmp_dir, name);
    return p;
}

/* ---- a small model and its steps ------------------------------------------------------------- */

enum { IN = 5, HIDDEN = 4, OUT = 3, BATCH = 6 };

typedef struct run {
    cn_module *net;
    cn_optimizer *opt;
} run;

static run run_new(int adamw, int64_t hidden, uint64_t seed) {
    cn_generator gen = cn_generator_new(seed);
    run r = {0};
    r.net = cn_sequential_new((cn_module *[]){cn_linear_new(IN, hidden, 1, ad(), CN_F32, &gen),
                                              cn_activation_new(CN_ACT_RELU),
                                              cn_linear_new(hidden, OUT, 1, ad(), CN_F32, &gen)},
                              3);
    int n = 0;
    const cn_param *p = cn_module_params(r.net, &n);
    r.opt = adamw ? cn_adamw_new(p, n, 0.01, 0.9, 0.999, 1e-8, 0.01)
                  : cn_sgd_new(p, n, 0.1, 0.9, 0.0, 0, 0.0);
    CHECK(r.net && r.opt);
    return r;
}

static void run_free(run *r) {
    cn_optimizer_free(r->opt);
    cn_module_free(r->net);
}

/* Step k of the data: x [BATCH, IN] and labels drawn from a generator seeded with k. */
static void step(run *r, int k) {
    cn_scope_begin();
    cn_generator gen = cn_generator_new(1000 + (uint64_t)k);
    int64_t xs[2] = {BATCH, IN}, ys[1] = {BATCH}, yv[BATCH];
    for (int i = 0; i < BATCH; i++)
        yv[i] = (i + k) % OUT;
    cn_tensor *x = cn_rand_normal(&gen, xs, 2, 0.0, 1.0, CN_F32, ad());
    cn_tensor *y = cn_from_data(yv, ys, 1, CN_I64, ad());
    cn_grads *g = cn_backward(cn_cross_entropy(cn_module_forward(r->net, x), y, 0.0));
    CHECK(g != NULL);
    CHECK(cn_optimizer_step(r->opt, g) == CN_OK);
    cn_grads_free(g);
    cn_scope_end();
}

/* The bytes of every parameter of a, compared with b's. */
static int same_params(run *a, run *b) {
    int na = 0, nb = 0;
    const cn_param *pa = cn_module_params(a->net, &na);
    const cn_param *pb = cn_module_params(b->net, &nb);
    if (!pa || !pb || na != nb) return 0;
    int same = 1;
    for (int i = 0; i < na && same; i++) {
        int64_t n = cn_numel(pa[i].tensor);
        float *va = malloc(sizeof(float) * (size_t)n), *vb = malloc(sizeof(float) * (size_t)n);
        same = cn_numel(pb[i].tensor) == n &&
               cn_read(pa[i].tensor, va, sizeof(float) * (size_t)n) == CN_OK &&
               cn_read(pb[i].tensor, vb, sizeof(float) * (size_t)n) == CN_OK &&
               memcmp(va, vb, sizeof(float) * (size_t)n) == 0;
        free(va);
        free(vb);
    }
    return same;
}

/* Copies a's parameter values into b's. */
static void copy_params(run *a, run *b) {
    int na = 0, nb = 0;
    const cn_param *pa = cn_module_params(a->net, &na);
    const cn_param *pb = cn_module_params(b->net, &nb);
    CHECK(pa && pb && na == nb);
    cn_no_grad_begin();
    for (int i = 0; pa && pb && i < na; i++)
        CHECK(cn_copy_(pb[i].tensor, pa[i].tensor) == CN_OK);
    cn_no_grad_end();
}

/* The state's values, flattened, as doubles (for comparing before and after a refused load). */
static double state_sum(cn_optimizer *opt, int *count) {
    const cn_param *s = cn_optimizer_state(opt, count);
    double sum = 0;
    for (int i = 0; s && i < *count; i++) {
        cn_scope_begin();
        double v = NAN;
        cn_tensor *t = cn_sum(cn_cast(s[i].tensor, CN_F64));
        CHECK(t && cn_read(t, &v, sizeof v) == CN_OK);
        sum += v * (i + 1);
        cn_scope_end();
    }
    return sum;
}

/* ---- the state of one parameter against the update rules ------------------------------------- */

/* loss = sum(w * c), so the gradient is c at every step. */
static void constant_gradient_steps(cn_optimizer *opt, cn_tensor *w, const double *c, int steps) {
    int64_t shape[2] = {2, 3};
    for (int k = 0; k < steps; k++) {
        cn_scope_begin();
        cn_tensor *ct = th_tensor(c, shape, 2, CN_F32);
        cn_grads *g = cn_backward(cn_sum(cn_mul(w, cn_to_device(ct, ad()))));
        CHECK(g && cn_optimizer_step(opt, g) == CN_OK);
        cn_grads_free(g);
        cn_scope_end();
    }
}

static void test_sgd_state_is_the_momentum_buffer_of_the_rule(void) {
    const double w0[6] = {1, 2, 3, 4, 5, 6}, c[6] = {0.5, -1, 2, 0.25, -0.75, 1.5};
    int64_t shape[2] = {2, 3};
    cn_tensor *w0t = th_tensor(w0, shape, 2, CN_F32);
    cn_tensor *w = cn_require_grad(cn_to_device(w0t, ad()));
    cn_release(w0t);
    cn_param p = {"w", w};
    cn_optimizer *opt = cn_sgd_new(&p, 1, 0.1, 0.9, 0.0, 0, 0.0);
    int n = -1;
    CHECK(cn_optimizer_state(opt, &n) != NULL && n == 0); /* no step yet: no state */
    constant_gradient_steps(opt, w, c, 2);
    const cn_param *s = cn_optimizer_state(opt, &n);
    CHECK(s && n == 1);
    if (s && n == 1) {
        CHECK(strcmp(s[0].name, "w.momentum_buffer") == 0);
        double want[6]; /* buf1 = g; buf2 = 0.9 buf1 + g */
        for (int i = 0; i < 6; i++)
            want[i] = 0.9 * c[i] + c[i];
        th_check_values("momentum_buffer", s[0].tensor, want, 6, 1e-6);
    }
    cn_optimizer_free(opt);
    cn_release(w);
}

static void test_adamw_state_is_the_moments_and_the_step_count(void) {
    const double w0[6] = {1, 2, 3, 4, 5, 6}, c[6] = {0.5, -1, 2, 0.25, -0.75, 1.5};
    int64_t shape[2] = {2, 3};
    cn_tensor *w0t = th_tensor(w0, shape, 2, CN_F32);
    cn_tensor *w = cn_require_grad(cn_to_device(w0t, ad()));
    cn_release(w0t);
    cn_param p = {NULL, w}; /* unnamed: named by its index */
    cn_optimizer *opt = cn_adamw_new(&p, 1, 0.01, 0.9, 0.999, 1e-8, 0.01);
    constant_gradient_steps(opt, w, c, 3);
    int n = 0;
    const cn_param *s = cn_optimizer_state(opt, &n);
    CHECK(s && n == 3);
    if (s && n == 3) {
        CHECK(strcmp(s[0].name, "0.exp_avg") == 0);
        CHECK(strcmp(s[1].name, "0.exp_avg_sq") == 0);
        CHECK(strcmp(s[2].name, "0.step") == 0);
        double m[6], v[6];
        for (int i = 0; i < 6; i++) {
            m[i] = v[i] = 0;
            for (int k = 0; k < 3; k++) {
                m[i] = 0.9 * m[i] + 0.1 * c[i];
                v[i] = 0.999 * v[i] + 0.001 * c[i] * c[i];
            }
        }
        th_check_values("exp_avg", s[0].tensor, m, 6, 1e-6);
        th_check_values("exp_avg_sq", s[1].tensor, v, 6, 1e-6);
        int64_t steps = 0;
        CHECK(cn_dtype_of(s[2].tensor) == CN_I64 && cn_ndim(s[2].tensor) == 0);
        CHECK(cn_read(s[2].tensor, &steps, sizeof steps) == CN_OK && steps == 3);
    }
    cn_optimizer_free(opt);
    cn_release(w);
}

/* ---- continuing from a loaded state ---------------------------------------------------------- */

static void continues_bit_identically(int adamw) {
    run a = run_new(adamw, HIDDEN, 7), b = run_new(adamw, HIDDEN, 99),
        c = run_new(adamw, HIDDEN, 99);
    for (int k = 0; k < 3; k++)
        step(&a, k);
    copy_params(&a, &b);
    copy_params(&a, &c); /* c: the parameters without the state */
    int n = 0;
    const cn_param *s = cn_optimizer_state(a.opt, &n);
    CHECK(s && n == (adamw ? 12 : 4));
    CHECK(cn_optimizer_load_state(b.opt, s, n) == CN_OK);
    CHECK(same_params(&a, &b));
    for (int k = 3; k < 6; k++) {
        step(&a, k);
        step(&b, k);
        step(&c, k);
    }
    printf("  %s: with the state %s, without it %s\n", adamw ? "adamw" : "sgd",
           same_params(&a, &b) ? "identical" : "DIFFERENT",
           same_params(&a, &c) ? "IDENTICAL" : "different");
    CHECK(same_params(&a, &b));
    CHECK(!same_params(&a, &c));
    run_free(&a);
    run_free(&b);
    run_free(&c);
}

static void test_a_loaded_sgd_state_continues_with_the_same_bits(void) {
    continues_bit_identically(0);
}
static void test_a_loaded_adamw_state_continues_with_the_same_bits(void) {
    continues_bit_identically(1);
}

/* Loads `state` (n entries) into opt, expecting `status` with `needle` and no change. */
static void refused(cn_optimizer *opt, const cn_param *state, int n, cn_status status,
                    const char *needle) {
    int before_n = 0, after_n = 0;
    double before = state_sum(opt, &before_n);
    cn_clear_error();
    CHECK(cn_optimizer_load_state(opt, state, n) == status);
    if (!strstr(cn_last_error(), needle)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", cn_last_error(), needle);
        th_checks_failed++;
    }
    cn_clear_error();
    double after = state_sum(opt, &after_n);
    CHECK(before_n == after_n && before == after);
}

static void test_loads_refuse_mismatched_state_and_change_nothing(void) {
    /* sources a (AdamW) and s (SGD); targets ta and ts of the same kinds, stepped once */
    run a = run_new(1, HIDDEN, 7), s = run_new(0, HIDDEN, 7);
    run ta = run_new(1, HIDDEN, 8), ts = run_new(0, HIDDEN, 8);
    step(&a, 0);
    step(&s, 0);
    step(&ta, 1);
    step(&ts, 1);
    cn_scope_begin();
    int n = 0, ns = 0;
    const cn_param *st = cn_optimizer_state(a.opt, &n); /* valid: a is not touched below */
    const cn_param *sgd = cn_optimizer_state(s.opt, &ns);
    CHECK(st && n == 12 && sgd && ns == 4);
    cn_param *copy = malloc(sizeof *copy * (size_t)(n + 1));
    /* the state as it is loads */
    memcpy(copy, st, sizeof *copy * (size_t)n);
    /* a buffer of another shape */
    int64_t wrong[2] = {HIDDEN + 1, IN};
    copy[0].tensor = cn_zeros(wrong, 2, CN_F32, cn_cpu());
    refused(ta.opt, copy, n, CN_ERR_SHAPE, "0.weight.exp_avg");
    /* another dtype */
    memcpy(copy, st, sizeof *copy * (size_t)n);
    copy[1].tensor = cn_cast(st[1].tensor, CN_F64);
    refused(ta.opt, copy, n, CN_ERR_DTYPE, "0.weight.exp_avg_sq");
    /* a parameter's state in part: its step left out */
    memcpy(copy, st, sizeof *copy * (size_t)n);
    refused(ta.opt, copy, 2, CN_ERR_INVALID_ARG, "'0.weight.step' is missing");
    /* a step that is not a whole number >= 1 */
    copy[2].tensor = cn_full(NULL, 0, 1.5, CN_F32, cn_cpu());
    refused(ta.opt, copy, n, CN_ERR_INVALID_ARG, "whole number");
    /* the same entry twice */
    memcpy(copy, st, sizeof *copy * (size_t)n);
    copy[3] = copy[0];
    refused(ta.opt, copy, n, CN_ERR_INVALID_ARG, "given twice");
    /* an unknown parameter */
    memcpy(copy, st, sizeof *copy * (size_t)n);
    copy[0].name = "5.weight.exp_avg";
    refused(ta.opt, copy, n, CN_ERR_INVALID_ARG, "names no parameter");
    /* the other kind's state, both ways */
    refused(ta.opt, sgd, ns, CN_ERR_INVALID_ARG, "is SGD's");
    refused(ts.opt, st, n, CN_ERR_INVALID_ARG, "is AdamW's");
    /* and the good state loads: ta now continues as a does */
    CHECK(cn_optimizer_load_state(ta.opt, st, n) == CN_OK);
    int tn = 0;
    CHECK(state_sum(ta.opt, &tn) == state_sum(a.opt, &n));
    free(copy);
    cn_scope_end();
    run_free(&a);
    run_free(&s);
    run_free(&ta);
    run_free(&ts);
}

/* ---- the training state in a file ------------------------------------------------------------ */

static void test_a_training_state_file_continues_with_the_same_bits(void) {
    run a = run_new(1, HIDDEN, 7), b = run_new(1, HIDDEN, 99);
    for (int k = 0; k < 4; k++)
        step(&a, k);
    const char *path = tmp_path("state.safetensors");
    const float losses[3] = {2.5f, 2.25f, 2.0f};
    int64_t three = 3;
    cn_tensor *hist = cn_from_data(losses, &three, 1, CN_F32, cn_cpu());
    cn_param extra = {"history.loss", hist};
    const char *keys[3] = {"epoch", "note", "unicode"};
    const char *values[3] = {"4", "quote \" backslash \\ newline \n tab \t", "\xc3\xa9t\xc3\xa9"};
    CHECK(cn_train_state_save(path, a.net, a.opt, &extra, 1, keys, values, 3) == CN_OK);
    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &h) == CN_OK);
    const char *v = cn_safetensors_metadata(h, "cinder.train_state");
    CHECK(v && strcmp(v, "1") == 0);
    v = cn_safetensors_metadata(h, "format");
    CHECK(v && strcmp(v, "pt") == 0);
    for (int i = 0; i < 3; i++) {
        v = cn_safetensors_metadata(h, keys[i]);
        CHECK(v && strcmp(v, values[i]) == 0);
    }
    /* 4 parameters, 12 optimizer tensors, 1 extra */
    CHECK(cn_safetensors_count(h) == 17);
    cn_tensor *back = cn_safetensors_get(h, "history.loss");
    th_check_values("history.loss", back, (const double[]){2.5, 2.25, 2.0}, 3, 0);
    cn_release(back);
    back = cn_safetensors_get(h, "optimizer.2.bias.step");
    int64_t steps = 0;
    CHECK(back && cn_read(back, &steps, sizeof steps) == CN_OK && steps == 4);
    cn_release(back);
    CHECK(cn_train_state_restore(h, b.net, b.opt) == CN_OK);
    cn_safetensors_free(h);
    CHECK(same_params(&a, &b));
    for (int k = 4; k < 7; k++) {
        step(&a, k);
        step(&b, k);
    }
    CHECK(same_params(&a, &b));
    /* reserved keys */
    cn_clear_error();
    const char *reserved[1] = {"cinder.train_state"};
    CHECK(cn_train_state_save(path, a.net, a.opt, NULL, 0, reserved, values, 1) ==
          CN_ERR_INVALID_ARG);
    const char *fmt[1] = {"format"};
    CHECK(cn_train_state_save(path, a.net, a.opt, NULL, 0, fmt, values, 1) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "\"format\"") != NULL);
    const char *twice[2] = {"k", "k"};
    CHECK(cn_train_state_save(path, a.net, a.opt, NULL, 0, twice, values, 2) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "both 'k'") != NULL);
    cn_clear_error();
    cn_release(hist);
    run_free(&a);
    run_free(&b);
}

static void test_restore_refuses_other_files_and_models_and_changes_nothing(void) {
    run a = run_new(1, HIDDEN, 7), wide = run_new(1, HIDDEN + 2, 5), plain = run_new(1, HIDDEN, 5);
    step(&a, 0);
    step(&wide, 0);
    step(&plain, 0);
    const char *state = tmp_path("a.safetensors"), *model = tmp_path("model.safetensors");
    CHECK(cn_train_state_save(state, a.net, a.opt, NULL, 0, NULL, NULL, 0) == CN_OK);
    int n = 0;
    const cn_param *p = cn_module_params(a.net, &n);
    const char *names[4];
    cn_tensor *ts[4];
    for (int i = 0; i < n && i < 4; i++) {
        names[i] = p[i].name;
        ts[i] = p[i].tensor;
    }
    CHECK(cn_safetensors_save(model, names, ts, n) == CN_OK);
    cn_safetensors *h = NULL;
    /* a model-only file */
    CHECK(cn_safetensors_load(model, cn_cpu(), &h) == CN_OK);
    run copy = run_new(1, HIDDEN, 5);
    step(&copy, 0);
    int sn = 0;
    double before = state_sum(plain.opt, &sn);
    CHECK(cn_train_state_restore(h, plain.net, plain.opt) == CN_ERR_IO);
    CHECK(strstr(cn_last_error(), "not a training state") != NULL);
    cn_safetensors_free(h);
    /* a state of a model of other sizes */
    CHECK(cn_safetensors_load(state, cn_cpu(), &h) == CN_OK);
    int wn = 0;
    double wide_before = state_sum(wide.opt, &wn);
    run wide_copy = run_new(1, HIDDEN + 2, 5);
    step(&wide_copy, 0);
    cn_clear_error();
    CHECK(cn_train_state_restore(h, wide.net, wide.opt) == CN_ERR_SHAPE);
    CHECK(strstr(cn_last_error(), "'0.weight'") != NULL);
    CHECK(same_params(&wide, &wide_copy));
    CHECK(state_sum(wide.opt, &wn) == wide_before);
    /* an optimizer of the other kind: refused before the model is written */
    run sgd = run_new(0, HIDDEN, 5), sgd_copy = run_new(0, HIDDEN, 5);
    cn_clear_error();
    CHECK(cn_train_state_restore(h, sgd.net, sgd.opt) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "AdamW's") != NULL);
    CHECK(same_params(&sgd, &sgd_copy));
    cn_safetensors_free(h);
    CHECK(same_params(&plain, &copy));
    CHECK(state_sum(plain.opt, &sn) == before);
    cn_clear_error();
    run_free(&a);
    run_free(&wide);
    run_free(&plain);
    run_free(&copy);
    run_free(&wide_copy);
    run_free(&sgd);
    run_free(&sgd_copy);
}

/* ---- batches --------------------------------------------------------------------------------- */

static void test_batches_seek_lands_where_reset_and_skipping_would(void) {
    enum { N = 10 };
    double v[N];
    for (int i = 0; i < N; i++)
        v[i] = i;
    int64_t shape[1] = {N};
    cn_tensor *x = th_tensor(v, shape, 1, CN_F64);
    cn_batches *a = cn_batches_new(x, NULL, 3, 1, 5, 0), *b = cn_batches_new(x, NULL, 3, 1, 5, 0);
    CHECK(cn_batches_count(a) == 4);
    for (int64_t k = 0; k <= 4; k++) {
        cn_batches_reset(a, 2);
        for (int64_t j = 0; j < k; j++) {
            cn_tensor *t = NULL;
            CHECK(cn_batches_next(a, &t, NULL) == 1);
            cn_release(t);
        }
        CHECK(cn_batches_seek(b, 2, k) == CN_OK);
        for (;;) {
            cn_tensor *ta = NULL, *tb = NULL;
            int ra = cn_batches_next(a, &ta, NULL), rb = cn_batches_next(b, &tb, NULL);
            CHECK(ra == rb);
            if (ra == 1 && rb == 1) {
                double ga[3] = {0}, gb[3] = {0};
                CHECK(cn_numel(ta) == cn_numel(tb));
                th_read(ta, ga);
                th_read(tb, gb);
                CHECK(memcmp(ga, gb, sizeof ga) == 0);
            }
            cn_release(ta);
            cn_release(tb);
            if (ra != 1 || rb != 1) break;
        }
    }
    cn_clear_error();
    CHECK(cn_batches_seek(b, 0, 5) == CN_ERR_INVALID_ARG);
    CHECK(strstr(cn_last_error(), "give 0 to 4") != NULL);
    CHECK(cn_batches_seek(b, 0, -1) == CN_ERR_INVALID_ARG);
    cn_clear_error();
    cn_batches_free(a);
    cn_batches_free(b);
    cn_release(x);
}

int main(void) {
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_sgd_state_is_the_momentum_buffer_of_the_rule);
    RUN(test_adamw_state_is_the_moments_and_the_step_count);
    RUN(test_a_loaded_sgd_state_continues_with_the_same_bits);
    RUN(test_a_loaded_adamw_state_continues_with_the_same_bits);
    RUN(test_loads_refuse_mismatched_state_and_change_nothing);
    RUN(test_a_training_state_file_continues_with_the_same_bits);
    RUN(test_restore_refuses_other_files_and_models_and_changes_nothing);
    RUN(test_batches_seek_lands_where_reset_and_skipping_would);
    const char *files[] = {"state.safetensors", "a.safetensors", "model.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        remove(tmp_path(files[i]));
    rmdir(tmp_dir);
    return th_finish();
}
