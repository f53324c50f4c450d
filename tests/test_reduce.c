/* Reductions, softmax and log_softmax through the public API, against double-precision reference
 * loops written here over row-major host arrays: every op on every dim of 3-D f32 and f64 tensors
 * (keepdim 0 and 1) and the all-elements forms; transposed, stepped-slice and broadcast inputs;
 * long rows and columns (pairwise sums, tiles, the path that splits one reduction across
 * threads); ints; NaN and infinities; empty dims; scalars; and the errors the router raises. */
#include "harness.h"

#include "backends/cpu/cpu_math.h" /* exp_nonpos_f32 as the baseline build compiles it */

/* ---- reference ------------------------------------------------------------------------------ */

typedef enum rop {
    R_SUM, R_MEAN, R_MAX, R_MIN, R_PROD, R_ARGMAX, R_ARGMIN, R_VAR0, R_VAR1, R_LSE, R_COUNT
} rop;

static const char *rop_name[R_COUNT] = {"sum",    "mean",   "max",  "min",  "prod",
                                        "argmax", "argmin", "var0", "var1", "logsumexp"};

static cn_tensor *apply_dim(rop op, cn_tensor *x, int dim, int keepdim) {
    switch (op) {
    case R_SUM: return cn_sum_dim(x, dim, keepdim);
    case R_MEAN: return cn_mean_dim(x, dim, keepdim);
    case R_MAX: return cn_max_dim(x, dim, keepdim);
    case R_MIN: return cn_min_dim(x, dim, keepdim);
    case R_PROD: return cn_prod_dim(x, dim, keepdim);
    case R_ARGMAX: return cn_argmax_dim(x, dim, keepdim);
    case R_ARGMIN: return cn_argmin_dim(x, dim, keepdim);
    case R_VAR0: return cn_var_dim(x, dim, 0, keepdim);
    case R_VAR1: return cn_var_dim(x, dim, 1, keepdim);
    default: return cn_logsumexp_dim(x, dim, keepdim);
    }
}

static cn_tensor *apply_all(rop op, cn_tensor *x) {
    switch (op) {
    case R_SUM: return cn_sum(x);
    case R_MEAN: return cn_mean(x);
    case R_MAX: return cn_max(x);
    case R_MIN: return cn_min(x);
    case R_PROD: return cn_prod(x);
    case R_ARGMAX: return cn_argmax(x);
    case R_ARGMIN: return cn_argmin(x);
    case R_VAR0: return cn_var(x, 0);
    case R_VAR1: return cn_var(x, 1);
    default: return cn_logsumexp(x);
    }
}

/* op over v[0], v[s], ..., v[(n-1)s], in double, straight from the definitions. NaN is the
 * largest and smallest value (max/min give NaN, argmax/argmin its first index). */
static double ref_1d(rop op, const double *v, int64_t n, int64_t s) {
    double acc;
    int64_t best = 0;
    switch (op) {
    case R_SUM:
    case R_MEAN:
        acc = 0;
        for (int64_t i = 0; i < n; i++) acc += v[i * s];
        return op == R_SUM ? acc : acc / (double)n;
    case R_PROD:
        acc = 1;
        for (int64_t i = 0; i < n; i++) acc *= v[i * s];
        return acc;
    case R_MAX:
    case R_MIN:
    case R_ARGMAX:
    case R_ARGMIN:
        for (int64_t i = 0; i < n; i++) {
            double x = v[i * s], b = v[best * s];
            if (isnan(b)) break;
            if (isnan(x) || ((op == R_MAX || op == R_ARGMAX) ? x > b : x < b)) best = i;
        }
        return op == R_ARGMAX || op == R_ARGMIN ? (double)best : v[best * s];
    case R_VAR0:
    case R_VAR1: {
        int64_t dof = n - (op == R_VAR1);
        if (n == 0 || dof <= 0) return NAN;
        double mean = ref_1d(R_MEAN, v, n, s), ss = 0;
        for (int64_t i = 0; i < n; i++) ss += (v[i * s] - mean) * (v[i * s] - mean);
        return ss / (double)dof;
    }
    default: { /* logsumexp */
        double m = -INFINITY;
        for (int64_t i = 0; i < n; i++) {
            if (isnan(v[i * s])) return NAN;
            if (v[i * s] > m) m = v[i * s];
        }
        if (isinf(m)) return m;
        acc = 0;
        for (int64_t i = 0; i < n; i++) acc += exp(v[i * s] - m);
        return m + log(acc);
    }
    }
}

static int64_t numel_of(const int64_t *shape, int ndim) {
    int64_t n = 1;
    for (int d = 0; d < ndim; d++) n *= shape[d];
    return n;
}

/* Reduces row-major x along dim into out (row-major over the other dims). */
static void ref_reduce(rop op, const double *x, const int64_t *shape, int ndim, int dim,
                       double *out) {
    int64_t outer = numel_of(shape, dim), n = shape[dim];
    int64_t inner = numel_of(shape + dim + 1, ndim - dim - 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++)
            out[o * inner + i] = ref_1d(op, x + o * n * inner + i, n, inner);
}

/* softmax / log_softmax of row-major x along dim, by the formula with the max subtracted. */
static void ref_softmax(const double *x, const int64_t *shape, int ndim, int dim, int lg,
                        double *out) {
    int64_t outer = numel_of(shape, dim), n = shape[dim];
    int64_t inner = numel_of(shape + dim + 1, ndim - dim - 1);
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            const double *v = x + o * n * inner + i;
            double *y = out + o * n * inner + i;
            double m = ref_1d(R_MAX, v, n, inner), s = 0;
            for (int64_t k = 0; k < n; k++) s += exp(v[k * inner] - m);
            for (int64_t k = 0; k < n; k++)
                y[k * inner] = lg ? (v[k * inner] - m) - log(s) : exp(v[k * inner] - m) / s;
        }
}

/* ---- helpers -------------------------------------------------------------------------------- */

static uint64_t rng = 88172645463325252ull;

static double uniform01(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* Values of magnitude in [0.5, 1.5] with random signs (products stay in range), rounded to f32
 * when the tensor will be f32 so the reference sees exactly the stored values. */
static void fill_values(double *v, int64_t n, cn_dtype dt) {
    for (int64_t i = 0; i < n; i++) {
        double x = 0.5 + uniform01();
        if (uniform01() < 0.5) x = -x;
        v[i] = dt == CN_F32 ? (double)(float)x : x;
    }
}

/* The shape argument for 0-d results (never read, but must not be NULL). */
static const int64_t SCALAR[1] = {1};

static double tol_for(cn_dtype dt) { return dt == CN_F32 ? 2e-5 : 1e-10; }

/* Checks shape and values of t against want, then releases t. */
static void expect(const char *what, cn_tensor *t, const int64_t *shape, int ndim,
                   const double *want, double tol) {
    th_check_shape(what, t, shape, ndim);
    th_check_values(what, t, want, numel_of(shape, ndim), tol);
    cn_release(t);
}

/* Every reduction of x (logical row-major values vals) on every dim and over all elements; dims
 * are given as non-negative with keepdim 0 and as negative with keepdim 1. */
static void sweep_reductions(const char *label, cn_tensor *x, const double *vals,
                             const int64_t *shape, int ndim, cn_dtype dt) {
    int64_t n = numel_of(shape, ndim);
    double *want = malloc(sizeof(double) * (size_t)n);
    char what[128];
    for (int op = 0; op < R_COUNT; op++) {
        double tol = op == R_ARGMAX || op == R_ARGMIN ? 0 : tol_for(dt);
        for (int dim = -ndim; dim < ndim; dim++) {
            int d = dim < 0 ? dim + ndim : dim;
            ref_reduce((rop)op, vals, shape, ndim, d, want);
            {
                int keep = dim < 0;
                int64_t oshape[CN_MAX_DIMS];
                int ond = 0;
                for (int k = 0; k < ndim; k++) {
                    if (k != d) oshape[ond++] = shape[k];
                    else if (keep) oshape[ond++] = 1;
                }
                snprintf(what, sizeof what, "%s %s dim %d keepdim %d", label, rop_name[op], dim,
                         keep);
                expect(what, apply_dim((rop)op, x, dim, keep), oshape, ond, want, tol);
            }
        }
        want[0] = ref_1d((rop)op, vals, n, 1);
        snprintf(what, sizeof what, "%s %s (all)", label, rop_name[op]);
        expect(what, apply_all((rop)op, x), SCALAR, 0, want, op == R_SUM ? 1e-4 : tol);
    }
    free(want);
}

static void sweep_softmax(const char *label, cn_tensor *x, const double *vals,
                          const int64_t *shape, int ndim, cn_dtype dt) {
    int64_t n = numel_of(shape, ndim);
    double *want = malloc(sizeof(double) * (size_t)n);
    char what[128];
    for (int lg = 0; lg <= 1; lg++)
        for (int dim = lg ? -ndim : 0; dim < (lg ? 0 : ndim); dim++) { /* log_softmax: dims < 0 */
            ref_softmax(vals, shape, ndim, dim < 0 ? dim + ndim : dim, lg, want);
            snprintf(what, sizeof what, "%s %s dim %d", label, lg ? "log_softmax" : "softmax",
                     dim);
            cn_tensor *t = lg ? cn_log_softmax(x, dim) : cn_softmax(x, dim);
            expect(what, t, shape, ndim, want, dt == CN_F32 ? 5e-6 : 1e-12);
        }
    free(want);
}

/* The logical row-major values of a view of row-major base: element (i0, i1, i2) is at
 * offset + sum(ik * strides[k]). The view's own strides must be the ones computed here. */
static void view_values(const double *base, int64_t offset, const int64_t *strides,
                        const int64_t *shape, int ndim, cn_tensor *view, double *out) {
    CHECK(view && cn_ndim(view) == ndim);
    if (view) CHECK(memcmp(cn_strides(view), strides, sizeof(int64_t) * (size_t)ndim) == 0);
    int64_t n = numel_of(shape, ndim), idx[CN_MAX_DIMS] = {0};
    for (int64_t p = 0; p < n; p++) {
        int64_t rem = p, off = offset;
        for (int d = ndim - 1; d >= 0; d--) {
            idx[d] = rem % shape[d];
            rem /= shape[d];
            off += idx[d] * strides[d];
        }
        out[p] = base[off];
    }
}

/* ---- tests ---------------------------------------------------------------------------------- */

/* [3, 20, 600]: dim 2 is a contiguous row (n = 600, summed pairwise), dim 1 a column over tiles
 * of 512 + 88 outputs, dim 0 a column over the merged [12000]; 36000 elements, so threads share
 * the items. */
static void test_every_reduction_every_dim_f32_f64(void) {
    const int64_t shape[3] = {3, 20, 600};
    int64_t n = numel_of(shape, 3);
    double *v = malloc(sizeof(double) * (size_t)n);
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    for (int k = 0; k < 2; k++) {
        fill_values(v, n, dts[k]);
        cn_tensor *x = th_tensor(v, shape, 3, dts[k]);
        sweep_reductions(dts[k] == CN_F32 ? "f32" : "f64", x, v, shape, 3, dts[k]);
        cn_release(x);
    }
    free(v);
}

static void test_small_shapes(void) {
    /* tiny dims, a dim of size 1, and 1-D */
    const int64_t s1[3] = {3, 1, 5}, s2[1] = {7}, s3[2] = {2, 3};
    const int64_t *shapes[3] = {s1, s2, s3};
    const int nds[3] = {3, 1, 2};
    double v[15];
    for (int k = 0; k < 3; k++) {
        int64_t n = numel_of(shapes[k], nds[k]);
        fill_values(v, n, CN_F64);
        cn_tensor *x = th_tensor(v, shapes[k], nds[k], CN_F64);
        sweep_reductions("small", x, v, shapes[k], nds[k], CN_F64);
        sweep_softmax("small", x, v, shapes[k], nds[k], CN_F64);
        cn_release(x);
    }
}

/* Transposed and stepped-slice views of an [8, 10, 12] tensor. */
static void test_non_contiguous_inputs(void) {
    const int64_t bshape[3] = {8, 10, 12};
    int64_t n = numel_of(bshape, 3);
    double *base = malloc(sizeof(double) * (size_t)n), *vals = malloc(sizeof(double) * (size_t)n);
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    for (int k = 0; k < 2; k++) {
        fill_values(base, n, dts[k]);
        cn_tensor *x = th_tensor(base, bshape, 3, dts[k]);

        /* transpose(0, 2): [12, 10, 8], strides [1, 12, 120] */
        cn_tensor *t = cn_transpose(x, 0, 2);
        const int64_t ts[3] = {12, 10, 8}, tst[3] = {1, 12, 120};
        view_values(base, 0, tst, ts, 3, t, vals);
        sweep_reductions("transposed", t, vals, ts, 3, dts[k]);
        sweep_softmax("transposed", t, vals, ts, 3, dts[k]);
        cn_release(t);

        /* slice dim 1 [1:10:3]: [8, 3, 12], strides [120, 36, 1], offset 12 */
        cn_tensor *s = cn_slice(x, 1, 1, 10, 3);
        const int64_t ss[3] = {8, 3, 12}, sst[3] = {120, 36, 1};
        view_values(base, 12, sst, ss, 3, s, vals);
        sweep_reductions("sliced", s, vals, ss, 3, dts[k]);
        sweep_softmax("sliced", s, vals, ss, 3, dts[k]);
        cn_release(s);

        /* transpose(1, 2) then slice dim 2 [0:10:2]: [8, 12, 5], strides [120, 1, 24] */
        cn_tensor *tt = cn_transpose(x, 1, 2);
        cn_tensor *ts2 = cn_slice(tt, 2, 0, 10, 2);
        const int64_t s3[3] = {8, 12, 5}, st3[3] = {120, 1, 24};
        view_values(base, 0, st3, s3, 3, ts2, vals);
        sweep_reductions("transposed+sliced", ts2, vals, s3, 3, dts[k]);
        sweep_softmax("transposed+sliced", ts2, vals, s3, 3, dts[k]);
        cn_release(ts2);
        cn_release(tt);
        cn_release(x);
    }
    free(base);
    free(vals);
}

/* Stride-0 (expanded) inputs: along the reduced dim and across it. */
static void test_broadcast_inputs(void) {
    double row[7], col[5], vals[35];
    fill_values(row, 7, CN_F64);
    fill_values(col, 5, CN_F64);
    const int64_t rs[2] = {1, 7}, cs[2] = {5, 1}, full[2] = {5, 7};
    cn_tensor *r = th_tensor(row, rs, 2, CN_F64), *c = th_tensor(col, cs, 2, CN_F64);
    cn_tensor *re = cn_expand(r, full, 2), *ce = cn_expand(c, full, 2);
    for (int i = 0; i < 35; i++) vals[i] = row[i % 7];
    sweep_reductions("expanded row", re, vals, full, 2, CN_F64);
    sweep_softmax("expanded row", re, vals, full, 2, CN_F64);
    for (int i = 0; i < 35; i++) vals[i] = col[i / 7];
    sweep_reductions("expanded col", ce, vals, full, 2, CN_F64);
    sweep_softmax("expanded col", ce, vals, full, 2, CN_F64);
    cn_release(re);
    cn_release(ce);
    cn_release(r);
    cn_release(c);
}

/* A million copies of 0.1f sum to within 1e-5 relative, as a row, as columns, and over all
 * elements (one long reduction, which threads split). */
static void test_f32_sum_accuracy(void) {
    const double want1 = 1e6 * (double)0.1f;
    const int64_t flat[1] = {1000000}, cols[2] = {250000, 4}, rows[2] = {4, 250000};
    cn_tensor *x = cn_full(flat, 1, 0.1, CN_F32, cn_cpu());
    cn_tensor *s = cn_sum(x), *m = cn_mean(x);
    double got = 0;
    CHECK(th_read(s, &got) == 1);
    CHECK_NEAR(got, want1, 1e-5);
    CHECK(th_read(m, &got) == 1);
    CHECK_NEAR(got, (double)0.1f, 1e-5);
    cn_release(s);
    cn_release(m);

    cn_tensor *xc = cn_reshape(x, cols, 2), *xr = cn_reshape(x, rows, 2);
    const double want4[4] = {want1 / 4, want1 / 4, want1 / 4, want1 / 4};
    const int64_t four[1] = {4};
    expect("column sums", cn_sum_dim(xc, 0, 0), four, 1, want4, 1e-5);
    expect("row sums", cn_sum_dim(xr, 1, 0), four, 1, want4, 1e-5);
    cn_release(xc);
    cn_release(xr);
    cn_release(x);
}

/* Long reductions against the reference: argmax/argmin of the first of repeated extremes, var
 * of values far from zero (two-pass, no cancellation), logsumexp, in one long row (threads split
 * it) and in narrow columns (threads split those too). */
static void test_long_reductions(void) {
    const int64_t n = 300000;
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (double)(float)(1000.0 + 2.0 * uniform01() - 1.0);
    v[150001] = v[250001] = 1002.0; /* max twice: the first counts */
    v[100000] = v[299999] = 997.0;
    const int64_t flat[1] = {300000}, cols[2] = {100000, 3};
    cn_tensor *x = th_tensor(v, flat, 1, CN_F32);
    const rop ops[5] = {R_ARGMAX, R_ARGMIN, R_VAR1, R_LSE, R_MEAN};
    char what[64];
    for (int k = 0; k < 5; k++) {
        double want = ref_1d(ops[k], v, n, 1);
        snprintf(what, sizeof what, "long %s", rop_name[ops[k]]);
        expect(what, apply_all(ops[k], x), SCALAR, 0, &want, ops[k] == R_VAR1 ? 1e-4 : 1e-5);
    }
    cn_tensor *xc = cn_reshape(x, cols, 2);
    const int64_t three[1] = {3};
    for (int k = 0; k < 5; k++) {
        double want[3];
        ref_reduce(ops[k], v, cols, 2, 0, want);
        snprintf(what, sizeof what, "columns %s", rop_name[ops[k]]);
        expect(what, apply_dim(ops[k], xc, 0, 0), three, 1, want,
               ops[k] == R_VAR1 ? 1e-4 : 1e-5);
    }
    cn_release(xc);
    cn_release(x);

    /* the first NaN is the max and the min; a later NaN in another thread's chunk does not win */
    v[100001] = v[299995] = NAN;
    x = th_tensor(v, flat, 1, CN_F32);
    double want_nan = NAN, want_idx = 100001;
    expect("long max with NaN", cn_max(x), SCALAR, 0, &want_nan, 0);
    expect("long argmax with NaN", cn_argmax(x), SCALAR, 0, &want_idx, 0);
    expect("long argmin with NaN", cn_argmin(x), SCALAR, 0, &want_idx, 0);
    expect("long sum with NaN", cn_sum(x), SCALAR, 0, &want_nan, 0);
    cn_release(x);
    free(v);
}

static void test_int_reductions(void) {
    const int64_t shape[3] = {4, 5, 6};
    double v[120];
    for (int i = 0; i < 120; i++) v[i] = (double)((int)(uniform01() * 7) - 3); /* -3..3: ties */
    const cn_dtype dts[2] = {CN_I32, CN_I64};
    const rop ops[6] = {R_SUM, R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN};
    double want[120];
    char what[96];
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = th_tensor(v, shape, 3, dts[k]);
        for (int o = 0; o < 6; o++) {
            for (int d = 0; d < 3; d++) {
                int64_t os[2] = {d == 0 ? 5 : 4, d == 2 ? 5 : 6};
                ref_reduce(ops[o], v, shape, 3, d, want);
                snprintf(what, sizeof what, "%s %s dim %d", cn_dtype_name(dts[k]),
                         rop_name[ops[o]], d);
                cn_tensor *t = apply_dim(ops[o], x, d, 0);
                CHECK(t && cn_dtype_of(t) == (o >= 4 ? CN_I64 : dts[k]));
                expect(what, t, os, 2, want, 0);
            }
            if (ops[o] == R_PROD) continue; /* 120 factors of up to 3 overflow */
            want[0] = ref_1d(ops[o], v, 120, 1);
            snprintf(what, sizeof what, "%s %s (all)", cn_dtype_name(dts[k]), rop_name[ops[o]]);
            expect(what, apply_all(ops[o], x), SCALAR, 0, want, 0);
        }
        cn_release(x);
    }
}

/* One long integer reduction (threads split it): products, sums, extremes and their first
 * index, with the interesting values spread over the whole range. */
static void test_long_int_reductions(void) {
    const int64_t n = 100000, shape[1] = {100000};
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = 1;
    for (int64_t k = 0; k < 20; k++) v[k * 4999 + 3] = 2;
    v[10] = v[50000] = v[99999] = -1;
    v[70000] = v[80000] = 7;
    const cn_dtype dts[2] = {CN_I32, CN_I64};
    const rop ops[6] = {R_SUM, R_PROD, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN};
    char what[64];
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = th_tensor(v, shape, 1, dts[k]);
        for (int o = 0; o < 6; o++) {
            double want = ref_1d(ops[o], v, n, 1);
            snprintf(what, sizeof what, "long %s %s", cn_dtype_name(dts[k]), rop_name[ops[o]]);
            expect(what, apply_all(ops[o], x), SCALAR, 0, &want, 0);
        }
        cn_release(x);
    }
    free(v);
}

/* Integer sums and products wrap to the dtype, like the dtype's own arithmetic. */
static void test_int_wraparound(void) {
    const double big[3] = {1073741824.0, 1073741824.0, 1073741824.0}; /* 2^30 */
    const int64_t three[1] = {3}, two[1] = {2};
    cn_tensor *x = th_tensor(big, three, 1, CN_I32);
    double want = -1073741824.0; /* 3 * 2^30 - 2^32 */
    expect("i32 sum wraps", cn_sum(x), SCALAR, 0, &want, 0);
    want = 0; /* 2^90 mod 2^32 */
    expect("i32 prod wraps", cn_prod(x), SCALAR, 0, &want, 0);
    cn_release(x);

    const double u[2] = {200, 100};
    cn_tensor *b = th_tensor(u, two, 1, CN_U8);
    want = 44; /* 300 mod 256 */
    expect("u8 sum wraps", cn_sum(b), SCALAR, 0, &want, 0);
    want = 200;
    expect("u8 max", cn_max(b), SCALAR, 0, &want, 0);
    want = 1;
    expect("u8 argmin", cn_argmin(b), SCALAR, 0, &want, 0);
    cn_release(b);

    const int64_t i64s[2] = {INT64_MAX, 2};
    cn_tensor *l = cn_from_data(i64s, two, 1, CN_I64, cn_cpu());
    int64_t got = 0;
    cn_tensor *s = cn_sum(l);
    CHECK(s && cn_read(s, &got, sizeof got) == CN_OK && got == INT64_MIN + 1);
    cn_release(s);
    cn_release(l);
}

static void test_nan_propagation(void) {
    const double row[4] = {1, NAN, 3, NAN};
    const int64_t four[1] = {4};
    const cn_dtype dts[2] = {CN_F32, CN_F64};
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = th_tensor(row, four, 1, dts[k]);
        double nan = NAN, one = 1;
        expect("max NaN", cn_max(x), SCALAR, 0, &nan, 0);
        expect("min NaN", cn_min(x), SCALAR, 0, &nan, 0);
        expect("argmax first NaN", cn_argmax(x), SCALAR, 0, &one, 0);
        expect("argmin first NaN", cn_argmin(x), SCALAR, 0, &one, 0);
        expect("sum NaN", cn_sum(x), SCALAR, 0, &nan, 0);
        expect("logsumexp NaN", cn_logsumexp(x), SCALAR, 0, &nan, 0);
        cn_release(x);

        /* columns: [[1, 2], [NaN, 0], [3, NaN], [NaN, 9]] */
        const double m[8] = {1, 2, NAN, 0, 3, NAN, NAN, 9};
        const int64_t s[2] = {4, 2}, two[1] = {2};
        cn_tensor *c = th_tensor(m, s, 2, dts[k]);
        const double wmax[2] = {NAN, NAN}, warg[2] = {1, 2};
        expect("column max NaN", cn_max_dim(c, 0, 0), two, 1, wmax, 0);
        expect("column argmax NaN", cn_argmax_dim(c, 0, 0), two, 1, warg, 0);
        expect("column argmin NaN", cn_argmin_dim(c, 0, 0), two, 1, warg, 0);
        cn_release(c);
    }
}

static void test_infinities(void) {
    const int64_t two[1] = {2};
    const struct {
        double a, b, lse, max;
        int64_t argmax;
    } cases[] = {
        {-INFINITY, -INFINITY, -INFINITY, -INFINITY, 0},
        {INFINITY, 1, INFINITY, INFINITY, 0},
        {-INFINITY, 0, 0, 0, 1},
        {1000, 1000, 1000 + 0.69314718055994531, 1000, 0},
        {-1000, -1001, -1000 + 0.31326168751822286, -1000, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int k = 0; k < 2; k++) {
            cn_dtype dt = k ? CN_F64 : CN_F32;
            double v[2] = {cases[i].a, cases[i].b}, arg = (double)cases[i].argmax;
            cn_tensor *x = th_tensor(v, two, 1, dt);
            expect("logsumexp inf", cn_logsumexp(x), SCALAR, 0, &cases[i].lse, 1e-6);
            expect("max inf", cn_max(x), SCALAR, 0, &cases[i].max, 0);
            expect("argmax inf", cn_argmax(x), SCALAR, 0, &arg, 0);
            cn_release(x);
        }
}

/* var with correction >= n is NaN (no degrees of freedom); a constant has variance 0. */
static void test_var_edges(void) {
    const double v[3] = {2.5, 2.5, 2.5};
    const int64_t three[1] = {3}, one[1] = {1};
    cn_tensor *x = th_tensor(v, three, 1, CN_F32);
    double zero = 0, nan = NAN;
    expect("var const", cn_var(x, 1), SCALAR, 0, &zero, 0);
    expect("var correction 3 of 3", cn_var(x, 3), SCALAR, 0, &nan, 0);
    expect("var correction 5 of 3", cn_var(x, 5), SCALAR, 0, &nan, 0);
    cn_release(x);
    cn_tensor *y = th_tensor(v, one, 1, CN_F64);
    expect("var of one sample", cn_var(y, 1), SCALAR, 0, &nan, 0);
    expect("var of one, population", cn_var(y, 0), SCALAR, 0, &zero, 0);
    cn_release(y);
}

/* Reducing an empty dim: sum 0, prod 1, mean and var NaN, logsumexp -inf; max has no answer. */
static void test_empty_dims(void) {
    const int64_t s[2] = {3, 0}, three[1] = {3}, zero[1] = {0};
    cn_tensor *x = cn_zeros(s, 2, CN_F32, cn_cpu());
    const double z[3] = {0, 0, 0}, o[3] = {1, 1, 1}, nan[3] = {NAN, NAN, NAN},
                 ninf[3] = {-INFINITY, -INFINITY, -INFINITY};
    expect("sum empty", cn_sum_dim(x, 1, 0), three, 1, z, 0);
    expect("prod empty", cn_prod_dim(x, 1, 0), three, 1, o, 0);
    expect("mean empty", cn_mean_dim(x, 1, 0), three, 1, nan, 0);
    expect("var empty", cn_var_dim(x, 1, 0, 0), three, 1, nan, 0);
    expect("logsumexp empty", cn_logsumexp_dim(x, 1, 0), three, 1, ninf, 0);
    expect("max over a non-empty dim of an empty tensor", cn_max_dim(x, 0, 0), zero, 1, z, 0);
    expect("softmax of an empty tensor", cn_softmax(x, 1), s, 2, z, 0);
    CHECK_FAILS(cn_max_dim(x, 1, 0), CN_ERR_SHAPE, "max");
    CHECK_FAILS(cn_argmin_dim(x, 1, 0), CN_ERR_SHAPE, "argmin");
    CHECK_FAILS(cn_max(x), CN_ERR_SHAPE, "max");
    cn_release(x);
}

static void test_scalars(void) {
    cn_tensor *x = cn_full(SCALAR, 0, 2.5, CN_F64, cn_cpu());
    double v = 2.5, zero = 0, one = 1, nan = NAN;
    expect("sum of scalar", cn_sum(x), SCALAR, 0, &v, 0);
    expect("sum_dim of scalar", cn_sum_dim(x, 0, 1), SCALAR, 0, &v, 0);
    expect("argmax of scalar", cn_argmax(x), SCALAR, 0, &zero, 0);
    expect("var of scalar", cn_var(x, 1), SCALAR, 0, &nan, 0);
    expect("softmax of scalar", cn_softmax(x, 0), SCALAR, 0, &one, 0);
    expect("log_softmax of scalar", cn_log_softmax(x, -1), SCALAR, 0, &zero, 0);
    cn_release(x);
}

/* Softmax over long rows (pairwise exp sums), tall columns (narrow tiles), and large values. */
static void test_softmax_shapes(void) {
    const int64_t shapes[3][2] = {{8, 4096}, {300, 130}, {3000, 20}};
    for (int k = 0; k < 3; k++) {
        int64_t n = shapes[k][0] * shapes[k][1];
        double *v = malloc(sizeof(double) * (size_t)n);
        for (int64_t i = 0; i < n; i++) v[i] = (double)(float)(8.0 * uniform01() - 4.0);
        cn_tensor *x = th_tensor(v, shapes[k], 2, CN_F32);
        sweep_softmax("softmax shapes", x, v, shapes[k], 2, CN_F32);
        cn_release(x);
        free(v);
    }
}

/* Rows of an output of 16 MB and more are written with streaming stores from a buffer of the
 * row's exps (reduce.c, AVX-512): the same bits as the rows through the ordinary path (checked
 * against blocks of 64 rows, each a small softmax of its own), and within 1e-6 of the double
 * reference. Rows of 1000 (not a multiple of 16 floats, so rows start at every alignment), one
 * holding a NaN, one +inf, one only -inf, one -inf beside finite values, one 300 apart. */
static void test_softmax_streamed_rows(void) {
    const int64_t rows = 4200, cols = 1000, n = rows * cols, shape[2] = {rows, cols};
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int64_t i = 0; i < n; i++) v[i] = (double)(float)(16.0 * uniform01() - 8.0);
    v[3 * cols + 5] = NAN;
    v[7 * cols + 999] = INFINITY;
    for (int64_t j = 0; j < cols; j++) v[11 * cols + j] = -INFINITY;
    v[13 * cols + 2] = -INFINITY;
    v[17 * cols + 40] = 300;
    cn_tensor *x = th_tensor(v, shape, 2, CN_F32), *y = cn_softmax(x, 1);
    CHECK(y != NULL);
    const float *yd = y ? cn_data_ptr(y) : NULL;
    int same = yd != NULL;
    for (int64_t r0 = 0; same && r0 < rows; r0 += 64) {
        int64_t r1 = r0 + 64 < rows ? r0 + 64 : rows;
        cn_tensor *part = cn_slice(x, 0, r0, r1, 1), *py = cn_softmax(part, 1);
        const float *pd = py ? cn_data_ptr(py) : NULL;
        same = pd && memcmp(pd, yd + r0 * cols, sizeof(float) * (size_t)((r1 - r0) * cols)) == 0;
        cn_release(py);
        cn_release(part);
    }
    CHECK(same);
    const int64_t checked[8] = {0, 3, 7, 11, 13, 17, 2101, rows - 1}, one[1] = {cols};
    double want[1000];
    for (int k = 0; yd && k < 8; k++) {
        ref_softmax(v + checked[k] * cols, one, 1, 0, 0, want);
        int ok = 1;
        for (int64_t j = 0; j < cols; j++) {
            double g = yd[checked[k] * cols + j], w = want[j];
            ok &= (isnan(g) && isnan(w)) || fabs(g - w) <= 1e-6;
        }
        if (!ok) fprintf(stderr, "streamed softmax: row %lld\n", (long long)checked[k]);
        CHECK(ok);
    }
    cn_release(y);
    cn_release(x);
    free(v);
}

/* The sum the CPU softmax forms over a dense f32 row: halves (the first a multiple of 16) down to
 * 256 elements or fewer, each summed in 16 lanes, the lanes halved (8, 4, 2, 1), then the tail's
 * running sum added; y gets the exps. */
static float dense_expsum(const float *x, int64_t n, float m, float *y) {
    if (n > 256) {
        int64_t h = (n / 2 + 15) / 16 * 16;
        return dense_expsum(x, h, m, y) + dense_expsum(x + h, n - h, m, y + h);
    }
    float acc[16] = {0}, s = 0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++) {
            y[i + j] = exp_nonpos_f32(x[i + j] - m);
            acc[j] += y[i + j];
        }
    for (int h = 8; h > 0; h /= 2)
        for (int j = 0; j < h; j++) acc[j] += acc[j + h];
    for (; i < n; i++) {
        y[i] = exp_nonpos_f32(x[i] - m);
        s += y[i];
    }
    return acc[0] + s;
}

/* Dense f32 rows (the intrinsic leaves on AVX-512 and on AVX2 with FMA, the compiled loop
 * elsewhere) give the bits of the formula computed here in scalar code, baseline x86-64 with
 * glibc's fmaf: the result does not depend on the CPU. Row lengths around the 16-lane vectors
 * and the 256-element blocks; values in [-8, 8] with -inf entries and one 300 above the rest
 * (the others fall below exp's clamp at -104), and a row spread over 115 (results near and in
 * the subnormals, where the AVX2 leaf applies 2^k in two halves). */
static void test_softmax_dense_rows_same_bits_on_every_path(void) {
    const int64_t lens[10] = {1, 15, 16, 17, 255, 256, 257, 1000, 4096, 4099};
    for (int k = 0; k < 10; k++) {
        int64_t n = lens[k], rows = 3, shape[2] = {rows, n};
        float *v = malloc(sizeof(float) * (size_t)(rows * n));
        float *want = malloc(sizeof(float) * (size_t)n);
        /* row 0 spans 115 below its max: exps from 1 down through the subnormals to 0 */
        for (int64_t i = 0; i < rows * n; i++)
            v[i] = i < n ? (float)(115.0 * uniform01() - 110.0) : (float)(16.0 * uniform01() - 8.0);
        if (n > 2) v[n + 1] = -INFINITY, v[2 * n + n / 2] = 300.0f;
        cn_tensor *x = cn_from_data(v, shape, 2, CN_F32, cn_cpu()), *y = cn_softmax(x, 1);
        CHECK(y != NULL);
        const float *yd = y ? cn_data_ptr(y) : NULL;
        int64_t differ = 0;
        for (int64_t r = 0; yd && r < rows; r++) {
            const float *row = v + r * n;
            float m = row[0];
            for (int64_t i = 1; i < n; i++) m = row[i] > m ? row[i] : m;
            float inv = 1 / dense_expsum(row, n, m, want);
            for (int64_t i = 0; i < n; i++) {
                float w = want[i] * inv, g = yd[r * n + i];
                if (memcmp(&w, &g, sizeof w) != 0 && differ++ < 3)
                    fprintf(stderr, "softmax row of %lld: [%lld][%lld] = %a, want %a\n",
                            (long long)n, (long long)r, (long long)i, g, w);
            }
        }
        CHECK(differ == 0);
        cn_release(y);
        cn_release(x);
        free(v);
        free(want);
    }
}

static void test_softmax_large_values(void) {
    const double v[3] = {1000, 1001, 1002};
    const int64_t three[1] = {3};
    double s[3], ls[3];
    ref_softmax(v, three, 1, 0, 0, s);
    ref_softmax(v, three, 1, 0, 1, ls);
    CHECK(fabs(s[0] - 0.09003057317038046) < 1e-15);
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = th_tensor(v, three, 1, k ? CN_F64 : CN_F32);
        expect("softmax of 1000s", cn_softmax(x, 0), three, 1, s, 1e-6);
        expect("log_softmax of 1000s", cn_log_softmax(x, 0), three, 1, ls, 1e-6);
        cn_release(x);
    }
    /* all -inf gives NaN (0/0, as in PyTorch); -inf next to a finite value gives 0 */
    const double ninf[2] = {-INFINITY, -INFINITY}, mixed[2] = {-INFINITY, 3};
    const double nan2[2] = {NAN, NAN}, w[2] = {0, 1}, lw[2] = {-INFINITY, 0};
    const int64_t two[1] = {2};
    cn_tensor *a = th_tensor(ninf, two, 1, CN_F32), *b = th_tensor(mixed, two, 1, CN_F32);
    expect("softmax all -inf", cn_softmax(a, 0), two, 1, nan2, 0);
    expect("log_softmax all -inf", cn_log_softmax(a, 0), two, 1, nan2, 0);
    expect("softmax -inf and 3", cn_softmax(b, 0), two, 1, w, 0);
    expect("log_softmax -inf and 3", cn_log_softmax(b, 0), two, 1, lw, 0);
    cn_release(a);
    cn_release(b);
}

/* Large and infinite values on every layout: the max is subtracted along the reduced dim however
 * it is laid out (rows, columns: dim 0 of a 2-D tensor, transposed and stride-0 inputs), -inf
 * gives 0 (log: -inf) beside a finite value, a slice of -inf only or one holding +inf gives NaN
 * (as PyTorch). The oracle is ref_softmax in double precision on the logical values. */
static void softmax_every_layout(const char *label, const double *vals, int64_t rows,
                                 int64_t cols) {
    const int64_t shape[2] = {rows, cols}, tshape[2] = {cols, rows};
    int64_t n = rows * cols;
    double *tvals = malloc(sizeof(double) * (size_t)n), *ex = malloc(sizeof(double) * (size_t)n);
    const double *orig = vals;
    char what[96];
    double *given = malloc(sizeof(double) * (size_t)n);
    for (int k = 0; k < 2; k++) {
        cn_dtype dt = k ? CN_F64 : CN_F32;
        const char *dn = k ? "f64" : "f32";
        /* the reference sees the values the tensor holds (rounded to f32 for f32) */
        for (int64_t i = 0; i < n; i++) given[i] = k ? orig[i] : (double)(float)orig[i];
        for (int64_t i = 0; i < rows; i++)
            for (int64_t j = 0; j < cols; j++) tvals[j * rows + i] = given[i * cols + j];
        vals = given;
        cn_tensor *x = th_tensor(vals, shape, 2, dt);
        snprintf(what, sizeof what, "%s %s dense", label, dn);
        sweep_softmax(what, x, vals, shape, 2, dt);
        cn_tensor *stored = th_tensor(tvals, tshape, 2, dt), *xt = cn_transpose(stored, 0, 1);
        snprintf(what, sizeof what, "%s %s transposed", label, dn);
        sweep_softmax(what, xt, vals, shape, 2, dt);
        /* each row, and each column, stretched over the whole shape (stride 0) */
        for (int64_t r = 0; r < rows; r++) {
            cn_tensor *row = cn_slice(x, 0, r, r + 1, 1), *e = cn_expand(row, shape, 2);
            for (int64_t i = 0; i < n; i++) ex[i] = vals[r * cols + i % cols];
            snprintf(what, sizeof what, "%s %s row %lld expanded", label, dn, (long long)r);
            sweep_softmax(what, e, ex, shape, 2, dt);
            cn_release(e);
            cn_release(row);
        }
        for (int64_t c = 0; c < cols; c++) {
            cn_tensor *col = cn_slice(x, 1, c, c + 1, 1), *e = cn_expand(col, shape, 2);
            for (int64_t i = 0; i < n; i++) ex[i] = vals[(i / cols) * cols + c];
            snprintf(what, sizeof what, "%s %s col %lld expanded", label, dn, (long long)c);
            sweep_softmax(what, e, ex, shape, 2, dt);
            cn_release(e);
            cn_release(col);
        }
        cn_release(xt);
        cn_release(stored);
        cn_release(x);
    }
    free(given);
    free(ex);
    free(tvals);
}

static void test_softmax_extremes_every_layout(void) {
    /* rows: large and -inf; a row with +inf. columns: large, large negative, -inf beside 5,
     * -inf only, +inf beside finite values */
    const double a[4 * 5] = {
        1000,  -1000, -INFINITY, -INFINITY, 88,
        1002,  -1001, 5,         -INFINITY, INFINITY,
        1001,  -999,  -INFINITY, -INFINITY, 90,
        -1e30, 1e4,   -INFINITY, -INFINITY, -3e4,
    };
    softmax_every_layout("extremes", a, 4, 5);
    /* wide enough for the tiled column paths: 6 x 37, values 1e4 +- 300 (exp overflows
     * without the max subtracted), with -inf and one +inf sprinkled in */
    enum { R = 6, C = 37 };
    double b[R * C];
    for (int i = 0; i < R * C; i++) b[i] = 1e4 + 300 * sin(0.7 * i + 0.3);
    for (int i = 0; i < R * C; i += 11) b[i] = -INFINITY;
    b[R * C / 2] = INFINITY;
    softmax_every_layout("wide extremes", b, R, C);
}

/* Small probabilities keep their relative accuracy (the f32 exp over its whole normal range). */
static void test_softmax_relative_accuracy(void) {
    enum { N = 2000 };
    double v[N], want[N], got[N];
    for (int i = 0; i < N; i++) v[i] = (double)(float)(-87.0 * i / (N - 1)); /* 0 .. -87 */
    const int64_t shape[1] = {N};
    ref_softmax(v, shape, 1, 0, 0, want);
    cn_tensor *x = th_tensor(v, shape, 1, CN_F32), *y = cn_softmax(x, 0);
    CHECK(th_read(y, got) == N);
    double worst = 0;
    for (int i = 0; i < N; i++)
        if (want[i] > 1e-37) {
            double rel = fabs(got[i] - want[i]) / want[i];
            if (rel > worst) worst = rel;
        }
    CHECK(worst < 3e-7); /* measured 1.5e-7 */
    cn_release(y);
    cn_release(x);
}

/* mean of ints, as burn's int_mean: the sum over the count truncated toward zero, in the
 * tensor's dtype; hand-computed. */
static void test_int_mean_truncates_as_burn(void) {
    cn_scope_begin();
    const int64_t s22[2] = {2, 2}, s3[1] = {3}, s0[2] = {0, 3};
    const double v[4] = {1, 2, 3, -4};
    cn_dtype dts[2] = {CN_I32, CN_I64};
    for (int k = 0; k < 2; k++) {
        cn_tensor *x = th_tensor(v, s22, 2, dts[k]);
        cn_tensor *all = cn_mean(x), *d0 = cn_mean_dim(x, 0, 0), *d1 = cn_mean_dim(x, 1, 1);
        CHECK(all && cn_dtype_of(all) == dts[k] && cn_ndim(all) == 0);
        th_check_values("int mean, all (2 / 4)", all, (double[]){0}, 1, 0);
        th_check_values("int mean, dim 0 (4 / 2, -2 / 2)", d0, (double[]){2, -1}, 2, 0);
        th_check_values("int mean, dim 1 (3 / 2, -1 / 2)", d1, (double[]){1, 0}, 2, 0);
        CHECK(d1 && cn_ndim(d1) == 2 && cn_shape(d1)[1] == 1);
    }
    th_check_values("int mean of 7, 8, -9", cn_mean(th_tensor((double[]){7, 8, -9}, s3, 1, CN_I64)),
                    (double[]){2}, 1, 0);
    CHECK_FAILS(cn_mean(th_tensor(v, s0, 2, CN_I32)), CN_ERR_INVALID_ARG, "cast 'x' to a float");
    CHECK_FAILS(cn_mean_dim(th_tensor(v, s22, 2, CN_I32), 2, 0), CN_ERR_INVALID_ARG, "mean");
    cn_scope_end();
}

static void test_errors(void) {
    const int64_t s[3] = {2, 3, 4};
    cn_tensor *x = cn_zeros(s, 3, CN_F32, cn_cpu()), *i = cn_zeros(s, 3, CN_I32, cn_cpu());
    CHECK_FAILS(cn_sum_dim(x, 3, 0), CN_ERR_INVALID_ARG, "sum");
    CHECK_FAILS(cn_argmax_dim(x, -4, 1), CN_ERR_INVALID_ARG, "argmax");
    CHECK_FAILS(cn_softmax(x, 5), CN_ERR_INVALID_ARG, "softmax");
    cn_tensor *bo = cn_zeros(s, 3, CN_BOOL, cn_cpu());
    CHECK_FAILS(cn_mean(bo), CN_ERR_KIND, "mean"); /* ints average as burn's int_mean */
    cn_release(bo);
    CHECK_FAILS(cn_var_dim(i, 0, 1, 0), CN_ERR_KIND, "var");
    CHECK_FAILS(cn_logsumexp(i), CN_ERR_KIND, "logsumexp");
    CHECK_FAILS(cn_softmax(i, 0), CN_ERR_KIND, "softmax");
    CHECK_FAILS(cn_log_softmax(i, 0), CN_ERR_KIND, "log_softmax");
    CHECK_FAILS(cn_var(x, -1), CN_ERR_INVALID_ARG, "var");
    CHECK_FAILS(cn_sum(NULL), CN_ERR_NULL_ARG, "sum");
    /* the CPU kernels take f32 and f64 of the float dtypes; others are named in the error */
    cn_tensor *h = cn_cast(x, CN_F16);
    CHECK_FAILS(cn_sum_dim(h, 1, 0), CN_ERR_DTYPE, "f16");
    CHECK_FAILS(cn_softmax(h, 0), CN_ERR_DTYPE, "softmax");
    cn_release(h);
    cn_release(x);
    cn_release(i);
}

int main(void) {
    RUN(test_every_reduction_every_dim_f32_f64);
    RUN(test_small_shapes);
    RUN(test_non_contiguous_inputs);
    RUN(test_broadcast_inputs);
    RUN(test_f32_sum_accuracy);
    RUN(test_long_reductions);
    RUN(test_int_reductions);
    RUN(test_long_int_reductions);
    RUN(test_int_wraparound);
    RUN(test_nan_propagation);
    RUN(test_infinities);
    RUN(test_var_edges);
    RUN(test_empty_dims);
    RUN(test_scalars);
    RUN(test_softmax_shapes);
    RUN(test_softmax_large_values);
    RUN(test_softmax_streamed_rows);
    RUN(test_softmax_dense_rows_same_bits_on_every_path);
    RUN(test_softmax_extremes_every_layout);
    RUN(test_softmax_relative_accuracy);
    RUN(test_int_mean_truncates_as_burn);
    RUN(test_errors);
    return th_finish();
}
