/* `cinder train`: trains the MLP or the CNN of models.h on Fashion-MNIST and reports, after each
 * epoch, the mean training loss, the accuracy on the test set and the time the epoch took
 * (training and evaluation together):
 *
 *     epoch 1/5: train loss 0.5123, test accuracy 0.8512, epoch time 4.21 s
 *
 * Each step runs in its own scope (batch, forward, loss, backward, loss read back, optimizer
 * step, gradients freed), so memory stays flat however long the training, and is all or nothing
 * (models.h: cli_model_train_step): a step that fails, or whose loss is not finite, leaves the
 * parameters and the optimizer state as they were. Images are scaled to
 * [0, 1] by the loader and then normalised with Fashion-MNIST's mean and standard deviation
 * (models.h). Progress goes to stdout (progress.h); --save writes the parameters as safetensors
 * (models.h names them), --plot the curves as SVG (plot.h). */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cinder/cinder.h"
#include "cli/cli.h"
#include "cli/models.h"
#include "cli/plot.h"
#include "cli/progress.h"

#define CMD        "train"
#define EVAL_BATCH 500
#define MAX_EPOCHS 10000

/* ---- options -------------------------------------------------------------------------------- */

typedef enum optimizer_kind { OPT_SGD = 0, OPT_ADAMW = 1 } optimizer_kind;

typedef struct train_options {
    cli_model_kind model;
    int64_t epochs, batch;
    int64_t limit, test_limit; /* 0: every image */
    double lr;                 /* < 0: the optimizer's default */
    optimizer_kind optimizer;
    const char *device;
    int balanced; /* --checkpointing balanced */
    int cosine;   /* --schedule cosine: the learning rate follows a cosine to 0 over the run */
    const char *data, *save, *plot;
    int64_t seed;
} train_options;

static const train_options defaults = {
    .model = CLI_MODEL_MLP,
    .epochs = 5,
    .batch = 128,
    .lr = -1,
    .optimizer = OPT_SGD,
    .device = "cpu",
    .seed = 42,
    .cosine = 1,
};

#define SGD_LR             0.1
#define SGD_MOMENTUM       0.9
#define ADAMW_LR           1e-3
#define ADAMW_WEIGHT_DECAY 0.01

/* Fills *o from the command line; CLI_EXIT_OK, or CLI_EXIT_USAGE after printing why. */
static int parse_options(int argc, char **argv, train_options *o) {
    *o = defaults;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r, bad = 0;
        if ((r = cli_option(argc, argv, &i, CMD, "--model", &v)) != 0) {
            if (r > 0 && !cli_model_parse(v, &o->model)) {
                fprintf(stderr, "cinder train: unknown model '%s': choose mlp or cnn\n", v);
                bad = 1;
            }
        } else if ((r = cli_option(argc, argv, &i, CMD, "--epochs", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--epochs", v, 1, MAX_EPOCHS, &o->epochs);
        } else if ((r = cli_option(argc, argv, &i, CMD, "--batch", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--batch", v, 1, 60000, &o->batch);
        } else if ((r = cli_option(argc, argv, &i, CMD, "--lr", &v)) != 0) {
            bad = r > 0 && cli_parse_real(CMD, "--lr", v, 1e-12, 100, &o->lr);
        } else if ((r = cli_option(argc, argv, &i, CMD, "--optimizer", &v)) != 0) {
            if (r > 0 && strcmp(v, "sgd") == 0)
                o->optimizer = OPT_SGD;
            else if (r > 0 && strcmp(v, "adamw") == 0)
                o->optimizer = OPT_ADAMW;
            else if (r > 0) {
                fprintf(stderr, "cinder train: unknown optimizer '%s': choose sgd or adamw\n", v);
                bad = 1;
            }
        } else if ((r = cli_option(argc, argv, &i, CMD, "--device", &v)) != 0) {
            o->device = v;
        } else if ((r = cli_option(argc, argv, &i, CMD, "--checkpointing", &v)) != 0) {
            if (r > 0 && (strcmp(v, "balanced") == 0 || strcmp(v, "none") == 0))
                o->balanced = strcmp(v, "balanced") == 0;
            else if (r > 0) {
                fprintf(stderr,
                        "cinder train: unknown checkpointing '%s': choose balanced or "
                        "none\n",
                        v);
                bad = 1;
            }
        } else if ((r = cli_option(argc, argv, &i, CMD, "--schedule", &v)) != 0) {
            if (r > 0 && (strcmp(v, "cosine") == 0 || strcmp(v, "constant") == 0))
                o->cosine = strcmp(v, "cosine") == 0;
            else if (r > 0) {
                fprintf(stderr, "cinder train: unknown schedule '%s': choose cosine or constant\n",
                        v);
                bad = 1;
            }
        } else if ((r = cli_option(argc, argv, &i, CMD, "--data", &v)) != 0) {
            o->data = v;
        } else if ((r = cli_option(argc, argv, &i, CMD, "--save", &v)) != 0) {
            o->save = v;
        } else if ((r = cli_option(argc, argv, &i, CMD, "--plot", &v)) != 0) {
            o->plot = v;
        } else if ((r = cli_option(argc, argv, &i, CMD, "--seed", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--seed", v, 0, INT64_MAX, &o->seed);
        } else if ((r = cli_option(argc, argv, &i, CMD, "--limit", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--limit", v, 1, 60000, &o->limit);
        } else if ((r = cli_option(argc, argv, &i, CMD, "--test-limit", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--test-limit", v, 1, 10000, &o->test_limit);
        } else {
            fprintf(stderr, "cinder train: unknown argument '%s' (see `cinder train --help`)\n",
                    argv[i]);
            bad = 1;
        }
        if (r < 0 || bad) return CLI_EXIT_USAGE;
    }
    if (o->lr < 0) o->lr = o->optimizer == OPT_SGD ? SGD_LR : ADAMW_LR;
    return CLI_EXIT_OK;
}

/* ---- one step ------------------------------------------------------------------------------- */

/* One optimisation step on the next batch (models.h: cli_model_train_step, all or nothing), in a
 * scope of its own: *loss and *samples receive the batch's loss and size. 1: a step was taken;
 * 0: the epoch is over; -1: failed (error set), with the parameters and the optimizer state as
 * they were; 2: the loss is not finite (in *loss) and the step was not taken. */
static int train_step(cli_model *m, cn_optimizer *opt, cn_batches *b, float *loss,
                      int64_t *samples) {
    if (cn_scope_begin() != CN_OK) return -1;
    cn_tensor *x = NULL, *y = NULL; /* x: [B, 784] f32, y: [B] i64 */
    int more = cn_batches_next(b, &x, &y);
    if (more > 0) {
        int applied = 0;
        if (cli_model_train_step(m, opt, x, y, loss, &applied) != CN_OK)
            more = -1;
        else if (!applied)
            more = 2;
        *samples = cn_shape(x)[0];
    }
    if (cn_scope_end() != CN_OK) more = -1;
    return more;
}

/* ---- the run -------------------------------------------------------------------------------- */

/* What a run keeps for the plot. */
typedef struct history {
    float *batch_loss; /* every step */
    int64_t steps;
    double *epoch_loss, *accuracy;
    int epochs;
} history;

static cn_optimizer *make_optimizer(const train_options *o, cli_model *m) {
    int n = 0;
    const cn_param *params = cn_module_params(m->net, &n);
    if (!params) return NULL;
    if (o->optimizer == OPT_ADAMW)
        return cn_adamw_new(params, n, o->lr, 0.9, 0.999, 1e-8, ADAMW_WEIGHT_DECAY);
    return cn_sgd_new(params, n, o->lr, SGD_MOMENTUM, 0.0, 0, 0.0);
}

static void describe_run(const train_options *o, cn_device inner, const cli_data *d,
                         int64_t batches) {
    char dev[64];
    printf("cinder train: %s on %s%s, %lld training images (%lld batches of %lld), %lld test "
           "images, ",
           cli_model_name(o->model), cn_device_str(inner, dev, sizeof dev),
           o->balanced ? " (balanced checkpointing)" : "", (long long)cn_shape(d->train_x)[0],
           (long long)batches, (long long)o->batch, (long long)cn_shape(d->test_x)[0]);
    if (o->optimizer == OPT_SGD)
        printf("sgd lr %g momentum %g, seed %lld\n", o->lr, SGD_MOMENTUM, (long long)o->seed);
    else
        printf("adamw lr %g weight decay %g, seed %lld\n", o->lr, ADAMW_WEIGHT_DECAY,
               (long long)o->seed);
    fflush(stdout);
}

/* Trains for o->epochs, filling h; CLI_EXIT_OK or CLI_EXIT_FAILURE (printed). */
static int train_epochs(const train_options *o, cli_model *m, cn_optimizer *opt,
                        cn_batches *batches, const cli_data *d, history *h) {
    int tty = isatty(STDOUT_FILENO);
    int64_t per_epoch = cn_batches_count(batches);
    /* per step, so the last batches of the run take the smallest steps */
    cn_lr_schedule schedule = cn_lr_cosine(o->lr, o->epochs * per_epoch, 0.0);
    for (int e = 0; e < o->epochs; e++) {
        cli_progress p;
        cli_progress_begin(&p, e + 1, (int)o->epochs, per_epoch, tty);
        cn_batches_reset(batches, (uint64_t)e);
        for (;;) {
            float loss = 0;
            int64_t samples = 0;
            int more = 1;
            if (o->cosine &&
                cn_optimizer_set_lr(opt, cn_lr_schedule_at(&schedule, h->steps)) != CN_OK)
                more = -1;
            if (more > 0) more = train_step(m, opt, batches, &loss, &samples);
            if (more == 0) break;
            if (more < 0 || more == 2) {
                cli_progress_end(&p);
                if (more < 0)
                    fprintf(stderr, "cinder train: epoch %d, batch %lld failed: %s\n", e + 1,
                            (long long)p.done + 1, cn_last_error());
                else
                    fprintf(stderr,
                            "cinder train: the loss became %f at epoch %d, batch %lld: "
                            "training diverged; try a lower --lr (it is %g)\n",
                            loss, e + 1, (long long)p.done + 1, o->lr);
                return CLI_EXIT_FAILURE;
            }
            h->batch_loss[h->steps++] = loss;
            cli_progress_step(&p, loss, samples);
        }
        cli_progress_end(&p);
        double accuracy = cli_model_accuracy(m, d->test_x, d->test_y, EVAL_BATCH);
        if (accuracy < 0) {
            fprintf(stderr, "cinder train: evaluating after epoch %d failed: %s\n", e + 1,
                    cn_last_error());
            return CLI_EXIT_FAILURE;
        }
        h->epoch_loss[e] = cli_progress_mean_loss(&p);
        h->accuracy[e] = accuracy;
        h->epochs = e + 1;
        printf("epoch %d/%d: train loss %.4f, test accuracy %.4f, epoch time %.2f s\n", e + 1,
               (int)o->epochs, h->epoch_loss[e], accuracy, cli_now() - p.start);
        fflush(stdout);
    }
    return CLI_EXIT_OK;
}

/* Writes --save and --plot; CLI_EXIT_OK or CLI_EXIT_FAILURE (printed). */
static int write_outputs(const train_options *o, cli_model *m, const history *h,
                         int64_t per_epoch) {
    if (o->save) {
        if (cli_model_save(m, o->save) != CN_OK) {
            fprintf(stderr, "cinder train: cannot save the model: %s\n", cn_last_error());
            return CLI_EXIT_FAILURE;
        }
        printf("saved the %s to %s (test it with `cinder eval --load %s`)\n",
               cli_model_name(o->model), o->save, o->save);
    }
    if (o->plot) {
        char title[160];
        snprintf(title, sizeof title, "cinder train: %s, %s lr %g, batch %lld, seed %lld",
                 cli_model_name(o->model), o->optimizer == OPT_SGD ? "sgd" : "adamw", o->lr,
                 (long long)o->batch, (long long)o->seed);
        cli_curves c = {title,         h->batch_loss, h->steps, per_epoch,
                        h->epoch_loss, h->accuracy,   h->epochs};
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

static int run(const train_options *o, cn_device inner, cn_device device, const cli_data *d) {
    cn_generator gen = cn_generator_new((uint64_t)o->seed);
    cli_model m = {0};
    cn_optimizer *opt = NULL;
    cn_batches *batches = NULL;
    history h = {0};
    int rc = CLI_EXIT_FAILURE;
    if (cli_model_new(o->model, device, &gen, &m) != CN_OK || !(opt = make_optimizer(o, &m)) ||
        !(batches = cn_batches_new(d->train_x, d->train_y, o->batch, 1, (uint64_t)o->seed, 0))) {
        fprintf(stderr, "cinder train: cannot set up the %s: %s\n", cli_model_name(o->model),
                cn_last_error());
        goto done;
    }
    int64_t per_epoch = cn_batches_count(batches);
    h.batch_loss = malloc(sizeof *h.batch_loss * (size_t)(per_epoch * o->epochs));
    h.epoch_loss = malloc(sizeof *h.epoch_loss * (size_t)o->epochs);
    h.accuracy = malloc(sizeof *h.accuracy * (size_t)o->epochs);
    if (!h.batch_loss || !h.epoch_loss || !h.accuracy) {
        fprintf(stderr, "cinder train: no memory for the loss history\n");
        goto done;
    }
    describe_run(o, inner, d, per_epoch);
    rc = train_epochs(o, &m, opt, batches, d, &h);
    if (rc == CLI_EXIT_OK) rc = write_outputs(o, &m, &h, per_epoch);
done:
    free(h.batch_loss);
    free(h.epoch_loss);
    free(h.accuracy);
    cn_batches_free(batches);
    cn_optimizer_free(opt);
    cli_model_free(&m);
    return rc;
}

int cli_train(int argc, char **argv) {
    train_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_EXIT_OK) return rc;
    cn_device inner;
    if (cli_parse_device(CMD, o.device, &inner) != 0) return CLI_EXIT_FAILURE;
    cn_device device =
        o.balanced ? cn_autodiff_checkpointed(inner, CN_CHECKPOINT_BALANCED) : cn_autodiff(inner);
    /* an output that cannot be written should fail now, not after the training */
    const char *outputs[2] = {o.save, o.plot};
    for (int k = 0; k < 2; k++) {
        if (!outputs[k]) continue;
        char dir[4096];
        snprintf(dir, sizeof dir, "%s", outputs[k]);
        char *slash = strrchr(dir, '/');
        if (slash) *slash = '\0';
        if (access(slash ? (dir[0] ? dir : "/") : ".", W_OK) != 0) {
            fprintf(stderr, "cinder train: cannot write %s: its directory is missing or not "
                    "writable; choose another path\n", outputs[k]);
            return CLI_EXIT_FAILURE;
        }
    }
    cli_data d;
    if (cli_data_load(o.data, device, 1, o.limit, o.test_limit, &d) != CN_OK) {
        fprintf(stderr, "cinder train: cannot load Fashion-MNIST: %s\n", cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    rc = run(&o, inner, device, &d);
    cli_data_free(&d);
    return rc;
}
