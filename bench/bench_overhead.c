/* Per-op overhead: the cost of routing one tiny op, without and with autodiff tracking, and of a
 * backward through a chain of 100 tiny ops. Twin: bench/torch/overhead.py.
 *
 *   add4           ns per cn_add of two 4-element f32 tensors (result released each time)
 *   add4_autodiff  the same with both inputs requiring grad (each add records a node)
 *   backward_chain100  us per cn_backward of sum(chain of 100 alternating add/mul with x), x [4]
 *
 * Each figure is the median of --reps timed loops. Usage: bench_overhead [--device D] [--reps N]
 * [--iters N] [--only add|tracked|backward] (iters: per timed loop of add4; the chain runs
 * iters / 200 backwards); or bench_overhead ITERS [add|tracked|backward], one figure. */
#include "bench_common.h"

/* ns per cn_add of two 4-element f32 tensors on dev */
static double add_ns(cn_device dev, int track, int iters, int reps) {
    float v[4] = {1, 2, 3, 4};
    int64_t n = 4;
    cn_tensor *a = bench_check(cn_from_data(v, &n, 1, CN_F32, dev), "from_data");
    cn_tensor *b = bench_check(cn_from_data(v, &n, 1, CN_F32, dev), "from_data");
    if (track) {
        cn_require_grad(a);
        cn_require_grad(b);
    }
    bench_check(cn_add(a, b), "add"); /* warm-up, and a check that the op works */
    double *t = malloc(sizeof *t * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double t0 = bench_now();
        for (int i = 0; i < iters; i++)
            cn_release(cn_add(a, b));
        bench_sync(dev);
        t[r] = (bench_now() - t0) / iters * 1e9;
    }
    cn_release(a);
    cn_release(b);
    double m = bench_median(t, reps);
    free(t);
    return m;
}

/* us per backward of sum(y), y = a chain of 100 small elementwise ops on a 4-element tensor */
static double chain_backward_us(cn_device dev, int iters, int reps) {
    float v[4] = {0.1f, 0.2f, 0.3f, 0.4f};
    int64_t n = 4;
    cn_tensor *x = cn_require_grad(cn_from_data(v, &n, 1, CN_F32, cn_autodiff(dev)));
    bench_check(x, "from_data");
    double *t = malloc(sizeof *t * (size_t)reps);
    for (int r = 0; r < reps; r++) {
        double total = 0;
        for (int i = 0; i < iters; i++) {
            cn_scope_begin();
            cn_tensor *y = x;
            for (int k = 0; k < 100; k++)
                y = (k % 2) ? cn_mul(y, x) : cn_add(y, x);
            cn_tensor *loss = bench_check(cn_sum(y), "chain");
            bench_sync(dev);
            double t0 = bench_now();
            cn_grads *g = cn_backward(loss);
            bench_sync(dev);
            total += bench_now() - t0;
            if (!g) bench_check(NULL, "backward");
            cn_grads_free(g);
            cn_scope_end();
        }
        t[r] = total / iters * 1e6;
    }
    cn_release(x);
    double m = bench_median(t, reps);
    free(t);
    return m;
}

/* Which figures to run: all, or one ("add", "tracked" or "backward"; also by figure name). */
static int wanted(const char *only, const char *short_name, const char *figure) {
    return !only || !strcmp(only, short_name) || !strcmp(only, figure);
}

int main(int argc, char **argv) {
    /* Ours: --iters N, --only WHAT, and the older positional form `[iters] [add|tracked|backward]`
     * (one figure, e.g. for an instruction count under callgrind, where backward runs `iters`
     * backwards). The rest goes to bench_parse. */
    int iters = 200000, chain_iters = -1;
    const char *only = NULL;
    char **rest = malloc(sizeof *rest * (size_t)(argc + 1));
    int nrest = 0;
    rest[nrest++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--iters") && i + 1 < argc) {
            iters = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--only") && i + 1 < argc) {
            only = argv[++i];
        } else if (i == 1 && argv[i][0] >= '0' && argv[i][0] <= '9') {
            iters = atoi(argv[i]);
        } else if (i == 2 && argv[1][0] >= '0' && argv[1][0] <= '9' && argv[i][0] != '-') {
            only = argv[i];
            chain_iters = iters;
        } else {
            rest[nrest++] = argv[i];
        }
    }
    rest[nrest] = NULL;
    if (iters < 1 || (chain_iters < 0 && iters < 200)) {
        fprintf(stderr, "bench_overhead: --iters must be at least 200\n");
        return 2;
    }
    if (chain_iters < 0) chain_iters = iters / 200;
    bench_options o;
    bench_parse(nrest, rest, 7, &o);
    free(rest);
    static const char *const figures[] = {"add4", "add4_autodiff", "backward_chain100"};
    bench_resolve_device(&o, figures, 3);
    if (wanted(only, "add", "add4")) bench_print("add4", add_ns(o.device, 0, iters, o.reps), "ns");
    if (wanted(only, "tracked", "add4_autodiff"))
        bench_print("add4_autodiff", add_ns(cn_autodiff(o.device), 1, iters, o.reps), "ns");
    if (wanted(only, "backward", "backward_chain100"))
        bench_print("backward_chain100", chain_backward_us(o.device, chain_iters, o.reps), "us");
    return 0;
}
