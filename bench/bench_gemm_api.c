/* oneDNN's two f32 GEMM interfaces and OpenBLAS's on the shapes cinder's models call, one
 * thread: dnnl_sgemm (what src/backends/cpu/gemm.c calls), a matmul primitive (brgemm kernels,
 * created once per shape, its memory objects made once and run as often as sgemm) and
 * cblas_sgemm (OpenBLAS set to one thread, as cinder's pool sets it; its kernel is the one it
 * picks for this CPU: the header line names it, OPENBLAS_CORETYPE overrides it), alternating
 * call by call, the minimum time of --reps calls each. Not part of scripts/bench.sh: it answers
 * whether moving gemm.c to another interface or library would pay (docs/benchmarks.md, issue 17).
 *
 * Shapes (ta tb m n k, rows of each operand dense): the GPT's (bench_gpt: its linears' blocks of
 * rows, their weight gradients' column blocks, attention's 64 x 64 tiles), the MLP's (batch 128,
 * 784-256-128-10) and two of the CNN's convolution GEMMs. beta 1 where the caller accumulates.
 *
 *   bench_gemm_api [--reps N]   prints per shape: GFLOP/s of each, the primitive's kernel */
#include "bench_common.h" /* first: it sets _POSIX_C_SOURCE */

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

typedef struct shape {
    char ta, tb;
    int64_t m, n, k;
    float beta;
    const char *what;
} shape;

static const shape shapes[] = {
    {'N', 'T', 256, 128, 128, 0, "gpt q/k/v, attn c_proj (256-row block)"},
    {'N', 'T', 256, 512, 128, 0, "gpt mlp c_fc"},
    {'N', 'T', 256, 128, 512, 0, "gpt mlp c_proj"},
    {'N', 'T', 256, 93, 128, 0, "gpt lm_head"},
    {'N', 'N', 512, 128, 128, 0, "gpt dx of q/k/v, c_proj"},
    {'N', 'N', 512, 128, 512, 0, "gpt dx of mlp c_fc"},
    {'N', 'N', 512, 512, 128, 0, "gpt dx of mlp c_proj"},
    {'T', 'N', 32, 128, 2048, 0, "gpt dw [128, 128] (column block)"},
    {'T', 'N', 128, 128, 2048, 0, "gpt dw of mlp (column block)"},
    {'N', 'T', 64, 64, 32, 0, "gpt attention q k^T tile"},
    {'N', 'N', 64, 32, 64, 1, "gpt attention p v tile"},
    {'T', 'N', 64, 32, 64, 1, "gpt attention dv, dk tile"},
    {'N', 'T', 128, 256, 784, 0, "mlp fc1"},
    {'N', 'N', 128, 784, 256, 0, "mlp dx of fc1"},
    {'T', 'N', 256, 784, 128, 0, "mlp dw of fc1"},
    {'N', 'T', 128, 128, 256, 0, "mlp fc2"},
    {'T', 'N', 128, 256, 128, 0, "mlp dw of fc2"},
    {'N', 'N', 32, 784, 9, 0, "cnn conv1 (one image)"},
    {'N', 'N', 64, 196, 288, 0, "cnn conv2 (one image)"},
};

#define CHECK_DNNL(call)                                                                       \
    do {                                                                                       \
        dnnl_status_t st_ = (call);                                                            \
        if (st_ != dnnl_success) {                                                             \
            fprintf(stderr, "bench_gemm_api: %s failed (%d)\n", #call, (int)st_);             \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

static void fill(float *p, size_t n, unsigned seed) {
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

int main(int argc, char **argv) {
    int reps = 200;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
            return 2;
        }
    }
    if (reps < 1) {
        fprintf(stderr, "%s: --reps must be at least 1\n", argv[0]);
        return 2;
    }
    omp_set_num_threads(1); /* both on this thread, as gemm.c runs each call */
    dnnl_engine_t eng;
    dnnl_stream_t stream;
    CHECK_DNNL(dnnl_engine_create(&eng, dnnl_cpu, 0));
    CHECK_DNNL(dnnl_stream_create(&stream, eng, dnnl_stream_default_flags));
    openblas_set_num_threads(1);
    printf("OpenBLAS: %s\n", openblas_get_config());
    printf("%-40s %5s %5s %5s %4s %8s %8s %8s  %s\n", "shape", "m", "n", "k", "beta", "sgemm",
           "matmul", "openblas", "primitive's kernel (GFLOP/s, one thread, min of reps)");
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const shape *sh = &shapes[s];
        int64_t m = sh->m, n = sh->n, k = sh->k;
        int64_t lda = sh->ta == 'T' ? m : k, ldb = sh->tb == 'T' ? k : n, ldc = n;
        size_t na = (size_t)(m * k), nb = (size_t)(k * n), nc = (size_t)(m * n);
        float *a = malloc(na * sizeof *a), *b = malloc(nb * sizeof *b);
        float *c1 = malloc(nc * sizeof *c1), *c2 = malloc(nc * sizeof *c2);
        float *c3 = malloc(nc * sizeof *c3);
        if (!a || !b || !c1 || !c2 || !c3) {
            fprintf(stderr, "bench_gemm_api: out of memory\n");
            return 1;
        }
        fill(a, na, 1), fill(b, nb, 2), fill(c1, nc, 3);
        memcpy(c2, c1, nc * sizeof *c2);
        memcpy(c3, c1, nc * sizeof *c3);
        /* the primitive: src [m, k], weights [k, n], dst [m, n] with the strides of the
         * transposes; beta as a sum post-op */
        dnnl_memory_desc_t amd, bmd, cmd;
        const dnnl_dims_t ad = {m, k}, bd = {k, n}, cd = {m, n};
        const dnnl_dims_t as = {sh->ta == 'T' ? 1 : lda, sh->ta == 'T' ? lda : 1};
        const dnnl_dims_t bs = {sh->tb == 'T' ? 1 : ldb, sh->tb == 'T' ? ldb : 1};
        const dnnl_dims_t cs = {ldc, 1};
        CHECK_DNNL(dnnl_memory_desc_init_by_strides(&amd, 2, ad, dnnl_f32, as));
        CHECK_DNNL(dnnl_memory_desc_init_by_strides(&bmd, 2, bd, dnnl_f32, bs));
        CHECK_DNNL(dnnl_memory_desc_init_by_strides(&cmd, 2, cd, dnnl_f32, cs));
        dnnl_matmul_desc_t md;
        CHECK_DNNL(dnnl_matmul_desc_init(&md, &amd, &bmd, NULL, &cmd));
        dnnl_primitive_attr_t attr;
        CHECK_DNNL(dnnl_primitive_attr_create(&attr));
        if (sh->beta != 0) {
            dnnl_post_ops_t po;
            CHECK_DNNL(dnnl_post_ops_create(&po));
            CHECK_DNNL(dnnl_post_ops_append_sum(po, sh->beta));
            CHECK_DNNL(dnnl_primitive_attr_set_post_ops(attr, po));
            dnnl_post_ops_destroy(po);
        }
        dnnl_primitive_desc_t pd;
        CHECK_DNNL(dnnl_primitive_desc_create(&pd, &md, attr, eng, NULL));
        const char *impl = "?";
        CHECK_DNNL(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl));
        dnnl_primitive_t prim;
        CHECK_DNNL(dnnl_primitive_create(&prim, pd));
        const dnnl_memory_desc_t *smd = dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md,
                                                                     0);
        size_t scratch_bytes = smd ? dnnl_memory_desc_get_size(smd) : 0;
        void *scratch = scratch_bytes ? malloc(scratch_bytes) : NULL;
        dnnl_memory_t am, bm, cm, sm = NULL;
        CHECK_DNNL(dnnl_memory_create(&am, &amd, eng, a));
        CHECK_DNNL(dnnl_memory_create(&bm, &bmd, eng, b));
        CHECK_DNNL(dnnl_memory_create(&cm, &cmd, eng, c2));
        if (scratch_bytes) CHECK_DNNL(dnnl_memory_create(&sm, smd, eng, scratch));
        const dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, am},
                                         {DNNL_ARG_WEIGHTS, bm},
                                         {DNNL_ARG_DST, cm},
                                         {DNNL_ARG_SCRATCHPAD, sm}};
        double t_sgemm = 1e30, t_matmul = 1e30, t_blas = 1e30;
        for (int r = 0; r < reps; r++) {
            double t = bench_now();
            CHECK_DNNL(dnnl_sgemm(sh->ta, sh->tb, m, n, k, 1.0f, a, lda, b, ldb, sh->beta, c1,
                                  ldc));
            t = bench_now() - t;
            if (t < t_sgemm) t_sgemm = t;
            t = bench_now();
            CHECK_DNNL(dnnl_primitive_execute(prim, stream, scratch_bytes ? 4 : 3, args));
            CHECK_DNNL(dnnl_stream_wait(stream));
            t = bench_now() - t;
            if (t < t_matmul) t_matmul = t;
            t = bench_now();
            cblas_sgemm(CblasRowMajor, sh->ta == 'T' ? CblasTrans : CblasNoTrans,
                        sh->tb == 'T' ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, 1.0f, a,
                        (int)lda, b, (int)ldb, sh->beta, c3, (int)ldc);
            t = bench_now() - t;
            if (t < t_blas) t_blas = t;
        }
        double flop = 2.0 * (double)m * (double)n * (double)k;
        printf("%-40s %5lld %5lld %5lld %4g %8.1f %8.1f %8.1f  %s\n", sh->what, (long long)m,
               (long long)n, (long long)k, sh->beta, flop / t_sgemm * 1e-9,
               flop / t_matmul * 1e-9, flop / t_blas * 1e-9, impl);
        dnnl_memory_destroy(am), dnnl_memory_destroy(bm), dnnl_memory_destroy(cm);
        if (sm) dnnl_memory_destroy(sm);
        dnnl_primitive_destroy(prim);
        dnnl_primitive_desc_destroy(pd);
        dnnl_primitive_attr_destroy(attr);
        free(scratch), free(a), free(b), free(c1), free(c2), free(c3);
    }
    dnnl_stream_destroy(stream);
    dnnl_engine_destroy(eng);
    return 0;
}
