/* `cinder train --model gpt` and `cinder generate`, run as a user runs them, on a small text this
 * test writes (no data set needed) and a tiny model, so each run takes a second or two:
 *   - the run prints its epoch lines with a validation loss; the first step's loss is that of
 *     a near-uniform prediction (nanoGPT's init: log(vocabulary) within a few hundredths);
 *     --log, --plot and --save write what they say; the saved keys are nanoGPT's and the file
 *     loads with cn_gpt_load, its metadata carrying the vocabulary and sizes;
 *   - a run stopped (--stop-after-steps) and resumed with the command it printed ends with the
 *     same bytes as a run that never stopped;
 *   - generate (also from an interrupted run's state) starts with the prompt, uses the vocabulary,
 * repeats itself for a seed, and is greedy at temperature 0 whatever the seed;
 *   - misuse: clear messages and exit statuses. */
#define _POSIX_C_SOURCE 200809L

#include "cli_run.h"
#include "harness.h"

static char dir[] = "/tmp/cinder_test_cli_gpt_XXXXXX";

static const char *path_in(const char *name) {
    static char paths[8][4300];
    static int next;
    char *p = paths[next++ % 8];
    snprintf(p, sizeof paths[0], "%s/%s", dir, name);
    return p;
}

#define TINY "--model gpt --block 16 --layers 1 --heads 2 --embd 16 --batch 4 --threads 1"

/* A text of exactly 1200 bytes: words drawn from a few, so there is something to learn. Its
 * vocabulary: ' ', '.', and the letters a c d e g h m n o r s t (14 bytes). */
static void write_text(const char *path) {
    static const char *words[] = {"the ", "cat ", "sat ", "on ", "a ", "mat. ", "dog ", "ran "};
    char buf[1300];
    size_t n = 0;
    uint64_t s = 11;
    while (n < 1200)
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s", words[th_lcg(&s) % 8]);
    FILE *f = fopen(path, "w");
    CHECK(f && fwrite(buf, 1, 1200, f) == 1200);
    if (f) fclose(f);
}

static char *slurp(const char *path) {
    size_t n = 0;
    unsigned char *b = th_read_file(path, &n);
    return (char *)b;
}

static int same_file(const char *a, const char *b) {
    size_t na = 0, nb = 0;
    unsigned char *x = th_read_file(a, &na), *y = th_read_file(b, &nb);
    int same = x && y && na == nb && memcmp(x, y, na) == 0;
    free(x);
    free(y);
    return same;
}

static int count_of(const char *text, const char *needle) {
    int n = 0;
    for (const char *p = text; p && (p = strstr(p, needle)); p += strlen(needle))
        n++;
    return n;
}

static void test_train_prints_logs_plots_and_saves_nanogpts_keys(void) {
    const char *text = path_in("text.txt"), *save = path_in("gpt.safetensors");
    const char *logf = path_in("run.jsonl"), *plot = path_in("curves.svg");
    write_text(text);
    char args[8192];
    snprintf(args, sizeof args,
             "train " TINY " --data '%s' --epochs 2 --save '%s' --log '%s' "
             "--plot '%s'",
             text, save, logf, plot);
    run_result r = run_cli(args, 0);
    CHECK(r.status == 0 && r.out);
    if (r.status != 0) fprintf(stderr, "%s\n", r.out ? r.out : "");
    /* 1200 bytes: 1080 train (16 batches of 4 x 16), 120 validate; 14 distinct bytes */
    CHECK(r.out && strstr(r.out, "1200 characters, vocabulary 14, 1080 training and 120 "
                                 "validation tokens (16 batches of 4 x 16 an epoch)"));
    double v1 = number_after(r.out, "epoch 1/2: train loss "),
           v2 = number_after(r.out, "epoch 2/2: train loss ");
    double val = number_after(r.out, ", val loss ");
    CHECK(v1 > 0 && v2 > 0 && v2 < v1 && val > 0 && val < log(14.0));
    CHECK(r.out && strstr(r.out, "saved the gpt to "));
    free(r.out);

    char *l = slurp(logf);
    CHECK(l && strstr(l, "\"model\":\"gpt\"") && strstr(l, "\"train_tokens\":1080") &&
          strstr(l, "\"val_tokens\":120"));
    CHECK(count_of(l, "\"event\":\"step\"") == 32 && count_of(l, "\"event\":\"epoch\"") == 2);
    CHECK(count_of(l, "\"val_loss\":") == 2);
    /* the first step: logits near 0 from N(0, 0.02) weights, so the loss is about log(14) */
    double first = number_after(l, "\"global_step\":1,\"loss\":");
    CHECK(fabs(first - log(14.0)) < 0.05);
    free(l);
    char *svg = slurp(plot);
    CHECK(svg && strstr(svg, "<svg") && strstr(svg, "validation loss after each epoch"));
    free(svg);

    cn_safetensors *h = NULL;
    CHECK(cn_safetensors_load(save, cn_cpu(), &h) == CN_OK);
    const char *vocab = h ? cn_safetensors_metadata(h, "vocab") : NULL;
    /* the bytes in increasing order, as hex: " .acdeghmnorst" */
    CHECK(vocab && strcmp(vocab, "202e6163646567686d6e6f727374") == 0);
    CHECK(h && cn_safetensors_metadata(h, "model") && cn_safetensors_metadata(h, "embd") &&
          strcmp(cn_safetensors_metadata(h, "embd"), "16") == 0);
    cn_tensor *wte = h ? cn_safetensors_get(h, "transformer.wte.weight") : NULL;
    const int64_t shape[2] = {14, 16};
    th_check_shape("wte", wte, shape, 2);
    cn_release(wte);
    CHECK(cn_safetensors_count(h) == 2 + 12 + 2);
    const cn_gpt_config cfg = {14, 16, 1, 2, 16, 1};
    cn_generator gen = cn_generator_new(0);
    cn_module *gpt = cn_gpt_new(&cfg, cn_cpu(), CN_F32, &gen);
    CHECK(cn_gpt_load(gpt, h) == CN_OK);
    cn_module_free(gpt);
    cn_safetensors_free(h);
}

/* The resume command an interrupted run printed, for the built binary. */
static int resume_command(const char *out, char *cmd, size_t size) {
    const char *at = out ? strstr(out, "resume with: cinder train ") : NULL;
    if (!at) return 0;
    at += strlen("resume with: cinder ");
    const char *nl = strchr(at, '\n');
    snprintf(cmd, size, "'%s' %.*s 2>&1", cli_path, (int)(nl ? nl - at : (long)strlen(at)), at);
    return 1;
}

static void test_stopped_and_resumed_run_ends_with_the_same_bits(void) {
    const char *text = path_in("text.txt"), *whole = path_in("whole.safetensors");
    const char *cut = path_in("cut.safetensors");
    char args[8192];
    snprintf(args, sizeof args, "train " TINY " --data '%s' --epochs 2 --seed 5 --save '%s'", text,
             whole);
    run_result full = run_cli(args, 1);
    CHECK(full.status == 0);
    /* stopped mid-epoch 1 (step 10 of 16), resumed to the end */
    snprintf(args, sizeof args,
             "train " TINY " --data '%s' --epochs 2 --seed 5 --save '%s' "
             "--stop-after-steps 10",
             text, cut);
    run_result leg = run_cli(args, 1);
    CHECK(leg.status == 130 && leg.out && strstr(leg.out, "interrupted by SIGINT at epoch 1/2"));
    /* the training state of the interrupted run samples too (its metadata has what it needs) */
    snprintf(args, sizeof args, "generate --load '%s' --prompt 'a' --tokens 5", cut);
    run_result sample = run_cli(args, 1);
    CHECK(sample.status == 0 && sample.out && strncmp(sample.out, "a", 1) == 0);
    free(sample.out);
    char cmd[16384];
    int found = resume_command(leg.out, cmd, sizeof cmd);
    CHECK(found);
    if (found) {
        run_result rest = run_shell(cmd);
        CHECK(rest.status == 0 && rest.out && strstr(rest.out, "resuming from ") &&
              strstr(rest.out, "after step 10"));
        /* the epoch line of the resumed epoch is the uninterrupted run's */
        const char *a = full.out ? strstr(full.out, "epoch 2/2: train loss ") : NULL;
        const char *b = rest.out ? strstr(rest.out, "epoch 2/2: train loss ") : NULL;
        CHECK(a && b &&
              strncmp(a, b, strlen("epoch 2/2: train loss 1.2345, val loss 1.2345")) == 0);
        CHECK(same_file(whole, cut));
        free(rest.out);
    }
    free(full.out);
    free(leg.out);
    /* a resume with another size is refused, naming it */
    snprintf(args, sizeof args,
             "train --model gpt --data '%s' --embd 32 --resume '%s' "
             "--epochs 2",
             text, whole);
    run_result no = run_cli(args, 1);
    CHECK(no.status == 1 && no.out && strstr(no.out, "a model only"));
    free(no.out);
}

static void test_generate_is_seeded_and_greedy_at_temperature_0(void) {
    const char *save = path_in("gpt.safetensors");
    char args[8192];
    const char *runs[5][2] = {{"--seed 3", NULL},
                              {"--seed 3", NULL},
                              {"--seed 4", NULL},
                              {"--temperature 0 --seed 1", NULL},
                              {"--temperature 0 --seed 2", NULL}};
    char *out[5];
    for (int i = 0; i < 5; i++) {
        snprintf(args, sizeof args, "generate --load '%s' --prompt 'the ' --tokens 40 %s --top-k 5",
                 save, runs[i][0]);
        run_result r = run_cli(args, 0);
        CHECK(r.status == 0 && r.out && strncmp(r.out, "the ", 4) == 0 &&
              strlen(r.out) == 4 + 40 + 1);
        for (const char *c = r.out ? r.out : ""; *c && *c != '\n'; c++)
            CHECK(strchr(" .acdeghmnorst", *c) != NULL);
        out[i] = r.out;
    }
    CHECK(out[0] && out[1] && strcmp(out[0], out[1]) == 0);
    CHECK(out[0] && out[2] && strcmp(out[0], out[2]) != 0);
    CHECK(out[3] && out[4] && strcmp(out[3], out[4]) == 0);
    for (int i = 0; i < 5; i++)
        free(out[i]);
}

static void test_misuse_gives_clear_messages(void) {
    const char *text = path_in("text.txt"), *save = path_in("gpt.safetensors");
    struct {
        const char *args;
        int status;
        const char *message;
    } cases[] = {
        {"train --model gpt --embd 30 --heads 4", 2, "--embd 30 is not a multiple of --heads 4"},
        {"train --model gpt --test-limit 5", 2, "--test-limit is for mlp and cnn"},
        {"train --model gpt --ddp", 2, "--ddp is for mlp and cnn"},
        {"train --model gpt --data /nonexistent/text.txt", 1, "cannot read the text"},
        {"train " TINY " --data TEXT --limit 20", 2, "too few for --block 16"},
        {"train --model gpt --block 0", 2, "--block takes a whole number from 1"},
        {"generate --prompt x", 2, "--load FILE is required"},
        {"generate --load SAVE --prompt 'THE'", 1, "not in the model's vocabulary"},
        {"generate --load LOG", 1, "cannot load"},
        {"generate --load SAVE --top-p 0", 2, "--top-p"},
        {"eval --load SAVE", 1, "holds a gpt"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char args[8192], *at;
        snprintf(args, sizeof args, "%s", cases[i].args);
        if ((at = strstr(args, "TEXT")))
            snprintf(at, sizeof args - (size_t)(at - args), "'%s' --limit 20", text);
        if ((at = strstr(args, "SAVE"))) {
            char rest[256];
            snprintf(rest, sizeof rest, "%s", at + 4);
            snprintf(at, sizeof args - (size_t)(at - args), "'%s'%s", save, rest);
        }
        if ((at = strstr(args, "LOG")))
            snprintf(at, sizeof args - (size_t)(at - args), "'%s'", path_in("run.jsonl"));
        run_result r = run_cli(args, 1);
        if (r.status != cases[i].status || !r.out || !strstr(r.out, cases[i].message)) {
            fprintf(stderr, "`cinder %s`: status %d, output:\n%s\n", args, r.status,
                    r.out ? r.out : "");
            th_checks_failed++;
        }
        free(r.out);
    }
    /* a checkpoint of another model */
    const int64_t shape[1] = {3};
    cn_tensor *t = cn_zeros(shape, 1, CN_F32, cn_cpu());
    const char *names[1] = {"0.weight"};
    CHECK(cn_safetensors_save(path_in("other.safetensors"), names, &t, 1) == CN_OK);
    cn_release(t);
    char args[8192];
    snprintf(args, sizeof args, "generate --load '%s'", path_in("other.safetensors"));
    run_result r = run_cli(args, 1);
    CHECK(r.status == 1 && r.out &&
          strstr(r.out, "is not a checkpoint of `cinder train --model gpt`"));
    free(r.out);
}

int main(void) {
    if (!find_cli()) {
        fprintf(stderr, "the cinder program is not built next to the tests; skipped\n");
        return 77;
    }
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    RUN(test_train_prints_logs_plots_and_saves_nanogpts_keys);
    RUN(test_stopped_and_resumed_run_ends_with_the_same_bits);
    RUN(test_generate_is_seeded_and_greedy_at_temperature_0);
    RUN(test_misuse_gives_clear_messages);
    const char *files[] = {"text.txt",          "gpt.safetensors", "run.jsonl",        "curves.svg",
                           "whole.safetensors", "cut.safetensors", "other.safetensors"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        remove(path_in(files[i]));
    rmdir(dir);
    return th_finish();
}
