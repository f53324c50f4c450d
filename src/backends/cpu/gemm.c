/* GEMM for the CPU kernels (matmul, conv2d and its gradients): one thread per library call, a
 * large product split into blocks of rows (or columns) of c that the pool's threads take.
 *
 * f32 is oneDNN's sgemm, whose JIT picks the widest kernel the CPU has at run time (Debian's
 * OpenBLAS 0.3.21 falls back to its generic SSE3 kernel on CPUs newer than it: 5x slower on an
 * AVX-512 Xeon, docs/benchmarks.md); f64, and an f32 call oneDNN refuses (out of memory for its
 * packing buffers), is OpenBLAS's.
 *
 * A library's own threads would be a second pool beside the backend's (parallel.c): each spins
 * for a while after its work and takes the cores the other needs, and both wait for threads that
 * a loaded machine has not scheduled. So parallel.c sets OpenBLAS to one thread, oneDNN (OpenMP)
 * runs each call with one thread, and this file does the splitting. */
#include <cblas.h>
#include <dnnl.h>
#include <limits.h>
#include <omp.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"

/* Products with fewer multiply-adds run as one call (~30 us at the rate one core reaches). */
#define GEMM_PARALLEL_MACS (1 << 21)
/* Rows or columns per block are a multiple of this (the kernels' register tile). */
#define GEMM_BLOCK 16

typedef struct gemm_job {
    cn_dtype dt;
    int ta, tb, split_rows;
    int64_t m, n, k, lda, ldb, ldc;
    const char *a, *b;
    char *c;
    double beta;
    size_t es;
} gemm_job;

/* oneDNN's sgemm on the calling thread only: its OpenMP team size is this thread's OpenMP
 * thread count, set to 1 for the call and put back (the caller's own OpenMP use is unchanged). */
static int onednn_sgemm(const gemm_job *j, int64_t m, int64_t n, const float *a, const float *b,
                        float *c) {
    int saved = omp_get_max_threads();
    if (saved != 1) omp_set_num_threads(1);
    dnnl_status_t st = dnnl_sgemm(j->ta ? 'T' : 'N', j->tb ? 'T' : 'N', m, n, j->k, 1.0f, a, j->lda,
                                  b, j->ldb, (float)j->beta, c, j->ldc);
    if (saved != 1) omp_set_num_threads(saved);
    return st == dnnl_success;
}

static void gemm_call(const gemm_job *j, int64_t m, int64_t n, const char *a, const char *b,
                      char *c) {
    CBLAS_TRANSPOSE ta = j->ta ? CblasTrans : CblasNoTrans;
    CBLAS_TRANSPOSE tb = j->tb ? CblasTrans : CblasNoTrans;
    if (j->dt == CN_F32 && onednn_sgemm(j, m, n, (const float *)a, (const float *)b, (float *)c))
        return;
    if (j->dt == CN_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)j->k, 1.0f, (const float *)a,
                    (int)j->lda, (const float *)b, (int)j->ldb, (float)j->beta, (float *)c,
                    (int)j->ldc);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)j->k, 1.0, (const double *)a,
                    (int)j->lda, (const double *)b, (int)j->ldb, j->beta, (double *)c, (int)j->ldc);
}

/* Blocks [begin, end) of GEMM_BLOCK rows (or columns) of c. */
static void gemm_blocks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const gemm_job *j = ctx;
    int64_t dim = j->split_rows ? j->m : j->n;
    int64_t lo = begin * GEMM_BLOCK, hi = end * GEMM_BLOCK < dim ? end * GEMM_BLOCK : dim;
    if (lo >= hi) return;
    size_t es = j->es;
    if (j->split_rows) { /* rows lo..hi of a (a column block when a is stored transposed) */
        const char *a = j->a + (size_t)(j->ta ? lo : lo * j->lda) * es;
        gemm_call(j, hi - lo, j->n, a, j->b, j->c + (size_t)(lo * j->ldc) * es);
    } else { /* columns lo..hi of b (a row block when b is stored transposed) */
        const char *b = j->b + (size_t)(j->tb ? lo * j->ldb : lo) * es;
        gemm_call(j, j->m, hi - lo, j->a, b, j->c + (size_t)lo * es);
    }
}

cn_status cn_cpu_gemm(cn_dtype dtype, int ta, int tb, int64_t m, int64_t n, int64_t k,
                      const void *a, int64_t lda, const void *b, int64_t ldb, double beta,
                      void *c, int64_t ldc) {
    int empty;
    if (cn__gemm_check("cpu_gemm", dtype, 0, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, &empty) !=
        CN_OK)
        return cn_last_status();
    if (empty) return CN_OK;
    gemm_job j = {.dt = dtype, .ta = ta != 0, .tb = tb != 0, .m = m, .n = n, .k = k, .lda = lda,
                  .ldb = ldb, .ldc = ldc, .a = a, .b = b, .c = c, .beta = beta,
                  .es = dtype == CN_F32 ? sizeof(float) : sizeof(double)};
    cpu_threads(); /* the pool's start sets OpenBLAS to one thread */
    gemm_call(&j, m, n, j.a, j.b, j.c);
    return CN_OK;
}

void cpu_gemm(cn_dtype dt, int ta, int tb, int64_t m, int64_t n, int64_t k, const void *a,
              int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
    gemm_job j = {.dt = dt,
                  .ta = ta,
                  .tb = tb,
                  .m = m,
                  .n = n,
                  .k = k,
                  .lda = lda,
                  .ldb = ldb,
                  .ldc = ldc,
                  .a = a,
                  .b = b,
                  .c = c,
                  .beta = beta,
                  .es = dt == CN_F32 ? sizeof(float) : sizeof(double)};
    int threads = cpu_threads(); /* first use starts the pool, which sets OpenBLAS to 1 thread */
    if (m == 0 || n == 0) return;
    double macs = (double)m * (double)n * (double)k;
    j.split_rows = m >= n;
    int64_t blocks = ((j.split_rows ? m : n) + GEMM_BLOCK - 1) / GEMM_BLOCK;
    /* One block per thread: thinner blocks (two per thread gave 256 x 1024 for a 1024^3
     * product) fall to oneDNN's no-copy kernel, which reads b in place with its full row stride,
     * and two threads doing that at once ran at half the rate of one block each on a Zen 3
     * (82 against 182 GFLOP/s, docs/benchmarks.md) */
    int64_t chunks = macs < GEMM_PARALLEL_MACS ? 1 : (int64_t)threads;
    if (chunks <= 1 || blocks < 2) {
        gemm_call(&j, m, n, j.a, j.b, j.c);
        return;
    }
    cpu_parallel_affine(blocks, chunks, gemm_blocks, &j);
}
