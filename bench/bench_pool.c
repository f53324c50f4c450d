/* Max pooling's kernels on the CNN's shapes (`cinder train --model cnn`: 2x2 windows, stride 2,
 * after each of the two convolutions), f32:
 *
 *   max_pool2d_fwd_28  ms per y = max_pool2d(x), x [128, 32, 28, 28] -> y [128, 32, 14, 14]
 *   max_pool2d_bwd_28  ms per gx = max_pool2d's backward (g [128, 32, 14, 14], x) -> [.., 28, 28]
 *   max_pool2d_fwd_14  the same for x [128, 64, 14, 14] -> [128, 64, 7, 7]
 *   max_pool2d_bwd_14
 *
 * The backward kernel is called through the router's entry (dispatch/backward_ops.h), as the
 * autodiff layer calls it. The median of --reps calls after two warm-ups. Usage:
 * bench_pool [--device D] [--reps N]. */
#include "bench_common.h"
#include "dispatch/backward_ops.h"

static void bench_shape(const bench_options *o, const int64_t *xs, const char *fwd,
                        const char *bwd) {
    cn_generator gen = cn_generator_new(5);
    cn_tensor *x = bench_check(cn_rand_normal(&gen, xs, 4, 0, 1, CN_F32, o->device), "rand");
    const int64_t gs[4] = {xs[0], xs[1], xs[2] / 2, xs[3] / 2}, ints[6] = {2, 2, 2, 2, 0, 0};
    cn_tensor *g = bench_check(cn_rand_normal(&gen, gs, 4, 0, 1, CN_F32, o->device), "rand");
    const cn_pool2d_params p = {{2, 2}, {2, 2}, {0, 0}};
    double *tf = malloc(sizeof *tf * (size_t)o->reps), *tb = malloc(sizeof *tb * (size_t)o->reps);
    for (int r = -2; r < o->reps; r++) { /* r < 0: warm-up */
        double t0 = bench_now();
        cn_tensor *y = bench_check(cn_max_pool2d(x, &p), "max_pool2d");
        bench_sync(o->device);
        double t1 = bench_now();
        cn_tensor *gx = bench_check(cn__max_pool2d_backward(g, x, ints), "max_pool2d_backward");
        bench_sync(o->device);
        double t2 = bench_now();
        cn_release(y);
        cn_release(gx);
        if (r >= 0) {
            tf[r] = (t1 - t0) * 1e3;
            tb[r] = (t2 - t1) * 1e3;
        }
    }
    bench_print(fwd, bench_median(tf, o->reps), "ms");
    bench_print(bwd, bench_median(tb, o->reps), "ms");
    free(tf);
    free(tb);
    cn_release(x);
    cn_release(g);
}

int main(int argc, char **argv) {
    bench_options o;
    bench_parse(argc, argv, 51, &o);
    static const char *const figures[] = {"max_pool2d_fwd_28", "max_pool2d_bwd_28",
                                          "max_pool2d_fwd_14", "max_pool2d_bwd_14"};
    bench_resolve_device(&o, figures, 4);
    bench_shape(&o, (const int64_t[]){128, 32, 28, 28}, figures[0], figures[1]);
    bench_shape(&o, (const int64_t[]){128, 64, 14, 14}, figures[2], figures[3]);
    return 0;
}
