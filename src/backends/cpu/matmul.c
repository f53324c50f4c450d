/* CPU matrix multiply: batched GEMM through OpenBLAS.
 *
 * a: [B.., M, K] @ b: [B.., K, N] -> out: [B.., M, N] (out contiguous; batch dims of a and b may
 * have stride 0). BLAS reads a matrix in place when it is row-major (unit column stride) or
 * column-major (unit row stride, passed transposed) with a valid leading dimension; any other
 * layout is packed into a dense scratch matrix first. */
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"

/* OpenBLAS runs a GEMM with M*N*K at or below this on the calling thread alone (its
 * SMP_THRESHOLD_MIN * GEMM_MULTITHREAD_THRESHOLD), so such calls may run side by side from our
 * own threads without the two thread pools fighting. */
#define BLAS_SERIAL_MNK 262144.0

/* Below this many multiply-adds in total a batch runs on one thread. */
#define MATMUL_PARALLEL_MACS 65536.0

/* ---- one matrix operand --------------------------------------------------------------------- */

/* How BLAS reads one [rows, cols] matrix of a view. */
typedef struct mat_plan {
    int direct;                 /* 1: BLAS reads the view; 0: pack it first */
    CBLAS_TRANSPOSE trans;      /* CblasTrans when the view is column-major */
    int64_t ld;                 /* leading dimension for BLAS (of the packed copy if packed) */
} mat_plan;

static mat_plan plan_matrix(int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
    mat_plan p = {1, CblasNoTrans, 0};
    int64_t min_ld_row = cols > 1 ? cols : 1, min_ld_col = rows > 1 ? rows : 1;
    /* Row-major: unit steps along a row, and rows that do not overlap. A size-1 dim's stride
     * never matters. */
    if ((cols <= 1 || cs == 1) && (rows <= 1 || rs >= min_ld_row)) {
        p.ld = rows > 1 ? rs : min_ld_row;
        if (p.ld <= INT_MAX) return p;
    }
    if ((rows <= 1 || rs == 1) && (cols <= 1 || cs >= min_ld_col)) {
        p.trans = CblasTrans;
        p.ld = cols > 1 ? cs : min_ld_col;
        if (p.ld <= INT_MAX) return p;
    }
    p.direct = 0;
    p.trans = CblasNoTrans;
    p.ld = min_ld_row;
    return p;
}

/* Copies a strided [rows, cols] matrix into dense row-major dst. */
static void pack_matrix(void *dst, const void *src, int64_t rows, int64_t cols, int64_t rs,
                        int64_t cs, cn_dtype dt) {
#define PACK_LOOP(T)                                                                           \
    do {                                                                                       \
        T *d = (T *)dst;                                                                       \
        const T *s = (const T *)src;                                                           \
        for (int64_t i = 0; i < rows; i++) {                                                   \
            const T *row = s + i * rs;                                                         \
            if (cs == 1) {                                                                     \
                memcpy(d + i * cols, row, (size_t)cols * sizeof(T));                           \
            } else {                                                                           \
                for (int64_t j = 0; j < cols; j++) d[i * cols + j] = row[j * cs];              \
            }                                                                                  \
        }                                                                                      \
    } while (0)
    if (dt == CN_F32)
        PACK_LOOP(float);
    else
        PACK_LOOP(double);
#undef PACK_LOOP
}

/* c[m, n] = a[m, k] @ b[k, n], row-major, c dense with ldc = n. */
static void gemm(cn_dtype dt, CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t m, int64_t n,
                 int64_t k, const void *a, int64_t lda, const void *b, int64_t ldb, void *c) {
    if (dt == CN_F32)
        cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0f, (const float *)a,
                    (int)lda, (const float *)b, (int)ldb, 0.0f, (float *)c, (int)n);
    else
        cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, 1.0, (const double *)a,
                    (int)lda, (const double *)b, (int)ldb, 0.0, (double *)c, (int)n);
}

/* ---- the batch ------------------------------------------------------------------------------ */

typedef struct batch_geom {
    int ndim;                   /* batch dims left after dropping size-1 ones */
    int64_t shape[CN_MAX_DIMS];
    int64_t sa[CN_MAX_DIMS], sb[CN_MAX_DIMS]; /* element strides of a and b */
    int64_t count;
} batch_geom;

static void batch_init(batch_geom *g, const cn_view *a, const cn_view *b) {
    g->ndim = 0;
    g->count = 1;
    for (int d = 0; d < a->ndim - 2; d++) {
        int64_t n = a->shape[d];
        g->count *= n;
        if (n == 1) continue;
        g->shape[g->ndim] = n;
        g->sa[g->ndim] = a->strides[d];
        g->sb[g->ndim] = b->strides[d];
        g->ndim++;
    }
}

/* Element offsets of batch element i (row-major over the batch dims) in a and b. */
static void batch_offsets(const batch_geom *g, int64_t i, int64_t *oa, int64_t *ob) {
    int64_t a = 0, b = 0;
    for (int d = g->ndim - 1; d >= 0; d--) {
        int64_t idx = i % g->shape[d];
        i /= g->shape[d];
        a += idx * g->sa[d];
        b += idx * g->sb[d];
    }
    *oa = a;
    *ob = b;
}

static int strides_all_zero(const batch_geom *g, const int64_t *s) {
    for (int d = 0; d < g->ndim; d++)
        if (s[d] != 0) return 0;
    return 1;
}

/* When a's batch dims and its M dim step as one dim of stride *rs (so the batch of [M, K]
 * matrices is one [count*M, K] matrix), writes *rs and returns 1. */
static int fold_rows(const batch_geom *g, const cn_view *a, int64_t *rs) {
    int nd = a->ndim;
    /* The folded dim so far, innermost first; while its size is 1 its stride is still free. */
    int64_t size = a->shape[nd - 2], stride = a->strides[nd - 2];
    for (int d = g->ndim - 1; d >= 0; d--) {
        if (size == 1)
            stride = g->sa[d];
        else if (g->sa[d] != stride * size)
            return 0;
        size *= g->shape[d];
    }
    *rs = size > 1 ? stride : a->shape[nd - 1];
    return 1;
}

cn_status cpu_matmul(const cn_kernel_args *args) {
    const cn_view *av = &args->in[0], *bv = &args->in[1], *cv = &args->out[0];
    cn_dtype dt = cv->dtype;
    int nd = cv->ndim;
    size_t es = cn_dtype_size(dt);
    if (dt != CN_F32 && dt != CN_F64)
        return cn_set_error(CN_ERR_DTYPE, "matmul", "the CPU kernel takes f32 or f64, not %s",
                            cn_dtype_name(dt));
    /* The router checked the shapes; a wrong call must still not index out of range. */
    int ok = nd >= 2 && av->ndim == nd && bv->ndim == nd && av->dtype == dt && bv->dtype == dt;
    for (int d = 0; ok && d < nd; d++) {
        int64_t want_a = d == nd - 1 ? bv->shape[nd - 2] : cv->shape[d];
        int64_t want_b = d == nd - 2 ? av->shape[nd - 1] : cv->shape[d];
        ok = av->shape[d] == want_a && bv->shape[d] == want_b;
    }
    if (!ok)
        return cn_set_error(CN_ERR_SHAPE, "matmul",
                            "the kernel takes [.., M, K] @ [.., K, N] -> [.., M, N] with equal "
                            "ndim (>= 2), batch dims and dtypes; the router prepares these");
    int64_t M = av->shape[nd - 2], K = av->shape[nd - 1], N = bv->shape[nd - 1];

    batch_geom g;
    batch_init(&g, av, bv);
    if (g.count == 0 || M == 0 || N == 0) return CN_OK;
    if (K == 0) { /* an empty sum */
        memset(cv->data, 0, (size_t)(g.count * M * N) * es);
        return CN_OK;
    }
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return cn_set_error(CN_ERR_BACKEND, "matmul",
                            "a matrix dim (M=%lld, K=%lld, N=%lld) exceeds BLAS's int range; "
                            "split the product into smaller blocks",
                            (long long)M, (long long)K, (long long)N);

    mat_plan pa = plan_matrix(M, K, av->strides[nd - 2], av->strides[nd - 1]);
    mat_plan pb = plan_matrix(K, N, bv->strides[nd - 2], bv->strides[nd - 1]);
    int b_fixed = strides_all_zero(&g, g.sb), a_fixed = strides_all_zero(&g, g.sa);

    /* b shared by the whole batch (x @ w in a linear layer): one [count*M, K] @ [K, N] GEMM,
     * reading a in place when its rows fold together, else packing it whole. */
    int64_t a_rs;
    if (b_fixed && g.count > 1 && g.count * M <= INT_MAX) {
        int a_folds = fold_rows(&g, av, &a_rs) && a_rs >= K && a_rs <= INT_MAX &&
                      (K == 1 || av->strides[nd - 1] == 1);
        size_t a_bytes = a_folds ? 0 : (size_t)(g.count * M * K) * es;
        size_t b_bytes = pb.direct ? 0 : (size_t)(K * N) * es;
        char *scratch = NULL;
        if (a_bytes + b_bytes) {
            scratch = cn__malloc("matmul", a_bytes + b_bytes);
            if (!scratch) return CN_ERR_OUT_OF_MEMORY;
        }
        const void *a = av->data, *b = bv->data;
        if (!a_folds) {
            for (int64_t i = 0; i < g.count; i++) {
                int64_t oa, ob;
                batch_offsets(&g, i, &oa, &ob);
                pack_matrix(scratch + (size_t)(i * M * K) * es,
                            (const char *)av->data + oa * (int64_t)es, M, K,
                            av->strides[nd - 2], av->strides[nd - 1], dt);
            }
            a = scratch;
            a_rs = K;
        }
        if (!pb.direct) {
            pack_matrix(scratch + a_bytes, bv->data, K, N, bv->strides[nd - 2],
                        bv->strides[nd - 1], dt);
            b = scratch + a_bytes;
        }
        gemm(dt, CblasNoTrans, pb.trans, g.count * M, N, K, a, a_rs, b, pb.ld, cv->data);
        cn__free(scratch);
        return CN_OK;
    }

    /* One GEMM per batch element. Small ones run side by side on our threads (OpenBLAS keeps
     * each on its caller); big ones run one after another on OpenBLAS's threads. */
    double mnk = (double)M * (double)N * (double)K;
    int nthreads = 1;
#ifdef _OPENMP
    if (g.count > 1 && mnk <= BLAS_SERIAL_MNK && mnk * (double)g.count >= MATMUL_PARALLEL_MACS) {
        nthreads = omp_get_max_threads();
        if (nthreads > g.count) nthreads = (int)g.count;
    }
#endif
    /* Scratch: a matrix the whole batch shares is packed once; others get a buffer per thread. */
    size_t a_bytes = pa.direct ? 0 : (size_t)(M * K) * es;
    size_t b_bytes = pb.direct ? 0 : (size_t)(K * N) * es;
    size_t shared = (a_fixed ? a_bytes : 0) + (b_fixed ? b_bytes : 0);
    size_t per_thread = (a_fixed ? 0 : a_bytes) + (b_fixed ? 0 : b_bytes);
    char *scratch = NULL;
    if (shared + per_thread) {
        scratch = cn__malloc("matmul", shared + per_thread * (size_t)nthreads);
        if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    }
    const char *a_shared = NULL, *b_shared = NULL;
    if (a_fixed && !pa.direct) {
        pack_matrix(scratch, av->data, M, K, av->strides[nd - 2], av->strides[nd - 1], dt);
        a_shared = scratch;
    }
    if (b_fixed && !pb.direct) {
        pack_matrix(scratch + (a_shared ? a_bytes : 0), bv->data, K, N, bv->strides[nd - 2],
                    bv->strides[nd - 1], dt);
        b_shared = scratch + (a_shared ? a_bytes : 0);
    }

#pragma omp parallel for num_threads(nthreads) schedule(dynamic) if (nthreads > 1)
    for (int64_t i = 0; i < g.count; i++) {
#ifdef _OPENMP
        int t = omp_get_thread_num();
#else
        int t = 0;
#endif
        char *mine = scratch ? scratch + shared + per_thread * (size_t)t : NULL;
        int64_t oa, ob;
        batch_offsets(&g, i, &oa, &ob);
        const char *a = (const char *)av->data + oa * (int64_t)es;
        const char *b = (const char *)bv->data + ob * (int64_t)es;
        if (a_shared) {
            a = a_shared;
        } else if (!pa.direct) {
            pack_matrix(mine, a, M, K, av->strides[nd - 2], av->strides[nd - 1], dt);
            a = mine;
            mine += a_bytes;
        }
        if (b_shared) {
            b = b_shared;
        } else if (!pb.direct) {
            pack_matrix(mine, b, K, N, bv->strides[nd - 2], bv->strides[nd - 1], dt);
            b = mine;
        }
        gemm(dt, pa.trans, pb.trans, M, N, K, a, pa.ld, b, pb.ld,
             (char *)cv->data + (size_t)(i * M * N) * es);
    }
    cn__free(scratch);
    return CN_OK;
}
