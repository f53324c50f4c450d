/* What the benchmark programs share: a monotonic clock, medians, the --device option, waiting for
 * a device's queued work, and the output format.
 *
 * Output: one line per figure, `name value unit`, e.g. `add_16m 9.81 GB/s`, which
 * scripts/bench.sh reads and matches by name with the PyTorch twin in bench/torch/. A program
 * that cannot run on the requested device prints `skip <name>: <reason>` lines and exits with
 * BENCH_EXIT_SKIP. Header-only: each bench_*.c is its own program. */
#ifndef CINDER_BENCH_COMMON_H
#define CINDER_BENCH_COMMON_H

#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinder/cinder.h"
#include "cinder/cuda.h"

#define BENCH_EXIT_SKIP 77 /* the automake/ctest convention for "skipped" */

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static inline int bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v). */
static inline double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Options every benchmark takes: `--device cpu|cuda[:N]` and `--reps N` (inner repetitions, whose
 * median is the figure). Unknown arguments are an error (exit 2). */
typedef struct bench_options {
    const char *device_name;
    cn_device device;
    int reps;
} bench_options;

static inline void bench_parse(int argc, char **argv, int default_reps, bench_options *o) {
    o->device_name = "cpu";
    o->reps = default_reps;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
            o->device_name = argv[++i];
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            o->reps = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--device cpu|cuda[:N]] [--reps N]\n", argv[0]);
            exit(2);
        }
    }
    if (o->reps < 1 || o->reps > 10000) {
        fprintf(stderr, "%s: --reps must be 1..10000\n", argv[0]);
        exit(2);
    }
}

/* Resolves o->device; on a device this build or machine lacks, prints a skip line for each of the
 * `n` figures and exits with BENCH_EXIT_SKIP. */
static inline void bench_resolve_device(bench_options *o, const char *const *figures, int n) {
    if (cn_device_parse(o->device_name, &o->device) == CN_OK) return;
    const char *why = cn_last_error();
    for (int i = 0; i < n; i++)
        printf("skip %s: %s\n", figures[i], why);
    exit(BENCH_EXIT_SKIP);
}

/* Waits for the device's queued work (GPU kernels run asynchronously); nothing on the CPU. */
static inline void bench_sync(cn_device d) {
    if (d.backend != CN_BACKEND_CPU) cn_cuda_synchronize(d.index);
}

static inline void bench_print(const char *name, double value, const char *unit) {
    printf("%s %.6g %s\n", name, value, unit);
    fflush(stdout);
}

/* Exits with a message when t is NULL (a failed op). */
static inline cn_tensor *bench_check(cn_tensor *t, const char *what) {
    if (!t) {
        fprintf(stderr, "benchmark: %s failed: %s\n", what, cn_last_error());
        exit(1);
    }
    return t;
}

#endif
