/* The GPT of nn.h (cn_gpt_new) against PyTorch: nanoGPT's model (bench/torch/gpt_model.py) with
 * the same initial weights trained 200 steps with AdamW in float64 by tests/data/gen_gpt_curve.py,
 * whose results are data here (the suite never needs Python):
 *   - the first batch's logits, loss and gradients (cinder trains in f32: f32 tolerances);
 *   - the loss of each of the 200 steps to 1e-3 (issue 17's bar), with nanoGPT's param groups;
 *   - the same for nanoGPT's bias=False (LayerNorms with a weight only, Linears without bias):
 *     the first batch's logits;
 *   - the initial weights come from safetensors.torch.save_model, which keeps the tied pair as
 *     "lm_head.weight" alone: cn_gpt_load takes that key.
 * Also: what cinder saves reloads bit for bit and has nanoGPT's keys; a file with both tied keys
 * loads when they agree and is refused when they differ; nanoGPT's init; misuse errors. */
#define _POSIX_C_SOURCE 200809L

#include <unistd.h>

#include "harness.h"

#define INIT_FILE   TEST_DATA_DIR "/gpt_init.safetensors"
#define NOBIAS_FILE TEST_DATA_DIR "/gpt_nobias_init.safetensors"
#define CURVE_FILE  TEST_DATA_DIR "/gpt_curve.safetensors"
#define STEPS       200
#define BATCH       8
#define CTX         16

static const cn_gpt_config small = {
    .vocab_size = 30, .block_size = 16, .n_layer = 2, .n_head = 2, .n_embd = 32, .bias = 1};

static cn_device train_device(void) { return cn_autodiff(cn_cpu()); }

static double meta_real(const cn_safetensors *h, const char *key) {
    const char *v = cn_safetensors_metadata(h, key);
    CHECK(v != NULL);
    return v ? strtod(v, NULL) : NAN;
}

/* The run's data: the token stream and the batch offsets, on the host. */
typedef struct run_data {
    int64_t *tokens, length;
    int64_t *offsets; /* [STEPS, BATCH] */
} run_data;

static int64_t *read_i64(const cn_safetensors *h, const char *name, int64_t *n) {
    cn_tensor *t = cn_safetensors_get(h, name);
    *n = t ? cn_numel(t) : 0;
    int64_t *v = malloc(sizeof *v * (size_t)(*n ? *n : 1));
    CHECK(t && cn_dtype_of(t) == CN_I64 && cn_read(t, v, sizeof *v * (size_t)*n) == CN_OK);
    cn_release(t);
    return v;
}

/* Batch `step`: x = tokens[o : o + T], y = tokens[o + 1 : o + T + 1] for each row's offset o,
 * both i64 [BATCH, CTX] on the training device. */
static void batch_of(const run_data *d, int step, cn_tensor **x, cn_tensor **y) {
    int64_t xs[BATCH * CTX], ys[BATCH * CTX];
    for (int r = 0; r < BATCH; r++)
        for (int t = 0; t < CTX; t++) {
            int64_t o = d->offsets[step * BATCH + r];
            xs[r * CTX + t] = d->tokens[o + t];
            ys[r * CTX + t] = d->tokens[o + t + 1];
        }
    const int64_t shape[2] = {BATCH, CTX};
    *x = cn_from_data(xs, shape, 2, CN_I64, train_device());
    *y = cn_from_data(ys, shape, 2, CN_I64, train_device());
}

/* The mean cross-entropy of logits [B, T, V] against y [B, T]: a 0-d tensor. */
static cn_tensor *lm_loss(cn_tensor *logits, cn_tensor *y) {
    const int64_t flat2[2] = {-1, small.vocab_size}, flat1[1] = {-1};
    return cn_cross_entropy(cn_reshape(logits, flat2, 2), cn_reshape(y, flat1, 1), 0.0);
}

/* A GPT of the small config with PyTorch's initial weights. */
static cn_module *loaded_gpt(void) {
    cn_generator gen = cn_generator_new(7);
    cn_module *gpt = cn_gpt_new(&small, train_device(), CN_F32, &gen);
    cn_safetensors *h = NULL;
    CHECK(gpt && cn_safetensors_load(INIT_FILE, cn_cpu(), &h) == CN_OK);
    CHECK(cn_safetensors_count(h) > 0 && !cn_safetensors_metadata(h, "no such key"));
    CHECK(cn_gpt_load(gpt, h) == CN_OK);
    cn_safetensors_free(h);
    return gpt;
}

/* ---- against PyTorch ------------------------------------------------------------------------- */

static void test_first_step_matches_pytorch(void) {
    cn_safetensors *curve = NULL;
    CHECK(cn_safetensors_load(CURVE_FILE, cn_cpu(), &curve) == CN_OK);
    run_data d;
    int64_t n_off;
    d.tokens = read_i64(curve, "data", &d.length);
    d.offsets = read_i64(curve, "offsets", &n_off);
    CHECK(n_off == STEPS * BATCH);
    cn_module *gpt = loaded_gpt();
    cn_scope_begin();
    cn_tensor *x, *y;
    batch_of(&d, 0, &x, &y);
    cn_tensor *logits = cn_module_forward(gpt, x);
    const int64_t lshape[3] = {BATCH, CTX, small.vocab_size};
    th_check_shape("logits", logits, lshape, 3);
    cn_tensor *want_logits = cn_safetensors_get(curve, "logits0");
    double *want = th_values(want_logits);
    th_check_values("logits", logits, want, cn_numel(want_logits), 2e-5);
    free(want);
    cn_tensor *loss = lm_loss(logits, y);
    double got_loss = NAN;
    th_read(loss, &got_loss);
    cn_tensor *losses = cn_safetensors_get(curve, "losses");
    double *want_losses = th_values(losses);
    CHECK_NEAR(got_loss, want_losses[0], 2e-6);
    free(want_losses);
    cn_grads *g = cn_backward(loss);
    CHECK(g != NULL);
    /* every stored gradient, to 2e-5 of its largest entry (f32 against f64) */
    int checked = 0;
    for (int i = 0; i < cn_safetensors_count(curve); i++) {
        const char *key = cn_safetensors_name(curve, i);
        if (strncmp(key, "grad.", 5) != 0) continue;
        cn_tensor *grad = cn_grad(g, cn_module_find(gpt, key + 5));
        cn_tensor *ref = cn_safetensors_get(curve, key);
        double *w = th_values(ref), *gv = th_values(grad);
        double scale = 0, err = 0;
        for (int64_t k = 0; k < cn_numel(ref); k++)
            scale = fmax(scale, fabs(w[k]));
        for (int64_t k = 0; grad && k < cn_numel(ref); k++)
            err = fmax(err, fabs(gv[k] - w[k]));
        if (!(grad && cn_numel(grad) == cn_numel(ref) && err <= 2e-5 * scale && scale > 0)) {
            fprintf(stderr, "gradient of %s: max error %g against max |g| %g\n", key + 5, err,
                    scale);
            th_checks_failed++;
        }
        free(w);
        free(gv);
        checked++;
    }
    CHECK(checked == 7);
    cn_grads_free(g);
    cn_scope_end();
    cn_module_free(gpt);
    cn_safetensors_free(curve);
    free(d.tokens);
    free(d.offsets);
}

static void test_bias_false_logits_match_pytorch(void) {
    cn_safetensors *curve = NULL, *init = NULL;
    CHECK(cn_safetensors_load(CURVE_FILE, cn_cpu(), &curve) == CN_OK);
    CHECK(cn_safetensors_load(NOBIAS_FILE, cn_cpu(), &init) == CN_OK);
    run_data d;
    int64_t n_off;
    d.tokens = read_i64(curve, "data", &d.length);
    d.offsets = read_i64(curve, "offsets", &n_off);
    cn_gpt_config cfg = small;
    cfg.bias = 0;
    cn_generator gen = cn_generator_new(8);
    cn_module *gpt = cn_gpt_new(&cfg, train_device(), CN_F32, &gen);
    CHECK(gpt && cn_gpt_load(gpt, init) == CN_OK);
    cn_scope_begin();
    cn_tensor *x, *y;
    batch_of(&d, 0, &x, &y);
    cn_tensor *want_logits = cn_safetensors_get(curve, "nobias_logits0");
    double *want = th_values(want_logits);
    th_check_values("logits without bias", cn_module_forward(gpt, x), want, cn_numel(want_logits),
                    2e-5);
    free(want);
    cn_scope_end();
    cn_module_free(gpt);
    cn_safetensors_free(init);
    cn_safetensors_free(curve);
    free(d.tokens);
    free(d.offsets);
}

static void test_loss_curve_matches_pytorch_over_200_steps(void) {
    cn_safetensors *curve = NULL;
    CHECK(cn_safetensors_load(CURVE_FILE, cn_cpu(), &curve) == CN_OK);
    run_data d;
    int64_t n_off;
    d.tokens = read_i64(curve, "data", &d.length);
    d.offsets = read_i64(curve, "offsets", &n_off);
    cn_tensor *losses = cn_safetensors_get(curve, "losses");
    double *want = th_values(losses);
    cn_release(losses);
    cn_module *gpt = loaded_gpt();
    cn_optimizer *opt = cn_gpt_adamw_new(gpt, meta_real(curve, "lr"), meta_real(curve, "beta1"),
                                         meta_real(curve, "beta2"), meta_real(curve, "eps"),
                                         meta_real(curve, "weight_decay"));
    CHECK(opt != NULL);
    double worst = 0, last = NAN;
    int worst_step = -1;
    for (int s = 0; s < STEPS && opt; s++) {
        cn_scope_begin();
        cn_tensor *x, *y;
        batch_of(&d, s, &x, &y);
        cn_tensor *loss = lm_loss(cn_module_forward(gpt, x), y);
        cn_grads *g = loss ? cn_backward(loss) : NULL;
        double l = NAN;
        CHECK(g && th_read(loss, &l) == 1 && cn_optimizer_step(opt, g) == CN_OK);
        cn_grads_free(g);
        cn_scope_end();
        if (!(fabs(l - want[s]) <= worst)) {
            worst = fabs(l - want[s]);
            worst_step = s;
        }
        last = l;
    }
    printf("     loss %.6f -> %.6f (PyTorch %.6f -> %.6f), largest difference %.2e at step %d\n",
           want[0], last, want[0], want[STEPS - 1], worst, worst_step);
    CHECK(worst <= 1e-3);
    CHECK(want[STEPS - 1] < want[0] - 1.0); /* the run learns: the curve is worth matching */
    cn_optimizer_free(opt);
    cn_module_free(gpt);
    cn_safetensors_free(curve);
    free(want);
    free(d.tokens);
    free(d.offsets);
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

static char tmp_dir[] = "/tmp/cinder_test_gpt_XXXXXX";

static const char *tmp_path(const char *name, char *buf, size_t size) {
    snprintf(buf, size, "%s/%s", tmp_dir, name);
    return buf;
}

/* Saves gpt's parameters under their names, plus `extra` (a name and tensor) when not NULL. */
static cn_status save_params(cn_module *gpt, const char *path, const char *extra_name,
                             cn_tensor *extra) {
    int n = 0;
    const cn_param *p = cn_module_params(gpt, &n);
    const char *names[64];
    cn_tensor *tensors[64];
    CHECK(p && n < 63);
    for (int i = 0; i < n; i++) {
        names[i] = p[i].name;
        tensors[i] = p[i].tensor;
    }
    if (extra) {
        names[n] = extra_name;
        tensors[n++] = extra;
    }
    return cn_safetensors_save(path, names, tensors, n);
}

/* Whether every parameter of a and b holds the same bytes. */
static int same_params(cn_module *a, cn_module *b) {
    int na = 0, nb = 0;
    const cn_param *pa = cn_module_params(a, &na);
    const cn_param *pb = cn_module_params(b, &nb);
    int same = pa && pb && na == nb;
    for (int i = 0; same && i < na; i++) {
        size_t bytes = (size_t)cn_numel(pa[i].tensor) * 4;
        void *x = malloc(bytes), *y = malloc(bytes);
        same = strcmp(pa[i].name, pb[i].name) == 0 &&
               cn_numel(pa[i].tensor) == cn_numel(pb[i].tensor) &&
               cn_read(pa[i].tensor, x, bytes) == CN_OK &&
               cn_read(pb[i].tensor, y, bytes) == CN_OK && memcmp(x, y, bytes) == 0;
        free(x);
        free(y);
    }
    return same;
}

static void test_saved_file_has_nanogpts_keys_and_reloads_bit_for_bit(void) {
    char path[128];
    cn_module *trained = loaded_gpt(); /* PyTorch's values, then one step so they are cinder's */
    cn_optimizer *opt = cn_gpt_adamw_new(trained, 1e-2, 0.9, 0.95, 1e-8, 0.1);
    cn_scope_begin();
    const int64_t shape[2] = {2, 5};
    const int64_t ids[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 29};
    cn_tensor *x = cn_from_data(ids, shape, 2, CN_I64, train_device());
    cn_grads *g = cn_backward(lm_loss(cn_module_forward(trained, x), x));
    CHECK(g && cn_optimizer_step(opt, g) == CN_OK);
    cn_grads_free(g);
    cn_scope_end();
    CHECK(save_params(trained, tmp_path("gpt.safetensors", path, sizeof path), NULL, NULL) ==
          CN_OK);
    /* the keys: PyTorch's file's, with the tied pair under the other name */
    cn_safetensors *mine = NULL, *torch = NULL;
    CHECK(cn_safetensors_load(path, cn_cpu(), &mine) == CN_OK);
    CHECK(cn_safetensors_load(INIT_FILE, cn_cpu(), &torch) == CN_OK);
    CHECK(cn_safetensors_count(mine) == cn_safetensors_count(torch));
    for (int i = 0; i < cn_safetensors_count(torch); i++) {
        const char *key = cn_safetensors_name(torch, i);
        if (strcmp(key, "lm_head.weight") == 0) key = "transformer.wte.weight";
        cn_tensor *t = cn_safetensors_get(mine, key);
        if (!t) fprintf(stderr, "cinder's file lacks '%s'\n", key);
        CHECK(t != NULL);
        cn_release(t);
    }
    /* into a GPT drawn from another seed: every parameter bit for bit */
    cn_generator gen = cn_generator_new(99);
    cn_module *fresh = cn_gpt_new(&small, train_device(), CN_F32, &gen);
    CHECK(!same_params(trained, fresh));
    CHECK(cn_gpt_load(fresh, mine) == CN_OK);
    CHECK(same_params(trained, fresh));
    cn_safetensors_free(mine);
    cn_safetensors_free(torch);

    /* both tied keys, equal: loads */
    cn_tensor *wte = cn_module_find(trained, "transformer.wte.weight");
    cn_module *other = cn_gpt_new(&small, train_device(), CN_F32, &gen);
    CHECK(save_params(trained, tmp_path("both.safetensors", path, sizeof path), "lm_head.weight",
                      wte) == CN_OK);
    CHECK(cn_safetensors_load(path, cn_cpu(), &mine) == CN_OK);
    CHECK(cn_gpt_load(other, mine) == CN_OK);
    CHECK(same_params(trained, other));
    cn_safetensors_free(mine);

    /* both, different: refused, and nothing is written */
    cn_scope_begin();
    cn_module *third = cn_gpt_new(&small, train_device(), CN_F32, &gen);
    cn_tensor *before = cn_keep(
        cn_clone(cn_slice(cn_module_find(third, "transformer.h.0.attn.c_attn.bias"), 0, 0, 1, 1)));
    cn_tensor *twisted = cn_add_scalar(cn_to_device(wte, cn_cpu()), 1.0);
    CHECK(save_params(trained, tmp_path("differ.safetensors", path, sizeof path), "lm_head.weight",
                      twisted) == CN_OK);
    cn_scope_end();
    CHECK(cn_safetensors_load(path, cn_cpu(), &mine) == CN_OK);
    CHECK_STATUS_FAILS(cn_gpt_load(third, mine), CN_ERR_INVALID_ARG, "different values");
    double was = 0, now = 0;
    th_read(before, &was);
    cn_tensor *first =
        cn_slice(cn_module_find(third, "transformer.h.0.attn.c_attn.bias"), 0, 0, 1, 1);
    th_read(first, &now);
    CHECK(was == now && now == 0.0);
    cn_release(first);
    cn_release(before);
    cn_safetensors_free(mine);

    /* a parameter missing, and one of another shape: errors naming the key */
    const int64_t vshape[1] = {32};
    cn_tensor *v = cn_zeros(vshape, 1, CN_F32, cn_cpu());
    const char *names[1] = {"transformer.ln_f.weight"};
    CHECK(cn_safetensors_save(tmp_path("part.safetensors", path, sizeof path), names, &v, 1) ==
          CN_OK);
    CHECK(cn_safetensors_load(path, cn_cpu(), &mine) == CN_OK);
    CHECK_STATUS_FAILS(cn_gpt_load(third, mine), CN_ERR_INVALID_ARG, "'transformer.wte.weight'");
    cn_safetensors_free(mine);
    cn_release(v);
    cn_gpt_config wide = small;
    wide.n_embd = 64;
    cn_module *big = cn_gpt_new(&wide, train_device(), CN_F32, &gen);
    CHECK(cn_safetensors_load(tmp_path("gpt.safetensors", path, sizeof path), cn_cpu(), &mine) ==
          CN_OK);
    CHECK_STATUS_FAILS(cn_gpt_load(big, mine), CN_ERR_SHAPE, "transformer.wte.weight");
    cn_safetensors_free(mine);
    cn_module_free(big);
    cn_module_free(third);
    cn_module_free(other);
    cn_module_free(fresh);
    cn_optimizer_free(opt);
    cn_module_free(trained);
}

/* ---- the module itself ----------------------------------------------------------------------- */

/* mean and standard deviation of t's entries */
static void moments(cn_tensor *t, double *mean, double *sd) {
    double *v = th_values(t);
    int64_t n = cn_numel(t);
    double s = 0, q = 0;
    for (int64_t i = 0; i < n; i++)
        s += v[i];
    *mean = s / (double)n;
    for (int64_t i = 0; i < n; i++)
        q += (v[i] - *mean) * (v[i] - *mean);
    *sd = sqrt(q / (double)n);
    free(v);
}

static void test_init_and_names_are_nanogpts(void) {
    const cn_gpt_config cfg = {
        .vocab_size = 100, .block_size = 64, .n_layer = 8, .n_head = 4, .n_embd = 64, .bias = 1};
    cn_generator gen = cn_generator_new(3);
    cn_module *gpt = cn_gpt_new(&cfg, cn_cpu(), CN_F32, &gen);
    CHECK(gpt && strcmp(cn_module_kind(gpt), "GPT") == 0);
    int n = 0;
    const cn_param *p = cn_module_params(gpt, &n);
    CHECK(n == 2 + 8 * 12 + 2); /* wte, wpe; 12 per block; ln_f */
    CHECK(p && strcmp(p[0].name, "transformer.wte.weight") == 0 &&
          strcmp(p[2].name, "transformer.h.0.ln_1.weight") == 0 &&
          strcmp(p[n - 1].name, "transformer.ln_f.bias") == 0);
    double mean, sd;
    /* N(0, 0.02): 40,000 entries, so the sample sd is within 2% */
    moments(cn_module_find(gpt, "transformer.h.3.mlp.c_fc.weight"), &mean, &sd);
    CHECK(fabs(mean) < 1e-3 && fabs(sd - 0.02) < 0.02 * 0.02);
    moments(cn_module_find(gpt, "transformer.wte.weight"), &mean, &sd);
    CHECK(fabs(sd - 0.02) < 0.02 * 0.03);
    /* c_proj: N(0, 0.02 / sqrt(2 n_layer)) = N(0, 0.005) */
    moments(cn_module_find(gpt, "transformer.h.5.mlp.c_proj.weight"), &mean, &sd);
    CHECK(fabs(sd - 0.005) < 0.005 * 0.02);
    moments(cn_module_find(gpt, "transformer.h.5.attn.c_proj.weight"), &mean, &sd);
    CHECK(fabs(sd - 0.005) < 0.005 * 0.04);
    moments(cn_module_find(gpt, "transformer.h.2.attn.c_attn.bias"), &mean, &sd);
    CHECK(mean == 0 && sd == 0);
    moments(cn_module_find(gpt, "transformer.h.2.ln_2.weight"), &mean, &sd);
    CHECK(mean == 1 && sd == 0);
    cn_gpt_config back;
    CHECK(cn_gpt_config_of(gpt, &back) == CN_OK && back.n_layer == 8 && back.bias == 1);
    CHECK(cn_module_child_named(gpt, "transformer.h.7.attn.c_attn") != NULL);
    cn_module_free(gpt);

    /* without bias: no ".bias" entries, and the forward still runs (inference device) */
    cn_gpt_config nob = small;
    nob.bias = 0;
    gpt = cn_gpt_new(&nob, cn_cpu(), CN_F32, &gen);
    p = cn_module_params(gpt, &n);
    CHECK(n == 2 + 2 * 6 + 1);
    for (int i = 0; p && i < n; i++)
        CHECK(!strstr(p[i].name, "bias"));
    cn_scope_begin();
    const int64_t shape[2] = {1, 3};
    const int64_t ids[3] = {0, 5, 29};
    cn_tensor *logits = cn_module_forward(gpt, cn_from_data(ids, shape, 2, CN_I64, cn_cpu()));
    const int64_t lshape[3] = {1, 3, 30};
    th_check_shape("logits without bias", logits, lshape, 3);
    cn_scope_end();
    cn_module_free(gpt);
}

/* Position t's logits do not depend on later tokens (the attention is causal). */
static void test_logits_are_causal(void) {
    cn_generator gen = cn_generator_new(5);
    cn_module *gpt = cn_gpt_new(&small, cn_cpu(), CN_F32, &gen);
    cn_scope_begin();
    const int64_t shape[2] = {1, 6};
    const int64_t a[6] = {1, 2, 3, 4, 5, 6}, b[6] = {1, 2, 3, 9, 9, 9};
    double *la = th_values(cn_module_forward(gpt, cn_from_data(a, shape, 2, CN_I64, cn_cpu())));
    double *lb = th_values(cn_module_forward(gpt, cn_from_data(b, shape, 2, CN_I64, cn_cpu())));
    CHECK(memcmp(la, lb, sizeof(double) * 3 * 30) == 0);
    CHECK(memcmp(la + 3 * 30, lb + 3 * 30, sizeof(double) * 30) != 0);
    free(la);
    free(lb);
    cn_scope_end();
    cn_module_free(gpt);
}

static void test_misuse_gives_clear_errors(void) {
    cn_generator gen = cn_generator_new(1);
    cn_gpt_config bad = small;
    bad.n_embd = 30;
    bad.n_head = 4;
    CHECK_FAILS((cn_tensor *)cn_gpt_new(&bad, cn_cpu(), CN_F32, &gen), CN_ERR_INVALID_ARG,
                "n_embd = 30 is not a multiple of n_head = 4");
    bad = small;
    bad.n_layer = 0;
    CHECK_FAILS((cn_tensor *)cn_gpt_new(&bad, cn_cpu(), CN_F32, &gen), CN_ERR_INVALID_ARG,
                "cfg->n_layer");
    bad = small;
    bad.vocab_size = INT64_MAX / 2;
    CHECK_FAILS((cn_tensor *)cn_gpt_new(&bad, cn_cpu(), CN_F32, &gen), CN_ERR_INVALID_ARG,
                "past int64");
    CHECK_FAILS((cn_tensor *)cn_gpt_new(&small, cn_cpu(), CN_I64, &gen), CN_ERR_DTYPE, "float");
    CHECK_FAILS((cn_tensor *)cn_gpt_new(NULL, cn_cpu(), CN_F32, &gen), CN_ERR_NULL_ARG, "cfg");

    cn_module *gpt = cn_gpt_new(&small, cn_cpu(), CN_F32, &gen);
    cn_scope_begin();
    int64_t ids[17] = {0};
    const int64_t too_long[2] = {1, 17}, one_d[1] = {4}, two[2] = {1, 2};
    CHECK_FAILS(cn_module_forward(gpt, cn_from_data(ids, too_long, 2, CN_I64, cn_cpu())),
                CN_ERR_SHAPE, "more than the block_size 16");
    CHECK_FAILS(cn_module_forward(gpt, cn_from_data(ids, one_d, 1, CN_I64, cn_cpu())), CN_ERR_SHAPE,
                "[B, T]");
    const int64_t out_of_range[2] = {3, 30};
    CHECK_FAILS(cn_module_forward(gpt, cn_from_data(out_of_range, two, 2, CN_I64, cn_cpu())),
                CN_ERR_INDEX, "outside [0, 30)");
    const float f[2] = {1, 2};
    CHECK_FAILS(cn_module_forward(gpt, cn_from_data(f, two, 2, CN_F32, cn_cpu())), CN_ERR_KIND,
                "integer token ids");
    /* the runtime is usable after each */
    const int64_t fine[2] = {3, 29};
    cn_tensor *ok = cn_module_forward(gpt, cn_from_data(fine, two, 2, CN_I64, cn_cpu()));
    CHECK(ok != NULL);
    cn_scope_end();
    cn_module *lin = cn_linear_new(2, 2, 1, cn_cpu(), CN_F32, &gen);
    cn_gpt_config cfg;
    CHECK_STATUS_FAILS(cn_gpt_config_of(lin, &cfg), CN_ERR_INVALID_ARG, "cn_gpt_new");
    CHECK(cn_gpt_adamw_new(lin, 1e-3, 0.9, 0.95, 1e-8, 0.1) == NULL);
    CHECK(cn_last_status() == CN_ERR_INVALID_ARG);
    CHECK_STATUS_FAILS(cn_gpt_load(gpt, NULL), CN_ERR_NULL_ARG, "h");
    cn_scope_begin();
    CHECK_FAILS(cn_module_forward(cn_module_child_named(gpt, "transformer.h"),
                                  cn_from_data(fine, two, 2, CN_I64, cn_cpu())),
                CN_ERR_INVALID_ARG, "no forward of its own");
    cn_scope_end();
    cn_scope_begin();
    CHECK_FAILS(cn_module_forward(cn_module_child_named(gpt, "transformer.h.1.attn"),
                                  cn_from_data(f, two, 2, CN_F32, cn_cpu())),
                CN_ERR_SHAPE, "x [B, T, 32]");
    cn_scope_end();
    cn_module_free(lin);
    cn_module_free(gpt);
}

int main(void) {
    if (!mkdtemp(tmp_dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_first_step_matches_pytorch);
    RUN(test_bias_false_logits_match_pytorch);
    RUN(test_loss_curve_matches_pytorch_over_200_steps);
    RUN(test_saved_file_has_nanogpts_keys_and_reloads_bit_for_bit);
    RUN(test_init_and_names_are_nanogpts);
    RUN(test_logits_are_causal);
    RUN(test_misuse_gives_clear_errors);
    char path[128];
    const char *files[] = {"gpt.safetensors", "both.safetensors", "differ.safetensors",
                           "part.safetensors"};
    for (int i = 0; i < 4; i++)
        remove(tmp_path(files[i], path, sizeof path));
    rmdir(tmp_dir);
    return th_finish();
}
