/* `cinder train`: trains the MLP or the CNN of models.h on Fashion-MNIST and reports, after each
 * epoch, the mean training loss, the accuracy on the test set and the time the epoch took
 * (training and evaluation together):
 *
 *     epoch 1/5: train loss 0.5123, test accuracy 0.8512, epoch time 4.21 s
 *
 * Each step runs in its own scope (batch, forward, loss, backward, loss read back, optimizer
 * step, gradients freed), so memory stays flat however long the training, and is all or nothing
 * (models.h: cli_model_train_step): a step that fails, or whose loss is not finite, leaves the
 * parameters and the optimizer state as they were. Images are normalised with Fashion-MNIST's
 * mean and standard deviation by the loader as it decompresses them, so the run holds one f32
 * copy of the data set (models.h: cli_data_load). The run, the model's summary (summary.h) and
 * the epoch lines go to stdout, progress to stderr (progress.h); --save writes the parameters as
 * safetensors (models.h names them), --plot the curves as SVG (plot.h), --log the run as JSON
 * Lines (runlog.h). */
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
#include "cli/ddp.h"
#include "cli/models.h"
#include "cli/plot.h"
#include "cli/progress.h"
#include "cli/resume.h"
#include "cli/runlog.h"
#include "cli/step_profile.h"
#include "cli/summary.h"

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
    const char *data, *save, *plot, *log;
    int64_t seed;
    const char *resume; /* --resume FILE: continue the run saved there */
    int64_t stop_after; /* --stop-after-steps N: stop as an interrupt does after N steps */
    int argc;           /* the command line, for the resume command an interrupt prints */
    char **argv;
    unsigned given; /* bit k: settings[k] was given on the command line */
    int ddp;         /* --ddp: data-parallel over an MPI launch's ranks (ddp.h) */
    int rank, world; /* this process's rank and their number (0 and 1 without --ddp) */
} train_options;

/* The checkpoint of --resume, loaded (cli_train frees it). */
static cn_safetensors *resumed;

static const train_options defaults = {
    .model = CLI_MODEL_MLP,
    .epochs = 5,
    .batch = 128,
    .lr = -1,
    .optimizer = OPT_SGD,
    .device = NULL, /* cli_parse_device: $CINDER_DEVICE, else cpu */
    .seed = 42,
    .cosine = 1,
};

#define SGD_LR             0.1
#define SGD_MOMENTUM       0.9
#define ADAMW_LR           1e-3
#define ADAMW_WEIGHT_DECAY 0.01

/* ---- the settings a checkpoint keeps --------------------------------------------------------
 * The options that decide a run's numbers are written to its checkpoint as metadata, under the
 * option's name without "--", as text that reads back to the same value. `--resume FILE` takes
 * them from the file; one given on the command line as well must agree. */

enum {
    SET_MODEL,
    SET_OPTIMIZER,
    SET_LR,
    SET_BATCH,
    SET_EPOCHS,
    SET_SEED,
    SET_SCHEDULE,
    SET_LIMIT,
    N_SETTINGS
};

static const char *const setting_keys[N_SETTINGS] = {"model",  "optimizer", "lr",       "batch",
                                                     "epochs", "seed",      "schedule", "limit"};

/* Whether arg is the option --<key>, as "--key" or "--key=value". */
static int is_option(const char *arg, const char *name) {
    size_t len = strlen(name);
    return strncmp(arg, name, len) == 0 && (arg[len] == '\0' || arg[len] == '=');
}

/* Records that the option argument `arg` sets a setting. */
static void mark_given(train_options *o, const char *arg) {
    for (int k = 0; k < N_SETTINGS; k++)
        if (arg[0] == '-' && arg[1] == '-' && is_option(arg + 2, setting_keys[k]))
            o->given |= 1u << k;
}

/* Setting k of o as text into buf. */
static const char *setting_text(const train_options *o, int k, char *buf, size_t size) {
    switch (k) {
    case SET_MODEL:
        snprintf(buf, size, "%s", cli_model_name(o->model));
        break;
    case SET_OPTIMIZER:
        snprintf(buf, size, "%s", o->optimizer == OPT_SGD ? "sgd" : "adamw");
        break;
    case SET_LR:
        snprintf(buf, size, "%.17g", o->lr);
        break;
    case SET_BATCH:
        snprintf(buf, size, "%lld", (long long)o->batch);
        break;
    case SET_EPOCHS:
        snprintf(buf, size, "%lld", (long long)o->epochs);
        break;
    case SET_SEED:
        snprintf(buf, size, "%lld", (long long)o->seed);
        break;
    case SET_SCHEDULE:
        snprintf(buf, size, "%s", o->cosine ? "cosine" : "constant");
        break;
    case SET_LIMIT:
        snprintf(buf, size, "%lld", (long long)o->limit);
        break;
    }
    return buf;
}

/* Sets setting k of o from its text; 0, or -1 when the text is not one of its values. */
static int set_setting(train_options *o, int k, const char *text) {
    char *end = NULL;
    errno = 0;
    long long n = strtoll(text, &end, 10);
    int whole = *text && !*end && errno == 0;
    switch (k) {
    case SET_MODEL:
        return cli_model_parse(text, &o->model) ? 0 : -1;
    case SET_OPTIMIZER:
        if (strcmp(text, "sgd") != 0 && strcmp(text, "adamw") != 0) return -1;
        o->optimizer = strcmp(text, "sgd") == 0 ? OPT_SGD : OPT_ADAMW;
        return 0;
    case SET_LR:
        o->lr = strtod(text, &end);
        return *text && !*end && o->lr > 0 && isfinite(o->lr) ? 0 : -1;
    case SET_BATCH:
        o->batch = n;
        return whole && n >= 1 && n <= 60000 ? 0 : -1;
    case SET_EPOCHS:
        o->epochs = n;
        return whole && n >= 1 && n <= MAX_EPOCHS ? 0 : -1;
    case SET_SEED:
        o->seed = n;
        return whole && n >= 0 ? 0 : -1;
    case SET_SCHEDULE:
        if (strcmp(text, "cosine") != 0 && strcmp(text, "constant") != 0) return -1;
        o->cosine = strcmp(text, "cosine") == 0;
        return 0;
    case SET_LIMIT:
        o->limit = n;
        return whole && n >= 0 && n <= 60000 ? 0 : -1;
    }
    return -1;
}

/* Loads the checkpoint of --resume into resumed and takes the run's settings from it;
 * CLI_EXIT_OK, CLI_EXIT_USAGE when the command line contradicts it, CLI_EXIT_FAILURE when it
 * cannot be read or is not a run's checkpoint (both printed). */
static const char *text_of(void *o, int k, char *buf, size_t size) {
    return setting_text(o, k, buf, size);
}
static int set_from(void *o, int k, const char *text) { return set_setting(o, k, text); }

static int load_resumed(train_options *o, cn_device inner) {
    int rc = cli_resume_open(o->resume, inner, &resumed);
    if (rc != CLI_EXIT_OK) return rc;
    const cli_settings s = {setting_keys, N_SETTINGS, o->given, SET_LR, text_of, set_from, o};
    return cli_resume_settings(resumed, o->resume, &s);
}

/* Fills *o from the command line; CLI_EXIT_OK, or CLI_EXIT_USAGE after printing why. */
static int parse_options(int argc, char **argv, train_options *o) {
    *o = defaults;
    o->argc = argc;
    o->argv = argv;
    const cli_run_fields run = {&o->device, &o->data,     &o->save,       &o->plot,
                                &o->log,    &o->resume,   &o->balanced,   &o->stop_after};
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int r, bad = 0, at = i;
        if ((r = cli_option(argc, argv, &i, CMD, "--model", &v)) != 0) {
            if (r > 0 && !cli_model_parse(v, &o->model)) {
                fprintf(stderr, "cinder train: unknown model '%s': choose mlp, cnn or gpt\n", v);
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
        } else if ((r = cli_run_option(argc, argv, &i, CMD, &run, &bad)) != 0) {
            /* --device, --threads, --checkpointing, --data, --save, --plot, --log, --resume,
             * --stop-after-steps */
        } else if ((r = cli_option(argc, argv, &i, CMD, "--schedule", &v)) != 0) {
            if (r > 0 && (strcmp(v, "cosine") == 0 || strcmp(v, "constant") == 0))
                o->cosine = strcmp(v, "cosine") == 0;
            else if (r > 0) {
                fprintf(stderr, "cinder train: unknown schedule '%s': choose cosine or constant\n",
                        v);
                bad = 1;
            }
        } else if ((r = cli_option(argc, argv, &i, CMD, "--seed", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--seed", v, 0, INT64_MAX, &o->seed);
        } else if ((r = cli_option(argc, argv, &i, CMD, "--limit", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--limit", v, 1, 60000, &o->limit);
        } else if ((r = cli_option(argc, argv, &i, CMD, "--test-limit", &v)) != 0) {
            bad = r > 0 && cli_parse_int(CMD, "--test-limit", v, 1, 10000, &o->test_limit);
        } else if ((r = cli_flag(argv[i], CMD, "--ddp")) != 0) {
            o->ddp = r > 0;
        } else {
            fprintf(stderr, "cinder train: unknown argument '%s' (see `cinder train --help`)\n",
                    argv[i]);
            bad = 1;
        }
        if (r < 0 || bad) return CLI_EXIT_USAGE;
        mark_given(o, argv[at]);
    }
    if (o->lr < 0) o->lr = o->optimizer == OPT_SGD ? SGD_LR : ADAMW_LR;
    o->world = 1;
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
    cli_profile_mark(CLI_PHASE_DATA);
    if (more > 0) {
        int applied = 0;
        if (cli_model_train_step(m, opt, x, y, loss, &applied) != CN_OK)
            more = -1;
        else if (!applied)
            more = 2;
        *samples = cn_shape(x)[0];
    }
    if (cn_scope_end() != CN_OK) more = -1;
    cli_profile_mark(CLI_PHASE_OPTIM);
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

/* ---- interrupting and resuming (resume.h) ---------------------------------------------------
 * A run's position is (h->epochs, h->steps): the epochs finished and the steps taken. An
 * interrupt is looked at before each step, so the position is always between two steps (or
 * between an epoch's last step and its evaluation, which the resumed run then does). */

#define INTERRUPT_PATH "cinder-interrupted.safetensors"

/* Writes the run's training state to --save (or INTERRUPT_PATH) after the interrupt `sig` and
 * says how to resume: 128 + the signal's number, or CLI_EXIT_FAILURE when it cannot be written
 * (both printed). With --ddp all the ranks stop before the same step (cli_ddp_stop_signal) and
 * rank 0 alone writes the state, the same on every rank, with the number of ranks ("ranks"). */
static int stop_interrupted(const train_options *o, cli_model *m, cn_optimizer *opt,
                            const history *h, const cli_data *d, int64_t per_epoch, int sig) {
    if (o->rank != 0) return 128 + sig;
    const char *path = o->save ? o->save : INTERRUPT_PATH;
    int64_t epoch = h->epochs, step = h->steps - (int64_t)h->epochs * per_epoch;
    enum { N_META = N_SETTINGS + 6 };
    char text[N_META][64];
    const char *keys[N_META], *values[N_META];
    for (int k = 0; k < N_SETTINGS; k++) {
        keys[k] = setting_keys[k];
        values[k] = setting_text(o, k, text[k], sizeof text[k]);
    }
    const char *position[6] = {"train_images", "batches_per_epoch", "epoch", "step", "global_step",
                               "ranks"};
    int64_t numbers[6] = {cn_shape(d->train_x)[0], per_epoch, epoch, step, h->steps, o->world};
    int n_meta = o->world > 1 ? N_META : N_META - 1; /* "ranks" only for a data-parallel run */
    for (int k = 0; k < n_meta - N_SETTINGS; k++) {
        keys[N_SETTINGS + k] = position[k];
        snprintf(text[N_SETTINGS + k], sizeof text[0], "%lld", (long long)numbers[k]);
        values[N_SETTINGS + k] = text[N_SETTINGS + k];
    }
    cli_history_view view = {h->batch_loss, h->steps, h->epoch_loss, h->accuracy, h->epochs,
                             NULL};
    cli_interrupt_guard(path); /* a second signal now removes the unfinished file */
    cn_status st = cli_state_save(path, m->net, opt, &view, keys, values, n_meta);
    cli_interrupt_guard(NULL);
    fflush(stdout);
    if (st != CN_OK) {
        fprintf(stderr,
                "cinder train: interrupted by %s at epoch %lld/%lld after batch %lld/%lld, but "
                "the checkpoint cannot be written to %s: %s; nothing was saved%s\n",
                cli_signal_name(sig), (long long)epoch + 1, (long long)o->epochs, (long long)step,
                (long long)per_epoch, path, cn_last_error(),
                o->save ? "" : " (give --save FILE to write it elsewhere)");
        return CLI_EXIT_FAILURE;
    }
    fprintf(stderr,
            "cinder train: interrupted by %s at epoch %lld/%lld after batch %lld/%lld (step %lld "
            "of %lld); saved the run to %s\ncinder train: resume with: ",
            cli_signal_name(sig), (long long)epoch + 1, (long long)o->epochs, (long long)step,
            (long long)per_epoch, (long long)h->steps, (long long)(o->epochs * per_epoch), path);
    if (o->ddp) fprintf(stderr, "mpirun -np %d ", o->world); /* the same number of ranks */
    cli_print_resume_command(stderr, "train", o->argc, o->argv, path);
    return 128 + sig;
}

/* Restores the model, the optimizer and the history from resumed; 0, or -1 (printed). */
static int restore_run(const train_options *o, cli_model *m, cn_optimizer *opt, const cli_data *d,
                       int64_t per_epoch, history *h) {
    const cn_safetensors *r = resumed;
    int64_t images = 0, batches = 0, epoch = 0, step = 0, global = 0;
    if (cli_state_int(r, o->resume, "train_images", 0, INT64_MAX, &images) != 0 ||
        cli_state_int(r, o->resume, "batches_per_epoch", 0, INT64_MAX, &batches) != 0 ||
        cli_state_int(r, o->resume, "epoch", 0, o->epochs, &epoch) != 0 ||
        cli_state_int(r, o->resume, "step", 0, per_epoch, &step) != 0 ||
        cli_state_int(r, o->resume, "global_step", 0, INT64_MAX, &global) != 0)
        return -1;
    int64_t ranks = 1; /* "ranks": written by a data-parallel run */
    if (cn_safetensors_metadata(r, "ranks") &&
        cli_state_int(r, o->resume, "ranks", 1, INT32_MAX, &ranks) != 0)
        return -1;
    if (ranks != o->world) { /* each rank's share of the data depends on their number */
        fprintf(stderr, "cinder train: cannot resume from %s: the run trained %s%lld rank%s, "
                "this one has %d; resume it as it ran: %s%lld%s\n", o->resume,
                ranks > 1 ? "data-parallel over " : "in ", (long long)ranks, ranks > 1 ? "s" : "",
                o->world, ranks > 1 ? "`mpirun -np " : "without mpirun and --ddp (",
                (long long)ranks, ranks > 1 ? " cinder train --ddp ...`" : " process)");
        return -1;
    }
    if (images != cn_shape(d->train_x)[0] || batches != per_epoch) {
        fprintf(stderr,
                "cinder train: cannot resume from %s: the run trained on %lld images (%lld "
                "batches an epoch), but these data have %lld (%lld batches); give the --data "
                "and --limit of the run\n",
                o->resume, (long long)images, (long long)batches,
                (long long)cn_shape(d->train_x)[0], (long long)per_epoch);
        return -1;
    }
    if (global != epoch * per_epoch + step) {
        fprintf(stderr,
                "cinder train: cannot resume from %s: its position (epoch %lld, step %lld, "
                "global step %lld) does not add up; the file is damaged: start the run anew\n",
                o->resume, (long long)epoch, (long long)step, (long long)global);
        return -1;
    }
    if (cn_train_state_restore(r, m->net, opt) != CN_OK) {
        fprintf(stderr, "cinder train: cannot resume from %s: %s\n", o->resume, cn_last_error());
        return -1;
    }
    if (cli_state_history(r, o->resume, h->batch_loss, global, h->epoch_loss, h->accuracy, epoch,
                          NULL) != 0)
        return -1;
    h->steps = global;
    h->epochs = (int)epoch;
    printf("resuming from %s at epoch %lld/%lld after batch %lld/%lld (step %lld)\n", o->resume,
           (long long)epoch + 1, (long long)o->epochs, (long long)step, (long long)per_epoch,
           (long long)global);
    fflush(stdout);
    return 0;
}

/* Starts epoch e where the run stands: at its first batch, or, for the epoch a resumed run
 * stopped in, after the batches it had taken, with the progress (and so the epoch's mean loss)
 * counting their losses as the run that never stopped counted them. */
static cn_status start_epoch(cn_batches *b, cli_progress *p, const history *h, int e,
                             int64_t per_epoch) {
    int64_t done = h->steps - (int64_t)e * per_epoch;
    if (done == 0) {
        cn_batches_reset(b, (uint64_t)e);
        return CN_OK;
    }
    for (int64_t k = h->steps - done; k < h->steps; k++)
        p->loss_sum += h->batch_loss[k];
    p->done = done;
    return cn_batches_seek(b, (uint64_t)e, done);
}

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
    int threads = cn_cpu_threads();
    printf("cinder train: %s on %s%s, %d CPU thread%s, %lld training images (%lld batches of "
           "%lld), %lld test images, ",
           cli_model_name(o->model), cn_device_str(inner, dev, sizeof dev),
           o->balanced ? " (balanced checkpointing)" : "", threads, threads == 1 ? "" : "s",
           (long long)cn_shape(d->train_x)[0],
           (long long)batches, (long long)o->batch, (long long)cn_shape(d->test_x)[0]);
    if (o->ddp)
        printf("data-parallel over %d ranks (%lld images of each batch per rank), ", o->world,
               (long long)(o->batch / o->world));
    if (o->optimizer == OPT_SGD)
        printf("sgd lr %g momentum %g, seed %lld\n", o->lr, SGD_MOMENTUM, (long long)o->seed);
    else
        printf("adamw lr %g weight decay %g, seed %lld\n", o->lr, ADAMW_WEIGHT_DECAY,
               (long long)o->seed);
    fflush(stdout);
}

/* The model's summary on stdout and the log's start line (runlog.h); CLI_EXIT_OK or
 * CLI_EXIT_FAILURE (printed). */
static int describe_model(const train_options *o, cn_device inner, cli_model *m,
                          const cli_data *d, int64_t batches, cli_log *log) {
    int64_t params = 0, bytes = 0;
    if (cli_summary_print(stdout, m->net, cli_model_name(o->model)) != CN_OK ||
        cli_summary_totals(m->net, &params, &bytes) != CN_OK) {
        fprintf(stderr, "cinder train: cannot list the %s's parameters: %s\n",
                cli_model_name(o->model), cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    fflush(stdout);
    char dev[64];
    cli_log_run r = {cli_model_name(o->model),
                     cn_device_str(inner, dev, sizeof dev),
                     o->optimizer == OPT_SGD ? "sgd" : "adamw",
                     cn_cpu_threads(),
                     o->lr,
                     o->batch,
                     o->epochs,
                     batches,
                     cn_shape(d->train_x)[0],
                     cn_shape(d->test_x)[0],
                     params,
                     bytes,
                     o->seed,
                     NULL,
                     NULL};
    cli_log_start(log, &r);
    return CLI_EXIT_OK;
}

/* Trains for o->epochs, filling h and writing the log; CLI_EXIT_OK or CLI_EXIT_FAILURE
 * (printed). */
static int train_epochs(const train_options *o, cli_model *m, cn_optimizer *opt,
                        cn_batches *batches, const cli_data *d, history *h, cli_log *log) {
    int tty = cli_progress_is_terminal();
    double started = cli_now(), step_lr = o->lr;
    int64_t per_epoch = cn_batches_count(batches);
    /* per step, so the last batches of the run take the smallest steps */
    cn_lr_schedule schedule = cn_lr_cosine(o->lr, o->epochs * per_epoch, 0.0);
    int64_t taken = 0; /* steps in this process, for --stop-after-steps */
    for (int e = h->epochs; e < o->epochs; e++) {
        cli_progress p;
        cli_progress_begin(&p, e + 1, (int)o->epochs, per_epoch, tty);
        p.quiet = o->rank != 0; /* --ddp: rank 0 shows the progress of all */
        if (start_epoch(batches, &p, h, e, per_epoch) != CN_OK) {
            fprintf(stderr, "cinder train: cannot start epoch %d: %s\n", e + 1, cn_last_error());
            return CLI_EXIT_FAILURE;
        }
        cli_profile_begin();
        for (;;) {
            float loss = 0;
            int64_t samples = 0;
            int more = 1;
            cli_profile_mark(CLI_PHASE_OTHER);
            int sig = cli_interrupt_signal(); /* --ddp: any rank's, so all stop here */
            if (o->ddp && (sig = cli_ddp_stop_signal(sig)) < 0) {
                cli_progress_end(&p);
                return CLI_EXIT_FAILURE;
            }
            cli_profile_mark(CLI_PHASE_AGREE);
            if (sig) {
                cli_progress_end(&p);
                return stop_interrupted(o, m, opt, h, d, per_epoch, sig);
            }
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
            cli_progress_step(&p, loss, samples * o->world); /* --ddp: the whole batch's */
            double now = cli_now();
            step_lr = cn_optimizer_get_lr(opt); /* the rate this step used */
            cli_log_step(log, e + 1, p.done, h->steps, loss, step_lr,
                         now > p.start ? (double)p.samples / (now - p.start) : 0.0,
                         now - started);
            /* as if interrupted: the same handler, the same checkpoint, at a known step */
            if (o->stop_after && ++taken == o->stop_after) raise(SIGINT);
        }
        cli_progress_end(&p);
        cli_profile_mark(CLI_PHASE_OTHER);
        double accuracy = o->ddp ? cli_ddp_accuracy(m, d->test_x, d->test_y, EVAL_BATCH)
                                 : cli_model_accuracy(m, d->test_x, d->test_y, EVAL_BATCH);
        cli_profile_mark(CLI_PHASE_EVAL);
        if (accuracy < 0) {
            fprintf(stderr, "cinder train: evaluating after epoch %d failed: %s\n", e + 1,
                    cn_last_error());
            return CLI_EXIT_FAILURE;
        }
        h->epoch_loss[e] = cli_progress_mean_loss(&p);
        h->accuracy[e] = accuracy;
        h->epochs = e + 1;
        double now = cli_now();
        printf("epoch %d/%d: train loss %.4f, test accuracy %.4f, epoch time %.2f s\n", e + 1,
               (int)o->epochs, h->epoch_loss[e], accuracy, now - p.start);
        fflush(stdout);
        cli_profile_print(o->rank, e + 1);
        cli_log_epoch(log, e + 1, h->epoch_loss[e], "test_accuracy", accuracy, step_lr,
                      now - p.start, now - started);
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
                        h->epoch_loss, h->accuracy,   h->epochs, NULL};
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

static int run(const train_options *o, cn_device inner, cn_device device, const cli_data *d,
               cli_log *log) {
    cn_generator gen = cn_generator_new((uint64_t)o->seed);
    cli_model m = {0};
    cn_optimizer *opt = NULL;
    cn_batches *batches = NULL;
    history h = {0};
    int rc = CLI_EXIT_FAILURE;
    /* with --ddp each rank gathers its share of every batch: batch i of all the ranks together
     * is batch i of one process */
    if (cli_model_new(o->model, device, &gen, &m) != CN_OK || !(opt = make_optimizer(o, &m)) ||
        !(batches = cn_batches_new_sharded(d->train_x, d->train_y, o->batch / o->world, 1,
                                           (uint64_t)o->seed, 0, o->rank, o->world))) {
        fprintf(stderr, "cinder train: cannot set up the %s: %s\n", cli_model_name(o->model),
                cn_last_error());
        goto done;
    }
    if (o->ddp && cli_ddp_attach(&m) != 0) goto done;
    cli_profile_wrap_sync(&m); /* CINDER_TRAIN_PROFILE: the end of backward is marked */
    int64_t per_epoch = cn_batches_count(batches);
    h.batch_loss = malloc(sizeof *h.batch_loss * (size_t)(per_epoch * o->epochs));
    h.epoch_loss = malloc(sizeof *h.epoch_loss * (size_t)o->epochs);
    h.accuracy = malloc(sizeof *h.accuracy * (size_t)o->epochs);
    if (!h.batch_loss || !h.epoch_loss || !h.accuracy) {
        fprintf(stderr, "cinder train: no memory for the loss history\n");
        goto done;
    }
    describe_run(o, inner, d, per_epoch);
    rc = describe_model(o, inner, &m, d, per_epoch, log);
    if (rc == CLI_EXIT_OK && resumed && o->ddp && cli_ddp_same_file(o->resume) != 0)
        rc = CLI_EXIT_FAILURE;
    if (rc == CLI_EXIT_OK && resumed && restore_run(o, &m, opt, d, per_epoch, &h) != 0)
        rc = CLI_EXIT_FAILURE;
    if (rc == CLI_EXIT_OK) rc = train_epochs(o, &m, opt, batches, d, &h, log);
    if (rc == CLI_EXIT_OK) rc = write_outputs(o, &m, &h, per_epoch);
done:
    free(h.batch_loss);
    free(h.epoch_loss);
    free(h.accuracy);
    cn_batches_free(batches);
    cn_optimizer_free(opt);
    if (o->ddp) rc = cli_ddp_end(&m, rc); /* a failed rank stops the job here */
    cli_model_free(&m);
    return rc;
}

static int train_command(int argc, char **argv) {
    train_options o;
    int rc = parse_options(argc, argv, &o);
    if (rc != CLI_EXIT_OK) return rc;
    cn_device inner;
    if (cli_parse_device(CMD, o.device, &inner) != 0) return CLI_EXIT_FAILURE;
    if (o.resume && (rc = load_resumed(&o, inner)) != CLI_EXIT_OK) return rc;
    cn_device device =
        o.balanced ? cn_autodiff_checkpointed(inner, CN_CHECKPOINT_BALANCED) : cn_autodiff(inner);
    if (o.ddp) {
        /* on CUDA each rank trains on its own GPU, the one its engine took */
        if (cli_ddp_begin(&inner, &o.rank, &o.world) != 0) return CLI_EXIT_FAILURE;
        device = o.balanced ? cn_autodiff_checkpointed(inner, CN_CHECKPOINT_BALANCED)
                            : cn_autodiff(inner);
        if (o.batch % o.world != 0) {
            fprintf(stderr, "cinder train: --batch %lld is not a multiple of the %d ranks; give a "
                    "multiple, so that every rank has an equal share of each batch\n",
                    (long long)o.batch, o.world);
            return CLI_EXIT_USAGE;
        }
        /* rank 0 alone prints and writes the outputs: the others' numbers are the same */
        if (o.rank != 0) {
            o.save = o.plot = o.log = NULL;
            if (!freopen("/dev/null", "w", stdout)) return CLI_EXIT_FAILURE;
        }
    }
    /* an output that cannot be written should fail now, not after the training */
    const char *outputs[3] = {o.save, o.plot, o.log};
    for (int k = 0; k < 3; k++) {
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
    cli_warm warm;
    cli_warm_begin(inner, &warm); /* oneDNN's kernels generated while the data loads */
    cn_status loaded = cli_data_load(o.data, device, 1, o.limit, o.test_limit, &d);
    cli_warm_end(&warm);
    if (loaded != CN_OK) {
        fprintf(stderr, "cinder train: cannot load Fashion-MNIST: %s\n", cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    /* opened only now that the data is in hand, before any training: replaced by a new run,
     * continued by a resumed one */
    cli_log log;
    if (cli_log_open(&log, o.log, o.resume != NULL) != 0) {
        cli_data_free(&d);
        return CLI_EXIT_FAILURE;
    }
    rc = run(&o, inner, device, &d, &log);
    if (cli_log_close(&log) != 0 && rc == CLI_EXIT_OK) rc = CLI_EXIT_FAILURE; /* printed */
    cli_data_free(&d);
    return rc;
}

/* Whether the command line trains the gpt (train_gpt.c): --model gpt, or no --model and a
 * --resume FILE whose run was the gpt's. */
static int wants_gpt(int argc, char **argv) {
    const char *model = NULL, *resume = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], **dst = is_option(a, "--model")    ? &model
                                        : is_option(a, "--resume") ? &resume
                                                                   : NULL;
        if (!dst) continue;
        if (strchr(a, '='))
            *dst = strchr(a, '=') + 1;
        else if (i + 1 < argc)
            *dst = argv[++i];
    }
    if (model) return strcmp(model, "gpt") == 0;
    if (!resume) return 0;
    cn_safetensors *h = NULL; /* any failure is reported by the mlp/cnn path's own load */
    int gpt = cn_safetensors_load(resume, cn_cpu(), &h) == CN_OK &&
              cn_safetensors_metadata(h, "model") &&
              strcmp(cn_safetensors_metadata(h, "model"), "gpt") == 0;
    cn_safetensors_free(h);
    cn_clear_error();
    return gpt;
}

int cli_train(int argc, char **argv) {
    cli_interrupt_install(); /* from here on a signal stops the run between two steps */
    int rc = wants_gpt(argc, argv) ? cli_train_gpt(argc, argv) : train_command(argc, argv);
    rc = cli_ddp_end(NULL, rc); /* --ddp: leaves the job, or stops it if this rank failed */
    if (rc == CLI_EXIT_OK && cli_interrupt_signal()) /* it came after the last step */
        fprintf(stderr,
                "cinder train: the %s came after the last step; the run is complete and "
                "its outputs are written\n",
                cli_signal_name(cli_interrupt_signal()));
    cn_safetensors_free(resumed);
    resumed = NULL;
    cli_interrupt_uninstall();
    return rc;
}
