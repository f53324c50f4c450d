/* A convolution layer's training step: forward and backward of a 3x3 conv from 1 to 32 channels
 * on a batch of 64 28x28 images (the first layer of `cinder train --model cnn`). Twin:
 * bench/torch/conv.py.
 *
 *   conv2d_fwd_bwd  ms per y = conv2d(x, w, b, padding 1), loss = sum(y), backward to the
 *                   gradients of x, w and b. x [64, 1, 28, 28], w [32, 1, 3, 3], b [32],
 *                   y [64, 32, 28, 28]; all three require grad.
 *
 * The median of --reps steps after two warm-ups. Usage: bench_conv [--device D] [--reps N]. */
#include "bench_common.h"

int main(int argc, char **argv) {
    bench_options o;
    bench_parse(argc, argv, 21, &o);
    static const char *const figures[] = {"conv2d_fwd_bwd"};
    bench_resolve_device(&o, figures, 1);
    cn_device dev = cn_autodiff(o.device);
    const int64_t xs[4] = {64, 1, 28, 28}, ws[4] = {32, 1, 3, 3}, bs[1] = {32};
    cn_generator g = cn_generator_new(3);
    cn_tensor *x = cn_require_grad(cn_rand_normal(&g, xs, 4, 0, 1, CN_F32, dev));
    cn_tensor *w = cn_require_grad(cn_rand_uniform(&g, ws, 4, -1.0 / 3, 1.0 / 3, CN_F32, dev));
    cn_tensor *b = cn_require_grad(cn_rand_uniform(&g, bs, 1, -1.0 / 3, 1.0 / 3, CN_F32, dev));
    bench_check(x && w && b ? x : NULL, "rand");
    const cn_conv2d_params p = {.padding = {1, 1}};
    double *t = malloc(sizeof *t * (size_t)o.reps);
    for (int r = -2; r < o.reps; r++) { /* r < 0: warm-up */
        cn_scope_begin();
        double t0 = bench_now();
        cn_tensor *loss = bench_check(cn_sum(cn_conv2d(x, w, b, &p)), "conv2d");
        cn_grads *gr = cn_backward(loss);
        bench_sync(o.device);
        double t1 = bench_now();
        if (!gr || !cn_grad(gr, x) || !cn_grad(gr, w) || !cn_grad(gr, b))
            bench_check(NULL, "backward");
        cn_grads_free(gr);
        cn_scope_end();
        if (r >= 0) t[r] = (t1 - t0) * 1e3;
    }
    bench_print("conv2d_fwd_bwd", bench_median(t, o.reps), "ms");
    free(t);
    cn_release(x);
    cn_release(w);
    cn_release(b);
    return 0;
}
