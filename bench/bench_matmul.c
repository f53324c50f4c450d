/* Matrix multiply, 1024 x 1024 x 1024 f32. Twin: bench/torch/matmul.py.
 *
 *   matmul_1024         GFLOP/s of c = cn_matmul(a, b) (2 n^3 flops; a new c each time)
 *   sgemm_1024          GFLOP/s of a direct dnnl_sgemm (oneDNN, the library cinder's f32 GEMMs
 *                       call) on the same sizes with oneDNN's own OpenMP threads (CPU only):
 *                       what the library reaches here by itself. cinder runs it on one thread
 *                       per call and splits GEMMs over its own pool, so this program sets
 *                       OpenMP's thread count for that call only
 *
 * cinder's runs come first, then the library's (whose OpenMP threads keep spinning after a call,
 * which would slow a cinder call run right after); medians of --reps runs after a warm-up.
 * Usage: bench_matmul [--sgemm-only] [--device D] [--reps N]; --sgemm-only times sgemm_1024 alone
 * on the CPU (scripts/bench.sh's sample of the GEMM rate around each epoch, with no cinder call
 * before it); bench_matmul --info prints the oneDNN version and
 * the instruction set its kernels use here, and OpenBLAS's build and kernel (f64), and nothing
 * else. */
#include "bench_common.h" /* first: it sets _POSIX_C_SOURCE */

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>
#include <unistd.h>

#define DIM 1024

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--info") == 0) {
        const dnnl_version_t *v = dnnl_version();
        /* the effective ISA is a mask: each level holds the bits of those below it */
        static const struct {
            unsigned mask;
            const char *name;
        } isa[] = {{dnnl_cpu_isa_avx512_core_amx, "avx512+amx"},
                   {dnnl_cpu_isa_avx512_core, "avx512"},
                   {dnnl_cpu_isa_avx2, "avx2"},
                   {dnnl_cpu_isa_avx, "avx"},
                   {dnnl_cpu_isa_sse41, "sse4.1"}};
        unsigned e = (unsigned)dnnl_get_effective_cpu_isa();
        const char *isa_name = "unknown";
        for (int i = 4; i >= 0; i--)
            if ((e & isa[i].mask) == isa[i].mask) isa_name = isa[i].name;
        printf("oneDNN %d.%d.%d (%s); OpenBLAS %s, kernel %s\n", v->major, v->minor, v->patch,
               isa_name, openblas_get_config(), openblas_get_corename());
        return 0;
    }
    const int sgemm_only = argc > 1 && strcmp(argv[1], "--sgemm-only") == 0;
    if (sgemm_only) { /* the other options follow it */
        argv[1] = argv[0];
        argv++;
        argc--;
    }
    bench_options o;
    bench_parse(argc, argv, 9, &o);
    static const char *const figures[] = {"matmul_1024"};
    bench_resolve_device(&o, figures, 1);
    const int n = DIM;
    int64_t shape[2] = {n, n};
    size_t bytes = sizeof(float) * (size_t)n * (size_t)n;
    cn_generator gen = cn_generator_new(42);
    cn_tensor *a = bench_check(cn_rand_uniform(&gen, shape, 2, -1, 1, CN_F32, o.device), "rand");
    cn_tensor *b = bench_check(cn_rand_uniform(&gen, shape, 2, -1, 1, CN_F32, o.device), "rand");
    int host = o.device.backend == CN_BACKEND_CPU;
    if (sgemm_only && !host) {
        fprintf(stderr, "bench_matmul: --sgemm-only times oneDNN on the CPU; drop --device\n");
        return 2;
    }
    float *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
    if (!ha || !hb || !hc || cn_read(a, ha, bytes) != CN_OK || cn_read(b, hb, bytes) != CN_OK) {
        fprintf(stderr, "bench_matmul: setup failed: %s\n", cn_last_error());
        return 1;
    }
    memset(hc, 0, bytes);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (getenv("OMP_NUM_THREADS")) cores = atol(getenv("OMP_NUM_THREADS"));

    double *t_cn = malloc(sizeof(double) * (size_t)o.reps);
    double *t_blas = malloc(sizeof(double) * (size_t)o.reps);
    /* cinder's runs first, then OpenBLAS's: OpenBLAS's threads spin for a while after each of
     * its calls, and interleaved they took a core from the cinder call that followed */
    for (int r = -1; r < o.reps && !sgemm_only; r++) { /* r = -1: warm-up */
        double t0 = bench_now();
        cn_tensor *c = cn_matmul(a, b);
        bench_sync(o.device);
        double t1 = bench_now();
        cn_release(bench_check(c, "matmul"));
        if (r >= 0) t_cn[r] = t1 - t0;
    }
    if (host) {
        int saved = omp_get_max_threads();
        omp_set_num_threads((int)cores);
        for (int r = -1; r < o.reps; r++) {
            double t2 = bench_now();
            dnnl_sgemm('N', 'N', n, n, n, 1.0f, ha, n, hb, n, 0.0f, hc, n);
            double t3 = bench_now();
            if (r >= 0) t_blas[r] = t3 - t2;
        }
        omp_set_num_threads(saved);
    }
    double gflop = 2.0 * n * (double)n * n * 1e-9;
    if (!sgemm_only) bench_print("matmul_1024", gflop / bench_median(t_cn, o.reps), "GFLOP/s");
    if (host) bench_print("sgemm_1024", gflop / bench_median(t_blas, o.reps), "GFLOP/s");
    free(t_cn);
    free(t_blas);
    free(ha);
    free(hb);
    free(hc);
    cn_release(a);
    cn_release(b);
    return 0;
}
