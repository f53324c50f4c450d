/* CINDER_TRAIN_PROFILE (step_profile.h): per-phase wall and thread-CPU sums of a rank's steps. */
#define _POSIX_C_SOURCE 200809L

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/step_profile.h"

static const char *const phase_names[CLI_PHASE_COUNT] = {
    "agree", "data", "forward", "backward", "grad sync", "loss mean", "optimizer", "other", "eval"};

static struct {
    int on; /* -1: not read yet */
    double wall[CLI_PHASE_COUNT], cpu[CLI_PHASE_COUNT];
    double last_wall, last_cpu, first_wall, first_cpu;
    long steps, started, buckets;
    /* the wrapped sync */
    cn_status (*inner)(void *ctx, cn_grads *grads, float *loss);
    void *inner_ctx;
} prof = {.on = -1};

static double clock_s(clockid_t id) {
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int cli_profile_on(void) {
    if (prof.on < 0) {
        const char *v = getenv("CINDER_TRAIN_PROFILE");
        prof.on = v && *v && strcmp(v, "0") != 0;
    }
    return prof.on;
}

void cli_profile_begin(void) {
    if (!cli_profile_on()) return;
    memset(prof.wall, 0, sizeof prof.wall);
    memset(prof.cpu, 0, sizeof prof.cpu);
    prof.steps = prof.started = prof.buckets = 0;
    prof.first_wall = prof.last_wall = clock_s(CLOCK_MONOTONIC);
    prof.first_cpu = prof.last_cpu = clock_s(CLOCK_THREAD_CPUTIME_ID);
}

void cli_profile_mark(cli_phase phase) {
    if (!cli_profile_on()) return;
    double w = clock_s(CLOCK_MONOTONIC), c = clock_s(CLOCK_THREAD_CPUTIME_ID);
    prof.wall[phase] += w - prof.last_wall;
    prof.cpu[phase] += c - prof.last_cpu;
    prof.last_wall = w;
    prof.last_cpu = c;
}

void cli_profile_buckets(int started, int buckets) {
    if (!cli_profile_on()) return;
    prof.started += started;
    prof.buckets += buckets;
}

static cn_status profiled_sync(void *ctx, cn_grads *grads, float *loss) {
    (void)ctx;
    cli_profile_mark(CLI_PHASE_BACKWARD);
    prof.steps++;
    cn_status s = prof.inner ? prof.inner(prof.inner_ctx, grads, loss) : CN_OK;
    cli_profile_mark(prof.inner ? CLI_PHASE_LOSS : CLI_PHASE_SYNC);
    return s;
}

void cli_profile_wrap_sync(cli_model *m) {
    if (!cli_profile_on() || m->sync == profiled_sync) return;
    prof.inner = m->sync;
    prof.inner_ctx = m->sync_ctx;
    m->sync = profiled_sync;
}

void cli_profile_print(int rank, int epoch) {
    if (!cli_profile_on()) return;
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "profile rank %d epoch %d: %ld steps, wall %.3f s, thread "
                     "cpu %.3f s; per phase wall s (cpu s):",
                     rank, epoch, prof.steps, prof.last_wall - prof.first_wall,
                     prof.last_cpu - prof.first_cpu);
    for (int k = 0; k < CLI_PHASE_COUNT && n > 0 && (size_t)n < sizeof line; k++)
        n += snprintf(line + n, sizeof line - (size_t)n, "%s %s %.3f (%.3f)", k ? "," : "",
                      phase_names[k], prof.wall[k], prof.cpu[k]);
    if (prof.buckets && n > 0 && (size_t)n < sizeof line)
        snprintf(line + n, sizeof line - (size_t)n,
                 "; reductions started in backward %.2f of "
                 "%.2f a step",
                 (double)prof.started / (double)prof.steps,
                 (double)prof.buckets / (double)prof.steps);
    fprintf(stderr, "%s\n", line);
}
