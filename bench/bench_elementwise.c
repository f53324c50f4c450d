/* Elementwise throughput against the machine's memory bandwidth. Twin: bench/torch/elementwise.py.
 *
 *   add_16m         GB/s of c = cn_add(a, b) on 16M f32 (bytes read plus written: 3 * 64 MB)
 *   mul_scalar_16m  GB/s of cn_mul_scalar(a, 2) (2 * 64 MB)
 *   exp_16m         GB/s of cn_exp(a) (2 * 64 MB)
 *   memcpy_16m, triad_16m  the ceiling: memcpy, and a STREAM-style triad in C with OpenMP, into
 *                  buffers that are already mapped (CPU only)
 *
 * Every op makes a new output and releases it, as a program would; the median of --reps runs
 * after one warm-up. Usage: bench_elementwise [--device D] [--reps N]. */
#include "bench_common.h"

#define N (16 * 1024 * 1024)

typedef cn_tensor *(*op2)(cn_tensor *, cn_tensor *);

static double time_op(op2 f, cn_tensor *a, cn_tensor *b, cn_device dev, int reps) {
    double *t = malloc(sizeof *t * (size_t)reps);
    cn_release(bench_check(f(a, b), "warm-up"));
    bench_sync(dev);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        cn_tensor *c = f(a, b);
        bench_sync(dev);
        t[r] = bench_now() - t0;
        cn_release(bench_check(c, "op"));
    }
    double m = bench_median(t, reps);
    free(t);
    return m;
}

static cn_tensor *mul2(cn_tensor *a, cn_tensor *b) {
    (void)b;
    return cn_mul_scalar(a, 2.0);
}

static cn_tensor *exp1(cn_tensor *a, cn_tensor *b) {
    (void)b;
    return cn_exp(a);
}

/* GB/s of memcpy and of a triad over pre-mapped host buffers */
static void host_ceiling(int reps) {
    float *x = malloc(sizeof(float) * N), *y = malloc(sizeof(float) * N),
          *z = malloc(sizeof(float) * N);
    double *t = malloc(sizeof *t * (size_t)reps);
    if (!x || !y || !z || !t) {
        fprintf(stderr, "bench_elementwise: out of memory\n");
        exit(1);
    }
    for (int i = 0; i < N; i++)
        x[i] = y[i] = z[i] = (float)i;
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        memcpy(z, x, sizeof(float) * N);
        t[r] = bench_now() - t0;
    }
    bench_print("memcpy_16m", 2.0 * N * sizeof(float) / 1e9 / bench_median(t, reps), "GB/s");
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
#pragma omp parallel for
        for (int i = 0; i < N; i++)
            z[i] = x[i] + 2.0f * y[i];
        t[r] = bench_now() - t0;
    }
    bench_print("triad_16m", 3.0 * N * sizeof(float) / 1e9 / bench_median(t, reps), "GB/s");
    free(x);
    free(y);
    free(z);
    free(t);
}

int main(int argc, char **argv) {
    bench_options o;
    bench_parse(argc, argv, 15, &o);
    static const char *const figures[] = {"add_16m", "mul_scalar_16m", "exp_16m"};
    bench_resolve_device(&o, figures, 3);
    int64_t n = N;
    cn_generator g = cn_generator_new(1);
    cn_tensor *a = bench_check(cn_rand_uniform(&g, &n, 1, -1, 1, CN_F32, o.device), "rand");
    cn_tensor *b = bench_check(cn_rand_uniform(&g, &n, 1, -1, 1, CN_F32, o.device), "rand");
    double gb3 = 3.0 * N * sizeof(float) / 1e9, gb2 = 2.0 * N * sizeof(float) / 1e9;
    bench_print("add_16m", gb3 / time_op(cn_add, a, b, o.device, o.reps), "GB/s");
    bench_print("mul_scalar_16m", gb2 / time_op(mul2, a, b, o.device, o.reps), "GB/s");
    bench_print("exp_16m", gb2 / time_op(exp1, a, b, o.device, o.reps), "GB/s");
    if (o.device.backend == CN_BACKEND_CPU) host_ceiling(o.reps);
    cn_release(a);
    cn_release(b);
    return 0;
}
