/* CPU kernels for the scans and sorts along one dim (cumsum, cumprod and its backward, cummax,
 * cummin, sort) and for any / all.
 *
 * Geometry. The input is any strided view; the outputs are contiguous, of its shape (any / all:
 * size 1 at dim). A "row" is the n elements along dim at one position of the other dims: it
 * starts at the input offset of that position and steps by the input's stride at dim, and in the
 * output by the product of the sizes after dim. Rows are independent, so the pool's threads take
 * whole rows; each row runs in order, so a result never depends on the number of threads.
 *
 * Semantics, as PyTorch's CPU kernels:
 * - cumsum and cumprod accumulate f32 in double (at::acc_type), ints in 64 bits wrapping and
 *   narrowed to the dtype. cumsum's reverse form (ints[1] = 1: the sum of in[i..n-1]) is the
 *   gradient of cumsum.
 * - cumprod_backward: for y = cumprod(x),
 *       dL/dx_i = sum over j >= i of g_j prod_{k <= j, k != i} x_k = P_{i-1} S_i,
 *   with P the exclusive prefix product and S_i = g_i + x_{i+1} S_{i+1} (a reverse scan): no
 *   division, so zeros in x give the exact product of the others.
 * - Rows of a dense input along a dim before the last are taken as tiles of adjacent columns by
 *   cumsum and cumprod (the same sums in the same order, vectorised).
 * - cummax / cummin take a new extreme when x >= (<=) the running one, so the index of equal
 *   values is the last one; a NaN always takes over (the running value stays NaN and later NaNs
 *   move the index), as torch.cummax.
 * - sort is a stable merge sort of the row's (value, index) pairs: equal values keep their order
 *   (both directions), and NaN sorts as the largest value (last ascending, first descending).
 * - any / all: != 0 is true (NaN too). */
#include <stdint.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "core/alloc.h"
#include "core/backend_common.h"

#define SCAN_GRAIN 8192 /* elements per chunk of rows worth a thread */

/* ---- geometry ---------------------------------------------------------------------------- */

typedef struct row_geom {
    int64_t n;      /* the length along dim */
    int64_t rows;   /* positions of the other dims */
    int64_t inner;  /* product of the sizes after dim: the output's stride at dim */
    int64_t xs;     /* the input's stride at dim */
    int ndim, dim;
    const int64_t *shape, *strides; /* the input's */
} row_geom;

static void geom_init(row_geom *g, const cn_view *x, int dim) {
    g->ndim = x->ndim;
    g->dim = dim;
    g->shape = x->shape;
    g->strides = x->strides;
    g->n = x->ndim ? x->shape[dim] : 1;
    g->xs = x->ndim ? x->strides[dim] : 0;
    g->inner = 1;
    for (int d = dim + 1; d < x->ndim; d++) g->inner *= x->shape[d];
    g->rows = 1;
    for (int d = 0; d < x->ndim; d++)
        if (d != dim) g->rows *= x->shape[d];
}

/* The input offset (elements) of row r's first element; its output offset in *out (for an
 * output whose size at dim is out_n). */
static int64_t row_offsets(const row_geom *g, int64_t r, int64_t out_n, int64_t *out) {
    *out = r / g->inner * out_n * g->inner + r % g->inner;
    int64_t off = 0;
    for (int d = g->ndim - 1; d >= 0 && r > 0; d--) {
        if (d == g->dim) continue;
        off += r % g->shape[d] * g->strides[d];
        r /= g->shape[d];
    }
    return off;
}

typedef struct scan_job {
    const cn_kernel_args *a;
    row_geom g;
    char *scratch; /* sort: 2 n pairs per chunk */
} scan_job;

static void run_rows(scan_job *j, cpu_range_fn fn, int64_t chunks) {
    cpu_parallel(j->g.rows, chunks, fn, j);
}

static int64_t row_chunks(const row_geom *g) {
    int64_t c = cpu_chunks(g->rows * g->n, SCAN_GRAIN);
    return c > g->rows ? g->rows : c;
}

/* ---- cumsum, cumprod --------------------------------------------------------------------- */

/* ACC: the accumulator (double for floats, uint64_t for ints: wrapping is defined). */
#define DEF_CUM(T, SUF, ACC)                                                                       \
    static void cum_row_##SUF(const T *x, int64_t xs, T *y, int64_t ys, int64_t n, int prod,     \
                              int reverse) {                                                       \
        ACC acc = prod ? (ACC)1 : (ACC)0;                                                          \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t i = reverse ? n - 1 - k : k;                                                   \
            if (prod)                                                                              \
                acc *= (ACC)x[i * xs];                                                             \
            else                                                                                   \
                acc += (ACC)x[i * xs];                                                             \
            y[i * ys] = (T)acc;                                                                    \
        }                                                                                          \
    }
/* Columns: w adjacent rows at once (x dense, so the rows' elements at one position along dim are
 * adjacent in x and in y, and one step along dim is `inner` elements in both): the loop over the
 * w accumulators vectorises, and memory is read in sequence. Same sums, in the same order, as
 * the row form. */
#define DEF_CUM_COLS(T, SUF, ACC)                                                                  \
    static void cum_cols_##SUF(const T *x, T *y, int64_t inner, int64_t n, int64_t w, int prod,  \
                               int reverse) {                                                      \
        ACC acc[COL_TILE];                                                                         \
        for (int64_t j = 0; j < w; j++) acc[j] = prod ? (ACC)1 : (ACC)0;                           \
        for (int64_t k = 0; k < n; k++) {                                                          \
            int64_t i = reverse ? n - 1 - k : k;                                                   \
            const T *restrict xi = x + i * inner;                                                  \
            T *restrict yi = y + i * inner;                                                        \
            if (prod)                                                                              \
                for (int64_t j = 0; j < w; j++) yi[j] = (T)(acc[j] *= (ACC)xi[j]);                 \
            else                                                                                   \
                for (int64_t j = 0; j < w; j++) yi[j] = (T)(acc[j] += (ACC)xi[j]);                 \
        }                                                                                          \
    }
#define COL_TILE 256
#define DEF_CUM_BOTH(T, SUF, ACC) DEF_CUM(T, SUF, ACC) DEF_CUM_COLS(T, SUF, ACC)
DEF_CUM_BOTH(float, f32, double)
DEF_CUM_BOTH(double, f64, double)
DEF_CUM_BOTH(int32_t, i32, uint64_t)
DEF_CUM_BOTH(int64_t, i64, uint64_t)
DEF_CUM_BOTH(uint8_t, u8, uint64_t)

/* Items of the column form: item t is tile t % tiles of the outer position t / tiles. */
static void cum_cols_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const scan_job *j = ctx;
    const cn_kernel_args *a = j->a;
    const row_geom *g = &j->g;
    int prod = a->op == CN_OP_CUMPROD;
    int reverse = a->op == CN_OP_CUMSUM && a->n_ints > 1 && a->ints[1];
    int64_t tiles = (g->inner + COL_TILE - 1) / COL_TILE;
    for (int64_t t = begin; t < end; t++) {
        int64_t j0 = t % tiles * COL_TILE, w = g->inner - j0 < COL_TILE ? g->inner - j0 : COL_TILE;
        int64_t off = t / tiles * g->n * g->inner + j0; /* the same in x and y */
        switch (a->in[0].dtype) {
#define COLS_CASE(DT, T, SUF)                                                                      \
    case DT:                                                                                       \
        cum_cols_##SUF((const T *)a->in[0].data + off, (T *)a->out[0].data + off, g->inner, g->n,  \
                       w, prod, reverse);                                                          \
        break;
            COLS_CASE(CN_F32, float, f32)
            COLS_CASE(CN_F64, double, f64)
            COLS_CASE(CN_I32, int32_t, i32)
            COLS_CASE(CN_I64, int64_t, i64)
            COLS_CASE(CN_U8, uint8_t, u8)
#undef COLS_CASE
        default: break;
        }
    }
}

/* Whether view x is dense row-major (size-1 dims take any stride). */
static int dense(const cn_view *x) {
    int64_t expect = 1;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (x->shape[d] == 1) continue;
        if (x->strides[d] != expect) return 0;
        expect *= x->shape[d];
    }
    return 1;
}

static void cum_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const scan_job *j = ctx;
    const cn_kernel_args *a = j->a;
    const row_geom *g = &j->g;
    int prod = a->op == CN_OP_CUMPROD;
    int reverse = a->op == CN_OP_CUMSUM && a->n_ints > 1 && a->ints[1];
    for (int64_t r = begin; r < end; r++) {
        int64_t yo, xo = row_offsets(g, r, g->n, &yo);
        switch (a->in[0].dtype) {
#define CUM_CASE(DT, T, SUF)                                                                       \
    case DT:                                                                                       \
        cum_row_##SUF((const T *)a->in[0].data + xo, g->xs, (T *)a->out[0].data + yo, g->inner,   \
                      g->n, prod, reverse);                                                        \
        break;
            CUM_CASE(CN_F32, float, f32)
            CUM_CASE(CN_F64, double, f64)
            CUM_CASE(CN_I32, int32_t, i32)
            CUM_CASE(CN_I64, int64_t, i64)
            CUM_CASE(CN_U8, uint8_t, u8)
#undef CUM_CASE
        default: break; /* refused by the router (dtypes) */
        }
    }
}

/* ---- cumprod_backward -------------------------------------------------------------------- */

/* g and x rows at strides gs and xs; dx at ys. S runs from the end into dx, then the prefix
 * product multiplies it in from the start. */
#define DEF_CUMPROD_BWD(T, SUF)                                                                    \
    static void cumprod_bwd_row_##SUF(const T *g, int64_t gs, const T *x, int64_t xs, T *dx,      \
                                      int64_t ys, int64_t n) {                                     \
        double s = 0;                                                                              \
        for (int64_t i = n - 1; i >= 0; i--) {                                                     \
            s = (double)g[i * gs] + (i + 1 < n ? (double)x[(i + 1) * xs] * s : 0.0);               \
            dx[i * ys] = (T)s;                                                                     \
        }                                                                                          \
        double p = 1;                                                                              \
        for (int64_t i = 0; i < n; i++) {                                                          \
            dx[i * ys] = (T)(p * (double)dx[i * ys]);                                              \
            p *= (double)x[i * xs];                                                                \
        }                                                                                          \
    }
DEF_CUMPROD_BWD(float, f32)
DEF_CUMPROD_BWD(double, f64)

typedef struct bwd_job {
    row_geom gx, gg; /* the rows of x and of g (its own strides) */
    const cn_kernel_args *a;
} bwd_job;

static void cumprod_bwd_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const bwd_job *j = ctx;
    const cn_kernel_args *a = j->a;
    for (int64_t r = begin; r < end; r++) {
        int64_t yo, go = row_offsets(&j->gg, r, j->gx.n, &yo);
        int64_t xo = row_offsets(&j->gx, r, j->gx.n, &yo);
        if (a->in[1].dtype == CN_F64)
            cumprod_bwd_row_f64((const double *)a->in[0].data + go, j->gg.xs,
                                (const double *)a->in[1].data + xo, j->gx.xs,
                                (double *)a->out[0].data + yo, j->gx.inner, j->gx.n);
        else
            cumprod_bwd_row_f32((const float *)a->in[0].data + go, j->gg.xs,
                                (const float *)a->in[1].data + xo, j->gx.xs,
                                (float *)a->out[0].data + yo, j->gx.inner, j->gx.n);
    }
}

/* ---- cummax, cummin ---------------------------------------------------------------------- */

#define DEF_CUMEXT(T, SUF, ISNAN)                                                                  \
    static void cumext_row_##SUF(const T *x, int64_t xs, T *y, int64_t *idx, int64_t ys,         \
                                 int64_t n, int is_max) {                                          \
        T m = x[0];                                                                                \
        int64_t at = 0;                                                                            \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = x[i * xs];                                                                       \
            int take = ISNAN(v) || (!ISNAN(m) && (is_max ? v >= m : v <= m));                      \
            if (take) {                                                                            \
                m = v;                                                                             \
                at = i;                                                                            \
            }                                                                                      \
            y[i * ys] = m;                                                                         \
            idx[i * ys] = at;                                                                      \
        }                                                                                          \
    }
#define ISNAN_F(v) ((v) != (v))
#define ISNAN_I(v) 0
DEF_CUMEXT(float, f32, ISNAN_F)
DEF_CUMEXT(double, f64, ISNAN_F)
DEF_CUMEXT(int32_t, i32, ISNAN_I)
DEF_CUMEXT(int64_t, i64, ISNAN_I)
DEF_CUMEXT(uint8_t, u8, ISNAN_I)

static void cumext_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const scan_job *j = ctx;
    const cn_kernel_args *a = j->a;
    const row_geom *g = &j->g;
    int is_max = a->op == CN_OP_CUMMAX;
    for (int64_t r = begin; r < end; r++) {
        int64_t yo, xo = row_offsets(g, r, g->n, &yo);
        int64_t *idx = (int64_t *)a->out[1].data + yo;
        switch (a->in[0].dtype) {
#define EXT_CASE(DT, T, SUF)                                                                       \
    case DT:                                                                                       \
        cumext_row_##SUF((const T *)a->in[0].data + xo, g->xs, (T *)a->out[0].data + yo, idx,     \
                         g->inner, g->n, is_max);                                                  \
        break;
            EXT_CASE(CN_F32, float, f32)
            EXT_CASE(CN_F64, double, f64)
            EXT_CASE(CN_I32, int32_t, i32)
            EXT_CASE(CN_I64, int64_t, i64)
            EXT_CASE(CN_U8, uint8_t, u8)
#undef EXT_CASE
        default: break;
        }
    }
}

/* ---- sort -------------------------------------------------------------------------------- */

/* A stable sort of a row x (stride xs) as (value, index) pairs, so that merges read memory in
 * sequence: insertion sort of runs of SORT_RUN, then bottom-up merges between the two halves of
 * buf (2 n pairs); then the values and indices in that order. before(a, b): a sorts strictly
 * before b (NaN as the largest value); ties keep the left one first, so the sort is stable. */
#define SORT_RUN 16
#define SORT_PAIR_BYTES 16 /* the largest pair ({double or int64, int64}); buf holds 2 n of it */
#define DEF_SORT(T, SUF, ISNAN)                                                                    \
    typedef struct pair_##SUF {                                                                    \
        T v;                                                                                       \
        int64_t i;                                                                                 \
    } pair_##SUF;                                                                                  \
    static int before_##SUF(T a, T b, int desc) {                                                  \
        if (desc) return (ISNAN(a) && !ISNAN(b)) || (!ISNAN(b) && a > b);                          \
        return !ISNAN(a) && (ISNAN(b) || a < b);                                                   \
    }                                                                                              \
    static void sort_row_##SUF(const T *x, int64_t xs, T *y, int64_t *idx_out, int64_t ys,       \
                               int64_t n, int desc, void *buf) {                                   \
        pair_##SUF *src = buf, *dst = src + n;                                                     \
        for (int64_t i = 0; i < n; i++) {                                                          \
            src[i].v = x[i * xs];                                                                  \
            src[i].i = i;                                                                          \
        }                                                                                          \
        for (int64_t lo = 0; lo < n; lo += SORT_RUN) {                                             \
            int64_t hi = lo + SORT_RUN < n ? lo + SORT_RUN : n;                                    \
            for (int64_t i = lo + 1; i < hi; i++) {                                                \
                pair_##SUF t = src[i];                                                             \
                int64_t j = i;                                                                     \
                for (; j > lo && before_##SUF(t.v, src[j - 1].v, desc); j--) src[j] = src[j - 1];  \
                src[j] = t;                                                                        \
            }                                                                                      \
        }                                                                                          \
        for (int64_t w = SORT_RUN; w < n; w *= 2) {                                                \
            for (int64_t lo = 0; lo < n; lo += 2 * w) {                                            \
                int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;      \
                int64_t p = lo, q = mid, o = lo;                                                   \
                while (p < mid && q < hi) /* the right one first only when strictly before */     \
                    dst[o++] = before_##SUF(src[q].v, src[p].v, desc) ? src[q++] : src[p++];       \
                while (p < mid) dst[o++] = src[p++];                                               \
                while (q < hi) dst[o++] = src[q++];                                                \
            }                                                                                      \
            pair_##SUF *t = src;                                                                   \
            src = dst;                                                                             \
            dst = t;                                                                               \
        }                                                                                          \
        for (int64_t i = 0; i < n; i++) {                                                          \
            y[i * ys] = src[i].v;                                                                  \
            idx_out[i * ys] = src[i].i;                                                            \
        }                                                                                          \
    }
DEF_SORT(float, f32, ISNAN_F)
DEF_SORT(double, f64, ISNAN_F)
DEF_SORT(int32_t, i32, ISNAN_I)
DEF_SORT(int64_t, i64, ISNAN_I)
DEF_SORT(uint8_t, u8, ISNAN_I)

static void sort_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    const scan_job *j = ctx;
    const cn_kernel_args *a = j->a;
    const row_geom *g = &j->g;
    int desc = a->n_ints > 1 && a->ints[1];
    char *buf = j->scratch + chunk * 2 * g->n * SORT_PAIR_BYTES;
    for (int64_t r = begin; r < end; r++) {
        int64_t yo, xo = row_offsets(g, r, g->n, &yo);
        int64_t *idx = (int64_t *)a->out[1].data + yo;
        switch (a->in[0].dtype) {
#define SORT_CASE(DT, T, SUF)                                                                      \
    case DT:                                                                                       \
        sort_row_##SUF((const T *)a->in[0].data + xo, g->xs, (T *)a->out[0].data + yo, idx,       \
                       g->inner, g->n, desc, buf);                                                 \
        break;
            SORT_CASE(CN_F32, float, f32)
            SORT_CASE(CN_F64, double, f64)
            SORT_CASE(CN_I32, int32_t, i32)
            SORT_CASE(CN_I64, int64_t, i64)
            SORT_CASE(CN_U8, uint8_t, u8)
#undef SORT_CASE
        default: break;
        }
    }
}

/* ---- any, all ---------------------------------------------------------------------------- */

/* Whether element k (stride xs) of row x, of dtype dt, is != 0. */
static int nonzero_at(const char *x, cn_dtype dt, int64_t off) {
    switch (dt) {
    case CN_F32: return ((const float *)x)[off] != 0;
    case CN_F64: return ((const double *)x)[off] != 0;
    case CN_I32: return ((const int32_t *)x)[off] != 0;
    case CN_I64: return ((const int64_t *)x)[off] != 0;
    default: return ((const uint8_t *)x)[off] != 0; /* u8, bool */
    }
}

static void anyall_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    const scan_job *j = ctx;
    const cn_kernel_args *a = j->a;
    const row_geom *g = &j->g;
    int want_any = a->op == CN_OP_ANY;
    for (int64_t r = begin; r < end; r++) {
        int64_t yo, xo = row_offsets(g, r, 1, &yo);
        /* any: stop at the first true; all: at the first false */
        int found = 0;
        for (int64_t k = 0; k < g->n && !found; k++)
            found = nonzero_at(a->in[0].data, a->in[0].dtype, xo + k * g->xs) == want_any;
        ((uint8_t *)a->out[0].data)[yo] = (uint8_t)(want_any ? found : !found);
    }
}

/* ---- entries ----------------------------------------------------------------------------- */

static cn_status bad_dim(const cn_kernel_args *a, int dim) {
    return cn_set_error(CN_ERR_INVALID_ARG, cn_op_name(a->op), "dim %d is out of range for %d "
                        "dims", dim, a->in[0].ndim);
}

/* cumsum, cumprod, cummax, cummin, sort, any, all: in[0] any strides, ints[0] = dim. */
cn_status cpu_scan(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0];
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (x->ndim > 0 && (dim < 0 || dim >= x->ndim)) return bad_dim(a, dim);
    scan_job j = {.a = a};
    geom_init(&j.g, x, dim);
    int anyall = a->op == CN_OP_ANY || a->op == CN_OP_ALL;
    if (j.g.rows == 0 || (j.g.n == 0 && !anyall)) return CN_OK; /* any / all of nothing: below */
    int64_t chunks = row_chunks(&j.g);
    switch (a->op) {
    case CN_OP_CUMSUM:
    case CN_OP_CUMPROD:
        if (j.g.inner > 1 && dense(x)) { /* a dim before the last of a dense x: columns */
            int64_t items = j.g.rows / j.g.inner * ((j.g.inner + COL_TILE - 1) / COL_TILE);
            int64_t c = cpu_chunks(j.g.rows * j.g.n, SCAN_GRAIN);
            cpu_parallel(items, c > items ? items : c, cum_cols_chunk, &j);
            return CN_OK;
        }
        run_rows(&j, cum_chunk, chunks);
        return CN_OK;
    case CN_OP_CUMMAX:
    case CN_OP_CUMMIN: run_rows(&j, cumext_chunk, chunks); return CN_OK;
    case CN_OP_ANY:
    case CN_OP_ALL: run_rows(&j, anyall_chunk, chunks); return CN_OK;
    case CN_OP_SORT: {
        if (chunks < 1) chunks = 1;
        /* 2 n pairs per chunk: n * chunks <= numel, an int64; the bytes must fit too */
        if (j.g.n > INT64_MAX / (2 * SORT_PAIR_BYTES) / chunks)
            return cn_set_error(CN_ERR_OVERFLOW, "sort", "the sort's scratch (%d bytes per "
                                "element of a row, per thread) does not fit in memory",
                                2 * SORT_PAIR_BYTES);
        j.scratch = cn__malloc("sort", (size_t)(j.g.n * chunks * 2 * SORT_PAIR_BYTES));
        if (!j.scratch) return cn_last_status();
        run_rows(&j, sort_chunk, chunks);
        cn__free(j.scratch);
        return CN_OK;
    }
    default: return cn__kernel_op_error("cpu", "cpu_scan", a->op);
    }
}

/* in = (g, x) of one shape, ints[0] = dim; out[0] = x's gradient, contiguous. f32 and f64. */
cn_status cpu_cumprod_backward(const cn_kernel_args *a) {
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (a->in[1].ndim > 0 && (dim < 0 || dim >= a->in[1].ndim)) return bad_dim(a, dim);
    bwd_job j = {.a = a};
    geom_init(&j.gg, &a->in[0], dim);
    geom_init(&j.gx, &a->in[1], dim);
    if (j.gx.rows == 0 || j.gx.n == 0) return CN_OK;
    cpu_parallel(j.gx.rows, row_chunks(&j.gx), cumprod_bwd_chunk, &j);
    return CN_OK;
}
