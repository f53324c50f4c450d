/* Softmax over the rows of a 4096 x 4096 f32 matrix. Twin: bench/torch/softmax.py.
 *
 *   softmax_4096     GB/s of y = cn_softmax(x, 1) (bytes read plus written: 2 * 64 MB)
 *   softmax_4096_bw  on the CPU, as a fraction of the memory bandwidth, both measured together:
 *                    the median of reps softmaxes, each over a bandwidth sample taken just before
 *                    it (bench_ceiling.h; the figure scripts/bench.sh holds against the bar)
 *
 * A new output each time, released; the median of --reps runs after one warm-up.
 * Usage: bench_softmax [--device D] [--reps N]. */
#include "bench_ceiling.h"

#define ROWS 4096
#define COLS 4096

int main(int argc, char **argv) {
    bench_options o;
    bench_parse(argc, argv, 15, &o);
    static const char *const figures[] = {"softmax_4096"};
    bench_resolve_device(&o, figures, 1);
    int64_t shape[2] = {ROWS, COLS};
    cn_generator g = cn_generator_new(2);
    cn_tensor *x = bench_check(cn_rand_normal(&g, shape, 2, 0, 1, CN_F32, o.device), "rand");
    cn_release(bench_check(cn_softmax(x, 1), "softmax"));
    bench_sync(o.device);
    double *t = malloc(sizeof *t * (size_t)o.reps);
    for (int r = 0; r < o.reps; r++) {
        double t0 = bench_now();
        cn_tensor *y = cn_softmax(x, 1);
        bench_sync(o.device);
        t[r] = bench_now() - t0;
        cn_release(bench_check(y, "softmax"));
    }
    double bytes = 2.0 * ROWS * COLS * sizeof(float);
    bench_print("softmax_4096", bytes / 1e9 / bench_median(t, o.reps), "GB/s");
    if (o.device.backend == CN_BACKEND_CPU) {
        bench_ceiling c;
        bench_ceiling_open(&c);
        for (int r = 0; r < o.reps; r++) {
            double lim = bench_ceiling_sample(&c, NULL);
            double t0 = bench_now();
            cn_tensor *y = bench_check(cn_softmax(x, 1), "softmax");
            double secs = bench_now() - t0;
            cn_release(y);
            t[r] = bytes / 1e9 / secs / lim;
        }
        bench_print("softmax_4096_bw", bench_median(t, o.reps), "fraction");
        bench_ceiling_close(&c);
    }
    free(t);
    cn_release(x);
    return 0;
}
