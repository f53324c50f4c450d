/* SQLite-style allocation-failure sweeps of real work: `cinder train`'s own step
 * (src/cli/models.c: cli_model_train_step) on its own models, the MLP (784-256-128-10, its
 * hidden layers the fused linear + relu extension op) and the CNN (conv relu pool conv relu pool
 * flatten linear relu linear), each with SGD (momentum 0.9, as `cinder train`) and with AdamW
 * (weight decay 0.01), on batches of 4 images; then a checkpoint save, a load into the model's
 * parameters, `cinder eval`'s load of a model, the evaluation and the data loading.
 *
 * For every N, the N-th allocation of the call fails, until the call succeeds. Each failing
 * point must return CN_ERR_OUT_OF_MEMORY with a message "<op>: ...", bring the counters
 * (cn_live_tensors, cn_live_bytes, the scope depth) back to their baseline, and leave the
 * parameters bit-identical to before. The optimizer state is checked through what it does: after
 * every failure the step is retried, and the step that finally succeeds, and the one after it,
 * must be bit-identical (parameters and loss) to those of an undisturbed run from the same seed,
 * which a moved momentum buffer, a half-updated moment or a step count bumped by a failed step
 * would change. Failing steps are swept twice per workload: on the first step (the optimizer
 * creates its state) and on the third (the state exists). */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */

#include <stdint.h>
#include <unistd.h>

#include "cli/models.h"
#include "harness.h"
#include "idx_file.h"

enum { BATCH = 4, PIXELS = 784, STEPS = 5 };

static char dir[64];

/* ---- a model and its optimizer, as `cinder train` makes them ----------------------------------
 */

typedef struct run {
    cli_model m;
    cn_optimizer *opt;
} run;

static run run_new(cli_model_kind kind, int adamw) {
    run r = {0};
    cn_generator gen = cn_generator_new(42);
    CHECK(cli_model_new(kind, cn_autodiff(cn_cpu()), &gen, &r.m) == CN_OK);
    int n = 0;
    const cn_param *params = cn_module_params(r.m.net, &n);
    r.opt = adamw ? cn_adamw_new(params, n, 1e-3, 0.9, 0.999, 1e-8, 0.01)
                  : cn_sgd_new(params, n, 0.1, 0.9, 0.0, 0, 0.0);
    CHECK(r.opt != NULL);
    return r;
}

static void run_free(run *r) {
    cn_optimizer_free(r->opt);
    cli_model_free(&r->m);
}

/* Every parameter's bytes, concatenated (malloc'd; *n gets the count of floats). */
static float *snapshot(cli_model *m, size_t *n) {
    int count = 0;
    const cn_param *p = cn_module_params(m->net, &count);
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += (size_t)cn_numel(p[i].tensor);
    float *v = malloc(sizeof *v * total);
    size_t at = 0;
    for (int i = 0; i < count && v; i++) {
        size_t k = (size_t)cn_numel(p[i].tensor);
        if (cn_read(p[i].tensor, v + at, k * sizeof *v) != CN_OK) {
            fprintf(stderr, "snapshot: %s\n", cn_last_error());
            th_checks_failed++;
        }
        at += k;
    }
    *n = total;
    return v;
}

static int same(const float *a, const float *b, size_t n) {
    return a && b && memcmp(a, b, n * sizeof *a) == 0;
}

/* The batches: images from N(0, 1) (they stand for normalised pixels) and labels 0..9, seeded;
 * batch s is x[s], y[s]. Untracked, on the autodiff device like cli_data. */
static cn_tensor *xs[STEPS], *ys[STEPS];

static void make_batches(void) {
    cn_generator gen = cn_generator_new(7);
    const int64_t xshape[2] = {BATCH, PIXELS}, yshape[1] = {BATCH};
    for (int s = 0; s < STEPS; s++) {
        cn_tensor *x = cn_rand_normal(&gen, xshape, 2, 0.0, 1.0, CN_F32, cn_cpu());
        int64_t labels[BATCH];
        for (int i = 0; i < BATCH; i++)
            labels[i] = (3 * s + 7 * i + 1) % 10;
        cn_tensor *y = cn_from_data(labels, yshape, 1, CN_I64, cn_cpu());
        xs[s] = cn_from_inner(x, cn_autodiff(cn_cpu()));
        ys[s] = cn_from_inner(y, cn_autodiff(cn_cpu()));
        cn_release(x);
        cn_release(y);
    }
}

static void free_batches(void) {
    for (int s = 0; s < STEPS; s++) {
        cn_release(xs[s]);
        cn_release(ys[s]);
    }
}

static cn_status step(run *r, int s, float *loss) {
    int applied = 0;
    cn_status st = cli_model_train_step(&r->m, r->opt, xs[s], ys[s], loss, &applied);
    if (st == CN_OK && !applied) {
        fprintf(stderr, "step %d: the loss %g is not finite\n", s, *loss);
        th_checks_failed++;
    }
    return st;
}

/* ---- the sweep of one training step ------------------------------------------------------------
 */

typedef struct sweep_result {
    int points, clean;
} sweep_result;

/* Checks one failed call: the status, the message, the counters; 1 when all hold. */
static int failed_cleanly(const char *what, int64_t n, cn_status st, int64_t live, int64_t bytes) {
    int ok = 1;
    if (st != CN_ERR_OUT_OF_MEMORY || cn_last_status() != CN_ERR_OUT_OF_MEMORY ||
        !strstr(cn_last_error(), ": ")) {
        fprintf(stderr, "%s: allocation %lld: status %s, message '%s'\n", what, (long long)n,
                cn_status_name(st), cn_last_error());
        ok = 0;
    }
    if (cn_live_tensors() != live || cn_live_bytes() != bytes || cn_scope_depth() != 0 ||
        !cn_grad_enabled()) {
        fprintf(stderr,
                "%s: allocation %lld: %+lld tensors, %+lld bytes, scope depth %d, grad "
                "mode %d after the failure\n",
                what, (long long)n, (long long)(cn_live_tensors() - live),
                (long long)(cn_live_bytes() - bytes), cn_scope_depth(), cn_grad_enabled());
        ok = 0;
    }
    return ok;
}

/* Sweeps step `swept` (0-based) of a run against the undisturbed reference run. */
static sweep_result sweep_step(cli_model_kind kind, int adamw, int swept) {
    const char *what = kind == CLI_MODEL_CNN ? (adamw ? "cnn/adamw" : "cnn/sgd")
                                             : (adamw ? "mlp/adamw" : "mlp/sgd");
    sweep_result res = {0, 0};
    /* the reference: swept + 2 undisturbed steps, their parameters and losses */
    run ref = run_new(kind, adamw);
    float *want[STEPS] = {0}, want_loss[STEPS];
    size_t n = 0;
    for (int s = 0; s <= swept + 1; s++) {
        CHECK(step(&ref, s, &want_loss[s]) == CN_OK);
        want[s] = snapshot(&ref.m, &n);
    }
    run_free(&ref);

    run r = run_new(kind, adamw);
    float loss = 0;
    for (int s = 0; s < swept; s++)
        CHECK(step(&r, s, &loss) == CN_OK);
    float *before = snapshot(&r.m, &n);
    int64_t live = cn_live_tensors(), bytes = cn_live_bytes();
    cn_status st = CN_ERR_OUT_OF_MEMORY;
    for (int64_t k = 1; st != CN_OK && k < 100000; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        st = step(&r, swept, &loss);
        cn_alloc_fail_after(0);
        if (st == CN_OK) break;
        res.points++;
        int ok = failed_cleanly(what, k, st, live, bytes);
        float *now = snapshot(&r.m, &n);
        if (!same(now, before, n)) {
            fprintf(stderr, "%s: allocation %lld: the failed step changed the parameters\n", what,
                    (long long)k);
            ok = 0;
        }
        free(now);
        res.clean += ok;
        if (!ok && res.points - res.clean > 5) break; /* enough to see what is wrong */
    }
    CHECK(st == CN_OK);
    float *after = snapshot(&r.m, &n);
    CHECK(same(after, want[swept], n) && memcmp(&loss, &want_loss[swept], sizeof loss) == 0);
    free(after);
    /* the next step too: the optimizer state was as undisturbed */
    CHECK(step(&r, swept + 1, &loss) == CN_OK);
    after = snapshot(&r.m, &n);
    CHECK(same(after, want[swept + 1], n) && memcmp(&loss, &want_loss[swept + 1], 4) == 0);
    free(after);
    free(before);
    for (int s = 0; s < STEPS; s++)
        free(want[s]);
    run_free(&r);
    printf("     %s, step %d: %d failure points, %d clean\n", what, swept + 1, res.points,
           res.clean);
    CHECK(res.points > 20 && res.clean == res.points);
    return res;
}

static void sweep_both_steps(cli_model_kind kind, int adamw) {
    sweep_step(kind, adamw, 0); /* the optimizer makes its state */
    sweep_step(kind, adamw, 2); /* the state exists */
}

static void test_mlp_step_with_sgd_fails_cleanly_at_every_allocation(void) {
    sweep_both_steps(CLI_MODEL_MLP, 0);
}
static void test_mlp_step_with_adamw_fails_cleanly_at_every_allocation(void) {
    sweep_both_steps(CLI_MODEL_MLP, 1);
}
static void test_cnn_step_with_sgd_fails_cleanly_at_every_allocation(void) {
    sweep_both_steps(CLI_MODEL_CNN, 0);
}
static void test_cnn_step_with_adamw_fails_cleanly_at_every_allocation(void) {
    sweep_both_steps(CLI_MODEL_CNN, 1);
}

/* A scope that cannot open: the step must not run without one (every intermediate would outlive
 * it) and must say so. The scope stack grows only at its capacity, so the test opens scopes until
 * the next one needs memory, then makes that allocation fail. */
static void test_step_whose_scope_cannot_open_changes_nothing(void) {
    run r = run_new(CLI_MODEL_MLP, 1);
    float loss = 0;
    CHECK(step(&r, 0, &loss) == CN_OK);
    size_t n = 0;
    float *before = snapshot(&r.m, &n);
    int opened = 0;
    for (;;) { /* open scopes up to the stack's capacity */
        cn_alloc_fail_after(1);
        cn_status s = cn_scope_begin();
        cn_alloc_fail_after(0);
        if (s != CN_OK) break;
        opened++;
    }
    cn_clear_error();
    int64_t live = cn_live_tensors(), bytes = cn_live_bytes();
    cn_alloc_fail_after(1); /* the step's cn_scope_begin */
    int applied = 1;
    cn_status st = cli_model_train_step(&r.m, r.opt, xs[1], ys[1], &loss, &applied);
    cn_alloc_fail_after(0);
    CHECK(st == CN_ERR_OUT_OF_MEMORY && cn_last_status() == CN_ERR_OUT_OF_MEMORY);
    CHECK(strstr(cn_last_error(), "scope_begin: ") == cn_last_error());
    CHECK(applied == 0);
    CHECK(cn_live_tensors() == live && cn_live_bytes() == bytes);
    CHECK(cn_scope_depth() == opened);
    float *after = snapshot(&r.m, &n);
    CHECK(same(after, before, n));
    free(after);
    free(before);
    for (int i = 0; i < opened; i++)
        cn_scope_end();
    cn_clear_error();
    run_free(&r);
}

/* A loss that is not finite: the step is not taken (the caller reports the divergence). */
static void test_step_with_a_non_finite_loss_changes_nothing(void) {
    run r = run_new(CLI_MODEL_MLP, 0);
    /* the last layer's bias +inf for class 0: the logits hold +inf, log-softmax NaN */
    cn_tensor *bias = cn_module_find(r.m.net, "4.bias");
    cn_tensor *inf = cn_full((const int64_t[]){1}, 1, INFINITY, CN_F32, cn_cpu());
    cn_no_grad_begin();
    cn_tensor *first = cn_slice(bias, 0, 0, 1, 1);
    CHECK(first && cn_copy_(first, inf) == CN_OK);
    cn_release(first);
    cn_no_grad_end();
    size_t n = 0;
    float *before = snapshot(&r.m, &n);
    float loss = 0;
    int applied = 1;
    CHECK(cli_model_train_step(&r.m, r.opt, xs[0], ys[0], &loss, &applied) == CN_OK);
    CHECK(!isfinite(loss) && applied == 0);
    float *after = snapshot(&r.m, &n);
    CHECK(same(after, before, n));
    free(after);
    free(before);
    cn_release(inf);
    run_free(&r);
}

/* ---- checkpoints and evaluation
 * ------------------------------------------------------------------ */

static int64_t file_size(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* A save over an existing checkpoint with every allocation failing in turn: each is
 * CN_ERR_OUT_OF_MEMORY, the old file byte-identical, no temporary file left; then the load into
 * another model's parameters (cn_safetensors_load_into) and `cinder eval`'s load
 * (cn_safetensors_load, cli_model_detect, cli_model_load), each swept the same way: the parameters
 * unchanged at every failure, and equal to the saved ones once the call succeeds. */
static void test_checkpoint_save_and_load_fail_cleanly_at_every_allocation(void) {
    char path[128], tmp[160];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    run trained = run_new(CLI_MODEL_CNN, 0), fresh = run_new(CLI_MODEL_CNN, 0);
    CHECK(cli_model_save(&fresh.m, path) == CN_OK); /* the old checkpoint: fresh's parameters */
    float loss;
    CHECK(step(&trained, 0, &loss) == CN_OK);
    size_t n = 0, n_old = 0, n_now = 0;
    float *saved = snapshot(&trained.m, &n), *old_params = snapshot(&fresh.m, &n);
    unsigned char *old_file = th_read_file(path, &n_old);
    int64_t live = cn_live_tensors(), bytes = cn_live_bytes();
    int points[3] = {0}, clean[3] = {0};

    cn_status st = CN_ERR_OUT_OF_MEMORY;
    for (int64_t k = 1; st != CN_OK && k < 10000; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        st = cli_model_save(&trained.m, path);
        cn_alloc_fail_after(0);
        if (st == CN_OK) break;
        points[0]++;
        int ok = failed_cleanly("save", k, st, live, bytes);
        unsigned char *now = th_read_file(path, &n_now);
        if (!now || n_now != n_old || memcmp(now, old_file, n_old) != 0 || file_size(tmp) >= 0) {
            fprintf(stderr, "save: allocation %lld: the old checkpoint changed or %s is left\n",
                    (long long)k, tmp);
            ok = 0;
        }
        free(now);
        clean[0] += ok;
    }
    CHECK(st == CN_OK);

    /* the load into fresh's parameters (tracked leaves) */
    int count = 0;
    const cn_param *params = cn_module_params(fresh.m.net, &count);
    char name_buf[16]
                 [32]; /* copies: the array cn_module_params returns lasts until its next call */
    const char *names[16];
    cn_tensor *tensors[16];
    CHECK(count <= 16);
    for (int i = 0; i < count && i < 16; i++) {
        snprintf(name_buf[i], sizeof name_buf[i], "%s", params[i].name);
        names[i] = name_buf[i];
        tensors[i] = params[i].tensor;
    }
    for (int which = 1; which <= 2; which++) {
        st = CN_ERR_OUT_OF_MEMORY;
        for (int64_t k = 1; st != CN_OK && k < 10000; k++) {
            cn_clear_error();
            cn_safetensors *h = NULL;
            cn_alloc_fail_after(k);
            if (which == 1) {
                st = cn_safetensors_load_into(path, names, tensors, count);
            } else {
                cli_model_kind kind = CLI_MODEL_MLP;
                st = cn_safetensors_load(path, cn_autodiff(cn_cpu()), &h);
                if (st == CN_OK) st = cli_model_detect(h, path, &kind);
                if (st == CN_OK && kind != CLI_MODEL_CNN) st = CN_ERR_INVALID_ARG;
                if (st == CN_OK) st = cli_model_load(&fresh.m, h, path);
            }
            cn_alloc_fail_after(0);
            cn_safetensors_free(h);
            if (st == CN_OK) break;
            points[which]++;
            int ok = failed_cleanly(which == 1 ? "load_into" : "eval load", k, st, live, bytes);
            float *now = snapshot(&fresh.m, &n);
            if (!same(now, old_params, n)) {
                fprintf(stderr, "load %d: allocation %lld: the parameters changed\n", which,
                        (long long)k);
                ok = 0;
            }
            free(now);
            clean[which] += ok;
        }
        CHECK(st == CN_OK);
        float *now = snapshot(&fresh.m, &n);
        CHECK(same(now, saved, n));
        free(now);
        /* a model with the old values again for the next sweep */
        run_free(&fresh);
        fresh = run_new(CLI_MODEL_CNN, 0);
        params = cn_module_params(fresh.m.net, &count);
        for (int i = 0; i < count && i < 16; i++)
            tensors[i] = params[i].tensor; /* the same names */
    }
    printf("     save: %d points, %d clean; load_into: %d, %d; eval load: %d, %d\n", points[0],
           clean[0], points[1], clean[1], points[2], clean[2]);
    for (int w = 0; w < 3; w++)
        CHECK(points[w] > 3 && clean[w] == points[w]);
    free(saved);
    free(old_params);
    free(old_file);
    run_free(&trained);
    run_free(&fresh);
    remove(path);
}

/* cli_model_accuracy (what `cinder train` runs after each epoch and `cinder eval` once) with
 * every allocation failing in turn: -1 with CN_ERR_OUT_OF_MEMORY, the model back in training
 * mode, grad mode back on, nothing leaked; the accuracy once it succeeds equals the undisturbed
 * one. */
static void test_evaluation_fails_cleanly_at_every_allocation(void) {
    run r = run_new(CLI_MODEL_CNN, 0);
    cn_tensor *images = cn_cat((cn_tensor *[]){xs[0], xs[1]}, 2, 0);
    cn_tensor *labels = cn_cat((cn_tensor *[]){ys[0], ys[1]}, 2, 0);
    double want = cli_model_accuracy(&r.m, images, labels, 3); /* batches of 3, 3 and 2 */
    CHECK(want >= 0 && want <= 1);
    int64_t live = cn_live_tensors(), bytes = cn_live_bytes();
    int points = 0, clean = 0;
    double got = -1;
    for (int64_t k = 1; got < 0 && k < 10000; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        got = cli_model_accuracy(&r.m, images, labels, 3);
        cn_alloc_fail_after(0);
        if (got >= 0) break;
        points++;
        int ok = failed_cleanly("accuracy", k, CN_ERR_OUT_OF_MEMORY, live, bytes);
        ok &= cn_module_is_training(r.m.net) != 0;
        clean += ok;
    }
    CHECK(got == want);
    printf("     evaluation: %d points, %d clean\n", points, clean);
    CHECK(points > 10 && clean == points);
    cn_release(images);
    cn_release(labels);
    run_free(&r);
}

/* A tiny Fashion-MNIST in IDX files (uncompressed, which the loader reads like the .gz ones):
 * n images of 28x28 pixels, pixel k of image i being (13 i + k) % 256, and labels i % 10. */
static int write_idx(const char *name, int64_t n, int images) {
    static uint8_t data[8 * PIXELS];
    char path[160];
    if (n > 8) return -1;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int64_t i = 0; i < n; i++)
        for (int k = 0; k < (images ? PIXELS : 1); k++)
            data[i * (images ? PIXELS : 1) + k] =
                (uint8_t)(images ? (13 * i + k) % 256 : i % 10);
    const uint32_t dims[3] = {(uint32_t)n, 28, 28};
    return th_write_idx(path, dims, images ? 3 : 1, data);
}

/* `cinder train`'s data loading (cli_data_load: the four IDX files, the slice to --limit, the
 * normalisation, the view on the training device) with every allocation failing in turn: each is
 * CN_ERR_OUT_OF_MEMORY with every output NULL and nothing leaked; once it succeeds the images are
 * (pixel / 255 - mean) / std, computed here in double, and the labels the ones written. */
static void test_data_loading_fails_cleanly_at_every_allocation(void) {
    CHECK(write_idx("train-images-idx3-ubyte", 6, 1) == 0);
    CHECK(write_idx("train-labels-idx1-ubyte", 6, 0) == 0);
    CHECK(write_idx("t10k-images-idx3-ubyte", 3, 1) == 0);
    CHECK(write_idx("t10k-labels-idx1-ubyte", 3, 0) == 0);
    int64_t live = cn_live_tensors(), bytes = cn_live_bytes();
    int points = 0, clean = 0;
    cli_data d = {0};
    cn_status st = CN_ERR_OUT_OF_MEMORY;
    for (int64_t k = 1; st != CN_OK && k < 10000; k++) {
        cn_clear_error();
        cn_alloc_fail_after(k);
        st = cli_data_load(dir, cn_autodiff(cn_cpu()), 1, 4, 0, &d); /* --limit 4 */
        cn_alloc_fail_after(0);
        if (st == CN_OK) break;
        points++;
        int ok = failed_cleanly("data", k, st, live, bytes);
        if (d.train_x || d.train_y || d.test_x || d.test_y) {
            fprintf(stderr, "data: allocation %lld: an output is set\n", (long long)k);
            ok = 0;
        }
        clean += ok;
    }
    CHECK(st == CN_OK);
    CHECK(d.train_x && cn_shape(d.train_x)[0] == 4 && cn_shape(d.train_x)[1] == PIXELS);
    CHECK(d.test_x && cn_shape(d.test_x)[0] == 3);
    if (d.train_x && d.train_y && d.test_y) {
        double *x = malloc(sizeof *x * 4 * PIXELS), y[4], ty[3];
        CHECK(th_read(d.train_x, x) == 4 * PIXELS && th_read(d.train_y, y) == 4);
        CHECK(th_read(d.test_y, ty) == 3);
        for (int i = 0; i < 4; i++) {
            CHECK(y[i] == i % 10);
            for (int p = 0; p < PIXELS; p += 97)
                CHECK_NEAR(x[i * PIXELS + p],
                           ((13 * i + p) % 256 / 255.0 - CLI_FASHION_MEAN) / CLI_FASHION_STD, 1e-6);
        }
        CHECK(ty[0] == 0 && ty[1] == 1 && ty[2] == 2);
        free(x);
    }
    cli_data_free(&d);
    printf("     data loading: %d points, %d clean\n", points, clean);
    CHECK(points > 10 && clean == points);
    const char *files[4] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"};
    for (int i = 0; i < 4; i++) {
        char path[160];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        remove(path);
    }
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/cinder-sweep-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    make_batches();
    RUN(test_step_whose_scope_cannot_open_changes_nothing);
    RUN(test_step_with_a_non_finite_loss_changes_nothing);
    RUN(test_mlp_step_with_sgd_fails_cleanly_at_every_allocation);
    RUN(test_mlp_step_with_adamw_fails_cleanly_at_every_allocation);
    RUN(test_cnn_step_with_sgd_fails_cleanly_at_every_allocation);
    RUN(test_cnn_step_with_adamw_fails_cleanly_at_every_allocation);
    RUN(test_checkpoint_save_and_load_fail_cleanly_at_every_allocation);
    RUN(test_evaluation_fails_cleanly_at_every_allocation);
    RUN(test_data_loading_fails_cleanly_at_every_allocation);
    free_batches();
    rmdir(dir);
    return th_finish();
}
