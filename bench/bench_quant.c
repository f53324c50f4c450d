/* The quantized linear of issue 19 (quant.h: cn_quant_linear) against cinder's f32 linear, at
 * 4096 x 4096 (weights [N, K] = [4096, 4096]). Twin: bench/torch/quant.py (PyTorch's dynamically
 * quantized Linear, fbgemm).
 *
 *   quant_f32_b1, quant_f32_b64        ms of cn_linear(x [B, 4096], w f32) at batch 1 and 64
 *   quant_q8_b1, quant_q8_b64          ms of cn_quant_linear with the weight in CN_Q8_BLOCK
 *   quant_q4_b1, quant_q4_b64          the same in CN_Q4_BLOCK
 *   quant_q8_b1_gbs, quant_q4_b1_gbs   GB/s at batch 1: the bytes of packed weights and scales
 *                                      read, over the time (scripts/bench.sh sets them against
 *                                      the memory bandwidth that elementwise measures)
 * Medians of --reps calls after one warm-up. Usage: bench_quant [--device D] [--reps N]. */
#include "bench_common.h"

#include "cinder/quant.h"

#define DIM 4096

static double time_calls(const bench_options *o, cn_tensor *x, cn_tensor *w, int quantized,
                         double *t) {
    for (int k = -1; k < o->reps; k++) {
        cn_scope_begin();
        double t0 = bench_now();
        cn_tensor *y = quantized ? cn_quant_linear(x, w, NULL) : cn_linear(x, w, NULL);
        bench_check(y, quantized ? "quant_linear" : "linear");
        bench_sync(o->device);
        if (k >= 0) t[k] = bench_now() - t0;
        cn_scope_end();
    }
    return bench_median(t, o->reps);
}

int main(int argc, char **argv) {
    bench_options o;
    bench_parse(argc, argv, 20, &o);
    static const char *const figures[] = {"quant_f32_b1", "quant_f32_b64", "quant_q8_b1",
                                          "quant_q8_b64", "quant_q4_b1",   "quant_q4_b64"};
    bench_resolve_device(&o, figures, 6);
    cn_generator gen = cn_generator_new(19);
    const int64_t ws[2] = {DIM, DIM};
    cn_tensor *w = bench_check(cn_rand_normal(&gen, ws, 2, 0, 0.02, CN_F32, o.device), "w");
    cn_tensor *q[2] = {bench_check(cn_quantize(w, CN_Q8_BLOCK), "q8"),
                       bench_check(cn_quantize(w, CN_Q4_BLOCK), "q4")};
    /* bytes of packed weights and f16 scales per block of 32: 34 (q8), 18 (q4) */
    const double bytes[2] = {DIM * (DIM / 32.0) * 34, DIM * (DIM / 32.0) * 18};
    double *t = malloc(sizeof *t * (size_t)o.reps);
    const int64_t batches[2] = {1, 64};
    for (int bi = 0; bi < 2; bi++) {
        const int64_t xs[2] = {batches[bi], DIM};
        cn_tensor *x = bench_check(cn_rand_normal(&gen, xs, 2, 0, 1, CN_F32, o.device), "x");
        bench_print(figures[bi], 1e3 * time_calls(&o, x, w, 0, t), "ms");
        for (int s = 0; s < 2; s++) {
            double sec = time_calls(&o, x, q[s], 1, t);
            bench_print(figures[2 + 2 * s + bi], 1e3 * sec, "ms");
            if (bi == 0) {
                char name[32];
                snprintf(name, sizeof name, "quant_%s_b1_gbs", s ? "q4" : "q8");
                bench_print(name, bytes[s] / sec / 1e9, "GB/s");
            }
        }
        cn_release(x);
    }
    free(t);
    cn_release(q[0]);
    cn_release(q[1]);
    cn_release(w);
    return 0;
}
