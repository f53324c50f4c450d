/* CPU matrix multiply: batched GEMM through OpenBLAS (oneDNN for f32, gemm.c); i32 and i64 by a
 * loop of our own.
 *
 * a: [B.., M, K] @ b: [B.., K, N] -> out: [B.., M, N] (out contiguous; batch dims of a and b may
 * have stride 0). BLAS reads a matrix in place when it is row-major (unit column stride) or
 * column-major (unit row stride, passed transposed) with a valid leading dimension; any other
 * layout is packed into a dense scratch matrix first. */
#include <cblas.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/backend_common.h"
#include "core/alloc.h"

/* A product with at most this many multiply-adds is one GEMM call (cpu_gemm splits bigger ones
 * over the threads), so a batch of them runs side by side instead. */
#define BLAS_SERIAL_MNK 2097152.0

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
    cpu_gemm(dt, ta == CblasTrans, tb == CblasTrans, m, n, k, a, lda, b, ldb, 0.0, c, n);
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

/* Per-thread scratch sizes are rounded to cache lines so that threads never share one. */
static size_t round_line(size_t n) { return (n + 63) & ~(size_t)63; }

/* ---- the kernel ----------------------------------------------------------------------------- */

/* One product, its operands classified. */
typedef struct matmul_job {
    const cn_view *a, *b, *c;
    cn_dtype dt;
    size_t es;
    int nd;
    int64_t M, K, N;
    batch_geom g;
    mat_plan pa, pb;
} matmul_job;

static const char *matrix_at(const cn_view *v, int64_t offset, size_t es) {
    return (const char *)v->data + offset * (int64_t)es;
}

static void pack_a(const matmul_job *j, void *dst, const char *src) {
    pack_matrix(dst, src, j->M, j->K, j->a->strides[j->nd - 2], j->a->strides[j->nd - 1], j->dt);
}

static void pack_b(const matmul_job *j, void *dst, const char *src) {
    pack_matrix(dst, src, j->K, j->N, j->b->strides[j->nd - 2], j->b->strides[j->nd - 1], j->dt);
}

/* b shared by the whole batch (x @ w in a linear layer): one [count*M, K] @ [K, N] GEMM, reading
 * a in place when its rows fold together, else packing it whole. */
static cn_status matmul_folded(const matmul_job *j) {
    const batch_geom *g = &j->g;
    int64_t a_rs;
    int a_folds = fold_rows(g, j->a, &a_rs) && a_rs >= j->K && a_rs <= INT_MAX &&
                  (j->K == 1 || j->a->strides[j->nd - 1] == 1);
    size_t a_bytes = a_folds ? 0 : round_line((size_t)(g->count * j->M * j->K) * j->es);
    size_t b_bytes = j->pb.direct ? 0 : (size_t)(j->K * j->N) * j->es;
    char *scratch = NULL;
    if (a_bytes + b_bytes) {
        scratch = cn__malloc("matmul", a_bytes + b_bytes);
        if (!scratch) return CN_ERR_OUT_OF_MEMORY;
    }
    const void *a = j->a->data, *b = j->b->data;
    if (!a_folds) {
        for (int64_t i = 0; i < g->count; i++) {
            int64_t oa, ob;
            batch_offsets(g, i, &oa, &ob);
            pack_a(j, scratch + (size_t)(i * j->M * j->K) * j->es, matrix_at(j->a, oa, j->es));
        }
        a = scratch;
        a_rs = j->K;
    }
    if (!j->pb.direct) {
        pack_b(j, scratch + a_bytes, j->b->data);
        b = scratch + a_bytes;
    }
    gemm(j->dt, CblasNoTrans, j->pb.trans, g->count * j->M, j->N, j->K, a, a_rs, b, j->pb.ld,
         j->c->data);
    cn__free(scratch);
    return CN_OK;
}

/* Batch elements [begin, end) of matmul_per_element, with chunk `chunk`'s own scratch. */
typedef struct batch_job {
    const matmul_job *j;
    char *scratch;
    size_t shared, per_chunk, a_bytes, b_bytes;
    const char *a_shared, *b_shared;
} batch_job;

static void batch_elements(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const batch_job *bj = ctx;
    const matmul_job *j = bj->j;
    for (int64_t i = begin; i < end; i++) {
        char *mine = bj->scratch ? bj->scratch + bj->shared + bj->per_chunk * (size_t)chunk : NULL;
        int64_t oa, ob;
        batch_offsets(&j->g, i, &oa, &ob);
        const char *a = matrix_at(j->a, oa, j->es), *b = matrix_at(j->b, ob, j->es);
        if (bj->a_shared) {
            a = bj->a_shared;
        } else if (bj->a_bytes) {
            pack_a(j, mine, a);
            a = mine;
            mine += bj->a_bytes;
        }
        if (bj->b_shared) {
            b = bj->b_shared;
        } else if (bj->b_bytes) {
            pack_b(j, mine, b);
            b = mine;
        }
        gemm(j->dt, j->pa.trans, j->pb.trans, j->M, j->N, j->K, a, j->pa.ld, b, j->pb.ld,
             (char *)j->c->data + (size_t)(i * j->M * j->N) * j->es);
    }
}

/* One GEMM per batch element. Small ones run side by side, a range of elements per chunk; big
 * ones one after another, each split over the threads by cpu_gemm. An operand that needs packing
 * is packed once when the whole batch shares it, else per element into the chunk's own buffer. */
static cn_status matmul_per_element(const matmul_job *j) {
    const batch_geom *g = &j->g;
    double mnk = (double)j->M * (double)j->N * (double)j->K;
    int64_t chunks = 1;
    if (g->count > 1 && mnk <= BLAS_SERIAL_MNK && mnk * (double)g->count >= MATMUL_PARALLEL_MACS)
        chunks = g->count < 4 * cpu_threads() ? g->count : 4 * cpu_threads();
    int a_fixed = strides_all_zero(g, g->sa), b_fixed = strides_all_zero(g, g->sb);
    batch_job bj = {.j = j};
    bj.a_bytes = j->pa.direct ? 0 : round_line((size_t)(j->M * j->K) * j->es);
    bj.b_bytes = j->pb.direct ? 0 : round_line((size_t)(j->K * j->N) * j->es);
    bj.shared = (a_fixed ? bj.a_bytes : 0) + (b_fixed ? bj.b_bytes : 0);
    bj.per_chunk = (a_fixed ? 0 : bj.a_bytes) + (b_fixed ? 0 : bj.b_bytes);
    if (bj.shared + bj.per_chunk) {
        bj.scratch = cn__malloc("matmul", bj.shared + bj.per_chunk * (size_t)chunks);
        if (!bj.scratch) return CN_ERR_OUT_OF_MEMORY;
    }
    if (a_fixed && bj.a_bytes) {
        pack_a(j, bj.scratch, j->a->data);
        bj.a_shared = bj.scratch;
    }
    if (b_fixed && bj.b_bytes) {
        char *dst = bj.scratch + (bj.a_shared ? bj.a_bytes : 0);
        pack_b(j, dst, j->b->data);
        bj.b_shared = dst;
    }
    cpu_parallel(g->count, chunks, batch_elements, &bj);
    cn__free(bj.scratch);
    return CN_OK;
}

/* ---- integers -------------------------------------------------------------------------------- *
 * i32 and i64 (burn's int_matmul; torch.matmul on integer tensors): no BLAS has them, so a loop
 * over (batch, row) tasks, each row of c accumulated along k with unit steps over b's rows when
 * b is row-major. Products and sums wrap (two's complement, computed unsigned: no C overflow). */

#define DEFINE_IMATMUL(T, U, name)                                                             \
    static void name(const matmul_job *j, int64_t t) {                                         \
        int64_t nd = j->nd, bi = t / j->M, m = t % j->M, oa, ob;                               \
        batch_offsets(&j->g, bi, &oa, &ob);                                                    \
        const T *a = (const T *)j->a->data + oa + m * j->a->strides[nd - 2];                   \
        const T *b = (const T *)j->b->data + ob;                                               \
        T *c = (T *)j->c->data + (bi * j->M + m) * j->N;                                       \
        int64_t ak = j->a->strides[nd - 1], bk = j->b->strides[nd - 2];                        \
        int64_t bn = j->b->strides[nd - 1];                                                    \
        for (int64_t n = 0; n < j->N; n++) c[n] = 0;                                           \
        for (int64_t k = 0; k < j->K; k++) {                                                   \
            U av = (U)a[k * ak];                                                               \
            const T *brow = b + k * bk;                                                        \
            if (bn == 1)                                                                       \
                for (int64_t n = 0; n < j->N; n++) c[n] = (T)((U)c[n] + av * (U)brow[n]);      \
            else                                                                               \
                for (int64_t n = 0; n < j->N; n++)                                             \
                    c[n] = (T)((U)c[n] + av * (U)brow[n * bn]);                                \
        }                                                                                      \
    }
DEFINE_IMATMUL(int32_t, uint32_t, imatmul_row_i32)
DEFINE_IMATMUL(int64_t, uint64_t, imatmul_row_i64)
#undef DEFINE_IMATMUL

static void imatmul_rows(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const matmul_job *j = ctx;
    for (int64_t t = begin; t < end; t++) {
        if (j->dt == CN_I32)
            imatmul_row_i32(j, t);
        else
            imatmul_row_i64(j, t);
    }
}

cn_status cpu_matmul(const cn_kernel_args *args) {
    const cn_view *av = &args->in[0], *bv = &args->in[1], *cv = &args->out[0];
    cn_dtype dt = cv->dtype;
    int nd = cv->ndim;
    int is_int = dt == CN_I32 || dt == CN_I64;
    if (dt != CN_F32 && dt != CN_F64 && !is_int) return cn__kernel_dtype_error("cpu", args->op, dt);
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

    matmul_job j = {.a = av, .b = bv, .c = cv, .dt = dt, .es = cn_dtype_size(dt), .nd = nd,
                    .M = av->shape[nd - 2], .K = av->shape[nd - 1], .N = bv->shape[nd - 1]};
    batch_init(&j.g, av, bv);
    if (j.g.count == 0 || j.M == 0 || j.N == 0) return CN_OK;
    if (j.K == 0) { /* an empty sum */
        memset(cv->data, 0, (size_t)(j.g.count * j.M * j.N) * j.es);
        return CN_OK;
    }
    if (is_int) {
        int64_t rows = j.g.count * j.M;
        double macs = (double)rows * (double)j.N * (double)j.K;
        int64_t chunks = macs < MATMUL_PARALLEL_MACS ? 1 : cpu_chunks(rows, 1);
        cpu_parallel(rows, chunks, imatmul_rows, &j);
        return CN_OK;
    }
    if (j.M > INT_MAX || j.N > INT_MAX || j.K > INT_MAX)
        return cn_set_error(CN_ERR_BACKEND, "matmul",
                            "a matrix dim (M=%lld, K=%lld, N=%lld) exceeds BLAS's int range; "
                            "split the product into smaller blocks",
                            (long long)j.M, (long long)j.K, (long long)j.N);
    j.pa = plan_matrix(j.M, j.K, av->strides[nd - 2], av->strides[nd - 1]);
    j.pb = plan_matrix(j.K, j.N, bv->strides[nd - 2], bv->strides[nd - 1]);

    if (j.g.count > 1 && strides_all_zero(&j.g, j.g.sb) && j.g.count * j.M <= INT_MAX)
        return matmul_folded(&j);
    return matmul_per_element(&j);
}
