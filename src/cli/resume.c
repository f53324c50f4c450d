/* Interrupting and resuming `cinder train` (resume.h): the signal handlers, and the training
 * state's history and metadata. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/resume.h"

/* ---- interrupts ------------------------------------------------------------------------------
 * The handler touches only lock-free atomics and calls only async-signal-safe functions (write,
 * unlink, _exit). The first signal is recorded with an atomic exchange: two signals may be
 * handled at the same time by two threads (the CPU pool's workers take signals too), and exactly
 * one of them must see the other's. */

static atomic_int first_signal;
static volatile sig_atomic_t guarding;
static char guard_tmp[4200]; /* "<checkpoint>.tmp", complete whenever guarding is 1 */
static struct sigaction previous_int, previous_term;
static int installed;

static void say(const char *text) {
    size_t len = strlen(text);
    while (len > 0) {
        ssize_t n = write(STDERR_FILENO, text, len);
        if (n <= 0) return;
        text += n;
        len -= (size_t)n;
    }
}

static void on_signal(int sig) {
    if (atomic_exchange(&first_signal, sig) != 0) {
        if (guarding) unlink(guard_tmp);
        say("\ncinder train: interrupted again: stopping now, without saving a checkpoint\n");
        _exit(128 + sig);
    }
    say("\ncinder train: interrupted: finishing this step, then saving a checkpoint to resume "
        "from (interrupt again to stop at once, saving nothing)\n");
}

void cli_interrupt_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* reads and writes carry on; the loop looks at the flag */
    atomic_store(&first_signal, 0);
    guarding = 0;
    sigaction(SIGINT, &sa, &previous_int);
    sigaction(SIGTERM, &sa, &previous_term);
    installed = 1;
}

void cli_interrupt_uninstall(void) {
    if (!installed) return;
    sigaction(SIGINT, &previous_int, NULL);
    sigaction(SIGTERM, &previous_term, NULL);
    installed = 0;
}

int cli_interrupt_signal(void) { return atomic_load(&first_signal); }

const char *cli_signal_name(int sig) {
    static char other[32];
    if (sig == SIGINT) return "SIGINT";
    if (sig == SIGTERM) return "SIGTERM";
    snprintf(other, sizeof other, "signal %d", sig);
    return other;
}

void cli_interrupt_guard(const char *path) {
    guarding = 0;
    if (!path || strlen(path) + sizeof ".tmp" > sizeof guard_tmp) return;
    snprintf(guard_tmp, sizeof guard_tmp, "%s.tmp", path);
    guarding = 1;
}

/* ---- the resume command ---------------------------------------------------------------------- */

/* s for a POSIX shell: as it is when it needs no quoting, else in single quotes. */
static void print_quoted(FILE *f, const char *s) {
    int plain = *s != '\0';
    for (const char *c = s; *c && plain; c++)
        plain = strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=+,@%",
                       *c) != NULL;
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *c = s; *c; c++)
        fputs(*c == '\'' ? "'\\''" : (char[2]){*c, '\0'}, f);
    fputc('\'', f);
}

/* Whether arg is the option `name`, as "--name" or "--name=value". */
static int is_option(const char *arg, const char *name) {
    size_t len = strlen(name);
    return strncmp(arg, name, len) == 0 && (arg[len] == '\0' || arg[len] == '=');
}

void cli_print_resume_command(FILE *f, const char *cmd, int argc, char **argv, const char *path) {
    fprintf(f, "cinder %s", cmd);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is_option(a, "--resume") || is_option(a, "--stop-after-steps")) {
            if (!strchr(a, '=')) i++; /* and its value */
            continue;
        }
        fputc(' ', f);
        print_quoted(f, a);
    }
    fputs(" --resume ", f);
    print_quoted(f, path);
    fputc('\n', f);
}

/* ---- the training state ---------------------------------------------------------------------- */

cn_status cli_state_save(const char *path, cn_module *net, cn_optimizer *opt,
                         const cli_history_view *h, const char *const *keys,
                         const char *const *values, int n_meta) {
    cn_status s = cn_scope_begin();
    if (s != CN_OK) return s;
    int64_t steps = h->steps, epochs = h->epochs;
    char metric[64];
    snprintf(metric, sizeof metric, "history.%s", h->metric ? h->metric : "accuracy");
    /* the arrays are never NULL (train.c allocates them before training), so even an empty
     * history has a data pointer */
    cn_param extra[3] = {
        {"history.batch_loss", cn_from_data(h->batch_loss, &steps, 1, CN_F32, cn_cpu())},
        {"history.epoch_loss", cn_from_data(h->epoch_loss, &epochs, 1, CN_F64, cn_cpu())},
        {metric, cn_from_data(h->accuracy, &epochs, 1, CN_F64, cn_cpu())},
    };
    if (!extra[0].tensor || !extra[1].tensor || !extra[2].tensor)
        s = cn_last_status();
    else
        s = cn_train_state_save(path, net, opt, extra, 3, keys, values, n_meta);
    cn_scope_end();
    return s;
}

const char *cli_state_text(const cn_safetensors *h, const char *path, const char *key) {
    const char *v = cn_safetensors_metadata(h, key);
    if (!v)
        fprintf(stderr,
                "cinder train: cannot resume from %s: it has no metadata '%s', so it was not "
                "written by `cinder train` (an interrupted run, or --save during one); start the "
                "run anew without --resume\n",
                path, key);
    return v;
}

int cli_state_int(const cn_safetensors *h, const char *path, const char *key, int64_t min,
                  int64_t max, int64_t *out) {
    const char *v = cli_state_text(h, path, key);
    if (!v) return -1;
    char *end = NULL;
    errno = 0;
    long long n = strtoll(v, &end, 10);
    if (!*v || *end || errno || n < min || n > max) {
        fprintf(stderr,
                "cinder train: cannot resume from %s: its metadata '%s' is '%s', not a whole "
                "number from %lld to %lld; the file is damaged: start the run anew\n",
                path, key, v, (long long)min, (long long)max);
        return -1;
    }
    *out = n;
    return 0;
}

/* Copies h's tensor `name`, which must be `dtype` [count], into dst. */
static int copy_history(const cn_safetensors *h, const char *path, const char *name, cn_dtype dtype,
                        int64_t count, void *dst) {
    cn_tensor *t = cn_safetensors_get(h, name);
    int ok = t && cn_dtype_of(t) == dtype && cn_ndim(t) == 1 && cn_shape(t)[0] == count;
    if (ok && count > 0 && cn_read(t, dst, (size_t)count * cn_dtype_size(dtype)) != CN_OK) ok = 0;
    if (!ok) {
        char got[128];
        fprintf(stderr,
                "cinder train: cannot resume from %s: its '%s' is %s, but the run's position "
                "needs %s [%lld]; the file is damaged: start the run anew\n",
                path, name, t ? cn_tensor_str(t, got, sizeof got) : "missing", cn_dtype_name(dtype),
                (long long)count);
    }
    cn_release(t);
    return ok ? 0 : -1;
}

int cli_state_history(const cn_safetensors *h, const char *path, float *batch_loss, int64_t steps,
                      double *epoch_loss, double *accuracy, int64_t epochs, const char *metric) {
    char name[64];
    snprintf(name, sizeof name, "history.%s", metric ? metric : "accuracy");
    if (cn_scope_begin() != CN_OK) return -1;
    int rc = copy_history(h, path, "history.batch_loss", CN_F32, steps, batch_loss);
    if (rc == 0) rc = copy_history(h, path, "history.epoch_loss", CN_F64, epochs, epoch_loss);
    if (rc == 0) rc = copy_history(h, path, name, CN_F64, epochs, accuracy);
    cn_scope_end();
    return rc;
}

int cli_resume_open(const char *path, cn_device inner, cn_safetensors **h) {
    if (cn_safetensors_load(path, inner, h) != CN_OK) {
        fprintf(stderr, "cinder train: cannot resume from %s: %s\n", path, cn_last_error());
        return CLI_EXIT_FAILURE;
    }
    if (!cn_safetensors_metadata(*h, "cinder.train_state")) {
        fprintf(stderr,
                "cinder train: cannot resume from %s: it holds a model only, not a run's training "
                "state (a finished run's --save writes the model only); resume from the "
                "checkpoint that an interrupted run wrote, or start anew without --resume\n",
                path);
        return CLI_EXIT_FAILURE;
    }
    return CLI_EXIT_OK;
}

int cli_resume_settings(const cn_safetensors *h, const char *path, const cli_settings *s) {
    for (int k = 0; k < s->n; k++) {
        const char *saved = cli_state_text(h, path, s->keys[k]);
        if (!saved) return CLI_EXIT_FAILURE;
        char mine[64], shown[64];
        if (s->given & (1u << k)) {
            const char *now = s->text(s->ctx, k, mine, sizeof mine);
            if (strcmp(now, saved) == 0) continue;
            if (k == s->real_k) { /* as a number, and shown as the user would write it */
                double a = strtod(now, NULL), b = strtod(saved, NULL);
                if (a == b) continue;
                snprintf(mine, sizeof mine, "%g", a);
                snprintf(shown, sizeof shown, "%g", b);
                now = mine, saved = shown;
            }
            fprintf(stderr,
                    "cinder train: cannot resume from %s: the run was started with --%s %s, not "
                    "--%s %s; drop --%s (the checkpoint keeps it), or start a new run without "
                    "--resume\n",
                    path, s->keys[k], saved, s->keys[k], now, s->keys[k]);
            return CLI_EXIT_USAGE;
        }
        if (s->set(s->ctx, k, saved) != 0) {
            fprintf(stderr,
                    "cinder train: cannot resume from %s: its metadata '%s' is '%s', which is not "
                    "a value of --%s; the file is damaged: start the run anew\n",
                    path, s->keys[k], saved, s->keys[k]);
            return CLI_EXIT_FAILURE;
        }
    }
    return CLI_EXIT_OK;
}
