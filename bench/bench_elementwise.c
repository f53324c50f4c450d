/* Elementwise throughput against the machine's memory bandwidth.
 *
 * Prints one line per figure: GB/s moved by cn_add, cn_mul_scalar and cn_exp on 16M f32 (bytes read
 * plus written), and the bandwidth of a plain copy (memcpy) and a STREAM-style triad written in C
 * with OpenMP, as the ceiling an elementwise kernel can reach. Median of several runs. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cinder/cinder.h"

#define N (16 * 1024 * 1024)
#define REPS 15

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *t, int n) {
    qsort(t, (size_t)n, sizeof *t, cmp);
    return t[n / 2];
}

typedef cn_tensor *(*op2)(cn_tensor *, cn_tensor *);

static double time_binary(op2 f, cn_tensor *a, cn_tensor *b) {
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        cn_tensor *c = f(a, b);
        t[r] = now() - t0;
        cn_release(c);
    }
    return median(t, REPS);
}

static cn_tensor *mul2(cn_tensor *a, cn_tensor *b) {
    (void)b;
    return cn_mul_scalar(a, 2.0f);
}

static cn_tensor *exp1(cn_tensor *a, cn_tensor *b) {
    (void)b;
    return cn_exp(a);
}

int main(void) {
    int64_t n = N;
    cn_generator g = cn_generator_new(1);
    cn_tensor *a = cn_rand_uniform(&g, &n, 1, -1, 1, CN_F32, cn_cpu());
    cn_tensor *b = cn_rand_uniform(&g, &n, 1, -1, 1, CN_F32, cn_cpu());
    double gb3 = 3.0 * N * sizeof(float) / 1e9, gb2 = 2.0 * N * sizeof(float) / 1e9;

    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N),
          *z = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) x[i] = y[i] = z[i] = (float)i;
    double t[REPS];
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        memcpy(z, x, sizeof(float) * N);
        t[r] = now() - t0;
    }
    double copy = median(t, REPS);
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
#pragma omp parallel for
        for (int i = 0; i < N; i++) z[i] = x[i] + 2.0f * y[i];
        t[r] = now() - t0;
    }
    double triad = median(t, REPS);

    double add = time_binary(cn_add, a, b);
    double mul = time_binary(mul2, a, b);
    double ex = time_binary(exp1, a, b);
    printf("memcpy 16M f32: %.1f GB/s\n", gb2 / copy);
    printf("triad (C, OpenMP) 16M f32: %.1f GB/s\n", gb3 / triad);
    printf("cn_add 16M f32: %.1f GB/s (%.2f of triad)\n", gb3 / add, triad / add);
    printf("cn_mul_scalar 16M f32: %.1f GB/s (%.2f of memcpy)\n", gb2 / mul, copy / mul);
    printf("cn_exp 16M f32: %.1f GB/s (%.2f of memcpy)\n", gb2 / ex, copy / ex);
    free(x);
    free(y);
    free(z);
    cn_release(a);
    cn_release(b);
    return 0;
}
