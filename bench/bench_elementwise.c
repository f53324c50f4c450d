/* Elementwise throughput against the machine's memory bandwidth. Twin: bench/torch/elementwise.py.
 *
 *   add_64k, add_256k, add_1m, add_4m, add_16m
 *                   GB/s of c = cn_add(a, b) on 64K .. 16M f32 (bytes read plus written:
 *                   3 * 4 * n); below 16M each timed sample is a loop of 16M / n adds, so that
 *                   every sample moves about as many bytes as one 16M add
 *   mul_scalar_16m  GB/s of cn_mul_scalar(a, 2) (2 * 64 MB)
 *   exp_16m         GB/s of cn_exp(a) (2 * 64 MB)
 *   memcpy_16m      the ceiling, CPU only: memcpy on one thread (2 * 64 MB)
 *   stream_copy_16m, stream_add_16m, triad_16m
 *                   STREAM's copy, add and triad over 16M f32 (bench_ceiling.h)
 *   bandwidth       the highest of those four medians: the machine's memory bandwidth
 *   add_16m_bw      add_16m as a fraction of the bandwidth, both measured together: the median
 *                   of reps adds, each over a bandwidth sample taken just before it (the figure
 *                   scripts/bench.sh holds against the bar of 0.8)
 *
 * Every op makes a new output and releases it, as a program would; the median of --reps samples
 * after one warm-up. Usage: bench_elementwise [--device D] [--reps N]. */
#include "bench_ceiling.h"

#define N (16 * 1024 * 1024)

typedef cn_tensor *(*op2)(cn_tensor *, cn_tensor *);

/* Median seconds of `iters` calls of f (each output released), over reps samples. */
static double time_op(op2 f, cn_tensor *a, cn_tensor *b, cn_device dev, int reps, int iters) {
    double *t = malloc(sizeof *t * (size_t)reps);
    cn_release(bench_check(f(a, b), "warm-up"));
    bench_sync(dev);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (int i = 0; i < iters; i++)
            cn_release(bench_check(f(a, b), "op"));
        bench_sync(dev);
        t[r] = bench_now() - t0;
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

/* GB/s of memcpy and of STREAM's copy, add and triad (bench_ceiling.h), each the median of reps
 * samples; prints each, then `bandwidth`, the highest of the four medians. */
static void host_ceiling(const bench_ceiling *c, int reps) {
    double *t = malloc(sizeof *t * (size_t)reps * CEILING_KERNELS);
    if (!t) {
        fprintf(stderr, "bench_elementwise: out of memory\n");
        exit(1);
    }
    for (int r = 0; r < reps; r++) {
        double gbs[CEILING_KERNELS];
        bench_ceiling_sample(c, gbs);
        for (int k = 0; k < CEILING_KERNELS; k++) t[k * reps + r] = gbs[k];
    }
    double best = 0;
    for (int k = 0; k < CEILING_KERNELS; k++) {
        double m = bench_median(t + k * reps, reps);
        bench_print(ceiling_names[k], m, "GB/s");
        best = m > best ? m : best;
    }
    bench_print("bandwidth", best, "GB/s");
    free(t);
}

/* add_16m_bw: the median over reps of one add 16M's GB/s over a bandwidth sample taken just
 * before it (bench_ceiling.h). */
static void add_against_ceiling(const bench_ceiling *c, cn_tensor *a, cn_tensor *b, int reps) {
    double *f = malloc(sizeof *f * (size_t)reps);
    if (!f) {
        fprintf(stderr, "bench_elementwise: out of memory\n");
        exit(1);
    }
    for (int r = 0; r < reps; r++) {
        double lim = bench_ceiling_sample(c, NULL);
        double t0 = bench_now();
        cn_tensor *y = bench_check(cn_add(a, b), "add");
        double secs = bench_now() - t0;
        cn_release(y);
        f[r] = 3.0 * N * sizeof(float) / 1e9 / secs / lim;
    }
    bench_print("add_16m_bw", bench_median(f, reps), "fraction");
    free(f);
}

/* The add sweep's sizes and figure names */
static const int64_t sweep_n[] = {64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024, N};
static const char *const sweep_name[] = {"add_64k", "add_256k", "add_1m", "add_4m", "add_16m"};
#define SWEEP (int)(sizeof sweep_n / sizeof sweep_n[0])

int main(int argc, char **argv) {
    bench_options o;
    bench_parse(argc, argv, 15, &o);
    static const char *const figures[] = {"add_64k", "add_256k", "add_1m",         "add_4m",
                                          "add_16m", "mul_scalar_16m", "exp_16m"};
    bench_resolve_device(&o, figures, (int)(sizeof figures / sizeof figures[0]));
    int64_t n = N;
    cn_generator g = cn_generator_new(1);
    cn_tensor *a = bench_check(cn_rand_uniform(&g, &n, 1, -1, 1, CN_F32, o.device), "rand");
    cn_tensor *b = bench_check(cn_rand_uniform(&g, &n, 1, -1, 1, CN_F32, o.device), "rand");
    for (int s = 0; s < SWEEP; s++) {
        int64_t k = sweep_n[s];
        int iters = (int)(N / k);
        /* tensors of this size of their own, as a program's would be */
        cn_tensor *ca = bench_check(cn_rand_uniform(&g, &k, 1, -1, 1, CN_F32, o.device), "rand");
        cn_tensor *cb = bench_check(cn_rand_uniform(&g, &k, 1, -1, 1, CN_F32, o.device), "rand");
        double secs = time_op(cn_add, ca, cb, o.device, o.reps, iters);
        bench_print(sweep_name[s], 3.0 * (double)k * sizeof(float) * iters / 1e9 / secs, "GB/s");
        cn_release(ca);
        cn_release(cb);
    }
    double gb2 = 2.0 * N * sizeof(float) / 1e9;
    bench_print("mul_scalar_16m", gb2 / time_op(mul2, a, b, o.device, o.reps, 1), "GB/s");
    bench_print("exp_16m", gb2 / time_op(exp1, a, b, o.device, o.reps, 1), "GB/s");
    if (o.device.backend == CN_BACKEND_CPU) {
        bench_ceiling c;
        bench_ceiling_open(&c);
        host_ceiling(&c, o.reps);
        add_against_ceiling(&c, a, b, o.reps);
        bench_ceiling_close(&c);
    }
    cn_release(a);
    cn_release(b);
    return 0;
}
