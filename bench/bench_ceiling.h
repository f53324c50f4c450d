/* The machine's memory bandwidth, measured beside a workload: memcpy on one thread and STREAM's
 * copy c = a, add c = a + b and triad c = a + 2 b over 16M f32 (64 MB arrays, beyond any cache
 * here) on OMP_NUM_THREADS threads (OpenMP, static schedule), into buffers that are already
 * mapped; bytes read plus written, with no write-allocate traffic counted. The highest of the
 * four is the bandwidth (memcpy included: on a loaded machine OpenMP's threads wait for each
 * other, one thread does not).
 *
 * The host's bandwidth moves by up to 2x from minute to minute (docs/benchmarks.md), so a
 * workload held against it (add_16m, softmax_4096) also takes a sample right before each of its
 * own timed runs, and reports the median of those runs' own fractions: both sides of each fraction
 * see the same machine. Header-only, CPU only; for bench_elementwise and bench_softmax. */
#ifndef CINDER_BENCH_CEILING_H
#define CINDER_BENCH_CEILING_H

#include "bench_common.h"

#define CEILING_N (16 * 1024 * 1024)
#define CEILING_KERNELS 4

static const char *const ceiling_names[CEILING_KERNELS] = {"memcpy_16m", "stream_copy_16m",
                                                           "stream_add_16m", "triad_16m"};

typedef struct bench_ceiling {
    float *x, *y, *z;
} bench_ceiling;

static inline void ceiling_run(const bench_ceiling *c, int k) {
    float *x = c->x, *y = c->y, *z = c->z;
    switch (k) {
    case 0: memcpy(z, x, sizeof(float) * CEILING_N); break;
    case 1:
#pragma omp parallel for schedule(static)
        for (int i = 0; i < CEILING_N; i++)
            z[i] = x[i];
        break;
    case 2:
#pragma omp parallel for schedule(static)
        for (int i = 0; i < CEILING_N; i++)
            z[i] = x[i] + y[i];
        break;
    default:
#pragma omp parallel for schedule(static)
        for (int i = 0; i < CEILING_N; i++)
            z[i] = x[i] + 2.0f * y[i];
        break;
    }
}

/* One timed run of each kernel: GB/s into gbs[k] (may be NULL); returns the highest. Waits 20 ms
 * before and after: threads spin for a while after their work (OpenMP's after a parallel region,
 * cinder's pool after a job), and on 2 cores they slow whatever runs next on the other threads
 * (an add of 16M f32 right after a sample: 15-25 GB/s; after 2 ms, 24-39; after 20 ms, 31-37, as
 * back to back). */
static inline double bench_ceiling_sample(const bench_ceiling *c, double *gbs) {
    const struct timespec quiet = {0, 20 * 1000 * 1000};
    nanosleep(&quiet, NULL);
    double best = 0;
    for (int k = 0; k < CEILING_KERNELS; k++) {
        double t0 = bench_now();
        ceiling_run(c, k);
        double v = (k < 2 ? 2.0 : 3.0) * CEILING_N * sizeof(float) / 1e9 / (bench_now() - t0);
        if (gbs) gbs[k] = v;
        best = v > best ? v : best;
    }
    nanosleep(&quiet, NULL);
    return best;
}

/* Maps the buffers (first touch on the threads that use them) and runs each kernel once. Exits
 * the program when memory is short. */
static inline void bench_ceiling_open(bench_ceiling *c) {
    c->x = malloc(sizeof(float) * CEILING_N);
    c->y = malloc(sizeof(float) * CEILING_N);
    c->z = malloc(sizeof(float) * CEILING_N);
    if (!c->x || !c->y || !c->z) {
        fprintf(stderr, "bench: out of memory for the bandwidth's buffers\n");
        exit(1);
    }
    float *x = c->x, *y = c->y, *z = c->z;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < CEILING_N; i++)
        x[i] = y[i] = z[i] = (float)i;
    bench_ceiling_sample(c, NULL);
}

static inline void bench_ceiling_close(bench_ceiling *c) {
    free(c->x);
    free(c->y);
    free(c->z);
}

#endif
