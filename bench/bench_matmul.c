/* The cost of cinder's route to GEMM: cn_matmul on 1024^3 f32 against a direct cblas_sgemm on
 * the same sizes (the hardware figure OpenBLAS reaches here). Prints one figure a line: GFLOP/s
 * of each (median of several runs, after a warm-up) and their ratio.
 * Usage: bench_matmul [n] [runs]. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cinder/cinder.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 1024;
    int runs = argc > 2 ? atoi(argv[2]) : 9;
    if (n < 1 || runs < 1 || runs > 1000) {
        fprintf(stderr, "usage: bench_matmul [n >= 1] [runs 1..1000]\n");
        return 2;
    }
    int64_t shape[2] = {n, n};
    cn_generator gen = cn_generator_new(42);
    cn_tensor *a = cn_rand_uniform(&gen, shape, 2, -1.0, 1.0, CN_F32, cn_cpu());
    cn_tensor *b = cn_rand_uniform(&gen, shape, 2, -1.0, 1.0, CN_F32, cn_cpu());
    float *ha = malloc(sizeof(float) * (size_t)n * (size_t)n);
    float *hb = malloc(sizeof(float) * (size_t)n * (size_t)n);
    float *hc = malloc(sizeof(float) * (size_t)n * (size_t)n);
    if (!a || !b || !ha || !hb || !hc ||
        cn_read(a, ha, sizeof(float) * (size_t)n * (size_t)n) != CN_OK ||
        cn_read(b, hb, sizeof(float) * (size_t)n * (size_t)n) != CN_OK) {
        fprintf(stderr, "bench_matmul: setup failed: %s\n", cn_last_error());
        return 1;
    }

    double flops = 2.0 * (double)n * (double)n * (double)n;
    double *t_cn = malloc(sizeof(double) * (size_t)runs);
    double *t_blas = malloc(sizeof(double) * (size_t)runs);
    /* Interleave the two so that clock or thermal drift hits both alike; one warm-up each. */
    for (int r = -1; r < runs; r++) {
        double t0 = now_s();
        cn_tensor *c = cn_matmul(a, b);
        double t1 = now_s();
        if (!c) {
            fprintf(stderr, "bench_matmul: cn_matmul failed: %s\n", cn_last_error());
            return 1;
        }
        cn_release(c);
        double t2 = now_s();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, ha, n, hb, n, 0.0f,
                    hc, n);
        double t3 = now_s();
        if (r >= 0) {
            t_cn[r] = t1 - t0;
            t_blas[r] = t3 - t2;
        }
    }
    double g_cn = flops / median(t_cn, runs) * 1e-9;
    double g_blas = flops / median(t_blas, runs) * 1e-9;
    printf("cn_matmul %dx%dx%d f32: %.1f GFLOP/s (median of %d)\n", n, n, n, g_cn, runs);
    printf("cblas_sgemm %dx%dx%d f32: %.1f GFLOP/s (median of %d)\n", n, n, n, g_blas, runs);
    printf("cn_matmul / cblas_sgemm: %.3f\n", g_cn / g_blas);

    free(t_cn);
    free(t_blas);
    free(ha);
    free(hb);
    free(hc);
    cn_release(a);
    cn_release(b);
    return 0;
}
