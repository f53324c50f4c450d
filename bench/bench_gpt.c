/* The GPT of issue 17 (nn.h: cn_gpt_new, nanoGPT's model) trained as `cinder train --model gpt`
 * trains it, against bench/torch/gpt.py (the same model, initial weights, batches and
 * optimizer):
 *
 *   gpt_train_step          ms, median over --reps steps (after 3 warm-up steps): batch, forward,
 *                           cross-entropy, backward, loss read back, AdamW step
 *   gpt_train_tokens_per_s  tokens / s at that median (batch x block tokens a step)
 *   gpt_forward             ms, median over --reps forward passes under no-grad, eval mode
 *   gpt_forward_tokens_per_s
 *   gpt_final_loss          the loss of the last training step (the twin's must agree to ~1e-3
 *                           when both start from the same --weights)
 * (scripts/bench.sh adds gpt_peak_rss by running this under bench/peak_rss.py.)
 *
 * The model: vocabulary the distinct bytes of the text, block 64, n_embd 128, 4 heads, 4 layers,
 * batch 32, f32; AdamW lr 1e-3, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the matrices
 * (cn_gpt_adamw_new, nanoGPT's configure_optimizers). Batches: window r of step s starts at
 * (x >> 33) mod (len - 64), x the next value of the 64-bit LCG x = x * 6364136223846793005 +
 * 1442695040888963407 from x = 1, for the whole text; forward passes take the batches after the
 * training steps'. Initial weights: --weights FILE (a safetensors file of nanoGPT's keys, e.g.
 * `bench/torch/gpt.py --write-weights FILE`), else cn_gpt_new's draw from seed 0.
 *
 *   bench_gpt [--device cpu|cuda[:N]] [--reps N] [--text FILE] [--weights FILE]
 *             [--only train|forward]
 * --only runs one of the two loops (for profiling one of them); the other's figures are not
 * printed (a forward-only run draws the same batches as a full run's forward passes). */
#include "bench_common.h"

#define BLOCK  64
#define BATCH  32
#define WARMUP 3
#define TEXT   "/usr/share/games/fortunes/science"

typedef struct corpus {
    int64_t *tokens, length;
    int vocab;
} corpus;

static corpus read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "bench_gpt: cannot read %s (apt-get install fortunes, or --text FILE)\n",
                path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *bytes = malloc((size_t)n + 1);
    corpus c = {malloc(sizeof(int64_t) * ((size_t)n + 1)), n, 0};
    if (!bytes || !c.tokens || fread(bytes, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "bench_gpt: cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    int token[256], seen[256] = {0};
    for (long i = 0; i < n; i++)
        seen[bytes[i]] = 1;
    for (int b = 0; b < 256; b++)
        token[b] = seen[b] ? c.vocab++ : -1;
    for (long i = 0; i < n; i++)
        c.tokens[i] = token[bytes[i]];
    free(bytes);
    return c;
}

static uint64_t lcg_state = 1;

/* The next batch: x, y i64 [BATCH, BLOCK] on `device`. */
static void next_batch(const corpus *c, cn_device device, cn_tensor **x, cn_tensor **y) {
    static int64_t xs[BATCH * BLOCK], ys[BATCH * BLOCK];
    for (int r = 0; r < BATCH; r++) {
        lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
        int64_t o = (int64_t)((lcg_state >> 33) % (uint64_t)(c->length - BLOCK));
        memcpy(xs + r * BLOCK, c->tokens + o, sizeof(int64_t) * BLOCK);
        memcpy(ys + r * BLOCK, c->tokens + o + 1, sizeof(int64_t) * BLOCK);
    }
    const int64_t shape[2] = {BATCH, BLOCK};
    *x = bench_check(cn_from_data(xs, shape, 2, CN_I64, device), "batch");
    *y = bench_check(cn_from_data(ys, shape, 2, CN_I64, device), "batch");
}

static cn_tensor *lm_loss(cn_tensor *logits, cn_tensor *y, int64_t vocab) {
    const int64_t flat2[2] = {-1, vocab}, flat1[1] = {-1};
    return cn_cross_entropy(cn_reshape(logits, flat2, 2), cn_reshape(y, flat1, 1), 0.0);
}

int main(int argc, char **argv) {
    const char *device_name = "cpu", *text = TEXT, *weights = NULL;
    int reps = 20, run_train = 1, run_forward = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc)
            device_name = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--text") == 0 && i + 1 < argc)
            text = argv[++i];
        else if (strcmp(argv[i], "--weights") == 0 && i + 1 < argc)
            weights = argv[++i];
        else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "train") == 0 || strcmp(argv[i + 1], "forward") == 0))
            run_forward = !(run_train = strcmp(argv[++i], "train") == 0);
        else {
            fprintf(stderr,
                    "usage: %s [--device cpu|cuda[:N]] [--reps N] [--text FILE] "
                    "[--weights FILE] [--only train|forward]\n",
                    argv[0]);
            return 2;
        }
    }
    if (reps < 1 || reps > 10000) {
        fprintf(stderr, "%s: --reps must be 1..10000\n", argv[0]);
        return 2;
    }
    static const char *const figures[] = {"gpt_train_step", "gpt_train_tokens_per_s", "gpt_forward",
                                          "gpt_forward_tokens_per_s", "gpt_final_loss"};
    bench_options o = {device_name, {0}, reps};
    bench_resolve_device(&o, figures, 5);
    cn_device dev = cn_autodiff(o.device);

    corpus c = read_text(text);
    const cn_gpt_config cfg = {c.vocab, BLOCK, 4, 4, 128, 1};
    cn_generator gen = cn_generator_new(0);
    cn_module *gpt = cn_gpt_new(&cfg, dev, CN_F32, &gen);
    if (!gpt) {
        fprintf(stderr, "bench_gpt: %s\n", cn_last_error());
        return 1;
    }
    if (weights) {
        cn_safetensors *h = NULL;
        if (cn_safetensors_load(weights, o.device, &h) != CN_OK || cn_gpt_load(gpt, h) != CN_OK) {
            fprintf(stderr, "bench_gpt: cannot load --weights %s: %s\n", weights, cn_last_error());
            return 1;
        }
        cn_safetensors_free(h);
    }
    cn_optimizer *opt = cn_gpt_adamw_new(gpt, 1e-3, 0.9, 0.95, 1e-8, 0.1);
    if (!opt) {
        fprintf(stderr, "bench_gpt: %s\n", cn_last_error());
        return 1;
    }

    double *times = malloc(sizeof *times * (size_t)reps);
    float loss = 0;
    for (int s = 0; s < WARMUP + reps; s++) {
        cn_tensor *x, *y;
        if (!run_train) { /* the batches a full run would have drawn */
            next_batch(&c, dev, &x, &y);
            cn_release(x);
            cn_release(y);
            continue;
        }
        double t0 = bench_now();
        cn_scope_begin();
        next_batch(&c, dev, &x, &y);
        cn_tensor *l = bench_check(lm_loss(cn_module_forward(gpt, x), y, c.vocab), "forward");
        cn_grads *g = cn_backward(l);
        if (!g || cn_read(l, &loss, sizeof loss) != CN_OK || cn_optimizer_step(opt, g) != CN_OK) {
            fprintf(stderr, "bench_gpt: step %d failed: %s\n", s, cn_last_error());
            return 1;
        }
        cn_grads_free(g);
        cn_scope_end();
        bench_sync(o.device);
        if (s >= WARMUP) times[s - WARMUP] = bench_now() - t0;
    }
    double step = run_train ? bench_median(times, reps) : 0;

    cn_module_train(gpt, 0);
    cn_no_grad_begin();
    for (int s = 0; s < (run_forward ? WARMUP + reps : 0); s++) {
        double t0 = bench_now();
        cn_scope_begin();
        cn_tensor *x, *y;
        next_batch(&c, dev, &x, &y);
        bench_check(cn_module_forward(gpt, x), "forward");
        cn_scope_end();
        bench_sync(o.device);
        if (s >= WARMUP) times[s - WARMUP] = bench_now() - t0;
    }
    cn_no_grad_end();
    double forward = run_forward ? bench_median(times, reps) : 0;

    if (run_train) {
        bench_print("gpt_train_step", step * 1e3, "ms");
        bench_print("gpt_train_tokens_per_s", BATCH * BLOCK / step, "tokens/s");
    }
    if (run_forward) {
        bench_print("gpt_forward", forward * 1e3, "ms");
        bench_print("gpt_forward_tokens_per_s", BATCH * BLOCK / forward, "tokens/s");
    }
    if (run_train) bench_print("gpt_final_loss", loss, "nats");
    free(times);
    free(c.tokens);
    cn_optimizer_free(opt);
    cn_module_free(gpt);
    return 0;
}
