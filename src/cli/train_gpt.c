/* `cinder train --model gpt`: trains nn.h's GPT (cn_gpt_new, nanoGPT's model) as a
 * character-level language model on a text file (text.h), with the progress, --log, --plot,
 * --save and --resume of the other models (train.c), and a validation loss after each epoch:
 *
 *     epoch 1/10: train loss 2.4312, val loss 2.3012, epoch time 14.21 s
 *
 * The data: the text's first 90% trains, the last 10% validates. An epoch is
 * floor(train tokens / (batch * block)) steps (at least 1), so it sees about as many tokens as
 * the training split has. Step s (counted over the run) takes `batch` windows of block + 1 tokens
 * at offsets drawn from the Philox stream (seed ^ DATA_STREAM, offset s * batch), one uniform
 * draw per window, so the batches depend only on (seed, s) and a resumed run sees the batches of
 * a run that never stopped. The validation loss is the mean over every whole window
 * val[k * block .. (k + 1) * block] of the split, in evaluation mode without gradients.
 *
 * The optimizer is nanoGPT's: AdamW with betas (0.9, 0.95), eps 1e-8, weight decay 0.1 on the
 * matrices only (cn_gpt_adamw_new), or SGD with momentum 0.9. Checkpoints (--save, and the
 * training state an interrupt writes) carry the vocabulary and the model's sizes as metadata
 * ("model": "gpt", "vocab", "block", "layers", "heads", "embd"), which `cinder generate` reads;
 * their tensors are named as nanoGPT's state_dict (nn.h). */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinder/cinder.h"
#include "cli/cli.h"
#include "cli/plot.h"
#include "cli/progress.h"
#include "cli/resume.h"
#include "cli/runlog.h"
#include "cli/summary.h"
#include "cli/text.h"

#define CMD            "train"
#define MAX_EPOCHS     10000
#define VAL_FRACTION   10 /* the last 1/10 of the text validates */
#define DATA_STREAM    0x9E3779B97F4A7C15ull
#define INTERRUPT_PATH "cinder-interrupted.safetensors"
#define SGD_MOMENTUM   0.9
#define ADAM_BETA1     0.9
#define ADAM_BETA2     0.95
#define ADAM_EPS       1e-8
#define WEIGHT_DECAY   0.1

/* ---- options and the settings a checkpoint keeps --------------------------------------------- */

enum {
    SET_MODEL,
    SET_OPTIMIZER,
    SET_LR,
    SET_BATCH,
    SET_EPOCHS,
    SET_SEED,
    SET_SCHEDULE,
    SET_LIMIT,
    SET_BLOCK,
    SET_LAYERS,
    SET_HEADS,
    SET_EMBD,
    N_SETTINGS
};

static const char *const setting_keys[N_SETTINGS] = {"model",  "optimizer", "lr",       "batch",
                                                     "epochs", "seed",      "schedule", "limit",
                                                     "block",  "layers",    "heads",    "embd"};

typedef struct gpt_options {
    int64_t v[N_SETTINGS]; /* the integer settings, by index (model, optimizer, schedule: 0/1) */
    double lr;             /* < 0: the optimizer's default */
    const char *device, *data, *save, *plot, *log, *resume;
    int balanced;
    int64_t stop_after;
    int argc;
    char **argv;
    unsigned given; /* bit k: setting k was on the command line */
} gpt_options;

#define O_ADAMW(o)  ((o)->v[SET_OPTIMIZER] == 1)
#define O_COSINE(o) ((o)->v[SET_SCHEDULE] == 1)

/* the integer settings' ranges (model, optimizer, lr and schedule are checked by name) */
static const int64_t setting_min[N_SETTINGS] = {0, 0, 0, 1, 1, 0, 0, 0, 1, 1, 1, 1};
static const int64_t setting_max[N_SETTINGS] = {0, 1,         0,    100000, MAX_EPOCHS, INT64_MAX,
                                                1, INT64_MAX, 4096, 256,    256,        16384};

static const char *setting_text(const gpt_options *o, int k, char *buf, size_t size) {
    switch (k) {
    case SET_MODEL:
        snprintf(buf, size, "gpt");
        break;
    case SET_OPTIMIZER:
        snprintf(buf, size, "%s", O_ADAMW(o) ? "adamw" : "sgd");
        break;
    case SET_LR:
        snprintf(buf, size, "%.17g", o->lr);
        break;
    case SET_SCHEDULE:
        snprintf(buf, size, "%s", O_COSINE(o) ? "cosine" : "constant");
        break;
    default:
        snprintf(buf, size, "%lld", (long long)o->v[k]);
    }
    return buf;
}

/* Sets setting k from its text; 0, or -1 when it is not one of its values. */
static int set_setting(gpt_options *o, int k, const char *text) {
    char *end = NULL;
    errno = 0;
    switch (k) {
    case SET_MODEL:
        return strcmp(text, "gpt") == 0 ? 0 : -1;
    case SET_OPTIMIZER:
        if (strcmp(text, "sgd") != 0 && strcmp(text, "adamw") != 0) return -1;
        o->v[k] = strcmp(text, "adamw") == 0;
        return 0;
    case SET_LR:
        o->lr = strtod(text, &end);
        return *text && !*end && o->lr > 0 && isfinite(o->lr) ? 0 : -1;
    case SET_SCHEDULE:
        if (strcmp(text, "cosine") != 0 && strcmp(text, "constant") != 0) return -1;
        o->v[k] = strcmp(text, "cosine") == 0;
        return 0;
    default: {
        long long n = strtoll(text, &end, 10);
        if (!*text || *end || errno || n < setting_min[k] || n > setting_max[k]) return -1;
        o->v[k] = n;
        return 0;
    }
    }
}

static void defaults(gpt_options *o, int argc, char **argv) {
    *o = (gpt_options){.lr = -1, .argc = argc, .argv = argv};
    o->v[SET_OPTIMIZER] = 1;
    o->v[SET_BATCH] = 32;
    o->v[SET_EPOCHS] = 10;
    o->v[SET_SEED] = 42;
    o->v[SET_SCHEDULE] = 1;
    o->v[SET_BLOCK] = 64;
    o->v[SET_LAYERS] = 4;
    o->v[SET_HEADS] = 4;
    o->v[SET_EMBD] = 128;
}

/* The option that sets setting k ("--epochs" for SET_EPOCHS). */
static const char *const setting_option[N_SETTINGS] = {
    "--model",    "--optimizer", "--lr",    "--batch",  "--epochs", "--seed",
    "--schedule", "--limit",     "--block", "--layers", "--heads",  "--embd"};

static int parse_options(int argc, char **argv, gpt_options *o) {
    defaults(o, argc, argv);
    const cli_run_fields run = {&o->device, &o->data,   &o->save,     &o->plot,
                                &o->log,    &o->resume, &o->balanced, &o->stop_after};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r = 0, bad = 0, k;
        for (k = 0; k < N_SETTINGS; k++)
            if ((r = cli_option(argc, argv, &i, CMD, setting_option[k], &v)) != 0) break;
        if (k < N_SETTINGS) {
            if (r > 0 && set_setting(o, k, v) != 0) {
                if (k == SET_MODEL || k == SET_OPTIMIZER || k == SET_SCHEDULE || k == SET_LR)
                    fprintf(stderr,
                            "cinder train: %s %s is not a value of %s for the gpt (see "
                            "`cinder train --help`)\n",
                            setting_option[k], v, setting_option[k]);
                else
                    fprintf(stderr,
                            "cinder train: %s takes a whole number from %lld to %lld, "
                            "not '%s'\n",
                            setting_option[k], (long long)setting_min[k], (long long)setting_max[k],
                            v);
                bad = 1;
            }
            if (r > 0) o->given |= 1u << k;
        } else if ((r = cli_run_option(argc, argv, &i, CMD, &run, &bad)) != 0) {
            /* --device, --threads, --checkpointing, --data, --save, --plot, --log, --resume,
             * --stop-after-steps */
        } else if ((r = cli_option(argc, argv, &i, CMD, "--test-limit", &v)) != 0) {
            fprintf(stderr, "cinder train: --test-limit is for mlp and cnn; the gpt validates on "
                            "the last 10%% of its text (shorten the text with --limit)\n");
            bad = 1;
        } else if (strcmp(argv[i], "--ddp") == 0) {
            fprintf(stderr, "cinder train: --ddp is for mlp and cnn; the gpt trains in one "
                            "process (run it without mpirun and --ddp)\n");
            bad = 1;
        } else {
            fprintf(stderr, "cinder train: unknown argument '%s' (see `cinder train --help`)\n",
                    argv[i]);
            bad = 1;
        }
        if (r < 0 || bad) return CLI_EXIT_USAGE;
    }
    if (o->v[SET_EMBD] % o->v[SET_HEADS] != 0) {
        fprintf(stderr,
                "cinder train: --embd %lld is not a multiple of --heads %lld; each head "
                "takes embd / heads channels\n",
                (long long)o->v[SET_EMBD], (long long)o->v[SET_HEADS]);
        return CLI_EXIT_USAGE;
    }
    if (o->lr < 0) o->lr = O_ADAMW(o) ? 1e-3 : 0.1;
    return CLI_EXIT_OK;
}

/* ---- the run's state ------------------------------------------------------------------------- */

typedef struct gpt_run {
    const gpt_options *o;
    cli_text text;
    int64_t train_len, val_len; /* tokens[0, train_len) trains, the rest validates */
    int64_t per_epoch;
    cn_device device;
    cn_module *gpt;
    cn_optimizer *opt;
    float *batch_loss; /* every step */
    int64_t steps;
    double *epoch_loss, *val_loss;
    int epochs;
    cn_safetensors *resumed;
} gpt_run;

/* Batch of global step s: x, y i64 [B, T] on the training device. */
static cn_status batch_at(const gpt_run *r, int64_t s, cn_tensor **x, cn_tensor **y) {
    const int64_t b = r->o->v[SET_BATCH], t = r->o->v[SET_BLOCK];
    const int64_t windows = r->train_len - t; /* offsets 0 .. train_len - T - 1 */
    cn_generator g = {.seed = (uint64_t)r->o->v[SET_SEED] ^ DATA_STREAM,
                      .offset = (uint64_t)(s * b)};
    cn_tensor *u = cn_rand_uniform(&g, &b, 1, 0.0, 1.0, CN_F64, cn_cpu());
    double *draws = malloc(sizeof *draws * (size_t)b);
    int64_t *xs = malloc(sizeof *xs * (size_t)(b * t)), *ys = malloc(sizeof *ys * (size_t)(b * t));
    cn_status st = u && draws && xs && ys
                       ? cn_read(u, draws, sizeof *draws * (size_t)b)
                       : cn_set_error(CN_ERR_OUT_OF_MEMORY, "train", "no memory for a batch");
    for (int64_t i = 0; i < b && st == CN_OK; i++) {
        int64_t o = (int64_t)(draws[i] * (double)windows);
        if (o >= windows) o = windows - 1;
        memcpy(xs + i * t, r->text.tokens + o, sizeof *xs * (size_t)t);
        memcpy(ys + i * t, r->text.tokens + o + 1, sizeof *ys * (size_t)t);
    }
    const int64_t shape[2] = {b, t};
    if (st == CN_OK && (!(*x = cn_from_data(xs, shape, 2, CN_I64, r->device)) ||
                        !(*y = cn_from_data(ys, shape, 2, CN_I64, r->device))))
        st = cn_last_status();
    cn_release(u);
    free(draws);
    free(xs);
    free(ys);
    return st;
}

/* The mean cross-entropy of logits [B, T, V] against y [B, T]: 0-d. */
static cn_tensor *lm_loss(cn_tensor *logits, cn_tensor *y, int64_t vocab) {
    const int64_t flat2[2] = {-1, vocab}, flat1[1] = {-1};
    return cn_cross_entropy(cn_reshape(logits, flat2, 2), cn_reshape(y, flat1, 1), 0.0);
}

/* One all-or-nothing step on batch s, in a scope of its own (as cli_model_train_step): 1 taken,
 * 2 the loss is not finite (not taken), -1 failed (error set, nothing changed). */
static int train_step(gpt_run *r, int64_t s, float *loss) {
    if (cn_scope_begin() != CN_OK) return -1;
    cn_tensor *x = NULL, *y = NULL;
    cn_status st = batch_at(r, s, &x, &y);
    cn_tensor *l =
        st == CN_OK ? lm_loss(cn_module_forward(r->gpt, x), y, r->text.vocab.size) : NULL;
    cn_grads *g = l ? cn_backward(l) : NULL;
    int rc = g && cn_read(l, loss, sizeof *loss) == CN_OK ? 1 : -1;
    if (rc == 1 && !isfinite(*loss)) rc = 2;
    if (rc == 1 && cn_optimizer_step(r->opt, g) != CN_OK) rc = -1;
    cn_grads_free(g);
    if (cn_scope_end() != CN_OK) rc = -1;
    return rc;
}

/* The validation loss (text.h's windows, batches of `batch`), or NAN with the error set. */
static double validation_loss(gpt_run *r) {
    const int64_t b = r->o->v[SET_BATCH], t = r->o->v[SET_BLOCK];
    const int64_t windows = (r->val_len - 1) / t;
    const int64_t *val = r->text.tokens + r->train_len;
    int64_t *xs = malloc(sizeof *xs * (size_t)(b * t)), *ys = malloc(sizeof *ys * (size_t)(b * t));
    double sum = 0;
    int ok = xs && ys;
    if (!ok) cn_set_error(CN_ERR_OUT_OF_MEMORY, "train", "no memory for a validation batch");
    cn_module_train(r->gpt, 0);
    cn_no_grad_begin();
    for (int64_t w = 0; w < windows && ok; w += b) {
        int64_t n = windows - w < b ? windows - w : b;
        for (int64_t i = 0; i < n; i++) {
            memcpy(xs + i * t, val + (w + i) * t, sizeof *xs * (size_t)t);
            memcpy(ys + i * t, val + (w + i) * t + 1, sizeof *ys * (size_t)t);
        }
        const int64_t shape[2] = {n, t};
        if (cn_scope_begin() != CN_OK) {
            ok = 0;
            break;
        }
        cn_tensor *l =
            lm_loss(cn_module_forward(r->gpt, cn_from_data(xs, shape, 2, CN_I64, r->device)),
                    cn_from_data(ys, shape, 2, CN_I64, r->device), r->text.vocab.size);
        double v = 0;
        cn_tensor *l64 = cn_cast(l, CN_F64);
        ok = l64 && cn_read(l64, &v, sizeof v) == CN_OK;
        sum += v * (double)n;
        cn_scope_end();
    }
    cn_no_grad_end();
    cn_module_train(r->gpt, 1);
    free(xs);
    free(ys);
    return ok ? sum / (double)windows : NAN;
}

/* ---- checkpoints ----------------------------------------------------------------------------- */

enum { N_POSITION = 4, N_META = N_SETTINGS + 1 + N_POSITION };

/* The metadata of a checkpoint: the settings, the vocabulary, and (for a training state) the
 * run's position. Returns the number of entries. */
static int metadata(const gpt_run *r, int with_position, const char **keys, const char **values,
                    char (*text)[64], char *vocab_hex, size_t hex_size) {
    int n = 0;
    for (int k = 0; k < N_SETTINGS; k++, n++) {
        keys[n] = setting_keys[k];
        values[n] = setting_text(r->o, k, text[n], sizeof text[n]);
    }
    cli_vocab_to_hex(&r->text.vocab, vocab_hex, hex_size);
    keys[n] = "vocab";
    values[n++] = vocab_hex;
    if (!with_position) return n;
    const int64_t epoch = r->epochs, step = r->steps - (int64_t)r->epochs * r->per_epoch;
    const char *names[N_POSITION] = {"train_tokens", "epoch", "step", "global_step"};
    const int64_t numbers[N_POSITION] = {r->train_len, epoch, step, r->steps};
    for (int k = 0; k < N_POSITION; k++, n++) {
        keys[n] = names[k];
        snprintf(text[n], sizeof text[n], "%lld", (long long)numbers[k]);
        values[n] = text[n];
    }
    return n;
}

static cn_status save_model(const gpt_run *r, const char *path) {
    const char *keys[N_META], *values[N_META];
    char text[N_META][64], hex[513];
    int n_meta = metadata(r, 0, keys, values, text, hex, sizeof hex);
    int n = 0;
    const cn_param *params = cn_module_params(r->gpt, &n);
    if (!params) return cn_last_status();
    const char **names = malloc(sizeof *names * (size_t)n);
    cn_tensor **tensors = malloc(sizeof *tensors * (size_t)n);
    cn_status st = names && tensors
                       ? CN_OK
                       : cn_set_error(CN_ERR_OUT_OF_MEMORY, "train", "no memory for %d names", n);
    for (int i = 0; i < n && st == CN_OK; i++) {
        names[i] = params[i].name;
        tensors[i] = params[i].tensor;
    }
    if (st == CN_OK)
        st = cn_safetensors_save_metadata(path, names, tensors, n, keys, values, n_meta);
    free(names);
    free(tensors);
    return st;
}

static int stop_interrupted(gpt_run *r) {
    const gpt_options *o = r->o;
    int sig = cli_interrupt_signal();
    const char *path = o->save ? o->save : INTERRUPT_PATH;
    const char *keys[N_META], *values[N_META];
    char text[N_META][64], hex[513];
    int n_meta = metadata(r, 1, keys, values, text, hex, sizeof hex);
    cli_history_view view = {r->batch_loss, r->steps,  r->epoch_loss,
                             r->val_loss,   r->epochs, "val_loss"};
    cli_interrupt_guard(path);
    cn_status st = cli_state_save(path, r->gpt, r->opt, &view, keys, values, n_meta);
    cli_interrupt_guard(NULL);
    fflush(stdout);
    if (st != CN_OK) {
        fprintf(stderr,
                "cinder train: interrupted by %s after step %lld, but the checkpoint "
                "cannot be written to %s: %s; nothing was saved\n",
                cli_signal_name(sig), (long long)r->steps, path, cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    fprintf(stderr,
            "cinder train: interrupted by %s at epoch %lld/%lld after step %lld of %lld; "
            "saved the run to %s\ncinder train: resume with: ",
            cli_signal_name(sig), (long long)r->epochs + 1, (long long)o->v[SET_EPOCHS],
            (long long)r->steps, (long long)(o->v[SET_EPOCHS] * r->per_epoch), path);
    cli_print_resume_command(stderr, "train", o->argc, o->argv, path);
    return 128 + sig;
}

/* Takes the settings of the run saved in o->resume (loaded into *h); CLI_EXIT_OK, or the exit
 * status after printing why. */
static const char *text_of(void *o, int k, char *buf, size_t size) {
    return setting_text(o, k, buf, size);
}
static int set_from(void *o, int k, const char *text) { return set_setting(o, k, text); }

static int load_resumed(gpt_options *o, cn_device inner, cn_safetensors **h) {
    int rc = cli_resume_open(o->resume, inner, h);
    if (rc != CLI_EXIT_OK) return rc;
    const cli_settings s = {setting_keys, N_SETTINGS, o->given, SET_LR, text_of, set_from, o};
    return cli_resume_settings(*h, o->resume, &s);
}

static int restore_run(gpt_run *r) {
    const char *path = r->o->resume;
    const cn_safetensors *h = r->resumed;
    int64_t train_tokens = 0, epoch = 0, step = 0, global = 0;
    if (cli_state_int(h, path, "train_tokens", 0, INT64_MAX, &train_tokens) != 0 ||
        cli_state_int(h, path, "epoch", 0, r->o->v[SET_EPOCHS], &epoch) != 0 ||
        cli_state_int(h, path, "step", 0, r->per_epoch, &step) != 0 ||
        cli_state_int(h, path, "global_step", 0, INT64_MAX, &global) != 0)
        return -1;
    char hex[513];
    cli_vocab_to_hex(&r->text.vocab, hex, sizeof hex);
    const char *vocab = cli_state_text(h, path, "vocab");
    if (!vocab) return -1;
    if (train_tokens != r->train_len || strcmp(vocab, hex) != 0) {
        fprintf(stderr,
                "cinder train: cannot resume from %s: the run trained on another text "
                "(%lld training tokens over its own vocabulary; this text has %lld); give the "
                "--data and --limit of the run\n",
                path, (long long)train_tokens, (long long)r->train_len);
        return -1;
    }
    if (global != epoch * r->per_epoch + step) {
        fprintf(stderr,
                "cinder train: cannot resume from %s: its position (epoch %lld, step "
                "%lld, global step %lld) does not add up; the file is damaged: start the run "
                "anew\n",
                path, (long long)epoch, (long long)step, (long long)global);
        return -1;
    }
    if (cn_train_state_restore(h, r->gpt, r->opt) != CN_OK) {
        fprintf(stderr, "cinder train: cannot resume from %s: %s\n", path, cn_last_error());
        return -1;
    }
    if (cli_state_history(h, path, r->batch_loss, global, r->epoch_loss, r->val_loss, epoch,
                          "val_loss") != 0)
        return -1;
    r->steps = global;
    r->epochs = (int)epoch;
    printf("resuming from %s at epoch %lld/%lld after step %lld\n", path, (long long)epoch + 1,
           (long long)r->o->v[SET_EPOCHS], (long long)global);
    fflush(stdout);
    return 0;
}

/* ---- the run --------------------------------------------------------------------------------- */

/* The model's summary: the sizes, one line per part, and the totals. */
static int describe(gpt_run *r, cn_device inner, cli_log *log) {
    const gpt_options *o = r->o;
    char dev[64];
    int threads = cn_cpu_threads();
    printf("cinder train: gpt on %s%s, %d CPU thread%s, text %s: %lld characters, vocabulary "
           "%d, %lld training and %lld validation tokens (%lld batches of %lld x %lld an "
           "epoch), ",
           cn_device_str(inner, dev, sizeof dev), o->balanced ? " (balanced checkpointing)" : "",
           threads, threads == 1 ? "" : "s", o->data ? o->data : CLI_TEXT_DEFAULT,
           (long long)r->text.length, r->text.vocab.size, (long long)r->train_len,
           (long long)r->val_len, (long long)r->per_epoch, (long long)o->v[SET_BATCH],
           (long long)o->v[SET_BLOCK]);
    if (O_ADAMW(o))
        printf("adamw lr %g betas (%g, %g) weight decay %g on matrices, seed %lld\n", o->lr,
               ADAM_BETA1, ADAM_BETA2, WEIGHT_DECAY, (long long)o->v[SET_SEED]);
    else
        printf("sgd lr %g momentum %g, seed %lld\n", o->lr, SGD_MOMENTUM,
               (long long)o->v[SET_SEED]);
    int64_t params = 0, bytes = 0;
    if (cli_summary_totals(r->gpt, &params, &bytes) != CN_OK) {
        fprintf(stderr, "cinder train: cannot list the gpt's parameters: %s\n", cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    printf("model gpt: %lld layers, %lld heads, n_embd %lld, block %lld, vocabulary %d, lm_head "
           "tied to wte (nanoGPT's keys)\n  total: %lld parameters, %lld bytes (%.1f KiB)\n",
           (long long)o->v[SET_LAYERS], (long long)o->v[SET_HEADS], (long long)o->v[SET_EMBD],
           (long long)o->v[SET_BLOCK], r->text.vocab.size, (long long)params, (long long)bytes,
           (double)bytes / 1024.0);
    fflush(stdout);
    cli_log_run run = {"gpt",
                       cn_device_str(inner, dev, sizeof dev),
                       O_ADAMW(o) ? "adamw" : "sgd",
                       threads,
                       o->lr,
                       o->v[SET_BATCH],
                       o->v[SET_EPOCHS],
                       r->per_epoch,
                       r->train_len,
                       r->val_len,
                       params,
                       bytes,
                       o->v[SET_SEED],
                       "train_tokens",
                       "val_tokens"};
    cli_log_start(log, &run);
    return CLI_EXIT_OK;
}

static int train_epochs(gpt_run *r, cli_log *log) {
    const gpt_options *o = r->o;
    int tty = cli_progress_is_terminal();
    double started = cli_now(), step_lr = o->lr;
    cn_lr_schedule schedule = cn_lr_cosine(o->lr, o->v[SET_EPOCHS] * r->per_epoch, 0.0);
    int64_t taken = 0;
    for (int e = r->epochs; e < o->v[SET_EPOCHS]; e++) {
        cli_progress p;
        cli_progress_begin(&p, e + 1, (int)o->v[SET_EPOCHS], r->per_epoch, tty);
        int64_t done = r->steps - (int64_t)e * r->per_epoch; /* > 0 in a resumed epoch */
        for (int64_t k = r->steps - done; k < r->steps; k++)
            p.loss_sum += r->batch_loss[k];
        p.done = done;
        while (p.done < r->per_epoch) {
            if (cli_interrupt_signal()) {
                cli_progress_end(&p);
                return stop_interrupted(r);
            }
            float loss = 0;
            int rc = 1;
            if (O_COSINE(o) &&
                cn_optimizer_set_lr(r->opt, cn_lr_schedule_at(&schedule, r->steps)) != CN_OK)
                rc = -1;
            if (rc > 0) rc = train_step(r, r->steps, &loss);
            if (rc != 1) {
                cli_progress_end(&p);
                if (rc < 0)
                    fprintf(stderr, "cinder train: epoch %d, step %lld failed: %s\n", e + 1,
                            (long long)p.done + 1, cn_last_error());
                else
                    fprintf(stderr,
                            "cinder train: the loss became %f at epoch %d, step %lld: "
                            "training diverged; try a lower --lr (it is %g)\n",
                            loss, e + 1, (long long)p.done + 1, o->lr);
                return CLI_EXIT_FAILURE;
            }
            r->batch_loss[r->steps++] = loss;
            cli_progress_step(&p, loss, o->v[SET_BATCH]);
            double now = cli_now();
            step_lr = cn_optimizer_get_lr(r->opt);
            cli_log_step(log, e + 1, p.done, r->steps, loss, step_lr,
                         now > p.start ? (double)p.samples / (now - p.start) : 0.0, now - started);
            if (o->stop_after && ++taken == o->stop_after) raise(SIGINT);
        }
        cli_progress_end(&p);
        double val = validation_loss(r);
        if (isnan(val)) {
            fprintf(stderr, "cinder train: the validation after epoch %d failed: %s\n", e + 1,
                    cn_last_error());
            return CLI_EXIT_FAILURE;
        }
        r->epoch_loss[e] = cli_progress_mean_loss(&p);
        r->val_loss[e] = val;
        r->epochs = e + 1;
        double now = cli_now();
        printf("epoch %d/%d: train loss %.4f, val loss %.4f, epoch time %.2f s\n", e + 1,
               (int)o->v[SET_EPOCHS], r->epoch_loss[e], val, now - p.start);
        fflush(stdout);
        cli_log_epoch(log, e + 1, r->epoch_loss[e], "val_loss", val, step_lr, now - p.start,
                      now - started);
    }
    return CLI_EXIT_OK;
}

static int write_outputs(gpt_run *r) {
    const gpt_options *o = r->o;
    if (o->save) {
        if (save_model(r, o->save) != CN_OK) {
            fprintf(stderr, "cinder train: cannot save the model: %s\n", cn_last_error());
            return CLI_EXIT_FAILURE;
        }
        printf("saved the gpt to %s (sample from it with `cinder generate --load %s --prompt "
               "...`)\n",
               o->save, o->save);
    }
    if (o->plot) {
        char title[160];
        snprintf(title, sizeof title, "cinder train: gpt, %s lr %g, batch %lld x %lld, seed %lld",
                 O_ADAMW(o) ? "adamw" : "sgd", o->lr, (long long)o->v[SET_BATCH],
                 (long long)o->v[SET_BLOCK], (long long)o->v[SET_SEED]);
        cli_curves c = {title,         r->batch_loss, r->steps,  r->per_epoch,
                        r->epoch_loss, r->val_loss,   r->epochs, "validation loss"};
        if (cli_plot_write(o->plot, &c) != 0) {
            fprintf(stderr, "cinder train: cannot write the plot to %s: ", o->plot);
            perror(NULL);
            return CLI_EXIT_FAILURE;
        }
        printf("wrote the training curves to %s\n", o->plot);
    }
    fflush(stdout);
    return CLI_EXIT_OK;
}

static int run(gpt_run *r, cn_device inner, cli_log *log) {
    const gpt_options *o = r->o;
    const int64_t b = o->v[SET_BATCH], t = o->v[SET_BLOCK];
    r->val_len = r->text.length / VAL_FRACTION;
    r->train_len = r->text.length - r->val_len;
    if (r->train_len < t + 2 || r->val_len < t + 1) {
        fprintf(stderr,
                "cinder train: the text has %lld characters: too few for --block %lld "
                "(the last tenth validates, and each split needs more than a block); give a "
                "longer text, a larger --limit or a smaller --block\n",
                (long long)r->text.length, (long long)t);
        return CLI_EXIT_USAGE;
    }
    r->per_epoch = r->train_len / (b * t) > 0 ? r->train_len / (b * t) : 1;
    cn_gpt_config cfg = {r->text.vocab.size, t, o->v[SET_LAYERS], o->v[SET_HEADS],
                         o->v[SET_EMBD],     1};
    cn_generator gen = cn_generator_new((uint64_t)o->v[SET_SEED]);
    r->gpt = cn_gpt_new(&cfg, r->device, CN_F32, &gen);
    if (r->gpt && O_ADAMW(o)) {
        r->opt = cn_gpt_adamw_new(r->gpt, o->lr, ADAM_BETA1, ADAM_BETA2, ADAM_EPS, WEIGHT_DECAY);
    } else if (r->gpt) {
        int n = 0;
        const cn_param *params = cn_module_params(r->gpt, &n);
        r->opt = params ? cn_sgd_new(params, n, o->lr, SGD_MOMENTUM, 0.0, 0, 0.0) : NULL;
    }
    if (!r->opt) {
        fprintf(stderr, "cinder train: cannot set up the gpt: %s\n", cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    int64_t total = o->v[SET_EPOCHS] * r->per_epoch;
    r->batch_loss = malloc(sizeof *r->batch_loss * (size_t)total);
    r->epoch_loss = malloc(sizeof *r->epoch_loss * (size_t)o->v[SET_EPOCHS]);
    r->val_loss = malloc(sizeof *r->val_loss * (size_t)o->v[SET_EPOCHS]);
    if (!r->batch_loss || !r->epoch_loss || !r->val_loss) {
        fprintf(stderr, "cinder train: no memory for the loss history\n");
        return CLI_EXIT_FAILURE;
    }
    int rc = describe(r, inner, log);
    if (rc == CLI_EXIT_OK && r->resumed && restore_run(r) != 0) rc = CLI_EXIT_FAILURE;
    if (rc == CLI_EXIT_OK) rc = train_epochs(r, log);
    if (rc == CLI_EXIT_OK) rc = write_outputs(r);
    return rc;
}

int cli_train_gpt(int argc, char **argv) {
    gpt_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_EXIT_OK) return rc;
    cn_device inner;
    if (cli_parse_device(CMD, o.device, &inner) != 0) return CLI_EXIT_FAILURE;
    gpt_run r = {.o = &o};
    if (o.resume && (rc = load_resumed(&o, inner, &r.resumed)) != CLI_EXIT_OK) {
        cn_safetensors_free(r.resumed);
        return rc;
    }
    r.device =
        o.balanced ? cn_autodiff_checkpointed(inner, CN_CHECKPOINT_BALANCED) : cn_autodiff(inner);
    const char *outputs[3] = {o.save, o.plot, o.log};
    for (int k = 0; k < 3; k++) {
        if (!outputs[k]) continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", outputs[k]);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        if (access(slash ? (dir[0] ? dir : "/") : ".", W_OK) != 0) {
            fprintf(stderr,
                    "cinder train: cannot write %s: its directory is missing or not "
                    "writable; choose another path\n",
                    outputs[k]);
            cn_safetensors_free(r.resumed);
            return CLI_EXIT_FAILURE;
        }
    }
    if (cli_text_load(CMD, o.data, o.v[SET_LIMIT], &r.text) != 0) {
        cn_safetensors_free(r.resumed);
        return CLI_EXIT_FAILURE;
    }
    cli_log log;
    if (cli_log_open(&log, o.log, o.resume != NULL) != 0) {
        rc = CLI_EXIT_FAILURE;
    } else {
        rc = run(&r, inner, &log);
        if (cli_log_close(&log) != 0 && rc == CLI_EXIT_OK) rc = CLI_EXIT_FAILURE;
    }
    free(r.batch_loss);
    free(r.epoch_loss);
    free(r.val_loss);
    cn_optimizer_free(r.opt);
    cn_module_free(r.gpt);
    cn_safetensors_free(r.resumed);
    cli_text_free(&r.text);
    return rc;
}
