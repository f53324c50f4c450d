/* Per-op overhead: the cost of routing one tiny op, without and with autodiff tracking, and of a
 * backward through a chain of 100 tiny ops. Prints one line per figure (median of runs). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinder/cinder.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

#define RUNS 7

/* ns per cn_add of two 4-element f32 tensors on dev (result released each time) */
static double add_ns(cn_device dev, int track, int iters) {
    float v[4] = {1, 2, 3, 4};
    int64_t n = 4;
    cn_tensor *a = cn_from_data(v, &n, 1, CN_F32, dev), *b = cn_from_data(v, &n, 1, CN_F32, dev);
    if (track) {
        cn_require_grad(a);
        cn_require_grad(b);
    }
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double t0 = now();
        for (int i = 0; i < iters; i++) cn_release(cn_add(a, b));
        t[r] = (now() - t0) / iters * 1e9;
    }
    cn_release(a);
    cn_release(b);
    qsort(t, RUNS, sizeof *t, cmp);
    return t[RUNS / 2];
}

/* us per backward of y = chain of 100 small elementwise ops on a 4-element tensor */
static double chain_backward_us(int iters) {
    float v[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    int64_t n = 4;
    cn_tensor *x = cn_require_grad(cn_from_data(v, &n, 1, CN_F32, cn_autodiff(cn_cpu())));
    double t[RUNS];
    for (int r = 0; r < RUNS; r++) {
        double total = 0;
        for (int i = 0; i < iters; i++) {
            cn_scope_begin();
            cn_tensor *y = x;
            for (int k = 0; k < 100; k++) y = (k % 2) ? cn_mul(y, x) : cn_add(y, x);
            cn_tensor *loss = cn_sum(y);
            double t0 = now();
            cn_grads *g = cn_backward(loss);
            total += now() - t0;
            cn_grads_free(g);
            cn_scope_end();
        }
        t[r] = total / iters * 1e6;
    }
    cn_release(x);
    qsort(t, RUNS, sizeof *t, cmp);
    return t[RUNS / 2];
}

int main(int argc, char **argv) {
    int iters = argc > 1 ? atoi(argv[1]) : 200000;
    const char *only = argc > 2 ? argv[2] : NULL; /* "add", "tracked" or "backward" */
    if (only) { /* one figure, e.g. for an instruction count under callgrind */
        if (!strcmp(only, "add")) printf("%.1f\n", add_ns(cn_cpu(), 0, iters));
        if (!strcmp(only, "tracked")) printf("%.1f\n", add_ns(cn_autodiff(cn_cpu()), 1, iters));
        if (!strcmp(only, "backward")) printf("%.1f\n", chain_backward_us(iters));
        return 0;
    }
    printf("add of two 4-element f32 tensors: %.1f ns per op\n", add_ns(cn_cpu(), 0, iters));
    printf("add with autodiff tracking: %.1f ns per op\n",
           add_ns(cn_autodiff(cn_cpu()), 1, iters));
    printf("backward of a 100-op chain: %.1f us per backward\n", chain_backward_us(iters / 200));
    return 0;
}
