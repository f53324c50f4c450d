/* The fused transformer ops of issue 17 at the sizes of its GPT (batch 32, context 64, d_model
 * 128, a 4x MLP), each forward and backward together. Twin: bench/torch/norm.py.
 *
 *   layer_norm_fwd_bwd  ms of y = cn_layer_norm(x [32, 64, 128], [128], weight, bias, 1e-5) and
 *                       cn_backward of sum(y * r) (the gradients of x, weight and bias)
 *   gelu_fwd_bwd        ms of y = cn_gelu(x [32, 64, 512], exact) and the backward of sum(y * r)
 *   gelu_tanh_fwd_bwd   the same with the tanh approximation
 *
 * f32 leaves on the autodiff device over --device; the loss's own mul and sum are in the figure
 * (the twin does the same). The median of --reps runs after one warm-up.
 * Usage: bench_norm [--device D] [--reps N]. */
#include "bench_common.h"

/* One forward and backward of sum(f(x) * r); which: 0 layer_norm, 1 gelu, 2 gelu tanh. */
static void step(int which, cn_tensor *x, cn_tensor *w, cn_tensor *b, cn_tensor *r) {
    cn_scope_begin();
    const int64_t *shape = cn_shape(x) + 2;
    cn_tensor *y = which == 0 ? cn_layer_norm(x, shape, 1, w, b, 1e-5)
                              : cn_gelu(x, which == 2 ? CN_GELU_TANH : CN_GELU_ERF);
    cn_grads *g = cn_backward(bench_check(cn_sum(cn_mul(bench_check(y, "forward"), r)), "loss"));
    if (!g) bench_check(NULL, "backward");
    cn_grads_free(g);
    cn_scope_end();
}

int main(int argc, char **argv) {
    bench_options o;
    bench_parse(argc, argv, 30, &o);
    static const char *const figures[] = {"layer_norm_fwd_bwd", "gelu_fwd_bwd",
                                          "gelu_tanh_fwd_bwd"};
    bench_resolve_device(&o, figures, 3);
    cn_device ad = cn_autodiff(o.device);
    cn_generator gen = cn_generator_new(3);
    double *t = malloc(sizeof *t * (size_t)o.reps);
    for (int which = 0; which < 3; which++) {
        int64_t shape[3] = {32, 64, which == 0 ? 128 : 512};
        cn_tensor *x0 = bench_check(cn_rand_normal(&gen, shape, 3, 0, 1, CN_F32, o.device), "x");
        cn_tensor *r = bench_check(cn_rand_normal(&gen, shape, 3, 0, 1, CN_F32, o.device), "r");
        cn_tensor *x = bench_check(cn_require_grad(cn_from_inner(x0, ad)), "leaf");
        cn_tensor *w = NULL, *b = NULL;
        if (which == 0) {
            w = bench_check(cn_require_grad(cn_ones(shape + 2, 1, CN_F32, ad)), "weight");
            b = bench_check(cn_require_grad(cn_zeros(shape + 2, 1, CN_F32, ad)), "bias");
        }
        step(which, x, w, b, r);
        bench_sync(o.device);
        for (int k = 0; k < o.reps; k++) {
            double t0 = bench_now();
            step(which, x, w, b, r);
            bench_sync(o.device);
            t[k] = bench_now() - t0;
        }
        bench_print(figures[which], 1e3 * bench_median(t, o.reps), "ms");
        cn_release(w);
        cn_release(b);
        cn_release(x);
        cn_release(x0);
        cn_release(r);
    }
    free(t);
    return 0;
}
