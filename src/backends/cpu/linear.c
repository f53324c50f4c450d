/* CPU linear: y = x w^T + b (torch.nn.functional.linear, PyTorch's addmm) in one kernel,
 * linear_gelu: y = gelu(x w^T + b), with gelu' of the same values into d when asked, and
 * linear_add: y = x w^T + b + r (r [M, N], any strides: a residual stream).
 *
 * x [M, K], w [N, K], b [N] (optional), any strides; y [M, N] (and d) contiguous. Blocks of rows
 * go to the pool's threads; each block is one single-threaded GEMM (cn_cpu_gemm) and then gets
 * the bias (and gelu) while its rows are still in cache, instead of the separate passes over the
 * whole output (another allocation, read and write each) that matmul + add (+ gelu) cost. x and
 * w are read in place when either of their dims has unit stride (the GEMM's transpose flags and
 * leading dimensions), else packed once into a dense copy. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math") /* vectorises gelu's selects, as in elementwise.c */
#endif

#include <limits.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "backends/cpu/gelu_math.h"
#include "cinder/ops.h" /* cn_gelu_approx */
#include "core/alloc.h"
#include "core/backend_common.h"

/* Rows per block: a multiple of the GEMM kernels' register tile, and about 64 KB of output at
 * N = 256 in f32, so that a block's output is still in L2 when its bias is added. This is also
 * the unit of the small-M test (fewer blocks than threads: the product split over columns). */
#define LINEAR_ROWS 64
/* Large M takes blocks of up to LINEAR_MAX_ROWS rows while each thread still gets two blocks
 * and a block's output stays within LINEAR_BLOCK_BYTES (in L2 for the bias): oneDNN's sgemm
 * runs a [64, N] x [N, K] block at 10-25% below the rate of a [256, N] one at the GPT's sizes
 * (N, K in 92..512), its packing of w repeated for every block. */
#define LINEAR_MAX_ROWS    256
#define LINEAR_BLOCK_BYTES ((int64_t)512 << 10)

/* How the GEMM reads one [rows, cols] operand: in place (trans = 0: row-major, ld = row stride;
 * trans = 1: column-major, ld = column stride) or from a dense copy (packed != NULL). */
typedef struct lin_operand {
    const char *data;
    int trans;
    int64_t ld;
    char *packed;
} lin_operand;

static cn_status plan(const char *op, const cn_view *v, lin_operand *o) {
    int64_t rows = v->shape[0], cols = v->shape[1], rs = v->strides[0], cs = v->strides[1];
    size_t es = cn_dtype_size(v->dtype);
    memset(o, 0, sizeof *o);
    if ((cols <= 1 || cs == 1) && rs >= (cols > 1 ? cols : 1) && rs <= INT_MAX) {
        o->data = v->data, o->ld = rows > 1 ? rs : (cols > 1 ? cols : 1);
        return CN_OK;
    }
    if ((rows <= 1 || rs == 1) && cs >= (rows > 1 ? rows : 1) && cs <= INT_MAX) {
        o->data = v->data, o->trans = 1, o->ld = cols > 1 ? cs : (rows > 1 ? rows : 1);
        return CN_OK;
    }
    o->packed = cn__malloc(op, (size_t)(rows * cols) * es + 1);
    if (!o->packed) return CN_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++)
            memcpy(o->packed + (size_t)(r * cols + c) * es,
                   (const char *)v->data + (size_t)(r * rs + c * cs) * es, es);
    o->data = o->packed, o->ld = cols > 1 ? cols : 1;
    return CN_OK;
}

typedef struct linear_job {
    cn_dtype dt;
    int64_t M, N, K;
    lin_operand x, w;
    const cn_view *b;
    const cn_view *r; /* linear_add: r [M, N], added after the bias */
    char *y;
    int64_t rows;  /* rows per block */
    int no_k;      /* K = 0: y is the bias alone (zeroed first), no GEMM */
    int gemm_done; /* the whole product is in y already: the blocks add the bias only */
    int gelu;      /* linear_gelu: gelu after the bias, */
    int tanh_form; /* its tanh form, */
    char *d;       /* and gelu' into d [M, N] (NULL: not asked) */
} linear_job;

/* The exact form over n values (gelu_run_f32), in blocks of GELU_SMALL_BLOCK: a block all in
 * the range of normal_cdf_f32's small branch (gelu_out_of_small) through that branch alone (the
 * values of a GPT's c_fc mostly are: 3 times fewer operations), else through both; the same bits
 * either way. Compiled for AVX-512 and AVX2 as well, as gelu_run_f32. */
#define GELU_SMALL_BLOCK 64

/* gelu_small_with_grad_f32 of y[0, n) in place, gelu' into d, on AVX-512, 16 lanes at a time
 * (returns how many it did: the caller's loop does the rest): the same operations in the same
 * order (no FMA but exp's own), with exp512 in place of exp_f32 (the same bits, cpu_math.h:
 * vscalefps scales by 2^k where the compiled exp_f32 builds two powers of two and multiplies
 * twice). */
#if CPU_EXP512
__attribute__((target("avx512f"))) static int64_t gelu_small_grad512(float *restrict y,
                                                                     float *restrict d,
                                                                     int64_t n) {
    const __m512 zero = _mm512_setzero_ps(), half = _mm512_set1_ps(0.5f);
    int64_t k = 0;
    for (; k + 16 <= n; k += 16) {
        __m512 x = _mm512_loadu_ps(y + k);
        __m512 z = _mm512_mul_ps(x, _mm512_set1_ps(0.707106781186547524f));
        __mmask16 neg = _mm512_cmp_ps_mask(z, zero, _CMP_LT_OQ);
        __m512 t = _mm512_mask_sub_ps(z, neg, zero, z); /* z < 0 ? -z : z */
        __m512 e = _mm512_mul_ps(half, erf_small512(t));
        __m512 phi = _mm512_mask_blend_ps(neg, _mm512_add_ps(half, e), _mm512_sub_ps(half, e));
        __m512 g = exp512(_mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-0.5f), x), x));
        __m512 dx = _mm512_mul_ps(_mm512_mul_ps(x, _mm512_set1_ps((float)GELU_INV_SQRT_2PI)), g);
        _mm512_storeu_ps(d + k, _mm512_add_ps(phi, dx));
        _mm512_storeu_ps(y + k, _mm512_mul_ps(x, phi));
    }
    return k;
}
#else
static int64_t gelu_small_grad512(float *restrict y, float *restrict d, int64_t n) {
    (void)y, (void)d, (void)n;
    return 0;
}
#endif

CPU_CLONES_EXP static void gelu_erf_run_f32(float *restrict y, float *restrict d, int64_t n) {
    const int v512 = cpu_has_avx512();
    for (int64_t i = 0; i < n; i += GELU_SMALL_BLOCK) {
        int64_t len = n - i < GELU_SMALL_BLOCK ? n - i : GELU_SMALL_BLOCK;
        float *yi = y + i, *di = d ? d + i : NULL;
        int small = gelu_out_of_small(yi, len) == 0;
        if (small && di)
            for (int64_t k = v512 ? gelu_small_grad512(yi, di, len) : 0; k < len; k++) {
                float dk;
                yi[k] = gelu_small_with_grad_f32(yi[k], &dk);
                di[k] = dk;
            }
        else if (small)
            for (int64_t k = 0; k < len; k++) yi[k] = gelu_small_with_grad_f32(yi[k], NULL);
        else if (di)
            for (int64_t k = 0; k < len; k++) {
                float dk;
                yi[k] = gelu_with_grad_f32(yi[k], 0, &dk);
                di[k] = dk;
            }
        else
            for (int64_t k = 0; k < len; k++) yi[k] = gelu_f32(yi[k], 0);
    }
}

/* y[i] = gelu(y[i]) over n values, and d[i] = gelu'(y[i]) (of the value before) when d is not
 * NULL; compiled for AVX-512 and AVX2 as well, as gelu's own loops (elementwise.c). */
CPU_CLONES_EXP static void gelu_run_f32(float *restrict y, float *restrict d, int64_t n,
                                        int tanh_form) {
    if (d && tanh_form)
        for (int64_t i = 0; i < n; i++) {
            float di;
            y[i] = gelu_with_grad_f32(y[i], 1, &di);
            d[i] = di;
        }
    else if (tanh_form)
        for (int64_t i = 0; i < n; i++) y[i] = gelu_f32(y[i], 1);
    else
        gelu_erf_run_f32(y, d, n);
}

static void gelu_run_f64(double *restrict y, double *restrict d, int64_t n, int tanh_form) {
    for (int64_t i = 0; i < n; i++) {
        if (d) d[i] = gelu_grad_f64(y[i], tanh_form);
        y[i] = gelu_f64(y[i], tanh_form);
    }
}

/* y[r, c] += b[c * bs] over rows [rows, N] of y, compiled for AVX-512 and AVX2 as well (the
 * SSE2 loop of the baseline build ran at a quarter of the width on the blocks in L2). */
CPU_CLONES_512 static void bias_rows_f32(float *restrict y, const float *restrict b, int64_t bs,
                                         int64_t rows, int64_t N) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * N;
        if (bs == 1)
            for (int64_t c = 0; c < N; c++) row[c] += b[c];
        else
            for (int64_t c = 0; c < N; c++) row[c] += b[c * bs];
    }
}

/* y[r, c] = (y[r, c] + b[c * bs]) + x[r * rs + c * cs] over rows [rows, N] of y (b NULL: no
 * bias): linear_add's bias and residual in one pass over the block, the values of the bias pass
 * and then add; compiled for AVX-512 and AVX2 as well. */
CPU_CLONES_512 static void bias_res_rows_f32(float *restrict y, const float *restrict b,
                                             int64_t bs, const float *restrict x, int64_t rs,
                                             int64_t cs, int64_t rows, int64_t N) {
    for (int64_t r = 0; r < rows; r++) {
        float *row = y + r * N;
        const float *xr = x + r * rs;
        if (b && bs == 1 && cs == 1)
            for (int64_t c = 0; c < N; c++) row[c] = (row[c] + b[c]) + xr[c];
        else if (!b && cs == 1)
            for (int64_t c = 0; c < N; c++) row[c] += xr[c];
        else
            for (int64_t c = 0; c < N; c++)
                row[c] = (b ? row[c] + b[c * bs] : row[c]) + xr[c * cs];
    }
}

static void bias_res_rows_f64(double *restrict y, const double *restrict b, int64_t bs,
                              const double *restrict x, int64_t rs, int64_t cs, int64_t rows,
                              int64_t N) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < N; c++) {
            double v = y[r * N + c];
            if (b) v += b[c * bs];
            y[r * N + c] = v + x[r * rs + c * cs];
        }
}

/* A [rows, K] operand stored as x (trans 0: row r at r * ld; 1: column r at r) from row r0. */
static const char *rows_from(const lin_operand *o, int64_t r0, size_t es) {
    return o->data + (size_t)(o->trans ? r0 : r0 * o->ld) * es;
}

static void linear_blocks(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const linear_job *j = ctx;
    size_t es = cn_dtype_size(j->dt);
    for (int64_t blk = begin; blk < end; blk++) {
        int64_t r0 = blk * j->rows, rows = j->M - r0 < j->rows ? j->M - r0 : j->rows;
        char *y = j->y + (size_t)(r0 * j->N) * es;
        /* y rows = x rows [rows, K] @ w^T: w [N, K] read as b^T (tb = 1) when row-major */
        if (j->no_k && !j->gemm_done)
            memset(y, 0, (size_t)(rows * j->N) * es);
        else if (!j->gemm_done)
            cn_cpu_gemm(j->dt, j->x.trans, !j->w.trans, rows, j->N, j->K, rows_from(&j->x, r0, es),
                        j->x.ld, j->w.data, j->w.ld, 0.0, y, j->N);
        if (j->r) { /* linear_add */
            int64_t bs = j->b ? j->b->strides[0] : 0;
            int64_t rs = j->r->strides[0], cs = j->r->strides[1];
            size_t off = (size_t)(r0 * rs) * es;
            if (j->dt == CN_F32)
                bias_res_rows_f32((float *)y, j->b ? (const float *)j->b->data : NULL, bs,
                                  (const float *)((const char *)j->r->data + off), rs, cs, rows,
                                  j->N);
            else
                bias_res_rows_f64((double *)y, j->b ? (const double *)j->b->data : NULL, bs,
                                  (const double *)((const char *)j->r->data + off), rs, cs, rows,
                                  j->N);
        } else if (j->b) {
            int64_t bs = j->b->strides[0];
            if (j->dt == CN_F32) {
                bias_rows_f32((float *)y, (const float *)j->b->data, bs, rows, j->N);
            } else {
                const double *b = (const double *)j->b->data;
                for (int64_t r = 0; r < rows; r++) {
                    double *row = (double *)y + r * j->N;
                    for (int64_t c = 0; c < j->N; c++)
                        row[c] += b[c * bs];
                }
            }
        }
        if (!j->gelu) continue;
        char *d = j->d ? j->d + (size_t)(r0 * j->N) * es : NULL;
        if (j->dt == CN_F32)
            gelu_run_f32((float *)y, (float *)d, rows * j->N, j->tanh_form);
        else
            gelu_run_f64((double *)y, (double *)d, rows * j->N, j->tanh_form);
    }
}

/* linear (gelu 0), linear_gelu (gelu 1: ints = approx, want_d; out[1] = d when want_d) and
 * linear_add (residual 1: in = x, w, r[, b]) */
static cn_status linear_run(const cn_kernel_args *a, int gelu, int residual) {
    const char *op = gelu ? "linear_gelu" : residual ? "linear_add" : "linear";
    const cn_view *xv = &a->in[0], *wv = &a->in[1], *yv = &a->out[0];
    cn_dtype dt = yv->dtype; /* f32 or f64, one for all (the router's and dtypes[op]) */
    if (dt != CN_F32 && dt != CN_F64) return cn__kernel_dtype_error("cpu", a->op, dt);
    int64_t M = xv->shape[0], K = xv->shape[1], N = wv->shape[0];
    if (M == 0 || N == 0) return CN_OK;
    if (M > INT_MAX || N > INT_MAX || K > INT_MAX)
        return cn_set_error(CN_ERR_OVERFLOW, op,
                            "[%lld, %lld] x [%lld, %lld]^T exceeds the int sizes of the GEMM "
                            "libraries; split the rows",
                            (long long)M, (long long)K, (long long)N, (long long)K);
    linear_job j = {.dt = dt,
                    .M = M,
                    .N = N,
                    .K = K,
                    .b = a->n_in > 2 + residual ? &a->in[2 + residual] : NULL,
                    .r = residual ? &a->in[2] : NULL,
                    .rows = LINEAR_ROWS,
                    .y = (char *)yv->data,
                    .no_k = K == 0,
                    .gelu = gelu,
                    .tanh_form = gelu && a->ints[0] == CN_GELU_TANH,
                    .d = gelu && a->ints[1] && a->n_out > 1 ? (char *)a->out[1].data : NULL};
    cn_status s = plan(op, xv, &j.x);
    if (s == CN_OK) s = plan(op, wv, &j.w);
    if (s == CN_OK) {
        int64_t blocks = (M + LINEAR_ROWS - 1) / LINEAR_ROWS;
        if (blocks < cpu_threads() && K > 0) {
            /* too few rows for every thread (a batch of one: a matrix-vector product): the
             * product split over the columns by cpu_gemm, then the bias on this thread */
            cpu_gemm(dt, j.x.trans, !j.w.trans, M, N, K, j.x.data, j.x.ld, j.w.data, j.w.ld, 0.0,
                     j.y, N);
            j.gemm_done = 1;
            linear_blocks(&j, 0, 0, blocks);
            cn__free(j.x.packed);
            cn__free(j.w.packed);
            return CN_OK;
        }
        int64_t threads = cpu_threads(), es = (int64_t)cn_dtype_size(dt);
        while (j.rows < LINEAR_MAX_ROWS && M / (2 * j.rows) >= 2 * threads &&
               2 * j.rows * N * es <= LINEAR_BLOCK_BYTES)
            j.rows *= 2;
        blocks = (M + j.rows - 1) / j.rows;
        /* about one block's multiply-adds per grain of the pool's split */
        int64_t chunks =
            cpu_chunks(blocks * j.rows * N * (K > 0 ? K : 1) / 64, CPU_PARALLEL_GRAIN);
        if (chunks > blocks) chunks = blocks;
        if (chunks < 1) chunks = 1;
        cpu_parallel(blocks, chunks, linear_blocks, &j);
    }
    cn__free(j.x.packed);
    cn__free(j.w.packed);
    return s;
}

cn_status cpu_linear(const cn_kernel_args *a) { return linear_run(a, 0, 0); }

cn_status cpu_linear_gelu(const cn_kernel_args *a) { return linear_run(a, 1, 0); }

cn_status cpu_linear_add(const cn_kernel_args *a) { return linear_run(a, 0, 1); }
