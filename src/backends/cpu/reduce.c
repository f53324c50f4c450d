/* CPU reductions (sum, mean, max, min, prod, argmax, argmin, var, logsumexp) and softmax /
 * log_softmax.
 *
 * Geometry. The input view splits into the reduced dim (n elements at stride rs) and the kept
 * dims, which index the contiguous output row-major. Kept dims are coalesced where the input
 * allows; the innermost kept dim (stride cs) is cut into tiles of up to MAX_TILE outputs, and an
 * "item" is one tile. Two strategies:
 * - rows: each output reduces its own run of n elements (rs == 1, or no kept dim is contiguous).
 *   Inner loops keep LANES independent accumulators so they vectorise without -ffast-math.
 * - columns: the innermost kept dim is contiguous in the input (cs == 1, rs != 1: e.g. reducing
 *   dim 0 of a row-major matrix). The loop over the reduced dim adds whole contiguous rows of the
 *   tile into a row of partials, so the inner loop runs over adjacent outputs.
 *
 * Each op is one or two passes of a primitive: sum of f(x) (f = x, (x-c)^2 or exp(x-c)), product,
 * extreme (NaN-propagating max / min), first index of the extreme. var = mean, then the sum of
 * squared deviations (two-pass: no cancellation); logsumexp = max, then the sum of exp(x - max).
 * NaN counts as the largest and the smallest value: max/min propagate it and argmax/argmin return
 * the index of the first NaN, as PyTorch does. Float sums are pairwise (blocks split in halves),
 * so rounding error grows like log(n), not n. Integer sums and products accumulate in 64 bits,
 * wrapping, and are narrowed to the dtype (they wrap like the dtype's own arithmetic).
 *
 * Threads take whole items when there are enough; otherwise (a few long reductions, e.g. a full
 * sum) each item's reduced dim is cut into one chunk per thread and the partials are combined in
 * thread order, so a result does not depend on timing.
 *
 * Softmax and log_softmax (at the end) share the geometry and the primitives. */

/* Nothing here reads floating-point exception flags. Without this, gcc keeps every float compare
 * behind its branch (a compare may raise "invalid" on NaN), so no loop with a compare-select (max,
 * NaN checks, the clamps in exp_f32) would vectorise. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("no-trapping-math")
#endif

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/cpu_internal.h"
#include "backends/cpu/cpu_math.h"
#include "core/backend_common.h"

#define MAX_TILE 512   /* outputs per item */
#define SPLIT_TILE 32  /* outputs per item when the reduced dim is split across threads */
#define MAX_SPLIT 64   /* most threads that split one item */
#define PAIR_BLOCK 256 /* row sums: elements summed in lanes before a block is halved */
#define COL_BLOCK 32   /* column sums: rows added in sequence before a block is halved */
#define SOFTMAX_TILE_BYTES (1024 * 1024) /* a column softmax tile ([n, w]) aims to stay in cache */
/* Softmax rows whose output is at least this large are written with streaming stores (below) */
#define SOFTMAX_STREAM_BYTES (16 << 20)
#define SOFTMAX_STREAM_ROW   8192 /* the longest row that takes them: its exps in a buffer */

#define MAYBE_UNUSED __attribute__((unused))

#define EXP_f32(x) exp_f32(x)
#define EXP_f64(x) exp(x)
#define EXP_NONPOS_f32(x) exp_nonpos_f32(x) /* softmax's exp(x - max): see cpu_math.h */
#define EXP_NONPOS_f64(x) exp(x)

/* ---- primitives ------------------------------------------------------------------------------ *
 * Row forms reduce n elements at stride rs to one value; column forms reduce n rows (stride rs)
 * of w contiguous elements to w values. */

#define F_ID(x, c) (x)
#define F_SQ(x, c) (((x) - (c)) * ((x) - (c)))
#define F_EX_f32(x, c) exp_f32((x) - (c))
#define F_EX_f64(x, c) exp((x) - (c))

/* Pairwise sum of F(x, c). */
#define DEF_SUM(T, SUF, LANES, NAME, F, CLONES)                                                    \
    MAYBE_UNUSED CLONES                                                                            \
    static T sum_leaf_##NAME##_##SUF(const T *restrict p, int64_t n, int64_t rs, T c) {            \
        (void)c;                                                                                   \
        T acc[LANES] = {0};                                                                        \
        int64_t i = 0;                                                                             \
        if (rs == 1)                                                                               \
            for (; i + LANES <= n; i += LANES)                                                     \
                for (int j = 0; j < LANES; j++) acc[j] += F(p[i + j], c);                          \
        for (int h = LANES / 2; h > 0; h /= 2)                                                     \
            for (int j = 0; j < h; j++) acc[j] += acc[j + h];                                      \
        T s = 0;                                                                                   \
        for (; i < n; i++) s += F(p[i * rs], c);                                                   \
        return acc[0] + s;                                                                         \
    }                                                                                              \
    MAYBE_UNUSED static T sum_row_##NAME##_##SUF(const T *p, int64_t n, int64_t rs, T c) {         \
        if (n <= PAIR_BLOCK) return sum_leaf_##NAME##_##SUF(p, n, rs, c);                          \
        int64_t h = (n / 2 + LANES - 1) / LANES * LANES;                                           \
        return sum_row_##NAME##_##SUF(p, h, rs, c) +                                               \
               sum_row_##NAME##_##SUF(p + h * rs, n - h, rs, c);                                   \
    }                                                                                              \
    MAYBE_UNUSED CLONES                                                                            \
    static void sum_col_##NAME##_##SUF(const T *p, int64_t n, int64_t rs, int64_t w,               \
                                       const T *restrict c, T *restrict acc) {                     \
        if (n <= COL_BLOCK) {                                                                      \
            for (int64_t j = 0; j < w; j++) acc[j] = 0;                                            \
            for (int64_t k = 0; k < n; k++) {                                                      \
                const T *restrict q = p + k * rs;                                                  \
                for (int64_t j = 0; j < w; j++) acc[j] += F(q[j], c[j]);                           \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        T tmp[MAX_TILE];                                                                           \
        int64_t h = n / 2;                                                                         \
        sum_col_##NAME##_##SUF(p, h, rs, w, c, acc);                                               \
        sum_col_##NAME##_##SUF(p + h * rs, n - h, rs, w, c, tmp);                                  \
        for (int64_t j = 0; j < w; j++) acc[j] += tmp[j];                                          \
    }

/* Product in sequence (lanes for contiguous rows). */
#define DEF_PROD(T, SUF, LANES)                                                                    \
    static T prod_row_##SUF(const T *restrict p, int64_t n, int64_t rs) {                          \
        T acc[LANES];                                                                              \
        for (int j = 0; j < LANES; j++) acc[j] = 1;                                                \
        int64_t i = 0;                                                                             \
        if (rs == 1)                                                                               \
            for (; i + LANES <= n; i += LANES)                                                     \
                for (int j = 0; j < LANES; j++) acc[j] *= p[i + j];                                \
        for (; i < n; i++) acc[0] *= p[i * rs];                                                    \
        for (int j = 1; j < LANES; j++) acc[0] *= acc[j];                                          \
        return acc[0];                                                                             \
    }                                                                                              \
    static void prod_col_##SUF(const T *p, int64_t n, int64_t rs, int64_t w, T *restrict acc) {    \
        for (int64_t j = 0; j < w; j++) acc[j] = 1;                                                \
        for (int64_t k = 0; k < n; k++) {                                                          \
            const T *restrict q = p + k * rs;                                                      \
            for (int64_t j = 0; j < w; j++) acc[j] *= q[j];                                        \
        }                                                                                          \
    }

/* NaN tests (ints have none); "v beats m" for max and min, NaN aside: NaN beats everything, so
 * it propagates (ABOVE_NAN / BELOW_NAN, for combining partials). */
#define ISNAN_F(v) ((v) != (v))
#define ISNAN_I(v) 0
#define ABOVE(v, m) ((v) > (m))
#define BELOW(v, m) ((v) < (m))
#define ABOVE_NAN(v, m) (((v) > (m)) | ((v) != (v)))
#define BELOW_NAN(v, m) (((v) < (m)) | ((v) != (v)))

/* An OpenMP simd max/min reduction: gcc vectorises it; clang cannot here, and says so. */
#if defined(__GNUC__) && !defined(__clang__)
#define PRAGMA(x) _Pragma(#x)
#define SIMD_EXTREME(RED, m, bad) PRAGMA(omp simd reduction(RED : m) reduction(| : bad))
#else
#define SIMD_EXTREME(RED, m, bad)
#endif

/* Extreme (max or min, by BEATS; RED names the same for OpenMP) starting from INIT, the identity.
 * The contiguous row loop is an OpenMP simd max/min plus a NaN flag: gcc vectorises that form,
 * not a select-with-NaN-check carried in lanes. */
#define DEF_EXTREME(T, SUF, NAME, RED, BEATS, ISNAN, INIT)                                         \
    static T NAME##_row_##SUF(const T *restrict p, int64_t n, int64_t rs) {                        \
        T m = INIT;                                                                                \
        int bad = 0;                                                                               \
        if (rs == 1) {                                                                             \
            SIMD_EXTREME(RED, m, bad)                                                              \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T v = p[i];                                                                        \
                m = BEATS(v, m) ? v : m;                                                           \
                bad |= ISNAN(v);                                                                   \
            }                                                                                      \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) {                                                      \
                T v = p[i * rs];                                                                   \
                m = BEATS(v, m) ? v : m;                                                           \
                bad |= ISNAN(v);                                                                   \
            }                                                                                      \
        }                                                                                          \
        if (bad) /* a NaN beats everything: return one */                                          \
            for (int64_t i = 0; i < n; i++)                                                        \
                if (ISNAN(p[i * rs])) return p[i * rs];                                            \
        return m;                                                                                  \
    }                                                                                              \
    static void NAME##_col_##SUF(const T *p, int64_t n, int64_t rs, int64_t w,                     \
                                 T *restrict acc) {                                                \
        for (int64_t j = 0; j < w; j++) acc[j] = INIT;                                             \
        for (int64_t k = 0; k < n; k++) {                                                          \
            const T *restrict q = p + k * rs;                                                      \
            for (int64_t j = 0; j < w; j++)                                                        \
                acc[j] = (BEATS(q[j], acc[j]) | ISNAN(q[j])) ? q[j] : acc[j];                      \
        }                                                                                          \
    }

/* The first index of the extreme (max or min, by BEATS: NaN beats everything, and the first NaN
 * wins), with the extreme in *val (type A). Rows: the extreme (vectorised), then the first index
 * holding it, testing blocks of 16 at once. Columns: one pass keeping each column's best value
 * and index as selects, so it vectorises. An empty range gives index -1. */
#define DEF_ARGEXT(T, SUF, A, NAME, BEATS, ISNAN)                                                  \
    static int64_t arg##NAME##_row_##SUF(const T *p, int64_t n, int64_t rs, A *val) {              \
        T m = NAME##_row_##SUF(p, n, rs);                                                          \
        *val = (A)m;                                                                               \
        int64_t k = 0;                                                                             \
        if (ISNAN(m)) {                                                                            \
            for (; k < n; k++)                                                                     \
                if (ISNAN(p[k * rs])) return k;                                                    \
            return -1;                                                                             \
        }                                                                                          \
        if (rs == 1)                                                                               \
            for (; k + 16 <= n; k += 16) {                                                         \
                int hit = 0;                                                                       \
                for (int j = 0; j < 16; j++) hit |= p[k + j] == m;                                 \
                if (hit) break;                                                                    \
            }                                                                                      \
        for (; k < n; k++)                                                                         \
            if (p[k * rs] == m) return k;                                                          \
        return -1;                                                                                 \
    }                                                                                              \
    static void arg##NAME##_col_##SUF(const T *p, int64_t n, int64_t rs, int64_t w,                \
                                      A *restrict val, int64_t *restrict idx) {                    \
        T best[MAX_TILE];                                                                          \
        int32_t at[MAX_TILE]; /* 32-bit indices vectorise beside the values; 64-bit do not */      \
        for (int64_t j = 0; j < w; j++) {                                                          \
            best[j] = n > 0 ? p[j] : 0;                                                            \
            idx[j] = n > 0 ? 0 : -1;                                                               \
            at[j] = 0;                                                                             \
        }                                                                                          \
        if (n <= INT32_MAX) {                                                                      \
            for (int32_t k = 1; k < (int32_t)n; k++) {                                             \
                const T *restrict q = p + k * rs;                                                  \
                for (int64_t j = 0; j < w; j++) {                                                  \
                    T v = q[j];                                                                    \
                    int take = (BEATS(v, best[j]) | ISNAN(v)) & !ISNAN(best[j]);                   \
                    best[j] = take ? v : best[j];                                                  \
                    at[j] = take ? k : at[j];                                                      \
                }                                                                                  \
            }                                                                                      \
            for (int64_t j = 0; j < w && n > 0; j++) idx[j] = at[j];                               \
        } else {                                                                                   \
            for (int64_t k = 1; k < n; k++) {                                                      \
                const T *restrict q = p + k * rs;                                                  \
                for (int64_t j = 0; j < w; j++) {                                                  \
                    T v = q[j];                                                                    \
                    int take = (BEATS(v, best[j]) | ISNAN(v)) & !ISNAN(best[j]);                   \
                    best[j] = take ? v : best[j];                                                  \
                    idx[j] = take ? k : idx[j];                                                    \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
        for (int64_t j = 0; j < w; j++) val[j] = (A)best[j];                                       \
    }

/* Integer sum and product, in 64 bits modulo 2^64 (unsigned: wrapping is defined). */
#define DEF_INT_ARITH(T, SUF)                                                                      \
    static uint64_t sum_row_##SUF(const T *restrict p, int64_t n, int64_t rs) {                    \
        uint64_t s = 0;                                                                            \
        if (rs == 1)                                                                               \
            for (int64_t k = 0; k < n; k++) s += (uint64_t)p[k];                                   \
        else                                                                                       \
            for (int64_t k = 0; k < n; k++) s += (uint64_t)p[k * rs];                              \
        return s;                                                                                  \
    }                                                                                              \
    static uint64_t prod_row_##SUF(const T *restrict p, int64_t n, int64_t rs) {                   \
        uint64_t s = 1;                                                                            \
        for (int64_t k = 0; k < n; k++) s *= (uint64_t)p[k * rs];                                  \
        return s;                                                                                  \
    }                                                                                              \
    static void sum_col_##SUF(const T *p, int64_t n, int64_t rs, int64_t w,                        \
                              uint64_t *restrict acc) {                                            \
        for (int64_t j = 0; j < w; j++) acc[j] = 0;                                                \
        for (int64_t k = 0; k < n; k++) {                                                          \
            const T *restrict q = p + k * rs;                                                      \
            for (int64_t j = 0; j < w; j++) acc[j] += (uint64_t)q[j];                              \
        }                                                                                          \
    }                                                                                              \
    static void prod_col_##SUF(const T *p, int64_t n, int64_t rs, int64_t w,                       \
                               uint64_t *restrict acc) {                                           \
        for (int64_t j = 0; j < w; j++) acc[j] = 1;                                                \
        for (int64_t k = 0; k < n; k++) {                                                          \
            const T *restrict q = p + k * rs;                                                      \
            for (int64_t j = 0; j < w; j++) acc[j] *= (uint64_t)q[j];                              \
        }                                                                                          \
    }

/* ---- reduction items ------------------------------------------------------------------------- */

typedef enum prim {
    P_NONE, P_SUM, P_SUMSQ, P_SUMEXP, P_PROD, P_MAX, P_MIN, P_ARGMAX, P_ARGMIN
} prim;

typedef struct rctx {
    cn_op op;
    prim p1, p2;        /* the passes; p2 sees c = between(result of p1) */
    int col;            /* column strategy */
    int64_t n, rs;      /* reduced length and input stride, in elements */
    int64_t cs;         /* input stride between an item's outputs (1 for columns) */
    int64_t correction; /* var */
    int nsplit;         /* threads that split each item's reduced dim; 0: not split */
} rctx;

/* Reduces one item of w outputs whose first input element is at x; writes w outputs at y. */
typedef void (*item_fn)(const rctx *r, const char *x, int64_t w, char *y);

/* run_pass: one pass over an item, its reduced dim cut into r->nsplit chunks when set (partials
 * combined in chunk order). item: both passes, then the family's finalisation. */
#define DEF_ITEM(T, A, SUF)                                                                        \
    typedef struct split_job_##SUF {                                                               \
        const rctx *r;                                                                             \
        prim k;                                                                                    \
        const T *p;                                                                                \
        int64_t w;                                                                                 \
        const A *c;                                                                                \
        A (*part)[SPLIT_TILE];                                                                     \
        int64_t (*pidx)[SPLIT_TILE];                                                               \
    } split_job_##SUF;                                                                             \
    /* chunk t: the reduced dim's elements [k0, k1) into part[t] */                                \
    static void split_chunk_##SUF(void *ctx, int64_t t, int64_t k0, int64_t k1) {                  \
        const split_job_##SUF *s = ctx;                                                            \
        pass_##SUF(s->r, s->k, s->p + k0 * s->r->rs, k1 - k0, s->w, s->c, s->part[t],              \
                   s->pidx[t]);                                                                    \
        if (s->k == P_ARGMAX || s->k == P_ARGMIN)                                                  \
            for (int64_t j = 0; j < s->w; j++)                                                     \
                if (s->pidx[t][j] >= 0) s->pidx[t][j] += k0;                                       \
    }                                                                                              \
    static void run_pass_##SUF(const rctx *r, prim k, const T *p, int64_t w, const A *c, A *acc,   \
                               int64_t *idx) {                                                     \
        if (r->nsplit == 0) {                                                                      \
            pass_##SUF(r, k, p, r->n, w, c, acc, idx);                                             \
            return;                                                                                \
        }                                                                                          \
        A part[MAX_SPLIT][SPLIT_TILE];                                                             \
        int64_t pidx[MAX_SPLIT][SPLIT_TILE];                                                       \
        int used = r->nsplit;                                                                      \
        split_job_##SUF s = {r, k, p, w, c, part, pidx};                                           \
        cpu_parallel(r->n, used, split_chunk_##SUF, &s);                                           \
        for (int64_t j = 0; j < w; j++) {                                                          \
            acc[j] = part[0][j];                                                                   \
            idx[j] = pidx[0][j];                                                                   \
            for (int t = 1; t < used; t++) {                                                       \
                if (k != P_ARGMAX && k != P_ARGMIN) {                                              \
                    acc[j] = combine_##SUF(k, acc[j], part[t][j]);                                 \
                } else if (pidx[t][j] >= 0 &&                                                      \
                           (idx[j] < 0 || beats_##SUF(k, part[t][j], acc[j]))) {                   \
                    acc[j] = part[t][j]; /* a later chunk wins only when strictly better */        \
                    idx[j] = pidx[t][j];                                                           \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static void item_##SUF(const rctx *r, const char *x, int64_t w, char *y) {                     \
        const T *p = (const T *)x;                                                                 \
        A acc1[MAX_TILE], acc2[MAX_TILE], c[MAX_TILE];                                             \
        int64_t idx[MAX_TILE];                                                                     \
        run_pass_##SUF(r, r->p1, p, w, NULL, acc1, idx);                                           \
        if (r->p2 != P_NONE) {                                                                     \
            for (int64_t j = 0; j < w; j++) c[j] = between_##SUF(r, acc1[j]);                      \
            run_pass_##SUF(r, r->p2, p, w, c, acc2, idx);                                          \
        }                                                                                          \
        final_##SUF(r, acc1, acc2, idx, w, y);                                                     \
    }

/* The float family: every op; accumulators in T itself. */
#define DEF_FLOAT_FAMILY(T, SUF, LANES)                                                            \
    DEF_SUM(T, SUF, LANES, id, F_ID, )                                                             \
    DEF_SUM(T, SUF, LANES, sq, F_SQ, )                                                             \
    DEF_SUM(T, SUF, LANES, ex, F_EX_##SUF, CPU_CLONES_EXP)                                         \
    DEF_PROD(T, SUF, LANES)                                                                        \
    DEF_EXTREME(T, SUF, max, max, ABOVE, ISNAN_F, (T)-INFINITY)                                    \
    DEF_EXTREME(T, SUF, min, min, BELOW, ISNAN_F, (T)INFINITY)                                     \
    DEF_ARGEXT(T, SUF, T, max, ABOVE, ISNAN_F)                                                     \
    DEF_ARGEXT(T, SUF, T, min, BELOW, ISNAN_F)                                                     \
    static void pass_##SUF(const rctx *r, prim k, const T *p, int64_t n, int64_t w, const T *c,    \
                           T *acc, int64_t *idx) {                                                 \
        int64_t rs = r->rs, cs = r->cs;                                                            \
        if (r->col) {                                                                              \
            switch (k) {                                                                           \
            case P_SUM: sum_col_id_##SUF(p, n, rs, w, c, acc); break;                              \
            case P_SUMSQ: sum_col_sq_##SUF(p, n, rs, w, c, acc); break;                            \
            case P_SUMEXP: sum_col_ex_##SUF(p, n, rs, w, c, acc); break;                           \
            case P_PROD: prod_col_##SUF(p, n, rs, w, acc); break;                                  \
            case P_MAX: max_col_##SUF(p, n, rs, w, acc); break;                                    \
            case P_MIN: min_col_##SUF(p, n, rs, w, acc); break;                                    \
            case P_ARGMAX: argmax_col_##SUF(p, n, rs, w, acc, idx); break;                         \
            case P_ARGMIN: argmin_col_##SUF(p, n, rs, w, acc, idx); break;                         \
            case P_NONE: break;                                                                    \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < w; j++) {                                                          \
            const T *q = p + j * cs;                                                               \
            switch (k) {                                                                           \
            case P_SUM: acc[j] = sum_row_id_##SUF(q, n, rs, 0); break;                             \
            case P_SUMSQ: acc[j] = sum_row_sq_##SUF(q, n, rs, c[j]); break;                        \
            case P_SUMEXP: acc[j] = sum_row_ex_##SUF(q, n, rs, c[j]); break;                       \
            case P_PROD: acc[j] = prod_row_##SUF(q, n, rs); break;                                 \
            case P_MAX: acc[j] = max_row_##SUF(q, n, rs); break;                                   \
            case P_MIN: acc[j] = min_row_##SUF(q, n, rs); break;                                   \
            case P_ARGMAX: idx[j] = argmax_row_##SUF(q, n, rs, &acc[j]); break;                    \
            case P_ARGMIN: idx[j] = argmin_row_##SUF(q, n, rs, &acc[j]); break;                    \
            case P_NONE: break;                                                                    \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static T combine_##SUF(prim k, T a, T b) {                                                     \
        switch (k) {                                                                               \
        case P_PROD: return a * b;                                                                 \
        case P_MAX: return ABOVE_NAN(b, a) ? b : a;                                                \
        case P_MIN: return BELOW_NAN(b, a) ? b : a;                                                \
        default: return a + b;                                                                     \
        }                                                                                          \
    }                                                                                              \
    /* b strictly better than a for argmax / argmin (an earlier NaN stays). */                     \
    static int beats_##SUF(prim k, T b, T a) {                                                     \
        if (ISNAN_F(a)) return 0;                                                                  \
        return k == P_ARGMAX ? ABOVE_NAN(b, a) : BELOW_NAN(b, a);                                  \
    }                                                                                              \
    /* var: deviations from the mean; logsumexp: shift by a finite max (else the result is the     \
     * max itself, see final). */                                                                  \
    static T between_##SUF(const rctx *r, T a) {                                                   \
        if (r->op == CN_OP_VAR) return (T)((double)a / (double)r->n);                              \
        return isfinite(a) ? a : 0;                                                                \
    }                                                                                              \
    static void final_##SUF(const rctx *r, const T *a1, const T *a2, const int64_t *idx,           \
                            int64_t w, char *y) {                                                  \
        T *out = (T *)y;                                                                           \
        double n = (double)r->n, dof = (double)(r->n - r->correction);                             \
        for (int64_t j = 0; j < w; j++) {                                                          \
            switch (r->op) {                                                                       \
            case CN_OP_MEAN: out[j] = (T)((double)a1[j] / n); break; /* n = 0: NaN */              \
            case CN_OP_VAR: out[j] = r->n > 0 && dof > 0 ? (T)((double)a2[j] / dof) : (T)NAN;      \
                break;                                                                             \
            case CN_OP_LOGSUMEXP: /* all -inf (or empty): -inf; a +inf: +inf; a NaN: NaN */        \
                out[j] = isfinite(a1[j]) ? (T)((double)a1[j] + log((double)a2[j])) : a1[j];        \
                break;                                                                             \
            case CN_OP_ARGMAX:                                                                     \
            case CN_OP_ARGMIN: ((int64_t *)y)[j] = idx[j]; break;                                  \
            default: out[j] = a1[j]; break;                                                        \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    DEF_ITEM(T, T, SUF)

/* The integer family (and bool as u8): sum, prod, max, min, argmax, argmin; accumulators in
 * int64. */
#define DEF_INT_FAMILY(T, SUF, TMIN, TMAX)                                                         \
    DEF_INT_ARITH(T, SUF)                                                                          \
    DEF_EXTREME(T, SUF, max, max, ABOVE, ISNAN_I, TMIN)                                            \
    DEF_EXTREME(T, SUF, min, min, BELOW, ISNAN_I, TMAX)                                            \
    DEF_ARGEXT(T, SUF, int64_t, max, ABOVE, ISNAN_I)                                               \
    DEF_ARGEXT(T, SUF, int64_t, min, BELOW, ISNAN_I)                                               \
    static void pass_##SUF(const rctx *r, prim k, const T *p, int64_t n, int64_t w,                \
                           const int64_t *c, int64_t *acc, int64_t *idx) {                         \
        int64_t rs = r->rs, cs = r->cs;                                                            \
        (void)c; /* no two-pass op takes ints */                                                   \
        if (r->col && (k == P_ARGMAX || k == P_ARGMIN)) {                                          \
            if (k == P_ARGMAX)                                                                     \
                argmax_col_##SUF(p, n, rs, w, acc, idx);                                           \
            else                                                                                   \
                argmin_col_##SUF(p, n, rs, w, acc, idx);                                           \
            return;                                                                                \
        }                                                                                          \
        if (r->col) {                                                                              \
            if (k == P_SUM || k == P_PROD) {                                                       \
                uint64_t u[MAX_TILE];                                                              \
                if (k == P_SUM)                                                                    \
                    sum_col_##SUF(p, n, rs, w, u);                                                 \
                else                                                                               \
                    prod_col_##SUF(p, n, rs, w, u);                                                \
                for (int64_t j = 0; j < w; j++) acc[j] = (int64_t)u[j];                            \
            } else {                                                                               \
                T v[MAX_TILE];                                                                     \
                if (k == P_MIN)                                                                    \
                    min_col_##SUF(p, n, rs, w, v);                                                 \
                else                                                                               \
                    max_col_##SUF(p, n, rs, w, v);                                                 \
                for (int64_t j = 0; j < w; j++) acc[j] = (int64_t)v[j];                            \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < w; j++) {                                                          \
            const T *q = p + j * cs;                                                               \
            switch (k) {                                                                           \
            case P_SUM: acc[j] = (int64_t)sum_row_##SUF(q, n, rs); break;                          \
            case P_PROD: acc[j] = (int64_t)prod_row_##SUF(q, n, rs); break;                        \
            case P_MIN: acc[j] = min_row_##SUF(q, n, rs); break;                                   \
            case P_ARGMAX: idx[j] = argmax_row_##SUF(q, n, rs, &acc[j]); break;                    \
            case P_ARGMIN: idx[j] = argmin_row_##SUF(q, n, rs, &acc[j]); break;                    \
            default: acc[j] = max_row_##SUF(q, n, rs); break;                                      \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    static int64_t combine_##SUF(prim k, int64_t a, int64_t b) {                                   \
        switch (k) {                                                                               \
        case P_SUM: return (int64_t)((uint64_t)a + (uint64_t)b);                                   \
        case P_PROD: return (int64_t)((uint64_t)a * (uint64_t)b);                                  \
        case P_MIN: return b < a ? b : a;                                                          \
        default: return b > a ? b : a;                                                             \
        }                                                                                          \
    }                                                                                              \
    static int beats_##SUF(prim k, int64_t b, int64_t a) {                                         \
        return k == P_ARGMAX ? b > a : b < a;                                                      \
    }                                                                                              \
    static int64_t between_##SUF(const rctx *r, int64_t a) {                                       \
        (void)r;                                                                                   \
        return a;                                                                                  \
    }                                                                                              \
    static void final_##SUF(const rctx *r, const int64_t *a1, const int64_t *a2,                   \
                            const int64_t *idx, int64_t w, char *y) {                              \
        (void)a2;                                                                                  \
        if (r->op == CN_OP_ARGMAX || r->op == CN_OP_ARGMIN)                                        \
            for (int64_t j = 0; j < w; j++) ((int64_t *)y)[j] = idx[j];                            \
        else /* narrowing keeps the low bits: sums and products wrap like the dtype's own */       \
            for (int64_t j = 0; j < w; j++) ((T *)y)[j] = (T)(uint64_t)a1[j];                      \
    }                                                                                              \
    DEF_ITEM(T, int64_t, SUF)

DEF_FLOAT_FAMILY(float, f32, 16)
DEF_FLOAT_FAMILY(double, f64, 8)
DEF_INT_FAMILY(int32_t, i32, INT32_MIN, INT32_MAX)
DEF_INT_FAMILY(int64_t, i64, INT64_MIN, INT64_MAX)
DEF_INT_FAMILY(uint8_t, u8, 0, UINT8_MAX)

/* ---- geometry -------------------------------------------------------------------------------- */

typedef struct dims {
    int nd;
    int64_t shape[CN_MAX_DIMS];
    int64_t stride[CN_MAX_DIMS];
} dims;

/* Appends a dim, dropping size 1 and merging it into the previous dim when one stride steps
 * through both (the previous dim's stride is this one's times its size). */
static void dims_push(dims *d, int64_t size, int64_t stride) {
    cn__dims_push(&d->nd, d->shape, d->stride, size, stride);
}

/* Removes the innermost dim into (*size, *stride): (1, 0) when there is none. */
static void dims_pop(dims *d, int64_t *size, int64_t *stride) {
    if (d->nd == 0) {
        *size = 1;
        *stride = 0;
        return;
    }
    d->nd--;
    *size = d->shape[d->nd];
    *stride = d->stride[d->nd];
}

/* Row-major walk over dims, tracking the input offset. */
typedef struct walker {
    dims d;
    int64_t idx[CN_MAX_DIMS];
    int64_t off;
} walker;

static void walker_seek(walker *w, int64_t i) {
    w->off = 0;
    for (int k = w->d.nd - 1; k >= 0; k--) {
        w->idx[k] = i % w->d.shape[k];
        i /= w->d.shape[k];
        w->off += w->idx[k] * w->d.stride[k];
    }
}

static void walker_next(walker *w) {
    for (int k = w->d.nd - 1; k >= 0; k--) {
        w->off += w->d.stride[k];
        if (++w->idx[k] < w->d.shape[k]) return;
        w->off -= w->d.stride[k] * w->d.shape[k];
        w->idx[k] = 0;
    }
}

/* The width of the tiles cutting m adjacent outputs (repeated `outer` times): at most `most`, but
 * narrow enough that there are `want` items to share among threads, down to `least` (a multiple of
 * `round`). Column tiles stay wide because each of their rows is one contiguous run of memory. */
static int64_t pick_tile(int64_t m, int64_t outer, int64_t most, int64_t least, int64_t round,
                         int want) {
    int64_t tile = m < most ? m : most;
    if (outer * ((m + tile - 1) / tile) >= want) return tile;
    int64_t per = (want + outer - 1) / outer; /* tiles wanted per outer position */
    int64_t narrow = ((m + per - 1) / per + round - 1) / round * round;
    if (narrow < least) narrow = least;
    return narrow < tile ? narrow : tile;
}

/* Items [begin, end) of a reduction: item i is tile i % ntiles of outer position i / ntiles. */
typedef struct rplan {
    rctx r;
    item_fn fn;
    dims outer;        /* kept dims but the innermost */
    int64_t m;         /* size of the innermost kept dim */
    int64_t tile, ntiles;
    const char *x;
    char *y;
    size_t in_size, out_size;
} rplan;

static void reduce_items(const rplan *pl, int64_t begin, int64_t end) {
    walker wk;
    wk.d = pl->outer;
    int64_t o = begin / pl->ntiles;
    walker_seek(&wk, o);
    for (int64_t i = begin; i < end; i++) {
        for (; o < i / pl->ntiles; o++) walker_next(&wk);
        int64_t j0 = (i % pl->ntiles) * pl->tile;
        int64_t w = pl->m - j0 < pl->tile ? pl->m - j0 : pl->tile;
        pl->fn(&pl->r, pl->x + (size_t)(wk.off + j0 * pl->r.cs) * pl->in_size, w,
               pl->y + (size_t)(o * pl->m + j0) * pl->out_size);
    }
}

static void reduce_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    reduce_items(ctx, begin, end);
}

static int is_extreme(cn_op op) {
    return op == CN_OP_MAX || op == CN_OP_MIN || op == CN_OP_ARGMAX || op == CN_OP_ARGMIN;
}

/* The op's passes and item function for dtype dt; NULL when the pair is not supported (r->p1
 * stays P_NONE for an op without a case). */
static item_fn reduce_setup(rctx *r, cn_dtype dt) {
    switch (r->op) {
    case CN_OP_SUM: r->p1 = P_SUM; break;
    case CN_OP_MEAN: r->p1 = P_SUM; break;
    case CN_OP_PROD: r->p1 = P_PROD; break;
    case CN_OP_MAX: r->p1 = P_MAX; break;
    case CN_OP_MIN: r->p1 = P_MIN; break;
    case CN_OP_ARGMAX: r->p1 = P_ARGMAX; break;
    case CN_OP_ARGMIN: r->p1 = P_ARGMIN; break;
    case CN_OP_VAR: r->p1 = P_SUM, r->p2 = P_SUMSQ; break;
    case CN_OP_LOGSUMEXP: r->p1 = P_MAX, r->p2 = P_SUMEXP; break;
    default: return NULL;
    }
    int float_only = r->op == CN_OP_MEAN || r->op == CN_OP_VAR || r->op == CN_OP_LOGSUMEXP;
    switch (dt) {
    case CN_F32: return item_f32;
    case CN_F64: return item_f64;
    case CN_I32: return float_only ? NULL : item_i32;
    case CN_I64: return float_only ? NULL : item_i64;
    case CN_U8: return float_only ? NULL : item_u8;
    case CN_BOOL: return is_extreme(r->op) ? item_u8 : NULL; /* 0/1 bytes order like u8 */
    default: return NULL;
    }
}

/* in[0]: any strides; ints[0] = dim, ints[1] = correction (var); out[0]: contiguous, the input's
 * shape with 1 at dim (i64 for argmax/argmin). */
cn_status cpu_reduce(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *y = &a->out[0];
    const char *name = cn_op_name(a->op);
    rplan pl;
    memset(&pl, 0, sizeof pl);
    rctx *r = &pl.r;
    r->op = a->op;
    r->correction = a->op == CN_OP_VAR && a->n_ints > 1 ? a->ints[1] : 0;
    pl.fn = reduce_setup(r, x->dtype);
    if (!pl.fn) /* an op without a case, or a dtype outside the backend's dtypes[op] */
        return r->p1 == P_NONE ? cn__kernel_op_error("cpu", "cpu_reduce", a->op)
                               : cn__kernel_dtype_error("cpu", a->op, x->dtype);
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (x->ndim > 0 && (dim < 0 || dim >= x->ndim))
        return cn_set_error(CN_ERR_INVALID_ARG, name, "dim %d is out of range for %d dims", dim,
                            x->ndim);
    r->n = x->ndim > 0 ? x->shape[dim] : 1;
    r->rs = x->ndim > 0 ? x->strides[dim] : 0;
    if (r->n == 0 && is_extreme(r->op)) /* the router checks this too */
        return cn_set_error(CN_ERR_SHAPE, name, "the reduced dim %d is empty, and an empty set "
                            "has no %s", dim, name);

    dims kept = {0};
    int64_t count = 1; /* outputs */
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) continue;
        count *= x->shape[d];
        dims_push(&kept, x->shape[d], x->strides[d]);
    }
    if (count == 0) return CN_OK;
    pl.outer = kept;
    dims_pop(&pl.outer, &pl.m, &r->cs);
    r->col = r->cs == 1 && r->rs != 1;
    pl.x = (const char *)x->data;
    pl.y = (char *)y->data;
    pl.in_size = cn_dtype_size(x->dtype);
    pl.out_size = cn_dtype_size(y->dtype);
    int nt = cpu_threads();
    int parallel = nt > 1 && count * (r->n > 0 ? r->n : 1) >= 2 * CPU_PARALLEL_GRAIN;
    pl.tile = pick_tile(pl.m, count / pl.m, MAX_TILE, r->col ? 64 : 1, r->col ? 16 : 1,
                        parallel ? nt : 1);
    pl.ntiles = (pl.m + pl.tile - 1) / pl.tile;
    int64_t items = count / pl.m * pl.ntiles;

    if (!parallel) {
        reduce_items(&pl, 0, items);
    } else if (items >= nt || r->n < 2 * nt) {
        cpu_parallel(items, items < 4 * nt ? items : 4 * nt, reduce_chunk, &pl);
    } else { /* few long reductions: split each one's reduced dim across the threads */
        r->nsplit = nt < MAX_SPLIT ? nt : MAX_SPLIT;
        pl.tile = pl.m < SPLIT_TILE ? pl.m : SPLIT_TILE;
        pl.ntiles = (pl.m + pl.tile - 1) / pl.tile;
        reduce_items(&pl, 0, count / pl.m * pl.ntiles);
    }
    return CN_OK;
}

/* ---- row sums for other kernels ------------------------------------------------------------ *
 * cpu_sum_rows_*: the sums of rows of a dense [count, n] matrix (rows [r0, r0 + rows) here), each
 * the value cpu_reduce's sum over the last dim gives it, bit for bit: one pairwise row sum, or,
 * where cpu_reduce's plan (above) splits the reduced dim across the threads (few long rows), the
 * same chunks' sums combined in chunk order. */

#define DEF_SUM_ROWS(T, SUF)                                                                       \
    typedef struct rows_split_##SUF {                                                              \
        const T *p;                                                                                \
        T part[MAX_SPLIT];                                                                         \
    } rows_split_##SUF;                                                                            \
    static void rows_split_chunk_##SUF(void *ctx, int64_t t, int64_t k0, int64_t k1) {             \
        rows_split_##SUF *s = ctx;                                                                 \
        s->part[t] = sum_row_id_##SUF(s->p + k0, k1 - k0, 1, 0);                                   \
    }                                                                                              \
    void cpu_sum_rows_##SUF(const T *p, int64_t rows, int64_t n, int64_t count, T *out) {          \
        int nt = cpu_threads();                                                                    \
        int parallel = nt > 1 && count * (n > 0 ? n : 1) >= 2 * CPU_PARALLEL_GRAIN;                \
        int64_t tile = pick_tile(count, 1, MAX_TILE, 1, 1, parallel ? nt : 1);                     \
        int64_t items = (count + tile - 1) / tile;                                                 \
        int split = parallel && !(items >= nt || n < 2 * nt);                                      \
        for (int64_t r = 0; r < rows; r++) {                                                       \
            if (!split) {                                                                          \
                out[r] = sum_row_id_##SUF(p + r * n, n, 1, 0);                                     \
                continue;                                                                          \
            }                                                                                      \
            rows_split_##SUF s = {.p = p + r * n};                                                 \
            int used = nt < MAX_SPLIT ? nt : MAX_SPLIT;                                            \
            cpu_parallel(n, used, rows_split_chunk_##SUF, &s);                                     \
            T acc = s.part[0];                                                                     \
            for (int t = 1; t < used; t++) acc = acc + s.part[t];                                  \
            out[r] = acc;                                                                          \
        }                                                                                          \
    }
DEF_SUM_ROWS(float, f32)
DEF_SUM_ROWS(double, f64)
#undef DEF_SUM_ROWS

/* ---- softmax --------------------------------------------------------------------------------- *
 * softmax(x)_i = exp(x_i - max) / sum_j exp(x_j - max); log_softmax(x)_i = (x_i - max) - log(sum).
 * Subtracting the max keeps exp in range for any finite input. A row that holds a NaN, a +inf, or
 * only -inf gives NaN everywhere (x - max is NaN somewhere), as PyTorch does. Rows are contiguous
 * runs of the output; a column item is a tile of w adjacent positions across n rows. */

#define DEF_SOFTMAX(T, SUF, LANES)                                                                 \
    /* max_row of a contiguous row (a NaN beats everything: the first one is returned), compiled   \
     * with its caller's vector width. */                                                          \
    CPU_CLONES_512 static T max_dense_##SUF(const T *restrict x, int64_t n) {                      \
        T m = (T)-INFINITY;                                                                        \
        int bad = 0;                                                                               \
        SIMD_EXTREME(max, m, bad)                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = x[i];                                                                            \
            m = v > m ? v : m;                                                                     \
            bad |= v != v;                                                                         \
        }                                                                                          \
        if (bad)                                                                                   \
            for (int64_t i = 0; i < n; i++)                                                        \
                if (x[i] != x[i]) return x[i];                                                     \
        return m;                                                                                  \
    }                                                                                              \
    /* exp(x - mx) into y, returning the sum; pairwise like sum_row. Contiguous x and y. pf: the   \
     * next row (or NULL), which each block prefetches as far as it reaches into this row, so the  \
     * next row's reads from memory overlap this row's exps instead of stalling its max pass (on   \
     * AVX-512 a line an iteration, into L2; elsewhere the block's lines first, into L1). pend:    \
     * the streamed row whose stores go out beside these exps (expsum_leaf512), or NULL; only     \
     * where the AVX-512 leaf runs (softmax_row_stream_f32).                                       \
     * f32 takes exp_nonpos_f32: where x - mx is NaN (a row holding a NaN or +inf, or only -inf)   \
     * the sum is 0, and the caller's y * (1 / 0) is NaN everywhere, as exp_f32's NaN would be. */ \
    CPU_CLONES_EXP static T expsum_row_##SUF(const T *restrict x, int64_t n, T mx, T *restrict y,  \
                                             const T *pf, exp_pending *pend) {                     \
        if (n > PAIR_BLOCK) {                                                                      \
            int64_t h = (n / 2 + LANES - 1) / LANES * LANES;                                       \
            return expsum_row_##SUF(x, h, mx, y, pf, pend) +                                       \
                   expsum_row_##SUF(x + h, n - h, mx, y + h, pf ? pf + h : NULL, pend);            \
        }                                                                                          \
        /* f32 on AVX-512: the same bits and order of sums, in registers */                        \
        if (CPU_EXP512_##SUF && cpu_has_avx512())                                                  \
            return (T)expsum_leaf512((const float *)x, (float *)y, n, (float)mx,                   \
                                     (const float *)pf, pend);                                     \
        if (CPU_EXP256_##SUF && cpu_has_avx2_fma())                                                \
            return (T)expsum_leaf256((const float *)x, (float *)y, n, (float)mx,                   \
                                     (const float *)pf);                                           \
        if (pf)                                                                                    \
            for (int64_t i = 0; i < n; i += 64 / (int64_t)sizeof(T)) __builtin_prefetch(pf + i);   \
        T acc[LANES] = {0};                                                                        \
        int64_t i = 0;                                                                             \
        for (; i + LANES <= n; i += LANES)                                                         \
            for (int j = 0; j < LANES; j++) {                                                      \
                T e = EXP_NONPOS_##SUF(x[i + j] - mx);                                             \
                y[i + j] = e;                                                                      \
                acc[j] += e;                                                                       \
            }                                                                                      \
        for (int h = LANES / 2; h > 0; h /= 2)                                                     \
            for (int j = 0; j < h; j++) acc[j] += acc[j + h];                                      \
        T s = 0;                                                                                   \
        for (; i < n; i++) {                                                                       \
            y[i] = EXP_NONPOS_##SUF(x[i] - mx);                                                    \
            s += y[i];                                                                             \
        }                                                                                          \
        return acc[0] + s;                                                                         \
    }                                                                                              \
    /* One row: x at stride xs, y at stride ys; next: the next row when x and it are contiguous    \
     * (prefetched), else NULL. */                                                                 \
    CPU_CLONES_EXP                                                                                 \
    static void softmax_row_##SUF(const T *x, int64_t n, int64_t xs, T *y, int64_t ys, int lg,     \
                                  const T *next) {                                                 \
        int dense = xs == 1 && ys == 1;                                                            \
        T mx = xs == 1 ? max_dense_##SUF(x, n) : max_row_##SUF(x, n, xs);                          \
        if (lg) {                                                                                  \
            T ls = (T)log((double)sum_row_ex_##SUF(x, n, xs, mx));                                 \
            if (dense)                                                                             \
                for (int64_t i = 0; i < n; i++) y[i] = (x[i] - mx) - ls;                           \
            else                                                                                   \
                for (int64_t i = 0; i < n; i++) y[i * ys] = (x[i * xs] - mx) - ls;                 \
            return;                                                                                \
        }                                                                                          \
        T s;                                                                                       \
        if (dense) {                                                                               \
            s = expsum_row_##SUF(x, n, mx, y, next, NULL);                                         \
        } else {                                                                                   \
            for (int64_t i = 0; i < n; i++) y[i * ys] = EXP_##SUF(x[i * xs] - mx);                 \
            s = sum_row_id_##SUF(y, n, ys, 0);                                                     \
        }                                                                                          \
        T inv = 1 / s;                                                                             \
        if (dense)                                                                                 \
            for (int64_t i = 0; i < n; i++) y[i] *= inv;                                           \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++) y[i * ys] *= inv;                                      \
    }                                                                                              \
    /* exp(x - mx) of a [n, w] tile into y (row stride ys), summing each column pairwise. */       \
    CPU_CLONES_EXP                                                                                 \
    static void expsum_col_##SUF(const T *x, int64_t n, int64_t xs, int64_t w,                     \
                                 const T *restrict mx, T *y, int64_t ys, T *restrict acc) {        \
        if (n > COL_BLOCK) {                                                                       \
            T tmp[MAX_TILE];                                                                       \
            int64_t h = n / 2;                                                                     \
            expsum_col_##SUF(x, h, xs, w, mx, y, ys, acc);                                         \
            expsum_col_##SUF(x + h * xs, n - h, xs, w, mx, y + h * ys, ys, tmp);                   \
            for (int64_t j = 0; j < w; j++) acc[j] += tmp[j];                                      \
            return;                                                                                \
        }                                                                                          \
        for (int64_t j = 0; j < w; j++) acc[j] = 0;                                                \
        for (int64_t k = 0; k < n; k++) {                                                          \
            const T *restrict xk = x + k * xs;                                                     \
            T *restrict yk = y + k * ys;                                                           \
            for (int64_t j = 0; j < w; j++) {                                                      \
                T e = EXP_##SUF(xk[j] - mx[j]);                                                    \
                yk[j] = e;                                                                         \
                acc[j] += e;                                                                       \
            }                                                                                      \
        }                                                                                          \
    }                                                                                              \
    /* A tile of w adjacent columns: x rows at stride xs (columns contiguous), y rows at ys. */    \
    CPU_CLONES_512                                                                                 \
    static void softmax_col_##SUF(const T *x, int64_t n, int64_t xs, int64_t w, T *y,              \
                                  int64_t ys, int lg) {                                            \
        T mx[MAX_TILE], s[MAX_TILE];                                                               \
        if (w <= 0) return;                                                                        \
        max_col_##SUF(x, n, xs, w, mx);                                                            \
        if (lg) {                                                                                  \
            sum_col_ex_##SUF(x, n, xs, w, mx, s);                                                  \
            for (int64_t j = 0; j < w; j++) s[j] = (T)log((double)s[j]);                           \
            for (int64_t k = 0; k < n; k++) {                                                      \
                const T *restrict xk = x + k * xs;                                                 \
                T *restrict yk = y + k * ys;                                                       \
                for (int64_t j = 0; j < w; j++) yk[j] = (xk[j] - mx[j]) - s[j];                    \
            }                                                                                      \
            return;                                                                                \
        }                                                                                          \
        expsum_col_##SUF(x, n, xs, w, mx, y, ys, s);                                               \
        for (int64_t j = 0; j < w; j++) s[j] = 1 / s[j];                                           \
        for (int64_t k = 0; k < n; k++) {                                                          \
            T *restrict yk = y + k * ys;                                                           \
            for (int64_t j = 0; j < w; j++) yk[j] *= s[j];                                         \
        }                                                                                          \
    }

DEF_SOFTMAX(float, f32, 16)
DEF_SOFTMAX(double, f64, 8)

/* ---- softmax rows with streaming stores ------------------------------------------------------ *
 * A row's output is written twice, exp(x - max) then its product by 1 / sum, so each of its cache
 * lines is read from memory before the first write (a write allocates its line) and written back
 * later: three transfers for two tensors' worth of data. For an output too large to stay in
 * cache, the exps go to a buffer (two per chunk, in L1/L2) and y = exp * (1 / sum) is stored with
 * non-temporal stores, which write whole lines without reading them first. The stores of a row
 * are interleaved with the next row's exps, a line per 16 exps (exp_pending, cpu_math.h), so the
 * writes to memory overlap that computation instead of following it. The values are the same
 * products of the same exps, so the bits do not change. AVX-512 only (the path that
 * exp_clamped512 serves); the caller fences after its rows. */
#if CPU_EXP512
/* Starts a pending row: the elements before y's first 64-byte boundary are stored as usual. */
static void pending_start(exp_pending *p, const float *e, float *y, int64_t n, float inv) {
    int64_t i = 0;
    for (; i < n && ((uintptr_t)(y + i) & 63) != 0; i++) y[i] = e[i] * inv;
    p->e = e + i;
    p->y = y + i;
    p->left = n - i;
    p->inv = inv;
}

/* Stores what is left of a pending row. */
__attribute__((target("avx512f"))) static void pending_flush(exp_pending *p) {
    const __m512 v = _mm512_set1_ps(p->inv);
    int64_t i = 0;
    for (; i + 16 <= p->left; i += 16)
        _mm512_stream_ps(p->y + i, _mm512_mul_ps(_mm512_loadu_ps(p->e + i), v));
    for (; i < p->left; i++) p->y[i] = p->e[i] * p->inv;
    p->left = 0;
}

/* One row into e; its predecessor's stores (p) go out meanwhile, then p holds this row. */
static void softmax_row_stream_f32(const float *x, int64_t n, float *y, const float *next,
                                   float *restrict e, exp_pending *p) {
    float mx = max_dense_f32(x, n);
    float inv = 1 / expsum_row_f32(x, n, mx, e, next, p);
    pending_flush(p);
    pending_start(p, e, y, n, inv);
}

static void stream_fence(void) { _mm_sfence(); }
#else
static void softmax_row_stream_f32(const float *x, int64_t n, float *y, const float *next,
                                   float *e, exp_pending *p) {
    (void)e, (void)p;
    softmax_row_f32(x, n, 1, y, 1, 0, next);
}
static void pending_flush(exp_pending *p) { (void)p; }
static void stream_fence(void) {}
#endif

/* Items of a softmax: item i is tile i % ntiles of walker position i / ntiles, where the walker
 * runs over the outer dims (before dim) then the inner dims but the innermost. */
typedef struct splan {
    int lg, f64;
    int col;         /* tiles are contiguous in the input: column kernel */
    int stream;      /* f32 softmax over dense rows into a large output: softmax_row_stream_f32 */
    int64_t n, rs;   /* softmax dim: size and input stride */
    int64_t inner;   /* output stride of dim = product of the inner sizes */
    walker wk;       /* over outer + inner-but-innermost */
    int64_t m, cs;   /* innermost inner dim: size and input stride (1, 0 when none) */
    int64_t tile, ntiles;
    const char *x;
    char *y;
} splan;

/* The input of item i's first row, the walker being at position q, i / ntiles being q or q + 1. */
static const char *item_x(const splan *pl, const walker *wk, int64_t q, int64_t i, size_t es) {
    int64_t off = wk->off;
    if (i / pl->ntiles > q) {
        walker next = *wk;
        walker_next(&next);
        off = next.off;
    }
    return pl->x + (size_t)(off + (i % pl->ntiles) * pl->tile * pl->cs) * es;
}

static void softmax_items(const splan *pl, int64_t begin, int64_t end) {
    walker wk = pl->wk;
    int64_t q = begin / pl->ntiles;
    walker_seek(&wk, q);
    size_t es = pl->f64 ? sizeof(double) : sizeof(float);
    /* the streamed rows' exps, two rows' worth: the one being computed and the one being stored
     * (without memory for it, the rows take the ordinary path) */
    int64_t ebuf_row = (pl->n + 15) / 16 * 16;
    float *ebuf = pl->stream ? aligned_alloc(64, (size_t)ebuf_row * 2 * sizeof(float)) : NULL;
    exp_pending pend = {NULL, NULL, 0, 0};
    int cur = 0;
    for (int64_t i = begin; i < end; i++) {
        for (; q < i / pl->ntiles; q++) walker_next(&wk);
        int64_t j0 = (i % pl->ntiles) * pl->tile;
        int64_t w = pl->m - j0 < pl->tile ? pl->m - j0 : pl->tile;
        int64_t kept = q * pl->m + j0; /* row-major index over all non-softmax dims */
        const char *xp = pl->x + (size_t)(wk.off + j0 * pl->cs) * es;
        char *yp = pl->y + (size_t)(kept / pl->inner * pl->n * pl->inner + kept % pl->inner) * es;
        if (pl->col) {
            if (pl->f64)
                softmax_col_f64((const double *)xp, pl->n, pl->rs, w, (double *)yp, pl->inner,
                                pl->lg);
            else
                softmax_col_f32((const float *)xp, pl->n, pl->rs, w, (float *)yp, pl->inner,
                                pl->lg);
            continue;
        }
        /* dense rows (softmax over a contiguous last dim): each row prefetches the next one */
        int dense = pl->rs == 1 && pl->inner == 1;
        for (int64_t j = 0; j < w; j++) {
            const char *next = NULL;
            if (dense)
                next = j + 1 < w ? xp + (size_t)((j + 1) * pl->cs) * es
                       : i + 1 < end ? item_x(pl, &wk, q, i + 1, es)
                                     : NULL;
            if (ebuf) {
                softmax_row_stream_f32((const float *)xp + j * pl->cs, pl->n, (float *)yp + j,
                                       (const float *)next, ebuf + cur * ebuf_row, &pend);
                cur ^= 1;
            } else if (pl->f64)
                softmax_row_f64((const double *)xp + j * pl->cs, pl->n, pl->rs,
                                (double *)yp + j, pl->inner, pl->lg, (const double *)next);
            else
                softmax_row_f32((const float *)xp + j * pl->cs, pl->n, pl->rs, (float *)yp + j,
                                pl->inner, pl->lg, (const float *)next);
        }
    }
    if (ebuf) {
        pending_flush(&pend);
        stream_fence(); /* the streamed lines are visible before the chunk is done */
    }
    free(ebuf);
}

static void softmax_chunk(void *ctx, int64_t chunk, int64_t begin, int64_t end) {
    (void)chunk;
    softmax_items(ctx, begin, end);
}

/* in[0]: any strides; ints[0] = dim; out[0]: contiguous, same shape. f32 and f64. */
cn_status cpu_softmax(const cn_kernel_args *a) {
    const cn_view *x = &a->in[0], *y = &a->out[0];
    const char *name = cn_op_name(a->op);
    if (x->dtype != CN_F32 && x->dtype != CN_F64) /* unreachable through the router (dtypes) */
        return cn__kernel_dtype_error("cpu", a->op, x->dtype);
    int dim = a->n_ints > 0 ? (int)a->ints[0] : 0;
    if (x->ndim > 0 && (dim < 0 || dim >= x->ndim))
        return cn_set_error(CN_ERR_INVALID_ARG, name, "dim %d is out of range for %d dims", dim,
                            x->ndim);
    splan pl;
    memset(&pl, 0, sizeof pl);
    pl.lg = a->op == CN_OP_LOG_SOFTMAX;
    pl.f64 = x->dtype == CN_F64;
    pl.n = x->ndim > 0 ? x->shape[dim] : 1;
    pl.rs = x->ndim > 0 ? x->strides[dim] : 0;
    int64_t numel = pl.n;
    dims outer = {0}, inner = {0};
    pl.inner = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d == dim) continue;
        numel *= x->shape[d];
        if (d < dim) {
            dims_push(&outer, x->shape[d], x->strides[d]);
        } else {
            dims_push(&inner, x->shape[d], x->strides[d]);
            pl.inner *= x->shape[d];
        }
    }
    if (numel == 0) return CN_OK;
    dims_pop(&inner, &pl.m, &pl.cs);
    pl.wk.d = outer; /* then the inner dims but the innermost: outer and inner never merge */
    for (int k = 0; k < inner.nd; k++) {
        pl.wk.d.shape[pl.wk.d.nd] = inner.shape[k];
        pl.wk.d.stride[pl.wk.d.nd] = inner.stride[k];
        pl.wk.d.nd++;
    }
    pl.col = pl.m > 1 && pl.cs == 1;
    int nt = cpu_threads();
    int parallel = nt > 1 && numel >= 2 * CPU_PARALLEL_GRAIN;
    int64_t most = MAX_TILE;
    if (pl.col) { /* narrower tiles for long columns, so a tile stays in cache between passes */
        most = SOFTMAX_TILE_BYTES / (pl.n * (int64_t)cn_dtype_size(x->dtype));
        most = most < 16 ? 16 : most > MAX_TILE ? MAX_TILE : most / 16 * 16;
    }
    pl.tile = pick_tile(pl.m, numel / pl.n / pl.m, most, pl.col ? 16 : 1, pl.col ? 16 : 1,
                        parallel ? nt : 1);
    pl.ntiles = (pl.m + pl.tile - 1) / pl.tile;
    pl.x = (const char *)x->data;
    pl.y = (char *)y->data;
    int64_t items = numel / pl.n / pl.m * pl.ntiles;
    pl.stream = CPU_EXP512 && !pl.f64 && !pl.lg && !pl.col && pl.rs == 1 && pl.inner == 1 &&
                pl.n <= SOFTMAX_STREAM_ROW &&
                numel >= SOFTMAX_STREAM_BYTES / (int64_t)sizeof(float) && cpu_has_avx512();

    if (!parallel || items == 1) {
        softmax_items(&pl, 0, items);
        return CN_OK;
    }
    cpu_parallel(items, items < 4 * nt ? items : 4 * nt, softmax_chunk, &pl);
    return CN_OK;
}
